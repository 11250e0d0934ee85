//! The build script of `confine-cli`: lays out the `confine` binary's code so that what a
//! stdio session of file reads runs (its start, `initialize`, `tools/list`, `read_file`) sits
//! together at the front of the text, in the order of `linker/hot-symbols.order`.
//!
//! Why: the kernel maps a binary's code in blocks around each page it faults in (64 KiB, or a
//! whole large folio), so the resident memory of a process that runs a little of a large
//! binary is set by how scattered that little is. With the code a session runs spread over the
//! whole text, a server that reads files held almost all of it resident (see
//! docs/PERFORMANCE.md, "The stdio serving path"). The order changes where functions are
//! placed, nothing of what they do.
//!
//! The list names the functions by their mangled symbols, which change with the compiler and
//! the dependencies' versions: a name not found is skipped (`--no-warn-symbol-ordering`), so a
//! stale list costs memory, never a build; `cargo xtask hot-symbols` writes it again. The
//! option is lld's (Rust's default linker on x86_64 Linux) and mold's; it is given only there,
//! and never when the flags choose another linker or `CONFINE_NO_SYMBOL_ORDER` is set.

use std::path::Path;

fn main() {
    let list = "linker/hot-symbols.order";
    println!("cargo::rerun-if-changed={list}");
    println!("cargo::rerun-if-env-changed=CONFINE_NO_SYMBOL_ORDER");
    let target = std::env::var("TARGET").unwrap_or_default();
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let other_linker = ["linker", "fuse-ld", "link-self-contained", "link-arg"]
        .iter()
        .any(|f| flags.contains(f));
    let wanted = target == "x86_64-unknown-linux-gnu"
        && !other_linker
        && std::env::var_os("CONFINE_NO_SYMBOL_ORDER").is_none();
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let path = Path::new(&dir).join(list);
    let listed = std::fs::metadata(&path).is_ok_and(|m| m.len() > 0);
    if wanted && listed {
        println!(
            "cargo::rustc-link-arg-bin=confine=-Wl,--symbol-ordering-file={}",
            path.display()
        );
        println!("cargo::rustc-link-arg-bin=confine=-Wl,--no-warn-symbol-ordering");
    }
}
