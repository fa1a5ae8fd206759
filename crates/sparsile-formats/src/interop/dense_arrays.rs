//! Dense tensors and `ndarray` arrays.
//!
//! A dense [`SparseTensor`] stores every element row-major (C order), which is
//! `ndarray`'s standard layout, so views need no copy when the element type matches.

use std::borrow::Cow;
use std::sync::Arc;

use ndarray::{ArrayBase, ArrayD, ArrayView, ArrayViewD, Data, Dimension, IxDyn};

use crate::interop::{Element, InteropError};
use crate::{AxisStorage, Format, SparseTensor, Structure};

fn dense_structure(shape: &[usize]) -> Result<Structure<'static>, InteropError> {
    if shape.is_empty() {
        return Err(InteropError::ZeroDimensional);
    }
    Ok(Structure {
        format: Format::Dense,
        shape: shape.to_vec(),
        axes: shape.iter().map(|&d| AxisStorage::dense_fixed(d)).collect(),
    })
}

/// A borrowed `ndarray` view of a dense tensor whose values have type `T`.
pub fn dense_view<'t, T: Element>(
    t: &'t SparseTensor<'_>,
) -> Result<ArrayViewD<'t, T>, InteropError> {
    if t.format() != &Format::Dense {
        return Err(InteropError::NotDense {
            format: t.format().to_string(),
        });
    }
    let data = T::slice(&t.values).ok_or(InteropError::DTypeMismatch {
        expected: T::DTYPE,
        found: t.dtype(),
    })?;
    ArrayViewD::from_shape(IxDyn(t.shape()), data).map_err(|_| InteropError::Shape {
        what: "dense tensor".into(),
        shape: t.shape().to_vec(),
        len: data.len(),
    })
}

/// An owned array of any tensor (any format, any value type: values are rounded to
/// `T`; elements not stored are zero).
pub fn to_array<T: Element>(t: &SparseTensor<'_>) -> Result<ArrayD<T>, InteropError> {
    if t.format() == &Format::Dense {
        if let Ok(view) = dense_view::<T>(t) {
            return Ok(view.to_owned());
        }
        let data: Vec<T> = (0..t.values.len())
            .map(|i| T::from_f64(t.values.get_f64(i)))
            .collect();
        return ArrayD::from_shape_vec(IxDyn(t.shape()), data).map_err(|_| InteropError::Shape {
            what: "dense tensor".into(),
            shape: t.shape().to_vec(),
            len: t.values.len(),
        });
    }
    let coo = t.to_coo()?;
    let mut out = ArrayD::from_elem(IxDyn(&coo.shape), T::from_f64(0.0));
    let flat = out
        .as_slice_mut()
        .expect("a freshly allocated array is contiguous");
    for e in 0..coo.nnz() {
        let mut off = 0;
        for (&c, &d) in coo.coord(e).iter().zip(&coo.shape) {
            off = off * d + c;
        }
        flat[off] = T::from_f64(coo.values[e]);
    }
    Ok(out)
}

/// A dense tensor over an array view: borrows the data when the view is in standard
/// layout (row-major, contiguous), copies it otherwise.
pub fn from_array_view<T: Element, D: Dimension>(
    a: ArrayView<'_, T, D>,
) -> Result<SparseTensor<'_>, InteropError> {
    let structure = dense_structure(a.shape())?;
    let data: Cow<'_, [T]> = match a.to_slice() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(a.iter().copied().collect()),
    };
    Ok(SparseTensor {
        structure: Arc::new(structure),
        values: T::wrap(data),
    })
}

/// An owned dense tensor with a copy of any array.
pub fn from_array<T: Element, S: Data<Elem = T>, D: Dimension>(
    a: &ArrayBase<S, D>,
) -> Result<SparseTensor<'static>, InteropError> {
    let structure = dense_structure(a.shape())?;
    let data: Vec<T> = a.iter().copied().collect();
    Ok(SparseTensor {
        structure: Arc::new(structure),
        values: T::wrap(Cow::Owned(data)),
    })
}
