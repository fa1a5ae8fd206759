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
//! - [`CudaKernel`] puts them together for a stage-III GPU function and its
//!   [`LaunchPlan`], with the CPU kernels' argument checks; [`CudaKernel::bench`] times
//!   it on operands kept on the device, with CUDA events (`bench.rs`).
//! - [`CudaKernel::run_device`] runs it on operands the caller keeps in device memory
//!   ([`DeviceArray`]: PyTorch's or CuPy's CUDA arrays), on the caller's stream
//!   ([`CudaStream`]), writing outputs the caller allocates, with no copies of dense
//!   operands; [`check_device_array`] is what it checks of each array, and
//!   [`operand_cache`] keeps sparse operands' structure arrays on the device between
//!   runs.
//!
//! # Preconditions
//! Compiling needs NVRTC (11.2 or later; `pip install nvidia-cuda-nvrtc-cu12`), and no
//! GPU. Running needs an NVIDIA GPU with its driver; on a machine without them,
//! [`CudaDevice::open`] (and so [`CudaKernel::build`]) returns
//! [`CudaError::DriverMissing`] or [`CudaError::NoDevice`]. Nothing here panics on such
//! machines: every failure is a [`CudaError`].
//!
//! # Launch convention
//! One kernel per launch of the function, launched in order on one stream, each
//! finishing before the next starts ([`CudaKernel::run`]: the default stream, waited
//! for; [`CudaKernel::run_device`]: the caller's stream, not waited for). A kernel's
//! arguments are [`KernelPlan::args`]: the params it uses as `long long`, then the
//! global buffers it uses as device pointers (`float`, `double`, `int32_t`, `int64_t`).
//! [`CudaKernel::run`] copies inputs and structure arrays to the device and allocates
//! outputs, temps and `scratch` buffers zero-filled, once per run ([`CudaKernel::run_device`]
//! says what it does instead); `shared` and `local` buffers are declared by the kernels. Grids are computed on
//! the host ([`KernelPlan::grid`]); a launch with an extent of zero or less runs
//! nothing and is skipped. Shared memory is static (no dynamic shared memory).
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
mod bench;
mod cache;
mod device;
mod device_array;
mod error;
mod grid;
mod kernel;
mod nvrtc;
pub mod operand_cache;
mod plan;
mod resources;
mod stream;
mod transfer;

pub use arch::Arch;
pub use bench::{fp32_lanes_per_sm, BenchOptions, DeviceTimes, NominalPeaks, EVENT_BATCH};
pub use cache::CubinCache;
pub use device::{
    CudaDevice, CudaEvent, CudaFunction, CudaModule, DeviceBuffer, HostValue, LaunchArg,
    LaunchConfig,
};
pub use device_array::{
    check_device_array, contiguous_strides, dense_structure, DeviceArray, DeviceInput,
    DeviceOutput, DeviceValues, OutputSpec,
};
pub use error::CudaError;
pub use kernel::{CudaCompileInfo, CudaKernel};
pub use nvrtc::{compile_check, Cubin, Nvrtc, DEFAULT_NVRTC_NAMES};
pub use plan::{check_plan, ArgRef, KernelPlan, LaunchPlan};
pub use resources::{parse_ptxas_report, KernelResources};
pub use stream::{synchronize_stream, CudaStream, OwnedStream};
