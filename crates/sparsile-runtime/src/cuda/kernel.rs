//! A GPU kernel: a stage-I program, the stage-III GPU function it was lowered to, the
//! CUDA source emitted for that function and its launch plan, compiled (through the
//! [cubin cache](super::CubinCache)) for the device and loaded on it.
//!
//! [`CudaKernel::run`] takes the same inputs as [`crate::interpret`] and
//! [`crate::CompiledKernel::run`] and returns the same outputs, after the same argument
//! checks with the same errors ([`CudaError::Kernel`]). A run copies the inputs to the
//! device, allocates outputs, temps and `scratch` buffers zero-filled there, computes
//! each launch's grid on the host, launches the kernels in order (skipping those with an
//! empty grid), waits for them, and copies the outputs back. [`KernelOptions::threads`]
//! and [`KernelOptions::parallelism`] concern CPU kernels and are ignored.
//! [`CudaKernel::run_device`] (`kernel/device_run.rs`) runs on operands in device memory
//! instead, on the caller's stream.
//!
//! Building opens the device ([`Settings::cuda_device`], `SPARSILE_CUDA_DEVICE`, default
//! 0) and compiles for its own architecture, or for [`Settings::cuda_arch`]
//! (`SPARSILE_CUDA_ARCH`) when set; when NVRTC cannot compile for the device's own
//! architecture it compiles for the newest older one of the same major version, whose
//! cubins the device runs.
//!
//! ```no_run
//! # use std::collections::HashMap;
//! # fn demo(program: sparsile_ir::coord::Program, func: sparsile_ir::loops::Func,
//! #         cuda_source: String, plan: sparsile_runtime::cuda::LaunchPlan,
//! #         inputs: HashMap<String, sparsile_formats::SparseTensor<'static>>)
//! #         -> Result<(), sparsile_runtime::cuda::CudaError> {
//! use sparsile_ir::settings::Settings;
//! use sparsile_runtime::cuda::CudaKernel;
//! use sparsile_runtime::KernelOptions;
//!
//! let kernel = CudaKernel::build(program, func, cuda_source, plan, &Settings::from_env())?;
//! let info = kernel.compile_info();
//! println!("{} for {} ({:?})", kernel.device().name(), info.arch, info.outcome);
//! let outputs = kernel.run(&inputs, &KernelOptions::default())?;
//! # let _ = outputs; Ok(()) }
//! ```

mod device_run;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use sparsile_formats::SparseTensor;
use sparsile_ir::coord::{BufferRole, Program};
use sparsile_ir::loops::{BufferKind, Func, Stmt};
use sparsile_ir::settings::Settings;
use sparsile_ir::BufferId;

use super::device::{CudaDevice, CudaFunction, CudaModule, DeviceBuffer, LaunchArg, LaunchConfig};
use super::nvrtc::Cubin;
use super::resources::KernelResources;
use super::transfer::{host_arrays, HostArray};
use super::{check_plan, grid, Arch, ArgRef, CubinCache, CudaError, LaunchPlan};
use crate::interp::{check_buffer_parents, check_names, InterpError, InterpOptions, Outputs};
use crate::jit::CacheOutcome;
use crate::kernel::args::{self, Bound, Owned};
use crate::kernel::plan::{self as arg_plan, Plan};
use crate::KernelOptions;

/// How the kernel's cubin was obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaCompileInfo {
    /// The architecture it was compiled for.
    pub arch: String,
    /// Where the cubin is cached.
    pub cubin: PathBuf,
    /// Whether it was found in the cache or compiled now.
    pub outcome: CacheOutcome,
    /// Time spent getting the cubin (hashing and, on a miss, compiling) and loading it.
    pub duration: Duration,
    /// What ptxas reported for each kernel.
    pub kernels: Vec<KernelResources>,
}

/// A GPU kernel, ready to run.
pub struct CudaKernel {
    program: Program,
    func: Func,
    source: String,
    plan: LaunchPlan,
    /// The name of each launch, in plan order.
    launches: Vec<String>,
    args: Plan,
    device: CudaDevice,
    /// Keeps the module loaded while the functions are used.
    _module: CudaModule,
    functions: Vec<CudaFunction>,
    info: CudaCompileInfo,
}

impl std::fmt::Debug for CudaKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaKernel")
            .field("func", &self.func.name)
            .field("device", &self.device)
            .field("kernels", &self.plan.kernels.len())
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// `func` as argument planning sees it: `shared` buffers, like `local` ones, are
/// declared by the kernels and bound to nothing (`kernel/plan.rs` refuses `shared`
/// buffers, which CPU kernels cannot have).
fn planning_view(func: &Func) -> Func {
    let mut view = func.clone();
    for (_, b) in view.buffers.iter_mut() {
        if b.kind == BufferKind::Shared {
            b.kind = BufferKind::Local;
        }
    }
    view
}

impl CudaKernel {
    /// Checks `func` and `plan` against `program`, opens the device, compiles `source`
    /// for it (through the cubin cache of `settings`) and loads it.
    pub fn build(
        program: Program,
        func: Func,
        source: String,
        plan: LaunchPlan,
        settings: &Settings,
    ) -> Result<CudaKernel, CudaError> {
        let args = check(&program, &func, &plan)?;
        let device = CudaDevice::open(settings.cuda_device.unwrap_or(0))?;
        let cache = CubinCache::new(settings)?;
        let arch = match &settings.cuda_arch {
            Some(a) => a.parse::<Arch>()?,
            None => {
                let (major, minor) = device.capability();
                cache.nvrtc().arch_for(major, minor)?
            }
        };
        CudaKernel::assemble(
            program,
            func,
            source,
            plan,
            args,
            device,
            &cache,
            &arch.to_string(),
        )
    }

    /// Like [`build`](Self::build) on an open `device`, with an explicit cache and
    /// architecture.
    #[allow(clippy::too_many_arguments)]
    pub fn build_with(
        program: Program,
        func: Func,
        source: String,
        plan: LaunchPlan,
        device: &CudaDevice,
        cache: &CubinCache,
        arch: &str,
    ) -> Result<CudaKernel, CudaError> {
        let args = check(&program, &func, &plan)?;
        let _: Arch = arch.parse()?;
        CudaKernel::assemble(
            program,
            func,
            source,
            plan,
            args,
            device.clone(),
            cache,
            arch,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        program: Program,
        func: Func,
        source: String,
        plan: LaunchPlan,
        args: Plan,
        device: CudaDevice,
        cache: &CubinCache,
        arch: &str,
    ) -> Result<CudaKernel, CudaError> {
        let start = Instant::now();
        let (mut cubin, mut outcome) = cache.compile_cached(&source, arch)?;
        let module = match device.load_module(&cubin.bytes) {
            Ok(m) => m,
            // A cached cubin that does not load is rebuilt once.
            Err(CudaError::Driver { .. }) if outcome == CacheOutcome::Hit => {
                (cubin, outcome) = cache.compile_fresh(&source, arch)?;
                device.load_module(&cubin.bytes)?
            }
            Err(e) => return Err(e),
        };
        let functions = plan
            .kernels
            .iter()
            .map(|k| module.function(&k.symbol))
            .collect::<Result<Vec<_>, _>>()?;
        let Cubin { mut kernels, .. } = cubin;
        // Where ptxas's report left a kernel out (see `resources.rs`), the driver's word.
        for (k, function) in plan.kernels.iter().zip(&functions) {
            if !kernels.iter().any(|r| r.name == k.symbol) {
                kernels.push(function.resources()?);
            }
        }
        let launches = func
            .body
            .iter()
            .filter_map(|s| match s {
                Stmt::Launch { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect();
        let info = CudaCompileInfo {
            arch: arch.to_string(),
            cubin: cache.cubin_path(&source, arch),
            outcome,
            duration: start.elapsed(),
            kernels,
        };
        Ok(CudaKernel {
            program,
            func,
            source,
            plan,
            launches,
            args,
            device,
            _module: module,
            functions,
            info,
        })
    }

    /// The stage-I program.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The stage-III GPU function.
    pub fn func(&self) -> &Func {
        &self.func
    }

    /// The CUDA source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The launch plan.
    pub fn plan(&self) -> &LaunchPlan {
        &self.plan
    }

    /// The device it runs on.
    pub fn device(&self) -> &CudaDevice {
        &self.device
    }

    /// Where the cubin came from, and what ptxas reported.
    pub fn compile_info(&self) -> &CudaCompileInfo {
        &self.info
    }

    /// Runs the kernel on `inputs` (one tensor per input buffer, by name).
    pub fn run(
        &self,
        inputs: &HashMap<String, SparseTensor<'_>>,
        options: &KernelOptions,
    ) -> Result<Outputs, CudaError> {
        let (mut bound, params) = self.bind_inputs(inputs, options)?;
        let staged = self.stage(&bound, inputs, &params)?;
        self.queue(&staged, &params)?;
        if !staged.launches.is_empty() {
            self.device.synchronize()?;
        }
        self.finish(staged, &mut bound)
    }

    /// Binds `inputs` as [`run`](Self::run) does (same checks, same errors) and computes
    /// the params.
    pub(super) fn bind_inputs<'i>(
        &self,
        inputs: &'i HashMap<String, SparseTensor<'_>>,
        options: &KernelOptions,
    ) -> Result<(Bound<'i>, Vec<i64>), CudaError> {
        let interp_options = InterpOptions {
            params: options.params.clone(),
            output_structures: options.output_structures.clone(),
            skip_verify: true,
        };
        check_names(&self.program, inputs, &interp_options)?;
        let bound = args::bind(
            &self.program,
            inputs,
            &interp_options,
            &mut Outputs::new(),
            &HashMap::new(),
            // Host storage the device copies are staged from: cleared, as the staging
            // expects.
            &std::collections::HashSet::new(),
        )?;
        let params = args::params(&self.program, &self.args, &bound)?;
        Ok((bound, params))
    }

    /// Computes the grids on the host and puts every buffer the launches use on the
    /// device: inputs copied, outputs, temps and scratch zero-filled.
    pub(super) fn stage(
        &self,
        bound: &Bound<'_>,
        inputs: &HashMap<String, SparseTensor<'_>>,
        params: &[i64],
    ) -> Result<Staged, CudaError> {
        let host = host_arrays(&self.program, &self.args, bound, inputs, params)?;
        let mut launches = Vec::with_capacity(self.plan.kernels.len());
        for (index, (k, launch)) in self.plan.kernels.iter().zip(&self.launches).enumerate() {
            if let Some(g) = grid::grid(k, launch, params, &host)? {
                launches.push((index, g));
            }
        }
        let mut buffers: Vec<Option<DeviceBuffer>> = (0..host.arrays.len()).map(|_| None).collect();
        let mut upload_bytes = 0;
        for &(index, _) in &launches {
            for a in &self.plan.kernels[index].args {
                let ArgRef::Buffer(b) = *a else { continue };
                if buffers[b].is_none() {
                    let name = &self.args.buffers[b].0;
                    buffers[b] = host.arrays[b].to_device(&self.device, name)?;
                    upload_bytes += host.arrays[b].uploaded_bytes();
                }
            }
        }
        let zeroed = host.arrays.iter().map(HostArray::is_zeroed).collect();
        Ok(Staged {
            buffers,
            outputs: host.outputs,
            zeroed,
            launches,
            upload_bytes,
        })
    }

    /// Launches the staged kernels in order on the device's stream, without waiting.
    pub(super) fn queue(&self, staged: &Staged, params: &[i64]) -> Result<(), CudaError> {
        for &(index, grid) in &staged.launches {
            let k = &self.plan.kernels[index];
            let mut args = Vec::with_capacity(k.args.len());
            for a in &k.args {
                args.push(match *a {
                    ArgRef::Param(p) => LaunchArg::I64(params[p]),
                    ArgRef::Buffer(b) => LaunchArg::Buffer(
                        staged.buffers[b]
                            .as_ref()
                            .expect("every buffer argument of a launch was staged"),
                    ),
                });
            }
            let config = LaunchConfig {
                grid,
                block: k.block,
                // Shared memory is static: declared by the kernel, none dynamic.
                shared_bytes: 0,
            };
            // SAFETY: `check_plan` matched the plan to the function whose source this
            // is (params as `long long`, buffers as pointers to their element type, in
            // the emitter's order), and each buffer holds at least its declared length
            // (`host_arrays` checked the host arrays it copies, outputs and scratch are
            // allocated at their full length).
            unsafe { self.device.launch(&self.functions[index], config, &args)? };
        }
        Ok(())
    }

    /// Copies the outputs back (after the work launched before) and returns them by
    /// name, freeing the run's device memory.
    pub(super) fn finish(
        &self,
        staged: Staged,
        bound: &mut Bound<'_>,
    ) -> Result<Outputs, CudaError> {
        for (b, output) in staged.outputs.iter().enumerate() {
            let (Some(id), Some(on_device)) = (output, &staged.buffers[b]) else {
                continue;
            };
            if let Some(values) = bound.owned[*id].as_mut() {
                match values {
                    Owned::F32(v) => self.device.download(on_device, v)?,
                    Owned::F64(v) => self.device.download(on_device, v)?,
                    Owned::I32(v) => self.device.download(on_device, v)?,
                    Owned::I64(v) => self.device.download(on_device, v)?,
                    Owned::F16(v) => self.device.download(on_device, v)?,
                    Owned::BF16(v) => self.device.download(on_device, v)?,
                    Owned::External(_) => unreachable!("CUDA runs are bound without out buffers"),
                }
            }
        }
        drop(staged);

        let mut result = Outputs::new();
        for (id, decl) in self.program.buffers.iter() {
            if decl.role != BufferRole::Output {
                continue;
            }
            let structure = bound.owned_structures[id]
                .take()
                .expect("outputs own their structure");
            let values = bound.owned[id]
                .take()
                .expect("outputs own their values")
                .into_values();
            result.insert(decl.name.clone(), SparseTensor { structure, values });
        }
        Ok(result)
    }
}

/// One run's device side: every buffer the launches use, and the launches to make.
#[derive(Debug)]
pub(super) struct Staged {
    /// Per function buffer: its device memory, when a launch uses it.
    pub buffers: Vec<Option<DeviceBuffer>>,
    /// Per function buffer: the stage-I output whose values it holds.
    pub outputs: Vec<Option<BufferId>>,
    /// Per function buffer: whether it was allocated zero-filled (outputs, temps,
    /// scratch) rather than copied from the host.
    pub zeroed: Vec<bool>,
    /// The launches with a non-empty grid, in order: (kernel index in the plan, grid).
    pub launches: Vec<(usize, [u32; 3])>,
    /// Bytes copied from the host.
    pub upload_bytes: usize,
}

/// The build-time checks shared by the constructors: the program verifies, the plan fits
/// the function, and every buffer and param of the function maps to the program.
fn check(program: &Program, func: &Func, plan: &LaunchPlan) -> Result<Plan, CudaError> {
    sparsile_ir::coord::verify(program).map_err(|errors| InterpError::InvalidProgram { errors })?;
    check_buffer_parents(program)?;
    check_plan(func, plan)?;
    Ok(arg_plan::plan(program, &planning_view(func))?)
}
