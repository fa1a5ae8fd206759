//! The on-disk kernel cache from Python (`sparsile.cache_info`, `sparsile.clear_cache`):
//! dictionaries of what `sparsile::runtime::jit::{cache_info, clear_cache}` report.

use std::time::{SystemTime, UNIX_EPOCH};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use sparsile::ir::settings::Settings;
use sparsile::runtime::jit;

use crate::errors::{detached, value_error};

/// Seconds since the epoch of `t`.
fn epoch_seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// What the kernel cache folder holds (the folder is read, never created or changed).
#[pyfunction]
pub fn cache_info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let info =
        detached(py, || jit::cache_info(&Settings::from_env()))?.map_err(|e| value_error(&e))?;
    let d = PyDict::new(py);
    d.set_item("dir", info.dir.display().to_string())?;
    d.set_item("exists", info.exists)?;
    d.set_item("checks_pass", info.exists && info.problem.is_none())?;
    d.set_item("problem", info.problem.clone())?;
    d.set_item("kernels", info.kernels())?;
    d.set_item("cpu_kernels", info.cpu_kernels)?;
    d.set_item("cuda_kernels", info.cuda_kernels)?;
    d.set_item("files", info.files)?;
    d.set_item("bytes", info.bytes)?;
    d.set_item("oldest", info.oldest.map(epoch_seconds))?;
    d.set_item("newest", info.newest.map(epoch_seconds))?;
    d.set_item("skipped", info.skipped)?;
    Ok(d)
}

/// Removes the compiled kernels from the kernel cache; what was removed.
#[pyfunction]
pub fn clear_cache(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let report =
        detached(py, || jit::clear_cache(&Settings::from_env()))?.map_err(|e| value_error(&e))?;
    let d = PyDict::new(py);
    d.set_item("dir", report.dir.display().to_string())?;
    d.set_item("kernels_removed", report.kernels_removed)?;
    d.set_item("files_removed", report.files_removed)?;
    d.set_item("bytes_removed", report.bytes_removed)?;
    d.set_item("skipped", report.skipped)?;
    Ok(d)
}
