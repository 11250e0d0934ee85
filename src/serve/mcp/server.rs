//! The MCP server handler over a [`ToolRegistry`], written by hand (no rmcp tool macros): the
//! registry is the single source of the tools, their schemas and their records.

use std::sync::Arc;

use confine_tools::{ToolCall, ToolRegistry, execute_tool_call_record};
use rmcp::ErrorData;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, GetPromptRequestParams, GetPromptResponse, Implementation,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use super::instructions::Setting;
use super::instructions::instructions;

/// The JSON-RPC code answered for a request whose call was cancelled (the LSP's
/// `RequestCancelled`). rmcp drops the answer to a request the client cancelled; this code is
/// seen only for calls cut short by the end of input or a signal.
const REQUEST_CANCELLED: ErrorCode = ErrorCode(-32800);

/// One client end of a session served over an in-memory pipe: the writer, and the server's
/// lines.
#[cfg(any(test, fuzzing))]
pub type TestClient = (
    tokio::io::WriteHalf<tokio::io::DuplexStream>,
    tokio::io::Lines<tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
);

/// Serve `handler` over an in-memory pipe through the stdio transport (within `limits`, the
/// bounds under test) and hold an initialized session with it, as a client would: for the
/// property tests and the `mcp_messages` fuzz target.
#[cfg(any(test, fuzzing))]
pub async fn test_session(handler: ConfineServer, limits: super::gate::Limits) -> TestClient {
    use rmcp::ServiceExt;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    let (client, served) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(served);
    let transport = super::gate::Gate::new(read, write, limits, CancellationToken::new());
    tokio::spawn(async move {
        let running = handler.serve(transport).await.expect("initialized");
        let _ = running.waiting().await;
    });
    let (read, mut write) = tokio::io::split(client);
    let mut lines = tokio::io::BufReader::new(read).lines();
    let init = serde_json::json!({"jsonrpc": "2.0", "id": "init", "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}});
    write
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    until_id(&mut lines, &Value::from("init")).await.unwrap();
    write
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();
    (write, lines)
}

/// Read the server's lines up to the response with `id`; every line must be a JSON-RPC 2.0
/// object.
#[cfg(any(test, fuzzing))]
pub async fn until_id(
    client_lines: &mut tokio::io::Lines<
        tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>,
    >,
    id: &Value,
) -> Result<(), String> {
    answers_until(client_lines, id).await.map(drop)
}

/// Read the server's lines up to the response with `id` (included): every answer (a line
/// without a `method`) read, in order. Every line must be a JSON-RPC 2.0 object.
#[cfg(any(test, fuzzing))]
pub async fn answers_until(
    client_lines: &mut tokio::io::Lines<
        tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>,
    >,
    id: &Value,
) -> Result<Vec<Value>, String> {
    let mut answers = Vec::new();
    loop {
        let line = client_lines
            .next_line()
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the session ended")?;
        let v: Value = serde_json::from_str(&line).map_err(|e| format!("{e}: {line}"))?;
        if v["jsonrpc"] != "2.0" {
            return Err(format!("not JSON-RPC 2.0: {line}"));
        }
        if v.get("method").is_some() {
            continue;
        }
        let done = &v["id"] == id;
        answers.push(v);
        if done {
            return Ok(answers);
        }
    }
}

/// Serves the tools of one registry to one MCP client.
#[derive(Clone)]
pub struct ConfineServer {
    registry: Arc<ToolRegistry>,
    listed: Arc<[Tool]>,
    instructions: Arc<str>,
    shutdown: CancellationToken,
    /// Held by every clone while it lives (rmcp's handler tasks hold clones): the HTTP server
    /// waits at its end until no clone of any session's server is left, so every call has
    /// ended and every job table was dropped (its jobs killed).
    alive: Option<Arc<()>>,
}

impl ConfineServer {
    /// A server for `registry`; `setting` only shapes the instructions.
    pub fn new(registry: ToolRegistry, setting: Setting) -> Self {
        let listed: Arc<[Tool]> = registry
            .definitions()
            .into_iter()
            .map(to_mcp_tool)
            .collect();
        Self {
            instructions: instructions(&registry, setting).into(),
            registry: Arc::new(registry),
            listed,
            shutdown: CancellationToken::new(),
            alive: None,
        }
    }

    /// This server with `shutdown` as its shutdown token (a child of the HTTP server's, so a
    /// signal cancels the calls of every session) and `alive` held while any clone lives.
    pub fn with_lifetime(mut self, shutdown: CancellationToken, alive: Arc<()>) -> Self {
        self.shutdown = shutdown;
        self.alive = Some(alive);
        self
    }

    /// The names of the tools served, in order.
    pub fn tool_names(&self) -> Vec<&str> {
        self.listed.iter().map(|t| t.name.as_ref()).collect()
    }

    /// Cancelling this token cancels every running and future call (end of input, signal).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Run one call with a token that the request's cancellation or the shutdown cancels.
    /// The call's future is always awaited to its end, so a cancelled node process is dead
    /// and its script removed before this returns.
    async fn run(&self, call: &ToolCall, request: &CancellationToken) -> Option<(Value, bool)> {
        let cancel = self.shutdown.child_token();
        let run = execute_tool_call_record(&self.registry, call, &cancel);
        tokio::pin!(run);
        let outcome = tokio::select! {
            outcome = &mut run => outcome,
            () = request.cancelled() => {
                tracing::info!(id = %call.id, tool = %call.name, "call cancelled by the client");
                cancel.cancel();
                run.await
            }
        };
        outcome.ok()
    }
}

/// The progress message: output bytes so far and the last line.
fn progress_message(report: &confine_tools::ProgressReport) -> String {
    if report.last_line.is_empty() {
        format!("{} bytes of output", report.output_bytes)
    } else {
        format!(
            "{} bytes of output; last line: {}",
            report.output_bytes, report.last_line
        )
    }
}

/// An MCP tool from a registry definition.
fn to_mcp_tool(def: confine_tools::ToolDefinition) -> Tool {
    let schema = match def.parameters {
        Value::Object(map) => map,
        // A schema is always an object; keep the tool callable if one is not.
        _ => serde_json::Map::new(),
    };
    let mut tool = Tool::new(def.name, def.description, Arc::new(schema));
    tool.annotations = Some(annotations(def.hints));
    tool
}

/// The tool's hints as MCP annotations, for the agent host (hints only: MCP clients must not
/// trust them for security, and this server does not rely on them).
fn annotations(hints: confine_tools::ToolHints) -> ToolAnnotations {
    let mut a = match hints.title {
        Some(title) => ToolAnnotations::with_title(title),
        None => ToolAnnotations::new(),
    }
    .read_only(hints.read_only)
    .open_world(hints.open_world);
    if !hints.read_only {
        a = a
            .destructive(hints.destructive)
            .idempotent(hints.idempotent);
    }
    a
}

/// The MCP result for a tool's record: one text item with the record, the same object as
/// `structuredContent`, and `isError`.
fn to_call_tool_result(record: Value, is_error: bool) -> CallToolResult {
    let mut out = CallToolResult::success(vec![ContentBlock::text(record.to_string())]);
    out.structured_content = Some(record);
    out.is_error = Some(is_error);
    out
}

/// The MCP result of a successful `read_media` call: an `image` content item with the
/// record's `data` and `mimeType`, then a text item with the record less `data`, which is
/// also the `structuredContent` (`{path, mimeType, bytes, width, height}`). A record without
/// `data` (never the tool's) keeps the ordinary shape.
fn to_media_result(record: Value) -> CallToolResult {
    let Value::Object(mut fields) = record else {
        return to_call_tool_result(record, false);
    };
    let (Some(Value::String(data)), Some(Value::String(mime))) =
        (fields.remove("data"), fields.get("mimeType").cloned())
    else {
        return to_call_tool_result(Value::Object(fields), false);
    };
    let rest = Value::Object(fields);
    let mut out = CallToolResult::success(vec![
        ContentBlock::image(data, mime),
        ContentBlock::text(rest.to_string()),
    ]);
    out.structured_content = Some(rest);
    out.is_error = Some(false);
    out
}

impl ServerHandler for ConfineServer {
    fn get_info(&self) -> ServerConfig {
        // Prompts and resources are declared (there are none) because their list methods answer.
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .build(),
        )
        .with_server_info(
            Implementation::new("confine", env!("CARGO_PKG_VERSION"))
                .with_title("confine: coding tools confined to one directory"),
        )
        .with_instructions(self.instructions.as_ref())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.listed.to_vec()))
    }

    /// No prompts: an empty list (with rmcp's caching hints), so a client that asks anyway,
    /// as the conformance suite's caching scenario does, gets an answer, not an error.
    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::default())
    }

    /// No resources: an empty list (see [`Self::list_prompts`]).
    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::default())
    }

    /// No resource templates: an empty list (see [`Self::list_prompts`]).
    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::default())
    }

    /// No prompt exists: every name is invalid params, as an unknown tool is.
    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let shown: String = request.name.chars().take(128).collect();
        Err(ErrorData::invalid_params(
            format!("Unknown prompt: {shown}"),
            None,
        ))
    }

    /// No resource exists: every URI is invalid params, with the URI in `data`.
    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let shown: String = request.uri.chars().take(1024).collect();
        Err(ErrorData::invalid_params(
            "Resource not found",
            Some(serde_json::json!({ "uri": shown })),
        ))
    }

    /// rmcp hands over as a custom request every request whose params do not have the shape
    /// of its method: for the methods served here that is invalid params (`-32602`), not an
    /// unknown method.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        match request.method.as_str() {
            "tools/call" => Err(ErrorData::invalid_params(
                "tools/call params must be an object with a string `name` and an object \
                 `arguments`",
                None,
            )),
            "tools/list" | "initialize" | "ping" => Err(ErrorData::invalid_params(
                format!("{} params do not have the expected shape", request.method),
                None,
            )),
            _ => {
                let shown: String = request.method.chars().take(128).collect();
                Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, shown, None))
            }
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.registry.get(&request.name).is_none() {
            let shown: String = request.name.chars().take(128).collect();
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {shown}"),
                None,
            ));
        }
        // Absent arguments are an empty object: the tool's validation answers with its
        // INVALID_*_INPUT record when it needs some.
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let call = ToolCall::new(context.id.to_string(), request.name, &arguments);
        let outcome = match context.meta.get_progress_token() {
            None => self.run(&call, &context.ct).await,
            Some(token) => {
                // Reports go through a channel to a task that sends them; the sender drops
                // with the call, and the task is awaited before the result is answered, so
                // no notification follows the result.
                let (tx, mut rx) =
                    tokio::sync::mpsc::unbounded_channel::<confine_tools::ProgressReport>();
                let peer = context.peer.clone();
                let sender = tokio::spawn(async move {
                    while let Some(report) = rx.recv().await {
                        let message = progress_message(&report);
                        let param = ProgressNotificationParam::new(
                            token.clone(),
                            report.elapsed.as_millis() as f64,
                        )
                        .with_message(message);
                        if peer.notify_progress(param).await.is_err() {
                            break;
                        }
                    }
                });
                let sink: confine_tools::ProgressSink = std::sync::Arc::new(move |report| {
                    let _ = tx.send(report);
                });
                let outcome =
                    confine_tools::with_progress(sink, self.run(&call, &context.ct)).await;
                let _ = sender.await;
                outcome
            }
        };
        match outcome {
            Some((record, false)) if call.name == "read_media" => {
                Ok(to_media_result(record).into())
            }
            Some((record, is_error)) => Ok(to_call_tool_result(record, is_error).into()),
            None => Err(ErrorData::new(REQUEST_CANCELLED, "Request cancelled", None)),
        }
    }
}

#[cfg(test)]
mod tests {
    use confine_tools::ToolResult;

    use super::*;

    #[test]
    fn tool_result_maps_to_text_structured_and_is_error() {
        let result = ToolResult {
            tool_call_id: "1".into(),
            content:
                r#"{"error":{"code":"TOOL_ARGUMENTS_INVALID","message":"INVALID_RELATIVE_PATH"}}"#
                    .into(),
            is_error: true,
        };
        let out = to_call_tool_result(result.record(), result.is_error);
        assert_eq!(out.is_error, Some(true));
        assert_eq!(out.structured_content, Some(result.record()));
        assert_eq!(out.content.len(), 1);
        let text = out.content[0].as_text().expect("a text item");
        assert_eq!(text.text, result.content);
    }

    #[test]
    fn a_media_record_maps_to_an_image_item_and_structured_content_without_data() {
        let record = serde_json::json!({
            "path": "a.png", "mimeType": "image/png", "bytes": 3, "width": 1, "height": 2,
            "data": "AAEC",
        });
        let out = to_media_result(record);
        assert_eq!(out.is_error, Some(false));
        let rest = serde_json::json!({
            "path": "a.png", "mimeType": "image/png", "bytes": 3, "width": 1, "height": 2,
        });
        assert_eq!(out.structured_content, Some(rest.clone()));
        assert_eq!(out.content.len(), 2);
        let image = out.content[0].as_image().expect("an image item first");
        assert_eq!(
            (image.data.as_str(), image.mime_type.as_str()),
            ("AAEC", "image/png")
        );
        let text = out.content[1].as_text().expect("then a text item");
        assert_eq!(serde_json::from_str::<Value>(&text.text).unwrap(), rest);
    }

    #[test]
    fn read_only_instructions_name_only_read_only_tools() {
        let tmp = tempfile::tempdir().unwrap();
        let registry = confine_tools::create_read_only_tools(tmp.path()).unwrap();
        let setting = Setting {
            read_only: true,
            ..Setting::default()
        };
        let server = ConfineServer::new(registry, setting);
        assert_eq!(server.tool_names(), confine_tools::READ_ONLY_TOOLS);
        for tool in server.listed.iter() {
            let a = tool.annotations.as_ref().expect("annotations");
            assert_eq!(a.read_only_hint, Some(true), "{}", tool.name);
        }
        assert!(server.instructions.contains("read-only"));
        assert!(!server.instructions.contains("node_process runs"));
        assert_eq!(server.get_info().server_info.name, "confine");
    }

    #[test]
    fn instructions_name_every_command_tool_offered() {
        let tmp = tempfile::tempdir().unwrap();
        let mut options = confine_tools::ToolSetOptions::default();
        options.commands = Some(Default::default());
        let registry = confine_tools::create_workspace_tools(tmp.path(), options).unwrap();
        let server = ConfineServer::new(registry, Setting::default());
        for name in confine_tools::COMMAND_TOOLS {
            assert!(server.tool_names().contains(name), "{name} offered");
            assert!(server.instructions.contains(name), "{name} named");
        }
        assert!(server.instructions.contains("persistent shell"));
        // One of them alone is named too.
        let registry = confine_tools::create_selected_tools(
            tmp.path(),
            {
                let mut options = confine_tools::ToolSetOptions::default();
                options.commands = Some(Default::default());
                options
            },
            &["job_resize"],
        )
        .unwrap();
        let server = ConfineServer::new(registry, Setting::default());
        assert!(server.instructions.contains("job_resize"));
    }

    #[test]
    fn instructions_say_where_the_children_network_goes() {
        let tmp = tempfile::tempdir().unwrap();
        let registry =
            || confine_tools::create_coding_tools(tmp.path(), Default::default()).unwrap();
        let text = |sandbox, allow_net| {
            let setting = Setting {
                sandbox,
                allow_net,
                ..Setting::default()
            };
            ConfineServer::new(registry(), setting)
                .instructions
                .to_string()
        };
        // --no-sandbox and no --allow-net: the host's network, said so.
        let open = text(false, false);
        assert!(open.contains("and its network"), "{open}");
        assert!(!open.contains("proxy"), "{open}");
        // Sandboxed, no --allow-net: the proxy, to no host.
        let sandboxed = text(true, false);
        assert!(
            sandboxed.contains("through this server's proxy"),
            "{sandboxed}"
        );
        assert!(sandboxed.contains("to no host"), "{sandboxed}");
        // --allow-net with --no-sandbox: files unconfined, network through the proxy.
        let listed = text(false, true);
        assert!(listed.contains("not confined to the workspace"), "{listed}");
        assert!(!listed.contains("and its network"), "{listed}");
        assert!(
            listed.contains("only the hosts this server allows"),
            "{listed}"
        );
        let both = text(true, true);
        assert!(
            both.contains("kernel sandbox") && both.contains("only the hosts"),
            "{both}"
        );
    }
}
