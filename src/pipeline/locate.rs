//! Where every key and value of a YAML file sits (line and column), so that any error
//! found after parsing — a dangling input, ε ≤ 0 — can still name file:line:col.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScanError, Span, SpannedEventReceiver};

/// Deepest nesting of mappings and lists a pipeline file may have.
pub const MAX_DEPTH: usize = 64;

/// Most bytes of dotted paths the index keeps. Each node's path repeats its ancestors' keys,
/// so a long key above many nodes (`? <2 MiB key>` over a list of a thousand numbers) made the
/// index of a 2 MB file take 2 GB. Past this budget no more paths are recorded and positions
/// fall back to the nearest recorded ancestor; a real pipeline needs a few hundred KiB.
pub(crate) const MAX_PATH_BYTES: usize = 64 << 20;

/// Most bytes a file may stand for once its aliases are expanded, counting each scalar's text
/// and [`NODE_BYTES`] per node. Expanding is what the YAML parser does before anything else
/// looks at the file, and its repetition limit counts aliases, not bytes: ten thousand aliases
/// of a 60 KB anchor took 4.4 GB in ten seconds. A real pipeline stands for a few hundred KiB.
pub(crate) const MAX_EXPANDED_BYTES: u64 = 64 << 20;

/// What one parsed node costs besides its text (about the size of a parsed YAML value).
const NODE_BYTES: u64 = 32;

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
    /// Bytes of paths recorded so far (see [`MAX_PATH_BYTES`]).
    path_bytes: usize,
}

impl Locations {
    /// Indexes `text`. A YAML syntax error, a repeated key in one mapping (YAML forbids it;
    /// parsers keep the last silently) or a second document comes back with its position.
    pub fn index(text: &str) -> Result<Self, (Pos, String)> {
        let mut rec = Recorder::default();
        let mut parser = Parser::new_from_str(text);
        parser.load(&mut rec, true).map_err(|e: ScanError| {
            let m = e.marker();
            let at = Pos {
                line: m.line(),
                col: m.col() + 1,
            };
            // The scanner reports a tab that ends a plain scalar ("while scanning a plain
            // scalar, found a tab") where the scalar starts, often the line before the tab:
            // point at the tab itself.
            let (at, info) = match e.info() {
                info if info.contains("found a tab") => match tab_after(text, at) {
                    Some(tab) => (
                        tab,
                        format!("{info} (YAML indents with spaces, never tabs)"),
                    ),
                    None => (at, info.to_string()),
                },
                info => (at, info.to_string()),
            };
            (at, format!("YAML syntax error: {info}"))
        })?;
        if rec.expanded > MAX_EXPANDED_BYTES {
            let at = rec
                .events
                .iter()
                .find(|(e, _)| matches!(e, Ev::Alias))
                .map_or(Pos { line: 1, col: 1 }, |(_, p)| *p);
            return Err((
                at,
                format!(
                    "aliases expand this file to more than {} MiB: write the values out, or repeat fewer of them",
                    MAX_EXPANDED_BYTES >> 20
                ),
            ));
        }
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
            walk(&rec.events, &mut i, Some(String::new()), &mut loc);
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

/// The position of the first tab after `from` in the indentation of a line of `text` (a tab
/// inside a scalar, `a: x<TAB>y`, is text, not the error).
fn tab_after(text: &str, from: Pos) -> Option<Pos> {
    let (mut line, mut col, mut indent) = (1, 1, true);
    for c in text.chars() {
        if c == '\t' && indent && (line, col) >= (from.line, from.col) {
            return Some(Pos { line, col });
        }
        if c == '\n' {
            (line, col, indent) = (line + 1, 1, true);
        } else {
            col += 1;
            indent &= c == ' ' || c == '\t';
        }
    }
    None
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
    /// The expanded size of each anchored node ([`MAX_EXPANDED_BYTES`]).
    anchors: HashMap<usize, u64>,
    /// The open collections: anchor id (0: none) and expanded size so far.
    open: Vec<(usize, u64)>,
    /// The expanded size of the whole file so far.
    expanded: u64,
}

impl Recorder {
    /// Adds a finished node of expanded size `cost` to its parent.
    fn add(&mut self, cost: u64) {
        match self.open.last_mut() {
            Some((_, c)) => *c = c.saturating_add(cost),
            None => self.expanded = self.expanded.saturating_add(cost),
        }
    }
}

impl<'a> SpannedEventReceiver<'a> for Recorder {
    fn on_event(&mut self, ev: Event<'a>, span: Span) {
        let pos = Pos {
            line: span.start.line(),
            col: span.start.col() + 1,
        };
        // The expanded size, node by node: an alias costs what its anchor's node did.
        match &ev {
            Event::Scalar(s, _, anchor, tag) => {
                let tag = tag.as_ref().map_or(0, |t| t.handle.len() + t.suffix.len());
                let cost = NODE_BYTES + (s.len() + tag) as u64;
                if *anchor != 0 {
                    self.anchors.insert(*anchor, cost);
                }
                self.add(cost);
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                self.open.push((*anchor, NODE_BYTES));
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((anchor, cost)) = self.open.pop() {
                    if anchor != 0 {
                        self.anchors.insert(anchor, cost);
                    }
                    self.add(cost);
                }
            }
            Event::Alias(id) => {
                let cost = self.anchors.get(id).copied().unwrap_or(NODE_BYTES);
                self.add(cost);
            }
            _ => {}
        }
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

impl Locations {
    /// Takes `bytes` from the path budget if there is room.
    fn room(&mut self, bytes: usize) -> bool {
        let ok = self.path_bytes + bytes <= MAX_PATH_BYTES;
        if ok {
            self.path_bytes += bytes;
        }
        ok
    }

    /// The path of `key` under `path`, if the budget still has room for it (checked before
    /// the path is built, so that a long path over many children costs nothing).
    fn child(&mut self, path: Option<&str>, key: &str) -> Option<String> {
        let p = path?;
        self.room(p.len() + 1 + key.len()).then(|| join(p, key))
    }
}

/// Consumes one node starting at `events[*i]`, recording positions under `path` (`None`:
/// past the budget, nothing is recorded for this node and below).
fn walk(events: &[(Ev, Pos)], i: &mut usize, path: Option<String>, loc: &mut Locations) {
    let Some((ev, pos)) = events.get(*i) else {
        return;
    };
    if let Some(p) = &path {
        loc.values.entry(p.clone()).or_insert(*pos);
    }
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
                        // Recorded twice (key and value positions): counted twice.
                        let child = loc
                            .child(path.as_deref(), key)
                            .filter(|c| loc.room(c.len()));
                        if let Some(c) = &child {
                            loc.keys.insert(c.clone(), *kpos);
                        }
                        *i += 1;
                        walk(events, i, child, loc);
                    }
                    Some(_) => {
                        // A complex key: skip it and its value.
                        let k = loc.child(path.as_deref(), "?");
                        walk(events, i, k, loc);
                        let v = loc.child(path.as_deref(), "?");
                        walk(events, i, v, loc);
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
                        let item = loc.child(path.as_deref(), &n.to_string());
                        walk(events, i, item, loc);
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
        // A tab that ends a plain scalar is found where it is, not where the scalar starts.
        let (pos, msg) =
            Locations::index("stages:\n  a:\n    kind: load.table\n\twith: {}\n").unwrap_err();
        assert_eq!((pos.line, pos.col), (4, 1), "{msg}");
        assert!(msg.contains("tab") && msg.contains("spaces"), "{msg}");
        let (pos, _) = Locations::index("a: x\tb\n\t- 1\n").unwrap_err();
        assert_eq!(pos.line, 2);
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
    fn a_long_key_over_many_nodes_does_not_blow_up_the_index() {
        // 2 MiB key over 2 000 numbers: 4 GB of paths before the budget.
        let text = format!(
            "? {}\n: [{}]\nb: 1\n",
            "k".repeat(2 << 20),
            vec!["0"; 2000].join(", ")
        );
        let loc = Locations::index(&text).unwrap();
        assert!(loc.path_bytes <= MAX_PATH_BYTES);
        // Short paths still fit in what the long ones left; the rest fall back to an ancestor.
        assert_eq!(loc.find("b"), Pos { line: 3, col: 1 });
        let key = "k".repeat(2 << 20);
        assert_eq!(loc.find(&format!("{key}.1999")).line, 1);
        // Duplicates are still found past the budget.
        let text = format!(
            "? {}\n: [{}, {{x: 1, x: 2}}]\n",
            "k".repeat(2 << 20),
            vec!["0"; 40].join(", ")
        );
        let (pos, msg) = Locations::index(&text).unwrap_err();
        assert!(msg.contains("duplicate key `x`"), "{msg}");
        assert_eq!(pos.line, 2);
    }

    #[test]
    fn syntax_errors_have_positions() {
        let (pos, msg) = Locations::index("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(pos.line >= 1 && !msg.is_empty());
    }
}
