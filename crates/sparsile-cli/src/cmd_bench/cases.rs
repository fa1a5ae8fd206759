//! Benchmark cases: an operation (SpMM, SDDMM, SpMV) with its dense width K on one
//! matrix, with the format and recipe Sparsile uses for it.
//!
//! ```text
//! --op spmm,spmv --k 32,128 --matrix a.mtx  →  a spmm K=32, a spmm K=128, a spmv
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A measured operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// `Y[i,k] = A[i,j] * X[j,k]`.
    Spmm,
    /// `O[i,j] = A[i,j] * X[i,k] * Y[j,k]`, O with A's pattern.
    Sddmm,
    /// `y[i] = A[i,j] * x[j]`.
    Spmv,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Spmm => "spmm",
            Op::Sddmm => "sddmm",
            Op::Spmv => "spmv",
        }
    }

    /// Whether the operation has a dense width K.
    pub fn has_k(self) -> bool {
        !matches!(self, Op::Spmv)
    }
}

/// One case: an operation on a matrix, as Sparsile runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The matrix file.
    pub path: PathBuf,
    /// Its short name (file name without `.mtx`, `.mtx.gz`, `.spt`).
    pub matrix: String,
    pub op: Op,
    /// The dense width; `None` for SpMV.
    pub k: Option<usize>,
    /// Sparsile's format for A (a format string, e.g. `csr`).
    pub format: String,
    /// Sparsile's recipe spec (`default`, or `name[:key=value,...]`).
    pub recipe: String,
}

impl Case {
    /// `pubmed spmm K=32`.
    pub fn label(&self) -> String {
        match self.k {
            Some(k) => format!("{} {} K={k}", self.matrix, self.op.name()),
            None => format!("{} {}", self.matrix, self.op.name()),
        }
    }
}

/// The short name of a matrix file: `data/ogbn_arxiv.mtx.gz` → `ogbn_arxiv`.
pub fn matrix_name(path: &Path) -> String {
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    for ext in [".mtx.gz", ".mtx", ".spt"] {
        if let Some(stem) = file.strip_suffix(ext) {
            return stem.to_string();
        }
    }
    file
}

/// The cases of `ops` × `ks` on one matrix (SpMV once, without K).
pub fn expand(path: &Path, ops: &[Op], ks: &[usize], format: &str, recipe: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    for &op in ops {
        let widths: Vec<Option<usize>> = if op.has_k() {
            ks.iter().map(|&k| Some(k)).collect()
        } else {
            vec![None]
        };
        for k in widths {
            cases.push(Case {
                path: path.to_path_buf(),
                matrix: matrix_name(path),
                op,
                k,
                format: format.to_string(),
                recipe: recipe.to_string(),
            });
        }
    }
    cases
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_strip_matrix_extensions() {
        assert_eq!(matrix_name(Path::new("x/ogbn_arxiv.mtx.gz")), "ogbn_arxiv");
        assert_eq!(matrix_name(Path::new("cora.mtx")), "cora");
        assert_eq!(matrix_name(Path::new("a.spt")), "a");
        assert_eq!(matrix_name(Path::new("plain")), "plain");
    }

    #[test]
    fn spmv_has_no_width() {
        let cases = expand(
            Path::new("a.mtx"),
            &[Op::Spmm, Op::Spmv],
            &[32, 128],
            "csr",
            "default",
        );
        let got: Vec<(Op, Option<usize>)> = cases.iter().map(|c| (c.op, c.k)).collect();
        assert_eq!(
            got,
            vec![
                (Op::Spmm, Some(32)),
                (Op::Spmm, Some(128)),
                (Op::Spmv, None)
            ]
        );
        assert_eq!(cases[1].label(), "a spmm K=128");
    }
}
