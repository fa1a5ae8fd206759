//! Conversion between formats through the canonical COO form.
//!
//! Interim: dense and CSR only; the full library replaces this module.

use std::sync::Arc;

use sparsile_ir::{AxisKind, DType, IndexType};

use crate::{
    AxisStorage, CooTensor, Format, FormatError, IndexArray, SparseTensor, Structure, Values,
};

/// Builds `format` from a canonical COO tensor.
pub fn from_coo(
    coo: &CooTensor,
    format: &Format,
    dtype: DType,
) -> Result<SparseTensor<'static>, FormatError> {
    if !format.supports_ndim(coo.ndim()) {
        return Err(FormatError::UnsupportedOrder {
            format: format.to_string(),
            ndim: coo.ndim(),
        });
    }
    match format {
        Format::Dense => {
            let total: usize = coo.shape.iter().product();
            let mut values = vec![0.0; total];
            for e in 0..coo.nnz() {
                let mut off = 0;
                for (&c, &d) in coo.coord(e).iter().zip(&coo.shape) {
                    off = off * d + c;
                }
                values[off] = coo.values[e];
            }
            let axes = coo
                .shape
                .iter()
                .map(|&d| AxisStorage::dense_fixed(d))
                .collect();
            Ok(SparseTensor {
                structure: Arc::new(Structure {
                    format: Format::Dense,
                    shape: coo.shape.clone(),
                    axes,
                }),
                values: Values::from_f64(&values, dtype),
            })
        }
        Format::Csr => {
            let (m, n) = (coo.shape[0], coo.shape[1]);
            let mut indptr = vec![0usize; m + 1];
            for e in 0..coo.nnz() {
                indptr[coo.coord(e)[0] + 1] += 1;
            }
            for i in 0..m {
                indptr[i + 1] += indptr[i];
            }
            let indices: Vec<usize> = (0..coo.nnz()).map(|e| coo.coord(e)[1]).collect();
            let it = IndexType::for_max(coo.nnz().max(n) as u64);
            let col = AxisStorage {
                kind: AxisKind::SparseVariable,
                parent: Some(0),
                length: n,
                npos: coo.nnz(),
                nnz_per_parent: None,
                indptr: Some(IndexArray::from_usizes(&indptr, it)),
                indices: Some(IndexArray::from_usizes(&indices, it)),
                unique: true,
            };
            Ok(SparseTensor {
                structure: Arc::new(Structure {
                    format: Format::Csr,
                    shape: coo.shape.clone(),
                    axes: vec![AxisStorage::dense_fixed(m), col],
                }),
                values: Values::from_f64(&coo.values, dtype),
            })
        }
        other => Err(FormatError::Other(format!(
            "conversion to `{other}` is not available yet"
        ))),
    }
}

/// The canonical COO form of `t`.
pub fn to_coo(t: &SparseTensor<'_>) -> Result<CooTensor, FormatError> {
    let s = &t.structure;
    let mut coo = CooTensor::empty(s.shape.clone());
    match &s.format {
        Format::Dense => {
            let total: usize = s.shape.iter().product();
            for off in 0..total {
                let v = t.values.get_f64(off);
                if v != 0.0 {
                    let mut rem = off;
                    let mut c = vec![0; s.shape.len()];
                    for (k, &d) in s.shape.iter().enumerate().rev() {
                        c[k] = rem % d;
                        rem /= d;
                    }
                    coo.coords.extend(c);
                    coo.values.push(v);
                }
            }
        }
        Format::Csr => {
            let col = &s.axes[1];
            for i in 0..s.shape[0] {
                let range = col.positions(Some(crate::Pos(i)));
                for p in range.clone() {
                    coo.coords.push(i);
                    coo.coords
                        .push(col.coordinate(crate::Pos(p), range.start).0);
                    coo.values.push(t.values.get_f64(p));
                }
            }
        }
        other => {
            return Err(FormatError::Other(format!(
                "conversion from `{other}` is not available yet"
            )))
        }
    }
    Ok(coo)
}
