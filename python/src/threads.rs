//! The process-wide thread count of kernel calls (`sparsile.set_num_threads`).

use pyo3::prelude::*;

use crate::errors::value_error;

/// Sets the thread count of every later kernel call that does not pass `threads=`
/// (`None` returns to the default: `SPARSILE_NUM_THREADS`, else every core).
#[pyfunction]
#[pyo3(signature = (threads))]
pub fn set_num_threads(threads: Option<i64>) -> PyResult<()> {
    let threads = threads
        .map(|t| {
            usize::try_from(t).map_err(|_| {
                pyo3::exceptions::PyValueError::new_err(format!(
                    "a thread count of {t} was asked for; give at least 1"
                ))
            })
        })
        .transpose()?;
    sparsile::runtime::jit::set_num_threads(threads).map_err(|e| value_error(&e))
}

/// The thread count set by `set_num_threads`, or `None`.
#[pyfunction]
pub fn num_threads_set() -> Option<usize> {
    sparsile::runtime::jit::num_threads_set()
}

/// The thread count a kernel call uses when none is set or passed.
#[pyfunction]
pub fn default_num_threads() -> usize {
    sparsile::runtime::jit::default_threads(&sparsile::ir::settings::Settings::from_env())
}
