//! Random well-formed loop-level functions verify, and print -> parse -> print is the
//! identity (and parse(print(f)) == f up to spans).
//!
//! Functions are generated from a stream of proptest-chosen numbers through
//! `FuncBuilder`, so shrinking the stream simplifies the function.

use proptest::prelude::*;

use sparsile_ir::coord::{AxisDecl, BinaryOp, BufferRole, Extent, UnaryOp};
use sparsile_ir::loops::builder::{and, float, int, or, search, select};
use sparsile_ir::loops::{
    verify, BufferKind, CmpOp, Expr, ForKind, Func, FuncBuilder, Stage, VarType,
};
use sparsile_ir::{AxisId, BufferId, DType, IndexType, ParamId, VarId};

/// A cursor over the chosen numbers (zeros once they run out).
struct Choices<'a> {
    values: &'a [u64],
    next: usize,
}

impl Choices<'_> {
    fn next(&mut self) -> u64 {
        let v = self.values.get(self.next).copied().unwrap_or(0);
        self.next += 1;
        v
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn coin(&mut self) -> bool {
        self.below(2) == 1
    }
}

struct BufInfo {
    id: BufferId,
    int: bool,
    indices: usize,
    writable: bool,
    flat_int: bool,
}

struct Gen<'a> {
    ch: Choices<'a>,
    params: Vec<ParamId>,
    buffers: Vec<BufInfo>,
    /// Variables in scope: id, whether float-valued, whether a `let` local.
    scope: Vec<(VarId, bool, bool)>,
    blocks: usize,
    statements: usize,
}

const PARAM_NAMES: &[&str] = &["m", "n", "k", "nnz"];
const VAR_NAMES: &[&str] = &["i", "j", "jp", "acc", "x", "n", "v"];
const FLOATS: &[f64] = &[
    0.0,
    1.0,
    -2.5,
    1e-7,
    3.0e20,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.1,
];

impl Gen<'_> {
    fn int_expr(&mut self, depth: usize) -> Expr {
        let choice = if depth == 0 {
            self.ch.below(3)
        } else {
            self.ch.below(10)
        };
        match choice {
            0 => {
                let v = self.ch.next() as i64 % 200 - 100;
                if self.ch.below(8) == 0 {
                    int(i64::MIN)
                } else {
                    int(v)
                }
            }
            1 => Expr::Param(self.params[self.ch.below(self.params.len())]),
            2 => {
                let ints: Vec<VarId> = self.scope.iter().filter(|v| !v.1).map(|v| v.0).collect();
                if ints.is_empty() {
                    int(self.ch.below(5) as i64)
                } else {
                    Expr::Var(ints[self.ch.below(ints.len())])
                }
            }
            3 | 4 => {
                let op = [
                    BinaryOp::Add,
                    BinaryOp::Sub,
                    BinaryOp::Mul,
                    BinaryOp::Div,
                    BinaryOp::Rem,
                    BinaryOp::Max,
                    BinaryOp::Min,
                ][self.ch.below(7)];
                Expr::binary(op, self.int_expr(depth - 1), self.int_expr(depth - 1))
            }
            5 => {
                let op = CmpOp::ALL[self.ch.below(6)];
                if self.ch.coin() {
                    Expr::cmp(op, self.int_expr(depth - 1), self.int_expr(depth - 1))
                } else {
                    Expr::cmp(op, self.float_expr(depth - 1), self.float_expr(depth - 1))
                }
            }
            6 => {
                let (a, b) = (self.int_expr(depth - 1), self.int_expr(depth - 1));
                if self.ch.coin() {
                    and(a, b)
                } else {
                    or(a, b)
                }
            }
            7 => select(
                self.int_expr(depth - 1),
                self.int_expr(depth - 1),
                self.int_expr(depth - 1),
            ),
            8 => {
                let flat: Vec<BufferId> = self
                    .buffers
                    .iter()
                    .filter(|b| b.flat_int)
                    .map(|b| b.id)
                    .collect();
                if flat.is_empty() {
                    int(-1)
                } else {
                    let buf = flat[self.ch.below(flat.len())];
                    search(
                        buf,
                        self.int_expr(depth - 1),
                        self.int_expr(depth - 1),
                        self.int_expr(depth - 1),
                    )
                }
            }
            _ => self.load(depth, true),
        }
    }

    fn float_expr(&mut self, depth: usize) -> Expr {
        let choice = if depth == 0 {
            self.ch.below(2)
        } else {
            self.ch.below(7)
        };
        match choice {
            0 => float(FLOATS[self.ch.below(FLOATS.len())]),
            1 => {
                let floats: Vec<VarId> = self.scope.iter().filter(|v| v.1).map(|v| v.0).collect();
                if floats.is_empty() {
                    float(0.5)
                } else {
                    Expr::Var(floats[self.ch.below(floats.len())])
                }
            }
            2 | 3 => {
                let op = [
                    BinaryOp::Add,
                    BinaryOp::Sub,
                    BinaryOp::Mul,
                    BinaryOp::Div,
                    BinaryOp::Max,
                    BinaryOp::Min,
                ][self.ch.below(6)];
                Expr::binary(op, self.float_expr(depth - 1), self.float_expr(depth - 1))
            }
            4 => Expr::Unary {
                op: UnaryOp::ALL[self.ch.below(UnaryOp::ALL.len())],
                arg: Box::new(self.float_expr(depth - 1)),
            },
            5 => select(
                self.int_expr(depth - 1),
                self.float_expr(depth - 1),
                self.float_expr(depth - 1),
            ),
            _ => self.load(depth, false),
        }
    }

    /// A load of a random buffer of the wanted kind (a literal when there is none).
    fn load(&mut self, depth: usize, int_kind: bool) -> Expr {
        let fitting: Vec<(BufferId, usize)> = self
            .buffers
            .iter()
            .filter(|b| b.int == int_kind)
            .map(|b| (b.id, b.indices))
            .collect();
        if fitting.is_empty() {
            return if int_kind { int(7) } else { float(7.0) };
        }
        let (id, n) = fitting[self.ch.below(fitting.len())];
        let indices = (0..n).map(|_| self.int_expr(depth - 1)).collect();
        Expr::load(id, indices)
    }

    fn name(&mut self) -> &'static str {
        VAR_NAMES[self.ch.below(VAR_NAMES.len())]
    }

    fn body(&mut self, b: &mut FuncBuilder, depth: usize, in_parallel: bool) {
        let len = self.scope.len();
        let count = if depth == 3 {
            1 + self.ch.below(4)
        } else {
            self.ch.below(4)
        };
        for _ in 0..count {
            if self.statements > 40 {
                break;
            }
            self.statements += 1;
            self.stmt(b, depth, in_parallel);
        }
        self.scope.truncate(len);
    }

    fn stmt(&mut self, b: &mut FuncBuilder, depth: usize, in_parallel: bool) {
        let choice = if depth == 0 {
            2 + self.ch.below(3)
        } else {
            self.ch.below(7)
        };
        match choice {
            0 => {
                let kinds = if in_parallel {
                    &[ForKind::Serial, ForKind::Vectorized, ForKind::Unrolled][..]
                } else {
                    &ForKind::ALL[..]
                };
                let kind = kinds[self.ch.below(kinds.len())];
                let (lo, hi) = (self.int_expr(1), self.int_expr(2));
                let name = self.name();
                b.for_loop(name, lo, hi, kind, |b, v| {
                    self.scope.push((v, false, false));
                    self.body(b, depth - 1, in_parallel || kind == ForKind::Parallel);
                    self.scope.pop();
                });
            }
            1 => {
                let cond = self.int_expr(2);
                let with_else = self.ch.coin();
                b.if_(cond, |b| self.body(b, depth - 1, in_parallel));
                if with_else {
                    b.else_(|b| self.body(b, depth - 1, in_parallel));
                }
            }
            2 => {
                let is_float = self.ch.coin();
                let (ty, value) = if is_float {
                    let d = if self.ch.coin() {
                        DType::F32
                    } else {
                        DType::F64
                    };
                    (VarType::Value(d), self.float_expr(2))
                } else {
                    (VarType::Index, self.int_expr(2))
                };
                let name = self.name();
                let v = b.let_(name, ty, value);
                self.scope.push((v, is_float, true));
            }
            3 => {
                let locals: Vec<(VarId, bool)> = self
                    .scope
                    .iter()
                    .filter(|v| v.2)
                    .map(|v| (v.0, v.1))
                    .collect();
                if let Some(&(v, is_float)) = locals.get(self.ch.below(locals.len().max(1))) {
                    let value = if is_float {
                        self.float_expr(2)
                    } else {
                        self.int_expr(2)
                    };
                    b.assign(v, value);
                }
            }
            4 => {
                let targets: Vec<(BufferId, bool, usize)> = self
                    .buffers
                    .iter()
                    .filter(|x| x.writable)
                    .map(|x| (x.id, x.int, x.indices))
                    .collect();
                let (id, is_int, n) = targets[self.ch.below(targets.len())];
                let indices = (0..n).map(|_| self.int_expr(1)).collect();
                let value = if is_int {
                    self.int_expr(2)
                } else {
                    self.float_expr(2)
                };
                b.store(id, indices, value);
            }
            _ => {
                self.blocks += 1;
                let name = if self.ch.coin() {
                    format!("b{}", self.blocks)
                } else {
                    format!("it{}.init", self.blocks)
                };
                b.block(name, |b| self.body(b, depth - 1, in_parallel));
            }
        }
    }
}

fn generate(values: &[u64]) -> Func {
    let mut ch = Choices { values, next: 0 };
    let stage = if ch.coin() { Stage::Pos } else { Stage::Flat };
    let mut b = FuncBuilder::new("f", stage);
    let params: Vec<ParamId> = PARAM_NAMES[..1 + ch.below(PARAM_NAMES.len())]
        .iter()
        .map(|n| b.param(*n))
        .collect();
    let mut g = Gen {
        ch,
        params,
        buffers: Vec::new(),
        scope: Vec::new(),
        blocks: 0,
        statements: 0,
    };
    let p0 = g.params[0];
    let mut axes: Vec<AxisId> = Vec::new();
    if stage == Stage::Pos {
        axes.push(b.axis(AxisDecl::dense_fixed("I", Extent::Param(p0))));
        if g.ch.coin() {
            let mut j = AxisDecl::dense_fixed("J", Extent::Const(g.ch.below(50) as i64));
            j.kind = sparsile_ir::AxisKind::SparseVariable;
            j.parent = Some(axes[0]);
            j.nnz = Some(Extent::Param(g.params[g.ch.below(g.params.len())]));
            j.index_type = if g.ch.coin() {
                IndexType::I32
            } else {
                IndexType::I64
            };
            axes.push(b.axis(j));
        }
    }
    // A values buffer every structure array can belong to.
    let a = if stage == Stage::Pos {
        b.axes_buffer("A", DType::F32, &axes, BufferRole::Input)
    } else {
        let len = g.int_len();
        b.flat_buffer("A", DType::F32, len, BufferRole::Input, BufferKind::Values)
    };
    g.buffers.push(BufInfo {
        id: a,
        int: false,
        indices: if stage == Stage::Pos { axes.len() } else { 1 },
        writable: false,
        flat_int: false,
    });
    let out_dtype = if g.ch.coin() { DType::F32 } else { DType::F64 };
    let len = g.int_len();
    let c = b.flat_buffer("C", out_dtype, len, BufferRole::Output, BufferKind::Values);
    g.buffers.push(BufInfo {
        id: c,
        int: false,
        indices: 1,
        writable: true,
        flat_int: false,
    });
    let extra = g.ch.below(4);
    for k in 0..extra {
        let len = g.int_len();
        let (id, int_kind, writable) = match g.ch.below(4) {
            0 => {
                let dt = if g.ch.coin() { DType::I32 } else { DType::I64 };
                let kind = if g.ch.coin() {
                    BufferKind::Indptr {
                        tensor: "A".into(),
                        axis: g.ch.below(3),
                    }
                } else {
                    BufferKind::Indices {
                        tensor: "A".into(),
                        axis: g.ch.below(3),
                    }
                };
                (
                    b.flat_buffer(format!("A_{k}_aux"), dt, len, BufferRole::Input, kind),
                    true,
                    false,
                )
            }
            1 => (
                b.flat_buffer(
                    format!("S{k}"),
                    DType::F64,
                    len,
                    BufferRole::Temp,
                    BufferKind::Scratch,
                ),
                false,
                true,
            ),
            2 => (
                b.flat_buffer(
                    format!("N{k}"),
                    DType::I64,
                    len,
                    BufferRole::Output,
                    BufferKind::Values,
                ),
                true,
                true,
            ),
            _ => (
                b.flat_buffer(
                    format!("T{k}"),
                    DType::F32,
                    len,
                    BufferRole::Temp,
                    BufferKind::Values,
                ),
                false,
                true,
            ),
        };
        g.buffers.push(BufInfo {
            id,
            int: int_kind,
            indices: 1,
            writable,
            flat_int: int_kind,
        });
    }
    g.body(&mut b, 3, false);
    b.finish()
}

impl Gen<'_> {
    /// A buffer length: integer arithmetic over parameters and literals.
    fn int_len(&mut self) -> Expr {
        let p = Expr::Param(self.params[self.ch.below(self.params.len())]);
        match self.ch.below(3) {
            0 => p,
            1 => Expr::binary(BinaryOp::Add, p, int(self.ch.below(3) as i64)),
            _ => {
                let q = Expr::Param(self.params[self.ch.below(self.params.len())]);
                Expr::binary(BinaryOp::Mul, p, q)
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn random_funcs_round_trip(values in proptest::collection::vec(any::<u64>(), 0..300)) {
        let f = generate(&values);
        let text = f.to_string();
        if let Err(errors) = verify(&f) {
            let listing: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            panic!("generated function fails the verifier:\n{text}\n{}", listing.join("\n"));
        }
        let mut parsed: Func = text
            .parse()
            .unwrap_or_else(|e| panic!("printed text does not parse: {e}\n{text}"));
        prop_assert_eq!(parsed.to_string(), text.clone());
        parsed.clear_spans();
        prop_assert_eq!(parsed, f);
    }
}

/// The generator reaches every statement kind and nested scopes (so the property above
/// covers them).
#[test]
fn generator_covers_the_statement_kinds() {
    let mut seen = [false; 7];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..200 {
        let values: Vec<u64> = (0..300)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            })
            .collect();
        let text = generate(&values).to_string();
        for (k, word) in [
            "for ", "if ", "} else {", "let ", "block ", "search(", "parallel",
        ]
        .iter()
        .enumerate()
        {
            seen[k] |= text.contains(word);
        }
    }
    assert_eq!(seen, [true; 7]);
}
