//! `query.revenue`: the revenue of posting each price to a set of bidders (Dwork & Roth
//! Example 3.5), the utility of the pumpkin auction.

use anyhow::Result;
use rayon::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::stages::columns::f64_col;
use crate::stages::{build, params, Ctx, Gather, KindInfo, Output, Stage};

pub const KIND: KindInfo = KindInfo {
    name: "query.revenue",
    version: 1,
    random: false,
    runs_programs: false,
    summary: "Revenue of posting each price to a set of bidders: price × #{bids ≥ price} (Dwork & Roth Example 3.5).",
    params: params::<Revenue>,
    gather: Gather::Nothing,
    build: build::<Revenue>,
    verdict: None,
};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Revenue {
    /// column of prices in the first input
    #[serde(default = "price")]
    price: String,
    /// column of bids in the second input
    #[serde(default = "bid")]
    bid: String,
    /// name of the revenue column
    #[serde(default = "revenue")]
    output: String,
}

fn price() -> String {
    "price".into()
}
fn bid() -> String {
    "bid".into()
}
fn revenue() -> String {
    "revenue".into()
}

impl Stage for Revenue {
    fn columns_read(&self) -> Vec<(String, String)> {
        vec![
            ("price".into(), self.price.clone()),
            ("bid".into(), self.bid.clone()),
        ]
    }

    /// The first input's columns, with the revenue column added (or replaced in place).
    fn columns_out(&self, inputs: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        let mut out = inputs.first()?.clone()?;
        if !out.contains(&self.output) {
            out.push(self.output.clone());
        }
        Some(out)
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let [prices_df, bids_df] = ctx.inputs else {
            anyhow::bail!(
                "query.revenue takes two inputs: [prices, bids] (got {})",
                ctx.inputs.len()
            );
        };
        let prices = f64_col(prices_df, &self.price)?;
        let mut bids = f64_col(bids_df, &self.bid)?;
        bids.sort_by(f64::total_cmp);
        let revenue: Vec<f64> = prices
            .par_iter()
            .map(|&p| {
                // Buyers are the bidders whose bid is at least the price.
                let buyers = bids.len() - bids.partition_point(|&b| b < p);
                if p > 0.0 {
                    p * buyers as f64
                } else {
                    0.0
                }
            })
            .collect();
        let mut df = prices_df.clone();
        df.with_column(polars::prelude::Column::new(
            self.output.as_str().into(),
            revenue,
        ))?;
        Ok(df.into())
    }
}

#[cfg(test)]
mod tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, run};

    /// Dwork & Roth Example 3.5: with bids 1, 1, 1 and 3.01, price 1 sells four units (4),
    /// price 1.01 and price 3.01 one each, a price above every bid nothing; two inputs are
    /// required.
    #[test]
    fn revenue_is_price_times_the_bids_at_or_above_it() {
        let prices = polars::df!("price" => [1.0, 1.01, 3.01, 4.0]).unwrap();
        let bids = polars::df!("bid" => [1.0, 3.01, 1.0, 1.0]).unwrap();
        let out = run(&KIND, "{}", &[&prices, &bids], 0).unwrap().frame;
        assert_eq!(floats(&out, "revenue"), [4.0, 1.01, 3.01, 0.0]);
        assert_eq!(
            fails(&KIND, "{}", &[&prices], 0),
            "query.revenue takes two inputs: [prices, bids] (got 1)"
        );
    }
}
