//! The evaluator: each operator and function, types, nulls, errors with their place, limits.

use polars::prelude::{df, DataFrame};

use super::{Expr, Mode, Vals, MAX_CHARS, MAX_DEPTH, MAX_NESTING, MAX_TOKENS};

fn frame() -> DataFrame {
    df!(
        "i" => [Some(7i64), Some(-2), None],
        "x" => [Some(1.5), Some(-4.0), Some(2.0)],
        "s" => [Some("a"), Some("b"), None],
        "b" => [Some(true), Some(false), None],
        "odd name" => [1i64, 2, 3]
    )
    .unwrap()
}

fn eval(text: &str) -> Vals {
    Expr::parse(text, Mode::Rows)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .eval(&frame())
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn error(text: &str) -> String {
    match Expr::parse(text, Mode::Rows).and_then(|e| e.eval(&frame())) {
        Ok(v) => panic!("{text} gave {v:?}"),
        Err(e) => e,
    }
}

fn ints(v: &[Option<i64>]) -> Vals {
    Vals::Int(v.to_vec())
}

fn floats(v: &[Option<f64>]) -> Vals {
    Vals::Float(v.to_vec())
}

fn bools(v: &[Option<bool>]) -> Vals {
    Vals::Bool(v.to_vec())
}

/// Integer arithmetic stays integer; a number anywhere makes a number; `/` is a number;
/// missing values propagate.
#[test]
fn arithmetic_and_its_types() {
    assert_eq!(eval("i + 1"), ints(&[Some(8), Some(-1), None]));
    assert_eq!(eval("i - 10"), ints(&[Some(-3), Some(-12), None]));
    assert_eq!(eval("i * i"), ints(&[Some(49), Some(4), None]));
    assert_eq!(eval("i % 4"), ints(&[Some(3), Some(-2), None]));
    assert_eq!(eval("-i"), ints(&[Some(-7), Some(2), None]));
    assert_eq!(eval("i / 2"), floats(&[Some(3.5), Some(-1.0), None]));
    assert_eq!(eval("i + 0.5"), floats(&[Some(7.5), Some(-1.5), None]));
    assert_eq!(eval("x * 2"), floats(&[Some(3.0), Some(-8.0), Some(4.0)]));
    assert_eq!(eval("x % 1"), floats(&[Some(0.5), Some(-0.0), Some(0.0)]));
    assert_eq!(eval("-x"), floats(&[Some(-1.5), Some(4.0), Some(-2.0)]));
    // Precedence as in SQL (and arithmetic).
    assert_eq!(eval("1 + 2 * 3 - (4 - 1)"), ints(&[Some(4); 3]));
    assert_eq!(eval("\"odd name\" * 2"), ints(&[Some(2), Some(4), Some(6)]));
    assert_eq!(eval("i + NULL"), ints(&[None; 3]));
    assert_eq!(eval("x + NULL"), floats(&[None; 3]));
}

/// Division and `%` by zero, and numbers that are not finite, are missing.
#[test]
fn division_by_zero_is_missing() {
    assert_eq!(eval("x / 0"), floats(&[None; 3]));
    assert_eq!(eval("i % 0"), ints(&[None; 3]));
    assert_eq!(eval("x % 0"), floats(&[None; 3]));
    assert_eq!(
        eval("sqrt(x)"),
        floats(&[Some(1.5f64.sqrt()), None, Some(2f64.sqrt())])
    );
    assert_eq!(eval("ln(x - x)"), floats(&[None; 3]));
    assert_eq!(eval("exp(x * 1000)"), floats(&[None, Some(0.0), None]));
}

/// Overflow of 64-bit integers is an error naming the row; a literal too large for a number
/// is refused; one too large for an integer is a number.
#[test]
fn overflow_and_huge_literals() {
    let e = error("i * 9223372036854775807");
    assert!(e.contains("overflows 64-bit integers at row 1"), "{e}");
    let e = error("abs(i - 9223372036854775807 - 2)");
    assert!(e.contains("overflows"), "{e}");
    assert_eq!(eval("-9223372036854775808 + 0"), ints(&[Some(i64::MIN); 3]));
    assert_eq!(eval("99999999999999999999"), floats(&[Some(1e20); 3]));
    let e = error(&format!("x + 1{}", "0".repeat(400)));
    assert!(
        e.contains("at character 5: the number 1000") && e.contains("1.8e308"),
        "{e}"
    );
}

#[test]
fn functions() {
    assert_eq!(eval("abs(i)"), ints(&[Some(7), Some(2), None]));
    assert_eq!(eval("abs(x)"), floats(&[Some(1.5), Some(4.0), Some(2.0)]));
    assert_eq!(
        eval("pow(x, 2)"),
        floats(&[Some(2.25), Some(16.0), Some(4.0)])
    );
    assert_eq!(eval("power(2, 10)"), floats(&[Some(1024.0); 3]));
    assert_eq!(eval("log(100)"), floats(&[Some(2.0); 3]));
    assert_eq!(eval("log(2, 8)"), floats(&[Some(3.0); 3]));
    assert_eq!(eval("log2(8) + log10(1000)"), floats(&[Some(6.0); 3]));
    assert_eq!(eval("ln(exp(1))"), floats(&[Some(1.0); 3]));
    assert_eq!(
        eval("floor(x)"),
        floats(&[Some(1.0), Some(-4.0), Some(2.0)])
    );
    assert_eq!(eval("ceil(x)"), floats(&[Some(2.0), Some(-4.0), Some(2.0)]));
    assert_eq!(
        eval("round(x)"),
        floats(&[Some(2.0), Some(-4.0), Some(2.0)])
    );
    assert_eq!(eval("round(1.2345, 2)"), floats(&[Some(1.23); 3]));
    assert_eq!(eval("round(i)"), ints(&[Some(7), Some(-2), None]));
    assert_eq!(eval("least(i, 0)"), ints(&[Some(0), Some(-2), None]));
    assert_eq!(eval("greatest(i, 0, 3)"), ints(&[Some(7), Some(3), None]));
    assert_eq!(
        eval("greatest(i, x)"),
        floats(&[Some(7.0), Some(-2.0), None])
    );
    assert_eq!(eval("least(x, NULL)"), floats(&[None; 3]));
    assert_eq!(
        eval("least(s, 'aa')"),
        Vals::Str(vec![Some("a".into()), Some("aa".into()), None])
    );
    assert_eq!(eval("coalesce(i, 0)"), ints(&[Some(7), Some(-2), Some(0)]));
    assert_eq!(
        eval("COALESCE(i, x)"),
        floats(&[Some(7.0), Some(-2.0), Some(2.0)])
    );
}

/// Comparisons of numbers with numbers and text with text; SQL's three-valued logic.
#[test]
fn comparisons_and_logic() {
    assert_eq!(eval("i > 0"), bools(&[Some(true), Some(false), None]));
    assert_eq!(eval("i >= x"), bools(&[Some(true), Some(true), None]));
    assert_eq!(
        eval("x = 2"),
        bools(&[Some(false), Some(false), Some(true)])
    );
    assert_eq!(
        eval("x <> 2"),
        bools(&[Some(true), Some(true), Some(false)])
    );
    assert_eq!(
        eval("x != 2"),
        bools(&[Some(true), Some(true), Some(false)])
    );
    assert_eq!(
        eval("x < 0 OR x <= -4"),
        bools(&[Some(false), Some(true), Some(false)])
    );
    assert_eq!(eval("s = 'a'"), bools(&[Some(true), Some(false), None]));
    assert_eq!(eval("NOT b"), bools(&[Some(false), Some(true), None]));
    // false AND null is false, true OR null is true, the others missing.
    assert_eq!(eval("b AND NULL"), bools(&[None, Some(false), None]));
    assert_eq!(eval("b OR NULL"), bools(&[Some(true), None, None]));
    assert_eq!(eval("b AND TRUE"), bools(&[Some(true), Some(false), None]));
    assert_eq!(
        eval("i IS NULL"),
        bools(&[Some(false), Some(false), Some(true)])
    );
    assert_eq!(
        eval("s IS NOT NULL"),
        bools(&[Some(true), Some(true), Some(false)])
    );
}

/// `IN` is a chain of `=`: a missing value in or out of the list gives a missing result, not
/// false; a long list is no deeper than its logarithm.
#[test]
fn in_lists() {
    assert_eq!(
        eval("s IN ('a', 'c')"),
        bools(&[Some(true), Some(false), None])
    );
    assert_eq!(
        eval("s NOT IN ('a')"),
        bools(&[Some(false), Some(true), None])
    );
    assert_eq!(
        eval("i IN (7, 2.0, NULL)"),
        bools(&[Some(true), None, None])
    );
    let many: Vec<String> = (0..200).map(|v| v.to_string()).collect();
    assert_eq!(
        eval(&format!("x IN ({})", many.join(", "))),
        bools(&[Some(false), Some(false), Some(true)])
    );
    assert!(
        error("s IN (1, 2)").contains("compare"),
        "{}",
        error("s IN (1, 2)")
    );
}

/// CASE picks the first branch whose condition holds (a missing one does not), ELSE or
/// missing otherwise; integer and number branches give numbers.
#[test]
fn case() {
    assert_eq!(
        eval("CASE WHEN i > 0 THEN 'pos' WHEN i < 0 THEN 'neg' END"),
        Vals::Str(vec![Some("pos".into()), Some("neg".into()), None])
    );
    assert_eq!(
        eval("CASE WHEN b THEN 1 ELSE x END"),
        floats(&[Some(1.0), Some(-4.0), Some(2.0)])
    );
    assert_eq!(
        eval("case s when 'a' then 10 when 'b' then 20 else 0 end"),
        ints(&[Some(10), Some(20), Some(0)])
    );
    let e = error("CASE WHEN b THEN 1 ELSE 'x' END");
    assert!(
        e.contains("the branches of CASE are an integer and text"),
        "{e}"
    );
    let e = error("CASE WHEN x THEN 1 END");
    assert!(
        e.contains("`WHEN` needs truth values") && e.contains("a number"),
        "{e}"
    );
}

/// Type errors and unknown names say what and where.
#[test]
fn errors_name_the_place() {
    let e = error("x + s");
    assert_eq!(e, "at character 1: `+` needs numbers, and this is text");
    let e = error("abs(x) + sqrt(nosy)");
    assert!(
        e.starts_with(
            "at character 15: no column `nosy` in its input (columns: i, x, s, b, odd name)"
        ),
        "{e}"
    );
    let e = error("x > 'a'");
    assert!(e.contains("`>` compares a number with text"), "{e}");
    let e = error("b + 1");
    assert!(
        e.contains("needs numbers, and this is a truth value"),
        "{e}"
    );
    let e = error("x AND b");
    assert!(e.contains("`AND` needs truth values"), "{e}");
    let e = error("sqroot(x)");
    assert!(
        e.contains("no function `sqroot`; did you mean `sqrt`?"),
        "{e}"
    );
    let e = error("abs(x, 1)");
    assert_eq!(e, "at character 1: `abs` takes 1 argument, not 2");
    let e = error("pow(x)");
    assert_eq!(e, "at character 1: `pow` takes 2 arguments, not 1");
    let e = error("x ^ 2");
    assert!(
        e.contains("`^` is not supported") && e.contains("pow(x, y)"),
        "{e}"
    );
    let e = error("t.x + 1");
    assert!(e.contains("double quotes"), "{e}");
    let e = error("x BETWEEN 1 AND 2");
    assert!(e.contains("is not supported"), "{e}");
    let e = error("(x + 1");
    assert!(e.contains("cannot read the expression"), "{e}");
    let e = error("x +\n  * 2");
    assert!(e.contains("at line 2"), "{e}");
    let e = error("count(*)");
    assert!(e.contains("is an aggregate"), "{e}");
    assert_eq!(error("  "), "the expression is empty");
}

/// Deep or long text is refused with its limit, never a stack overflow: nested parentheses,
/// nested CASE, nested calls, unary operators and a long chain of `+`. The test runs on a
/// test thread's stack (2 MiB), smaller than the main thread's.
#[test]
fn hostile_depth_and_length() {
    let nest =
        |open: &str, close: &str, n: usize| format!("{}x{}", open.repeat(n), close.repeat(n));
    // Each form with the levels one repetition nests.
    let forms = [
        ("(", ")", 1),
        ("abs(", ")", 1),
        ("CASE WHEN b THEN ", " END", 1),
        ("- ", "", 1),
        ("NOT ", "", 1),
        ("(NOT ", ")", 2),
    ];
    for (open, close, levels) in forms {
        let over = MAX_NESTING / levels + 3;
        let e = Expr::parse(&nest(open, close, over), Mode::Rows).unwrap_err();
        assert!(
            e.contains(&format!(
                "nests deeper than the limit of {MAX_NESTING} levels"
            )),
            "{open}: {e}"
        );
        // Just within it: read (on a test thread's stack).
        let within = MAX_NESTING / levels - 1;
        assert!(
            Expr::parse(&nest(open, close, within), Mode::Rows).is_ok(),
            "{open}"
        );
        // Far beyond every limit.
        let e = Expr::parse(&nest(open, close, 100_000), Mode::Rows).unwrap_err();
        assert!(
            e.contains(&format!("more than the limit of {MAX_CHARS}")),
            "{open}: {e}"
        );
    }
    // Within the limits: accepted and evaluated.
    assert_eq!(eval(&nest("(", ")", MAX_NESTING - 2)), eval("x"));
    assert_eq!(eval(&nest("abs(", ")", 15)), eval("abs(x)"));
    assert!(Expr::parse(&nest("CASE WHEN b THEN ", " END", 12), Mode::Rows).is_ok());
    let chain = vec!["x"; MAX_DEPTH].join(" + ");
    assert_eq!(
        eval(&chain),
        floats(&[
            Some(1.5 * MAX_DEPTH as f64),
            Some(-4.0 * MAX_DEPTH as f64),
            Some(400.0)
        ])
    );
    let e = Expr::parse(&vec!["x"; MAX_DEPTH + 2].join("+"), Mode::Rows).unwrap_err();
    assert!(
        e.contains(&format!("limit of {MAX_DEPTH} operations")),
        "{e}"
    );
    let e = Expr::parse(&vec!["x"; 1000].join("+"), Mode::Rows).unwrap_err();
    assert!(
        e.contains(&format!("more than the limit of {MAX_TOKENS}")),
        "{e}"
    );
    // The deepest tree the token limit lets through, nested in parentheses: the parser's own
    // recursive walks (its spans) and ours stay within a test thread's stack.
    let deep = format!(
        "{}{}{}",
        "(".repeat(30),
        vec!["x"; 150].join("*"),
        ")".repeat(30)
    );
    assert!(Expr::parse(&deep, Mode::Rows).is_ok());
}

#[test]
fn columns_read() {
    let e = Expr::parse("abs(noisy - count) + noisy * \"odd name\"", Mode::Rows).unwrap();
    assert_eq!(e.columns(), ["noisy", "count", "odd name"]);
}
