//! Loop-level IR shared by stage II (position space) and stage III (flat buffers).
//!
//! A [`Func`] is a list of statements over loops ([`For`]), conditionals, scalar locals
//! and buffer stores. The two stages use the same nodes and differ in how buffers are
//! laid out and accessed ([`Stage`]):
//! - **Stage II** ([`Stage::Pos`]) keeps the stage-I axes; a tensor buffer is laid out
//!   over axes ([`BufferLayout::Axes`]) and indexed with one *position* per axis. The
//!   structure arrays are materialised as 1-D auxiliary buffers
//!   ([`BufferKind::Indptr`], [`BufferKind::Indices`]) that loop bounds and coordinate
//!   recovery read.
//! - **Stage III** ([`Stage::Flat`]) has no axes: every buffer is 1-D
//!   ([`BufferLayout::Flat`]) and indexed with one offset.
//!
//! # Semantics
//! - `for v in lo..hi` runs `v = lo, lo+1, …, hi-1` (nothing when `hi <= lo`); `lo` and
//!   `hi` are evaluated once, before the first iteration. The loop kind is a promise
//!   about how it may run: `parallel` iterations are independent (they write disjoint
//!   elements) and may run in any order on any thread; `vectorized` and `unrolled` are
//!   hints with serial semantics; `vectorized(reassociate)` is `vectorized` whose
//!   reductions into local buffers ([`local_reductions`]) may be summed in any order.
//! - `let v = e` declares a local visible until the end of the enclosing statement list;
//!   `v = e` assigns it.
//! - Integer arithmetic is on i64 with floor `/` and `%`; comparisons and `&&`/`||` give
//!   0 or 1; `select(c, a, b)` evaluates only the chosen branch.
//! - `search(buf, lo, hi, x)` is the position `p` in `lo..hi` with `buf[p] == x`, found by
//!   binary search over the sorted run, or `-1`.
//! - Loads and stores must be in bounds: stage II/III make every guard explicit.
//!
//! See `crates/sparsile-ir/tests/` for text-IR examples.

mod batched;
pub mod builder;
pub mod display;
mod expr;
mod func;
pub mod gpu;
mod local_reduction;
pub mod mma;
pub mod parser;
mod register_tiled;
mod stmt;
mod substitute;
mod vector_load;
pub mod verify;
mod verify_gpu;
mod walk;
mod work;

pub use batched::{batched_shape, BatchedShape};
pub use builder::FuncBuilder;
pub use display::{ExprDisplay, StmtDisplay};
pub use expr::{CmpOp, Expr, LogicOp};
pub use func::{Buffer, BufferKind, BufferLayout, Func, Stage, Var, VarType};
pub use gpu::{
    constant_extent, grid_readable, is_gpu_body, launch_shape, launch_shape_all, part_extent,
    BarrierScope, GpuAxis, GpuDim, GridPart, LaunchShape, ShapeError, WarpOp, MAX_BLOCK_THREADS,
    MAX_GRID_X, MAX_GRID_YZ, MAX_SHARED_BYTES, WARP_SIZE,
};
pub use local_reduction::{
    local_reductions, reduction_addend, update_addend, LocalReduction, ReductionError,
};
pub use mma::{fragment_element, fragment_len, fragment_owner, Mma, MmaOperand, MmaShape, MmaType};
pub use parser::ParseError;
pub use register_tiled::{register_tiled_shape, RegisterTiledShape};
pub use stmt::{For, ForKind, Partition, Stmt};
pub use vector_load::{coefficient, multiple_of, vector_loads, VectorLoad, VECTOR_EXTENTS};
pub use verify::{expr_type, verify, verify_stage, ScalarKind, TypeError, VerifyError};
pub use work::estimated_work;
