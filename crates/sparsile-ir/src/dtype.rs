//! Element types of buffers and index types of structure arrays.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The element type of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    /// IEEE half precision (storage only; computed in f32 or f64).
    F16,
    /// bfloat16 (storage only; computed in f32 or f64).
    BF16,
    F32,
    F64,
    I32,
    I64,
}

impl DType {
    pub const ALL: [DType; 6] = [
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::I32,
        DType::I64,
    ];

    /// The name used in the text IR and the index notation.
    pub fn name(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
        }
    }

    /// Whether values of this type are integers (usable as indices).
    pub fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    /// Whether values of this type are floating point.
    pub fn is_float(self) -> bool {
        !self.is_int()
    }

    /// The type values of this type are computed and summed in: f32 for f16 and bf16
    /// (storage types only), the type itself otherwise. Locals and scratch that schedules
    /// make to hold partial sums of a buffer take this type.
    pub fn compute_type(self) -> DType {
        match self {
            DType::F16 | DType::BF16 => DType::F32,
            other => other,
        }
    }

    /// Whether this is a 16-bit storage type (f16 or bf16).
    pub fn is_half(self) -> bool {
        matches!(self, DType::F16 | DType::BF16)
    }

    /// Size of one element in bytes.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DType::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                format!("unknown element type `{s}` (expected f16, bf16, f32, f64, i32 or i64)")
            })
    }
}

/// The integer type of `indptr` / `indices` arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum IndexType {
    I32,
    I64,
}

impl IndexType {
    /// The narrowest index type that can hold every value in `0..=max_value`.
    pub fn for_max(max_value: u64) -> IndexType {
        if max_value <= i32::MAX as u64 {
            IndexType::I32
        } else {
            IndexType::I64
        }
    }

    /// The largest value representable.
    pub fn max_value(self) -> u64 {
        match self {
            IndexType::I32 => i32::MAX as u64,
            IndexType::I64 => i64::MAX as u64,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            IndexType::I32 => "i32",
            IndexType::I64 => "i64",
        }
    }

    /// The matching element type.
    pub fn dtype(self) -> DType {
        match self {
            IndexType::I32 => DType::I32,
            IndexType::I64 => DType::I64,
        }
    }
}

impl fmt::Display for IndexType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for IndexType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "i32" => Ok(IndexType::I32),
            "i64" => Ok(IndexType::I64),
            _ => Err(format!("unknown index type `{s}` (expected i32 or i64)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
        }
        assert_eq!(IndexType::for_max(10), IndexType::I32);
        assert_eq!(IndexType::for_max(1 << 31), IndexType::I64);
        assert_eq!(IndexType::for_max(i32::MAX as u64), IndexType::I32);
    }
}
