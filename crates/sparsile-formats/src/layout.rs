//! The axis composition of every named format, and the maps between logical
//! coordinates and axis coordinates.
//!
//! A [`Layout`] is what the front end needs to write a stage-I program over a tensor
//! in some format without knowing the format's name: the axes (kind, parent, length),
//! one expression per logical dimension giving the logical coordinate from the axis
//! coordinates (`to_logical`), and one expression per axis giving its coordinate from the
//! logical coordinates (`from_logical`; `None` where it cannot be computed, so the
//! tensor can only be iterated, not randomly accessed).
//!
//! ```
//! use sparsile_formats::{Format, MapExpr};
//! let bsr = Format::Bsr { r: 2, c: 3 }.layout(2).unwrap();
//! assert_eq!(bsr.axes.len(), 4);
//! // logical row = IO * 2 + II
//! assert_eq!(bsr.to_logical[0].eval(&[4, 7, 1, 2], &[], &[10, 20]), Some(9));
//! // axis JO from the logical column 20: 20 / 3 = 6
//! assert_eq!(bsr.from_logical[1].as_ref().unwrap().eval(&[], &[9, 20], &[10, 21]), Some(6));
//! # let _ = MapExpr::Const(0);
//! ```

use sparsile_ir::AxisKind;

use crate::{Format, FormatError};

/// An integer expression over axis coordinates, logical coordinates and shape dims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapExpr {
    /// The coordinate of axis `a` (in `to_logical`).
    Axis(usize),
    /// Logical coordinate `d` (in `from_logical`).
    Logical(usize),
    /// Logical shape dimension `d`.
    Dim(usize),
    Const(i64),
    Add(Box<MapExpr>, Box<MapExpr>),
    Sub(Box<MapExpr>, Box<MapExpr>),
    Mul(Box<MapExpr>, Box<MapExpr>),
    /// Floor division.
    Div(Box<MapExpr>, Box<MapExpr>),
    /// Floor remainder.
    Rem(Box<MapExpr>, Box<MapExpr>),
}

impl MapExpr {
    fn bin(f: fn(Box<MapExpr>, Box<MapExpr>) -> MapExpr, a: MapExpr, b: MapExpr) -> MapExpr {
        f(Box::new(a), Box::new(b))
    }

    /// `ceil(a / k)` for a positive constant `k`.
    pub fn ceil_div(a: MapExpr, k: usize) -> MapExpr {
        if k == 1 {
            return a;
        }
        MapExpr::bin(
            MapExpr::Div,
            MapExpr::bin(MapExpr::Add, a, MapExpr::Const(k as i64 - 1)),
            MapExpr::Const(k as i64),
        )
    }

    /// Evaluates with the given axis coordinates, logical coordinates and shape; `None`
    /// on a missing operand, division by zero or overflow.
    pub fn eval(&self, axes: &[i64], logical: &[i64], shape: &[usize]) -> Option<i64> {
        let two = |a: &MapExpr, b: &MapExpr| {
            Some((a.eval(axes, logical, shape)?, b.eval(axes, logical, shape)?))
        };
        match self {
            MapExpr::Axis(a) => axes.get(*a).copied(),
            MapExpr::Logical(d) => logical.get(*d).copied(),
            MapExpr::Dim(d) => shape.get(*d).map(|&x| x as i64),
            MapExpr::Const(c) => Some(*c),
            MapExpr::Add(a, b) => two(a, b).and_then(|(x, y)| x.checked_add(y)),
            MapExpr::Sub(a, b) => two(a, b).and_then(|(x, y)| x.checked_sub(y)),
            MapExpr::Mul(a, b) => two(a, b).and_then(|(x, y)| x.checked_mul(y)),
            MapExpr::Div(a, b) => two(a, b).and_then(|(x, y)| {
                (y != 0).then(|| x.div_euclid(y) - i64::from(y < 0 && x.rem_euclid(y) != 0))
            }),
            MapExpr::Rem(a, b) => two(a, b).and_then(|(x, y)| {
                if y == 0 {
                    return None;
                }
                let q = x.div_euclid(y) - i64::from(y < 0 && x.rem_euclid(y) != 0);
                Some(x - q * y)
            }),
        }
    }
}

/// A size known from the format and shape, or only once a tensor exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizeSpec {
    /// An expression over shape dims (`MapExpr::Dim`) and constants.
    Expr(MapExpr),
    /// Known only from the stored tensor (an nnz count, an ELL width chosen by data).
    Runtime,
}

/// One axis of a format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AxisSpec {
    /// A short name suffix used by front ends (`I`, `J`, `IO`, `JI`, ...).
    pub name: &'static str,
    pub kind: AxisKind,
    /// Index of the parent axis in the same layout.
    pub parent: Option<usize>,
    /// Coordinate range, over shape dims.
    pub length: MapExpr,
    /// Positions per parent position (`sparse_fixed` only).
    pub nnz_per_parent: Option<SizeSpec>,
    /// Whether coordinates under one parent position strictly increase.
    pub unique: bool,
}

/// The axes of a format and its coordinate maps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub axes: Vec<AxisSpec>,
    /// One per logical dimension, over `MapExpr::Axis` and `MapExpr::Dim`.
    pub to_logical: Vec<MapExpr>,
    /// One per axis, over `MapExpr::Logical` and `MapExpr::Dim`; `None` where the axis
    /// coordinate cannot be computed from logical coordinates.
    pub from_logical: Vec<Option<MapExpr>>,
}

fn axis(name: &'static str, kind: AxisKind, parent: Option<usize>, length: MapExpr) -> AxisSpec {
    AxisSpec {
        name,
        kind,
        parent,
        length,
        nnz_per_parent: None,
        unique: true,
    }
}

fn fixed(mut a: AxisSpec, per: SizeSpec) -> AxisSpec {
    a.nnz_per_parent = Some(per);
    a
}

const LEVEL_NAMES: [&str; 8] = ["I", "J", "K", "L", "M", "N", "P", "Q"];

fn level_name(d: usize) -> Result<&'static str, FormatError> {
    LEVEL_NAMES.get(d).copied().ok_or_else(|| {
        FormatError::Other(format!(
            "tensors of order {} are not supported (at most {})",
            d + 1,
            LEVEL_NAMES.len()
        ))
    })
}

impl Format {
    /// The layout of this format for a tensor of order `ndim`.
    pub fn layout(&self, ndim: usize) -> Result<Layout, FormatError> {
        use AxisKind::*;
        use MapExpr::{Axis, Dim, Logical};
        if !self.supports_ndim(ndim) {
            return Err(FormatError::UnsupportedOrder {
                format: self.to_string(),
                ndim,
            });
        }
        let b = MapExpr::bin;
        let c = |k: usize| MapExpr::Const(k as i64);
        let identity = |n: usize| -> (Vec<MapExpr>, Vec<Option<MapExpr>>) {
            (
                (0..n).map(Axis).collect(),
                (0..n).map(|d| Some(Logical(d))).collect(),
            )
        };
        let layout = match self {
            Format::Dense => {
                let axes = (0..ndim)
                    .map(|d| Ok(axis(level_name(d)?, DenseFixed, None, Dim(d))))
                    .collect::<Result<_, FormatError>>()?;
                let (to_logical, from_logical) = identity(ndim);
                Layout {
                    axes,
                    to_logical,
                    from_logical,
                }
            }
            Format::Csr => {
                let (to_logical, from_logical) = identity(2);
                Layout {
                    axes: vec![
                        axis("I", DenseFixed, None, Dim(0)),
                        axis("J", SparseVariable, Some(0), Dim(1)),
                    ],
                    to_logical,
                    from_logical,
                }
            }
            Format::Csc => Layout {
                axes: vec![
                    axis("J", DenseFixed, None, Dim(1)),
                    axis("I", SparseVariable, Some(0), Dim(0)),
                ],
                to_logical: vec![Axis(1), Axis(0)],
                from_logical: vec![Some(Logical(1)), Some(Logical(0))],
            },
            Format::Coo => {
                let mut axes = Vec::with_capacity(ndim);
                let mut first = fixed(
                    axis(level_name(0)?, SparseFixed, None, Dim(0)),
                    SizeSpec::Runtime,
                );
                first.unique = ndim == 1;
                axes.push(first);
                for d in 1..ndim {
                    axes.push(fixed(
                        axis(level_name(d)?, SparseFixed, Some(d - 1), Dim(d)),
                        SizeSpec::Expr(c(1)),
                    ));
                }
                let (to_logical, from_logical) = identity(ndim);
                Layout {
                    axes,
                    to_logical,
                    from_logical,
                }
            }
            Format::Dcsr => {
                let (to_logical, from_logical) = identity(2);
                Layout {
                    axes: vec![
                        fixed(axis("I", SparseFixed, None, Dim(0)), SizeSpec::Runtime),
                        axis("J", SparseVariable, Some(0), Dim(1)),
                    ],
                    to_logical,
                    from_logical,
                }
            }
            Format::Bsr { r, c: cc } | Format::Dbsr { r, c: cc } => {
                let (r, cc) = (*r, *cc);
                let io = if matches!(self, Format::Bsr { .. }) {
                    axis("IO", DenseFixed, None, MapExpr::ceil_div(Dim(0), r))
                } else {
                    fixed(
                        axis("IO", SparseFixed, None, MapExpr::ceil_div(Dim(0), r)),
                        SizeSpec::Runtime,
                    )
                };
                Layout {
                    axes: vec![
                        io,
                        axis("JO", SparseVariable, Some(0), MapExpr::ceil_div(Dim(1), cc)),
                        axis("II", DenseFixed, None, c(r)),
                        axis("JI", DenseFixed, None, c(cc)),
                    ],
                    to_logical: vec![
                        b(MapExpr::Add, b(MapExpr::Mul, Axis(0), c(r)), Axis(2)),
                        b(MapExpr::Add, b(MapExpr::Mul, Axis(1), c(cc)), Axis(3)),
                    ],
                    from_logical: vec![
                        Some(b(MapExpr::Div, Logical(0), c(r))),
                        Some(b(MapExpr::Div, Logical(1), c(cc))),
                        Some(b(MapExpr::Rem, Logical(0), c(r))),
                        Some(b(MapExpr::Rem, Logical(1), c(cc))),
                    ],
                }
            }
            Format::Ell { k } => {
                let per = match k {
                    Some(k) => SizeSpec::Expr(c(*k)),
                    None => SizeSpec::Runtime,
                };
                let (to_logical, from_logical) = identity(2);
                Layout {
                    axes: vec![
                        axis("I", DenseFixed, None, Dim(0)),
                        fixed(axis("J", SparseFixed, Some(0), Dim(1)), per),
                    ],
                    to_logical,
                    from_logical,
                }
            }
            Format::Dia => {
                // Axis D stores offset + (rows - 1), so coordinates are non-negative.
                let shift = b(MapExpr::Sub, Dim(0), c(1));
                Layout {
                    axes: vec![
                        fixed(
                            axis(
                                "D",
                                SparseFixed,
                                None,
                                b(MapExpr::Sub, b(MapExpr::Add, Dim(0), Dim(1)), c(1)),
                            ),
                            SizeSpec::Runtime,
                        ),
                        axis("I", DenseFixed, None, Dim(0)),
                    ],
                    to_logical: vec![
                        Axis(1),
                        b(
                            MapExpr::Sub,
                            b(MapExpr::Add, Axis(1), Axis(0)),
                            shift.clone(),
                        ),
                    ],
                    from_logical: vec![
                        Some(b(
                            MapExpr::Add,
                            b(MapExpr::Sub, Logical(1), Logical(0)),
                            shift,
                        )),
                        Some(Logical(0)),
                    ],
                }
            }
            Format::Csf => {
                let mut axes = vec![axis(level_name(0)?, DenseFixed, None, Dim(0))];
                for d in 1..ndim {
                    axes.push(axis(level_name(d)?, SparseVariable, Some(d - 1), Dim(d)));
                }
                let (to_logical, from_logical) = identity(ndim);
                Layout {
                    axes,
                    to_logical,
                    from_logical,
                }
            }
            Format::SrBcrs { t, g } => {
                let (t, g) = (*t, *g);
                Layout {
                    axes: vec![
                        axis("IO", DenseFixed, None, MapExpr::ceil_div(Dim(0), t)),
                        axis("G", DenseVariable, Some(0), MapExpr::ceil_div(Dim(1), g)),
                        fixed(
                            axis("J", SparseFixed, Some(1), Dim(1)),
                            SizeSpec::Expr(c(g)),
                        ),
                        axis("II", DenseFixed, None, c(t)),
                    ],
                    to_logical: vec![
                        b(MapExpr::Add, b(MapExpr::Mul, Axis(0), c(t)), Axis(3)),
                        Axis(2),
                    ],
                    from_logical: vec![
                        Some(b(MapExpr::Div, Logical(0), c(t))),
                        None,
                        Some(Logical(1)),
                        Some(b(MapExpr::Rem, Logical(0), c(t))),
                    ],
                }
            }
            Format::Ragged => {
                let (to_logical, from_logical) = identity(2);
                Layout {
                    axes: vec![
                        axis("I", DenseFixed, None, Dim(0)),
                        axis("J", DenseVariable, Some(0), Dim(1)),
                    ],
                    to_logical,
                    from_logical,
                }
            }
        };
        Ok(layout)
    }
}
