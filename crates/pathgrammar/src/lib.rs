//! Portable relative-path grammar for model-supplied paths (SPEC section 2). Stub API; the full
//! rules land with issue 2.

use std::fmt;

/// A normalized relative path: segments joined by `/`, none empty, `.` or `..`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RelPath(String);

impl RelPath {
    /// The normalized text, segments joined by `/`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// The segments in order.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a path was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid relative path")]
pub struct PathError;

impl PathError {
    /// The stable tool-level token.
    pub const fn code(&self) -> &'static str {
        "INVALID_RELATIVE_PATH"
    }
}

/// Validate and normalize a model-supplied relative path.
pub fn normalize(input: &str) -> Result<RelPath, PathError> {
    let segs: Vec<&str> = input
        .split(['/', '\\'])
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    if input.starts_with('/') || segs.is_empty() || segs.contains(&"..") {
        return Err(PathError);
    }
    Ok(RelPath(segs.join("/")))
}
