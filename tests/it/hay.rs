//! The pipelines the command-line, safety, store and Slurm tests start from, written once (as
//! ripgrep's `tests/hay.rs` holds its haystacks): each test edits its own copy with
//! `str::replace`, so a test says which line it changes and what it expects of that change.

/// A small valid pipeline: a Laplace-noised count per ε, repeated four times and summarised,
/// and an exponential-mechanism pick per ε. Line 16 holds `noisy`'s `with:` (tests locate
/// errors there); its text pieces (`repeat: 4`, `samples: 100000}`, `samples: 300000}`,
/// `profiles:\n  small:`) are what the tests replace.
pub const TINY: &str = r#"name: tiny
title: A tiny pipeline
source: {paper: test, item: none}
description: Laplace noise on one count, repeated and summarised.
seed: 7
axes:
  eps: [0.5, 1.0]
stages:
  counts:
    kind: load.table
    with: {columns: {candidate: [a, b, c], utility: [1, 5, 2]}}
  noisy:
    kind: mechanism.noise
    input: counts
    repeat: 4
    with: {column: utility, noise: laplace, epsilon: $eps, samples: 100000}
  summary:
    kind: aggregate.summary
    input: noisy
    over: [rep]
    with: {values: [noisy], by: [row]}
  pick:
    kind: mechanism.select
    input: counts
    with: {method: exponential, epsilon: $eps, samples: 300000}
profiles:
  small:
    axes: {eps: [1.0]}
"#;

/// A small valid pipeline whose every stage is stored: Laplace noise on a table per ε,
/// repeated three times, summarised, and a figure per ε — the store tests count its instances
/// (2 ε × 3 repetitions, 2 summaries, 1 figure) and its entries; the Slurm tests shard it.
/// Its text pieces (`seed: 5`, `first title`, `y: mean,`, `samples: 200}`, `eps: [0.5, 1.0]`)
/// are what the tests replace.
pub const FIGURED: &str = r#"name: cached
title: Store test
source: {paper: test, item: none}
description: Noise, a summary over repetitions, and a figure.
seed: 5
axes:
  eps: [0.5, 1.0]
stages:
  counts:
    kind: load.table
    with: {columns: {candidate: [a, b, c], utility: [1, 5, 2]}}
  noisy:
    kind: mechanism.noise
    input: counts
    repeat: 3
    with: {column: utility, noise: laplace, epsilon: $eps, samples: 200}
  summary:
    kind: aggregate.summary
    input: noisy
    over: [rep]
    with: {values: [noisy], by: [row]}
  figure:
    kind: plot.lines
    input: summary
    with: {x: row, y: mean, series: eps, title: "first title", x_label: row, y_label: mean}
"#;
