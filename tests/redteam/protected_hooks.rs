//! Red team: a model plants a git hook or a `core.fsmonitor` command, which the user's own
//! `git` would run on the host, outside any sandbox, at the next `git commit`. Through the
//! built binary, in a real repository, with the real `git`:
//!
//! * the write tools refuse both (`PATH_PROTECTED`), and `git commit` on the host then runs
//!   nothing planted; with `--unprotect-defaults` (the naive twin) the same calls land and the
//!   host's `git commit` runs them;
//! * a sandboxed `run_command` script (`--sandbox`) cannot write the hooks or `.git/config`
//!   (`EROFS`: a mount namespace of the run's own binds them read-only) while `git add` and
//!   `git commit` through `run_command` work; the twin without the list plants both;
//! * where no mount namespace can be made (namespaces refused, `CAP_SYS_ADMIN` dropped), a
//!   sandboxed call in a repository is refused (`NODE_SANDBOX_UNAVAILABLE`) rather than run
//!   with the hooks writable, and runs once the defaults are dropped;
//! * in the container-like setup of the other suites (a private mount namespace, the cgroup
//!   file system read-only, `CAP_SYS_ADMIN` dropped) the user namespace nodeexec makes still
//!   gives the mount namespace: the hooks stay read-only and `git commit` works.
//!
//! `git init` runs under `--sandbox` in a root that had no repository
//! ([`git_init_works_under_the_sandbox_but_no_set_id_bit`]): it rewrites `.git/config`
//! through a lock file whose mode it copies with `chmod`, which the read-only view allows
//! inside the workspace; the set-user-ID bit stays refused. The repository here is made by
//! the user, outside, as a user's own repository is.

use crate::support;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};
use support::{call_lines, census_flags};

/// git under the sandbox: no user or system configuration (the user's `~/.gitconfig` is
/// unreadable there), an identity of its own.
const GIT_ENV: [&str; 4] = [
    "--env",
    "GIT_CONFIG_GLOBAL=/dev/null",
    "--env",
    "GIT_CONFIG_NOSYSTEM=1",
];

/// `git` with an identity, as scripts in the sandbox call it.
const GIT: &str = "git -c user.name=t -c user.email=t@example.invalid";

/// Whether `git` is on PATH; a test that needs it says loudly when it is not.
fn have_git(test: &str) -> bool {
    let found = host_git(Path::new("/"), &["--version"]).is_some();
    if !found {
        testkit::not_run(test, "no git on PATH");
    }
    found
}

/// The host's `git <args>` in `dir`, as the user would run it (outside any sandbox): its
/// stdout if it exited 0.
fn host_git(dir: &Path, args: &[&str]) -> Option<String> {
    // The user's own git on the host, not a tool's child process.
    #[allow(clippy::disallowed_methods)]
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A repository the user made (`git init` on the host, one commit), and where a planted
/// command would leave its mark (outside the workspace, as an attacker's would).
struct Repository {
    workspace: tempfile::TempDir,
    marks: tempfile::TempDir,
}

impl Repository {
    fn new() -> Self {
        let repository = Self {
            workspace: tempfile::tempdir().unwrap(),
            marks: tempfile::tempdir().unwrap(),
        };
        let ws = repository.ws();
        std::fs::write(ws.join("a.txt"), "a\n").unwrap();
        host_git(ws, &["init", "-q"]).expect("git init");
        host_git(ws, &["add", "a.txt"]).expect("git add");
        host_git(ws, &["commit", "-qm", "first"]).expect("git commit");
        // git's own sample is executable: renamed to `pre-commit`, it runs.
        assert!(ws.join(".git/hooks/pre-commit.sample").exists());
        repository
    }

    fn ws(&self) -> &Path {
        self.workspace.path()
    }

    fn mark(&self, name: &str) -> PathBuf {
        self.marks.path().join(name)
    }

    /// The user's next commit on the host; the marks it left.
    fn user_commits(&self) -> Vec<String> {
        std::fs::write(self.ws().join("b.txt"), "by the user\n").unwrap();
        host_git(self.ws(), &["add", "b.txt"]).expect("the user's git add");
        // A planted hook may fail the commit: what matters is what ran.
        let _ = host_git(self.ws(), &["commit", "-qm", "by the user"]);
        let mut marks: Vec<String> = std::fs::read_dir(self.marks.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        marks.sort();
        marks
    }

    /// The commits' subjects, newest first.
    fn log(&self) -> Vec<String> {
        host_git(self.ws(), &["log", "--format=%s"])
            .expect("git log")
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// A hook body that leaves `mark` behind when git runs it (temporary paths hold no quote or
/// space, so the scripts below may quote it in single quotes).
fn hook(mark: &Path) -> String {
    format!("#!/bin/sh\ntouch {}\n", mark.display())
}

/// `core.fsmonitor` naming a command that leaves `mark` behind (git runs it through the shell
/// at every status, add and commit).
fn fsmonitor(mark: &Path) -> String {
    format!(
        "[core]\n\tfsmonitor = \"touch {}; false\"\n",
        mark.display()
    )
}

/// The records of `calls` (tool name, arguments) through `confine call --root ws <flags>`.
fn call(ws: &Path, flags: &[&str], calls: &[(&str, Value)]) -> Vec<Value> {
    let input: String = calls
        .iter()
        .enumerate()
        .map(|(i, (name, arguments))| {
            format!(
                "{}\n",
                json!({"id": i, "name": name, "arguments": arguments})
            )
        })
        .collect();
    let census = census_flags();
    let mut all: Vec<&str> = flags.to_vec();
    all.extend(census.iter().map(String::as_str));
    let mut records = call_lines(ws, &all, &input);
    records.sort_by_key(|r| r["id"].as_u64());
    records
}

/// What a run_command record said: its stdout, or its error token.
fn ran(record: &Value) -> String {
    match record["isError"] == true {
        true => record["content"]["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned(),
        false => record["content"]["stdout"].as_str().unwrap().to_owned(),
    }
}

/// The tools' attack: a hook written, git's executable sample overwritten, the configuration
/// given a `core.fsmonitor` by `write_file` and by `edit_file`.
fn tool_attack(repository: &Repository) -> Vec<(&'static str, Value)> {
    let config = std::fs::read_to_string(repository.ws().join(".git/config")).unwrap();
    let planted = fsmonitor(&repository.mark("fsmonitor-write"));
    vec![
        (
            "write_file",
            json!({"path": ".git/hooks/pre-commit.sample",
                   "content": hook(&repository.mark("sample"))}),
        ),
        (
            "move_file",
            json!({"source": ".git/hooks/pre-commit.sample",
                   "destination": ".git/hooks/pre-commit"}),
        ),
        (
            "write_file",
            json!({"path": ".git/config", "content": format!("{config}{planted}")}),
        ),
    ]
}

#[test]
fn the_tools_refuse_a_planted_hook_and_fsmonitor_and_the_users_commit_runs_nothing() {
    const TEST: &str =
        "the_tools_refuse_a_planted_hook_and_fsmonitor_and_the_users_commit_runs_nothing";
    if !have_git(TEST) {
        return;
    }
    let refused = json!({"error": {"code": "TOOL_EXECUTION_FAILED", "message": "PATH_PROTECTED"}});
    let repository = Repository::new();
    let calls = tool_attack(&repository);
    let records = call(repository.ws(), &[], &calls);
    for (record, (name, _)) in records.iter().zip(&calls) {
        assert_eq!(record["content"], refused, "{name}");
    }
    let edit = json!([{"oldText": "bare = false", "newText": format!(
        "bare = false\n\tfsmonitor = \"touch {}; false\"", repository.mark("fsmonitor-edit").display())}]);
    let records = call(
        repository.ws(),
        &[],
        &[("edit_file", json!({"path": ".git/config", "edits": edit}))],
    );
    assert_eq!(records[0]["content"], refused);
    assert!(repository.user_commits().is_empty());
    assert_eq!(repository.log(), ["by the user", "first"]);

    // The naive twin: without the list, every call lands and the user's commit runs them.
    let repository = Repository::new();
    let calls = tool_attack(&repository);
    let records = call(repository.ws(), &["--unprotect-defaults"], &calls);
    for (record, (name, _)) in records.iter().zip(&calls) {
        assert_eq!(record["isError"], false, "{name}: {record}");
    }
    assert_eq!(repository.user_commits(), ["fsmonitor-write", "sample"]);
}

/// The sandboxed script's attack, then its honest work: plant the hook (the executable
/// sample overwritten and renamed), give `.git/config` a `core.fsmonitor` (appended, and by
/// `git config`), move `.git` aside; then `git add` and `git commit`. One line per step.
fn script_attack(repository: &Repository) -> String {
    let sample = hook(&repository.mark("sample"));
    let planted = fsmonitor(&repository.mark("fsmonitor-append"));
    let by_git = format!(
        "touch {}; false",
        repository.mark("fsmonitor-config").display()
    );
    format!(
        "printf '%s' '{sample}' > .git/hooks/pre-commit.sample; echo sample=$?\n\
         mv .git/hooks/pre-commit.sample .git/hooks/pre-commit; echo rename=$?\n\
         printf '%s' '{planted}' >> .git/config; echo append=$?\n\
         {GIT} config core.fsmonitor \"{by_git}\" 2>/dev/null; echo config=$?\n\
         mv .git .git-aside 2>/dev/null; echo aside=$?\n\
         echo work > c.txt && {GIT} add c.txt && {GIT} commit -qm 'by the agent'; echo commit=$?\n"
    )
}

#[test]
fn a_sandboxed_script_cannot_plant_a_hook_or_fsmonitor_while_git_commit_works() {
    const TEST: &str = "a_sandboxed_script_cannot_plant_a_hook_or_fsmonitor_while_git_commit_works";
    if !have_git(TEST) {
        return;
    }
    let sandboxed = ["--sandbox", "--allow-commands", GIT_ENV[0], GIT_ENV[1]];
    let sandboxed = [&sandboxed[..], &GIT_ENV[2..]].concat();
    let repository = Repository::new();
    let script = script_attack(&repository);
    let records = call(
        repository.ws(),
        &sandboxed,
        &[("run_command", json!({"command": script}))],
    );
    assert_eq!(
        ran(&records[0]),
        "sample=2\nrename=1\nappend=2\nconfig=4\naside=1\ncommit=0\n",
        "{}",
        records[0]
    );
    assert_eq!(repository.log(), ["by the agent", "first"]);
    assert!(repository.user_commits().is_empty());
    assert_eq!(repository.log(), ["by the user", "by the agent", "first"]);

    // The twin without the list: the same script plants both, and the user's commit runs
    // them (git config replaces the appended fsmonitor with its own).
    let repository = Repository::new();
    let script = script_attack(&repository);
    let naive = [&sandboxed[..], &["--unprotect-defaults"]].concat();
    let records = call(
        repository.ws(),
        &naive,
        &[("run_command", json!({"command": script}))],
    );
    assert_eq!(
        ran(&records[0]),
        "sample=0\nrename=0\nappend=0\nconfig=0\naside=0\ncommit=128\n",
        "{}",
        records[0]
    );
    std::fs::rename(
        repository.ws().join(".git-aside"),
        repository.ws().join(".git"),
    )
    .unwrap();
    assert_eq!(repository.user_commits(), ["fsmonitor-config", "sample"]);
}

/// `git init` under `--sandbox` in a root without a repository: it works (its `chmod` of the
/// lock file of `.git/config` is inside the workspace); a set-user-ID bit is still refused,
/// and so is a mode change outside. The same without `--sandbox` does all three.
#[test]
fn git_init_works_under_the_sandbox_but_no_set_id_bit() {
    const TEST: &str = "git_init_works_under_the_sandbox_but_no_set_id_bit";
    if !have_git(TEST) {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("mode.txt");
    std::fs::write(&target, "x").unwrap();
    let command = json!({"command": format!(
        "{GIT} init -q . 2>&1; echo init=$?; touch f; chmod u+s f 2>/dev/null; echo setuid=$?; \
         chmod 600 {} 2>/dev/null; echo outside=$?",
        target.display()
    )});
    let sandboxed = [&["--sandbox", "--allow-commands"][..], &GIT_ENV].concat();
    let ws = tempfile::tempdir().unwrap();
    let records = call(ws.path(), &sandboxed, &[("run_command", command.clone())]);
    assert_eq!(ran(&records[0]), "init=0\nsetuid=1\noutside=1\n");
    assert!(ws.path().join(".git/HEAD").is_file());
    let mode = |p: &Path| {
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions())
            & 0o7777
    };
    assert_eq!(mode(&ws.path().join("f")) & 0o4000, 0);
    assert_ne!(mode(&target), 0o600);
    let ws = tempfile::tempdir().unwrap();
    let plain = [&["--allow-commands", "--no-sandbox"][..], &GIT_ENV].concat();
    let records = call(ws.path(), &plain, &[("run_command", command)]);
    assert_eq!(ran(&records[0]), "init=0\nsetuid=0\noutside=0\n");
    assert_eq!(mode(&target), 0o600);
}

/// `confine call <flags>` run under `prefix` (a shell that sets up a container-like
/// environment, then runs its arguments), with one run_command call; its record.
fn call_under(prefix: &[&str], ws: &Path, flags: &[&str], command: &str) -> Value {
    let line = json!({"id": 1, "name": "run_command", "arguments": {"command": command}});
    #[allow(clippy::disallowed_methods)]
    let mut child = std::process::Command::new(prefix[0])
        .args(&prefix[1..])
        .arg(env!("CARGO_BIN_EXE_confine"))
        .args(["call", "--root"])
        .arg(ws)
        .args(flags)
        .args(census_flags())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{prefix:?}: {e}"));
    writeln!(child.stdin.take().unwrap(), "{line}").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|_| {
        panic!(
            "{prefix:?}: no record; stdout {text}; stderr {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A user namespace of its own in which no further namespace can be made
/// (`max_user_namespaces` 0) and `CAP_SYS_ADMIN` is dropped: as a container whose seccomp
/// profile refuses namespaces. `None` where no user namespace can be made to begin with.
fn no_namespaces() -> Option<[&'static str; 10]> {
    let script = "echo 0 > /proc/sys/user/max_user_namespaces \
        && exec capsh --drop=cap_sys_admin -- -c 'exec \"$0\" \"$@\"' \"$@\"";
    let prefix = [
        "unshare",
        "-U",
        "-r",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
    ];
    #[allow(clippy::disallowed_methods)]
    let works = std::process::Command::new(prefix[0])
        .args(&prefix[1..])
        .arg("true")
        .status()
        .is_ok_and(|s| s.success());
    works.then_some(prefix)
}

#[test]
fn without_a_mount_namespace_a_sandboxed_call_in_a_repository_is_refused() {
    const TEST: &str = "without_a_mount_namespace_a_sandboxed_call_in_a_repository_is_refused";
    if !have_git(TEST) {
        return;
    }
    let Some(prefix) = no_namespaces() else {
        testkit::not_run(
            TEST,
            "no user namespace (with capsh) can be made here to refuse \
             namespaces inside",
        );
        return;
    };
    let repository = Repository::new();
    let sandboxed = [&["--sandbox", "--allow-commands"][..], &GIT_ENV].concat();
    let plant = format!(
        "printf '%s' '{}' > .git/hooks/pre-commit.sample; echo sample=$?",
        hook(&repository.mark("sample"))
    );
    let record = call_under(&prefix, repository.ws(), &sandboxed, &plant);
    assert_eq!(ran(&record), "NODE_SANDBOX_UNAVAILABLE", "{record}");
    assert!(repository.user_commits().is_empty());
    // Without a repository the same sandboxed call runs (nothing to protect exists)...
    let empty = tempfile::tempdir().unwrap();
    let record = call_under(&prefix, empty.path(), &sandboxed, "echo ran");
    assert_eq!(ran(&record), "ran\n", "{record}");
    // ...and with the defaults dropped it runs in the repository, hooks writable: the twin.
    let naive = [&sandboxed[..], &["--unprotect-defaults"]].concat();
    let record = call_under(&prefix, repository.ws(), &naive, &plant);
    assert_eq!(ran(&record), "sample=0\n", "{record}");
    let record = call_under(
        &prefix,
        repository.ws(),
        &naive,
        "mv .git/hooks/pre-commit.sample .git/hooks/pre-commit",
    );
    assert_eq!(record["isError"], false, "{record}");
    assert_eq!(repository.user_commits(), ["sample"]);
}

#[test]
fn in_the_container_like_setup_the_hooks_stay_read_only_and_git_commit_works() {
    const TEST: &str = "in_the_container_like_setup_the_hooks_stay_read_only_and_git_commit_works";
    if !have_git(TEST) {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        testkit::not_run(
            TEST,
            "as an ordinary user (it needs root, to remount the cgroup \
             file system and drop a capability); CI runs it as root",
        );
        return;
    }
    if !support::has_cap_sys_admin() {
        testkit::not_run(
            TEST,
            "already in a container-like setup (no CAP_SYS_ADMIN), so it cannot make its own; \
             the root pass runs it",
        );
        return;
    }
    let script = "mount --bind /sys/fs/cgroup /sys/fs/cgroup \
        && mount -o remount,bind,ro /sys/fs/cgroup \
        && exec capsh --drop=cap_sys_admin -- -c 'exec \"$0\" \"$@\"' \"$@\"";
    let container = [
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
    ];
    let repository = Repository::new();
    let sandboxed = [&["--sandbox", "--allow-commands"][..], &GIT_ENV].concat();
    let record = call_under(
        &container,
        repository.ws(),
        &sandboxed,
        &script_attack(&repository),
    );
    assert_eq!(
        ran(&record),
        "sample=2\nrename=1\nappend=2\nconfig=4\naside=1\ncommit=0\n",
        "{record}"
    );
    assert!(repository.user_commits().is_empty());
    assert_eq!(repository.log(), ["by the user", "by the agent", "first"]);
}

// The second attack: what else the user's git obeys. `.git/commondir` pointing at a planted
// directory, a submodule's repository beneath `.git/modules`, hooks missing at the start,
// and what editors run when the workspace is opened.

impl Repository {
    /// The same repository with a submodule `sub` (from a repository of the user's own
    /// beside it), committed: `.git/modules/sub` holds its repository.
    fn with_submodule() -> (Self, tempfile::TempDir) {
        let repository = Self::new();
        let upstream = tempfile::tempdir().unwrap();
        std::fs::write(upstream.path().join("s.txt"), "s\n").unwrap();
        host_git(upstream.path(), &["init", "-q"]).expect("git init");
        host_git(upstream.path(), &["add", "s.txt"]).expect("git add");
        host_git(upstream.path(), &["commit", "-qm", "sub"]).expect("git commit");
        let url = upstream.path().to_str().unwrap();
        host_git(
            repository.ws(),
            &[
                "-c",
                "protocol.file.allow=always",
                "submodule",
                "add",
                "-q",
                url,
                "sub",
            ],
        )
        .expect("git submodule add");
        host_git(repository.ws(), &["commit", "-qm", "with sub"]).expect("git commit");
        assert!(repository.ws().join(".git/modules/sub/config").is_file());
        (repository, upstream)
    }

    /// The user's `git status` on the host; the marks left.
    fn user_status(&self) -> Vec<String> {
        let _ = host_git(self.ws(), &["status", "--porcelain"]);
        self.marks()
    }

    fn marks(&self) -> Vec<String> {
        let mut marks: Vec<String> = std::fs::read_dir(self.marks.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        marks.sort();
        marks
    }

    /// The files of a planted common directory `.git/evil` whose configuration runs `mark`
    /// at every `git status` once `.git/commondir` names it: (path, content) pairs, its
    /// branch at the user's commit and its objects borrowed from the real ones.
    fn evil_common_dir(&self, mark: &Path) -> Vec<(String, String)> {
        let head = host_git(self.ws(), &["rev-parse", "HEAD"]).unwrap();
        let branch = host_git(self.ws(), &["symbolic-ref", "HEAD"]).unwrap();
        vec![
            (
                ".git/evil/config".into(),
                format!(
                    "[core]\n\trepositoryformatversion = 0\n\tbare = false\n{}",
                    fsmonitor(mark).trim_start_matches("[core]\n")
                ),
            ),
            (format!(".git/evil/{}", branch.trim()), head),
            (
                ".git/evil/objects/info/alternates".into(),
                format!("{}\n", self.ws().join(".git/objects").display()),
            ),
        ]
    }
}

#[test]
fn the_tools_refuse_commondir_submodule_and_editor_plantings_and_git_status_runs_nothing() {
    const TEST: &str =
        "the_tools_refuse_commondir_submodule_and_editor_plantings_and_git_status_runs_nothing";
    if !have_git(TEST) {
        return;
    }
    for naive in [false, true] {
        let (repository, _upstream) = Repository::with_submodule();
        let mut planted: Vec<(&str, Value)> = repository
            .evil_common_dir(&repository.mark("commondir"))
            .into_iter()
            .map(|(path, content)| ("write_file", json!({"path": path, "content": content})))
            .collect();
        let ordinary = planted.len();
        let sub_config =
            std::fs::read_to_string(repository.ws().join(".git/modules/sub/config")).unwrap();
        let protected = [
            (".git/commondir", "evil\n".to_owned()),
            (
                ".git/modules/sub/config",
                format!("{sub_config}{}", fsmonitor(&repository.mark("submodule"))),
            ),
            (".git/modules/sub/commondir", "../../evil\n".to_owned()),
            (".git/config.worktree", fsmonitor(&repository.mark("wt"))),
            (".git/info/attributes", "* filter=x\n".to_owned()),
            (".git/worktrees/w/gitdir", "x\n".to_owned()),
            (".vscode/tasks.json", "{}".to_owned()),
            (".idea/workspace.xml", "<x/>".to_owned()),
            (".claude/settings.json", "{}".to_owned()),
            (".mcp.json", "{}".to_owned()),
            (
                ".gitmodules",
                std::fs::read_to_string(repository.ws().join(".gitmodules")).unwrap(),
            ),
            (".envrc", "touch /x\n".to_owned()),
        ];
        for (path, content) in &protected {
            planted.push(("write_file", json!({"path": path, "content": content})));
        }
        let flags: &[&str] = match naive {
            false => &[],
            true => &["--unprotect-defaults"],
        };
        let records = call(repository.ws(), flags, &planted);
        for (i, (record, (_, args))) in records.iter().zip(&planted).enumerate() {
            let refused = record["content"]["error"]["message"] == "PATH_PROTECTED";
            // git's ordinary files (a directory of its own beneath .git) are written either
            // way; the protected ones only without the list.
            let want_refused = !naive && i >= ordinary;
            assert_eq!(refused, want_refused, "{args}: {record}");
            if !refused {
                assert_eq!(record["isError"], false, "{args}: {record}");
            }
        }
        // The root's `.git` itself: never deleted, moved or replaced by a `gitdir:` file.
        if !naive {
            let entry = call(
                repository.ws(),
                flags,
                &[
                    ("delete_file", json!({"path": ".git"})),
                    ("move_file", json!({"source": ".git", "destination": "g"})),
                    (
                        "write_file",
                        json!({"path": ".git", "content": "gitdir: .git/evil\n"}),
                    ),
                ],
            );
            for record in &entry {
                assert_eq!(
                    record["content"]["error"]["message"], "PATH_PROTECTED",
                    "{record}"
                );
            }
        }
        let marks = repository.user_status();
        match naive {
            false => {
                assert!(marks.is_empty(), "{marks:?}");
                assert_eq!(repository.log(), ["with sub", "first"]);
            }
            // The twin: without the list the user's own `git status` runs the planted
            // fsmonitor of the planted common directory.
            true => assert_eq!(marks, ["commondir"]),
        }
    }
    // The submodule's twin alone (the common directory above would take its place): its
    // configuration written without the list runs at the user's top-level `git status`.
    let (repository, _upstream) = Repository::with_submodule();
    let config = std::fs::read_to_string(repository.ws().join(".git/modules/sub/config")).unwrap();
    let planted = format!("{config}{}", fsmonitor(&repository.mark("submodule")));
    let write = (
        "write_file",
        json!({"path": ".git/modules/sub/config", "content": planted}),
    );
    let record = &call(repository.ws(), &[], std::slice::from_ref(&write))[0];
    assert_eq!(
        record["content"]["error"]["message"], "PATH_PROTECTED",
        "{record}"
    );
    assert!(repository.user_status().is_empty());
    let record = &call(repository.ws(), &["--unprotect-defaults"], &[write])[0];
    assert_eq!(record["isError"], false, "{record}");
    assert_eq!(repository.user_status(), ["submodule"]);
}

/// The sandboxed script's second attack, one line per step: a common directory planted and
/// named by `.git/commondir`; an executable hook created (`open(O_CREAT, 0755)`, no chmod)
/// in a hooks directory it makes where there was none; the submodule's configuration
/// appended to; `.vscode/` made. Then it waits, and says what is still there.
fn second_script_attack(repository: &Repository, parts: &[&str]) -> String {
    let mut script = String::new();
    if parts.contains(&"commondir") {
        for (path, content) in repository.evil_common_dir(&repository.mark("commondir")) {
            script.push_str(&format!(
                "mkdir -p \"$(dirname {path})\" && printf '%s' '{content}' > {path} || echo failed {path}\n"
            ));
        }
        script.push_str("printf evil > .git/commondir; echo commondir=$?\n");
    }
    if parts.contains(&"hook") {
        let body = hook(&repository.mark("hook")).replace('\n', "\\n");
        script.push_str(&format!(
            "mkdir -p .git/hooks; perl -e 'use Fcntl; sysopen(F, \".git/hooks/pre-commit\", \
             O_CREAT|O_WRONLY, 0755) or exit 1; print F \"{body}\"'; echo hook=$?\n"
        ));
    }
    if parts.contains(&"submodule") {
        let planted = fsmonitor(&repository.mark("submodule"));
        script.push_str(&format!(
            "printf '%s' '{planted}' >> .git/modules/sub/config; echo submodule=$?\n"
        ));
    }
    if parts.contains(&"vscode") {
        // Made, and removed by the watch at once (its outcome depends on who was first).
        script.push_str("mkdir -p .vscode && echo '{}' > .vscode/tasks.json 2>/dev/null\n");
    }
    script.push_str(
        "sleep 1; for p in .git/commondir .git/hooks/pre-commit .vscode; do \
         test -e $p && echo present $p; done; true\n",
    );
    script
}

/// git's ordinary work under the sandbox, one line per step.
fn everyday_git() -> String {
    format!(
        "main=$({GIT} symbolic-ref --short HEAD)\n\
         echo work > c.txt && {GIT} add c.txt && {GIT} commit -qm 'by the agent'; echo commit=$?\n\
         {GIT} branch topic; echo branch=$?\n\
         echo more >> c.txt && {GIT} stash -q && {GIT} stash pop -q; echo stash=$?\n\
         {GIT} commit -qam more; {GIT} checkout -q topic && echo t > t.txt && {GIT} add t.txt \
         && {GIT} commit -qm topic && {GIT} rebase -q $main; echo rebase=$?\n\
         {GIT} checkout -q $main\n"
    )
}

#[test]
fn a_sandboxed_script_cannot_plant_commondir_a_missing_hook_a_submodule_config_or_vscode() {
    const TEST: &str =
        "a_sandboxed_script_cannot_plant_commondir_a_missing_hook_a_submodule_config_or_vscode";
    if !have_git(TEST) {
        return;
    }
    let sandboxed = [&["--sandbox", "--allow-commands"][..], &GIT_ENV].concat();
    let all = ["commondir", "hook", "submodule", "vscode"];
    let (repository, _upstream) = Repository::with_submodule();
    std::fs::remove_dir_all(repository.ws().join(".git/hooks")).unwrap();
    let script = second_script_attack(&repository, &all) + &everyday_git();
    let records = call(
        repository.ws(),
        &sandboxed,
        &[("run_command", json!({"command": script}))],
    );
    let said = ran(&records[0]);
    // Written, then removed by the watch; the hooks and the submodule read-only; git's own
    // writes all work.
    assert_eq!(
        said,
        "commondir=0\nhook=1\nsubmodule=2\n\
         commit=0\nbranch=0\nstash=0\nrebase=0\n",
        "{}",
        records[0]
    );
    for gone in [".git/commondir", ".git/hooks/pre-commit", ".vscode"] {
        assert!(!repository.ws().join(gone).exists(), "{gone}");
    }
    assert!(repository.user_status().is_empty());
    assert!(repository.user_commits().is_empty());
    let log = repository.log();
    assert_eq!(log[0], "by the user");
    assert!(log.contains(&"by the agent".to_owned()), "{log:?}");

    // The twins without the list, each attack alone (a planted common directory takes the
    // hooks and the submodule's place): each lands, and the user's git runs it.
    let naive = [&sandboxed[..], &["--unprotect-defaults"]].concat();
    for (part, mark) in [
        ("commondir", "commondir"),
        ("hook", "hook"),
        ("submodule", "submodule"),
    ] {
        let (repository, _upstream) = Repository::with_submodule();
        std::fs::remove_dir_all(repository.ws().join(".git/hooks")).unwrap();
        let script = second_script_attack(&repository, &[part]);
        let records = call(
            repository.ws(),
            &naive,
            &[("run_command", json!({"command": script}))],
        );
        assert!(
            ran(&records[0]).starts_with(&format!("{part}=0\n")),
            "{}",
            records[0]
        );
        let _ = repository.user_status();
        assert_eq!(repository.user_commits(), [mark], "{part}");
    }
}

#[test]
fn a_protect_path_missing_at_the_start_cannot_be_created_by_a_sandboxed_run_or_job() {
    let ws = tempfile::tempdir().unwrap();
    let script = "mkdir -p deploy && echo 'rm -rf /' > deploy/run.sh; echo made=$?; \
                  sleep 1; test -e deploy/run.sh; echo present=$?; ln -s elsewhere deploy/run.sh; \
                  sleep 1; test -L deploy/run.sh; echo link=$?";
    let flags = [
        "--sandbox",
        "--allow-commands",
        "--protect",
        "deploy/run.sh",
    ];
    let records = call(
        ws.path(),
        &flags,
        &[("run_command", json!({"command": script}))],
    );
    assert_eq!(
        ran(&records[0]),
        "made=0\npresent=1\nlink=1\n",
        "{}",
        records[0]
    );
    assert!(ws.path().join("deploy").is_dir());
    assert!(!ws.path().join("deploy/run.sh").exists());
    // A job: watched for its whole life, swept once more when it ends.
    let job = "sleep 1; mkdir -p deploy && echo x > deploy/run.sh; sleep 1; \
               test -e deploy/run.sh; echo present=$?";
    let records = call(
        ws.path(),
        &flags,
        &[
            ("run_command", json!({"command": job, "background": true})),
            ("job_output", json!({"jobId": "job-1", "waitMs": 10_000})),
        ],
    );
    assert_eq!(records[0]["content"]["jobId"], "job-1", "{}", records[0]);
    assert_eq!(
        records[1]["content"]["stdout"], "present=1\n",
        "{}",
        records[1]
    );
    assert!(!ws.path().join("deploy/run.sh").exists());
    // The twin: without `--protect` the same run leaves the file.
    let ws = tempfile::tempdir().unwrap();
    let records = call(
        ws.path(),
        &flags[..2],
        &[("run_command", json!({"command": script}))],
    );
    assert_eq!(
        ran(&records[0]),
        "made=0\npresent=0\nlink=1\n",
        "{}",
        records[0]
    );
    assert!(ws.path().join("deploy/run.sh").exists());
}

/// The rest of the protected list, against a sandboxed child: each path that exists at the
/// run's start refuses every write (`config.worktree`, `info/exclude`, a submodule's hooks,
/// `.gitmodules`, `.idea`, `.claude`, `.mcp.json`, `.envrc`), and a linked worktree's files
/// planted under `.git/worktrees/` are gone once the run ends. The twin, with the defaults
/// dropped, writes every one of them.
#[test]
fn a_sandboxed_script_cannot_change_the_rest_of_the_protected_list() {
    const TEST: &str = "a_sandboxed_script_cannot_change_the_rest_of_the_protected_list";
    if !have_git(TEST) {
        return;
    }
    let existing = [
        ".git/config.worktree",
        ".git/info/exclude",
        ".git/modules/sub/hooks/pre-commit",
        ".gitmodules",
        ".idea/workspace.xml",
        ".claude/settings.json",
        ".mcp.json",
        ".envrc",
    ];
    let script: String = existing
        .iter()
        .map(|p| format!("(echo planted >> {p}) 2>/dev/null; echo {p}=$?; "))
        .collect::<String>()
        + "mkdir -p .git/worktrees/w && echo /tmp/x > .git/worktrees/w/gitdir; echo worktree=$?";
    let setup = || {
        let (repository, upstream) = Repository::with_submodule();
        for p in existing {
            let path = repository.ws().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            if !path.exists() {
                std::fs::write(&path, "the user's\n").unwrap();
            }
        }
        (repository, upstream)
    };
    let sandboxed = [&["--allow-commands"][..], &GIT_ENV].concat();
    let (repository, _upstream) = setup();
    let records = call(
        repository.ws(),
        &sandboxed,
        &[("run_command", json!({"command": script}))],
    );
    let said = ran(&records[0]);
    for p in existing {
        assert!(
            said.lines()
                .any(|l| l.strip_prefix(&format!("{p}=")).is_some_and(|c| c != "0")),
            "{p} was written: {said}"
        );
        let text = std::fs::read_to_string(repository.ws().join(p)).unwrap();
        assert!(!text.contains("planted"), "{p}: {text}");
    }
    assert!(
        !repository.ws().join(".git/worktrees/w/gitdir").exists(),
        "{said}"
    );
    // The twin: the defaults dropped, every write lands.
    let naive = [&sandboxed[..], &["--unprotect-defaults"]].concat();
    let (repository, _upstream) = setup();
    let records = call(
        repository.ws(),
        &naive,
        &[("run_command", json!({"command": script}))],
    );
    let said = ran(&records[0]);
    for p in existing {
        assert!(said.contains(&format!("{p}=0\n")), "{p}: {said}");
    }
    assert!(said.ends_with("worktree=0\n"), "{said}");
    assert!(repository.ws().join(".git/worktrees/w/gitdir").exists());
}

// The third attack: what git discovers as the repository. A submodule's `commondir` planted
// while the run lasts, the root's `.git` swapped for a `gitdir:` file, and the root itself
// made a repository once `.git` no longer is one.

impl Repository {
    /// The user's `git status` on the host inside the submodule `sub`; the marks left.
    fn user_status_in_submodule(&self) -> Vec<String> {
        let _ = host_git(&self.ws().join("sub"), &["status", "--porcelain"]);
        self.marks()
    }

    fn clear_marks(&self) {
        for entry in std::fs::read_dir(self.marks.path()).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
    }
}

/// The sandboxed child's attack on the submodule, one line per step: a common directory
/// planted beside its repository (`.git/modules/sub/evil`: the submodule's configuration plus
/// a `core.fsmonitor`, its branch at the submodule's commit, its objects borrowed), then named
/// by `.git/modules/sub/commondir` (absent at the run's start). Then it waits and says whether
/// the name is still there.
fn submodule_commondir_attack(repository: &Repository) -> String {
    let sub = repository.ws().join("sub");
    let head = host_git(&sub, &["rev-parse", "HEAD"]).unwrap();
    let branch = host_git(&sub, &["symbolic-ref", "HEAD"]).unwrap();
    let config = std::fs::read_to_string(repository.ws().join(".git/modules/sub/config")).unwrap();
    let planted = format!(
        "{config}{}",
        fsmonitor(&repository.mark("submodule-commondir"))
    );
    format!(
        "d=.git/modules/sub/evil; b={branch}\n\
         mkdir -p $d/objects/info \"$d/$(dirname $b)\" && printf '%s' '{planted}' > $d/config \
         && echo {head} > $d/$b && echo ../../objects > $d/objects/info/alternates; echo evil=$?\n\
         printf evil > .git/modules/sub/commondir; echo commondir=$?\n\
         sleep 1; test -e .git/modules/sub/commondir; echo absent=$?\n",
        branch = branch.trim(),
        head = head.trim(),
    )
}

/// A sandboxed child (the default sandbox, no flag) plants a submodule's `commondir`: it is
/// removed while the run lasts, and the user's `git status` at the top level and inside the
/// submodule runs nothing. The twin, the defaults dropped: the name stays, and both run the
/// planted `core.fsmonitor`.
#[test]
fn a_sandboxed_script_cannot_plant_a_submodules_commondir() {
    const TEST: &str = "a_sandboxed_script_cannot_plant_a_submodules_commondir";
    if !have_git(TEST) {
        return;
    }
    let sandboxed = [&["--allow-commands"][..], &GIT_ENV].concat();
    let commondir = ".git/modules/sub/commondir";
    let (repository, _upstream) = Repository::with_submodule();
    assert!(!repository.ws().join(commondir).exists());
    let script = submodule_commondir_attack(&repository);
    let records = call(
        repository.ws(),
        &sandboxed,
        &[("run_command", json!({"command": script}))],
    );
    assert_eq!(
        ran(&records[0]),
        "evil=0\ncommondir=0\nabsent=1\n",
        "{}",
        records[0]
    );
    assert!(!repository.ws().join(commondir).exists());
    assert!(repository.user_status().is_empty());
    assert!(repository.user_status_in_submodule().is_empty());

    // The twin: the same run with the defaults dropped leaves the name, and the user's git
    // runs the planted command at the top level and in the submodule.
    let (repository, _upstream) = Repository::with_submodule();
    let script = submodule_commondir_attack(&repository);
    let naive = [&sandboxed[..], &["--unprotect-defaults"]].concat();
    let records = call(
        repository.ws(),
        &naive,
        &[("run_command", json!({"command": script}))],
    );
    assert_eq!(
        ran(&records[0]),
        "evil=0\ncommondir=0\nabsent=0\n",
        "{}",
        records[0]
    );
    assert!(repository.ws().join(commondir).exists());
    assert_eq!(repository.user_status(), ["submodule-commondir"]);
    repository.clear_marks();
    assert_eq!(
        repository.user_status_in_submodule(),
        ["submodule-commondir"]
    );
}

/// The sandboxed child's attempt to swap the root's `.git` for a `gitdir:` file, one line per
/// step: a planted repository (a copy of the user's, its configuration given a
/// `core.fsmonitor`), `.git` renamed away, removed (as an entry: `rmdir`, `rm`, `unlink`),
/// then a `.git` file naming the planted repository written.
fn gitdir_file_attack(repository: &Repository) -> String {
    let planted = fsmonitor(&repository.mark("gitdir"));
    format!(
        "cp -R .git planted && printf '%s' '{planted}' >> planted/config; echo planted=$?\n\
         mv .git .git-aside 2>/dev/null; echo aside=$?\n\
         rmdir .git 2>/dev/null; echo rmdir=$?\n\
         rm -f .git 2>/dev/null; echo rm=$?\n\
         perl -e 'unlink(\".git\") or exit 1'; echo unlink=$?\n\
         (printf 'gitdir: planted\\n' > .git) 2>/dev/null; echo gitfile=$?\n\
         test -f .git; echo file=$?\n"
    )
}

/// The root's `.git` under a sandboxed child (the default sandbox): it is never renamed,
/// removed, nor replaced by a `gitdir:` file, and the user's `git status` runs nothing
/// planted. The twin, the defaults dropped: `.git` is moved aside, the file written, and the
/// user's `git status` runs the planted repository's `core.fsmonitor`.
#[test]
fn a_sandboxed_script_cannot_replace_the_roots_git_by_a_gitdir_file() {
    const TEST: &str = "a_sandboxed_script_cannot_replace_the_roots_git_by_a_gitdir_file";
    if !have_git(TEST) {
        return;
    }
    let sandboxed = [&["--allow-commands"][..], &GIT_ENV].concat();
    let repository = Repository::new();
    let records = call(
        repository.ws(),
        &sandboxed,
        &[(
            "run_command",
            json!({"command": gitdir_file_attack(&repository)}),
        )],
    );
    assert_eq!(
        ran(&records[0]),
        "planted=0\naside=1\nrmdir=1\nrm=1\nunlink=1\ngitfile=2\nfile=1\n",
        "{}",
        records[0]
    );
    assert!(repository.ws().join(".git").is_dir());
    assert!(repository.user_status().is_empty());
    assert!(repository.user_commits().is_empty());
    assert_eq!(repository.log(), ["by the user", "first"]);

    // The twin: without the list `.git` goes aside and the `gitdir:` file takes its place.
    let repository = Repository::new();
    let naive = [&sandboxed[..], &["--unprotect-defaults"]].concat();
    let records = call(
        repository.ws(),
        &naive,
        &[(
            "run_command",
            json!({"command": gitdir_file_attack(&repository)}),
        )],
    );
    assert_eq!(
        ran(&records[0]),
        "planted=0\naside=0\nrmdir=1\nrm=0\nunlink=1\ngitfile=0\nfile=0\n",
        "{}",
        records[0]
    );
    assert_eq!(repository.user_status(), ["gitdir"]);
}

/// The configuration of a repository planted at the root itself: a work tree (the root) and a
/// `core.fsmonitor` that leaves `mark`.
fn root_repository_config(mark: &Path) -> String {
    format!(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n{}",
        fsmonitor(mark).trim_start_matches("[core]\n")
    )
}

/// The root made a repository, through the tools or a sandboxed child: `.git/HEAD` (git's own
/// ordinary file) spoiled, so that `.git` is no repository and git's discovery looks at the
/// root itself as a bare one, which `HEAD`, `objects`, `refs` and a `config` at the root
/// make. The root's `HEAD` is refused to the tools and removed while a sandboxed run lasts,
/// so the user's `git status` runs nothing planted (it finds no repository there at all);
/// the twins, the defaults dropped, run the planted `core.fsmonitor`.
#[test]
fn neither_the_tools_nor_a_sandboxed_script_can_make_the_root_itself_a_repository() {
    const TEST: &str =
        "neither_the_tools_nor_a_sandboxed_script_can_make_the_root_itself_a_repository";
    if !have_git(TEST) {
        return;
    }
    let tools = |repository: &Repository| -> Vec<(&'static str, Value)> {
        let branch = host_git(repository.ws(), &["symbolic-ref", "HEAD"]).unwrap();
        vec![
            (
                "write_file",
                json!({"path": ".git/HEAD", "content": "spoiled\n"}),
            ),
            ("create_directory", json!({"path": "objects"})),
            ("create_directory", json!({"path": "refs"})),
            (
                "write_file",
                json!({"path": "config", "content": root_repository_config(&repository.mark("tools"))}),
            ),
            (
                "write_file",
                json!({"path": "HEAD", "content": format!("ref: {branch}")}),
            ),
        ]
    };
    let script = |repository: &Repository| {
        format!(
            "echo spoiled > .git/HEAD; echo spoiled=$?\n\
             mkdir objects refs && printf '%s' '{}' > config; echo config=$?\n\
             echo 'ref: refs/heads/main' > HEAD; echo head=$?\n\
             sleep 1; test -e HEAD; echo absent=$?\n",
            root_repository_config(&repository.mark("script"))
        )
    };
    let sandboxed = [&["--allow-commands"][..], &GIT_ENV].concat();
    for naive in [false, true] {
        let flags = match naive {
            false => sandboxed.clone(),
            true => [&sandboxed[..], &["--unprotect-defaults"]].concat(),
        };
        let repository = Repository::new();
        let calls = tools(&repository);
        let records = call(repository.ws(), &flags, &calls);
        for (record, (name, args)) in records.iter().zip(&calls) {
            let refused = record["content"]["error"]["message"] == "PATH_PROTECTED";
            assert_eq!(
                refused,
                !naive && args["path"] == "HEAD",
                "{name}: {record}"
            );
        }
        let want: &[&str] = match naive {
            false => &[],
            true => &["tools"],
        };
        assert_eq!(repository.user_status(), want);

        let repository = Repository::new();
        let records = call(
            repository.ws(),
            &flags,
            &[("run_command", json!({"command": script(&repository)}))],
        );
        let absent = if naive { 0 } else { 1 };
        assert_eq!(
            ran(&records[0]),
            format!("spoiled=0\nconfig=0\nhead=0\nabsent={absent}\n"),
            "{}",
            records[0]
        );
        assert_eq!(repository.ws().join("HEAD").exists(), naive);
        let want: &[&str] = match naive {
            false => &[],
            true => &["script"],
        };
        assert_eq!(repository.user_status(), want);
    }
}

/// A repository planted beside a submodule (a copy of the submodule's, its work tree the
/// submodule's, given a `core.fsmonitor`), standing for what a sandboxed run could leave; the
/// tools then rewrite the submodule's gitfile (`sub/.git`) to name it, or plant a nested
/// repository's configuration. With the defaults every one of those writes is refused and the
/// user's top-level `git status` runs nothing planted; the twin, the defaults dropped, writes
/// the gitfile, and the user's `git status` follows it into the planted repository and runs
/// its `core.fsmonitor`.
#[test]
fn the_tools_cannot_rewrite_a_submodules_gitfile_or_plant_a_nested_repository() {
    const TEST: &str = "the_tools_cannot_rewrite_a_submodules_gitfile_or_plant_a_nested_repository";
    if !have_git(TEST) {
        return;
    }
    let plant = plant_beside_the_submodule;
    let attack = [
        (
            "write_file",
            json!({"path": "sub/.git", "content": "gitdir: ../planted\n"}),
        ),
        (
            "edit_file",
            json!({"path": "sub/.git", "edits": [{"oldText": "../.git/modules/sub", "newText": "../planted"}]}),
        ),
        (
            "write_file",
            json!({"path": "nested/.git/config", "content": "[core]\n"}),
        ),
        ("create_directory", json!({"path": "nested/.git"})),
        ("delete_file", json!({"path": "sub/.git"})),
    ];
    let (repository, _upstream) = Repository::with_submodule();
    plant(&repository);
    let gitfile = std::fs::read_to_string(repository.ws().join("sub/.git")).unwrap();
    let records = call(repository.ws(), &[], &attack);
    for (record, (tool, _)) in records.iter().zip(&attack) {
        assert_eq!(
            record["content"]["error"]["message"], "PATH_PROTECTED",
            "{tool}: {record}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(repository.ws().join("sub/.git")).unwrap(),
        gitfile
    );
    assert!(!repository.ws().join("nested").exists());
    assert!(repository.user_status().is_empty());

    // The twin: the defaults dropped, the first write lands and the user's git runs the
    // planted repository's fsmonitor from the top level.
    let (repository, _upstream) = Repository::with_submodule();
    plant(&repository);
    let records = call(repository.ws(), &["--unprotect-defaults"], &attack[..1]);
    assert_eq!(records[0]["isError"], false, "{}", records[0]);
    assert_eq!(repository.user_status(), ["gitfile"]);
}

/// A repository planted beside the submodule, standing for what a run could leave: a copy of
/// the submodule's, its work tree the submodule's, given a `core.fsmonitor` that leaves the
/// mark `gitfile`.
fn plant_beside_the_submodule(repository: &Repository) {
    let ws = repository.ws();
    copy_tree(&ws.join(".git/modules/sub"), &ws.join("planted"));
    host_git(
        ws,
        &["config", "-f", "planted/config", "core.worktree", "../sub"],
    )
    .expect("git config");
    let mut config = std::fs::OpenOptions::new()
        .append(true)
        .open(ws.join("planted/config"))
        .unwrap();
    std::io::Write::write_all(
        &mut config,
        fsmonitor(&repository.mark("gitfile")).as_bytes(),
    )
    .unwrap();
}

/// A sandboxed child (the default sandbox, no flag) tries to point the submodule's gitfile
/// (`sub/.git`) at a planted repository: rewriting it, moving it aside, removing it, moving
/// the submodule's directory away. Each is refused (the gitfile, named by the protected
/// `.gitmodules`, is read-only in the run's mount namespace and its directory pinned), and the
/// user's top-level `git status` runs nothing. The twin, the defaults dropped: the rewrite
/// lands and the user's `git status` runs the planted `core.fsmonitor`.
#[test]
fn a_sandboxed_script_cannot_rewrite_a_submodules_gitfile() {
    const TEST: &str = "a_sandboxed_script_cannot_rewrite_a_submodules_gitfile";
    if !have_git(TEST) {
        return;
    }
    let script = "said() { if [ $1 -eq 0 ]; then echo $2=done; else echo $2=refused; fi; }\n\
                  (printf 'gitdir: ../planted\\n' > sub/.git) 2>/dev/null; said $? write\n\
                  mv sub/.git sub/.git.old 2>/dev/null; said $? aside\n\
                  mv sub sub.old 2>/dev/null; said $? moved\n\
                  rm -f sub/.git 2>/dev/null; said $? removed\n";
    let sandboxed = [&["--allow-commands"][..], &GIT_ENV].concat();
    let (repository, _upstream) = Repository::with_submodule();
    plant_beside_the_submodule(&repository);
    let gitfile = std::fs::read_to_string(repository.ws().join("sub/.git")).unwrap();
    let records = call(
        repository.ws(),
        &sandboxed,
        &[("run_command", json!({"command": script}))],
    );
    assert_eq!(
        ran(&records[0]),
        "write=refused\naside=refused\nmoved=refused\nremoved=refused\n",
        "{}",
        records[0]
    );
    assert_eq!(
        std::fs::read_to_string(repository.ws().join("sub/.git")).unwrap(),
        gitfile
    );
    assert!(repository.user_status().is_empty());

    // The twin: the defaults dropped, the rewrite lands (the rest then moves it all aside).
    let (repository, _upstream) = Repository::with_submodule();
    plant_beside_the_submodule(&repository);
    let naive = [&sandboxed[..], &["--unprotect-defaults"]].concat();
    let rewrite = script.lines().take(2).collect::<Vec<_>>().join("\n");
    let records = call(
        repository.ws(),
        &naive,
        &[("run_command", json!({"command": rewrite}))],
    );
    assert_eq!(ran(&records[0]), "write=done\n", "{}", records[0]);
    assert_eq!(repository.user_status(), ["gitfile"]);
}

/// `from` copied to `to`: directories, files and symbolic links (as links).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_tree(&source, &target);
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source).unwrap(), &target).unwrap();
        } else {
            std::fs::copy(&source, &target).unwrap();
        }
    }
}
