//! Which outputs a program overwrites completely before reading them.
//!
//! Purpose: [`CompiledKernel::run_into`](super::CompiledKernel::run_into) reuses the
//! storage of a previous result. Stage-I semantics start every output at zero, so reused
//! storage must be cleared first — unless the program itself sets every stored element
//! before anything reads it, in which case clearing would be a wasted pass over memory.
//! This module finds those outputs from the stage-I program (a property of the
//! program's semantics, which every lowering and schedule preserves).
//!
//! An output `B` is *initialised by the program* when the first top-level statement that
//! touches `B` is a sparse iteration whose spatial axes are exactly `B`'s axes, in order,
//! and that stores to `B` at exactly those iterator variables, unconditionally, a value
//! that does not read `B`:
//! - in its `init` statements (which run for every spatial point before any body
//!   instance), or
//! - in its body, when it has no reduction axes and nothing in it reads `B`;
//!
//! and no axis of `B` may hold padding (a write at a padding coordinate is skipped, so
//! that slot would keep its old value). Both forms are what the notation front end
//! emits (`B.init` for a reduction, `B_zero` before accumulating statements).
//!
//! ```text
//! C_zero: for (i: S, j: S) { C[i, j] = 0.0 }     C is initialised
//! C: for (i: S, j: R) { C[i, j] = C[i, j] + … }  C alone would not be
//! ```

use std::collections::HashSet;

use sparsile_ir::coord::{BufferRole, Expr, IterKind, Program, SparseIteration, Stmt};
use sparsile_ir::{AxisKind, BufferId};

/// The outputs of `program` it initialises (see the module docs).
pub(crate) fn initialised_outputs(program: &Program) -> HashSet<BufferId> {
    program
        .buffers
        .iter()
        .filter(|(_, decl)| decl.role == BufferRole::Output)
        .filter(|&(id, _)| {
            program
                .body
                .iter()
                .find(|s| touches(s, id))
                .is_some_and(|s| match s {
                    Stmt::Iteration(it) => initialises(program, it, id),
                    Stmt::Store(_) => false,
                })
        })
        .map(|(id, _)| id)
        .collect()
}

fn reads_expr(e: &Expr, b: BufferId) -> bool {
    let mut found = false;
    e.visit(&mut |x| {
        if matches!(x, Expr::Load { buffer, .. } if *buffer == b) {
            found = true;
        }
    });
    found
}

fn reads(s: &Stmt, b: BufferId) -> bool {
    match s {
        Stmt::Store(st) => reads_expr(&st.value, b) || st.indices.iter().any(|i| reads_expr(i, b)),
        Stmt::Iteration(it) => it.init.iter().chain(&it.body).any(|s| reads(s, b)),
    }
}

fn touches(s: &Stmt, b: BufferId) -> bool {
    match s {
        Stmt::Store(st) => st.buffer == b || reads(s, b),
        Stmt::Iteration(it) => it.init.iter().chain(&it.body).any(|s| touches(s, b)),
    }
}

fn initialises(program: &Program, it: &SparseIteration, b: BufferId) -> bool {
    let decl = &program.buffers[b];
    let padded = decl.axes.iter().any(|&a| {
        let axis = &program.axes[a];
        axis.padded && matches!(axis.kind, AxisKind::SparseFixed | AxisKind::SparseVariable)
    });
    if padded {
        return false;
    }
    let spatial: Vec<_> = it
        .axes
        .iter()
        .filter(|ia| ia.kind == IterKind::Spatial)
        .collect();
    let covers = spatial.len() == decl.axes.len()
        && spatial.iter().zip(&decl.axes).all(|(ia, &a)| ia.axis == a);
    if !covers {
        return false;
    }
    let full_store = |s: &Stmt| match s {
        Stmt::Store(st) => {
            st.buffer == b
                && !reads_expr(&st.value, b)
                && st.indices.len() == spatial.len()
                && st
                    .indices
                    .iter()
                    .zip(&spatial)
                    .all(|(e, ia)| matches!(e, Expr::Var(v) if *v == ia.var))
        }
        Stmt::Iteration(_) => false,
    };
    if it.init.iter().any(full_store) {
        return true;
    }
    let reduction = it.axes.iter().any(|ia| ia.kind != IterKind::Spatial);
    !reduction && it.body.iter().any(full_store) && !it.body.iter().any(|s| reads(s, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(program: &Program) -> Vec<String> {
        let mut v: Vec<String> = initialised_outputs(program)
            .into_iter()
            .map(|b| program.buffers[b].name.clone())
            .collect();
        v.sort();
        v
    }

    fn parse(text: &str) -> Program {
        text.parse().unwrap_or_else(|e| panic!("{e:?}\n{text}"))
    }

    const HEAD: &str = "func main(m, n) {\n  axis I = dense_fixed(m)\n  axis J = dense_fixed(n)\n  buffer A: f64[I, J] input\n  buffer C: f64[I, J] output\n  buffer y: f64[I] output\n";

    #[test]
    fn a_zero_iteration_or_an_init_initialises() {
        let p = parse(&format!(
            "{HEAD}  iter C_zero over [I: S, J: S] as (i, j) {{\n    C[i, j] = 0.0\n  }}\n  iter y over [I: S, J: R] as (i2, j2) {{\n    init {{\n      y[i2] = 0.0\n    }}\n    y[i2] = y[i2] + A[i2, j2]\n  }}\n  iter C over [I: S, J: S] as (i3, j3) {{\n    C[i3, j3] = C[i3, j3] + A[i3, j3]\n  }}\n}}\n"
        ));
        assert_eq!(names(&p), ["C", "y"]);
    }

    #[test]
    fn accumulating_first_or_covering_part_does_not() {
        // y accumulates without an init; C is stored only on the diagonal.
        let p = parse(&format!(
            "{HEAD}  iter y over [I: S, J: R] as (i, j) {{\n    y[i] = y[i] + A[i, j]\n  }}\n  iter C over [I: S] as (i2) {{\n    C[i2, i2] = 1.0\n  }}\n}}\n"
        ));
        assert!(names(&p).is_empty(), "{:?}", names(&p));
    }

    #[test]
    fn a_store_that_reads_the_output_does_not() {
        let p = parse(&format!(
            "{HEAD}  iter C over [I: S, J: S] as (i, j) {{\n    C[i, j] = C[i, j] * 2.0\n  }}\n  iter y over [I: S, J: R] as (i2, j2) {{\n    init {{\n      y[i2] = y[i2]\n    }}\n    y[i2] = y[i2] + A[i2, j2]\n  }}\n}}\n"
        ));
        assert!(names(&p).is_empty(), "{:?}", names(&p));
    }
}
