//! Derived input buffers: computing each part of a decomposition from its source.
//!
//! A program after `decompose_format` declares input buffers `A_p0, A_p1, …` with
//! `derived A_pN = part(A, N) by rule` (see [`sparsile_ir::coord::derived`]). The caller
//! passes only `A`; [`derive_inputs`] computes the parts' tensors (structure from the
//! plan of the rule for `A`'s pattern, values gathered from `A`'s values). With a
//! [`DecomposeCache`], plans are reused while the pattern stays the same.
//! [`crate::interpret`] calls it (without a cache) for every derived buffer that the
//! caller did not pass.
//!
//! Errors: the source missing ([`InterpError::MissingInput`]), the rule not understood
//! or not applicable to the source, or a part number the rule does not have
//! ([`InterpError::Derive`], naming the derived buffer).

use std::collections::HashMap;
use std::sync::Arc;

use sparsile_formats::decompose::{DecomposeCache, DecomposePlan, DecomposeRule};
use sparsile_formats::{MapExpr, SparseTensor};
use sparsile_ir::coord::Program;
use sparsile_ir::BufferId;

use super::InterpError;

/// Whether the tensor's axis `d` holds logical coordinate `d`, for `ndim` axes.
fn identity_layout(tensor: &SparseTensor<'_>, ndim: usize) -> Result<(), String> {
    let format = tensor.format();
    if tensor.shape().len() != ndim || tensor.structure.axes.len() != ndim {
        return Err(format!(
            "the tensor has order {} and {} axes, the buffer {ndim} axes",
            tensor.shape().len(),
            tensor.structure.axes.len()
        ));
    }
    let layout = format.layout(ndim).map_err(|e| e.to_string())?;
    let identity = layout
        .to_logical
        .iter()
        .enumerate()
        .all(|(d, e)| *e == MapExpr::Axis(d));
    if identity {
        Ok(())
    } else {
        Err(format!("the tensor is stored as `{format}`"))
    }
}

/// The tensors of the derived buffers of `program` that `inputs` (by buffer name) does
/// not already hold, by buffer name.
pub fn derive_inputs(
    program: &Program,
    inputs: &HashMap<String, SparseTensor<'_>>,
    cache: Option<&DecomposeCache>,
) -> Result<HashMap<String, SparseTensor<'static>>, InterpError> {
    let mut out = HashMap::new();
    // Parts of one (source, rule), gathered once.
    let mut done: Vec<(BufferId, DecomposeRule, Vec<SparseTensor<'static>>)> = Vec::new();
    for d in &program.derived {
        // Dangling ids are the verifier's to report.
        let (Some(decl), Some(source_decl)) =
            (program.buffers.get(d.buffer), program.buffers.get(d.source))
        else {
            continue;
        };
        let name = &decl.name;
        if inputs.contains_key(name) {
            continue;
        }
        let fail = |message: String| InterpError::Derive {
            buffer: name.clone(),
            message,
        };
        let source_name = &source_decl.name;
        let source = inputs
            .get(source_name)
            .ok_or_else(|| InterpError::MissingInput {
                buffer: source_name.clone(),
            })?;
        let rule = DecomposeRule::from_spec(&d.rule).map_err(|e| fail(e.to_string()))?;
        identity_layout(source, source_decl.axes.len()).map_err(|why| {
            fail(format!(
                "its source `{source_name}` must be stored with one axis per logical dimension, \
                 in order (csr, dcsr, csf, coo, ell, dense): {why}"
            ))
        })?;
        let k = match done
            .iter()
            .position(|(s, r, _)| *s == d.source && *r == rule)
        {
            Some(k) => k,
            None => {
                let plan: Arc<DecomposePlan> = match cache {
                    Some(cache) => cache.plan(&rule, &source.structure),
                    None => DecomposePlan::new(&rule, &source.structure).map(Arc::new),
                }
                .map_err(|e| fail(e.to_string()))?;
                if source.values.len() != source.structure.nnz_stored() {
                    return Err(fail(format!(
                        "source `{source_name}` has {} values for {} stored positions",
                        source.values.len(),
                        source.structure.nnz_stored()
                    )));
                }
                done.push((d.source, rule, plan.gather(&source.values)));
                done.len() - 1
            }
        };
        let parts = &done[k].2;
        let part = parts.get(d.part).ok_or_else(|| {
            fail(format!(
                "rule `{}` has {} parts, there is no part {}",
                d.rule,
                parts.len(),
                d.part
            ))
        })?;
        out.insert(name.clone(), part.clone());
    }
    Ok(out)
}
