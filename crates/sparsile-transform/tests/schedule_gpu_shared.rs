//! `cache_shared` and what GE-SpMM's schedule needs around it: `cache_write` of a split
//! dense index (`k_o * 32 + k_i`), `absorb_init` over it, and `bind` of the lanes of such
//! an index. The full schedule is the before/after file `schedule/gpu/cache_shared_spmm`
//! (run by `schedule_gpu.rs`); here each precondition with its exact message. The recipe
//! built on them (`gpu_rowcache`) runs in the SIMT interpreter against the reference
//! interpreter in `crates/sparsile/tests/gpu_recipes.rs`.

// `ScheduleError` is large by design (it names the loop, block and span).
#![allow(clippy::result_large_err)]

use sparsile_ir::loops::{verify, Func, GpuAxis, GpuDim};
use sparsile_transform::schedule::{
    absorb_init, bind, cache_shared, cache_write, reorder, split, LoopRef, ScheduleError, SplitTail,
};

/// SpMM with a dense width of 64, lowered (stage II).
const SPMM: &str = include_str!("schedule/gpu/cache_shared_spmm.before");

const BX: GpuAxis = GpuAxis::Block(GpuDim::X);
const TX: GpuAxis = GpuAxis::Thread(GpuDim::X);
const TY: GpuAxis = GpuAxis::Thread(GpuDim::Y);

fn at(var: &str) -> LoopRef {
    LoopRef::new("C", var)
}

fn ok(r: Result<Func, ScheduleError>) -> Func {
    let f = r.unwrap_or_else(|e| panic!("{e}"));
    verify(&f).unwrap_or_else(|e| panic!("does not verify: {e:?}\n{f}"));
    f
}

fn spmm() -> Func {
    let text: String = SPMM
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    text.parse().unwrap()
}

/// The SpMM with its output row cached per lane (`C_local[2]`), `lanes` lanes along
/// `threadIdx.x` and `rows` rows per block, the row's non-zeros split by `chunk`.
fn warps(lanes: i64, rows: i64, chunk: i64) -> Func {
    let f = spmm();
    let (f, _, _) = split(&f, &at("k_2"), lanes, SplitTail::InnerFixed).unwrap();
    let f = ok(reorder(&f, &[at("k_2_i"), at("j_p"), at("k_2_o")]));
    let (f, _) = cache_write(&f, &at("k_2_i"), "C").unwrap();
    let f = ok(absorb_init(&f, "C", "C"));
    let (f, _, _) = split(&f, &at("i_2"), rows, SplitTail::InnerFixed).unwrap();
    let f = ok(bind(&f, &at("i_2_o"), BX));
    let f = ok(bind(&f, &at("i_2_i"), TY));
    let f = ok(bind(&f, &at("k_2_i"), TX));
    let (f, _, _) = split(&f, &at("j_p"), chunk, SplitTail::InnerFixed).unwrap();
    f
}

fn error(f: &Func, target: &str, buffer: &str) -> String {
    match cache_shared(f, &at(target), buffer) {
        Ok((out, _)) => panic!("expected an error, got\n{out}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn cache_shared_preconditions() {
    let f = warps(32, 4, 32);
    let cases = [
        (
            error(&spmm(), "j_p", "A"),
            "cache_shared: loop `j_p` in block `C` (line 20, column 7): cannot cache `A`: the loop is not inside a launch",
        ),
        (
            error(&f, "j_p_o", "C"),
            "cache_shared: loop `j_p_o` in block `C` (line 20, column 7): cannot cache `C`: only an input the function never writes is staged (a copy would go stale)",
        ),
        (
            error(&f, "j_p_o", "B"),
            "cache_shared: loop `j_p_o` in block `C`: access `B[j, k_2]` (line 23, column 11), index position 0: the index is not `scale * v + offset` with `v` an inner loop with constant bounds (use split or bound first)",
        ),
        (
            error(&f, "j_p_i", "A"),
            "cache_shared: loop `j_p_i` in block `C`: access `A[i_2, j_p]` (line 23, column 11), index position 1: the index is not `scale * v + offset` with `v` an inner loop with constant bounds (use split or bound first)",
        ),
        (
            error(&f, "k_2_o", "B"),
            "cache_shared: loop `k_2_o` in block `C`: access `B[j, k_2]` (line 23, column 11), index position 1: the index is not `scale * v + offset` with `v` an inner loop with constant bounds (use split or bound first)",
        ),
        (
            error(&warps(16, 4, 16), "j_p_o", "A"),
            "cache_shared: loop `j_p_o` in block `C` (line 20, column 7): cannot cache `A`: 16 lanes along threadIdx.x are not whole warps (32, or a multiple of 32)",
        ),
        (
            error(&warps(64, 4, 64), "j_p_o", "A"),
            "cache_shared: loop `j_p_o` in block `C` (line 20, column 7): cannot cache `A`: 64 lanes span several warps, so the barrier is sync_threads, but a condition or loop bound around the loop depends on the thread",
        ),
        (
            error(&warps(32, 4, 4096), "j_p_o", "A"),
            "cache_shared: loop `j_p_o` in block `C`: caching `A` needs 16384 elements, more than 12288",
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .filter(|(got, want)| got != want)
        .map(|(got, want)| format!("got:  {got}\nwant: {want}"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn lanes_that_walk_their_own_rows_cannot_load_together() {
    // One row per lane: the chunk loop's bounds depend on the lane.
    let f = spmm();
    let (f, _, _) = split(&f, &at("i_2"), 32, SplitTail::InnerFixed).unwrap();
    let f = ok(bind(&f, &at("i_2_o"), BX));
    let f = ok(bind(&f, &at("i_2_i"), TX));
    let (f, _, _) = split(&f, &at("j_p"), 32, SplitTail::InnerFixed).unwrap();
    assert_eq!(
        error(&f, "j_p_o", "A"),
        "cache_shared: loop `j_p_o` in block `C` (line 20, column 7): cannot cache `A`: the loop's bounds, or a condition or loop bound between the threadIdx.x loop and it, depend on the lane (the lanes must run the loop alike to load together)"
    );
}

#[test]
fn lanes_of_a_split_index_bind_only_within_the_stride() {
    // `C_out1 * 32 + k_2_i` over 32 lanes: every lane its own elements.
    let f = spmm();
    let (f, _, _) = split(&f, &at("k_2"), 32, SplitTail::InnerFixed).unwrap();
    let f = ok(reorder(&f, &[at("k_2_i"), at("j_p"), at("k_2_o")]));
    let (f, _) = cache_write(&f, &at("k_2_i"), "C").unwrap();
    let f = ok(absorb_init(&f, "C", "C"));
    ok(bind(&f, &at("k_2_i"), TX));
    // A stride of 16 under 32 lanes: lanes 0 and 16 store the same elements.
    let text = f
        .to_string()
        .replace("C_out1 * 32 + k_2_i", "C_out1 * 16 + k_2_i");
    let overlapping: Func = text.parse().unwrap();
    let err = bind(&overlapping, &at("k_2_i"), TX)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no index position selects elements owned by one value of `k_2_i`"),
        "{err}"
    );
}

#[test]
fn absorb_init_needs_the_lanes_to_cover_the_stride() {
    // `C_local` over `k_2_o` in 0..2 with a stride of 32 covers 0..64 only with all 32
    // lanes: cut the lane loop to 0..16 (after caching) and the stores back miss half.
    let f = spmm();
    let (f, _, _) = split(&f, &at("k_2"), 32, SplitTail::InnerFixed).unwrap();
    let f = ok(reorder(&f, &[at("k_2_i"), at("j_p"), at("k_2_o")]));
    let (f, _) = cache_write(&f, &at("k_2_i"), "C").unwrap();
    let text = f
        .to_string()
        .replace("for k_2_i in 0..32", "for k_2_i in 0..16");
    let cut: Func = text.parse().unwrap();
    let err = absorb_init(&cut, "C", "C").unwrap_err().to_string();
    assert!(
        err.contains("with loop `k_2_i` it runs over positions that do not hold"),
        "{err}"
    );
}
