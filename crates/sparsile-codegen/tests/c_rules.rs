//! What the C backend refuses (each error names the culprit), and how it handles names
//! that clash with C, scratch shared by phases and dead locals.

mod common;

use common::build::*;
use common::harness::compiler;
use common::kernels::spmv_csr_f32;
use sparsile_codegen::{emit_c, CodegenError};
use sparsile_ir::coord::{BufferRole, UnaryOp};
use sparsile_ir::loops::{BufferKind, CmpOp, Expr, Func, Stage, Stmt};
use sparsile_ir::VarId;
use sparsile_ir::{DType, Span};

/// `for i (parallel) { for j { wrap(j, y[i] = y[i] + x[j]) } }` over `dtype` buffers.
fn sum_over_j(dtype: DType, wrap: impl Fn(VarId, Stmt) -> Stmt) -> Func {
    let mut b = FuncBuilder::new("h");
    let n = b.param("n");
    let x = b.values("x", dtype, p(n), BufferRole::Input);
    let y = b.values("y", dtype, p(n), BufferRole::Output);
    let (i, j) = (b.index("i"), b.index("j"));
    let update = store(y, v(i), add(ld(y, v(i)), ld(x, v(j))));
    b.finish(vec![parallel(
        i,
        int(0),
        p(n),
        vec![serial(j, int(0), p(n), vec![wrap(j, update)])],
    )])
}

#[test]
fn half_precision_sums_in_place_are_refused() {
    for dtype in [DType::F16, DType::BF16] {
        // y[i] = y[i] + x[j] over j: every partial sum rounded to half precision.
        let f = sum_over_j(dtype, |_, store| store);
        let err = emit_c(&f).unwrap_err();
        assert!(
            matches!(err, CodegenError::HalfPrecisionSum { ref buffer, ref var, .. } if buffer == "y" && var == "j"),
            "{err:?}"
        );
        assert!(err.to_string().contains("cache_write"), "{err}");

        // A local loaded from y[i] and stored back at every j sums in half precision too.
        let mut b = FuncBuilder::new("h");
        let n = b.param("n");
        let x = b.values("x", dtype, p(n), BufferRole::Input);
        let y = b.values("y", dtype, p(n), BufferRole::Output);
        let acc = b.buffer(
            "acc",
            DType::F32,
            int(1),
            BufferRole::Temp,
            BufferKind::Local,
        );
        let (i, j) = (b.index("i"), b.index("j"));
        let f = b.finish(vec![parallel(
            i,
            int(0),
            p(n),
            vec![serial(
                j,
                int(0),
                p(n),
                vec![
                    store(acc, int(0), ld(y, v(i))),
                    store(acc, int(0), add(ld(acc, int(0)), ld(x, v(j)))),
                    store(y, v(i), ld(acc, int(0))),
                ],
            )],
        )]);
        let err = emit_c(&f).unwrap_err();
        assert!(
            matches!(err, CodegenError::HalfPrecisionSum { .. }),
            "{err:?}"
        );

        // Summed in an f32 local over j, stored once per i: accepted, with conversions.
        let mut b = FuncBuilder::new("h");
        let n = b.param("n");
        let x = b.values("x", dtype, p(n), BufferRole::Input);
        let y = b.values("y", dtype, p(n), BufferRole::Output);
        let acc = b.buffer(
            "acc",
            DType::F32,
            int(1),
            BufferRole::Temp,
            BufferKind::Local,
        );
        let (i, j) = (b.index("i"), b.index("j"));
        let f = b.finish(vec![parallel(
            i,
            int(0),
            p(n),
            vec![
                store(acc, int(0), ld(y, v(i))),
                serial(
                    j,
                    int(0),
                    p(n),
                    vec![store(acc, int(0), add(ld(acc, int(0)), ld(x, v(j))))],
                ),
                store(y, v(i), ld(acc, int(0))),
            ],
        )]);
        let code = emit_c(&f).unwrap().code;
        let name = dtype.name();
        assert!(
            code.contains(&format!("sparsile_{name}_to_f32(x[j])")),
            "{code}"
        );
        assert!(
            code.contains(&format!("sparsile_f32_to_{name}(acc[0])")),
            "{code}"
        );
        assert!(code.contains("float acc[1]"), "{code}");
        if let Some(cc) = compiler() {
            common::harness::check_compiles(&cc, &code).unwrap();
        }

        // y[i] = y[i] + x[j] under `if j == 0`: one iteration of j adds (the first lane
        // adding a warp's sum), so nothing is summed in half precision; under `j < 1`
        // the rule does not look into the condition and still refuses.
        for (pinned, cond) in [(true, CmpOp::Eq), (false, CmpOp::Lt)] {
            let f = sum_over_j(dtype, |j, store| {
                if_(
                    cmp(cond, v(j), int(if pinned { 0 } else { 1 })),
                    vec![store],
                    vec![],
                )
            });
            let result = emit_c(&f);
            assert_eq!(result.is_ok(), pinned, "{cond:?}: {:?}", result.err());
        }
    }
    let mut b = FuncBuilder::new("h");
    b.value("acc", DType::F16);
    let err = emit_c(&b.finish(vec![])).unwrap_err();
    assert!(matches!(err, CodegenError::HalfPrecisionLocal { ref var, .. } if var == "acc"));
}

#[test]
fn stage_two_functions_are_refused() {
    let mut f = spmv_csr_f32();
    f.stage = Stage::Pos;
    assert_eq!(
        emit_c(&f).unwrap_err(),
        CodegenError::NotFlat {
            func: "spmv".into()
        }
    );
}

#[test]
fn accesses_take_one_offset() {
    let mut b = FuncBuilder::new("two");
    let n = b.param("n");
    let y = b.values("y", DType::F64, p(n), BufferRole::Output);
    let i = b.index("i");
    let f = b.finish(vec![parallel(
        i,
        int(0),
        p(n),
        vec![sparsile_ir::loops::Stmt::Store {
            buffer: y,
            indices: vec![v(i), v(i)],
            value: float(1.0),
            span: Span::new(7, 3, 0, 0),
        }],
    )]);
    let err = emit_c(&f).unwrap_err();
    assert!(
        matches!(err, CodegenError::IndexCount { ref buffer, count: 2, .. } if buffer == "y"),
        "{err:?}"
    );
    assert!(err.to_string().starts_with("line 7, column 3: "));
}

#[test]
fn search_needs_an_integer_buffer_and_math_needs_floats() {
    let mut b = FuncBuilder::new("s");
    let n = b.param("n");
    let x = b.values("x", DType::F32, p(n), BufferRole::Input);
    let y = b.values("y", DType::I64, p(n), BufferRole::Output);
    let i = b.index("i");
    let f = b.finish(vec![parallel(
        i,
        int(0),
        p(n),
        vec![store(y, v(i), search(x, int(0), p(n), v(i)))],
    )]);
    assert!(matches!(
        emit_c(&f).unwrap_err(),
        CodegenError::SearchNotInteger {
            dtype: DType::F32,
            ..
        }
    ));

    let mut b = FuncBuilder::new("s");
    let n = b.param("n");
    let y = b.values("y", DType::I64, p(n), BufferRole::Output);
    let i = b.index("i");
    let f = b.finish(vec![parallel(
        i,
        int(0),
        p(n),
        vec![store(y, v(i), un(UnaryOp::Sqrt, v(i)))],
    )]);
    assert!(matches!(
        emit_c(&f).unwrap_err(),
        CodegenError::IntegerUnary { op: "sqrt", .. }
    ));
}

#[test]
fn unknown_ids_are_errors_not_panics() {
    let mut b = FuncBuilder::new("u");
    let n = b.param("n");
    let y = b.values("y", DType::F64, p(n), BufferRole::Output);
    let i = b.index("i");
    let f = b.finish(vec![parallel(
        i,
        int(0),
        p(n),
        vec![store(y, v(i), ld(sparsile_ir::BufferId(9), v(i)))],
    )]);
    assert!(matches!(
        emit_c(&f).unwrap_err(),
        CodegenError::UnknownId {
            what: "buffer",
            index: 9,
            count: 1,
            ..
        }
    ));
}

#[test]
fn scratch_shared_by_phases_comes_from_the_caller() {
    let mut b = FuncBuilder::new("sc");
    let n = b.param("n");
    let t = b.buffer("t", DType::F32, p(n), BufferRole::Temp, BufferKind::Scratch);
    let y = b.values("y", DType::F32, p(n), BufferRole::Output);
    let i = b.index("i");
    let i2 = b.index("i");
    let f = b.finish(vec![
        parallel(i, int(0), p(n), vec![store(t, v(i), float(1.0))]),
        parallel(i2, int(0), p(n), vec![store(y, v(i2), ld(t, v(i2)))]),
    ]);
    let src = emit_c(&f).unwrap();
    assert!(!src.buffer_order[0].allocated_by_kernel);
    assert!(src
        .code
        .contains("float *restrict t = (float *)buffers[0];"));
    assert!(src.code.contains("if (!t) return 1;"), "{}", src.code);
    assert!(!src.code.contains("calloc"), "{}", src.code);
}

#[test]
fn shared_locals_must_be_recomputable() {
    // `let lim = y[0]` reads a buffer the function writes: a later phase cannot
    // recompute it.
    let mut b = FuncBuilder::new("sh");
    let n = b.param("n");
    let y = b.values("y", DType::I64, p(n), BufferRole::Output);
    let lim = b.index("lim");
    let i = b.index("i");
    let f = b.finish(vec![
        let_(lim, ld(y, int(0))),
        parallel(i, int(0), v(lim), vec![store(y, v(i), int(1))]),
    ]);
    let err = emit_c(&f).unwrap_err();
    assert!(
        matches!(err, CodegenError::SharedLocal { ref var, .. } if var == "lim"),
        "{err:?}"
    );

    // An assigned top-level local used by a later phase.
    let mut b = FuncBuilder::new("sh");
    let n = b.param("n");
    let y = b.values("y", DType::I64, p(n), BufferRole::Output);
    let lim = b.index("lim");
    let i = b.index("i");
    let f = b.finish(vec![
        let_(lim, p(n)),
        if_(
            cmp(CmpOp::Gt, v(lim), int(4)),
            vec![assign(lim, int(4))],
            vec![],
        ),
        parallel(i, int(0), v(lim), vec![store(y, v(i), int(1))]),
    ]);
    assert!(matches!(
        emit_c(&f).unwrap_err(),
        CodegenError::SharedLocal {
            reason: "it is assigned",
            ..
        }
    ));
}

#[test]
fn names_that_clash_with_c_are_renamed() {
    let mut b = FuncBuilder::new("float");
    let n = b.param("end");
    let y = b.values("double", DType::F64, p(n), BufferRole::Output);
    let i = b.index("exp");
    let f = b.finish(vec![parallel(
        i,
        int(0),
        p(n),
        vec![store(y, v(i), un(UnaryOp::Exp, Expr::Float(0.5)))],
    )]);
    let src = emit_c(&f).unwrap();
    assert!(src.code.contains("const int64_t end_2 = params[0];"));
    assert!(
        src.code.contains("double_2[exp_2] = exp(0.5);"),
        "{}",
        src.code
    );
    if let Some(cc) = compiler() {
        common::harness::check_compiles(&cc, &src.code).unwrap();
    }
}

#[test]
fn dead_locals_bind_nothing() {
    // `j` is only read by the dead `k`: neither is emitted, and `A_indices` (read only
    // by `j`) is not bound, so the C has no unused variables.
    let mut b = FuncBuilder::new("dead");
    let m = b.param("m");
    let nnz = b.param("nnz");
    let ip = b.indptr("A", DType::I32, add(p(m), int(1)));
    let ix = b.indices("A", DType::I32, p(nnz));
    let a = b.values("A", DType::F64, p(nnz), BufferRole::Input);
    let y = b.values("y", DType::F64, p(m), BufferRole::Output);
    let i = b.index("i");
    let jp = b.index("jp");
    let j = b.index("j");
    let k = b.index("k");
    let acc = b.value("acc", DType::F64);
    let f = b.finish(vec![parallel(
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
                    let_(k, add(v(j), int(1))),
                    assign(acc, add(v(acc), ld(a, v(jp)))),
                ],
            ),
            store(y, v(i), v(acc)),
        ],
    )]);
    let src = emit_c(&f).unwrap();
    assert!(!src.code.contains("buffers[1]"), "{}", src.code);
    assert!(!src.code.contains("int64_t j ="), "{}", src.code);
    assert!(!src.code.contains("int64_t k ="), "{}", src.code);
    if let Some(cc) = compiler() {
        common::harness::check_compiles(&cc, &src.code).unwrap();
    }
}
