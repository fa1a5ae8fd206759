//! Running a kernel of the `cuda` target on operands in device memory, on the caller's
//! stream: [`Kernel::run_device`] and [`AutoKernel::run_device`](crate::AutoKernel::run_device).
//!
//! Inputs are named by declared tensor, as for [`Kernel::run`]; each is a
//! [`DeviceInput`]: a structure on the host with values in host or device memory (a
//! dense operand is a [`DeviceInput::dense`] array). Declared dimensions are bound from
//! the inputs' shapes. Outputs are arrays the caller allocates when asked (see
//! [`CudaKernel::run_device`](sparsile_runtime::cuda::CudaKernel::run_device), which
//! says what is copied, what is cached on the device and what is waited for).
//!
//! A schedule that decomposes an input into parts (`decompose_format`, as `gpu_hyb`
//! does) computes the parts on the host before every run, from the input's host
//! values: such an input must carry them ([`DeviceValues::Host`] or
//! [`DeviceValues::Mirrored`]), and the parts are copied to the device on every run.

use std::collections::HashMap;

use sparsile_formats::decompose::DecomposeCache;
use sparsile_formats::SparseTensor;
use sparsile_runtime::cuda::{
    CudaError, CudaStream, DeviceArray, DeviceInput, DeviceOutput, OutputSpec,
};
use sparsile_runtime::interp::derived::derive_inputs;
use sparsile_runtime::{KernelError, KernelOptions};

use super::{Backend, CompileError, Kernel, RunOptions};
use crate::bind_dims;
use crate::evaluate::{buffer_name, dim_params};

impl Kernel {
    /// Runs the kernel (target `cuda`) on `inputs` (by declared tensor name) on
    /// `stream`; `alloc` provides each output's device array (asked with the output's
    /// tensor name). Returns the outputs by tensor name, written in place; the kernels
    /// may still be running (see the module docs).
    ///
    /// ```no_run
    /// # use std::collections::HashMap;
    /// # fn demo(kernel: &sparsile::Kernel, a: sparsile::formats::SparseTensor<'static>,
    /// #         x: u64, y: u64, n: usize) -> Result<(), sparsile::CompileError> {
    /// use sparsile::runtime::cuda::{CudaStream, DeviceArray, DeviceInput, OutputSpec};
    /// use sparsile::ir::DType;
    /// let inputs = HashMap::from([
    ///     ("A".to_string(), DeviceInput::host(a)),
    ///     ("x".to_string(), DeviceInput::dense(DeviceArray::contiguous(x, DType::F32, vec![n], 0))),
    /// ]);
    /// let mut alloc = |o: &OutputSpec| Ok(DeviceArray::contiguous(y, o.dtype, o.shape.clone(), 0));
    /// let out = kernel.run_device(&inputs, &mut alloc, CudaStream::DEFAULT, &Default::default())?;
    /// println!("y: {:?}", out["y"].array.shape);
    /// # Ok(()) }
    /// ```
    pub fn run_device(
        &self,
        inputs: &HashMap<String, DeviceInput<'_>>,
        alloc: &mut dyn FnMut(&OutputSpec) -> Result<DeviceArray, String>,
        stream: CudaStream,
        options: &RunOptions,
    ) -> Result<HashMap<String, DeviceOutput>, CompileError> {
        let Backend::Cuda(kernel) = &self.backend else {
            return Err(CompileError::Target(format!(
                "operands in device memory run on the cuda target; this kernel's target is {}",
                self.target()
            )));
        };
        let mut params = options.params.clone();
        if let Some(ast) = &self.ast {
            let shapes = inputs
                .iter()
                .map(|(n, i)| (n.clone(), i.structure.shape.clone()))
                .collect();
            params.extend(dim_params(&self.lowered.stage1, &bind_dims(ast, &shapes)?));
        }
        let mut by_buf: HashMap<String, DeviceInput<'_>> = inputs
            .iter()
            .map(|(n, i)| (buffer_name(n), i.clone()))
            .collect();
        let program = &self.lowered.stage1;
        if !program.derived.is_empty() {
            for d in &program.derived {
                let source = &program.buffers[d.source].name;
                if by_buf
                    .get(source)
                    .is_some_and(|i| i.host_values().is_none())
                {
                    return Err(CudaError::NeedsHostValues {
                        input: source.clone(),
                        reason: "the schedule decomposes it into parts on the host before every run (decompose_format)".to_string(),
                    }
                    .into());
                }
            }
            let host: HashMap<String, SparseTensor<'_>> = by_buf
                .iter()
                .filter(|(_, i)| i.host_values().is_some())
                .map(|(n, i)| (n.clone(), i.host_view()))
                .collect();
            let derived = derive_inputs(program, &host, Some(DecomposeCache::shared()))
                .map_err(KernelError::from)?;
            drop(host);
            by_buf.extend(derived.into_iter().map(|(n, t)| (n, DeviceInput::host(t))));
        }
        // The runtime names outputs by buffer; the caller by tensor.
        let tensor_of: HashMap<String, String> = match &self.ast {
            Some(ast) => ast
                .tensors
                .iter()
                .map(|d| (buffer_name(&d.name), d.name.clone()))
                .collect(),
            None => HashMap::new(),
        };
        let rename = |buffer: &str| {
            tensor_of
                .get(buffer)
                .cloned()
                .unwrap_or_else(|| buffer.to_string())
        };
        let mut by_tensor = |spec: &OutputSpec| {
            let spec = OutputSpec {
                name: rename(&spec.name),
                ..spec.clone()
            };
            alloc(&spec)
        };
        let kernel_options = KernelOptions {
            params,
            ..KernelOptions::default()
        };
        let outputs = kernel.run_device(&by_buf, &mut by_tensor, stream, &kernel_options)?;
        Ok(outputs
            .into_iter()
            .map(|(buffer, o)| (rename(&buffer), o))
            .collect())
    }
}
