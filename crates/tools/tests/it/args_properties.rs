//! The ordinary suite's twin of the `tool_args` fuzz target: arbitrary JSON arguments given to
//! every tool of the workspace set (run_command included), with the same oracle. Nothing
//! panics; a refusal is a `TOOL_ARGUMENTS_INVALID` record and executing the same arguments
//! gives exactly that refusal (validation comes before any effect); arguments a read-only
//! tool accepts are executed too; and after every case the workspace and the directory around
//! it are exactly as they were (names, kinds, sizes, modification and change times).

use std::cell::Cell;

use confine_tools::{CallError, ErrorCode};
use proptest::prelude::*;
use serde_json::Value;
use serde_json::value::RawValue;
use testkit::fixture::{TOOL_KEYS, argument_target, tree_stamp};
use tokio_util::sync::CancellationToken;

fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
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
            "a.txt\0",
            "C:\\x",
            "dir/../a.txt",
        ])
        .prop_map(str::to_owned),
        (0usize..5000).prop_map(|n| "a".repeat(n)),
        ".{0,24}",
    ]
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        string().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            object(inner),
        ]
    })
}

fn object(values: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        5 => prop::sample::select(TOOL_KEYS).prop_map(str::to_owned),
        1 => ".{0,12}",
    ];
    prop::collection::vec((key, values), 0..5)
        .prop_map(|fields| Value::Object(fields.into_iter().collect()))
}

/// Values of the types the tools' fields have, so that many objects are accepted.
fn plausible() -> impl Strategy<Value = Value> {
    prop_oneof![
        string().prop_map(Value::from),
        (0i64..100).prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
    ]
}

fn arguments() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => object(plausible()).prop_map(|v| v.to_string()),
        // A path and at most one more field: what most tools accept.
        4 => (string(), prop::option::of((prop::sample::select(TOOL_KEYS), plausible()))).prop_map(
            |(path, more)| {
                let mut v = serde_json::json!({ "path": path });
                if let Some((key, value)) = more {
                    v[key] = value;
                }
                v.to_string()
            }
        ),
        4 => object(json()).prop_map(|v| v.to_string()),
        1 => json().prop_map(|v| v.to_string()),
        // Duplicated keys, which a map cannot hold: the first value is a valid path.
        1 => (string(), json()).prop_map(|(p, v)| {
            format!("{{\"path\":{},\"path\":{v}}}", Value::from(p))
        }),
    ]
}

#[test]
fn arbitrary_arguments_are_refused_before_any_effect() {
    let (tmp, root) = argument_target();
    let mut options = confine_tools::ToolSetOptions::default();
    options.commands = Some(Default::default());
    let registry = confine_tools::create_workspace_tools(&root, options).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let before = tree_stamp(tmp.path());
    let (refused, executed) = (Cell::new(0u32), Cell::new(0u32));

    proptest!(ProptestConfig::with_cases(1024), |(text in arguments())| {
        let arguments = RawValue::from_string(text).unwrap();
        let cancel = CancellationToken::new();
        for tool in registry.tools() {
            match tool.validate(&arguments) {
                Err(refusal) => {
                    refused.set(refused.get() + 1);
                    prop_assert_eq!(refusal.code(), ErrorCode::ToolArgumentsInvalid);
                    let result = runtime.block_on(tool.execute(&arguments, &cancel));
                    prop_assert_eq!(result, Err(CallError::Failed(refusal)));
                }
                Ok(()) if confine_tools::READ_ONLY_TOOLS.contains(&tool.name()) => {
                    executed.set(executed.get() + 1);
                    let _ = runtime.block_on(tool.execute(&arguments, &cancel));
                }
                Ok(()) => {}
            }
        }
        prop_assert_eq!(&tree_stamp(tmp.path()), &before, "{}", arguments.get());
    });
    // The generator reaches both sides of the validation.
    let (refused, executed) = (refused.get(), executed.get());
    assert!(
        refused > 0 && executed > 0,
        "{refused} refused, {executed} executed"
    );
}
