//! Scans bounded whatever the files hold or do: `grep`'s 1 MiB line cut (at N and N+1) and its
//! 16 MiB regex bound (just under and just over), sparse files whose holes are skipped, a file
//! that grows while it is read, cancellation noticed inside one file's scan and inside one
//! directory's listing, and what walks leave out counted in `skipped`.

use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use confine_tools::{ToolCall, ToolRegistry, execute_tool_call};
use rustix::fs::{AtFlags, Mode, OFlags};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::{Sandbox, call, token};

const MIB: usize = 1 << 20;
const GIB: u64 = 1 << 30;

fn tools(sb: &Sandbox) -> ToolRegistry {
    confine_tools::create_read_only_tools(&sb.root).unwrap()
}

fn ok(registry: &ToolRegistry, name: &str, args: Value) -> Value {
    let r = call(registry, name, args);
    assert!(!r.is_error, "{name}: {}", r.content);
    r.record()
}

fn lines_of(v: &Value) -> Vec<(u64, String)> {
    v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["line"].as_u64().unwrap(),
                m["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A file of `len` bytes holding `data` at the given offsets and holes elsewhere; `None` when
/// this filesystem does not keep holes (the caller records that it did not run).
fn sparse(path: &Path, data: &[(u64, &[u8])], len: u64) -> Option<File> {
    let f = File::create(path).unwrap();
    for (at, bytes) in data {
        f.write_all_at(bytes, *at).unwrap();
    }
    f.set_len(len).unwrap();
    f.sync_all().unwrap();
    let st = rustix::fs::fstat(&f).unwrap();
    ((st.st_blocks as u64) * 512 < len / 2).then_some(f)
}

#[test]
fn grep_searches_a_line_of_1_mib_whole_and_cuts_one_byte_more() {
    let sb = Sandbox::disk("s");
    let max = confine_tools::limits::MAX_SEARCHED_LINE;
    // Line 1: exactly 1 MiB, the needle in its last bytes. Line 2: one byte more, the needle
    // in its last bytes (past the cut) and a marker at its start (before it). Line 3 after.
    let mut text = vec![b'a'; max - 6];
    text.extend_from_slice(b"NEEDLE\n");
    text.extend_from_slice(b"MARK");
    text.extend(std::iter::repeat_n(b'b', max + 1 - 4 - 6));
    text.extend_from_slice(b"NEEDLE\nNEEDLE after\n");
    std::fs::write(sb.root.join("long.txt"), &text).unwrap();
    let r = tools(&sb);
    let v = ok(
        &r,
        "grep",
        json!({"pattern": "NEEDLE|MARK", "path": "long.txt"}),
    );
    let found: Vec<u64> = lines_of(&v).iter().map(|(n, _)| *n).collect();
    assert_eq!(found, [1, 2, 3], "{v}");
    assert_eq!(v["longLinesCut"], 1);
    let v = ok(
        &r,
        "grep",
        json!({"pattern": "NEEDLE$", "path": "long.txt"}),
    );
    assert_eq!(
        lines_of(&v).iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        [1],
        "the needle past the cut is not searched: {v}"
    );
    // The same through a directory walk.
    let v = ok(&r, "grep", json!({"pattern": "NEEDLE$"}));
    assert_eq!(
        (v["longLinesCut"].as_u64(), v["matches"][0]["line"].as_u64()),
        (Some(1), Some(1))
    );

    // Twelve lines of 1 MiB + 1 around a match with the widest context: the window holds.
    let mut wide = Vec::new();
    for i in 0..12 {
        wide.extend(std::iter::repeat_n(b'x', max + 1));
        wide.extend_from_slice(if i == 11 { b"\nhit\n" } else { b"\n" });
    }
    wide.extend_from_slice(b"tail\n");
    std::fs::write(sb.root.join("wide.txt"), &wide).unwrap();
    let v = ok(
        &r,
        "grep",
        json!({"pattern": "^hit$", "path": "wide.txt", "contextLines": 10}),
    );
    assert_eq!(lines_of(&v), [(13, "hit".to_owned())]);
    assert_eq!(v["matches"][0]["before"].as_array().unwrap().len(), 10);
    assert_eq!(v["matches"][0]["after"], json!(["tail"]));
    assert_eq!(v["longLinesCut"], 12);
}

#[test]
fn grep_regex_compiled_size_at_16_mib_passes_and_over_is_invalid() {
    let sb = Sandbox::disk("s");
    std::fs::write(sb.root.join("a.txt"), "x".repeat(400)).unwrap();
    let r = tools(&sb);
    // `\w{335}` compiles within 16 MiB, `\w{336}` does not (Unicode word characters).
    let v = ok(&r, "grep", json!({"pattern": "\\w{335}", "path": "a.txt"}));
    assert_eq!(v["matches"].as_array().unwrap().len(), 1);
    assert_eq!(
        token(&call(
            &r,
            "grep",
            json!({"pattern": "\\w{336}", "path": "a.txt"})
        )),
        "INVALID_REGEX"
    );
}

#[test]
fn scans_of_a_100_gib_sparse_file_answer_quickly() {
    const TEST: &str = "scans_of_a_100_gib_sparse_file_answer_quickly";
    let sb = Sandbox::disk("s");
    // One line: 16 KiB of text, then a hole to 100 GiB (the attack's file: one line).
    let head = "w".repeat(16 * 1024);
    let Some(_f) = sparse(
        &sb.root.join("huge.txt"),
        &[(0, head.as_bytes())],
        100 * GIB,
    ) else {
        return testkit::not_run(TEST, "this filesystem keeps no holes");
    };
    // And many lines (64 KiB: whole blocks), a hole between them and the end.
    let listed: String = (1..=100).map(|i| format!("line {i}\n")).collect();
    let pad = "p".repeat(64 * 1024 - listed.len() - 1);
    let lines = format!("{listed}{pad}\n");
    let _g = sparse(
        &sb.root.join("lines.txt"),
        &[(0, lines.as_bytes())],
        100 * GIB,
    )
    .unwrap();
    let r = tools(&sb);
    let started = Instant::now();
    let v = ok(
        &r,
        "read_lines",
        json!({"path": "lines.txt", "offset": 1_000_000_000u64}),
    );
    assert_eq!(
        (v["text"].as_str(), v["endLine"].as_u64()),
        (Some(""), Some(999_999_999))
    );
    let v = ok(
        &r,
        "read_lines",
        json!({"path": "lines.txt", "offset": 100}),
    );
    // The hole is the last line: one NUL where it was.
    // (the padding line is cut at 2,000 characters)
    assert!(v["text"].as_str().unwrap().ends_with("ppp\n\u{0}"), "{v}");
    assert_eq!(v["endLine"], 102);
    let v = ok(&r, "grep", json!({"pattern": "^w+", "path": "huge.txt"}));
    assert_eq!(v["matches"][0]["line"], 1);
    assert_eq!(
        v["longLinesCut"], 0,
        "a hole counts as one byte of its line"
    );
    let v = ok(&r, "grep", json!({"pattern": "nothing"}));
    assert_eq!(v["filesSearched"], 2);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn scans_across_a_hole_find_the_lines_on_both_sides() {
    const TEST: &str = "scans_across_a_hole_find_the_lines_on_both_sides";
    let sb = Sandbox::disk("s");
    // 64 KiB of whole lines (whole blocks: no NUL before the hole, none in grep's 8 KiB
    // probe), a 1 GiB hole, then two lines.
    let line = format!("{}\n", "t".repeat(63));
    let mut head = line.repeat(1023);
    head.push_str(&format!("before the hole{}\n", "_".repeat(48)));
    assert_eq!(head.len(), 64 * 1024);
    let tail = b"after the hole\nlast line\n";
    let at = 64 * 1024 + GIB;
    let Some(_f) = sparse(
        &sb.root.join("holed.txt"),
        &[(0, head.as_bytes()), (at, tail)],
        at + tail.len() as u64,
    ) else {
        return testkit::not_run(TEST, "this filesystem keeps no holes");
    };
    let r = tools(&sb);
    let v = ok(
        &r,
        "grep",
        json!({"pattern": "hole|last", "path": "holed.txt"}),
    );
    assert_eq!(
        lines_of(&v),
        [
            (1024, format!("before the hole{}", "_".repeat(48))),
            (1025, "\u{0}after the hole".to_owned()),
            (1026, "last line".to_owned()),
        ]
    );
    let v = ok(
        &r,
        "read_lines",
        json!({"path": "holed.txt", "offset": 1024, "limit": 3}),
    );
    assert_eq!(
        v["text"],
        format!(
            "before the hole{}\n\u{0}after the hole\nlast line\n",
            "_".repeat(48)
        )
    );
    assert_eq!(
        (v["endLine"].as_u64(), v["truncated"].as_bool()),
        (Some(1026), Some(false))
    );
}

/// Append `TAIL` lines to `path` from the moment it is first read until `stop` (at most
/// 256 MiB, 20 MB/s): the file grows while a scan runs. Returns the bytes appended.
fn grow_on_first_read(path: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
    use rustix::fs::inotify;
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC).unwrap();
    inotify::add_watch(&fd, path, inotify::WatchFlags::ACCESS).unwrap();
    let path = path.to_owned();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        rustix::io::read(&fd, &mut buf).unwrap();
        let f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        let chunk = "TAIL line\n".repeat(MIB / 10);
        let mut written = 0usize;
        while !stop.load(Ordering::Relaxed) && written < 256 * MIB {
            std::io::Write::write_all(&mut &f, chunk.as_bytes()).unwrap();
            written += chunk.len();
            std::thread::sleep(Duration::from_millis(50));
        }
        written
    })
}

#[test]
fn scans_of_a_growing_file_read_only_its_size_at_the_start() {
    let sb = Sandbox::disk("s");
    let r = tools(&sb);
    // read_lines past the end of 4 MiB of empty lines while TAIL lines are appended: it ends,
    // and sees none of them.
    let path = sb.root.join("grows.txt");
    std::fs::write(&path, vec![b'\n'; 4 * MIB]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = grow_on_first_read(&path, Arc::clone(&stop));
    let t = Instant::now();
    let v = ok(
        &r,
        "read_lines",
        json!({"path": "grows.txt", "offset": 4 * MIB + 1, "limit": 5}),
    );
    eprintln!("read_lines took {:?}", t.elapsed());
    stop.store(true, Ordering::Relaxed);
    let grew = writer.join().unwrap();
    assert!(grew > 0, "the file never grew during the scan");
    assert_eq!(
        (v["text"].as_str(), v["endLine"].as_u64()),
        (Some(""), Some(4 * MIB as u64))
    );
    // grep of a slow-to-search file while TAIL lines are appended: none of them is seen.
    let path = sb.root.join("grows.ab");
    std::fs::write(&path, ab_lines(64 * 1024)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = grow_on_first_read(&path, Arc::clone(&stop));
    let t = Instant::now();
    let v = ok(
        &r,
        "grep",
        json!({"pattern": "a[ab]{20}[^ab\\n]|TAIL", "path": "grows.ab"}),
    );
    eprintln!("grep took {:?}", t.elapsed());
    stop.store(true, Ordering::Relaxed);
    let grew = writer.join().unwrap();
    assert!(grew > 0, "the file never grew during the scan");
    assert_eq!(v["matches"], json!([]), "{v}");
}

/// Run `name` with `args` on a current-thread runtime (the work runs inline, as in `confine
/// call`) and cancel it as soon as `watched` is first read (inotify `IN_ACCESS`): the call's
/// answer and how long after the cancel it came.
fn cancelled_on_first_read(
    registry: &ToolRegistry,
    watched: &Path,
    name: &str,
    args: Value,
) -> (
    Result<confine_tools::ToolResult, confine_tools::Cancelled>,
    Duration,
) {
    use rustix::fs::inotify;
    let cancel = CancellationToken::new();
    let fd = inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
    inotify::add_watch(&fd, watched, inotify::WatchFlags::ACCESS).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let canceller = {
        let cancel = cancel.clone();
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline && !done.load(Ordering::Relaxed) {
                match rustix::io::read(&fd, &mut buf) {
                    Ok(n) if n > 0 => {
                        let at = Instant::now();
                        cancel.cancel();
                        return Some(at);
                    }
                    _ => std::thread::sleep(Duration::from_micros(200)),
                }
            }
            None
        })
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = rt.block_on(execute_tool_call(
        registry,
        &ToolCall::new("t", name, &args),
        &cancel,
    ));
    let ended = Instant::now();
    done.store(true, Ordering::Relaxed);
    let at = canceller
        .join()
        .unwrap()
        .unwrap_or_else(|| panic!("{name}: {watched:?} was never read"));
    (result, ended.saturating_duration_since(at))
}

/// `bytes` of lines of `a` and `b` (a fixed pseudo-random sequence): for `a[ab]{20}[^ab\n]` the
/// regex engine cannot use a literal and its lazy DFA gives up, so a search is slow enough to
/// be cancelled in the middle.
fn ab_lines(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes);
    let mut x: u32 = 12345;
    while out.len() < bytes {
        for _ in 0..99 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            out.push(if (x >> 16) & 1 == 0 { b'a' } else { b'b' });
        }
        out.push(b'\n');
    }
    out
}

#[test]
fn cancel_inside_one_file_scan_is_noticed_within_a_second() {
    let sb = Sandbox::disk("s");
    let r = tools(&sb);
    // read_lines: 64 MiB of empty lines, an offset past them all.
    let newlines = sb.root.join("newlines.txt");
    std::fs::write(&newlines, vec![b'\n'; 64 * MIB]).unwrap();
    let (result, after) = cancelled_on_first_read(
        &r,
        &newlines,
        "read_lines",
        json!({"path": "newlines.txt", "offset": 1_000_000_000u64}),
    );
    assert!(result.is_err(), "read_lines ended before the cancel");
    assert!(after < Duration::from_secs(1), "read_lines: {after:?}");
    std::fs::remove_file(&newlines).unwrap();
    // grep: 16 MiB searched with a pattern its engine can only crawl through.
    let ab = sb.root.join("ab.txt");
    std::fs::write(&ab, ab_lines(16 * MIB)).unwrap();
    let (result, after) = cancelled_on_first_read(
        &r,
        &ab,
        "grep",
        json!({"pattern": "a[ab]{20}[^ab\\n]", "path": "ab.txt"}),
    );
    assert!(result.is_err(), "grep ended before the cancel");
    assert!(after < Duration::from_secs(1), "grep: {after:?}");
}

/// `count` names `f000000`, … in `dir`: hard links to a few empty files (made on its
/// descriptor; a link is far cheaper than a new file, and each inode takes at most 50,000).
fn many_files(dir: &Path, count: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let fd = rustix::fs::open(dir, OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty()).unwrap();
    for i in 0..count {
        let name = format!("f{i:06}");
        if i % 50_000 == 0 {
            rustix::fs::openat(
                &fd,
                name.as_str(),
                OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o644),
            )
            .unwrap();
        } else {
            let first = format!("f{:06}", i - i % 50_000);
            rustix::fs::linkat(&fd, first.as_str(), &fd, name.as_str(), AtFlags::empty()).unwrap();
        }
    }
}

#[test]
fn walks_of_200_000_entries_are_sorted_bounded_and_cancellable() {
    let sb = Sandbox::disk("s");
    let big = sb.root.join("big");
    many_files(&big, 200_000);
    let r = tools(&sb);
    let v = ok(&r, "list_directory", json!({"path": "big"}));
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1000);
    assert_eq!(entries[0]["name"], "f000000");
    assert_eq!(entries[999]["name"], "f000999");
    assert_eq!(v["truncated"], true);
    // The last names, found across the directory's windows, in order.
    let v = ok(&r, "find_files", json!({"pattern": "big/f19999*"}));
    let want: Vec<String> = (199_990..200_000).map(|i| format!("big/f{i:06}")).collect();
    assert_eq!(v["paths"], json!(want));
    assert_eq!(
        (v["truncated"].as_bool(), v["skipped"].as_u64()),
        (Some(false), Some(0))
    );
    let v = ok(&r, "find_files", json!({"pattern": "**/f*7"}));
    assert_eq!(v["paths"][0], "big/f000007");
    assert_eq!(v["paths"][999], "big/f009997");
    assert_eq!(v["truncated"], true);
    for (name, args) in [
        ("list_directory", json!({"path": "big"})),
        ("find_files", json!({"pattern": "**/nothing"})),
        ("grep", json!({"pattern": "x"})),
    ] {
        let (result, after) = cancelled_on_first_read(&r, &big, name, args);
        assert!(result.is_err(), "{name} ended before the cancel");
        assert!(after < Duration::from_secs(1), "{name}: {after:?}");
    }
}

#[test]
fn walks_count_refused_names_and_paths_past_path_max_in_skipped() {
    let sb = Sandbox::disk("s");
    std::fs::write(sb.root.join("plain.txt"), "needle").unwrap();
    // Names the grammar refuses: a backslash, a control character, not UTF-8, a trailing dot.
    for name in [&b"back\\slash"[..], b"bell\x07", b"\xff\xfe", b"dot."] {
        let name = std::ffi::OsStr::from_bytes(name);
        std::fs::write(sb.root.join(name), "needle").unwrap();
    }
    // A chain of directories whose path passes PATH_MAX (4,096 bytes), made on descriptors.
    let seg = "d".repeat(200);
    let mut fd =
        rustix::fs::open(&sb.root, OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty()).unwrap();
    let mut levels = 0;
    while levels < 22 {
        rustix::fs::mkdirat(&fd, seg.as_str(), Mode::from_raw_mode(0o755)).unwrap();
        fd = rustix::fs::openat(
            &fd,
            seg.as_str(),
            OFlags::DIRECTORY | OFlags::RDONLY,
            Mode::empty(),
        )
        .unwrap();
        levels += 1;
        let file = rustix::fs::openat(
            &fd,
            "deep.txt",
            OFlags::CREATE | OFlags::WRONLY,
            Mode::from_raw_mode(0o644),
        )
        .unwrap();
        rustix::io::write(&file, b"needle").unwrap();
    }
    let r = tools(&sb);
    let v = ok(&r, "list_directory", json!({}));
    assert_eq!(v["skipped"], 4, "{v}");
    let v = ok(&r, "find_files", json!({"pattern": "**/*.txt"}));
    // Every deep.txt whose path fits is found; the first entry past 4,096 bytes is counted
    // (a directory once, its contents unseen), as are the four names.
    let fits = v["paths"].as_array().unwrap();
    assert!(fits.iter().all(|p| p.as_str().unwrap().len() <= 4096));
    // plain.txt and the deep.txt of levels 1 to 20 (201 * 20 + 8 bytes); the directory of
    // level 21 (201 * 21 - 1 bytes) is counted.
    assert_eq!(fits.len(), 21);
    assert_eq!(v["skipped"], 5, "{v}");
    let v = ok(&r, "grep", json!({"pattern": "needle"}));
    assert_eq!(v["skipped"], 5, "{v}");
    assert_eq!(v["matches"].as_array().unwrap().len(), fits.len());
    // Listing the deepest directory that fits (4,019 bytes): its deep.txt (4,028) is listed,
    // the directory below (4,220) is counted.
    let deepest: Vec<&str> = std::iter::repeat_n(seg.as_str(), 20).collect();
    let v = ok(&r, "list_directory", json!({"path": deepest.join("/")}));
    assert_eq!(
        (
            v["entries"].as_array().unwrap().len(),
            v["skipped"].as_u64()
        ),
        (1, Some(1)),
        "{v}"
    );
    assert_eq!(v["entries"][0]["name"], "deep.txt");
    // A walk below the refused ones counts nothing.
    let v = ok(&r, "find_files", json!({"pattern": "*", "path": seg}));
    assert_eq!(v["skipped"], 1);
}

/// The bytes a result's matches hold as the cap counts them: paths, lines, context lines.
fn result_bytes(v: &Value) -> usize {
    let text = |x: &Value| x.as_str().unwrap().len();
    v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let ctx = |k: &str| {
                m.get(k)
                    .map_or(0, |l| l.as_array().unwrap().iter().map(text).sum())
            };
            text(&m["path"]) + text(&m["text"]) + ctx("before") + ctx("after")
        })
        .sum()
}

#[test]
fn grep_result_of_4_mib_is_whole_and_one_byte_more_is_truncated() {
    let cap = confine_tools::limits::MAX_GREP_RESULT_BYTES;
    let sb = Sandbox::disk("s");
    // A path of 2,216 bytes and 1,000 lines of 1,978 or 1,982 bytes (496 or 497 characters):
    // exactly 4 MiB of paths and lines.
    let dir: Vec<String> = (b'a'..b'l')
        .map(|c| char::from(c).to_string().repeat(200))
        .collect();
    let rel = format!("{}/f.txt", dir.join("/"));
    assert_eq!(rel.len(), 2216);
    std::fs::create_dir_all(sb.root.join(dir.join("/"))).unwrap();
    let mut lines: Vec<String> = (0..1000)
        .map(|i| format!("{}xx", "\u{1D11E}".repeat(if i < 76 { 495 } else { 494 })))
        .collect();
    assert_eq!(
        lines.iter().map(String::len).sum::<usize>() + 1000 * 2216,
        cap
    );
    let r = tools(&sb);
    let args = json!({"pattern": "xx", "path": rel, "maxMatches": 1000});
    std::fs::write(sb.root.join(&rel), lines.join("\n") + "\n").unwrap();
    let v = ok(&r, "grep", args.clone());
    assert_eq!(
        (
            v["matches"].as_array().unwrap().len(),
            v["truncated"].as_bool()
        ),
        (1000, Some(false))
    );
    assert_eq!(result_bytes(&v), cap);
    // One byte more: the last match does not fit.
    lines[999].push('x');
    std::fs::write(sb.root.join(&rel), lines.join("\n") + "\n").unwrap();
    let v = ok(&r, "grep", args);
    assert_eq!(
        (
            v["matches"].as_array().unwrap().len(),
            v["truncated"].as_bool()
        ),
        (999, Some(true))
    );
    assert_eq!(v["matches"][998]["line"], 999);
}

#[test]
fn grep_result_over_4_mib_across_files_is_a_truncated_prefix() {
    let cap = confine_tools::limits::MAX_GREP_RESULT_BYTES;
    let sb = Sandbox::disk("s");
    // 9 files of 100 matching lines of 1,000 bytes: 900 matches (under maxMatches), each with
    // up to 20 context lines: some 19 MB of result before the cap.
    let line = format!("{}\n", "é".repeat(500));
    for f in 0..9 {
        std::fs::write(sb.root.join(format!("f{f}.txt")), line.repeat(100)).unwrap();
    }
    let r = tools(&sb);
    let v = ok(
        &r,
        "grep",
        json!({"pattern": "é", "contextLines": 10, "maxMatches": 1000}),
    );
    assert_eq!(
        v["truncated"],
        true,
        "900 matches of 20 KB do not fit: {} matches, {} bytes",
        v["matches"].as_array().unwrap().len(),
        result_bytes(&v)
    );
    let got: Vec<(String, u64)> = v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap().to_owned(),
                m["line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(!got.is_empty() && got.len() < 900, "{}", got.len());
    // A prefix of the whole answer: files in order, each from its first line, none skipped.
    let want: Vec<(String, u64)> = (0..9)
        .flat_map(|f| (1..=100).map(move |l| (format!("f{f}.txt"), l)))
        .take(got.len())
        .collect();
    assert_eq!(got, want);
    assert!(result_bytes(&v) <= cap, "{}", result_bytes(&v));
    assert!(result_bytes(&v) > cap - 50_000, "{}", result_bytes(&v));

    // Without context the files are searched two at once: 10 files of 100 lines of 2,000
    // bytes at a path of 2,212 bytes, 1,000 matches of 4,212,000 bytes in all, just over.
    let sb = Sandbox::disk("s");
    let dir: String = (b'a'..b'l')
        .map(|c| char::from(c).to_string().repeat(200))
        .collect::<Vec<_>>()
        .join("/");
    std::fs::create_dir_all(sb.root.join(&dir)).unwrap();
    let line = format!("{}\n", "\u{1D11E}".repeat(500));
    for f in 0..10 {
        std::fs::write(sb.root.join(format!("{dir}/{f}")), line.repeat(100)).unwrap();
    }
    let r = tools(&sb);
    let v = ok(
        &r,
        "grep",
        json!({"pattern": "\u{1D11E}", "maxMatches": 1000}),
    );
    let got: Vec<(String, u64)> = v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap().to_owned(),
                m["line"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = (0..10)
        .flat_map(|f| {
            let path = format!("{dir}/{f}");
            (1..=100).map(move |l| (path.clone(), l))
        })
        .take(got.len())
        .collect();
    assert_eq!(got, want, "a prefix");
    assert_eq!(v["truncated"], true);
    // As many as fit: 4,194,304 / 4,212 whole matches, whichever file filled it first.
    assert_eq!(got.len(), 995);
    assert!(result_bytes(&v) <= cap);
}

#[test]
fn small_windows_miss_no_name_when_the_names_differ_in_length() {
    let sb = Sandbox::disk("s");
    // Twelve levels down (windows of 4 KiB, whichever walker reads them), 400 names whose
    // order has nothing to do with their length: a longer name left out of a window while a
    // later, larger but shorter name still fits must not be lost between two windows. Eight
    // such directories, their names spread differently: a directory's listing order is the
    // filesystem's, and one lucky order could hide a loss.
    let deep: String = (0..11).map(|i| format!("/level{i:02}")).collect();
    let mut dirs = Vec::new();
    for d in 0..8u32 {
        let sub = format!("d{d}{deep}");
        let dir = sb.root.join(&sub);
        std::fs::create_dir_all(&dir).unwrap();
        let mut want = Vec::new();
        for i in 0..400u32 {
            let pad = (i * (7 + 2 * d) + d) % 41;
            let name = format!("{i:03}-{}", "p".repeat(pad as usize));
            std::fs::write(dir.join(&name), "x").unwrap();
            want.push(format!("{sub}/{name}"));
        }
        want.sort();
        dirs.push(want);
    }
    let r = tools(&sb);
    for (d, want) in dirs.iter().enumerate() {
        let v = ok(&r, "find_files", json!({"pattern": format!("d{d}/**/*")}));
        assert_eq!(v["paths"], json!(want), "d{d}");
        let v = ok(
            &r,
            "grep",
            json!({"pattern": "x", "glob": format!("d{d}/**"), "maxMatches": 1000}),
        );
        let got: Vec<&str> = v["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["path"].as_str().unwrap())
            .collect();
        assert!(&got == want, "d{d}: grep's files differ from find_files'");
    }
}

#[test]
fn small_windows_count_every_refused_name_and_read_a_late_gitignore() {
    let sb = Sandbox::disk("s");
    // Twelve levels down (windows of 4 KiB): 400 names, then names the grammar refuses (a
    // trailing dot) and a `.gitignore` that sort after most of them. The first window, full
    // long before its end, must still judge every name: each refused one is counted, and the
    // `.gitignore` is read wherever it sorts.
    let deep: String = (0..12).map(|i| format!("level{i:02}/")).collect();
    let dir = sb.root.join(&deep);
    std::fs::create_dir_all(&dir).unwrap();
    let mut want = Vec::new();
    for i in 0..400u32 {
        // `+` sorts before `.`: the window fills with these before it meets `.gitignore`.
        let name = format!("+{i:03}-{}", "p".repeat((i * 7 % 41) as usize));
        std::fs::write(dir.join(&name), "x").unwrap();
        want.push(format!("{deep}{name}"));
    }
    for i in 0..5 {
        std::fs::write(dir.join(format!("zz-refused-{i}.")), "x").unwrap();
    }
    std::fs::write(dir.join(".gitignore"), "*.ignored\n").unwrap();
    std::fs::write(dir.join("zz.ignored"), "x").unwrap();
    want.push(format!("{deep}.gitignore"));
    want.sort();
    let r = tools(&sb);
    let v = ok(&r, "find_files", json!({"pattern": "**/*"}));
    assert_eq!(v["paths"], json!(want));
    assert_eq!(v["skipped"], 5);
    let v = ok(&r, "grep", json!({"pattern": "x", "maxMatches": 1000}));
    assert_eq!(v["skipped"], 5, "{v}");
}

#[test]
fn a_deep_wide_directory_read_in_small_windows_gives_every_entry_in_order() {
    let sb = Sandbox::disk("s");
    // Twelve levels down (windows of 4 KiB there, some 40 of these names), 300 files, every
    // tenth ignored by a .gitignore, and directories among them holding one file each.
    let deep: String = (0..12).map(|i| format!("level{i:02}/")).collect();
    let dir = sb.root.join(&deep);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(".gitignore"), "*-ignored.txt\n").unwrap();
    let mut want = vec![format!("{deep}.gitignore")];
    for i in 0..300 {
        let name = if i % 10 == 0 {
            format!("file{i:03}-{}-ignored.txt", "p".repeat(10))
        } else {
            format!("file{i:03}-{}.txt", "p".repeat(18))
        };
        std::fs::write(dir.join(&name), "x").unwrap();
        if i % 10 != 0 {
            want.push(format!("{deep}{name}"));
        }
        if i % 50 == 25 {
            let sub = format!("file{i:03}-sub");
            std::fs::create_dir(dir.join(&sub)).unwrap();
            std::fs::write(dir.join(&sub).join("inner.txt"), "x").unwrap();
            want.push(format!("{deep}{sub}/inner.txt"));
        }
    }
    want.sort();
    let r = tools(&sb);
    let v = ok(&r, "find_files", json!({"pattern": "**/*"}));
    assert_eq!(v["paths"], json!(want));
    assert_eq!(
        (v["truncated"].as_bool(), v["skipped"].as_u64()),
        (Some(false), Some(0))
    );
    let v = ok(&r, "grep", json!({"pattern": "x", "maxMatches": 1000}));
    let got: Vec<&str> = v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    // Every file holds an `x`, the .gitignore's `.txt` too.
    assert!(got == want, "grep's files differ from find_files'");
}
