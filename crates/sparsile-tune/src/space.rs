//! The search space: the candidates of an operator on one input.
//!
//! A [`Candidate`] is a format for the sparse operand and a recipe spec. The space of an
//! operator lists the recipe variants that can matter on a CPU (the `rowwise`
//! parameters that change the loops, all eight DA-SpMM designs, a `hyb(c, k)` grid
//! around `k₀ = ⌈log₂(nnz / rows)⌉`, `default`), in the input's own format; when other
//! formats are allowed, block formats where the features say their blocks are full
//! enough to pay, and ELL where rows are even. A candidate that turns out not to apply
//! (a design the compiler cannot express, a recipe refused by the program) is measured
//! as failed, never an error of the search. The space is versioned
//! ([`SPACE_VERSION`]): records and models of another version are not used.
//!
//! ```
//! use sparsile_tune::features::{Csr, Features};
//! use sparsile_tune::op::Operator;
//! use sparsile_tune::space::{space, Candidate};
//! let csr = Csr { rows: 2, cols: 2, indptr: &[0, 1, 2], indices: &[0, 1] };
//! let f = Features::of(&csr, Operator::Spmv, 1, 2, 4);
//! let cands = space(Operator::Spmv, &f, "csr", false);
//! assert!(cands.contains(&Candidate::new("csr", "rowwise")));
//! assert!(cands.iter().all(|c| c.format == "csr"));
//! ```

use serde::{Deserialize, Serialize};

use crate::features::Features;
use crate::op::Operator;

/// The version of the candidate spaces; bump it when candidates or their meaning change.
/// 2: `rowwise` batches SDDMM's dot products (`batch=on`), and `rowwise:batch=off` is an
/// SDDMM candidate. 3: SpMV's `rowwise` runs rows as masked vector blocks on AVX-512
/// hosts (`masked=on`), and `rowwise:masked=off` is an SpMV candidate. 4: `rowwise` on a
/// block format holds SpMM's output tile in registers across a block row (`register_tile`),
/// so the block candidates of SpMM are another kernel (CSR candidates are unchanged).
/// 5: SDDMM has block candidates (`bsr:RxR` with `rowwise`, pairs of block rows as one
/// register tile), and block formats read their block coordinates unguarded (CSR
/// candidates are unchanged).
pub const SPACE_VERSION: u32 = 5;

/// The version of the kernels the candidates compile to; bump it when the code generated
/// for a candidate changes its speed while the candidates keep their meaning, so that
/// tuning records measured on older kernels are not reused (selector models, which rank
/// candidates by name, stay valid). 1: `rowwise` SpMM over CSR holds each output row in
/// vector registers across the row's non-zeros (`register_tile` on a row of scalars), in
/// passes of up to eight vectors. 2: `rowwise` SpMV over blocks of several rows (`bsr:RxC`,
/// `dbsr:RxC`) keeps a block row's partial sums (`R × C`) in vector registers across its
/// blocks (`rfactor` with a row of partial sums, then `register_tile`). 3: with GCC,
/// kernels keep their short zeroing and copy loops as vector loops
/// (`-fno-tree-loop-distribute-patterns`), which makes `rowwise` SpMM faster on short rows.
pub const KERNEL_VERSION: u32 = 3;

/// The smallest block fill at which a block format is a candidate.
pub const MIN_BLOCK_FILL: f64 = 0.35;

/// The smallest `1 x C` fill at which `bsr:1xC` is a candidate.
pub const MIN_ROW_BLOCK_FILL: f64 = 0.5;

/// One way to run an operator: a format of the sparse operand and a recipe spec.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Candidate {
    pub format: String,
    pub recipe: String,
}

impl Candidate {
    pub fn new(format: impl Into<String>, recipe: impl Into<String>) -> Candidate {
        Candidate {
            format: format.into(),
            recipe: recipe.into(),
        }
    }

    /// `format/recipe`, the candidate's name in tables, records and models.
    pub fn id(&self) -> String {
        format!("{}/{}", self.format, self.recipe)
    }

    /// The candidate named by [`Candidate::id`].
    pub fn from_id(id: &str) -> Option<Candidate> {
        let (format, recipe) = id.split_once('/')?;
        (!format.is_empty() && !recipe.is_empty()).then(|| Candidate::new(format, recipe))
    }

    /// The recipe's name (before its parameters).
    pub fn recipe_name(&self) -> &str {
        self.recipe.split(':').next().unwrap_or(&self.recipe)
    }

    /// The family the cost model fits coefficients for: the recipe name and the kind of
    /// format (`csr`-like, block, ELL).
    pub fn family(&self) -> String {
        let kind = if self.format.starts_with("bsr") || self.format.starts_with("dbsr") {
            "block"
        } else if self.format.starts_with("ell") {
            "ell"
        } else {
            "rows"
        };
        format!("{}/{kind}", self.recipe_name())
    }
}

impl std::fmt::Display for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.id())
    }
}

/// The `hyb` bucket count around `⌈log₂(mean row length)⌉`.
fn hyb_specs(features: &Features) -> Vec<String> {
    let mean = features.get("row_length_mean").unwrap_or(1.0).max(1.0);
    let k0 = (mean.log2().ceil() as i64).clamp(1, 8);
    (k0 - 1..=k0 + 1)
        .filter(|k| (0..=10).contains(k))
        .map(|k| format!("hyb:c=1,k={k}"))
        .collect()
}

/// The candidates of `op` on an input in `format` with `features` (see the module docs).
pub fn space(
    op: Operator,
    features: &Features,
    format: &str,
    other_formats: bool,
) -> Vec<Candidate> {
    let mut recipes: Vec<String> = Vec::new();
    let mut push = |r: &str| recipes.push(r.to_string());
    match op {
        Operator::Spmm => {
            push("rowwise");
            push("rowwise:partition=static");
            push("rowwise:partition=dynamic");
            push("rowwise:prefetch=0");
            push("rowwise:prefetch=16");
            push("rowwise:cache=off");
            for b in ["row", "nnz"] {
                for d in ["row", "col"] {
                    for r in ["seq", "par"] {
                        push(&format!("daspmm:balance={b},dense={d},reduce={r}"));
                    }
                }
            }
            if format == "csr" {
                hyb_specs(features).iter().for_each(|s| push(s));
            }
            push("default");
        }
        Operator::Spmv => {
            push("rowwise");
            push("rowwise:masked=off");
            push("rowwise:masked=off,scalar_sums=4");
            push("rowwise:scalar_sums=4");
            push("rowwise:partition=static");
            push("rowwise:partition=dynamic");
            push("rowwise:reassociate=off");
            push("rowwise:prefetch=0");
            if format == "csr" {
                hyb_specs(features).iter().for_each(|s| push(s));
            }
            push("default");
        }
        Operator::Sddmm => {
            push("rowwise");
            push("rowwise:batch=off");
            push("rowwise:dot=off");
            push("rowwise:partition=static");
            push("rowwise:partition=dynamic");
            push("rowwise:prefetch=0");
            push("rowwise:prefetch=16");
            push("default");
        }
        Operator::Rgms => {
            push("rgms_hyb");
            push("default");
        }
        Operator::SpmmBatched | Operator::SpmvBatched | Operator::Mttkrp | Operator::Other => {
            push("rowwise");
            push("default");
        }
    }
    let mut out: Vec<Candidate> = recipes.iter().map(|r| Candidate::new(format, r)).collect();
    if other_formats && format == "csr" {
        let fill = |name: &str| features.get(name).unwrap_or(0.0);
        // Square blocks full enough to pay.
        let square: Vec<&str> = [
            ("fill_4x4", "bsr:4x4"),
            ("fill_8x8", "bsr:8x8"),
            ("fill_16x16", "bsr:16x16"),
        ]
        .into_iter()
        .filter(|(f, _)| fill(f) >= MIN_BLOCK_FILL)
        .map(|(_, b)| b)
        .collect();
        let mut alt: Vec<&str> = Vec::new();
        if op == Operator::Sddmm {
            // The output takes the operand's blocks: square blocks only, and only
            // `rowwise` (the default schedule computes every padded element one by one).
            out.extend(square.iter().map(|b| Candidate::new(*b, "rowwise")));
        }
        if matches!(op, Operator::Spmm | Operator::Spmv) {
            alt.extend(&square);
            for (f, b) in [("fill_1x16", "bsr:1x16"), ("fill_1x32", "bsr:1x32")] {
                if fill(f) >= MIN_ROW_BLOCK_FILL {
                    alt.push(b);
                }
            }
            if fill("row_length_max_over_mean") <= 1.5 && fill("row_length_mean") >= 1.0 {
                alt.push("ell");
            }
        }
        for f in alt {
            out.push(Candidate::new(f, "rowwise"));
            out.push(Candidate::new(f, "default"));
        }
    }
    out
}
