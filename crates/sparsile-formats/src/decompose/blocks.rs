//! The parts of [`DecomposeRule::Blocks`]: the dense blocks of a matrix and the rest.
//!
//! The matrix is cut into aligned `r × c` blocks; a block whose stored entries fill at
//! least `fill` percent of its `r · c` cells is a dense tile and goes, whole, to part 0
//! (`bsr:RxC`: its missing cells become explicit zeros); every other entry goes to
//! part 1 (`csr`). This is the first level of STile's tiling: dense tiles run by the
//! block micro-kernel, the scattered rest as one-dimensional tiles, each entry stored
//! exactly once. A block on the matrix's edge counts its cells outside the matrix as
//! empty.

use std::collections::HashMap;

use sparsile_ir::IndexType;

use super::plan::{Entries, PartPlan};
use super::{DecomposeError, DecomposeRule};
use crate::Format;

pub(super) fn plan(
    rule: &DecomposeRule,
    (r, c, fill): (usize, usize, u32),
    entries: &Entries,
    index_type: IndexType,
) -> Result<Vec<PartPlan>, DecomposeError> {
    entries.require_matrix(rule)?;
    let block_of = |e: usize| {
        let x = entries.coord(e);
        (x[0] / r, x[1] / c)
    };
    let mut counts: HashMap<(usize, usize), usize> = HashMap::new();
    for e in 0..entries.nnz() {
        *counts.entry(block_of(e)).or_default() += 1;
    }
    let dense = |count: usize| count * 100 >= fill as usize * r * c;
    let mut tiles = Entries {
        shape: entries.shape.clone(),
        coords: Vec::new(),
        offsets: Vec::new(),
    };
    let mut rest = Entries {
        shape: entries.shape.clone(),
        coords: Vec::new(),
        offsets: Vec::new(),
    };
    for e in 0..entries.nnz() {
        let to = if dense(counts[&block_of(e)]) {
            &mut tiles
        } else {
            &mut rest
        };
        to.coords.extend_from_slice(entries.coord(e));
        to.offsets.push(entries.offsets[e]);
    }
    let blocks = Format::Bsr { r, c };
    Ok(vec![
        super::convert_rule::plan(rule, &blocks, &tiles, index_type)?,
        super::convert_rule::plan(rule, &Format::Csr, &rest, index_type)?,
    ])
}
