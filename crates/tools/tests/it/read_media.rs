//! read_media: each format told by its content, the 5 MiB limit at N and N+1, and the
//! descriptor rules of read_file (escapes, FIFOs, devices) attempted as attacks.

use std::os::unix::fs::symlink;

use base64::Engine as _;
use serde_json::{Value, json};
use testkit::media;

use crate::{Sandbox, call, token};

const LIMIT: usize = 5_242_880;

fn read(sb: &Sandbox, path: &str) -> confine_tools::ToolResult {
    let registry = confine_tools::create_read_only_tools(&sb.root).unwrap();
    call(&registry, "read_media", json!({ "path": path }))
}

fn decoded(record: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(record["data"].as_str().expect("data is a string"))
        .expect("data is standard base64")
}

#[test]
fn each_format_is_read_with_its_type_size_and_exact_bytes() {
    let sb = Sandbox::disk("TOP SECRET");
    let cases = [
        ("a.png", media::png(3, 2), "image/png"),
        ("a.gif", media::gif(5, 7), "image/gif"),
        ("a.jpg", media::jpeg(640, 480), "image/jpeg"),
        ("a.webp", media::webp(16_384, 9), "image/webp"),
    ];
    let dims = [(3, 2), (5, 7), (640, 480), (16_384, 9)];
    std::fs::create_dir(sb.root.join("img")).unwrap();
    for ((name, bytes, mime), (width, height)) in cases.iter().zip(dims) {
        std::fs::write(sb.root.join("img").join(name), bytes).unwrap();
        let r = read(&sb, &format!("./img//{name}"));
        assert!(!r.is_error, "{name}: {}", r.content);
        let rec = r.record();
        assert_eq!(rec["path"], format!("img/{name}"));
        assert_eq!(rec["mimeType"], *mime, "{name}");
        assert_eq!(rec["bytes"], bytes.len(), "{name}");
        assert_eq!(
            (rec["width"].clone(), rec["height"].clone()),
            (json!(width), json!(height))
        );
        assert_eq!(
            decoded(&rec),
            *bytes,
            "{name}: data decodes to the file's bytes"
        );
        let keys: Vec<&str> = rec
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            ["path", "mimeType", "bytes", "width", "height", "data"]
        );
    }
}

#[test]
fn the_content_decides_never_the_name() {
    let sb = Sandbox::disk("TOP SECRET");
    std::fs::write(sb.root.join("picture.txt"), media::png(4, 4)).unwrap();
    std::fs::write(sb.root.join("noext"), media::gif(1, 1)).unwrap();
    std::fs::write(sb.root.join("notes.png"), "just some text\n").unwrap();
    std::fs::write(sb.root.join("gif.jpg"), media::gif(2, 3)).unwrap();
    let r = read(&sb, "picture.txt");
    assert_eq!(r.record()["mimeType"], "image/png", "{}", r.content);
    assert_eq!(read(&sb, "noext").record()["mimeType"], "image/gif");
    assert_eq!(read(&sb, "gif.jpg").record()["mimeType"], "image/gif");
    let r = read(&sb, "notes.png");
    assert_eq!(token(&r), "FILE_NOT_MEDIA");
    assert_eq!(r.record()["error"]["code"], "TOOL_EXECUTION_FAILED");
}

#[test]
fn other_content_and_headers_cut_short_are_not_media() {
    let sb = Sandbox::disk("TOP SECRET");
    let png = media::png(3, 2);
    let jpeg = media::jpeg(3, 2);
    let webp = media::webp(3, 2);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("text", b"hello".to_vec()),
        (
            "bmp",
            b"BM\x3a\0\0\0\0\0\0\0\x36\0\0\0\x28\0\0\0\x03\0\0\0\x02\0\0\0".to_vec(),
        ),
        // A RIFF of another form, with a WebP-like chunk after it.
        (
            "wave",
            [&b"RIFF\x1a\0\0\0WAVEVP8L"[..], &webp[16..]].concat(),
        ),
        // The PNG signature alone, and cut one byte before the height ends (the IHDR's
        // height is bytes 20 to 23).
        ("png-signature", png[..8].to_vec()),
        ("png-cut", png[..23].to_vec()),
        // A JPEG cut before its start of frame.
        ("jpeg-cut", jpeg[..20].to_vec()),
        ("webp-cut", webp[..24].to_vec()),
        // Zero width or height.
        ("png-zero", media::png(0, 2)),
        ("gif-zero", media::gif(3, 0)),
        ("jpeg-zero", media::jpeg(0, 5)),
    ];
    for (name, bytes) in &cases {
        std::fs::write(sb.root.join(name), bytes).unwrap();
        assert_eq!(token(&read(&sb, name)), "FILE_NOT_MEDIA", "{name}");
    }
    // The shortest headers that do give a size are read.
    std::fs::write(sb.root.join("png-24"), &png[..24]).unwrap();
    assert_eq!(read(&sb, "png-24").record()["width"], 3);
    std::fs::write(sb.root.join("webp-25"), &webp[..25]).unwrap();
    assert_eq!(read(&sb, "webp-25").record()["height"], 2);
}

#[test]
fn the_limit_is_5_mib_at_n_and_n_plus_one() {
    let sb = Sandbox::disk("TOP SECRET");
    std::fs::write(
        sb.root.join("n.png"),
        media::padded(media::png(2, 2), LIMIT),
    )
    .unwrap();
    std::fs::write(
        sb.root.join("n1.png"),
        media::padded(media::png(2, 2), LIMIT + 1),
    )
    .unwrap();
    let r = read(&sb, "n.png");
    assert!(!r.is_error, "{}", &r.content[..r.content.len().min(200)]);
    let rec = r.record();
    assert_eq!(rec["bytes"], LIMIT);
    assert_eq!(decoded(&rec).len(), LIMIT);
    assert_eq!(confine_tools::limits::MAX_MEDIA_BYTES, LIMIT);
    let r = read(&sb, "n1.png");
    assert_eq!(token(&r), "FILE_TOO_LARGE");
    assert_eq!(r.record()["error"]["code"], "TOOL_EXECUTION_FAILED");
    // read_file's own limit is unchanged by the shared reader.
    let registry = confine_tools::create_read_only_tools(&sb.root).unwrap();
    std::fs::write(sb.root.join("t.txt"), "a".repeat(65_537)).unwrap();
    assert_eq!(
        token(&call(&registry, "read_file", json!({"path": "t.txt"}))),
        "FILE_TOO_LARGE"
    );
}

#[test]
fn symlinks_leaving_the_root_are_refused_and_the_naive_read_escapes() {
    let sb = Sandbox::disk("TOP SECRET");
    std::fs::write(sb.outside.join("secret.png"), media::png(1, 1)).unwrap();
    symlink(sb.outside.join("secret.png"), sb.root.join("abs")).unwrap();
    symlink("../ws-outside/secret.png", sb.root.join("rel")).unwrap();
    symlink("../ws-outside", sb.root.join("dirlink")).unwrap();
    std::fs::write(sb.root.join("in.png"), media::png(2, 1)).unwrap();
    symlink("in.png", sb.root.join("rel-in")).unwrap();
    let host = sb.tmp.path().to_string_lossy().into_owned();
    for path in ["abs", "rel", "dirlink/secret.png"] {
        // The naive twin: a plain read of the joined path reaches the outside image.
        let naive = std::fs::read(sb.root.join(path)).unwrap();
        assert_eq!(
            naive,
            media::png(1, 1),
            "the naive read of {path} should escape"
        );
        let r = read(&sb, path);
        assert_eq!(token(&r), "PATH_OUTSIDE_WORKSPACE", "{path}");
        assert!(!r.content.contains(&host), "{}", r.content);
    }
    assert_eq!(read(&sb, "rel-in").record()["width"], 2);
}

#[test]
fn a_fifo_socket_or_directory_is_refused_without_blocking() {
    let sb = Sandbox::disk("TOP SECRET");
    std::fs::create_dir(sb.root.join("dir")).unwrap();
    testkit::fixture::mkfifo(&sb.root.join("fifo"));
    let _sock = std::os::unix::net::UnixListener::bind(sb.root.join("sock")).unwrap();
    // A FIFO with no writer would block a plain open forever: a generous bound turns a
    // regression into a failure instead of a hang.
    let root = sb.root.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let registry = confine_tools::create_read_only_tools(&root).unwrap();
        let got: Vec<String> = ["dir", "fifo", "sock"]
            .iter()
            .map(|p| token(&call(&registry, "read_media", json!({ "path": p }))))
            .collect();
        tx.send(got).unwrap();
    });
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("read_media blocked on a FIFO");
    assert_eq!(got, ["FILE_NOT_REGULAR"; 3]);
}

#[test]
fn a_device_node_is_refused() {
    let sb = Sandbox::disk("TOP SECRET");
    // The zero device (1, 5) would read as endless zero bytes; needs CAP_MKNOD.
    match rustix::fs::mknodat(
        rustix::fs::CWD,
        sb.root.join("zero"),
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o600),
        rustix::fs::makedev(1, 5),
    ) {
        Ok(()) => assert_eq!(token(&read(&sb, "zero")), "FILE_NOT_REGULAR"),
        Err(e) => testkit::not_run(
            "a_device_node_is_refused",
            &format!(
                "mknod refused here ({e}); the FIFO, socket and directory cases run in \
                 a_fifo_socket_or_directory_is_refused_without_blocking"
            ),
        ),
    }
}

#[test]
fn file_tokens_and_input_errors() {
    let sb = Sandbox::disk("TOP SECRET");
    std::fs::write(sb.root.join("file"), "x").unwrap();
    assert_eq!(token(&read(&sb, "missing.png")), "FILE_NOT_FOUND");
    assert_eq!(token(&read(&sb, "file/child.png")), "FILE_NOT_FOUND");
    let registry = confine_tools::create_read_only_tools(&sb.root).unwrap();
    for (args, code, message) in [
        (
            json!({"path": "../x.png"}),
            "TOOL_ARGUMENTS_INVALID",
            "INVALID_RELATIVE_PATH",
        ),
        (
            json!({"path": "/etc/x.png"}),
            "TOOL_ARGUMENTS_INVALID",
            "INVALID_RELATIVE_PATH",
        ),
        (
            json!({"path": "."}),
            "TOOL_ARGUMENTS_INVALID",
            "INVALID_RELATIVE_PATH",
        ),
        (
            json!({}),
            "TOOL_ARGUMENTS_INVALID",
            "INVALID_READ_MEDIA_INPUT",
        ),
        (
            json!({"path": 1}),
            "TOOL_ARGUMENTS_INVALID",
            "INVALID_READ_MEDIA_INPUT",
        ),
        (
            json!({"path": "a.png", "mode": "x"}),
            "TOOL_ARGUMENTS_INVALID",
            "INVALID_READ_MEDIA_INPUT",
        ),
    ] {
        let r = call(&registry, "read_media", args.clone());
        assert_eq!(r.record()["error"]["code"], code, "{args}");
        assert_eq!(token(&r), message, "{args}");
    }
}

#[test]
fn read_media_is_read_only_and_in_both_sets() {
    assert!(confine_tools::WORKSPACE_TOOLS.contains(&"read_media"));
    assert!(confine_tools::READ_ONLY_TOOLS.contains(&"read_media"));
    let sb = Sandbox::disk("TOP SECRET");
    let registry = confine_tools::create_read_only_tools(&sb.root).unwrap();
    let tool = registry.get("read_media").expect("served read-only");
    assert!(tool.hints().read_only);
}

#[test]
fn the_root_replaced_is_root_changed() {
    let sb = Sandbox::disk("TOP SECRET");
    std::fs::write(sb.root.join("a.png"), media::png(1, 1)).unwrap();
    let registry = confine_tools::create_read_only_tools(&sb.root).unwrap();
    std::fs::rename(&sb.root, sb.tmp.path().join("moved")).unwrap();
    std::fs::create_dir(&sb.root).unwrap();
    std::fs::write(sb.root.join("a.png"), media::png(9, 9)).unwrap();
    let r = call(&registry, "read_media", json!({"path": "a.png"}));
    assert_eq!(token(&r), "WORKSPACE_ROOT_CHANGED");
}

/// A thread flips `link` between an inside image and an outside one (a fresh symlink renamed
/// over it) while reads run: not one returns the outside image. The naive twin, a plain read
/// of the same path under the same race, does.
#[test]
fn a_symlink_swap_race_never_escapes() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let sb = Sandbox::disk("TOP SECRET");
    let secret = media::png(1, 1);
    std::fs::write(sb.outside.join("secret.png"), &secret).unwrap();
    std::fs::write(sb.root.join("inside.png"), media::png(2, 1)).unwrap();
    let link = sb.root.join("link");
    symlink("inside.png", &link).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, root, outside) = (stop.clone(), sb.root.clone(), sb.outside.clone());
        std::thread::spawn(move || {
            let staging = root.join("link.staging");
            let mut flip = false;
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::remove_file(&staging);
                if flip {
                    symlink("inside.png", &staging).unwrap();
                } else {
                    symlink(outside.join("secret.png"), &staging).unwrap();
                }
                std::fs::rename(&staging, root.join("link")).unwrap();
                flip = !flip;
            }
        })
    };
    let registry = confine_tools::create_read_only_tools(&sb.root).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let (mut inside, mut refused, mut naive_escapes) = (0, 0, 0);
    // At least 2000 rounds, then on until each outcome has been seen (bounded at 25 times as
    // many): on a loaded machine the swapper can sleep through a whole short run.
    for round in 0..2000 * 25 {
        if round >= 2000 && inside > 0 && refused > 0 && naive_escapes > 0 {
            break;
        }
        let call = confine_tools::ToolCall::new("r", "read_media", &json!({"path": "link"}));
        let r = rt
            .block_on(confine_tools::execute_tool_call(&registry, &call, &cancel))
            .unwrap();
        if r.is_error {
            let t = token(&r);
            assert!(
                matches!(
                    t.as_str(),
                    "PATH_OUTSIDE_WORKSPACE" | "PATH_CHANGED_DURING_READ" | "FILE_NOT_FOUND"
                ),
                "{t}"
            );
            refused += 1;
        } else {
            assert_eq!(r.record()["width"], 2, "a guarded read escaped");
            inside += 1;
        }
        if std::fs::read(&link).is_ok_and(|b| b == secret) {
            naive_escapes += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(
        inside > 0 && refused > 0,
        "the race did not run: {inside} {refused}"
    );
    assert!(
        naive_escapes > 0,
        "the naive twin should have escaped at least once"
    );
}
