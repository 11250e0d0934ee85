//! The call's `TMPDIR`: `.pify-run-<uuid>/` made beneath the root's handle, removed with its
//! contents when dropped.

use cap_std::fs::DirBuilderExt;
use cap_std::fs::{Dir, DirBuilder};
use rustix::fs::AtFlags;

/// How many fresh names are tried (a taken name is never reused).
const ATTEMPTS: usize = 4;

/// A directory made for one call beneath the root.
pub(super) struct RunTmp<'a> {
    dir: &'a Dir,
    name: String,
}

impl<'a> RunTmp<'a> {
    /// Make `.pify-run-<uuid>` (mode 0700) beneath `dir`; a name that exists is never taken.
    pub(super) fn create(dir: &'a Dir) -> std::io::Result<Self> {
        let mut builder = DirBuilder::new();
        builder.mode(0o700);
        let mut last = None;
        for _ in 0..ATTEMPTS {
            let name = format!(".pify-run-{}", uuid::Uuid::new_v4());
            match dir.create_dir_with(&name, &builder) {
                Ok(()) => return Ok(Self { dir, name }),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::from(std::io::ErrorKind::AlreadyExists)))
    }

    /// Its name in the root.
    pub(super) fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for RunTmp<'_> {
    fn drop(&mut self) {
        // Empty (the command left nothing, or never started): one `rmdir` beneath the handle,
        // which needs no descriptor, so it works even in a process out of them.
        let empty = rustix::fs::unlinkat(self.dir, self.name.as_str(), AtFlags::REMOVEDIR);
        if empty.is_ok() {
            return;
        }
        // Beneath the root's handle, never following a symlink out of it: whatever the
        // command left there (or put in its place) goes, and nothing outside.
        if self.dir.remove_dir_all(&self.name).is_err() {
            // Replaced by a file or a symlink: remove the name itself.
            let _ = self.dir.remove_file(&self.name);
        }
    }
}
