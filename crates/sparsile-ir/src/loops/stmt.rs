//! Statements of the loop-level IR.

use serde::{Deserialize, Serialize};

use super::expr::Expr;
use super::gpu::{BarrierScope, GpuAxis, WarpOp};
use super::mma::Mma;
use crate::id::{BufferId, VarId};
use crate::Span;

/// How a loop may run (see the module docs).
///
/// The three parallel kinds make the same promise (independent iterations) and differ
/// only in how the work is divided between threads: [`ForKind::Parallel`] in even static
/// chunks of iterations, [`ForKind::ParallelDynamic`] in small chunks handed out as
/// threads become free, [`ForKind::ParallelBalanced`] in chunks of about equal work
/// where iteration `v` weighs `indptr[v + 1] - indptr[v]` (computed when the loop starts;
/// an iteration is never divided).
///
/// [`ForKind::VectorizedReduction`] (text `vectorized(reassociate)`) is a vectorized loop
/// that may also reassociate its reductions into `local` buffers: every store in it whose
/// element does not depend on the loop variable is `L[e] = L[e] + expr` with `L` a local
/// buffer and `e` loop-invariant ([`crate::loops::local_reductions`]), and the backend
/// may add the terms of each such element in any order (partial sums per vector lane,
/// summed after the loop). Its serial meaning is that of a plain loop; results differ from
/// it only by floating-point rounding. Its `scalar_sums` (text
/// `vectorized(reassociate, scalar_sums=N)`, omitted when 1) is how many independent
/// partial sums the part of the loop that runs scalar keeps (the iterations after the
/// vector blocks, and short loops): 1 adds them in order. Its `masked` (text
/// `vectorized(reassociate, masked)`) lets the backend run the whole loop, short trip
/// counts included, as vector blocks whose last block masks the lanes past the end (on
/// targets with masked vector loads and gathers; elsewhere the flag changes nothing): no
/// loop exit depends on the trip count, so rows of varying short lengths cost no branch
/// mispredictions.
///
/// [`ForKind::Batched`] (text `batched`) is a serial loop whose body ends its iterations
/// in one `vectorized(reassociate)` reduction (SDDMM's dot product per non-zero): the
/// backend may run a group of iterations' reductions side by side and add their vector
/// lanes together ([`crate::loops::batched_shape`] states the rules that make it the same
/// computation). Its serial meaning is that of a plain loop.
///
/// [`ForKind::RegisterTiled`] (text `register_tiled`) is a serial loop over the blocks of
/// a block row whose body adds a dense tile product into output elements that stay the
/// same across the loop (BSR SpMM): the backend may hold a tile of the output in
/// registers across all its iterations ([`crate::loops::register_tiled_shape`] states
/// the rules that make it the same computation). Its serial meaning is that of a plain
/// loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ForKind {
    Serial,
    Parallel,
    Vectorized,
    Unrolled,
    /// Text `parallel(dynamic)`.
    ParallelDynamic,
    /// Text `parallel(balanced INDPTR)`: `indptr` is a flat integer buffer the body reads
    /// at `v` and `v + 1` (so `indptr[lo..=hi]` is in bounds).
    ParallelBalanced {
        indptr: BufferId,
    },
    /// Text `vectorized(reassociate)` (or `vectorized(reassociate, scalar_sums=N)`,
    /// `vectorized(reassociate, masked)`): vectorized, with local `+` reductions that may
    /// be reassociated across vector lanes and, in the scalar part, across `scalar_sums`
    /// partial sums; `masked`: the short part may run as masked vector blocks.
    VectorizedReduction {
        scalar_sums: u32,
        masked: bool,
    },
    /// Text `batched` (see above).
    Batched,
    /// Text `register_tiled` (see above).
    RegisterTiled,
    /// Text `bind(blockIdx.x)`, `bind(threadIdx.y)`, …: a loop of a GPU launch whose
    /// iterations are spread over the blocks of the grid or the threads of a block
    /// (see [`crate::loops::gpu`]).
    Bound(GpuAxis),
}

/// How the iterations of a parallel loop are divided between threads (see [`ForKind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Partition {
    /// Even chunks of iterations ([`ForKind::Parallel`]).
    Static,
    /// Small chunks taken by free threads ([`ForKind::ParallelDynamic`]).
    Dynamic,
    /// Chunks of about equal `indptr[v + 1] - indptr[v]` ([`ForKind::ParallelBalanced`]).
    Balanced { indptr: BufferId },
}

impl ForKind {
    pub const ALL: [ForKind; 4] = [
        ForKind::Serial,
        ForKind::Parallel,
        ForKind::Vectorized,
        ForKind::Unrolled,
    ];

    /// The keyword in the text IR (`serial` loops print without one).
    pub fn name(self) -> &'static str {
        match self {
            ForKind::Serial => "serial",
            ForKind::Parallel => "parallel",
            ForKind::Vectorized | ForKind::VectorizedReduction { .. } => "vectorized",
            ForKind::Unrolled => "unrolled",
            ForKind::Batched => "batched",
            ForKind::RegisterTiled => "register_tiled",
            ForKind::Bound(_) => "bound",
            ForKind::ParallelDynamic | ForKind::ParallelBalanced { .. } => "parallel",
        }
    }

    /// Whether iterations may run concurrently (any partition).
    pub fn is_parallel(self) -> bool {
        self.partition().is_some()
    }

    /// The partition of a parallel kind; `None` for the serial kinds.
    pub fn partition(self) -> Option<Partition> {
        match self {
            ForKind::Parallel => Some(Partition::Static),
            ForKind::ParallelDynamic => Some(Partition::Dynamic),
            ForKind::ParallelBalanced { indptr } => Some(Partition::Balanced { indptr }),
            ForKind::Serial
            | ForKind::Vectorized
            | ForKind::VectorizedReduction { .. }
            | ForKind::Unrolled
            | ForKind::Batched
            | ForKind::RegisterTiled
            | ForKind::Bound(_) => None,
        }
    }

    /// The most iterations of a serial loop with constant bounds around a parallel loop
    /// (a panel loop: `for ko in 0..4 { parallel for i … }`) that the backend runs as one
    /// parallel phase each; the `parallel` schedule accepts a loop inside such a loop.
    pub const MAX_PANEL_ITERATIONS: i64 = 64;

    /// The most partial sums a `vectorized(reassociate)` loop keeps in its scalar part.
    pub const MAX_SCALAR_SUMS: u32 = 16;

    /// The GPU axis of a bound loop.
    pub fn gpu_axis(self) -> Option<GpuAxis> {
        match self {
            ForKind::Bound(axis) => Some(axis),
            _ => None,
        }
    }

    /// Whether the loop is vectorized (with or without reassociated reductions).
    pub fn is_vectorized(self) -> bool {
        matches!(
            self,
            ForKind::Vectorized | ForKind::VectorizedReduction { .. }
        )
    }

    /// The parallel kind with this partition.
    pub fn parallel(partition: Partition) -> ForKind {
        match partition {
            Partition::Static => ForKind::Parallel,
            Partition::Dynamic => ForKind::ParallelDynamic,
            Partition::Balanced { indptr } => ForKind::ParallelBalanced { indptr },
        }
    }
}

/// `for var in lo..hi { body }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct For {
    pub var: VarId,
    pub lo: Expr,
    pub hi: Expr,
    pub kind: ForKind,
    pub body: Vec<Stmt>,
    pub span: Span,
}

impl For {
    /// Whether this loop can be a panel loop: serial, with integer-constant bounds and 1
    /// to [`ForKind::MAX_PANEL_ITERATIONS`] iterations. Around a single parallel loop the
    /// backend runs one parallel phase per iteration, and the `parallel` schedule accepts
    /// a loop that is the whole body of one.
    pub fn is_panel_loop(&self) -> bool {
        self.kind == ForKind::Serial
            && matches!((&self.lo, &self.hi), (Expr::Int(lo), Expr::Int(hi))
                if (1..=ForKind::MAX_PANEL_ITERATIONS).contains(&(hi - lo)))
    }
}

/// A statement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Stmt {
    For(For),
    If {
        cond: Expr,
        then_body: Vec<Stmt>,
        else_body: Vec<Stmt>,
        span: Span,
    },
    /// Declares a local with its first value.
    Let {
        var: VarId,
        value: Expr,
        span: Span,
    },
    /// Assigns a local declared by an enclosing `Let`.
    Assign {
        var: VarId,
        value: Expr,
        span: Span,
    },
    Store {
        buffer: BufferId,
        indices: Vec<Expr>,
        value: Expr,
        span: Span,
    },
    /// A hint: fetch the element `buffer[indices]` into the cache ahead of its use. It
    /// changes no value; its indices are evaluated like a load's, and the element must
    /// be in bounds (the `prefetch` primitive guards it). Text: `prefetch B[j, 0]`.
    Prefetch {
        buffer: BufferId,
        indices: Vec<Expr>,
        span: Span,
    },
    /// `atomic buffer[indices] += value`: adds `value` to one element as a single
    /// indivisible update, so iterations of a parallel loop may add to the same element
    /// concurrently (the sum is the same up to floating-point reassociation). Only for
    /// float buffers.
    AtomicAdd {
        buffer: BufferId,
        indices: Vec<Expr>,
        value: Expr,
        span: Span,
    },
    /// A named region: the work of one stage-I iteration (`spmm`) or of its init
    /// (`spmm.init`). Schedules find loops through block names.
    Block {
        name: String,
        body: Vec<Stmt>,
        span: Span,
    },
    /// `launch NAME { … }`: one GPU kernel launch (see [`crate::loops::gpu`]); only at
    /// the top level of a function body.
    Launch {
        name: String,
        body: Vec<Stmt>,
        span: Span,
    },
    /// `sync_threads` or `sync_warp`: a barrier inside a launch.
    Barrier {
        scope: BarrierScope,
        span: Span,
    },
    /// `let var: T = warp_sum(value, lanes)` (`warp_max`, `warp_min`), or with `key`
    /// `let var: T = warp_segment_sum(value, key, lanes)`: declares `var` like a `let`,
    /// with the reduction of `value` over aligned groups of `lanes` lanes of the warp
    /// (see [`crate::loops::gpu`]).
    WarpReduce {
        var: VarId,
        op: WarpOp,
        value: Expr,
        key: Option<Expr>,
        lanes: u32,
        span: Span,
    },
    /// `mma m16n8k16 f16 (i, j, p) C[…] += a * b if guard`: a warp's matrix
    /// multiply-accumulate on tiles (see [`crate::loops::mma`]); only inside a launch.
    Mma(Mma),
}

impl Stmt {
    /// Where the statement is in the source text (loops and leaves carry one).
    pub fn span(&self) -> Span {
        match self {
            Stmt::For(f) => f.span,
            Stmt::Mma(m) => m.span,
            Stmt::If { span, .. }
            | Stmt::Let { span, .. }
            | Stmt::Assign { span, .. }
            | Stmt::Store { span, .. }
            | Stmt::Prefetch { span, .. }
            | Stmt::AtomicAdd { span, .. }
            | Stmt::Block { span, .. }
            | Stmt::Launch { span, .. }
            | Stmt::Barrier { span, .. }
            | Stmt::WarpReduce { span, .. } => *span,
        }
    }
}
