//! The GPU schedule primitives `bind`, `bind_atomic` and `warp_reduce`: the before/after
//! text files (`schedule/gpu/X.before` names the calls in its leading `# ` lines:
//! `split BLOCK VAR FACTOR`, `reorder BLOCK VAR...`, `bind BLOCK VAR AXIS`,
//! `bind_atomic BLOCK VAR AXIS`, `warp_reduce BLOCK VAR`; `SPARSILE_BLESS=1` rewrites
//! `X.after`), one test per precondition with its exact message, and the `Schedule`
//! methods with their trace steps (JSON round trip and replay).

// `ScheduleError` is large by design (it names the loop, block and span); the library
// allows this lint too.
#![allow(clippy::result_large_err)]

mod expected_text;

use sparsile_ir::loops::{verify, Func, GpuAxis, GpuDim};
use sparsile_transform::lower_iterations;
use sparsile_transform::schedule::{
    absorb_init, bind, bind_atomic, cache_shared, cache_write, fuse_launches, reorder, split,
    warp_reduce, LoopRef, Schedule, ScheduleError, SplitTail, Trace,
};

const SPMV: &str =
    "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n";

fn at(block: &str, var: &str) -> LoopRef {
    LoopRef::new(block, var)
}

fn lowered(text: &str) -> Func {
    lower_iterations(&sparsile::compile_notation(text).unwrap()).unwrap()
}

fn axis(text: &str) -> GpuAxis {
    GpuAxis::parse(text).unwrap_or_else(|| panic!("not an axis: {text}"))
}

/// Applies one `# ` call of a `.before` file.
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
        ["bind", b, v, a] => bind(func, &at(b, v), axis(a)),
        ["bind_atomic", b, v, a] => bind_atomic(func, &at(b, v), axis(a)),
        ["warp_reduce", b, v] => warp_reduce(func, &at(b, v)),
        ["cache_write", b, v, buffer] => cache_write(func, &at(b, v), buffer).map(|(f, _)| f),
        ["cache_shared", b, v, buffer] => cache_shared(func, &at(b, v), buffer).map(|(f, _)| f),
        ["absorb_init", b, buffer] => absorb_init(func, b, buffer),
        _ => panic!("unknown call `{line}`"),
    };
    let out = out.unwrap_or_else(|e| panic!("`{line}`: {e}"));
    verify(&out).unwrap_or_else(|e| panic!("`{line}`: does not verify: {e:?}"));
    out
}

#[test]
fn before_after_files() {
    for file in expected_text::before_files("gpu") {
        let mut func = file.func.clone();
        for line in &file.calls {
            func = call(&func, line);
        }
        expected_text::check_after(&file.path, &func.to_string());
    }
}

/// The message of the error `f` returns on the lowered `text` after `setup` calls.
fn error(text: &str, setup: &[&str], f: impl Fn(&Func) -> Result<Func, ScheduleError>) -> String {
    let mut func = lowered(text);
    for line in setup {
        func = call(&func, line);
    }
    match f(&func) {
        Ok(out) => panic!("{setup:?}: expected an error, got\n{out}"),
        Err(e) => e.to_string(),
    }
}

/// A row loop that stores outside the loop over `t`.
const STORES: &str = "\
pos func f(m) {
  axis I = dense_fixed(m)
  axis T = dense_fixed(32)
  buffer y: f32[I] output values
  buffer z: f32[I, T] output values
  block b {
    for i in 0..m {
      y[i] = 1.0
      for t in 0..32 {
        z[i, t] = 2.0
      }
    }
  }
}
";

const X: GpuAxis = GpuAxis::Thread(GpuDim::X);
const Y: GpuAxis = GpuAxis::Thread(GpuDim::Y);
const BX: GpuAxis = GpuAxis::Block(GpuDim::X);

#[test]
fn bind_preconditions() {
    let cases: Vec<(String, &str)> = vec![
        (
            error(SPMV, &[], |f| bind(f, &at("y", "j_p"), BX)),
            "bind: loop `j_p` in block `y` (line 4, column 1) cannot be bound to `blockIdx.x`: a loop bound to the grid must be the outermost loop of its block, or the whole body of a loop bound to the grid",
        ),
        (
            error(SPMV, &[], |f| bind(f, &at("y", "i_2"), X)),
            "bind: loop `i_2` in block `y` (line 4, column 1) cannot be bound to `threadIdx.x`: its bounds are not integer literals (split it by a constant, or specialize its extent)",
        ),
        (
            error(SPMV, &["split y i_2 2048"], |f| bind(f, &at("y", "i_2_i"), X)),
            "bind: loop `i_2_i` in block `y` (line 4, column 1) cannot be bound to `threadIdx.x`: it runs 2048 iterations (a block has 1 to 1024 threads)",
        ),
        (
            error(
                SPMV,
                &["split y i_2 64", "split y i_2_o 32", "bind y i_2_i threadIdx.x"],
                |f| bind(f, &at("y", "i_2_o_i"), Y),
            ),
            "bind: loop `i_2_o_i` in block `y` (line 4, column 1) cannot be bound to `threadIdx.y`: the block would have 64 x 32 x 1 = 2048 threads (at most 1024)",
        ),
        (
            error(SPMV, &["split y j_p 32"], |f| bind(f, &at("y", "j_p_i"), X)),
            "bind: loop `j_p_i` in block `y` (line 4, column 1): different iterations may access the same element of `y` through `y[i_2]` (line 4, column 1): the element does not depend on `j_p_i` (a reduction across iterations: parallel_reduce, bind_atomic or warp_reduce resolve it)",
        ),
        (
            error(SPMV, &["bind y i_2 blockIdx.x"], |f| bind(f, &at("y", "i_2"), BX)),
            "bind: loop `i_2` in block `y` (line 4, column 1) is bound, only serial loops (and, for split, parallel ones) can be transformed",
        ),
        (
            error(
                SPMV,
                &["split y i_2 64", "split y i_2_i 32", "bind y i_2_i_o threadIdx.x"],
                |f| bind(f, &at("y", "i_2_i_i"), X),
            ),
            "bind: loop `i_2_i_i` in block `y` (line 4, column 1) cannot be bound to `threadIdx.x`: a loop around it is bound to `threadIdx.x`",
        ),
        (
            error(
                SPMV,
                &["split y i_2 64", "split y i_2_i 32", "bind y i_2_i_o threadIdx.x"],
                |f| bind(f, &at("y", "i_2_i_i"), BX),
            ),
            "bind: loop `i_2_i_i` in block `y` (line 4, column 1) cannot be bound to `blockIdx.x`: a loop bound to the grid must be the outermost loop of its block, or the whole body of a loop bound to the grid",
        ),
        (
            error(
                SPMV,
                &["cache_write y i_2 y", "split y j_p 32"],
                |f| bind_atomic(f, &at("y", "j_p_i"), X),
            ),
            "bind: loop `j_p_i` in block `y` (line 4, column 1) cannot be bound to `threadIdx.x`: it stores to local `y_local`, which is used outside the loop too (a local is private to each thread)",
        ),
        (
            {
                let f: Func = STORES.parse().unwrap();
                let f = bind(&f, &at("b", "i"), BX).unwrap();
                bind(&f, &at("b", "t"), X).unwrap_err().to_string()
            },
            "bind: loop `t` in block `b` (line 9, column 7) cannot be bound to `threadIdx.x`: the launch would have 32 threads per block, but the store to `y` (line 8, column 7) is outside every loop bound to `threadIdx.x`, so every thread would store it",
        ),
        (
            error(SPMV, &["bind y i_2 blockIdx.x"], |f| {
                bind(f, &at("y", "j_p"), GpuAxis::Block(GpuDim::Y))
            }),
            "bind: loop `j_p` in block `y` (line 4, column 1) cannot be bound to `blockIdx.y`: its bounds read a variable or a buffer that is not an input; the grid is sized before the launch, from parameters, literals and input arrays",
        ),
    ];
    let mut failures = Vec::new();
    for (got, want) in &cases {
        if got != want {
            failures.push(format!("got:  {got}\nwant: {want}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn warp_reduce_preconditions() {
    let cases: Vec<(String, &str)> = vec![
        (
            error(SPMV, &["split y j_p 24", "reorder y j_p_i j_p_o"], |f| {
                warp_reduce(f, &at("y", "j_p_i"))
            }),
            "warp_reduce: loop `j_p_i` in block `y` (line 4, column 1) cannot be bound to `threadIdx.x`: a warp reduction runs `0..lanes` with lanes a power of two from 2 to 32",
        ),
        (
            error(SPMV, &["split y.init i 32"], |f| {
                warp_reduce(f, &at("y.init", "i_i"))
            }),
            "warp_reduce: loop `i_i` in block `y.init`: the iterations share no element as a sum: the loop has no update `X[e] = X[e] + v` (line 4, column 1)",
        ),
        (
            error(
                SPMV,
                &["cache_write y i_2 y", "split y j_p 32", "reorder y j_p_i j_p_o"],
                |f| warp_reduce(f, &at("y", "j_p_i")),
            ),
            "warp_reduce: loop `j_p_i` in block `y`: the iterations share `y_local` but not as a float sum in memory (a local would hold the sum in one lane only) (line 4, column 1)",
        ),
        (
            error(SPMV, &["split y i_2 32"], |f| warp_reduce(f, &at("y", "i_2_i"))),
            "warp_reduce: loop `i_2_i` in block `y`: the iterations share `y` but not as a sum: the updated element depends on the loop or on what it declares or writes (line 4, column 1)",
        ),
    ];
    let mut failures = Vec::new();
    for (got, want) in &cases {
        if got != want {
            failures.push(format!("got:  {got}\nwant: {want}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn bind_atomic_turns_only_sums_into_atomic_adds() {
    let text = STORES.replace(
        "      y[i] = 1.0\n",
        "      for u in 0..4 {\n        y[i] = y[i] + 1.0\n        y[i] = 3.0\n      }\n",
    );
    let f: Func = text.parse().unwrap();
    let err = bind_atomic(&f, &at("b", "u"), X).unwrap_err().to_string();
    assert_eq!(
        err,
        "bind_atomic: loop `u` in block `b`: the iterations share `y` but not as a sum: a store that is not `X[e] = X[e] + v` (with `v` not reading `X`) (line 10, column 9)"
    );
    let sums: Func = STORES
        .replace("      y[i] = 1.0\n", "")
        .replace("z[i, t] = 2.0", "z[i, 0] = z[i, 0] + 2.0")
        .parse()
        .unwrap();
    let out = bind_atomic(&sums, &at("b", "t"), X).unwrap();
    assert!(out.to_string().contains("atomic z[i, 0] += 2.0"), "{out}");
}

#[test]
fn gpu_steps_are_recorded_and_replay() {
    let program = sparsile::compile_notation(SPMV).unwrap();
    let mut sch = Schedule::new(&program);
    let (_, lanes) = sch
        .split(&at("y", "j_p"), 32, SplitTail::InnerFixed)
        .unwrap();
    sch.reorder(&[lanes.clone(), at("y", "j_p_o")]).unwrap();
    sch.warp_reduce(&lanes).unwrap();
    let (rows_o, rows_i) = sch
        .split(&at("y", "i_2"), 4, SplitTail::InnerFixed)
        .unwrap();
    sch.bind(&rows_o, BX).unwrap();
    sch.bind(&rows_i, Y).unwrap();
    let (init_o, init_i) = sch
        .split(&at("y.init", "i"), 64, SplitTail::InnerFixed)
        .unwrap();
    sch.bind_atomic(&init_o, BX).unwrap();
    sch.bind(&init_i, X).unwrap();
    let json = sch.trace().to_json();
    assert!(json.contains("\"step\": \"warp_reduce\""), "{json}");
    assert!(json.contains("\"axis\": \"threadIdx.y\""), "{json}");
    assert!(json.contains("\"step\": \"bind_atomic\""), "{json}");
    let replayed = Trace::from_json(&json).unwrap().replay(&program).unwrap();
    assert_eq!(
        replayed.func().unwrap().to_string(),
        sch.func().unwrap().to_string()
    );
    let bad = json.replace("threadIdx.y", "threadIdx.w");
    let err = Trace::from_json(&bad).unwrap_err().to_string();
    assert!(err.contains("`threadIdx.w` is not a GPU axis"), "{err}");
}

/// Three launches over `n` elements: `a` writes `y`, `b` adds into `z` atomically,
/// `c` reads `y` and adds into `z` plainly, with a barrier over 64 threads.
const LAUNCHES: &str = "\
flat func f(n) {
  buffer x: f32[n] input values
  buffer y: f32[n] output values
  buffer z: f32[1] output values
  launch a {
    for i in 0..n bind(blockIdx.x) {
      for t in 0..32 bind(threadIdx.x) {
        y[i] = x[i]
      }
    }
  }
  launch b {
    for i2 in 0..n bind(blockIdx.x) {
      for t2 in 0..32 bind(threadIdx.x) {
        atomic z[0] += x[i2]
      }
    }
  }
  launch c {
    for i3 in 0..n bind(blockIdx.x) {
      for t3 in 0..64 bind(threadIdx.x) {
        sync_threads
        z[0] = y[i3]
      }
    }
  }
  launch d {
    for i4 in 0..n {
      z[0] = 0.0
    }
  }
}
";

#[test]
fn fuse_launches_runs_independent_launches_as_one() {
    let f: Func = LAUNCHES.parse().unwrap();
    let names = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let fused = fuse_launches(&f, &names(&["a", "b"])).unwrap();
    verify(&fused).unwrap();
    let text = fused.to_string();
    assert!(!text.contains("launch b"), "{text}");
    assert!(
        text.contains("launch a {\n    for i in 0..n bind(blockIdx.x) {"),
        "{text}"
    );
    assert!(text.contains("for i2 in 0..n bind(blockIdx.x)"), "{text}");
    let cases = [
        (names(&["a"]), "fuse_launches: launches `a`: two launches or more are fused, 1 given"),
        (names(&["a", "a"]), "fuse_launches: launches `a`, `a`: launch `a` is named twice"),
        (names(&["a", "e"]), "fuse_launches: launches `a`, `e`: no launch `e` in the function"),
        (names(&["a", "c"]), "fuse_launches: launches `a`, `c`: launch `c` does not follow launch `a`"),
        (
            names(&["b", "c"]),
            "fuse_launches: launches `b`, `c`: launches `b` and `c` both write `z`, not only with atomic adds",
        ),
        (
            names(&["c", "d"]),
            "fuse_launches: launches `c`, `d`: launch `d` holds a statement outside its loops bound to `blockIdx.x` (it would run in every block of every part)",
        ),
    ];
    for (launches, want) in cases {
        let got = fuse_launches(&f, &launches).unwrap_err().to_string();
        assert_eq!(got, want);
    }
    // `a` writes `y`, which `c` reads (with `b` between them, fused first).
    let ab = fuse_launches(&f, &names(&["a", "b"])).unwrap();
    let err = fuse_launches(&ab, &names(&["a", "c"]))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "fuse_launches: launches `a`, `c`: launch `c` reads `y`, which launch `a` writes: they cannot run at once"
    );
    // A barrier whose threads no longer cover the fused block.
    let barrier: Func = LAUNCHES
        .replace("z[0] = y[i3]", "atomic z[0] += 1.0")
        .replace(
            "        y[i] = x[i]\n",
            "        y[i] = x[i]\n        sync_threads\n",
        )
        .parse()
        .unwrap();
    let err = fuse_launches(&barrier, &names(&["b", "c"]));
    assert!(err.is_ok(), "{err:?}");
    let ab = fuse_launches(&barrier, &names(&["a", "b"])).unwrap();
    let err = fuse_launches(&ab, &names(&["a", "c"]))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "fuse_launches: launches `a`, `c`: the fused launch breaks a GPU rule: line"
        ),
        "{err}"
    );
    assert!(err.contains("leaves some threads out"), "{err}");
}
