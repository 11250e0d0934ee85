//! The Windows command line: how arguments are quoted so that `CommandLineToArgvW` (and the
//! MSVC runtime) parse them back exactly, and its length in UTF-16 units. Computed on every OS,
//! so the `node_process` ceiling is the same everywhere.

/// Append `arg` to `line`, quoted only when it must be: when it is empty or holds a space, a
/// tab, a newline, a vertical tab or a double quote. Inside quotes, a run of backslashes is
/// doubled when a quote (escaped as `\"`) or the closing quote follows it, and kept as is
/// otherwise.
pub(crate) fn quote_windows_arg(arg: &str, line: &mut String) {
    let plain = !arg.is_empty() && !arg.contains([' ', '\t', '\n', '\u{0B}', '"']);
    if plain {
        line.push_str(arg);
        return;
    }
    line.push('"');
    let mut backslashes = 0usize;
    for c in arg.chars() {
        match c {
            '\\' => backslashes += 1,
            '"' => {
                line.extend(std::iter::repeat_n('\\', 2 * backslashes + 1));
                line.push('"');
                backslashes = 0;
            }
            _ => {
                line.extend(std::iter::repeat_n('\\', backslashes));
                line.push(c);
                backslashes = 0;
            }
        }
    }
    line.extend(std::iter::repeat_n('\\', 2 * backslashes));
    line.push('"');
}

/// The command line of `args`, each quoted, separated by one space.
pub(crate) fn windows_command_line<'a>(args: impl IntoIterator<Item = &'a str>) -> String {
    let mut line = String::new();
    for (i, arg) in args.into_iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        quote_windows_arg(arg, &mut line);
    }
    line
}

/// The length of [`windows_command_line`] in UTF-16 code units.
pub(crate) fn windows_command_line_units<'a>(args: impl IntoIterator<Item = &'a str>) -> usize {
    windows_command_line(args).encode_utf16().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `CommandLineToArgvW`'s rules for arguments after the first (MSVC 2008 and later): the
    /// oracle the quoting must round-trip through.
    fn parse(line: &str) -> Vec<String> {
        let chars: Vec<char> = line.chars().collect();
        let mut out = Vec::new();
        let mut i = 0;
        loop {
            while i < chars.len() && (chars[i] == ' ' || chars[i] == '\t') {
                i += 1;
            }
            if i >= chars.len() {
                return out;
            }
            let mut arg = String::new();
            let mut quoted = false;
            while i < chars.len() {
                let c = chars[i];
                if c == '\\' {
                    let mut n = 0;
                    while i < chars.len() && chars[i] == '\\' {
                        n += 1;
                        i += 1;
                    }
                    if i < chars.len() && chars[i] == '"' {
                        arg.extend(std::iter::repeat_n('\\', n / 2));
                        if n % 2 == 1 {
                            arg.push('"');
                            i += 1;
                        }
                    } else {
                        arg.extend(std::iter::repeat_n('\\', n));
                    }
                    continue;
                }
                if c == '"' {
                    if quoted && chars.get(i + 1) == Some(&'"') {
                        arg.push('"');
                        i += 2;
                        continue;
                    }
                    quoted = !quoted;
                    i += 1;
                    continue;
                }
                if !quoted && (c == ' ' || c == '\t') {
                    break;
                }
                arg.push(c);
                i += 1;
            }
            out.push(arg);
        }
    }

    fn quoted(arg: &str) -> String {
        let mut line = String::new();
        quote_windows_arg(arg, &mut line);
        line
    }

    #[test]
    fn quote_windows_arg_cases() {
        let cases = [
            ("plain", "plain"),
            ("", "\"\""),
            ("two words", "\"two words\""),
            ("tab\there", "\"tab\there\""),
            ("say \"hi\"", "\"say \\\"hi\\\"\""),
            ("a\"b", "\"a\\\"b\""),
            ("C:\\dir\\file", "C:\\dir\\file"),
            ("C:\\dir with space\\", "\"C:\\dir with space\\\\\""),
            ("back\\\\\"quote", "\"back\\\\\\\\\\\"quote\""),
            ("trailing\\", "trailing\\"),
            ("\\\\", "\\\\"),
            ("\"", "\"\\\"\""),
            ("é ü", "\"é ü\""),
        ];
        for (arg, want) in cases {
            assert_eq!(quoted(arg), want, "{arg:?}");
        }
    }

    #[test]
    fn quote_windows_arg_round_trips() {
        let args = [
            "",
            " ",
            "a b",
            "\"",
            "\\",
            "\\\"",
            "a\\\\b",
            "a\\\\\"b",
            "end\\\\",
            "x\"\"y",
            "\\\\server\\share",
            "tab\t",
            "new\nline",
            "üñí \"çødé\"",
            "--flag=\"v\"",
        ];
        let line = windows_command_line(args);
        assert_eq!(parse(&line), args);
        for arg in args {
            assert_eq!(
                parse(&format!("x {}", quoted(arg)))[1..],
                [arg.to_owned()],
                "{arg:?}"
            );
        }
    }

    #[test]
    fn windows_command_line_units_counts_utf16() {
        assert_eq!(windows_command_line_units(["node", "a b"]), 4 + 1 + 5);
        assert_eq!(windows_command_line_units(["", "é"]), 2 + 1 + 1);
        // A character outside the BMP is two units.
        assert_eq!(windows_command_line_units(["😀"]), 2);
        assert_eq!(windows_command_line_units(["\\\""]), 1 + 2 + 2 + 1);
    }
}
