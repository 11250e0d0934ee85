//! atomicwrite (in progress).
