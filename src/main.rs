//! The `confine` binary: the command line of the `confine-cli` library target (its private
//! `cli` module, one module per subcommand), which serves the tools with the library's
//! `serve` modules.

fn main() -> std::process::ExitCode {
    confine_cli::main()
}
