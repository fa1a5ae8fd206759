//! The CUDA device and GPU kernels: opening a device where there is none is a typed
//! error, never a panic; building a kernel checks the function and its launch plan
//! against the program before any device is needed; and, where a GPU and NVRTC are
//! there, SpMV runs on it and matches the interpreter (skipped, saying so, elsewhere).

mod cuda_support;

use std::collections::HashMap;

use cuda_support::*;
use sparsile_ir::loops::{Expr, Func};
use sparsile_ir::settings::Settings;
use sparsile_runtime::cuda::{ArgRef, CudaDevice, CudaError, CudaKernel, LaunchPlan};
use sparsile_runtime::{KernelError, KernelOptions};

#[test]
fn opening_a_device_gives_a_device_or_a_typed_error() {
    match CudaDevice::open(0) {
        Ok(device) => {
            let arch = device.compute_capability();
            let parsed: sparsile_runtime::cuda::Arch = arch.parse().unwrap();
            assert_eq!((parsed.major, parsed.minor), device.capability());
            println!("device 0: {} ({arch})", device.name());
        }
        Err(e @ CudaError::DriverMissing) => {
            let message = e.to_string();
            assert!(message.contains("libcuda.so.1"), "{message}");
            assert!(message.contains("NVIDIA driver"), "{message}");
            println!("no driver here: {message}");
        }
        Err(e @ CudaError::NoDevice { ordinal: 0, .. }) => {
            let message = e.to_string();
            assert!(message.contains("no CUDA device 0"), "{message}");
            assert!(message.contains("SPARSILE_CUDA_DEVICE"), "{message}");
            println!("no device here: {message}");
        }
        Err(e) => panic!("expected a device, DriverMissing or NoDevice, got {e:?}"),
    }
    // An ordinal no machine has.
    match CudaDevice::open(usize::MAX) {
        Err(CudaError::DriverMissing) => {}
        Err(CudaError::NoDevice { ordinal, .. }) => assert_eq!(ordinal, usize::MAX),
        other => panic!("expected DriverMissing or NoDevice, got {other:?}"),
    }
}

fn build(func: Func, plan: LaunchPlan) -> Result<CudaKernel, CudaError> {
    build_for(program(), func, plan)
}

fn build_for(
    program: sparsile_ir::coord::Program,
    func: Func,
    plan: LaunchPlan,
) -> Result<CudaKernel, CudaError> {
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        cache_dir: Some(dir.path().to_path_buf()),
        ..Settings::from_env()
    };
    CudaKernel::build(program, func, SPMV_CU.to_string(), plan, &settings)
}

/// f16 and bf16 inputs and outputs pass the checks — the CUDA kernels load and store
/// them as raw 16-bit words and compute in f32 — so building goes on to the device
/// (here: a device or the driver's typed error).
#[test]
fn sixteen_bit_inputs_and_outputs_are_taken() {
    for dtype in ["f16", "bf16"] {
        for (decl, buffer) in [
            ("buffer x: f32[JD]", "buffer x: f32[n]"),
            ("buffer y: f32[I]", "buffer y: f32[m]"),
        ] {
            let program = SPMV_SIR
                .replace(decl, &decl.replace("f32", dtype))
                .parse()
                .unwrap_or_else(|e| panic!("{dtype}: {e}"));
            let func: Func = SPMV_GPU
                .replace(buffer, &buffer.replace("f32", dtype))
                .parse()
                .unwrap_or_else(|e| panic!("{dtype}: {e}"));
            match build_for(program, func, plan()) {
                Ok(_) | Err(CudaError::DriverMissing) | Err(CudaError::NoDevice { .. }) => {}
                // A GPU without NVRTC, or whose compile of the stand-in source fails, is
                // past the checks too.
                Err(CudaError::NvrtcMissing { .. }) | Err(CudaError::Compile { .. }) => {}
                Err(e) => panic!("{dtype} {buffer}: {e:?}"),
            }
        }
    }
}

/// `build` must fail with a plan error (before any device is opened) whose message
/// contains `words`.
fn assert_plan_error(func: Func, plan: LaunchPlan, words: &str) {
    let err = build(func, plan).unwrap_err();
    assert!(matches!(err, CudaError::Plan { .. }), "{words}: {err:?}");
    assert!(err.to_string().contains(words), "{words}: {err}");
}

#[test]
fn a_plan_that_does_not_fit_the_function_is_refused_before_the_device() {
    let mut fewer = plan();
    fewer.kernels.pop();
    assert_plan_error(
        gpu_func(),
        fewer,
        "has 3 launches but the plan has 2 kernels",
    );

    let mut block = plan();
    block.kernels[1].block = [128, 2, 1];
    assert_plan_error(gpu_func(), block, "runs blocks of [256, 1, 1] threads");

    let mut too_many_threads = plan();
    too_many_threads.kernels[0].block = [1024, 2, 1];
    assert_plan_error(gpu_func(), too_many_threads, "1 to 1024 in all");

    let mut name = plan();
    name.kernels[0].symbol = "spmv rows".into();
    assert_plan_error(gpu_func(), name, "not a C identifier");

    let mut twice = plan();
    twice.kernels[1].symbol = "spmv_rows".into();
    assert_plan_error(gpu_func(), twice, "two kernels");

    let mut param = plan();
    param.kernels[0].args[0] = ArgRef::Param(3);
    assert_plan_error(gpu_func(), param, "param #3, but the function has 3 params");

    let mut buffer = plan();
    buffer.kernels[0].args[1] = ArgRef::Buffer(6);
    assert_plan_error(
        gpu_func(),
        buffer,
        "buffer #6, but the function has 6 buffers",
    );

    let mut shared = plan();
    shared.kernels[0].shared_bytes = 49 * 1024;
    assert_plan_error(gpu_func(), shared, "bytes of shared memory");

    // A grid that reads the output cannot be sized before the launch.
    let mut grid = plan();
    grid.kernels[2].grid[0] = Expr::load(sparsile_ir::BufferId(2), vec![Expr::Int(0)]);
    assert_plan_error(gpu_func(), grid, "cannot be sized before the launch");

    // A local buffer is declared by the kernel, never an argument.
    let local = SPMV_GPU.replace(
        "buffer partial: f32[m] temp scratch",
        "buffer partial: f32[m] temp scratch\n  buffer tile: f32[4] temp local",
    );
    let mut arg = plan();
    arg.kernels[0].args.push(ArgRef::Buffer(6));
    assert_plan_error(local.parse().unwrap(), arg, "`tile` is a local buffer");
}

#[test]
fn a_function_that_does_not_fit_the_program_is_refused_like_a_cpu_kernel() {
    // Not a GPU function at all.
    let cpu: Func = "\
flat func spmv(m, n, nnz) {
  buffer y: f32[m] output values
  for i in 0..m parallel {
    y[i] = 1.0
  }
}
"
    .parse()
    .unwrap();
    let err = build(cpu, plan()).unwrap_err();
    assert!(matches!(err, CudaError::NotGpu { .. }), "{err:?}");
    assert!(
        err.to_string().contains("`spmv` is not a GPU function"),
        "{err}"
    );

    // A buffer the program lacks, and one of another element type: CompiledKernel's
    // errors, as they are.
    let renamed: Func = SPMV_GPU
        .replace("buffer x:", "buffer z:")
        .replace("x[A_indices", "z[A_indices")
        .parse()
        .unwrap();
    let err = build(renamed, plan()).unwrap_err();
    assert!(
        matches!(err, CudaError::Kernel(KernelError::UnknownBuffer { ref buffer }) if buffer == "z"),
        "{err:?}"
    );
    let retyped: Func = SPMV_GPU
        .replace("buffer x: f32[n]", "buffer x: f64[n]")
        .parse()
        .unwrap();
    let err = build(retyped, plan()).unwrap_err();
    assert!(
        matches!(
            err,
            CudaError::Kernel(KernelError::ValuesDTypeMismatch { .. })
        ),
        "{err:?}"
    );
    let param: Func = SPMV_GPU
        .replace("(m, n, nnz)", "(m, n, nnz, extra)")
        .parse()
        .unwrap();
    let err = build(param, plan()).unwrap_err();
    assert!(
        matches!(err, CudaError::Kernel(KernelError::UnknownParam { ref param }) if param == "extra"),
        "{err:?}"
    );
}

#[test]
fn shared_buffers_are_not_arguments_and_reach_the_device_step() {
    // A shared buffer passes the checks (CPU kernels refuse it); with everything valid,
    // building fails only for want of a device here, with the device's typed error.
    let with_shared = SPMV_GPU.replace(
        "buffer partial: f32[m] temp scratch",
        "buffer partial: f32[m] temp scratch\n  buffer tile: f32[128] temp shared",
    );
    for func in [gpu_func(), with_shared.parse().unwrap()] {
        match build(func, plan()) {
            Ok(kernel) => {
                println!("built on {}", kernel.device().name());
            }
            Err(CudaError::DriverMissing | CudaError::NoDevice { .. }) => {}
            // A GPU machine without NVRTC.
            Err(e @ CudaError::NvrtcMissing { .. }) => println!("{e}"),
            Err(e) => panic!("expected the device's error, got {e:?}"),
        }
    }
}

/// The kernel built on this machine's device, or `None` (after saying why) when there
/// is no device or no NVRTC.
fn kernel_or_skip(test: &str, settings: &Settings) -> Option<CudaKernel> {
    match CudaKernel::build(program(), gpu_func(), SPMV_CU.to_string(), plan(), settings) {
        Ok(k) => Some(k),
        Err(e @ (CudaError::DriverMissing | CudaError::NoDevice { .. })) => {
            println!("{test}: skipped, no GPU: {e}");
            None
        }
        Err(e @ CudaError::NvrtcMissing { .. }) if settings.nvrtc.is_none() => {
            println!("{test}: skipped, no NVRTC: {e}");
            None
        }
        Err(e) => panic!("{test}: {e}"),
    }
}

#[test]
fn spmv_runs_on_the_gpu_like_the_interpreter() {
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        cache_dir: Some(dir.path().to_path_buf()),
        ..Settings::from_env()
    };
    let Some(kernel) = kernel_or_skip("spmv_runs_on_the_gpu_like_the_interpreter", &settings)
    else {
        return;
    };
    let info = kernel.compile_info();
    println!(
        "{} ({}): cubin for {} ({:?}, {:?})",
        kernel.device().name(),
        kernel.device().compute_capability(),
        info.arch,
        info.outcome,
        info.duration
    );
    assert_eq!(info.kernels.len(), 3, "{info:?}");
    for (seed, m, n) in [
        (1, 300, 70),
        (2, 1, 5),
        (3, 1000, 3),
        (4, 0, 4),
        (5, 129, 129),
    ] {
        let inputs = inputs(seed, m, n);
        let outputs = kernel.run(&inputs, &KernelOptions::default()).unwrap();
        assert_matches_interpreter(&outputs, &inputs);
    }
    // Built again: the cubin comes from the cache.
    let again = kernel_or_skip("spmv_runs_on_the_gpu_like_the_interpreter", &settings).unwrap();
    assert_eq!(
        again.compile_info().outcome,
        sparsile_runtime::jit::CacheOutcome::Hit
    );

    // Argument errors are CompiledKernel's.
    let mut missing = inputs(6, 4, 4);
    missing.remove("x");
    let err = kernel.run(&missing, &KernelOptions::default()).unwrap_err();
    assert!(
        matches!(err, CudaError::Kernel(KernelError::Bind(_))),
        "{err:?}"
    );
    let options = KernelOptions {
        params: HashMap::from([("m".to_string(), 5)]),
        ..KernelOptions::default()
    };
    let err = kernel.run(&inputs(7, 4, 4), &options).unwrap_err();
    assert!(matches!(err, CudaError::Kernel(_)), "{err:?}");
}
