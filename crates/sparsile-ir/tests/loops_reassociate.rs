//! `vectorized(reassociate)` loops: random loops with local `+` reductions verify and
//! round-trip through text; the parser's error for a wrong kind argument; and
//! `local_reductions` finds the reduced elements. (Verifier rejections are listed in
//! `tests/loops/verify/reassociate.flat`.)

use proptest::prelude::*;

use sparsile_ir::coord::{BinaryOp, BufferRole};
use sparsile_ir::loops::builder::{float, int, load};
use sparsile_ir::loops::{
    local_reductions, verify, BufferKind, CmpOp, Expr, ForKind, Func, FuncBuilder, Stage, Stmt,
    VarType,
};
use sparsile_ir::{BufferId, DType, VarId};

/// One statement of the generated loop body.
#[derive(Debug, Clone)]
enum Piece {
    /// `acc[k] = acc[k] + addend` (or `addend + acc[k]` when `commuted`).
    Reduce { k: i64, addend: u8, commuted: bool },
    /// The same, under `if v % 2 == 0`.
    Guarded { k: i64, addend: u8 },
    /// `z[v] = addend`.
    Elementwise { addend: u8 },
}

fn piece(len: i64) -> impl Strategy<Value = Piece> {
    prop_oneof![
        (0..len, any::<u8>(), any::<bool>()).prop_map(|(k, addend, commuted)| Piece::Reduce {
            k,
            addend,
            commuted
        }),
        (0..len, any::<u8>()).prop_map(|(k, addend)| Piece::Guarded { k, addend }),
        any::<u8>().prop_map(|addend| Piece::Elementwise { addend }),
    ]
}

/// A float expression of the loop's values, chosen by `code`.
fn addend(code: u8, x: BufferId, v: VarId, t: Option<VarId>) -> Expr {
    let xv = load(x, vec![Expr::Var(v)]);
    match code % 5 {
        0 => xv,
        1 => Expr::binary(BinaryOp::Mul, xv.clone(), xv),
        2 => float(f64::from(code) * 0.5 - 3.0),
        3 => match t {
            Some(t) => Expr::binary(BinaryOp::Sub, Expr::Var(t), float(1.0)),
            None => xv,
        },
        _ => Expr::binary(
            BinaryOp::Add,
            xv,
            load(x, vec![Expr::binary(BinaryOp::Sub, Expr::Var(v), int(1))]),
        ),
    }
}

fn generate(
    stage: Stage,
    dtype: DType,
    len: i64,
    with_let: bool,
    scalar_sums: u32,
    masked: bool,
    pieces: &[Piece],
) -> Func {
    let mut b = FuncBuilder::new("reduce", stage);
    let n = b.param("n");
    let x = b.flat_buffer(
        "x",
        dtype,
        Expr::Param(n),
        BufferRole::Input,
        BufferKind::Values,
    );
    let z = b.flat_buffer(
        "z",
        dtype,
        Expr::Param(n),
        BufferRole::Output,
        BufferKind::Values,
    );
    let out = b.flat_buffer(
        "out",
        dtype,
        int(len),
        BufferRole::Output,
        BufferKind::Values,
    );
    let acc = b.flat_buffer("acc", dtype, int(len), BufferRole::Temp, BufferKind::Local);
    b.for_loop("k", int(0), int(len), ForKind::Unrolled, |b, k| {
        b.store(acc, vec![Expr::Var(k)], float(0.0));
    });
    b.for_loop(
        "v",
        int(1),
        Expr::Param(n),
        ForKind::VectorizedReduction {
            scalar_sums,
            masked,
        },
        |b, v| {
            let t = with_let.then(|| {
                b.let_(
                    "t",
                    VarType::Value(dtype),
                    Expr::binary(BinaryOp::Mul, load(x, vec![Expr::Var(v)]), float(2.0)),
                )
            });
            for p in pieces {
                match *p {
                    Piece::Reduce {
                        k,
                        addend: code,
                        commuted,
                    } => {
                        let own = load(acc, vec![int(k)]);
                        let a = addend(code, x, v, t);
                        let value = if commuted {
                            Expr::binary(BinaryOp::Add, a, own)
                        } else {
                            Expr::binary(BinaryOp::Add, own, a)
                        };
                        b.store(acc, vec![int(k)], value);
                    }
                    Piece::Guarded { k, addend: code } => {
                        let even = Expr::cmp(
                            CmpOp::Eq,
                            Expr::binary(BinaryOp::Rem, Expr::Var(v), int(2)),
                            int(0),
                        );
                        let a = addend(code, x, v, t);
                        b.if_(even, |b| {
                            let own = load(acc, vec![int(k)]);
                            b.store(acc, vec![int(k)], Expr::binary(BinaryOp::Add, own, a));
                        });
                    }
                    Piece::Elementwise { addend: code } => {
                        b.store(z, vec![Expr::Var(v)], addend(code, x, v, t));
                    }
                }
            }
        },
    );
    b.for_loop("k2", int(0), int(len), ForKind::Serial, |b, k| {
        b.store(out, vec![Expr::Var(k)], load(acc, vec![Expr::Var(k)]));
    });
    b.finish()
}

fn reduction_loop(f: &Func) -> &sparsile_ir::loops::For {
    f.body
        .iter()
        .find_map(|s| match s {
            Stmt::For(l) if matches!(l.kind, ForKind::VectorizedReduction { .. }) => Some(l),
            _ => None,
        })
        .expect("the generated function has a vectorized(reassociate) loop")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn reduction_loops_verify_and_round_trip(
        flat in any::<bool>(),
        double in any::<bool>(),
        with_let in any::<bool>(),
        scalar_sums in prop_oneof![Just(1u32), Just(2), Just(4), Just(16)],
        masked in any::<bool>(),
        (len, pieces) in (1i64..4).prop_flat_map(|len| (Just(len), proptest::collection::vec(piece(len), 0..6))),
    ) {
        let stage = if flat { Stage::Flat } else { Stage::Pos };
        let dtype = if double { DType::F64 } else { DType::F32 };
        let f = generate(stage, dtype, len, with_let, scalar_sums, masked, &pieces);
        let text = f.to_string();
        if let Err(errors) = verify(&f) {
            let listing: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            panic!("generated function fails the verifier:\n{text}\n{}", listing.join("\n"));
        }
        let kind = match (scalar_sums, masked) {
            (1, false) => " vectorized(reassociate) {".to_string(),
            (1, true) => " vectorized(reassociate, masked) {".to_string(),
            (n, false) => format!(" vectorized(reassociate, scalar_sums={n}) {{"),
            (n, true) => format!(" vectorized(reassociate, scalar_sums={n}, masked) {{"),
        };
        prop_assert!(text.contains(&kind), "{}", text);
        let mut parsed: Func = text
            .parse()
            .unwrap_or_else(|e| panic!("printed text does not parse: {e}\n{text}"));
        prop_assert_eq!(parsed.to_string(), text.clone());
        parsed.clear_spans();
        prop_assert_eq!(&parsed, &f);
        // One reduced element per distinct `k` among the reductions, in first-use order.
        let mut expected: Vec<i64> = Vec::new();
        for p in &pieces {
            if let Piece::Reduce { k, .. } | Piece::Guarded { k, .. } = p {
                if !expected.contains(k) {
                    expected.push(*k);
                }
            }
        }
        let found: Vec<i64> = local_reductions(&f, reduction_loop(&f))
            .unwrap()
            .iter()
            .map(|r| match r.index {
                Expr::Int(k) => k,
                ref other => panic!("index {other:?}"),
            })
            .collect();
        prop_assert_eq!(found, expected);
    }
}

#[test]
fn the_kind_argument_must_be_reassociate() {
    let text =
        "flat func f(n) {\n  buffer x: f32[n] input values\n  buffer a: f32[1] temp local\n  \
                for i in 0..n vectorized(fast) {\n    a[0] = a[0] + x[i]\n  }\n}\n";
    let err = text.parse::<Func>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 4, column 28: expected `reassociate`, found `fast`"
    );
    let fixed = text.replace("vectorized(fast)", "vectorized(reassociate)");
    let f: Func = fixed.parse().unwrap();
    verify(&f).unwrap();
    assert_eq!(f.to_string(), fixed);
    let sums = text.replace("vectorized(fast)", "vectorized(reassociate, sums=4)");
    let err = sums.parse::<Func>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 4, column 41: expected `scalar_sums` or `masked`, found `sums`"
    );
    let sums = text.replace("vectorized(fast)", "vectorized(reassociate, scalar_sums=x)");
    let err = sums.parse::<Func>().unwrap_err();
    assert!(
        err.to_string()
            .contains("the number of scalar partial sums"),
        "{err}"
    );
    let sums = text.replace("vectorized(fast)", "vectorized(reassociate, scalar_sums=4)");
    let f: Func = sums.parse().unwrap();
    verify(&f).unwrap();
    assert_eq!(f.to_string(), sums);
    // `masked`, in either order with `scalar_sums`, printed after it; each at most once.
    let masked = text.replace(
        "vectorized(fast)",
        "vectorized(reassociate, masked, scalar_sums=4)",
    );
    let f: Func = masked.parse().unwrap();
    verify(&f).unwrap();
    assert_eq!(
        f.to_string(),
        text.replace(
            "vectorized(fast)",
            "vectorized(reassociate, scalar_sums=4, masked)"
        )
    );
    let twice = text.replace(
        "vectorized(fast)",
        "vectorized(reassociate, masked, masked)",
    );
    let err = twice.parse::<Func>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 4, column 49: `masked` is given twice"
    );
}

#[test]
fn reductions_list_every_statement_of_an_element() {
    let text =
        "flat func f(n) {\n  buffer x: f64[n] input values\n  buffer a: f64[2] temp local\n  \
                for i in 0..n vectorized(reassociate) {\n    a[1] = a[1] + x[i]\n    \
                a[0] = x[i] + a[0]\n    a[1] = a[1] + 1.0\n  }\n}\n";
    let f: Func = text.parse().unwrap();
    let found = local_reductions(&f, reduction_loop(&f)).unwrap();
    let summary: Vec<(Expr, Vec<u32>)> = found
        .iter()
        .map(|r| (r.index.clone(), r.spans.iter().map(|s| s.line).collect()))
        .collect();
    assert_eq!(
        summary,
        vec![(int(1), vec![5, 7]), (int(0), vec![6])],
        "elements in first-use order with their statements' lines"
    );
}
