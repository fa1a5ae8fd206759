//! Binding the stage-I program to the input tensors, exactly as [`crate::interpret`]
//! does: inputs checked and bound (parameters unified with their storage), output and
//! temp structures given or derived, outputs and temps zero-filled.
//!
//! The loop-level function's buffers are then views of this state (see
//! [`super::memory`]).

use std::collections::HashMap;
use std::sync::Arc;

use sparsile_formats::{SparseTensor, Structure};
use sparsile_ir::coord::{BufferRole, Program};
use sparsile_ir::{BufferId, IdVec, ParamId};

use crate::interp::state::{Bindings, BufState, BufValues, Buffers};
use crate::interp::{self, structure_derive, validate};
use crate::{InterpError, InterpOptions};

/// The stage-I program once bound: parameter values (`None` when no tensor or option
/// gives one) and every buffer's structure and values.
pub(crate) struct BoundProgram<'i> {
    pub params: IdVec<ParamId, Option<i64>>,
    pub buffers: IdVec<BufferId, BufState<'i>>,
}

/// Binds `inputs` and `options` to `program` (see [`crate::interp`] for the rules).
pub(crate) fn bind_program<'i>(
    program: &Program,
    inputs: &'i HashMap<String, SparseTensor<'_>>,
    options: &InterpOptions,
) -> Result<BoundProgram<'i>, InterpError> {
    if !options.skip_verify {
        sparsile_ir::coord::verify(program)
            .map_err(|errors| InterpError::InvalidProgram { errors })?;
    }
    interp::check_names(program, inputs, options)?;
    interp::check_buffer_parents(program)?;
    let mut b = Bindings::<'i> {
        params: program
            .params
            .values()
            .map(|p| options.params.get(&p.name).copied())
            .collect(),
        axes: program.axes.values().map(|_| None).collect(),
    };
    let mut buffers: Buffers<'i> = program.buffers.values().map(|_| None).collect();

    for (id, decl) in program.buffers.iter() {
        if decl.role != BufferRole::Input {
            continue;
        }
        let tensor = inputs
            .get(&decl.name)
            .ok_or_else(|| InterpError::MissingInput {
                buffer: decl.name.clone(),
            })?;
        validate::check_structure(&decl.name, &tensor.structure)?;
        let structure: Arc<Structure<'i>> = tensor.structure.clone();
        b.bind_structure(program, id, &structure)?;
        validate::check_value_count(&decl.name, &structure, tensor.values.len())?;
        let values = interp::input_values(&decl.name, decl.dtype, &tensor.values)?;
        buffers[id] = Some(BufState {
            structure,
            owned_structure: None,
            values,
        });
    }
    for (id, decl) in program.buffers.iter() {
        if let Some(s) = options.output_structures.get(&decl.name) {
            validate::check_structure(&decl.name, s)?;
            let structure: Arc<Structure<'i>> = s.clone();
            b.bind_structure(program, id, &structure)?;
            buffers[id] = Some(BufState {
                values: BufValues::Owned(interp::zeros(&decl.name, s)?),
                structure,
                owned_structure: Some(Arc::clone(s)),
            });
        }
    }
    structure_derive::derive_axes(program, &mut b)?;
    for (id, decl) in program.buffers.iter() {
        if buffers[id].is_some() {
            continue;
        }
        let s = structure_derive::output_structure(program, &b, id)?;
        buffers[id] = Some(BufState {
            values: BufValues::Owned(interp::zeros(&decl.name, &s)?),
            structure: s.clone(),
            owned_structure: Some(s),
        });
    }
    let mut bound = IdVec::new();
    for id in program.buffers.ids() {
        bound.push(
            buffers[id]
                .take()
                .expect("every buffer is bound or allocated"),
        );
    }
    Ok(BoundProgram {
        params: b.params,
        buffers: bound,
    })
}
