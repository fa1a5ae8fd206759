//! [`CudaKernel::bench`] (device timing with CUDA events) against the stand-in driver of
//! `cuda_support::stub`, whose clock advances 0.125 ms per launch and 1000 ms per set or
//! copy of memory, so the measured times show exactly what fell between the events.
//!
//! The kernel is SpMV in two launches written for this test: `rows` adds each row's
//! products into a `scratch` buffer (so it needs that buffer at zero at the start of
//! every run) and `store` copies the sums into `y`. A run that did not reset the scratch
//! buffer would return `y` scaled by the number of runs; one that timed the resets would
//! report 1000 ms more per reset.
//!
//! What this shows: events recorded around each run's launches only, times read back
//! in order (also past one batch of events), resets of scratch buffers and of outputs
//! the program does not initialise (and only those), inputs copied once, outputs of the
//! last run copied back and correct, every event and buffer released. What it cannot
//! show: real device times (see `bench/gpu.sh`, on a GPU machine).

mod cuda_support;

use cuda_support::stub::*;
use cuda_support::*;
use sparsile_ir::coord::Program;
use sparsile_ir::loops::Func;
use sparsile_ir::settings::Settings;
use sparsile_runtime::cuda::{
    ArgRef, BenchOptions, CudaError, CudaKernel, KernelPlan, LaunchPlan, Nvrtc, EVENT_BATCH,
};
use sparsile_runtime::KernelOptions;

/// SpMV whose output `y` the program initialises itself (an `init` block).
const SPMV_INIT_SIR: &str = "\
func spmv(m, n, nnz) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz=nnz, idx=i32)
  axis JD = dense_fixed(n)
  buffer A: f32[I, J] input
  buffer x: f32[JD] input
  buffer y: f32[I] output
  iter spmv over [I: S, J: R] as (i, j) {
    init {
      y[i] = 0.0
    }
    y[i] = y[i] + A[i, j] * x[j]
  }
}
";

const ACC_GPU: &str = "\
flat func spmv(m, n, nnz) {
  buffer A: f32[nnz] input values
  buffer x: f32[n] input values
  buffer y: f32[m] output values
  buffer A_indptr: i32[m + 1] input indptr(A, 1)
  buffer A_indices: i32[nnz] input indices(A, 1)
  buffer partial: f32[m] temp scratch
  launch rows {
    for b in 0..(m + 127) / 128 bind(blockIdx.x) {
      for t in 0..128 bind(threadIdx.x) {
        let i: idx = b * 128 + t
        if i < m {
          for jp in A_indptr[i]..A_indptr[i + 1] {
            partial[i] = partial[i] + A[jp] * x[A_indices[jp]]
          }
        }
      }
    }
  }
  launch store {
    for b in 0..(m + 255) / 256 bind(blockIdx.x) {
      for t in 0..256 bind(threadIdx.x) {
        if b * 256 + t < m {
          y[b * 256 + t] = partial[b * 256 + t]
        }
      }
    }
  }
}
";

const ACC_CU: &str = r#"/* SpMV adding into a scratch buffer, for the device-timing tests. */
typedef long long int64_t;
typedef int int32_t;

extern "C" __global__ void __launch_bounds__(128) spmvacc_rows(long long m, const float *__restrict__ A, const float *__restrict__ x, const int32_t *__restrict__ A_indptr, const int32_t *__restrict__ A_indices, float *__restrict__ partial)
{
    const int64_t i = (int64_t)blockIdx.x * 128 + (int64_t)threadIdx.x;
    if (i < m) {
        for (int64_t jp = (int64_t)A_indptr[i]; jp < (int64_t)A_indptr[i + 1]; ++jp) {
            partial[i] = partial[i] + A[jp] * x[(int64_t)A_indices[jp]];
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) spmvacc_store(long long m, float *__restrict__ y, const float *__restrict__ partial)
{
    const int64_t i = (int64_t)blockIdx.x * 256 + (int64_t)threadIdx.x;
    if (i < m) {
        y[i] = partial[i];
    }
}
"#;

fn acc_func() -> Func {
    let f: Func = ACC_GPU.parse().unwrap_or_else(|e| panic!("{e}"));
    if let Err(errors) = sparsile_ir::loops::verify(&f) {
        panic!("the GPU function does not verify: {errors:?}");
    }
    f
}

/// The plan of [`ACC_GPU`]: the first two kernels of [`plan`] renamed (same grids,
/// blocks and arguments).
fn acc_plan() -> LaunchPlan {
    let mut kernels: Vec<KernelPlan> = plan().kernels.into_iter().take(2).collect();
    kernels[0].symbol = "spmvacc_rows".into();
    kernels[1].symbol = "spmvacc_store".into();
    assert_eq!(
        kernels[1].args,
        [ArgRef::Param(0), ArgRef::Buffer(2), ArgRef::Buffer(5)]
    );
    LaunchPlan { kernels }
}

#[test]
fn device_timing_runs_against_a_stand_in_driver() {
    let Some(text) = run_under_stub("stub_bench", &[]) else {
        return;
    };
    let settings = Settings::from_env();
    if settings.nvrtc.is_some() || Nvrtc::load(&settings).is_ok() {
        assert!(text.contains("stub: bench checks passed"), "{text}");
    } else {
        assert!(text.contains("skipped, no NVRTC"), "{text}");
        println!("the device-timing checks were skipped: no NVRTC to make the cubin");
    }
}

fn build(program: Program, settings: &Settings) -> CudaKernel {
    CudaKernel::build(
        program,
        acc_func(),
        ACC_CU.to_string(),
        acc_plan(),
        settings,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
#[ignore = "run by device_timing_runs_against_a_stand_in_driver under the stand-in"]
fn stub_bench() {
    let Some(device) = stub_device("stub_bench") else {
        return;
    };
    let stub = Stub::open();
    let settings = Settings::from_env();
    if let Err(e) = Nvrtc::load(&settings) {
        assert!(settings.nvrtc.is_none(), "SPARSILE_NVRTC is set: {e}");
        println!("stub: bench checks skipped, no NVRTC: {e}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        cache_dir: Some(dir.path().to_path_buf()),
        ..settings
    };
    let kernel = build(program(), &settings);
    let none = KernelOptions::default();
    let (m, n) = (300, 70);
    let inputs = inputs(1, m, n);
    let nnz = inputs["A"].values.len();

    // Two warm-up runs and five timed ones: each timed run is its two launches.
    let (launches, sets) = (stub.count(Counter::Launches), stub.count(Counter::Memsets));
    let timed = kernel
        .bench(
            &inputs,
            &none,
            &BenchOptions {
                warmup: 2,
                repeat: 5,
            },
        )
        .unwrap();
    assert_eq!(timed.times.len(), 5);
    for t in &timed.times {
        assert!((t - 0.25e-3).abs() < 1e-12, "{:?}", timed.times);
    }
    assert_eq!(timed.launches, 2);
    assert_eq!(stub.count(Counter::Launches) - launches, 2 * 7);
    // y and partial: zero-filled when allocated, then reset before each of 6 runs.
    assert_eq!(stub.count(Counter::Memsets) - sets, 2 + 2 * 6);
    assert_eq!(timed.reset_bytes, 2 * m * 4);
    assert_eq!(timed.upload_bytes, 4 * (2 * nnz + n + m + 1));
    assert_matches_interpreter(&timed.outputs, &inputs);
    // One module; contexts retained by `device` and by the kernel's own.
    assert_eq!(stub.live(), (0, 1, 2), "the run's device memory is freed");
    assert_eq!(stub.count(Counter::Events), 0, "the events are destroyed");

    // More timed runs than one batch of events.
    let many = kernel
        .bench(
            &inputs,
            &none,
            &BenchOptions {
                warmup: 0,
                repeat: EVENT_BATCH * 2 + 3,
            },
        )
        .unwrap();
    assert_eq!(many.times.len(), EVENT_BATCH * 2 + 3);
    assert!(many.times.iter().all(|t| (t - 0.25e-3).abs() < 1e-12));
    assert_matches_interpreter(&many.outputs, &inputs);
    assert_eq!(stub.count(Counter::Events), 0);

    // The same checks and errors as `run`; no timed run is a misuse.
    let mut missing = inputs.clone();
    missing.remove("x");
    let err = kernel
        .bench(&missing, &none, &BenchOptions::default())
        .unwrap_err();
    assert!(matches!(err, CudaError::Kernel(_)), "{err:?}");
    let err = kernel
        .bench(
            &inputs,
            &none,
            &BenchOptions {
                warmup: 1,
                repeat: 0,
            },
        )
        .unwrap_err();
    assert!(matches!(err, CudaError::Misuse { .. }), "{err:?}");

    // A program that initialises y: only the scratch buffer is reset.
    let init: Program = SPMV_INIT_SIR.parse().unwrap_or_else(|e| panic!("{e}"));
    let initialising = build(init, &settings);
    let timed = initialising
        .bench(
            &inputs,
            &none,
            &BenchOptions {
                warmup: 1,
                repeat: 3,
            },
        )
        .unwrap();
    assert_eq!(timed.reset_bytes, m * 4);
    assert_matches_interpreter(&timed.outputs, &inputs);

    // No rows: nothing launched, every run takes no time.
    let empty = cuda_support::inputs(4, 0, 4);
    let timed = kernel
        .bench(
            &empty,
            &none,
            &BenchOptions {
                warmup: 1,
                repeat: 2,
            },
        )
        .unwrap();
    assert_eq!((timed.launches, timed.times.clone()), (0, vec![0.0, 0.0]));

    drop((kernel, initialising));
    drop(device);
    assert_eq!(stub.live(), (0, 0, 0));
    println!("stub: bench checks passed");
}

#[test]
#[ignore = "run by nominal_peaks_come_from_the_device_attributes under the stand-in"]
fn stub_peaks() {
    let Some(device) = stub_device("stub_peaks") else {
        return;
    };
    // The stand-in reports compute capability 8.0 and 1 for every other attribute:
    // 1 kHz of memory clock on a 1-bit bus, one SM of 64 lanes at 1 kHz.
    let peaks = device.nominal_peaks();
    assert_eq!(peaks.bandwidth_gbs, Some(2.0 * 1e3 / 8.0 / 1e9));
    assert_eq!(peaks.peak_f32_gflops, Some(2.0 * 64.0 * 1e3 / 1e9));
    println!("stub: peaks checked");
}

#[test]
fn nominal_peaks_come_from_the_device_attributes() {
    let Some(text) = run_under_stub("stub_peaks", &[]) else {
        return;
    };
    assert!(text.contains("stub: peaks checked"), "{text}");
}
