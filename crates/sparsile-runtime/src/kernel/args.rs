//! Binding a kernel's inputs and building its argument arrays.
//!
//! Binding is the interpreter's (same checks, same errors, same derived output
//! structures): tensors are bound to input buffers, extents unified with parameters,
//! shared axes checked, and the structures of outputs and temps derived. The argument
//! arrays then follow the [`Plan`]: floating-point inputs (f16 and bf16 as their 16-bit
//! words) are passed in place, integer inputs (exact integers in float tensors) are
//! converted, outputs and temps are allocated zeroed (f16/bf16 ones as 16-bit words), structure arrays are passed in place after checking their index
//! type.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::sync::Arc;

use half::{bf16, f16};
use sparsile_formats::{IndexArray, SparseTensor, Structure, Values};
use sparsile_ir::coord::{BufferRole, Program};
use sparsile_ir::{BufferId, DType, IdVec};

use super::plan::{eval_len, ArrayKind, Plan, Slot};
use super::KernelError;
use crate::interp::state::{Bindings, BufValues};
use crate::interp::{input_values, structure_derive, validate, InterpOptions};

/// Types whose all-zero bit pattern is the value zero.
trait ZeroBits {}
impl ZeroBits for f32 {}
impl ZeroBits for f64 {}
impl ZeroBits for i32 {}
impl ZeroBits for i64 {}
impl ZeroBits for f16 {}
impl ZeroBits for bf16 {}

/// The values of an input that are converted, or of an output or temp.
#[derive(Debug)]
pub(crate) enum Owned {
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    /// An output written into the caller's memory.
    External(super::OutBuffer),
}

impl Owned {
    /// `count` zeros of `dtype`, or an error when they cannot be allocated.
    fn zeros(buffer: &str, dtype: DType, count: usize) -> Result<Owned, KernelError> {
        Owned::new(buffer, dtype, count, true)
    }

    /// Storage for `count` values of `dtype` that the kernel sets before reading: not
    /// cleared, so a block the allocator kept (see `LineAligned`) is reused as it is,
    /// with neither page faults nor a pass over memory before the kernel's own.
    fn for_initialised(buffer: &str, dtype: DType, count: usize) -> Result<Owned, KernelError> {
        Owned::new(buffer, dtype, count, false)
    }

    /// `count` values of `dtype`, zeros when `zeroed`, or an error when they cannot be
    /// allocated.
    fn new(buffer: &str, dtype: DType, count: usize, zeroed: bool) -> Result<Owned, KernelError> {
        /// `count` values from the allocator: zeroed memory (large blocks come as fresh
        /// zero pages, touched first by the kernel's parallel phases instead of being
        /// cleared here on one thread), or memory as it comes when not `zeroed`.
        fn alloc<T: ZeroBits>(
            buffer: &str,
            count: usize,
            zeroed: bool,
        ) -> Result<Vec<T>, KernelError> {
            let too_large = || KernelError::OutputTooLarge {
                buffer: buffer.to_string(),
                values: count,
            };
            if count == 0 || std::mem::size_of::<T>() == 0 {
                return Ok(Vec::new());
            }
            let layout = std::alloc::Layout::array::<T>(count).map_err(|_| too_large())?;
            // SAFETY: `layout` has a non-zero size (count > 0, T not zero-sized).
            let ptr = unsafe {
                if zeroed {
                    std::alloc::alloc_zeroed(layout)
                } else {
                    std::alloc::alloc(layout)
                }
            } as *mut T;
            if ptr.is_null() {
                return Err(too_large());
            }
            // SAFETY: `ptr` was allocated by the global allocator with the layout of
            // `count` values of `T`. Zeroed, all-zero bits are a valid `T` (`ZeroBits`).
            // Not zeroed (`for_initialised`), nothing reads the values before the
            // kernel has set every one: the vector is only handed to the kernel as a
            // pointer, then to the caller after a successful run, or dropped (which
            // reads no value of these plain number types).
            Ok(unsafe { Vec::from_raw_parts(ptr, count, count) })
        }
        Ok(match dtype {
            DType::F32 => Owned::F32(alloc(buffer, count, zeroed)?),
            DType::F64 => Owned::F64(alloc(buffer, count, zeroed)?),
            DType::I32 => Owned::I32(alloc(buffer, count, zeroed)?),
            DType::I64 => Owned::I64(alloc(buffer, count, zeroed)?),
            DType::F16 => Owned::F16(alloc(buffer, count, zeroed)?),
            DType::BF16 => Owned::BF16(alloc(buffer, count, zeroed)?),
        })
    }

    /// Sets every value to zero, on `launcher`'s threads.
    pub fn zero(&mut self, launcher: &crate::jit::Launcher) {
        match self {
            Owned::F16(v) => launcher.fill_zero(v),
            Owned::BF16(v) => launcher.fill_zero(v),
            Owned::F32(v) => launcher.fill_zero(v),
            Owned::F64(v) => launcher.fill_zero(v),
            Owned::I32(v) => launcher.fill_zero(v),
            Owned::I64(v) => launcher.fill_zero(v),
            Owned::External(b) => {
                /// The caller's values as a slice.
                ///
                /// # Safety
                /// `b` holds `b.len()` aligned, writable values of `T` (`OutBuffer::new`).
                unsafe fn slice<'a, T>(b: &super::OutBuffer) -> &'a mut [T] {
                    std::slice::from_raw_parts_mut(b.ptr().cast::<T>(), b.len())
                }
                let b = *b;
                if b.is_empty() {
                    return;
                }
                // SAFETY: `bind` checked that `b` holds `len` values of the output's type,
                // and `OutBuffer::new`'s contract makes them this run's alone.
                unsafe {
                    match b.dtype() {
                        DType::F16 => launcher.fill_zero(slice::<f16>(&b)),
                        DType::BF16 => launcher.fill_zero(slice::<bf16>(&b)),
                        DType::F32 => launcher.fill_zero(slice::<f32>(&b)),
                        DType::F64 => launcher.fill_zero(slice::<f64>(&b)),
                        DType::I32 => launcher.fill_zero(slice::<i32>(&b)),
                        DType::I64 => launcher.fill_zero(slice::<i64>(&b)),
                    }
                }
            }
        }
    }

    /// Whether the values are the caller's (an `out` buffer), returned to no one.
    pub fn is_external(&self) -> bool {
        matches!(self, Owned::External(_))
    }

    fn ptr_len(&mut self) -> (*mut c_void, usize) {
        match self {
            Owned::F16(v) => (v.as_mut_ptr().cast(), v.len()),
            Owned::BF16(v) => (v.as_mut_ptr().cast(), v.len()),
            Owned::F32(v) => (v.as_mut_ptr().cast(), v.len()),
            Owned::F64(v) => (v.as_mut_ptr().cast(), v.len()),
            Owned::I32(v) => (v.as_mut_ptr().cast(), v.len()),
            Owned::I64(v) => (v.as_mut_ptr().cast(), v.len()),
            Owned::External(b) => (b.ptr(), b.len()),
        }
    }

    /// The values of an output; integers are returned as exact f64 values, like the
    /// interpreter does.
    pub fn into_values(self) -> Values<'static> {
        match self {
            Owned::F16(v) => Values::F16(v.into()),
            Owned::BF16(v) => Values::BF16(v.into()),
            Owned::F32(v) => Values::F32(v.into()),
            Owned::F64(v) => Values::F64(v.into()),
            Owned::I32(v) => Values::F64(v.into_iter().map(f64::from).collect::<Vec<_>>().into()),
            Owned::I64(v) => {
                Values::F64(v.into_iter().map(|x| x as f64).collect::<Vec<_>>().into())
            }
            Owned::External(_) => unreachable!("outputs in the caller's memory are not returned"),
        }
    }
}

/// Every buffer of a program bound to storage.
pub(crate) struct Bound<'i> {
    pub bindings: Bindings<'i>,
    /// The structure of every buffer.
    pub structures: IdVec<BufferId, Arc<Structure<'i>>>,
    /// The structure returned with each output or temp.
    pub owned_structures: IdVec<BufferId, Option<Arc<Structure<'static>>>>,
    /// Values owned by the run (outputs, temps, converted integer inputs).
    pub owned: IdVec<BufferId, Option<Owned>>,
    /// Scratch memory of the function's scratch buffers, owned by the run.
    pub scratch: Vec<Owned>,
    /// Outputs whose storage was taken from the caller's tensors (not yet zeroed).
    pub reused: Vec<BufferId>,
}

/// The values of `tensor` as storage for an output of `dtype` holding `count` values
/// with `structure`, when they can be overwritten in place: owned (not borrowed), of the
/// same type and length, and with an equal structure. `None` leaves `tensor` untouched.
fn reusable(
    tensor: &mut SparseTensor<'static>,
    structure: &Structure<'_>,
    dtype: DType,
    count: usize,
) -> Option<Owned> {
    // The same `Arc` (cheap) or an equal structure (compares the arrays).
    let same_structure = std::ptr::eq(
        Arc::as_ptr(&tensor.structure).cast::<u8>(),
        (structure as *const Structure<'_>).cast::<u8>(),
    ) || *tensor.structure == *structure;
    if !same_structure || tensor.values.len() != count {
        return None;
    }
    // Taking the vector leaves an empty one behind.
    match (&mut tensor.values, dtype) {
        (Values::F32(Cow::Owned(v)), DType::F32) => Some(Owned::F32(std::mem::take(v))),
        (Values::F64(Cow::Owned(v)), DType::F64) => Some(Owned::F64(std::mem::take(v))),
        (Values::F16(Cow::Owned(v)), DType::F16) => Some(Owned::F16(std::mem::take(v))),
        (Values::BF16(Cow::Owned(v)), DType::BF16) => Some(Owned::BF16(std::mem::take(v))),
        _ => None,
    }
}

/// Completes the structures once the inputs are bound: binds the given
/// `output_structures` (by buffer name), derives the remaining axes, and makes the structure of every buffer
/// that has none yet. Returns, per output and temp, its checked count of stored values
/// (0 for inputs).
pub(crate) fn complete_structures<'i>(
    program: &Program,
    output_structures: &HashMap<String, Arc<Structure<'static>>>,
    b: &mut Bindings<'i>,
    structures: &mut IdVec<BufferId, Option<Arc<Structure<'i>>>>,
    owned_structures: &mut IdVec<BufferId, Option<Arc<Structure<'static>>>>,
) -> Result<IdVec<BufferId, usize>, crate::InterpError> {
    for (id, decl) in program.buffers.iter() {
        if let Some(s) = output_structures.get(&decl.name) {
            validate::check_structure(&decl.name, s)?;
            let structure: Arc<Structure<'i>> = s.clone();
            b.bind_structure(program, id, &structure)?;
            structures[id] = Some(structure);
            owned_structures[id] = Some(Arc::clone(s));
        }
    }
    structure_derive::derive_axes(program, b)?;
    let mut counts: IdVec<BufferId, usize> = program.buffers.values().map(|_| 0).collect();
    for (id, decl) in program.buffers.iter() {
        if structures[id].is_none() {
            let s = structure_derive::output_structure(program, b, id)?;
            structures[id] = Some(s.clone());
            owned_structures[id] = Some(s);
        }
        if decl.role != BufferRole::Input {
            let s = structures[id]
                .as_ref()
                .expect("every buffer has a structure");
            validate::check_structure(&decl.name, s)?;
            counts[id] = validate::checked_nnz_stored(&decl.name, s)?;
        }
    }
    Ok(counts)
}

/// Binds `inputs` to `program` like [`crate::interpret`] does, and allocates outputs
/// (taking the storage of a matching tensor of `reuse` where there is one; those are
/// listed in [`Bound::reused`] and still hold their old values). A fresh output in
/// `initialised` (the program sets every element before reading any, see
/// `initialised`) is allocated without clearing; the others start at zero.
/// `check_names` and `check_buffer_parents` must have passed.
pub(crate) fn bind<'i>(
    program: &Program,
    inputs: &'i HashMap<String, SparseTensor<'_>>,
    options: &InterpOptions,
    reuse: &mut crate::interp::Outputs,
    out: &HashMap<String, super::OutBuffer>,
    initialised: &HashSet<BufferId>,
) -> Result<Bound<'i>, KernelError> {
    for name in out.keys() {
        let is_output = program
            .buffer_by_name(name)
            .is_some_and(|id| program.buffers[id].role == BufferRole::Output);
        if !is_output {
            return Err(KernelError::OutBufferMismatch {
                buffer: name.clone(),
                reason: "the program has no output of that name".to_string(),
            });
        }
    }
    let mut b = Bindings::<'i> {
        params: program
            .params
            .values()
            .map(|p| options.params.get(&p.name).copied())
            .collect(),
        axes: program.axes.values().map(|_| None).collect(),
    };
    let mut structures: IdVec<BufferId, Option<Arc<Structure<'i>>>> =
        program.buffers.values().map(|_| None).collect();
    let mut owned_structures: IdVec<BufferId, Option<Arc<Structure<'static>>>> =
        program.buffers.values().map(|_| None).collect();
    let mut owned: IdVec<BufferId, Option<Owned>> =
        program.buffers.values().map(|_| None).collect();
    let mut reused = Vec::new();

    for (id, decl) in program.buffers.iter() {
        if decl.role != BufferRole::Input {
            continue;
        }
        let tensor = inputs
            .get(&decl.name)
            .ok_or_else(|| crate::InterpError::MissingInput {
                buffer: decl.name.clone(),
            })?;
        validate::check_structure(&decl.name, &tensor.structure)?;
        let structure: Arc<Structure<'i>> = tensor.structure.clone();
        b.bind_structure(program, id, &structure)?;
        validate::check_value_count(&decl.name, &structure, tensor.values.len())?;
        if let BufValues::Owned(ints) = input_values(&decl.name, decl.dtype, &tensor.values)? {
            owned[id] = Some(match decl.dtype {
                DType::I32 => Owned::I32(ints.iter().map(|&v| v as i32).collect()),
                _ => Owned::I64(ints.iter().map(|&v| v as i64).collect()),
            });
        }
        structures[id] = Some(structure);
    }
    let counts = complete_structures(
        program,
        &options.output_structures,
        &mut b,
        &mut structures,
        &mut owned_structures,
    )?;
    for (id, decl) in program.buffers.iter() {
        if decl.role != BufferRole::Input {
            let s = &structures[id]
                .as_ref()
                .expect("every buffer has a structure");
            let count = counts[id];
            if let Some(b) = out.get(&decl.name) {
                if b.dtype() != decl.dtype || b.len() != count {
                    return Err(KernelError::OutBufferMismatch {
                        buffer: decl.name.clone(),
                        reason: format!(
                            "it takes {count} values of {}, the given memory holds {} of {}",
                            decl.dtype,
                            b.len(),
                            b.dtype()
                        ),
                    });
                }
                owned[id] = Some(Owned::External(*b));
                reused.push(id);
                continue;
            }
            let taken = match decl.role {
                BufferRole::Output => reuse
                    .get_mut(&decl.name)
                    .and_then(|t| reusable(t, s, decl.dtype, count)),
                _ => None,
            };
            owned[id] = Some(match taken {
                Some(o) => {
                    reused.push(id);
                    o
                }
                None if decl.role == BufferRole::Output && initialised.contains(&id) => {
                    Owned::for_initialised(&decl.name, decl.dtype, count)?
                }
                None => Owned::zeros(&decl.name, decl.dtype, count)?,
            });
        }
    }
    Ok(Bound {
        bindings: b,
        structures: structures
            .values()
            .map(|s| s.clone().expect("every buffer has a structure"))
            .collect(),
        owned_structures,
        owned,
        scratch: Vec::new(),
        reused,
    })
}

/// The kernel's parameter array, in `Func::params` order.
pub(crate) fn params(
    program: &Program,
    plan: &Plan,
    bound: &Bound<'_>,
) -> Result<Vec<i64>, KernelError> {
    let values = plan
        .params
        .iter()
        .map(|&p| {
            bound.bindings.params[p].ok_or_else(|| KernelError::UnboundParam {
                param: program.params[p].name.clone(),
            })
        })
        .collect::<Result<Vec<i64>, KernelError>>()?;
    if let Some((p, trip)) = crate::bound_promises::broken_promise(&plan.bounds, &values) {
        return Err(KernelError::BoundExceeded {
            var: p.var.clone(),
            extent: p.extent,
            trip,
        });
    }
    Ok(values)
}

/// The structure array a [`Slot::Array`] names (`array` of axis `axis` of `structure`,
/// the structure of tensor `tensor`), checked against the index type the kernel was
/// built for; `name` is the kernel's buffer.
pub(crate) fn slot_array<'s, 'i>(
    structure: &'s Structure<'i>,
    tensor: &str,
    name: &str,
    axis: usize,
    array: ArrayKind,
    index_type: sparsile_ir::IndexType,
) -> Result<&'s IndexArray<'i>, KernelError> {
    let storage = &structure.axes[axis];
    let arr = match array {
        ArrayKind::Indptr => storage.indptr.as_ref(),
        ArrayKind::Indices => storage.indices.as_ref(),
    }
    .ok_or_else(|| KernelError::NoSuchArray {
        buffer: name.to_string(),
        tensor: tensor.to_string(),
        axis,
        what: array.name(),
    })?;
    if arr.index_type() != index_type {
        return Err(KernelError::IndexTypeMismatch {
            buffer: name.to_string(),
            tensor: tensor.to_string(),
            axis,
            what: array.name(),
            expected: index_type.to_string(),
            found: arr.index_type().to_string(),
        });
    }
    Ok(arr)
}

fn array_ptr(a: &IndexArray<'_>) -> (*mut c_void, usize) {
    match a {
        IndexArray::I32(v) => (v.as_ptr().cast_mut().cast(), v.len()),
        IndexArray::I64(v) => (v.as_ptr().cast_mut().cast(), v.len()),
    }
}

/// The kernel's buffer array, in `Func::buffers` order. The pointers borrow from
/// `inputs` (through `bound.structures`) and from `bound.owned`.
pub(crate) fn buffers(
    program: &Program,
    plan: &Plan,
    bound: &mut Bound<'_>,
    inputs: &HashMap<String, SparseTensor<'_>>,
    params: &[i64],
) -> Result<Vec<*mut c_void>, KernelError> {
    let mut ptrs = Vec::with_capacity(plan.buffers.len());
    for (name, slot, len) in &plan.buffers {
        let (ptr, count) = match slot {
            Slot::Scratch => {
                ptrs.push(std::ptr::null_mut());
                continue;
            }
            Slot::Memory { dtype } => {
                let count = len
                    .as_ref()
                    .and_then(|e| eval_len(e, params))
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| KernelError::OutputTooLarge {
                        buffer: name.clone(),
                        values: usize::MAX,
                    })?;
                let mut mem = Owned::zeros(name, *dtype, count)?;
                let (ptr, _) = mem.ptr_len();
                // The vector's heap memory stays put when the vector moves.
                bound.scratch.push(mem);
                ptrs.push(ptr);
                continue;
            }
            Slot::Values { buffer } => match &mut bound.owned[*buffer] {
                Some(o) => o.ptr_len(),
                None => {
                    let decl = &program.buffers[*buffer];
                    let values = &inputs
                        .get(&decl.name)
                        .expect("inputs without owned values are bound tensors")
                        .values;
                    match values {
                        Values::F32(v) => (v.as_ptr().cast_mut().cast(), v.len()),
                        Values::F64(v) => (v.as_ptr().cast_mut().cast(), v.len()),
                        Values::F16(v) => (v.as_ptr().cast_mut().cast(), v.len()),
                        Values::BF16(v) => (v.as_ptr().cast_mut().cast(), v.len()),
                    }
                }
            },
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
                array_ptr(arr)
            }
        };
        check_len(name, len.as_ref(), params, count)?;
        ptrs.push(ptr);
    }
    Ok(ptrs)
}

/// The kernels' length check: an array at least as long as its declared flat length
/// (when that is a positive expression over params).
pub(crate) fn check_len(
    name: &str,
    len: Option<&sparsile_ir::loops::Expr>,
    params: &[i64],
    count: usize,
) -> Result<(), KernelError> {
    if let Some(needed) = len.and_then(|e| eval_len(e, params)) {
        if needed > 0 && (count as u64) < needed as u64 {
            return Err(KernelError::BufferTooShort {
                buffer: name.to_string(),
                needed,
                found: count,
            });
        }
    }
    Ok(())
}
