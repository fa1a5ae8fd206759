//! The static rule: the choice when neither the tuning database nor the selector has
//! one. It encodes what measurements on the project's benchmark suite showed: `rowwise`
//! wins on CPUs for SpMM, SDDMM and SpMV; in SpMV its masked vector blocks (the default)
//! pay on rows whose lengths vary, the in-order loop on nearly constant short rows
//! (stencils, bands: coefficient of variation below 0.1), where four scalar partial sums
//! pay when the rows are not too short (4 or more non-zeros); attention masks whose rows
//! are runs of 32 columns run SpMV fastest from one-row blocks of 32 (when formats may
//! change). An SpMM operand whose aligned 8 × 8 (or 4 × 4) blocks are at least 75 % full
//! is stored in blocks when it may change format, and so is an SpMV operand whose 8 × 8
//! blocks are at least 30 % full (`bsr:4x4` where 4 × 4 blocks are much fuller), and an
//! SDDMM operand whose
//! 16 × 16 (or, from a width of 64, 8 × 8) blocks are ([`block_format`], consulted before
//! the selector). Programs the selector does not
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

/// The smallest aligned-block fill at which [`block_format`] stores an SpMM operand in
/// blocks.
pub const BLOCK_RULE_FILL: f64 = 0.75;

/// The smallest aligned 8 × 8 fill at which [`block_format`] stores an SpMV operand in
/// blocks.
pub const SPMV_BLOCK_RULE_FILL: f64 = 0.3;

/// The smallest aligned 4 × 4 fill at which [`block_format`] stores an SpMV operand as
/// `bsr:4x4`, where that fill is also [`SPMV_SMALL_BLOCK_GAIN`] times the 8 × 8 fill.
pub const SPMV_BLOCK_RULE_FILL_4X4: f64 = 0.35;

/// How much fuller 4 × 4 blocks must be than 8 × 8 ones for SpMV to take the smaller
/// block: its 16-byte vectors cost more instructions per value than 8 × 8's 32-byte ones.
pub const SPMV_SMALL_BLOCK_GAIN: f64 = 1.25;

/// A block format for the sparse operand of an SpMM whose aligned blocks are nearly full
/// (attention masks of bands, windows and global blocks; block-pruned weights), when the
/// operand may change format: `bsr:8x8` where 8 × 8 blocks are at least
/// [`BLOCK_RULE_FILL`] full, else `bsr:4x4` where 4 × 4 blocks are; `None` otherwise.
///
/// It is consulted before the selector, whose corpus holds few operands with full
/// blocks (and whose SDDMM labels hold no block candidate). Measured with `rowwise` (register tiles over
/// the block rows), two threads, K = 32 / 128, time against CSR's: BigBird (fill 100 %)
/// 0.34 / 0.40, Longformer (96 %) 0.48 / 0.46, a causal window (97 %) 0.31 / 0.38, the
/// fixed sparse transformer (98 %) 0.35 / 0.46; below the threshold blocks stop paying:
/// the strided sparse transformer (4 × 4 fill 50 %) 0.58 / 0.89, 50 %-pruned DLMC
/// weights 0.64–1.11, 70 %-pruned 1.08–1.44, 80 %-pruned 1.39–2.0 (`bench/README.md`).
///
/// An SpMV operand of f32 or f64 values is stored as `bsr:8x8` where its aligned 8 × 8
/// blocks are at least [`SPMV_BLOCK_RULE_FILL`] full: `rowwise` keeps a block row's partial sums in vector
/// registers across its blocks (one vector of 8 f32 per row of the block, read with
/// contiguous loads of the values and of `x`), so a padded zero costs 4 bytes against
/// CSR's 8 bytes and scalar gather per non-zero. Measured with `rowwise`, two threads,
/// f32, time against CSR's (medians of 50 runs, two passes, `bench/README.md`): a causal
/// window 0.16-0.17, the fixed sparse transformer 0.13-0.21, Longformer 0.29-0.30, BigBird
/// 0.42 (8 × 8 fill 96-100 %); 50 %-pruned DLMC weights 0.31-0.40; the strided sparse
/// transformer (30 %) 0.85, a 70 %-pruned weight (30 %) 0.63-0.74, a variationally pruned
/// one (35 %) 0.59-0.62; at a fill of 20 % 0.83-0.95 on two 80 %-pruned weights but 2.9-3.1
/// on the ResNet-50 classifier, at 10 % 1.5-1.6. Where 4 × 4 blocks are at least
/// [`SPMV_BLOCK_RULE_FILL_4X4`] full and 1.25 times fuller than 8 × 8 ones, `bsr:4x4`
/// moves fewer padded zeros: the strided sparse transformer (4 × 4 fill 50 %, 8 × 8 30 %)
/// ran `bsr:4x4` in 0.42-0.51 of CSR's time and `bsr:8x8` in 0.85; where both fills are
/// alike (the masks, the pruned weights) `bsr:8x8` was the faster by 1.1-1.3×.
///
/// An SDDMM operand is stored in blocks on the same condition on hosts of the `avx512`
/// vector class (`isa`, [`crate::target::isa_class`]), at widths that are
/// multiples of 8 (the register tile of SDDMM over blocks runs pairs of block rows
/// against groups of 8 block columns, one vector of 8 lanes of `k` at a time; a 4 × 4
/// block row is too narrow for it): `bsr:16x16` from a width of 32, `bsr:8x8` from 64
/// (at 32 its many small blocks cost as much as they save). Measured with `rowwise`,
/// two threads, time against CSR's at K = 32 / 128 (medians; this host's speed drifts
/// between runs): BigBird (16 × 16 fill 100 %) 0.65–0.92 / 0.56–0.62, Longformer
/// (92 %) 0.77–0.86 / 0.75–0.76, a causal window (94 %) 0.93 / 0.69, with `bsr:16x16`;
/// the fixed sparse transformer (16 × 16 fill 59 %, 8 × 8 98 %) with `bsr:8x8`
/// 1.02–1.28 / 0.40–0.87. Where blocks are half full (the strided sparse transformer,
/// 50 %-pruned DLMC weights) CSR wins at both widths. On an AVX2 host (8-lane vectors,
/// 16 registers) the same kernels lost to CSR on every attention mask at both widths
/// (`bsr:16x16` or `bsr:8x8` against CSR's time, in `sparsile tune eval`'s exhaustive
/// search, two threads: 1.09-1.20 at K = 32, 1.28-1.49 at K = 128), so there the
/// selector, whose labels hold the block candidates, decides alone.
pub fn block_format(
    op: Operator,
    features: &Features,
    format: &str,
    other_formats: bool,
    isa: &str,
) -> Option<Candidate> {
    if !other_formats || format != "csr" {
        return None;
    }
    let get = |name: &str| features.get(name).unwrap_or(0.0);
    let blocks: &[(&str, &str)] = match op {
        Operator::Spmm => &[("fill_8x8", "bsr:8x8"), ("fill_4x4", "bsr:4x4")],
        // f16/bf16 values: `rowwise` refuses blocks of several rows in SpMV.
        Operator::Spmv if get("dtype_bytes") < 4.0 => return None,
        Operator::Spmv => {
            let (fill4, fill8) = (get("fill_4x4"), get("fill_8x8"));
            let format =
                if fill4 >= SPMV_BLOCK_RULE_FILL_4X4 && fill4 >= SPMV_SMALL_BLOCK_GAIN * fill8 {
                    "bsr:4x4"
                } else if fill8 >= SPMV_BLOCK_RULE_FILL {
                    "bsr:8x8"
                } else {
                    return None;
                };
            return Some(Candidate::new(format, "rowwise"));
        }
        Operator::Sddmm if isa != "avx512" => return None,
        Operator::Sddmm => {
            let width = get("log2_width").exp2().round() as i64;
            match width {
                w if w % 8 != 0 || w < 32 => return None,
                w if w < 64 => &[("fill_16x16", "bsr:16x16")],
                _ => &[("fill_16x16", "bsr:16x16"), ("fill_8x8", "bsr:8x8")],
            }
        }
        _ => return None,
    };
    blocks
        .iter()
        .find(|(f, _)| get(f) >= BLOCK_RULE_FILL)
        .map(|(_, b)| Candidate::new(*b, "rowwise"))
}

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

#[cfg(test)]
mod tests {
    use super::{block_format, BLOCK_RULE_FILL, SPMV_BLOCK_RULE_FILL, SPMV_SMALL_BLOCK_GAIN};
    use crate::features::{Csr, Features};
    use crate::op::Operator;

    /// An `n x n` matrix of full `b x b` blocks on the diagonal, plus `extra` scattered
    /// non-zeros per row (outside the blocks).
    fn blocks(n: usize, b: usize, extra: usize) -> (Vec<i64>, Vec<i64>) {
        let (mut indptr, mut indices) = (vec![0i64], Vec::new());
        for i in 0..n {
            let start = i / b * b;
            let mut row: Vec<i64> = (start..start + b).map(|j| j as i64).collect();
            for e in 0..extra {
                row.push(((start + b + 7 * e + 3) % n) as i64);
            }
            row.sort_unstable();
            row.dedup();
            indices.extend(row);
            indptr.push(indices.len() as i64);
        }
        (indptr, indices)
    }

    fn features(op: Operator, indptr: &[i64], indices: &[i64], n: usize) -> Features {
        let csr = Csr {
            rows: n,
            cols: n,
            indptr,
            indices,
        };
        Features::of(&csr, op, 32, 2, 4)
    }

    #[test]
    fn full_blocks_take_a_block_format_for_spmm_and_sddmm() {
        let (p, j) = blocks(256, 16, 0);
        let f = features(Operator::Spmm, &p, &j, 256);
        assert_eq!(
            block_format(Operator::Spmm, &f, "csr", true, "avx512").map(|c| c.id()),
            Some("bsr:8x8/rowwise".to_string())
        );
        // The operand keeps its format, or is not CSR, or the operator is not SpMM.
        assert!(block_format(Operator::Spmm, &f, "csr", false, "avx512").is_none());
        assert!(block_format(Operator::Spmm, &f, "bsr:4x4", true, "avx512").is_none());
        // SDDMM: 16 x 16 blocks first, at widths the tile fills.
        let g = features(Operator::Sddmm, &p, &j, 256);
        assert_eq!(
            block_format(Operator::Sddmm, &g, "csr", true, "avx512").map(|c| c.id()),
            Some("bsr:16x16/rowwise".to_string())
        );
        let csr = Csr {
            rows: 256,
            cols: 256,
            indptr: &p,
            indices: &j,
        };
        for width in [8, 12, 16, 20, 36] {
            let narrow = Features::of(&csr, Operator::Sddmm, width, 2, 4);
            assert!(block_format(Operator::Sddmm, &narrow, "csr", true, "avx512").is_none());
        }
        // Full 8 x 8 blocks, a quarter-full 16 x 16: blocks of 8 from a width of 64.
        let (p8, j8) = blocks(256, 8, 0);
        let csr8 = Csr {
            rows: 256,
            cols: 256,
            indptr: &p8,
            indices: &j8,
        };
        let at = |width| {
            let f = Features::of(&csr8, Operator::Sddmm, width, 2, 4);
            block_format(Operator::Sddmm, &f, "csr", true, "avx512").map(|c| c.format)
        };
        assert_eq!(at(32), None);
        assert_eq!(at(64), Some("bsr:8x8".to_string()));
        assert_eq!(at(128), Some("bsr:8x8".to_string()));
        // SpMV: 8 x 8 blocks from a fill of 30 % (here 100 %), on either host.
        for isa in ["avx512", "avx2"] {
            assert_eq!(
                block_format(Operator::Spmv, &f, "csr", true, isa).map(|c| c.id()),
                Some("bsr:8x8/rowwise".to_string())
            );
        }
        // On an AVX2 host SDDMM keeps CSR; SpMM still takes blocks.
        assert!(block_format(Operator::Sddmm, &g, "csr", true, "avx2").is_none());
        assert_eq!(
            block_format(Operator::Spmm, &f, "csr", true, "avx2").map(|c| c.id()),
            Some("bsr:8x8/rowwise".to_string())
        );
        // 4 x 4 blocks full, 8 x 8 blocks a quarter full: the smaller block.
        let (p, j) = blocks(256, 4, 0);
        let f = features(Operator::Spmm, &p, &j, 256);
        assert!(f.get("fill_8x8").unwrap() < BLOCK_RULE_FILL);
        assert_eq!(
            block_format(Operator::Spmm, &f, "csr", true, "avx512").map(|c| c.format),
            Some("bsr:4x4".to_string())
        );
        // Scattered non-zeros beside the blocks bring the fill below the threshold.
        let (p, j) = blocks(256, 4, 8);
        let f = features(Operator::Spmm, &p, &j, 256);
        assert!(block_format(Operator::Spmm, &f, "csr", true, "avx512").is_none());
    }

    #[test]
    fn spmv_takes_blocks_from_a_lower_fill_than_spmm() {
        // 8 x 8 diagonal blocks whose even rows are full: 8 x 8 and 4 x 4 fills of 50 %.
        let (mut p, mut j) = (vec![0i64], Vec::new());
        for i in 0..256usize {
            if i % 2 == 0 {
                j.extend((i / 8 * 8..i / 8 * 8 + 8).map(|c| c as i64));
            }
            p.push(j.len() as i64);
        }
        let f = features(Operator::Spmv, &p, &j, 256);
        let fill = f.get("fill_8x8").unwrap();
        assert!(
            (SPMV_BLOCK_RULE_FILL..BLOCK_RULE_FILL).contains(&fill),
            "{fill}"
        );
        assert!(f.get("fill_4x4").unwrap() < SPMV_SMALL_BLOCK_GAIN * fill);
        assert_eq!(
            block_format(Operator::Spmv, &f, "csr", true, "avx2").map(|c| c.id()),
            Some("bsr:8x8/rowwise".to_string())
        );
        assert!(block_format(Operator::Spmv, &f, "csr", false, "avx2").is_none());
        // f16 values: `rowwise` keeps no partial sums of block rows for them.
        let csr = Csr {
            rows: 256,
            cols: 256,
            indptr: &p,
            indices: &j,
        };
        let half = Features::of(&csr, Operator::Spmv, 1, 2, 2);
        assert!(block_format(Operator::Spmv, &half, "csr", true, "avx2").is_none());
        // Diagonal 4 x 4 blocks: full, and twice as full as 8 x 8 blocks: the smaller.
        let (p, j) = blocks(256, 4, 0);
        let f = features(Operator::Spmv, &p, &j, 256);
        assert_eq!(
            block_format(Operator::Spmv, &f, "csr", true, "avx2").map(|c| c.id()),
            Some("bsr:4x4/rowwise".to_string())
        );
        // Diagonal 2 x 2 blocks: 4 x 4 blocks half full, 8 x 8 ones a quarter (below
        // their threshold): the smaller block.
        let (p, j) = blocks(256, 2, 0);
        let f = features(Operator::Spmv, &p, &j, 256);
        assert!(f.get("fill_8x8").unwrap() < SPMV_BLOCK_RULE_FILL);
        assert_eq!(
            block_format(Operator::Spmv, &f, "csr", true, "avx2").map(|c| c.format),
            Some("bsr:4x4".to_string())
        );
        // Diagonal 1 x 1 blocks (the identity): no block pays.
        let (p, j) = blocks(256, 1, 0);
        let f = features(Operator::Spmv, &p, &j, 256);
        assert!(block_format(Operator::Spmv, &f, "csr", true, "avx2").is_none());
    }
}
