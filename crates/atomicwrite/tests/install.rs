//! Integration tests of `atomicwrite`, one binary. Each is an attack where it can be: a
//! substituted temporary, a swapped name before the rename, a target that turns into a
//! directory, a symlinked target (beside its naive `std::fs::write` twin), and every step
//! failing in turn. Every test ends by checking that no `.pify-` entry is left.

use std::ffi::OsStr;
use std::io;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use confine_atomicwrite::{ErrorKind, Step, TEMP_MARKER, install, install_with};
use testkit::Sibling;

/// A fresh parent holding the directory `ws` (where we install) and its prefix-sharing sibling
/// `ws-outside` (which holds `secret.txt`), with a handle on `ws`.
struct Fixture {
    sibling: Sibling,
    ws: PathBuf,
    outside: PathBuf,
    dir: Dir,
}

impl Fixture {
    fn new() -> Self {
        let sibling = Sibling::disk("TOP SECRET");
        let dir = Dir::open_ambient_dir(&sibling.root, ambient_authority()).unwrap();
        Self {
            ws: sibling.root.clone(),
            outside: sibling.outside.clone(),
            sibling,
            dir,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.ws.join(name)
    }

    fn secret_intact(&self) {
        self.sibling.assert_outside_intact();
    }

    /// No `.pify-` entry anywhere under the parent.
    fn assert_no_leftovers(&self) {
        self.sibling.assert_no_leftovers();
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

fn temp_names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(TEMP_MARKER))
        .collect()
}

#[test]
fn install_creates_file_0644_and_replaces_it() {
    let fx = Fixture::new();
    let installed = install(&fx.dir, "a.txt", b"first").unwrap();
    assert_eq!(std::fs::read(fx.path("a.txt")).unwrap(), b"first");
    assert_eq!(mode(&fx.path("a.txt")), 0o644);
    assert_eq!(installed.mode, 0o644);
    assert_eq!(installed.len, 5);
    let installed = install(&fx.dir, "a.txt", b"").unwrap();
    assert_eq!(std::fs::read(fx.path("a.txt")).unwrap(), b"");
    assert_eq!(installed.len, 0);
    let meta = std::fs::metadata(fx.path("a.txt")).unwrap();
    assert_eq!(
        installed.id.ino,
        std::os::unix::fs::MetadataExt::ino(&meta),
        "the identity reported is the installed file's"
    );
    fx.assert_no_leftovers();
}

#[test]
fn install_keeps_the_targets_permission_bits() {
    let fx = Fixture::new();
    // (mode of the old target, mode of the new file): setuid/setgid/sticky are not carried.
    for (old, new) in [
        (0o600, 0o600),
        (0o755, 0o755),
        (0o640, 0o640),
        (0o444, 0o444),
        (0o4755, 0o755),
        (0o2750, 0o750),
    ] {
        let p = fx.path("m.txt");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(old)).unwrap();
        let installed = install(&fx.dir, "m.txt", b"new").unwrap();
        assert_eq!(mode(&p), new, "old mode {old:o}");
        assert_eq!(installed.mode, new);
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        std::fs::remove_file(&p).unwrap();
    }
    fx.assert_no_leftovers();
}

#[test]
fn install_names_of_255_bytes_and_refuses_256() {
    let fx = Fixture::new();
    let ascii = "x".repeat(255);
    let multibyte = format!("{}x", "é".repeat(127)); // 254 + 1 bytes
    assert_eq!(multibyte.len(), 255);
    for name in [&ascii, &multibyte] {
        install(&fx.dir, name, b"long").unwrap();
        assert_eq!(std::fs::read(fx.path(name)).unwrap(), b"long");
        // And again over the existing file.
        install(&fx.dir, name, b"longer").unwrap();
        assert_eq!(std::fs::read(fx.path(name)).unwrap(), b"longer");
    }
    let err = install(&fx.dir, "x".repeat(256), b"no").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidName);
    assert_eq!(std::fs::read_dir(&fx.ws).unwrap().count(), 2);
    fx.assert_no_leftovers();
}

#[test]
fn install_refuses_names_that_are_not_one_plain_name() {
    let fx = Fixture::new();
    for name in [
        "",
        ".",
        "..",
        "a/b",
        "../ws-outside/secret.txt",
        "/tmp/x",
        "a\0b",
    ] {
        let err = install(&fx.dir, name, b"no").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidName, "{name:?}");
        assert_eq!(err.code(), "INVALID_RELATIVE_PATH");
    }
    assert_eq!(std::fs::read_dir(&fx.ws).unwrap().count(), 0);
    fx.secret_intact();
    fx.assert_no_leftovers();
}

#[test]
fn install_refuses_symlink_target_where_naive_write_follows_it() {
    let fx = Fixture::new();
    symlink(fx.outside.join("secret.txt"), fx.path("link")).unwrap();
    symlink("../ws-outside/secret.txt", fx.path("rel-link")).unwrap();
    symlink("nowhere", fx.path("dangling")).unwrap();

    // The naive twin: std::fs::write follows the symlink and overwrites the outside file.
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(scratch.path().join("victim"), "TOP SECRET").unwrap();
    symlink(scratch.path().join("victim"), scratch.path().join("link")).unwrap();
    std::fs::write(scratch.path().join("link"), "pwned").unwrap();
    assert_eq!(
        std::fs::read_to_string(scratch.path().join("victim")).unwrap(),
        "pwned",
        "the unguarded write escapes"
    );

    for name in ["link", "rel-link", "dangling"] {
        let mut steps = Vec::new();
        let mut record = |step: Step, _: Option<&OsStr>| {
            steps.push(step);
            Ok(())
        };
        let err = install_with(&fx.dir, name, b"pwned", &mut record).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TargetSymlink, "{name}");
        assert_eq!(steps, [Step::InspectTarget], "no temporary was created");
        assert!(
            std::fs::symlink_metadata(fx.path(name))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
    assert!(!fx.ws.join("nowhere").exists());
    fx.secret_intact();
    fx.assert_no_leftovers();
}

#[test]
fn install_refuses_non_regular_targets_before_any_temporary() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.path("dir")).unwrap();
    std::fs::write(fx.path("dir/keep.txt"), "keep").unwrap();
    rustix::fs::mkfifoat(&fx.dir, "fifo", rustix::fs::Mode::from_raw_mode(0o600)).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(fx.path("sock")).unwrap();
    for name in ["dir", "fifo", "sock"] {
        let mut steps = Vec::new();
        let mut record = |step: Step, _: Option<&OsStr>| {
            steps.push(step);
            Ok(())
        };
        let err = install_with(&fx.dir, name, b"x", &mut record).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TargetNotRegular, "{name}");
        assert_eq!(err.code(), "WRITE_TARGET_NOT_REGULAR");
        assert_eq!(steps, [Step::InspectTarget], "no temporary was created");
    }
    assert_eq!(
        std::fs::read_to_string(fx.path("dir/keep.txt")).unwrap(),
        "keep"
    );
    fx.assert_no_leftovers();
}

#[test]
fn install_failing_at_every_step_keeps_old_or_reports() {
    let fx = Fixture::new();
    for &fail_at in Step::ALL {
        let p = fx.path("t.txt");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut fail = |step: Step, _: Option<&OsStr>| {
            if step == fail_at {
                Err(io::Error::other("injected"))
            } else {
                Ok(())
            }
        };
        let err = install_with(&fx.dir, "t.txt", b"new", &mut fail).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Failed, "{fail_at:?}");
        assert_eq!(err.step(), fail_at);
        assert_eq!(err.io_error().unwrap().to_string(), "injected");
        match fail_at {
            Step::CheckInstalled => {
                // Rejected after the commit: the commit is undone, the old file is back.
                assert_eq!(std::fs::read_to_string(&p).unwrap(), "old", "{fail_at:?}");
                assert_eq!(mode(&p), 0o600);
            }
            Step::SyncDir => {
                assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
                assert_eq!(mode(&p), 0o600);
            }
            _ => {
                assert_eq!(std::fs::read_to_string(&p).unwrap(), "old", "{fail_at:?}");
                assert_eq!(mode(&p), 0o600);
            }
        }
        assert!(temp_names(&fx.ws).is_empty(), "{fail_at:?}");
        let _ = std::fs::remove_file(&p);
    }
    fx.assert_no_leftovers();
}

#[test]
fn install_temp_is_0600_until_the_final_mode() {
    let fx = Fixture::new();
    let ws = fx.ws.clone();
    let mut seen = Vec::new();
    let mut look = |step: Step, temp: Option<&OsStr>| {
        if let Some(temp) = temp {
            seen.push((step, mode(&ws.join(temp))));
        }
        Ok(())
    };
    install_with(&fx.dir, "n.txt", b"x", &mut look).unwrap();
    assert_eq!(
        seen,
        [
            (Step::WriteTemp, 0o600),
            (Step::SyncTemp, 0o600),
            (Step::CheckTemp, 0o600),
            (Step::SetMode, 0o600),
            (Step::Rename, 0o644),
        ]
    );
    fx.assert_no_leftovers();
}

/// What an attacker puts at the temporary's name.
#[derive(Clone, Copy, Debug)]
enum Substitute {
    File,
    Symlink,
    Directory,
}

impl Substitute {
    const ALL: [Substitute; 3] = [Self::File, Self::Symlink, Self::Directory];

    /// Move our temporary away to `stolen` and plant the substitute at its name.
    fn plant(self, ws: &Path, temp: &OsStr, outside: &Path) {
        let at = ws.join(temp);
        std::fs::rename(&at, ws.join("stolen")).unwrap();
        match self {
            Self::File => std::fs::write(&at, "ATTACKER").unwrap(),
            Self::Symlink => symlink(outside.join("secret.txt"), &at).unwrap(),
            Self::Directory => {
                std::fs::create_dir(&at).unwrap();
                std::fs::write(at.join("attacker.txt"), "mine").unwrap();
            }
        }
    }

    /// The substitute is still there, untouched (a directory was not removed, recursively or
    /// at all); then the test removes it.
    fn check_and_remove(self, at: &Path) {
        match self {
            Self::File => {
                assert_eq!(std::fs::read_to_string(at).unwrap(), "ATTACKER");
                std::fs::remove_file(at).unwrap();
            }
            Self::Symlink => {
                assert!(
                    std::fs::symlink_metadata(at)
                        .unwrap()
                        .file_type()
                        .is_symlink()
                );
                std::fs::remove_file(at).unwrap();
            }
            Self::Directory => {
                assert_eq!(
                    std::fs::read_to_string(at.join("attacker.txt")).unwrap(),
                    "mine"
                );
                std::fs::remove_dir_all(at).unwrap();
            }
        }
    }
}

/// The attacker, from outside the process's view of the installation: an inotify watcher
/// sees the temporary appear, and substitutes it. The hook at `CheckTemp` only waits until
/// the attacker reports, so the race is won deterministically.
#[test]
fn install_temp_substituted_via_inotify_fails_identity_changed() {
    for sub in Substitute::ALL {
        for target_exists in [false, true] {
            let fx = Fixture::new();
            if target_exists {
                std::fs::write(fx.path("target.txt"), "old").unwrap();
            }
            let mut inotify = inotify::Inotify::init().unwrap();
            inotify
                .watches()
                .add(&fx.ws, inotify::WatchMask::CREATE)
                .unwrap();
            let (tx, rx) = mpsc::channel::<std::ffi::OsString>();
            let (ws, outside) = (fx.ws.clone(), fx.outside.clone());
            let attacker = std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                loop {
                    let events = inotify.read_events_blocking(&mut buf).unwrap();
                    for event in events {
                        let Some(name) = event.name else { continue };
                        if name.to_string_lossy().contains(TEMP_MARKER) {
                            let name = name.to_os_string();
                            sub.plant(&ws, &name, &outside);
                            tx.send(name).unwrap();
                            return;
                        }
                    }
                }
            });
            let mut wait_for_attacker = |step: Step, _: Option<&OsStr>| {
                if step == Step::CheckTemp {
                    rx.recv_timeout(Duration::from_secs(10))
                        .map_err(|_| io::Error::other("the attacker never came"))?;
                }
                Ok(())
            };
            let err = install_with(&fx.dir, "target.txt", b"payload", &mut wait_for_attacker)
                .unwrap_err();
            attacker.join().unwrap();
            assert_eq!(err.kind(), ErrorKind::TempIdentityChanged, "{sub:?}");
            assert_eq!(err.code(), "WRITE_TEMP_IDENTITY_CHANGED");
            if target_exists {
                assert_eq!(
                    std::fs::read_to_string(fx.path("target.txt")).unwrap(),
                    "old"
                );
            } else {
                assert!(!fx.path("target.txt").exists(), "target created ({sub:?})");
            }
            // Our file, moved away by the attacker, holds our bytes; nothing else was touched.
            assert_eq!(std::fs::read(fx.path("stolen")).unwrap(), b"payload");
            std::fs::remove_file(fx.path("stolen")).unwrap();
            let planted = temp_names(&fx.ws);
            assert_eq!(planted.len(), 1, "{sub:?}");
            sub.check_and_remove(&fx.ws.join(&planted[0]));
            fx.secret_intact();
            fx.assert_no_leftovers();
        }
    }
}

/// The swap comes after the first identity check, at the caller's last hook before the
/// rename (the checks between them take time): the look right before the rename catches it
/// (`WRITE_TEMP_IDENTITY_CHANGED` at the rename), the target keeps what it held and the
/// attacker's entry stays where it was put. What remains is the instant between that look
/// and the rename, which no hook reaches: a swap there is reported after the rename
/// (`WRITE_TARGET_REPLACED`, the entry left alone, see `ErrorKind::TargetReplaced`), as the
/// binary's inotify attacker test counts.
#[test]
fn install_temp_swapped_before_rename_is_caught_before_it() {
    for sub in Substitute::ALL {
        for target_exists in [false, true] {
            let fx = Fixture::new();
            if target_exists {
                std::fs::write(fx.path("target.txt"), "old").unwrap();
            }
            let (ws, outside) = (fx.ws.clone(), fx.outside.clone());
            let mut swap = |step: Step, temp: Option<&OsStr>| {
                if step == Step::Rename {
                    sub.plant(&ws, temp.unwrap(), &outside);
                }
                Ok(())
            };
            let err = install_with(&fx.dir, "target.txt", b"payload", &mut swap).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::TempIdentityChanged, "{sub:?}");
            assert_eq!(err.step(), Step::Rename);
            if target_exists {
                assert_eq!(
                    std::fs::read_to_string(fx.path("target.txt")).unwrap(),
                    "old"
                );
            } else {
                assert!(!fx.path("target.txt").exists(), "target created ({sub:?})");
            }
            assert_eq!(std::fs::read(fx.path("stolen")).unwrap(), b"payload");
            std::fs::remove_file(fx.path("stolen")).unwrap();
            let planted = temp_names(&fx.ws);
            assert_eq!(planted.len(), 1, "{sub:?}");
            sub.check_and_remove(&fx.ws.join(&planted[0]));
            fx.secret_intact();
            fx.assert_no_leftovers();
        }
    }
}

/// A hook that, at the rename, puts a directory in place of `ws/target` (holding `inner.txt`
/// when `with_inner`).
fn directory_at_rename(
    ws: PathBuf,
    with_inner: bool,
) -> impl FnMut(Step, Option<&OsStr>) -> io::Result<()> {
    move |step: Step, _: Option<&OsStr>| {
        if step == Step::Rename {
            std::fs::remove_file(ws.join("target"))?;
            std::fs::create_dir(ws.join("target"))?;
            if with_inner {
                std::fs::write(ws.join("target/inner.txt"), "inner")?;
            }
        }
        Ok(())
    }
}

/// A directory swapped in over an existing target makes the rename fail: the directory and its
/// contents stay, and only our temporary is removed.
#[test]
fn install_rename_onto_directory_fails_and_keeps_it() {
    let fx = Fixture::new();
    std::fs::write(fx.path("target"), "old").unwrap();
    let mut make_dir = directory_at_rename(fx.ws.clone(), true);
    let err = install_with(&fx.dir, "target", b"new", &mut make_dir).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TargetNotRegular);
    assert_eq!(err.step(), Step::Rename);
    assert_eq!(
        std::fs::read_to_string(fx.path("target/inner.txt")).unwrap(),
        "inner"
    );
    assert_eq!(std::fs::read_dir(&fx.ws).unwrap().count(), 1);
    fx.assert_no_leftovers();
}

/// A target replaced by a symlink after the first inspection is refused at the second, and
/// the outside file is never written.
#[test]
fn install_target_turned_symlink_midway_is_refused() {
    let fx = Fixture::new();
    std::fs::write(fx.path("t"), "old").unwrap();
    let (ws, outside) = (fx.ws.clone(), fx.outside.clone());
    let mut to_link = |step: Step, _: Option<&OsStr>| {
        if step == Step::CheckTemp {
            std::fs::remove_file(ws.join("t"))?;
            symlink(outside.join("secret.txt"), ws.join("t"))?;
        }
        Ok(())
    };
    let err = install_with(&fx.dir, "t", b"pwned", &mut to_link).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TargetSymlink);
    fx.secret_intact();
    fx.assert_no_leftovers();
}

/// Another writer renames its file over the target between our commit and our check: the
/// install fails with `WRITE_TARGET_REPLACED` and the other writer's file stays, whole.
#[test]
fn install_replaced_after_the_commit_fails_and_removes_nothing() {
    for existed in [false, true] {
        let fx = Fixture::new();
        if existed {
            std::fs::write(fx.path("t.txt"), "old").unwrap();
        }
        let ws = fx.ws.clone();
        let mut other_writer = |step: Step, _: Option<&OsStr>| {
            if step == Step::CheckInstalled {
                std::fs::write(ws.join("editor.tmp"), "theirs")?;
                std::fs::rename(ws.join("editor.tmp"), ws.join("t.txt"))?;
            }
            Ok(())
        };
        let err = install_with(&fx.dir, "t.txt", b"ours", &mut other_writer).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TargetReplaced);
        assert_eq!(err.step(), Step::CheckInstalled);
        assert_eq!(std::fs::read_to_string(fx.path("t.txt")).unwrap(), "theirs");
        assert!(temp_names(&fx.ws).is_empty(), "existed {existed}");
        std::fs::remove_file(fx.path("t.txt")).unwrap();
        fx.assert_no_leftovers();
    }
}

/// A directory put at the target just before the commit: the exchange would move it aside,
/// so it is put back at once and the install fails; the directory and its contents stay.
#[test]
fn install_exchange_with_a_directory_is_put_back() {
    let fx = Fixture::new();
    std::fs::write(fx.path("target"), "old").unwrap();
    let mut make_dir = directory_at_rename(fx.ws.clone(), false);
    let err = install_with(&fx.dir, "target", b"new", &mut make_dir).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TargetNotRegular);
    assert!(fx.path("target").is_dir());
    assert_eq!(std::fs::read_dir(&fx.ws).unwrap().count(), 1);
    fx.assert_no_leftovers();
}

/// Many installs of two 64 KiB contents from two threads (serialized by a lock, as the crate
/// requires of its callers and as the `write_file` tool does), with an unsynchronized reader:
/// every read sees one content whole, and the end state is one of them.
#[test]
fn install_concurrent_writers_never_tear() {
    let fx = Fixture::new();
    let a = vec![b'A'; 65_536];
    let b = vec![b'B'; 65_536];
    install(&fx.dir, "c.bin", &a).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let lock = std::sync::Mutex::new(());
    std::thread::scope(|s| {
        let writers: Vec<_> = [&a, &b]
            .into_iter()
            .map(|content| {
                let dir = fx.dir.try_clone().unwrap();
                let lock = &lock;
                s.spawn(move || {
                    for _ in 0..40 {
                        let _held = lock.lock().unwrap();
                        install(&dir, "c.bin", content).unwrap();
                    }
                })
            })
            .collect();
        let reader = s.spawn(|| {
            let mut reads = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let got = std::fs::read(fx.path("c.bin")).unwrap();
                assert!(got == a || got == b, "torn read of {} bytes", got.len());
                reads += 1;
            }
            reads
        });
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
    });
    let got = std::fs::read(fx.path("c.bin")).unwrap();
    assert!(got == a || got == b);
    fx.assert_no_leftovers();
}

/// At the check after the commit the hook is told where the displaced old file waits; when it
/// refuses after another writer renamed its own file over the target, that writer's file stays
/// and the displaced old file (superseded by it) goes with ours: nothing is left behind.
#[test]
fn install_refused_after_another_writer_keeps_theirs_and_leaves_nothing() {
    let fx = Fixture::new();
    std::fs::write(fx.path("t.txt"), "old").unwrap();
    let ws = fx.ws.clone();
    let mut seen_aside = None;
    let mut refuse = |step: Step, temp: Option<&OsStr>| {
        if step == Step::CheckInstalled {
            let aside = temp.expect("the displaced file's name");
            seen_aside = Some(std::fs::read_to_string(ws.join(aside))?);
            std::fs::write(ws.join("editor.tmp"), "theirs")?;
            std::fs::rename(ws.join("editor.tmp"), ws.join("t.txt"))?;
            return Err(io::Error::other("refused"));
        }
        Ok(())
    };
    let err = install_with(&fx.dir, "t.txt", b"ours", &mut refuse).unwrap_err();
    assert_eq!(err.step(), Step::CheckInstalled);
    assert_eq!(seen_aside.as_deref(), Some("old"));
    assert_eq!(std::fs::read_to_string(fx.path("t.txt")).unwrap(), "theirs");
    assert!(temp_names(&fx.ws).is_empty());
    std::fs::remove_file(fx.path("t.txt")).unwrap();
    fx.assert_no_leftovers();
}

/// Refused after the commit of a new file (nothing displaced): the hook is told no name.
#[test]
fn install_of_a_new_file_displaces_nothing() {
    let fx = Fixture::new();
    let mut aside = Some(OsStr::new("unset").to_owned());
    let mut look = |step: Step, temp: Option<&OsStr>| {
        if step == Step::CheckInstalled {
            aside = temp.map(OsStr::to_owned);
        }
        Ok(())
    };
    install_with(&fx.dir, "new.txt", b"x", &mut look).unwrap();
    assert_eq!(aside, None);
}
