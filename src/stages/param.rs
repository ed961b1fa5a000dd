//! Parameter types that carry their range: ε, δ, probabilities, confidence levels, counts.
//!
//! A kind's parameter struct uses these instead of `f64` / `u64` wherever a value has bounds,
//! so the bounds are written once and give, from that one place:
//! - the check when `with:` is read (the message names the key, the value and the range:
//!   `epsilon = -1 is invalid: must be > 0`), so a kind's `run` never re-checks them;
//! - the JSON Schema (`minimum`, `exclusiveMaximum`, …) behind `dplab schema` and editors;
//! - the type column of `dplab list` ("number in (0, 1)"), rendered from that schema.
//!
//! Floating-point ranges are named types (`Positive`, `Level`, …); integer ranges are const
//! generics (`AtLeast<1000>`, `Between<1, 17>`), since each count has its own lower bound.

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{de::Error as _, Deserialize, Deserializer, Serialize};

/// One end of a range.
#[derive(Clone, Copy, Debug)]
pub enum End {
    Open(f64),
    Closed(f64),
    Unbounded,
}

/// The values a parameter may take.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Range {
    pub lo: End,
    pub hi: End,
}

impl Range {
    pub fn contains(&self, x: f64) -> bool {
        let lo = match self.lo {
            End::Open(a) => x > a,
            End::Closed(a) => x >= a,
            End::Unbounded => !x.is_nan(),
        };
        let hi = match self.hi {
            End::Open(b) => x < b,
            End::Closed(b) => x <= b,
            End::Unbounded => !x.is_nan(),
        };
        lo && hi
    }

    /// "> 0", "≥ 1", "in (0, 1)", "in [0, 1)", "≤ 12" (as `dplab list` writes it too).
    pub fn text(&self) -> String {
        let end = |e: End| match e {
            End::Open(x) => Some((x, false)),
            End::Closed(x) => Some((x, true)),
            End::Unbounded => None,
        };
        crate::kind::range_text(end(self.lo), end(self.hi)).unwrap_or_else(|| "a number".into())
    }

    /// `Ok` when `x` is in the range, else the message [`crate::yaml::deserialize`] locates.
    fn check(&self, x: impl Into<f64> + fmt::Display + Copy) -> Result<(), String> {
        if self.contains(x.into()) {
            Ok(())
        } else {
            Err(crate::yaml::out_of_range(x, &self.text()))
        }
    }

    /// The JSON Schema of a `ty` ("number" or "integer") in this range.
    pub fn schema(&self, ty: &str) -> Schema {
        let mut m = serde_json::Map::new();
        m.insert("type".into(), ty.into());
        let num = |x: f64| {
            if ty == "integer" {
                serde_json::Value::from(x as i64)
            } else {
                serde_json::Value::from(x)
            }
        };
        match self.lo {
            End::Open(a) => _ = m.insert("exclusiveMinimum".into(), num(a)),
            End::Closed(a) => _ = m.insert("minimum".into(), num(a)),
            End::Unbounded => {}
        }
        match self.hi {
            End::Open(b) => _ = m.insert("exclusiveMaximum".into(), num(b)),
            End::Closed(b) => _ = m.insert("maximum".into(), num(b)),
            End::Unbounded => {}
        }
        Schema::from(m)
    }
}

/// Defines a named `f64` type restricted to a range.
macro_rules! number {
    ($(#[$doc:meta])* $name:ident, $lo:expr, $hi:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Serialize)]
        #[serde(transparent)]
        pub struct $name(f64);

        impl $name {
            pub(crate) const RANGE: Range = Range { lo: $lo, hi: $hi };

            /// `x`, checked against the range. Private: its message carries the marker that
            /// [`crate::yaml::deserialize`] turns into `key = value is invalid: …`.
            fn new(x: f64) -> Result<Self, String> {
                Self::RANGE.check(x).map(|()| $name(x))
            }

            /// A value written in the code (a default): `const` so it costs nothing, and
            /// checked against the range by a test over every kind's defaults.
            pub const fn of(x: f64) -> Self {
                $name(x)
            }

            pub fn get(self) -> f64 {
                self.0
            }
        }

        impl Deref for $name {
            type Target = f64;
            fn deref(&self) -> &f64 {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $name::new(f64::deserialize(d)?).map_err(D::Error::custom)
            }
        }

        impl JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }
            fn schema_name() -> Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                Self::RANGE.schema("number")
            }
        }
    };
}

number!(
    /// A number > 0: ε, a scale, a sensitivity, a kernel width σ, a tolerance that must bite.
    Positive,
    End::Open(0.0),
    End::Unbounded
);
number!(
    /// A number ≥ 0: δ of a pure-or-approximate mechanism, a distance, a tolerance.
    NonNegative,
    End::Closed(0.0),
    End::Unbounded
);
number!(
    /// A probability or a quantile, in [0, 1].
    Probability,
    End::Closed(0.0),
    End::Closed(1.0)
);
number!(
    /// A confidence level, or any probability that must be neither 0 nor 1, in (0, 1).
    Level,
    End::Open(0.0),
    End::Open(1.0)
);
number!(
    /// δ of approximate DP, or a slack that may be 0 but not 1, in [0, 1).
    Fraction,
    End::Closed(0.0),
    End::Open(1.0)
);
number!(
    /// A share that may be 1 but not 0, in (0, 1].
    Share,
    End::Open(0.0),
    End::Closed(1.0)
);

/// A closed interval `[lo, hi]` of finite numbers with lo < hi: a target box, the known
/// range of a value. Written `[lo, hi]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(into = "[f64; 2]")]
pub(crate) struct Interval {
    pub lo: f64,
    pub hi: f64,
}

impl Interval {
    /// A value written in the code (a default).
    pub const fn of(lo: f64, hi: f64) -> Self {
        Interval { lo, hi }
    }
}

impl From<Interval> for [f64; 2] {
    fn from(i: Interval) -> Self {
        [i.lo, i.hi]
    }
}

impl<'de> Deserialize<'de> for Interval {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let [lo, hi] = <[f64; 2]>::deserialize(d)?;
        if lo.is_finite() && hi.is_finite() && lo < hi {
            Ok(Interval { lo, hi })
        } else {
            Err(D::Error::custom(crate::yaml::out_of_range(
                format!("[{lo}, {hi}]"),
                "[lo, hi] with finite lo < hi",
            )))
        }
    }
}

impl JsonSchema for Interval {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "Interval".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({
            "title": "[lo, hi]",
            "type": "array",
            "items": {"type": "number"},
            "minItems": 2,
            "maxItems": 2
        })
    }
}

/// An integer in [`LO`, `HI`] (digits, steps); `HI = u64::MAX` leaves it unbounded above
/// ([`AtLeast`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Between<const LO: u64, const HI: u64>(u64);

/// An integer ≥ `MIN` (a count of samples, points, bins).
pub(crate) type AtLeast<const MIN: u64> = Between<MIN, { u64::MAX }>;

/// A count ≥ 1.
pub type Count = AtLeast<1>;

/// A count's default, given where the field is declared:
/// `#[serde(default = "crate::stages::param::count::<1000>")]` (one function for every default
/// count, instead of a `fn thousand()` per kind).
pub fn count<const N: u64>() -> Count {
    Count::of(N)
}

/// The same for a field that is a plain integer (0 allowed).
pub fn integer<const N: u64>() -> u64 {
    N
}

impl<const LO: u64, const HI: u64> Between<LO, HI> {
    pub(crate) const RANGE: Range = Range {
        lo: End::Closed(LO as f64),
        hi: if HI == u64::MAX {
            End::Unbounded
        } else {
            End::Closed(HI as f64)
        },
    };

    /// `n`, checked against the range; private for the same reason as the `f64` types' `new`.
    fn new(n: u64) -> Result<Self, String> {
        if (LO..=HI).contains(&n) {
            Ok(Between(n))
        } else {
            Err(crate::yaml::out_of_range(n, &Self::RANGE.text()))
        }
    }

    /// A value written in the code (a default); see the `f64` types' `of`.
    pub const fn of(n: u64) -> Self {
        Between(n)
    }

    pub fn get(self) -> u64 {
        self.0
    }
}

impl<const LO: u64, const HI: u64> Deref for Between<LO, HI> {
    type Target = u64;
    fn deref(&self) -> &u64 {
        &self.0
    }
}

impl<const LO: u64, const HI: u64> fmt::Display for Between<LO, HI> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<'de, const LO: u64, const HI: u64> Deserialize<'de> for Between<LO, HI> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::new(u64::deserialize(d)?).map_err(D::Error::custom)
    }
}

impl<const LO: u64, const HI: u64> JsonSchema for Between<LO, HI> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        format!("Between_{LO}_{HI}").into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        Self::RANGE.schema("integer")
    }
}

/// The default confidence level, 95 %.
pub(crate) fn level_95() -> Level {
    Level::of(0.95)
}

/// The default of a `bool` parameter that is on unless turned off.
pub fn yes() -> bool {
    true
}

/// One name (a column, a table), or a list of them: `y: eps` or `y: [lo, hi]`. Read by hand,
/// not as an untagged enum: serde then names the list's element that is not a name (`y[1]`),
/// where an untagged enum could only say that the whole value matched neither form.
#[derive(JsonSchema, Clone)]
#[serde(untagged)]
pub(crate) enum OneOrMany {
    /// one
    One(String),
    /// a list
    Many(Vec<String>),
}

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = OneOrMany;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a name or a list of names")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<OneOrMany, E> {
                Ok(OneOrMany::One(v.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<OneOrMany, A::Error> {
                let mut names = Vec::new();
                while let Some(n) = seq.next_element::<String>()? {
                    names.push(n);
                }
                Ok(OneOrMany::Many(names))
            }
        }
        d.deserialize_any(V)
    }
}

impl OneOrMany {
    pub fn list(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }

    /// The columns it names, each with its path under `key` (`y`, or `y.1`); `""` names none.
    pub fn named(&self, key: &str) -> Vec<(String, String)> {
        match self {
            OneOrMany::One(s) => vec![(key.to_string(), s.clone())],
            OneOrMany::Many(v) => v
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("{key}.{i}"), c.clone()))
                .collect(),
        }
        .into_iter()
        .filter(|(_, c)| !c.is_empty())
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, JsonSchema, Debug)]
    #[serde(deny_unknown_fields)]
    struct P {
        epsilon: Positive,
        level: Level,
        #[serde(default)]
        q: Vec<Probability>,
        samples: AtLeast<1000>,
        digits: Between<1, 17>,
    }

    fn de(y: &str) -> Result<P, crate::yaml::DeError> {
        crate::yaml::deserialize(serde_yaml_ng::from_str(y).unwrap())
    }

    #[test]
    fn a_value_outside_its_range_names_the_key_the_value_and_the_range() {
        let ok = "{epsilon: 0.5, level: 0.95, q: [0, 1], samples: 1e3, digits: 3}";
        let p = de(ok).unwrap();
        assert_eq!(
            (*p.epsilon, p.samples.get(), p.digits.get()),
            (0.5, 1000, 3)
        );
        assert_eq!((*p.level, p.q.len()), (0.95, 2));
        let good = [
            ("epsilon", "0.5"),
            ("level", "0.95"),
            ("q", "[0, 1]"),
            ("samples", "1e3"),
            ("digits", "3"),
        ];
        for (key, value, path, msg) in [
            (
                "epsilon",
                "-1",
                "epsilon",
                "epsilon = -1 is invalid: must be > 0",
            ),
            (
                "level",
                "1",
                "level",
                "level = 1 is invalid: must be in (0, 1)",
            ),
            (
                "q",
                "[0.5, 1.5]",
                "q.1",
                "q[1] = 1.5 is invalid: must be in [0, 1]",
            ),
            (
                "samples",
                "999",
                "samples",
                "samples = 999 is invalid: must be ≥ 1000",
            ),
            (
                "digits",
                "18",
                "digits",
                "digits = 18 is invalid: must be in [1, 17]",
            ),
        ] {
            let y: Vec<String> = good
                .iter()
                .map(|&(k, v)| format!("{k}: {}", if k == key { value } else { v }))
                .collect();
            let e = de(&format!("{{{}}}", y.join(", "))).unwrap_err();
            assert_eq!(e.path.join("."), path);
            assert_eq!(e.message, msg);
        }
    }

    #[test]
    fn the_schema_carries_the_same_bounds() {
        let s = schemars::generate::SchemaSettings::draft07()
            .into_generator()
            .into_root_schema_for::<P>();
        let props = &s.as_value()["properties"];
        assert_eq!(props["epsilon"]["exclusiveMinimum"], 0.0);
        assert_eq!(props["level"]["exclusiveMaximum"], 1.0);
        assert_eq!(props["q"]["items"]["maximum"], 1.0);
        assert_eq!(props["samples"]["minimum"], 1000);
        assert_eq!(props["samples"]["type"], "integer");
        assert_eq!(props["digits"]["maximum"], 17);
    }

    /// A choice of the test kind below.
    #[derive(Deserialize, JsonSchema, Serialize, Debug)]
    #[serde(rename_all = "snake_case")]
    enum Way {
        /// the first way
        Up,
        /// the second way
        Down,
    }

    fn half() -> Probability {
        Probability::of(0.5)
    }

    #[derive(Deserialize, JsonSchema, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Q {
        /// privacy parameter ε
        epsilon: Positive,
        /// the quantiles
        #[serde(default)]
        q: Vec<Probability>,
        /// a share
        #[serde(default = "half")]
        p: Probability,
        /// which way; absent: both
        way: Option<Way>,
        /// draws
        n: AtLeast<1000>,
    }

    #[test]
    fn dplab_list_renders_types_ranges_defaults_and_choices_from_the_schema() {
        let lines = crate::kind::param_lines(&crate::kind::params::<Q>());
        let row = |i: usize| {
            let l = &lines[i];
            format!("{} | {} | {} | {}", l.name, l.ty, l.default, l.meaning)
        };
        assert_eq!(
            row(0),
            "epsilon | number > 0 | required | privacy parameter ε"
        );
        assert_eq!(
            row(1),
            "q | list of numbers in [0, 1] | default [] | the quantiles"
        );
        assert_eq!(row(2), "p | number in [0, 1] | default 0.5 | a share");
        assert_eq!(
            row(3),
            "way | up | down | optional | which way; absent: both — up: the first way; down: the second way"
        );
        assert_eq!(row(4), "n | integer ≥ 1000 | required | draws");
    }
}
