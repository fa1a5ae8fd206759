//! Whether the machine has a core to spare right now: the count of runnable threads
//! (the fourth field of `/proc/loadavg`, `running/total`) against the online cores.
//!
//! The pool asks before it wakes a sleeping worker: on an oversubscribed machine a woken
//! worker only takes a time slice from someone else (often the caller that woke it), and
//! a worker descheduled in the middle of a chunk makes the caller wait for it. Reading the
//! file costs a few microseconds, so the answer is cached for [`REFRESH`].
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

/// A cached answer to "is a core idle?".
#[derive(Debug)]
pub struct SystemLoad {
    epoch: Instant,
    /// `(reading time in µs since epoch + 1) << 1 | spare`, 0 before the first reading.
    cached: AtomicU64,
    cores: u64,
}

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

    /// Whether fewer threads are runnable than there are online cores, besides the
    /// calling thread (which is runnable itself and counts in the reading).
    pub fn core_to_spare(&self) -> bool {
        let now = self.epoch.elapsed().as_micros() as u64 + 1;
        let c = self.cached.load(Ordering::Relaxed);
        if c != 0 && now.saturating_sub(c >> 1) < REFRESH.as_micros() as u64 {
            return c & 1 == 1;
        }
        let spare = match std::fs::read_to_string("/proc/loadavg")
            .ok()
            .as_deref()
            .and_then(parse_running)
        {
            Some(running) => running < self.cores,
            None => true,
        };
        self.cached
            .store(now << 1 | u64::from(spare), Ordering::Relaxed);
        spare
    }
}
