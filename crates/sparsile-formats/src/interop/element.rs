//! Element types shared by Sparsile value arrays and foreign arrays.

use std::borrow::Cow;

use half::{bf16, f16};
use sparsile_ir::DType;

use crate::Values;

/// A floating-point element type Sparsile stores values in.
pub trait Element: Copy + Send + Sync + 'static {
    const DTYPE: DType;
    /// The value slice, if `values` holds this type.
    fn slice<'v>(values: &'v Values<'_>) -> Option<&'v [Self]>;
    /// Wraps owned or borrowed data as [`Values`].
    fn wrap(data: Cow<'_, [Self]>) -> Values<'_>;
    /// Rounds an f64 to this type.
    fn from_f64(v: f64) -> Self;
    /// Widens to f64.
    fn to_f64(self) -> f64;
}

macro_rules! element {
    ($t:ty, $variant:ident, $from:expr, $to:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn slice<'v>(values: &'v Values<'_>) -> Option<&'v [Self]> {
                match values {
                    Values::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(data: Cow<'_, [Self]>) -> Values<'_> {
                Values::$variant(data)
            }
            fn from_f64(v: f64) -> Self {
                ($from)(v)
            }
            fn to_f64(self) -> f64 {
                ($to)(self)
            }
        }
    };
}

element!(f64, F64, |v: f64| v, |v: f64| v);
element!(f32, F32, |v: f64| v as f32, |v: f32| v as f64);
element!(f16, F16, f16::from_f64, |v: f16| v.to_f64());
element!(bf16, BF16, bf16::from_f64, |v: bf16| v.to_f64());
