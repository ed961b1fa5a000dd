//! `dplab data …` and what pipelines need of the dataset registry.

use std::path::PathBuf;

use dplab::pipeline::{plan, spec};
use dplab::{data, stages};

use crate::cli::args::{Common, DataAction};
use crate::cli::exit::{Failure, Outcome};
use crate::cli::load::{load_plan, pipeline_files, report_spec_errors};

/// The datasets the `load.dataset` instances of a plan read, each once, in plan order.
pub(crate) fn plan_needs(p: &plan::Plan) -> Vec<data::need::Need> {
    let mut out = indexmap::IndexSet::new();
    for st in p.stages.iter().filter(|s| s.kind.name == "load.dataset") {
        for inst in &st.instances {
            if let Some(n) = stages::load::dataset::need(&st.params(inst)) {
                out.insert(n);
            }
        }
    }
    out.into_iter().collect()
}

/// The datasets a pipeline needs (not those it can do without) whose files are neither in the
/// cache nor in the mirror, verified. A pipeline that does not plan needs nothing here: the
/// report shows it as not run.
pub(crate) fn missing_datasets(file: &spec::SpecFile) -> Vec<String> {
    let Ok(reg) = data::Registry::current() else {
        return Vec::new();
    };
    let planned = plan::plan(file, &plan::Overrides::default(), stages::registry::all());
    let Ok(p) = planned else {
        return Vec::new();
    };
    let loc = data::Locations::current();
    let mut out: Vec<String> = Vec::new();
    for n in plan_needs(&p).iter().filter(|n| !n.optional) {
        if data::need::available(reg, loc, n).is_err() && !out.contains(&n.dataset) {
            out.push(n.dataset.clone());
        }
    }
    out
}

/// `dplab data fetch --pipelines PATH…`: every file the pipelines read, obtained once, then
/// what could not be and which pipelines that leaves without data.
pub(crate) fn fetch_for_pipelines(
    reg: &data::Registry,
    loc: &data::Locations,
    paths: &[PathBuf],
    common: &Common,
) -> Outcome {
    use data::need::{files, obtain, Obtained};
    let list = match pipeline_files(paths) {
        Ok(f) => f,
        Err(e) => {
            return Err(Failure::BadInput(e.to_string()));
        }
    };
    let mut plans = Vec::new();
    let mut bad = false;
    for f in &list {
        match load_plan(f, common) {
            Ok(p) => plans.push(p),
            Err(errs) => {
                bad = true;
                report_spec_errors(&errs);
            }
        }
    }
    if bad {
        return Err(Failure::BadInput(String::new()));
    }
    // What each (dataset, file) came to: fetched once however many pipelines read it.
    let mut got: indexmap::IndexMap<(String, String), Obtained> = indexmap::IndexMap::new();
    /// A dataset that could not be had: which files, the pipelines that need it, those that can
    /// do without.
    #[derive(Default)]
    struct Lacking {
        files: Vec<String>,
        needed_by: Vec<String>,
        optional_for: Vec<String>,
    }
    let mut lacking: indexmap::IndexMap<String, Lacking> = indexmap::IndexMap::new();
    let mut with_data = 0;
    for p in &plans {
        let needs = plan_needs(p);
        if !needs.is_empty() {
            with_data += 1;
        }
        for n in needs {
            let mut why = Vec::new();
            match files(reg, &n) {
                Err(e) => {
                    if !lacking.contains_key(&n.dataset) {
                        errln!("MISSING   {}: {e}", n.dataset);
                    }
                    why.push("no file can be read".to_string());
                }
                Ok(entries) => {
                    for f in entries {
                        let key = (n.dataset.clone(), f.name.clone());
                        let o = got.entry(key).or_insert_with(|| {
                            let o = obtain(&n.dataset, f, loc);
                            let what = format!("{}/{}", n.dataset, f.name);
                            match &o {
                                Obtained::Cached(p) => {
                                    out!("ok        {what} (in the cache, {})", p.display())
                                }
                                Obtained::Mirror(p) => {
                                    out!("ok        {what} (in the mirror, {})", p.display())
                                }
                                Obtained::Downloaded(p) => {
                                    out!("fetched   {what} → {} (sha256 verified)", p.display())
                                }
                                Obtained::Failed(m) => errln!("MISSING   {what}: {m}"),
                            }
                            o
                        });
                        if let Obtained::Failed(_) = o {
                            why.push(f.name.clone());
                        }
                    }
                }
            }
            if why.is_empty() {
                continue;
            }
            let entry = lacking.entry(n.dataset.clone()).or_default();
            for w in why {
                if !entry.files.contains(&w) {
                    entry.files.push(w);
                }
            }
            let who = if n.optional {
                &mut entry.optional_for
            } else {
                &mut entry.needed_by
            };
            if !who.contains(&p.name) {
                who.push(p.name.clone());
            }
        }
    }
    let required: Vec<&String> = lacking
        .values()
        .flat_map(|l| &l.needed_by)
        .collect::<indexmap::IndexSet<_>>()
        .into_iter()
        .collect();
    if lacking.is_empty() {
        out!(
            "data: every file the {} pipeline(s) read ({with_data} of them read datasets) is here and verified",
            plans.len()
        );
        return Ok(());
    }
    errln!("\ncould not be obtained (why: above):");
    for (dataset, l) in &lacking {
        let (need, optional) = (&l.needed_by, &l.optional_for);
        errln!("  {dataset}: {}", l.files.join(", "));
        if !need.is_empty() {
            errln!(
                "    needed by {}: skipped by `dplab run --skip-unavailable`, shown as \"data not available\" by `dplab report`",
                need.join(", ")
            );
        }
        if !optional.is_empty() {
            errln!(
                "    optional for {} (if_missing: empty): they run without it",
                optional.join(", ")
            );
        }
    }
    if required.is_empty() {
        errln!(
            "data: every file the {} pipeline(s) need is here and verified; only optional data is missing",
            plans.len()
        );
        return Ok(());
    }
    errln!(
        "data: {} of {with_data} pipeline(s) reading datasets lack data; set DPLAB_DATA_MIRROR (or --mirror) to a mirror, or give this machine internet access, then run this again",
        required.len(),
    );
    Err(Failure::Failed(String::new()))
}

/// `dplab data …`.
pub(crate) fn data_cmd(action: DataAction) -> Outcome {
    let reg = match data::Registry::current() {
        Ok(r) => r,
        Err(e) => {
            return Err(Failure::BadInput(format!("{e}")));
        }
    };
    let loc = data::Locations::current();
    let human = |n: u64| {
        if n >= 1 << 20 {
            format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
        } else {
            format!("{:.1} KiB", n as f64 / 1024.0)
        }
    };
    let unknown: Vec<&String> = match &action {
        DataAction::Fetch { names, .. } | DataAction::Verify { names } => names
            .iter()
            .filter(|n| !reg.datasets.contains_key(n.as_str()))
            .collect(),
        DataAction::List => vec![],
    };
    if let Some(n) = unknown.first() {
        return Err(Failure::BadInput(
            reg.dataset(n)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
                .to_string(),
        ));
    }
    match action {
        DataAction::List => {
            out!(
                "cache: {}\nmirror: {}\n",
                loc.cache.display(),
                loc.mirror
                    .as_ref()
                    .map(|m| m.display().to_string())
                    .unwrap_or_else(|| "(none; set DPLAB_DATA_MIRROR)".into())
            );
            for (name, ds) in &reg.datasets {
                out!("{name} — {}", ds.title);
                out!("  licence: {}", ds.licence);
                if !ds.redistribution {
                    out!("  NOT REDISTRIBUTABLE: do not commit or publish these files or row-level outputs.");
                }
                for st in data::status(reg, loc, Some(name)) {
                    let (present, where_) = match &st.state {
                        data::FileState::Cached(p) => ("yes", format!("cache {}", p.display())),
                        data::FileState::Mirrored(p) => ("yes", format!("mirror {}", p.display())),
                        data::FileState::Missing => ("no ", "—".to_string()),
                        data::FileState::Bad(m) => ("BAD", m.clone()),
                    };
                    let size = st.size.map(human).unwrap_or_else(|| "size unknown".into());
                    out!("  [{present}] {:<40} {:>10}  {where_}", st.file, size);
                }
            }
            Ok(())
        }
        DataAction::Fetch {
            pipelines, common, ..
        } if !pipelines.is_empty() => fetch_for_pipelines(reg, loc, &pipelines, &common),
        DataAction::Fetch {
            names,
            all,
            accept_unverified,
            common,
            ..
        } => {
            if common.profile.is_some() || !common.set_args().is_empty() {
                return Err(Failure::BadInput("--profile and --set choose what pipelines read: give them with --pipelines PATH".to_string()));
            }
            if names.is_empty() && !all {
                return Err(Failure::BadInput(
                    "name the datasets to fetch, give --all, or --pipelines PATH".to_string(),
                ));
            }
            let chosen: Vec<&String> = if all {
                reg.datasets.keys().collect()
            } else {
                names.iter().collect()
            };
            let mut failed = 0;
            for name in chosen {
                let ds = &reg.datasets[name.as_str()];
                for f in &ds.files {
                    match data::fetch(name, f, loc, accept_unverified) {
                        Ok(data::FetchOutcome::Present(p)) => out!("ok        {name}/{} (already in {})", f.name, p.display()),
                        Ok(data::FetchOutcome::Mirrored(p)) => out!("copied    {name}/{} from the mirror → {}", f.name, p.display()),
                        Ok(data::FetchOutcome::Downloaded { path, sha256, verified: true }) => {
                            out!("fetched   {name}/{} → {} (sha256 {sha256} verified)", f.name, path.display())
                        }
                        Ok(data::FetchOutcome::Downloaded { path, sha256, verified: false }) => out!(
                            "fetched   {name}/{} → {} UNVERIFIED: sha256 {sha256}; check it and record it in data/datasets.toml",
                            f.name,
                            path.display()
                        ),
                        Err(e) => {
                            failed += 1;
                            errln!("error: {e}");
                        }
                    }
                }
            }
            if failed > 0 {
                errln!("{failed} file(s) could not be fetched");
                Err(Failure::Failed(String::new()))
            } else {
                Ok(())
            }
        }
        DataAction::Verify { names } => {
            let mut bad = 0;
            let mut ok = 0;
            for (name, ds) in &reg.datasets {
                if !names.is_empty() && !names.contains(name) {
                    continue;
                }
                for f in &ds.files {
                    let candidates = [Some(loc.cached(name, &f.name)), loc.mirrored(name, &f.name)];
                    for p in candidates.into_iter().flatten().filter(|p| p.is_file()) {
                        match data::check_file(f, &p) {
                            Ok(()) => {
                                ok += 1;
                                out!("ok   {}", p.display());
                            }
                            Err(e) => {
                                bad += 1;
                                out!("BAD  {e}");
                            }
                        }
                    }
                }
            }
            out!("{ok} file(s) verified, {bad} bad");
            if bad > 0 {
                Err(Failure::Failed(String::new()))
            } else {
                Ok(())
            }
        }
    }
}
