//! One test per precondition of `parallel`, `vectorize`, `unroll` and `bound`: each
//! refused call returns its own `ScheduleError` variant naming the loop, its block and
//! (for functions parsed from text) the line of the loop.

use sparsile_ir::loops::Func;
use sparsile_transform::lower_iterations;
use sparsile_transform::schedule::bound::bound;
use sparsile_transform::schedule::parallel::parallel;
use sparsile_transform::schedule::unroll::unroll;
use sparsile_transform::schedule::vectorize::vectorize;
use sparsile_transform::schedule::{LoopRef, ScheduleError};

const SPMV: &str =
    "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n";
const SPMM: &str =
    "tensor A: f64[m, n] csr\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";
const SPMM_CSC: &str =
    "tensor A: f64[m, n] csc\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";
const SPMM_BSR: &str = "tensor A: f64[m, n] bsr:2x2\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";

fn stage2(text: &str) -> Func {
    lower_iterations(&sparsile::compile_notation(text).unwrap()).unwrap()
}

fn at(block: &str, var: &str) -> LoopRef {
    LoopRef {
        block: block.to_string(),
        var: var.to_string(),
    }
}

/// A stage-II function from text (so that errors carry line numbers).
fn parsed(body: &str) -> Func {
    let text = format!(
        "pos func main(m) {{\n  axis I_m = dense_fixed(m)\n  buffer x: f64[I_m] input values\n  buffer y: f64[I_m] output values\n{body}}}\n"
    );
    text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn message(e: &ScheduleError) -> String {
    e.to_string()
}

#[test]
fn parallel_refuses_an_inner_loop() {
    let e = parallel(&stage2(SPMV), &at("y", "j_p")).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::NotOutermostLoop { block, var, enclosing, .. }
            if block == "y" && var == "j_p" && enclosing == "loop `i_2`"),
        "{e:?}"
    );
    assert!(message(&e).contains("inner parallel loops are not supported"));
}

#[test]
fn parallel_refuses_a_loop_in_a_nested_block() {
    let f = parsed("  block outer {\n    block inner {\n      for i in 0..m {\n        y[i] = x[i]\n      }\n    }\n  }\n");
    let e = parallel(&f, &at("inner", "i")).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::NotOutermostLoop { enclosing, span, .. }
            if enclosing == "block `outer`" && span.line == 7),
        "{e:?}"
    );
    assert!(message(&e).contains("line 7"), "{e}");
}

#[test]
fn parallel_refuses_a_vectorized_loop() {
    let f = vectorize(&stage2(SPMV), &at("y.init", "i")).unwrap();
    let e = parallel(&f, &at("y.init", "i")).unwrap_err();
    assert!(
        matches!(
            &e,
            ScheduleError::NotSerial {
                primitive: "parallel",
                kind: "vectorized",
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn parallel_refuses_a_store_through_an_indices_array() {
    // CSC: the outer loop runs over columns, the row of each store is read from memory.
    let f = stage2(SPMM_CSC);
    let outer = first_loop(&f, "C");
    let e = parallel(&f, &at("C", &outer)).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::LoopCarriedAccess(a) if a.primitive == "parallel" && a.buffer == "C"),
        "{e:?}"
    );
    assert!(message(&e).contains("no index position selects"), "{e}");
}

#[test]
fn parallel_refuses_a_reduction_into_memory() {
    let f = parsed("  block sum {\n    for i in 0..m {\n      y[0] = y[0] + x[i]\n    }\n  }\n");
    let e = parallel(&f, &at("sum", "i")).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::LoopCarriedAccess(a)
            if a.access == "y[0]" && a.access_span.line == 7),
        "{e:?}"
    );
    assert!(message(&e).contains("does not depend on `i`"), "{e}");
}

#[test]
fn parallel_refuses_overlapping_affine_indices_and_accepts_disjoint_ones() {
    let overlapping = parsed("  block s {\n    for i in 0..m {\n      for r in 0..3 {\n        y[i * 2 + r] = x[i]\n      }\n    }\n  }\n");
    let e = parallel(&overlapping, &at("s", "i")).unwrap_err();
    assert!(matches!(&e, ScheduleError::LoopCarriedAccess(_)), "{e:?}");
    let disjoint = parsed("  block s {\n    for i in 0..m {\n      for r in 0..2 {\n        y[i * 2 + r] = x[i]\n      }\n    }\n  }\n");
    parallel(&disjoint, &at("s", "i")).unwrap();
}

#[test]
fn parallel_refuses_a_reduction_into_a_local() {
    let f = parsed("  block s {\n    let acc: f64 = 0.0\n    for i in 0..m {\n      acc = acc + x[i]\n    }\n    y[0] = acc\n  }\n");
    let e = parallel(&f, &at("s", "i")).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::LoopCarriedLocal { local, .. } if local == "acc"),
        "{e:?}"
    );
    // The same loop may be vectorized: a local reduction is no memory dependence.
    vectorize(&f, &at("s", "i")).unwrap();
}

#[test]
fn schedules_refuse_an_unknown_loop() {
    let f = stage2(SPMV);
    for e in [
        parallel(&f, &at("y", "q")).unwrap_err(),
        vectorize(&f, &at("nope", "i")).unwrap_err(),
        unroll(&f, &at("y", "i")).unwrap_err(),
        bound(&f, &at("y", "q"), 4).unwrap_err(),
    ] {
        assert!(matches!(e, ScheduleError::UnknownLoop { .. }), "{e:?}");
    }
}

#[test]
fn vectorize_refuses_a_parallel_loop() {
    let f = parallel(&stage2(SPMV), &at("y.init", "i")).unwrap();
    let e = vectorize(&f, &at("y.init", "i")).unwrap_err();
    assert!(
        matches!(
            &e,
            ScheduleError::NotSerial {
                primitive: "vectorize",
                kind: "parallel",
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn vectorize_refuses_an_outer_loop() {
    let e = vectorize(&stage2(SPMM), &at("C", "i_2")).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::NotInnermostLoop { inner, .. } if inner == "j_p"),
        "{e:?}"
    );
}

#[test]
fn vectorize_refuses_a_reduction_into_memory() {
    // SpMV's innermost loop adds into `y[i_2]` in every iteration.
    let e = vectorize(&stage2(SPMV), &at("y", "j_p")).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::LoopCarriedAccess(a) if a.primitive == "vectorize" && a.buffer == "y"),
        "{e:?}"
    );
    assert!(message(&e).contains("does not depend on `j_p`"), "{e}");
}

#[test]
fn unroll_refuses_a_parallel_loop() {
    let f = parallel(&stage2(SPMM_BSR), &at("C_zero", "i")).unwrap();
    let e = unroll(&f, &at("C_zero", "i")).unwrap_err();
    assert!(
        matches!(
            &e,
            ScheduleError::NotSerial {
                primitive: "unroll",
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn unroll_refuses_a_parameter_trip_count() {
    let e = unroll(&stage2(SPMM), &at("C", "k2_2")).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::TripCountNotConstant { lo, hi, .. } if lo == "0" && hi == "k"),
        "{e:?}"
    );
    assert!(message(&e).contains("bound"), "{e}");
}

#[test]
fn unroll_refuses_a_long_loop() {
    let f = bound(&stage2(SPMM), &at("C", "k2_2"), 100).unwrap();
    let e = unroll(&f, &at("C", "k2_2")).unwrap_err();
    assert!(
        matches!(
            &e,
            ScheduleError::TripCountTooLarge {
                count: 100,
                max: 64,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn bound_refuses_a_non_positive_extent() {
    let e = bound(&stage2(SPMM), &at("C", "k2_2"), 0).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::BoundExtentNotPositive { extent: 0, .. }),
        "{e:?}"
    );
}

#[test]
fn bound_refuses_an_extent_below_a_constant_trip_count() {
    let e = bound(&stage2(SPMM_BSR), &at("C", "ii"), 1).unwrap_err();
    assert!(
        matches!(
            &e,
            ScheduleError::BoundBelowTripCount {
                extent: 1,
                trip: 2,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn bound_refuses_an_upper_bound_the_loop_modifies() {
    let f = parsed("  block s {\n    let n: idx = m\n    for i in 0..n {\n      n = n - 1\n      y[i] = x[i]\n    }\n  }\n");
    let e = bound(&f, &at("s", "i"), 8).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::BoundNotInvariant { what, span, .. } if what == "n" && span.line == 7),
        "{e:?}"
    );
}

/// The variable of the first loop of `block`.
fn first_loop(f: &Func, block: &str) -> String {
    use sparsile_ir::loops::Stmt;
    for s in &f.body {
        if let Stmt::Block { name, body, .. } = s {
            if name == block {
                for s in body {
                    if let Stmt::For(l) = s {
                        return f.vars[l.var].name.clone();
                    }
                }
            }
        }
    }
    panic!("no loop in block {block}\n{f}")
}

#[test]
fn parallel_accepts_position_ranges_only_over_indptr_arrays() {
    let body = |kind: &str| {
        format!(
            "pos func main(m, nnz) {{\n  axis I_m = dense_fixed(m)\n  axis I_nnz = dense_fixed(nnz)\n  buffer v: f64[I_nnz] output values\n  buffer P: i32[m + 1] input {kind}\n  block s {{\n    for i in 0..m {{\n      for p in P[i]..P[i + 1] {{\n        v[p] = 1.0\n      }}\n    }}\n  }}\n}}\n"
        )
    };
    let indptr: Func = body("indptr(v, 0)").parse().unwrap();
    parallel(&indptr, &at("s", "i")).unwrap();
    // A scratch array need not be non-decreasing: its ranges may overlap.
    let scratch: Func = body("scratch").parse().unwrap();
    let e = parallel(&scratch, &at("s", "i")).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::LoopCarriedAccess(a) if a.access == "v[p]" && a.access_span.line == 9),
        "{e:?}"
    );
}

#[test]
fn vectorize_refuses_a_load_of_the_next_iterations_element() {
    let shifted =
        parsed("  block s {\n    for i in 0..m - 1 {\n      y[i] = y[i + 1] * 0.5\n    }\n  }\n");
    let e = vectorize(&shifted, &at("s", "i")).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::LoopCarriedAccess(a) if a.primitive == "vectorize" && a.buffer == "y"),
        "{e:?}"
    );
    let same = parsed(
        "  block s {\n    for i in 0..m {\n      y[i] = y[i] * 0.5 + x[i + 1 - 1]\n    }\n  }\n",
    );
    vectorize(&same, &at("s", "i")).unwrap();
}
