//! The book (`docs/`) and the README stay true to the code:
//! - the stage-kind reference pages are what `dplab list --markdown` writes now (one source for
//!   the book, `dplab list` and the schema; `make docs` rewrites them);
//! - `docs/src/SUMMARY.md` links every page of the book, and every page it links exists;
//! - every YAML block of the README and the book is checked: a whole pipeline by `dplab
//!   validate`; a block marked ```` ```yaml fragment of=PATH ```` merged into the pipeline file
//!   PATH (its top-level mappings entry by entry: stages, axes, profiles; its lists appended:
//!   findings) and that validated; a block marked ```` ```yaml fragment ```` (a piece of a
//!   stage, shown alone) parsed as YAML. An unmarked block that is not a whole pipeline fails.
//!   A block of any language marked `file=PATH` (a program the page shows) is written at PATH
//!   beside the page's pipelines when they are validated;
//! - every `dplab` command line of a shell block names a subcommand and options that exist.

use std::fs;
use std::path::{Path, PathBuf};

use crate::common::{dplab, text, write};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every Markdown file under `dir`, recursively, relative to it, sorted.
fn pages(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                let rel = p
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_kind_pages_are_what_dplab_list_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let o = dplab()
        .args(["list", "--markdown"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let book = root().join("docs/src/kinds");
    let (fresh, kept) = (pages(tmp.path()), pages(&book));
    assert_eq!(
        fresh, kept,
        "docs/src/kinds has other pages than `dplab list --markdown` writes: run `make docs`"
    );
    for page in fresh {
        assert_eq!(
            fs::read_to_string(tmp.path().join(&page)).unwrap(),
            fs::read_to_string(book.join(&page)).unwrap(),
            "docs/src/kinds/{page} is stale: run `make docs` (it runs `dplab list --markdown docs/src/kinds`)"
        );
    }
}

/// The targets of Markdown links `](target)` in `text`, without anchors.
fn link_targets(text: &str) -> Vec<String> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split_once(')'))
        .map(|(target, _)| target.split('#').next().unwrap_or(target).to_string())
        .filter(|t| !t.is_empty() && !t.contains("://"))
        .collect()
}

#[test]
fn the_summary_links_every_page_and_only_pages_that_exist() {
    let src = root().join("docs/src");
    let summary = fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let linked = link_targets(&summary);
    for target in &linked {
        assert!(
            src.join(target).is_file(),
            "SUMMARY.md links {target}, which is not in docs/src"
        );
    }
    for page in pages(&src) {
        assert!(
            page == "SUMMARY.md" || linked.contains(&page),
            "docs/src/{page} is not in SUMMARY.md: the book would not show it"
        );
    }
    // The README's links into the book, and the book's links between its pages.
    for (file, base) in
        [("README.md".to_string(), root())]
            .into_iter()
            .chain(pages(&src).into_iter().map(|p| {
                let base = src.join(&p).parent().unwrap().to_path_buf();
                (format!("docs/src/{p}"), base)
            }))
    {
        let text = fs::read_to_string(root().join(&file)).unwrap();
        for target in link_targets(&text) {
            assert!(
                base.join(&target).exists(),
                "{file} links {target}, which does not exist"
            );
        }
    }
}

/// A fenced block of a Markdown file: its language, its info string after that, its text
/// (without the fence's indentation, for a block inside a list item), its line.
struct Block {
    lang: String,
    marker: String,
    text: String,
    line: usize,
    indent: usize,
}

fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        match open.as_mut() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let (lang, marker) = info.trim().split_once(' ').unwrap_or((info.trim(), ""));
                    open = Some(Block {
                        lang: lang.to_string(),
                        marker: marker.trim().to_string(),
                        text: String::new(),
                        line: i + 1,
                        indent: line.len() - trimmed.len(),
                    });
                }
            }
            Some(b) => {
                if trimmed.starts_with("```") {
                    out.push(open.take().unwrap());
                } else {
                    let cut = line.len().min(b.indent);
                    b.text.push_str(&line[cut..]);
                    b.text.push('\n');
                }
            }
        }
    }
    out
}

/// `base` with `fragment`'s top-level keys put in: mappings entry by entry, lists appended,
/// anything else replaced.
fn merged(base: &str, fragment: &str) -> String {
    use serde_yaml_ng::Value;
    let mut base: Value = serde_yaml_ng::from_str(base).unwrap();
    let fragment: Value = serde_yaml_ng::from_str(fragment).unwrap();
    let (Value::Mapping(base_map), Value::Mapping(frag)) = (&mut base, fragment) else {
        panic!("a fragment and its pipeline are mappings");
    };
    for (key, value) in frag {
        match (base_map.get_mut(&key), value) {
            (Some(Value::Mapping(into)), Value::Mapping(from)) => {
                for (k, v) in from {
                    into.insert(k, v);
                }
            }
            (Some(Value::Sequence(into)), Value::Sequence(from)) => into.extend(from),
            (_, value) => {
                base_map.insert(key, value);
            }
        }
    }
    serde_yaml_ng::to_string(&base).unwrap()
}

/// The README and every page of the book, relative to the repository.
fn documents() -> Vec<String> {
    std::iter::once("README.md".to_string())
        .chain(
            pages(&root().join("docs/src"))
                .into_iter()
                .map(|p| format!("docs/src/{p}")),
        )
        .collect()
}

#[test]
fn every_yaml_block_of_the_readme_and_the_book_is_checked() {
    let files = documents();
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for file in files {
        let markdown = fs::read_to_string(root().join(&file)).unwrap();
        let blocks = blocks(&markdown);
        // Blocks marked `file=PATH` (a program the page shows) are written beside every
        // pipeline of the page that is validated.
        let shown: Vec<(&str, &str)> = blocks
            .iter()
            .filter_map(|b| Some((b.marker.strip_prefix("file=")?, b.text.as_str())))
            .collect();
        for block in blocks.iter().filter(|b| b.lang == "yaml") {
            let at = format!("{file}:{}", block.line);
            let whole = match block.marker.as_str() {
                "" => block.text.clone(),
                "fragment" => {
                    let parsed: Result<serde_yaml_ng::Value, _> =
                        serde_yaml_ng::from_str(&block.text);
                    assert!(parsed.is_ok(), "{at}: not YAML: {parsed:?}");
                    checked += 1;
                    continue;
                }
                marker => {
                    let Some(of) = marker.strip_prefix("fragment of=") else {
                        panic!("{at}: unknown marker `{marker}` (none, `fragment` or `fragment of=PATH`)");
                    };
                    let base = fs::read_to_string(root().join(of))
                        .unwrap_or_else(|e| panic!("{at}: reading {of}: {e}"));
                    // Validated beside the pipeline it belongs to: its tables and programs.
                    let merged = merged(&base, &block.text);
                    let dir = tmp.path().join(format!("b{checked}"));
                    copy_dir(root().join(of).parent().unwrap(), &dir);
                    let p = write(&dir, "fragment.yaml", &merged);
                    validate(&p, &at, &merged);
                    checked += 1;
                    continue;
                }
            };
            assert!(
                whole.contains("\nstages:") || whole.starts_with("stages:"),
                "{at}: a YAML block that is not a whole pipeline: mark it ```yaml fragment \
                 (a piece shown alone) or ```yaml fragment of=PATH (merged into that pipeline)"
            );
            let dir = tmp.path().join(format!("b{checked}"));
            for (path, text) in &shown {
                write(&dir, path, text);
            }
            let p = write(&dir, "block.yaml", &whole);
            validate(&p, &at, &whole);
            checked += 1;
        }
    }
    assert!(checked >= 9, "only {checked} YAML blocks found");
}

fn validate(path: &Path, at: &str, yaml: &str) {
    let o = dplab().arg("validate").arg(path).output().unwrap();
    assert!(
        o.status.success(),
        "{at}: `dplab validate` refuses this block:\n{}\n--- as validated:\n{yaml}",
        text(&o)
    );
}

/// Copies the directory `from` into `to`, so a fragment validates beside what its pipeline
/// reads (tables, programs).
fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let target = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &target);
        } else {
            fs::copy(&p, &target).unwrap();
        }
    }
}

/// Every `dplab` command line in a shell block of the README or the book names a subcommand
/// that exists and only options that subcommand's `--help` lists: a renamed flag cannot stay
/// in the docs. The cheap ones that read nothing but the shipped pipelines — `list`,
/// `validate`, `show`, `graph` — are also run from the repository's root, each optional
/// `[--flag]` once without and once with it, and must succeed (a line naming a file of the
/// reader's own, `study.yaml`, or a placeholder, `KIND`, is checked for its options only).
/// The others are not run here: they need a cluster, the datasets or minutes, and the
/// pipelines they name are run by the golden tests.
#[test]
fn every_dplab_command_in_the_docs_uses_options_that_exist() {
    let files = documents();
    let mut helps: std::collections::HashMap<Vec<String>, String> = Default::default();
    let (mut checked, mut ran) = (0, 0);
    for file in files {
        let markdown = fs::read_to_string(root().join(&file)).unwrap();
        for block in blocks(&markdown).iter().filter(|b| b.lang == "sh") {
            for (i, line) in block.text.lines().enumerate() {
                let at = format!("{file}:{}", block.line + 1 + i);
                let command = line.trim_start().trim_start_matches("$ ");
                let command = command.split(" #").next().unwrap_or(command);
                // `dplab …` as installed, or the binary by its path as `make build` leaves it.
                let Some(args) = command
                    .strip_prefix("dplab ")
                    .or_else(|| command.strip_prefix("target/release/dplab "))
                else {
                    continue;
                };
                let words: Vec<String> = args
                    .split_whitespace()
                    .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
                    .filter(|w| !w.is_empty() && w != "\\" && w != "|" && w != ">")
                    .collect();
                // The subcommand, and the second word for the commands that have their own.
                let mut path = vec![words[0].clone()];
                if matches!(words[0].as_str(), "data" | "store") && words.len() > 1 {
                    path.push(words[1].clone());
                }
                let help = helps.entry(path.clone()).or_insert_with(|| {
                    let o = dplab().args(&path).arg("--help").output().unwrap();
                    assert!(
                        o.status.success(),
                        "{at}: `dplab {}` does not exist:\n{}",
                        path.join(" "),
                        text(&o)
                    );
                    String::from_utf8_lossy(&o.stdout).into_owned()
                });
                for word in &words {
                    let option = word.split('=').next().unwrap_or(word);
                    let is_option = option.starts_with("--") && option.len() > 2
                        || (option.len() == 2 && option.starts_with('-'));
                    if is_option {
                        assert!(
                            help.split(|c: char| c.is_whitespace() || c == ',')
                                .any(|w| w == option
                                    || w.starts_with(&format!("{option}="))
                                    || w.starts_with(&format!("{option}["))),
                            "{at}: `dplab {}` has no option {option}",
                            path.join(" ")
                        );
                    }
                }
                checked += 1;
                if let Some(runs) = runnable(args) {
                    for args in runs {
                        let o = dplab()
                            .current_dir(root())
                            .env("DPLAB_DATA_MIRROR", "")
                            .args(&args)
                            .output()
                            .unwrap();
                        assert!(
                            o.status.success(),
                            "{at}: `dplab {}` failed:\n{}",
                            args.join(" "),
                            text(&o)
                        );
                        ran += 1;
                    }
                }
            }
        }
    }
    assert!(checked >= 30, "only {checked} dplab command lines found");
    assert!(ran >= 6, "only {ran} dplab command lines run");
}

/// A documented command line's arguments (after `dplab`) as the argument lists to run, or None when it is not one of the
/// cheap read-only subcommands or names something that is not in the repository (a reader's
/// own file, an upper-case placeholder) or writes somewhere (`>`). An optional `[--flag]`
/// gives two runs, without and with it.
fn runnable(args: &str) -> Option<Vec<Vec<String>>> {
    if args.contains('>') || args.contains('|') {
        return None;
    }
    let mut plain = Vec::new();
    let mut optional = Vec::new();
    let mut in_brackets = false;
    for word in args.split_whitespace() {
        let opens = word.starts_with('[');
        let closes = word.ends_with(']');
        let w = word.trim_matches(|c| c == '[' || c == ']').to_string();
        if w.chars().any(|c| c.is_ascii_lowercase()) || w.starts_with('-') {
            if in_brackets || opens {
                optional.push(w);
            } else {
                plain.push(w);
            }
        } else if !opens && !in_brackets {
            return None; // a placeholder the reader fills in (KIND, FILE)
        }
        in_brackets = (in_brackets || opens) && !closes;
    }
    if !matches!(plain[0].as_str(), "list" | "validate" | "show" | "graph") {
        return None;
    }
    let files_exist = plain[1..]
        .iter()
        .filter(|w| !w.starts_with('-') && (w.contains('/') || w.ends_with(".yaml")))
        .all(|w| root().join(w).exists());
    if !files_exist {
        return None;
    }
    let mut runs = vec![plain.clone()];
    if !optional.is_empty() {
        runs.push(plain.into_iter().chain(optional).collect());
    }
    Some(runs)
}

/// The book's introduction is the README's opening, written once: `docs/src/introduction.md`
/// is made from `README.md` (its text up to `## A pipeline`, the title `# Introduction`, links
/// into the book made relative to the book), so the two cannot drift apart. With
/// `DPLAB_DOCS_UPDATE=1` (`make intro`) this test writes it; otherwise it fails while the
/// committed page is not what the README gives.
#[test]
fn the_introduction_is_the_readme_s_opening() {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    let (opening, _) = readme
        .split_once("\n## A pipeline")
        .expect("README.md has a `## A pipeline` section after its opening");
    let body = opening
        .strip_prefix("# dplab\n")
        .expect("README.md starts with `# dplab`");
    let page = format!(
        "# Introduction\n{}\n",
        body.replace("](docs/src/", "](").trim_end()
    );
    let path = root().join("docs/src/introduction.md");
    if std::env::var_os("DPLAB_DOCS_UPDATE").is_some() {
        fs::write(&path, &page).unwrap();
        return;
    }
    let committed = fs::read_to_string(&path).unwrap();
    assert!(
        committed == page,
        "docs/src/introduction.md is written from README.md's opening: run `make intro` and commit it"
    );
}
