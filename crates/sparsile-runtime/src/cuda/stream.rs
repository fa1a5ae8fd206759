//! CUDA streams, and the stream-ordered memory of a device run.
//!
//! Work queued on one stream runs in the order it was queued; work on different streams
//! may overlap. A [`CudaStream`] is a handle the caller owns (PyTorch's current stream,
//! CuPy's, or an [`OwnedStream`] made here) or the default stream; the runtime queues
//! on it and never waits for it unless it must (see
//! [`CudaKernel::run_device`](super::CudaKernel::run_device)).
//!
//! [`RunMemory`] is device memory that lives for one run: allocated with
//! `cuMemAllocAsync` and freed with `cuMemFreeAsync` on the run's stream, so it is
//! released after the kernels that use it, without waiting for them. Where the driver
//! or the device has no stream-ordered allocator (`CUDA_ERROR_NOT_SUPPORTED`, or an
//! old driver without the entry point) it falls back to `cuMemAlloc`, and the run waits
//! for its stream before freeing it.

use std::ffi::c_void;

use cudarc::driver::{result, sys};

use super::device::guard;
use super::{CudaDevice, CudaError};

/// `CUDA_ERROR_NOT_SUPPORTED`.
const NOT_SUPPORTED: u32 = 801;
/// `CUDA_ERROR_OUT_OF_MEMORY`.
const OUT_OF_MEMORY: u32 = 2;

/// A CUDA stream handle (`CUstream`, the same value as the runtime API's
/// `cudaStream_t`), or one of the special streams. It does not own the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CudaStream {
    raw: u64,
}

impl CudaStream {
    /// The default stream (handle 0): the legacy default stream, which waits for and is
    /// waited for by every blocking stream. PyTorch's default stream is this one.
    pub const DEFAULT: CudaStream = CudaStream { raw: 0 };

    /// `CU_STREAM_PER_THREAD`: the calling thread's default stream.
    pub const PER_THREAD: CudaStream = CudaStream { raw: 2 };

    /// A stream from its handle (`torch.cuda.current_stream().cuda_stream`,
    /// `cupy.cuda.get_current_stream().ptr`).
    ///
    /// # Safety
    /// `raw` must be 0, 1 (`CU_STREAM_LEGACY`), 2 (`CU_STREAM_PER_THREAD`) or a stream
    /// of the primary context of the device it is used with, live while work queued
    /// on it through this value has not finished.
    pub unsafe fn from_raw(raw: u64) -> CudaStream {
        CudaStream { raw }
    }

    /// The handle.
    pub fn raw(self) -> u64 {
        self.raw
    }

    pub(super) fn handle(self) -> sys::CUstream {
        self.raw as usize as sys::CUstream
    }
}

/// A stream made by [`CudaDevice::create_stream`]; destroyed on drop (the work queued
/// on it still runs).
#[derive(Debug)]
pub struct OwnedStream {
    stream: CudaStream,
    device: CudaDevice,
}

impl OwnedStream {
    /// The stream, for runs and launches.
    pub fn stream(&self) -> CudaStream {
        self.stream
    }

    /// Waits for the work queued on the stream, reporting a failure of any of it.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        synchronize_stream(&self.device, self.stream)
    }
}

impl Drop for OwnedStream {
    fn drop(&mut self) {
        if self.device.bind_context().is_ok() {
            // SAFETY: made by `create_stream` in this context, destroyed once here;
            // the driver lets queued work finish after a stream is destroyed.
            let _ = guard("cuStreamDestroy", || unsafe {
                result::stream::destroy(self.stream.handle())
            });
        }
    }
}

impl CudaDevice {
    /// A new stream of the device's context that does not wait for the default
    /// stream (`CU_STREAM_NON_BLOCKING`).
    pub fn create_stream(&self) -> Result<OwnedStream, CudaError> {
        self.bind_context()?;
        let handle = guard("cuStreamCreate", || {
            result::stream::create(result::stream::StreamKind::NonBlocking)
        })?;
        Ok(OwnedStream {
            stream: CudaStream {
                raw: handle as usize as u64,
            },
            device: self.clone(),
        })
    }
}

/// Waits for the work queued on `stream` of `device`.
pub fn synchronize_stream(device: &CudaDevice, stream: CudaStream) -> Result<(), CudaError> {
    device.bind_context()?;
    // SAFETY: `stream` is a stream of this context (the promise of `from_raw`).
    guard("cuStreamSynchronize", || unsafe {
        result::stream::synchronize(stream.handle())
    })
}

/// Plain numbers whose bytes can be copied to the device as they are.
pub(super) fn bytes_of<T: super::HostValue>(data: &[T]) -> (*const c_void, usize) {
    (data.as_ptr().cast(), std::mem::size_of_val(data))
}

/// Queues a copy of `bytes` bytes at `src` into device memory at `dst` on `stream`.
///
/// # Safety
/// `dst` must hold `bytes` bytes of device memory of `device`, and `src` must stay
/// readable until the copy has finished (wait for the stream before freeing it).
pub(super) unsafe fn copy_to_device_async(
    device: &CudaDevice,
    dst: u64,
    (src, bytes): (*const c_void, usize),
    stream: CudaStream,
) -> Result<(), CudaError> {
    if bytes == 0 {
        return Ok(());
    }
    device.bind_context()?;
    // SAFETY: the caller's promises.
    guard("cuMemcpyHtoDAsync", || unsafe {
        sys::cuMemcpyHtoDAsync_v2(dst, src, bytes, stream.handle()).result()
    })
}

/// Queues setting `bytes` bytes of device memory at `dst` to zero on `stream`.
///
/// # Safety
/// `dst` must hold `bytes` bytes of device memory of `device`, allocated until the
/// operation has run.
pub(super) unsafe fn zero_async(
    device: &CudaDevice,
    dst: u64,
    bytes: usize,
    stream: CudaStream,
) -> Result<(), CudaError> {
    if bytes == 0 {
        return Ok(());
    }
    device.bind_context()?;
    // SAFETY: the caller's promises.
    guard("cuMemsetD8Async", || unsafe {
        result::memset_d8_async(dst, 0, bytes, stream.handle())
    })
}

/// Device memory for one run (see the module docs).
#[derive(Debug)]
pub(super) enum RunMemory {
    /// From the stream-ordered allocator; freed in stream order on drop.
    Ordered {
        ptr: u64,
        bytes: usize,
        stream: CudaStream,
        device: CudaDevice,
    },
    /// From `cuMemAlloc`: the run must wait for its stream before dropping it.
    Plain(super::DeviceBuffer),
}

impl RunMemory {
    /// `bytes` (at least one) of unset device memory for work on `stream`; `name`
    /// names the buffer in an out-of-memory error.
    pub fn alloc(
        device: &CudaDevice,
        bytes: usize,
        stream: CudaStream,
        name: &str,
    ) -> Result<RunMemory, CudaError> {
        let bytes = bytes.max(1);
        device.bind_context()?;
        // SAFETY: a stream-ordered allocation on a stream of this context; freed by
        // `drop` on the same stream.
        let ordered = guard("cuMemAllocAsync", || unsafe {
            result::malloc_async(stream.handle(), bytes)
        });
        let memory = match ordered {
            Ok(ptr) => Ok(RunMemory::Ordered {
                ptr,
                bytes,
                stream,
                device: device.clone(),
            }),
            Err(CudaError::Driver {
                code: NOT_SUPPORTED,
                ..
            })
            | Err(CudaError::DriverPanicked { .. }) => {
                device.alloc_unset(bytes).map(RunMemory::Plain)
            }
            Err(e) => Err(e),
        };
        memory.map_err(|e| match e {
            CudaError::Driver { code, message, .. } if code == OUT_OF_MEMORY => {
                CudaError::DeviceAlloc {
                    buffer: name.to_string(),
                    bytes,
                    message,
                }
            }
            other => other,
        })
    }

    /// Its device address.
    pub fn ptr(&self) -> u64 {
        match self {
            RunMemory::Ordered { ptr, .. } => *ptr,
            RunMemory::Plain(b) => b.device_ptr(),
        }
    }

    /// Its size in bytes.
    pub fn bytes(&self) -> usize {
        match self {
            RunMemory::Ordered { bytes, .. } => *bytes,
            RunMemory::Plain(b) => b.bytes(),
        }
    }

    /// Whether the run must wait for its stream before dropping it.
    pub fn needs_wait(&self) -> bool {
        matches!(self, RunMemory::Plain(_))
    }
}

impl Drop for RunMemory {
    fn drop(&mut self) {
        if let RunMemory::Ordered {
            ptr,
            stream,
            device,
            ..
        } = self
        {
            if device.bind_context().is_ok() {
                // SAFETY: allocated by cuMemAllocAsync on `stream`, freed once, in
                // stream order: after the work queued on the stream before.
                let _ = guard("cuMemFreeAsync", || unsafe {
                    result::free_async(*ptr, stream.handle())
                });
            }
        }
    }
}
