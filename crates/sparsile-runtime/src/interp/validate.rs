//! Checks that a tensor's structure arrays are well formed before the interpreter uses
//! them, so that malformed user storage is an error and never a panic.
//!
//! Checked per axis (in storage order): the parent comes earlier; `dense_fixed` axes have
//! `npos == length`; `sparse_fixed` axes have `npos = parent positions × nnz_per_parent`;
//! variable axes have an `indptr` of length `parent positions + 1`, starting at 0,
//! non-decreasing and ending at `npos`; sparse axes have `npos` indices in `0..=length`
//! (`length` marks padding); under every parent position, coordinates increase strictly
//! (unique axes) or weakly (non-unique axes), padding last; `dense_variable` runs are no
//! longer than the axis. Separately, the value count must equal `Structure::nnz_stored`.

use std::sync::Arc;

use sparsile_formats::{AxisStorage, IndexArray, Pos, Structure};
use sparsile_ir::AxisKind;

use super::InterpError;

fn invalid(buffer: &str, position: usize, detail: String) -> InterpError {
    InterpError::InvalidStorage {
        buffer: buffer.to_string(),
        position,
        detail,
    }
}

/// Checks every axis of `structure`, once per structure that owns its arrays (see
/// [`super::validated`]).
pub(crate) fn check_structure(
    buffer: &str,
    structure: &Arc<Structure<'_>>,
) -> Result<(), InterpError> {
    if super::validated::lookup(structure).is_some() {
        return Ok(());
    }
    check_axes(buffer, structure)?;
    let padding = structure.axes.iter().map(has_padding).collect();
    super::validated::remember(structure, padding);
    Ok(())
}

/// Whether a stored coordinate of `axis` equals its length (a padding slot).
pub(crate) fn has_padding(axis: &AxisStorage<'_>) -> bool {
    let length = axis.length as u64;
    match &axis.indices {
        None => false,
        Some(IndexArray::I32(c)) => c.iter().any(|&x| x as u64 >= length),
        Some(IndexArray::I64(c)) => c.iter().any(|&x| x as u64 >= length),
    }
}

/// Checks every axis of `structure`, without the cache.
pub(crate) fn check_axes(buffer: &str, structure: &Structure<'_>) -> Result<(), InterpError> {
    for (i, axis) in structure.axes.iter().enumerate() {
        let parent_npos = match axis.parent {
            Some(p) if p >= i => {
                return Err(invalid(
                    buffer,
                    i,
                    format!("parent axis {p} does not come before it"),
                ))
            }
            Some(p) => Some(structure.axes[p].npos),
            None => None,
        };
        if !super::validate_fast::quick_valid(axis, parent_npos) {
            check_axis(buffer, i, axis, parent_npos)?;
        }
    }
    Ok(())
}

/// Checks that a tensor has one value per stored element of `structure` (already
/// checked by [`check_structure`]).
pub(crate) fn check_value_count(
    buffer: &str,
    structure: &Structure<'_>,
    found: usize,
) -> Result<(), InterpError> {
    let expected = checked_nnz_stored(buffer, structure)?;
    if found != expected {
        return Err(InterpError::ValueCountMismatch {
            buffer: buffer.to_string(),
            expected,
            found,
        });
    }
    Ok(())
}

/// `Structure::nnz_stored` with overflow turned into an error.
pub(crate) fn checked_nnz_stored(
    buffer: &str,
    structure: &Structure<'_>,
) -> Result<usize, InterpError> {
    let mut total = 1usize;
    for i in 0..structure.axes.len() {
        if structure.axes[i].parent.is_some() {
            continue;
        }
        let mut cur = i;
        while let Some(child) =
            (cur + 1..structure.axes.len()).find(|&j| structure.axes[j].parent == Some(cur))
        {
            cur = child;
        }
        total = total.checked_mul(structure.axes[cur].npos).ok_or_else(|| {
            invalid(
                buffer,
                i,
                "the number of stored values overflows".to_string(),
            )
        })?;
    }
    Ok(total)
}

fn read(
    array: &IndexArray<'_>,
    buffer: &str,
    axis: usize,
    name: &str,
    i: usize,
) -> Result<usize, InterpError> {
    let v = array.get_i64(i);
    usize::try_from(v).map_err(|_| invalid(buffer, axis, format!("{name}[{i}] = {v} is negative")))
}

fn check_axis(
    buffer: &str,
    i: usize,
    axis: &AxisStorage<'_>,
    parent_npos: Option<usize>,
) -> Result<(), InterpError> {
    let err = |detail: String| invalid(buffer, i, detail);
    match axis.kind {
        AxisKind::DenseFixed => {
            if axis.npos != axis.length {
                return Err(err(format!(
                    "dense_fixed axis has {} positions but length {}",
                    axis.npos, axis.length
                )));
            }
        }
        AxisKind::SparseFixed => {
            let expected = match (parent_npos, axis.nnz_per_parent) {
                (Some(pn), Some(k)) => pn
                    .checked_mul(k)
                    .ok_or_else(|| err("positions overflow".to_string()))?,
                (Some(_), None) => {
                    return Err(err("sparse_fixed axis has no nnz_per_parent".to_string()))
                }
                (None, Some(k)) => k,
                (None, None) => axis.npos,
            };
            if axis.npos != expected {
                return Err(err(format!(
                    "sparse_fixed axis has {} positions, expected {expected}",
                    axis.npos
                )));
            }
        }
        AxisKind::DenseVariable | AxisKind::SparseVariable => {
            let pn =
                parent_npos.ok_or_else(|| err("variable axis without a parent".to_string()))?;
            let indptr = axis
                .indptr
                .as_ref()
                .ok_or_else(|| err("variable axis without indptr".to_string()))?;
            if indptr.len() != pn + 1 {
                return Err(err(format!(
                    "indptr has length {}, expected {} (parent positions + 1)",
                    indptr.len(),
                    pn + 1
                )));
            }
            let mut prev = 0usize;
            for p in 0..indptr.len() {
                let v = read(indptr, buffer, i, "indptr", p)?;
                if (p == 0 && v != 0) || v < prev || v > axis.npos {
                    return Err(err(format!(
                        "indptr[{p}] = {v} breaks 0 = indptr[0] <= ... <= indptr[last] = {}",
                        axis.npos
                    )));
                }
                if axis.kind == AxisKind::DenseVariable && v - prev > axis.length {
                    return Err(err(format!(
                        "dense_variable run under parent position {} has {} positions, more than the length {}",
                        p - 1,
                        v - prev,
                        axis.length
                    )));
                }
                prev = v;
            }
            if prev != axis.npos {
                return Err(err(format!(
                    "indptr ends at {prev}, expected {} positions",
                    axis.npos
                )));
            }
        }
    }
    if axis.kind.is_sparse() {
        let indices = axis
            .indices
            .as_ref()
            .ok_or_else(|| err("sparse axis without indices".to_string()))?;
        if indices.len() != axis.npos {
            return Err(err(format!(
                "indices has length {}, expected {}",
                indices.len(),
                axis.npos
            )));
        }
        for p in 0..indices.len() {
            let c = read(indices, buffer, i, "indices", p)?;
            if c > axis.length {
                return Err(err(format!(
                    "indices[{p}] = {c} exceeds the axis length {}",
                    axis.length
                )));
            }
        }
        check_order(buffer, i, axis, parent_npos)?;
    }
    Ok(())
}

/// Coordinates under each parent position are sorted (strictly when unique), padding last.
fn check_order(
    buffer: &str,
    i: usize,
    axis: &AxisStorage<'_>,
    parent_npos: Option<usize>,
) -> Result<(), InterpError> {
    let groups: Vec<Option<Pos>> = match parent_npos {
        Some(pn) => (0..pn).map(|p| Some(Pos(p))).collect(),
        None => vec![None],
    };
    for parent in groups {
        let range = axis.positions(parent);
        let mut prev: Option<usize> = None;
        for p in range.clone() {
            let c = axis.coordinate(Pos(p), range.start).0;
            if let Some(q) = prev {
                let bad = if c == axis.length {
                    false
                } else if q == axis.length {
                    true
                } else if axis.unique {
                    c <= q
                } else {
                    c < q
                };
                if bad {
                    return Err(invalid(
                        buffer,
                        i,
                        format!(
                            "coordinates out of order at position {p} (coordinate {c} after {q}{})",
                            if axis.unique { ", axis is unique" } else { "" }
                        ),
                    ));
                }
            }
            prev = Some(c);
        }
    }
    Ok(())
}
