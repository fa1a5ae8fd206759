//! GPU architecture names (`sm_80`, `sm_90a`, `sm_120`) and the choice of the one to
//! compile for.
//!
//! A cubin built for `sm_XY` runs on devices of compute capability `X.Z` with `Z >= Y`
//! (same major version, same or newer minor). An `a` suffix (`sm_90a`) enables features
//! of exactly that architecture, and an `f` suffix (`sm_100f`) those of its family; both
//! are only named explicitly (`SPARSILE_CUDA_ARCH`), never chosen.
//!
//! ```
//! use sparsile_runtime::cuda::Arch;
//! let a: Arch = "sm_90a".parse().unwrap();
//! assert_eq!((a.major, a.minor, a.suffix), (9, 0, Some('a')));
//! assert_eq!(a.to_string(), "sm_90a");
//! assert!("compute_80".parse::<Arch>().is_err());
//! // NVRTC knows sm_80 and sm_86; a compute capability 8.9 device runs sm_86 code.
//! assert_eq!(Arch::best_for(8, 9, &[80, 86, 90]), Some(Arch::new(8, 6)));
//! assert_eq!(Arch::best_for(10, 0, &[80, 86, 90]), None);
//! ```

use std::fmt;
use std::str::FromStr;

use super::CudaError;

/// A real GPU architecture (`sm_<major><minor>[a|f]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Arch {
    pub major: u32,
    pub minor: u32,
    /// `a` (architecture-specific) or `f` (family-specific) features, if named.
    pub suffix: Option<char>,
}

impl Arch {
    /// `sm_<major><minor>` without a suffix.
    pub fn new(major: u32, minor: u32) -> Arch {
        Arch {
            major,
            minor,
            suffix: None,
        }
    }

    /// The number NVRTC lists it under (`nvrtcGetSupportedArchs`): `major * 10 + minor`.
    pub fn number(self) -> u32 {
        self.major * 10 + self.minor
    }

    /// The newest architecture in `supported` (NVRTC's numbers) whose cubins run on a
    /// device of compute capability `major.minor`: the same major version and a minor
    /// version no newer than the device's.
    pub fn best_for(major: u32, minor: u32, supported: &[u32]) -> Option<Arch> {
        supported
            .iter()
            .copied()
            .filter(|&n| n / 10 == major && n % 10 <= minor)
            .max()
            .map(|n| Arch::new(n / 10, n % 10))
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm_{}{}", self.major, self.minor)?;
        if let Some(s) = self.suffix {
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

impl FromStr for Arch {
    type Err = CudaError;

    fn from_str(text: &str) -> Result<Arch, CudaError> {
        let bad = || CudaError::BadArch {
            arch: text.to_string(),
        };
        let rest = text.strip_prefix("sm_").ok_or_else(bad)?;
        let (digits, suffix) = match rest.strip_suffix(['a', 'f']) {
            Some(d) => (d, rest.chars().last()),
            None => (rest, None),
        };
        if !(2..=3).contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let (major, minor) = digits.split_at(digits.len() - 1);
        let major: u32 = major.parse().map_err(|_| bad())?;
        let minor: u32 = minor.parse().map_err(|_| bad())?;
        if major == 0 {
            return Err(bad());
        }
        Ok(Arch {
            major,
            minor,
            suffix,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print_back() {
        for name in [
            "sm_50", "sm_80", "sm_86", "sm_90", "sm_90a", "sm_100", "sm_100f", "sm_120a",
        ] {
            let a: Arch = name.parse().unwrap();
            assert_eq!(a.to_string(), name);
        }
        let a: Arch = "sm_120".parse().unwrap();
        assert_eq!((a.major, a.minor, a.number()), (12, 0, 120));
    }

    #[test]
    fn other_text_is_refused() {
        for name in [
            "",
            "sm_",
            "sm_8",
            "sm_8000",
            "sm_80b",
            "sm_x0",
            "compute_80",
            "SM_80",
            "sm_80 ",
            "sm_05",
            "sm_-1",
            "--gpu-architecture=sm_80",
        ] {
            let err = name.parse::<Arch>().unwrap_err();
            assert!(matches!(err, CudaError::BadArch { .. }), "{name}: {err}");
        }
    }

    #[test]
    fn the_newest_compatible_architecture_is_chosen() {
        let nvrtc = [75, 80, 86, 87, 89, 90, 100, 120];
        assert_eq!(Arch::best_for(9, 0, &nvrtc), Some(Arch::new(9, 0)));
        assert_eq!(Arch::best_for(8, 8, &nvrtc), Some(Arch::new(8, 7)));
        assert_eq!(Arch::best_for(10, 3, &nvrtc), Some(Arch::new(10, 0)));
        assert_eq!(Arch::best_for(7, 0, &nvrtc), None);
        assert_eq!(Arch::best_for(11, 0, &nvrtc), None);
    }
}
