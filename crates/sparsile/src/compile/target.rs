//! Where a compiled program runs.
//!
//! A schedule decides the kind of function a program lowers to: a CPU function (loops,
//! `parallel` ones on the thread pool) or a GPU function (launches of loops bound to the
//! grid and the threads of a block, from a GPU recipe such as `gpu_rowwise`). A
//! [`Target`] says where it runs: `cpu` runs CPU functions (C compiled by the system
//! compiler); `cuda` runs GPU functions on an NVIDIA GPU (CUDA C++ compiled by NVRTC);
//! `cuda-sim` runs GPU functions on the CPU with the SIMT interpreter, which checks
//! races, barriers and warp collectives as it goes (slow: for testing a GPU schedule
//! where there is no GPU).
//!
//! ```
//! use sparsile::Target;
//! let t: Target = "cuda-sim".parse().unwrap();
//! assert!(t.is_gpu());
//! assert_eq!(t.to_string(), "cuda-sim");
//! assert!("tpu".parse::<Target>().is_err());
//! ```

use std::fmt;
use std::str::FromStr;

/// Where a compiled program runs (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Target {
    /// The CPU: generated C, compiled by the system compiler.
    #[default]
    Cpu,
    /// An NVIDIA GPU: generated CUDA C++, compiled by NVRTC.
    Cuda,
    /// The SIMT interpreter: a GPU function executed on the CPU with GPU semantics.
    CudaSim,
}

impl Target {
    pub const ALL: [Target; 3] = [Target::Cpu, Target::Cuda, Target::CudaSim];

    /// The name on the command line and in Python (`cpu`, `cuda`, `cuda-sim`).
    pub fn name(self) -> &'static str {
        match self {
            Target::Cpu => "cpu",
            Target::Cuda => "cuda",
            Target::CudaSim => "cuda-sim",
        }
    }

    /// Whether it runs GPU functions.
    pub fn is_gpu(self) -> bool {
        self != Target::Cpu
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> Result<Target, String> {
        Target::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| format!("unknown target `{s}` (expected cpu, cuda or cuda-sim)"))
    }
}
