//! The GPU benchmark (`sparsile bench --target cuda` / `cuda-sim`) on a machine that may
//! have no GPU:
//! - argument mistakes (targets, CPU peers on the GPU, CPU recipes, missing matrices) are
//!   reported before any device is needed;
//! - `--target cuda-sim` measures Cora end to end with the GPU kernels in the SIMT
//!   interpreter: checked records, the GPU rule's recipes (or every GPU recipe), no
//!   peers, and a note that the times are not GPU times;
//! - `--target cuda` without a GPU fails with the driver's message and a non-zero exit;
//! - under the stand-in CUDA driver of the runtime's tests (which cannot run Sparsile's
//!   generated kernels: it faults them), the whole harness runs: device, nominal
//!   roofline, compilation by NVRTC, a failed kernel reported in its record, and the GPU
//!   peers (with the NumPy stand-ins of `tests/gpu_peer_fakes/` for torch, torch_sparse
//!   and CuPy) measured, checked against the reference and reported with their
//!   preprocessing time;
//! - the GPU peer scripts answer "unsupported" with the reason, never a traceback, where
//!   their library or GPU is missing, and run correctly under the stand-ins.
//!
//! Timings are only checked for being present and positive, never compared. What needs
//! a real GPU (the kernels' times and results on the device, the real libraries) is
//! `bench/gpu.sh`'s job.

#[path = "../../sparsile-runtime/tests/cuda_support/stub.rs"]
#[allow(dead_code)]
mod stub;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fakes() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gpu_peer_fakes")
}

fn sparsile(args: &[&str], cache: &Path, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sparsile"));
    command
        .args(args)
        .current_dir(repo_root())
        .env("SPARSILE_CACHE_DIR", cache);
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("the sparsile binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "command failed: {}", stderr(o));
    stdout(o)
}

fn records(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str::<serde_json::Value>(&text)
        .unwrap()
        .as_array()
        .expect("a list of records")
        .clone()
}

const CORA: [&str; 4] = ["--matrix", "data/cora.mtx", "--op", "spmm"];

fn with<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(more).copied().collect()
}

#[test]
fn mistakes_are_reported_before_any_device() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    for (args, expect) in [
        (
            vec!["--target", "tpu"],
            "unknown target `tpu` (expected cpu, cuda or cuda-sim)",
        ),
        (
            vec!["--target", "cuda", "--peers", "cusparse,scipy"],
            "`scipy` is a CPU peer; --target cuda measures the GPU peers (cusparse, torch, pyg)",
        ),
        (
            vec!["--target", "cuda", "--peers", "magma"],
            "unknown peer `magma` (known: cusparse, torch, pyg, or none)",
        ),
        (
            vec!["--peers", "pyg"],
            "it is a GPU peer, measure it with --target cuda",
        ),
        (
            vec!["--target", "cuda", "--recipe", "rowwise"],
            "`rowwise` is a CPU recipe; the GPU benchmark runs GPU recipes (gpu_rowwise, gpu_warp, gpu_nnz, gpu_hyb, ",
        ),
        (
            vec!["--target", "cuda", "--recipes", "gpu_magic"],
            "no recipe named `gpu_magic`",
        ),
        (
            vec!["--target", "cuda-sim", "--recipes", "all", "--recipes", "gpu_nnz"],
            "--recipes all cannot be combined",
        ),
        (
            vec!["--recipes", "all"],
            "--recipes measures several GPU recipes: use it with --target cuda or cuda-sim",
        ),
        (
            vec!["--target", "cuda", "--recipes", "all", "--recipe", "gpu_nnz"],
            "cannot be used with",
        ),
        (vec!["--target", "cuda", "--repeat", "0"], "--repeat"),
        (vec!["--target", "cuda", "--rounds", "0"], "--rounds"),
    ] {
        let all = with(&with(&["bench"], &CORA), &args);
        let o = sparsile(&all, &cache, &[]);
        assert!(!o.status.success(), "{all:?} should fail");
        let err = stderr(&o);
        assert!(err.contains(expect), "{all:?}: {err}");
        assert!(!err.contains("CUDA driver"), "{all:?} reached the device: {err}");
    }
    // A missing matrix is reported before the device too.
    let o = sparsile(
        &[
            "bench", "--target", "cuda", "--matrix", "nope.mtx", "--op", "spmv",
        ],
        &cache,
        &[],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("nope.mtx"), "{}", stderr(&o));
}

#[test]
fn cuda_sim_measures_cora_with_the_gpu_rule_and_no_peers() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sim.json");
    let args = [
        "bench",
        "--target",
        "cuda-sim",
        "--matrix",
        "data/cora.mtx",
        "--op",
        "spmm,sddmm,spmv",
        "--k",
        "4",
        "--peers",
        "cusparse",
        "--bandwidth",
        "10",
        "--peak",
        "100",
        "--json",
        out.to_str().unwrap(),
    ];
    let o = sparsile(&args, &dir.path().join("cache"), &[]);
    let text = ok(&o);
    assert!(
        stderr(&o).contains("--target cuda-sim runs no peers")
            && stderr(&o).contains("--peers cusparse ignored"),
        "{}",
        stderr(&o)
    );
    assert!(
        text.contains("times are the interpreter's (not GPU times)"),
        "{text}"
    );
    assert!(text.contains("cora spmm K=4"), "{text}");
    let recs = records(&out);
    let got: Vec<(&str, &str)> = recs
        .iter()
        .map(|r| (r["op"].as_str().unwrap(), r["recipe"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            ("spmm", "gpu_rowwise"),
            // K = 4: a row's non-zeros over the lanes (wider K: a warp per row).
            ("sddmm", "gpu_rowwise"),
            ("spmv", "gpu_warp")
        ]
    );
    for r in &recs {
        assert_eq!(r["system"], "sparsile", "{r}");
        assert_eq!(r["correct"], true, "{r}");
        assert_eq!(r["format"], "csr", "{r}");
        assert_eq!(r["target"], "cuda-sim", "{r}");
        assert_eq!(r["device"], "SIMT interpreter", "{r}");
        assert_eq!(
            (r["m"].as_u64(), r["nnz"].as_u64()),
            (Some(2708), Some(10556))
        );
        let note = r["note"].as_str().unwrap();
        assert!(note.starts_with("chosen by the GPU rule"), "{r}");
        assert!(note.contains("not GPU times"), "{r}");
        assert!(r["median_ms"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["speedup"].is_null(), "{r}");
        assert!(r.get("preprocess_ms").is_none(), "{r}");
    }
}

/// A seeded random m × n Matrix Market file.
fn random_mtx(dir: &Path, m: usize, n: usize) -> PathBuf {
    use std::fmt::Write as _;
    let mut entries = Vec::new();
    let mut state = 12345u64;
    for i in 0..m {
        for j in 0..n {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
            if (state >> 33).is_multiple_of(5) {
                entries.push((i, j, ((state >> 40) % 200) as f64 / 100.0 - 1.0));
            }
        }
    }
    let mut text = format!(
        "%%MatrixMarket matrix coordinate real general\n{m} {n} {}\n",
        entries.len()
    );
    for (i, j, v) in entries {
        writeln!(text, "{} {} {v}", i + 1, j + 1).unwrap();
    }
    let path = dir.join("small.mtx");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn cuda_sim_measures_every_gpu_recipe_of_an_operation() {
    let dir = tempfile::tempdir().unwrap();
    let a = random_mtx(dir.path(), 45, 31);
    let out = dir.path().join("all.json");
    let args = [
        "bench",
        "--target",
        "cuda-sim",
        "--matrix",
        a.to_str().unwrap(),
        "--op",
        "spmm,spmv",
        "--k",
        "8",
        "--recipes",
        "all",
        "--repeat",
        "2",
        "--bandwidth",
        "10",
        "--peak",
        "100",
        "--json",
        out.to_str().unwrap(),
    ];
    let text = ok(&sparsile(&args, &dir.path().join("cache"), &[]));
    assert!(text.contains("sparsile (csr, gpu_hyb)"), "{text}");
    let recs = records(&out);
    let got: Vec<(&str, &str)> = recs
        .iter()
        .map(|r| (r["op"].as_str().unwrap(), r["recipe"].as_str().unwrap()))
        .collect();
    // Every GPU recipe of each operation that takes CSR, in the order `sparsile recipes` lists them.
    let listed: serde_json::Value = serde_json::from_str(&ok(&sparsile(
        &["recipes", "--json"],
        &dir.path().join("cache"),
        &[],
    )))
    .unwrap();
    let mut expected: Vec<(&str, &str)> = Vec::new();
    for op in ["spmm", "spmv"] {
        for r in listed.as_array().unwrap() {
            let ops = r["ops"].as_array().unwrap();
            let formats = r["formats"].as_array().unwrap();
            // The matrix is in CSR: recipes for other formats (BSR) are left out.
            let takes_csr = formats.iter().any(|f| f == "any" || f == "csr");
            if r["gpu"] == true && ops.iter().any(|o| o == op) && takes_csr {
                expected.push((op, r["name"].as_str().unwrap()));
            }
        }
    }
    assert!(expected.len() >= 7, "{expected:?}");
    assert_eq!(got, expected);
    for r in &recs {
        // `gpu_tiles` runs its tiles on tensor cores, which take f32 operands only when
        // told to round them (`tf32=on`): its row says so.
        if r["recipe"] == "gpu_tiles" {
            let note = r["note"].as_str().unwrap();
            assert!(note.contains("pass `tf32=on`"), "{r}");
            assert!(r["median_ms"].is_null(), "{r}");
            continue;
        }
        assert_eq!(r["correct"], true, "{r}");
        // Named recipes: no rule chose them.
        assert!(!r["note"].as_str().unwrap().contains("chosen by"), "{r}");
        assert_eq!(r["min_ms"].is_number(), r["max_ms"].is_number());
    }
}

#[test]
fn cuda_without_a_gpu_fails_with_the_drivers_message() {
    let dir = tempfile::tempdir().unwrap();
    let o = sparsile(
        &with(&["bench", "--target", "cuda", "--peers", "none"], &CORA),
        &dir.path().join("cache"),
        &[],
    );
    if o.status.success() {
        println!("a GPU is present: the no-GPU error path was not exercised here");
        return;
    }
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("error: sparsile bench --target cuda needs an NVIDIA GPU with its driver"),
        "{err}"
    );
    assert!(
        err.contains("CUDA driver") || err.contains("CUDA device"),
        "the driver's own message: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(!stdout(&o).contains("median ms"), "nothing was measured");
}

/// A Python interpreter with NumPy: the bench environment's, else python3; `None`
/// (after saying so) without one.
fn python_with_numpy() -> Option<PathBuf> {
    let venv = repo_root().join("bench/.venv/bin/python");
    let candidates = [venv, PathBuf::from("python3")];
    let found = candidates.into_iter().find(|p| {
        Command::new(p)
            .args(["-c", "import numpy"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        println!("skipped: no Python with NumPy (bench/setup.sh makes one)");
    }
    found
}

#[test]
fn cuda_under_a_stand_in_driver_runs_the_whole_harness() {
    let dir = tempfile::tempdir().unwrap();
    let Some(_) = stub::build_stub(dir.path(), &[]) else {
        return;
    };
    let lib = dir.path().to_str().unwrap();
    let cache = dir.path().join("cache");
    let out = dir.path().join("stub.json");
    let python = python_with_numpy();
    let peers = if python.is_some() {
        "cusparse,torch,pyg"
    } else {
        "none"
    };
    let python_arg = python
        .as_ref()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|| "python3".into());
    let args = [
        "bench",
        "--target",
        "cuda",
        "--matrix",
        "data/cora.mtx",
        "--op",
        "spmm,spmv",
        "--k",
        "4",
        "--peers",
        peers,
        "--python",
        &python_arg,
        "--warmup",
        "1",
        "--repeat",
        "3",
        "--json",
        out.to_str().unwrap(),
    ];
    let fakes = fakes();
    let o = sparsile(
        &args,
        &cache,
        &[
            ("LD_LIBRARY_PATH", lib),
            ("PYTHONPATH", fakes.to_str().unwrap()),
        ],
    );
    let nvrtc = sparsile_runtime::cuda::Nvrtc::load(&sparsile_ir::settings::Settings::from_env());
    if let Err(e) = nvrtc {
        let err = stderr(&o);
        assert!(!o.status.success());
        assert!(
            err.contains("compiles its kernels with NVRTC") && err.contains("NVRTC"),
            "{err}"
        );
        println!("no NVRTC here ({e}): checked that the run stops and says so");
        return;
    }
    let text = ok(&o);
    assert!(
        text.contains("device: Sparsile stand-in device (sm_80, device 0)"),
        "{text}"
    );
    assert!(
        text.contains("nominal, from the driver's attributes (not measured)"),
        "{text}"
    );
    let recs = records(&out);
    let ours: Vec<&serde_json::Value> = recs.iter().filter(|r| r["system"] == "sparsile").collect();
    assert_eq!(ours.len(), 2);
    for r in &ours {
        // The stand-in faults every generated kernel: reported in the record, no times.
        assert!(r["correct"].is_null(), "{r}");
        assert!(r["median_ms"].is_null(), "{r}");
        let note = r["note"].as_str().unwrap();
        assert!(note.contains("chosen by the GPU rule"), "{r}");
        assert!(note.contains("illegal memory access"), "{r}");
        assert_eq!(
            r["recipe"],
            if r["op"] == "spmm" {
                "gpu_rowwise"
            } else {
                "gpu_warp"
            }
        );
        assert_eq!(r["device"], "Sparsile stand-in device");
        assert_eq!(r["target"], "cuda");
    }
    if python.is_none() {
        return;
    }
    let peer = |op: &str, system: &str| -> serde_json::Value {
        recs.iter()
            .find(|r| r["op"] == op && r["system"] == system)
            .unwrap_or_else(|| panic!("no {system} record for {op}"))
            .clone()
    };
    for (op, system) in [
        ("spmm", "cusparse"),
        ("spmm", "torch"),
        ("spmm", "pyg"),
        ("spmv", "cusparse"),
        ("spmv", "torch"),
        ("spmv", "pyg"),
    ] {
        let r = peer(op, system);
        assert_eq!(r["correct"], true, "{r}");
        assert_eq!(r["target"], "cuda", "{r}");
        let note = r["note"].as_str().unwrap_or_default();
        assert!(note.contains("checked against the reference"), "{r}");
        assert!(r["median_ms"].as_f64().unwrap() > 0.0, "{r}");
        assert!(
            r["speedup"].is_null(),
            "Sparsile has no correct result: {r}"
        );
    }
    let cusparse = peer("spmm", "cusparse");
    let preprocess = cusparse["preprocess_ms"].as_f64().unwrap();
    assert!((preprocess - 0.01).abs() < 1e-9, "{cusparse}");
    assert!(
        cusparse["note"]
            .as_str()
            .unwrap()
            .contains("best of 15 variants: SpMM CSR_ALG2 row-major"),
        "{cusparse}"
    );
    assert!(cusparse["version"]
        .as_str()
        .unwrap()
        .starts_with("cupy 0.0-fake"));
}

/// Writes a small case folder (2 × 3 SpMM, K = 2) for the peers; returns case.json.
fn peer_case(dir: &Path) -> PathBuf {
    let le = |xs: &[f32]| xs.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    std::fs::write(
        dir.join("A.indptr.i64"),
        [0i64, 1, 2]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    std::fs::write(
        dir.join("A.indices.i32"),
        [0i32, 2]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    std::fs::write(dir.join("A.values.f32"), le(&[1.0, 2.0])).unwrap();
    std::fs::write(dir.join("X.f32"), le(&[1.0; 6])).unwrap();
    let case = serde_json::json!({
        "op": "spmm", "m": 2, "n": 3, "nnz": 2, "k": 2, "threads": 1,
        "warmup": 1, "repeat": 2, "dir": dir, "device": 0,
    });
    let path = dir.join("case.json");
    std::fs::write(&path, case.to_string()).unwrap();
    path
}

#[test]
fn gpu_peers_fail_soft_without_their_libraries_or_a_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let case = peer_case(dir.path());
    let peers = repo_root().join("bench/peers");
    for peer in ["cusparse", "torch", "pyg"] {
        let script = peers.join(format!("{peer}_gpu_peer.py"));
        let o = match Command::new("python3").arg(&script).arg(&case).output() {
            Ok(o) => o,
            Err(e) => {
                println!("skipped: no python3 ({e})");
                return;
            }
        };
        assert!(o.status.success(), "{peer}: {}", stderr(&o));
        let result: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(format!("result.{peer}.json"))).unwrap(),
        )
        .unwrap();
        if result["supported"] == true {
            println!(
                "{peer}: its library and a GPU are here; the unsupported path was not exercised"
            );
            continue;
        }
        let note = result["note"].as_str().unwrap();
        assert!(note.starts_with(&format!("{peer}: ")), "{note}");
        assert!(
            ["not installed", "no CUDA device", "CUDA unusable"]
                .iter()
                .any(|w| note.contains(w)),
            "{peer}: {note}"
        );
        println!("{peer}: {note}");
    }
}

#[test]
fn gpu_peers_run_correctly_under_stand_ins() {
    let Some(python) = python_with_numpy() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(&python)
        .arg(fakes().join("run_peers.py"))
        .arg(repo_root().join("bench/peers"))
        .arg(dir.path())
        .env("PYTHONPATH", fakes())
        .output()
        .unwrap();
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains("gpu peers under the stand-ins: all checks passed"),
        "{text}"
    );
}
