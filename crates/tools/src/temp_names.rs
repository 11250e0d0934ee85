//! The names of the project's own temporaries in a workspace, spelled here and nowhere else:
//! `node_process`'s script (`.pify-node-<owner>-<uuid>.cjs`), the `TMPDIR` of `run_command`
//! (`.pify-run-<uuid>`), and an installation's temporary file (`.<name>.pify-tmp-<random>`,
//! named by `confine-atomicwrite`). No walk shows them.

/// The start of a `node_process` script's name.
const NODE_SCRIPT: &str = ".pify-node-";

/// The end of a `node_process` script's name.
const NODE_SCRIPT_END: &str = ".cjs";

/// The start of a command's `TMPDIR` name.
const RUN_TMPDIR: &str = ".pify-run-";

/// The script name `.pify-node-<owner>-<random>.cjs` (`<owner>` as
/// [`confine_nodeexec::Owner`] writes it).
pub(crate) fn node_script(owner: &confine_nodeexec::Owner, random: uuid::Uuid) -> String {
    format!("{NODE_SCRIPT}{owner}-{random}{NODE_SCRIPT_END}")
}

/// What lies between the start and the end of a script's name (`<owner>-<random>`), if
/// `name` is one.
pub(crate) fn node_script_middle(name: &str) -> Option<&str> {
    name.strip_prefix(NODE_SCRIPT)?
        .strip_suffix(NODE_SCRIPT_END)
}

/// A command's `TMPDIR` name, `.pify-run-<random>`.
pub(crate) fn run_tmpdir(random: uuid::Uuid) -> String {
    format!("{RUN_TMPDIR}{random}")
}

/// True for the project's own temporaries, which no walk shows.
pub(crate) fn is_temporary(name: &str) -> bool {
    name.starts_with(NODE_SCRIPT)
        || name.starts_with(RUN_TMPDIR)
        || (name.starts_with('.') && name.contains(confine_atomicwrite::TEMP_MARKER))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_temporary_name_is_recognised_and_nothing_else() {
        let owner = confine_nodeexec::Owner::current();
        let script = node_script(&owner, uuid::Uuid::nil());
        assert!(script.starts_with(".pify-node-") && script.ends_with(".cjs"));
        assert!(is_temporary(&script));
        assert_eq!(
            node_script_middle(&script),
            Some(format!("{owner}-{}", uuid::Uuid::nil()).as_str())
        );
        assert!(is_temporary(&run_tmpdir(uuid::Uuid::nil())));
        assert!(is_temporary(".a.txt.pify-tmp-0123"));
        for not in ["pify-node-x", "a.pify-tmp-1", "src", ".pify", "x.cjs"] {
            assert!(!is_temporary(not), "{not}");
        }
    }
}
