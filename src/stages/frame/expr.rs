//! Expressions over the columns of a frame, as `frame.derive` and `frame.group` write them:
//! `abs(noisy - count)`, `CASE WHEN eps < 1 THEN 'small' ELSE 'large' END`,
//! `quantile(abs_err, 0.9)`.
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
//!   `x IS NULL` / `IS NOT NULL` test for it.
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

use std::collections::HashMap;

use polars::prelude::{Column, DataFrame, DataType};
use sqlparser::ast::{self as sql, Spanned};
use sqlparser::dialect::GenericDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, Tokenizer};

/// The longest expression read, in characters.
pub const MAX_CHARS: usize = 4000;
/// The most names, numbers, operators and punctuation an expression may hold.
pub const MAX_TOKENS: usize = 500;
/// How deeply parentheses, calls and `CASE` may nest.
pub const MAX_NESTING: usize = 40;
/// The parser's recursion limit (its default), a backstop behind [`MAX_NESTING`]:
/// `recursive-protection`, the feature that would grow its stack, is off (it adds crates).
pub const MAX_RECURSION: usize = 50;
/// How deep the tree of an expression may be (a chain of 100 `+` is 100 deep).
pub const MAX_DEPTH: usize = 200;

/// Where a part of an expression starts: line and character (1-based) inside its text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: u64,
    pub col: u64,
}

impl Pos {
    fn of(span: sqlparser::tokenizer::Span) -> Self {
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
pub enum Mode {
    Rows,
    Groups,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl Bin {
    fn text(self) -> &'static str {
        match self {
            Bin::Add => "+",
            Bin::Sub => "-",
            Bin::Mul => "*",
            Bin::Div => "/",
            Bin::Rem => "%",
            Bin::Eq => "=",
            Bin::Ne => "<>",
            Bin::Lt => "<",
            Bin::Le => "<=",
            Bin::Gt => ">",
            Bin::Ge => ">=",
            Bin::And => "AND",
            Bin::Or => "OR",
        }
    }
}

/// Row-wise functions: name, least and most arguments (`None`: any number).
const FUNCTIONS: &[(&str, usize, Option<usize>)] = &[
    ("abs", 1, Some(1)),
    ("sqrt", 1, Some(1)),
    ("ln", 1, Some(1)),
    ("log", 1, Some(2)),
    ("log10", 1, Some(1)),
    ("log2", 1, Some(1)),
    ("exp", 1, Some(1)),
    ("pow", 2, Some(2)),
    ("power", 2, Some(2)),
    ("floor", 1, Some(1)),
    ("ceil", 1, Some(1)),
    ("round", 1, Some(2)),
    ("least", 2, None),
    ("greatest", 2, None),
    ("coalesce", 1, None),
];

/// Aggregates (in `frame.group`): name, least and most arguments.
const AGGREGATES: &[(&str, usize, Option<usize>)] = &[
    ("count", 1, Some(1)),
    ("sum", 1, Some(1)),
    ("mean", 1, Some(1)),
    ("avg", 1, Some(1)),
    ("min", 1, Some(1)),
    ("max", 1, Some(1)),
    ("median", 1, Some(1)),
    ("quantile", 2, Some(2)),
    ("std", 1, Some(1)),
    ("var", 1, Some(1)),
];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Agg {
    Count,
    Sum,
    Mean,
    Min,
    Max,
    Quantile(f64),
    Std,
    Var,
}

/// An expression, checked: what is evaluated.
#[derive(Clone, Debug, PartialEq)]
enum Node {
    Col(String, Pos),
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
    Null,
    Neg(Box<Node>, Pos),
    Not(Box<Node>, Pos),
    Bin(Bin, Box<Node>, Box<Node>, Pos),
    /// A row-wise function (its name from [`FUNCTIONS`]).
    Call(&'static str, Vec<Node>, Pos),
    Case {
        operand: Option<Box<Node>>,
        whens: Vec<(Node, Node)>,
        otherwise: Option<Box<Node>>,
        pos: Pos,
    },
    IsNull(Box<Node>, bool),
    /// An aggregate; `None` is `count(*)`.
    Agg(Agg, Option<Box<Node>>, Pos),
}

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    node: Node,
}

/// The values of an expression over a frame's rows (or groups).
#[derive(Clone, Debug, PartialEq)]
pub enum Vals {
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
    Bool(Vec<Option<bool>>),
    Str(Vec<Option<String>>),
    /// All missing, of no type yet (`NULL`, a column of nothing but missing cells).
    Null(usize),
}

impl Vals {
    fn len(&self) -> usize {
        match self {
            Vals::Int(v) => v.len(),
            Vals::Float(v) => v.len(),
            Vals::Bool(v) => v.len(),
            Vals::Str(v) => v.len(),
            Vals::Null(n) => *n,
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Vals::Int(_) => "an integer",
            Vals::Float(_) => "a number",
            Vals::Bool(_) => "a truth value",
            Vals::Str(_) => "text",
            Vals::Null(_) => "null",
        }
    }

    /// The values as a frame column: Int64, Float64, Boolean or String (all-missing: Float64).
    pub fn into_column(self, name: &str) -> Column {
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

/// Why `text` is not an expression: the parser's message with its position said as
/// "at character N", or the nesting limit.
fn parse_error(e: ParserError) -> String {
    match e {
        ParserError::RecursionLimitExceeded => format!(
            "the expression nests deeper than the limit of {MAX_RECURSION} levels of operators (NOT NOT …, - - …), parentheses, calls and CASE"
        ),
        ParserError::TokenizerError(m) | ParserError::ParserError(m) => {
            // sqlparser ends its messages with " at Line: L, Column: C".
            match m.rsplit_once(" at Line: ") {
                Some((what, at)) => {
                    let mut parts = at.split(", Column: ");
                    let line = parts.next().and_then(|l| l.trim().parse::<u64>().ok());
                    let col = parts.next().and_then(|c| c.trim().parse::<u64>().ok());
                    match (line, col) {
                        (Some(line), Some(col)) => {
                            format!("{}cannot read the expression: {what}", Pos { line, col })
                        }
                        _ => format!("cannot read the expression: {m}"),
                    }
                }
                None => format!("cannot read the expression: {m}"),
            }
        }
    }
}

impl Expr {
    /// Parses `text` and checks what can be checked without the data: every form, function
    /// and arity is supported, aggregates only where `mode` allows, limits of size and depth.
    pub fn parse(text: &str, mode: Mode) -> Result<Expr, String> {
        let chars = text.chars().count();
        if chars > MAX_CHARS {
            return Err(format!(
                "the expression is {chars} characters long, more than the limit of {MAX_CHARS}"
            ));
        }
        if text.trim().is_empty() {
            return Err("the expression is empty".into());
        }
        let dialect = GenericDialect {};
        let tokens = Tokenizer::new(&dialect, text)
            .tokenize_with_location()
            .map_err(|e| parse_error(ParserError::TokenizerError(e.to_string())))?;
        // Bounds the depth of every tree below (a chain of `+` is parsed by a loop, not by
        // recursion, so the parser's limit does not bound it), hence of the parser's own
        // recursive walks over it (spans, printing, dropping).
        let count = tokens
            .iter()
            .filter(|t| !matches!(t.token, Token::Whitespace(_)))
            .count();
        if count > MAX_TOKENS {
            return Err(format!(
                "the expression has {count} names, numbers and operators, more than the limit of {MAX_TOKENS}"
            ));
        }
        // Parentheses (calls too), CASE … END and runs of prefix operators (`NOT NOT x`,
        // `- - x`) nest; counted here, before the parser recurses into them, so that the limit
        // and its message do not depend on how the parser spends its recursion (it gives up on
        // some forms at its limit without saying so).
        let word = |t: &Token, k: Keyword| matches!(t, Token::Word(w) if w.quote_style.is_none() && w.keyword == k);
        let mut nesting = 0usize;
        let mut prefix_run = 0usize;
        // Whether the token before ends a value (a name, a literal, `)`, END): an operator
        // after it is binary, not a prefix.
        let mut after_value = false;
        for t in tokens
            .iter()
            .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        {
            let tok = &t.token;
            let prefix = !after_value
                && (matches!(tok, Token::Minus | Token::Plus) || word(tok, Keyword::NOT));
            if matches!(tok, Token::LParen) || word(tok, Keyword::CASE) {
                nesting += 1;
            } else if matches!(tok, Token::RParen) || word(tok, Keyword::END) {
                nesting = nesting.saturating_sub(1);
            }
            after_value = match tok {
                Token::Number(..) | Token::SingleQuotedString(_) | Token::RParen => true,
                Token::Word(w) => {
                    w.quote_style.is_some()
                        || !matches!(
                            w.keyword,
                            Keyword::AND
                                | Keyword::OR
                                | Keyword::NOT
                                | Keyword::CASE
                                | Keyword::WHEN
                                | Keyword::THEN
                                | Keyword::ELSE
                                | Keyword::IS
                        )
                }
                _ => false,
            };
            // A prefix operator's operand ends no sooner than the next value: `(NOT (NOT x`
            // nests both operators and both parentheses.
            if prefix {
                prefix_run += 1;
            } else if after_value {
                prefix_run = 0;
            }
            if nesting + prefix_run > MAX_NESTING {
                return Err(format!(
                    "{}the expression nests deeper than the limit of {MAX_NESTING} levels (parentheses, function calls, CASE, NOT, unary minus)",
                    Pos::of(t.span)
                ));
            }
        }
        let mut parser = Parser::new(&dialect)
            .with_recursion_limit(MAX_RECURSION)
            .with_tokens_with_locations(tokens);
        let e = parser.parse_expr().map_err(parse_error)?;
        let next = parser.peek_token();
        if next.token != Token::EOF {
            return Err(format!(
                "{}unexpected `{}` after the end of the expression",
                Pos::of(next.span),
                next.token
            ));
        }
        let node = convert(&e, mode, false, 0)?;
        Ok(Expr { node })
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
    pub fn columns_outside_aggregates(&self) -> Vec<(String, Pos)> {
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
    pub fn eval(&self, frame: &DataFrame) -> Result<Vals, String> {
        let env = Env {
            frame,
            n: frame.height(),
            groups: None,
        };
        eval(&self.node, &env)
    }

    /// Its values per group: `keys` has one row per group (the key columns), `rows` the
    /// frame the groups' rows are taken from, `groups` each group's rows.
    pub fn eval_groups(
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
        eval(&self.node, &env)
    }
}

/// Calls `f` on every node of the tree below `n` and `n` itself.
fn walk(n: &Node, f: &mut dyn FnMut(&Node)) {
    f(n);
    children(n, &mut |c| walk(c, f));
}

fn children(n: &Node, f: &mut dyn FnMut(&Node)) {
    match n {
        Node::Col(..)
        | Node::Int(_)
        | Node::Float(_)
        | Node::Str(_)
        | Node::Bool(_)
        | Node::Null => {}
        Node::Neg(a, _) | Node::Not(a, _) | Node::IsNull(a, _) => f(a),
        Node::Bin(_, a, b, _) => {
            f(a);
            f(b);
        }
        Node::Call(_, args, _) => args.iter().for_each(f),
        Node::Case {
            operand,
            whens,
            otherwise,
            ..
        } => {
            if let Some(o) = operand {
                f(o);
            }
            for (w, t) in whens {
                f(w);
                f(t);
            }
            if let Some(o) = otherwise {
                f(o);
            }
        }
        Node::Agg(_, a, _) => {
            if let Some(a) = a {
                f(a);
            }
        }
    }
}

/// The parser's tree as ours: every form it does not know refused by name, at its place.
fn convert(e: &sql::Expr, mode: Mode, in_agg: bool, depth: usize) -> Result<Node, String> {
    let pos = Pos::of(e.span());
    if depth > MAX_DEPTH {
        return Err(format!(
            "{pos}the expression is deeper than the limit of {MAX_DEPTH} operations nested in one another"
        ));
    }
    let sub = |x: &sql::Expr| convert(x, mode, in_agg, depth + 1).map(Box::new);
    Ok(match e {
        sql::Expr::Identifier(id) => Node::Col(id.value.clone(), Pos::of(id.span)),
        sql::Expr::CompoundIdentifier(ids) => {
            let name: Vec<&str> = ids.iter().map(|i| i.value.as_str()).collect();
            return Err(format!(
                "{pos}`{}` is not a column name: quote a name with a dot in double quotes (\"{}\")",
                name.join("."),
                name.join(".")
            ));
        }
        sql::Expr::Value(v) => literal(&v.value, pos)?,
        sql::Expr::Nested(x) => convert(x, mode, in_agg, depth + 1)?,
        sql::Expr::UnaryOp { op, expr } => match op {
            sql::UnaryOperator::Minus => match &**expr {
                // A negative number is a literal: `-9223372036854775808` fits 64 bits, the
                // positive number it negates does not.
                sql::Expr::Value(sql::ValueWithSpan {
                    value: sql::Value::Number(s, _),
                    ..
                }) => literal(&sql::Value::Number(format!("-{s}"), false), pos)?,
                _ => match convert(expr, mode, in_agg, depth + 1)? {
                    Node::Float(x) => Node::Float(-x),
                    other => Node::Neg(Box::new(other), pos),
                },
            },
            sql::UnaryOperator::Plus => convert(expr, mode, in_agg, depth + 1)?,
            sql::UnaryOperator::Not => Node::Not(sub(expr)?, pos),
            other => return Err(format!("{pos}the operator `{other}` is not supported")),
        },
        sql::Expr::BinaryOp { left, op, right } => {
            use sql::BinaryOperator as B;
            let b = match op {
                B::Plus => Bin::Add,
                B::Minus => Bin::Sub,
                B::Multiply => Bin::Mul,
                B::Divide => Bin::Div,
                B::Modulo => Bin::Rem,
                B::Eq => Bin::Eq,
                B::NotEq => Bin::Ne,
                B::Lt => Bin::Lt,
                B::LtEq => Bin::Le,
                B::Gt => Bin::Gt,
                B::GtEq => Bin::Ge,
                B::And => Bin::And,
                B::Or => Bin::Or,
                other => {
                    return Err(format!(
                        "{pos}the operator `{other}` is not supported (operators: + - * / % = <> != < <= > >= AND OR NOT; powers: pow(x, y))"
                    ))
                }
            };
            Node::Bin(b, sub(left)?, sub(right)?, pos)
        }
        sql::Expr::IsNull(x) => Node::IsNull(sub(x)?, false),
        sql::Expr::IsNotNull(x) => Node::IsNull(sub(x)?, true),
        sql::Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => Node::Case {
            operand: operand.as_deref().map(sub).transpose()?,
            whens: conditions
                .iter()
                .map(|c| Ok((*sub(&c.condition)?, *sub(&c.result)?)))
                .collect::<Result<_, String>>()?,
            otherwise: else_result.as_deref().map(sub).transpose()?,
            pos,
        },
        sql::Expr::Function(f) => function(f, mode, in_agg, depth, pos)?,
        // The parser reads floor(x) and ceil(x) as forms of their own.
        sql::Expr::Floor {
            expr,
            field: sql::CeilFloorKind::DateTimeField(sql::DateTimeField::NoDateTime),
        } => Node::Call("floor", vec![*sub(expr)?], pos),
        sql::Expr::Ceil {
            expr,
            field: sql::CeilFloorKind::DateTimeField(sql::DateTimeField::NoDateTime),
        } => Node::Call("ceil", vec![*sub(expr)?], pos),
        other => {
            return Err(format!(
                "{pos}`{other}` is not supported: an expression is made of column names, numbers, 'text', TRUE/FALSE/NULL, operators, functions ({}) and CASE WHEN … THEN … ELSE … END",
                supported(mode)
            ))
        }
    })
}

/// The functions `mode` allows, for messages.
fn supported(mode: Mode) -> String {
    let mut names: Vec<&str> = FUNCTIONS.iter().map(|f| f.0).collect();
    if mode == Mode::Groups {
        names.extend(AGGREGATES.iter().map(|f| f.0));
    }
    names.join(", ")
}

fn literal(v: &sql::Value, pos: Pos) -> Result<Node, String> {
    Ok(match v {
        sql::Value::Number(s, _) => {
            if let Ok(i) = s.parse::<i64>() {
                Node::Int(i)
            } else {
                match s.parse::<f64>() {
                    Ok(x) if x.is_finite() => Node::Float(x),
                    _ => {
                        return Err(format!(
                            "{pos}the number {} is beyond the largest a number can hold (1.8e308)",
                            crate::text::brief(s, 40)
                        ))
                    }
                }
            }
        }
        sql::Value::SingleQuotedString(s) => Node::Str(s.clone()),
        sql::Value::Boolean(b) => Node::Bool(*b),
        sql::Value::Null => Node::Null,
        other => {
            return Err(format!(
                "{pos}the literal `{other}` is not supported: text is written in single quotes ('laplace'), a column name with odd characters in double quotes (\"noisy count\")"
            ))
        }
    })
}

fn function(
    f: &sql::Function,
    mode: Mode,
    in_agg: bool,
    depth: usize,
    pos: Pos,
) -> Result<Node, String> {
    let name = match f.name.0.as_slice() {
        [sql::ObjectNamePart::Identifier(id)] => id.value.to_lowercase(),
        _ => return Err(format!("{pos}`{}` is not a function", f.name)),
    };
    let row = FUNCTIONS.iter().find(|x| x.0 == name);
    let agg = AGGREGATES.iter().find(|x| x.0 == name);
    let Some(&(fname, least, most)) = row.or(agg) else {
        let known: Vec<&str> = FUNCTIONS
            .iter()
            .chain(if mode == Mode::Groups {
                AGGREGATES
            } else {
                &[]
            })
            .map(|x| x.0)
            .collect();
        let hint = crate::text::suggest(&name, known.iter().copied())
            .map(|s| format!("did you mean `{s}`? "))
            .unwrap_or_default();
        return Err(format!(
            "{pos}no function `{name}`; {hint}(functions: {})",
            supported(mode)
        ));
    };
    if agg.is_some() {
        if mode == Mode::Rows {
            let instead = match fname {
                "min" => " (the smaller of values in a row: least(a, b))",
                "max" => " (the larger of values in a row: greatest(a, b))",
                _ => "",
            };
            return Err(format!(
                "{pos}`{fname}` is an aggregate, computed over groups of rows by frame.group, not row by row{instead}"
            ));
        }
        if in_agg {
            return Err(format!(
                "{pos}`{fname}` inside another aggregate: aggregates do not nest"
            ));
        }
    }
    let sql::FunctionArguments::List(list) = &f.args else {
        return Err(format!("{pos}`{fname}` needs its arguments in parentheses"));
    };
    if f.over.is_some()
        || f.filter.is_some()
        || f.null_treatment.is_some()
        || !f.within_group.is_empty()
        || list.duplicate_treatment.is_some()
        || !list.clauses.is_empty()
        || !matches!(f.parameters, sql::FunctionArguments::None)
    {
        return Err(format!(
            "{pos}`{fname}(…)` takes plain arguments only (no DISTINCT, ORDER BY, FILTER or OVER)"
        ));
    }
    let n = list.args.len();
    if n < least || most.is_some_and(|m| n > m) {
        let wants = match most {
            Some(m) if m == least => format!("{least}"),
            Some(m) => format!("{least} to {m}"),
            None => format!("at least {least}"),
        };
        return Err(format!(
            "{pos}`{fname}` takes {wants} argument{}, not {n}",
            if wants == "1" { "" } else { "s" }
        ));
    }
    let mut args: Vec<Option<Node>> = Vec::with_capacity(n);
    for a in &list.args {
        let sql::FunctionArg::Unnamed(a) = a else {
            return Err(format!(
                "{pos}`{fname}` takes its arguments by position, not by name"
            ));
        };
        args.push(match a {
            sql::FunctionArgExpr::Expr(x) => {
                Some(convert(x, mode, in_agg || agg.is_some(), depth + 1)?)
            }
            sql::FunctionArgExpr::Wildcard if fname == "count" => None,
            _ => return Err(format!("{pos}`*` is an argument of count(*) only")),
        });
    }
    if agg.is_none() {
        return Ok(Node::Call(
            fname,
            args.into_iter().map(|a| a.unwrap_or(Node::Null)).collect(),
            pos,
        ));
    }
    let mut args = args.into_iter();
    let arg = args.next().flatten().map(Box::new);
    let kind = match fname {
        "count" => Agg::Count,
        "sum" => Agg::Sum,
        "mean" | "avg" => Agg::Mean,
        "min" => Agg::Min,
        "max" => Agg::Max,
        "median" => Agg::Quantile(0.5),
        "std" => Agg::Std,
        "var" => Agg::Var,
        _ => {
            let q = match args.next().flatten() {
                Some(Node::Float(q)) => q,
                Some(Node::Int(q)) => q as f64,
                _ => {
                    return Err(format!(
                        "{pos}the level of `quantile(x, q)` is a number in [0, 1] written in the expression (0.9)"
                    ))
                }
            };
            if !(0.0..=1.0).contains(&q) {
                return Err(format!(
                    "{pos}the level of `quantile(x, q)` is {q}, not in [0, 1]"
                ));
            }
            Agg::Quantile(q)
        }
    };
    Ok(Node::Agg(kind, arg, pos))
}

/// What an expression is evaluated on: a frame's rows, or (aggregating) one row per group of
/// another frame's rows.
struct Env<'a> {
    frame: &'a DataFrame,
    n: usize,
    groups: Option<(&'a DataFrame, &'a [Vec<usize>])>,
}

impl Env<'_> {
    fn column(&self, frame: &DataFrame, name: &str, pos: Pos) -> Result<Vals, String> {
        match frame.column(name) {
            Ok(c) => load(c).map_err(|m| format!("{pos}{m}")),
            Err(_) => {
                let names: Vec<&str> = frame
                    .get_column_names()
                    .iter()
                    .map(|c| c.as_str())
                    .collect();
                if self.groups.is_some() {
                    return Err(format!(
                        "{pos}`{name}` is neither a `by` column nor inside an aggregate (sum({name}), mean({name}) …): outside aggregates an expression names the group's keys only (keys: {})",
                        names.join(", ")
                    ));
                }
                Err(format!("{pos}{}", no_column(name, &names)))
            }
        }
    }
}

/// "no column `c` in its input (columns: …); did you mean `d`?"
pub fn no_column(name: &str, available: &[&str]) -> String {
    let hint = crate::text::suggest(name, available.iter().copied())
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default();
    format!(
        "no column `{name}` in its input (columns: {}){hint}",
        available.join(", ")
    )
}

fn eval(n: &Node, env: &Env) -> Result<Vals, String> {
    let len = env.n;
    Ok(match n {
        Node::Col(c, p) => env.column(env.frame, c, *p)?,
        Node::Int(i) => Vals::Int(vec![Some(*i); len]),
        Node::Float(x) => Vals::Float(vec![Some(*x); len]),
        Node::Str(s) => Vals::Str(vec![Some(s.clone()); len]),
        Node::Bool(b) => Vals::Bool(vec![Some(*b); len]),
        Node::Null => Vals::Null(len),
        Node::Neg(a, p) => match numeric(eval(a, env)?, *p, "-")? {
            Num::Int(v) => Vals::Int(checked(&v, *p, "-x", |x| x.checked_neg())?),
            Num::Float(v) => Vals::Float(v.iter().map(|x| x.map(|x| -x)).collect()),
        },
        Node::Not(a, p) => Vals::Bool(
            truth(eval(a, env)?, *p, "NOT")?
                .iter()
                .map(|x| x.map(|b| !b))
                .collect(),
        ),
        Node::IsNull(a, negated) => {
            let v = eval(a, env)?;
            Vals::Bool(
                (0..v.len())
                    .map(|i| Some(is_null(&v, i) != *negated))
                    .collect(),
            )
        }
        Node::Bin(op, a, b, p) => binary(*op, eval(a, env)?, eval(b, env)?, *p)?,
        Node::Call(f, args, p) => {
            let vals = args
                .iter()
                .map(|a| eval(a, env))
                .collect::<Result<Vec<_>, _>>()?;
            call(f, vals, *p, len)?
        }
        Node::Case {
            operand,
            whens,
            otherwise,
            pos,
        } => {
            let operand = operand.as_ref().map(|o| eval(o, env)).transpose()?;
            let mut conds = Vec::with_capacity(whens.len());
            let mut results = Vec::with_capacity(whens.len() + 1);
            for (w, t) in whens {
                let w = eval(w, env)?;
                let cond = match &operand {
                    Some(o) => binary(Bin::Eq, o.clone(), w, *pos)?,
                    None => w,
                };
                conds.push(truth(cond, *pos, "WHEN")?);
                results.push(eval(t, env)?);
            }
            results.push(match otherwise {
                Some(o) => eval(o, env)?,
                None => Vals::Null(len),
            });
            let results = unify(results, *pos, "the branches of CASE")?;
            let pick = (0..len).map(|i| {
                conds
                    .iter()
                    .position(|c| c[i] == Some(true))
                    .unwrap_or(conds.len())
            });
            let rows: Vec<usize> = pick.collect();
            gather(&results, &rows)
        }
        Node::Agg(kind, arg, p) => {
            let Some((rows, groups)) = env.groups else {
                return Err(format!("{p}aggregates are computed by frame.group"));
            };
            let inner = Env {
                frame: rows,
                n: rows.height(),
                groups: None,
            };
            let vals = match arg {
                Some(a) => Some(eval(a, &inner)?),
                None => None,
            };
            aggregate(*kind, vals.as_ref(), groups, *p)?
        }
    })
}

/// Row `i` of the chosen result: `rows[i]` names which of `results` (all of one type) it
/// comes from.
fn gather(results: &[Vals], rows: &[usize]) -> Vals {
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

fn is_null(v: &Vals, i: usize) -> bool {
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
fn unify(vals: Vec<Vals>, pos: Pos, what: &str) -> Result<Vec<Vals>, String> {
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

enum Num {
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
}

impl Num {
    fn floats(self) -> Vec<Option<f64>> {
        match self {
            Num::Int(v) => v.iter().map(|x| x.map(|x| x as f64)).collect(),
            Num::Float(v) => v,
        }
    }
}

/// `v` as numbers, or an error naming the operation that needs them.
fn numeric(v: Vals, pos: Pos, what: &str) -> Result<Num, String> {
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

fn truth(v: Vals, pos: Pos, what: &str) -> Result<Vec<Option<bool>>, String> {
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
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// `f` on each present integer; `None` from `f` is an overflow, an error naming the row.
fn checked(
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

fn zip_with<A: Copy, B>(
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

fn binary(op: Bin, a: Vals, b: Vals, pos: Pos) -> Result<Vals, String> {
    use std::cmp::Ordering;
    match op {
        Bin::And | Bin::Or => {
            let (x, y) = (truth(a, pos, op.text())?, truth(b, pos, op.text())?);
            // SQL's three-valued logic: a known false (AND) or true (OR) decides.
            let decides = op == Bin::Or;
            Ok(Vals::Bool(
                x.iter()
                    .zip(&y)
                    .map(|(x, y)| match (x, y) {
                        (Some(v), _) | (_, Some(v)) if *v == decides => Some(decides),
                        (Some(_), Some(_)) => Some(!decides),
                        _ => None,
                    })
                    .collect(),
            ))
        }
        Bin::Eq | Bin::Ne | Bin::Lt | Bin::Le | Bin::Gt | Bin::Ge => {
            let holds = move |o: Ordering| match op {
                Bin::Eq => o == Ordering::Equal,
                Bin::Ne => o != Ordering::Equal,
                Bin::Lt => o == Ordering::Less,
                Bin::Le => o != Ordering::Greater,
                Bin::Gt => o == Ordering::Greater,
                _ => o != Ordering::Less,
            };
            let n = a.len();
            Ok(Vals::Bool(match (a, b) {
                (Vals::Null(_), _) | (_, Vals::Null(_)) => vec![None; n],
                (Vals::Int(x), Vals::Int(y)) => zip_with(&x, &y, |x, y| Some(holds(x.cmp(&y)))),
                (x @ (Vals::Int(_) | Vals::Float(_)), y @ (Vals::Int(_) | Vals::Float(_))) => {
                    let x = numeric(x, pos, op.text())?.floats();
                    let y = numeric(y, pos, op.text())?.floats();
                    zip_with(&x, &y, |x, y| x.partial_cmp(&y).map(holds))
                }
                (Vals::Str(x), Vals::Str(y)) => x
                    .iter()
                    .zip(&y)
                    .map(|(x, y)| Some(holds(x.as_ref()?.cmp(y.as_ref()?))))
                    .collect(),
                (Vals::Bool(x), Vals::Bool(y)) => zip_with(&x, &y, |x, y| Some(holds(x.cmp(&y)))),
                (x, y) => {
                    return Err(format!(
                        "{pos}`{}` compares {} with {}: compare numbers with numbers, text with text ('laplace')",
                        op.text(),
                        x.type_name(),
                        y.type_name()
                    ))
                }
            }))
        }
        Bin::Add | Bin::Sub | Bin::Mul | Bin::Div | Bin::Rem => {
            let sym = op.text();
            let (x, y) = (numeric(a, pos, sym)?, numeric(b, pos, sym)?);
            Ok(match (op, x, y) {
                (Bin::Div, x, y) => {
                    Vals::Float(zip_with(&x.floats(), &y.floats(), |x, y| finite(x / y)))
                }
                (_, Num::Int(x), Num::Int(y)) => {
                    let mut out = Vec::with_capacity(x.len());
                    for (i, (a, b)) in x.iter().zip(&y).enumerate() {
                        let (Some(a), Some(b)) = (*a, *b) else {
                            out.push(None);
                            continue;
                        };
                        let r = match op {
                            Bin::Add => a.checked_add(b),
                            Bin::Sub => a.checked_sub(b),
                            Bin::Mul => a.checked_mul(b),
                            // By zero: missing, as a number's; MIN % -1 is 0.
                            _ if b == 0 => {
                                out.push(None);
                                continue;
                            }
                            _ => Some(a.wrapping_rem(b)),
                        };
                        out.push(Some(r.ok_or_else(|| {
                            format!(
                                "{pos}`{a} {sym} {b}` overflows 64-bit integers at row {}",
                                i + 1
                            )
                        })?));
                    }
                    Vals::Int(out)
                }
                (_, x, y) => Vals::Float(zip_with(&x.floats(), &y.floats(), |a, b| {
                    finite(match op {
                        Bin::Add => a + b,
                        Bin::Sub => a - b,
                        Bin::Mul => a * b,
                        _ => a % b,
                    })
                })),
            })
        }
    }
}

fn call(f: &str, args: Vec<Vals>, pos: Pos, len: usize) -> Result<Vals, String> {
    let float1 = |args: Vec<Vals>, g: fn(f64) -> f64| -> Result<Vals, String> {
        let x = numeric(args.into_iter().next().unwrap_or(Vals::Null(len)), pos, f)?;
        Ok(Vals::Float(
            x.floats()
                .iter()
                .map(|x| x.and_then(|x| finite(g(x))))
                .collect(),
        ))
    };
    match f {
        "abs" => match numeric(args.into_iter().next().unwrap_or(Vals::Null(len)), pos, f)? {
            Num::Int(v) => Ok(Vals::Int(checked(&v, pos, "abs", i64::checked_abs)?)),
            Num::Float(v) => Ok(Vals::Float(v.iter().map(|x| x.map(f64::abs)).collect())),
        },
        "floor" | "ceil" | "round" if args.len() == 1 && matches!(args[0], Vals::Int(_)) => {
            Ok(args.into_iter().next().unwrap_or(Vals::Null(len)))
        }
        "sqrt" => float1(args, f64::sqrt),
        "ln" => float1(args, f64::ln),
        "log" if args.len() == 1 => float1(args, f64::log10),
        "log10" => float1(args, f64::log10),
        "log2" => float1(args, f64::log2),
        "exp" => float1(args, f64::exp),
        "floor" => float1(args, f64::floor),
        "ceil" => float1(args, f64::ceil),
        "round" if args.len() == 1 => float1(args, f64::round),
        "log" | "pow" | "power" | "round" => {
            let mut it = args.into_iter();
            let x = numeric(it.next().unwrap_or(Vals::Null(len)), pos, f)?.floats();
            let y = numeric(it.next().unwrap_or(Vals::Null(len)), pos, f)?.floats();
            Ok(Vals::Float(zip_with(&x, &y, |x, y| {
                finite(match f {
                    // log(b, x), as PostgreSQL writes it.
                    "log" => y.ln() / x.ln(),
                    "round" => {
                        let scale = 10f64.powf(y.round());
                        (x * scale).round() / scale
                    }
                    _ => x.powf(y),
                })
            })))
        }
        "least" | "greatest" => {
            let want = if f == "least" {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Greater
            };
            let vals = unify(args, pos, &format!("the arguments of `{f}`"))?;
            let pick = |cmp: &dyn Fn(usize, usize, usize) -> Option<std::cmp::Ordering>| {
                (0..len)
                    .map(|i| {
                        let mut best = 0;
                        for k in 1..vals.len() {
                            match cmp(k, best, i) {
                                None => return None,
                                Some(o) if o == want => best = k,
                                Some(_) => {}
                            }
                        }
                        // A missing value in any argument (the first too) makes it missing.
                        if vals.iter().any(|v| is_null(v, i)) {
                            None
                        } else {
                            Some(best)
                        }
                    })
                    .collect::<Vec<_>>()
            };
            let chosen = match &vals[0] {
                Vals::Int(_) => pick(&|k, b, i| match (&vals[k], &vals[b]) {
                    (Vals::Int(x), Vals::Int(y)) => Some(x[i]?.cmp(&y[i]?)),
                    _ => None,
                }),
                Vals::Float(_) => pick(&|k, b, i| match (&vals[k], &vals[b]) {
                    (Vals::Float(x), Vals::Float(y)) => x[i]?.partial_cmp(&y[i]?),
                    _ => None,
                }),
                Vals::Str(_) => pick(&|k, b, i| match (&vals[k], &vals[b]) {
                    (Vals::Str(x), Vals::Str(y)) => Some(x[i].as_ref()?.cmp(y[i].as_ref()?)),
                    _ => None,
                }),
                Vals::Null(_) => return Ok(Vals::Null(len)),
                Vals::Bool(_) => {
                    return Err(format!(
                        "{pos}`{f}` compares numbers or text, not truth values"
                    ))
                }
            };
            // Rows with a missing choice get an all-missing source: one past the values.
            let mut vals = vals;
            vals.push(match &vals[0] {
                Vals::Int(_) => Vals::Int(vec![None; len]),
                Vals::Float(_) => Vals::Float(vec![None; len]),
                _ => Vals::Str(vec![None; len]),
            });
            let rows: Vec<usize> = chosen.iter().map(|c| c.unwrap_or(vals.len() - 1)).collect();
            Ok(gather(&vals, &rows))
        }
        "coalesce" => {
            let vals = unify(args, pos, "the arguments of `coalesce`")?;
            let rows: Vec<usize> = (0..len)
                .map(|i| {
                    vals.iter()
                        .position(|v| !is_null(v, i))
                        .unwrap_or(vals.len() - 1)
                })
                .collect();
            Ok(gather(&vals, &rows))
        }
        other => Err(format!("{pos}no function `{other}`")),
    }
}

/// One value per group of `kind` over `vals` (`None`: `count(*)`).
fn aggregate(
    kind: Agg,
    vals: Option<&Vals>,
    groups: &[Vec<usize>],
    pos: Pos,
) -> Result<Vals, String> {
    let Some(vals) = vals else {
        return Ok(Vals::Int(
            groups.iter().map(|g| Some(g.len() as i64)).collect(),
        ));
    };
    let name = match kind {
        Agg::Count => "count",
        Agg::Sum => "sum",
        Agg::Mean => "mean",
        Agg::Min => "min",
        Agg::Max => "max",
        Agg::Quantile(_) => "quantile",
        Agg::Std => "std",
        Agg::Var => "var",
    };
    if kind == Agg::Count {
        return Ok(Vals::Int(
            groups
                .iter()
                .map(|g| Some(g.iter().filter(|&&r| !is_null(vals, r)).count() as i64))
                .collect(),
        ));
    }
    // Min and max of text: the first and last in byte order.
    if let (Agg::Min | Agg::Max, Vals::Str(v)) = (kind, vals) {
        return Ok(Vals::Str(
            groups
                .iter()
                .map(|g| {
                    let present = g.iter().filter_map(|&r| v[r].as_ref());
                    if kind == Agg::Min {
                        present.min().cloned()
                    } else {
                        present.max().cloned()
                    }
                })
                .collect(),
        ));
    }
    match (kind, numeric(vals.clone(), pos, name)?) {
        (Agg::Sum | Agg::Min | Agg::Max, Num::Int(v)) => {
            let mut out = Vec::with_capacity(groups.len());
            for g in groups {
                let mut present = g.iter().filter_map(|&r| v[r]);
                let Some(first) = present.next() else {
                    out.push(None);
                    continue;
                };
                let mut acc = Some(first);
                for x in present {
                    acc = match kind {
                        Agg::Sum => acc.and_then(|a| a.checked_add(x)),
                        Agg::Min => acc.map(|a| a.min(x)),
                        _ => acc.map(|a| a.max(x)),
                    };
                }
                out.push(Some(acc.ok_or_else(|| {
                    format!("{pos}`sum` overflows 64-bit integers")
                })?));
            }
            Ok(Vals::Int(out))
        }
        (_, num) => {
            let v = num.floats();
            Ok(Vals::Float(
                groups
                    .iter()
                    .map(|g| {
                        let mut xs: Vec<f64> = g
                            .iter()
                            .filter_map(|&r| v[r])
                            .filter(|x| !x.is_nan())
                            .collect();
                        if xs.is_empty() {
                            return None;
                        }
                        let n = xs.len() as f64;
                        let mean = xs.iter().sum::<f64>() / n;
                        let var = || {
                            (xs.len() > 1).then(|| {
                                xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
                            })
                        };
                        finite(match kind {
                            Agg::Sum => xs.iter().sum(),
                            Agg::Mean => mean,
                            Agg::Min => xs.iter().copied().fold(f64::INFINITY, f64::min),
                            Agg::Max => xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                            Agg::Var => var()?,
                            Agg::Std => var()?.sqrt(),
                            Agg::Quantile(q) => {
                                xs.sort_by(f64::total_cmp);
                                crate::mech::stats::quantile_sorted(&xs, q)
                            }
                            Agg::Count => n,
                        })
                    })
                    .collect(),
            ))
        }
    }
}

/// Row indices grouped by equal values of `keys` (first-seen order): numbers equal as numbers
/// (an integer 1 and a number 1.0 are one key), a missing key is a group of its own.
pub fn group_rows(keys: &[Vals]) -> Vec<Vec<usize>> {
    let n = keys.first().map_or(0, Vals::len);
    let mut index: HashMap<Vec<KeyCell>, usize> = HashMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for r in 0..n {
        let key: Vec<KeyCell> = keys.iter().map(|k| KeyCell::of(k, r)).collect();
        let g = *index.entry(key).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(r);
    }
    groups
}

/// One cell of a key, hashable: an integer (or a number with an integer's value: 1 and 1.0
/// are one key), another number by its bits (−0 is 0), text, truth, missing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KeyCell {
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
            Vals::Float(v) => v[r].map_or(KeyCell::Missing, |x| {
                // Within ±2^63, an integral number is the integer it equals.
                if x.fract() == 0.0 && x.abs() < 9.2e18 {
                    KeyCell::Int(x as i64)
                } else {
                    KeyCell::Num(x.to_bits())
                }
            }),
            Vals::Str(v) => v[r].clone().map_or(KeyCell::Missing, KeyCell::Str),
            Vals::Bool(v) => v[r].map_or(KeyCell::Missing, KeyCell::Bool),
            Vals::Null(_) => KeyCell::Missing,
        }
    }
}

#[cfg(test)]
mod tests;
