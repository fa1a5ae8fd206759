//! Conversion between any two formats through the canonical COO form.
//!
//! [`from_coo`] builds every structure array of a named format from a canonical
//! [`CooTensor`]; the produced axes follow [`Format::layout`] exactly (order, kinds,
//! parents, `unique`, lengths), positions follow the global position spaces of
//! [`crate::axis`], and values are laid out by [`crate::Structure::value_offset`].
//! [`to_coo`] is generic: it walks the axes with their capabilities and maps axis
//! coordinates to logical ones with the layout's `to_logical`, never asking which named
//! format it reads.
//!
//! Padded formats (those with [`Format::pads`], and `ragged`, whose rows are dense runs)
//! cannot tell an explicit zero from padding, so [`to_coo`] drops every stored zero of
//! such formats: they do not keep explicit zeros through a round trip.
//!
//! Index type: i32 unless a dimension or a position count exceeds `i32::MAX`, then i64
//! ([`from_coo_with_index`] forces one and fails when it does not fit).
//!
//! ```
//! use sparsile_formats::{convert, CooTensor, Format};
//! use sparsile_ir::DType;
//! let coo = CooTensor::from_triplets(vec![3, 5], &[(0, 1, 1.0), (2, 4, 2.0)]).unwrap();
//! let ell = convert::from_coo(&coo, &Format::Ell { k: Some(2) }, DType::F32).unwrap();
//! // 3 rows x 2 slots; padding slots hold the sentinel coordinate 5
//! assert_eq!(ell.structure.axes[1].indices.as_ref().unwrap().to_usizes(), vec![1, 5, 5, 5, 4, 5]);
//! assert_eq!(convert::to_coo(&ell).unwrap(), coo);
//! ```

mod block;
mod compressed;
mod dense;
mod diagonal;
mod ell;
mod plan;
mod walk;

use std::borrow::Cow;

use sparsile_ir::{DType, IndexType};

use crate::{CooTensor, Format, FormatError, SparseTensor};

pub(crate) use dense::dense_size;
pub(crate) use walk::walk_stored;

/// Builds `format` from a COO tensor (canonicalised first when it is not sorted),
/// with values of type `dtype` and the narrowest index type that fits.
pub fn from_coo(
    coo: &CooTensor,
    format: &Format,
    dtype: DType,
) -> Result<SparseTensor<'static>, FormatError> {
    from_coo_with_index(coo, format, dtype, None)
}

/// Like [`from_coo`], with the index type forced when `index_type` is given (an error
/// when a dimension or a position count does not fit it).
pub fn from_coo_with_index(
    coo: &CooTensor,
    format: &Format,
    dtype: DType,
    index_type: Option<IndexType>,
) -> Result<SparseTensor<'static>, FormatError> {
    if !dtype.is_float() {
        return Err(FormatError::UnsupportedDType { dtype });
    }
    format.layout(coo.ndim())?;
    coo.check_ranges()?;
    let coo = canonical(coo)?;
    let coo = coo.as_ref();
    let (axes, values) = match format {
        Format::Dense => dense::dense(coo)?,
        Format::Coo => dense::coo(coo),
        Format::Ragged => dense::ragged(coo)?,
        Format::Csr => compressed::csr(coo)?,
        Format::Csc => compressed::csc(coo)?,
        Format::Dcsr => compressed::dcsr(coo),
        Format::Csf => compressed::csf(coo)?,
        Format::Bsr { r, c } => block::bsr(coo, *r, *c, false)?,
        Format::Dbsr { r, c } => block::bsr(coo, *r, *c, true)?,
        Format::SrBcrs { t, g } => block::srbcrs(coo, *t, *g)?,
        Format::Ell { k } => ell::ell(coo, *k)?,
        Format::Dia => diagonal::dia(coo)?,
    };
    plan::finish(format, &coo.shape, axes, &values, dtype, index_type)
}

/// `coo` itself when sorted without duplicates, else a sorted copy (duplicates are an
/// error).
fn canonical(coo: &CooTensor) -> Result<Cow<'_, CooTensor>, FormatError> {
    let sorted = (1..coo.nnz()).all(|e| coo.coord(e - 1) < coo.coord(e));
    if sorted {
        return Ok(Cow::Borrowed(coo));
    }
    let mut copy = coo.clone();
    copy.sort_and_reject_duplicates()?;
    Ok(Cow::Owned(copy))
}

/// Whether stored zeros of `format` are indistinguishable from padding and dropped by
/// [`to_coo`].
pub fn drops_zeros(format: &Format) -> bool {
    format.pads() || matches!(format, Format::Ragged)
}

/// The canonical COO form of `t`: every stored element that is not padding, mapped to
/// logical coordinates, sorted. Stored zeros are dropped for formats where
/// [`drops_zeros`] holds. `t` must be valid (built by this crate or checked by
/// [`crate::validate`]).
pub fn to_coo(t: &SparseTensor<'_>) -> Result<CooTensor, FormatError> {
    let s = &t.structure;
    let layout = s.format.layout(s.shape.len())?;
    let expected = s.nnz_stored();
    if t.values.len() != expected {
        return Err(FormatError::ValuesLength {
            found: t.values.len(),
            expected,
        });
    }
    let drop_zeros = drops_zeros(&s.format);
    let ndim = s.shape.len();
    let mut coo = CooTensor::empty(s.shape.clone());
    let mut logical = vec![0usize; ndim];
    walk_stored(s, |crds, offset| {
        let v = t.values.get_f64(offset);
        if drop_zeros && v == 0.0 {
            return;
        }
        for (d, expr) in layout.to_logical.iter().enumerate() {
            match expr.eval(crds, &[], &s.shape) {
                Some(x) if x >= 0 && (x as u64) < s.shape[d] as u64 => logical[d] = x as usize,
                _ => return,
            }
        }
        coo.coords.extend_from_slice(&logical);
        coo.values.push(v);
    });
    let sorted = (1..coo.nnz()).all(|e| coo.coord(e - 1) < coo.coord(e));
    if !sorted {
        coo.sort_and_reject_duplicates()?;
    }
    Ok(coo)
}

/// A vector of `len` copies of `value`, or [`FormatError::StorageTooLarge`] when the
/// memory cannot be had (a padded format of a large, scattered matrix can need far more
/// than the machine has; that is the user's choice of format, not a crash).
pub(crate) fn filled<T: Clone>(len: usize, value: T, format: &str) -> Result<Vec<T>, FormatError> {
    let too_large = || FormatError::StorageTooLarge {
        format: format.to_string(),
        elements: len,
        element_bytes: std::mem::size_of::<T>(),
        gib: len as f64 * std::mem::size_of::<T>() as f64 / (1u64 << 30) as f64,
    };
    crate::memory::check_fits(
        &format!("storing as {format}"),
        len as u128,
        std::mem::size_of::<T>(),
    )
    .map_err(|_| too_large())?;
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(len).map_err(|_| too_large())?;
    v.resize(len, value);
    Ok(v)
}
