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

/// A 128-bit hash (hex) of `parts`: two FNV-1a variants over the bytes, each part
/// followed by its length so that boundaries count.
pub fn fingerprint(parts: &[&[u8]]) -> String {
    let (mut a, mut b) = (0xcbf2_9ce4_8422_2325u64, 0x6c62_272e_07bb_0142u64);
    let mut eat = |byte: u8| {
        a = (a ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        b = (b ^ u64::from(byte.rotate_left(3))).wrapping_mul(0x0000_0100_0000_01b3 | 0x10);
    };
    for p in parts {
        p.iter().for_each(|&x| eat(x));
        (p.len() as u64).to_le_bytes().iter().for_each(|&x| eat(x));
    }
    format!("{a:016x}{b:016x}")
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
