//! GPU peers kept running from case to case. A GPU peer imports PyTorch or CuPy and
//! sets up CUDA before it can measure anything, which takes seconds (4.4 s on an H200
//! machine for `import torch, cupy` and a first CUDA allocation), while a case's runs
//! take milliseconds: a process per case made a suite of a hundred cases spend minutes
//! starting Python. So each GPU peer script runs once per benchmark, as
//! `python NAME_gpu_peer.py --serve` (see `bench/peers/gpu_common.py`), and is handed
//! the cases one by one.
//!
//! Protocol: the harness writes a case's `case.json` path and a newline to the peer's
//! standard input; the peer measures the case exactly as a per-case process would,
//! writes `result.NAME.json` (and `out.NAME.f32`) into the case folder, and answers one
//! line on its standard output, `sparsile-peer done` or `sparsile-peer failed: WHY`
//! (other output lines are ignored). A peer that fails a case, outlives the timeout or
//! exits is stopped, and the next case starts a fresh one: a CUDA error can leave a
//! process's context unusable. Closing its standard input ends a peer.
//!
//! Used by the benchmark loop in place of [`super::peers::run_peer`] for GPU peers:
//! `servers.run(&call)` takes the same [`PeerCall`] and gives the same [`PeerRun`].

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};

use super::peers::{last_lines, read_result, PeerCall, PeerRun};

/// The prefix of the peer's answers on its standard output.
const REPLY: &str = "sparsile-peer ";

/// Lines of a peer's error output kept for a failure's note.
const KEPT_LINES: usize = 20;

/// One running peer.
struct Server {
    child: Child,
    /// `None` once closed (which ends the peer's loop).
    stdin: Option<ChildStdin>,
    replies: Receiver<String>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl Server {
    fn start(call: &PeerCall<'_>, script: &Path) -> Result<Server> {
        let mut child = call
            .command(script)
            .arg("--serve")
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", call.python.display()))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let stderr_pipe = child.stderr.take().expect("piped");
        let (tx, replies) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(reply) = line.strip_prefix(REPLY) {
                    if tx.send(reply.to_string()).is_err() {
                        break;
                    }
                }
            }
        });
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let kept = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr_pipe).lines() {
                let Ok(line) = line else { break };
                let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
                if kept.len() == KEPT_LINES {
                    kept.pop_front();
                }
                kept.push_back(line);
            }
        });
        Ok(Server {
            child,
            stdin: Some(stdin),
            replies,
            stderr,
        })
    }

    /// The end of its error output, for a failure's note.
    fn stderr_tail(&self) -> String {
        let kept = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        let text: Vec<&str> = kept.iter().map(String::as_str).collect();
        last_lines(&text.join("\n"))
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The running peers of one benchmark, by script and thread count; stopped on drop.
#[derive(Default)]
pub struct PeerServers {
    servers: HashMap<(String, usize), Server>,
}

impl PeerServers {
    /// Runs the peer of `call` on its case, starting the peer if it is not running; a
    /// peer that does not answer within the call's timeout is stopped and the run
    /// reported as failed.
    pub fn run(&mut self, call: &PeerCall<'_>) -> Result<PeerRun> {
        let (name, timeout) = (call.name, call.timeout);
        let (script_path, dir) = call.prepare()?;
        let case_json = call.case_json;
        let key = (script_path.display().to_string(), call.threads);
        let mut server = match self.servers.remove(&key) {
            Some(server) => server,
            None => Server::start(call, &script_path)?,
        };
        let case = case_json
            .to_str()
            .with_context(|| format!("{} is not UTF-8", case_json.display()))?;
        let sent = server.stdin.as_mut().is_some_and(|stdin| {
            writeln!(stdin, "{case}")
                .and_then(|_| stdin.flush())
                .is_ok()
        });
        if !sent {
            let note = format!("{name} exited: {}", server.stderr_tail());
            server.stop();
            return Ok(PeerRun::Failed { note });
        }
        match server.replies.recv_timeout(timeout) {
            Ok(reply) if reply == "done" => {
                self.servers.insert(key, server);
                read_result(name, dir)
            }
            Ok(reply) => {
                let why = reply.strip_prefix("failed: ").unwrap_or(&reply).to_string();
                // Give the error output a moment to arrive before it is read.
                std::thread::sleep(Duration::from_millis(50));
                let note = format!("{name} failed: {why} ({})", server.stderr_tail());
                server.stop();
                Ok(PeerRun::Failed { note })
            }
            Err(RecvTimeoutError::Timeout) => {
                server.stop();
                Ok(PeerRun::Failed {
                    note: format!("{name} timed out after {} s", timeout.as_secs()),
                })
            }
            Err(RecvTimeoutError::Disconnected) => {
                std::thread::sleep(Duration::from_millis(50));
                let note = format!("{name} exited: {}", server.stderr_tail());
                server.stop();
                Ok(PeerRun::Failed { note })
            }
        }
    }
}

impl Drop for PeerServers {
    fn drop(&mut self) {
        for (_, mut server) in self.servers.drain() {
            // End of input ends the peer's loop; wait briefly, then stop it.
            drop(server.stdin.take());
            for _ in 0..50 {
                if matches!(server.child.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            server.stop();
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A bench folder whose GPU peers use the repository's `gpu_common.py` with made-up
    /// measurements: `echo` returns X doubled and its process id as the version, `bad`
    /// fails with a Python error, `slow` never answers, `gone` exits at once.
    fn fake_gpu_bench(dir: &Path) -> Option<std::path::PathBuf> {
        let python = std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|p| p.join("python3"))
            .find(|p| p.is_file())?;
        let peers = dir.join("peers");
        std::fs::create_dir_all(&peers).unwrap();
        // The little of NumPy that gpu_common.py writes results with, so that the test
        // needs no NumPy (it shadows a real one: the script's folder comes first).
        std::fs::write(
            peers.join("numpy.py"),
            r#"import struct
float32 = "f4"
class _A(list):
    def reshape(self, *shape): return self
    def astype(self, dtype): return self
    def tofile(self, path):
        with open(path, "wb") as f: f.write(struct.pack("<%df" % len(self), *self))
def asarray(x, dtype=None): return _A(float(v) for v in x)
def ascontiguousarray(x): return _A(x)
"#,
        )
        .unwrap();
        let common = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/peers/gpu_common.py");
        std::fs::copy(common, peers.join("gpu_common.py")).unwrap();
        let write = |name: &str, measure: &str| {
            let body = format!(
                "import os, struct, sys\nimport gpu_common\n\ndef measure(case):\n{measure}\n\nif __name__ == \"__main__\":\n    gpu_common.main(\"{name}\", measure, sys.argv)\n"
            );
            std::fs::write(peers.join(format!("{name}_gpu_peer.py")), body).unwrap();
        };
        write(
            "echo",
            "    x = open(os.path.join(case['dir'], 'X.f32'), 'rb').read()\n    v = struct.unpack('<%df' % (len(x) // 4), x)\n    return {'result': [2 * t for t in v], 'times_ms': [1.0, 3.0], 'version': str(os.getpid()), 'note': None}",
        );
        write("bad", "    raise RuntimeError('illegal memory access')");
        write("slow", "    import time\n    time.sleep(30)");
        write("gone", "    os._exit(3)");
        Some(python)
    }

    fn case(dir: &Path, name: &str, x: &[f32]) -> std::path::PathBuf {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(d.join("X.f32"), bytes).unwrap();
        let json = d.join("case.json");
        std::fs::write(&json, format!("{{\"dir\": {:?}}}", d.display().to_string())).unwrap();
        json
    }

    const LONG: Duration = Duration::from_secs(120);

    /// Runs the fake peer `name` (script `NAME_gpu_peer.py`) on a case.
    fn run(
        servers: &mut PeerServers,
        python: &Path,
        bench: &Path,
        name: &str,
        case_json: &Path,
        timeout: Duration,
    ) -> anyhow::Result<PeerRun> {
        let script = format!("{name}_gpu_peer.py");
        servers.run(&PeerCall {
            python,
            bench_dir: bench,
            name,
            script: &script,
            case_json,
            threads: 1,
            timeout,
        })
    }

    /// The `echo` peer on `x`: checks its times and result, returns its process id.
    fn echo(
        servers: &mut PeerServers,
        python: &Path,
        bench: &Path,
        case: &str,
        x: &[f32],
    ) -> String {
        let json = self::case(bench, case, x);
        match run(servers, python, bench, "echo", &json, LONG).unwrap() {
            PeerRun::Ran {
                times,
                output,
                version,
                ..
            } => {
                assert_eq!(times, vec![0.001, 0.003]);
                assert_eq!(output, x.iter().map(|v| 2.0 * v).collect::<Vec<_>>());
                version.unwrap()
            }
            other => panic!("{other:?}"),
        }
    }

    /// The note of a peer run that failed.
    fn failure(run: anyhow::Result<PeerRun>) -> String {
        match run.unwrap() {
            PeerRun::Failed { note } => note,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn one_process_serves_case_after_case_and_failures_start_a_fresh_one() {
        let dir = tempfile::tempdir().unwrap();
        let Some(python) = fake_gpu_bench(dir.path()) else {
            eprintln!("skipped: no python3 on PATH");
            return;
        };
        let bench = dir.path();
        let mut servers = PeerServers::default();
        let first = echo(&mut servers, &python, bench, "c0", &[1.0, 2.0]);
        let second = echo(&mut servers, &python, bench, "c1", &[3.0, -4.0]);
        assert_eq!(first, second, "one process for both cases");

        let json = case(bench, "c2", &[1.0]);
        let note = failure(run(&mut servers, &python, bench, "bad", &json, LONG));
        assert!(note.contains("bad failed: illegal memory access"), "{note}");
        assert!(note.contains("RuntimeError"), "{note}");
        let note = failure(run(&mut servers, &python, bench, "gone", &json, LONG));
        assert!(note.starts_with("gone exited"), "{note}");
        let short = Duration::from_millis(500);
        let note = failure(run(&mut servers, &python, bench, "slow", &json, short));
        assert!(note.contains("timed out"), "{note}");
        // The healthy peer is still running.
        assert_eq!(echo(&mut servers, &python, bench, "c3", &[5.0]), first);
        assert!(run(&mut servers, &python, bench, "none", &json, LONG).is_err());
        drop(servers);
    }
}
