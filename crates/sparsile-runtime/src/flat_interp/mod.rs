//! The loop-level interpreter: executes a stage-III (or stage-II) [`Func`] on the input
//! tensors of the stage-I [`Program`] it was lowered from, following the semantics
//! fixed in [`sparsile_ir::loops`]. It is the oracle for lowering passes and compiled
//! kernels: values are computed in f64 and rounded to each buffer's type when stored;
//! float locals keep f64 whatever their declared type (so a `let` accumulator stored
//! once rounds once, exactly like [`crate::interpret`], while accumulating in an f32
//! buffer rounds after every store). Scratch buffers start at zero, once per run.
//!
//! Binding is the one the compiled runtime performs:
//! 1. `program` is bound to `inputs` and `options` exactly as [`crate::interpret`] binds
//!    it (same checks, same errors, wrapped in [`FlatInterpError::Binding`]): parameters
//!    unify with the input storage, output and temp structures are given or derived, and
//!    outputs and temps start at zero.
//! 2. Each parameter of `func` takes the value of the program parameter of the same name.
//! 3. Each buffer of `func` is bound by its kind: `Values` buffer `B` to the values of
//!    stage-I buffer `B` (same element type); `Indptr`/`Indices { tensor, axis }` to that
//!    array of storage axis `axis` of `tensor`'s structure (stored with the buffer's
//!    element type as index type); `Scratch` to zeros of the declared length. A flat buffer's declared length must equal what it is bound to.
//!    Stage-II `Axes` layouts must list the stage-I buffer's axes; an access gives one
//!    position per axis, each checked against its axis and its parent's position, and
//!    is flattened with [`sparsile_formats::Structure::value_offset`].
//!
//! Execution never panics: an access out of bounds, a type error, an unbound variable
//! is a [`FlatInterpError`] naming the buffer, offset, length and statement. All loops
//! run serially; with [`FlatOptions::check_parallel`] (on in [`run`]) a `parallel` loop
//! whose iterations store to the same element, or one loads an element another stores
//! (scratch and local buffers excepted; atomic adds race only with plain loads and
//! stores), or that assigns a local declared outside it, is an error. Every iteration of
//! a parallel loop (checked or not) starts with poisoned local buffers.
//!
//! The output tensors are the program's `Output` buffers, as [`crate::interpret`]
//! returns them.
//!
//! ```
//! use std::collections::HashMap;
//! use sparsile_formats::{CooTensor, Format, SparseTensor};
//! use sparsile_ir::coord::{AxisDecl, BufferDecl, BufferRole, Extent, Param, Program, BinaryOp};
//! use sparsile_ir::loops::{Buffer, BufferKind, BufferLayout, Expr, For, ForKind, Func, Stage, Stmt, Var, VarType};
//! use sparsile_ir::{DType, IndexType, Span};
//! use sparsile_runtime::{flat_interp, InterpOptions};
//!
//! // Stage I declarations: A (CSR, m x n) and x, y dense; the body is not needed here.
//! let mut p = Program::new("spmv");
//! let m = p.params.push(Param { name: "m".into() });
//! let n = p.params.push(Param { name: "n".into() });
//! let nnz = p.params.push(Param { name: "nnz".into() });
//! let i = p.axes.push(AxisDecl::dense_fixed("I", Extent::Param(m)));
//! let j = p.axes.push(AxisDecl::sparse_variable("J", i, Extent::Param(n), Extent::Param(nnz), IndexType::I32));
//! let jd = p.axes.push(AxisDecl::dense_fixed("JD", Extent::Param(n)));
//! let decl = |name: &str, axes, role| BufferDecl { name: name.into(), dtype: DType::F64, axes, role, span: Span::default() };
//! p.buffers.push(decl("A", vec![i, j], BufferRole::Input));
//! p.buffers.push(decl("x", vec![jd], BufferRole::Input));
//! p.buffers.push(decl("y", vec![i], BufferRole::Output));
//!
//! // Stage III: for i { for jp in indptr[i]..indptr[i+1] { y[i] = y[i] + A[jp] * x[indices[jp]] } }
//! let mut f = Func::new("spmv", Stage::Flat);
//! f.params = p.params.clone();
//! let flat = |name: &str, dtype, len, kind, role| Buffer { name: name.into(), dtype, layout: BufferLayout::Flat(len), role, kind, span: Span::default() };
//! let a = f.buffers.push(flat("A", DType::F64, Expr::Param(nnz), BufferKind::Values, BufferRole::Input));
//! let x = f.buffers.push(flat("x", DType::F64, Expr::Param(n), BufferKind::Values, BufferRole::Input));
//! let y = f.buffers.push(flat("y", DType::F64, Expr::Param(m), BufferKind::Values, BufferRole::Output));
//! let ptr = f.buffers.push(flat("A_J_indptr", DType::I32,
//!     Expr::binary(BinaryOp::Add, Expr::Param(m), Expr::Int(1)),
//!     BufferKind::Indptr { tensor: "A".into(), axis: 1 }, BufferRole::Input));
//! let idx = f.buffers.push(flat("A_J_indices", DType::I32, Expr::Param(nnz),
//!     BufferKind::Indices { tensor: "A".into(), axis: 1 }, BufferRole::Input));
//! let vi = f.vars.push(Var { name: "i".into(), ty: VarType::Index });
//! let vjp = f.vars.push(Var { name: "jp".into(), ty: VarType::Index });
//! let (iv, jpv) = (|| Expr::Var(vi), || Expr::Var(vjp));
//! let yi = Expr::load(y, vec![iv()]);
//! let prod = Expr::binary(BinaryOp::Mul, Expr::load(a, vec![jpv()]),
//!     Expr::load(x, vec![Expr::load(idx, vec![jpv()])]));
//! let inner = For { var: vjp, kind: ForKind::Serial, span: Span::default(),
//!     lo: Expr::load(ptr, vec![iv()]),
//!     hi: Expr::load(ptr, vec![Expr::binary(BinaryOp::Add, iv(), Expr::Int(1))]),
//!     body: vec![Stmt::Store { buffer: y, indices: vec![iv()], span: Span::default(),
//!         value: Expr::binary(BinaryOp::Add, yi, prod) }] };
//! f.body.push(Stmt::For(For { var: vi, kind: ForKind::Parallel, span: Span::default(),
//!     lo: Expr::Int(0), hi: Expr::Param(m), body: vec![Stmt::For(inner)] }));
//!
//! let a_coo = CooTensor::from_triplets(vec![2, 3], &[(0, 0, 1.0), (0, 2, 2.0), (1, 1, 3.0)]).unwrap();
//! let x_coo = CooTensor { shape: vec![3], coords: vec![0, 1, 2], values: vec![1.0, 10.0, 100.0] };
//! let inputs = HashMap::from([
//!     ("A".to_string(), SparseTensor::from_coo(&a_coo, &Format::Csr).unwrap()),
//!     ("x".to_string(), SparseTensor::from_coo(&x_coo, &Format::Dense).unwrap()),
//! ]);
//! let opts = InterpOptions { skip_verify: true, ..Default::default() };
//! let out = flat_interp::run(&f, &p, &inputs, &opts).unwrap();
//! assert_eq!(out["y"].values.to_f64_vec(), vec![201.0, 30.0]);
//! ```

mod error;
pub(crate) mod eval;
pub(crate) mod exec;
pub(crate) mod ids;
pub(crate) mod memory;
pub(crate) mod program_binding;
mod races;

use std::collections::HashMap;

use sparsile_formats::{SparseTensor, Values};
use sparsile_ir::coord::{BufferRole, Program};
use sparsile_ir::loops::{BufferLayout, Func, Stmt};
use sparsile_ir::{BufferId, DType, IdVec, ParamId};

pub use error::FlatInterpError;

use crate::interp::state::BufValues;
use crate::{InterpError, InterpOptions, Outputs};
use eval::Evaluator;
use exec::Exec;
use memory::{Data, Mem};
use program_binding::BoundProgram;

/// Options of [`run_with`] beyond the binding options.
#[derive(Debug, Clone)]
pub struct FlatOptions {
    /// Runs the loop-level verifier ([`sparsile_ir::loops::verify`]) on the function
    /// first; a violation is a [`FlatInterpError::InvalidFunc`]. Off by default: the
    /// interpreter also runs functions the verifier rejects (mixed integer and float
    /// arithmetic is widened to f64), checking what it meets.
    pub verify_func: bool,
    /// Checks that the iterations of every `parallel` loop are independent: no element
    /// of an output or temp is stored by two iterations, or stored by one and loaded by
    /// another (scratch buffers excepted), and no local declared outside the loop is
    /// assigned. Costs hash-map entries per element loaded or stored there.
    pub check_parallel: bool,
}

impl Default for FlatOptions {
    /// Parallel checking on, verification off.
    fn default() -> Self {
        FlatOptions {
            verify_func: false,
            check_parallel: true,
        }
    }
}

/// Executes `func`, lowered from `program`, on `inputs` (one tensor per input buffer of
/// `program`, by name), with parallel-loop checking on.
pub fn run(
    func: &Func,
    program: &Program,
    inputs: &HashMap<String, SparseTensor<'_>>,
    options: &InterpOptions,
) -> Result<Outputs, FlatInterpError> {
    run_with(func, program, inputs, options, &FlatOptions::default())
}

/// [`run`] with explicit [`FlatOptions`].
pub fn run_with(
    func: &Func,
    program: &Program,
    inputs: &HashMap<String, SparseTensor<'_>>,
    options: &InterpOptions,
    flat: &FlatOptions,
) -> Result<Outputs, FlatInterpError> {
    if flat.verify_func {
        sparsile_ir::loops::verify(func)
            .map_err(|errors| FlatInterpError::InvalidFunc { errors })?;
    }
    ids::check_ids(func)?;
    if let Some(launch) = func.body.iter().find(|s| matches!(s, Stmt::Launch { .. })) {
        return Err(FlatInterpError::GpuNode {
            what: format!("function `{}` has a launch", func.name),
            at: launch.span(),
        });
    }
    let (bound, mut exec) = bind(func, program, inputs, options, flat.check_parallel, false)?;
    exec.run(&func.body)?;
    Ok(outputs(program, &bound, &exec.mems))
}

/// Binds `func`, lowered from `program`, to `inputs` (steps 1 to 3 of the module docs):
/// the bound stage-I program, and an executor holding the function's parameters and
/// buffers, scratch allocated and lengths checked. With `gpu`, `shared` buffers are
/// bound like scratch buffers (their contents are the caller's business); without, they
/// are an error. `func`'s ids must have been checked ([`ids::check_ids`]).
pub(crate) fn bind<'f, 'i>(
    func: &'f Func,
    program: &Program,
    inputs: &'i HashMap<String, SparseTensor<'_>>,
    options: &InterpOptions,
    check_parallel: bool,
    gpu: bool,
) -> Result<(BoundProgram<'i>, Exec<'f, 'i>), FlatInterpError> {
    let bound = program_binding::bind_program(program, inputs, options)?;
    let mut params = IdVec::<ParamId, i64>::new();
    for param in func.params.values() {
        let id =
            program
                .param_by_name(&param.name)
                .ok_or_else(|| FlatInterpError::UnknownParam {
                    param: param.name.clone(),
                })?;
        let value = bound.params[id].ok_or_else(|| InterpError::UnboundParam {
            param: param.name.clone(),
            needed_for: format!("function `{}`", func.name),
        })?;
        params.push(value);
    }
    let promises = crate::bound_promises::bound_promises(func);
    let values: Vec<i64> = params.values().copied().collect();
    if let Some((p, trip)) = crate::bound_promises::broken_promise(&promises, &values) {
        return Err(FlatInterpError::BoundExceeded {
            var: p.var.clone(),
            extent: p.extent,
            trip,
        });
    }
    let mems = memory::bind_buffers(func, program, &bound, gpu)?;
    let mut exec = Exec::new(func, params, mems, check_parallel);
    check_lengths(&mut exec)?;
    Ok((bound, exec))
}

/// The program's output tensors, with the values the function computed in `mems`
/// (the bound values for outputs the function does not hold).
pub(crate) fn outputs(
    program: &Program,
    bound: &BoundProgram<'_>,
    mems: &IdVec<BufferId, Mem<'_>>,
) -> Outputs {
    let mut outputs = Outputs::new();
    for (id, decl) in program.buffers.iter() {
        if decl.role != BufferRole::Output {
            continue;
        }
        let state = &bound.buffers[id];
        let structure = state
            .owned_structure
            .clone()
            .expect("outputs own their structure");
        let computed = mems.values().find(|m| m.values_of == Some(id));
        let f64s: Vec<f64> = match computed.map(|m| &m.data) {
            Some(Data::Float(v)) => v.clone(),
            Some(Data::Int(v)) => v.iter().map(|&i| i as f64).collect(),
            None => match &state.values {
                BufValues::Owned(v) => v.clone(),
                BufValues::Borrowed(v) => v.to_f64_vec(),
            },
        };
        let dtype = if decl.dtype.is_int() {
            DType::F64
        } else {
            decl.dtype
        };
        outputs.insert(
            decl.name.clone(),
            SparseTensor {
                structure,
                values: Values::from_f64(&f64s, dtype),
            },
        );
    }
    outputs
}

/// Checks every flat buffer's declared length against what it is bound to, and
/// allocates scratch buffers.
fn check_lengths(exec: &mut Exec<'_, '_>) -> Result<(), FlatInterpError> {
    let func = exec.func;
    for (id, buf) in func.buffers.iter() {
        let BufferLayout::Flat(len_expr) = &buf.layout else {
            continue;
        };
        let len = exec.eval_int(len_expr, || format!("the length of `{}`", buf.name))?;
        let mem = &mut exec.mems[id];
        if mem.scratch {
            let bad = || FlatInterpError::BadScratchLength {
                buffer: buf.name.clone(),
                len,
            };
            let n = usize::try_from(len).map_err(|_| bad())?;
            match &mut mem.data {
                Data::Float(v) => {
                    v.try_reserve_exact(n).map_err(|_| bad())?;
                    v.resize(n, 0.0);
                }
                Data::Int(v) => {
                    v.try_reserve_exact(n).map_err(|_| bad())?;
                    v.resize(n, 0);
                }
            }
            if mem.local {
                mem.poison();
            }
        } else if usize::try_from(len).ok() != Some(mem.data.len()) {
            return Err(FlatInterpError::LengthMismatch {
                buffer: buf.name.clone(),
                declared: len,
                actual: mem.data.len(),
            });
        }
    }
    Ok(())
}
