//! Planted bugs, each caught by its detector with an exact message, and the functions the
//! SIMT interpreter refuses. Each buggy kernel sits next to its fixed version where there
//! is one, which must run and match the stage-I interpreter.

#[path = "simt/mod.rs"]
mod support;

use std::collections::HashMap;

use sparsile_formats::SparseTensor;
use sparsile_ir::coord::Program;
use sparsile_ir::loops::Func;
use sparsile_ir::DType;
use sparsile_runtime::simt::{self, SimtError, SimtOptions};
use sparsile_runtime::{interpret, InterpOptions};

use support::{assert_close, Inputs};

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

/// `s[0] = sum X`.
const TOTAL_SIR: &str = "\
func total(n) {
  axis I = dense_fixed(n)
  axis O = dense_fixed(1)
  buffer X: f32[I] input
  buffer s: f32[O] output
  iter sum over [O: S, I: R] as (o, i) {
    s[o] = s[o] + X[i]
  }
}
";

fn inputs(n: usize) -> Inputs {
    let values: Vec<f64> = (0..n).map(|i| (i as f64) * 0.5 - 3.0).collect();
    HashMap::from([(
        "X".to_string(),
        SparseTensor::dense_from_f64(&[n], &values, DType::F32).unwrap(),
    )])
}

fn program(sir: &str) -> Program {
    sir.parse().unwrap_or_else(|e| panic!("{e}"))
}

fn func(text: &str) -> Func {
    text.parse().unwrap_or_else(|e| panic!("{e}"))
}

/// The error of running `text` on `program` with `n` inputs.
fn error(sir: &str, text: &str, n: usize, verify_func: bool) -> SimtError {
    let opts = SimtOptions {
        seed: 7,
        verify_func,
    };
    let result = simt::run_with(
        &func(text),
        &program(sir),
        &inputs(n),
        &InterpOptions::default(),
        &opts,
    );
    match result {
        Ok(_) => panic!("no error"),
        Err(e) => e,
    }
}

/// Runs `text` (verified) under several seeds and compares output `name` with stage I.
fn runs_correctly(sir: &str, text: &str, n: usize, name: &str) {
    let (p, f, inputs) = (program(sir), func(text), inputs(n));
    let want = interpret(&p, &inputs, &InterpOptions::default()).unwrap();
    for seed in support::SEEDS {
        let got = support::simt_run(&f, &p, &inputs, &InterpOptions::default(), seed);
        assert_close(
            &got[name].values.to_f64_vec(),
            &want[name].values.to_f64_vec(),
            &format!("seed {seed}"),
        );
    }
}

/// Thread `t` stores `X[t]` in shared memory, and thread `63 - t` reads it back; `sync`
/// is the statement between the two (a barrier or nothing).
fn exchange(sync: &str) -> String {
    format!(
        "flat func scale(n) {{
  buffer X: f32[n] input values
  buffer Y: f32[n] output values
  buffer S: f32[64] temp shared
  launch exchange {{
    for b in 0..(n + 63) / 64 bind(blockIdx.x) {{
      for t in 0..64 bind(threadIdx.x) {{
        if b * 64 + t < n {{
          S[t] = X[b * 64 + t]
        }}
      }}
      {sync}
      for t2 in 0..64 bind(threadIdx.x) {{
        if b * 64 + 63 - t2 < n {{
          Y[b * 64 + 63 - t2] = 2.0 * S[63 - t2]
        }}
      }}
    }}
  }}
}}
"
    )
}

#[test]
fn a_missing_sync_threads_between_shared_stores_and_loads_is_a_race() {
    runs_correctly(SCALE_SIR, &exchange("sync_threads"), 128, "Y");
    let want = "launch `exchange`: data race on `S[22]`: block (0, 0, 0) thread (22, 0, 0) stores it at line 9, column 11, and block (0, 0, 0) thread (41, 0, 0) loads it at line 15, column 11, with no barrier ordering the two";
    assert_eq!(error(SCALE_SIR, &exchange(""), 128, true).to_string(), want);
}

/// Each block sums 32 elements with `warp_sum`; lane 0 adds it to `s[0]` with `update`.
fn total(update: &str) -> String {
    format!(
        "flat func total(n) {{
  buffer X: f32[n] input values
  buffer s: f32[1] output values
  launch total {{
    for b in 0..(n + 31) / 32 bind(blockIdx.x) {{
      for t in 0..32 bind(threadIdx.x) {{
        let v: f32 = warp_sum(select(b * 32 + t < n, X[b * 32 + t], 0.0), 32)
        if t == 0 {{
          {update}
        }}
      }}
    }}
  }}
}}
"
    )
}

#[test]
fn a_plain_read_modify_write_from_different_blocks_is_a_race() {
    runs_correctly(TOTAL_SIR, &total("atomic s[0] += v"), 70, "s");
    let want = "launch `total`: data race on `s[0]`: block (0, 0, 0) thread (0, 0, 0) stores it at line 9, column 11, and block (2, 0, 0) thread (0, 0, 0) loads it at line 9, column 11, with no barrier ordering the two";
    assert_eq!(
        error(TOTAL_SIR, &total("s[0] = s[0] + v"), 70, true).to_string(),
        want
    );
}

const DIVERGENT_BARRIER: &str = "\
flat func scale(n) {
  buffer X: f32[n] input values
  buffer Y: f32[n] output values
  launch half {
    for t in 0..64 bind(threadIdx.x) {
      if t < 32 {
        sync_threads
      }
      if t < n {
        Y[t] = 2.0 * X[t]
      }
    }
  }
}
";

#[test]
fn a_sync_threads_under_a_thread_dependent_if_diverges() {
    let want = "launch `half`, block (0, 0, 0): `sync_threads` at line 7, column 9 is reached by 32 of the block's 64 threads (thread (32, 0, 0) does not reach it)";
    assert_eq!(
        error(SCALE_SIR, DIVERGENT_BARRIER, 64, false).to_string(),
        want
    );
}

#[test]
fn a_function_the_verifier_refuses_is_invalid() {
    let e = error(SCALE_SIR, DIVERGENT_BARRIER, 64, true);
    assert!(matches!(e, SimtError::InvalidFunc { .. }), "{e:?}");
    let want = "function does not pass the loop-level verifier: line 7: launch `half`: `sync_threads` is under a condition that depends on the thread, so not every thread of the block reaches it";
    assert_eq!(e.to_string(), want);
}

/// A warp reduction over `X` reached by the lanes where `cond` holds.
fn reduction(reduce: &str, cond: &str) -> String {
    format!(
        "flat func scale(n) {{
  buffer X: f32[n] input values
  buffer Y: f32[n] output values
  launch reduce {{
    for t in 0..32 bind(threadIdx.x) {{
      if {cond} {{
        let v: f32 = {reduce}
        Y[t] = v
      }}
    }}
  }}
}}
"
    )
}

#[test]
fn a_warp_sum_with_inactive_lanes_diverges() {
    let text = reduction("warp_sum(X[t], 32)", "t < 20");
    let want = "launch `reduce`, block (0, 0, 0), warp 0: `warp_sum` at line 7, column 9 needs every lane of the warp, but lanes 20-31 are inactive";
    assert_eq!(error(SCALE_SIR, &text, 32, true).to_string(), want);
}

#[test]
fn decreasing_segment_keys_are_refused() {
    let text = reduction("warp_segment_sum(X[t], 3 - t / 8, 32)", "t < n");
    let want = "launch `reduce`, block (0, 0, 0), warp 0: `warp_segment_sum` at line 7, column 9: lane 7 has key 3 but lane 8 has key 2 (keys must not decrease along each group of 32 lanes)";
    assert_eq!(error(SCALE_SIR, &text, 32, true).to_string(), want);
}

#[test]
fn a_read_of_uninitialised_shared_memory_is_reported() {
    let text = "\
flat func scale(n) {
  buffer X: f32[n] input values
  buffer Y: f32[n] output values
  buffer S: f32[32] temp shared
  launch odd {
    for t in 0..32 bind(threadIdx.x) {
      if t % 2 == 0 {
        S[t] = X[t]
      }
    }
    sync_threads
    for t2 in 0..32 bind(threadIdx.x) {
      Y[t2] = S[t2]
    }
  }
}
";
    let want = "launch `odd`: block (0, 0, 0) thread (27, 0, 0) loads shared `S[27]` at line 13, column 7, which no thread of the block has stored";
    assert_eq!(error(SCALE_SIR, text, 32, true).to_string(), want);
}

#[test]
fn a_read_of_a_local_never_written_is_reported() {
    let text = "\
flat func scale(n) {
  buffer X: f32[n] input values
  buffer Y: f32[n] output values
  buffer acc: f32[2] temp local
  launch fresh {
    for t in 0..32 bind(threadIdx.x) {
      acc[0] = X[t]
      Y[t] = acc[0] + acc[1]
    }
  }
}
";
    let want = "launch `fresh`: block (0, 0, 0) thread (2, 0, 0) loads local `acc[1]` at line 8, column 7, which the thread has not stored";
    assert_eq!(error(SCALE_SIR, text, 32, true).to_string(), want);
}

#[test]
fn an_out_of_bounds_load_names_the_thread() {
    let text = "\
flat func scale(n) {
  buffer X: f32[n] input values
  buffer Y: f32[n] output values
  launch shifted {
    for b in 0..(n + 15) / 16 bind(blockIdx.x) {
      for t in 0..16 bind(threadIdx.x) {
        Y[b * 16 + t] = X[b * 16 + t + 1]
      }
    }
  }
}
";
    let want = "launch `shifted`, block (1, 0, 0) thread (15, 0, 0): line 7, column 9: load of `X` at offset 32, outside its 32 elements";
    assert_eq!(error(SCALE_SIR, text, 32, true).to_string(), want);
}

#[test]
fn a_grid_too_large_is_refused() {
    let along = |bind: &str, extent: &str| {
        format!(
            "flat func scale(n) {{
  buffer X: f32[n] input values
  buffer Y: f32[n] output values
  launch huge {{
    for b in 0..{extent} bind({bind}) {{
      for t in 0..32 bind(threadIdx.x) {{
        if b * 32 + t < n {{
          Y[b * 32 + t] = 2.0 * X[b * 32 + t]
        }}
      }}
    }}
  }}
}}
"
        )
    };
    let x = along("blockIdx.x", "n * 100000000");
    let want = "launch `huge`: a grid of 3200000000 blocks along `x` (at most 2147483647)";
    assert_eq!(error(SCALE_SIR, &x, 32, true).to_string(), want);
    let y = along("blockIdx.y", "n * 3000");
    let want = "launch `huge`: a grid of 96000 blocks along `y` (at most 65535)";
    assert_eq!(error(SCALE_SIR, &y, 32, true).to_string(), want);
}

#[test]
fn a_cpu_function_is_refused() {
    let text = "\
flat func scale(n) {
  buffer X: f32[n] input values
  buffer Y: f32[n] output values
  for i in 0..n parallel {
    Y[i] = 2.0 * X[i]
  }
}
";
    let want = "function `scale` has no launch: the SIMT interpreter runs GPU functions (run CPU functions with `flat_interp`)";
    assert_eq!(error(SCALE_SIR, text, 4, true).to_string(), want);
}
