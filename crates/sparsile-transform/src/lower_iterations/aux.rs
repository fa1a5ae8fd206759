//! Materialising structure arrays as auxiliary flat buffers.
//!
//! For every stage-I buffer `B` (in declaration order) and every axis number `k` of
//! `B`'s storage axes that has arrays: `B_<axis>_indptr` (variable axes; length = the
//! parent's positions + 1) and `B_<axis>_indices` (sparse axes; length = the axis's
//! positions), dtype = the axis's index type, kind `Indptr`/`Indices { tensor: "B",
//! axis: k }`, role `Input`. An axis shared by several buffers gets its arrays once, from
//! the first buffer declaring it.

use sparsile_ir::coord::{BufferRole, Program};
use sparsile_ir::loops::{Buffer, BufferKind, BufferLayout, Func};
use sparsile_ir::{AxisId, BufferId, IdVec};

use crate::index_expr::{add, npos};

/// The auxiliary buffers of one axis.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuxArrays {
    pub indptr: Option<BufferId>,
    pub indices: Option<BufferId>,
}

/// Appends the auxiliary buffers to `func` and returns them per axis.
pub fn materialise(program: &Program, func: &mut Func) -> IdVec<AxisId, AuxArrays> {
    let mut aux: IdVec<AxisId, AuxArrays> = program
        .axes
        .values()
        .map(|_| AuxArrays::default())
        .collect();
    let mut done: IdVec<AxisId, bool> = program.axes.values().map(|_| false).collect();
    for decl in program.buffers.values() {
        for (k, &axis) in decl.axes.iter().enumerate() {
            if done[axis] {
                continue;
            }
            done[axis] = true;
            let a = &program.axes[axis];
            let dtype = a.index_type.dtype();
            if a.kind.is_variable() {
                let parent_npos = match a.parent {
                    Some(p) => npos(&program.axes, p),
                    None => sparsile_ir::loops::Expr::Int(1),
                };
                aux[axis].indptr = Some(func.buffers.push(Buffer {
                    name: format!("{}_{}_indptr", decl.name, a.name),
                    dtype,
                    layout: BufferLayout::Flat(add(parent_npos, sparsile_ir::loops::Expr::Int(1))),
                    role: BufferRole::Input,
                    kind: BufferKind::Indptr {
                        tensor: decl.name.clone(),
                        axis: k,
                    },
                    span: a.span,
                }));
            }
            if a.kind.is_sparse() {
                aux[axis].indices = Some(func.buffers.push(Buffer {
                    name: format!("{}_{}_indices", decl.name, a.name),
                    dtype,
                    layout: BufferLayout::Flat(npos(&program.axes, axis)),
                    role: BufferRole::Input,
                    kind: BufferKind::Indices {
                        tensor: decl.name.clone(),
                        axis: k,
                    },
                    span: a.span,
                }));
            }
        }
    }
    aux
}
