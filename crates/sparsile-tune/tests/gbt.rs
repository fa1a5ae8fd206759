//! Gradient-boosted trees: accuracy on a nonlinear function, determinism, JSON round
//! trip, errors and feature importance.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile_tune::gbt::{Gbt, GbtError, GbtParams};

/// A piecewise, nonlinear target of features 0..3; features 3..6 are noise.
fn target(r: &[f64]) -> f64 {
    let step = if r[0] > 0.3 { 2.0 } else { -1.0 };
    let wave = (3.0 * r[1]).sin();
    let inter = if r[2] > 0.0 && r[0] < 0.0 { 1.5 } else { 0.0 };
    step + wave + inter + 0.5 * r[2] * r[2]
}

fn dataset(n: usize, seed: u64) -> (Vec<Vec<f64>>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let x: Vec<Vec<f64>> = (0..n)
        .map(|_| (0..6).map(|_| rng.random_range(-1.0..1.0)).collect())
        .collect();
    let y = x.iter().map(|r| target(r)).collect();
    (x, y)
}

fn r_squared(model: &Gbt, x: &[Vec<f64>], y: &[f64]) -> f64 {
    let mean = y.iter().sum::<f64>() / y.len() as f64;
    let mut ss_res = 0.0;
    let mut ss_tot = 0.0;
    for (r, &t) in x.iter().zip(y) {
        let p = model.predict(r).unwrap();
        ss_res += (t - p) * (t - p);
        ss_tot += (t - mean) * (t - mean);
    }
    1.0 - ss_res / ss_tot
}

#[test]
fn fits_a_nonlinear_function_on_held_out_data() {
    let (x, y) = dataset(3000, 1);
    let (xt, yt) = dataset(1000, 2);
    let params = GbtParams {
        rounds: 300,
        max_depth: 4,
        ..GbtParams::default()
    };
    let model = Gbt::fit(&x, &y, &params).unwrap();
    assert_eq!(model.n_features(), 6);
    assert_eq!(model.n_trees(), 300);
    let r2 = r_squared(&model, &xt, &yt);
    println!("held-out R^2 = {r2:.4}");
    assert!(r2 > 0.95, "held-out R^2 {r2}");
    // The mean alone has R^2 <= 0 on held-out data; one round is far worse than 300.
    let weak = Gbt::fit(
        &x,
        &y,
        &GbtParams {
            rounds: 1,
            ..params.clone()
        },
    )
    .unwrap();
    assert!(r_squared(&weak, &xt, &yt) < 0.5);
}

#[test]
fn training_is_deterministic_for_a_seed() {
    let (x, y) = dataset(500, 3);
    let params = GbtParams {
        rounds: 40,
        subsample: 0.5,
        seed: 7,
        ..GbtParams::default()
    };
    let a = Gbt::fit(&x, &y, &params).unwrap();
    let b = Gbt::fit(&x, &y, &params).unwrap();
    assert_eq!(a, b);
    let c = Gbt::fit(&x, &y, &GbtParams { seed: 8, ..params }).unwrap();
    assert_ne!(a, c);
    let differs = x
        .iter()
        .any(|r| a.predict(r).unwrap() != c.predict(r).unwrap());
    assert!(differs, "different seeds gave identical predictions");
}

#[test]
fn without_subsampling_the_seed_does_not_matter() {
    let (x, y) = dataset(300, 4);
    let params = GbtParams {
        rounds: 20,
        subsample: 1.0,
        ..GbtParams::default()
    };
    let a = Gbt::fit(&x, &y, &params).unwrap();
    let b = Gbt::fit(&x, &y, &GbtParams { seed: 99, ..params }).unwrap();
    assert_eq!(a, b);
}

#[test]
fn json_round_trip_predicts_identically() {
    let (x, y) = dataset(800, 5);
    let model = Gbt::fit(&x, &y, &GbtParams::default()).unwrap();
    let text = serde_json::to_string(&model).unwrap();
    let back: Gbt = serde_json::from_str(&text).unwrap();
    assert_eq!(back, model);
    let (xt, _) = dataset(500, 6);
    for r in &xt {
        assert_eq!(
            model.predict(r).unwrap().to_bits(),
            back.predict(r).unwrap().to_bits()
        );
    }
    let params = GbtParams::default();
    let p: GbtParams = serde_json::from_str(&serde_json::to_string(&params).unwrap()).unwrap();
    assert_eq!(p, params);
}

#[test]
fn importance_concentrates_on_the_informative_feature() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let x: Vec<Vec<f64>> = (0..1000)
        .map(|_| (0..5).map(|_| rng.random_range(0.0..1.0)).collect())
        .collect();
    let y: Vec<f64> = x.iter().map(|r| (6.0 * r[3]).floor()).collect();
    let model = Gbt::fit(&x, &y, &GbtParams::default()).unwrap();
    let imp = model.feature_importance();
    assert_eq!(imp.len(), 5);
    assert!((imp.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    assert!(imp[3] > 0.9, "importance {imp:?}");
}

#[test]
fn constant_target_has_no_splits() {
    let x: Vec<Vec<f64>> = (0..50).map(|i| vec![i as f64, (i % 3) as f64]).collect();
    let y = vec![2.5; 50];
    let model = Gbt::fit(&x, &y, &GbtParams::default()).unwrap();
    assert_eq!(model.feature_importance(), vec![0.0, 0.0]);
    assert_eq!(model.predict(&[10.0, 1.0]).unwrap(), 2.5);
}

#[test]
fn min_samples_leaf_is_respected() {
    // One outlier row cannot be isolated when leaves need 5 rows.
    let x: Vec<Vec<f64>> = (0..40).map(|i| vec![i as f64]).collect();
    let mut y = vec![0.0; 40];
    y[39] = 100.0;
    let params = GbtParams {
        rounds: 1,
        learning_rate: 1.0,
        min_samples_leaf: 5,
        subsample: 1.0,
        ..GbtParams::default()
    };
    let model = Gbt::fit(&x, &y, &params).unwrap();
    let p = model.predict(&[39.0]).unwrap();
    assert!((p - 20.0).abs() < 1e-9, "prediction {p}");
}

#[test]
fn training_errors_name_the_problem() {
    let p = GbtParams::default();
    assert_eq!(Gbt::fit(&[], &[], &p), Err(GbtError::EmptyData));
    assert_eq!(
        Gbt::fit(&[vec![], vec![]], &[1.0, 2.0], &p),
        Err(GbtError::NoFeatures)
    );
    assert_eq!(
        Gbt::fit(&[vec![1.0, 2.0], vec![1.0]], &[1.0, 2.0], &p),
        Err(GbtError::RaggedRow {
            row: 1,
            found: 1,
            expected: 2
        })
    );
    assert_eq!(
        Gbt::fit(&[vec![1.0], vec![2.0]], &[1.0], &p),
        Err(GbtError::LengthMismatch {
            rows: 2,
            targets: 1
        })
    );
    assert_eq!(
        Gbt::fit(&[vec![1.0, 0.0], vec![2.0, f64::NAN]], &[1.0, 2.0], &p),
        Err(GbtError::NonFiniteFeature { row: 1, feature: 1 })
    );
    assert_eq!(
        Gbt::fit(&[vec![1.0], vec![2.0]], &[f64::INFINITY, 2.0], &p),
        Err(GbtError::NonFiniteTarget { row: 0 })
    );
    assert!(Gbt::fit(&[vec![1.0], vec![2.0]], &[1.0, 2.0], &p).is_ok());
}

#[test]
fn bad_parameters_are_rejected() {
    let x = vec![vec![1.0], vec![2.0]];
    let y = vec![1.0, 2.0];
    let cases: Vec<(GbtParams, &str)> = vec![
        (
            GbtParams {
                max_depth: 0,
                ..GbtParams::default()
            },
            "max_depth",
        ),
        (
            GbtParams {
                min_samples_leaf: 0,
                ..GbtParams::default()
            },
            "min_samples_leaf",
        ),
        (
            GbtParams {
                learning_rate: 0.0,
                ..GbtParams::default()
            },
            "learning_rate",
        ),
        (
            GbtParams {
                learning_rate: f64::NAN,
                ..GbtParams::default()
            },
            "learning_rate",
        ),
        (
            GbtParams {
                subsample: 1.5,
                ..GbtParams::default()
            },
            "subsample",
        ),
        (
            GbtParams {
                subsample: 0.0,
                ..GbtParams::default()
            },
            "subsample",
        ),
    ];
    for (params, name) in cases {
        match Gbt::fit(&x, &y, &params) {
            Err(GbtError::BadParam { param, .. }) => assert_eq!(param, name),
            other => panic!("{name}: expected a parameter error, got {other:?}"),
        }
    }
}

#[test]
fn prediction_errors_name_the_problem() {
    let x: Vec<Vec<f64>> = (0..20).map(|i| vec![i as f64, 1.0]).collect();
    let y: Vec<f64> = (0..20).map(|i| (i / 10) as f64).collect();
    let model = Gbt::fit(&x, &y, &GbtParams::default()).unwrap();
    assert_eq!(
        model.predict(&[1.0]),
        Err(GbtError::FeatureCount {
            expected: 2,
            found: 1
        })
    );
    assert_eq!(
        model.predict(&[1.0, f64::NEG_INFINITY]),
        Err(GbtError::NonFiniteInput { feature: 1 })
    );
}

#[test]
fn a_corrupt_model_is_an_error_not_a_panic() {
    let x: Vec<Vec<f64>> = (0..20).map(|i| vec![i as f64]).collect();
    let y: Vec<f64> = (0..20).map(|i| (i / 10) as f64).collect();
    let model = Gbt::fit(&x, &y, &GbtParams::default()).unwrap();
    let text = serde_json::to_string(&model).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    // The root of the first tree is a split `[feature, threshold, gain, left, right]`:
    // make it point back at itself, and split on a feature the model lacks.
    let root = |f: &dyn Fn(&mut Vec<serde_json::Value>)| {
        let mut j = json.clone();
        f(j["trees"][0][0].as_array_mut().expect("a split"));
        serde_json::to_string(&j).unwrap()
    };
    let cyclic = root(&|n| n[3] = 0.into());
    let bad_feature = root(&|n| n[0] = 5.into());
    for bad in [cyclic, bad_feature] {
        assert_ne!(bad, text);
        let m: Gbt = serde_json::from_str(&bad).unwrap();
        assert!(matches!(
            m.predict(&[3.0]),
            Err(GbtError::CorruptModel { .. })
        ));
        assert_eq!(m.feature_importance().len(), 1);
    }
}

#[test]
fn overflowing_values_are_an_error_not_a_panic() {
    let x: Vec<Vec<f64>> = (0..40).map(|i| vec![i as f64]).collect();
    let y: Vec<f64> = (0..40)
        .map(|i| if i < 20 { -1.7e308 } else { 1.7e308 })
        .collect();
    let model = Gbt::fit(&x, &y, &GbtParams::default()).unwrap();
    for r in &x {
        match model.predict(r) {
            Ok(p) => assert!(p.is_finite()),
            Err(e) => assert_eq!(e, GbtError::NonFinitePrediction),
        }
    }
}
