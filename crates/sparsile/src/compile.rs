//! Compiling index-notation programs to kernels.
//!
//! `compile` runs the whole pipeline: index notation → stage I → `lower_iterations` →
//! default schedule → `lower_buffers` → C → the system compiler (cached by content) →
//! a loaded [`Kernel`]. Every stage's IR stays available for inspection. A schedule from a
//! GPU recipe lowers to a GPU function instead, whose code is CUDA C++: it runs on the
//! [`Target`] `cuda` (NVRTC and the GPU) or `cuda-sim` (the SIMT interpreter), see
//! [`compile_program_for`].
//!
//! Preconditions: a C compiler (`cc`, or `CC`); without one, `compile` returns an error
//! that says so, and [`crate::evaluate`] still works. Co-iteration of several sparse
//! operands (sparse + sparse) is not compiled yet: compiling it is an error that says to
//! use the interpreter.
//!
//! ```no_run
//! use std::collections::HashMap;
//! use sparsile::formats::{CooTensor, Format, SparseTensor};
//! let kernel = sparsile::compile("tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n").unwrap();
//! println!("{}", kernel.ir(sparsile::Stage::C));
//! let a = CooTensor::from_triplets(vec![2, 2], &[(0, 1, 2.0), (1, 0, 3.0)]).unwrap();
//! let inputs = HashMap::from([
//!     ("A".to_string(), SparseTensor::from_coo_with(&a, &Format::Csr, sparsile::ir::DType::F32).unwrap()),
//!     ("x".to_string(), SparseTensor::dense_from_f64(&[2], &[1.0, 1.0], sparsile::ir::DType::F32).unwrap()),
//! ]);
//! let y = &kernel.run(&inputs, &Default::default()).unwrap()["y"];
//! assert_eq!(y.to_dense_f64(), vec![2.0, 3.0]);
//! ```

mod device;
mod options;
mod target;

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use sparsile_formats::SparseTensor;
use sparsile_ir::coord::Program;
use sparsile_ir::loops::Func;
use sparsile_ir::settings::Settings;
use sparsile_runtime::cuda::{
    ArgRef, BenchOptions, CudaCompileInfo, CudaKernel, DeviceTimes, KernelPlan, LaunchPlan,
};
use sparsile_runtime::jit::Parallelism;
use sparsile_runtime::{
    CompileInfo, CompiledKernel, InterpOptions, KernelError, KernelOptions, Outputs,
};
use sparsile_transform::schedule::{ScheduleError, Trace};
use sparsile_transform::{compile_to_flat, LowerError};
use thiserror::Error;

use crate::derived_inputs::with_derived;
use crate::evaluate::{buffer_name, by_buffer, by_tensor, declared_dim_params};
use crate::notation::{self, NotationError};
use crate::DimError;
use sparsile_formats::decompose::DecomposeCache;

pub use options::{compile_with, lower_notation_with, CompileOptions};
pub use target::Target;

/// A stage of the pipeline whose IR can be shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Coordinate space (sparse iterations).
    Stage1,
    /// Position space (loops), after the default schedule.
    Stage2,
    /// Flat loops over 1-D buffers.
    Stage3,
    /// The generated C (of a CPU function).
    C,
    /// The generated CUDA C++ (of a GPU function).
    Cuda,
}

impl FromStr for Stage {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "stage1" => Ok(Stage::Stage1),
            "stage2" => Ok(Stage::Stage2),
            "stage3" => Ok(Stage::Stage3),
            "c" => Ok(Stage::C),
            "cuda" => Ok(Stage::Cuda),
            _ => Err(format!(
                "unknown stage `{s}` (expected stage1, stage2, stage3, c or cuda)"
            )),
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Stage1 => "stage1",
            Stage::Stage2 => "stage2",
            Stage::Stage3 => "stage3",
            Stage::C => "c",
            Stage::Cuda => "cuda",
        })
    }
}

/// Why a program could not be compiled or run.
#[derive(Debug, Error)]
pub enum CompileError {
    #[error(transparent)]
    Notation(#[from] NotationError),
    #[error(transparent)]
    Lower(#[from] LowerError),
    #[error(transparent)]
    Codegen(#[from] sparsile_codegen::CodegenError),
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error(transparent)]
    Dims(#[from] DimError),
    #[error(transparent)]
    Schedule(Box<ScheduleError>),
    #[error(transparent)]
    Recipe(#[from] crate::recipe::RecipeError),
    /// The schedule made a CPU function for a GPU target, or the other way round.
    #[error("{0}")]
    Target(String),
    #[error(transparent)]
    Simt(#[from] sparsile_runtime::simt::SimtError),
    #[error(transparent)]
    Cuda(#[from] sparsile_runtime::cuda::CudaError),
}

impl From<ScheduleError> for CompileError {
    fn from(e: ScheduleError) -> Self {
        CompileError::Schedule(Box::new(e))
    }
}

/// The IR of every stage and the generated code, without compiling it.
#[derive(Debug, Clone)]
pub struct Lowered {
    pub stage1: Program,
    pub stage2: Func,
    pub stage3: Func,
    pub code: Code,
}

/// The generated code of a stage-III function.
#[derive(Debug, Clone)]
pub enum Code {
    /// A CPU function's C.
    C(String),
    /// A GPU function's CUDA C++ with its launch plan.
    Cuda(sparsile_codegen::CudaSource),
}

impl Code {
    /// The source text.
    pub fn text(&self) -> &str {
        match self {
            Code::C(c) => c,
            Code::Cuda(cuda) => &cuda.code,
        }
    }

    /// Whether it is a GPU function's code.
    pub fn is_gpu(&self) -> bool {
        matches!(self, Code::Cuda(_))
    }

    /// The stage whose text it is ([`Stage::C`] or [`Stage::Cuda`]).
    pub fn stage(&self) -> Stage {
        match self {
            Code::C(_) => Stage::C,
            Code::Cuda(_) => Stage::Cuda,
        }
    }
}

/// C for a CPU function, CUDA C++ for a GPU function (one with launches).
fn emit_code(stage3: &Func) -> Result<Code, CompileError> {
    Ok(if sparsile_ir::loops::is_gpu_body(&stage3.body) {
        Code::Cuda(sparsile_codegen::emit_cuda(stage3)?)
    } else {
        Code::C(sparsile_codegen::emit_c(stage3)?.code)
    })
}

/// Lowers a stage-I program through every stage to C source.
pub fn lower_program(stage1: Program) -> Result<Lowered, CompileError> {
    let flat = compile_to_flat(&stage1)?;
    let code = emit_code(&flat.stage3)?;
    Ok(Lowered {
        stage1,
        stage2: flat.stage2,
        stage3: flat.stage3,
        code,
    })
}

/// Lowers a stage-I program with a recorded schedule: the trace is replayed on the
/// program (its stage-I steps, then its stage-II steps) and the result flattened. The
/// trace *is* the schedule: the default schedule is not applied on top of it.
pub fn lower_program_with(stage1: Program, trace: &Trace) -> Result<Lowered, CompileError> {
    let schedule = trace.replay(&stage1)?;
    let stage1 = schedule.program().clone();
    let flat = schedule.finish()?;
    let code = emit_code(&flat.stage3)?;
    Ok(Lowered {
        stage1,
        stage2: flat.stage2,
        stage3: flat.stage3,
        code,
    })
}

/// Compiles a stage-I program with a recorded schedule (see [`lower_program_with`]) for
/// the target its function calls for: `cpu` for a CPU function, `cuda` for a GPU one.
pub fn compile_program_with(stage1: Program, trace: &Trace) -> Result<Kernel, CompileError> {
    build(lower_program_with(stage1, trace)?)
}

/// Compiles a stage-I program, with a recorded schedule or the default one, for
/// `target`. A GPU target needs a schedule that makes a GPU function (a GPU recipe), the
/// CPU target one that makes a CPU function: a mismatch is [`CompileError::Target`].
///
/// ```
/// use std::collections::HashMap;
/// use sparsile::formats::{CooTensor, Format, SparseTensor};
/// use sparsile::ir::DType;
/// use sparsile::recipe::{trace, RecipeContext};
/// let program = sparsile::compile_notation(
///     "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n",
/// ).unwrap();
/// let gpu = trace("gpu_warp", &program, &RecipeContext::default()).unwrap();
/// let kernel = sparsile::compile_program_for(program, Some(&gpu), sparsile::Target::CudaSim).unwrap();
/// assert!(kernel.ir(sparsile::Stage::Cuda).contains("__shfl_xor_sync"));
/// let a = CooTensor::from_triplets(vec![2, 3], &[(0, 0, 1.0), (0, 2, 2.0), (1, 1, 3.0)]).unwrap();
/// let inputs = HashMap::from([
///     ("A".to_string(), SparseTensor::from_coo_with(&a, &Format::Csr, DType::F32).unwrap()),
///     ("x".to_string(), SparseTensor::dense_from_f64(&[3], &[1.0, 10.0, 100.0], DType::F32).unwrap()),
/// ]);
/// let y = &kernel.run(&inputs, &Default::default()).unwrap()["y"];
/// assert_eq!(y.to_dense_f64(), vec![201.0, 30.0]);
/// ```
pub fn compile_program_for(
    stage1: Program,
    trace: Option<&Trace>,
    target: Target,
) -> Result<Kernel, CompileError> {
    let lowered = match trace {
        Some(trace) => lower_program_with(stage1, trace)?,
        None => lower_program(stage1)?,
    };
    build_for(lowered, target)
}

/// [`build_for`] with the target the function calls for.
fn build(lowered: Lowered) -> Result<Kernel, CompileError> {
    let target = if lowered.code.is_gpu() {
        Target::Cuda
    } else {
        Target::Cpu
    };
    build_for(lowered, target)
}

/// Makes the lowered program runnable on `target`.
pub(crate) fn build_for(lowered: Lowered, target: Target) -> Result<Kernel, CompileError> {
    let backend = match (&lowered.code, target) {
        (Code::C(c), Target::Cpu) => Backend::Native(Box::new(CompiledKernel::build(
            lowered.stage1.clone(),
            lowered.stage3.clone(),
            c.clone(),
            &Settings::from_env(),
        )?)),
        (Code::Cuda(_), Target::CudaSim) => Backend::Simt,
        (Code::Cuda(cuda), Target::Cuda) => Backend::Cuda(Box::new(CudaKernel::build(
            lowered.stage1.clone(),
            lowered.stage3.clone(),
            cuda.code.clone(),
            launch_plan(cuda),
            &Settings::from_env(),
        )?)),
        (Code::C(_), _) => {
            return Err(CompileError::Target(format!(
                "target {target}: the schedule makes a CPU function; schedule the program with a GPU recipe (gpu_rowwise, gpu_warp) or run it on the cpu target"
            )))
        }
        (Code::Cuda(_), Target::Cpu) => {
            return Err(CompileError::Target(
                "target cpu: the schedule makes a GPU function (it binds loops to the GPU); run it on the cuda or cuda-sim target, or schedule it with a CPU recipe".to_string(),
            ))
        }
    };
    Ok(Kernel {
        ast: None,
        lowered,
        backend,
    })
}

/// The runtime's launch plan of the emitted kernels.
fn launch_plan(cuda: &sparsile_codegen::CudaSource) -> LaunchPlan {
    LaunchPlan {
        kernels: cuda
            .kernels
            .iter()
            .map(|k| KernelPlan {
                symbol: k.symbol.clone(),
                grid: k.grid.clone(),
                block: k.block,
                shared_bytes: k.shared_bytes,
                args: k
                    .args
                    .iter()
                    .map(|a| match a {
                        sparsile_codegen::KernelArg::Param { index, .. } => ArgRef::Param(*index),
                        sparsile_codegen::KernelArg::Buffer { index, .. } => ArgRef::Buffer(*index),
                    })
                    .collect(),
                alignments: k.alignments.iter().map(|a| (a.index, a.bytes)).collect(),
            })
            .collect(),
    }
}

/// What runs a kernel.
#[derive(Debug)]
enum Backend {
    /// Native CPU code.
    Native(Box<CompiledKernel>),
    /// The SIMT interpreter (target `cuda-sim`).
    Simt,
    /// Cubins on a GPU (target `cuda`).
    Cuda(Box<CudaKernel>),
}

/// Options of [`Kernel::run`].
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Threads of the CPU pool (default: the count `set_num_threads` set, else
    /// `SPARSILE_NUM_THREADS`, else every core).
    pub threads: Option<usize>,
    /// Whether each phase's size decides how much help it gets (the default) or every
    /// parallel phase runs on the pool (tests of the parallel path, measurements).
    pub parallelism: Parallelism,
    /// Values of program parameters (e.g. dimension sizes) beyond those the inputs give.
    pub params: HashMap<String, i64>,
    /// Caller memory outputs are written into, by tensor name (CPU target; see
    /// [`sparsile_runtime::OutBuffer`]): those outputs are not returned.
    pub out: HashMap<String, sparsile_runtime::OutBuffer>,
}

/// A compiled program.
#[derive(Debug)]
pub struct Kernel {
    ast: Option<notation::ast::Program>,
    lowered: Lowered,
    backend: Backend,
}

/// Compiles an index-notation program.
pub fn compile(program: &str) -> Result<Kernel, CompileError> {
    let ast = notation::parse(program)?;
    let stage1 = notation::lower(&ast)?;
    let mut kernel = compile_program(stage1)?;
    kernel.ast = Some(ast);
    Ok(kernel)
}

/// Compiles an index-notation program specialised to the index types (i32 / i64) of the
/// given inputs' structure arrays; the kernel then accepts tensors with those index
/// types (the plain [`compile`] assumes i32).
pub fn compile_for(
    program: &str,
    inputs: &HashMap<String, SparseTensor<'_>>,
) -> Result<Kernel, CompileError> {
    let ast = notation::parse(program)?;
    let mut stage1 = notation::lower(&ast)?;
    let by_buffer: HashMap<String, &SparseTensor<'_>> = inputs
        .iter()
        .map(|(n, t)| (crate::evaluate::buffer_name(n), t))
        .collect();
    specialize_index_types(&mut stage1, &by_buffer);
    let mut kernel = compile_program(stage1)?;
    kernel.ast = Some(ast);
    Ok(kernel)
}

/// Sets the index type of every axis of an input buffer to that of the tensor bound to
/// it (by buffer name). Axes of buffers without a tensor keep theirs.
pub fn specialize_index_types(program: &mut Program, inputs: &HashMap<String, &SparseTensor<'_>>) {
    let buffers: Vec<(Vec<sparsile_ir::AxisId>, &SparseTensor<'_>)> = program
        .buffers
        .values()
        .filter_map(|b| inputs.get(&b.name).map(|t| (b.axes.clone(), *t)))
        .collect();
    for (axes, tensor) in buffers {
        for (axis, storage) in axes.iter().zip(&tensor.structure.axes) {
            if storage.indptr.is_some() || storage.indices.is_some() {
                program.axes[*axis].index_type = storage.index_type();
            }
        }
    }
}

/// Compiles a stage-I program.
pub fn compile_program(stage1: Program) -> Result<Kernel, CompileError> {
    build(lower_program(stage1)?)
}

impl Kernel {
    /// The kernel, with the declarations it was compiled from (so `run` binds declared
    /// dimensions and names outputs by tensor).
    pub(crate) fn with_ast(mut self, ast: notation::ast::Program) -> Kernel {
        self.ast = Some(ast);
        self
    }

    /// The text of one stage's IR, or the generated code: [`Stage::C`] and
    /// [`Stage::Cuda`] both give the kernel's source, C for a CPU kernel and CUDA C++ for
    /// a GPU one ([`Kernel::target`] and [`Code::stage`] tell which).
    pub fn ir(&self, stage: Stage) -> String {
        match stage {
            Stage::Stage1 => self.lowered.stage1.to_string(),
            Stage::Stage2 => self.lowered.stage2.to_string(),
            Stage::Stage3 => self.lowered.stage3.to_string(),
            Stage::C | Stage::Cuda => self.lowered.code.text().to_string(),
        }
    }

    /// Where the kernel runs.
    pub fn target(&self) -> Target {
        match self.backend {
            Backend::Native(_) => Target::Cpu,
            Backend::Simt => Target::CudaSim,
            Backend::Cuda(_) => Target::Cuda,
        }
    }

    /// The same lowered program made runnable on `target`: a GPU function checked in
    /// the SIMT interpreter (`cuda-sim`) runs unchanged on the GPU (`cuda`), and back.
    /// Refused like [`compile_for`] where the function does not suit the target (a CPU
    /// function on a GPU target, or the reverse); on `cuda` the driver and NVRTC are
    /// needed, and their absence is the typed error of the CUDA runtime.
    pub fn retarget(&self, target: Target) -> Result<Kernel, CompileError> {
        let mut kernel = build_for(self.lowered.clone(), target)?;
        kernel.ast = self.ast.clone();
        Ok(kernel)
    }

    /// Every stage's IR.
    pub fn lowered(&self) -> &Lowered {
        &self.lowered
    }

    /// Where the native object came from (cache hit or fresh compile) and how long it
    /// took; `None` for a kernel that is interpreted (`cuda-sim`) or a GPU kernel (see
    /// [`Kernel::cuda_info`]).
    pub fn compile_info(&self) -> Option<&CompileInfo> {
        match &self.backend {
            Backend::Native(compiled) => Some(compiled.compile_info()),
            Backend::Simt | Backend::Cuda(_) => None,
        }
    }

    /// For a GPU kernel (`cuda`): the cubin it loaded, its architecture, whether it came
    /// from the cache, and ptxas's report per kernel.
    pub fn cuda_info(&self) -> Option<&CudaCompileInfo> {
        match &self.backend {
            Backend::Cuda(kernel) => Some(kernel.compile_info()),
            _ => None,
        }
    }

    /// The parts of the inputs that this kernel's schedule decomposed
    /// (`decompose_format`), computed from `inputs` (by declared tensor name), by part
    /// buffer name (`A_p0`, `A_p1`, …); empty when nothing was decomposed.
    ///
    /// A run computes the parts it is not given: the pattern's plan once (cached), the
    /// values on every run. A caller whose decomposed input keeps its values from run to
    /// run (a pruned weight, a fixed attention mask) computes them once here and passes
    /// them along with the inputs, as it would convert an input to another format once.
    /// Parts computed from other values give wrong results.
    pub fn derive_parts(
        &self,
        inputs: &HashMap<String, SparseTensor<'_>>,
    ) -> Result<HashMap<String, SparseTensor<'static>>, CompileError> {
        if self.lowered.stage1.derived.is_empty() {
            return Ok(HashMap::new());
        }
        sparsile_runtime::interp::derived::derive_inputs(
            &self.lowered.stage1,
            &by_buffer(inputs),
            Some(DecomposeCache::shared()),
        )
        .map_err(|e| CompileError::from(sparsile_runtime::KernelError::from(e)))
    }

    /// Runs the kernel on `inputs`, by declared tensor name.
    pub fn run(
        &self,
        inputs: &HashMap<String, SparseTensor<'_>>,
        options: &RunOptions,
    ) -> Result<Outputs, CompileError> {
        let mut outputs = Outputs::new();
        self.run_into(inputs, &mut outputs, options)?;
        Ok(outputs)
    }

    /// Runs the kernel on `inputs` and leaves its outputs in `outputs` (by declared tensor
    /// name), overwriting in place the output tensors `outputs` already holds when they
    /// fit (same structure, element type and size; see
    /// [`CompiledKernel::run_into`](sparsile_runtime::CompiledKernel::run_into)). Passing
    /// the outputs of the previous call back makes repeated calls allocate nothing for
    /// their results.
    ///
    /// ```no_run
    /// # fn demo(kernel: &sparsile::Kernel, inputs: &std::collections::HashMap<String, sparsile::formats::SparseTensor<'_>>) -> Result<(), sparsile::CompileError> {
    /// let options = sparsile::RunOptions::default();
    /// let mut outputs = kernel.run(inputs, &options)?;
    /// for _step in 0..100 {
    ///     kernel.run_into(inputs, &mut outputs, &options)?; // reuses outputs["C"]
    /// }
    /// # Ok(()) }
    /// ```
    pub fn run_into(
        &self,
        inputs: &HashMap<String, SparseTensor<'_>>,
        outputs: &mut Outputs,
        options: &RunOptions,
    ) -> Result<(), CompileError> {
        let (bound, options) = self.prepare(inputs, options)?;
        // The runtime names outputs by buffer; the caller by tensor.
        let mut by_buf = Outputs::new();
        match &self.ast {
            Some(ast) => {
                for decl in &ast.tensors {
                    if let Some(t) = outputs.remove(&decl.name) {
                        by_buf.insert(buffer_name(&decl.name), t);
                    }
                }
            }
            None => by_buf = std::mem::take(outputs),
        }
        if !options.out.is_empty() && !matches!(self.backend, Backend::Native(_)) {
            return Err(CompileError::Target(
                "out buffers are taken by the cpu target only".to_string(),
            ));
        }
        let result = match &self.backend {
            Backend::Native(compiled) => compiled
                .run_into(&bound, &mut by_buf, &options)
                .map_err(CompileError::from),
            Backend::Simt => {
                let interp = InterpOptions {
                    params: options.params.clone(),
                    ..InterpOptions::default()
                };
                sparsile_runtime::simt::run(
                    &self.lowered.stage3,
                    &self.lowered.stage1,
                    &bound,
                    &interp,
                )
                .map(|out| by_buf.extend(out))
                .map_err(CompileError::from)
            }
            Backend::Cuda(kernel) => kernel
                .run(&bound, &options)
                .map(|out| by_buf.extend(out))
                .map_err(CompileError::from),
        };
        match &self.ast {
            Some(ast) => outputs.extend(by_tensor(ast, by_buf)),
            None => outputs.extend(by_buf),
        }
        result?;
        Ok(())
    }

    /// The inputs as the backends take them (by buffer name, with the parts of
    /// decomposed inputs) and the runtime's options (declared dimensions bound).
    fn prepare<'a>(
        &self,
        inputs: &'a HashMap<String, SparseTensor<'_>>,
        options: &RunOptions,
    ) -> Result<(HashMap<String, SparseTensor<'a>>, KernelOptions), CompileError> {
        let mut params = options.params.clone();
        if let Some(ast) = &self.ast {
            // The parts of decomposed inputs (see `derive_parts`) bind no dimension.
            let stage1 = &self.lowered.stage1;
            let declared: HashMap<String, SparseTensor<'_>> = inputs
                .iter()
                .filter(|(name, _)| !is_part(stage1, name))
                .map(|(name, t)| (name.clone(), t.view()))
                .collect();
            params.extend(declared_dim_params(ast, stage1, &declared)?);
        }
        let out = options
            .out
            .iter()
            .map(|(name, b)| (buffer_name(name), *b))
            .collect();
        let options = KernelOptions {
            params,
            threads: options.threads,
            parallelism: options.parallelism,
            out,
            ..KernelOptions::default()
        };
        let bound = with_derived(
            &self.lowered.stage1,
            by_buffer(inputs),
            DecomposeCache::shared(),
        )?;
        Ok((bound, options))
    }

    /// The GPU kernel of a `cuda` kernel (`None` on the other targets).
    pub fn cuda_kernel(&self) -> Option<&CudaKernel> {
        match &self.backend {
            Backend::Cuda(kernel) => Some(kernel),
            _ => None,
        }
    }

    /// Times a `cuda` kernel on the device: [`CudaKernel::bench`] on `inputs` (by
    /// declared tensor name, as [`Kernel::run`] takes them), whose outputs of the last run
    /// come back by tensor name. Decomposed inputs' parts are computed once, before the
    /// runs. On another target: [`CompileError::Target`].
    pub fn bench_cuda(
        &self,
        inputs: &HashMap<String, SparseTensor<'_>>,
        options: &RunOptions,
        bench: &BenchOptions,
    ) -> Result<DeviceTimes, CompileError> {
        let Backend::Cuda(kernel) = &self.backend else {
            return Err(CompileError::Target(format!(
                "target {}: only kernels compiled for the cuda target are timed on the device",
                self.target()
            )));
        };
        let (bound, options) = self.prepare(inputs, options)?;
        let mut timed = kernel.bench(&bound, &options, bench)?;
        if let Some(ast) = &self.ast {
            timed.outputs = by_tensor(ast, std::mem::take(&mut timed.outputs));
        }
        Ok(timed)
    }
}

/// Whether `name` is the buffer of a part that `program` derives from an input.
fn is_part(program: &Program, name: &str) -> bool {
    program.derived.iter().any(|d| {
        program
            .buffers
            .get(d.buffer)
            .is_some_and(|b| b.name == name)
    })
}
