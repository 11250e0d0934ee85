//! `read_file` never opens what it refuses: a FIFO and a character device inside the workspace
//! are refused with `FILE_NOT_REGULAR` and inotify reports no open of either (opening some
//! devices has effects: a tape rewinds, a modem hangs up, a terminal becomes the controlling
//! one). The naive twin, a non-blocking open followed by a type check, is seen opening both.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde_json::json;

use crate::support;
use support::{call_on, runtime};

/// The names inotify saw opened in `dir` since `watch` was set up.
fn opened(inotify: &mut inotify::Inotify) -> Vec<String> {
    let mut buffer = [0u8; 4096];
    let mut names = Vec::new();
    loop {
        match inotify.read_events(&mut buffer) {
            Ok(events) => {
                let before = names.len();
                names.extend(
                    events
                        .filter(|e| e.mask.contains(inotify::EventMask::OPEN))
                        .filter_map(|e| e.name.map(|n| n.to_string_lossy().into_owned())),
                );
                if names.len() == before {
                    return names;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return names,
            Err(e) => panic!("{e}"),
        }
    }
}

fn mknod(path: &Path, mode: libc::mode_t, dev: libc::dev_t) -> std::io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        c.as_c_str(),
        rustix::fs::FileType::from_raw_mode(mode),
        rustix::fs::Mode::from_raw_mode(0o666),
        dev,
    )
    .map_err(Into::into)
}

#[test]
fn read_file_refuses_a_fifo_and_a_device_without_opening_them() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    mknod(&root.join("fifo"), libc::S_IFIFO, 0).unwrap();
    // The null device (1, 3): harmless to open, so the naive twin can show the open. Only
    // root may make one (CAP_MKNOD): as an ordinary user the FIFO alone is tried, and the
    // test says so (CI runs it as root as well).
    let names: &[&str] = match mknod(&root.join("dev"), libc::S_IFCHR, libc::makedev(1, 3)) {
        Ok(()) => &["fifo", "dev"],
        Err(e) if !rustix::process::geteuid().is_root() => {
            testkit::not_run(
                "read_file_refuses_a_fifo_and_a_device_without_opening_them (device half)",
                &format!("as an ordinary user (mknod: {e}); the FIFO half runs"),
            );
            &["fifo"]
        }
        Err(e) => panic!(
            "this test creates a character device and needs CAP_MKNOD on a filesystem that \
             allows device nodes: {e}"
        ),
    };
    let registry = confine_tools::create_read_only_tools(root).unwrap();
    let rt = runtime();
    let mut inotify = inotify::Inotify::init().unwrap();
    inotify
        .watches()
        .add(root, inotify::WatchMask::OPEN)
        .unwrap();
    for &name in names {
        let result = call_on(&rt, &registry, "read_file", &json!({"path": name}));
        assert!(result.is_error, "{name}: {}", result.content);
        assert_eq!(
            result.record()["error"]["message"],
            "FILE_NOT_REGULAR",
            "{name}"
        );
    }
    assert_eq!(
        opened(&mut inotify),
        Vec::<String>::new(),
        "read_file opened"
    );

    // The naive twin: open non-blocking, then look at the type. Both are opened.
    for &name in names {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(root.join(name))
            .unwrap();
        assert!(!file.metadata().unwrap().is_file());
    }
    let mut seen = opened(&mut inotify);
    seen.sort();
    let mut expected = names.to_vec();
    expected.sort();
    assert_eq!(seen, expected, "the naive twin opens them");
}
