//! `sparsile._native.Schedule`: a program being scheduled, with its trace.
//!
//! Any recorded step applies through [`Schedule::apply`] from its JSON form (the trace's
//! own step format, e.g. `{"step": "parallel", "target": {"block": "C", "var": "i_2"}}`),
//! so primitives added to Sparsile are available from Python without new bindings;
//! `split` and `fuse` also have typed methods returning the loops they create. A failing
//! step raises `ValueError` with the precondition that failed and leaves the schedule
//! unchanged.

use std::collections::HashMap;

use pyo3::prelude::*;
use sparsile::formats::Format;
use sparsile::transform::schedule::{self as sch, LoopRef, SplitTail, Step, Trace};

use crate::errors::{detached, message, value_error};
use crate::tensor::parse_format;

/// A schedule of an index-notation program.
#[pyclass(module = "sparsile._native")]
pub struct Schedule {
    inner: sch::Schedule,
}

fn loop_ref(l: LoopRef) -> (String, String) {
    (l.block, l.var)
}

#[pymethods]
impl Schedule {
    /// A schedule of `program` (index notation, with `formats` replacing declared
    /// formats) with no steps yet.
    #[new]
    #[pyo3(signature = (program, formats=None))]
    fn new(program: &str, formats: Option<HashMap<String, String>>) -> PyResult<Schedule> {
        let formats = formats
            .unwrap_or_default()
            .into_iter()
            .map(|(name, f)| Ok((name, parse_format(&f)?)))
            .collect::<PyResult<HashMap<String, Format>>>()?;
        let (_, stage1) =
            sparsile::lower_notation_with(program, &formats).map_err(|e| value_error(&e))?;
        Ok(Schedule {
            inner: sch::Schedule::new(&stage1),
        })
    }

    /// Applies one step given as JSON (a step of a trace).
    fn apply(&mut self, py: Python<'_>, step: &str) -> PyResult<()> {
        let step: Step = serde_json::from_str(step).map_err(|e| {
            pyo3::exceptions::PyValueError::new_err(format!("schedule step {step}: {e}"))
        })?;
        let inner = &mut self.inner;
        detached(py, || inner.apply(&step).map_err(|e| message(&e)))?
            .map_err(pyo3::exceptions::PyValueError::new_err)
    }

    /// Splits loop `var` of block `block` by `factor`; `tail` is `inner_fixed` (the inner
    /// loop runs `factor` times) or `outer_fixed`. Returns the outer and inner loops as
    /// `(block, var)` pairs.
    #[pyo3(signature = (block, var, factor, tail="inner_fixed"))]
    fn split(
        &mut self,
        block: &str,
        var: &str,
        factor: i64,
        tail: &str,
    ) -> PyResult<((String, String), (String, String))> {
        let tail = match tail {
            "inner_fixed" => SplitTail::InnerFixed,
            "outer_fixed" => SplitTail::OuterFixed,
            other => {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "unknown split tail `{other}` (expected inner_fixed or outer_fixed)"
                )))
            }
        };
        let (outer, inner) = self
            .inner
            .split(&LoopRef::new(block, var), factor, tail)
            .map_err(|e| value_error(&e))?;
        Ok((loop_ref(outer), loop_ref(inner)))
    }

    /// Fuses loop `outer` with the loop `inner` directly inside it (both in `block`);
    /// returns the fused loop as a `(block, var)` pair.
    fn fuse(&mut self, block: &str, outer: &str, inner: &str) -> PyResult<(String, String)> {
        let fused = self
            .inner
            .fuse(&LoopRef::new(block, outer), &LoopRef::new(block, inner))
            .map_err(|e| value_error(&e))?;
        Ok(loop_ref(fused))
    }

    /// The trace so far, as JSON.
    fn trace(&self) -> String {
        self.inner.trace().to_json()
    }

    /// Replays a trace (JSON) on a fresh schedule of `program`.
    #[staticmethod]
    #[pyo3(signature = (program, trace, formats=None))]
    fn replay(
        program: &str,
        trace: &str,
        formats: Option<HashMap<String, String>>,
    ) -> PyResult<Schedule> {
        let mut schedule = Schedule::new(program, formats)?;
        let trace = Trace::from_json(trace).map_err(|e| value_error(&e))?;
        for step in &trace.steps {
            schedule.inner.apply(step).map_err(|e| value_error(&e))?;
        }
        Ok(schedule)
    }

    /// The current IR: the stage-I program before the first stage-II step, the stage-II
    /// function after it.
    fn ir(&self) -> String {
        match self.inner.func() {
            Some(func) => func.to_string(),
            None => self.inner.program().to_string(),
        }
    }
}
