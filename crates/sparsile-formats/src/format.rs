//! The format library: named formats, each a composition of axes.
//!
//! Format strings (used by the CLI, the index notation and the APIs):
//! `dense`, `csr`, `csc`, `coo`, `dcsr`, `bsr:RxC`, `dbsr:RxC`, `ell` (width = longest
//! row) or `ell:K`, `dia`, `csf` (any order ≥ 2, compressed on every level but the
//! first), `srbcrs:TxG`, `ragged`.
//!
//! ```
//! use sparsile_formats::Format;
//! let f: Format = "bsr:16x8".parse().unwrap();
//! assert_eq!(f, Format::Bsr { r: 16, c: 8 });
//! assert_eq!(f.to_string(), "bsr:16x8");
//! assert!("bsr:0x8".parse::<Format>().is_err());
//! ```

use std::fmt;
use std::str::FromStr;

use crate::FormatError;

/// A named format.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Format {
    /// Every element stored, row-major; any order.
    Dense,
    /// Compressed sparse rows: `dense_fixed(rows)`, `sparse_variable(cols)`.
    Csr,
    /// Compressed sparse columns: `dense_fixed(cols)`, `sparse_variable(rows)`.
    Csc,
    /// Coordinate list, sorted lexicographically: one non-unique `sparse_fixed` axis,
    /// then one coordinate per entry on every further axis; any order.
    Coo,
    /// Doubly compressed sparse rows (only non-empty rows stored).
    Dcsr,
    /// Block CSR with dense `r × c` blocks.
    Bsr { r: usize, c: usize },
    /// Doubly compressed BSR: only non-empty block rows stored.
    Dbsr { r: usize, c: usize },
    /// ELLPACK with `k` slots per row; `None` = the longest row.
    Ell { k: Option<usize> },
    /// Diagonal storage: one dense diagonal per stored offset.
    Dia,
    /// Compressed sparse fiber: first level dense, the others compressed; any order ≥ 2.
    Csf,
    /// Shared-row block compressed row storage with `t`-row tiles and column groups of `g`.
    SrBcrs { t: usize, g: usize },
    /// Ragged rows: each row a dense run of its own length (`dense_variable`).
    Ragged,
}

impl Format {
    /// Whether the format can hold a tensor of order `ndim`.
    pub fn supports_ndim(&self, ndim: usize) -> bool {
        match self {
            Format::Dense | Format::Coo => ndim >= 1,
            Format::Csf => ndim >= 2,
            _ => ndim == 2,
        }
    }

    /// Whether a stored coordinate may be the sentinel `length` (a padding slot: ELL
    /// rows shorter than their width, SR-BCRS's last column group, hyb's buckets). The
    /// block formats pad only inside their blocks: every stored block coordinate names a
    /// real block, so a coordinate read from them needs no range guard.
    pub fn stores_sentinel(&self) -> bool {
        self.pads() && !matches!(self, Format::Bsr { .. } | Format::Dbsr { .. })
    }

    /// Whether the format stores explicit zeros beyond the pattern (padding).
    pub fn pads(&self) -> bool {
        matches!(
            self,
            Format::Dense
                | Format::Bsr { .. }
                | Format::Dbsr { .. }
                | Format::Ell { .. }
                | Format::Dia
                | Format::SrBcrs { .. }
        )
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Format::Dense => f.write_str("dense"),
            Format::Csr => f.write_str("csr"),
            Format::Csc => f.write_str("csc"),
            Format::Coo => f.write_str("coo"),
            Format::Dcsr => f.write_str("dcsr"),
            Format::Bsr { r, c } => write!(f, "bsr:{r}x{c}"),
            Format::Dbsr { r, c } => write!(f, "dbsr:{r}x{c}"),
            Format::Ell { k: None } => f.write_str("ell"),
            Format::Ell { k: Some(k) } => write!(f, "ell:{k}"),
            Format::Dia => f.write_str("dia"),
            Format::Csf => f.write_str("csf"),
            Format::SrBcrs { t, g } => write!(f, "srbcrs:{t}x{g}"),
            Format::Ragged => f.write_str("ragged"),
        }
    }
}

fn parse_pair(spec: &str, text: &str) -> Result<(usize, usize), FormatError> {
    let bad = || FormatError::BadFormatString {
        text: spec.to_string(),
        reason: format!("expected two positive sizes like `16x16`, found `{text}`"),
    };
    let (a, b) = text.split_once('x').ok_or_else(bad)?;
    let a: usize = a.trim().parse().map_err(|_| bad())?;
    let b: usize = b.trim().parse().map_err(|_| bad())?;
    if a == 0 || b == 0 {
        return Err(bad());
    }
    Ok((a, b))
}

impl FromStr for Format {
    type Err = FormatError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim().to_string();
        if text != text.to_ascii_lowercase() {
            return Err(FormatError::BadFormatString {
                text: s.to_string(),
                reason: format!(
                    "format names are lower case: write `{}`",
                    text.to_ascii_lowercase()
                ),
            });
        }
        let (name, arg) = match text.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (text.as_str(), None),
        };
        let no_arg = |f: Format| match arg {
            None => Ok(f),
            Some(a) => Err(FormatError::BadFormatString {
                text: s.to_string(),
                reason: format!("format `{name}` takes no parameter, found `:{a}`"),
            }),
        };
        let need_arg = || {
            arg.ok_or_else(|| FormatError::BadFormatString {
                text: s.to_string(),
                reason: format!("format `{name}` needs a parameter, e.g. `{name}:16x16`"),
            })
        };
        match name {
            "dense" => no_arg(Format::Dense),
            "csr" => no_arg(Format::Csr),
            "csc" => no_arg(Format::Csc),
            "coo" => no_arg(Format::Coo),
            "dcsr" => no_arg(Format::Dcsr),
            "dia" => no_arg(Format::Dia),
            "csf" => no_arg(Format::Csf),
            "ragged" => no_arg(Format::Ragged),
            "bsr" => parse_pair(s, need_arg()?).map(|(r, c)| Format::Bsr { r, c }),
            "dbsr" => parse_pair(s, need_arg()?).map(|(r, c)| Format::Dbsr { r, c }),
            "srbcrs" => parse_pair(s, need_arg()?).map(|(t, g)| Format::SrBcrs { t, g }),
            "ell" => match arg {
                None => Ok(Format::Ell { k: None }),
                Some(a) => match a.trim().parse::<usize>() {
                    Ok(k) if k > 0 => Ok(Format::Ell { k: Some(k) }),
                    _ => Err(FormatError::BadFormatString {
                        text: s.to_string(),
                        reason: format!("ELL width must be a positive integer, found `{a}`"),
                    }),
                },
            },
            _ => Err(FormatError::BadFormatString {
                text: s.to_string(),
                reason: "unknown format; known: dense, csr, csc, coo, dcsr, bsr:RxC, dbsr:RxC, ell[:K], dia, csf, srbcrs:TxG, ragged".to_string(),
            }),
        }
    }
}
