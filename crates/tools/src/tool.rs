//! The `Tool` trait, its typed helper, and the registry that executes calls.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::error::{CallError, Cancelled, ErrorKind, ToolError};

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A tool a model can call: what the registry holds. Implement [`TypedTool`] instead of this;
/// a blanket impl derives it.
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &'static str;
    /// A description written for a model.
    fn description(&self) -> &'static str;
    /// The JSON Schema of the parameters, derived from the same type that validates them.
    fn parameters(&self) -> Value;
    /// What the tool does to the workspace, as hints for an agent host (MCP tool annotations).
    /// The default claims nothing: it may write, destroy and repeat differently.
    fn hints(&self) -> ToolHints {
        ToolHints::UNKNOWN
    }
    /// Validate raw JSON arguments: pure, before any effect.
    fn validate(&self, arguments: &RawValue) -> Result<(), ToolError>;
    /// Validate and execute; the success record is a JSON object.
    fn execute<'a>(
        &'a self,
        arguments: &'a RawValue,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Value, CallError>>;
}

/// What a tool does to the workspace: the hints an agent host shows or uses to ask for
/// confirmation (the MCP tool annotations `readOnlyHint`, `destructiveHint`, `idempotentHint`,
/// `openWorldHint`). Hints only: the confinement never relies on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolHints {
    /// A short human-readable title.
    pub title: Option<&'static str>,
    /// The tool changes nothing.
    pub read_only: bool,
    /// The tool may destroy or overwrite what exists (meaningful when not read-only).
    pub destructive: bool,
    /// Calling it twice with the same arguments has no further effect (meaningful when not
    /// read-only).
    pub idempotent: bool,
    /// The tool reaches beyond the workspace (a process it runs may).
    pub open_world: bool,
}

impl ToolHints {
    /// Nothing known: the protocol's own defaults (may write, destroy, differ on repeat, reach
    /// out).
    pub const UNKNOWN: Self = Self {
        title: None,
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
    };

    /// A tool that only reads the workspace.
    pub const fn read_only(title: &'static str) -> Self {
        Self {
            title: Some(title),
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        }
    }

    /// A tool that changes the workspace and nothing beyond it.
    pub const fn writes(title: &'static str, destructive: bool, idempotent: bool) -> Self {
        Self {
            title: Some(title),
            read_only: false,
            destructive,
            idempotent,
            open_world: false,
        }
    }
}

/// The typed way to write a tool: serde types validate the shape, `check` adds the rules serde
/// cannot express and yields what `run` needs.
pub trait TypedTool: Send + Sync + 'static {
    /// The arguments as the model sends them (`#[serde(deny_unknown_fields)]`).
    type Input: DeserializeOwned + JsonSchema;
    /// What validation produces for execution.
    type Valid: Send;
    /// The success record.
    type Output: Serialize;
    /// The tool's name.
    const NAME: &'static str;
    /// The description for a model.
    const DESCRIPTION: &'static str;
    /// What the tool does to the workspace (default: [`ToolHints::UNKNOWN`]).
    const HINTS: ToolHints = ToolHints::UNKNOWN;
    /// The token for arguments of the wrong shape.
    const INVALID_INPUT: ErrorKind;
    /// The tool's catch-all execution token (`READ_FAILED`, `WRITE_FAILED`, …).
    const FAILED: ErrorKind;

    /// Rules beyond the shape (grammar, limits); pure.
    fn check(&self, input: Self::Input) -> Result<Self::Valid, ToolError>;

    /// Execute validated arguments.
    fn run<'a>(
        &'a self,
        valid: Self::Valid,
        cancel: &'a CancellationToken,
    ) -> impl Future<Output = Result<Self::Output, CallError>> + Send + 'a;
}

/// Parse raw arguments into a tool's input type: an object, no unknown, missing, duplicated or
/// mistyped property.
pub fn parse_arguments<T: DeserializeOwned>(
    arguments: &RawValue,
    invalid: ErrorKind,
) -> Result<T, ToolError> {
    // serde accepts a JSON array for a struct; the contract wants an object.
    if !arguments.get().trim_start().starts_with('{') {
        return Err(ToolError::invalid(invalid));
    }
    serde_json::from_str(arguments.get()).map_err(|e| ToolError::invalid(invalid).with_source(e))
}

/// The parameter schema of a type, as LLM providers want it.
pub fn schema_of<T: JsonSchema>() -> Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
    }
    schema
}

impl<T: TypedTool> Tool for T {
    fn name(&self) -> &'static str {
        T::NAME
    }

    fn description(&self) -> &'static str {
        T::DESCRIPTION
    }

    fn parameters(&self) -> Value {
        schema_of::<T::Input>()
    }

    fn hints(&self) -> ToolHints {
        T::HINTS
    }

    fn validate(&self, arguments: &RawValue) -> Result<(), ToolError> {
        let input = parse_arguments::<T::Input>(arguments, T::INVALID_INPUT)?;
        self.check(input).map(drop)
    }

    fn execute<'a>(
        &'a self,
        arguments: &'a RawValue,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Value, CallError>> {
        Box::pin(async move {
            let input = parse_arguments::<T::Input>(arguments, T::INVALID_INPUT)?;
            let valid = self.check(input)?;
            if cancel.is_cancelled() {
                return Err(Cancelled.into());
            }
            let output = self.run(valid, cancel).await?;
            // Our output types are plain structs that always serialize; should one ever fail,
            // it is the tool's own failure, never a panic.
            serde_json::to_value(output)
                .map_err(|e| CallError::Failed(ToolError::failed(T::FAILED).with_source(e)))
        })
    }
}

/// One call from a model.
#[derive(Clone, Debug)]
pub struct ToolCall {
    /// The provider's call id, echoed in the result.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as raw JSON text (so duplicated keys are still visible to validation).
    pub arguments: Box<RawValue>,
}

impl ToolCall {
    /// A call from an already parsed JSON value.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: &Value) -> Self {
        // Serialized straight into raw text: a value always serializes to valid JSON, so it
        // need not be parsed again to be checked.
        let arguments = serde_json::value::to_raw_value(arguments)
            .unwrap_or_else(|_| RawValue::from_string("null".into()).expect("null is JSON"));
        Self {
            id: id.into(),
            name: name.into(),
            arguments,
        }
    }

    /// A call from raw JSON argument text; text that is not JSON becomes `null` (refused by
    /// validation).
    pub fn from_json(id: impl Into<String>, name: impl Into<String>, arguments: String) -> Self {
        let arguments = RawValue::from_string(arguments)
            .unwrap_or_else(|_| RawValue::from_string("null".into()).expect("null is JSON"));
        Self {
            id: id.into(),
            name: name.into(),
            arguments,
        }
    }
}

/// What a call produced: the JSON record as text, and whether it is an error record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolResult {
    /// The id of the call.
    pub tool_call_id: String,
    /// The record: the tool's result object, or `{"error": {"code", "message"}}`.
    pub content: String,
    /// True for an error record.
    pub is_error: bool,
}

impl ToolResult {
    /// The record parsed back into a JSON value.
    pub fn record(&self) -> Value {
        serde_json::from_str(&self.content).unwrap_or(Value::Null)
    }
}

/// Two tools with one name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("duplicate tool name {0:?}")]
pub struct DuplicateToolName(pub String);

/// A tool definition as LLM providers want it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolDefinition {
    /// The name.
    pub name: &'static str,
    /// The model-facing description.
    pub description: &'static str,
    /// The JSON Schema of the parameters.
    pub parameters: Value,
    /// What the tool does to the workspace (not part of a provider's tool definition).
    #[serde(skip)]
    pub hints: ToolHints,
}

/// The tools a model may call, by unique name, in registration order.
#[derive(Clone)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    by_name: HashMap<&'static str, usize>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|t| t.name()))
            .finish()
    }
}

impl ToolRegistry {
    /// A registry of `tools`; refuses two tools with one name.
    pub fn new(tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Result<Self, DuplicateToolName> {
        let tools: Vec<Arc<dyn Tool>> = tools.into_iter().collect();
        let mut by_name = HashMap::new();
        for (i, tool) in tools.iter().enumerate() {
            if by_name.insert(tool.name(), i).is_some() {
                return Err(DuplicateToolName(tool.name().to_owned()));
            }
        }
        Ok(Self { tools, by_name })
    }

    /// The tool of that name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// The tools in registration order.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.iter()
    }

    /// Name, description and schema of every tool.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools
            .iter()
            .map(|t| ToolDefinition {
                name: t.name(),
                description: t.description(),
                parameters: t.parameters(),
                hints: t.hints(),
            })
            .collect()
    }
}

/// Look the tool up, validate, execute, and serialize the record. A tool error is a result with
/// `is_error`; a cancellation is `Err(Cancelled)`.
pub async fn execute_tool_call(
    registry: &ToolRegistry,
    call: &ToolCall,
    cancel: &CancellationToken,
) -> Result<ToolResult, Cancelled> {
    let (record, is_error) = execute_tool_call_record(registry, call, cancel).await?;
    Ok(ToolResult {
        tool_call_id: call.id.clone(),
        content: record.to_string(),
        is_error,
    })
}

/// [`execute_tool_call`] with the record as a JSON value (and whether it is an error record),
/// for a caller that sends it as an object (the MCP server's `structuredContent`) and would
/// otherwise parse the text back.
pub async fn execute_tool_call_record(
    registry: &ToolRegistry,
    call: &ToolCall,
    cancel: &CancellationToken,
) -> Result<(Value, bool), Cancelled> {
    if cancel.is_cancelled() {
        return Err(Cancelled);
    }
    let outcome = match registry.get(&call.name) {
        None => Err(CallError::Failed(ToolError::not_found(&call.name))),
        Some(tool) => tool.execute(&call.arguments, cancel).await,
    };
    let (record, is_error) = match outcome {
        Ok(record) => (record, false),
        Err(CallError::Cancelled(c)) => return Err(c),
        Err(CallError::Failed(e)) => {
            if let Some(cause) = std::error::Error::source(&e) {
                // The cause may name host paths: logged for the operator, never in the record.
                tracing::debug!(tool = %call.name, token = e.message(), %cause, "tool call failed");
            }
            (e.to_record(), true)
        }
    };
    Ok((record, is_error))
}
