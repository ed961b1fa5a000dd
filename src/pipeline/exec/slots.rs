//! Slots: how many instances run at once in the whole command, whichever pipeline they are
//! of. `dplab run pipelines/` runs its pipelines at once, each with its own scheduler (its
//! readiness, store, results, messages and failures), and every scheduler's worker takes a
//! slot for the instance it runs: one pool of `--jobs` for the run. One pipeline after
//! another left a core idle whenever the running one had a single instance left (the
//! DP-Sniper suite's slowest audit ran alone for half a minute) though the next pipeline's
//! instances were ready; with slots shared, no core waits while any pipeline has work.
//!
//! A worker takes its slot after it has taken an instance (so a slot never waits for an
//! instance to become ready) and gives it back when the instance is done or deferred.
//!
//! The command also starts at most a few pipelines at once (its own `Slots`, see
//! `cli/run.rs`): each has `--jobs` threads, and a thread keeps the worker process of the
//! stage it served last (`program::worker`), so pipelines without bound would keep
//! pipelines × `--jobs` of them alive.

use std::sync::{Condvar, Mutex};

/// A pool of `n` slots shared by every pipeline of a command.
pub struct Slots {
    free: Mutex<usize>,
    freed: Condvar,
}

/// A slot taken: given back when dropped.
pub struct Slot<'a>(&'a Slots);

impl Slots {
    /// `n` slots (at least one).
    pub fn new(n: usize) -> Self {
        Slots {
            free: Mutex::new(n.max(1)),
            freed: Condvar::new(),
        }
    }

    /// A slot, once one is free.
    pub fn take(&self) -> Slot<'_> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= 1;
        Slot(self)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn no_more_than_n_hold_a_slot_at_once_and_every_taker_gets_one() {
        let slots = Slots::new(2);
        let (now, most, done) = (
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        );
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..20 {
                        let _slot = slots.take();
                        let held = now.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(held, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_micros(200));
                        now.fetch_sub(1, Ordering::SeqCst);
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        assert_eq!(done.load(Ordering::SeqCst), 160);
        assert_eq!(most.load(Ordering::SeqCst), 2);
    }
}
