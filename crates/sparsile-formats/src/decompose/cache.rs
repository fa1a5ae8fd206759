//! [`DecomposeCache`]: decomposition plans kept per sparsity pattern.
//!
//! A plan depends only on the source's structure, so it is computed once per pattern
//! and reused while the pattern stays the same; the values are gathered on every run.
//! The key is the rule with the structure's shape and per-axis sizes, and an entry
//! matches only when a checksum of every structure array (`indptr`, `indices`) is equal
//! too. The checksum reads the arrays once (far cheaper than planning), so a new tensor
//! with another pattern is never given a stale plan, even when it reuses the memory of
//! an old one.
//!
//! A cache holds at most its capacity of plans and forgets the least recently used
//! first: a training loop whose pattern changes every step (sampled subgraphs) would
//! otherwise keep every plan it ever made. [`DecomposeCache::shared`] is the process's
//! cache, which every compiled kernel uses: two kernels over the same pattern and rule
//! (the same decomposition with and without prefetching, in a tuning search) plan once.
//!
//! ```
//! use sparsile_formats::decompose::{DecomposeCache, DecomposeRule};
//! use sparsile_formats::{CooTensor, Format, SparseTensor};
//! let coo = CooTensor::from_triplets(vec![2, 2], &[(0, 1, 1.0), (1, 0, 2.0)]).unwrap();
//! let a = SparseTensor::from_coo(&coo, &Format::Csr).unwrap();
//! let cache = DecomposeCache::new();
//! let rule = DecomposeRule::Hyb { c: 1, k: 0 };
//! let first = cache.plan(&rule, &a.structure).unwrap();
//! let again = cache.plan(&rule, &a.structure).unwrap();
//! assert!(std::sync::Arc::ptr_eq(&first, &again));
//! assert_eq!(cache.len(), 1);
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{DecomposeError, DecomposePlan, DecomposeRule};
use crate::{IndexArray, Structure};

/// What must be equal for a plan to be reused (besides the checksum).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    rule: DecomposeRule,
    shape: Vec<usize>,
    axes: Vec<AxisKey>,
}

/// Per axis: kind name, parent, length, positions, positions per parent.
type AxisKey = (&'static str, Option<usize>, usize, usize, Option<usize>);

/// A plan with the checksum of the pattern it was made for and when it was last used.
#[derive(Debug)]
struct Entry {
    sum: u64,
    plan: Arc<DecomposePlan>,
    used: u64,
}

/// Plans by key, and a clock of uses.
#[derive(Debug, Default)]
struct Entries {
    map: HashMap<Key, Vec<Entry>>,
    clock: u64,
}

/// The capacity of [`DecomposeCache::new`] and of the shared cache.
pub const DEFAULT_CAPACITY: usize = 16;

/// Plans by pattern, at most `capacity` of them; safe to share between threads.
#[derive(Debug)]
pub struct DecomposeCache {
    entries: Mutex<Entries>,
    capacity: usize,
}

impl Default for DecomposeCache {
    fn default() -> Self {
        DecomposeCache::new()
    }
}

impl DecomposeCache {
    /// A cache of at most [`DEFAULT_CAPACITY`] plans.
    pub fn new() -> DecomposeCache {
        DecomposeCache::with_capacity(DEFAULT_CAPACITY)
    }

    /// A cache of at most `capacity` plans (at least one).
    pub fn with_capacity(capacity: usize) -> DecomposeCache {
        DecomposeCache {
            entries: Mutex::new(Entries::default()),
            capacity: capacity.max(1),
        }
    }

    /// The process's cache, shared by every compiled kernel.
    pub fn shared() -> &'static DecomposeCache {
        static SHARED: std::sync::OnceLock<DecomposeCache> = std::sync::OnceLock::new();
        SHARED.get_or_init(DecomposeCache::new)
    }

    /// The plan of `rule` for `structure`: a cached one when the pattern was seen
    /// before, else a new one (then cached).
    pub fn plan(
        &self,
        rule: &DecomposeRule,
        structure: &Structure<'_>,
    ) -> Result<Arc<DecomposePlan>, DecomposeError> {
        let key = Key {
            rule: rule.clone(),
            shape: structure.shape.clone(),
            axes: structure
                .axes
                .iter()
                .map(|a| (a.kind.name(), a.parent, a.length, a.npos, a.nnz_per_parent))
                .collect(),
        };
        let sum = checksum(structure);
        {
            let mut entries = self.lock();
            entries.clock += 1;
            let now = entries.clock;
            if let Some(found) = entries
                .map
                .get_mut(&key)
                .and_then(|list| list.iter_mut().find(|e| e.sum == sum))
            {
                found.used = now;
                return Ok(Arc::clone(&found.plan));
            }
        }
        // Planned without the lock: another thread may plan the same pattern meanwhile;
        // both (equal) plans are kept, and the older is forgotten first.
        let plan = Arc::new(DecomposePlan::new(rule, structure)?);
        let mut entries = self.lock();
        entries.clock += 1;
        let used = entries.clock;
        entries.map.entry(key).or_default().push(Entry {
            sum,
            plan: Arc::clone(&plan),
            used,
        });
        while entries.map.values().map(Vec::len).sum::<usize>() > self.capacity {
            evict_oldest(&mut entries.map);
        }
        Ok(plan)
    }

    /// The number of cached plans.
    pub fn len(&self) -> usize {
        self.lock().map.values().map(Vec::len).sum()
    }

    /// The most plans this cache keeps.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every plan.
    pub fn clear(&self) {
        self.lock().map.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // A panic while holding the lock cannot leave the map half-updated (every
        // update is a single insertion), so a poisoned lock is still usable.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Removes the least recently used plan of `map` (and its key when it held no other).
fn evict_oldest(map: &mut HashMap<Key, Vec<Entry>>) {
    let oldest = map
        .iter()
        .flat_map(|(k, list)| list.iter().enumerate().map(move |(i, e)| (e.used, k, i)))
        .min_by_key(|(used, _, _)| *used)
        .map(|(_, k, i)| (k.clone(), i));
    if let Some((key, i)) = oldest {
        if let Some(list) = map.get_mut(&key) {
            list.remove(i);
            if list.is_empty() {
                map.remove(&key);
            }
        }
    }
}

/// A 64-bit checksum of every structure array (FNV-style mixing of each element and
/// its array's position).
fn checksum(s: &Structure<'_>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut mix = |x: u64| {
        h = (h ^ x).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(29);
    };
    for (i, a) in s.axes.iter().enumerate() {
        for (tag, array) in [(1u64, &a.indptr), (2u64, &a.indices)] {
            let Some(array) = array else { continue };
            mix(((i as u64) << 8) | tag);
            match array {
                IndexArray::I32(v) => v.iter().for_each(|&x| mix(x as u32 as u64)),
                IndexArray::I64(v) => v.iter().for_each(|&x| mix(x as u64)),
            }
        }
    }
    h
}
