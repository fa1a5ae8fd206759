//! A small executor of stage-III functions, used as the compiled side of the
//! differential tests. It follows the loop-level semantics of `sparsile_ir::loops`
//! and panics on any out-of-bounds load or store (the lowering promises none).
//! Parallel loops run their iterations in reverse order, so a loop wrongly marked
//! parallel whose iterations depend on each other shows up as a difference.

use sparsile_ir::loops::{BufferKind, BufferLayout, Expr, Func, LogicOp, Stage, Stmt};

#[derive(Debug, Clone, Copy)]
pub enum Scalar {
    I(i64),
    F(f64),
}

impl Scalar {
    fn f(self) -> f64 {
        match self {
            Scalar::I(i) => i as f64,
            Scalar::F(f) => f,
        }
    }
    fn i(self, what: &str) -> i64 {
        match self {
            Scalar::I(i) => i,
            Scalar::F(f) => panic!("{what}: expected an integer, found {f}"),
        }
    }
}

pub struct Machine<'f> {
    pub func: &'f Func,
    pub params: Vec<i64>,
    /// Every buffer's elements, integers held exactly in f64.
    pub bufs: Vec<Vec<f64>>,
    vars: Vec<Option<Scalar>>,
}

impl<'f> Machine<'f> {
    pub fn new(func: &'f Func, params: Vec<i64>, bufs: Vec<Vec<f64>>) -> Machine<'f> {
        assert_eq!(func.stage, Stage::Flat);
        assert_eq!(bufs.len(), func.buffers.len());
        Machine {
            func,
            params,
            bufs,
            vars: vec![None; func.vars.len()],
        }
    }

    /// The length of every buffer, from its layout.
    pub fn buffer_len(&mut self, b: usize) -> usize {
        let BufferLayout::Flat(len) = &self.func.buffers.values().nth(b).unwrap().layout else {
            panic!("stage III has flat buffers only");
        };
        let len = len.clone();
        self.eval(&len).i("buffer length") as usize
    }

    pub fn run(&mut self) {
        let body = &self.func.body;
        self.stmts(body);
    }

    fn stmts(&mut self, stmts: &'f [Stmt]) {
        for s in stmts {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &'f Stmt) {
        match s {
            Stmt::For(f) => {
                let lo = self.eval(&f.lo).i("loop bound");
                let hi = self.eval(&f.hi).i("loop bound");
                let mut order: Vec<i64> = (lo..hi).collect();
                if f.kind.is_parallel() {
                    order.reverse();
                }
                for v in order {
                    if f.kind.is_parallel() {
                        self.poison_locals();
                    }
                    self.vars[f.var.0 as usize] = Some(Scalar::I(v));
                    self.stmts(&f.body);
                }
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
                ..
            } => {
                if self.eval(cond).i("condition") != 0 {
                    self.stmts(then_body)
                } else {
                    self.stmts(else_body)
                }
            }
            Stmt::Let { var, value, .. } | Stmt::Assign { var, value, .. } => {
                let v = self.eval(value);
                self.vars[var.0 as usize] = Some(v);
            }
            Stmt::Prefetch {
                buffer, indices, ..
            } => {
                let off = self.eval(&indices[0]).i("offset");
                let len = self.bufs[buffer.0 as usize].len();
                assert!(
                    off >= 0 && (off as usize) < len,
                    "prefetch of {}[{off}] out of bounds (length {len})",
                    self.func.buffers[*buffer].name
                );
            }
            Stmt::Store {
                buffer,
                indices,
                value,
                ..
            } => {
                assert_eq!(indices.len(), 1, "stage III stores take one offset");
                let off = self.eval(&indices[0]).i("offset");
                let v = self.eval(value);
                let b = buffer.0 as usize;
                let name = &self.func.buffers[*buffer].name;
                let len = self.bufs[b].len();
                assert!(
                    off >= 0 && (off as usize) < len,
                    "store to {name}[{off}] out of bounds (length {len})"
                );
                let v = if self.func.buffers[*buffer].dtype.is_int() {
                    v.i("integer store") as f64
                } else {
                    v.f()
                };
                self.bufs[b][off as usize] = v;
            }
            Stmt::AtomicAdd {
                buffer,
                indices,
                value,
                ..
            } => {
                assert_eq!(indices.len(), 1, "stage III atomic adds take one offset");
                let off = self.eval(&indices[0]).i("offset");
                let v = self.eval(value).f();
                let b = buffer.0 as usize;
                let len = self.bufs[b].len();
                assert!(off >= 0 && (off as usize) < len, "atomic add out of bounds");
                self.bufs[b][off as usize] += v;
            }
            Stmt::Block { body, .. } => self.stmts(body),
            Stmt::Launch { .. } | Stmt::Barrier { .. } | Stmt::WarpReduce { .. } | Stmt::Mma(_) => {
                panic!("this test evaluator runs CPU functions only")
            }
        }
    }

    /// Local buffers have undefined contents when a parallel iteration starts.
    fn poison_locals(&mut self) {
        for (id, b) in self.func.buffers.iter() {
            if b.kind == BufferKind::Local {
                self.bufs[id.0 as usize]
                    .iter_mut()
                    .for_each(|x| *x = f64::NAN);
            }
        }
    }

    fn load(&self, buffer: sparsile_ir::BufferId, off: i64) -> Scalar {
        let b = buffer.0 as usize;
        let name = &self.func.buffers[buffer].name;
        let len = self.bufs[b].len();
        assert!(
            off >= 0 && (off as usize) < len,
            "load of {name}[{off}] out of bounds (length {len})"
        );
        let v = self.bufs[b][off as usize];
        if self.func.buffers[buffer].dtype.is_int() {
            Scalar::I(v as i64)
        } else {
            Scalar::F(v)
        }
    }

    pub fn eval(&mut self, e: &Expr) -> Scalar {
        match e {
            Expr::Int(i) => Scalar::I(*i),
            Expr::Float(f) => Scalar::F(*f),
            Expr::Var(v) => self.vars[v.0 as usize].expect("variable read before it is set"),
            Expr::Param(p) => Scalar::I(self.params[p.0 as usize]),
            Expr::Load { buffer, indices } => {
                assert_eq!(indices.len(), 1, "stage III loads take one offset");
                let off = self.eval(&indices[0]).i("offset");
                self.load(*buffer, off)
            }
            Expr::Unary { op, arg } => match (op, self.eval(arg)) {
                (sparsile_ir::coord::UnaryOp::Neg, Scalar::I(i)) => Scalar::I(-i),
                (op, x) => Scalar::F(op.apply_f64(x.f())),
            },
            Expr::Binary { op, lhs, rhs } => {
                let (a, b) = (self.eval(lhs), self.eval(rhs));
                match (a, b) {
                    (Scalar::I(a), Scalar::I(b)) => Scalar::I(
                        op.apply_i64(a, b)
                            .unwrap_or_else(|| panic!("integer {a} {} {b} fails", op.symbol())),
                    ),
                    _ => Scalar::F(op.apply_f64(a.f(), b.f())),
                }
            }
            Expr::Cmp { op, lhs, rhs } => {
                let (a, b) = (self.eval(lhs), self.eval(rhs));
                let r = match (a, b) {
                    (Scalar::I(a), Scalar::I(b)) => op.apply(a, b),
                    _ => op.apply(a.f(), b.f()),
                };
                Scalar::I(r as i64)
            }
            Expr::Logic { op, lhs, rhs } => {
                let a = self.eval(lhs).i("logic") != 0;
                let r = match op {
                    LogicOp::And => a && self.eval(rhs).i("logic") != 0,
                    LogicOp::Or => a || self.eval(rhs).i("logic") != 0,
                };
                Scalar::I(r as i64)
            }
            Expr::Select {
                cond,
                then,
                otherwise,
            } => {
                if self.eval(cond).i("select") != 0 {
                    self.eval(then)
                } else {
                    self.eval(otherwise)
                }
            }
            Expr::Search {
                buffer,
                lo,
                hi,
                value,
            } => {
                let lo = self.eval(lo).i("search");
                let hi = self.eval(hi).i("search");
                let x = self.eval(value).i("search");
                // Lower bound: the first position of a run of equal values.
                let (mut a, mut b) = (lo, hi);
                while a < b {
                    let mid = a + (b - a) / 2;
                    if self.load(*buffer, mid).i("search") < x {
                        a = mid + 1;
                    } else {
                        b = mid;
                    }
                }
                if a < hi && self.load(*buffer, a).i("search") == x {
                    Scalar::I(a)
                } else {
                    Scalar::I(-1)
                }
            }
        }
    }
}
