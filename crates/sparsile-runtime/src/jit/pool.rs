//! The CPU worker pool that runs a kernel's parallel phases.
//!
//! Purpose: a kernel call is short (microseconds to milliseconds), programs make many in
//! a row, and they run inside frameworks (PyTorch, a Python training loop, other
//! threads) that want the same cores. The pool therefore never makes a call wait for a
//! thread that is not running, and holds no core once a call has returned.
//!
//! # Protocol
//! A job ([`WorkerPool::run`]) is a *claim loop*: a closure that takes pieces of work from
//! a shared counter until none is left, so that one call of it alone does all the work.
//! The calling thread publishes the job, wakes sleeping workers when the job asks for it
//! ([`Help`]) and the machine has an idle core ([`SystemLoad`]), and runs the closure
//! itself. Idle workers that see the job in time *join* it and run the closure too. When
//! the caller's own call returns, every piece has been claimed; the caller *closes* the
//! job, after which no worker can join, and waits only for the workers that did join
//! (each is finishing a piece it claimed). A worker that was asleep, descheduled or busy
//! elsewhere simply does not take part: the call is never slower than the caller alone
//! plus the pieces others took. Joining and closing are one atomic word holding the job's
//! generation, a closed bit and the count of joined workers, so a late worker cannot touch
//! a job whose caller has returned.
//!
//! A second caller that finds the pool busy (another thread's job in flight) does not
//! queue: it runs its closure alone on its own thread.
//!
//! # Waiting
//! An idle worker first spins on the job word with a pause instruction for a few
//! microseconds, then keeps watching while calling `sched_yield` between looks, so any
//! other runnable thread on its core (the caller itself, a framework's thread, another
//! process) runs at once; a yield that took long means such a thread exists, and the
//! worker sleeps at once. Otherwise it sleeps on a condition variable after its spin
//! budget, which starts at the pool's spin time (`SPARSILE_SPIN_US`, default
//! [`DEFAULT_SPIN`]) and adapts: it halves (down to [`MIN_SPIN`]) each time the next job
//! comes later than the spin time, and returns to the spin time as soon as one comes
//! within it (both measured from the end of the pool's last job, whoever ran it). A
//! caller whose job asks only for awake workers ([`Help::Awake`]) but finds them asleep
//! while jobs come back to back (the last one ended within the spin time) wakes them
//! anyway when a core is idle: otherwise a worker that fell asleep once (a slow yield, a
//! job that came late) never sees the stream of medium-sized jobs again and they all run
//! on one thread. Such wakes are at least [`REWAKE_GAP`] apart while each is followed by a
//! worker joining a job; while they are not (a worker that goes back to sleep at once),
//! the gap doubles up to [`MAX_REWAKE_GAP`]. With a fixed gap of 1 ms, a worker that fell
//! asleep in a stream of 20 µs calls left the next 40 or so on one thread, and the
//! benchmark's medians of such a case moved between one- and two-thread speed from run to
//! run. A worker also stops spinning
//! at once when more threads are runnable than there are cores
//! ([`SystemLoad::oversubscribed`]): beside a busy process it would take turns on a core
//! with it, and a job it joined would wait for its turns. The caller
//! waits for joined workers the same way, then sleeps until the last one leaves.
//!
//! # Placement
//! A worker queued on the caller's core cannot help: the caller does not yield during
//! its job, and Linux leaves the worker there (see [`crate::jit::cpu_placement`]). The
//! caller therefore keeps every worker off its own core when it publishes a job (each
//! worker's affinity narrowed to the pool's cores minus the caller's, again only when
//! the caller's core changed); a new pool waits (at most [`STARTUP_WAIT`]) until each
//! worker has run once and given its thread id. Measured on the project's 2-core virtual
//! machine, SpMM K = 32 on a 2,048-row pruned weight, 2 threads, 20 calls per process, 24
//! processes each, medians above 0.1 ms (0.08 ms when both threads work, 0.15 ms on
//! one): without either, 16 processes; with the placement alone, 19 (the first jobs came
//! before the worker had given its id); with both, 2. The placement first moved only a
//! worker whose last core was the caller's; a worker moved there while waiting to run had
//! not run there, and whole benchmark rounds then ran at one-thread speed.
//!
//! A job that finds no idle core at its start leaves the sleeping workers asleep, and
//! its claim loop calls [`WorkerPool::late_wake`] between pieces (the launcher's does so
//! once per 10 µs of estimated work and at least every 4 pieces, not after every
//! piece): the caller looks again at doubling gaps and wakes them once a core is idle,
//! so a thread that happened to be runnable at the start does not make a long call run
//! on one thread.
//!
//! Why this shape: the earlier pool made every call wait until every worker had run the
//! job, and idle workers spun with a pause loop for 2 ms. The scheduler often put a woken
//! worker on the caller's core; the worker then finished the job and spun on, while the
//! caller, runnable on that same core with the other core idle, waited out the spin (or a
//! time slice): the ~2 ms stalls. With a busy process beside it the same wait hit a
//! descheduled worker. Work-stealing runtimes avoid both the ways used here: oneTBB lets
//! the external thread take a slot in the arena and work, rayon's idle workers yield and
//! then sleep after a few rounds, and OpenMP runtimes offer a passive wait policy (Intel's
//! `KMP_BLOCKTIME`, GNU's `GOMP_SPINCOUNT`, both lowered when threads outnumber cores).
//! rayon itself does not fit: a thread outside its pool that submits work blocks on a
//! latch instead of working, which costs a wake-up per call.
//!
//! Preconditions: none; a pool of 1 thread runs jobs on the caller alone. A panic in a
//! worker's call is caught and resumed on the calling thread after the job is closed.
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::time::Duration;
//! use sparsile_runtime::jit::WorkerPool;
//!
//! let pool = WorkerPool::new(3, Duration::from_micros(200)).unwrap();
//! let next = AtomicUsize::new(0);
//! let done = AtomicUsize::new(0);
//! pool.run(&|| loop {
//!     // claim one of 100 pieces of work
//!     if next.fetch_add(1, Ordering::Relaxed) >= 100 {
//!         return;
//!     }
//!     done.fetch_add(1, Ordering::Relaxed);
//! });
//! assert_eq!(done.load(Ordering::Relaxed), 100);
//! ```

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::cpu_placement::{current_cpu, current_tid, Cores};
use super::system_load::SystemLoad;

/// The spin budget of an idle worker when `SPARSILE_SPIN_US` is unset.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(100);

/// The smallest spin budget adaptation goes down to.
pub const MIN_SPIN: Duration = Duration::from_micros(5);

/// How long a waiter spins with pause instructions before it starts yielding.
const PAUSE_PHASE: Duration = Duration::from_micros(3);

/// A `sched_yield` slower than this means another thread ran on this core.
const CONTENDED_YIELD: Duration = Duration::from_micros(30);

/// The shortest time between two wakes of sleeping workers for jobs that ask only for
/// awake ones (see the module docs), used while each such wake is followed by a worker
/// joining a job.
pub const REWAKE_GAP: Duration = Duration::from_micros(100);

/// The longest time between two such wakes: the gap doubles up to it while wakes are
/// followed by no join (a worker that goes back to sleep at once, beside a busy thread),
/// so that such a worker costs a caller one system call per gap, not one per call.
pub const MAX_REWAKE_GAP: Duration = Duration::from_millis(2);

/// How long after a refused wake the caller first looks at the machine again.
pub const FIRST_LOOK_US: u64 = 50;

/// How long the caller waits for joined workers before it sleeps.
const CALLER_SPIN: Duration = Duration::from_micros(50);

/// The closed bit of the job word; the low bits below it count joined workers.
const CLOSED: u64 = 1 << 31;
const JOINED: u64 = CLOSED - 1;
const GENERATION_SHIFT: u32 = 32;

/// A job: a claim loop (see the module docs).
type Job = dyn Fn() + Sync;

/// The job word's generation.
fn generation(state: u64) -> u64 {
    state >> GENERATION_SHIFT
}

struct Shared {
    /// `generation << 32 | closed << 31 | joined workers`.
    state: AtomicU64,
    /// Points at the caller's `&Job` for the current generation (set before the
    /// generation is published; read only by a worker that joined).
    job: AtomicPtr<&'static Job>,
    /// A caller owns the pool (its job is in flight).
    busy: AtomicBool,
    /// Workers asleep (or about to sleep) on `wake`.
    sleeping: AtomicUsize,
    sleep_lock: Mutex<()>,
    wake: Condvar,
    /// The caller sleeps on `done` until the last joined worker leaves.
    caller_waiting: AtomicBool,
    done_lock: Mutex<()>,
    done: Condvar,
    shutdown: AtomicBool,
    /// The first panic payload of a worker during the current job.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// The largest spin budget of an idle worker.
    spin: Duration,
    /// Whether the machine has an idle core for a woken worker.
    load: SystemLoad,
    /// The current job's wake was refused (no idle core when it started): the caller
    /// looks again between its pieces ([`WorkerPool::late_wake`]).
    refused: AtomicBool,
    /// When the caller may look again, in µs since `epoch`, and the gap after that.
    next_look_us: AtomicU64,
    look_gap_us: AtomicU64,
    /// When the last job was closed, in µs since `epoch` (0: none yet).
    last_end_us: AtomicU64,
    /// When a caller may next wake sleeping workers for a [`Help::Awake`] job, in µs
    /// since `epoch`.
    next_rewake_us: AtomicU64,
    /// The current gap between such wakes, in µs (see [`REWAKE_GAP`]).
    rewake_gap_us: AtomicU64,
    /// A worker joined a job since the last such wake.
    joined_since_rewake: AtomicBool,
    epoch: Instant,
    /// Each worker's thread id and the core its affinity last left out.
    slots: Vec<WorkerSlot>,
    /// The cores the pool's threads may use (see [`crate::jit::cpu_placement`]).
    cores: Cores,
    /// Workers that have started running.
    started: AtomicUsize,
    /// What the pool did, for [`WorkerPool::stats`].
    stats: StatCounters,
}

/// Counts of what a pool's jobs got (see [`PoolStats`]).
#[derive(Default)]
struct StatCounters {
    jobs: AtomicU64,
    joined: AtomicU64,
    refused: AtomicU64,
    contended: AtomicU64,
    /// The generation of the last job a worker joined (set before it runs the job, so
    /// the job's caller sees it once the joined workers have left).
    joined_generation: AtomicU64,
}

/// What a pool's jobs got since it started: read twice and subtract to see what a run of
/// calls got (`sparsile tune` reports the share of its timed calls that ran on the caller
/// alone, so a measurement taken while no worker helped is seen as one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Jobs published to the workers (calls of [`WorkerPool::run_with`] that found the
    /// pool free, with more than one thread).
    pub jobs: u64,
    /// Of those, jobs that at least one worker joined.
    pub joined: u64,
    /// Of those, jobs whose start left sleeping workers asleep because the machine had
    /// no idle core (they may still have been woken later in the job).
    pub refused: u64,
    /// Calls that ran on their own thread because another caller's job was in flight.
    pub contended: u64,
}

impl PoolStats {
    /// The counts of `self` less those of an `earlier` reading.
    pub fn since(&self, earlier: &PoolStats) -> PoolStats {
        PoolStats {
            jobs: self.jobs.saturating_sub(earlier.jobs),
            joined: self.joined.saturating_sub(earlier.joined),
            refused: self.refused.saturating_sub(earlier.refused),
            contended: self.contended.saturating_sub(earlier.contended),
        }
    }

    /// The sum of two readings (of different pools).
    pub fn plus(&self, other: &PoolStats) -> PoolStats {
        PoolStats {
            jobs: self.jobs + other.jobs,
            joined: self.joined + other.joined,
            refused: self.refused + other.refused,
            contended: self.contended + other.contended,
        }
    }

    /// Jobs and contended calls that no worker helped.
    pub fn alone(&self) -> u64 {
        self.jobs.saturating_sub(self.joined) + self.contended
    }
}

/// The longest a new pool waits for its workers' first run.
pub const STARTUP_WAIT: Duration = Duration::from_millis(20);

/// [`WorkerSlot::cpu`] when unknown.
const NO_CPU: u32 = u32::MAX;

/// What a caller knows of one worker's thread (see [`crate::jit::cpu_placement`]).
struct WorkerSlot {
    /// The kernel thread id (0 until the worker runs, or where there is none).
    tid: AtomicI32,
    /// The core the worker's affinity last left out ([`NO_CPU`]: none yet).
    kept_off: AtomicU32,
}

impl Default for WorkerSlot {
    fn default() -> Self {
        WorkerSlot {
            tid: AtomicI32::new(0),
            kept_off: AtomicU32::new(NO_CPU),
        }
    }
}

/// Whom a caller's job asks for help (see [`WorkerPool::run_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Help {
    /// Workers awake now, and sleeping ones woken for it when the machine has an idle
    /// core (see [`SystemLoad`]).
    All,
    /// Only workers awake now: waking one costs more than it could take over.
    Awake,
}

/// A fixed set of worker threads that join the jobs of calling threads when they are
/// idle and running (see the module docs).
pub struct WorkerPool {
    threads: usize,
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool")
            .field("threads", &self.threads)
            .field("spin", &self.shared.spin)
            .finish()
    }
}

impl WorkerPool {
    /// A pool of `threads` participants (`threads - 1` new threads beside the caller)
    /// whose idle workers spin for at most `spin` before sleeping. Fails when a thread
    /// cannot be started.
    pub fn new(threads: usize, spin: Duration) -> std::io::Result<WorkerPool> {
        WorkerPool::with_load(threads, spin, SystemLoad::new())
    }

    /// [`new`](Self::new), asking `load` whether the machine has a core to spare (tests
    /// give it a made-up load).
    pub(crate) fn with_load(
        threads: usize,
        spin: Duration,
        load: SystemLoad,
    ) -> std::io::Result<WorkerPool> {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            // Generation 0, closed: nothing to join yet.
            state: AtomicU64::new(CLOSED),
            job: AtomicPtr::new(std::ptr::null_mut()),
            busy: AtomicBool::new(false),
            sleeping: AtomicUsize::new(0),
            sleep_lock: Mutex::new(()),
            wake: Condvar::new(),
            caller_waiting: AtomicBool::new(false),
            done_lock: Mutex::new(()),
            done: Condvar::new(),
            shutdown: AtomicBool::new(false),
            panic: Mutex::new(None),
            spin,
            load,
            refused: AtomicBool::new(false),
            next_look_us: AtomicU64::new(0),
            look_gap_us: AtomicU64::new(0),
            last_end_us: AtomicU64::new(0),
            next_rewake_us: AtomicU64::new(0),
            rewake_gap_us: AtomicU64::new(REWAKE_GAP.as_micros() as u64),
            joined_since_rewake: AtomicBool::new(true),
            epoch: Instant::now(),
            slots: (0..threads - 1).map(|_| WorkerSlot::default()).collect(),
            cores: Cores::of_current_thread(),
            started: AtomicUsize::new(0),
            stats: StatCounters::default(),
        });
        let mut pool = WorkerPool {
            threads,
            shared,
            workers: Vec::with_capacity(threads - 1),
        };
        for index in 0..threads - 1 {
            let shared = Arc::clone(&pool.shared);
            let handle = std::thread::Builder::new()
                .name(format!("sparsile-{index}"))
                .spawn(move || worker(&shared, index))?;
            pool.workers.push(handle);
        }
        // Wait (a bounded time) until every worker has run once and recorded its thread
        // id and core, so that the first jobs can already keep it off the caller's core
        // (see `cpu_placement` and the module docs).
        let start = Instant::now();
        while pool.shared.started.load(Ordering::Acquire) < threads - 1
            && start.elapsed() < STARTUP_WAIT
        {
            std::thread::yield_now();
        }
        Ok(pool)
    }

    /// The number of participants (workers and the caller).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// What the pool's jobs got since it started (see [`PoolStats`]).
    pub fn stats(&self) -> PoolStats {
        let c = &self.shared.stats;
        PoolStats {
            jobs: c.jobs.load(Ordering::Relaxed),
            joined: c.joined.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            contended: c.contended.load(Ordering::Relaxed),
        }
    }

    /// Runs the claim loop `job` on the calling thread and on every idle worker that
    /// joins before the caller's own call returns; returns when all of those calls have
    /// returned. `job` must do all the work when called once. A panic in any call is
    /// resumed here after the job is closed. Sleeping workers are woken for it.
    pub fn run(&self, job: &(dyn Fn() + Sync + '_)) {
        self.run_with(job, Help::All);
    }

    /// [`run`](Self::run), asking for the help `help` says.
    pub fn run_with(&self, job: &(dyn Fn() + Sync + '_), help: Help) {
        if self.threads == 1
            || self
                .shared
                .busy
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            // One thread, or another caller's job in flight: this caller works alone.
            if self.threads > 1 {
                self.shared.stats.contended.fetch_add(1, Ordering::Relaxed);
            }
            job();
            return;
        }
        let shared = &*self.shared;
        shared.stats.jobs.fetch_add(1, Ordering::Relaxed);
        // A payload left by an earlier job whose caller panicked too.
        drop(
            shared
                .panic
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        // SAFETY: the lifetime is erased only for workers that join; `Close` below does
        // not let this function return (or unwind) before the job is closed and every
        // joined worker has left it, and no worker reads the pointer without joining.
        let erased: &'static Job =
            unsafe { std::mem::transmute::<&(dyn Fn() + Sync + '_), &'static Job>(job) };
        let slot: &&'static Job = &erased;
        shared
            .job
            .store(slot as *const _ as *mut &'static Job, Ordering::Relaxed);
        if let Some(cpu) = current_cpu() {
            // A worker queued on this core would wait for the caller to finish. Where it
            // last ran says too little: a worker moved here while it waited to run has
            // not run here yet. So every worker is kept off the caller's core, with one
            // system call per worker each time the caller's core changes.
            for slot in &shared.slots {
                let tid = slot.tid.load(Ordering::Relaxed);
                if tid > 0 && slot.kept_off.load(Ordering::Relaxed) != cpu {
                    shared.cores.keep_off(tid, cpu);
                    slot.kept_off.store(cpu, Ordering::Relaxed);
                }
            }
        }
        let generation = (generation(shared.state.load(Ordering::Relaxed)) + 1) & 0xFFFF_FFFF;
        // Open: the new generation, not closed, nobody joined. Release publishes `job`.
        shared
            .state
            .store(generation << GENERATION_SHIFT, Ordering::SeqCst);
        if help == Help::All && shared.sleeping.load(Ordering::SeqCst) > 0 {
            if shared.load.core_to_spare() {
                wake_sleepers(shared);
            } else {
                // Look again later in this job: a thread that was runnable at the start
                // may be gone soon.
                let now = now_us(shared);
                shared.look_gap_us.store(FIRST_LOOK_US, Ordering::Relaxed);
                shared
                    .next_look_us
                    .store(now + FIRST_LOOK_US, Ordering::Relaxed);
                shared.refused.store(true, Ordering::Release);
                shared.stats.refused.fetch_add(1, Ordering::Relaxed);
            }
        } else if help == Help::Awake
            && shared.sleeping.load(Ordering::SeqCst) > 0
            && back_to_back(shared)
        {
            wake_sleepers(shared);
        }

        /// Closes the job and waits for the joined workers when dropped, so that an
        /// unwinding caller does too.
        struct Close<'a>(&'a Shared);
        impl Drop for Close<'_> {
            fn drop(&mut self) {
                let shared = self.0;
                shared.refused.store(false, Ordering::Relaxed);
                shared
                    .last_end_us
                    .store(now_us(shared).max(1), Ordering::Relaxed);
                let state = shared.state.fetch_or(CLOSED, Ordering::SeqCst) | CLOSED;
                if state & JOINED != 0 {
                    wait_for_joined(shared);
                }
                let stats = &shared.stats;
                if stats.joined_generation.load(Ordering::Acquire) == self::generation(state) {
                    stats.joined.fetch_add(1, Ordering::Relaxed);
                }
                shared.job.store(std::ptr::null_mut(), Ordering::Relaxed);
                shared.busy.store(false, Ordering::Release);
            }
        }
        let close = Close(shared);
        job();
        drop(close);
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

impl WorkerPool {
    /// Called by a job between its pieces of work: where the job's start found no idle
    /// core and left the sleeping workers asleep, looks at the machine again (after
    /// [`FIRST_LOOK_US`], then at doubling gaps, so that a busy machine costs a few
    /// readings per call) and wakes them once a core is idle. Without this, one runnable
    /// thread seen at the start (a kernel thread, a short process) made a long call run
    /// on the caller alone. Cheap when nothing was refused: one atomic load.
    pub fn late_wake(&self) {
        let shared = &*self.shared;
        if !shared.refused.load(Ordering::Acquire) {
            return;
        }
        let now = now_us(shared);
        let next = shared.next_look_us.load(Ordering::Relaxed);
        if now < next {
            return;
        }
        let gap = shared.look_gap_us.load(Ordering::Relaxed);
        // One looker at a time: whoever moves the deadline looks.
        if shared
            .next_look_us
            .compare_exchange(next, now + 2 * gap, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        shared.look_gap_us.store(2 * gap, Ordering::Relaxed);
        if shared.load.core_idle_now() && shared.refused.swap(false, Ordering::AcqRel) {
            wake_sleepers(shared);
        }
    }
}

/// µs since the pool's epoch.
fn now_us(shared: &Shared) -> u64 {
    shared.epoch.elapsed().as_micros() as u64
}

/// Whether sleeping workers should be woken for a job that asks only for awake ones:
/// the last job ended within the spin time (jobs come back to back, so a worker that
/// spun would have caught this one), no such wake happened in the current gap (see
/// [`rewake_gap`]), and the machine has a core to spare. Claims the gap when it says yes.
fn back_to_back(shared: &Shared) -> bool {
    let now = now_us(shared);
    let last_end = shared.last_end_us.load(Ordering::Relaxed);
    if last_end == 0 || now.saturating_sub(last_end) > shared.spin.as_micros() as u64 {
        return false;
    }
    let next = shared.next_rewake_us.load(Ordering::Relaxed);
    if now < next {
        return false;
    }
    // The gap: the shortest while the last wake paid (a worker joined a job since),
    // doubled while wakes find workers that go back to sleep without joining.
    let gap = rewake_gap(
        shared.joined_since_rewake.load(Ordering::Relaxed),
        shared.rewake_gap_us.load(Ordering::Relaxed),
    );
    if shared
        .next_rewake_us
        .compare_exchange(next, now + gap, Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        return false;
    }
    shared.rewake_gap_us.store(gap, Ordering::Relaxed);
    let spare = shared.load.core_to_spare();
    if spare {
        shared.joined_since_rewake.store(false, Ordering::Relaxed);
    }
    spare
}

/// The gap in µs until the next wake for [`Help::Awake`] jobs, given whether a worker
/// joined a job since the last one (`paid`) and the last gap: [`REWAKE_GAP`] while wakes
/// pay, doubling up to [`MAX_REWAKE_GAP`] while they do not.
fn rewake_gap(paid: bool, last_us: u64) -> u64 {
    let min = REWAKE_GAP.as_micros() as u64;
    if paid {
        min
    } else {
        (2 * last_us).clamp(min, MAX_REWAKE_GAP.as_micros() as u64)
    }
}

/// Wakes every sleeping worker.
fn wake_sleepers(shared: &Shared) {
    let _g = shared.sleep_lock.lock().unwrap_or_else(|e| e.into_inner());
    shared.wake.notify_all();
}

/// The caller's wait for the workers that joined its (now closed) job: spin, then yield,
/// then sleep until the last one leaves.
fn wait_for_joined(shared: &Shared) {
    let joined = || shared.state.load(Ordering::Acquire) & JOINED;
    let start = Instant::now();
    while joined() != 0 {
        let waited = start.elapsed();
        if waited < PAUSE_PHASE {
            std::hint::spin_loop();
        } else if waited < CALLER_SPIN {
            std::thread::yield_now();
        } else {
            shared.caller_waiting.store(true, Ordering::SeqCst);
            let mut g = shared.done_lock.lock().unwrap_or_else(|e| e.into_inner());
            while joined() != 0 {
                g = shared.done.wait(g).unwrap_or_else(|e| e.into_inner());
            }
            drop(g);
            shared.caller_waiting.store(false, Ordering::SeqCst);
            return;
        }
    }
}

impl Drop for WorkerPool {
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

/// An idle worker's adaptive spin budget (see the module docs).
struct SpinBudget {
    budget: Duration,
    max: Duration,
}

impl SpinBudget {
    fn new(max: Duration) -> SpinBudget {
        SpinBudget { budget: max, max }
    }

    /// After a wait that slept: `idle` is the whole time from the end of the pool's
    /// last job to the next one. A job that came within the largest budget would have
    /// been caught by spinning that long: spin that long again. A job that came later
    /// halves it.
    fn slept(&mut self, idle: Duration) {
        if idle <= self.max {
            self.budget = self.max;
        } else {
            self.budget = (self.budget / 2).max(MIN_SPIN.min(self.max));
        }
    }

    /// After a wait that a job ended while spinning.
    fn caught(&mut self) {
        self.budget = self.max;
    }
}

/// How an idle worker's wait for the next job ended.
enum Waited {
    /// The job word changed to an open generation other than the last one seen.
    Job(u64),
    Shutdown,
}

/// Waits for an open generation newer than `seen`: pause-spins, yield-spins while the
/// core is free and the budget lasts, then sleeps.
fn wait_for_job(shared: &Shared, seen: u64, budget: &mut SpinBudget) -> Waited {
    let open_new = || {
        let s = shared.state.load(Ordering::Acquire);
        (generation(s) != seen && s & CLOSED == 0).then_some(s)
    };
    let start = Instant::now();
    loop {
        if shared.shutdown.load(Ordering::Acquire) {
            return Waited::Shutdown;
        }
        if let Some(s) = open_new() {
            budget.caught();
            return Waited::Job(s);
        }
        let waited = start.elapsed();
        if waited >= budget.budget {
            break;
        }
        if waited < PAUSE_PHASE {
            std::hint::spin_loop();
            continue;
        }
        if shared.load.oversubscribed() {
            // A runnable thread waits for a core: do not hold one, and do not join a
            // job on a core this worker would soon lose.
            break;
        }
        let before = Instant::now();
        std::thread::yield_now();
        if before.elapsed() > CONTENDED_YIELD {
            // Another thread wanted this core: stop holding it.
            break;
        }
    }
    // Sleep: announce it, then check again under the lock, so that a job published
    // after the check above either is seen here or wakes us.
    let mut guard = shared.sleep_lock.lock().unwrap_or_else(|e| e.into_inner());
    shared.sleeping.fetch_add(1, Ordering::SeqCst);
    let result = loop {
        if shared.shutdown.load(Ordering::SeqCst) {
            break Waited::Shutdown;
        }
        let s = shared.state.load(Ordering::SeqCst);
        if generation(s) != seen && s & CLOSED == 0 {
            break Waited::Job(s);
        }
        guard = shared.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
    };
    shared.sleeping.fetch_sub(1, Ordering::SeqCst);
    drop(guard);
    // Idle since the pool's last job ended (jobs this worker slept through count: a
    // worker woken for a stream of back-to-back jobs spins the whole budget again).
    let last_end = shared.last_end_us.load(Ordering::Relaxed);
    let idle = if last_end == 0 {
        start.elapsed()
    } else {
        Duration::from_micros(now_us(shared).saturating_sub(last_end))
    };
    budget.slept(idle);
    result
}

/// A worker's life: wait for an open job, join it, run it, leave. `index` is its slot.
fn worker(shared: &Shared, index: usize) {
    let mut seen = 0u64;
    let mut budget = SpinBudget::new(shared.spin);
    let slot = &shared.slots[index];
    slot.tid
        .store(current_tid().unwrap_or(0), Ordering::Relaxed);
    shared.started.fetch_add(1, Ordering::Release);
    loop {
        let mut state = match wait_for_job(shared, seen, &mut budget) {
            Waited::Job(s) => s,
            Waited::Shutdown => return,
        };
        seen = generation(state);
        // Join: only while the job is open and still the one seen.
        let joined = loop {
            if generation(state) != seen || state & CLOSED != 0 {
                break false;
            }
            match shared.state.compare_exchange_weak(
                state,
                state + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break true,
                Err(now) => state = now,
            }
        };
        if !joined {
            continue;
        }
        if !shared.joined_since_rewake.load(Ordering::Relaxed) {
            shared.joined_since_rewake.store(true, Ordering::Relaxed);
        }
        shared
            .stats
            .joined_generation
            .store(seen, Ordering::Release);
        let slot = shared.job.load(Ordering::Acquire);
        // SAFETY: this worker joined the open generation whose job `slot` points at (it
        // was stored before the generation was published, which the successful join
        // acquired); the caller keeps it alive until every joined worker has left.
        let job: &Job = unsafe { *slot };
        if let Err(p) = catch_unwind(AssertUnwindSafe(job)) {
            let mut first = shared.panic.lock().unwrap_or_else(|e| e.into_inner());
            first.get_or_insert(p);
        }
        // Leave; the last one out wakes a caller that went to sleep waiting.
        let before = shared.state.fetch_sub(1, Ordering::SeqCst);
        if before & JOINED == 1
            && before & CLOSED != 0
            && shared.caller_waiting.load(Ordering::SeqCst)
        {
            let _g = shared.done_lock.lock().unwrap_or_else(|e| e.into_inner());
            shared.done.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A claim loop over `n` pieces that counts how often each piece ran.
    fn claims(pool: &WorkerPool, n: usize, work: impl Fn(usize) + Sync) -> Vec<usize> {
        let next = AtomicUsize::new(0);
        let seen: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
        pool.run(&|| loop {
            let c = next.fetch_add(1, Ordering::Relaxed);
            if c >= n {
                return;
            }
            work(c);
            seen[c].fetch_add(1, Ordering::Relaxed);
        });
        seen.iter().map(|s| s.load(Ordering::Relaxed)).collect()
    }

    /// The statistics count every job, and a job that saw a second participant as
    /// joined; one thread publishes no jobs.
    #[test]
    fn stats_count_jobs_and_the_jobs_a_worker_joined() {
        let one = WorkerPool::new(1, Duration::from_millis(1)).unwrap();
        claims(&one, 10, |_| {});
        assert_eq!(one.stats(), PoolStats::default());

        let pool = WorkerPool::new(2, Duration::from_millis(20)).unwrap();
        let mut saw_two = 0u64;
        for _ in 0..20 {
            // A job whose caller waits (a bounded time) for a second participant.
            let inside = AtomicUsize::new(0);
            let two = AtomicBool::new(false);
            pool.run(&|| {
                inside.fetch_add(1, Ordering::SeqCst);
                let start = Instant::now();
                while start.elapsed() < Duration::from_millis(20) {
                    if inside.load(Ordering::SeqCst) >= 2 {
                        two.store(true, Ordering::SeqCst);
                        break;
                    }
                    std::hint::spin_loop();
                }
            });
            saw_two += u64::from(two.load(Ordering::SeqCst));
        }
        let s = pool.stats();
        assert_eq!(s.jobs, 20);
        assert_eq!(s.contended, 0);
        assert!(
            s.joined >= saw_two && s.joined <= s.jobs,
            "{s:?}, saw two {saw_two}"
        );
        assert!(s.refused <= s.jobs);
        assert_eq!(s.alone(), s.jobs - s.joined);
        let later = PoolStats {
            jobs: s.jobs + 3,
            joined: s.joined + 1,
            refused: s.refused,
            contended: 2,
        };
        assert_eq!(
            later.since(&s),
            PoolStats {
                jobs: 3,
                joined: 1,
                refused: 0,
                contended: 2
            }
        );
        assert_eq!(later.since(&s).alone(), 4);
        assert_eq!(s.plus(&later.since(&s)), later);
    }

    #[test]
    fn every_piece_runs_once() {
        for threads in [1, 2, 4] {
            for spin in [Duration::ZERO, Duration::from_millis(1)] {
                let pool = WorkerPool::new(threads, spin).unwrap();
                for round in 0..300 {
                    let n = round % 17;
                    assert_eq!(claims(&pool, n, |_| {}), vec![1; n], "round {round}");
                    if round % 50 == 0 {
                        // Let workers fall asleep now and then.
                        std::thread::sleep(Duration::from_millis(3));
                    }
                }
            }
        }
    }

    #[test]
    fn workers_join_when_they_are_idle() {
        let pool = WorkerPool::new(2, Duration::from_millis(50)).unwrap();
        let caller = std::thread::current().id();
        let helped = AtomicUsize::new(0);
        for _ in 0..50 {
            claims(&pool, 64, |_| {
                if std::thread::current().id() != caller {
                    helped.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_micros(20));
            });
        }
        assert!(helped.load(Ordering::Relaxed) > 0, "no worker ever joined");
    }

    #[test]
    fn the_caller_does_not_wait_for_a_worker_that_never_joins() {
        // Another thread's job holds the pool (and maybe its worker) indefinitely: a
        // second caller finds the pool busy and does all its work alone, at once.
        let pool = Arc::new(WorkerPool::new(2, Duration::from_millis(1)).unwrap());
        let release = Arc::new(AtomicBool::new(false));
        let entered = Arc::new(AtomicUsize::new(0));
        let blocker = {
            let (pool, release, entered) = (
                Arc::clone(&pool),
                Arc::clone(&release),
                Arc::clone(&entered),
            );
            std::thread::spawn(move || {
                pool.run(&|| {
                    entered.fetch_add(1, Ordering::SeqCst);
                    while !release.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_micros(100));
                    }
                })
            })
        };
        while entered.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
        let start = Instant::now();
        assert_eq!(claims(&pool, 10, |_| {}), vec![1; 10]);
        assert!(start.elapsed() < Duration::from_millis(500));
        release.store(true, Ordering::SeqCst);
        blocker.join().unwrap();
    }

    #[test]
    fn a_worker_panic_reaches_the_caller_and_the_pool_goes_on() {
        let pool = WorkerPool::new(3, Duration::from_millis(5)).unwrap();
        let caller = std::thread::current().id();
        // Retry until a worker joined and panicked (joining is opportunistic).
        let mut worker_panicked = false;
        for _ in 0..200 {
            let r = catch_unwind(AssertUnwindSafe(|| {
                claims(&pool, 64, |_| {
                    if std::thread::current().id() != caller {
                        panic!("a worker fails");
                    }
                    std::thread::sleep(Duration::from_micros(10));
                })
            }));
            if r.is_err() {
                worker_panicked = true;
                break;
            }
        }
        assert!(worker_panicked);
        assert_eq!(claims(&pool, 7, |_| {}), vec![1; 7]);
        // A panic in the caller's own call also closes the job and leaves the pool usable.
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(&|| panic!("the caller fails"))
        }));
        assert!(r.is_err());
        assert_eq!(claims(&pool, 7, |_| {}), vec![1; 7]);
    }

    #[test]
    fn concurrent_callers_each_do_all_their_work() {
        let pool = Arc::new(WorkerPool::new(2, Duration::from_micros(100)).unwrap());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let pool = Arc::clone(&pool);
                std::thread::spawn(move || {
                    for n in 0..200 {
                        assert_eq!(claims(&pool, n % 13, |_| {}), vec![1; n % 13]);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }

    #[test]
    fn the_spin_budget_adapts_within_its_bounds() {
        let max = Duration::from_micros(100);
        let mut b = SpinBudget::new(max);
        b.slept(Duration::from_millis(10));
        assert_eq!(b.budget, max / 2);
        for _ in 0..20 {
            b.slept(Duration::from_millis(10));
        }
        assert_eq!(b.budget, MIN_SPIN);
        // A job within the spin time: spinning that long would have caught it.
        b.slept(Duration::from_micros(60));
        assert_eq!(b.budget, max);
        b.slept(Duration::from_millis(1));
        b.caught();
        assert_eq!(b.budget, max);
    }

    /// A job that starts while another thread holds the second core leaves the sleeping
    /// worker asleep; once the core is idle, the caller's next look between pieces wakes
    /// it and it takes part of the job.
    #[test]
    fn a_refused_wake_is_retried_between_pieces() {
        static BUSY: AtomicBool = AtomicBool::new(true);
        fn running() -> Option<u64> {
            Some(if BUSY.load(Ordering::SeqCst) { 2 } else { 1 })
        }
        // Busy from the first reading on (no persistence time).
        let load = SystemLoad::with_reader(2, running, Duration::ZERO);
        let pool = WorkerPool::with_load(2, Duration::ZERO, load).unwrap();
        // Let the worker fall asleep.
        while pool.shared.sleeping.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let caller = std::thread::current().id();
        let next = AtomicUsize::new(0);
        let by_worker = AtomicUsize::new(0);
        pool.run(&|| loop {
            let c = next.fetch_add(1, Ordering::Relaxed);
            if c >= 400 {
                return;
            }
            if c == 20 {
                // The other thread is gone.
                BUSY.store(false, Ordering::SeqCst);
            }
            std::thread::sleep(Duration::from_micros(200));
            if std::thread::current().id() != caller {
                by_worker.fetch_add(1, Ordering::Relaxed);
            }
            pool.late_wake();
        });
        let worker = by_worker.load(Ordering::Relaxed);
        assert!(worker > 0, "the worker took no piece of 400");
        assert!(!pool.shared.refused.load(Ordering::SeqCst));
    }

    #[test]
    fn the_rewake_gap_grows_while_wakes_do_not_pay() {
        let min = REWAKE_GAP.as_micros() as u64;
        let max = MAX_REWAKE_GAP.as_micros() as u64;
        assert_eq!(rewake_gap(true, max), min);
        assert_eq!(rewake_gap(false, min), 2 * min);
        assert_eq!(rewake_gap(false, 0), min);
        let mut gap = min;
        for _ in 0..20 {
            gap = rewake_gap(false, gap);
        }
        assert_eq!(gap, max);
        assert_eq!(rewake_gap(true, gap), min);
    }

    /// A worker asleep while medium-sized jobs ([`Help::Awake`]) come back to back is
    /// woken by one of them (at most once per gap) and takes part in the later ones;
    /// without that it never saw one again and they all ran on the caller alone.
    #[test]
    fn back_to_back_jobs_wake_a_sleeping_worker() {
        fn idle() -> Option<u64> {
            Some(1)
        }
        let load = SystemLoad::with_reader(2, idle, Duration::ZERO);
        let pool = WorkerPool::with_load(2, Duration::from_millis(5), load).unwrap();
        while pool.shared.sleeping.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let caller = std::thread::current().id();
        let by_worker = AtomicUsize::new(0);
        let job = |next: &AtomicUsize| loop {
            if next.fetch_add(1, Ordering::Relaxed) >= 20 {
                return;
            }
            std::thread::sleep(Duration::from_micros(100));
            if std::thread::current().id() != caller {
                by_worker.fetch_add(1, Ordering::Relaxed);
            }
        };
        // The first job has no job before it: nothing says jobs come back to back.
        let next = AtomicUsize::new(0);
        pool.run_with(&|| job(&next), Help::Awake);
        assert_eq!(pool.shared.next_rewake_us.load(Ordering::SeqCst), 0);
        for _ in 0..50 {
            let next = AtomicUsize::new(0);
            pool.run_with(&|| job(&next), Help::Awake);
        }
        assert!(pool.shared.next_rewake_us.load(Ordering::SeqCst) > 0);
        assert!(
            by_worker.load(Ordering::Relaxed) > 0,
            "the worker took no piece of 50 back-to-back jobs"
        );
    }
}
