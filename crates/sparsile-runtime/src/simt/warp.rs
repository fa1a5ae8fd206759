//! Barriers and warp reductions.
//!
//! - `sync_threads` needs the whole block active; it starts a new block epoch.
//! - `sync_warp` needs, in every warp with an active thread, every thread of that warp
//!   active; it starts a new epoch of each such warp.
//! - A warp reduction needs, in every warp with an active thread, all 32 lanes active
//!   (a short last warp is an error). Lanes are grouped in aligned runs of `lanes`; each
//!   lane gets the sum, max or min of its group, exactly in i64 when every value of the
//!   group is an integer, in f64 otherwise. The segmented sum needs keys that do not
//!   decrease along each group and gives each lane the sum from itself to the last lane
//!   of its group with the same key. Reductions are not barriers: they order no memory
//!   access.

use sparsile_ir::loops::gpu::{WARP_SEGMENT_SUM, WARP_SIZE};
use sparsile_ir::loops::{BarrierScope, Expr, VarType, WarpOp};
use sparsile_ir::{Span, VarId};

use super::error::{describe_lanes, Dim3, SimtError};
use super::exec::{Saved, Sim};
use super::launch::small;
use crate::flat_interp::eval::{Evaluator, Scalar};
use crate::FlatInterpError;

const LANES: usize = WARP_SIZE as usize;

/// A `WarpReduce` statement.
pub(super) struct Reduction<'f> {
    pub var: VarId,
    pub op: WarpOp,
    pub value: &'f Expr,
    pub key: Option<&'f Expr>,
    pub lanes: u32,
    pub at: Span,
}

impl Reduction<'_> {
    fn what(&self) -> String {
        match self.key {
            Some(_) => format!("`{WARP_SEGMENT_SUM}`"),
            None => format!("`{}`", self.op.function()),
        }
    }
}

impl<'f> Sim<'f, '_> {
    pub fn barrier(
        &mut self,
        scope: BarrierScope,
        mask: &[usize],
        at: Span,
    ) -> Result<(), SimtError> {
        match scope {
            BarrierScope::Block => {
                let threads = self.block.threads.len();
                if mask.len() != threads {
                    let missing = (0..threads).find(|&t| mask.get(t) != Some(&t)).unwrap_or(0);
                    return Err(SimtError::BarrierDivergence {
                        launch: self.launch.name.to_string(),
                        block: Dim3(small(self.block.coords)),
                        at,
                        reached: mask.len(),
                        threads,
                        missing: Dim3(small(self.block.threads[missing].coords)),
                    });
                }
                self.block.epoch += 1;
            }
            BarrierScope::Warp => {
                let warps = self.warps(mask);
                for (w, active) in &warps {
                    let inactive = self.inactive_lanes(*w, active);
                    if !inactive.is_empty() {
                        return Err(SimtError::WarpDivergence {
                            launch: self.launch.name.to_string(),
                            block: Dim3(small(self.block.coords)),
                            warp: *w as u32,
                            what: format!("`{}`", scope.keyword()),
                            at,
                            inactive: describe_lanes(&inactive),
                        });
                    }
                }
                for (w, _) in warps {
                    self.block.warp_epochs[w] += 1;
                }
            }
        }
        Ok(())
    }

    /// The warps with an active thread, each with its active lanes (ascending).
    fn warps(&self, mask: &[usize]) -> Vec<(usize, Vec<u32>)> {
        let mut warps: Vec<(usize, Vec<u32>)> = Vec::new();
        for &t in mask {
            let (w, lane) = (t / LANES, (t % LANES) as u32);
            match warps.last_mut() {
                Some((last, lanes)) if *last == w => lanes.push(lane),
                _ => warps.push((w, vec![lane])),
            }
        }
        warps
    }

    /// The lanes of warp `w` that exist in the block but are not in `active`.
    fn inactive_lanes(&self, w: usize, active: &[u32]) -> Vec<u32> {
        let existing = self
            .block
            .threads
            .len()
            .saturating_sub(w * LANES)
            .min(LANES);
        (0..existing as u32)
            .filter(|l| !active.contains(l))
            .collect()
    }

    pub fn warp_reduce(
        &mut self,
        r: Reduction<'f>,
        mask: &[usize],
        saved: &mut Saved,
    ) -> Result<(), SimtError> {
        if !(1..=WARP_SIZE).contains(&r.lanes) || !r.lanes.is_power_of_two() {
            return Err(SimtError::InvalidLanes {
                launch: self.launch.name.to_string(),
                what: r.what(),
                lanes: r.lanes,
                at: r.at,
            });
        }
        let warps = self.warps(mask);
        let threads = self.block.threads.len();
        for (w, active) in &warps {
            let existing = threads.saturating_sub(w * LANES).min(LANES);
            if existing < LANES {
                return Err(SimtError::PartialWarp {
                    launch: self.launch.name.to_string(),
                    block: Dim3(small(self.block.coords)),
                    warp: *w as u32,
                    what: r.what(),
                    at: r.at,
                    threads,
                    lanes: existing,
                });
            }
            let inactive = self.inactive_lanes(*w, active);
            if !inactive.is_empty() {
                return Err(SimtError::WarpDivergence {
                    launch: self.launch.name.to_string(),
                    block: Dim3(small(self.block.coords)),
                    warp: *w as u32,
                    what: r.what(),
                    at: r.at,
                    inactive: describe_lanes(&inactive),
                });
            }
        }
        // Every warp of the mask is whole: the mask is runs of 32 consecutive threads.
        let mut values = vec![Scalar::Int(0); mask.len()];
        let mut keys = vec![0i64; mask.len()];
        for pos in self.order(mask.len()) {
            let t = mask[pos];
            let view = self.view(t, r.at);
            let v = view.eval(r.value).and_then(|v| {
                let k = match r.key {
                    Some(key) => {
                        view.eval_int(key, || format!("the key of a `{WARP_SEGMENT_SUM}`"))?
                    }
                    None => 0,
                };
                Ok((v, k))
            });
            (values[pos], keys[pos]) = self.ok(t, v)?;
        }
        let group = r.lanes as usize;
        let mut results = vec![Scalar::Int(0); mask.len()];
        for start in (0..mask.len()).step_by(group) {
            let end = start + group;
            let out = match r.key {
                Some(_) => self.segment_sums(&r, mask, &values, &keys, start, end)?,
                None => self.group_reduce(&r, mask[start], &values[start..end])?,
            };
            results[start..end].copy_from_slice(&out);
        }
        for (pos, &t) in mask.iter().enumerate() {
            let value = match (self.func.vars[r.var].ty, results[pos]) {
                (VarType::Index, Scalar::Int(i)) => Scalar::Int(i),
                (VarType::Index, Scalar::Float(_)) => {
                    let e = FlatInterpError::FloatWhereInt {
                        what: format!(
                            "the value of index variable `{}`",
                            self.func.vars[r.var].name
                        ),
                        at: r.at,
                    };
                    return Err(self.fail(t, e.into()));
                }
                (VarType::Value(_), v) => Scalar::Float(v.as_f64()),
            };
            self.declare(t, r.var, value, false, saved);
        }
        Ok(())
    }

    /// The sum, max or min of one group, for each of its lanes; `first` is the group's
    /// first thread (named by an overflow error).
    fn group_reduce(
        &self,
        r: &Reduction<'_>,
        first: usize,
        values: &[Scalar],
    ) -> Result<Vec<Scalar>, SimtError> {
        let op = r.op.binary();
        let ints: Option<Vec<i64>> = values
            .iter()
            .map(|v| match v {
                Scalar::Int(i) => Some(*i),
                Scalar::Float(_) => None,
            })
            .collect();
        let total = match ints {
            Some(ints) => {
                let mut acc = ints[0];
                for &x in &ints[1..] {
                    acc = op.apply_i64(acc, x).ok_or_else(|| {
                        let e = FlatInterpError::IntArithmetic {
                            op: op.symbol().to_string(),
                            lhs: acc,
                            rhs: x,
                            at: r.at,
                        };
                        self.fail(first, e.into())
                    })?;
                }
                Scalar::Int(acc)
            }
            None => Scalar::Float(
                values[1..]
                    .iter()
                    .fold(values[0].as_f64(), |acc, v| op.apply_f64(acc, v.as_f64())),
            ),
        };
        Ok(vec![total; values.len()])
    }

    /// `warp_segment_sum` over the group `start..end` of the mask's positions.
    fn segment_sums(
        &self,
        r: &Reduction<'_>,
        mask: &[usize],
        values: &[Scalar],
        keys: &[i64],
        start: usize,
        end: usize,
    ) -> Result<Vec<Scalar>, SimtError> {
        for p in start..end - 1 {
            if keys[p + 1] < keys[p] {
                return Err(SimtError::UnsortedSegmentKeys {
                    launch: self.launch.name.to_string(),
                    block: Dim3(small(self.block.coords)),
                    warp: (mask[p] / LANES) as u32,
                    at: r.at,
                    lane: (mask[p] % LANES) as u32,
                    key: keys[p],
                    next_key: keys[p + 1],
                    lanes: r.lanes,
                });
            }
        }
        let ints: Option<Vec<i64>> = values[start..end]
            .iter()
            .map(|v| match v {
                Scalar::Int(i) => Some(*i),
                Scalar::Float(_) => None,
            })
            .collect();
        let mut out = Vec::with_capacity(end - start);
        match ints {
            Some(ints) => {
                let mut acc = 0i64;
                for p in (0..ints.len()).rev() {
                    acc = if p + 1 < ints.len() && keys[start + p] == keys[start + p + 1] {
                        ints[p].checked_add(acc).ok_or_else(|| {
                            let e = FlatInterpError::IntArithmetic {
                                op: "+".to_string(),
                                lhs: ints[p],
                                rhs: acc,
                                at: r.at,
                            };
                            self.fail(mask[start + p], e.into())
                        })?
                    } else {
                        ints[p]
                    };
                    out.push(Scalar::Int(acc));
                }
            }
            None => {
                let mut acc = 0.0;
                for p in (start..end).rev() {
                    acc = if p + 1 < end && keys[p] == keys[p + 1] {
                        values[p].as_f64() + acc
                    } else {
                        values[p].as_f64()
                    };
                    out.push(Scalar::Float(acc));
                }
            }
        }
        out.reverse();
        Ok(out)
    }
}
