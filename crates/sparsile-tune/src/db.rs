//! The tuning database: measured choices, as append-only JSON lines.
//!
//! Purpose: a measured best candidate for an input is reused by every later run on the
//! same input, in any process. A [`Record`] holds what was measured for one candidate
//! under one [`Key`] (the program, the sparsity pattern, the dense extents, types,
//! threads, the machine and compiler, the version of the candidate space); the records a
//! search marks `best` answer lookups, the newest one winning.
//!
//! Safety and robustness: each record is one line written with a single `write` call
//! under an exclusive `flock` on the file, so records of processes tuning at once never
//! interleave; readers take a shared lock. A line that does not parse (a torn write, an
//! edit) is skipped and reported as a warning, never an error. Lookups are a hash-map
//! read of records loaded once and extended by what other processes appended since.
//!
//! ```
//! use sparsile_tune::db::{Db, Key, Record};
//! use sparsile_tune::space::Candidate;
//! let dir = tempfile::tempdir().unwrap();
//! let db = Db::open(&dir.path().join("tuning.jsonl"));
//! let key = Key::example();
//! assert!(db.best(&key).unwrap().is_none());
//! let mut r = Record::new(key.clone(), "spmm", Candidate::new("csr", "rowwise"), vec![1.0, 1.2, 1.1]);
//! r.best = true;
//! db.append(&r).unwrap();
//! assert_eq!(db.best(&key).unwrap().unwrap().candidate.recipe, "rowwise");
//! ```

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::space::{Candidate, KERNEL_VERSION, SPACE_VERSION};

/// What a measurement is valid for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Key {
    /// What is computed: the operator's name for a recognised operator (`spmm`, …:
    /// every spelling of it shares records), else a hash of the program text.
    pub program: String,
    /// A hash of the sparse operand's pattern (shape, format, structure arrays).
    pub pattern: String,
    /// The dense extents the kernel runs with (`K`, batch).
    pub dense: Vec<usize>,
    pub dtype: String,
    pub index: String,
    pub threads: usize,
    /// Architecture and the CPU features present (see [`crate::target`]).
    pub target: String,
    /// The C compiler's identity.
    pub compiler: String,
    /// Whether candidates in other formats than the input's were allowed.
    pub other_formats: bool,
    pub space_version: u32,
    /// The kernels' version ([`KERNEL_VERSION`]); records without it (0) were measured on
    /// older kernels and match no lookup.
    #[serde(default)]
    pub kernel_version: u32,
}

impl Key {
    /// A key for examples and tests.
    pub fn example() -> Key {
        Key {
            program: "p".into(),
            pattern: "a".into(),
            dense: vec![32],
            dtype: "f32".into(),
            index: "i32".into(),
            threads: 2,
            target: "x86_64".into(),
            compiler: "cc".into(),
            other_formats: false,
            space_version: SPACE_VERSION,
            kernel_version: KERNEL_VERSION,
        }
    }
}

/// One measured candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub key: Key,
    pub op: String,
    pub candidate: Candidate,
    /// The trace the candidate's recipe recorded, when it applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<serde_json::Value>,
    /// Kernel times of the timed runs, in milliseconds (empty when it failed).
    pub times_ms: Vec<f64>,
    pub median_ms: Option<f64>,
    #[serde(default)]
    pub compile_ms: f64,
    /// Converting the operand to the candidate's format, apart from kernel time.
    #[serde(default)]
    pub convert_ms: f64,
    /// How the search ran (`exhaustive`, `pruned`, …).
    #[serde(default)]
    pub strategy: String,
    #[serde(default)]
    pub features: Vec<f64>,
    /// The sizes the cost model reads, for refitting it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<crate::cost::Shape>,
    /// Seconds since the Unix epoch.
    #[serde(default)]
    pub timestamp: u64,
    /// Whether the search chose this candidate for its key.
    #[serde(default)]
    pub best: bool,
    /// Why the candidate failed (it did not apply, did not compile, answered wrongly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl Record {
    /// A record of `times_ms` for `candidate`, timestamped now.
    pub fn new(key: Key, op: &str, candidate: Candidate, times_ms: Vec<f64>) -> Record {
        let median_ms = median(&times_ms);
        Record {
            key,
            op: op.to_string(),
            candidate,
            trace: None,
            times_ms,
            median_ms,
            compile_ms: 0.0,
            convert_ms: 0.0,
            strategy: String::new(),
            features: Vec::new(),
            shape: None,
            timestamp: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            best: false,
            failure: None,
        }
    }
}

/// The median of `xs` (`None` when empty).
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Why the database could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("tuning database {path}: {detail}")]
    Io { path: PathBuf, detail: String },
}

/// The records read so far and where reading stopped.
#[derive(Default)]
struct Loaded {
    offset: u64,
    best: HashMap<Key, Record>,
    /// Every record, for the cost model and reports.
    all: Vec<Record>,
    warnings: Vec<String>,
    lines: usize,
}

/// A tuning database file (see the module docs).
pub struct Db {
    path: PathBuf,
    loaded: Mutex<Loaded>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("path", &self.path).finish()
    }
}

fn io(path: &Path, e: impl std::fmt::Display) -> DbError {
    DbError::Io {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
}

/// Holds an `flock` on a file until dropped.
struct Locked {
    #[cfg(unix)]
    fd: std::os::unix::io::RawFd,
}

impl Locked {
    fn new(file: &File, exclusive: bool) -> std::io::Result<Locked> {
        #[cfg(unix)]
        {
            use std::os::unix::io::AsRawFd;
            let op = if exclusive {
                libc::LOCK_EX
            } else {
                libc::LOCK_SH
            };
            let fd = file.as_raw_fd();
            // SAFETY: flock on a file descriptor the caller's `File` owns and keeps open
            // while the lock lives.
            if unsafe { libc::flock(fd, op) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(Locked { fd })
        }
        #[cfg(not(unix))]
        {
            let _ = (file, exclusive);
            Ok(Locked {})
        }
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        #[cfg(unix)]
        // SAFETY: as in `new`; the file is still open.
        unsafe {
            libc::flock(self.fd, libc::LOCK_UN);
        }
    }
}

impl Db {
    /// The database at `path` (created on the first append).
    pub fn open(path: &Path) -> Db {
        Db {
            path: path.to_path_buf(),
            loaded: Mutex::new(Loaded::default()),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `record` as one line.
    pub fn append(&self, record: &Record) -> Result<(), DbError> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io(&self.path, e))?;
        }
        let mut line = serde_json::to_string(record).map_err(|e| io(&self.path, e))?;
        line.push('\n');
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| io(&self.path, e))?;
        let _lock = Locked::new(&file, true).map_err(|e| io(&self.path, e))?;
        file.write_all(line.as_bytes())
            .map_err(|e| io(&self.path, e))?;
        Ok(())
    }

    /// Reads what was appended since the last read.
    fn refresh(&self) -> Result<std::sync::MutexGuard<'_, Loaded>, DbError> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(loaded),
            Err(e) => return Err(io(&self.path, e)),
        };
        let len = file.metadata().map_err(|e| io(&self.path, e))?.len();
        if len < loaded.offset {
            // The file was replaced or cut: read it again from the start.
            *loaded = Loaded::default();
        }
        if len == loaded.offset {
            return Ok(loaded);
        }
        let text = {
            let _lock = Locked::new(&file, false).map_err(|e| io(&self.path, e))?;
            file.seek(SeekFrom::Start(loaded.offset))
                .map_err(|e| io(&self.path, e))?;
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)
                .map_err(|e| io(&self.path, e))?;
            bytes
        };
        // Only whole lines: a record being written has not reached its newline yet.
        let Some(end) = text.iter().rposition(|&b| b == b'\n') else {
            return Ok(loaded);
        };
        for line in text[..=end].split(|&b| b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            loaded.lines += 1;
            let n = loaded.lines;
            match serde_json::from_slice::<Record>(line) {
                Ok(r) => {
                    if r.best {
                        let newer = loaded
                            .best
                            .get(&r.key)
                            .is_none_or(|old| old.timestamp <= r.timestamp);
                        if newer {
                            loaded.best.insert(r.key.clone(), r.clone());
                        }
                    }
                    loaded.all.push(r);
                }
                Err(e) => {
                    let w = format!("{}: line {n} skipped: {e}", self.path.display());
                    loaded.warnings.push(w);
                }
            }
        }
        loaded.offset += end as u64 + 1;
        Ok(loaded)
    }

    /// The chosen candidate's record for `key`, if a search chose one.
    pub fn best(&self, key: &Key) -> Result<Option<Record>, DbError> {
        Ok(self.refresh()?.best.get(key).cloned())
    }

    /// Every record read so far.
    pub fn records(&self) -> Result<Vec<Record>, DbError> {
        Ok(self.refresh()?.all.clone())
    }

    /// The lines skipped so far, with the reason.
    pub fn warnings(&self) -> Result<Vec<String>, DbError> {
        Ok(self.refresh()?.warnings.clone())
    }
}
