//! Bounded capture of one output stream, in one of two modes, draining the pipe to its end so
//! the child never blocks on it:
//!
//! * **head only** (the default): keep at most `cap` bytes of text, cut on a character
//!   boundary;
//! * **head and tail** ([`Command::output_tail`](crate::Command::output_tail)): keep the first
//!   `cap` bytes and the last `tail` bytes, and between them a marker naming how many bytes
//!   were left out ([`omitted_marker`]), so both the start and the end of a long output
//!   survive. Memory stays bounded by `cap + tail` (plus a few bytes to see a character
//!   whole) whatever the child writes.
//!
//! A [`Progress`] handle, when given, is told of every chunk read (bytes so far, the last
//! line), so an embedder can report on a run while it goes.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt};

/// The default cap of each stream, in bytes.
pub const DEFAULT_OUTPUT_CAP: usize = 32_768;

/// Bytes read from a pipe at a time.
const CHUNK: usize = 16 * 1024;

/// The longest UTF-8 sequence, less one: how far past the cap we keep bytes so that a character
/// straddling the cap is seen whole (and then dropped whole).
const LOOKAHEAD: usize = 3;

/// The most bytes of a line that [`Progress::last_line`] keeps.
pub const PROGRESS_LINE_BYTES: usize = 200;

/// One captured stream.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Captured {
    /// The text. Head only: at most the cap in UTF-8 bytes, never ending in a split character;
    /// bytes that were not UTF-8 are U+FFFD (each replacement counts its 3 bytes against the
    /// cap). Head and tail: the first cap bytes of the stream (moved back to a character
    /// boundary), the [`omitted_marker`], and the last tail bytes (moved forward to a
    /// character boundary), each part decoded with U+FFFD for bytes that are not UTF-8.
    pub text: String,
    /// True when anything the child wrote is missing from `text`.
    pub truncated: bool,
    /// How many bytes the child wrote to the stream in all (drained past the cap).
    pub bytes: u64,
    /// How many of those bytes are missing from `text` (head-and-tail mode; 0 otherwise).
    pub omitted: u64,
}

/// The line put between the head and the tail: `\n[... 1234 bytes left out ...]\n`.
pub fn omitted_marker(bytes: u64) -> String {
    format!("\n[... {bytes} bytes left out ...]\n")
}

/// Read `pipe` to its end, keeping what [`decode`] needs.
#[cfg(test)]
pub(crate) async fn read_capped<R: AsyncRead + Unpin>(pipe: R, cap: usize) -> io::Result<Captured> {
    let mut capture = Capture::new(cap, 0, None);
    capture.read_from(pipe).await?;
    Ok(capture.finish())
}

/// Decode the kept bytes (the first `cap + 3` of `total`) into at most `cap` bytes of text.
pub(crate) fn decode(kept: &[u8], total: u64, cap: usize) -> Captured {
    let mut text = String::from_utf8_lossy(kept).into_owned();
    // A replacement is never shorter than what it replaces, so any artifact of cutting the raw
    // bytes at `cap + 3` starts at or after `cap` in the text and goes with the truncation.
    let mut truncated = total > kept.len() as u64;
    if text.len() > cap {
        let cut = text.floor_char_boundary(cap);
        text.truncate(cut);
        truncated = true;
    }
    Captured {
        text,
        truncated,
        bytes: total,
        omitted: 0,
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0b1100_0000 == 0b1000_0000
}

/// The state of one stream's capture while its pipe is read: bounded whatever is read.
#[derive(Debug)]
pub(crate) struct Capture {
    cap: usize,
    tail: usize,
    head: Vec<u8>,
    /// Head-and-tail mode: the last bytes read past `head`, at most `tail + LOOKAHEAD`.
    ring: VecDeque<u8>,
    total: u64,
    progress: Option<(Progress, usize)>,
    unread: Option<(Unread, usize)>,
}

impl Capture {
    /// A capture keeping `cap` bytes, and the last `tail` bytes too when `tail > 0`;
    /// `progress` is told of each chunk as stream number `.1` (0 stdout, 1 stderr).
    pub(crate) fn new(cap: usize, tail: usize, progress: Option<(Progress, usize)>) -> Self {
        let keep = cap.saturating_add(LOOKAHEAD);
        Self {
            cap,
            tail,
            head: Vec::with_capacity(keep.min(CHUNK)),
            ring: VecDeque::new(),
            total: 0,
            progress,
            unread: None,
        }
    }

    /// Also hand every chunk to `unread`, as stream `stream` (0 stdout, 1 stderr).
    pub(crate) fn with_unread(mut self, unread: Option<(Unread, usize)>) -> Self {
        self.unread = unread;
        self
    }

    /// Take in one chunk read from the pipe.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        if let Some((progress, stream)) = &self.progress {
            progress.feed(*stream, chunk);
        }
        if let Some((unread, stream)) = &self.unread {
            unread.feed(*stream, chunk);
        }
        let keep = self.cap.saturating_add(LOOKAHEAD);
        let room = keep.saturating_sub(self.head.len());
        let (into_head, rest) = chunk.split_at(chunk.len().min(room));
        self.head.extend_from_slice(into_head);
        if self.tail == 0 || rest.is_empty() {
            return;
        }
        let ring_cap = self.tail.saturating_add(LOOKAHEAD);
        if rest.len() >= ring_cap {
            self.ring.clear();
            self.ring.extend(&rest[rest.len() - ring_cap..]);
        } else {
            let over = (self.ring.len() + rest.len()).saturating_sub(ring_cap);
            self.ring.drain(..over);
            self.ring.extend(rest);
        }
    }

    /// Read `pipe` to its end into this capture. Dropping the future mid-way keeps what was
    /// read so far.
    pub(crate) async fn read_from<R: AsyncRead + Unpin>(&mut self, mut pipe: R) -> io::Result<()> {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) => return Ok(()),
                Ok(n) => self.push(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The text kept so far.
    pub(crate) fn finish(&mut self) -> Captured {
        if self.tail == 0 {
            return decode(&self.head, self.total, self.cap);
        }
        let whole_fits = self.total <= (self.cap as u64).saturating_add(self.tail as u64);
        if whole_fits {
            let mut all = std::mem::take(&mut self.head);
            all.extend(self.ring.drain(..));
            return Captured {
                text: String::from_utf8_lossy(&all).into_owned(),
                truncated: false,
                bytes: self.total,
                omitted: 0,
            };
        }
        // The head: the first `cap` bytes, moved back so no character is split.
        let mut h = self.cap.min(self.head.len());
        while h > 0 && h < self.head.len() && is_continuation(self.head[h]) {
            h -= 1;
        }
        // The tail: the last `tail` bytes, moved forward so no character is split. The ring
        // holds what followed the head's bytes; when it is short, the head's last bytes past
        // `h` come first.
        let ring = self.ring.make_contiguous();
        let mut source = Vec::new();
        let ring: &[u8] = if ring.len() < self.tail.saturating_add(LOOKAHEAD) {
            source.extend_from_slice(&self.head[h..]);
            source.extend_from_slice(ring);
            &source
        } else {
            ring
        };
        let mut s = ring.len().saturating_sub(self.tail);
        while s < ring.len() && is_continuation(ring[s]) {
            s += 1;
        }
        let tail = &ring[s..];
        let omitted = self.total - h as u64 - tail.len() as u64;
        let mut text = String::from_utf8_lossy(&self.head[..h]).into_owned();
        text.push_str(&omitted_marker(omitted));
        text.push_str(&String::from_utf8_lossy(tail));
        Captured {
            text,
            truncated: true,
            bytes: self.total,
            omitted,
        }
    }
}

/// A live view of a run's output while it goes: bytes written so far (both streams) and the
/// last line either stream wrote. Cheap to clone (one shared state); give it to
/// [`Command::progress`](crate::Command::progress) and read it from another task.
#[derive(Clone, Debug, Default)]
pub struct Progress(Arc<ProgressState>);

#[derive(Debug, Default)]
struct ProgressState {
    bytes: AtomicU64,
    lines: Mutex<Lines>,
}

#[derive(Debug, Default)]
struct Lines {
    /// Per stream: the line being written, and the last one finished (each at most
    /// [`PROGRESS_LINE_BYTES`]).
    current: [Vec<u8>; 2],
    done: [Vec<u8>; 2],
    /// The stream written last.
    last: usize,
}

impl Progress {
    /// A fresh view: nothing written yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes written to stdout and stderr so far, together.
    pub fn bytes(&self) -> u64 {
        self.0.bytes.load(Ordering::Relaxed)
    }

    /// The last non-empty line written to the stream written last (the line still being
    /// written if it has text), without its line end, at most [`PROGRESS_LINE_BYTES`] bytes
    /// of it, non-UTF-8 bytes as U+FFFD; empty before any.
    pub fn last_line(&self) -> String {
        let lines = self.0.lines.lock().unwrap_or_else(|e| e.into_inner());
        let i = lines.last;
        let line = if trim(&lines.current[i]).is_empty() {
            &lines.done[i]
        } else {
            &lines.current[i]
        };
        String::from_utf8_lossy(trim(line)).into_owned()
    }

    fn feed(&self, stream: usize, chunk: &[u8]) {
        self.0
            .bytes
            .fetch_add(chunk.len() as u64, Ordering::Relaxed);
        let mut lines = self.0.lines.lock().unwrap_or_else(|e| e.into_inner());
        let lines = &mut *lines;
        lines.last = stream;
        let (current, done) = (&mut lines.current[stream], &mut lines.done[stream]);
        let extend = |line: &mut Vec<u8>, bytes: &[u8]| {
            let room = PROGRESS_LINE_BYTES.saturating_sub(line.len());
            line.extend_from_slice(&bytes[..bytes.len().min(room)]);
        };
        let Some(end) = chunk.iter().rposition(|&b| b == b'\n') else {
            extend(current, chunk);
            return;
        };
        // The last line this chunk finishes, and any non-empty one before it.
        let mut finished = &chunk[..end];
        let mut start_in_chunk = finished.iter().rposition(|&b| b == b'\n');
        loop {
            let from = start_in_chunk.map_or(0, |j| j + 1);
            let line = &finished[from..];
            if start_in_chunk.is_none() {
                extend(current, line);
                if !trim(current).is_empty() {
                    std::mem::swap(done, current);
                }
                break;
            }
            if !trim(line).is_empty() {
                done.clear();
                extend(done, line);
                break;
            }
            finished = &finished[..from - 1];
            start_in_chunk = finished.iter().rposition(|&b| b == b'\n');
        }
        current.clear();
        extend(current, &chunk[end + 1..]);
    }
}

fn trim(line: &[u8]) -> &[u8] {
    line.trim_ascii()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capped(bytes: &[u8], cap: usize) -> Captured {
        let keep = (cap + LOOKAHEAD).min(bytes.len());
        decode(&bytes[..keep], bytes.len() as u64, cap)
    }

    #[test]
    fn decode_under_cap_is_whole() {
        let c = capped("héllo".as_bytes(), 32);
        assert_eq!(c.text, "héllo");
        assert!(!c.truncated);
        assert_eq!(c.bytes, 6);
    }

    #[test]
    fn decode_exactly_cap_is_not_truncated() {
        let s = "a".repeat(10);
        let c = capped(s.as_bytes(), 10);
        assert_eq!(c.text, s);
        assert!(!c.truncated);
    }

    #[test]
    fn decode_cap_plus_one_is_truncated() {
        let s = "a".repeat(11);
        let c = capped(s.as_bytes(), 10);
        assert_eq!(c.text, "a".repeat(10));
        assert!(c.truncated);
        assert_eq!(c.bytes, 11);
    }

    #[test]
    fn decode_never_splits_a_character() {
        for ch in ['é', '€', '😀'] {
            let s: String = std::iter::repeat_n(ch, 50).collect();
            for cap in 0..40 {
                let c = capped(s.as_bytes(), cap);
                assert!(c.text.len() <= cap);
                assert!(cap - c.text.len() < ch.len_utf8(), "{ch} cap {cap}");
                assert!(c.text.chars().all(|x| x == ch));
                assert!(c.truncated);
            }
        }
    }

    #[test]
    fn decode_invalid_bytes_become_replacement_within_cap() {
        let c = capped(b"ab\xffcd", 32);
        assert_eq!(c.text, "ab\u{FFFD}cd");
        assert!(!c.truncated);
        let c = capped(&[0xff; 20], 10);
        assert_eq!(c.text, "\u{FFFD}".repeat(3));
        assert!(c.truncated);
    }

    #[test]
    fn decode_character_cut_by_lookahead_is_dropped() {
        // 9 ASCII bytes then a 4-byte character: kept = 9 + 3 bytes, a partial character.
        let mut s = "a".repeat(9);
        s.push('😀');
        let c = capped(s.as_bytes(), 9);
        assert_eq!(c.text, "a".repeat(9));
        assert!(c.truncated);
    }

    #[tokio::test]
    async fn read_capped_drains_past_the_cap() {
        let data = vec![b'x'; 200_000];
        let c = read_capped(&data[..], 1000).await.unwrap();
        assert_eq!(c.text.len(), 1000);
        assert_eq!(c.bytes, 200_000);
        assert!(c.truncated);
    }

    fn head_tail(bytes: &[u8], cap: usize, tail: usize, chunk: usize) -> Captured {
        let mut c = Capture::new(cap, tail, None);
        for piece in bytes.chunks(chunk.max(1)) {
            c.push(piece);
        }
        assert!(c.head.len() <= cap + LOOKAHEAD && c.ring.len() <= tail + LOOKAHEAD);
        c.finish()
    }

    #[test]
    fn head_tail_whole_when_it_fits_at_n_and_marked_at_n_plus_one() {
        for chunk in [1, 3, 7, 1000] {
            let s: Vec<u8> = (0..30u8).map(|i| b'a' + (i % 26)).collect();
            let c = head_tail(&s[..20], 10, 10, chunk);
            assert_eq!(c.text.as_bytes(), &s[..20]);
            assert!(!c.truncated);
            assert_eq!(c.omitted, 0);
            let c = head_tail(&s[..21], 10, 10, chunk);
            let want = format!(
                "{}{}{}",
                std::str::from_utf8(&s[..10]).unwrap(),
                omitted_marker(1),
                std::str::from_utf8(&s[11..21]).unwrap()
            );
            assert_eq!(c.text, want, "chunk {chunk}");
            assert!(c.truncated);
            assert_eq!((c.bytes, c.omitted), (21, 1));
        }
    }

    #[test]
    fn head_tail_keeps_exactly_the_ends_of_a_long_stream() {
        let data: Vec<u8> = (0..1_000_000u32).map(|i| b'0' + (i % 10) as u8).collect();
        let c = head_tail(&data, 16_384, 16_384, CHUNK);
        let head = std::str::from_utf8(&data[..16_384]).unwrap();
        let tail = std::str::from_utf8(&data[data.len() - 16_384..]).unwrap();
        assert_eq!(
            c.text,
            format!("{head}{}{tail}", omitted_marker(1_000_000 - 32_768))
        );
        assert_eq!(c.omitted, 1_000_000 - 32_768);
    }

    #[test]
    fn head_tail_never_splits_a_character() {
        for ch in ['é', '€', '😀'] {
            let s: String = std::iter::repeat_n(ch, 50).collect();
            for cap in 1..12 {
                for chunk in [1, 5, 64] {
                    let c = head_tail(s.as_bytes(), cap, cap, chunk);
                    let (head, rest) = c.text.split_once("\n[... ").unwrap();
                    let (_, tail) = rest.split_once(" ...]\n").unwrap();
                    assert!(head.len() <= cap && cap - head.len() < ch.len_utf8());
                    assert!(tail.len() <= cap && cap - tail.len() < ch.len_utf8());
                    assert!(head.chars().chain(tail.chars()).all(|x| x == ch));
                    let kept = (head.len() + tail.len()) as u64;
                    assert_eq!(c.omitted, s.len() as u64 - kept);
                }
            }
        }
    }

    #[test]
    fn progress_counts_bytes_and_finds_the_last_line() {
        let p = Progress::new();
        let mut out = Capture::new(8, 8, Some((p.clone(), 0)));
        let mut err = Capture::new(8, 0, Some((p.clone(), 1)));
        assert_eq!(p.last_line(), "");
        out.push(b"running 3 tests\ntest a ... ");
        assert_eq!(p.last_line(), "test a ...");
        out.push(b"ok\n\n\n");
        assert_eq!(p.last_line(), "test a ... ok");
        err.push(b"warning: x\r\npartial");
        assert_eq!(p.last_line(), "partial");
        out.push(b"one\ntwo\n\n");
        assert_eq!(p.last_line(), "two");
        out.push(&[b'x'; 1000]);
        assert_eq!(p.last_line().len(), PROGRESS_LINE_BYTES);
        assert_eq!(p.bytes(), 27 + 5 + 19 + 9 + 1000);
    }
}

/// The output of a run not read yet, for a reader that comes back to it now and then (a job
/// an agent started in the background): per stream, at most `cap` unread bytes, the oldest
/// going first when more arrive, never splitting a UTF-8 character, with an exact count of
/// the bytes that went unread. Cheap to clone (one shared state); give it to
/// [`Command::unread`](crate::Command::unread), then [`take`](Unread::take) from another task
/// and wait for more with [`subscribe`](Unread::subscribe). Memory stays at most `cap` bytes
/// per stream (plus up to 3 held back of a character still being written), whatever the run
/// prints.
#[derive(Clone, Debug)]
pub struct Unread(Arc<UnreadState>);

#[derive(Debug)]
struct UnreadState {
    cap: usize,
    streams: Mutex<[UnreadRing; 2]>,
    /// Counts the chunks taken in, so a reader can wait for the next.
    pushed: tokio::sync::watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct UnreadRing {
    bytes: VecDeque<u8>,
    /// Bytes that went out unread since the last [`Unread::take`].
    dropped: u64,
    /// Bytes taken in since the start.
    total: u64,
}

/// What [`Unread::take`] hands over: the text written since the previous take, and how many
/// bytes were written meanwhile but went unread (the oldest, over the cap).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnreadOutput {
    /// stdout since the previous take (bytes that were not UTF-8 as U+FFFD).
    pub stdout: String,
    /// stderr since the previous take.
    pub stderr: String,
    /// Bytes of stdout written since the previous take that went unread.
    pub stdout_dropped: u64,
    /// Bytes of stderr written since the previous take that went unread.
    pub stderr_dropped: u64,
}

impl Unread {
    /// An empty view keeping at most `cap` unread bytes per stream (at least 4: one character).
    pub fn new(cap: usize) -> Self {
        Self(Arc::new(UnreadState {
            cap: cap.max(4),
            streams: Mutex::default(),
            pushed: tokio::sync::watch::Sender::new(0),
        }))
    }

    /// The most unread bytes kept per stream.
    pub fn cap(&self) -> usize {
        self.0.cap
    }

    /// A receiver that sees each later chunk (`changed()` resolves once one came in); taken
    /// before looking, it misses none.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.pushed.subscribe()
    }

    /// How many bytes of stream `stream` (0 stdout, 1 stderr) were taken in since the start,
    /// read or not.
    pub fn total(&self, stream: usize) -> u64 {
        let streams = self.0.streams.lock().unwrap_or_else(|e| e.into_inner());
        streams.get(stream).map_or(0, |r| r.total)
    }

    /// Whether either stream holds bytes a [`take`](Unread::take) would hand over (or
    /// unread bytes were dropped since the last).
    pub fn has_news(&self) -> bool {
        let streams = self.0.streams.lock().unwrap_or_else(|e| e.into_inner());
        streams
            .iter()
            .any(|r| r.dropped > 0 || complete_prefix(r.bytes.as_slices(), false) > 0)
    }

    /// Hand over what was written since the previous take. A character still being written
    /// (its first bytes in, its last not yet) stays for the next take, unless `all` (the run
    /// is over: nothing more will come).
    pub fn take(&self, all: bool) -> UnreadOutput {
        let mut streams = self.0.streams.lock().unwrap_or_else(|e| e.into_inner());
        let take = |ring: &mut UnreadRing| {
            let n = complete_prefix(ring.bytes.as_slices(), all);
            let bytes: Vec<u8> = ring.bytes.drain(..n).collect();
            let dropped = std::mem::take(&mut ring.dropped);
            (String::from_utf8_lossy(&bytes).into_owned(), dropped)
        };
        let (stdout, stdout_dropped) = take(&mut streams[0]);
        let (stderr, stderr_dropped) = take(&mut streams[1]);
        UnreadOutput {
            stdout,
            stderr,
            stdout_dropped,
            stderr_dropped,
        }
    }

    /// Take in a chunk of stream `stream` (0 stdout, 1 stderr).
    fn feed(&self, stream: usize, chunk: &[u8]) {
        {
            let mut streams = self.0.streams.lock().unwrap_or_else(|e| e.into_inner());
            let ring = &mut streams[stream];
            ring.total += chunk.len() as u64;
            let cap = self.0.cap;
            let chunk = if chunk.len() > cap {
                // Only the last `cap` bytes can survive: the rest goes at once.
                let skip = chunk.len() - cap;
                ring.dropped += (ring.bytes.len() + skip) as u64;
                ring.bytes.clear();
                &chunk[skip..]
            } else {
                chunk
            };
            let over = (ring.bytes.len() + chunk.len()).saturating_sub(cap);
            ring.bytes.drain(..over);
            ring.dropped += over as u64;
            ring.bytes.extend(chunk);
            if over > 0 || ring.dropped > 0 {
                // The oldest bytes left are the middle of a character: they go too.
                while ring.bytes.front().is_some_and(|&b| is_continuation(b)) {
                    ring.bytes.pop_front();
                    ring.dropped += 1;
                }
            }
        }
        self.0.pushed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// How many of the bytes (`slices`, a ring's two halves) can be handed over without splitting
/// a character: all of them when `all`, else all but a trailing incomplete UTF-8 sequence.
fn complete_prefix((a, b): (&[u8], &[u8]), all: bool) -> usize {
    let len = a.len() + b.len();
    if all || len == 0 {
        return len;
    }
    let at = |i: usize| if i < a.len() { a[i] } else { b[i - a.len()] };
    // The last lead byte among the last four, and whether its sequence is complete.
    for back in 1..=4.min(len) {
        let i = len - back;
        let byte = at(i);
        if is_continuation(byte) {
            continue;
        }
        let need = match byte {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if back < need { i } else { len };
    }
    len
}

#[cfg(test)]
mod unread_tests {
    use super::Unread;

    #[test]
    fn keeps_exactly_the_cap_unread_and_counts_what_went() {
        let u = Unread::new(8);
        u.feed(0, b"12345678");
        let got = u.take(false);
        assert_eq!((got.stdout.as_str(), got.stdout_dropped), ("12345678", 0));
        u.feed(0, b"123456789");
        let got = u.take(false);
        assert_eq!((got.stdout.as_str(), got.stdout_dropped), ("23456789", 1));
        // Counted since the previous take only.
        u.feed(0, b"ab");
        let got = u.take(false);
        assert_eq!((got.stdout.as_str(), got.stdout_dropped), ("ab", 0));
        // Many small chunks, and one chunk far over the cap.
        for _ in 0..10 {
            u.feed(1, b"xyz");
        }
        u.feed(1, &[b'q'; 100]);
        let got = u.take(false);
        assert_eq!(got.stderr, "q".repeat(8));
        assert_eq!(got.stderr_dropped, 30 + 92);
        assert_eq!(u.take(false), super::UnreadOutput::default());
        // Every byte taken in is counted, read, dropped or not.
        assert_eq!((u.total(0), u.total(1)), (17 + 2, 30 + 100));
    }

    #[test]
    fn never_splits_a_character() {
        // "é" is two bytes: dropping the oldest byte of one drops the whole character.
        let u = Unread::new(5);
        u.feed(0, "aé€".as_bytes()); // 1 + 2 + 3 = 6 bytes: `a` goes, then `é` is whole
        let got = u.take(false);
        assert_eq!((got.stdout.as_str(), got.stdout_dropped), ("é€", 1));
        u.feed(0, "€€".as_bytes()); // 6 bytes over a cap of 5: the first `€` goes whole
        let got = u.take(false);
        assert_eq!((got.stdout.as_str(), got.stdout_dropped), ("€", 3));
        // A character still being written stays for the next take, unless the run is over.
        let euro = "€".as_bytes();
        u.feed(0, &[b'x', euro[0], euro[1]]);
        assert_eq!(u.take(false).stdout, "x");
        assert!(!u.has_news());
        u.feed(0, &euro[2..]);
        assert!(u.has_news());
        assert_eq!(u.take(false).stdout, "€");
        u.feed(0, &euro[..1]);
        assert_eq!(u.take(true).stdout, "\u{FFFD}");
    }

    #[tokio::test]
    async fn a_subscriber_sees_the_next_chunk() {
        let u = Unread::new(64);
        let mut rx = u.subscribe();
        let writer = u.clone();
        tokio::spawn(async move { writer.feed(0, b"late") });
        tokio::time::timeout(std::time::Duration::from_secs(10), rx.changed())
            .await
            .expect("woken")
            .unwrap();
        assert_eq!(u.take(false).stdout, "late");
    }
}
