//! The network policy's suites, one binary: entries, presets (fake clients), the proxy.
//! Loopback only; every loop bounded.

mod curl;
mod entries;
mod presets;
mod proxy;
