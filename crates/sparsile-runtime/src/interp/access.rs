//! Translating the coordinates of a buffer access into positions and a value offset,
//! using only the axis capabilities (`positions`, `coordinate`, `locate`).
//!
//! For each buffer axis in storage order: when the index is the iterator variable bound
//! to that same axis and the iteration's parent position equals the one resolved for
//! the buffer, the iteration's position is used directly; otherwise the coordinate is
//! located under the resolved parent position. On a non-unique axis followed by
//! children (COO), every position of the run of equal coordinates is tried in turn.

use sparsile_formats::{AxisStorage, Crd, Pos, Structure};

/// One index of an access, already evaluated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IndexArg {
    pub crd: i64,
    /// `(position, parent position)` of the iterator variable when the index is the
    /// variable bound to this very axis.
    pub fast: Option<(Pos, Option<Pos>)>,
}

/// Where an access lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// The value offset of the stored element.
    At(usize),
    /// Some coordinate is negative, at least the axis length, or a padding position.
    OutOfRange,
    /// In range but not stored.
    NotStored,
}

/// Resolves `args` (one per axis of `structure`).
pub(crate) fn resolve(structure: &Structure<'_>, args: &[IndexArg]) -> Resolved {
    debug_assert_eq!(args.len(), structure.axes.len());
    for (axis, arg) in structure.axes.iter().zip(args) {
        if arg.crd < 0 || arg.crd as u64 >= axis.length as u64 {
            return Resolved::OutOfRange;
        }
    }
    let mut positions = vec![Pos(0); args.len()];
    if search(&structure.axes, args, 0, &mut positions) {
        Resolved::At(structure.value_offset(&positions))
    } else {
        Resolved::NotStored
    }
}

fn search(axes: &[AxisStorage<'_>], args: &[IndexArg], k: usize, positions: &mut [Pos]) -> bool {
    let Some(axis) = axes.get(k) else {
        return true;
    };
    let parent_pos = axis.parent.map(|j| positions[j]);
    if let Some((pos, iter_parent)) = args[k].fast {
        if iter_parent == parent_pos || axis.parent.is_none() {
            positions[k] = pos;
            return search(axes, args, k + 1, positions);
        }
    }
    // In range: checked by the caller.
    let crd = args[k].crd as usize;
    let Some(first) = axis.locate(parent_pos, Crd(crd)) else {
        return false;
    };
    if axis.unique || k + 1 == axes.len() {
        positions[k] = first;
        return search(axes, args, k + 1, positions);
    }
    let range = axis.positions(parent_pos);
    let mut p = first.0;
    while p < range.end && axis.coordinate(Pos(p), range.start).0 == crd {
        positions[k] = Pos(p);
        if search(axes, args, k + 1, positions) {
            return true;
        }
        p += 1;
    }
    false
}

/// Locates a coordinate path down a chain of axes (each the parent of the next; the
/// first parentless), with backtracking over non-unique axes. Returns the position on
/// the last axis of the chain.
pub(crate) fn locate_chain(chain: &[&AxisStorage<'_>], crds: &[usize]) -> Option<Pos> {
    fn go(
        chain: &[&AxisStorage<'_>],
        crds: &[usize],
        k: usize,
        parent: Option<Pos>,
    ) -> Option<Pos> {
        let Some(axis) = chain.get(k) else {
            return parent;
        };
        let crd = crds[k];
        let first = axis.locate(parent, Crd(crd))?;
        if axis.unique || k + 1 == chain.len() {
            return go(chain, crds, k + 1, Some(first));
        }
        let range = axis.positions(parent);
        let mut p = first.0;
        while p < range.end && axis.coordinate(Pos(p), range.start).0 == crd {
            if let Some(found) = go(chain, crds, k + 1, Some(Pos(p))) {
                return Some(found);
            }
            p += 1;
        }
        None
    }
    go(chain, crds, 0, None)
}
