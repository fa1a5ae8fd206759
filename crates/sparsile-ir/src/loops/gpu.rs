//! The GPU part of the loop-level IR: launches, loops bound to the grid and to the
//! threads of a block, `shared` buffers, barriers and warp reductions.
//!
//! # Nodes
//! - `launch NAME { … }` ([`Stmt::Launch`]): one GPU kernel launch. A function whose body
//!   holds a launch is a *GPU function*; every statement at the top level of its body is
//!   then a launch, and the launches run one after the other, each finishing before the
//!   next starts.
//! - `for v in lo..hi bind(blockIdx.x)` / `bind(threadIdx.y)` … ([`ForKind::Bound`]): a
//!   loop whose iterations are spread over the blocks of the grid or over the threads of a
//!   block.
//! - `buffer S: f32[256] temp shared` ([`BufferKind::Shared`]): one array per block.
//! - `sync_threads` / `sync_warp` ([`Stmt::Barrier`]).
//! - `let s: f32 = warp_sum(v, 32)`, `warp_max`, `warp_min`, and
//!   `let s: f32 = warp_segment_sum(v, key, 32)` ([`Stmt::WarpReduce`]).
//! - `mma m16n8k16 f16 (i, j, p) C[…] += a * b` ([`Stmt::Mma`]): a warp's matrix
//!   multiply-accumulate on tensor cores; its semantics are in [`crate::loops::mma`].
//!
//! # Semantics of a launch
//! The grid and the block follow from the bound loops ([`launch_shape`]):
//! - The block has `bx × by × bz` threads, `bd` being the largest extent of the loops
//!   bound to `threadIdx.d` in the launch (1 when there is none). Thread-bound loops have
//!   constant bounds.
//! - The grid's `y` and `z` extents are those of the (single) loop bound to `blockIdx.y`
//!   / `blockIdx.z`; its `x` extent is the *sum* of the extents of the loops bound to
//!   `blockIdx.x`: several such loops side by side at the top of a launch share the grid,
//!   each taking the next range of block numbers (horizontal fusion: one launch runs
//!   several independent pieces of work). Block-bound loops have bounds over parameters,
//!   literals and elements of input buffers at such indices (`indptr[0]..indptr[m]`: the
//!   grid is sized on the host before the launch, see [`grid_readable`]), and each one's
//!   body is either the next block-bound loop alone or holds none.
//! - Every thread of every block runs the launch body. A loop bound to `blockIdx.d` runs
//!   one iteration, `v = lo + blockIdx.d - first` (its range of block numbers starting at
//!   `first`), in the blocks of its range and none in the others; a loop bound to
//!   `threadIdx.d` runs one iteration, `v = lo + threadIdx.d`, in the threads with
//!   `threadIdx.d < hi - lo` and none in the others. Every other statement runs in every
//!   thread that reaches it, with its own variables.
//! - `local` buffers are private to each thread and `shared` buffers to each block; both
//!   are undefined when the launch starts. Every other buffer is global memory.
//! - Two accesses of one element by different threads, at least one of them a store
//!   (atomic adds excepted among themselves), must be ordered: by a `sync_threads` both
//!   threads pass between them (threads of one block), by a `sync_warp` (threads of one
//!   warp), or by the end of a launch. Otherwise they race and the result is undefined.
//! - `sync_threads` is reached by every thread of the block together, `sync_warp` by
//!   every thread of the warp (32 consecutive threads, numbered `x + bx·(y + by·z)`).
//! - A warp reduction or an `mma` is reached by every thread of the warp together. The
//!   lanes of a warp reduction are grouped in aligned runs of `lanes` (2, 4, 8, 16 or 32);
//!   each lane gets the sum (max, min) of `value` over its group. `warp_segment_sum(value, key, lanes)` needs keys that
//!   do not decrease along each group, and gives each lane the sum over the lanes from
//!   itself to the last lane of its group with the same key (the first lane of each run
//!   of equal keys gets the run's sum: DA-SpMM's segmented reduction).
//!
//! The SIMT interpreter (`sparsile-runtime`) executes these semantics and reports every
//! violation it meets; the verifier checks the static rules
//! ([`crate::loops::verify`], module `verify_gpu`).
//!
//! ```
//! use sparsile_ir::loops::{launch_shape, Func, Stmt};
//! let f: Func = "\
//! flat func scale(n) {
//!   buffer X: f32[n] input values
//!   buffer Y: f32[n] output values
//!   launch main {
//!     for b in 0..(n + 127) / 128 bind(blockIdx.x) {
//!       for t in 0..128 bind(threadIdx.x) {
//!         if b * 128 + t < n {
//!           Y[b * 128 + t] = 2.0 * X[b * 128 + t]
//!         }
//!       }
//!     }
//!   }
//! }
//! ".parse().unwrap();
//! let Stmt::Launch { body, .. } = &f.body[0] else { unreachable!() };
//! let shape = launch_shape(body).unwrap();
//! assert_eq!(shape.block, [128, 1, 1]);
//! assert_eq!(shape.grid_x.len(), 1);
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use super::expr::Expr;
use super::stmt::{For, ForKind, Stmt};
use crate::coord::BinaryOp;
use crate::id::VarId;
use crate::Span;

/// One dimension of a grid or a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum GpuDim {
    X,
    Y,
    Z,
}

impl GpuDim {
    pub const ALL: [GpuDim; 3] = [GpuDim::X, GpuDim::Y, GpuDim::Z];

    /// `x`, `y` or `z`.
    pub fn name(self) -> &'static str {
        match self {
            GpuDim::X => "x",
            GpuDim::Y => "y",
            GpuDim::Z => "z",
        }
    }

    /// 0, 1 or 2.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// What a bound loop is spread over: the blocks of the grid or the threads of a block.
/// Serialised as its text (`"threadIdx.x"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum GpuAxis {
    /// Text `blockIdx.x` (`.y`, `.z`).
    Block(GpuDim),
    /// Text `threadIdx.x` (`.y`, `.z`).
    Thread(GpuDim),
}

impl GpuAxis {
    pub fn dim(self) -> GpuDim {
        match self {
            GpuAxis::Block(d) | GpuAxis::Thread(d) => d,
        }
    }

    pub fn is_thread(self) -> bool {
        matches!(self, GpuAxis::Thread(_))
    }

    /// Parses `blockIdx.x` … `threadIdx.z`.
    pub fn parse(text: &str) -> Option<GpuAxis> {
        let (kind, dim) = text.split_once('.')?;
        let dim = GpuDim::ALL.into_iter().find(|d| d.name() == dim)?;
        match kind {
            "blockIdx" => Some(GpuAxis::Block(dim)),
            "threadIdx" => Some(GpuAxis::Thread(dim)),
            _ => None,
        }
    }
}

impl fmt::Display for GpuAxis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuAxis::Block(d) => write!(f, "blockIdx.{}", d.name()),
            GpuAxis::Thread(d) => write!(f, "threadIdx.{}", d.name()),
        }
    }
}

impl From<GpuAxis> for String {
    fn from(axis: GpuAxis) -> String {
        axis.to_string()
    }
}

impl TryFrom<String> for GpuAxis {
    type Error = String;
    fn try_from(text: String) -> Result<GpuAxis, String> {
        GpuAxis::parse(&text).ok_or_else(|| {
            format!("`{text}` is not a GPU axis (blockIdx.x/y/z or threadIdx.x/y/z)")
        })
    }
}

/// Which threads a barrier synchronises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BarrierScope {
    /// Text `sync_threads`: every thread of the block.
    Block,
    /// Text `sync_warp`: every thread of the warp.
    Warp,
}

impl BarrierScope {
    pub fn keyword(self) -> &'static str {
        match self {
            BarrierScope::Block => "sync_threads",
            BarrierScope::Warp => "sync_warp",
        }
    }
}

/// The combining operation of a warp reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WarpOp {
    Sum,
    Max,
    Min,
}

impl WarpOp {
    pub const ALL: [WarpOp; 3] = [WarpOp::Sum, WarpOp::Max, WarpOp::Min];

    /// `warp_sum`, `warp_max`, `warp_min`; the segmented sum prints `warp_segment_sum`.
    pub fn function(self) -> &'static str {
        match self {
            WarpOp::Sum => "warp_sum",
            WarpOp::Max => "warp_max",
            WarpOp::Min => "warp_min",
        }
    }

    /// The binary operation it repeats.
    pub fn binary(self) -> BinaryOp {
        match self {
            WarpOp::Sum => BinaryOp::Add,
            WarpOp::Max => BinaryOp::Max,
            WarpOp::Min => BinaryOp::Min,
        }
    }
}

/// The text name of the segmented sum.
pub const WARP_SEGMENT_SUM: &str = "warp_segment_sum";

/// Threads in a warp.
pub const WARP_SIZE: u32 = 32;

/// The most threads a block may have.
pub const MAX_BLOCK_THREADS: i64 = 1024;

/// The most static shared memory a launch may declare, in bytes.
pub const MAX_SHARED_BYTES: usize = 48 * 1024;

/// The largest grid extent along `x`, and along `y` or `z`.
pub const MAX_GRID_X: i64 = (1 << 31) - 1;
pub const MAX_GRID_YZ: i64 = 65535;

/// One loop bound to `blockIdx.x` at the top of a launch: its share of the grid's `x`
/// extent is `hi - lo` blocks.
#[derive(Debug, Clone, PartialEq)]
pub struct GridPart {
    pub var: VarId,
    pub lo: Expr,
    pub hi: Expr,
}

/// The grid and block of a launch.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchShape {
    /// The loops bound to `blockIdx.x`, in order: their extents add up to the grid's `x`
    /// extent (no part: one block along `x`).
    pub grid_x: Vec<GridPart>,
    /// The loops bound to `blockIdx.y` and `blockIdx.z` (`lo`, `hi`), if any.
    pub grid_yz: [Option<(Expr, Expr)>; 2],
    /// Threads per block along `x`, `y`, `z`.
    pub block: [i64; 3],
}

impl LaunchShape {
    /// Threads per block.
    pub fn threads(&self) -> i64 {
        self.block.iter().product()
    }
}

/// Why a launch has no well-formed shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapeError {
    pub span: Span,
    pub message: String,
}

/// The constant extent of a thread-bound loop, if its bounds are integer literals.
pub fn constant_extent(l: &For) -> Option<i64> {
    match (&l.lo, &l.hi) {
        (Expr::Int(lo), Expr::Int(hi)) => hi.checked_sub(*lo),
        _ => None,
    }
}

/// The grid and block of the launch whose body is `body` (see the module docs for the
/// rules it checks: thread-bound loops with constant extents of 1 to
/// [`MAX_BLOCK_THREADS`], at most that many threads per block, block-bound loops only
/// at the top of the launch, nested alone, one per dimension, several only along `x`
/// and then no `y` or `z` loop).
pub fn launch_shape(body: &[Stmt]) -> Result<LaunchShape, ShapeError> {
    let (shape, errors) = launch_shape_all(body);
    match errors.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(shape),
    }
}

/// [`launch_shape`] with every problem found (the shape is then a best effort; an error
/// about the whole launch has the default span).
pub fn launch_shape_all(body: &[Stmt]) -> (LaunchShape, Vec<ShapeError>) {
    let mut shape = LaunchShape {
        grid_x: Vec::new(),
        grid_yz: [None, None],
        block: [1, 1, 1],
    };
    let mut errors = Vec::new();
    top_level(body, &mut shape, &mut errors);
    threads(body, &mut shape.block, &mut errors);
    if shape.grid_x.len() > 1 && shape.grid_yz.iter().any(Option::is_some) {
        errors.push(ShapeError {
            span: Span::default(),
            message: "several loops bound to `blockIdx.x` share the grid, so no loop may be bound to `blockIdx.y` or `blockIdx.z`".to_string(),
        });
    }
    let threads: i64 = shape.block.iter().product();
    if threads > MAX_BLOCK_THREADS {
        errors.push(ShapeError {
            span: Span::default(),
            message: format!(
                "a block of {} x {} x {} = {threads} threads (at most {MAX_BLOCK_THREADS})",
                shape.block[0], shape.block[1], shape.block[2]
            ),
        });
    }
    (shape, errors)
}

/// Collects the block-bound loops at the top of a launch (through blocks), and reports
/// block-bound loops anywhere else.
fn top_level(body: &[Stmt], shape: &mut LaunchShape, errors: &mut Vec<ShapeError>) {
    for s in body {
        match s {
            Stmt::Block { body, .. } => top_level(body, shape, errors),
            Stmt::For(l) => match l.kind {
                ForKind::Bound(GpuAxis::Block(dim)) => {
                    grid_nest(l, dim, shape, &mut [false; 3], errors)
                }
                _ => misplaced_block_loops(&l.body, errors),
            },
            other => misplaced_block_loops(std::slice::from_ref(other), errors),
        }
    }
}

/// A nest of block-bound loops starting at `l` (bound to `dim`).
fn grid_nest(
    l: &For,
    dim: GpuDim,
    shape: &mut LaunchShape,
    seen: &mut [bool; 3],
    errors: &mut Vec<ShapeError>,
) {
    if std::mem::replace(&mut seen[dim.index()], true) {
        errors.push(ShapeError {
            span: l.span,
            message: format!("two nested loops bound to `blockIdx.{}`", dim.name()),
        });
    }
    match dim {
        GpuDim::X => shape.grid_x.push(GridPart {
            var: l.var,
            lo: l.lo.clone(),
            hi: l.hi.clone(),
        }),
        GpuDim::Y | GpuDim::Z => {
            let slot = &mut shape.grid_yz[dim.index() - 1];
            if slot.is_some() {
                errors.push(ShapeError {
                    span: l.span,
                    message: format!("two loops bound to `blockIdx.{}` in one launch", dim.name()),
                });
            }
            *slot = Some((l.lo.clone(), l.hi.clone()));
        }
    }
    match l.body.as_slice() {
        [Stmt::For(inner)] if matches!(inner.kind, ForKind::Bound(GpuAxis::Block(_))) => {
            let ForKind::Bound(GpuAxis::Block(d)) = inner.kind else {
                unreachable!("matched above")
            };
            grid_nest(inner, d, shape, seen, errors)
        }
        body => misplaced_block_loops(body, errors),
    }
}

/// Reports every block-bound loop in `stmts` (none may be there).
fn misplaced_block_loops(stmts: &[Stmt], errors: &mut Vec<ShapeError>) {
    Stmt::visit_all(stmts, &mut |s| {
        if let Stmt::For(l) = s {
            if let ForKind::Bound(axis @ GpuAxis::Block(_)) = l.kind {
                errors.push(ShapeError {
                    span: l.span,
                    message: format!(
                        "a loop bound to `{axis}` must sit at the top of its launch, alone in the body of the block-bound loop around it"
                    ),
                });
            }
        }
    });
}

/// The block extents from the thread-bound loops, with their rules.
fn threads(body: &[Stmt], block: &mut [i64; 3], errors: &mut Vec<ShapeError>) {
    fn walk(stmts: &[Stmt], open: [bool; 3], block: &mut [i64; 3], errors: &mut Vec<ShapeError>) {
        for s in stmts {
            match s {
                Stmt::For(l) => {
                    let mut inner = open;
                    if let ForKind::Bound(GpuAxis::Thread(d)) = l.kind {
                        let i = d.index();
                        if open[i] {
                            errors.push(ShapeError {
                                span: l.span,
                                message: format!(
                                    "a loop bound to `threadIdx.{}` inside another one",
                                    d.name()
                                ),
                            });
                        }
                        inner[i] = true;
                        match constant_extent(l) {
                            Some(e) if (1..=MAX_BLOCK_THREADS).contains(&e) => {
                                block[i] = block[i].max(e)
                            }
                            _ => errors.push(ShapeError {
                                span: l.span,
                                message: format!(
                                    "a loop bound to `threadIdx.{}` has integer-literal bounds and runs 1 to {MAX_BLOCK_THREADS} iterations",
                                    d.name()
                                ),
                            }),
                        }
                    }
                    walk(&l.body, inner, block, errors);
                }
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(then_body, open, block, errors);
                    walk(else_body, open, block, errors);
                }
                Stmt::Block { body, .. } | Stmt::Launch { body, .. } => {
                    walk(body, open, block, errors)
                }
                _ => {}
            }
        }
    }
    walk(body, [false; 3], block, errors);
}

/// Whether a grid extent can be computed before a launch from `e`: it reads integer
/// literals, parameters, and elements of input buffers at indices that are such
/// expressions themselves (inputs are on the host and no launch writes them).
pub fn grid_readable(func: &super::Func, e: &Expr) -> bool {
    match e {
        Expr::Int(_) | Expr::Param(_) => true,
        Expr::Binary { lhs, rhs, .. } => grid_readable(func, lhs) && grid_readable(func, rhs),
        Expr::Load { buffer, indices } => {
            func.buffers
                .get(*buffer)
                .is_some_and(|b| b.role == crate::coord::BufferRole::Input && b.dtype.is_int())
                && indices.iter().all(|i| grid_readable(func, i))
        }
        _ => false,
    }
}

/// Whether `func`'s body holds a launch (it is a GPU function).
pub fn is_gpu_body(body: &[Stmt]) -> bool {
    body.iter().any(|s| matches!(s, Stmt::Launch { .. }))
}

/// The number of blocks a grid part covers: `hi - lo` (an expression over parameters).
pub fn part_extent(part: &GridPart) -> Expr {
    match (&part.lo, &part.hi) {
        (Expr::Int(0), hi) => hi.clone(),
        (lo, hi) => Expr::binary(BinaryOp::Sub, hi.clone(), lo.clone()),
    }
}
