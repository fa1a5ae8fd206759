//! The result records: one per (case, system), as `--json` writes them (a JSON list).
//!
//! ```json
//! {"matrix": "cora", "op": "spmm", "k": 32, "system": "sparsile", "format": "csr",
//!  "recipe": "default", "median_ms": 0.21, "min_ms": 0.2, "max_ms": 0.4, "gflops": 3.2,
//!  "gbs": 7.9, "floor_ms": 0.05, "pct_of_floor": 24.0, "correct": true, ...}
//! ```
//!
//! `k` is null for SpMV. Times are null, and `correct` is null with a `note`, when a
//! system lacks the operation or failed to run it. Records of the GPU benchmark
//! (`--target cuda` or `cuda-sim`) add `target`, `device` and, for peers that prepare the
//! operation before running it (cuSPARSE), `preprocess_ms`; the CPU benchmark's records
//! have none of them.

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::cmd_bench::metrics::Cost;

/// `sparsile`, or the peer's name.
pub const SPARSILE: &str = "sparsile";

/// One system's measurement of one case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub matrix: String,
    pub op: String,
    pub k: Option<usize>,
    pub system: String,
    /// Sparsile's format for A (null for peers, which use CSR).
    pub format: Option<String>,
    /// Sparsile's recipe (null for peers).
    pub recipe: Option<String>,
    pub m: usize,
    pub n: usize,
    pub nnz: usize,
    pub threads: usize,
    pub median_ms: Option<f64>,
    pub min_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// Flops of the operation over the median time.
    pub gflops: Option<f64>,
    /// Minimum bytes over the median time.
    pub gbs: Option<f64>,
    /// The roofline floor: max(bytes / bandwidth, flops / peak).
    pub floor_ms: f64,
    /// floor_ms / median_ms, in percent.
    pub pct_of_floor: Option<f64>,
    /// For Sparsile: the best peer's median over Sparsile's; for a peer: this peer's
    /// median over Sparsile's.
    pub speedup: Option<f64>,
    /// For Sparsile: the fastest peer that ran correctly.
    pub best_peer: Option<String>,
    /// Whether the result matched (Sparsile: the f64 reference; peers: Sparsile's
    /// result); null when the system did not run the case.
    pub correct: Option<bool>,
    pub max_abs_err: Option<f64>,
    pub note: Option<String>,
    pub version: Option<String>,
    pub compile_ms: Option<f64>,
    pub flops: f64,
    pub bytes: f64,
    pub bandwidth_gbs: f64,
    pub peak_gflops: f64,
    /// `cuda` or `cuda-sim` (GPU benchmark only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The GPU's name (`cuda`), or `SIMT interpreter` (`cuda-sim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Milliseconds a peer spent preparing the operation for this matrix before its runs
    /// (cuSPARSE's SpMM/SpMV preprocessing); not part of the timed runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preprocess_ms: Option<f64>,
    /// Every timed run in milliseconds, in the order they ran (round after round): what
    /// the median, minimum and maximum summarise, for a closer look at slow runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub times_ms: Vec<f64>,
}

impl Record {
    /// Fills the time-derived fields from the median, minimum and maximum (seconds).
    pub fn set_times(&mut self, median: f64, min: f64, max: f64, cost: Cost) {
        self.median_ms = Some(median * 1e3);
        self.min_ms = Some(min * 1e3);
        self.max_ms = Some(max * 1e3);
        self.gflops = Some(cost.flops / median / 1e9);
        self.gbs = Some(cost.bytes / median / 1e9);
        self.pct_of_floor = Some(100.0 * self.floor_ms / (median * 1e3));
    }
}

/// Writes the records as a pretty-printed JSON list.
pub fn write(path: &Path, records: &[Record]) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(path, serde_json::to_string_pretty(records)?)
        .with_context(|| format!("cannot write {}", path.display()))
}
