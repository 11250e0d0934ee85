//! The glob of the walking tools (`find_files`'s pattern, `grep`'s `glob`): the shell's and
//! `.gitignore`'s meaning, `*` stopping at `/`.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::error::{ErrorKind, ToolError};

/// The longest glob accepted, in bytes.
pub const MAX_PATTERN_BYTES: usize = 4_096;

/// One compiled glob, matched against `/`-separated relative paths.
///
/// A set of one glob rather than globset's `GlobMatcher`: the set picks a matching strategy
/// from the glob's shape (`**/*.rs` is a lookup of the extension, `**/name` of the file name,
/// a literal a comparison), where the matcher always runs its regex; the answer is the same.
#[derive(Clone, Debug)]
pub(crate) struct PathGlob(GlobSet);

impl PathGlob {
    /// Whether `path` matches.
    pub(crate) fn is_match(&self, path: &str) -> bool {
        self.0.is_match(path)
    }
}

/// Compile a glob with the shell's and `.gitignore`'s meaning (`*` stops at `/`).
pub(crate) fn compile_glob(pattern: &str) -> Result<PathGlob, ToolError> {
    if pattern.is_empty() || pattern.len() > MAX_PATTERN_BYTES || pattern.contains('\0') {
        return Err(ToolError::invalid(ErrorKind::InvalidGlob));
    }
    let glob = GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|_| ToolError::invalid(ErrorKind::InvalidGlob))?;
    GlobSetBuilder::new()
        .add(glob)
        .build()
        .map(PathGlob)
        .map_err(|_| ToolError::invalid(ErrorKind::InvalidGlob))
}
