//! Matrix Market files: `load(path)` reads a file (plain or `.gz`) into a `Tensor` of the
//! asked format; `save(path, tensor)` writes one as a `coordinate real` file (gzip when
//! the path ends in `.gz`). Errors name the file and the line.

use pyo3::prelude::*;
use sparsile::formats::mtx::{self, MtxData, MtxField, MtxReadOptions, MtxWriteOptions};
use sparsile::formats::SparseTensor;

use crate::errors::{detached, value_error};
use crate::tensor::{parse_dtype, parse_format, Tensor};

/// Reads a Matrix Market file into a tensor of `format` with values of `dtype`.
#[pyfunction]
#[pyo3(signature = (path, format="csr", dtype="f32"))]
pub fn load(
    py: Python<'_>,
    path: std::path::PathBuf,
    format: &str,
    dtype: &str,
) -> PyResult<Tensor> {
    let format = parse_format(format)?;
    let dtype = parse_dtype(dtype)?;
    let inner = detached(py, || -> Result<SparseTensor<'static>, PyErr> {
        let data =
            mtx::read_path(&path, &MtxReadOptions::default()).map_err(|e| value_error(&e))?;
        let coo = data.into_coo();
        SparseTensor::from_coo_with(&coo, &format, dtype).map_err(|e| value_error(&e))
    })??;
    Ok(Tensor { inner })
}

/// Writes `tensor` to a Matrix Market `coordinate real general` file.
#[pyfunction]
pub fn save(py: Python<'_>, path: std::path::PathBuf, tensor: &Bound<'_, Tensor>) -> PyResult<()> {
    let t = &tensor.get().inner;
    detached(py, || -> PyResult<()> {
        let coo = t.to_coo().map_err(|e| value_error(&e))?;
        mtx::write_path(
            &path,
            &MtxData::Sparse(coo),
            &MtxWriteOptions::general(MtxField::Real),
        )
        .map_err(|e| value_error(&e))
    })?
}
