//! The kernel judges the tools: every path-taking tool answers as the kernel's own
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` resolves, with `openat2` available and
//! without it.
//!
//! Generated trees (nested directories, relative and absolute links, `..` inside links, chains
//! of exactly 40 and 41 links, loops, dangling links, FIFOs, links escaping the root into a
//! sibling directory that holds what they name, so an unguarded follow would succeed) are
//! resolved path by path by the kernel in this process, and by each tool (through the tool
//! registry) in a child process: this test binary run again with [`MODE_VAR`] set, which first
//! installs a seccomp filter answering `openat2` with `ENOSYS` (a kernel or a sandbox without
//! it, gVisor) or `EPERM` (a container's profile), or no filter at all. Each side's answer is
//! put in an outcome class (ok, not found, outside, loop, not a directory, not regular,
//! not empty, other) and every disagreement is listed; there must be none. The walks
//! (`list_directory`, `find_files`, `grep`) are also judged on what they return: the entries
//! that the directory the kernel opened holds, never fewer. The tools judged: the readers
//! (`read_file`, `read_lines`, `read_media`, `file_info`) and walkers, and the writers, each
//! call on a fresh copy of the tree (`write_file`, `create_directory`, `delete_file`,
//! `edit_file`, and `move_file` on its source and on its destination's directory).
//!
//! The kernel's resolution runs here, unfiltered; the tools in the child, where the filter is
//! in force for every thread (the crate remembers a missing `openat2`, so a filtered run must
//! be a process of its own).

use crate::support;

use std::collections::BTreeSet;
use std::ffi::CString;
use std::fmt::Write as _;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt as _;
use std::path::{Path, PathBuf};

use confine_tools::{ToolRegistry, ToolSetOptions};
use serde_json::{Value, json};

/// Set in the child: `available`, `enosys` or `eperm`.
const MODE_VAR: &str = "CONFINE_KERNEL_JUDGE_MODE";
/// Set in the child: the directory where it builds its trees and writes its answers.
const DIR_VAR: &str = "CONFINE_KERNEL_JUDGE_DIR";
/// This test's name, run again in the child.
const TEST: &str = "tools_answer_as_openat2_resolves_with_and_without_it";
const MODES: [&str; 3] = ["available", "enosys", "eperm"];
/// Seeds of the randomly generated trees (the hand-written fixture is tree 0).
const RANDOM_TREES: u64 = 4;

// ---------------------------------------------------------------------------------------
// Trees

#[derive(Clone, Debug)]
enum Node {
    Dir(String),
    File(String),
    Fifo(String),
    Link(String, String),
}

impl Node {
    fn path(&self) -> &str {
        match self {
            Node::Dir(p) | Node::File(p) | Node::Fifo(p) | Node::Link(p, _) => p,
        }
    }
}

/// A tree and the paths the tools are asked about in it.
struct Tree {
    nodes: Vec<Node>,
    /// Asked of the tools that read.
    paths: Vec<String>,
    /// Asked of the tools that change the tree (each call on a fresh copy): fewer.
    write_paths: Vec<String>,
}

/// Written for `ws` (the root) inside `base`; `base/outside` holds what escaping links name.
fn build(tree: &Tree, base: &Path) -> PathBuf {
    let ws = base.join("ws");
    let outside = base.join("outside");
    for d in [&ws, &outside, &outside.join("e")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(outside.join("secret.txt"), "secret x\n").unwrap();
    std::fs::write(outside.join("e/f.txt"), "secret x\n").unwrap();
    for node in &tree.nodes {
        let at = ws.join(node.path());
        match node {
            Node::Dir(_) => std::fs::create_dir(&at).unwrap(),
            Node::File(_) => std::fs::write(&at, "text x\n").unwrap(),
            Node::Fifo(_) => rustix::fs::mknodat(
                rustix::fs::CWD,
                &at,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o644),
                0,
            )
            .unwrap(),
            Node::Link(_, target) => {
                // An absolute link into the root names the root as built here.
                let target = target.replace("@ROOT@", ws.to_str().unwrap());
                std::os::unix::fs::symlink(target, &at).unwrap();
            }
        }
    }
    // The kernel's answer to an escape by `..` after 21 to 40 links depends on whether the
    // links' access times are due for an update (see `warm`): settle them first.
    std::thread::sleep(std::time::Duration::from_millis(15));
    for node in &tree.nodes {
        if let Node::Link(p, _) = node {
            std::fs::read_link(ws.join(p)).unwrap();
        }
    }
    ws
}

// `warm`: the kernel first resolves a path in its fast lock-free mode. A `..` that would
// leave the directory sends it back to the start in its slower mode, and the links both passes
// followed count together against its limit of 40: an escape by `..` after 21 to 40 links
// is ELOOP. But following a link whose access time is due for an update (on a `relatime`
// mount, a link never read since it was made) leaves the fast mode on the spot, without a
// restart, and the same escape is EXDEV. `build` reads every link once, a little after making
// it, so the kernel answers as it does for links in use (the fallback answers that way too).

/// A chain of `n` links `{name}0 -> {name}1 -> … -> {name}{n-1} -> last`: `n` follows.
fn chain(nodes: &mut Vec<Node>, name: &str, n: usize, last: &str) {
    for i in 0..n {
        let target = if i + 1 == n {
            last.to_owned()
        } else {
            format!("{name}{}", i + 1)
        };
        nodes.push(Node::Link(format!("{name}{i}"), target));
    }
}

/// The hand-written tree: one of each shape.
fn fixture() -> Tree {
    let mut nodes = vec![
        Node::Dir("d".into()),
        Node::Dir("d/e".into()),
        Node::File("d/e/f.txt".into()),
        Node::File("d/g.txt".into()),
        Node::File("top.txt".into()),
        Node::Dir("empty".into()),
        Node::Fifo("p".into()),
        Node::Fifo("d/e/q".into()),
    ];
    let links = [
        ("rel_in", "d/e"),
        ("rel_file", "d/g.txt"),
        ("dot_in", "d/../d/e"),
        ("up_in", "d/e/../../d"),
        ("d/e/up2", "../.."),
        ("d/e/up3", "../../.."),
        ("d/e/sib", "../g.txt"),
        ("esc_up", "../outside"),
        ("esc_deep", "d/../../outside/secret.txt"),
        ("abs_out", "/etc"),
        ("abs_in", "@ROOT@/d"),
        ("dangling", "nope"),
        ("dangling_dir", "nope/x"),
        ("dangling_out", "../nowhere"),
        ("loop_a", "loop_b"),
        ("loop_b", "loop_a"),
        ("selfloop", "selfloop"),
        ("loop_dir", "loop_dir/x"),
        ("pl", "p"),
        ("slash_file", "d/g.txt/"),
        ("slash_dir", "d/"),
        ("dot", "."),
        ("dotdot", ".."),
        ("via_file", "top.txt/x"),
        ("d/e/deep_esc", "../../../outside/e"),
        ("to_chain40", "c40_0"),
    ];
    for (at, to) in links {
        nodes.push(Node::Link(at.into(), to.into()));
    }
    // The kernel follows 40 links and refuses the 41st (ELOOP).
    chain(&mut nodes, "c40_", 40, "d");
    chain(&mut nodes, "c41_", 41, "d");
    chain(&mut nodes, "c39_", 39, "d");
    // Escapes at the end of long chains: refused as escaping while within 40 follows, as a
    // loop past them.
    chain(&mut nodes, "e25_", 25, "../outside");
    chain(&mut nodes, "e40_", 40, "../outside");
    chain(&mut nodes, "e41_", 41, "../outside");
    let tops: Vec<String> = nodes
        .iter()
        .map(|n| n.path().to_owned())
        .filter(|p| {
            // Every entry, but only the heads of the chains (their members add nothing).
            !(p.starts_with('c') || p.starts_with('e')) || p.ends_with("_0") || p == "empty"
        })
        .collect();
    let mut paths = Vec::new();
    let mut write_paths = Vec::new();
    for p in &tops {
        paths.push(p.clone());
        write_paths.push(p.clone());
        write_paths.push(format!("{p}/x"));
        for tail in [
            "e",
            "e/f.txt",
            "g.txt",
            "x",
            "secret.txt",
            "passwd",
            "f.txt",
        ] {
            paths.push(format!("{p}/{tail}"));
        }
    }
    paths.extend(
        [
            "c40_0/e/f.txt",
            "to_chain40/e",
            "d/e/up2/d/g.txt",
            "d/e/up3/outside/secret.txt",
            "rel_in/up2/top.txt",
            "rel_in/sib",
            "c39_0/e/up2/rel_in",
        ]
        .map(String::from),
    );
    // Files reached through links, for the tools that change an entry itself (`edit_file`,
    // `move_file`'s source, `delete_file`).
    write_paths.extend(
        [
            "rel_in/f.txt",
            "up_in/g.txt",
            "c40_0/g.txt",
            "c41_0/g.txt",
            "d/e/up2/top.txt",
            "esc_up/secret.txt",
            "d/e/up3/outside/secret.txt",
            "to_chain40/e/f.txt",
        ]
        .map(String::from),
    );
    paths.sort();
    paths.dedup();
    write_paths.sort();
    write_paths.dedup();
    Tree {
        nodes,
        paths,
        write_paths,
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, v: &'a [String]) -> &'a str {
        &v[self.below(v.len())]
    }
}

/// A random tree: directories nested at random, files, a FIFO, and links whose targets are
/// made of `..`, `.`, names of the tree, missing names, and now and then an absolute path.
fn random(seed: u64) -> Tree {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut nodes = Vec::new();
    let mut dirs = vec![String::new()];
    let mut names: Vec<String> = vec!["..".into(), ".".into(), "nope".into(), "..".into()];
    let join = |d: &str, n: &str| {
        if d.is_empty() {
            n.to_owned()
        } else {
            format!("{d}/{n}")
        }
    };
    for i in 0..6 {
        let parent = rng.pick(&dirs).to_owned();
        let name = format!("d{i}");
        let p = join(&parent, &name);
        nodes.push(Node::Dir(p.clone()));
        dirs.push(p);
        names.push(name);
    }
    for i in 0..5 {
        let parent = rng.pick(&dirs).to_owned();
        let name = format!("f{i}.txt");
        nodes.push(Node::File(join(&parent, &name)));
        names.push(name);
    }
    let parent = rng.pick(&dirs).to_owned();
    nodes.push(Node::Fifo(join(&parent, "fifo")));
    names.push("fifo".into());
    let mut links = Vec::new();
    for i in 0..10 {
        names.push(format!("l{i}"));
    }
    for i in 0..10 {
        let parent = rng.pick(&dirs).to_owned();
        let target = match rng.below(10) {
            0 => "/etc".to_owned(),
            1 => format!("@ROOT@/{}", rng.pick(&dirs)),
            _ => {
                let n = 1 + rng.below(4);
                let parts: Vec<&str> = (0..n).map(|_| rng.pick(&names)).collect();
                parts.join("/")
            }
        };
        let p = join(&parent, &format!("l{i}"));
        nodes.push(Node::Link(p.clone(), target));
        links.push(p);
    }
    let mut paths: Vec<String> = nodes.iter().map(|n| n.path().to_owned()).collect();
    let write_paths = paths.clone();
    // Paths through links: each link followed by one or two names of the tree.
    for _ in 0..40 {
        let head = rng.pick(&links).to_owned();
        let n = 1 + rng.below(2);
        let mut p = head;
        for _ in 0..n {
            let name = loop {
                let candidate = rng.pick(&names);
                if candidate != "." && candidate != ".." {
                    break candidate.to_owned();
                }
            };
            p = format!("{p}/{name}");
        }
        paths.push(p);
    }
    paths.sort();
    paths.dedup();
    Tree {
        nodes,
        paths,
        write_paths,
    }
}

fn trees() -> Vec<Tree> {
    std::iter::once(fixture())
        .chain((1..=RANDOM_TREES).map(random))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Outcome classes

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Ok,
    NotFound,
    Outside,
    Loop,
    NotDir,
    NotRegular,
    NotEmpty,
    /// A regular file that is no image (every file of the trees holds text).
    NotMedia,
    /// A write target that is a symlink staying inside the root.
    Symlink,
    Other,
}

impl Class {
    fn of_errno(e: i32) -> Self {
        match e {
            libc::ENOENT => Class::NotFound,
            libc::EXDEV => Class::Outside,
            libc::ELOOP => Class::Loop,
            libc::ENOTDIR => Class::NotDir,
            _ => Class::Other,
        }
    }

    fn of_token(token: &str) -> Self {
        match token {
            "" => Class::Ok,
            "FILE_NOT_FOUND" => Class::NotFound,
            "PATH_OUTSIDE_WORKSPACE" => Class::Outside,
            "SYMLINK_LOOP" => Class::Loop,
            "NOT_A_DIRECTORY" | "WRITE_PARENT_NOT_DIRECTORY" => Class::NotDir,
            "FILE_NOT_REGULAR" => Class::NotRegular,
            "DELETE_DIRECTORY_NOT_EMPTY" => Class::NotEmpty,
            "FILE_NOT_MEDIA" => Class::NotMedia,
            "WRITE_TARGET_SYMLINK" => Class::Symlink,
            _ => Class::Other,
        }
    }
}

// ---------------------------------------------------------------------------------------
// The kernel's answers

/// `struct open_how` of `openat2(2)`.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_BENEATH: u64 = 0x08;

/// The kernel's `openat2(dir, rel, flags, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`.
#[expect(
    unsafe_code,
    reason = "openat2 has no wrapper in std; the call is the oracle itself"
)]
fn openat2(dir: &OwnedFd, rel: &str, flags: i32) -> Result<OwnedFd, i32> {
    let path = CString::new(rel).unwrap();
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    for _ in 0..64 {
        // SAFETY: a valid descriptor, a NUL-terminated path and an `open_how` of the size
        // passed, all alive for the call; a non-negative result is a new descriptor we own.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                path.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if fd >= 0 {
            // SAFETY: the kernel just returned this descriptor to us.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) });
        }
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap();
        if errno != libc::EAGAIN {
            return Err(errno);
        }
    }
    panic!("openat2 kept answering EAGAIN for {rel}");
}

fn kind_of(fd: &OwnedFd) -> rustix::fs::FileType {
    rustix::fs::FileType::from_raw_mode(rustix::fs::fstat(fd).unwrap().st_mode)
}

/// What the directory the kernel opened holds, walked without following a symlink: paths
/// relative to the root (`prefix` is the directory's), with `/` after a directory's name.
fn kernel_walk(fd: &OwnedFd, prefix: &str, deep: bool) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let at = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    let mut stack = vec![(std::fs::canonicalize(&at).unwrap(), prefix.to_owned())];
    while let Some((dir, rel)) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_str().unwrap().to_owned();
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let t = entry.file_type().unwrap();
            if t.is_dir() {
                out.insert(format!("{path}/"));
                if deep {
                    stack.push((entry.path(), path));
                }
            } else if t.is_file() {
                out.insert(path);
            } else if t.is_symlink() {
                out.insert(format!("{path}@"));
            } else {
                out.insert(format!("{path}|"));
            }
        }
    }
    out
}

/// Where the symlink at `path` leads, for a write tool that refuses it: outside the root
/// (`..` past it, or an absolute target not within it) or not.
fn link_class(root: &OwnedFd, path: &str) -> Class {
    use libc::{O_DIRECTORY, O_PATH};
    let (dir, name) = match path.rsplit_once('/') {
        Some((parent, name)) => (openat2(root, parent, O_PATH | O_DIRECTORY).unwrap(), name),
        None => (openat2(root, ".", O_PATH | O_DIRECTORY).unwrap(), path),
    };
    let target = PathBuf::from(std::ffi::OsString::from_vec(
        rustix::fs::readlinkat(&dir, name, Vec::new())
            .unwrap()
            .into_bytes(),
    ));
    let ws = std::fs::canonicalize(format!("/proc/self/fd/{}", root.as_raw_fd())).unwrap();
    let resolved = match target.strip_prefix(&ws) {
        _ if target.is_relative() => openat2(root, path, O_PATH),
        Ok(rest) if rest.as_os_str().is_empty() => openat2(root, ".", O_PATH),
        Ok(rest) => openat2(root, rest.to_str().unwrap(), O_PATH),
        Err(_) => return Class::Outside,
    };
    match resolved {
        Err(libc::EXDEV) => Class::Outside,
        _ => Class::Symlink,
    }
}

/// The kernel's answer for `tool` on `path`: a class, and for a walk what it must list.
fn kernel(root: &OwnedFd, tool: &str, path: &str) -> (Class, Option<BTreeSet<String>>) {
    use libc::{O_DIRECTORY, O_NOFOLLOW, O_PATH, O_RDONLY};
    let class = |r: Result<OwnedFd, i32>| r.map_or_else(Class::of_errno, |_| Class::Ok);
    match tool {
        // The file must be a regular file; a component that is not a directory is
        // FILE_NOT_FOUND in the read tools' contract.
        // read_media reads as read_file does; the trees' files hold text, not images.
        "read_file" | "read_lines" | "read_media" => match openat2(root, path, O_PATH) {
            Ok(fd) if kind_of(&fd) == rustix::fs::FileType::RegularFile => match tool {
                "read_media" => (Class::NotMedia, None),
                _ => (Class::Ok, None),
            },
            Ok(_) => (Class::NotRegular, None),
            Err(libc::ENOTDIR) => (Class::NotFound, None),
            Err(e) => (Class::of_errno(e), None),
        },
        // lstat: the last component is not followed; a parent that is not a directory is
        // NOT_A_DIRECTORY.
        // move_file's source as well: the entry itself moves (a link as a link).
        "file_info" | "move_file(source)" => {
            (class(openat2(root, path, O_PATH | O_NOFOLLOW)), None)
        }
        // The parent followed (a component that is not a directory is NOT_A_DIRECTORY), the
        // file itself never: it must be regular; a symlink is refused as one, or as leading
        // outside where it does (an absolute link naming a place inside the root is taken as
        // that place).
        "edit_file" => {
            if let Some((parent, _)) = path.rsplit_once('/')
                && let Err(e) = openat2(root, parent, O_PATH | O_DIRECTORY)
            {
                return (Class::of_errno(e), None);
            }
            match openat2(root, path, O_PATH | O_NOFOLLOW) {
                Ok(fd) => match kind_of(&fd) {
                    rustix::fs::FileType::RegularFile => (Class::Ok, None),
                    rustix::fs::FileType::Symlink => (link_class(root, path), None),
                    _ => (Class::NotRegular, None),
                },
                Err(e) => (Class::of_errno(e), None),
            }
        }
        // The entry itself (a link is removed as a link); a directory must be empty.
        "delete_file" => match openat2(root, path, O_PATH | O_NOFOLLOW) {
            Ok(fd) if kind_of(&fd) == rustix::fs::FileType::Directory => {
                let empty =
                    kernel_walk(&openat2(root, path, O_RDONLY).unwrap(), "", false).is_empty();
                (if empty { Class::Ok } else { Class::NotEmpty }, None)
            }
            r => (class(r), None),
        },
        // A directory (grep also takes one file), listed: the path itself NOT_A_DIRECTORY,
        // a component above it FILE_NOT_FOUND.
        "list_directory" | "find_files" | "grep" => {
            match openat2(root, path, O_RDONLY | O_DIRECTORY) {
                Ok(fd) => {
                    let deep = tool != "list_directory";
                    (Class::Ok, Some(kernel_walk(&fd, path, deep)))
                }
                Err(libc::ENOTDIR) => match openat2(root, path, O_PATH) {
                    Ok(fd)
                        if tool == "grep" && kind_of(&fd) == rustix::fs::FileType::RegularFile =>
                    {
                        (Class::Ok, Some(BTreeSet::from([path.to_owned()])))
                    }
                    // grep takes one file too: a FIFO or a device is not a regular one.
                    Ok(_) if tool == "grep" => (Class::NotRegular, None),
                    Ok(_) => (Class::NotDir, None),
                    Err(libc::ENOTDIR) => (Class::NotFound, None),
                    Err(e) => (Class::of_errno(e), None),
                },
                Err(e) => (Class::of_errno(e), None),
            }
        }
        // `<path>/new.txt` and `<path>/newdir`: missing directories on the way are created,
        // except through a dangling link (nothing is created where a link leads).
        // move_file's destination is `<path>/moved.txt`, its parents made as write_file's.
        "write_file" | "create_directory" | "move_file(destination)" => {
            let parts: Vec<&str> = path.split('/').collect();
            for i in 1..=parts.len() {
                let prefix = parts[..i].join("/");
                match openat2(root, &prefix, O_PATH | O_DIRECTORY) {
                    Ok(_) => {}
                    Err(libc::ENOENT) => {
                        return match openat2(root, &prefix, O_PATH | O_NOFOLLOW) {
                            // A dangling link (or one whose target's parents are missing).
                            Ok(_) => (Class::NotDir, None),
                            Err(libc::ENOENT) => (Class::Ok, None),
                            Err(e) => (Class::of_errno(e), None),
                        };
                    }
                    Err(e) => return (Class::of_errno(e), None),
                }
            }
            (Class::Ok, None)
        }
        _ => unreachable!("{tool}"),
    }
}

// ---------------------------------------------------------------------------------------
// The tools' answers

const READING: [&str; 7] = [
    "read_file",
    "read_lines",
    "read_media",
    "file_info",
    "list_directory",
    "find_files",
    "grep",
];
/// `move_file` is judged twice: on the path as its source (moved to a new name at the root),
/// and on the path as the directory of its destination (`<path>/moved.txt`, a file made at
/// the root moved there).
const WRITING: [&str; 6] = [
    "write_file",
    "create_directory",
    "delete_file",
    "edit_file",
    "move_file(source)",
    "move_file(destination)",
];

/// The file `move_file(destination)` moves, made at the root of the tree's copy before the
/// call (no tree has an entry of that name).
const MOVED: &str = "moved-source.txt";

/// The tool a judged case calls.
fn tool_name(case: &str) -> &str {
    case.split_once('(').map_or(case, |(name, _)| name)
}

fn registry(ws: &Path) -> ToolRegistry {
    confine_tools::create_workspace_tools(ws, ToolSetOptions::default()).unwrap()
}

fn arguments(tool: &str, path: &str) -> Value {
    match tool {
        "find_files" => json!({"pattern": "**", "path": path, "includeIgnored": true}),
        "grep" => json!({"pattern": "x", "path": path, "maxMatches": 1000}),
        "write_file" => json!({"path": format!("{path}/new.txt"), "content": "new x\n"}),
        "create_directory" => json!({"path": format!("{path}/newdir")}),
        // Every file of the trees (and outside them) ends its one line with ` x`.
        "edit_file" => json!({"path": path, "edits": [{"oldText": " x\n", "newText": " y\n"}]}),
        "move_file(source)" => json!({"source": path, "destination": "moved-new"}),
        "move_file(destination)" => {
            json!({"source": MOVED, "destination": format!("{path}/moved.txt")})
        }
        _ => json!({"path": path}),
    }
}

/// What a successful walk returned, as [`kernel_walk`] writes it.
fn listed(tool: &str, path: &str, out: &Value) -> Option<BTreeSet<String>> {
    let mut set = BTreeSet::new();
    match tool {
        "list_directory" => {
            for e in out["entries"].as_array()? {
                let name = e["name"].as_str()?;
                let p = format!("{path}/{name}");
                set.insert(match e["kind"].as_str()? {
                    "directory" => format!("{p}/"),
                    "file" => p,
                    "symlink" => format!("{p}@"),
                    _ => format!("{p}|"),
                });
            }
        }
        "find_files" => {
            for p in out["paths"].as_array()? {
                set.insert(p.as_str()?.to_owned());
            }
        }
        "grep" => {
            for m in out["matches"].as_array()? {
                set.insert(m["path"].as_str()?.to_owned());
            }
        }
        _ => return None,
    }
    Some(set)
}

/// The walk's answer, compared as far as the tool tells: `find_files` returns what matched
/// `**` (files, symlinks and FIFOs, not directories), `grep` the files holding `x` (every
/// regular file here).
fn expected_listing(tool: &str, kernel: &BTreeSet<String>) -> BTreeSet<String> {
    match tool {
        "list_directory" => kernel.clone(),
        "find_files" => kernel
            .iter()
            .filter(|p| !p.ends_with('/'))
            .map(|p| p.trim_end_matches(['@', '|']).to_owned())
            .collect(),
        _ => kernel
            .iter()
            .filter(|p| !p.ends_with(['/', '@', '|']))
            .cloned()
            .collect(),
    }
}

/// One tool call: its token ("" for success) and the walk's listing.
fn call(
    rt: &tokio::runtime::Runtime,
    reg: &ToolRegistry,
    tool: &str,
    path: &str,
) -> (String, Option<BTreeSet<String>>) {
    let r = support::call_on(rt, reg, tool_name(tool), &arguments(tool, path));
    let v: Value = serde_json::from_str(&r.content).unwrap();
    if r.is_error {
        let token = v["error"]["message"].as_str().unwrap_or("?").to_owned();
        return (token, None);
    }
    let skipped = v["skipped"].as_u64().unwrap_or(0);
    let mut listing = listed(tool, path, &v);
    if skipped > 0 {
        // A walk that left something out says so; the comparison shows what.
        listing
            .get_or_insert_default()
            .insert(format!("<skipped {skipped}>"));
    }
    (String::new(), listing)
}

/// One answer line: `tree<TAB>tool<TAB>path<TAB>token<TAB>listing` (entries joined by NUL).
fn answer_line(
    tree: usize,
    tool: &str,
    path: &str,
    token: &str,
    listing: Option<&BTreeSet<String>>,
) -> String {
    let listing = listing.map_or_else(
        || "-".to_owned(),
        |l| l.iter().cloned().collect::<Vec<_>>().join("\u{1}"),
    );
    format!("{tree}\t{tool}\t{path}\t{token}\t{listing}\n")
}

/// The child's part: every tool on every path of every tree, answers written to `out`.
fn run_tools(dir: &Path, out: &Path) {
    let rt = support::runtime();
    let mut lines = String::new();
    for (t, tree) in trees().iter().enumerate() {
        let base = dir.join(format!("t{t}"));
        let ws = build(tree, &base);
        let reg = registry(&ws);
        for tool in READING {
            for path in &tree.paths {
                let (token, listing) = call(&rt, &reg, tool, path);
                lines.push_str(&answer_line(t, tool, path, &token, listing.as_ref()));
            }
        }
        // A tool that changes the tree gets a fresh one for each call.
        for tool in WRITING {
            for (i, path) in tree.write_paths.iter().enumerate() {
                let base = dir.join(format!("t{t}-{tool}-{i}"));
                let ws = build(tree, &base);
                if tool == "move_file(destination)" {
                    std::fs::write(ws.join(MOVED), "moved x\n").unwrap();
                }
                let (token, _) = call(&rt, &registry(&ws), tool, path);
                lines.push_str(&answer_line(t, tool, path, &token, None));
                std::fs::remove_dir_all(&base).unwrap();
            }
        }
    }
    std::fs::write(out, lines).unwrap();
}

// ---------------------------------------------------------------------------------------
// The filter

/// Install, for every thread of this process, a seccomp filter that answers `openat2` (and
/// nothing else) with `errno`.
#[expect(
    unsafe_code,
    reason = "prctl and seccomp have no safe wrapper in the test's dependencies"
)]
fn filter_openat2(errno: i32) {
    #[cfg(target_arch = "x86_64")]
    const ARCH: u32 = 0xc000_003e; // AUDIT_ARCH_X86_64
    #[cfg(target_arch = "aarch64")]
    const ARCH: u32 = 0xc000_00b7; // AUDIT_ARCH_AARCH64
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let mut program = [
        // seccomp_data.arch at offset 4: another architecture's calls pass untouched.
        op(LD_W_ABS, 0, 0, 4),
        op(JEQ_K, 0, 3, ARCH),
        // seccomp_data.nr at offset 0.
        op(LD_W_ABS, 0, 0, 0),
        op(JEQ_K, 0, 1, libc::SYS_openat2 as u32),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | errno as u32),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_mut_ptr(),
    };
    // SAFETY: plain prctl and seccomp calls on this process, the program alive for the call.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        let r = libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_TSYNC,
            &prog as *const libc::sock_fprog,
        );
        assert_eq!(r, 0, "seccomp: {}", std::io::Error::last_os_error());
    }
}

// ---------------------------------------------------------------------------------------
// The test

/// The child's part, when [`MODE_VAR`] is set: filter, check the filter, run the tools.
fn child(mode: &str, dir: &Path) {
    let probe_dir =
        rustix::fs::open(".", rustix::fs::OFlags::PATH, rustix::fs::Mode::empty()).unwrap();
    let want = match mode {
        "available" => None,
        "enosys" => Some(libc::ENOSYS),
        "eperm" => Some(libc::EPERM),
        _ => panic!("unknown mode {mode}"),
    };
    if let Some(errno) = want {
        filter_openat2(errno);
    }
    // The filter is in force (or absent) in this thread and in a new one.
    for _ in 0..2 {
        let got = std::thread::scope(|s| {
            s.spawn(|| openat2(&probe_dir, ".", libc::O_PATH).err())
                .join()
                .unwrap()
        });
        assert_eq!(got, want, "openat2 in a thread of the {mode} child");
    }
    run_tools(&dir.join(mode), &dir.join(format!("{mode}.tsv")));
}

#[test]
fn tools_answer_as_openat2_resolves_with_and_without_it() {
    if let (Some(mode), Some(dir)) = (std::env::var_os(MODE_VAR), std::env::var_os(DIR_VAR)) {
        child(mode.to_str().unwrap(), Path::new(&dir));
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let probe = rustix::fs::open(
        tmp.path(),
        rustix::fs::OFlags::PATH,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    if openat2(&probe, ".", libc::O_PATH).err() == Some(libc::ENOSYS) {
        testkit::not_run(TEST, "this kernel has no openat2 to judge the tools by");
        return;
    }
    // The kernel's answers, on pristine trees built here.
    let mut expected = std::collections::HashMap::new();
    for (t, tree) in trees().iter().enumerate() {
        let ws = build(tree, &tmp.path().join(format!("oracle{t}")));
        let root = rustix::fs::open(
            &ws,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        for (tools, paths) in [
            (&READING[..], &tree.paths),
            (&WRITING[..], &tree.write_paths),
        ] {
            for tool in tools {
                for path in paths {
                    let answer = kernel(&root, tool, path);
                    expected.insert((t, tool.to_string(), path.clone()), answer);
                }
            }
        }
    }
    let exe = std::env::current_exe().unwrap();
    let mut report = String::new();
    let mut total = 0usize;
    for mode in MODES {
        #[allow(
            clippy::disallowed_methods,
            reason = "this test binary run again, filtered"
        )]
        let out = std::process::Command::new(&exe)
            .args(["--exact", &support::exact(module_path!(), TEST)])
            .args(["--test-threads", "1", "--nocapture"])
            .env(MODE_VAR, mode)
            .env(DIR_VAR, tmp.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the {mode} child failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let answers = std::fs::read_to_string(tmp.path().join(format!("{mode}.tsv"))).unwrap();
        let mut count = 0usize;
        let mut seen = 0usize;
        let mut kinds = std::collections::BTreeMap::new();
        for line in answers.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            let (t, tool, path, token) = (f[0].parse::<usize>().unwrap(), f[1], f[2], f[3]);
            let listing: Option<BTreeSet<String>> = (f[4] != "-").then(|| {
                f[4].split('\u{1}')
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            });
            let (want, want_listing) = &expected[&(t, tool.to_owned(), path.to_owned())];
            seen += 1;
            let got = Class::of_token(token);
            let mut wrong = (got != *want).then(|| format!("kernel {want:?}, tool {token:?}"));
            if wrong.is_none()
                && let Some(k) = want_listing
            {
                let want_set = expected_listing(tool, k);
                let got_set = listing.unwrap_or_default();
                if want_set != got_set {
                    let missing: Vec<_> = want_set.difference(&got_set).collect();
                    let extra: Vec<_> = got_set.difference(&want_set).collect();
                    wrong = Some(format!("listing: missing {missing:?}, extra {extra:?}"));
                }
            }
            if let Some(why) = wrong {
                count += 1;
                *kinds
                    .entry(format!(
                        "{tool}: {}",
                        why.split(", extra")
                            .next()
                            .unwrap_or("")
                            .split(" [")
                            .next()
                            .unwrap_or("")
                    ))
                    .or_insert(0usize) += 1;
                if count <= 40 {
                    let _ = writeln!(report, "[{mode}] tree {t} {tool} {path}: {why}");
                }
            }
        }
        assert_eq!(seen, expected.len(), "the {mode} child answered every case");
        for (kind, n) in &kinds {
            let _ = writeln!(report, "[{mode}] {n} x {kind}");
        }
        let _ = writeln!(report, "[{mode}] {count} disagreements of {seen}");
        total += count;
    }
    assert_eq!(total, 0, "the tools disagree with the kernel:\n{report}");
    eprintln!("{report}");
}
