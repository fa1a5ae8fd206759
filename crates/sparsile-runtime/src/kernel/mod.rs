//! A compiled native kernel: a stage-I program, the stage-III function it was lowered
//! to, and the C source emitted for that function, compiled (through the
//! [cache](crate::jit::Cache)) and loaded.
//!
//! [`CompiledKernel::run`] takes the same inputs as [`crate::interpret`] and returns the
//! same outputs. Before calling native code it checks every argument:
//! - when built: the function is stage III; each of its buffers is the values of a stage-I
//!   buffer of the same name and element type (f16/bf16 are not compiled), an `indptr` /
//!   `indices` array of an axis of a stage-I buffer that has one (`i32`/`i64`), or
//!   scratch; each of its parameters is a stage-I parameter; the program passes the
//!   stage-I verifier;
//! - on each run: binding as in the interpreter (dtypes, axis kinds and parents, extents
//!   unified with parameters, shared axes, structure arrays valid, value counts), every
//!   structure array's index type equal to its buffer's, every parameter bound, and every
//!   array at least as long as its flat length says.
//!
//! Outputs and temps are allocated zeroed with the structure the interpreter derives (or
//! the one given in [`KernelOptions::output_structures`]); integer outputs come back as
//! exact f64 values, like the interpreter's.
//!
//! ```no_run
//! # use std::collections::HashMap;
//! # fn demo(program: sparsile_ir::coord::Program, func: sparsile_ir::loops::Func, c_source: String,
//! #         inputs: HashMap<String, sparsile_formats::SparseTensor<'static>>) -> Result<(), sparsile_runtime::KernelError> {
//! use sparsile_ir::settings::Settings;
//! use sparsile_runtime::{CompiledKernel, KernelOptions};
//!
//! let kernel = CompiledKernel::build(program, func, c_source, &Settings::from_env())?;
//! println!("compiled in {:?} (cache {:?})", kernel.compile_info().duration, kernel.compile_info().outcome);
//! let outputs = kernel.run(&inputs, &KernelOptions::default())?;
//! # let _ = outputs; Ok(()) }
//! ```

pub(crate) mod args;
mod error;
pub(crate) mod initialised;
mod out_buffer;
pub(crate) mod plan;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sparsile_formats::{SparseTensor, Structure};
use sparsile_ir::coord::{BufferRole, Program};
use sparsile_ir::loops::Func;
use sparsile_ir::settings::Settings;

pub use error::KernelError;
pub use out_buffer::OutBuffer;

use crate::interp::{check_buffer_parents, check_names, InterpError, InterpOptions, Outputs};
use crate::jit::{
    default_threads, spin_time, Cache, CacheOutcome, JitError, Launcher, Library, Parallelism,
};

/// Options of [`CompiledKernel::run`].
#[derive(Debug, Clone, Default)]
pub struct KernelOptions {
    /// Explicit parameter values, by parameter name; checked against the tensors.
    pub params: HashMap<String, i64>,
    /// Structures for output or temp buffers, by buffer name.
    pub output_structures: HashMap<String, Arc<Structure<'static>>>,
    /// Threads of this run (default: the count [`crate::jit::set_num_threads`] set, else
    /// the kernel's, from `SPARSILE_NUM_THREADS` or the available parallelism).
    pub threads: Option<usize>,
    /// Whether each phase's size decides how much help it gets (the default) or every
    /// parallel phase runs on the pool (tests of the parallel path, measurements).
    pub parallelism: Parallelism,
    /// Caller memory outputs are written into, by buffer name (see [`OutBuffer`]); those
    /// outputs are then left out of the run's returned outputs.
    pub out: HashMap<String, OutBuffer>,
}

/// How the kernel's object was obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileInfo {
    /// The cached shared object.
    pub object: PathBuf,
    /// Whether it was found in the cache or compiled now.
    pub outcome: CacheOutcome,
    /// Time spent getting the object (hashing and, on a miss, compiling) and loading it.
    pub duration: Duration,
}

/// A stage-I program compiled to native code, ready to run.
#[derive(Debug)]
pub struct CompiledKernel {
    program: Program,
    func: Func,
    source: String,
    plan: plan::Plan,
    library: Library,
    info: CompileInfo,
    default_threads: usize,
    /// How long idle pool workers spin before sleeping.
    spin: Duration,
    /// Outputs the program overwrites completely before reading them: reused storage
    /// for them is not cleared (see `initialised`).
    initialised: std::collections::HashSet<sparsile_ir::BufferId>,
}

impl CompiledKernel {
    /// Checks `func` against `program`, compiles `source` with the compiler and cache of
    /// `settings`, and loads it.
    pub fn build(
        program: Program,
        func: Func,
        source: String,
        settings: &Settings,
    ) -> Result<CompiledKernel, KernelError> {
        let cache = Cache::new(settings)?;
        let kernel =
            CompiledKernel::build_with(program, func, source, &cache, default_threads(settings))?;
        Ok(CompiledKernel {
            spin: spin_time(settings),
            ..kernel
        })
    }

    /// Like [`build`](Self::build) with an explicit cache and default thread count.
    pub fn build_with(
        program: Program,
        func: Func,
        source: String,
        cache: &Cache,
        default_threads: usize,
    ) -> Result<CompiledKernel, KernelError> {
        sparsile_ir::coord::verify(&program)
            .map_err(|errors| InterpError::InvalidProgram { errors })?;
        check_buffer_parents(&program)?;
        let plan = plan::plan(&program, &func)?;
        let initialised = initialised::initialised_outputs(&program);
        let start = Instant::now();
        let (mut object, mut outcome) = cache.compile_cached(&source)?;
        let library = match Library::load(&object) {
            Ok(library) => library,
            // A cached object that does not load is rebuilt once.
            Err(JitError::Load { .. }) if outcome == CacheOutcome::Hit => {
                (object, outcome) = cache.compile_fresh(&source)?;
                Library::load(&object)?
            }
            Err(e) => return Err(e.into()),
        };
        let info = CompileInfo {
            object,
            outcome,
            duration: start.elapsed(),
        };
        Ok(CompiledKernel {
            program,
            func,
            source,
            plan,
            library,
            info,
            default_threads: default_threads.max(1),
            spin: spin_time(&Settings::from_env()),
            initialised,
        })
    }

    /// The stage-I program.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The stage-III function.
    pub fn func(&self) -> &Func {
        &self.func
    }

    /// The C source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Where the object came from and how long it took.
    pub fn compile_info(&self) -> &CompileInfo {
        &self.info
    }

    /// Runs the kernel on `inputs` (one tensor per input buffer, by name).
    pub fn run(
        &self,
        inputs: &HashMap<String, SparseTensor<'_>>,
        options: &KernelOptions,
    ) -> Result<Outputs, KernelError> {
        let mut outputs = Outputs::new();
        self.run_into(inputs, &mut outputs, options)?;
        Ok(outputs)
    }

    /// Runs the kernel on `inputs` and leaves its outputs in `outputs` (by buffer name).
    ///
    /// A tensor already in `outputs` under an output's name whose values are owned, of
    /// the output's type and count, and whose structure equals the output's, is
    /// overwritten in place: calling again with the outputs of the previous call
    /// allocates nothing. Its old values are cleared first (on the pool's threads) unless
    /// the program sets every element before reading any (as the notation front end's
    /// programs do: an `init` or a zeroing iteration), since stage-I outputs start at
    /// zero. Other entries are replaced by freshly allocated outputs. On error, `outputs`
    /// may have lost the values of reused entries (they are left empty, never partly
    /// written).
    pub fn run_into(
        &self,
        inputs: &HashMap<String, SparseTensor<'_>>,
        outputs: &mut Outputs,
        options: &KernelOptions,
    ) -> Result<(), KernelError> {
        let interp_options = InterpOptions {
            params: options.params.clone(),
            output_structures: options.output_structures.clone(),
            skip_verify: true,
        };
        check_names(&self.program, inputs, &interp_options)?;
        let threads = options
            .threads
            .or_else(crate::jit::num_threads_set)
            .unwrap_or(self.default_threads);
        let launcher =
            Launcher::with_spin(threads, self.spin)?.with_parallelism(options.parallelism);
        let mut bound = args::bind(
            &self.program,
            inputs,
            &interp_options,
            outputs,
            &options.out,
            &self.initialised,
        )?;
        for id in std::mem::take(&mut bound.reused) {
            if self.initialised.contains(&id) {
                continue;
            }
            if let Some(o) = bound.owned[id].as_mut() {
                o.zero(&launcher);
            }
        }
        let params = args::params(&self.program, &self.plan, &bound)?;
        let buffers = args::buffers(&self.program, &self.plan, &mut bound, inputs, &params)?;
        // SAFETY: `buffers` follows `Func::buffers` with arrays checked to be of the
        // buffer's type and at least its declared length (or bound by the same rules the
        // generated code's bounds derive from), `params` follows `Func::params`; the
        // arrays live in `inputs` and `bound`, both alive until after the call.
        unsafe { launcher.run(&self.library, &buffers, &params)? };
        drop(buffers);
        for (id, decl) in self.program.buffers.iter() {
            if decl.role != BufferRole::Output {
                continue;
            }
            let structure = bound.owned_structures[id]
                .take()
                .expect("outputs own their structure");
            let owned = bound.owned[id].take().expect("outputs own their values");
            if owned.is_external() {
                continue; // written into the caller's memory
            }
            outputs.insert(
                decl.name.clone(),
                SparseTensor {
                    structure,
                    values: owned.into_values(),
                },
            );
        }
        Ok(())
    }
}
