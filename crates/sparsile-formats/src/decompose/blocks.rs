//! The parts of [`DecomposeRule::Blocks`]: the dense blocks of a matrix and the rest.
//!
//! The matrix is cut into aligned `r × c` blocks; a block whose stored entries fill at
//! least `fill` percent of its `r · c` cells is a dense tile and goes, whole, to part 0
//! (`bsr:RxC`: its missing cells become explicit zeros); every other entry goes to
//! part 1 (`csr`). This is the first level of STile's tiling: dense tiles run by the
//! block micro-kernel, the scattered rest as one-dimensional tiles, each entry stored
//! exactly once. A block on the matrix's edge counts its cells outside the matrix as
//! empty.

use sparsile_ir::IndexType;

use super::plan::{Entries, PartPlan};
use super::rule::TileLevel;
use super::{DecomposeError, DecomposeRule};
use crate::Format;

/// One level of tiles whose cost is the fill threshold in entries: a block is a tile
/// when it holds at least `fill` % of its cells (`tiles`' choice with one level).
pub(super) fn plan(
    rule: &DecomposeRule,
    (r, c, fill): (usize, usize, u32),
    entries: &Entries,
    index_type: IndexType,
) -> Result<Vec<PartPlan>, DecomposeError> {
    entries.require_matrix(rule)?;
    let cost = (fill as usize * r * c).div_ceil(100).min(u32::MAX as usize) as u32;
    // Owner 0 is the tile level, 1 the rest: the parts' own order.
    let part = super::tiles::owners(&[TileLevel { r, c, cost }], entries);
    super::tiles::split(
        rule,
        entries,
        &part,
        &[Format::Bsr { r, c }, Format::Csr],
        index_type,
    )
}
