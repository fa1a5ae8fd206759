//! Keeping pool workers off the calling thread's core.
//!
//! Purpose: a worker queued on the same core as the caller of a job cannot help it. The
//! caller runs the job's claim loop without yielding, so the worker waits for a time
//! slice, and Linux does not move it to the idle core: the load balancer leaves a thread
//! that ran a moment ago ("cache hot") where it is, and on a virtual machine the idle
//! core is a halted virtual CPU that the host must schedule first. Seen on the project's
//! 2-core virtual machine with a per-call trace of the pool (SpMM K = 32 on a 2,048-row
//! pruned weight, 2 threads, 20 calls per process): in about half the processes the
//! worker started on the caller's core, ran once and then not again for the whole run
//! (5 ms), every call taking the one-thread time (0.19 ms instead of 0.10 ms).
//!
//! So a caller publishing a job narrows the affinity of every worker to the pool's cores
//! minus its own ([`current_cpu`], [`Cores::keep_off`]); the kernel moves a queued
//! thread at once. It does so again only when its core differs from the one last left
//! out (one system call per worker each time the caller moves). Looking first at where a
//! worker last ran was not enough: a worker the scheduler moved onto the caller's core
//! while it waited to run (during a burst of other activity) has not run there, so it
//! could not say so, and whole rounds of a benchmark ran at one-thread speed. The
//! narrowed set stays until a caller on another core needs another (it is always the
//! pool's cores minus one). Where the process may run on one core only, or off Linux,
//! nothing changes.
//!
//! ```
//! use sparsile_runtime::jit::cpu_placement::{current_cpu, current_tid, Cores};
//! let cores = Cores::of_current_thread();
//! if let (Some(cpu), Some(tid)) = (current_cpu(), current_tid()) {
//!     // Keeping this very thread off its core moves it (where another core is allowed).
//!     if cores.keep_off(tid, cpu) {
//!         assert_ne!(current_cpu(), Some(cpu));
//!     }
//! }
//! ```

/// The core the calling thread runs on, where the system says.
pub fn current_cpu() -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_getcpu has no preconditions.
        let cpu = unsafe { libc::sched_getcpu() };
        u32::try_from(cpu).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The calling thread's kernel id, where the system has one.
pub fn current_tid() -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        i32::try_from(tid).ok().filter(|&t| t > 0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The cores a pool's threads may run on (the creating thread's affinity).
pub struct Cores {
    #[cfg(target_os = "linux")]
    allowed: Option<libc::cpu_set_t>,
}

impl std::fmt::Debug for Cores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cores").finish_non_exhaustive()
    }
}

impl Cores {
    /// The calling thread's allowed cores as they are now.
    pub fn of_current_thread() -> Cores {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: a zeroed cpu_set_t is a valid empty set; the size is its own.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            let ok = unsafe {
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set)
            } == 0;
            Cores {
                allowed: ok.then_some(set),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            Cores {}
        }
    }

    /// Lets thread `tid` (of this process) run on these cores except `cpu`, and returns
    /// `true`; returns `false` (changing nothing) when no other core is allowed or the
    /// system refuses.
    pub fn keep_off(&self, tid: i32, cpu: u32) -> bool {
        #[cfg(target_os = "linux")]
        {
            let Some(mut set) = self.allowed else {
                return false;
            };
            let cpu = cpu as usize;
            if cpu < libc::CPU_SETSIZE as usize {
                // SAFETY: `cpu` is within the set.
                unsafe { libc::CPU_CLR(cpu, &mut set) };
            }
            // SAFETY: reads the set.
            if unsafe { libc::CPU_COUNT(&set) } == 0 {
                return false;
            }
            set_affinity(tid, &set)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (tid, cpu);
            false
        }
    }
}

#[cfg(target_os = "linux")]
fn set_affinity(tid: i32, set: &libc::cpu_set_t) -> bool {
    // SAFETY: a valid set of its own size; `tid` names a thread of this process (a
    // stale id fails with ESRCH, changing nothing).
    unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), set) == 0 }
}
