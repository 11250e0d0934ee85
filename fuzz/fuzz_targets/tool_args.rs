//! Fuzz the tool layer's argument validation. Every tool of the coding set gets the same JSON
//! arguments, built from the input either structurally (objects whose keys are mostly the
//! tools' own property names, values of every JSON type, duplicated keys, long strings) or,
//! when the first byte is 0, as raw text.
//!
//! Oracle: nothing panics; a refusal is a `TOOL_ARGUMENTS_INVALID` record, and executing the
//! same arguments gives exactly that refusal (validation runs before any effect); arguments
//! that `read_file` accepts are executed too (a read has no effect); after every input the
//! workspace (names, kinds, sizes, modification times) is exactly as it was.

#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::arbitrary::{Result as ArbResult, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;
use tools::{CallError, ErrorCode, ToolRegistry};

struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    registry: ToolRegistry,
    runtime: tokio::runtime::Runtime,
    snapshot: Vec<String>,
}

fn snapshot(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            out.push(format!(
                "{} {:?} {} {:?}",
                e.path().display(),
                meta.file_type(),
                meta.len(),
                meta.modified().ok()
            ));
            if meta.is_dir() {
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("dir")).unwrap();
        std::fs::write(root.join("a.txt"), "alpha").unwrap();
        std::fs::write(root.join("dir/b.txt"), "beta").unwrap();
        std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
        std::fs::write(tmp.path().join("secret"), "outside").unwrap();
        let registry =
            tools::create_coding_tools(&root, tools::NodeProcessOptions::default()).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let snapshot = snapshot(tmp.path());
        World {
            _tmp: tmp,
            root,
            registry,
            runtime,
            snapshot,
        }
    })
}

const KEYS: &[&str] = &["path", "content", "source", "arguments", "id", "", "PATH", "path "];

fn string(u: &mut Unstructured<'_>) -> ArbResult<String> {
    Ok(match u.int_in_range(0..=5)? {
        0 => ["a.txt", "dir/b.txt", "link", "../secret", "/etc/passwd", "dir", "new/x.txt"]
            [u.int_in_range(0..=6)?]
            .to_owned(),
        1 => "a".repeat(u.int_in_range(0..=70_000)?),
        2 => "\0".to_owned(),
        _ => u.arbitrary::<String>()?,
    })
}

fn value(u: &mut Unstructured<'_>, depth: u32) -> ArbResult<String> {
    Ok(match u.int_in_range(0..=7)? {
        0 => "null".to_owned(),
        1 => u.arbitrary::<bool>()?.to_string(),
        2 => u.arbitrary::<f64>()?.to_string(),
        3 if depth < 3 => {
            let n = u.int_in_range(0..=40)?;
            let items: ArbResult<Vec<String>> = (0..n).map(|_| value(u, depth + 1)).collect();
            format!("[{}]", items?.join(","))
        }
        4 if depth < 3 => object(u, depth + 1)?,
        _ => serde_json::to_string(&string(u)?).unwrap(),
    })
}

fn object(u: &mut Unstructured<'_>, depth: u32) -> ArbResult<String> {
    let n = u.int_in_range(0..=4)?;
    let mut fields = Vec::new();
    for _ in 0..n {
        let key = if u.ratio(1, 6)? {
            u.arbitrary::<String>()?
        } else {
            KEYS[u.int_in_range(0..=KEYS.len() - 1)?].to_owned()
        };
        fields.push(format!(
            "{}:{}",
            serde_json::to_string(&key).unwrap(),
            value(u, depth)?
        ));
    }
    Ok(format!("{{{}}}", fields.join(",")))
}

fuzz_target!(|data: &[u8]| {
    let text = match data.split_first() {
        Some((0, rest)) => match std::str::from_utf8(rest) {
            Ok(t) => t.to_owned(),
            Err(_) => return,
        },
        _ => {
            let mut u = Unstructured::new(data);
            match if u.ratio(1, 8).unwrap_or(false) { value(&mut u, 0) } else { object(&mut u, 0) } {
                Ok(t) => t,
                Err(_) => return,
            }
        }
    };
    let Ok(arguments) = RawValue::from_string(text) else {
        return;
    };
    let w = world();
    let cancel = CancellationToken::new();
    for tool in w.registry.tools() {
        match tool.validate(&arguments) {
            Err(refused) => {
                assert_eq!(refused.code(), ErrorCode::ToolArgumentsInvalid, "{refused}");
                let executed = w.runtime.block_on(tool.execute(&arguments, &cancel));
                assert_eq!(executed, Err(CallError::Failed(refused)), "{}", arguments.get());
            }
            Ok(()) if tool.name() == "read_file" => {
                let _ = w.runtime.block_on(tool.execute(&arguments, &cancel));
            }
            Ok(()) => {}
        }
    }
    assert_eq!(snapshot(w.root.parent().unwrap()), w.snapshot, "{}", arguments.get());
});
