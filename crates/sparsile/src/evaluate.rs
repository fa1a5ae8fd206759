//! Running index-notation programs with the reference interpreter, in one call.
//!
//! Precondition: every input tensor of the program is given, by its declared name.
//! Postcondition: one tensor per output, by its declared name, with values of the
//! declared element type (computed in f64).
//!
//! ```
//! use std::collections::HashMap;
//! use sparsile::formats::{CooTensor, Format, SparseTensor};
//! let a = CooTensor::from_triplets(vec![2, 3], &[(0, 0, 1.0), (0, 2, 2.0), (1, 1, 3.0)]).unwrap();
//! let x = SparseTensor::dense_from_f64(&[3], &[1.0, 10.0, 100.0], sparsile::ir::DType::F64).unwrap();
//! let inputs = HashMap::from([
//!     ("A".to_string(), SparseTensor::from_coo(&a, &Format::Csr).unwrap()),
//!     ("x".to_string(), x),
//! ]);
//! let out = sparsile::evaluate(
//!     "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n",
//!     &inputs,
//! )
//! .unwrap();
//! assert_eq!(out["y"].to_dense_f64(), vec![201.0, 30.0]);
//! ```

use std::collections::HashMap;

use sparsile_formats::SparseTensor;
use sparsile_runtime::{interpret, InterpError, InterpOptions, Outputs};
use thiserror::Error;

use crate::notation::ast::Program as Ast;
use crate::notation::{lower, parse, NotationError};
use crate::{bind_dims, DimError};

/// Why a program could not be evaluated.
#[derive(Debug, Error)]
pub enum EvaluateError {
    #[error(transparent)]
    Notation(#[from] NotationError),
    #[error(transparent)]
    Dims(#[from] DimError),
    #[error(transparent)]
    Interpreter(#[from] InterpError),
}

/// The buffer that carries a tensor: its own name, or with a trailing `_` when the
/// name is a reserved word of the text IR.
pub(crate) fn buffer_name(tensor: &str) -> String {
    if sparsile_ir::coord::parser::is_valid_name(tensor) {
        tensor.to_string()
    } else {
        format!("{tensor}_")
    }
}

/// Compiles `program` (index notation) to stage I and runs it with the interpreter.
pub fn evaluate(
    program: &str,
    inputs: &HashMap<String, SparseTensor<'_>>,
) -> Result<Outputs, EvaluateError> {
    let ast = parse(program)?;
    let stage1 = lower(&ast)?;
    let options = InterpOptions {
        params: declared_dim_params(&ast, &stage1, inputs)?,
        ..InterpOptions::default()
    };
    let outputs = interpret(&stage1, &by_buffer(inputs), &options)?;
    Ok(by_tensor(&ast, outputs))
}

/// The inputs keyed by the buffers that carry them (no copies: the structure is shared,
/// so facts the runtime remembers about it stay attached; the values are viewed).
pub(crate) fn by_buffer<'a>(
    inputs: &'a HashMap<String, SparseTensor<'_>>,
) -> HashMap<String, SparseTensor<'a>> {
    inputs
        .iter()
        .map(|(n, t)| {
            let view = SparseTensor {
                structure: std::sync::Arc::clone(&t.structure),
                values: t.values.view(),
            };
            (buffer_name(n), view)
        })
        .collect()
}

/// Parameter values of the declared dimensions, bound from the inputs' shapes.
pub(crate) fn declared_dim_params(
    ast: &Ast,
    stage1: &sparsile_ir::coord::Program,
    inputs: &HashMap<String, SparseTensor<'_>>,
) -> Result<HashMap<String, i64>, DimError> {
    let shapes = inputs
        .iter()
        .map(|(n, t)| (n.clone(), t.shape().to_vec()))
        .collect();
    Ok(dim_params(stage1, &bind_dims(ast, &shapes)?))
}

/// The outputs keyed by their declared tensor names.
pub(crate) fn by_tensor(ast: &Ast, mut outputs: Outputs) -> Outputs {
    ast.tensors
        .iter()
        .filter_map(|decl| {
            outputs
                .remove(&buffer_name(&decl.name))
                .map(|t| (decl.name.clone(), t))
        })
        .collect()
}

/// The bound dimensions that are parameters of `program`, as interpreter parameters.
pub fn dim_params(
    program: &sparsile_ir::coord::Program,
    dims: &std::collections::BTreeMap<String, usize>,
) -> HashMap<String, i64> {
    dims.iter()
        .filter(|(name, _)| program.param_by_name(name).is_some())
        .map(|(name, &size)| (name.clone(), size as i64))
        .collect()
}
