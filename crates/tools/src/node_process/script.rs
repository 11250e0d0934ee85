//! The script of one `node_process` call: created exclusively beneath the root's handle,
//! checked by identity when reopened, removed by identity on every path; and the removal of
//! the scripts of embedders that died.

use std::io::Write;
use std::os::fd::AsFd;

use cap_std::fs::{Dir, File, OpenOptions, OpenOptionsExt};
use confine_beneath::FileId;
use confine_beneath::{FsErrorKind, Temporary};

use crate::error::failed;
use crate::error::{CallError, ErrorKind};

/// this process ([`confine_nodeexec::Owner`]), so that one left by an embedder that was killed can be
/// told from one of a live embedder sharing the workspace.
pub(super) fn script_name(random: uuid::Uuid) -> String {
    crate::temp_names::node_script(&confine_nodeexec::Owner::current(), random)
}

/// Remove the scripts, in the workspace root, of embedders that no longer exist: only names
/// this tool makes, only regular files, only when the owner their name holds (pid and start
/// time) is gone. Best effort (nothing to report: it runs when the tool is built).
pub(super) fn remove_stale_scripts(dir: &Dir) {
    let Ok(entries) = dir.entries() else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let Some(owner) = stale_script_owner(name) else {
            continue;
        };
        if owner.is_alive() {
            continue;
        }
        if dir.symlink_metadata(name).is_ok_and(|m| m.is_file()) {
            dir.remove_file(name).ok();
        }
    }
}

/// The owner in a script name `.pify-node-<pid>-<start>-<uuid>.cjs`.
fn stale_script_owner(name: &str) -> Option<confine_nodeexec::Owner> {
    let rest = crate::temp_names::node_script_middle(name)?;
    let mut parts = rest.splitn(3, '-');
    let (pid, start, random) = (parts.next()?, parts.next()?, parts.next()?);
    uuid::Uuid::parse_str(random).ok()?;
    confine_nodeexec::Owner::parse(&format!("{pid}-{start}"))
}

/// The temporary script of one call; removed (by identity) when dropped, unless already
/// removed.
pub(super) struct Script<'a> {
    dir: &'a Dir,
    name: String,
    temp: Option<Temporary<'a>>,
}

/// How many fresh names are tried for the script (a taken name is never written through).
const SCRIPT_ATTEMPTS: usize = 4;

impl<'a> Script<'a> {
    /// Create `.pify-node-<owner>-<uuid>.cjs` exclusively, mode 0600, write `source`.
    /// The fsync is the caller's (it blocks: the tool runs it off the async workers), on the
    /// file returned beside the script.
    pub(super) fn create(dir: &'a Dir, source: &str) -> Result<(Self, std::fs::File), CallError> {
        let fresh = || script_name(uuid::Uuid::new_v4()).into();
        let (temp, mut file) = Temporary::create(dir.as_fd(), fresh, SCRIPT_ATTEMPTS)
            .map_err(|e| failed(ErrorKind::NodeProcessFailed).with_source(e))?;
        // From here on the guard removes the script on every path.
        let script = Script {
            dir,
            name: temp.name().to_string_lossy().into_owned(),
            temp: Some(temp),
        };
        file.write_all(source.as_bytes())
            .map_err(|e| failed(ErrorKind::NodeProcessFailed).with_source(e))?;
        Ok((script, file))
    }

    /// The script's name in the root.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// Reopen the script read-only by name and check it is the file this call wrote.
    pub(super) fn open_checked(&self) -> Result<File, CallError> {
        let identity = self
            .temp
            .as_ref()
            .map(Temporary::id)
            .ok_or_else(|| failed(ErrorKind::NodeScriptIdentityChanged))?;
        let mut options = OpenOptions::new();
        options
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY);
        let meta = self
            .dir
            .symlink_metadata(&self.name)
            .map_err(|e| failed(ErrorKind::NodeScriptIdentityChanged).with_source(e))?;
        if !meta.is_file() {
            return Err(failed(ErrorKind::NodeScriptNotRegular));
        }
        let file = self.dir.open_with(&self.name, &options).map_err(|e| {
            if FsErrorKind::of(&e) == FsErrorKind::Symlink {
                failed(ErrorKind::NodeScriptNotRegular)
            } else {
                failed(ErrorKind::NodeScriptIdentityChanged)
            }
        })?;
        let opened = file
            .metadata()
            .map_err(|e| failed(ErrorKind::NodeScriptIdentityChanged).with_source(e))?;
        if !opened.is_file() {
            return Err(failed(ErrorKind::NodeScriptNotRegular));
        }
        let named = FileId::at(self.dir, &self.name);
        if FileId::of_fd(&file).ok() != Some(identity) || named.ok() != Some(identity) {
            return Err(failed(ErrorKind::NodeScriptIdentityChanged));
        }
        Ok(file)
    }

    /// Remove the script if its name still names this call's file. A name that is gone (the
    /// script removed itself) or names something else (not ours to remove) is fine.
    pub(super) fn remove(&mut self) -> Result<(), CallError> {
        match self.temp.take().map(Temporary::remove) {
            None | Some(Ok(_)) => Ok(()),
            Some(Err(_)) => Err(failed(ErrorKind::NodeScriptCleanupFailed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn script_in(tmp: &tempfile::TempDir) -> (Dir, PathBuf) {
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        (dir, tmp.path().to_owned())
    }

    #[test]
    fn script_is_exclusive_private_and_checked() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let (dir, path) = script_in(&tmp);
        let (mut script, _) = Script::create(&dir, "console.log(1)").unwrap();
        assert!(script.name.starts_with(".pify-node-") && script.name.ends_with(".cjs"));
        let meta = std::fs::metadata(path.join(&script.name)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::read_to_string(path.join(&script.name)).unwrap(),
            "console.log(1)"
        );
        script.open_checked().unwrap();
        script.remove().unwrap();
        assert_eq!(std::fs::read_dir(&path).unwrap().count(), 0);
    }

    #[test]
    fn script_replaced_by_file_is_identity_changed_and_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, path) = script_in(&tmp);
        let (script, _) = Script::create(&dir, "1").unwrap();
        let name = script.name.clone();
        std::fs::write(path.join("other"), "evil").unwrap();
        std::fs::rename(path.join("other"), path.join(&name)).unwrap();
        let err = script.open_checked().unwrap_err();
        assert_eq!(err, failed(ErrorKind::NodeScriptIdentityChanged));
        drop(script);
        // Not ours: the guard leaves the replacement alone.
        assert_eq!(std::fs::read_to_string(path.join(&name)).unwrap(), "evil");
    }

    #[test]
    fn script_replaced_by_symlink_or_directory_is_not_regular() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, path) = script_in(&tmp);
        let (script, _) = Script::create(&dir, "1").unwrap();
        std::fs::write(path.join("target"), "x").unwrap();
        std::fs::remove_file(path.join(&script.name)).unwrap();
        std::os::unix::fs::symlink(path.join("target"), path.join(&script.name)).unwrap();
        assert_eq!(
            script.open_checked().unwrap_err(),
            failed(ErrorKind::NodeScriptNotRegular)
        );
        std::fs::remove_file(path.join(&script.name)).unwrap();
        std::fs::create_dir(path.join(&script.name)).unwrap();
        assert_eq!(
            script.open_checked().unwrap_err(),
            failed(ErrorKind::NodeScriptNotRegular)
        );
        let name = script.name.clone();
        drop(script);
        assert!(
            path.join(&name).is_dir(),
            "an attacker's directory is never removed"
        );
    }

    #[test]
    fn stale_scripts_of_dead_owners_only_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        let me = script_name(uuid::Uuid::new_v4());
        let dead = format!(".pify-node-4194305-1-{}.cjs", uuid::Uuid::new_v4());
        let reused = format!(
            ".pify-node-{}-1-{}.cjs",
            std::process::id(),
            uuid::Uuid::new_v4()
        );
        let old = format!(".pify-node-{}.cjs", uuid::Uuid::new_v4());
        let not_uuid = ".pify-node-4194305-1-x.cjs";
        for name in [&me, &dead, &reused, &old, &not_uuid.to_owned()] {
            std::fs::write(tmp.path().join(name), "x").unwrap();
        }
        let dead_dir = format!(".pify-node-4194305-1-{}.cjs", uuid::Uuid::new_v4());
        std::fs::create_dir(tmp.path().join(&dead_dir)).unwrap();
        remove_stale_scripts(&dir);
        let left = |n: &str| tmp.path().join(n).exists();
        assert!(left(&me), "a live owner's script is kept");
        assert!(!left(&dead), "a dead owner's script is removed");
        assert!(
            !left(&reused),
            "our pid with another start time is another, dead, owner"
        );
        assert!(
            left(&old) && left(not_uuid),
            "names without an owner are not ours to judge"
        );
        assert!(left(&dead_dir), "only regular files");
    }
}
