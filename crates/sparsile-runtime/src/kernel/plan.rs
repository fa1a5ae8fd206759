//! What each argument of a compiled function is bound to, checked once when the kernel
//! is built: every buffer of the stage-III [`Func`] names a stage-I buffer (values) or
//! an axis array of one (structure), with compatible element types, and every parameter
//! is a stage-I parameter.

use sparsile_ir::coord::Program;
use sparsile_ir::loops::{BufferKind, BufferLayout, Expr, Func, Stage};
use sparsile_ir::{AxisKind, BufferId, DType, IndexType, ParamId};

use super::KernelError;

/// Which array of an axis a structure buffer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArrayKind {
    Indptr,
    Indices,
}

impl ArrayKind {
    pub fn name(self) -> &'static str {
        match self {
            ArrayKind::Indptr => "indptr",
            ArrayKind::Indices => "indices",
        }
    }
}

/// What one function buffer is bound to.
#[derive(Debug, Clone)]
pub(crate) enum Slot {
    /// The values of stage-I buffer `buffer`.
    Values { buffer: BufferId },
    /// An axis array of stage-I buffer `buffer` (axis number `axis` of its storage).
    Array {
        buffer: BufferId,
        axis: usize,
        array: ArrayKind,
        index_type: IndexType,
    },
    /// A local buffer, which the generated code keeps on its stack; passed as null.
    Scratch,
    /// A scratch buffer: zero-filled memory of its declared length, allocated by the run
    /// (the generated code uses it when several phases share the buffer, and otherwise
    /// allocates its own).
    Memory { dtype: DType },
}

/// The binding of every function buffer and parameter.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// By function buffer, in `Func::buffers` order: name, slot, declared flat length.
    pub buffers: Vec<(String, Slot, Option<Expr>)>,
    /// The stage-I parameter of each function parameter, in `Func::params` order.
    pub params: Vec<ParamId>,
    /// The `bound` promises the parameters must keep (checked before every run).
    pub bounds: Vec<crate::bound_promises::BoundPromise>,
}

fn index_type(buffer: &str, dtype: DType) -> Result<IndexType, KernelError> {
    match dtype {
        DType::I32 => Ok(IndexType::I32),
        DType::I64 => Ok(IndexType::I64),
        other => Err(KernelError::NotAnIndexType {
            buffer: buffer.to_string(),
            dtype: other.to_string(),
        }),
    }
}

/// Checks `func` against `program` and records what each argument is bound to.
/// f16 and bf16 values are bound as their 16-bit words, inputs and outputs alike.
pub(crate) fn plan(program: &Program, func: &Func) -> Result<Plan, KernelError> {
    if func.stage != Stage::Flat {
        return Err(KernelError::NotFlat {
            func: func.name.clone(),
            stage: func.stage.name(),
        });
    }
    let mut buffers = Vec::with_capacity(func.buffers.len());
    for fb in func.buffers.values() {
        let slot = match &fb.kind {
            BufferKind::Values => {
                let id =
                    program
                        .buffer_by_name(&fb.name)
                        .ok_or_else(|| KernelError::UnknownBuffer {
                            buffer: fb.name.clone(),
                        })?;
                let decl = &program.buffers[id];
                if decl.dtype != fb.dtype {
                    return Err(KernelError::ValuesDTypeMismatch {
                        buffer: fb.name.clone(),
                        func_dtype: fb.dtype.to_string(),
                        program_dtype: decl.dtype.to_string(),
                    });
                }
                Slot::Values { buffer: id }
            }
            BufferKind::Indptr { tensor, axis } | BufferKind::Indices { tensor, axis } => {
                let array = if matches!(fb.kind, BufferKind::Indptr { .. }) {
                    ArrayKind::Indptr
                } else {
                    ArrayKind::Indices
                };
                let id =
                    program
                        .buffer_by_name(tensor)
                        .ok_or_else(|| KernelError::UnknownTensor {
                            buffer: fb.name.clone(),
                            tensor: tensor.clone(),
                        })?;
                let decl = &program.buffers[id];
                let axis_id = *decl
                    .axes
                    .get(*axis)
                    .ok_or_else(|| KernelError::AxisOutOfRange {
                        buffer: fb.name.clone(),
                        tensor: tensor.clone(),
                        axis: *axis,
                        axes: decl.axes.len(),
                    })?;
                let kind = program.axes[axis_id].kind;
                let has = match array {
                    ArrayKind::Indptr => kind.is_variable(),
                    ArrayKind::Indices => kind.is_sparse(),
                };
                if !has {
                    return Err(KernelError::NoSuchArray {
                        buffer: fb.name.clone(),
                        tensor: tensor.clone(),
                        axis: *axis,
                        what: array.name(),
                    });
                }
                debug_assert!(kind != AxisKind::DenseFixed);
                Slot::Array {
                    buffer: id,
                    axis: *axis,
                    array,
                    index_type: index_type(&fb.name, fb.dtype)?,
                }
            }
            BufferKind::Local => Slot::Scratch,
            BufferKind::Shared => {
                return Err(KernelError::SharedBuffer {
                    buffer: fb.name.clone(),
                })
            }
            BufferKind::Scratch => Slot::Memory { dtype: fb.dtype },
        };
        let len = match &fb.layout {
            BufferLayout::Flat(e) => Some(e.clone()),
            BufferLayout::Axes(_) => None,
        };
        buffers.push((fb.name.clone(), slot, len));
    }
    let params = func
        .params
        .values()
        .map(|p| {
            program
                .param_by_name(&p.name)
                .ok_or_else(|| KernelError::UnknownParam {
                    param: p.name.clone(),
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Plan {
        buffers,
        params,
        bounds: crate::bound_promises::bound_promises(func),
    })
}

/// The value of a flat length over parameters (`params` in `Func::params` order), or
/// `None` when it reads anything else or overflows.
pub(crate) fn eval_len(e: &Expr, params: &[i64]) -> Option<i64> {
    use sparsile_ir::coord::BinaryOp as B;
    match e {
        Expr::Int(v) => Some(*v),
        Expr::Param(p) => params.get(sparsile_ir::id::Id::index(*p)).copied(),
        Expr::Binary { op, lhs, rhs } => {
            let (a, b) = (eval_len(lhs, params)?, eval_len(rhs, params)?);
            match op {
                B::Add => a.checked_add(b),
                B::Sub => a.checked_sub(b),
                B::Mul => a.checked_mul(b),
                B::Div => {
                    let (q, r) = (a.checked_div(b)?, a.checked_rem(b)?);
                    Some(if r != 0 && (r < 0) != (b < 0) {
                        q - 1
                    } else {
                        q
                    })
                }
                B::Rem => {
                    let r = a.checked_rem(b)?;
                    Some(if r != 0 && (r < 0) != (b < 0) {
                        r + b
                    } else {
                        r
                    })
                }
                B::Max => Some(a.max(b)),
                B::Min => Some(a.min(b)),
            }
        }
        _ => None,
    }
}
