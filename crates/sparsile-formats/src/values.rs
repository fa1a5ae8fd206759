//! The value array of a sparse tensor, in f16, bf16, f32 or f64; owned or borrowed.

use std::borrow::Cow;

use half::{bf16, f16};
use sparsile_ir::DType;

/// Values, one per stored position of the leaf axes (padding positions hold zero).
#[derive(Debug, Clone, PartialEq)]
pub enum Values<'a> {
    F16(Cow<'a, [f16]>),
    BF16(Cow<'a, [bf16]>),
    F32(Cow<'a, [f32]>),
    F64(Cow<'a, [f64]>),
}

impl<'a> Values<'a> {
    /// Rounds `values` to `dtype` (which must be a floating-point type).
    pub fn from_f64(values: &[f64], dtype: DType) -> Values<'static> {
        match dtype {
            DType::F16 => Values::F16(Cow::Owned(
                values.iter().map(|&v| f16::from_f64(v)).collect(),
            )),
            DType::BF16 => Values::BF16(Cow::Owned(
                values.iter().map(|&v| bf16::from_f64(v)).collect(),
            )),
            DType::F32 => Values::F32(Cow::Owned(values.iter().map(|&v| v as f32).collect())),
            DType::F64 => Values::F64(Cow::Owned(values.to_vec())),
            DType::I32 | DType::I64 => panic!("Values::from_f64 called with integer dtype {dtype}"),
        }
    }

    pub fn dtype(&self) -> DType {
        match self {
            Values::F16(_) => DType::F16,
            Values::BF16(_) => DType::BF16,
            Values::F32(_) => DType::F32,
            Values::F64(_) => DType::F64,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Values::F16(v) => v.len(),
            Values::BF16(v) => v.len(),
            Values::F32(v) => v.len(),
            Values::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value at `i`, widened to f64.
    #[inline]
    pub fn get_f64(&self, i: usize) -> f64 {
        match self {
            Values::F16(v) => v[i].to_f64(),
            Values::BF16(v) => v[i].to_f64(),
            Values::F32(v) => v[i] as f64,
            Values::F64(v) => v[i],
        }
    }

    /// All values widened to f64.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        (0..self.len()).map(|i| self.get_f64(i)).collect()
    }

    /// A borrowed view.
    pub fn view(&self) -> Values<'_> {
        match self {
            Values::F16(v) => Values::F16(Cow::Borrowed(v)),
            Values::BF16(v) => Values::BF16(Cow::Borrowed(v)),
            Values::F32(v) => Values::F32(Cow::Borrowed(v)),
            Values::F64(v) => Values::F64(Cow::Borrowed(v)),
        }
    }

    /// An owned copy.
    pub fn into_owned(self) -> Values<'static> {
        match self {
            Values::F16(v) => Values::F16(Cow::Owned(v.into_owned())),
            Values::BF16(v) => Values::BF16(Cow::Owned(v.into_owned())),
            Values::F32(v) => Values::F32(Cow::Owned(v.into_owned())),
            Values::F64(v) => Values::F64(Cow::Owned(v.into_owned())),
        }
    }
}
