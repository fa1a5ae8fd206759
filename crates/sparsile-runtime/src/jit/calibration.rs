//! How long one unit of a phase's estimated work takes, learned from the phase's runs.
//!
//! `sparsile_phase_work` counts leaf statements, which rank work but do not time it: a
//! statement of a vectorised dense loop takes a fraction of a nanosecond, one that gathers
//! from a large operand several. Each parallel phase of a loaded kernel therefore keeps
//! the time per unit measured on its earlier runs (the sum of the time every participant
//! spent in its chunks, over the work), averaged with weight 1/4 for the newest run, and
//! the launcher turns work into an estimated single-thread time with it. Before the first
//! run it assumes [`DEFAULT_PS_PER_UNIT`].
//!
//! ```
//! use sparsile_runtime::jit::PhaseCalibration;
//! let c = PhaseCalibration::default();
//! assert_eq!(c.serial_ns(1000), 1000.0); // 1 ns per unit until measured
//! c.record(1000, 4000);                  // a run: 1000 units in 4 µs of thread time
//! assert_eq!(c.serial_ns(1000), 4000.0);
//! c.record(1000, 8000);
//! assert_eq!(c.serial_ns(1000), 5000.0); // 3/4 · 4 + 1/4 · 8
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

/// The assumed time per work unit before a phase has run, in picoseconds.
pub const DEFAULT_PS_PER_UNIT: u64 = 1000;

/// The learned time per work unit of one phase (see the module docs).
#[derive(Debug, Default)]
pub struct PhaseCalibration {
    /// Picoseconds per unit; 0 until the first run.
    ps_per_unit: AtomicU64,
}

impl PhaseCalibration {
    /// The estimated single-thread time of `work` units, in nanoseconds.
    pub fn serial_ns(&self, work: i64) -> f64 {
        let ps = match self.ps_per_unit.load(Ordering::Relaxed) {
            0 => DEFAULT_PS_PER_UNIT,
            ps => ps,
        };
        work.max(0) as f64 * ps as f64 / 1000.0
    }

    /// Records a run of `work` units that kept threads busy for `busy_ns` in all.
    pub fn record(&self, work: i64, busy_ns: u64) {
        if work <= 0 {
            return;
        }
        let measured = ((busy_ns as f64 * 1000.0 / work as f64) as u64).max(1);
        let old = self.ps_per_unit.load(Ordering::Relaxed);
        let new = if old == 0 {
            measured
        } else {
            (old * 3 + measured) / 4
        };
        self.ps_per_unit.store(new.max(1), Ordering::Relaxed);
    }
}
