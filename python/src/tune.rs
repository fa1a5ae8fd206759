//! `sparsile._native.tune`: measures the candidates of an operator on a sparse tensor
//! and records the best in the tuning database, so that later `recipe="auto"` calls
//! on a tensor of the same structure run it.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use sparsile::auto::tune::{strategy, tune as tune_op, TuneRequest};
use sparsile::tune::cost::Machine;
use sparsile::tune::op::Operator;
use sparsile::tune::search::SearchOptions;

use crate::errors::detached;
use crate::tensor::Tensor;

/// The roofline the cost model starts from before it is fitted to this machine's
/// measurements (the fit rescales it; only the ranking matters).
const TYPICAL_MACHINE: Machine = Machine {
    bandwidth_gbs: 20.0,
    peak_gflops: 100.0,
    cache_bytes: 32 << 20,
};

/// Tunes `op` (`spmm`, `sddmm` or `spmv`) with dense width `k` on `a` in its own
/// format; returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (a, op, k, threads, strategy_name="pruned", budget_s=None, record=true, rounds=2, repeat=5))]
#[allow(clippy::too_many_arguments)]
pub fn tune(
    py: Python<'_>,
    a: &Tensor,
    op: &str,
    k: usize,
    threads: usize,
    strategy_name: &str,
    budget_s: Option<f64>,
    record: bool,
    rounds: usize,
    repeat: usize,
) -> PyResult<String> {
    let op = match Operator::from_name(op) {
        Some(op @ (Operator::Spmm | Operator::Sddmm | Operator::Spmv)) => op,
        _ => {
            return Err(PyValueError::new_err(format!(
                "op must be spmm, sddmm or spmv, got {op:?}"
            )))
        }
    };
    let Some(s) = strategy(strategy_name) else {
        return Err(PyValueError::new_err(format!(
            "strategy must be select, pruned, exhaustive or stile, got {strategy_name:?}"
        )));
    };
    if k == 0 || threads == 0 || rounds == 0 || repeat == 0 {
        return Err(PyValueError::new_err(
            "k, threads, rounds and repeat must be at least 1",
        ));
    }
    if let Some(b) = budget_s.filter(|b| !(b.is_finite() && *b > 0.0)) {
        return Err(PyValueError::new_err(format!(
            "budget must be a positive number of seconds, got {b}"
        )));
    }
    let req = TuneRequest {
        op,
        width: if op == Operator::Spmv { 1 } else { k },
        threads,
        other_formats: false,
        options: SearchOptions {
            strategy: s,
            rounds,
            repeat,
            budget: budget_s.map(std::time::Duration::from_secs_f64),
            ..SearchOptions::default()
        },
        machine: TYPICAL_MACHINE,
        record,
        seed: 0,
    };
    let report = detached(py, || {
        tune_op(&a.inner, &req, &mut |_| {}).map_err(|e| e.to_string())
    })?
    .map_err(PyValueError::new_err)?;
    Ok(serde_json::to_string(&report).expect("tune reports serialise"))
}
