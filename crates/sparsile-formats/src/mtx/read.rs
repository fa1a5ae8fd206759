//! Reading Matrix Market files: a hand-written line parser over a buffered reader,
//! with transparent gzip decompression (detected by the magic bytes `1f 8b`).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use flate2::bufread::MultiGzDecoder;

use crate::mtx::header::{parse_banner, parse_size_line, parse_u64};
use crate::mtx::{MtxData, MtxError, MtxField, MtxFormat, MtxHeader, MtxSymmetry};
use crate::CooTensor;

/// What to do with two entries at the same coordinate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Duplicates {
    /// An error naming the lines of both entries.
    #[default]
    Reject,
    /// Add the values.
    Sum,
}

/// Options for reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MtxReadOptions {
    pub duplicates: Duplicates,
}

/// Entries reserved up front at most (the rest grows as read), so that a size line
/// declaring absurd counts cannot exhaust memory before any entry is read.
const MAX_RESERVE: usize = 1 << 18;

/// The longest line (in bytes, without its end) a Matrix Market file may have: an entry
/// line is a few dozen bytes, and an endless line (`/dev/zero`) must not grow a buffer
/// until memory runs out.
pub const MAX_LINE_BYTES: usize = 1 << 20;

const BUF_SIZE: usize = 1 << 16;

/// Reads a Matrix Market file from `reader` (plain text or gzip).
pub fn read<R: Read>(reader: R, opts: &MtxReadOptions) -> Result<MtxData, MtxError> {
    read_with_header(reader, opts).map(|(_, data)| data)
}

/// Like [`read`], also returning the header (banner, comments, size line).
pub fn read_with_header<R: Read>(
    reader: R,
    opts: &MtxReadOptions,
) -> Result<(MtxHeader, MtxData), MtxError> {
    read_named(reader, "<reader>", opts)
}

/// Reads the Matrix Market file at `path` (plain text or gzip, whatever its extension).
pub fn read_path(path: impl AsRef<Path>, opts: &MtxReadOptions) -> Result<MtxData, MtxError> {
    read_path_with_header(path, opts).map(|(_, data)| data)
}

/// Like [`read_path`], also returning the header.
pub fn read_path_with_header(
    path: impl AsRef<Path>,
    opts: &MtxReadOptions,
) -> Result<(MtxHeader, MtxData), MtxError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| MtxError::io(&name, 0, &e))?;
    read_named(file, &name, opts)
}

fn read_named<R: Read>(
    reader: R,
    name: &str,
    opts: &MtxReadOptions,
) -> Result<(MtxHeader, MtxData), MtxError> {
    let mut raw = BufReader::with_capacity(BUF_SIZE, reader);
    let magic = raw.fill_buf().map_err(|e| MtxError::io(name, 0, &e))?;
    let input: Box<dyn BufRead + '_> = if magic.starts_with(&[0x1f, 0x8b]) {
        Box::new(BufReader::with_capacity(BUF_SIZE, MultiGzDecoder::new(raw)))
    } else {
        Box::new(raw)
    };
    let mut lines = Lines {
        input,
        buf: Vec::with_capacity(256),
        line: 0,
        name,
    };
    let header = read_header(&mut lines)?;
    let data = match header.format {
        MtxFormat::Coordinate => read_coordinate(&mut lines, &header, opts)?,
        MtxFormat::Array => read_array(&mut lines, &header)?,
    };
    Ok((header, data))
}

/// The input split into lines, with the current 1-based line number.
struct Lines<'a> {
    input: Box<dyn BufRead + 'a>,
    buf: Vec<u8>,
    line: usize,
    name: &'a str,
}

impl Lines<'_> {
    /// Reads the next line into `buf` (without the line end); `false` at the end.
    fn advance(&mut self) -> Result<bool, MtxError> {
        self.buf.clear();
        let n = (&mut self.input)
            .take(MAX_LINE_BYTES as u64 + 2)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| MtxError::io(self.name, self.line + 1, &e))?;
        if n == 0 {
            return Ok(false);
        }
        self.line += 1;
        let ended = self.buf.last() == Some(&b'\n');
        if self.buf.len() - usize::from(ended) > MAX_LINE_BYTES + 1 {
            return Err(MtxError::LineTooLong {
                line: self.line,
                max: MAX_LINE_BYTES,
            });
        }
        while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
            self.buf.pop();
        }
        Ok(true)
    }

    /// Whether the current line is blank or a comment.
    fn is_skippable(&self) -> bool {
        match self.buf.iter().position(|b| !b.is_ascii_whitespace()) {
            None => true,
            Some(i) => self.buf[i] == b'%',
        }
    }
}

fn read_header(lines: &mut Lines<'_>) -> Result<MtxHeader, MtxError> {
    if !lines.advance()? {
        return Err(MtxError::BadHeader {
            line: 1,
            reason: "empty input (expected a `%%MatrixMarket` banner)".into(),
        });
    }
    let banner = String::from_utf8_lossy(&lines.buf).into_owned();
    let (format, field, symmetry) = parse_banner(&banner, lines.line)?;
    let mut comments = Vec::new();
    loop {
        if !lines.advance()? {
            return Err(MtxError::BadSizeLine {
                line: lines.line + 1,
                reason: "file ends before the size line".into(),
            });
        }
        let first = lines.buf.iter().position(|b| !b.is_ascii_whitespace());
        match first {
            None => continue,
            Some(i) if lines.buf[i] == b'%' => {
                comments.push(String::from_utf8_lossy(&lines.buf[i + 1..]).into_owned());
            }
            Some(_) => break,
        }
    }
    let (rows, cols, entries) = parse_size_line(&lines.buf, lines.line, format, symmetry)?;
    Ok(MtxHeader {
        format,
        field,
        symmetry,
        comments,
        rows,
        cols,
        entries,
    })
}

fn token_str(token: &[u8]) -> String {
    String::from_utf8_lossy(token).into_owned()
}

/// Parses a value of `field` (not `pattern`).
fn parse_value(token: &[u8], field: MtxField, line: usize) -> Result<f64, MtxError> {
    match field {
        MtxField::Integer => {
            let (neg, digits) = match token.first() {
                Some(b'-') => (true, &token[1..]),
                Some(b'+') => (false, &token[1..]),
                _ => (false, token),
            };
            let v = parse_u64(digits).ok_or_else(|| MtxError::BadEntry {
                line,
                reason: format!("`{}` is not an integer", token_str(token)),
            })? as f64;
            Ok(if neg { -v } else { v })
        }
        _ => {
            let parsed = std::str::from_utf8(token)
                .ok()
                .and_then(|s| s.parse::<f64>().ok().or_else(|| fortran_float(s)));
            parsed.ok_or_else(|| MtxError::BadEntry {
                line,
                reason: format!("`{}` is not a real number", token_str(token)),
            })
        }
    }
}

/// Fortran-style exponents (`1.5D+02`) that some Matrix Market writers emit.
fn fortran_float(s: &str) -> Option<f64> {
    if s.contains(['d', 'D']) {
        s.replace(['d', 'D'], "e").parse().ok()
    } else {
        None
    }
}

/// Parses a 1-based index and checks it against `dim`; returns it 0-based.
fn parse_index(
    token: &[u8],
    axis: &'static str,
    dim: usize,
    line: usize,
) -> Result<usize, MtxError> {
    let v = parse_u64(token).ok_or_else(|| MtxError::BadEntry {
        line,
        reason: format!(
            "{axis} index `{}` is not a positive integer",
            token_str(token)
        ),
    })?;
    if v == 0 || v > dim as u64 {
        return Err(MtxError::IndexOutOfRange {
            line,
            axis,
            index: v,
            dim,
        });
    }
    Ok(v as usize - 1)
}

fn reserve<T>(v: &mut Vec<T>, n: usize, line: usize) -> Result<(), MtxError> {
    v.try_reserve_exact(n).map_err(|_| MtxError::BadSizeLine {
        line,
        reason: format!("cannot allocate room for {n} values"),
    })
}

fn read_coordinate(
    lines: &mut Lines<'_>,
    header: &MtxHeader,
    opts: &MtxReadOptions,
) -> Result<MtxData, MtxError> {
    let (rows, cols, declared) = (header.rows, header.cols, header.entries);
    let mirrored = header.symmetry != MtxSymmetry::General;
    let stored_guess = declared.min(MAX_RESERVE) * if mirrored { 2 } else { 1 };
    let mut coords: Vec<usize> = Vec::new();
    let mut values: Vec<f64> = Vec::new();
    reserve(&mut coords, 2 * stored_guess, lines.line)?;
    reserve(&mut values, stored_guess, lines.line)?;
    let keep_lines = opts.duplicates == Duplicates::Reject;
    let mut entry_lines: Vec<usize> = Vec::new();
    if keep_lines {
        reserve(&mut entry_lines, stored_guess, lines.line)?;
    }
    let expected_fields = if header.field == MtxField::Pattern {
        2
    } else {
        3
    };
    // Whether entries so far are in strictly increasing (row, col) order.
    let mut increasing = true;
    let mut found = 0usize;
    while lines.advance()? {
        if lines.is_skippable() {
            continue;
        }
        let line = lines.line;
        if found == declared {
            return Err(MtxError::TooManyEntries { line, declared });
        }
        let mut fields: [&[u8]; 3] = [&[]; 3];
        let mut n = 0;
        for token in lines.buf.split(|b| b.is_ascii_whitespace()) {
            if token.is_empty() {
                continue;
            }
            if n < 3 {
                fields[n] = token;
            }
            n += 1;
        }
        if n != expected_fields {
            return Err(MtxError::BadEntry {
                line,
                reason: format!(
                    "expected {expected_fields} fields ({}) for a {} file, found {n}",
                    if expected_fields == 2 {
                        "row col"
                    } else {
                        "row col value"
                    },
                    header.field
                ),
            });
        }
        let i = parse_index(fields[0], "row", rows, line)?;
        let j = parse_index(fields[1], "column", cols, line)?;
        let v = if header.field == MtxField::Pattern {
            1.0
        } else {
            parse_value(fields[2], header.field, line)?
        };
        if increasing {
            let n = coords.len();
            if n >= 2 {
                increasing = (coords[n - 2], coords[n - 1]) < (i, j);
            }
        }
        coords.push(i);
        coords.push(j);
        values.push(v);
        if keep_lines {
            entry_lines.push(line);
        }
        if mirrored && i != j {
            let mirror = match header.symmetry {
                MtxSymmetry::SkewSymmetric => -v,
                _ => v,
            };
            coords.push(j);
            coords.push(i);
            values.push(mirror);
            if keep_lines {
                entry_lines.push(line);
            }
            increasing = false;
        } else if i == j && header.symmetry == MtxSymmetry::SkewSymmetric {
            return Err(MtxError::SkewDiagonal { line, index: i + 1 });
        }
        found += 1;
    }
    if found < declared {
        return Err(MtxError::TooFewEntries {
            line: lines.line,
            found,
            declared,
        });
    }
    let mut coo = CooTensor {
        shape: vec![rows, cols],
        coords,
        values,
    };
    if !increasing {
        canonicalize(&mut coo, &entry_lines, opts.duplicates)?;
    }
    Ok(MtxData::Sparse(coo))
}

/// Sorts entries (stably) and rejects or sums duplicates.
fn canonicalize(
    coo: &mut CooTensor,
    entry_lines: &[usize],
    duplicates: Duplicates,
) -> Result<(), MtxError> {
    let nnz = coo.values.len();
    let key = |e: usize| (coo.coords[2 * e], coo.coords[2 * e + 1]);
    let mut order: Vec<usize> = (0..nnz).collect();
    order.sort_by_key(|&e| key(e));
    let mut coords = Vec::with_capacity(coo.coords.len());
    let mut values: Vec<f64> = Vec::with_capacity(nnz);
    let mut last: Option<usize> = None;
    for &e in &order {
        let (i, j) = key(e);
        if let Some(prev) = last {
            if key(prev) == (i, j) {
                match duplicates {
                    Duplicates::Reject => {
                        let (a, b) = (entry_lines[prev], entry_lines[e]);
                        return Err(MtxError::DuplicateEntry {
                            first_line: a.min(b),
                            second_line: a.max(b),
                            row: i + 1,
                            col: j + 1,
                        });
                    }
                    Duplicates::Sum => {
                        *values.last_mut().expect("a previous entry exists") += coo.values[e];
                        continue;
                    }
                }
            }
        }
        coords.push(i);
        coords.push(j);
        values.push(coo.values[e]);
        last = Some(e);
    }
    coo.coords = coords;
    coo.values = values;
    Ok(())
}

fn read_array(lines: &mut Lines<'_>, header: &MtxHeader) -> Result<MtxData, MtxError> {
    let (rows, cols, declared) = (header.rows, header.cols, header.entries);
    let total = rows
        .checked_mul(cols)
        .ok_or_else(|| MtxError::BadSizeLine {
            line: lines.line,
            reason: format!("{rows} x {cols} elements overflow"),
        })?;
    // The values in file order, growing as lines arrive: the matrix itself is allocated
    // only once every declared value was read, so a short file declaring a huge matrix
    // costs nothing.
    let mut stored: Vec<f64> = Vec::new();
    reserve(&mut stored, declared.min(MAX_RESERVE), lines.line)?;
    while lines.advance()? {
        if lines.is_skippable() {
            continue;
        }
        let line = lines.line;
        if stored.len() == declared {
            return Err(MtxError::TooManyEntries { line, declared });
        }
        let mut tokens = lines
            .buf
            .split(|b| b.is_ascii_whitespace())
            .filter(|t| !t.is_empty());
        let token = tokens.next().expect("a non-blank line has a token");
        let extra = tokens.count();
        if extra != 0 {
            return Err(MtxError::BadEntry {
                line,
                reason: format!(
                    "expected 1 value per line in an array file, found {}",
                    extra + 1
                ),
            });
        }
        stored.push(parse_value(token, header.field, line)?);
    }
    if stored.len() < declared {
        return Err(MtxError::TooFewEntries {
            line: lines.line,
            found: stored.len(),
            declared,
        });
    }
    let mut values = crate::memory::filled(total, 0.0, "the dense matrix").map_err(|e| {
        MtxError::BadSizeLine {
            line: lines.line,
            reason: e.to_string(),
        }
    })?;
    // Column-major walk over the stored part: (i, j) is the next element to fill.
    let first_row = |j: usize| match header.symmetry {
        MtxSymmetry::General => 0,
        MtxSymmetry::Symmetric => j,
        MtxSymmetry::SkewSymmetric => j + 1,
    };
    let (mut i, mut j) = (first_row(0), 0usize);
    for v in stored {
        while i >= rows {
            j += 1;
            i = first_row(j);
        }
        values[i * cols + j] = v;
        match header.symmetry {
            MtxSymmetry::General => {}
            MtxSymmetry::Symmetric => values[j * cols + i] = v,
            MtxSymmetry::SkewSymmetric => values[j * cols + i] = -v,
        }
        i += 1;
    }
    Ok(MtxData::Dense {
        shape: vec![rows, cols],
        values,
    })
}
