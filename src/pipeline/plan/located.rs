//! Located errors: a message about a parameter, a column or a value, prefixed with where the
//! user wrote it (file:line:col in the file or the profile, or the `--set` argument).

use super::*;

impl Plan {
    /// A stage's run-time error that a parameter names a column its input lacks, pointed at
    /// that parameter (the value in the instance's parameters equal to the name: in the file,
    /// the profile, or a `--set` argument) with the nearest column that exists.
    pub(crate) fn column_error(&self, si: usize, inst: &Instance, e: &MissingColumn) -> String {
        let stage = &self.stages[si];
        let available: Vec<&str> = e.available.iter().map(String::as_str).collect();
        let what = no_column(&e.name, &available);
        let mut at = Vec::new();
        find_string(&stage.params(inst), &e.name, &mut Vec::new(), &mut at);
        match at.first() {
            Some(path) => self.located(si, path, &what),
            None => what,
        }
    }

    /// `message` about the parameter at `path` in stage `si`'s `with:`, prefixed with where it
    /// was given: file:line:col (in the file or the profile) or the `--set` argument.
    pub fn located(&self, si: usize, path: &str, what: &str) -> String {
        let stage = &self.stages[si];
        let set = stage.from_set.iter().map(|(k, a)| (k.as_str(), a.as_str()));
        match given_at(
            &stage.name,
            path,
            self.profile.as_deref(),
            &stage.from_profile,
            set,
        ) {
            Err(arg) => format!("--set {}: `{path}`: {what}", brief_to(arg, 200)),
            Ok(in_file) => {
                let pos = self.locs.value(&in_file);
                format!(
                    "{}:{}:{}: `{path}`: {what}",
                    self.file.display(),
                    pos.line,
                    pos.col
                )
            }
        }
    }
}

/// `no column `c` in its input (columns: …)`, with the nearest that exists.
pub(super) fn no_column(col: &str, available: &[&str]) -> String {
    let hint = suggest(col, available.iter().copied())
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default();
    format!(
        "no column `{col}` in its input (columns: {}){hint}",
        available.join(", ")
    )
}

/// Where the parameter at `path` in stage `stage`'s `with:` was given: its dotted path in the
/// file (under the profile's `with:` when the profile set its key), or `Err` with the `--set`
/// argument that set it (the last one, which won).
pub(super) fn given_at<'s>(
    stage: &str,
    path: &str,
    profile: Option<&str>,
    from_profile: &[String],
    mut from_set: impl DoubleEndedIterator<Item = (&'s str, &'s str)>,
) -> Result<String, &'s str> {
    let top = path.split('.').next().unwrap_or_default();
    if let Some((_, arg)) = from_set.rfind(|(k, _)| *k == top) {
        return Err(arg);
    }
    Ok(match profile {
        Some(p) if from_profile.iter().any(|k| k == top) => {
            format!("profiles.{p}.with.{stage}.{path}")
        }
        _ => format!("stages.{stage}.with.{path}"),
    })
}

/// The paths (`x`, `values.1`) of the strings equal to `needle` in `v`.
pub(super) fn find_string(v: &Value, needle: &str, path: &mut Vec<String>, out: &mut Vec<String>) {
    match v {
        Value::String(s) if s == needle => out.push(path.join(".")),
        Value::Sequence(items) => {
            for (i, it) in items.iter().enumerate() {
                path.push(i.to_string());
                find_string(it, needle, path, out);
                path.pop();
            }
        }
        Value::Mapping(m) => {
            for (k, it) in m {
                path.push(k.as_str().map_or_else(|| canonical(k), str::to_string));
                find_string(it, needle, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

impl<'a> Planner<'a> {
    /// A parameter (at `path` in `with:`) names `col`, which no input has: located at the
    /// parameter (in the file, the profile, or the `--set` argument), with the nearest column.
    pub(super) fn column_error(
        &self,
        sp: &StageParams,
        path: &str,
        col: &str,
        inputs: &[Vec<String>],
    ) -> SpecError {
        let StageParams {
            name,
            kind,
            composed,
            ..
        } = *sp;
        let mut all: Vec<&str> = Vec::new();
        for c in inputs.iter().flatten() {
            if !all.contains(&c.as_str()) {
                all.push(c);
            }
        }
        let message = format!(
            "stage `{name}` ({}): `{path}`: {}",
            kind.name,
            no_column(col, &all)
        );
        let set = composed.from_set.iter().map(|(k, a)| (k.as_str(), *a));
        match given_at(
            name,
            path,
            self.ov.profile.as_deref(),
            &composed.from_profile,
            set,
        ) {
            Err(arg) => SpecError {
                file: self.spec.path.clone(),
                pos: None,
                message: format!("--set {}: {message}", brief_to(arg, 200)),
                hint: None,
            },
            Ok(at) => {
                let mut e = self.spec.err(&at, message);
                e.pos = Some(self.spec.locs.value(&at));
                e
            }
        }
    }

    /// A parameter that does not pass its kind's checks, located.
    pub(super) fn param_error(
        &self,
        sp: &StageParams,
        key: &[(Arc<str>, AxisValue)],
        pe: ParamError,
    ) -> SpecError {
        let StageParams {
            name,
            kind,
            composed,
            refs,
            own,
            ..
        } = *sp;
        let spec = self.spec;
        let sub = pe.path.join(".");
        // A message about a value inside nested parameters names it by its whole path
        // (`neighbours.same.bin[0]`): the position alone shows a line, and a kind's message
        // names at most the last key.
        let shown = crate::yaml::dotted(&pe.path);
        let pe = if pe.path.len() > 1
            && !pe.message.starts_with(&format!("`{shown}`"))
            && !pe.message.starts_with(&shown)
        {
            ParamError {
                message: format!("`{shown}`: {}", pe.message),
                path: pe.path,
            }
        } else {
            pe
        };
        // The key the error is about: its path, or the unknown key named.
        let top = pe.path.first().cloned().or_else(|| {
            pe.message
                .strip_prefix("unknown key `")
                .and_then(|r| r.split('`').next())
                .map(str::to_string)
        });
        let path = match (&top, &self.ov.profile) {
            (Some(k), Some(pname)) if composed.from_profile.contains(k) => {
                format!("profiles.{pname}.with.{name}.{k}")
            }
            _ if sub.is_empty() => format!("stages.{name}.with"),
            _ => format!("stages.{name}.with.{sub}"),
        };
        let own_label = label(
            &key.iter()
                .filter(|(a, _)| own.contains(&**a))
                .cloned()
                .collect::<Vec<_>>(),
        );
        let at = if own_label.is_empty() {
            String::new()
        } else {
            format!(" (at {own_label})")
        };
        let set_arg = top
            .as_ref()
            .and_then(|k| composed.from_set.iter().rev().find(|(p, _)| p == k));
        let mut e = match set_arg {
            Some((_, arg)) => SpecError {
                file: spec.path.clone(),
                pos: None,
                message: format!(
                    "--set {}: stage `{name}` ({}){at}: {}",
                    brief_to(arg, 200),
                    kind.name,
                    pe.message
                ),
                hint: None,
            },
            None => spec.err(
                &path,
                format!("stage `{name}` ({}){at}: {}", kind.name, pe.message),
            ),
        };
        let about_value = !pe.message.starts_with("unknown key");
        if let Some(Ref { axis, field, .. }) = refs.iter().find(|r| r.path == sub && about_value) {
            // A record's field: at the field of the record of that name where the axis was
            // written (the file or the profile), or the `--set` argument that gave it.
            let record = match key.iter().find(|(a, _)| **a == **axis) {
                Some((_, AxisValue::Record(r))) if !field.is_empty() => Some(&**r),
                _ => None,
            };
            let what = match record {
                Some(r) => format!(
                    "field `{}` of record `{}` of axis `{axis}`",
                    field.join("."),
                    r.name
                ),
                None => format!("axis `{axis}`"),
            };
            let at = match self.axis_origin(axis) {
                AxisOrigin::Set(arg) => {
                    e.hint = Some(format!(
                        "the value comes from {what}, as `--set {}` gives it",
                        brief_to(arg, 80)
                    ));
                    return e;
                }
                AxisOrigin::File(base, items) => {
                    let item = record.and_then(|r| {
                        items.as_sequence()?.iter().position(|it| {
                            it.get("name").and_then(Value::as_str) == Some(r.name.as_str())
                        })
                    });
                    match item {
                        Some(i) => format!("{base}.{i}.{}", field.join(".")),
                        None => base,
                    }
                }
                AxisOrigin::Unknown => format!("axes.{axis}"),
            };
            let apos = spec.locs.find(&at);
            e.hint = Some(format!(
                "the value comes from {what} (line {}, column {})",
                apos.line, apos.col
            ));
        } else if kind
            .param_names()
            .iter()
            .any(|p| pe.message.contains(p.as_str()))
        {
            e.hint = Some(format!(
                "`dplab list {}` describes its parameters",
                kind.name
            ));
        }
        e
    }
}

/// `text` cut to a length a log line can hold.
pub(super) fn brief(text: &str) -> String {
    brief_to(text, 40)
}

pub(super) use crate::text::brief as brief_to;

/// What kind of YAML value `v` is, for messages.
pub(super) fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {s:?}"),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(_) => "a tagged value".into(),
    }
}
