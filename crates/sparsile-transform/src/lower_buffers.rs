//! Stage II → stage III: buffers over axes become flat 1-D buffers.
//!
//! Purpose: leave only 1-D buffers for the emitters. Every [`BufferLayout::Axes`] buffer
//! becomes [`BufferLayout::Flat`] with length = its number of stored values, and every
//! load and store of it takes one offset computed with the flattening rule of
//! [`sparsile_formats::Structure::value_offset`]: the sum over *leaf* axes (no later axis
//! of the buffer has it as parent) of position × stride, walking the axes from last to
//! first, where each parentless axis multiplies the stride by the position count of the
//! deepest axis of the chain it roots. The length is the product of those chain sizes
//! ([`sparsile_formats::Structure::nnz_stored`]).
//!
//! Preconditions: `func` is in stage II ([`Stage::Pos`]) and its Axes buffers list
//! parents before children (as stage-I buffers do).
//!
//! Postconditions: stage III ([`Stage::Flat`]): no axes, every buffer flat, every access
//! one offset; nothing else changes.
//!
//! Example: BSR `A[IO, JO, II, JI]` (JO under IO; II, JI parentless with lengths r, c):
//! `A[io, jo_p, ii, ji]` becomes `A[jo_p * (r * c) + ii * c + ji]`, length `nnz * r * c`.

use sparsile_ir::coord::AxisDecl;
use sparsile_ir::loops::{BufferLayout, Expr, Func, Mma, Stage, Stmt};
use sparsile_ir::{AxisId, BufferId, IdVec};

use crate::index_expr::{add, mul, npos};
use crate::LowerError;

/// Flattens every buffer of a stage-II function (see the module docs).
pub fn lower_buffers(func: &Func) -> Result<Func, LowerError> {
    if func.stage != Stage::Pos {
        return Err(LowerError::WrongStage {
            pass: "lower_buffers",
            expected: "II",
            found: "III",
        });
    }
    let mut out = func.clone();
    let layouts: IdVec<BufferId, Option<Vec<AxisId>>> = func
        .buffers
        .values()
        .map(|b| match &b.layout {
            BufferLayout::Axes(axes) => Some(axes.clone()),
            BufferLayout::Flat(_) => None,
        })
        .collect();
    for (id, b) in out.buffers.iter_mut() {
        if let Some(axes) = &layouts[id] {
            for (k, &a) in axes.iter().enumerate() {
                if let Some(p) = func.axes[a].parent {
                    if !axes[..k].contains(&p) {
                        return Err(LowerError::BufferMissingParent {
                            buffer: b.name.clone(),
                            axis: func.axes[a].name.clone(),
                            parent: func.axes[p].name.clone(),
                        });
                    }
                }
            }
            b.layout = BufferLayout::Flat(value_count(&func.axes, axes));
        }
    }
    let rewrite = |buffer: BufferId, indices: Vec<Expr>| -> Vec<Expr> {
        match &layouts[buffer] {
            Some(axes) => vec![value_offset(&func.axes, axes, indices)],
            None => indices,
        }
    };
    out.body = stmts(&func.body, &rewrite);
    out.axes = IdVec::new();
    out.stage = Stage::Flat;
    Ok(out)
}

/// Whether `axes[i]` is a leaf of the buffer: no later axis has it as parent.
fn is_leaf(all: &IdVec<AxisId, AxisDecl>, axes: &[AxisId], i: usize) -> bool {
    !axes[i + 1..]
        .iter()
        .any(|&a| all[a].parent == Some(axes[i]))
}

/// The position count of the deepest axis in the chain rooted at `axes[root]` (following
/// the first child each time, as [`sparsile_formats::Structure`] does).
fn tree_size(all: &IdVec<AxisId, AxisDecl>, axes: &[AxisId], root: usize) -> Expr {
    let mut cur = root;
    while let Some(child) = (cur + 1..axes.len()).find(|&j| all[axes[j]].parent == Some(axes[cur]))
    {
        cur = child;
    }
    npos(all, axes[cur])
}

/// The number of stored values of a buffer over `axes`.
pub fn value_count(all: &IdVec<AxisId, AxisDecl>, axes: &[AxisId]) -> Expr {
    (0..axes.len())
        .filter(|&i| all[axes[i]].parent.is_none())
        .map(|i| tree_size(all, axes, i))
        .fold(Expr::Int(1), mul)
}

/// The value offset of the element at `positions` (one per axis of `axes`).
pub fn value_offset(all: &IdVec<AxisId, AxisDecl>, axes: &[AxisId], positions: Vec<Expr>) -> Expr {
    let mut stride = Expr::Int(1);
    let mut offset = Expr::Int(0);
    for (i, pos) in positions.into_iter().enumerate().rev() {
        if is_leaf(all, axes, i) {
            offset = add(mul(pos, stride.clone()), offset);
        }
        if all[axes[i]].parent.is_none() {
            stride = mul(tree_size(all, axes, i), stride);
        }
    }
    offset
}

type Rewrite<'a> = dyn Fn(BufferId, Vec<Expr>) -> Vec<Expr> + 'a;

/// `body` with every access's indices rewritten by `rw`: loads anywhere, and the
/// element each store, atomic add and prefetch names (and the accumulator element of an
/// `mma`).
fn stmts(body: &[Stmt], rw: &Rewrite<'_>) -> Vec<Stmt> {
    let loads = Stmt::map_exprs(body, &mut |e| expr(e, rw));
    Stmt::map_leaves(&loads, &mut |s| match s {
        Stmt::Store {
            buffer,
            indices,
            value,
            span,
        } => Some(Stmt::Store {
            buffer: *buffer,
            indices: rw(*buffer, indices.clone()),
            value: value.clone(),
            span: *span,
        }),
        Stmt::AtomicAdd {
            buffer,
            indices,
            value,
            span,
        } => Some(Stmt::AtomicAdd {
            buffer: *buffer,
            indices: rw(*buffer, indices.clone()),
            value: value.clone(),
            span: *span,
        }),
        Stmt::Prefetch {
            buffer,
            indices,
            span,
        } => Some(Stmt::Prefetch {
            buffer: *buffer,
            indices: rw(*buffer, indices.clone()),
            span: *span,
        }),
        Stmt::Mma(m) => Some(Stmt::Mma(Mma {
            c_indices: rw(m.c, m.c_indices.clone()),
            ..m.clone()
        })),
        _ => None,
    })
}

fn expr(e: &Expr, rw: &Rewrite<'_>) -> Expr {
    e.map(&mut |x| match x {
        Expr::Load { buffer, indices } => Some(Expr::Load {
            buffer: *buffer,
            indices: rw(*buffer, indices.clone()),
        }),
        _ => None,
    })
}
