//! jail (in progress).
