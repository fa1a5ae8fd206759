//! The GPU semantics the SIMT interpreter implements, one rule at a time: warp
//! reductions' values, the ordering given by `sync_warp` and by launch boundaries,
//! two-dimensional grids and blocks, shared memory private to each block, and the
//! remaining detectors (divergent `sync_warp`, short warps, barriers in loops whose trip
//! count depends on the thread, atomic adds racing with loads, too much shared memory).

#[path = "simt/mod.rs"]
mod support;

use std::collections::HashMap;

use sparsile_formats::SparseTensor;
use sparsile_ir::coord::Program;
use sparsile_ir::loops::Func;
use sparsile_ir::DType;
use sparsile_runtime::simt::{self, SimtError, SimtOptions};
use sparsile_runtime::{interpret, InterpOptions, Outputs};

use support::{assert_close, SEEDS};

/// `Y = 2 X` over a dense vector of length `n`.
const SCALE_SIR: &str = "\
func scale(n) {
  axis I = dense_fixed(n)
  buffer X: f32[I] input
  buffer Y: f32[I] output
  iter s over [I: S] as (i) {
    Y[i] = 2.0 * X[i]
  }
}
";

/// `X[i] = i / 4 - 3` (exact in f32).
fn inputs(n: usize) -> HashMap<String, SparseTensor<'static>> {
    let values: Vec<f64> = (0..n).map(|i| i as f64 * 0.25 - 3.0).collect();
    HashMap::from([(
        "X".to_string(),
        SparseTensor::dense_from_f64(&[n], &values, DType::F32).unwrap(),
    )])
}

fn run(text: &str, n: usize, verify_func: bool, seed: u64) -> Result<Outputs, SimtError> {
    let p: Program = SCALE_SIR.parse().unwrap();
    let f: Func = text.parse().unwrap_or_else(|e| panic!("{e}"));
    let opts = SimtOptions { seed, verify_func };
    simt::run_with(&f, &p, &inputs(n), &InterpOptions::default(), &opts)
}

/// `Y` under every seed (all equal).
fn y(text: &str, n: usize) -> Vec<f64> {
    let runs: Vec<Vec<f64>> = SEEDS
        .iter()
        .map(|&seed| {
            let out = run(text, n, true, seed).unwrap_or_else(|e| panic!("{e}"));
            out["Y"].values.to_f64_vec()
        })
        .collect();
    assert!(runs.iter().all(|r| *r == runs[0]), "results differ by seed");
    runs[0].clone()
}

fn message(text: &str, n: usize, verify_func: bool) -> String {
    match run(text, n, verify_func, 3) {
        Ok(_) => panic!("no error"),
        Err(e) => e.to_string(),
    }
}

/// One statement `body` in a 64-thread block over `X` and `Y` (`t` is the thread).
fn block64(body: &str) -> String {
    format!(
        "flat func scale(n) {{
  buffer X: f32[n] input values
  buffer Y: f32[n] output values
  buffer S: f32[64] temp shared
  launch k {{
    for t in 0..64 bind(threadIdx.x) {{
{body}
    }}
  }}
}}
"
    )
}

fn x(i: usize) -> f64 {
    i as f64 * 0.25 - 3.0
}

#[test]
fn warp_reductions_combine_aligned_groups_of_lanes() {
    let sum = y(
        &block64("      let s: f32 = warp_sum(X[t], 8)\n      Y[t] = s"),
        64,
    );
    let max = y(
        &block64("      let s: idx = warp_max(t * 5 % 7, 4)\n      Y[t] = X[s]"),
        64,
    );
    let min = y(
        &block64("      let s: f32 = warp_min(X[63 - t], 32)\n      Y[t] = s"),
        64,
    );
    for t in 0..64 {
        let g8 = t / 8 * 8;
        assert_eq!(sum[t], (g8..g8 + 8).map(x).sum::<f64>(), "sum, lane {t}");
        let g4 = t / 4 * 4;
        let want = (g4..g4 + 4).map(|l| l * 5 % 7).max().unwrap();
        assert_eq!(max[t], x(want), "max, lane {t}");
        let g32 = t / 32 * 32;
        let want = (g32..g32 + 32).map(|l| x(63 - l)).fold(f64::MAX, f64::min);
        assert_eq!(min[t], want, "min, lane {t}");
    }
}

#[test]
fn segmented_sums_run_to_the_end_of_each_key_inside_a_group() {
    let got = y(
        &block64("      let s: f32 = warp_segment_sum(X[t], t / 3, 8)\n      Y[t] = s"),
        64,
    );
    assert_eq!(got.len(), 64);
    for (t, &g) in got.iter().enumerate() {
        let end = (t / 8 * 8 + 8).min((t / 3 + 1) * 3);
        assert_eq!(g, (t..end).map(x).sum::<f64>(), "lane {t}");
    }
}

/// Thread `t` stores `X[t]` in shared memory, passes `sync`, and stores twice what
/// thread `partner` stored into `Y[partner]`.
fn exchange(sync: &str, partner: &str) -> String {
    block64(&format!(
        "      S[t] = X[t]
      {sync}
      Y[{partner}] = 2.0 * S[{partner}]"
    ))
}

#[test]
fn sync_warp_orders_the_lanes_of_one_warp_only() {
    let neighbour = "t + 1 - 2 * (t % 2)";
    let want: Vec<f64> = (0..64).map(|i| 2.0 * x(i)).collect();
    assert_eq!(y(&exchange("sync_warp", neighbour), 64), want);
    assert_eq!(y(&exchange("sync_threads", "63 - t"), 64), want);
    let want = "launch `k`: data race on `S[12]`: block (0, 0, 0) thread (12, 0, 0) stores it at line 7, column 7, and block (0, 0, 0) thread (51, 0, 0) loads it at line 9, column 7, with no barrier ordering the two";
    assert_eq!(message(&exchange("sync_warp", "63 - t"), 64, true), want);
    let want = "launch `k`: data race on `S[50]`: block (0, 0, 0) thread (50, 0, 0) stores it at line 7, column 7, and block (0, 0, 0) thread (51, 0, 0) loads it at line 9, column 7, with no barrier ordering the two";
    assert_eq!(message(&exchange("", neighbour), 64, true), want);
}

#[test]
fn a_sync_warp_with_inactive_lanes_diverges() {
    let text = block64("      if t % 32 < 16 {\n        sync_warp\n      }");
    assert_eq!(message(&text, 64, true), "launch `k`, block (0, 0, 0), warp 0: `sync_warp` at line 8, column 9 needs every lane of the warp, but lanes 16-31 are inactive");
}

#[test]
fn a_warp_reduction_in_a_short_warp_is_refused() {
    let text = "\
flat func scale(n) {
  buffer X: f32[n] input values
  buffer Y: f32[n] output values
  launch short {
    for t in 0..48 bind(threadIdx.x) {
      let s: f32 = warp_sum(X[t], 32)
      Y[t] = s
    }
  }
}
";
    assert!(matches!(
        run(text, 48, true, 0),
        Err(SimtError::InvalidFunc { .. })
    ));
    assert_eq!(message(text, 48, false), "launch `short`, block (0, 0, 0), warp 1: `warp_sum` at line 6, column 7 needs a whole warp of 32 lanes, but the block's 48 threads leave this warp 16");
}

#[test]
fn a_barrier_in_a_loop_whose_trip_count_depends_on_the_thread_diverges() {
    let text = block64("      for r in 0..t % 3 {\n        sync_threads\n      }");
    assert_eq!(message(&text, 64, false), "launch `k`, block (0, 0, 0): `sync_threads` at line 8, column 9 is reached by 42 of the block's 64 threads (thread (0, 0, 0) does not reach it)");
}

#[test]
fn an_atomic_add_races_with_a_plain_load() {
    let text = "\
flat func scale(n) {
  buffer X: f32[n] input values
  buffer Y: f32[n] output values
  launch k {
    for b in 0..2 bind(blockIdx.x) {
      for t in 0..32 bind(threadIdx.x) {
        if b == 0 {
          atomic Y[0] += X[t]
        } else {
          Y[t] = Y[0]
        }
      }
    }
  }
}
";
    assert_eq!(message(text, 32, true), "launch `k`: data race on `Y[0]`: block (0, 0, 0) thread (14, 0, 0) atomically adds to it at line 8, column 11, and block (1, 0, 0) thread (3, 0, 0) loads it at line 10, column 11, with no barrier ordering the two");
}

#[test]
fn launches_are_ordered() {
    // The second launch reads what other threads of the first stored.
    let two = "\
flat func scale(n) {
  buffer X: f32[n] input values
  buffer Y: f32[n] output values
  buffer T: f32[n] temp scratch
  launch first {
    for b in 0..(n + 31) / 32 bind(blockIdx.x) {
      for t in 0..32 bind(threadIdx.x) {
        if b * 32 + t < n {
          T[b * 32 + t] = 2.0 * X[b * 32 + t]
        }
      }
    }
  }
  launch second {
    for b in 0..(n + 31) / 32 bind(blockIdx.x) {
      for t in 0..32 bind(threadIdx.x) {
        if b * 32 + t < n {
          Y[n - 1 - b * 32 - t] = T[n - 1 - b * 32 - t]
        }
      }
    }
  }
}
";
    let want: Vec<f64> = (0..70).map(|i| 2.0 * x(i)).collect();
    assert_eq!(y(two, 70), want);
    // In one launch, the same accesses race.
    let one = two.replace("  }\n  launch second {\n", "");
    assert_eq!(message(&one, 70, false), "launch `first`: data race on `T[26]`: block (0, 0, 0) thread (26, 0, 0) stores it at line 9, column 11, and block (4, 0, 0) thread (11, 0, 0) loads it at line 16, column 11, with no barrier ordering the two");
}

#[test]
fn shared_memory_belongs_to_each_block_and_starts_undefined() {
    // Every block stores and loads the same shared elements: no race between blocks.
    let own = "\
flat func scale(n) {
  buffer X: f32[n] input values
  buffer Y: f32[n] output values
  buffer S: f32[32] temp shared
  launch k {
    for b in 0..(n + 31) / 32 bind(blockIdx.x) {
      for t in 0..32 bind(threadIdx.x) {
        if b * 32 + t < n {
          S[t] = 2.0 * X[b * 32 + t]
          Y[b * 32 + t] = S[t]
        }
      }
    }
  }
}
";
    let want: Vec<f64> = (0..80).map(|i| 2.0 * x(i)).collect();
    assert_eq!(y(own, 80), want);
    // Only block 0 stores: the others read undefined shared memory.
    let first = own.replace(
        "S[t] = 2.0 * X[b * 32 + t]",
        "S[t] = select(b == 0, 2.0 * X[t], S[t])",
    );
    assert_eq!(message(&first, 80, true), "launch `k`: block (2, 0, 0) thread (14, 0, 0) loads shared `S[14]` at line 9, column 11, which no thread of the block has stored");
}

#[test]
fn two_dimensional_grids_and_blocks_cover_a_matrix() {
    let sir = "\
func scale2(m, n) {
  axis I = dense_fixed(m)
  axis J = dense_fixed(n)
  buffer X: f32[I, J] input
  buffer Y: f32[I, J] output
  iter s over [I: S, J: S] as (i, j) {
    Y[i, j] = 2.0 * X[i, j] + 1.0
  }
}
";
    let text = "\
flat func scale2(m, n) {
  buffer X: f32[m * n] input values
  buffer Y: f32[m * n] output values
  launch tiles {
    for bj in 0..(n + 7) / 8 bind(blockIdx.x) {
      for bi in 0..(m + 3) / 4 bind(blockIdx.y) {
        for ti in 0..4 bind(threadIdx.y) {
          for tj in 0..8 bind(threadIdx.x) {
            let i: idx = bi * 4 + ti
            let j: idx = bj * 8 + tj
            if i < m && j < n {
              Y[i * n + j] = 2.0 * X[i * n + j] + 1.0
            }
          }
        }
      }
    }
  }
}
";
    let p: Program = sir.parse().unwrap();
    let f: Func = text.parse().unwrap();
    for (m, n) in [(9, 13), (4, 8), (0, 3), (1, 1)] {
        let values: Vec<f64> = (0..m * n).map(|i| i as f64 * 0.5).collect();
        let inputs = HashMap::from([(
            "X".to_string(),
            SparseTensor::dense_from_f64(&[m, n], &values, DType::F32).unwrap(),
        )]);
        let opts = InterpOptions::default();
        let want = interpret(&p, &inputs, &opts).unwrap();
        for seed in SEEDS {
            let got = support::simt_run(&f, &p, &inputs, &opts, seed);
            assert_close(
                &got["Y"].values.to_f64_vec(),
                &want["Y"].values.to_f64_vec(),
                &format!("{m}x{n}, seed {seed}"),
            );
        }
    }
}

#[test]
fn thread_errors_name_the_thread() {
    let store = block64("      if t == 9 {\n        X[t] = 1.0\n      }");
    assert_eq!(message(&store, 64, false), "launch `k`, block (0, 0, 0) thread (9, 0, 0): line 8, column 9: store into `X`, which is read-only (an input)");
    let divide = block64("      Y[t] = X[t + 0 * (t / (t - 5))]");
    assert_eq!(message(&divide, 64, true), "launch `k`, block (0, 0, 0) thread (5, 0, 0): line 7, column 7: integer overflow or division by zero in `5 / 0`");
}

#[test]
fn too_much_shared_memory_is_refused() {
    let text = block64("      S[t] = X[t]\n      Y[t] = S[t]")
        .replace("f32[64] temp shared", "f64[8192] temp shared");
    assert!(matches!(
        run(&text, 64, true, 0),
        Err(SimtError::InvalidFunc { .. })
    ));
    assert_eq!(
        message(&text, 64, false),
        "launch `k`: its shared buffers take 65536 bytes (at most 49152)"
    );
}

#[test]
fn statements_outside_launches_are_refused() {
    let text = "\
flat func scale(n) {
  buffer X: f32[n] input values
  buffer Y: f32[n] output values
  launch k {
    for t in 0..32 bind(threadIdx.x) {
      Y[t] = X[t]
    }
  }
  for i in 0..n {
    Y[i] = 2.0 * X[i]
  }
}
";
    assert_eq!(message(text, 32, false), "line 9, column 3: a statement outside any launch in GPU function `scale` (its top level holds only launches)");
}
