//! Caller memory an output is written into (NumPy's and PyTorch's `out=`): a compiled run
//! zeroes it (unless the kernel initialises every element itself) and writes the output
//! there instead of in memory it allocates, so a loop calling a kernel allocates nothing
//! for that output.
//!
//! Preconditions (the [`OutBuffer::new`] contract): the memory holds `len` aligned,
//! writable values of the buffer's type, nothing else reads or writes it while the run
//! that takes it lasts, and it does not overlap any input of that run. The run checks the
//! element type and the count against the output and refuses a mismatch by name
//! ([`super::KernelError::OutBufferMismatch`]); it cannot check the rest.
//!
//! ```no_run
//! # fn demo(kernel: &sparsile_runtime::CompiledKernel,
//! #         inputs: &std::collections::HashMap<String, sparsile_formats::SparseTensor<'_>>)
//! #         -> Result<(), sparsile_runtime::KernelError> {
//! use sparsile_runtime::{KernelOptions, OutBuffer};
//! let mut y = vec![0.0f32; 128];
//! let mut options = KernelOptions::default();
//! // SAFETY: `y` outlives the run and is not touched during it.
//! let out = unsafe { OutBuffer::new(y.as_mut_ptr().cast(), y.len(), sparsile_ir::DType::F32) };
//! options.out.insert("y".into(), out);
//! let mut outputs = sparsile_runtime::Outputs::new();
//! kernel.run_into(inputs, &mut outputs, &options)?; // `y` holds the result; `outputs` lacks it
//! # Ok(()) }
//! ```

use std::ffi::c_void;

use sparsile_ir::DType;

/// Writable caller memory for one output (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct OutBuffer {
    ptr: *mut c_void,
    len: usize,
    dtype: DType,
}

// SAFETY: an `OutBuffer` is an address the caller vouches for (`OutBuffer::new`); the
// run that takes it writes through it from its own threads, as it does into memory it
// allocates, and the caller does not touch the memory meanwhile.
unsafe impl Send for OutBuffer {}
// SAFETY: as above; sharing the description between threads reads no memory.
unsafe impl Sync for OutBuffer {}

impl OutBuffer {
    /// Memory for an output of `len` values of `dtype` at `ptr`.
    ///
    /// # Safety
    /// `ptr` is aligned for `dtype` and points to `len` values of it that may be written;
    /// until every run given this buffer has returned, nothing else reads or writes them
    /// and they overlap no input of those runs.
    pub unsafe fn new(ptr: *mut c_void, len: usize, dtype: DType) -> OutBuffer {
        OutBuffer { ptr, len, dtype }
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub(crate) fn ptr(&self) -> *mut c_void {
        self.ptr
    }

    /// Copies `bytes` (the values, in the buffer's type) into the buffer: for runs that
    /// compute an output elsewhere and deliver it here.
    ///
    /// # Safety
    /// `bytes` holds exactly `len` values of the buffer's type, and the buffer's
    /// contract (`new`) holds.
    pub unsafe fn write_bytes(&self, bytes: &[u8]) {
        debug_assert_eq!(bytes.len(), self.len * self.dtype.size_bytes());
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.cast::<u8>(), bytes.len());
    }
}
