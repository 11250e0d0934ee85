//! The serving code of the `confine` binary, as a library: the JSON Lines framing and call
//! lines of `confine call` ([`lines`], [`callline`]), the MCP server and its stdio transport
//! ([`mcp`]) and the Streamable HTTP front of `confine mcp --http` (`http`, private to the
//! crate). The binary's subcommands (`src/cli`) parse the flags and hand over to these.
//!
//! What is public here is what the fuzz targets and the tests drive directly.

pub mod callline;
pub(crate) mod http;
pub mod lines;
pub mod mcp;
