//! Whether the machine has a core to spare right now: the count of runnable threads
//! (the fourth field of `/proc/loadavg`, `running/total`) against the online cores.
//!
//! The pool asks before it wakes a sleeping worker: on an oversubscribed machine a woken
//! worker only takes a time slice from someone else (often the caller that woke it), and
//! a worker descheduled in the middle of a chunk makes the caller wait for it. An idle
//! worker asks too, while it spins: when more threads are runnable than there are cores
//! it stops spinning and sleeps, so that it neither holds a core another thread waits for
//! nor joins a job on a core it will lose. Reading the file costs a few microseconds, so
//! the reading is cached for [`REFRESH`].
//!
//! Where the file is missing (not Linux) or unreadable, every core counts as spare, and
//! the pool behaves as if the machine were quiet.
//!
//! ```
//! use sparsile_runtime::jit::system_load::parse_running;
//! assert_eq!(parse_running("0.52 0.58 0.59 3/467 12345\n"), Some(3));
//! assert_eq!(parse_running("garbage"), None);
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long one reading of the load is trusted.
pub const REFRESH: Duration = Duration::from_millis(2);

/// The runnable-thread count in the text of `/proc/loadavg`.
pub fn parse_running(text: &str) -> Option<u64> {
    let field = text.split_whitespace().nth(3)?;
    field.split('/').next()?.parse().ok()
}

/// A cached reading of the runnable-thread count, and the answers drawn from it.
#[derive(Debug)]
pub struct SystemLoad {
    epoch: Instant,
    /// `(reading time in µs since epoch + 1) << 24 | running`, 0 before the first
    /// reading; `running` is [`UNKNOWN`] when the file could not be read.
    cached: AtomicU64,
    cores: u64,
}

/// The running count stored when `/proc/loadavg` cannot be read.
const UNKNOWN: u64 = (1 << 24) - 1;

impl Default for SystemLoad {
    fn default() -> Self {
        SystemLoad::new()
    }
}

impl SystemLoad {
    pub fn new() -> SystemLoad {
        // SAFETY: sysconf has no preconditions.
        #[cfg(unix)]
        let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        #[cfg(not(unix))]
        let cores = 0;
        SystemLoad {
            epoch: Instant::now(),
            cached: AtomicU64::new(0),
            cores: if cores > 0 {
                cores as u64
            } else {
                std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
            },
        }
    }

    /// The runnable threads now (a reading at most [`REFRESH`] old), `None` where the
    /// count cannot be read.
    fn running(&self) -> Option<u64> {
        let now = self.epoch.elapsed().as_micros() as u64 + 1;
        let c = self.cached.load(Ordering::Relaxed);
        let running = if c != 0 && now.saturating_sub(c >> 24) < REFRESH.as_micros() as u64 {
            c & UNKNOWN
        } else {
            let running = std::fs::read_to_string("/proc/loadavg")
                .ok()
                .as_deref()
                .and_then(parse_running)
                .map_or(UNKNOWN, |r| r.min(UNKNOWN - 1));
            self.cached.store(now << 24 | running, Ordering::Relaxed);
            running
        };
        (running != UNKNOWN).then_some(running)
    }

    /// Whether fewer threads are runnable than there are online cores, besides the
    /// calling thread (which is runnable itself and counts in the reading).
    pub fn core_to_spare(&self) -> bool {
        self.running().is_none_or(|running| running < self.cores)
    }

    /// Whether more threads are runnable than there are online cores (the asking
    /// thread included): some runnable thread is waiting for a core.
    pub fn oversubscribed(&self) -> bool {
        self.running().is_some_and(|running| running > self.cores)
    }
}
