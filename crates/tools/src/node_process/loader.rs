//! The `--eval` program Node.js starts with (`loader.js`): it runs the source on the script's
//! descriptor as the CommonJS main module named after the script.

use super::SCRIPT_FD;

/// The program, with `SCRIPT_FD` and `SCRIPT_NAME` in place of the descriptor and the name.
const LOADER: &str = include_str!("loader.js");

/// The `--eval` program: run the source on fd 3 as the CommonJS main module `name` (a name
/// this tool made: `.pify-node-…cjs`, nothing to escape in a JavaScript string).
pub(super) fn loader(name: &str) -> String {
    debug_assert!(
        name.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
    );
    let program: Vec<&str> = LOADER.lines().filter(|l| !l.starts_with("//")).collect();
    program
        .join("\n")
        .replace("SCRIPT_FD", &SCRIPT_FD.to_string())
        .replace("SCRIPT_NAME", name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_names_the_descriptor_and_the_script_only() {
        let program = loader(".pify-node-1-2-x.cjs");
        assert!(program.contains("fs.readFileSync(3, 'utf8')"));
        assert!(program.contains("fs.closeSync(3)"));
        assert!(program.contains("path.join(process.cwd(), '.pify-node-1-2-x.cjs')"));
        assert!(!program.contains("SCRIPT_") && !program.contains("//"));
    }
}
