//! `out=` arrays: NumPy arrays (torch tensors reach here as NumPy views of their memory)
//! that a run writes outputs into instead of allocating them, borrowed writable for the
//! run (NumPy's borrow checker then refuses the same array as an input of that run).
//!
//! Each must be C-contiguous, writable and of the output's element type (float16,
//! float32, float64; bfloat16 as uint16 bits); its size is checked against the output by
//! the run, which names the output on a mismatch.

use std::collections::HashMap;

use numpy::{PyArrayMethods, PyReadwriteArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sparsile::ir::DType;
use sparsile::runtime::OutBuffer;

use pyo3::exceptions::PyValueError;

use crate::errors::type_error;

/// One borrowed `out` array.
pub enum OutArg<'py> {
    F32(PyReadwriteArrayDyn<'py, f32>),
    F64(PyReadwriteArrayDyn<'py, f64>),
    F16(PyReadwriteArrayDyn<'py, half::f16>),
    Bf16Bits(PyReadwriteArrayDyn<'py, u16>),
}

impl<'py> OutArg<'py> {
    fn extract(name: &str, value: &Bound<'py, PyAny>) -> PyResult<OutArg<'py>> {
        let array = value.cast::<numpy::PyUntypedArray>().map_err(|_| {
            type_error(format!(
                "out[{name}] must be a NumPy array, got {}",
                value
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?;
        if !array.is_c_contiguous() {
            return Err(PyValueError::new_err(format!(
                "out[{name}] must be C-contiguous (a strided array cannot receive the output in place)"
            )));
        }
        let writable = value
            .getattr("flags")?
            .getattr("writeable")?
            .extract::<bool>()?;
        if !writable {
            return Err(PyValueError::new_err(format!("out[{name}] is read-only")));
        }
        let busy = |_| {
            PyValueError::new_err(format!(
                "out[{name}] is in use elsewhere in this call (an input, or another out)"
            ))
        };
        if let Ok(a) = value.cast::<numpy::PyArrayDyn<f32>>() {
            return Ok(OutArg::F32(a.try_readwrite().map_err(busy)?));
        }
        if let Ok(a) = value.cast::<numpy::PyArrayDyn<f64>>() {
            return Ok(OutArg::F64(a.try_readwrite().map_err(busy)?));
        }
        if let Ok(a) = value.cast::<numpy::PyArrayDyn<half::f16>>() {
            return Ok(OutArg::F16(a.try_readwrite().map_err(busy)?));
        }
        if let Ok(a) = value.cast::<numpy::PyArrayDyn<u16>>() {
            return Ok(OutArg::Bf16Bits(a.try_readwrite().map_err(busy)?));
        }
        Err(type_error(format!(
            "out[{name}] must be float16, float32 or float64 (bfloat16 as uint16 bits), got {}",
            array.dtype()
        )))
    }

    /// The run's view of the array.
    fn buffer(&mut self) -> OutBuffer {
        fn raw<T>(a: &mut PyReadwriteArrayDyn<'_, T>, dtype: DType) -> OutBuffer
        where
            T: numpy::Element,
        {
            let slice = a
                .as_slice_mut()
                .expect("checked C-contiguous before borrowing");
            // SAFETY: the slice is this borrowed, writable, aligned array of `T`; it stays
            // borrowed (so no other run input or out can take it) until the `OutArg` is
            // dropped, after the run.
            unsafe { OutBuffer::new(slice.as_mut_ptr().cast(), slice.len(), dtype) }
        }
        match self {
            OutArg::F32(a) => raw(a, DType::F32),
            OutArg::F64(a) => raw(a, DType::F64),
            OutArg::F16(a) => raw(a, DType::F16),
            OutArg::Bf16Bits(a) => raw(a, DType::BF16),
        }
    }
}

/// The `out` arrays of a call, by output name, borrowed; and their buffers for the run.
pub fn out_args<'py>(
    out: Option<&Bound<'py, PyDict>>,
) -> PyResult<(Vec<OutArg<'py>>, HashMap<String, OutBuffer>)> {
    let mut args = Vec::new();
    let mut buffers = HashMap::new();
    if let Some(out) = out {
        for (name, value) in out.iter() {
            let name: String = name.extract()?;
            let mut arg = OutArg::extract(&name, &value)?;
            buffers.insert(name, arg.buffer());
            args.push(arg);
        }
    }
    Ok((args, buffers))
}
