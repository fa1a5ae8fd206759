//! The device path of the CUDA runtime, run against a stand-in CUDA driver.
//!
//! This machine may have no GPU, so these tests build a small `libcuda.so` of their own
//! (`cuda_support::stub`: C, compiled with the system compiler into a temporary folder,
//! shared with `cuda_device_run_stub.rs` and `cuda_bench_stub.rs`) that implements the
//! driver calls the runtime makes on host memory: device pointers are `malloc`ed
//! blocks (filled with garbage, so memory the runtime forgets to clear shows), every
//! copy and set is checked to lie inside one allocation, every call checks that the
//! context is current on the calling thread, and `cuLaunchKernel` runs C versions of
//! the SpMV kernels of `cuda_support` over the whole grid, reading each argument the
//! way the CUDA source declares it. It records the launches and counts what is live.
//!
//! Each check runs in a child process (this test binary, one `#[ignore]`d test, with
//! `LD_LIBRARY_PATH` pointing at the stand-in) because the loader reads that variable
//! only when a process starts. The children say what they checked; the parents require
//! it. Run alone (`--ignored`) without the stand-in, the children skip.
//!
//! What this shows: the runtime's handles (context, memory, modules), argument
//! marshalling, grid computation and skipping, zero-filling, copies back, release of
//! everything, and that a missing driver entry point or a kernel fault is a typed error.
//! What it cannot show: that real GPUs run the cubins (see `cuda_device.rs`).

mod cuda_support;

use cuda_support::stub::*;
use cuda_support::*;
use sparsile_ir::settings::Settings;
use sparsile_runtime::cuda::{
    CubinCache, CudaDevice, CudaError, CudaKernel, LaunchArg, LaunchConfig, Nvrtc,
};
use sparsile_runtime::jit::CacheOutcome;
use sparsile_runtime::KernelOptions;

#[test]
fn the_device_path_runs_against_a_stand_in_driver() {
    let Some(text) = run_under_stub("stub_device_path", &[]) else {
        return;
    };
    assert!(text.contains("stub: device checks passed"), "{text}");
    let settings = Settings::from_env();
    if settings.nvrtc.is_some() || Nvrtc::load(&settings).is_ok() {
        assert!(text.contains("stub: kernel checks passed"), "{text}");
    } else {
        println!("the kernel checks were skipped: no NVRTC");
    }
}

#[test]
#[ignore = "run by the_device_path_runs_against_a_stand_in_driver under the stand-in"]
fn stub_device_path() {
    let Some(device) = stub_device("stub_device_path") else {
        return;
    };
    let stub = Stub::open();
    assert_eq!(device.compute_capability(), "sm_80");
    assert_eq!(stub.live(), (0, 0, 1));

    // Memory: zeroed, uploaded, downloaded; copies larger than a buffer refused.
    let zeros = device.alloc_zeroed(24).unwrap();
    let mut back = [1.0f64; 3];
    device.download(&zeros, &mut back).unwrap();
    assert_eq!(back, [0.0; 3]);
    let data = device.upload(&[1i32, -2, 3]).unwrap();
    let mut ints = [0i32; 3];
    device.download(&data, &mut ints).unwrap();
    assert_eq!(ints, [1, -2, 3]);
    let err = device.download(&data, &mut [0i64; 2]).unwrap_err();
    assert!(matches!(err, CudaError::Misuse { .. }), "{err:?}");
    let empty = device.upload::<f32>(&[]).unwrap();
    assert_eq!(empty.bytes(), 1);
    assert_eq!(stub.live().0, 3);
    // A buffer dropped on another thread is freed there (with the context made current).
    std::thread::spawn(move || drop(data)).join().unwrap();
    assert_eq!(stub.live().0, 2);
    drop((zeros, empty));
    assert_eq!(stub.live().0, 0);
    // 16-bit values (tensor-core operands) go up and come back as their bits.
    let halves = [half::f16::from_f32(1.5), half::f16::from_f32(-2.0)];
    let up = device.upload(&halves).unwrap();
    assert_eq!(up.bytes(), 4);
    let mut back = [half::f16::ZERO; 2];
    device.download(&up, &mut back).unwrap();
    assert_eq!(back, halves);
    let brains = [half::bf16::from_f32(3.0), half::bf16::from_f32(-0.5)];
    let up_b = device.upload(&brains).unwrap();
    let mut back_b = [half::bf16::ZERO; 2];
    device.download(&up_b, &mut back_b).unwrap();
    assert_eq!(back_b, brains);
    drop((up, up_b));
    assert_eq!(stub.live().0, 0);
    let err = device.alloc_zeroed(1 << 40).unwrap_err();
    assert!(
        matches!(&err, CudaError::Driver { call: "cuMemAlloc", code: 2, message } if message.contains("CUDA_ERROR_OUT_OF_MEMORY")),
        "{err:?}"
    );
    assert!(err.to_string().contains("free device memory"), "{err}");

    // Modules: only ELF images; kernels looked up by name.
    let err = device.load_module(b"not a cubin").unwrap_err();
    assert!(matches!(err, CudaError::Misuse { .. }), "{err:?}");
    let image = fake_elf(&["spmv_never"]);
    let module = device.load_module(&image).unwrap();
    let err = module.function("spmv_missing").unwrap_err();
    assert!(
        matches!(&err, CudaError::MissingKernel { symbol } if symbol == "spmv_missing"),
        "{err:?}"
    );
    let never = module.function("spmv_never").unwrap();
    assert_eq!(stub.live().1, 1);

    // A launch: the arguments arrive as the kernel declares them.
    let y = device.upload(&[5.0f32; 40]).unwrap();
    let config = LaunchConfig {
        grid: [2, 1, 1],
        block: [32, 1, 1],
        shared_bytes: 0,
    };
    // SAFETY: spmv_never(long long m, float *y) writes y[0..m) for m = 40 blocks' worth.
    unsafe {
        device
            .launch(&never, config, &[LaunchArg::I64(40), LaunchArg::Buffer(&y)])
            .unwrap()
    };
    device.synchronize().unwrap();
    let mut out = [1.0f32; 40];
    device.download(&y, &mut out).unwrap();
    assert_eq!(out, [0.0; 40]);
    assert_eq!(stub.log(), "spmv_never 2 1 1 32 1 1 0\n");

    // A kernel that faults is reported when the device is synchronised.
    let small = device.upload(&[5.0f32; 8]).unwrap();
    // SAFETY (for the runtime; the stand-in checks every access): the kernel writes
    // past the end of `small`, which is the fault this checks.
    unsafe {
        device
            .launch(
                &never,
                config,
                &[LaunchArg::I64(40), LaunchArg::Buffer(&small)],
            )
            .unwrap()
    };
    let err = device.synchronize().unwrap_err();
    assert!(
        matches!(
            &err,
            CudaError::Driver {
                call: "cuCtxSynchronize",
                code: 700,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("illegal memory access"), "{err}");
    assert!(err.to_string().contains("a kernel faulted"), "{err}");
    stub.clear();
    drop((never, module, y, small));
    assert_eq!(stub.live(), (0, 0, 1));
    drop(device);
    assert_eq!(
        stub.live(),
        (0, 0, 0),
        "the context is released with the last handle"
    );
    println!("stub: device checks passed");

    stub_kernel_path(&stub);
}

/// The SpMV kernel built and run through `CudaKernel` (needs NVRTC for the cubin the
/// stand-in loads).
fn stub_kernel_path(stub: &Stub) {
    let settings = Settings::from_env();
    let nvrtc = match Nvrtc::load(&settings) {
        Ok(n) => n,
        Err(e) if settings.nvrtc.is_none() => {
            println!("stub: kernel checks skipped, no NVRTC: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        cache_dir: Some(dir.path().to_path_buf()),
        ..settings
    };
    let kernel = CudaKernel::build(
        program(),
        gpu_func(),
        SPMV_CU.to_string(),
        plan(),
        &settings,
    )
    .unwrap();
    let info = kernel.compile_info().clone();
    assert_eq!(info.arch, "sm_80", "the device's own architecture");
    assert_eq!(info.outcome, CacheOutcome::Miss);
    let cache = CubinCache::with_nvrtc(dir.path().join("cuda"), nvrtc).unwrap();
    assert_eq!(info.cubin, cache.cubin_path(SPMV_CU, "sm_80"));
    assert!(info.cubin.exists());
    assert_eq!(stub.live(), (0, 1, 1));

    for (seed, m, n) in [(1, 300, 70), (2, 1, 5), (3, 1000, 3), (5, 129, 129)] {
        stub.clear();
        let inputs = inputs(seed, m, n);
        let outputs = kernel.run(&inputs, &KernelOptions::default()).unwrap();
        assert_matches_interpreter(&outputs, &inputs);
        // `never` is skipped: its grid, A_indptr[m] - nnz, is empty.
        let rows = m.div_ceil(128);
        let stores = m.div_ceil(256);
        assert_eq!(
            stub.log(),
            format!("spmv_rows {rows} 1 1 128 1 1 0\nspmv_store {stores} 1 1 256 1 1 0\n"),
            "m = {m}"
        );
        assert_eq!(stub.live(), (0, 1, 1), "the run's device memory is freed");
    }

    // No rows: every grid is empty, nothing is launched or copied, y is empty.
    stub.clear();
    let empty = inputs(4, 0, 4);
    let outputs = kernel.run(&empty, &KernelOptions::default()).unwrap();
    assert_eq!(stub.log(), "");
    assert_matches_interpreter(&outputs, &empty);

    // From another thread, where the context is not current yet.
    std::thread::scope(|s| {
        s.spawn(|| {
            let inputs = inputs(9, 50, 20);
            let outputs = kernel.run(&inputs, &KernelOptions::default()).unwrap();
            assert_matches_interpreter(&outputs, &inputs);
        });
    });

    // A kernel missing from the source is named.
    let mut renamed = plan();
    renamed.kernels[2].symbol = "spmv_gone".into();
    let err = CudaKernel::build(
        program(),
        gpu_func(),
        SPMV_CU.to_string(),
        renamed,
        &settings,
    )
    .unwrap_err();
    assert!(
        matches!(&err, CudaError::MissingKernel { symbol } if symbol == "spmv_gone"),
        "{err:?}"
    );

    // Built again: the cubin comes from the cache; a truncated one is rebuilt.
    let again = CudaKernel::build(
        program(),
        gpu_func(),
        SPMV_CU.to_string(),
        plan(),
        &settings,
    )
    .unwrap();
    assert_eq!(again.compile_info().outcome, CacheOutcome::Hit);
    let bytes = std::fs::read(&info.cubin).unwrap();
    std::fs::write(&info.cubin, &bytes[..100]).unwrap();
    let rebuilt = CudaKernel::build(
        program(),
        gpu_func(),
        SPMV_CU.to_string(),
        plan(),
        &settings,
    )
    .unwrap();
    assert_eq!(rebuilt.compile_info().outcome, CacheOutcome::Miss);
    let inputs = inputs(10, 70, 30);
    assert_matches_interpreter(
        &rebuilt.run(&inputs, &KernelOptions::default()).unwrap(),
        &inputs,
    );

    drop((kernel, again, rebuilt));
    assert_eq!(stub.live(), (0, 0, 0), "modules and contexts are released");
    println!("stub: kernel checks passed");
}

#[test]
fn a_driver_without_an_entry_point_is_a_typed_error() {
    let Some(text) = run_under_stub("stub_without_an_entry_point", &["STUB_WITHOUT_NAME"]) else {
        return;
    };
    assert!(
        text.contains("stub: missing entry point reported"),
        "{text}"
    );
}

#[test]
#[ignore = "run by a_driver_without_an_entry_point_is_a_typed_error under the stand-in"]
fn stub_without_an_entry_point() {
    match CudaDevice::open(0) {
        Err(
            e @ CudaError::DriverPanicked {
                call: "cuDeviceGetName",
                ..
            },
        ) => {
            assert!(e.to_string().contains("update the NVIDIA driver"), "{e}");
            println!("stub: missing entry point reported: {e}");
        }
        other => {
            println!("stub_without_an_entry_point: skipped, not under the stand-in: {other:?}")
        }
    }
}

#[test]
fn a_driver_without_devices_is_no_device() {
    let Some(text) = run_under_stub("stub_without_devices", &["STUB_NO_DEVICE"]) else {
        return;
    };
    assert!(text.contains("stub: no device reported"), "{text}");
}

#[test]
#[ignore = "run by a_driver_without_devices_is_no_device under the stand-in"]
fn stub_without_devices() {
    match CudaDevice::open(0) {
        Err(
            e @ CudaError::NoDevice {
                ordinal: 0,
                count: 0,
            },
        ) => {
            println!("stub: no device reported: {e}");
        }
        other => println!("stub_without_devices: skipped, not under the stand-in: {other:?}"),
    }
}
