//! Checkpoints from outside: `confine call` runs file tools and commands, the test records
//! the tree after each, then restores every checkpoint in turn.

use crate::support;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};
use support::{call_lines, census_flags};

type Tree = BTreeMap<String, (char, Vec<u8>, u32)>;

fn record(root: &Path) -> Tree {
    fn go(dir: &Path, prefix: &str, out: &mut Tree) {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        for name in names {
            let name = name.to_str().unwrap().to_owned();
            if name == ".git" {
                continue;
            }
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            let full = dir.join(&name);
            let md = fs::symlink_metadata(&full).unwrap();
            let mode = md.permissions().mode() & 0o7777;
            if md.file_type().is_symlink() {
                let t = fs::read_link(&full).unwrap();
                out.insert(path, ('l', t.to_str().unwrap().as_bytes().to_vec(), 0));
            } else if md.is_dir() {
                out.insert(path.clone(), ('d', Vec::new(), mode));
                go(&full, &path, out);
            } else {
                out.insert(path, ('f', fs::read(&full).unwrap(), mode));
            }
        }
    }
    let mut out = Tree::new();
    go(root, "", &mut out);
    out
}

struct Ws {
    root: tempfile::TempDir,
    store: tempfile::TempDir,
    extra: Vec<String>,
}

impl Ws {
    fn new(extra: &[&str]) -> Self {
        Self {
            root: tempfile::tempdir().unwrap(),
            store: tempfile::tempdir().unwrap(),
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    /// One call through a `confine call` of its own: the record.
    fn call(&self, name: &str, arguments: Value) -> Value {
        let dir = self.store.path().join("s");
        let mut flags: Vec<String> = vec![
            "--allow-commands".into(),
            "--checkpoint-dir".into(),
            dir.to_str().unwrap().into(),
        ];
        flags.extend(census_flags());
        flags.extend(self.extra.iter().cloned());
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let line = json!({"id": 1, "name": name, "arguments": arguments}).to_string();
        let mut out = call_lines(self.root.path(), &flags, &format!("{line}\n"));
        let out = out.remove(0);
        assert_eq!(out["isError"], false, "{name}: {out}");
        out["content"].clone()
    }

    fn run(&self, command: &str) -> Value {
        self.call("run_command", json!({"command": command}))
    }

    fn list(&self) -> Vec<Value> {
        self.call("checkpoint_list", json!({}))["checkpoints"]
            .as_array()
            .unwrap()
            .clone()
    }
}

#[test]
fn restoring_every_checkpoint_gives_the_tree_of_its_moment() {
    let ws = Ws::new(&[]);
    fs::write(ws.root.path().join("seed.txt"), "seed\n").unwrap();
    let mut trees = Vec::new();
    let mut step = |f: &dyn Fn(&Ws)| {
        trees.push(record(ws.root.path()));
        f(&ws);
    };
    step(&|w| {
        w.call(
            "write_file",
            json!({"path": "src/a.txt", "content": "one\ntwo\n"}),
        );
    });
    step(&|w| {
        w.call(
            "edit_file",
            json!({"path": "src/a.txt", "edits": [{"oldText": "two", "newText": "TWO"}]}),
        );
    });
    step(&|w| {
        w.run("sed -i 's/one/ONE/' src/a.txt");
    });
    step(&|w| {
        w.run("mkdir -p gen && for i in 1 2 3 4 5 6 7 8; do mkdir -p gen/d$i && printf 'file %s' $i > gen/d$i/f; done && mkdir empty");
    });
    step(&|w| {
        w.run("chmod 755 src/a.txt && ln -s src/a.txt link && ln -s gen dirlink");
    });
    step(&|w| {
        w.run("mv gen/d1 moved && rm -r gen/d2");
    });
    step(&|w| {
        w.call(
            "move_file",
            json!({"source": "seed.txt", "destination": "moved/seed.txt"}),
        );
    });
    step(&|w| {
        w.call("delete_file", json!({"path": "src/a.txt"}));
    });
    step(&|w| {
        w.run("rm -r gen empty && rm link");
    });
    let list = ws.list();
    // One checkpoint before each changing call (the list calls take none).
    assert_eq!(list.len(), trees.len(), "{list:#?}");
    let ids: Vec<String> = list
        .iter()
        .rev()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(list[0]["call"]["name"], "run_command");
    assert_eq!(list[0]["call"]["summary"], "rm -r gen empty && rm link");
    assert_eq!(list.last().unwrap()["call"]["summary"], "src/a.txt");
    assert_eq!(list.last().unwrap()["changed"], 1);
    for (id, tree) in ids.iter().zip(&trees).rev().chain(ids.iter().zip(&trees)) {
        let r = ws.call("checkpoint_restore", json!({"id": id}));
        assert_eq!(r["skipped"], json!([]), "{r}");
        assert_eq!(&record(ws.root.path()), tree, "checkpoint {id}");
    }
}

impl Ws {
    /// Several calls through one `confine call` (a job lives as long as its server): the
    /// records, in order.
    fn calls(&self, calls: &[(&str, Value)]) -> Vec<Value> {
        let dir = self.store.path().join("s");
        let mut flags: Vec<String> = vec![
            "--allow-commands".into(),
            "--checkpoint-dir".into(),
            dir.to_str().unwrap().into(),
        ];
        flags.extend(census_flags());
        flags.extend(self.extra.iter().cloned());
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
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
        call_lines(self.root.path(), &flags, &input)
            .into_iter()
            .map(|out| {
                assert_eq!(out["isError"], false, "{out}");
                out["content"].clone()
            })
            .collect()
    }
}

#[test]
fn a_job_is_checkpointed_at_its_start_and_at_its_end() {
    let ws = Ws::new(&[]);
    fs::write(ws.root.path().join("keep.txt"), "kept").unwrap();
    let out = ws.calls(&[
        (
            "run_command",
            json!({"command": "sleep 0.3; mkdir out && echo made > out/a.txt && rm keep.txt",
                   "background": true}),
        ),
        ("job_output", json!({"jobId": "job-1", "waitMs": 20000})),
        ("checkpoint_list", json!({})),
    ]);
    assert_eq!(out[1]["status"], "exited", "{}", out[1]);
    let list = out[2]["checkpoints"].as_array().unwrap();
    // Newest first: the job's end, then its start.
    assert_eq!(list.len(), 2, "{list:#?}");
    assert_eq!(list[0]["call"]["name"], "job_end", "{list:#?}");
    assert!(
        list[0]["call"]["summary"]
            .as_str()
            .unwrap()
            .starts_with("job-1: sleep 0.3;"),
        "{list:#?}"
    );
    // A checkpoint's `changed` counts what changed after it: the job's two files are the
    // start's; nothing yet since the end.
    assert_eq!(list[0]["changed"], 0, "{list:#?}");
    assert_eq!(list[1]["call"]["name"], "run_command", "{list:#?}");
    assert_eq!(list[1]["changed"], 2, "{list:#?}");
    let (end, start) = (list[0]["id"].clone(), list[1]["id"].clone());
    let at_end = record(ws.root.path());
    ws.run("echo later > out/a.txt && echo back > keep.txt");
    // Back to the moment the job ended: what it left, not what came after.
    ws.call("checkpoint_restore", json!({"id": end}));
    assert_eq!(record(ws.root.path()), at_end);
    // And to its start: nothing of it.
    ws.call("checkpoint_restore", json!({"id": start}));
    assert_eq!(
        fs::read_to_string(ws.root.path().join("keep.txt")).unwrap(),
        "kept"
    );
    assert!(!ws.root.path().join("out").exists());
}

#[test]
fn a_denied_file_is_never_in_a_diff_nor_restored() {
    // Unsandboxed, so that the command itself can change the denied file (a sandboxed child
    // finds it covered); the restore must leave that change alone all the same.
    let ws = Ws::new(&["--deny", "*.env", "--no-sandbox"]);
    fs::write(ws.root.path().join("app.env"), "TOKEN=secret").unwrap();
    fs::write(ws.root.path().join("code.js"), "x").unwrap();
    ws.run("echo TOKEN=other > app.env && echo y > code.js");
    let id = ws.list()[0]["id"].as_str().unwrap().to_owned();
    let diff = ws.call("checkpoint_diff", json!({"id": id}));
    let text = diff.to_string();
    assert!(
        !text.contains("app.env") && !text.contains("TOKEN"),
        "{text}"
    );
    assert_eq!(diff["modified"], json!(["code.js"]));
    ws.call("checkpoint_restore", json!({"id": id}));
    assert_eq!(
        fs::read_to_string(ws.root.path().join("app.env")).unwrap(),
        "TOKEN=other\n"
    );
    assert_eq!(
        fs::read_to_string(ws.root.path().join("code.js")).unwrap(),
        "x"
    );
    // No content of it was stored (the command's own text is in the list, as the agent wrote it).
    let dir = ws.store.path().join("s/blobs");
    let mut stored = Vec::new();
    for sub in fs::read_dir(&dir).unwrap() {
        for blob in fs::read_dir(sub.unwrap().path()).unwrap() {
            stored.push(fs::read_to_string(blob.unwrap().path()).unwrap_or_default());
        }
    }
    assert!(!stored.is_empty());
    assert!(stored.iter().all(|b| !b.contains("TOKEN")), "{stored:?}");
}

#[test]
fn the_count_bound_at_n_and_n_plus_one() {
    for calls in [3usize, 4] {
        let ws = Ws::new(&["--checkpoints", "3"]);
        for i in 0..calls {
            ws.call(
                "write_file",
                json!({"path": "f", "content": format!("v{i}")}),
            );
        }
        // checkpoint_list is not a changing call: it takes none.
        let list = ws.list();
        assert_eq!(list.len(), 3, "{calls}");
        let oldest = list.last().unwrap()["id"].as_str().unwrap().to_owned();
        ws.call("checkpoint_restore", json!({"id": oldest}));
        let want = if calls == 3 {
            "missing".to_owned()
        } else {
            "v0".to_owned()
        };
        let got = fs::read_to_string(ws.root.path().join("f")).unwrap_or_else(|_| "missing".into());
        assert_eq!(got, want);
    }
}

#[test]
fn a_restore_after_the_server_was_killed_and_started_again() {
    let ws = Ws::new(&[]);
    fs::write(ws.root.path().join("f"), "before").unwrap();
    // A server killed with SIGKILL right after a changing call.
    let dir = ws.store.path().join("s");
    let mut child =
        support::spawn_call(ws.root.path(), &["--checkpoint-dir", dir.to_str().unwrap()]);
    let line =
        json!({"id": 1, "name": "write_file", "arguments": {"path": "f", "content": "after"}});
    let feeder = support::feed(&mut child, format!("{line}\n"));
    for _ in 0..600 {
        if fs::read_to_string(ws.root.path().join("f")).unwrap() == "after" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    support::kill_and_reap(child, feeder);
    let list = ws.list();
    assert_eq!(list[0]["call"]["name"], "write_file");
    let id = list[0]["id"].as_str().unwrap().to_owned();
    ws.call("checkpoint_restore", json!({"id": id}));
    assert_eq!(
        fs::read_to_string(ws.root.path().join("f")).unwrap(),
        "before"
    );
}

#[test]
fn no_checkpoints_and_read_only_offer_no_checkpoint_tools() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let line = json!({"id": 1, "name": "checkpoint_list", "arguments": {}}).to_string();
    for flags in [vec!["--no-checkpoints"], vec!["--read-only"]] {
        let out = call_lines(tmp.path(), &flags, &format!("{line}\n"));
        assert_eq!(out[0]["isError"], true, "{flags:?}: {out:?}");
    }
    // With --tools, only when a checkpoint tool is named.
    let dir = store.path().join("t");
    let d = dir.to_str().unwrap();
    let out = call_lines(
        tmp.path(),
        &["--checkpoint-dir", d, "--tools", "write_file"],
        &format!("{line}\n"),
    );
    assert_eq!(out[0]["isError"], true, "{out:?}");
    let out = call_lines(
        tmp.path(),
        &[
            "--checkpoint-dir",
            d,
            "--tools",
            "write_file,checkpoint_list",
        ],
        &format!("{line}\n"),
    );
    assert_eq!(out[0]["isError"], false, "{out:?}");
    // The twin: with a store given, the tool answers.
    let dir = store.path().join("s");
    let out = call_lines(
        tmp.path(),
        &["--checkpoint-dir", dir.to_str().unwrap()],
        &format!("{line}\n"),
    );
    assert_eq!(out[0]["isError"], false, "{out:?}");
}

#[test]
fn a_store_inside_the_root_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let inside = tmp.path().join("store");
    let out = support::confine()
        .args(["call", "--root"])
        .arg(tmp.path())
        .arg("--checkpoint-dir")
        .arg(&inside)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CHECKPOINT_STORE_UNUSABLE"));
    assert!(!inside.exists());
}

#[test]
fn invalid_input_and_unknown_ids_have_their_tokens() {
    let ws = Ws::new(&[]);
    let dir = ws.store.path().join("s");
    let flags = ["--checkpoint-dir", dir.to_str().unwrap()];
    let lines = [
        json!({"id": 1, "name": "checkpoint_diff", "arguments": {"id": "0123abcd"}}),
        json!({"id": 2, "name": "checkpoint_diff", "arguments": {"id": "../x"}}),
        json!({"id": 3, "name": "checkpoint_restore", "arguments": {"id": "ab", "paths": ["../x"]}}),
    ]
    .map(|l| l.to_string())
    .join("\n");
    let out = call_lines(ws.root.path(), &flags, &format!("{lines}\n"));
    assert_eq!(
        out[0]["content"]["error"]["message"], "CHECKPOINT_NOT_FOUND",
        "{out:?}"
    );
    assert_eq!(
        out[1]["content"]["error"]["message"],
        "INVALID_CHECKPOINT_INPUT"
    );
    assert_eq!(
        out[2]["content"]["error"]["message"],
        "INVALID_CHECKPOINT_INPUT"
    );
}

#[test]
fn without_a_usable_home_the_server_serves_without_checkpoints() {
    let tmp = tempfile::tempdir().unwrap();
    // A relative HOME, and one that does not exist (nobody's `/nonexistent`): never made.
    let missing = tmp.path().join("missing-home");
    for home in [Path::new("relative-not-usable"), missing.as_path()] {
        let line =
            json!({"id": 1, "name": "write_file", "arguments": {"path": "a", "content": "x"}});
        let list = json!({"id": 2, "name": "checkpoint_list", "arguments": {}});
        let root = tmp.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        let child = support::confine()
            .args(["call", "--root"])
            .arg(&root)
            .env_remove("XDG_STATE_HOME")
            .env("HOME", home)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = support::finish_with_input(child, &format!("{line}\n{list}\n"));
        let out: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(out[0]["isError"], false, "{out:?}");
        assert_eq!(out[1]["isError"], true, "{out:?}");
    }
    assert!(!missing.exists());
}
