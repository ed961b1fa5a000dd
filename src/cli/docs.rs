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
    for k in kinds(kind)? {
        out!("{}\n    {}", k.name, k.summary);
        if let Some(gather) = gather_text(k.gather) {
            out!("    ({gather})");
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
    out!("{EVERY_STAGE}");
    Ok(())
}

/// What every stage takes besides its kind's parameters.
const EVERY_STAGE: &str = "Every stage also takes: kind, input (a stage or a list), with (the parameters above), \
over (axes to gather: `all` or a list), repeat (run N times over axis `rep`), store (write its frame; default true).";

/// The kinds `dplab list` shows: all, or the one named (with a did-you-mean when none is).
fn kinds(kind: Option<&str>) -> Result<Vec<&'static stages::KindInfo>, Failure> {
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
    Ok(kinds)
}

fn gather_text(gather: stages::Gather) -> Option<&'static str> {
    match gather {
        stages::Gather::All => Some("gathers every axis of its inputs into one instance unless `over:` says otherwise"),
        stages::Gather::Unshared => Some("varies over the axes all its inputs vary over, and gathers the others, unless `over:` says otherwise"),
        stages::Gather::Nothing => None,
    }
}

/// `dplab list --markdown DIR`: the text of `dplab list` as the book's reference pages, one
/// per kind (`KIND.md`) and an index (`index.md`; `dplab list KIND --markdown DIR` writes that
/// kind's page alone), so the book and the command say the same
/// thing from one source (the kinds' summaries and their parameters' schemas). Writes only
/// those files, into DIR (created if missing); the book's copy is checked by
/// `cargo test --test it docs` and rewritten by `make docs`.
pub(crate) fn list_markdown(kind: Option<&str>, dir: &Path) -> Outcome {
    let kinds = kinds(kind)?;
    let write = |name: &str, text: String| {
        std::fs::write(dir.join(name), text)
            .map_err(|e| Failure::Failed(format!("writing {}: {e}", dir.join(name).display())))
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::Failed(format!("creating {}: {e}", dir.display())))?;
    let mut index = String::from(
        "# Stage kinds\n\nEvery kind dplab has, by family, with what it does; each page lists its \
         parameters as `dplab list KIND` prints them (both come from the kind's own description and \
         its parameters' schema: `make docs` writes these pages with `dplab list --markdown`, and \
         `make test` fails while they are stale). Each page also shows the doc comment of the \
         kind's module under `src/stages/` (the file that says `name: \"KIND\"`): the guarantee it \
         keeps and the paper it follows, as the source says them.\n",
    );
    // Families in the order the registry first names them, each kind under its own.
    let mut families: Vec<(&str, Vec<&stages::KindInfo>)> = Vec::new();
    for k in &kinds {
        let family = k.name.split('.').next().unwrap_or(k.name);
        match families.iter_mut().find(|(f, _)| *f == family) {
            Some((_, members)) => members.push(k),
            None => families.push((family, vec![k])),
        }
    }
    for (family, members) in families {
        index.push_str(&format!("\n## {family}\n\n"));
        for k in members {
            index.push_str(&format!("- [`{0}`]({0}.md) — {1}\n", k.name, k.summary));
            write(&format!("{}.md", k.name), kind_page(k))?;
        }
    }
    // One kind's page alone leaves the index of every kind as it is.
    if kind.is_some() {
        out!("wrote {}.md into {}", kinds[0].name, dir.display());
        return Ok(());
    }
    write("index.md", index)?;
    out!(
        "wrote {} kind pages and index.md into {}",
        kinds.len(),
        dir.display()
    );
    Ok(())
}

// Each kind's file and module doc, read by build.rs: the guarantee is written once, there.
include!(concat!(env!("OUT_DIR"), "/kind_docs.rs"));

/// One kind's reference page.
fn kind_page(k: &stages::KindInfo) -> String {
    let mut page = format!("# `{}`\n\n{}\n", k.name, k.summary);
    if let Some(gather) = gather_text(k.gather) {
        page.push_str(&format!("\nIt {gather}.\n"));
    }
    if k.runs_programs {
        page.push_str("\nIt runs programs: a pipeline with it runs only with `--allow-exec`.\n");
    }
    if let Some((_, file, doc)) = KIND_DOCS.iter().find(|(n, _, _)| *n == k.name) {
        page.push_str(&format!(
            "\n## What it does and guarantees\n\nFrom the doc comment of `{file}`, where it is written:\n\n{doc}\n"
        ));
    }
    let params = k.param_lines();
    page.push_str("\n## Parameters\n\n");
    if params.is_empty() {
        page.push_str("None.\n");
    }
    for p in params {
        page.push_str(&format!("- **`{}`** — {}, {}.", p.name, p.ty, p.default));
        if !p.meaning.is_empty() {
            page.push_str(&format!(" {}", sentence(&p.meaning)));
        }
        page.push('\n');
    }
    page.push_str(&format!("\n{EVERY_STAGE}\n\n`dplab list {}` prints this page; `dplab schema` has it as JSON Schema.\n", k.name));
    page
}

/// A parameter's meaning as a sentence: a lower-case Latin first letter capitalised (a symbol
/// keeps its case: ρ is not Ρ, ε not Ε), with a full stop.
fn sentence(text: &str) -> String {
    let mut out = text.to_string();
    if let Some(first) = out.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    if !out.ends_with('.') {
        out.push('.');
    }
    out
}
