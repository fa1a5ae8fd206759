//! What the emitter knows while it writes one function: the C names of the function's
//! params, buffers and locals, the helpers used so far, and the statement being written
//! (for error locations).

use std::collections::{BTreeSet, HashSet};

use sparsile_ir::loops::{Buffer, BufferLayout, Func, Stage, Var, VarType};
use sparsile_ir::{BufferId, DType, ParamId, Span, VarId};

use super::names::Names;
use super::prelude::Helper;
use super::types::Ty;
use crate::CodegenError;

pub(crate) struct Ctx<'f> {
    pub(crate) func: &'f Func,
    pub(crate) names: Names,
    param_names: Vec<String>,
    buffer_names: Vec<String>,
    var_names: Vec<String>,
    pub(crate) helpers: BTreeSet<Helper>,
    /// The statement being emitted.
    pub(crate) span: Span,
    /// The locals read by the C function being written; `let`s and assignments of other
    /// locals are dead (expressions have no side effects) and are left out.
    pub(crate) live: HashSet<VarId>,
}

impl<'f> Ctx<'f> {
    /// Checks what the C backend supports and names everything.
    pub(crate) fn new(func: &'f Func) -> Result<Ctx<'f>, CodegenError> {
        if func.stage != Stage::Flat {
            return Err(CodegenError::NotFlat {
                func: func.name.clone(),
            });
        }
        for b in func.buffers.values() {
            if matches!(b.dtype, DType::F16 | DType::BF16) {
                return Err(CodegenError::HalfPrecisionBuffer {
                    buffer: b.name.clone(),
                    dtype: b.dtype,
                    span: b.span,
                });
            }
            if let BufferLayout::Axes(_) = b.layout {
                return Err(CodegenError::AxesLayout {
                    buffer: b.name.clone(),
                    span: b.span,
                });
            }
        }
        for v in func.vars.values() {
            match v.ty {
                VarType::Value(d @ (DType::F16 | DType::BF16)) => {
                    return Err(CodegenError::HalfPrecisionLocal {
                        var: v.name.clone(),
                        dtype: d,
                    })
                }
                VarType::Value(d @ (DType::I32 | DType::I64)) => {
                    return Err(CodegenError::IntegerValueLocal {
                        var: v.name.clone(),
                        dtype: d,
                    })
                }
                _ => {}
            }
        }
        let mut names = Names::new();
        let param_names = func.params.values().map(|p| names.fresh(&p.name)).collect();
        let buffer_names = func
            .buffers
            .values()
            .map(|b| names.fresh(&b.name))
            .collect();
        let var_names = func.vars.values().map(|v| names.fresh(&v.name)).collect();
        Ok(Ctx {
            func,
            names,
            param_names,
            buffer_names,
            var_names,
            helpers: BTreeSet::new(),
            span: Span::default(),
            live: HashSet::new(),
        })
    }

    fn unknown(&self, what: &'static str, index: usize, count: usize) -> CodegenError {
        CodegenError::UnknownId {
            what,
            index,
            count,
            span: self.span,
        }
    }

    pub(crate) fn buffer(&self, id: BufferId) -> Result<&'f Buffer, CodegenError> {
        self.func
            .buffers
            .get(id)
            .ok_or_else(|| self.unknown("buffer", id.0 as usize, self.func.buffers.len()))
    }

    pub(crate) fn buffer_name(&self, id: BufferId) -> Result<&str, CodegenError> {
        self.buffer(id)?;
        Ok(&self.buffer_names[id.0 as usize])
    }

    /// The computation type of the buffer's elements.
    pub(crate) fn buffer_ty(&self, id: BufferId) -> Result<Ty, CodegenError> {
        Ok(Ty::of_dtype(self.buffer(id)?.dtype).expect("half buffers rejected in Ctx::new"))
    }

    pub(crate) fn var(&self, id: VarId) -> Result<&'f Var, CodegenError> {
        self.func
            .vars
            .get(id)
            .ok_or_else(|| self.unknown("local", id.0 as usize, self.func.vars.len()))
    }

    pub(crate) fn var_name(&self, id: VarId) -> Result<&str, CodegenError> {
        self.var(id)?;
        Ok(&self.var_names[id.0 as usize])
    }

    pub(crate) fn param_name(&self, id: ParamId) -> Result<&str, CodegenError> {
        self.param_names
            .get(id.0 as usize)
            .map(String::as_str)
            .ok_or_else(|| self.unknown("param", id.0 as usize, self.func.params.len()))
    }
}
