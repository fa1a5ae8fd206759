//! `parallelize` (TACO's `parallelize(unit, race strategy)`): every supported pair gives
//! the function of the primitive it names; the GPU axis is the first one free around the
//! loop; the CPU pairs match the interpreter (stage II, stage III, native) on matrices
//! with random rows, one huge row and no entries; refused pairs are named with what to
//! use instead; a schedule records the primitive (and replays), and a refused call
//! changes nothing.

// `ScheduleError` is large by design (it names the loop, block and span).
#![allow(clippy::result_large_err)]

mod features;

use features::{check, native_settings, spmm, spmv, ALL_ROWS};
use sparsile_ir::loops::{verify, Func, GpuAxis, GpuDim};
use sparsile_transform::lower_iterations;
use sparsile_transform::schedule::parallelize::{expansion, Expansion};
use sparsile_transform::schedule::{
    bind, bind_atomic, parallelize, reorder, split, warp_reduce, LoopRef, ParallelUnit,
    RaceStrategy, Schedule, SplitTail, Trace,
};

const SPMV: &str =
    "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n";

const X: GpuAxis = GpuAxis::Thread(GpuDim::X);
const Y: GpuAxis = GpuAxis::Thread(GpuDim::Y);
const Z: GpuAxis = GpuAxis::Thread(GpuDim::Z);
const BX: GpuAxis = GpuAxis::Block(GpuDim::X);
const BY: GpuAxis = GpuAxis::Block(GpuDim::Y);

use ParallelUnit::{CpuThread, GpuBlock, GpuThread, GpuWarp};
use RaceStrategy::{Atomics, IgnoreRaces, NoRaces, ParallelReduction, Temporary};

fn at(block: &str, var: &str) -> LoopRef {
    LoopRef::new(block, var)
}

fn split_at(func: &Func, block: &str, var: &str, factor: i64) -> Func {
    split(func, &at(block, var), factor, SplitTail::InnerFixed)
        .unwrap()
        .0
}

/// SpMV with its rows split by 4 and its non-zeros by 32, lanes outside: the CSR-vector
/// nest before any loop is bound.
fn csr_vector() -> Func {
    let program = sparsile::compile_notation(SPMV).unwrap();
    let f = lower_iterations(&program).unwrap();
    let f = split_at(&f, "y", "j_p", 32);
    let f = reorder(&f, &[at("y", "j_p_i"), at("y", "j_p_o")]).unwrap();
    let f = split_at(&f, "y", "i_2", 4);
    split_at(&f, "y.init", "i", 64)
}

#[test]
fn each_pair_is_the_primitive_it_names() {
    let mut by_sugar = csr_vector();
    let mut by_hand = by_sugar.clone();
    let steps: Vec<(LoopRef, ParallelUnit, RaceStrategy, Expansion)> = vec![
        (
            at("y", "j_p_i"),
            GpuThread,
            ParallelReduction,
            Expansion::WarpReduce,
        ),
        (at("y", "i_2_o"), GpuBlock, NoRaces, Expansion::Bind(BX)),
        (at("y", "i_2_i"), GpuWarp, NoRaces, Expansion::Bind(Y)),
        (
            at("y.init", "i_o"),
            GpuBlock,
            Atomics,
            Expansion::BindAtomic(BX),
        ),
        (at("y.init", "i_i"), GpuThread, NoRaces, Expansion::Bind(X)),
    ];
    for (target, unit, race, want) in steps {
        let what = format!("{target} {unit} {race}");
        assert_eq!(
            expansion(&by_sugar, &target, unit, race).unwrap(),
            want,
            "{what}"
        );
        by_sugar =
            parallelize(&by_sugar, &target, unit, race).unwrap_or_else(|e| panic!("{what}: {e}"));
        by_hand = match want {
            Expansion::WarpReduce => warp_reduce(&by_hand, &target),
            Expansion::Bind(a) => bind(&by_hand, &target, a),
            Expansion::BindAtomic(a) => bind_atomic(&by_hand, &target, a),
            other => panic!("{what}: {other:?}"),
        }
        .unwrap();
        verify(&by_sugar).unwrap_or_else(|e| panic!("{what}: {e:?}"));
        assert_eq!(by_sugar.to_string(), by_hand.to_string(), "{what}");
    }
    let text = by_sugar.to_string();
    for bound in [
        "bind(blockIdx.x)",
        "bind(threadIdx.y)",
        "bind(threadIdx.x)",
        "warp_sum",
    ] {
        assert!(text.contains(bound), "{bound}:\n{text}");
    }
}

/// The axis is the first of its unit's that no loop around the target takes: a second
/// level of blocks goes to `blockIdx.y`, a second level of warps to `threadIdx.z`, and a
/// second level of lanes has no axis left.
#[test]
fn the_axis_is_the_first_free_one_around_the_loop() {
    let f = warp_reduce(&csr_vector(), &at("y", "j_p_i")).unwrap();
    let f = bind(&f, &at("y", "i_2_o"), BX).unwrap();
    let f = bind(&f, &at("y", "i_2_i"), Y).unwrap();
    let inner = at("y", "j_p_o");
    assert_eq!(
        expansion(&f, &inner, GpuBlock, NoRaces).unwrap(),
        Expansion::Bind(BY)
    );
    assert_eq!(
        expansion(&f, &inner, GpuWarp, Atomics).unwrap(),
        Expansion::BindAtomic(Z)
    );
    assert_eq!(
        expansion(&f, &inner, GpuThread, NoRaces).unwrap_err().to_string(),
        "parallelize: loop `j_p_o` in block `y`: `gpu_thread` with `no_races` is not supported: the loops around it take every lane (threadIdx.x) axis"
    );
    // Before the first bind nothing is bound: the first axis of each unit.
    let fresh = csr_vector();
    for (unit, axis) in [(GpuBlock, BX), (GpuWarp, Y), (GpuThread, X)] {
        assert_eq!(
            expansion(&fresh, &at("y", "i_2_o"), unit, NoRaces).unwrap(),
            Expansion::Bind(axis)
        );
    }
}

#[test]
fn refused_pairs_say_what_to_use() {
    let f = csr_vector();
    let target = at("y", "i_2_o");
    let cases = [
        (GpuBlock, IgnoreRaces, "`gpu_block` with `ignore_races` is not supported: Sparsile makes no code whose result depends on how threads interleave; use `no_races` (checked), `atomics` or a reduction"),
        (CpuThread, ParallelReduction, "`cpu_thread` with `parallel_reduction` is not supported: CPU threads combine shared sums with `atomics` or `temporary(COPIES)`"),
        (GpuBlock, ParallelReduction, "`gpu_block` with `parallel_reduction` is not supported: a reduction over threads runs on the lanes of a warp: split the reduction loop and parallelize its inner part with `gpu_thread`"),
        (GpuWarp, Temporary { copies: 4 }, "`gpu_warp` with `temporary(4)` is not supported: GPU threads combine shared sums with `atomics`, or with `parallel_reduction` on `gpu_thread`"),
    ];
    for (unit, race, want) in cases {
        let got = parallelize(&f, &target, unit, race)
            .unwrap_err()
            .to_string();
        assert_eq!(
            got,
            format!("parallelize: loop `i_2_o` in block `y`: {want}")
        );
    }
    // The primitive's own preconditions come back under its name.
    let err = parallelize(&f, &at("y", "j_p_i"), GpuThread, NoRaces)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("bind: loop `j_p_i` in block `y`"), "{err}");
    assert!(err.contains("warp_reduce resolve it"), "{err}");
}

#[test]
fn unit_and_strategy_names_round_trip() {
    for unit in ParallelUnit::ALL {
        assert_eq!(unit.to_string().parse::<ParallelUnit>().unwrap(), unit);
    }
    for race in [
        NoRaces,
        Atomics,
        ParallelReduction,
        IgnoreRaces,
        Temporary { copies: 8 },
    ] {
        assert_eq!(race.to_string().parse::<RaceStrategy>().unwrap(), race);
    }
    assert_eq!(
        "gpu_grid".parse::<ParallelUnit>().unwrap_err(),
        "unknown parallel unit `gpu_grid`: cpu_thread, gpu_block, gpu_warp or gpu_thread"
    );
    assert_eq!(
        "temporary(x)".parse::<RaceStrategy>().unwrap_err(),
        "race strategy `temporary(x)`: `x` is not a count of copies"
    );
    assert!("races".parse::<RaceStrategy>().is_err());
}

/// CPU threads: `no_races` is `parallel` (rows), `atomics` and `temporary(c)` are
/// `parallel_reduce` over all non-zeros — each checked against the interpreter.
#[test]
fn cpu_pairs_match_the_interpreter() {
    let cache = tempfile::tempdir().unwrap();
    let native = native_settings(cache.path());
    let mut seed = 700;
    for rows in ALL_ROWS {
        for (m, n, k) in [(7, 5, 3), (1, 4, 2), (0, 3, 2)] {
            seed += 1;
            for (case, block) in [
                (spmv(m, n, rows, seed), "y"),
                (spmm(m, n, k, rows, seed), "C"),
            ] {
                let mut sch = Schedule::new(&case.program);
                sch.parallelize(&at(block, "i_2"), CpuThread, NoRaces)
                    .unwrap_or_else(|e| panic!("{}: {e}", case.label));
                assert_eq!(sch.trace().steps.last().unwrap().primitive(), "parallel");
                check(&case, &sch, native.as_ref());
                for race in [Atomics, Temporary { copies: 3 }] {
                    let mut sch = Schedule::new(&case.program);
                    sch.sparse_fuse(block, &["I_m".to_string(), "A_J".to_string()])
                        .unwrap();
                    let func = sch.func_or_lower().unwrap().clone();
                    let Some(sparsile_ir::loops::Stmt::Block { body, .. }) =
                        func.body.iter().find(|s| {
                            matches!(s, sparsile_ir::loops::Stmt::Block { name, .. } if name == block)
                        })
                    else {
                        panic!("no block {block}")
                    };
                    let Some(sparsile_ir::loops::Stmt::For(outer)) = body.first() else {
                        panic!("no loop in {block}")
                    };
                    let target = at(block, &func.vars[outer.var].name);
                    sch.parallelize(&target, CpuThread, race)
                        .unwrap_or_else(|e| panic!("{} {race}: {e}", case.label));
                    let json = sch.trace().to_json();
                    assert!(json.contains("\"step\": \"parallel_reduce\""), "{json}");
                    let want = match race {
                        Atomics => "atomic",
                        _ => "per_thread",
                    };
                    assert!(json.contains(want), "{race}: {json}");
                    check(&case, &sch, native.as_ref());
                }
            }
        }
    }
}

/// A schedule records the primitive each call becomes, so its trace replays without
/// knowing `parallelize`; a refused call records nothing, not even the lowering.
#[test]
fn schedules_record_the_primitive_and_replay() {
    let program = sparsile::compile_notation(SPMV).unwrap();
    let mut sch = Schedule::new(&program);
    let err = sch
        .parallelize(&at("y", "i_2"), GpuBlock, IgnoreRaces)
        .unwrap_err();
    assert!(err.to_string().contains("ignore_races"), "{err}");
    assert!(sch.trace().steps.is_empty(), "{:?}", sch.trace().steps);
    assert!(sch.func().is_none());
    let (_, lanes) = sch
        .split(&at("y", "j_p"), 32, SplitTail::InnerFixed)
        .unwrap();
    sch.reorder(&[lanes.clone(), at("y", "j_p_o")]).unwrap();
    sch.parallelize(&lanes, GpuThread, ParallelReduction)
        .unwrap();
    let (rows_o, rows_i) = sch
        .split(&at("y", "i_2"), 4, SplitTail::InnerFixed)
        .unwrap();
    sch.parallelize(&rows_o, GpuBlock, NoRaces).unwrap();
    sch.parallelize(&rows_i, GpuWarp, NoRaces).unwrap();
    let names: Vec<&str> = sch.trace().steps.iter().map(|s| s.primitive()).collect();
    assert_eq!(
        names,
        [
            "lower",
            "split",
            "reorder",
            "warp_reduce",
            "split",
            "bind",
            "bind"
        ]
    );
    let json = sch.trace().to_json();
    let replayed = Trace::from_json(&json).unwrap().replay(&program).unwrap();
    assert_eq!(
        replayed.func().unwrap().to_string(),
        sch.func().unwrap().to_string()
    );
}
