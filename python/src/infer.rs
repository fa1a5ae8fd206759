//! `infer_program(expr, sparse, formats, dtype)`: the declarations of a lone index
//! notation statement (see `sparsile::notation::infer`), for `sparsile.compile` called
//! with just `"Y[i,k] = A[i,j] * X[j,k]"`. Returns the whole program text; the statement
//! is its last line, verbatim.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use sparsile::formats::Format;

use crate::tensor::{parse_dtype, parse_format};

/// The program text with inferred declarations.
#[pyfunction]
#[pyo3(signature = (expr, sparse, formats, dtype="f32"))]
pub fn infer_program(
    expr: &str,
    sparse: Vec<String>,
    formats: HashMap<String, String>,
    dtype: &str,
) -> PyResult<String> {
    let dtype = parse_dtype(dtype)?;
    let formats: HashMap<String, Format> = formats
        .into_iter()
        .map(|(name, f)| Ok((name, parse_format(&f)?)))
        .collect::<PyResult<_>>()?;
    sparsile::notation::infer::program_text(expr, &sparse, &formats, dtype)
        .map_err(|e| PyValueError::new_err(e.to_string()))
}
