//! One module per subcommand, plus the options they share.

pub mod call;
pub mod callline;
pub mod common;
pub mod doctor;
pub mod guard;
pub mod jail;
pub mod lines;
pub mod mcp;
