//! `estimated_work`: the leaf count it predicts, evaluated on concrete sizes and structure
//! arrays, equals a brute-force count of the leaves the loop nest executes (both branches
//! of every conditional counted), on seeded random structures with empty rows, a very
//! long row and sizes that do not divide the split factors; nests it cannot analyse give
//! `None`. As in the generated code, the estimate is evaluated only for a non-empty
//! loop (it may read the structure at the loop's ends).

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile_ir::coord::BinaryOp;
use sparsile_ir::loops::{estimated_work, Expr, For, Func, Stmt};
use sparsile_ir::{BufferId, ParamId, VarId};

struct Env<'a> {
    params: &'a HashMap<ParamId, i64>,
    buffers: &'a HashMap<BufferId, Vec<i64>>,
    vars: HashMap<VarId, i64>,
}

impl Env<'_> {
    fn eval(&self, e: &Expr) -> i64 {
        match e {
            Expr::Int(v) => *v,
            Expr::Param(p) => self.params[p],
            Expr::Var(v) => self.vars[v],
            Expr::Load { buffer, indices } => {
                self.buffers[buffer][usize::try_from(self.eval(&indices[0])).unwrap()]
            }
            Expr::Binary { op, lhs, rhs } => {
                let (a, b) = (self.eval(lhs), self.eval(rhs));
                match op {
                    BinaryOp::Add => a + b,
                    BinaryOp::Sub => a - b,
                    BinaryOp::Mul => a * b,
                    BinaryOp::Div => a.div_euclid(b),
                    BinaryOp::Max => a.max(b),
                    BinaryOp::Min => a.min(b),
                    BinaryOp::Rem => a.rem_euclid(b),
                }
            }
            other => panic!("not an integer expression of this test: {other:?}"),
        }
    }

    /// Leaves executed by `stmts`, both branches of conditionals counted.
    fn count(&mut self, stmts: &[Stmt]) -> i64 {
        let mut n = 0;
        for s in stmts {
            n += match s {
                Stmt::Store { .. } | Stmt::AtomicAdd { .. } | Stmt::Assign { .. } => 1,
                Stmt::Mma(m) => i64::from(m.shape.m() * m.shape.n() * m.shape.k()),
                Stmt::Let { .. }
                | Stmt::Prefetch { .. }
                | Stmt::Barrier { .. }
                | Stmt::WarpReduce { .. } => 0,
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => self.count(then_body) + self.count(else_body),
                Stmt::Block { body, .. } | Stmt::Launch { body, .. } => self.count(body),
                Stmt::For(f) => self.count_loop(f),
            };
        }
        n
    }

    fn count_loop(&mut self, f: &For) -> i64 {
        let (lo, hi) = (self.eval(&f.lo), self.eval(&f.hi));
        let mut n = 0;
        for v in lo..hi {
            self.vars.insert(f.var, v);
            n += self.count(&f.body);
        }
        self.vars.remove(&f.var);
        n
    }
}

fn first_loop(func: &Func) -> &For {
    func.body
        .iter()
        .find_map(|s| match s {
            Stmt::For(f) => Some(f),
            Stmt::Block { body, .. } => body.iter().find_map(|t| match t {
                Stmt::For(f) => Some(f),
                _ => None,
            }),
            _ => None,
        })
        .expect("a loop")
}

fn param(func: &Func, name: &str) -> ParamId {
    func.params
        .iter()
        .find(|(_, p)| p.name == name)
        .unwrap_or_else(|| panic!("no param {name}"))
        .0
}

fn buffer(func: &Func, name: &str) -> BufferId {
    func.buffers
        .iter()
        .find(|(_, b)| b.name == name)
        .unwrap_or_else(|| panic!("no buffer {name}"))
        .0
}

/// Row lengths with empty rows and, when `long`, one row far longer than the rest.
fn indptr(rng: &mut ChaCha8Rng, rows: usize, long: bool) -> Vec<i64> {
    let mut p = vec![0i64];
    for r in 0..rows {
        let len = match rng.random_range(0..4) {
            0 => 0,
            _ if long && r == rows / 2 => 500,
            _ => rng.random_range(1..9),
        };
        p.push(p[r] + len);
    }
    p
}

/// Checks the estimate against the brute-force count for the given params and indptrs.
fn check(text: &str, params: &[(&str, i64)], indptrs: &[(&str, Vec<i64>)]) {
    let func: Func = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
    let f = first_loop(&func);
    let work = estimated_work(f).unwrap_or_else(|| panic!("no estimate for\n{text}"));
    let params: HashMap<ParamId, i64> = params.iter().map(|(n, v)| (param(&func, n), *v)).collect();
    let buffers: HashMap<BufferId, Vec<i64>> = indptrs
        .iter()
        .map(|(n, v)| (buffer(&func, n), v.clone()))
        .collect();
    let mut env = Env {
        params: &params,
        buffers: &buffers,
        vars: HashMap::new(),
    };
    let expected = env.count_loop(f);
    // Like the generated code: an empty loop reads no structure and does no work.
    let estimated = if env.eval(&f.hi) <= env.eval(&f.lo) {
        0
    } else {
        env.eval(&work)
    };
    assert_eq!(estimated, expected, "{text}");
}

const SPMM_IJK: &str = "flat func spmm(m, n, k, nnz) {
  buffer C: f32[m * k] output values
  buffer A: f32[nnz] input values
  buffer B: f32[n * k] input values
  buffer P: i32[m + 1] input indptr(A, 1)
  buffer J: i32[nnz] input indices(A, 1)
  for i in 0..m parallel {
    for c in 0..k {
      C[i * k + c] = 0.0
    }
    for p in P[i]..P[i + 1] {
      let j: idx = J[p]
      for c2 in 0..k vectorized {
        C[i * k + c2] = C[i * k + c2] + A[p] * B[j * k + c2]
      }
    }
  }
}
";

const SPMM_IKJ: &str = "flat func spmm(m, n, k, nnz) {
  buffer C: f32[m * k] output values
  buffer A: f32[nnz] input values
  buffer B: f32[n * k] input values
  buffer P: i32[m + 1] input indptr(A, 1)
  buffer J: i32[nnz] input indices(A, 1)
  for i in 0..m parallel {
    for c in 0..k {
      for p in P[i]..P[i + 1] {
        let j: idx = J[p]
        C[i * k + c] = C[i * k + c] + A[p] * B[j * k + c]
      }
    }
  }
}
";

const CSF: &str = "flat func mttkrp(m, r, nj, nl) {
  buffer Y: f64[m * r] output values
  buffer V: f64[nl] input values
  buffer P1: i32[m + 1] input indptr(B, 1)
  buffer P2: i32[nj + 1] input indptr(B, 2)
  for i in 2..m parallel {
    for jp in P1[i]..P1[i + 1] {
      for lp in P2[jp]..P2[jp + 1] {
        for s in 0..r {
          Y[i * r + s] = Y[i * r + s] + V[lp]
        }
      }
    }
  }
}
";

const SPLIT: &str = "flat func f(n) {
  buffer y: f64[n] output values
  for io in 0..(n + 3) / 4 parallel {
    for ii in 0..4 {
      if io * 4 + ii < n {
        y[io * 4 + ii] = 1.0
      } else {
        let z: f64 = 0.0
      }
    }
  }
}
";

#[test]
fn estimates_equal_brute_force_counts() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for case in 0..24 {
        let rows = [0usize, 1, 5, 37][case % 4];
        let long = case % 3 == 0;
        let p = indptr(&mut rng, rows, long);
        let nnz = *p.last().unwrap();
        let m = rows as i64;
        for k in [1i64, 3, 32] {
            let ps = [("m", m), ("n", 50), ("k", k), ("nnz", nnz)];
            check(SPMM_IJK, &ps, &[("P", p.clone())]);
            check(SPMM_IKJ, &ps, &[("P", p.clone())]);
        }
        let p2 = indptr(&mut rng, nnz as usize, false);
        let ps = [("m", m), ("r", 3), ("nj", nnz), ("nl", *p2.last().unwrap())];
        check(CSF, &ps, &[("P1", p.clone()), ("P2", p2)]);
        for n in [0i64, 1, 4, 7, 30] {
            check(SPLIT, &[("n", n)], &[]);
        }
    }
}

#[test]
fn bounds_that_read_nest_variables_otherwise_give_no_estimate() {
    let text = "flat func tri(n) {
  buffer y: f64[n] output values
  for i in 0..n parallel {
    for j in 0..i {
      y[i] = y[i] + 1.0
    }
  }
}
";
    let func: Func = text.parse().unwrap();
    assert!(estimated_work(first_loop(&func)).is_none());
    // A position loop under a loop variable whose values are not one contiguous range
    // (the dense `c` repeats for every row) is not understood either.
    let text = "flat func g(m, k, nnz) {
  buffer y: f64[m] output values
  buffer P: i32[k + 1] input indptr(A, 1)
  for i in 0..m parallel {
    for c in 0..k {
      for p in P[c]..P[c + 1] {
        y[i] = y[i] + 1.0
      }
    }
  }
}
";
    let func: Func = text.parse().unwrap();
    assert!(estimated_work(first_loop(&func)).is_none());
}
