//! [`RelPath`]: the output of the grammar, a path that is known to be relative and clean.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use crate::error::PathError;

/// A normalized relative path: at least one segment, segments joined by `/`, none empty, `.` or
/// `..`, none breaking a rule of the grammar.
///
/// The only way to make one is [`normalize`](crate::normalize) (or [`str::parse`], which calls
/// it), so holding a `RelPath` is proof the text passed the grammar. It joins beneath any root
/// directory without leaving it, lexically: symlinks are the resolver's business.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelPath(String);

impl RelPath {
    /// Wrap text that the grammar has already accepted and normalized.
    pub(crate) fn from_normalized(s: String) -> Self {
        debug_assert!(!s.is_empty() && !s.contains('\\'));
        Self(s)
    }

    /// The normalized text, segments joined by `/` (`"a/b/c.txt"`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The segments in order; at least one, none empty, `.` or `..`.
    pub fn segments(&self) -> impl DoubleEndedIterator<Item = &str> + '_ {
        self.0.split('/')
    }

    /// The last segment (`"c.txt"` for `a/b/c.txt`); a `RelPath` always has one.
    pub fn file_name(&self) -> &str {
        match self.0.rfind('/') {
            Some(i) => &self.0[i + 1..],
            None => &self.0,
        }
    }

    /// Everything before the last segment (`Some("a/b")` for `a/b/c.txt`), or `None` when the
    /// path is a single segment (its parent is the root it is joined to).
    pub fn parent(&self) -> Option<&str> {
        self.0.rfind('/').map(|i| &self.0[..i])
    }

    /// How many segments the path has (at least one).
    pub fn depth(&self) -> usize {
        self.0.bytes().filter(|&b| b == b'/').count() + 1
    }

    /// The normalized text as an owned `String`.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for RelPath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// `/` separates components on every platform Rust supports, so the text is a relative `Path`
/// everywhere.
impl AsRef<Path> for RelPath {
    fn as_ref(&self) -> &Path {
        Path::new(&self.0)
    }
}

impl From<RelPath> for String {
    fn from(p: RelPath) -> Self {
        p.0
    }
}

impl FromStr for RelPath {
    type Err = PathError;

    /// The same as [`normalize`](crate::normalize).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::normalize(s)
    }
}

impl PartialEq<str> for RelPath {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for RelPath {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(s: &str) -> RelPath {
        crate::normalize(s).unwrap()
    }

    #[test]
    fn file_name_and_parent_of_nested_path() {
        let p = rel("a/b/c.txt");
        assert_eq!(p.file_name(), "c.txt");
        assert_eq!(p.parent(), Some("a/b"));
        assert_eq!(p.depth(), 3);
        assert_eq!(p.segments().collect::<Vec<_>>(), ["a", "b", "c.txt"]);
        assert_eq!(p.segments().next_back(), Some("c.txt"));
    }

    #[test]
    fn file_name_and_parent_of_single_segment() {
        let p = rel("./x.txt");
        assert_eq!(p.file_name(), "x.txt");
        assert_eq!(p.parent(), None);
        assert_eq!(p.depth(), 1);
    }

    #[test]
    fn conversions_agree_with_as_str() {
        let p: RelPath = r"a\b".parse().unwrap();
        assert_eq!(p, "a/b");
        assert_eq!(p.to_string(), "a/b");
        assert_eq!(AsRef::<str>::as_ref(&p), "a/b");
        assert_eq!(AsRef::<Path>::as_ref(&p), Path::new("a/b"));
        assert_eq!(String::from(p.clone()), "a/b");
        assert_eq!(p.into_string(), "a/b");
        assert!("../x".parse::<RelPath>().is_err());
    }
}
