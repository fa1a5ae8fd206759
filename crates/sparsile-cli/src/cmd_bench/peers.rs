//! The peers: Python scripts in `bench/peers/` (SciPy, MKL, python-graphblas, PyTorch,
//! and `cloop`, the plain serial C loops of `cloop.c` compiled at `-O3 -march=native
//! -ffast-math`: what a sparse compiler such as TACO generates without a schedule),
//! each run in its own process per case with the benchmark's thread count, so that no
//! two threading runtimes share the cores. GPU peers run once per benchmark and take the
//! cases one by one (`peer_server.rs`): their start (PyTorch, CuPy, CUDA) takes seconds.
//!
//! The harness writes the operands and a `case.json` into the case's folder; the peer
//! script loads them, runs warm-up and timed repeats (timing only the operation), and
//! writes its result (`out.NAME.f32`, raw little-endian) and `result.NAME.json`:
//!
//! ```json
//! {"supported": true, "note": null, "version": "scipy 1.17.1", "times_ms": [1.2, 1.1]}
//! ```
//!
//! A peer without the operation answers `"supported": false` with a note; one whose
//! package is missing says so the same way. A GPU peer (`NAME_gpu_peer.py`, on
//! `--target cuda`) times each run with CUDA events, may add `"preprocess_ms"` (work done
//! once per matrix before its runs, such as cuSPARSE's preprocessing) and answers
//! `"supported": false` where CUDA or its library is missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use sparsile::Target;

use crate::cmd_bench::cases::{Case, Op};
use crate::cmd_bench::operands::{read_f32, Csr};

/// The CPU peers `--peers` accepts on the `cpu` target.
pub const KNOWN: &[&str] = &["scipy", "mkl", "graphblas", "torch", "cloop"];

/// The CPU peers measured when `--peers` is not given.
pub const DEFAULT: &[&str] = &["scipy", "mkl", "graphblas", "cloop"];

/// The GPU peers `--peers` accepts on the `cuda` target (scripts
/// `peers/NAME_gpu_peer.py`), all measured when `--peers` is not given: cuSPARSE through
/// CuPy, `torch.sparse` on CUDA, and PyG's SpMM.
pub const KNOWN_GPU: &[&str] = &["cusparse", "torch", "pyg"];

/// The peers of a run, and a message for the user when the list was adjusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerList {
    pub names: Vec<String>,
    /// Whether they are GPU peers (`NAME_gpu_peer.py`).
    pub gpu: bool,
    /// Said before measuring, when some of `--peers` is not run.
    pub notice: Option<String>,
}

/// The peers of `target` from `--peers` (`None`: not given).
pub fn for_target(list: Option<&[String]>, target: Target) -> Result<PeerList> {
    let given = list.map(names).filter(|n| !n.is_empty());
    match target {
        Target::Cpu => {
            let names = given.unwrap_or_else(|| DEFAULT.iter().map(|s| s.to_string()).collect());
            Ok(PeerList {
                names: parse_names(&names, KNOWN, |n| {
                    KNOWN_GPU
                        .contains(&n)
                        .then(|| format!("unknown peer `{n}` on the cpu target: it is a GPU peer, measure it with --target cuda"))
                })?,
                gpu: false,
                notice: None,
            })
        }
        Target::Cuda => {
            let names = given.unwrap_or_else(|| KNOWN_GPU.iter().map(|s| s.to_string()).collect());
            Ok(PeerList {
                names: parse_names(&names, KNOWN_GPU, |n| {
                    KNOWN.contains(&n).then(|| {
                        format!(
                            "`{n}` is a CPU peer; --target cuda measures the GPU peers ({}): measure CPU peers with --target cpu",
                            KNOWN_GPU.join(", ")
                        )
                    })
                })?,
                gpu: true,
                notice: None,
            })
        }
        Target::CudaSim => {
            let notice = given.filter(|n| n != &["none"]).map(|n| {
                format!(
                    "--target cuda-sim runs no peers (its times are the SIMT interpreter's on the CPU, not a GPU's): --peers {} ignored",
                    n.join(",")
                )
            });
            Ok(PeerList {
                names: Vec::new(),
                gpu: true,
                notice,
            })
        }
    }
}

/// The names of a `--peers` list, trimmed and lowercased, without empty ones.
fn names(list: &[String]) -> Vec<String> {
    list.iter()
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Checks `names` against `known`; `none` (alone) means no peer; `other_kind` says why a
/// name of the other kind of peer is refused.
fn parse_names(
    names: &[String],
    known: &[&str],
    other_kind: impl Fn(&str) -> Option<String>,
) -> Result<Vec<String>> {
    if names.iter().any(|n| n == "none") {
        if names.len() > 1 {
            bail!("--peers none cannot be combined with other peers");
        }
        return Ok(Vec::new());
    }
    let mut out: Vec<String> = Vec::new();
    for n in names {
        if !known.contains(&n.as_str()) {
            if let Some(why) = other_kind(n) {
                bail!("{why}");
            }
            bail!("unknown peer `{n}` (known: {}, or none)", known.join(", "));
        }
        if !out.contains(n) {
            out.push(n.clone());
        }
    }
    Ok(out)
}

/// The script of peer `name`: `NAME_peer.py`, or `NAME_gpu_peer.py` for a GPU peer.
pub fn script_name(name: &str, gpu: bool) -> String {
    if gpu {
        format!("{name}_gpu_peer.py")
    } else {
        format!("{name}_peer.py")
    }
}

/// The folder holding `peers/` and `.venv/`: `given`, else a `bench/` beside the current
/// folder or one of its ancestors, else the one of the repository this binary was built
/// from.
pub fn find_bench_dir(given: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = given {
        if !dir.join("peers").is_dir() {
            bail!("{} has no peers/ folder", dir.display());
        }
        return Ok(dir.to_path_buf());
    }
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench");
    cwd.ancestors()
        .map(|a| a.join("bench"))
        .chain(std::iter::once(built))
        .find(|b| b.join("peers").join("common.py").is_file())
        .context("cannot find the bench/ folder with the peers; pass --bench-dir")
}

/// The Python interpreter of the peers: `given` (`--python`), else the bench
/// environment's (`bench/.venv`, made by `bench/setup.sh`).
pub fn python(bench_dir: &Path, given: Option<&Path>) -> Result<PathBuf> {
    if let Some(py) = given {
        let found = if py.components().count() > 1 {
            py.is_file().then(|| py.to_path_buf())
        } else {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join(py))
                    .find(|p| p.is_file())
            })
        };
        return found.with_context(|| format!("--python {}: no such interpreter", py.display()));
    }
    let py = bench_dir.join(".venv").join("bin").join("python");
    if !py.is_file() {
        bail!(
            "no Python environment for the peers at {}: run {}/setup.sh, pass --python, or --peers none",
            bench_dir.join(".venv").display(),
            bench_dir.display()
        );
    }
    Ok(py)
}

/// What the harness tells a peer about a case (`case.json`).
#[derive(Debug, Serialize)]
pub struct CaseFile<'a> {
    pub op: &'a str,
    pub m: usize,
    pub n: usize,
    pub nnz: usize,
    pub k: usize,
    pub threads: usize,
    pub warmup: usize,
    pub repeat: usize,
    /// The folder of the operand files.
    pub dir: &'a Path,
    /// GPU peers: the ordinal of the GPU to run on (Sparsile's, `SPARSILE_CUDA_DEVICE`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<usize>,
}

/// What a peer reports (`result.NAME.json`).
#[derive(Debug, Deserialize)]
struct ResultFile {
    supported: bool,
    note: Option<String>,
    version: Option<String>,
    #[serde(default)]
    times_ms: Vec<f64>,
    #[serde(default)]
    preprocess_ms: Option<f64>,
}

/// A peer's run of one case.
#[derive(Debug, Clone, PartialEq)]
pub enum PeerRun {
    /// Timed runs (seconds) and the result.
    Ran {
        times: Vec<f64>,
        output: Vec<f32>,
        version: Option<String>,
        note: Option<String>,
        /// Milliseconds spent preparing the operation before the runs (untimed), when
        /// the peer reports it.
        preprocess_ms: Option<f64>,
    },
    /// The peer lacks the operation or its package; the note says which.
    Unsupported { note: String },
    /// The peer's process failed; the note holds the end of its error output.
    Failed { note: String },
}

/// How many runs a peer makes, and with how many threads.
#[derive(Debug, Clone, Copy)]
pub struct Runs {
    pub threads: usize,
    pub warmup: usize,
    pub repeat: usize,
    /// GPU peers: the GPU's ordinal.
    pub device: Option<usize>,
}

/// Writes `case.json` for the peers into `dir` (which holds `a`'s and the dense
/// operands' files).
pub fn write_case(dir: &Path, case: &Case, a: &Csr, runs: Runs) -> Result<PathBuf> {
    let file = CaseFile {
        op: case.op.name(),
        m: a.m,
        n: a.n,
        nnz: a.nnz(),
        k: if case.op == Op::Spmv {
            1
        } else {
            case.k.unwrap_or(1)
        },
        threads: runs.threads,
        warmup: runs.warmup,
        repeat: runs.repeat,
        dir,
        device: runs.device,
    };
    let path = dir.join("case.json");
    std::fs::write(&path, serde_json::to_string_pretty(&file)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// One run of a peer on a case: peer `name` (script `peers/SCRIPT` under `bench_dir`, see
/// [`script_name`]) on the case described by `case_json` (in the operands' folder), with
/// `threads` threads; a peer that has not answered after `timeout` is stopped and the run
/// reported as failed.
#[derive(Debug, Clone, Copy)]
pub struct PeerCall<'a> {
    pub python: &'a Path,
    pub bench_dir: &'a Path,
    pub name: &'a str,
    pub script: &'a str,
    pub case_json: &'a Path,
    pub threads: usize,
    pub timeout: Duration,
}

impl PeerCall<'_> {
    /// The script's path (an error when it is missing) and the case folder, from which
    /// the peer's results of an earlier run are removed.
    pub fn prepare(&self) -> Result<(PathBuf, &Path)> {
        let script = self.bench_dir.join("peers").join(self.script);
        if !script.is_file() {
            bail!("peer script {} is missing", script.display());
        }
        let dir = self.case_json.parent().unwrap_or(Path::new("."));
        let _ = std::fs::remove_file(dir.join(format!("result.{}.json", self.name)));
        let _ = std::fs::remove_file(dir.join(format!("out.{}.f32", self.name)));
        Ok((script, dir))
    }

    /// `python SCRIPT` with every threading runtime's thread count set to `threads`.
    pub fn command(&self, script: &Path) -> Command {
        let t = self.threads.to_string();
        let mut command = Command::new(self.python);
        command
            .arg(script)
            .env("OMP_NUM_THREADS", &t)
            .env("MKL_NUM_THREADS", &t)
            .env("OPENBLAS_NUM_THREADS", &t)
            .env("NUMEXPR_NUM_THREADS", &t);
        command
    }
}

/// Runs the peer of `call` in a process of its own for this one case.
pub fn run_peer(call: &PeerCall<'_>) -> Result<PeerRun> {
    let (name, python, timeout) = (call.name, call.python, call.timeout);
    let (script, dir) = call.prepare()?;
    let result_path = dir.join(format!("result.{name}.json"));
    let stderr_path = dir.join(format!("stderr.{name}.txt"));
    let stderr_file = std::fs::File::create(&stderr_path)
        .with_context(|| format!("cannot create {}", stderr_path.display()))?;
    let mut child = call
        .command(&script)
        .arg(call.case_json)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr_file)
        .spawn()
        .with_context(|| format!("cannot start {}", python.display()))?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().context("cannot wait for a peer")? {
            break status;
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(PeerRun::Failed {
                note: format!("{name} timed out after {} s", timeout.as_secs()),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if !status.success() || !result_path.is_file() {
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        return Ok(PeerRun::Failed {
            note: format!("{name} failed ({status}): {}", last_lines(&stderr)),
        });
    }
    read_result(name, dir)
}

/// The last three lines of a peer's error output, joined by ` | `.
pub fn last_lines(stderr: &str) -> String {
    let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    tail.join(" | ")
}

/// What peer `name` wrote into the case folder `dir` (`result.NAME.json`, and
/// `out.NAME.f32` when it ran).
pub fn read_result(name: &str, dir: &Path) -> Result<PeerRun> {
    let result_path = dir.join(format!("result.{name}.json"));
    let out_path = dir.join(format!("out.{name}.f32"));
    let text = std::fs::read_to_string(&result_path)
        .with_context(|| format!("cannot read {}", result_path.display()))?;
    let result: ResultFile = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a peer result", result_path.display()))?;
    if !result.supported {
        return Ok(PeerRun::Unsupported {
            note: result
                .note
                .unwrap_or_else(|| format!("{name}: not supported")),
        });
    }
    if result.times_ms.is_empty() {
        return Ok(PeerRun::Failed {
            note: format!("{name} reported no timed run"),
        });
    }
    Ok(PeerRun::Ran {
        times: result.times_ms.iter().map(|t| t / 1e3).collect(),
        output: read_f32(&out_path)?,
        version: result.version,
        note: result.note,
        preprocess_ms: result.preprocess_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(list: &[&str]) -> Result<Vec<String>> {
        for_target(Some(&given(list)), Target::Cpu).map(|p| p.names)
    }

    #[test]
    fn peer_lists() {
        assert_eq!(cpu(&["none"]).unwrap(), Vec::<String>::new());
        assert_eq!(
            cpu(&["SciPy", "mkl", "scipy"]).unwrap(),
            vec!["scipy".to_string(), "mkl".to_string()]
        );
        assert!(cpu(&["none", "scipy"]).is_err());
        assert!(cpu(&["cusparse"]).is_err());
    }

    fn given(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn peers_follow_the_target() {
        let cpu = for_target(None, Target::Cpu).unwrap();
        assert_eq!(cpu.names, given(DEFAULT));
        assert!(!cpu.gpu);
        let gpu = for_target(None, Target::Cuda).unwrap();
        assert_eq!(gpu.names, given(KNOWN_GPU));
        assert!(gpu.gpu && gpu.notice.is_none());
        let some = for_target(Some(&given(&["Torch", "cusparse", "torch"])), Target::Cuda);
        assert_eq!(some.unwrap().names, given(&["torch", "cusparse"]));
        let none = for_target(Some(&given(&["none"])), Target::Cuda).unwrap();
        assert!(none.names.is_empty());

        // A CPU peer on the GPU and a GPU peer on the CPU are refused with the way out.
        let e = for_target(Some(&given(&["cusparse", "mkl"])), Target::Cuda).unwrap_err();
        assert!(e.to_string().contains("`mkl` is a CPU peer"), "{e}");
        assert!(e.to_string().contains("--target cpu"), "{e}");
        let e = for_target(Some(&given(&["pyg"])), Target::Cpu).unwrap_err();
        assert!(e.to_string().contains("--target cuda"), "{e}");
        let e = for_target(Some(&given(&["tpu"])), Target::Cuda).unwrap_err();
        assert!(e.to_string().contains("known: cusparse, torch, pyg"), "{e}");

        // The SIMT dry run has no peers; a list given is ignored, saying so.
        let sim = for_target(None, Target::CudaSim).unwrap();
        assert_eq!((sim.names.len(), sim.notice), (0, None));
        let sim = for_target(Some(&given(&["cusparse"])), Target::CudaSim).unwrap();
        assert!(sim.names.is_empty());
        assert!(sim.notice.unwrap().contains("--peers cusparse ignored"));
        let sim = for_target(Some(&given(&["none"])), Target::CudaSim).unwrap();
        assert_eq!(sim.notice, None);
        assert_eq!(script_name("torch", true), "torch_gpu_peer.py");
        assert_eq!(script_name("torch", false), "torch_peer.py");
    }

    #[test]
    fn a_missing_environment_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = python(dir.path(), None).unwrap_err().to_string();
        assert!(err.contains("setup.sh"), "{err}");
        let err = python(dir.path(), Some(Path::new("no-such-python-here")));
        assert!(err.unwrap_err().to_string().contains("no such interpreter"));
        let missing = dir.path().join("bin/python");
        assert!(python(dir.path(), Some(&missing)).is_err());
    }

    #[cfg(unix)]
    /// A bench folder whose `.venv/bin/python` is the system's python3 and whose peers
    /// are small stdlib-only scripts; `None` when there is no python3.
    fn fake_bench(dir: &Path) -> Option<PathBuf> {
        let python = std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|p| p.join("python3"))
            .find(|p| p.is_file())?;
        let bin = dir.join(".venv").join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(&python, bin.join("python")).unwrap();
        let peers = dir.join("peers");
        std::fs::create_dir_all(&peers).unwrap();
        let write = |name: &str, body: &str| {
            std::fs::write(peers.join(format!("{name}_peer.py")), body).unwrap();
        };
        // Writes y = 2 * x (m values) and two timings.
        write(
            "scipy",
            r#"import json, os, struct, sys
case = json.load(open(sys.argv[1]))
d = case["dir"]
x = open(os.path.join(d, "X.f32"), "rb").read()
vals = struct.unpack("<%df" % (len(x) // 4), x)
open(os.path.join(d, "out.scipy.f32"), "wb").write(struct.pack("<%df" % len(vals), *[2 * v for v in vals]))
json.dump({"supported": True, "note": None, "version": "fake 1", "times_ms": [2.0, 4.0]},
          open(os.path.join(d, "result.scipy.json"), "w"))
"#,
        );
        write(
            "mkl",
            r#"import json, os, sys
case = json.load(open(sys.argv[1]))
json.dump({"supported": False, "note": "mkl: no " + case["op"], "version": None},
          open(os.path.join(case["dir"], "result.mkl.json"), "w"))
"#,
        );
        write("graphblas", "raise RuntimeError('boom')\n");
        write("torch", "import time\ntime.sleep(30)\n");
        Some(bin.join("python"))
    }

    const LONG: Duration = Duration::from_secs(120);

    #[cfg(unix)]
    #[test]
    fn peer_processes_report_runs_notes_and_failures() {
        let dir = tempfile::tempdir().unwrap();
        let Some(python) = fake_bench(dir.path()) else {
            eprintln!("skipped: no python3");
            return;
        };
        let case_dir = dir.path().join("case");
        std::fs::create_dir_all(&case_dir).unwrap();
        let a = Csr {
            m: 3,
            n: 3,
            indptr: vec![0, 1, 2, 3],
            indices: vec![0, 1, 2],
            values: vec![1.0; 3],
        };
        let dense = crate::cmd_bench::operands::Dense::random(Op::Spmv, 3, 3, 1, 4);
        a.write(&case_dir).unwrap();
        dense.write(&case_dir).unwrap();
        let case = Case {
            path: "a.mtx".into(),
            matrix: "a".into(),
            op: Op::Spmv,
            k: None,
            format: "csr".into(),
            recipe: "default".into(),
        };
        let runs = Runs {
            threads: 1,
            warmup: 1,
            repeat: 2,
            device: None,
        };
        let case_json = write_case(&case_dir, &case, &a, runs).unwrap();
        let call = |name, script, timeout| PeerCall {
            python: &python,
            bench_dir: dir.path(),
            name,
            script,
            case_json: &case_json,
            threads: 1,
            timeout,
        };
        match run_peer(&call("scipy", "scipy_peer.py", LONG)).unwrap() {
            PeerRun::Ran {
                times,
                output,
                version,
                ..
            } => {
                assert_eq!(times, vec![0.002, 0.004]);
                let doubled: Vec<f32> = dense.x.iter().map(|v| 2.0 * v).collect();
                assert_eq!(output, doubled);
                assert_eq!(version.as_deref(), Some("fake 1"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            run_peer(&call("mkl", "mkl_peer.py", LONG)).unwrap(),
            PeerRun::Unsupported {
                note: "mkl: no spmv".into()
            }
        );
        match run_peer(&call("graphblas", "graphblas_peer.py", LONG)).unwrap() {
            PeerRun::Failed { note } => assert!(note.contains("boom"), "{note}"),
            other => panic!("{other:?}"),
        }
        match run_peer(&call("torch", "torch_peer.py", Duration::from_millis(300))).unwrap() {
            PeerRun::Failed { note } => assert!(note.contains("timed out"), "{note}"),
            other => panic!("{other:?}"),
        }
        std::fs::remove_file(dir.path().join("peers").join("torch_peer.py")).unwrap();
        assert!(run_peer(&call("torch", "torch_peer.py", LONG)).is_err());
    }

    #[test]
    fn the_repository_bench_folder_is_found() {
        let dir = find_bench_dir(None).unwrap();
        assert!(dir.join("peers").join("scipy_peer.py").is_file());
    }
}
