//! `mechanism.channel`: releases each record's letter through a privacy channel of Wu et al.
//! 2020 — the rate–distortion channel Blahut–Arimoto finds at λ, or the symmetric channel —
//! `samples` times: x̂ ~ q(·|x) per record.
//!
//! # Guarantee
//! Each release of one record is ε-DP for ε the channel's Algorithm 3 value (the `epsilon`
//! column, nats), neighbours being any two letters of the alphabet: the guarantee of
//! [`crate::mech::rate_distortion`]. The channel is computed as `mechanism.rate_distortion`
//! and `mechanism.symmetric_channel` compute it (same parameters, same code), so an audit of
//! this kind audits theirs: `audit.epsilon` with `claim: {epsilon: {column: epsilon}}` holds
//! the draws against the ε the channel claims.

use std::collections::HashMap;

use anyhow::{anyhow, bail, Result};
use polars::prelude::DataFrame;
use schemars::JsonSchema;
use serde::Deserialize;

use super::rate_distortion::RateDistortion;
use super::symmetric_channel::Symmetric;
use crate::mech::rate_distortion::{self as rd, Channel as Matrix};
use crate::stages::columns::{f64_col, str_col, FrameBuilder};
use crate::stages::load::distribution::source;
use crate::stages::param::Count;
use crate::stages::{
    build, check_size_at, check_size_run, params, product, Ctx, Gather, KindInfo, Limit, Output,
    ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "mechanism.channel",
    version: 1,
    random: true,
    runs_programs: false,
    summary: "Releases each record's letter through the rate–distortion channel at λ (Blahut–Arimoto, as mechanism.rate_distortion) or the symmetric channel (as mechanism.symmetric_channel), `samples` times. Inputs: the records, then the source distribution. Columns: sample, record, the letter, released, epsilon (the channel's ε, Algorithm 3, nats).",
    params: params::<ChannelRelease>,
    gather: Gather::Nothing,
    build: build::<ChannelRelease>,
    verdict: None,
};

/// The columns it writes besides the records' letter column (which comes third).
const ADDED: [&str; 4] = ["sample", "record", "released", "epsilon"];

/// Which channel, with its own kind's parameters: exactly one of the two.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Which {
    /// the channel minimising I(X; X̂) + λ·E[d] (mechanism.rate_distortion's parameters, without z_size)
    rate_distortion: Option<RateDistortion>,
    /// the symmetric channel (mechanism.symmetric_channel's parameters, with `value`)
    symmetric: Option<Symmetric>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChannelRelease {
    /// the records' column holding each record's letter (a `label` of the source distribution)
    column: String,
    /// the column counting the records of each row (a histogram, as the audit's add_remove and replace relations give it); absent: one record per row
    count: Option<String>,
    /// the channel: {rate_distortion: {lambda: 0.7}} or {symmetric: {at: epsilon, value: 1}}
    channel: Which,
    /// independent releases of every record
    #[serde(default = "crate::stages::param::count::<1>")]
    samples: Count,
}

impl ChannelRelease {
    /// The channel on the source p, and its ε (Algorithm 3, nats).
    fn channel(&self, p: &[f64]) -> Result<(Matrix, f64)> {
        match (&self.channel.rate_distortion, &self.channel.symmetric) {
            (Some(r), _) => {
                let res = rd::blahut_arimoto(p, &r.distortion(), *r.lambda, *r.threshold, 1)?;
                if !res.converged {
                    tracing::warn!(
                        "λ = {}: no convergence within {} iterations (T = {})",
                        r.lambda,
                        res.iterations,
                        r.threshold
                    );
                }
                Ok((res.channel(), res.epsilon))
            }
            (None, Some(s)) => {
                let value = s
                    .value
                    .ok_or_else(|| anyhow!("the symmetric channel needs `value`"))?;
                let (d, _, eps) = s.channel_at(p, *value)?;
                Ok((rd::symmetric_channel(p.len(), d)?, eps))
            }
            (None, None) => bail!("no channel given (`validate` requires one)"),
        }
    }

    /// Each record's letter, as an index into the source's labels, in row order (a row of
    /// count c is c records).
    fn records(&self, input: &DataFrame, labels: &[String]) -> Result<(Vec<usize>, Vec<String>)> {
        let letters = str_col(input, &self.column)?;
        let counts = match &self.count {
            Some(c) => f64_col(input, c)?,
            None => vec![1.0; letters.len()],
        };
        let index: HashMap<&str, usize> = labels
            .iter()
            .enumerate()
            .map(|(i, l)| (l.as_str(), i))
            .collect();
        let mut total = 0u64;
        for (row, &c) in counts.iter().enumerate() {
            if !(c >= 0.0 && c.fract() == 0.0 && c <= u32::MAX as f64) {
                bail!(
                    "column `{}` holds {c} at row {row}: a count of records is a whole number in [0, {}]",
                    self.count.as_deref().unwrap_or_default(),
                    u32::MAX
                );
            }
            total += c as u64;
        }
        check_size_run(Limit::Cells, "records", Some(total))?;
        let (mut xs, mut names) = (Vec::new(), Vec::new());
        for (row, (letter, &c)) in letters.iter().zip(&counts).enumerate() {
            let Some(&x) = index.get(letter.as_str()) else {
                let shown: Vec<&str> = labels.iter().take(20).map(String::as_str).collect();
                bail!(
                    "row {row}: the letter `{letter}` (column `{}`) is not a label of the source distribution ({}{})",
                    self.column,
                    shown.join(", "),
                    if labels.len() > 20 { ", …" } else { "" }
                );
            };
            for _ in 0..c as u64 {
                xs.push(x);
                names.push(letter.clone());
            }
        }
        Ok((xs, names))
    }
}

impl Stage for ChannelRelease {
    fn validate(&self) -> Result<(), ParamError> {
        let samples = self.samples.get();
        check_size_at("samples", Limit::Draws, "samples", Some(samples))?;
        if let Some(c) = ADDED.iter().find(|c| **c == self.column) {
            return Err(ParamError::at(
                "column",
                format!("`{c}` is a column this stage writes: rename the letter column upstream"),
            ));
        }
        match (&self.channel.rate_distortion, &self.channel.symmetric) {
            (Some(_), Some(_)) | (None, None) => Err(ParamError::at(
                "channel",
                "give one channel: {rate_distortion: {lambda: …}} or {symmetric: {at: epsilon, value: …}}",
            )),
            (Some(r), None) => {
                if r.z_size.is_some_and(|z| z.get() != 1) {
                    return Err(ParamError::at(
                        "channel.rate_distortion.z_size",
                        "a released letter is x̂ alone: the auxiliary Z of Problem 2 does not apply here",
                    ));
                }
                r.validate().map_err(|e| nested("rate_distortion", e))
            }
            (None, Some(s)) => {
                if s.column.is_some() || s.value.is_none() {
                    return Err(ParamError::at(
                        "channel.symmetric.value",
                        "give the symmetric channel's `value` (one channel; `column` does not apply here)",
                    ));
                }
                Ok(())
            }
        }
    }

    fn columns_read(&self) -> Vec<(String, String)> {
        let mut read = vec![("column".to_string(), self.column.clone())];
        if let Some(c) = &self.count {
            read.push(("count".to_string(), c.clone()));
        }
        read
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        let mut out: Vec<String> = ADDED[..2].iter().map(|c| c.to_string()).collect();
        out.push(self.column.clone());
        out.extend(ADDED[2..].iter().map(|c| c.to_string()));
        Some(out)
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let [records, distribution] = ctx.inputs else {
            bail!(
                "mechanism.channel takes two inputs: the records, then the source distribution (load.distribution); got {}",
                ctx.inputs.len()
            );
        };
        let p = source(distribution)?;
        let labels = str_col(distribution, "label")?;
        let m = p.len() as u64;
        check_size_run(
            Limit::Cells,
            &format!("the channel's m × m ({m} × {m})"),
            product(&[m, m]),
        )?;
        let (xs, names) = self.records(records, &labels)?;
        let samples = self.samples.get();
        let n = xs.len() as u64;
        check_size_run(
            Limit::Cells,
            &format!("records × samples × 5 columns ({n} × {samples} × 5)"),
            product(&[n, samples, 5]),
        )?;
        let (channel, epsilon) = self.channel(&p)?;
        let mut samplers: HashMap<usize, rd::RowSampler> = HashMap::new();
        for &x in &xs {
            samplers.entry(x).or_insert_with(|| channel.sampler(x));
        }
        let total = (n * samples) as usize;
        let (mut sample, mut record, mut letter, mut released) = (
            Vec::with_capacity(total),
            Vec::with_capacity(total),
            Vec::with_capacity(total),
            Vec::with_capacity(total),
        );
        // One stream, drawn in (sample, record) order: the same draws for any --jobs.
        for s in 0..samples {
            for (r, &x) in xs.iter().enumerate() {
                let y = samplers[&x].sample(&mut ctx.rng);
                sample.push(s as i64);
                record.push(r as i64);
                letter.push(names[r].clone());
                released.push(labels[y].clone());
            }
        }
        FrameBuilder::new()
            .i64("sample", sample)
            .i64("record", record)
            .str(&self.column, letter)
            .str("released", released)
            .f64("epsilon", vec![epsilon; total])
            .build()
            .map(Into::into)
    }
}

/// An error of the nested channel's parameters, located under `channel.<name>`.
fn nested(name: &str, e: ParamError) -> ParamError {
    let mut path = vec!["channel".to_string(), name.to_string()];
    path.extend(e.path);
    ParamError {
        path,
        message: e.message,
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, refused, run, strings};
    use crate::stages::columns::FrameBuilder;
    use polars::prelude::DataFrame;

    fn distribution() -> DataFrame {
        FrameBuilder::new()
            .str("label", vec!["a".into(), "b".into(), "c".into()])
            .f64("probability", vec![0.5, 0.3, 0.2])
            .build()
            .unwrap()
    }

    fn records(letters: &[&str]) -> DataFrame {
        FrameBuilder::new()
            .str("letter", letters.iter().map(|s| s.to_string()).collect())
            .build()
            .unwrap()
    }

    /// The symmetric channel at ε = ln 4 on three letters keeps a letter with probability
    /// e^ε/(e^ε + 2) = 2/3 and moves it to each other one with 1/6: the frequencies of 6·10⁴
    /// draws agree within 5 standard errors, and the `epsilon` column is ln 4.
    #[test]
    fn symmetric_releases_follow_the_channel() {
        let with = "{column: letter, channel: {symmetric: {at: epsilon, value: 1.3862943611198906}}, samples: 60000}";
        let out = run(&KIND, with, &[&records(&["b"]), &distribution()], 7)
            .unwrap()
            .frame;
        let released = strings(&out, "released");
        assert_eq!(released.len(), 60_000);
        let share = |l: &str| released.iter().filter(|r| *r == l).count() as f64 / 60_000.0;
        for (l, q) in [("a", 1.0 / 6.0), ("b", 2.0 / 3.0), ("c", 1.0 / 6.0)] {
            let se = (q * (1.0 - q) / 60_000.0f64).sqrt();
            assert!((share(l) - q).abs() < 5.0 * se, "{l}: {} vs {q}", share(l));
        }
        let eps = floats(&out, "epsilon");
        assert!(eps.iter().all(|e| (e - 4f64.ln()).abs() < 1e-12));
        assert!(strings(&out, "letter").iter().all(|l| l == "b"));
    }

    /// A histogram of records (`count`) is its records, in row order; every draw releases
    /// each, and the same seed gives the same releases.
    #[test]
    fn a_histogram_is_its_records_and_the_seed_fixes_the_draws() {
        let hist = FrameBuilder::new()
            .str("bin", vec!["a".into(), "b".into(), "c".into()])
            .f64("count", vec![2.0, 0.0, 1.0])
            .build()
            .unwrap();
        let with =
            "{column: bin, count: count, channel: {rate_distortion: {lambda: 2}}, samples: 50}";
        let one = run(&KIND, with, &[&hist, &distribution()], 3)
            .unwrap()
            .frame;
        assert_eq!(one.height(), 150);
        assert_eq!(strings(&one, "bin")[..3], ["a", "a", "c"]);
        assert_eq!(floats(&one, "record")[..3], [0.0, 1.0, 2.0]);
        let two = run(&KIND, with, &[&hist, &distribution()], 3)
            .unwrap()
            .frame;
        assert!(one.equals(&two));
        // The ε is Blahut–Arimoto's, as mechanism.rate_distortion reports it.
        let rd = run(
            crate::stages::registry::find("mechanism.rate_distortion").unwrap(),
            "{lambda: 2}",
            &[&distribution()],
            0,
        )
        .unwrap()
        .frame;
        assert_eq!(floats(&one, "epsilon")[0], floats(&rd, "epsilon")[0]);
    }

    #[test]
    fn refuses_what_it_cannot_release() {
        let e = refused(
            &KIND,
            "{column: letter, channel: {symmetric: {at: epsilon, column: eps}}}",
        );
        assert!(e.contains("value"), "{e}");
        let e = refused(
            &KIND,
            "{column: letter, channel: {rate_distortion: {lambda: 1, z_size: 3}}}",
        );
        assert!(e.contains("z_size"), "{e}");
        let e = refused(
            &KIND,
            "{column: released, channel: {rate_distortion: {lambda: 1}}}",
        );
        assert!(e.contains("released"), "{e}");
        let e = refused(&KIND, "{column: letter, channel: {}}");
        assert!(e.starts_with("channel: give one channel"), "{e}");
        let e = refused(&KIND, "{column: letter, channel: {rate_distortion: {lambda: 1}, symmetric: {at: epsilon, value: 1}}}");
        assert!(e.starts_with("channel: give one channel"), "{e}");
        let err = fails(
            &KIND,
            "{column: letter, channel: {rate_distortion: {lambda: 1}}}",
            &[&records(&["a", "z"]), &distribution()],
            0,
        );
        assert!(err.contains("`z`") && err.contains("a, b, c"), "{err}");
    }
}
