//! The MCP server over a tool registry ([`ConfineServer`]) and its stdio transport ([`Gate`]:
//! the bounded line framing, the triage of malformed lines, the in-flight bound).

pub(crate) mod eof;
pub mod gate;
pub mod server;
pub(crate) mod stdio;
pub mod triage;

pub use gate::{Gate, Limits};
pub use server::{ConfineServer, Setting};
