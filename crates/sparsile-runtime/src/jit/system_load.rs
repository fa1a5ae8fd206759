//! Whether the machine has a core to spare right now: the count of runnable threads
//! (the fourth field of `/proc/loadavg`, `running/total`) against the online cores.
//!
//! The pool asks before it wakes a sleeping worker: on an oversubscribed machine a woken
//! worker only takes a time slice from someone else (often the caller that woke it), and
//! a worker descheduled in the middle of a chunk makes the caller wait for it. An idle
//! worker asks too, while it spins: when more threads are runnable than there are cores
//! it stops spinning and sleeps, so that it neither holds a core another thread waits for
//! nor joins a job on a core it will lose. A reading costs about a microsecond (the file
//! is kept open), still too much for every turn of a spin loop, so a spinning worker's
//! readings are cached for [`REFRESH`]. The caller's question reads
//! the file afresh: a cached reading may have been taken by a worker that counted itself
//! runnable and has gone to sleep since, and that stale count made every other call of a
//! kernel called back to back run on the caller alone (the worker read "2 runnable" on a
//! 2-core machine while it spun after a call, slept, and the next call, within 2 ms,
//! believed no core was free).
//!
//! A machine counts as busy only once other threads have been seen runnable for
//! [`PERSIST`] without a reading in between that found a core idle. Short bursts of
//! activity (a daemon waking, memory compaction, a process starting or exiting) lasted up
//! to tens of milliseconds on a quiet virtual machine; refusing help through them ran
//! whole rounds of a benchmark on the caller alone, at half speed. A process that keeps a
//! core busy is still given way to, after its first [`PERSIST`].
//!
//! Once the machine counts as busy, the caller's verdict holds for [`BUSY_HOLD`] before
//! its question reads the file again: on a machine kept busy, each job had paid two
//! readings to be told the same (Cora SpMV, a 40 µs call, took 44-46 µs at two threads
//! beside a busy process). A look during a call ([`SystemLoad::core_idle_now`]) still
//! reads afresh, and one that finds a core idle ends the verdict at once.
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
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long one reading of the load is trusted.
pub const REFRESH: Duration = Duration::from_millis(2);

/// How long other threads must stay runnable before the machine counts as busy.
pub const PERSIST: Duration = Duration::from_millis(200);

/// How long the caller's busy verdict holds before its question reads the load again.
pub const BUSY_HOLD: Duration = Duration::from_millis(1);

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
    /// When the current run of busy readings began (µs since epoch + 1), 0 when the
    /// last reading found a core to spare.
    busy_since: AtomicU64,
    /// [`PERSIST`] in µs (shorter in tests).
    persist_us: u64,
    /// Until when (µs since epoch + 1) the caller's busy verdict holds; 0 when none does.
    busy_until: AtomicU64,
    /// [`BUSY_HOLD`] in µs (0, none, unless a test asks for one).
    hold_us: u64,
    /// Reads the runnable-thread count (`/proc/loadavg`; replaced in tests).
    read: fn() -> Option<u64>,
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
            busy_since: AtomicU64::new(0),
            persist_us: PERSIST.as_micros() as u64,
            busy_until: AtomicU64::new(0),
            hold_us: BUSY_HOLD.as_micros() as u64,
            read: read_loadavg,
        }
    }

    /// A load of `cores` cores whose runnable count comes from `read`, busy after
    /// `persist` of busy readings (for tests).
    #[cfg(test)]
    pub(crate) fn with_reader(
        cores: u64,
        read: fn() -> Option<u64>,
        persist: Duration,
    ) -> SystemLoad {
        SystemLoad {
            epoch: Instant::now(),
            cached: AtomicU64::new(0),
            cores: cores.max(1),
            busy_since: AtomicU64::new(0),
            persist_us: persist.as_micros() as u64,
            busy_until: AtomicU64::new(0),
            hold_us: 0,
            read,
        }
    }

    /// This load with a busy verdict that holds for `hold` (for tests).
    #[cfg(test)]
    pub(crate) fn holding(mut self, hold: Duration) -> SystemLoad {
        self.hold_us = hold.as_micros() as u64;
        self
    }

    /// The runnable threads now (a reading at most [`REFRESH`] old unless `fresh`),
    /// `None` where the count cannot be read.
    fn running(&self, fresh: bool) -> Option<u64> {
        let now = self.epoch.elapsed().as_micros() as u64 + 1;
        let c = self.cached.load(Ordering::Relaxed);
        let running =
            if !fresh && c != 0 && now.saturating_sub(c >> 24) < REFRESH.as_micros() as u64 {
                c & UNKNOWN
            } else {
                let running = (self.read)().map_or(UNKNOWN, |r| r.min(UNKNOWN - 1));
                self.cached.store(now << 24 | running, Ordering::Relaxed);
                running
            };
        (running != UNKNOWN).then_some(running)
    }

    /// Whether fewer threads are runnable than there are online cores, besides the
    /// calling thread (which is runnable itself and counts in the reading). Fresh
    /// readings (see the module docs): busy when two in a row say so, and readings have
    /// said so for [`PERSIST`]; that verdict then holds for [`BUSY_HOLD`] without
    /// reading.
    pub fn core_to_spare(&self) -> bool {
        let now = self.epoch.elapsed().as_micros() as u64 + 1;
        if now < self.busy_until.load(Ordering::Relaxed) {
            return false;
        }
        // A thread that runs for a few microseconds (a kernel worker, a short process)
        // is not a reason to leave a core idle for a whole call: busy means two readings
        // in a row say so...
        if self.core_idle_now() || self.core_idle_now() {
            return true;
        }
        // ...and that readings have said so for a while.
        let since =
            match self
                .busy_since
                .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => now,
                Err(since) => since,
            };
        let busy = now.saturating_sub(since) >= self.persist_us;
        if busy {
            self.busy_until.store(now + self.hold_us, Ordering::Relaxed);
        }
        !busy
    }

    /// Whether one fresh reading finds fewer threads runnable than there are online
    /// cores besides the caller: for looking again during a call that
    /// [`core_to_spare`](Self::core_to_spare) refused help, where one reading that finds
    /// a core idle is enough and a busy one costs only itself.
    pub fn core_idle_now(&self) -> bool {
        let spare = self
            .running(true)
            .is_none_or(|running| running < self.cores);
        if spare {
            self.busy_since.store(0, Ordering::Relaxed);
            self.busy_until.store(0, Ordering::Relaxed);
        }
        spare
    }

    /// Whether more threads are runnable than there are online cores (the asking
    /// thread included): some runnable thread is waiting for a core.
    pub fn oversubscribed(&self) -> bool {
        self.running(false)
            .is_some_and(|running| running > self.cores)
    }
}

/// The runnable-thread count of `/proc/loadavg`, `None` where it cannot be read. The
/// file stays open and each reading is one positioned read from its start (1.3 µs on
/// the project's virtual machine, against 5.7 µs to open, read and close it: a call
/// that a busy machine makes look several times paid tens of microseconds).
fn read_loadavg() -> Option<u64> {
    static FILE: OnceLock<Option<std::fs::File>> = OnceLock::new();
    let file = FILE
        .get_or_init(|| std::fs::File::open("/proc/loadavg").ok())
        .as_ref()?;
    let mut buf = [0u8; 128];
    let n = read_start(file, &mut buf)?;
    std::str::from_utf8(&buf[..n]).ok().and_then(parse_running)
}

/// Reads the start of `file` into `buf` without moving a shared position.
#[cfg(unix)]
fn read_start(file: &std::fs::File, buf: &mut [u8]) -> Option<usize> {
    use std::os::unix::fs::FileExt;
    file.read_at(buf, 0).ok()
}

#[cfg(not(unix))]
fn read_start(_file: &std::fs::File, _buf: &mut [u8]) -> Option<usize> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kept-open file gives a count on every reading (at least the reader itself
    /// is runnable), where the file exists.
    #[test]
    fn repeated_readings_of_the_real_file() {
        if std::fs::metadata("/proc/loadavg").is_err() {
            return;
        }
        for _ in 0..3 {
            assert!(read_loadavg().is_some_and(|running| running >= 1));
        }
    }

    static RUNNING: AtomicU64 = AtomicU64::new(0);

    fn fake() -> Option<u64> {
        Some(RUNNING.load(Ordering::SeqCst))
    }

    /// A spinning worker's reading counted itself; it went to sleep since. The caller's
    /// question right after must not be answered from that reading.
    #[test]
    fn the_callers_question_reads_afresh() {
        let load = SystemLoad::with_reader(2, fake, Duration::ZERO);
        RUNNING.store(3, Ordering::SeqCst);
        assert!(load.oversubscribed(), "3 runnable on 2 cores");
        // Within REFRESH: the worker's question keeps the cached reading...
        RUNNING.store(1, Ordering::SeqCst);
        assert!(load.oversubscribed(), "cached for the spinning worker");
        // ...the caller's does not: only the caller runs now.
        assert!(load.core_to_spare());
        // And its fresh reading serves the next cached question.
        assert!(!load.oversubscribed());
        RUNNING.store(2, Ordering::SeqCst);
        assert!(!load.core_to_spare(), "the caller and one other thread");
        // A thread seen in one reading only leaves a core to spare.
        static CALLS: AtomicU64 = AtomicU64::new(0);
        fn transient() -> Option<u64> {
            Some(if CALLS.fetch_add(1, Ordering::SeqCst) == 0 {
                2
            } else {
                1
            })
        }
        let load = SystemLoad::with_reader(2, transient, Duration::ZERO);
        assert!(load.core_to_spare());
        assert_eq!(CALLS.load(Ordering::SeqCst), 2);
    }

    /// Other threads runnable for less than the persistence time leave a core to spare;
    /// once they have been for longer, the machine is busy; an idle reading starts over.
    #[test]
    fn a_burst_of_activity_is_not_a_busy_machine() {
        static BUSY: AtomicU64 = AtomicU64::new(0);
        fn reader() -> Option<u64> {
            Some(BUSY.load(Ordering::SeqCst))
        }
        let load = SystemLoad::with_reader(2, reader, Duration::from_millis(30));
        BUSY.store(3, Ordering::SeqCst);
        assert!(load.core_to_spare(), "busy for less than 30 ms");
        std::thread::sleep(Duration::from_millis(40));
        assert!(!load.core_to_spare(), "busy for 40 ms");
        assert!(!load.core_to_spare());
        BUSY.store(1, Ordering::SeqCst);
        assert!(load.core_to_spare(), "idle again");
        BUSY.store(2, Ordering::SeqCst);
        assert!(load.core_to_spare(), "a new burst");
    }

    /// Once the machine is busy, the caller's verdict holds for the hold time without
    /// reading; a look that finds a core idle ends it at once.
    #[test]
    fn a_busy_verdict_holds_without_reading() {
        static BUSY: AtomicU64 = AtomicU64::new(3);
        static READS: AtomicU64 = AtomicU64::new(0);
        fn reader() -> Option<u64> {
            READS.fetch_add(1, Ordering::SeqCst);
            Some(BUSY.load(Ordering::SeqCst))
        }
        let load =
            SystemLoad::with_reader(2, reader, Duration::ZERO).holding(Duration::from_secs(60));
        assert!(!load.core_to_spare(), "busy, no persistence time");
        let reads = READS.load(Ordering::SeqCst);
        assert_eq!(reads, 2, "two readings say busy");
        for _ in 0..10 {
            assert!(!load.core_to_spare());
        }
        assert_eq!(READS.load(Ordering::SeqCst), reads, "the verdict holds");
        BUSY.store(1, Ordering::SeqCst);
        assert!(
            !load.core_to_spare(),
            "held even though the other thread is gone"
        );
        assert!(load.core_idle_now(), "a look during a call reads afresh");
        assert!(load.core_to_spare(), "and ended the verdict");
        // Without a hold every question reads.
        let load = SystemLoad::with_reader(2, reader, Duration::ZERO);
        BUSY.store(3, Ordering::SeqCst);
        let before = READS.load(Ordering::SeqCst);
        assert!(!load.core_to_spare());
        assert!(!load.core_to_spare());
        assert_eq!(READS.load(Ordering::SeqCst), before + 4);
    }
}
