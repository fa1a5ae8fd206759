//! The generic walk over every stored element of a structure, by axis capabilities.

use crate::{Pos, Structure};

/// The value-offset stride of every axis (meaningful for leaf axes; 0 for others),
/// derived from [`Structure::value_offset`] itself.
pub(crate) fn leaf_strides(s: &Structure<'_>) -> Vec<usize> {
    let n = s.axes.len();
    let mut unit = vec![Pos(0); n];
    (0..n)
        .map(|i| {
            if !s.is_leaf(i) {
                return 0;
            }
            unit[i] = Pos(1);
            let stride = s.value_offset(&unit);
            unit[i] = Pos(0);
            stride
        })
        .collect()
}

/// Calls `visit(axis coordinates, value offset)` for every stored element that is not
/// a padding position (sentinel coordinate), in storage order. `s` must be valid.
pub(crate) fn walk_stored(s: &Structure<'_>, mut visit: impl FnMut(&[i64], usize)) {
    // A parentless axis without positions leaves nothing stored; return before looping
    // over the others (which may be long).
    if s.axes.iter().any(|a| a.parent.is_none() && a.npos == 0) {
        return;
    }
    let strides = leaf_strides(s);
    let n = s.axes.len();
    let mut pos = vec![0usize; n];
    let mut crd = vec![0i64; n];
    rec(s, &strides, 0, 0, &mut pos, &mut crd, &mut visit);
}

fn rec(
    s: &Structure<'_>,
    strides: &[usize],
    i: usize,
    offset: usize,
    pos: &mut [usize],
    crd: &mut [i64],
    visit: &mut impl FnMut(&[i64], usize),
) {
    if i == s.axes.len() {
        visit(crd, offset);
        return;
    }
    let axis = &s.axes[i];
    let range = axis.positions(axis.parent.map(|p| Pos(pos[p])));
    for p in range.clone() {
        if axis.is_padding(Pos(p)) {
            continue;
        }
        pos[i] = p;
        crd[i] = axis.coordinate(Pos(p), range.start).0 as i64;
        rec(s, strides, i + 1, offset + p * strides[i], pos, crd, visit);
    }
}
