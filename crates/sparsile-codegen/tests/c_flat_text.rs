//! The C backend on stage-III functions read from text (`tests/flat/*.flat`: examples of
//! the text IR, and `lowered_*` outputs of the lowering pipeline): each one verifies,
//! emits the C in `tests/c/flat_<name>.c` (rewritten with `SPARSILE_BLESS=1`) and
//! compiles cleanly; the SpMM runs against Rust.

mod common;

use std::path::PathBuf;

use common::harness::{check_compiles, compiler, Data, Kernel};
use common::kernels::{f32s, i32s, random_csr, random_vec};
use sparsile_codegen::emit_c;
use sparsile_ir::loops::Func;
use sparsile_ir::settings::Settings;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn load(name: &str) -> Func {
    let path = dir().join("flat").join(format!("{name}.flat"));
    let text = std::fs::read_to_string(&path).unwrap();
    let func: Func = text
        .parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    sparsile_ir::flat::verify(&func).unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
    func
}

#[test]
fn every_flat_file_emits_and_compiles() {
    let mut names: Vec<String> = std::fs::read_dir(dir().join("flat"))
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            (p.extension()? == "flat")
                .then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    assert!(names.len() >= 3, "{names:?}");
    let bless = Settings::from_env().bless;
    let cc = compiler();
    for name in names {
        let src = emit_c(&load(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let path = dir().join("c").join(format!("flat_{name}.c"));
        if bless {
            std::fs::write(&path, &src.code).unwrap();
        } else {
            let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
                panic!("missing {}: run with SPARSILE_BLESS=1", path.display())
            });
            assert_eq!(
                src.code,
                expected,
                "{name}: emitted C differs from {}",
                path.display()
            );
        }
        match &cc {
            Some(cc) => check_compiles(cc, &src.code).unwrap_or_else(|msg| {
                panic!("{name}: does not compile cleanly:\n{msg}\n{}", src.code)
            }),
            None => eprintln!("{name}: no C compiler: compile check skipped"),
        }
    }
}

#[test]
fn spmm_from_text_runs() {
    let src = emit_c(&load("spmm_csr")).unwrap();
    let Some(cc) = compiler() else {
        eprintln!("no C compiler: run check skipped");
        return;
    };
    let kernel = Kernel::compile(&cc, &src);
    let (m, n, k) = (23, 17, 6);
    let a = random_csr(21, m, n, 0.25);
    let b = random_vec(22, n * k);
    // Buffer order of the text: A, B, C, A_J_indptr, A_J_indices.
    let mut bufs = vec![
        Data::F32(f32s(&a.vals)),
        Data::F32(f32s(&b)),
        Data::F32(vec![f32::NAN; m * k]),
        Data::I32(i32s(&a.indptr)),
        Data::I32(i32s(&a.indices)),
    ];
    kernel.run(
        &mut bufs,
        &[m as i64, n as i64, k as i64, a.vals.len() as i64],
        4,
    );
    let Data::F32(c) = &bufs[2] else {
        unreachable!()
    };
    for i in 0..m {
        for kk in 0..k {
            let want: f64 = (a.indptr[i] as usize..a.indptr[i + 1] as usize)
                .map(|q| a.vals[q] * b[a.indices[q] as usize * k + kk])
                .sum();
            let got = c[i * k + kk] as f64;
            assert!(
                (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                "C[{i},{kk}]: {got} vs {want}"
            );
        }
    }
}
