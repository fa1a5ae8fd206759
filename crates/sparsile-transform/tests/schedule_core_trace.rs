//! Schedule traces: serialise to JSON, read back, replay on a fresh program, and compare
//! the printed IR (stage II and, after `finish`, stage III).

#[path = "schedule/harness.rs"]
mod harness;

use harness::{case, check_func, spmm};
use sparsile_transform::schedule::{LoopRef, Schedule, SplitTail, Step, Trace};

fn scheduled(format: &str) -> (sparsile_ir::coord::Program, Schedule) {
    let program = sparsile::compile_notation(&spmm(format)).unwrap();
    let mut sch = Schedule::new(&program);
    let func = sch.func_or_lower().unwrap().clone();
    let outer = |block: &str| {
        let body = func
            .body
            .iter()
            .find_map(|s| match s {
                sparsile_ir::loops::Stmt::Block { name, body, .. } if name == block => Some(body),
                _ => None,
            })
            .unwrap();
        let sparsile_ir::loops::Stmt::For(f) = &body[0] else {
            panic!("no loop")
        };
        LoopRef::new(block, func.vars[f.var].name.clone())
    };
    let init = func
        .body
        .iter()
        .find_map(|s| match s {
            sparsile_ir::loops::Stmt::Block { name, .. } if name != "C" => Some(name.clone()),
            _ => None,
        })
        .unwrap();
    let (o, i) = sch.split(&outer("C"), 3, SplitTail::InnerFixed).unwrap();
    sch.reorder(&[i.clone(), o.clone()]).unwrap();
    let fused = sch.fuse(&i, &o).unwrap();
    sch.split(&fused, 2, SplitTail::OuterFixed).unwrap();
    let init_outer = outer(&init);
    sch.split(&init_outer, 4, SplitTail::OuterFixed).unwrap();
    (program, sch)
}

#[test]
fn json_round_trip_and_replay_give_identical_ir() {
    for format in ["csr", "bsr:2x2", "ell"] {
        let (program, sch) = scheduled(format);
        let json = sch.trace().to_json();
        let trace = Trace::from_json(&json).unwrap();
        assert_eq!(&trace, sch.trace());
        assert_eq!(trace.to_json(), json);
        assert_eq!(trace.steps[0], Step::Lower);
        assert_eq!(trace.steps.len(), 6);
        let replayed = trace.replay(&program).unwrap();
        assert_eq!(
            replayed.func().unwrap().to_string(),
            sch.func().unwrap().to_string()
        );
        let (a, b) = (sch.finish().unwrap(), replayed.finish().unwrap());
        assert_eq!(a.stage2.to_string(), b.stage2.to_string());
        assert_eq!(a.stage3.to_string(), b.stage3.to_string());
    }
}

#[test]
fn replayed_schedule_computes_the_same() {
    let c = case(&spmm("csr"), &[("m", 10), ("n", 6), ("k", 3)], 0.4, 11);
    let (_, sch) = scheduled("csr");
    let replayed = Trace::from_json(&sch.trace().to_json())
        .unwrap()
        .replay(&c.program)
        .unwrap();
    check_func(&c, replayed.func().unwrap());
}

#[test]
fn the_json_names_steps_and_arguments() {
    let (_, sch) = scheduled("csr");
    let value: serde_json::Value = serde_json::from_str(&sch.trace().to_json()).unwrap();
    let steps = value["steps"].as_array().unwrap();
    assert_eq!(steps[0]["step"], "lower");
    assert_eq!(steps[1]["step"], "split");
    assert_eq!(steps[1]["factor"], 3);
    assert_eq!(steps[1]["tail"], "InnerFixed");
    assert_eq!(steps[1]["target"]["block"], "C");
    assert_eq!(steps[2]["step"], "reorder");
    assert_eq!(steps[3]["step"], "fuse");
}

#[test]
fn replay_on_another_program_reports_where_it_fails() {
    let (_, sch) = scheduled("csr");
    let other = sparsile::compile_notation(
        "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n",
    )
    .unwrap();
    let e = sch.trace().replay(&other).unwrap_err();
    assert_eq!(e.to_string(), "split: no block `C` in the function");
}

#[test]
fn stage_one_and_stage_two_steps_replay_together() {
    let text = harness::sddmm("csr");
    let c = case(&text, &[("m", 9), ("n", 7), ("k", 2)], 0.4, 21);
    let mut sch = Schedule::new(&c.program);
    let fuse_axes = vec!["I_m".to_string(), "A_J".to_string()];
    sch.sparse_fuse("C", &fuse_axes).unwrap();
    let func = sch.func_or_lower().unwrap().clone();
    let body = func
        .body
        .iter()
        .find_map(|s| match s {
            sparsile_ir::loops::Stmt::Block { name, body, .. } if name == "C" => Some(body),
            _ => None,
        })
        .unwrap();
    let sparsile_ir::loops::Stmt::For(f) = &body[0] else {
        panic!("block C does not start with a loop:\n{func}")
    };
    let outer = LoopRef::new("C", func.vars[f.var].name.clone());
    sch.split(&outer, 4, SplitTail::InnerFixed).unwrap();
    check_func(&c, sch.func().unwrap());
    let trace = Trace::from_json(&sch.trace().to_json()).unwrap();
    assert!(matches!(trace.steps[0], Step::SparseFuse { .. }));
    assert_eq!(trace.steps[1], Step::Lower);
    let replayed = trace.replay(&c.program).unwrap();
    assert_eq!(replayed.program().to_string(), sch.program().to_string());
    assert_eq!(
        replayed.func().unwrap().to_string(),
        sch.func().unwrap().to_string()
    );
}

#[test]
fn loop_kind_steps_replay_and_compute_the_same() {
    let c = case(&spmm("csr"), &[("m", 10), ("n", 6), ("k", 3)], 0.4, 31);
    let mut sch = Schedule::new(&c.program);
    sch.parallel(&LoopRef::new("C", "i_2")).unwrap();
    // Splitting a parallel loop keeps the tiles parallel.
    let (rows_o, _rows_i) = sch
        .split(&LoopRef::new("C", "i_2"), 4, SplitTail::InnerFixed)
        .unwrap();
    assert_eq!(rows_o.var, "i_2_o");
    let cols = LoopRef::new("C", "k2_2");
    sch.bound(&cols, 4).unwrap();
    sch.unroll(&cols).unwrap();
    sch.vectorize(&LoopRef::new("C.init", "k2")).unwrap();
    check_func(&c, sch.func().unwrap());
    let trace = Trace::from_json(&sch.trace().to_json()).unwrap();
    // lower, parallel, split, bound, unroll, vectorize
    assert_eq!(trace.steps.len(), 6);
    let replayed = trace.replay(&c.program).unwrap();
    assert_eq!(
        replayed.func().unwrap().to_string(),
        sch.func().unwrap().to_string()
    );
    let lowered = replayed.finish().unwrap();
    assert!(lowered.stage3.to_string().contains("parallel"));
}
