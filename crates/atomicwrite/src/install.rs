//! The installation itself (steps 1 to 7 of the crate docs).

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::path::Path;

use cap_std::fs::Dir;
use confine_beneath::{FileId, FsErrorKind, Temporary, remove_if_same};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Error, ErrorKind};
use crate::hooks::{Hooks, NoHooks, Step};
use crate::temp_name::{is_plain_name, temp_name};

/// The mode a new file gets (an existing target's permission bits are kept instead).
pub const DEFAULT_MODE: u32 = 0o644;

/// How many fresh names are tried when a temporary's name is already taken.
const CREATE_ATTEMPTS: usize = 16;

/// What an installation put in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Installed {
    /// The identity of the file now named by the target.
    pub id: FileId,
    /// Its permission bits.
    pub mode: u32,
    /// The bytes written.
    pub len: usize,
}

/// Install `bytes` as the file `name` directly inside `dir`, atomically: a reader sees the old
/// content or the new, never a mix, and a crash leaves one of the two (see the crate docs for
/// the steps).
pub fn install(dir: &Dir, name: impl AsRef<Path>, bytes: &[u8]) -> Result<Installed, Error> {
    install_with(dir, name, bytes, &mut NoHooks)
}

/// [`install`] with [`Hooks`] called before every [`Step`].
pub fn install_with(
    dir: &Dir,
    name: impl AsRef<Path>,
    bytes: &[u8],
    hooks: &mut dyn Hooks,
) -> Result<Installed, Error> {
    let name = name.as_ref().as_os_str();
    if !is_plain_name(name) {
        return Err(Error::new(
            ErrorKind::InvalidName,
            Step::InspectTarget,
            None,
        ));
    }

    // 0. What is there now: a symlink or a non-regular file is refused before any temporary.
    hook(hooks, Step::InspectTarget, None)?;
    target_mode(dir, name, Step::InspectTarget)?;

    // 1. The temporary, created exclusively, 0600, never through a symlink.
    hook(hooks, Step::CreateTemp, None)?;
    let (temp, mut file) = Temp::create(dir, name)?;
    let temp_name = Some(temp.name());

    // 2. Every byte, then fsync.
    if let Err(e) = hook(hooks, Step::WriteTemp, temp_name) {
        return Err(temp.abort(e));
    }
    if let Err(e) = file.write_all(bytes) {
        return Err(temp.abort(failed(Step::WriteTemp, e)));
    }
    if let Err(e) = hook(hooks, Step::SyncTemp, temp_name) {
        return Err(temp.abort(e));
    }
    if let Err(e) = file.sync_all() {
        return Err(temp.abort(failed(Step::SyncTemp, e)));
    }

    // 3. The name still names our file; the target is still absent or a regular file.
    if let Err(e) = hook(hooks, Step::CheckTemp, temp_name) {
        return Err(temp.abort(e));
    }
    if let Err(e) = still_ours(&temp, Step::CheckTemp) {
        return Err(temp.abort(e));
    }
    // The mode and owner are taken from this fresher look at the target.
    let Target { mode, owner } = match target_mode(dir, name, Step::CheckTemp) {
        Ok(target) => target,
        Err(e) => return Err(temp.abort(e)),
    };

    // 4. The old file's owner where this process may give it, then the final mode, before
    // the file becomes visible (the mode last: a change of owner clears set-id bits).
    if let Err(e) = hook(hooks, Step::SetMode, temp_name) {
        return Err(temp.abort(e));
    }
    if let Some((uid, gid)) = owner
        && let Err(e) = keep_owner(&file, uid, gid)
    {
        return Err(temp.abort(failed(Step::SetMode, e.into())));
    }
    if let Err(e) = rustix::fs::fchmod(&file, Mode::from_raw_mode(mode)) {
        return Err(temp.abort(failed(Step::SetMode, e.into())));
    }

    // 5. The commit. 6. If it fails the old target stays and only our temporary goes.
    if let Err(e) = hook(hooks, Step::Rename, temp_name) {
        return Err(temp.abort(e));
    }
    // The name looked at once more, right before the rename: the checks since step 3 take
    // time (the caller's hook above walks the root), and a process that may rename in this
    // directory could substitute the temporary meanwhile. What is left is the instant between
    // this look and the rename: a substitution there puts that process's entry at the target,
    // as its own rename over the target could, and step 7 reports it.
    if let Err(e) = still_ours(&temp, Step::Rename) {
        return Err(temp.abort(e));
    }
    let tmp = temp.name().to_owned();
    let displaced = match commit(dir, &tmp, name) {
        Ok(displaced) => displaced,
        Err(e) => {
            let kind = match FsErrorKind::of_errno(e) {
                // The target became a directory (or something a file cannot replace).
                FsErrorKind::NotRegular | FsErrorKind::Exists => ErrorKind::TargetNotRegular,
                _ => ErrorKind::Failed,
            };
            return Err(temp.abort(Error::new(kind, Step::Rename, Some(e.into()))));
        }
    };
    let id = temp.committed();
    drop(file);

    // The caller's check after the commit. Refused, the commit is undone: the entry it
    // displaced is put back (so a directory moved away meanwhile keeps its old file) and only
    // our own file is removed.
    // The hook sees where the displaced entry waits (the temporary's name), if there is one.
    let aside = displaced.map(|_| tmp.as_os_str());
    if let Err(e) = hook(hooks, Step::CheckInstalled, aside) {
        undo(dir, &tmp, name, id, displaced);
        return Err(e);
    }
    // The displaced old target goes, as a plain rename would have dropped it.
    if let Some(old) = displaced {
        let _ = remove_if_same(dir, &tmp, old);
    }

    // 7. What the name holds now must be our file. Anything else is another writer's (it
    // renamed over ours after the commit) or an attacker's: the call fails and nothing is
    // removed, since an entry this operation did not create is never removed.
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileId::of(&st) == id => {}
        Ok(_) | Err(Errno::NOENT) => {
            return Err(Error::new(
                ErrorKind::TargetReplaced,
                Step::CheckInstalled,
                None,
            ));
        }
        Err(e) => return Err(failed(Step::CheckInstalled, e.into())),
    }

    // The rename is durable once the directory is.
    hook(hooks, Step::SyncDir, None)?;
    sync_dir(dir).map_err(|e| failed(Step::SyncDir, e))?;
    Ok(Installed {
        id,
        mode,
        len: bytes.len(),
    })
}

/// Whether the temporary's name still names our file: `WRITE_TEMP_IDENTITY_CHANGED` at
/// `step` when it does not.
fn still_ours(temp: &Temp<'_>, step: Step) -> Result<(), Error> {
    match temp.0.still_ours() {
        Ok(true) => Ok(()),
        Ok(false) => Err(Error::new(ErrorKind::TempIdentityChanged, step, None)),
        Err(e) => Err(failed(step, e)),
    }
}

/// The commit: put the temporary `tmp` at `name`. Where `name` exists it is exchanged with the
/// temporary in one step (`renameat2(RENAME_EXCHANGE)`), so that the old entry is not gone
/// yet but sits at the temporary's name, and the commit can still be undone; its identity is
/// returned. Where it does not exist the temporary is renamed without replacing anything
/// (`RENAME_NOREPLACE`). A directory found exchanged out is put back at once (`EISDIR`).
/// Filesystems without these flags get a plain `rename` (nothing displaced to undo).
fn commit(dir: &Dir, tmp: &OsStr, name: &OsStr) -> Result<Option<FileId>, Errno> {
    use rustix::fs::{RenameFlags, renameat_with};
    for _ in 0..8 {
        match renameat_with(dir, tmp, dir, name, RenameFlags::EXCHANGE) {
            Ok(()) => {
                return match rustix::fs::statat(dir, tmp, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                        renameat_with(dir, tmp, dir, name, RenameFlags::EXCHANGE)?;
                        Err(Errno::ISDIR)
                    }
                    Ok(st) => Ok(Some(FileId::of(&st))),
                    // Removed by someone else already: nothing displaced to care for.
                    Err(_) => Ok(None),
                };
            }
            Err(Errno::NOENT) => match renameat_with(dir, tmp, dir, name, RenameFlags::NOREPLACE) {
                Ok(()) => return Ok(None),
                // The target appeared in between: exchange with it.
                Err(Errno::EXIST) => continue,
                Err(e) => return Err(e),
            },
            Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {
                rustix::fs::renameat(dir, tmp, dir, name)?;
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
    }
    Err(Errno::AGAIN)
}

/// Undo a commit the caller refused: exchange back while the name still holds our file and
/// the temporary's name the displaced entry, then remove our file (by identity) wherever it
/// is. Without a displaced entry, our file is simply removed.
///
/// When another writer renamed its own file over the name meanwhile (so our file is already
/// gone from it), the displaced entry is older than that writer's file: it goes, as that
/// writer's rename would have dropped it had we not been there. When the name is empty, the
/// displaced entry goes back to it. Anything else leaves it at the temporary's name rather
/// than lose it.
fn undo(dir: &Dir, tmp: &OsStr, name: &OsStr, ours: FileId, displaced: Option<FileId>) {
    use rustix::fs::{RenameFlags, renameat_with};
    let is = |at: &OsStr, id: FileId| {
        rustix::fs::statat(dir, at, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| FileId::of(&st) == id)
    };
    if let Some(old) = displaced
        && is(name, ours)
        && is(tmp, old)
        && renameat_with(dir, tmp, dir, name, RenameFlags::EXCHANGE).is_ok()
    {
        after_exchange_back(dir, tmp, name, ours, old);
        return;
    }
    // Could not exchange back (the names changed meanwhile).
    let _ = remove_if_same(dir, name, ours);
    if let Some(old) = displaced
        && is(tmp, old)
    {
        match renameat_with(dir, tmp, dir, name, RenameFlags::NOREPLACE) {
            Err(Errno::EXIST) if !is(name, ours) => {
                let _ = remove_if_same(dir, tmp, old);
            }
            _ => {}
        }
    }
}

/// After the exchange that undoes a commit: the temporary's name should hold our file, which
/// goes. But the name held our file only an instant before the exchange: another writer that
/// renamed its own file over the name in between had its file moved to the temporary's name
/// by the exchange, and the older displaced entry put back at the name. Then the newer file
/// gets its name back (exchanged again while the name still holds the displaced entry) and
/// the displaced entry goes, as that writer's rename would have dropped it. Without this the
/// other writer's save would wait under our temporary's name and the name would hold older
/// content (seen once in a race test with an editor saving by rename every 0.3 ms). A third
/// writer renaming in the second window would leave its file at the temporary's name: kept,
/// not lost.
fn after_exchange_back(dir: &Dir, tmp: &OsStr, name: &OsStr, ours: FileId, old: FileId) {
    use rustix::fs::{RenameFlags, renameat_with};
    if remove_if_same(dir, tmp, ours).unwrap_or(true) {
        return;
    }
    let name_holds_old = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileId::of(&st) == old);
    let tmp_exists = rustix::fs::statat(dir, tmp, AtFlags::SYMLINK_NOFOLLOW).is_ok();
    if name_holds_old
        && tmp_exists
        && renameat_with(dir, tmp, dir, name, RenameFlags::EXCHANGE).is_ok()
    {
        let _ = remove_if_same(dir, tmp, old);
    }
}

/// `fsync` the directory `dir` names. A cap-std `Dir` may be an `O_PATH` handle, which cannot
/// be synced, so the directory is opened again (read-only) through it. Concurrent calls for
/// one directory share their `fsync` (group commit): each returns after an `fsync` of the
/// directory that started after the call began, so what the directory held when the call
/// began is durable when it returns `Ok` (see the `group` module).
pub fn sync_dir(dir: &Dir) -> io::Result<()> {
    let fd = rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let id = FileId::of_fd(&fd)?;
    crate::group::sync_dir(id, || Ok(rustix::fs::fsync(&fd)?))
}

fn hook(hooks: &mut dyn Hooks, step: Step, temp: Option<&OsStr>) -> Result<(), Error> {
    hooks
        .before(step, temp)
        .map_err(|e| Error::new(ErrorKind::Failed, step, Some(e)))
}

fn failed(step: Step, e: io::Error) -> Error {
    Error::new(ErrorKind::Failed, step, Some(e))
}

/// What the new file takes from the target it replaces.
struct Target {
    /// The permission bits.
    mode: u32,
    /// The owner and group of the file replaced (`None`: there was none).
    owner: Option<(u32, u32)>,
}

/// What the new file gets: the target's permission bits and owner if it is a regular file,
/// the default mode if it does not exist. Set-user-ID, set-group-ID and sticky bits are not
/// carried over (see the crate docs).
fn target_mode(dir: &Dir, name: &OsStr, step: Step) -> Result<Target, Error> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => Ok(Target {
                mode: st.st_mode & 0o777,
                owner: Some((st.st_uid, st.st_gid)),
            }),
            FileType::Symlink => Err(Error::new(ErrorKind::TargetSymlink, step, None)),
            _ => Err(Error::new(ErrorKind::TargetNotRegular, step, None)),
        },
        Err(Errno::NOENT) => Ok(Target {
            mode: DEFAULT_MODE,
            owner: None,
        }),
        Err(e) => Err(failed(step, e.into())),
    }
}

/// Give the temporary `file` the owner `uid` and group `gid` of the file it replaces, as far
/// as this process may: root (`CAP_CHOWN`) sets both; an ordinary user cannot give a file
/// away, but may set a group it belongs to. What it may not set stays its own (`EPERM` is not
/// an error: the write goes on with the new file owned by the writer).
fn keep_owner(file: &File, uid: u32, gid: u32) -> Result<(), Errno> {
    use rustix::fs::{Gid, Uid};
    let st = rustix::fs::fstat(file)?;
    if (st.st_uid, st.st_gid) == (uid, gid) {
        return Ok(());
    }
    let (uid, gid) = (Uid::from_raw(uid), Gid::from_raw(gid));
    match rustix::fs::fchown(file, Some(uid), Some(gid)) {
        Ok(()) => Ok(()),
        Err(Errno::PERM) => match rustix::fs::fchown(file, None, Some(gid)) {
            Ok(()) | Err(Errno::PERM) => Ok(()),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// This operation's temporary: removed (by identity) on every path that does not commit it,
/// including a panic in a hook.
struct Temp<'d>(Temporary<'d>);

impl<'d> Temp<'d> {
    fn create(dir: &'d Dir, target: &OsStr) -> Result<(Self, File), Error> {
        let (temp, file) = Temporary::create(dir.as_fd(), || temp_name(target), CREATE_ATTEMPTS)
            .map_err(|e| failed(Step::CreateTemp, e))?;
        let temp = Temp(temp);
        if !temp.0.is_regular() {
            return Err(temp.abort(Error::new(
                ErrorKind::TempNotRegular,
                Step::CreateTemp,
                None,
            )));
        }
        Ok((temp, file))
    }

    fn name(&self) -> &OsStr {
        self.0.name()
    }

    /// The rename happened: the name is gone, nothing to remove any more.
    fn committed(self) -> FileId {
        self.0.keep()
    }

    /// Give up: remove our temporary (by identity) and return `error`, or
    /// `WRITE_TEMP_CLEANUP_FAILED` if our temporary could not be removed.
    fn abort(self, error: Error) -> Error {
        match self.0.remove() {
            Ok(_) => error,
            Err(e) => Error::new(ErrorKind::TempCleanupFailed, error.step(), Some(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Dir) {
        let t = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(t.path(), cap_std::ambient_authority()).unwrap();
        (t, dir)
    }

    fn id(dir: &Dir, name: &str) -> FileId {
        FileId::of(&rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).unwrap())
    }

    /// The plain case: the exchange back left our file at the temporary's name; it goes and
    /// the displaced entry keeps the name.
    #[test]
    fn after_the_exchange_back_our_file_goes() {
        let (t, dir) = setup();
        std::fs::write(t.path().join("tgt"), "old").unwrap();
        std::fs::write(t.path().join(".tmp"), "ours").unwrap();
        let (old, ours) = (id(&dir, "tgt"), id(&dir, ".tmp"));
        after_exchange_back(&dir, OsStr::new(".tmp"), OsStr::new("tgt"), ours, old);
        assert_eq!(
            std::fs::read_to_string(t.path().join("tgt")).unwrap(),
            "old"
        );
        assert!(!t.path().join(".tmp").exists());
    }

    /// The race: another writer renamed its file over the name just before the exchange back,
    /// which moved that file to the temporary's name and put the older displaced entry at the
    /// name. The newer file gets the name back; the displaced entry goes; nothing is left.
    #[test]
    fn a_save_renamed_in_just_before_the_exchange_back_keeps_the_name() {
        let (t, dir) = setup();
        std::fs::write(t.path().join("tgt"), "old").unwrap();
        std::fs::write(t.path().join(".tmp"), "newer save").unwrap();
        std::fs::write(t.path().join("ours"), "ours").unwrap();
        let (old, ours) = (id(&dir, "tgt"), id(&dir, "ours"));
        std::fs::remove_file(t.path().join("ours")).unwrap();
        after_exchange_back(&dir, OsStr::new(".tmp"), OsStr::new("tgt"), ours, old);
        assert_eq!(
            std::fs::read_to_string(t.path().join("tgt")).unwrap(),
            "newer save"
        );
        assert!(
            !t.path().join(".tmp").exists(),
            "the other writer's save was left aside"
        );
    }
}
