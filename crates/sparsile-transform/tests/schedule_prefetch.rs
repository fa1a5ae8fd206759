//! `prefetch`: on SpMM, SDDMM and SpMV over several formats, every loop × every input
//! buffer × a few distances is tried; every accepted call must keep the results of the
//! stage-I interpreter (through `flat_interp`, which also checks that each prefetched
//! element is in bounds) — with empty rows, an empty matrix, a single row and sizes the
//! block sizes do not divide. Plus the text form and one test per error.

#[path = "schedule/harness.rs"]
mod harness;

use harness::{case, check_func, sddmm, spmm, spmv};
use sparsile_ir::loops::{Func, Stmt};
use sparsile_transform::lower_iterations;
use sparsile_transform::schedule::{prefetch, LoopRef, Schedule, ScheduleError};

fn loops(func: &Func) -> Vec<LoopRef> {
    fn walk(func: &Func, stmts: &[Stmt], block: &str, out: &mut Vec<LoopRef>) {
        for s in stmts {
            match s {
                Stmt::For(f) => {
                    out.push(LoopRef::new(block, func.vars[f.var].name.clone()));
                    walk(func, &f.body, block, out);
                }
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(func, then_body, block, out);
                    walk(func, else_body, block, out);
                }
                Stmt::Block { name, body, .. } => walk(func, body, name, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(func, &func.body, "", &mut out);
    out
}

#[test]
fn accepted_prefetches_keep_the_results() {
    let mut accepted = 0;
    for format in ["csr", "coo", "dcsr", "ell", "bsr:2x3", "csc"] {
        for (k, text) in [spmm(format), sddmm(format), spmv(format)]
            .iter()
            .enumerate()
        {
            for (s, sizes) in [
                [("m", 13), ("n", 11), ("k", 5)],
                [("m", 1), ("n", 7), ("k", 3)],
                [("m", 9), ("n", 40), ("k", 16)],
            ]
            .iter()
            .enumerate()
            {
                let c = case(text, sizes, 0.5, (k * 10 + s) as u64 + 1);
                let func = lower_iterations(&c.program).unwrap();
                let inputs: Vec<String> = c
                    .program
                    .buffers
                    .values()
                    .filter(|b| b.role == sparsile_ir::coord::BufferRole::Input)
                    .map(|b| b.name.clone())
                    .collect();
                for target in loops(&func) {
                    for buffer in &inputs {
                        for distance in [1, 3, 8] {
                            if let Ok(f) = prefetch(&func, &target, buffer, distance) {
                                accepted += 1;
                                check_func(&c, &f);
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(accepted > 50, "only {accepted} prefetches accepted");
}

#[test]
fn spmm_rows_are_prefetched_line_by_line_and_round_trip() {
    let text = "tensor A: f32[m, n] csr\ntensor B: f32[n, 40]\ntensor C: f32[m, 40]\nC[i,k] = A[i,j] * B[j,k]\n";
    let program = sparsile::compile_notation(text).unwrap();
    let mut sch = Schedule::new(&program);
    sch.prefetch(&LoopRef::new("C", "j_p"), "B", 4).unwrap();
    let func = sch.func().unwrap().clone();
    let printed = func.to_string();
    // 40 floats span 3 lines of 16.
    for off in [" 0]", " 16]", " 32]"] {
        assert!(
            printed.contains(&format!("prefetch B[A_A_J_indices[j_p + 4],{off}")),
            "{printed}"
        );
    }
    assert!(printed.contains("if j_p + 4 < nnz_A {"), "{printed}");
    let parsed: Func = printed.parse().unwrap();
    assert_eq!(parsed.to_string(), printed);
    let json = sch.trace().to_json();
    let replayed = sparsile_transform::schedule::Trace::from_json(&json)
        .unwrap()
        .replay(&program)
        .unwrap();
    assert_eq!(replayed.func().unwrap().to_string(), printed);
}

#[test]
fn errors_name_what_is_wrong() {
    let program = sparsile::compile_notation(&spmm("csr")).unwrap();
    let func = lower_iterations(&program).unwrap();
    let j = LoopRef::new("C", "j_p");
    assert!(matches!(
        prefetch(&func, &j, "B", 0),
        Err(ScheduleError::BadFactor { factor: 0, .. })
    ));
    assert!(matches!(
        prefetch(&func, &j, "Q", 4),
        Err(ScheduleError::UnknownBuffer { buffer, .. }) if buffer == "Q"
    ));
    assert!(matches!(
        prefetch(&func, &LoopRef::new("C.init", "i"), "B", 4),
        Err(ScheduleError::NoLoadInLoop { buffer, .. }) if buffer == "B"
    ));
    assert!(matches!(
        prefetch(&func, &LoopRef::new("C", "nope"), "B", 4),
        Err(ScheduleError::UnknownLoop { .. })
    ));
    // A sparse buffer cannot be prefetched by position.
    assert!(matches!(
        prefetch(&func, &j, "A", 2),
        Err(ScheduleError::PrefetchIndex { reason, .. }) if reason.contains("A_J")
    ));
    // A load whose index is found by a search cannot be computed ahead.
    let text = "tensor A: f64[m, n] csr\ntensor B: f64[n, k] csr\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";
    let program = sparsile::compile_notation(text).unwrap();
    let func = lower_iterations(&program).unwrap();
    let names: Vec<LoopRef> = loops(&func);
    let err = names
        .iter()
        .filter_map(|l| prefetch(&func, l, "B", 2).err())
        .find(|e| matches!(e, ScheduleError::PrefetchIndex { .. }));
    assert!(err.is_some(), "{func}");
}
