//! The parts of [`DecomposeRule::Tiles`]: dense tiles at several nested levels, chosen by
//! cost, and the rest.
//!
//! Level `l` cuts the matrix into aligned `r_l × c_l` blocks; each level's block sides
//! divide the previous level's, so every block of level `l + 1` lies in one block of
//! level `l`. Storing a block whole as a dense tile costs `cost_l`, in units of one
//! scattered entry (the rest, `csr`, costs 1 a non-zero); leaving it costs what its
//! sub-blocks cost at the next level, and at the last level the number of its entries.
//! Computed bottom-up, every block takes the cheaper of the two, ties to the tile:
//! ```text
//! best_l(b) = min(cost_l, Σ best_{l+1}(b') over the non-empty sub-blocks b' of b)
//! best_last(b) = min(cost_last, entries(b))
//! ```
//! so the selection is the exact minimum of the summed costs over all nested choices
//! (what STile's greedy selection with withdraw approximates: a larger tile replaces the
//! smaller tiles and entries it covers when it costs no more). An entry goes to the
//! part of the outermost level whose block chose to be a tile, part `l + 1`,
//! `bsr:r_lxc_l` (missing cells stored as zeros), or to part 0, `csr`. Each entry is
//! stored exactly once. A block on the matrix's edge counts its cells outside the matrix
//! as empty.

use std::collections::HashMap;

use sparsile_ir::IndexType;

use super::plan::{Entries, PartPlan};
use super::rule::TileLevel;
use super::{DecomposeError, DecomposeRule};
use crate::Format;

/// Which level (or `levels.len()` for the rest) each entry goes to.
pub(super) fn owners(levels: &[TileLevel], entries: &Entries) -> Vec<usize> {
    let n = levels.len();
    let key = |e: usize, l: usize| {
        let x = entries.coord(e);
        (x[0] / levels[l].r, x[1] / levels[l].c)
    };
    // Per level: each non-empty block's decision (tile or not) and its best cost.
    let mut decide: Vec<HashMap<(usize, usize), bool>> = vec![HashMap::new(); n];
    let mut below: HashMap<(usize, usize), u64> = HashMap::new();
    for e in 0..entries.nnz() {
        *below.entry(key(e, n - 1)).or_default() += 1;
    }
    for l in (0..n).rev() {
        let cost = levels[l].cost as u64;
        let mut above: HashMap<(usize, usize), u64> = HashMap::new();
        for (&(bi, bj), &sum) in &below {
            let tile = cost <= sum;
            decide[l].insert((bi, bj), tile);
            if l > 0 {
                let parent = (
                    bi * levels[l].r / levels[l - 1].r,
                    bj * levels[l].c / levels[l - 1].c,
                );
                *above.entry(parent).or_default() += sum.min(cost);
            }
        }
        below = above;
    }
    (0..entries.nnz())
        .map(|e| (0..n).find(|&l| decide[l][&key(e, l)]).unwrap_or(n))
        .collect()
}

pub(super) fn plan(
    rule: &DecomposeRule,
    levels: &[TileLevel],
    entries: &Entries,
    index_type: IndexType,
) -> Result<Vec<PartPlan>, DecomposeError> {
    entries.require_matrix(rule)?;
    // The rest first, then the levels.
    let part: Vec<usize> = owners(levels, entries)
        .into_iter()
        .map(|l| if l == levels.len() { 0 } else { l + 1 })
        .collect();
    let formats: Vec<Format> = std::iter::once(Format::Csr)
        .chain(levels.iter().map(|l| Format::Bsr { r: l.r, c: l.c }))
        .collect();
    split(rule, entries, &part, &formats, index_type)
}

/// The parts when entry `e` goes to part `part[e]`, part `p` stored as `formats[p]`.
pub(super) fn split(
    rule: &DecomposeRule,
    entries: &Entries,
    part: &[usize],
    formats: &[Format],
    index_type: IndexType,
) -> Result<Vec<PartPlan>, DecomposeError> {
    let mut parts: Vec<Entries> = formats
        .iter()
        .map(|_| Entries {
            shape: entries.shape.clone(),
            coords: Vec::new(),
            offsets: Vec::new(),
        })
        .collect();
    for (e, &p) in part.iter().enumerate() {
        parts[p].coords.extend_from_slice(entries.coord(e));
        parts[p].offsets.push(entries.offsets[e]);
    }
    formats
        .iter()
        .zip(&parts)
        .map(|(f, p)| super::convert_rule::plan(rule, f, p, index_type))
        .collect()
}
