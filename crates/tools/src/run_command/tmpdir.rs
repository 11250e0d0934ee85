//! The call's `TMPDIR`: `.pify-run-<uuid>/` made beneath the root's handle, removed with its
//! contents when dropped.

use std::sync::Arc;

use cap_std::fs::DirBuilder;
use cap_std::fs::DirBuilderExt;
use confine_rootid::WorkspaceRoot;
use rustix::fs::AtFlags;

/// How many fresh names are tried (a taken name is never reused).
const ATTEMPTS: usize = 4;

/// A directory made for one call (or job) beneath the root.
pub(super) struct RunTmp {
    root: Arc<WorkspaceRoot>,
    name: String,
}

impl RunTmp {
    /// Make `.pify-run-<uuid>` (mode 0700) beneath the root's handle; a name that exists is
    /// never taken.
    pub(super) fn create(root: &Arc<WorkspaceRoot>) -> std::io::Result<Self> {
        let dir = root.dir();
        let mut builder = DirBuilder::new();
        builder.mode(0o700);
        let mut last = None;
        for _ in 0..ATTEMPTS {
            let name = crate::temp_names::run_tmpdir(uuid::Uuid::new_v4());
            match dir.create_dir_with(&name, &builder) {
                Ok(()) => {
                    return Ok(Self {
                        root: root.clone(),
                        name,
                    });
                }
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

impl Drop for RunTmp {
    fn drop(&mut self) {
        let dir = self.root.dir();
        // Empty (the command left nothing, or never started): one `rmdir` beneath the handle,
        // which needs no descriptor, so it works even in a process out of them.
        let empty = rustix::fs::unlinkat(dir, self.name.as_str(), AtFlags::REMOVEDIR);
        if empty.is_ok() {
            return;
        }
        // Beneath the root's handle, never following a symlink out of it: whatever the
        // command left there (or put in its place) goes, and nothing outside.
        if dir.remove_dir_all(&self.name).is_err() {
            // Replaced by a file or a symlink: remove the name itself.
            let _ = dir.remove_file(&self.name);
        }
    }
}
