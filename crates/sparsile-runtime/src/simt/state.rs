//! The state of a running block: where each buffer lives, the block's shared memory and
//! barrier epochs, and each thread's coordinates, variables and local memory.
//!
//! Shared buffers get one array per block and local buffers one per thread, each with a
//! flag per element saying whether it was stored since it was poisoned (at the start of
//! the block: every thread of a block starts with the block). Arrays are allocated once
//! per launch, for the buffers the launch uses, and poisoned again for each block.

use std::collections::HashSet;

use sparsile_ir::loops::{BufferKind, Func};
use sparsile_ir::{BufferId, IdVec, VarId};

use super::error::SimtError;
use super::MAX_PRIVATE_ELEMENTS;
use crate::flat_interp::exec::Local;
use crate::flat_interp::memory::{Data, Mem};

/// Where a buffer's elements are during a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Space {
    /// One array for the whole run (inputs, outputs, temps, scratch).
    Global,
    /// Index into [`Block::shared`].
    Shared(usize),
    /// Index into [`Thread::locals`].
    Local(usize),
}

/// The space of every buffer of `func`.
pub(super) fn spaces(func: &Func) -> IdVec<BufferId, Space> {
    let (mut shared, mut local) = (0, 0);
    func.buffers
        .values()
        .map(|b| match b.kind {
            BufferKind::Shared => {
                shared += 1;
                Space::Shared(shared - 1)
            }
            BufferKind::Local => {
                local += 1;
                Space::Local(local - 1)
            }
            _ => Space::Global,
        })
        .collect()
}

/// An array of one block or one thread, with its initialised elements.
#[derive(Debug)]
pub(super) struct Private<'i> {
    pub mem: Mem<'i>,
    pub stored: Vec<bool>,
}

impl<'i> Private<'i> {
    /// A poisoned array of `len` elements like `template` (a bound shared or local
    /// buffer), or `None` when it cannot be allocated.
    fn new(template: &Mem<'i>, len: usize) -> Option<Private<'i>> {
        let data = match &template.data {
            Data::Float(_) => {
                let mut v = Vec::new();
                v.try_reserve_exact(len).ok()?;
                v.resize(len, f64::NAN);
                Data::Float(v)
            }
            Data::Int(_) => {
                let mut v = Vec::new();
                v.try_reserve_exact(len).ok()?;
                v.resize(len, i64::MIN);
                Data::Int(v)
            }
        };
        let mut stored = Vec::new();
        stored.try_reserve_exact(len).ok()?;
        stored.resize(len, false);
        Some(Private {
            mem: Mem {
                data,
                dtype: template.dtype,
                shape: template.shape.clone(),
                read_only: template.read_only,
                scratch: template.scratch,
                local: template.local,
                values_of: template.values_of,
            },
            stored,
        })
    }

    /// Undefined contents again.
    fn poison(&mut self) {
        self.mem.poison();
        self.stored.iter_mut().for_each(|s| *s = false);
    }
}

/// One thread of the running block.
#[derive(Debug)]
pub(super) struct Thread<'i> {
    /// `threadIdx`.
    pub coords: [i64; 3],
    pub vars: IdVec<VarId, Option<Local>>,
    pub locals: Vec<Private<'i>>,
}

/// The running block.
#[derive(Debug, Default)]
pub(super) struct Block<'i> {
    /// The block's number in the grid (`x + gx * (y + gy * z)`).
    pub number: u64,
    /// `blockIdx`.
    pub coords: [i64; 3],
    pub shared: Vec<Private<'i>>,
    /// `sync_threads` passed.
    pub epoch: u64,
    /// `sync_warp` passed, per warp.
    pub warp_epochs: Vec<u64>,
    pub threads: Vec<Thread<'i>>,
}

impl<'i> Block<'i> {
    /// The state of a launch's blocks: `dims` threads (numbered `x + dx * (y + dy * z)`)
    /// and copies of the shared and local buffers of `func` (bound in `mems`) that the
    /// launch uses (`used`; the others get no elements). At most
    /// [`MAX_PRIVATE_ELEMENTS`] elements in all.
    pub fn new(
        func: &Func,
        mems: &IdVec<BufferId, Mem<'i>>,
        space: &IdVec<BufferId, Space>,
        used: &HashSet<BufferId>,
        dims: [i64; 3],
        launch: &str,
    ) -> Result<Block<'i>, SimtError> {
        let count = dims.iter().product::<i64>().max(0) as usize;
        let len = |id: BufferId| {
            if used.contains(&id) {
                mems[id].data.len()
            } else {
                0
            }
        };
        let ids = |wanted: fn(Space) -> bool| {
            space
                .iter()
                .filter(|(_, s)| wanted(**s))
                .map(|(id, _)| id)
                .collect::<Vec<BufferId>>()
        };
        let shared_ids = ids(|s| matches!(s, Space::Shared(_)));
        let local_ids = ids(|s| matches!(s, Space::Local(_)));
        let elements = shared_ids.iter().map(|&id| len(id) as u128).sum::<u128>()
            + count as u128 * local_ids.iter().map(|&id| len(id) as u128).sum::<u128>();
        let too_much = || SimtError::OutOfMemory {
            launch: launch.to_string(),
            elements: u64::try_from(elements).unwrap_or(u64::MAX),
            limit: MAX_PRIVATE_ELEMENTS,
        };
        if elements > MAX_PRIVATE_ELEMENTS as u128 {
            return Err(too_much());
        }
        let copy = |id: BufferId| Private::new(&mems[id], len(id)).ok_or_else(too_much);
        let shared = shared_ids
            .iter()
            .map(|&id| copy(id))
            .collect::<Result<Vec<_>, _>>()?;
        // At most `MAX_BLOCK_THREADS` (the launch's shape is checked first).
        let mut threads = Vec::with_capacity(count);
        for linear in 0..count as i64 {
            let x = linear % dims[0];
            let y = linear / dims[0] % dims[1];
            let z = linear / (dims[0] * dims[1]);
            threads.push(Thread {
                coords: [x, y, z],
                vars: func.vars.values().map(|_| None).collect(),
                locals: local_ids
                    .iter()
                    .map(|&id| copy(id))
                    .collect::<Result<Vec<_>, _>>()?,
            });
        }
        Ok(Block {
            number: 0,
            coords: [0; 3],
            shared,
            epoch: 0,
            warp_epochs: vec![0; count.div_ceil(32)],
            threads,
        })
    }

    /// Starts block `number` at `coords`: fresh epochs, variables and memory.
    pub fn start(&mut self, number: u64, coords: [i64; 3]) {
        self.number = number;
        self.coords = coords;
        self.epoch = 0;
        self.warp_epochs.iter_mut().for_each(|e| *e = 0);
        self.shared.iter_mut().for_each(Private::poison);
        for t in &mut self.threads {
            t.vars.iter_mut().for_each(|(_, v)| *v = None);
            t.locals.iter_mut().for_each(Private::poison);
        }
    }
}
