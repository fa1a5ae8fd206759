//! NumPy arrays in and out of Sparsile tensors, without copies.
//!
//! Inputs are borrowed: an index array (i32 or i64) becomes an [`IndexArray`] over the
//! array's memory, a value array (f16, f32 or f64; bf16 as uint16 bits) a [`Values`]; a
//! dense operand becomes a `dense` [`SparseTensor`] over its memory. Arrays must be
//! C-contiguous (the Python layer copies strided arrays once before calling in). Outputs
//! move their `Vec` into a NumPy array, which then owns it.
//!
//! NumPy has no bfloat16: bf16 values cross as uint16 arrays of their bits, both ways.
//! The Python layer makes such arrays only from `torch.bfloat16` tensors (viewed, not
//! copied) and from bf16 tensors, so a uint16 array reaching this module is bf16.

use std::borrow::Cow;
use std::sync::Arc;

use half::slice::HalfBitsSliceExt;
use half::vec::HalfFloatVecExt;
use numpy::ndarray::{ArrayD, IxDyn};
use numpy::{IntoPyArray, PyArrayDyn, PyReadonlyArray1, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use sparsile::formats::{AxisStorage, Format, IndexArray, SparseTensor, Structure, Values};

/// A one-dimensional integer array of structure (`indptr`, `indices`, coordinates).
#[derive(FromPyObject)]
pub enum IndexArg<'py> {
    I32(PyReadonlyArray1<'py, i32>),
    I64(PyReadonlyArray1<'py, i64>),
}

impl IndexArg<'_> {
    /// The array's memory as an [`IndexArray`]; `what` names it in errors.
    pub fn borrow(&self, what: &str) -> PyResult<IndexArray<'_>> {
        Ok(match self {
            IndexArg::I32(a) => IndexArray::I32(Cow::Borrowed(contiguous(a.as_slice(), what)?)),
            IndexArg::I64(a) => IndexArray::I64(Cow::Borrowed(contiguous(a.as_slice(), what)?)),
        })
    }
}

/// An array of f16, f32 or f64 values, or of bf16 bits (uint16), of any shape.
#[derive(FromPyObject)]
pub enum ValueArg<'py> {
    F32(PyReadonlyArrayDyn<'py, f32>),
    F64(PyReadonlyArrayDyn<'py, f64>),
    F16(PyReadonlyArrayDyn<'py, half::f16>),
    Bf16Bits(PyReadonlyArrayDyn<'py, u16>),
}

impl ValueArg<'_> {
    /// The array's shape.
    pub fn shape(&self) -> Vec<usize> {
        match self {
            ValueArg::F32(a) => a.shape().to_vec(),
            ValueArg::F64(a) => a.shape().to_vec(),
            ValueArg::F16(a) => a.shape().to_vec(),
            ValueArg::Bf16Bits(a) => a.shape().to_vec(),
        }
    }

    /// The array's memory, row-major, as [`Values`]; `what` names it in errors.
    pub fn borrow(&self, what: &str) -> PyResult<Values<'_>> {
        Ok(match self {
            ValueArg::F32(a) => Values::F32(Cow::Borrowed(contiguous(a.as_slice(), what)?)),
            ValueArg::F64(a) => Values::F64(Cow::Borrowed(contiguous(a.as_slice(), what)?)),
            ValueArg::F16(a) => Values::F16(Cow::Borrowed(contiguous(a.as_slice(), what)?)),
            ValueArg::Bf16Bits(a) => Values::BF16(Cow::Borrowed(
                contiguous(a.as_slice(), what)?.reinterpret_cast(),
            )),
        })
    }

    /// A `dense` tensor over the array's memory.
    pub fn dense(&self, what: &str) -> PyResult<SparseTensor<'_>> {
        let shape = self.shape();
        Ok(SparseTensor {
            structure: Arc::new(dense_structure(&shape)),
            values: self.borrow(what)?,
        })
    }
}

/// The structure of a dense tensor of `shape`.
pub fn dense_structure(shape: &[usize]) -> Structure<'static> {
    Structure {
        format: Format::Dense,
        shape: shape.to_vec(),
        axes: shape.iter().map(|&d| AxisStorage::dense_fixed(d)).collect(),
    }
}

fn contiguous<'a, T, E>(slice: Result<&'a [T], E>, what: &str) -> PyResult<&'a [T]> {
    slice.map_err(|_| {
        PyValueError::new_err(format!(
            "{what} is not C-contiguous (pass a contiguous array)"
        ))
    })
}

/// Moves `values` into a NumPy array of `shape` (no copy): f16 values as float16, bf16
/// values as uint16 bits.
pub fn values_to_numpy<'py>(
    py: Python<'py>,
    values: Values<'static>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    fn build<'py, T: numpy::Element + Clone>(
        py: Python<'py>,
        v: Cow<'static, [T]>,
        shape: &[usize],
    ) -> PyResult<Bound<'py, PyAny>> {
        let array = ArrayD::from_shape_vec(IxDyn(shape), v.into_owned())
            .map_err(|e| PyValueError::new_err(format!("output of shape {shape:?}: {e}")))?;
        let array: Bound<'py, PyArrayDyn<T>> = array.into_pyarray(py);
        Ok(array.into_any())
    }
    match values {
        Values::F32(v) => build(py, v, shape),
        Values::F64(v) => build(py, v, shape),
        Values::F16(v) => build(py, v, shape),
        Values::BF16(v) => build(py, Cow::Owned(v.into_owned().reinterpret_into()), shape),
    }
}

/// Moves an index array into a NumPy array (no copy).
pub fn index_to_numpy<'py>(py: Python<'py>, index: IndexArray<'static>) -> Bound<'py, PyAny> {
    match index {
        IndexArray::I32(v) => v.into_owned().into_pyarray(py).into_any(),
        IndexArray::I64(v) => v.into_owned().into_pyarray(py).into_any(),
    }
}
