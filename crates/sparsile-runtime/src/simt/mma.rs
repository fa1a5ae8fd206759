//! `mma`: a warp's matrix multiply-accumulate on tiles ([`sparsile_ir::loops::mma`]).
//!
//! Every warp with an active thread must have all 32 lanes, all active (the errors of
//! warp reductions: [`SimtError::PartialWarp`], [`SimtError::WarpDivergence`]), and the
//! variables the statement reads (other than its tile variables) must have the same value
//! in every lane ([`SimtError::MmaNotUniform`]). Then, per warp:
//! 1. each element of the left operand's `M × K` tile and of the right operand's `K × N`
//!    tile is evaluated by the lane that holds it in the PTX fragment layout
//!    ([`fragment_owner`]): its loads are that lane's accesses (race and poison checks
//!    included), and its value is rounded to the operand type (f16, bf16: to nearest
//!    even; tf32: to f32, then to 10 mantissa bits, ties away from zero);
//! 2. each position (`row`, `col`) of the accumulator's tile is handled by the lane that
//!    holds it: the guard is evaluated, and where it holds the element is located (in
//!    bounds), loaded, and its new value `old + Σ a·b` computed in f64;
//!    two positions naming one element are [`SimtError::MmaAccumulatorOverlap`];
//! 3. the new values are stored (rounded to f32 by the store), each by its lane.
//!
//! All reads happen before any write.

use std::collections::HashMap;

use sparsile_ir::loops::gpu::WARP_SIZE;
use sparsile_ir::loops::{fragment_owner, Expr, Mma, MmaOperand, MmaType};
use sparsile_ir::{DType, VarId};

use super::error::{describe_lanes, AccessKind, Dim3, SimtError};
use super::exec::Sim;
use super::launch::small;
use crate::flat_interp::eval::{Evaluator, Scalar};
use crate::flat_interp::exec::Local;
use crate::flat_interp::memory::round_to;

const LANES: usize = WARP_SIZE as usize;

/// `v` rounded to the operand type of an `mma`.
pub(crate) fn round_operand(v: f64, ty: MmaType) -> f64 {
    match ty {
        MmaType::F16 => round_to(v, DType::F16),
        MmaType::BF16 => round_to(v, DType::BF16),
        MmaType::TF32 => {
            let x = v as f32;
            if !x.is_finite() {
                return f64::from(x);
            }
            // Add half of the last kept bit's weight to the magnitude, then drop the 13
            // low bits: round to nearest, ties away from zero (a carry into the
            // exponent rounds up to the next binade, or to infinity).
            let bits = (x.to_bits() + 0x1000) & !0x1fff;
            f64::from(f32::from_bits(bits))
        }
    }
}

impl<'f> Sim<'f, '_> {
    /// Runs `m` with the threads of `mask` (see the module docs).
    pub fn mma(&mut self, m: &'f Mma, mask: &[usize]) -> Result<(), SimtError> {
        let what = format!("`mma {} {}`", m.shape, m.ty);
        let threads = self.block.threads.len();
        let mut warps: Vec<usize> = mask.iter().map(|&t| t / LANES).collect();
        warps.dedup();
        for &w in &warps {
            let existing = threads.saturating_sub(w * LANES).min(LANES);
            if existing < LANES {
                return Err(SimtError::PartialWarp {
                    launch: self.launch.name.to_string(),
                    block: Dim3(small(self.block.coords)),
                    warp: w as u32,
                    what,
                    at: m.span,
                    threads,
                    lanes: existing,
                });
            }
            let inactive: Vec<u32> = (0..LANES as u32)
                .filter(|&l| !mask.contains(&(w * LANES + l as usize)))
                .collect();
            if !inactive.is_empty() {
                return Err(SimtError::WarpDivergence {
                    launch: self.launch.name.to_string(),
                    block: Dim3(small(self.block.coords)),
                    warp: w as u32,
                    what,
                    at: m.span,
                    inactive: describe_lanes(&inactive),
                });
            }
        }
        for w in warps {
            self.uniform(m, w)?;
            self.warp_mma(m, w * LANES)?;
        }
        Ok(())
    }

    /// Checks that the variables `m` reads have one value across warp `w`.
    fn uniform(&self, m: &Mma, w: usize) -> Result<(), SimtError> {
        let tiles = m.tile_vars();
        let mut vars: Vec<VarId> = Vec::new();
        for e in m.exprs() {
            e.visit(&mut |x| {
                if let Expr::Var(v) = x {
                    if !tiles.contains(v) && !vars.contains(v) {
                        vars.push(*v);
                    }
                }
            });
        }
        let first = w * LANES;
        let value = |t: usize, v: VarId| {
            self.block.threads[t].vars[v].map(|l| match l.value {
                Scalar::Int(i) => (0, i as u64),
                Scalar::Float(x) => (1, x.to_bits()),
            })
        };
        for v in vars {
            let expected = value(first, v);
            if let Some(lane) = (1..LANES).find(|&l| value(first + l, v) != expected) {
                return Err(SimtError::MmaNotUniform {
                    launch: self.launch.name.to_string(),
                    block: Dim3(small(self.block.coords)),
                    warp: w as u32,
                    at: m.span,
                    var: self.func.vars[v].name.clone(),
                    lane: lane as u32,
                });
            }
        }
        Ok(())
    }

    /// Gives thread `t` the tile variables' values `(var, value)`.
    fn set_tile(&mut self, t: usize, values: &[(VarId, u32)]) {
        for &(v, x) in values {
            self.block.threads[t].vars[v] = Some(Local {
                value: Scalar::Int(i64::from(x)),
                is_loop: true,
                depth: 0,
            });
        }
    }

    /// The tile of operand `which` (`M × K` for A, `K × N` for B), row-major, each element
    /// evaluated by its lane of the warp starting at thread `first`.
    fn operand(
        &mut self,
        m: &'f Mma,
        first: usize,
        which: MmaOperand,
    ) -> Result<Vec<f64>, SimtError> {
        let (rows, cols) = which.dims(m.shape);
        let (expr, row_var, col_var) = match which {
            MmaOperand::A => (&m.a, m.row, m.depth),
            _ => (&m.b, m.depth, m.col),
        };
        let mut tile = Vec::with_capacity((rows * cols) as usize);
        for r in 0..rows {
            for c in 0..cols {
                let t = first + fragment_owner(m.ty, which, r, c) as usize;
                self.set_tile(t, &[(row_var, r), (col_var, c)]);
                let v = self.view(t, m.span).eval(expr);
                let v = self.ok(t, v)?;
                tile.push(round_operand(v.as_f64(), m.ty));
            }
        }
        Ok(tile)
    }

    /// One warp's `mma` (the warp's lanes are threads `first..first + 32`).
    fn warp_mma(&mut self, m: &'f Mma, first: usize) -> Result<(), SimtError> {
        let saved: Vec<(usize, VarId, Option<Local>)> = (first..first + LANES)
            .flat_map(|t| m.tile_vars().map(|v| (t, v, self.block.threads[t].vars[v])))
            .collect();
        let result = self.warp_mma_inner(m, first);
        for (t, v, old) in saved {
            self.block.threads[t].vars[v] = old;
        }
        result
    }

    fn warp_mma_inner(&mut self, m: &'f Mma, first: usize) -> Result<(), SimtError> {
        let a = self.operand(m, first, MmaOperand::A)?;
        let b = self.operand(m, first, MmaOperand::B)?;
        let (rows, cols, depth) = (m.shape.m(), m.shape.n(), m.shape.k());
        let mut writes: Vec<(usize, usize, f64)> = Vec::new();
        let mut positions: HashMap<usize, (u32, u32)> = HashMap::new();
        for r in 0..rows {
            for c in 0..cols {
                let t = first + fragment_owner(m.ty, MmaOperand::C, r, c) as usize;
                self.set_tile(t, &[(m.row, r), (m.col, c)]);
                let view = self.view(t, m.span);
                let located = match &m.guard {
                    Some(g) => view
                        .eval_int(g, || "the guard of an `mma`".to_string())
                        .map(|holds| holds != 0),
                    None => Ok(true),
                }
                .and_then(|holds| {
                    if !holds {
                        return Ok(None);
                    }
                    let offset = view.offset(m.c, &m.c_indices, "mma")?;
                    let old = view.eval(&Expr::Load {
                        buffer: m.c,
                        indices: m.c_indices.clone(),
                    })?;
                    Ok(Some((offset, old)))
                });
                let Some((offset, old)) = self.ok(t, located)? else {
                    continue;
                };
                if let Some(&(r0, c0)) = positions.get(&offset) {
                    return Err(SimtError::MmaAccumulatorOverlap {
                        launch: self.launch.name.to_string(),
                        block: Dim3(small(self.block.coords)),
                        warp: (first / LANES) as u32,
                        at: m.span,
                        buffer: self.func.buffers[m.c].name.clone(),
                        offset,
                        first: (r0, c0),
                        second: (r, c),
                    });
                }
                positions.insert(offset, (r, c));
                let sum: f64 = (0..depth)
                    .map(|p| a[(r * depth + p) as usize] * b[(p * cols + c) as usize])
                    .sum();
                writes.push((t, offset, old.as_f64() + sum));
            }
        }
        for (t, offset, value) in writes {
            self.write(
                t,
                m.c,
                offset,
                Scalar::Float(value),
                AccessKind::Store,
                m.span,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tf32_rounds_to_nearest_ties_away_from_zero() {
        let tf32 = |x: f32| round_operand(f64::from(x), MmaType::TF32) as f32;
        assert_eq!(tf32(1.0), 1.0);
        // 1 + 2^-10 is a tf32 value; 1 + 2^-11 is halfway to it: away from zero.
        assert_eq!(tf32(1.0 + 2f32.powi(-10)), 1.0 + 2f32.powi(-10));
        assert_eq!(tf32(1.0 + 2f32.powi(-11)), 1.0 + 2f32.powi(-10));
        assert_eq!(tf32(-(1.0 + 2f32.powi(-11))), -(1.0 + 2f32.powi(-10)));
        assert_eq!(tf32(1.0 + 2f32.powi(-12)), 1.0);
        assert_eq!(tf32(f32::MAX), f32::INFINITY);
        assert!(tf32(f32::NAN).is_nan());
        assert_eq!(round_operand(1.0 + 2f64.powi(-11), MmaType::F16), 1.0);
        assert_eq!(
            round_operand(1.0 + 2f64.powi(-7), MmaType::BF16),
            1.0 + 2f64.powi(-7)
        );
    }
}
