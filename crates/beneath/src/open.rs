//! Opening a relative path beneath a directory descriptor: one `openat2` where the kernel has
//! it, the same rule in user space where it does not.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Set once `openat2` has been found missing (`ENOSYS`), so later calls go straight to the
/// fallback.
pub(crate) static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// How often a lookup that the kernel reports as raced by a rename (`EAGAIN`) is retried.
const RETRIES: usize = 16;

/// What a resolution beneath a directory does with a symlink on the way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Symlinks {
    /// Follow a relative symlink whose target stays beneath the directory; refuse one that
    /// leaves it and every absolute symlink, even one pointing inside (its meaning depends on
    /// where the directory is mounted). cap-std's rule.
    FollowInside,
    /// Refuse every symlink, at any component (`ELOOP` or `ENOTDIR`).
    Refuse,
}

/// Open `rel` beneath `dir` with `flags` (an access mode and flags such as `O_NONBLOCK`,
/// `O_DIRECTORY` or `O_PATH`; never `O_CREAT`: this opens what exists). `O_CLOEXEC` is always
/// added. An empty `rel` (or `.`) opens `dir` itself again.
///
/// The resolution never leaves `dir`, whatever a concurrent process renames meanwhile: `..`
/// above it, an absolute path or a symlink leading out fail with `EXDEV`
/// ([`FsErrorKind::Escape`](crate::FsErrorKind::Escape)); a symlink loop, or more than 40 links
/// followed, with `ELOOP`.
///
/// With the kernel's `openat2` (Linux 5.6) this is one system call,
/// `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` (and `RESOLVE_NO_SYMLINKS` for
/// [`Symlinks::Refuse`]). Where it is missing (`ENOSYS`: an old kernel, gVisor) or filtered
/// (`EPERM` from a container's seccomp profile), a resolution of this crate's own takes its
/// place, one `openat(O_NOFOLLOW)` of a plain name at a time relative to a directory already
/// held. Its contract: the same answers as `openat2`, error number for error number (the
/// 40-link limit, `EXDEV` for escapes, `ENOTDIR`, `ENOENT`), judged by the kernel itself in
/// the repository's `tests/files/kernel_judge.rs`, which runs every path-taking tool on generated
/// trees with `openat2` available and filtered to `ENOSYS` and to `EPERM`. A path too long
/// for one system call (`ENAMETOOLONG`) is opened in two steps, its parent first.
pub fn open_beneath(
    dir: impl AsFd,
    rel: impl AsRef<Path>,
    flags: OFlags,
    symlinks: Symlinks,
) -> io::Result<OwnedFd> {
    open_beneath_fd(dir.as_fd(), rel.as_ref(), flags | OFlags::CLOEXEC, symlinks)
}

fn open_beneath_fd(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    symlinks: Symlinks,
) -> io::Result<OwnedFd> {
    // The directory itself (an empty path) is reopened by the fallback: openat2 refuses "".
    if !rel.as_os_str().is_empty() && !NO_OPENAT2.load(Ordering::Relaxed) {
        let mut resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        if symlinks == Symlinks::Refuse {
            resolve |= ResolveFlags::NO_SYMLINKS;
        }
        for _ in 0..RETRIES {
            match rustix::fs::openat2(dir, rel, flags, Mode::empty(), resolve) {
                Ok(fd) => return Ok(fd),
                // A rename raced the lookup; the kernel asks for a retry.
                Err(Errno::AGAIN) => continue,
                Err(Errno::NAMETOOLONG) => {
                    let (parent, leaf) = open_parent_beneath(dir, rel, symlinks)?;
                    return open_beneath_fd(parent.as_fd(), leaf, flags, symlinks);
                }
                Err(Errno::NOSYS) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                    break;
                }
                // Filtered by a seccomp policy: use the fallback, but try again next time.
                Err(Errno::PERM) => break,
                Err(e) => return Err(e.into()),
            }
        }
    }
    open_fallback(dir, rel, flags, symlinks)
}

/// Open the parent directory of `rel` beneath `dir` (as an `O_PATH` handle) and return it
/// with the last component. For a path one system call cannot take (4,096 bytes with its NUL).
pub fn open_parent_beneath(
    dir: impl AsFd,
    rel: &Path,
    symlinks: Symlinks,
) -> io::Result<(OwnedFd, &Path)> {
    let too_long = || io::Error::from_raw_os_error(libc::ENAMETOOLONG);
    let parent = rel
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or_else(too_long)?;
    let leaf = rel.file_name().map(Path::new).ok_or_else(too_long)?;
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    Ok((open_beneath_fd(dir.as_fd(), parent, flags, symlinks)?, leaf))
}

/// The user-space twin of the `openat2` call.
fn open_fallback(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    symlinks: Symlinks,
) -> io::Result<OwnedFd> {
    if rel.as_os_str().is_empty() {
        return Ok(rustix::fs::openat(dir, ".", flags, Mode::empty())?);
    }
    Resolution::new(dir, flags, symlinks).open(rel)
}

/// One step of a resolution still to be taken.
enum Step {
    /// `..`: back to the directory held before.
    Parent,
    /// A plain name in the directory held.
    Name(OsString),
}

/// The same resolution as `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, in user space:
/// one `openat(O_NOFOLLOW)` of a plain name at a time, each relative to a directory already
/// held, so nothing outside `start` is ever opened whatever is renamed meanwhile. Its answers
/// are the kernel's (a test of the repository judges them by the kernel's own, on generated
/// trees, see `docs/DECISIONS.md`):
///
/// - a `..` above `start`, an absolute path or an absolute symlink: `EXDEV`;
/// - a symlink is followed where the kernel follows it (every component but a last one opened
///   `O_NOFOLLOW`); at most [`MAX_SYMLINKS`](crate::MAX_SYMLINKS) follows, the next one is
///   `ELOOP`, as the kernel's limit of 40;
/// - an escape by `..` after more than 20 follows is `ELOOP`, as the kernel answers it: its
///   fast lookup stops at such a `..` and starts again from the beginning in its slower mode,
///   and the links both passes followed count together against the 40;
/// - a link's target ending in `/` (or `.`, `..`) needs a directory there; an empty target
///   names nothing (`ENOENT`).
///
/// Whether an entry is a symlink is asked of its name in the directory held (`readlinkat` on
/// the name, `EINVAL` for anything else), never of an opened descriptor (`readlinkat(fd, "")`,
/// which gVisor answers differently from Linux).
struct Resolution<'a> {
    start: BorrowedFd<'a>,
    /// The directories below `start` on the way, the current one last.
    held: Vec<OwnedFd>,
    /// What is left to resolve, the next step last.
    todo: Vec<Step>,
    flags: OFlags,
    symlinks: Symlinks,
    follows: usize,
    /// The last component must be a directory (a symlink's target ended in `/`).
    dir_required: bool,
}

impl<'a> Resolution<'a> {
    fn new(start: BorrowedFd<'a>, flags: OFlags, symlinks: Symlinks) -> Self {
        Self {
            start,
            held: Vec::new(),
            todo: Vec::new(),
            flags,
            symlinks,
            follows: 0,
            dir_required: false,
        }
    }

    fn cur(&self) -> BorrowedFd<'_> {
        self.held.last().map_or(self.start, |f| f.as_fd())
    }

    /// Put `path`'s components on the list, before what is left.
    fn push(&mut self, path: &Path) -> io::Result<()> {
        let at_end = self.todo.is_empty();
        let bytes = path.as_os_str().as_bytes();
        if bytes.first() == Some(&b'/') {
            return Err(io::Error::from_raw_os_error(libc::EXDEV));
        }
        let mut steps = Vec::new();
        for part in bytes.split(|b| *b == b'/') {
            match part {
                b"" | b"." => {}
                b".." => steps.push(Step::Parent),
                name => steps.push(Step::Name(OsStr::from_bytes(name).to_owned())),
            }
        }
        if at_end {
            // `x/`, `x/.` and `x/..` name a directory.
            let last = bytes.rsplit(|b| *b == b'/').next().unwrap_or_default();
            self.dir_required |=
                bytes.ends_with(b"/") || last == b"." || last == b".." || bytes.is_empty();
        }
        self.todo.extend(steps.into_iter().rev());
        Ok(())
    }

    fn open(mut self, rel: &Path) -> io::Result<OwnedFd> {
        self.push(rel)?;
        let step_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        while let Some(step) = self.todo.pop() {
            match step {
                Step::Parent => {
                    if self.held.pop().is_none() {
                        return Err(self.escape());
                    }
                }
                Step::Name(name) if !self.todo.is_empty() => {
                    match rustix::fs::openat(
                        self.cur(),
                        name.as_os_str(),
                        step_flags,
                        Mode::empty(),
                    ) {
                        Ok(fd) => self.held.push(fd),
                        Err(e @ (Errno::NOTDIR | Errno::LOOP)) => self.follow(&name, e)?,
                        Err(e) => return Err(e.into()),
                    }
                }
                Step::Name(name) => {
                    if let Some(fd) = self.open_last(&name)? {
                        return Ok(fd);
                    }
                }
            }
        }
        // The path ended on a directory reached by `..`, `.` or a link to one.
        Ok(rustix::fs::openat(
            self.cur(),
            ".",
            self.flags,
            Mode::empty(),
        )?)
    }

    /// Open the last component with the caller's flags; `None` when it was a symlink now
    /// followed (unless the caller asked `O_NOFOLLOW`), its target's steps on the list.
    fn open_last(&mut self, name: &OsStr) -> io::Result<Option<OwnedFd>> {
        let mut flags = self.flags | OFlags::NOFOLLOW;
        if self.dir_required {
            flags |= OFlags::DIRECTORY;
        }
        let nofollow = self.flags.contains(OFlags::NOFOLLOW);
        match rustix::fs::openat(self.cur(), name, flags, Mode::empty()) {
            // `O_PATH | O_NOFOLLOW` opens a symlink itself: see what was opened.
            Ok(fd) if flags.contains(OFlags::PATH) && !nofollow => {
                let st = rustix::fs::fstat(&fd)?;
                if FileType::from_raw_mode(st.st_mode) != FileType::Symlink {
                    return Ok(Some(fd));
                }
                self.follow(name, Errno::LOOP)?;
                Ok(None)
            }
            Ok(fd) => Ok(Some(fd)),
            Err(e @ (Errno::LOOP | Errno::NOTDIR)) if !nofollow => {
                self.follow(name, e)?;
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// `name` in the current directory failed to open with `e` (`ENOTDIR` or `ELOOP`): follow
    /// it if it is a symlink, else fail with `e`.
    fn follow(&mut self, name: &OsStr, e: Errno) -> io::Result<()> {
        let target = match rustix::fs::readlinkat(self.cur(), name, Vec::new()) {
            Ok(target) => target,
            // Not a symlink: the open's own answer.
            Err(Errno::INVAL) => return Err(e.into()),
            Err(other) => return Err(other.into()),
        };
        if self.symlinks == Symlinks::Refuse {
            return Err(Errno::LOOP.into());
        }
        self.follows += 1;
        if self.follows > crate::MAX_SYMLINKS {
            return Err(Errno::LOOP.into());
        }
        let target = target.into_bytes();
        if target.is_empty() {
            return Err(Errno::NOENT.into());
        }
        self.push(Path::new(OsStr::from_bytes(&target)))
    }

    /// The error for a `..` above the start: the kernel's (see the type's docs).
    fn escape(&self) -> io::Error {
        if 2 * self.follows > crate::MAX_SYMLINKS {
            Errno::LOOP.into()
        } else {
            Errno::XDEV.into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FsErrorKind;

    fn tree() -> (tempfile::TempDir, OwnedFd) {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f.txt"), "hi").unwrap();
        std::os::unix::fs::symlink("a", root.join("link")).unwrap();
        std::os::unix::fs::symlink("../..", root.join("a/up")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("abs")).unwrap();
        let fd = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        (t, fd)
    }

    fn kind(r: io::Result<OwnedFd>) -> FsErrorKind {
        FsErrorKind::of(&r.unwrap_err())
    }

    /// Every resolver (kernel and user space) decides the same table.
    #[test]
    fn open_beneath_table_for_every_resolver() {
        let (_t, dir) = tree();
        let d = dir.as_fd();
        let f = OFlags::RDONLY;
        type Resolver = fn(BorrowedFd<'_>, &Path, OFlags, Symlinks) -> io::Result<OwnedFd>;
        let resolvers: [Resolver; 2] = [open_beneath_fd, open_fallback];
        for open in resolvers {
            for s in [Symlinks::Refuse, Symlinks::FollowInside] {
                assert!(open(d, Path::new("a/b/f.txt"), f, s).is_ok());
                assert!(open(d, Path::new(""), f, s).is_ok());
                assert_eq!(
                    kind(open(d, Path::new("a/../.."), f, s)),
                    FsErrorKind::Escape
                );
                assert_eq!(kind(open(d, Path::new("/etc"), f, s)), FsErrorKind::Escape);
                assert_eq!(
                    kind(open(d, Path::new("missing"), f, s)),
                    FsErrorKind::NotFound
                );
            }
            // A symlink staying inside: followed, or refused.
            assert!(open(d, Path::new("link/b/f.txt"), f, Symlinks::FollowInside).is_ok());
            let k = kind(open(d, Path::new("link/b/f.txt"), f, Symlinks::Refuse));
            assert!(
                matches!(k, FsErrorKind::Symlink | FsErrorKind::NotDirectory),
                "{k:?}"
            );
            // Symlinks leading out, or absolute: refused either way.
            for s in [Symlinks::Refuse, Symlinks::FollowInside] {
                for p in ["a/up/x", "abs/passwd"] {
                    let k = kind(open(d, Path::new(p), f, s));
                    assert!(
                        matches!(
                            k,
                            FsErrorKind::Escape | FsErrorKind::Symlink | FsErrorKind::NotDirectory
                        ),
                        "{p} {s:?} {k:?}"
                    );
                }
            }
        }
    }

    /// The fallback gives `openat2`'s error number, path for path and flag for flag: chains of
    /// 40 and 41 links (the kernel's limit), loops, escapes by `..` after 20 and 21 links,
    /// absolute links, trailing `/` in a target, dangling links, a FIFO.
    #[test]
    fn fallback_answers_as_openat2() {
        let (t, dir) = tree();
        let root = t.path();
        let chain = |name: &str, n: usize, last: &str| {
            for i in 0..n {
                let to = if i + 1 == n {
                    last.to_owned()
                } else {
                    format!("{name}{}", i + 1)
                };
                std::os::unix::fs::symlink(to, root.join(format!("{name}{i}"))).unwrap();
            }
        };
        chain("c40_", 40, "a");
        chain("c41_", 41, "a");
        chain("u20_", 20, "../x");
        chain("u21_", 21, "../x");
        chain("s25_", 25, "/etc");
        for (at, to) in [
            ("loop", "loop"),
            ("dangling", "nope"),
            ("slash_file", "a/b/f.txt/"),
            ("slash_dir", "a/"),
            ("dotdot", ".."),
            ("dot", "."),
            ("fifo_link", "fifo"),
        ] {
            std::os::unix::fs::symlink(to, root.join(at)).unwrap();
        }
        rustix::fs::mknodat(&dir, "fifo", FileType::Fifo, Mode::from_raw_mode(0o644), 0).unwrap();
        // The kernel answers a link never read since it was made otherwise (see
        // `tests/files/kernel_judge.rs`, `warm`): read each once, a little later.
        std::thread::sleep(std::time::Duration::from_millis(15));
        for e in std::fs::read_dir(root).unwrap() {
            let _ = std::fs::read_link(e.unwrap().path());
        }
        let d = dir.as_fd();
        let errno = |r: io::Result<OwnedFd>| r.err().map(|e| e.raw_os_error().unwrap_or(-1));
        let mut cases = 0;
        for head in [
            "c40_0",
            "c41_0",
            "u20_0",
            "u21_0",
            "s25_0",
            "loop",
            "dangling",
            "slash_file",
            "slash_dir",
            "dotdot",
            "dot",
            "fifo_link",
            "link",
            "a/up",
            "abs",
            "a",
            "fifo",
        ] {
            for tail in ["", "/b", "/b/f.txt", "/x"] {
                let p = format!("{head}{tail}");
                for flags in [
                    OFlags::PATH,
                    OFlags::PATH | OFlags::NOFOLLOW,
                    OFlags::RDONLY | OFlags::NONBLOCK,
                    OFlags::RDONLY | OFlags::DIRECTORY,
                    OFlags::PATH | OFlags::DIRECTORY,
                ] {
                    for s in [Symlinks::FollowInside, Symlinks::Refuse] {
                        let flags = flags | OFlags::CLOEXEC;
                        let kernel = errno(open_beneath_fd(d, Path::new(&p), flags, s));
                        let ours = errno(open_fallback(d, Path::new(&p), flags, s));
                        assert_eq!(ours, kernel, "{p} {flags:?} {s:?}");
                        cases += 1;
                    }
                }
            }
        }
        assert_eq!(cases, 17 * 4 * 5 * 2);
    }

    #[test]
    fn open_beneath_takes_a_path_longer_than_one_system_call() {
        let t = tempfile::tempdir().unwrap();
        // 17 levels of 240 bytes: over 4,096 bytes in all.
        let seg = "d".repeat(240);
        let mut rel = std::path::PathBuf::new();
        let dir =
            rustix::fs::open(t.path(), OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        // Built one level at a time: the host path is too long for one system call too.
        let mut cur =
            rustix::fs::open(t.path(), OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        for _ in 0..17 {
            rel.push(&seg);
            rustix::fs::mkdirat(&cur, seg.as_str(), Mode::from_raw_mode(0o755)).unwrap();
            cur = rustix::fs::openat(
                &cur,
                seg.as_str(),
                OFlags::PATH | OFlags::DIRECTORY,
                Mode::empty(),
            )
            .unwrap();
        }
        rustix::fs::openat(
            &cur,
            "f",
            OFlags::WRONLY | OFlags::CREATE,
            Mode::from_raw_mode(0o644),
        )
        .unwrap();
        rel.push("f");
        assert!(rel.as_os_str().len() > 4096);
        open_beneath(&dir, &rel, OFlags::RDONLY, Symlinks::Refuse).unwrap();
    }
}
