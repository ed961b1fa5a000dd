//! What dplab says about itself: `dplab list` (every kind and its parameters, rendered from
//! their schemas), `dplab schema`, `dplab completions` and `dplab man`.

use std::path::Path;

use dplab::pipeline::spec;
use dplab::stages;

use crate::cli::args::Cli;
use crate::cli::exit::{Failure, Outcome};

/// `dplab schema`: the JSON Schema of a pipeline file.
pub(crate) fn schema() -> Outcome {
    let schema = dplab::pipeline::schema::pipeline_schema(stages::registry::all());
    out!(
        "{}",
        serde_json::to_string_pretty(&schema).expect("a JSON value prints")
    );
    Ok(())
}

/// `dplab completions SHELL`.
pub(crate) fn completions(shell: clap_complete::Shell) -> Outcome {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    clap_complete::generate(shell, &mut cmd, "dplab", &mut std::io::stdout());
    Ok(())
}

/// `dplab man`: the top page to stdout, or every page into `dir`.
pub(crate) fn man(dir: Option<&Path>) -> Outcome {
    let cmd = <Cli as clap::CommandFactory>::command();
    let Some(dir) = dir else {
        let mut out = Vec::new();
        if let Err(e) = clap_mangen::Man::new(cmd).render(&mut out) {
            return Err(Failure::Failed(format!("rendering the manual page: {e}")));
        }
        out_raw!("{}", String::from_utf8_lossy(&out));
        return Ok(());
    };
    let written = std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))
        .and_then(|()| {
            clap_mangen::generate_to(cmd, dir)
                .map_err(|e| anyhow::anyhow!("writing pages into {}: {e}", dir.display()))
        });
    match written {
        Ok(()) => {
            out!("manual pages written to {}", dir.display());
            Ok(())
        }
        Err(e) => Err(Failure::BadInput(format!("{e:#}"))),
    }
}

/// `dplab list [KIND]`.
pub(crate) fn list(kind: Option<&str>) -> Outcome {
    let kinds: Vec<_> = stages::registry::all()
        .iter()
        .filter(|k| kind.is_none_or(|n| k.name == n))
        .collect();
    if kinds.is_empty() {
        let name = kind.unwrap_or_default();
        let hint = spec::suggest(name, stages::registry::all().iter().map(|k| k.name))
            .map(|s| format!("; did you mean `{s}`?"))
            .unwrap_or_default();
        return Err(Failure::BadInput(format!("no stage kind `{name}`{hint}")));
    }
    for k in kinds {
        out!("{}\n    {}", k.name, k.summary);
        match k.gather {
            stages::Gather::All => out!("    (gathers every axis of its inputs into one instance unless `over:` says otherwise)"),
            stages::Gather::Unshared => out!("    (varies over the axes all its inputs vary over, and gathers the others, unless `over:` says otherwise)"),
            stages::Gather::Nothing => {}
        }
        for p in k.param_lines() {
            out!(
                "    {:<16} {} ({})\n    {:<16} {}",
                p.name,
                p.ty,
                p.default,
                "",
                p.meaning
            );
        }
        out!("");
    }
    out!("Every stage also takes: kind, input (a stage or a list), with (the parameters above), \
over (axes to gather: `all` or a list), repeat (run N times over axis `rep`), store (write its frame; default true).");
    Ok(())
}
