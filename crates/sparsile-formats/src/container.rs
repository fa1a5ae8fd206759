//! Sparsile's own tensor file (`.spt`): a tensor in any format, structure arrays included.
//!
//! Matrix Market holds only coordinates; a tensor converted to BSR, ELL or SR-BCRS keeps
//! its layout (padding, block structure, index type) in this container instead.
//!
//! Layout: the line `SPARSILE-TENSOR 1`, one line of JSON describing format, shape,
//! dtype and every axis, then the raw little-endian arrays in header order (for each
//! axis its `indptr` then its `indices`, then the values).
//!
//! Reading trusts nothing in the file: the header line is read up to
//! [`MAX_HEADER_BYTES`], arrays grow only as their bytes arrive (a header declaring
//! absurd lengths costs nothing before the file ends), and the tensor is then validated
//! exactly as [`SparseTensor::from_parts`] validates user arrays (kinds, parents,
//! lengths, `indptr`, index ranges, order, duplicates, value count), so a damaged or
//! hostile file is a [`FormatError`], never a panic or a tensor that reads wrongly.
//!
//! ```
//! use sparsile_formats::{container, CooTensor, Format, SparseTensor};
//! let coo = CooTensor::from_triplets(vec![2, 2], &[(0, 1, 3.0), (1, 0, 4.0)]).unwrap();
//! let t = SparseTensor::from_coo(&coo, &Format::Csr).unwrap();
//! let mut bytes = Vec::new();
//! container::write(&mut bytes, &t).unwrap();
//! let back = container::read(&mut bytes.as_slice()).unwrap();
//! assert_eq!(back, t);
//! ```

use std::borrow::Cow;
use std::io::{BufRead, BufReader, Read, Write};

use half::{bf16, f16};
use serde::{Deserialize, Serialize};
use sparsile_ir::{AxisKind, DType, IndexType};

use crate::{AxisStorage, Format, FormatError, IndexArray, SparseTensor, Values};

const MAGIC: &str = "SPARSILE-TENSOR 1";

/// The longest header line (JSON) a tensor file may have.
pub const MAX_HEADER_BYTES: u64 = 1 << 20;

#[derive(Serialize, Deserialize)]
struct AxisHeader {
    kind: String,
    parent: Option<usize>,
    length: usize,
    npos: usize,
    nnz_per_parent: Option<usize>,
    unique: bool,
    index_type: String,
    indptr_len: Option<usize>,
    indices_len: Option<usize>,
}

#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    shape: Vec<usize>,
    dtype: String,
    axes: Vec<AxisHeader>,
    values_len: usize,
}

fn io_err(e: std::io::Error) -> FormatError {
    FormatError::Other(format!("tensor file: {e}"))
}

fn bad(msg: impl Into<String>) -> FormatError {
    FormatError::Other(format!("tensor file: {}", msg.into()))
}

fn write_index(w: &mut impl Write, a: &IndexArray<'_>) -> std::io::Result<()> {
    match a {
        IndexArray::I32(v) => v.iter().try_for_each(|x| w.write_all(&x.to_le_bytes())),
        IndexArray::I64(v) => v.iter().try_for_each(|x| w.write_all(&x.to_le_bytes())),
    }
}

/// Writes `t` to `w`.
pub fn write(w: &mut impl Write, t: &SparseTensor<'_>) -> Result<(), FormatError> {
    let s = &t.structure;
    let header = Header {
        format: s.format.to_string(),
        shape: s.shape.clone(),
        dtype: t.dtype().name().to_string(),
        axes: s
            .axes
            .iter()
            .map(|a| AxisHeader {
                kind: a.kind.name().to_string(),
                parent: a.parent,
                length: a.length,
                npos: a.npos,
                nnz_per_parent: a.nnz_per_parent,
                unique: a.unique,
                index_type: a.index_type().name().to_string(),
                indptr_len: a.indptr.as_ref().map(|x| x.len()),
                indices_len: a.indices.as_ref().map(|x| x.len()),
            })
            .collect(),
        values_len: t.values.len(),
    };
    let json = serde_json::to_string(&header).map_err(|e| bad(e.to_string()))?;
    let mut w = std::io::BufWriter::new(w);
    writeln!(w, "{MAGIC}").map_err(io_err)?;
    writeln!(w, "{json}").map_err(io_err)?;
    for a in &s.axes {
        for arr in [&a.indptr, &a.indices].into_iter().flatten() {
            write_index(&mut w, arr).map_err(io_err)?;
        }
    }
    let values: std::io::Result<()> = match &t.values {
        Values::F16(v) => v.iter().try_for_each(|x| w.write_all(&x.to_le_bytes())),
        Values::BF16(v) => v.iter().try_for_each(|x| w.write_all(&x.to_le_bytes())),
        Values::F32(v) => v.iter().try_for_each(|x| w.write_all(&x.to_le_bytes())),
        Values::F64(v) => v.iter().try_for_each(|x| w.write_all(&x.to_le_bytes())),
    };
    values.map_err(io_err)?;
    w.flush().map_err(io_err)
}

fn read_exact_vec<const N: usize, T>(
    r: &mut impl Read,
    len: usize,
    what: &str,
    f: fn([u8; N]) -> T,
) -> Result<Vec<T>, FormatError> {
    let bytes = len
        .checked_mul(N)
        .ok_or_else(|| bad(format!("{what}: length {len} too large")))?;
    let mut buf = Vec::new();
    r.take(bytes as u64).read_to_end(&mut buf).map_err(io_err)?;
    if buf.len() != bytes {
        return Err(bad(format!(
            "{what}: file ends after {} of {bytes} bytes",
            buf.len()
        )));
    }
    Ok(buf
        .chunks_exact(N)
        .map(|c| f(c.try_into().expect("chunk of N bytes")))
        .collect())
}

fn read_index(
    r: &mut impl Read,
    len: usize,
    it: IndexType,
    what: &str,
) -> Result<IndexArray<'static>, FormatError> {
    Ok(match it {
        IndexType::I32 => IndexArray::I32(Cow::Owned(read_exact_vec(
            r,
            len,
            what,
            i32::from_le_bytes,
        )?)),
        IndexType::I64 => IndexArray::I64(Cow::Owned(read_exact_vec(
            r,
            len,
            what,
            i64::from_le_bytes,
        )?)),
    })
}

/// Reads one line of at most `max` bytes (without its end); an error past that.
fn read_bounded_line(r: &mut impl BufRead, max: u64, which: &str) -> Result<String, FormatError> {
    let mut bytes = Vec::new();
    r.take(max + 1)
        .read_until(b'\n', &mut bytes)
        .map_err(io_err)?;
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    } else if bytes.len() as u64 > max {
        return Err(bad(format!("{which} is longer than {max} bytes")));
    }
    String::from_utf8(bytes).map_err(|_| bad(format!("{which} is not UTF-8 text")))
}

/// Reads a tensor written by [`write`] and validates it like
/// [`SparseTensor::from_parts`]: every problem is an error naming the part of the file.
pub fn read(r: &mut impl Read) -> Result<SparseTensor<'static>, FormatError> {
    let mut r = BufReader::new(r);
    let magic = read_bounded_line(&mut r, MAGIC.len() as u64 + 2, "line 1")?;
    if magic.trim_end() != MAGIC {
        return Err(bad(format!(
            "line 1: expected `{MAGIC}`, found `{}`",
            magic.trim_end().escape_debug()
        )));
    }
    let line = read_bounded_line(&mut r, MAX_HEADER_BYTES, "line 2 (the header)")?;
    let header: Header =
        serde_json::from_str(&line).map_err(|e| bad(format!("line 2: bad header: {e}")))?;
    let format: Format = header.format.parse()?;
    let dtype: DType = header.dtype.parse().map_err(|e: String| bad(e))?;
    let mut axes = Vec::with_capacity(header.axes.len());
    for (k, a) in header.axes.iter().enumerate() {
        let kind: AxisKind = a
            .kind
            .parse()
            .map_err(|e: String| bad(format!("axis {k}: {e}")))?;
        let it: IndexType = a
            .index_type
            .parse()
            .map_err(|e: String| bad(format!("axis {k}: {e}")))?;
        let indptr = a
            .indptr_len
            .map(|n| read_index(&mut r, n, it, &format!("axis {k} indptr")))
            .transpose()?;
        let indices = a
            .indices_len
            .map(|n| read_index(&mut r, n, it, &format!("axis {k} indices")))
            .transpose()?;
        axes.push(AxisStorage {
            kind,
            parent: a.parent,
            length: a.length,
            npos: a.npos,
            nnz_per_parent: a.nnz_per_parent,
            indptr,
            indices,
            unique: a.unique,
        });
    }
    let n = header.values_len;
    let values = match dtype {
        DType::F16 => Values::F16(Cow::Owned(read_exact_vec(&mut r, n, "values", |b| {
            f16::from_le_bytes(b)
        })?)),
        DType::BF16 => Values::BF16(Cow::Owned(read_exact_vec(&mut r, n, "values", |b| {
            bf16::from_le_bytes(b)
        })?)),
        DType::F32 => Values::F32(Cow::Owned(read_exact_vec(
            &mut r,
            n,
            "values",
            f32::from_le_bytes,
        )?)),
        DType::F64 => Values::F64(Cow::Owned(read_exact_vec(
            &mut r,
            n,
            "values",
            f64::from_le_bytes,
        )?)),
        DType::I32 | DType::I64 => {
            return Err(bad(format!(
                "values of integer type {dtype} are not supported"
            )))
        }
    };
    let mut rest = [0u8; 1];
    if r.read(&mut rest).map_err(io_err)? != 0 {
        return Err(bad("trailing bytes after the values"));
    }
    SparseTensor::from_parts(format, &header.shape, axes, values)
}
