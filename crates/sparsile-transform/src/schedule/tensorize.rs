//! `tensorize`: replaces a loop nest that computes a dense tile product by a warp's `mma`
//! on tensor cores (TVM's `tensorize`; SparseTIR's and SpMMPlu's blocks as matrix
//! instructions).
//!
//! The target is the outermost of three loops — rows, columns and depth of the tile, in
//! any order, with `let`s and conditions between them — around one update
//! `C[e] = C[e] + a * b`. Which loop is which follows from the update: the depth loop is
//! the one the accumulator's element `e` does not read; of the other two, the row loop is
//! the one one factor (`a`, the left operand) reads and the column loop the one the other
//! factor (`b`) reads (each factor reads one of them, not both).
//! ```text
//! for ii in 0..16 {                          for ii_lane in 0..32 bind(threadIdx.x) {
//!   for ji in 0..16 {                          mma m16n8k16 f16 (ii, k_i, ji)
//!     for k_i in 0..8 {                 →        where io * 16 + ii < m && k_o * 8 + k_i < 20:
//!       if k_o * 8 + k_i < 20 {                  C[io * 16 + ii, k_o * 8 + k_i] +=
//!         let k: idx = k_o * 8 + k_i               select(io * 16 + ii < m, A[io, jo_p, ii, ji], 0.0)
//!         if io * 16 + ii < m {                    * select(k_o * 8 + k_i < 20, B[jo * 16 + ji, k_o * 8 + k_i], 0.0)
//!           C[io * 16 + ii, k] = C[io * 16 + ii, k] + A[io, jo_p, ii, ji] * B[jo * 16 + ji, k]
//! ```
//! - the three loops' variables become the `mma`'s tile variables (`let`s are inlined);
//!   a loop that runs a multiple of the instruction's extent (`M` = 16 rows, `N` = 8
//!   columns, `K` depth) gets a loop over its tiles, `v_t`, around the `mma` (the depth's
//!   innermost) and `v` becomes `v_t · M + v` in the expressions; a loop over
//!   `lo..lo + N` (a `sparse_fixed` axis's positions, `g_p * 8..g_p * 8 + 8`) is a tile
//!   loop from `lo`: `v` becomes `lo + v` (`lo + v_t · M + v`);
//! - each condition (split at `&&`) that reads the row loop only guards the rows: it
//!   becomes part of the `mma`'s guard and zeroes the left operand where it fails (so `a`
//!   is evaluated only where the nest evaluated it); one that reads the column loop only
//!   does the same for the columns and `b`; one that reads no tile loop encloses the
//!   `mma` in an `if`;
//! - the `mma` sits in a new loop `TARGET_lane` of 32 iterations bound to `threadIdx.x`:
//!   the lanes of the warp that runs it.
//!
//! Preconditions (each a [`ScheduleError`] naming the loop and its block):
//! - `mma.sync` has `shape` for `ty` ([`ScheduleError::TensorizeInstruction`]); the loop
//!   exists ([`ScheduleError::UnknownLoop`]) and is serial ([`ScheduleError::NotSerial`]);
//! - the nest is exactly a tile product: three serial loops, each the only statement of
//!   the body above it but for `let`s and `if`s without `else`, around one update
//!   `C[e] = C[e] + a * b` (either order of the sum), where `e` reads two of the loops
//!   ([`ScheduleError::TensorizeNest`]);
//! - each loop runs `0..N` (or `lo..lo + N`) with `N` a literal multiple of the
//!   instruction's extent for its role ([`ScheduleError::TensorizeExtent`]), and no
//!   loop's start reads a loop of the nest ([`ScheduleError::TensorizeNest`]);
//! - the accumulator is an f32 buffer in global or shared memory (not `local`); its
//!   indices give distinct elements for distinct rows and columns of a tile (each of the
//!   row and column loops appears with a constant nonzero coefficient in an index of its
//!   own, or in one index with coefficients that keep the tile's positions apart); no
//!   operand or condition reads the accumulator or a `local` buffer; the operands are
//!   values of the operand type: for f16 and bf16, loads of buffers of that type, zeros
//!   and `select`s of them (exact: nothing is rounded); for tf32, any float expression
//!   over f32, f16 and bf16 buffers (tf32 keeps 10 mantissa bits: asking for it asks for
//!   that rounding) ([`ScheduleError::TensorizeOperand`]);
//! - no condition reads the depth loop, or both the row and the column loop
//!   ([`ScheduleError::TensorizeGuard`]);
//! - the nest is in a launch, under no loop bound to `threadIdx.x`, and after the change
//!   the launch is 32 threads wide along `x` and every other store in it lies inside loops
//!   bound to every thread axis with more than one thread
//!   ([`ScheduleError::TensorizePlacement`]).
//!
//! Postcondition: the function passes the verifier; it computes what the nest did, up to
//! the rounding of the sums (the `mma` sums each tile's products in at least f32
//! precision, in any order). Text-IR examples: `tests/schedule/tensorize/`.

use std::collections::HashMap;

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::id::BufferId;
use sparsile_ir::loops::{
    is_gpu_body, launch_shape_all, BufferKind, Expr, ExprDisplay, For, ForKind, Func, GpuAxis,
    GpuDim, LogicOp, Mma, MmaShape, MmaType, Stmt,
};
use sparsile_ir::{DType, Span, VarId};

use super::bind::{locate, threads_cover_stores, PathItem};
use super::loop_ref::{fresh_index_var, parent_list_mut, var_name};
use super::parallel::find_loop;
use super::{LoopRef, ScheduleError};

const PRIMITIVE: &str = "tensorize";
const LANES: GpuAxis = GpuAxis::Thread(GpuDim::X);

/// The nest under the target: its loops (outermost first), its conditions and its update,
/// with the `let`s inlined.
struct Nest<'f> {
    loops: Vec<&'f For>,
    conds: Vec<Expr>,
    c: BufferId,
    indices: Vec<Expr>,
    /// The two factors of the update's product, in their order.
    factors: [Expr; 2],
    span: Span,
}

/// `e` with the `let`s seen so far replaced by their values.
fn inline(e: &Expr, lets: &HashMap<VarId, Expr>) -> Expr {
    e.substitute(&mut |v| lets.get(&v).cloned())
}

/// Reads the nest under `f` (see the module docs); the error is the reason it is not a
/// tile product.
fn read_nest<'f>(func: &Func, f: &'f For) -> Result<Nest<'f>, String> {
    let mut loops = vec![f];
    let mut conds = Vec::new();
    let mut lets: HashMap<VarId, Expr> = HashMap::new();
    let mut stmts: &'f [Stmt] = &f.body;
    loop {
        let mut k = 0;
        while let Some(Stmt::Let { var, value, .. }) = stmts.get(k) {
            let value = inline(value, &lets);
            lets.insert(*var, value);
            k += 1;
        }
        match &stmts[k..] {
            [Stmt::For(g)] => {
                if loops.len() == 3 {
                    return Err(format!(
                        "loop `{}` is a fourth loop (a tile product has three: rows, columns, depth)",
                        var_name(func, g.var)
                    ));
                }
                if g.kind != ForKind::Serial {
                    return Err(format!(
                        "loop `{}` is `{}` (the tile's loops are serial)",
                        var_name(func, g.var),
                        g.kind.name()
                    ));
                }
                loops.push(g);
                stmts = &g.body;
            }
            [Stmt::If {
                cond,
                then_body,
                else_body,
                ..
            }] if else_body.is_empty() => {
                conds.push(inline(cond, &lets));
                stmts = then_body;
            }
            [Stmt::Store {
                buffer,
                indices,
                value,
                span,
            }] => {
                if loops.len() != 3 {
                    return Err(format!(
                        "the update lies in {} loop{} (a tile product has three: rows, columns, depth)",
                        loops.len(),
                        if loops.len() == 1 { "" } else { "s" }
                    ));
                }
                let indices: Vec<Expr> = indices.iter().map(|e| inline(e, &lets)).collect();
                let value = inline(value, &lets);
                let not_update = || {
                    format!(
                        "the store to `{}` is not an update `C[e] = C[e] + a * b`",
                        func.buffers[*buffer].name
                    )
                };
                let Expr::Binary {
                    op: BinaryOp::Add,
                    lhs,
                    rhs,
                } = &value
                else {
                    return Err(not_update());
                };
                let is_old = |e: &Expr| {
                    matches!(e, Expr::Load { buffer: b, indices: ix } if b == buffer && *ix == indices)
                };
                let product = match (is_old(lhs), is_old(rhs)) {
                    (true, _) => rhs,
                    (false, true) => lhs,
                    _ => return Err(not_update()),
                };
                let Expr::Binary {
                    op: BinaryOp::Mul,
                    lhs: a,
                    rhs: b,
                } = &**product
                else {
                    return Err(not_update());
                };
                return Ok(Nest {
                    loops,
                    conds,
                    c: *buffer,
                    indices,
                    factors: [(**a).clone(), (**b).clone()],
                    span: *span,
                });
            }
            [] => return Err("it holds no update".to_string()),
            [other] => {
                return Err(format!(
                    "the statement at {} is not a loop, an `if` without `else`, a `let` or the update",
                    other.span()
                ))
            }
            [_, second, ..] => {
                return Err(format!(
                    "a body holds more than one statement (the second at {}); a tile product is one update under its loops",
                    second.span()
                ))
            }
        }
    }
}

/// The constant coefficient of `v` in `e` when `e` is affine in `v` (0 when `e` does not
/// read it), or `None`.
fn coefficient(e: &Expr, v: VarId) -> Option<i64> {
    if !e.reads_var(v) {
        return Some(0);
    }
    match e {
        Expr::Var(w) if *w == v => Some(1),
        Expr::Binary {
            op: BinaryOp::Add,
            lhs,
            rhs,
        } => coefficient(lhs, v)?.checked_add(coefficient(rhs, v)?),
        Expr::Binary {
            op: BinaryOp::Sub,
            lhs,
            rhs,
        } => coefficient(lhs, v)?.checked_sub(coefficient(rhs, v)?),
        Expr::Binary {
            op: BinaryOp::Mul,
            lhs,
            rhs,
        } => match (&**lhs, &**rhs) {
            (Expr::Int(c), x) | (x, Expr::Int(c)) => coefficient(x, v)?.checked_mul(*c),
            _ => None,
        },
        _ => None,
    }
}

/// Whether the accumulator's indices give distinct elements for the `m × n` positions of
/// a tile (see the module docs).
fn distinct_elements(indices: &[Expr], row: VarId, col: VarId, m: i64, n: i64) -> bool {
    let mut at = (None, None);
    for (k, e) in indices.iter().enumerate() {
        let (Some(r), Some(c)) = (coefficient(e, row), coefficient(e, col)) else {
            return false;
        };
        match (r, c) {
            (0, 0) => {}
            (r, 0) => at.0 = Some((k, r)),
            (0, c) => at.1 = Some((k, c)),
            // One index over both: the steps must keep every position apart.
            (r, c) => {
                let (r, c) = (r.abs(), c.abs());
                if r < c.saturating_mul(n) && c < r.saturating_mul(m) {
                    return false;
                }
                at = (Some((k, r)), Some((k, c)));
            }
        }
    }
    at.0.is_some() && at.1.is_some()
}

/// The number of iterations of a loop over `lo..hi` when it is a constant: `0..N`, `a..b`
/// with literals, or `lo..lo + N`.
fn span(lo: &Expr, hi: &Expr) -> Option<i64> {
    match (lo, hi) {
        (Expr::Int(a), Expr::Int(b)) => b.checked_sub(*a),
        (
            lo,
            Expr::Binary {
                op: BinaryOp::Add,
                lhs,
                rhs,
            },
        ) => match (&**lhs, &**rhs) {
            (x, Expr::Int(n)) | (Expr::Int(n), x) if x == lo => Some(*n),
            _ => None,
        },
        _ => None,
    }
}

/// The conjuncts of `e` (split at `&&`).
fn conjuncts(e: &Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::Logic {
            op: LogicOp::And,
            lhs,
            rhs,
        } => {
            conjuncts(lhs, out);
            conjuncts(rhs, out);
        }
        other => out.push(other.clone()),
    }
}

/// `a && b && …`, or `None` for no conditions.
fn all(conds: &[Expr]) -> Option<Expr> {
    conds.iter().cloned().reduce(|a, b| Expr::Logic {
        op: LogicOp::And,
        lhs: Box::new(a),
        rhs: Box::new(b),
    })
}

/// Whether `e` is exactly a value of `dtype` (f16, bf16): loads of such buffers, zeros and
/// `select`s of them.
fn exact(func: &Func, e: &Expr, dtype: DType) -> bool {
    match e {
        Expr::Load { buffer, .. } => func.buffers[*buffer].dtype == dtype,
        Expr::Float(x) => *x == 0.0,
        Expr::Select {
            then, otherwise, ..
        } => exact(func, then, dtype) && exact(func, otherwise, dtype),
        _ => false,
    }
}

/// The buffers `e` loads.
fn loads(e: &Expr) -> Vec<BufferId> {
    let mut out = Vec::new();
    e.visit(&mut |x| {
        if let Expr::Load { buffer, .. } | Expr::Search { buffer, .. } = x {
            if !out.contains(buffer) {
                out.push(*buffer);
            }
        }
    });
    out
}

/// Replaces the tile nest at `target` by a warp's `mma` (see the module docs).
pub fn tensorize(
    func: &Func,
    target: &LoopRef,
    shape: MmaShape,
    ty: MmaType,
) -> Result<Func, ScheduleError> {
    if !ty.supports(shape) {
        let shapes: Vec<&str> = ty.shapes().iter().map(|s| s.name()).collect();
        return Err(ScheduleError::TensorizeInstruction {
            shape,
            ty,
            shapes: shapes.join(" and "),
        });
    }
    let f = find_loop(func, target, PRIMITIVE)?.for_;
    if f.kind != ForKind::Serial {
        return Err(ScheduleError::NotSerial {
            primitive: PRIMITIVE,
            block: target.block.clone(),
            var: target.var.clone(),
            kind: f.kind.name(),
            span: f.span,
        });
    }
    let placement = |reason: String| ScheduleError::TensorizePlacement {
        block: target.block.clone(),
        var: target.var.clone(),
        reason,
        span: f.span,
    };
    let operand = |reason: String| ScheduleError::TensorizeOperand {
        block: target.block.clone(),
        var: target.var.clone(),
        reason,
        span: f.span,
    };
    if !is_gpu_body(&func.body) {
        return Err(placement(
            "it is not in a launch (bind the loops around it to the GPU first)".to_string(),
        ));
    }
    let (launch, path, _) = locate(func, target)?;
    if path
        .iter()
        .any(|p| matches!(p, PathItem::Loop(ForKind::Bound(a)) if *a == LANES))
    {
        return Err(placement(
            "a loop around it is bound to `threadIdx.x`, which the warp's lanes take".to_string(),
        ));
    }
    let nest = read_nest(func, f).map_err(|reason| ScheduleError::TensorizeNest {
        block: target.block.clone(),
        var: target.var.clone(),
        reason,
        span: f.span,
    })?;
    let show = |e: &Expr| ExprDisplay::new(func, e).to_string();
    let c_name = func.buffers[nest.c].name.clone();

    // Roles: the depth is the loop the accumulator's element does not read.
    let vars: Vec<VarId> = nest.loops.iter().map(|l| l.var).collect();
    let in_c: Vec<VarId> = vars
        .iter()
        .copied()
        .filter(|&v| nest.indices.iter().any(|e| e.reads_var(v)))
        .collect();
    if in_c.len() != 2 {
        return Err(ScheduleError::TensorizeNest {
            block: target.block.clone(),
            var: target.var.clone(),
            reason: format!(
                "the accumulator's element `{c_name}[{}]` reads {} of the three loops (an mma tile reads two: its rows and columns; the third is summed over)",
                nest.indices.iter().map(show).collect::<Vec<_>>().join(", "),
                in_c.len()
            ),
            span: f.span,
        });
    }
    let depth = *vars
        .iter()
        .find(|v| !in_c.contains(v))
        .expect("three loops");
    let extent = |v: VarId| {
        let l = nest
            .loops
            .iter()
            .find(|l| l.var == v)
            .expect("a loop of the nest");
        span(&l.lo, &l.hi)
    };
    // A loop that starts elsewhere than 0 (`g_p * 8..g_p * 8 + 8`, a sparse_fixed axis's
    // positions) runs from its start, which must not read the other loops of the tile.
    for l in &nest.loops {
        if l.lo != Expr::Int(0) && vars.iter().any(|&v| l.lo.reads_var(v)) {
            return Err(ScheduleError::TensorizeNest {
                block: target.block.clone(),
                var: target.var.clone(),
                reason: format!(
                    "the start `{}` of loop `{}` reads a loop of the tile (each tile loop runs over a range fixed outside the tile)",
                    show(&l.lo),
                    var_name(func, l.var)
                ),
                span: f.span,
            });
        }
    }
    let fits = |v: VarId, multiple: u32| {
        extent(v).is_some_and(|n| n >= i64::from(multiple) && n % i64::from(multiple) == 0)
    };
    let [f1, f2] = &nest.factors;
    let mut roles = Vec::new();
    for (row, col) in [(in_c[0], in_c[1]), (in_c[1], in_c[0])] {
        for (a, b) in [(f1, f2), (f2, f1)] {
            if !a.reads_var(col) && !b.reads_var(row) {
                roles.push((row, col, a.clone(), b.clone()));
            }
        }
    }
    roles.sort_by_key(|(row, col, a, b)| {
        (
            !(fits(*row, shape.m()) && fits(*col, shape.n())),
            !(a.reads_var(*row) && b.reads_var(*col)),
        )
    });
    let Some((row, col, a, b)) = roles.into_iter().next() else {
        return Err(operand(format!(
            "each factor of the update reads the row or the column loop of the tile, not both: `{}` and `{}` do not",
            show(f1),
            show(f2)
        )));
    };
    for (v, role, multiple) in [
        (row, "rows", shape.m()),
        (col, "columns", shape.n()),
        (depth, "depth", shape.k()),
    ] {
        if !fits(v, multiple) {
            let l = nest.loops.iter().find(|l| l.var == v).expect("a loop");
            return Err(ScheduleError::TensorizeExtent {
                block: target.block.clone(),
                var: target.var.clone(),
                tile_loop: var_name(func, v),
                role,
                range: format!("{}..{}", show(&l.lo), show(&l.hi)),
                shape,
                multiple,
                span: f.span,
            });
        }
    }

    // The accumulator.
    let c_buf = &func.buffers[nest.c];
    if c_buf.dtype != DType::F32 {
        return Err(operand(format!(
            "the accumulator `{c_name}` is {}; tensor cores accumulate in f32",
            c_buf.dtype
        )));
    }
    if c_buf.kind == BufferKind::Local {
        return Err(operand(format!(
            "the accumulator `{c_name}` is a local buffer (each lane would hold its own copy of the tile): accumulate in global or shared memory"
        )));
    }
    let m = i64::from(shape.m());
    let n = i64::from(shape.n());
    if !distinct_elements(&nest.indices, row, col, m, n) {
        return Err(operand(format!(
            "the accumulator's element `{c_name}[{}]` is not provably distinct for distinct rows `{}` and columns `{}` of a tile (each must be added with a constant coefficient, in an index of its own or with steps that keep the tile's positions apart)",
            nest.indices.iter().map(show).collect::<Vec<_>>().join(", "),
            var_name(func, row),
            var_name(func, col)
        )));
    }

    // The conditions: rows', columns', or the whole tile's.
    let mut parts = Vec::new();
    for c in &nest.conds {
        conjuncts(c, &mut parts);
    }
    let (mut rows_only, mut cols_only, mut whole) = (Vec::new(), Vec::new(), Vec::new());
    for c in parts {
        let guard = |reason: String| ScheduleError::TensorizeGuard {
            block: target.block.clone(),
            var: target.var.clone(),
            cond: show(&c),
            reason,
            span: f.span,
        };
        match (c.reads_var(row), c.reads_var(col), c.reads_var(depth)) {
            (_, _, true) => {
                return Err(guard(format!(
                    "reads the depth loop `{}` (an mma sums every product of its tile)",
                    var_name(func, depth)
                )))
            }
            (true, true, _) => {
                return Err(guard(format!(
                    "reads both the row loop `{}` and the column loop `{}` (the operands are loaded whole: a condition guards rows or columns)",
                    var_name(func, row),
                    var_name(func, col)
                )))
            }
            (true, false, _) => rows_only.push(c),
            (false, true, _) => cols_only.push(c),
            (false, false, _) => whole.push(c),
        }
    }

    // What the statement reads.
    let mut read: Vec<(&str, &Expr)> = vec![("the left operand", &a), ("the right operand", &b)];
    read.extend(nest.conds.iter().map(|c| ("a condition", c)));
    read.extend(
        nest.indices
            .iter()
            .map(|e| ("an index of the accumulator", e)),
    );
    for (what, e) in read {
        for buffer in loads(e) {
            if buffer == nest.c {
                return Err(operand(format!(
                    "{what} `{}` reads the accumulator `{c_name}` (an mma reads its tile before it writes it)",
                    show(e)
                )));
            }
            if func.buffers[buffer].kind == BufferKind::Local {
                return Err(operand(format!(
                    "{what} `{}` reads local buffer `{}` (each lane of the warp has its own)",
                    show(e),
                    func.buffers[buffer].name
                )));
            }
        }
    }
    for (what, e) in [("left", &a), ("right", &b)] {
        let bad = match ty {
            MmaType::F16 | MmaType::BF16 => {
                let dtype = if ty == MmaType::F16 {
                    DType::F16
                } else {
                    DType::BF16
                };
                (!exact(func, e, dtype)).then(|| {
                    format!(
                        "the {what} operand `{}` is not {ty} values (an mma on {ty} operands multiplies loads of {ty} buffers, zeros and selects of them exactly, and would round anything else; tf32 takes f32 values)",
                        show(e)
                    )
                })
            }
            MmaType::TF32 => loads(e)
                .into_iter()
                .find(|b| func.buffers[*b].dtype == DType::F64)
                .map(|b| {
                    format!(
                        "the {what} operand `{}` reads f64 buffer `{}` (tf32 keeps 10 mantissa bits)",
                        show(e),
                        func.buffers[b].name
                    )
                }),
        };
        if let Some(reason) = bad {
            return Err(operand(reason));
        }
    }

    // The new statements.
    let mut out = func.clone();
    let mut tiles: Vec<(VarId, i64)> = Vec::new();
    let mut subst: HashMap<VarId, Expr> = HashMap::new();
    for (v, size) in [(row, m), (col, n), (depth, i64::from(shape.k()))] {
        let count = extent(v).expect("checked") / size;
        let mut at = Expr::Var(v);
        if count > 1 {
            let (t, _) = fresh_index_var(&mut out, &format!("{}_t", var_name(func, v)));
            tiles.push((t, count));
            at = Expr::binary(
                BinaryOp::Add,
                Expr::binary(BinaryOp::Mul, Expr::Var(t), Expr::Int(size)),
                at,
            );
        }
        let lo = &nest.loops.iter().find(|l| l.var == v).expect("a loop").lo;
        if *lo != Expr::Int(0) {
            at = Expr::binary(BinaryOp::Add, lo.clone(), at);
        }
        if at != Expr::Var(v) {
            subst.insert(v, at);
        }
    }
    let at = |e: &Expr| e.substitute(&mut |v| subst.get(&v).cloned());
    let zeroed = |e: &Expr, conds: &[Expr]| match all(conds) {
        Some(c) => Expr::select(at(&c), at(e), Expr::Float(0.0)),
        None => at(e),
    };
    let guards: Vec<Expr> = rows_only.iter().chain(&cols_only).map(&at).collect();
    let mut body = vec![Stmt::Mma(Mma {
        shape,
        ty,
        row,
        col,
        depth,
        c: nest.c,
        c_indices: nest.indices.iter().map(&at).collect(),
        a: zeroed(&a, &rows_only),
        b: zeroed(&b, &cols_only),
        guard: all(&guards),
        span: nest.span,
    })];
    for (t, count) in tiles.into_iter().rev() {
        body = vec![Stmt::For(For {
            var: t,
            lo: Expr::Int(0),
            hi: Expr::Int(count),
            kind: ForKind::Serial,
            body,
            span: f.span,
        })];
    }
    if let Some(cond) = all(&whole) {
        body = vec![Stmt::If {
            cond,
            then_body: body,
            else_body: Vec::new(),
            span: f.span,
        }];
    }
    let (lane, lane_name) = fresh_index_var(&mut out, &format!("{}_lane", target.var));
    let lanes = Stmt::For(For {
        var: lane,
        lo: Expr::Int(0),
        hi: Expr::Int(32),
        kind: ForKind::Bound(LANES),
        body,
        span: f.span,
    });
    let (list, k) = parent_list_mut(&mut out.body, f.var).expect("the loop was found");
    list[k] = lanes;

    let Stmt::Launch {
        body: launch_body, ..
    } = &out.body[launch]
    else {
        unreachable!("located in a launch")
    };
    let (shape_of_launch, _) = launch_shape_all(launch_body);
    if shape_of_launch.block[0] != 32 {
        return Err(placement(format!(
            "its launch would be {} threads wide along `threadIdx.x` (a warp's lanes are the 32 threads along `threadIdx.x`; another loop of the launch is bound to it with more iterations)",
            shape_of_launch.block[0]
        )));
    }
    let lane_ref = LoopRef::new(target.block.clone(), lane_name);
    threads_cover_stores(&out, launch, &lane_ref, LANES, f.span, PRIMITIVE).map_err(
        |e| match e {
            ScheduleError::NotBindable { reason, .. } => placement(reason),
            other => other,
        },
    )?;
    Ok(out)
}
