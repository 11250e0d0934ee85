//! `cargo xtask hot-symbols`: writes `linker/hot-symbols.order`, the functions a stdio session
//! of file reads runs, which the build script hands to the linker so that they sit together
//! (see `build.rs` for why).
//!
//! The release `confine` is built and run under valgrind's callgrind over one session as an
//! agent has it (`initialize`, `tools/list`, 40 `read_file` calls one at a time, then 20 rounds
//! of 16 in flight, end of input), with `--no-sandbox` (valgrind does not know Landlock's
//! system calls), then once more with the sandbox until valgrind stops at its check; every
//! function of the binary either run executed is listed, in the order callgrind first wrote it.
//! Then come the names of the list already in place that the binary still has (added by hand
//! from the page faults of a real session: what valgrind does not see, such as code chosen by
//! a CPU feature valgrind hides), then the sandbox's and seccomp's functions (the start checks
//! the sandbox). Needs `valgrind` and `nm` on PATH.
//!
//! ```sh
//! cargo run --release -p xtask -- hot-symbols
//! ```

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{ExitCode, Stdio};

use crate::load::{build_confine, prepare};

const LIST: &str = "linker/hot-symbols.order";

#[expect(
    clippy::disallowed_methods,
    reason = "a chore of the xtask, not a tool's child"
)]
fn command(program: &str) -> std::process::Command {
    std::process::Command::new(program)
}

/// One session under callgrind; `sandbox` false adds `--no-sandbox`.
fn session(binary: &Path, root: &Path, out: &Path, sandbox: bool) -> Result<(), String> {
    let mut cmd = command("valgrind");
    cmd.args([
        "--tool=callgrind",
        "--demangle=no",
        "--compress-strings=no",
        "--compress-pos=no",
    ])
    .arg(format!(
        "--callgrind-out-file={}/cg.{}.%p",
        out.display(),
        u8::from(sandbox)
    ))
    .arg(binary)
    .args(["mcp", "--root"])
    .arg(root)
    .env("XDG_STATE_HOME", out.join("state"))
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    if !sandbox {
        cmd.arg("--no-sandbox").stdin(Stdio::piped());
    } else {
        cmd.stdin(Stdio::null());
    }
    let mut child = cmd.spawn().map_err(|e| format!("valgrind: {e}"))?;
    if sandbox {
        // Valgrind stops the start at the sandbox's check; what ran until then is recorded.
        child.wait().map_err(|e| e.to_string())?;
        return Ok(());
    }
    let mut input = child.stdin.take().ok_or("stdin")?;
    let mut output = BufReader::new(child.stdout.take().ok_or("stdout")?);
    let mut answer = || -> Result<(), String> {
        let mut line = String::new();
        match output.read_line(&mut line) {
            Ok(0) => Err("the server closed its output".into()),
            Ok(_) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    };
    let mut send = |line: String| -> Result<(), String> {
        input
            .write_all(format!("{line}\n").as_bytes())
            .map_err(|e| e.to_string())
    };
    send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"hot-symbols","version":"0"}}}"#.into())?;
    answer()?;
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into())?;
    send(r#"{"jsonrpc":"2.0","id":"list","method":"tools/list"}"#.into())?;
    answer()?;
    let read = |id: u32, file: u32| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"read_file","arguments":{{"path":"r/f{file}.txt"}}}}}}"#
        )
    };
    let mut id = 0;
    for k in 0..40 {
        id += 1;
        send(read(id, k % 16))?;
        answer()?;
    }
    for _ in 0..20 {
        for k in 0..16 {
            id += 1;
            send(read(id, k))?;
        }
        for _ in 0..16 {
            answer()?;
        }
    }
    drop(input);
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("the server under valgrind ended with {status}"));
    }
    Ok(())
}

/// The functions of `binary` that callgrind's outputs in `dir` record, in first-seen order.
fn executed(binary: &Path, dir: &Path) -> Result<Vec<String>, String> {
    let name = binary.to_string_lossy().into_owned();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("cg."))
        })
        .collect();
    files.sort();
    let mut seen = HashSet::new();
    let mut order = Vec::new();
    for file in files {
        let text = std::fs::read(&file).map_err(|e| e.to_string())?;
        let mut ours = false;
        for line in String::from_utf8_lossy(&text).lines() {
            if let Some(object) = line.strip_prefix("ob=") {
                ours = object.trim() == name;
            } else if let Some(function) = line.strip_prefix("fn=")
                && ours
            {
                // Callgrind marks a recursion level with a `'N` suffix.
                let function = function.trim();
                let function = match function.rsplit_once('\'') {
                    Some((f, n)) if n.bytes().all(|b| b.is_ascii_digit()) => f,
                    _ => function,
                };
                if !function.starts_with("0x") && seen.insert(function.to_owned()) {
                    order.push(function.to_owned());
                }
            }
        }
    }
    Ok(order)
}

/// The function symbols of `binary` (`nm`).
fn functions(binary: &Path) -> Result<Vec<String>, String> {
    let out = command("nm")
        .arg(binary)
        .output()
        .map_err(|e| format!("nm: {e}"))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, kind, name) = (f.next()?, f.next()?, f.next()?);
            matches!(kind, "t" | "T" | "w" | "W").then(|| name.to_owned())
        })
        .collect())
}

/// Run `cargo xtask hot-symbols`.
pub fn run() -> ExitCode {
    match write() {
        Ok(n) => {
            println!("{LIST}: {n} functions; rebuild in release mode to lay them out");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("xtask hot-symbols: {e}");
            ExitCode::FAILURE
        }
    }
}

fn write() -> Result<usize, String> {
    let binary = build_confine()?;
    let scratch = tempfile::Builder::new()
        .prefix("confine-hot-symbols-")
        .tempdir_in(crate::workspace_root().join("target"))
        .map_err(|e| e.to_string())?;
    let root = scratch.path().join("root");
    prepare(&root, 1);
    session(&binary, &root, scratch.path(), false)?;
    session(&binary, &root, scratch.path(), true)?;
    let mut list = executed(&binary, scratch.path())?;
    if list.is_empty() {
        return Err("callgrind recorded no function of the binary".into());
    }
    let all = functions(&binary)?;
    let present: HashSet<&str> = all.iter().map(String::as_str).collect();
    let mut listed: HashSet<String> = list.iter().cloned().collect();
    let path = crate::workspace_root().join(LIST);
    let before = std::fs::read_to_string(&path).unwrap_or_default();
    let sandbox = all
        .iter()
        .filter(|f| f.contains("16confine_nodeexec7sandbox") || f.contains("seccomp"));
    for name in before.lines().map(str::to_owned).chain(sandbox.cloned()) {
        if present.contains(name.as_str()) && listed.insert(name.clone()) {
            list.push(name);
        }
    }
    let mut text = list.join("\n");
    text.push('\n');
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(list.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callgrind_functions_of_the_binary_only_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let binary = Path::new("/x/confine");
        std::fs::write(
            dir.path().join("cg.0.1"),
            "ob=/x/confine\nfn=_ZN1a1b17hE\ncfn=_ZN1c17hE\nfn=_ZN1a1b17hE'2\nfn=0x000000000021c8f0\n\
             ob=/usr/lib/libc.so.6\nfn=malloc\nob=/x/confine\nfn=_RNv1c\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("cg.1.2"),
            "ob=/x/confine\nfn=_RNv1c\nfn=_ZN1d17hE\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("other"), "ob=/x/confine\nfn=_ZN1e17hE\n").unwrap();
        assert_eq!(
            executed(binary, dir.path()).unwrap(),
            ["_ZN1a1b17hE", "_RNv1c", "_ZN1d17hE"]
        );
    }
}
