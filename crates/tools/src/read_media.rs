//! `read_media`: an image beneath the workspace (PNG, JPEG, GIF or WebP, at most 5 MiB), for a
//! model that can look at it.
//!
//! The file is read exactly as `read_file` reads one (the same open beneath the root, a
//! regular file only, never a FIFO or device opened, the identity checked after the read,
//! cancellation checked before and during it), with a limit of [`MAX_MEDIA_BYTES`]: never more
//! than that limit plus one byte is read, and a larger file is `FILE_TOO_LARGE`.
//!
//! What the file is comes from its first bytes, never from its name: the PNG signature
//! (`89 50 4E 47 0D 0A 1A 0A`), the JPEG start of image (`FF D8 FF`), `GIF87a` / `GIF89a`, or a
//! RIFF container of form `WEBP`. Its width and height are read from its header by the
//! `imagesize` crate. Anything else is `FILE_NOT_MEDIA`: other content, a header cut short
//! before its width and height, and a header that says a width or height of zero. The pixels
//! are not decoded; a file whose header is sound and whose data is damaged is returned as it
//! is.
//!
//! The record is `{path, mimeType, bytes, width, height, data}`, `data` the file's bytes in
//! standard base64 (with padding). `confine call` answers it whole; over MCP the binary turns
//! it into an `image` content item (`data`, `mimeType`) and keeps the rest as
//! `structuredContent`.

use base64::Engine as _;
use confine_pathgrammar::RelPath;
use confine_rootid::WorkspaceRoot;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::deny::DeniedPaths;
use crate::entry::{normalize, run_on_root};
use crate::error::{CallError, ErrorKind, ToolError, failed};
use crate::read::read_whole;
use crate::tool::{ToolHints, TypedTool};
use crate::workspace::Workspace;

/// The largest image `read_media` returns, in bytes (5 MiB).
pub const MAX_MEDIA_BYTES: usize = 5 * 1024 * 1024;

/// The arguments of `read_media`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadMediaInput {
    /// Relative path of the image inside the workspace, with `/` separators (for example
    /// `docs/screenshot.png`). What it is comes from its content, not its name.
    pub path: String,
}

/// The record `read_media` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadMediaOutput {
    /// The normalized relative path.
    pub path: String,
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub mime_type: &'static str,
    /// The file's size in bytes.
    pub bytes: usize,
    /// The width in pixels, from the header.
    pub width: u64,
    /// The height in pixels, from the header.
    pub height: u64,
    /// The file's bytes, standard base64 with padding.
    pub data: String,
}

/// The `read_media` tool over one workspace.
#[derive(Debug, Clone)]
pub struct ReadMediaTool {
    ws: Workspace,
}

impl ReadMediaTool {
    /// A read_media tool over an already captured root.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }
}

/// The MIME type that `bytes` start like, by magic bytes alone.
pub fn media_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(b"\xFF\xD8\xFF") {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// The MIME type, width and height of an image of one of the four formats; `None` for other
/// content, a header cut short, or a zero width or height.
pub fn probe(bytes: &[u8]) -> Option<(&'static str, u64, u64)> {
    let mime = media_type(bytes)?;
    let expected = match mime {
        "image/png" => imagesize::ImageType::Png,
        "image/jpeg" => imagesize::ImageType::Jpeg,
        "image/gif" => imagesize::ImageType::Gif,
        _ => imagesize::ImageType::Webp,
    };
    if imagesize::image_type(bytes).ok()? != expected {
        return None;
    }
    let size = imagesize::blob_size(bytes).ok()?;
    let (width, height) = (size.width as u64, size.height as u64);
    (width > 0 && height > 0).then_some((mime, width, height))
}

fn read_media(
    root: &WorkspaceRoot,
    denied: &DeniedPaths,
    path: &RelPath,
    cancel: &CancellationToken,
) -> Result<ReadMediaOutput, CallError> {
    let buf = read_whole(root, denied, path, MAX_MEDIA_BYTES, cancel)?;
    let (mime_type, width, height) = probe(&buf).ok_or_else(|| failed(ErrorKind::FileNotMedia))?;
    Ok(ReadMediaOutput {
        path: path.as_str().to_owned(),
        mime_type,
        bytes: buf.len(),
        width,
        height,
        data: base64::engine::general_purpose::STANDARD.encode(&buf),
    })
}

impl TypedTool for ReadMediaTool {
    type Input = ReadMediaInput;
    type Valid = RelPath;
    type Output = ReadMediaOutput;
    const NAME: &'static str = "read_media";
    const DESCRIPTION: &'static str = "Look at an image inside the workspace: a PNG, JPEG, GIF \
        or WebP of at most 5 MiB (5,242,880 bytes), recognized by its content, not its name. \
        `path` is relative to the workspace root (for example `docs/screenshot.png`). Returns \
        the image itself with {path, mimeType, bytes, width, height}. Other files are refused \
        with FILE_NOT_MEDIA (read text with read_file or read_lines).";
    const HINTS: ToolHints = ToolHints::read_only("View a workspace image");
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidReadMediaInput;
    const FAILED: ErrorKind = ErrorKind::ReadFailed;

    fn check(&self, input: ReadMediaInput) -> Result<RelPath, ToolError> {
        normalize(&input.path)
    }

    async fn run(
        &self,
        valid: RelPath,
        cancel: &CancellationToken,
    ) -> Result<ReadMediaOutput, CallError> {
        run_on_root(&self.ws.root, &self.ws.denied, valid, cancel, read_media).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let mut v = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
        v.extend_from_slice(&width.to_be_bytes());
        v.extend_from_slice(&height.to_be_bytes());
        v.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
        v
    }

    #[test]
    fn the_type_comes_from_the_magic_bytes() {
        assert_eq!(media_type(&png(1, 1)), Some("image/png"));
        assert_eq!(media_type(b"\xFF\xD8\xFF\xE0rest"), Some("image/jpeg"));
        assert_eq!(media_type(b"GIF87a......"), Some("image/gif"));
        assert_eq!(media_type(b"GIF89a......"), Some("image/gif"));
        assert_eq!(
            media_type(b"RIFF\x00\x00\x00\x00WEBPVP8 "),
            Some("image/webp")
        );
        // Near misses: a PNG signature without its line-ending bytes, an unknown GIF
        // version, a RIFF of another form (WAVE), a JPEG without the marker's FF.
        assert_eq!(media_type(b"\x89PNG\n\n\x1a\n............"), None);
        assert_eq!(media_type(b"GIF88a......"), None);
        assert_eq!(media_type(b"RIFF\x00\x00\x00\x00WAVEfmt "), None);
        assert_eq!(media_type(b"\xFF\xD8\x00\x00"), None);
        assert_eq!(media_type(b""), None);
    }

    #[test]
    fn an_endless_file_is_read_to_the_limit_plus_one_byte_only() {
        struct Counting(usize);
        impl std::io::Read for Counting {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                buf.fill(0);
                self.0 += buf.len();
                Ok(buf.len())
            }
        }
        let mut endless = Counting(0);
        let cancel = CancellationToken::new();
        // A size hint of 0, as a procfs file or a lying filesystem gives.
        let got = crate::read::read_bounded_to(&mut endless, 0, MAX_MEDIA_BYTES, &cancel, || {});
        assert!(
            matches!(got, Err(CallError::Failed(e)) if e.kind() == Some(ErrorKind::FileTooLarge))
        );
        assert_eq!(endless.0, MAX_MEDIA_BYTES + 1);
        // A size hint over the limit is refused before any read.
        let mut hinted = Counting(0);
        let got = crate::read::read_bounded_to(
            &mut hinted,
            MAX_MEDIA_BYTES as u64 + 1,
            MAX_MEDIA_BYTES,
            &cancel,
            || {},
        );
        assert!(got.is_err());
        assert_eq!(hinted.0, 0);
    }

    #[test]
    fn a_header_cut_before_its_size_or_with_a_zero_size_is_not_media() {
        let full = png(3, 5);
        assert_eq!(probe(&full), Some(("image/png", 3, 5)));
        // Width and height end at byte 24: one byte short of them is not media.
        assert_eq!(probe(&full[..24]), Some(("image/png", 3, 5)));
        assert_eq!(probe(&full[..23]), None);
        assert_eq!(probe(&full[..8]), None);
        assert_eq!(probe(&png(0, 5)), None);
        assert_eq!(probe(&png(5, 0)), None);
    }
}
