//! `sparsile._native.Tensor`: a sparse (or dense) tensor in any Sparsile format.
//!
//! Constructors check the caller's arrays (SciPy's CSR/CSC/BSR conventions, or one
//! coordinate array per dimension) and raise `ValueError` with the Rust message naming
//! the problem and where it is; they then keep an owned copy, so the tensor outlives the
//! arrays. Conversions run with the GIL released.

use std::sync::Arc;

use numpy::PyArrayMethods;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sparsile::formats::validate::CheckOptions;
use sparsile::formats::{Format, IndexArray, SparseTensor, Values};
use sparsile::ir::{DType, IndexType};

use crate::arrays::{index_to_numpy, values_to_numpy, IndexArg, ValueArg};
use crate::errors::{detached, value_error};

/// A sparse tensor: a format (a list of axes with their structure arrays) and values.
#[pyclass(module = "sparsile._native", frozen)]
pub struct Tensor {
    pub inner: SparseTensor<'static>,
}

pub fn parse_format(text: &str) -> PyResult<Format> {
    text.parse::<Format>().map_err(|e| value_error(&e))
}

pub fn parse_dtype(text: &str) -> PyResult<DType> {
    let dtype = text
        .parse::<DType>()
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    if dtype.is_float() {
        Ok(dtype)
    } else {
        Err(pyo3::exceptions::PyValueError::new_err(format!(
            "values must be of a floating-point type (f16, bf16, f32, f64), not {dtype}"
        )))
    }
}

pub fn parse_index_type(text: &str) -> PyResult<IndexType> {
    text.parse::<IndexType>()
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

fn options(sort_indices: bool, sum_duplicates: bool) -> CheckOptions {
    CheckOptions {
        sort_indices,
        sum_duplicates,
    }
}

/// `SparseTensor::from_csr` or `SparseTensor::from_csc`.
type CompressedCtor<'b> = fn(
    [usize; 2],
    IndexArray<'b>,
    IndexArray<'b>,
    Values<'b>,
    CheckOptions,
) -> Result<SparseTensor<'b>, sparsile::formats::FormatError>;

/// The checked constructor of a compressed (CSR / CSC) matrix applied, without the GIL,
/// to copies of the caller's arrays.
fn compressed<'b>(
    py: Python<'_>,
    ctor: CompressedCtor<'static>,
    shape: (usize, usize),
    (indptr, indices, values): (&'b IndexArg<'_>, &'b IndexArg<'_>, &'b ValueArg<'_>),
    opts: CheckOptions,
) -> PyResult<Tensor> {
    let (indptr, indices, values) = (
        indptr.borrow("indptr")?,
        indices.borrow("indices")?,
        values.borrow("values")?,
    );
    // Copied first, then validated: the caller's arrays may change (another thread)
    // while the GIL is released, and what is checked must be what is kept.
    let t = detached(py, move || {
        ctor(
            [shape.0, shape.1],
            indptr.into_owned(),
            indices.into_owned(),
            values.into_owned(),
            opts,
        )
    })?;
    owned(t)
}

fn owned(t: Result<SparseTensor<'static>, sparsile::formats::FormatError>) -> PyResult<Tensor> {
    let inner = t.map_err(|e| value_error(&e))?;
    Ok(Tensor { inner })
}

#[pymethods]
impl Tensor {
    /// A CSR matrix from SciPy-style arrays (`indptr`: rows + 1 entries).
    #[staticmethod]
    #[pyo3(signature = (shape, indptr, indices, values, sort_indices=false, sum_duplicates=false))]
    fn from_csr(
        py: Python<'_>,
        shape: (usize, usize),
        indptr: IndexArg<'_>,
        indices: IndexArg<'_>,
        values: ValueArg<'_>,
        sort_indices: bool,
        sum_duplicates: bool,
    ) -> PyResult<Tensor> {
        compressed(
            py,
            SparseTensor::from_csr,
            shape,
            (&indptr, &indices, &values),
            options(sort_indices, sum_duplicates),
        )
    }

    /// A CSC matrix from SciPy-style arrays (`indptr`: cols + 1 entries).
    #[staticmethod]
    #[pyo3(signature = (shape, indptr, indices, values, sort_indices=false, sum_duplicates=false))]
    fn from_csc(
        py: Python<'_>,
        shape: (usize, usize),
        indptr: IndexArg<'_>,
        indices: IndexArg<'_>,
        values: ValueArg<'_>,
        sort_indices: bool,
        sum_duplicates: bool,
    ) -> PyResult<Tensor> {
        compressed(
            py,
            SparseTensor::from_csc,
            shape,
            (&indptr, &indices, &values),
            options(sort_indices, sum_duplicates),
        )
    }

    /// A BSR matrix from SciPy-style arrays with `block = (r, c)` dense blocks.
    #[staticmethod]
    #[pyo3(signature = (shape, block, indptr, indices, values, sort_indices=false, sum_duplicates=false))]
    #[allow(clippy::too_many_arguments)]
    fn from_bsr(
        py: Python<'_>,
        shape: (usize, usize),
        block: (usize, usize),
        indptr: IndexArg<'_>,
        indices: IndexArg<'_>,
        values: ValueArg<'_>,
        sort_indices: bool,
        sum_duplicates: bool,
    ) -> PyResult<Tensor> {
        let (indptr, indices, values) = (
            indptr.borrow("indptr")?,
            indices.borrow("indices")?,
            values.borrow("values")?,
        );
        let opts = options(sort_indices, sum_duplicates);
        // Copied, then validated (see `compressed`).
        let t = detached(py, move || {
            SparseTensor::from_bsr(
                [shape.0, shape.1],
                block,
                indptr.into_owned(),
                indices.into_owned(),
                values.into_owned(),
                opts,
            )
        })?;
        owned(t)
    }

    /// A COO tensor from one coordinate array per dimension.
    #[staticmethod]
    #[pyo3(signature = (shape, coords, values, sort_indices=false, sum_duplicates=false))]
    fn from_coo(
        py: Python<'_>,
        shape: Vec<usize>,
        coords: Vec<IndexArg<'_>>,
        values: ValueArg<'_>,
        sort_indices: bool,
        sum_duplicates: bool,
    ) -> PyResult<Tensor> {
        let coords = coords
            .iter()
            .enumerate()
            .map(|(d, c)| c.borrow(&format!("coordinate array {d}")))
            .collect::<PyResult<Vec<_>>>()?;
        let values = values.borrow("values")?;
        let opts = options(sort_indices, sum_duplicates);
        // Copied, then validated (see `compressed`).
        let t = detached(py, move || {
            let coords = coords.into_iter().map(IndexArray::into_owned).collect();
            SparseTensor::from_coo_arrays(&shape, coords, values.into_owned(), opts)
        })?;
        owned(t)
    }

    /// A `dense` tensor holding a copy of `array`.
    #[staticmethod]
    fn from_dense(array: ValueArg<'_>) -> PyResult<Tensor> {
        Ok(Tensor {
            inner: array.dense("array")?.into_owned(),
        })
    }

    /// The logical shape.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.inner.shape().to_vec()
    }

    /// The format string (`csr`, `bsr:4x4`, `ell:8`, ...).
    #[getter]
    fn format(&self) -> String {
        self.inner.format().to_string()
    }

    /// The value type (`f32`, `f64`, `f16`, `bf16`).
    #[getter]
    fn dtype(&self) -> String {
        self.inner.dtype().to_string()
    }

    /// Stored values, padding included.
    #[getter]
    fn nnz(&self) -> usize {
        self.inner.nnz_stored()
    }

    /// The index type of the structure arrays (`i32` or `i64`; `i32` when there are none).
    #[getter]
    fn index_type(&self) -> String {
        self.inner
            .structure
            .axes
            .iter()
            .find(|a| a.indptr.is_some() || a.indices.is_some())
            .map_or(IndexType::I32, |a| a.index_type())
            .to_string()
    }

    /// The same tensor in another format (and optionally value and index types).
    #[pyo3(signature = (format, dtype=None, index_type=None))]
    fn convert(
        &self,
        py: Python<'_>,
        format: &str,
        dtype: Option<&str>,
        index_type: Option<&str>,
    ) -> PyResult<Tensor> {
        let format = parse_format(format)?;
        let dtype = dtype
            .map(parse_dtype)
            .transpose()?
            .unwrap_or(self.inner.dtype());
        let index_type = index_type.map(parse_index_type).transpose()?;
        let inner = detached(py, || {
            let coo = self.inner.to_coo()?;
            SparseTensor::from_coo_with_index(&coo, &format, dtype, index_type)
        })?
        .map_err(|e| value_error(&e))?;
        Ok(Tensor { inner })
    }

    /// The canonical COO form: `(coords, values)`, `coords` an int64 array of shape
    /// `(ndim, nnz)` sorted lexicographically, `values` f64; padding is dropped.
    fn to_coo<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let coo = detached(py, || self.inner.to_coo())?.map_err(|e| value_error(&e))?;
        let ndim = coo.shape.len();
        let nnz = coo.values.len();
        let mut coords = vec![0i64; ndim * nnz];
        for e in 0..nnz {
            for d in 0..ndim {
                coords[d * nnz + e] = coo.coords[e * ndim + d] as i64;
            }
        }
        let coords = values_like_i64(py, coords, &[ndim, nnz])?;
        let values = values_to_numpy(py, Values::F64(coo.values.into()), &[nnz])?;
        Ok((coords, values))
    }

    /// The axes: a list of dicts with `kind`, `length`, `parent`, and the `indptr` and
    /// `indices` arrays (copies) where the axis has them.
    fn axes<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let mut out = Vec::new();
        for axis in &self.inner.structure.axes {
            let d = PyDict::new(py);
            d.set_item("kind", axis.kind.to_string())?;
            d.set_item("length", axis.length)?;
            d.set_item("parent", axis.parent)?;
            if let Some(indptr) = &axis.indptr {
                d.set_item("indptr", index_to_numpy(py, indptr.clone().into_owned()))?;
            }
            if let Some(indices) = &axis.indices {
                d.set_item("indices", index_to_numpy(py, indices.clone().into_owned()))?;
            }
            out.push(d);
        }
        Ok(out)
    }

    /// A view (no copy) of the values (`what="values"`) or of an axis's `indptr` /
    /// `indices` array; see `views.rs`.
    #[pyo3(signature = (what, axis=0))]
    fn array_view<'py>(
        slf: &Bound<'py, Self>,
        what: &str,
        axis: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::views::array_view(slf, what, axis)
    }

    /// A copy of the stored values (1-D, in storage order, padding included).
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let n = self.inner.values.len();
        values_to_numpy(py, self.inner.values.clone().into_owned(), &[n])
    }

    /// Whether the tensor's one compressed axis holds exactly `indptr` and `indices`
    /// (same index type, same entries). False for a tensor with no or several
    /// compressed axes. When true, a tensor built from those arrays would have this
    /// structure, stored in the same order, so `with_values` can stand in for it.
    fn same_pattern(
        &self,
        py: Python<'_>,
        indptr: IndexArg<'_>,
        indices: IndexArg<'_>,
    ) -> PyResult<bool> {
        let (indptr, indices) = (indptr.borrow("indptr")?, indices.borrow("indices")?);
        let mut compressed = self
            .inner
            .structure
            .axes
            .iter()
            .filter_map(|a| Some((a.indptr.as_ref()?, a.indices.as_ref()?)));
        let (Some((p, i)), None) = (compressed.next(), compressed.next()) else {
            return Ok(false);
        };
        detached(py, || *p == indptr && *i == indices)
    }

    /// A tensor with this structure (shared, not copied) and a copy of `values`.
    fn with_values(&self, values: ValueArg<'_>) -> PyResult<Tensor> {
        let values = values.borrow("values")?.into_owned();
        if values.len() != self.inner.nnz_stored() {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "expected {} values (one per stored position), found {}",
                self.inner.nnz_stored(),
                values.len()
            )));
        }
        Ok(Tensor {
            inner: SparseTensor {
                structure: Arc::clone(&self.inner.structure),
                values,
            },
        })
    }

    /// Every element as a dense f64 array of the tensor's shape.
    fn to_dense<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let dense = detached(py, || self.inner.try_to_dense_f64())?.map_err(|e| value_error(&e))?;
        values_to_numpy(py, Values::F64(dense.into()), self.inner.shape())
    }

    fn __repr__(&self) -> String {
        format!(
            "sparsile.Tensor(shape={:?}, format={}, dtype={}, nnz={})",
            self.inner.shape(),
            self.inner.format(),
            self.inner.dtype(),
            self.inner.nnz_stored()
        )
    }
}

fn values_like_i64<'py>(
    py: Python<'py>,
    v: Vec<i64>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    use numpy::IntoPyArray;
    let flat = v.into_pyarray(py);
    Ok(flat.reshape(shape.to_vec())?.into_any())
}
