//! `sparsile._native.AutoKernel`: a program whose schedule is chosen per input (the
//! tuning database, the learned selector, the static rule) or named once.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use std::collections::HashMap;

use crate::device::{device_options, run_device};
use crate::errors::{detached, message};
use crate::kernel::{input_args, outputs_dict, run_options, views};

/// A program compiled per input's choice.
#[pyclass(module = "sparsile._native", frozen)]
pub struct AutoKernel {
    inner: sparsile::AutoKernel,
}

#[pymethods]
impl AutoKernel {
    /// `program` in index notation; `recipe` a recipe spec for every input, or `auto`;
    /// `target` where it runs (`cpu`, `cuda`, `cuda-sim`).
    #[new]
    #[pyo3(signature = (program, recipe="auto", target="cpu"))]
    fn new(py: Python<'_>, program: &str, recipe: &str, target: &str) -> PyResult<AutoKernel> {
        let target: sparsile::Target = target.parse().map_err(PyValueError::new_err)?;
        let inner = detached(py, || {
            sparsile::AutoKernel::with_target(program, recipe, target).map_err(|e| message(&e))
        })?
        .map_err(PyValueError::new_err)?;
        Ok(AutoKernel { inner })
    }

    /// Runs the program on `inputs` (by tensor name).
    /// `out` maps output names to arrays written in place (see `out_arrays.rs`); those
    /// outputs are left out of the returned dict.
    #[pyo3(signature = (inputs, threads=None, out=None))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyDict>,
        threads: Option<usize>,
        out: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let args = input_args(inputs)?;
        let views = views(&args)?;
        let mut options = run_options(threads, None)?;
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

    /// Runs the program (target `cuda`) on operands in CUDA device memory, on `stream`;
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
        let options = device_options(params);
        run_device(py, inputs, alloc, stream, structures, |i, a, s| {
            self.inner
                .run_device(i, a, s, &options)
                .map_err(|e| crate::errors::message(&e))
        })
    }

    /// What would run for `inputs` with `threads` threads, as JSON: the operator, the
    /// candidate (format and recipe), where the choice came from, and the features.
    #[pyo3(signature = (inputs, threads))]
    fn explain(
        &self,
        py: Python<'_>,
        inputs: &Bound<'_, PyDict>,
        threads: usize,
    ) -> PyResult<String> {
        let args = input_args(inputs)?;
        let views = views(&args)?;
        let selection = detached(py, || self.inner.select(&views, threads.max(1)))?;
        Ok(explain_json(&selection))
    }

    /// The recipe the last call ran (`None` before the first).
    #[getter]
    fn recipe(&self) -> Option<String> {
        self.inner.last_selection().map(|s| s.candidate.recipe)
    }

    /// The last call's choice as JSON (see `explain`).
    fn last(&self) -> Option<String> {
        self.inner.last_selection().map(|s| explain_json(&s))
    }
}

fn explain_json(s: &sparsile::auto::Selection) -> String {
    let features: serde_json::Map<String, serde_json::Value> = s
        .features
        .as_ref()
        .map(|f| {
            sparsile::tune::features::FEATURE_NAMES
                .iter()
                .zip(&f.values)
                .map(|(n, v)| (n.to_string(), serde_json::json!(v)))
                .collect()
        })
        .unwrap_or_default();
    serde_json::json!({
        "op": s.op.name(),
        "format": s.candidate.format,
        "recipe": s.candidate.recipe,
        "source": s.source.name(),
        "note": s.note,
        "width": s.width,
        "trial": s.trial.iter().map(|c| c.id()).collect::<Vec<_>>(),
        "features": features,
    })
    .to_string()
}

/// Every named recipe with its parameters, as JSON (what `sparsile recipes` lists).
#[pyfunction]
pub fn recipes() -> String {
    serde_json::to_string(&sparsile::recipe::list()).expect("recipe infos serialise")
}
