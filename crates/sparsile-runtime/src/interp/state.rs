//! What the interpreter knows about a program once its inputs are bound: parameter
//! values, the storage bound to every axis, and every buffer's structure and values.

use std::sync::Arc;

use sparsile_formats::{AxisStorage, Structure, Values};
use sparsile_ir::{AxisId, BufferId, IdVec, ParamId};

/// Where an axis's storage lives.
#[derive(Debug, Clone)]
pub(crate) enum AxisSource<'i> {
    /// Axis `index` of a tensor's structure (an input, or a caller-supplied output).
    Tensor {
        structure: Arc<Structure<'i>>,
        index: usize,
    },
    /// Storage computed by the interpreter (union / intersection, dense axes from params).
    Computed(Arc<AxisStorage<'static>>),
}

/// The storage bound to one program axis.
#[derive(Debug, Clone)]
pub(crate) struct BoundAxis<'i> {
    pub source: AxisSource<'i>,
    /// The buffer whose tensor bound the axis, or a description of how it was computed.
    pub bound_by: String,
    /// The tensor axis this storage comes from, directly or (for computed axes) through
    /// the first listed axis; used to name the format of outputs.
    pub origin: Option<(Arc<Structure<'i>>, usize)>,
}

impl<'i> BoundAxis<'i> {
    pub fn storage(&self) -> &AxisStorage<'i> {
        match &self.source {
            AxisSource::Tensor { structure, index } => &structure.axes[*index],
            AxisSource::Computed(storage) => storage,
        }
    }
}

/// Parameter values and axis storage, filled in by binding and structure derivation.
#[derive(Debug, Clone)]
pub(crate) struct Bindings<'i> {
    pub params: IdVec<ParamId, Option<i64>>,
    pub axes: IdVec<AxisId, Option<BoundAxis<'i>>>,
}

/// The values of a buffer during execution.
#[derive(Debug)]
pub(crate) enum BufValues<'i> {
    /// A floating-point input, read in place.
    Borrowed(Values<'i>),
    /// Outputs, temps and integer inputs, in f64 (integers are exact).
    Owned(Vec<f64>),
}

impl BufValues<'_> {
    pub fn len(&self) -> usize {
        match self {
            BufValues::Borrowed(v) => v.len(),
            BufValues::Owned(v) => v.len(),
        }
    }

    pub fn get(&self, offset: usize) -> f64 {
        match self {
            BufValues::Borrowed(v) => v.get_f64(offset),
            BufValues::Owned(v) => v[offset],
        }
    }
}

/// A buffer during execution.
#[derive(Debug)]
pub(crate) struct BufState<'i> {
    pub structure: Arc<Structure<'i>>,
    /// The structure returned with an output (outputs and temps only).
    pub owned_structure: Option<Arc<Structure<'static>>>,
    pub values: BufValues<'i>,
}

/// All buffers, by id.
pub(crate) type Buffers<'i> = IdVec<BufferId, Option<BufState<'i>>>;
