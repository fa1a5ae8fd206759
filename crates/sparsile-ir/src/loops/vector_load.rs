//! The reads of a `vectorized` loop that vector loads can serve: the CUDA backend emits
//! them as `float2`/`float4`/`double2` loads, and the SIMT interpreter checks at run time
//! that the elements they start at are multiples of the vector width.
//!
//! In a loop `for v in lo..hi vectorized` of constant extent `E` (2 or 4,
//! [`VECTOR_EXTENTS`]), a read `B[idx]` of a global `f32` or `f64` buffer is a vector
//! load ([`VectorLoad`]) when
//! - it is evaluated in every iteration: in the value of a `let`, assignment or store at
//!   the top of the loop body (not under an `if`, a `select` or a logic operator, nor in
//!   another read's index), so reading all `E` elements first reads nothing the loop would
//!   not read;
//! - the body writes nothing to `B` (stores, atomic adds, `mma`s);
//! - `idx`, with the body's `let`s substituted, is `base + v` (coefficient 1 on `v`), and
//!   reads no local the body assigns and no buffer the body writes (`base` is evaluated
//!   before the first iteration);
//! - `base` (at `v = lo`) is a provable multiple of the vector width `W` (`E` for f32,
//!   2 for f64): a literal multiple, a sum or difference of multiples, or a product with
//!   a multiple as a factor (`i * 32 + c_o * 4` for `W = 4`). A param is not a known
//!   multiple; `specialize` turns a width param into a literal.
//!
//! ```
//! use sparsile_ir::loops::{vector_loads, Func, Stmt};
//! let f: Func = "\
//! flat func dot(m) {
//!   buffer X: f32[m * 8] input values
//!   buffer y: f32[m] output values
//!   launch main {
//!     for i in 0..m bind(blockIdx.x) {
//!       for l in 0..2 bind(threadIdx.x) {
//!         let s: f32 = 0.0
//!         for v in 0..4 vectorized {
//!           s = s + X[i * 8 + l * 4 + v]
//!         }
//!         if l == 0 {
//!           y[i] = s
//!         }
//!       }
//!     }
//!   }
//! }
//! ".parse().unwrap();
//! let mut found = Vec::new();
//! Stmt::visit_all(&f.body, &mut |s| {
//!     if let Stmt::For(l) = s {
//!         found.extend(vector_loads(&f, l));
//!     }
//! });
//! assert_eq!(found.len(), 1);
//! assert_eq!((found[0].width, found[0].bytes()), (4, 16));
//! ```

use std::collections::{HashMap, HashSet};

use super::{constant_extent, BufferKind, Expr, For, ForKind, Func, Stmt};
use crate::coord::BinaryOp;
use crate::{BufferId, DType, VarId};

/// The extents of the `vectorized` loops whose reads can be vector loads.
pub const VECTOR_EXTENTS: [i64; 2] = [2, 4];

/// One read of a `vectorized` loop's body served by vector loads.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorLoad {
    pub buffer: BufferId,
    /// The index as the body writes it.
    pub index: Expr,
    /// The element offset of the first iteration's element (a multiple of `width`).
    pub base: Expr,
    /// Elements per vector load (the loop's extent is a multiple of it).
    pub width: usize,
    pub dtype: DType,
}

impl VectorLoad {
    /// The alignment one load needs, in bytes.
    pub fn bytes(&self) -> usize {
        self.width * self.dtype.size_bytes()
    }
}

/// The reads of `f` (a `vectorized` loop of an extent in [`VECTOR_EXTENTS`]; nothing
/// otherwise) that vector loads can serve, in the order the body reads them, each once.
pub fn vector_loads(func: &Func, f: &For) -> Vec<VectorLoad> {
    let Some(extent) = constant_extent(f).filter(|e| VECTOR_EXTENTS.contains(e)) else {
        return Vec::new();
    };
    if f.kind != ForKind::Vectorized {
        return Vec::new();
    }
    let extent_u = extent as usize;
    let stored = Stmt::stored_buffers(&f.body);
    let assigned: HashSet<VarId> = Stmt::assigned_vars(&f.body).into_iter().collect();
    let mut lets: HashMap<VarId, Expr> = HashMap::new();
    let mut out: Vec<VectorLoad> = Vec::new();
    for s in &f.body {
        let mut reads = Vec::new();
        match s {
            Stmt::Let { value, .. } | Stmt::Assign { value, .. } => {
                unconditional_loads(value, &mut reads)
            }
            Stmt::Store { indices, value, .. } => {
                unconditional_loads(value, &mut reads);
                indices
                    .iter()
                    .for_each(|i| unconditional_loads(i, &mut reads));
            }
            _ => {}
        }
        for (buffer, index) in reads {
            if out.iter().any(|r| r.buffer == buffer && r.index == *index)
                || stored.contains(&buffer)
            {
                continue;
            }
            let Some(b) = func.buffers.get(buffer) else {
                continue;
            };
            if matches!(b.kind, BufferKind::Shared | BufferKind::Local) {
                continue;
            }
            let width = match b.dtype {
                DType::F32 => extent_u,
                DType::F64 => 2,
                _ => continue,
            };
            let full = index.substitute(&mut |v| lets.get(&v).cloned());
            if reads_any(&full, &assigned)
                || loads_any(&full, &stored)
                || coefficient(&full, f.var) != Some(1)
            {
                continue;
            }
            let base = without_zeros(&full.substitute(&mut |v| (v == f.var).then(|| f.lo.clone())));
            if !multiple_of(&base, width as i64) {
                continue;
            }
            out.push(VectorLoad {
                buffer,
                index: index.clone(),
                base,
                width,
                dtype: b.dtype,
            });
        }
        if let Stmt::Let { var, value, .. } = s {
            if !assigned.contains(var) {
                let full = value.substitute(&mut |v| lets.get(&v).cloned());
                lets.insert(*var, full);
            }
        }
    }
    out
}

/// `e` without additions and subtractions of 0 (the first iteration's `+ 0`).
fn without_zeros(e: &Expr) -> Expr {
    match e {
        Expr::Binary { op, lhs, rhs } => {
            let (l, r) = (without_zeros(lhs), without_zeros(rhs));
            match (op, &l, &r) {
                (BinaryOp::Add | BinaryOp::Sub, x, Expr::Int(0)) => x.clone(),
                (BinaryOp::Add, Expr::Int(0), x) => x.clone(),
                _ => Expr::binary(*op, l, r),
            }
        }
        _ => e.clone(),
    }
}

/// The loads `e` evaluates whenever it is evaluated: not under a `select` or a logic
/// operator, and not inside another load's index.
fn unconditional_loads<'e>(e: &'e Expr, out: &mut Vec<(BufferId, &'e Expr)>) {
    match e {
        Expr::Load { buffer, indices } => {
            if let [index] = indices.as_slice() {
                out.push((*buffer, index));
            }
        }
        Expr::Unary { arg, .. } => unconditional_loads(arg, out),
        Expr::Binary { lhs, rhs, .. } | Expr::Cmp { lhs, rhs, .. } => {
            unconditional_loads(lhs, out);
            unconditional_loads(rhs, out);
        }
        _ => {}
    }
}

/// Whether `e` reads one of `vars`.
pub(super) fn reads_any(e: &Expr, vars: &HashSet<VarId>) -> bool {
    let mut found = false;
    e.visit(&mut |x| found |= matches!(x, Expr::Var(v) if vars.contains(v)));
    found
}

/// Whether `e` loads (or searches) one of `buffers`.
pub(super) fn loads_any(e: &Expr, buffers: &HashSet<BufferId>) -> bool {
    let mut found = false;
    e.visit(&mut |x| {
        found |= matches!(x, Expr::Load { buffer, .. } | Expr::Search { buffer, .. } if buffers.contains(buffer))
    });
    found
}

/// The coefficient of `var` in `e` when `e` is `c · var + (terms without var)`.
pub fn coefficient(e: &Expr, var: VarId) -> Option<i64> {
    if !e.reads_var(var) {
        return Some(0);
    }
    match e {
        Expr::Var(v) if *v == var => Some(1),
        Expr::Binary { op, lhs, rhs } => match op {
            BinaryOp::Add => coefficient(lhs, var)?.checked_add(coefficient(rhs, var)?),
            BinaryOp::Sub => coefficient(lhs, var)?.checked_sub(coefficient(rhs, var)?),
            BinaryOp::Mul => match (lhs.as_ref(), rhs.as_ref()) {
                (Expr::Int(n), x) | (x, Expr::Int(n)) => coefficient(x, var)?.checked_mul(*n),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// Whether `e` is a multiple of `n` whatever its variables' values: a literal multiple,
/// a sum or difference of multiples, a product with a multiple as a factor.
pub fn multiple_of(e: &Expr, n: i64) -> bool {
    match e {
        Expr::Int(k) => n != 0 && k % n == 0,
        Expr::Binary { op, lhs, rhs } => match op {
            BinaryOp::Add | BinaryOp::Sub => multiple_of(lhs, n) && multiple_of(rhs, n),
            BinaryOp::Mul => multiple_of(lhs, n) || multiple_of(rhs, n),
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{coefficient, multiple_of, vector_loads};
    use crate::coord::BinaryOp;
    use crate::loops::{Expr, Func, Stmt};
    use crate::{ParamId, VarId};

    fn bin(op: BinaryOp, a: Expr, b: Expr) -> Expr {
        Expr::binary(op, a, b)
    }

    #[test]
    fn coefficients_of_affine_indices() {
        let (v, i) = (VarId(0), VarId(1));
        let var = Expr::Var;
        // i * 32 + (c * 4 + v) with c = 3: coefficient 1.
        let idx = bin(
            BinaryOp::Add,
            bin(BinaryOp::Mul, var(i), Expr::Int(32)),
            bin(
                BinaryOp::Add,
                bin(BinaryOp::Mul, Expr::Int(3), Expr::Int(4)),
                var(v),
            ),
        );
        assert_eq!(coefficient(&idx, v), Some(1));
        assert_eq!(coefficient(&idx, i), Some(32));
        assert_eq!(
            coefficient(&bin(BinaryOp::Sub, Expr::Int(7), var(v)), v),
            Some(-1)
        );
        assert_eq!(
            coefficient(&bin(BinaryOp::Mul, var(v), Expr::Int(2)), v),
            Some(2)
        );
        // Not affine in v: a product of variables, a division, a read at v.
        assert_eq!(coefficient(&bin(BinaryOp::Mul, var(v), var(i)), v), None);
        assert_eq!(
            coefficient(&bin(BinaryOp::Div, var(v), Expr::Int(2)), v),
            None
        );
        assert_eq!(
            coefficient(&Expr::load(crate::BufferId(0), vec![var(v)]), v),
            None
        );
        assert_eq!(coefficient(&var(i), v), Some(0));
    }

    #[test]
    fn provable_multiples() {
        let i = Expr::Var(VarId(1));
        let k = Expr::Param(ParamId(0));
        let times = |e: Expr, n: i64| bin(BinaryOp::Mul, e, Expr::Int(n));
        assert!(multiple_of(&times(i.clone(), 32), 4));
        assert!(multiple_of(
            &bin(BinaryOp::Sub, times(i.clone(), 8), Expr::Int(-12)),
            4
        ));
        assert!(!multiple_of(&times(i.clone(), 6), 4));
        assert!(!multiple_of(&times(k.clone(), 1), 2));
        assert!(!multiple_of(
            &bin(BinaryOp::Add, times(i.clone(), 4), Expr::Int(2)),
            4
        ));
        assert!(!multiple_of(
            &bin(BinaryOp::Div, times(i, 8), Expr::Int(2)),
            4
        ));
        assert!(!multiple_of(&k, 0));
    }

    /// A read whose index goes through a buffer the loop writes is not a vector load:
    /// its base would be read before the writes.
    #[test]
    fn reads_through_written_buffers_stay_scalar() {
        let text = |index: &str| {
            format!(
                "flat func f(m) {{
  buffer X: f32[m * 8] input values
  buffer J: i32[m] output values
  launch main {{
    for i in 0..m bind(blockIdx.x) {{
      for l in 0..2 bind(threadIdx.x) {{
        if l == 0 {{
          let s: f32 = 0.0
          for v in 0..4 vectorized {{
            let c: idx = {index}
            s = s + X[c + v]
            J[i] = 0
          }}
        }}
      }}
    }}
  }}
}}
"
            )
        };
        let count = |src: &str| {
            let f: Func = src.parse().unwrap_or_else(|e| panic!("{e}"));
            let mut n = 0;
            Stmt::visit_all(&f.body, &mut |s| {
                if let Stmt::For(l) = s {
                    n += vector_loads(&f, l).len();
                }
            });
            n
        };
        assert_eq!(count(&text("i * 8")), 1);
        assert_eq!(count(&text("J[i] * 8")), 0);
    }
}
