//! Fuzz the tool layer's argument validation. Each input gives one tool of the workspace set
//! (run_command included; the first byte picks it) JSON arguments, built from the rest of the
//! input either structurally (objects whose keys are mostly the tools' own property names,
//! values of every JSON type, duplicated keys, long strings) or, when the first byte's high bit
//! is set, as raw text. One tool per input, not every tool on every input: the fuzzer reaches
//! each tool through the first byte, and an input costs one tool's work.
//!
//! Oracle: nothing panics; a refusal is a `TOOL_ARGUMENTS_INVALID` record, and executing the
//! same arguments gives exactly that refusal (validation runs before any effect); arguments
//! that a read-only tool accepts are executed too (reading, listing, finding and searching
//! have no effect); after every input the workspace and the directory around it are exactly as
//! they were: the modification and change times of every directory (an entry made, removed or
//! renamed anywhere changes its directory's), and of every file with its size.

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use confine_tools::{CallError, ErrorCode, ToolRegistry};
use libfuzzer_sys::arbitrary::{Result as ArbResult, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::value::RawValue;
use testkit::fixture::{TOOL_KEYS, argument_target, tree_stamp};
use tokio_util::sync::CancellationToken;

struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    registry: ToolRegistry,
    runtime: tokio::runtime::Runtime,
    snapshot: Vec<String>,
    /// Every node of the snapshot and the directory around the root.
    nodes: Vec<PathBuf>,
    times: Vec<(i64, i64, i64, i64, u64)>,
}

/// Only the times and sizes of the nodes the snapshot found, re-read: any effect of a tool
/// (an entry made, removed or renamed in any directory, a file written) changes one of them.
fn quick(paths: &[PathBuf]) -> Vec<(i64, i64, i64, i64, u64)> {
    use std::os::unix::fs::MetadataExt;
    paths
        .iter()
        .map(|p| {
            let m = std::fs::symlink_metadata(p).unwrap();
            (
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
                m.len(),
            )
        })
        .collect()
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let (tmp, root) = argument_target();
        let mut options = confine_tools::ToolSetOptions::default();
        options.commands = Some(Default::default());
        let registry = confine_tools::create_workspace_tools(&root, options).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let snapshot = tree_stamp(tmp.path());
        let mut nodes = vec![tmp.path().to_path_buf(), root.clone(), root.join("dir")];
        for n in ["a.txt", "dir/b.txt", "link"] {
            nodes.push(root.join(n));
        }
        nodes.push(tmp.path().join("secret"));
        let times = quick(&nodes);
        World {
            _tmp: tmp,
            root,
            registry,
            runtime,
            snapshot,
            nodes,
            times,
        }
    })
}

fn string(u: &mut Unstructured<'_>) -> ArbResult<String> {
    Ok(match u.int_in_range(0..=5)? {
        0 => [
            "a.txt",
            "dir/b.txt",
            "link",
            "../secret",
            "/etc/passwd",
            "dir",
            "new/x.txt",
            ".",
            "**/*.txt",
            "alpha",
            "(a|b)*",
        ][u.int_in_range(0..=10)?]
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
            TOOL_KEYS[u.int_in_range(0..=TOOL_KEYS.len() - 1)?].to_owned()
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
    let [select, rest @ ..] = data else {
        return;
    };
    let text = if select & 0x80 != 0 {
        match std::str::from_utf8(rest) {
            Ok(t) => t.to_owned(),
            Err(_) => return,
        }
    } else {
        let mut u = Unstructured::new(rest);
        match if u.ratio(1, 8).unwrap_or(false) {
            value(&mut u, 0)
        } else {
            object(&mut u, 0)
        } {
            Ok(t) => t,
            Err(_) => return,
        }
    };
    let Ok(arguments) = RawValue::from_string(text) else {
        return;
    };
    let w = world();
    let tools: Vec<_> = w.registry.tools().collect();
    let tool = tools[usize::from(select & 0x7f) % tools.len()];
    let cancel = CancellationToken::new();
    match tool.validate(&arguments) {
        Err(refused) => {
            assert_eq!(refused.code(), ErrorCode::ToolArgumentsInvalid, "{refused}");
            let executed = w.runtime.block_on(tool.execute(&arguments, &cancel));
            assert_eq!(
                executed,
                Err(CallError::Failed(refused)),
                "{}",
                arguments.get()
            );
        }
        Ok(()) if confine_tools::READ_ONLY_TOOLS.contains(&tool.name()) => {
            let _ = w.runtime.block_on(tool.execute(&arguments, &cancel));
        }
        Ok(()) => {}
    }
    // The cheap check after every input; the whole tree now and then, and whenever the cheap
    // one differs (so that its message names the change).
    if quick(&w.nodes) != w.times || rest.first() == Some(&1) {
        assert_eq!(
            tree_stamp(w.root.parent().unwrap()),
            w.snapshot,
            "{}",
            arguments.get()
        );
    }
});
