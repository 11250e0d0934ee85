//! Red team, descriptors: a launcher that leaves descriptors open onto files outside the
//! workspace (`exec 7>>outside/leak.txt 8<outside/secret.txt; confine call …`) must not hand
//! them to the children of `run_command` or `node_process`, with or without `--sandbox`: a
//! sandbox confines paths, and an inherited descriptor needs none. Each probe is first shown to
//! work on a plain child of the same launcher (the naive twin), so a refusal is ours.

use std::process::Stdio;

use serde_json::{Value, json};

use crate::support;

const SECRET: &str = "SECRET-OUTSIDE-b71c";

/// The probes, as JSON Lines calls: a shell and a Node.js script, each writing through fd 7,
/// reading through fd 8; the shell also says which descriptors from 3 to 300 it holds.
fn probes() -> String {
    // `/proc/self/fd` is not listable under the sandbox: bash tries every number instead, on
    // an external command (a builtin's redirection would first save the stream on 10 and up;
    // duplicating works whatever the descriptor's access mode; dash takes one digit only).
    let shell = "(echo PWNED-SH >&7) 2>/dev/null && echo wrote; (cat <&8) 2>/dev/null; \
                 exec bash -c 'exec 2>/dev/null; o=; for n in {3..300}; do /bin/true >&$n && o=\"$o $n\"; done; echo fds:$o'";
    let node = "const fs = require('fs'); const said = [];
        try { fs.writeSync(7, 'PWNED-NODE\\n'); said.push('wrote'); } catch (e) { said.push(e.code); }
        try { said.push(fs.readFileSync(8, 'utf8')); } catch (e) { said.push(e.code); }
        console.log(said.join(' '));";
    [
        json!({"id": 1, "name": "run_command", "arguments": {"command": shell}}),
        json!({"id": 2, "name": "node_process", "arguments": {"source": node}}),
    ]
    .iter()
    .map(|v| format!("{v}\n"))
    .collect()
}

/// `bash -c 'exec 7>>leak 8<secret; exec <script>'` in `dir`, with `input` on stdin; stdout.
fn launch(dir: &std::path::Path, script: &str, input: &str) -> String {
    #[allow(clippy::disallowed_methods, reason = "the launcher the attack models")]
    let child = std::process::Command::new("/bin/bash")
        .arg("-c")
        .arg(format!(
            "exec 7>>outside/leak.txt 8<outside/secret.txt; {script}"
        ))
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    support::finish_with_input(child, input)
}

#[test]
fn children_hold_none_of_the_launchers_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    std::fs::create_dir_all(dir.path().join("outside")).unwrap();
    let leak = dir.path().join("outside/leak.txt");
    std::fs::write(dir.path().join("outside/secret.txt"), format!("{SECRET}\n")).unwrap();
    std::fs::write(&leak, "").unwrap();

    // The twin: a plain child of the launcher writes and reads through both.
    let plain = launch(dir.path(), "echo PWNED-PLAIN >&7; cat <&8", "");
    assert_eq!(plain, format!("{SECRET}\n"));
    assert_eq!(std::fs::read_to_string(&leak).unwrap(), "PWNED-PLAIN\n");
    std::fs::write(&leak, "").unwrap();

    let bin = env!("CARGO_BIN_EXE_confine");
    let [census_flag, census_value] = support::census_flags();
    for sandbox in ["", "--sandbox"] {
        let script = format!(
            "exec '{bin}' call --root ws --allow-commands {sandbox} {census_flag} '{census_value}'"
        );
        let out = launch(dir.path(), &script, &probes());
        let records: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(records.len(), 2, "{out}");
        let shell = &records[0]["content"];
        let said = shell["stdout"]
            .as_str()
            .unwrap_or_else(|| panic!("{sandbox}: {shell}"));
        assert!(
            !said.contains("wrote") && !said.contains(SECRET),
            "{sandbox}: {said}"
        );
        assert_eq!(said, "fds:\n", "{sandbox}: {shell}");
        let node = &records[1]["content"];
        assert_eq!(node["stdout"], "EBADF EBADF\n", "{sandbox}: {node}");
        assert_eq!(std::fs::read_to_string(&leak).unwrap(), "", "{sandbox}");
    }
}
