//! The launch plan of a GPU function: for each launch, the kernel's name, its grid and
//! block, its static shared memory and its arguments. The CUDA emitter's output
//! (`sparsile_codegen::cuda::CudaSource`) converts to it one field for one field; this
//! crate does not depend on the emitter.
//!
//! [`check_plan`] checks a plan against its function before anything is compiled: one
//! kernel per launch, in order, each with the block [`launch_shape`] gives the launch,
//! at most [`MAX_BLOCK_THREADS`] threads and [`MAX_SHARED_BYTES`] of shared memory, grid
//! extents the host can compute ([`grid_readable`]), arguments that are parameters
//! or global buffers of the function (`shared` and `local` buffers are declared by the
//! kernels and are no arguments), and alignments (of vector loads) that are powers of two
//! up to 256 bytes for buffer arguments of the kernel.
//!
//! ```
//! use sparsile_ir::loops::{Expr, Func};
//! use sparsile_runtime::cuda::{check_plan, ArgRef, KernelPlan, LaunchPlan};
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
//! let Some(sparsile_ir::loops::Stmt::Launch { body, .. }) = f.body.first() else { unreachable!() };
//! let shape = sparsile_ir::loops::launch_shape(body).unwrap();
//! let plan = LaunchPlan {
//!     kernels: vec![KernelPlan {
//!         symbol: "scale_main".into(),
//!         grid: [shape.grid_x[0].hi.clone(), Expr::Int(1), Expr::Int(1)],
//!         block: [128, 1, 1],
//!         shared_bytes: 0,
//!         args: vec![ArgRef::Param(0), ArgRef::Buffer(0), ArgRef::Buffer(1)],
//!         alignments: Vec::new(),
//!     }],
//! };
//! check_plan(&f, &plan).unwrap();
//! ```

use sparsile_ir::id::Id;
use sparsile_ir::loops::gpu::{grid_readable, MAX_BLOCK_THREADS, MAX_SHARED_BYTES};
use sparsile_ir::loops::{is_gpu_body, launch_shape, BufferKind, Expr, Func, Stmt};
use sparsile_ir::BufferId;

use super::CudaError;

/// How to launch every kernel of a GPU function, in launch order.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchPlan {
    pub kernels: Vec<KernelPlan>,
}

/// How to launch one kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelPlan {
    /// The kernel's `extern "C"` name in the CUDA source.
    pub symbol: String,
    /// Blocks along `x`, `y`, `z`: integer expressions over the function's params and
    /// elements of its integer input buffers (at indices of the same kind).
    pub grid: [Expr; 3],
    /// Threads per block along `x`, `y`, `z`.
    pub block: [u32; 3],
    /// The static shared memory the kernel declares, in bytes.
    pub shared_bytes: usize,
    /// The kernel's arguments, in order.
    pub args: Vec<ArgRef>,
    /// The buffers the kernel reads with vector loads, as `(i, bytes)`: the address of
    /// `func.buffers[i]` must be a multiple of `bytes`. Buffers the runtime allocates are
    /// 256-byte aligned; a caller's array that is not aligned is refused
    /// (`CudaError::Misaligned`).
    pub alignments: Vec<(usize, usize)>,
}

/// One kernel argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArgRef {
    /// The value of `func.params[i]`, as a `long long`.
    Param(usize),
    /// A device pointer to the data of `func.buffers[i]`.
    Buffer(usize),
}

/// Whether `name` can be an `extern "C"` symbol.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The launch bodies of `func`, in order.
fn launches(func: &Func) -> Vec<(&str, &[Stmt])> {
    func.body
        .iter()
        .filter_map(|s| match s {
            Stmt::Launch { name, body, .. } => Some((name.as_str(), body.as_slice())),
            _ => None,
        })
        .collect()
}

/// Checks `plan` against `func` (see the module docs).
pub fn check_plan(func: &Func, plan: &LaunchPlan) -> Result<(), CudaError> {
    if !is_gpu_body(&func.body) {
        return Err(CudaError::NotGpu {
            func: func.name.clone(),
        });
    }
    let launches = launches(func);
    if launches.len() != plan.kernels.len() {
        return Err(CudaError::Plan {
            kernel: plan
                .kernels
                .first()
                .map_or_else(|| "(none)".to_string(), |k| k.symbol.clone()),
            reason: format!(
                "function `{}` has {} launches but the plan has {} kernels",
                func.name,
                launches.len(),
                plan.kernels.len()
            ),
        });
    }
    for (i, (k, (launch, body))) in plan.kernels.iter().zip(&launches).enumerate() {
        let bad = |reason: String| CudaError::Plan {
            kernel: k.symbol.clone(),
            reason,
        };
        if !is_identifier(&k.symbol) {
            return Err(bad("its name is not a C identifier".to_string()));
        }
        if plan.kernels[..i].iter().any(|o| o.symbol == k.symbol) {
            return Err(bad("two kernels of the plan have this name".to_string()));
        }
        let threads: u64 = k.block.iter().map(|&b| u64::from(b)).product();
        if k.block.contains(&0) || threads > MAX_BLOCK_THREADS as u64 {
            return Err(bad(format!(
                "a block of {} x {} x {} threads (1 to {MAX_BLOCK_THREADS} in all)",
                k.block[0], k.block[1], k.block[2]
            )));
        }
        if let Ok(shape) = launch_shape(body) {
            let expected = shape.block.map(|b| u32::try_from(b).unwrap_or(0));
            if expected != k.block {
                return Err(bad(format!(
                    "launch `{launch}` runs blocks of {expected:?} threads, the plan {:?}",
                    k.block
                )));
            }
        }
        if k.shared_bytes > MAX_SHARED_BYTES {
            return Err(bad(format!(
                "{} bytes of shared memory (at most {MAX_SHARED_BYTES})",
                k.shared_bytes
            )));
        }
        for (e, dim) in k.grid.iter().zip(["x", "y", "z"]) {
            if !grid_readable(func, e) {
                return Err(bad(format!(
                    "its grid along {dim} reads something other than params, literals and integer input buffers, so it cannot be sized before the launch"
                )));
            }
        }
        for &(b, bytes) in &k.alignments {
            let global = func
                .buffers
                .get(BufferId::from_index(b))
                .is_some_and(|buf| !matches!(buf.kind, BufferKind::Shared | BufferKind::Local));
            if !global || !k.args.contains(&ArgRef::Buffer(b)) {
                return Err(bad(format!(
                    "an alignment for buffer #{b}, which is not a global buffer argument of the kernel"
                )));
            }
            if !bytes.is_power_of_two() || bytes > 256 {
                return Err(bad(format!(
                    "an alignment of {bytes} bytes for buffer #{b} (a power of two up to 256)"
                )));
            }
        }
        for a in &k.args {
            match *a {
                ArgRef::Param(p) if p >= func.params.len() => {
                    return Err(bad(format!(
                        "argument param #{p}, but the function has {} params",
                        func.params.len()
                    )))
                }
                ArgRef::Buffer(b) => {
                    let Some(buf) = func.buffers.get(BufferId::from_index(b)) else {
                        return Err(bad(format!(
                            "argument buffer #{b}, but the function has {} buffers",
                            func.buffers.len()
                        )));
                    };
                    if matches!(buf.kind, BufferKind::Shared | BufferKind::Local) {
                        return Err(bad(format!(
                            "argument `{}` is a {} buffer, which the kernel declares itself",
                            buf.name,
                            if buf.kind == BufferKind::Shared {
                                "shared"
                            } else {
                                "local"
                            }
                        )));
                    }
                }
                ArgRef::Param(_) => {}
            }
        }
    }
    Ok(())
}
