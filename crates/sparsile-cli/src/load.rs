//! Reading and writing tensor files: Matrix Market (`.mtx`, `.mtx.gz`) and Sparsile's
//! own container (`.spt`, any format with its structure arrays).

use std::fs::File;
use std::path::Path;

use anyhow::{Context, Result};
use sparsile_formats::mtx::{self, MtxField, MtxWriteOptions};
use sparsile_formats::{container, CooTensor, Format, MtxData, MtxReadOptions, SparseTensor};
use sparsile_ir::DType;

/// A tensor as read from a file.
pub enum Loaded {
    /// A Matrix Market file (coordinate → sparse, array → dense).
    Mtx(MtxData),
    /// A `.spt` file, in the format it was written in.
    Native(SparseTensor<'static>),
}

impl Loaded {
    pub fn shape(&self) -> Vec<usize> {
        match self {
            Loaded::Mtx(d) => d.shape().to_vec(),
            Loaded::Native(t) => t.shape().to_vec(),
        }
    }

    /// Whether the file holds a sparse tensor (coordinate Matrix Market or a non-dense
    /// `.spt`).
    pub fn is_sparse(&self) -> bool {
        match self {
            Loaded::Mtx(MtxData::Sparse(_)) => true,
            Loaded::Mtx(MtxData::Dense { .. }) => false,
            Loaded::Native(t) => *t.format() != Format::Dense,
        }
    }

    /// The canonical COO form.
    pub fn to_coo(&self) -> Result<CooTensor> {
        Ok(match self {
            Loaded::Mtx(d) => d.clone().into_coo(),
            Loaded::Native(t) => t.to_coo()?,
        })
    }

    /// The tensor in `format` with values of `dtype`.
    pub fn to_tensor(&self, format: &Format, dtype: DType) -> Result<SparseTensor<'static>> {
        let t = match self {
            Loaded::Mtx(MtxData::Dense { shape, values }) if *format == Format::Dense => {
                SparseTensor::dense_from_f64(shape, values, dtype)?
            }
            Loaded::Mtx(MtxData::Sparse(coo)) => SparseTensor::from_coo_with(coo, format, dtype)?,
            Loaded::Mtx(dense) => {
                SparseTensor::from_coo_with(&dense.clone().into_coo(), format, dtype)?
            }
            Loaded::Native(t) if t.format() == format && t.dtype() == dtype => t.clone(),
            Loaded::Native(t) => SparseTensor::from_coo_with(&t.to_coo()?, format, dtype)?,
        };
        Ok(t)
    }
}

/// The most bytes of a text file (a program, a schedule trace) the CLI reads.
pub const MAX_TEXT_BYTES: u64 = 64 << 20;

/// Reads a UTF-8 text file of at most [`MAX_TEXT_BYTES`] (`/dev/zero` is an error, not an
/// endless buffer).
pub fn read_text(path: &Path) -> Result<String> {
    use std::io::Read;
    let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut bytes = Vec::new();
    f.take(MAX_TEXT_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if bytes.len() as u64 > MAX_TEXT_BYTES {
        anyhow::bail!(
            "{} is longer than {MAX_TEXT_BYTES} bytes: not a program or trace file",
            path.display()
        );
    }
    String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8 text", path.display()))
}

fn is_native(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "spt")
}

/// Reads a tensor file.
pub fn read(path: &Path) -> Result<Loaded> {
    if is_native(path) {
        let mut f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let t =
            container::read(&mut f).with_context(|| format!("cannot read {}", path.display()))?;
        Ok(Loaded::Native(t))
    } else {
        let data = mtx::read_path(path, &MtxReadOptions::default())
            .with_context(|| format!("cannot read {}", path.display()))?;
        Ok(Loaded::Mtx(data))
    }
}

/// Writes `t` to `path`: `.spt` keeps its format; Matrix Market gets the coordinates
/// (dense tensors of order 2 as `array`).
pub fn write(path: &Path, t: &SparseTensor<'_>) -> Result<()> {
    if is_native(path) {
        let mut f =
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        container::write(&mut f, t).with_context(|| format!("cannot write {}", path.display()))?;
        return Ok(());
    }
    let data = if *t.format() == Format::Dense && t.shape().len() == 2 {
        MtxData::Dense {
            shape: t.shape().to_vec(),
            values: t.values.to_f64_vec(),
        }
    } else {
        MtxData::Sparse(t.to_coo()?)
    };
    if t.shape().len() != 2 {
        anyhow::bail!(
            "Matrix Market holds matrices only; {} has order {}: write a .spt file instead",
            path.display(),
            t.shape().len()
        );
    }
    mtx::write_path(path, &data, &MtxWriteOptions::general(MtxField::Real))
        .with_context(|| format!("cannot write {}", path.display()))
}
