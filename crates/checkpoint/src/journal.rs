//! The journal: what each checkpoint adds to the store, appended to one file with one
//! `write`, folded into the store's regular form (blobs, manifests, the index) later.
//!
//! A record is `[payload length: u32 LE][CRC-32 of the payload: u32 LE][payload]`; the payload
//! is `[head length: u32 LE][head: JSON][manifest bytes…][blob bytes…]`, the head naming the
//! record's sequence number, its change to the index ([`Op`]) and each manifest's and blob's
//! name and length, in the order their bytes follow. A reader stops at the first record that
//! is short, fails its checksum or does not parse: what a kill (or a full disk) left half
//! written is discarded, never read as a checkpoint, and never an error.

use serde::{Deserialize, Serialize};

use crate::store::{Entry, Index};

/// A change to the index a record carries; replayed in order, the same on every reader.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum Op {
    /// A checkpoint taken: `entry` becomes the newest; the one before it (`prev`, by id)
    /// now counts `changed` files; `added` bytes of blobs were stored.
    Push {
        entry: Entry,
        prev: Option<(String, usize)>,
        added: u64,
    },
    /// A call's end looked at: the newest (`id`) counts `changed` files; `added` bytes of
    /// blobs were stored, `hashes` (named by no checkpoint yet) must be kept until the next.
    After {
        id: String,
        changed: usize,
        added: u64,
        hashes: Vec<String>,
    },
}

impl Op {
    /// Apply to `index`.
    pub(crate) fn apply(self, index: &mut Index) {
        match self {
            Op::Push { entry, prev, added } => {
                if let (Some((id, changed)), Some(first)) = (prev, index.checkpoints.front_mut())
                    && first.id == id
                {
                    first.changed = changed;
                }
                index.blob_bytes += added;
                index.checkpoints.push_front(entry);
                index.after_hashes.clear();
            }
            Op::After {
                id,
                changed,
                added,
                hashes,
            } => {
                if let Some(first) = index.checkpoints.front_mut()
                    && first.id == id
                {
                    first.changed = changed;
                }
                index.blob_bytes += added;
                let had: std::collections::HashSet<String> =
                    index.after_hashes.iter().cloned().collect();
                let mut added: std::collections::HashSet<String> = std::collections::HashSet::new();
                for h in hashes {
                    if !had.contains(&h) && added.insert(h.clone()) {
                        index.after_hashes.push(h);
                    }
                }
            }
        }
    }

    pub(crate) fn is_push(&self) -> bool {
        matches!(self, Op::Push { .. })
    }
}

#[derive(Serialize, Deserialize)]
struct Head {
    seq: u64,
    op: Op,
    #[serde(rename = "m")]
    manifests: Vec<(String, u64)>,
    #[serde(rename = "b")]
    blobs: Vec<(String, u64)>,
}

#[derive(Serialize)]
struct HeadRef<'a> {
    seq: u64,
    op: &'a Op,
    #[serde(rename = "m")]
    manifests: Vec<(String, u64)>,
    #[serde(rename = "b")]
    blobs: Vec<(String, u64)>,
}

/// One record read back.
pub(crate) struct Record {
    pub(crate) seq: u64,
    pub(crate) op: Op,
    /// Manifest file name → bytes.
    pub(crate) manifests: Vec<(String, Vec<u8>)>,
    /// Blob hash → bytes.
    pub(crate) blobs: Vec<(String, Vec<u8>)>,
}

/// One record's bytes.
pub(crate) fn encode(
    seq: u64,
    op: &Op,
    manifests: &[(String, Vec<u8>)],
    blobs: &[(String, Vec<u8>)],
) -> Result<Vec<u8>, serde_json::Error> {
    let head = HeadRef {
        seq,
        op,
        manifests: manifests
            .iter()
            .map(|(n, b)| (n.clone(), b.len() as u64))
            .collect(),
        blobs: blobs
            .iter()
            .map(|(h, b)| (h.clone(), b.len() as u64))
            .collect(),
    };
    let head = serde_json::to_vec(&head)?;
    let body: usize = manifests.iter().chain(blobs).map(|(_, b)| b.len()).sum();
    let payload = 4 + head.len() + body;
    let mut out = Vec::with_capacity(8 + payload);
    out.extend_from_slice(&(payload as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(head.len() as u32).to_le_bytes());
    out.extend_from_slice(&head);
    for (_, b) in manifests.iter().chain(blobs) {
        out.extend_from_slice(b);
    }
    let crc = crc32(&out[8..]);
    out[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

fn u32_at(buf: &[u8], at: usize) -> Option<usize> {
    let b: [u8; 4] = buf.get(at..at + 4)?.try_into().ok()?;
    Some(u32::from_le_bytes(b) as usize)
}

/// The whole records of `buf`, in order, and the length they span: a torn or damaged tail
/// (and whatever follows it) is left out.
pub(crate) fn decode(buf: &[u8]) -> (Vec<Record>, usize) {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(record) = decode_one(buf, at) {
        at = record.1;
        out.push(record.0);
    }
    (out, at)
}

fn decode_one(buf: &[u8], at: usize) -> Option<(Record, usize)> {
    let len = u32_at(buf, at)?;
    let crc = u32_at(buf, at + 4)? as u32;
    let payload = buf.get(at + 8..(at + 8).checked_add(len)?)?;
    if crc32(payload) != crc {
        return None;
    }
    let head_len = u32_at(payload, 0)?;
    let head: Head = serde_json::from_slice(payload.get(4..4usize.checked_add(head_len)?)?).ok()?;
    let mut rest = &payload[4 + head_len..];
    let mut take = |n: u64| -> Option<Vec<u8>> {
        let n = usize::try_from(n).ok()?;
        if n > rest.len() {
            return None;
        }
        let (a, b) = rest.split_at(n);
        rest = b;
        Some(a.to_vec())
    };
    let mut manifests = Vec::with_capacity(head.manifests.len());
    for (name, n) in head.manifests {
        manifests.push((name, take(n)?));
    }
    let mut blobs = Vec::with_capacity(head.blobs.len());
    for (hash, n) in head.blobs {
        blobs.push((hash, take(n)?));
    }
    if !rest.is_empty() {
        return None;
    }
    Some((
        Record {
            seq: head.seq,
            op: head.op,
            manifests,
            blobs,
        },
        at + 8 + len,
    ))
}

/// CRC-32 (IEEE 802.3, the polynomial of zlib and gzip), eight bytes a step.
pub(crate) fn crc32(data: &[u8]) -> u32 {
    const TABLES: [[u32; 256]; 8] = {
        let mut t = [[0u32; 256]; 8];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            t[0][i] = c;
            i += 1;
        }
        let mut i = 0;
        while i < 256 {
            let mut k = 1;
            while k < 8 {
                let prev = t[k - 1][i];
                t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
                k += 1;
            }
            i += 1;
        }
        t
    };
    let mut c = !0u32;
    let mut chunks = data.chunks_exact(8);
    for w in &mut chunks {
        let lo = u32::from_le_bytes([w[0], w[1], w[2], w[3]]) ^ c;
        let hi = u32::from_le_bytes([w[4], w[5], w[6], w[7]]);
        c = TABLES[7][(lo & 0xff) as usize]
            ^ TABLES[6][((lo >> 8) & 0xff) as usize]
            ^ TABLES[5][((lo >> 16) & 0xff) as usize]
            ^ TABLES[4][(lo >> 24) as usize]
            ^ TABLES[3][(hi & 0xff) as usize]
            ^ TABLES[2][((hi >> 8) & 0xff) as usize]
            ^ TABLES[1][((hi >> 16) & 0xff) as usize]
            ^ TABLES[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        c = TABLES[0][((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CallInfo;

    fn push(id: &str) -> Op {
        Op::Push {
            entry: Entry {
                id: id.into(),
                at: "t".into(),
                call: CallInfo {
                    name: "write_file".into(),
                    summary: "f".into(),
                },
                changed: 0,
                skipped: Vec::new(),
                full: false,
                parent: None,
                manifest_bytes: 3,
                hashes: None,
            },
            prev: None,
            added: 5,
        }
    }

    #[test]
    fn crc32_of_the_standard_check_strings() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
    }

    #[test]
    fn a_torn_or_damaged_tail_is_left_out_without_error() {
        let mut buf = Vec::new();
        for (i, id) in ["a", "b", "c"].iter().enumerate() {
            let m = vec![(format!("{id}.json"), b"{}\n".to_vec())];
            let b = vec![(format!("{i:064}"), vec![i as u8; 5])];
            buf.extend(encode(i as u64 + 1, &push(id), &m, &b).unwrap());
        }
        let (all, len) = decode(&buf);
        assert_eq!((all.len(), len), (3, buf.len()));
        assert_eq!(all[2].blobs[0].1, vec![2u8; 5]);
        assert_eq!(all[1].manifests[0], ("b.json".to_owned(), b"{}\n".to_vec()));
        // Cut at every byte of the last record: the two before it are read, nothing else.
        let two = decode_one(&buf, decode_one(&buf, 0).unwrap().1).unwrap().1;
        for cut in two..buf.len() {
            let (r, len) = decode(&buf[..cut]);
            assert_eq!((r.len(), len), (2, two), "cut at {cut}");
            assert_eq!(r[1].seq, 2);
        }
        // A flipped byte in the middle record: it and what follows are left out.
        let mut bad = buf.clone();
        let first = decode_one(&buf, 0).unwrap().1;
        bad[first + 12] ^= 0x40;
        let (r, len) = decode(&bad);
        assert_eq!((r.len(), len), (1, first));
    }
}
