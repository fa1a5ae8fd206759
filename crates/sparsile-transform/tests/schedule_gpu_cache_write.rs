//! `cache_write_shared`: the before/after text files of `schedule/gpu_cache_write/`
//! (SpMM with a row per block: non-zeros over `threadIdx.y` with atomic adds and the
//! width over `threadIdx.x`; the width over the lanes with plain adds; more staged
//! elements than threads), one test per precondition with its exact message, and the
//! `Schedule` method with its trace step (JSON round trip and replay). The SIMT runs
//! against the reference interpreter are in `crates/sparsile/tests/gpu_cache_write_shared.rs`.

// `ScheduleError` is large by design (it names the loop, block and span).
#![allow(clippy::result_large_err)]

#[path = "expected_text/mod.rs"]
mod expected_text;

use sparsile_ir::loops::{verify, Func, GpuAxis};
use sparsile_transform::lower_iterations;
use sparsile_transform::schedule::{
    bind, bind_atomic, bound, cache_write_shared, reorder, split, LoopRef, Schedule, ScheduleError,
    SplitTail, Step, Trace,
};

const SPMM: &str =
    "tensor A: f32[m, n] csr\ntensor X: f32[n, k]\ntensor Y: f32[m, k]\nY[i,c] = A[i,j] * X[j,c]\n";

fn at(block: &str, var: &str) -> LoopRef {
    LoopRef::new(block, var)
}

fn axis(text: &str) -> GpuAxis {
    GpuAxis::parse(text).unwrap_or_else(|| panic!("not an axis: {text}"))
}

/// Applies one `# ` call of a `.before` file (or of a test's setup).
fn call(func: &Func, line: &str) -> Func {
    let words: Vec<&str> = line.split_whitespace().collect();
    let out = match words.as_slice() {
        ["split", b, v, f] => {
            split(func, &at(b, v), f.parse().unwrap(), SplitTail::InnerFixed).map(|(f, _, _)| f)
        }
        ["reorder", b, vars @ ..] => {
            let loops: Vec<LoopRef> = vars.iter().map(|v| at(b, v)).collect();
            reorder(func, &loops)
        }
        ["bound", b, v, n] => bound(func, &at(b, v), n.parse().unwrap()),
        ["bind", b, v, a] => bind(func, &at(b, v), axis(a)),
        ["bind_atomic", b, v, a] => bind_atomic(func, &at(b, v), axis(a)),
        ["cache_write_shared", b, v, buffer] => {
            cache_write_shared(func, &at(b, v), buffer).map(|(f, _)| f)
        }
        _ => panic!("unknown call `{line}`"),
    };
    let out = out.unwrap_or_else(|e| panic!("`{line}`: {e}"));
    verify(&out).unwrap_or_else(|e| panic!("`{line}`: does not verify: {e:?}\n{out}"));
    out
}

#[test]
fn before_after_files() {
    let files = expected_text::before_files("gpu_cache_write");
    assert!(files.len() >= 3);
    for file in files {
        let mut func = file.func.clone();
        for line in &file.calls {
            func = call(&func, line);
        }
        expected_text::check_after(&file.path, &func.to_string());
    }
}

/// The lowered SpMM (stage II, read back from its text: spans are its lines) after
/// `setup`.
fn spmm(setup: &[&str]) -> Func {
    let lowered = lower_iterations(&sparsile::compile_notation(SPMM).unwrap()).unwrap();
    let mut func: Func = lowered.to_string().parse().unwrap();
    for line in setup {
        func = call(&func, line);
    }
    func
}

/// A row per block, the non-zeros over 4 warps adding atomically, the width over lanes.
const ATOMIC: &[&str] = &[
    "bound Y c_2 32",
    "split Y j_p 4",
    "reorder Y j_p_i j_p_o",
    "bind Y i_2 blockIdx.x",
    "bind_atomic Y j_p_i threadIdx.y",
    "bind Y c_2 threadIdx.x",
];

/// A row per block, the width over the lanes, the non-zeros in each lane: plain adds.
const PLAIN: &[&str] = &[
    "bound Y c_2 32",
    "reorder Y c_2 j_p",
    "bind Y i_2 blockIdx.x",
    "bind Y c_2 threadIdx.x",
];

/// `text` with `from` replaced by `to` (which must occur), parsed.
fn edited(f: &Func, from: &str, to: &str) -> Func {
    let text = f.to_string();
    assert!(text.contains(from), "`{from}` not in\n{text}");
    text.replace(from, to).parse().unwrap()
}

fn error(f: &Func, target: &str, buffer: &str) -> String {
    match cache_write_shared(f, &at("Y", target), buffer) {
        Ok((out, _)) => panic!("expected an error, got\n{out}"),
        Err(e) => e.to_string(),
    }
}

const UPDATE: &str = "atomic Y[i_2, c_2] += A[i_2, j_p] * X[j, c_2]";

#[test]
fn cache_write_shared_preconditions() {
    let atomic = spmm(ATOMIC);
    let plain = spmm(PLAIN);
    // A grid loop over rows of 4 blocks along blockIdx.y, each row of blocks 4 rows.
    let nested = spmm(&[
        "split Y i_2 4",
        "bind Y i_2_o blockIdx.y",
        "bind Y i_2_i blockIdx.x",
    ]);
    // The grid loop inside a thread-dependent condition (not a well-formed launch,
    // which the primitive refuses rather than placing a divergent barrier).
    let divergent: Func = "\
pos func f(m) {
  axis I = dense_fixed(m)
  axis T = dense_fixed(32)
  buffer Y: f32[I, T] output values
  launch Y {
    block Y {
      for t in 0..64 bind(threadIdx.x) {
        if t < 32 {
          for b in 0..m bind(blockIdx.x) {
            for u in 0..32 bind(threadIdx.y) {
              atomic Y[b, u] += 1.0
            }
          }
        }
      }
    }
  }
}
"
    .parse()
    .unwrap();
    let cases = [
        (
            error(&spmm(&[]), "i_2", "Y"),
            "cache_write_shared: loop `i_2` in block `Y` (line 19, column 5): cannot cache `Y`: the loop is not inside a launch",
        ),
        (
            error(&atomic, "j_p_o", "Y"),
            "cache_write_shared: loop `j_p_o` in block `Y` (line 20, column 7): cannot cache `Y`: the loop is not bound to the grid (blockIdx.*): one iteration must be the work of one block",
        ),
        (
            error(&nested, "i_2_o", "Y"),
            "cache_write_shared: loop `i_2_o` in block `Y` (line 19, column 5): cannot cache `Y`: a loop bound to the grid runs inside it (stage at the innermost one: one iteration must be the work of one block)",
        ),
        (
            error(&divergent, "b", "Y"),
            "cache_write_shared: loop `b` in block `Y` (line 9, column 11): cannot cache `Y`: a condition or loop bound around the loop depends on the thread (every thread of the block must reach the sync_threads at the top of its body)",
        ),
        (
            error(&atomic, "i_2", "Z"),
            "cache_write_shared: no buffer `Z` in the function",
        ),
        (
            error(&atomic, "i_2", "X"),
            "cache_write_shared: loop `i_2` in block `Y` (line 19, column 5): cannot cache `X`: only an output values buffer is staged (its updates are added back)",
        ),
        (
            error(
                &edited(&atomic, UPDATE, "Y[i_2, c_2] = A[i_2, j_p] * X[j, c_2]"),
                "i_2",
                "Y",
            ),
            "cache_write_shared: loop `i_2` in block `Y` (line 22, column 7): cannot cache `Y`: the statement at line 30, column 19 accesses it other than by an update `Y[e] = Y[e] + v` or `atomic Y[e] += v`",
        ),
        (
            error(
                &edited(
                    &atomic,
                    "buffer Y: f32[I_m, I_k] output values",
                    "buffer Y: f32[I_m, I_k] output values\n  buffer Z: f32[I_m] output values",
                ),
                "i_2",
                "Z",
            ),
            "cache_write_shared: loop `i_2` in block `Y` (line 23, column 7): cannot cache `Z`: the loop does not update it",
        ),
        (
            error(
                &edited(
                    &atomic,
                    UPDATE,
                    &format!("{UPDATE}\n Y[i_2, c_2] = Y[i_2, c_2] + 1.0"),
                ),
                "i_2",
                "Y",
            ),
            "cache_write_shared: loop `i_2` in block `Y` (line 22, column 7): cannot cache `Y`: the loop updates it both atomically and plainly",
        ),
        (
            error(
                &edited(
                    &plain,
                    "Y[i_2, c_2] = Y[i_2, c_2] +",
                    "Y[0, c_2] = Y[0, c_2] +",
                ),
                "i_2",
                "Y",
            ),
            "cache_write_shared: loop `i_2` in block `Y` (line 22, column 7): cannot cache `Y`: its updates are plain, but no index position is the grid loop's variable `i_2`: other blocks may write the elements this block adds back (bind the updates atomically)",
        ),
        (
            error(
                &spmm(&[
                    "split Y j_p 4",
                    "reorder Y j_p_i j_p_o",
                    "bind Y i_2 blockIdx.x",
                    "bind_atomic Y j_p_i threadIdx.y",
                ]),
                "i_2",
                "Y",
            ),
            "cache_write_shared: loop `i_2` in block `Y`: access `Y[i_2, c_2]` (line 23, column 11), index position 1: loop `c_2` has no constant bounds (use bound first)",
        ),
        (
            error(
                &spmm(&[
                    "bound Y c_2 16384",
                    "split Y j_p 4",
                    "reorder Y j_p_i j_p_o",
                    "bind Y i_2 blockIdx.x",
                    "bind_atomic Y j_p_i threadIdx.y",
                ]),
                "i_2",
                "Y",
            ),
            "cache_write_shared: loop `i_2` in block `Y`: caching `Y` needs 16384 elements, more than 12288",
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .filter(|(got, want)| got != want)
        .map(|(got, want)| format!("got:  {got}\nwant: {want}"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Plain updates in one grid loop of a launch whose other grid loop (side by side, as
/// `fuse_launches` makes them) writes the same buffer: the elements the block adds back
/// without having updated them may be another block's.
const SIDE_BY_SIDE: &str = "\
pos func f(m) {
  axis I = dense_fixed(m)
  axis T = dense_fixed(32)
  buffer Y: f32[I, T] output values
  launch Y {
    block Y {
      for b in 0..m bind(blockIdx.x) {
        for u in 0..32 bind(threadIdx.x) {
          if u < 16 {
            Y[b, u] = Y[b, u] + 1.0
          }
        }
      }
    }
    block Z {
      for b2 in 0..m bind(blockIdx.x) {
        for u2 in 16..32 bind(threadIdx.x) {
          Y[b2, u2] = 2.0
        }
      }
    }
  }
}
";

#[test]
fn plain_updates_need_the_buffer_to_themselves_in_the_launch() {
    let f: Func = SIDE_BY_SIDE.parse().unwrap();
    verify(&f).unwrap();
    assert_eq!(
        error(&f, "b", "Y"),
        "cache_write_shared: loop `b` in block `Y` (line 7, column 7): cannot cache `Y`: its updates are plain, but the launch accesses it outside the loop too (the block adds back every staged element)"
    );
    // Atomic updates add zeros back harmlessly.
    let atomic = edited(&f, "Y[b, u] = Y[b, u] + 1.0", "atomic Y[b, u] += 1.0");
    let (out, name) = cache_write_shared(&atomic, &at("Y", "b"), "Y").unwrap();
    verify(&out).unwrap();
    assert!(
        out.to_string()
            .contains(&format!("atomic Y[b, Y_back_tx] += {name}[Y_back_tx]")),
        "{out}"
    );
}

#[test]
fn plain_updates_need_every_grid_variable_as_an_index() {
    // Only the blocks with `a == 0` update row `b`: race-free, but staged, the blocks
    // with `a == 1` would add their zeros back into the same row.
    let f: Func = "\
pos func f(m) {
  axis I = dense_fixed(m)
  axis T = dense_fixed(32)
  buffer Y: f32[I, T] output values
  launch Y {
    block Y {
      for a in 0..2 bind(blockIdx.y) {
        for b in 0..m bind(blockIdx.x) {
          for u in 0..32 bind(threadIdx.x) {
            if a == 0 {
              Y[b, u] = Y[b, u] + 1.0
            }
          }
        }
      }
    }
  }
}
"
    .parse()
    .unwrap();
    verify(&f).unwrap();
    assert_eq!(
        error(&f, "b", "Y"),
        "cache_write_shared: loop `b` in block `Y` (line 8, column 9): cannot cache `Y`: its updates are plain, but no index position is the grid loop's variable `a`: other blocks may write the elements this block adds back (bind the updates atomically)"
    );
    // Atomically, the zeros are harmless.
    let atomic = edited(&f, "Y[b, u] = Y[b, u] + 1.0", "atomic Y[b, u] += 1.0");
    let (out, _) = cache_write_shared(&atomic, &at("Y", "b"), "Y").unwrap();
    verify(&out).unwrap();
}

#[test]
fn the_step_is_recorded_and_replays() {
    let program = sparsile::compile_notation(SPMM).unwrap();
    let mut sch = Schedule::new(&program);
    sch.bound(&at("Y", "c_2"), 32).unwrap();
    let (o, i) = sch
        .split(&at("Y", "j_p"), 4, SplitTail::InnerFixed)
        .unwrap();
    sch.reorder(&[i.clone(), o]).unwrap();
    sch.bind(&at("Y", "i_2"), axis("blockIdx.x")).unwrap();
    sch.bind_atomic(&i, axis("threadIdx.y")).unwrap();
    sch.bind(&at("Y", "c_2"), axis("threadIdx.x")).unwrap();
    let name = sch.cache_write_shared(&at("Y", "i_2"), "Y").unwrap();
    assert_eq!(name, "Y_shared");
    let last = sch.trace().steps.last().unwrap().clone();
    assert_eq!(last.primitive(), "cache_write_shared");
    assert!(matches!(&last, Step::CacheWriteShared { buffer, .. } if buffer == "Y"));
    let json = sch.trace().to_json();
    assert!(json.contains("\"step\": \"cache_write_shared\""), "{json}");
    let replayed = Trace::from_json(&json).unwrap().replay(&program).unwrap();
    assert_eq!(
        replayed.func().unwrap().to_string(),
        sch.func().unwrap().to_string()
    );
    // A refused call is not recorded.
    let steps = sch.trace().steps.len();
    let err: ScheduleError = sch.cache_write_shared(&at("Y", "i_2"), "A").unwrap_err();
    assert!(
        err.to_string().contains("only an output values buffer"),
        "{err}"
    );
    assert_eq!(sch.trace().steps.len(), steps);
}
