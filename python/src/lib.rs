//! The native module of the `sparsile` Python package (`sparsile._native`).
//!
//! It holds what needs Rust: sparse tensors ([`tensor::Tensor`]) built from and
//! converted to NumPy arrays, compiled kernels ([`kernel::Kernel`]) run on NumPy arrays
//! without copying them, schedules ([`schedule::Schedule`]), Matrix Market I/O and the
//! kernel cache's listing and clearing ([`kernel_cache`]). The GIL is released while
//! compiling, converting and running. The Python package (`python/sparsile/`) builds the
//! SciPy/PyTorch-shaped API on top.

/// Large buffers (converted operands, outputs) start on a cache line: see
/// `sparsile::runtime::line_aligned_alloc`.
#[global_allocator]
static ALLOC: sparsile::runtime::LineAligned = sparsile::runtime::LineAligned;

mod arrays;
mod auto_kernel;
mod device;
mod errors;
mod infer;
mod kernel;
mod kernel_cache;
mod mtx_io;
mod out_arrays;
mod schedule;
mod tensor;
mod threads;
mod tune;
mod views;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<tensor::Tensor>()?;
    m.add_class::<kernel::Kernel>()?;
    m.add_class::<auto_kernel::AutoKernel>()?;
    m.add_class::<device::DeviceArray>()?;
    m.add_function(wrap_pyfunction!(device::device_cache_stats, m)?)?;
    m.add_function(wrap_pyfunction!(device::device_cache_clear, m)?)?;
    m.add_function(wrap_pyfunction!(auto_kernel::recipes, m)?)?;
    m.add_function(wrap_pyfunction!(tune::tune, m)?)?;
    m.add_class::<schedule::Schedule>()?;
    m.add_function(wrap_pyfunction!(infer::infer_program, m)?)?;
    m.add_function(wrap_pyfunction!(mtx_io::load, m)?)?;
    m.add_function(wrap_pyfunction!(mtx_io::save, m)?)?;
    m.add_function(wrap_pyfunction!(threads::set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(threads::num_threads_set, m)?)?;
    m.add_function(wrap_pyfunction!(threads::default_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_cache::cache_info, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_cache::clear_cache, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("InternalError", m.py().get_type::<errors::InternalError>())?;
    Ok(())
}
