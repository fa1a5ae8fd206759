//! Sparsile's code generators: stage-III (flat) loop functions to native source code.
//!
//! [`emit_c`] turns a [`sparsile_ir::loops::Func`] in [`Stage::Flat`] into a C99
//! translation unit that exports the compiled-kernel ABI (see [`c`]). [`emit_cuda`] turns
//! a stage-III GPU function (a body of launches) into CUDA C++ for NVRTC, one kernel per
//! launch, with the grid, block and arguments of each launch (see [`cuda`]). The crate
//! only produces text: compiling and loading it is the runtime's business, so it builds
//! and its emitters run on machines without any C toolchain or GPU.
//!
//! ```
//! use sparsile_ir::loops::{Expr, For, ForKind, Func, Stage, Stmt, Buffer, BufferKind,
//!     BufferLayout, Var, VarType};
//! use sparsile_ir::coord::{BufferRole, Param};
//! use sparsile_ir::{DType, Span};
//!
//! let mut f = Func::new("scale", Stage::Flat);
//! let n = f.params.push(Param { name: "n".into() });
//! let y = f.buffers.push(Buffer {
//!     name: "Y".into(), dtype: DType::F32, layout: BufferLayout::Flat(Expr::Param(n)),
//!     role: BufferRole::Output, kind: BufferKind::Values, span: Span::default(),
//! });
//! let i = f.vars.push(Var { name: "i".into(), ty: VarType::Index });
//! f.body.push(Stmt::For(For {
//!     var: i, lo: Expr::Int(0), hi: Expr::Param(n), kind: ForKind::Parallel,
//!     body: vec![Stmt::Store { buffer: y, indices: vec![Expr::Var(i)],
//!         value: Expr::Float(2.0), span: Span::default() }],
//!     span: Span::default(),
//! }));
//! let c = sparsile_codegen::emit_c(&f).unwrap();
//! assert!(c.code.contains("float *restrict Y = (float *)buffers[0];"));
//! assert!(c.code.contains("Y[i] = 2.0f;"));
//! assert_eq!(c.phases.len(), 1);
//! ```
//!
//! [`Stage::Flat`]: sparsile_ir::loops::Stage::Flat

pub mod c;
pub mod cuda;
mod error;

pub use c::{
    emit_c, BufferArg, CSource, PhaseInfo, PhaseKind, PhasePartition, ABI_VERSION, ENTRY_SYMBOLS,
};
pub use cuda::{emit_cuda, BufferAlignment, CudaSource, KernelArg, KernelInfo};
pub use error::CodegenError;
