//! Rust errors as Python exceptions: `ValueError` with the Rust message followed by its
//! causes (each cause not already part of the message), so Python users read the same
//! text as the command line prints.

use std::error::Error;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::PyErr;

pyo3::create_exception!(
    sparsile,
    InternalError,
    PyRuntimeError,
    "A bug in Sparsile (a Rust panic): an ordinary exception, so `except Exception` catches it."
);

/// Runs `f` without the GIL. A panic in it is a bug in Sparsile, not the caller's; it
/// becomes [`InternalError`] (a `RuntimeError`) instead of PyO3's `PanicException`, which
/// derives from `BaseException` and escapes `except Exception`.
pub fn detached<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> T + Send,
{
    py.detach(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)))
        .map_err(|payload| {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_string());
            InternalError::new_err(format!(
                "internal error in Sparsile (a bug, please report it): {what}"
            ))
        })
}

/// The message of `e` and of its causes, joined with `: `.
pub fn message(e: &dyn Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

/// A `ValueError` carrying `e`'s message and causes.
pub fn value_error(e: &dyn Error) -> PyErr {
    PyValueError::new_err(message(e))
}

/// A `TypeError` with `text`.
pub fn type_error(text: impl Into<String>) -> PyErr {
    PyTypeError::new_err(text.into())
}
