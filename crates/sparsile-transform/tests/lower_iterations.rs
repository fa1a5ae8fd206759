//! Structure of the stage-II output of `lower_iterations`: buffers, blocks, loop bounds
//! per axis kind, coordinate recovery, guards and searches, and the errors.

use sparsile_ir::coord::{BufferRole, Program};
use sparsile_ir::loops::{BufferKind, BufferLayout, Expr, For, Func, Stage, Stmt};
use sparsile_transform::{lower_iterations, LowerError};

fn parse(text: &str) -> Program {
    text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"))
}

const SPMV_CSR: &str = "\
func spmv(m, n, nnz) {
  axis I = dense_fixed(m)
  axis J = sparse_variable(I, n, nnz=nnz, idx=i32)
  axis JD = dense_fixed(n)
  buffer A: f32[I, J] input
  buffer x: f32[JD] input
  buffer y: f32[I] output
  iter spmv over [I: S, J: R] as (i, j) {
    init {
      y[i] = 0.0
    }
    y[i] = y[i] + A[i, j] * x[j]
  }
}
";

fn block<'a>(func: &'a Func, name: &str) -> &'a [Stmt] {
    func.body
        .iter()
        .find_map(|s| match s {
            Stmt::Block { name: n, body, .. } if n == name => Some(body.as_slice()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no block {name}: {:#?}", func.body))
}

fn only_for(stmts: &[Stmt]) -> &For {
    match stmts {
        [Stmt::For(f)] => f,
        other => panic!("expected one loop, found {other:#?}"),
    }
}

fn visit_stmts(stmts: &[Stmt], f: &mut impl FnMut(&Stmt)) {
    for s in stmts {
        f(s);
        match s {
            Stmt::For(l) => visit_stmts(&l.body, f),
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                visit_stmts(then_body, f);
                visit_stmts(else_body, f);
            }
            Stmt::Block { body, .. } => visit_stmts(body, f),
            _ => {}
        }
    }
}

#[test]
fn spmv_csr_buffers_blocks_and_bounds() {
    let program = parse(SPMV_CSR);
    let func = lower_iterations(&program).unwrap();
    assert_eq!(func.stage, Stage::Pos);
    assert_eq!(func.params.len(), 3);
    assert_eq!(func.axes.len(), 3);
    let names: Vec<&str> = func.buffers.values().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["A", "x", "y", "A_J_indptr", "A_J_indices"]);
    let indptr = func.buffer_by_name("A_J_indptr").unwrap();
    let indices = func.buffer_by_name("A_J_indices").unwrap();
    let b = &func.buffers[indptr];
    assert_eq!(
        b.kind,
        BufferKind::Indptr {
            tensor: "A".into(),
            axis: 1
        }
    );
    assert_eq!(b.role, BufferRole::Input);
    assert_eq!(b.dtype, sparsile_ir::DType::I32);
    let m = Expr::Param(program.param_by_name("m").unwrap());
    assert_eq!(
        b.layout,
        BufferLayout::Flat(Expr::binary(
            sparsile_ir::coord::BinaryOp::Add,
            m.clone(),
            Expr::Int(1)
        ))
    );
    assert!(matches!(
        func.buffers[indices].kind,
        BufferKind::Indices { axis: 1, .. }
    ));
    assert!(
        matches!(&func.buffers[program.buffer_by_name("A").unwrap()].layout, BufferLayout::Axes(a) if a.len() == 2)
    );

    // Init block before the body block, over the spatial axis only.
    let order: Vec<&str> = func
        .body
        .iter()
        .map(|s| match s {
            Stmt::Block { name, .. } => name.as_str(),
            _ => panic!("top level holds blocks"),
        })
        .collect();
    assert_eq!(order, ["spmv.init", "spmv"]);
    let init = only_for(block(&func, "spmv.init"));
    assert_eq!(
        (init.lo.clone(), init.hi.clone()),
        (Expr::Int(0), m.clone())
    );
    assert!(matches!(init.body.as_slice(), [Stmt::Store { .. }]));

    let outer = only_for(block(&func, "spmv"));
    let inner = match outer.body.as_slice() {
        [Stmt::For(f)] => f,
        other => panic!("{other:#?}"),
    };
    let i = Expr::Var(outer.var);
    assert_eq!(inner.lo, Expr::load(indptr, vec![i.clone()]));
    assert_eq!(
        inner.hi,
        Expr::load(
            indptr,
            vec![Expr::binary(
                sparsile_ir::coord::BinaryOp::Add,
                i,
                Expr::Int(1)
            )]
        )
    );
    // Coordinate recovery, then the accumulation (the output index is a dense loop
    // variable: no guard).
    match &inner.body[0] {
        Stmt::Let { value, .. } => {
            assert_eq!(*value, Expr::load(indices, vec![Expr::Var(inner.var)]))
        }
        other => panic!("{other:#?}"),
    }
    assert!(
        matches!(inner.body[1], Stmt::Store { .. }),
        "{:#?}",
        inner.body
    );
}

#[test]
fn ell_padding_is_guarded_and_sparse_fixed_bounds() {
    let program = parse(
        "\
func spmv(m, n, w) {
  axis I = dense_fixed(m)
  axis J = sparse_fixed(I, n, per=w, idx=i32)
  axis JD = dense_fixed(n)
  buffer A: f32[I, J] input
  buffer x: f32[JD] input
  buffer y: f32[I] output
  iter spmv over [I: S, J: R] as (i, j) {
    y[i] = y[i] + A[i, j] * x[j]
  }
}
",
    );
    let func = lower_iterations(&program).unwrap();
    let outer = only_for(block(&func, "spmv"));
    let Stmt::For(inner) = &outer.body[0] else {
        panic!()
    };
    let w = Expr::Param(program.param_by_name("w").unwrap());
    let lo = Expr::binary(
        sparsile_ir::coord::BinaryOp::Mul,
        Expr::Var(outer.var),
        w.clone(),
    );
    assert_eq!(inner.lo, lo);
    assert_eq!(
        inner.hi,
        Expr::binary(sparsile_ir::coord::BinaryOp::Add, lo, w)
    );
    // The padding coordinate (= n) reads 0: the read of A selects on `j < n`.
    let Stmt::Store { value, .. } = &inner.body[1] else {
        panic!("{:#?}", inner.body)
    };
    let n = Expr::Param(program.param_by_name("n").unwrap());
    let mut guarded_reads = 0;
    value.visit(&mut |e| {
        if let Expr::Select { cond, then, .. } = e {
            if matches!(**cond, Expr::Cmp { ref rhs, .. } if **rhs == n) {
                guarded_reads += matches!(**then, Expr::Load { .. }) as usize;
            }
        }
    });
    assert_eq!(guarded_reads, 2, "{value:#?}");
}

#[test]
fn coordinate_access_into_a_sparse_buffer_searches() {
    let program = sparsile::compile_notation(
        "tensor A: f64[m, n] csr\ntensor idx: i32[m]\ntensor y: f64[m]\ny[i] = A[i, idx[i]]\n",
    )
    .unwrap();
    let func = lower_iterations(&program).unwrap();
    let mut searches = 0;
    let mut guarded_search = false;
    visit_stmts(&func.body, &mut |s| {
        if let Stmt::Let { value, .. } = s {
            value.visit(&mut |e| searches += matches!(e, Expr::Search { .. }) as usize);
            guarded_search |=
                matches!(value, Expr::Select { then, .. } if matches!(**then, Expr::Search { .. }));
        }
    });
    assert_eq!(searches, 1);
    assert!(
        guarded_search,
        "the search runs only for in-range coordinates"
    );
}

#[test]
fn nested_top_level_store_is_self_contained() {
    let program = parse(
        "\
func f(m) {
  axis I = dense_fixed(m)
  buffer y: f32[I] output
  y[0] = 1.0
}
",
    );
    let func = lower_iterations(&program).unwrap();
    // One top-level statement: the store with its range guard inside a self-contained
    // statement.
    assert_eq!(func.body.len(), 1);
    assert!(matches!(func.body[0], Stmt::If { .. }), "{:#?}", func.body);
}

#[test]
fn union_axes_are_refused() {
    let program = parse(
        "\
func main(m, n, nnz_A, nnz_B, nnz_C) {
  axis I_m = dense_fixed(m)
  axis A_J = sparse_variable(I_m, n, nnz=nnz_A, idx=i32)
  axis B_J = sparse_variable(I_m, n, nnz=nnz_B, idx=i32)
  axis C_J = sparse_variable(I_m, n, nnz=nnz_C, idx=i32) = union(A_J, B_J)
  buffer A: f32[I_m, A_J] input
  buffer B: f32[I_m, B_J] input
  buffer C: f32[I_m, C_J] output
  iter C over [I_m: S, C_J: S] as (i, j) {
    C[i, j] = A[i, j] + B[i, j]
  }
}
",
    );
    let err = lower_iterations(&program).unwrap_err();
    assert!(
        matches!(&err, LowerError::CoIteration { axis } if axis == "C_J"),
        "{err}"
    );
    assert!(err.to_string().contains("interpreter"));
}

#[test]
fn coo_random_access_is_refused() {
    let program = sparsile::compile_notation(
        "tensor A: f64[m, n] coo\ntensor idx: i32[m]\ntensor y: f64[m]\ny[i] = A[i, idx[i]]\n",
    )
    .unwrap();
    let err = lower_iterations(&program).unwrap_err();
    assert!(
        matches!(&err, LowerError::RandomAccessNonUnique { buffer, .. } if buffer == "A"),
        "{err}"
    );
}

#[test]
fn invalid_programs_are_refused() {
    let mut program = parse(SPMV_CSR);
    // Iterate J without its parent I.
    if let sparsile_ir::coord::Stmt::Iteration(it) = &mut program.body[0] {
        it.axes.remove(0);
    }
    let err = lower_iterations(&program).unwrap_err();
    assert!(
        matches!(
            err,
            LowerError::InvalidProgram { .. } | LowerError::ParentNotIterated { .. }
        ),
        "{err}"
    );
}
