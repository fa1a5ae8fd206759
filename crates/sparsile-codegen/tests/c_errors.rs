//! What the C backend refuses, and that each error names the culprit.

mod common;

use common::build::*;
use common::harness::compiler;
use common::kernels::spmv_csr_f32;
use sparsile_codegen::{emit_c, CodegenError};
use sparsile_ir::coord::{BufferRole, UnaryOp};
use sparsile_ir::loops::{BufferKind, CmpOp, Expr, Stage};
use sparsile_ir::{DType, Span};

#[test]
fn half_precision_buffers_are_refused() {
    for dtype in [DType::F16, DType::BF16] {
        let mut b = FuncBuilder::new("h");
        let n = b.param("n");
        let x = b.values("x", dtype, p(n), BufferRole::Input);
        let i = b.index("i");
        let y = b.values("y", DType::F32, p(n), BufferRole::Output);
        let mut f = b.finish(vec![parallel(
            i,
            int(0),
            p(n),
            vec![store(y, v(i), ld(x, v(i)))],
        )]);
        f.buffers[x].span = Span::new(3, 5, 0, 0);
        let err = emit_c(&f).unwrap_err();
        assert!(
            matches!(err, CodegenError::HalfPrecisionBuffer { ref buffer, .. } if buffer == "x")
        );
        let msg = err.to_string();
        assert!(msg.contains("line 3, column 5"), "{msg}");
        assert!(msg.contains("f32/f64 only"), "{msg}");
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
fn scratch_cannot_outlive_a_phase() {
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
    assert_eq!(
        emit_c(&f).unwrap_err(),
        CodegenError::ScratchAcrossPhases {
            buffer: "t".into(),
            first: 0,
            second: 1
        }
    );
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
