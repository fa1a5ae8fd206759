//! Every expected CUDA file (`tests/cuda/*.cu`) compiles with NVRTC to a cubin for
//! `sm_80` and for `sm_90`, without warnings and without register spills, and defines
//! every kernel its function has.
//!
//! NVRTC is the runtime's ([`sparsile_runtime::cuda::Nvrtc`]: `SPARSILE_NVRTC`, else
//! `libnvrtc.so.12` on the loader's path); without it the test says it skipped and passes.
//! Run with `--nocapture` to see the registers ptxas gives each kernel.

use std::path::PathBuf;

use sparsile_codegen::emit_cuda;
use sparsile_ir::loops::Func;
use sparsile_ir::settings::Settings;
use sparsile_runtime::cuda::{CudaError, Nvrtc};

const ARCHITECTURES: [&str; 2] = ["sm_80", "sm_90"];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("cuda")
}

#[test]
fn every_expected_cuda_file_compiles_with_nvrtc_without_spills() {
    let nvrtc = match Nvrtc::load(&Settings::from_env()) {
        Ok(nvrtc) => nvrtc,
        Err(e @ CudaError::NvrtcMissing { .. }) => {
            println!("NVRTC compile check skipped: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            (p.extension()? == "cu").then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    assert!(!names.is_empty());
    for name in &names {
        let source = std::fs::read_to_string(dir().join(format!("{name}.cu"))).unwrap();
        let flat = std::fs::read_to_string(dir().join(format!("{name}.flat"))).unwrap();
        let func: Func = flat.parse().unwrap();
        let kernels = emit_cuda(&func).unwrap().kernels;
        for arch in ARCHITECTURES {
            let cubin = nvrtc
                .compile(&source, &format!("{name}.cu"), arch)
                .unwrap_or_else(|e| panic!("{name}.cu does not compile for {arch}: {e}"));
            assert!(
                !cubin.log.to_lowercase().contains("warning"),
                "{name}.cu, {arch}: warnings:\n{}",
                cubin.log
            );
            for k in &kernels {
                let r = cubin.kernel(&k.symbol).unwrap_or_else(|| {
                    panic!(
                        "{name}.cu, {arch}: ptxas compiled no kernel `{}`:\n{}",
                        k.symbol, cubin.log
                    )
                });
                assert!(
                    r.spill_stores == 0 && r.spill_loads == 0,
                    "{name}.cu, {arch}: `{}` spills ({} bytes stored, {} loaded):\n{}",
                    r.name,
                    r.spill_stores,
                    r.spill_loads,
                    cubin.log
                );
                println!("{arch} {}: {} registers, no spills", r.name, r.registers);
            }
            println!("{arch} {name}.cu: cubin of {} bytes", cubin.bytes.len());
        }
    }
}
