use super::*;

fn cell(mean: f64, lo: f64, hi: f64) -> Cell {
    Cell {
        mean,
        lo,
        hi,
        max: hi,
    }
}

/// The layout the report shows: the thesis's arrangement of the judged rows (times left
/// out, a σ not run a cell of its own) and ours per row, the matched run named when it is
/// not the headline run.
#[test]
fn the_layout_places_each_row_as_the_thesis_does() {
    let (text, partial) = ("private_text".to_string(), "partial".to_string());
    let labels = [&text, &partial];
    let mut rows = VerdictRows::default();
    let c = |m, l, h| Some(cell(m, l, h));
    let mut push = |s, v, sg, p, runs: &[Option<Cell>], judged, verdict, matched: &str| {
        let (floor, grid) = (None, None);
        rows.push(
            s,
            v,
            sg,
            p,
            runs,
            judged,
            floor,
            grid,
            verdict,
            String::new(),
            matched.into(),
            "",
        );
    };
    let t = "within CI";
    push(
        "CRM",
        "max_abs_error",
        2.0,
        "0.002",
        &[c(0.0011, 0.0001, 0.0022), None],
        true,
        t,
        "private_text",
    );
    push(
        "CRM",
        "max_abs_error",
        4.0,
        "0.010",
        &[None, None],
        true,
        NOT_RUN,
        "",
    );
    push(
        "CSN",
        "max_rel_error",
        2.0,
        "0.500",
        &[c(0.1, 0.09, 0.11), c(0.5, 0.45, 0.55)],
        true,
        "explained",
        "partial",
    );
    push(
        "CSN",
        "synthesis_seconds",
        2.0,
        "2.5",
        &[c(0.1, 0.09, 0.11), None],
        false,
        SIDE_BY_SIDE,
        "",
    );
    let grid = rows.grid(&labels).unwrap();
    assert_eq!(grid.headers, ["dataset", "error", "σ = 2", "σ = 4"]);
    assert_eq!(grid.ours, "private_text");
    let placed: Vec<(Vec<String>, Vec<Option<usize>>)> =
        grid.rows.into_iter().map(|r| (r.head, r.cells)).collect();
    assert_eq!(
        placed,
        [
            (
                vec!["CRM".into(), "max abs error".into()],
                vec![Some(0), Some(1)]
            ),
            (
                vec!["CSN".into(), "max rel error".into()],
                vec![Some(2), None]
            ),
        ]
    );
    let ours: Vec<String> = (0..4).map(|r| rows.shown_run(r, &labels)).collect();
    assert_eq!(
        ours,
        [
            "1.10e-3 [1.00e-4, 2.20e-3]",
            "—",
            "0.5000 [0.4500, 0.5500] (partial)",
            // A time shown side by side: the run's worst case, no interval; exactly 0.11,
            // so written as the short decimal it is.
            "0.11",
        ]
    );
    // Only times: no grid (the report shows every column instead).
    let mut times = VerdictRows::default();
    times.push(
        "CSN",
        "synthesis_seconds",
        2.0,
        "2.5",
        &[None, None],
        false,
        None,
        None,
        SIDE_BY_SIDE,
        String::new(),
        String::new(),
        "",
    );
    assert!(times.grid(&labels).is_none());
}

#[test]
fn the_rule_in_order() {
    let ours = vec![("text".to_string(), cell(0.10, 0.09, 0.11))];
    let causes = vec![("no_noise".to_string(), cell(0.03, 0.028, 0.032))];
    // 0.1105 ± 0.0005 meets [0.09, 0.11].
    assert_eq!(
        judge(0.1105, 5e-4, &ours, Some(0.01), 0.1, &causes).verdict,
        Verdict::WithinCi
    );
    // Below the floor, even though the cause's interval would not contain it.
    let j = judge(0.005, 5e-4, &ours, Some(0.01), 0.1, &causes);
    assert_eq!(j.verdict, Verdict::Explained);
    assert!(j.cause.contains("below the grid floor"), "{}", j.cause);
    // At the floor (0.0102 ± 0.0005 meets [0.009, 0.01]), and a little under it.
    let j = judge(0.0102, 5e-4, &ours, Some(0.01), 0.1, &causes);
    assert!(j.cause.contains("at the grid floor"), "{}", j.cause);
    let j = judge(0.0093, 5e-4, &ours, Some(0.01), 0.1, &causes);
    assert!(j.cause.contains("at the grid floor"), "{}", j.cause);
    // Inside a partial-noise run's interval.
    let j = judge(0.03, 5e-4, &ours, Some(0.01), 0.1, &causes);
    assert_eq!(
        (j.verdict, j.cause.contains("no_noise")),
        (Verdict::Explained, true)
    );
    // Nothing fits.
    let j = judge(0.5, 5e-4, &ours, Some(0.01), 0.1, &causes);
    assert_eq!(j.verdict, Verdict::Unexplained);
    assert!(j.cause.contains("above"));
    let j = judge(0.06, 5e-4, &ours, Some(0.01), 0.1, &causes);
    assert!(j.cause.contains("between"));
    // A run with one repetition (no interval) counts by its mean.
    let single = vec![("one".to_string(), cell(0.2, f64::NAN, f64::NAN))];
    assert_eq!(
        judge(0.2004, 5e-4, &single, None, 0.1, &[]).verdict,
        Verdict::WithinCi
    );
}
