//! Errors of the CUDA runtime. Every variant says what went wrong and what to do about
//! it; none of them is a panic, on machines without NVRTC, a driver or a GPU included.

use std::path::PathBuf;

use thiserror::Error;

use crate::interp::InterpError;
use crate::jit::JitError;
use crate::kernel::KernelError;

/// A problem compiling, loading or running a CUDA kernel.
#[derive(Debug, Error)]
pub enum CudaError {
    /// No NVRTC library could be loaded.
    #[error(
        "NVRTC (the CUDA runtime compiler library) could not be loaded; tried: {}. \
         Install it with `pip install nvidia-cuda-nvrtc-cu12` and set SPARSILE_NVRTC to the \
         full path of its library (…/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12; \
         CUDA 13's is …/site-packages/nvidia/cu13/lib/libnvrtc.so.13)",
        .tried.join("; ")
    )]
    NvrtcMissing {
        /// Each library tried, with the loader's reason for refusing it.
        tried: Vec<String>,
    },

    /// The NVRTC library lacks an entry point this runtime calls.
    #[error("`{library}` has no `{symbol}`: it is not an NVRTC library, or one too old (use NVRTC 11.2 or later): {detail}")]
    NvrtcSymbol {
        library: String,
        symbol: &'static str,
        detail: String,
    },

    /// An NVRTC call other than the compilation itself failed.
    #[error("NVRTC call {call} failed with code {code} ({message})")]
    Nvrtc {
        call: &'static str,
        code: i32,
        message: String,
    },

    /// NVRTC refused the source; `log` is its diagnostic output.
    #[error("NVRTC could not compile the CUDA source{}:\n{log}", .source_path.as_ref().map(|p| format!(" (kept at {})", p.display())).unwrap_or_default())]
    Compile {
        log: String,
        /// Where the cache kept the source, when it went through the cache.
        source_path: Option<PathBuf>,
    },

    /// The source cannot be handed to NVRTC.
    #[error("the CUDA source cannot be compiled: {reason}")]
    InvalidSource { reason: String },

    /// An architecture name that is not `sm_<major><minor>` (optionally with an `a` or
    /// `f` suffix).
    #[error("`{arch}` is not a GPU architecture to compile for: write sm_<major><minor>, such as sm_80 or sm_90a (from SPARSILE_CUDA_ARCH or the caller)")]
    BadArch { arch: String },

    /// The installed NVRTC cannot compile for this architecture, nor for an older one
    /// of the same major version (whose cubins would run on it).
    #[error("NVRTC {nvrtc_version} cannot compile for {arch} (it supports {}): install a newer NVRTC (`pip install -U nvidia-cuda-nvrtc-cu12`), or set SPARSILE_CUDA_ARCH to an architecture the device runs", .supported.join(", "))]
    UnsupportedArch {
        arch: String,
        nvrtc_version: String,
        supported: Vec<String>,
    },

    /// The CUDA driver library (`libcuda.so.1`) is not installed.
    #[error("the CUDA driver library (libcuda.so.1) could not be loaded: this machine has no NVIDIA driver. Run GPU kernels on a machine with an NVIDIA GPU and its driver; here, run CPU kernels (target cpu) or the GPU kernel in the SIMT interpreter (target cuda-sim)")]
    DriverMissing,

    /// The driver runs but there is no such device.
    #[error("there is no CUDA device {ordinal} (the driver reports {count}): pick another one with SPARSILE_CUDA_DEVICE, or run on a machine with an NVIDIA GPU")]
    NoDevice { ordinal: usize, count: usize },

    /// A CUDA driver call failed.
    #[error("CUDA driver call {call} failed with code {code} ({message}){}", hint(*.code))]
    Driver {
        call: &'static str,
        code: u32,
        message: String,
    },

    /// A call into the CUDA driver bindings panicked (a driver library without an entry
    /// point they need); the panic was caught.
    #[error("CUDA driver call {call} could not be made ({message}): update the NVIDIA driver")]
    DriverPanicked { call: &'static str, message: String },

    /// The kernel cache folder or one of its files.
    #[error(transparent)]
    Cache(#[from] JitError),

    /// The function or the arguments do not match the stage-I program (the checks and
    /// errors of [`crate::CompiledKernel`]).
    #[error(transparent)]
    Kernel(#[from] KernelError),

    /// The function has no launches.
    #[error("function `{func}` is not a GPU function (its body has no launches): run it with CompiledKernel, or schedule it for the GPU")]
    NotGpu { func: String },

    /// The launch plan does not fit the function.
    #[error("the launch plan of kernel `{kernel}` does not fit the function: {reason}")]
    Plan { kernel: String, reason: String },

    /// The module has no kernel of this name.
    #[error("the compiled module has no kernel `{symbol}`: the launch plan and the CUDA source do not belong together")]
    MissingKernel { symbol: String },

    /// A grid extent could not be computed on the host.
    #[error("the grid of launch `{launch}` (kernel `{kernel}`) along {dim} cannot be computed: {reason}")]
    Grid {
        launch: String,
        kernel: String,
        dim: &'static str,
        reason: String,
    },

    /// A grid extent beyond what a launch may have.
    #[error("launch `{launch}` (kernel `{kernel}`) needs {extent} blocks along {dim}, more than the {max} a launch may have: split the loop bound to blockIdx.{dim} (or bind it to another dimension)")]
    GridTooLarge {
        launch: String,
        kernel: String,
        dim: &'static str,
        extent: i64,
        max: i64,
    },

    /// An API call that does not fit what it was given (a buffer of another device, a
    /// copy larger than its buffer, an image that is not a cubin).
    #[error("misuse of the CUDA runtime: {reason}")]
    Misuse { reason: String },

    /// An operand in device memory of another element type than its buffer's.
    #[error("operand `{operand}` holds {found} values where the kernel takes {expected}: convert it (tensor.to(dtype)) or pass operands of one dtype")]
    OperandDType {
        operand: String,
        expected: String,
        found: String,
    },

    /// An operand in device memory that is not C-contiguous.
    #[error("operand `{operand}` is not contiguous (shape {shape:?}, strides {strides:?} in elements): GPU kernels read operands in place, row-major; pass a contiguous copy (tensor.contiguous())")]
    NotContiguous {
        operand: String,
        shape: Vec<usize>,
        strides: Vec<i64>,
    },

    /// An operand in device memory whose size does not fit its buffer.
    #[error("operand `{operand}` does not fit: {reason}")]
    OperandSize { operand: String, reason: String },

    /// An operand in device memory whose address is not aligned as the kernel's vector
    /// loads need.
    #[error("operand `{operand}` at device address {address:#x} is not aligned to {bytes} bytes, which the kernel's vector loads of it need: pass an array that starts at a multiple of {bytes} bytes (a fresh allocation, or a view at such an offset)")]
    Misaligned {
        operand: String,
        address: u64,
        bytes: usize,
    },

    /// An operand on another device than the kernel's.
    #[error("operand `{operand}` is on CUDA device {found}, but the kernel runs on device {expected}: move it there (tensor.to('cuda:{expected}')), or run on its device (SPARSILE_CUDA_DEVICE={found})")]
    WrongDevice {
        operand: String,
        found: usize,
        expected: usize,
    },

    /// An address given as device memory that is not device memory of the kernel's
    /// device.
    #[error("operand `{operand}` is not device memory the kernel can use: {reason}")]
    NotDeviceMemory { operand: String, reason: String },

    /// Values in device memory where the run needs them on the host.
    #[error("input `{input}` has its values only in device memory, but {reason}: pass its values in host memory too")]
    NeedsHostValues { input: String, reason: String },

    /// The caller could not allocate an output.
    #[error("output `{output}` could not be allocated: {reason}")]
    OutputAllocation { output: String, reason: String },

    /// Device memory for a buffer could not be allocated.
    #[error("cannot allocate {bytes} bytes of device memory for buffer `{buffer}` ({message}): free device memory or run smaller inputs")]
    DeviceAlloc {
        buffer: String,
        bytes: usize,
        message: String,
    },
}

impl From<InterpError> for CudaError {
    fn from(e: InterpError) -> CudaError {
        CudaError::Kernel(KernelError::Bind(e))
    }
}

/// What to do about some driver errors.
fn hint(code: u32) -> &'static str {
    match code {
        // CUDA_ERROR_INSUFFICIENT_DRIVER, CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        35 | 222 => ": the NVIDIA driver is older than the CUDA version the code was compiled for; update the driver",
        // CUDA_ERROR_NO_BINARY_FOR_GPU, CUDA_ERROR_INVALID_IMAGE
        209 | 200 => ": the cubin was compiled for another architecture; unset SPARSILE_CUDA_ARCH or set it to the device's",
        // CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_ILLEGAL_INSTRUCTION, CUDA_ERROR_MISALIGNED_ADDRESS
        700 | 719 | 715 | 716 => ": a kernel faulted; the device's context is unusable until the process ends",
        // CUDA_ERROR_OUT_OF_MEMORY
        2 => ": free device memory or run smaller inputs",
        _ => "",
    }
}
