//! Every mechanism module's `//!` documentation opens with the same four headings, in this
//! order, each followed by text: `# Guarantee`, `# Conditions`, `# Reference`,
//! `# Deviations from the paper` (the convention is described in `src/mech/mod.rs`). Other
//! headings may follow them. Every file under `src/mech/` is either a mechanism or a helper
//! listed below, so a new mechanism file cannot slip past the check.

use std::path::{Path, PathBuf};

/// The headings every mechanism module opens with, in order.
const HEADINGS: [&str; 4] = [
    "Guarantee",
    "Conditions",
    "Reference",
    "Deviations from the paper",
];

/// Modules that release data-dependent output with a privacy guarantee of their own: the
/// entries of `src/mech/mod.rs`'s "Find a mechanism by its paper name" list, the module of
/// the trigonometric mechanism, and private subspace iteration (the thesis's Algorithms 6
/// and 7, which carry their own guarantee, Theorem 2.10).
const MECHANISMS: &[&str] = &[
    "discrete_gaussian.rs",
    "exponential.rs",
    "gaussian.rs",
    "geometric.rs",
    "laplace.rs",
    "near_optimal.rs",
    "noisy_max.rs",
    "rate_distortion.rs",
    "staircase.rs",
    "trig/mechanism.rs",
    "trig/psi.rs",
];

/// Modules that are not mechanisms: module indexes, numerics, statistics, and the pieces of
/// the trigonometric mechanism that touch no data or only post-process private output.
const HELPERS: &[&str] = &[
    // module indexes
    "mod.rs",
    "trig/mod.rs",
    // numerics and statistics
    "audit/mod.rs",   // the black-box audit: bounds on any mechanism's privacy loss
    "audit/bound.rs", // its bound, and what a bound of 0 could have seen
    "audit/event.rs", // events on releases and their text
    "audit/keep.rs",  // scoring candidate events and keeping the best
    "audit/search/mod.rs", // choosing one event among the searches'
    "audit/search/discrete.rs", // the searches, one family a file
    "audit/search/ranges.rs",
    "audit/search/logistic.rs",
    "audit/search/support.rs",
    "audit/search/bits.rs",
    "privacy.rs", // privacy claims and their profiles δ(ε): conversions, no mechanism
    "audit/tests.rs", // its tests (bounds against scipy, each search's power)
    "fastmath.rs",
    "interval.rs",
    "quadrature.rs",
    "stats.rs",
    // pieces of the trigonometric mechanism
    "trig/basis.rs",     // the query basis, the grid and the parameter schedules
    "trig/ellipsoid.rs", // sampling in an ellipsoid: touches no data
    "trig/kernel.rs",    // the smooth queries and their answers
    "trig/kernel/factored.rs", // their answers on points with few distinct values (a trie)
    "trig/kernel/taylor.rs", // their answers at wide bandwidths (the kernel's Taylor series)
    "trig/kernel/choice.rs", // which of the direct and factored evaluations a call takes
    "trig/data.rs",      // the database and its data-only quantities, kept across runs
    "trig/lp.rs",        // the ℓ₁ fit: post-processing of the noisy answers
    // tests kept beside their modules
    "near_optimal/tests.rs",
    "rate_distortion/hamming.rs", // its O(m) Hamming kernel (the same iterates, cheaper)
    "rate_distortion/tests.rs",
    "rate_distortion/underflow_tests.rs",
    "trig/kernel/tests.rs",
    "trig/mechanism/tests.rs",
    "trig/lp/tests.rs",
];

fn mech_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/mech")
}

/// The `.rs` files under `dir`, as paths relative to `root` with `/` separators.
fn rust_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(root, &p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(root).unwrap();
            let parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.push(parts.join("/"));
        }
    }
}

/// The module documentation: the leading `//!` lines, without the marker (and one space).
fn module_doc(source: &str) -> Vec<String> {
    source
        .lines()
        .take_while(|l| l.trim_start().starts_with("//!"))
        .map(|l| {
            let rest = l.trim_start().trim_start_matches("//!");
            rest.strip_prefix(' ').unwrap_or(rest).to_string()
        })
        .collect()
}

/// The problems of one module's documentation against the convention (empty if it follows it).
fn check_doc(doc: &[String]) -> Vec<String> {
    // Top-level Markdown headings outside code fences, with the text that follows each.
    let mut sections: Vec<(String, Vec<&str>)> = Vec::new();
    let mut in_fence = false;
    for line in doc {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        if !in_fence {
            if let Some(title) = line.strip_prefix("# ") {
                sections.push((title.trim().to_string(), Vec::new()));
                continue;
            }
        }
        if let Some((_, body)) = sections.last_mut() {
            body.push(line);
        }
    }
    let mut problems = Vec::new();
    let titles: Vec<&str> = sections.iter().map(|(t, _)| t.as_str()).collect();
    if titles.len() < HEADINGS.len() || titles[..HEADINGS.len()] != HEADINGS {
        problems.push(format!(
            "the first headings are {:?}, not {:?}",
            &titles[..titles.len().min(HEADINGS.len())],
            HEADINGS
        ));
    }
    for (title, body) in &sections {
        if HEADINGS.contains(&title.as_str()) && body.iter().all(|l| l.trim().is_empty()) {
            problems.push(format!("`# {title}` has no text under it"));
        }
        if HEADINGS.contains(&title.as_str()) && titles.iter().filter(|t| *t == title).count() > 1 {
            problems.push(format!("`# {title}` appears more than once"));
        }
    }
    problems
}

#[test]
fn every_file_under_src_mech_is_a_mechanism_or_a_helper() {
    let root = mech_dir();
    let mut files = Vec::new();
    rust_files(&root, &root, &mut files);
    files.sort();
    let unlisted: Vec<&String> = files
        .iter()
        .filter(|f| !MECHANISMS.contains(&f.as_str()) && !HELPERS.contains(&f.as_str()))
        .collect();
    assert!(
        unlisted.is_empty(),
        "src/mech/ files in neither list of tests/it/mechanism_docs.rs: {unlisted:?}; a mechanism \
         goes in MECHANISMS and follows the doc convention of src/mech/mod.rs"
    );
    let stale: Vec<&&str> = MECHANISMS
        .iter()
        .chain(HELPERS)
        .filter(|f| !files.iter().any(|g| g == *f))
        .collect();
    assert!(stale.is_empty(), "listed but missing: {stale:?}");
    let both: Vec<&&str> = MECHANISMS.iter().filter(|f| HELPERS.contains(f)).collect();
    assert!(both.is_empty(), "listed as mechanism and helper: {both:?}");
}

#[test]
fn every_mechanism_doc_opens_with_the_four_headings() {
    let mut problems = Vec::new();
    for file in MECHANISMS {
        let source = std::fs::read_to_string(mech_dir().join(file)).unwrap();
        for p in check_doc(&module_doc(&source)) {
            problems.push(format!("src/mech/{file}: {p}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_convention_is_documented_in_mod_rs() {
    let doc = module_doc(&std::fs::read_to_string(mech_dir().join("mod.rs")).unwrap()).join("\n");
    for h in HEADINGS {
        assert!(
            doc.contains(&format!("`# {h}`")),
            "src/mech/mod.rs does not name the heading `# {h}`"
        );
    }
}

/// The checker itself: a doc that follows the convention passes, and each way to break it
/// is caught (missing, reordered, empty, and a heading only inside a code block).
#[test]
fn the_checker_rejects_broken_docs() {
    let doc = |s: &str| -> Vec<String> { s.lines().map(str::to_string).collect() };
    let good = "Intro.\n\n# Guarantee\nε-DP.\n# Conditions\nε > 0.\n# Reference\nA paper.\n\
                # Deviations from the paper\nNone.\n# Sampling\nBy inversion.";
    assert!(
        check_doc(&doc(good)).is_empty(),
        "{:?}",
        check_doc(&doc(good))
    );
    let missing = good.replace("# Reference\nA paper.\n", "");
    assert!(!check_doc(&doc(&missing)).is_empty());
    let reordered = "# Conditions\nε > 0.\n# Guarantee\nε-DP.\n# Reference\nA paper.\n\
                     # Deviations from the paper\nNone.";
    assert!(!check_doc(&doc(reordered)).is_empty());
    let empty = good.replace("ε > 0.\n", "\n");
    assert!(!check_doc(&doc(&empty)).is_empty());
    let first_other = format!("# Sampling\nBy inversion.\n{good}");
    assert!(!check_doc(&doc(&first_other)).is_empty());
    let fenced = good.replace("# Guarantee\n", "```text\n# Guarantee\n```\n");
    assert!(!check_doc(&doc(&fenced)).is_empty());
    let twice = format!("{good}\n# Guarantee\nAgain.");
    assert!(!check_doc(&doc(&twice)).is_empty());
}
