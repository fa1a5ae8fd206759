//! The operands of a case, shared by Sparsile and the peers: the sparse matrix as a CSR
//! dump (row pointers i64, column indices i32, values f32) and seeded random dense
//! operands, all written as raw little-endian arrays that NumPy reads with `fromfile`.
//!
//! ```text
//! A.indptr.i64  A.indices.i32  A.values.f32  X.f32  [Y.f32]  case.json
//! ```

use std::path::Path;

use anyhow::{bail, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile_formats::CooTensor;

use crate::cmd_bench::cases::Op;

/// A matrix in compressed sparse rows, as the peers receive it.
#[derive(Debug, Clone, PartialEq)]
pub struct Csr {
    pub m: usize,
    pub n: usize,
    pub indptr: Vec<i64>,
    pub indices: Vec<i32>,
    pub values: Vec<f32>,
}

impl Csr {
    /// The CSR form of a matrix (order 2); entries are sorted by row, then column.
    pub fn from_coo(coo: &CooTensor) -> Result<Csr> {
        if coo.ndim() != 2 {
            bail!("bench needs a matrix; this tensor has order {}", coo.ndim());
        }
        let (m, n) = (coo.shape[0], coo.shape[1]);
        if n > i32::MAX as usize {
            bail!("bench needs fewer than 2^31 columns; this matrix has {n}");
        }
        let mut order: Vec<usize> = (0..coo.nnz()).collect();
        if !(1..coo.nnz()).all(|e| coo.coord(e - 1) <= coo.coord(e)) {
            order.sort_by(|&a, &b| coo.coord(a).cmp(coo.coord(b)));
        }
        let mut indptr = vec![0i64; m + 1];
        let mut indices = Vec::with_capacity(coo.nnz());
        let mut values = Vec::with_capacity(coo.nnz());
        for &e in &order {
            let c = coo.coord(e);
            indptr[c[0] + 1] += 1;
            indices.push(c[1] as i32);
            values.push(coo.values[e] as f32);
        }
        for i in 0..m {
            indptr[i + 1] += indptr[i];
        }
        Ok(Csr {
            m,
            n,
            indptr,
            indices,
            values,
        })
    }

    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// The row of every stored entry, in storage order.
    pub fn rows(&self) -> Vec<usize> {
        let mut rows = Vec::with_capacity(self.nnz());
        for i in 0..self.m {
            let len = (self.indptr[i + 1] - self.indptr[i]) as usize;
            rows.extend(std::iter::repeat_n(i, len));
        }
        rows
    }

    /// Writes `A.indptr.i64`, `A.indices.i32` and `A.values.f32` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        write_raw(&dir.join("A.indptr.i64"), &le_bytes(&self.indptr))?;
        write_raw(&dir.join("A.indices.i32"), &le_bytes(&self.indices))?;
        write_raw(&dir.join("A.values.f32"), &le_bytes(&self.values))
    }
}

/// The dense operands of a case: `X` (and `Y` for SDDMM), row-major f32.
#[derive(Debug, Clone, PartialEq)]
pub struct Dense {
    /// SpMM: n × K; SDDMM: m × K; SpMV: n.
    pub x: Vec<f32>,
    /// SDDMM only: n × K.
    pub y: Option<Vec<f32>>,
}

impl Dense {
    /// Seeded uniform values in [-1, 1) of the shapes `op` needs on an m × n matrix.
    pub fn random(op: Op, m: usize, n: usize, k: usize, seed: u64) -> Dense {
        match op {
            Op::Spmm => Dense {
                x: random_values(n * k, seed),
                y: None,
            },
            Op::Sddmm => Dense {
                x: random_values(m * k, seed),
                y: Some(random_values(n * k, seed.wrapping_add(1))),
            },
            Op::Spmv => Dense {
                x: random_values(n, seed),
                y: None,
            },
        }
    }

    /// Writes `X.f32` (and `Y.f32`) into `dir`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        write_raw(&dir.join("X.f32"), &le_bytes(&self.x))?;
        if let Some(y) = &self.y {
            write_raw(&dir.join("Y.f32"), &le_bytes(y))?;
        }
        Ok(())
    }
}

/// `len` seeded values, uniform in [-1, 1).
pub fn random_values(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// Numbers with a little-endian byte form.
pub trait LeBytes: Copy {
    fn put(self, out: &mut Vec<u8>);
}

impl LeBytes for f32 {
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl LeBytes for i32 {
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl LeBytes for i64 {
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

fn le_bytes<T: LeBytes>(xs: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(xs.len() * 8);
    for &x in xs {
        x.put(&mut out);
    }
    out
}

fn write_raw(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// Reads a raw little-endian f32 array.
pub fn read_f32(path: &Path) -> Result<Vec<f32>> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    if bytes.len() % 4 != 0 {
        bail!(
            "{} holds {} bytes, not a whole number of f32 values",
            path.display(),
            bytes.len()
        );
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csr_from_unsorted_coo() {
        let coo = CooTensor {
            shape: vec![3, 4],
            coords: vec![2, 3, 0, 1, 2, 0],
            values: vec![5.0, 2.0, 1.0],
        };
        let csr = Csr::from_coo(&coo).unwrap();
        assert_eq!(csr.indptr, vec![0, 1, 1, 3]);
        assert_eq!(csr.indices, vec![1, 0, 3]);
        assert_eq!(csr.values, vec![2.0, 1.0, 5.0]);
        assert_eq!(csr.rows(), vec![0, 2, 2]);
    }

    #[test]
    fn random_operands_are_seeded_and_shaped() {
        let a = Dense::random(Op::Sddmm, 3, 5, 2, 7);
        assert_eq!(a.x.len(), 6);
        assert_eq!(a.y.as_ref().unwrap().len(), 10);
        assert_eq!(a, Dense::random(Op::Sddmm, 3, 5, 2, 7));
        assert_ne!(a.x, Dense::random(Op::Sddmm, 3, 5, 2, 8).x);
        assert!(a.x.iter().all(|v| (-1.0..1.0).contains(v)));
    }

    #[test]
    fn raw_files_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let d = Dense::random(Op::Spmv, 4, 9, 1, 1);
        d.write(dir.path()).unwrap();
        assert_eq!(read_f32(&dir.path().join("X.f32")).unwrap(), d.x);
        std::fs::write(dir.path().join("bad.f32"), [0u8; 5]).unwrap();
        assert!(read_f32(&dir.path().join("bad.f32")).is_err());
    }
}
