use polars::prelude::{Column, DataFrame};

/// An interval that leaves its estimate fails the run, naming the row, the columns and
/// the values; missing values (an interval not computed) pass; an undeclared-but-missing
/// column is a bug in the kind.
#[test]
fn an_interval_must_contain_its_estimate() {
    let frame = |est: Vec<Option<f64>>, lo: Vec<Option<f64>>, hi: Vec<Option<f64>>| {
        DataFrame::new(
            est.len(),
            vec![
                Column::new("tv".into(), est),
                Column::new("tv_lo".into(), lo),
                Column::new("tv_hi".into(), hi),
            ],
        )
        .unwrap()
    };
    let iv = [["tv", "tv_lo", "tv_hi"].map(str::to_string)];
    let ok = frame(
        vec![Some(0.1), Some(0.0), None],
        vec![Some(0.0), Some(0.0), Some(0.0)],
        vec![Some(0.2), Some(0.0), Some(1.0)],
    );
    assert!(super::check_intervals(&ok, &iv).is_ok());
    // dr-noisy-argmax at ε = 0.056: [0, 0] around 3.2e-4.
    let bad = frame(
        vec![Some(0.1), Some(3.2e-4)],
        vec![Some(0.0); 2],
        vec![Some(0.2), Some(0.0)],
    );
    let e = super::check_intervals(&bad, &iv).unwrap_err().to_string();
    assert!(
        e.contains("row 2") && e.contains("[0, 0] excludes its estimate `tv` = 0.00032"),
        "{e}"
    );
    let e = super::check_intervals(&ok, &[["tv", "lo", "tv_hi"].map(str::to_string)])
        .unwrap_err()
        .to_string();
    assert!(e.contains("`lo` but did not write it"), "{e}");
}
