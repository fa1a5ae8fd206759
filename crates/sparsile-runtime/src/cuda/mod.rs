//! The CUDA runtime: CUDA C++ compiled by NVRTC into cached cubins, and GPU kernels run
//! through the CUDA driver.
//!
//! - [`Nvrtc`] loads NVRTC at run time (`SPARSILE_NVRTC`, else `libnvrtc.so.12` or
//!   `libnvrtc.so`) and compiles a source to a [`Cubin`] for one architecture, with
//!   ptxas's report of each kernel's registers, spills and shared memory
//!   ([`KernelResources`]); [`compile_check`] compiles for several architectures
//!   without a device (tests, CI).
//! - [`CubinCache`] keeps cubins in the private kernel cache folder, content-addressed
//!   by SHA-256 of (source, NVRTC version, architecture, options), under the CPU cache's
//!   trust rules: a cubin is loaded only when it matches its integrity record.
//! - [`CudaDevice`] opens a device through the driver (`libcuda.so.1`, loaded at run
//!   time): memory, copies, modules, launches, synchronisation.
//!
//! # Preconditions
//! Compiling needs NVRTC (11.2 or later; `pip install nvidia-cuda-nvrtc-cu12`), and no
//! GPU. Running needs an NVIDIA GPU with its driver; on a machine without them,
//! [`CudaDevice::open`] returns
//! [`CudaError::DriverMissing`] or [`CudaError::NoDevice`]. Nothing here panics on such
//! machines: every failure is a [`CudaError`].
//!
//! ```
//! use sparsile_runtime::cuda::{CudaDevice, CudaError};
//! // On a machine without an NVIDIA driver or GPU this is a typed error, not a panic.
//! match CudaDevice::open(0) {
//!     Ok(device) => println!("{} ({})", device.name(), device.compute_capability()),
//!     Err(e @ (CudaError::DriverMissing | CudaError::NoDevice { .. })) => println!("{e}"),
//!     Err(e) => println!("the driver failed: {e}"),
//! }
//! ```

mod arch;
mod cache;
mod device;
mod error;
mod nvrtc;
mod resources;

pub use arch::Arch;
pub use cache::CubinCache;
pub use device::{
    CudaDevice, CudaFunction, CudaModule, DeviceBuffer, HostValue, LaunchArg, LaunchConfig,
};
pub use error::CudaError;
pub use nvrtc::{compile_check, Cubin, Nvrtc, DEFAULT_NVRTC_NAMES};
pub use resources::{parse_ptxas_report, KernelResources};
