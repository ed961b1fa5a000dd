//! Expressions over the columns of a frame, as `frame.derive` and `frame.group` write them:
//! `abs(noisy - count)`, `CASE WHEN eps < 1 THEN 'small' ELSE 'large' END`,
//! `quantile(abs_err, 0.9)`.
//!
//! `load.dataset`'s `where:` conditions are written in it too (each must be true for a row
//! to be kept).
//!
//! The text is SQL's expression syntax, read by `sqlparser` (the parser of DataFusion; without
//! its default features it adds one crate to the build) and evaluated here, column by column, on
//! the frame's values. Why not polars' own expressions or SQL: its `lazy` and `sql` features
//! add ~107 crates (an HTTP client among them) and overflowed the stack on a deep expression;
//! a parser of our own would be one more grammar to get right. What is evaluated is a small
//! typed tree of our own ([`Node`]), built from the parser's tree with every unsupported form
//! refused by name, so that the semantics below are ours and stated once:
//!
//! - **Types.** A column is an integer (any integer type, read as Int64), a number (Float32/64),
//!   text or a truth value. `+ - * %`, unary minus, `abs`, `least`, `greatest`, `floor`,
//!   `ceil`, `round(x)` and `coalesce` of integers are integers (an overflow of 64 bits is an
//!   error naming the row); `/` and every other function give numbers. A number literal
//!   without `.` or exponent is an integer if it fits 64 bits, a number otherwise.
//! - **Nulls** propagate: an operation on a missing value gives a missing value; `least` and
//!   `greatest` are missing if any argument is. `AND`, `OR`, `NOT` follow SQL's three-valued
//!   logic (`false AND null` is false), `CASE` treats a missing condition as false, and
//!   `x IS NULL` / `IS NOT NULL` test for it. `x IN (a, b)` is `x = a OR x = b` (so a
//!   missing `x` gives a missing value), `NOT IN` its negation.
//! - **Not a number.** A computed number that is not finite — division or `%` by zero,
//!   `sqrt(-1)`, `ln(0)`, an overflow of `exp` — is missing (null), as in SQLite, rather than
//!   an infinity that a CSV cell, a mean or a plot would carry on.
//! - **Aggregates** (`frame.group` only): `count(*)`, `count(x)` (values present), `sum`,
//!   `mean`/`avg`, `min`, `max`, `median`, `quantile(x, q)` (linear interpolation between
//!   order statistics, numpy's default), `std` and `var` (sample, n − 1). They skip missing
//!   values; an aggregate of no values is missing (`count`: 0). `sum`, `min`, `max` of integers
//!   are integers. Their arguments are expressions over rows; outside an aggregate an
//!   expression may name only the group's keys.
//! - **Hostile text.** At most [`MAX_CHARS`] characters, [`MAX_TOKENS`] tokens, [`MAX_NESTING`]
//!   levels of nesting (parentheses, calls, `CASE`; checked while parsing) and a tree at most
//!   [`MAX_DEPTH`] deep (a long chain of `+`): longer or deeper text is refused with its limit,
//!   never a stack overflow.
//!
//! By phase, as polars cuts its own (`polars-sql` → `polars-plan` → `polars-expr`): `syntax`
//! reads the text into the tree, `values` holds what an expression computes and the rules
//! combining values (types, missing values, keys), `eval` evaluates a tree over rows,
//! `aggregate` over groups. No stage kind is needed to test it (`tests.rs`).

mod aggregate;
mod eval;
mod syntax;
mod values;

use polars::prelude::DataFrame;

use eval::Env;
use syntax::{children, walk, Node};

pub(crate) use values::{group_keys, group_rows, load, Groups, KeyCell, Vals};

/// The longest expression read, in characters.
pub(crate) const MAX_CHARS: usize = 4000;
/// The most names, numbers, operators and punctuation an expression may hold.
pub(crate) const MAX_TOKENS: usize = 500;
/// How deeply parentheses, calls and `CASE` may nest.
pub(crate) const MAX_NESTING: usize = 40;
/// The parser's recursion limit (its default), a backstop behind [`MAX_NESTING`]:
/// `recursive-protection`, the feature that would grow its stack, is off (it adds crates).
pub(crate) const MAX_RECURSION: usize = 50;
/// How deep the tree of an expression may be (a chain of 100 `+` is 100 deep).
pub const MAX_DEPTH: usize = 200;

/// Where a part of an expression starts: line and character (1-based) inside its text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: u64,
    pub col: u64,
}

impl Pos {
    pub(super) fn of(span: sqlparser::tokenizer::Span) -> Self {
        Pos {
            line: span.start.line,
            col: span.start.column,
        }
    }
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            0 => Ok(()),
            1 => write!(f, "at character {}: ", self.col),
            l => write!(f, "at line {l}, character {}: ", self.col),
        }
    }
}

/// What an expression may contain: row-wise operations only, or aggregates too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Rows,
    Groups,
}

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Expr {
    node: Node,
}

impl Expr {
    /// Parses `text` and checks what can be checked without the data: every form, function
    /// and arity is supported, aggregates only where `mode` allows, limits of size and depth.
    pub fn parse(text: &str, mode: Mode) -> Result<Expr, String> {
        Ok(Expr {
            node: syntax::parse(text, mode)?,
        })
    }

    /// The columns it reads, distinct, in order of appearance.
    pub fn columns(&self) -> Vec<String> {
        let mut out = Vec::new();
        walk(&self.node, &mut |n| {
            if let Node::Col(c, _) = n {
                if !out.contains(c) {
                    out.push(c.clone());
                }
            }
        });
        out
    }

    /// The columns it reads outside aggregates (in `frame.group`: they must be keys), with
    /// where each is.
    pub(crate) fn columns_outside_aggregates(&self) -> Vec<(String, Pos)> {
        fn go(n: &Node, out: &mut Vec<(String, Pos)>) {
            match n {
                Node::Agg(..) => {}
                Node::Col(c, p) => out.push((c.clone(), *p)),
                other => children(other, &mut |c| go(c, out)),
            }
        }
        let mut out = Vec::new();
        go(&self.node, &mut out);
        out
    }

    /// Its values on every row of `frame`. Errors name where in the expression they arise.
    pub(crate) fn eval(&self, frame: &DataFrame) -> Result<Vals, String> {
        let env = Env {
            frame,
            n: frame.height(),
            groups: None,
        };
        eval::eval(&self.node, &env)
    }

    /// Its values per group: `keys` has one row per group (the key columns), `rows` the
    /// frame the groups' rows are taken from, `groups` each group's rows.
    pub(crate) fn eval_groups(
        &self,
        keys: &DataFrame,
        rows: &DataFrame,
        groups: &[Vec<usize>],
    ) -> Result<Vals, String> {
        let env = Env {
            frame: keys,
            n: groups.len(),
            groups: Some((rows, groups)),
        };
        eval::eval(&self.node, &env)
    }
}

#[cfg(test)]
mod tests;
