//! Which operator a stage-I program computes, read off its buffers.
//!
//! The search space, the cost model and the selector are per operator. A program is
//! recognised by the shapes of its buffers: one sparse input of order 2 (order 3 for
//! MTTKRP and RGMS), its dense inputs and its output. Anything else is
//! [`Operator::Other`], for which only the generic recipes are candidates; so is a
//! program with a `max`/`min` reduction ([`sums_only`]), whose result the explicit zeros
//! of another format would change.
//!
//! ```
//! use sparsile_tune::op::{classify, Operator};
//! let p: sparsile_ir::coord::Program = "func main(m, n, k, nnz_A) {
//!   axis I_m = dense_fixed(m)
//!   axis A_J = sparse_variable(I_m, n, nnz=nnz_A, idx=i32, nopad)
//!   axis I_n = dense_fixed(n)
//!   axis I_k = dense_fixed(k)
//!   buffer A: f32[I_m, A_J] input
//!   buffer B: f32[I_n, I_k] input
//!   buffer C: f32[I_m, I_k] output
//!   iter C over [I_m: S, A_J: R, I_k: S] as (i, j, k2) {
//!     init {
//!       C[i, k2] = 0.0
//!     }
//!     C[i, k2] = C[i, k2] + A[i, j] * B[j, k2]
//!   }
//! }
//! ".parse().unwrap();
//! let info = classify(&p);
//! assert_eq!(info.op, Operator::Spmm);
//! assert_eq!(info.sparse.as_deref(), Some("A"));
//! assert_eq!(info.width, Some(("B".to_string(), 1)));
//! ```

use serde::{Deserialize, Serialize};
use sparsile_ir::coord::{BinaryOp, BufferDecl, BufferRole, Expr, Program, Stmt};

/// An operator the tuner knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operator {
    /// `C[i,k] = A[i,j] * B[j,k]`.
    Spmm,
    /// `C[i,j] = A[i,j] * X[i,k] * Y[j,k]`, `C` with `A`'s pattern.
    Sddmm,
    /// `y[i] = A[i,j] * x[j]`.
    Spmv,
    /// `Y[b,i,k] = A[i,j] * X[b,j,k]`.
    SpmmBatched,
    /// `Y[b,i] = A[i,j] * X[b,j]`.
    SpmvBatched,
    /// `A[i,r] = B[i,k,l] * C[k,r] * D[l,r]`, `B` of order 3.
    Mttkrp,
    /// `Y[i,l] = A[r,i,j] * X[j,k] * W[r,k,l]`, `A` of order 3.
    Rgms,
    /// Anything else.
    Other,
}

impl Operator {
    /// Every operator, in a fixed order.
    pub const ALL: [Operator; 8] = [
        Operator::Spmm,
        Operator::Sddmm,
        Operator::Spmv,
        Operator::SpmmBatched,
        Operator::SpmvBatched,
        Operator::Mttkrp,
        Operator::Rgms,
        Operator::Other,
    ];

    /// The name used in recipes, records and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Operator::Spmm => "spmm",
            Operator::Sddmm => "sddmm",
            Operator::Spmv => "spmv",
            Operator::SpmmBatched => "spmm_batched",
            Operator::SpmvBatched => "spmv_batched",
            Operator::Mttkrp => "mttkrp",
            Operator::Rgms => "rgms",
            Operator::Other => "other",
        }
    }

    /// The operator of a name ([`Operator::name`]).
    pub fn from_name(name: &str) -> Option<Operator> {
        Operator::ALL.into_iter().find(|o| o.name() == name)
    }
}

impl std::fmt::Display for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What [`classify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpInfo {
    pub op: Operator,
    /// The sparse input whose pattern the choice depends on.
    pub sparse: Option<String>,
    /// The dense input and axis whose extent is the dense width `K` (none for SpMV).
    pub width: Option<(String, usize)>,
}

fn is_sparse(p: &Program, b: &BufferDecl) -> bool {
    b.axes.iter().any(|&a| p.axes[a].kind.is_sparse())
}

/// Whether no store of `program` is a `max`/`min` update `X[e] = max(X[e], v)` (either
/// operand order), so that every reduction in it is a sum.
pub fn sums_only(program: &Program) -> bool {
    fn walk(stmts: &[Stmt]) -> bool {
        stmts.iter().all(|s| match s {
            Stmt::Store(st) => match &st.value {
                Expr::Binary {
                    op: BinaryOp::Max | BinaryOp::Min,
                    lhs,
                    rhs,
                } => ![lhs, rhs].iter().any(|e| {
                    matches!(&***e, Expr::Load { buffer, indices }
                        if *buffer == st.buffer && *indices == st.indices)
                }),
                _ => true,
            },
            Stmt::Iteration(it) => walk(&it.init) && walk(&it.body),
        })
    }
    walk(&program.body)
}

/// The operator `program` computes (see the module docs).
pub fn classify(program: &Program) -> OpInfo {
    let bufs: Vec<&BufferDecl> = program.buffers.values().collect();
    let sparse_in: Vec<&&BufferDecl> = bufs
        .iter()
        .filter(|b| b.role == BufferRole::Input && is_sparse(program, b))
        .collect();
    let dense_in: Vec<&&BufferDecl> = bufs
        .iter()
        .filter(|b| b.role == BufferRole::Input && !is_sparse(program, b))
        .collect();
    let outputs: Vec<&&BufferDecl> = bufs
        .iter()
        .filter(|b| b.role == BufferRole::Output)
        .collect();
    let other = |sparse: Option<String>| OpInfo {
        op: Operator::Other,
        sparse,
        width: None,
    };
    let ([s], [out], true) = (sparse_in.as_slice(), outputs.as_slice(), sums_only(program)) else {
        return other(sparse_in.first().map(|b| b.name.clone()));
    };
    let name = Some(s.name.clone());
    let order = s.axes.len();
    let out_sparse = is_sparse(program, out);
    let dense_orders: Vec<usize> = dense_in.iter().map(|b| b.axes.len()).collect();
    let width = |b: &BufferDecl, axis: usize| Some((b.name.clone(), axis));
    let (op, width) = match (order, out.axes.len(), out_sparse, dense_orders.as_slice()) {
        (2, 1, false, [1]) => (Operator::Spmv, None),
        (2, 2, false, [2]) => {
            // SpMM's output rows are the sparse operand's rows; a batched SpMV's are
            // the batch.
            if out.axes[0] == s.axes[0] {
                (Operator::Spmm, width(dense_in[0], 1))
            } else {
                (Operator::SpmvBatched, None)
            }
        }
        (2, 2, true, [2, 2]) => (Operator::Sddmm, width(dense_in[0], 1)),
        (2, 3, false, [3]) => (Operator::SpmmBatched, width(dense_in[0], 2)),
        (3, 2, false, [2, 2]) => (Operator::Mttkrp, width(dense_in[0], 1)),
        (3, 2, false, [2, 3] | [3, 2]) => {
            let w = dense_in
                .iter()
                .find(|b| b.axes.len() == 3)
                .expect("one of order 3");
            (Operator::Rgms, width(w, 2))
        }
        _ => return other(name),
    };
    OpInfo {
        op,
        sparse: name,
        width,
    }
}
