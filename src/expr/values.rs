//! The values an expression computes ([`Vals`]: integers, numbers, truth values, text, each
//! possibly missing), read from a frame's columns, and the rules that combine them: types
//! unified, missing values propagated, non-finite numbers made missing, keys compared.

use std::collections::HashMap;

use polars::prelude::{Column, DataType};

use super::Pos;

/// The values of an expression over a frame's rows (or groups).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Vals {
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
    Bool(Vec<Option<bool>>),
    Str(Vec<Option<String>>),
    /// All missing, of no type yet (`NULL`, a column of nothing but missing cells).
    Null(usize),
}

impl Vals {
    pub(super) fn len(&self) -> usize {
        match self {
            Vals::Int(v) => v.len(),
            Vals::Float(v) => v.len(),
            Vals::Bool(v) => v.len(),
            Vals::Str(v) => v.len(),
            Vals::Null(n) => *n,
        }
    }

    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Vals::Int(_) => "an integer",
            Vals::Float(_) => "a number",
            Vals::Bool(_) => "a truth value",
            Vals::Str(_) => "text",
            Vals::Null(_) => "null",
        }
    }

    /// The values as a frame column: Int64, Float64, Boolean or String (all-missing: Float64).
    pub(crate) fn into_column(self, name: &str) -> Column {
        match self {
            Vals::Int(v) => Column::new(name.into(), v),
            Vals::Float(v) => Column::new(name.into(), v),
            Vals::Bool(v) => Column::new(name.into(), v),
            Vals::Str(v) => Column::new(name.into(), v),
            Vals::Null(n) => Column::full_null(name.into(), n, &DataType::Float64),
        }
    }
}

/// A column of a frame as values, or why expressions cannot read it.
pub fn load(c: &Column) -> Result<Vals, String> {
    let dt = c.dtype();
    let s = c.as_materialized_series();
    let bad = |e: polars::error::PolarsError| format!("column `{}`: {e}", c.name());
    Ok(match dt {
        DataType::Boolean => Vals::Bool(s.bool().map_err(bad)?.iter().collect()),
        DataType::String => Vals::Str(
            s.str()
                .map_err(bad)?
                .iter()
                .map(|v| v.map(str::to_string))
                .collect(),
        ),
        DataType::Null => Vals::Null(s.len()),
        t if t.is_float() => Vals::Float(
            s.cast(&DataType::Float64)
                .map_err(bad)?
                .f64()
                .map_err(bad)?
                .iter()
                .collect(),
        ),
        t if t.is_integer() => Vals::Int(
            s.strict_cast(&DataType::Int64)
                .map_err(|_| {
                    format!(
                        "column `{}` ({t}) holds integers beyond 64 bits, which expressions do not read",
                        c.name()
                    )
                })?
                .i64()
                .map_err(bad)?
                .iter()
                .collect(),
        ),
        t => {
            return Err(format!(
                "column `{}` holds {t}, which expressions do not read (they read integers, numbers, text and truth values)",
                c.name()
            ))
        }
    })
}

/// Row `i` of the chosen result: `rows[i]` names which of `results` (all of one type) it
/// comes from.
pub(super) fn gather(results: &[Vals], rows: &[usize]) -> Vals {
    macro_rules! pick {
        ($var:ident) => {
            Vals::$var(
                rows.iter()
                    .enumerate()
                    .map(|(i, &k)| match &results[k] {
                        Vals::$var(v) => v[i].clone(),
                        _ => None,
                    })
                    .collect(),
            )
        };
    }
    match results.first() {
        Some(Vals::Int(_)) => pick!(Int),
        Some(Vals::Float(_)) => pick!(Float),
        Some(Vals::Bool(_)) => pick!(Bool),
        Some(Vals::Str(_)) => pick!(Str),
        _ => Vals::Null(rows.len()),
    }
}

pub(super) fn is_null(v: &Vals, i: usize) -> bool {
    match v {
        Vals::Int(v) => v[i].is_none(),
        Vals::Float(v) => v[i].is_none(),
        Vals::Bool(v) => v[i].is_none(),
        Vals::Str(v) => v[i].is_none(),
        Vals::Null(_) => true,
    }
}

/// Values of one type from several of compatible types: integers and numbers give numbers,
/// null takes the others' type; text with numbers is an error.
pub(super) fn unify(vals: Vec<Vals>, pos: Pos, what: &str) -> Result<Vec<Vals>, String> {
    let typed: Vec<&Vals> = vals
        .iter()
        .filter(|v| !matches!(v, Vals::Null(_)))
        .collect();
    let any_float = typed.iter().any(|v| matches!(v, Vals::Float(_)));
    let all_num = typed
        .iter()
        .all(|v| matches!(v, Vals::Int(_) | Vals::Float(_)));
    if !all_num {
        let first = typed[0];
        if let Some(other) = typed
            .iter()
            .find(|v| std::mem::discriminant(**v) != std::mem::discriminant(first))
        {
            return Err(format!(
                "{pos}{what} are {} and {}: they must all be numbers, all text or all truth values",
                first.type_name(),
                other.type_name()
            ));
        }
    }
    // What a missing branch becomes: the others' type.
    let empty = |n: usize| -> Vals {
        match typed.first() {
            _ if any_float => Vals::Float(vec![None; n]),
            Some(Vals::Int(_)) => Vals::Int(vec![None; n]),
            Some(Vals::Bool(_)) => Vals::Bool(vec![None; n]),
            Some(Vals::Str(_)) => Vals::Str(vec![None; n]),
            _ => Vals::Null(n),
        }
    };
    let nulls: Vec<Option<Vals>> = vals
        .iter()
        .map(|v| match v {
            Vals::Null(n) => Some(empty(*n)),
            _ => None,
        })
        .collect();
    Ok(vals
        .into_iter()
        .zip(nulls)
        .map(|(v, null)| match (v, null) {
            (_, Some(typed)) => typed,
            (Vals::Int(x), None) if any_float => {
                Vals::Float(x.iter().map(|x| x.map(|x| x as f64)).collect())
            }
            (other, None) => other,
        })
        .collect())
}

pub(super) enum Num {
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
}

impl Num {
    pub(super) fn floats(self) -> Vec<Option<f64>> {
        match self {
            Num::Int(v) => v.iter().map(|x| x.map(|x| x as f64)).collect(),
            Num::Float(v) => v,
        }
    }
}

/// `v` as numbers, or an error naming the operation that needs them.
pub(super) fn numeric(v: Vals, pos: Pos, what: &str) -> Result<Num, String> {
    match v {
        Vals::Int(v) => Ok(Num::Int(v)),
        Vals::Float(v) => Ok(Num::Float(v)),
        Vals::Null(n) => Ok(Num::Int(vec![None; n])),
        other => Err(format!(
            "{pos}`{what}` needs numbers, and this is {}",
            other.type_name()
        )),
    }
}

pub(super) fn truth(v: Vals, pos: Pos, what: &str) -> Result<Vec<Option<bool>>, String> {
    match v {
        Vals::Bool(v) => Ok(v),
        Vals::Null(n) => Ok(vec![None; n]),
        other => Err(format!(
            "{pos}`{what}` needs truth values (a comparison such as `x > 0`), and this is {}",
            other.type_name()
        )),
    }
}

/// A number that is not finite (x/0, ln 0, an overflow) is missing: see the module's doc.
pub(super) fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// `f` on each present integer; `None` from `f` is an overflow, an error naming the row.
pub(super) fn checked(
    v: &[Option<i64>],
    pos: Pos,
    what: &str,
    f: impl Fn(i64) -> Option<i64>,
) -> Result<Vec<Option<i64>>, String> {
    v.iter()
        .enumerate()
        .map(|(i, x)| match x {
            None => Ok(None),
            Some(x) => f(*x).map(Some).ok_or_else(|| {
                format!(
                    "{pos}`{what}` overflows 64-bit integers at row {} (x = {x})",
                    i + 1
                )
            }),
        })
        .collect()
}

pub(super) fn zip_with<A: Copy, B>(
    a: &[Option<A>],
    b: &[Option<A>],
    f: impl Fn(A, A) -> Option<B>,
) -> Vec<Option<B>> {
    a.iter()
        .zip(b)
        .map(|(x, y)| match (x, y) {
            (Some(x), Some(y)) => f(*x, *y),
            _ => None,
        })
        .collect()
}

/// Row indices grouped by equal values of `keys` (first-seen order): numbers equal as numbers
/// (an integer 1 and a number 1.0 are one key), a missing key is a group of its own.
pub(crate) fn group_rows(keys: &[Vals]) -> Vec<Vec<usize>> {
    let n = keys.first().map_or(0, Vals::len);
    let groups = group_keys(n, keys.iter().map(Ok::<_, String>)).expect("no key fails");
    groups
        .iter()
        .map(|rows| rows.iter().map(|&r| r as usize).collect())
        .collect()
}

/// Rows of equal keys as one index: every group's rows (ascending) one after another, groups
/// in first-seen order. What [`group_rows`] gives, in two flat vectors instead of one
/// vector per group: `aggregate.summary` of 10⁶ groups held 54 MB of per-group vectors.
#[derive(Debug, PartialEq)]
pub(crate) struct Groups {
    rows: Vec<u32>,
    /// Where each group's rows end in `rows`.
    ends: Vec<u32>,
}

impl Groups {
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Each group's rows, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u32]> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(a, &b)| &self.rows[a as usize..b as usize])
    }
}

/// The groups of `n` rows by key columns given one at a time, so that only one column's
/// values are in memory at once (two key columns of 3·10⁶ rows held 96 MB as [`Vals`]).
///
/// Each column gives its rows an id by [`KeyCell`] ([`column_ids`]); a row's group is the
/// tuple of its columns' ids, numbered in first-seen order as the columns are folded in.
/// No key: one group of every row (none when there is no row).
pub(crate) fn group_keys<E, V: std::borrow::Borrow<Vals>>(
    n: usize,
    keys: impl IntoIterator<Item = Result<V, E>>,
) -> Result<Groups, E> {
    group_keys_hashed(n, keys, &std::collections::hash_map::RandomState::new())
}

/// [`group_keys`] with the hashes of `state` (a test makes them all collide).
fn group_keys_hashed<E, V: std::borrow::Borrow<Vals>>(
    n: usize,
    keys: impl IntoIterator<Item = Result<V, E>>,
    state: &impl std::hash::BuildHasher,
) -> Result<Groups, E> {
    // A frame's rows are counted in u32 here: 4·10⁹ rows would not fit in memory anyway.
    let n32 = u32::try_from(n).expect("fewer than 2³² rows");
    let mut ids: Option<(Vec<u32>, u32)> = None;
    for v in keys {
        let (col, count) = column_ids(v?.borrow(), state);
        ids = Some(match ids {
            None => (col, count),
            Some((prev, _)) => {
                // The pair (group so far, this column's id) numbered in first-seen order.
                let mut seen: HashMap<u64, u32> = HashMap::new();
                let folded = prev
                    .iter()
                    .zip(&col)
                    .map(|(&g, &c)| {
                        let next = seen.len() as u32;
                        *seen
                            .entry(u64::from(g) << 32 | u64::from(c))
                            .or_insert(next)
                    })
                    .collect();
                (folded, seen.len() as u32)
            }
        });
    }
    let (ids, count) = ids.unwrap_or_else(|| (vec![0; n], u32::from(n > 0)));
    // Rows placed by group (a counting sort: stable, so each group's rows stay ascending).
    let mut ends = vec![0u32; count as usize];
    for &g in &ids {
        ends[g as usize] += 1;
    }
    let mut at = 0;
    for e in &mut ends {
        at += *e;
        *e = at;
    }
    let mut next: Vec<u32> = std::iter::once(0)
        .chain(ends.iter().copied())
        .take(ends.len())
        .collect();
    let mut rows = vec![0u32; n];
    for (r, &g) in (0..n32).zip(&ids) {
        rows[next[g as usize] as usize] = r;
        next[g as usize] += 1;
    }
    Ok(Groups { rows, ends })
}

/// Per row of `v`, the id of its [`KeyCell`] (0, 1, … in first-seen order), and how many
/// there are. The index holds no key, only each key's hash: a key is found by the hash of
/// its cell and told apart from others of the same hash by comparing with its first row. By
/// their sizes, a table of every key's cell would hold a copy of every distinct text.
fn column_ids(v: &Vals, state: &impl std::hash::BuildHasher) -> (Vec<u32>, u32) {
    const NONE: u32 = u32::MAX;
    // Per hash, the latest id of that hash; per id, the one before it of its hash, and its
    // first row.
    let mut latest: HashMap<u64, u32> = HashMap::new();
    let mut before: Vec<u32> = Vec::new();
    let mut first: Vec<u32> = Vec::new();
    let ids = (0..v.len())
        .map(|r| {
            let cell = KeyCell::of(v, r);
            let h = state.hash_one(&cell);
            let mut g = latest.get(&h).copied().unwrap_or(NONE);
            while g != NONE && KeyCell::of(v, first[g as usize] as usize) != cell {
                g = before[g as usize];
            }
            if g == NONE {
                g = first.len() as u32;
                before.push(latest.insert(h, g).unwrap_or(NONE));
                first.push(r as u32);
            }
            g
        })
        .collect();
    (ids, first.len() as u32)
}

/// One cell of a key, hashable: an integer (or a number with an integer's value: 1 and 1.0
/// are one key), another number by its bits (−0 is 0), text, truth, missing.
///
/// The one rule for when two rows have the same key, wherever dplab matches rows: `frame.group`
/// and every kind that groups ([`crate::stages::columns`]'s `group_by`), `frame.join`,
/// `evaluate.error`'s `on:` keys and `report.table`'s rows of the paper. Numbers are the same
/// key when they are the same value (exactly: a key names a point of a sweep, not a
/// measurement), text when it is the same text, and a number is never text. A key read from
/// text — the paper's CSV, a YAML value — is read as the type of the column it is matched
/// against ([`KeyCell::read_as`]), so the paper's `0.50` is our 0.5.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum KeyCell {
    Missing,
    Int(i64),
    Num(u64),
    Str(String),
    Bool(bool),
}

impl KeyCell {
    pub fn of(v: &Vals, r: usize) -> KeyCell {
        match v {
            Vals::Int(v) => v[r].map_or(KeyCell::Missing, KeyCell::Int),
            Vals::Float(v) => v[r].map_or(KeyCell::Missing, KeyCell::number),
            Vals::Str(v) => v[r].clone().map_or(KeyCell::Missing, KeyCell::Str),
            Vals::Bool(v) => v[r].map_or(KeyCell::Missing, KeyCell::Bool),
            Vals::Null(_) => KeyCell::Missing,
        }
    }

    /// The key of number `x`.
    pub fn number(x: f64) -> KeyCell {
        // Within ±2^63, an integral number is the integer it equals; −0 is 0.
        if x.fract() == 0.0 && x.abs() < 9.2e18 {
            KeyCell::Int(x as i64)
        } else {
            KeyCell::Num(x.to_bits())
        }
    }

    /// The key `text` stands for where it is matched against `like` (a cell of the column it
    /// meets): a number where that is a number (`0.50` is 0.5; text that is no number stays
    /// text, and matches no number), truth where that is truth, else the text.
    pub fn read_as(text: &str, like: &KeyCell) -> KeyCell {
        let t = text.trim();
        match like {
            KeyCell::Int(_) | KeyCell::Num(_) => match t.parse::<f64>() {
                Ok(x) if !x.is_nan() => KeyCell::number(x),
                _ => KeyCell::Str(text.to_string()),
            },
            KeyCell::Bool(_) => match t {
                "true" => KeyCell::Bool(true),
                "false" => KeyCell::Bool(false),
                _ => KeyCell::Str(text.to_string()),
            },
            KeyCell::Str(_) | KeyCell::Missing => KeyCell::Str(text.to_string()),
        }
    }

    /// The keys of every row of column `c`, by this rule.
    pub fn column(c: &Column) -> Result<Vec<KeyCell>, String> {
        let v = load(c)?;
        Ok((0..v.len()).map(|r| KeyCell::of(&v, r)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row hashes alike, so groups are told apart only by comparing their cells: the
    /// groups must be those of real hashes.
    #[derive(Default)]
    struct Collide;
    impl std::hash::Hasher for Collide {
        fn finish(&self) -> u64 {
            7
        }
        fn write(&mut self, _: &[u8]) {}
    }

    fn hashed(keys: &[Vals], state: &impl std::hash::BuildHasher) -> Vec<Vec<usize>> {
        let n = keys.first().map_or(0, Vals::len);
        let groups = group_keys_hashed(n, keys.iter().map(Ok::<_, ()>), state).unwrap();
        groups
            .iter()
            .map(|g| g.iter().map(|&r| r as usize).collect())
            .collect()
    }

    #[test]
    fn groups_whose_hashes_collide_stay_apart() {
        let keys = [
            Vals::Float(vec![
                Some(1.0),
                Some(0.5),
                None,
                Some(-0.0),
                Some(0.5),
                Some(0.0),
            ]),
            Vals::Str(
                ["a", "b", "a", "a", "b", "a"]
                    .map(|s| Some(s.to_string()))
                    .to_vec(),
            ),
        ];
        let want = vec![vec![0], vec![1, 4], vec![2], vec![3, 5]];
        assert_eq!(group_rows(&keys), want);
        let collide = std::hash::BuildHasherDefault::<Collide>::default();
        assert_eq!(hashed(&keys, &collide), want);
        let ints = [Vals::Int(vec![Some(1), Some(2), Some(1)])];
        assert_eq!(hashed(&ints, &collide), [vec![0, 2], vec![1]]);
        // Three keys folded in: the pair ids of the first two meet the third's.
        let three = [
            Vals::Int(vec![Some(1), Some(1), Some(1), Some(2)]),
            Vals::Int(vec![Some(5), Some(5), Some(6), Some(5)]),
            Vals::Bool(vec![Some(true), Some(false), Some(true), Some(true)]),
        ];
        assert_eq!(hashed(&three, &collide), [[0], [1], [2], [3]]);
        assert_eq!(
            hashed(&three[..2], &collide),
            [vec![0, 1], vec![2], vec![3]]
        );
    }

    /// No key: one group of every row, none when there is no row.
    #[test]
    fn no_key_is_one_group_of_every_row() {
        let none = |n| group_keys(n, std::iter::empty::<Result<Vals, ()>>()).unwrap();
        assert_eq!(none(3).iter().collect::<Vec<_>>(), [&[0u32, 1, 2][..]]);
        assert_eq!(none(0).len(), 0);
    }
}
