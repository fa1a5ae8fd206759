//! Hand-lowered kernels run by the loop-level interpreter against the stage-I
//! interpreter and dense arithmetic: SpMV and SpMM on CSR (stage III and stage II), BSR
//! block offsets, column lookup by binary search, local accumulators in f32.

mod common;
mod flat_support;

use std::collections::HashMap;

use common::{rng, Builder, R, S};
use flat_support::*;
use sparsile_formats::{CooTensor, Format, SparseTensor};
use sparsile_ir::coord::{self, BufferRole::*, Program};
use sparsile_ir::loops::{CmpOp, Func, Stage};
use sparsile_ir::{AxisId, DType};
use sparsile_runtime::{
    flat_interp, interpret, FlatInterpError, FlatOptions, InterpOptions, Outputs,
};

type Inputs = HashMap<String, SparseTensor<'static>>;

/// Runs with the loop-level verifier on: the hand-lowered kernels are valid IR.
fn run_verified(
    f: &Func,
    p: &Program,
    inputs: &Inputs,
    opts: &InterpOptions,
) -> Result<Outputs, FlatInterpError> {
    let flat = FlatOptions {
        verify_func: true,
        ..FlatOptions::default()
    };
    flat_interp::run_with(f, p, inputs, opts, &flat)
}

/// `y[i] = sum_j A[i, j] * x[j]`, A in CSR (axes I, J), x over JD, y over I.
fn spmv_program(dtype: DType) -> (Program, [AxisId; 3]) {
    let mut b = Builder::new("spmv");
    let (m, n, nnz) = (b.param("m"), b.param("n"), b.param("nnz"));
    let i = b.dense("I", m);
    let j = b.svar("J", i, n, nnz);
    let jd = b.dense("JD", n);
    let a = b.buf_t("A", dtype, &[i, j], Input);
    let x = b.buf_t("x", dtype, &[jd], Input);
    let y = b.buf_t("y", dtype, &[i], Output);
    let (vi, vj) = (b.var("i", i), b.var("j", j));
    let yi = vec![common::v(vi)];
    let body = b.iter(
        "spmv",
        &[(vi, S), (vj, R)],
        vec![common::st(y, yi.clone(), coord::Expr::Float(0.0))],
        vec![common::acc(
            y,
            yi,
            common::mul(
                common::ld(a, vec![common::v(vi), common::v(vj)]),
                common::ld(x, vec![common::v(vj)]),
            ),
        )],
    );
    b.p.body.push(body);
    (b.p, [i, j, jd])
}

/// Stage III SpMV; with `local` the row sum is a `let` accumulator stored once.
fn spmv_flat(p: &Program, dtype: DType, local: bool) -> Func {
    let mut fb = FuncBuilder::new(p, Stage::Flat);
    let (m, n, nnz) = (fb.p("m"), fb.p("n"), fb.p("nnz"));
    let a = fb.values("A", dtype, nnz.clone(), Input);
    let x = fb.values("x", dtype, n, Input);
    let y = fb.values("y", dtype, m.clone(), Output);
    let ptr = fb.indptr("A", 1, add(m.clone(), int(1)));
    let idx = fb.indices("A", 1, nnz);
    let (i, jp, j) = (fb.idx("i"), fb.idx("jp"), fb.idx("j"));
    let sum = fb.val("sum", dtype);
    let term = mul(ld(a, v(jp)), ld(x, v(j)));
    let row = |inner: Vec<_>| {
        for_(jp, ld(ptr, v(i)), ld(ptr, add(v(i), int(1))), {
            let mut body = vec![let_(j, ld(idx, v(jp)))];
            body.extend(inner);
            body
        })
    };
    let body = if local {
        vec![
            let_(sum, float(0.0)),
            row(vec![set(sum, add(v(sum), term))]),
            store(y, vec![v(i)], v(sum)),
        ]
    } else {
        vec![
            store(y, vec![v(i)], float(0.0)),
            row(vec![acc(y, v(i), term)]),
        ]
    };
    fb.f.body = vec![block("spmv", vec![par(i, int(0), m, body)])];
    fb.f
}

fn spmv_inputs(coo: &CooTensor, x: &[f64], dtype: DType) -> Inputs {
    HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo_with(coo, &Format::Csr, dtype).unwrap(),
        ),
        (
            "x".to_string(),
            SparseTensor::dense_from_f64(&[x.len()], x, dtype).unwrap(),
        ),
    ])
}

fn random_vec(r: &mut rand_chacha::ChaCha8Rng, n: usize) -> Vec<f64> {
    (0..n).map(|_| common::nonzero(r)).collect()
}

fn values(out: &Outputs, name: &str) -> Vec<f64> {
    out[name].values.to_f64_vec()
}

#[test]
fn spmv_csr_stage3_matches_stage1() {
    let (p, _) = spmv_program(DType::F64);
    let mut r = rng(11);
    for (case, coo) in common::matrix_cases(5) {
        let x = random_vec(&mut r, coo.shape[1]);
        let inputs = spmv_inputs(&coo, &x, DType::F64);
        let expected = interpret(&p, &inputs, &InterpOptions::default()).unwrap();
        for local in [false, true] {
            let f = spmv_flat(&p, DType::F64, local);
            let got = run_verified(&f, &p, &inputs, &InterpOptions::default())
                .unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(
                values(&got, "y"),
                values(&expected, "y"),
                "{case}, local {local}"
            );
            assert_eq!(got["y"].structure, expected["y"].structure, "{case}");
        }
    }
}

#[test]
fn f32_buffers_round_on_store_and_locals_stay_f64() {
    let (p, _) = spmv_program(DType::F32);
    let mut r = rng(12);
    let coo = common::coo_rows(&mut r, 5, 40, |_| 30);
    let x = random_vec(&mut r, 40);
    let inputs = spmv_inputs(&coo, &x, DType::F32);
    let a32 = inputs["A"].values.to_f64_vec();
    let x32 = inputs["x"].values.to_f64_vec();
    let a = SparseTensor::from_coo_with(&coo, &Format::Csr, DType::F32).unwrap();
    let ptr = a.structure.axes[1].indptr.as_ref().unwrap().to_usizes();
    let idx = a.structure.axes[1].indices.as_ref().unwrap().to_usizes();
    // The local accumulates in f64 and is rounded once.
    let once: Vec<f64> = (0..5)
        .map(|i| {
            let s: f64 = (ptr[i]..ptr[i + 1]).map(|q| a32[q] * x32[idx[q]]).sum();
            s as f32 as f64
        })
        .collect();
    // Accumulating in the buffer rounds after every addition.
    let each: Vec<f64> = (0..5)
        .map(|i| (ptr[i]..ptr[i + 1]).fold(0.0f64, |s, q| (s + a32[q] * x32[idx[q]]) as f32 as f64))
        .collect();
    assert_ne!(once, each, "the test needs rows where rounding differs");
    let run = |local| {
        let got = run_verified(
            &spmv_flat(&p, DType::F32, local),
            &p,
            &inputs,
            &InterpOptions::default(),
        )
        .unwrap();
        assert_eq!(got["y"].values.dtype(), DType::F32);
        values(&got, "y")
    };
    assert_eq!(run(true), once);
    assert_eq!(run(false), each);
}

/// Stage II SpMV: A laid out over (I, J), addressed by positions.
#[test]
fn spmv_csr_stage2_positions() {
    let (p, [i_ax, j_ax, jd_ax]) = spmv_program(DType::F64);
    let mut fb = FuncBuilder::new(&p, Stage::Pos);
    let (m, nnz) = (fb.p("m"), fb.p("nnz"));
    let a = fb.values_axes("A", DType::F64, &[i_ax, j_ax], Input);
    let x = fb.values_axes("x", DType::F64, &[jd_ax], Input);
    let y = fb.values_axes("y", DType::F64, &[i_ax], Output);
    let ptr = fb.indptr("A", 1, add(m.clone(), int(1)));
    let idx = fb.indices("A", 1, nnz);
    let (i0, i, jp) = (fb.idx("i0"), fb.idx("i"), fb.idx("jp"));
    let yi = || ldn(y, vec![v(i)]);
    fb.f.body = vec![
        block(
            "spmv.init",
            vec![par(
                i0,
                int(0),
                m.clone(),
                vec![store(y, vec![v(i0)], float(0.0))],
            )],
        ),
        block(
            "spmv",
            vec![par(
                i,
                int(0),
                m,
                vec![for_(
                    jp,
                    ld(ptr, v(i)),
                    ld(ptr, add(v(i), int(1))),
                    vec![store(
                        y,
                        vec![v(i)],
                        add(
                            yi(),
                            mul(ldn(a, vec![v(i), v(jp)]), ldn(x, vec![ld(idx, v(jp))])),
                        ),
                    )],
                )],
            )],
        ),
    ];
    let mut r = rng(13);
    for (case, coo) in common::matrix_cases(6) {
        let xv = random_vec(&mut r, coo.shape[1]);
        let inputs = spmv_inputs(&coo, &xv, DType::F64);
        let expected = interpret(&p, &inputs, &InterpOptions::default()).unwrap();
        let got = run_verified(&fb.f, &p, &inputs, &InterpOptions::default()).unwrap();
        assert_eq!(values(&got, "y"), values(&expected, "y"), "{case}");
    }
}

/// `C[i, k] = sum_j A[i, j] * B[j, k]`, A in CSR, B and C dense row-major.
#[test]
fn spmm_csr_stage3_matches_dense() {
    let mut b = Builder::new("spmm");
    let (m, n, nnz, kk) = (b.param("m"), b.param("n"), b.param("nnz"), b.param("k"));
    let i = b.dense("I", m);
    let j = b.svar("J", i, n, nnz);
    let bj = b.dense("BJ", n);
    let bk = b.dense("BK", kk);
    let ci = b.dense("CI", m);
    let ck = b.dense("CK", kk);
    b.buf("A", &[i, j], Input);
    b.buf("B", &[bj, bk], Input);
    b.buf("C", &[ci, ck], Output);
    let p = b.p;

    let mut fb = FuncBuilder::new(&p, Stage::Flat);
    let (m, n, nnz, k) = (fb.p("m"), fb.p("n"), fb.p("nnz"), fb.p("k"));
    let a = fb.values("A", DType::F64, nnz.clone(), Input);
    let bb = fb.values("B", DType::F64, mul(n, k.clone()), Input);
    let c = fb.values("C", DType::F64, mul(m.clone(), k.clone()), Output);
    let ptr = fb.indptr("A", 1, add(m.clone(), int(1)));
    let idx = fb.indices("A", 1, nnz);
    let (vi, vjp, vj, vk) = (fb.idx("i"), fb.idx("jp"), fb.idx("j"), fb.idx("kk"));
    let (vi0, vk0) = (fb.idx("i0"), fb.idx("kk0"));
    let c_at = add(mul(v(vi), k.clone()), v(vk));
    fb.f.body = vec![
        block(
            "spmm.init",
            vec![par(
                vi0,
                int(0),
                m.clone(),
                vec![for_(
                    vk0,
                    int(0),
                    k.clone(),
                    vec![store(
                        c,
                        vec![add(mul(v(vi0), k.clone()), v(vk0))],
                        float(0.0),
                    )],
                )],
            )],
        ),
        block(
            "spmm",
            vec![par(
                vi,
                int(0),
                m,
                vec![for_(
                    vjp,
                    ld(ptr, v(vi)),
                    ld(ptr, add(v(vi), int(1))),
                    vec![
                        let_(vj, ld(idx, v(vjp))),
                        for_(
                            vk,
                            int(0),
                            k.clone(),
                            vec![acc(
                                c,
                                c_at.clone(),
                                mul(ld(a, v(vjp)), ld(bb, add(mul(v(vj), k.clone()), v(vk)))),
                            )],
                        ),
                    ],
                )],
            )],
        ),
    ];

    let mut r = rng(14);
    for (case, coo) in common::matrix_cases(7) {
        let (mm, nn, kv) = (coo.shape[0], coo.shape[1], 3);
        let bv = random_vec(&mut r, nn * kv);
        let inputs: Inputs = HashMap::from([
            (
                "A".to_string(),
                SparseTensor::from_coo(&coo, &Format::Csr).unwrap(),
            ),
            ("B".to_string(), common::dense_tensor(&[nn, kv], bv.clone())),
        ]);
        let got = run_verified(
            &fb.f,
            &p,
            &inputs,
            &InterpOptions {
                skip_verify: true,
                ..Default::default()
            },
        )
        .unwrap();
        let ad = common::to_dense(&coo);
        for ii in 0..mm {
            for kk in 0..kv {
                let want: f64 = (0..nn).map(|jj| ad[ii * nn + jj] * bv[jj * kv + kk]).sum();
                let gotv = values(&got, "C")[ii * kv + kk];
                assert!(
                    (gotv - want).abs() < 1e-12,
                    "{case}: C[{ii}, {kk}] = {gotv}, want {want}"
                );
            }
        }
    }
}

/// BSR SpMV program: A over (IO, JO, II, JI), x over X (length n), y over Y (length m).
fn bsr_program() -> (Program, [AxisId; 6]) {
    let mut b = Builder::new("bsr_spmv");
    let (mb, nb, nnzb, r, c) = (
        b.param("mb"),
        b.param("nb"),
        b.param("nnzb"),
        b.param("r"),
        b.param("c"),
    );
    let (m, n) = (b.param("m"), b.param("n"));
    let io = b.dense("IO", mb);
    let jo = b.svar("JO", io, nb, nnzb);
    let ii = b.dense("II", r);
    let ji = b.dense("JI", c);
    let xa = b.dense("X", n);
    let ya = b.dense("Y", m);
    b.buf("A", &[io, jo, ii, ji], Input);
    b.buf("x", &[xa], Input);
    b.buf("y", &[ya], Output);
    (b.p, [io, jo, ii, ji, xa, ya])
}

fn bsr_case(
    seed: u64,
    shape: [usize; 2],
    r: usize,
    c: usize,
) -> (CooTensor, Vec<f64>, Inputs, InterpOptions) {
    let mut g = rng(seed);
    let coo = common::random_coo(&mut g, &shape, 0.25);
    let x = random_vec(&mut g, shape[1]);
    let inputs = HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo(&coo, &Format::Bsr { r, c }).unwrap(),
        ),
        (
            "x".to_string(),
            common::dense_tensor(&[shape[1]], x.clone()),
        ),
    ]);
    let opts = InterpOptions {
        params: HashMap::from([
            ("m".to_string(), shape[0] as i64),
            ("n".to_string(), shape[1] as i64),
        ]),
        skip_verify: true,
        ..Default::default()
    };
    (coo, x, inputs, opts)
}

fn dense_spmv(coo: &CooTensor, x: &[f64]) -> Vec<f64> {
    let d = common::to_dense(coo);
    let (m, n) = (coo.shape[0], coo.shape[1]);
    (0..m)
        .map(|i| (0..n).map(|j| d[i * n + j] * x[j]).sum())
        .collect()
}

fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() < 1e-12, "{what}[{k}] = {g}, want {w}");
    }
}

/// Stage III: the value offset of block element (jop, ii, ji) is jop*r*c + ii*c + ji;
/// rows and columns past the matrix edge are guarded.
#[test]
fn bsr_stage3_block_offsets() {
    let (p, _) = bsr_program();
    let mut fb = FuncBuilder::new(&p, Stage::Flat);
    let [mb, nnzb, r, c, m, n] = ["mb", "nnzb", "r", "c", "m", "n"].map(|s| fb.p(s));
    let a = fb.values(
        "A",
        DType::F64,
        mul(nnzb.clone(), mul(r.clone(), c.clone())),
        Input,
    );
    let x = fb.values("x", DType::F64, n.clone(), Input);
    let y = fb.values("y", DType::F64, m.clone(), Output);
    let ptr = fb.indptr("A", 1, add(mb.clone(), int(1)));
    let idx = fb.indices("A", 1, nnzb);
    let [io, jop, jo, ii, ji, row, col] =
        ["io", "jop", "jo", "ii", "ji", "row", "col"].map(|s| fb.idx(s));
    let offset = add(
        mul(v(jop), mul(r.clone(), c.clone())),
        add(mul(v(ii), c.clone()), v(ji)),
    );
    fb.f.body = vec![block(
        "bsr",
        vec![par(
            io,
            int(0),
            mb,
            vec![for_(
                jop,
                ld(ptr, v(io)),
                ld(ptr, add(v(io), int(1))),
                vec![
                    let_(jo, ld(idx, v(jop))),
                    for_(
                        ii,
                        int(0),
                        r.clone(),
                        vec![
                            let_(row, add(mul(v(io), r.clone()), v(ii))),
                            for_(
                                ji,
                                int(0),
                                c.clone(),
                                vec![
                                    let_(col, add(mul(v(jo), c.clone()), v(ji))),
                                    if_(
                                        and(
                                            cmp(CmpOp::Lt, v(row), m.clone()),
                                            cmp(CmpOp::Lt, v(col), n.clone()),
                                        ),
                                        vec![acc(
                                            y,
                                            v(row),
                                            mul(ld(a, offset.clone()), ld(x, v(col))),
                                        )],
                                        vec![],
                                    ),
                                ],
                            ),
                        ],
                    ),
                ],
            )],
        )],
    )];
    for (seed, shape, r, c) in [
        (1, [7, 8], 2, 3),
        (2, [9, 5], 4, 4),
        (3, [6, 6], 3, 2),
        (4, [0, 4], 2, 2),
    ] {
        let (coo, xv, inputs, opts) = bsr_case(seed, shape, r, c);
        let got = run_verified(&fb.f, &p, &inputs, &opts).unwrap();
        assert_close(
            &values(&got, "y"),
            &dense_spmv(&coo, &xv),
            &format!("{shape:?} in {r}x{c} blocks"),
        );
    }
}

/// Stage II: the same kernel addressing A by its four positions (II and JI are
/// parentless, so their positions are the in-block coordinates).
#[test]
fn bsr_stage2_positions() {
    let (p, [io_ax, jo_ax, ii_ax, ji_ax, x_ax, y_ax]) = bsr_program();
    let mut fb = FuncBuilder::new(&p, Stage::Pos);
    let [mb, nnzb, r, c, m, n] = ["mb", "nnzb", "r", "c", "m", "n"].map(|s| fb.p(s));
    let a = fb.values_axes("A", DType::F64, &[io_ax, jo_ax, ii_ax, ji_ax], Input);
    let x = fb.values_axes("x", DType::F64, &[x_ax], Input);
    let y = fb.values_axes("y", DType::F64, &[y_ax], Output);
    let ptr = fb.indptr("A", 1, add(mb.clone(), int(1)));
    let idx = fb.indices("A", 1, nnzb);
    let [io, jop, ii, ji, row, col] = ["io", "jop", "ii", "ji", "row", "col"].map(|s| fb.idx(s));
    fb.f.body = vec![block(
        "bsr",
        vec![par(
            io,
            int(0),
            mb,
            vec![for_(
                jop,
                ld(ptr, v(io)),
                ld(ptr, add(v(io), int(1))),
                vec![for_(
                    ii,
                    int(0),
                    r.clone(),
                    vec![
                        let_(row, add(mul(v(io), r.clone()), v(ii))),
                        for_(
                            ji,
                            int(0),
                            c.clone(),
                            vec![
                                let_(col, add(mul(ld(idx, v(jop)), c.clone()), v(ji))),
                                if_(
                                    cmp(CmpOp::Lt, v(row), m.clone()),
                                    vec![if_(
                                        cmp(CmpOp::Lt, v(col), n.clone()),
                                        vec![store(
                                            y,
                                            vec![v(row)],
                                            add(
                                                ldn(y, vec![v(row)]),
                                                mul(
                                                    ldn(a, vec![v(io), v(jop), v(ii), v(ji)]),
                                                    ldn(x, vec![v(col)]),
                                                ),
                                            ),
                                        )],
                                        vec![],
                                    )],
                                    vec![],
                                ),
                            ],
                        ),
                    ],
                )],
            )],
        )],
    )];
    for (seed, shape, r, c) in [(5, [7, 8], 2, 3), (6, [10, 3], 3, 3)] {
        let (coo, xv, inputs, opts) = bsr_case(seed, shape, r, c);
        let got = run_verified(&fb.f, &p, &inputs, &opts).unwrap();
        assert_close(
            &values(&got, "y"),
            &dense_spmv(&coo, &xv),
            &format!("{shape:?} in {r}x{c} blocks"),
        );
    }
}

/// `y[i] = A[i, col]` found by binary search over row i's column indices: hits read
/// the value, misses (-1) leave 0.
#[test]
fn search_hit_and_miss() {
    let mut b = Builder::new("column");
    let (m, n, nnz) = (b.param("m"), b.param("n"), b.param("nnz"));
    b.p.params.push(coord::Param { name: "col".into() });
    let i = b.dense("I", m);
    let j = b.svar("J", i, n, nnz);
    b.buf("A", &[i, j], Input);
    b.buf("y", &[i], Output);
    let p = b.p;

    let mut fb = FuncBuilder::new(&p, Stage::Flat);
    let (m, nnz, col) = (fb.p("m"), fb.p("nnz"), fb.p("col"));
    let a = fb.values("A", DType::F64, nnz.clone(), Input);
    let y = fb.values("y", DType::F64, m.clone(), Output);
    let ptr = fb.indptr("A", 1, add(m.clone(), int(1)));
    let idx = fb.indices("A", 1, nnz);
    let (vi, q) = (fb.idx("i"), fb.idx("q"));
    fb.f.body = vec![par(
        vi,
        int(0),
        m,
        vec![
            let_(
                q,
                search(idx, ld(ptr, v(vi)), ld(ptr, add(v(vi), int(1))), col),
            ),
            if_(
                cmp(CmpOp::Ge, v(q), int(0)),
                vec![store(y, vec![v(vi)], ld(a, v(q)))],
                vec![],
            ),
        ],
    )];

    // Row 0: columns 1, 3, 4; row 1: none; row 2: column 3 only; row 3: 0..6 all.
    let mut trip = vec![(0, 1, 1.0), (0, 3, 2.0), (0, 4, 3.0), (2, 3, 4.0)];
    trip.extend((0..6).map(|jj| (3, jj, 10.0 + jj as f64)));
    let coo = CooTensor::from_triplets(vec![4, 6], &trip).unwrap();
    let inputs: Inputs = HashMap::from([(
        "A".to_string(),
        SparseTensor::from_coo(&coo, &Format::Csr).unwrap(),
    )]);
    let d = common::to_dense(&coo);
    let mut hits = 0;
    for c in 0..6 {
        let opts = InterpOptions {
            params: HashMap::from([("col".to_string(), c as i64)]),
            skip_verify: true,
            ..Default::default()
        };
        let got = run_verified(&fb.f, &p, &inputs, &opts).unwrap();
        let want: Vec<f64> = (0..4).map(|r| d[r * 6 + c]).collect();
        hits += want.iter().filter(|&&w| w != 0.0).count();
        assert_eq!(values(&got, "y"), want, "column {c}");
    }
    assert!(hits > 0 && hits < 24);
}
