//! `parallelize`: TACO's `parallelize(loop, unit, race strategy)` as sugar over the
//! primitives that do the work — one call names *where* the iterations run and *how*
//! the updates they share stay correct, and becomes `parallel`, `parallel_reduce`,
//! `bind`, `bind_atomic` or `warp_reduce`.
//!
//! | unit \ race    | `no_races`            | `atomics`                   | `parallel_reduction` | `temporary(c)`                 |
//! |----------------|-----------------------|-----------------------------|----------------------|--------------------------------|
//! | `cpu_thread`   | `parallel`            | `parallel_reduce(atomic)`   | refused              | `parallel_reduce(per_thread c)`|
//! | `gpu_block`    | `bind(blockIdx.d)`    | `bind_atomic(blockIdx.d)`   | refused              | refused                        |
//! | `gpu_warp`     | `bind(threadIdx.d)`   | `bind_atomic(threadIdx.d)`  | refused              | refused                        |
//! | `gpu_thread`   | `bind(threadIdx.x)`   | `bind_atomic(threadIdx.x)`  | `warp_reduce`        | refused                        |
//!
//! The GPU axis follows the convention of Sparsile's GPU schedules: the lanes of a warp
//! run along `threadIdx.x`, the warps of a block along `threadIdx.y` (then `z`), blocks
//! along `blockIdx.x` (then `y`, `z`). `d` is the first of these that no loop around the
//! target is bound to already. `ignore_races` is refused everywhere: Sparsile makes no
//! code whose result depends on how threads interleave.
//!
//! Preconditions: those of the primitive it becomes (its errors are returned as they
//! are, naming that primitive), and a supported pair of unit and strategy
//! ([`ScheduleError::NotParallelizable`] otherwise, naming both and what to use instead).
//!
//! Postcondition: that of the primitive. A [`super::Schedule`] records the primitive's
//! step, not a step of its own: a trace holds the schedule as it runs, and a trace
//! written with `parallelize` replays like one written with the primitives.
//!
//! ```
//! use sparsile_transform::schedule::{LoopRef, ParallelUnit, RaceStrategy, Schedule, SplitTail};
//! let program = sparsile::compile_notation(
//!     "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n",
//! )
//! .unwrap();
//! let mut sch = Schedule::new(&program);
//! let rows = LoopRef::new("y", "i_2");
//! let (_, lanes) = sch.split(&rows, 32, SplitTail::InnerFixed).unwrap();
//! let blocks = LoopRef::new("y", "i_2_o");
//! sch.parallelize(&blocks, ParallelUnit::GpuBlock, RaceStrategy::NoRaces).unwrap();
//! sch.parallelize(&lanes, ParallelUnit::GpuThread, RaceStrategy::NoRaces).unwrap();
//! let steps: Vec<&str> = sch.trace().steps.iter().map(|s| s.primitive()).collect();
//! assert_eq!(steps, ["lower", "split", "bind", "bind"]);
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sparsile_ir::loops::{Func, GpuAxis, GpuDim};

use super::bind::{bind, locate, PathItem};
use super::bind_atomic::bind_atomic;
use super::parallel::parallel;
use super::reduction::{parallel_reduce, ReductionStrategy};
use super::warp_reduce::warp_reduce;
use super::{LoopRef, ScheduleError};

/// Where the iterations of a loop run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParallelUnit {
    /// The threads of the CPU pool.
    CpuThread,
    /// The blocks of a GPU grid.
    GpuBlock,
    /// The warps of a GPU block.
    GpuWarp,
    /// The lanes of a GPU warp (threads along `threadIdx.x`).
    GpuThread,
}

/// How the updates that iterations share are kept correct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RaceStrategy {
    /// The iterations share no element they write (checked, not assumed).
    NoRaces,
    /// Shared `+=` updates become atomic adds.
    Atomics,
    /// The iterations' sums are combined by a reduction over the threads (shuffles).
    ParallelReduction,
    /// Each of `copies` threads adds into its own copy; the copies are summed after.
    Temporary { copies: i64 },
    /// TACO's "the races do not matter": refused.
    IgnoreRaces,
}

impl ParallelUnit {
    pub const ALL: [ParallelUnit; 4] = [
        ParallelUnit::CpuThread,
        ParallelUnit::GpuBlock,
        ParallelUnit::GpuWarp,
        ParallelUnit::GpuThread,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ParallelUnit::CpuThread => "cpu_thread",
            ParallelUnit::GpuBlock => "gpu_block",
            ParallelUnit::GpuWarp => "gpu_warp",
            ParallelUnit::GpuThread => "gpu_thread",
        }
    }
}

impl fmt::Display for ParallelUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ParallelUnit {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ParallelUnit::ALL
            .into_iter()
            .find(|u| u.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown parallel unit `{s}`: cpu_thread, gpu_block, gpu_warp or gpu_thread"
                )
            })
    }
}

impl fmt::Display for RaceStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RaceStrategy::NoRaces => f.write_str("no_races"),
            RaceStrategy::Atomics => f.write_str("atomics"),
            RaceStrategy::ParallelReduction => f.write_str("parallel_reduction"),
            RaceStrategy::Temporary { copies } => write!(f, "temporary({copies})"),
            RaceStrategy::IgnoreRaces => f.write_str("ignore_races"),
        }
    }
}

impl FromStr for RaceStrategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let expected = "no_races, atomics, parallel_reduction, temporary(COPIES) or ignore_races";
        match s {
            "no_races" => Ok(RaceStrategy::NoRaces),
            "atomics" => Ok(RaceStrategy::Atomics),
            "parallel_reduction" => Ok(RaceStrategy::ParallelReduction),
            "ignore_races" => Ok(RaceStrategy::IgnoreRaces),
            _ => {
                let copies = s
                    .strip_prefix("temporary(")
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or_else(|| format!("unknown race strategy `{s}`: {expected}"))?;
                let copies = copies.trim().parse().map_err(|_| {
                    format!("race strategy `{s}`: `{copies}` is not a count of copies")
                })?;
                Ok(RaceStrategy::Temporary { copies })
            }
        }
    }
}

/// The primitive a `parallelize` call becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expansion {
    Parallel,
    ParallelReduce(ReductionStrategy),
    Bind(GpuAxis),
    BindAtomic(GpuAxis),
    WarpReduce,
}

/// The primitive `parallelize(target, unit, race)` becomes on `func` (the axis depends on
/// the loops bound around `target` already).
pub fn expansion(
    func: &Func,
    target: &LoopRef,
    unit: ParallelUnit,
    race: RaceStrategy,
) -> Result<Expansion, ScheduleError> {
    let refuse = |instead: &str| ScheduleError::NotParallelizable {
        block: target.block.clone(),
        var: target.var.clone(),
        unit,
        race,
        instead: instead.to_string(),
    };
    if race == RaceStrategy::IgnoreRaces {
        return Err(refuse(
            "Sparsile makes no code whose result depends on how threads interleave; use `no_races` (checked), `atomics` or a reduction",
        ));
    }
    let taken = bound_around(func, target);
    let free = |axes: &[GpuAxis]| axes.iter().copied().find(|a| !taken.contains(a));
    let blocks = [GpuDim::X, GpuDim::Y, GpuDim::Z].map(GpuAxis::Block);
    let warps = [GpuDim::Y, GpuDim::Z].map(GpuAxis::Thread);
    let lanes = [GpuAxis::Thread(GpuDim::X)];
    let axis = |axes: &[GpuAxis], what: &str| {
        free(axes).ok_or_else(|| refuse(&format!("the loops around it take every {what} axis")))
    };
    Ok(match (unit, race) {
        (ParallelUnit::CpuThread, RaceStrategy::NoRaces) => Expansion::Parallel,
        (ParallelUnit::CpuThread, RaceStrategy::Atomics) => {
            Expansion::ParallelReduce(ReductionStrategy::Atomic)
        }
        (ParallelUnit::CpuThread, RaceStrategy::Temporary { copies }) => {
            Expansion::ParallelReduce(ReductionStrategy::PerThread { copies })
        }
        (ParallelUnit::CpuThread, _) => {
            return Err(refuse(
                "CPU threads combine shared sums with `atomics` or `temporary(COPIES)`",
            ))
        }
        (ParallelUnit::GpuThread, RaceStrategy::ParallelReduction) => Expansion::WarpReduce,
        (_, RaceStrategy::ParallelReduction) => {
            return Err(refuse(
                "a reduction over threads runs on the lanes of a warp: split the reduction loop and parallelize its inner part with `gpu_thread`",
            ))
        }
        (_, RaceStrategy::Temporary { .. }) => {
            return Err(refuse(
                "GPU threads combine shared sums with `atomics`, or with `parallel_reduction` on `gpu_thread`",
            ))
        }
        (ParallelUnit::GpuBlock, r) => gpu(r, axis(&blocks, "blockIdx")?),
        (ParallelUnit::GpuWarp, r) => gpu(r, axis(&warps, "warp (threadIdx.y, threadIdx.z)")?),
        (ParallelUnit::GpuThread, r) => gpu(r, axis(&lanes, "lane (threadIdx.x)")?),
    })
}

fn gpu(race: RaceStrategy, axis: GpuAxis) -> Expansion {
    if race == RaceStrategy::Atomics {
        Expansion::BindAtomic(axis)
    } else {
        Expansion::Bind(axis)
    }
}

/// The GPU axes of the loops around `target` (none before the first `bind`).
fn bound_around(func: &Func, target: &LoopRef) -> Vec<GpuAxis> {
    match locate(func, target) {
        Ok((_, path, _)) => path
            .iter()
            .filter_map(|p| match p {
                PathItem::Loop(kind) => kind.gpu_axis(),
                _ => None,
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Applies `expansion` to `func`.
pub fn apply(func: &Func, target: &LoopRef, expansion: Expansion) -> Result<Func, ScheduleError> {
    match expansion {
        Expansion::Parallel => parallel(func, target),
        Expansion::ParallelReduce(s) => parallel_reduce(func, target, s),
        Expansion::Bind(axis) => bind(func, target, axis),
        Expansion::BindAtomic(axis) => bind_atomic(func, target, axis),
        Expansion::WarpReduce => warp_reduce(func, target),
    }
}

/// Runs the iterations of `target` on `unit`, with `race` keeping shared updates correct
/// (see the module docs for what each pair becomes).
pub fn parallelize(
    func: &Func,
    target: &LoopRef,
    unit: ParallelUnit,
    race: RaceStrategy,
) -> Result<Func, ScheduleError> {
    apply(func, target, expansion(func, target, unit, race)?)
}
