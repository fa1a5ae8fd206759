//! The CPU worker pool that runs a kernel's parallel phases.
//!
//! Purpose: a kernel call is short (tens of microseconds to a few milliseconds) and a
//! program makes many in a row, so what matters is how fast idle workers join the next
//! call. A pool of `threads` participants has `threads - 1` worker threads; the calling
//! thread is the last participant and works too. Between jobs a worker spins for a while
//! (the *spin time*, `SPARSILE_SPIN_US`, default [`DEFAULT_SPIN`]) watching for the next
//! job, and only then sleeps on a condition variable: back-to-back calls find every worker
//! awake instead of paying a wake-up (a futex call, and on a virtual machine the time for
//! the host to run the idle virtual CPU again), which otherwise leaves one thread doing
//! most of a short call's chunks.
//!
//! A job is a closure every participant calls once ([`SpinPool::broadcast`]); the caller
//! returns when every participant has returned from it, so the closure may borrow from
//! the caller's stack. Jobs on one pool are serialised: a second caller waits for the
//! first call to finish. A panic in a worker is caught and resumed on the calling thread.
//!
//! Preconditions: none; a pool of 1 thread runs jobs on the caller alone.
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::time::Duration;
//! use sparsile_runtime::jit::SpinPool;
//!
//! let pool = SpinPool::new(3, Duration::from_micros(200)).unwrap();
//! let calls = AtomicUsize::new(0);
//! pool.broadcast(&|_participant| {
//!     calls.fetch_add(1, Ordering::Relaxed);
//! });
//! assert_eq!(calls.load(Ordering::Relaxed), 3);
//! ```

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle worker spins before it sleeps, when `SPARSILE_SPIN_US` is unset.
pub const DEFAULT_SPIN: Duration = Duration::from_millis(2);

/// A job: called once by every participant with its index (`0..threads`; the calling
/// thread is the last).
type Job = dyn Fn(usize) + Sync;

/// A job pointer with its lifetime erased; valid while [`SpinPool::broadcast`] runs.
#[derive(Clone, Copy)]
struct JobPtr(*const Job);

// SAFETY: the pointee is `Sync` and outlives every use (see `broadcast`).
unsafe impl Send for JobPtr {}

struct Shared {
    /// Bumped once per job; a worker runs the job when it sees a new value.
    generation: AtomicU64,
    /// The current job (set before `generation` is bumped).
    job: Mutex<Option<JobPtr>>,
    /// Workers that have not yet returned from the current job.
    pending: AtomicUsize,
    /// Workers asleep (or about to sleep) on `wake`.
    sleeping: AtomicUsize,
    sleep_lock: Mutex<()>,
    wake: Condvar,
    shutdown: AtomicBool,
    /// The first panic payload of a worker during the current job.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    spin: Duration,
}

/// A fixed set of worker threads that spin, then sleep, between jobs (see the module
/// docs).
pub struct SpinPool {
    threads: usize,
    shared: Arc<Shared>,
    /// Serialises callers.
    calls: Mutex<()>,
    workers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for SpinPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpinPool")
            .field("threads", &self.threads)
            .field("spin", &self.shared.spin)
            .finish()
    }
}

impl SpinPool {
    /// A pool of `threads` participants (`threads - 1` new threads) whose idle workers
    /// spin for `spin` before sleeping. Fails when a thread cannot be started.
    pub fn new(threads: usize, spin: Duration) -> std::io::Result<SpinPool> {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            generation: AtomicU64::new(0),
            job: Mutex::new(None),
            pending: AtomicUsize::new(0),
            sleeping: AtomicUsize::new(0),
            sleep_lock: Mutex::new(()),
            wake: Condvar::new(),
            shutdown: AtomicBool::new(false),
            panic: Mutex::new(None),
            spin,
        });
        let mut pool = SpinPool {
            threads,
            shared,
            calls: Mutex::new(()),
            workers: Vec::with_capacity(threads - 1),
        };
        for index in 0..threads - 1 {
            let shared = Arc::clone(&pool.shared);
            let handle = std::thread::Builder::new()
                .name(format!("sparsile-{index}"))
                .spawn(move || worker(&shared, index))?;
            pool.workers.push(handle);
        }
        Ok(pool)
    }

    /// The number of participants (workers and the caller).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Calls `job(p)` once on every participant `p` in `0..threads` (the calling thread is
    /// participant `threads - 1`) and returns when all calls have returned. A panic in any
    /// call is resumed here after every participant is done.
    pub fn broadcast(&self, job: &(dyn Fn(usize) + Sync)) {
        let me = self.threads - 1;
        if me == 0 {
            job(0);
            return;
        }
        let _serial = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let shared = &*self.shared;
        // A payload left by an earlier job whose caller panicked too.
        drop(
            shared
                .panic
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        // SAFETY: the lifetime is erased only for the workers' copies; `Wait` below does
        // not let this function return (or unwind) before every worker has returned from
        // the job, and the pointer is cleared before the next job.
        let erased: *const Job =
            unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync + '_), &'static Job>(job) };
        *shared.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(JobPtr(erased));
        shared.pending.store(me, Ordering::SeqCst);
        shared.generation.fetch_add(1, Ordering::SeqCst);
        if shared.sleeping.load(Ordering::SeqCst) > 0 {
            let _g = shared.sleep_lock.lock().unwrap_or_else(|e| e.into_inner());
            shared.wake.notify_all();
        }
        /// Waits for the workers when dropped, so that an unwinding caller also waits.
        struct Wait<'a>(&'a Shared);
        impl Drop for Wait<'_> {
            fn drop(&mut self) {
                let start = Instant::now();
                let mut n = 0u32;
                while self.0.pending.load(Ordering::Acquire) > 0 {
                    n = n.wrapping_add(1);
                    if n.is_multiple_of(256) && start.elapsed() > Duration::from_micros(50) {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
                *self.0.job.lock().unwrap_or_else(|e| e.into_inner()) = None;
            }
        }
        let wait = Wait(shared);
        job(me);
        drop(wait);
        let payload = shared
            .panic
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(p) = payload {
            std::panic::resume_unwind(p);
        }
    }
}

impl Drop for SpinPool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        {
            let _g = self
                .shared
                .sleep_lock
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            self.shared.wake.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// A worker's life: wait for a new generation (spinning, then sleeping), run the job,
/// report done.
fn worker(shared: &Shared, index: usize) {
    let mut seen = 0u64;
    loop {
        let start = Instant::now();
        let mut n = 0u32;
        loop {
            if shared.shutdown.load(Ordering::Acquire) {
                return;
            }
            let g = shared.generation.load(Ordering::Acquire);
            if g != seen {
                seen = g;
                break;
            }
            n = n.wrapping_add(1);
            if !n.is_multiple_of(128) {
                std::hint::spin_loop();
                continue;
            }
            if start.elapsed() < shared.spin {
                continue;
            }
            // Sleep: announce it, then check again under the lock, so that a job
            // published after the check above either is seen here or wakes us.
            let guard = shared.sleep_lock.lock().unwrap_or_else(|e| e.into_inner());
            shared.sleeping.fetch_add(1, Ordering::SeqCst);
            let guard = shared
                .wake
                .wait_while(guard, |_| {
                    shared.generation.load(Ordering::SeqCst) == seen
                        && !shared.shutdown.load(Ordering::SeqCst)
                })
                .unwrap_or_else(|e| e.into_inner());
            shared.sleeping.fetch_sub(1, Ordering::SeqCst);
            drop(guard);
        }
        let job = *shared.job.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(JobPtr(ptr)) = job {
            // SAFETY: `broadcast` keeps the job alive until `pending` reaches zero, which
            // needs this worker's decrement below.
            let f: &Job = unsafe { &*ptr };
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(index))) {
                let mut slot = shared.panic.lock().unwrap_or_else(|e| e.into_inner());
                slot.get_or_insert(p);
            }
        }
        shared.pending.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_participant_runs_each_job_once() {
        for threads in [1, 2, 4] {
            for spin in [Duration::ZERO, Duration::from_millis(1)] {
                let pool = SpinPool::new(threads, spin).unwrap();
                for round in 0..200 {
                    let seen: Vec<AtomicUsize> =
                        (0..threads).map(|_| AtomicUsize::new(0)).collect();
                    pool.broadcast(&|p| {
                        seen[p].fetch_add(1, Ordering::Relaxed);
                    });
                    for (p, s) in seen.iter().enumerate() {
                        assert_eq!(
                            s.load(Ordering::Relaxed),
                            1,
                            "participant {p}, round {round}"
                        );
                    }
                    if round % 50 == 0 {
                        // Let workers fall asleep now and then.
                        std::thread::sleep(Duration::from_millis(3));
                    }
                }
            }
        }
    }

    #[test]
    fn a_worker_panic_reaches_the_caller_and_the_pool_goes_on() {
        let pool = SpinPool::new(3, Duration::ZERO).unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.broadcast(&|p| {
                if p == 0 {
                    panic!("participant 0 fails");
                }
            })
        }));
        assert!(r.is_err());
        let count = AtomicUsize::new(0);
        pool.broadcast(&|_| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn concurrent_callers_each_run_every_job_once() {
        let pool = Arc::new(SpinPool::new(2, Duration::from_micros(100)).unwrap());
        let total = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let pool = Arc::clone(&pool);
                let total = Arc::clone(&total);
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        pool.broadcast(&|_| {
                            total.fetch_add(1, Ordering::Relaxed);
                        });
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(total.load(Ordering::Relaxed), 4 * 100 * 2);
    }
}
