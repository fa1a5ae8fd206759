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
//! A job is a closure the caller and each worker that joins in time call once
//! ([`SpinPool::broadcast`]). A job must therefore hand out its work through shared state
//! (an atomic counter of chunks): whoever runs it takes what is left. A worker joins by
//! claiming one of the job's `threads - 1` slots; when the caller's own call returns (all
//! work handed out), it closes the remaining slots and waits only for the workers that
//! claimed one. So a worker that is asleep, or that the operating system has not
//! scheduled, never holds a call up: before, every call waited for every worker to wake
//! and check in, and a descheduled worker cost a time slice (about 2 ms) per call. The
//! closure may borrow from the caller's stack: no worker runs it after `broadcast`
//! returns. Jobs on one pool are serialised: a second caller waits for the first call to
//! finish. A panic in a worker is caught and resumed on the calling thread.
//!
//! Preconditions: the job's work is claimed through shared state, not by participant
//! index; a pool of 1 thread runs jobs on the caller alone.
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::time::Duration;
//! use sparsile_runtime::jit::SpinPool;
//!
//! let pool = SpinPool::new(3, Duration::from_micros(200)).unwrap();
//! let next = AtomicUsize::new(0);
//! let done: Vec<AtomicUsize> = (0..100).map(|_| AtomicUsize::new(0)).collect();
//! pool.broadcast(&|_participant| loop {
//!     let i = next.fetch_add(1, Ordering::Relaxed);
//!     let Some(item) = done.get(i) else { return };
//!     item.fetch_add(1, Ordering::Relaxed);
//! });
//! assert!(done.iter().all(|d| d.load(Ordering::Relaxed) == 1));
//! ```

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle worker spins before it sleeps, when `SPARSILE_SPIN_US` is unset.
pub const DEFAULT_SPIN: Duration = Duration::from_millis(2);

/// A job: called once by the caller and by each worker that claims a slot, with the
/// participant's index (`0..threads`; the calling thread is the last).
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
    /// The current job's slots that no worker has claimed yet: a worker claims one by
    /// decrementing it from a positive value; the caller closes the job by swapping in 0.
    slots: AtomicIsize,
    /// Workers that claimed a slot of the current job and have returned from it.
    finished: AtomicUsize,
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
            slots: AtomicIsize::new(0),
            finished: AtomicUsize::new(0),
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

    /// Calls `job(threads - 1)` on the calling thread, and `job(p)` on each worker `p`
    /// that claims a slot before the caller's call returns; returns when every call that
    /// started has returned. A panic in any call is resumed here after they are done.
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
        // SAFETY: the lifetime is erased only for the workers' copies; a worker reads the
        // pointer only after claiming a slot, `Wait` below closes the slots and does not
        // let this function return (or unwind) before every claimant has returned from
        // the job, and the pointer is cleared before the next job.
        let erased: *const Job =
            unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync + '_), &'static Job>(job) };
        *shared.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(JobPtr(erased));
        // No claimant of an earlier job is left (its caller waited for them all).
        shared.finished.store(0, Ordering::SeqCst);
        shared.slots.store(me as isize, Ordering::SeqCst);
        shared.generation.fetch_add(1, Ordering::SeqCst);
        if shared.sleeping.load(Ordering::SeqCst) > 0 {
            let _g = shared.sleep_lock.lock().unwrap_or_else(|e| e.into_inner());
            shared.wake.notify_all();
        }
        /// Closes the job's slots and waits for the workers that claimed one when dropped,
        /// so that an unwinding caller also waits.
        struct Wait<'a>(&'a Shared, usize);
        impl Drop for Wait<'_> {
            fn drop(&mut self) {
                let unclaimed = self.0.slots.swap(0, Ordering::SeqCst).max(0) as usize;
                let claimed = self.1 - unclaimed;
                let start = Instant::now();
                let mut n = 0u32;
                while self.0.finished.load(Ordering::Acquire) < claimed {
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
        let wait = Wait(shared, me);
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
        // Claim a slot of the current job; a job already closed (its caller done with
        // all the work) is left alone.
        if shared.slots.fetch_sub(1, Ordering::SeqCst) <= 0 {
            continue;
        }
        let job = *shared.job.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(JobPtr(ptr)) = job {
            // SAFETY: `broadcast` keeps the job alive until every claimant has counted
            // itself in `finished`, which needs this worker's increment below.
            let f: &Job = unsafe { &*ptr };
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(index))) {
                let mut slot = shared.panic.lock().unwrap_or_else(|e| e.into_inner());
                slot.get_or_insert(p);
            }
        }
        shared.finished.fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `items` items through `pool` the way a kernel phase does (an atomic counter)
    /// and returns how often each ran and which participants ran the job.
    fn claim_items(pool: &SpinPool, items: usize) -> (Vec<usize>, Vec<usize>) {
        let next = AtomicUsize::new(0);
        let done: Vec<AtomicUsize> = (0..items).map(|_| AtomicUsize::new(0)).collect();
        let ran: Vec<AtomicUsize> = (0..pool.threads()).map(|_| AtomicUsize::new(0)).collect();
        pool.broadcast(&|p| {
            ran[p].fetch_add(1, Ordering::Relaxed);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = done.get(i) else { return };
                item.fetch_add(1, Ordering::Relaxed);
            }
        });
        let load = |v: Vec<AtomicUsize>| v.into_iter().map(|a| a.into_inner()).collect();
        (load(done), load(ran))
    }

    #[test]
    fn every_item_of_every_job_runs_once() {
        for threads in [1, 2, 4] {
            for spin in [Duration::ZERO, Duration::from_millis(1)] {
                let pool = SpinPool::new(threads, spin).unwrap();
                for round in 0..300 {
                    let (done, ran) = claim_items(&pool, round % 37);
                    assert!(done.iter().all(|&d| d == 1), "round {round}: {done:?}");
                    // The caller always runs the job; a worker at most once.
                    assert_eq!(ran[threads - 1], 1, "round {round}");
                    assert!(ran.iter().all(|&r| r <= 1), "round {round}: {ran:?}");
                    if round % 50 == 0 {
                        // Let workers fall asleep now and then.
                        std::thread::sleep(Duration::from_millis(3));
                    }
                }
            }
        }
    }

    #[test]
    fn awake_workers_join_a_long_job() {
        // Items that take a while give spinning workers time to claim their slots.
        let pool = SpinPool::new(3, Duration::from_secs(5)).unwrap();
        let next = AtomicUsize::new(0);
        let ran: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        pool.broadcast(&|p| {
            ran[p].fetch_add(1, Ordering::Relaxed);
            // The caller keeps the job open until both workers are in (or time is up).
            while p == 2
                && ran.iter().filter(|r| r.load(Ordering::Relaxed) > 0).count() < 3
                && Instant::now() < deadline
            {
                std::hint::spin_loop();
            }
            while next.fetch_add(1, Ordering::Relaxed) < 1000 {}
        });
        let ran: Vec<usize> = ran.into_iter().map(|a| a.into_inner()).collect();
        assert_eq!(ran, vec![1, 1, 1]);
    }

    #[test]
    fn a_worker_panic_reaches_the_caller_and_the_pool_goes_on() {
        let pool = SpinPool::new(3, Duration::ZERO).unwrap();
        let entered = AtomicBool::new(false);
        let deadline = Instant::now() + Duration::from_secs(10);
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.broadcast(&|p| {
                if p != 2 {
                    entered.store(true, Ordering::SeqCst);
                    panic!("worker {p} fails");
                }
                // The caller waits (with a deadline) until a worker has joined.
                while !entered.load(Ordering::SeqCst) && Instant::now() < deadline {
                    std::hint::spin_loop();
                }
            })
        }));
        assert!(entered.load(Ordering::SeqCst));
        assert!(r.is_err());
        let (done, ran) = claim_items(&pool, 100);
        assert!(done.iter().all(|&d| d == 1));
        assert_eq!(ran[2], 1);
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
                        let (done, _) = claim_items(&pool, 10);
                        total.fetch_add(done.iter().sum::<usize>(), Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(total.load(Ordering::Relaxed), 4 * 100 * 10);
    }
}
