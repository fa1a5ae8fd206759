//! Schedules (interim: replaced by the schedule core).

pub mod bound;
pub mod parallel;
pub mod unroll;
pub mod vectorize;

use sparsile_ir::Span;

/// A loop named by its block and variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopRef {
    pub block: String,
    pub var: String,
}

/// Interim error type.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    #[error("{primitive}: no loop `{var}` in block `{block}`")]
    UnknownLoop {
        primitive: &'static str,
        block: String,
        var: String,
    },
    #[error("{primitive}: loop `{var}` in block `{block}` ({span}) is {kind}, only serial loops can be transformed")]
    NotSerial {
        primitive: &'static str,
        block: String,
        var: String,
        kind: &'static str,
        span: Span,
    },
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
}
