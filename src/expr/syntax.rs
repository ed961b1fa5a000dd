//! The text read into a checked tree ([`Node`]): sqlparser's tree converted, every form it
//! does not know refused by name at its place, limits of size and nesting checked before the
//! parser recurses.

use sqlparser::ast::{self as sql, Spanned};
use sqlparser::dialect::GenericDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, Tokenizer};

use super::{Mode, Pos, MAX_CHARS, MAX_DEPTH, MAX_NESTING, MAX_RECURSION, MAX_TOKENS};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Bin {
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
    pub(super) fn text(self) -> &'static str {
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
pub(super) const FUNCTIONS: &[(&str, usize, Option<usize>)] = &[
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
pub(super) const AGGREGATES: &[(&str, usize, Option<usize>)] = &[
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
pub(super) enum Agg {
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
pub(super) enum Node {
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

/// Why `text` is not an expression: the parser's message with its position said as
/// "at character N", or the nesting limit.
pub(super) fn parse_error(e: ParserError) -> String {
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

/// `text` as a checked tree: every form, function and arity supported, aggregates only where
/// `mode` allows, within the limits of size and depth.
pub(super) fn parse(text: &str, mode: Mode) -> Result<Node, String> {
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
        let prefix =
            !after_value && (matches!(tok, Token::Minus | Token::Plus) || word(tok, Keyword::NOT));
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
    convert(&e, mode, false, 0)
}

/// Calls `f` on every node of the tree below `n` and `n` itself.
pub(super) fn walk(n: &Node, f: &mut dyn FnMut(&Node)) {
    f(n);
    children(n, &mut |c| walk(c, f));
}

pub(super) fn children(n: &Node, f: &mut dyn FnMut(&Node)) {
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
pub(super) fn convert(
    e: &sql::Expr,
    mode: Mode,
    in_agg: bool,
    depth: usize,
) -> Result<Node, String> {
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
        // `x IN (a, b)` is `x = a OR x = b`, with SQL's missing values: a missing `x`, or no
        // match where some value is missing, is missing, not false.
        sql::Expr::InList {
            expr,
            list,
            negated,
        } => {
            let x = sub(expr)?;
            let eqs = list
                .iter()
                .map(|v| Ok(Node::Bin(Bin::Eq, x.clone(), sub(v)?, pos)))
                .collect::<Result<Vec<_>, String>>()?;
            let any = any_of(eqs, pos).ok_or_else(|| format!("{pos}`IN ()` lists no value"))?;
            if *negated {
                Node::Not(Box::new(any), pos)
            } else {
                any
            }
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
                "{pos}`{other}` is not supported: an expression is made of column names, numbers, 'text', TRUE/FALSE/NULL, operators, x IN (a, b), functions ({}) and CASE WHEN … THEN … ELSE … END",
                supported(mode)
            ))
        }
    })
}

/// `a OR b OR …` as a balanced tree, so a long `IN` list is as deep as its logarithm.
fn any_of(mut nodes: Vec<Node>, pos: Pos) -> Option<Node> {
    match nodes.len() {
        0 => None,
        1 => nodes.pop(),
        n => {
            let right = nodes.split_off(n / 2);
            Some(Node::Bin(
                Bin::Or,
                Box::new(any_of(nodes, pos)?),
                Box::new(any_of(right, pos)?),
                pos,
            ))
        }
    }
}

/// The functions `mode` allows, for messages.
pub(super) fn supported(mode: Mode) -> String {
    let mut names: Vec<&str> = FUNCTIONS.iter().map(|f| f.0).collect();
    if mode == Mode::Groups {
        names.extend(AGGREGATES.iter().map(|f| f.0));
    }
    names.join(", ")
}

pub(super) fn literal(v: &sql::Value, pos: Pos) -> Result<Node, String> {
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

pub(super) fn function(
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
