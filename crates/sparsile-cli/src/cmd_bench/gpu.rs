//! The GPU benchmark: `sparsile bench --target cuda` (and `--target cuda-sim`, its dry
//! run without a GPU).
//!
//! Order of a run: the arguments are checked first (peers of the target, GPU recipes,
//! the cases and their matrix files), so mistakes are reported the same with or without
//! a GPU; then, for `cuda`, the device is opened and NVRTC loaded, and a machine without
//! them stops here with the driver's (or NVRTC's) message and a non-zero exit. The
//! device stays open for the whole run (one context; each kernel is compiled through
//! the cubin cache and loaded per case and round).
//!
//! The roofline of `cuda` is the device's nominal one (`CudaDevice::nominal_peaks`:
//! memory clock × bus width, FP32 lanes × SMs × clock, from the driver's attributes), not
//! a measurement; `--bandwidth` and `--peak` replace it. `cuda-sim` uses the CPU's (the
//! interpreter runs there), as the CPU benchmark does.
//!
//! ```text
//! device: NVIDIA H100 80GB HBM3 (sm_90, device 0)
//! roofline: 3352.3 GB/s (nominal), 66908.2 GFLOP/s (nominal f32), from the driver's attributes
//! ```

use anyhow::{Context, Result};
use sparsile::runtime::cuda::{CudaDevice, Nvrtc};
use sparsile::Target;
use sparsile_ir::settings::Settings;

use crate::cmd_bench::args::{BenchArgs, Counts};
use crate::cmd_bench::operands::Dense;
use crate::cmd_bench::roofline::{self, Roofline};
use crate::cmd_bench::{
    collect_cases, gpu_side, measure_all, peer_setup, peers, source_name, write_report, Entry,
    Matrix, RunContext,
};
use crate::output::outln;

/// What `cuda-sim` records as its device.
pub const SIMT_DEVICE: &str = "SIMT interpreter";

/// Runs the GPU benchmark on `target` (`cuda` or `cuda-sim`).
pub fn run(args: &BenchArgs, target: Target, counts: Counts) -> Result<()> {
    let settings = Settings::from_env();
    let peer_list = peers::for_target(args.peers.as_deref(), target)?;
    let recipes = gpu_side::requested(args)?;
    let cases = collect_cases(args, &settings)?;
    if let Some(notice) = &peer_list.notice {
        eprintln!("note: {notice}");
    }
    let entries: Vec<Vec<Entry>> = cases
        .iter()
        .map(|c| gpu_side::entries(c, &recipes))
        .collect::<Result<_>>()?;
    let threads = args
        .threads
        .unwrap_or_else(|| sparsile_runtime::jit::default_threads(&settings));

    // The device (kept open for the run), its name and the roofline.
    let (_device, device_name, ordinal, roof) = match target {
        Target::Cuda => {
            let ordinal = settings.cuda_device.unwrap_or(0);
            let device = CudaDevice::open(ordinal).context(
                "sparsile bench --target cuda needs an NVIDIA GPU with its driver (--target cuda-sim runs the same kernels in the SIMT interpreter on the CPU)",
            )?;
            Nvrtc::load(&settings)
                .context("sparsile bench --target cuda compiles its kernels with NVRTC")?;
            outln!(
                "device: {} ({}, device {ordinal})",
                device.name(),
                device.compute_capability()
            );
            let (roof, how) = gpu_roofline(&device, args)?;
            outln!(
                "roofline: {:.1} GB/s, {:.1} GFLOP/s (f32), {how}",
                roof.bandwidth_gbs,
                roof.peak_gflops
            );
            let name = device.name().to_string();
            (Some(device), name, Some(ordinal), roof)
        }
        _ => {
            let spinner =
                crate::progress::spinner(true, "measuring memory bandwidth and peak flops");
            let (roof, source) =
                roofline::roofline(threads, args.bandwidth, args.peak, args.reprobe, &settings)?;
            spinner.finish_and_clear();
            outln!(
                "target cuda-sim: Sparsile's GPU kernels run by the SIMT interpreter on the CPU; results are checked, times are the interpreter's (not GPU times); no peers"
            );
            outln!(
                "roofline (the CPU's): {:.1} GB/s (STREAM triad), {:.1} GFLOP/s (f32 FMA peak), {threads} threads, {}",
                roof.bandwidth_gbs,
                roof.peak_gflops,
                source_name(source)
            );
            (None, SIMT_DEVICE.to_string(), None, roof)
        }
    };

    let setup = peer_setup(args, peer_list)?;
    let context = RunContext {
        setup: &setup,
        threads,
        roof,
        counts,
        args,
        target: Some(target),
        device: Some(device_name),
        cuda_device: ordinal,
    };
    let mut ours = |entry: &Entry, mat: &Matrix, dense: &Dense| {
        gpu_side::measure(entry, mat, dense, target, counts)
    };
    let (records, work) = measure_all(&cases, &entries, &context, &mut ours)?;
    write_report(args, &records, work.path())
}

/// The roofline of `device`: `--bandwidth` / `--peak` where given, else its nominal
/// limits; with how it was obtained.
fn gpu_roofline(device: &CudaDevice, args: &BenchArgs) -> Result<(Roofline, String)> {
    let nominal = device.nominal_peaks();
    combine(
        args.bandwidth,
        args.peak,
        nominal.bandwidth_gbs,
        nominal.peak_f32_gflops,
    )
    .with_context(|| {
        format!(
            "the driver does not report enough of {}'s attributes for its nominal roofline: give --bandwidth and --peak",
            device.name()
        )
    })
}

/// Given values over nominal ones, and a description of where they came from; `None`
/// when a figure is neither given nor known.
fn combine(
    bandwidth: Option<f64>,
    peak: Option<f64>,
    nominal_bandwidth: Option<f64>,
    nominal_peak: Option<f64>,
) -> Option<(Roofline, String)> {
    let roof = Roofline {
        bandwidth_gbs: bandwidth.or(nominal_bandwidth)?,
        peak_gflops: peak.or(nominal_peak)?,
    };
    let how = match (bandwidth.is_some(), peak.is_some()) {
        (true, true) => "given",
        (false, false) => "nominal, from the driver's attributes (not measured)",
        (true, false) => "bandwidth given, peak nominal (not measured)",
        (false, true) => "bandwidth nominal (not measured), peak given",
    };
    Some((roof, how.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_figures_override_nominal_ones() {
        let (r, how) = combine(None, None, Some(3000.0), Some(60000.0)).unwrap();
        assert_eq!((r.bandwidth_gbs, r.peak_gflops), (3000.0, 60000.0));
        assert!(how.starts_with("nominal"), "{how}");
        let (r, how) = combine(Some(10.0), None, Some(3000.0), Some(60000.0)).unwrap();
        assert_eq!((r.bandwidth_gbs, r.peak_gflops), (10.0, 60000.0));
        assert!(how.starts_with("bandwidth given"), "{how}");
        let (r, how) = combine(Some(10.0), Some(20.0), None, None).unwrap();
        assert_eq!(
            (r.bandwidth_gbs, r.peak_gflops, how.as_str()),
            (10.0, 20.0, "given")
        );
        assert!(combine(None, Some(1.0), None, Some(2.0)).is_none());
    }
}
