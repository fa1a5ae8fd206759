//! Format decomposition: the data movement behind `decompose_format`.
//!
//! A [`DecomposeRule`] splits one tensor into parts, each stored in its own layout
//! ([`DecomposeRule::part_layouts`]: the axes of each part and the index maps between
//! the part's axis coordinates and the logical coordinates). Conversion to another
//! format is the one-part rule [`DecomposeRule::Convert`].
//!
//! Computing the parts happens in two steps:
//! - [`DecomposePlan::new`] reads only the *structure* of the source tensor and builds
//!   every part's structure plus a gather map (for every stored value of the part, the
//!   value offset in the source, or padding). This is the pre-processing that depends on
//!   the sparsity pattern alone; [`DecomposeCache`] keeps plans per pattern.
//! - [`DecomposePlan::gather`] copies the values (in the source's element type) into
//!   each part: one pass over the part's storage, done on every run.
//!
//! Preconditions: the source has no duplicate coordinates (every canonical tensor), and
//! for [`DecomposeRule::Hyb`] it has order 2 or 3 ([`DecomposeRule::Blocks`] and
//! [`DecomposeRule::Tiles`]: order 2). Errors name the rule and the problem.
//!
//! ```
//! use sparsile_formats::decompose::{DecomposePlan, DecomposeRule};
//! use sparsile_formats::{CooTensor, Format, SparseTensor};
//! // Rows of length 1, 3 and 0; hyb(1, 1): buckets of width 1 and 2, the row of
//! // length 3 split over two rows of the width-2 bucket.
//! let coo = CooTensor::from_triplets(vec![3, 4], &[(0, 1, 1.0), (1, 0, 2.0), (1, 2, 3.0), (1, 3, 4.0)]).unwrap();
//! let a = SparseTensor::from_coo(&coo, &Format::Csr).unwrap();
//! let rule = DecomposeRule::Hyb { c: 1, k: 1 };
//! let plan = DecomposePlan::new(&rule, &a.structure).unwrap();
//! let parts = plan.gather(&a.values);
//! assert_eq!(parts.len(), 2);
//! assert_eq!(parts[0].structure.axes[0].indices.as_ref().unwrap().to_usizes(), vec![0]);
//! assert_eq!(parts[1].structure.axes[0].indices.as_ref().unwrap().to_usizes(), vec![1, 1]);
//! assert_eq!(parts[1].values.to_f64_vec(), vec![2.0, 3.0, 4.0, 0.0]);
//! // The parts add up to the source.
//! let sum: Vec<f64> = parts.iter().map(|p| p.to_dense_f64())
//!     .fold(vec![0.0; 12], |acc, d| acc.iter().zip(&d).map(|(x, y)| x + y).collect());
//! assert_eq!(sum, a.to_dense_f64());
//! ```

mod blocks;
mod cache;
mod convert_rule;
mod hyb;
mod plan;
mod rule;
mod tiles;

pub use cache::DecomposeCache;
pub use plan::{DecomposePlan, PartPlan, PADDING};
pub use rule::{DecomposeRule, TileLevel};

use thiserror::Error;

use crate::FormatError;

/// Why a decomposition could not be computed or a rule not understood.
#[derive(Debug, Error)]
pub enum DecomposeError {
    /// The rule's text form (`name(args)`) is not a known rule or has wrong arguments.
    #[error("decomposition rule `{text}`: {reason}")]
    BadRule { text: String, reason: String },
    /// The rule does not apply to a tensor of this order.
    #[error("decomposition rule `{rule}` does not apply to a tensor of order {ndim} (supported: {supported})")]
    UnsupportedOrder {
        rule: String,
        ndim: usize,
        supported: &'static str,
    },
    /// The source tensor could not be read or the target format built.
    #[error("decomposition rule `{rule}`: {source}")]
    Format {
        rule: String,
        #[source]
        source: FormatError,
    },
    /// The source tensor has two stored entries at one coordinate.
    #[error("decomposition rule `{rule}`: the source stores coordinate {coord:?} twice (entries must be unique)")]
    Duplicate { rule: String, coord: Vec<usize> },
}
