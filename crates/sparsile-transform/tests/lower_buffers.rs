//! `lower_buffers`: flat lengths and value offsets agree with
//! `sparsile_formats::Structure` on real tensors of every 2-D format.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile_formats::{CooTensor, Format, Pos, SparseTensor};
use sparsile_ir::coord::{Extent, Program};
use sparsile_ir::loops::{BufferLayout, Expr, Stage};
use sparsile_transform::lower_buffers::{value_count, value_offset};
use sparsile_transform::{lower_buffers, lower_iterations, LowerError};

fn eval(e: &Expr, params: &[i64]) -> i64 {
    match e {
        Expr::Int(i) => *i,
        Expr::Param(p) => params[p.0 as usize],
        Expr::Binary { op, lhs, rhs } => {
            op.apply_i64(eval(lhs, params), eval(rhs, params)).unwrap()
        }
        other => panic!("not a closed integer expression: {other:?}"),
    }
}

/// The SpMV program over `A` in `format`, and a random `A` of shape 7 × 9.
fn setup(format: &str, seed: u64) -> (Program, SparseTensor<'static>) {
    let program = sparsile::compile_notation(&format!(
        "tensor A: f64[m, n] {format}\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n"
    ))
    .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut triplets = Vec::new();
    for r in 0..7 {
        for c in 0..9 {
            if rng.random::<f64>() < 0.3 {
                triplets.push((r, c, 1.0 + r as f64));
            }
        }
    }
    let coo = CooTensor::from_triplets(vec![7, 9], &triplets).unwrap();
    let f: Format = format.parse().unwrap();
    (program, SparseTensor::from_coo(&coo, &f).unwrap())
}

#[test]
fn offsets_and_lengths_match_the_format_library() {
    for (seed, format) in [
        "csr",
        "csc",
        "coo",
        "dcsr",
        "bsr:2x2",
        "dbsr:2x3",
        "ell",
        "dia",
        "srbcrs:2x2",
        "ragged",
    ]
    .into_iter()
    .enumerate()
    {
        let (program, a) = setup(format, seed as u64);
        let buf = program.buffer_by_name("A").unwrap();
        let axes = program.buffers[buf].axes.clone();
        // Parameters from A's storage.
        let mut params: HashMap<usize, i64> = HashMap::new();
        for (k, &ax) in axes.iter().enumerate() {
            let d = &program.axes[ax];
            let s = &a.structure.axes[k];
            let mut bind = |e: Extent, v: usize| {
                if let Extent::Param(p) = e {
                    params.insert(p.0 as usize, v as i64);
                }
            };
            bind(d.length, s.length);
            if let Some(n) = d.nnz {
                bind(n, s.npos);
            }
            if let Some(n) = d.nnz_per_parent {
                bind(n, s.nnz_per_parent.unwrap_or(s.npos));
            }
        }
        let params: Vec<i64> = (0..program.params.len())
            .map(|i| params.get(&i).copied().unwrap_or(-1))
            .collect();
        let count = eval(&value_count(&program.axes, &axes), &params);
        assert_eq!(count as usize, a.structure.nnz_stored(), "{format}");
        let mut rng = ChaCha8Rng::seed_from_u64(100 + seed as u64);
        for _ in 0..50 {
            let positions: Vec<usize> = a
                .structure
                .axes
                .iter()
                .map(|s| rng.random_range(0..s.npos.max(1)))
                .collect();
            let want = a
                .structure
                .value_offset(&positions.iter().map(|&p| Pos(p)).collect::<Vec<_>>());
            let expr = value_offset(
                &program.axes,
                &axes,
                positions.iter().map(|&p| Expr::Int(p as i64)).collect(),
            );
            assert_eq!(
                eval(&expr, &params) as usize,
                want,
                "{format} at {positions:?}"
            );
        }
    }
}

#[test]
fn every_buffer_becomes_flat() {
    let (program, _) = setup("bsr:2x2", 1);
    let stage2 = lower_iterations(&program).unwrap();
    let stage3 = lower_buffers(&stage2).unwrap();
    assert_eq!(stage3.stage, Stage::Flat);
    assert!(stage3.axes.is_empty());
    assert_eq!(stage3.buffers.len(), stage2.buffers.len());
    for b in stage3.buffers.values() {
        assert!(matches!(b.layout, BufferLayout::Flat(_)), "{}", b.name);
    }
    // Every access takes one offset.
    fn check(e: &Expr) {
        e.visit(&mut |x| {
            if let Expr::Load { indices, .. } = x {
                assert_eq!(indices.len(), 1);
            }
        });
    }
    fn walk(stmts: &[sparsile_ir::loops::Stmt]) {
        use sparsile_ir::loops::Stmt;
        for s in stmts {
            match s {
                Stmt::For(f) => {
                    check(&f.lo);
                    check(&f.hi);
                    walk(&f.body);
                }
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                    ..
                } => {
                    check(cond);
                    walk(then_body);
                    walk(else_body);
                }
                Stmt::Let { value, .. } | Stmt::Assign { value, .. } => check(value),
                Stmt::Store { indices, value, .. } | Stmt::AtomicAdd { indices, value, .. } => {
                    assert_eq!(indices.len(), 1);
                    check(value);
                }
                Stmt::Prefetch { indices, .. } => {
                    assert_eq!(indices.len(), 1);
                    indices.iter().for_each(check);
                }
                Stmt::Block { body, .. } | Stmt::Launch { body, .. } => walk(body),
                Stmt::WarpReduce { value, key, .. } => {
                    check(value);
                    key.iter().for_each(check);
                }
                Stmt::Mma(m) => {
                    assert_eq!(m.c_indices.len(), 1);
                    m.exprs().into_iter().for_each(check);
                }
                Stmt::Barrier { .. } => {}
            }
        }
    }
    walk(&stage3.body);
}

#[test]
fn stage_three_input_is_refused() {
    let (program, _) = setup("csr", 2);
    let stage3 = lower_buffers(&lower_iterations(&program).unwrap()).unwrap();
    let err = lower_buffers(&stage3).unwrap_err();
    assert!(matches!(err, LowerError::WrongStage { .. }), "{err}");
}
