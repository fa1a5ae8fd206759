//! Native CPU kernels: compile generated C, cache the objects, load them, run them.
//!
//! - [`Compiler`] finds the system C compiler (`CC`, default `cc`) and its identity;
//! - [`Cache`] compiles a source once per (source, compiler identity, flags, host CPU
//!   features) into an on-disk, content-addressed cache in a private folder, atomically,
//!   and checks each object against its integrity record before handing it out;
//!   [`cache_info`] and [`clear_cache`] list and clear what it holds;
//! - [`Library`] loads an object and checks the ABI below;
//! - [`Launcher`] runs the phases of a loaded kernel on a [`WorkerPool`] of CPU threads.
//!
//! [`crate::kernel::CompiledKernel`] puts them together with argument checking.
//!
//! # The kernel ABI (version 3)
//! ```c
//! int64_t sparsile_abi_version(void);            /* returns 3 */
//! int64_t sparsile_num_phases(void);
//! /* trip count of the parallel loop of phase `ph`, or 1 for a serial phase */
//! int64_t sparsile_phase_extent(int64_t ph, void *const *buffers, const int64_t *params);
//! /* runs work items [begin, end) of phase `ph`; returns 0, or nonzero on an internal error */
//! int32_t sparsile_phase_run(int64_t ph, void *const *buffers, const int64_t *params,
//!                            int64_t begin, int64_t end);
//! /* how to divide phase `ph`: 0 even chunks, 1 small chunks taken dynamically,
//!    2 the chunks sparsile_phase_bounds computes */
//! int64_t sparsile_phase_partition(int64_t ph);
//! /* n + 1 nondecreasing work-item boundaries 0 = bounds[0] <= ... <= bounds[n] = extent
//!    of n >= 1 chunks of about equal work; returns 0, or nonzero for n < 1 or a bad ph */
//! int32_t sparsile_phase_bounds(int64_t ph, void *const *buffers, const int64_t *params,
//!                               int64_t n, int64_t *bounds);
//! /* estimated leaf statements phase `ph` executes in all, or -1 when unknown (or serial) */
//! int64_t sparsile_phase_work(int64_t ph, void *const *buffers, const int64_t *params);
//! ```
//! `buffers[b]` is the data of buffer `b` of the stage-III function (values as
//! `float`/`double`, structure arrays as `int32_t`/`int64_t`; null for scratch buffers,
//! which the code allocates itself); `params[p]` is the value of parameter `p`. Work items
//! of one phase must be independent: a phase is split into chunks run concurrently.

pub(crate) mod cache;
mod cache_contents;
pub(crate) mod cache_dir;
mod calibration;
mod compiler;
pub mod cpu_placement;
mod error;
mod host_target;
mod launcher;
mod library;
mod pool;
pub mod system_load;

pub use cache::{Cache, CacheOutcome};
pub use cache_contents::{cache_info, clear_cache, CacheInfo, ClearReport};
pub use cache_dir::{cache_dir_location, private_cache_dir};
pub use calibration::{PhaseCalibration, DEFAULT_PS_PER_UNIT};
pub use compiler::{Compiler, FLAGS, GCC_FLAGS, LIBS};
pub use error::JitError;
pub use host_target::host_cpu_features;
pub use launcher::{
    default_threads, num_threads_set, pool_stats, set_num_threads, spin_time, Launcher,
    Parallelism, CHUNKS_PER_THREAD, MAX_THREADS, SERIAL_NS, WAKE_NS,
};
pub use library::{
    AbiVersionFn, Library, NumPhasesFn, PhaseBoundsFn, PhaseExtentFn, PhasePartitionFn, PhaseRunFn,
    PhaseWorkFn, ABI_VERSION,
};
pub use pool::{Help, PoolStats, WorkerPool, DEFAULT_SPIN, MIN_SPIN};
