//! The text form of stage I: `impl Display for Program`.
//!
//! The printed text is *the* textual IR; [`super::parser`] reads it back, and
//! `print -> parse -> print` is the identity. The grammar is documented in the parser's
//! module doc. Printing never panics: a dangling id (only possible in a program that
//! fails the verifier) prints as its debug name, e.g. `axis#7`, which does not parse.
//!
//! ```
//! use sparsile_ir::coord::{BinaryOp, Expr};
//! use sparsile_ir::coord::display::ExprDisplay;
//! use sparsile_ir::coord::Program;
//! let p = Program::new("empty");
//! let e = Expr::binary(BinaryOp::Mul, Expr::Float(2.0),
//!     Expr::binary(BinaryOp::Add, Expr::Int(1), Expr::Int(-3)));
//! assert_eq!(ExprDisplay::new(&p, &e).to_string(), "2.0 * (1 + -3)");
//! assert_eq!(p.to_string(), "func empty() {\n}\n");
//! ```

use std::fmt::{self, Display, Formatter, Write};

use super::expr::Expr;
use super::program::{AxisDecl, AxisStructure, Extent, Param, Program};
use super::stmt::{SparseIteration, Stmt, Store};
use crate::id::{AxisId, BufferId, IdVec, IterVarId, ParamId};
use crate::{AxisKind, IndexType};

impl Display for Program {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let names = Names(self);
        write!(f, "func {}(", self.name)?;
        for (k, p) in self.params.values().enumerate() {
            if k > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&p.name)?;
        }
        f.write_str(") {\n")?;
        write_axis_decls(f, &self.params, &self.axes)?;
        for buffer in self.buffers.values() {
            let axes: Vec<String> = buffer.axes.iter().map(|&a| names.axis(a)).collect();
            writeln!(
                f,
                "  buffer {}: {}[{}] {}",
                buffer.name,
                buffer.dtype,
                axes.join(", "),
                buffer.role.name()
            )?;
        }
        for d in &self.derived {
            writeln!(
                f,
                "  derived {} = part({}, {}) by {}",
                names.buffer(d.buffer),
                names.buffer(d.source),
                d.part,
                d.rule
            )?;
        }
        for stmt in &self.body {
            write_stmt(f, names, stmt, 1)?;
        }
        f.write_str("}\n")
    }
}

/// Displays one expression of a program in the text-IR syntax.
pub struct ExprDisplay<'a> {
    program: &'a Program,
    expr: &'a Expr,
}

impl<'a> ExprDisplay<'a> {
    pub fn new(program: &'a Program, expr: &'a Expr) -> Self {
        ExprDisplay { program, expr }
    }
}

impl Display for ExprDisplay<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write_expr(f, Names(self.program), self.expr)
    }
}

/// Formats a float literal so that it always contains a `.`, an exponent, or is one of
/// `inf`, `-inf`, `nan`, and parses back to the same value (bit for bit, except NaN
/// payloads).
pub fn float_literal(x: f64) -> String {
    if x.is_nan() {
        "nan".to_string()
    } else if x.is_infinite() {
        if x > 0.0 { "inf" } else { "-inf" }.to_string()
    } else {
        let s = format!("{x:?}");
        if s.contains(['.', 'e', 'E']) {
            s
        } else {
            format!("{s}.0")
        }
    }
}

/// Prints the `axis` declaration lines, as stage I and the loop-level stages share them.
/// Dangling ids print as their debug names.
pub(crate) fn write_axis_decls(
    f: &mut Formatter<'_>,
    params: &IdVec<ParamId, Param>,
    axes: &IdVec<AxisId, AxisDecl>,
) -> fmt::Result {
    let axis_name = |id: AxisId| {
        axes.get(id)
            .map_or_else(|| id.to_string(), |a| a.name.clone())
    };
    let extent = |e: Extent| match e {
        Extent::Const(c) => c.to_string(),
        Extent::Param(p) => params
            .get(p)
            .map_or_else(|| p.to_string(), |p| p.name.clone()),
    };
    for axis in axes.values() {
        write!(f, "  axis {} = {}(", axis.name, axis.kind)?;
        let mut args: Vec<String> = Vec::new();
        if axis.kind != AxisKind::DenseFixed || axis.parent.is_some() {
            args.push(match axis.parent {
                Some(p) => axis_name(p),
                None => "none".to_string(),
            });
        }
        args.push(extent(axis.length));
        if let Some(nnz) = axis.nnz {
            args.push(format!("nnz={}", extent(nnz)));
        }
        if let Some(per) = axis.nnz_per_parent {
            args.push(format!("per={}", extent(per)));
        }
        if axis.kind != AxisKind::DenseFixed || axis.index_type != IndexType::I32 {
            args.push(format!("idx={}", axis.index_type));
        }
        if !axis.unique {
            args.push("nonunique".to_string());
        }
        if axis.kind.is_sparse() && !axis.padded {
            args.push("nopad".to_string());
        }
        f.write_str(&args.join(", "))?;
        f.write_str(")")?;
        let (op, operands) = match &axis.structure {
            AxisStructure::Bound => ("", &[][..]),
            AxisStructure::Union(a) => ("union", &a[..]),
            AxisStructure::Intersect(a) => ("intersect", &a[..]),
        };
        if !op.is_empty() {
            let list: Vec<String> = operands.iter().map(|&a| axis_name(a)).collect();
            write!(f, " = {op}({})", list.join(", "))?;
        }
        f.write_str("\n")?;
    }
    Ok(())
}

/// Name lookups that never panic.
#[derive(Clone, Copy)]
struct Names<'a>(&'a Program);

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
    fn var(self, id: IterVarId) -> String {
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

fn indent(f: &mut Formatter<'_>, depth: usize) -> fmt::Result {
    for _ in 0..depth {
        f.write_str("  ")?;
    }
    Ok(())
}

fn write_stmt(f: &mut Formatter<'_>, names: Names<'_>, stmt: &Stmt, depth: usize) -> fmt::Result {
    match stmt {
        Stmt::Store(store) => write_store(f, names, store, depth),
        Stmt::Iteration(it) => write_iteration(f, names, it, depth),
    }
}

fn write_store(
    f: &mut Formatter<'_>,
    names: Names<'_>,
    store: &Store,
    depth: usize,
) -> fmt::Result {
    indent(f, depth)?;
    f.write_str(&names.buffer(store.buffer))?;
    write_indices(f, names, &store.indices)?;
    f.write_str(" = ")?;
    write_expr(f, names, &store.value)?;
    f.write_str("\n")
}

fn write_iteration(
    f: &mut Formatter<'_>,
    names: Names<'_>,
    it: &SparseIteration,
    depth: usize,
) -> fmt::Result {
    indent(f, depth)?;
    write!(f, "iter {} over [", it.name)?;
    for (k, a) in it.axes.iter().enumerate() {
        if k > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{}: {}", names.axis(a.axis), a.kind.letter())?;
    }
    f.write_str("]")?;
    for &(start, end) in &it.fused {
        f.write_str(" fuse(")?;
        for (k, a) in it
            .axes
            .get(start..end)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            if k > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&names.axis(a.axis))?;
        }
        f.write_str(")")?;
    }
    f.write_str(" as (")?;
    for (k, a) in it.axes.iter().enumerate() {
        if k > 0 {
            f.write_str(", ")?;
        }
        f.write_str(&names.var(a.var))?;
    }
    f.write_str(") {\n")?;
    if !it.init.is_empty() {
        indent(f, depth + 1)?;
        f.write_str("init {\n")?;
        for s in &it.init {
            write_stmt(f, names, s, depth + 2)?;
        }
        indent(f, depth + 1)?;
        f.write_str("}\n")?;
    }
    for s in &it.body {
        write_stmt(f, names, s, depth + 1)?;
    }
    indent(f, depth)?;
    f.write_str("}\n")
}

fn write_indices(f: &mut Formatter<'_>, names: Names<'_>, indices: &[Expr]) -> fmt::Result {
    f.write_char('[')?;
    for (k, e) in indices.iter().enumerate() {
        if k > 0 {
            f.write_str(", ")?;
        }
        write_expr(f, names, e)?;
    }
    f.write_char(']')
}

fn infix_precedence(e: &Expr) -> Option<u8> {
    match e {
        Expr::Binary { op, .. } => op.precedence(),
        _ => None,
    }
}

fn write_operand(
    f: &mut Formatter<'_>,
    names: Names<'_>,
    e: &Expr,
    needs_parens: bool,
) -> fmt::Result {
    if needs_parens {
        f.write_char('(')?;
        write_expr(f, names, e)?;
        f.write_char(')')
    } else {
        write_expr(f, names, e)
    }
}

fn write_expr(f: &mut Formatter<'_>, names: Names<'_>, e: &Expr) -> fmt::Result {
    match e {
        Expr::Int(v) => write!(f, "{v}"),
        Expr::Float(x) => f.write_str(&float_literal(*x)),
        Expr::Var(v) => f.write_str(&names.var(*v)),
        Expr::Param(p) => f.write_str(&names.param(*p)),
        Expr::Load { buffer, indices } => {
            f.write_str(&names.buffer(*buffer))?;
            write_indices(f, names, indices)
        }
        Expr::Unary { op, arg } => {
            write!(f, "{}(", op.name())?;
            write_expr(f, names, arg)?;
            f.write_char(')')
        }
        Expr::Binary { op, lhs, rhs } => match op.precedence() {
            None => {
                write!(f, "{}(", op.symbol())?;
                write_expr(f, names, lhs)?;
                f.write_str(", ")?;
                write_expr(f, names, rhs)?;
                f.write_char(')')
            }
            Some(p) => {
                // Left-associative: the left operand needs parentheses only when it binds
                // more loosely, the right one also when it binds equally.
                let lp = infix_precedence(lhs).is_some_and(|q| q < p);
                let rp = infix_precedence(rhs).is_some_and(|q| q <= p);
                write_operand(f, names, lhs, lp)?;
                write!(f, " {} ", op.symbol())?;
                write_operand(f, names, rhs, rp)
            }
        },
    }
}
