//! `audit.epsilon`: an empirical lower bound on a mechanism's privacy loss, with confidence,
//! from samples of its output on neighbouring inputs ([`crate::mech::audit`]).
//!
//! The audited mechanism is a stage written inline (`mechanism: {kind: mechanism.noise,
//! with: {…}}`), built through the registry and run as the engine would run it, once per
//! chunk of draws, on a one-frame input holding a neighbouring vector of query answers, with
//! its `samples` parameter set to the chunk's size and a seed derived from (pair, side, split,
//! chunk). A built-in kind and an external program (`kind: external`, whose program honours a
//! `samples` parameter) are audited alike; the audit knows nothing of either. The audit
//! stage's own inputs follow the neighbouring one (a channel's source distribution). The claim
//! is written (`claim: {epsilon: 1}`) or, for a mechanism that computes its ε (a channel of
//! Wu et al., Algorithm 3), read from its output (`claim: {epsilon: {column: epsilon}}`).
//!
//! The output is one row: the claim, the bound, the event and pair that gave it, and whether
//! the bound exceeds the claim (`violation`). **No violation proves nothing**: an audit can
//! show that a mechanism is not as private as it claims, never that it is.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};

use anyhow::{bail, Context, Result};
use polars::prelude::{Column, DataFrame, DataType};
use rand::Rng;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_yaml_ng::{Mapping, Value};

mod read;

use super::claim::{held, Claim, Held, HeldClaim};
use super::neighbours::{Neighbours, Pair};
use crate::mech::audit::{audit, detectable, draws_to_flag, Draw, Plan, Releases, Searches};

use crate::stages::columns::{f64_col, FrameBuilder};
use crate::stages::param::{Count, Level};
use crate::stages::report::layout::{Layout, LayoutColumn, Role, Show};
use crate::stages::{
    check_size_at, params, product, rng_from_seed, substream, Artifact, Ctx, FileSource, Gather,
    KindInfo, Limit, Output, ParamError, StageRun,
};
use crate::text::significant;
use read::{output_column, Shape, NO_ROW};

/// What the audit needs of the registry: the kinds by name. The registry hands itself in
/// (`kind::<Registry>()`), so this file never imports it and `src/stages` keeps its imports
/// free of circles.
pub trait Kinds: 'static {
    fn find(name: &str) -> Option<&'static KindInfo>;
}

/// The kind, given the registry that builds the audited mechanism.
pub const fn kind<K: Kinds>() -> KindInfo {
    // Version 4: claims are curves (zCDP at a δ by Canonne, Kamath & Steinke's conversion, not
    // Bun & Steinke's), each search family keeps its own candidates, the bits search, and the
    // columns of [`CLAIM`]. Version 5: records of several fields (`fields`), releases of varying
    // length (`max_rows`), records' values as written (not to 4 digits), and `draws_to_flag`
    // empty on a flagged row.
    KindInfo {
        name: "audit.epsilon",
        version: 5,
        random: true,
        // It runs what it audits: an external program's consent is asked for by the programs
        // it names, so auditing built-in kinds needs none.
        runs_programs: true,
        summary: "Audits a mechanism stage (built-in or external) as a black box: samples on neighbouring inputs, an event chosen on a search split and measured on a fresh one, and an ε lower bound from Clopper–Pearson bounds at the stated confidence. Shows a mechanism broken, never private.",
        params: params::<Audit>,
        gather: Gather::Nothing,
        build: build::<K>,
        verdict: Some(verdict),
    }
}

/// The verdict an audit's row states (see [`crate::kind::Verdict`]): flagged when its bound
/// is above the claim at the tested point, unexpected when that differs from `expect:` (any
/// flag, without one). Its line: `flagged: ρ = 0.5 (zCDP) at (ε, δ) = (1.2, 1e-05): ε_lb 1.4
/// (δ_lb 0.003) on `noisy ≥ 3.2` (expect: violation)`.
fn verdict(frame: &DataFrame) -> Option<crate::kind::Verdict> {
    let flag = |name: &str| -> Option<bool> { frame.column(name).ok()?.bool().ok()?.get(0) };
    let num = |name: &str| -> Option<f64> {
        frame
            .column(name)
            .ok()?
            .cast(&DataType::Float64)
            .ok()?
            .f64()
            .ok()?
            .get(0)
    };
    let text = |name: &str| -> String {
        frame
            .column(name)
            .ok()
            .and_then(|c| c.str().ok()?.get(0).map(str::to_string))
            .unwrap_or_default()
    };
    let flagged = flag("violation")?;
    let unexpected = flag("unexpected")?;
    if frame.height() != 1 {
        return None;
    }
    let s = |v: Option<f64>| v.map_or("—".to_string(), |v| significant(v, 4));
    let expect = text("expect");
    let line = format!(
        "{}: {} at (ε, δ) = ({}, {}): ε_lb {} (δ_lb {}) on `{}`{}",
        if flagged { "flagged" } else { "not flagged" },
        text("claim"),
        s(num("epsilon")),
        s(num("delta")),
        s(num("epsilon_lb")),
        s(num("delta_lb")),
        text("event"),
        if expect.is_empty() {
            String::new()
        } else {
            format!(" (expect: {expect})")
        }
    );
    Some(crate::kind::Verdict {
        flagged,
        unexpected,
        line,
    })
}

/// Draws per run of the audited mechanism: memory holds one chunk per thread, whatever the
/// number of validation samples.
const CHUNK: u64 = 1 << 17;

/// The default search split's largest size: it is held in memory (8 bytes a number), where the
/// validation split is counted as it is drawn.
const DEFAULT_SEARCH_MAX: u64 = 1_000_000;

/// The output's columns (after the instance's axis columns in a gathered frame).
pub(crate) const COLUMNS: [&str; 10] = [
    "epsilon",
    "delta",
    "epsilon_lb",
    "confidence",
    "samples",
    "p1",
    "p2",
    "pair",
    "event",
    "violation",
];

/// How sure it is, after [`COLUMNS`] (version 2 on): the smallest loss this event could have
/// shown at these draws, and what the search split said of it (`mech::audit::search`'s module
/// doc). Empty when no event was found.
pub(crate) const SURE: [&str; 5] = [
    "detectable",
    "search_samples",
    "search_k1",
    "search_k2",
    "search_score",
];

/// The claim and the verdict, after [`SURE`] (version 4 on): the claim as written, the
/// conversion that made its (ε, δ) points, δ_LB at the tested ε, the draws per side that would
/// flag it were the mechanism 10 % worse on the event ([`draws_to_flag`]; empty on a flagged
/// row), what was expected,
/// whether the verdict differs from it, and whether the audited mechanism draws from the seed
/// alone (false for a program that cannot be seeded: its row is not reproducible bit for bit).
pub(crate) const CLAIM: [&str; 7] = [
    "claim",
    "conversion",
    "delta_lb",
    "draws_to_flag",
    "expect",
    "unexpected",
    "reproducible",
];

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Mechanism {
    /// the audited stage's kind (any kind with a `samples` parameter; `external` with `samples_at: params.samples`)
    kind: String,
    /// its parameters, as in its own stage (without `samples`: the audit sets it)
    #[serde(default = "empty")]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    with: Value,
}

fn empty() -> Value {
    Value::Mapping(Mapping::new())
}

/// The event searches.
#[derive(Deserialize, serde::Serialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Search {
    /// sets of exact outcomes, by likelihood ratio (at most 10⁴ distinct outcomes)
    Discrete,
    /// thresholds and intervals at quantiles, on each number of the release
    Scalar,
    /// thresholds and intervals on a logistic-regression score of the release's features (releases of several numbers): each number, an indicator per recurring code such as ⊥ = −1000 (a code outside the others' range read as their mean in the number), a count per code several numbers hold
    Linear,
    /// outcomes one side draws and the other never does, bit for bit, where `discrete` does not apply (a floating-point sampler's sparse support)
    Support,
    /// thresholds and intervals on each number's bits, its lowest set bit and its significant bits, where `discrete` does not apply: the floating-point implementation's holes (numpy's Laplace). Not run unless listed: it audits the implementation, not the mechanism, and every textbook `x + noise` sampler fails it where its inputs lie within a few noise scales of a power of two (Mironov, CCS'12)
    Bits,
}

/// What an audit expects of its verdict.
#[derive(Deserialize, serde::Serialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Expect {
    /// a known-broken variant: the audit should flag it
    Violation,
    /// the audit should not flag it
    None,
}

impl Expect {
    fn name(self) -> &'static str {
        match self {
            Expect::Violation => "violation",
            Expect::None => "none",
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Audit {
    /// the audited mechanism, a stage written inline: {kind: mechanism.noise, with: {column: value, noise: laplace, epsilon: $eps}}
    mechanism: Mechanism,
    /// the mechanism's released columns: one release is their values on the rows that share a `sample` value
    output: Vec<String>,
    /// when the mechanism reports its draws as a histogram (mechanism.select), the column counting each row's draws
    #[serde(default, skip_serializing_if = "Option::is_none")]
    count: Option<String>,
    /// the privacy the mechanism claims (default: what its kind states)
    #[serde(default)]
    claim: Claim,
    /// the neighbouring inputs
    neighbours: Neighbours,
    /// draws per side that measure the chosen event (the validation split)
    #[serde(default = "crate::stages::param::count::<1_000_000>")]
    samples: Count,
    /// draws per side and pair that choose the event (the search split, held in memory; its first half proposes events, its second half scores them); default: as many as `samples`, at most 10⁶ — an event chosen on far fewer draws than measure it is too often a tail fitted to noise
    #[serde(default, skip_serializing_if = "Option::is_none")]
    search_samples: Option<Count>,
    /// probability that both Clopper–Pearson bounds hold together
    #[serde(default = "crate::stages::param::level_95")]
    confidence: Level,
    /// the event searches to run (each where it applies); default: discrete, scalar, linear and support — `bits` is run only when listed
    #[serde(default = "all_searches")]
    searches: Vec<Search>,
    /// the verdict expected: `violation` (a known-broken variant, shown as such) or `none`; `dplab run` exits with status 4 when a verdict differs from its expectation, and with no `expect:` any flag counts as unexpected
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expect: Option<Expect>,
    /// the most rows a release may have, for a release whose length depends on the data (a label set, a model's coefficients of the classes it saw): each release is then read as its number of rows followed by its first `max_rows` rows in the order written, the missing ones ∅ (a code no value takes), so that the events see both its length and its values; without it every release must have as many rows
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_rows: Option<crate::stages::param::Between<1, 10000>>,
    /// where the audit writes the number of draws in the mechanism's `with:` (an external program: params.samples, which it must honour)
    #[serde(default = "samples_key")]
    samples_at: String,
}

impl Audit {
    /// Draws per side and pair of the search split.
    fn search(&self) -> u64 {
        match &self.search_samples {
            Some(s) => s.get(),
            None => self.samples.get().min(DEFAULT_SEARCH_MAX),
        }
    }
}

fn all_searches() -> Vec<Search> {
    vec![
        Search::Discrete,
        Search::Scalar,
        Search::Linear,
        Search::Support,
    ]
}
fn samples_key() -> String {
    "samples".into()
}

/// The audit, its pairs, and the audited stage built once per chunk size it is run with.
struct AuditRun {
    audit: Audit,
    /// The claim it holds the mechanism to.
    held: Held,
    pairs: Vec<Pair>,
    kind: &'static str,
    inner: BTreeMap<u64, Box<dyn StageRun>>,
    /// One more build, for the files, trees and programs the engine asks about.
    shown: Box<dyn StageRun>,
}

fn build<K: Kinds>(with: &Value) -> Result<Box<dyn StageRun>, ParamError> {
    let audit: Audit = crate::kind::parse(with)?;
    let pairs = audit.neighbours.pairs()?;
    audit.validate(pairs.len())?;
    let name = &audit.mechanism.kind;
    let Some(kind) = K::find(name) else {
        return Err(ParamError::at(
            "mechanism.kind",
            format!("no stage kind `{name}` (`dplab list` lists them)"),
        ));
    };
    let key = audit.samples_at.split('.').next().unwrap_or_default();
    if !kind.param_names().iter().any(|p| p == key) {
        return Err(ParamError::at(
            "mechanism.kind",
            format!(
                "kind `{name}` has no `{key}` parameter: the audit draws its samples by setting `{}` to the number it needs (an external program: `samples_at: params.samples`, which the program must honour)",
                audit.samples_at
            ),
        ));
    }
    let built = |n: u64| {
        let with = with_samples(&audit.mechanism.with, &audit.samples_at, n)?;
        (kind.build)(&with).map_err(|e| inner_error(&e))
    };
    let mut inner = BTreeMap::new();
    for n in chunk_sizes(audit.samples.get(), audit.search()) {
        inner.insert(n, built(n)?);
    }
    let shown = built(CHUNK.min(audit.samples.get()))?;
    let held = held(&audit.claim, shown.privacy(), kind.name)?;
    Ok(Box::new(AuditRun {
        audit,
        held,
        pairs,
        kind: kind.name,
        inner,
        shown,
    }))
}

/// The draws per run the audit asks for: full chunks and each split's last one.
fn chunk_sizes(samples: u64, search: u64) -> Vec<u64> {
    let mut sizes = vec![CHUNK.min(samples), CHUNK.min(search)];
    for total in [samples, search] {
        if total > CHUNK && total % CHUNK != 0 {
            sizes.push(total % CHUNK);
        }
    }
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// An error of the audited stage's parameters, located inside `mechanism.with`.
fn inner_error(e: &ParamError) -> ParamError {
    let mut path = vec!["mechanism".to_string(), "with".to_string()];
    path.extend(e.path.iter().cloned());
    ParamError {
        path,
        message: e.message.clone(),
    }
}

/// The mechanism's `with:` with `n` at the dotted path `at`, which the user must not have set.
fn with_samples(with: &Value, at: &str, n: u64) -> Result<Value, ParamError> {
    let here = |m: String| ParamError::at(&format!("mechanism.with.{at}"), m);
    let mut with = with.clone();
    let mut node = &mut with;
    let keys: Vec<&str> = at.split('.').collect();
    for (i, k) in keys.iter().enumerate() {
        let Value::Mapping(m) = node else {
            return Err(here(format!(
                "`{}` is not a mapping, so the audit cannot set `{at}` in it",
                keys[..i].join(".")
            )));
        };
        let k = Value::String(k.to_string());
        if i + 1 == keys.len() {
            if m.contains_key(&k) {
                return Err(here(format!(
                    "the audit sets `{at}` (to the draws it needs): remove it here"
                )));
            }
            m.insert(k, Value::Number(n.into()));
            break;
        }
        node = m.entry(k).or_insert_with(empty);
    }
    Ok(with)
}

impl Audit {
    /// Checks the parameters, with the number of neighbouring pairs (explicit and generated).
    fn validate(&self, pairs: usize) -> Result<(), ParamError> {
        let (n, s) = (self.samples.get(), self.search());
        // Two sides; the search split once per pair.
        let pairs = pairs as u64;
        let draws = product(&[2, s, pairs.max(1)]).and_then(|x| x.checked_add(product(&[2, n])?));
        check_size_at(
            "samples",
            Limit::Draws,
            &format!("2 sides × (samples + pairs × search_samples) (2 × ({n} + {pairs} × {s}))"),
            draws,
        )?;
        if self.output.is_empty() {
            return Err(ParamError::at(
                "output",
                "name the mechanism's released column(s), e.g. [noisy]",
            ));
        }
        crate::kind::distinct("output", &self.output)?;
        if let (Some(_), Some(count)) = (&self.max_rows, &self.count) {
            return Err(ParamError::at(
                "max_rows",
                format!("a histogram of releases (`count: {count}`) has one row per release: `max_rows` is for releases of several rows whose number varies"),
            ));
        }
        if self.searches.is_empty() {
            return Err(ParamError::at("searches", "give at least one search"));
        }
        crate::kind::distinct(
            "searches",
            &self
                .searches
                .iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>(),
        )?;
        if self.samples_at.split('.').any(str::is_empty) {
            return Err(ParamError::at(
                "samples_at",
                format!("`{}` is not a dotted path of keys", self.samples_at),
            ));
        }
        if !matches!(self.mechanism.with, Value::Mapping(_)) {
            return Err(ParamError::at(
                "mechanism.with",
                "the mechanism's `with` is a mapping of its parameters",
            ));
        }
        Ok(())
    }
}

/// The audited stage's input on one side of a pair: the answers (a dataset's counts, beside
/// its bins under add_remove and replace) and the `same` columns; or, under `fields`, the
/// dataset's rows.
fn input(n: &Neighbours, pair: &Pair, side: usize) -> Result<DataFrame> {
    let mut fb = FrameBuilder::new();
    if let Some(columns) = n.rows_frame(pair, side) {
        for (name, col) in columns {
            fb = match col {
                super::neighbours::Column::F64(v) => fb.f64(&name, v),
                super::neighbours::Column::Text(v) => fb.str(&name, v),
            };
        }
        return fb.build();
    }
    if let Some((key, bins)) = n.key_column() {
        fb = fb.str(key, bins);
    }
    let answers = if side == 0 { &pair.x } else { &pair.x2 };
    fb = fb.f64(&n.column, answers.to_vec());
    for (name, values) in &n.same {
        fb = fb.str(name, values.clone());
    }
    fb.build()
}

/// The ε a mechanism's output claims in its column `name`: one finite value > 0 on every row.
fn claimed_in(frame: &DataFrame, name: &str) -> Result<f64> {
    output_column(frame, name)?;
    let values = f64_col(frame, name)?;
    let Some(&first) = values.first() else {
        bail!("its output has no rows, so no claimed ε in column `{name}`");
    };
    if let Some(v) = values.iter().find(|v| v.to_bits() != first.to_bits()) {
        bail!("its column `{name}` (the claimed ε) holds {first} and {v}: one claim per run");
    }
    if !(first.is_finite() && first > 0.0) {
        bail!("its column `{name}` claims ε = {first}: an audit needs a finite claim > 0 (an infinite ε promises nothing to audit)");
    }
    Ok(first)
}

impl AuditRun {
    /// One chunk of draws of the audited stage.
    fn draw(
        &self,
        ctx: &Ctx,
        inputs: &[[DataFrame; 2]],
        d: Draw,
        names: &Mutex<HashMap<u64, String>>,
        shape: &OnceLock<Shape>,
        claimed: &OnceLock<f64>,
    ) -> Result<Releases> {
        let seed: u128 = substream(ctx.seed, d.stream()).random();
        let inner = self.inner.get(&d.n).with_context(|| {
            format!("no run of {} draws was prepared (a bug in the audit)", d.n)
        })?;
        // The neighbouring input first, then the audit stage's own inputs (a channel's source
        // distribution, a program's side data): the mechanism gets them as its later inputs.
        let mut frames = Vec::with_capacity(1 + ctx.inputs.len());
        frames.push(inputs[d.pair][d.side].clone());
        frames.extend(ctx.inputs.iter().cloned());
        let mut input_names = vec!["neighbour".to_string()];
        input_names.extend(ctx.input_names.iter().cloned());
        let mut ictx = Ctx {
            inputs: &frames,
            input_names: &input_names,
            rng: rng_from_seed(seed),
            seed,
            files: ctx.files,
            axis_names: &[],
            stage: ctx.stage,
            label: ctx.label,
            axes: ctx.axes,
            again: ctx.again,
        };
        let where_ = || {
            format!(
                "the audited mechanism ({}) on {}",
                self.kind,
                self.pairs[d.pair].side_text(d.side)
            )
        };
        let out = inner.run(&mut ictx).with_context(where_)?;
        if let HeldClaim::Column { column: c, .. } = &self.held.claim {
            let eps = claimed_in(&out.frame, c).with_context(where_)?;
            let first = *claimed.get_or_init(|| eps);
            if first.to_bits() != eps.to_bits() {
                bail!(
                    "{}: its claimed ε (column `{c}`) changed between runs ({first}, then {eps})",
                    where_(),
                );
            }
        }
        let (releases, found) = self.releases(&out.frame, d.n, names).with_context(where_)?;
        let first = *shape.get_or_init(|| found);
        if first != found {
            bail!(
                "{}: its releases changed shape between runs ({} rows per release, then {}): a release whose length depends on the data needs `max_rows:` (the most rows a release may have)",
                where_(),
                first.rows,
                found.rows
            );
        }
        Ok(releases)
    }
}

impl StageRun for AuditRun {
    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let a = &self.audit;
        let inputs = self
            .pairs
            .iter()
            .map(|p| Ok([input(&a.neighbours, p, 0)?, input(&a.neighbours, p, 1)?]))
            .collect::<Result<Vec<_>>>()?;
        let names = Mutex::new(HashMap::new());
        let shape = OnceLock::new();
        let claimed = OnceLock::new();
        let wanted = |s: Search| a.searches.contains(&s);
        let mut searches = Searches {
            discrete: wanted(Search::Discrete),
            scalar: wanted(Search::Scalar),
            linear: wanted(Search::Linear),
            support: wanted(Search::Support),
            bits: wanted(Search::Bits),
        };
        // Equal answers are one input (the rest of the input is the same in every pair).
        let mut seen: Vec<Vec<u64>> = Vec::new();
        let mut number = |x: &[f64]| {
            let bits: Vec<u64> = x.iter().map(|f| f.to_bits()).collect();
            match seen.iter().position(|s| *s == bits) {
                Some(i) => i,
                None => {
                    seen.push(bits);
                    seen.len() - 1
                }
            }
        };
        let numbered: Vec<[usize; 2]> = self
            .pairs
            .iter()
            .map(|p| [number(&p.x), number(&p.x2)])
            .collect();
        let plan = |searches, points| Plan {
            inputs: numbered.clone(),
            search_samples: a.search(),
            samples: a.samples.get(),
            chunk: CHUNK,
            confidence: *a.confidence,
            points,
            searches,
            // A program's draws wait on its answers (mech::audit's `Draws`).
            waits: !self.shown.programs().is_empty(),
        };
        let ctx: &Ctx = ctx;
        // Text outcomes have no order: only sets of them are events. Whether the release is
        // text is known after the first draw, which the search split's first chunk makes.
        let probe = self.draw(
            ctx,
            &inputs,
            Draw {
                pair: 0,
                side: 0,
                split: crate::mech::audit::Split::Search,
                chunk: 0,
                n: CHUNK.min(a.search()),
            },
            &names,
            &shape,
            &claimed,
        )?;
        drop(probe);
        let sh = shape.get().copied().unwrap_or(Shape {
            rows: 1,
            ragged: false,
            text: false,
        });
        if sh.text {
            searches.scalar = false;
            searches.linear = false;
            searches.bits = false;
            if !searches.discrete && !searches.support {
                bail!("the released column(s) hold text, which only the `discrete` and `support` searches can audit: add one to `searches`");
            }
        }
        // The probe above ran the mechanism, so a claim it reports is known.
        let privacy =
            self.held
                .privacy(claimed.get().copied())
                .with_context(|| match &self.held.claim {
                    HeldClaim::Column { column, .. } => {
                        format!("the mechanism reported no claimed ε in column `{column}`")
                    }
                    HeldClaim::Stated(_) => String::new(),
                })?;
        let points = privacy.points(self.held.at);
        if points.is_empty() {
            bail!(
                "the claim {} gives no (ε, δ) point to test (δ outside (0, 1)?)",
                privacy.describe()
            );
        }
        let found = audit(&plan(searches, points.clone()), |d| {
            self.draw(ctx, &inputs, d, &names, &shape, &claimed)
        })?;
        let names = names.into_inner().unwrap_or_default();
        let confidence = *a.confidence;
        // The point reported without an event: a point claim's own; a curve's at the δ
        // nearest one draw in the validation split (the smallest δ it could show).
        let (eps, delta) = match &found {
            Some(f) => (f.epsilon, f.delta),
            None => {
                let one = 1.0 / a.samples.get() as f64;
                points
                    .iter()
                    .copied()
                    .min_by(|x, y| {
                        (x.1.ln() - one.ln())
                            .abs()
                            .total_cmp(&(y.1.ln() - one.ln()).abs())
                    })
                    .unwrap_or((f64::NAN, f64::NAN))
            }
        };
        let sure = found.as_ref().map(|f| {
            (
                detectable(f, f.epsilon, f.delta, confidence),
                f.search_n as i64,
                f.search_k1 as i64,
                f.search_k2 as i64,
                f.search_score,
            )
        });
        let (lb, p1, p2, pair, event) = match &found {
            Some(f) => (
                f.epsilon_lb,
                Some(f.p1()),
                Some(f.p2()),
                self.pairs[f.pair].text(f.forward),
                f.event.describe(&|j| self.coordinate_name(sh, j), &|_, v| {
                    if v.to_bits() == NO_ROW.to_bits() {
                        "∅".to_string()
                    } else if sh.text {
                        names
                            .get(&(v as u64))
                            .cloned()
                            .unwrap_or_else(|| significant(v, 4))
                    } else {
                        significant(v, 4)
                    }
                }),
            ),
            None => (
                0.0,
                None,
                None,
                String::new(),
                "no event separated the inputs on the search split".to_string(),
            ),
        };
        let violation = lb > eps;
        let unexpected = match a.expect {
            Some(Expect::Violation) => !violation,
            Some(Expect::None) | None => violation,
        };
        let frame = FrameBuilder::new()
            .f64("epsilon", vec![eps])
            .f64("delta", vec![delta])
            .f64("epsilon_lb", vec![lb])
            .f64("confidence", vec![confidence])
            .i64("samples", vec![a.samples.get() as i64])
            .opt_f64("p1", vec![p1])
            .opt_f64("p2", vec![p2])
            .str("pair", vec![pair])
            .str("event", vec![event])
            .build()?;
        let mut frame = frame;
        frame.with_column(Column::new("violation".into(), vec![violation]))?;
        let sure_frame = FrameBuilder::new()
            .opt_f64("detectable", vec![sure.and_then(|s| s.0)])
            .opt_i64("search_samples", vec![sure.map(|s| s.1)])
            .opt_i64("search_k1", vec![sure.map(|s| s.2)])
            .opt_i64("search_k2", vec![sure.map(|s| s.3)])
            .opt_f64("search_score", vec![sure.map(|s| s.4)])
            .str("claim", vec![privacy.describe()])
            .str("conversion", vec![privacy.conversion().to_string()])
            .opt_f64("delta_lb", vec![found.as_ref().map(|f| f.delta_lb)])
            .opt_i64(
                "draws_to_flag",
                // Empty on a flagged row: its draws were enough.
                vec![found
                    .as_ref()
                    .filter(|_| !violation)
                    .and_then(|f| draws_to_flag(f, confidence))
                    .map(|n| i64::try_from(n).unwrap_or(i64::MAX))],
            )
            .str(
                "expect",
                vec![a.expect.map_or("", Expect::name).to_string()],
            )
            .build()?;
        for c in sure_frame.columns() {
            frame.with_column(c.clone())?;
        }
        frame.with_column(Column::new("unexpected".into(), vec![unexpected]))?;
        frame.with_column(Column::new(
            "reproducible".into(),
            vec![self.inner_any().seeded()],
        ))?;
        Ok(frame.into())
    }

    fn files(&self) -> Vec<(&'static str, &std::path::Path)> {
        // Located at `mechanism`: a key is a static name, and the inner stage's are its own.
        self.inner_any()
            .files()
            .into_iter()
            .map(|(_, p)| ("mechanism", p))
            .collect()
    }
    fn check_files(&self, files: &dyn FileSource) -> Result<(), ParamError> {
        self.inner_any()
            .check_files(files)
            .map_err(|e| inner_error(&e))
    }
    fn sources(&self) -> Vec<serde_json::Value> {
        self.inner_any().sources()
    }
    /// An audit releases nothing private of its own.
    fn privacy(&self) -> Option<crate::mech::Privacy> {
        None
    }
    fn trees(&self) -> Vec<(&'static str, &std::path::Path)> {
        self.inner_any()
            .trees()
            .into_iter()
            .map(|(_, p)| ("mechanism", p))
            .collect()
    }
    fn programs(&self) -> Vec<(String, Vec<String>)> {
        self.inner_any()
            .programs()
            .into_iter()
            .map(|(param, argv)| (format!("mechanism.with.{param}"), argv))
            .collect()
    }
    fn probes(&self) -> Vec<crate::kind::Probe> {
        self.inner_any().probes()
    }
    fn seeded(&self) -> bool {
        self.inner_any().seeded()
    }
    fn recorded(&self) -> Vec<(String, String)> {
        self.inner_any().recorded()
    }
    fn columns_read(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        Some(
            COLUMNS
                .iter()
                .chain(&SURE)
                .chain(&CLAIM)
                .map(|c| c.to_string())
                .collect(),
        )
    }
    /// The layout that puts its rows in the report's Audits section ([`Show::Audit`]): the
    /// report knows an audit by its layout, as it knows a table, never by this kind's name.
    fn stage_files(&self) -> Result<Vec<Artifact>> {
        let layout = Layout {
            title: "ε lower bounds".into(),
            notes: None,
            digits: 4,
            columns: COLUMNS
                .iter()
                .chain(&SURE)
                .chain(&CLAIM)
                .map(|c| LayoutColumn {
                    name: c.to_string(),
                    header: c.to_string(),
                    role: Role::Value,
                })
                .collect(),
            show: Show::Audit,
            markdown: false,
            ours: Vec::new(),
            in_audits: false,
        };
        Ok(vec![layout.artifact()?])
    }
}

impl AuditRun {
    /// The audited stage as the engine sees it (every chunk size's build names the same
    /// files and programs).
    fn inner_any(&self) -> &dyn StageRun {
        self.shown.as_ref()
    }
}

#[cfg(test)]
mod tests;
