//! The machine a measurement holds for: the architecture and the CPU features that
//! change generated code, read from `/proc/cpuinfo` where there is one.
//!
//! ```
//! let t = sparsile_tune::target::host();
//! assert!(t.starts_with(std::env::consts::ARCH));
//! ```

use std::sync::OnceLock;

/// Features that change what `-march=native` code can use.
const FLAGS: &[&str] = &[
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512dq",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "asimd",
    "sve",
    "sve2",
];

/// `arch:flag,flag,...` of this machine (computed once).
pub fn host() -> String {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let line = text
            .lines()
            .find(|l| l.starts_with("flags") || l.starts_with("Features"))
            .unwrap_or("");
        let have: Vec<&str> = line
            .split_once(':')
            .map(|(_, v)| v.split_whitespace().collect())
            .unwrap_or_default();
        let present: Vec<&str> = FLAGS.iter().copied().filter(|f| have.contains(f)).collect();
        format!("{}:{}", std::env::consts::ARCH, present.join(","))
    })
    .clone()
}

/// The vector instruction set class of a target string (`arch:flag,flag,...`, as
/// [`crate::target::host`] writes it): `avx512` (with `avx512f` and `avx512vl`), `avx2`
/// (with `avx2` and `fma`), else the architecture's name (`x86_64`, `aarch64`, ...).
/// Classes are ordered widest first in [`ISA_CLASSES`].
pub fn isa_class(target: &str) -> String {
    let (arch, flags) = target.split_once(':').unwrap_or((target, ""));
    let has = |f: &str| flags.split(',').any(|g| g == f);
    if has("avx512f") && has("avx512vl") {
        "avx512".to_string()
    } else if has("avx2") && has("fma") {
        "avx2".to_string()
    } else {
        arch.to_string()
    }
}

/// x86-64 vector classes, widest first: a host of one class can run code of the classes
/// after it.
pub const ISA_CLASSES: [&str; 3] = ["avx512", "avx2", "x86_64"];

/// The vector instruction set class of this machine ([`isa_class`] of [`host`],
/// computed once: the automatic choice asks on every call).
pub fn host_isa() -> &'static str {
    static CLASS: OnceLock<String> = OnceLock::new();
    CLASS.get_or_init(|| isa_class(&host()))
}

/// A 128-bit hash (hex) of `parts`: XXH3-128 over the parts, each followed by its length
/// so that boundaries count. On pubmed's pattern (88,648 non-zeros) `perf` put the
/// byte-at-a-time FNV-1a it replaced at 28 % of a 1.6 ms Python call on a fresh SciPy
/// matrix (about 0.45 ms), and XXH3 at 2.5 % of the 0.64 ms call after it (about 16 µs).
/// Fingerprints are keys of the tuning database; records written with the old hash are
/// not found (they are of space version 2, which is not read either).
pub fn fingerprint(parts: &[&[u8]]) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for p in parts {
        h.update(p);
        h.update(&(p.len() as u64).to_le_bytes());
    }
    format!("{:032x}", h.digest128())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_separate_parts_and_contents() {
        let f = |p: &[&[u8]]| fingerprint(p);
        assert_eq!(f(&[b"ab", b"c"]), f(&[b"ab", b"c"]));
        assert_ne!(f(&[b"ab", b"c"]), f(&[b"a", b"bc"]));
        assert_ne!(f(&[b"ab"]), f(&[b"ba"]));
        assert_eq!(f(&[]).len(), 32);
    }
}
