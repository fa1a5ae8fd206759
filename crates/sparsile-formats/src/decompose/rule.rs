//! [`DecomposeRule`]: the rules, their text form (as recorded in the stage-I IR) and the
//! layouts of their parts.

use serde::{Deserialize, Serialize};
use sparsile_ir::coord::RuleSpec;
use sparsile_ir::AxisKind;

use super::DecomposeError;
use crate::{AxisSpec, Format, Layout, MapExpr, SizeSpec};

/// How to decompose a tensor.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum DecomposeRule {
    /// One part: the tensor converted to `format` (a format string, e.g. `dbsr:2x2`).
    Convert { format: String },
    /// SparseTIR's hyb(c, k): the last dimension cut into `c` equal column partitions;
    /// within each, the non-empty rows bucketed by length into ELL parts of width
    /// 1, 2, 4, …, 2^k (a row goes to the narrowest bucket it fits; a row longer than
    /// 2^k is split into several rows of the widest bucket). Part `q * (k + 1) + b` holds
    /// partition `q`, width `2^b`. Order 2: each part is `[I: sparse_fixed(none, m,
    /// nonunique), J: sparse_fixed(I, n, per=2^b)]`; order 3 (one bucketed ELL per slice
    /// of the first dimension, e.g. per relation): `[R: dense_fixed, I:
    /// sparse_variable(R, nonunique), J: sparse_fixed(I, per=2^b)]`. Padding slots hold
    /// the sentinel coordinate `n` and value 0.
    Hyb { c: usize, k: u32 },
    /// The dense tiles of a matrix and the rest (STile's first level): the aligned
    /// `r × c` blocks whose stored entries fill at least `fill` percent of their cells go
    /// whole to part 0, `bsr:RxC` (missing cells stored as zeros); every other entry to
    /// part 1, `csr`. Order 2 only.
    Blocks { r: usize, c: usize, fill: u32 },
    /// Dense tiles at several nested levels, chosen by cost (STile's levels of dense
    /// tiles with the rest as one-dimensional tiles): level `l` cuts the matrix into
    /// aligned `r × c` blocks (each level's sides divide the previous level's), a block
    /// kept whole as a dense tile costs `cost` scattered entries, and every block takes
    /// the cheaper of being a tile or leaving its entries to the next level (the rest:
    /// `csr`, one unit an entry). Part 0 is the rest, `csr` (first, so that a kernel's
    /// pass over it can store every output row before the tiles add to them); part
    /// `l + 1` is `bsr:RxC` of level `l`. Text form: `tiles(r0, c0, cost0, r1, c1,
    /// cost1, …)`. Order 2 only.
    Tiles { levels: Vec<TileLevel> },
}

/// One level of [`DecomposeRule::Tiles`]: the block's sides and what a dense tile of
/// them costs, in scattered entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TileLevel {
    pub r: usize,
    pub c: usize,
    pub cost: u32,
}

impl DecomposeRule {
    /// The largest `k` accepted by [`DecomposeRule::Hyb`] (widths up to 2^20).
    pub const MAX_HYB_K: u32 = 20;

    /// The largest side of a [`DecomposeRule::Blocks`] tile.
    pub const MAX_BLOCK: usize = 256;

    /// The most levels of a [`DecomposeRule::Tiles`] rule.
    pub const MAX_LEVELS: usize = 6;

    /// The rule as the IR records it: `convert(dbsr, 2, 2)`, `hyb(2, 3)`.
    pub fn to_spec(&self) -> RuleSpec {
        match self {
            DecomposeRule::Convert { format } => {
                let (name, rest) = format.split_once(':').unwrap_or((format, ""));
                let mut args = vec![name.to_string()];
                args.extend(
                    rest.split('x')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string),
                );
                RuleSpec::new("convert", args)
            }
            DecomposeRule::Hyb { c, k } => RuleSpec::new("hyb", vec![c.to_string(), k.to_string()]),
            DecomposeRule::Blocks { r, c, fill } => RuleSpec::new(
                "blocks",
                vec![r.to_string(), c.to_string(), fill.to_string()],
            ),
            DecomposeRule::Tiles { levels } => RuleSpec::new(
                "tiles",
                levels
                    .iter()
                    .flat_map(|l| [l.r.to_string(), l.c.to_string(), l.cost.to_string()])
                    .collect(),
            ),
        }
    }

    /// Reads the IR form back; checks the arguments.
    pub fn from_spec(spec: &RuleSpec) -> Result<DecomposeRule, DecomposeError> {
        let bad = |reason: String| DecomposeError::BadRule {
            text: spec.to_string(),
            reason,
        };
        let rule = match spec.name.as_str() {
            "convert" => {
                let Some((name, dims)) = spec.args.split_first() else {
                    return Err(bad("expected a format name, e.g. `convert(csr)`".into()));
                };
                let format = if dims.is_empty() {
                    name.clone()
                } else {
                    format!("{name}:{}", dims.join("x"))
                };
                DecomposeRule::Convert { format }
            }
            "hyb" => {
                let [c, k] = spec.args.as_slice() else {
                    return Err(bad(format!(
                        "expected two arguments `hyb(c, k)`, found {}",
                        spec.args.len()
                    )));
                };
                let c = c
                    .parse::<usize>()
                    .map_err(|_| bad(format!("`c` must be an integer, found `{c}`")))?;
                let k = k
                    .parse::<u32>()
                    .map_err(|_| bad(format!("`k` must be an integer, found `{k}`")))?;
                DecomposeRule::Hyb { c, k }
            }
            "blocks" => {
                let [r, c, fill] = spec.args.as_slice() else {
                    return Err(bad(format!(
                        "expected three arguments `blocks(r, c, fill)`, found {}",
                        spec.args.len()
                    )));
                };
                let int = |name: &str, text: &str| {
                    text.parse::<usize>()
                        .map_err(|_| bad(format!("`{name}` must be an integer, found `{text}`")))
                };
                DecomposeRule::Blocks {
                    r: int("r", r)?,
                    c: int("c", c)?,
                    fill: int("fill", fill)?.min(u32::MAX as usize) as u32,
                }
            }
            "tiles" => {
                if spec.args.is_empty() || !spec.args.len().is_multiple_of(3) {
                    return Err(bad(format!(
                        "expected `tiles(r, c, cost, …)`: three arguments a level, found {}",
                        spec.args.len()
                    )));
                }
                let int = |name: &str, text: &str| {
                    text.parse::<u64>()
                        .map_err(|_| bad(format!("`{name}` must be an integer, found `{text}`")))
                };
                let levels = spec
                    .args
                    .chunks(3)
                    .map(|l| {
                        Ok(TileLevel {
                            r: int("r", &l[0])?.min(usize::MAX as u64) as usize,
                            c: int("c", &l[1])?.min(usize::MAX as u64) as usize,
                            cost: int("cost", &l[2])?.min(u32::MAX as u64) as u32,
                        })
                    })
                    .collect::<Result<Vec<_>, DecomposeError>>()?;
                DecomposeRule::Tiles { levels }
            }
            other => {
                return Err(bad(format!(
                    "unknown rule `{other}` (known: convert, hyb, blocks, tiles)"
                )))
            }
        };
        rule.check()?;
        Ok(rule)
    }

    /// Checks the rule's own arguments (not the tensor).
    pub fn check(&self) -> Result<(), DecomposeError> {
        let bad = |reason: String| DecomposeError::BadRule {
            text: self.to_spec().to_string(),
            reason,
        };
        match self {
            DecomposeRule::Convert { format } => {
                format.parse::<Format>().map_err(|e| bad(e.to_string()))?;
            }
            DecomposeRule::Hyb { c, k } => {
                if *c == 0 {
                    return Err(bad(
                        "the number of column partitions `c` must be at least 1".into(),
                    ));
                }
                if *k > Self::MAX_HYB_K {
                    return Err(bad(format!(
                        "`k` = {k} is larger than {} (bucket widths up to 2^{})",
                        Self::MAX_HYB_K,
                        Self::MAX_HYB_K
                    )));
                }
            }
            DecomposeRule::Blocks { r, c, fill } => {
                if !(1..=Self::MAX_BLOCK).contains(r) || !(1..=Self::MAX_BLOCK).contains(c) {
                    return Err(bad(format!(
                        "blocks of {r} x {c}: each side must be from 1 to {}",
                        Self::MAX_BLOCK
                    )));
                }
                if !(1..=100).contains(fill) {
                    return Err(bad(format!(
                        "`fill` is a percentage from 1 to 100, found {fill}"
                    )));
                }
            }
            DecomposeRule::Tiles { levels } => {
                if levels.is_empty() || levels.len() > Self::MAX_LEVELS {
                    return Err(bad(format!(
                        "{} levels: from 1 to {} are allowed",
                        levels.len(),
                        Self::MAX_LEVELS
                    )));
                }
                for (l, level) in levels.iter().enumerate() {
                    let TileLevel { r, c, cost } = *level;
                    if !(1..=Self::MAX_BLOCK).contains(&r) || !(1..=Self::MAX_BLOCK).contains(&c) {
                        return Err(bad(format!(
                            "level {l}: blocks of {r} x {c}: each side must be from 1 to {}",
                            Self::MAX_BLOCK
                        )));
                    }
                    if cost == 0 {
                        return Err(bad(format!(
                            "level {l}: a tile's cost must be at least 1 entry"
                        )));
                    }
                    if let Some(up) = l.checked_sub(1).map(|p| levels[p]) {
                        if !up.r.is_multiple_of(r)
                            || !up.c.is_multiple_of(c)
                            || (up.r, up.c) == (r, c)
                        {
                            return Err(bad(format!(
                                "level {l}: blocks of {r} x {c} do not nest in the {} x {} blocks \
                                 of level {}: each level's sides must divide the previous \
                                 level's, and the blocks must be smaller",
                                up.r,
                                up.c,
                                l - 1
                            )));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The target format of a [`DecomposeRule::Convert`].
    pub(crate) fn format(&self) -> Result<Option<Format>, DecomposeError> {
        match self {
            DecomposeRule::Convert { format } => {
                format
                    .parse::<Format>()
                    .map(Some)
                    .map_err(|e| DecomposeError::BadRule {
                        text: self.to_spec().to_string(),
                        reason: e.to_string(),
                    })
            }
            DecomposeRule::Hyb { .. }
            | DecomposeRule::Blocks { .. }
            | DecomposeRule::Tiles { .. } => Ok(None),
        }
    }

    /// The number of parts.
    pub fn num_parts(&self) -> usize {
        match self {
            DecomposeRule::Convert { .. } => 1,
            DecomposeRule::Hyb { c, k } => c * (*k as usize + 1),
            DecomposeRule::Blocks { .. } => 2,
            DecomposeRule::Tiles { levels } => levels.len() + 1,
        }
    }

    /// The layout of every part for a source of order `ndim`: axes (kind, parent,
    /// length over the logical shape, positions per parent), `to_logical` (logical
    /// coordinates from the part's axis coordinates) and `from_logical`.
    pub fn part_layouts(&self, ndim: usize) -> Result<Vec<Layout>, DecomposeError> {
        self.check()?;
        match self {
            DecomposeRule::Convert { .. } => {
                let format = self.format()?.expect("a conversion has a format");
                let layout = format
                    .layout(ndim)
                    .map_err(|source| DecomposeError::Format {
                        rule: self.to_spec().to_string(),
                        source,
                    })?;
                Ok(vec![layout])
            }
            DecomposeRule::Hyb { k, .. } => {
                if !(2..=3).contains(&ndim) {
                    return Err(DecomposeError::UnsupportedOrder {
                        rule: self.to_spec().to_string(),
                        ndim,
                        supported: "2 or 3",
                    });
                }
                let one = |b: u32| hyb_layout(ndim, 1usize << b);
                Ok((0..self.num_parts())
                    .map(|p| one(p as u32 % (k + 1)))
                    .collect())
            }
            DecomposeRule::Blocks { .. } | DecomposeRule::Tiles { .. } => {
                if ndim != 2 {
                    return Err(DecomposeError::UnsupportedOrder {
                        rule: self.to_spec().to_string(),
                        ndim,
                        supported: "2",
                    });
                }
                let formats: Vec<Format> = match self {
                    DecomposeRule::Blocks { r, c, .. } => {
                        vec![Format::Bsr { r: *r, c: *c }, Format::Csr]
                    }
                    DecomposeRule::Tiles { levels } => std::iter::once(Format::Csr)
                        .chain(levels.iter().map(|l| Format::Bsr { r: l.r, c: l.c }))
                        .collect(),
                    _ => unreachable!("matched above"),
                };
                formats
                    .iter()
                    .map(|f| {
                        f.layout(ndim).map_err(|source| DecomposeError::Format {
                            rule: self.to_spec().to_string(),
                            source,
                        })
                    })
                    .collect()
            }
        }
    }
}

/// The layout of one hyb part of width `w` (see [`DecomposeRule::Hyb`]).
fn hyb_layout(ndim: usize, w: usize) -> Layout {
    let spec = |name, kind, parent, d: usize, per, unique| AxisSpec {
        name,
        kind,
        parent,
        length: MapExpr::Dim(d),
        nnz_per_parent: per,
        unique,
    };
    let width = Some(SizeSpec::Expr(MapExpr::Const(w as i64)));
    let axes = if ndim == 2 {
        vec![
            spec(
                "I",
                AxisKind::SparseFixed,
                None,
                0,
                Some(SizeSpec::Runtime),
                false,
            ),
            spec("J", AxisKind::SparseFixed, Some(0), 1, width, true),
        ]
    } else {
        vec![
            spec("R", AxisKind::DenseFixed, None, 0, None, true),
            spec("I", AxisKind::SparseVariable, Some(0), 1, None, false),
            spec("J", AxisKind::SparseFixed, Some(1), 2, width, true),
        ]
    };
    Layout {
        axes,
        to_logical: (0..ndim).map(MapExpr::Axis).collect(),
        from_logical: (0..ndim).map(|d| Some(MapExpr::Logical(d))).collect(),
    }
}

impl std::str::FromStr for DecomposeRule {
    type Err = DecomposeError;

    /// Reads the text form `name(arg, …)`: `hyb(2, 3)`, `convert(dbsr, 2, 2)`.
    fn from_str(text: &str) -> Result<DecomposeRule, DecomposeError> {
        let bad = |reason: &str| DecomposeError::BadRule {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        let (name, rest) = text
            .trim()
            .split_once('(')
            .ok_or_else(|| bad("expected `name(arg, …)`"))?;
        let args = rest
            .strip_suffix(')')
            .ok_or_else(|| bad("expected a closing `)`"))?;
        let args: Vec<String> = args
            .split(',')
            .map(|a| a.trim().to_string())
            .filter(|a| !a.is_empty())
            .collect();
        DecomposeRule::from_spec(&RuleSpec::new(name.trim(), args))
    }
}

impl std::fmt::Display for DecomposeRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.to_spec())
    }
}
