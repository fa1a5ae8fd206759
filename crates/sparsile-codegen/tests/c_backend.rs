//! The C backend on the test kernels: the emitted C against `tests/c/*.c` (rewritten
//! with `SPARSILE_BLESS=1`), a warning-free compile, and results of the compiled
//! kernels run through the ABI against values computed in Rust. Without a C compiler
//! the compile and run checks print that they were skipped.

mod common;

use std::path::PathBuf;

use common::build::FuncBuilder;
use common::harness::{check_compiles, compiler, Data, Kernel};
use common::kernels::*;
use sparsile_codegen::{emit_c, CSource, PhaseKind};
use sparsile_ir::loops::Func;
use sparsile_ir::settings::Settings;

fn snapshot(name: &str, src: &CSource) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"));
    if Settings::from_env().bless {
        std::fs::write(&path, &src.code).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing {}: run with SPARSILE_BLESS=1 to create it",
            path.display()
        )
    });
    assert_eq!(
        src.code,
        expected,
        "emitted C differs from {} (SPARSILE_BLESS=1 rewrites it)",
        path.display()
    );
}

/// Emits, compares with the snapshot and, with a compiler, checks a clean compile.
fn emit_checked(name: &str, func: &Func) -> (CSource, Option<String>) {
    let src = emit_c(func).unwrap();
    snapshot(name, &src);
    let cc = compiler();
    match &cc {
        Some(cc) => {
            if let Err(msg) = check_compiles(cc, &src.code) {
                panic!("{name}: C does not compile cleanly:\n{msg}\n{}", src.code);
            }
        }
        None => eprintln!(
            "{name}: no C compiler (`cc --version` failed): compile and run checks skipped"
        ),
    }
    (src, cc)
}

fn assert_close_f32(got: &[f32], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs();
        assert!(
            err <= tol * (1.0 + w.abs()),
            "{what}[{k}]: got {g}, want {w}"
        );
    }
}

fn assert_close_f64(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs();
        assert!(
            err <= tol * (1.0 + w.abs()),
            "{what}[{k}]: got {g}, want {w}"
        );
    }
}

fn csr_matvec(a: &Csr, x: &[f64]) -> Vec<f64> {
    (0..a.m)
        .map(|i| {
            (a.indptr[i] as usize..a.indptr[i + 1] as usize)
                .map(|q| a.vals[q] * x[a.indices[q] as usize])
                .sum()
        })
        .collect()
}

fn csr_matmat(a: &Csr, b: &[f64], k: usize) -> Vec<f64> {
    let mut c = vec![0.0; a.m * k];
    for i in 0..a.m {
        for q in a.indptr[i] as usize..a.indptr[i + 1] as usize {
            let j = a.indices[q] as usize;
            for kk in 0..k {
                c[i * k + kk] += a.vals[q] * b[j * k + kk];
            }
        }
    }
    c
}

#[test]
fn spmv_csr() {
    let (src, cc) = emit_checked("spmv_csr_f32", &spmv_csr_f32());
    assert_eq!(src.param_order, ["m", "n", "nnz"]);
    let names: Vec<&str> = src.buffer_order.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["A_indptr", "A_indices", "A", "x", "y"]);
    assert_eq!(src.phases.len(), 2);
    assert!(src.phases.iter().all(|p| p.kind == PhaseKind::Parallel));
    assert_eq!(src.phases[1].block.as_deref(), Some("spmv"));
    let Some(cc) = cc else { return };
    let kernel = Kernel::compile(&cc, &src);
    for (seed, m, n) in [(1, 37, 23), (2, 1, 5), (3, 0, 4), (4, 64, 64)] {
        let a = random_csr(seed, m, n, 0.2);
        let x = random_vec(seed + 100, n);
        let mut bufs = vec![
            Data::I32(i32s(&a.indptr)),
            Data::I32(i32s(&a.indices)),
            data_f32(&a.vals),
            data_f32(&x),
            Data::F32(vec![f32::NAN; m]),
        ];
        kernel.run(&mut bufs, &[m as i64, n as i64, a.vals.len() as i64], 5);
        let Data::F32(y) = &bufs[4] else {
            unreachable!()
        };
        assert_close_f32(y, &csr_matvec(&a, &x), 1e-5, "y");
    }
}

#[test]
fn spmm_csr() {
    let (src, cc) = emit_checked("spmm_csr_f64", &spmm_csr_f64());
    assert!(src.code.contains("SPARSILE_IVDEP"));
    let Some(cc) = cc else { return };
    let kernel = Kernel::compile(&cc, &src);
    for (seed, m, n, k) in [(5, 29, 31, 7), (6, 3, 2, 1), (7, 16, 40, 16)] {
        let a = random_csr(seed, m, n, 0.15);
        let b = random_vec(seed + 7, n * k);
        let mut bufs = vec![
            Data::I64(a.indptr.clone()),
            Data::I64(a.indices.clone()),
            Data::F64(a.vals.clone()),
            Data::F64(b.clone()),
            Data::F64(vec![f64::NAN; m * k]),
        ];
        let params = [m as i64, n as i64, k as i64, a.vals.len() as i64];
        kernel.run(&mut bufs, &params, 4);
        let Data::F64(c) = &bufs[4] else {
            unreachable!()
        };
        assert_close_f64(c, &csr_matmat(&a, &b, k), 1e-12, "C");
    }
}

#[test]
fn bsr_spmv() {
    let (src, cc) = emit_checked("bsr_spmv_f32", &bsr_spmv_f32());
    assert!(src.code.contains("SPARSILE_UNROLL"));
    let Some(cc) = cc else { return };
    let kernel = Kernel::compile(&cc, &src);
    for (seed, m, n) in [(8, 7, 9), (9, 8, 8), (10, 1, 1), (11, 33, 17)] {
        let a = random_csr(seed, m, n, 0.3);
        let bsr = csr_to_bsr2(&a);
        let x = random_vec(seed + 3, n);
        let mut bufs = vec![
            Data::I32(i32s(&bsr.indptr)),
            Data::I32(i32s(&bsr.indices)),
            data_f32(&bsr.vals),
            data_f32(&x),
            Data::F32(vec![f32::NAN; m]),
        ];
        let params = [m as i64, n as i64, bsr.mb as i64, bsr.indices.len() as i64];
        kernel.run(&mut bufs, &params, 2);
        let Data::F32(y) = &bufs[4] else {
            unreachable!()
        };
        assert_close_f32(y, &csr_matvec(&a, &x), 1e-5, "y");
    }
}

#[test]
fn lookup_by_search() {
    let (src, cc) = emit_checked("lookup_search_f64", &lookup_search_f64());
    assert!(src.code.contains("sparsile_search_i64("));
    let Some(cc) = cc else { return };
    let kernel = Kernel::compile(&cc, &src);
    let a = random_csr(12, 41, 13, 0.4);
    for c in [0usize, 5, 12, 13] {
        let mut bufs = vec![
            Data::I64(a.indptr.clone()),
            Data::I64(a.indices.clone()),
            Data::F64(a.vals.clone()),
            Data::F64(vec![f64::NAN; a.m]),
        ];
        kernel.run(&mut bufs, &[a.m as i64, a.vals.len() as i64, c as i64], 3);
        let want: Vec<f64> = (0..a.m)
            .map(|i| {
                (a.indptr[i] as usize..a.indptr[i + 1] as usize)
                    .find(|&q| a.indices[q] as usize == c)
                    .map_or(-1.0, |q| a.vals[q])
            })
            .collect();
        let Data::F64(y) = &bufs[3] else {
            unreachable!()
        };
        assert_eq!(y, &want, "column {c}");
    }
}

#[test]
fn scratch_buffers() {
    let (src, cc) = emit_checked("spmm_scratch_f32", &spmm_scratch_f32());
    assert!(
        src.code.contains("calloc("),
        "the k-long scratch is on the heap"
    );
    assert!(
        src.code.contains("float tmp[4] = {0};"),
        "the 4-long scratch is on the stack"
    );
    let scratch: Vec<bool> = src
        .buffer_order
        .iter()
        .map(|b| b.allocated_by_kernel)
        .collect();
    assert_eq!(
        scratch,
        [false, false, false, false, false, false, true, true]
    );
    let Some(cc) = cc else { return };
    let kernel = Kernel::compile(&cc, &src);
    for (seed, m, n, k) in [(13, 19, 11, 5), (14, 2, 2, 33)] {
        let a = random_csr(seed, m, n, 0.3);
        let b = random_vec(seed + 1, n * k);
        let mut bufs = vec![
            Data::I32(i32s(&a.indptr)),
            Data::I32(i32s(&a.indices)),
            data_f32(&a.vals),
            data_f32(&b),
            Data::F32(vec![f32::NAN; m * k]),
            Data::F32(vec![f32::NAN; m]),
            Data::Scratch,
            Data::Scratch,
        ];
        let params = [m as i64, n as i64, k as i64, a.vals.len() as i64];
        kernel.run(&mut bufs, &params, 3);
        let Data::F32(c) = &bufs[4] else {
            unreachable!()
        };
        assert_close_f32(c, &csr_matmat(&a, &b, k), 1e-5, "C");
        let rowsum: Vec<f64> = (0..m)
            .map(|i| {
                a.vals[a.indptr[i] as usize..a.indptr[i + 1] as usize]
                    .iter()
                    .sum()
            })
            .collect();
        let Data::F32(got) = &bufs[5] else {
            unreachable!()
        };
        assert_close_f32(got, &rowsum, 1e-5, "rowsum");
    }
}

#[test]
fn every_operator() {
    let (src, cc) = emit_checked("ops", &ops());
    let kinds: Vec<PhaseKind> = src.phases.iter().map(|p| p.kind).collect();
    assert_eq!(
        kinds,
        [PhaseKind::Parallel, PhaseKind::Serial, PhaseKind::Parallel]
    );
    let Some(cc) = cc else { return };
    let kernel = Kernel::compile(&cc, &src);
    for (seed, n) in [(15, 50), (16, 1), (17, 7)] {
        let (q, r, x, xf, keys) = ops_inputs(seed, n);
        let want = ops_expected(&q, &r, &x, &xf, &keys);
        let mut bufs = vec![
            Data::I64(q),
            Data::I64(r),
            Data::F64(x),
            Data::F32(xf),
            Data::I32(keys),
            Data::I64(vec![i64::MIN; n * 6]),
            Data::F64(vec![f64::NAN; n]),
            Data::F32(vec![f32::NAN; n]),
            Data::I32(vec![0; n]),
            Data::F64(vec![f64::NAN]),
        ];
        kernel.run(&mut bufs, &[n as i64], 3);
        let Data::I64(oi) = &bufs[5] else {
            unreachable!()
        };
        assert_eq!(oi, &want.out_i);
        let Data::F64(of) = &bufs[6] else {
            unreachable!()
        };
        assert_close_f64(of, &want.out_f, 1e-14, "out_f");
        let Data::F32(og) = &bufs[7] else {
            unreachable!()
        };
        let og_want: Vec<f64> = want.out_g.iter().map(|&v| v as f64).collect();
        assert_close_f32(og, &og_want, 1e-6, "out_g");
        let Data::I32(oc) = &bufs[8] else {
            unreachable!()
        };
        assert_eq!(oc, &want.out_c);
        let Data::F64(total) = &bufs[9] else {
            unreachable!()
        };
        assert_close_f64(total, &[want.total], 1e-14, "total");
    }
}

#[test]
fn empty_function() {
    let func = FuncBuilder::new("nothing").finish(vec![]);
    let (src, cc) = emit_checked("empty", &func);
    assert!(src.phases.is_empty());
    let Some(cc) = cc else { return };
    let kernel = Kernel::compile(&cc, &src);
    assert_eq!(kernel.num_phases(), 0);
    kernel.run(&mut [], &[], 1);
}
