//! Lowering of index notation programs to stage I: axes, drivers, S/R marks, zeroing and
//! coordinate maps for the standard sparse kernels.

use sparsile::compile_notation;
use sparsile_ir::coord::{AxisStructure, Expr, IterKind, Program, SparseIteration, Stmt};
use sparsile_ir::AxisKind;

fn lower(text: &str) -> Program {
    compile_notation(text).unwrap_or_else(|e| panic!("lowering failed: {e}\n{text}"))
}

/// Compact rendering of an index/value expression with names.
fn expr(p: &Program, e: &Expr) -> String {
    match e {
        Expr::Int(v) => v.to_string(),
        Expr::Float(v) => format!("{v:?}"),
        Expr::Var(v) => p.vars[*v].name.clone(),
        Expr::Param(q) => p.params[*q].name.clone(),
        Expr::Load { buffer, indices } => {
            let ix: Vec<String> = indices.iter().map(|i| expr(p, i)).collect();
            format!("{}[{}]", p.buffers[*buffer].name, ix.join(","))
        }
        Expr::Unary { op, arg } => format!("{}({})", op.name(), expr(p, arg)),
        Expr::Binary { op, lhs, rhs } => match op.precedence() {
            Some(_) => format!("({} {} {})", expr(p, lhs), op.symbol(), expr(p, rhs)),
            None => format!("{}({}, {})", op.symbol(), expr(p, lhs), expr(p, rhs)),
        },
    }
}

fn stmts(p: &Program, body: &[Stmt]) -> Vec<String> {
    body.iter()
        .map(|s| match s {
            Stmt::Store(st) => {
                let ix: Vec<String> = st.indices.iter().map(|i| expr(p, i)).collect();
                format!(
                    "{}[{}] = {}",
                    p.buffers[st.buffer].name,
                    ix.join(","),
                    expr(p, &st.value)
                )
            }
            Stmt::Iteration(it) => it.name.clone(),
        })
        .collect()
}

/// `name [AX:S as v, ...]`.
fn header(p: &Program, it: &SparseIteration) -> String {
    let ax: Vec<String> = it
        .axes
        .iter()
        .map(|a| {
            format!(
                "{}:{} {}",
                p.axes[a.axis].name,
                a.kind.letter(),
                p.vars[a.var].name
            )
        })
        .collect();
    format!("{} [{}]", it.name, ax.join(", "))
}

fn iterations(p: &Program) -> Vec<&SparseIteration> {
    p.body
        .iter()
        .map(|s| match s {
            Stmt::Iteration(it) => it,
            Stmt::Store(_) => panic!("top-level store"),
        })
        .collect()
}

/// One line per iteration: header, init stores, body stores.
fn summary(p: &Program) -> Vec<String> {
    iterations(p)
        .into_iter()
        .map(|it| {
            format!(
                "{} init{:?} body{:?}",
                header(p, it),
                stmts(p, &it.init),
                stmts(p, &it.body)
            )
        })
        .collect()
}

fn axis_names(p: &Program) -> Vec<String> {
    p.axes.values().map(|a| a.name.clone()).collect()
}

#[test]
fn spmv_csr() {
    let p = lower(
        "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n",
    );
    assert_eq!(axis_names(&p), ["I_m", "A_J", "I_n"]);
    assert_eq!(
        summary(&p),
        [r#"y [I_m:S i, A_J:R j] init["y[i] = 0.0"] body["y[i] = (y[i] + (A[i,j] * x[j]))"]"#]
    );
    let params: Vec<&str> = p.params.values().map(|q| q.name.as_str()).collect();
    assert_eq!(params, ["m", "n", "nnz_A"]);
}

const SPMM_FORMATS: [&str; 11] = [
    "csr",
    "csc",
    "coo",
    "dcsr",
    "bsr:2x2",
    "dbsr:2x4",
    "ell",
    "ell:3",
    "dia",
    "srbcrs:2x4",
    "ragged",
];

fn spmm(format: &str) -> String {
    format!(
        "tensor A: f32[m, n] {format}\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"
    )
}

#[test]
fn spmm_on_every_2d_format_iterates_the_sparse_operand() {
    for f in SPMM_FORMATS {
        let p = lower(&spmm(f));
        let a = p.buffer_by_name("A").unwrap();
        let its = iterations(&p);
        let main = its.last().unwrap();
        // The driver's axes come first, in layout order, then the dense k axis (spatial).
        let n = p.buffers[a].axes.len();
        let driver_axes: Vec<_> = main.axes[..n].iter().map(|x| x.axis).collect();
        assert_eq!(driver_axes, p.buffers[a].axes, "{f}");
        let last = main.axes.last().unwrap();
        assert_eq!(p.axes[last.axis].name, "I_k", "{f}");
        assert_eq!(last.kind, IterKind::Spatial, "{f}");
        // The A load uses the iterators directly.
        let Stmt::Store(st) = &main.body[0] else {
            panic!("{f}: no store")
        };
        let mut loads_a = Vec::new();
        st.value.visit(&mut |e| {
            if let Expr::Load { buffer, indices } = e {
                if *buffer == a {
                    loads_a.push(indices.clone());
                }
            }
        });
        assert_eq!(loads_a.len(), 1, "{f}");
        assert!(loads_a[0].iter().all(|e| matches!(e, Expr::Var(_))), "{f}");
        // Zeroing: an init block or a zero-fill iteration before.
        assert!(!main.init.is_empty() || its.len() == 2, "{f}");
    }
}

#[test]
fn spmm_csr_uses_init_and_shares_the_row_axis() {
    let p = lower(&spmm("csr"));
    assert_eq!(axis_names(&p), ["I_m", "A_J", "I_n", "I_k"]);
    assert_eq!(
        summary(&p),
        [
            r#"C [I_m:S i, A_J:R j, I_k:S k2] init["C[i,k2] = 0.0"] body["C[i,k2] = (C[i,k2] + (A[i,j] * B[j,k2]))"]"#
        ]
    );
}

#[test]
fn spmm_bsr_maps_block_coordinates() {
    let p = lower(&spmm("bsr:2x2"));
    assert_eq!(
        axis_names(&p),
        ["A_IO", "A_JO", "A_II", "A_JI", "I_n", "I_k", "I_m"]
    );
    let params: Vec<&str> = p.params.values().map(|q| q.name.as_str()).collect();
    assert_eq!(params, ["m", "n", "k", "A_IO_len", "A_JO_len", "nnz_A"]);
    assert_eq!(
        summary(&p),
        [
            r#"C_zero [I_m:S i, I_k:S k2] init[] body["C[i,k2] = 0.0"]"#,
            r#"C [A_IO:S io, A_JO:R jo, A_II:S ii, A_JI:R ji, I_k:S k2] init[] body["C[((io * 2) + ii),k2] = (C[((io * 2) + ii),k2] + (A[io,jo,ii,ji] * B[((jo * 2) + ji),k2]))"]"#,
        ]
    );
}

#[test]
fn constant_dims_give_constant_extents() {
    let p = lower(
        "tensor A: f32[8, 6] bsr:4x4\ntensor B: f32[6, 3]\ntensor C: f32[8, 3]\nC[i,k] = A[i,j] * B[j,k]\n",
    );
    let io = p.axis_by_name("A_IO").unwrap();
    let jo = p.axis_by_name("A_JO").unwrap();
    assert_eq!(p.axes[io].length, sparsile_ir::coord::Extent::Const(2));
    assert_eq!(p.axes[jo].length, sparsile_ir::coord::Extent::Const(2));
    let params: Vec<&str> = p.params.values().map(|q| q.name.as_str()).collect();
    assert_eq!(params, ["nnz_A"]);
}

#[test]
fn spmm_dia_and_csc_are_conservative_about_spatial_axes() {
    let p = lower(&spmm("dia"));
    assert_eq!(
        summary(&p)[1],
        r#"C [A_D:R d, I_m:R i, I_k:S k2] init[] body["C[i,k2] = (C[i,k2] + (A[d,i] * B[((i + d) - (m - 1)),k2]))"]"#
    );
    let p = lower(&spmm("csc"));
    // A_I has a reduction parent, so it cannot be spatial.
    assert_eq!(
        summary(&p)[1],
        r#"C [I_n:R j, A_I:R i, I_k:S k2] init[] body["C[i,k2] = (C[i,k2] + (A[j,i] * B[j,k2]))"]"#
    );
    let p = lower(&spmm("coo"));
    // COO rows repeat: not spatial.
    assert!(summary(&p)[1].starts_with("C [A_I:R i, A_J:R j, I_k:S k2]"));
}

#[test]
fn sddmm_output_is_sampled_by_the_sparse_operand() {
    let p = lower(
        "tensor A: f32[m, n] csr\ntensor X: f32[m, k]\ntensor Y: f32[k, n]\ntensor C: f32[m, n] csr\nC[i,j] = A[i,j] * X[i,k] * Y[k,j]\n",
    );
    let a = p.buffer_by_name("A").unwrap();
    let c = p.buffer_by_name("C").unwrap();
    assert_eq!(p.buffers[a].axes, p.buffers[c].axes);
    assert_eq!(
        summary(&p),
        [
            r#"C [I_m:S i, A_J:S j, I_k:R k2] init["C[i,j] = 0.0"] body["C[i,j] = (C[i,j] + ((A[i,j] * X[i,k2]) * Y[k2,j]))"]"#
        ]
    );
}

#[test]
fn sddmm_without_reduction_assigns_directly() {
    let p = lower(
        "tensor A: f32[m, n] bsr:2x2\ntensor X: f32[m, n]\ntensor C: f32[m, n] bsr:2x2\nC[i,j] = A[i,j] * exp(X[i,j])\n",
    );
    assert_eq!(
        summary(&p),
        [
            r#"C [A_IO:S io, A_JO:S jo, A_II:S ii, A_JI:S ji] init[] body["C[io,jo,ii,ji] = (A[io,jo,ii,ji] * exp(X[((io * 2) + ii),((jo * 2) + ji)]))"]"#
        ]
    );
}

#[test]
fn mttkrp_on_csf() {
    let p = lower(
        "tensor B: f32[m, n, o] csf\ntensor C: f32[n, r]\ntensor D: f32[o, r]\ntensor A: f32[m, r]\nA[i,j] = B[i,k,l] * C[k,j] * D[l,j]\n",
    );
    let params: Vec<&str> = p.params.values().map(|q| q.name.as_str()).collect();
    assert_eq!(params, ["m", "n", "o", "r", "nnz_B_J", "nnz_B_K"]);
    assert_eq!(
        summary(&p),
        [
            r#"A [I_m:S i, B_J:R k, B_K:R l, I_r:S j] init["A[i,j] = 0.0"] body["A[i,j] = (A[i,j] + ((B[i,k,l] * C[k,j]) * D[l,j]))"]"#
        ]
    );
}

#[test]
fn ttv_on_csf() {
    let p = lower(
        "tensor B: f32[m, n, o] csf\ntensor c: f32[o]\ntensor Y: f32[m, n]\nY[i,j] = B[i,j,k] * c[k]\n",
    );
    assert_eq!(
        summary(&p),
        [
            r#"Y_zero [I_m:S i, I_n:S j] init[] body["Y[i,j] = 0.0"]"#,
            r#"Y [I_m:S i, B_J:S j, B_K:R k] init[] body["Y[i,j] = (Y[i,j] + (B[i,j,k] * c[k]))"]"#,
        ]
    );
}

#[test]
fn rgms_and_sparse_convolution() {
    let rgms = "tensor A: f32[r, m, n] csf\ntensor X: f32[n, k]\ntensor W: f32[r, k, l]\ntensor Y: f32[m, l]\nY[i,l] = A[r,i,j] * X[j,k] * W[r,k,l]\n";
    let p = lower(rgms);
    assert_eq!(
        summary(&p),
        [
            r#"Y_zero [I_m:S i, I_l:S l2] init[] body["Y[i,l2] = 0.0"]"#,
            r#"Y [I_r:R r2, A_J:R i, A_K:R j, I_l:S l2, I_k:R k2] init[] body["Y[i,l2] = (Y[i,l2] + ((A[r2,i,j] * X[j,k2]) * W[r2,k2,l2]))"]"#,
        ]
    );
    // Sparse convolution: a COO kernel map (offset, output point, input point).
    let conv = "tensor M: f32[offsets, outs, ins] coo\ntensor X: f32[ins, cin]\ntensor W: f32[offsets, cin, cout]\ntensor Y: f32[outs, cout]\nY[o,c] = M[r,o,p] * X[p,d] * W[r,d,c]\n";
    let p = lower(conv);
    assert_eq!(
        summary(&p)[1],
        r#"Y [M_I:R r, M_J:R o, M_K:R p, I_cout:S c, I_cin:R d] init[] body["Y[o,c] = (Y[o,c] + ((M[r,o,p] * X[p,d]) * W[r,d,c]))"]"#
    );
    // The gather form: a neighbour map `nbr[o, r]` (an integer tensor) indexes the input.
    let gather = "tensor X: f32[ins, cin]\ntensor nbr: i32[outs, offsets]\ntensor W: f32[offsets, cin, cout]\ntensor Y: f32[outs, cout]\nY[o,c] = X[nbr[o,r], d] * W[r,d,c]\n";
    let p = lower(gather);
    assert_eq!(
        summary(&p),
        [
            r#"Y [I_outs:S o, I_cout:S c, I_cin:R d, I_offsets:R r] init["Y[o,c] = 0.0"] body["Y[o,c] = (Y[o,c] + (X[nbr[o,r],d] * W[r,d,c]))"]"#
        ]
    );
}

#[test]
fn batched_spmm_and_sddmm() {
    let p = lower(
        "tensor A: f32[m, n] csr\ntensor B: f32[b, n, k]\ntensor C: f32[b, m, k]\nC[t,i,k] = A[i,j] * B[t,j,k]\n",
    );
    // The spatial axes are the output's in another order: init still covers them.
    assert_eq!(
        summary(&p),
        [
            r#"C [I_m:S i, A_J:R j, I_b:S t, I_k:S k2] init["C[t,i,k2] = 0.0"] body["C[t,i,k2] = (C[t,i,k2] + (A[i,j] * B[t,j,k2]))"]"#
        ]
    );
    let p = lower(
        "tensor A: f32[m, n] csr\ntensor X: f32[b, m, k]\ntensor Y: f32[b, k, n]\ntensor C: f32[b, m, n]\nC[t,i,j] = A[i,j] * X[t,i,k] * Y[t,k,j]\n",
    );
    assert_eq!(
        summary(&p),
        [
            r#"C_zero [I_b:S t, I_m:S i, I_n:S j] init[] body["C[t,i,j] = 0.0"]"#,
            r#"C [I_m:S i, A_J:S j, I_b:S t, I_k:R k2] init[] body["C[t,i,j] = (C[t,i,j] + ((A[i,j] * X[t,i,k2]) * Y[t,k2,j]))"]"#,
        ]
    );
}

#[test]
fn elementwise_sparse_times_dense() {
    let dense_out = lower(
        "tensor A: f32[m, n] csr\ntensor B: f32[m, n]\ntensor C: f32[m, n]\nC[i,j] = A[i,j] * B[i,j]\n",
    );
    assert_eq!(
        summary(&dense_out),
        [
            r#"C_zero [I_m:S i, I_n:S j] init[] body["C[i,j] = 0.0"]"#,
            r#"C [I_m:S i, A_J:S j] init[] body["C[i,j] = (C[i,j] + (A[i,j] * B[i,j]))"]"#,
        ]
    );
    let sparse_out = lower(
        "tensor A: f32[m, n] csr\ntensor B: f32[m, n]\ntensor C: f32[m, n] csr\nC[i,j] = A[i,j] * B[i,j]\n",
    );
    assert_eq!(
        summary(&sparse_out),
        [r#"C [I_m:S i, A_J:S j] init[] body["C[i,j] = (A[i,j] * B[i,j])"]"#]
    );
}

#[test]
fn sparse_plus_sparse_is_a_union_and_times_an_intersection() {
    for (op, want) in [("+", "Union"), ("*", "Intersect"), ("- 2 *", "Union")] {
        let p = lower(&format!(
            "tensor A: f32[m, n] csr\ntensor B: f32[m, n] csr\ntensor C: f32[m, n] csr\nC[i,j] = A[i,j] {op} B[i,j]\n"
        ));
        assert_eq!(axis_names(&p), ["I_m", "A_J", "B_J", "C_J"]);
        let cj = &p.axes[p.axis_by_name("C_J").unwrap()];
        let (a, b) = (
            p.axis_by_name("A_J").unwrap(),
            p.axis_by_name("B_J").unwrap(),
        );
        let expected = if want == "Union" {
            AxisStructure::Union(vec![a, b])
        } else {
            AxisStructure::Intersect(vec![a, b])
        };
        assert_eq!(cj.structure, expected, "{op}");
        assert_eq!(cj.kind, AxisKind::SparseVariable);
        assert_eq!(cj.parent, p.axis_by_name("I_m"));
        // One iteration per term, each over the output's own axes.
        let lines = summary(&p);
        assert_eq!(lines.len(), if want == "Union" { 2 } else { 1 }, "{op}");
        for l in &lines {
            assert!(l.contains(" [I_m:S i, C_J:S j] "), "{l}");
        }
    }
}

#[test]
fn sums_split_into_one_iteration_per_term() {
    let p = lower(
        "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor b: f32[m]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j] - b[i]\ny[i] += relu(b[i])\n",
    );
    assert_eq!(
        summary(&p),
        [
            r#"y [I_m:S i, A_J:R j] init["y[i] = 0.0"] body["y[i] = (y[i] + (A[i,j] * x[j]))"]"#,
            r#"y_2 [I_m:S i] init[] body["y[i] = (y[i] - b[i])"]"#,
            r#"y_3 [I_m:S i] init[] body["y[i] = (y[i] + relu(b[i]))"]"#,
        ]
    );
}

#[test]
fn nonlinear_functions_of_sparse_operands_iterate_the_dense_space() {
    let p = lower("tensor A: f32[m, n] csr\ntensor C: f32[m, n]\nC[i,j] = exp(A[i,j])\n");
    assert_eq!(
        summary(&p),
        [r#"C [I_m:S i, I_n:S j] init[] body["C[i,j] = exp(A[i,j])"]"#]
    );
}

#[test]
fn later_statements_read_earlier_outputs() {
    let p = lower(
        "tensor A: f32[m, n] csr\ntensor X: f32[n, k]\ntensor H: f32[m, k]\ntensor Z: f32[m, k]\nH[i,k] = A[i,j] * X[j,k]\nZ[i,k] = max(H[i,k], 0)\n",
    );
    let h = p.buffer_by_name("H").unwrap();
    assert_eq!(p.buffers[h].role, sparsile_ir::coord::BufferRole::Output);
    assert_eq!(
        summary(&p)[1],
        r#"Z [I_m:S i, I_k:S k2] init[] body["Z[i,k2] = max(H[i,k2], 0.0)"]"#
    );
}

#[test]
fn square_dense_matmul_uses_distinct_axes_per_iteration() {
    let p = lower(
        "tensor A: f32[m, m]\ntensor B: f32[m, m]\ntensor C: f32[m, m]\nC[i,j] = A[i,k] * B[k,j]\n",
    );
    assert_eq!(axis_names(&p), ["I_m", "I_m_2", "I_m_3"]);
    assert_eq!(
        summary(&p),
        [
            r#"C [I_m:S i, I_m_2:S j, I_m_3:R k] init["C[i,j] = 0.0"] body["C[i,j] = (C[i,j] + (A[i,k] * B[k,j]))"]"#
        ]
    );
}

#[test]
fn integer_outputs_use_integer_constants() {
    let p = lower("tensor a: i32[n]\ntensor b: i32[n]\nb[i] = a[i] * 2 + 1\n");
    assert_eq!(
        summary(&p),
        [
            r#"b [I_n:S i] init["b[i] = 0"] body["b[i] = (b[i] + (a[i] * 2))"]"#,
            r#"b_2 [I_n:S i] init[] body["b[i] = (b[i] + 1)"]"#,
        ]
    );
}
