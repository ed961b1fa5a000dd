//! `--set` arguments: `seed=N`, `STAGE.PARAM[.KEY…]=VALUE` and `AXIS=VALUES`, parsed and
//! applied.

use super::*;

/// One `--set` argument, parsed.
#[derive(Debug)]
pub(super) enum SetArg {
    Seed(u64),
    Param(ParamSet),
    Axis(String, Vec<AxisValue>),
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
