//! The one-part rule [`DecomposeRule::Convert`]: the source converted to a named format,
//! through the format library's builders. The gather map is found by converting the
//! source with each value replaced by its offset plus one (padding slots come out 0).

use sparsile_ir::{DType, IndexType};

use super::plan::{Entries, PartPlan, PADDING};
use super::{DecomposeError, DecomposeRule};
use crate::{CooTensor, Format, SparseTensor};

pub(super) fn plan(
    rule: &DecomposeRule,
    format: &Format,
    entries: &Entries,
    index_type: IndexType,
) -> Result<PartPlan, DecomposeError> {
    let coo = CooTensor {
        shape: entries.shape.clone(),
        coords: entries.coords.clone(),
        values: entries.offsets.iter().map(|&o| o as f64 + 1.0).collect(),
    };
    let converted = SparseTensor::from_coo_with_index(&coo, format, DType::F64, Some(index_type))
        .map_err(|source| DecomposeError::Format {
        rule: rule.to_string(),
        source,
    })?;
    let gather = converted
        .values
        .to_f64_vec()
        .into_iter()
        .map(|v| if v == 0.0 { PADDING } else { v as usize - 1 })
        .collect();
    Ok(PartPlan {
        structure: converted.structure,
        gather,
    })
}
