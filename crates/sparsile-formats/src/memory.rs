//! Allocations whose size the input decides: refused with a named error, before any
//! memory is touched, when they cannot be had.
//!
//! A header can declare 10^12 rows in a few bytes, and `--dim k=10^17` is one argument.
//! Allocating what they declare with `vec!` aborts the process (or, under overcommit,
//! gets it killed later). Instead, [`filled`] computes the bytes with checked arithmetic,
//! compares them with the memory the system reports as available ([`available_bytes`]:
//! `MemAvailable` plus free swap from `/proc/meminfo`, where there is one) and reserves
//! fallibly; every refusal is [`FormatError::MemoryTooLarge`] naming what needed it.
//!
//! ```
//! use sparsile_formats::{memory, FormatError};
//! let small: Vec<f64> = memory::filled(1000, 0.0, "a test array").unwrap();
//! assert_eq!(small.len(), 1000);
//! let err = memory::filled(1usize << 60, 0.0f64, "a dense copy of A").unwrap_err();
//! assert!(matches!(err, FormatError::MemoryTooLarge { .. }));
//! assert!(err.to_string().starts_with("a dense copy of A needs 8589934592.0 GiB, more than the memory available"));
//! ```

use crate::FormatError;

/// The bytes of memory the system reports as available now (RAM not in use or
/// reclaimable, plus free swap), or `None` where it does not say.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
            kib.checked_mul(1024)
        })
    };
    let available = field("MemAvailable")?;
    Some(available.saturating_add(field("SwapFree").unwrap_or(0)))
}

/// The error for `elements` elements of `element_bytes` bytes needed by `what`.
pub fn too_large(what: &str, elements: u128, element_bytes: usize) -> FormatError {
    let bytes = elements.saturating_mul(element_bytes as u128);
    FormatError::MemoryTooLarge {
        what: what.to_string(),
        elements,
        element_bytes,
        gib: bytes as f64 / (1u64 << 30) as f64,
        available_gib: available_bytes().map_or(f64::NAN, |b| b as f64 / (1u64 << 30) as f64),
    }
}

/// Checks that `elements` elements of `element_bytes` bytes (with the total computed
/// without overflow) fit in the memory available, for `what`.
pub fn check_fits(what: &str, elements: u128, element_bytes: usize) -> Result<(), FormatError> {
    let bytes = elements.checked_mul(element_bytes as u128);
    let fits = match (bytes, available_bytes()) {
        (None, _) => false,
        (Some(b), Some(available)) => b <= available as u128 && b <= isize::MAX as u128,
        (Some(b), None) => b <= isize::MAX as u128,
    };
    if fits {
        Ok(())
    } else {
        Err(too_large(what, elements, element_bytes))
    }
}

/// A vector of `len` copies of `value`, or [`FormatError::MemoryTooLarge`] when that
/// memory is not available.
pub fn filled<T: Clone>(len: usize, value: T, what: &str) -> Result<Vec<T>, FormatError> {
    let size = std::mem::size_of::<T>();
    check_fits(what, len as u128, size)?;
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| too_large(what, len as u128, size))?;
    v.resize(len, value);
    Ok(v)
}
