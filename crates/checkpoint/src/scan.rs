//! The stat walk: what the workspace holds now, read beneath the root's descriptor, hashing
//! only what differs from what was known.

use std::io::{self, Read};
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::sync::Arc;

use confine_beneath::{EntryKind, Symlinks, WalkDir};
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fs::{AtFlags, FileType, OFlags, Stat};

use crate::store::{Locked, hash_of};
use crate::{Error, Exclude, Kind, MAX_FILE_BYTES, Manifest, Node};

/// The deepest directory a walk enters; deeper ones are listed in `skipped`.
const MAX_DEPTH: usize = 512;
/// The largest `.gitignore` read.
const MAX_GITIGNORE_BYTES: u64 = 1 << 20;

/// What a walk is told.
pub(crate) struct Scan<'a> {
    pub(crate) root: BorrowedFd<'a>,
    pub(crate) exclude: &'a dyn Exclude,
    pub(crate) include_ignored: bool,
    /// What was known of each path: a node equal in kind, size, times, inode and mode keeps
    /// its hash without being read.
    pub(crate) known: &'a Manifest,
    /// Where blobs go; `None` hashes without storing (a dry run, a diff).
    pub(crate) store: Option<&'a Locked<'a>>,
}

/// The shallowest directories whose subdirectories are walked in parallel (rayon's pool);
/// deeper ones are walked on the thread that reached them, which bounds the nesting.
const PARALLEL_DEPTH: usize = 6;

/// What a walk gathers, in the order it found it.
#[derive(Default)]
struct Acc {
    nodes: Vec<(String, Node)>,
    skipped: Vec<String>,
    added_bytes: u64,
}

impl Acc {
    fn merge(&mut self, mut other: Acc) {
        if self.nodes.is_empty() {
            std::mem::swap(&mut self.nodes, &mut other.nodes);
        } else {
            self.nodes.append(&mut other.nodes);
        }
        self.skipped.append(&mut other.skipped);
        self.added_bytes += other.added_bytes;
    }

    fn found(self) -> Found {
        Found {
            // Depth first, each directory sorted: nearly in order, and sorted in one pass.
            nodes: self.nodes.into_iter().collect(),
            skipped: self.skipped,
            added_bytes: self.added_bytes,
            whole: false,
        }
    }
}

/// What a walk found.
#[derive(Default)]
pub(crate) struct Found {
    pub(crate) nodes: Manifest,
    pub(crate) skipped: Vec<String>,
    pub(crate) added_bytes: u64,
    /// The path leads through a symlink: what it changes is found only by a whole walk.
    pub(crate) whole: bool,
}

/// True for the project's own temporaries, which no walk shows.
pub(crate) fn is_temporary(name: &str) -> bool {
    name.starts_with(".pify-node-")
        || name.starts_with(".pify-run-")
        || (name.starts_with('.') && name.contains(".pify-tmp-"))
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}/{name}")
    }
}

/// The `.gitignore` matchers in force, the deepest last.
#[derive(Clone, Default)]
struct Ignores(Vec<Arc<Gitignore>>);

impl Ignores {
    fn push_from(&mut self, dir_path: &str, file: std::fs::File) {
        let mut text = String::new();
        if file
            .take(MAX_GITIGNORE_BYTES)
            .read_to_string(&mut text)
            .is_err()
        {
            return;
        }
        let mut builder = GitignoreBuilder::new(dir_path);
        for line in text.lines() {
            let _ = builder.add_line(None, line);
        }
        if let Ok(gi) = builder.build()
            && !gi.is_empty()
        {
            self.0.push(Arc::new(gi));
        }
    }

    fn is_ignored(&self, path: &str, is_dir: bool) -> bool {
        for gi in self.0.iter().rev() {
            match gi.matched(path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }

    /// The `.gitignore` files of the root and of every directory above `path`.
    fn above(root: BorrowedFd<'_>, path: &str) -> Self {
        let mut out = Self::default();
        let mut prefix = String::new();
        let segments: Vec<&str> = path.split('/').collect();
        for (i, seg) in std::iter::once("")
            .chain(segments.iter().copied())
            .enumerate()
        {
            if i == segments.len() {
                break;
            }
            if !seg.is_empty() {
                prefix = join(&prefix, seg);
            }
            let file = join(&prefix, ".gitignore");
            let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
            let Ok(fd) = confine_beneath::open_beneath(root, &file, flags, Symlinks::Refuse) else {
                continue;
            };
            let file = std::fs::File::from(fd);
            if file.metadata().is_ok_and(|m| m.is_file()) {
                out.push_from(&prefix, file);
            }
        }
        out
    }
}

/// Whether a path is left out of every checkpoint: a `.git` anywhere, a temporary, or what
/// the embedder excludes (denied and protected paths).
fn left_out(exclude: &dyn Exclude, path: &str, name: &str) -> bool {
    name == ".git" || is_temporary(name) || exclude.excluded(path)
}

/// A node from an `lstat`, without its content.
pub(crate) fn node_of(st: &Stat) -> Option<Node> {
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Symlink,
        _ => return None,
    };
    #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
    Some(Node {
        kind,
        mode: st.st_mode as u32 & 0o7777,
        size: if kind == Kind::Dir {
            0
        } else {
            st.st_size as u64
        },
        mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
        ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
        ino: u64::from(st.st_ino),
        hash: None,
        target: None,
    })
}

impl Scan<'_> {
    /// Walk the whole tree.
    pub(crate) fn all(&self) -> Result<Found, Error> {
        let mut acc = Acc::default();
        let mut root = WalkDir::open_beneath(self.root, "", Symlinks::Refuse).map_err(Error::Io)?;
        let mut ignores = Ignores::default();
        self.walk(&mut root, "", &mut ignores, 0, &mut acc)?;
        Ok(acc.found())
    }

    /// What stands at `path` now, and beneath it when it is a directory. A path beneath a
    /// symlink or a non-directory is absent (it can hold nothing).
    pub(crate) fn at(&self, path: &str) -> Result<Found, Error> {
        let mut found = Found::default();
        let (parent, name) = match path.rsplit_once('/') {
            Some((p, n)) => (p, n),
            None => ("", path),
        };
        for seg in path.split('/') {
            if seg == ".git" || is_temporary(seg) {
                return Ok(found);
            }
        }
        if self.exclude.excluded(path) {
            return Ok(found);
        }
        let mut ignores = Ignores::above(self.root, path);
        if !self.include_ignored {
            // An ancestor ignored hides everything beneath it.
            let mut prefix = String::new();
            for seg in parent.split('/').filter(|s| !s.is_empty()) {
                prefix = join(&prefix, seg);
                if ignores.is_ignored(&prefix, true) {
                    return Ok(found);
                }
            }
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOCTTY;
        let dir = match confine_beneath::open_beneath(self.root, parent, flags, Symlinks::Refuse) {
            Ok(fd) => WalkDir::from_fd(fd).map_err(Error::Io)?,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::EXDEV)) => {
                found.whole = true;
                return Ok(found);
            }
            Err(e) if is_absent(&e) => return Ok(found),
            Err(e) => return Err(Error::Io(e)),
        };
        let st = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(rustix::io::Errno::NOENT) => return Ok(found),
            Err(e) => return Err(Error::Io(e.into())),
        };
        let Some(node) = node_of(&st) else {
            return Ok(found);
        };
        if !self.include_ignored && ignores.is_ignored(path, node.kind == Kind::Dir) {
            return Ok(found);
        }
        let depth = path.split('/').count();
        let mut acc = Acc::default();
        self.entry(&dir, path, name, node, &mut ignores, depth, &mut acc)?;
        Ok(acc.found())
    }

    fn walk(
        &self,
        dir: &mut WalkDir,
        path: &str,
        ignores: &mut Ignores,
        depth: usize,
        found: &mut Acc,
    ) -> Result<(), Error> {
        let mut entries = dir.read_entries().map_err(Error::Io)?;
        entries.sort_by(|a, b| a.name().cmp(b.name()));
        let level = ignores.0.len();
        if !self.include_ignored
            && let Some(e) = entries.iter().find(|e| e.name() == ".gitignore")
            && e.kind() == EntryKind::File
            && let Ok(Some((file, _))) = dir.open_file(e)
        {
            ignores.push_from(path, file);
        }
        // Subdirectories to walk in parallel once this directory's other entries are done.
        let parallel = depth < PARALLEL_DEPTH && rayon::current_num_threads() > 1;
        let mut subdirs = Vec::new();
        for e in &entries {
            let Some(name) = e.name_str() else {
                continue;
            };
            if confine_pathgrammar::normalize(name).is_err() {
                continue;
            }
            let child = join(path, name);
            if left_out(self.exclude, &child, name) {
                continue;
            }
            if !self.include_ignored && ignores.is_ignored(&child, e.kind() == EntryKind::Directory)
            {
                continue;
            }
            let st = match dir.stat_at(e.name()) {
                Ok(st) => st,
                Err(e) if is_absent(&e) => continue,
                Err(e) => return Err(Error::Io(e)),
            };
            let Some(node) = node_of(&st) else { continue };
            if parallel && node.kind == Kind::Dir {
                if let Some(sub) = self.enter(dir, &child, name, &node, depth + 1, found)? {
                    found.nodes.push((child, node));
                    subdirs.push(sub);
                }
                continue;
            }
            self.entry(dir, &child, name, node, ignores, depth + 1, found)?;
        }
        if !subdirs.is_empty() {
            use rayon::prelude::*;
            let ignores: &Ignores = ignores;
            let walked: Vec<Result<Acc, Error>> = subdirs
                .into_par_iter()
                .map(|(mut sub, child)| {
                    let mut acc = Acc::default();
                    let mut ignores = ignores.clone();
                    self.walk(&mut sub, &child, &mut ignores, depth + 1, &mut acc)?;
                    Ok(acc)
                })
                .collect();
            for acc in walked {
                found.merge(acc?);
            }
        }
        ignores.0.truncate(level);
        Ok(())
    }

    /// Open the directory `name` of `dir` to walk it: `None` when it is too deep (listed in
    /// `skipped`), cannot be opened, or is no longer the directory `node` saw.
    fn enter(
        &self,
        dir: &WalkDir,
        path: &str,
        name: &str,
        node: &Node,
        depth: usize,
        found: &mut Acc,
    ) -> Result<Option<(WalkDir, String)>, Error> {
        if depth > MAX_DEPTH {
            found.skipped.push(path.to_owned());
            return Ok(None);
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::NOCTTY;
        let fd = match rustix::fs::openat(
            dir,
            name,
            flags | OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(e) => {
                let e: io::Error = e.into();
                if !is_absent(&e) {
                    found.skipped.push(path.to_owned());
                }
                return Ok(None);
            }
        };
        let sub = WalkDir::from_fd(fd).map_err(Error::Io)?;
        if sub.id().ino != node.ino {
            // Swapped since the lstat: what stands there now is left for the next walk.
            return Ok(None);
        }
        Ok(Some((sub, path.to_owned())))
    }

    #[allow(clippy::too_many_arguments)]
    fn entry(
        &self,
        dir: &WalkDir,
        path: &str,
        name: &str,
        mut node: Node,
        ignores: &mut Ignores,
        depth: usize,
        found: &mut Acc,
    ) -> Result<(), Error> {
        match node.kind {
            Kind::Dir => {
                let Some((mut sub, _)) = self.enter(dir, path, name, &node, depth, found)? else {
                    return Ok(());
                };
                found.nodes.push((path.to_owned(), node));
                self.walk(&mut sub, path, ignores, depth, found)?;
            }
            Kind::Symlink => {
                let target = match rustix::fs::readlinkat(dir, name, Vec::new()) {
                    Ok(t) => t,
                    // No longer a link (EINVAL), or gone: left for the next walk.
                    Err(rustix::io::Errno::INVAL) => return Ok(()),
                    Err(e) => {
                        let e: io::Error = e.into();
                        if is_absent(&e) {
                            return Ok(());
                        }
                        return Err(Error::Io(e));
                    }
                };
                let Ok(target) = target.into_string() else {
                    found.skipped.push(path.to_owned());
                    return Ok(());
                };
                node.target = Some(target);
                found.nodes.push((path.to_owned(), node));
            }
            Kind::File => {
                if let Some(known) = self.known.get(path)
                    && known.same_stat(&node)
                    && known.hash.is_some()
                {
                    node.hash.clone_from(&known.hash);
                    found.nodes.push((path.to_owned(), node));
                    return Ok(());
                }
                if node.size > MAX_FILE_BYTES {
                    found.skipped.push(path.to_owned());
                    found.nodes.push((path.to_owned(), node));
                    return Ok(());
                }
                let flags = OFlags::RDONLY
                    | OFlags::NOFOLLOW
                    | OFlags::NONBLOCK
                    | OFlags::CLOEXEC
                    | OFlags::NOCTTY;
                let fd = match rustix::fs::openat(dir, name, flags, rustix::fs::Mode::empty()) {
                    Ok(fd) => fd,
                    Err(e) => {
                        let e: io::Error = e.into();
                        if !is_absent(&e) {
                            // Unreadable (its mode): listed, kept as it was known.
                            found.skipped.push(path.to_owned());
                            found.nodes.push((path.to_owned(), node));
                        }
                        return Ok(());
                    }
                };
                let st = rustix::fs::fstat(&fd).map_err(|e| Error::Io(e.into()))?;
                let Some(now) = node_of(&st) else {
                    return Ok(());
                };
                if now.kind != Kind::File || now.ino != node.ino {
                    return Ok(());
                }
                let file = std::fs::File::from(fd);
                let mut bytes = Vec::with_capacity(now.size as usize);
                (&file)
                    .take(MAX_FILE_BYTES + 1)
                    .read_to_end(&mut bytes)
                    .map_err(Error::Io)?;
                if bytes.len() as u64 > MAX_FILE_BYTES {
                    found.skipped.push(path.to_owned());
                    found.nodes.push((path.to_owned(), node));
                    return Ok(());
                }
                let hash = hash_of(&bytes);
                if let Some(store) = self.store {
                    found.added_bytes += store.put_blob(&hash, &bytes)?;
                }
                // The content goes with the stat only if nothing changed while it was read.
                let after = rustix::fs::fstat(&file).ok().and_then(|st| node_of(&st));
                node = match after {
                    Some(a) if a.same_stat(&now) && a.size == bytes.len() as u64 => now,
                    _ => {
                        // Changed while read: kept with a time no later stat equals, so the
                        // next walk reads it again.
                        let mut n = now;
                        n.mtime = (i64::MIN, 0);
                        n.size = bytes.len() as u64;
                        n
                    }
                };
                node.hash = Some(hash);
                found.nodes.push((path.to_owned(), node));
            }
        }
        Ok(())
    }
}

/// An error that means the entry is not there (any more) or cannot hold entries.
pub(crate) fn is_absent(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::ENXIO)
    )
}

/// Read a file's current content beneath the root, when it is a regular file of at most
/// `max` bytes.
pub(crate) fn read_now(root: BorrowedFd<'_>, path: &str, max: u64) -> Option<Vec<u8>> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
    let fd = confine_beneath::open_beneath(root, Path::new(path), flags, Symlinks::Refuse).ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || st.st_size as u64 > max {
        return None;
    }
    let mut out = Vec::new();
    std::fs::File::from(fd)
        .take(max)
        .read_to_end(&mut out)
        .ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;
    use crate::ExcludeNothing;

    /// A tree deeper than the parallel levels, with `.gitignore` files at several depths, a
    /// symlink and an empty directory.
    fn tree(root: &Path) {
        let w = |p: &str, s: &str| {
            let p = root.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        w(".gitignore", "*.log\n");
        for i in 0..6 {
            let mut dir = format!("t{i}");
            for depth in 0..(PARALLEL_DEPTH + 3) {
                w(&format!("{dir}/f{depth}.txt"), &format!("{i} {depth}"));
                w(&format!("{dir}/x.log"), "ignored");
                if depth == 3 {
                    w(&format!("{dir}/.gitignore"), "skip/\n!keep.log\n");
                    w(&format!("{dir}/skip/a"), "ignored");
                    w(&format!("{dir}/keep.log"), "kept");
                }
                dir = format!("{dir}/d{depth}");
            }
            std::fs::create_dir_all(root.join(format!("t{i}/empty"))).unwrap();
            std::os::unix::fs::symlink("../t0", root.join(format!("t{i}/link"))).unwrap();
        }
    }

    fn walk(root: &Path, threads: usize) -> (Vec<(String, Node)>, Vec<String>) {
        let dir = std::fs::File::open(root).unwrap();
        let known = Manifest::new();
        let scan = Scan {
            root: dir.as_fd(),
            exclude: &ExcludeNothing,
            include_ignored: false,
            known: &known,
            store: None,
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let found = pool.install(|| scan.all()).unwrap();
        let mut skipped = found.skipped;
        skipped.sort();
        (found.nodes.into_iter().collect(), skipped)
    }

    #[test]
    fn the_parallel_walk_finds_what_the_walk_on_one_thread_finds() {
        let ws = tempfile::tempdir().unwrap();
        tree(ws.path());
        let one = walk(ws.path(), 1);
        assert_eq!(walk(ws.path(), 4), one);
        let paths: Vec<&str> = one.0.iter().map(|(p, _)| p.as_str()).collect();
        assert!(
            paths.contains(&"t5/d0/d1/d2/d3/d4/d5/d6/f7.txt"),
            "{paths:?}"
        );
        assert!(paths.contains(&"t2/d0/d1/d2/keep.log"), "{paths:?}");
        assert!(paths.contains(&"t1/empty") && paths.contains(&"t1/link"));
        assert!(
            !paths
                .iter()
                .any(|p| p.ends_with("x.log") || p.contains("skip"))
        );
        assert_eq!(paths.len(), 6 * (2 * (PARALLEL_DEPTH + 3) + 4) + 1);
    }
}
