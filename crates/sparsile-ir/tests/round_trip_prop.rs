//! Random well-formed programs verify, and print -> parse -> print is the identity
//! (and parse(print(p)) == p).
//!
//! Programs are generated from a stream of proptest-chosen numbers, so shrinking the
//! stream simplifies the program.

use proptest::prelude::*;

use sparsile_ir::coord::builder::{float, int};
use sparsile_ir::coord::{
    verify, AxisDecl, AxisStructure, BinaryOp, BodyBuilder, BufferRole, Expr, Extent, IterKind,
    Program, ProgramBuilder, UnaryOp,
};
use sparsile_ir::{AxisId, AxisKind, BufferId, DType, IndexType, ParamId};

/// A cursor over the chosen numbers (zeros once they run out).
struct Choices<'a> {
    values: &'a [u64],
    next: usize,
    iterations: usize,
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

/// What the generator needs to know about the declarations.
struct Decls {
    params: Vec<ParamId>,
    axes: Vec<AxisDecl>,
    buffers: Vec<(BufferId, DType, usize, BufferRole)>,
}

const AXIS_NAMES: &[&str] = &["I", "J", "K", "R", "S", "JA", "JB", "IO", "II", "L"];
const PARAM_NAMES: &[&str] = &["m", "n", "nnz", "i", "nnz_A", "feat"];

fn extent(ch: &mut Choices, params: &[ParamId]) -> Extent {
    if ch.coin() {
        Extent::Param(params[ch.below(params.len())])
    } else {
        Extent::Const(ch.below(100) as i64)
    }
}

fn declare(ch: &mut Choices, b: &mut ProgramBuilder) -> Decls {
    let params: Vec<ParamId> = PARAM_NAMES[..1 + ch.below(PARAM_NAMES.len())]
        .iter()
        .map(|n| b.param(n))
        .collect();
    let mut axes: Vec<AxisDecl> = Vec::new();
    let count = 1 + ch.below(AXIS_NAMES.len());
    for (k, &name) in AXIS_NAMES.iter().enumerate().take(count) {
        let length = extent(ch, &params);
        let mut d = AxisDecl::dense_fixed(name, length);
        let choice = if k == 0 { 0 } else { ch.below(5) };
        match choice {
            1 | 2 => {
                d.kind = if choice == 1 {
                    AxisKind::DenseVariable
                } else {
                    AxisKind::SparseVariable
                };
                d.parent = Some(AxisId(ch.below(k) as u32));
                d.nnz = Some(extent(ch, &params));
            }
            3 => {
                d.kind = AxisKind::SparseFixed;
                d.parent = if ch.coin() {
                    Some(AxisId(ch.below(k) as u32))
                } else {
                    None
                };
                d.nnz_per_parent = Some(extent(ch, &params));
            }
            4 => {
                // A union or intersection of earlier sparse axes like one of them.
                let sparse: Vec<usize> = (0..k).filter(|&a| axes[a].kind.is_sparse()).collect();
                if let Some(&model) = sparse.get(ch.below(sparse.len().max(1))) {
                    let m = &axes[model];
                    d.kind = m.kind;
                    d.parent = m.parent;
                    d.length = m.length;
                    d.nnz = m.nnz.map(|_| extent(ch, &params));
                    d.nnz_per_parent = m.nnz_per_parent;
                    let operands: Vec<AxisId> = sparse
                        .iter()
                        .filter(|&&a| axes[a].parent == m.parent && axes[a].length == m.length)
                        .filter(|&&a| a == model || ch.coin())
                        .map(|&a| AxisId(a as u32))
                        .collect();
                    d.structure = if ch.coin() {
                        AxisStructure::Union(operands)
                    } else {
                        AxisStructure::Intersect(operands)
                    };
                }
            }
            _ => {}
        }
        if d.kind != AxisKind::DenseFixed || ch.below(4) == 0 {
            d.index_type = if ch.coin() {
                IndexType::I64
            } else {
                IndexType::I32
            };
        }
        if d.kind.is_sparse() && ch.below(4) == 0 {
            d.unique = false;
        }
        d.padded = d.kind.is_sparse() && ch.coin();
        b.axis(d.clone());
        axes.push(d);
    }
    let mut buffers = Vec::new();
    for k in 0..1 + ch.below(5) {
        let buffer_axes = if ch.below(5) == 0 {
            Vec::new()
        } else {
            b.program().ancestors(AxisId(ch.below(axes.len()) as u32))
        };
        let dtype = DType::ALL[ch.below(DType::ALL.len())];
        let role = [BufferRole::Input, BufferRole::Output, BufferRole::Temp][ch.below(3)];
        let id = b.buffer(&format!("B{k}"), dtype, &buffer_axes, role);
        buffers.push((id, dtype, buffer_axes.len(), role));
    }
    Decls {
        params,
        axes,
        buffers,
    }
}

/// A random expression of the given kind over the variables in scope.
fn expr(ch: &mut Choices, d: &Decls, vars: &[Expr], want_int: bool, depth: usize) -> Expr {
    let loads: Vec<_> = d
        .buffers
        .iter()
        .filter(|b| b.1.is_int() == want_int)
        .collect();
    let pick = if depth == 0 { ch.below(3) } else { ch.below(6) };
    match pick {
        0 if want_int => int(ch.next() as i64 >> ch.below(64)),
        0 if ch.below(4) == 0 => {
            let special = [f64::INFINITY, f64::NEG_INFINITY, -0.0, 5e-324, 1e300, -1.5];
            float(special[ch.below(special.len())])
        }
        0 => {
            let x = f64::from_bits(ch.next());
            float(if x.is_nan() { 0.25 } else { x })
        }
        1 if want_int && !vars.is_empty() && ch.coin() => vars[ch.below(vars.len())].clone(),
        1 if want_int => Expr::Param(d.params[ch.below(d.params.len())]),
        1 => float(ch.below(1000) as f64 / 8.0),
        2 | 3 if !loads.is_empty() && depth > 0 => {
            let (buffer, _, rank, _) = *loads[ch.below(loads.len())];
            let indices = (0..rank)
                .map(|_| expr(ch, d, vars, true, depth - 1))
                .collect();
            Expr::load(buffer, indices)
        }
        4 if !want_int && depth > 0 => {
            let op = UnaryOp::ALL[ch.below(UnaryOp::ALL.len())];
            Expr::unary(op, expr(ch, d, vars, false, depth - 1))
        }
        _ if depth > 0 => {
            let ops: &[BinaryOp] = if want_int {
                &[
                    BinaryOp::Add,
                    BinaryOp::Sub,
                    BinaryOp::Mul,
                    BinaryOp::Div,
                    BinaryOp::Rem,
                    BinaryOp::Max,
                    BinaryOp::Min,
                ]
            } else {
                &[
                    BinaryOp::Add,
                    BinaryOp::Sub,
                    BinaryOp::Mul,
                    BinaryOp::Div,
                    BinaryOp::Max,
                    BinaryOp::Min,
                ]
            };
            let op = ops[ch.below(ops.len())];
            Expr::binary(
                op,
                expr(ch, d, vars, want_int, depth - 1),
                expr(ch, d, vars, want_int, depth - 1),
            )
        }
        _ if want_int => int(1),
        _ => float(1.0),
    }
}

/// A store to a writable buffer, if there is one: `(buffer, indices, value)`.
fn store(ch: &mut Choices, d: &Decls, vars: &[Expr]) -> Option<(BufferId, Vec<Expr>, Expr)> {
    let writable: Vec<_> = d
        .buffers
        .iter()
        .filter(|b| b.3 != BufferRole::Input)
        .collect();
    if writable.is_empty() {
        return None;
    }
    let (buffer, dtype, rank, _) = *writable[ch.below(writable.len())];
    let indices = (0..rank).map(|_| expr(ch, d, vars, true, 2)).collect();
    let value = expr(ch, d, vars, dtype.is_int(), 3);
    Some((buffer, indices, value))
}

/// The axes of a new iteration: one or two ancestor chains (minus axes iterated by an
/// enclosing iteration), marked so that no spatial axis has a reduction parent.
fn iteration_axes(
    ch: &mut Choices,
    d: &Decls,
    program: &Program,
    enclosing: &[(AxisId, IterKind)],
) -> Vec<(AxisId, IterKind)> {
    let mut chosen: Vec<(AxisId, IterKind)> = Vec::new();
    for _ in 0..1 + ch.below(2) {
        let leaf = AxisId(ch.below(d.axes.len()) as u32);
        for a in program.ancestors(leaf) {
            let seen = chosen.iter().chain(enclosing).any(|(x, _)| *x == a);
            if seen {
                continue;
            }
            let parent_kind = d.axes[a.0 as usize].parent.and_then(|p| {
                chosen
                    .iter()
                    .chain(enclosing)
                    .find(|(x, _)| *x == p)
                    .map(|(_, k)| *k)
            });
            let kind = if parent_kind == Some(IterKind::Reduction) || ch.below(3) == 0 {
                IterKind::Reduction
            } else {
                IterKind::Spatial
            };
            chosen.push((a, kind));
        }
    }
    chosen
}

/// What enclosing iterations bind.
#[derive(Default)]
struct Enclosing {
    vars: Vec<Expr>,
    axes: Vec<(AxisId, IterKind)>,
    depth: usize,
}

fn iteration_body(
    ch: &mut Choices,
    d: &Decls,
    body: &mut BodyBuilder<'_>,
    axes: &[(AxisId, IterKind)],
    own: &[Expr],
    outer: &Enclosing,
) {
    let (outer_vars, enclosing, depth) = (&outer.vars, &outer.axes, outer.depth);
    let mut init_vars = outer_vars.to_vec();
    init_vars.extend(
        own.iter()
            .zip(axes)
            .filter(|(_, (_, k))| *k == IterKind::Spatial)
            .map(|(v, _)| v.clone()),
    );
    for _ in 0..ch.below(2) {
        if let Some((b, i, v)) = store(ch, d, &init_vars) {
            body.init_store(b, i, v);
        }
    }
    let mut vars = outer_vars.to_vec();
    vars.extend(own.iter().cloned());
    let mut scope = enclosing.to_vec();
    scope.extend_from_slice(axes);
    let inner_scope = Enclosing {
        vars: vars.clone(),
        axes: scope.clone(),
        depth: depth + 1,
    };
    for _ in 0..1 + ch.below(3) {
        if depth < 2 && ch.below(3) == 0 {
            let inner_axes = iteration_axes(ch, d, body.program(), &scope);
            ch.iterations += 1;
            let name = format!("it{}", ch.iterations);
            body.iteration(&name, &inner_axes, |v, inner| {
                iteration_body(ch, d, inner, &inner_axes, v, &inner_scope)
            });
        } else if let Some((b, i, v)) = store(ch, d, &vars) {
            body.store(b, i, v);
        }
    }
}

fn random_program(values: &[u64]) -> Program {
    let mut ch = Choices {
        values,
        next: 0,
        iterations: 0,
    };
    let mut b = ProgramBuilder::new("random");
    let d = declare(&mut ch, &mut b);
    for _ in 0..1 + ch.below(3) {
        if ch.below(4) == 0 {
            if let Some((buf, i, v)) = store(&mut ch, &d, &[]) {
                b.store(buf, i, v);
            }
        } else {
            let axes = iteration_axes(&mut ch, &d, b.program(), &[]);
            ch.iterations += 1;
            let name = format!("it{}", ch.iterations);
            b.iteration(&name, &axes, |v, body| {
                iteration_body(&mut ch, &d, body, &axes, v, &Enclosing::default())
            });
        }
    }
    b.finish()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn print_parse_print_is_identity(values in prop::collection::vec(any::<u64>(), 0..400)) {
        let program = random_program(&values);
        if let Err(errors) = verify(&program) {
            let list: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            prop_assert!(false, "generated program fails the verifier:\n{}\n{}", list.join("\n"), program);
        }
        let text = program.to_string();
        let parsed: Program = match text.parse() {
            Ok(p) => p,
            Err(e) => {
                prop_assert!(false, "{e}\n{text}");
                unreachable!()
            }
        };
        prop_assert_eq!(parsed.to_string(), text.clone());
        let mut stripped = parsed;
        stripped.clear_spans();
        prop_assert_eq!(stripped, program, "{}", text);
    }
}

/// The generator reaches every construct the text form has (so the property above
/// exercises them): checked over a fixed set of streams.
#[test]
fn generator_covers_the_text_form() {
    let mut state = 0x5eed_u64;
    let mut splitmix = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut all = String::new();
    for _ in 0..300 {
        let values: Vec<u64> = (0..400).map(|_| splitmix()).collect();
        let program = random_program(&values);
        assert_eq!(verify(&program), Ok(()), "{program}");
        all.push_str(&program.to_string());
    }
    for needle in [
        "dense_variable(",
        "sparse_variable(",
        "sparse_fixed(none,",
        "= union(",
        "= intersect(",
        "nonunique",
        "nopad",
        "idx=i64",
        "init {",
        "    iter ",
        ": R",
        ": S",
        "max(",
        "min(",
        " % ",
        " / ",
        "(",
        "e-",
        "inf",
        "-0.0",
        "(i1",
        "[] ",
    ] {
        assert!(
            all.contains(needle),
            "no generated program contains `{needle}`"
        );
    }
}

proptest! {
    #[test]
    fn float_literals_round_trip_bit_for_bit(bits in any::<u64>()) {
        let x = f64::from_bits(bits);
        let text = sparsile_ir::coord::display::float_literal(x);
        prop_assert!(
            text.contains(['.', 'e']) || text.ends_with("inf") || text == "nan",
            "`{}` is not a float literal",
            text
        );
        let src = format!("func f() {{\n  buffer T: f64[] temp\n  T[] = {text}\n}}\n");
        let program: Program = src.parse().expect("parses");
        prop_assert_eq!(program.to_string(), src.clone());
        let sparsile_ir::coord::Stmt::Store(store) = &program.body[0] else {
            panic!("expected a store");
        };
        let Expr::Float(y) = store.value else {
            panic!("expected a float literal, found {:?}", store.value);
        };
        if x.is_nan() {
            prop_assert!(y.is_nan());
        } else {
            prop_assert_eq!(y.to_bits(), x.to_bits());
        }
    }
}
