//! Timing a GPU kernel on the device: [`CudaKernel::bench`] runs it repeatedly on
//! operands that stay on the device and times each run with CUDA events.
//!
//! The protocol, per call:
//! 1. Bind the inputs as [`CudaKernel::run`] does (same checks, same errors), compute the
//!    grids on the host, copy the inputs to the device once, and allocate outputs, temps
//!    and `scratch` buffers zero-filled.
//! 2. `warmup` untimed runs, then `repeat` timed ones. Before every run but the first,
//!    the buffers a run needs to find at zero are set to zero again: every temp and
//!    scratch buffer, and the outputs the program does not initialise itself (an output
//!    whose `init` the kernels carry out, such as the zeroing launch of an atomic
//!    schedule, is left alone; see `kernel/initialised.rs`). The resets are queued
//!    before a run's start event, so they are not timed.
//! 3. A timed run is the device time between an event recorded before its first launch
//!    and one recorded after its last, on the device's stream. Runs are queued without
//!    waiting for each other: the host reads the events of [`EVENT_BATCH`] runs at a
//!    time while the next batch is already queued, so the device is kept busy and a
//!    run's time is the device's time for it, not the host's time to launch it, unless
//!    launching takes longer than running (then the gap shows, as it would in an
//!    application).
//! 4. The outputs of the last run are copied back, for checking.
//!
//! What it measures: kernel time on the device with the operands resident in device
//! memory and, for operands that fit, warm in the L2 cache from the run before (as a
//! training loop calling the same operator sees them). Not included: copies between
//! host and device, binding and checking the inputs, computing grids, compiling.
//!
//! ```no_run
//! # fn demo(kernel: &sparsile_runtime::cuda::CudaKernel,
//! #         inputs: &std::collections::HashMap<String, sparsile_formats::SparseTensor<'static>>)
//! #         -> Result<(), sparsile_runtime::cuda::CudaError> {
//! use sparsile_runtime::cuda::BenchOptions;
//! let timed = kernel.bench(inputs, &Default::default(), &BenchOptions { warmup: 10, repeat: 100 })?;
//! let mut ms: Vec<f64> = timed.times.iter().map(|t| t * 1e3).collect();
//! ms.sort_by(f64::total_cmp);
//! println!("median {:.3} ms over {} runs of {} launches", ms[ms.len() / 2], ms.len(), timed.launches);
//! # Ok(()) }
//! ```

use std::collections::HashMap;

use sparsile_formats::SparseTensor;

use super::device::CudaEvent;
use super::kernel::Staged;
use super::{CudaError, CudaKernel};
use crate::interp::Outputs;
use crate::kernel::initialised::initialised_outputs;
use crate::KernelOptions;

/// How many timed runs the host reads at a time (with as many more queued behind them).
pub const EVENT_BATCH: usize = 64;

/// The runs of [`CudaKernel::bench`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BenchOptions {
    /// Untimed runs before the timed ones (0 or more).
    pub warmup: usize,
    /// Timed runs (at least 1).
    pub repeat: usize,
}

impl Default for BenchOptions {
    fn default() -> BenchOptions {
        BenchOptions {
            warmup: 10,
            repeat: 100,
        }
    }
}

/// What [`CudaKernel::bench`] measured.
#[derive(Debug)]
pub struct DeviceTimes {
    /// Each timed run's device time, in seconds, in run order.
    pub times: Vec<f64>,
    /// The outputs of the last run, by name (as [`CudaKernel::run`] returns them).
    pub outputs: Outputs,
    /// Launches per run (those whose grid is not empty).
    pub launches: usize,
    /// Bytes copied to the device, once, before the runs.
    pub upload_bytes: usize,
    /// Bytes set to zero before each run after the first (untimed).
    pub reset_bytes: usize,
}

impl CudaKernel {
    /// Runs the kernel `options.warmup + options.repeat` times on `inputs` kept on the
    /// device and times the last `repeat` runs with device events (see the module docs).
    /// Errors are those of [`run`](Self::run), plus [`CudaError::Misuse`] for
    /// `repeat == 0`; a kernel that faults in any run is reported, not timed.
    pub fn bench(
        &self,
        inputs: &HashMap<String, SparseTensor<'_>>,
        options: &KernelOptions,
        bench: &BenchOptions,
    ) -> Result<DeviceTimes, CudaError> {
        if bench.repeat == 0 {
            return Err(CudaError::Misuse {
                reason: "a benchmark needs at least one timed run".to_string(),
            });
        }
        let (mut bound, params) = self.bind_inputs(inputs, options)?;
        let staged = self.stage(&bound, inputs, &params)?;
        let reset = reset_buffers(self, &staged);
        let reset_bytes = reset
            .iter()
            .filter_map(|&b| staged.buffers[b].as_ref())
            .map(|d| d.bytes())
            .sum();
        let device = self.device();

        // Two batches of events in flight: the host reads one batch while the device
        // still has the next queued, so no run starts on an idle device for want of work.
        let batch = bench.repeat.min(EVENT_BATCH);
        let ring = if bench.repeat > batch {
            2 * batch
        } else {
            batch
        };
        let events = (0..ring)
            .map(|_| Ok((device.event()?, device.event()?)))
            .collect::<Result<Vec<(CudaEvent, CudaEvent)>, CudaError>>()?;
        let mut times = Vec::with_capacity(bench.repeat);
        for run in 0..bench.warmup + bench.repeat {
            if run > 0 {
                for &b in &reset {
                    if let Some(buffer) = &staged.buffers[b] {
                        device.zero(buffer)?;
                    }
                }
            }
            let Some(timed) = run.checked_sub(bench.warmup) else {
                self.queue(&staged, &params)?;
                continue;
            };
            let (start, end) = &events[timed % ring];
            device.record(start)?;
            self.queue(&staged, &params)?;
            device.record(end)?;
            if timed + 1 - times.len() == ring {
                read_times(self, &events, times.len()..times.len() + batch, &mut times)?;
            }
        }
        read_times(self, &events, times.len()..bench.repeat, &mut times)?;
        device.synchronize()?;
        let launches = staged.launches.len();
        let upload_bytes = staged.upload_bytes;
        let outputs = self.finish(staged, &mut bound)?;
        Ok(DeviceTimes {
            times,
            outputs,
            launches,
            upload_bytes,
            reset_bytes,
        })
    }
}

/// Waits for the timed runs `runs` (their events are `events[run % events.len()]`) and
/// appends their times, in seconds.
fn read_times(
    kernel: &CudaKernel,
    events: &[(CudaEvent, CudaEvent)],
    runs: std::ops::Range<usize>,
    times: &mut Vec<f64>,
) -> Result<(), CudaError> {
    let Some(last) = runs.clone().last() else {
        return Ok(());
    };
    let device = kernel.device();
    device.wait_for(&events[last % events.len()].1)?;
    for run in runs {
        let (start, end) = &events[run % events.len()];
        times.push(device.elapsed_ms(start, end)? / 1e3);
    }
    Ok(())
}

/// The function buffers to set to zero before each run after the first: the zero-filled
/// ones a launch uses, except outputs the program initialises itself.
fn reset_buffers(kernel: &CudaKernel, staged: &Staged) -> Vec<usize> {
    let initialised = initialised_outputs(kernel.program());
    (0..staged.buffers.len())
        .filter(|&b| staged.zeroed[b] && staged.buffers[b].is_some())
        .filter(|&b| staged.outputs[b].is_none_or(|id| !initialised.contains(&id)))
        .collect()
}

/// A device's nominal limits, computed from what its driver reports (not measured):
/// - memory bandwidth = 2 transfers per memory clock × the clock × the bus width (the
///   figure data sheets give for HBM and GDDR alike);
/// - f32 peak = 2 flops per fused multiply-add × FP32 lanes per SM × SMs × the SM clock
///   (the maximum boost clock the driver reports).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct NominalPeaks {
    /// GB/s (10⁹ bytes per second).
    pub bandwidth_gbs: Option<f64>,
    /// GFLOP/s of f32 fused multiply-adds.
    pub peak_f32_gflops: Option<f64>,
}

impl NominalPeaks {
    /// The limits from the driver's attributes: memory clock (kHz), memory bus width
    /// (bits), SM count and SM clock (kHz), for a device of compute capability
    /// `capability`. A missing attribute leaves its figure `None`.
    pub fn from_attributes(
        capability: (u32, u32),
        memory_khz: Option<u64>,
        bus_bits: Option<u64>,
        sms: Option<u64>,
        clock_khz: Option<u64>,
    ) -> NominalPeaks {
        let bandwidth_gbs = match (memory_khz, bus_bits) {
            (Some(khz), Some(bits)) => Some(2.0 * khz as f64 * 1e3 * (bits as f64 / 8.0) / 1e9),
            _ => None,
        };
        let peak_f32_gflops = match (fp32_lanes_per_sm(capability), sms, clock_khz) {
            (Some(lanes), Some(sms), Some(khz)) => {
                Some(2.0 * f64::from(lanes) * sms as f64 * khz as f64 * 1e3 / 1e9)
            }
            _ => None,
        };
        NominalPeaks {
            bandwidth_gbs,
            peak_f32_gflops,
        }
    }
}

/// FP32 lanes (CUDA cores) per SM by compute capability, from NVIDIA's programming
/// guide; `None` for an architecture not listed here.
pub fn fp32_lanes_per_sm((major, minor): (u32, u32)) -> Option<u32> {
    match (major, minor) {
        (3, _) => Some(192),
        (5, _) => Some(128),
        (6, 0) => Some(64),
        (6, _) => Some(128),
        (7, _) => Some(64),
        (8, 0) => Some(64),
        (8, _) => Some(128),
        (9, 0) => Some(128),
        (10..=12, _) => Some(128),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nominal_peaks_of_known_devices() {
        // H100 SXM: HBM3 at 2619 MHz on 5120 bits, 132 SMs at 1980 MHz.
        let h100 = NominalPeaks::from_attributes(
            (9, 0),
            Some(2_619_000),
            Some(5120),
            Some(132),
            Some(1_980_000),
        );
        let bw = h100.bandwidth_gbs.unwrap();
        assert!((bw - 3352.32).abs() < 0.01, "{bw}");
        let peak = h100.peak_f32_gflops.unwrap();
        assert!((peak - 66_908.16).abs() < 0.01, "{peak}");
        // A100: 64 FP32 lanes per SM, 108 SMs at 1410 MHz: 19.5 TFLOP/s.
        let a100 = NominalPeaks::from_attributes(
            (8, 0),
            Some(1_215_000),
            Some(5120),
            Some(108),
            Some(1_410_000),
        );
        assert!((a100.peak_f32_gflops.unwrap() - 19_491.84).abs() < 0.01);
        assert!((a100.bandwidth_gbs.unwrap() - 1555.2).abs() < 0.01);
    }

    #[test]
    fn missing_attributes_or_unknown_architectures_give_none() {
        let p = NominalPeaks::from_attributes((9, 0), None, Some(5120), Some(1), None);
        assert_eq!(p, NominalPeaks::default());
        let p = NominalPeaks::from_attributes((2, 0), Some(1), Some(8), Some(1), Some(1));
        assert_eq!(p.peak_f32_gflops, None);
        assert_eq!(p.bandwidth_gbs, Some(2e-6));
        assert_eq!(fp32_lanes_per_sm((8, 6)), Some(128));
        assert_eq!(fp32_lanes_per_sm((7, 5)), Some(64));
        assert_eq!(fp32_lanes_per_sm((13, 0)), None);
    }
}
