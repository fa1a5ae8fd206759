//! Declarations of a lowered program: parameters for symbolic sizes, axes from each
//! tensor's [`Layout`], and buffers.
//!
//! Each layout axis becomes an axis `T_X` (tensor name, axis suffix), except dense-fixed
//! axes that stand for exactly one logical dimension: those are shared between tensors by
//! dimension size and named `I_<dim>` (so the row axis of a CSR `A: [m, n]` and of a dense
//! `C: [m, k]` are both `I_m`). Lengths that are a dimension or a constant become
//! `Extent::Param` / `Extent::Const`; derived lengths (`ceil(m / 4)`) and run-time counts
//! (nnz, an ELL width chosen by the data) become fresh parameters (`A_IO_len`, `nnz_A`).

use std::collections::{HashMap, HashSet};

use sparsile_formats::{Layout, MapExpr, SizeSpec};
use sparsile_ir::coord::parser::{is_valid_name, RESERVED};
use sparsile_ir::coord::{AxisDecl, AxisStructure, Expr, Extent, Param, Program};
use sparsile_ir::{AxisId, AxisKind, IndexType, ParamId};

use super::ast::Dim;
use super::typecheck::Checked;

/// How the axes of a computed sparse output relate to its operands' axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Combine {
    Union,
    Intersect,
}

/// The program under construction and its name tables.
pub(super) struct Decls<'c> {
    pub checked: &'c Checked,
    pub prog: Program,
    names: HashSet<String>,
    dim_params: HashMap<String, ParamId>,
    /// Shared dense axes by size; later entries are copies used when one iteration
    /// needs the same size twice.
    shared: HashMap<Dim, Vec<AxisId>>,
}

impl<'c> Decls<'c> {
    pub fn new(checked: &'c Checked, name: &str) -> Decls<'c> {
        let mut d = Decls {
            checked,
            prog: Program::new(name),
            names: HashSet::new(),
            dim_params: HashMap::new(),
            shared: HashMap::new(),
        };
        d.names.extend(RESERVED.iter().map(|s| s.to_string()));
        for t in &checked.ast.tensors {
            d.names.insert(t.name.clone());
        }
        for t in &checked.ast.tensors {
            for dim in &t.dims {
                if let Dim::Named(n) = dim {
                    if !d.dim_params.contains_key(n) {
                        let name = if is_valid_name(n) {
                            n.clone()
                        } else {
                            d.fresh(&format!("{n}_"))
                        };
                        d.names.insert(name.clone());
                        let id = d.prog.params.push(Param { name });
                        d.dim_params.insert(n.clone(), id);
                    }
                }
            }
        }
        d
    }

    /// The buffer name for a tensor name (reserved words of the text IR get a `_`).
    pub fn buffer_name(name: &str) -> String {
        if is_valid_name(name) {
            name.to_string()
        } else {
            format!("{name}_")
        }
    }

    /// Names an iterator variable may not take: parameters and reserved words.
    pub fn taken_by_params(&self) -> HashSet<String> {
        let mut set: HashSet<String> = self.prog.params.values().map(|p| p.name.clone()).collect();
        set.extend(RESERVED.iter().map(|s| s.to_string()));
        set
    }

    /// A program-wide unique name starting with `base`.
    pub fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 2;
        while self.names.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.names.insert(name.clone());
        name
    }

    fn fresh_param(&mut self, base: &str) -> Extent {
        let name = self.fresh(base);
        Extent::Param(self.prog.params.push(Param { name }))
    }

    fn dim_extent(&self, dim: &Dim) -> Extent {
        match dim {
            Dim::Named(n) => Extent::Param(self.dim_params[n]),
            Dim::Const(c) => Extent::Const(*c),
        }
    }

    /// Dimension `d` of tensor `t` as an index expression.
    pub fn dim_expr(&self, t: usize, d: usize) -> Expr {
        match self.dim_extent(&self.checked.ast.tensors[t].dims[d]) {
            Extent::Param(p) => Expr::Param(p),
            Extent::Const(c) => Expr::Int(c),
        }
    }

    /// The extent of a size expression over tensor `t`'s dims; a fresh parameter named
    /// `fallback` when it is neither a dimension nor computable from constants.
    fn extent(&mut self, t: usize, m: &MapExpr, fallback: &str) -> Extent {
        let checked: &'c Checked = self.checked;
        let dims = &checked.ast.tensors[t].dims;
        match m {
            MapExpr::Dim(d) => self.dim_extent(&dims[*d]),
            MapExpr::Const(c) => Extent::Const(*c),
            _ => {
                let shape: Option<Vec<usize>> = dims
                    .iter()
                    .map(|d| match d {
                        Dim::Const(c) => Some(*c as usize),
                        Dim::Named(_) => None,
                    })
                    .collect();
                match shape.and_then(|s| m.eval(&[], &[], &s)) {
                    Some(v) => Extent::Const(v),
                    None => self.fresh_param(fallback),
                }
            }
        }
    }

    /// The `copy`-th shared dense axis of size `dim`.
    pub fn shared_axis(&mut self, dim: &Dim, copy: usize) -> AxisId {
        while self.shared.get(dim).map_or(0, Vec::len) <= copy {
            let name = self.fresh(&format!("I_{dim}"));
            let id = self
                .prog
                .axes
                .push(AxisDecl::dense_fixed(name, self.dim_extent(dim)));
            self.shared.entry(dim.clone()).or_default().push(id);
        }
        self.shared[dim][copy]
    }

    /// A shared dense axis of size `dim` not in `used`.
    pub fn unused_shared_axis(&mut self, dim: &Dim, used: &[AxisId]) -> AxisId {
        let mut copy = 0;
        loop {
            let a = self.shared_axis(dim, copy);
            if !used.contains(&a) {
                return a;
            }
            copy += 1;
        }
    }

    /// Whether `id` is a shared dense axis, and its size.
    pub fn shared_dim_of(&self, id: AxisId) -> Option<Dim> {
        self.shared
            .iter()
            .find(|(_, ids)| ids.contains(&id))
            .map(|(d, _)| d.clone())
    }

    /// Declares the axes of tensor `t`. With `computed`, non-dense axes get their
    /// structure as the union or intersection of the same axis of each listed operand.
    pub fn declare_axes(
        &mut self,
        t: usize,
        computed: Option<(Combine, &[Vec<AxisId>])>,
    ) -> Vec<AxisId> {
        let checked: &'c Checked = self.checked;
        let decl = &checked.ast.tensors[t];
        let layout: &Layout = &checked.layouts[t];
        let tname = decl.name.clone();
        let span = decl.span;
        // Only formats with padding slots store the sentinel coordinate (= length).
        let pads = decl.format.stores_sentinel();
        let needs_count = |s: &sparsile_formats::AxisSpec| {
            s.kind.is_variable()
                || (computed.is_some() && s.kind == AxisKind::SparseFixed)
                || (s.parent.is_none() && s.nnz_per_parent == Some(SizeSpec::Runtime))
        };
        let counted = layout.axes.iter().filter(|s| needs_count(s)).count();
        let mut ids: Vec<AxisId> = Vec::new();
        for (a, spec) in layout.axes.iter().enumerate() {
            if let Some(d) = exact_dim(layout, a) {
                let dim = decl.dims[d].clone();
                ids.push(self.shared_axis(&dim, 0));
                continue;
            }
            let name = self.fresh(&format!("{tname}_{}", spec.name));
            let length = self.extent(t, &spec.length, &format!("{tname}_{}_len", spec.name));
            let count_name = if counted == 1 {
                format!("nnz_{tname}")
            } else {
                format!("nnz_{tname}_{}", spec.name)
            };
            let nnz = spec
                .kind
                .is_variable()
                .then(|| self.fresh_param(&count_name));
            let nnz_per_parent = if spec.kind != AxisKind::SparseFixed {
                None
            } else if computed.is_some() || spec.nnz_per_parent == Some(SizeSpec::Runtime) {
                Some(if spec.parent.is_none() {
                    self.fresh_param(&count_name)
                } else {
                    self.fresh_param(&format!("{tname}_{}_width", spec.name))
                })
            } else if let Some(SizeSpec::Expr(m)) = &spec.nnz_per_parent {
                Some(self.extent(t, m, &format!("{tname}_{}_width", spec.name)))
            } else {
                None
            };
            let structure = match computed {
                Some((how, operands)) if spec.kind != AxisKind::DenseFixed => {
                    let list = operands.iter().map(|axes| axes[a]).collect();
                    match how {
                        Combine::Union => AxisStructure::Union(list),
                        Combine::Intersect => AxisStructure::Intersect(list),
                    }
                }
                _ => AxisStructure::Bound,
            };
            let id = self.prog.axes.push(AxisDecl {
                name,
                kind: spec.kind,
                parent: spec.parent.map(|p| ids[p]),
                length,
                nnz,
                nnz_per_parent,
                index_type: IndexType::I32,
                unique: spec.unique,
                padded: spec.kind.is_sparse() && pads,
                structure,
                span,
            });
            ids.push(id);
        }
        ids
    }
}

/// The logical dimension that layout axis `a` is exactly (a parentless dense-fixed axis
/// whose coordinate is that dimension's and whose length is that dimension's size).
pub(super) fn exact_dim(layout: &Layout, a: usize) -> Option<usize> {
    let spec = &layout.axes[a];
    if spec.kind != AxisKind::DenseFixed || spec.parent.is_some() {
        return None;
    }
    layout
        .to_logical
        .iter()
        .position(|m| *m == MapExpr::Axis(a))
        .filter(|&d| spec.length == MapExpr::Dim(d))
}

/// Translates a layout map into an index expression. `axis`, `logical` and `dim` give
/// the expressions for `MapExpr::Axis`, `Logical` and `Dim`; `None` if one is missing.
pub(super) fn map_expr(
    m: &MapExpr,
    axis: &dyn Fn(usize) -> Option<Expr>,
    logical: &dyn Fn(usize) -> Option<Expr>,
    dim: &dyn Fn(usize) -> Expr,
) -> Option<Expr> {
    use sparsile_ir::coord::BinaryOp as B;
    let two = |op: B, a: &MapExpr, b: &MapExpr| -> Option<Expr> {
        Some(Expr::binary(
            op,
            map_expr(a, axis, logical, dim)?,
            map_expr(b, axis, logical, dim)?,
        ))
    };
    match m {
        MapExpr::Axis(a) => axis(*a),
        MapExpr::Logical(d) => logical(*d),
        MapExpr::Dim(d) => Some(dim(*d)),
        MapExpr::Const(c) => Some(Expr::Int(*c)),
        MapExpr::Add(a, b) => two(B::Add, a, b),
        MapExpr::Sub(a, b) => two(B::Sub, a, b),
        MapExpr::Mul(a, b) => two(B::Mul, a, b),
        MapExpr::Div(a, b) => two(B::Div, a, b),
        MapExpr::Rem(a, b) => two(B::Rem, a, b),
    }
}

/// Whether the map mentions axis `a`.
pub(super) fn mentions_axis(m: &MapExpr, a: usize) -> bool {
    match m {
        MapExpr::Axis(x) => *x == a,
        MapExpr::Logical(_) | MapExpr::Dim(_) | MapExpr::Const(_) => false,
        MapExpr::Add(x, y)
        | MapExpr::Sub(x, y)
        | MapExpr::Mul(x, y)
        | MapExpr::Div(x, y)
        | MapExpr::Rem(x, y) => mentions_axis(x, a) || mentions_axis(y, a),
    }
}
