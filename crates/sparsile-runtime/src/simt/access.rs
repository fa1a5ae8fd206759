//! Memory accesses of one thread: the view through which a thread evaluates expressions
//! (its variables, its block's shared memory, its local memory, global memory), and the
//! checks every load, store and atomic add goes through (uninitialised shared or local
//! elements, races on tracked elements).

use sparsile_ir::loops::Func;
use sparsile_ir::{BufferId, ParamId, Span, VarId};

use super::error::{AccessKind, Fault, PrivateMemory, RaceAccess, SimtError};
use super::exec::Sim;
use super::shadow::{Access, Memory};
use super::state::Space;
use crate::flat_interp::eval::{Evaluator, Scalar};
use crate::flat_interp::memory::Mem;
use crate::FlatInterpError;

/// Thread `thread` of the running block, evaluating the statement at `at`.
pub(super) struct ThreadView<'s, 'f, 'i> {
    sim: &'s Sim<'f, 'i>,
    thread: usize,
    at: Span,
}

impl<'i> Evaluator<'i> for ThreadView<'_, '_, 'i> {
    type Error = Fault;

    fn func(&self) -> &Func {
        self.sim.func
    }

    fn at(&self) -> Span {
        self.at
    }

    fn var_value(&self, var: VarId) -> Option<Scalar> {
        self.sim.block.threads[self.thread].vars[var].map(|l| l.value)
    }

    fn param(&self, param: ParamId) -> i64 {
        self.sim.params[param]
    }

    fn mem(&self, buffer: BufferId) -> &Mem<'i> {
        self.sim.mem(self.thread, buffer)
    }

    fn loaded(&self, buffer: BufferId, offset: usize) -> Result<(), Fault> {
        self.sim
            .check_access(self.thread, buffer, offset, AccessKind::Load, self.at)
            .map_err(Fault::from)
    }

    /// A search reads its whole run, as far as races and poison go.
    fn searched(&self, buffer: BufferId, lo: usize, hi: usize) -> Result<(), Fault> {
        (lo..hi).try_for_each(|offset| self.loaded(buffer, offset))
    }
}

impl<'f, 'i> Sim<'f, 'i> {
    /// Thread `thread` of the running block evaluating the statement at `at`.
    pub fn view(&self, thread: usize, at: Span) -> ThreadView<'_, 'f, 'i> {
        ThreadView {
            sim: self,
            thread,
            at,
        }
    }

    /// The memory `buffer` refers to in thread `thread` of the running block.
    pub fn mem(&self, thread: usize, buffer: BufferId) -> &Mem<'i> {
        match self.space[buffer] {
            Space::Global => &self.globals[buffer],
            Space::Shared(k) => &self.block.shared[k].mem,
            Space::Local(k) => &self.block.threads[thread].locals[k].mem,
        }
    }

    /// A fault of thread `thread`, as an error naming the launch and the thread.
    pub fn fail(&self, thread: usize, fault: Fault) -> SimtError {
        match fault {
            Fault::Flat(e) => SimtError::Thread {
                launch: self.launch.name.to_string(),
                thread: self.launch.thread_ref(self.block.number, thread),
                source: Box::new(e),
            },
            Fault::Simt(e) => *e,
        }
    }

    /// Stores `value` (`AccessKind::Store`) or adds it atomically (`AtomicAdd`) to element
    /// `offset` (in bounds) of `buffer`, for thread `thread`.
    pub fn write(
        &mut self,
        thread: usize,
        buffer: BufferId,
        offset: usize,
        value: Scalar,
        kind: AccessKind,
        at: Span,
    ) -> Result<(), SimtError> {
        let func = self.func;
        let name = || func.buffers[buffer].name.clone();
        if let Some(why) = self.mem(thread, buffer).read_only {
            let e = FlatInterpError::StoreToReadOnly {
                buffer: name(),
                why,
                at,
            };
            return Err(self.fail(thread, e.into()));
        }
        self.check_access(thread, buffer, offset, kind, at)?;
        let space = self.space[buffer];
        let block = &mut self.block;
        let mem = match space {
            Space::Global => &mut self.globals[buffer],
            Space::Shared(k) => {
                block.shared[k].stored[offset] = true;
                &mut block.shared[k].mem
            }
            Space::Local(k) => {
                let local = &mut block.threads[thread].locals[k];
                local.stored[offset] = true;
                &mut local.mem
            }
        };
        let result = match kind {
            AccessKind::AtomicAdd => mem.add(offset, value, name, at),
            AccessKind::Store | AccessKind::Load => mem.put(offset, value, name, at),
        };
        result.map_err(|e| self.fail(thread, e.into()))
    }

    /// Checks an access of thread `thread` to element `offset` of `buffer` and records
    /// it: a load or atomic add of a shared or local element not stored yet is an
    /// uninitialised read; an access of a writable global or a shared element that races
    /// with a recorded one is a data race.
    pub fn check_access(
        &self,
        thread: usize,
        buffer: BufferId,
        offset: usize,
        kind: AccessKind,
        at: Span,
    ) -> Result<(), SimtError> {
        let space = self.space[buffer];
        let (memory, stored) = match space {
            Space::Global if self.globals[buffer].read_only.is_none() => {
                (Some(Memory::Global), true)
            }
            Space::Global => return Ok(()),
            Space::Shared(k) => (Some(Memory::Shared), self.block.shared[k].stored[offset]),
            Space::Local(k) => (None, self.block.threads[thread].locals[k].stored[offset]),
        };
        if !stored && kind != AccessKind::Store {
            return Err(SimtError::UninitializedRead {
                launch: self.launch.name.to_string(),
                thread: self.launch.thread_ref(self.block.number, thread),
                access: kind,
                space: if memory.is_some() {
                    PrivateMemory::Shared
                } else {
                    PrivateMemory::Local
                },
                buffer: self.func.buffers[buffer].name.clone(),
                offset,
                at,
            });
        }
        // Local memory is private to the thread: it never races.
        let Some(memory) = memory else {
            return Ok(());
        };
        let access = Access {
            block: self.block.number,
            thread: thread as u32,
            warp: (thread / 32) as u32,
            epoch: self.block.epoch,
            warp_epoch: self.block.warp_epochs[thread / 32],
            kind,
            at,
        };
        let result = self
            .shadow
            .borrow_mut()
            .access(memory, buffer, offset, access);
        result.map_err(|first| SimtError::DataRace {
            launch: self.launch.name.to_string(),
            buffer: self.func.buffers[buffer].name.clone(),
            offset,
            first: Box::new(self.race_side(&first)),
            second: Box::new(self.race_side(&access)),
        })
    }

    fn race_side(&self, a: &Access) -> RaceAccess {
        RaceAccess {
            thread: self.launch.thread_ref(a.block, a.thread as usize),
            kind: a.kind,
            at: a.at,
        }
    }
}
