//! `dplab store info|gc`.

use crate::cli::args::{StoreAction, StoreArgs};
use crate::cli::exit::Outcome;

pub(crate) fn store_cmd(args: &StoreArgs, action: StoreAction) -> Outcome {
    let Some(found) = args.store(None) else {
        return Ok(());
    };
    tracing::debug!("{}", found.describe());
    let store = dplab::pipeline::instance_store::InstanceStore::new(found.root);
    let mb = |b: u64| format!("{:.1} MB", b as f64 / 1e6);
    let entries = store.entries();
    match action {
        StoreAction::Info => {
            let total: u64 = entries.iter().map(|e| e.bytes).sum();
            out!(
                "{}: {} entries, {}",
                store.root().display(),
                entries.len(),
                mb(total)
            );
            let size: std::collections::HashMap<&str, u64> =
                entries.iter().map(|e| (e.key.as_str(), e.bytes)).collect();
            for (pipeline, keys) in dplab::pipeline::record::recorded_keys(&store) {
                let present: Vec<u64> = keys
                    .iter()
                    .filter_map(|k| size.get(k.as_str()).copied())
                    .collect();
                out!(
                    "  {pipeline:<28} {:>8} entries {:>10}  (its last run; entries shared with other pipelines count in each)",
                    present.len(),
                    mb(present.iter().sum())
                );
            }
            Ok(())
        }
        StoreAction::Gc { keep, dry_run } => {
            let mut referenced = std::collections::HashSet::new();
            for root in &keep {
                let dirs = std::fs::read_dir(root).into_iter().flatten().flatten();
                for d in dirs {
                    referenced.extend(dplab::pipeline::instance_store::manifest_keys(&d.path()));
                }
            }
            let unused: Vec<_> = entries
                .iter()
                .filter(|e| !referenced.contains(&e.key))
                .collect();
            let bytes: u64 = unused.iter().map(|e| e.bytes).sum();
            if dry_run {
                out!(
                    "would remove {} of {} entries ({}): no results directory under {} references them",
                    unused.len(),
                    entries.len(),
                    mb(bytes),
                    keep.iter().map(|k| k.display().to_string()).collect::<Vec<_>>().join(", ")
                );
            } else {
                let (n, freed) = store.gc(&referenced);
                out!("removed {n} of {} entries ({})", entries.len(), mb(freed));
            }
            Ok(())
        }
    }
}
