//! Schedule traces: the recorded list of schedule calls with their arguments.
//!
//! A [`Trace`] serialises to JSON ([`Trace::to_json`], [`Trace::from_json`]) and replays
//! on the program it was recorded on ([`Trace::replay`]), giving the identical program:
//! every primitive is deterministic, including the fresh names it chooses.
//!
//! ```
//! use sparsile_transform::schedule::{LoopRef, Schedule, SplitTail, Trace};
//! let program = sparsile::compile_notation(
//!     "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n",
//! )
//! .unwrap();
//! let mut sch = Schedule::new(&program);
//! sch.split(&LoopRef::new("y", "i_2"), 4, SplitTail::InnerFixed).unwrap();
//! let json = sch.trace().to_json();
//! let replayed = Trace::from_json(&json).unwrap().replay(&program).unwrap();
//! assert_eq!(replayed.func().unwrap().to_string(), sch.func().unwrap().to_string());
//! ```

use serde::{Deserialize, Serialize};
use sparsile_formats::decompose::DecomposeRule;
use sparsile_ir::coord::Program;
use sparsile_ir::loops::{GpuAxis, MmaShape, MmaType};

use super::loop_ref::LoopRef;
use super::partition::LoopPartition;
use super::reduction::ReductionStrategy;
use super::split::SplitTail;
use super::{Schedule, ScheduleError};

/// One recorded schedule call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// Stage I: visit the axes of `iteration` in this order (axis names).
    SparseReorder {
        iteration: String,
        order: Vec<String>,
    },
    /// Stage I: iterate directly over the non-zeros of this group of axes.
    SparseFuse {
        iteration: String,
        axes: Vec<String>,
    },
    /// Stage I: fix parameter `param` to `value`.
    Specialize {
        param: String,
        value: i64,
    },
    /// Stage I → II (`lower_iterations`).
    Lower,
    Split {
        target: LoopRef,
        factor: i64,
        tail: SplitTail,
    },
    /// Stage II: spread the loop over GPU blocks or threads (`"blockIdx.x"`, …).
    Bind {
        target: LoopRef,
        axis: GpuAxis,
    },
    /// Stage II: `bind` with the updates that iterations share made atomic adds.
    BindAtomic {
        target: LoopRef,
        axis: GpuAxis,
    },
    /// Stage II: run several launches as one, their grids side by side.
    FuseLaunches {
        launches: Vec<String>,
    },
    /// Stage II: run the reduction loop on the lanes of a warp, combined by `warp_sum`.
    WarpReduce {
        target: LoopRef,
    },
    /// Stage II: replace the tile product nest at `target` by a warp's `mma`.
    Tensorize {
        target: LoopRef,
        shape: MmaShape,
        ty: MmaType,
    },
    /// Stage II: run the loop on the lanes of a warp, each update combined over the
    /// lanes of its key by `warp_segment_sum`.
    WarpSegmentReduce {
        target: LoopRef,
    },
    Fuse {
        outer: LoopRef,
        inner: LoopRef,
    },
    Reorder {
        loops: Vec<LoopRef>,
    },
    Parallel {
        target: LoopRef,
    },
    Vectorize {
        target: LoopRef,
    },
    Unroll {
        target: LoopRef,
    },
    Bound {
        target: LoopRef,
        extent: i64,
    },
    /// Stage II: prefetch the element of `buffer` loaded `distance` iterations ahead.
    Prefetch {
        target: LoopRef,
        buffer: String,
        distance: i64,
    },
    /// `parallel` with a partition of the iterations between threads.
    ParallelWith {
        target: LoopRef,
        partition: LoopPartition,
    },
    /// Accumulate `buffer`'s elements written by one iteration in a local array.
    CacheWrite {
        target: LoopRef,
        buffer: String,
    },
    /// `parallel` on a loop whose iterations add into shared elements.
    ParallelReduce {
        target: LoopRef,
        strategy: ReductionStrategy,
    },
    /// Stage `buffer`'s elements read by one iteration in a local array.
    CacheRead {
        target: LoopRef,
        buffer: String,
    },
    /// Stage `buffer`'s elements read by one iteration in shared memory, loaded by the
    /// lanes together (GPU).
    CacheShared {
        target: LoopRef,
        buffer: String,
    },
    /// Accumulate `buffer`'s elements updated by one block's iteration of a grid-bound
    /// loop in shared memory, zeroed and added back by the block's threads (GPU).
    CacheWriteShared {
        target: LoopRef,
        buffer: String,
    },
    /// Partial sums of the reduction of `target`, one per iteration of `inner`.
    Rfactor {
        target: LoopRef,
        inner: LoopRef,
    },
    /// Stage I: decompose input `buffer` by `rule` into derived parts.
    DecomposeFormat {
        buffer: String,
        rule: DecomposeRule,
    },
    /// Stage II: run these top-level blocks as one loop over their tasks.
    HorizontalFuse {
        blocks: Vec<String>,
    },
    /// Stage II: vectorize, reassociating the loop's `+` reductions into locals
    /// (`scalar_sums` partial sums in the scalar part; 1 when absent, as in traces
    /// written before it existed).
    VectorizeReduction {
        target: LoopRef,
        #[serde(default = "one", skip_serializing_if = "is_one")]
        scalar_sums: u32,
        /// Masked vector blocks for the short part (absent: false, as in traces written
        /// before it existed).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        masked: bool,
    },
    /// Stage II: start `buffer`'s cache_write local in `block` at its init constant and
    /// drop the init block.
    AbsorbInit {
        block: String,
        buffer: String,
    },
    /// Stage II: take the factors of the loop's reductions that are fixed across it out
    /// of it.
    HoistFactor {
        target: LoopRef,
    },
    /// Stage II: run the loop's iterations in groups whose reassociated reductions are
    /// summed together (`batched`).
    BatchReduction {
        target: LoopRef,
    },
    /// Stage II: move the loop up its chain of loops to enclose `above`.
    HoistLoop {
        target: LoopRef,
        above: LoopRef,
    },
    /// Stage II: hold a tile of the output in registers across the loop (a block row).
    RegisterTile {
        target: LoopRef,
    },
}

impl Step {
    /// The name of the primitive this step calls.
    pub fn primitive(&self) -> &'static str {
        match self {
            Step::SparseReorder { .. } => "sparse_reorder",
            Step::SparseFuse { .. } => "sparse_fuse",
            Step::Specialize { .. } => "specialize",
            Step::Lower => "lower",
            Step::Split { .. } => "split",
            Step::Fuse { .. } => "fuse",
            Step::Bind { .. } => "bind",
            Step::BindAtomic { .. } => "bind_atomic",
            Step::FuseLaunches { .. } => "fuse_launches",
            Step::WarpReduce { .. } => "warp_reduce",
            Step::Tensorize { .. } => "tensorize",
            Step::WarpSegmentReduce { .. } => "warp_segment_reduce",
            Step::Reorder { .. } => "reorder",
            Step::Parallel { .. } => "parallel",
            Step::Vectorize { .. } => "vectorize",
            Step::Unroll { .. } => "unroll",
            Step::Bound { .. } => "bound",
            Step::Prefetch { .. } => "prefetch",
            Step::ParallelWith { .. } => "parallel_with",
            Step::CacheWrite { .. } => "cache_write",
            Step::ParallelReduce { .. } => "parallel_reduce",
            Step::CacheRead { .. } => "cache_read",
            Step::CacheShared { .. } => "cache_shared",
            Step::CacheWriteShared { .. } => "cache_write_shared",
            Step::Rfactor { .. } => "rfactor",
            Step::DecomposeFormat { .. } => "decompose_format",
            Step::HorizontalFuse { .. } => "horizontal_fuse",
            Step::VectorizeReduction { .. } => "vectorize_reduction",
            Step::AbsorbInit { .. } => "absorb_init",
            Step::HoistFactor { .. } => "hoist_factor",
            Step::BatchReduction { .. } => "batch_reduction",
            Step::HoistLoop { .. } => "hoist_loop",
            Step::RegisterTile { .. } => "register_tile",
        }
    }
}

/// The steps of a schedule, in the order they were applied.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub steps: Vec<Step>,
}

impl Trace {
    /// The trace as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a trace always serialises")
    }

    /// Reads a trace written by [`Trace::to_json`].
    pub fn from_json(text: &str) -> Result<Trace, ScheduleError> {
        serde_json::from_str(text).map_err(|e| ScheduleError::TraceJson(e.to_string()))
    }

    /// Applies every step, in order, to a fresh schedule of `program`.
    pub fn replay(&self, program: &Program) -> Result<Schedule, ScheduleError> {
        let mut sch = Schedule::new(program);
        for step in &self.steps {
            sch.apply(step)?;
        }
        Ok(sch)
    }
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}
