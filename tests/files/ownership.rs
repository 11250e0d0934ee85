//! Ownership kept: `write_file` and `edit_file` replacing a file keep its owner and group
//! where the server may set them (root), and its permission bits without set-user-ID and
//! set-group-ID. The owner half needs root (only root gives a file away); as an ordinary user
//! it says so and runs the mode half alone.

use crate::support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use confine_tools::ToolSetOptions;
use serde_json::json;
use support::{call_on, runtime};

const OTHER: u32 = 1234;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn registry(root: &Path) -> confine_tools::ToolRegistry {
    confine_tools::create_selected_tools(
        root,
        ToolSetOptions::default(),
        &["write_file", "edit_file"],
    )
    .unwrap()
}

fn chown(path: &Path, uid: u32, gid: u32) {
    rustix::fs::chown(
        path,
        Some(rustix::fs::Uid::from_raw(uid)),
        Some(rustix::fs::Gid::from_raw(gid)),
    )
    .unwrap();
}

/// A file owned by uid 1234 gid 1234 keeps them after `write_file` and after `edit_file`
/// run by a root server (without the `fchown`, both become root's: the temporary is the
/// server's).
#[test]
fn a_replaced_file_keeps_its_owner_and_group_as_root() {
    if !is_root() {
        testkit::not_run(
            "a_replaced_file_keeps_its_owner_and_group_as_root",
            "as an ordinary user \
             (only root may give a file to another owner); CI runs it as root",
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("owned.txt");
    std::fs::write(&file, "old text\n").unwrap();
    chown(&file, OTHER, OTHER);
    let rt = runtime();
    let tools = registry(tmp.path());
    let owner = || {
        let m = std::fs::metadata(&file).unwrap();
        (m.uid(), m.gid())
    };
    let before_ino = std::fs::metadata(&file).unwrap().ino();
    let write = json!({"path": "owned.txt", "content": "new text\n"});
    assert!(!call_on(&rt, &tools, "write_file", &write).is_error);
    assert_ne!(
        std::fs::metadata(&file).unwrap().ino(),
        before_ino,
        "replaced, not rewritten"
    );
    assert_eq!(owner(), (OTHER, OTHER), "after write_file");
    let edit = json!({"path": "owned.txt", "edits": [{"oldText": "new", "newText": "edited"}]});
    assert!(!call_on(&rt, &tools, "edit_file", &edit).is_error);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "edited text\n");
    assert_eq!(owner(), (OTHER, OTHER), "after edit_file");
    // Only the group differing: kept too.
    chown(&file, 0, OTHER);
    assert!(!call_on(&rt, &tools, "write_file", &write).is_error);
    assert_eq!(owner(), (0, OTHER));
    // A new file is the server's.
    let fresh = json!({"path": "fresh.txt", "content": "x"});
    assert!(!call_on(&rt, &tools, "write_file", &fresh).is_error);
    let m = std::fs::metadata(tmp.path().join("fresh.txt")).unwrap();
    assert_eq!((m.uid(), m.gid()), (0, 0));
    assert_eq!(m.permissions().mode() & 0o7777, 0o644);
}

/// As an ordinary user the file cannot be given away: the write still succeeds, the new file
/// is the writer's (and `EPERM` from `fchown` is no error).
#[test]
fn an_ordinary_user_replaces_a_file_it_cannot_give_away() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("mine.txt");
    std::fs::write(&file, "old").unwrap();
    let rt = runtime();
    let tools = registry(tmp.path());
    let write = json!({"path": "mine.txt", "content": "new"});
    assert!(!call_on(&rt, &tools, "write_file", &write).is_error);
    let m = std::fs::metadata(&file).unwrap();
    let me = (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    assert_eq!((m.uid(), m.gid()), me);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
}

/// A set-user-ID (04755) and a set-group-ID (02755) file become 0755: new bytes nobody
/// reviewed as a program never run with the owner's rights. Other bits are kept.
#[test]
fn set_id_bits_are_dropped_and_the_rest_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime();
    let tools = registry(tmp.path());
    for (i, (before, after)) in [
        (0o4755, 0o755),
        (0o2755, 0o755),
        (0o6750, 0o750),
        (0o640, 0o640),
    ]
    .into_iter()
    .enumerate()
    {
        for tool in ["write_file", "edit_file"] {
            let name = format!("f{i}-{tool}");
            let file = tmp.path().join(&name);
            std::fs::write(&file, "old").unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(before)).unwrap();
            assert_eq!(
                std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777,
                before
            );
            let args = match tool {
                "write_file" => json!({"path": name, "content": "new"}),
                _ => json!({"path": name, "edits": [{"oldText": "old", "newText": "new"}]}),
            };
            let result = call_on(&rt, &tools, tool, &args);
            assert!(!result.is_error, "{tool}: {}", result.content);
            let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777;
            assert_eq!(mode, after, "{tool} {before:o}");
        }
    }
}
