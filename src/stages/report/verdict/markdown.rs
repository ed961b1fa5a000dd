//! `report.verdict`'s Markdown: the paper's table in its own layout, cell by cell, written
//! beside the frame (the rule and the rows are in the parent module).

use super::*;

/// The paper's layout: per dataset and error type, one line per run with a column per σ,
/// then the floor and the verdicts; side-by-side values (times) in a last column.
pub(super) fn verdict_markdown(
    rows: &VerdictRows,
    labels: &[&String],
    title: &str,
    notes: Option<&str>,
) -> String {
    use std::fmt::Write as _;
    let mut sigmas: Vec<f64> = rows.sigma.clone();
    sigmas.sort_by(f64::total_cmp);
    sigmas.dedup();
    let mut s = format!("## {title}\n\n| dataset | value | row |");
    for sg in &sigmas {
        let _ = write!(s, " σ = {sg} |");
    }
    s.push_str(" worst time (s) |\n|---|---|---|");
    for _ in &sigmas {
        s.push_str("---|");
    }
    s.push_str("---|\n");
    let mut sources: Vec<&String> = Vec::new();
    for x in &rows.source {
        if !sources.contains(&x) {
            sources.push(x);
        }
    }
    let find = |src: &str, val: &str, sg: f64| {
        (0..rows.source.len())
            .find(|&r| rows.source[r] == src && rows.value[r] == val && rows.sigma[r] == sg)
    };
    for src in sources {
        // The side-by-side value (time): the paper's and our worst over σ, per run.
        let times: Vec<usize> = (0..rows.source.len())
            .filter(|&r| rows.source[r] == *src && !rows.judged[r])
            .collect();
        let time_cell = |line: &str| -> String {
            match line {
                "paper" => times
                    .first()
                    .map(|&r| rows.paper[r].clone())
                    .unwrap_or_default(),
                _ => {
                    let Some(i) = labels.iter().position(|l| l.as_str() == line) else {
                        return String::new();
                    };
                    let worst = times
                        .iter()
                        .filter_map(|&r| rows.runs[r][i].map(|c| c.max))
                        .fold(f64::NAN, f64::max);
                    if worst.is_finite() {
                        short(worst)
                    } else {
                        String::new()
                    }
                }
            }
        };
        let mut values: Vec<&String> = Vec::new();
        for r in 0..rows.source.len() {
            if rows.source[r] == *src && rows.judged[r] && !values.contains(&&rows.value[r]) {
                values.push(&rows.value[r]);
            }
        }
        for val in values {
            let mut line = |name: &str, cell: &dyn Fn(usize) -> String, time: String| {
                let _ = write!(s, "| {src} | {val} | {name} |");
                for sg in &sigmas {
                    let c = find(src, val, *sg).map(cell).unwrap_or_default();
                    let _ = write!(s, " {c} |");
                }
                let _ = writeln!(s, " {time} |");
            };
            line("paper", &|r| rows.paper[r].clone(), time_cell("paper"));
            for (i, l) in labels.iter().enumerate() {
                line(
                    l,
                    // A decimal more than the paper prints, so that a run the verdict
                    // tells apart from the paper's value never reads as equal to it.
                    &|r| {
                        let printed = [rows.paper[r].as_str(); 3];
                        match rows.runs[r][i] {
                            Some(c) if c.lo.is_finite() => {
                                let t = format_ours(
                                    &[Some(c.mean), Some(c.lo), Some(c.hi)],
                                    &printed,
                                    3,
                                );
                                format!("{} [{}, {}]", t[0], t[1], t[2])
                            }
                            Some(c) => format_ours(&[Some(c.mean)], &printed, 3).remove(0),
                            None => "—".into(),
                        }
                    },
                    time_cell(l),
                );
            }
            line(
                "grid floor (N)",
                &|r| {
                    if rows.grid[r].is_finite() {
                        format!("{} (N = {})", short(rows.floor[r]), rows.grid[r])
                    } else {
                        short(rows.floor[r])
                    }
                },
                String::new(),
            );
            line(
                "verdict",
                &|r| format!("**{}**: {}", rows.verdict[r], rows.cause[r]),
                String::new(),
            );
        }
    }
    let count = |v: &str| rows.verdict.iter().filter(|x| x.as_str() == v).count();
    let _ = writeln!(
        s,
        "\nVerdicts: {} within CI, {} explained, {} unexplained, {} without our data, {} not run.",
        count(Verdict::WithinCi.word()),
        count(Verdict::Explained.word()),
        count(Verdict::Unexplained.word()),
        count(NO_DATA),
        count(NOT_RUN)
    );
    // How close each run is to the paper over all judged cells: how many of the paper's values
    // fall in its interval, and the median and range of ours/paper.
    let _ = writeln!(
        s,
        "\n| run | paper inside its 95% interval | median ours / paper | range of ours / paper |\n|---|---|---|---|"
    );
    for (i, l) in labels.iter().enumerate() {
        let mut ratios = Vec::new();
        let mut inside = 0;
        for r in 0..rows.source.len() {
            let (Some(c), true) = (rows.runs[r][i], rows.judged[r]) else {
                continue;
            };
            let Some((p, h)) = printed_value(&rows.paper[r]) else {
                continue;
            };
            if !(p.is_finite() && c.mean.is_finite()) {
                continue;
            }
            if p > 0.0 {
                ratios.push(c.mean / p);
            }
            if c.lo.is_finite() && p - h <= c.hi && c.lo <= p + h {
                inside += 1;
            }
        }
        if ratios.is_empty() {
            continue;
        }
        ratios.sort_by(f64::total_cmp);
        let median = crate::mech::stats::quantile_sorted(&ratios, 0.5);
        let _ = writeln!(
            s,
            "| {l} | {inside} of {} | {} | {} – {} |",
            ratios.len(),
            short(median),
            short(ratios[0]),
            short(ratios[ratios.len() - 1])
        );
    }
    if let Some(n) = notes {
        let _ = write!(s, "\n{}\n", n.trim());
    }
    s
}
