//! Finding the loops a recipe schedules: blocks, their loop nests, and the iteration
//! that carries the main computation.

use sparsile_ir::coord::{self, IterKind, Program};
use sparsile_ir::loops::{BufferKind, BufferLayout, Expr, For, Func, Stmt};
use sparsile_ir::{AxisKind, VarId};
use sparsile_transform::schedule::LoopRef;

/// The names of the top-level blocks of `func` (those directly in a launch included),
/// in order.
pub(crate) fn blocks(func: &Func) -> Vec<String> {
    top_blocks(func).map(|(name, _)| name.to_string()).collect()
}

/// The top-level blocks (those directly in a launch included) with their bodies.
pub(crate) fn top_blocks(func: &Func) -> impl Iterator<Item = (&str, &[Stmt])> {
    func.body
        .iter()
        .flat_map(|s| match s {
            Stmt::Launch { body, .. } => body.as_slice(),
            other => std::slice::from_ref(other),
        })
        .filter_map(|s| match s {
            Stmt::Block { name, body, .. } => Some((name.as_str(), body.as_slice())),
            _ => None,
        })
}

/// The chain of loops of block `block`, outermost first: the first loop of the block's
/// body, then the first loop of that loop's body, and so on (other statements — `let`s,
/// guards — are skipped; the chain enters the body of a guard).
pub(crate) fn nest<'f>(func: &'f Func, block: &str) -> Vec<(LoopRef, &'f For)> {
    let Some(body) = top_blocks(func).find_map(|(name, body)| (name == block).then_some(body))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut stmts: &[Stmt] = body;
    while let Some(f) = first_loop(stmts) {
        out.push((LoopRef::new(block, func.vars[f.var].name.clone()), f));
        stmts = &f.body;
    }
    out
}

fn first_loop(stmts: &[Stmt]) -> Option<&For> {
    stmts.iter().find_map(|s| match s {
        Stmt::For(f) => Some(f),
        Stmt::If { then_body, .. } => first_loop(then_body),
        Stmt::Block { body, .. } => first_loop(body),
        _ => None,
    })
}

/// The name of the first iteration of `program` (in program order, nested ones
/// included) that has a reduction axis, else the first iteration.
pub(crate) fn main_iteration(program: &Program) -> Option<String> {
    let mut all: Vec<&coord::SparseIteration> = Vec::new();
    collect(&program.body, &mut all);
    all.iter()
        .find(|it| it.axes.iter().any(|a| a.kind == IterKind::Reduction))
        .or(all.first())
        .map(|it| it.name.clone())
}

fn collect<'p>(stmts: &'p [coord::Stmt], out: &mut Vec<&'p coord::SparseIteration>) {
    for s in stmts {
        if let coord::Stmt::Iteration(it) = s {
            out.push(it);
            collect(&it.body, out);
        }
    }
}

/// The dense rows gathered through sparse indices in block `block`: for each loop of
/// the block's nest whose body starts by reading a coordinate (`let j = X_indices[..]`),
/// the dense input buffers (every axis `dense_fixed`) loaded in that body at an index
/// that uses the coordinate and whose last index is an inner loop variable (a row, not
/// a single element). Returned as (loop, buffer name), in nest order.
pub(crate) fn gathered_rows(func: &Func, block: &str) -> Vec<(LoopRef, String)> {
    let mut out = Vec::new();
    for (target, f) in nest(func, block) {
        let coords: Vec<VarId> = f
            .body
            .iter()
            .filter_map(|s| match s {
                Stmt::Let {
                    var,
                    value: Expr::Load { buffer, .. },
                    ..
                } if matches!(func.buffers[*buffer].kind, BufferKind::Indices { .. }) => Some(*var),
                _ => None,
            })
            .collect();
        if coords.is_empty() {
            continue;
        }
        let mut inner: Vec<VarId> = Vec::new();
        let mut loads: Vec<(sparsile_ir::BufferId, Vec<Expr>)> = Vec::new();
        walk_loads(&f.body, &mut inner, &mut loads);
        let mut names: Vec<String> = Vec::new();
        for (buffer, indices) in loads {
            let b = &func.buffers[buffer];
            let dense = matches!(&b.layout, BufferLayout::Axes(axes)
                if axes.iter().all(|a| func.axes[*a].kind == AxisKind::DenseFixed));
            let uses_coord = indices.iter().any(|e| {
                let mut hit = false;
                e.visit(&mut |x| hit |= matches!(x, Expr::Var(v) if coords.contains(v)));
                hit
            });
            let row = matches!(indices.last(), Some(Expr::Var(v)) if inner.contains(v));
            if b.kind == BufferKind::Values
                && b.role == sparsile_ir::coord::BufferRole::Input
                && dense
                && uses_coord
                && row
                && !names.contains(&b.name)
            {
                names.push(b.name.clone());
            }
        }
        out.extend(names.into_iter().map(|n| (target.clone(), n)));
    }
    out
}

/// Every load in `stmts` (buffer, indices), with the variables of all loops inside.
fn walk_loads(
    stmts: &[Stmt],
    inner: &mut Vec<VarId>,
    loads: &mut Vec<(sparsile_ir::BufferId, Vec<Expr>)>,
) {
    let visit = |e: &Expr, loads: &mut Vec<(sparsile_ir::BufferId, Vec<Expr>)>| {
        e.visit(&mut |x| {
            if let Expr::Load { buffer, indices } = x {
                loads.push((*buffer, indices.clone()));
            }
        })
    };
    for s in stmts {
        match s {
            Stmt::For(f) => {
                inner.push(f.var);
                walk_loads(&f.body, inner, loads);
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
                ..
            } => {
                visit(cond, loads);
                walk_loads(then_body, inner, loads);
                walk_loads(else_body, inner, loads);
            }
            Stmt::Block { body, .. } | Stmt::Launch { body, .. } => walk_loads(body, inner, loads),
            Stmt::Prefetch { .. } => {}
            other => other.own_exprs().into_iter().for_each(|e| visit(e, loads)),
        }
    }
}
