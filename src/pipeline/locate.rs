//! Where every key and value of a YAML file sits (line and column), so that any error
//! found after parsing — a dangling input, ε ≤ 0 — can still name file:line:col.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScanError, Span, SpannedEventReceiver};

/// Deepest nesting of mappings and lists a pipeline file may have.
pub const MAX_DEPTH: usize = 64;

/// A 1-based line and column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

/// Positions by dotted path (`stages.optimal.with.lambda`, `axes.eps.2`).
#[derive(Debug, Default, Clone)]
pub struct Locations {
    keys: HashMap<String, Pos>,
    values: HashMap<String, Pos>,
    /// The first key repeated inside one mapping: its second position and the first's.
    duplicate: Option<(String, Pos, Pos)>,
    /// Where the first alias (`*name`) is: the place to point at when expanding aliases
    /// goes past the parser's repetition limit (a "billion laughs" file).
    pub first_alias: Option<Pos>,
}

impl Locations {
    /// Indexes `text`. A YAML syntax error, a repeated key in one mapping (YAML forbids it;
    /// parsers keep the last silently) or a second document comes back with its position.
    pub fn index(text: &str) -> Result<Self, (Pos, String)> {
        let mut rec = Recorder::default();
        let mut parser = Parser::new_from_str(text);
        parser.load(&mut rec, true).map_err(|e: ScanError| {
            let m = e.marker();
            (
                Pos {
                    line: m.line(),
                    col: m.col() + 1,
                },
                format!("YAML syntax error: {}", e.info()),
            )
        })?;
        // Bounded nesting keeps every recursive reader of the file (ours, serde's) off the
        // end of its stack; a real pipeline nests half a dozen levels.
        let mut depth = 0usize;
        for (e, pos) in &rec.events {
            match e {
                Ev::MapStart | Ev::SeqStart => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err((
                            *pos,
                            format!("the YAML nests more than {MAX_DEPTH} levels deep"),
                        ));
                    }
                }
                Ev::MapEnd | Ev::SeqEnd => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        let mut loc = Locations {
            first_alias: rec
                .events
                .iter()
                .find(|(e, _)| matches!(e, Ev::Alias))
                .map(|(_, p)| *p),
            ..Locations::default()
        };
        let mut i = 0;
        // Skip stream/document start events.
        while i < rec.events.len() && matches!(rec.events[i].0, Ev::Other | Ev::DocumentStart) {
            i += 1;
        }
        if i < rec.events.len() {
            walk(&rec.events, &mut i, String::new(), &mut loc);
        }
        if let Some((key, second, first)) = loc.duplicate.take() {
            return Err((
                second,
                format!(
                    "duplicate key `{key}` (first at line {}, column {}): a key may appear once per mapping",
                    first.line, first.col
                ),
            ));
        }
        if let Some((_, pos)) = rec.events[i..]
            .iter()
            .find(|(e, _)| matches!(e, Ev::DocumentStart))
        {
            return Err((
                *pos,
                "a second YAML document: a pipeline file holds exactly one".into(),
            ));
        }
        Ok(loc)
    }

    /// The position of the key at `path`, else of its value, else of the nearest ancestor.
    pub fn find(&self, path: &str) -> Pos {
        let mut p = path.to_string();
        loop {
            if let Some(pos) = self.keys.get(&p).or_else(|| self.values.get(&p)) {
                return *pos;
            }
            match p.rfind('.') {
                Some(dot) => p.truncate(dot),
                None => {
                    return self
                        .values
                        .get("")
                        .copied()
                        .unwrap_or(Pos { line: 1, col: 1 })
                }
            }
        }
    }

    /// The position of the value at `path` (falls back like [`Locations::find`]).
    pub fn value(&self, path: &str) -> Pos {
        self.values
            .get(path)
            .copied()
            .unwrap_or_else(|| self.find(path))
    }
}

enum Ev {
    Scalar(String),
    SeqStart,
    SeqEnd,
    MapStart,
    MapEnd,
    Alias,
    DocumentStart,
    Other,
}

#[derive(Default)]
struct Recorder {
    events: Vec<(Ev, Pos)>,
}

impl<'a> SpannedEventReceiver<'a> for Recorder {
    fn on_event(&mut self, ev: Event<'a>, span: Span) {
        let pos = Pos {
            line: span.start.line(),
            col: span.start.col() + 1,
        };
        let ev = match ev {
            Event::Scalar(s, ..) => Ev::Scalar(s.into_owned()),
            Event::SequenceStart(..) => Ev::SeqStart,
            Event::SequenceEnd => Ev::SeqEnd,
            Event::MappingStart(..) => Ev::MapStart,
            Event::MappingEnd => Ev::MapEnd,
            Event::Alias(_) => Ev::Alias,
            Event::DocumentStart(_) => Ev::DocumentStart,
            _ => Ev::Other,
        };
        self.events.push((ev, pos));
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Consumes one node starting at `events[*i]`, recording positions under `path`.
fn walk(events: &[(Ev, Pos)], i: &mut usize, path: String, loc: &mut Locations) {
    let Some((ev, pos)) = events.get(*i) else {
        return;
    };
    loc.values.entry(path.clone()).or_insert(*pos);
    *i += 1;
    match ev {
        Ev::MapStart => {
            let mut seen: HashMap<String, Pos> = HashMap::new();
            loop {
                match events.get(*i) {
                    None => return,
                    Some((Ev::MapEnd, _)) => {
                        *i += 1;
                        return;
                    }
                    Some((Ev::Scalar(key), kpos)) => {
                        if let Some(first) = seen.insert(key.clone(), *kpos) {
                            if loc.duplicate.is_none() {
                                loc.duplicate = Some((key.clone(), *kpos, first));
                            }
                        }
                        let child = join(&path, key);
                        loc.keys.insert(child.clone(), *kpos);
                        *i += 1;
                        walk(events, i, child, loc);
                    }
                    Some(_) => {
                        // A complex key: skip it and its value.
                        walk(events, i, join(&path, "?"), loc);
                        walk(events, i, join(&path, "?"), loc);
                    }
                }
            }
        }
        Ev::SeqStart => {
            let mut n = 0;
            loop {
                match events.get(*i) {
                    None => return,
                    Some((Ev::SeqEnd, _)) => {
                        *i += 1;
                        return;
                    }
                    Some(_) => {
                        walk(events, i, join(&path, &n.to_string()), loc);
                        n += 1;
                    }
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_keys_and_values() {
        let text = "name: x\nstages:\n  a:\n    kind: load.table\n    with: {eps: [1, 2]}\n";
        let loc = Locations::index(text).unwrap();
        assert_eq!(loc.find("stages.a.kind"), Pos { line: 4, col: 5 });
        assert_eq!(loc.value("stages.a.with.eps.1"), Pos { line: 5, col: 21 });
        // Unknown paths fall back to the nearest ancestor.
        assert_eq!(loc.find("stages.a.with.nope"), Pos { line: 5, col: 5 });
    }

    #[test]
    fn duplicate_keys_are_errors_at_the_second() {
        let (pos, msg) = Locations::index("a: 1\nb:\n  x: 1\n  y: 2\n  x: 3\n").unwrap_err();
        assert_eq!(pos, Pos { line: 5, col: 3 });
        assert!(
            msg.contains("duplicate key `x`") && msg.contains("line 3"),
            "{msg}"
        );
        let (pos, _) = Locations::index("s: {t: 1, t: 2}\n").unwrap_err();
        assert_eq!(pos, Pos { line: 1, col: 11 });
        // The same key in two different mappings is fine.
        assert!(Locations::index("a: {x: 1}\nb: {x: 1}\n").is_ok());
    }

    #[test]
    fn a_second_document_is_an_error() {
        let (pos, msg) = Locations::index("a: 1\n---\nb: 2\n").unwrap_err();
        assert_eq!(pos.line, 2);
        assert!(msg.contains("second YAML document"), "{msg}");
        assert!(Locations::index("---\na: 1\n").is_ok());
        assert!(Locations::index("---\na: 1\n...\n").is_ok());
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = format!("a: {}1{}\n", "[".repeat(100), "]".repeat(100));
        let (pos, msg) = Locations::index(&deep).unwrap_err();
        // The top-level mapping is the first level.
        assert_eq!((pos.line, pos.col), (1, 3 + MAX_DEPTH));
        assert!(msg.contains("nests more than"), "{msg}");
        // Far deeper: the parser's own recursion limit answers first, also located.
        let deeper = format!("a: {}1{}\n", "[".repeat(100_000), "]".repeat(100_000));
        let (pos, _) = Locations::index(&deeper).unwrap_err();
        assert_eq!(pos.line, 1);
    }

    #[test]
    fn syntax_errors_have_positions() {
        let (pos, msg) = Locations::index("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(pos.line >= 1 && !msg.is_empty());
    }
}
