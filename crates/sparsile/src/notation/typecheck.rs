//! Name resolution, shape and type checking of a parsed program.
//!
//! Preconditions: none (any parsed program). Postconditions of a successful [`check`]:
//! every tensor is declared once with a format that can hold its order; every access
//! names a declared tensor with the right number of indices; every index variable ranges
//! over one dimension size within its statement; value types agree with the output's
//! element type (or are f16/bf16 values assigned to an f32 or f64 output: computed in
//! f64 like every value, rounded once when stored); indirect indices read integer tensors; outputs are assigned (`=`) before
//! they are read or accumulated into (`+=`), and no statement reads its own output; the
//! output of `max=`/`min=` is dense with a floating-point type. A tensor declared with
//! no dimensions (`tensor s: f64[]`) is a dense scalar.
//!
//! ```
//! use sparsile::notation::{check, parse, NotationError};
//! let ast = parse("tensor A: f32[m, n]\ntensor x: f32[m]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n").unwrap();
//! let err = check(&ast).unwrap_err();
//! assert!(matches!(err, NotationError::DimMismatch { .. }));
//! assert_eq!((err.span().line, err.span().col), (4, 19));
//! ```

use std::collections::BTreeMap;

use sparsile_formats::{Format, Layout};
use sparsile_ir::coord::UnaryOp;
use sparsile_ir::{AxisKind, DType, Span};

use super::ast::{Access, AssignOp, Dim, Expr, Index, Program};
use super::NotationError;

/// A program that passed [`check`], with what lowering needs.
#[derive(Debug, Clone)]
pub struct Checked {
    pub ast: Program,
    /// The layout of each tensor, in declaration order.
    pub layouts: Vec<Layout>,
    /// Whether each tensor is assigned by some statement.
    pub is_output: Vec<bool>,
    pub statements: Vec<CheckedStatement>,
}

impl Checked {
    /// Whether tensor `t` has a non-dense axis (so it has a sparsity pattern).
    pub fn is_sparse(&self, t: usize) -> bool {
        self.layouts[t]
            .axes
            .iter()
            .any(|a| a.kind != sparsile_ir::AxisKind::DenseFixed)
    }
}

/// Per-statement facts.
#[derive(Debug, Clone)]
pub struct CheckedStatement {
    /// The index of the assigned tensor.
    pub output: usize,
    /// The dimension size each index variable ranges over.
    pub var_dims: BTreeMap<String, Dim>,
}

/// Checks `ast` (see the module docs).
pub fn check(ast: &Program) -> Result<Checked, NotationError> {
    let mut layouts = Vec::new();
    for (k, t) in ast.tensors.iter().enumerate() {
        if let Some(first) = ast.tensors[..k].iter().find(|o| o.name == t.name) {
            return Err(NotationError::DuplicateTensor {
                name: t.name.clone(),
                first: first.span,
                span: t.span,
            });
        }
        let unsupported = || NotationError::UnsupportedOrder {
            tensor: t.name.clone(),
            format: t.format.to_string(),
            ndim: t.dims.len(),
            span: t.format_span,
        };
        let layout = match (t.dims.len(), &t.format) {
            // A scalar: one element, no axes.
            (0, Format::Dense) => Layout {
                axes: Vec::new(),
                to_logical: Vec::new(),
                from_logical: Vec::new(),
            },
            (0, _) => return Err(unsupported()),
            (n, f) => f.layout(n).map_err(|_| unsupported())?,
        };
        layouts.push(layout);
    }
    let mut is_output = vec![false; ast.tensors.len()];
    for s in &ast.statements {
        if let Some((k, _)) = ast.tensor(&s.lhs.tensor) {
            is_output[k] = true;
        }
    }
    let mut assigned = vec![false; ast.tensors.len()];
    let mut statements = Vec::new();
    for s in &ast.statements {
        let mut var_dims: BTreeMap<String, (Dim, Span)> = BTreeMap::new();
        let (out, out_decl) = resolve(ast, &s.lhs, &mut var_dims)?;
        for ix in &s.lhs.indices {
            if let Index::Indirect(a) = ix {
                let mut result = Ok(());
                a.visit(&mut |inner| {
                    if result.is_ok() {
                        result = read_check(ast, inner, out, &is_output, &assigned);
                    }
                });
                result?;
            }
        }
        if s.op == AssignOp::Accumulate && !assigned[out] {
            return Err(NotationError::AccumulateBeforeAssign {
                tensor: out_decl.name.clone(),
                span: s.lhs.span,
            });
        }
        let mut result = Ok(());
        s.rhs.visit_accesses(&mut |a| {
            if result.is_err() {
                return;
            }
            result = resolve(ast, a, &mut var_dims)
                .and_then(|_| read_check(ast, a, out, &is_output, &assigned));
        });
        result?;
        let rhs_vars = s.rhs.vars();
        for ix in &s.lhs.indices {
            if let Index::Var { name, span } = ix {
                if !rhs_vars.contains(name) {
                    return Err(NotationError::UnboundOutputIndex {
                        var: name.clone(),
                        span: *span,
                    });
                }
            }
        }
        let ty = value_type(ast, &s.rhs)?;
        let dtype = out_decl.dtype;
        if s.op.extremum().is_some() {
            let refuse = |reason: &str| NotationError::UnsupportedReduction {
                op: s.op.symbol(),
                tensor: out_decl.name.clone(),
                reason: reason.to_string(),
                span: s.lhs.span,
            };
            if !dtype.is_float() {
                return Err(refuse(
                    "the output must have a floating-point type (its identity is an infinity)",
                ));
            }
            if layouts[out]
                .axes
                .iter()
                .any(|a| a.kind != AxisKind::DenseFixed)
            {
                return Err(refuse("the output must be dense"));
            }
        }
        let ok = match ty {
            // Half-precision values widen exactly into f32 and f64 outputs (mixed
            // precision: f16 operands, f32 results).
            ValueType::Of(d) => {
                d == dtype || (is_half(d) && matches!(dtype, DType::F32 | DType::F64))
            }
            ValueType::AnyFloat => dtype.is_float(),
            ValueType::AnyInt => true,
        };
        if !ok {
            return Err(NotationError::DTypeMismatch {
                expected: format!("{dtype} (the type of `{}`)", out_decl.name),
                found: ty.describe(),
                span: s.rhs.span(),
            });
        }
        assigned[out] = true;
        statements.push(CheckedStatement {
            output: out,
            var_dims: var_dims.into_iter().map(|(k, (d, _))| (k, d)).collect(),
        });
    }
    Ok(Checked {
        ast: ast.clone(),
        layouts,
        is_output,
        statements,
    })
}

/// Checks that a read of `a` in the statement assigning `out` reads an input or an
/// output assigned before, not `out` itself.
fn read_check(
    ast: &Program,
    a: &Access,
    out: usize,
    is_output: &[bool],
    assigned: &[bool],
) -> Result<(), NotationError> {
    let (k, _) = ast.tensor(&a.tensor).expect("resolved before");
    if k == out {
        return Err(NotationError::ReadsOwnOutput {
            tensor: a.tensor.clone(),
            span: a.span,
        });
    }
    if is_output[k] && !assigned[k] {
        return Err(NotationError::ReadBeforeAssign {
            tensor: a.tensor.clone(),
            span: a.span,
        });
    }
    Ok(())
}

/// Resolves the tensor of `a`, checks its index count and records variable dims
/// (including those of indirect accesses inside it).
fn resolve<'p>(
    ast: &'p Program,
    a: &Access,
    var_dims: &mut BTreeMap<String, (Dim, Span)>,
) -> Result<(usize, &'p super::ast::TensorDecl), NotationError> {
    let (k, decl) = ast
        .tensor(&a.tensor)
        .ok_or_else(|| NotationError::UnknownTensor {
            name: a.tensor.clone(),
            span: a.span,
        })?;
    if a.indices.len() != decl.dims.len() {
        return Err(NotationError::IndexCount {
            tensor: a.tensor.clone(),
            expected: decl.dims.len(),
            found: a.indices.len(),
            span: a.span,
        });
    }
    for (p, ix) in a.indices.iter().enumerate() {
        match ix {
            Index::Var { name, span } => {
                if a.indices[..p].iter().any(|o| o.as_var() == Some(name)) {
                    return Err(NotationError::RepeatedIndex {
                        var: name.clone(),
                        tensor: a.tensor.clone(),
                        span: *span,
                    });
                }
                let dim = &decl.dims[p];
                match var_dims.get(name) {
                    Some((d, first_span)) if d != dim => {
                        return Err(NotationError::DimMismatch {
                            var: name.clone(),
                            first: d.to_string(),
                            first_span: *first_span,
                            second: dim.to_string(),
                            span: *span,
                        })
                    }
                    Some(_) => {}
                    None => {
                        var_dims.insert(name.clone(), (dim.clone(), *span));
                    }
                }
            }
            Index::Indirect(inner) => {
                let (_, idecl) = resolve(ast, inner, var_dims)?;
                if !idecl.dtype.is_int() {
                    return Err(NotationError::IndexNotInteger {
                        tensor: inner.tensor.clone(),
                        dtype: idecl.dtype.to_string(),
                        span: inner.span,
                    });
                }
            }
        }
    }
    Ok((k, decl))
}

/// The type of a value expression: a tensor's element type, or an untyped literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueType {
    AnyInt,
    AnyFloat,
    Of(DType),
}

impl ValueType {
    fn describe(self) -> String {
        match self {
            ValueType::AnyInt => "an integer constant".into(),
            ValueType::AnyFloat => "a floating-point constant".into(),
            ValueType::Of(d) => d.to_string(),
        }
    }

    fn unify(self, other: ValueType, span: Span) -> Result<ValueType, NotationError> {
        use ValueType::*;
        let mismatch = |a: ValueType, b: ValueType| NotationError::DTypeMismatch {
            expected: a.describe(),
            found: b.describe(),
            span,
        };
        match (self, other) {
            (Of(a), Of(b)) if a == b => Ok(Of(a)),
            (Of(_), Of(_)) => Err(mismatch(self, other)),
            (Of(a), AnyInt) | (AnyInt, Of(a)) => Ok(Of(a)),
            (Of(a), AnyFloat) | (AnyFloat, Of(a)) if a.is_float() => Ok(Of(a)),
            (Of(_), AnyFloat) => Err(mismatch(self, other)),
            (AnyFloat, Of(_)) => Err(mismatch(other, self)),
            (AnyInt, AnyInt) => Ok(AnyInt),
            _ => Ok(AnyFloat),
        }
    }
}

fn is_half(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16)
}

fn value_type(ast: &Program, e: &Expr) -> Result<ValueType, NotationError> {
    Ok(match e {
        Expr::Access(a) => match ast.tensor(&a.tensor) {
            Some((_, d)) => ValueType::Of(d.dtype),
            None => unreachable!("accesses are resolved before value types"),
        },
        Expr::Int { .. } => ValueType::AnyInt,
        Expr::Float { .. } => ValueType::AnyFloat,
        Expr::Unary { op, arg, span } => {
            let t = value_type(ast, arg)?;
            // Integer values only negate (by `-` or `neg`); functions need floats.
            if *op != UnaryOp::Neg {
                if let ValueType::Of(d) = t {
                    if d.is_int() {
                        return Err(NotationError::DTypeMismatch {
                            expected: format!("a floating-point argument of `{}`", op.name()),
                            found: d.to_string(),
                            span: *span,
                        });
                    }
                }
            }
            t
        }
        Expr::Binary { lhs, rhs, span, .. } => {
            value_type(ast, lhs)?.unify(value_type(ast, rhs)?, *span)?
        }
    })
}
