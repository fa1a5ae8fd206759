//! End-to-end tests of `sparsile bench --peers none` (no Python needed): the records it
//! writes, their fields, and the correctness check of Sparsile's results. Timings are
//! only checked for being present and positive, never compared.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn sparsile(args: &[&str], cache: &Path) -> Output {
    sparsile_in(&repo_root(), args, cache)
}

fn sparsile_in(cwd: &Path, args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sparsile"))
        .args(args)
        .current_dir(cwd)
        .env("SPARSILE_CACHE_DIR", cache)
        .output()
        .expect("the sparsile binary runs")
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "command failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// A seeded random m × n Matrix Market file with some empty rows.
fn random_mtx(dir: &Path, name: &str, m: usize, n: usize, seed: u64) -> PathBuf {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut entries = Vec::new();
    for i in 0..m {
        if i % 7 == 3 {
            continue; // an empty row
        }
        for j in 0..n {
            if rng.random_bool(0.15) {
                entries.push((i, j, rng.random_range(-3.0..3.0f64)));
            }
        }
    }
    let mut text = format!(
        "%%MatrixMarket matrix coordinate real general\n{m} {n} {}\n",
        entries.len()
    );
    for (i, j, v) in entries {
        writeln!(text, "{} {} {v}", i + 1, j + 1).unwrap();
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn records(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str::<serde_json::Value>(&text)
        .unwrap()
        .as_array()
        .expect("a list of records")
        .clone()
}

#[test]
fn sparsile_alone_writes_checked_records() {
    let dir = tempfile::tempdir().unwrap();
    let a = random_mtx(dir.path(), "rect.mtx", 37, 23, 11);
    let out = dir.path().join("out.json");
    let text = ok(&sparsile(
        &[
            "bench",
            "--op",
            "spmm,sddmm,spmv",
            "--k",
            "4,8",
            "--matrix",
            a.to_str().unwrap(),
            "--peers",
            "none",
            "--threads",
            "2",
            "--warmup",
            "1",
            "--repeat",
            "3",
            "--bandwidth",
            "10",
            "--peak",
            "100",
            "--json",
            out.to_str().unwrap(),
        ],
        &dir.path().join("cache"),
    ));
    assert!(text.contains("rect spmm K=4"), "{text}");
    assert!(text.contains("10.0 GB/s"), "{text}");
    let recs = records(&out);
    let cases: Vec<(String, serde_json::Value)> = recs
        .iter()
        .map(|r| (r["op"].as_str().unwrap().to_string(), r["k"].clone()))
        .collect();
    assert_eq!(
        cases,
        vec![
            ("spmm".into(), 4.into()),
            ("spmm".into(), 8.into()),
            ("sddmm".into(), 4.into()),
            ("sddmm".into(), 8.into()),
            ("spmv".into(), serde_json::Value::Null),
        ]
    );
    for r in &recs {
        for field in [
            "matrix",
            "op",
            "k",
            "system",
            "median_ms",
            "min_ms",
            "max_ms",
            "gflops",
            "gbs",
            "floor_ms",
            "correct",
            "recipe",
            "format",
        ] {
            assert!(r.get(field).is_some(), "{field} missing in {r}");
        }
        assert_eq!(r["matrix"], "rect");
        assert_eq!(r["system"], "sparsile");
        // No recipe given: the automatic choice ran, and the record says what it was.
        let recipe = r["recipe"].as_str().unwrap();
        assert!(!recipe.is_empty() && recipe != "auto", "{r}");
        assert!(r["format"].as_str().is_some_and(|f| f != "auto"), "{r}");
        assert!(
            r["note"]
                .as_str()
                .is_some_and(|n| n.starts_with("chosen by the ")),
            "{r}"
        );
        assert_eq!(r["correct"], true, "{r}");
        assert_eq!((r["m"].as_u64(), r["n"].as_u64()), (Some(37), Some(23)));
        let (min, med, max) = (
            r["min_ms"].as_f64().unwrap(),
            r["median_ms"].as_f64().unwrap(),
            r["max_ms"].as_f64().unwrap(),
        );
        assert!(0.0 < min && min <= med && med <= max, "{r}");
        // floor = max(bytes / 10 GB/s, flops / 100 GFLOP/s), in ms
        let (flops, bytes) = (r["flops"].as_f64().unwrap(), r["bytes"].as_f64().unwrap());
        let floor = (bytes / 10e9).max(flops / 100e9) * 1e3;
        assert!((r["floor_ms"].as_f64().unwrap() - floor).abs() <= 1e-12 * floor.max(1.0));
        let gflops = flops / (med * 1e-3) / 1e9;
        assert!(
            (r["gflops"].as_f64().unwrap() - gflops).abs() <= 1e-9 * gflops,
            "{r}"
        );
        // With no peer there is no speedup.
        assert!(r["speedup"].is_null());
    }
    let nnz = recs[0]["nnz"].as_f64().unwrap();
    assert_eq!(recs[0]["flops"].as_f64().unwrap(), 2.0 * nnz * 4.0);
    assert_eq!(recs[4]["flops"].as_f64().unwrap(), 2.0 * nnz);
}

#[test]
fn a_suite_with_a_format_override_and_the_probes() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("m");
    std::fs::create_dir_all(&data).unwrap();
    random_mtx(&data, "sq.mtx", 30, 30, 5);
    // The suite's paths are relative to the repository root: a folder with Cargo.toml.
    std::fs::write(dir.path().join("Cargo.toml"), "").unwrap();
    std::fs::create_dir_all(dir.path().join("bench")).unwrap();
    let suite = dir.path().join("bench").join("suite.json");
    std::fs::write(
        &suite,
        r#"{"ops": ["spmm:16", "spmv"], "cases": [{"matrix": "m/sq.mtx", "recipe": "default"}]}"#,
    )
    .unwrap();
    let cache = dir.path().join("cache");
    // Without --json a suite run writes sparsile-bench-STEM.json in the current folder
    // (and its chart, or says why not).
    let args = [
        "bench",
        "--suite",
        suite.to_str().unwrap(),
        "--format",
        "ell",
        "--peers",
        "none",
        "--threads",
        "1",
        "--repeat",
        "2",
    ];
    let text = ok(&sparsile_in(dir.path(), &args, &cache));
    assert!(text.contains("measured"), "{text}");
    assert!(text.contains("chart: "), "{text}");
    let out = dir.path().join("sparsile-bench-suite.json");
    let recs = records(&out);
    assert_eq!(recs.len(), 2);
    for r in &recs {
        assert_eq!(r["format"], "ell");
        assert_eq!(r["correct"], true, "{r}");
        assert!(r["bandwidth_gbs"].as_f64().unwrap() > 0.0);
        assert!(r["peak_gflops"].as_f64().unwrap() > 0.0);
    }
    // The second run finds the probes in the cache.
    let text = ok(&sparsile_in(dir.path(), &args, &cache));
    assert!(text.contains("cached probe"), "{text}");
}

#[test]
fn mistakes_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    for (args, expect) in [
        (
            vec![
                "bench",
                "--op",
                "spmm",
                "--matrix",
                "data/cora.mtx",
                "--peers",
                "cusparse",
            ],
            "unknown peer",
        ),
        (vec!["bench", "--op", "spmm", "--peers", "none"], "--matrix"),
        (
            vec![
                "bench",
                "--matrix",
                "data/cora.mtx",
                "--op",
                "spmv",
                "--repeat",
                "0",
            ],
            "--repeat",
        ),
        (
            vec![
                "bench",
                "--matrix",
                "nope.mtx",
                "--op",
                "spmv",
                "--peers",
                "none",
                "--bandwidth",
                "1",
                "--peak",
                "1",
            ],
            "nope.mtx",
        ),
    ] {
        let o = sparsile(&args, &cache);
        assert!(!o.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}

#[test]
fn an_unknown_recipe_is_a_note_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let args = [
        "bench",
        "--op",
        "spmv",
        "--matrix",
        "data/cora.mtx",
        "--peers",
        "none",
        "--recipe",
        "nonsense",
        "--bandwidth",
        "10",
        "--peak",
        "100",
        "--repeat",
        "1",
        "--json",
        out.to_str().unwrap(),
    ];
    ok(&sparsile(&args, &dir.path().join("cache")));
    let recs = records(&out);
    assert!(recs[0]["correct"].is_null());
    assert!(recs[0]["median_ms"].is_null());
    assert!(
        recs[0]["note"].as_str().unwrap().contains("nonsense"),
        "{}",
        recs[0]
    );
}
