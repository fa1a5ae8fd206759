//! The static rule: the choice when neither the tuning database nor the selector has
//! one. It encodes what measurements on the project's benchmark suite showed: `rowwise`
//! wins on CPUs for SpMM, SDDMM and SpMV; in SpMV its masked vector blocks (the default)
//! pay on rows whose lengths vary, the in-order loop on nearly constant short rows
//! (stencils, bands: coefficient of variation below 0.1), where four scalar partial sums
//! pay when the rows are not too short (4 or more non-zeros); attention masks whose rows
//! are runs of 32 columns run SpMV fastest from one-row blocks of 32 (when formats may
//! change). Programs the selector does not
//! classify ([`Operator::Other`]) run `rowwise` too, which schedules every statement row by
//! row: on pubmed (2 threads, one run) it matched the default schedule on an SDDMM-like
//! score, a masked product, row sums and a scaled SpMV (within 5 %), was 2.3x faster on
//! an SpMM scaled per column (270 µs against 618), and 3-6x faster on the multi-statement
//! sparse attention program; where it does not apply, the automatic choice falls back to
//! the default schedule and says so.
//!
//! ```
//! use sparsile_tune::features::{Csr, Features};
//! use sparsile_tune::op::Operator;
//! use sparsile_tune::rule::rule;
//! let csr = Csr { rows: 2, cols: 2, indptr: &[0, 1, 2], indices: &[0, 1] };
//! let f = Features::of(&csr, Operator::Spmm, 32, 2, 4);
//! assert_eq!(rule(Operator::Spmm, &f, "csr", false).id(), "csr/rowwise");
//! assert_eq!(rule(Operator::Other, &f, "csr", false).id(), "csr/rowwise");
//! assert_eq!(rule(Operator::Mttkrp, &f, "csr", false).id(), "csr/default");
//! ```

use crate::features::Features;
use crate::op::Operator;
use crate::space::Candidate;

/// The rule's candidate for `op` on an input in `format` (see the module docs).
pub fn rule(op: Operator, features: &Features, format: &str, other_formats: bool) -> Candidate {
    let get = |name: &str| features.get(name).unwrap_or(0.0);
    match op {
        Operator::Spmv => {
            if other_formats && format == "csr" && get("fill_1x32") >= 0.75 {
                return Candidate::new("bsr:1x32", "rowwise");
            }
            let even = get("row_length_cv") < 0.5 && get("row_length_mean") < 32.0;
            // Nearly constant short rows (stencils, bands): the in-order loop's exit is
            // predicted, and it beats masked blocks.
            let constant = get("row_length_cv") < 0.1 && get("row_length_mean") < 32.0;
            match (constant, even && get("row_length_mean") >= 4.0) {
                (true, true) => Candidate::new(format, "rowwise:masked=off,scalar_sums=4"),
                (true, false) => Candidate::new(format, "rowwise:masked=off"),
                (false, true) => Candidate::new(format, "rowwise:scalar_sums=4"),
                (false, false) => Candidate::new(format, "rowwise"),
            }
        }
        Operator::Spmm | Operator::Sddmm => Candidate::new(format, "rowwise"),
        Operator::Rgms => Candidate::new(format, "rgms_hyb"),
        Operator::Other => Candidate::new(format, "rowwise"),
        _ => Candidate::new(format, "default"),
    }
}
