//! `default_schedule`: the outermost loop of a top-level block is parallel exactly when
//! the block's iteration starts with a spatial axis.

use sparsile_ir::coord::{IterKind, Program, Stmt as CoordStmt};
use sparsile_ir::loops::{ForKind, Func, Stmt};
use sparsile_transform::{default_schedule, lower_iterations};

fn outer_kinds(func: &Func) -> Vec<(String, ForKind)> {
    func.body
        .iter()
        .filter_map(|s| match s {
            Stmt::Block { name, body, .. } => match body.as_slice() {
                [Stmt::For(f)] => Some((name.clone(), f.kind)),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn all_inner_serial(stmts: &[Stmt], depth: usize) {
    for s in stmts {
        match s {
            Stmt::For(f) => {
                if depth > 0 {
                    assert_eq!(f.kind, ForKind::Serial);
                }
                all_inner_serial(&f.body, depth + 1);
            }
            Stmt::Block { body, .. } => all_inner_serial(body, depth),
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                all_inner_serial(then_body, depth + 1);
                all_inner_serial(else_body, depth + 1);
            }
            _ => {}
        }
    }
}

fn schedule(text: &str) -> (Program, Func) {
    let program = sparsile::compile_notation(text).unwrap();
    let func = default_schedule(&program, lower_iterations(&program).unwrap()).unwrap();
    (program, func)
}

fn first_axis_kind(program: &Program, name: &str) -> IterKind {
    program
        .body
        .iter()
        .find_map(|s| match s {
            CoordStmt::Iteration(it) if it.name == name => Some(it.axes[0].kind),
            _ => None,
        })
        .unwrap()
}

#[test]
fn spmm_csr_rows_are_parallel() {
    let (program, func) = schedule(
        "tensor A: f64[m, n] csr\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n",
    );
    let kinds = outer_kinds(&func);
    assert!(!kinds.is_empty());
    for (name, kind) in &kinds {
        if !name.ends_with(".init") {
            assert_eq!(first_axis_kind(&program, name), IterKind::Spatial);
        }
        assert_eq!(*kind, ForKind::Parallel, "{name}");
    }
    all_inner_serial(&func.body, 0);
}

#[test]
fn a_reduction_outer_axis_stays_serial() {
    // CSC SpMV iterates columns (a reduction) first.
    let (program, func) = schedule(
        "tensor A: f64[m, n] csc\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n",
    );
    let mut saw_serial = false;
    for (name, kind) in outer_kinds(&func) {
        if name.ends_with(".init") {
            assert_eq!(kind, ForKind::Parallel);
            continue;
        }
        let expected = match first_axis_kind(&program, &name) {
            IterKind::Spatial => ForKind::Parallel,
            IterKind::Reduction => {
                saw_serial = true;
                ForKind::Serial
            }
        };
        assert_eq!(kind, expected, "{name}");
    }
    assert!(saw_serial, "{program}");
    all_inner_serial(&func.body, 0);
}
