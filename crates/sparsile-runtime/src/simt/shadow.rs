//! Race detection: shadow state per element of the writable global buffers (reset at
//! each launch) and of the shared buffers (reset at each block).
//!
//! An access is recorded with its thread, block, the block's barrier epoch (how many
//! `sync_threads` the block has passed) and its warp's epoch (how many `sync_warp`). Two
//! accesses of one element by different threads are *unordered* when they are in
//! different blocks, or in one block at the same block epoch and either in different
//! warps or in one warp at the same warp epoch. Unordered accesses race when one of them
//! is a store, or one is a load and the other an atomic add (atomic adds among
//! themselves do not race).
//!
//! Per element the state stays small whatever the number of accesses:
//! - the last store: a later access that does not race with it is ordered after it or
//!   made by its thread, and then every access it would race with also races with the
//!   store, so earlier loads and atomic adds are forgotten at each store;
//! - the loads (and, apart, the atomic adds) since that store: one access made before the
//!   current block epoch or in an earlier block (every later access of another block
//!   races with it, none of this block does), and, per warp of the current epoch, up to
//!   two accesses by different threads at the warp's latest epoch (enough to find one
//!   by a thread other than any given one).
//!
//! Blocks run one after the other, so once a block has moved on, its accesses only
//! matter to the blocks that follow, which are all unordered with it.

use std::collections::HashMap;

use sparsile_ir::{BufferId, Span};

use super::error::AccessKind;

/// One recorded access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Access {
    /// The block's number in the grid.
    pub block: u64,
    /// The thread's number in the block.
    pub thread: u32,
    pub warp: u32,
    /// The block's `sync_threads` count when the access was made.
    pub epoch: u64,
    /// The warp's `sync_warp` count when the access was made.
    pub warp_epoch: u64,
    pub kind: AccessKind,
    pub at: Span,
}

impl Access {
    /// Whether `later`, made after `self`, is by another thread and not ordered after it.
    fn unordered_with(&self, later: &Access) -> bool {
        if self.block != later.block {
            return true;
        }
        self.thread != later.thread
            && self.epoch == later.epoch
            && (self.warp != later.warp || self.warp_epoch == later.warp_epoch)
    }
}

/// Accesses of one warp at its latest warp epoch: two by different threads at most.
#[derive(Debug, Clone)]
struct WarpSeen {
    warp: u32,
    warp_epoch: u64,
    first: Access,
    second: Option<Access>,
}

/// The loads (or the atomic adds) of one element since its last store.
#[derive(Debug, Clone, Default)]
struct Seen {
    /// One access from an earlier block, or from an earlier epoch of the current one.
    earlier: Option<Access>,
    /// The block and epoch of the accesses in `warps`.
    block: u64,
    epoch: u64,
    warps: Vec<WarpSeen>,
}

impl Seen {
    /// A recorded access that `a` is unordered with.
    fn unordered_with(&self, a: &Access) -> Option<Access> {
        let current = self
            .warps
            .iter()
            .flat_map(|w| std::iter::once(&w.first).chain(w.second.iter()));
        self.earlier
            .iter()
            .chain(current)
            .find(|r| r.unordered_with(a))
            .copied()
    }

    fn record(&mut self, a: Access) {
        if !self.warps.is_empty() && (self.block != a.block || self.epoch != a.epoch) {
            if self.earlier.is_none() {
                self.earlier = Some(self.warps[0].first);
            }
            self.warps.clear();
        }
        self.block = a.block;
        self.epoch = a.epoch;
        match self.warps.iter_mut().find(|w| w.warp == a.warp) {
            None => self.warps.push(WarpSeen {
                warp: a.warp,
                warp_epoch: a.warp_epoch,
                first: a,
                second: None,
            }),
            Some(w) if w.warp_epoch < a.warp_epoch => {
                *w = WarpSeen {
                    warp: a.warp,
                    warp_epoch: a.warp_epoch,
                    first: a,
                    second: None,
                }
            }
            Some(w) => {
                if w.first.thread != a.thread && w.second.is_none() {
                    w.second = Some(a);
                }
            }
        }
    }
}

/// The shadow state of one element.
#[derive(Debug, Clone, Default)]
struct Cell {
    store: Option<Access>,
    loads: Seen,
    atomics: Seen,
}

impl Cell {
    /// Records `a`, or returns the recorded access it races with.
    fn access(&mut self, a: Access) -> Result<(), Access> {
        if let Some(s) = self.store.filter(|s| s.unordered_with(&a)) {
            return Err(s);
        }
        match a.kind {
            AccessKind::Load => {
                if let Some(x) = self.atomics.unordered_with(&a) {
                    return Err(x);
                }
                self.loads.record(a);
            }
            AccessKind::AtomicAdd => {
                if let Some(x) = self.loads.unordered_with(&a) {
                    return Err(x);
                }
                self.atomics.record(a);
            }
            AccessKind::Store => {
                if let Some(x) = self.loads.unordered_with(&a) {
                    return Err(x);
                }
                if let Some(x) = self.atomics.unordered_with(&a) {
                    return Err(x);
                }
                *self = Cell {
                    store: Some(a),
                    ..Cell::default()
                };
            }
        }
        Ok(())
    }
}

/// Where an element lives, for the shadow state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Memory {
    Global,
    Shared,
}

/// The shadow state of every tracked element.
#[derive(Debug, Default)]
pub(super) struct Shadow {
    global: HashMap<(BufferId, usize), Cell>,
    shared: HashMap<(BufferId, usize), Cell>,
}

impl Shadow {
    /// Records access `a` of element `offset` of `buffer`, or returns the recorded
    /// access it races with.
    pub fn access(
        &mut self,
        memory: Memory,
        buffer: BufferId,
        offset: usize,
        a: Access,
    ) -> Result<(), Access> {
        let cells = match memory {
            Memory::Global => &mut self.global,
            Memory::Shared => &mut self.shared,
        };
        cells.entry((buffer, offset)).or_default().access(a)
    }

    /// A launch starts: nothing before it races with anything in it.
    pub fn start_launch(&mut self) {
        self.global.clear();
        self.shared.clear();
    }

    /// A block starts with fresh shared memory.
    pub fn start_block(&mut self) {
        self.shared.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(block: u64, thread: u32, epoch: u64, warp_epoch: u64, kind: AccessKind) -> Access {
        Access {
            block,
            thread,
            warp: thread / 32,
            epoch,
            warp_epoch,
            kind,
            at: Span::default(),
        }
    }

    use AccessKind::{AtomicAdd as A, Load as L, Store as S};

    fn run(accesses: &[Access]) -> Option<(usize, Access)> {
        let mut shadow = Shadow::default();
        for (i, a) in accesses.iter().enumerate() {
            if let Err(first) = shadow.access(Memory::Global, BufferId(0), 0, *a) {
                return Some((i, first));
            }
        }
        None
    }

    #[test]
    fn same_thread_never_races() {
        assert_eq!(
            run(&[at(0, 3, 0, 0, S), at(0, 3, 0, 0, L), at(0, 3, 0, 0, S)]),
            None
        );
    }

    #[test]
    fn a_block_barrier_orders_threads_of_the_block() {
        assert_eq!(run(&[at(0, 1, 0, 0, S), at(0, 40, 1, 0, L)]), None);
        let first = at(0, 1, 0, 0, S);
        assert_eq!(run(&[first, at(0, 40, 0, 0, L)]), Some((1, first)));
    }

    #[test]
    fn a_warp_barrier_orders_threads_of_the_warp_only() {
        assert_eq!(run(&[at(0, 1, 0, 0, S), at(0, 2, 0, 1, L)]), None);
        assert!(run(&[at(0, 1, 0, 0, S), at(0, 33, 0, 1, L)]).is_some());
    }

    #[test]
    fn blocks_are_never_ordered() {
        assert!(run(&[at(0, 1, 0, 0, L), at(1, 1, 5, 5, S)]).is_some());
        assert!(run(&[at(0, 1, 0, 0, A), at(1, 1, 0, 0, A)]).is_none());
        assert!(run(&[at(0, 1, 0, 0, A), at(1, 1, 0, 0, L)]).is_some());
    }

    #[test]
    fn loads_forgotten_by_a_store_still_race_through_it() {
        // Thread 1 loads, thread 2 stores after a barrier, then block 1 loads: the
        // race with the store is found (the load of thread 1 is gone).
        let store = at(0, 2, 1, 0, S);
        assert_eq!(
            run(&[at(0, 1, 0, 0, L), store, at(1, 0, 0, 0, L)]),
            Some((2, store))
        );
    }

    #[test]
    fn many_loads_keep_a_witness_for_every_store() {
        // Loads by threads 0..64 of block 0 at epoch 0; a store by any of them races
        // with another's load.
        let mut accesses: Vec<Access> = (0..64).map(|t| at(0, t, 0, 0, L)).collect();
        for t in [0, 1, 31, 32, 63] {
            accesses.push(at(0, t, 0, 0, S));
            assert!(run(&accesses).is_some(), "store by {t}");
            accesses.pop();
        }
        // After a barrier, no store races; a later block's store does.
        accesses.push(at(0, 5, 1, 0, S));
        assert!(run(&accesses).is_none());
        accesses.pop();
        accesses.push(at(2, 5, 0, 0, S));
        assert!(run(&accesses).is_some());
    }

    #[test]
    fn loads_of_an_older_epoch_still_race_with_a_later_block() {
        let load = at(0, 1, 0, 0, L);
        let accesses = [load, at(0, 2, 1, 0, L), at(1, 0, 0, 0, S)];
        assert!(run(&accesses).is_some());
        let accesses = [at(0, 1, 0, 0, L), at(0, 2, 1, 0, L), at(0, 3, 2, 0, S)];
        assert!(run(&accesses).is_none());
    }
}
