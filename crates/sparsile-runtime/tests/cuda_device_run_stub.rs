//! [`CudaKernel::run_device`] (operands the caller keeps in device memory, on the
//! caller's stream) against the stand-in driver of `cuda_support::stub`, which checks
//! every pointer against its allocations, answers `cuPointerGetAttribute` for them
//! (memory of another device, page-locked host memory and another context's are made
//! with `Stub::alloc_foreign`), and logs each stream-ordered operation and launch with
//! its stream.
//!
//! What this shows: dense operands are read in place and outputs written where the
//! caller allocated them; a sparse operand's structure arrays are copied once and
//! cached (`operand_cache`), its values copied on every run when they are on the host
//! and not at all when they are on the device; the output is cleared and the scratch
//! buffer made and freed in stream order; a run waits for its stream only when it must
//! (host values, a first copy into the cache, or run memory that is not stream-ordered,
//! `-DSTUB_NO_MEMPOOL`); every operand and output the kernel cannot use (dtype,
//! contiguity, device, host or another context's memory, a range past the allocation,
//! alignment, shape, unknown names, failed allocation) is refused before anything is
//! queued; a dead matrix's cached arrays are never served to a new one at the same
//! address; a structure over borrowed arrays is never cached; clearing the cache and
//! dropping the stream free everything. What it cannot show: real GPUs, PyTorch's
//! caching allocator or its streams (see `python/tests/test_cuda_zero_copy.py`).

mod cuda_support;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use cuda_support::stub::*;
use cuda_support::*;
use sparsile_formats::{AxisStorage, SparseTensor, Structure, Values};
use sparsile_ir::settings::Settings;
use sparsile_ir::DType;
use sparsile_runtime::cuda::{
    check_plan, dense_structure, operand_cache, CudaDevice, CudaError, CudaKernel, CudaStream,
    DeviceArray, DeviceBuffer, DeviceInput, DeviceValues, LaunchPlan, Nvrtc, OutputSpec,
};
use sparsile_runtime::{KernelOptions, Outputs};

/// The kernel of `cuda_support` built under the stand-in, with a fresh cubin cache, or
/// `None` (after saying so) without NVRTC.
fn stub_kernel(test: &str) -> Option<(CudaKernel, tempfile::TempDir)> {
    stub_kernel_with(test, plan())
}

/// [`stub_kernel`] with another launch plan for the same source.
fn stub_kernel_with(test: &str, plan: LaunchPlan) -> Option<(CudaKernel, tempfile::TempDir)> {
    let settings = Settings::from_env();
    if let Err(e) = Nvrtc::load(&settings) {
        if settings.nvrtc.is_some() {
            panic!("{e}");
        }
        println!("{test}: skipped, no NVRTC: {e}");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        cache_dir: Some(dir.path().to_path_buf()),
        ..settings
    };
    let kernel =
        CudaKernel::build(program(), gpu_func(), SPMV_CU.to_string(), plan, &settings).unwrap();
    Some((kernel, dir))
}

fn f32_values(t: &SparseTensor<'_>) -> Vec<f32> {
    match &t.values {
        Values::F32(v) => v.to_vec(),
        other => panic!("f32 values expected, got {}", other.dtype()),
    }
}

/// `y` (m values) downloaded from `buffer`, as outputs to compare with the interpreter.
fn y_outputs(device: &CudaDevice, buffer: &DeviceBuffer, m: usize) -> Outputs {
    let mut y = vec![0.0f32; m];
    device.download(buffer, &mut y).unwrap();
    Outputs::from([(
        "y".to_string(),
        SparseTensor {
            structure: Arc::new(dense_structure(&[m])),
            values: Values::F32(Cow::Owned(y)),
        },
    )])
}

fn array_of(buffer: &DeviceBuffer, dtype: DType, shape: Vec<usize>) -> DeviceArray {
    DeviceArray::contiguous(buffer.device_ptr(), dtype, shape, 0)
}

/// A plan's alignments (of vector loads) name buffer arguments of their kernel and are
/// powers of two up to 256 bytes.
#[test]
fn launch_plans_with_bad_alignments_are_refused() {
    let func = gpu_func();
    let mut ok = plan();
    ok.kernels[0].alignments = vec![(1, 16), (0, 8)];
    check_plan(&func, &ok).unwrap();
    for (kernel, alignment, what) in [
        (0, (2, 16), "buffer #2"),
        (1, (9, 16), "buffer #9"),
        (0, (1, 12), "12 bytes"),
        (0, (1, 512), "512 bytes"),
    ] {
        let mut bad = plan();
        bad.kernels[kernel].alignments = vec![alignment];
        let err = check_plan(&func, &bad).unwrap_err();
        assert!(err.to_string().contains(what), "{alignment:?}: {err}");
    }
}

#[test]
fn the_device_operand_path_runs_against_a_stand_in_driver() {
    let Some(text) = run_under_stub("stub_device_operands", &[]) else {
        return;
    };
    let settings = Settings::from_env();
    if settings.nvrtc.is_some() || Nvrtc::load(&settings).is_ok() {
        assert!(
            text.contains("stub: device operand checks passed"),
            "{text}"
        );
    } else {
        println!("the device operand checks were skipped: no NVRTC");
    }
}

#[test]
#[ignore = "run by the_device_operand_path_runs_against_a_stand_in_driver under the stand-in"]
fn stub_device_operands() {
    let Some(device) = stub_device("stub_device_operands") else {
        return;
    };
    let Some((kernel, _cache)) = stub_kernel("stub_device_operands") else {
        return;
    };
    let stub = Stub::open();
    let stream = device.create_stream().unwrap();
    let s = stream.stream();
    assert_ne!(s, CudaStream::DEFAULT);
    assert_eq!(stub.count(Counter::Streams), 1, "one stream made");
    let (m, n) = (300, 70);
    let host = inputs(1, m, n);
    let a = host["A"].clone();
    let nnz = a.values.len();
    let x_dev = device.upload(&f32_values(&host["x"])).unwrap();
    let a_values_dev = device.upload(&f32_values(&a)).unwrap();
    // Garbage where y goes: the run must clear it.
    let y_dev = device.upload(&vec![9.0f32; m]).unwrap();
    let baseline = stub.live().0;
    let options = KernelOptions::default();
    let mut asked = Vec::new();
    let mut alloc = |spec: &OutputSpec| {
        asked.push((spec.name.clone(), spec.shape.clone(), spec.dtype));
        Ok(array_of(&y_dev, spec.dtype, spec.shape.clone()))
    };
    let x = || DeviceInput::dense(array_of(&x_dev, DType::F32, vec![n]));

    // 1. A in host memory: its structure arrays are copied once and cached, its values
    // on every run, and the run waits for the stream before returning (host memory).
    stub.clear();
    let with_host_a = HashMap::from([
        ("A".to_string(), DeviceInput::host(a.clone())),
        ("x".to_string(), x()),
    ]);
    let out = kernel
        .run_device(&with_host_a, &mut alloc, s, &options)
        .unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out["y"].array.ptr, y_dev.device_ptr());
    assert_eq!(*out["y"].structure, dense_structure(&[m]));
    let (htod, htod_bytes, dtoh, stream_waits, _) = stub.copies();
    assert_eq!(htod, 3, "indptr, indices and A's values; never x");
    assert_eq!(htod_bytes as usize, (m + 1) * 4 + nnz * 4 + nnz * 4);
    assert_eq!(dtoh, 0);
    assert_eq!(
        stream_waits, 3,
        "each cached array once, and the run (host values)"
    );
    assert_eq!(operand_cache::stats(), (1, 2, (m + 1) * 4 + nnz * 4));
    let log = stub.log();
    let rows = m.div_ceil(128);
    let stores = m.div_ceil(256);
    assert!(
        log.contains(&format!(
            "spmv_rows {rows} 1 1 128 1 1 0 s1\nspmv_store {stores} 1 1 256 1 1 0 s1\n"
        )),
        "{log}"
    );
    assert!(
        !log.contains("spmv_never"),
        "an empty grid is skipped: {log}"
    );
    assert_matches_interpreter(&y_outputs(&device, &y_dev, m), &host);

    // 2. A's values in device memory too: nothing is copied, nothing waited for; the
    // output is cleared and the scratch buffer made and freed, all on the stream.
    stub.clear();
    let on_device = HashMap::from([
        (
            "A".to_string(),
            DeviceInput::with_device_values(
                Arc::clone(&a.structure),
                array_of(&a_values_dev, DType::F32, vec![nnz]),
            ),
        ),
        ("x".to_string(), x()),
    ]);
    kernel
        .run_device(&on_device, &mut alloc, s, &options)
        .unwrap();
    assert_eq!(stub.copies(), (0, 0, 0, 0, 0), "no copy, no wait");
    assert_eq!(
        stub.log(),
        format!(
            "allocAsync {p} s1\nmemsetAsync {p} s1\nmemsetAsync {p} s1\n\
             spmv_rows {rows} 1 1 128 1 1 0 s1\nspmv_store {stores} 1 1 256 1 1 0 s1\nfreeAsync s1\n",
            p = m * 4
        )
    );
    assert_eq!(
        stub.live().0,
        baseline + 2,
        "the scratch buffer is freed; the cached arrays stay"
    );
    stream.synchronize().unwrap();
    assert_matches_interpreter(&y_outputs(&device, &y_dev, m), &host);
    assert_eq!(
        asked,
        vec![("y".to_string(), vec![m], DType::F32); 2],
        "alloc is asked once per run"
    );

    // 3. Operands the kernel cannot use are refused before anything is queued.
    let with_x = |x: DeviceArray| {
        HashMap::from([
            ("A".to_string(), on_device["A"].clone()),
            ("x".to_string(), DeviceInput::dense(x)),
        ])
    };
    let run = |inputs: &HashMap<String, DeviceInput<'_>>| {
        stub.clear();
        let mut alloc = |spec: &OutputSpec| Ok(array_of(&y_dev, spec.dtype, spec.shape.clone()));
        let err = kernel
            .run_device(inputs, &mut alloc, s, &options)
            .unwrap_err();
        assert_eq!(stub.log(), "", "nothing queued for {err}");
        assert_eq!(stub.copies().0, 0, "nothing copied for {err}");
        err
    };
    let x_array = array_of(&x_dev, DType::F32, vec![n]);
    let err = run(&with_x(DeviceArray {
        dtype: DType::F64,
        ..x_array.clone()
    }));
    assert!(
        matches!(&err, CudaError::OperandDType { operand, expected, found } if operand == "x" && expected == "f32" && found == "f64"),
        "{err:?}"
    );
    let x_matrix = |shape: Vec<usize>, strides: Vec<i64>| DeviceArray {
        shape,
        strides: Some(strides),
        ..x_array.clone()
    };
    // A column of a wider matrix is not contiguous; a row of one is.
    let err = run(&with_x(x_matrix(vec![n], vec![2])));
    assert!(
        matches!(&err, CudaError::NotContiguous { operand, .. } if operand == "x"),
        "{err:?}"
    );
    assert!(err.to_string().contains("contiguous()"), "{err}");
    stub.clear();
    let mut alloc_y = |spec: &OutputSpec| Ok(array_of(&y_dev, spec.dtype, spec.shape.clone()));
    kernel
        .run_device(
            &with_x(x_matrix(vec![n], vec![1])),
            &mut alloc_y,
            s,
            &options,
        )
        .unwrap();
    let err = run(&with_x(DeviceArray {
        device: 1,
        ..x_array.clone()
    }));
    assert!(
        matches!(
            err,
            CudaError::WrongDevice {
                found: 1,
                expected: 0,
                ..
            }
        ),
        "{err:?}"
    );
    let elsewhere = stub.alloc_foreign(n * 4, 1, false, false);
    let err = run(&with_x(DeviceArray {
        ptr: elsewhere,
        ..x_array.clone()
    }));
    assert!(
        matches!(
            err,
            CudaError::WrongDevice {
                found: 1,
                expected: 0,
                ..
            }
        ),
        "the driver's ordinal, not the caller's claim: {err:?}"
    );
    stub.free_foreign(elsewhere);
    let pinned = stub.alloc_foreign(n * 4, 0, true, false);
    let err = run(&with_x(DeviceArray {
        ptr: pinned,
        ..x_array.clone()
    }));
    assert!(
        matches!(&err, CudaError::NotDeviceMemory { reason, .. } if reason.contains("host memory")),
        "{err:?}"
    );
    stub.free_foreign(pinned);
    let other_context = stub.alloc_foreign(n * 4, 0, false, true);
    let err = run(&with_x(DeviceArray {
        ptr: other_context,
        ..x_array.clone()
    }));
    assert!(
        matches!(&err, CudaError::NotDeviceMemory { reason, .. } if reason.contains("another CUDA context")),
        "{err:?}"
    );
    stub.free_foreign(other_context);
    let host_x = f32_values(&host["x"]);
    let err = run(&with_x(DeviceArray {
        ptr: host_x.as_ptr() as u64,
        ..x_array.clone()
    }));
    assert!(
        matches!(&err, CudaError::NotDeviceMemory { operand, reason } if operand == "x" && reason.contains("first byte")),
        "{err:?}"
    );
    // A shape that claims more than was allocated.
    let short = device.upload(&vec![1.0f32; n - 1]).unwrap();
    let err = run(&with_x(array_of(&short, DType::F32, vec![n])));
    assert!(
        matches!(&err, CudaError::NotDeviceMemory { reason, .. } if reason.contains("last byte")),
        "{err:?}"
    );
    let err = run(&with_x(DeviceArray {
        ptr: x_dev.device_ptr() + 2,
        ..x_array.clone()
    }));
    assert!(
        matches!(&err, CudaError::NotDeviceMemory { reason, .. } if reason.contains("not aligned")),
        "{err:?}"
    );
    // A kernel whose vector loads need x 16-byte aligned: x one element into a wider
    // allocation is refused, naming x and its address, before anything is queued; x at
    // the start of its allocation (256-byte aligned) runs.
    let mut vector_plan = plan();
    vector_plan.kernels[0].alignments = vec![(1, 16)];
    let (vector_kernel, _vector_cache) =
        stub_kernel_with("stub_device_operands", vector_plan).expect("NVRTC loaded above");
    let wide = device.upload(&vec![1.0f32; n + 4]).unwrap();
    let shifted = wide.device_ptr() + 4;
    stub.clear();
    let mut alloc_y = |spec: &OutputSpec| Ok(array_of(&y_dev, spec.dtype, spec.shape.clone()));
    let err = vector_kernel
        .run_device(
            &with_x(DeviceArray {
                ptr: shifted,
                ..x_array.clone()
            }),
            &mut alloc_y,
            s,
            &options,
        )
        .unwrap_err();
    assert!(
        matches!(&err, CudaError::Misaligned { operand, address, bytes: 16 } if operand == "x" && *address == shifted),
        "{err:?}"
    );
    assert!(err.to_string().contains(&format!("{shifted:#x}")), "{err}");
    assert_eq!(stub.log(), "", "nothing queued for {err}");
    assert_eq!(stub.copies().0, 0, "nothing copied for {err}");
    stub.clear();
    vector_kernel
        .run_device(
            &with_x(array_of(&wide, DType::F32, vec![n])),
            &mut alloc_y,
            s,
            &options,
        )
        .unwrap();
    drop(wide);
    // A shape that does not fit A is the binding's error.
    let err = run(&with_x(array_of(&x_dev, DType::F32, vec![n - 1])));
    assert!(matches!(err, CudaError::Kernel(_)), "{err:?}");
    let err = run(&HashMap::from([
        ("A".to_string(), on_device["A"].clone()),
        ("x".to_string(), x()),
        ("z".to_string(), x()),
    ]));
    assert!(matches!(err, CudaError::Kernel(_)), "{err:?}");
    assert!(err.to_string().contains('z'), "{err}");
    // A's values: their count must be A's.
    let err = run(&HashMap::from([
        (
            "A".to_string(),
            DeviceInput::with_device_values(
                Arc::clone(&a.structure),
                array_of(&a_values_dev, DType::F32, vec![nnz - 1]),
            ),
        ),
        ("x".to_string(), x()),
    ]));
    assert!(matches!(err, CudaError::Kernel(_)), "{err:?}");

    // Outputs: the wrong size, the wrong type, or no memory at all.
    let refuse = |alloc: &mut dyn FnMut(&OutputSpec) -> Result<DeviceArray, String>| {
        stub.clear();
        let err = kernel
            .run_device(&on_device, alloc, s, &options)
            .unwrap_err();
        assert_eq!(stub.log(), "", "nothing queued for {err}");
        err
    };
    let err = refuse(&mut |_| Ok(array_of(&y_dev, DType::F32, vec![m - 1])));
    assert!(
        matches!(&err, CudaError::OperandSize { operand, .. } if operand == "y"),
        "{err:?}"
    );
    let err = refuse(&mut |spec| Ok(array_of(&y_dev, DType::F64, spec.shape.clone())));
    assert!(matches!(&err, CudaError::OperandDType { .. }), "{err:?}");
    let err = refuse(&mut |_| Err("out of memory".to_string()));
    assert!(
        matches!(&err, CudaError::OutputAllocation { output, reason } if output == "y" && reason == "out of memory"),
        "{err:?}"
    );

    // 4. A new matrix is never served the arrays of one that died, even at the same
    // address: the old entry goes (after a wait for the device) and the new one is
    // copied.
    let x_tensor = host["x"].clone();
    drop((with_host_a, on_device, a, host));
    // Another matrix, the same x (x_dev holds it).
    let mut host = inputs(2, m, n);
    host.insert("x".to_string(), x_tensor);
    stub.clear();
    let fresh = HashMap::from([
        ("A".to_string(), DeviceInput::host(host["A"].clone())),
        ("x".to_string(), x()),
    ]);
    let mut alloc_y = |spec: &OutputSpec| Ok(array_of(&y_dev, spec.dtype, spec.shape.clone()));
    kernel
        .run_device(&fresh, &mut alloc_y, s, &options)
        .unwrap();
    let (htod, _, _, _, context_waits) = stub.copies();
    assert_eq!(htod, 3, "the new structure's arrays and values");
    assert_eq!(
        context_waits, 1,
        "freeing the dead entry waited for the device"
    );
    assert_eq!(
        operand_cache::stats().0,
        1,
        "only the live structure is cached"
    );
    assert_matches_interpreter(&y_outputs(&device, &y_dev, m), &host);

    // 5. A structure over borrowed arrays is copied on every run, never cached.
    let owned_structure = &host["A"].structure;
    let borrowed = Arc::new(Structure {
        format: owned_structure.format.clone(),
        shape: owned_structure.shape.clone(),
        axes: owned_structure.axes.iter().map(AxisStorage::view).collect(),
    });
    for _ in 0..2 {
        stub.clear();
        let inputs = HashMap::from([
            (
                "A".to_string(),
                DeviceInput {
                    structure: Arc::clone(&borrowed),
                    values: DeviceValues::Host(host["A"].values.view()),
                },
            ),
            ("x".to_string(), x()),
        ]);
        kernel
            .run_device(&inputs, &mut alloc_y, s, &options)
            .unwrap();
        assert_eq!(stub.copies().0, 3, "indptr, indices and values, every run");
        assert_eq!(operand_cache::stats().0, 1);
    }
    assert_matches_interpreter(&y_outputs(&device, &y_dev, m), &host);

    // 6. Clearing the cache frees its arrays; the stream goes with its handle.
    drop(fresh);
    operand_cache::clear();
    assert_eq!(operand_cache::stats(), (0, 0, 0));
    drop((short, x_dev, a_values_dev, y_dev));
    assert_eq!(stub.live().0, 0, "every allocation freed");
    drop(stream);
    assert_eq!(stub.count(Counter::Streams), 0, "the stream is destroyed");
    println!("stub: device operand checks passed");
}

#[test]
fn without_stream_ordered_memory_a_run_waits_for_its_stream() {
    let Some(text) = run_under_stub("stub_without_stream_ordered_memory", &["STUB_NO_MEMPOOL"])
    else {
        return;
    };
    let settings = Settings::from_env();
    if settings.nvrtc.is_some() || Nvrtc::load(&settings).is_ok() {
        assert!(text.contains("stub: fallback checks passed"), "{text}");
    }
}

#[test]
#[ignore = "run by without_stream_ordered_memory_a_run_waits_for_its_stream under the stand-in"]
fn stub_without_stream_ordered_memory() {
    let Some(device) = stub_device("stub_without_stream_ordered_memory") else {
        return;
    };
    let Some((kernel, _cache)) = stub_kernel("stub_without_stream_ordered_memory") else {
        return;
    };
    let stub = Stub::open();
    let stream = device.create_stream().unwrap();
    let (m, n) = (129, 40);
    let host = inputs(3, m, n);
    let a = &host["A"];
    let x_dev = device.upload(&f32_values(&host["x"])).unwrap();
    let a_values_dev = device.upload(&f32_values(a)).unwrap();
    let y_dev = device.alloc_zeroed(m * 4).unwrap();
    let inputs = HashMap::from([
        (
            "A".to_string(),
            DeviceInput::with_device_values(
                Arc::clone(&a.structure),
                array_of(&a_values_dev, DType::F32, vec![a.values.len()]),
            ),
        ),
        (
            "x".to_string(),
            DeviceInput::dense(array_of(&x_dev, DType::F32, vec![n])),
        ),
    ]);
    let mut alloc = |spec: &OutputSpec| Ok(array_of(&y_dev, spec.dtype, spec.shape.clone()));
    kernel
        .run_device(
            &inputs,
            &mut alloc,
            stream.stream(),
            &KernelOptions::default(),
        )
        .unwrap();
    let live = stub.live().0;
    stub.clear();
    kernel
        .run_device(
            &inputs,
            &mut alloc,
            stream.stream(),
            &KernelOptions::default(),
        )
        .unwrap();
    let (htod, _, _, stream_waits, _) = stub.copies();
    assert_eq!(htod, 0);
    assert_eq!(
        stream_waits, 1,
        "plain run memory: the run waits before freeing it"
    );
    assert!(!stub.log().contains("allocAsync"), "{}", stub.log());
    assert_eq!(stub.live().0, live, "the scratch buffer is freed");
    assert_matches_interpreter(&y_outputs(&device, &y_dev, m), &host);
    operand_cache::clear();
    println!("stub: fallback checks passed");
}
