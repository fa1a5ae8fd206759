//! Sparsile's runtime.
//!
//! [`interp`] is the reference interpreter: it executes a stage-I program directly on
//! [`sparsile_formats::SparseTensor`] inputs, accumulating in f64, and is the oracle every
//! compiled backend is tested against. It is not meant to be fast.
//!
//! [`flat_interp`] executes a loop-level function (stage III, or stage II) lowered from a
//! stage-I program, bound to the same inputs the way compiled kernels are bound; it is
//! the oracle for the lowering passes.
//!
//! [`simt`] executes a GPU function of the loop-level IR (a body of launches) on the CPU
//! with GPU semantics — blocks in a seeded random order, the threads of a block in
//! lockstep — and reports data races, barrier divergence, warp operations with inactive
//! lanes, out-of-bounds accesses and reads of uninitialised shared or local memory; it is
//! how GPU code is tested without a GPU.
//!
//! [`jit`] compiles generated C with the system compiler into a content-addressed cache,
//! loads the objects and runs them on a thread pool; [`kernel::CompiledKernel`] checks a
//! kernel's arguments like the interpreter does and runs it natively.
//!
//! [`cuda`] compiles generated CUDA C++ with NVRTC (loaded at run time) into cached
//! cubins and runs GPU kernels through the CUDA driver; [`cuda::CudaKernel`] checks its
//! arguments like [`kernel::CompiledKernel`] does. Without NVRTC, a driver or a GPU its
//! calls return typed errors.

pub mod bound_promises;
pub mod cuda;
pub mod flat_interp;
pub mod interp;
pub mod jit;
pub mod kernel;
pub mod line_aligned_alloc;
pub mod simt;

pub use flat_interp::{FlatInterpError, FlatOptions};
pub use interp::{interpret, InterpError, InterpOptions, Outputs};
pub use kernel::{CompileInfo, CompiledKernel, KernelError, KernelOptions, OutBuffer};
pub use line_aligned_alloc::LineAligned;
pub use simt::{SimtError, SimtOptions};
