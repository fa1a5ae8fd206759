//! The CUDA backend on GPU functions read from text (`tests/cuda/*.flat`): each one
//! verifies and emits the CUDA C++ in `tests/cuda/<name>.cu`, compared exactly
//! (rewritten with `SPARSILE_BLESS=1`). `cuda_nvrtc.rs` compiles the same files.

use std::path::PathBuf;

use sparsile_codegen::{emit_cuda, CudaSource};
use sparsile_ir::loops::Func;
use sparsile_ir::settings::Settings;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("cuda")
}

fn load(name: &str) -> Func {
    let path = dir().join(format!("{name}.flat"));
    let text = std::fs::read_to_string(&path).unwrap();
    let func: Func = text
        .parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    sparsile_ir::flat::verify(&func).unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
    func
}

fn emit(name: &str) -> CudaSource {
    emit_cuda(&load(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            (p.extension()? == "flat")
                .then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    names
}

#[test]
fn every_expected_cuda_file_has_its_flat_function() {
    for entry in std::fs::read_dir(dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "cu") {
            assert!(
                path.with_extension("flat").exists(),
                "{} has no .flat input",
                path.display()
            );
        }
    }
}

#[test]
fn every_flat_file_emits_its_expected_cuda() {
    let names = names();
    assert!(names.len() >= 8, "{names:?}");
    let bless = Settings::from_env().bless;
    for name in names {
        let src = emit(&name);
        let path = dir().join(format!("{name}.cu"));
        if bless {
            std::fs::write(&path, &src.code).unwrap();
        } else {
            let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
                panic!("missing {}: run with SPARSILE_BLESS=1", path.display())
            });
            assert_eq!(
                src.code,
                expected,
                "{name}: emitted CUDA differs from {}",
                path.display()
            );
        }
    }
}
