//! Device runs from Python: `DeviceArray` (an array in CUDA device memory, described by
//! its address, shape, strides, dtype and device) and `run_device` on `Kernel` and
//! `AutoKernel`.
//!
//! The Python layer (`sparsile/_cuda.py`) builds `DeviceArray`s from PyTorch CUDA tensors
//! and CuPy arrays (their `data_ptr()` / `__cuda_array_interface__`), without copying
//! them, and passes the producer's current stream. Inputs, by tensor name:
//! - a `DeviceArray`: a dense operand in device memory;
//! - a `Tensor`: a sparse operand in host memory (structure cached on the device, values
//!   copied every run);
//! - `(Tensor, DeviceArray)`: the tensor's structure with values in device memory;
//! - `(Tensor, DeviceArray, True)`: the same, where the device values are a copy of
//!   the tensor's own (host work, such as a decomposition, reads those);
//! - `(Tensor, array)`: the tensor's structure with other values in host memory.
//!
//! Outputs are allocated by the Python callable `alloc(name, shape, dtype)`, which
//! returns a `DeviceArray` over memory it keeps alive; the kernels write it in place.
//! An exception raised by `alloc` is raised again as it was.
//! Everything the driver and the runtime check (device memory, device, context,
//! contiguity, dtype, sizes) comes back as `ValueError` with the runtime's message.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use sparsile::formats::Format;
use sparsile::ir::DType;
use sparsile::runtime::cuda::{
    CudaStream, DeviceArray as RtDeviceArray, DeviceInput, DeviceOutput, DeviceValues, OutputSpec,
};
use sparsile::RunOptions;

use crate::arrays::ValueArg;
use crate::errors::{detached, type_error};
use crate::tensor::Tensor;

/// An array in CUDA device memory that the caller owns.
#[pyclass(module = "sparsile._native", frozen)]
pub struct DeviceArray {
    pub inner: RtDeviceArray,
}

fn parse_dtype(dtype: &str) -> PyResult<DType> {
    match dtype {
        "f16" | "float16" => Ok(DType::F16),
        "bf16" | "bfloat16" => Ok(DType::BF16),
        "f32" | "float32" => Ok(DType::F32),
        "f64" | "float64" => Ok(DType::F64),
        "i32" | "int32" => Ok(DType::I32),
        "i64" | "int64" => Ok(DType::I64),
        other => Err(PyTypeError::new_err(format!(
            "a device array's dtype must be f16, bf16, f32, f64, i32 or i64, got {other:?}"
        ))),
    }
}

#[pymethods]
impl DeviceArray {
    /// `ptr`: the device address of the first element; `shape`; `dtype` (`f16`, `bf16`,
    /// `f32`, `f64`, `i32`, `i64`); `device`: the CUDA device ordinal; `strides` in elements (checked
    /// to be C-contiguous), or `None` for a C-contiguous array.
    #[new]
    #[pyo3(signature = (ptr, shape, dtype, device, strides=None))]
    fn new(
        ptr: u64,
        shape: Vec<usize>,
        dtype: &str,
        device: usize,
        strides: Option<Vec<i64>>,
    ) -> PyResult<DeviceArray> {
        if strides.as_ref().is_some_and(|s| s.len() != shape.len()) {
            return Err(PyValueError::new_err(format!(
                "strides {strides:?} do not match shape {shape:?}"
            )));
        }
        Ok(DeviceArray {
            inner: RtDeviceArray {
                ptr,
                dtype: parse_dtype(dtype)?,
                shape,
                strides,
                device,
            },
        })
    }

    #[getter]
    fn ptr(&self) -> u64 {
        self.inner.ptr
    }

    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.inner.shape.clone()
    }

    #[getter]
    fn dtype(&self) -> String {
        self.inner.dtype.to_string()
    }

    #[getter]
    fn device(&self) -> usize {
        self.inner.device
    }

    fn __repr__(&self) -> String {
        format!(
            "sparsile.DeviceArray(ptr={:#x}, shape={:?}, dtype={}, device={})",
            self.inner.ptr, self.inner.shape, self.inner.dtype, self.inner.device
        )
    }
}

/// One input of a device run, as passed from Python.
enum DeviceArg<'py> {
    Dense(RtDeviceArray),
    Host(Bound<'py, Tensor>),
    HostValues(Bound<'py, Tensor>, ValueArg<'py>),
    DeviceValues(Bound<'py, Tensor>, RtDeviceArray, bool),
}

fn extract<'py>(name: &str, value: &Bound<'py, PyAny>) -> PyResult<DeviceArg<'py>> {
    if let Ok(a) = value.cast::<DeviceArray>() {
        return Ok(DeviceArg::Dense(a.get().inner.clone()));
    }
    if let Ok(t) = value.cast::<Tensor>() {
        return Ok(DeviceArg::Host(t.clone()));
    }
    if let Ok(tuple) = value.cast::<PyTuple>() {
        if let (2 | 3, Ok(first)) = (tuple.len(), tuple.get_item(0)) {
            if let Ok(t) = first.cast::<Tensor>() {
                let second = tuple.get_item(1)?;
                let mirrored = match tuple.len() {
                    3 => tuple.get_item(2)?.extract::<bool>()?,
                    _ => false,
                };
                if let Ok(a) = second.cast::<DeviceArray>() {
                    return Ok(DeviceArg::DeviceValues(
                        t.clone(),
                        a.get().inner.clone(),
                        mirrored,
                    ));
                }
                if tuple.len() == 2 {
                    if let Ok(v) = second.extract::<ValueArg<'_>>() {
                        return Ok(DeviceArg::HostValues(t.clone(), v));
                    }
                }
            }
        }
    }
    Err(type_error(format!(
        "input {name}: expected a DeviceArray, a sparsile Tensor, or a (Tensor, values) pair, got {}",
        value.get_type().name()?
    )))
}

fn inputs<'py>(dict: &Bound<'py, PyDict>) -> PyResult<Vec<(String, DeviceArg<'py>)>> {
    dict.iter()
        .map(|(k, v)| {
            let name: String = k
                .extract()
                .map_err(|_| type_error("input names must be strings"))?;
            let arg = extract(&name, &v)?;
            Ok((name, arg))
        })
        .collect()
}

fn device_inputs<'a>(
    args: &'a [(String, DeviceArg<'_>)],
) -> PyResult<HashMap<String, DeviceInput<'a>>> {
    args.iter()
        .map(|(name, arg)| {
            let input = match arg {
                DeviceArg::Dense(a) => DeviceInput::dense(a.clone()),
                DeviceArg::Host(t) => DeviceInput::host(t.get().inner.view()),
                DeviceArg::HostValues(t, v) => DeviceInput {
                    structure: Arc::clone(&t.get().inner.structure),
                    values: DeviceValues::Host(v.borrow(&format!("values of {name}"))?),
                },
                DeviceArg::DeviceValues(t, a, mirrored) => {
                    let t = &t.get().inner;
                    DeviceInput {
                        structure: Arc::clone(&t.structure),
                        values: if *mirrored {
                            DeviceValues::Mirrored {
                                host: t.values.view(),
                                device: a.clone(),
                            }
                        } else {
                            DeviceValues::Device(a.clone())
                        },
                    }
                }
            };
            Ok((name.clone(), input))
        })
        .collect()
}

/// Runs `run` (a kernel's device run, its error as a message) on `inputs` with outputs
/// from `alloc` and
/// returns, by output name, `None` for a dense output and, for a sparse one when
/// `structures`, a `Tensor` with the output's structure and zero values (its values
/// are in the array `alloc` gave).
pub(crate) fn run_device<'py, F>(
    py: Python<'py>,
    inputs_dict: &Bound<'py, PyDict>,
    alloc: Py<PyAny>,
    stream: u64,
    structures: bool,
    run: F,
) -> PyResult<Bound<'py, PyDict>>
where
    F: FnOnce(
            &HashMap<String, DeviceInput<'_>>,
            &mut dyn FnMut(&OutputSpec) -> Result<RtDeviceArray, String>,
            CudaStream,
        ) -> Result<HashMap<String, DeviceOutput>, String>
        + Send,
{
    let args = inputs(inputs_dict)?;
    let device_inputs = device_inputs(&args)?;
    // An exception of `alloc`, raised again after the run.
    let raised: Mutex<Option<PyErr>> = Mutex::new(None);
    let mut allocate = |spec: &OutputSpec| -> Result<RtDeviceArray, String> {
        Python::attach(|py| {
            let result = alloc
                .call1(
                    py,
                    (
                        spec.name.as_str(),
                        spec.shape.clone(),
                        spec.dtype.to_string(),
                    ),
                )
                .and_then(|o| {
                    o.bind(py)
                        .cast::<DeviceArray>()
                        .map(|a| a.get().inner.clone())
                        .map_err(|_| {
                            PyTypeError::new_err(format!(
                                "alloc must return a DeviceArray for output {}",
                                spec.name
                            ))
                        })
                });
            result.map_err(|e| {
                let text = e.to_string();
                *raised.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                text
            })
        })
    };
    // SAFETY: the Python layer passes the current stream of the device its arrays are
    // on, as PyTorch or CuPy report it (a stream of that device's primary context).
    let stream = unsafe { CudaStream::from_raw(stream) };
    let result = detached(py, || run(&device_inputs, &mut allocate, stream))?;
    drop(device_inputs);
    let outputs = match result {
        Ok(o) => o,
        Err(text) => {
            if let Some(e) = raised.lock().unwrap_or_else(|p| p.into_inner()).take() {
                return Err(e);
            }
            return Err(PyValueError::new_err(text));
        }
    };
    let dict = PyDict::new(py);
    for (name, output) in outputs {
        let structure = &output.structure;
        if structures && structure.format != Format::Dense {
            let count = output.array.len().unwrap_or(0);
            let values = match output.array.dtype {
                DType::F64 => sparsile::formats::Values::F64(vec![0.0; count].into()),
                DType::F16 => sparsile::formats::Values::F16(vec![half::f16::ZERO; count].into()),
                DType::BF16 => {
                    sparsile::formats::Values::BF16(vec![half::bf16::ZERO; count].into())
                }
                _ => sparsile::formats::Values::F32(vec![0.0; count].into()),
            };
            let tensor = sparsile::formats::SparseTensor {
                structure: Arc::clone(structure),
                values,
            };
            dict.set_item(name, Bound::new(py, Tensor { inner: tensor })?)?;
        } else {
            dict.set_item(name, py.None())?;
        }
    }
    Ok(dict)
}

/// Run options for a device run (threads do not apply; `params` do).
pub(crate) fn device_options(params: Option<HashMap<String, i64>>) -> RunOptions {
    RunOptions {
        params: params.unwrap_or_default(),
        ..RunOptions::default()
    }
}

/// `(structures, arrays, bytes)`: what the runtime keeps on the device of sparse
/// operands' structures between device runs.
#[pyfunction]
pub fn device_cache_stats() -> (usize, usize, usize) {
    sparsile::runtime::cuda::operand_cache::stats()
}

/// Frees what the runtime keeps on the device of sparse operands' structures (after
/// waiting for the work that may use it).
#[pyfunction]
pub fn device_cache_clear(py: Python<'_>) -> PyResult<()> {
    detached(py, sparsile::runtime::cuda::operand_cache::clear)
}
