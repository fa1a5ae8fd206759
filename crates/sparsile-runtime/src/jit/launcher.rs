//! Running a loaded kernel's phases on the CPU thread pool.
//!
//! Phases run in order. A phase whose extent `E` (from `sparsile_phase_extent`) is above 1
//! is split into chunks by its partition (`sparsile_phase_partition`), and the chunks
//! run on the pool; the call returns when all are done:
//! - static (0): [`CHUNKS_PER_THREAD`] chunks per thread, chunk `c` of `n` covering work
//!   items `[E*c/n, E*(c+1)/n)`;
//! - dynamic (1): chunks of [`Launcher::dynamic_chunk`] work items, which the pool's
//!   threads take as they become free (work stealing);
//! - balanced (2): [`CHUNKS_PER_THREAD`] chunks per thread with the boundaries the kernel
//!   computes (`sparsile_phase_bounds`: about equal work per chunk), checked to be
//!   nondecreasing from 0 to `E`.
//!
//! The chunks of a parallel phase are claimed one at a time by the calling thread and by
//! the pool's workers that join (see [`WorkerPool`]) until none is left, so a thread that
//! finishes early takes more, and a worker that is not running takes none and is not
//! waited for. A phase of extent 1 (serial) runs once on the calling thread; extent 0 runs
//! nothing; with one thread every phase runs as one chunk. Any nonzero return of
//! `sparsile_phase_run` is an error naming the phase (the first one; the other
//! participants stop claiming chunks).
//!
//! How much help a phase asks for depends on its estimated single-thread time: its work
//! (`sparsile_phase_work`, leaf statements executed) times the time per unit learned from
//! its earlier runs ([`PhaseCalibration`]); an unknown work counts as long. Below
//! [`SERIAL_NS`] the calling thread runs it alone (a fork and join would cost more than it
//! saves); below [`WAKE_NS`] only workers awake at that moment may join (waking a sleeping
//! one costs a system call and, on a virtual machine, tens of microseconds before it
//! runs); above, sleeping workers are woken too. Every run records the time its threads
//! spent in its chunks, which refines the estimate.
//!
//! Pools are shared: one [`WorkerPool`] per thread count and spin time, created on first
//! use; idle workers spin for at most the spin time (`SPARSILE_SPIN_US`) before sleeping,
//! so back-to-back kernel calls find them awake.
//!
//! ```
//! use sparsile_ir::settings::Settings;
//! use sparsile_runtime::jit::Launcher;
//!
//! let launcher = Launcher::new(Some(2), &Settings::default()).unwrap();
//! // 10 work items on 2 threads: 10 static chunks (16 asked for, at most one per item).
//! assert_eq!(launcher.chunks(10).len(), 10);
//! assert_eq!(launcher.chunks(40)[..3], [(0, 2), (2, 5), (5, 7)]);
//! ```

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use sparsile_ir::settings::Settings;

use super::pool::{Help, PoolStats, WorkerPool, DEFAULT_SPIN};
use super::{JitError, Library, PhaseCalibration};

/// Chunks per thread of a parallel phase: enough that a worker joining late still finds
/// some, few enough that claiming one costs nothing next to running it.
pub const CHUNKS_PER_THREAD: usize = 8;

/// Estimated single-thread time (nanoseconds) below which a phase runs on the calling
/// thread alone.
pub const SERIAL_NS: f64 = 12_000.0;

/// Estimated single-thread time (nanoseconds) below which a phase does not wake sleeping
/// workers.
pub const WAKE_NS: f64 = 80_000.0;

/// Whether a phase's size decides how much help it gets (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Parallelism {
    /// Small phases run on the calling thread alone; medium ones take only awake workers.
    #[default]
    Auto,
    /// Every parallel phase of more than one work item is split into chunks, and sleeping
    /// workers are woken for it, whatever its size: for tests of the parallel path and
    /// for measuring it.
    Always,
}

/// Runs kernels on a thread pool of a fixed size.
#[derive(Clone)]
pub struct Launcher {
    threads: usize,
    pool: Arc<WorkerPool>,
    parallelism: Parallelism,
}

impl std::fmt::Debug for Launcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launcher")
            .field("threads", &self.threads)
            .finish()
    }
}

/// The most threads a launcher may have.
pub const MAX_THREADS: usize = 1024;

/// The process-wide thread count set by [`set_num_threads`] (0: not set).
static NUM_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Sets the thread count of every later kernel call that does not name one (`None`
/// returns to the default). Fails for 0 or more than [`MAX_THREADS`].
pub fn set_num_threads(threads: Option<usize>) -> Result<(), JitError> {
    if let Some(t) = threads {
        check_threads(t)?;
    }
    NUM_THREADS.store(threads.unwrap_or(0), Ordering::Relaxed);
    Ok(())
}

/// The thread count set by [`set_num_threads`], if any.
pub fn num_threads_set() -> Option<usize> {
    Some(NUM_THREADS.load(Ordering::Relaxed)).filter(|&t| t > 0)
}

fn check_threads(threads: usize) -> Result<(), JitError> {
    match threads {
        0 => Err(JitError::ZeroThreads),
        t if t > MAX_THREADS => Err(JitError::TooManyThreads {
            threads: t,
            max: MAX_THREADS,
        }),
        _ => Ok(()),
    }
}

/// The thread count used when none is given: the one [`set_num_threads`] set, else
/// `SPARSILE_NUM_THREADS`, else the available parallelism (the cores this process may run
/// on), else 1.
pub fn default_threads(settings: &Settings) -> usize {
    num_threads_set()
        .or(settings.num_threads)
        .unwrap_or_else(cores)
        .min(MAX_THREADS)
}

/// The cores this process may use, read once: `available_parallelism` reads the
/// cgroup files on every call (about 60 µs here, more than a small kernel call).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
}

/// The spin time of idle workers: `SPARSILE_SPIN_US`, else [`DEFAULT_SPIN`].
pub fn spin_time(settings: &Settings) -> Duration {
    settings
        .spin_us
        .map(Duration::from_micros)
        .unwrap_or(DEFAULT_SPIN)
}

type Pools = Mutex<HashMap<(usize, Duration), Arc<WorkerPool>>>;

fn pools() -> &'static Pools {
    static POOLS: OnceLock<Pools> = OnceLock::new();
    POOLS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// What the jobs of every pool of this process got (see [`PoolStats`]): read before and
/// after a run of calls and subtract.
pub fn pool_stats() -> PoolStats {
    pools()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .fold(PoolStats::default(), |sum, p| sum.plus(&p.stats()))
}

/// The buffer and parameter pointers, shared read-only by the chunks of a phase.
#[derive(Clone, Copy)]
struct Args {
    buffers: *const *mut c_void,
    params: *const i64,
}

// SAFETY: the pointers are only passed to kernel code; the ABI requires work items of a
// parallel phase to be independent, which is what makes concurrent calls sound.
unsafe impl Send for Args {}
// SAFETY: as above.
unsafe impl Sync for Args {}

impl Launcher {
    /// A launcher with `threads` threads (default: [`default_threads`] of `settings`)
    /// whose idle workers spin for [`spin_time`] of `settings`.
    pub fn new(threads: Option<usize>, settings: &Settings) -> Result<Launcher, JitError> {
        let threads = threads.unwrap_or_else(|| default_threads(settings));
        Launcher::with_spin(threads, spin_time(settings))
    }

    /// A launcher with `threads` threads whose idle workers spin for `spin`; the pool of
    /// that size and spin time is shared.
    pub fn with_spin(threads: usize, spin: Duration) -> Result<Launcher, JitError> {
        check_threads(threads)?;
        let key = (threads, spin);
        let mut map = pools().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pool) = map.get(&key) {
            return Ok(Launcher {
                threads,
                pool: Arc::clone(pool),
                parallelism: Parallelism::Auto,
            });
        }
        let pool = WorkerPool::new(threads, spin).map_err(|e| JitError::ThreadPool {
            threads,
            detail: e.to_string(),
        })?;
        let pool = Arc::new(pool);
        map.insert(key, Arc::clone(&pool));
        Ok(Launcher {
            threads,
            pool,
            parallelism: Parallelism::Auto,
        })
    }

    /// This launcher with `parallelism`.
    pub fn with_parallelism(self, parallelism: Parallelism) -> Launcher {
        Launcher {
            parallelism,
            ..self
        }
    }

    /// The number of threads.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The static chunks `[begin, end)` a phase of `extent` work items is split into.
    pub fn chunks(&self, extent: i64) -> Vec<(i64, i64)> {
        if extent <= 0 {
            return Vec::new();
        }
        let n = (self.threads * CHUNKS_PER_THREAD).clamp(1, extent as usize) as i128;
        let e = extent as i128;
        (0..n)
            .map(|c| ((e * c / n) as i64, (e * (c + 1) / n) as i64))
            .collect()
    }

    /// The number of work items of one chunk of a dynamic phase of `extent` items: about
    /// 32 chunks per thread, at least 1 item each.
    pub fn dynamic_chunk(&self, extent: i64) -> i64 {
        (extent / (self.threads as i64 * 32)).max(1)
    }

    /// The chunks of a dynamic phase.
    fn dynamic_chunks(&self, extent: i64) -> Vec<(i64, i64)> {
        let size = self.dynamic_chunk(extent);
        (0..extent)
            .step_by(size as usize)
            .map(|b| (b, (b + size).min(extent)))
            .collect()
    }

    /// Sets every element of `data` to its default (zero), in parts the pool's threads
    /// claim.
    pub fn fill_zero<T: Copy + Default + Send>(&self, data: &mut [T]) {
        const PART: usize = 1 << 16;
        if self.threads == 1 || data.len() < 2 * PART {
            data.fill(T::default());
            return;
        }
        let parts: Vec<Mutex<Option<&mut [T]>>> =
            data.chunks_mut(PART).map(|c| Mutex::new(Some(c))).collect();
        let next = AtomicUsize::new(0);
        self.pool.run(&|| loop {
            let Some(part) = parts.get(next.fetch_add(1, Ordering::Relaxed)) else {
                return;
            };
            if let Some(piece) = part.lock().unwrap_or_else(|e| e.into_inner()).take() {
                piece.fill(T::default());
            }
        });
    }

    /// Runs every phase of `lib`.
    ///
    /// # Safety
    /// `buffers` and `params` must be what the kernel expects: one valid pointer per
    /// buffer of its function (to arrays of the right type and at least the length the
    /// code indexes), one value per parameter.
    pub unsafe fn run(
        &self,
        lib: &Library,
        buffers: &[*mut c_void],
        params: &[i64],
    ) -> Result<(), JitError> {
        let extent_fn = lib.phase_extent_fn();
        let run_fn = lib.phase_run_fn();
        let partition_fn = lib.phase_partition_fn();
        let bounds_fn = lib.phase_bounds_fn();
        let work_fn = lib.phase_work_fn();
        let args = Args {
            buffers: buffers.as_ptr(),
            params: params.as_ptr(),
        };
        let phases = lib.num_phases()?;
        for phase in 0..phases {
            let ph = phase as i64;
            // SAFETY: the caller's contract.
            let extent = unsafe { extent_fn(ph, args.buffers, args.params) };
            if extent < 0 {
                return Err(JitError::NegativeExtent { phase, extent });
            }
            let call = |(begin, end): (i64, i64)| {
                let a = args;
                // SAFETY: the caller's contract; chunks of one phase are independent.
                let code = unsafe { run_fn(ph, a.buffers, a.params, begin, end) };
                if code == 0 {
                    Ok(())
                } else {
                    Err(JitError::PhaseFailed {
                        phase,
                        code,
                        begin,
                        end,
                    })
                }
            };
            // SAFETY: the caller's contract.
            let work = unsafe { work_fn(ph, args.buffers, args.params) };
            let calibration = lib.phase_calibration(phase);
            let serial_ns = match calibration {
                Some(_) if self.parallelism == Parallelism::Always => f64::INFINITY,
                Some(c) if work >= 0 => c.serial_ns(work),
                _ => f64::INFINITY,
            };
            if extent <= 1 || self.threads == 1 || serial_ns < SERIAL_NS {
                if extent > 0 {
                    let start = Instant::now();
                    call((0, extent))?;
                    record(calibration, work, start.elapsed().as_nanos() as u64);
                }
                continue;
            }
            let help = if serial_ns < WAKE_NS {
                Help::Awake
            } else {
                Help::All
            };
            // SAFETY: the ABI's signature, no memory access.
            let chunks = match unsafe { partition_fn(ph) } {
                0 => self.chunks(extent),
                1 => self.dynamic_chunks(extent),
                2 => {
                    let n = (self.threads * CHUNKS_PER_THREAD).clamp(1, extent as usize);
                    let mut bounds = vec![0i64; n + 1];
                    // SAFETY: the caller's contract; `bounds` holds n + 1 values.
                    let code = unsafe {
                        bounds_fn(ph, args.buffers, args.params, n as i64, bounds.as_mut_ptr())
                    };
                    if code != 0 {
                        return Err(JitError::BadBounds {
                            phase,
                            detail: format!("sparsile_phase_bounds returned {code}"),
                        });
                    }
                    check_bounds(phase, &bounds, extent)?;
                    bounds
                        .windows(2)
                        .map(|w| (w[0], w[1]))
                        .filter(|(b, e)| b < e)
                        .collect()
                }
                code => return Err(JitError::UnknownPartition { phase, code }),
            };
            let next = AtomicUsize::new(0);
            let failed = AtomicBool::new(false);
            let first_error: Mutex<Option<JitError>> = Mutex::new(None);
            let busy_ns = AtomicU64::new(0);
            let look_every = look_every(serial_ns, chunks.len());
            // Each thread times its whole claim loop (two clock reads per thread, not per
            // chunk: on a call of tens of microseconds the reads cost as much as a chunk);
            // a thread that finds nothing left adds nanoseconds.
            let job = || {
                let start = Instant::now();
                let mut until_look = look_every;
                loop {
                    if failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let c = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&chunk) = chunks.get(c) else {
                        break;
                    };
                    let result = call(chunk);
                    until_look -= 1;
                    if until_look == 0 {
                        self.pool.late_wake();
                        until_look = look_every;
                    }
                    if let Err(e) = result {
                        failed.store(true, Ordering::Relaxed);
                        first_error
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(e);
                        break;
                    }
                }
                busy_ns.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
            };
            self.pool.run_with(&job, help);
            record(calibration, work, busy_ns.load(Ordering::Relaxed));
            if let Some(e) = first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
                return Err(e);
            }
        }
        Ok(())
    }
}

/// How many chunks a thread runs between two calls of [`WorkerPool::late_wake`]: one
/// look per [`LOOK_SPACING_NS`] of estimated work, at least every chunk and at most every
/// [`MAX_LOOK_EVERY`] chunks (an estimate far below the truth must not leave a long call
/// without looks). A look reads the clock while the pool's workers were left asleep, and
/// the first one is due [`super::pool::FIRST_LOOK_US`] after the job's start, so on a
/// short phase (Cora's SpMV: about 1 µs per chunk) a look after every chunk only read the
/// clock.
fn look_every(serial_ns: f64, chunks: usize) -> usize {
    let per_chunk = serial_ns / chunks.max(1) as f64;
    if per_chunk.is_finite() && per_chunk > 0.0 {
        (LOOK_SPACING_NS / per_chunk).clamp(1.0, MAX_LOOK_EVERY as f64) as usize
    } else {
        1
    }
}

/// Estimated work (nanoseconds on one thread) between two late looks of a claim loop.
const LOOK_SPACING_NS: f64 = 10_000.0;

/// The most chunks a thread runs between two late looks.
const MAX_LOOK_EVERY: usize = 4;

/// Records a run of a phase in its calibration, when the work is known.
fn record(calibration: Option<&PhaseCalibration>, work: i64, busy_ns: u64) {
    if let Some(c) = calibration.filter(|_| work > 0) {
        c.record(work, busy_ns);
    }
}

/// Checks that kernel-computed chunk boundaries go from 0 to `extent` without decreasing.
fn check_bounds(phase: usize, bounds: &[i64], extent: i64) -> Result<(), JitError> {
    let bad = |detail: String| Err(JitError::BadBounds { phase, detail });
    if bounds.first() != Some(&0) || bounds.last() != Some(&extent) {
        return bad(format!(
            "they run from {:?} to {:?}, not from 0 to the extent {extent}",
            bounds.first(),
            bounds.last()
        ));
    }
    if let Some(k) = bounds.windows(2).position(|w| w[1] < w[0]) {
        return bad(format!(
            "boundary {} is {} but boundary {} is {}",
            k,
            bounds[k],
            k + 1,
            bounds[k + 1]
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_looks_are_spaced_by_estimated_work() {
        // Chunks of 2.5 µs: a look every 4 chunks.
        assert_eq!(look_every(40_000.0, 16), 4);
        // Chunks of 4 µs: every 2.
        assert_eq!(look_every(64_000.0, 16), 2);
        // Chunks longer than the spacing: a look after each.
        assert_eq!(look_every(16_000_000.0, 16), 1);
        // Shorter chunks (Cora's SpMV, about 1 µs each), or an estimate far too low: never
        // fewer looks than one per 4 chunks.
        assert_eq!(look_every(16_000.0, 16), MAX_LOOK_EVERY);
        assert_eq!(look_every(100.0, 16), MAX_LOOK_EVERY);
        // Unknown work (no calibration, or parallelism forced): every chunk.
        assert_eq!(look_every(f64::INFINITY, 16), 1);
        assert_eq!(look_every(0.0, 16), 1);
        assert_eq!(look_every(16_000.0, 0), 1);
    }
}
