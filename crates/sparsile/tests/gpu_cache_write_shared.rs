//! `cache_write_shared` in GPU schedules of SpMM, run by the SIMT interpreter (target
//! `cuda-sim`: it reports races, divergent barriers, reads of uninitialised shared
//! memory and out-of-bounds accesses) and compared with the reference interpreter:
//! a row per block with its non-zeros over the warps (`threadIdx.y`, atomic adds) and
//! its width over the lanes; the width over the lanes with plain adds; more staged
//! elements than threads. f32 and f64, widths that fill the lanes, do not (20 of 32) or
//! are one element; matrices with empty rows, one row longer than everything else, no
//! non-zeros and no rows. Every kernel's CUDA source compiles with NVRTC for sm_80 and
//! sm_90 (when NVRTC is found: otherwise that part says it skipped).

mod support;

use std::collections::HashMap;

use sparsile::formats::{CooTensor, Format, SparseTensor};
use sparsile::ir::loops::{GpuAxis, GpuDim};
use sparsile::ir::settings::Settings;
use sparsile::ir::DType;
use sparsile::runtime::cuda::{CudaError, Nvrtc};
use sparsile::transform::schedule::{LoopRef, Schedule, SplitTail, Trace};
use sparsile::{compile_program_for, Stage, Target};
use support::{check_simt, dense, matrix, rng};

const BX: GpuAxis = GpuAxis::Block(GpuDim::X);
const TX: GpuAxis = GpuAxis::Thread(GpuDim::X);
const TY: GpuAxis = GpuAxis::Thread(GpuDim::Y);

fn program(dtype: DType) -> String {
    format!("tensor A: {dtype}[m, n] csr\ntensor X: {dtype}[n, k]\ntensor Y: {dtype}[m, k]\nY[i,c] = A[i,j] * X[j,c]\n")
}

fn at(block: &str, var: &str) -> LoopRef {
    LoopRef::new(block, var)
}

/// The schedules, each with the widest output row it takes.
#[derive(Clone, Copy, Debug)]
enum Design {
    /// A row per block, its non-zeros over 4 warps adding atomically into the row, its
    /// width (up to 32) over the lanes.
    AtomicWarps,
    /// A row per block, its width (up to 32) over the lanes, each lane walking the
    /// row's non-zeros: plain adds.
    PlainLanes,
    /// A row per block, its non-zeros over 8 threads adding atomically, each walking a
    /// width of up to 70: 70 staged elements over 8 threads.
    Passes,
}

impl Design {
    fn width(self) -> i64 {
        match self {
            Design::AtomicWarps | Design::PlainLanes => 32,
            Design::Passes => 70,
        }
    }

    /// The schedule's trace on `program`, with or without `cache_write_shared`.
    fn trace(self, program: &sparsile::ir::coord::Program, staged: bool) -> Trace {
        let mut sch = Schedule::new(program);
        let w = self.width();
        sch.bound(&at("Y", "c_2"), w).unwrap();
        match self {
            Design::AtomicWarps | Design::Passes => {
                let warps = if matches!(self, Design::Passes) { 8 } else { 4 };
                let (o, i) = sch
                    .split(&at("Y", "j_p"), warps, SplitTail::InnerFixed)
                    .unwrap();
                sch.reorder(&[i.clone(), o]).unwrap();
                sch.bind(&at("Y", "i_2"), BX).unwrap();
                sch.bind_atomic(&i, TY).unwrap();
                if matches!(self, Design::AtomicWarps) {
                    sch.bind(&at("Y", "c_2"), TX).unwrap();
                }
            }
            Design::PlainLanes => {
                sch.reorder(&[at("Y", "c_2"), at("Y", "j_p")]).unwrap();
                sch.bind(&at("Y", "i_2"), BX).unwrap();
                sch.bind(&at("Y", "c_2"), TX).unwrap();
            }
        }
        if staged {
            let name = sch.cache_write_shared(&at("Y", "i_2"), "Y").unwrap();
            assert_eq!(name, "Y_shared");
        }
        sch.bind(&at("Y.init", "i"), BX).unwrap();
        sch.bound(&at("Y.init", "c"), w).unwrap();
        sch.bind(&at("Y.init", "c"), TX).unwrap();
        sch.trace().clone()
    }
}

fn matrices() -> Vec<(&'static str, CooTensor)> {
    let mut g = rng(5);
    vec![
        ("empty_rows", matrix("random", 37, 29, &mut g)),
        ("long_row", matrix("long_row", 13, 300, &mut g)),
        ("no_nonzeros", matrix("empty", 11, 5, &mut g)),
        (
            "no_rows",
            CooTensor::from_triplets(vec![0, 6], &[]).unwrap(),
        ),
    ]
}

fn nvrtc() -> Option<std::sync::Arc<Nvrtc>> {
    match Nvrtc::load(&Settings::from_env()) {
        Ok(nvrtc) => Some(nvrtc),
        Err(e @ CudaError::NvrtcMissing { .. }) => {
            println!("NVRTC compile checks skipped: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn staged_output_rows_match_the_interpreter_in_the_simt_interpreter() {
    let nvrtc = nvrtc();
    let mut compiled = std::collections::HashSet::new();
    let mut runs = 0;
    for design in [Design::AtomicWarps, Design::PlainLanes, Design::Passes] {
        for dtype in [DType::F32, DType::F64] {
            let text = program(dtype);
            let stage1 = sparsile::compile_notation(&text).unwrap();
            let trace = design.trace(&stage1, true);
            let kernel = compile_program_for(stage1.clone(), Some(&trace), Target::CudaSim)
                .unwrap_or_else(|e| panic!("{design:?} {dtype}: compile: {e}"));
            let cuda = kernel.ir(Stage::Cuda);
            for needed in ["__shared__", "__syncthreads()", "atomicAdd"] {
                if needed == "atomicAdd" && matches!(design, Design::PlainLanes) {
                    continue;
                }
                assert!(
                    cuda.contains(needed),
                    "{design:?} {dtype}: no {needed}:\n{cuda}"
                );
            }
            if let Some(nvrtc) = &nvrtc {
                if compiled.insert(cuda.clone()) {
                    for arch in ["sm_80", "sm_90"] {
                        let cubin = nvrtc
                            .compile(&cuda, "kernel.cu", arch)
                            .unwrap_or_else(|e| panic!("{design:?} {dtype}, {arch}: {e}"));
                        assert!(
                            // NVRTC 13 leaves the report out for the GPU a
                            // process has opened (see cuda/resources.rs).
                            !cubin.kernels.is_empty() || support::gpu_here(),
                            "{design:?} {dtype}, {arch}: no ptxas report in the log:\n{}",
                            cubin.log
                        );
                    }
                }
            }
            let widths: &[usize] = match design {
                Design::Passes => &[1, 20, 70],
                _ => &[1, 20, 32],
            };
            for &k in widths {
                for (kind, a) in matrices() {
                    let what = format!("{design:?} {dtype} k={k} {kind}");
                    let mut g = rng(runs as u64);
                    let ins = HashMap::from([
                        (
                            "A".to_string(),
                            SparseTensor::from_coo_with(&a, &Format::Csr, dtype).unwrap(),
                        ),
                        ("X".to_string(), dense(&[a.shape[1], k], dtype, &mut g)),
                    ]);
                    let tol = if dtype == DType::F32 { 1e-4 } else { 1e-10 };
                    check_simt(&kernel, &text, &ins, tol, &what);
                    runs += 1;
                }
            }
        }
    }
    assert_eq!(runs, 3 * 2 * 3 * 4);
    if nvrtc.is_some() {
        println!(
            "{} distinct kernels compiled for sm_80 and sm_90",
            compiled.len()
        );
    }
}

/// The staged schedule makes the same kernel shape as the unstaged one plus the shared
/// row: one `__shared__` array more, the global atomics of the non-zeros' loop gone.
#[test]
fn staging_moves_the_atomic_adds_into_shared_memory() {
    let stage1 = sparsile::compile_notation(&program(DType::F32)).unwrap();
    let kernel = |staged| {
        compile_program_for(
            stage1.clone(),
            Some(&Design::AtomicWarps.trace(&stage1, staged)),
            Target::CudaSim,
        )
        .unwrap()
    };
    let before = kernel(false).ir(Stage::Stage2);
    let after = kernel(true).ir(Stage::Stage2);
    assert!(!before.contains("Y_shared"), "{before}");
    assert!(
        after.contains("buffer Y_shared: f32[32] temp shared"),
        "{after}"
    );
    assert!(after.contains("atomic Y_shared["), "{after}");
    // One atomic add into Y remains: the write-back, outside the non-zeros' loop.
    assert_eq!(after.matches("atomic Y[").count(), 1, "{after}");
    assert_eq!(after.matches("sync_threads").count(), 2, "{after}");
}
