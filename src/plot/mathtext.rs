//! Mathematical text in figures: `10^4`, `e^(−cε/2)`, `[−1, 1]^d`, `R_0` and `|R_OPT|` in
//! titles, labels and legends become superscripts and subscripts (SVG `<tspan>`s with a
//! baseline shift), so a figure prints 10⁴ and R₀ rather than the caret and underscore.
//!
//! Marked up as in plain-text mathematics: `^` then a parenthesised group `(…)` (the
//! parentheses are dropped), a braced group `{…}`, or a token (an optional minus, then
//! letters and digits); `_` likewise, but only after a single letter (`R_0`, `x_j`) or before a
//! braced group, so the underscores of column names (`max_abs_error`) stay as they are.

/// One piece of a text: plain, or raised or lowered.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    Plain(String),
    Sup(String),
    Sub(String),
}

fn token_len(chars: &[char]) -> usize {
    let mut n = 0;
    if matches!(chars.first(), Some('−' | '-')) {
        n = 1;
    }
    let body = chars[n..]
        .iter()
        .take_while(|c| c.is_alphanumeric() || **c == '.')
        .count();
    // A trailing full stop ends the sentence, not the number.
    let body = if body > 0 && chars[n + body - 1] == '.' {
        body - 1
    } else {
        body
    };
    if body == 0 {
        0
    } else {
        n + body
    }
}

/// The group after a `^` or `_` at `chars[0..]`: (its text, characters it spans).
fn group(chars: &[char]) -> Option<(String, usize)> {
    let (open, close) = match chars.first()? {
        '(' => ('(', ')'),
        '{' => ('{', '}'),
        _ => {
            let n = token_len(chars);
            return (n > 0).then(|| (chars[..n].iter().collect(), n));
        }
    };
    let mut depth = 0;
    for (i, c) in chars.iter().enumerate() {
        if *c == open {
            depth += 1;
        } else if *c == close {
            depth -= 1;
            if depth == 0 {
                return (i > 1).then(|| (chars[1..i].iter().collect(), i + 1));
            }
        }
    }
    None
}

/// Splits a text into plain, superscript and subscript pieces.
pub fn pieces(text: &str) -> Vec<Piece> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut plain = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let script = match c {
            '^' if i > 0 => group(&chars[i + 1..]).map(|(g, n)| (Piece::Sup(g), n)),
            '_' if i > 0 => {
                let single_letter =
                    chars[i - 1].is_alphabetic() && (i == 1 || !chars[i - 2].is_alphanumeric());
                match chars.get(i + 1) {
                    Some('{') => group(&chars[i + 1..]).map(|(g, n)| (Piece::Sub(g), n)),
                    Some(_) if single_letter => {
                        let n = chars[i + 1..]
                            .iter()
                            .take_while(|c| c.is_alphanumeric())
                            .count();
                        // A subscript is short (R_0, x_j, R_OPT); a longer run is a name.
                        (1..=3)
                            .contains(&n)
                            .then(|| (Piece::Sub(chars[i + 1..i + 1 + n].iter().collect()), n))
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        match script {
            Some((p, n)) => {
                if !plain.is_empty() {
                    out.push(Piece::Plain(std::mem::take(&mut plain)));
                }
                out.push(p);
                i += 1 + n;
            }
            None => {
                plain.push(c);
                i += 1;
            }
        }
    }
    if !plain.is_empty() {
        out.push(Piece::Plain(plain));
    }
    out
}

/// Rewrites the text of every `<text>` element of an SVG document with raised and lowered
/// pieces. plotters writes each label as one `<text …>content</text>` with the content escaped;
/// `^`, `_` and the group brackets are never escaped, so the content is rewritten as it is.
pub fn svg(doc: &str) -> String {
    let mut out = String::with_capacity(doc.len());
    let mut rest = doc;
    while let Some(start) = rest.find("<text") {
        let Some(open_end) = rest[start..].find('>').map(|e| start + e + 1) else {
            break;
        };
        let Some(close) = rest[open_end..].find("</text>").map(|e| open_end + e) else {
            break;
        };
        out.push_str(&rest[..open_end]);
        let content = &rest[open_end..close];
        let parts = pieces(content);
        if parts.iter().all(|p| matches!(p, Piece::Plain(_))) {
            out.push_str(content);
        } else {
            for p in parts {
                match p {
                    Piece::Plain(s) => out.push_str(&s),
                    Piece::Sup(s) => {
                        out.push_str(r#"<tspan baseline-shift="super" font-size="75%">"#);
                        out.push_str(&s);
                        out.push_str("</tspan>");
                    }
                    Piece::Sub(s) => {
                        out.push_str(r#"<tspan baseline-shift="sub" font-size="75%">"#);
                        out.push_str(&s);
                        out.push_str("</tspan>");
                    }
                }
            }
        }
        rest = &rest[close..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::{pieces, svg, Piece::*};

    #[test]
    fn carets_and_underscores_become_scripts() {
        assert_eq!(
            pieces("C = 10^4"),
            [Plain("C = 10".into()), Sup("4".into())]
        );
        assert_eq!(
            pieces("bound 2e^(−cε/2) (Cor. 3.12)"),
            [
                Plain("bound 2e".into()),
                Sup("−cε/2".into()),
                Plain(" (Cor. 3.12)".into())
            ]
        );
        assert_eq!(
            pieces("[−1, 1]^d"),
            [Plain("[−1, 1]".into()), Sup("d".into())]
        );
        assert_eq!(
            pieces("δ = 10^-3."),
            [Plain("δ = 10".into()), Sup("-3".into()), Plain(".".into())]
        );
        assert_eq!(
            pieces("R_0 and |R_OPT|"),
            [
                Plain("R".into()),
                Sub("0".into()),
                Plain(" and |R".into()),
                Sub("OPT".into()),
                Plain("|".into())
            ]
        );
        assert_eq!(pieces("x_{i+1}"), [Plain("x".into()), Sub("i+1".into())]);
    }

    #[test]
    fn names_with_underscores_and_lone_carets_stay_as_they_are() {
        for t in [
            "max_abs_error",
            "synthesis_seconds",
            "a ^ b",
            "^4",
            "x_",
            "CRM · max_rel_error",
        ] {
            assert_eq!(pieces(t), [Plain(t.into())], "{t}");
        }
    }

    #[test]
    fn svg_text_gets_tspans_and_nothing_else_changes() {
        let doc = r#"<svg><text x="1" y="2">C = 10^4 &amp; R_0</text><line x1="0"/><text>plain_name</text></svg>"#;
        let out = svg(doc);
        assert_eq!(
            out,
            r#"<svg><text x="1" y="2">C = 10<tspan baseline-shift="super" font-size="75%">4</tspan> &amp; R<tspan baseline-shift="sub" font-size="75%">0</tspan></text><line x1="0"/><text>plain_name</text></svg>"#
        );
        assert_eq!(svg("<svg/>"), "<svg/>");
    }
}
