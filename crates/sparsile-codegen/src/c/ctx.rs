//! What the emitter knows while it writes one function: the C names of the function's
//! params, buffers and locals, the helpers used so far, and the statement being written
//! (for error locations). The CUDA emitter uses it too ([`Ctx::with_names`]).

use std::collections::{BTreeSet, HashSet};

use sparsile_ir::loops::{Buffer, BufferKind, BufferLayout, Expr, Func, Stage, Var, VarType};
use sparsile_ir::{BufferId, DType, ParamId, Span, VarId};

use super::names::Names;
use super::prelude::Helper;
use super::reduction::Accumulator;
use super::types::Ty;
use crate::CodegenError;

pub(crate) struct Ctx<'f> {
    pub(crate) func: &'f Func,
    /// Names of the C function being written (locals, loop bounds).
    pub(crate) names: Names,
    /// Names of the whole translation unit (params, buffers, functions).
    global: Names,
    param_names: Vec<String>,
    buffer_names: Vec<String>,
    /// Local names, given on first use in each C function.
    var_names: Vec<Option<String>>,
    pub(crate) helpers: BTreeSet<Helper>,
    /// The statement being emitted.
    pub(crate) span: Span,
    /// The locals read by the C function being written; `let`s and assignments of other
    /// locals are dead (expressions have no side effects) and are left out.
    pub(crate) live: HashSet<VarId>,
    /// Scratch buffers shared by several phases, which the caller allocates.
    pub(crate) caller_scratch: HashSet<BufferId>,
    /// The accumulators of the `vectorized(reassociate)` loop being written.
    pub(crate) accumulators: Vec<Accumulator>,
    /// CUDA: reads served by the vector loads of the `vectorized` loop iteration being
    /// written: (buffer, index as written, the C expression of the element).
    pub(crate) vector_elements: Vec<(BufferId, Expr, String)>,
    /// CUDA: the alignment (bytes) the vector loads of the kernel being written need, per
    /// buffer.
    pub(crate) vector_alignment: std::collections::BTreeMap<BufferId, usize>,
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
            if b.kind == BufferKind::Shared {
                return Err(CodegenError::GpuNode {
                    what: format!("shared buffer `{}`", b.name),
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
        Ok(Ctx::with_names(func, Names::new()))
    }

    /// Names the params and buffers of `func` with `names` (which may hold reserved
    /// words already), without checking anything: the caller has refused what its
    /// backend does not support (f16/bf16 locals and axis layouts).
    pub(crate) fn with_names(func: &'f Func, mut names: Names) -> Ctx<'f> {
        let param_names = func.params.values().map(|p| names.fresh(&p.name)).collect();
        let buffer_names = func
            .buffers
            .values()
            .map(|b| names.fresh(&b.name))
            .collect();
        let var_names = vec![None; func.vars.len()];
        Ctx {
            func,
            names: names.clone(),
            global: names,
            param_names,
            buffer_names,
            var_names,
            helpers: BTreeSet::new(),
            span: Span::default(),
            live: HashSet::new(),
            caller_scratch: HashSet::new(),
            accumulators: Vec::new(),
            vector_elements: Vec::new(),
            vector_alignment: std::collections::BTreeMap::new(),
        }
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

    /// The computation type of the buffer's elements (f32 for f16/bf16 elements).
    pub(crate) fn buffer_ty(&self, id: BufferId) -> Result<Ty, CodegenError> {
        Ok(Ty::of_dtype(self.buffer(id)?.dtype))
    }

    pub(crate) fn var(&self, id: VarId) -> Result<&'f Var, CodegenError> {
        self.func
            .vars
            .get(id)
            .ok_or_else(|| self.unknown("local", id.0 as usize, self.func.vars.len()))
    }

    /// The C name of a local in the function being written.
    pub(crate) fn var_name(&mut self, id: VarId) -> Result<String, CodegenError> {
        let var = self.var(id)?;
        let slot = &mut self.var_names[id.0 as usize];
        if slot.is_none() {
            *slot = Some(self.names.fresh(&var.name));
        }
        Ok(slot.clone().expect("named above"))
    }

    /// A name unique in the whole translation unit (for functions).
    pub(crate) fn global_name(&mut self, wanted: &str) -> String {
        let name = self.global.fresh(wanted);
        self.names = self.global.clone();
        name
    }

    /// Starts a new C function: locals are named afresh (C scopes them per function).
    pub(crate) fn begin_function(&mut self) {
        self.names = self.global.clone();
        self.var_names.iter_mut().for_each(|n| *n = None);
    }

    pub(crate) fn param_name(&self, id: ParamId) -> Result<&str, CodegenError> {
        self.param_names
            .get(id.0 as usize)
            .map(String::as_str)
            .ok_or_else(|| self.unknown("param", id.0 as usize, self.func.params.len()))
    }
}
