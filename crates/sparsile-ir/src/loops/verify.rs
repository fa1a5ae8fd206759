//! The loop-level verifier (stages II and III) and expression type inference.
//!
//! [`verify`] checks every structural rule of a [`Func`] and returns all problems found,
//! in function order (parameters, axes, buffers, variables, then the body). Every pass
//! producing a loop-level function must produce one that passes it. [`expr_type`]
//! infers whether an expression is integer- or float-valued. The stage modules
//! ([`crate::pos::verify()`], [`crate::flat::verify()`]) add the check that the function is
//! in their stage.
//!
//! Rules checked:
//! - names: the function, parameters, axes, buffers and variables have identifier names
//!   that are not reserved; parameters, axes and buffers are unique in their namespace;
//!   no parameter shares its name with an axis; block names are identifiers joined by
//!   `.` and unique; a variable does not reuse the name of a parameter or of a variable
//!   in scope.
//! - axes: only in stage II, and they satisfy the stage-I axis rules
//!   ([`crate::coord::verify()`]).
//! - buffers: an `Axes` layout only in stage II, over existing axes, each at most once
//!   and after its parent when both are listed;
//!   a `Flat` length is an integer expression over parameters and literals; structure
//!   buffers (`indptr`/`indices`) are flat, integer-typed inputs of an existing `values`
//!   buffer; `scratch` buffers are `temp`; `local` buffers are `temp` and flat with a
//!   constant length of at least 1.
//! - variables: each is declared by exactly one `for`, `let` or `mma`; loop variables are
//!   indices; a local's type is `idx` or a float type, and its value has that kind;
//!   variables are used only in scope (after their declaration); `x = e` assigns only a
//!   `let` local (never a loop variable) with a value of its kind.
//! - statements: loop bounds and `if` conditions are integers; no `parallel` loop inside
//!   another `parallel` loop; a `vectorized(reassociate)` loop holds no loop and its
//!   reductions follow the rules of [`local_reductions`](crate::loops::local_reductions)
//!   (stores not depending on the loop variable are `L[e] = L[e] + …` into
//!   local buffers); a `batched` loop has the shape of
//!   [`batched_shape`](crate::loops::batched_shape), a `register_tiled` loop that of
//!   [`register_tiled_shape`](crate::loops::register_tiled_shape); a balanced partition
//!   names a flat integer buffer; atomic
//!   adds go to float buffers; accesses give one index per axis (`Axes`) or exactly one
//!   (`Flat`); indices are integers; stored values match the buffer's element type
//!   (integer or float); no stores to `input` buffers.
//! - `mma` ([`crate::loops::mma`]): a shape `mma.sync` has for the type (f16/bf16:
//!   m16n8k16, m16n8k8; tf32: m16n8k8, m16n8k4); three tile variables of type `idx`,
//!   declared by the statement and in scope in it only; an f32 accumulator that is not an
//!   input or `local`, accessed like a store; float operands, an integer guard; the
//!   accumulator's indices and the guard do not use the depth variable, the left operand
//!   not the column one, the right operand not the row one; nothing in the statement
//!   reads the accumulator's buffer or a `local` buffer.
//! - expressions ([`expr_type`]): operands of `+ - * / max min` and of comparisons have
//!   the same kind; `%` on integers only; unary functions on floats only; `&&`, `||`
//!   and `select` conditions are integers; both `select` branches have the same kind;
//!   `search` reads a flat integer buffer with integer bounds and value.
//!
//! ```
//! use sparsile_ir::loops::{verify, Func};
//! let f: Func = "flat func f(n) {\n  buffer X: f32[n] input values\n  \
//!     for i in 0..n {\n    X[i] = 1.0\n  }\n}\n".parse().unwrap();
//! let errors = verify(&f).unwrap_err();
//! assert_eq!(errors[0].to_string(),
//!     "line 4: store to `X`: buffer `X` is an input (stores go to output or temp buffers)");
//! ```

use std::collections::{HashMap, HashSet};

use super::batched::batched_shape;
use super::expr::Expr;
use super::func::{BufferKind, BufferLayout, Func, Stage, VarType};
use super::local_reduction::local_reductions;
use super::mma::Mma;
use super::parser::{is_valid_block_name, is_valid_name};
use super::register_tiled::register_tiled_shape;
use super::stmt::{For, ForKind, Stmt};
use crate::coord::{BinaryOp, BufferRole, Program};
pub use crate::coord::{ScalarKind, TypeError, VerifyError};
use crate::id::{BufferId, VarId};
use crate::{DType, Span};

fn type_error(message: String) -> TypeError {
    TypeError { message }
}

fn kind_with_article(k: ScalarKind) -> &'static str {
    match k {
        ScalarKind::Int => "an integer",
        ScalarKind::Float => "a float",
    }
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The number of indices an access to `buffer` takes.
fn index_count(func: &Func, buffer: BufferId) -> Option<usize> {
    func.buffers.get(buffer).map(|b| match &b.layout {
        BufferLayout::Axes(axes) => axes.len(),
        BufferLayout::Flat(_) => 1,
    })
}

/// Checks the indices of an access to `buffer` and returns the kind of its elements.
fn access_type(func: &Func, buffer: BufferId, indices: &[Expr]) -> Result<ScalarKind, TypeError> {
    let b = func
        .buffers
        .get(buffer)
        .ok_or_else(|| type_error(format!("access to missing buffer {buffer}")))?;
    let expected = index_count(func, buffer).unwrap_or(0);
    if indices.len() != expected {
        let layout = match b.layout {
            BufferLayout::Axes(_) => count(expected, "axis", "axes"),
            BufferLayout::Flat(_) => "a flat layout".to_string(),
        };
        return Err(type_error(format!(
            "buffer `{}` has {layout} but is accessed with {}",
            b.name,
            count(indices.len(), "index", "indices")
        )));
    }
    for (k, idx) in indices.iter().enumerate() {
        if expr_type(func, idx)? != ScalarKind::Int {
            return Err(type_error(format!(
                "index {k} of an access to `{}` is a float (indices are integers)",
                b.name
            )));
        }
    }
    Ok(if b.dtype.is_int() {
        ScalarKind::Int
    } else {
        ScalarKind::Float
    })
}

fn expect_int(func: &Func, e: &Expr, what: &str) -> Result<(), TypeError> {
    match expr_type(func, e)? {
        ScalarKind::Int => Ok(()),
        ScalarKind::Float => Err(type_error(format!(
            "{what} is a float (expected an integer)"
        ))),
    }
}

/// The kind of `expr`: integer for integer literals, index variables, parameters, loads
/// of integer buffers, comparisons, logic, `search` and arithmetic on integers; float
/// for float literals, float locals, loads of float buffers and arithmetic on those.
/// See the module doc for the rules; the first violation found is returned.
pub fn expr_type(func: &Func, expr: &Expr) -> Result<ScalarKind, TypeError> {
    match expr {
        Expr::Int(_) | Expr::Param(_) => Ok(ScalarKind::Int),
        Expr::Float(_) => Ok(ScalarKind::Float),
        Expr::Var(v) => match func.vars.get(*v) {
            Some(var) => Ok(match var.ty {
                VarType::Index => ScalarKind::Int,
                VarType::Value(_) => ScalarKind::Float,
            }),
            None => Err(type_error(format!("use of missing variable {v}"))),
        },
        Expr::Load { buffer, indices } => access_type(func, *buffer, indices),
        Expr::Unary { op, arg } => {
            if expr_type(func, arg)? != ScalarKind::Float {
                return Err(type_error(format!(
                    "`{}` takes a float, found an integer",
                    op.name()
                )));
            }
            Ok(ScalarKind::Float)
        }
        Expr::Binary { op, lhs, rhs } => {
            let l = expr_type(func, lhs)?;
            let r = expr_type(func, rhs)?;
            if l != r {
                return Err(type_error(format!(
                    "`{}` mixes {} and {} operand (write float literals with a `.`)",
                    op.symbol(),
                    kind_with_article(l),
                    kind_with_article(r)
                )));
            }
            if *op == BinaryOp::Rem && l != ScalarKind::Int {
                return Err(type_error("`%` takes integers, found floats".to_string()));
            }
            Ok(l)
        }
        Expr::Cmp { op, lhs, rhs } => {
            let l = expr_type(func, lhs)?;
            let r = expr_type(func, rhs)?;
            if l != r {
                return Err(type_error(format!(
                    "`{}` compares {} with {}",
                    op.symbol(),
                    kind_with_article(l),
                    kind_with_article(r)
                )));
            }
            Ok(ScalarKind::Int)
        }
        Expr::Logic { op, lhs, rhs } => {
            expect_int(func, lhs, &format!("the left operand of `{}`", op.symbol()))?;
            expect_int(
                func,
                rhs,
                &format!("the right operand of `{}`", op.symbol()),
            )?;
            Ok(ScalarKind::Int)
        }
        Expr::Select {
            cond,
            then,
            otherwise,
        } => {
            expect_int(func, cond, "the condition of `select`")?;
            let a = expr_type(func, then)?;
            let b = expr_type(func, otherwise)?;
            if a != b {
                return Err(type_error(format!(
                    "`select` chooses between {} and {}",
                    kind_with_article(a),
                    kind_with_article(b)
                )));
            }
            Ok(a)
        }
        Expr::Search {
            buffer,
            lo,
            hi,
            value,
        } => {
            let b = func
                .buffers
                .get(*buffer)
                .ok_or_else(|| type_error(format!("search in missing buffer {buffer}")))?;
            if !matches!(b.layout, BufferLayout::Flat(_)) || !b.dtype.is_int() {
                return Err(type_error(format!(
                    "`search` needs a flat integer buffer, but `{}` is {} {} buffer",
                    b.name,
                    if matches!(b.layout, BufferLayout::Flat(_)) {
                        "a flat"
                    } else {
                        "an axes-laid-out"
                    },
                    b.dtype
                )));
            }
            expect_int(func, lo, "the lower bound of `search`")?;
            expect_int(func, hi, "the upper bound of `search`")?;
            expect_int(func, value, "the value of `search`")?;
            Ok(ScalarKind::Int)
        }
    }
}

/// Checks every rule listed in the module doc; all errors are returned, in function
/// order.
pub fn verify(func: &Func) -> Result<(), Vec<VerifyError>> {
    let mut v = Verifier {
        func,
        errors: Vec::new(),
        declared: HashMap::new(),
        block_names: HashSet::new(),
    };
    v.names_and_axes();
    v.buffers();
    v.vars();
    let mut scope = Scope::default();
    v.stmts(&func.body, &mut scope, false);
    v.declarations();
    v.errors.extend(super::verify_gpu::verify_gpu(func));
    if v.errors.is_empty() {
        Ok(())
    } else {
        Err(v.errors)
    }
}

/// [`verify`], plus the check that `func` is in `stage` (first, as its own error).
pub fn verify_stage(func: &Func, stage: Stage) -> Result<(), Vec<VerifyError>> {
    let mut errors = Vec::new();
    if func.stage != stage {
        errors.push(VerifyError {
            span: Span::default(),
            message: format!(
                "function `{}` is a `{}` function, expected a `{}` one",
                func.name,
                func.stage.name(),
                stage.name()
            ),
        });
    }
    if let Err(more) = verify(func) {
        errors.extend(more);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Variables visible at a point of the body.
#[derive(Default)]
struct Scope {
    /// In declaration order, with whether each is a `let` local.
    vars: Vec<(VarId, bool)>,
}

impl Scope {
    fn contains(&self, v: VarId) -> bool {
        self.vars.iter().any(|&(w, _)| w == v)
    }
    fn is_local(&self, v: VarId) -> bool {
        self.vars.iter().any(|&(w, local)| w == v && local)
    }
}

struct Verifier<'a> {
    func: &'a Func,
    errors: Vec<VerifyError>,
    /// How many times each variable is declared, with the first declaration's span.
    declared: HashMap<VarId, (usize, Span)>,
    block_names: HashSet<&'a str>,
}

impl<'a> Verifier<'a> {
    fn error(&mut self, span: Span, message: String) {
        self.errors.push(VerifyError { span, message });
    }

    fn names_and_axes(&mut self) {
        let f = self.func;
        if !is_valid_name(&f.name) {
            self.error(
                Span::default(),
                format!("function name `{}` is not a valid name", f.name),
            );
        }
        let mut seen = HashSet::new();
        for p in f.params.values() {
            if !is_valid_name(&p.name) {
                self.error(
                    Span::default(),
                    format!("parameter name `{}` is not a valid name", p.name),
                );
            }
            if !seen.insert(p.name.as_str()) {
                self.error(
                    Span::default(),
                    format!("parameter `{}` is declared twice", p.name),
                );
            }
        }
        if f.stage == Stage::Flat {
            for a in f.axes.values() {
                self.error(
                    a.span,
                    format!("axis `{}`: a stage III (flat) function has no axes", a.name),
                );
            }
            return;
        }
        for a in f.axes.values() {
            if !is_valid_name(&a.name) {
                self.error(
                    a.span,
                    format!("axis name `{}` is not a valid name", a.name),
                );
            }
            if f.param_by_name(&a.name).is_some() {
                self.error(
                    a.span,
                    format!("axis `{}` has the name of a parameter", a.name),
                );
            }
        }
        // The stage-I axis rules, on a program holding only the parameters and axes.
        let mut program = Program::new(f.name.clone());
        program.params = f.params.clone();
        program.axes = f.axes.clone();
        if let Err(errors) = crate::coord::verify(&program) {
            // Name problems were reported above with this stage's rules.
            self.errors.extend(
                errors
                    .into_iter()
                    .filter(|e| !e.message.contains("is not a valid name")),
            );
        }
    }

    fn buffers(&mut self) {
        let f = self.func;
        let mut seen = HashSet::new();
        for b in f.buffers.values() {
            let at = |m: String| format!("buffer `{}`: {m}", b.name);
            if !is_valid_name(&b.name) {
                self.error(
                    b.span,
                    format!("buffer name `{}` is not a valid name", b.name),
                );
            }
            if !seen.insert(b.name.as_str()) {
                self.error(b.span, format!("buffer `{}` is declared twice", b.name));
            }
            match &b.layout {
                BufferLayout::Axes(axes) => {
                    if f.stage == Stage::Flat {
                        self.error(
                            b.span,
                            at("laid out over axes in a stage III (flat) function".into()),
                        );
                    }
                    let mut used = HashSet::new();
                    for &a in axes {
                        let Some(decl) = f.axes.get(a) else {
                            self.error(b.span, at(format!("missing axis {a}")));
                            continue;
                        };
                        if !used.insert(a) {
                            self.error(b.span, at(format!("axis `{}` appears twice", decl.name)));
                        }
                        if let Some(p) = decl.parent {
                            if axes.contains(&p) && !used.contains(&p) {
                                let parent = f.axes.get(p).map_or("?", |x| x.name.as_str());
                                self.error(
                                    b.span,
                                    at(format!(
                                        "axis `{}` comes before its parent `{parent}`",
                                        decl.name
                                    )),
                                );
                            }
                        }
                    }
                }
                BufferLayout::Flat(len) => {
                    let mut bad = None;
                    len.visit(&mut |e| match e {
                        Expr::Int(_) => {}
                        Expr::Param(p) if f.params.get(*p).is_some() => {}
                        Expr::Binary { .. } => {}
                        Expr::Param(p) => bad = Some(format!("missing parameter {p}")),
                        _ => {
                            bad.get_or_insert_with(|| {
                                "the length is not an integer expression over parameters"
                                    .to_string()
                            });
                        }
                    });
                    if bad.is_none() {
                        if let Err(e) = expr_type(f, len) {
                            bad = Some(format!("length: {e}"));
                        }
                    }
                    if let Some(m) = bad {
                        self.error(b.span, at(m));
                    }
                }
            }
            match &b.kind {
                BufferKind::Values => {}
                BufferKind::Local | BufferKind::Shared => {
                    let word = if b.kind == BufferKind::Local {
                        "local"
                    } else {
                        "shared"
                    };
                    if b.role != BufferRole::Temp {
                        self.error(
                            b.span,
                            at(format!(
                                "a {word} buffer must be `temp`, not `{}`",
                                b.role.name()
                            )),
                        );
                    }
                    let constant = matches!(&b.layout, BufferLayout::Flat(Expr::Int(n)) if *n >= 1);
                    if !constant {
                        self.error(
                            b.span,
                            at(format!(
                                "a {word} buffer is flat with a constant length of at least 1"
                            )),
                        );
                    }
                }
                BufferKind::Scratch => {
                    if b.role != BufferRole::Temp {
                        self.error(
                            b.span,
                            at(format!(
                                "a scratch buffer must be `temp`, not `{}`",
                                b.role.name()
                            )),
                        );
                    }
                }
                BufferKind::Indptr { tensor, .. } | BufferKind::Indices { tensor, .. } => {
                    if !b.dtype.is_int() {
                        self.error(
                            b.span,
                            at(format!(
                                "a structure array has integer elements, not {}",
                                b.dtype
                            )),
                        );
                    }
                    if !matches!(b.layout, BufferLayout::Flat(_)) {
                        self.error(b.span, at("a structure array is flat".into()));
                    }
                    if b.role != BufferRole::Input {
                        self.error(
                            b.span,
                            at(format!(
                                "a structure array is an `input`, not `{}`",
                                b.role.name()
                            )),
                        );
                    }
                    let owner = f
                        .buffers
                        .values()
                        .any(|o| o.name == *tensor && o.kind == BufferKind::Values);
                    if !owner {
                        self.error(b.span, at(format!("no `values` buffer named `{tensor}`")));
                    }
                }
            }
        }
    }

    fn vars(&mut self) {
        for v in self.func.vars.values() {
            if !is_valid_name(&v.name) {
                self.error(
                    Span::default(),
                    format!("variable name `{}` is not a valid name", v.name),
                );
            }
            if let VarType::Value(d) = v.ty {
                if !d.is_float() {
                    self.error(
                        Span::default(),
                        format!(
                            "variable `{}` has type {d} (locals are `idx` or a float type)",
                            v.name
                        ),
                    );
                }
            }
        }
    }

    /// Reports variables declared more than once (after the body walk counted them).
    fn declarations(&mut self) {
        let mut twice: Vec<(VarId, Span)> = self
            .declared
            .iter()
            .filter(|(_, (n, _))| *n > 1)
            .map(|(&v, &(_, span))| (v, span))
            .collect();
        twice.sort_by_key(|(v, _)| *v);
        for (v, span) in twice {
            let name = self.var_name(v);
            self.error(
                span,
                format!("variable `{name}` is declared more than once"),
            );
        }
    }

    fn var_name(&self, v: VarId) -> String {
        self.func
            .vars
            .get(v)
            .map_or_else(|| v.to_string(), |x| x.name.clone())
    }

    fn buffer_name(&self, b: BufferId) -> String {
        self.func
            .buffers
            .get(b)
            .map_or_else(|| b.to_string(), |x| x.name.clone())
    }

    /// Checks a new declaration of `v` at `span`; pushes it onto the scope.
    fn declare(&mut self, v: VarId, local: bool, span: Span, scope: &mut Scope, ctx: &str) {
        let entry = self.declared.entry(v).or_insert((0, span));
        entry.0 += 1;
        let Some(var) = self.func.vars.get(v) else {
            self.error(span, format!("{ctx}: missing variable {v}"));
            return;
        };
        if self.func.param_by_name(&var.name).is_some() {
            self.error(
                span,
                format!("{ctx}: variable `{}` has the name of a parameter", var.name),
            );
        }
        let shadows = scope
            .vars
            .iter()
            .any(|&(w, _)| self.func.vars.get(w).is_some_and(|x| x.name == var.name));
        if shadows {
            self.error(
                span,
                format!("{ctx}: variable `{}` is already in scope", var.name),
            );
        }
        scope.vars.push((v, local));
    }

    /// Checks that every variable in `e` is in scope, then its type.
    fn expr(&mut self, e: &Expr, scope: &Scope, span: Span, ctx: &str) -> Option<ScalarKind> {
        let mut out_of_scope = Vec::new();
        e.visit(&mut |x| {
            if let Expr::Var(v) = x {
                if self.func.vars.get(*v).is_some() && !scope.contains(*v) {
                    out_of_scope.push(*v);
                }
            }
        });
        out_of_scope.dedup();
        for v in out_of_scope {
            let name = self.var_name(v);
            self.error(
                span,
                format!("{ctx}: variable `{name}` is used outside its scope"),
            );
        }
        match expr_type(self.func, e) {
            Ok(k) => Some(k),
            Err(err) => {
                self.error(span, format!("{ctx}: {err}"));
                None
            }
        }
    }

    fn expect_int(&mut self, e: &Expr, scope: &Scope, span: Span, ctx: &str) {
        if self.expr(e, scope, span, ctx) == Some(ScalarKind::Float) {
            self.error(span, format!("{ctx}: a float (expected an integer)"));
        }
    }

    fn stmts(&mut self, stmts: &'a [Stmt], scope: &mut Scope, in_parallel: bool) {
        let len = scope.vars.len();
        for s in stmts {
            self.stmt(s, scope, in_parallel);
        }
        scope.vars.truncate(len);
    }

    /// The rules of a `vectorized(reassociate)` loop: innermost, and local reductions only.
    fn reassociated(&mut self, l: &For, ctx: &str) {
        let mut inner = None;
        Stmt::visit_all(&l.body, &mut |s| {
            if let (Stmt::For(g), None) = (s, &inner) {
                inner = Some(g.var);
            }
        });
        if let Some(g) = inner {
            let name = self.var_name(g);
            self.error(
                l.span,
                format!("{ctx}: a `vectorized(reassociate)` loop holds loop `{name}` (it must be innermost)"),
            );
        }
        if let Err(e) = local_reductions(self.func, l) {
            self.error(e.span, format!("{ctx}: {}", e.message));
        }
    }

    /// The rules of an `mma` (see [`crate::loops::mma`]).
    fn mma(&mut self, m: &Mma, scope: &mut Scope) {
        let span = m.span;
        let name = self.buffer_name(m.c);
        let ctx = format!("mma into `{name}`");
        if !m.ty.supports(m.shape) {
            let shapes: Vec<&str> = m.ty.shapes().iter().map(|s| s.name()).collect();
            self.error(
                span,
                format!(
                    "{ctx}: there is no {} `mma` for {} operands (it has {})",
                    m.shape,
                    m.ty,
                    shapes.join(" and ")
                ),
            );
        }
        let len = scope.vars.len();
        for v in m.tile_vars() {
            self.declare(v, false, span, scope, &ctx);
            if self
                .func
                .vars
                .get(v)
                .is_some_and(|x| x.ty != VarType::Index)
            {
                let var = self.var_name(v);
                self.error(span, format!("{ctx}: tile variable `{var}` has type `idx`"));
            }
        }
        let access = Expr::Load {
            buffer: m.c,
            indices: m.c_indices.clone(),
        };
        self.expr(&access, scope, span, &format!("{ctx}: the accumulator"));
        if let Some(b) = self.func.buffers.get(m.c) {
            if b.dtype != DType::F32 {
                self.error(
                    span,
                    format!(
                        "{ctx}: the accumulator is {} (an `mma` accumulates into f32 buffers)",
                        b.dtype
                    ),
                );
            }
            if b.role == BufferRole::Input {
                self.error(
                    span,
                    format!(
                        "{ctx}: buffer `{name}` is an input (stores go to output or temp buffers)"
                    ),
                );
            }
            if b.kind == BufferKind::Local {
                self.error(
                    span,
                    format!("{ctx}: the accumulator is a local buffer (its tile is spread over the lanes of a warp: use global or shared memory)"),
                );
            }
        }
        for (what, e) in [("the left operand", &m.a), ("the right operand", &m.b)] {
            if self.expr(e, scope, span, &format!("{ctx}: {what}")) == Some(ScalarKind::Int) {
                self.error(
                    span,
                    format!("{ctx}: {what} is an integer (expected a float)"),
                );
            }
        }
        if let Some(g) = &m.guard {
            self.expect_int(g, scope, span, &format!("{ctx}: the guard"));
        }
        let mut misuse = Vec::new();
        for e in &m.c_indices {
            if e.reads_var(m.depth) {
                misuse.push(("the accumulator's indices", m.depth));
            }
        }
        if m.guard.as_ref().is_some_and(|g| g.reads_var(m.depth)) {
            misuse.push(("the guard", m.depth));
        }
        if m.a.reads_var(m.col) {
            misuse.push(("the left operand", m.col));
        }
        if m.b.reads_var(m.row) {
            misuse.push(("the right operand", m.row));
        }
        misuse.dedup();
        for (what, v) in misuse {
            let var = self.var_name(v);
            self.error(
                span,
                format!(
                    "{ctx}: {what} use{} tile variable `{var}`",
                    if what.ends_with('s') { "" } else { "s" }
                ),
            );
        }
        let mut reads = std::collections::HashSet::new();
        for e in m.exprs() {
            e.loaded_buffers(&mut reads);
        }
        let mut reads: Vec<BufferId> = reads.into_iter().collect();
        reads.sort();
        for b in reads {
            if b == m.c {
                self.error(
                    span,
                    format!("{ctx}: the operands, guard or indices read the accumulator `{name}`"),
                );
            } else if self
                .func
                .buffers
                .get(b)
                .is_some_and(|x| x.kind == BufferKind::Local)
            {
                let local = self.buffer_name(b);
                self.error(
                    span,
                    format!("{ctx}: it reads local buffer `{local}` (a local differs between the lanes of the warp)"),
                );
            }
        }
        scope.vars.truncate(len);
    }

    fn var_kind(&self, v: VarId) -> Option<ScalarKind> {
        self.func.vars.get(v).map(|x| match x.ty {
            VarType::Index => ScalarKind::Int,
            VarType::Value(_) => ScalarKind::Float,
        })
    }

    fn stmt(&mut self, s: &'a Stmt, scope: &mut Scope, in_parallel: bool) {
        match s {
            Stmt::For(l) => {
                let ctx = format!("loop `{}`", self.var_name(l.var));
                self.expect_int(&l.lo, scope, l.span, &format!("{ctx}: lower bound"));
                self.expect_int(&l.hi, scope, l.span, &format!("{ctx}: upper bound"));
                if l.kind.is_parallel() && in_parallel {
                    self.error(
                        l.span,
                        format!("{ctx}: a parallel loop inside a parallel loop"),
                    );
                }
                let len = scope.vars.len();
                self.declare(l.var, false, l.span, scope, &ctx);
                if self
                    .func
                    .vars
                    .get(l.var)
                    .is_some_and(|v| v.ty != VarType::Index)
                {
                    self.error(l.span, format!("{ctx}: a loop variable has type `idx`"));
                }
                if let ForKind::ParallelBalanced { indptr } = l.kind {
                    let ok = self.func.buffers.get(indptr).is_some_and(|b| {
                        b.dtype.is_int() && matches!(b.layout, BufferLayout::Flat(_))
                    });
                    if !ok {
                        self.error(
                            l.span,
                            format!(
                                "{ctx}: a balanced partition reads a flat integer buffer, not `{}`",
                                self.buffer_name(indptr)
                            ),
                        );
                    }
                }
                if let ForKind::VectorizedReduction { scalar_sums, .. } = l.kind {
                    if !(1..=ForKind::MAX_SCALAR_SUMS).contains(&scalar_sums) {
                        self.error(
                            l.span,
                            format!(
                                "{ctx}: `scalar_sums` is {scalar_sums}; it must be 1 to {}",
                                ForKind::MAX_SCALAR_SUMS
                            ),
                        );
                    }
                    self.reassociated(l, &ctx);
                }
                if l.kind == ForKind::Batched {
                    if let Err(e) = batched_shape(self.func, l) {
                        self.error(e.span, format!("{ctx}: a `batched` loop: {}", e.message));
                    }
                }
                if l.kind == ForKind::RegisterTiled {
                    if let Err(e) = register_tiled_shape(self.func, l) {
                        self.error(
                            e.span,
                            format!("{ctx}: a `register_tiled` loop: {}", e.message),
                        );
                    }
                }
                self.stmts(&l.body, scope, in_parallel || l.kind.is_parallel());
                scope.vars.truncate(len);
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
                span,
            } => {
                self.expect_int(cond, scope, *span, "if: condition");
                self.stmts(then_body, scope, in_parallel);
                self.stmts(else_body, scope, in_parallel);
            }
            Stmt::Let { var, value, span } => {
                let ctx = format!("let `{}`", self.var_name(*var));
                let k = self.expr(value, scope, *span, &ctx);
                let want = self.var_kind(*var);
                if let (Some(k), Some(want)) = (k, want) {
                    if k != want {
                        self.error(
                            *span,
                            format!(
                                "{ctx}: the value is {} but the variable holds {}",
                                kind_with_article(k),
                                kind_with_article(want)
                            ),
                        );
                    }
                }
                self.declare(*var, true, *span, scope, &ctx);
            }
            Stmt::Assign { var, value, span } => {
                let ctx = format!("assignment to `{}`", self.var_name(*var));
                if !scope.contains(*var) {
                    self.error(
                        *span,
                        format!("{ctx}: the variable is not declared in scope"),
                    );
                } else if !scope.is_local(*var) {
                    self.error(
                        *span,
                        format!("{ctx}: only `let` locals can be assigned (not loop variables)"),
                    );
                }
                let k = self.expr(value, scope, *span, &ctx);
                if let (Some(k), Some(want)) = (k, self.var_kind(*var)) {
                    if k != want {
                        self.error(
                            *span,
                            format!(
                                "{ctx}: the value is {} but the variable holds {}",
                                kind_with_article(k),
                                kind_with_article(want)
                            ),
                        );
                    }
                }
            }
            Stmt::Store {
                buffer,
                indices,
                value,
                span,
            }
            | Stmt::AtomicAdd {
                buffer,
                indices,
                value,
                span,
            } => {
                let name = self.buffer_name(*buffer);
                let atomic = matches!(s, Stmt::AtomicAdd { .. });
                let ctx = if atomic {
                    format!("atomic add to `{name}`")
                } else {
                    format!("store to `{name}`")
                };
                if atomic
                    && self
                        .func
                        .buffers
                        .get(*buffer)
                        .is_some_and(|b| b.dtype.is_int())
                {
                    self.error(
                        *span,
                        format!("{ctx}: atomic adds go to float buffers only"),
                    );
                }
                let access = Expr::Load {
                    buffer: *buffer,
                    indices: indices.clone(),
                };
                let elem = self.expr(&access, scope, *span, &ctx);
                let k = self.expr(value, scope, *span, &ctx);
                if let (Some(elem), Some(k)) = (elem, k) {
                    if elem != k {
                        self.error(
                            *span,
                            format!(
                                "{ctx}: the value is {} but the buffer holds {}",
                                kind_with_article(k),
                                kind_with_article(elem)
                            ),
                        );
                    }
                }
                if let Some(b) = self.func.buffers.get(*buffer) {
                    if b.role == BufferRole::Input {
                        self.error(
                            *span,
                            format!(
                                "{ctx}: buffer `{name}` is an input (stores go to output or temp buffers)"
                            ),
                        );
                    }
                }
            }
            Stmt::Prefetch {
                buffer,
                indices,
                span,
            } => {
                let ctx = format!("prefetch of `{}`", self.buffer_name(*buffer));
                let access = Expr::Load {
                    buffer: *buffer,
                    indices: indices.clone(),
                };
                self.expr(&access, scope, *span, &ctx);
            }
            Stmt::Launch { name, body, span } => {
                if !is_valid_name(name) {
                    self.error(
                        *span,
                        format!("launch `{name}`: the name is not a valid name"),
                    );
                }
                self.stmts(body, scope, in_parallel);
            }
            Stmt::Barrier { .. } => {}
            Stmt::Mma(m) => self.mma(m, scope),
            Stmt::WarpReduce {
                var,
                op,
                value,
                key,
                lanes,
                span,
            } => {
                let ctx = format!("warp reduction into `{}`", self.var_name(*var));
                let k = self.expr(value, scope, *span, &ctx);
                if let (Some(k), Some(want)) = (k, self.var_kind(*var)) {
                    if k != want {
                        self.error(
                            *span,
                            format!(
                                "{ctx}: the value is {} but the variable holds {}",
                                kind_with_article(k),
                                kind_with_article(want)
                            ),
                        );
                    }
                }
                if let Some(key) = key {
                    self.expect_int(key, scope, *span, &format!("{ctx}: the segment key"));
                    if *op != super::gpu::WarpOp::Sum {
                        self.error(*span, format!("{ctx}: only sums are segmented"));
                    }
                }
                if !(1..=super::gpu::WARP_SIZE).contains(lanes) || !lanes.is_power_of_two() {
                    self.error(
                        *span,
                        format!("{ctx}: groups of {lanes} lanes (a power of two from 1 to 32)"),
                    );
                }
                self.declare(*var, true, *span, scope, &ctx);
            }
            Stmt::Block { name, body, span } => {
                if !is_valid_block_name(name) {
                    self.error(
                        *span,
                        format!("block `{name}`: the name is not identifiers joined by `.`"),
                    );
                }
                if !self.block_names.insert(name.as_str()) {
                    self.error(*span, format!("block `{name}` appears twice"));
                }
                self.stmts(body, scope, in_parallel);
            }
        }
    }
}
