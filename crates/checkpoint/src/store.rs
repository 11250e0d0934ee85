//! The store: blobs named by the SHA-256 of their content, one manifest per checkpoint, and an
//! index of the checkpoints, newest first. Every file it writes is installed through
//! `confine-atomicwrite`, so a kill leaves the old file or the new one, never a torn one.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{CallInfo, Error, Manifest, Node};

/// One checkpoint as the index keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub(crate) id: String,
    pub(crate) at: String,
    pub(crate) call: CallInfo,
    pub(crate) changed: usize,
    pub(crate) skipped: Vec<String>,
    /// The manifest holds every path (else only what differs from `parent`).
    pub(crate) full: bool,
    pub(crate) parent: Option<String>,
    /// The manifest file's size.
    pub(crate) manifest_bytes: u64,
}

/// The index file: the checkpoints newest first, and the bytes the blobs hold.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Index {
    pub(crate) checkpoints: Vec<Entry>,
    pub(crate) blob_bytes: u64,
}

impl Index {
    pub(crate) fn total_bytes(&self) -> u64 {
        self.blob_bytes
            + self
                .checkpoints
                .iter()
                .map(|e| e.manifest_bytes)
                .sum::<u64>()
    }
}

/// A manifest file: every path (`full`) or what changed since the parent (a removed path as
/// `null`).
#[derive(Debug, Serialize, Deserialize)]
struct ManifestFile {
    entries: BTreeMap<String, Option<Node>>,
}

/// The store's directory, held open.
pub(crate) struct Store {
    dir: Dir,
    lock: File,
}

const INDEX: &str = "index.json";

fn io_err(e: impl Into<io::Error>) -> Error {
    Error::Store(e.into())
}

fn install(dir: &Dir, name: &str, bytes: &[u8]) -> Result<(), Error> {
    confine_atomicwrite::install(dir, name, bytes)
        .map(drop)
        .map_err(|e| Error::Store(io::Error::other(e.code())))
}

impl Store {
    /// Open (creating, mode 0700) the store at `path`.
    pub(crate) fn open(path: &Path) -> Result<Self, Error> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
            .map_err(io_err)?;
        let dir = Dir::open_ambient_dir(path, cap_std::ambient_authority()).map_err(io_err)?;
        for sub in ["blobs", "manifests"] {
            match dir.create_dir(sub) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_err(e)),
            }
        }
        let lock = dir
            .open_with(
                "lock",
                cap_std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true),
            )
            .map_err(io_err)?
            .into_std();
        Ok(Self { dir, lock })
    }

    /// Hold the store for one operation (other servers over the same root wait).
    pub(crate) fn lock(&self) -> Result<Locked<'_>, Error> {
        rustix::fs::flock(&self.lock, rustix::fs::FlockOperation::LockExclusive).map_err(io_err)?;
        Ok(Locked { store: self })
    }
}

/// The store, held.
pub(crate) struct Locked<'s> {
    store: &'s Store,
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.store.lock, rustix::fs::FlockOperation::Unlock);
    }
}

fn blob_path(hash: &str) -> PathBuf {
    Path::new("blobs").join(&hash[..2]).join(&hash[2..])
}

/// The hex SHA-256 of `bytes`.
pub(crate) fn hash_of(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest.iter() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

impl Locked<'_> {
    fn dir(&self) -> &Dir {
        &self.store.dir
    }

    pub(crate) fn index(&self) -> Result<Index, Error> {
        match self.dir().read(INDEX) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| Error::Store(io::Error::new(io::ErrorKind::InvalidData, e))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Index::default()),
            Err(e) => Err(io_err(e)),
        }
    }

    pub(crate) fn write_index(&self, index: &Index) -> Result<(), Error> {
        let bytes = serde_json::to_vec(index).map_err(|e| Error::Store(e.into()))?;
        install(self.dir(), INDEX, &bytes)
    }

    /// Store `bytes` under their hash unless there already; the bytes it added to the store.
    pub(crate) fn put_blob(&self, hash: &str, bytes: &[u8]) -> Result<u64, Error> {
        let path = blob_path(hash);
        if self.dir().symlink_metadata(&path).is_ok() {
            return Ok(0);
        }
        let sub = Path::new("blobs").join(&hash[..2]);
        match self.dir().create_dir(&sub) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err(e)),
        }
        let sub = self.dir().open_dir(&sub).map_err(io_err)?;
        install(&sub, &hash[2..], bytes)?;
        Ok(bytes.len() as u64)
    }

    pub(crate) fn blob(&self, hash: &str) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        self.dir()
            .open(blob_path(hash))
            .map_err(io_err)?
            .into_std()
            .read_to_end(&mut out)
            .map_err(io_err)?;
        Ok(out)
    }

    /// Write the manifest of `id`; its size.
    pub(crate) fn write_manifest(
        &self,
        id: &str,
        entries: BTreeMap<String, Option<Node>>,
    ) -> Result<u64, Error> {
        let bytes =
            serde_json::to_vec(&ManifestFile { entries }).map_err(|e| Error::Store(e.into()))?;
        let dir = self.dir().open_dir("manifests").map_err(io_err)?;
        install(&dir, &format!("{id}.json"), &bytes)?;
        Ok(bytes.len() as u64)
    }

    fn read_manifest(&self, id: &str) -> Result<BTreeMap<String, Option<Node>>, Error> {
        let bytes = self
            .dir()
            .read(Path::new("manifests").join(format!("{id}.json")))
            .map_err(io_err)?;
        let file: ManifestFile = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Store(io::Error::new(io::ErrorKind::InvalidData, e)))?;
        Ok(file.entries)
    }

    /// The full manifest of the checkpoint `id` (its parents applied).
    pub(crate) fn manifest(&self, index: &Index, id: &str) -> Result<Manifest, Error> {
        let mut chain = Vec::new();
        let mut at = Some(id.to_owned());
        while let Some(id) = at {
            let entry = index
                .checkpoints
                .iter()
                .find(|e| e.id == id)
                .ok_or(Error::NotFound)?;
            chain.push(entry.id.clone());
            at = if entry.full {
                None
            } else {
                entry.parent.clone()
            };
            if chain.len() > index.checkpoints.len() {
                return Err(Error::Store(io::Error::other("a manifest chain loops")));
            }
        }
        let mut out = Manifest::new();
        for id in chain.iter().rev() {
            for (path, node) in self.read_manifest(id)? {
                match node {
                    Some(node) => {
                        out.insert(path, node);
                    }
                    None => {
                        out.remove(&path);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Drop the oldest checkpoints while more than `max` are kept or the store holds more
    /// than `max_bytes` (the newest is always kept), then the blobs no manifest refers to.
    pub(crate) fn prune(&self, index: &mut Index, max: usize, max_bytes: u64) -> Result<(), Error> {
        let mut dropped = false;
        while index.checkpoints.len() > 1
            && (index.checkpoints.len() > max || index.total_bytes() > max_bytes)
        {
            let oldest = index.checkpoints.pop().expect("more than one");
            // The next oldest becomes the base of the chain: written whole.
            if let Some(next) = index.checkpoints.last()
                && !next.full
            {
                let mut with_oldest = index.clone();
                with_oldest.checkpoints.push(oldest.clone());
                let whole = self.manifest(&with_oldest, &next.id)?;
                let bytes = self.write_manifest(
                    &next.id,
                    whole.into_iter().map(|(p, n)| (p, Some(n))).collect(),
                )?;
                let next = index.checkpoints.last_mut().expect("present");
                next.full = true;
                next.parent = None;
                next.manifest_bytes = bytes;
            }
            let _ = self
                .dir()
                .remove_file(Path::new("manifests").join(format!("{}.json", oldest.id)));
            dropped = true;
            // Blob bytes are known again only after the sweep below; sweep now when the
            // byte bound is what drives the pruning.
            if index.total_bytes() > max_bytes {
                self.sweep(index)?;
            }
        }
        if dropped {
            self.sweep(index)?;
        }
        Ok(())
    }

    /// Remove the blobs no kept manifest refers to; recount the blob bytes.
    fn sweep(&self, index: &mut Index) -> Result<(), Error> {
        let mut live = HashSet::new();
        for entry in &index.checkpoints {
            for node in self.read_manifest(&entry.id)?.into_values().flatten() {
                if let Some(h) = node.hash {
                    live.insert(h);
                }
            }
        }
        let mut bytes = 0;
        let blobs = self.dir().open_dir("blobs").map_err(io_err)?;
        for sub in blobs.entries().map_err(io_err)? {
            let sub = sub.map_err(io_err)?;
            let prefix = sub.file_name().to_string_lossy().into_owned();
            let Ok(dir) = sub.open_dir() else { continue };
            for blob in dir.entries().map_err(io_err)? {
                let blob = blob.map_err(io_err)?;
                let name = blob.file_name().to_string_lossy().into_owned();
                if live.contains(&format!("{prefix}{name}")) {
                    bytes += blob.metadata().map(|m| m.len()).unwrap_or(0);
                } else {
                    let _ = dir.remove_file(blob.file_name());
                }
            }
        }
        index.blob_bytes = bytes;
        Ok(())
    }
}
