//! C for the loop-IR features: atomic adds become a compare-and-swap helper call, local
//! buffers stack arrays of each phase call, and partitions are reported by
//! `sparsile_phase_partition`, with a binary search over the indptr for balanced phases.

use sparsile_codegen::{emit_c, PhasePartition};
use sparsile_ir::loops::Func;

fn func(body: &str, extra: &str) -> Func {
    let text = format!(
        "flat func spmv(m, n, nnz) {{
  buffer A: f32[nnz] input values
  buffer x: f32[n] input values
  buffer y: f32[m] output values
  buffer P: i32[m + 1] input indptr(A, 1)
  buffer J: i32[nnz] input indices(A, 1)
{extra}{body}}}
"
    );
    text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn atomic_adds_call_the_cas_helper() {
    let f = func(
        "  for p in 0..nnz parallel {\n    atomic y[J[p] % m] += A[p]\n  }\n",
        "",
    );
    let src = emit_c(&f).unwrap();
    assert!(src
        .code
        .contains("static inline void sparsile_atomic_add_f32(float *p, float v)"));
    assert!(src.code.contains("__atomic_compare_exchange"));
    assert!(
        src.code.contains("sparsile_atomic_add_f32(&y["),
        "{}",
        src.code
    );
}

#[test]
fn local_buffers_are_stack_arrays() {
    let f = func(
        "  for i in 0..m parallel {\n    acc[0] = 0.0\n    y[i] = acc[0]\n  }\n",
        "  buffer acc: f32[4] temp local\n",
    );
    let src = emit_c(&f).unwrap();
    assert!(
        src.code.contains("float acc[4]; /* local */"),
        "{}",
        src.code
    );
    let slot = src.buffer_order.iter().find(|b| b.name == "acc").unwrap();
    assert!(slot.allocated_by_kernel);
}

#[test]
fn partitions_are_reported_per_phase() {
    let f = func(
        "  for i in 0..m parallel(dynamic) {\n    y[i] = 0.0\n  }
  for i2 in 0..m parallel(balanced P) {\n    for p in P[i2]..P[i2 + 1] {\n      y[i2] = y[i2] + A[p]\n    }\n  }
  for i3 in 0..m parallel {\n    y[i3] = y[i3] * 2.0\n  }\n",
        "",
    );
    let src = emit_c(&f).unwrap();
    let parts: Vec<PhasePartition> = src.phases.iter().map(|p| p.partition).collect();
    assert_eq!(
        parts,
        [
            PhasePartition::Dynamic,
            PhasePartition::Balanced,
            PhasePartition::Static
        ]
    );
    assert!(src.code.contains("case 0: return 1;"), "{}", src.code);
    assert!(src.code.contains("case 1: return 2;"), "{}", src.code);
    assert!(
        src.code
            .contains("spmv_phase1_bounds(buffers, params, n, bounds)"),
        "{}",
        src.code
    );
    // The bounds function must not hide the parameter `n` it may read.
    assert!(
        src.code.contains("int64_t n_2, int64_t *bounds)"),
        "{}",
        src.code
    );
}
