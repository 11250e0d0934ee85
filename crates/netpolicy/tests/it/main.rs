//! The network policy's suites, one binary: entries, presets (fake clients), the proxy, stalls.
//! Loopback only; every loop bounded.

mod curl;
mod entries;
mod presets;
mod proxy;
mod stalls;
