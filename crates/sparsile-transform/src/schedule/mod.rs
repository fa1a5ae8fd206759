//! Schedules: composable, recorded transformations of stage-I programs and stage-II
//! functions.
//!
//! Every primitive is a pure function in its own module ([`split()`], [`fuse()`],
//! [`reorder()`], …) that returns a new program or function, or a [`ScheduleError`]
//! naming the violated precondition and where it is. Loops are named by [`LoopRef`]
//! (block name and loop variable name); iterations by their stage-I name.
//!
//! A [`Schedule`] strings primitives together: it holds the stage-I program, and after
//! the first stage-II call the stage-II function (the program is lowered with
//! `lower_iterations` then, recorded as [`Step::Lower`]). Every successful call is
//! appended to its [`Trace`]; a failing call changes nothing. [`Schedule::finish`]
//! flattens the result with `lower_buffers`.
//!
//! ```
//! use sparsile_transform::schedule::{LoopRef, Schedule, SplitTail};
//! let program = sparsile::compile_notation(
//!     "tensor A: f64[m, n] csr\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n",
//! )
//! .unwrap();
//! let mut sch = Schedule::new(&program);
//! // The loop over the rows of `A` in block `C` is `i_2` (`i` is taken by `C.init`).
//! let (_i_o, i_i) = sch.split(&LoopRef::new("C", "i_2"), 8, SplitTail::InnerFixed).unwrap();
//! assert_eq!(i_i.var, "i_2_i");
//! let lowered = sch.finish().unwrap();
//! assert_eq!(lowered.stage3.stage, sparsile_ir::loops::Stage::Flat);
//! ```

pub mod absorb_init;
pub mod batch_reduction;
pub mod bind;
pub mod bind_atomic;
pub mod bound;
pub mod cache_read;
pub mod cache_shared;
pub mod cache_write;
pub mod cache_write_shared;
pub mod decompose_format;
pub mod error;
pub mod fuse;
pub mod fuse_launches;
pub mod hoist_factor;
pub mod hoist_loop;
pub mod horizontal_fuse;
pub(crate) mod insert_barriers;
pub(crate) mod launch_path;
pub mod loop_ref;
pub mod parallel;
pub mod parallelize;
pub mod partition;
pub mod prefetch;
pub mod reduction;
pub mod register_tile;
pub mod reorder;
pub mod rfactor;
mod single_iteration;
pub mod sparse_fuse;
pub mod sparse_reorder;
pub mod specialize;
pub mod split;
pub mod tensorize;
pub mod trace;
pub mod unroll;
pub mod vectorize;
pub mod vectorize_reduction;
pub mod warp_reduce;
pub mod warp_segment_reduce;

pub use absorb_init::absorb_init;
pub use batch_reduction::batch_reduction;
pub use bind::bind;
pub use bind_atomic::bind_atomic;
pub use bound::bound;
pub use cache_read::cache_read;
pub use cache_shared::cache_shared;
pub use cache_write::cache_write;
pub use cache_write_shared::cache_write_shared;
pub use decompose_format::decompose_format;
pub use error::ScheduleError;
pub use fuse::fuse;
pub use fuse_launches::fuse_launches;
pub use hoist_factor::hoist_factor;
pub use hoist_loop::hoist_loop;
pub use horizontal_fuse::horizontal_fuse;
pub use loop_ref::LoopRef;
pub use parallel::parallel;
pub use parallelize::{parallelize, ParallelUnit, RaceStrategy};
pub use partition::{parallel_with, LoopPartition};
pub use prefetch::prefetch;
pub use reduction::{parallel_reduce, ReductionStrategy};
pub use register_tile::register_tile;
pub use reorder::reorder;
pub use rfactor::rfactor;
pub use sparse_fuse::sparse_fuse;
pub use sparse_reorder::sparse_reorder;
pub use specialize::specialize;
pub use split::{split, SplitTail};
pub use tensorize::tensorize;
pub use trace::{Step, Trace};
pub use unroll::unroll;
pub use vectorize::vectorize;
pub use vectorize_reduction::vectorize_reduction;
pub use warp_reduce::warp_reduce;
pub use warp_segment_reduce::warp_segment_reduce;

use sparsile_formats::decompose::DecomposeRule;
use sparsile_ir::coord::Program;
use sparsile_ir::loops::{verify, Func, GpuAxis, MmaShape, MmaType};

use crate::{lower_buffers, lower_iterations, Lowered};

/// A program being scheduled, with the trace of what was done to it.
#[derive(Debug, Clone)]
pub struct Schedule {
    program: Program,
    func: Option<Func>,
    trace: Trace,
}

impl Schedule {
    /// A schedule of `program` with no steps yet.
    pub fn new(program: &Program) -> Schedule {
        Schedule {
            program: program.clone(),
            func: None,
            trace: Trace::default(),
        }
    }

    /// The stage-I program (after the stage-I steps).
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The stage-II function, once the program has been lowered.
    pub fn func(&self) -> Option<&Func> {
        self.func.as_ref()
    }

    /// The steps applied so far.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Lowers the program to stage II now if it is not yet, and returns the function.
    pub fn func_or_lower(&mut self) -> Result<&Func, ScheduleError> {
        if self.func.is_none() {
            self.func = Some(lower_iterations(&self.program)?);
            self.trace.steps.push(Step::Lower);
        }
        Ok(self.func.as_ref().expect("lowered"))
    }

    /// Applies one recorded step.
    pub fn apply(&mut self, step: &Step) -> Result<(), ScheduleError> {
        match step {
            Step::Lower => {
                if self.func.is_some() {
                    return Err(ScheduleError::WrongStage {
                        primitive: "lower",
                        expected: "stage I",
                        found: "stage II",
                    });
                }
                self.func_or_lower().map(|_| ())
            }
            Step::Split {
                target,
                factor,
                tail,
            } => self.split(target, *factor, *tail).map(|_| ()),
            Step::Fuse { outer, inner } => self.fuse(outer, inner).map(|_| ()),
            Step::Bind { target, axis } => self.bind(target, *axis),
            Step::BindAtomic { target, axis } => self.bind_atomic(target, *axis),
            Step::FuseLaunches { launches } => self.fuse_launches(launches),
            Step::WarpReduce { target } => self.warp_reduce(target),
            Step::Tensorize { target, shape, ty } => self.tensorize(target, *shape, *ty),
            Step::WarpSegmentReduce { target } => self.warp_segment_reduce(target),
            Step::Reorder { loops } => self.reorder(loops),
            Step::SparseReorder { iteration, order } => self.sparse_reorder(iteration, order),
            Step::SparseFuse { iteration, axes } => self.sparse_fuse(iteration, axes),
            Step::Specialize { param, value } => self.specialize(param, *value),
            Step::Parallel { target } => self.parallel(target),
            Step::Vectorize { target } => self.vectorize(target),
            Step::Unroll { target } => self.unroll(target),
            Step::Bound { target, extent } => self.bound(target, *extent),
            Step::Prefetch {
                target,
                buffer,
                distance,
            } => self.prefetch(target, buffer, *distance),
            Step::ParallelWith { target, partition } => self.parallel_with(target, partition),
            Step::CacheWrite { target, buffer } => self.cache_write(target, buffer).map(|_| ()),
            Step::ParallelReduce { target, strategy } => self.parallel_reduce(target, *strategy),
            Step::CacheRead { target, buffer } => self.cache_read(target, buffer).map(|_| ()),
            Step::CacheShared { target, buffer } => self.cache_shared(target, buffer).map(|_| ()),
            Step::CacheWriteShared { target, buffer } => {
                self.cache_write_shared(target, buffer).map(|_| ())
            }
            Step::Rfactor { target, inner } => self.rfactor(target, inner).map(|_| ()),
            Step::DecomposeFormat { buffer, rule } => self.decompose_format(buffer, rule.clone()),
            Step::HorizontalFuse { blocks } => self.horizontal_fuse(blocks).map(|_| ()),
            Step::VectorizeReduction {
                target,
                scalar_sums,
                masked,
            } => self.vectorize_reduction(target, *scalar_sums, *masked),
            Step::AbsorbInit { block, buffer } => self.absorb_init(block, buffer),
            Step::HoistFactor { target } => self.hoist_factor(target),
            Step::BatchReduction { target } => self.batch_reduction(target),
            Step::RegisterTile { target } => self.register_tile(target),
            Step::HoistLoop { target, above } => self.hoist_loop(target, above),
        }
    }

    /// Runs a stage-II primitive on the (lowered) function and records `step` on success.
    fn stage2<T>(
        &mut self,
        step: Step,
        f: impl FnOnce(&Func) -> Result<(Func, T), ScheduleError>,
    ) -> Result<T, ScheduleError> {
        let primitive = step.primitive();
        let (func, out) = f(self.func_or_lower()?)?;
        verify(&func).map_err(|errors| ScheduleError::InvalidResult { primitive, errors })?;
        self.func = Some(func);
        self.trace.steps.push(step);
        Ok(out)
    }

    /// Runs a stage-I primitive on the program and records `step` on success.
    fn stage1(
        &mut self,
        primitive: &'static str,
        step: Step,
        f: impl FnOnce(&Program) -> Result<Program, ScheduleError>,
    ) -> Result<(), ScheduleError> {
        if self.func.is_some() {
            return Err(ScheduleError::WrongStage {
                primitive,
                expected: "stage I",
                found: "stage II",
            });
        }
        let program = f(&self.program)?;
        sparsile_ir::coord::verify(&program)
            .map_err(|errors| ScheduleError::InvalidProgram { primitive, errors })?;
        self.program = program;
        self.trace.steps.push(step);
        Ok(())
    }

    /// [`sparse_reorder()`]: visits the axes of `iteration` in `order` (axis names).
    /// Only before the first stage-II call.
    pub fn sparse_reorder(
        &mut self,
        iteration: &str,
        order: &[String],
    ) -> Result<(), ScheduleError> {
        let step = Step::SparseReorder {
            iteration: iteration.to_string(),
            order: order.to_vec(),
        };
        self.stage1("sparse_reorder", step, |p| {
            sparse_reorder(p, iteration, order)
        })
    }

    /// [`sparse_fuse()`]: iterates the non-zeros of the axes `axes` of `iteration`
    /// directly. Only before the first stage-II call.
    pub fn sparse_fuse(&mut self, iteration: &str, axes: &[String]) -> Result<(), ScheduleError> {
        let step = Step::SparseFuse {
            iteration: iteration.to_string(),
            axes: axes.to_vec(),
        };
        self.stage1("sparse_fuse", step, |p| sparse_fuse(p, iteration, axes))
    }

    /// [`specialize()`]: fixes parameter `param` to `value`. Only before the first
    /// stage-II call.
    pub fn specialize(&mut self, param: &str, value: i64) -> Result<(), ScheduleError> {
        let step = Step::Specialize {
            param: param.to_string(),
            value,
        };
        self.stage1("specialize", step, |p| specialize(p, param, value))
    }

    /// [`split()`]: returns the outer and inner loops.
    pub fn split(
        &mut self,
        target: &LoopRef,
        factor: i64,
        tail: SplitTail,
    ) -> Result<(LoopRef, LoopRef), ScheduleError> {
        let step = Step::Split {
            target: target.clone(),
            factor,
            tail,
        };
        self.stage2(step, |f| {
            split(f, target, factor, tail).map(|(f, o, i)| (f, (o, i)))
        })
    }

    /// [`fuse()`]: returns the fused loop.
    pub fn fuse(&mut self, outer: &LoopRef, inner: &LoopRef) -> Result<LoopRef, ScheduleError> {
        let step = Step::Fuse {
            outer: outer.clone(),
            inner: inner.clone(),
        };
        self.stage2(step, |f| fuse(f, outer, inner))
    }

    /// [`reorder()`].
    pub fn reorder(&mut self, loops: &[LoopRef]) -> Result<(), ScheduleError> {
        let step = Step::Reorder {
            loops: loops.to_vec(),
        };
        self.stage2(step, |f| reorder(f, loops).map(|f| (f, ())))
    }

    /// [`parallel()`]: marks the loop parallel.
    pub fn parallel(&mut self, target: &LoopRef) -> Result<(), ScheduleError> {
        let step = Step::Parallel {
            target: target.clone(),
        };
        self.stage2(step, |f| parallel(f, target).map(|f| (f, ())))
    }

    /// [`parallelize()`]: runs the loop's iterations on `unit`, with `race` keeping their
    /// shared updates correct. Sugar: the primitive it becomes (`parallel`,
    /// `parallel_reduce`, `bind`, `bind_atomic` or `warp_reduce`) is applied and recorded.
    pub fn parallelize(
        &mut self,
        target: &LoopRef,
        unit: ParallelUnit,
        race: RaceStrategy,
    ) -> Result<(), ScheduleError> {
        // Decided on the function as it is (or as it will be lowered): a refused pair
        // changes nothing, not even the stage. A lowering made for the decision is kept
        // (and recorded) once the pair is accepted, so the primitive does not lower again.
        let expansion = match &self.func {
            Some(f) => parallelize::expansion(f, target, unit, race)?,
            None => {
                let lowered = lower_iterations(&self.program)?;
                let expansion = parallelize::expansion(&lowered, target, unit, race)?;
                self.func = Some(lowered);
                self.trace.steps.push(Step::Lower);
                expansion
            }
        };
        match expansion {
            parallelize::Expansion::Parallel => self.parallel(target),
            parallelize::Expansion::ParallelReduce(s) => self.parallel_reduce(target, s),
            parallelize::Expansion::Bind(axis) => self.bind(target, axis),
            parallelize::Expansion::BindAtomic(axis) => self.bind_atomic(target, axis),
            parallelize::Expansion::WarpReduce => self.warp_reduce(target),
        }
    }

    /// [`bind()`]: spreads the loop over GPU blocks or threads (the first call makes every
    /// top-level block a launch).
    pub fn bind(&mut self, target: &LoopRef, axis: GpuAxis) -> Result<(), ScheduleError> {
        let step = Step::Bind {
            target: target.clone(),
            axis,
        };
        self.stage2(step, |f| bind(f, target, axis).map(|f| (f, ())))
    }

    /// [`bind_atomic()`]: [`Schedule::bind`] with the updates that iterations share made
    /// atomic adds.
    pub fn bind_atomic(&mut self, target: &LoopRef, axis: GpuAxis) -> Result<(), ScheduleError> {
        let step = Step::BindAtomic {
            target: target.clone(),
            axis,
        };
        self.stage2(step, |f| bind_atomic(f, target, axis).map(|f| (f, ())))
    }

    /// [`fuse_launches()`]: runs the launches as one, their grids side by side.
    pub fn fuse_launches(&mut self, launches: &[String]) -> Result<(), ScheduleError> {
        let step = Step::FuseLaunches {
            launches: launches.to_vec(),
        };
        self.stage2(step, |f| fuse_launches(f, launches).map(|f| (f, ())))
    }

    /// [`warp_reduce()`]: runs the reduction loop on the lanes of a warp (`threadIdx.x`)
    /// and combines their sums with `warp_sum`.
    pub fn warp_reduce(&mut self, target: &LoopRef) -> Result<(), ScheduleError> {
        let step = Step::WarpReduce {
            target: target.clone(),
        };
        self.stage2(step, |f| warp_reduce(f, target).map(|f| (f, ())))
    }

    /// [`tensorize()`]: replaces the tile product nest at `target` by a warp's `mma` of
    /// `shape` on `ty` operands.
    pub fn tensorize(
        &mut self,
        target: &LoopRef,
        shape: MmaShape,
        ty: MmaType,
    ) -> Result<(), ScheduleError> {
        let step = Step::Tensorize {
            target: target.clone(),
            shape,
            ty,
        };
        self.stage2(step, |f| tensorize(f, target, shape, ty).map(|f| (f, ())))
    }

    /// [`warp_segment_reduce()`]: runs the loop on the lanes of a warp, each update summed
    /// over the lanes of its key by `warp_segment_sum` and added by the first of them.
    pub fn warp_segment_reduce(&mut self, target: &LoopRef) -> Result<(), ScheduleError> {
        let step = Step::WarpSegmentReduce {
            target: target.clone(),
        };
        self.stage2(step, |f| warp_segment_reduce(f, target).map(|f| (f, ())))
    }

    /// [`vectorize()`]: marks the loop vectorized.
    pub fn vectorize(&mut self, target: &LoopRef) -> Result<(), ScheduleError> {
        let step = Step::Vectorize {
            target: target.clone(),
        };
        self.stage2(step, |f| vectorize(f, target).map(|f| (f, ())))
    }

    /// [`vectorize_reduction()`]: marks the loop vectorized with its local `+`
    /// reductions reassociated (`vectorized(reassociate)`), `scalar_sums` partial sums
    /// in its scalar part (1: in order); `masked`: the short part may run as masked
    /// vector blocks.
    pub fn vectorize_reduction(
        &mut self,
        target: &LoopRef,
        scalar_sums: u32,
        masked: bool,
    ) -> Result<(), ScheduleError> {
        let step = Step::VectorizeReduction {
            target: target.clone(),
            scalar_sums,
            masked,
        };
        self.stage2(step, |f| {
            vectorize_reduction(f, target, scalar_sums, masked).map(|f| (f, ()))
        })
    }

    /// [`batch_reduction()`]: marks the loop `batched` (the reassociated reductions of a
    /// group of its iterations summed together).
    pub fn batch_reduction(&mut self, target: &LoopRef) -> Result<(), ScheduleError> {
        let step = Step::BatchReduction {
            target: target.clone(),
        };
        self.stage2(step, |f| batch_reduction(f, target).map(|f| (f, ())))
    }

    /// [`register_tile()`]: marks the loop `register_tiled` (a tile of the output held in
    /// registers across the blocks of a block row).
    pub fn register_tile(&mut self, target: &LoopRef) -> Result<(), ScheduleError> {
        let step = Step::RegisterTile {
            target: target.clone(),
        };
        self.stage2(step, |f| register_tile(f, target).map(|f| (f, ())))
    }

    /// [`hoist_loop()`]: moves the loop (the panel loop of a split dense range) up its
    /// chain of loops to enclose `above`.
    pub fn hoist_loop(&mut self, target: &LoopRef, above: &LoopRef) -> Result<(), ScheduleError> {
        let step = Step::HoistLoop {
            target: target.clone(),
            above: above.clone(),
        };
        self.stage2(step, |f| hoist_loop(f, target, above).map(|f| (f, ())))
    }

    /// [`hoist_factor()`]: takes the factors of the loop's local reductions that are fixed
    /// across it out of it (`Σ a·g` → `a·Σ g`).
    pub fn hoist_factor(&mut self, target: &LoopRef) -> Result<(), ScheduleError> {
        let step = Step::HoistFactor {
            target: target.clone(),
        };
        self.stage2(step, |f| hoist_factor(f, target).map(|f| (f, ())))
    }

    /// [`unroll()`]: marks the loop unrolled.
    pub fn unroll(&mut self, target: &LoopRef) -> Result<(), ScheduleError> {
        let step = Step::Unroll {
            target: target.clone(),
        };
        self.stage2(step, |f| unroll(f, target).map(|f| (f, ())))
    }

    /// [`bound()`]: declares the loop's constant extent.
    pub fn bound(&mut self, target: &LoopRef, extent: i64) -> Result<(), ScheduleError> {
        let step = Step::Bound {
            target: target.clone(),
            extent,
        };
        self.stage2(step, |f| bound(f, target, extent).map(|f| (f, ())))
    }

    /// [`prefetch()`]: prefetches the element of `buffer` that loop `target` loads
    /// `distance` iterations ahead.
    pub fn prefetch(
        &mut self,
        target: &LoopRef,
        buffer: &str,
        distance: i64,
    ) -> Result<(), ScheduleError> {
        let step = Step::Prefetch {
            target: target.clone(),
            buffer: buffer.to_string(),
            distance,
        };
        self.stage2(step, |f| {
            prefetch(f, target, buffer, distance).map(|f| (f, ()))
        })
    }
    /// [`parallel_with()`]: marks the loop parallel with this partition.
    pub fn parallel_with(
        &mut self,
        target: &LoopRef,
        partition: &LoopPartition,
    ) -> Result<(), ScheduleError> {
        let step = Step::ParallelWith {
            target: target.clone(),
            partition: partition.clone(),
        };
        self.stage2(step, |f| {
            parallel_with(f, target, partition).map(|f| (f, ()))
        })
    }

    /// [`cache_write()`]: returns the name of the local buffer.
    pub fn cache_write(&mut self, target: &LoopRef, buffer: &str) -> Result<String, ScheduleError> {
        let step = Step::CacheWrite {
            target: target.clone(),
            buffer: buffer.to_string(),
        };
        self.stage2(step, |f| cache_write(f, target, buffer))
    }

    /// [`cache_read()`]: returns the name of the local buffer.
    pub fn cache_read(&mut self, target: &LoopRef, buffer: &str) -> Result<String, ScheduleError> {
        let step = Step::CacheRead {
            target: target.clone(),
            buffer: buffer.to_string(),
        };
        self.stage2(step, |f| cache_read(f, target, buffer))
    }

    /// [`cache_shared()`]: returns the name of the shared buffer.
    pub fn cache_shared(
        &mut self,
        target: &LoopRef,
        buffer: &str,
    ) -> Result<String, ScheduleError> {
        let step = Step::CacheShared {
            target: target.clone(),
            buffer: buffer.to_string(),
        };
        self.stage2(step, |f| cache_shared(f, target, buffer))
    }

    /// [`cache_write_shared()`]: returns the name of the shared buffer.
    pub fn cache_write_shared(
        &mut self,
        target: &LoopRef,
        buffer: &str,
    ) -> Result<String, ScheduleError> {
        let step = Step::CacheWriteShared {
            target: target.clone(),
            buffer: buffer.to_string(),
        };
        self.stage2(step, |f| cache_write_shared(f, target, buffer))
    }

    /// [`rfactor()`]: returns the name of the partial-sum buffer.
    pub fn rfactor(&mut self, target: &LoopRef, inner: &LoopRef) -> Result<String, ScheduleError> {
        let step = Step::Rfactor {
            target: target.clone(),
            inner: inner.clone(),
        };
        self.stage2(step, |f| rfactor(f, target, inner))
    }

    /// [`parallel_reduce()`]: marks the loop parallel, resolving shared `+=` updates with
    /// `strategy`.
    pub fn parallel_reduce(
        &mut self,
        target: &LoopRef,
        strategy: ReductionStrategy,
    ) -> Result<(), ScheduleError> {
        let step = Step::ParallelReduce {
            target: target.clone(),
            strategy,
        };
        self.stage2(step, |f| {
            parallel_reduce(f, target, strategy).map(|f| (f, ()))
        })
    }
    /// [`decompose_format()`]: rewrites the iterations reading input `buffer` into one
    /// iteration per part of `rule`; the parts become derived input buffers. Only before
    /// the first stage-II call.
    pub fn decompose_format(
        &mut self,
        buffer: &str,
        rule: DecomposeRule,
    ) -> Result<(), ScheduleError> {
        let step = Step::DecomposeFormat {
            buffer: buffer.to_string(),
            rule: rule.clone(),
        };
        self.stage1("decompose_format", step, |p| {
            decompose_format(p, buffer, &rule)
        })
    }

    /// [`horizontal_fuse()`]: runs the top-level blocks `blocks` as one loop over their
    /// concatenated iterations; returns that loop.
    pub fn horizontal_fuse(&mut self, blocks: &[String]) -> Result<LoopRef, ScheduleError> {
        let step = Step::HorizontalFuse {
            blocks: blocks.to_vec(),
        };
        self.stage2(step, |f| horizontal_fuse(f, blocks))
    }

    /// [`absorb_init()`]: starts the cache_write local of `buffer` in `block` at the
    /// constant of its init block, and deletes the init block.
    pub fn absorb_init(&mut self, block: &str, buffer: &str) -> Result<(), ScheduleError> {
        let step = Step::AbsorbInit {
            block: block.to_string(),
            buffer: buffer.to_string(),
        };
        self.stage2(step, |f| absorb_init(f, block, buffer).map(|f| (f, ())))
    }

    /// Lowers to stage II if needed and flattens the function (`lower_buffers`).
    pub fn finish(mut self) -> Result<Lowered, ScheduleError> {
        self.func_or_lower()?;
        let stage2 = self.func.expect("lowered");
        let stage3 = lower_buffers(&stage2)?;
        crate::pipeline::after(
            sparsile_ir::settings::Settings::from_env().dump_ir,
            "lower_buffers",
            &stage3,
            sparsile_ir::loops::Stage::Flat,
        )?;
        Ok(Lowered { stage2, stage3 })
    }
}
