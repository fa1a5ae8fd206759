//! Running a GPU kernel on operands the caller keeps in device memory, on the caller's
//! stream: [`CudaKernel::run_device`].
//!
//! Binding is [`CudaKernel::run`]'s (the interpreter's checks and errors: names,
//! structures, value counts, extents, derived output structures), done on the host from
//! the structures alone; then each function buffer gets its device memory:
//! - a dense input or values in device memory ([`DeviceValues::Device`]): the caller's
//!   address, after [`check_device_array`] (element type, contiguity, device, context,
//!   alignment) and the length check of CPU kernels; never copied;
//! - an output: an array the caller allocates when asked (the `alloc` callback gets its
//!   [`OutputSpec`]), checked the same way and set to zero on the stream before the
//!   kernels run (stage-I outputs start at zero), then written in place;
//! - structure arrays (`indptr`, `indices`): from the [operand cache](super::super::operand_cache),
//!   copied once per structure;
//! - values in host memory, integer inputs (converted on the host), and structures over
//!   borrowed arrays: copied into run memory on every run;
//! - temps and `scratch` buffers: zero-filled run memory (stream-ordered, see
//!   [`RunMemory`]).
//!
//! Everything is queued on `stream` in that order, then the launches (empty grids
//! skipped), and the call returns without waiting for the kernels, unless it copied
//! host memory this run (it then waits for the stream, so the host memory may be freed
//! when it returns) or its run memory could not come from the stream-ordered allocator.
//! A failure of a kernel shows at the caller's next synchronising call (as with any
//! asynchronous CUDA work); a failure to queue work is returned.

use std::collections::HashMap;
use std::sync::Arc;

use sparsile_formats::{Format, IndexArray, Structure, Values};
use sparsile_ir::coord::BufferRole;
use sparsile_ir::{BufferId, DType, IdVec};

use super::super::device_array::{check_device_array, DeviceValues};
use super::super::grid::{self, IntArrays};
use super::super::operand_cache;
use super::super::stream::{bytes_of, copy_to_device_async, zero_async, RunMemory};
use super::super::{
    synchronize_stream, ArgRef, CudaDevice, CudaError, CudaStream, DeviceArray, DeviceBuffer,
    DeviceInput, DeviceOutput, LaunchArg, LaunchConfig, OutputSpec,
};
use super::CudaKernel;
use crate::interp::state::{Bindings, BufValues};
use crate::interp::{input_values, validate, InterpError};
use crate::kernel::args::{self, Bound, Owned};
use crate::kernel::plan::{eval_len, ArrayKind, Slot};
use crate::{KernelError, KernelOptions};

/// The device memory of one function buffer.
enum Arg {
    /// A `shared` or `local` buffer: declared by the kernels.
    Declared,
    /// Memory the caller owns.
    Caller(u64),
    /// Run memory.
    Run(usize),
    /// A cached structure array.
    Cached(usize),
}

/// An integer array on the host that a grid extent may read.
#[derive(Clone, Copy)]
enum HostInts<'a> {
    None,
    I32(&'a [i32]),
    I64(&'a [i64]),
}

struct Ints<'a>(Vec<HostInts<'a>>);

impl IntArrays for Ints<'_> {
    fn element(&self, buffer: BufferId, index: i64) -> Result<i64, String> {
        let i = sparsile_ir::id::Id::index(buffer);
        let outside =
            |len: usize| format!("it reads element {index} of buffer #{i}, which has {len}");
        let at = |len: usize| usize::try_from(index).ok().filter(|&j| j < len);
        match self.0.get(i) {
            Some(HostInts::I32(v)) => at(v.len())
                .map(|j| i64::from(v[j]))
                .ok_or_else(|| outside(v.len())),
            Some(HostInts::I64(v)) => at(v.len()).map(|j| v[j]).ok_or_else(|| outside(v.len())),
            _ => Err(format!(
                "it reads buffer #{i}, which is not an integer input on the host"
            )),
        }
    }
}

/// What a run holds on the device until its work is queued: released on drop, after
/// waiting for the stream when it must (so an error path frees nothing in use).
struct RunState {
    device: CudaDevice,
    stream: CudaStream,
    memory: Vec<RunMemory>,
    cached: Vec<Arc<DeviceBuffer>>,
    /// Host memory was copied from this run: wait before returning.
    copied_host: bool,
}

impl RunState {
    fn must_wait(&self) -> bool {
        self.copied_host || self.memory.iter().any(RunMemory::needs_wait)
    }

    /// Waits for the stream when the run must, reporting a failure.
    fn finish(mut self) -> Result<(), CudaError> {
        if self.must_wait() {
            synchronize_stream(&self.device, self.stream)?;
            // Everything queued has run: the host sources and the run memory are free.
            self.copied_host = false;
            self.memory.clear();
        }
        Ok(())
    }
}

impl Drop for RunState {
    fn drop(&mut self) {
        if self.must_wait() {
            // On an error path: whatever was queued must finish before its memory goes.
            let _ = synchronize_stream(&self.device, self.stream);
        }
        self.memory.clear();
        operand_cache::release_held(&self.device, std::mem::take(&mut self.cached));
    }
}

/// `bytes` of `dtype` for `count` elements, or the error of a buffer too large.
fn size(name: &str, dtype: DType, count: usize) -> Result<usize, KernelError> {
    count
        .checked_mul(dtype.size_bytes())
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| KernelError::OutputTooLarge {
            buffer: name.to_string(),
            values: count,
        })
}

/// The number of elements of a caller's array, or the error of one too large.
fn elements(name: &str, a: &DeviceArray) -> Result<usize, CudaError> {
    a.len().ok_or_else(|| CudaError::OperandSize {
        operand: name.to_string(),
        reason: format!("its shape {:?} has too many elements", a.shape),
    })
}

/// Integer input values as the kernel's integer type.
fn integer_values(dtype: DType, ints: &[f64]) -> Owned {
    match dtype {
        DType::I32 => Owned::I32(ints.iter().map(|&v| v as i32).collect()),
        _ => Owned::I64(ints.iter().map(|&v| v as i64).collect()),
    }
}

impl CudaKernel {
    /// Runs the kernel on `inputs` (by input buffer name) on `stream`, writing its
    /// outputs into device arrays that `alloc` provides (called once per output, in
    /// program order, before anything is queued; an `Err` from it is
    /// [`CudaError::OutputAllocation`]). Returns each output's array and structure.
    /// See the module docs for what is copied and what is waited for.
    ///
    /// ```no_run
    /// # use std::collections::HashMap;
    /// # fn demo(kernel: &sparsile_runtime::cuda::CudaKernel,
    /// #         a: sparsile_formats::SparseTensor<'static>, x_ptr: u64, y_ptr: u64, n: usize, m: usize)
    /// #         -> Result<(), sparsile_runtime::cuda::CudaError> {
    /// use sparsile_ir::DType;
    /// use sparsile_runtime::cuda::{CudaStream, DeviceArray, DeviceInput};
    /// // A on the host (its structure is cached on the device), x and y in device memory.
    /// let inputs = HashMap::from([
    ///     ("A".to_string(), DeviceInput::host(a)),
    ///     ("x".to_string(), DeviceInput::dense(DeviceArray::contiguous(x_ptr, DType::F32, vec![n], 0))),
    /// ]);
    /// let mut alloc = |spec: &sparsile_runtime::cuda::OutputSpec| {
    ///     Ok(DeviceArray::contiguous(y_ptr, spec.dtype, spec.shape.clone(), 0))
    /// };
    /// let outputs = kernel.run_device(&inputs, &mut alloc, CudaStream::DEFAULT, &Default::default())?;
    /// assert_eq!(outputs["y"].array.shape, vec![m]);
    /// # Ok(()) }
    /// ```
    pub fn run_device(
        &self,
        inputs: &HashMap<String, DeviceInput<'_>>,
        alloc: &mut dyn FnMut(&OutputSpec) -> Result<DeviceArray, String>,
        stream: CudaStream,
        options: &KernelOptions,
    ) -> Result<HashMap<String, DeviceOutput>, CudaError> {
        let program = &self.program;
        for name in inputs.keys() {
            let ok = program
                .buffer_by_name(name)
                .is_some_and(|id| program.buffers[id].role == BufferRole::Input);
            if !ok {
                return Err(InterpError::UnknownInput { name: name.clone() }.into());
            }
        }
        for name in options.params.keys() {
            if program.param_by_name(name).is_none() {
                return Err(InterpError::UnknownParam { name: name.clone() }.into());
            }
        }
        for name in options.output_structures.keys() {
            let ok = program
                .buffer_by_name(name)
                .is_some_and(|id| program.buffers[id].role != BufferRole::Input);
            if !ok {
                return Err(InterpError::UnknownOutputStructure { name: name.clone() }.into());
            }
        }

        // Binding, from the structures (the interpreter's checks).
        let mut b = Bindings {
            params: program
                .params
                .values()
                .map(|p| options.params.get(&p.name).copied())
                .collect(),
            axes: program.axes.values().map(|_| None).collect(),
        };
        let mut structures: IdVec<BufferId, Option<Arc<Structure<'_>>>> =
            program.buffers.values().map(|_| None).collect();
        let mut owned_structures: IdVec<BufferId, Option<Arc<Structure<'static>>>> =
            program.buffers.values().map(|_| None).collect();
        let mut owned: IdVec<BufferId, Option<Owned>> =
            program.buffers.values().map(|_| None).collect();
        let mut counts: IdVec<BufferId, usize> = program.buffers.values().map(|_| 0).collect();
        for (id, decl) in program.buffers.iter() {
            if decl.role != BufferRole::Input {
                continue;
            }
            let input = inputs
                .get(&decl.name)
                .ok_or_else(|| InterpError::MissingInput {
                    buffer: decl.name.clone(),
                })?;
            validate::check_structure(&decl.name, &input.structure)?;
            b.bind_structure(program, id, &input.structure)?;
            let count = match &input.values {
                DeviceValues::Host(v) => v.len(),
                DeviceValues::Device(a) => elements(&decl.name, a)?,
                DeviceValues::Mirrored { host, device } => {
                    let n = elements(&decl.name, device)?;
                    if n != host.len() || device.dtype != host.dtype() {
                        return Err(CudaError::OperandSize {
                            operand: decl.name.clone(),
                            reason: format!(
                                "its host values ({} {}) and device values ({n} {}) are not copies of each other",
                                host.len(),
                                host.dtype(),
                                device.dtype
                            ),
                        });
                    }
                    n
                }
            };
            validate::check_value_count(&decl.name, &input.structure, count)?;
            match (&input.values, decl.dtype.is_float()) {
                (DeviceValues::Host(v) | DeviceValues::Mirrored { host: v, .. }, false) => {
                    if let BufValues::Owned(ints) = input_values(&decl.name, decl.dtype, v)? {
                        owned[id] = Some(integer_values(decl.dtype, &ints));
                    }
                }
                (DeviceValues::Host(v), true) => {
                    input_values(&decl.name, decl.dtype, v)?;
                }
                (DeviceValues::Device(_), false) => {
                    return Err(CudaError::NeedsHostValues {
                        input: decl.name.clone(),
                        reason: format!(
                            "the kernel takes it as {} values, converted on the host",
                            decl.dtype
                        ),
                    })
                }
                (DeviceValues::Device(a) | DeviceValues::Mirrored { device: a, .. }, true) => {
                    if a.dtype != decl.dtype {
                        return Err(CudaError::OperandDType {
                            operand: decl.name.clone(),
                            expected: decl.dtype.to_string(),
                            found: a.dtype.to_string(),
                        });
                    }
                }
            }
            counts[id] = count;
            structures[id] = Some(Arc::clone(&input.structure));
        }
        let stored = args::complete_structures(
            program,
            &options.output_structures,
            &mut b,
            &mut structures,
            &mut owned_structures,
        )?;
        for (id, decl) in program.buffers.iter() {
            if decl.role != BufferRole::Input {
                counts[id] = stored[id];
            }
        }
        let bound = Bound {
            bindings: b,
            structures: structures
                .values()
                .map(|s| s.clone().expect("every buffer has a structure"))
                .collect(),
            owned_structures,
            owned,
            scratch: Vec::new(),
            reused: Vec::new(),
        };
        let params = args::params(program, &self.args, &bound)?;

        // Outputs, from the caller.
        let mut outputs: HashMap<BufferId, DeviceOutput> = HashMap::new();
        for (id, decl) in program.buffers.iter() {
            if decl.role != BufferRole::Output {
                continue;
            }
            let structure = bound.owned_structures[id]
                .clone()
                .expect("outputs own their structure");
            let count = counts[id];
            size(&decl.name, decl.dtype, count)?;
            let shape = if structure.format == Format::Dense {
                structure.shape.clone()
            } else {
                vec![count]
            };
            let spec = OutputSpec {
                name: decl.name.clone(),
                dtype: decl.dtype,
                shape,
                structure: Arc::clone(&structure),
            };
            let array = alloc(&spec).map_err(|reason| CudaError::OutputAllocation {
                output: decl.name.clone(),
                reason,
            })?;
            check_device_array(&self.device, &decl.name, &array, decl.dtype)?;
            let found = elements(&decl.name, &array)?;
            if found != count {
                return Err(CudaError::OperandSize {
                    operand: decl.name.clone(),
                    reason: format!(
                        "the output has {count} elements (shape {:?}), the array given for it {found} (shape {:?})",
                        spec.shape, array.shape
                    ),
                });
            }
            outputs.insert(id, DeviceOutput { array, structure });
        }

        // Vector loads of the caller's arrays need their addresses aligned.
        for (index, bytes) in self.vector_alignments() {
            let Some((name, Slot::Values { buffer }, _)) = self.args.buffers.get(index) else {
                continue;
            };
            let decl = &program.buffers[*buffer];
            let array = match decl.role {
                BufferRole::Output => outputs.get(buffer).map(|o| &o.array),
                BufferRole::Input if bound.owned[*buffer].is_none() => {
                    match &inputs[&decl.name].values {
                        DeviceValues::Device(a) | DeviceValues::Mirrored { device: a, .. } => {
                            Some(a)
                        }
                        DeviceValues::Host(_) => None,
                    }
                }
                _ => None,
            };
            if let Some(a) = array {
                if counts[*buffer] > 0 && !a.ptr.is_multiple_of(bytes as u64) {
                    return Err(CudaError::Misaligned {
                        operand: if decl.name == *name {
                            decl.name.clone()
                        } else {
                            format!("{} (buffer {name})", decl.name)
                        },
                        address: a.ptr,
                        bytes,
                    });
                }
            }
        }

        // Device memory of every function buffer, and the host integer arrays grids read.
        let mut state = RunState {
            device: self.device.clone(),
            stream,
            memory: Vec::new(),
            cached: Vec::new(),
            copied_host: false,
        };
        let mut device_args = Vec::with_capacity(self.args.buffers.len());
        let mut ints = Vec::with_capacity(self.args.buffers.len());
        let mut to_zero: Vec<(u64, usize)> = Vec::new();
        for (name, slot, len) in &self.args.buffers {
            let mut host_ints = HostInts::None;
            let (arg, count) = match slot {
                Slot::Scratch => (Arg::Declared, None),
                Slot::Memory { dtype } => {
                    let count = len
                        .as_ref()
                        .and_then(|e| eval_len(e, &params))
                        .and_then(|n| usize::try_from(n).ok())
                        .ok_or_else(|| KernelError::OutputTooLarge {
                            buffer: name.clone(),
                            values: usize::MAX,
                        })?;
                    let bytes = size(name, *dtype, count)?;
                    let m = RunMemory::alloc(&self.device, bytes, stream, name)?;
                    to_zero.push((m.ptr(), m.bytes()));
                    state.memory.push(m);
                    (Arg::Run(state.memory.len() - 1), None)
                }
                Slot::Values { buffer } => {
                    let decl = &program.buffers[*buffer];
                    let count = counts[*buffer];
                    match decl.role {
                        BufferRole::Output => {
                            let array = &outputs[buffer].array;
                            to_zero.push((array.ptr, size(name, decl.dtype, count)?));
                            (Arg::Caller(array.ptr), Some(count))
                        }
                        BufferRole::Input => {
                            let input = &inputs[&decl.name];
                            let converted = bound.owned[*buffer].as_ref();
                            match (&input.values, converted) {
                                (_, Some(o)) => {
                                    let (src, i) = match o {
                                        Owned::I32(v) => (bytes_of(v), HostInts::I32(v)),
                                        Owned::I64(v) => (bytes_of(v), HostInts::I64(v)),
                                        Owned::F32(v) => (bytes_of(v), HostInts::None),
                                        Owned::F64(v) => (bytes_of(v), HostInts::None),
                                        Owned::F16(v) => (bytes_of(v), HostInts::None),
                                        Owned::BF16(v) => (bytes_of(v), HostInts::None),
                                        Owned::External(_) => {
                                            unreachable!("CUDA runs are bound without out buffers")
                                        }
                                    };
                                    host_ints = i;
                                    (self.upload(&mut state, name, src)?, Some(count))
                                }
                                (
                                    DeviceValues::Device(a)
                                    | DeviceValues::Mirrored { device: a, .. },
                                    None,
                                ) => {
                                    check_device_array(&self.device, &decl.name, a, decl.dtype)?;
                                    (Arg::Caller(a.ptr), Some(count))
                                }
                                (DeviceValues::Host(v), None) => {
                                    let src = match v {
                                        Values::F32(v) => bytes_of(v),
                                        Values::F64(v) => bytes_of(v),
                                        Values::F16(v) => bytes_of(v),
                                        Values::BF16(v) => bytes_of(v),
                                    };
                                    (self.upload(&mut state, name, src)?, Some(count))
                                }
                            }
                        }
                        BufferRole::Temp => {
                            let bytes = size(name, decl.dtype, count)?;
                            let m = RunMemory::alloc(&self.device, bytes, stream, name)?;
                            to_zero.push((m.ptr(), m.bytes()));
                            state.memory.push(m);
                            (Arg::Run(state.memory.len() - 1), Some(count))
                        }
                    }
                }
                Slot::Array {
                    buffer,
                    axis,
                    array,
                    index_type,
                } => {
                    let structure = &bound.structures[*buffer];
                    let arr = args::slot_array(
                        structure,
                        &program.buffers[*buffer].name,
                        name,
                        *axis,
                        *array,
                        *index_type,
                    )?;
                    let (src, i) = match arr {
                        IndexArray::I32(v) => (bytes_of(v), HostInts::I32(v)),
                        IndexArray::I64(v) => (bytes_of(v), HostInts::I64(v)),
                    };
                    host_ints = i;
                    let indptr = matches!(array, ArrayKind::Indptr);
                    let arg = match operand_cache::array(
                        &self.device,
                        stream,
                        structure,
                        *axis,
                        indptr,
                        arr,
                    )? {
                        Some(cached) => {
                            state.cached.push(cached);
                            Arg::Cached(state.cached.len() - 1)
                        }
                        None => self.upload(&mut state, name, src)?,
                    };
                    (arg, Some(arr.len()))
                }
            };
            if let Some(count) = count {
                args::check_len(name, len.as_ref(), &params, count)?;
            }
            device_args.push(arg);
            ints.push(host_ints);
        }
        let ints = Ints(ints);

        // Grids (before anything runs: a grid that cannot be computed queues nothing
        // more).
        let mut launches = Vec::with_capacity(self.plan.kernels.len());
        let kernels = self.plan.kernels.iter().zip(&self.launches);
        for ((k, launch), function) in kernels.zip(&self.functions) {
            if let Some(g) = grid::grid(k, launch, &params, &ints)? {
                launches.push((k, function, g));
            }
        }

        for (ptr, bytes) in to_zero {
            // SAFETY: run memory of `bytes` bytes, or an output the caller's array of
            // `bytes` bytes checked above; both stay allocated until this is done (run
            // memory is freed in stream order, the caller promises its own).
            unsafe { zero_async(&self.device, ptr, bytes, stream)? };
        }
        let address = |arg: &Arg| match arg {
            Arg::Declared => None,
            Arg::Caller(p) => Some(*p),
            Arg::Run(i) => Some(state.memory[*i].ptr()),
            Arg::Cached(i) => Some(state.cached[*i].device_ptr()),
        };
        for (k, function, g) in &launches {
            let mut launch_args = Vec::with_capacity(k.args.len());
            for a in &k.args {
                launch_args.push(match *a {
                    ArgRef::Param(p) => LaunchArg::I64(params[p]),
                    ArgRef::Buffer(b) => LaunchArg::Ptr(
                        address(&device_args[b])
                            .expect("launch arguments are global buffers (check_plan)"),
                    ),
                });
            }
            let config = LaunchConfig {
                grid: *g,
                block: k.block,
                shared_bytes: 0,
            };
            // SAFETY: `check_plan` matched the plan to the function (params as `long
            // long`, buffers as pointers to their element type, in the emitter's
            // order); every buffer holds at least its declared length of its element
            // type (checked above: the caller's arrays by the driver and their shapes,
            // the rest allocated here); the caller promises its memory stays allocated
            // until the kernels are done, and the run's own memory is freed in stream
            // order or after waiting.
            unsafe {
                self.device
                    .launch_on(function, config, &launch_args, stream)?
            };
        }
        state.finish()?;
        drop(ints);

        let mut result = HashMap::new();
        for (id, output) in outputs {
            result.insert(program.buffers[id].name.clone(), output);
        }
        Ok(result)
    }

    /// Copies `src` into new run memory on the run's stream (the run waits for the
    /// stream before returning).
    /// `(function buffer index, bytes)`: the largest alignment any kernel's vector loads
    /// need of each buffer's address.
    fn vector_alignments(&self) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        for &(index, bytes) in self.plan.kernels.iter().flat_map(|k| &k.alignments) {
            match out.iter_mut().find(|(i, _)| *i == index) {
                Some((_, b)) => *b = (*b).max(bytes),
                None => out.push((index, bytes)),
            }
        }
        out
    }

    fn upload(
        &self,
        state: &mut RunState,
        name: &str,
        src: (*const std::ffi::c_void, usize),
    ) -> Result<Arg, CudaError> {
        let m = RunMemory::alloc(&self.device, src.1, state.stream, name)?;
        // SAFETY: the run memory holds at least `src.1` bytes; the source outlives the
        // run, which waits for the stream before it returns (`copied_host`).
        unsafe { copy_to_device_async(&self.device, m.ptr(), src, state.stream)? };
        state.copied_host = true;
        state.memory.push(m);
        Ok(Arg::Run(state.memory.len() - 1))
    }
}
