//! The choice for GPU targets: a static rule per operator, and for SDDMM per dense width.
//! There is no tuning database or learned model for GPU kernels yet; the rule was set
//! from measurements of the GPU recipes on an H200 (bench/README.md, "GPU"):
//! - SpMM (and anything not listed, a `max`/`min` reduction included): `gpu_rowwise`, the
//!   dense width over the lanes of a warp (as many lanes as the width, up to 256) with
//!   each output element summed in a register;
//! - SpMV: `gpu_warp`, a warp per row (CSR-vector), combined by a warp reduction;
//! - SDDMM of width `K` at most 32: `gpu_rowwise`, a row's non-zeros over the lanes, each
//!   lane a whole dot product; wider (or unknown) `K`: `gpu_sddmm_vec:balance=rows`, a
//!   warp per row taking its non-zeros one after another, the lanes reading `K` in
//!   `float4`/`double2` vectors, then a warp reduction. (The non-zero-balanced
//!   `gpu_sddmm_vec`, a warp per non-zero, finds each non-zero's row by a binary search,
//!   which cost it 3–10× on the suite's graphs.) Measured on the suite's 9 matrices at
//!   K = 32 and 128 against `torch.sparse.sampled_addmm`: this rule 1.13× (geometric
//!   mean), the non-zero-balanced recipe 0.31×, either of the other two alone 0.77–0.81×;
//! - SpMM with the sparse operand in BSR, blocks whose rows are a multiple of 16 and
//!   columns a multiple of 8, or in SR-BCRS, tiles of a multiple of 16 rows and groups of
//!   a multiple of 8 columns, f16 operands (or bf16 ones) and an f32 output:
//!   `gpu_bsr_mma`, every block (group) an `mma` on tensor cores (exact products, f32
//!   sums).
//!   f32 operands stay on `gpu_rowwise`: tensor cores would round them to tf32, which
//!   only a user can decide (`gpu_bsr_mma:tf32=on`).
//!
//! ```
//! let program = sparsile::compile_notation(
//!     "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n",
//! )
//! .unwrap();
//! assert_eq!(sparsile::auto::gpu_rule(&program), "gpu_warp");
//! ```

use sparsile_ir::coord::{BufferRole, Extent, Program};
use sparsile_ir::{AxisKind, DType};
use sparsile_tune::op::{classify, sums_only, Operator};

/// The GPU recipe for `program` (see the module docs), for the dense width its
/// declarations fix, if any.
pub fn gpu_rule(program: &Program) -> &'static str {
    gpu_rule_for(program, None)
}

/// The GPU recipe for `program` whose dense width is `width` (the inputs'); `None`: the
/// width the program declares, if it fixes one.
pub fn gpu_rule_for(program: &Program, width: Option<usize>) -> &'static str {
    if tensor_core_spmm(program) && sums_only(program) {
        return "gpu_bsr_mma";
    }
    let info = classify(program);
    match info.op {
        Operator::Spmv => "gpu_warp",
        Operator::Sddmm => match width.or_else(|| declared_width(program, &info)) {
            Some(k) if k <= 32 => "gpu_rowwise",
            _ => "gpu_sddmm_vec:balance=rows",
        },
        _ => "gpu_rowwise",
    }
}

/// The GPU recipe for `program` run on `inputs` (by tensor name), whose dense width
/// decides for SDDMM.
pub fn gpu_rule_on(
    program: &Program,
    inputs: &std::collections::HashMap<String, sparsile_formats::SparseTensor<'_>>,
) -> &'static str {
    // The inputs' width as the automatic choice reads it (tensor or buffer names).
    let (_, width) = super::select::operands(&classify(program), inputs);
    gpu_rule_for(program, Some(width))
}

/// The dense width (`info.width`'s axis) when the program's declarations fix it.
fn declared_width(program: &Program, info: &sparsile_tune::op::OpInfo) -> Option<usize> {
    let (buffer, axis) = info.width.as_ref()?;
    let b = program.buffers.values().find(|b| b.name == *buffer)?;
    match &program.axes[*b.axes.get(*axis)?].length {
        Extent::Const(n) => usize::try_from(*n).ok(),
        _ => None,
    }
}

/// Whether `program` is `Y[i,c] = A[i,j] * X[j,c]` with `A` in BSR (blocks of a multiple
/// of 16 rows and of 8 columns) or SR-BCRS (tiles of a multiple of 16 rows, groups of a
/// multiple of 8 columns), `A` and `X` both f16 or both bf16, and `Y` f32: what
/// `gpu_bsr_mma` runs exactly.
fn tensor_core_spmm(program: &Program) -> bool {
    let buffers: Vec<_> = program.buffers.values().collect();
    let inputs: Vec<_> = buffers
        .iter()
        .filter(|b| b.role == BufferRole::Input)
        .collect();
    let outputs: Vec<_> = buffers
        .iter()
        .filter(|b| b.role == BufferRole::Output)
        .collect();
    let ([a, x], [y]) = (inputs.as_slice(), outputs.as_slice()) else {
        return false;
    };
    let (a, x) = if a.axes.len() == 4 { (a, x) } else { (x, a) };
    let block = |axis| match (&program.axes[axis].kind, &program.axes[axis].length) {
        (AxisKind::DenseFixed, Extent::Const(n)) => Some(*n),
        _ => None,
    };
    // SR-BCRS: tile rows, their groups, a group's gathered columns (`per=G`), a tile's
    // rows.
    let group = |axis| {
        let decl = &program.axes[axis];
        match (&decl.kind, &decl.nnz_per_parent) {
            (AxisKind::SparseFixed, Some(Extent::Const(n))) => Some(*n),
            _ => None,
        }
    };
    let blocked = a.axes.len() == 4
        && match program.axes[a.axes[1]].kind {
            AxisKind::SparseVariable => matches!(
                (block(a.axes[2]), block(a.axes[3])),
                (Some(r), Some(c)) if r % 16 == 0 && c % 8 == 0
            ),
            AxisKind::DenseVariable => matches!(
                (group(a.axes[2]), block(a.axes[3])),
                (Some(g), Some(t)) if t % 16 == 0 && g % 8 == 0
            ),
            _ => false,
        };
    let half = matches!(
        (a.dtype, x.dtype),
        (DType::F16, DType::F16) | (DType::BF16, DType::BF16)
    );
    blocked && half && x.axes.len() == 2 && y.axes.len() == 2 && y.dtype == DType::F32
}

#[cfg(test)]
mod tests {
    use super::{gpu_rule, gpu_rule_for};

    fn rule(a: &str, x: &str, y: &str, format: &str) -> &'static str {
        let text = format!(
            "tensor A: {a}[m, n] {format}\ntensor X: {x}[n, k]\ntensor Y: {y}[m, k]\nY[i,c] = A[i,j] * X[j,c]\n"
        );
        gpu_rule(&crate::compile_notation(&text).unwrap())
    }

    #[test]
    fn tensor_cores_take_half_bsr_spmm_with_an_f32_output() {
        assert_eq!(rule("f16", "f16", "f32", "bsr:16x16"), "gpu_bsr_mma");
        assert_eq!(rule("bf16", "bf16", "f32", "bsr:16x8"), "gpu_bsr_mma");
        assert_eq!(rule("f16", "f16", "f32", "bsr:32x32"), "gpu_bsr_mma");
        // Rounding f32 to tf32 is the user's call; blocks an mma does not tile; other
        // formats; a 16-bit output.
        assert_eq!(rule("f32", "f32", "f32", "bsr:16x16"), "gpu_rowwise");
        assert_eq!(rule("f16", "f16", "f32", "bsr:8x8"), "gpu_rowwise");
        assert_eq!(rule("f16", "f16", "f32", "bsr:16x4"), "gpu_rowwise");
        assert_eq!(rule("f16", "f16", "f32", "csr"), "gpu_rowwise");
        assert_eq!(rule("f16", "f16", "f16", "bsr:16x16"), "gpu_rowwise");
    }

    #[test]
    fn sddmm_takes_rows_by_its_width() {
        let text = |k: &str| {
            format!("tensor A: f32[m, n] csr\ntensor X: f32[m, {k}]\ntensor Y: f32[n, {k}]\ntensor O: f32[m, n] csr\nO[i,j] = A[i,j] * X[i,c] * Y[j,c]\n")
        };
        let program = |k: &str| crate::compile_notation(&text(k)).unwrap();
        assert_eq!(gpu_rule(&program("32")), "gpu_rowwise");
        assert_eq!(gpu_rule(&program("64")), "gpu_sddmm_vec:balance=rows");
        assert_eq!(gpu_rule(&program("k")), "gpu_sddmm_vec:balance=rows");
        assert_eq!(gpu_rule_for(&program("k"), Some(16)), "gpu_rowwise");
        assert_eq!(
            gpu_rule_for(&program("k"), Some(128)),
            "gpu_sddmm_vec:balance=rows"
        );
    }

    #[test]
    fn tensor_cores_take_half_srbcrs_spmm_with_an_f32_output() {
        assert_eq!(rule("f16", "f16", "f32", "srbcrs:16x8"), "gpu_bsr_mma");
        assert_eq!(rule("bf16", "bf16", "f32", "srbcrs:16x16"), "gpu_bsr_mma");
        assert_eq!(rule("f16", "f16", "f32", "srbcrs:32x8"), "gpu_bsr_mma");
        // f32 operands (tf32 is the user's call); tiles or groups an mma does not
        // tile; a 16-bit output.
        assert_eq!(rule("f32", "f32", "f32", "srbcrs:16x8"), "gpu_rowwise");
        assert_eq!(rule("f16", "f16", "f32", "srbcrs:8x8"), "gpu_rowwise");
        assert_eq!(rule("bf16", "bf16", "f32", "srbcrs:16x4"), "gpu_rowwise");
        assert_eq!(rule("f16", "f16", "f16", "srbcrs:16x8"), "gpu_rowwise");
    }
}
