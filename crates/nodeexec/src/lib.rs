//! nodeexec (in progress).
