//! `mechanism.symmetric_channel`: the symmetric channel (k-ary randomized response) on a
//! discrete source at a given distortion, ε or mutual information (Wu et al. 2020).

use anyhow::{bail, Result};
use polars::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::mech::rate_distortion as rd;
use crate::stages::columns::{column, f64_col};
use crate::stages::load::distribution::source;
use crate::stages::param::NonNegative;
use crate::stages::{
    build, check_size_run, params, product, Ctx, Gather, KindInfo, Limit, Output, ParamError, Stage,
};

pub const KIND: KindInfo = KindInfo {
    name: "mechanism.symmetric_channel",
    version: 1,
    random: false,
    runs_programs: false,
    summary: "The symmetric channel (k-ary randomized response: q(x|x) = 1 − D, D/(m−1) elsewhere) at a given distortion, ε or MI; with a second input, at each row's value of `column`. Adds sym_distortion, sym_mi (bits), sym_epsilon (nats).",
    params: params::<Symmetric>,
    gather: Gather::Nothing,
    build: build::<Symmetric>,
    verdict: None,
};

/// The columns it adds (after the second input's, with `column`).
const ADDED: [&str; 3] = ["sym_distortion", "sym_mi", "sym_epsilon"];

/// The quantity that fixes the channel.
#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum At {
    /// the expected Hamming distortion D
    Distortion,
    /// ε of the channel (nats)
    Epsilon,
    /// the mutual information I(X; X̂) (bits)
    Mi,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Symmetric {
    /// which quantity fixes the channel
    pub at: At,
    /// its value (one row); give `value` or `column`
    pub value: Option<NonNegative>,
    /// or: a column of the second input, one channel per row (the row's other columns are
    /// kept)
    pub column: Option<String>,
}

impl Symmetric {
    pub(crate) fn channel_at(&self, p: &[f64], v: f64) -> Result<(f64, f64, f64)> {
        let m = p.len();
        let d = match self.at {
            At::Distortion => v,
            At::Epsilon => rd::symmetric_distortion_for_epsilon(m, v)?,
            At::Mi => rd::symmetric_distortion_for_mi(p, v)?,
        };
        let c = rd::symmetric_channel(m, d)?;
        Ok((d, c.mutual_information(p), rd::symmetric_epsilon(m, d)))
    }
}

impl Stage for Symmetric {
    fn validate(&self) -> Result<(), ParamError> {
        if self.value.is_some() == self.column.is_some() {
            return Err(ParamError::at(
                "value",
                "give `value` (one channel) or `column` (one per row of the second input)",
            ));
        }
        Ok(())
    }

    /// `column` (in the second input); the source's `probability` is a `load.distribution`
    /// frame's fixed column.
    fn columns_read(&self) -> Vec<(String, String)> {
        self.column
            .iter()
            .map(|c| ("column".to_string(), c.clone()))
            .collect()
    }

    /// With `column`: the second input's columns, then the added ones (a column of the
    /// same name is replaced in place); else the added ones alone.
    fn columns_out(&self, inputs: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        let mut out = match (&self.column, inputs) {
            (Some(_), [_, rows]) => rows.clone()?,
            (Some(_), _) => return None, // `run` refuses it
            (None, _) => Vec::new(),
        };
        for c in ADDED {
            if !out.iter().any(|o| o == c) {
                out.push(c.to_string());
            }
        }
        Some(out)
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let Some(first) = ctx.inputs.first() else {
            bail!("mechanism.symmetric_channel needs the source distribution as its input");
        };
        let p = source(first)?;
        let m = p.len() as u64;
        check_size_run(
            Limit::Cells,
            &format!("the channel's m × m ({m} × {m})"),
            product(&[m, m]),
        )?;
        let (base, values) = match (&self.column, self.value, ctx.inputs) {
            (Some(c), _, [_, rows]) => {
                column(rows, c)?;
                (rows.clone(), f64_col(rows, c)?)
            }
            (Some(_), _, _) => bail!("with `column`, give a second input holding that column"),
            (None, Some(v), _) => (DataFrame::empty(), vec![*v]),
            (None, None, _) => unreachable!("`validate` requires `value` or `column`"),
        };
        let (mut ds, mut mis, mut eps) = (Vec::new(), Vec::new(), Vec::new());
        for v in values {
            let (d, mi, e) = self.channel_at(&p, v)?;
            ds.push(d);
            mis.push(mi);
            eps.push(e);
        }
        let mut out = base;
        let h = out.height().max(ds.len());
        out = if out.width() == 0 {
            DataFrame::empty_with_height(h)
        } else {
            out
        };
        for (name, values) in ADDED.into_iter().zip([ds, mis, eps]) {
            out.with_column(Column::new(name.into(), values))?;
        }
        Ok(out.into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{floats, names, refused, run};

    /// k-ary randomized response on a uniform bit: at D = 1/4, ε = ln 3 and I = 1 − h(1/4);
    /// asked at ε = ln 3 it finds D = 1/4 again; with `column`, one channel per row of the
    /// second input, whose columns are kept.
    #[test]
    fn distortion_epsilon_and_information_agree() {
        let source = polars::df!("label" => ["0", "1"], "probability" => [0.5, 0.5]).unwrap();
        let out = run(&KIND, "{at: distortion, value: 0.25}", &[&source], 0)
            .unwrap()
            .frame;
        let h = -(0.25f64 * 0.25f64.log2() + 0.75 * 0.75f64.log2());
        assert!((floats(&out, "sym_epsilon")[0] - 3f64.ln()).abs() < 1e-12);
        assert!((floats(&out, "sym_mi")[0] - (1.0 - h)).abs() < 1e-12);
        let out = run(
            &KIND,
            &format!("{{at: epsilon, value: {}}}", 3f64.ln()),
            &[&source],
            0,
        )
        .unwrap()
        .frame;
        assert!((floats(&out, "sym_distortion")[0] - 0.25).abs() < 1e-9);
        let rows = polars::df!("d" => [0.1, 0.25], "tag" => ["x", "y"]).unwrap();
        let out = run(&KIND, "{at: distortion, column: d}", &[&source, &rows], 0)
            .unwrap()
            .frame;
        assert_eq!(
            names(&out),
            ["d", "tag", "sym_distortion", "sym_mi", "sym_epsilon"]
        );
        assert_eq!(floats(&out, "sym_distortion"), [0.1, 0.25]);
        assert_eq!(
            refused(&KIND, "{at: mi}"),
            "value: give `value` (one channel) or `column` (one per row of the second input)"
        );
    }
}
