//! The GPU targets on the command line: `run --target cuda-sim` runs the GPU rule's
//! recipe in the SIMT interpreter with `eval`'s checksums, `compile --target cuda` prints
//! the CUDA source, `--emit c` of a GPU function and a GPU target with a CPU recipe are
//! refused with the way out, `recipes` names the targets, and `run --target cuda` on a
//! machine without a GPU fails with the driver's message and a non-zero exit.

use std::path::Path;
use std::process::{Command, Output};

fn sparsile(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sparsile"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .output()
        .expect("the sparsile binary runs")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "command failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn err(o: &Output) -> String {
    assert!(
        !o.status.success(),
        "command succeeded: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8(o.stderr.clone()).unwrap()
}

fn checksums(v: &serde_json::Value) -> Vec<f64> {
    v["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["checksum"].as_f64().unwrap())
        .collect()
}

const SPMM: [&str; 6] = [
    "--expr",
    "C[i,k] = A[i,j] * B[j,k]",
    "--input",
    "A=data/cora.mtx",
    "--dim",
    "k=16",
];

fn with<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(more).copied().collect()
}

#[test]
fn cuda_sim_runs_the_gpu_rule_with_eval_checksums() {
    for (expr, dim) in [
        ("C[i,k] = A[i,j] * B[j,k]", "k=16"),
        ("y[i] = A[i,j] * x[j]", "j=2708"),
        ("C[i,j] = A[i,j] * X[i,k] * Y[j,k]", "k=8"),
    ] {
        let args = [
            "--expr",
            expr,
            "--input",
            "A=data/cora.mtx",
            "--dim",
            dim,
            "--json",
        ];
        let run: serde_json::Value = serde_json::from_str(&ok(&sparsile(&with(
            &["run", "--target", "cuda-sim"],
            &args,
        ))))
        .unwrap();
        let eval: serde_json::Value =
            serde_json::from_str(&ok(&sparsile(&with(&["eval"], &args)))).unwrap();
        assert_eq!(run["target"], "cuda-sim", "{expr}");
        assert_eq!(run["backend"], "simt", "{expr}");
        assert_eq!(run["compile_seconds"], serde_json::Value::Null, "{expr}");
        let recipe = run["recipe"].as_str().unwrap();
        assert!(recipe.starts_with("gpu_"), "{expr}: {recipe}");
        let (a, b) = (checksums(&run), checksums(&eval));
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert!(
                (x - y).abs() <= 1e-4 * (1.0 + y.abs()),
                "{expr}: {x} vs {y}"
            );
        }
    }
}

/// f16 operands with `A` in BSR and an f32 output: the GPU rule runs the tensor-core
/// recipe, with `eval`'s checksum up to the f32 sums.
#[test]
fn cuda_sim_runs_half_bsr_spmm_on_tensor_cores() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("bsr.sp");
    std::fs::write(
        &program,
        "tensor A: f16[m, n] bsr:16x16\ntensor X: f16[n, k]\ntensor Y: f32[m, k]\nY[i,c] = A[i,j] * X[j,c]\n",
    )
    .unwrap();
    let args = [
        program.to_str().unwrap(),
        "--input",
        "A=data/cora.mtx",
        "--dim",
        "k=16",
        "--json",
    ];
    let run: serde_json::Value = serde_json::from_str(&ok(&sparsile(&with(
        &["run", "--target", "cuda-sim"],
        &args,
    ))))
    .unwrap();
    assert_eq!(run["recipe"], "gpu_bsr_mma");
    let eval: serde_json::Value =
        serde_json::from_str(&ok(&sparsile(&with(&["eval"], &args)))).unwrap();
    let (a, b) = (checksums(&run), checksums(&eval));
    assert_eq!(a.len(), 1);
    assert!(
        (a[0] - b[0]).abs() <= 1e-5 * (1.0 + b[0].abs()),
        "{a:?} vs {b:?}"
    );
    let cuda = ok(&sparsile(&with(
        &["compile", "--target", "cuda"],
        &args[..5],
    )));
    assert!(
        cuda.contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
        "{cuda}"
    );
}

#[test]
fn compile_for_cuda_prints_the_kernels() {
    let text = ok(&sparsile(&with(&["compile", "--target", "cuda"], &SPMM)));
    assert!(
        text.contains("extern \"C\" __global__ void __launch_bounds__("),
        "{text}"
    );
    assert!(text.contains("(int64_t)threadIdx.x"), "{text}");
    let warp = ok(&sparsile(&with(
        &[
            "compile", "--target", "cuda", "--recipe", "gpu_nnz", "--emit", "stage3",
        ],
        &SPMM,
    )));
    assert!(warp.contains("bind(blockIdx.x)"), "{warp}");
    assert!(warp.contains("atomic C["), "{warp}");
}

#[test]
fn mismatched_targets_are_refused_with_the_way_out() {
    let e = err(&sparsile(&with(
        &["compile", "--target", "cuda", "--emit", "c"],
        &SPMM,
    )));
    assert!(
        e.contains(
            "--emit c: the schedule makes a GPU function, whose code is CUDA C++ (--emit cuda)"
        ),
        "{e}"
    );
    let e = err(&sparsile(&with(
        &["run", "--target", "cuda-sim", "--recipe", "rowwise"],
        &SPMM,
    )));
    assert!(
        e.contains("target cuda-sim: the schedule makes a CPU function; schedule the program with a GPU recipe (gpu_rowwise, gpu_warp)"),
        "{e}"
    );
    let e = err(&sparsile(&with(&["run", "--recipe", "gpu_rowwise"], &SPMM)));
    assert!(
        e.contains("target cpu: the schedule makes a GPU function"),
        "{e}"
    );
    let e = err(&sparsile(&with(&["run", "--target", "tpu"], &SPMM)));
    assert!(
        e.contains("unknown target `tpu` (expected cpu, cuda or cuda-sim)"),
        "{e}"
    );
}

#[test]
fn cuda_without_a_gpu_fails_with_the_drivers_message() {
    let o = sparsile(&with(&["run", "--target", "cuda"], &SPMM));
    if o.status.success() {
        println!("a GPU is present: the no-GPU error path was not exercised here");
        return;
    }
    let e = err(&o);
    assert!(
        e.contains("CUDA driver") || e.contains("CUDA device"),
        "{e}"
    );
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn recipes_name_their_targets() {
    let text = ok(&sparsile(&["recipes"]));
    let line = text
        .lines()
        .find(|l| l.starts_with("gpu_rowwise"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("cuda,cuda-sim"), "{line}");
    let v: serde_json::Value =
        serde_json::from_str(&ok(&sparsile(&["recipes", "--json"]))).unwrap();
    let gpu: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["gpu"] == true)
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        gpu,
        [
            "gpu_rowwise",
            "gpu_warp",
            "gpu_nnz",
            "gpu_hyb",
            "gpu_rowcache",
            "gpu_bsr_mma",
            "gpu_tiles",
            "gpu_da",
            "gpu_sddmm_vec"
        ]
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("gpu_bsr_mma"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("spmm") && line.contains(" bsr,srbcrs ") && line.contains("tf32=off"),
        "{line}"
    );
    let bsr = v
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "gpu_bsr_mma")
        .unwrap();
    assert_eq!(bsr["formats"], serde_json::json!(["bsr", "srbcrs"]));
}
