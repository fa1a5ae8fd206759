//! A warp's matrix multiply-accumulate on tiles (tensor cores): the `mma` statement
//! ([`Stmt::Mma`](super::Stmt::Mma), [`Mma`]).
//!
//! # Text form
//! ```text
//! mma SHAPE TYPE (ROW, COL, DEPTH) C[indices] += A_EXPR * B_EXPR [ if GUARD ]
//! ```
//! for example, one 16×16 block of a BSR matrix times 8 columns of a dense one:
//! ```text
//! mma m16n8k16 f16 (ii, kk, ji) C[(io * 16 + ii) * 64 + ko * 8 + kk] += A[jo_p * 256 + ii * 16 + ji] * B[(jo * 16 + ji) * 64 + ko * 8 + kk] if io * 16 + ii < n
//! ```
//! `SHAPE` is `m16n8k16`, `m16n8k8` or `m16n8k4` ([`MmaShape`]: `M × N` output tile,
//! depth `K`); `TYPE` the type the products take their operands in ([`MmaType`]: `f16`,
//! `bf16` or `tf32`). `ROW`, `COL` and `DEPTH` are three fresh index variables, the
//! *tile variables*, in scope only in this statement: `ROW` runs over `0..M`, `COL` over
//! `0..N`, `DEPTH` over `0..K`.
//!
//! # Semantics
//! The statement is a collective of the 32 lanes of a warp. Every lane of every warp that
//! reaches it reaches it together, all 32 lanes active (like a warp reduction; a launch
//! with an `mma` has whole warps), and the values its expressions take must be the same
//! in every lane (they may read variables bound to `threadIdx.y`, which are the same
//! across a warp when the block is 32 threads wide, but not one bound to
//! `threadIdx.x`). The warp then computes, for every `(ROW, COL)` of the `M × N` tile
//! where `GUARD` holds (every one when there is no guard):
//!
//! ```text
//! C[indices] = C[indices] + Σ_{DEPTH in 0..K} round(A_EXPR) · round(B_EXPR)
//! ```
//! - `A_EXPR` is the `M × K` tile of the left operand: a float expression of `ROW` and
//!   `DEPTH` (not `COL`); `B_EXPR` the `K × N` tile of the right operand, of `DEPTH` and
//!   `COL` (not `ROW`). Both are evaluated at *every* position of their tile, whatever
//!   the guard says, so they must be in bounds there (a `select` guards a load that
//!   might not be: `select(jo * 16 + ji < n, B[…], 0.0)`).
//! - `round` is the rounding of the value to `TYPE` (round to nearest even for f16 and
//!   bf16; round to nearest, ties away from zero, to 10 mantissa bits for tf32, as
//!   `cvt.rna.tf32.f32` does). A value loaded from a buffer of that type (or zero) is
//!   exact.
//! - `C[indices]`, a function of `ROW` and `COL` (not `DEPTH`), names distinct elements of
//!   an f32 buffer for distinct positions of the tile where the guard holds. The products
//!   are exact and their sum is taken in at least f32 precision, in any order, and added to
//!   the element once (the SIMT interpreter sums in f64 and rounds once to f32). Where the
//!   guard fails the element is neither read nor written. The guard is an integer
//!   expression of `ROW`, `COL` and the variables in scope (not `DEPTH`).
//! - All reads happen before any write. `C`'s buffer is global or `shared` memory (not
//!   `local`, not an input); the operands and the guard read neither `C`'s buffer nor a
//!   `local` buffer.
//!
//! # Which lane accesses what
//! The lanes hold the tiles in the PTX ISA's fragment layouts for `mma.sync.aligned`
//! with `.row.col` operands ([`fragment_element`]), with `g = lane / 4` and
//! `t = lane % 4`:
//!
//! | operand | f16 / bf16, m16n8k16 | f16 / bf16, m16n8k8 | tf32, m16n8k8 | tf32, m16n8k4 |
//! |---|---|---|---|---|
//! | A element `i` (row, depth) | `g + 8·((i/2)%2)`, `2t + i%2 + 8·(i/4)` (8) | `g + 8·(i/2)`, `2t + i%2` (4) | `g + 8·(i%2)`, `t + 4·(i/2)` (4) | `g + 8·i`, `t` (2) |
//! | B element `i` (depth, col) | `2t + i%2 + 8·(i/2)`, `g` (4) | `2t + i%2`, `g` (2) | `t + 4·i`, `g` (2) | `t`, `g` (1) |
//! | C element `i` (row, col) | `g + 8·(i/2)`, `2t + i%2` (4) | same | same | same |
//!
//! Each element of every tile is held by exactly one lane ([`fragment_owner`]): that
//! lane is the one that evaluates the element's operand expression (its loads are its
//! accesses) and that reads and writes the element of `C`. So a warp's consecutive `mma`s
//! on one `C` tile need no barrier between them, but another lane reading the tile
//! afterwards (or a lane having written an operand another lane reads) needs a
//! `sync_warp` in between, as on the hardware.
//!
//! ```
//! use sparsile_ir::loops::{fragment_element, fragment_owner, MmaOperand, MmaShape, MmaType};
//! // Lane 5 (g = 1, t = 1) holds A elements (1, 2), (1, 3), (9, 2), (9, 3), (1, 10), …
//! let a = |i| fragment_element(MmaShape::M16N8K16, MmaType::F16, MmaOperand::A, 5, i);
//! assert_eq!((a(0), a(1), a(2), a(4)), ((1, 2), (1, 3), (9, 2), (1, 10)));
//! assert_eq!(fragment_owner(MmaType::F16, MmaOperand::A, 9, 10), 5);
//! assert_eq!(fragment_owner(MmaType::TF32, MmaOperand::C, 9, 7), 7);
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use super::expr::Expr;
use crate::id::{BufferId, VarId};
use crate::Span;

/// The shape of one `mma`: an `M × N` output tile, depth `K`. Serialised as its text
/// (`"m16n8k16"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MmaShape {
    /// Text `m16n8k16`.
    M16N8K16,
    /// Text `m16n8k8`.
    M16N8K8,
    /// Text `m16n8k4`.
    M16N8K4,
}

impl MmaShape {
    pub const ALL: [MmaShape; 3] = [MmaShape::M16N8K16, MmaShape::M16N8K8, MmaShape::M16N8K4];

    pub fn m(self) -> u32 {
        16
    }

    pub fn n(self) -> u32 {
        8
    }

    pub fn k(self) -> u32 {
        match self {
            MmaShape::M16N8K16 => 16,
            MmaShape::M16N8K8 => 8,
            MmaShape::M16N8K4 => 4,
        }
    }

    /// `m16n8k16`, `m16n8k8`, `m16n8k4` (also the PTX shape qualifier without its `.`).
    pub fn name(self) -> &'static str {
        match self {
            MmaShape::M16N8K16 => "m16n8k16",
            MmaShape::M16N8K8 => "m16n8k8",
            MmaShape::M16N8K4 => "m16n8k4",
        }
    }

    pub fn parse(text: &str) -> Option<MmaShape> {
        MmaShape::ALL.into_iter().find(|s| s.name() == text)
    }
}

impl fmt::Display for MmaShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The type the products of an `mma` take their operands in; the accumulator is f32.
/// Serialised as its text (`"f16"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MmaType {
    /// Text `f16`: IEEE half precision.
    F16,
    /// Text `bf16`: bfloat16.
    BF16,
    /// Text `tf32`: f32's exponent with 10 mantissa bits (f32 values rounded to nearest,
    /// ties away from zero).
    TF32,
}

impl MmaType {
    pub const ALL: [MmaType; 3] = [MmaType::F16, MmaType::BF16, MmaType::TF32];

    /// `f16`, `bf16`, `tf32` (also the PTX type qualifier without its `.`).
    pub fn name(self) -> &'static str {
        match self {
            MmaType::F16 => "f16",
            MmaType::BF16 => "bf16",
            MmaType::TF32 => "tf32",
        }
    }

    pub fn parse(text: &str) -> Option<MmaType> {
        MmaType::ALL.into_iter().find(|t| t.name() == text)
    }

    /// The shapes `mma.sync` offers for this type with an f32 accumulator: `m16n8k16` and
    /// `m16n8k8` for f16 and bf16, `m16n8k8` and `m16n8k4` for tf32 (sm_80 and later).
    pub fn shapes(self) -> &'static [MmaShape] {
        match self {
            MmaType::F16 | MmaType::BF16 => &[MmaShape::M16N8K16, MmaShape::M16N8K8],
            MmaType::TF32 => &[MmaShape::M16N8K8, MmaShape::M16N8K4],
        }
    }

    /// Whether `mma.sync` has `shape` for this type.
    pub fn supports(self, shape: MmaShape) -> bool {
        self.shapes().contains(&shape)
    }
}

impl fmt::Display for MmaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One of the three tiles of an `mma`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MmaOperand {
    /// The `M × K` left operand (rows: the row variable, columns: the depth variable).
    A,
    /// The `K × N` right operand (rows: the depth variable, columns: the column variable).
    B,
    /// The `M × N` accumulator.
    C,
}

impl MmaOperand {
    pub const ALL: [MmaOperand; 3] = [MmaOperand::A, MmaOperand::B, MmaOperand::C];

    /// The rows and columns of the operand's tile.
    pub fn dims(self, shape: MmaShape) -> (u32, u32) {
        match self {
            MmaOperand::A => (shape.m(), shape.k()),
            MmaOperand::B => (shape.k(), shape.n()),
            MmaOperand::C => (shape.m(), shape.n()),
        }
    }
}

/// The elements of the operand's tile each lane holds.
pub fn fragment_len(shape: MmaShape, operand: MmaOperand) -> u32 {
    let (rows, cols) = operand.dims(shape);
    rows * cols / 32
}

/// The (row, column) within the operand's tile of element `i` of lane `lane`'s fragment
/// (the table of the module docs). `lane` is below 32 and `i` below [`fragment_len`].
pub fn fragment_element(
    shape: MmaShape,
    ty: MmaType,
    operand: MmaOperand,
    lane: u32,
    i: u32,
) -> (u32, u32) {
    let (g, t) = (lane / 4, lane % 4);
    let half = ty != MmaType::TF32;
    match operand {
        MmaOperand::C => (g + 8 * (i / 2), 2 * t + i % 2),
        MmaOperand::A => match (half, shape) {
            (true, MmaShape::M16N8K16) => (g + 8 * ((i / 2) % 2), 2 * t + i % 2 + 8 * (i / 4)),
            (true, _) => (g + 8 * (i / 2), 2 * t + i % 2),
            (false, MmaShape::M16N8K4) => (g + 8 * i, t),
            (false, _) => (g + 8 * (i % 2), t + 4 * (i / 2)),
        },
        MmaOperand::B => match (half, shape) {
            (true, MmaShape::M16N8K16) => (2 * t + i % 2 + 8 * (i / 2), g),
            (true, _) => (2 * t + i % 2, g),
            (false, MmaShape::M16N8K4) => (t, g),
            (false, _) => (t + 4 * i, g),
        },
    }
}

/// The lane holding element (`row`, `col`) of the operand's tile (both in range; the
/// same for every shape of the type).
pub fn fragment_owner(ty: MmaType, operand: MmaOperand, row: u32, col: u32) -> u32 {
    let g = row % 8;
    let t = match (operand, ty) {
        (MmaOperand::C, _) => col / 2,
        (MmaOperand::A, MmaType::TF32) => col % 4,
        (MmaOperand::A, _) => (col % 8) / 2,
        (MmaOperand::B, MmaType::TF32) => row % 4,
        (MmaOperand::B, _) => (row % 8) / 2,
    };
    let g = if operand == MmaOperand::B { col } else { g };
    4 * g + t
}

/// `mma SHAPE TYPE (row, col, depth) C[c_indices] += a * b if guard` (see the module
/// docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mma {
    pub shape: MmaShape,
    pub ty: MmaType,
    /// The tile variables: `row` in `0..M`, `col` in `0..N`, `depth` in `0..K`.
    pub row: VarId,
    pub col: VarId,
    pub depth: VarId,
    /// The accumulator's buffer and the element of tile position (`row`, `col`).
    pub c: BufferId,
    pub c_indices: Vec<Expr>,
    /// The left operand at (`row`, `depth`).
    pub a: Expr,
    /// The right operand at (`depth`, `col`).
    pub b: Expr,
    /// Where the accumulator is updated (every position when `None`).
    pub guard: Option<Expr>,
    pub span: Span,
}

impl Mma {
    /// The tile variables in text order: row, column, depth.
    pub fn tile_vars(&self) -> [VarId; 3] {
        [self.row, self.col, self.depth]
    }

    /// Every expression of the statement: the accumulator's indices, the operands, the
    /// guard.
    pub fn exprs(&self) -> Vec<&Expr> {
        self.c_indices
            .iter()
            .chain([&self.a, &self.b])
            .chain(self.guard.as_ref())
            .collect()
    }

    /// The statement with `f` applied to each of its expressions.
    pub fn map_exprs(&self, f: &mut impl FnMut(&Expr) -> Expr) -> Mma {
        Mma {
            c_indices: self.c_indices.iter().map(&mut *f).collect(),
            a: f(&self.a),
            b: f(&self.b),
            guard: self.guard.as_ref().map(&mut *f),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element of every tile is held by exactly one lane, the one
    /// `fragment_owner` names.
    #[test]
    fn fragments_partition_every_tile() {
        for ty in MmaType::ALL {
            for &shape in ty.shapes() {
                for operand in MmaOperand::ALL {
                    let (rows, cols) = operand.dims(shape);
                    let mut seen = vec![0; (rows * cols) as usize];
                    for lane in 0..32 {
                        for i in 0..fragment_len(shape, operand) {
                            let (r, c) = fragment_element(shape, ty, operand, lane, i);
                            assert!(r < rows && c < cols, "{shape} {ty} {operand:?}");
                            seen[(r * cols + c) as usize] += 1;
                            assert_eq!(
                                fragment_owner(ty, operand, r, c),
                                lane,
                                "{shape} {ty} {operand:?} ({r}, {c})"
                            );
                        }
                    }
                    assert!(seen.iter().all(|&n| n == 1), "{shape} {ty} {operand:?}");
                }
            }
        }
    }
}
