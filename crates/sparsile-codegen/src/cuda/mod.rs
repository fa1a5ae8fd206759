//! The CUDA backend: stage-III GPU functions to one CUDA C++ translation unit that NVRTC
//! compiles to a cubin, with the plan the runtime follows to launch each kernel.
//!
//! # Preconditions
//! [`emit_cuda`] takes a stage-III function that passes [`sparsile_ir::loops::verify()`]
//! and whose body is launches (the semantics are in [`sparsile_ir::loops::gpu`]). It
//! refuses, with a named [`CodegenError`] and never a panic: a stage-II function
//! ([`CodegenError::CudaNotFlat`]), a function without launches
//! ([`CodegenError::NotGpu`]), one the verifier rejects ([`CodegenError::Unverified`]),
//! f16/bf16 locals ([`CodegenError::CudaHalfPrecisionLocal`]).
//!
//! # Launch convention
//! Each launch is one kernel ([`KernelInfo`], in [`CudaSource::kernels`]); the runtime
//! launches them in order on one stream, each finishing before the next starts.
//! - **Grid**: [`KernelInfo::grid`] gives the blocks along `x`, `y`, `z` as integer
//!   expressions over the function's params (evaluate them with the run's param values).
//!   Along `x` it is the extent of the loop bound to `blockIdx.x`, or, when several share
//!   the grid, the sum of their extents, each counted as at least 0. A launch with an
//!   extent of 0 or less along any axis runs nothing: skip it. Extents above the
//!   device's limits (2³¹ − 1 along `x`, 65,535 along `y` and `z`) cannot be launched.
//! - **Block**: [`KernelInfo::block`] threads along `x`, `y`, `z` (constant; at most
//!   1,024 threads, the kernel's `__launch_bounds__`, with room for 1,024 threads per
//!   multiprocessor: 64 registers per thread).
//! - **Shared memory**: static only ([`KernelInfo::shared_bytes`] is what the kernel
//!   declares, at most 48 KiB); launch with 0 bytes of dynamic shared memory.
//! - **Arguments**: exactly [`KernelInfo::args`], in order: the params the launch uses
//!   (in the function's order, each a 64-bit `long long`), then the global buffers it
//!   uses (in the function's order, each a device pointer to `len` elements of its
//!   dtype: `float`, `double`, `int32_t`, `int64_t`, or `unsigned short` holding the
//!   raw bits of f16 and bf16 elements). Buffers are distinct,
//!   non-overlapping allocations (the kernels declare them `__restrict__`).
//! - **Buffers**: [`CudaSource::buffer_order`] lists every buffer of the function (the
//!   index a [`KernelArg::Buffer`] gives). Values, `indptr` and `indices` buffers are the
//!   run's data; `scratch` buffers are allocated by the runtime, zero-filled, once per
//!   run (a launch may read what an earlier one wrote). `shared` and `local` buffers are
//!   no arguments ([`BufferArg::allocated_by_kernel`] is true): each kernel declares
//!   them.
//!
//! # Shape of the code
//! A prelude (NVRTC has no standard headers, and the kernels include none:
//! `typedef long long int64_t;`,
//! `typedef int int32_t;`, `typedef unsigned long long uint64_t;`, `INT64_C`,
//! `INT64_MIN`, `INFINITY`, `NAN`) and the helpers the kernels call (the C backend's
//! floor division, binary search, integer max/min, … as `static __device__
//! __forceinline__` functions, only those used), then per launch one
//! `extern "C" __global__ void __launch_bounds__(threads, blocks) <func>_<launch>(...)`: buffers
//! the launch does not write (inputs, and outputs an earlier launch wrote) as
//! `const T *__restrict__`, the others as `T *__restrict__`, params as `long long`.
//! The kernel declares its `shared` buffers (`__shared__ T name[len];`) and `local`
//! buffers (`T name[len];`, one array per thread) first, then runs the launch body:
//! - a loop bound to `blockIdx.d` is `const int64_t v = lo + (int64_t)blockIdx.d;` and
//!   its body; loops sharing the grid along `x` (horizontal fusion) are a chain
//!   `if (bx < part0_end) { … } else if (bx < part1_end) { … }` over part boundaries
//!   computed from the params at the top of the kernel, part `k` counting its blocks
//!   from `part{k-1}_end`;
//! - a loop bound to `threadIdx.d` is `const int64_t v = lo + (int64_t)threadIdx.d;`,
//!   guarded by `if (threadIdx.d < extent)` only when its extent is below the block's;
//! - serial loops are `for (int64_t v = lo; v < hi; ++v)`, unrolled ones have
//!   `#pragma unroll` before them; `let`s are typed locals (`int64_t`, `float`,
//!   `double`) and every expression is written by the C backend's expression code, with
//!   the loop IR's exact semantics (floor division, exact literals, …);
//! - f16 and bf16 elements are loaded as raw 16 bits and widened to `float` exactly
//!   (`cvt.f32.f16`; a shift for bf16), and stored rounded to nearest even
//!   (`cvt.rn.f16.f32`, `cvt.rn.bf16.f32`): expressions over them compute in f32. Raw
//!   bits rather than `cuda_fp16.h`'s `__half`: NVRTC ships that header, but including
//!   it would cost compile time on every cache miss and tie the cubins to its version,
//!   the three conversions are one instruction each, and `mma` operands are 32-bit
//!   registers of packed 16-bit values anyway;
//! - `mma` is the warp's fragments loaded lane by lane, one inline-PTX `mma.sync`, and the
//!   accumulator stored back (see `mma.rs`; sm_80 and later);
//! - a `vectorized` loop of 2 or 4 iterations is written out iteration by iteration, and
//!   its reads of consecutive elements whose first offset is a provable multiple of the
//!   vector width become `float2`/`float4`/`double2` loads before them (see
//!   `vector.rs`; [`KernelInfo::alignments`] lists the buffers whose addresses they need
//!   aligned); other `vectorized` loops are serial loops;
//! - `sync_threads` is `__syncthreads();`, `sync_warp` is `__syncwarp();`; warp
//!   reductions are shuffles (see `warp.rs`); `atomic B[i] += v` is
//!   `atomicAdd(&B[i], v)` (f32 and f64: sm_60 and later); `prefetch` and block names
//!   become comments.
//!
//! ```
//! use sparsile_codegen::cuda::{emit_cuda, KernelArg};
//! use sparsile_ir::loops::{Expr, Func};
//!
//! let f: Func = "\
//! flat func scale(n) {
//!   buffer X: f32[n] input values
//!   buffer Y: f32[n] output values
//!   launch main {
//!     for b in 0..(n + 127) / 128 bind(blockIdx.x) {
//!       for t in 0..128 bind(threadIdx.x) {
//!         if b * 128 + t < n {
//!           Y[b * 128 + t] = 2.0 * X[b * 128 + t]
//!         }
//!       }
//!     }
//!   }
//! }
//! ".parse().unwrap();
//! let cuda = emit_cuda(&f).unwrap();
//! assert!(cuda.code.contains(
//!     "extern \"C\" __global__ void __launch_bounds__(128, 8) scale_main(\
//!      long long n, const float *__restrict__ X, float *__restrict__ Y)"));
//! assert!(cuda.code.contains("const int64_t b = (int64_t)blockIdx.x;"));
//! assert!(cuda.code.contains("const int64_t t = (int64_t)threadIdx.x;"));
//! assert!(cuda.code.contains("Y[b * 128 + t] = 2.0f * X[b * 128 + t];"));
//! let k = &cuda.kernels[0];
//! assert_eq!((k.symbol.as_str(), k.block, k.shared_bytes), ("scale_main", [128, 1, 1], 0));
//! assert_eq!(k.grid[1], Expr::Int(1));
//! assert_eq!(k.args[0], KernelArg::Param { index: 0, name: "n".into() });
//! ```
//! See `tests/cuda/*.cu` for complete examples.

mod check;
mod kernel;
mod mma;
mod prelude;
mod reserved;
mod stmt;
mod vector;
mod warp;

use std::fmt::Write as _;

use sparsile_ir::loops::{BufferKind, BufferLayout, Expr, Func, Stmt};

use crate::c::ctx::Ctx;
use crate::c::names::Names;
use crate::c::stmt::comment_text;
use crate::c::BufferArg;
use crate::CodegenError;

/// Generated CUDA C++ and what a runtime needs to launch it.
#[derive(Debug, Clone, PartialEq)]
pub struct CudaSource {
    /// One CUDA C++ translation unit, compilable by NVRTC with no headers.
    pub code: String,
    /// The stage-III function's name.
    pub func_name: String,
    /// One kernel per launch, in launch order.
    pub kernels: Vec<KernelInfo>,
    /// Every buffer of the function, in its order (what [`KernelArg::Buffer`] indexes);
    /// `allocated_by_kernel` marks the `shared` and `local` ones, which are no arguments.
    pub buffer_order: Vec<BufferArg>,
    /// The function's params, in order (what [`KernelArg::Param`] indexes).
    pub param_order: Vec<String>,
}

/// One kernel: a launch of the function.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelInfo {
    /// Its `extern "C"` name, unique in the translation unit: `<func>_<launch>`.
    pub symbol: String,
    /// The launch's name in the IR.
    pub launch: String,
    /// Blocks along `x`, `y`, `z`: integer expressions over the function's params.
    pub grid: [Expr; 3],
    /// Threads per block along `x`, `y`, `z`.
    pub block: [u32; 3],
    /// The static shared memory the kernel declares, in bytes.
    pub shared_bytes: usize,
    /// The kernel's arguments, in order (see the module docs).
    pub args: Vec<KernelArg>,
    /// The global buffers the kernel reads with vector loads (`vectorized` loops), each
    /// with the alignment its address needs, in the function's buffer order. A buffer
    /// whose address is not a multiple of `bytes` must not be passed: the loads would
    /// fault.
    pub alignments: Vec<BufferAlignment>,
}

/// The alignment a kernel's vector loads need of one buffer's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferAlignment {
    /// The buffer's index in [`CudaSource::buffer_order`].
    pub index: usize,
    /// The buffer's name.
    pub name: String,
    /// The alignment, in bytes (8 or 16).
    pub bytes: usize,
}

impl KernelInfo {
    /// Threads per block.
    pub fn threads(&self) -> u32 {
        self.block.iter().product()
    }
}

/// One argument of a kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelArg {
    /// The value of param `param_order[index]`, as a `long long`.
    Param { index: usize, name: String },
    /// A device pointer to the data of buffer `buffer_order[index]`.
    Buffer { index: usize, name: String },
}

/// Emits CUDA C++ for a stage-III GPU function (see the module docs).
pub fn emit_cuda(func: &Func) -> Result<CudaSource, CodegenError> {
    check::supported(func)?;
    let mut ctx = Ctx::with_names(func, Names::with_reserved(reserved::CUDA_RESERVED));
    let mut kernels_text = String::new();
    let mut kernels = Vec::new();
    for s in &func.body {
        let Stmt::Launch { name, body, span } = s else {
            return Err(CodegenError::CudaUnsupported {
                what: "a statement outside the launches of a GPU function".to_string(),
                span: s.span(),
            });
        };
        let (text, info) = kernel::emit_kernel(&mut ctx, name, body, *span)?;
        kernels_text.push('\n');
        kernels_text.push_str(&text);
        kernels.push(info);
    }
    let mut code = String::new();
    header(&mut code, func, &kernels);
    code.push_str(prelude::BASICS);
    code.push_str(&prelude::helper_definitions(&ctx.helpers)?);
    code.push_str(&kernels_text);
    Ok(CudaSource {
        code,
        func_name: func.name.clone(),
        kernels,
        buffer_order: func
            .buffers
            .values()
            .map(|b| BufferArg {
                name: b.name.clone(),
                dtype: b.dtype,
                kind: b.kind.clone(),
                role: b.role,
                len: match &b.layout {
                    BufferLayout::Flat(len) => len.clone(),
                    BufferLayout::Axes(_) => Expr::Int(0),
                },
                allocated_by_kernel: matches!(b.kind, BufferKind::Shared | BufferKind::Local),
            })
            .collect(),
        param_order: func.params.values().map(|p| p.name.clone()).collect(),
    })
}

fn header(code: &mut String, func: &Func, kernels: &[KernelInfo]) {
    let _ = writeln!(
        code,
        "/* Generated by Sparsile from the stage-III GPU function `{}`: CUDA C++ for NVRTC.",
        comment_text(&func.name)
    );
    let params: Vec<&str> = func.params.values().map(|p| p.name.as_str()).collect();
    let _ = writeln!(code, " * params:  {}", comment_text(&params.join(", ")));
    let buffers: Vec<String> = func
        .buffers
        .values()
        .map(|b| {
            let kind = match b.kind {
                BufferKind::Scratch => ", scratch",
                BufferKind::Local => ", local",
                BufferKind::Shared => ", shared",
                _ => "",
            };
            format!("{} ({}{kind})", b.name, b.dtype)
        })
        .collect();
    let _ = writeln!(code, " * buffers: {}", comment_text(&buffers.join(", ")));
    let symbols: Vec<&str> = kernels.iter().map(|k| k.symbol.as_str()).collect();
    let _ = writeln!(
        code,
        " * kernels, launched in this order: {}",
        comment_text(&symbols.join(", "))
    );
    code.push_str(" */\n");
}
