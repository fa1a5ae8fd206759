//! A CUDA device through the driver API: opening it, its architecture, device memory,
//! copies, modules from cubins, kernel launches, synchronisation, and events that time
//! work on the device's stream.
//!
//! The driver is reached through `cudarc`'s thin `driver::result` layer, which loads
//! `libcuda.so.1` at run time and wraps each driver call in a `Result`. That layer panics
//! when the library or one of its entry points is missing, so [`CudaDevice::open`] first
//! probes for the library ([`CudaError::DriverMissing`] without it) and every call goes
//! through a guard that turns a panic into [`CudaError::DriverPanicked`]; a failed call is
//! [`CudaError::Driver`] naming the driver function. (The guard needs unwinding panics,
//! the default.)
//!
//! Everything runs on the device's primary context, made current on the calling thread
//! before each operation (the context CUDA's runtime API, and so PyTorch and CuPy, use
//! too), and on its legacy default stream: copies are synchronous, and launches run in
//! the order they are made, each after the work before it. [`CudaDevice::launch_on`]
//! queues a launch on another stream instead (see [`super::CudaStream`]). After a
//! kernel faults (an illegal address, say) the context is unusable, and every later call
//! on it fails, until the process ends.
//!
//! ```no_run
//! use sparsile_runtime::cuda::{CudaDevice, CudaError, LaunchArg, LaunchConfig};
//!
//! let device = match CudaDevice::open(0) {
//!     Ok(d) => d,
//!     Err(e @ (CudaError::DriverMissing | CudaError::NoDevice { .. })) => {
//!         println!("no GPU here: {e}");
//!         return Ok(());
//!     }
//!     Err(e) => return Err(e),
//! };
//! println!("{} ({})", device.name(), device.compute_capability());
//! let cubin: Vec<u8> = std::fs::read("scale.cubin").unwrap();
//! let module = device.load_module(&cubin)?;
//! let scale = module.function("scale")?;
//! let x = device.upload(&[1.0f32, 2.0, 3.0])?;
//! let config = LaunchConfig { grid: [1, 1, 1], block: [32, 1, 1], shared_bytes: 0 };
//! // SAFETY: `scale(long long n, float *x)` reads and writes x[0..n).
//! unsafe { device.launch(&scale, config, &[LaunchArg::I64(3), LaunchArg::Buffer(&x)])? };
//! device.synchronize()?;
//! let mut back = [0.0f32; 3];
//! device.download(&x, &mut back)?;
//! # Ok::<(), CudaError>(())
//! ```

use std::ffi::{c_int, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys;

use super::bench::NominalPeaks;
use super::{CudaError, CudaStream, KernelResources};

/// `CUDA_ERROR_NO_DEVICE`.
const NO_DEVICE: u32 = 100;
/// `CUDA_ERROR_NOT_FOUND`.
const NOT_FOUND: u32 = 500;

/// The text of a caught panic.
fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

/// `CUDA_ERROR_…: description` for a driver error (the name and description come from
/// the driver itself, when it can give them).
fn describe(e: DriverError) -> String {
    let text =
        |r: Result<&std::ffi::CStr, DriverError>| r.ok().map(|s| s.to_string_lossy().into_owned());
    let name = catch_unwind(|| text(e.error_name())).ok().flatten();
    let description = catch_unwind(|| text(e.error_string())).ok().flatten();
    match (name, description) {
        (Some(n), Some(d)) => format!("{n}: {d}"),
        (Some(n), None) => n,
        (None, Some(d)) => d,
        (None, None) => format!("{:?}", e.0),
    }
}

/// Runs the driver call `f` (named `call` in errors): a failure becomes
/// [`CudaError::Driver`], a panic of the bindings [`CudaError::DriverPanicked`].
pub(super) fn guard<T>(
    call: &'static str,
    f: impl FnOnce() -> Result<T, DriverError>,
) -> Result<T, CudaError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(CudaError::Driver {
            call,
            code: e.0 as u32,
            message: describe(e),
        }),
        Err(payload) => Err(CudaError::DriverPanicked {
            call,
            message: panic_text(payload),
        }),
    }
}

/// Whether the driver library loads.
fn driver_present() -> bool {
    // SAFETY: the probe only tries to load the driver library (and unloads it again);
    // loading runs its initialisers, which have no preconditions.
    catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false)
}

/// A retained primary context; released on drop.
#[derive(Debug)]
struct Context {
    device: sys::CUdevice,
    ctx: sys::CUcontext,
}

// SAFETY: driver handles are plain identifiers the driver accepts from any thread; every
// use first makes the context current on the calling thread (`bind`).
unsafe impl Send for Context {}
// SAFETY: as above; the driver API is thread-safe.
unsafe impl Sync for Context {}

impl Context {
    /// Makes the context current on this thread.
    fn bind(&self) -> Result<(), CudaError> {
        // SAFETY: `ctx` is a primary context this value retains until it drops.
        guard("cuCtxSetCurrent", || unsafe {
            result::ctx::set_current(self.ctx)
        })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: retained once in `CudaDevice::open`, released once here; the memory
        // and modules that use it hold an `Arc` to it, so they are gone already.
        let _ = guard("cuDevicePrimaryCtxRelease", || unsafe {
            result::primary_ctx::release(self.device)
        });
    }
}

/// One CUDA device with its primary context. Cloning shares the context.
#[derive(Debug, Clone)]
pub struct CudaDevice {
    ctx: Arc<Context>,
    ordinal: usize,
    name: String,
    capability: (u32, u32),
}

/// Device memory; freed on drop.
#[derive(Debug)]
pub struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    ctx: Arc<Context>,
}

impl DeviceBuffer {
    /// Its size in bytes (an allocation is at least one byte).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Its device address.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: allocated by cuMemAlloc in this context, freed once; work on the
            // legacy stream that uses it finished or is ordered before the free.
            let _ = guard("cuMemFree", || unsafe { result::free_sync(self.ptr) });
        }
    }
}

/// A module loaded from a cubin; unloaded when it and its functions are dropped.
#[derive(Debug)]
struct ModuleHandle {
    module: sys::CUmodule,
    ctx: Arc<Context>,
}

// SAFETY: see `Context`.
unsafe impl Send for ModuleHandle {}
// SAFETY: see `Context`.
unsafe impl Sync for ModuleHandle {}

impl Drop for ModuleHandle {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: loaded once in this context, unloaded once here, after every
            // function handle of it was dropped (they hold an `Arc` to this).
            let _ = guard("cuModuleUnload", || unsafe {
                result::module::unload(self.module)
            });
        }
    }
}

/// A loaded module.
#[derive(Debug, Clone)]
pub struct CudaModule {
    handle: Arc<ModuleHandle>,
}

/// A kernel of a loaded module.
#[derive(Debug, Clone)]
pub struct CudaFunction {
    function: sys::CUfunction,
    name: String,
    module: Arc<ModuleHandle>,
}

// SAFETY: see `Context`.
unsafe impl Send for CudaFunction {}
// SAFETY: see `Context`.
unsafe impl Sync for CudaFunction {}

impl CudaFunction {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// One kernel argument: a 64-bit integer (a `long long` parameter) or the address of
/// device memory (a pointer parameter): a [`DeviceBuffer`] of this runtime, or an
/// address in memory the caller owns (`Ptr`).
#[derive(Debug, Clone, Copy)]
pub enum LaunchArg<'a> {
    I64(i64),
    Buffer(&'a DeviceBuffer),
    Ptr(u64),
}

/// Blocks, threads per block and dynamic shared memory of a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Dynamic shared memory per block, in bytes (the CUDA emitter's kernels use 0).
    pub shared_bytes: u32,
}

/// An event on the device's stream, for timing the work between two of them
/// ([`CudaDevice::record`], [`CudaDevice::elapsed_ms`]); destroyed on drop.
#[derive(Debug)]
pub struct CudaEvent {
    event: sys::CUevent,
    ctx: Arc<Context>,
}

// SAFETY: see `Context`.
unsafe impl Send for CudaEvent {}
// SAFETY: see `Context`.
unsafe impl Sync for CudaEvent {}

impl Drop for CudaEvent {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: created once in this context, destroyed once here; an event still
            // pending is released by the driver when it completes.
            let _ = guard("cuEventDestroy", || unsafe {
                result::event::destroy(self.event)
            });
        }
    }
}

/// Element types that can be copied to and from device memory as they are.
pub trait HostValue: Copy + sealed::Sealed {}

mod sealed {
    pub trait Sealed {}
}

macro_rules! host_values {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl HostValue for $t {}
    )*};
}
host_values!(u8, i32, i64, u32, u64, f32, f64, half::f16, half::bf16);

impl CudaDevice {
    /// Opens device `ordinal` (0 is the first): [`CudaError::DriverMissing`] when the
    /// driver library does not load, [`CudaError::NoDevice`] when the driver has no
    /// such device; retains its primary context.
    pub fn open(ordinal: usize) -> Result<CudaDevice, CudaError> {
        if !driver_present() {
            return Err(CudaError::DriverMissing);
        }
        match guard("cuInit", result::init) {
            Err(CudaError::Driver {
                code: NO_DEVICE, ..
            }) => return Err(CudaError::NoDevice { ordinal, count: 0 }),
            other => other?,
        }
        let count = guard("cuDeviceGetCount", result::device::get_count)?;
        let count = usize::try_from(count).unwrap_or(0);
        if ordinal >= count {
            return Err(CudaError::NoDevice { ordinal, count });
        }
        let index = c_int::try_from(ordinal).expect("below the device count");
        let device = guard("cuDeviceGet", || result::device::get(index))?;
        let attribute = |a: sys::CUdevice_attribute| {
            // SAFETY: `device` came from cuDeviceGet.
            guard("cuDeviceGetAttribute", || unsafe {
                result::device::get_attribute(device, a)
            })
            .map(|v| u32::try_from(v).unwrap_or(0))
        };
        let capability = (
            attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let name = guard("cuDeviceGetName", || result::device::get_name(device))?;
        // SAFETY: `device` came from cuDeviceGet; released by `Context::drop`.
        let ctx = guard("cuDevicePrimaryCtxRetain", || unsafe {
            result::primary_ctx::retain(device)
        })?;
        let ctx = Arc::new(Context { device, ctx });
        ctx.bind()?;
        Ok(CudaDevice {
            ctx,
            ordinal,
            name,
            capability,
        })
    }

    /// The device's ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The device's name (`NVIDIA H100 80GB HBM3`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The architecture of the device (`sm_90` for compute capability 9.0): what to
    /// compile for.
    pub fn compute_capability(&self) -> String {
        format!("sm_{}{}", self.capability.0, self.capability.1)
    }

    /// The compute capability as (major, minor).
    pub fn capability(&self) -> (u32, u32) {
        self.capability
    }

    fn own<'a>(&self, ctx: &'a Arc<Context>, what: &str) -> Result<&'a Arc<Context>, CudaError> {
        if Arc::ptr_eq(ctx, &self.ctx) {
            Ok(ctx)
        } else {
            Err(CudaError::Misuse {
                reason: format!("{what} belongs to another device"),
            })
        }
    }

    /// `bytes` of device memory (at least one), unset.
    fn alloc(&self, bytes: usize) -> Result<DeviceBuffer, CudaError> {
        self.ctx.bind()?;
        let bytes = bytes.max(1);
        // SAFETY: a plain allocation in the current context; freed by `DeviceBuffer`.
        let ptr = guard("cuMemAlloc", || unsafe { result::malloc_sync(bytes) })?;
        Ok(DeviceBuffer {
            ptr,
            bytes,
            ctx: Arc::clone(&self.ctx),
        })
    }

    /// `bytes` of device memory (at least one), set to zero.
    pub fn alloc_zeroed(&self, bytes: usize) -> Result<DeviceBuffer, CudaError> {
        let buffer = self.alloc(bytes)?;
        // SAFETY: the range is the allocation just made.
        guard("cuMemsetD8", || unsafe {
            result::memset_d8_sync(buffer.ptr, 0, buffer.bytes)
        })?;
        Ok(buffer)
    }

    /// Device memory holding a copy of `data`.
    pub fn upload<T: HostValue>(&self, data: &[T]) -> Result<DeviceBuffer, CudaError> {
        let buffer = self.alloc(std::mem::size_of_val(data))?;
        if !data.is_empty() {
            // SAFETY: the allocation holds at least `size_of_val(data)` bytes; the copy
            // is synchronous, so `data` is read before the call returns.
            guard("cuMemcpyHtoD", || unsafe {
                result::memcpy_htod_sync(buffer.ptr, data)
            })?;
        }
        Ok(buffer)
    }

    /// Copies the first `size_of_val(out)` bytes of `buffer` into `out`, after the work
    /// launched before.
    pub fn download<T: HostValue>(
        &self,
        buffer: &DeviceBuffer,
        out: &mut [T],
    ) -> Result<(), CudaError> {
        self.own(&buffer.ctx, "the buffer")?;
        let bytes = std::mem::size_of_val(out);
        if bytes > buffer.bytes {
            return Err(CudaError::Misuse {
                reason: format!(
                    "copying {bytes} bytes out of a device buffer of {}",
                    buffer.bytes
                ),
            });
        }
        if bytes == 0 {
            return Ok(());
        }
        self.ctx.bind()?;
        // SAFETY: `out` has room for the `bytes` copied, all inside the allocation; `T`
        // is a plain number type, valid for any bytes.
        guard("cuMemcpyDtoH", || unsafe {
            result::memcpy_dtoh_sync(out, buffer.ptr)
        })
    }

    /// Loads a module from `cubin` (an ELF image from NVRTC).
    pub fn load_module(&self, cubin: &[u8]) -> Result<CudaModule, CudaError> {
        if !cubin.starts_with(b"\x7fELF") {
            return Err(CudaError::Misuse {
                reason: "the module image is not a cubin (no ELF header)".to_string(),
            });
        }
        // An 8-byte aligned copy of the image, as the driver reads it in place.
        let mut image = vec![0u64; cubin.len().div_ceil(8)];
        // SAFETY: `image` has at least `cubin.len()` bytes; the regions do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                cubin.as_ptr(),
                image.as_mut_ptr().cast::<u8>(),
                cubin.len(),
            )
        };
        self.ctx.bind()?;
        // SAFETY: the pointer is to a complete ELF image that outlives the call (the
        // driver copies what it keeps).
        let module = guard("cuModuleLoadData", || unsafe {
            result::module::load_data(image.as_ptr().cast::<c_void>())
        })?;
        Ok(CudaModule {
            handle: Arc::new(ModuleHandle {
                module,
                ctx: Arc::clone(&self.ctx),
            }),
        })
    }

    /// Launches `function` with `config` and `args` on the device's stream, without
    /// waiting for it.
    ///
    /// # Safety
    /// `args` must be, in number, order and type, the kernel's parameters (`I64` for a
    /// `long long`, `Buffer` for a pointer), and the kernel must access each buffer only
    /// within its size and as the element type it was filled with.
    pub unsafe fn launch(
        &self,
        function: &CudaFunction,
        config: LaunchConfig,
        args: &[LaunchArg<'_>],
    ) -> Result<(), CudaError> {
        // SAFETY: the caller's promises, passed on.
        unsafe { self.launch_on(function, config, args, CudaStream::DEFAULT) }
    }

    /// [`launch`](Self::launch) on `stream`: the kernel runs after the work queued on
    /// the stream before it.
    ///
    /// # Safety
    /// As for [`launch`](Self::launch); besides, memory passed as [`LaunchArg::Ptr`]
    /// must stay allocated until the kernel has finished.
    pub unsafe fn launch_on(
        &self,
        function: &CudaFunction,
        config: LaunchConfig,
        args: &[LaunchArg<'_>],
        stream: CudaStream,
    ) -> Result<(), CudaError> {
        self.own(&function.module.ctx, "the kernel")?;
        let mut slots = Vec::with_capacity(args.len());
        for a in args {
            slots.push(match a {
                LaunchArg::I64(v) => *v as u64,
                LaunchArg::Buffer(b) => {
                    self.own(&b.ctx, "a kernel argument")?;
                    b.ptr
                }
                LaunchArg::Ptr(p) => *p,
            });
        }
        // Each parameter points at its 8-byte value; both kinds are 8 bytes wide.
        let mut params: Vec<*mut c_void> = slots
            .iter_mut()
            .map(|s| (s as *mut u64).cast::<c_void>())
            .collect();
        let [gx, gy, gz] = config.grid;
        let [bx, by, bz] = config.block;
        self.ctx.bind()?;
        // SAFETY: the function is of a module loaded in this context; `params` points at
        // one live value per kernel parameter, read by the driver during the call; the
        // caller vouches for the arguments' types and the kernel's accesses.
        guard("cuLaunchKernel", || unsafe {
            result::launch_kernel(
                function.function,
                (gx, gy, gz),
                (bx, by, bz),
                config.shared_bytes,
                stream.handle(),
                &mut params,
            )
        })
    }

    /// Waits for all work launched on the device, reporting a failure of any of it.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.ctx.bind()?;
        guard("cuCtxSynchronize", result::ctx::synchronize)
    }

    /// Makes the device's context current on this thread (for driver calls made by the
    /// other modules of the runtime).
    pub(super) fn bind_context(&self) -> Result<(), CudaError> {
        self.ctx.bind()
    }

    /// The driver's handle of the device's primary context.
    pub(super) fn raw_context(&self) -> sys::CUcontext {
        self.ctx.ctx
    }

    /// `bytes` of device memory (at least one), unset, for the other modules of the
    /// runtime.
    pub(super) fn alloc_unset(&self, bytes: usize) -> Result<DeviceBuffer, CudaError> {
        self.alloc(bytes)
    }

    /// Sets every byte of `buffer` to zero, in order with the work launched before and
    /// after it on the device's stream.
    pub fn zero(&self, buffer: &DeviceBuffer) -> Result<(), CudaError> {
        self.own(&buffer.ctx, "the buffer")?;
        self.ctx.bind()?;
        // SAFETY: the range is the whole allocation, which `buffer` holds.
        guard("cuMemsetD8", || unsafe {
            result::memset_d8_sync(buffer.ptr, 0, buffer.bytes)
        })
    }

    /// A new event (with timing) on the device.
    pub fn event(&self) -> Result<CudaEvent, CudaError> {
        self.ctx.bind()?;
        let event = guard("cuEventCreate", || {
            result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
        })?;
        Ok(CudaEvent {
            event,
            ctx: Arc::clone(&self.ctx),
        })
    }

    /// Records `event` on the device's stream: it completes when the work launched
    /// before it has finished.
    pub fn record(&self, event: &CudaEvent) -> Result<(), CudaError> {
        self.own(&event.ctx, "the event")?;
        self.ctx.bind()?;
        // SAFETY: the event was created in this context and is alive; the null stream is
        // the legacy default stream every launch of this device goes to.
        guard("cuEventRecord", || unsafe {
            result::event::record(event.event, std::ptr::null_mut())
        })
    }

    /// Waits until `event` has completed, reporting a failure of the work before it.
    pub fn wait_for(&self, event: &CudaEvent) -> Result<(), CudaError> {
        self.own(&event.ctx, "the event")?;
        self.ctx.bind()?;
        // SAFETY: the event was created in this context and is alive.
        guard("cuEventSynchronize", || unsafe {
            result::event::synchronize(event.event)
        })
    }

    /// The device time from `start` to `end`, in milliseconds (both recorded and
    /// completed; the driver's resolution is about half a microsecond).
    pub fn elapsed_ms(&self, start: &CudaEvent, end: &CudaEvent) -> Result<f64, CudaError> {
        self.own(&start.ctx, "the start event")?;
        self.own(&end.ctx, "the end event")?;
        self.ctx.bind()?;
        // SAFETY: both events were created in this context, are alive, and were recorded
        // on the same stream.
        guard("cuEventElapsedTime", || unsafe {
            result::event::elapsed(start.event, end.event)
        })
        .map(f64::from)
    }

    /// One of the device's attributes (`None` when the driver does not report it).
    fn attribute(&self, a: sys::CUdevice_attribute) -> Option<u64> {
        // SAFETY: the device handle came from cuDeviceGet and is retained.
        guard("cuDeviceGetAttribute", || unsafe {
            result::device::get_attribute(self.ctx.device, a)
        })
        .ok()
        .and_then(|v| u64::try_from(v).ok())
        .filter(|&v| v > 0)
    }

    /// The device's nominal (datasheet-style) limits, from the attributes the driver
    /// reports (see [`NominalPeaks`]); `None` where an attribute is missing or the
    /// architecture's FP32 lanes per SM are not known here.
    pub fn nominal_peaks(&self) -> NominalPeaks {
        use sys::CUdevice_attribute as A;
        let memory_khz = self.attribute(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
        let bus_bits = self.attribute(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
        let sms = self.attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
        let clock_khz = self.attribute(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
        NominalPeaks::from_attributes(self.capability, memory_khz, bus_bits, sms, clock_khz)
    }
}

impl CudaFunction {
    /// The kernel's resources as the driver reports them (registers, static shared
    /// memory, local memory per thread), for when ptxas's report is missing.
    pub fn resources(&self) -> Result<KernelResources, CudaError> {
        use sys::CUfunction_attribute_enum as A;
        self.module.ctx.bind()?;
        let attribute = |a: A, call: &'static str| {
            // SAFETY: the function belongs to a module this value keeps loaded.
            guard(call, || unsafe {
                result::function::get_function_attribute(self.function, a)
            })
            .map(|v| u32::try_from(v).unwrap_or(0))
        };
        Ok(KernelResources {
            name: self.name.clone(),
            registers: attribute(A::CU_FUNC_ATTRIBUTE_NUM_REGS, "cuFuncGetAttribute")?,
            shared_bytes: attribute(A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "cuFuncGetAttribute")?,
            stack_bytes: attribute(A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "cuFuncGetAttribute")?,
            from_driver: true,
            ..KernelResources::default()
        })
    }
}

impl CudaModule {
    /// The kernel `name` of the module ([`CudaError::MissingKernel`] when it has none).
    pub fn function(&self, name: &str) -> Result<CudaFunction, CudaError> {
        let c_name = CString::new(name).map_err(|_| CudaError::MissingKernel {
            symbol: name.to_string(),
        })?;
        self.handle.ctx.bind()?;
        // SAFETY: the module is loaded (this value holds it).
        let function = match guard("cuModuleGetFunction", || unsafe {
            result::module::get_function(self.handle.module, c_name)
        }) {
            Err(CudaError::Driver {
                code: NOT_FOUND, ..
            }) => {
                return Err(CudaError::MissingKernel {
                    symbol: name.to_string(),
                })
            }
            other => other?,
        };
        Ok(CudaFunction {
            function,
            name: name.to_string(),
            module: Arc::clone(&self.handle),
        })
    }
}
