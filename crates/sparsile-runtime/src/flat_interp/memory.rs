//! The buffers of a loop-level function during execution, bound the way the compiled
//! runtime binds them (the kernel ABI):
//! - `Values` buffer `B`: the values of stage-I buffer `B` (an input tensor's values, or
//!   the zero-filled values of an output or temp), with `B`'s element type;
//! - `Indptr`/`Indices { tensor, axis }`: that array of storage axis `axis` of the
//!   structure bound to stage-I buffer `tensor`, whose index type must be the buffer's
//!   element type (as compiled kernels take the array in place);
//! - `Scratch`: zero-filled, of the declared length;
//! - `Local`: of the declared length, poisoned (NaN, or `i64::MIN` for integers) at the
//!   start of the run and of every iteration of every parallel loop, since its contents
//!   are undefined there.
//!
//! Floating-point elements are held as f64 rounded to the buffer's type on every store;
//! integer elements as i64 (a store into an `i32` buffer must fit).

use std::sync::Arc;

use sparsile_formats::{Structure, Values};
use sparsile_ir::coord::{BufferRole, Program};
use sparsile_ir::loops::{Buffer, BufferKind, BufferLayout, Func, Stage};
use sparsile_ir::{BufferId, DType, IdVec, Span};

use super::eval::Scalar;
use super::program_binding::BoundProgram;
use super::FlatInterpError;
use crate::interp::state::BufValues;

/// The elements of a buffer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Data {
    Float(Vec<f64>),
    Int(Vec<i64>),
}

impl Data {
    pub fn len(&self) -> usize {
        match self {
            Data::Float(v) => v.len(),
            Data::Int(v) => v.len(),
        }
    }
}

/// How accesses to a buffer are turned into offsets.
#[derive(Debug, Clone)]
pub(crate) enum Shape<'i> {
    /// One offset.
    Flat,
    /// Stage II: one position per storage axis of this structure, flattened with
    /// [`Structure::value_offset`]; the axis names are for messages.
    Axes {
        structure: Arc<Structure<'i>>,
        names: Vec<String>,
    },
}

/// One buffer of the function.
#[derive(Debug, Clone)]
pub(crate) struct Mem<'i> {
    pub data: Data,
    pub dtype: DType,
    pub shape: Shape<'i>,
    /// Why stores are refused, or `None` when the buffer is writable.
    pub read_only: Option<&'static str>,
    pub scratch: bool,
    /// A local buffer: scratch that every iteration of a parallel loop gets afresh, with
    /// undefined contents (poisoned: NaN, or `i64::MIN` for integers).
    pub local: bool,
    /// The stage-I buffer whose values this is.
    pub values_of: Option<BufferId>,
}

/// The function's buffers; Flat lengths are checked (and scratch allocated) later, once
/// expressions can be evaluated. With `gpu`, a `Shared` buffer is bound like a scratch
/// buffer (the SIMT interpreter gives each block its own copy); without, it is an error.
pub(crate) fn bind_buffers<'i>(
    func: &Func,
    program: &Program,
    bound: &BoundProgram<'i>,
    gpu: bool,
) -> Result<IdVec<BufferId, Mem<'i>>, FlatInterpError> {
    let mut mems = IdVec::new();
    for (id, buf) in func.buffers.iter() {
        let mem = match &buf.kind {
            BufferKind::Values => values_mem(func, program, bound, buf)?,
            BufferKind::Indptr { tensor, axis } => {
                structure_mem(program, bound, buf, tensor, *axis, "indptr")?
            }
            BufferKind::Indices { tensor, axis } => {
                structure_mem(program, bound, buf, tensor, *axis, "indices")?
            }
            BufferKind::Shared if !gpu => {
                return Err(FlatInterpError::GpuNode {
                    what: format!("shared buffer `{}`", buf.name),
                    at: buf.span,
                })
            }
            BufferKind::Scratch | BufferKind::Local | BufferKind::Shared => {
                if !matches!(buf.layout, BufferLayout::Flat(_)) {
                    return Err(FlatInterpError::LayoutMismatch {
                        buffer: buf.name.clone(),
                        detail: format!("a {} buffer must be flat", kind_word(&buf.kind)),
                    });
                }
                Mem {
                    data: if buf.dtype.is_int() {
                        Data::Int(Vec::new())
                    } else {
                        Data::Float(Vec::new())
                    },
                    dtype: buf.dtype,
                    shape: Shape::Flat,
                    read_only: None,
                    scratch: true,
                    local: buf.kind == BufferKind::Local,
                    values_of: None,
                }
            }
        };
        if let Some(of) = mem.values_of {
            let earlier: &IdVec<BufferId, Mem<'i>> = &mems;
            if let Some((first, _)) = earlier.iter().find(|(_, m)| m.values_of == Some(of)) {
                return Err(FlatInterpError::DuplicateValues {
                    buffer: buf.name.clone(),
                    first: first.0 as usize,
                    second: id.0 as usize,
                });
            }
        }
        mems.push(mem);
    }
    Ok(mems)
}

fn program_buffer(
    program: &Program,
    buffer: &str,
    tensor: &str,
) -> Result<BufferId, FlatInterpError> {
    program
        .buffer_by_name(tensor)
        .ok_or_else(|| FlatInterpError::UnknownTensor {
            buffer: buffer.to_string(),
            tensor: tensor.to_string(),
        })
}

fn values_mem<'i>(
    func: &Func,
    program: &Program,
    bound: &BoundProgram<'i>,
    buf: &Buffer,
) -> Result<Mem<'i>, FlatInterpError> {
    let pid = program_buffer(program, &buf.name, &buf.name)?;
    let decl = &program.buffers[pid];
    if decl.dtype != buf.dtype {
        return Err(FlatInterpError::DTypeMismatch {
            buffer: buf.name.clone(),
            tensor: decl.name.clone(),
            func: buf.dtype.to_string(),
            program: decl.dtype.to_string(),
        });
    }
    let state = &bound.buffers[pid];
    let shape = match &buf.layout {
        BufferLayout::Flat(_) => Shape::Flat,
        BufferLayout::Axes(axes) => {
            if func.stage != Stage::Pos {
                return Err(FlatInterpError::LayoutMismatch {
                    buffer: buf.name.clone(),
                    detail: "a stage-III function has only flat buffers".to_string(),
                });
            }
            let names: Vec<String> = axes.iter().map(|&a| func.axes[a].name.clone()).collect();
            let expected: Vec<&str> = decl
                .axes
                .iter()
                .map(|&a| program.axes[a].name.as_str())
                .collect();
            if names != expected {
                return Err(FlatInterpError::LayoutMismatch {
                    buffer: buf.name.clone(),
                    detail: format!(
                        "laid out over axes {names:?} but the stage-I buffer is over {expected:?}"
                    ),
                });
            }
            Shape::Axes {
                structure: Arc::clone(&state.structure),
                names,
            }
        }
    };
    let data = match &state.values {
        BufValues::Borrowed(values) => Data::Float(values.to_f64_vec()),
        BufValues::Owned(values) if decl.dtype.is_int() => {
            Data::Int(values.iter().map(|&v| v as i64).collect())
        }
        BufValues::Owned(values) => Data::Float(values.clone()),
    };
    Ok(Mem {
        data,
        dtype: buf.dtype,
        shape,
        read_only: (decl.role == BufferRole::Input).then_some("an input"),
        scratch: false,
        local: false,
        values_of: Some(pid),
    })
}

fn structure_mem<'i>(
    program: &Program,
    bound: &BoundProgram<'i>,
    buf: &Buffer,
    tensor: &str,
    axis: usize,
    array: &'static str,
) -> Result<Mem<'i>, FlatInterpError> {
    let pid = program_buffer(program, &buf.name, tensor)?;
    if !buf.dtype.is_int() {
        return Err(FlatInterpError::NonIntegerStructure {
            buffer: buf.name.clone(),
            array,
            dtype: buf.dtype.to_string(),
        });
    }
    if !matches!(buf.layout, BufferLayout::Flat(_)) {
        return Err(FlatInterpError::LayoutMismatch {
            buffer: buf.name.clone(),
            detail: format!("an {array} buffer must be flat"),
        });
    }
    let structure = &bound.buffers[pid].structure;
    let storage = structure
        .axes
        .get(axis)
        .ok_or_else(|| FlatInterpError::AxisOutOfRange {
            buffer: buf.name.clone(),
            tensor: tensor.to_string(),
            axis,
            count: structure.axes.len(),
        })?;
    let arr = match array {
        "indptr" => storage.indptr.as_ref(),
        _ => storage.indices.as_ref(),
    }
    .ok_or_else(|| FlatInterpError::MissingArray {
        buffer: buf.name.clone(),
        tensor: tensor.to_string(),
        axis,
        array,
    })?;
    if arr.index_type().dtype() != buf.dtype {
        return Err(FlatInterpError::IndexTypeMismatch {
            buffer: buf.name.clone(),
            tensor: tensor.to_string(),
            axis,
            array,
            expected: buf.dtype,
            found: arr.index_type(),
        });
    }
    Ok(Mem {
        data: Data::Int((0..arr.len()).map(|i| arr.get_i64(i)).collect()),
        dtype: buf.dtype,
        shape: Shape::Flat,
        read_only: Some("a structure array"),
        scratch: false,
        local: false,
        values_of: None,
    })
}

/// Rounds `v` to floating-point type `dtype`.
pub(crate) fn round_to(v: f64, dtype: DType) -> f64 {
    match dtype {
        DType::F64 => v,
        DType::F32 => v as f32 as f64,
        _ => Values::from_f64(&[v], dtype).get_f64(0),
    }
}

fn kind_word(kind: &BufferKind) -> &'static str {
    match kind {
        BufferKind::Local => "local",
        BufferKind::Shared => "shared",
        _ => "scratch",
    }
}

impl Mem<'_> {
    /// Gives a local buffer undefined contents again.
    pub(crate) fn poison(&mut self) {
        match &mut self.data {
            Data::Float(v) => v.iter_mut().for_each(|x| *x = f64::NAN),
            Data::Int(v) => v.iter_mut().for_each(|x| *x = i64::MIN),
        }
    }

    /// Stores `value` at `offset` (in bounds): rounded to a float element type, or an
    /// integer that must fit the element type; `name` gives the buffer's name for errors.
    pub(crate) fn put(
        &mut self,
        offset: usize,
        value: Scalar,
        name: impl FnOnce() -> String,
        at: Span,
    ) -> Result<(), FlatInterpError> {
        let dtype = self.dtype;
        match (&mut self.data, value) {
            (Data::Float(v), value) => v[offset] = round_to(value.as_f64(), dtype),
            (Data::Int(v), Scalar::Int(i)) => {
                if dtype == DType::I32 && i32::try_from(i).is_err() {
                    return Err(FlatInterpError::IntegerOutOfRange {
                        buffer: name(),
                        value: i,
                        dtype: dtype.to_string(),
                        at,
                    });
                }
                v[offset] = i;
            }
            (Data::Int(_), Scalar::Float(_)) => {
                return Err(FlatInterpError::FloatIntoInteger { buffer: name(), at })
            }
        }
        Ok(())
    }

    /// Adds `value` to the float element at `offset` (in bounds), rounding the sum to the
    /// element type; integer buffers refuse it.
    pub(crate) fn add(
        &mut self,
        offset: usize,
        value: Scalar,
        name: impl FnOnce() -> String,
        at: Span,
    ) -> Result<(), FlatInterpError> {
        let dtype = self.dtype;
        match &mut self.data {
            Data::Float(v) => {
                v[offset] = round_to(v[offset] + value.as_f64(), dtype);
                Ok(())
            }
            Data::Int(_) => Err(FlatInterpError::FloatIntoInteger { buffer: name(), at }),
        }
    }
}
