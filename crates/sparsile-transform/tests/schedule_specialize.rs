//! `specialize`: the parameter becomes a constant everywhere; errors are named.

use sparsile_transform::schedule::{specialize, Schedule, ScheduleError};

const SPMM: &str =
    "tensor A: f64[m, n] csr\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";

#[test]
fn the_parameter_becomes_a_constant() {
    let program = sparsile::compile_notation(SPMM).unwrap();
    let fixed = specialize(&program, "k", 4).unwrap();
    let text = fixed.to_string();
    assert!(text.contains("axis I_k = dense_fixed(4)"), "{text}");
    // Only `k` changed: the other axes keep their parameters.
    assert!(text.contains("axis I_m = dense_fixed(m)"), "{text}");
    let func = sparsile_transform::lower_iterations(&fixed)
        .unwrap()
        .to_string();
    assert!(func.contains("in 0..4 {"), "{func}");
    // The text form round-trips.
    assert_eq!(
        text.parse::<sparsile_ir::coord::Program>()
            .unwrap()
            .to_string(),
        text
    );
}

#[test]
fn errors_name_the_parameter() {
    let program = sparsile::compile_notation(SPMM).unwrap();
    assert!(matches!(
        specialize(&program, "q", 4),
        Err(ScheduleError::UnknownParam { param, .. }) if param == "q"
    ));
    assert!(matches!(
        specialize(&program, "k", -1),
        Err(ScheduleError::NegativeSpecialization { param, value: -1, .. }) if param == "k"
    ));
    let mut sch = Schedule::new(&program);
    sch.func_or_lower().unwrap();
    assert!(matches!(
        sch.specialize("k", 4),
        Err(ScheduleError::WrongStage {
            primitive: "specialize",
            ..
        })
    ));
    assert_eq!(sch.trace().steps.len(), 1, "a failing call records nothing");
}
