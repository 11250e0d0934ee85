//! Faults from outside: a workspace on a small tmpfs filled until the kernel answers `ENOSPC`
//! (data blocks first, then inodes too), then remounted read-only (`EROFS`), and a server out
//! of file descriptors (`EMFILE`). Every tool is called through one long-lived `confine call`
//! in each state (out of descriptors, the file tools through `confine mcp` too). Each answer must be a success or a token the tool documents (never a panic,
//! never a host path), the old content must stay intact, no `.pify-` temporary may be left,
//! and the same server must answer afterwards, and write again once space is freed, the
//! filesystem writable again or descriptors available.
//!
//! Mounting needs a mount namespace: the test re-executes itself under
//! `unshare --user --map-root-user --mount` (an ordinary user may mount a tmpfs there), or, as
//! root where user namespaces are refused (some containers), `unshare --mount`. If neither
//! works the test fails with the reason; it never passes by skipping.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

use crate::support;
use support::{confine, pify_entries};

/// The variable that tells a re-executed test binary it runs inside the namespace, and where
/// to mount.
const INNER: &str = "CONFINE_FAULTS_MOUNT_AT";

/// The tokens each tool documents (docs/TOOLS.md), execution failures only.
fn documented(tool: &str) -> &'static [&'static str] {
    const FILE: &[&str] = &[
        "WORKSPACE_ROOT_CHANGED",
        "PATH_OUTSIDE_WORKSPACE",
        "FILE_NOT_FOUND",
        "NOT_A_DIRECTORY",
        "FILE_NOT_REGULAR",
        "FILE_TOO_LARGE",
        "FILE_NOT_UTF8",
        "PATH_CHANGED_DURING_READ",
    ];
    let own: &[&str] = match tool {
        "read_file" | "read_lines" | "read_media" | "list_directory" | "find_files" | "grep"
        | "file_info" => &["READ_FAILED"],
        "write_file" | "edit_file" | "create_directory" | "move_file" | "delete_file" => &[
            "WRITE_FAILED",
            "READ_FAILED",
            "WRITE_PARENT_NOT_DIRECTORY",
            "WRITE_TEMP_NOT_REGULAR",
            "WRITE_TEMP_IDENTITY_CHANGED",
            "WRITE_TEMP_CLEANUP_FAILED",
            "WRITE_TARGET_REPLACED",
            "EDIT_CONFLICT",
            "EDIT_TEXT_NOT_FOUND",
            "EDIT_TEXT_NOT_UNIQUE",
            "WRITE_TARGET_SYMLINK",
            "WRITE_TARGET_NOT_REGULAR",
            "MOVE_DESTINATION_EXISTS",
            "DELETE_DIRECTORY_NOT_EMPTY",
            "PATH_PROTECTED",
        ],
        "node_process" => &[
            // A loaded machine can take longer than the default 500 ms to start Node.js.
            "NODE_PROCESS_TIMEOUT",
            "NODE_PROCESS_START_FAILED",
            "NODE_PROCESS_OUTPUT_FAILED",
            "NODE_SCRIPT_NOT_REGULAR",
            "NODE_SCRIPT_IDENTITY_CHANGED",
            "NODE_SCRIPT_CLEANUP_FAILED",
            "NODE_PROCESS_FAILED",
        ],
        "run_command" => &[
            "RUN_COMMAND_START_FAILED",
            "RUN_COMMAND_OUTPUT_FAILED",
            "RUN_COMMAND_FAILED",
        ],
        other => panic!("no documented tokens for {other}"),
    };
    own.iter().chain(FILE).copied().collect::<Vec<_>>().leak()
}

/// One long-lived `confine call --allow-commands` session over a workspace.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next: u64,
    /// A host path that no answer may hold.
    host: String,
}

/// What a call answered: its record, or its token.
type Answer = Result<Value, String>;

impl Session {
    fn start(root: &Path, host: &Path) -> Self {
        let mut child = confine()
            // A generous bound: a loaded machine is slow to start Node.js, and a timeout is
            // not what these tests look at.
            .args([
                "call",
                // So that `limit_leaving` may read the server's `/proc/<pid>/fd` when the
                // tests run as an ordinary user.
                "--keep-dumpable",
                "--allow-commands",
                "--timeout-ms",
                "30000",
                "--root",
            ])
            .arg(root)
            .env("CONFINE_LOG", "debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn confine call");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
            next: 0,
            host: host.to_string_lossy().into_owned(),
        }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// One call: the answer must carry the id, no host path, and be a success or a token the
    /// tool documents.
    fn call(&mut self, name: &str, arguments: Value) -> Answer {
        self.next += 1;
        let id = self.next;
        let line = json!({"id": id, "name": name, "arguments": arguments}).to_string();
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").expect("confine call takes its input");
        stdin.flush().unwrap();
        let mut out = String::new();
        let n = self.stdout.read_line(&mut out).unwrap();
        assert!(n > 0, "confine call stopped answering at {line}");
        assert!(!out.contains(&self.host), "a host path in {out}");
        let out: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(out["id"], json!(id), "{out}");
        let content = out["content"].clone();
        if out["isError"] == json!(false) {
            return Ok(content);
        }
        assert_eq!(out["isError"], json!(true), "{out}");
        let error = content["error"].as_object().expect("an error record");
        assert_eq!(error.len(), 2, "{out}");
        assert_eq!(error["code"], json!("TOOL_EXECUTION_FAILED"), "{out}");
        let token = error["message"].as_str().unwrap().to_owned();
        assert!(
            documented(name).contains(&token.as_str()),
            "{name} answered {token}, which it does not document: {out}"
        );
        Err(token)
    }

    /// End the session: it must exit 0 without a panic on its stderr, which is returned (the
    /// server's debug log).
    fn close(mut self) -> String {
        drop(self.stdin.take());
        let mut stderr = String::new();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let status = self.child.wait().unwrap();
        assert!(
            !stderr.contains("panicked"),
            "confine call panicked: {stderr}"
        );
        assert!(status.success(), "confine call exited {status}: {stderr}");
        stderr
    }
}

/// Every tool once, against the files [`populate`] made; `tag` keeps the entries each round
/// moves or deletes apart. Returns each tool's answer under a label.
fn every_tool(s: &mut Session, tag: &str) -> BTreeMap<&'static str, Answer> {
    let mut got = BTreeMap::new();
    got.insert(
        "read_file",
        s.call("read_file", json!({"path": "keep.txt"})),
    );
    got.insert(
        "read_lines",
        s.call("read_lines", json!({"path": "keep.txt"})),
    );
    got.insert(
        "read_media",
        s.call("read_media", json!({"path": "pic.png"})),
    );
    got.insert(
        "list_directory",
        s.call("list_directory", json!({"path": "src"})),
    );
    got.insert(
        "find_files",
        s.call("find_files", json!({"pattern": "**/*.rs"})),
    );
    got.insert("grep", s.call("grep", json!({"pattern": "needle"})));
    got.insert(
        "file_info",
        s.call("file_info", json!({"path": "keep.txt"})),
    );
    got.insert(
        "edit_file",
        s.call(
            "edit_file",
            json!({"path": "keep.txt", "edits": [{"oldText": "OLD", "newText": "EDITED"}]}),
        ),
    );
    got.insert(
        "write_file",
        s.call("write_file", json!({"path": "keep.txt", "content": NEW})),
    );
    got.insert(
        "write_file new",
        s.call(
            "write_file",
            json!({"path": format!("new-{tag}.txt"), "content": "fresh"}),
        ),
    );
    got.insert(
        "write_file empty",
        s.call(
            "write_file",
            json!({"path": format!("empty-{tag}.txt"), "content": ""}),
        ),
    );
    got.insert(
        "create_directory",
        s.call(
            "create_directory",
            json!({"path": format!("made-{tag}/sub")}),
        ),
    );
    got.insert(
        "move_file",
        s.call(
            "move_file",
            json!({"source": format!("movable-{tag}.txt"), "destination": format!("moved-{tag}.txt")}),
        ),
    );
    got.insert(
        "node_process",
        s.call("node_process", json!({"source": "console.log('alive')"})),
    );
    got.insert(
        "run_command",
        s.call("run_command", json!({"command": "echo alive"})),
    );
    // Last: a deletion frees space for what would follow.
    got.insert(
        "delete_file",
        s.call("delete_file", json!({"path": format!("doomed-{tag}.txt")})),
    );
    got
}

const OLD: &str = "OLD content, kept whole\n";
const NEW: &str = "NEW content, written whole\n";
const TAGS: &[&str] = &["before", "blocks", "inodes", "freed", "ro", "rw", "after"];

/// The workspace: `keep.txt` (the content that must survive), sources to walk and grep, a
/// deep tree, and one file to move and one to delete for every round.
fn populate(root: &Path) {
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("keep.txt"), OLD).unwrap();
    std::fs::write(root.join("pic.png"), testkit::media::png(2, 3)).unwrap();
    std::fs::write(root.join("src/lib.rs"), "// needle\nfn main() {}\n").unwrap();
    std::fs::write(root.join("src/other.rs"), "fn other() {}\n").unwrap();
    let mut deep = root.join("deep");
    for _ in 0..40 {
        deep.push("d");
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("bottom.rs"), "// needle at the bottom\n").unwrap();
    for tag in TAGS {
        std::fs::write(root.join(format!("movable-{tag}.txt")), "m").unwrap();
        std::fs::write(root.join(format!("doomed-{tag}.txt")), "d").unwrap();
    }
}

/// Print a round's answers (the report a failing run shows).
fn show(round: &str, got: &BTreeMap<&'static str, Answer>) {
    for (tool, answer) in got {
        match answer {
            Ok(_) => eprintln!("{round:8} {tool:18} ok"),
            Err(token) => eprintln!("{round:8} {tool:18} {token}"),
        }
    }
}

fn token<'a>(got: &'a BTreeMap<&'static str, Answer>, tool: &str) -> Option<&'a str> {
    got[tool].as_ref().err().map(String::as_str)
}

/// The reading tools all answered, and `keep.txt` still holds [`OLD`].
fn reads_answer(got: &BTreeMap<&'static str, Answer>) {
    for tool in [
        "read_file",
        "read_lines",
        "read_media",
        "list_directory",
        "find_files",
        "grep",
        "file_info",
    ] {
        assert!(got[tool].is_ok(), "{tool}: {:?}", got[tool]);
    }
    assert_eq!(got["read_media"].as_ref().unwrap()["height"], json!(3));
    assert_eq!(got["read_file"].as_ref().unwrap()["content"], json!(OLD));
    assert_eq!(
        got["find_files"].as_ref().unwrap()["paths"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        got["grep"].as_ref().unwrap()["matches"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// `keep.txt` holds [`OLD`] and nothing `.pify-` is left anywhere in `root`.
fn intact(root: &Path) {
    assert_eq!(std::fs::read_to_string(root.join("keep.txt")).unwrap(), OLD);
    let left = pify_entries(root);
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Run `test` of this binary inside a fresh user and mount namespace (see the module docs)
/// and check it ran there and passed. Returns the directory to mount on when called inside,
/// `None` in the outer process, which has then done the checking.
fn in_mount_namespace(test: &str) -> Option<PathBuf> {
    if let Some(at) = std::env::var_os(INNER) {
        return Some(PathBuf::from(at));
    }
    let base = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let probe = |flags: &[&str]| {
        host("unshare")
            .args(flags)
            .args(["--", "true"])
            .output()
            .map(|o| {
                (
                    o.status.success(),
                    String::from_utf8_lossy(&o.stderr).into_owned(),
                )
            })
            .unwrap_or_else(|e| (false, format!("unshare: {e}")))
    };
    let user = ["--user", "--map-root-user", "--mount"];
    let flags: &[&str] = match probe(&user) {
        (true, _) => &user,
        (false, why) if rustix::process::geteuid().is_root() => match probe(&["--mount"]) {
            (true, _) => &["--mount"],
            (false, why_root) => panic!(
                "cannot make a mount namespace to mount the faulty tmpfs: \
                 `unshare --user --map-root-user --mount`: {why}; `unshare --mount`: {why_root}"
            ),
        },
        (false, why) => panic!(
            "cannot make a user and mount namespace to mount the faulty tmpfs \
             (`unshare --user --map-root-user --mount`: {why}); as an ordinary user this test \
             needs unprivileged user namespaces"
        ),
    };
    let out = host("unshare")
        .args(flags)
        .arg("--")
        .arg(&exe)
        .args(["--exact", &support::exact(module_path!(), test)])
        .args(["--nocapture", "--test-threads=1"])
        .env(INNER, base.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    assert!(
        out.status.success(),
        "inside the namespace ({flags:?}) {test} failed: {stdout}"
    );
    assert!(
        stdout.contains("1 passed"),
        "inside the namespace {test} did not run: {stdout}"
    );
    None
}

/// A system tool the test itself runs (`unshare`, `mount`), not a tool's child process.
fn host(program: &str) -> Command {
    #[allow(clippy::disallowed_methods)]
    Command::new(program)
}

/// `mount <args…>`, which must succeed (inside the namespace).
fn mount(args: &[&str], at: &Path) {
    let out = host("mount").args(args).arg(at).output().unwrap();
    assert!(
        out.status.success(),
        "mount {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Fill the filesystem holding `dir` with one file of data until `ENOSPC`.
fn fill_blocks(dir: &Path) {
    let mut f = std::fs::File::create(dir.join("filler")).unwrap();
    let chunk = vec![b'f'; 4096];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling: {e}"),
        }
    }
    // A single byte no longer fits.
    let err = std::fs::write(dir.join("probe"), "x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
}

/// Take every inode left on the filesystem holding `dir` with empty files until `ENOSPC`.
fn fill_inodes(dir: &Path) {
    let inodes = dir.join("inodes");
    std::fs::create_dir(&inodes).unwrap();
    for n in 0.. {
        match std::fs::File::create(inodes.join(n.to_string())) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("taking inodes: {e}"),
        }
    }
    let err = std::fs::create_dir(dir.join("probe-dir")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
}

/// A workspace on a 2 MiB tmpfs: full of data, then out of inodes, then freed, then
/// read-only, then writable again, every tool called in each state through one server.
#[test]
fn a_full_then_read_only_workspace_fails_with_tokens_and_loses_nothing() {
    let Some(base) =
        in_mount_namespace("a_full_then_read_only_workspace_fails_with_tokens_and_loses_nothing")
    else {
        return;
    };
    let mnt = base.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    mount(
        &[
            "-t",
            "tmpfs",
            "-o",
            "size=2m,nr_inodes=400,mode=0755",
            "tmpfs",
        ],
        &mnt,
    );
    let root = mnt.join("ws");
    std::fs::create_dir(&root).unwrap();
    populate(&root);
    let mut s = Session::start(&root, &base);

    let before = every_tool(&mut s, "before");
    show("before", &before);
    assert!(before.values().all(Result::is_ok), "{before:?}");
    std::fs::write(root.join("keep.txt"), OLD).unwrap();

    // No data block left: nothing with content can be written.
    fill_blocks(&mnt);
    let blocks = every_tool(&mut s, "blocks");
    show("blocks", &blocks);
    reads_answer(&blocks);
    for tool in ["write_file", "write_file new", "edit_file"] {
        assert_eq!(token(&blocks, tool), Some("WRITE_FAILED"), "{tool}");
    }
    // The script's bytes do not fit; a command (its TMPDIR is a directory: no data block)
    // runs.
    assert_eq!(token(&blocks, "node_process"), Some("NODE_PROCESS_FAILED"));
    assert!(blocks["run_command"].is_ok());
    assert!(!root.join("new-blocks.txt").exists());
    intact(&root);

    // No inode left either: nothing can be created at all.
    fill_inodes(&mnt);
    let inodes = every_tool(&mut s, "inodes");
    show("inodes", &inodes);
    reads_answer(&inodes);
    for tool in [
        "write_file",
        "write_file new",
        "write_file empty",
        "edit_file",
        "create_directory",
    ] {
        assert_eq!(token(&inodes, tool), Some("WRITE_FAILED"), "{tool}");
    }
    // The script cannot be written, the command's TMPDIR cannot be made.
    assert_eq!(token(&inodes, "node_process"), Some("NODE_PROCESS_FAILED"));
    assert_eq!(token(&inodes, "run_command"), Some("RUN_COMMAND_FAILED"));
    assert!(!root.join("made-inodes").exists());
    intact(&root);

    // Space again: the same server writes.
    std::fs::remove_file(mnt.join("filler")).unwrap();
    std::fs::remove_dir_all(mnt.join("inodes")).unwrap();
    let freed = every_tool(&mut s, "freed");
    show("freed", &freed);
    assert!(freed.values().all(Result::is_ok), "{freed:?}");
    std::fs::write(root.join("keep.txt"), OLD).unwrap();

    // Read-only (the mount made read-only, which a user namespace allows where a remount of
    // the filesystem itself is refused; the kernel answers EROFS alike): every change fails,
    // every read answers.
    mount(&["-o", "remount,bind,ro"], &mnt);
    let ro = every_tool(&mut s, "ro");
    show("ro", &ro);
    reads_answer(&ro);
    for tool in [
        "write_file",
        "write_file new",
        "write_file empty",
        "edit_file",
        "create_directory",
        "move_file",
        "delete_file",
    ] {
        assert_eq!(token(&ro, tool), Some("WRITE_FAILED"), "{tool}");
    }
    assert_eq!(token(&ro, "node_process"), Some("NODE_PROCESS_FAILED"));
    assert_eq!(token(&ro, "run_command"), Some("RUN_COMMAND_FAILED"));
    assert!(root.join("movable-ro.txt").is_file());
    assert!(root.join("doomed-ro.txt").is_file());
    intact(&root);

    // Writable again: the same server writes.
    mount(&["-o", "remount,bind,rw"], &mnt);
    let rw = every_tool(&mut s, "rw");
    show("rw", &rw);
    assert!(rw.values().all(Result::is_ok), "{rw:?}");
    assert_eq!(std::fs::read_to_string(root.join("keep.txt")).unwrap(), NEW);
    // The operator's log names the system's errors, which no answer did.
    let log = s.close();
    for errno in ["os error 28", "os error 30"] {
        let logged = |tool: &str| {
            log.lines()
                .any(|l| l.contains(&format!("tool={tool} ")) && l.contains(errno))
        };
        for tool in [
            "write_file",
            "edit_file",
            "create_directory",
            "node_process",
        ] {
            assert!(logged(tool), "{tool}'s {errno} not in the log: {log}");
        }
    }
    for tool in ["move_file", "delete_file"] {
        let logged = log
            .lines()
            .any(|l| l.contains(&format!("tool={tool} ")) && l.contains("os error 30"));
        assert!(logged, "{tool}'s EROFS not in the log: {log}");
    }
    assert!(pify_entries(&root).is_empty());
    let _ = host("umount").arg(&mnt).status();
}

/// The lowest descriptor limit under which the process `pid` has exactly `free` descriptor
/// numbers left (a new descriptor takes the lowest free number, and must be below the limit).
fn limit_leaving(pid: i32, free: usize) -> u64 {
    let open: std::collections::BTreeSet<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().parse().unwrap())
        .collect();
    let mut left = 0;
    let mut limit = 0;
    while left < free || open.contains(&limit) {
        if !open.contains(&limit) {
            left += 1;
        }
        limit += 1;
    }
    limit
}

fn set_nofile(pid: i32, current: Option<u64>, maximum: Option<u64>) {
    use rustix::process::{Pid, Resource, Rlimit, prlimit};
    prlimit(
        Pid::from_raw(pid),
        Resource::Nofile,
        Rlimit { current, maximum },
    )
    .expect("prlimit on the server");
}

/// The server out of descriptors: its `RLIMIT_NOFILE` is lowered (from outside, with
/// `prlimit`) so that only 0, 1, 2… descriptors are left, and every tool is called at each
/// level. What answers must be right (a walk that could not open a directory must fail, not
/// return fewer paths); what fails must fail with a documented token and leave the content
/// whole and no temporary. With the limit back, the same server does everything again.
#[test]
fn a_server_out_of_descriptors_fails_with_tokens_and_recovers() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("ws");
    std::fs::create_dir(&root).unwrap();
    populate(&root);
    let frees: Vec<usize> = (0..=8).chain([12, 16, 24, 32, 48, 64]).collect();
    for free in &frees {
        std::fs::write(root.join(format!("movable-{free}.txt")), "m").unwrap();
        std::fs::write(root.join(format!("doomed-{free}.txt")), "d").unwrap();
    }
    let mut s = Session::start(&root, &base);
    let pid = s.pid();
    let warm = every_tool(&mut s, "before");
    assert!(warm.values().all(Result::is_ok), "{warm:?}");
    let (soft, hard) = {
        let l = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        (l.current, l.maximum)
    };
    let mut failures = 0;
    for free in &frees {
        std::fs::write(root.join("keep.txt"), OLD).unwrap();
        set_nofile(pid, Some(limit_leaving(pid, *free)), hard);
        let got = every_tool(&mut s, &free.to_string());
        set_nofile(pid, soft, hard);
        show(&format!("free {free}"), &got);
        failures += got.values().filter(|a| a.is_err()).count();
        // What answered is right.
        if let Ok(read) = &got["read_file"] {
            assert_eq!(read["content"], json!(OLD));
        }
        if let Ok(image) = &got["read_media"] {
            assert_eq!(image["width"], json!(2), "{image}");
        }
        if let Ok(found) = &got["find_files"] {
            assert_eq!(found["paths"].as_array().unwrap().len(), 3, "{found}");
        }
        if let Ok(grep) = &got["grep"] {
            assert_eq!(grep["matches"].as_array().unwrap().len(), 2, "{grep}");
        }
        if let Ok(list) = &got["list_directory"] {
            assert_eq!(list["entries"].as_array().unwrap().len(), 2, "{list}");
        }
        // The file holds what the last write that answered success put there.
        let expected = match (&got["edit_file"], &got["write_file"]) {
            (_, Ok(_)) => NEW.to_owned(),
            (Ok(_), Err(_)) => OLD.replace("OLD", "EDITED"),
            (Err(_), Err(_)) => OLD.to_owned(),
        };
        assert_eq!(
            std::fs::read_to_string(root.join("keep.txt")).unwrap(),
            expected,
            "free {free}"
        );
        // A change that failed did nothing.
        let moved = root.join(format!("moved-{free}.txt")).exists();
        assert_eq!(moved, got["move_file"].is_ok(), "free {free}");
        let deleted = !root.join(format!("doomed-{free}.txt")).exists();
        assert_eq!(deleted, got["delete_file"].is_ok(), "free {free}");
        let left = pify_entries(&root);
        assert!(left.is_empty(), "free {free}: left behind {left:?}");
    }
    assert!(failures > 0, "no call ran out of descriptors");
    // Descriptors again: the same server does everything.
    std::fs::write(root.join("keep.txt"), OLD).unwrap();
    let after = every_tool(&mut s, "after");
    show("after", &after);
    assert!(after.values().all(Result::is_ok), "{after:?}");
    let log = s.close();
    assert!(log.contains("os error 24"), "EMFILE not in the log: {log}");
    assert!(pify_entries(&root).is_empty());
}

/// `confine mcp` (a multi-thread runtime, its filesystem work on the blocking pool) out of
/// descriptors: the same levels for the file tools, spoken to in raw JSON-RPC lines. Every
/// answer is a result (a tool error with a documented token where the call failed), never a
/// protocol error or a dead server, and after the limit is restored the server writes.
#[test]
fn an_mcp_server_out_of_descriptors_answers_every_call_and_recovers() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("ws");
    std::fs::create_dir(&root).unwrap();
    populate(&root);
    let mut child = confine()
        // `--keep-dumpable`: see `Session::start`.
        .args(["mcp", "--keep-dumpable", "--root"])
        .arg(&root)
        .env("CONFINE_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn confine mcp");
    let pid = child.id() as i32;
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let host = base.to_string_lossy().into_owned();
    let mut send = |message: Value| {
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    };
    let mut receive = || {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "confine mcp closed"
        );
        assert!(!line.contains(&host), "a host path in {line}");
        serde_json::from_str::<Value>(&line).unwrap()
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "faults", "version": "0"}}}),
    );
    assert!(receive()["result"].is_object());
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let calls = [
        ("read_file", json!({"path": "keep.txt"})),
        ("find_files", json!({"pattern": "**/*.rs"})),
        ("grep", json!({"pattern": "needle"})),
        (
            "edit_file",
            json!({"path": "keep.txt", "edits": [{"oldText": "OLD", "newText": "EDITED"}]}),
        ),
        ("write_file", json!({"path": "keep.txt", "content": NEW})),
        ("read_media", json!({"path": "pic.png"})),
    ];
    let mut id = 0;
    let mut call = |name: &str, arguments: &Value| {
        id += 1;
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}));
        let out = receive();
        assert_eq!(out["id"], json!(id), "{out}");
        let result = out["result"].as_object().unwrap_or_else(|| panic!("{out}"));
        let record = &result["structuredContent"];
        if result["isError"] == json!(true) {
            let token = record["error"]["message"].as_str().unwrap().to_owned();
            assert!(documented(name).contains(&token.as_str()), "{name}: {out}");
            Err(token)
        } else {
            Ok(record.clone())
        }
    };
    let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let mut failures = 0;
    for free in [0, 1, 2, 3, 4, 6, 8, 12, 16] {
        std::fs::write(root.join("keep.txt"), OLD).unwrap();
        set_nofile(pid, Some(limit_leaving(pid, free)), hard.maximum);
        let got: Vec<(&str, Answer)> = calls
            .iter()
            .map(|(name, arguments)| (*name, call(name, arguments)))
            .collect();
        set_nofile(pid, hard.current, hard.maximum);
        for (name, answer) in &got {
            eprintln!("mcp free {free:2} {name:12} {:?}", answer.as_ref().err());
        }
        failures += got.iter().filter(|(_, a)| a.is_err()).count();
        // The edit first, then the write.
        let expected = match (&got[3].1, &got[4].1) {
            (_, Ok(_)) => NEW.to_owned(),
            (Ok(_), Err(_)) => OLD.replace("OLD", "EDITED"),
            (Err(_), Err(_)) => OLD.to_owned(),
        };
        let now = std::fs::read_to_string(root.join("keep.txt")).unwrap();
        assert_eq!(now, expected, "free {free}");
        assert!(pify_entries(&root).is_empty(), "free {free}");
    }
    assert!(failures > 0, "no call ran out of descriptors");
    std::fs::write(root.join("keep.txt"), OLD).unwrap();
    for (name, arguments) in &calls {
        assert!(call(name, arguments).is_ok(), "{name}");
    }
    assert_eq!(std::fs::read_to_string(root.join("keep.txt")).unwrap(), NEW);
    // End of input: the server exits.
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "confine mcp exited {status}");
}
