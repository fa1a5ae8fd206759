//! `Kernel::run_device` and `AutoKernel::run_device`: operands in device memory, by
//! declared tensor name, on a caller's stream.
//!
//! Everywhere: kernels of other targets refuse device operands with a message that
//! says so; on a machine without a GPU building the `cuda` kernel is the driver's
//! typed error. Where a GPU is (and NVRTC), SpMM, SpMV and SDDMM run on operands
//! uploaded by the test, with outputs the test allocates, and match the interpreter;
//! a decomposing recipe (`gpu_hyb`) refuses values that are only on the device and
//! runs with mirrored ones (skipped, saying so, elsewhere).

mod support;

use std::collections::HashMap;
use std::sync::Arc;

use sparsile::formats::{Format, SparseTensor, Values};
use sparsile::ir::DType;
use sparsile::runtime::cuda::{
    CudaDevice, CudaError, CudaStream, DeviceArray, DeviceBuffer, DeviceInput, DeviceValues,
    OutputSpec,
};
use sparsile::{evaluate, AutoKernel, CompileError, RunOptions, Target};
use support::{close, dense, matrix, rng};

const SPMM: &str =
    "tensor A: f32[m, n] csr\ntensor X: f32[n, k]\ntensor Y: f32[m, k]\nY[i,c] = A[i,j] * X[j,c]\n";
const SDDMM: &str = "tensor A: f32[m, n] csr\ntensor X: f32[m, k]\ntensor Y: f32[n, k]\ntensor O: f32[m, n] csr\nO[i,j] = A[i,j] * X[i,c] * Y[j,c]\n";

fn no_alloc(_: &OutputSpec) -> Result<DeviceArray, String> {
    Err("no output expected".to_string())
}

#[test]
fn kernels_of_other_targets_refuse_device_operands() {
    let x = DeviceInput::dense(DeviceArray::contiguous(0, DType::F32, vec![4, 2], 0));
    let inputs = HashMap::from([("X".to_string(), x)]);
    for target in [Target::Cpu, Target::CudaSim] {
        let k = AutoKernel::with_target(SPMM, "auto", target).unwrap();
        let err = k
            .run_device(
                &inputs,
                &mut no_alloc,
                CudaStream::DEFAULT,
                &RunOptions::default(),
            )
            .unwrap_err();
        assert!(matches!(err, CompileError::Target(_)), "{err:?}");
        assert!(
            err.to_string().contains(&format!(
                "run on the cuda target; this kernel's target is {target}"
            )),
            "{err}"
        );
    }
    let kernel = sparsile::compile(SPMM).unwrap();
    let err = kernel
        .run_device(
            &inputs,
            &mut no_alloc,
            CudaStream::DEFAULT,
            &RunOptions::default(),
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("this kernel's target is cpu"),
        "{err}"
    );
}

/// A device copy of `t`'s f32 values.
fn upload(device: &CudaDevice, t: &SparseTensor<'_>) -> DeviceBuffer {
    match &t.values {
        Values::F32(v) => device.upload(v).unwrap(),
        other => panic!("f32 expected, got {}", other.dtype()),
    }
}

fn array(b: &DeviceBuffer, shape: Vec<usize>) -> DeviceArray {
    DeviceArray::contiguous(b.device_ptr(), DType::F32, shape, 0)
}

#[test]
fn gpu_kernels_run_on_device_operands() {
    let device = match CudaDevice::open(0) {
        Ok(d) => d,
        Err(e) => {
            // The driver's typed error, from the kernel too.
            let k = AutoKernel::with_target(SPMM, "auto", Target::Cuda).unwrap();
            let x = DeviceInput::dense(DeviceArray::contiguous(0, DType::F32, vec![3, 2], 0));
            let a = SparseTensor::from_coo_with(
                &matrix("random", 3, 3, &mut rng(1)),
                &Format::Csr,
                DType::F32,
            )
            .unwrap();
            let inputs = HashMap::from([
                ("A".to_string(), DeviceInput::host(a)),
                ("X".to_string(), x),
            ]);
            let err = k
                .run_device(
                    &inputs,
                    &mut no_alloc,
                    CudaStream::DEFAULT,
                    &RunOptions::default(),
                )
                .unwrap_err();
            assert!(
                matches!(
                    err,
                    CompileError::Cuda(
                        CudaError::DriverMissing
                            | CudaError::NoDevice { .. }
                            | CudaError::NvrtcMissing { .. }
                    )
                ),
                "{err:?}"
            );
            println!("skipped the GPU runs: {e}");
            return;
        }
    };
    let settings = sparsile::ir::settings::Settings::from_env();
    if let Err(e) = sparsile::runtime::cuda::Nvrtc::load(&settings) {
        assert!(settings.nvrtc.is_none(), "SPARSILE_NVRTC is set: {e}");
        println!("skipped the GPU runs on {}: no NVRTC: {e}", device.name());
        return;
    }
    let stream = device.create_stream().unwrap();
    let mut g = rng(7);
    let (m, n, k) = (300, 200, 40);
    let a = SparseTensor::from_coo_with(&matrix("random", m, n, &mut g), &Format::Csr, DType::F32)
        .unwrap();
    let x = dense(&[n, k], DType::F32, &mut g);
    let xs = dense(&[m, k], DType::F32, &mut g);
    let a_values = upload(&device, &a);
    let x_dev = upload(&device, &x);
    let xs_dev = upload(&device, &xs);
    let out = device.alloc_zeroed(m * k * 4).unwrap();
    let nnz = a.values.len();
    let sddmm_out = device.alloc_zeroed(nnz * 4).unwrap();

    // SpMM with A's values on the device; the output asked for by tensor name.
    let spmm = AutoKernel::with_target(SPMM, "auto", Target::Cuda).unwrap();
    let inputs = HashMap::from([
        (
            "A".to_string(),
            DeviceInput::with_device_values(Arc::clone(&a.structure), array(&a_values, vec![nnz])),
        ),
        (
            "X".to_string(),
            DeviceInput::dense(array(&x_dev, vec![n, k])),
        ),
    ]);
    let mut asked = Vec::new();
    let mut alloc = |o: &OutputSpec| {
        asked.push((o.name.clone(), o.shape.clone()));
        Ok(array(&out, o.shape.clone()))
    };
    let got = spmm
        .run_device(&inputs, &mut alloc, stream.stream(), &RunOptions::default())
        .unwrap();
    assert_eq!(asked, vec![("Y".to_string(), vec![m, k])]);
    assert_eq!(got["Y"].array.ptr, out.device_ptr());
    stream.synchronize().unwrap();
    let mut y = vec![0f32; m * k];
    device.download(&out, &mut y).unwrap();
    let host = HashMap::from([("A".to_string(), a.clone()), ("X".to_string(), x.clone())]);
    let want = evaluate(SPMM, &host).unwrap()["Y"].values.to_f64_vec();
    close(
        &y.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
        &want,
        1e-4,
        "Y",
    );

    // SDDMM: a sparse output is its values, nnz of them.
    let sddmm = AutoKernel::with_target(SDDMM, "auto", Target::Cuda).unwrap();
    let inputs = HashMap::from([
        ("A".to_string(), DeviceInput::host(a.clone())),
        (
            "X".to_string(),
            DeviceInput::dense(array(&xs_dev, vec![m, k])),
        ),
        (
            "Y".to_string(),
            DeviceInput::dense(array(&x_dev, vec![n, k])),
        ),
    ]);
    let mut alloc = |o: &OutputSpec| {
        assert_eq!((o.name.as_str(), o.shape.clone()), ("O", vec![nnz]));
        Ok(array(&sddmm_out, o.shape.clone()))
    };
    let got = sddmm
        .run_device(&inputs, &mut alloc, stream.stream(), &RunOptions::default())
        .unwrap();
    stream.synchronize().unwrap();
    let mut o = vec![0f32; nnz];
    device.download(&sddmm_out, &mut o).unwrap();
    let host = HashMap::from([
        ("A".to_string(), a.clone()),
        ("X".to_string(), xs.clone()),
        ("Y".to_string(), x.clone()),
    ]);
    let interpreted = evaluate(SDDMM, &host).unwrap();
    assert_eq!(*got["O"].structure, *interpreted["O"].structure);
    let want = interpreted["O"].values.to_f64_vec();
    close(
        &o.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
        &want,
        1e-4,
        "O",
    );

    // gpu_hyb decomposes A on the host: values only on the device are refused,
    // mirrored ones run.
    let hyb = AutoKernel::with_target(SPMM, "gpu_hyb:k=2", Target::Cuda).unwrap();
    let only_device = HashMap::from([
        (
            "A".to_string(),
            DeviceInput::with_device_values(Arc::clone(&a.structure), array(&a_values, vec![nnz])),
        ),
        (
            "X".to_string(),
            DeviceInput::dense(array(&x_dev, vec![n, k])),
        ),
    ]);
    let mut alloc = |o: &OutputSpec| Ok(array(&out, o.shape.clone()));
    let err = hyb
        .run_device(
            &only_device,
            &mut alloc,
            stream.stream(),
            &RunOptions::default(),
        )
        .unwrap_err();
    assert!(
        matches!(&err, CompileError::Cuda(CudaError::NeedsHostValues { input, .. }) if input == "A"),
        "{err:?}"
    );
    let mirrored = HashMap::from([
        (
            "A".to_string(),
            DeviceInput {
                structure: Arc::clone(&a.structure),
                values: DeviceValues::Mirrored {
                    host: a.values.view(),
                    device: array(&a_values, vec![nnz]),
                },
            },
        ),
        (
            "X".to_string(),
            DeviceInput::dense(array(&x_dev, vec![n, k])),
        ),
    ]);
    hyb.run_device(
        &mirrored,
        &mut alloc,
        stream.stream(),
        &RunOptions::default(),
    )
    .unwrap();
    stream.synchronize().unwrap();
    device.download(&out, &mut y).unwrap();
    let host = HashMap::from([("A".to_string(), a.clone()), ("X".to_string(), x.clone())]);
    let want = evaluate(SPMM, &host).unwrap()["Y"].values.to_f64_vec();
    close(
        &y.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
        &want,
        1e-4,
        "Y",
    );
    sparsile::runtime::cuda::operand_cache::clear();
    println!("SpMM, SDDMM and gpu_hyb ran on {}", device.name());
}
