//! Protected paths: the files that programs on the host run or obey when the user next works
//! in the repository (a git hook, `core.fsmonitor` in `.git/config`), refused to every tool
//! that changes the workspace (`PATH_PROTECTED`) and kept read-only for sandboxed children.
//!
//! A list is gitignore-style globs relative to the root ([`DEFAULT_PROTECTED`] by default,
//! the embedder adds more), on the pattern type the deny list uses too ([`crate::patterns`]): a pattern holding a `/` (other than a trailing one) is anchored
//! at the root, one without matches a name at any depth; `*` and `?` stop at `/`, `**`
//! crosses it; a leading `/` anchors, a trailing `/` is dropped. A pattern protects what it
//! matches and everything beneath it, and `dir/**` protects `dir` itself too (so the hooks
//! directory cannot be removed, replaced or moved). Negation (`!`) is not offered.
//!
//! # What is checked, and on what
//!
//! A write tool checks a path twice before any effect: the path as the model wrote it, and
//! the path where the opened parent directory really stands beneath the root
//! ([`confine_beneath::path_beneath`], on the descriptor the tool then works in) joined with the leaf
//! name. So `write_file link/pre-commit` with `link -> .git/hooks` is refused (the real
//! parent is `.git/hooks`), and so is `.git/hooks/x` where `.git` is a symlink elsewhere
//! (the written path). Every directory `write_file`, `move_file` or `create_directory`
//! creates on the way is checked the same way before its `mkdirat`.
//!
//! A directory that could hold a protected path (`.git` for the defaults: an ancestor of a
//! pattern) is refused as either end of `move_file`, whatever the entry is: moving `.git`
//! away and another directory in would plant hooks without ever naming one.
//!
//! A directory renamed into a protected place by another process after the check: before
//! the commit the parent's path is checked to name the held directory still; after the
//! commit (`write_file`, `edit_file`) the real place of the held parent is checked again,
//! and a write that landed in a protected place is undone (the file it displaced is put
//! back) and refused. What remains is the instant between that last check and the call's
//! end, and an entry renamed into a protected place after the call: that is the other
//! process's own rename, which it could do with any file of its own.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use cap_std::fs::Dir;
use confine_beneath::{EntryKind, Symlinks};
use confine_pathgrammar::RelPath;
use confine_rootid::WorkspaceRoot;

use crate::error::{CallError, ErrorKind, failed};
use crate::patterns::{PathPatterns, PatternError, literal_part};

/// The default protected paths: everything in the root's repository that makes the user's
/// later `git` run a program or read another repository's configuration, and what other tools
/// run when the user opens the workspace.
///
/// * git's repository configuration (`core.fsmonitor`, `core.hooksPath`, filter and diff
///   drivers, aliases name programs) and the per-worktree one: `.git/config`,
///   `.git/config.worktree`;
/// * `.git/commondir`, which points git at another directory's configuration and hooks;
/// * git's hooks and `info` (`info/attributes` names filter drivers, `info/exclude`);
/// * a submodule's repository beneath `.git/modules` (its configuration, hooks and
///   `commondir`: a top-level `git status` runs `git status` in each submodule, which obeys
///   them) and linked worktrees' administrative directories (`.git/worktrees`);
/// * the root's `HEAD`: where `.git` is no repository (its `HEAD`, git's own ordinary file,
///   spoiled), git's discovery takes the root itself for a bare repository if it holds
///   `HEAD`, `objects` and `refs`, and obeys a `config` beside them (`core.worktree` and
///   `core.fsmonitor` there run a program at the user's `git status`); git needs the `HEAD`;
/// * `.gitmodules` (submodule URLs and update commands), `.envrc` (direnv), `.mcp.json`,
///   `.vscode/`, `.idea/`, `.claude/` (tasks, run configurations and hooks an editor or agent
///   runs when the workspace is opened).
///
/// With the defaults, the root's `.git` entry itself is protected as well (never written,
/// deleted, moved or replaced, for example by a `gitdir:` file), while what lies beneath it
/// apart from the list stays writable: git's ordinary writes (`objects`, `refs`, `logs`,
/// `index`, `HEAD`, lock files). So is every `.git` entry below the root with all that lies
/// beneath it, for the tools ([`ProtectedPaths::is_protected`]): a submodule's `gitfile`
/// (`sub/.git`), which the user's top-level `git status` follows, and a nested repository
/// (the sandbox's plan keeps only the patterns' paths read-only for children).
pub const DEFAULT_PROTECTED: &[&str] = &[
    ".git/config",
    ".git/config.worktree",
    ".git/commondir",
    ".git/hooks/**",
    ".git/info/**",
    ".git/modules/**/config",
    ".git/modules/**/hooks/**",
    ".git/modules/**/commondir",
    ".git/worktrees/**",
    "/HEAD",
    ".vscode/**",
    ".idea/**",
    ".claude/**",
    "/.mcp.json",
    "/.gitmodules",
    "/.envrc",
];

/// The root's repository entry, protected as itself (not what lies beneath it) whenever the
/// defaults are.
pub const REPOSITORY_ENTRY: &str = ".git";

/// The most patterns a list holds.
pub const MAX_PROTECTED_PATTERNS: usize = crate::patterns::MAX_PATTERNS;

/// A list of protected paths (see the module docs), compiled.
#[derive(Debug, Clone)]
pub struct ProtectedPaths {
    list: PathPatterns,
    defaults: usize,
    /// `list` without the patterns naming the root's repository (`.git/…`).
    outside: PathPatterns,
}

impl Default for ProtectedPaths {
    /// The defaults alone ([`DEFAULT_PROTECTED`]).
    fn default() -> Self {
        Self::new(true, &[] as &[&str]).expect("the defaults compile")
    }
}

impl ProtectedPaths {
    /// The list: [`DEFAULT_PROTECTED`] when `defaults`, then `extra`, in that order.
    pub fn new<S: AsRef<str>>(defaults: bool, extra: &[S]) -> Result<Self, PatternError> {
        let mut patterns: Vec<String> = Vec::new();
        if defaults {
            patterns.extend(DEFAULT_PROTECTED.iter().map(|&p| p.to_owned()));
        }
        let default_count = patterns.len();
        patterns.extend(extra.iter().map(|p| p.as_ref().to_owned()));
        const TOO_MANY: &str = "more than 256 protected patterns";
        let list = PathPatterns::new(patterns, TOO_MANY, |_| true)?;
        let outside: Vec<String> = list
            .patterns()
            .iter()
            .filter(|p| crate::patterns::anchored(p).is_ok_and(|a| !in_repository(&a)))
            .cloned()
            .collect();
        let outside = match outside.len() == list.patterns().len() {
            true => list.clone(),
            false => PathPatterns::new(outside, TOO_MANY, |_| true)?,
        };
        Ok(Self {
            list,
            defaults: default_count,
            outside,
        })
    }

    /// No protected path at all.
    pub fn none() -> Self {
        Self::new(false, &[] as &[&str]).expect("an empty list compiles")
    }

    /// The patterns as given, the defaults first.
    pub fn patterns(&self) -> &[String] {
        self.list.patterns()
    }

    /// How many of [`patterns`](Self::patterns) are the defaults (0 or all of
    /// [`DEFAULT_PROTECTED`]).
    pub fn default_count(&self) -> usize {
        self.defaults
    }

    /// Whether the list is empty (nothing is protected).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Whether `rel` (relative to the root, plain names) is protected: it or a directory above
    /// it matches a pattern.
    pub fn is_protected(&self, rel: &Path) -> bool {
        if self.is_empty() || rel.as_os_str().is_empty() {
            return false;
        }
        if self.defaults > 0 && rel == Path::new(REPOSITORY_ENTRY) {
            return true;
        }
        if self.defaults > 0 && below_the_root_in_a_repository_entry(rel) {
            return true;
        }
        self.matches_list(rel, true)
    }

    /// Whether `rel` or a directory above it matches a pattern (not the repository entry),
    /// the repository's patterns left out unless `repository`.
    fn matches_list(&self, rel: &Path, repository: bool) -> bool {
        match repository {
            true => self.list.matches(rel),
            false => self.outside.matches(rel),
        }
    }

    /// Whether `rel` could hold a protected path beneath it (for the defaults: `.git`), or is
    /// protected itself: an entry there is never moved away, nor anything moved in.
    pub fn may_hold(&self, rel: &Path) -> bool {
        self.list.holds(rel) || self.is_protected(rel)
    }

    /// The existing paths of the list beneath `root` (a descriptor of the workspace root),
    /// outermost first: what the sandbox keeps read-only for children. A pattern's literal
    /// part is looked up directly; a pattern with wildcards is matched against the entries
    /// of the directories its literal part names, at most `MAX_EXPANDED` (4,096) paths in all
    /// (beyond that, `Err` with the count reached: a caller must not run a child with part
    /// of the list left writable).
    pub fn existing_beneath(&self, root: impl AsFd) -> Result<Vec<PathBuf>, usize> {
        self.existing_of(root, true)
    }

    /// The patterns anchored at the root (every one compiled in [`new`](Self::new)), those
    /// naming the root's repository (`.git/…`) left out unless `repository`.
    fn anchored(&self, repository: bool) -> impl Iterator<Item = String> + '_ {
        match repository {
            true => self.list.anchored(),
            false => self.outside.anchored(),
        }
    }

    /// [`existing_beneath`](Self::existing_beneath), the patterns naming the root's
    /// repository (`.git/…`) left out unless `repository`.
    fn existing_of(&self, root: impl AsFd, repository: bool) -> Result<Vec<PathBuf>, usize> {
        let mut found: Vec<PathBuf> = Vec::new();
        for anchored in self.anchored(repository) {
            let (literal_path, all_literal) = literal_part(&anchored);
            if all_literal {
                // No wildcard: the path itself, if it exists (a symlink is not followed: the
                // sandbox's mount would land on its target).
                if exists_beneath(&root, &literal_path) {
                    found.push(literal_path);
                }
                continue;
            }
            walk_matching(self, repository, &root, &literal_path, &mut found)?;
        }
        found.sort_by_key(|p| p.components().count());
        found.dedup();
        // Beneath an entry already in the list: covered by its mount.
        let mut outermost: Vec<PathBuf> = Vec::new();
        for p in found {
            if !outermost.iter().any(|o| p.starts_with(o)) {
                outermost.push(p);
            }
        }
        Ok(outermost)
    }
}

/// What a sandboxed run gets of the list (see [`ProtectedPaths::sandbox_plan`]).
#[derive(Debug, Default)]
pub(crate) struct SandboxPlan {
    /// Existing paths, read-only for the child (outermost first).
    pub read_only: Vec<PathBuf>,
    /// Paths named literally by the list that do not exist: whatever the run creates there is
    /// removed ([`crate::protect_watch`]).
    pub watched: Vec<PathBuf>,
}

/// The directories of the user's repository that are made, empty, before a sandboxed run
/// where they are missing, so that a read-only mount can cover them: `hooks` and `info` are
/// what `git init` itself makes; an empty `worktrees` or `modules` means what their absence
/// means to git.
const REPOSITORY_PLACEHOLDERS: &[&str] = &["hooks", "info", "worktrees", "modules"];

impl ProtectedPaths {
    /// What the sandbox does with the list for one run beneath `root`.
    ///
    /// `repository` says whether the root held a `.git` when the tool set was built (the
    /// user's repository). Only then are the repository's patterns applied to children: a
    /// repository the agent makes itself (`git init` where there was none) is its own,
    /// untrusted until the user has looked at it. In the user's repository, with the
    /// defaults, each submodule's gitfile that `.gitmodules` names is read-only; `hooks`,
    /// `info`, `worktrees` and `modules` are made (empty) where missing
    /// and kept read-only with everything beneath them (`.git/modules` whole only where it did
    /// not exist: where submodules exist, their configuration and hooks are read-only and a
    /// missing `commondir` of each is watched, so git can still refresh their indexes), and a
    /// `.git` that is a `gitdir:` file is read-only itself. Every other pattern naming
    /// one path literally that does not exist now (`.git/commondir`,
    /// `.git/config.worktree`, `.mcp.json`, an embedder's `--protect build/deploy.sh`) is
    /// watched for the run's whole life. `Err` as [`existing_beneath`](Self::existing_beneath).
    pub(crate) fn sandbox_plan(
        &self,
        root: impl AsFd,
        repository: bool,
    ) -> Result<SandboxPlan, usize> {
        let root = root.as_fd();
        let mut extra = Vec::new();
        if repository && self.defaults > 0 {
            let git = Path::new(REPOSITORY_ENTRY);
            match rustix::fs::statat(root, git, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st)
                    if rustix::fs::FileType::from_raw_mode(st.st_mode)
                        == rustix::fs::FileType::Directory =>
                {
                    // Where no submodule exists yet, all of `.git/modules` is read-only;
                    // where one does, its configuration and hooks (the patterns) are, and its
                    // missing `commondir` is watched below: its objects, refs and index stay
                    // git's to write (a rebase refreshes them).
                    let modules = git.join("modules");
                    let had_modules = exists_beneath(root, &modules);
                    make_placeholders(root);
                    if !had_modules && exists_beneath(root, &modules) {
                        extra.push(modules);
                    }
                    // Each submodule's gitfile, which the user's top-level `git status`
                    // follows into the submodule's repository.
                    extra.extend(submodule_gitfiles(root));
                }
                Ok(st)
                    if rustix::fs::FileType::from_raw_mode(st.st_mode)
                        == rustix::fs::FileType::RegularFile =>
                {
                    extra.push(git.to_path_buf());
                }
                _ => {}
            }
        }
        let mut read_only = self.existing_of(root, repository)?;
        for path in extra {
            if !read_only.iter().any(|o| path.starts_with(o)) {
                read_only.retain(|o| !o.starts_with(&path));
                read_only.push(path);
            }
        }
        read_only.sort_by_key(|p| p.components().count());
        let mut watched = Vec::new();
        for anchored in self.anchored(repository) {
            let (literal, all_literal) = literal_part(&anchored);
            if all_literal
                && !exists_beneath(root, &literal)
                && !read_only.iter().any(|o| literal.starts_with(o))
                && !watched.contains(&literal)
            {
                watched.push(literal);
            }
        }
        // Each submodule repository found (a `config` read-only beneath `.git/modules`): its
        // `commondir`, where missing, watched like a literal pattern.
        if repository && self.defaults > 0 {
            let modules = Path::new(REPOSITORY_ENTRY).join("modules");
            for found in &read_only {
                if found.starts_with(&modules)
                    && found.file_name() == Some(std::ffi::OsStr::new("config"))
                    && let Some(repo) = found.parent()
                {
                    let commondir = repo.join("commondir");
                    if !exists_beneath(root, &commondir) && !watched.contains(&commondir) {
                        watched.push(commondir);
                    }
                }
            }
        }
        Ok(SandboxPlan { read_only, watched })
    }
}

/// Whether `rel` is a `.git` entry below the root, or lies beneath one: a submodule's
/// `gitfile` (`sub/.git`, `gitdir: ../.git/modules/sub`), which the user's top-level
/// `git status` follows into the submodule (rewritten to name a planted repository, that
/// repository's `core.fsmonitor` runs), or a nested repository. The tools never need to write
/// there (git does). Sandboxed children are held only where the sandbox keeps the path
/// read-only: the gitfiles `.gitmodules` names ([`submodule_gitfiles`]; see
/// `docs/SECURITY.md`).
fn below_the_root_in_a_repository_entry(rel: &Path) -> bool {
    rel.components()
        .skip(1)
        .any(|c| c.as_os_str() == std::ffi::OsStr::new(REPOSITORY_ENTRY))
}

/// Whether an anchored pattern names a path in the root's repository.
fn in_repository(anchored: &str) -> bool {
    anchored
        .strip_prefix(REPOSITORY_ENTRY)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// The most submodules of `.gitmodules` whose gitfiles a sandboxed run keeps read-only, and
/// the most of the file read.
const MAX_SUBMODULES: usize = 256;
const MAX_GITMODULES_BYTES: usize = 64 * 1024;

/// The gitfiles (`<path>/.git`, a regular file: `gitdir: …`) of the submodules the root's
/// `.gitmodules` names by `path = …`, each reached without following a symbolic link. Read
/// from the file itself (a default protected path, which neither the tools nor a sandboxed
/// child may change), not from git's index, which children write: a gitlink a child stages
/// with no `.gitmodules` entry is not found here (see `docs/SECURITY.md`).
fn submodule_gitfiles(root: std::os::fd::BorrowedFd<'_>) -> Vec<PathBuf> {
    use rustix::fs::{Mode, OFlags};
    let Ok(fd) = rustix::fs::openat(
        root,
        ".gitmodules",
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return Vec::new();
    };
    let regular = |fd: &std::os::fd::OwnedFd| {
        rustix::fs::fstat(fd).is_ok_and(|st| {
            rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile
        })
    };
    if !regular(&fd) {
        return Vec::new();
    }
    let mut text = Vec::new();
    let mut reader = std::io::Read::take(std::fs::File::from(fd), MAX_GITMODULES_BYTES as u64);
    if std::io::Read::read_to_end(&mut reader, &mut text).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&text);
    let mut found = Vec::new();
    for line in text.lines() {
        let Some(value) = line
            .trim()
            .strip_prefix("path")
            .and_then(|rest| rest.trim_start().strip_prefix('='))
        else {
            continue;
        };
        let value = value.trim().trim_matches('"');
        let rel = Path::new(value);
        let plain = !value.is_empty()
            && rel
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !plain {
            continue;
        }
        let gitfile = rel.join(REPOSITORY_ENTRY);
        let is_file = confine_beneath::open_beneath(
            root,
            &gitfile,
            OFlags::PATH | OFlags::NOFOLLOW,
            Symlinks::Refuse,
        )
        .is_ok_and(|fd| regular(&fd));
        if is_file && !found.contains(&gitfile) {
            found.push(gitfile);
            if found.len() == MAX_SUBMODULES {
                break;
            }
        }
    }
    found
}

/// Make the missing [`REPOSITORY_PLACEHOLDERS`] in the root's `.git` (a real directory,
/// reached without following a symlink). A failure leaves the name missing; the plan then
/// watches it like any missing path only if a pattern names it literally, so it is best
/// effort for `worktrees` and `modules` and the hooks and `info` patterns still hold for
/// the file tools.
fn make_placeholders(root: std::os::fd::BorrowedFd<'_>) {
    use rustix::fs::{Mode, OFlags};
    let Ok(git) = confine_beneath::open_beneath(
        root,
        REPOSITORY_ENTRY,
        OFlags::PATH | OFlags::DIRECTORY,
        Symlinks::Refuse,
    ) else {
        return;
    };
    for name in REPOSITORY_PLACEHOLDERS {
        let _ = rustix::fs::mkdirat(&git, *name, Mode::from_raw_mode(0o755));
    }
}

fn refused() -> CallError {
    failed(ErrorKind::PathProtected)
}

impl ProtectedPaths {
    /// The path as the model wrote it: `PATH_PROTECTED` when it is protected.
    pub(crate) fn check_written(&self, path: &RelPath) -> Result<(), CallError> {
        match self.is_protected(Path::new(path.as_str())) {
            true => Err(refused()),
            false => Ok(()),
        }
    }

    /// The path as the model wrote it, for either end of a move: `PATH_PROTECTED` when it is
    /// protected or may hold a protected path.
    pub(crate) fn check_moved(&self, path: &RelPath) -> Result<(), CallError> {
        match self.may_hold(Path::new(path.as_str())) {
            true => Err(refused()),
            false => Ok(()),
        }
    }

    /// The entry `name` in the held directory `dir`, judged where `dir` really stands beneath
    /// the root now: `PATH_PROTECTED` when it is protected (or, with `holders`, may hold a
    /// protected path). A directory no longer beneath the root is `PATH_OUTSIDE_WORKSPACE`.
    pub(crate) fn check_in(
        &self,
        root: &WorkspaceRoot,
        dir: &Dir,
        name: &str,
        holders: bool,
    ) -> Result<(), CallError> {
        if self.is_empty() {
            return Ok(());
        }
        crate::patterns::check_in(
            root,
            dir,
            name,
            ErrorKind::PathProtected,
            |place| match holders {
                true => self.may_hold(place),
                false => self.is_protected(place),
            },
        )
    }
}

/// The most paths [`ProtectedPaths::existing_beneath`] gives (and entries it looks at).
pub const MAX_EXPANDED: usize = 4096;

/// Whether the entry `rel` exists beneath `root` (its parent reached as the tools reach it,
/// the entry itself not followed: a symlink exists as itself).
fn exists_beneath(root: impl AsFd, rel: &Path) -> bool {
    match rel.parent().is_some_and(|p| !p.as_os_str().is_empty()) {
        true => confine_beneath::open_parent_beneath(&root, rel, Symlinks::FollowInside)
            .and_then(|(parent, leaf)| confine_beneath::FileId::at(&parent, leaf))
            .is_ok(),
        // An entry of the root itself.
        false => confine_beneath::FileId::at(&root, rel).is_ok(),
    }
}

/// Every entry beneath `start` (relative to `root`) matching the list, depth first, without
/// following symlinks (`confine_beneath::walk_tree`); at most [`MAX_EXPANDED`] entries
/// looked at.
fn walk_matching(
    list: &ProtectedPaths,
    repository: bool,
    root: impl AsFd,
    start: &Path,
    found: &mut Vec<PathBuf>,
) -> Result<(), usize> {
    let walked = confine_beneath::walk_tree(root, start, MAX_EXPANDED, |rel, kind| {
        if list.matches_list(rel, repository) {
            found.push(rel.to_path_buf());
            return Ok::<_, std::convert::Infallible>(false);
        }
        Ok(kind == EntryKind::Directory)
    });
    walked.map_err(|_| MAX_EXPANDED + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> &Path {
        Path::new(s)
    }

    #[test]
    fn submodule_gitfiles_are_the_plain_paths_of_gitmodules_that_hold_a_gitfile() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        for dir in ["a", "b c", "d", "e", "nested/f", "outside"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        for gitfile in ["a/.git", "b c/.git", "nested/f/.git", "outside/.git"] {
            std::fs::write(root.join(gitfile), "gitdir: ../.git/modules/x\n").unwrap();
        }
        // A directory (a nested repository), a symbolic link: not a gitfile.
        std::fs::create_dir(root.join("d/.git")).unwrap();
        std::os::unix::fs::symlink("../a/.git", root.join("e/.git")).unwrap();
        std::fs::write(
            root.join(".gitmodules"),
            "[submodule \"a\"]\n\tpath = a\n\turl = x\n\
             [submodule \"b\"]\n\tpath = \"b c\"\n\
             [submodule \"d\"]\n\tpath = d\n[submodule \"e\"]\n\tpath=e\n\
             [submodule \"f\"]\n  path =nested/f\n\
             [submodule \"up\"]\n\tpath = ../outside\n[submodule \"abs\"]\n\tpath = /etc\n\
             [submodule \"missing\"]\n\tpath = gone\n[submodule \"a2\"]\n\tpath = a\n",
        )
        .unwrap();
        let dir = std::fs::File::open(root).unwrap();
        let found = submodule_gitfiles(std::os::fd::AsFd::as_fd(&dir));
        assert_eq!(
            found,
            [p("a/.git"), p("b c/.git"), p("nested/f/.git")].map(Path::to_path_buf)
        );
        // No `.gitmodules`, or a symbolic link in its place: nothing.
        std::fs::remove_file(root.join(".gitmodules")).unwrap();
        assert!(submodule_gitfiles(std::os::fd::AsFd::as_fd(&dir)).is_empty());
        std::os::unix::fs::symlink("a/.git", root.join(".gitmodules")).unwrap();
        assert!(submodule_gitfiles(std::os::fd::AsFd::as_fd(&dir)).is_empty());
    }

    #[test]
    fn defaults_protect_what_the_users_git_and_editors_obey_and_nothing_else() {
        let list = ProtectedPaths::default();
        for yes in [
            ".git",
            ".git/hooks",
            ".git/hooks/pre-commit",
            ".git/hooks/sub/x",
            ".git/config",
            ".git/config.worktree",
            ".git/commondir",
            ".git/info",
            ".git/info/attributes",
            ".git/modules/sub/config",
            ".git/modules/a/b/config",
            ".git/modules/sub/hooks/pre-commit",
            ".git/modules/sub/commondir",
            ".git/worktrees",
            ".git/worktrees/w/gitdir",
            "HEAD",
            ".vscode",
            ".vscode/tasks.json",
            ".idea/workspace.xml",
            ".claude/settings.json",
            ".mcp.json",
            ".gitmodules",
            ".envrc",
            "sub/.git",
            "sub/.git/config",
            "sub/.git/hooks/pre-commit",
            "a/b/.git/HEAD",
        ] {
            assert!(list.is_protected(p(yes)), "{yes}");
        }
        for no in [
            ".git/HEAD",
            ".git/objects/ab/cd",
            ".git/config.lock",
            ".git/index",
            ".git/index.lock",
            ".git/refs/heads/main",
            ".git/logs/HEAD",
            ".git/packed-refs",
            ".git/COMMIT_EDITMSG",
            ".git/evil/config",
            ".git/modules/sub/objects/ab/cd",
            ".git/modules/sub/HEAD",
            "hooks/pre-commit",
            "sub/.gitignore",
            "sub/.github/x",
            "sub/.mcp.json",
            "src/config",
            "src/HEAD",
            "config",
            ".github/workflows/ci.yml",
            "",
        ] {
            assert!(!list.is_protected(p(no)), "{no}");
        }
        assert!(list.may_hold(p(".git")));
        assert!(list.may_hold(p(".git/hooks")));
        assert!(list.may_hold(p(".git/modules/sub")));
        assert!(!list.may_hold(p("src")));
        assert!(!list.may_hold(p(".github")));
        assert_eq!(list.default_count(), DEFAULT_PROTECTED.len());
    }

    #[test]
    fn unprotected_defaults_protect_nothing() {
        let list = ProtectedPaths::none();
        assert!(list.is_empty());
        assert!(!list.is_protected(p(".git/hooks/pre-commit")));
        assert!(!list.may_hold(p(".git")));
        let extra = ProtectedPaths::new(false, &["Makefile"]).unwrap();
        assert!(!extra.is_protected(p(".git/config")));
        assert!(extra.is_protected(p("Makefile")));
    }

    #[test]
    fn patterns_are_gitignore_style() {
        let list = ProtectedPaths::new(false, &["*.sh", "/.envrc", "ci/", ".vscode/**"]).unwrap();
        assert!(list.is_protected(p("run.sh")));
        assert!(list.is_protected(p("deep/down/run.sh")));
        assert!(!list.is_protected(p("run.shx")));
        assert!(list.is_protected(p(".envrc")));
        assert!(!list.is_protected(p("sub/.envrc")));
        assert!(list.is_protected(p("ci")));
        assert!(list.is_protected(p("ci/deploy.yml")));
        // As in gitignore, a trailing `/` does not anchor.
        assert!(list.is_protected(p("sub/ci")));
        assert!(list.is_protected(p(".vscode")));
        assert!(list.is_protected(p(".vscode/tasks.json")));
        // `*.sh` may match beneath any directory: every directory may hold one.
        assert!(list.may_hold(p("src")));
    }

    #[test]
    fn bad_patterns_are_refused() {
        for bad in [
            "", " ", "!x", "../x", "a//b", "/", "a/./b", "a\0b", "[", "a/{b",
        ] {
            assert!(ProtectedPaths::new(false, &[bad]).is_err(), "{bad:?}");
        }
        let long = "a".repeat(crate::patterns::MAX_PATTERN_BYTES);
        assert!(ProtectedPaths::new(false, &[long.as_str()]).is_ok());
        let longer = "a".repeat(crate::patterns::MAX_PATTERN_BYTES + 1);
        assert!(ProtectedPaths::new(false, &[longer.as_str()]).is_err());
    }

    #[test]
    fn pattern_count_at_n_and_n_plus_one() {
        let names: Vec<String> = (0..MAX_PROTECTED_PATTERNS)
            .map(|i| format!("f{i}"))
            .collect();
        assert!(ProtectedPaths::new(false, &names).is_ok());
        assert!(ProtectedPaths::new(true, &names).is_err());
        let fewer = &names[..MAX_PROTECTED_PATTERNS - DEFAULT_PROTECTED.len()];
        assert!(ProtectedPaths::new(true, fewer).is_ok());
    }

    #[test]
    fn the_sandbox_plan_makes_the_repositorys_directories_and_watches_missing_names() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join(".git/objects")).unwrap();
        std::fs::write(root.join(".git/config"), "").unwrap();
        std::fs::create_dir_all(root.join(".vscode")).unwrap();
        let list = ProtectedPaths::new(true, &["deploy/run.sh", "*.pem"]).unwrap();
        let dir = std::fs::File::open(root).unwrap();
        // Not the user's repository: its patterns bind nobody, nothing is made.
        let plan = list.sandbox_plan(&dir, false).unwrap();
        assert_eq!(plan.read_only, [PathBuf::from(".vscode")]);
        let watched: Vec<&str> = plan.watched.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(
            watched,
            [
                "HEAD",
                ".idea",
                ".claude",
                ".mcp.json",
                ".gitmodules",
                ".envrc",
                "deploy/run.sh"
            ]
        );
        assert!(!root.join(".git/hooks").exists());
        // The user's repository: its directories made, read-only; its missing files watched.
        let plan = list.sandbox_plan(&dir, true).unwrap();
        let mut read_only: Vec<&str> = plan.read_only.iter().map(|p| p.to_str().unwrap()).collect();
        read_only.sort();
        assert_eq!(
            read_only,
            [
                ".git/config",
                ".git/hooks",
                ".git/info",
                ".git/modules",
                ".git/worktrees",
                ".vscode"
            ]
        );
        let watched: Vec<&str> = plan.watched.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(
            watched,
            [
                ".git/config.worktree",
                ".git/commondir",
                "HEAD",
                ".idea",
                ".claude",
                ".mcp.json",
                ".gitmodules",
                ".envrc",
                "deploy/run.sh"
            ]
        );
        for made in ["hooks", "info", "worktrees", "modules"] {
            assert!(root.join(".git").join(made).is_dir(), "{made}");
        }
        // A `.git` that is a `gitdir:` file is read-only itself.
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join(".git"), "gitdir: elsewhere\n").unwrap();
        let dir = std::fs::File::open(t.path()).unwrap();
        let plan = ProtectedPaths::default().sandbox_plan(&dir, true).unwrap();
        assert_eq!(plan.read_only, [PathBuf::from(".git")]);
    }

    #[test]
    fn existing_beneath_lists_the_outermost_existing_paths() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join(".git/hooks/sub")).unwrap();
        std::fs::write(root.join(".git/config"), "").unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/run.sh"), "").unwrap();
        std::fs::write(root.join("a/x.txt"), "").unwrap();
        std::fs::write(root.join("Makefile"), "").unwrap();
        let list = ProtectedPaths::new(true, &["*.sh", "missing/file", "Makefile"]).unwrap();
        let dir = std::fs::File::open(root).unwrap();
        let got = list.existing_beneath(&dir).unwrap();
        let want: Vec<PathBuf> = [".git/config", ".git/hooks", "Makefile", "a/b/run.sh"]
            .iter()
            .map(PathBuf::from)
            .collect();
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(sorted, want);
        assert!(
            ProtectedPaths::none()
                .existing_beneath(&dir)
                .unwrap()
                .is_empty()
        );
    }
}
