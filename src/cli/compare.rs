//! `dplab compare`: two results directories, frame by frame.

use std::path::{Path, PathBuf};

use dplab::pipeline::compare;

use crate::cli::exit::{Failure, Outcome};

pub(crate) fn compare_cmd(
    a: &Path,
    b: &Path,
    tol: compare::Tolerance,
    allow_missing: bool,
) -> Outcome {
    for d in [a, b] {
        if !d.is_dir() {
            return Err(Failure::BadInput(format!(
                "{}: not a directory",
                d.display()
            )));
        }
    }
    // Two results roots: compare each pipeline directory present in either. A directory with
    // a manifest is one pipeline's (its `rerun/` folder is not a pipeline).
    let one_pipeline = [a, b].iter().any(|d| d.join("manifest.json").is_file());
    let subdirs = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().is_dir() && !e.file_name().to_string_lossy().starts_with('.'))
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect();
        v.sort();
        v
    };
    let (sa, sb) = (subdirs(a), subdirs(b));
    let pairs: Vec<(PathBuf, PathBuf, String)> = if one_pipeline || (sa.is_empty() && sb.is_empty())
    {
        vec![(a.to_path_buf(), b.to_path_buf(), String::new())]
    } else {
        let mut names: Vec<String> = sa.iter().chain(&sb).cloned().collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .map(|n| (a.join(&n), b.join(&n), n))
            .collect()
    };
    // Different profiles first: then the frames are not expected to match at all.
    let mut profiles: Vec<(String, String, String)> = Vec::new();
    for (da, db, name) in &pairs {
        if let (Some(ma), Some(mb)) = (compare::made(da), compare::made(db)) {
            if ma.profile != mb.profile {
                profiles.push((name.clone(), ma.profile_name(), mb.profile_name()));
            }
        }
    }
    let all_alike = profiles
        .windows(2)
        .all(|w| (&w[0].1, &w[0].2) == (&w[1].1, &w[1].2));
    if let (Some((_, pa, pb)), true) = (profiles.first(), all_alike) {
        let which = if profiles.len() == 1 && profiles[0].0.is_empty() {
            String::new()
        } else {
            format!(
                " ({} pipeline{}: {})",
                profiles.len(),
                if profiles.len() == 1 { "" } else { "s" },
                profiles
                    .iter()
                    .map(|p| p.0.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        out!(
            "DIFFERENT PROFILES: A ({}) was made with {pa}, B ({}) with {pb}{which}; their frames are not expected to match",
            a.display(),
            b.display()
        );
    } else {
        for (name, pa, pb) in &profiles {
            out!("DIFFERENT PROFILES: {name}: A was made with {pa}, B with {pb}; its frames are not expected to match");
        }
    }
    let mut mismatch = !profiles.is_empty();
    let (mut frames, mut cells, mut timings) = (0, 0, 0);
    for (da, db, name) in pairs {
        if !da.is_dir() && db.is_dir() && allow_missing {
            out!(
                "{name}: not in {} (not compared: --allow-missing)",
                a.display()
            );
            continue;
        }
        if !da.is_dir() || !db.is_dir() {
            out!(
                "{name}: only in {}",
                if da.is_dir() {
                    a.display()
                } else {
                    b.display()
                }
            );
            mismatch = true;
            continue;
        }
        match compare::compare_dirs(&da, &db, tol) {
            Ok(c) => {
                frames += c.frames;
                cells += c.cells;
                timings += c.timings;
                for f in &c.unreproducible {
                    tracing::info!(
                        "{}{f}: not compared: its stage is not reproducible bit for bit (a program dplab cannot seed, or a stage that reads one's output)",
                        if name.is_empty() { String::new() } else { format!("{name}/") }
                    );
                }
                if !c.report.is_empty() {
                    mismatch = true;
                    for line in c.report.lines() {
                        if name.is_empty() {
                            out!("{line}")
                        } else {
                            out!("{name}/{line}")
                        }
                    }
                }
            }
            Err(e) => {
                return Err(Failure::BadInput(format!("{e:#}")));
            }
        }
    }
    if mismatch {
        out!(
            "MISMATCH (rtol {}, atol {}){}",
            tol.rtol(),
            tol.atol(),
            if profiles.is_empty() {
                ""
            } else {
                "; the directories were made with different profiles (see the first line)"
            }
        );
        Err(Failure::Failed(String::new()))
    } else {
        out!(
            "ok: {frames} frames, {cells} cells match (rtol {}, atol {}); {timings} wall-time cells not compared",
            tol.rtol(), tol.atol()
        );
        Ok(())
    }
}
