//! The CUDA runtime: CUDA C++ compiled by NVRTC into cached cubins.
//!
//! - [`Nvrtc`] loads NVRTC at run time (`SPARSILE_NVRTC`, else `libnvrtc.so.12` or
//!   `libnvrtc.so`) and compiles a source to a [`Cubin`] for one architecture, with
//!   ptxas's report of each kernel's registers, spills and shared memory
//!   ([`KernelResources`]); [`compile_check`] compiles for several architectures
//!   without a device (tests, CI).
//! - [`CubinCache`] keeps cubins in the private kernel cache folder, content-addressed
//!   by SHA-256 of (source, NVRTC version, architecture, options), under the CPU cache's
//!   trust rules: a cubin is loaded only when it matches its integrity record.
//!
//! # Preconditions
//! Compiling needs NVRTC (11.2 or later; `pip install nvidia-cuda-nvrtc-cu12`), and no
//! GPU. Without NVRTC every call returns [`CudaError::NvrtcMissing`].

mod arch;
mod cache;
mod error;
mod nvrtc;
mod resources;

pub use arch::Arch;
pub use cache::CubinCache;
pub use error::CudaError;
pub use nvrtc::{compile_check, Cubin, Nvrtc, DEFAULT_NVRTC_NAMES};
pub use resources::{parse_ptxas_report, KernelResources};
