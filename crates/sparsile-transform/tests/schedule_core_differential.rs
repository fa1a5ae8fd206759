//! Differential tests of split, fuse and reorder: SpMM, SpMV and SDDMM on CSR, BSR and
//! ELL inputs with empty rows and sizes the factors do not divide, scheduled, then run
//! through `flat_interp` (stage II and stage III) against the stage-I interpreter; and a
//! property test over random sequences of legal schedule calls.

#[path = "schedule/harness.rs"]
mod harness;

use harness::{case, check_func, sddmm, spmm, spmv, Case};
use proptest::prelude::*;
use sparsile_ir::loops::{Func, Stmt};
use sparsile_transform::schedule::{LoopRef, Schedule, SplitTail};

const FORMATS: [&str; 3] = ["csr", "bsr:2x2", "ell"];
const SIZES: [(&str, usize); 3] = [("m", 7), ("n", 5), ("k", 3)];

fn cases(seed: u64) -> Vec<Case> {
    let mut out = Vec::new();
    for (s, f) in FORMATS.iter().enumerate() {
        for (t, text) in [spmm(f), spmv(f), sddmm(f)].iter().enumerate() {
            out.push(case(text, &SIZES, 0.5, seed * 100 + (s * 10 + t) as u64));
        }
    }
    out
}

/// The outermost loop of block `block`.
fn outer_loop(func: &Func, block: &str) -> LoopRef {
    fn find<'a>(stmts: &'a [Stmt], block: &str) -> Option<&'a [Stmt]> {
        stmts.iter().find_map(|s| match s {
            Stmt::Block { name, body, .. } if name == block => Some(body.as_slice()),
            Stmt::Block { body, .. } => find(body, block),
            _ => None,
        })
    }
    let body = find(&func.body, block).expect("block");
    match body.first() {
        Some(Stmt::For(f)) => LoopRef::new(block, func.vars[f.var].name.clone()),
        other => panic!("block {block} starts with {other:?}"),
    }
}

/// The main (non-init) block: the one of the last top-level statement.
fn main_block(func: &Func) -> String {
    match func.body.last() {
        Some(Stmt::Block { name, .. }) => name.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn split_outer_loop_both_tails_every_kernel_and_format() {
    for c in cases(1) {
        for tail in [SplitTail::InnerFixed, SplitTail::OuterFixed] {
            for factor in [1, 2, 3, 4, 8] {
                let mut sch = Schedule::new(&c.program);
                let func = sch.func_or_lower().unwrap().clone();
                let target = outer_loop(&func, &main_block(&func));
                sch.split(&target, factor, tail).unwrap();
                check_func(&c, sch.func().unwrap());
            }
        }
    }
}

#[test]
fn split_then_fuse_back_and_reorder_the_tiles() {
    for c in cases(2) {
        let mut sch = Schedule::new(&c.program);
        let func = sch.func_or_lower().unwrap().clone();
        let block = main_block(&func);
        let target = outer_loop(&func, &block);
        let (o, i) = sch.split(&target, 3, SplitTail::InnerFixed).unwrap();
        check_func(&c, sch.func().unwrap());
        // The tile loops have constant / invariant bounds: they can swap and fuse.
        sch.reorder(&[i.clone(), o.clone()]).unwrap();
        check_func(&c, sch.func().unwrap());
        sch.fuse(&i, &o).unwrap();
        check_func(&c, sch.func().unwrap());
    }
}

#[test]
fn fuse_and_reorder_dense_loops_of_the_init_block() {
    // SpMM's init block is a dense 2-D nest: reorder, then fuse it.
    for f in FORMATS {
        let c = case(&spmm(f), &[("m", 9), ("n", 4), ("k", 5)], 0.4, 7);
        let mut sch = Schedule::new(&c.program);
        let func = sch.func_or_lower().unwrap().clone();
        let block = match &func.body[0] {
            Stmt::Block { name, .. } => name.clone(),
            other => panic!("{other:?}"),
        };
        let outer = outer_loop(&func, &block);
        let (_o, inner) = {
            let Stmt::Block { body, .. } = &func.body[0] else {
                unreachable!()
            };
            let Stmt::For(f) = &body[0] else {
                unreachable!()
            };
            let Stmt::For(g) = &f.body[0] else {
                unreachable!()
            };
            (
                outer.clone(),
                LoopRef::new(&block, func.vars[g.var].name.clone()),
            )
        };
        sch.reorder(&[inner.clone(), outer.clone()]).unwrap();
        check_func(&c, sch.func().unwrap());
        let fused = sch.fuse(&inner, &outer).unwrap();
        check_func(&c, sch.func().unwrap());
        sch.split(&fused, 4, SplitTail::OuterFixed).unwrap();
        check_func(&c, sch.func().unwrap());
    }
}

/// Every loop of `func`, as (block, var, the only child loop when the body is exactly
/// one loop whose bounds do not read this loop's variable).
fn loops(func: &Func) -> Vec<(LoopRef, Option<LoopRef>)> {
    fn walk(func: &Func, block: &str, stmts: &[Stmt], out: &mut Vec<(LoopRef, Option<LoopRef>)>) {
        for s in stmts {
            match s {
                Stmt::Block { name, body, .. } => walk(func, name, body, out),
                Stmt::For(f) => {
                    let me = LoopRef::new(block, func.vars[f.var].name.clone());
                    let child = match f.body.as_slice() {
                        [Stmt::For(g)] => {
                            let mut reads = false;
                            for e in [&g.lo, &g.hi] {
                                e.visit(&mut |x| {
                                    reads |=
                                        matches!(x, sparsile_ir::loops::Expr::Var(v) if *v == f.var)
                                });
                            }
                            (!reads).then(|| LoopRef::new(block, func.vars[g.var].name.clone()))
                        }
                        _ => None,
                    };
                    out.push((me, child));
                    walk(func, block, &f.body, out);
                }
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(func, block, then_body, out);
                    walk(func, block, else_body, out);
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(func, "", &func.body, &mut out);
    out
}

/// Every loop directly below `f` in its body after `let`s: `(f, that loop)` pairs that
/// `reorder` can swap when the inner bounds do not read `f`'s variable.
fn pairs_across_lets(func: &Func) -> Vec<(LoopRef, LoopRef)> {
    let mut out = Vec::new();
    fn walk(func: &Func, block: &str, stmts: &[Stmt], out: &mut Vec<(LoopRef, LoopRef)>) {
        for s in stmts {
            match s {
                Stmt::Block { name, body, .. } => walk(func, name, body, out),
                Stmt::For(f) => {
                    let rest: Vec<&Stmt> = f
                        .body
                        .iter()
                        .skip_while(|s| matches!(s, Stmt::Let { .. }))
                        .collect();
                    if let [Stmt::For(g)] = rest.as_slice() {
                        if f.body.len() > 1 {
                            out.push((
                                LoopRef::new(block, func.vars[f.var].name.clone()),
                                LoopRef::new(block, func.vars[g.var].name.clone()),
                            ));
                        }
                    }
                    walk(func, block, &f.body, out);
                }
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(func, block, then_body, out);
                    walk(func, block, else_body, out);
                }
                _ => {}
            }
        }
    }
    walk(func, "", &func.body, &mut out);
    out
}

#[test]
fn reorder_moves_coordinate_lets_with_their_loops() {
    // SpMM's and SDDMM's dense loop sits below `let j = indices[j_p]`: moving it above
    // the position loop carries the `let` down into the new innermost body.
    let mut swapped = 0;
    for c in cases(3) {
        let mut sch = Schedule::new(&c.program);
        let func = sch.func_or_lower().unwrap().clone();
        for (outer, inner) in pairs_across_lets(&func) {
            let mut s2 = sch.clone();
            if s2.reorder(&[inner.clone(), outer.clone()]).is_ok() {
                check_func(&c, s2.func().unwrap());
                swapped += 1;
            }
        }
    }
    assert!(swapped >= 4, "only {swapped} nests reordered across lets");
}

/// Applies one legal step chosen by `(kind, pick, factor)`.
fn random_step(sch: &mut Schedule, kind: u8, pick: usize, factor: i64) {
    let all = loops(sch.func().unwrap());
    let nested: Vec<_> = all
        .iter()
        .filter_map(|(a, b)| b.clone().map(|b| (a.clone(), b)))
        .collect();
    match kind {
        0 | 1 => {
            let (target, _) = &all[pick % all.len()];
            let tail = if kind == 0 {
                SplitTail::InnerFixed
            } else {
                SplitTail::OuterFixed
            };
            sch.split(target, factor, tail).unwrap();
        }
        2 if !nested.is_empty() => {
            let (a, b) = &nested[pick % nested.len()];
            sch.fuse(a, b).unwrap();
        }
        _ if !nested.is_empty() => {
            let (a, b) = &nested[pick % nested.len()];
            sch.reorder(&[b.clone(), a.clone()]).unwrap();
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_legal_sequences(
        which in 0usize..9,
        seed in 0u64..1000,
        steps in proptest::collection::vec((0u8..4, 0usize..64, 1i64..5), 1..5),
    ) {
        let format = FORMATS[which % 3];
        let text = [spmm(format), spmv(format), sddmm(format)][which / 3].clone();
        let c = case(&text, &[("m", 7), ("n", 6), ("k", 3)], 0.5, seed);
        let mut sch = Schedule::new(&c.program);
        sch.func_or_lower().unwrap();
        for (kind, pick, factor) in steps {
            random_step(&mut sch, kind, pick, factor);
        }
        check_func(&c, sch.func().unwrap());
        // The trace replays to the same function.
        let replayed = sparsile_transform::schedule::Trace::from_json(&sch.trace().to_json())
            .unwrap()
            .replay(&c.program)
            .unwrap();
        prop_assert_eq!(replayed.func().unwrap().to_string(), sch.func().unwrap().to_string());
    }
}
