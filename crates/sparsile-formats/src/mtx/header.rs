//! The banner line (`%%MatrixMarket matrix coordinate real general`), comment lines and
//! the size line of a Matrix Market file.

use std::fmt;

use crate::mtx::MtxError;

/// `coordinate` (sparse entries) or `array` (every element, column-major).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum MtxFormat {
    Coordinate,
    Array,
}

/// The value field. `Pattern` files store no values (read as 1.0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum MtxField {
    Real,
    Integer,
    Pattern,
}

/// Storage symmetry: symmetric files hold one triangle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum MtxSymmetry {
    General,
    Symmetric,
    SkewSymmetric,
}

/// Everything before the entries.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MtxHeader {
    pub format: MtxFormat,
    pub field: MtxField,
    pub symmetry: MtxSymmetry,
    /// Comment lines between the banner and the size line, without the leading `%`.
    pub comments: Vec<String>,
    pub rows: usize,
    pub cols: usize,
    /// The number of entry lines the size line declares (for `array`: the number of
    /// stored values, i.e. one triangle for symmetric files).
    pub entries: usize,
}

impl fmt::Display for MtxFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MtxFormat::Coordinate => "coordinate",
            MtxFormat::Array => "array",
        })
    }
}

impl fmt::Display for MtxField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MtxField::Real => "real",
            MtxField::Integer => "integer",
            MtxField::Pattern => "pattern",
        })
    }
}

impl fmt::Display for MtxSymmetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MtxSymmetry::General => "general",
            MtxSymmetry::Symmetric => "symmetric",
            MtxSymmetry::SkewSymmetric => "skew-symmetric",
        })
    }
}

/// Parses the banner line (line 1) into format, field and symmetry.
pub(crate) fn parse_banner(
    text: &str,
    line: usize,
) -> Result<(MtxFormat, MtxField, MtxSymmetry), MtxError> {
    let bad = |reason: String| MtxError::BadHeader { line, reason };
    let words: Vec<String> = text
        .split_ascii_whitespace()
        .map(|w| w.to_ascii_lowercase())
        .collect();
    if words.first().map(String::as_str) != Some("%%matrixmarket") {
        return Err(bad(format!(
            "expected `%%MatrixMarket matrix <format> <field> <symmetry>`, found `{}`",
            text.trim()
        )));
    }
    if words.len() != 5 {
        return Err(bad(format!(
            "expected 4 words after `%%MatrixMarket`, found {}",
            words.len() - 1
        )));
    }
    if words[1] != "matrix" {
        return Err(MtxError::Unsupported {
            line,
            what: format!("object `{}` (only `matrix`)", words[1]),
        });
    }
    let format = match words[2].as_str() {
        "coordinate" => MtxFormat::Coordinate,
        "array" => MtxFormat::Array,
        other => {
            return Err(bad(format!(
                "unknown format `{other}` (expected coordinate or array)"
            )))
        }
    };
    let field = match words[3].as_str() {
        "real" | "double" => MtxField::Real,
        "integer" => MtxField::Integer,
        "pattern" => MtxField::Pattern,
        "complex" => {
            return Err(MtxError::Unsupported {
                line,
                what: "field `complex`".into(),
            })
        }
        other => {
            return Err(bad(format!(
                "unknown field `{other}` (expected real, integer or pattern)"
            )))
        }
    };
    let symmetry = match words[4].as_str() {
        "general" => MtxSymmetry::General,
        "symmetric" => MtxSymmetry::Symmetric,
        "skew-symmetric" => MtxSymmetry::SkewSymmetric,
        "hermitian" => {
            return Err(MtxError::Unsupported {
                line,
                what: "symmetry `hermitian`".into(),
            })
        }
        other => {
            return Err(bad(format!(
                "unknown symmetry `{other}` (expected general, symmetric or skew-symmetric)"
            )))
        }
    };
    if field == MtxField::Pattern && symmetry == MtxSymmetry::SkewSymmetric {
        return Err(bad("a `pattern` matrix cannot be `skew-symmetric`".into()));
    }
    if format == MtxFormat::Array && field == MtxField::Pattern {
        return Err(bad("`pattern` is only allowed with `coordinate`".into()));
    }
    Ok((format, field, symmetry))
}

/// Parses a non-negative integer written in decimal ASCII digits.
pub(crate) fn parse_u64(token: &[u8]) -> Option<u64> {
    if token.is_empty() || token.len() > 19 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in token {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(b - b'0');
    }
    Some(v)
}

/// Parses the size line: `rows cols entries` (coordinate) or `rows cols` (array).
pub(crate) fn parse_size_line(
    text: &[u8],
    line: usize,
    format: MtxFormat,
    symmetry: MtxSymmetry,
) -> Result<(usize, usize, usize), MtxError> {
    let bad = |reason: String| MtxError::BadSizeLine { line, reason };
    let tokens: Vec<&[u8]> = text
        .split(|b| b.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
        .collect();
    let expected = match format {
        MtxFormat::Coordinate => 3,
        MtxFormat::Array => 2,
    };
    if tokens.len() != expected {
        return Err(bad(format!(
            "expected {expected} integers ({}), found {} fields",
            if expected == 3 {
                "rows cols entries"
            } else {
                "rows cols"
            },
            tokens.len()
        )));
    }
    let mut nums = [0usize; 3];
    for (k, t) in tokens.iter().enumerate() {
        nums[k] = parse_u64(t)
            .and_then(|v| usize::try_from(v).ok())
            .ok_or_else(|| {
                bad(format!(
                    "`{}` is not a non-negative integer",
                    String::from_utf8_lossy(t)
                ))
            })?;
    }
    let (rows, cols) = (nums[0], nums[1]);
    if symmetry != MtxSymmetry::General && rows != cols {
        return Err(bad(format!(
            "a {symmetry} matrix must be square, found {rows} x {cols}"
        )));
    }
    let entries = match format {
        // More entries than elements is allowed: duplicates may be summed.
        MtxFormat::Coordinate => nums[2],
        MtxFormat::Array => {
            let n = match symmetry {
                MtxSymmetry::General => rows.checked_mul(cols),
                MtxSymmetry::Symmetric => rows.checked_mul(rows + 1).map(|x| x / 2),
                MtxSymmetry::SkewSymmetric => {
                    rows.checked_mul(rows.saturating_sub(1)).map(|x| x / 2)
                }
            };
            n.ok_or_else(|| bad(format!("{rows} x {cols} elements overflow")))?
        }
    };
    Ok((rows, cols, entries))
}
