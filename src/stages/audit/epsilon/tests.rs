use crate::kind::testing::{fails, floats, refused, run, strings};
use crate::kind::KindInfo;

fn kind() -> &'static KindInfo {
    crate::stages::registry::find("audit.epsilon").unwrap()
}

/// An audit of `mechanism.noise` (Laplace, Δ = 1) run at `run_eps` and claiming `claim`,
/// on the pair 0 vs 1 (one above), with 2·10⁴ search and 2·10⁵ validation draws per side.
fn laplace(run_eps: f64, claim: f64, seed: u128) -> polars::prelude::DataFrame {
    let with = format!(
            "{{mechanism: {{kind: mechanism.noise, with: {{column: value, noise: laplace, epsilon: {run_eps}}}}},
              output: [noisy], claim: {{epsilon: {claim}}},
              neighbours: {{column: value, relation: l1, base: [0], patterns: [one_above]}},
              samples: 200000, search_samples: 20000}}"
        );
    run(kind(), &with, &[], seed).unwrap().frame
}

/// Through the stage: the correct Laplace mechanism is not flagged at ε ∈ {0.1, 1}; run
/// at ε/0.7 (0.7× the noise scale) while claiming ε, it is, at both (the power check of
/// the mechanism layer's test, now through `mechanism.noise`'s own `run`).
#[test]
fn mechanism_noise_is_audited_through_its_own_run() {
    for eps in [0.1, 1.0] {
        let good = laplace(eps, eps, 1);
        assert_eq!(strings(&good, "violation"), ["false"], "{good}");
        let lb = floats(&good, "epsilon_lb")[0];
        assert!(lb > 0.5 * eps && lb <= eps, "{good}");
        let bad = laplace(eps / 0.7, eps, 2);
        assert_eq!(strings(&bad, "violation"), ["true"], "{bad}");
        let event = &strings(&bad, "event")[0];
        assert!(event.contains("noisy"), "{event}");
        assert!(strings(&bad, "pair")[0].starts_with("one_above: "), "{bad}");
        assert_eq!(floats(&bad, "samples"), [200000.0]);
    }
}

/// A mechanism that computes its own ε (a channel of Wu et al., Algorithm 3) is held to
/// it through `claim: {epsilon: {column: epsilon}}`, and gets the audit stage's own input
/// (the source distribution) after the neighbouring one: the symmetric channel at
/// ε = 1 is not flagged and its bound comes near 1; claimed at 0.6 (a mechanism that
/// under-reports its ε) it is flagged.
#[test]
fn a_channel_is_held_to_the_epsilon_it_reports() {
    let dist = crate::stages::columns::FrameBuilder::new()
        .str("label", vec!["a".into(), "b".into(), "c".into()])
        .f64("probability", vec![0.5, 0.3, 0.2])
        .build()
        .unwrap();
    let with = |claim: &str| {
        format!(
                "{{mechanism: {{kind: mechanism.channel, with: {{column: bin, count: count, channel: {{symmetric: {{at: epsilon, value: 1}}}}}}}},
                  output: [released], claim: {{epsilon: {claim}}},
                  neighbours: {{column: count, relation: replace, bins: [a, b, c], dataset: [a]}},
                  samples: 200000, search_samples: 20000}}"
            )
    };
    let own = run(kind(), &with("{column: epsilon}"), &[&dist], 4)
        .unwrap()
        .frame;
    assert_eq!(strings(&own, "violation"), ["false"], "{own}");
    let claimed = floats(&own, "epsilon")[0];
    assert!((claimed - 1.0).abs() < 1e-12, "{own}");
    let lb = floats(&own, "epsilon_lb")[0];
    assert!(lb > 0.9 && lb <= claimed, "{own}");
    assert!(
        strings(&own, "event")[0].starts_with("released ∈ {"),
        "{own}"
    );
    let under = run(kind(), &with("0.6"), &[&dist], 4).unwrap().frame;
    assert_eq!(strings(&under, "violation"), ["true"], "{under}");
    let missing = fails(kind(), &with("{column: eps}"), &[&dist], 4);
    assert!(
        missing.contains("eps") && missing.contains("epsilon"),
        "{missing}"
    );
}

/// `mechanism.select` reports a histogram (`count`): the naive exponential mechanism,
/// claimed ε = 1 but only 2ε-DP, is flagged with an outcome set of candidate names, on
/// StatDP's "one below, rest above" from [1, 0, …, 0] (10 candidates).
#[test]
fn a_histogram_of_text_outcomes_is_audited_by_the_discrete_search() {
    let with =
        "{mechanism: {kind: mechanism.select, with: {method: naive_exponential, epsilon: 1}},
            output: [candidate], count: count, claim: {epsilon: 1},
            neighbours: {column: utility, relation: linf, base: [1, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                         patterns: [one_below_rest_above],
                         same: {candidate: [r0, r1, r2, r3, r4, r5, r6, r7, r8, r9]}},
            samples: 500000, search_samples: 50000}";
    let out = run(kind(), with, &[], 3).unwrap().frame;
    assert_eq!(strings(&out, "violation"), ["true"], "{out}");
    let lb = floats(&out, "epsilon_lb")[0];
    assert!(lb > 1.0 && lb <= 1.776, "{out}");
    assert!(
        strings(&out, "event")[0].starts_with("candidate ∈ {r0"),
        "{out}"
    );
}

/// A histogram of records under the record relations: the Laplace mechanism at Δ = 1 is
/// ε-DP under add/remove (not flagged), but under replace two counts move, so it is only
/// 2ε-DP: flagged at ε = 1 by the linear score (a one-count event shows only ε), and not
/// flagged once its `sensitivity` is 2.
#[test]
fn a_histogram_of_records_is_audited_under_add_remove_and_replace() {
    let audit = |relation: &str, sensitivity: f64, seed: u128| {
        let with = format!(
                "{{mechanism: {{kind: mechanism.noise, with: {{column: count, noise: laplace, epsilon: 1, sensitivity: {sensitivity}}}}},
                  output: [noisy], claim: {{epsilon: 1}},
                  neighbours: {{column: count, relation: {relation}, bins: [a, b], dataset: [a]}},
                  samples: 200000, search_samples: 20000}}"
            );
        run(kind(), &with, &[], seed).unwrap().frame
    };
    let good = audit("add_remove", 1.0, 1);
    assert_eq!(strings(&good, "violation"), ["false"], "{good}");
    assert!(floats(&good, "epsilon_lb")[0] > 0.8, "{good}");
    let pair = &strings(&good, "pair")[0];
    assert!(pair.contains("{a}"), "{pair}");
    let bad = audit("replace", 1.0, 2);
    assert_eq!(strings(&bad, "violation"), ["true"], "{bad}");
    let lb = floats(&bad, "epsilon_lb")[0];
    assert!(lb > 1.0 && lb <= 2.0, "{bad}");
    assert!(strings(&bad, "pair")[0].starts_with("replace "), "{bad}");
    let fixed = audit("replace", 2.0, 3);
    assert_eq!(strings(&fixed, "violation"), ["false"], "{fixed}");
}

/// Datasets of records with several fields reach the mechanism as rows (`fields`), and a
/// release whose length depends on the data is read with `max_rows` as its row count and its
/// rows: Laplace noise on each record's x is private under replace (one x moves by 1) and
/// flagged under add_remove, where the release's length is the record count; without
/// `max_rows`, releases of varying length are refused, naming it.
#[test]
fn records_are_rows_and_releases_may_vary_in_length() {
    let audit = |neighbours: &str, max_rows: &str, seed: u128| {
        let with = format!(
                "{{mechanism: {{kind: mechanism.noise, with: {{column: x, noise: laplace, epsilon: 1}}}},
                  output: [noisy], claim: {{epsilon: 1}}, {max_rows}
                  neighbours: {neighbours},
                  samples: 100000, search_samples: 20000}}"
            );
        run(kind(), &with, &[], seed).map(|o| o.frame)
    };
    let replace =
        "{relation: replace, fields: [x, y], datasets: [[[[0, a], [5, b]], [[1, a], [5, b]]]]}";
    let good = audit(replace, "", 1).unwrap();
    assert_eq!(strings(&good, "violation"), ["false"], "{good}");
    assert!(floats(&good, "epsilon_lb")[0] > 0.7, "{good}");
    // Measured in the direction the search chose.
    let pair = &strings(&good, "pair")[0];
    assert!(
        pair.contains("{(0, a), (5, b)}") && pair.contains("{(1, a), (5, b)}"),
        "{pair}"
    );
    let add = "{relation: add_remove, fields: [x, y], dataset: [[0, a], [5, b]]}";
    let bad = audit(add, "max_rows: 2,", 2).unwrap();
    assert_eq!(strings(&bad, "violation"), ["true"], "{bad}");
    assert!(floats(&bad, "epsilon_lb")[0] > 5.0, "{bad}");
    assert!(strings(&bad, "event")[0].contains("rows"), "{bad}");
    let e = format!("{:#}", audit(add, "", 3).unwrap_err());
    assert!(e.contains("needs `max_rows:`"), "{e}");
    let e = format!("{:#}", audit(add, "max_rows: 1,", 3).unwrap_err());
    assert!(e.contains("has 2 rows, more than `max_rows: 1`"), "{e}");
}

/// The audit writes the layout that puts its frame in the report's Audits section, once for
/// the stage, with the frame's own columns.
#[test]
fn the_audit_s_layout_names_its_section_and_its_columns() {
    use crate::stages::report::layout::{Layout, Show};
    let with = "{mechanism: {kind: mechanism.noise, with: {column: value, noise: laplace, epsilon: 1}},
        output: [noisy], neighbours: {column: value, relation: l1, base: [0], patterns: [one_above]}}";
    let with: serde_yaml_ng::Value = serde_yaml_ng::from_str(with).unwrap();
    let files = (kind().build)(&with).unwrap().stage_files().unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].ext, "json");
    let layout: Layout = serde_json::from_slice(&files[0].bytes).unwrap();
    assert_eq!(layout.show, Show::Audit);
    let names: Vec<&str> = layout.columns.iter().map(|c| c.name.as_str()).collect();
    let all: Vec<&str> = super::COLUMNS
        .iter()
        .chain(&super::SURE)
        .chain(&super::CLAIM)
        .copied()
        .collect();
    assert_eq!(names, all);
}

/// The same seed gives the same row on 1 and on 3 threads; another seed other draws.
#[test]
fn threads_change_nothing() {
    let on = |threads: usize, seed: u128| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| laplace(1.0, 1.0, seed))
    };
    let one = on(1, 5);
    assert!(one.equals_missing(&on(3, 5)));
    assert!(!one.equals_missing(&on(3, 6)));
}

/// A claim of δ = 0 may be written out (pure ε-DP); δ = 1 claims nothing and is refused.
#[test]
fn delta_may_be_zero_but_not_one() {
    let with = |delta: &str| {
        format!(
                "{{mechanism: {{kind: mechanism.noise, with: {{column: value, noise: laplace, epsilon: 1}}}},
                  output: [noisy], claim: {{epsilon: 1, delta: {delta}}},
                  neighbours: {{column: value, relation: l1, pairs: [[[0], [1]]]}}}}"
            )
    };
    assert!((kind().build)(&crate::kind::testing::yaml(&with("0"))).is_ok());
    assert!(refused(kind(), &with("1")).starts_with("claim.delta: "));
}

/// Without `claim:`, a mechanism is held to what its kind states: ε (and δ) from its own
/// parameters, ρ-zCDP along its curve or at the δ the audit gives; a kind that states
/// nothing is refused at `claim`.
#[test]
fn a_mechanism_states_its_claim_once() {
    let audit = |mechanism: &str, claim: &str| {
        format!(
            "{{mechanism: {{kind: mechanism.noise, with: {{column: value, {mechanism}}}}},
                  output: [noisy], {claim}
                  neighbours: {{column: value, relation: l1, base: [0], patterns: [one_above]}},
                  samples: 2000, search_samples: 1000, searches: [scalar]}}"
        )
    };
    let claim_of = |mechanism: &str, claim: &str| {
        let out = run(kind(), &audit(mechanism, claim), &[], 3).unwrap().frame;
        (floats(&out, "epsilon")[0], floats(&out, "delta")[0])
    };
    assert_eq!(claim_of("noise: laplace, epsilon: 0.7", ""), (0.7, 0.0));
    assert_eq!(
        claim_of(
            "noise: gaussian, calibration: analytic, epsilon: 0.7, delta: 1.0e-5",
            ""
        ),
        (0.7, 1e-5)
    );
    let (eps, delta) = claim_of(
        "noise: gaussian, calibration: zcdp, rho: 0.02",
        "claim: {delta: 1.0e-5},",
    );
    // Canonne, Kamath & Steinke's conversion (mech::privacy), below Bun & Steinke's 0.9797.
    assert!(
        (eps - 0.794_315).abs() < 1e-6 && delta == 1e-5,
        "{eps} {delta}"
    );
    // A written claim wins (a mechanism run at one ε and claiming another).
    assert_eq!(
        claim_of("noise: laplace, epsilon: 2", "claim: {epsilon: 0.5},"),
        (0.5, 0.0)
    );
    // ρ-zCDP without a δ is audited along its whole curve.
    let curve = run(
        kind(),
        &audit("noise: gaussian, calibration: zcdp, rho: 0.02", ""),
        &[],
        1,
    )
    .unwrap()
    .frame;
    assert_eq!(strings(&curve, "claim"), ["ρ = 0.02 (zCDP)"], "{curve}");
    let e = refused(
        kind(),
        &audit(
            "noise: gaussian, calibration: analytic, epsilon: 0.7, delta: 1.0e-5",
            "claim: {delta: 1.0e-6},",
        ),
    );
    assert!(
        e.starts_with("claim.delta: ") && e.contains("claims δ = 0.00001"),
        "{e}"
    );
    let e = refused(
            kind(),
            "{mechanism: {kind: external, with: {command: [sh, -c, 'true'], params: {}}}, output: [noisy], samples_at: params.samples,
              neighbours: {column: value, relation: l1, base: [0], patterns: [one_above]}}",
        );
    assert!(
        e.starts_with("claim: kind `external` states no privacy claim"),
        "{e}"
    );
}

/// What cannot be audited is refused before anything runs, where it is written.
#[test]
fn what_cannot_be_audited_is_refused_where_it_is_written() {
    let audit = |mechanism: &str, extra: &str| {
        format!(
            "{{mechanism: {mechanism}, output: [noisy], claim: {{epsilon: 1}},
                  neighbours: {{column: value, relation: l1, pairs: [[[0], [1]]]}}{extra}}}"
        )
    };
    assert_eq!(
            refused(kind(), &audit("{kind: normalise, with: {}}", "")),
            "mechanism.kind: kind `normalise` has no `samples` parameter: the audit draws its samples by setting `samples` to the number it needs (an external program: `samples_at: params.samples`, which the program must honour)"
        );
    assert!(refused(
        kind(),
        &audit("{kind: external, with: {command: [sh, p.sh]}}", "")
    )
    .starts_with("mechanism.kind: kind `external` has no `samples` parameter"));
    assert_eq!(
        refused(kind(), &audit("{kind: mechanism.nosie}", "")),
        "mechanism.kind: no stage kind `mechanism.nosie` (`dplab list` lists them)"
    );
    assert_eq!(
            refused(
                kind(),
                &audit(
                    "{kind: mechanism.noise, with: {column: value, noise: laplace, epsilon: 1, samples: 5}}",
                    ""
                )
            ),
            "mechanism.with.samples: the audit sets `samples` (to the draws it needs): remove it here"
        );
    assert!(refused(
        kind(),
        &audit(
            "{kind: mechanism.noise, with: {column: value, noise: laplace, epsilon: -1}}",
            ""
        )
    )
    .starts_with("mechanism.with.epsilon: "));
    assert_eq!(
            refused(
                kind(),
                "{mechanism: {kind: mechanism.noise, with: {column: value, noise: laplace, epsilon: 1}},
                  output: [noisy], claim: {epsilon: 1},
                  neighbours: {column: value, relation: l1, pairs: [[[0], [.nan]]]}}"
            ),
            "neighbours.pairs.0.1.0: NaN is not allowed: stage parameters are finite numbers"
        );
    assert!(refused(
        kind(),
        &audit(
            "{kind: mechanism.noise, with: {column: value, noise: laplace, epsilon: 1}}",
            ", confidence: 1"
        )
    )
    .starts_with("confidence: "));
}

/// A mechanism that does not honour `samples` is caught by its output's shape, not
/// audited on the wrong number of draws: `mechanism.select` without `count:` has no
/// `sample` column.
#[test]
fn an_output_of_the_wrong_shape_fails_with_what_was_expected() {
    let with = "{mechanism: {kind: mechanism.select, with: {method: exponential, epsilon: 1}},
            output: [candidate], claim: {epsilon: 1},
            neighbours: {column: utility, relation: linf, pairs: [[[0, 1], [1, 0]]], same: {candidate: [a, b]}},
            samples: 1000, search_samples: 1000}";
    let e = crate::kind::testing::fails(kind(), with, &[], 1);
    assert!(
        e.contains("the audited mechanism (mechanism.select) on x = [0, 1] (pair 1)"),
        "{e}"
    );
    assert!(e.contains("no `sample` column"), "{e}");
}

/// Every claim type can be stated, for any mechanism: ρ, μ and Rényi claims audited along
/// their curves (the row names the claim as written and its conversion), each with a δ to test
/// one point only; what cannot be a claim is refused where it is written.
#[test]
fn every_claim_type_is_stated_and_converted() {
    let audit = |claim: &str, seed: u128| {
        let with = format!(
            "{{mechanism: {{kind: mechanism.noise, with: {{column: value, noise: gaussian, calibration: zcdp, rho: 0.5}}}},
              output: [noisy], claim: {claim}, expect: none,
              neighbours: {{column: value, relation: l1, base: [0], patterns: [one_above]}},
              samples: 50000, search_samples: 10000}}"
        );
        run(kind(), &with, &[], seed).unwrap().frame
    };
    // σ = 1: exactly 1-GDP, 0.5-zCDP, Rényi ε(α) = α/2.
    for (claim, says, conversion) in [
        ("{mu: 1}", "μ = 1 (GDP)", "exact"),
        ("{rho: 0.5}", "ρ = 0.5 (zCDP)", "Canonne"),
        (
            "{renyi: {alpha: [2, 4, 8], epsilon: [1, 2, 4]}}",
            "Rényi ε(2) = 1",
            "Canonne",
        ),
    ] {
        let f = audit(claim, 3);
        assert_eq!(strings(&f, "violation"), ["false"], "{claim}: {f}");
        assert!(strings(&f, "claim")[0].starts_with(says), "{f}");
        assert!(strings(&f, "conversion")[0].contains(conversion), "{f}");
        assert_eq!(strings(&f, "unexpected"), ["false"], "{f}");
        // The same claim with `delta`: its one point at δ = 10⁻³.
        let with_delta = format!("{}, delta: 1.0e-3}}", &claim[..claim.len() - 1]);
        let at = audit(&with_delta, 4);
        assert_eq!(floats(&at, "delta"), [1e-3], "{claim}: {at}");
    }
    // Half the noise the claim needs: flagged along the curve, and unexpected under `none`.
    let bad = run(
        kind(),
        "{mechanism: {kind: mechanism.noise, with: {column: value, noise: gaussian, calibration: zcdp, rho: 2}},
          output: [noisy], claim: {mu: 1}, expect: none,
          neighbours: {column: value, relation: l1, base: [0], patterns: [one_above]},
          samples: 100000, search_samples: 20000}",
        &[],
        5,
    )
    .unwrap()
    .frame;
    assert_eq!(strings(&bad, "violation"), ["true"], "{bad}");
    assert_eq!(strings(&bad, "unexpected"), ["true"], "{bad}");
    let v = super::verdict(&bad).unwrap();
    assert!(v.flagged && v.unexpected, "{v:?}");
    assert!(
        v.line.contains("μ = 1 (GDP)") && v.line.contains("ε_lb"),
        "{}",
        v.line
    );
    let mech = "mechanism: {kind: mechanism.noise, with: {column: value, noise: laplace, epsilon: 1}}, output: [noisy], neighbours: {column: value, relation: l1, base: [0], patterns: [one_above]}";
    for (claim, at, says) in [
        ("{epsilon: 1, rho: 1}", "claim", "epsilon and rho"),
        (
            "{renyi: {alpha: [2, 4], epsilon: [1]}}",
            "claim.renyi",
            "one ε per order",
        ),
        ("{renyi: {alpha: [1], epsilon: [1]}}", "claim.renyi", "> 1"),
        ("{mu: 1, delta: 0}", "claim.delta", "(0, 1)"),
        ("{mu: -1}", "claim.mu", ""),
    ] {
        let e = refused(kind(), &format!("{{{mech}, claim: {claim}}}"));
        assert!(
            e.starts_with(&format!("{at}: ")) && e.contains(says),
            "{claim}: {e}"
        );
    }
    let e = refused(
        kind(),
        &format!("{{{mech}, claim: {{epsilon: 1}}, expect: maybe}}"),
    );
    assert!(e.starts_with("expect") && e.contains("violation"), "{e}");
}
