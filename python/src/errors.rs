//! Rust errors as Python exceptions: `ValueError` with the Rust message followed by its
//! causes (each cause not already part of the message), so Python users read the same
//! text as the command line prints.

use std::error::Error;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::PyErr;

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
