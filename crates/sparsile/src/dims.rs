//! Binding the dimension names of a declaration (`tensor A: f32[m, n] bsr:4x4`) to sizes,
//! from the logical shapes of the tensors passed in.
//!
//! Stage-I axes do not always carry a logical dimension (BSR's row axis has length
//! `ceil(m / 4)`), so the front end, which knows the declarations, binds them.
//!
//! ```
//! use std::collections::HashMap;
//! let ast = sparsile::notation::parse("tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n").unwrap();
//! let shapes = HashMap::from([("A".to_string(), vec![3, 4]), ("x".to_string(), vec![5])]);
//! let err = sparsile::bind_dims(&ast, &shapes).unwrap_err();
//! assert_eq!(err.to_string(), "dimension `n` is 4 (dimension 1 of A) but 5 (dimension 0 of x)");
//! ```

use std::collections::{BTreeMap, HashMap};

use thiserror::Error;

use crate::notation::ast::{Dim, Program};

/// A tensor whose shape disagrees with its declaration or with another tensor.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DimError {
    #[error("input {tensor} has order {found} but is declared with {declared} dimensions")]
    Order {
        tensor: String,
        found: usize,
        declared: usize,
    },
    #[error("dimension {dim} of input {tensor} is {found} but is declared as {declared}")]
    Const {
        tensor: String,
        dim: usize,
        found: usize,
        declared: i64,
    },
    #[error("dimension `{name}` is {first} ({first_from}) but {second} ({second_from})")]
    Conflict {
        name: String,
        first: usize,
        first_from: String,
        second: usize,
        second_from: String,
    },
    #[error("input {0} is not declared by the program")]
    Undeclared(String),
}

/// Sizes of the named dimensions, from the shapes of the given tensors (by declared
/// name). Unnamed or ungiven dimensions are left out.
pub fn bind_dims(
    program: &Program,
    shapes: &HashMap<String, Vec<usize>>,
) -> Result<BTreeMap<String, usize>, DimError> {
    let mut bound: BTreeMap<String, (usize, String)> = BTreeMap::new();
    let mut names: Vec<&String> = shapes.keys().collect();
    names.sort();
    for name in names {
        let shape = &shapes[name];
        let (_, decl) = program
            .tensor(name)
            .ok_or_else(|| DimError::Undeclared(name.clone()))?;
        if decl.dims.len() != shape.len() {
            return Err(DimError::Order {
                tensor: name.clone(),
                found: shape.len(),
                declared: decl.dims.len(),
            });
        }
        for (d, (dim, &size)) in decl.dims.iter().zip(shape).enumerate() {
            let from = format!("dimension {d} of {name}");
            match dim {
                Dim::Const(c) if *c != size as i64 => {
                    return Err(DimError::Const {
                        tensor: name.clone(),
                        dim: d,
                        found: size,
                        declared: *c,
                    })
                }
                Dim::Const(_) => {}
                Dim::Named(n) => match bound.get(n) {
                    Some((prev, prev_from)) if *prev != size => {
                        return Err(DimError::Conflict {
                            name: n.clone(),
                            first: *prev,
                            first_from: prev_from.clone(),
                            second: size,
                            second_from: from,
                        })
                    }
                    Some(_) => {}
                    None => {
                        bound.insert(n.clone(), (size, from));
                    }
                },
            }
        }
    }
    Ok(bound.into_iter().map(|(k, (v, _))| (k, v)).collect())
}
