//! The text form of stages II and III: `impl Display for Func`.
//!
//! The printed text is *the* loop-level text IR; [`super::parser`] reads it back and
//! `print -> parse -> print` is the identity. The grammar is documented in the parser's
//! module doc; the declarations (`axis`, float literals, names) print exactly as in the
//! stage-I text form ([`crate::coord::display`]). Printing never panics: a dangling id
//! (only possible in a function that fails the verifier) prints as its debug name, e.g.
//! `v#7`, which does not parse.
//!
//! ```
//! use sparsile_ir::loops::{Expr, ExprDisplay, Func, Stage};
//! use sparsile_ir::coord::BinaryOp;
//! let f = Func::new("empty", Stage::Flat);
//! let e = Expr::binary(BinaryOp::Mul, Expr::Int(2), Expr::binary(BinaryOp::Add, Expr::Int(1), Expr::Int(-3)));
//! assert_eq!(ExprDisplay::new(&f, &e).to_string(), "2 * (1 + -3)");
//! assert_eq!(f.to_string(), "flat func empty() {\n}\n");
//! ```

use std::fmt::{self, Display, Formatter, Write};

use super::expr::{CmpOp, Expr, LogicOp};
use super::func::{Buffer, BufferKind, BufferLayout, Func, VarType};
use super::stmt::{ForKind, Stmt};
use crate::coord::display::float_literal;
use crate::coord::BinaryOp;
use crate::id::{AxisId, BufferId, ParamId, VarId};

impl Display for Func {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let names = Names(self);
        write!(f, "{} func {}(", self.stage.name(), self.name)?;
        for (k, p) in self.params.values().enumerate() {
            if k > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&p.name)?;
        }
        f.write_str(") {\n")?;
        crate::coord::display::write_axis_decls(f, &self.params, &self.axes)?;
        for buffer in self.buffers.values() {
            write_buffer(f, names, buffer)?;
        }
        for stmt in &self.body {
            write_stmt(f, names, stmt, 1)?;
        }
        f.write_str("}\n")
    }
}

/// Displays one expression of a function in the text-IR syntax.
pub struct ExprDisplay<'a> {
    func: &'a Func,
    expr: &'a Expr,
}

impl<'a> ExprDisplay<'a> {
    pub fn new(func: &'a Func, expr: &'a Expr) -> Self {
        ExprDisplay { func, expr }
    }
}

impl Display for ExprDisplay<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write_expr(f, Names(self.func), self.expr)
    }
}

/// Displays one statement (and its nested statements) of a function, indented by
/// `depth` levels of two spaces, each line ending in a newline.
pub struct StmtDisplay<'a> {
    func: &'a Func,
    stmt: &'a Stmt,
    depth: usize,
}

impl<'a> StmtDisplay<'a> {
    pub fn new(func: &'a Func, stmt: &'a Stmt, depth: usize) -> Self {
        StmtDisplay { func, stmt, depth }
    }
}

impl Display for StmtDisplay<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write_stmt(f, Names(self.func), self.stmt, self.depth)
    }
}

/// The text of a variable type: `idx` or a float element type.
pub fn var_type_name(ty: VarType) -> &'static str {
    match ty {
        VarType::Index => "idx",
        VarType::Value(d) => d.name(),
    }
}

/// Name lookups that never panic.
#[derive(Clone, Copy)]
struct Names<'a>(&'a Func);

impl Names<'_> {
    fn axis(self, id: AxisId) -> String {
        self.0
            .axes
            .get(id)
            .map_or_else(|| id.to_string(), |a| a.name.clone())
    }
    fn buffer(self, id: BufferId) -> String {
        self.0
            .buffers
            .get(id)
            .map_or_else(|| id.to_string(), |b| b.name.clone())
    }
    fn var(self, id: VarId) -> String {
        self.0
            .vars
            .get(id)
            .map_or_else(|| id.to_string(), |v| v.name.clone())
    }
    fn param(self, id: ParamId) -> String {
        self.0
            .params
            .get(id)
            .map_or_else(|| id.to_string(), |p| p.name.clone())
    }
}

fn write_buffer(f: &mut Formatter<'_>, names: Names<'_>, b: &Buffer) -> fmt::Result {
    write!(f, "  buffer {}: {}[", b.name, b.dtype)?;
    match &b.layout {
        BufferLayout::Axes(axes) => {
            let list: Vec<String> = axes.iter().map(|&a| names.axis(a)).collect();
            f.write_str(&list.join(", "))?;
        }
        BufferLayout::Flat(len) => write_expr(f, names, len)?,
    }
    write!(f, "] {} ", b.role.name())?;
    match &b.kind {
        BufferKind::Values => f.write_str("values")?,
        BufferKind::Indptr { tensor, axis } => write!(f, "indptr({tensor}, {axis})")?,
        BufferKind::Indices { tensor, axis } => write!(f, "indices({tensor}, {axis})")?,
        BufferKind::Scratch => f.write_str("scratch")?,
        BufferKind::Local => f.write_str("local")?,
        BufferKind::Shared => f.write_str("shared")?,
    }
    f.write_str("\n")
}

fn indent(f: &mut Formatter<'_>, depth: usize) -> fmt::Result {
    for _ in 0..depth {
        f.write_str("  ")?;
    }
    Ok(())
}

fn write_body(f: &mut Formatter<'_>, names: Names<'_>, body: &[Stmt], depth: usize) -> fmt::Result {
    for s in body {
        write_stmt(f, names, s, depth)?;
    }
    Ok(())
}

fn write_stmt(f: &mut Formatter<'_>, names: Names<'_>, stmt: &Stmt, depth: usize) -> fmt::Result {
    indent(f, depth)?;
    match stmt {
        Stmt::For(l) => {
            write!(f, "for {} in ", names.var(l.var))?;
            write_expr(f, names, &l.lo)?;
            f.write_str("..")?;
            write_expr(f, names, &l.hi)?;
            match l.kind {
                ForKind::Serial => {}
                ForKind::ParallelDynamic => f.write_str(" parallel(dynamic)")?,
                ForKind::VectorizedReduction {
                    scalar_sums,
                    masked,
                } => {
                    f.write_str(" vectorized(reassociate")?;
                    if scalar_sums != 1 {
                        write!(f, ", scalar_sums={scalar_sums}")?;
                    }
                    if masked {
                        f.write_str(", masked")?;
                    }
                    f.write_str(")")?
                }
                ForKind::ParallelBalanced { indptr } => {
                    write!(f, " parallel(balanced {})", names.buffer(indptr))?
                }
                ForKind::Bound(axis) => write!(f, " bind({axis})")?,
                kind => write!(f, " {}", kind.name())?,
            }
            f.write_str(" {\n")?;
            write_body(f, names, &l.body, depth + 1)?;
            indent(f, depth)?;
            f.write_str("}\n")
        }
        Stmt::If {
            cond,
            then_body,
            else_body,
            ..
        } => {
            f.write_str("if ")?;
            write_expr(f, names, cond)?;
            f.write_str(" {\n")?;
            write_body(f, names, then_body, depth + 1)?;
            indent(f, depth)?;
            if else_body.is_empty() {
                f.write_str("}\n")
            } else {
                f.write_str("} else {\n")?;
                write_body(f, names, else_body, depth + 1)?;
                indent(f, depth)?;
                f.write_str("}\n")
            }
        }
        Stmt::Let { var, value, .. } => {
            let ty = names.0.vars.get(*var).map_or("?", |v| var_type_name(v.ty));
            write!(f, "let {}: {ty} = ", names.var(*var))?;
            write_expr(f, names, value)?;
            f.write_str("\n")
        }
        Stmt::Assign { var, value, .. } => {
            write!(f, "{} = ", names.var(*var))?;
            write_expr(f, names, value)?;
            f.write_str("\n")
        }
        Stmt::Store {
            buffer,
            indices,
            value,
            ..
        } => {
            f.write_str(&names.buffer(*buffer))?;
            write_list(f, names, '[', indices, ']')?;
            f.write_str(" = ")?;
            write_expr(f, names, value)?;
            f.write_str("\n")
        }
        Stmt::Prefetch {
            buffer, indices, ..
        } => {
            write!(f, "prefetch {}", names.buffer(*buffer))?;
            write_list(f, names, '[', indices, ']')?;
            f.write_str("\n")
        }
        Stmt::AtomicAdd {
            buffer,
            indices,
            value,
            ..
        } => {
            write!(f, "atomic {}", names.buffer(*buffer))?;
            write_list(f, names, '[', indices, ']')?;
            f.write_str(" += ")?;
            write_expr(f, names, value)?;
            f.write_str("\n")
        }
        Stmt::Block { name, body, .. } => {
            writeln!(f, "block {name} {{")?;
            write_body(f, names, body, depth + 1)?;
            indent(f, depth)?;
            f.write_str("}\n")
        }
        Stmt::Launch { name, body, .. } => {
            writeln!(f, "launch {name} {{")?;
            write_body(f, names, body, depth + 1)?;
            indent(f, depth)?;
            f.write_str("}\n")
        }
        Stmt::Barrier { scope, .. } => writeln!(f, "{}", scope.keyword()),
        Stmt::Mma(m) => {
            write!(
                f,
                "mma {} {} ({}, {}, {}) ",
                m.shape,
                m.ty,
                names.var(m.row),
                names.var(m.col),
                names.var(m.depth),
            )?;
            if let Some(guard) = &m.guard {
                f.write_str("where ")?;
                write_expr(f, names, guard)?;
                f.write_str(": ")?;
            }
            f.write_str(&names.buffer(m.c))?;
            write_list(f, names, '[', &m.c_indices, ']')?;
            f.write_str(" += ")?;
            // The operands print as one product; the parser splits it at its top `*`.
            let product = Expr::binary(BinaryOp::Mul, m.a.clone(), m.b.clone());
            write_expr(f, names, &product)?;
            f.write_str("\n")
        }
        Stmt::WarpReduce {
            var,
            op,
            value,
            key,
            lanes,
            ..
        } => {
            let ty = names.0.vars.get(*var).map_or("?", |v| var_type_name(v.ty));
            write!(f, "let {}: {ty} = ", names.var(*var))?;
            match key {
                None => write!(f, "{}(", op.function())?,
                Some(_) => write!(f, "{}(", super::gpu::WARP_SEGMENT_SUM)?,
            }
            write_expr(f, names, value)?;
            if let Some(key) = key {
                f.write_str(", ")?;
                write_expr(f, names, key)?;
            }
            writeln!(f, ", {lanes})")
        }
    }
}

fn write_list(
    f: &mut Formatter<'_>,
    names: Names<'_>,
    open: char,
    items: &[Expr],
    close: char,
) -> fmt::Result {
    f.write_char(open)?;
    for (k, e) in items.iter().enumerate() {
        if k > 0 {
            f.write_str(", ")?;
        }
        write_expr(f, names, e)?;
    }
    f.write_char(close)
}

/// Binding strength of an infix expression (higher binds tighter); `None` for atoms and
/// calls. `||` 1, `&&` 2, comparisons 3, `+ -` 4, `* / %` 5.
pub(super) fn precedence(e: &Expr) -> Option<u8> {
    match e {
        Expr::Logic {
            op: LogicOp::Or, ..
        } => Some(1),
        Expr::Logic {
            op: LogicOp::And, ..
        } => Some(2),
        Expr::Cmp { .. } => Some(3),
        Expr::Binary { op, .. } => binary_precedence(*op),
        _ => None,
    }
}

pub(super) fn binary_precedence(op: BinaryOp) -> Option<u8> {
    match op {
        BinaryOp::Add | BinaryOp::Sub => Some(4),
        BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => Some(5),
        BinaryOp::Max | BinaryOp::Min => None,
    }
}

fn write_operand(f: &mut Formatter<'_>, names: Names<'_>, e: &Expr, parens: bool) -> fmt::Result {
    if parens {
        f.write_char('(')?;
        write_expr(f, names, e)?;
        f.write_char(')')
    } else {
        write_expr(f, names, e)
    }
}

/// Writes `lhs SYMBOL rhs`. Left-associative operators parenthesise a left operand that
/// binds more loosely and a right operand that binds as loosely or more; comparisons
/// (non-associative) parenthesise any operand that is a comparison or looser.
fn write_infix(
    f: &mut Formatter<'_>,
    names: Names<'_>,
    p: u8,
    symbol: &str,
    lhs: &Expr,
    rhs: &Expr,
) -> fmt::Result {
    let assoc = p != 3;
    let lp = precedence(lhs).is_some_and(|q| if assoc { q < p } else { q <= p });
    let rp = precedence(rhs).is_some_and(|q| q <= p);
    write_operand(f, names, lhs, lp)?;
    write!(f, " {symbol} ")?;
    write_operand(f, names, rhs, rp)
}

fn cmp_symbol(op: CmpOp) -> &'static str {
    op.symbol()
}

fn write_expr(f: &mut Formatter<'_>, names: Names<'_>, e: &Expr) -> fmt::Result {
    match e {
        Expr::Int(v) => write!(f, "{v}"),
        Expr::Float(x) => f.write_str(&float_literal(*x)),
        Expr::Var(v) => f.write_str(&names.var(*v)),
        Expr::Param(p) => f.write_str(&names.param(*p)),
        Expr::Load { buffer, indices } => {
            f.write_str(&names.buffer(*buffer))?;
            write_list(f, names, '[', indices, ']')
        }
        Expr::Unary { op, arg } => {
            write!(f, "{}(", op.name())?;
            write_expr(f, names, arg)?;
            f.write_char(')')
        }
        Expr::Binary { op, lhs, rhs } => match binary_precedence(*op) {
            None => {
                write!(f, "{}(", op.symbol())?;
                write_expr(f, names, lhs)?;
                f.write_str(", ")?;
                write_expr(f, names, rhs)?;
                f.write_char(')')
            }
            Some(p) => write_infix(f, names, p, op.symbol(), lhs, rhs),
        },
        Expr::Cmp { op, lhs, rhs } => write_infix(f, names, 3, cmp_symbol(*op), lhs, rhs),
        Expr::Logic { op, lhs, rhs } => {
            let p = if *op == LogicOp::Or { 1 } else { 2 };
            write_infix(f, names, p, op.symbol(), lhs, rhs)
        }
        Expr::Select {
            cond,
            then,
            otherwise,
        } => {
            f.write_str("select(")?;
            write_expr(f, names, cond)?;
            f.write_str(", ")?;
            write_expr(f, names, then)?;
            f.write_str(", ")?;
            write_expr(f, names, otherwise)?;
            f.write_char(')')
        }
        Expr::Search {
            buffer,
            lo,
            hi,
            value,
        } => {
            write!(f, "search({}, ", names.buffer(*buffer))?;
            write_expr(f, names, lo)?;
            f.write_str(", ")?;
            write_expr(f, names, hi)?;
            f.write_str(", ")?;
            write_expr(f, names, value)?;
            f.write_char(')')
        }
    }
}
