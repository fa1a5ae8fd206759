//! Binding tensors to buffers: axis storage to program axes, extents to parameters.
//!
//! A tensor bound to buffer `B[a0, a1, ...]` must have one axis per buffer axis, in the
//! same order (storage order), each of the declared [`AxisKind`](sparsile_ir::AxisKind),
//! with the declared parent (a tensor axis's parent index points at the buffer axis that
//! is the program axis's parent). Every [`Extent`] (length, `nnz`, `nnz_per_parent`)
//! unifies with the stored size: a `Const` must be equal, an unbound `Param` takes the
//! size, a bound one must equal it. An axis already bound by another buffer must be bound
//! to the same storage (the same `Arc<Structure>` axis, or equal arrays).

use std::sync::Arc;

use sparsile_formats::{AxisStorage, IndexArray, Structure};
use sparsile_ir::coord::{Extent, Program};
use sparsile_ir::{AxisId, BufferId};

use super::state::{AxisSource, Bindings, BoundAxis};
use super::InterpError;

/// The first position of `storage` holding the padding sentinel (a coordinate equal to
/// the length), if any.
fn first_padding(storage: &AxisStorage<'_>) -> Option<usize> {
    let length = storage.length as u64;
    match storage.indices.as_ref()? {
        IndexArray::I32(c) => c.iter().position(|&x| x as u64 >= length),
        IndexArray::I64(c) => c.iter().position(|&x| x as u64 >= length),
    }
}

/// Names an axis's parent for messages.
fn parent_name(program: &Program, parent: Option<AxisId>) -> String {
    match parent {
        Some(p) => format!("`{}`", program.axes[p].name),
        None => "none".to_string(),
    }
}

impl<'i> Bindings<'i> {
    /// Unifies `extent` with a stored size. `buffer`/`axis`/`what` name it in errors.
    pub(crate) fn unify(
        &mut self,
        program: &Program,
        extent: Extent,
        found: usize,
        buffer: &str,
        axis: &str,
        what: &'static str,
    ) -> Result<(), InterpError> {
        match extent {
            Extent::Const(declared) => {
                if usize::try_from(declared).ok() != Some(found) {
                    return Err(InterpError::ConstMismatch {
                        buffer: buffer.to_string(),
                        axis: axis.to_string(),
                        what,
                        declared,
                        found,
                    });
                }
            }
            Extent::Param(p) => match self.params[p] {
                Some(bound) => {
                    if usize::try_from(bound).ok() != Some(found) {
                        return Err(InterpError::ParamConflict {
                            buffer: buffer.to_string(),
                            axis: axis.to_string(),
                            what,
                            param: program.params[p].name.clone(),
                            bound,
                            found,
                        });
                    }
                }
                None => {
                    let value = i64::try_from(found).map_err(|_| InterpError::ConstMismatch {
                        buffer: buffer.to_string(),
                        axis: axis.to_string(),
                        what,
                        declared: i64::MAX,
                        found,
                    })?;
                    self.params[p] = Some(value);
                }
            },
        }
        Ok(())
    }

    /// The value of an extent, if known.
    pub(crate) fn extent_value(&self, extent: Extent) -> Option<i64> {
        match extent {
            Extent::Const(c) => Some(c),
            Extent::Param(p) => self.params[p],
        }
    }

    /// Binds the axes of `structure` (already checked by `validate`) to the axes of
    /// `buffer`.
    pub(crate) fn bind_structure(
        &mut self,
        program: &Program,
        buffer: BufferId,
        structure: &Arc<Structure<'i>>,
    ) -> Result<(), InterpError> {
        let decl = &program.buffers[buffer];
        if structure.axes.len() != decl.axes.len() {
            return Err(InterpError::AxisCountMismatch {
                buffer: decl.name.clone(),
                expected: decl.axes.len(),
                found: structure.axes.len(),
            });
        }
        for (k, &axis_id) in decl.axes.iter().enumerate() {
            let axis = &program.axes[axis_id];
            let storage = &structure.axes[k];
            if storage.kind != axis.kind {
                return Err(InterpError::AxisKindMismatch {
                    buffer: decl.name.clone(),
                    axis: axis.name.clone(),
                    position: k,
                    expected: axis.kind.to_string(),
                    found: storage.kind.to_string(),
                });
            }
            let stored_parent = storage.parent.map(|j| decl.axes[j]);
            if stored_parent != axis.parent {
                return Err(InterpError::AxisParentMismatch {
                    buffer: decl.name.clone(),
                    axis: axis.name.clone(),
                    expected: parent_name(program, axis.parent),
                    found: parent_name(program, stored_parent),
                });
            }
            if axis.unique && !storage.unique {
                return Err(InterpError::UniquenessMismatch {
                    buffer: decl.name.clone(),
                    axis: axis.name.clone(),
                });
            }
            let padding_free =
                || super::validated::lookup(structure).is_some_and(|facts| !facts[k]);
            if axis.kind.is_sparse() && !axis.padded && !padding_free() {
                if let Some(position) = first_padding(storage) {
                    return Err(InterpError::PaddingOnUnpaddedAxis {
                        buffer: decl.name.clone(),
                        axis: axis.name.clone(),
                        position,
                    });
                }
            }
            self.unify(
                program,
                axis.length,
                storage.length,
                &decl.name,
                &axis.name,
                "length",
            )?;
            if let Some(nnz) = axis.nnz {
                self.unify(program, nnz, storage.npos, &decl.name, &axis.name, "nnz")?;
            }
            if let Some(per) = axis.nnz_per_parent {
                let found = storage.nnz_per_parent.unwrap_or(storage.npos);
                self.unify(
                    program,
                    per,
                    found,
                    &decl.name,
                    &axis.name,
                    "nnz_per_parent",
                )?;
            }
            match &self.axes[axis_id] {
                Some(bound) => {
                    let same_arc = matches!(&bound.source,
                        AxisSource::Tensor { structure: s, index } if Arc::ptr_eq(s, structure) && *index == k);
                    if !same_arc {
                        if let Some(detail) = storage_difference(bound.storage(), storage) {
                            return Err(InterpError::SharedAxisMismatch {
                                axis: axis.name.clone(),
                                first: bound.bound_by.clone(),
                                second: decl.name.clone(),
                                detail,
                            });
                        }
                    }
                }
                None => {
                    self.axes[axis_id] = Some(BoundAxis {
                        source: AxisSource::Tensor {
                            structure: Arc::clone(structure),
                            index: k,
                        },
                        bound_by: decl.name.clone(),
                        origin: Some((Arc::clone(structure), k)),
                    });
                }
            }
        }
        Ok(())
    }
}

/// The first difference between two axis storages (index arrays compared by value, so
/// i32 and i64 arrays with equal values are equal), or `None` when they are the same.
pub(crate) fn storage_difference(a: &AxisStorage<'_>, b: &AxisStorage<'_>) -> Option<String> {
    if a.kind != b.kind {
        return Some(format!("kind {} vs {}", a.kind, b.kind));
    }
    if a.length != b.length {
        return Some(format!("length {} vs {}", a.length, b.length));
    }
    if a.npos != b.npos {
        return Some(format!("{} positions vs {}", a.npos, b.npos));
    }
    if a.kind == sparsile_ir::AxisKind::SparseFixed && a.nnz_per_parent != b.nnz_per_parent {
        return Some(format!(
            "nnz_per_parent {:?} vs {:?}",
            a.nnz_per_parent, b.nnz_per_parent
        ));
    }
    for (name, x, y) in [
        ("indptr", &a.indptr, &b.indptr),
        ("indices", &a.indices, &b.indices),
    ] {
        match (x, y) {
            (Some(x), Some(y)) => {
                if x.len() != y.len() {
                    return Some(format!("{name} length {} vs {}", x.len(), y.len()));
                }
                if let Some(i) = (0..x.len()).find(|&i| x.get_i64(i) != y.get_i64(i)) {
                    return Some(format!(
                        "{name}[{i}] = {} vs {}",
                        x.get_i64(i),
                        y.get_i64(i)
                    ));
                }
            }
            (None, None) => {}
            _ => return Some(format!("{name} present in only one")),
        }
    }
    None
}
