//! What an edit that missed tells the model: for `EDIT_TEXT_NOT_FOUND` the region of the text
//! most like `oldText` (`closest`), for `EDIT_TEXT_NOT_UNIQUE` the first line of every
//! occurrence (`lines`). Nothing here ever changes the text: a model resends exact text.
//!
//! Lines are the pieces of the text that end in `\n` (the last one may lack it); line numbers
//! count from 1 in the text the earlier edits of the call left, without a byte order mark, so
//! they are the file's own line numbers for the first edit. An `oldText` of `k` lines (a final
//! `\n` ends its last line, it does not start another) is compared with every run of `k`
//! consecutive lines of the text; the run that wins is the one with, in this order of
//! importance, the most lines equal to their `oldText` line once spaces, tabs and line ends are
//! removed and typographic quotes and dashes folded, then the most lines equal byte for byte,
//! then the highest sum of a cheap per-line likeness (the overlap of two 128-bit sets of the
//! line's characters and character pairs); among equals, the first. Every comparison of two
//! lines is a few word operations on values computed once per line, so the search costs time
//! proportional to (the text's lines × `oldText`'s lines) plus their sizes, and memory of 32
//! bytes a line of the text and of `oldText`. It checks cancellation as it goes.
//!
//! A text with fewer lines than `oldText` answers its whole self as the region; an empty text
//! has no line to point at and `closest` is left out.

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::error::Cancelled;

/// The most characters of `closest.text` (cut on a character boundary).
pub const MAX_CLOSEST_CHARS: usize = 2_000;

/// The most occurrences `lines` names.
pub const MAX_OCCURRENCE_LINES: usize = 50;

/// Line comparisons between two looks at the cancellation token.
const CANCEL_EVERY: usize = 1 << 16;

/// What alone explains why the region is not `oldText`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hint {
    /// Equal once each line's leading spaces and tabs are removed.
    Indentation,
    /// Equal once every space, tab, `\r` and `\n` is removed.
    Whitespace,
    /// Equal once typographic quotes and dashes are folded to ASCII.
    Quotes,
    /// None of these.
    Different,
}

impl Hint {
    /// The string of the record.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Indentation => "indentation",
            Self::Whitespace => "whitespace",
            Self::Quotes => "quotes",
            Self::Different => "different",
        }
    }
}

/// The ASCII twin of a typographic quote, prime or dash; anything else unchanged.
fn fold(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' | '\u{2035}'
        | '\u{2039}' | '\u{203A}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' | '\u{2036}'
        | '\u{00AB}' | '\u{00BB}' => '"',
        '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}'
        | '\u{2212}' => '-',
        c => c,
    }
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

/// The hint for a region against `old`, the most precise first: `indentation` (it implies
/// `whitespace` but says where), `whitespace`, `quotes`, else `different`. A region that differs
/// in two of these ways at once is `different`.
pub(crate) fn hint(region: &str, old: &str) -> Hint {
    fn indent(s: &str) -> &str {
        s.trim_start_matches([' ', '\t'])
    }
    if region
        .split('\n')
        .map(indent)
        .eq(old.split('\n').map(indent))
    {
        return Hint::Indentation;
    }
    if region
        .chars()
        .filter(|c| !is_blank(*c))
        .eq(old.chars().filter(|c| !is_blank(*c)))
    {
        return Hint::Whitespace;
    }
    if region.chars().map(fold).eq(old.chars().map(fold)) {
        return Hint::Quotes;
    }
    Hint::Different
}

/// What a line is compared by, computed once.
#[derive(Clone, Copy)]
struct LineKey {
    /// The line without its `\n`, hashed.
    exact: u64,
    /// The line folded and without spaces, tabs and `\r`, hashed.
    loose: u64,
    /// Bits of the loose line's characters and character pairs.
    bits: u128,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;
const MIX: u64 = 0x9e37_79b9_7f4a_7c15;

fn fnv(h: u64, c: char) -> u64 {
    (h ^ u64::from(u32::from(c))).wrapping_mul(FNV_PRIME)
}

/// The bit (0 to 127) a value sets.
fn bit(v: u64) -> u128 {
    1u128 << (v.wrapping_mul(MIX) >> 57)
}

fn key(line: &str) -> LineKey {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let mut exact = FNV_OFFSET;
    let mut loose = FNV_OFFSET;
    let mut bits = 0u128;
    let mut prev: Option<char> = None;
    for c in line.chars() {
        exact = fnv(exact, c);
        if is_blank(c) {
            continue;
        }
        let c = fold(c);
        loose = fnv(loose, c);
        bits |= bit(u64::from(u32::from(c)));
        if let Some(p) = prev {
            bits |= bit((u64::from(u32::from(p)) << 21 | u64::from(u32::from(c))) ^ (1 << 42));
        }
        prev = Some(c);
    }
    LineKey { exact, loose, bits }
}

/// The likeness of two lines that are not loosely equal, 0 to 64.
fn likeness(a: u128, b: u128) -> u64 {
    let union = (a | b).count_ones();
    if union == 0 {
        return 0;
    }
    u64::from(64 * (a & b).count_ones() / union)
}

/// The score of a run of lines against `oldText`, compared in field order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Score {
    loose: usize,
    exact: usize,
    likeness: u64,
}

/// The byte offset where each line of `text` starts, and the text's length last.
fn line_starts(text: &str) -> Vec<usize> {
    let mut starts = vec![0];
    starts.extend(
        text.bytes()
            .enumerate()
            .filter(|(_, b)| *b == b'\n')
            .map(|(i, _)| i + 1),
    );
    if starts.last() != Some(&text.len()) {
        starts.push(text.len());
    }
    starts
}

/// The index of the first of `k` consecutive lines most like `old`'s (`k` at most the
/// number of lines).
fn best_run(
    text: &str,
    starts: &[usize],
    old: &str,
    k: usize,
    cancel: &CancellationToken,
) -> Result<usize, Cancelled> {
    let lines: Vec<LineKey> = starts.windows(2).map(|w| key(&text[w[0]..w[1]])).collect();
    let olds: Vec<LineKey> = old.split_inclusive('\n').map(key).collect();
    debug_assert_eq!(olds.len(), k);
    let mut best = (0, Score::default());
    let mut since_check = 0;
    for (start, run) in lines.windows(k).enumerate() {
        since_check += k;
        if since_check >= CANCEL_EVERY {
            since_check = 0;
            if cancel.is_cancelled() {
                return Err(Cancelled);
            }
        }
        let mut score = Score::default();
        for (line, want) in run.iter().zip(&olds) {
            if line.loose == want.loose {
                score.loose += 1;
                score.exact += usize::from(line.exact == want.exact);
                score.likeness += 64;
            } else {
                score.likeness += likeness(line.bits, want.bits);
            }
        }
        if start == 0 || score > best.1 {
            best = (start, score);
        }
    }
    Ok(best.0)
}

/// `s` cut to at most [`MAX_CLOSEST_CHARS`] characters.
fn cut(s: &str) -> &str {
    match s.char_indices().nth(MAX_CLOSEST_CHARS) {
        Some((at, _)) => &s[..at],
        None => s,
    }
}

/// The `closest` member for an `old` (not empty) that does not occur in `text`, or `None` for
/// an empty text. `crlf`: the text and `old` had their `\r\n` made `\n` (the file uses `\r\n`
/// throughout), and the region's `text` is given back with `\r\n`, as the file holds it.
pub(crate) fn closest(
    text: &str,
    old: &str,
    crlf: bool,
    cancel: &CancellationToken,
) -> Result<Option<Value>, Cancelled> {
    let starts = line_starts(text);
    let lines = starts.len() - 1;
    if lines == 0 {
        return Ok(None);
    }
    let k = old.split_inclusive('\n').count();
    let (first, count) = if k > lines {
        (0, lines)
    } else {
        (best_run(text, &starts, old, k, cancel)?, k)
    };
    let mut region = &text[starts[first]..starts[first + count]];
    if !old.ends_with('\n') {
        region = region.strip_suffix('\n').unwrap_or(region);
    }
    let hint = hint(region, old);
    let shown = if crlf {
        region.replace('\n', "\r\n")
    } else {
        region.to_owned()
    };
    Ok(Some(json!({
        "startLine": first + 1,
        "endLine": first + count,
        "text": cut(&shown),
        "hint": hint.as_str(),
    })))
}

/// The first line (from 1) of each of the first [`MAX_OCCURRENCE_LINES`] occurrences of `old`
/// in `text`, counted as the replacement counts them (left to right, not overlapping).
pub(crate) fn occurrence_lines(text: &str, old: &str) -> Vec<usize> {
    let mut lines = Vec::new();
    let (mut line, mut at) = (1, 0);
    for (pos, _) in text.match_indices(old).take(MAX_OCCURRENCE_LINES) {
        line += text.as_bytes()[at..pos]
            .iter()
            .filter(|b| **b == b'\n')
            .count();
        at = pos;
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(text: &str, old: &str) -> Value {
        closest(text, old, false, &CancellationToken::new())
            .unwrap()
            .expect("a region")
    }

    #[test]
    fn each_hint_and_its_order() {
        assert_eq!(hint("  a\n\tb", "a\nb"), Hint::Indentation);
        assert_eq!(hint("a  b", "a b"), Hint::Whitespace);
        assert_eq!(hint("a\r\nb", "a\nb"), Hint::Whitespace);
        assert_eq!(hint("ab\n", "ab"), Hint::Whitespace);
        assert_eq!(
            hint("say \u{201C}hi\u{201D} \u{2014} ok", "say \"hi\" - ok"),
            Hint::Quotes
        );
        assert_eq!(hint("it\u{2019}s", "it's"), Hint::Quotes);
        // Two kinds at once: different.
        assert_eq!(hint("  \u{2018}a\u{2019}", "'a'"), Hint::Different);
        assert_eq!(hint("abc", "abd"), Hint::Different);
    }

    #[test]
    fn the_loosely_equal_run_wins_over_the_nearly_equal_one() {
        let text = "fn a() {\none();\ntw0();\n}\nfn a() {\n    one();\n    two();\n}\n";
        // Lines 1-3: two lines exact, one with a typo; lines 5-7: all three re-indented.
        let got = find(text, "fn a() {\none();\ntwo();");
        assert_eq!(got["startLine"], 5, "{got}");
        assert_eq!(got["endLine"], 7, "{got}");
        assert_eq!(got["hint"], "indentation");
        // Among equals, the first.
        let got = find(" x\n\n  x\n", "x");
        assert_eq!(got["startLine"], 1, "{got}");
        // Equal in the loose sense on as many lines: the more exact lines win.
        let got = find("  a\n  b\nc\na\n  b\nc\n", "a\nb\nd");
        assert_eq!(got["startLine"], 4, "{got}");
        assert_eq!(got["hint"], "different");
    }

    #[test]
    fn a_typo_in_one_line_points_at_the_likest_line() {
        let text = "let x = foo(bar);\nlet y = baz(qux);\nprintln!(\"done\");\n";
        let got = find(text, "let y = baz(qix);");
        assert_eq!(
            got,
            json!({"startLine": 2, "endLine": 2, "text": "let y = baz(qux);", "hint": "different"})
        );
    }

    #[test]
    fn fewer_lines_than_old_answers_the_whole_text_and_empty_answers_none() {
        let got = find("a\nb\n", "a\nb\nc\n");
        assert_eq!(
            got,
            json!({"startLine": 1, "endLine": 2, "text": "a\nb\n", "hint": "different"})
        );
        let got = find("a\n  b", "a\nb\n\n");
        assert_eq!(got["hint"], "whitespace");
        assert_eq!(closest("", "a", false, &CancellationToken::new()), Ok(None));
    }

    #[test]
    fn the_region_ends_as_old_ends() {
        let got = find("x\n a\ny\n", "a\n");
        assert_eq!(got["text"], " a\n");
        assert_eq!(got["hint"], "indentation");
        let got = find("x\n a\ny\n", "a");
        assert_eq!(got["text"], " a");
    }

    #[test]
    fn text_is_cut_at_n_characters() {
        let long = "é".repeat(MAX_CLOSEST_CHARS);
        let got = find(&long, "zz");
        assert_eq!(got["text"], long);
        let over = format!("{long}é");
        let got = find(&over, "zz");
        assert_eq!(got["text"], long);
    }

    #[test]
    fn cancellation_is_noticed_in_a_long_search() {
        let text = "\n".repeat(60_000);
        let old = "x\n".repeat(30_000);
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert_eq!(closest(&text, &old, false, &cancel), Err(Cancelled));
    }

    #[test]
    fn occurrence_lines_count_lines_and_stop_at_the_bound() {
        assert_eq!(occurrence_lines("ab\nab\n\nxab", "ab"), vec![1, 2, 4]);
        assert_eq!(occurrence_lines("aaa", "aa"), vec![1]);
        let many = "k\n".repeat(MAX_OCCURRENCE_LINES + 1);
        let got = occurrence_lines(&many, "k");
        assert_eq!(got, (1..=MAX_OCCURRENCE_LINES).collect::<Vec<_>>());
    }
}
