//! What a kind keeps across its instances in one process: values that are pure functions of
//! their key (a query family of its seed, a database's data-only quantities of its rows), so a
//! kept value has the bits a fresh one would have and keeping it changes no result, only the
//! time. The most recently used are kept, up to a memory cap; a value larger than the cap is
//! not kept at all.
//!
//! Two kinds keep values this way: `query.smooth` / `evaluate.smooth_queries` their query
//! families, `mechanism.trigonometric` its databases (see each for what a value costs).

use std::sync::{Arc, Mutex};

/// What a kept value costs in memory.
pub(crate) trait Footprint {
    fn bytes(&self) -> usize;
}

/// Values by key, the most recently used last.
pub(crate) struct Kept<K, V>(Vec<(K, Arc<V>)>);

impl<K: PartialEq, V: Footprint> Kept<K, V> {
    pub const fn new() -> Self {
        Self(Vec::new())
    }

    /// The kept value whose key and value `matches` accepts, now the most recently used.
    pub fn find(&mut self, matches: impl Fn(&K, &V) -> bool) -> Option<Arc<V>> {
        let at = self.0.iter().position(|(k, v)| matches(k, v))?;
        let entry = self.0.remove(at);
        let value = Arc::clone(&entry.1);
        self.0.push(entry);
        Some(value)
    }

    /// The kept value for `key`, now the most recently used.
    pub fn take(&mut self, key: &K) -> Option<Arc<V>> {
        self.find(|k, _| k == key)
    }

    /// Keeps `value` under `key` (unless a value is kept there already), dropping the least
    /// recently used ones beyond `cap` bytes.
    pub fn keep(&mut self, key: K, value: Arc<V>, cap: usize) {
        let size = value.bytes();
        if size > cap || self.0.iter().any(|(k, _)| *k == key) {
            return;
        }
        let mut held: usize = self.0.iter().map(|(_, v)| v.bytes()).sum();
        while held + size > cap {
            let (_, dropped) = self.0.remove(0);
            held -= dropped.bytes();
        }
        self.0.push((key, value));
    }
}

/// The lock of a process-wide `Kept`. A panic while it was held cannot have left a
/// half-written entry (entries are pushed and removed whole), so a poisoned lock's contents
/// are still good.
pub(crate) fn lock<K, V>(kept: &Mutex<Kept<K, V>>) -> std::sync::MutexGuard<'_, Kept<K, V>> {
    kept.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::{Footprint, Kept};
    use std::sync::Arc;

    struct Bytes(usize);

    impl Footprint for Bytes {
        fn bytes(&self) -> usize {
            self.0
        }
    }

    /// Beyond the cap the least recently used value goes; one larger than the cap is not kept;
    /// a key kept already keeps its value.
    #[test]
    fn the_least_recently_used_value_goes_first() {
        let v = |n| Arc::new(Bytes(n));
        let mut kept = Kept::new();
        kept.keep(1, v(10), 25);
        kept.keep(2, v(10), 25);
        assert!(kept.take(&1).is_some()); // now the most recently used
        kept.keep(3, v(20), 25); // 20 + 20 > 25: 2 goes, and 10 + 20 > 25: 1 too
        assert_eq!(kept.0.len(), 1);
        assert!(kept.take(&3).is_some() && kept.take(&1).is_none());
        kept.keep(4, v(5), 25);
        assert!(kept.take(&3).is_some()); // 3 newest, 4 oldest
        kept.keep(5, v(5), 25); // 20 + 5 + 5 > 25: 4 goes
        assert!(kept.take(&4).is_none() && kept.take(&5).is_some());
        kept.keep(6, v(26), 25); // larger than the cap
        assert!(kept.take(&6).is_none());
        kept.keep(5, v(1), 25);
        assert_eq!(kept.take(&5).unwrap().0, 5);
        assert_eq!(kept.find(|_, v| v.0 == 20).map(|v| v.0), Some(20));
    }
}
