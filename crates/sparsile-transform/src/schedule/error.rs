//! Errors of the schedule primitives. Each variant names the primitive, the violated
//! precondition and where in the IR it failed (block and loop variable, iteration name,
//! and the source span when the IR came from text; a span of line 0 means "built, not
//! parsed").

use sparsile_ir::loops::VerifyError;
use sparsile_ir::Span;
use thiserror::Error;

use crate::LowerError;

/// Why a schedule primitive could not be applied.
#[derive(Debug, Error)]
pub enum ScheduleError {
    // ---- core (split, fuse, reorder, Schedule, Trace) ----
    /// No block of this name contains a loop with this variable.
    #[error("{primitive}: no loop `{var}` in block `{block}`")]
    UnknownLoop {
        primitive: &'static str,
        block: String,
        var: String,
    },
    /// No block of this name exists in the function.
    #[error("{primitive}: no block `{block}` in the function")]
    UnknownBlock {
        primitive: &'static str,
        block: String,
    },
    /// No sparse iteration of this name exists in the program.
    #[error("{primitive}: no iteration `{iteration}` in the program")]
    UnknownIteration {
        primitive: &'static str,
        iteration: String,
    },
    /// The loops are not perfectly nested: `inner` is not the only statement of `outer`'s
    /// body.
    #[error(
        "{primitive}: in block `{block}`, loop `{inner}` is not the only statement of loop \
         `{outer}` (line {}, column {}): the loops must be perfectly nested",
        .span.line, .span.col
    )]
    NotPerfectlyNested {
        primitive: &'static str,
        block: String,
        outer: String,
        inner: String,
        span: Span,
    },
    /// A split factor (or similar constant) is out of range.
    #[error("{primitive}: loop `{var}` in block `{block}`: factor {factor} must be at least 1")]
    BadFactor {
        primitive: &'static str,
        block: String,
        var: String,
        factor: i64,
    },
    /// A split factor or bound extent larger than any loop of the index type can run:
    /// generated index arithmetic (`n + f - 1`, `o * f + i`) would overflow, or the
    /// guarded loop would spin through iterations that cannot exist.
    #[error("{primitive}: loop `{var}` in block `{block}`: {factor} is more than {max}, the largest extent an index can have here (i32 indices); the generated index arithmetic would overflow or the loop would run through iterations that cannot exist")]
    FactorTooLarge {
        primitive: &'static str,
        block: String,
        var: String,
        factor: i64,
        max: i64,
    },
    /// A stage-I primitive was called after the program was lowered to stage II (or a
    /// function is in the wrong stage).
    #[error("{primitive}: expects {expected}, but the schedule is at {found}")]
    WrongStage {
        primitive: &'static str,
        expected: &'static str,
        found: &'static str,
    },
    /// A loop bound depends on a variable of a loop the primitive would move inside it (or
    /// fuse with it).
    #[error(
        "{primitive}: in block `{block}`, the bounds of loop `{inner}` (line {}, column {}) \
         depend on loop `{outer}`",
        .span.line, .span.col
    )]
    DependentBounds {
        primitive: &'static str,
        block: String,
        outer: String,
        inner: String,
        span: Span,
    },
    /// The primitive re-evaluates the loop's bounds inside the new loops, but the loop's
    /// body writes something they read.
    #[error(
        "{primitive}: the bounds of loop `{var}` in block `{block}` (line {}, column {}) \
         read a buffer or local that the loop body writes",
        .span.line, .span.col
    )]
    BoundsNotInvariant {
        primitive: &'static str,
        block: String,
        var: String,
        span: Span,
    },
    /// The same loop is named twice, or loops of different blocks are mixed.
    #[error("{primitive}: {what}")]
    BadLoopList {
        primitive: &'static str,
        what: String,
    },
    /// The primitive only applies to serial loops.
    #[error(
        "{primitive}: loop `{var}` in block `{block}` (line {}, column {}) is {kind}, \
         only serial loops (and, for split, parallel ones) can be transformed",
        .span.line, .span.col
    )]
    NotSerial {
        primitive: &'static str,
        block: String,
        var: String,
        kind: &'static str,
        span: Span,
    },
    /// The primitive's output does not pass the verifier (a compiler bug).
    #[error("internal error: the output of `{primitive}` does not verify:\n{}", list(.errors))]
    InvalidResult {
        primitive: &'static str,
        errors: Vec<VerifyError>,
    },
    /// A stage-I primitive's output does not pass the stage-I verifier (a compiler bug).
    #[error("internal error: the output of `{primitive}` does not verify:\n{}", list_coord(.errors))]
    InvalidProgram {
        primitive: &'static str,
        errors: Vec<sparsile_ir::coord::VerifyError>,
    },
    /// Lowering (stage I → II, or II → III) failed.
    #[error("{0}")]
    Lower(#[from] LowerError),
    /// A trace could not be read from JSON.
    #[error("trace JSON: {0}")]
    TraceJson(String),
    // ---- end of core variants ----
    // ---- stage-I sparse primitives (sparse_reorder, sparse_fuse) ----
    /// The input program does not pass `coord::verify`.
    #[error("{primitive}: the input program does not verify:\n{}", list_coord(.errors))]
    InputNotVerified {
        primitive: &'static str,
        errors: Vec<sparsile_ir::coord::VerifyError>,
    },
    /// An axis named in the arguments is not an axis of the iteration.
    #[error(
        "{primitive}: iteration `{iteration}` (line {}, column {}) has no axis `{axis}`",
        .span.line, .span.col
    )]
    AxisNotInIteration {
        primitive: &'static str,
        iteration: String,
        axis: String,
        span: Span,
    },
    /// The axis list is not a permutation of the iteration's axes (an axis repeated or
    /// left out).
    #[error(
        "{primitive}: iteration `{iteration}` (line {}, column {}): {what}",
        .span.line, .span.col
    )]
    NotAPermutation {
        primitive: &'static str,
        iteration: String,
        what: String,
        span: Span,
    },
    /// The new order puts an axis before its parent.
    #[error(
        "{primitive}: iteration `{iteration}` (line {}, column {}): axis `{axis}` would come \
         before its parent `{parent}`",
        .span.line, .span.col
    )]
    ChildBeforeParent {
        primitive: &'static str,
        iteration: String,
        axis: String,
        parent: String,
        span: Span,
    },
    /// The iteration already has a fused group that the primitive would break or overlap.
    #[error(
        "{primitive}: iteration `{iteration}` (line {}, column {}): axes `{axes}` are already \
         fused",
        .span.line, .span.col
    )]
    AlreadyFused {
        primitive: &'static str,
        iteration: String,
        axes: String,
        span: Span,
    },
    /// Fewer than two axes to fuse.
    #[error(
        "{primitive}: iteration `{iteration}` (line {}, column {}): fusing needs at least two \
         axes, found {count}",
        .span.line, .span.col
    )]
    TooFewAxes {
        primitive: &'static str,
        iteration: String,
        count: usize,
        span: Span,
    },
    /// The axes to fuse are not consecutive in the iteration, in the given order.
    #[error(
        "{primitive}: iteration `{iteration}` (line {}, column {}): axis `{axis}` does not \
         directly follow `{previous}` in the iteration",
        .span.line, .span.col
    )]
    NotConsecutive {
        primitive: &'static str,
        iteration: String,
        previous: String,
        axis: String,
        span: Span,
    },
    /// An axis of a fused group is not the child of the axis before it.
    #[error(
        "{primitive}: iteration `{iteration}` (line {}, column {}): axis `{axis}` is not a \
         child of `{previous}`",
        .span.line, .span.col
    )]
    NotParentChain {
        primitive: &'static str,
        iteration: String,
        previous: String,
        axis: String,
        span: Span,
    },
    // ---- end of stage-I sparse variants ----
    // ---- loop-kind primitives: parallel, vectorize, unroll, bound ----
    #[error("{primitive}: loop `{var}` in block `{block}` ({span}) is not the outermost loop of a top-level block: it is inside {enclosing} (inner parallel loops are not supported yet)")]
    NotOutermostLoop {
        primitive: &'static str,
        block: String,
        var: String,
        enclosing: String,
        span: Span,
    },
    /// Iterations of a loop that must be independent may access one element.
    #[error("{0}")]
    LoopCarriedAccess(Box<crate::schedule::parallel::CarriedAccess>),
    #[error("{primitive}: loop `{var}` in block `{block}` ({span}) assigns local `{local}`, declared outside the loop, in every iteration (a reduction across iterations)")]
    LoopCarriedLocal {
        primitive: &'static str,
        block: String,
        var: String,
        local: String,
        span: Span,
    },
    #[error("vectorize: loop `{var}` in block `{block}` ({span}) contains loop `{inner}`; only an innermost loop can be vectorized")]
    NotInnermostLoop {
        block: String,
        var: String,
        inner: String,
        span: Span,
    },
    #[error("unroll: loop `{var}` in block `{block}` ({span}) has no constant trip count (`{lo}..{hi}`); declare one with bound first")]
    TripCountNotConstant {
        block: String,
        var: String,
        lo: String,
        hi: String,
        span: Span,
    },
    #[error("unroll: loop `{var}` in block `{block}` ({span}) runs {count} iterations; at most {max} can be unrolled")]
    TripCountTooLarge {
        block: String,
        var: String,
        count: i64,
        max: i64,
        span: Span,
    },
    #[error("bound: extent {extent} for loop `{var}` in block `{block}` ({span}) is not positive")]
    BoundExtentNotPositive {
        block: String,
        var: String,
        extent: i64,
        span: Span,
    },
    #[error("bound: loop `{var}` in block `{block}` ({span}) runs {trip} iterations, more than the declared extent {extent}")]
    BoundBelowTripCount {
        block: String,
        var: String,
        extent: i64,
        trip: i64,
        span: Span,
    },
    #[error("bound: the upper bound `{hi}` of loop `{var}` in block `{block}` ({span}) reads `{what}`, which the loop modifies, so the guard `{var} < {hi}` cannot re-evaluate it")]
    BoundNotInvariant {
        block: String,
        var: String,
        hi: String,
        what: String,
        span: Span,
    },
    // ---- end of loop-kind primitives ----
    // ---- loop-IR feature primitives: parallel_with, cache_write, cache_read, rfactor ----
    #[error("{primitive}: no buffer `{buffer}` in the function")]
    UnknownBuffer {
        primitive: &'static str,
        buffer: String,
    },
    #[error("{primitive}: loop `{var}` in block `{block}` ({span}): the balanced partition needs a flat integer (indptr) buffer, and `{buffer}` is not one")]
    PartitionBufferNotIndex {
        primitive: &'static str,
        block: String,
        var: String,
        buffer: String,
        span: Span,
    },
    #[error("{primitive}: loop `{var}` in block `{block}` ({span}) does not read `{buffer}[{var}]` and `{buffer}[{var} + 1]`, so `{buffer}` does not weigh its iterations")]
    PartitionBufferNotRead {
        primitive: &'static str,
        block: String,
        var: String,
        buffer: String,
        span: Span,
    },
    /// `what` names the buffer and why it cannot be cached (`` `C`: the loop does not
    /// store to it``).
    #[error("{primitive}: loop `{var}` in block `{block}` ({span}): cannot cache {what}")]
    CacheBuffer {
        primitive: &'static str,
        block: String,
        var: String,
        what: String,
        span: Span,
    },
    #[error("{0}")]
    CacheAccess(Box<CacheAccess>),
    #[error("{primitive}: loop `{var}` in block `{block}`: caching `{buffer}` needs {size} elements, more than {max}")]
    CacheTooLarge {
        primitive: &'static str,
        block: String,
        var: String,
        buffer: String,
        size: i64,
        max: i64,
    },
    #[error("{primitive}: loop `{var}` in block `{block}`: the iterations share {what} ({span})")]
    NotAReduction {
        primitive: &'static str,
        block: String,
        var: String,
        what: String,
        span: Span,
    },
    #[error("rfactor: loop `{var}` in block `{block}`: cannot factor over loop `{inner}` ({span}): {reason}")]
    RfactorInner {
        block: String,
        var: String,
        inner: String,
        reason: &'static str,
        span: Span,
    },
    // ---- end of loop-IR feature primitives ----
    // ---- specialize ----
    /// The program declares no parameter of this name.
    #[error("{primitive}: the program has no parameter `{param}`")]
    UnknownParam {
        primitive: &'static str,
        param: String,
    },
    /// A parameter cannot be fixed to a negative value.
    #[error("{primitive}: parameter `{param}` cannot be fixed to the negative value {value}")]
    NegativeSpecialization {
        primitive: &'static str,
        param: String,
        value: i64,
    },
    // ---- end of specialize ----
    // ---- decomposition: decompose_format, horizontal_fuse (also UnknownBuffer) ----
    /// The buffer cannot be decomposed (not an input, derived itself, or not stored with
    /// one axis per logical dimension).
    #[error("decompose_format: buffer `{buffer}` (line {}, column {}) cannot be decomposed: {reason}", .span.line, .span.col)]
    NotDecomposable {
        buffer: String,
        reason: String,
        span: Span,
    },
    /// The rule is malformed or does not apply to the buffer.
    #[error("decompose_format: rule `{rule}` for buffer `{buffer}`: {reason}")]
    DecomposeBadRule {
        buffer: String,
        rule: String,
        reason: String,
    },
    /// No top-level iteration reads the buffer, so there is nothing to rewrite.
    #[error("decompose_format: no top-level iteration reads buffer `{buffer}`")]
    BufferNotRead { buffer: String },
    /// An iteration reading the buffer does not iterate one of its axes (or iterates a
    /// child of one that is not part of the buffer).
    #[error("decompose_format: iteration `{iteration}` (line {}, column {}) reads `{buffer}` but does not iterate its axis `{axis}`", .span.line, .span.col)]
    SourceAxisNotIterated {
        iteration: String,
        buffer: String,
        axis: String,
        span: Span,
    },
    /// A read of the buffer is not indexed by the variables of its axes.
    #[error("decompose_format: iteration `{iteration}` (line {}, column {}): the read `{access}` is not indexed by the iteration variables of the buffer's axes", .span.line, .span.col)]
    SourceAccessNotIterated {
        iteration: String,
        access: String,
        span: Span,
    },
    /// The iteration does more than accumulate, so splitting it over parts could change
    /// its result.
    #[error("decompose_format: iteration `{iteration}` (line {}, column {}) does not only accumulate: {what}", .span.line, .span.col)]
    NotAnAccumulation {
        iteration: String,
        what: String,
        span: Span,
    },
    /// Fewer than two blocks to fuse, or one named twice.
    #[error("horizontal_fuse: {what}")]
    BadBlockList { what: String },
    /// A block is not a top-level block made of exactly one loop.
    #[error("horizontal_fuse: block `{block}` (line {}, column {}) {what}", .span.line, .span.col)]
    NotASingleLoopBlock {
        block: String,
        what: String,
        span: Span,
    },
    /// The blocks are not consecutive top-level statements.
    #[error("horizontal_fuse: block `{block}` does not directly follow block `{previous}` at the top level")]
    BlocksNotAdjacent { previous: String, block: String },
    /// Running the blocks' iterations interleaved could change the result: one block
    /// touches a buffer another writes, other than by accumulating into it.
    #[error("horizontal_fuse: block `{block}` {what} buffer `{buffer}`, which block `{other}` writes; fused blocks may share a written buffer only by accumulating into it (`X[..] = X[..] + e`)")]
    BlocksDependent {
        block: String,
        other: String,
        buffer: String,
        what: &'static str,
    },
    // ---- end of decomposition variants ----
    // ---- prefetch (also uses UnknownBuffer) ----
    /// The loop body never loads the buffer.
    #[error("{primitive}: loop `{var}` in block `{block}` does not load buffer `{buffer}`")]
    NoLoadInLoop {
        primitive: &'static str,
        block: String,
        var: String,
        buffer: String,
    },
    /// The load's indices cannot be computed ahead.
    #[error("prefetch: loop `{var}` in block `{block}` ({span}): the load of `{buffer}` cannot be computed ahead: {reason}")]
    PrefetchIndex {
        block: String,
        var: String,
        buffer: String,
        reason: String,
        span: Span,
    },
    // ---- end of prefetch ----
    // ---- vectorize_reduction (also NotSerial, LoopCarriedAccess) ----
    /// The loop to vectorize with reassociated reductions holds another loop.
    #[error("vectorize_reduction: loop `{var}` in block `{block}` ({span}) contains loop `{inner}`; only an innermost loop can be vectorized")]
    ReductionNotInnermost {
        block: String,
        var: String,
        inner: String,
        span: Span,
    },
    /// The loop has no reduction into a local buffer (`vectorize` is the primitive for it).
    #[error("vectorize_reduction: loop `{var}` in block `{block}` ({span}) has no reduction `L[e] = L[e] + …` into a local buffer (cache_write makes one; use vectorize for a loop without)")]
    NoLocalReduction {
        block: String,
        var: String,
        span: Span,
    },
    /// A statement of the loop breaks a rule of reassociated reductions.
    #[error("vectorize_reduction: loop `{var}` in block `{block}` ({loop_span}): statement at {span}: {reason}")]
    NotReassociable {
        block: String,
        var: String,
        reason: String,
        /// The offending statement.
        span: Span,
        loop_span: Span,
    },
    /// No reduction of the loop has a factor to hoist.
    #[error("hoist_factor: loop `{var}` in block `{block}` ({span}) has no reduction `L[e] = L[e] + a * b` into a local buffer, updated once, whose product has both a factor fixed across the loop and one that varies")]
    HoistNothing {
        block: String,
        var: String,
        span: Span,
    },
    /// The number of scalar partial sums is out of range.
    #[error("vectorize_reduction: loop `{var}` in block `{block}` ({span}): `scalar_sums` is {scalar_sums}; it must be 1 to 16")]
    BadScalarSums {
        block: String,
        var: String,
        scalar_sums: u32,
        span: Span,
    },
    // ---- end of vectorize_reduction ----
    // ---- batch_reduction (also NotSerial) ----
    /// The loop's body does not have the shape of a batched loop.
    #[error("batch_reduction: loop `{var}` in block `{block}` ({loop_span}): statement at {span}: {reason}")]
    NotBatchable {
        block: String,
        var: String,
        reason: String,
        /// The offending statement.
        span: Span,
        loop_span: Span,
    },
    // ---- end of batch_reduction ----
    // ---- register_tile (also UnknownLoop, NotSerial) ----
    /// The loop's body does not have the shape of a register-tiled loop.
    #[error("register_tile: loop `{var}` in block `{block}` ({loop_span}): statement at {span}: {reason}")]
    NotRegisterTileable {
        block: String,
        var: String,
        reason: String,
        /// The offending statement.
        span: Span,
        loop_span: Span,
    },
    // ---- end of register_tile ----
    // ---- tensorize (also UnknownLoop, NotSerial) ----
    /// The nest under the loop is not three loops around one update `C[e] = C[e] + a * b`
    /// (with `let`s and conditions between them).
    #[error("tensorize: loop `{var}` in block `{block}` ({span}): the nest is not a tile product: {reason}")]
    TensorizeNest {
        block: String,
        var: String,
        reason: String,
        span: Span,
    },
    /// A loop of the tile does not run `0..N` with `N` a multiple of the instruction's
    /// extent for its role.
    #[error("tensorize: loop `{var}` in block `{block}` ({span}): loop `{tile_loop}` runs the tile's {role} over `{range}`; an {shape} mma needs `0..N` or `lo..lo + N` with N a multiple of {multiple}")]
    TensorizeExtent {
        block: String,
        var: String,
        tile_loop: String,
        role: &'static str,
        range: String,
        shape: sparsile_ir::loops::MmaShape,
        multiple: u32,
        span: Span,
    },
    /// `mma.sync` has no such shape for the type.
    #[error("tensorize: there is no {shape} mma for {ty} operands (it has {shapes})")]
    TensorizeInstruction {
        shape: sparsile_ir::loops::MmaShape,
        ty: sparsile_ir::loops::MmaType,
        shapes: String,
    },
    /// An operand or the accumulator does not fit the instruction (the reason names it).
    #[error("tensorize: loop `{var}` in block `{block}` ({span}): {reason}")]
    TensorizeOperand {
        block: String,
        var: String,
        reason: String,
        span: Span,
    },
    /// A condition of the nest cannot be split into the rows' and the columns' guards.
    #[error("tensorize: loop `{var}` in block `{block}` ({span}): condition `{cond}` {reason}")]
    TensorizeGuard {
        block: String,
        var: String,
        cond: String,
        reason: String,
        span: Span,
    },
    /// The nest is not where a warp can run it (the reason names the rule).
    #[error(
        "tensorize: loop `{var}` in block `{block}` ({span}) cannot run as a warp's mma: {reason}"
    )]
    TensorizePlacement {
        block: String,
        var: String,
        reason: String,
        span: Span,
    },
    // ---- end of tensorize ----
    // ---- bind (also UnknownLoop, NotSerial, LoopCarriedLocal, LoopCarriedAccess) ----
    /// `parallelize` was asked for a unit and race strategy that Sparsile does not pair.
    #[error("parallelize: loop `{var}` in block `{block}`: `{unit}` with `{race}` is not supported: {instead}")]
    NotParallelizable {
        block: String,
        var: String,
        unit: super::parallelize::ParallelUnit,
        race: super::parallelize::RaceStrategy,
        instead: String,
    },
    /// The loop cannot be bound to this GPU axis (the reason names the rule).
    #[error(
        "{primitive}: loop `{var}` in block `{block}` ({span}) cannot be bound to `{axis}`: {reason}"
    )]
    NotBindable {
        primitive: &'static str,
        block: String,
        var: String,
        axis: sparsile_ir::loops::GpuAxis,
        reason: String,
        span: Span,
    },
    /// Launches that cannot run as one (the reason names the rule).
    #[error("fuse_launches: launches `{launches}`: {reason}")]
    NotFusable { launches: String, reason: String },
    /// The function cannot become a GPU function (the reason names the statement).
    #[error("{primitive}: the function cannot run on a GPU: {reason}")]
    NotGpuFunction {
        primitive: &'static str,
        reason: String,
        span: Span,
    },

    // ---- hoist_loop (also UnknownLoop, NotSerial) ----
    /// The loop cannot move above `above` (the reason names the rule).
    #[error("hoist_loop: loop `{var}` in block `{block}` cannot move above loop `{above}` ({span}): {reason}")]
    NotHoistable {
        block: String,
        var: String,
        above: String,
        reason: String,
        span: Span,
    },
    // ---- end of hoist_loop ----
    // ---- absorb_init (also UnknownBuffer, UnknownBlock) ----
    /// No top-level statement before the block writes the buffer.
    #[error("absorb_init: no top-level block before block `{block}` writes `{buffer}`, so there is no init block to absorb")]
    AbsorbNoInit { block: String, buffer: String },
    /// The init block writes something other than a constant into the buffer.
    #[error("absorb_init: init block `{init}` of `{buffer}` ({span}) does not only write a constant into it: {what}")]
    AbsorbInitNotConstant {
        init: String,
        buffer: String,
        what: String,
        span: Span,
    },
    /// The init block does not visit every element of the buffer exactly once.
    #[error("absorb_init: init block `{init}` ({span}) does not write every element of `{buffer}` once: {reason}")]
    AbsorbInitNotFull {
        init: String,
        buffer: String,
        reason: String,
        span: Span,
    },
    /// A top-level statement between the init block and the block touches the buffer.
    #[error("absorb_init: `{between}` accesses `{buffer}` between its init block `{init}` and block `{block}`")]
    AbsorbInterleaved {
        init: String,
        block: String,
        between: String,
        buffer: String,
    },
    /// The block is not the loop nest with a copy in and a copy back that
    /// `cache_write` builds.
    #[error("absorb_init: block `{block}` ({span}) does not cache `{buffer}` in a local array: {reason}")]
    AbsorbTargetShape {
        block: String,
        buffer: String,
        reason: String,
        span: Span,
    },
    /// The stores back do not cover every element of the buffer exactly once.
    #[error("absorb_init: block `{block}`, loop `{var}` ({span}): the copies back do not store every element of `{buffer}` once: {reason}")]
    AbsorbRegionNotFull {
        block: String,
        var: String,
        buffer: String,
        reason: String,
        span: Span,
    },
    /// The block accesses the buffer other than by the copy in and the copy back.
    #[error("absorb_init: block `{block}`: access `{access}` of `{buffer}` ({span}): {reason}")]
    AbsorbOtherAccess {
        block: String,
        buffer: String,
        access: String,
        reason: String,
        span: Span,
    },
    // ---- end of absorb_init ----
}

/// The details of [`ScheduleError::CacheAccess`]: an access of the cached buffer whose
/// index at one position is neither fixed per iteration nor a constant inner loop.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheAccess {
    pub primitive: &'static str,
    pub block: String,
    pub var: String,
    /// The access as text (`C[i_2, k]`).
    pub access: String,
    /// The index position.
    pub dim: usize,
    pub reason: String,
    /// The statement holding the access.
    pub span: Span,
}

impl std::fmt::Display for CacheAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: loop `{}` in block `{}`: access `{}` ({}), index position {}: {}",
            self.primitive, self.var, self.block, self.access, self.span, self.dim, self.reason
        )
    }
}

fn list(errors: &[VerifyError]) -> String {
    errors
        .iter()
        .map(|e| format!("  {e}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn list_coord(errors: &[sparsile_ir::coord::VerifyError]) -> String {
    errors
        .iter()
        .map(|e| format!("  {e}"))
        .collect::<Vec<_>>()
        .join("\n")
}
