//! SpMM and SDDMM written generically from each format's layout (axes and the
//! axis-to-logical coordinate maps), run on tensors from the conversion library in every
//! 2-D format, against dense arithmetic. The interpreter never learns the format's name.

mod common;

use std::collections::HashMap;

use common::*;
use sparsile_formats::{Format, Layout, MapExpr, SparseTensor};
use sparsile_ir::coord::{AxisDecl, AxisStructure, BinaryOp, BufferRole::*, Expr, Program};
use sparsile_ir::{AxisId, IndexType, IterVarId, ParamId, Span};
use sparsile_runtime::{interpret, InterpOptions};

fn formats() -> Vec<Format> {
    vec![
        Format::Dense,
        Format::Csr,
        Format::Csc,
        Format::Coo,
        Format::Dcsr,
        Format::Bsr { r: 2, c: 3 },
        Format::Dbsr { r: 3, c: 2 },
        Format::Ell { k: None },
        Format::Dia,
        Format::Csf,
        Format::SrBcrs { t: 2, g: 3 },
        Format::Ragged,
    ]
}

fn to_expr(e: &MapExpr, vars: &[IterVarId], dims: &[ParamId]) -> Expr {
    let bin = |op, a: &MapExpr, b: &MapExpr| {
        Expr::binary(op, to_expr(a, vars, dims), to_expr(b, vars, dims))
    };
    match e {
        MapExpr::Axis(a) => Expr::Var(vars[*a]),
        MapExpr::Dim(d) => Expr::Param(dims[*d]),
        MapExpr::Const(c) => Expr::Int(*c),
        MapExpr::Logical(_) => panic!("to_logical uses no logical coordinates"),
        MapExpr::Add(a, b) => bin(BinaryOp::Add, a, b),
        MapExpr::Sub(a, b) => bin(BinaryOp::Sub, a, b),
        MapExpr::Mul(a, b) => bin(BinaryOp::Mul, a, b),
        MapExpr::Div(a, b) => bin(BinaryOp::Div, a, b),
        MapExpr::Rem(a, b) => bin(BinaryOp::Rem, a, b),
    }
}

/// Declares `A`'s axes from `layout`; every size is a parameter bound by the tensor.
fn declare_axes(b: &mut Builder, layout: &Layout) -> Vec<AxisId> {
    let mut ids: Vec<AxisId> = Vec::new();
    for (a, spec) in layout.axes.iter().enumerate() {
        let length = b.param(&format!("len{a}"));
        let nnz = spec.kind.is_variable().then(|| b.param(&format!("nnz{a}")));
        let per = spec
            .nnz_per_parent
            .as_ref()
            .map(|_| b.param(&format!("per{a}")));
        ids.push(b.p.axes.push(AxisDecl {
            name: format!("A{}", spec.name),
            kind: spec.kind,
            parent: spec.parent.map(|p| ids[p]),
            length,
            nnz,
            nnz_per_parent: per,
            index_type: IndexType::I32,
            unique: spec.unique,
            padded: spec.kind.is_sparse(),
            structure: AxisStructure::Bound,
            span: Span::default(),
        }));
    }
    ids
}

/// `C[row, k] += A[...] * B[col, k]` iterating `A`'s axes in storage order.
fn spmm(layout: &Layout) -> Program {
    let mut b = Builder::new("spmm");
    let axes = declare_axes(&mut b, layout);
    let (m, n, k) = (b.param("m"), b.param("n"), b.param("kw"));
    let dims: Vec<ParamId> = [m, n]
        .iter()
        .map(|e| match e {
            sparsile_ir::coord::Extent::Param(p) => *p,
            _ => unreachable!(),
        })
        .collect();
    let (md, nd, kd) = (b.dense("M", m), b.dense("N", n), b.dense("K", k));
    let a = b.buf("A", &axes, Input);
    let bb = b.buf("B", &[nd, kd], Input);
    let c = b.buf("C", &[md, kd], Output);
    let vars: Vec<IterVarId> = axes
        .iter()
        .enumerate()
        .map(|(i, &ax)| b.var(&format!("a{i}"), ax))
        .collect();
    let vk = b.var("k", kd);
    let row = to_expr(&layout.to_logical[0], &vars, &dims);
    let col = to_expr(&layout.to_logical[1], &vars, &dims);
    let mut its: Vec<(IterVarId, sparsile_ir::coord::IterKind)> =
        vars.iter().map(|&v| (v, R)).collect();
    its.push((vk, R));
    let a_idx = vars.iter().map(|&x| v(x)).collect();
    let s = b.iter(
        "spmm",
        &its,
        vec![],
        vec![acc(
            c,
            vec![row, v(vk)],
            mul(ld(a, a_idx), ld(bb, vec![col, v(vk)])),
        )],
    );
    b.p.body.push(s);
    b.p
}

#[test]
fn spmm_on_every_format_from_the_conversion_library() {
    for format in formats() {
        let layout = format.layout(2).unwrap();
        let p = spmm(&layout);
        for (name, coo) in matrix_cases(41) {
            let (m, n, k) = (coo.shape[0], coo.shape[1], 3);
            let a = SparseTensor::from_coo(&coo, &format).unwrap();
            let (bv, bt) = random_dense(&mut rng(42), &[n, k]);
            let inputs = HashMap::from([("A".to_string(), a), ("B".to_string(), bt)]);
            let opts = InterpOptions {
                params: [("m".to_string(), m as i64)].into(),
                ..Default::default()
            };
            let out =
                interpret(&p, &inputs, &opts).unwrap_or_else(|e| panic!("{format} {name}: {e}"));
            assert_close(
                &out["C"].values.to_f64_vec(),
                &matmul(&to_dense(&coo), &bv, m, n, k),
                &format!("{format} {name}"),
            );
        }
    }
}

/// SDDMM whose output shares `A`'s axes, in every format: `C = A .* (X Y^T)` at A's
/// stored elements; padding positions are written out of range and skipped.
#[test]
fn sddmm_on_every_format_shares_structure() {
    for format in formats() {
        let layout = format.layout(2).unwrap();
        let mut b = Builder::new("sddmm");
        let axes = declare_axes(&mut b, &layout);
        let (m, n, k) = (b.param("m"), b.param("n"), b.param("kw"));
        let dims: Vec<ParamId> = [m, n]
            .iter()
            .map(|e| match e {
                sparsile_ir::coord::Extent::Param(p) => *p,
                _ => unreachable!(),
            })
            .collect();
        let (md, nd, kd) = (b.dense("M", m), b.dense("N", n), b.dense("K", k));
        let a = b.buf("A", &axes, Input);
        let x = b.buf("X", &[md, kd], Input);
        let y = b.buf("Y", &[nd, kd], Input);
        let c = b.buf("C", &axes, Output);
        let vars: Vec<IterVarId> = axes
            .iter()
            .enumerate()
            .map(|(i, &ax)| b.var(&format!("a{i}"), ax))
            .collect();
        let vk = b.var("k", kd);
        let row = to_expr(&layout.to_logical[0], &vars, &dims);
        let col = to_expr(&layout.to_logical[1], &vars, &dims);
        let mut its: Vec<_> = vars.iter().map(|&v| (v, S)).collect();
        its.push((vk, R));
        let idx: Vec<Expr> = vars.iter().map(|&x| v(x)).collect();
        let s = b.iter(
            "sddmm",
            &its,
            vec![st(c, idx.clone(), Expr::Float(0.0))],
            vec![acc(
                c,
                idx.clone(),
                mul(
                    ld(a, idx),
                    mul(ld(x, vec![row, v(vk)]), ld(y, vec![col, v(vk)])),
                ),
            )],
        );
        b.p.body.push(s);
        for (name, coo) in matrix_cases(43) {
            let (mm, nn, kw) = (coo.shape[0], coo.shape[1], 2);
            let a_t = SparseTensor::from_coo(&coo, &format).unwrap();
            let mut r = rng(44);
            let (xv, xt) = random_dense(&mut r, &[mm, kw]);
            let (yv, yt) = random_dense(&mut r, &[nn, kw]);
            let inputs = HashMap::from([
                ("A".to_string(), a_t.clone()),
                ("X".to_string(), xt),
                ("Y".to_string(), yt),
            ]);
            let out = interpret(&b.p, &inputs, &InterpOptions::default())
                .unwrap_or_else(|e| panic!("{format} {name}: {e}"));
            let ct = &out["C"];
            assert_eq!(ct.format(), &format);
            assert_eq!(ct.structure.axes, a_t.structure.axes, "{format} {name}");
            let ad = to_dense(&coo);
            let want: Vec<f64> = (0..mm * nn)
                .map(|ij| {
                    let (i, j) = (ij / nn.max(1), ij % nn.max(1));
                    ad[ij]
                        * (0..kw)
                            .map(|l| xv[i * kw + l] * yv[j * kw + l])
                            .sum::<f64>()
                })
                .collect();
            assert_close(&ct.to_dense_f64(), &want, &format!("{format} {name}"));
        }
    }
}

/// Real matrices (from the shared data folder, when present) in several formats: SpMM
/// against a reference that sums the COO entries directly.
#[test]
fn spmm_on_real_matrices() {
    use sparsile_formats::mtx::{self, MtxData, MtxReadOptions};
    let dir = std::path::Path::new("/work/shared/data");
    let opts = MtxReadOptions {
        duplicates: mtx::Duplicates::Sum,
    };
    for file in ["cora.mtx", "dlmc_rn50_mp70_initconv.mtx"] {
        let path = dir.join(file);
        if !path.exists() {
            eprintln!("skipping {file}: not found under {}", dir.display());
            continue;
        }
        let MtxData::Sparse(mut coo) = mtx::read_path(&path, &opts).unwrap() else {
            panic!("{file} is not a coordinate file");
        };
        coo.sort_and_sum_duplicates();
        let (m, n, k) = (coo.shape[0], coo.shape[1], 4);
        let (bv, bt) = random_dense(&mut rng(45), &[n, k]);
        let mut want = vec![0.0; m * k];
        for e in 0..coo.nnz() {
            let (i, j) = (coo.coord(e)[0], coo.coord(e)[1]);
            for l in 0..k {
                want[i * k + l] += coo.values[e] * bv[j * k + l];
            }
        }
        for format in [
            Format::Csr,
            Format::Bsr { r: 4, c: 4 },
            Format::Ell { k: None },
            Format::Coo,
        ] {
            let p = spmm(&format.layout(2).unwrap());
            let a = SparseTensor::from_coo(&coo, &format).unwrap();
            let inputs = HashMap::from([("A".to_string(), a), ("B".to_string(), bt.clone())]);
            let opts = InterpOptions {
                params: [("m".to_string(), m as i64)].into(),
                ..Default::default()
            };
            let out = interpret(&p, &inputs, &opts).unwrap();
            assert_close(
                &out["C"].values.to_f64_vec(),
                &want,
                &format!("{file} {format}"),
            );
        }
    }
}
