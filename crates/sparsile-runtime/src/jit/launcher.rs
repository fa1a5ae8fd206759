//! Running a loaded kernel's phases on the CPU thread pool.
//!
//! Phases run in order. A phase whose extent `E` (from `sparsile_phase_extent`) is above 1
//! is split into chunks by its partition (`sparsile_phase_partition`), and the chunks
//! run on the pool; the call returns when all are done:
//! - static (0): about four chunks per thread, chunk `c` of `n` covering work items
//!   `[E*c/n, E*(c+1)/n)`;
//! - dynamic (1): chunks of [`Launcher::dynamic_chunk`] work items, which the pool's
//!   threads take as they become free (work stealing);
//! - balanced (2): about four chunks per thread with the boundaries the kernel computes
//!   (`sparsile_phase_bounds`: about equal work per chunk), checked to be nondecreasing
//!   from 0 to `E`.
//!
//! The chunks of a parallel phase are claimed one at a time by the pool's participants
//! (the calling thread among them) until none is left, so a thread that finishes early
//! takes more. A phase of extent 1 (serial) runs once on the calling thread; extent 0 runs
//! nothing; with one thread every phase runs as one chunk. Any nonzero return of
//! `sparsile_phase_run` is an error naming the phase (the first one; the other
//! participants stop claiming chunks).
//!
//! Pools are shared: one [`SpinPool`] per thread count and spin time, created on first
//! use; idle workers spin for the spin time (`SPARSILE_SPIN_US`) before sleeping, so
//! back-to-back kernel calls find them awake.
//!
//! ```
//! use sparsile_ir::settings::Settings;
//! use sparsile_runtime::jit::Launcher;
//!
//! let launcher = Launcher::new(Some(2), &Settings::default()).unwrap();
//! // 10 work items on 2 threads: 8 static chunks.
//! assert_eq!(launcher.chunks(10), [(0, 1), (1, 2), (2, 3), (3, 5), (5, 6), (6, 7), (7, 8), (8, 10)]);
//! ```

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use sparsile_ir::settings::Settings;

use super::pool::{SpinPool, DEFAULT_SPIN};
use super::{JitError, Library};

/// Chunks per thread of a parallel phase.
pub const CHUNKS_PER_THREAD: usize = 4;

/// Runs kernels on a thread pool of a fixed size.
#[derive(Clone)]
pub struct Launcher {
    threads: usize,
    pool: Arc<SpinPool>,
}

impl std::fmt::Debug for Launcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launcher")
            .field("threads", &self.threads)
            .finish()
    }
}

/// The thread count used when none is given: `SPARSILE_NUM_THREADS`, else the available
/// parallelism, else 1.
pub fn default_threads(settings: &Settings) -> usize {
    settings.num_threads.unwrap_or_else(|| {
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

type Pools = Mutex<HashMap<(usize, Duration), Arc<SpinPool>>>;

fn pools() -> &'static Pools {
    static POOLS: OnceLock<Pools> = OnceLock::new();
    POOLS.get_or_init(|| Mutex::new(HashMap::new()))
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
        if threads == 0 {
            return Err(JitError::ZeroThreads);
        }
        let key = (threads, spin);
        let mut map = pools().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pool) = map.get(&key) {
            return Ok(Launcher {
                threads,
                pool: Arc::clone(pool),
            });
        }
        let pool = SpinPool::new(threads, spin).map_err(|e| JitError::ThreadPool {
            threads,
            detail: e.to_string(),
        })?;
        let pool = Arc::new(pool);
        map.insert(key, Arc::clone(&pool));
        Ok(Launcher { threads, pool })
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

    /// Sets every element of `data` to its default (zero), each thread a contiguous part.
    pub fn fill_zero<T: Copy + Default + Send>(&self, data: &mut [T]) {
        const SERIAL_BELOW: usize = 1 << 16;
        if self.threads == 1 || data.len() < SERIAL_BELOW {
            data.fill(T::default());
            return;
        }
        let part = data.len().div_ceil(self.threads);
        let parts: Vec<Mutex<Option<&mut [T]>>> =
            data.chunks_mut(part).map(|c| Mutex::new(Some(c))).collect();
        self.pool.broadcast(&|p| {
            let piece = parts
                .get(p)
                .and_then(|m| m.lock().unwrap_or_else(|e| e.into_inner()).take());
            if let Some(piece) = piece {
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
            if extent <= 1 || self.threads == 1 {
                if extent > 0 {
                    call((0, extent))?;
                }
                continue;
            }
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
            self.pool.broadcast(&|_participant| loop {
                if failed.load(Ordering::Relaxed) {
                    return;
                }
                let c = next.fetch_add(1, Ordering::Relaxed);
                let Some(&chunk) = chunks.get(c) else {
                    return;
                };
                if let Err(e) = call(chunk) {
                    failed.store(true, Ordering::Relaxed);
                    first_error
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(e);
                    return;
                }
            });
            if let Some(e) = first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
                return Err(e);
            }
        }
        Ok(())
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
