//! `sparsile._native.Kernel`: an index-notation program compiled to native code.
//!
//! Inputs are passed by tensor name: a `Tensor`, a `(Tensor, values)` pair (the tensor's
//! structure with other values, borrowed from the array; used for gradients with respect
//! to sparse values), or a C-contiguous f16/f32/f64 NumPy array (bf16 as uint16 bits)
//! for a dense operand (borrowed, never copied). Dense outputs come back as NumPy arrays that own the
//! kernel's output memory; sparse outputs as `Tensor`s. Compiling and running release
//! the GIL.

use std::collections::HashMap;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use sparsile::formats::{Format, SparseTensor};
use sparsile::transform::schedule::Trace;
use sparsile::{CompileOptions, RunOptions, Stage};

use crate::arrays::{values_to_numpy, ValueArg};
use pyo3::exceptions::PyValueError;

use crate::errors::{detached, message, type_error, value_error};
use crate::tensor::{parse_format, Tensor};

/// A compiled program.
#[pyclass(module = "sparsile._native", frozen)]
pub struct Kernel {
    inner: sparsile::Kernel,
}

/// One input as passed from Python.
pub(crate) enum InputArg<'py> {
    Sparse(Bound<'py, Tensor>),
    SparseWithValues(Bound<'py, Tensor>, ValueArg<'py>),
    Dense(ValueArg<'py>),
}

impl<'py> InputArg<'py> {
    pub(crate) fn extract(name: &str, value: &Bound<'py, PyAny>) -> PyResult<InputArg<'py>> {
        if let Ok(t) = value.cast::<Tensor>() {
            return Ok(InputArg::Sparse(t.clone()));
        }
        if let Ok(pair) = value.cast::<PyTuple>() {
            if pair.len() == 2 {
                if let Ok(t) = pair.get_item(0)?.cast::<Tensor>() {
                    let values = pair.get_item(1)?.extract::<ValueArg<'py>>().map_err(|_| {
                        type_error(format!(
                            "input {name}: the values of a (Tensor, values) pair must be a float16, float32 or float64 array (bfloat16 as uint16 bits)"
                        ))
                    })?;
                    return Ok(InputArg::SparseWithValues(t.clone(), values));
                }
            }
        }
        match value.extract::<ValueArg<'py>>() {
            Ok(v) => Ok(InputArg::Dense(v)),
            Err(_) => Err(type_error(format!(
                "input {name}: expected a sparsile Tensor, a (Tensor, values) pair or a float16/float32/float64 array (bfloat16 as uint16 bits), got {}",
                value.get_type().name()?
            ))),
        }
    }

    pub(crate) fn view(&self, name: &str) -> PyResult<SparseTensor<'_>> {
        match self {
            InputArg::Sparse(t) => Ok(t.get().inner.view()),
            InputArg::SparseWithValues(t, values) => {
                let t = &t.get().inner;
                let values = values.borrow(&format!("values of {name}"))?;
                if values.len() != t.nnz_stored() {
                    return Err(pyo3::exceptions::PyValueError::new_err(format!(
                        "input {name}: expected {} values (one per stored position), found {}",
                        t.nnz_stored(),
                        values.len()
                    )));
                }
                Ok(SparseTensor {
                    structure: Arc::clone(&t.structure),
                    values,
                })
            }
            InputArg::Dense(v) => v.dense(name),
        }
    }
}

/// The inputs of a run, by tensor name.
pub(crate) fn input_args<'py>(
    inputs: &Bound<'py, PyDict>,
) -> PyResult<Vec<(String, InputArg<'py>)>> {
    inputs
        .iter()
        .map(|(k, v)| {
            let name: String = k
                .extract()
                .map_err(|_| type_error("input names must be strings"))?;
            let arg = InputArg::extract(&name, &v)?;
            Ok((name, arg))
        })
        .collect()
}

/// The inputs as tensors viewing the caller's memory.
pub(crate) fn views<'a>(
    args: &'a [(String, InputArg<'_>)],
) -> PyResult<HashMap<String, SparseTensor<'a>>> {
    args.iter()
        .map(|(n, a)| Ok((n.clone(), a.view(n)?)))
        .collect()
}

/// Run options from Python's arguments (a thread count of 0 is refused).
pub(crate) fn run_options(
    threads: Option<usize>,
    params: Option<HashMap<String, i64>>,
) -> PyResult<RunOptions> {
    if threads == Some(0) {
        return Err(PyValueError::new_err("threads must be at least 1"));
    }
    Ok(RunOptions {
        threads,
        params: params.unwrap_or_default(),
        ..RunOptions::default()
    })
}

/// Outputs by name: dense ones as NumPy arrays owning the kernel's memory, sparse ones
/// as `Tensor`s.
pub(crate) fn outputs_dict(
    py: Python<'_>,
    outputs: sparsile::runtime::Outputs,
) -> PyResult<Bound<'_, PyDict>> {
    let result = PyDict::new(py);
    for (name, tensor) in outputs {
        if *tensor.format() == Format::Dense {
            let shape = tensor.shape().to_vec();
            result.set_item(&name, values_to_numpy(py, tensor.values, &shape)?)?;
        } else {
            result.set_item(&name, Bound::new(py, Tensor { inner: tensor })?)?;
        }
    }
    Ok(result)
}

fn parse_stage(stage: &str) -> PyResult<Stage> {
    stage
        .parse::<Stage>()
        .map_err(pyo3::exceptions::PyValueError::new_err)
}

#[pymethods]
impl Kernel {
    /// Compiles `program` (index notation). `formats` replaces declared formats by tensor
    /// name; `trace` (JSON) replays a recorded schedule instead of the default one;
    /// `index_like` gives tensors whose index types (i32/i64) the kernel is specialised to.
    #[new]
    #[pyo3(signature = (program, formats=None, trace=None, index_like=None, target="cpu"))]
    fn new(
        py: Python<'_>,
        program: &str,
        formats: Option<HashMap<String, String>>,
        trace: Option<&str>,
        index_like: Option<HashMap<String, Bound<'_, Tensor>>>,
        target: &str,
    ) -> PyResult<Kernel> {
        let target: sparsile::Target = target.parse().map_err(PyValueError::new_err)?;
        let formats = formats
            .unwrap_or_default()
            .into_iter()
            .map(|(name, f)| Ok((name, parse_format(&f)?)))
            .collect::<PyResult<HashMap<String, Format>>>()?;
        let trace = trace
            .map(|t| Trace::from_json(t).map_err(|e| value_error(&e)))
            .transpose()?;
        let index_like = index_like.unwrap_or_default();
        let inputs: HashMap<String, SparseTensor<'_>> = index_like
            .iter()
            .map(|(n, t)| (n.clone(), t.get().inner.view()))
            .collect();
        let options = CompileOptions {
            formats,
            trace,
            target,
        };
        let inner = detached(py, || {
            sparsile::compile_with(program, &inputs, &options).map_err(|e| message(&e))
        })?
        .map_err(PyValueError::new_err)?;
        Ok(Kernel { inner })
    }

    /// Runs the kernel. `inputs` maps tensor names to `Tensor`s, `(Tensor, values)` pairs
    /// or dense arrays; returns the outputs by tensor name.
    /// `out` maps output names to arrays written in place (see `out_arrays.rs`); those
    /// outputs are left out of the returned dict.
    #[pyo3(signature = (inputs, threads=None, params=None, out=None))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyDict>,
        threads: Option<usize>,
        params: Option<HashMap<String, i64>>,
        out: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let args = input_args(inputs)?;
        let views = views(&args)?;
        let mut options = run_options(threads, params)?;
        let (outs, buffers) = crate::out_arrays::out_args(out)?;
        options.out = buffers;
        let outputs = detached(py, || {
            self.inner.run(&views, &options).map_err(|e| message(&e))
        })?
        .map_err(PyValueError::new_err)?;
        drop(views);
        drop(outs);
        outputs_dict(py, outputs)
    }

    /// Runs the kernel (target `cuda`) on operands in CUDA device memory, on `stream`;
    /// `alloc(name, shape, dtype)` returns each output's `DeviceArray` (see
    /// `device.rs`). Returns `None` per dense output, a structure `Tensor` per sparse one
    /// when `structures`.
    #[pyo3(signature = (inputs, alloc, stream, params=None, structures=false))]
    fn run_device<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyDict>,
        alloc: Py<PyAny>,
        stream: u64,
        params: Option<HashMap<String, i64>>,
        structures: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let options = crate::device::device_options(params);
        crate::device::run_device(py, inputs, alloc, stream, structures, |i, a, s| {
            self.inner
                .run_device(i, a, s, &options)
                .map_err(|e| crate::errors::message(&e))
        })
    }

    /// The IR of one stage (`stage1`, `stage2`, `stage3`) or the generated source (`c` or
    /// `cuda`: the kernel's, whichever it is).
    fn ir(&self, stage: &str) -> PyResult<String> {
        Ok(self.inner.ir(parse_stage(stage)?))
    }

    /// Where the kernel runs: `cpu`, `cuda` or `cuda-sim`.
    #[getter]
    fn target(&self) -> &'static str {
        self.inner.target().name()
    }

    /// `(outcome, seconds)`: whether the native object came from the cache (`hit`) or was
    /// compiled now (`miss`), and the time that took; `("interpreted", 0.0)` for a kernel
    /// that runs in an interpreter.
    fn compile_info(&self) -> (String, f64) {
        match self.inner.compile_info() {
            Some(info) => (
                format!("{:?}", info.outcome).to_lowercase(),
                info.duration.as_secs_f64(),
            ),
            None => ("interpreted".to_string(), 0.0),
        }
    }
}
