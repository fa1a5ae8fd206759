//! Shared test helpers: a small program builder over the stage-I node types, seeded
//! random matrices, tensors built by hand in formats the interim conversion lacks, and
//! dense reference arithmetic.
#![allow(dead_code)]

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile_formats::{
    AxisStorage, CooTensor, Format, IndexArray, SparseTensor, Structure, Values,
};
use sparsile_ir::coord::*;
use sparsile_ir::{AxisId, AxisKind, BufferId, DType, IndexType, IterVarId, Span};
use sparsile_runtime::{interpret, InterpError, InterpOptions, Outputs};

#[allow(unused_imports)]
pub use IterKind::{Reduction as R, Spatial as S};

/// Builds a program from node types.
pub struct Builder {
    pub p: Program,
}

impl Builder {
    pub fn new(name: &str) -> Builder {
        Builder {
            p: Program::new(name),
        }
    }

    pub fn param(&mut self, name: &str) -> Extent {
        Extent::Param(self.p.params.push(Param { name: name.into() }))
    }

    pub fn dense(&mut self, name: &str, length: Extent) -> AxisId {
        self.p.axes.push(AxisDecl::dense_fixed(name, length))
    }

    pub fn svar(&mut self, name: &str, parent: AxisId, length: Extent, nnz: Extent) -> AxisId {
        self.p.axes.push(AxisDecl::sparse_variable(
            name,
            parent,
            length,
            nnz,
            IndexType::I32,
        ))
    }

    pub fn sfixed(
        &mut self,
        name: &str,
        parent: Option<AxisId>,
        length: Extent,
        per: Extent,
        unique: bool,
    ) -> AxisId {
        self.p.axes.push(AxisDecl {
            name: name.into(),
            kind: AxisKind::SparseFixed,
            parent,
            length,
            nnz: None,
            nnz_per_parent: Some(per),
            index_type: IndexType::I32,
            unique,
            padded: true,
            structure: AxisStructure::Bound,
            span: Span::default(),
        })
    }

    pub fn buf(&mut self, name: &str, axes: &[AxisId], role: BufferRole) -> BufferId {
        self.buf_t(name, DType::F64, axes, role)
    }

    pub fn buf_t(
        &mut self,
        name: &str,
        dtype: DType,
        axes: &[AxisId],
        role: BufferRole,
    ) -> BufferId {
        self.p.buffers.push(BufferDecl {
            name: name.into(),
            dtype,
            axes: axes.to_vec(),
            role,
            span: Span::default(),
        })
    }

    pub fn var(&mut self, name: &str, axis: AxisId) -> IterVarId {
        self.p.vars.push(IterVar {
            name: name.into(),
            axis,
        })
    }

    pub fn iter(
        &self,
        name: &str,
        axes: &[(IterVarId, IterKind)],
        init: Vec<Stmt>,
        body: Vec<Stmt>,
    ) -> Stmt {
        Stmt::Iteration(SparseIteration {
            name: name.into(),
            axes: axes
                .iter()
                .map(|&(var, kind)| IterAxis {
                    axis: self.p.vars[var].axis,
                    kind,
                    var,
                })
                .collect(),
            init,
            body,
            span: Span::default(),
            fused: Vec::new(),
        })
    }
}

pub fn v(var: IterVarId) -> Expr {
    Expr::Var(var)
}
pub fn int(i: i64) -> Expr {
    Expr::Int(i)
}
pub fn ld(buffer: BufferId, indices: Vec<Expr>) -> Expr {
    Expr::load(buffer, indices)
}
pub fn add(a: Expr, b: Expr) -> Expr {
    Expr::binary(BinaryOp::Add, a, b)
}
pub fn mul(a: Expr, b: Expr) -> Expr {
    Expr::binary(BinaryOp::Mul, a, b)
}
pub fn st(buffer: BufferId, indices: Vec<Expr>, value: Expr) -> Stmt {
    Stmt::Store(Store {
        buffer,
        indices,
        value,
        span: Span::default(),
    })
}
/// `buffer[indices] = buffer[indices] + value`.
pub fn acc(buffer: BufferId, indices: Vec<Expr>, value: Expr) -> Stmt {
    st(buffer, indices.clone(), add(ld(buffer, indices), value))
}

pub fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// A canonical tensor of any order with each entry present with probability `density`
/// (values in [-1, 1), never 0).
pub fn random_coo(rng: &mut ChaCha8Rng, shape: &[usize], density: f64) -> CooTensor {
    let total: usize = shape.iter().product();
    let mut coo = CooTensor::empty(shape.to_vec());
    for off in 0..total {
        if rng.random_bool(density) {
            let mut rem = off;
            let mut c = vec![0; shape.len()];
            for (k, &d) in shape.iter().enumerate().rev() {
                c[k] = rem % d;
                rem /= d;
            }
            coo.coords.extend(c);
            coo.values.push(nonzero(rng));
        }
    }
    coo
}

pub fn nonzero(rng: &mut ChaCha8Rng) -> f64 {
    let x: f64 = rng.random_range(-1.0..1.0);
    if x == 0.0 {
        0.5
    } else {
        x
    }
}

/// A canonical matrix whose row `i` has `row_len(i)` entries at random columns.
pub fn coo_rows(
    rng: &mut ChaCha8Rng,
    m: usize,
    n: usize,
    row_len: impl Fn(usize) -> usize,
) -> CooTensor {
    let mut coo = CooTensor::empty(vec![m, n]);
    for i in 0..m {
        let k = row_len(i).min(n);
        let mut cols: Vec<usize> = (0..n).collect();
        for t in 0..k {
            let s = rng.random_range(t..n);
            cols.swap(t, s);
        }
        let mut chosen = cols[..k].to_vec();
        chosen.sort_unstable();
        for j in chosen {
            coo.coords.extend([i, j]);
            coo.values.push(nonzero(rng));
        }
    }
    coo
}

/// The matrices every 2-D test runs on.
pub fn matrix_cases(seed: u64) -> Vec<(&'static str, CooTensor)> {
    let mut r = rng(seed);
    vec![
        ("random", random_coo(&mut r, &[7, 9], 0.3)),
        (
            "empty rows",
            coo_rows(&mut r, 8, 6, |i| if i % 3 == 1 { 0 } else { 2 }),
        ),
        ("empty matrix", CooTensor::empty(vec![0, 5])),
        ("no entries", CooTensor::empty(vec![4, 3])),
        ("single row", random_coo(&mut r, &[1, 17], 0.5)),
        (
            "one long row",
            coo_rows(&mut r, 6, 300, |i| if i == 2 { 280 } else { i % 2 }),
        ),
    ]
}

/// Row-major dense values of a COO tensor.
pub fn to_dense(coo: &CooTensor) -> Vec<f64> {
    let mut out = vec![0.0; coo.shape.iter().product()];
    for e in 0..coo.nnz() {
        let mut off = 0;
        for (&c, &d) in coo.coord(e).iter().zip(&coo.shape) {
            off = off * d + c;
        }
        out[off] += coo.values[e];
    }
    out
}

pub fn dense_tensor(shape: &[usize], values: Vec<f64>) -> SparseTensor<'static> {
    SparseTensor {
        structure: Arc::new(Structure {
            format: Format::Dense,
            shape: shape.to_vec(),
            axes: shape.iter().map(|&d| AxisStorage::dense_fixed(d)).collect(),
        }),
        values: Values::F64(Cow::Owned(values)),
    }
}

pub fn random_dense(rng: &mut ChaCha8Rng, shape: &[usize]) -> (Vec<f64>, SparseTensor<'static>) {
    let total: usize = shape.iter().product();
    let values: Vec<f64> = (0..total).map(|_| nonzero(rng)).collect();
    (values.clone(), dense_tensor(shape, values))
}

fn ia(values: &[usize]) -> Option<IndexArray<'static>> {
    Some(IndexArray::from_usizes(values, IndexType::I32))
}

fn sparse_var(
    parent: usize,
    length: usize,
    indptr: &[usize],
    indices: &[usize],
) -> AxisStorage<'static> {
    AxisStorage {
        kind: AxisKind::SparseVariable,
        parent: Some(parent),
        length,
        npos: indices.len(),
        nnz_per_parent: None,
        indptr: ia(indptr),
        indices: ia(indices),
        unique: true,
    }
}

fn tensor(
    format: Format,
    shape: &[usize],
    axes: Vec<AxisStorage<'static>>,
    values: Vec<f64>,
) -> SparseTensor<'static> {
    SparseTensor {
        structure: Arc::new(Structure {
            format,
            shape: shape.to_vec(),
            axes,
        }),
        values: Values::F64(Cow::Owned(values)),
    }
}

pub fn csr(coo: &CooTensor) -> SparseTensor<'static> {
    SparseTensor::from_coo(coo, &Format::Csr).expect("CSR conversion")
}

/// CSC: `dense_fixed(cols)`, `sparse_variable(rows)`; values column by column.
pub fn csc(coo: &CooTensor) -> SparseTensor<'static> {
    let (m, n) = (coo.shape[0], coo.shape[1]);
    let mut order: Vec<usize> = (0..coo.nnz()).collect();
    order.sort_by_key(|&e| (coo.coord(e)[1], coo.coord(e)[0]));
    let mut indptr = vec![0; n + 1];
    for &e in &order {
        indptr[coo.coord(e)[1] + 1] += 1;
    }
    for j in 0..n {
        indptr[j + 1] += indptr[j];
    }
    let rows: Vec<usize> = order.iter().map(|&e| coo.coord(e)[0]).collect();
    let values = order.iter().map(|&e| coo.values[e]).collect();
    tensor(
        Format::Csc,
        &coo.shape,
        vec![
            AxisStorage::dense_fixed(n),
            sparse_var(0, m, &indptr, &rows),
        ],
        values,
    )
}

/// COO of any order: a non-unique parentless `sparse_fixed` axis, then one
/// `sparse_fixed(1)` axis per further dimension.
pub fn coo_tensor(coo: &CooTensor) -> SparseTensor<'static> {
    let nnz = coo.nnz();
    let axes = (0..coo.ndim())
        .map(|d| AxisStorage {
            kind: AxisKind::SparseFixed,
            parent: d.checked_sub(1),
            length: coo.shape[d],
            npos: nnz,
            nnz_per_parent: Some(if d == 0 { nnz } else { 1 }),
            indptr: None,
            indices: ia(&(0..nnz).map(|e| coo.coord(e)[d]).collect::<Vec<_>>()),
            unique: d > 0 || coo.ndim() == 1,
        })
        .collect();
    tensor(Format::Coo, &coo.shape, axes, coo.values.clone())
}

/// CSF of any order ≥ 2: first level dense, the others `sparse_variable`.
pub fn csf(coo: &CooTensor) -> SparseTensor<'static> {
    let d = coo.ndim();
    let mut axes = vec![AxisStorage::dense_fixed(coo.shape[0])];
    // prefixes[l] = distinct coordinate prefixes of length l + 1, in order.
    let mut prev: Vec<Vec<usize>> = (0..coo.shape[0]).map(|i| vec![i]).collect();
    for l in 1..d {
        let mut cur: Vec<Vec<usize>> = Vec::new();
        for e in 0..coo.nnz() {
            let p = coo.coord(e)[..=l].to_vec();
            if cur.last() != Some(&p) {
                cur.push(p);
            }
        }
        let mut indptr = vec![0; prev.len() + 1];
        let mut q = 0;
        for p in &cur {
            while prev[q][..] != p[..l] {
                q += 1;
            }
            indptr[q + 1] += 1;
        }
        for q in 0..prev.len() {
            indptr[q + 1] += indptr[q];
        }
        let indices: Vec<usize> = cur.iter().map(|p| p[l]).collect();
        axes.push(sparse_var(l - 1, coo.shape[l], &indptr, &indices));
        prev = cur;
    }
    tensor(Format::Csf, &coo.shape, axes, coo.values.clone())
}

/// BSR with `r × c` blocks: `IO` dense, `JO` sparse_variable, `II`, `JI` dense; the
/// last block row / column may run past the matrix edge (padding zeros).
pub fn bsr(coo: &CooTensor, r: usize, c: usize) -> SparseTensor<'static> {
    let (m, n) = (coo.shape[0], coo.shape[1]);
    let (mb, nb) = (m.div_ceil(r), n.div_ceil(c));
    let mut blocks: std::collections::BTreeMap<(usize, usize), Vec<f64>> = Default::default();
    for e in 0..coo.nnz() {
        let (i, j) = (coo.coord(e)[0], coo.coord(e)[1]);
        blocks
            .entry((i / r, j / c))
            .or_insert_with(|| vec![0.0; r * c])[(i % r) * c + j % c] = coo.values[e];
    }
    let mut indptr = vec![0; mb + 1];
    let mut indices = Vec::new();
    let mut values = Vec::new();
    for (&(bi, bj), vals) in &blocks {
        indptr[bi + 1] += 1;
        indices.push(bj);
        values.extend(vals);
    }
    for i in 0..mb {
        indptr[i + 1] += indptr[i];
    }
    tensor(
        Format::Bsr { r, c },
        &coo.shape,
        vec![
            AxisStorage::dense_fixed(mb),
            sparse_var(0, nb, &indptr, &indices),
            AxisStorage::dense_fixed(r),
            AxisStorage::dense_fixed(c),
        ],
        values,
    )
}

/// ELL with `k` slots per row; unused slots hold the padding coordinate `n` and zero.
pub fn ell(coo: &CooTensor, k: usize) -> SparseTensor<'static> {
    let (m, n) = (coo.shape[0], coo.shape[1]);
    let mut indices = vec![n; m * k];
    let mut values = vec![0.0; m * k];
    let mut fill = vec![0; m];
    for e in 0..coo.nnz() {
        let (i, j) = (coo.coord(e)[0], coo.coord(e)[1]);
        assert!(fill[i] < k, "row {i} longer than the ELL width");
        indices[i * k + fill[i]] = j;
        values[i * k + fill[i]] = coo.values[e];
        fill[i] += 1;
    }
    let col = AxisStorage {
        kind: AxisKind::SparseFixed,
        parent: Some(0),
        length: n,
        npos: m * k,
        nnz_per_parent: Some(k),
        indptr: None,
        indices: ia(&indices),
        unique: true,
    };
    tensor(
        Format::Ell { k: Some(k) },
        &coo.shape,
        vec![AxisStorage::dense_fixed(m), col],
        values,
    )
}

/// Row-major dense values of a tensor, read through its axis capabilities: every
/// stored, non-padding element's logical coordinate is found with `to_logical` from
/// the format layout.
pub fn tensor_to_dense(t: &SparseTensor<'_>) -> Vec<f64> {
    let s = &t.structure;
    let layout = s.format.layout(s.shape.len()).expect("layout");
    let mut out = vec![0.0; s.shape.iter().product()];
    let n = s.axes.len();
    let mut crds = vec![0i64; n];
    let mut pos = vec![sparsile_formats::Pos(0); n];
    fn walk(
        t: &SparseTensor<'_>,
        layout: &sparsile_formats::Layout,
        k: usize,
        crds: &mut Vec<i64>,
        pos: &mut Vec<sparsile_formats::Pos>,
        out: &mut [f64],
    ) {
        let s = &t.structure;
        if k == s.axes.len() {
            let logical: Vec<i64> = layout
                .to_logical
                .iter()
                .map(|e| e.eval(crds, &[], &s.shape).unwrap())
                .collect();
            if logical
                .iter()
                .zip(&s.shape)
                .any(|(&c, &d)| c < 0 || c as usize >= d)
            {
                return;
            }
            let mut off = 0;
            for (&c, &d) in logical.iter().zip(&s.shape) {
                off = off * d + c as usize;
            }
            out[off] += t.values.get_f64(s.value_offset(pos));
            return;
        }
        let axis = &s.axes[k];
        let range = axis.positions(axis.parent.map(|j| pos[j]));
        for p in range.clone() {
            if axis.is_padding(sparsile_formats::Pos(p)) {
                continue;
            }
            pos[k] = sparsile_formats::Pos(p);
            crds[k] = axis.coordinate(sparsile_formats::Pos(p), range.start).0 as i64;
            walk(t, layout, k + 1, crds, pos, out);
        }
    }
    walk(t, &layout, 0, &mut crds, &mut pos, &mut out);
    out
}

pub fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-9 * (1.0 + w.abs()),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

pub fn run(
    p: &Program,
    inputs: Vec<(&str, SparseTensor<'static>)>,
) -> Result<Outputs, InterpError> {
    let inputs: HashMap<String, SparseTensor<'static>> = inputs
        .into_iter()
        .map(|(k, t)| (k.to_string(), t))
        .collect();
    interpret(p, &inputs, &InterpOptions::default())
}

/// Dense `a (m×n) · b (n×k)`.
pub fn matmul(a: &[f64], b: &[f64], m: usize, n: usize, k: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * k];
    for i in 0..m {
        for j in 0..n {
            for l in 0..k {
                c[i * k + l] += a[i * n + j] * b[j * k + l];
            }
        }
    }
    c
}
