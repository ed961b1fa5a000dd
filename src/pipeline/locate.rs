//! Where every key and value of a YAML file sits (line and column), so that any error
//! found after parsing — a dangling input, ε ≤ 0 — can still name file:line:col.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScanError, Span, SpannedEventReceiver};

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
}

impl Locations {
    /// Indexes `text`; a YAML syntax error comes back with its position.
    pub fn index(text: &str) -> Result<Self, (Pos, String)> {
        let mut rec = Recorder::default();
        let mut parser = Parser::new_from_str(text);
        parser.load(&mut rec, false).map_err(|e: ScanError| {
            let m = e.marker();
            (
                Pos {
                    line: m.line(),
                    col: m.col() + 1,
                },
                e.info().to_string(),
            )
        })?;
        let mut loc = Locations::default();
        let mut i = 0;
        // Skip stream/document start events.
        while i < rec.events.len() && matches!(rec.events[i].0, Ev::Other) {
            i += 1;
        }
        if i < rec.events.len() {
            walk(&rec.events, &mut i, String::new(), &mut loc);
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
        Ev::MapStart => loop {
            match events.get(*i) {
                None => return,
                Some((Ev::MapEnd, _)) => {
                    *i += 1;
                    return;
                }
                Some((Ev::Scalar(key), kpos)) => {
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
        },
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
    fn syntax_errors_have_positions() {
        let (pos, msg) = Locations::index("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(pos.line >= 1 && !msg.is_empty());
    }
}
