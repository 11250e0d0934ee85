//! The limits a caller of the tools meets, each under this one path (the tools' contract,
//! `docs/TOOLS.md`, says where each applies; every one is tested at N and N+1).

pub use crate::deny::{MAX_COVER_SCAN, MAX_COVERED, MAX_DENIED_PATTERNS};
pub use crate::edit_file::{MAX_CLOSEST_CHARS, MAX_EDIT_BYTES, MAX_OCCURRENCE_LINES};
pub use crate::find_files::MAX_FIND_RESULTS;
pub use crate::grep::MAX_RESULT_BYTES as MAX_GREP_RESULT_BYTES;
pub use crate::list_directory::MAX_LIST_ENTRIES;
pub use crate::node_process::{
    MAX_ARGUMENT_BYTES, MAX_ARGUMENTS, MAX_ARGUMENTS_TOTAL_BYTES, MAX_SOURCE_BYTES,
};
pub use crate::protect::MAX_PROTECTED_PATTERNS;
pub use crate::read::MAX_READ_BYTES;
pub use crate::read_media::MAX_MEDIA_BYTES;
pub use crate::run_command::MAX_COMMAND_BYTES;
pub use crate::scan::MAX_SEARCHED_LINE;
pub use crate::workspace::DEFAULT_MAX_JOBS;
pub use crate::write_file::MAX_WRITE_BYTES;
