//! Programs the differential fuzzer (`fuzz/`, target `differential`) found computing
//! wrongly or failing, each checked against the interpreter, natively too when a C
//! compiler runs.

mod support;

use std::collections::HashMap;

use sparsile::formats::{CooTensor, Format, SparseTensor};
use sparsile::ir::coord::Program;
use sparsile::ir::DType;
use sparsile::runtime::{interpret, InterpOptions};
use sparsile::transform::schedule::Trace;
use sparsile::transform::schedule::{LoopRef, Schedule};
use sparsile::Lowered;
use sparsile::RunOptions;
use support::{close, have_compiler};

/// SpMV `y[i] = A[i,j] * x[j]` with `A` stored as `format`, compiled.
fn spmv(format: &str) -> Program {
    let text = format!(
        "tensor A: f64[m, n] {format}\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n"
    );
    sparsile::compile_notation(&text).unwrap()
}

/// `A` (the triplets, stored as `format`) and the dense vector or matrix `name`.
fn operands(
    a: &CooTensor,
    format: &str,
    name: &str,
    shape: &[usize],
    values: &[f64],
) -> HashMap<String, SparseTensor<'static>> {
    let format: Format = format.parse().unwrap();
    HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo_with(a, &format, DType::F64).unwrap(),
        ),
        (
            name.to_string(),
            SparseTensor::dense_from_f64(shape, values, DType::F64).unwrap(),
        ),
    ])
}

/// Checks the output `out` of `program` scheduled by `trace` against the interpreter:
/// stage II and III in the flat interpreter, and compiled when `native` and a C
/// compiler runs. Returns the lowered program.
fn check(
    program: &Program,
    trace: &Trace,
    inputs: &HashMap<String, SparseTensor<'static>>,
    params: &HashMap<String, i64>,
    out: &str,
    native: bool,
) -> Lowered {
    let lowered = sparsile::lower_program_with(program.clone(), trace).unwrap();
    let options = InterpOptions {
        params: params.clone(),
        ..InterpOptions::default()
    };
    let want = interpret(program, inputs, &options).unwrap()[out].to_dense_f64();
    for func in [&lowered.stage2, &lowered.stage3] {
        let got = sparsile::runtime::flat_interp::run(func, program, inputs, &options)
            .unwrap_or_else(|e| panic!("{e}\n{func}"));
        close(&got[out].to_dense_f64(), &want, 1e-12, "flat interpreter");
    }
    if native && have_compiler() {
        let kernel = sparsile::compile_program_with(program.clone(), trace).unwrap();
        let run = RunOptions {
            params: params.clone(),
            ..RunOptions::default()
        };
        let got = kernel.run(inputs, &run).unwrap();
        close(&got[out].to_dense_f64(), &want, 1e-12, "compiled");
    }
    lowered
}

/// `cache_read` of `x` in an ELL SpMV copied `x[j]` for the padding sentinel `j = n` into
/// the local array, one element past the end of `x`, outside the guard the loads had.
#[test]
fn cache_read_under_a_padded_index_stays_in_bounds() {
    let program = spmv("ell");
    let mut sch = Schedule::new(&program);
    sch.func_or_lower().unwrap();
    sch.cache_read(&LoopRef::new("y", "j_p"), "x").unwrap();
    // Rows of different lengths: the short ones are padded with the sentinel n = 2.
    let a =
        CooTensor::from_triplets(vec![4, 2], &[(0, 0, 1.5), (0, 1, 2.0), (2, 1, -1.0)]).unwrap();
    let inputs = operands(&a, "ell", "x", &[2], &[3.0, 5.0]);
    let lowered = check(&program, sch.trace(), &inputs, &HashMap::new(), "y", true);
    assert!(
        lowered.stage2.to_string().contains("j < n {"),
        "{}",
        lowered.stage2
    );
}

/// `cache_write` of `y` at a loop that `bound` extended past the rows (`0..6` for
/// `m = 5`) copied `y[5]` in and out of the local array, outside the loop's guard: a read
/// and a write one past the end of `y`.
#[test]
fn cache_write_at_a_bounded_loop_stays_in_bounds() {
    let program = spmv("ell");
    let mut sch = Schedule::new(&program);
    sch.func_or_lower().unwrap();
    sch.bound(&LoopRef::new("y", "i_2"), 6).unwrap();
    sch.cache_write(&LoopRef::new("y", "i_2"), "y").unwrap();
    let a = CooTensor::from_triplets(
        vec![5, 5],
        &[(0, 0, 1.5), (0, 4, 2.0), (2, 1, -1.0), (4, 3, 0.5)],
    )
    .unwrap();
    let inputs = operands(&a, "ell", "x", &[5], &[3.0, 5.0, 7.0, 11.0, 13.0]);
    check(&program, sch.trace(), &inputs, &HashMap::new(), "y", true);
}

/// A balanced parallel loop weighs iteration `v` with `indptr[v + 1] - indptr[v]`:
/// `bound` extending it past its rows made the partition read past `indptr` (found by the
/// differential fuzzer: `parallel_with(balanced)` then `bound(6)` with `m = 4`). Both
/// orders are now refused.
#[test]
fn bound_and_balanced_partitions_do_not_combine() {
    use sparsile::transform::schedule::partition::LoopPartition;
    use sparsile::transform::ScheduleError;
    let program = spmv("csr");
    let rows = LoopRef::new("y", "i_2");
    let balanced = LoopPartition::Balanced {
        indptr: "A_A_J_indptr".to_string(),
    };
    let mut sch = Schedule::new(&program);
    sch.func_or_lower().unwrap();
    sch.parallel_with(&rows, &balanced).unwrap();
    let e = sch.bound(&rows, 6).unwrap_err();
    assert!(
        matches!(
            e,
            ScheduleError::NotSerial {
                primitive: "bound",
                ..
            }
        ),
        "{e}"
    );
    let mut sch = Schedule::new(&program);
    sch.func_or_lower().unwrap();
    sch.bound(&rows, 6).unwrap();
    let e = sch.parallel_with(&rows, &balanced).unwrap_err();
    assert!(
        matches!(e, ScheduleError::PartitionBufferNotRead { .. }),
        "{e}"
    );
    // Unbounded, the balanced partition is still accepted.
    let mut sch = Schedule::new(&program);
    sch.func_or_lower().unwrap();
    sch.parallel_with(&rows, &balanced).unwrap();
}

/// `cache_read` of `x` in a DIA SpMV copied `x[i + d - (m - 1)]`, negative where a
/// diagonal starts left of the matrix, outside the guard of the loads.
#[test]
fn cache_read_of_a_diagonal_index_stays_in_bounds() {
    let program = spmv("dia");
    let mut sch = Schedule::new(&program);
    sch.func_or_lower().unwrap();
    sch.cache_read(&LoopRef::new("y", "i_2"), "x").unwrap();
    let a =
        CooTensor::from_triplets(vec![4, 3], &[(0, 0, 1.5), (3, 0, 2.0), (1, 2, -1.0)]).unwrap();
    let inputs = operands(&a, "dia", "x", &[3], &[3.0, 5.0, 7.0]);
    check(&program, sch.trace(), &inputs, &HashMap::new(), "y", true);
}

/// `cache_write` of `y` under a loop made parallel with atomic adds (`parallel_reduce`)
/// copied the shared row into a private array and stored it back plainly, losing the
/// other iterations' adds (found by the differential fuzzer on a DIA SpMV): refused.
#[test]
fn cache_write_of_atomically_updated_elements_is_refused() {
    use sparsile::transform::schedule::reduction::ReductionStrategy;
    use sparsile::transform::ScheduleError;
    let program = spmv("dia");
    let mut sch = Schedule::new(&program);
    sch.func_or_lower().unwrap();
    sch.parallel_reduce(&LoopRef::new("y", "d_p"), ReductionStrategy::Atomic)
        .unwrap();
    let e = sch.cache_write(&LoopRef::new("y", "i_2"), "y").unwrap_err();
    assert!(matches!(e, ScheduleError::CacheBuffer { .. }), "{e}");
    assert!(e.to_string().contains("adds to it atomically"), "{e}");
}

/// `rfactor` over a loop `bound` gave one iteration (`for i_2 in 0..1 { if i_2 < m …`)
/// read its variable as the constant 0 and added the partial sum into `y[0]` after the
/// loop, unguarded: past the end of `y` when `m = 0` (found by the differential fuzzer).
/// Such a loop no longer counts as running once, and the call is refused.
#[test]
fn rfactor_over_a_bounded_single_iteration_is_refused() {
    let program = spmv("dia");
    let mut sch = Schedule::new(&program);
    sch.func_or_lower().unwrap();
    sch.bound(&LoopRef::new("y", "i_2"), 1).unwrap();
    assert!(sch
        .rfactor(&LoopRef::new("y", "d_p"), &LoopRef::new("y", "i_2"))
        .is_err());
}

/// `prefetch` of `y` ahead of a loop `bound` extended to 9 iterations (`m = 7`) issued one
/// prefetch per cache line the inner loop reads, the second one at `y[8]`, past the end
/// of `y` and guarded only by the first line's bound (found by the differential fuzzer).
#[test]
fn prefetch_lines_past_the_axis_are_guarded() {
    let program = spmv("dia");
    let mut sch = Schedule::new(&program);
    sch.func_or_lower().unwrap();
    sch.bound(&LoopRef::new("y", "i_2"), 9).unwrap();
    sch.prefetch(&LoopRef::new("y", "d_p"), "y", 6).unwrap();
    let a =
        CooTensor::from_triplets(vec![7, 8], &[(0, 0, 1.5), (6, 7, 2.0), (3, 1, -1.0)]).unwrap();
    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
    let inputs = operands(&a, "dia", "x", &[8], &x);
    check(&program, sch.trace(), &inputs, &HashMap::new(), "y", false);
}

/// `rfactor` of a BSR SpMM's block column loop added the partial sums of the padding row
/// of a 2x2 block into `C` after the loop, outside the `io * 2 + ii < m` guard its
/// updates had: a read and a write one row past the end of `C` when `m` is odd.
#[test]
fn rfactor_keeps_the_guard_of_a_padded_block_row() {
    let text = "tensor A: f64[m, n] bsr:2x2\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";
    let program = sparsile::compile_notation(text).unwrap();
    let mut sch = Schedule::new(&program);
    sch.specialize("k", 5).unwrap();
    sch.func_or_lower().unwrap();
    sch.rfactor(&LoopRef::new("C", "ji"), &LoopRef::new("C", "k2_2"))
        .unwrap();
    for (m, n) in [(1, 1), (3, 4), (5, 3)] {
        let triplets: Vec<(usize, usize, f64)> = (0..m)
            .flat_map(|i| {
                (0..n)
                    .filter(move |j| (i + j) % 2 == 0)
                    .map(move |j| (i, j, 1.0 + (i * n + j) as f64))
            })
            .collect();
        let a = CooTensor::from_triplets(vec![m, n], &triplets).unwrap();
        let b: Vec<f64> = (0..n * 5).map(|v| v as f64 * 0.5 - 3.0).collect();
        let inputs = operands(&a, "bsr:2x2", "B", &[n, 5], &b);
        // m (a padded block row hides it from the shapes) and k (specialised) are given.
        let params = HashMap::from([
            ("m".to_string(), m as i64),
            ("n".to_string(), n as i64),
            ("k".to_string(), 5),
        ]);
        let lowered = check(&program, sch.trace(), &inputs, &params, "C", true);
        // The guard of the updates, and the same guard around the combine.
        let stage2 = lowered.stage2.to_string();
        assert_eq!(
            stage2.matches("if io * 2 + ii < m {").count(),
            2,
            "{stage2}"
        );
    }
}

/// `cache_write` of `y` at `i_o` inside a per-thread parallel loop (`parallel_reduce`
/// with 4 copies, then `split(i, 4)`) copied whole 4-element tiles back, while each copy's
/// rows end inside a tile: one thread wrote back rows another thread zeroed (a race the
/// stage-II interpreter reported). Refused now, by name.
#[test]
fn cache_write_across_per_thread_ranges_is_refused() {
    let steps = r#"{"steps": [
        {"step": "lower"},
        {"step": "parallel_reduce", "target": {"block": "y.init", "var": "i"},
         "strategy": {"kind": "per_thread", "copies": 4}},
        {"step": "split", "target": {"block": "y.init", "var": "i"}, "factor": 4, "tail": "InnerFixed"}
    ]}"#;
    assert_cache_write_refused(
        &spmv("csr"),
        steps,
        "y.init",
        "the copy back would write elements other iterations write",
    );
}

/// `cache_write` of `y` at `i_o` around a parallel loop over `i_i` that zeroes `y`: each
/// thread of the parallel loop stored into a local copy of its own, so the rows the
/// workers zeroed never reached the copy back, which wrote the uninitialised copy in
/// instead (NaN on the second thread; found by the native differential fuzzer after
/// 170,762 runs). Refused now, by name.
#[test]
fn cache_write_around_a_parallel_loop_that_stores_is_refused() {
    let steps = r#"{"steps": [
        {"step": "lower"},
        {"step": "bound", "target": {"block": "y_zero", "var": "i"}, "extent": 9},
        {"step": "split", "target": {"block": "y_zero", "var": "i"}, "factor": 7, "tail": "InnerFixed"},
        {"step": "parallel", "target": {"block": "y_zero", "var": "i_i"}}
    ]}"#;
    assert_cache_write_refused(
        &spmv("coo"),
        steps,
        "y_zero",
        "a parallel loop inside stores to it",
    );
}

/// Replays the trace `steps` on `program`, then checks that `cache_write` of `y` at the
/// loop `i_o` of `block` is refused as a [`ScheduleError::CacheBuffer`] naming `reason`.
fn assert_cache_write_refused(program: &Program, steps: &str, block: &str, reason: &str) {
    use sparsile::transform::ScheduleError;
    let mut sch = Trace::from_json(steps).unwrap().replay(program).unwrap();
    let err = sch
        .cache_write(&LoopRef::new(block, "i_o"), "y")
        .unwrap_err();
    assert!(
        matches!(err, ScheduleError::CacheBuffer { .. }) && err.to_string().contains(reason),
        "{err}"
    );
}
