//! Writing Matrix Market files (`coordinate` from a [`CooTensor`], `array` from dense
//! row-major values), plain or gzip-compressed.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use flate2::write::GzEncoder;
use flate2::Compression;

use crate::mtx::{MtxData, MtxError, MtxField, MtxSymmetry};
use crate::CooTensor;

/// Options for writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MtxWriteOptions {
    pub field: MtxField,
    /// `Symmetric` / `SkewSymmetric` write the lower triangle only, after checking that
    /// the matrix has that symmetry.
    pub symmetry: MtxSymmetry,
    /// Comment lines written after the banner (without the leading `%`).
    pub comments: Vec<String>,
}

impl MtxWriteOptions {
    /// `general` storage of the given field, no comments.
    pub fn general(field: MtxField) -> MtxWriteOptions {
        MtxWriteOptions {
            field,
            symmetry: MtxSymmetry::General,
            comments: Vec::new(),
        }
    }
}

fn io_err(e: std::io::Error) -> MtxError {
    MtxError::io("<writer>", 0, &e)
}

fn write_err(reason: String) -> MtxError {
    MtxError::Write { reason }
}

/// Appends `v` in the shortest form that reads back to the same f64.
fn push_value(out: &mut String, v: f64, field: MtxField) {
    use std::fmt::Write as _;
    match field {
        MtxField::Pattern => {}
        MtxField::Integer => {
            let _ = write!(out, " {}", v as i64);
        }
        MtxField::Real => {
            let a = v.abs();
            if v.is_nan() {
                // `{v}` prints every NaN as `NaN`: the sign would be lost (the reader
                // takes `-NaN` as the negative one).
                out.push_str(if v.is_sign_negative() {
                    " -NaN"
                } else {
                    " NaN"
                });
            } else if v == 0.0 || v.is_infinite() || (1e-5..1e16).contains(&a) {
                let _ = write!(out, " {v}");
            } else {
                let _ = write!(out, " {v:e}");
            }
        }
    }
}

fn check_value(v: f64, field: MtxField, what: impl Fn() -> String) -> Result<(), MtxError> {
    if field == MtxField::Integer && !(v.fract() == 0.0 && v.abs() < 9.2e18) {
        return Err(write_err(format!(
            "{} has value {v}, which is not an integer",
            what()
        )));
    }
    Ok(())
}

fn write_banner<W: Write>(w: &mut W, format: &str, opts: &MtxWriteOptions) -> Result<(), MtxError> {
    writeln!(
        w,
        "%%MatrixMarket matrix {format} {} {}",
        opts.field, opts.symmetry
    )
    .map_err(io_err)?;
    for c in &opts.comments {
        if c.contains('\n') {
            return Err(write_err(format!("comment `{c}` spans several lines")));
        }
        writeln!(w, "%{c}").map_err(io_err)?;
    }
    Ok(())
}

/// Finds the value at `(i, j)` in a canonical (sorted) 2-D COO tensor.
fn lookup(coo: &CooTensor, i: usize, j: usize) -> Option<f64> {
    let nnz = coo.values.len();
    let (mut lo, mut hi) = (0, nnz);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if (coo.coords[2 * mid], coo.coords[2 * mid + 1]) < (i, j) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    (lo < nnz && (coo.coords[2 * lo], coo.coords[2 * lo + 1]) == (i, j)).then(|| coo.values[lo])
}

/// Writes a canonical 2-D COO tensor as a `coordinate` file. Indices are written
/// 1-based; `pattern` drops the values.
pub fn write_coo<W: Write>(
    writer: W,
    coo: &CooTensor,
    opts: &MtxWriteOptions,
) -> Result<(), MtxError> {
    if coo.shape.len() != 2 {
        return Err(write_err(format!(
            "Matrix Market holds matrices; this tensor has order {}",
            coo.shape.len()
        )));
    }
    coo.check_ranges()
        .map_err(|e| write_err(format!("invalid COO tensor: {e}")))?;
    let (rows, cols) = (coo.shape[0], coo.shape[1]);
    let sym = opts.symmetry;
    if sym == MtxSymmetry::SkewSymmetric && opts.field == MtxField::Pattern {
        return Err(write_err(
            "a `pattern` matrix cannot be `skew-symmetric`".into(),
        ));
    }
    if sym != MtxSymmetry::General && rows != cols {
        return Err(write_err(format!(
            "a {sym} matrix must be square, this one is {rows} x {cols}"
        )));
    }
    let sorted = (1..coo.values.len()).all(|e| {
        (coo.coords[2 * e - 2], coo.coords[2 * e - 1]) < (coo.coords[2 * e], coo.coords[2 * e + 1])
    });
    if sym != MtxSymmetry::General && !sorted {
        return Err(write_err(
            "symmetric output needs a canonical (sorted, duplicate-free) COO tensor".into(),
        ));
    }
    // Which entries to write, after checking the symmetry.
    let mut keep = Vec::with_capacity(coo.values.len());
    for e in 0..coo.values.len() {
        let (i, j, v) = (coo.coords[2 * e], coo.coords[2 * e + 1], coo.values[e]);
        check_value(v, opts.field, || format!("entry {e} at ({i}, {j})"))?;
        match sym {
            MtxSymmetry::General => keep.push(e),
            MtxSymmetry::Symmetric | MtxSymmetry::SkewSymmetric => {
                let skew = sym == MtxSymmetry::SkewSymmetric;
                if skew && i == j {
                    return Err(write_err(format!(
                        "diagonal entry ({i}, {i}) in a skew-symmetric matrix"
                    )));
                }
                let mirror = lookup(coo, j, i);
                let ok = match (mirror, opts.field) {
                    (None, _) => false,
                    (Some(_), MtxField::Pattern) => true,
                    (Some(m), _) => {
                        if skew {
                            m == -v
                        } else {
                            m == v || (m.is_nan() && v.is_nan())
                        }
                    }
                };
                if !ok {
                    return Err(write_err(format!(
                        "entry ({i}, {j}) = {v} has no matching {sym} mirror at ({j}, {i}) (found {mirror:?})"
                    )));
                }
                if i >= j {
                    keep.push(e);
                }
            }
        }
    }
    let mut w = BufWriter::new(writer);
    write_banner(&mut w, "coordinate", opts)?;
    writeln!(w, "{rows} {cols} {}", keep.len()).map_err(io_err)?;
    let mut line = String::with_capacity(64);
    for e in keep {
        use std::fmt::Write as _;
        line.clear();
        let _ = write!(
            line,
            "{} {}",
            coo.coords[2 * e] + 1,
            coo.coords[2 * e + 1] + 1
        );
        push_value(&mut line, coo.values[e], opts.field);
        line.push('\n');
        w.write_all(line.as_bytes()).map_err(io_err)?;
    }
    w.flush().map_err(io_err)
}

/// Writes a dense matrix (row-major `values`) as an `array` file (column-major, as the
/// format requires; one triangle for symmetric storage).
pub fn write_dense<W: Write>(
    writer: W,
    shape: &[usize],
    values: &[f64],
    opts: &MtxWriteOptions,
) -> Result<(), MtxError> {
    if shape.len() != 2 {
        return Err(write_err(format!(
            "Matrix Market holds matrices; this tensor has order {}",
            shape.len()
        )));
    }
    let (rows, cols) = (shape[0], shape[1]);
    if rows.checked_mul(cols) != Some(values.len()) {
        return Err(write_err(format!(
            "{} values for a {rows} x {cols} matrix",
            values.len()
        )));
    }
    if opts.field == MtxField::Pattern {
        return Err(write_err(
            "`array` files cannot have the `pattern` field".into(),
        ));
    }
    let sym = opts.symmetry;
    if sym != MtxSymmetry::General && rows != cols {
        return Err(write_err(format!(
            "a {sym} matrix must be square, this one is {rows} x {cols}"
        )));
    }
    for i in 0..rows {
        for j in 0..cols {
            let v = values[i * cols + j];
            check_value(v, opts.field, || format!("element ({i}, {j})"))?;
            if sym == MtxSymmetry::General {
                continue;
            }
            let m = values[j * cols + i];
            let ok = match sym {
                MtxSymmetry::General => true,
                MtxSymmetry::Symmetric => m == v || (m.is_nan() && v.is_nan()),
                MtxSymmetry::SkewSymmetric => m == -v && (i != j || v == 0.0),
            };
            if !ok {
                return Err(write_err(format!(
                    "element ({i}, {j}) = {v} breaks {sym} symmetry (({j}, {i}) = {m})"
                )));
            }
        }
    }
    let mut w = BufWriter::new(writer);
    write_banner(&mut w, "array", opts)?;
    writeln!(w, "{rows} {cols}").map_err(io_err)?;
    let mut line = String::with_capacity(32);
    // No element: nothing to walk (a 0 x 10^10 matrix must not loop over its columns).
    let cols_to_walk = if values.is_empty() { 0 } else { cols };
    for j in 0..cols_to_walk {
        let start = match sym {
            MtxSymmetry::General => 0,
            MtxSymmetry::Symmetric => j,
            MtxSymmetry::SkewSymmetric => j + 1,
        };
        for i in start..rows {
            line.clear();
            push_value(&mut line, values[i * cols + j], opts.field);
            line.push('\n');
            // `push_value` starts with a separating space.
            w.write_all(&line.as_bytes()[1..]).map_err(io_err)?;
        }
    }
    w.flush().map_err(io_err)
}

/// Writes `data` to `writer` (coordinate or array according to the variant).
pub fn write<W: Write>(writer: W, data: &MtxData, opts: &MtxWriteOptions) -> Result<(), MtxError> {
    match data {
        MtxData::Sparse(coo) => write_coo(writer, coo, opts),
        MtxData::Dense { shape, values } => write_dense(writer, shape, values, opts),
    }
}

/// Writes `data` to the file at `path`, gzip-compressed when the path ends in `.gz`.
pub fn write_path(
    path: impl AsRef<Path>,
    data: &MtxData,
    opts: &MtxWriteOptions,
) -> Result<(), MtxError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let file = File::create(path).map_err(|e| MtxError::io(&name, 0, &e))?;
    let rename = |e: MtxError| match e {
        MtxError::Io { line, message, .. } => MtxError::Io {
            path: name.clone(),
            line,
            message,
        },
        other => other,
    };
    if path.extension().is_some_and(|x| x == "gz") {
        let mut gz = GzEncoder::new(file, Compression::default());
        write(&mut gz, data, opts).map_err(rename)?;
        gz.finish().map_err(|e| MtxError::io(&name, 0, &e))?;
        Ok(())
    } else {
        write(file, data, opts).map_err(rename)
    }
}
