//! The stage-I verifier and expression type inference.
//!
//! [`verify`] checks every structural rule of a [`Program`] and returns all problems
//! found, in program order (parameters, axes, buffers, then the body). Every pass output
//! must pass it. [`expr_type`] infers whether an expression is integer- or float-valued.
//!
//! Rules checked:
//! - names: parameters, axes, buffers and iterations have unique names; every name
//!   (iterator variables and the function included) is an identifier and not reserved;
//!   a variable does not reuse the name of a parameter or of a variable in scope.
//! - axes: the parent exists and is declared earlier; `dense_fixed` axes have no parent;
//!   variable axes have a parent and `nnz`; `sparse_fixed` axes have `nnz_per_parent`;
//!   non-unique coordinates only on sparse axes; constant extents are non-negative;
//!   `union`/`intersect` operands are other sparse axes with the same parent and length
//!   as the axis.
//! - buffers: axes exist; each axis's parent comes earlier in the buffer's axis list.
//! - derived buffers: buffer and source exist, are distinct input buffers, the source is
//!   not derived itself, and no buffer is derived twice.
//! - iterations: axes exist; each axis's parent comes earlier in the same iteration or
//!   in an enclosing one; no spatial axis has a reduction axis as parent; each variable
//!   is bound once, to the axis it is declared for, and used only inside its iteration
//!   (`init` statements only use spatial variables); accesses give one index per buffer
//!   axis; indices are integers; stored values match the buffer's element type (float or
//!   integer); `%` only on integers; unary functions only on floats; stores only to
//!   output and temp buffers.
//!
//! ```
//! use sparsile_ir::coord::{verify, Program};
//! let p: Program = "func f(m) {\n  axis I = dense_fixed(m)\n  buffer X: f32[I] input\n  \
//!     iter s over [I: S] as (i) {\n    X[i] = 1.0\n  }\n}\n".parse().unwrap();
//! let errors = verify(&p).unwrap_err();
//! assert_eq!(errors[0].to_string(),
//!     "line 5: iteration `s`: store to `X`: buffer `X` is an input (stores go to output or temp buffers)");
//! ```

use std::collections::{HashMap, HashSet};
use std::fmt;

use thiserror::Error;

use super::expr::{BinaryOp, Expr};
use super::parser::is_valid_name;
use super::program::{AxisStructure, BufferRole, Extent, Program};
use super::stmt::{IterKind, SparseIteration, Stmt, Store};
use crate::id::{AxisId, IterVarId};
use crate::Span;

/// The kind of value an expression computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScalarKind {
    Int,
    Float,
}

impl ScalarKind {
    /// `an integer` or `a float`, for messages.
    fn with_article(self) -> &'static str {
        match self {
            ScalarKind::Int => "an integer",
            ScalarKind::Float => "a float",
        }
    }
}

impl fmt::Display for ScalarKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ScalarKind::Int => "integer",
            ScalarKind::Float => "float",
        })
    }
}

fn count(n: usize, what: &str) -> String {
    match (n, what) {
        (1, _) => format!("1 {what}"),
        (_, "axis") => format!("{n} axes"),
        (_, "index") => format!("{n} indices"),
        _ => format!("{n} {what}s"),
    }
}

/// Why an expression has no type.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct TypeError {
    pub message: String,
}

fn type_error(message: String) -> TypeError {
    TypeError { message }
}

/// The kind of `expr`: integer for integer literals, variables, parameters, loads of
/// integer buffers and arithmetic on those; float for float literals, loads of float
/// buffers and arithmetic on those. Both operands of a binary operator have the same
/// kind; `%` needs integers, unary functions floats. Load indices must be integers, one
/// per buffer axis.
pub fn expr_type(program: &Program, expr: &Expr) -> Result<ScalarKind, TypeError> {
    match expr {
        Expr::Int(_) | Expr::Var(_) | Expr::Param(_) => Ok(ScalarKind::Int),
        Expr::Float(_) => Ok(ScalarKind::Float),
        Expr::Load { buffer, indices } => {
            let b = program
                .buffers
                .get(*buffer)
                .ok_or_else(|| type_error(format!("load of missing buffer {buffer}")))?;
            if indices.len() != b.axes.len() {
                return Err(type_error(format!(
                    "buffer `{}` has {} but is read with {}",
                    b.name,
                    count(b.axes.len(), "axis"),
                    count(indices.len(), "index")
                )));
            }
            for (k, idx) in indices.iter().enumerate() {
                if expr_type(program, idx)? != ScalarKind::Int {
                    return Err(type_error(format!(
                        "index {k} of a read of `{}` is a float (indices are integers)",
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
        Expr::Unary { op, arg } => {
            if expr_type(program, arg)? != ScalarKind::Float {
                return Err(type_error(format!(
                    "`{}` takes a float, found an integer",
                    op.name()
                )));
            }
            Ok(ScalarKind::Float)
        }
        Expr::Binary { op, lhs, rhs } => {
            let l = expr_type(program, lhs)?;
            let r = expr_type(program, rhs)?;
            if l != r {
                return Err(type_error(format!(
                    "`{}` mixes {} and {} operand (write float literals with a `.`)",
                    op.symbol(),
                    l.with_article(),
                    r.with_article()
                )));
            }
            if *op == BinaryOp::Rem && l != ScalarKind::Int {
                return Err(type_error("`%` takes integers, found floats".to_string()));
            }
            Ok(l)
        }
    }
}

/// A rule a program breaks, where.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct VerifyError {
    /// The declaration or statement at fault (`Span::default()` when built in Rust).
    pub span: Span,
    /// Names the axis, buffer, iteration or store at fault, then the problem.
    pub message: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.span.line > 0 {
            write!(f, "line {}: {}", self.span.line, self.message)
        } else {
            f.write_str(&self.message)
        }
    }
}

/// Checks every rule listed in the module doc; all errors are returned, in program order.
pub fn verify(program: &Program) -> Result<(), Vec<VerifyError>> {
    let mut v = Verifier {
        program,
        errors: Vec::new(),
        bound: HashMap::new(),
        iteration_names: HashSet::new(),
    };
    v.names();
    v.axes();
    v.buffers();
    v.derived();
    let scope = Scope::default();
    for s in &program.body {
        v.stmt(s, &scope, None);
    }
    if v.errors.is_empty() {
        Ok(())
    } else {
        Err(v.errors)
    }
}

struct Verifier<'a> {
    program: &'a Program,
    errors: Vec<VerifyError>,
    /// Variables bound so far, with the iteration binding them.
    bound: HashMap<IterVarId, String>,
    iteration_names: HashSet<String>,
}

/// What enclosing iterations make visible.
#[derive(Default, Clone)]
struct Scope {
    /// Axes iterated, with their kind.
    axes: Vec<(AxisId, IterKind)>,
    /// Variables visible, with their kind.
    vars: Vec<(IterVarId, IterKind)>,
}

impl Verifier<'_> {
    fn err(&mut self, span: Span, message: String) {
        self.errors.push(VerifyError { span, message });
    }

    fn axis_name(&self, a: AxisId) -> String {
        self.program
            .axes
            .get(a)
            .map_or_else(|| a.to_string(), |d| d.name.clone())
    }

    fn names(&mut self) {
        let p = self.program;
        if !is_valid_name(&p.name) {
            self.err(
                Span::default(),
                format!("function name `{}` is not an identifier", p.name),
            );
        }
        let mut seen = HashSet::new();
        for param in p.params.values() {
            if !is_valid_name(&param.name) {
                self.err(
                    Span::default(),
                    format!("parameter `{}`: not an identifier", param.name),
                );
            }
            if !seen.insert(param.name.as_str()) {
                self.err(
                    Span::default(),
                    format!("parameter `{}` is declared twice", param.name),
                );
            }
        }
        let mut seen = HashSet::new();
        for axis in p.axes.values() {
            if !is_valid_name(&axis.name) {
                self.err(
                    axis.span,
                    format!("axis `{}`: name is not an identifier", axis.name),
                );
            }
            if !seen.insert(axis.name.as_str()) {
                self.err(axis.span, format!("axis `{}` is declared twice", axis.name));
            }
        }
        let mut seen = HashSet::new();
        for b in p.buffers.values() {
            if !is_valid_name(&b.name) {
                self.err(
                    b.span,
                    format!("buffer `{}`: name is not an identifier", b.name),
                );
            }
            if !seen.insert(b.name.as_str()) {
                self.err(b.span, format!("buffer `{}` is declared twice", b.name));
            }
        }
    }

    fn extent_ok(&self, e: Extent) -> Result<(), String> {
        match e {
            Extent::Const(c) if c < 0 => Err(format!("negative extent {c}")),
            Extent::Param(p) if self.program.params.get(p).is_none() => {
                Err(format!("missing parameter {p}"))
            }
            _ => Ok(()),
        }
    }

    fn axes(&mut self) {
        let p = self.program;
        for (id, axis) in p.axes.iter() {
            let at = |m: String| (axis.span, format!("axis `{}`: {m}", axis.name));
            let mut problems: Vec<String> = Vec::new();
            for e in [Some(axis.length), axis.nnz, axis.nnz_per_parent]
                .into_iter()
                .flatten()
            {
                if let Err(m) = self.extent_ok(e) {
                    problems.push(m);
                }
            }
            match axis.parent {
                Some(parent) if p.axes.get(parent).is_none() => {
                    problems.push(format!("parent {parent} does not exist"))
                }
                Some(parent) if parent >= id => problems.push(format!(
                    "parent `{}` is declared after it",
                    self.axis_name(parent)
                )),
                _ => {}
            }
            if axis.kind == crate::AxisKind::DenseFixed && axis.parent.is_some() {
                problems.push("a dense_fixed axis has no parent".to_string());
            }
            if axis.kind.is_variable() {
                if axis.parent.is_none() {
                    problems.push(format!("a {} axis needs a parent", axis.kind));
                }
                if axis.nnz.is_none() {
                    problems.push(format!("a {} axis needs `nnz=`", axis.kind));
                }
            }
            if axis.kind == crate::AxisKind::SparseFixed && axis.nnz_per_parent.is_none() {
                problems.push("a sparse_fixed axis needs `per=`".to_string());
            }
            if !axis.unique && !axis.kind.is_sparse() {
                problems.push(format!(
                    "only sparse axes may be `nonunique`, not {}",
                    axis.kind
                ));
            }
            let (op, operands) = match &axis.structure {
                AxisStructure::Bound => ("", &[][..]),
                AxisStructure::Union(a) => ("union", &a[..]),
                AxisStructure::Intersect(a) => ("intersect", &a[..]),
            };
            if !op.is_empty() && operands.is_empty() {
                problems.push(format!("`{op}` of no axes"));
            }
            if !op.is_empty() && !axis.kind.is_sparse() {
                problems.push(format!("only a sparse axis can be a `{op}`"));
            }
            for &o in operands {
                let Some(od) = p.axes.get(o) else {
                    problems.push(format!("`{op}` operand {o} does not exist"));
                    continue;
                };
                if o == id {
                    problems.push(format!("`{op}` names the axis itself"));
                } else if !od.kind.is_sparse() {
                    problems.push(format!("`{op}` operand `{}` is not sparse", od.name));
                } else if od.parent != axis.parent || od.length != axis.length {
                    problems.push(format!(
                        "`{op}` operand `{}` has a different parent or length",
                        od.name
                    ));
                }
            }
            for m in problems {
                let (span, msg) = at(m);
                self.err(span, msg);
            }
        }
    }

    fn buffers(&mut self) {
        let p = self.program;
        for b in p.buffers.values() {
            for (k, &a) in b.axes.iter().enumerate() {
                let Some(ad) = p.axes.get(a) else {
                    self.err(
                        b.span,
                        format!("buffer `{}`: axis {a} does not exist", b.name),
                    );
                    continue;
                };
                if let Some(parent) = ad.parent {
                    if !b.axes[..k].contains(&parent) {
                        self.err(
                            b.span,
                            format!(
                                "buffer `{}`: axis `{}` needs its parent `{}` earlier in the axis list",
                                b.name,
                                ad.name,
                                self.axis_name(parent)
                            ),
                        );
                    }
                }
            }
        }
    }

    /// Derived buffers: both buffers exist, are distinct inputs, the source is not itself
    /// derived, and no buffer is derived twice.
    fn derived(&mut self) {
        let p = self.program;
        let name = |b: crate::id::BufferId| {
            p.buffers
                .get(b)
                .map_or_else(|| b.to_string(), |d| d.name.clone())
        };
        for (k, d) in p.derived.iter().enumerate() {
            let what = format!("derived buffer `{}`", name(d.buffer));
            for (role, b) in [("buffer", d.buffer), ("source", d.source)] {
                match p.buffers.get(b) {
                    None => self.err(d.span, format!("{what}: {role} {b} does not exist")),
                    Some(decl) if decl.role != BufferRole::Input => self.err(
                        d.span,
                        format!("{what}: {role} `{}` must be an input buffer", decl.name),
                    ),
                    Some(_) => {}
                }
            }
            if d.buffer == d.source {
                self.err(d.span, format!("{what}: derived from itself"));
            }
            if p.derivation(d.source).is_some() {
                self.err(
                    d.span,
                    format!("{what}: source `{}` is itself derived", name(d.source)),
                );
            }
            if p.derived[..k].iter().any(|e| e.buffer == d.buffer) {
                self.err(d.span, format!("{what}: derived twice"));
            }
        }
    }

    fn stmt(&mut self, s: &Stmt, scope: &Scope, within: Option<(&str, bool)>) {
        match s {
            Stmt::Store(st) => self.store(st, scope, within),
            Stmt::Iteration(it) => self.iteration(it, scope, within.map(|w| w.1)),
        }
    }

    fn iteration(&mut self, it: &SparseIteration, outer: &Scope, in_init: Option<bool>) {
        let p = self.program;
        let name = &it.name;
        let mut problems: Vec<String> = Vec::new();
        if !is_valid_name(name) {
            problems.push("name is not an identifier".to_string());
        }
        if !self.iteration_names.insert(name.clone()) {
            problems.push("another iteration has this name".to_string());
        }
        let mut scope = outer.clone();
        for ia in &it.axes {
            match p.axes.get(ia.axis) {
                None => problems.push(format!("axis {} does not exist", ia.axis)),
                Some(ad) => {
                    if let Some(parent) = ad.parent {
                        match scope.axes.iter().find(|(a, _)| *a == parent) {
                            None => problems.push(format!(
                                "axis `{}` needs its parent `{}` earlier in this or an enclosing iteration",
                                ad.name,
                                self.axis_name(parent)
                            )),
                            Some((_, IterKind::Reduction)) if ia.kind == IterKind::Spatial => {
                                problems.push(format!(
                                    "spatial axis `{}` has the reduction axis `{}` as parent",
                                    ad.name,
                                    self.axis_name(parent)
                                ))
                            }
                            _ => {}
                        }
                    }
                }
            }
            match p.vars.get(ia.var) {
                None => problems.push(format!("variable {} does not exist", ia.var)),
                Some(v) => {
                    if v.axis != ia.axis {
                        problems.push(format!(
                            "variable `{}` is declared for axis `{}` but bound to `{}`",
                            v.name,
                            self.axis_name(v.axis),
                            self.axis_name(ia.axis)
                        ));
                    }
                    if !is_valid_name(&v.name) {
                        problems.push(format!("variable `{}`: name is not an identifier", v.name));
                    }
                    if p.param_by_name(&v.name).is_some() {
                        problems.push(format!("variable `{}` has the name of a parameter", v.name));
                    }
                    if scope
                        .vars
                        .iter()
                        .any(|(w, _)| p.vars.get(*w).is_some_and(|w| w.name == v.name))
                    {
                        problems.push(format!("variable `{}` is already in scope", v.name));
                    }
                    if let Some(other) = self.bound.insert(ia.var, name.clone()) {
                        problems.push(format!(
                            "variable `{}` is also bound by iteration `{other}`",
                            v.name
                        ));
                    }
                }
            }
            scope.axes.push((ia.axis, ia.kind));
            scope.vars.push((ia.var, ia.kind));
        }
        if in_init == Some(true) && it.axes.iter().any(|a| a.kind == IterKind::Reduction) {
            problems.push("reduction axes are not allowed inside an `init` block".to_string());
        }
        let mut fused_end = 0;
        for &(start, end) in &it.fused {
            if start < fused_end || end < start + 2 || end > it.axes.len() {
                problems.push(format!(
                    "fused group {start}..{end} is not a sorted, disjoint range of at least two \
                     of its {} axes",
                    it.axes.len()
                ));
                continue;
            }
            fused_end = end;
            for pair in it.axes[start..end].windows(2) {
                if p.axes.get(pair[1].axis).and_then(|a| a.parent) != Some(pair[0].axis) {
                    problems.push(format!(
                        "fused axis `{}` is not a child of `{}`",
                        self.axis_name(pair[1].axis),
                        self.axis_name(pair[0].axis)
                    ));
                }
            }
        }
        for m in problems {
            self.err(it.span, format!("iteration `{name}`: {m}"));
        }
        for s in &it.init {
            // Inside `init`, only the spatial variables of this iteration are visible.
            let mut init_scope = scope.clone();
            let own: HashSet<IterVarId> = it.axes.iter().map(|a| a.var).collect();
            init_scope
                .vars
                .retain(|(v, k)| !own.contains(v) || *k == IterKind::Spatial);
            self.stmt(s, &init_scope, Some((name, true)));
        }
        for s in &it.body {
            self.stmt(s, &scope, Some((name, false)));
        }
    }

    fn store(&mut self, st: &Store, scope: &Scope, within: Option<(&str, bool)>) {
        let p = self.program;
        let bname = p
            .buffers
            .get(st.buffer)
            .map_or_else(|| st.buffer.to_string(), |b| b.name.clone());
        let prefix = match within {
            Some((it, _)) => format!("iteration `{it}`: store to `{bname}`"),
            None => format!("store to `{bname}`"),
        };
        let mut problems: Vec<String> = Vec::new();
        match p.buffers.get(st.buffer) {
            None => problems.push(format!("buffer {} does not exist", st.buffer)),
            Some(b) => {
                if b.role == BufferRole::Input {
                    problems.push(format!(
                        "buffer `{}` is an input (stores go to output or temp buffers)",
                        b.name
                    ));
                }
                if st.indices.len() != b.axes.len() {
                    problems.push(format!(
                        "buffer `{}` has {} but is written with {}",
                        b.name,
                        count(b.axes.len(), "axis"),
                        count(st.indices.len(), "index")
                    ));
                }
                for (k, idx) in st.indices.iter().enumerate() {
                    match expr_type(p, idx) {
                        Ok(ScalarKind::Int) => {}
                        Ok(ScalarKind::Float) => {
                            problems.push(format!("index {k} is a float (indices are integers)"))
                        }
                        Err(e) => problems.push(format!("index {k}: {e}")),
                    }
                }
                let want = if b.dtype.is_int() {
                    ScalarKind::Int
                } else {
                    ScalarKind::Float
                };
                match expr_type(p, &st.value) {
                    Ok(k) if k != want => problems.push(format!(
                        "stores {} value into the {} buffer `{}`",
                        k.with_article(),
                        b.dtype,
                        b.name
                    )),
                    Ok(_) => {}
                    Err(e) => problems.push(format!("value: {e}")),
                }
            }
        }
        let mut used = Vec::new();
        for e in st.indices.iter().chain(std::iter::once(&st.value)) {
            e.visit(&mut |x| {
                if let Expr::Var(v) = x {
                    used.push(*v);
                }
                if let Expr::Param(pid) = x {
                    if p.params.get(*pid).is_none() {
                        problems.push(format!("parameter {pid} does not exist"));
                    }
                }
            });
        }
        let mut reported = HashSet::new();
        for v in used {
            if scope.vars.iter().any(|(w, _)| *w == v) || !reported.insert(v) {
                continue;
            }
            let name = p
                .vars
                .get(v)
                .map_or_else(|| v.to_string(), |d| format!("`{}`", d.name));
            let in_init = within.is_some_and(|w| w.1);
            if in_init && self.bound.contains_key(&v) && self.is_reduction_var(v) {
                problems.push(format!("`init` uses the reduction variable {name}"));
            } else {
                problems.push(format!("variable {name} is used outside its iteration"));
            }
        }
        for m in problems {
            self.err(st.span, format!("{prefix}: {m}"));
        }
    }

    fn is_reduction_var(&self, v: IterVarId) -> bool {
        fn walk(stmts: &[Stmt], v: IterVarId) -> bool {
            stmts.iter().any(|s| match s {
                Stmt::Store(_) => false,
                Stmt::Iteration(it) => {
                    it.axes
                        .iter()
                        .any(|a| a.var == v && a.kind == IterKind::Reduction)
                        || walk(&it.init, v)
                        || walk(&it.body, v)
                }
            })
        }
        walk(&self.program.body, v)
    }
}
