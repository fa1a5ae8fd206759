//! Structure that no input tensor supplies: computed axes (`Union` / `Intersect`),
//! `dense_fixed` axes sized by parameters, and the structures of output and temp buffers.
//!
//! A computed axis `X` over listed axes `L1..Ln` gets, under each position `q` of its
//! parent (all positions, for a parentless axis), the union or intersection of the
//! coordinates stored (padding excluded) in each `Li` under the position of `Li`'s
//! parent chain that has the same coordinates as `q`'s chain. The result is stored in
//! `X`'s declared kind: `sparse_variable` (indptr per parent position, global
//! positions, as in `sparsile_formats::axis`), `sparse_fixed` (every group the same
//! size), `dense_variable` (every group a prefix `0..len`) or `dense_fixed` (every
//! coordinate).
//!
//! An output or temp buffer whose axes are all bound takes that structure. Its format
//! is the format of the tensor its axes come from when they are exactly that tensor's
//! axes in order (an SDDMM output sharing `A`'s axes, the union of two CSR matrices);
//! otherwise it is the first of dense, CSR, DCSR, ragged, ELL, COO, CSF whose layout has
//! the same axis kinds and parents (logical shape = axis lengths), e.g. dense for a
//! dense output, CSR for the `[I, J]` levels of a CSF input.

use std::collections::BTreeMap;
use std::sync::Arc;

use sparsile_formats::{AxisStorage, Format, IndexArray, Pos, Structure};
use sparsile_ir::coord::{AxisStructure, Program};
use sparsile_ir::{AxisId, AxisKind, BufferId};

use super::access::locate_chain;
use super::state::{AxisSource, Bindings, BoundAxis};
use super::InterpError;

/// Computes every `Union`/`Intersect` axis not bound by a tensor, then creates storage
/// for unbound `dense_fixed` axes whose length is known.
pub(crate) fn derive_axes(program: &Program, b: &mut Bindings<'_>) -> Result<(), InterpError> {
    loop {
        let mut progress = false;
        let mut pending: Option<AxisId> = None;
        for (id, decl) in program.axes.iter() {
            if b.axes[id].is_some() {
                continue;
            }
            let (listed, union) = match &decl.structure {
                AxisStructure::Union(l) => (l, true),
                AxisStructure::Intersect(l) => (l, false),
                AxisStructure::Bound => continue,
            };
            let ready = listed.iter().all(|&l| b.axes[l].is_some())
                && decl.parent.is_none_or(|p| b.axes[p].is_some());
            if !ready {
                pending.get_or_insert(id);
                continue;
            }
            let bound = compute_axis(program, b, id, listed, union)?;
            b.axes[id] = Some(bound);
            progress = true;
        }
        if !progress {
            if let Some(id) = pending {
                // Maybe waiting on a dense axis sized by a parameter.
                if !bind_dense_axes(program, b)? {
                    let decl = &program.axes[id];
                    return Err(InterpError::ComputedAxis {
                        axis: decl.name.clone(),
                        detail: "a listed axis or the parent has no structure".to_string(),
                    });
                }
                continue;
            }
            bind_dense_axes(program, b)?;
            return Ok(());
        }
    }
}

/// Gives storage to unbound `dense_fixed` axes whose length is known; returns whether
/// any was bound.
fn bind_dense_axes(program: &Program, b: &mut Bindings<'_>) -> Result<bool, InterpError> {
    let mut any = false;
    for (id, decl) in program.axes.iter() {
        if b.axes[id].is_some()
            || decl.kind != AxisKind::DenseFixed
            || decl.structure != AxisStructure::Bound
        {
            continue;
        }
        let Some(length) = b.extent_value(decl.length) else {
            continue;
        };
        let length =
            usize::try_from(length).map_err(|_| bad_length(program, decl.length, length))?;
        b.axes[id] = Some(BoundAxis {
            source: AxisSource::Computed(Arc::new(AxisStorage::dense_fixed(length))),
            bound_by: format!("the length of axis `{}`", decl.name),
            origin: None,
        });
        any = true;
    }
    Ok(any)
}

fn bad_length(program: &Program, extent: sparsile_ir::coord::Extent, value: i64) -> InterpError {
    let param = match extent {
        sparsile_ir::coord::Extent::Param(p) => program.params[p].name.clone(),
        sparsile_ir::coord::Extent::Const(_) => "(constant)".to_string(),
    };
    InterpError::BadParamValue {
        param,
        value,
        what: "axis length",
    }
}

/// The coordinate paths (root first) of every position of `axis`, indexed by position.
fn coordinate_paths(
    program: &Program,
    b: &Bindings<'_>,
    axis: AxisId,
) -> Result<Vec<Vec<usize>>, InterpError> {
    let chain = program.ancestors(axis);
    let storages: Vec<&AxisStorage<'_>> = chain
        .iter()
        .map(|&a| {
            b.axes[a]
                .as_ref()
                .map(|x| x.storage())
                .ok_or_else(|| InterpError::AxisHasNoStructure {
                    axis: program.axes[a].name.clone(),
                })
        })
        .collect::<Result<_, _>>()?;
    let mut paths = vec![Vec::new(); storages[storages.len() - 1].npos];
    let mut path = Vec::with_capacity(chain.len());
    walk(&storages, 0, None, &mut path, &mut paths);
    Ok(paths)
}

fn walk(
    storages: &[&AxisStorage<'_>],
    k: usize,
    parent: Option<Pos>,
    path: &mut Vec<usize>,
    out: &mut [Vec<usize>],
) {
    let axis = storages[k];
    let range = axis.positions(parent);
    for p in range.clone() {
        path.push(axis.coordinate(Pos(p), range.start).0);
        if k + 1 == storages.len() {
            if let Some(slot) = out.get_mut(p) {
                *slot = path.clone();
            }
        } else {
            walk(storages, k + 1, Some(Pos(p)), path, out);
        }
        path.pop();
    }
}

/// The sorted, de-duplicated coordinates (padding excluded) of `axis` under `parent`.
fn group_coords(axis: &AxisStorage<'_>, parent: Option<Pos>) -> Vec<usize> {
    let range = axis.positions(parent);
    let mut crds: Vec<usize> = range
        .clone()
        .map(|p| axis.coordinate(Pos(p), range.start).0)
        .filter(|&c| c < axis.length)
        .collect();
    crds.sort_unstable();
    crds.dedup();
    crds
}

fn compute_axis<'i>(
    program: &Program,
    b: &mut Bindings<'i>,
    id: AxisId,
    listed: &[AxisId],
    union: bool,
) -> Result<BoundAxis<'i>, InterpError> {
    let decl = &program.axes[id];
    let fail = |detail: String| InterpError::ComputedAxis {
        axis: decl.name.clone(),
        detail,
    };
    let Some(&first) = listed.first() else {
        return Err(fail("lists no axes".to_string()));
    };
    let depth = program.ancestors(id).len();
    let mut length = None;
    for &l in listed {
        if program.ancestors(l).len() != depth {
            return Err(fail(format!(
                "listed axis `{}` has a parent chain of a different depth",
                program.axes[l].name
            )));
        }
        let len = b.axes[l].as_ref().map_or(0, |x| x.storage().length);
        if *length.get_or_insert(len) != len {
            return Err(fail(format!(
                "listed axes have different lengths ({} and {len})",
                length.unwrap_or(0)
            )));
        }
    }
    let length = length.unwrap_or(0);
    let label = format!("computed axis `{}`", decl.name);
    b.unify(program, decl.length, length, &label, &decl.name, "length")?;

    // Coordinate paths of the parent's positions (one empty path when parentless).
    let parent_paths = match decl.parent {
        Some(p) => coordinate_paths(program, b, p)?,
        None => vec![Vec::new()],
    };
    let mut groups: Vec<Vec<usize>> = Vec::with_capacity(parent_paths.len());
    for path in &parent_paths {
        let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
        for &l in listed {
            let chain_ids = program.ancestors(l);
            let storages: Vec<&AxisStorage<'_>> = chain_ids
                .iter()
                .map(|&a| b.axes[a].as_ref().map(|x| x.storage()))
                .collect::<Option<_>>()
                .ok_or_else(|| fail("a listed axis's parent has no structure".to_string()))?;
            let (leaf, parents) = storages.split_last().expect("chain contains the axis");
            let parent_pos = if parents.is_empty() {
                None
            } else {
                match locate_chain(parents, path) {
                    Some(p) => Some(p),
                    None => continue,
                }
            };
            for c in group_coords(leaf, parent_pos) {
                *counts.entry(c).or_insert(0) += 1;
            }
        }
        let keep = |n: usize| union || n == listed.len();
        groups.push(
            counts
                .into_iter()
                .filter(|&(_, n)| keep(n))
                .map(|(c, _)| c)
                .collect(),
        );
    }

    let npos: usize = groups.iter().map(Vec::len).sum();
    let index_type = decl.index_type;
    if (npos.max(length) as u64) > index_type.max_value() {
        return Err(fail(format!(
            "{npos} positions do not fit index type {index_type}"
        )));
    }
    let indptr = || {
        let mut ptr = Vec::with_capacity(groups.len() + 1);
        ptr.push(0usize);
        for g in &groups {
            ptr.push(ptr[ptr.len() - 1] + g.len());
        }
        IndexArray::from_usizes(&ptr, index_type)
    };
    let all_crds = || IndexArray::from_usizes(&groups.concat(), index_type);
    let storage = match decl.kind {
        AxisKind::DenseFixed => {
            if decl.parent.is_some() || groups[0].len() != length {
                return Err(fail(
                    "declared dense_fixed but the result is not every coordinate".to_string(),
                ));
            }
            AxisStorage::dense_fixed(length)
        }
        AxisKind::DenseVariable => {
            if decl.parent.is_none() {
                return Err(fail("dense_variable axis without a parent".to_string()));
            }
            if let Some(q) = groups
                .iter()
                .position(|g| g.iter().enumerate().any(|(i, &c)| i != c))
            {
                return Err(fail(format!(
                    "declared dense_variable but the coordinates under parent position {q} are not a prefix 0..len"
                )));
            }
            AxisStorage {
                kind: AxisKind::DenseVariable,
                parent: None,
                length,
                npos,
                nnz_per_parent: None,
                indptr: Some(indptr()),
                indices: None,
                unique: true,
            }
        }
        AxisKind::SparseVariable => {
            if decl.parent.is_none() {
                return Err(fail("sparse_variable axis without a parent".to_string()));
            }
            AxisStorage {
                kind: AxisKind::SparseVariable,
                parent: None,
                length,
                npos,
                nnz_per_parent: None,
                indptr: Some(indptr()),
                indices: Some(all_crds()),
                unique: true,
            }
        }
        AxisKind::SparseFixed => {
            let per = if decl.parent.is_some() {
                let k = groups.first().map_or(0, Vec::len);
                if let Some(q) = groups.iter().position(|g| g.len() != k) {
                    return Err(fail(format!(
                        "declared sparse_fixed but parent position {q} has {} coordinates, not {k}",
                        groups[q].len()
                    )));
                }
                k
            } else {
                npos
            };
            AxisStorage {
                kind: AxisKind::SparseFixed,
                parent: None,
                length,
                npos,
                nnz_per_parent: Some(per),
                indptr: None,
                indices: Some(all_crds()),
                unique: true,
            }
        }
    };
    if let Some(nnz) = decl.nnz {
        b.unify(program, nnz, storage.npos, &label, &decl.name, "nnz")?;
    }
    if let Some(per) = decl.nnz_per_parent {
        let found = storage.nnz_per_parent.unwrap_or(storage.npos);
        b.unify(program, per, found, &label, &decl.name, "nnz_per_parent")?;
    }
    let origin = b.axes[first].as_ref().and_then(|x| x.origin.clone());
    let names: Vec<&str> = listed
        .iter()
        .map(|&l| program.axes[l].name.as_str())
        .collect();
    Ok(BoundAxis {
        source: AxisSource::Computed(Arc::new(storage)),
        bound_by: format!(
            "the {} of {}",
            if union { "union" } else { "intersection" },
            names.join(", ")
        ),
        origin,
    })
}

/// The first named format whose layout for a tensor of order `axes.len()` has these
/// axis kinds and parents and maps axis coordinates to logical ones unchanged.
fn identity_format(axes: &[AxisStorage<'_>]) -> Option<Format> {
    let ndim = axes.len();
    if ndim == 0 {
        // A scalar: one value, no axes.
        return Some(Format::Dense);
    }
    let ell_width = axes.get(1).and_then(|a| a.nnz_per_parent).unwrap_or(1);
    let candidates = [
        Format::Dense,
        Format::Csr,
        Format::Dcsr,
        Format::Ragged,
        Format::Ell { k: Some(ell_width) },
        Format::Coo,
        Format::Csf,
    ];
    candidates.into_iter().find(|f| {
        let Ok(layout) = f.layout(ndim) else {
            return false;
        };
        layout.axes.len() == ndim
            && layout
                .axes
                .iter()
                .zip(axes)
                .all(|(spec, a)| spec.kind == a.kind && spec.parent == a.parent)
            && layout
                .to_logical
                .iter()
                .enumerate()
                .all(|(d, e)| *e == sparsile_formats::MapExpr::Axis(d))
    })
}

/// The structure of output or temp buffer `buffer` from its bound axes: the structure of
/// the input all of them come from, shared, when they are that owned structure's axes in
/// order; else a new one with copies of their arrays.
pub(crate) fn output_structure(
    program: &Program,
    b: &Bindings<'_>,
    buffer: BufferId,
) -> Result<Arc<Structure<'static>>, InterpError> {
    let decl = &program.buffers[buffer];
    let mut bounds = Vec::with_capacity(decl.axes.len());
    for &a in &decl.axes {
        let Some(bound) = &b.axes[a] else {
            let axis = &program.axes[a];
            if let (AxisKind::DenseFixed, sparsile_ir::coord::Extent::Param(p)) =
                (axis.kind, axis.length)
            {
                return Err(InterpError::UnboundParam {
                    param: program.params[p].name.clone(),
                    needed_for: format!(
                        "the length of axis `{}` of buffer `{}`",
                        axis.name, decl.name
                    ),
                });
            }
            return Err(InterpError::OutputHasNoStructure {
                buffer: decl.name.clone(),
                axis: program.axes[a].name.clone(),
            });
        };
        bounds.push(bound);
    }
    let template = bounds
        .first()
        .and_then(|b| b.origin.as_ref())
        .filter(|(s, _)| {
            s.axes.len() == bounds.len()
                && bounds.iter().enumerate().all(|(k, b)| {
                    b.origin
                        .as_ref()
                        .is_some_and(|(t, i)| Arc::ptr_eq(s, t) && *i == k)
                })
        });
    // Sharable only when every axis is bound to that structure's own axis (not to
    // storage computed from it, as a union or intersection is).
    let direct = template.is_some_and(|(s, _)| {
        bounds.iter().enumerate().all(|(k, b)| {
            matches!(&b.source, AxisSource::Tensor { structure, index }
                if Arc::ptr_eq(structure, s) && *index == k)
        })
    });
    if let Some(shared) = template
        .filter(|_| direct)
        .and_then(|(s, _)| super::validated::shared_owned(s))
    {
        // Every axis is the same axis of one owned structure, in order (SDDMM's output
        // takes its sparse operand's pattern): share it instead of copying its arrays.
        return Ok(shared);
    }
    let axes: Vec<AxisStorage<'static>> = decl
        .axes
        .iter()
        .zip(&bounds)
        .map(|(&a, bound)| {
            let mut storage = bound.storage().view().into_owned();
            storage.parent = program.axes[a]
                .parent
                .and_then(|p| decl.axes.iter().position(|&x| x == p));
            storage
        })
        .collect();
    let (format, shape) = match template {
        Some((s, _)) => (s.format.clone(), s.shape.clone()),
        None => match identity_format(&axes) {
            Some(format) => (format, axes.iter().map(|a| a.length).collect()),
            None => {
                return Err(InterpError::OutputFormatUnknown {
                    buffer: decl.name.clone(),
                })
            }
        },
    };
    Ok(Arc::new(Structure {
        format,
        shape,
        axes,
    }))
}
