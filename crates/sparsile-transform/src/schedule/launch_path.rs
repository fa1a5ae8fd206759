//! Where a loop sits in a GPU function: the launch that holds it and the loops and
//! conditions from the launch down to it, and which variables depend on the thread —
//! what primitives that place barriers or warp collectives (`cache_shared`,
//! `cache_write_shared`, `warp_reduce`) check, since every thread meant to meet at a barrier must reach it.
//!
//! Precondition: the function's loop variables are unique (as every primitive keeps
//! them). Example: for `launch L { for b bind(blockIdx.x) { if b < n { for t bind(threadIdx.x)
//! { for c in ... } } } }`, the path to `c` is the launch's body and `[loop b, cond b < n,
//! loop t]`.

use std::collections::HashSet;

use sparsile_ir::id::VarId;
use sparsile_ir::loops::{Expr, For, Stmt};

/// What encloses the loop, from the launch down.
pub(crate) struct Path<'a> {
    pub launch: &'a [Stmt],
    /// Loops and conditions between the launch and the loop, outermost first.
    pub around: Vec<Around<'a>>,
    /// Whether a serial loop inside the launch encloses the loop (it runs again).
    pub serial_inside_launch: bool,
}

pub(crate) enum Around<'a> {
    Loop(&'a For),
    Cond(&'a Expr),
}

/// The launch and the loops and conditions around the loop over `var`.
pub(crate) fn path_to(stmts: &[Stmt], var: VarId) -> Option<Path<'_>> {
    fn walk<'a>(stmts: &'a [Stmt], var: VarId, around: &mut Vec<Around<'a>>) -> bool {
        for s in stmts {
            match s {
                Stmt::For(f) if f.var == var => return true,
                Stmt::For(f) => {
                    around.push(Around::Loop(f));
                    if walk(&f.body, var, around) {
                        return true;
                    }
                    around.pop();
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                    ..
                } => {
                    around.push(Around::Cond(cond));
                    if walk(then_body, var, around) || walk(else_body, var, around) {
                        return true;
                    }
                    around.pop();
                }
                Stmt::Block { body, .. } if walk(body, var, around) => return true,
                _ => {}
            }
        }
        false
    }
    stmts.iter().find_map(|s| match s {
        Stmt::Launch { body, .. } => {
            let mut around = Vec::new();
            walk(body, var, &mut around).then(|| {
                let serial_inside_launch = around
                    .iter()
                    .any(|a| matches!(a, Around::Loop(f) if f.kind.gpu_axis().is_none()));
                Path {
                    launch: body.as_slice(),
                    around,
                    serial_inside_launch,
                }
            })
        }
        _ => None,
    })
}

/// Adds to `on` every variable of `stmts` whose value may depend on one in `on`: `let`s
/// computed from them, and every assigned local or warp-reduction result (conservative).
pub(crate) fn dependents(stmts: &[Stmt], on: &mut HashSet<VarId>) {
    loop {
        let before = on.len();
        Stmt::visit_all(stmts, &mut |s| match s {
            Stmt::Let { var, value, .. } => {
                let mut d = false;
                value.visit(&mut |x| d |= matches!(x, Expr::Var(v) if on.contains(v)));
                if d {
                    on.insert(*var);
                }
            }
            Stmt::Assign { var, .. } | Stmt::WarpReduce { var, .. } => {
                on.insert(*var);
            }
            Stmt::For(l) => {
                let mut d = false;
                for e in [&l.lo, &l.hi] {
                    e.visit(&mut |x| d |= matches!(x, Expr::Var(v) if on.contains(v)));
                }
                if d {
                    on.insert(l.var);
                }
            }
            _ => {}
        });
        if on.len() == before {
            return;
        }
    }
}

/// Whether `e` reads a variable of `on`.
pub(crate) fn depends(e: &Expr, on: &HashSet<VarId>) -> bool {
    let mut d = false;
    e.visit(&mut |x| d |= matches!(x, Expr::Var(v) if on.contains(v)));
    d
}

/// Whether every thread of the block reaches the loop `f` alike: no condition or loop
/// bound on the path from the launch down, nor `f`'s bounds, depends on the thread.
pub(crate) fn block_uniform(path: &Path<'_>, f: &For) -> bool {
    let mut per_thread: HashSet<VarId> = HashSet::new();
    for a in &path.around {
        if let Around::Loop(l) = a {
            if l.kind
                .gpu_axis()
                .is_some_and(sparsile_ir::loops::GpuAxis::is_thread)
            {
                per_thread.insert(l.var);
            }
        }
    }
    dependents(path.launch, &mut per_thread);
    let divergent = path.around.iter().any(|a| match a {
        Around::Loop(l) => depends(&l.lo, &per_thread) || depends(&l.hi, &per_thread),
        Around::Cond(c) => depends(c, &per_thread),
    });
    !divergent && !depends(&f.lo, &per_thread) && !depends(&f.hi, &per_thread)
}
