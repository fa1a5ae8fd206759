//! `absorb_init`: folds the constant an init block writes into the load of a
//! [`cache_write`](super::cache_write()) local, and deletes the init block.
//!
//! Purpose: after `cache_write`, an SpMM over rows touches the output three times: the
//! init block writes zeros, each row iteration loads its row into the local array, and
//! stores it back at the end. When the row iterations together store every element of
//! the output, the zeros need never reach memory: the local array starts at the init
//! constant instead, and the output is written once.
//!
//! `block` names the top-level block holding the cached loop; its *init block* is the
//! nearest earlier top-level statement that writes `buffer`.
//!
//! Preconditions (each violation is its own [`ScheduleError`]):
//! - `buffer` and `block` exist ([`ScheduleError::UnknownBuffer`],
//!   [`ScheduleError::UnknownBlock`]), and `block` is a top-level block
//!   ([`ScheduleError::AbsorbTargetShape`]); an earlier top-level block writes `buffer`
//!   ([`ScheduleError::AbsorbNoInit`]);
//! - the init block writes only `buffer`, and only a constant
//!   ([`ScheduleError::AbsorbInitNotConstant`]), from one loop nest that visits every
//!   element once: each index is the variable of its own loop, with no condition around
//!   the store, that runs over the whole range of its position: `0..length` for a
//!   parentless `dense_fixed` axis, the positions `indptr[p]..indptr[p + 1]` (the axis's
//!   own `indptr`) under the previous position's index `p` for a `sparse_variable` axis
//!   whose parent is the axis before it (SDDMM's sparse output); no other axis kind
//!   ([`ScheduleError::AbsorbInitNotFull`]);
//! - no top-level statement between the two blocks reads or writes `buffer`
//!   ([`ScheduleError::AbsorbInterleaved`]);
//! - `block` is one loop nest, each loop the only statement of the one around it
//!   besides `let`s and prefetches (those of a gather ahead: BSR SDDMM's loop over a
//!   block row's blocks prefetches rows of the dense operand before its loops over the
//!   block), down to the loop whose body opens (after its `let`s) with a loop nest
//!   copying `buffer` into a local array and ends with one copying the local back — the
//!   shape `cache_write` builds, recognised structurally
//!   ([`ScheduleError::AbsorbTargetShape`]);
//! - the stores back cover every element, in exactly one iteration of the enclosing
//!   loops: each enclosing loop runs over the whole range of its own index position of
//!   `buffer` (as for the init block), every other position is a dense one and the
//!   variable of its own copy loop whose range holds `0..length` (a constant length, or
//!   the length itself as the bound), and the copy back is guarded at most by
//!   `v < length` / `v >= 0` ([`ScheduleError::AbsorbRegionNotFull`]);
//! - inside `block`, `buffer` is accessed only by the load and the store of those copy
//!   loops (not by the `let`s and prefetches beside the chain either), and the load
//!   reads the iteration's own elements ([`ScheduleError::AbsorbOtherAccess`]).
//!
//! Then every element of `buffer` holds the init constant until the iteration that owns
//! it loads it, so the load can be replaced by the constant; and every element is
//! stored by that iteration, so the init block's writes are all overwritten.
//!
//! Postcondition: the init block is gone; the load becomes a store of the constant into
//! the local (a guard whose branches become equal is dropped).
//!
//! Example (`tests/schedule/absorb_init/spmm_csr.before` → `.after`, after
//! `cache_write` over the rows of `C`):
//! ```text
//! block C.init {                              block C {
//!   for i in 0..m {                             for i_2 in 0..m {
//!     for k in 0..16 { C[i, k] = 0.0 }            for C_in1 in 0..16 { C_local[C_in1] = 0.0 }
//! } }                                    →        for j_p in ... { ... C_local[k_2] = ... }
//! block C {                                       for C_out1 in 0..16 { C[i_2, C_out1] = C_local[C_out1] }
//!   for i_2 in 0..m {                           }
//!     for C_in1 in 0..16 { C_local[C_in1] = C[i_2, C_in1] }
//!     for j_p in ... { ... C_local[k_2] = ... }
//!     for C_out1 in 0..16 { C[i_2, C_out1] = C_local[C_out1] }
//! ```
//!
//! ```
//! use sparsile_transform::schedule::{LoopRef, Schedule};
//! let program = sparsile::compile_notation(
//!     "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n",
//! )
//! .unwrap();
//! let mut sch = Schedule::new(&program);
//! sch.cache_write(&LoopRef::new("y", "i_2"), "y").unwrap();
//! sch.absorb_init("y", "y").unwrap();
//! let text = sch.func().unwrap().to_string();
//! assert!(!text.contains("block y.init"), "{text}");
//! assert!(text.contains("y_local[0] = 0.0"), "{text}");
//! ```

use std::collections::HashMap;

use sparsile_ir::coord::BinaryOp;
use sparsile_ir::id::{BufferId, VarId};
use sparsile_ir::loops::{
    BufferKind, BufferLayout, CmpOp, Expr, ExprDisplay, For, Func, LogicOp, Stmt,
};
use sparsile_ir::{AxisKind, Span};

use super::cache_write::accesses;
use super::ScheduleError;
use crate::index_expr::npos;

const PRIMITIVE: &str = "absorb_init";

/// Replaces the load of `buffer`'s cache_write local in `block` by the constant of the
/// init block before it, and deletes that init block (see the module docs).
pub fn absorb_init(func: &Func, block: &str, buffer: &str) -> Result<Func, ScheduleError> {
    let buf = func
        .buffer_by_name(buffer)
        .ok_or_else(|| ScheduleError::UnknownBuffer {
            primitive: PRIMITIVE,
            buffer: buffer.to_string(),
        })?;
    let target = func
        .body
        .iter()
        .position(|s| matches!(s, Stmt::Block { name, .. } if name == block))
        .ok_or_else(|| match nested_block(&func.body, block) {
            Some(span) => ScheduleError::AbsorbTargetShape {
                block: block.to_string(),
                buffer: buffer.to_string(),
                reason: "it is not a top-level block".to_string(),
                span,
            },
            None => ScheduleError::UnknownBlock {
                primitive: PRIMITIVE,
                block: block.to_string(),
            },
        })?;
    let init = func.body[..target]
        .iter()
        .rposition(|s| writes(s, buf))
        .ok_or_else(|| ScheduleError::AbsorbNoInit {
            block: block.to_string(),
            buffer: buffer.to_string(),
        })?;
    let ctx = Ctx { func, buf, buffer };
    let value = ctx.check_init(&func.body[init], init)?;
    for (k, s) in func.body.iter().enumerate().take(target).skip(init + 1) {
        if !accesses(std::slice::from_ref(s), buf).is_empty() {
            return Err(ScheduleError::AbsorbInterleaved {
                init: statement_name(&func.body[init], init),
                block: block.to_string(),
                between: statement_name(s, k),
                buffer: buffer.to_string(),
            });
        }
    }
    let Stmt::Block { body, span, .. } = &func.body[target] else {
        unreachable!("found as a block")
    };
    let cached = ctx.check_target(block, body, *span)?;
    let mut out = func.clone();
    let Stmt::Block { body, .. } = &mut out.body[target] else {
        unreachable!("found as a block")
    };
    let mut stmts = body;
    for _ in 1..cached.depth {
        let k = the_loop(stmts).expect("checked: a chain of single loops");
        let Stmt::For(f) = &mut stmts[k] else {
            unreachable!("checked: a chain of single loops")
        };
        stmts = &mut f.body;
    }
    let k = the_loop(stmts).expect("checked: a chain of single loops");
    let Stmt::For(f) = &mut stmts[k] else {
        unreachable!("checked: a chain of single loops")
    };
    f.body[cached.load_at] = replace_load(&f.body[cached.load_at], buf, value);
    out.body.remove(init);
    Ok(out)
}

/// The position of the one loop of `stmts` when every other statement is a `let` or a
/// prefetch (possibly under conditions): a link of the chain down to the cached loop.
/// Prefetches change no value, and `let`s only name values, so neither touches what the
/// chain covers.
fn the_loop(stmts: &[Stmt]) -> Option<usize> {
    fn hint(s: &Stmt) -> bool {
        match s {
            Stmt::Prefetch { .. } => true,
            Stmt::If {
                then_body,
                else_body,
                ..
            } => then_body.iter().chain(else_body).all(hint),
            _ => false,
        }
    }
    let mut found = None;
    for (k, s) in stmts.iter().enumerate() {
        match s {
            Stmt::For(_) if found.is_none() => found = Some(k),
            Stmt::Let { .. } => {}
            s if hint(s) => {}
            _ => return None,
        }
    }
    found
}

/// The span of block `name` nested anywhere in `stmts`.
fn nested_block(stmts: &[Stmt], name: &str) -> Option<Span> {
    let mut found = None;
    Stmt::visit_all(stmts, &mut |s| {
        if let Stmt::Block { name: n, span, .. } = s {
            if n == name && found.is_none() {
                found = Some(*span);
            }
        }
    });
    found
}

/// Whether `s` stores to `buf` anywhere.
fn writes(s: &Stmt, buf: BufferId) -> bool {
    let mut found = false;
    Stmt::visit_all(std::slice::from_ref(s), &mut |x| {
        found |= matches!(x, Stmt::Store { buffer, .. } | Stmt::AtomicAdd { buffer, .. } if *buffer == buf)
            || matches!(x, Stmt::Mma(m) if m.c == buf)
    });
    found
}

/// A block's name, or `top-level statement k` for anything else.
fn statement_name(s: &Stmt, k: usize) -> String {
    match s {
        Stmt::Block { name, .. } => name.clone(),
        _ => format!("top-level statement {k}"),
    }
}

/// Where the load of the local sits in the target block.
struct Cached {
    /// How many loops enclose the load (the last is the cached loop).
    depth: usize,
    /// The index of the load nest in the cached loop's body.
    load_at: usize,
}

/// A copy nest as `cache_write` builds it: loops, each the only statement of the one
/// around it, then a store, possibly under a guard with one store in each branch.
struct Nest<'a> {
    loops: Vec<&'a For>,
    guard: Option<&'a Expr>,
    leaf: &'a Stmt,
    other: Option<&'a Stmt>,
}

impl<'a> Nest<'a> {
    fn parse(s: &'a Stmt) -> Option<Nest<'a>> {
        let mut loops = Vec::new();
        let mut s = s;
        while let Stmt::For(f) = s {
            let [inner] = f.body.as_slice() else {
                return None;
            };
            loops.push(f);
            s = inner;
        }
        match s {
            Stmt::Store { .. } => Some(Nest {
                loops,
                guard: None,
                leaf: s,
                other: None,
            }),
            Stmt::If {
                cond,
                then_body,
                else_body,
                ..
            } => {
                let [leaf @ Stmt::Store { .. }] = then_body.as_slice() else {
                    return None;
                };
                let other = match else_body.as_slice() {
                    [] => None,
                    [o @ Stmt::Store { .. }] => Some(o),
                    _ => return None,
                };
                Some(Nest {
                    loops,
                    guard: Some(cond),
                    leaf,
                    other,
                })
            }
            _ => None,
        }
    }

    fn loop_of(&self, v: VarId) -> Option<&'a For> {
        self.loops.iter().copied().find(|f| f.var == v)
    }
}

/// A local buffer of `func`.
fn is_local(func: &Func, b: BufferId) -> bool {
    func.buffers[b].kind == BufferKind::Local
}

/// `local[o] = buf[ix]` of a load nest: the local and the indices of `buf`.
fn load_leaf(func: &Func, nest: &Nest, buf: BufferId) -> Option<(BufferId, Vec<Expr>)> {
    let Stmt::Store {
        buffer: local,
        indices,
        value: Expr::Load {
            buffer: b,
            indices: ix,
        },
        ..
    } = nest.leaf
    else {
        return None;
    };
    if *b != buf || !is_local(func, *local) {
        return None;
    }
    if let Some(other) = nest.other {
        let ok = matches!(other, Stmt::Store { buffer, indices: oi, value: Expr::Float(_) | Expr::Int(_), .. }
            if buffer == local && oi == indices);
        if !ok {
            return None;
        }
    }
    Some((*local, ix.clone()))
}

/// `buf[ix] = local[o]` of a store nest: the local and the indices of `buf`.
fn store_leaf(func: &Func, nest: &Nest, buf: BufferId) -> Option<(BufferId, Vec<Expr>)> {
    let Stmt::Store {
        buffer: b,
        indices: ix,
        value: Expr::Load { buffer: local, .. },
        ..
    } = nest.leaf
    else {
        return None;
    };
    (*b == buf && is_local(func, *local) && nest.other.is_none()).then(|| (*local, ix.clone()))
}

/// The load nest with the load of `buf` replaced by `value`; a guard whose branches
/// become equal is dropped.
fn replace_load(s: &Stmt, buf: BufferId, value: f64) -> Stmt {
    match s {
        Stmt::For(f) => Stmt::For(For {
            body: f.body.iter().map(|x| replace_load(x, buf, value)).collect(),
            ..f.clone()
        }),
        Stmt::If {
            cond,
            then_body,
            else_body,
            span,
        } => {
            let then_body: Vec<Stmt> = then_body
                .iter()
                .map(|x| replace_load(x, buf, value))
                .collect();
            let else_body: Vec<Stmt> = else_body
                .iter()
                .map(|x| replace_load(x, buf, value))
                .collect();
            if let ([t], [e]) = (then_body.as_slice(), else_body.as_slice()) {
                if same_store(t, e) {
                    return t.clone();
                }
            }
            Stmt::If {
                cond: cond.clone(),
                then_body,
                else_body,
                span: *span,
            }
        }
        Stmt::Store {
            buffer,
            indices,
            value: Expr::Load { buffer: b, .. },
            span,
        } if *b == buf => Stmt::Store {
            buffer: *buffer,
            indices: indices.clone(),
            value: Expr::Float(value),
            span: *span,
        },
        other => other.clone(),
    }
}

/// Whether two stores write the same constant to the same element.
fn same_store(a: &Stmt, b: &Stmt) -> bool {
    let value = |e: &Expr| match e {
        Expr::Float(x) => Some(*x),
        Expr::Int(x) => Some(*x as f64),
        _ => None,
    };
    match (a, b) {
        (
            Stmt::Store {
                buffer: ba,
                indices: ia,
                value: va,
                ..
            },
            Stmt::Store {
                buffer: bb,
                indices: ib,
                value: vb,
                ..
            },
        ) => ba == bb && ia == ib && value(va).is_some() && value(va) == value(vb),
        _ => false,
    }
}

/// What an index position of the buffer ranges over (see `Ctx::axis_ranges`).
enum AxisRange {
    /// `0..length`.
    Dense(Expr),
    /// `indptr[p]..indptr[p + 1]`, `p` the index at position `parent`.
    Positions { indptr: BufferId, parent: usize },
}

/// The function and buffer being checked.
struct Ctx<'a> {
    func: &'a Func,
    buf: BufferId,
    buffer: &'a str,
}

impl Ctx<'_> {
    fn text(&self, e: &Expr) -> String {
        ExprDisplay::new(self.func, e).to_string()
    }

    fn access_text(&self, ix: &[Expr]) -> String {
        let parts: Vec<String> = ix.iter().map(|e| self.text(e)).collect();
        format!("{}[{}]", self.buffer, parts.join(", "))
    }

    /// What each index position of the buffer ranges over: a parentless `dense_fixed`
    /// axis its length, a `sparse_variable` axis under the axis before it the positions
    /// its `indptr` gives under the parent's position.
    fn axis_ranges(&self) -> Result<Vec<AxisRange>, String> {
        let b = &self.func.buffers[self.buf];
        let BufferLayout::Axes(axes) = &b.layout else {
            return Err(format!("`{}` is not laid out over axes", self.buffer));
        };
        axes.iter()
            .enumerate()
            .map(|(d, &a)| {
                let decl = &self.func.axes[a];
                let under_previous = d > 0 && decl.parent == Some(axes[d - 1]);
                match decl.kind {
                    AxisKind::DenseFixed if decl.parent.is_none() => {
                        Ok(AxisRange::Dense(npos(&self.func.axes, a)))
                    }
                    AxisKind::SparseVariable if under_previous => {
                        // The indptr of this axis: the one of any buffer over it.
                        let over_axis = |tensor: &str, axis: usize| {
                            self.func.buffer_by_name(tensor).is_some_and(|t| {
                                matches!(&self.func.buffers[t].layout,
                                    BufferLayout::Axes(ax) if ax.get(axis) == Some(&a))
                            })
                        };
                        let indptr = self
                            .func
                            .buffers
                            .iter()
                            .find(|(_, x)| {
                                matches!(&x.kind, BufferKind::Indptr { tensor, axis }
                                    if over_axis(tensor, *axis))
                            })
                            .map(|(id, _)| id)
                            .ok_or_else(|| {
                                format!("axis `{}` of `{}` has no indptr buffer", decl.name, self.buffer)
                            })?;
                        Ok(AxisRange::Positions { indptr, parent: d - 1 })
                    }
                    _ => Err(format!(
                        "axis `{}` of `{}` is neither a parentless dense_fixed axis nor a sparse_variable axis under the axis before it",
                        decl.name, self.buffer
                    )),
                }
            })
            .collect()
    }

    /// Whether loop `f`, indexing position `d` of the access `ix`, runs over exactly the
    /// range of that position.
    fn runs_over(&self, f: &For, range: &AxisRange, ix: &[Expr]) -> bool {
        match range {
            AxisRange::Dense(len) => f.lo == Expr::Int(0) && f.hi == *len,
            AxisRange::Positions { indptr, parent } => {
                let Some(p @ Expr::Var(_)) = ix.get(*parent) else {
                    return false;
                };
                let at = |e: Expr| Expr::load(*indptr, vec![e]);
                let next = Expr::binary(BinaryOp::Add, p.clone(), Expr::Int(1));
                f.lo == at(p.clone()) && f.hi == at(next)
            }
        }
    }

    /// The range of a position, as text for errors.
    fn range_text(&self, range: &AxisRange, ix: &[Expr]) -> String {
        match range {
            AxisRange::Dense(len) => format!("0..{}", self.text(len)),
            AxisRange::Positions { indptr, parent } => {
                let p = ix.get(*parent).map(|e| self.text(e)).unwrap_or_default();
                let name = &self.func.buffers[*indptr].name;
                format!("{name}[{p}]..{name}[{p} + 1]")
            }
        }
    }

    /// Checks the init block and returns its constant.
    /// `init` is top-level statement number `at`.
    fn check_init(&self, init: &Stmt, at: usize) -> Result<f64, ScheduleError> {
        let name = statement_name(init, at);
        let not_constant = |what: String, span: Span| ScheduleError::AbsorbInitNotConstant {
            init: name.clone(),
            buffer: self.buffer.to_string(),
            what,
            span,
        };
        let not_full = |reason: String, span: Span| ScheduleError::AbsorbInitNotFull {
            init: name.clone(),
            buffer: self.buffer.to_string(),
            reason,
            span,
        };
        let mut other = None;
        Stmt::visit_all(std::slice::from_ref(init), &mut |s| match s {
            Stmt::Store { buffer, span, .. }
            | Stmt::AtomicAdd { buffer, span, .. }
            | Stmt::Mma(sparsile_ir::loops::Mma {
                c: buffer, span, ..
            }) if *buffer != self.buf && other.is_none() => other = Some((*buffer, *span)),
            Stmt::Assign { span, .. } if other.is_none() => other = Some((self.buf, *span)),
            _ => {}
        });
        if let Some((b, span)) = other {
            let what = if b == self.buf {
                "it assigns a local".to_string()
            } else {
                format!("it also writes `{}`", self.func.buffers[b].name)
            };
            return Err(not_constant(what, span));
        }
        let body = match init {
            Stmt::Block { body, .. } => body.as_slice(),
            s => std::slice::from_ref(s),
        };
        // Walk the nest: `let`s, then one loop or the store.
        let mut loops: Vec<&For> = Vec::new();
        let mut stmts = body;
        let leaf = loop {
            let rest: Vec<&Stmt> = stmts
                .iter()
                .filter(|s| !matches!(s, Stmt::Let { .. }))
                .collect();
            let [one] = rest.as_slice() else {
                return Err(not_full(
                    "it is not one loop nest around one store".to_string(),
                    init.span(),
                ));
            };
            match one {
                Stmt::For(f) => {
                    loops.push(f);
                    stmts = &f.body;
                }
                Stmt::Store { .. } => break *one,
                s => {
                    return Err(not_full(
                        "the store is not directly inside its loops (a condition or another statement is around it)".to_string(),
                        s.span(),
                    ))
                }
            }
        };
        let Stmt::Store {
            indices,
            value,
            span,
            ..
        } = leaf
        else {
            unreachable!("the leaf is a store")
        };
        let value = match value {
            Expr::Float(x) => *x,
            Expr::Int(x) => *x as f64,
            e => {
                return Err(not_constant(
                    format!("it stores `{}`, not a constant", self.text(e)),
                    *span,
                ))
            }
        };
        let ranges = self.axis_ranges().map_err(|r| not_full(r, *span))?;
        let mut used: HashMap<VarId, usize> = HashMap::new();
        for (d, (ix, range)) in indices.iter().zip(&ranges).enumerate() {
            let f = match ix {
                Expr::Var(v) => loops.iter().find(|f| f.var == *v),
                _ => None,
            };
            let Some(f) = f else {
                return Err(not_full(
                    format!(
                        "index position {d} of `{}` is not the variable of a loop around the store",
                        self.access_text(indices)
                    ),
                    *span,
                ));
            };
            if !self.runs_over(f, range, indices) {
                return Err(not_full(
                    format!(
                        "loop `{}` runs {}..{}, not {} (the range of index position {d})",
                        self.func.vars[f.var].name,
                        self.text(&f.lo),
                        self.text(&f.hi),
                        self.range_text(range, indices)
                    ),
                    f.span,
                ));
            }
            if used.insert(f.var, d).is_some() {
                return Err(not_full(
                    format!(
                        "loop `{}` indexes two positions",
                        self.func.vars[f.var].name
                    ),
                    *span,
                ));
            }
        }
        if let Some(f) = loops.iter().find(|f| !used.contains_key(&f.var)) {
            return Err(not_full(
                format!(
                    "loop `{}` indexes no position, so the store repeats",
                    self.func.vars[f.var].name
                ),
                f.span,
            ));
        }
        Ok(value)
    }

    /// Checks the target block (see the module docs) and finds the load.
    fn check_target(
        &self,
        block: &str,
        body: &[Stmt],
        span: Span,
    ) -> Result<Cached, ScheduleError> {
        let shape = |reason: String, span: Span| ScheduleError::AbsorbTargetShape {
            block: block.to_string(),
            buffer: self.buffer.to_string(),
            reason,
            span,
        };
        let region = |var: &str, reason: String, span: Span| ScheduleError::AbsorbRegionNotFull {
            block: block.to_string(),
            var: var.to_string(),
            buffer: self.buffer.to_string(),
            reason,
            span,
        };
        let other = |access: String, reason: &str, span: Span| ScheduleError::AbsorbOtherAccess {
            block: block.to_string(),
            buffer: self.buffer.to_string(),
            access,
            reason: reason.to_string(),
            span,
        };
        // The chain of loops down to the one whose body opens with the load nest.
        let mut chain: Vec<&For> = Vec::new();
        // The `let`s and prefetches beside the chain's loops.
        let mut beside: Vec<&Stmt> = Vec::new();
        let mut stmts = body;
        let (cached, lets, load) = loop {
            let link = the_loop(stmts);
            if let Some(k) = link {
                beside.extend(
                    stmts
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| *j != k)
                        .map(|(_, s)| s),
                );
            }
            let Some(Stmt::For(f)) = link.map(|k| &stmts[k]) else {
                let at = stmts.first().map(Stmt::span).unwrap_or(span);
                return Err(shape(
                    "no loop (each the only statement of the one around it, besides `let`s and prefetches) opens its iteration by loading the buffer into a local array".to_string(),
                    at,
                ));
            };
            chain.push(f);
            let lets = f
                .body
                .iter()
                .take_while(|s| matches!(s, Stmt::Let { .. }))
                .count();
            let load = f
                .body
                .get(lets)
                .and_then(Nest::parse)
                .filter(|n| load_leaf(self.func, n, self.buf).is_some());
            if let Some(load) = load {
                break (f, lets, load);
            }
            stmts = &f.body;
        };
        let cached_name = self.func.vars[cached.var].name.clone();
        let (local, load_ix) = load_leaf(self.func, &load, self.buf).expect("checked");
        let last = cached.body.last().expect("holds the load");
        let store = (cached.body.len() > lets + 1)
            .then(|| Nest::parse(last))
            .flatten()
            .and_then(|n| store_leaf(self.func, &n, self.buf).map(|x| (n, x)));
        let Some((store, (store_local, ix))) = store else {
            return Err(shape(
                format!(
                    "the iteration of loop `{cached_name}` does not end by storing a local array back"
                ),
                last.span(),
            ));
        };
        if store_local != local {
            return Err(shape(
                format!(
                    "loop `{cached_name}` loads `{}` but stores `{}` back",
                    self.func.buffers[local].name, self.func.buffers[store_local].name
                ),
                last.span(),
            ));
        }
        let store_span = store.leaf.span();
        let ranges = self
            .axis_ranges()
            .map_err(|r| region(&cached_name, r, store_span))?;
        // Each index of the store: an enclosing loop (fixed) or a copy loop (cached, over
        // a dense position).
        let mut used: HashMap<VarId, usize> = HashMap::new();
        let mut affine_dims: Vec<usize> = Vec::new();
        for (d, (e, range)) in ix.iter().zip(&ranges).enumerate() {
            // `c * a + b`: a copy loop `c` and an enclosing loop `b` over `0..a` (the
            // position `cache_write` gives a split index), covering `0..a * hi(c)`.
            if let (Some((c, a, b)), AxisRange::Dense(len)) = (split_index(e), range) {
                let copy = store.loop_of(c);
                let enclosing = chain.iter().find(|f| f.var == b);
                if let (Some(cf), Some(bf)) = (copy, enclosing) {
                    let name = self.func.vars[cf.var].name.clone();
                    if !covers_split(cf, bf, a, len) {
                        return Err(region(
                            &name,
                            format!(
                                "with loop `{}` it runs over positions that do not hold {} (index position {d})",
                                self.func.vars[bf.var].name,
                                self.range_text(range, &ix)
                            ),
                            cf.span,
                        ));
                    }
                    for v in [c, b] {
                        if used.insert(v, d).is_some() {
                            return Err(region(
                                &self.func.vars[v].name,
                                format!("it indexes two positions of `{}`", self.access_text(&ix)),
                                store_span,
                            ));
                        }
                    }
                    affine_dims.push(d);
                    continue;
                }
            }
            let v = match e {
                Expr::Var(v) => Some(*v),
                _ => None,
            };
            let enclosing = v.and_then(|v| chain.iter().find(|f| f.var == v));
            let copy = v.and_then(|v| store.loop_of(v));
            let (f, covered) = match (enclosing, copy, range) {
                (Some(f), _, _) => (*f, self.runs_over(f, range, &ix)),
                (None, Some(f), AxisRange::Dense(len)) => (f, covers(f, len)),
                (None, Some(f), AxisRange::Positions { .. }) => (f, false),
                (None, None, _) => {
                    return Err(region(
                        &cached_name,
                        format!(
                            "index position {d} of the store `{}` is neither an enclosing loop's variable nor a copy loop's",
                            self.access_text(&ix)
                        ),
                        store_span,
                    ))
                }
            };
            let name = self.func.vars[f.var].name.clone();
            if !covered {
                return Err(region(
                    &name,
                    format!(
                        "it runs {}..{}, which does not hold {} (index position {d})",
                        self.text(&f.lo),
                        self.text(&f.hi),
                        self.range_text(range, &ix)
                    ),
                    f.span,
                ));
            }
            if used.insert(f.var, d).is_some() {
                return Err(region(
                    &name,
                    format!("it indexes two positions of `{}`", self.access_text(&ix)),
                    store_span,
                ));
            }
        }
        for f in chain.iter().copied().chain(store.loops.iter().copied()) {
            if !used.contains_key(&f.var) {
                let name = self.func.vars[f.var].name.clone();
                return Err(region(
                    &name,
                    format!(
                        "it indexes no position of the store `{}`, so elements are stored more than once",
                        self.access_text(&ix)
                    ),
                    f.span,
                ));
            }
        }
        if let Some(g) = store.guard {
            if !self.in_range_guard(g, &ix, &ranges, &affine_dims) {
                return Err(region(
                    &cached_name,
                    format!(
                        "the store back is guarded by `{}`, which may skip elements",
                        self.text(g)
                    ),
                    store_span,
                ));
            }
        }
        // The load reads the iteration's own elements.
        for &d in &affine_dims {
            // The same split position, over the load nest's own copy loop.
            let same = match (split_index(&load_ix[d]), split_index(&ix[d])) {
                (Some((lc, la, lb)), Some((sc, sa, sb))) => {
                    la == sa
                        && lb == sb
                        && load
                            .loop_of(lc)
                            .zip(store.loop_of(sc))
                            .is_some_and(|(l, s)| l.lo == s.lo && l.hi == s.hi)
                }
                _ => false,
            };
            if !same {
                return Err(other(
                    self.access_text(&load_ix),
                    "the load reads elements another iteration stores",
                    load.leaf.span(),
                ));
            }
        }
        for (d, e) in load_ix.iter().enumerate() {
            let fixed = chain.iter().any(|f| ix[d] == Expr::Var(f.var));
            if fixed && *e != ix[d] {
                return Err(other(
                    self.access_text(&load_ix),
                    "the load reads elements another iteration stores",
                    load.leaf.span(),
                ));
            }
        }
        // No other access of the buffer in the block.
        let load_stmt = &cached.body[lets];
        let n_load = accesses(std::slice::from_ref(load_stmt), self.buf).len();
        let n_store = accesses(std::slice::from_ref(last), self.buf).len();
        let mut rest: Vec<(Option<Vec<Expr>>, Span)> = Vec::new();
        for f in &chain {
            for b in [&f.lo, &f.hi] {
                let s = Stmt::Let {
                    var: f.var,
                    value: b.clone(),
                    span: f.span,
                };
                rest.extend(accesses(std::slice::from_ref(&s), self.buf));
            }
        }
        for s in &beside {
            rest.extend(accesses(std::slice::from_ref(*s), self.buf));
        }
        rest.extend(accesses(&cached.body[..lets], self.buf));
        rest.extend(accesses(
            &cached.body[lets + 1..cached.body.len() - 1],
            self.buf,
        ));
        if n_load != 1 || n_store != 1 || !rest.is_empty() {
            let (access, at) = match rest.first() {
                Some((Some(ix), at)) => (self.access_text(ix), *at),
                Some((None, at)) => (format!("search({}, ..)", self.buffer), *at),
                None => (self.access_text(&ix), store_span),
            };
            return Err(other(
                access,
                "the buffer is accessed other than by the copy in and the copy back",
                at,
            ));
        }
        Ok(Cached {
            depth: chain.len(),
            load_at: lets,
        })
    }

    /// Whether `g` is a conjunction of `v < length` and `v >= 0` for copy-loop
    /// variables `v` of the store indices, each against its own position's length.
    fn in_range_guard(
        &self,
        g: &Expr,
        ix: &[Expr],
        ranges: &[AxisRange],
        affine_dims: &[usize],
    ) -> bool {
        match g {
            Expr::Logic {
                op: LogicOp::And,
                lhs,
                rhs,
            } => {
                self.in_range_guard(lhs, ix, ranges, affine_dims)
                    && self.in_range_guard(rhs, ix, ranges, affine_dims)
            }
            Expr::Cmp { op, lhs, rhs } => {
                let Some(d) = ix.iter().enumerate().position(|(d, e)| {
                    **lhs == *e && (matches!(e, Expr::Var(_)) || affine_dims.contains(&d))
                }) else {
                    return false;
                };
                match (op, &ranges[d]) {
                    (CmpOp::Lt, AxisRange::Dense(len)) => **rhs == *len,
                    (CmpOp::Ge, AxisRange::Dense(_)) => **rhs == Expr::Int(0),
                    _ => false,
                }
            }
            _ => false,
        }
    }
}

/// `c * a + b` (either order of the sum): the two variables and the constant `a > 0`.
fn split_index(e: &Expr) -> Option<(VarId, i64, VarId)> {
    let Expr::Binary {
        op: BinaryOp::Add,
        lhs,
        rhs,
    } = e
    else {
        return None;
    };
    let scaled = |e: &Expr| match e {
        Expr::Binary {
            op: BinaryOp::Mul,
            lhs,
            rhs,
        } => match (&**lhs, &**rhs) {
            (Expr::Var(c), Expr::Int(a)) | (Expr::Int(a), Expr::Var(c)) if *a > 0 => Some((*c, *a)),
            _ => None,
        },
        _ => None,
    };
    match (&**lhs, &**rhs) {
        (m, Expr::Var(b)) | (Expr::Var(b), m) => scaled(m).map(|(c, a)| (c, a, *b)),
        _ => None,
    }
}

/// Whether `c * a + b`, with copy loop `c` and enclosing loop `b`, visits every position
/// `0..len` exactly once (guarded at most to the valid range): `b` runs `0..a` and `c`
/// from at most 0 to at least `len / a` rounded up.
fn covers_split(c: &For, b: &For, a: i64, len: &Expr) -> bool {
    let b_ok = b.lo == Expr::Int(0) && b.hi == Expr::Int(a);
    let c_ok = match (&c.lo, &c.hi, len) {
        (Expr::Int(lo), Expr::Int(hi), Expr::Int(n)) => *lo <= 0 && hi.saturating_mul(a) >= *n,
        _ => false,
    };
    b_ok && c_ok
}

/// Whether the copy loop `f` (guarded at most to the valid range) visits every position
/// `0..len`.
fn covers(f: &For, len: &Expr) -> bool {
    let lo_ok = matches!(f.lo, Expr::Int(lo) if lo <= 0);
    let hi_ok = f.hi == *len || matches!((&f.hi, len), (Expr::Int(hi), Expr::Int(n)) if hi >= n);
    lo_ok && hi_ok
}
