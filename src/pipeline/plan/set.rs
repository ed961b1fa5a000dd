//! `--set` arguments: `seed=N`, `STAGE.PARAM[.KEY…]=VALUE`, `AXIS=VALUES`, and the sweeps
//! `+STAGE.PARAM=VALUES` (`--sweep`), parsed and applied.
//!
//! A sweep turns a constant into an axis without editing the file: `+noisy.samples=[100, 1000]`
//! adds the axis `samples` (the parameter's last key) with those values and sets the parameter
//! to `$samples`. The stage and every stage that reads it then vary over it, so their
//! instances' seeds change — an instance's seed is a function of its axis values (see
//! `pipeline::seed`), and `samples=100` is a value the instance did not have before — even at
//! the value the constant had. Stages that do not read it keep their seeds and stored results.

use super::*;

/// One `--set` argument, parsed.
#[derive(Debug)]
pub(super) enum SetArg {
    Seed(u64),
    Param(ParamSet),
    Axis(String, Vec<AxisValue>),
    /// A new axis, and the parameter that reads it.
    Sweep(String, Vec<AxisValue>, ParamSet),
}

/// Parses one `--set` argument: `seed=N`, `STAGE.PARAM[.KEY…]=VALUE` (any `with:` parameter,
/// a YAML value) or `AXIS=VALUES`. `axes` are the axes so far (an earlier `--set` may have
/// replaced one). The error is the message after `--set ARG: `.
pub(super) fn parse_set(
    s: &str,
    raw: &RawPipeline,
    registry: &[KindInfo],
    axes: &IndexMap<String, Vec<AxisValue>>,
) -> Result<SetArg, String> {
    let Some((name, values)) = s.split_once('=') else {
        return Err("expected AXIS=VALUES (--set 'eps=[0.1, 1]'), STAGE.PARAM=VALUE (--set noisy.samples=500) or seed=N".into());
    };
    let name = name.trim();
    if let Some(param) = name.strip_prefix('+') {
        let Some((_, last)) = param.rsplit_once('.') else {
            return Err(format!(
                "`+{param}`: give the parameter to sweep as +STAGE.PARAM=VALUES (--sweep noisy.samples='[100, 1000]')"
            ));
        };
        if !crate::axis::is_word(last) {
            return Err(format!(
                "`{last}` cannot name an axis (letters, digits, `_`)"
            ));
        }
        if axes.contains_key(last) || raw.axes.contains_key(last) || last == REP {
            return Err(format!(
                "the sweep would add the axis `{last}`, which the pipeline has already: change that axis (--set '{last}=[…]'), or name the sweep's own with --set '+NAME=VALUES' --set '{param}=$NAME'"
            ));
        }
        let SetArg::Param(mut p) = parse_set(&format!("{param}=0"), raw, registry, axes)? else {
            unreachable!("STAGE.PARAM=VALUE parses as a parameter")
        };
        let vals = serde_yaml_ng::from_str::<Value>(values)
            .map_err(|e| e.to_string())
            .and_then(|v| parse_axis(&v).map_err(|(_, msg)| msg))?;
        p.value = Value::String(format!("${last}"));
        p.arg = s.to_string();
        return Ok(SetArg::Sweep(last.to_string(), vals, p));
    }
    if let Some((stage, path)) = name.split_once('.') {
        let Some(st) = raw.stages.get(stage) else {
            let hint = if axes.contains_key(stage) || raw.axes.contains_key(stage) {
                format!("; `{stage}` is an axis: `--set '{stage}=[…]'` gives all its values (a record's fields with them)")
            } else {
                suggest(stage, raw.stages.keys().map(String::as_str))
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default()
            };
            return Err(format!("no stage `{stage}` in this pipeline{hint}"));
        };
        let path: Vec<String> = path.split('.').map(str::to_string).collect();
        // Each key is a level of nested mappings that planning walks recursively.
        const MAX_DEPTH: usize = 16;
        if path.len() > MAX_DEPTH {
            return Err(format!(
                "it nests {} keys deep: give at most {MAX_DEPTH} (STAGE.PARAM.KEY…)",
                path.len()
            ));
        }
        if path.iter().any(String::is_empty) {
            return Err(format!(
                "`{name}` has an empty key: give STAGE.PARAM or STAGE.PARAM.KEY"
            ));
        }
        if let Some(kind) = registry.iter().find(|k| k.name == st.kind) {
            let names = kind.param_names();
            if !names.contains(&path[0]) {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                let hint = match suggest(&path[0], names.iter().copied()) {
                    Some(s) => format!("; did you mean `{stage}.{s}`?"),
                    None => String::new(),
                };
                return Err(format!(
                    "stage `{stage}` ({}) has no parameter `{}`{hint} (its parameters: {}; `dplab list {}` describes them)",
                    kind.name,
                    path[0],
                    names.join(", "),
                    kind.name
                ));
            }
        }
        return match serde_yaml_ng::from_str::<Value>(values) {
            Ok(value) => Ok(SetArg::Param(ParamSet {
                arg: s.to_string(),
                stage: stage.to_string(),
                path,
                value,
            })),
            Err(e) => Err(format!("the value is not YAML: {e}")),
        };
    }
    if name == "seed" && !raw.axes.contains_key(name) {
        return match values.trim().parse::<u64>() {
            Ok(n) => Ok(SetArg::Seed(n)),
            Err(_) => Err(format!(
                "the seed `{}` is not a whole number from 0 to {}",
                values.trim(),
                u64::MAX
            )),
        };
    }
    if !axes.contains_key(name) && !raw.axes.contains_key(name) {
        let candidates = raw
            .axes
            .keys()
            .map(String::as_str)
            .chain(std::iter::once("seed"));
        let hint = suggest(name, candidates)
            .map(|s| format!("; did you mean `{s}`?"))
            .unwrap_or_default();
        return Err(format!(
            "no axis `{name}` in this pipeline{hint} (for a stage's parameter give STAGE.PARAM=VALUE)"
        ));
    }
    serde_yaml_ng::from_str::<Value>(values)
        .map_err(|e| e.to_string())
        .and_then(|v| parse_axis(&v).map_err(|(_, msg)| msg))
        .map(|vals| SetArg::Axis(name.to_string(), vals))
}

/// `--set STAGE.PARAM[.KEY…]=VALUE`.
#[derive(Debug)]
pub(super) struct ParamSet {
    pub(super) arg: String,
    pub(super) stage: String,
    pub(super) path: Vec<String>,
    pub(super) value: Value,
}

impl ParamSet {
    /// Puts the value at its path in a stage's `with:`, making mappings on the way.
    pub(super) fn apply(&self, with: &mut Mapping) -> Result<(), String> {
        let (last, parents) = self.path.split_last().expect("a path has a key");
        let mut at = with;
        for (i, k) in parents.iter().enumerate() {
            let slot = at
                .entry(Value::String(k.clone()))
                .or_insert_with(|| Value::Mapping(Mapping::new()));
            if slot.is_null() {
                *slot = Value::Mapping(Mapping::new());
            }
            at = match slot {
                Value::Mapping(m) => m,
                other => {
                    return Err(format!(
                        "`{}.{}` is {}, not a mapping: it has no key `{}`",
                        self.stage,
                        self.path[..=i].join("."),
                        describe(other),
                        self.path[i + 1]
                    ))
                }
            };
        }
        at.insert(Value::String(last.clone()), self.value.clone());
        Ok(())
    }
}
