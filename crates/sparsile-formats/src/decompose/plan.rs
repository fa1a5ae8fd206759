//! [`DecomposePlan`]: every part's structure and its gather map, computed from the
//! source's structure alone; [`DecomposePlan::gather`] fills in the values.

use std::borrow::Cow;
use std::sync::Arc;

use half::{bf16, f16};
use sparsile_ir::{DType, IndexType};

use super::{DecomposeError, DecomposeRule};
use crate::{CooTensor, SparseTensor, Structure, Values};

/// The gather-map entry of a padding slot (its value is 0).
pub const PADDING: usize = usize::MAX;

/// One part: its structure and, per stored value, the source value offset or
/// [`PADDING`].
#[derive(Debug, Clone, PartialEq)]
pub struct PartPlan {
    pub structure: Arc<Structure<'static>>,
    pub gather: Vec<usize>,
}

/// The parts of one decomposition of one sparsity pattern.
#[derive(Debug, Clone, PartialEq)]
pub struct DecomposePlan {
    pub rule: DecomposeRule,
    pub parts: Vec<PartPlan>,
}

/// The source's stored entries in canonical order: logical coordinates (flattened,
/// `ndim` per entry) and value offsets.
pub(super) struct Entries {
    pub shape: Vec<usize>,
    pub coords: Vec<usize>,
    pub offsets: Vec<usize>,
}

impl Entries {
    /// Refuses entries that are not a matrix's, for a rule of matrices only.
    pub fn require_matrix(&self, rule: &DecomposeRule) -> Result<(), DecomposeError> {
        if self.shape.len() == 2 {
            return Ok(());
        }
        Err(DecomposeError::UnsupportedOrder {
            rule: rule.to_string(),
            ndim: self.shape.len(),
            supported: "2",
        })
    }

    pub fn nnz(&self) -> usize {
        self.offsets.len()
    }
    pub fn coord(&self, e: usize) -> &[usize] {
        let n = self.shape.len();
        &self.coords[e * n..(e + 1) * n]
    }
}

impl DecomposePlan {
    /// Plans the decomposition of a tensor with this structure (see the module docs).
    pub fn new(
        rule: &DecomposeRule,
        structure: &Structure<'_>,
    ) -> Result<DecomposePlan, DecomposeError> {
        rule.check()?;
        let entries = entries(rule, structure)?;
        let index_type = source_index_type(structure);
        let parts = match rule {
            DecomposeRule::Convert { .. } => {
                let format = rule.format()?.expect("a conversion has a format");
                vec![super::convert_rule::plan(
                    rule, &format, &entries, index_type,
                )?]
            }
            DecomposeRule::Hyb { c, k } => super::hyb::plan(rule, *c, *k, &entries, index_type)?,
            DecomposeRule::Blocks { r, c, fill } => {
                super::blocks::plan(rule, (*r, *c, *fill), &entries, index_type)?
            }
            DecomposeRule::Tiles { levels } => {
                super::tiles::plan(rule, levels, &entries, index_type)?
            }
        };
        Ok(DecomposePlan {
            rule: rule.clone(),
            parts,
        })
    }

    /// The logical coordinates of every stored value of the source (`structure`, the
    /// planned one), `ndim` numbers per value offset: with the gather maps, where each
    /// entry of each part came from.
    pub fn source_coordinates(
        &self,
        structure: &Structure<'_>,
    ) -> Result<Vec<usize>, DecomposeError> {
        let e = entries(&self.rule, structure)?;
        let n = e.shape.len();
        let mut coords = vec![0; e.offsets.len() * n];
        for (k, &o) in e.offsets.iter().enumerate() {
            coords[o * n..(o + 1) * n].copy_from_slice(e.coord(k));
        }
        Ok(coords)
    }

    /// Every part as a tensor with the values of `values` (the source's), in the
    /// source's element type. `values` must belong to a tensor with the planned
    /// structure.
    pub fn gather(&self, values: &Values<'_>) -> Vec<SparseTensor<'static>> {
        self.parts
            .iter()
            .map(|p| SparseTensor {
                structure: Arc::clone(&p.structure),
                values: gather_values(values, &p.gather),
            })
            .collect()
    }
}

/// The index type of the source's structure arrays (i32 when it has none).
fn source_index_type(s: &Structure<'_>) -> IndexType {
    s.axes
        .iter()
        .find(|a| a.indices.is_some() || a.indptr.is_some())
        .map(|a| a.index_type())
        .unwrap_or(IndexType::I32)
}

/// Reads the source's entries through its canonical COO form, with the value offset
/// (plus one) standing in for each value.
fn entries(rule: &DecomposeRule, s: &Structure<'_>) -> Result<Entries, DecomposeError> {
    let n = s.nnz_stored();
    let marks: Vec<f64> = (1..=n).map(|o| o as f64).collect();
    let marked = SparseTensor {
        structure: Arc::new(s.view()),
        values: Values::from_f64(&marks, DType::F64),
    };
    let coo: CooTensor = marked.to_coo().map_err(|source| match source {
        crate::FormatError::DuplicateCoordinate { coordinate, .. } => DecomposeError::Duplicate {
            rule: rule.to_string(),
            coord: coordinate,
        },
        source => DecomposeError::Format {
            rule: rule.to_string(),
            source,
        },
    })?;
    Ok(Entries {
        shape: coo.shape.clone(),
        offsets: coo.values.iter().map(|&v| v as usize - 1).collect(),
        coords: coo.coords,
    })
}

fn pick<T: Copy>(src: &[T], map: &[usize], zero: T) -> Vec<T> {
    map.iter()
        .map(|&o| if o == PADDING { zero } else { src[o] })
        .collect()
}

/// The values at the offsets of `map` (padding 0), in the type of `values`.
fn gather_values(values: &Values<'_>, map: &[usize]) -> Values<'static> {
    match values {
        Values::F16(v) => Values::F16(Cow::Owned(pick(v, map, f16::ZERO))),
        Values::BF16(v) => Values::BF16(Cow::Owned(pick(v, map, bf16::ZERO))),
        Values::F32(v) => Values::F32(Cow::Owned(pick(v, map, 0.0))),
        Values::F64(v) => Values::F64(Cow::Owned(pick(v, map, 0.0))),
    }
}
