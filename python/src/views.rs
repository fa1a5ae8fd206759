//! Read-only NumPy views of a native tensor's arrays, without copies.
//!
//! `Tensor.array_view("values")`, `("indptr", axis)` and `("indices", axis)` return a
//! one-dimensional NumPy array over the tensor's own memory, with the native tensor as the
//! array's base (so it stays alive as long as the view does). The Python layer marks the
//! views read-only: the native tensor is immutable (a frozen class whose arrays are never
//! written after construction, structure shared through an `Arc`), so a view can never
//! observe a change, and must not make one.
//!
//! Half-precision values are viewed as their 16-bit patterns (`uint16`); the Python layer
//! reinterprets f16 as `float16`.
//!
//! ```text
//! >>> v = native.array_view("values", 0)      # no copy
//! >>> v.base is native
//! True
//! ```

use numpy::ndarray::ArrayView1;
use numpy::PyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use sparsile::formats::{IndexArray, Values};

use crate::tensor::Tensor;

fn borrowed<'py, T: numpy::Element>(data: &[T], owner: &Bound<'py, Tensor>) -> Bound<'py, PyAny> {
    let view = ArrayView1::from(data);
    // SAFETY: `data` is owned by `owner`'s native tensor (its values, or an axis array of
    // its `Arc`-shared structure), which is never mutated or moved while `owner` lives;
    // NumPy keeps `owner` alive as the array's base for as long as the array exists.
    unsafe { PyArray1::borrow_from_array(&view, owner.clone().into_any()) }.into_any()
}

fn index_view<'py>(index: &IndexArray<'_>, owner: &Bound<'py, Tensor>) -> Bound<'py, PyAny> {
    match index {
        IndexArray::I32(v) => borrowed(v, owner),
        IndexArray::I64(v) => borrowed(v, owner),
    }
}

/// The view of `what` (`values`, `indptr` or `indices`) of `axis` (ignored for values).
pub fn array_view<'py>(
    owner: &Bound<'py, Tensor>,
    what: &str,
    axis: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let tensor = &owner.get().inner;
    if what == "values" {
        return Ok(match &tensor.values {
            Values::F32(v) => borrowed(v, owner),
            Values::F64(v) => borrowed(v, owner),
            Values::F16(v) => {
                // SAFETY: `half::f16` is a `repr(transparent)` 16-bit pattern.
                let bits = unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u16>(), v.len()) };
                borrowed(bits, owner)
            }
            Values::BF16(v) => {
                // SAFETY: `half::bf16` is a `repr(transparent)` 16-bit pattern.
                let bits = unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u16>(), v.len()) };
                borrowed(bits, owner)
            }
        });
    }
    let axes = &tensor.structure.axes;
    let storage = axes.get(axis).ok_or_else(|| {
        PyValueError::new_err(format!(
            "axis {axis} out of range: the tensor has {} axes",
            axes.len()
        ))
    })?;
    let array = match what {
        "indptr" => storage.indptr.as_ref(),
        "indices" => storage.indices.as_ref(),
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown array `{other}` (expected values, indptr or indices)"
            )))
        }
    };
    array.map(|a| index_view(a, owner)).ok_or_else(|| {
        PyValueError::new_err(format!(
            "axis {axis} ({}) has no {what} array",
            storage.kind
        ))
    })
}
