//! Lowers a checked index notation program to a stage-I [`Program`].
//!
//! Preconditions: the program passed [`check`]. Postconditions: one buffer per tensor
//! (assigned tensors are outputs), axes from each tensor's layout (see [`declare`](super::declare)),
//! and for each statement one or more sparse iterations:
//! - The right-hand side is split into its terms (`a + b - c`); each term becomes one
//!   iteration and sums over its own indices (`y[i] = A[i,j] * x[j] + b[i]` adds `b[i]`
//!   once).
//! - A **sparse output** drives every iteration: its axes are those of the operand that
//!   samples it (or the union / intersection of several, see [`pattern`](super::pattern));
//!   the iteration runs over its axes, then dense axes for the remaining (summed) indices.
//! - For a **dense output**, a term with a sparse factor in a product is driven by that
//!   factor; any other term iterates the dense space of its indices.
//! - Logical indices bound by the driver are its layout's `to_logical` map of the axis
//!   iterators; every other tensor is read through its `from_logical` map (in axis
//!   coordinates). Axes are spatial (`S`) when every logical index they feed is on the
//!   left and its coordinates are unique, otherwise reduction (`R`); a spatial axis under a
//!   reduction parent, or feeding an output index together with a reduction axis, is made
//!   `R` as well. So distinct spatial points always write distinct output elements.
//! - An accumulated output is zeroed by an `init` block when the iteration's spatial axes
//!   are exactly the output's, otherwise by a separate iteration over the output first.
//! - `max=` / `min=` is one iteration over the whole right-hand side `e` (driven by a
//!   sparse factor, else by the first sparse operand with plain indices), storing
//!   `X = max(X, e)` (`min`); the output starts at `-inf` (`inf`), in an `init` block or a
//!   `<X>_fill` iteration under the same rule as the zeroing.
//!
//! ```
//! let p = sparsile::compile_notation("\
//! tensor A: f32[m, n] csr
//! tensor x: f32[n]
//! tensor y: f32[m]
//! y[i] = A[i,j] * x[j]
//! ").unwrap();
//! let names: Vec<_> = p.axes.values().map(|a| a.name.as_str()).collect();
//! assert_eq!(names, ["I_m", "A_J", "I_n"]);
//! ```

use std::collections::{HashMap, HashSet};

use sparsile_formats::MapExpr;
use sparsile_ir::coord::{
    BinaryOp, BufferDecl, BufferRole, Expr, IterAxis, IterKind, IterVar, Program, SparseIteration,
    Stmt, Store, UnaryOp,
};
use sparsile_ir::{AxisId, BufferId, IterVarId};

use super::ast::{self, Access, AssignOp, Index};
use super::declare::{exact_dim, map_expr, mentions_axis, Combine, Decls};
use super::pattern::{derive, Pattern};
use super::typecheck::{check, Checked};
use super::{parse, NotationError};

/// Parses, checks and lowers index notation text to a stage-I program named `main`.
pub fn compile_notation(text: &str) -> Result<Program, NotationError> {
    lower(&parse(text)?)
}

/// Checks and lowers a parsed program to a stage-I program named `main`.
pub fn lower(ast: &ast::Program) -> Result<Program, NotationError> {
    lower_checked(&check(ast)?)
}

/// Lowers a checked program (see the module docs).
pub fn lower_checked(checked: &Checked) -> Result<Program, NotationError> {
    let n = checked.ast.tensors.len();
    let mut l = Lowerer {
        d: Decls::new(checked, "main"),
        checked,
        axes: vec![Vec::new(); n],
        patterns: vec![None; n],
        buffers: Vec::new(),
        iter_names: HashSet::new(),
    };
    for t in 0..n {
        if !(checked.is_output[t] && checked.is_sparse(t)) {
            l.axes[t] = l.d.declare_axes(t, None);
        }
    }
    for s in &checked.ast.statements {
        let (out, _) = checked.ast.tensor(&s.lhs.tensor).expect("checked");
        if checked.is_sparse(out) {
            l.sparse_output_axes(out, s)?;
        }
    }
    for (t, decl) in checked.ast.tensors.iter().enumerate() {
        let id = l.d.prog.buffers.push(BufferDecl {
            name: Decls::buffer_name(&decl.name),
            dtype: decl.dtype,
            axes: l.axes[t].clone(),
            role: if checked.is_output[t] {
                BufferRole::Output
            } else {
                BufferRole::Input
            },
            span: decl.span,
        });
        l.buffers.push(id);
    }
    for si in 0..checked.ast.statements.len() {
        l.statement(si)?;
    }
    Ok(l.d.prog)
}

struct Lowerer<'c> {
    d: Decls<'c>,
    checked: &'c Checked,
    axes: Vec<Vec<AxisId>>,
    patterns: Vec<Option<Pattern>>,
    buffers: Vec<BufferId>,
    iter_names: HashSet<String>,
}

/// The driving operand of an iteration: a tensor and the access that binds its indices.
#[derive(Clone, Copy)]
struct Driver<'a> {
    tensor: usize,
    access: &'a Access,
}

/// An iteration's axes, where it stores, and the value of one term.
struct Nest {
    axes: Vec<IterAxis>,
    store: Vec<Expr>,
    value: Expr,
}

impl Nest {
    fn has_reduction(&self) -> bool {
        self.axes.iter().any(|a| a.kind == IterKind::Reduction)
    }
}

impl<'c> Lowerer<'c> {
    fn fresh_iter(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 2;
        while self.iter_names.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.iter_names.insert(name.clone());
        name
    }

    /// Declares (first assignment) or checks (later ones) the axes of sparse output `out`.
    fn sparse_output_axes(&mut self, out: usize, s: &ast::Statement) -> Result<(), NotationError> {
        let name = &s.lhs.tensor;
        let not_derivable = |reason: String| NotationError::PatternNotDerivable {
            tensor: name.clone(),
            reason,
            span: s.rhs.span(),
        };
        let pattern = derive(self.checked, &s.lhs, &s.rhs)
            .map_err(not_derivable)?
            .ok_or_else(|| {
                not_derivable(format!(
                    "no operand in format `{}` indexed as `{}` multiplies every term \
                     (a dense or constant term, `exp`/`log`, or another format or index order \
                     would fill entries outside any stored pattern)",
                    self.checked.ast.tensors[out].format,
                    access_text(&s.lhs)
                ))
            })?;
        match &self.patterns[out] {
            None => {
                self.axes[out] = match &pattern {
                    Pattern::Leaf(t) => self.axes[*t].clone(),
                    Pattern::Union(ts) | Pattern::Intersect(ts) => {
                        let how = if matches!(pattern, Pattern::Union(_)) {
                            Combine::Union
                        } else {
                            Combine::Intersect
                        };
                        let operands: Vec<Vec<AxisId>> =
                            ts.iter().map(|t| self.axes[*t].clone()).collect();
                        self.d.declare_axes(out, Some((how, &operands)))
                    }
                };
                self.patterns[out] = Some(pattern);
                Ok(())
            }
            Some(first) if self.covers(first, &pattern) => Ok(()),
            Some(_) => Err(not_derivable(format!(
                "its stored entries were fixed by its first assignment and this right-hand side \
                 can be non-zero outside them (`{name}` is assigned by one pattern only)"
            ))),
        }
    }

    /// Whether every entry of `new` lies in `stored`.
    fn covers(&self, stored: &Pattern, new: &Pattern) -> bool {
        let same = |a: usize, b: usize| self.axes[a] == self.axes[b];
        let within = |x: usize, list: &[usize]| list.iter().any(|&y| same(x, y));
        match (stored, new) {
            (Pattern::Leaf(y), Pattern::Leaf(x)) => same(*x, *y),
            (Pattern::Leaf(y), Pattern::Intersect(m)) => within(*y, m),
            (Pattern::Union(l), Pattern::Leaf(x)) => within(*x, l),
            (Pattern::Union(l), Pattern::Union(m)) => m.iter().all(|x| within(*x, l)),
            (Pattern::Union(l), Pattern::Intersect(m)) => m.iter().any(|x| within(*x, l)),
            (Pattern::Intersect(l), Pattern::Intersect(m)) => l.iter().all(|x| within(*x, m)),
            _ => false,
        }
    }

    fn statement(&mut self, si: usize) -> Result<(), NotationError> {
        let checked = self.checked;
        let s = &checked.ast.statements[si];
        let out = checked.statements[si].output;
        if let Some(op) = s.op.extremum() {
            return self.extremum(si, op);
        }
        let mut terms = Vec::new();
        split_terms(&s.rhs, false, &mut terms);
        let count = terms.len();
        let sparse_out = checked.is_sparse(out);
        for (k, (term, negate)) in terms.into_iter().enumerate() {
            // A sparse output drives every iteration: it carries the pattern.
            let driver = if sparse_out {
                Some(Driver {
                    tensor: out,
                    access: &s.lhs,
                })
            } else {
                self.choose_driver(term)
            };
            let nest = self.nest(si, term, driver)?;
            let mut init = false;
            let mut acc = s.op == AssignOp::Accumulate || k > 0;
            if k == 0 && s.op == AssignOp::Assign {
                let partial = driver.is_some() && !sparse_out;
                let scatter = s
                    .lhs
                    .indices
                    .iter()
                    .any(|ix| matches!(ix, Index::Indirect(_)));
                let zero = count > 1 || partial || scatter || nest.has_reduction();
                if zero {
                    acc = true;
                    init = self.init_ok(&nest, out);
                    if !init {
                        self.fill(si, out, self.zero(out), "zero");
                    }
                }
            }
            self.emit(si, out, nest, init, acc, negate);
        }
        Ok(())
    }

    /// Lowers `X[..] max= e` / `min= e` (dense float output, checked): one iteration over
    /// the whole right-hand side, driven like a term of a sum or, without a sparse factor,
    /// by its first sparse operand read with plain indices; the output starts at the
    /// identity (`-inf` for max, `inf` for min) and every point updates `X = op(X, e)`.
    fn extremum(&mut self, si: usize, op: BinaryOp) -> Result<(), NotationError> {
        let checked = self.checked;
        let s = &checked.ast.statements[si];
        let out = checked.statements[si].output;
        let driver = self
            .choose_driver(&s.rhs)
            .or_else(|| self.first_sparse_access(&s.rhs));
        let nest = self.nest(si, &s.rhs, driver)?;
        let identity = Expr::Float(if op == BinaryOp::Max {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        });
        let init = self.init_ok(&nest, out);
        if !init {
            self.fill(si, out, identity.clone(), "fill");
        }
        let buffer = self.buffers[out];
        let value = Expr::binary(
            op,
            Expr::load(buffer, nest.store.clone()),
            nest.value.clone(),
        );
        self.push_iteration(si, nest, init.then_some(identity), value);
        Ok(())
    }

    /// The first access of a sparse tensor with plain indices in `e`.
    fn first_sparse_access<'a>(&self, e: &'a ast::Expr) -> Option<Driver<'a>> {
        let mut found: Option<Driver<'a>> = None;
        e.visit_accesses(&mut |a| {
            if found.is_some() || a.indices.iter().any(|ix| ix.as_var().is_none()) {
                return;
            }
            if let Some((t, _)) = self.checked.ast.tensor(&a.tensor) {
                if self.checked.is_sparse(t) {
                    found = Some(Driver {
                        tensor: t,
                        access: a,
                    });
                }
            }
        });
        found
    }

    /// A sparse factor of the term's product to drive its iteration, preferring one that
    /// cannot be randomly accessed.
    fn choose_driver<'a>(&self, term: &'a ast::Expr) -> Option<Driver<'a>> {
        let mut fs = Vec::new();
        factors(term, &mut fs);
        let candidates: Vec<Driver<'a>> = fs
            .into_iter()
            .filter_map(|a| {
                let (t, _) = self.checked.ast.tensor(&a.tensor)?;
                let plain = a.indices.iter().all(|ix| ix.as_var().is_some());
                (plain && self.checked.is_sparse(t)).then_some(Driver {
                    tensor: t,
                    access: a,
                })
            })
            .collect();
        candidates
            .iter()
            .find(|c| {
                self.checked.layouts[c.tensor]
                    .from_logical
                    .iter()
                    .any(Option::is_none)
            })
            .or(candidates.first())
            .copied()
    }

    fn nest(
        &mut self,
        si: usize,
        term: &ast::Expr,
        driver: Option<Driver<'_>>,
    ) -> Result<Nest, NotationError> {
        let checked = self.checked;
        let s = &checked.ast.statements[si];
        let var_dims = &checked.statements[si].var_dims;
        let out = checked.statements[si].output;
        let lhs_vars: Vec<String> = s
            .lhs
            .indices
            .iter()
            .filter_map(|ix| ix.as_var().map(str::to_string))
            .collect();
        // Variables inside indirect indices on the left (a scatter) are iterated but are
        // not output coordinates: several of their values may hit one output element.
        let mut scatter_vars: Vec<String> = Vec::new();
        for ix in &s.lhs.indices {
            if let Index::Indirect(inner) = ix {
                for v in ast::Expr::Access((**inner).clone()).vars() {
                    if !scatter_vars.contains(&v) {
                        scatter_vars.push(v);
                    }
                }
            }
        }
        let mut term_vars = scatter_vars;
        for v in term.vars() {
            if !term_vars.contains(&v) {
                term_vars.push(v);
            }
        }
        let taken = self.d.taken_by_params();
        let mut local: HashSet<String> = lhs_vars.iter().chain(&term_vars).cloned().collect();
        local.extend(taken.iter().cloned());
        // Iterator names: the notation's, unless that is a parameter's name or reserved.
        let mut renamed: HashMap<String, String> = HashMap::new();
        for v in lhs_vars.iter().chain(&term_vars) {
            if taken.contains(v) && !renamed.contains_key(v) {
                let new = local_fresh(&mut local, v);
                renamed.insert(v.clone(), new);
            }
        }
        let ir_name = |v: &str| renamed.get(v).cloned().unwrap_or_else(|| v.to_string());
        let mut items: Vec<(AxisId, IterVarId, Vec<String>)> = Vec::new();
        let mut logical: HashMap<String, Expr> = HashMap::new();
        let mut driver_vars: Vec<IterVarId> = Vec::new();
        if let Some(dr) = driver {
            let layout = &checked.layouts[dr.tensor];
            let axes = self.axes[dr.tensor].clone();
            for (a, spec) in layout.axes.iter().enumerate() {
                let name = match layout
                    .to_logical
                    .iter()
                    .position(|m| *m == MapExpr::Axis(a))
                {
                    Some(d) => ir_name(
                        dr.access.indices[d]
                            .as_var()
                            .expect("drivers have plain indices"),
                    ),
                    None => local_fresh(&mut local, &spec.name.to_lowercase()),
                };
                let v = self.d.prog.vars.push(IterVar {
                    name,
                    axis: axes[a],
                });
                driver_vars.push(v);
                let contrib = (0..layout.to_logical.len())
                    .filter(|&d| mentions_axis(&layout.to_logical[d], a))
                    .filter_map(|d| dr.access.indices[d].as_var().map(str::to_string))
                    .collect();
                items.push((axes[a], v, contrib));
            }
            for (d, m) in layout.to_logical.iter().enumerate() {
                let var = dr.access.indices[d].as_var().expect("plain");
                let e = map_expr(m, &|a| Some(Expr::Var(driver_vars[a])), &|_| None, &|k| {
                    self.d.dim_expr(dr.tensor, k)
                })
                .expect("to_logical maps use axes and dims only");
                logical.insert(var.to_string(), e);
            }
        }
        for v in lhs_vars.iter().chain(&term_vars) {
            if logical.contains_key(v) {
                continue;
            }
            let used: Vec<AxisId> = items.iter().map(|it| it.0).collect();
            let axis = self.d.unused_shared_axis(&var_dims[v], &used);
            let id = self.d.prog.vars.push(IterVar {
                name: ir_name(v),
                axis,
            });
            logical.insert(v.clone(), Expr::Var(id));
            items.push((axis, id, vec![v.clone()]));
        }
        let mut kinds: Vec<IterKind> = items
            .iter()
            .map(|(axis, _, c)| {
                // Repeated coordinates (a non-unique axis) would write one element twice.
                let unique = self.d.prog.axes[*axis].unique;
                if unique && !c.is_empty() && c.iter().all(|v| lhs_vars.contains(v)) {
                    IterKind::Spatial
                } else {
                    IterKind::Reduction
                }
            })
            .collect();
        self.demote(&items, &mut kinds, &lhs_vars, &logical);
        let store = match driver {
            Some(dr) if dr.tensor == out => driver_vars.iter().map(|v| Expr::Var(*v)).collect(),
            _ => self.access_indices(out, &s.lhs, &logical)?,
        };
        let ctx = ValueCtx {
            logical: &logical,
            driver: driver.map(|d| (d, driver_vars.as_slice())),
            float: checked.ast.tensors[out].dtype.is_float(),
        };
        let value = self.value(term, &ctx)?;
        let axes = items
            .iter()
            .zip(kinds)
            .map(|((axis, var, _), kind)| IterAxis {
                axis: *axis,
                kind,
                var: *var,
            })
            .collect();
        Ok(Nest { axes, store, value })
    }

    /// Makes spatial axes reductions where parallel spatial points could write the same
    /// output element: under a reduction parent, or feeding an output index together
    /// with a reduction axis.
    fn demote(
        &self,
        items: &[(AxisId, IterVarId, Vec<String>)],
        kinds: &mut [IterKind],
        lhs_vars: &[String],
        logical: &HashMap<String, Expr>,
    ) {
        loop {
            let mut changed = false;
            for v in lhs_vars {
                let mut used = Vec::new();
                logical[v].visit(&mut |e| {
                    if let Expr::Var(id) = e {
                        used.push(*id);
                    }
                });
                let pos: Vec<usize> = (0..items.len())
                    .filter(|&p| used.contains(&items[p].1))
                    .collect();
                if pos.iter().any(|&p| kinds[p] == IterKind::Reduction) {
                    for p in pos {
                        changed |= kinds[p] == IterKind::Spatial;
                        kinds[p] = IterKind::Reduction;
                    }
                }
            }
            for p in 0..items.len() {
                if kinds[p] != IterKind::Spatial {
                    continue;
                }
                if let Some(parent) = self.d.prog.axes[items[p].0].parent {
                    let under_reduction = items
                        .iter()
                        .zip(kinds.iter())
                        .any(|(it, k)| it.0 == parent && *k == IterKind::Reduction);
                    if under_reduction {
                        kinds[p] = IterKind::Reduction;
                        changed = true;
                    }
                }
            }
            if !changed {
                return;
            }
        }
    }

    /// The axis coordinates of tensor `t` read as `access`, through its `from_logical` map.
    fn access_indices(
        &self,
        t: usize,
        access: &Access,
        logical: &HashMap<String, Expr>,
    ) -> Result<Vec<Expr>, NotationError> {
        let checked = self.checked;
        let mut idx = Vec::new();
        for ix in &access.indices {
            idx.push(match ix {
                Index::Var { name, .. } => logical[name].clone(),
                Index::Indirect(inner) => {
                    let (it, _) = checked.ast.tensor(&inner.tensor).expect("checked");
                    Expr::load(self.buffers[it], self.access_indices(it, inner, logical)?)
                }
            });
        }
        let decl = &checked.ast.tensors[t];
        checked.layouts[t]
            .from_logical
            .iter()
            .map(|m| {
                m.as_ref()
                    .and_then(|m| {
                        map_expr(m, &|_| None, &|d| Some(idx[d].clone()), &|k| {
                            self.d.dim_expr(t, k)
                        })
                    })
                    .ok_or_else(|| NotationError::NotRandomAccess {
                        tensor: decl.name.clone(),
                        format: decl.format.to_string(),
                        span: access.span,
                    })
            })
            .collect()
    }

    fn value(&self, e: &ast::Expr, ctx: &ValueCtx<'_>) -> Result<Expr, NotationError> {
        Ok(match e {
            ast::Expr::Access(a) => {
                let (t, _) = self.checked.ast.tensor(&a.tensor).expect("checked");
                let direct = ctx.driver.filter(|(dr, _)| {
                    self.axes[t] == self.axes[dr.tensor]
                        && a.indices.len() == dr.access.indices.len()
                        && a.indices
                            .iter()
                            .zip(&dr.access.indices)
                            .all(|(x, y)| x.as_var().is_some() && x.as_var() == y.as_var())
                });
                let indices = match direct {
                    Some((_, vars)) => vars.iter().map(|v| Expr::Var(*v)).collect(),
                    None => self.access_indices(t, a, ctx.logical)?,
                };
                Expr::load(self.buffers[t], indices)
            }
            ast::Expr::Int { value, .. } if ctx.float => Expr::Float(*value as f64),
            ast::Expr::Int { value, .. } => Expr::Int(*value),
            ast::Expr::Float { value, .. } => Expr::Float(*value),
            ast::Expr::Unary {
                op: UnaryOp::Neg,
                arg,
                ..
            } if !ctx.float => Expr::binary(BinaryOp::Sub, Expr::Int(0), self.value(arg, ctx)?),
            ast::Expr::Unary { op, arg, .. } => Expr::unary(*op, self.value(arg, ctx)?),
            ast::Expr::Binary { op, lhs, rhs, .. } => {
                Expr::binary(*op, self.value(lhs, ctx)?, self.value(rhs, ctx)?)
            }
        })
    }

    /// Whether an `init` block can zero the output: the spatial axes are exactly the
    /// output's axes and the store writes their iterators directly.
    fn init_ok(&self, nest: &Nest, out: usize) -> bool {
        let out_axes = &self.axes[out];
        let spatial: Vec<&IterAxis> = nest
            .axes
            .iter()
            .filter(|a| a.kind == IterKind::Spatial)
            .collect();
        if spatial.len() != out_axes.len() {
            return false;
        }
        let same_axis = |a: AxisId, b: AxisId| {
            a == b
                || (self.d.shared_dim_of(a).is_some()
                    && self.d.shared_dim_of(a) == self.d.shared_dim_of(b))
        };
        let mut seen = Vec::new();
        nest.store.iter().zip(out_axes).all(|(e, &oa)| match e {
            Expr::Var(v) => {
                let fresh = !seen.contains(v);
                seen.push(*v);
                fresh
                    && spatial
                        .iter()
                        .any(|ia| ia.var == *v && same_axis(ia.axis, oa))
            }
            _ => false,
        })
    }

    fn zero(&self, out: usize) -> Expr {
        if self.checked.ast.tensors[out].dtype.is_float() {
            Expr::Float(0.0)
        } else {
            Expr::Int(0)
        }
    }

    /// Emits an iteration `<X>_<what>` over the output's own axes that stores `value`
    /// everywhere.
    fn fill(&mut self, si: usize, out: usize, value: Expr, what: &str) {
        let checked = self.checked;
        let s = &checked.ast.statements[si];
        let layout = &checked.layouts[out];
        let taken = self.d.taken_by_params();
        let mut local: HashSet<String> = s
            .lhs
            .indices
            .iter()
            .filter_map(|ix| ix.as_var().map(str::to_string))
            .collect();
        local.extend(taken.iter().cloned());
        let mut axes: Vec<IterAxis> = Vec::new();
        for (a, spec) in layout.axes.iter().enumerate() {
            let mut axis = self.axes[out][a];
            if axes.iter().any(|ia| ia.axis == axis) {
                if let Some(dim) = self.d.shared_dim_of(axis) {
                    let used: Vec<AxisId> = axes.iter().map(|ia| ia.axis).collect();
                    axis = self.d.unused_shared_axis(&dim, &used);
                }
            }
            let name = match exact_dim(layout, a).or_else(|| {
                layout
                    .to_logical
                    .iter()
                    .position(|m| *m == MapExpr::Axis(a))
            }) {
                Some(d) => match s.lhs.indices[d].as_var() {
                    Some(v) if !taken.contains(v) => v.to_string(),
                    Some(v) => local_fresh(&mut local, v),
                    None => local_fresh(&mut local, &spec.name.to_lowercase()),
                },
                None => local_fresh(&mut local, &spec.name.to_lowercase()),
            };
            let var = self.d.prog.vars.push(IterVar { name, axis });
            axes.push(IterAxis {
                axis,
                kind: IterKind::Spatial,
                var,
            });
        }
        let store = Store {
            buffer: self.buffers[out],
            indices: axes.iter().map(|ia| Expr::Var(ia.var)).collect(),
            value,
            span: s.span,
        };
        let name = self.fresh_iter(&format!("{}_{what}", s.lhs.tensor));
        self.d.prog.body.push(Stmt::Iteration(SparseIteration {
            name,
            axes,
            init: Vec::new(),
            body: vec![Stmt::Store(store)],
            span: s.span,
            fused: Vec::new(),
        }));
    }

    fn emit(&mut self, si: usize, out: usize, nest: Nest, init: bool, acc: bool, negate: bool) {
        let buffer = self.buffers[out];
        let value = if acc {
            let op = if negate { BinaryOp::Sub } else { BinaryOp::Add };
            Expr::binary(
                op,
                Expr::load(buffer, nest.store.clone()),
                nest.value.clone(),
            )
        } else if negate && !self.checked.ast.tensors[out].dtype.is_float() {
            Expr::binary(BinaryOp::Sub, Expr::Int(0), nest.value.clone())
        } else if negate {
            Expr::unary(UnaryOp::Neg, nest.value.clone())
        } else {
            nest.value.clone()
        };
        let init = init.then(|| self.zero(out));
        self.push_iteration(si, nest, init, value);
    }

    /// Appends the iteration of statement `si` over `nest` storing `value`, with an `init`
    /// store of `init` when given.
    fn push_iteration(&mut self, si: usize, nest: Nest, init: Option<Expr>, value: Expr) {
        let s = &self.checked.ast.statements[si];
        let out = self.checked.statements[si].output;
        let buffer = self.buffers[out];
        let init = match init {
            Some(value) => vec![Stmt::Store(Store {
                buffer,
                indices: nest.store.clone(),
                value,
                span: s.span,
            })],
            None => Vec::new(),
        };
        let body = vec![Stmt::Store(Store {
            buffer,
            indices: nest.store,
            value,
            span: s.span,
        })];
        let name = self.fresh_iter(&Decls::buffer_name(&s.lhs.tensor));
        self.d.prog.body.push(Stmt::Iteration(SparseIteration {
            name,
            axes: nest.axes,
            init,
            body,
            span: s.span,
            fused: Vec::new(),
        }));
    }
}

struct ValueCtx<'a> {
    logical: &'a HashMap<String, Expr>,
    driver: Option<(Driver<'a>, &'a [IterVarId])>,
    float: bool,
}

fn local_fresh(local: &mut HashSet<String>, base: &str) -> String {
    let mut name = base.to_string();
    let mut k = 2;
    while local.contains(&name) {
        name = format!("{base}{k}");
        k += 1;
    }
    local.insert(name.clone());
    name
}

/// Splits a sum into its terms, each with whether it is subtracted.
fn split_terms<'a>(e: &'a ast::Expr, negate: bool, out: &mut Vec<(&'a ast::Expr, bool)>) {
    match e {
        ast::Expr::Binary {
            op: BinaryOp::Add,
            lhs,
            rhs,
            ..
        } => {
            split_terms(lhs, negate, out);
            split_terms(rhs, negate, out);
        }
        ast::Expr::Binary {
            op: BinaryOp::Sub,
            lhs,
            rhs,
            ..
        } => {
            split_terms(lhs, negate, out);
            split_terms(rhs, !negate, out);
        }
        ast::Expr::Unary {
            op: UnaryOp::Neg,
            arg,
            ..
        } => split_terms(arg, !negate, out),
        _ => out.push((e, negate)),
    }
}

/// The accesses that multiply a whole term (through `*`, the numerator of `/`, and `-`).
fn factors<'a>(e: &'a ast::Expr, out: &mut Vec<&'a Access>) {
    match e {
        ast::Expr::Binary {
            op: BinaryOp::Mul,
            lhs,
            rhs,
            ..
        } => {
            factors(lhs, out);
            factors(rhs, out);
        }
        ast::Expr::Binary {
            op: BinaryOp::Div,
            lhs,
            ..
        } => factors(lhs, out),
        ast::Expr::Unary {
            op: UnaryOp::Neg,
            arg,
            ..
        } => factors(arg, out),
        ast::Expr::Access(a) => out.push(a),
        _ => {}
    }
}

fn access_text(a: &Access) -> String {
    let idx: Vec<String> = a
        .indices
        .iter()
        .map(|ix| match ix {
            Index::Var { name, .. } => name.clone(),
            Index::Indirect(inner) => access_text(inner),
        })
        .collect();
    format!("{}[{}]", a.tensor, idx.join(", "))
}
