//! Checked constructor for any structure: axis storage validated against the format's
//! layout.

use std::sync::Arc;

use sparsile_ir::AxisKind;

use super::check::{
    check_compressed_indices, check_fits, check_indices, check_indptr, indptr_ranges,
};
use crate::convert::walk_stored;
use crate::layout::{Layout, SizeSpec};
use crate::{AxisSpec, AxisStorage, Format, FormatError, SparseTensor, Structure, Values};

fn mismatch(
    format: &Format,
    axis: usize,
    field: &'static str,
    found: String,
    expected: String,
) -> FormatError {
    FormatError::AxisMismatch {
        format: format.to_string(),
        axis,
        field,
        found,
        expected,
    }
}

fn eval_size(expr: &crate::MapExpr, shape: &[usize]) -> Result<usize, FormatError> {
    let v = expr
        .eval(&[], &[], shape)
        .ok_or_else(|| FormatError::ShapeOverflow {
            shape: shape.to_vec(),
        })?;
    Ok(v.max(0) as usize)
}

/// Checks kind, parent, `unique`, length and which arrays are present.
fn check_shape_of_axis(
    format: &Format,
    i: usize,
    a: &AxisStorage<'_>,
    spec: &AxisSpec,
    shape: &[usize],
) -> Result<(), FormatError> {
    let m =
        |field, found: String, expected: String| Err(mismatch(format, i, field, found, expected));
    if a.kind != spec.kind {
        return m("kind", format!("{:?}", a.kind), format!("{:?}", spec.kind));
    }
    if a.parent != spec.parent {
        return m(
            "parent",
            format!("{:?}", a.parent),
            format!("{:?}", spec.parent),
        );
    }
    if a.unique != spec.unique {
        return m("unique", a.unique.to_string(), spec.unique.to_string());
    }
    let length = eval_size(&spec.length, shape)?;
    if a.length != length {
        return m("length", a.length.to_string(), length.to_string());
    }
    let wants_indptr = matches!(a.kind, AxisKind::DenseVariable | AxisKind::SparseVariable);
    let wants_indices = matches!(a.kind, AxisKind::SparseFixed | AxisKind::SparseVariable);
    let has = |b: bool| if b { "present" } else { "absent" }.to_string();
    if a.indptr.is_some() != wants_indptr {
        return m("indptr", has(a.indptr.is_some()), has(wants_indptr));
    }
    if a.indices.is_some() != wants_indices {
        return m("indices", has(a.indices.is_some()), has(wants_indices));
    }
    let wants_per = a.kind == AxisKind::SparseFixed;
    if a.nnz_per_parent.is_some() != wants_per {
        return m(
            "nnz_per_parent",
            format!("{:?}", a.nnz_per_parent),
            has(wants_per),
        );
    }
    if let (Some(k), Some(SizeSpec::Expr(e))) = (a.nnz_per_parent, &spec.nnz_per_parent) {
        let expected = eval_size(e, shape)?;
        if k != expected {
            return m("nnz_per_parent", k.to_string(), expected.to_string());
        }
    }
    Ok(())
}

/// Checks positions and arrays of axis `i` (its parent already checked).
fn check_storage(
    format: &Format,
    i: usize,
    a: &AxisStorage<'_>,
    parent_npos: Option<usize>,
) -> Result<(), FormatError> {
    if let Some(arr) = a.indices.as_ref().or(a.indptr.as_ref()) {
        check_fits(i, a.length, arr.index_type())?;
    }
    match a.kind {
        AxisKind::DenseFixed => {
            if a.npos != a.length {
                return Err(mismatch(
                    format,
                    i,
                    "npos",
                    a.npos.to_string(),
                    a.length.to_string(),
                ));
            }
        }
        AxisKind::SparseFixed => {
            let k = a.nnz_per_parent.unwrap_or(0);
            let expected = match parent_npos {
                None => Some(k),
                Some(p) => p.checked_mul(k),
            };
            if expected != Some(a.npos) {
                let expected =
                    expected.map_or("more than can be addressed".into(), |e| e.to_string());
                return Err(mismatch(format, i, "npos", a.npos.to_string(), expected));
            }
        }
        AxisKind::DenseVariable | AxisKind::SparseVariable => {
            let indptr = a.indptr.as_ref().expect("checked present");
            check_indptr(i, indptr, parent_npos.unwrap_or(1), a.npos)?;
            if a.kind == AxisKind::DenseVariable {
                for (parent, range) in indptr_ranges(indptr) {
                    if range.len() > a.length {
                        return Err(FormatError::RangeTooLong {
                            axis: i,
                            parent,
                            count: range.len(),
                            length: a.length,
                        });
                    }
                }
            }
        }
    }
    if let Some(indices) = &a.indices {
        if indices.len() != a.npos {
            return Err(FormatError::LengthMismatch {
                what: format!("indices of axis {i}"),
                found: indices.len(),
                expected: a.npos,
            });
        }
        let order = match (&a.indptr, a.parent, a.nnz_per_parent) {
            (Some(indptr), _, _) => {
                check_compressed_indices(i, indices, a.length, format.stores_sentinel(), indptr)?
            }
            (None, None, _) => check_indices(
                i,
                indices,
                a.length,
                format.stores_sentinel(),
                std::iter::once((0, 0..a.npos)),
            )?,
            (None, Some(_), k) => {
                let k = k.unwrap_or(0);
                let parents = parent_npos.unwrap_or(0);
                check_indices(
                    i,
                    indices,
                    a.length,
                    format.stores_sentinel(),
                    (0..parents).map(move |p| (p, p * k..(p + 1) * k)),
                )?
            }
        };
        order.into_result(i, a.unique)?;
    }
    Ok(())
}

/// With a non-unique axis, positions alone do not keep entries apart: the logical
/// coordinates of the stored elements, in storage order, must strictly increase.
fn check_entries_distinct(t: &SparseTensor<'_>, layout: &Layout) -> Result<(), FormatError> {
    let s = &t.structure;
    let mut previous: Option<Vec<i64>> = None;
    let mut entry = 0usize;
    let mut problem = None;
    walk_stored(s, |crds, _| {
        if problem.is_some() {
            return;
        }
        let logical: Vec<i64> = layout
            .to_logical
            .iter()
            .map(|e| e.eval(crds, &[], &s.shape).unwrap_or(-1))
            .collect();
        if let Some(prev) = &previous {
            if *prev > logical {
                problem = Some(FormatError::UnsortedEntries { entry });
            } else if *prev == logical {
                problem = Some(FormatError::DuplicateCoordinate {
                    coordinate: logical.iter().map(|&x| x.max(0) as usize).collect(),
                    first: entry - 1,
                    second: entry,
                });
            }
        }
        previous = Some(logical);
        entry += 1;
    });
    problem.map_or(Ok(()), Err)
}

/// With an axis that the logical coordinates do not determine (SR-BCRS's column groups),
/// unique indices under each parent still let two groups hold the same coordinate, and
/// storage order is not the logical order: the logical coordinates of the stored
/// elements (padding and rows past the shape left out) must all differ.
fn check_entries_distinct_any_order(
    t: &SparseTensor<'_>,
    layout: &Layout,
) -> Result<(), FormatError> {
    let s = &t.structure;
    let mut entries: Vec<(Vec<i64>, usize)> = Vec::new();
    let mut entry = 0usize;
    walk_stored(s, |crds, _| {
        let logical: Vec<i64> = layout
            .to_logical
            .iter()
            .map(|e| e.eval(crds, &[], &s.shape).unwrap_or(-1))
            .collect();
        let inside = logical
            .iter()
            .zip(&s.shape)
            .all(|(&x, &d)| x >= 0 && (x as u64) < d as u64);
        if inside {
            entries.push((logical, entry));
        }
        entry += 1;
    });
    entries.sort_unstable();
    for pair in entries.windows(2) {
        if pair[0].0 == pair[1].0 {
            return Err(FormatError::DuplicateCoordinate {
                coordinate: pair[0].0.iter().map(|&x| x as usize).collect(),
                first: pair[0].1,
                second: pair[1].1,
            });
        }
    }
    Ok(())
}

/// Stored values of a structure whose axes passed the checks (`None` on overflow).
fn stored_values(axes: &[AxisStorage<'_>]) -> Option<usize> {
    let mut total = 1usize;
    for root in (0..axes.len()).filter(|&i| axes[i].parent.is_none()) {
        let mut cur = root;
        while let Some(child) = (cur + 1..axes.len()).find(|&j| axes[j].parent == Some(cur)) {
            cur = child;
        }
        total = total.checked_mul(axes[cur].npos)?;
    }
    Some(total)
}

impl<'a> SparseTensor<'a> {
    /// A tensor from the storage of each axis, validated against `format.layout(ndim)`:
    /// axis count, kinds, parents, `unique`, lengths, `nnz_per_parent`, position counts,
    /// `indptr` arrays, index ranges (the padding sentinel only for formats that pad,
    /// only at the end of a parent's range), the order of indices under each parent,
    /// and the number of values. Nothing is copied.
    ///
    /// ```
    /// use sparsile_formats::{CooTensor, Format, SparseTensor};
    /// let coo = CooTensor::from_triplets(vec![3, 4], &[(0, 3, 1.0), (2, 0, 2.0)]).unwrap();
    /// let dia = SparseTensor::from_coo(&coo, &Format::Dia).unwrap();
    /// let again = SparseTensor::from_parts(Format::Dia, &[3, 4], dia.structure.axes.clone(),
    ///     dia.values.clone()).unwrap();
    /// assert_eq!(again.to_coo().unwrap(), coo);
    /// ```
    pub fn from_parts(
        format: Format,
        shape: &[usize],
        axes: Vec<AxisStorage<'a>>,
        values: Values<'a>,
    ) -> Result<SparseTensor<'a>, FormatError> {
        let layout = format.layout(shape.len())?;
        if axes.len() != layout.axes.len() {
            return Err(FormatError::AxisCount {
                format: format.to_string(),
                found: axes.len(),
                expected: layout.axes.len(),
            });
        }
        for (i, (a, spec)) in axes.iter().zip(&layout.axes).enumerate() {
            check_shape_of_axis(&format, i, a, spec, shape)?;
            let parent_npos = a.parent.map(|p| axes[p].npos);
            check_storage(&format, i, a, parent_npos)?;
        }
        let expected = stored_values(&axes).ok_or_else(|| FormatError::ShapeOverflow {
            shape: shape.to_vec(),
        })?;
        if values.len() != expected {
            return Err(FormatError::ValuesLength {
                found: values.len(),
                expected,
            });
        }
        let tensor = SparseTensor {
            structure: Arc::new(Structure {
                format,
                shape: shape.to_vec(),
                axes,
            }),
            values,
        };
        if tensor.structure.axes.iter().any(|a| !a.unique) {
            check_entries_distinct(&tensor, &layout)?;
        } else if layout.from_logical.iter().any(Option::is_none) {
            check_entries_distinct_any_order(&tensor, &layout)?;
        }
        Ok(tensor)
    }
}
