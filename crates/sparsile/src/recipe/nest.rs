//! Finding the loops a recipe schedules: blocks, their loop nests, and the iteration
//! that carries the main computation.

use sparsile_ir::coord::{self, IterKind, Program};
use sparsile_ir::loops::{For, Func, Stmt};
use sparsile_transform::schedule::LoopRef;

/// The names of the top-level blocks of `func`, in order.
pub(crate) fn blocks(func: &Func) -> Vec<String> {
    func.body
        .iter()
        .filter_map(|s| match s {
            Stmt::Block { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

/// The chain of loops of block `block`, outermost first: the first loop of the block's
/// body, then the first loop of that loop's body, and so on (other statements — `let`s,
/// guards — are skipped; the chain enters the body of a guard).
pub(crate) fn nest<'f>(func: &'f Func, block: &str) -> Vec<(LoopRef, &'f For)> {
    let Some(body) = func.body.iter().find_map(|s| match s {
        Stmt::Block { name, body, .. } if name == block => Some(body),
        _ => None,
    }) else {
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
