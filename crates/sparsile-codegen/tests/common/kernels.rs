//! The test kernels as stage-III functions, the random data they run on, and their
//! expected results computed in Rust.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile_ir::coord::{BinaryOp, BufferRole, UnaryOp};
use sparsile_ir::loops::{BufferKind, CmpOp, ForKind, Func};
use sparsile_ir::DType;

use super::build::*;
use super::harness::Data;

/// A CSR matrix with f64 values (converted to the kernel's types by the tests).
pub struct Csr {
    pub m: usize,
    pub n: usize,
    pub indptr: Vec<i64>,
    pub indices: Vec<i64>,
    pub vals: Vec<f64>,
}

/// A random `m x n` CSR matrix; some rows are empty, values in [-1, 1).
pub fn random_csr(seed: u64, m: usize, n: usize, density: f64) -> Csr {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut indptr = vec![0i64];
    let mut indices = Vec::new();
    let mut vals = Vec::new();
    for _ in 0..m {
        let empty = rng.random_bool(0.2);
        for j in 0..n {
            if !empty && rng.random_bool(density) {
                indices.push(j as i64);
                vals.push(rng.random_range(-1.0..1.0));
            }
        }
        indptr.push(indices.len() as i64);
    }
    Csr {
        m,
        n,
        indptr,
        indices,
        vals,
    }
}

pub fn random_vec(seed: u64, len: usize) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..len).map(|_| rng.random_range(-2.0..2.0)).collect()
}

pub fn i32s(v: &[i64]) -> Vec<i32> {
    v.iter().map(|&x| x as i32).collect()
}

pub fn f32s(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

/// `y = A x` over CSR with i32 structure arrays, in f32; an accumulator local.
pub fn spmv_csr_f32() -> Func {
    let mut b = FuncBuilder::new("spmv");
    let m = b.param("m");
    let n = b.param("n");
    let nnz = b.param("nnz");
    let ip = b.indptr("A", DType::I32, add(p(m), int(1)));
    let ix = b.indices("A", DType::I32, p(nnz));
    let a = b.values("A", DType::F32, p(nnz), BufferRole::Input);
    let x = b.values("x", DType::F32, p(n), BufferRole::Input);
    let y = b.values("y", DType::F32, p(m), BufferRole::Output);
    let i0 = b.index("i");
    let i = b.index("i");
    let jp = b.index("jp");
    let j = b.index("j");
    let acc = b.value("acc", DType::F32);
    b.finish(vec![
        block(
            "spmv.init",
            vec![parallel(
                i0,
                int(0),
                p(m),
                vec![store(y, v(i0), float(0.0))],
            )],
        ),
        block(
            "spmv",
            vec![parallel(
                i,
                int(0),
                p(m),
                vec![
                    let_(acc, float(0.0)),
                    serial(
                        jp,
                        ld(ip, v(i)),
                        ld(ip, add(v(i), int(1))),
                        vec![
                            let_(j, ld(ix, v(jp))),
                            assign(acc, add(v(acc), mul(ld(a, v(jp)), ld(x, v(j))))),
                        ],
                    ),
                    store(y, v(i), add(ld(y, v(i)), v(acc))),
                ],
            )],
        ),
    ])
}

/// `C = A B` over CSR with i64 structure arrays, in f64; B and C row-major with `k`
/// columns; the inner loop is vectorized.
pub fn spmm_csr_f64() -> Func {
    let mut b = FuncBuilder::new("spmm");
    let m = b.param("m");
    let n = b.param("n");
    let k = b.param("k");
    let nnz = b.param("nnz");
    let ip = b.indptr("A", DType::I64, add(p(m), int(1)));
    let ix = b.indices("A", DType::I64, p(nnz));
    let a = b.values("A", DType::F64, p(nnz), BufferRole::Input);
    let bb = b.values("B", DType::F64, mul(p(n), p(k)), BufferRole::Input);
    let c = b.values("C", DType::F64, mul(p(m), p(k)), BufferRole::Output);
    let i0 = b.index("i");
    let k0 = b.index("kk");
    let i = b.index("i");
    let jp = b.index("jp");
    let j = b.index("j");
    let kk = b.index("kk");
    let c_at = |i, kk| add(mul(v(i), p(k)), v(kk));
    b.finish(vec![
        block(
            "spmm.init",
            vec![parallel(
                i0,
                int(0),
                p(m),
                vec![for_(
                    ForKind::Vectorized,
                    k0,
                    int(0),
                    p(k),
                    vec![store(c, c_at(i0, k0), float(0.0))],
                )],
            )],
        ),
        block(
            "spmm",
            vec![parallel(
                i,
                int(0),
                p(m),
                vec![serial(
                    jp,
                    ld(ip, v(i)),
                    ld(ip, add(v(i), int(1))),
                    vec![
                        let_(j, ld(ix, v(jp))),
                        for_(
                            ForKind::Vectorized,
                            kk,
                            int(0),
                            p(k),
                            vec![store(
                                c,
                                c_at(i, kk),
                                add(
                                    ld(c, c_at(i, kk)),
                                    mul(ld(a, v(jp)), ld(bb, add(mul(v(j), p(k)), v(kk)))),
                                ),
                            )],
                        ),
                    ],
                )],
            )],
        ),
    ])
}

/// `y = A x` over BSR with 2x2 blocks (i32 structure), in f32, for an `m x n` matrix
/// whose sizes need not be even: padding rows are skipped by an `if`, padding columns
/// read 0 through a `select` that must not touch `x` out of bounds.
pub fn bsr_spmv_f32() -> Func {
    let mut b = FuncBuilder::new("bsr_spmv");
    let m = b.param("m");
    let n = b.param("n");
    let mb = b.param("mb");
    let nnzb = b.param("nnzb");
    let ip = b.indptr("A", DType::I32, add(p(mb), int(1)));
    let ix = b.indices("A", DType::I32, p(nnzb));
    let a = b.values("A", DType::F32, mul(p(nnzb), int(4)), BufferRole::Input);
    let x = b.values("x", DType::F32, p(n), BufferRole::Input);
    let y = b.values("y", DType::F32, p(m), BufferRole::Output);
    let io = b.index("io");
    let ii = b.index("ii");
    let jp = b.index("jp");
    let jb = b.index("jb");
    let jj = b.index("jj");
    let col = b.index("col");
    let acc = b.value("acc", DType::F32);
    let row = add(mul(v(io), int(2)), v(ii));
    b.finish(vec![block(
        "bsr",
        vec![parallel(
            io,
            int(0),
            p(mb),
            vec![for_(
                ForKind::Unrolled,
                ii,
                int(0),
                int(2),
                vec![
                    let_(acc, float(0.0)),
                    serial(
                        jp,
                        ld(ip, v(io)),
                        ld(ip, add(v(io), int(1))),
                        vec![
                            let_(jb, ld(ix, v(jp))),
                            for_(
                                ForKind::Unrolled,
                                jj,
                                int(0),
                                int(2),
                                vec![
                                    let_(col, add(mul(v(jb), int(2)), v(jj))),
                                    assign(
                                        acc,
                                        add(
                                            v(acc),
                                            mul(
                                                ld(
                                                    a,
                                                    add(
                                                        mul(add(mul(v(jp), int(2)), v(ii)), int(2)),
                                                        v(jj),
                                                    ),
                                                ),
                                                select(
                                                    cmp(CmpOp::Lt, v(col), p(n)),
                                                    ld(x, v(col)),
                                                    float(0.0),
                                                ),
                                            ),
                                        ),
                                    ),
                                ],
                            ),
                        ],
                    ),
                    if_(
                        cmp(CmpOp::Lt, row.clone(), p(m)),
                        vec![store(y, row, v(acc))],
                        vec![],
                    ),
                ],
            )],
        )],
    )])
}

/// A BSR matrix with 2x2 blocks built from a CSR one (blocks holding any entry).
pub struct Bsr {
    pub mb: usize,
    pub indptr: Vec<i64>,
    pub indices: Vec<i64>,
    pub vals: Vec<f64>,
}

pub fn csr_to_bsr2(a: &Csr) -> Bsr {
    let mb = a.m.div_ceil(2);
    let nb = a.n.div_ceil(2);
    let mut indptr = vec![0i64];
    let mut indices = Vec::new();
    let mut vals = Vec::new();
    for io in 0..mb {
        let mut blocks = vec![None::<[f64; 4]>; nb];
        for ii in 0..2 {
            let r = io * 2 + ii;
            if r >= a.m {
                continue;
            }
            for q in a.indptr[r] as usize..a.indptr[r + 1] as usize {
                let c = a.indices[q] as usize;
                let blk = blocks[c / 2].get_or_insert([0.0; 4]);
                blk[ii * 2 + c % 2] = a.vals[q];
            }
        }
        for (jb, blk) in blocks.into_iter().enumerate() {
            if let Some(blk) = blk {
                indices.push(jb as i64);
                vals.extend_from_slice(&blk);
            }
        }
        indptr.push(indices.len() as i64);
    }
    Bsr {
        mb,
        indptr,
        indices,
        vals,
    }
}

/// `y[i] = A[i, c]` (or -1 where not stored) by binary search in each CSR row (i64
/// structure), in f64.
pub fn lookup_search_f64() -> Func {
    let mut b = FuncBuilder::new("lookup");
    let m = b.param("m");
    let nnz = b.param("nnz");
    let c = b.param("c");
    let ip = b.indptr("A", DType::I64, add(p(m), int(1)));
    let ix = b.indices("A", DType::I64, p(nnz));
    let a = b.values("A", DType::F64, p(nnz), BufferRole::Input);
    let y = b.values("y", DType::F64, p(m), BufferRole::Output);
    let i = b.index("i");
    let pos = b.index("pos");
    b.finish(vec![block(
        "lookup",
        vec![parallel(
            i,
            int(0),
            p(m),
            vec![
                let_(
                    pos,
                    search(ix, ld(ip, v(i)), ld(ip, add(v(i), int(1))), p(c)),
                ),
                store(
                    y,
                    v(i),
                    select(cmp(CmpOp::Ge, v(pos), int(0)), ld(a, v(pos)), float(-1.0)),
                ),
            ],
        )],
    )])
}

/// SpMM over CSR (i32 structure, f32) accumulating each row in a heap scratch buffer
/// of `k` elements, and the row sums of A in a small stack scratch buffer.
pub fn spmm_scratch_f32() -> Func {
    let mut b = FuncBuilder::new("spmm_rowacc");
    let m = b.param("m");
    let n = b.param("n");
    let k = b.param("k");
    let nnz = b.param("nnz");
    let ip = b.indptr("A", DType::I32, add(p(m), int(1)));
    let ix = b.indices("A", DType::I32, p(nnz));
    let a = b.values("A", DType::F32, p(nnz), BufferRole::Input);
    let bb = b.values("B", DType::F32, mul(p(n), p(k)), BufferRole::Input);
    let c = b.values("C", DType::F32, mul(p(m), p(k)), BufferRole::Output);
    let rowsum = b.values("rowsum", DType::F32, p(m), BufferRole::Output);
    let acc = b.buffer(
        "acc",
        DType::F32,
        p(k),
        BufferRole::Temp,
        BufferKind::Scratch,
    );
    let tmp = b.buffer(
        "tmp",
        DType::F32,
        int(4),
        BufferRole::Temp,
        BufferKind::Scratch,
    );
    let i = b.index("i");
    let k1 = b.index("kk");
    let jp = b.index("jp");
    let j = b.index("j");
    let k2 = b.index("kk");
    let k3 = b.index("kk");
    b.finish(vec![block(
        "spmm",
        vec![parallel(
            i,
            int(0),
            p(m),
            vec![
                serial(k1, int(0), p(k), vec![store(acc, v(k1), float(0.0))]),
                store(tmp, int(0), float(0.0)),
                serial(
                    jp,
                    ld(ip, v(i)),
                    ld(ip, add(v(i), int(1))),
                    vec![
                        let_(j, ld(ix, v(jp))),
                        store(tmp, int(0), add(ld(tmp, int(0)), ld(a, v(jp)))),
                        for_(
                            ForKind::Vectorized,
                            k2,
                            int(0),
                            p(k),
                            vec![store(
                                acc,
                                v(k2),
                                add(
                                    ld(acc, v(k2)),
                                    mul(ld(a, v(jp)), ld(bb, add(mul(v(j), p(k)), v(k2)))),
                                ),
                            )],
                        ),
                    ],
                ),
                serial(
                    k3,
                    int(0),
                    p(k),
                    vec![store(c, add(mul(v(i), p(k)), v(k3)), ld(acc, v(k3)))],
                ),
                store(rowsum, v(i), ld(tmp, int(0))),
            ],
        )],
    )])
}

/// Every operator of the loop IR on integers, f64 and f32, a serial phase, a
/// top-level local and a parallel loop that does not start at 0.
pub fn ops() -> Func {
    let mut b = FuncBuilder::new("ops");
    let n = b.param("n");
    let q = b.values("q", DType::I64, p(n), BufferRole::Input);
    let r = b.values("r", DType::I64, p(n), BufferRole::Input);
    let x = b.values("x", DType::F64, p(n), BufferRole::Input);
    let xf = b.values("xf", DType::F32, p(n), BufferRole::Input);
    let keys = b.values("keys", DType::I32, int(8), BufferRole::Input);
    let oi = b.values("out_i", DType::I64, mul(p(n), int(6)), BufferRole::Output);
    let of = b.values("out_f", DType::F64, p(n), BufferRole::Output);
    let og = b.values("out_g", DType::F32, p(n), BufferRole::Output);
    let oc = b.values("out_c", DType::I32, p(n), BufferRole::Output);
    let total = b.values("total", DType::F64, int(1), BufferRole::Output);
    let half = b.index("half");
    let i = b.index("i");
    let i2 = b.index("i");
    let i3 = b.index("i");
    let s = b.value("s", DType::F64);
    let k = b.index("k");
    let qi = || ld(q, v(i));
    let ri = || ld(r, v(i));
    let xi = || ld(x, v(i));
    let xfi = || ld(xf, v(i));
    let at = |slot: i64| add(mul(v(i), int(6)), int(slot));
    b.finish(vec![
        let_(half, div(p(n), int(2))),
        block(
            "ops",
            vec![parallel(
                i,
                int(0),
                p(n),
                vec![
                    store(oi, at(0), div(qi(), ri())),
                    store(oi, at(1), rem(qi(), ri())),
                    store(oi, at(2), div(qi(), int(3))),
                    store(oi, at(3), rem(qi(), int(3))),
                    store(
                        oi,
                        at(4),
                        add(
                            sub(max(qi(), ri()), min(qi(), un(UnaryOp::Neg, ri()))),
                            add(
                                un(UnaryOp::Abs, qi()),
                                un(UnaryOp::Relu, un(UnaryOp::Neg, qi())),
                            ),
                        ),
                    ),
                    store(oi, at(5), search(keys, int(0), int(8), qi())),
                    store(
                        of,
                        v(i),
                        add(
                            add(
                                add(
                                    un(UnaryOp::Relu, xi()),
                                    mul(un(UnaryOp::Abs, xi()), float(0.5)),
                                ),
                                sub(max(xi(), float(0.25)), min(xi(), float(-0.25))),
                            ),
                            add(
                                select(
                                    or(
                                        and(
                                            cmp(CmpOp::Gt, xi(), float(0.0)),
                                            cmp(CmpOp::Eq, rem(v(i), int(2)), int(0)),
                                        ),
                                        cmp(CmpOp::Lt, xi(), float(-1.5)),
                                    ),
                                    un(UnaryOp::Sqrt, un(UnaryOp::Abs, xi())),
                                    un(UnaryOp::Exp, un(UnaryOp::Neg, xi())),
                                ),
                                add(
                                    rem(xi(), float(0.75)),
                                    sub(mul(v(i), float(0.125)), mul(float(1e-300), float(1e300))),
                                ),
                            ),
                        ),
                    ),
                    store(
                        og,
                        v(i),
                        add(
                            add(
                                un(UnaryOp::Log, add(float(1.0), un(UnaryOp::Abs, xfi()))),
                                rem(xfi(), float(0.75)),
                            ),
                            add(float(0.1), mul(xfi(), int(3))),
                        ),
                    ),
                    store(oc, v(i), sub(mul(qi(), int(2)), int(1))),
                ],
            )],
        ),
        block(
            "ops.sum",
            vec![
                let_(s, float(0.0)),
                serial(i2, int(0), p(n), vec![assign(s, add(v(s), ld(x, v(i2))))]),
                store(total, int(0), v(s)),
            ],
        ),
        block(
            "ops.tail",
            vec![parallel(
                i3,
                v(half),
                p(n),
                vec![
                    let_(k, sub(v(i3), v(half))),
                    store(oc, v(i3), add(ld(oc, v(i3)), add(int(1000), v(k)))),
                ],
            )],
        ),
    ])
}

/// What [`ops`] computes, in Rust.
pub struct OpsExpected {
    pub out_i: Vec<i64>,
    pub out_f: Vec<f64>,
    pub out_g: Vec<f32>,
    pub out_c: Vec<i32>,
    pub total: f64,
}

pub fn ops_expected(q: &[i64], r: &[i64], x: &[f64], xf: &[f32], keys: &[i32]) -> OpsExpected {
    let n = q.len();
    let ii = |op: BinaryOp, a: i64, b: i64| op.apply_i64(a, b).unwrap();
    let mut out_i = Vec::new();
    for i in 0..n {
        let (q, r) = (q[i], r[i]);
        out_i.push(ii(BinaryOp::Div, q, r));
        out_i.push(ii(BinaryOp::Rem, q, r));
        out_i.push(ii(BinaryOp::Div, q, 3));
        out_i.push(ii(BinaryOp::Rem, q, 3));
        out_i.push(q.max(r) - q.min(-r) + (q.abs() + (-q).max(0)));
        out_i.push(
            keys.iter()
                .position(|&k| k as i64 == q)
                .map_or(-1, |p| p as i64),
        );
    }
    let out_f = (0..n)
        .map(|i| {
            let x = x[i];
            let sel = if (x > 0.0 && i % 2 == 0) || x < -1.5 {
                x.abs().sqrt()
            } else {
                (-x).exp()
            };
            (UnaryOp::Relu.apply_f64(x) + x.abs() * 0.5 + (x.max(0.25) - x.min(-0.25)))
                + (sel + (BinaryOp::Rem.apply_f64(x, 0.75) + (i as f64 * 0.125 - 1e-300 * 1e300)))
        })
        .collect();
    let out_g = xf
        .iter()
        .map(|&x| {
            (1.0f32 + x.abs()).ln() + (x - 0.75f32 * (x / 0.75f32).floor()) + (0.1f32 + x * 3.0)
        })
        .collect();
    let half = n / 2;
    let out_c = (0..n)
        .map(|i| {
            let base = (q[i] * 2 - 1) as i32;
            if i >= half {
                base + 1000 + (i - half) as i32
            } else {
                base
            }
        })
        .collect();
    OpsExpected {
        out_i,
        out_f,
        out_g,
        out_c,
        total: x.iter().sum(),
    }
}

/// The inputs of [`ops`]: `q`, `r` (nonzero), `x`, `xf` and the 8 sorted `keys`.
pub type OpsInputs = (Vec<i64>, Vec<i64>, Vec<f64>, Vec<f32>, Vec<i32>);

/// Inputs for [`ops`] from a seed: `n` entries.
pub fn ops_inputs(seed: u64, n: usize) -> OpsInputs {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let q: Vec<i64> = (0..n).map(|_| rng.random_range(-20..20)).collect();
    let r: Vec<i64> = (0..n)
        .map(|_| {
            let v: i64 = rng.random_range(1..7);
            if rng.random_bool(0.5) {
                -v
            } else {
                v
            }
        })
        .collect();
    let x: Vec<f64> = (0..n).map(|_| rng.random_range(-3.0..3.0)).collect();
    let xf: Vec<f32> = (0..n).map(|_| rng.random_range(-3.0f32..3.0)).collect();
    let keys = vec![-15, -7, -2, 0, 3, 4, 11, 19];
    (q, r, x, xf, keys)
}

/// Wraps typed vectors as ABI data.
pub fn data_f32(v: &[f64]) -> Data {
    Data::F32(f32s(v))
}
