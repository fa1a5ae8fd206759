//! The learned selector: training is deterministic, the choice is the lowest predicted
//! slowdown among the candidates asked about, a model file of another space version or
//! feature list is refused with a message saying what to do, and a round trip through
//! the file keeps every prediction.

use std::collections::BTreeMap;

use sparsile_tune::features::{Features, FEATURE_NAMES};
use sparsile_tune::gbt::GbtParams;
use sparsile_tune::op::Operator;
use sparsile_tune::selector::{Example, Selector, SelectorError};
use sparsile_tune::space::{Candidate, SPACE_VERSION};

/// Examples where `a` wins on short rows and `b` on long rows (feature 3 is the mean
/// row length).
fn examples() -> Vec<Example> {
    (0..60)
        .map(|n| {
            let mut values = vec![0.0; FEATURE_NAMES.len()];
            let mean = (n % 30) as f64 + 1.0;
            values[3] = mean;
            values[0] = (n / 30) as f64;
            let (a, b) = if mean < 15.0 { (1.0, 2.0) } else { (3.0, 1.0) };
            Example {
                op: Operator::Spmm,
                name: format!("m{n} spmm K=32"),
                features: Features { values },
                times: BTreeMap::from([
                    ("csr/a".to_string(), Some(a)),
                    ("csr/b".to_string(), Some(b)),
                    ("csr/broken".to_string(), None),
                ]),
            }
        })
        .collect()
}

fn params() -> GbtParams {
    GbtParams {
        rounds: 40,
        ..GbtParams::default()
    }
}

#[test]
fn training_is_deterministic_and_choices_follow_the_labels() {
    let one = Selector::train(&examples(), &params(), BTreeMap::new()).unwrap();
    let two = Selector::train(&examples(), &params(), BTreeMap::new()).unwrap();
    assert_eq!(one.to_json(), two.to_json());
    let cands = [
        Candidate::new("csr", "a"),
        Candidate::new("csr", "b"),
        Candidate::new("csr", "broken"),
    ];
    let f = |mean: f64| {
        let mut values = vec![0.0; FEATURE_NAMES.len()];
        values[3] = mean;
        Features { values }
    };
    assert_eq!(
        one.choose(Operator::Spmm, &f(4.0), &cands).unwrap().recipe,
        "a"
    );
    assert_eq!(
        one.choose(Operator::Spmm, &f(25.0), &cands).unwrap().recipe,
        "b"
    );
    // Only the candidates asked about, and only those with a model.
    assert_eq!(
        one.choose(Operator::Spmm, &f(25.0), &cands[..1])
            .unwrap()
            .recipe,
        "a"
    );
    assert!(one.choose(Operator::Spmv, &f(25.0), &cands).is_none());
    assert!(one
        .choose(Operator::Spmm, &f(4.0), &[Candidate::new("csr", "unknown")])
        .is_none());
    let back = Selector::from_json(&one.to_json()).unwrap();
    assert_eq!(
        back.predict(Operator::Spmm, &f(7.0), &cands),
        one.predict(Operator::Spmm, &f(7.0), &cands)
    );
}

#[test]
fn a_mismatched_model_file_is_refused() {
    let model = Selector::train(&examples(), &params(), BTreeMap::new()).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&model.to_json()).unwrap();
    v["space_version"] = serde_json::json!(SPACE_VERSION + 1);
    let e = Selector::from_json(&v.to_string()).unwrap_err();
    assert!(matches!(e, SelectorError::SpaceVersion { .. }), "{e}");
    assert!(e.to_string().contains("sparsile tune train"), "{e}");
    let mut v: serde_json::Value = serde_json::from_str(&model.to_json()).unwrap();
    v["feature_names"] = serde_json::json!(["rows"]);
    assert!(matches!(
        Selector::from_json(&v.to_string()),
        Err(SelectorError::Features { .. })
    ));
    assert!(matches!(
        Selector::from_json("not json"),
        Err(SelectorError::Json(_))
    ));
}

#[test]
fn labels_are_log_slowdowns_with_failures_capped() {
    let e = &examples()[0];
    let labels = e.labels();
    assert_eq!(labels["csr/a"], 0.0);
    assert!((labels["csr/b"] - 2f64.ln()).abs() < 1e-12);
    assert_eq!(
        labels["csr/broken"],
        sparsile_tune::selector::FAILED_LOG_SLOWDOWN
    );
    assert_eq!(e.best(), Some("csr/a"));
}

#[test]
fn vector_classes_are_read_from_target_strings() {
    use sparsile_tune::target::isa_class;
    let zen4 = "x86_64:sse4_2,avx,avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq";
    assert_eq!(isa_class(zen4), "avx512");
    assert_eq!(isa_class("x86_64:sse4_2,avx,avx2,fma,f16c"), "avx2");
    // AVX-512 foundation without the 256-bit forms the masked code needs: AVX2 code.
    assert_eq!(isa_class("x86_64:avx2,fma,avx512f"), "avx2");
    assert_eq!(isa_class("x86_64:sse4_2,avx"), "x86_64");
    assert_eq!(isa_class("aarch64:asimd"), "aarch64");
    assert_eq!(isa_class("x86_64"), "x86_64");
}

#[test]
fn the_shipped_model_is_the_one_labelled_on_the_hosts_vector_class() {
    let zen4 = "x86_64:sse4_2,avx,avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq";
    let zen1 = "x86_64:sse4_2,avx,avx2,fma,f16c";
    let (name4, m4) = Selector::embedded_for(zen4).expect("the build ships models");
    let (name2, m2) = Selector::embedded_for(zen1).expect("the build ships models");
    let (m4, m2) = (m4.expect("valid"), m2.expect("valid"));
    assert_eq!(m4.isa_class(), "avx512", "{name4}");
    assert_eq!(m2.isa_class(), "avx2", "{name2}");
    assert_ne!(name4, name2);
    // A host of neither class gets the narrowest model shipped.
    for host in ["x86_64:sse4_2", "aarch64:asimd"] {
        let (name, m) = Selector::embedded_for(host).expect("the build ships models");
        assert_eq!(name, name2, "{host}");
        assert!(m.is_ok());
    }
    // The host's own pick is one of them.
    let (name, _) = Selector::embedded().expect("the build ships models");
    assert!(name == name4 || name == name2);
}
