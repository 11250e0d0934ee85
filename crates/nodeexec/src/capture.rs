//! Capped capture of one output stream: keep at most `cap` bytes of text, cut on a character
//! boundary, and drain the rest so the child never blocks on a full pipe.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

/// The default cap of each stream, in bytes.
pub const DEFAULT_OUTPUT_CAP: usize = 32_768;

/// Bytes read from a pipe at a time.
const CHUNK: usize = 16 * 1024;

/// The longest UTF-8 sequence, less one: how far past the cap we keep bytes so that a character
/// straddling the cap is seen whole (and then dropped whole).
const LOOKAHEAD: usize = 3;

/// One captured stream.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Captured {
    /// The text: at most the cap in UTF-8 bytes, never ending in a split character; bytes that
    /// were not UTF-8 are U+FFFD (each replacement counts its 3 bytes against the cap).
    pub text: String,
    /// True when anything the child wrote is missing from `text`.
    pub truncated: bool,
    /// How many bytes the child wrote to the stream in all (drained past the cap).
    pub bytes: u64,
}

/// Read `pipe` to its end, keeping what [`decode`] needs.
pub(crate) async fn read_capped<R: AsyncRead + Unpin>(
    mut pipe: R,
    cap: usize,
) -> io::Result<Captured> {
    let keep = cap.saturating_add(LOOKAHEAD);
    let mut kept = Vec::with_capacity(keep.min(CHUNK));
    let mut total: u64 = 0;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += n as u64;
        let room = keep.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    Ok(decode(&kept, total, cap))
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
    }
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
}
