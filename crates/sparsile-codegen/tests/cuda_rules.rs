//! What the CUDA backend refuses (each refusal a named error with its message), and the
//! launch plan it hands the runtime: kernels, grids, blocks, shared memory, arguments.

use std::path::PathBuf;

use sparsile_codegen::{emit_c, emit_cuda, CodegenError, CudaSource, KernelArg};
use sparsile_ir::loops::{ExprDisplay, Func, Stage};
use sparsile_ir::DType;

fn parse(text: &str) -> Func {
    text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn load(name: &str) -> Func {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("cuda")
        .join(format!("{name}.flat"));
    parse(&std::fs::read_to_string(path).unwrap())
}

/// `scale` from the module docs of `sparsile_ir::loops::gpu`, with `dtype` values.
fn scale(dtype: &str) -> String {
    format!(
        "\
flat func scale(n) {{
  buffer X: {dtype}[n] input values
  buffer Y: f32[n] output values
  launch main {{
    for b in 0..(n + 127) / 128 bind(blockIdx.x) {{
      for t in 0..128 bind(threadIdx.x) {{
        if b * 128 + t < n {{
          Y[b * 128 + t] = 2.0 * X[b * 128 + t]
        }}
      }}
    }}
  }}
}}
"
    )
}

fn args(src: &CudaSource, kernel: usize) -> Vec<String> {
    src.kernels[kernel]
        .args
        .iter()
        .map(|a| match a {
            KernelArg::Param { index, name } => {
                assert_eq!(src.param_order[*index], *name);
                format!("param {name}")
            }
            KernelArg::Buffer { index, name } => {
                assert_eq!(src.buffer_order[*index].name, *name);
                assert!(!src.buffer_order[*index].allocated_by_kernel, "{name}");
                format!("buffer {name}")
            }
        })
        .collect()
}

fn grid(func: &Func, src: &CudaSource, kernel: usize) -> [String; 3] {
    src.kernels[kernel]
        .grid
        .each_ref()
        .map(|e| ExprDisplay::new(func, e).to_string())
}

#[test]
fn cpu_functions_are_refused() {
    let f = parse(
        "\
flat func cpu(n) {
  buffer Y: f32[n] output values
  for i in 0..n parallel {
    Y[i] = 1.0
  }
}
",
    );
    let err = emit_cuda(&f).unwrap_err();
    assert_eq!(err, CodegenError::NotGpu { func: "cpu".into() });
    assert_eq!(
        err.to_string(),
        "function `cpu` has no launches: the CUDA backend emits GPU functions (only launches \
         at the top level); CPU functions go to the C backend"
    );
    // And the other way round: the C backend sends GPU functions here.
    let gpu = parse(&scale("f32"));
    assert!(matches!(emit_c(&gpu), Err(CodegenError::GpuNode { .. })));
}

#[test]
fn stage_two_functions_are_refused() {
    let mut f = parse(&scale("f32"));
    f.stage = Stage::Pos;
    let err = emit_cuda(&f).unwrap_err();
    assert_eq!(
        err,
        CodegenError::CudaNotFlat {
            func: "scale".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "function `scale` is a stage-II (pos) function; the CUDA backend emits stage III \
         (flat) functions only"
    );
}

#[test]
fn half_precision_buffers_are_raw_bits_and_locals_are_refused() {
    for (name, load, store) in [
        ("f16", "sparsile_f16_to_f32", "cvt.rn.f16.f32"),
        ("bf16", "sparsile_bf16_to_f32", "cvt.rn.bf16.f32"),
    ] {
        let text = scale(name).replace("buffer Y: f32[n]", &format!("buffer Y: {name}[n]"));
        let cuda = emit_cuda(&parse(&text)).unwrap();
        assert!(
            cuda.code
                .contains("const unsigned short *__restrict__ X, unsigned short *__restrict__ Y"),
            "{}",
            cuda.code
        );
        assert!(
            cuda.code
                .contains(&format!("2.0f * {load}(X[b * 128 + t])")),
            "{}",
            cuda.code
        );
        assert!(cuda.code.contains(store), "{}", cuda.code);
    }
    let text = scale("f32").replace(
        "          Y[b * 128 + t] = 2.0 * X[b * 128 + t]\n",
        "          let h: f16 = X[b * 128 + t]\n          Y[b * 128 + t] = 2.0 * h\n",
    );
    let err = emit_cuda(&parse(&text)).unwrap_err();
    assert_eq!(
        err,
        CodegenError::CudaHalfPrecisionLocal {
            var: "h".into(),
            dtype: DType::F16
        }
    );
    assert_eq!(
        err.to_string(),
        "local `h` has type f16: the CUDA backend computes in f32 or f64 (declare the local f32; f16/bf16 buffers are loaded and stored as such)"
    );
}

#[test]
fn functions_the_verifier_rejects_are_refused_with_its_errors() {
    let f = parse(
        "\
flat func bad(n) {
  buffer Y: f32[n] output values
  launch main {
    for b in 0..n bind(blockIdx.x) {
      for t in 0..32 bind(threadIdx.x) {
        if t < 16 {
          sync_threads
        }
        Y[b] = 1.0
      }
    }
  }
}
",
    );
    let err = emit_cuda(&f).unwrap_err();
    let CodegenError::Unverified { func, errors } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(func, "bad");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        err.to_string(),
        "function `bad` does not pass the loop-IR verifier: line 7: launch `main`: \
         `sync_threads` is under a condition that depends on the thread, so not every \
         thread of the block reaches it"
    );
}

#[test]
fn the_launch_plan_of_gpu_spmm() {
    let f = load("gpu_spmm");
    let src = emit_cuda(&f).unwrap();
    assert_eq!(src.func_name, "gpu_spmm");
    assert_eq!(src.param_order, ["m", "n", "nnz"]);
    let symbols: Vec<(&str, &str)> = src
        .kernels
        .iter()
        .map(|k| (k.symbol.as_str(), k.launch.as_str()))
        .collect();
    assert_eq!(
        symbols,
        [
            ("gpu_spmm_zero", "zero"),
            ("gpu_spmm_spmm", "spmm"),
            ("gpu_spmm_row_sums", "row_sums"),
            ("gpu_spmm_fused", "fused"),
        ]
    );
    assert_eq!(grid(&f, &src, 0), ["(m + 7) / 8", "1", "1"]);
    assert_eq!(src.kernels[1].block, [32, 8, 1]);
    assert_eq!(src.kernels[1].threads(), 256);
    assert_eq!(src.kernels[1].shared_bytes, 256 * 4);
    assert_eq!(src.kernels[0].shared_bytes, 0);
    assert_eq!(args(&src, 0), ["param m", "buffer C"]);
    assert_eq!(
        args(&src, 1),
        [
            "param m",
            "buffer C",
            "buffer A",
            "buffer B",
            "buffer A_indptr",
            "buffer A_indices"
        ]
    );
    assert_eq!(grid(&f, &src, 3), ["max(m, 0) + max(m, 0)", "1", "1"]);
    assert_eq!(src.kernels[3].block, [32, 1, 1]);
    let allocated: Vec<&str> = src
        .buffer_order
        .iter()
        .filter(|b| b.allocated_by_kernel)
        .map(|b| b.name.as_str())
        .collect();
    assert_eq!(allocated, ["tile", "acc"]);
    // The kernel that only reads C takes it as const.
    assert!(src.code.contains(
        "gpu_spmm_row_sums(long long m, const float *__restrict__ C, float *__restrict__ rows)"
    ));
}

#[test]
fn grids_over_three_dimensions_and_shared_grids() {
    let f = load("features");
    let src = emit_cuda(&f).unwrap();
    assert_eq!(grid(&f, &src, 0), ["m + 1 - 1", "n", "4 - 2"]);
    assert_eq!(src.kernels[0].block, [16, 2, 2]);
    assert_eq!(src.kernels[0].shared_bytes, 16 * 8);
    let f = load("hfused");
    let src = emit_cuda(&f).unwrap();
    assert_eq!(
        grid(&f, &src, 0),
        [
            "max((m1 + 127) / 128, 0) + max((m2 + 127) / 128, 0) + max((n + 63) / 64 + 1 - 1, 0)",
            "1",
            "1"
        ]
    );
    assert!(!args(&src, 0).contains(&"param nnz1".to_string()));
}

#[test]
fn names_clashing_with_cuda_are_renamed_and_symbols_are_unique() {
    let f = parse(
        "\
flat func f(n) {
  buffer f_a: f32[n] output values
  buffer blockDim: f32[n] output values
  launch a {
    for new in 0..n bind(blockIdx.x) {
      f_a[new] = 1.0
    }
  }
  launch b {
    for this in 0..n bind(blockIdx.x) {
      blockDim[this] = 2.0
    }
  }
}
",
    );
    let src = emit_cuda(&f).unwrap();
    assert_eq!(src.kernels[0].symbol, "f_a_2");
    assert_eq!(src.kernels[1].symbol, "f_b");
    assert!(src
        .code
        .contains("const int64_t new_2 = (int64_t)blockIdx.x;"));
    assert!(src.code.contains("blockDim_2[this_2] = 2.0f;"));
    assert_eq!(src.kernels[1].block, [1, 1, 1]);
}

#[test]
fn an_empty_launch_is_one_block_of_one_thread() {
    let f = parse("flat func e(n) {\n  launch nothing {\n  }\n}\n");
    let src = emit_cuda(&f).unwrap();
    assert_eq!(src.kernels.len(), 1);
    assert_eq!(grid(&f, &src, 0), ["1", "1", "1"]);
    assert_eq!(src.kernels[0].block, [1, 1, 1]);
    assert!(src.kernels[0].args.is_empty());
    assert!(src
        .code
        .contains("extern \"C\" __global__ void __launch_bounds__(1, 32) e_nothing()\n{\n}\n"));
}

/// Every text function of the loop-IR tests (CPU and GPU ones, valid or not) and of this
/// crate's examples: the emitter answers each with code or an error, never a panic.
#[test]
fn no_text_function_makes_the_emitter_panic() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dirs = [
        root.join("../sparsile-ir/tests/loops"),
        root.join("../sparsile-ir/tests/loops/verify"),
        root.join("tests/flat"),
        root.join("tests/cuda"),
    ];
    let mut seen = 0;
    for dir in dirs {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if !matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("flat" | "pos")
            ) {
                continue;
            }
            let Ok(func) = std::fs::read_to_string(&path).unwrap().parse::<Func>() else {
                continue;
            };
            seen += 1;
            let gpu = sparsile_ir::loops::is_gpu_body(&func.body);
            match emit_cuda(&func) {
                Ok(src) => assert!(gpu && !src.kernels.is_empty(), "{}", path.display()),
                Err(CodegenError::NotGpu { .. }) => assert!(!gpu, "{}", path.display()),
                Err(_) => {}
            }
        }
    }
    assert!(seen >= 10, "{seen}");
}

/// Every loop of every GPU example given every other kind in turn (most of the results
/// break a rule of the verifier): code or an error, never a panic.
#[test]
fn loops_of_any_kind_make_no_panic() {
    use sparsile_ir::loops::gpu::GpuDim;
    use sparsile_ir::loops::{ForKind, GpuAxis, Stmt};

    fn count(stmts: &[Stmt]) -> usize {
        let mut n = 0;
        Stmt::visit_all(stmts, &mut |s| n += usize::from(matches!(s, Stmt::For(_))));
        n
    }
    fn set_kind(stmts: &mut [Stmt], target: &mut usize, kind: ForKind) {
        for s in stmts {
            match s {
                Stmt::For(f) => {
                    if *target == 0 {
                        f.kind = kind;
                    }
                    *target = target.wrapping_sub(1);
                    set_kind(&mut f.body, target, kind);
                }
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    set_kind(then_body, target, kind);
                    set_kind(else_body, target, kind);
                }
                Stmt::Block { body, .. } | Stmt::Launch { body, .. } => {
                    set_kind(body, target, kind)
                }
                _ => {}
            }
        }
    }
    let mut kinds = vec![
        ForKind::Serial,
        ForKind::Unrolled,
        ForKind::Parallel,
        ForKind::Vectorized,
    ];
    for d in GpuDim::ALL {
        kinds.push(ForKind::Bound(GpuAxis::Block(d)));
        kinds.push(ForKind::Bound(GpuAxis::Thread(d)));
    }
    let mut emitted = 0;
    for name in [
        "gpu_spmm",
        "spmm_eb",
        "hfused",
        "features",
        "spmm_i64",
        "sddmm_vec",
    ] {
        let func = load(name);
        for k in 0..count(&func.body) {
            for &kind in &kinds {
                let mut f = func.clone();
                let mut target = k;
                set_kind(&mut f.body, &mut target, kind);
                emitted += usize::from(emit_cuda(&f).is_ok());
            }
        }
    }
    assert!(emitted > 0);
}

/// The buffers each kernel reads with vector loads, with the alignment their addresses
/// need: X and Y in `float4`s (16 bytes), Q in `double2`s (16 bytes); P (rows at
/// multiples of a param) and the conditional and serial reads of Q need none.
#[test]
fn vector_loads_say_which_buffers_they_need_aligned() {
    let src = emit_cuda(&load("sddmm_vec")).unwrap();
    let aligned = |k: usize| -> Vec<(String, usize)> {
        src.kernels[k]
            .alignments
            .iter()
            .map(|a| {
                assert_eq!(src.buffer_order[a.index].name, a.name);
                (a.name.clone(), a.bytes)
            })
            .collect()
    };
    assert_eq!(aligned(0), [("X".to_string(), 16), ("Y".to_string(), 16)]);
    assert_eq!(aligned(1), [("Q".to_string(), 16)]);
    assert_eq!(src.code.matches("*(const float4 *)&").count(), 2);
    assert_eq!(src.code.matches("*(const double2 *)&").count(), 1);
    assert!(src.code.contains("P[i * k + v]"), "{}", src.code);
    // Two f32 elements a load: float2, 8 bytes.
    let two = load("sddmm_vec")
        .to_string()
        .replace("for v in 0..4 vectorized", "for v in 0..2 vectorized")
        .replace("let c: idx = l * 4 + v", "let c: idx = l * 2 + v");
    let src = emit_cuda(&parse(&two)).unwrap();
    assert_eq!(
        src.code.matches("*(const float2 *)&").count(),
        2,
        "{}",
        src.code
    );
    assert!(src.kernels[0].alignments.iter().all(|a| a.bytes == 8));
    // A row start that is not a multiple of the vector: scalar reads, no alignment.
    let odd = load("sddmm_vec")
        .to_string()
        .replace("X[i * 128 + c]", "X[i * 128 + c + 1]");
    let src = emit_cuda(&parse(&odd)).unwrap();
    assert_eq!(
        src.code.matches("*(const float4 *)&").count(),
        1,
        "{}",
        src.code
    );
    assert_eq!(
        src.kernels[0]
            .alignments
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>(),
        ["Y"]
    );
    assert!(src.code.contains("X[i * 128 + c + 1]"), "{}", src.code);
}
