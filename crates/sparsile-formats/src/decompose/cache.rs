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

/// Plans with the checksum of the pattern they were made for, by key.
type Entries = HashMap<Key, Vec<(u64, Arc<DecomposePlan>)>>;

/// Plans by pattern; safe to share between threads.
#[derive(Debug, Default)]
pub struct DecomposeCache {
    entries: Mutex<Entries>,
}

impl DecomposeCache {
    pub fn new() -> DecomposeCache {
        DecomposeCache::default()
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
        if let Some(found) = self
            .lock()
            .get(&key)
            .and_then(|list| list.iter().find(|(s, _)| *s == sum))
        {
            return Ok(Arc::clone(&found.1));
        }
        let plan = Arc::new(DecomposePlan::new(rule, structure)?);
        self.lock()
            .entry(key)
            .or_default()
            .push((sum, Arc::clone(&plan)));
        Ok(plan)
    }

    /// The number of cached plans.
    pub fn len(&self) -> usize {
        self.lock().values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every plan.
    pub fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // A panic while holding the lock cannot leave the map half-updated (every
        // update is a single insertion), so a poisoned lock is still usable.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
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
