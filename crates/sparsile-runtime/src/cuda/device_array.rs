//! Operands in device memory the caller owns: how a device run is told about them, and
//! the checks made before a kernel touches them.
//!
//! A [`DeviceArray`] is a row-major array of `f32`/`f64` (or integer) elements at a
//! device address, as PyTorch's and CuPy's CUDA arrays describe themselves (`data_ptr`,
//! shape, strides, dtype, device index). Before a run reads or writes one,
//! [`check_device_array`] asks the driver about its first and last byte: both must be
//! device memory (not host memory, not an address the driver does not know) of the
//! kernel's device and context; the address must be aligned to the element size; the
//! strides, when given, must be those of a C-contiguous array; the element type must be
//! the buffer's. An array of zero elements is not looked at (PyTorch gives empty
//! tensors the address 0).
//!
//! What the checks cannot see: that the bytes between the first and the last are all
//! the caller's (an allocator hands out parts of larger blocks), and that the memory
//! stays allocated while the run's kernels use it; both are the caller's promise.

use std::borrow::Cow;
use std::sync::Arc;

use cudarc::driver::sys;
use sparsile_formats::{AxisStorage, Format, SparseTensor, Structure, Values};
use sparsile_ir::DType;

use super::device::guard;
use super::{CudaDevice, CudaError};

/// `CU_MEMORYTYPE_HOST`.
const MEMORY_HOST: u32 = 1;
/// `CUDA_ERROR_INVALID_VALUE`: what the driver says of an address it does not know.
const INVALID_VALUE: u32 = 1;

/// A row-major array in device memory the caller owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceArray {
    /// The device address of the first element.
    pub ptr: u64,
    /// The element type.
    pub dtype: DType,
    /// The shape (empty for a scalar).
    pub shape: Vec<usize>,
    /// Strides in elements, when the caller's array has them (checked to be the
    /// C-contiguous ones); `None` promises a C-contiguous array.
    pub strides: Option<Vec<i64>>,
    /// The ordinal of the device the caller says the memory is on.
    pub device: usize,
}

impl DeviceArray {
    /// A C-contiguous array of `shape` at `ptr` on device `device`.
    pub fn contiguous(ptr: u64, dtype: DType, shape: Vec<usize>, device: usize) -> DeviceArray {
        DeviceArray {
            ptr,
            dtype,
            shape,
            strides: None,
            device,
        }
    }

    /// The number of elements (`None` when it overflows).
    pub fn len(&self) -> Option<usize> {
        self.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// Its size in bytes (`None` when it overflows).
    pub fn bytes(&self) -> Option<usize> {
        self.len()?.checked_mul(self.dtype.size_bytes())
    }
}

/// The values of one input of a device run.
#[derive(Debug, Clone)]
pub enum DeviceValues<'a> {
    /// In host memory: copied to the device on every run.
    Host(Values<'a>),
    /// In device memory: read in place.
    Device(DeviceArray),
    /// The same values in both: kernels read the device copy; what runs on the host
    /// (a decomposition of the input into parts, the conversion of integer inputs)
    /// reads the host copy.
    Mirrored {
        host: Values<'a>,
        device: DeviceArray,
    },
}

/// One input of a device run: its structure (on the host) and its values.
///
/// The structure's arrays are copied to the device and kept there while the structure
/// is shared through its `Arc` and owns them (see [`super::operand_cache`]); a
/// structure over borrowed arrays is copied on every run.
#[derive(Debug, Clone)]
pub struct DeviceInput<'a> {
    pub structure: Arc<Structure<'a>>,
    pub values: DeviceValues<'a>,
}

/// The structure of a dense tensor of `shape`.
pub fn dense_structure(shape: &[usize]) -> Structure<'static> {
    Structure {
        format: Format::Dense,
        shape: shape.to_vec(),
        axes: shape.iter().map(|&d| AxisStorage::dense_fixed(d)).collect(),
    }
}

impl<'a> DeviceInput<'a> {
    /// A dense tensor in device memory (its structure is the array's shape).
    pub fn dense(array: DeviceArray) -> DeviceInput<'static> {
        DeviceInput {
            structure: Arc::new(dense_structure(&array.shape)),
            values: DeviceValues::Device(array),
        }
    }

    /// A tensor whose values are in device memory (`values`: one per stored element,
    /// in storage order).
    pub fn with_device_values(structure: Arc<Structure<'a>>, values: DeviceArray) -> Self {
        DeviceInput {
            structure,
            values: DeviceValues::Device(values),
        }
    }

    /// A tensor in host memory.
    pub fn host(tensor: SparseTensor<'a>) -> Self {
        DeviceInput {
            structure: tensor.structure,
            values: DeviceValues::Host(tensor.values),
        }
    }

    /// The values in host memory, when there are any.
    pub fn host_values(&self) -> Option<&Values<'a>> {
        match &self.values {
            DeviceValues::Host(v) | DeviceValues::Mirrored { host: v, .. } => Some(v),
            DeviceValues::Device(_) => None,
        }
    }

    /// The tensor with its host values (or, without any, with no values: a view of the
    /// structure for what reads only structures and shapes).
    pub fn host_view(&self) -> SparseTensor<'_> {
        let values = match self.host_values() {
            Some(v) => v.view(),
            None => empty_values(self.dtype()),
        };
        SparseTensor {
            structure: Arc::clone(&self.structure),
            values,
        }
    }

    /// The element type of the values.
    pub fn dtype(&self) -> DType {
        match &self.values {
            DeviceValues::Host(v) => v.dtype(),
            DeviceValues::Device(a) | DeviceValues::Mirrored { device: a, .. } => a.dtype,
        }
    }
}

/// No values of `dtype`.
fn empty_values(dtype: DType) -> Values<'static> {
    match dtype {
        DType::F64 => Values::F64(Cow::Borrowed(&[])),
        _ => Values::F32(Cow::Borrowed(&[])),
    }
}

/// An output of a device run, as the run asks the caller to allocate it.
#[derive(Debug, Clone)]
pub struct OutputSpec {
    /// The output buffer's name.
    pub name: String,
    /// The element type.
    pub dtype: DType,
    /// The shape of the array to allocate: the tensor's shape for a dense output, the
    /// number of stored values (`[nnz]`) for a sparse one.
    pub shape: Vec<usize>,
    /// The output's structure (for a sparse output, where its values go).
    pub structure: Arc<Structure<'static>>,
}

/// An output of a device run: the caller's array, written in place, and its structure.
#[derive(Debug, Clone)]
pub struct DeviceOutput {
    pub array: DeviceArray,
    pub structure: Arc<Structure<'static>>,
}

/// One pointer attribute of `ptr` (a `u32` or a pointer-sized value).
fn attribute<T: Default>(attribute: sys::CUpointer_attribute, ptr: u64) -> Result<T, CudaError> {
    let mut value = T::default();
    // SAFETY: `value` is of the attribute's type (u32 for the memory type and the
    // ordinal, a pointer for the context); the driver writes only that.
    guard("cuPointerGetAttribute", || unsafe {
        sys::cuPointerGetAttribute(
            (&mut value as *mut T).cast(),
            attribute,
            ptr as sys::CUdeviceptr,
        )
        .result()
    })?;
    Ok(value)
}

/// The C-contiguous strides (in elements) of `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut step = 1i64;
    for (s, &d) in strides.iter_mut().zip(shape).rev() {
        *s = step;
        step = step.saturating_mul(d as i64);
    }
    strides
}

/// Checks `array` (named `name`, of buffer element type `dtype`) for a run on `device`
/// (see the module docs).
pub fn check_device_array(
    device: &CudaDevice,
    name: &str,
    array: &DeviceArray,
    dtype: DType,
) -> Result<(), CudaError> {
    if array.dtype != dtype {
        return Err(CudaError::OperandDType {
            operand: name.to_string(),
            expected: dtype.to_string(),
            found: array.dtype.to_string(),
        });
    }
    if let Some(strides) = &array.strides {
        // Strides of dimensions of extent 1 do not matter.
        let contiguous = contiguous_strides(&array.shape);
        let same = strides.len() == array.shape.len()
            && strides
                .iter()
                .zip(&contiguous)
                .zip(&array.shape)
                .all(|((s, c), &d)| d <= 1 || s == c);
        if !same {
            return Err(CudaError::NotContiguous {
                operand: name.to_string(),
                shape: array.shape.clone(),
                strides: strides.clone(),
            });
        }
    }
    let bytes = array.bytes().ok_or_else(|| CudaError::OperandSize {
        operand: name.to_string(),
        reason: format!("its shape {:?} has too many elements", array.shape),
    })?;
    if array.device != device.ordinal() {
        return Err(CudaError::WrongDevice {
            operand: name.to_string(),
            found: array.device,
            expected: device.ordinal(),
        });
    }
    if bytes == 0 {
        return Ok(());
    }
    if !array.ptr.is_multiple_of(dtype.size_bytes() as u64) {
        return Err(CudaError::NotDeviceMemory {
            operand: name.to_string(),
            reason: format!(
                "its address {:#x} is not aligned to its {}-byte elements",
                array.ptr,
                dtype.size_bytes()
            ),
        });
    }
    let last = array
        .ptr
        .checked_add(bytes as u64 - 1)
        .ok_or_else(|| CudaError::OperandSize {
            operand: name.to_string(),
            reason: format!(
                "{bytes} bytes from {:#x} run past the address space",
                array.ptr
            ),
        })?;
    device.bind_context()?;
    for (what, address) in [("first", array.ptr), ("last", last)] {
        let unknown = |e: CudaError| {
            match e {
            CudaError::Driver {
                code: INVALID_VALUE,
                ..
            } => CudaError::NotDeviceMemory {
                operand: name.to_string(),
                reason: format!(
                    "the driver knows no allocation at its {what} byte ({address:#x}): it is host memory, freed memory, or its shape claims more than was allocated"
                ),
            },
            other => other,
        }
        };
        let kind: u32 = attribute(
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            address,
        )
        .map_err(unknown)?;
        if kind == MEMORY_HOST {
            return Err(CudaError::NotDeviceMemory {
                operand: name.to_string(),
                reason: format!("its {what} byte ({address:#x}) is in (page-locked) host memory"),
            });
        }
        let ordinal: u32 = attribute(
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            address,
        )
        .map_err(unknown)?;
        if ordinal as usize != device.ordinal() {
            return Err(CudaError::WrongDevice {
                operand: name.to_string(),
                found: ordinal as usize,
                expected: device.ordinal(),
            });
        }
        // Memory mapped by the virtual memory API (PyTorch's expandable segments) may
        // report no context: only a context that is reported is compared.
        let context: usize = attribute(
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_CONTEXT,
            address,
        )
        .unwrap_or(0);
        if context != 0 && context != device.raw_context() as usize {
            return Err(CudaError::NotDeviceMemory {
                operand: name.to_string(),
                reason: "it belongs to another CUDA context than the device's primary one"
                    .to_string(),
            });
        }
    }
    Ok(())
}
