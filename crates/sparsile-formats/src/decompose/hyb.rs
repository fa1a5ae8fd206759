//! The parts of [`DecomposeRule::Hyb`] (see its docs for the layout).
//!
//! Entries arrive sorted by logical coordinate, so the entries of one row inside one
//! column partition are contiguous; every such run is appended to the bucket it fits
//! (or, longer than `2^k`, cut into chunks of `2^k` in the widest bucket), rows in
//! increasing order.

use std::sync::Arc;

use sparsile_ir::{AxisKind, IndexType};

use super::plan::{Entries, PartPlan, PADDING};
use super::{DecomposeError, DecomposeRule};
use crate::{AxisStorage, Format, IndexArray, Structure};

/// One bucket being filled.
#[derive(Default)]
struct Bucket {
    /// Row coordinate of every bucket row.
    rows: Vec<usize>,
    /// Bucket rows per slice of the first dimension (order 3).
    per_slice: Vec<usize>,
    cols: Vec<usize>,
    gather: Vec<usize>,
}

/// The smallest `b` with `2^b >= len`, capped at `k`.
fn bucket_of(len: usize, k: u32) -> u32 {
    let b = usize::BITS - (len.max(1) - 1).leading_zeros();
    b.min(k)
}

pub(super) fn plan(
    rule: &DecomposeRule,
    c: usize,
    k: u32,
    entries: &Entries,
    index_type: IndexType,
) -> Result<Vec<PartPlan>, DecomposeError> {
    let ndim = entries.shape.len();
    if !(2..=3).contains(&ndim) {
        return Err(DecomposeError::UnsupportedOrder {
            rule: rule.to_string(),
            ndim,
            supported: "2 or 3",
        });
    }
    let n = entries.shape[ndim - 1];
    let slices = if ndim == 3 { entries.shape[0] } else { 1 };
    let part_width = n.div_ceil(c).max(1);
    let widths = k as usize + 1;
    let mut buckets: Vec<Bucket> = (0..c * widths)
        .map(|_| Bucket {
            per_slice: vec![0; slices],
            ..Bucket::default()
        })
        .collect();
    let mut e = 0;
    let nnz = entries.nnz();
    while e < nnz {
        let key = &entries.coord(e)[..ndim - 1];
        let q = entries.coord(e)[ndim - 1] / part_width;
        let mut end = e + 1;
        while end < nnz
            && &entries.coord(end)[..ndim - 1] == key
            && entries.coord(end)[ndim - 1] / part_width == q
        {
            end += 1;
        }
        let (slice, row) = if ndim == 3 {
            (key[0], key[1])
        } else {
            (0, key[0])
        };
        let b = bucket_of(end - e, k);
        let w = 1usize << b;
        let bucket = &mut buckets[q * widths + b as usize];
        let mut start = e;
        while start < end {
            let stop = (start + w).min(end);
            bucket.rows.push(row);
            bucket.per_slice[slice] += 1;
            for x in start..stop {
                bucket.cols.push(entries.coord(x)[ndim - 1]);
                bucket.gather.push(entries.offsets[x]);
            }
            for _ in stop..start + w {
                bucket.cols.push(n);
                bucket.gather.push(PADDING);
            }
            start = stop;
        }
        e = end;
    }
    Ok(buckets
        .into_iter()
        .enumerate()
        .map(|(p, bucket)| {
            let w = 1usize << (p % widths);
            part(&entries.shape, w, bucket, index_type)
        })
        .collect())
}

fn part(shape: &[usize], w: usize, bucket: Bucket, index_type: IndexType) -> PartPlan {
    let ndim = shape.len();
    let (m, n) = (shape[ndim - 2], shape[ndim - 1]);
    let nrows = bucket.rows.len();
    let rows = IndexArray::from_usizes(&bucket.rows, index_type);
    let cols = AxisStorage {
        kind: AxisKind::SparseFixed,
        parent: Some(ndim - 2),
        length: n,
        npos: nrows * w,
        nnz_per_parent: Some(w),
        indptr: None,
        indices: Some(IndexArray::from_usizes(&bucket.cols, index_type)),
        unique: true,
    };
    let (format, axes) = if ndim == 2 {
        let row_axis = AxisStorage {
            kind: AxisKind::SparseFixed,
            parent: None,
            length: m,
            npos: nrows,
            nnz_per_parent: Some(nrows),
            indptr: None,
            indices: Some(rows),
            unique: false,
        };
        (Format::Coo, vec![row_axis, cols])
    } else {
        let mut indptr = Vec::with_capacity(bucket.per_slice.len() + 1);
        indptr.push(0usize);
        for count in &bucket.per_slice {
            indptr.push(indptr.last().copied().unwrap_or(0) + count);
        }
        let row_axis = AxisStorage {
            kind: AxisKind::SparseVariable,
            parent: Some(0),
            length: m,
            npos: nrows,
            nnz_per_parent: None,
            indptr: Some(IndexArray::from_usizes(&indptr, index_type)),
            indices: Some(rows),
            unique: false,
        };
        (
            Format::Csf,
            vec![AxisStorage::dense_fixed(shape[0]), row_axis, cols],
        )
    };
    PartPlan {
        structure: Arc::new(Structure {
            // The label only selects the identity coordinate map used by `to_coo` /
            // `to_dense_f64`; the axes above are the part's layout.
            format,
            shape: shape.to_vec(),
            axes,
        }),
        gather: bucket.gather,
    }
}

#[cfg(test)]
mod tests {
    use super::bucket_of;

    #[test]
    fn buckets_are_the_narrowest_power_of_two() {
        assert_eq!(bucket_of(1, 5), 0);
        assert_eq!(bucket_of(2, 5), 1);
        assert_eq!(bucket_of(3, 5), 2);
        assert_eq!(bucket_of(4, 5), 2);
        assert_eq!(bucket_of(5, 5), 3);
        assert_eq!(bucket_of(1000, 3), 3);
    }
}
