//! Reading a file's bytes for a scan (`grep`, `read_lines`), bounded in time and memory
//! whatever the file holds or does meanwhile.
//!
//! Rules every scan keeps:
//! - **At most the size the file had when the scan started** is read ([`ScanReader`]): a file
//!   that a concurrent process keeps appending to cannot hold a call, and a file that shrinks
//!   ends where it ends.
//! - **Holes are skipped, not read** (`lseek(SEEK_DATA)` / `SEEK_HOLE`), so a 100 GiB sparse
//!   file made by `truncate` costs what its data costs. A hole reads as *one* NUL byte however
//!   long it is: a hole holds no line end, so line numbers across it are those of the file as
//!   written; the line the hole lies in keeps one NUL where the hole was (the text on either
//!   side is never joined into one word), and a hole within a file's first 8 KiB makes `grep`
//!   call the file binary, as its real bytes (NUL) would. Holes are only looked for in a file
//!   whose allocated blocks are fewer than its size says (`st_blocks`), so a dense file costs
//!   no extra system call. Where the filesystem cannot report holes, the file is read as it is.
//! - **Cancellation is checked before every read** (at most 64 KiB for `read_lines`,
//!   [`SEARCH_READ`] for `grep`, whose searcher works on what each read gives), so a call
//!   notices it within a read, also inside one line of any length. Within one read the regex
//!   engine runs unchecked: a pattern it can only crawl through (some 0.3 MB/s for
//!   `a[ab]{20}[^ab\n]` over random `a`/`b` lines, unoptimized) takes some 50 ms a read.
//! - `grep` alone: a line longer than [`MAX_SEARCHED_LINE`] bytes is searched in its first
//!   1 MiB only; the rest of it up to its line end is read and dropped, never kept
//!   ([`LineCut`]), and counted (`longLinesCut`).

use std::fs::File;
use std::io::{self, Read};

use rustix::fs::{SeekFrom, Stat};
use rustix::io::Errno;
use tokio_util::sync::CancellationToken;

/// The longest line `grep` searches whole, in bytes (without its `\n`): 1 MiB. A longer line is
/// searched in its first 1 MiB.
pub const MAX_SEARCHED_LINE: usize = 1 << 20;

/// The most bytes one read of `grep`'s scan returns: the searcher searches each read's bytes
/// before it reads again, so cancellation is checked at least every this many bytes searched.
pub(crate) const SEARCH_READ: usize = 16 * 1024;

/// The error a scan's read gives once the call is cancelled; the tool turns it into
/// [`crate::Cancelled`].
#[derive(Debug, thiserror::Error)]
#[error("the call was cancelled")]
pub(crate) struct ScanCancelled;

/// Whether an I/O error a scan returned is its cancellation.
pub(crate) fn is_cancelled(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<ScanCancelled>())
}

/// A file read from its start up to the size it had when the scan began, its holes skipped
/// (each read as one NUL byte), cancellation checked before every read. Reads with `pread`, so
/// the file's own offset is never relied on.
pub(crate) struct ScanReader<'c> {
    file: File,
    pos: u64,
    /// The size when the scan began: nothing at or past it is read.
    end: u64,
    /// Where the data segment holding `pos` ends (a hole, or `end`).
    data_end: u64,
    /// Look for holes (the file has fewer blocks than its size needs).
    sparse: bool,
    /// A hole was just skipped: its one NUL byte is due.
    hole_due: bool,
    /// The most one read returns.
    max_read: usize,
    cancel: &'c CancellationToken,
}

impl<'c> ScanReader<'c> {
    /// Scan `file`, whose `fstat` (taken when it was opened) is `st`.
    pub(crate) fn new(file: File, st: &Stat, cancel: &'c CancellationToken) -> Self {
        let end = u64::try_from(st.st_size).unwrap_or(0);
        let blocks = u64::try_from(st.st_blocks).unwrap_or(0);
        let sparse = blocks.saturating_mul(512) < end;
        Self {
            file,
            pos: 0,
            end,
            data_end: if sparse { 0 } else { end },
            sparse,
            hole_due: false,
            max_read: usize::MAX,
            cancel,
        }
    }

    /// Return at most `n` bytes a read, so that a caller that works on what each read gives
    /// (a search) checks cancellation at least every `n` bytes.
    pub(crate) fn max_read(mut self, n: usize) -> Self {
        self.max_read = n.max(1);
        self
    }

    /// Move past the hole (if any) at `pos`: afterwards `pos..data_end` is data, or
    /// `pos == end`.
    fn next_data(&mut self) -> io::Result<()> {
        let data = match rustix::fs::seek(&self.file, SeekFrom::Data(self.pos)) {
            Ok(d) => d,
            // No data at or after `pos`: the rest is a hole.
            Err(Errno::NXIO) => self.end,
            // The filesystem cannot say: read the rest as it is.
            Err(_) => {
                self.sparse = false;
                self.data_end = self.end;
                return Ok(());
            }
        };
        if data > self.pos {
            self.hole_due = true;
            self.pos = data.min(self.end);
        }
        if self.pos >= self.end {
            self.data_end = self.end;
            return Ok(());
        }
        self.data_end = match rustix::fs::seek(&self.file, SeekFrom::Hole(self.pos)) {
            Ok(h) if h > self.pos => h.min(self.end),
            _ => self.end,
        };
        Ok(())
    }
}

impl Read for ScanReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.cancel.is_cancelled() {
            return Err(io::Error::other(ScanCancelled));
        }
        if buf.is_empty() {
            return Ok(0);
        }
        if self.sparse && !self.hole_due && self.pos < self.end && self.pos >= self.data_end {
            self.next_data()?;
        }
        if self.hole_due {
            self.hole_due = false;
            buf[0] = 0;
            return Ok(1);
        }
        if self.pos >= self.end {
            return Ok(0);
        }
        let room = usize::try_from(self.data_end - self.pos).unwrap_or(usize::MAX);
        let want = buf.len().min(room).min(self.max_read);
        let n = loop {
            match rustix::io::pread(&self.file, &mut buf[..want], self.pos) {
                Ok(n) => break n,
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        };
        if n == 0 {
            // The file shrank: it ends here.
            self.end = self.pos;
        }
        self.pos += n as u64;
        Ok(n)
    }
}

/// A reader that passes each line's first [`MAX_SEARCHED_LINE`] bytes and its line end, and
/// drops the rest of a longer line (read, never kept), counting such lines.
pub(crate) struct LineCut<R> {
    inner: R,
    /// Bytes of the current line passed so far.
    in_line: usize,
    /// Dropping the rest of a cut line, up to its `\n`.
    dropping: bool,
    /// Lines cut so far.
    pub(crate) cut: u64,
}

impl<R: Read> LineCut<R> {
    pub(crate) fn new(inner: R) -> Self {
        Self {
            inner,
            in_line: 0,
            dropping: false,
            cut: 0,
        }
    }
}

impl<R: Read> Read for LineCut<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // Bounded: each round reads more of the file, which ends (the inner reader stops at
        // the size the scan began with).
        loop {
            let n = self.inner.read(buf)?;
            if n == 0 {
                return Ok(0);
            }
            let (mut r, mut w) = (0, 0);
            while r < n {
                let newline = buf[r..n].iter().position(|&b| b == b'\n');
                if self.dropping {
                    match newline {
                        Some(i) => {
                            r += i;
                            self.dropping = false;
                        }
                        None => r = n,
                    }
                    continue;
                }
                let room = MAX_SEARCHED_LINE - self.in_line;
                let take = match newline {
                    Some(i) if i <= room => i + 1,
                    _ => (n - r).min(room),
                };
                if take == 0 {
                    // The line is at its limit and goes on.
                    self.dropping = true;
                    self.cut += 1;
                    continue;
                }
                buf.copy_within(r..r + take, w);
                if buf[w + take - 1] == b'\n' {
                    self.in_line = 0;
                } else {
                    self.in_line += take;
                }
                r += take;
                w += take;
            }
            if w > 0 {
                return Ok(w);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `LineCut` over `data` passes (read through a small buffer), and its count.
    fn cut(data: &[u8], chunk: usize) -> (Vec<u8>, u64) {
        let mut r = LineCut::new(data);
        let mut out = Vec::new();
        let mut buf = vec![0u8; chunk];
        loop {
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        (out, r.cut)
    }

    #[test]
    fn line_cut_passes_a_line_at_the_limit_and_cuts_one_byte_more() {
        let at = vec![b'a'; MAX_SEARCHED_LINE];
        let mut over = vec![b'b'; MAX_SEARCHED_LINE + 1];
        for chunk in [7, 4096, 1 << 21] {
            let mut data = at.clone();
            data.push(b'\n');
            data.extend_from_slice(&over);
            data.extend_from_slice(b"\nlast");
            let (out, n) = cut(&data, chunk);
            let mut want = at.clone();
            want.push(b'\n');
            want.extend_from_slice(&over[..MAX_SEARCHED_LINE]);
            want.extend_from_slice(b"\nlast");
            assert_eq!(n, 1, "chunk {chunk}");
            assert!(out == want, "chunk {chunk}");
        }
        // A cut line with no line end, at the end of the input.
        over.extend_from_slice(&[b'c'; 5000]);
        let (out, n) = cut(&over, 4096);
        assert_eq!((out.len(), n), (MAX_SEARCHED_LINE, 1));
        // Short lines pass untouched.
        assert_eq!(cut(b"x\ny\n\nz", 2), (b"x\ny\n\nz".to_vec(), 0));
    }
}
