//! The host side of each function buffer for one run, and its copy on the device.
//!
//! Binding is [`CompiledKernel`](crate::CompiledKernel)'s (`kernel/args.rs`): the same
//! checks in the same order with the same errors. Then, buffer by buffer in
//! `Func::buffers` order: inputs' values (floating-point in place, integer ones as
//! converted by the binding) and structure arrays are copied to the device; outputs,
//! temps and `scratch` buffers are zero-filled device memory; `shared` and `local`
//! buffers have nothing (the kernels declare them). Every array is checked to be at least
//! as long as its declared flat length, as for CPU kernels.

use std::collections::HashMap;

use sparsile_formats::{IndexArray, SparseTensor, Values};
use sparsile_ir::coord::{BufferRole, Program};
use sparsile_ir::{BufferId, DType};

use super::device::{CudaDevice, DeviceBuffer};
use super::grid::IntArrays;
use super::CudaError;
use crate::kernel::args::{check_len, slot_array, Bound, Owned};
use crate::kernel::plan::{eval_len, Plan, Slot};
use crate::KernelError;

/// The host side of one function buffer.
#[derive(Debug)]
pub(super) enum HostArray<'a> {
    /// A `shared` or `local` buffer: declared by the kernels, no argument.
    Declared,
    /// Zero-filled device memory of `bytes` bytes (outputs, temps, scratch).
    Zeroed {
        bytes: usize,
    },
    F16(&'a [half::f16]),
    BF16(&'a [half::bf16]),
    F32(&'a [f32]),
    F64(&'a [f64]),
    I32(&'a [i32]),
    I64(&'a [i64]),
}

impl HostArray<'_> {
    fn from_owned(o: &Owned) -> HostArray<'_> {
        match o {
            Owned::F16(v) => HostArray::F16(v),
            Owned::BF16(v) => HostArray::BF16(v),
            Owned::F32(v) => HostArray::F32(v),
            Owned::F64(v) => HostArray::F64(v),
            Owned::I32(v) => HostArray::I32(v),
            Owned::I64(v) => HostArray::I64(v),
            Owned::External(_) => unreachable!("CUDA runs are bound without out buffers"),
        }
    }

    fn from_index_array<'a>(a: &'a IndexArray<'_>) -> HostArray<'a> {
        match a {
            IndexArray::I32(v) => HostArray::I32(v),
            IndexArray::I64(v) => HostArray::I64(v),
        }
    }

    /// Elements held (none for `Declared` and `Zeroed`).
    fn len(&self) -> usize {
        match self {
            HostArray::Declared | HostArray::Zeroed { .. } => 0,
            HostArray::F16(v) => v.len(),
            HostArray::BF16(v) => v.len(),
            HostArray::F32(v) => v.len(),
            HostArray::F64(v) => v.len(),
            HostArray::I32(v) => v.len(),
            HostArray::I64(v) => v.len(),
        }
    }

    /// Whether it is zero-filled device memory (an output, temp or scratch buffer).
    pub fn is_zeroed(&self) -> bool {
        matches!(self, HostArray::Zeroed { .. })
    }

    /// The bytes copied from the host to make it (none for zero-filled memory).
    pub fn uploaded_bytes(&self) -> usize {
        match self {
            HostArray::Declared | HostArray::Zeroed { .. } => 0,
            _ => self.bytes(),
        }
    }

    /// Its copy on `device`, or `None` for a declared buffer.
    pub fn to_device(
        &self,
        device: &CudaDevice,
        name: &str,
    ) -> Result<Option<DeviceBuffer>, CudaError> {
        let buffer = match self {
            HostArray::Declared => return Ok(None),
            HostArray::Zeroed { bytes } => device.alloc_zeroed(*bytes),
            HostArray::F16(v) => device.upload(v),
            HostArray::BF16(v) => device.upload(v),
            HostArray::F32(v) => device.upload(v),
            HostArray::F64(v) => device.upload(v),
            HostArray::I32(v) => device.upload(v),
            HostArray::I64(v) => device.upload(v),
        };
        match buffer {
            Err(CudaError::Driver { code, message, .. }) if code == OUT_OF_MEMORY => {
                Err(CudaError::DeviceAlloc {
                    buffer: name.to_string(),
                    bytes: self.bytes(),
                    message,
                })
            }
            other => other.map(Some),
        }
    }

    fn bytes(&self) -> usize {
        match self {
            HostArray::Declared => 0,
            HostArray::Zeroed { bytes } => *bytes,
            HostArray::F16(v) => std::mem::size_of_val(*v),
            HostArray::BF16(v) => std::mem::size_of_val(*v),
            HostArray::F32(v) => std::mem::size_of_val(*v),
            HostArray::F64(v) => std::mem::size_of_val(*v),
            HostArray::I32(v) => std::mem::size_of_val(*v),
            HostArray::I64(v) => std::mem::size_of_val(*v),
        }
    }
}

/// `CUDA_ERROR_OUT_OF_MEMORY`.
const OUT_OF_MEMORY: u32 = 2;

/// The host side of every function buffer of one run, in `Func::buffers` order.
#[derive(Debug)]
pub(super) struct HostArrays<'a> {
    pub arrays: Vec<HostArray<'a>>,
    /// The stage-I buffer whose values each function buffer holds, for outputs (what
    /// comes back from the device).
    pub outputs: Vec<Option<BufferId>>,
}

impl IntArrays for HostArrays<'_> {
    fn element(&self, buffer: BufferId, index: i64) -> Result<i64, String> {
        let i = sparsile_ir::id::Id::index(buffer);
        let outside =
            |len: usize| format!("it reads element {index} of buffer #{i}, which has {len}");
        let at = |len: usize| usize::try_from(index).ok().filter(|&j| j < len);
        match self.arrays.get(i) {
            Some(HostArray::I32(v)) => at(v.len())
                .map(|j| i64::from(v[j]))
                .ok_or_else(|| outside(v.len())),
            Some(HostArray::I64(v)) => at(v.len()).map(|j| v[j]).ok_or_else(|| outside(v.len())),
            _ => Err(format!(
                "it reads buffer #{i}, which is not an integer input"
            )),
        }
    }
}

/// `count` elements of `dtype` in bytes, or the error of an output that cannot be
/// allocated.
fn zeroed(name: &str, dtype: DType, count: usize) -> Result<HostArray<'static>, KernelError> {
    count
        .checked_mul(dtype.size_bytes())
        .filter(|&b| b <= isize::MAX as usize)
        .map(|bytes| HostArray::Zeroed { bytes })
        .ok_or_else(|| KernelError::OutputTooLarge {
            buffer: name.to_string(),
            values: count,
        })
}

/// The host side of every function buffer (see the module docs). `bound` and `params`
/// come from `args::bind` and `args::params`.
pub(super) fn host_arrays<'a>(
    program: &Program,
    plan: &Plan,
    bound: &'a Bound<'_>,
    inputs: &'a HashMap<String, SparseTensor<'_>>,
    params: &[i64],
) -> Result<HostArrays<'a>, KernelError> {
    let mut arrays = Vec::with_capacity(plan.buffers.len());
    let mut outputs = Vec::with_capacity(plan.buffers.len());
    for (name, slot, len) in &plan.buffers {
        let mut output = None;
        // The array, and the length to check against the declared one.
        let (array, count) = match slot {
            Slot::Scratch => (HostArray::Declared, None),
            Slot::Memory { dtype } => {
                let count = len
                    .as_ref()
                    .and_then(|e| eval_len(e, params))
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| KernelError::OutputTooLarge {
                        buffer: name.clone(),
                        values: usize::MAX,
                    })?;
                (zeroed(name, *dtype, count)?, None)
            }
            Slot::Values { buffer } => {
                let decl = &program.buffers[*buffer];
                match (&bound.owned[*buffer], decl.role) {
                    (Some(o), BufferRole::Input) => {
                        let array = HostArray::from_owned(o);
                        let count = array.len();
                        (array, Some(count))
                    }
                    (Some(o), role) => {
                        if role == BufferRole::Output {
                            output = Some(*buffer);
                        }
                        let (dtype, count) = match o {
                            Owned::F16(v) => (DType::F16, v.len()),
                            Owned::BF16(v) => (DType::BF16, v.len()),
                            Owned::F32(v) => (DType::F32, v.len()),
                            Owned::F64(v) => (DType::F64, v.len()),
                            Owned::I32(v) => (DType::I32, v.len()),
                            Owned::I64(v) => (DType::I64, v.len()),
                            Owned::External(_) => {
                                unreachable!("CUDA runs are bound without out buffers")
                            }
                        };
                        (zeroed(name, dtype, count)?, Some(count))
                    }
                    (None, _) => {
                        let values = &inputs
                            .get(&decl.name)
                            .expect("inputs without owned values are bound tensors")
                            .values;
                        let array = match values {
                            Values::F32(v) => HostArray::F32(v),
                            Values::F64(v) => HostArray::F64(v),
                            // 16-bit inputs (tensor-core operands) go up as they are:
                            // the kernels take them as raw 16-bit words.
                            Values::F16(v) => HostArray::F16(v),
                            Values::BF16(v) => HostArray::BF16(v),
                        };
                        let count = array.len();
                        (array, Some(count))
                    }
                }
            }
            Slot::Array {
                buffer,
                axis,
                array,
                index_type,
            } => {
                let arr = slot_array(
                    &bound.structures[*buffer],
                    &program.buffers[*buffer].name,
                    name,
                    *axis,
                    *array,
                    *index_type,
                )?;
                let array = HostArray::from_index_array(arr);
                let count = array.len();
                (array, Some(count))
            }
        };
        if let Some(count) = count {
            check_len(name, len.as_ref(), params, count)?;
        }
        arrays.push(array);
        outputs.push(output);
    }
    Ok(HostArrays { arrays, outputs })
}
