//! Errors of the SIMT interpreter. Every problem met while running a launch names the
//! launch, the block and thread(s) involved (`block (bx, by, bz) thread (tx, ty, tz)`), the
//! buffer and element where there is one, and the source line of the statement.

use std::fmt;

use sparsile_ir::loops::VerifyError;
use sparsile_ir::Span;
use thiserror::Error;

use crate::FlatInterpError;

/// One thread of a launch: its block's coordinates in the grid and its own in the block
/// (grids have at most `MAX_GRID_X` blocks along `x`, so coordinates fit `u32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ThreadRef {
    pub block: [u32; 3],
    pub thread: [u32; 3],
}

impl fmt::Display for ThreadRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [bx, by, bz] = self.block;
        let [tx, ty, tz] = self.thread;
        write!(f, "block ({bx}, {by}, {bz}) thread ({tx}, {ty}, {tz})")
    }
}

/// Coordinates of a block in the grid or of a thread in its block, printed `(x, y, z)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dim3(pub [u32; 3]);

impl fmt::Display for Dim3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [x, y, z] = self.0;
        write!(f, "({x}, {y}, {z})")
    }
}

/// What a memory access does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessKind {
    Load,
    Store,
    AtomicAdd,
}

impl fmt::Display for AccessKind {
    /// The verb of a message: `loads`, `stores`, `atomically adds to`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AccessKind::Load => "loads",
            AccessKind::Store => "stores",
            AccessKind::AtomicAdd => "atomically adds to",
        })
    }
}

/// Which private memory an uninitialised element is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrivateMemory {
    /// A `shared` buffer: one array per block.
    Shared,
    /// A `local` buffer: one array per thread.
    Local,
}

impl fmt::Display for PrivateMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PrivateMemory::Shared => "shared",
            PrivateMemory::Local => "local",
        })
    }
}

/// One side of a data race.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaceAccess {
    pub thread: ThreadRef,
    pub kind: AccessKind,
    pub at: Span,
}

impl fmt::Display for RaceAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} it at {}", self.thread, self.kind, self.at)
    }
}

/// A problem binding a GPU function, or a violation of the GPU semantics met while
/// running it ([`sparsile_ir::loops::gpu`]).
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SimtError {
    /// Binding the function to the program and its inputs failed, exactly as in
    /// [`crate::flat_interp::run`].
    #[error(transparent)]
    Binding(#[from] FlatInterpError),

    /// With [`super::SimtOptions::verify_func`]: the function breaks a stage-III rule.
    #[error("function does not pass the loop-level verifier: {}", .errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
    InvalidFunc { errors: Vec<VerifyError> },

    /// The function has no launch.
    #[error("function `{func}` has no launch: the SIMT interpreter runs GPU functions (run CPU functions with `flat_interp`)")]
    NotGpu { func: String },

    /// A statement outside any launch in a GPU function, or a launch inside a launch, or
    /// a node the SIMT interpreter cannot place (a shared or local buffer read by a grid
    /// bound, a block-bound loop that is not part of the grid).
    #[error("{at}: {what}")]
    Misplaced { what: String, at: Span },

    /// The launch has no well-formed shape ([`sparsile_ir::loops::launch_shape`]).
    #[error("launch `{launch}` at {at}: {message}")]
    Shape {
        launch: String,
        message: String,
        at: Span,
    },

    /// A grid extent above the hardware limit (`MAX_GRID_X`, `MAX_GRID_YZ`).
    #[error("launch `{launch}`: a grid of {extent} blocks along `{dim}` (at most {max})")]
    GridTooLarge {
        launch: String,
        dim: &'static str,
        extent: i64,
        max: i64,
    },

    /// Evaluating the grid's extents failed.
    #[error("launch `{launch}`: the grid's extents: {source}")]
    Grid {
        launch: String,
        source: Box<FlatInterpError>,
    },

    /// A thread broke a rule of the loop-level IR (out of bounds, overflow, division by
    /// zero, unbound variable, store into an input, …).
    #[error("launch `{launch}`, {thread}: {source}")]
    Thread {
        launch: String,
        thread: ThreadRef,
        source: Box<FlatInterpError>,
    },

    /// Two accesses of one element by different threads, at least one a store (atomic
    /// adds excepted among themselves), that no barrier or launch boundary orders.
    #[error("launch `{launch}`: data race on `{buffer}[{offset}]`: {first}, and {second}, with no barrier ordering the two")]
    DataRace {
        launch: String,
        buffer: String,
        offset: usize,
        first: Box<RaceAccess>,
        second: Box<RaceAccess>,
    },

    /// A `sync_threads` that not every thread of the block reaches.
    #[error("launch `{launch}`, block {block}: `sync_threads` at {at} is reached by {reached} of the block's {threads} threads (thread {missing} does not reach it)")]
    BarrierDivergence {
        launch: String,
        block: Dim3,
        at: Span,
        reached: usize,
        threads: usize,
        missing: Dim3,
    },

    /// A `sync_warp`, warp reduction or `mma` that some lanes of a warp do not reach.
    #[error("launch `{launch}`, block {block}, warp {warp}: {what} at {at} needs every lane of the warp, but {inactive} inactive")]
    WarpDivergence {
        launch: String,
        block: Dim3,
        warp: u32,
        what: String,
        at: Span,
        /// The inactive lanes, as in `lanes 16-31 are`.
        inactive: String,
    },

    /// A warp reduction or `mma` in the last warp of a block whose thread count is not a
    /// multiple of 32.
    #[error("launch `{launch}`, block {block}, warp {warp}: {what} at {at} needs a whole warp of 32 lanes, but the block's {threads} threads leave this warp {lanes}")]
    PartialWarp {
        launch: String,
        block: Dim3,
        warp: u32,
        what: String,
        at: Span,
        threads: usize,
        lanes: usize,
    },

    /// An `mma` whose expressions read a variable that differs between the lanes of a
    /// warp (the warp computes one tile: everything but the tile variables must be the
    /// same in every lane).
    #[error("launch `{launch}`, block {block}, warp {warp}: `mma` at {at} reads `{var}`, which differs between lane 0 and lane {lane} (an `mma`'s expressions are the same in every lane of the warp)")]
    MmaNotUniform {
        launch: String,
        block: Dim3,
        warp: u32,
        at: Span,
        var: String,
        lane: u32,
    },

    /// An `mma` whose accumulator indices name one element for two positions of the tile.
    #[error("launch `{launch}`, block {block}, warp {warp}: `mma` at {at} accumulates positions ({}, {}) and ({}, {}) of its tile into the same element `{buffer}[{offset}]`", .first.0, .first.1, .second.0, .second.1)]
    MmaAccumulatorOverlap {
        launch: String,
        block: Dim3,
        warp: u32,
        at: Span,
        buffer: String,
        offset: usize,
        first: (u32, u32),
        second: (u32, u32),
    },

    /// A warp reduction over groups of lanes that are not a power of two up to 32.
    #[error("launch `{launch}`: {what} at {at} reduces groups of {lanes} lanes (a power of two from 1 to 32)")]
    InvalidLanes {
        launch: String,
        what: String,
        lanes: u32,
        at: Span,
    },

    /// `warp_segment_sum` with keys that decrease inside a group of lanes.
    #[error("launch `{launch}`, block {block}, warp {warp}: `warp_segment_sum` at {at}: lane {lane} has key {key} but lane {} has key {next_key} (keys must not decrease along each group of {lanes} lanes)", .lane + 1)]
    UnsortedSegmentKeys {
        launch: String,
        block: Dim3,
        warp: u32,
        at: Span,
        lane: u32,
        key: i64,
        next_key: i64,
        lanes: u32,
    },

    /// A load (or atomic add) of a shared element no thread of the block has stored, or
    /// of a local element the thread has not stored.
    #[error("launch `{launch}`: {thread} {access} {space} `{buffer}[{offset}]` at {at}, which {}", match .space { PrivateMemory::Shared => "no thread of the block has stored", PrivateMemory::Local => "the thread has not stored" })]
    UninitializedRead {
        launch: String,
        thread: ThreadRef,
        access: AccessKind,
        space: PrivateMemory,
        buffer: String,
        offset: usize,
        at: Span,
    },

    /// The shared buffers a launch uses exceed `MAX_SHARED_BYTES`.
    #[error("launch `{launch}`: its shared buffers take {bytes} bytes (at most {max})")]
    SharedMemoryTooLarge {
        launch: String,
        bytes: usize,
        max: usize,
    },

    /// The block's copies of the shared buffers and its threads' copies of the local
    /// buffers a launch uses exceed what the interpreter allocates (an implementation
    /// limit, [`super::MAX_PRIVATE_ELEMENTS`]), or cannot be allocated.
    #[error("launch `{launch}`: the block's shared and its threads' local buffers need {elements} elements, more than the interpreter can allocate ({limit})")]
    OutOfMemory {
        launch: String,
        /// Saturated at `u64::MAX`.
        elements: u64,
        limit: usize,
    },
}

/// An error met while evaluating for one thread: a loop-level rule (the thread is added
/// by the caller) or a SIMT rule (complete already).
#[derive(Debug)]
pub(super) enum Fault {
    Flat(FlatInterpError),
    Simt(Box<SimtError>),
}

impl From<FlatInterpError> for Fault {
    fn from(e: FlatInterpError) -> Fault {
        Fault::Flat(e)
    }
}

impl From<SimtError> for Fault {
    fn from(e: SimtError) -> Fault {
        Fault::Simt(Box::new(e))
    }
}

/// Lanes as `lane 3 is`, `lanes 16-31 are`, `lanes 0, 2, 5-7 are`.
pub(super) fn describe_lanes(lanes: &[u32]) -> String {
    let mut runs: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lanes.len() {
        let mut j = i;
        while j + 1 < lanes.len() && lanes[j + 1] == lanes[j] + 1 {
            j += 1;
        }
        runs.push(if i == j {
            lanes[i].to_string()
        } else {
            format!("{}-{}", lanes[i], lanes[j])
        });
        i = j + 1;
    }
    if lanes.len() == 1 {
        format!("lane {} is", runs[0])
    } else {
        format!("lanes {} are", runs.join(", "))
    }
}
