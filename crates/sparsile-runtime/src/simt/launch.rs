//! Running one launch: its shape ([`launch_shape`]), its grid evaluated from the
//! parameters, and its blocks one at a time in a seeded random order.
//!
//! The grid's `x` extent is the sum of the extents `hi - lo` of the loops bound to
//! `blockIdx.x` (a negative extent counts as 0; no such loop: 1), each loop taking the
//! next range of block numbers; `y` and `z` are the extents of their loops (1 without).

use rand::Rng;
use std::collections::HashSet;

use sparsile_ir::loops::gpu::{MAX_GRID_X, MAX_GRID_YZ, MAX_SHARED_BYTES};
use sparsile_ir::loops::{launch_shape, Expr, For, ForKind, Func, GpuAxis, GpuDim, Stmt};
use sparsile_ir::{BufferId, ParamId, Span, VarId};

use super::error::{Fault, SimtError, ThreadRef};
use super::exec::Sim;
use super::state::{Block, Space};
use crate::flat_interp::eval::{Evaluator, Scalar};
use crate::flat_interp::memory::Mem;
use crate::FlatInterpError;

/// Grids with at most this many blocks are shuffled; larger ones run in the order of a
/// seeded affine permutation (no table of block numbers is allocated).
const SHUFFLED_BLOCKS: u64 = 1 << 20;

/// A loop bound to `blockIdx.x` and its range of block numbers.
#[derive(Debug)]
struct Part<'f> {
    lp: &'f For,
    first: i64,
    extent: i64,
}

/// The geometry of the running launch.
#[derive(Debug, Default)]
pub(super) struct Launch<'f> {
    pub name: &'f str,
    /// Threads per block along `x`, `y`, `z`.
    pub dims: [i64; 3],
    /// Blocks along `x`, `y`, `z`.
    pub grid: [i64; 3],
    parts: Vec<Part<'f>>,
}

impl Launch<'_> {
    /// The first block number and the extent of the block-bound loop `l`.
    pub fn range_of(&self, l: &For, dim: GpuDim) -> Option<(i64, i64)> {
        match dim {
            GpuDim::X => self
                .parts
                .iter()
                .find(|p| std::ptr::eq(p.lp, l))
                .map(|p| (p.first, p.extent)),
            GpuDim::Y | GpuDim::Z => Some((0, self.grid[dim.index()])),
        }
    }

    /// Thread `thread` (its number in the block) of block `block` (its number in the
    /// grid).
    pub fn thread_ref(&self, block: u64, thread: usize) -> ThreadRef {
        ThreadRef {
            block: small(unflatten(block as i64, self.grid)),
            thread: small(unflatten(thread as i64, self.dims)),
        }
    }
}

/// Coordinates of a block or thread for messages (they fit: see [`ThreadRef`]).
pub(super) fn small(coords: [i64; 3]) -> [u32; 3] {
    coords.map(|c| c as u32)
}

/// The coordinates of number `n` in a box of `dims` (`n = x + dx * (y + dy * z)`).
fn unflatten(n: i64, dims: [i64; 3]) -> [i64; 3] {
    let (dx, dy) = (dims[0].max(1), dims[1].max(1));
    [n % dx, n / dx % dy, n / (dx * dy)]
}

impl<'f> Sim<'f, '_> {
    /// Runs launch `name` (at `span`) with body `body`.
    pub fn run_launch(
        &mut self,
        name: &'f str,
        body: &'f [Stmt],
        span: Span,
    ) -> Result<(), SimtError> {
        let shape = launch_shape(body).map_err(|e| SimtError::Shape {
            launch: name.to_string(),
            message: e.message,
            at: if e.span == Span::default() {
                span
            } else {
                e.span
            },
        })?;
        let mut x_loops = Vec::new();
        grid_loops(body, &mut x_loops);
        if x_loops.len() != shape.grid_x.len()
            || x_loops
                .iter()
                .zip(&shape.grid_x)
                .any(|(l, p)| l.var != p.var)
        {
            return Err(SimtError::Misplaced {
                what: format!(
                    "launch `{name}`: the loops bound to `blockIdx.x` do not form its grid"
                ),
                at: span,
            });
        }
        let grid_err = |e: Fault| match e {
            Fault::Flat(source) => SimtError::Grid {
                launch: name.to_string(),
                source: Box::new(source),
            },
            Fault::Simt(e) => *e,
        };
        let mut parts = Vec::new();
        let mut x: i64 = 0;
        for l in x_loops {
            let extent = self.extent(name, &l.lo, &l.hi, l.span).map_err(grid_err)?;
            parts.push(Part {
                lp: l,
                first: x,
                extent,
            });
            x = x.saturating_add(extent);
        }
        if parts.is_empty() {
            x = 1;
        }
        let mut grid = [x, 1, 1];
        for (k, bounds) in shape.grid_yz.iter().enumerate() {
            if let Some((lo, hi)) = bounds {
                grid[k + 1] = self.extent(name, lo, hi, span).map_err(grid_err)?;
            }
        }
        for (dim, max) in [
            (GpuDim::X, MAX_GRID_X),
            (GpuDim::Y, MAX_GRID_YZ),
            (GpuDim::Z, MAX_GRID_YZ),
        ] {
            let extent = grid[dim.index()];
            if extent > max {
                return Err(SimtError::GridTooLarge {
                    launch: name.to_string(),
                    dim: dim.name(),
                    extent,
                    max,
                });
            }
        }
        self.launch = Launch {
            name,
            dims: shape.block,
            grid,
            parts,
        };
        let used = self.used_buffers(name, body)?;
        self.shadow.get_mut().start_launch();
        // At most 2^31 * 2^16 * 2^16 blocks: fits.
        let count = grid.iter().map(|&g| g as u64).product::<u64>();
        if count == 0 {
            return Ok(());
        }
        self.block = Block::new(
            self.func,
            &self.globals,
            &self.space,
            &used,
            shape.block,
            name,
        )?;
        let order = BlockOrder::new(&mut self.rng, count);
        let everyone: Vec<usize> = (0..self.block.threads.len()).collect();
        for i in 0..count {
            let number = order.get(i);
            self.block.start(number, unflatten(number as i64, grid));
            self.shadow.get_mut().start_block();
            self.run(body, &everyone)?;
        }
        Ok(())
    }

    /// The buffers `body` loads, stores or prefetches, once the shared ones it loads or
    /// stores are checked to fit `MAX_SHARED_BYTES` (the rule the verifier checks).
    fn used_buffers(&self, launch: &str, body: &[Stmt]) -> Result<HashSet<BufferId>, SimtError> {
        let mut used = Stmt::loaded_buffers(body);
        used.extend(Stmt::stored_buffers(body));
        let bytes = used
            .iter()
            .filter(|&&id| matches!(self.space[id], Space::Shared(_)))
            .map(|&id| {
                let dtype = self.func.buffers[id].dtype;
                self.globals[id]
                    .data
                    .len()
                    .saturating_mul(dtype.size_bytes())
            })
            .fold(0usize, usize::saturating_add);
        if bytes > MAX_SHARED_BYTES {
            return Err(SimtError::SharedMemoryTooLarge {
                launch: launch.to_string(),
                bytes,
                max: MAX_SHARED_BYTES,
            });
        }
        Stmt::visit_all(body, &mut |s| {
            if let Stmt::Prefetch { buffer, .. } = s {
                used.insert(*buffer);
            }
        });
        Ok(used)
    }

    /// `max(hi - lo, 0)`, both evaluated outside any thread.
    fn extent(&self, launch: &str, lo: &Expr, hi: &Expr, at: Span) -> Result<i64, Fault> {
        let view = GridView {
            sim: self,
            launch,
            at,
        };
        let lo = view.eval_int(lo, || "the start of a block-bound loop".to_string())?;
        let hi = view.eval_int(hi, || "the end of a block-bound loop".to_string())?;
        let extent = hi
            .checked_sub(lo)
            .ok_or_else(|| FlatInterpError::IntArithmetic {
                op: "-".to_string(),
                lhs: hi,
                rhs: lo,
                at,
            })?;
        Ok(extent.max(0))
    }
}

/// The loops bound to `blockIdx.x` that make up the grid, found the way
/// [`launch_shape`] finds them: at the top of the launch (through blocks), and nested
/// alone in block-bound loops.
fn grid_loops<'f>(body: &'f [Stmt], out: &mut Vec<&'f For>) {
    fn nest<'f>(l: &'f For, out: &mut Vec<&'f For>) {
        if l.kind == ForKind::Bound(GpuAxis::Block(GpuDim::X)) {
            out.push(l);
        }
        if let [Stmt::For(inner)] = l.body.as_slice() {
            if matches!(inner.kind, ForKind::Bound(GpuAxis::Block(_))) {
                nest(inner, out);
            }
        }
    }
    for s in body {
        match s {
            Stmt::Block { body, .. } => grid_loops(body, out),
            Stmt::For(l) if matches!(l.kind, ForKind::Bound(GpuAxis::Block(_))) => nest(l, out),
            _ => {}
        }
    }
}

/// The order blocks run in: a seeded shuffle, or a seeded affine permutation
/// `i -> (a * i + b) mod n` (with `a` prime to `n`) for very large grids.
enum BlockOrder {
    Shuffled(Vec<u64>),
    Affine { a: u64, b: u64, n: u64 },
}

impl BlockOrder {
    fn new(rng: &mut impl Rng, n: u64) -> BlockOrder {
        if n <= SHUFFLED_BLOCKS {
            let mut v: Vec<u64> = (0..n).collect();
            rand::seq::SliceRandom::shuffle(v.as_mut_slice(), rng);
            return BlockOrder::Shuffled(v);
        }
        let mut a = 1;
        for _ in 0..64 {
            let candidate = rng.random_range(1..n);
            if gcd(candidate, n) == 1 {
                a = candidate;
                break;
            }
        }
        BlockOrder::Affine {
            a,
            b: rng.random_range(0..n),
            n,
        }
    }

    fn get(&self, i: u64) -> u64 {
        match self {
            BlockOrder::Shuffled(v) => v[i as usize],
            BlockOrder::Affine { a, b, n } => {
                ((u128::from(*a) * u128::from(i) + u128::from(*b)) % u128::from(*n)) as u64
            }
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Evaluation outside any thread (grid extents): parameters, literals and integer input
/// arrays ([`sparsile_ir::loops::grid_readable`]).
struct GridView<'s, 'f, 'i> {
    sim: &'s Sim<'f, 'i>,
    launch: &'s str,
    at: Span,
}

impl<'i> Evaluator<'i> for GridView<'_, '_, 'i> {
    type Error = Fault;

    fn func(&self) -> &Func {
        self.sim.func
    }

    fn at(&self) -> Span {
        self.at
    }

    fn var_value(&self, _var: VarId) -> Option<Scalar> {
        None
    }

    fn param(&self, param: ParamId) -> i64 {
        self.sim.params[param]
    }

    fn mem(&self, buffer: BufferId) -> &Mem<'i> {
        &self.sim.globals[buffer]
    }

    /// Grid extents read parameters, literals and integer input arrays.
    fn loaded(&self, buffer: BufferId, _offset: usize) -> Result<(), Fault> {
        let b = &self.sim.func.buffers[buffer];
        if b.role == sparsile_ir::coord::BufferRole::Input && b.dtype.is_int() {
            return Ok(());
        }
        Err(SimtError::Misplaced {
            what: format!(
                "the grid of launch `{}` reads buffer `{}` (block-bound loops have bounds over parameters, literals and integer input arrays only)",
                self.launch, b.name
            ),
            at: self.at,
        }
        .into())
    }

    fn searched(&self, buffer: BufferId, lo: usize, _hi: usize) -> Result<(), Fault> {
        self.loaded(buffer, lo)
    }
}
