//! The sparsity pattern of a sparse operand, as the automatic choice sees it: compressed
//! rows (for the features), a fingerprint (for the tuning database), the format's name.
//!
//! Computing them reads the whole structure once, so the result is remembered per
//! structure: a structure whose arrays are all owned, shared through an `Arc`, cannot
//! change while it is shared (the rule the kernel's validation memo relies on), so it
//! is remembered while a `Weak` to it lives. A structure over borrowed arrays is read
//! every time, and gets no fingerprint (its memory may change between calls, so a
//! database record must not be keyed by it).
//!
//! A structure that is not compressed rows (`dense_fixed` rows over a `sparse_variable`
//! axis) is converted through COO; an order-3 tensor's leading dimensions are flattened
//! into rows.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, Weak};

use sparsile_formats::{Format, IndexArray, SparseTensor, Structure};
use sparsile_ir::AxisKind;

/// What [`pattern`] found.
#[derive(Debug, Clone)]
pub struct Pattern {
    pub rows: usize,
    pub cols: usize,
    pub indptr: Arc<Vec<i64>>,
    pub indices: Arc<Vec<i64>>,
    /// The format's name (`csr`, `bsr:1x32`, …).
    pub format: String,
    /// The structure's fingerprint, when it is owned (see the module docs).
    pub fingerprint: Option<String>,
}

impl Pattern {
    /// The compressed rows, borrowed for the tuner's features.
    pub fn csr(&self) -> sparsile_tune::features::Csr<'_> {
        sparsile_tune::features::Csr {
            rows: self.rows,
            cols: self.cols,
            indptr: &self.indptr,
            indices: &self.indices,
        }
    }
}

/// At most this many remembered patterns.
const CAPACITY: usize = 64;

type Memo = Mutex<Vec<(Weak<Structure<'static>>, Pattern)>>;

fn memo() -> &'static Memo {
    static MEMO: Memo = Mutex::new(Vec::new());
    &MEMO
}

fn owned(a: &Option<IndexArray<'_>>) -> bool {
    match a {
        None => true,
        Some(IndexArray::I32(c)) => matches!(c, Cow::Owned(_)),
        Some(IndexArray::I64(c)) => matches!(c, Cow::Owned(_)),
    }
}

/// `s` as a structure of any lifetime when it owns every array (it borrows nothing).
pub(super) fn as_owned(s: &Arc<Structure<'_>>) -> Option<Arc<Structure<'static>>> {
    if !s.axes.iter().all(|a| owned(&a.indptr) && owned(&a.indices)) {
        return None;
    }
    // SAFETY: every array is owned (checked above), so the structure holds no
    // reference of its lifetime parameter.
    Some(unsafe {
        std::mem::transmute::<Arc<Structure<'_>>, Arc<Structure<'static>>>(Arc::clone(s))
    })
}

fn to_vec(a: &IndexArray<'_>) -> Vec<i64> {
    match a {
        IndexArray::I32(v) => v.iter().map(|&x| i64::from(x)).collect(),
        IndexArray::I64(v) => v.to_vec(),
    }
}

fn bytes(a: &IndexArray<'_>) -> Vec<u8> {
    match a {
        IndexArray::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        IndexArray::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

/// The pattern of `t` (see the module docs); `None` for a dense tensor or one of order
/// 1.
pub fn pattern(t: &SparseTensor<'_>) -> Option<Pattern> {
    let s = &t.structure;
    if s.shape.len() < 2 || !s.axes.iter().any(|a| a.kind.is_sparse()) {
        return None;
    }
    let shared = as_owned(s);
    if let Some(shared) = &shared {
        let m = memo().lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, p)) = m
            .iter()
            .find(|(w, _)| w.strong_count() > 0 && std::ptr::eq(w.as_ptr(), Arc::as_ptr(shared)))
        {
            return Some(p.clone());
        }
    }
    let p = compute(t, shared.is_some())?;
    if let Some(shared) = shared {
        let mut m = memo().lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|(w, _)| w.strong_count() > 0);
        if m.len() >= CAPACITY {
            m.remove(0);
        }
        m.push((Arc::downgrade(&shared), p.clone()));
    }
    Some(p)
}

fn compute(t: &SparseTensor<'_>, fingerprint: bool) -> Option<Pattern> {
    let s = &t.structure;
    let format = s.format.to_string();
    let cols = *s.shape.last()?;
    let rows: usize = s.shape[..s.shape.len() - 1].iter().product();
    // Compressed rows in row order (CSC has the same axes over the other dimension).
    let csr_axes = s.format == Format::Csr
        && s.axes.len() == 2
        && s.axes[0].kind == AxisKind::DenseFixed
        && s.axes[0].parent.is_none()
        && s.axes[1].kind == AxisKind::SparseVariable
        && s.axes[1].parent == Some(0);
    let (indptr, indices) = match (csr_axes, &s.axes.get(1).map(|a| (&a.indptr, &a.indices))) {
        (true, Some((Some(p), Some(i)))) => (to_vec(p), to_vec(i)),
        _ => {
            let coo = t.to_coo().ok()?;
            let order = coo.shape.len();
            let mut indptr = vec![0i64; rows + 1];
            let mut entries: Vec<(usize, i64)> = coo
                .coords
                .chunks(order)
                .map(|c| {
                    let r = c[..order - 1]
                        .iter()
                        .zip(&coo.shape[..order - 1])
                        .fold(0usize, |acc, (x, n)| acc * n + x);
                    (r, c[order - 1] as i64)
                })
                .collect();
            entries.sort_unstable();
            for (r, _) in &entries {
                indptr[r + 1] += 1;
            }
            for r in 0..rows {
                indptr[r + 1] += indptr[r];
            }
            (indptr, entries.into_iter().map(|(_, c)| c).collect())
        }
    };
    let fingerprint = fingerprint.then(|| {
        let shape: Vec<u8> = s
            .shape
            .iter()
            .flat_map(|x| (*x as u64).to_le_bytes())
            .collect();
        let mut parts: Vec<Vec<u8>> = vec![shape, format.as_bytes().to_vec()];
        for a in &s.axes {
            parts.push(vec![a.kind as u8]);
            for arr in [&a.indptr, &a.indices].into_iter().flatten() {
                parts.push(bytes(arr));
            }
        }
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        sparsile_tune::target::fingerprint(&refs)
    });
    Some(Pattern {
        rows,
        cols,
        indptr: Arc::new(indptr),
        indices: Arc::new(indices),
        format,
        fingerprint,
    })
}
