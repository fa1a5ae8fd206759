//! The reference interpreter: executes a stage-I [`Program`] directly, in f64.
//!
//! [`interpret`] binds the input tensors to the program's buffers, computes the structure
//! of `Union`/`Intersect` axes and of the outputs, runs the body following the semantics
//! fixed in [`sparsile_ir::coord`] and returns every output buffer as a tensor in the
//! buffer's element type.
//!
//! Binding (each mismatch is a named [`InterpError`] giving buffer, axis, parameter and
//! both values):
//! - a tensor bound to `B[a0, a1, ...]` has one axis per buffer axis, in storage order,
//!   of the declared kind, whose parent index points at the buffer axis that is the
//!   declared parent; an axis declared unique needs unique storage;
//! - extents unify with the storage: `length`; `nnz` with the positions of a variable
//!   axis; `nnz_per_parent` with a `sparse_fixed` axis's count (its total positions when
//!   parentless). A `Const` must be equal; an unbound `Param` takes the size; a bound
//!   one (by an earlier tensor or by [`InterpOptions::params`]) must be equal;
//! - an axis used by several buffers must get identical storage (the same `Arc`'d
//!   structure axis, or equal arrays);
//! - structure arrays are validated first (indptr from 0, non-decreasing, ending at the
//!   position count; indices in `0..=length`, sorted under each parent, padding last),
//!   then the value count is checked against `Structure::nnz_stored`.
//!
//! Structure of outputs and temps: a caller-supplied one, else the storage of its axes:
//! bound axes as bound (an SDDMM output shares `A`'s), `Union`/`Intersect` axes computed
//! per parent position from the listed axes, unbound `dense_fixed` axes from their
//! length. The format is the tensor's whose axes they exactly are, else the first of
//! dense, CSR, DCSR, ragged, ELL, COO, CSF with the same axis kinds and parents.
//!
//! Inputs:
//! - floating-point buffers take a tensor whose values have exactly the buffer's dtype;
//! - integer buffers (`i32`/`i64`, e.g. an index map `eid[I]`) take a tensor with
//!   floating-point values (any float dtype) that are exact integers in the buffer's
//!   range; integer outputs are returned the same way, as f64 values (so `i64`
//!   values are limited to ±2^53).
//!
//! Outputs and temps start with every stored value `0`. Only `Output` buffers are
//! returned; a caller-supplied output structure is returned as the same `Arc`.
//!
//! Parameters are bound by unifying axis extents with the tensors, or given explicitly in
//! [`InterpOptions::params`] (then checked against the tensors). Output structures are
//! derived, or given in [`InterpOptions::output_structures`].
//!
//! The program is checked by the stage-I verifier first (an [`InterpError::InvalidProgram`]
//! error), unless [`InterpOptions::skip_verify`] is set; rule violations the interpreter
//! meets while executing are errors too, as is any problem with the inputs: never panics.
//!
//! ```
//! use std::collections::HashMap;
//! use sparsile_formats::{CooTensor, Format, SparseTensor};
//! use sparsile_ir::coord::*;
//! use sparsile_ir::{DType, IndexType, Span};
//! use sparsile_runtime::{interpret, InterpOptions};
//!
//! // y[i] = sum_j A[i, j] * x[j] with A in CSR.
//! let mut p = Program::new("spmv");
//! let (m, n, nnz) = (
//!     p.params.push(Param { name: "m".into() }),
//!     p.params.push(Param { name: "n".into() }),
//!     p.params.push(Param { name: "nnz".into() }),
//! );
//! let i = p.axes.push(AxisDecl::dense_fixed("I", Extent::Param(m)));
//! let j = p.axes.push(AxisDecl::sparse_variable("J", i, Extent::Param(n), Extent::Param(nnz), IndexType::I32));
//! let jd = p.axes.push(AxisDecl::dense_fixed("JD", Extent::Param(n)));
//! let buf = |name: &str, axes, role| BufferDecl { name: name.into(), dtype: DType::F64, axes, role, span: Span::default() };
//! let a = p.buffers.push(buf("A", vec![i, j], BufferRole::Input));
//! let x = p.buffers.push(buf("x", vec![jd], BufferRole::Input));
//! let y = p.buffers.push(buf("y", vec![i], BufferRole::Output));
//! let vi = p.vars.push(IterVar { name: "i".into(), axis: i });
//! let vj = p.vars.push(IterVar { name: "j".into(), axis: j });
//! let yi = || Expr::load(y, vec![Expr::Var(vi)]);
//! let store = |value| Stmt::Store(Store { buffer: y, indices: vec![Expr::Var(vi)], value, span: Span::default() });
//! p.body.push(Stmt::Iteration(SparseIteration {
//!     name: "spmv".into(),
//!     axes: vec![
//!         IterAxis { axis: i, kind: IterKind::Spatial, var: vi },
//!         IterAxis { axis: j, kind: IterKind::Reduction, var: vj },
//!     ],
//!     init: vec![store(Expr::Float(0.0))],
//!     body: vec![store(Expr::binary(BinaryOp::Add, yi(), Expr::binary(BinaryOp::Mul,
//!         Expr::load(a, vec![Expr::Var(vi), Expr::Var(vj)]), Expr::load(x, vec![Expr::Var(vj)]))))],
//!     span: Span::default(),
//!     fused: Vec::new(),
//! }));
//!
//! let a_coo = CooTensor::from_triplets(vec![2, 3], &[(0, 0, 1.0), (0, 2, 2.0), (1, 1, 3.0)]).unwrap();
//! let x_coo = CooTensor { shape: vec![3], coords: vec![0, 1, 2], values: vec![1.0, 10.0, 100.0] };
//! let inputs = HashMap::from([
//!     ("A".to_string(), SparseTensor::from_coo(&a_coo, &Format::Csr).unwrap()),
//!     ("x".to_string(), SparseTensor::from_coo(&x_coo, &Format::Dense).unwrap()),
//! ]);
//! let out = interpret(&p, &inputs, &InterpOptions::default()).unwrap();
//! assert_eq!(out["y"].values.to_f64_vec(), vec![201.0, 30.0]);
//! ```

mod access;
mod binding;
pub mod derived;
mod error;
mod eval_expr;
mod iterate;
pub(crate) mod state;
pub(crate) mod structure_derive;
pub(crate) mod validate;
mod validate_fast;
mod validated;

use std::collections::HashMap;
use std::sync::Arc;

use sparsile_formats::{SparseTensor, Structure, Values};
use sparsile_ir::coord::{BufferRole, Program};
use sparsile_ir::DType;

pub use error::InterpError;

use iterate::Exec;
use state::{Bindings, BufState, BufValues};

/// Options of [`interpret`].
#[derive(Debug, Clone, Default)]
pub struct InterpOptions {
    /// Explicit parameter values, by parameter name; checked against the tensors.
    pub params: HashMap<String, i64>,
    /// Structures for output or temp buffers, by buffer name; bound like input
    /// structures and returned (shared) with the output.
    pub output_structures: HashMap<String, Arc<Structure<'static>>>,
    /// Skips the stage-I verifier (run by default). The interpreter still checks what it
    /// meets while executing; ids out of range in an unverified program may panic.
    pub skip_verify: bool,
}

/// The outputs of a program, by output buffer name.
pub type Outputs = HashMap<String, SparseTensor<'static>>;

/// Executes `program` on `inputs` (one tensor per input buffer, by buffer name). The
/// tensors of derived buffers not given are computed from their sources
/// ([`derived::derive_inputs`]).
pub fn interpret(
    program: &Program,
    inputs: &HashMap<String, SparseTensor<'_>>,
    options: &InterpOptions,
) -> Result<Outputs, InterpError> {
    let derived = derived::derive_inputs(program, inputs, None)?;
    if derived.is_empty() {
        return interpret_bound(program, inputs, options);
    }
    let mut all: HashMap<String, SparseTensor<'_>> =
        inputs.iter().map(|(n, t)| (n.clone(), t.view())).collect();
    all.extend(derived);
    interpret_bound(program, &all, options)
}

fn interpret_bound<'i>(
    program: &Program,
    inputs: &'i HashMap<String, SparseTensor<'_>>,
    options: &InterpOptions,
) -> Result<Outputs, InterpError> {
    if !options.skip_verify {
        sparsile_ir::coord::verify(program)
            .map_err(|errors| InterpError::InvalidProgram { errors })?;
    }
    check_names(program, inputs, options)?;
    check_buffer_parents(program)?;
    let mut b = Bindings::<'i> {
        params: program
            .params
            .values()
            .map(|p| options.params.get(&p.name).copied())
            .collect(),
        axes: program.axes.values().map(|_| None).collect(),
    };
    let mut buffers: state::Buffers<'i> = program.buffers.values().map(|_| None).collect();

    // Inputs.
    for (id, decl) in program.buffers.iter() {
        if decl.role != BufferRole::Input {
            continue;
        }
        let tensor = inputs
            .get(&decl.name)
            .ok_or_else(|| InterpError::MissingInput {
                buffer: decl.name.clone(),
            })?;
        validate::check_structure(&decl.name, &tensor.structure)?;
        let structure: Arc<Structure<'i>> = tensor.structure.clone();
        b.bind_structure(program, id, &structure)?;
        validate::check_value_count(&decl.name, &structure, tensor.values.len())?;
        let values = input_values(&decl.name, decl.dtype, &tensor.values)?;
        buffers[id] = Some(BufState {
            structure,
            owned_structure: None,
            values,
        });
    }
    // Caller-supplied output structures.
    for (id, decl) in program.buffers.iter() {
        if let Some(s) = options.output_structures.get(&decl.name) {
            validate::check_structure(&decl.name, s)?;
            let structure: Arc<Structure<'i>> = s.clone();
            b.bind_structure(program, id, &structure)?;
            buffers[id] = Some(BufState {
                values: BufValues::Owned(zeros(&decl.name, s)?),
                structure,
                owned_structure: Some(Arc::clone(s)),
            });
        }
    }
    structure_derive::derive_axes(program, &mut b)?;
    // Outputs and temps.
    for (id, decl) in program.buffers.iter() {
        if buffers[id].is_some() {
            continue;
        }
        let s = structure_derive::output_structure(program, &b, id)?;
        buffers[id] = Some(BufState {
            values: BufValues::Owned(zeros(&decl.name, &s)?),
            structure: s.clone(),
            owned_structure: Some(s),
        });
    }

    let mut exec = Exec {
        program,
        params: b.params,
        axes: b.axes,
        buffers,
        vars: program.vars.values().map(|_| None).collect(),
        axis_pos: program.axes.values().map(|_| None).collect(),
    };
    exec.run(&program.body)?;

    let mut outputs = Outputs::new();
    for (id, decl) in program.buffers.iter() {
        if decl.role != BufferRole::Output {
            continue;
        }
        let state = exec.buffers[id].take().expect("outputs are allocated");
        let structure = state.owned_structure.expect("outputs own their structure");
        let BufValues::Owned(values) = state.values else {
            unreachable!("outputs hold owned values");
        };
        let values = if decl.dtype.is_int() {
            Values::from_f64(&values, DType::F64)
        } else {
            Values::from_f64(&values, decl.dtype)
        };
        outputs.insert(decl.name.clone(), SparseTensor { structure, values });
    }
    Ok(outputs)
}

/// The zero-filled values of an output or temp buffer; an error (not an abort) when
/// they cannot be allocated.
pub(crate) fn zeros(buffer: &str, structure: &Structure<'_>) -> Result<Vec<f64>, InterpError> {
    validate::check_axes(buffer, structure)?;
    let count = validate::checked_nnz_stored(buffer, structure)?;
    let mut values = Vec::new();
    values
        .try_reserve_exact(count)
        .map_err(|_| InterpError::OutputTooLarge {
            buffer: buffer.to_string(),
            values: count,
        })?;
    values.resize(count, 0.0);
    Ok(values)
}

/// Every given name must denote an input buffer, a parameter, or an output/temp buffer.
pub(crate) fn check_names(
    program: &Program,
    inputs: &HashMap<String, SparseTensor<'_>>,
    options: &InterpOptions,
) -> Result<(), InterpError> {
    for name in inputs.keys() {
        let ok = program
            .buffer_by_name(name)
            .is_some_and(|id| program.buffers[id].role == BufferRole::Input);
        if !ok {
            return Err(InterpError::UnknownInput { name: name.clone() });
        }
    }
    for name in options.params.keys() {
        if program.param_by_name(name).is_none() {
            return Err(InterpError::UnknownParam { name: name.clone() });
        }
    }
    for name in options.output_structures.keys() {
        let ok = program
            .buffer_by_name(name)
            .is_some_and(|id| program.buffers[id].role != BufferRole::Input);
        if !ok {
            return Err(InterpError::UnknownOutputStructure { name: name.clone() });
        }
    }
    Ok(())
}

/// Every buffer lists each axis's parent before the axis.
pub(crate) fn check_buffer_parents(program: &Program) -> Result<(), InterpError> {
    for decl in program.buffers.values() {
        for (k, &a) in decl.axes.iter().enumerate() {
            if let Some(p) = program.axes[a].parent {
                if !decl.axes[..k].contains(&p) {
                    return Err(InterpError::BufferMissingParent {
                        buffer: decl.name.clone(),
                        axis: program.axes[a].name.clone(),
                        parent: program.axes[p].name.clone(),
                    });
                }
            }
        }
    }
    Ok(())
}

/// Checks an input's element type; integer buffers are copied out as exact integers.
pub(crate) fn input_values<'i>(
    buffer: &str,
    dtype: DType,
    values: &'i Values<'_>,
) -> Result<BufValues<'i>, InterpError> {
    if dtype.is_float() {
        if values.dtype() != dtype {
            return Err(InterpError::DTypeMismatch {
                buffer: buffer.to_string(),
                expected: dtype.to_string(),
                found: values.dtype().to_string(),
            });
        }
        return Ok(BufValues::Borrowed(values.view()));
    }
    let (lo, hi) = match dtype {
        DType::I32 => (i32::MIN as f64, i32::MAX as f64),
        _ => (-(2f64.powi(53)), 2f64.powi(53)),
    };
    let all = values.to_f64_vec();
    for (offset, &v) in all.iter().enumerate() {
        if v.fract() != 0.0 || !(lo..=hi).contains(&v) {
            return Err(InterpError::NotAnInteger {
                buffer: buffer.to_string(),
                offset,
                value: v,
                dtype: dtype.to_string(),
            });
        }
    }
    Ok(BufValues::Owned(all))
}
