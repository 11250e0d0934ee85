//! `read_media` through the built binary: `confine call` answers the record with `data`, and
//! `confine mcp` answers an `image` content item with the record less `data` as
//! `structuredContent`, spoken to by rmcp's own client.

use std::path::Path;
use std::process::Stdio;

use base64::Engine as _;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use testkit::media;

use crate::support;
use support::call_lines;

const LIMIT: usize = 5_242_880;

fn decode(data: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .expect("standard base64")
}

/// An image of a workspace: its name, bytes, MIME type, width and height.
type Image = (&'static str, Vec<u8>, &'static str, u64, u64);

/// A workspace with one image of each format, a PNG named `.txt`, a text named `.png`, and an
/// image outside it reached by a symlink.
fn workspace() -> (testkit::Sibling, Vec<Image>) {
    let sb = testkit::Sibling::disk("TOP SECRET");
    let images = vec![
        ("a.png", media::png(3, 2), "image/png", 3, 2),
        ("a.gif", media::gif(4, 5), "image/gif", 4, 5),
        ("a.jpg", media::jpeg(800, 600), "image/jpeg", 800, 600),
        ("a.webp", media::webp(7, 9), "image/webp", 7, 9),
        ("shot.txt", media::png(6, 1), "image/png", 6, 1),
    ];
    for (name, bytes, ..) in &images {
        std::fs::write(sb.root.join(name), bytes).unwrap();
    }
    std::fs::write(sb.root.join("notes.png"), "not an image\n").unwrap();
    std::fs::write(sb.outside.join("secret.png"), media::png(1, 1)).unwrap();
    std::os::unix::fs::symlink("../ws-outside/secret.png", sb.root.join("out.png")).unwrap();
    (sb, images)
}

#[test]
fn call_answers_the_record_with_data_decoding_to_the_exact_bytes() {
    let (sb, images) = workspace();
    let mut input = String::new();
    for (i, (name, ..)) in images.iter().enumerate() {
        let line = json!({"id": i, "name": "read_media", "arguments": {"path": name}});
        input.push_str(&format!("{line}\n"));
    }
    for (id, path) in [("text", "notes.png"), ("escape", "out.png")] {
        let line = json!({"id": id, "name": "read_media", "arguments": {"path": path}});
        input.push_str(&format!("{line}\n"));
    }
    // The read-only set serves it too.
    for flags in [&[][..], &["--read-only"][..]] {
        let out = call_lines(&sb.root, flags, &input);
        assert_eq!(out.len(), images.len() + 2, "{flags:?}");
        for (answer, (name, bytes, mime, width, height)) in out.iter().zip(&images) {
            assert_eq!(answer["isError"], false, "{name}: {answer}");
            let rec = &answer["content"];
            let data = rec["data"].as_str().expect("data");
            assert_eq!(decode(data), *bytes, "{name}");
            let mut expected = json!({
                "path": name, "mimeType": mime, "bytes": bytes.len(), "width": width,
                "height": height,
            });
            expected["data"] = json!(data);
            assert_eq!(*rec, expected, "{name}");
        }
        let n = images.len();
        assert_eq!(out[n]["content"]["error"]["message"], "FILE_NOT_MEDIA");
        assert_eq!(out[n]["content"]["error"]["code"], "TOOL_EXECUTION_FAILED");
        assert_eq!(
            out[n + 1]["content"]["error"]["message"],
            "PATH_OUTSIDE_WORKSPACE"
        );
        let host = sb.tmp.path().to_string_lossy().into_owned();
        assert!(!out[n + 1].to_string().contains(&host));
    }
}

#[test]
fn call_at_the_limit_and_one_byte_over() {
    let sb = testkit::Sibling::disk("TOP SECRET");
    let n = media::padded(media::jpeg(2, 2), LIMIT);
    std::fs::write(sb.root.join("n.jpg"), &n).unwrap();
    std::fs::write(
        sb.root.join("n1.jpg"),
        media::padded(media::jpeg(2, 2), LIMIT + 1),
    )
    .unwrap();
    let input = [
        json!({"id": 1, "name": "read_media", "arguments": {"path": "n.jpg"}}).to_string(),
        json!({"id": 2, "name": "read_media", "arguments": {"path": "n1.jpg"}}).to_string(),
    ]
    .join("\n");
    let out = call_lines(&sb.root, &[], &input);
    assert_eq!(out[0]["isError"], false);
    assert_eq!(out[0]["content"]["bytes"], LIMIT);
    assert_eq!(decode(out[0]["content"]["data"].as_str().unwrap()), n);
    assert_eq!(out[1]["content"]["error"]["message"], "FILE_TOO_LARGE");
}

type Client = RunningService<RoleClient, ()>;

async fn connect(root: &Path, extra: &[&str]) -> Client {
    #[allow(clippy::disallowed_methods)] // reason: the test drives the built binary itself
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_confine"));
    cmd.arg("mcp").arg("--root").arg(root).args(extra);
    cmd.env("CONFINE_LOG", "warn");
    let (transport, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn confine mcp");
    ().serve(transport).await.expect("initialize")
}

async fn read_media(client: &Client, path: &str) -> CallToolResult {
    let args = json!({ "path": path });
    let Value::Object(args) = args else {
        unreachable!()
    };
    client
        .call_tool(CallToolRequestParams::new("read_media").with_arguments(args))
        .await
        .expect("an answer")
}

/// The image item, the text item and `structuredContent` of a successful result, checked to
/// agree; the image's bytes and the structured record.
fn image_of(result: &CallToolResult) -> (Vec<u8>, String, Value) {
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert_eq!(result.content.len(), 2, "an image item and a text item");
    let image = result.content[0]
        .as_image()
        .expect("the first item is an image");
    let text = result.content[1]
        .as_text()
        .expect("the second item is text");
    let structured = result
        .structured_content
        .clone()
        .expect("structuredContent");
    let from_text: Value = serde_json::from_str(&text.text).expect("the text is JSON");
    assert_eq!(
        from_text, structured,
        "the text item is the structured record"
    );
    assert_eq!(structured["mimeType"], image.mime_type);
    (decode(&image.data), image.mime_type.clone(), structured)
}

#[tokio::test]
async fn mcp_answers_an_image_item_with_structured_content_without_data() {
    let (sb, images) = workspace();
    let client = connect(&sb.root, &[]).await;
    for (name, bytes, mime, width, height) in &images {
        let result = read_media(&client, name).await;
        let (data, got_mime, structured) = image_of(&result);
        assert_eq!(
            data, *bytes,
            "{name}: the image item holds the file's bytes"
        );
        assert_eq!(got_mime, *mime);
        assert_eq!(
            structured,
            json!({"path": name, "mimeType": mime, "bytes": bytes.len(), "width": width, "height": height}),
            "{name}"
        );
    }
    // Failures are ordinary error records: one text item, no image.
    for (path, message) in [
        ("notes.png", "FILE_NOT_MEDIA"),
        ("out.png", "PATH_OUTSIDE_WORKSPACE"),
        ("../a.png", "INVALID_RELATIVE_PATH"),
    ] {
        let result = read_media(&client, path).await;
        assert_eq!(result.is_error, Some(true), "{path}");
        assert_eq!(result.content.len(), 1, "{path}");
        assert!(result.content[0].as_image().is_none());
        let structured = result.structured_content.clone().unwrap();
        assert_eq!(structured["error"]["message"], message, "{path}");
    }
    // The largest image crosses the transport whole.
    let big = media::padded(media::webp(3, 3), LIMIT);
    std::fs::write(sb.root.join("big.webp"), &big).unwrap();
    let (data, _, structured) = image_of(&read_media(&client, "big.webp").await);
    assert_eq!(structured["bytes"], LIMIT);
    assert!(data == big, "the 5 MiB image arrives byte for byte");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn mcp_read_only_lists_read_media_as_read_only_and_serves_it() {
    let (sb, _) = workspace();
    let client = connect(&sb.root, &["--read-only"]).await;
    let tools = client.list_all_tools().await.unwrap();
    let tool = tools
        .iter()
        .find(|t| t.name == "read_media")
        .expect("read_media is offered with --read-only");
    let hints = tool.annotations.as_ref().expect("annotations");
    assert_eq!(hints.read_only_hint, Some(true));
    assert_eq!(tool.input_schema["additionalProperties"], json!(false));
    let (data, mime, _) = image_of(&read_media(&client, "shot.txt").await);
    assert_eq!((data, mime.as_str()), (media::png(6, 1), "image/png"));
    let instructions = client
        .peer_info()
        .and_then(|i| i.instructions.clone())
        .unwrap_or_default();
    assert!(instructions.contains("read_media"), "{instructions}");
    client.cancel().await.unwrap();
}
