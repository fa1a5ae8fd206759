//! End-to-end tests of `sparsile tune`: the selector's whole pipeline on a tiny corpus
//! (label → train → eval), a search that records its choice and the `run` that then
//! uses it, and the refusal of a model of another candidate-space version. Timings are
//! never compared; only that every step ran, wrote what it says and chose a candidate
//! that exists.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn sparsile(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sparsile"))
        .args(args)
        .current_dir(repo_root())
        .env("SPARSILE_CACHE_DIR", dir.join("cache"))
        .env("SPARSILE_TUNING_DB", dir.join("tuning.jsonl"))
        .env_remove("SPARSILE_SELECTOR_MODEL")
        .output()
        .expect("the sparsile binary runs")
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "command failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// A banded n × n matrix with an empty row: small and deterministic.
fn banded_mtx(dir: &Path, n: usize) -> PathBuf {
    let mut entries = Vec::new();
    for i in 0..n {
        if i == 5 {
            continue;
        }
        for j in i.saturating_sub(2)..(i + 3).min(n) {
            entries.push((i, j, 1.0 + (i * 7 + j) as f64 % 5.0));
        }
    }
    write_mtx(dir, "banded.mtx", n, &entries)
}

/// Writes an n × n coordinate Matrix Market file of `entries` (zero-based).
fn write_mtx(dir: &Path, name: &str, n: usize, entries: &[(usize, usize, f64)]) -> PathBuf {
    let mut text = format!(
        "%%MatrixMarket matrix coordinate real general\n{n} {n} {}\n",
        entries.len()
    );
    for (i, j, v) in entries {
        writeln!(text, "{} {} {v}", i + 1, j + 1).unwrap();
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn label_train_eval_on_a_tiny_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let labels = dir.path().join("labels.jsonl");
    let model = dir.path().join("selector.json");
    let corpus = ["--scale", "0.02", "--per-family", "1", "--seed", "7"];
    let mut label = vec!["tune", "label", "--ops", "spmm:8,spmv", "--threads", "2"];
    label.extend(corpus);
    label.extend(["--repeat", "1", "--warmup", "0", "--out"]);
    label.push(labels.to_str().unwrap());
    let out = ok(&sparsile(&label, dir.path()));
    assert!(out.contains("examples written"), "{out}");
    let lines = std::fs::read_to_string(&labels).unwrap();
    assert_eq!(
        lines.lines().count(),
        2 * sparsile::tune::corpus::families().len(),
        "one example per matrix and op"
    );
    // Labelling again skips what is there.
    let out = ok(&sparsile(&label, dir.path()));
    assert!(out.contains("0 examples written"), "{out}");

    let out = ok(&sparsile(
        &[
            "tune",
            "train",
            "--labels",
            labels.to_str().unwrap(),
            "--out",
            model.to_str().unwrap(),
            "--rounds",
            "20",
        ],
        dir.path(),
    ));
    assert!(
        out.contains("selector") && out.contains("model written"),
        "{out}"
    );
    let text = std::fs::read_to_string(&model).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(json["space_version"].as_u64().is_some(), "{text}");

    let m = banded_mtx(dir.path(), 60);
    let o = Command::new(env!("CARGO_BIN_EXE_sparsile"))
        .args([
            "tune",
            "eval",
            "--matrix",
            m.to_str().unwrap(),
            "--ops",
            "spmm:8",
            "--threads",
            "2",
            "--rounds",
            "1",
            "--repeat",
            "1",
            "--warmup",
            "0",
            "--remeasure",
            "2",
            "--json",
            dir.path().join("eval.json").to_str().unwrap(),
        ])
        .current_dir(repo_root())
        .env("SPARSILE_CACHE_DIR", dir.path().join("cache"))
        .env("SPARSILE_TUNING_DB", dir.path().join("tuning.jsonl"))
        .env("SPARSILE_SELECTOR_MODEL", &model)
        .output()
        .unwrap();
    let out = ok(&o);
    for column in ["selector", "rule", "default", "static", "pruned"] {
        assert!(out.contains(column), "{column} missing: {out}");
    }
    assert!(
        out.contains("again") && out.contains("in the search"),
        "{out}"
    );
    assert!(out.contains("1 cases"), "{out}");
    // Every pick was measured again beside the search's best, in turns, and scored by
    // the median of the best's time over its own per turn (1 for the best itself).
    let text = std::fs::read_to_string(dir.path().join("eval.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let case = &json[0];
    let best = case["report"]["best"].as_str().unwrap();
    assert!(case["fresh_ms"][best].as_f64().unwrap() > 0.0, "{text}");
    for choice in ["selector", "rule", "default", "static", "pruned"] {
        let s = case["scores"][choice].as_f64().unwrap();
        let pick = case["picks"][choice].as_str().unwrap();
        assert!(
            case["fresh_ms"][pick].as_f64().unwrap() > 0.0,
            "{choice}: {text}"
        );
        if pick == best {
            assert_eq!(s, 1.0, "{choice}: {text}");
            continue;
        }
        let mut ratios: Vec<f64> = case["fresh_ratios"][pick]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_f64().unwrap())
            .collect();
        // `--remeasure 2 --repeat 1`: two turns, and two more for a far call.
        assert!(ratios.len() == 2 || ratios.len() == 4, "{choice}: {text}");
        ratios.sort_by(f64::total_cmp);
        let expected = ratios[ratios.len() / 2];
        assert!((s - expected).abs() < 1e-12 && s > 0.0, "{choice}: {text}");
    }
}

#[test]
fn tune_records_the_best_and_run_uses_it() {
    let dir = tempfile::tempdir().unwrap();
    let m = banded_mtx(dir.path(), 50);
    let out = ok(&sparsile(
        &[
            "tune",
            "--op",
            "spmm",
            "--k",
            "8",
            "--matrix",
            m.to_str().unwrap(),
            "--strategy",
            "exhaustive",
            "--threads",
            "2",
            "--rounds",
            "1",
            "--repeat",
            "1",
        ],
        dir.path(),
    ));
    assert!(out.contains("choice: "), "{out}");
    assert!(out.contains("best"), "{out}");
    let choice = out
        .lines()
        .find_map(|l| l.strip_prefix("choice: "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_string();
    assert!(choice.contains('/'), "{choice}");
    assert!(dir.path().join("tuning.jsonl").exists());

    let out = ok(&sparsile(
        &[
            "run",
            "--expr",
            "C[i,k] = A[i,j] * B[j,k]",
            "--input",
            &format!("A={}", m.display()),
            "--dim",
            "k=8",
            "--threads",
            "2",
            "--repeat",
            "1",
        ],
        dir.path(),
    ));
    let (format, recipe) = choice.split_once('/').unwrap();
    assert!(
        out.contains("chosen by the tuning database"),
        "run did not use the record: {out}"
    );
    assert!(
        out.contains(recipe) && out.contains(format),
        "{choice}: {out}"
    );
}

#[test]
fn a_model_of_another_space_version_is_refused_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("old.json");
    std::fs::write(
        &model,
        r#"{"format_version": 2, "space_version": 999999, "feature_names": [], "ops": {}}"#,
    )
    .unwrap();
    let m = banded_mtx(dir.path(), 30);
    let o = Command::new(env!("CARGO_BIN_EXE_sparsile"))
        .args([
            "run",
            "--expr",
            "C[i,k] = A[i,j] * B[j,k]",
            "--input",
            &format!("A={}", m.display()),
            "--dim",
            "k=4",
            "--repeat",
            "1",
        ])
        .current_dir(repo_root())
        .env("SPARSILE_CACHE_DIR", dir.path().join("cache"))
        .env("SPARSILE_TUNING_DB", dir.path().join("tuning.jsonl"))
        .env("SPARSILE_SELECTOR_MODEL", &model)
        .output()
        .unwrap();
    let out = ok(&o);
    let all = format!("{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(all.contains("rule"), "the rule decides: {all}");
    assert!(all.contains("space version"), "says why: {all}");
}

/// Full 8 × 8 blocks on the diagonal of an n × n matrix, one entry in every fourth
/// row elsewhere: tiles pay for the blocks and not for the scattered entries.
fn tiled_mtx(dir: &Path, n: usize) -> PathBuf {
    let mut entries = Vec::new();
    for i in 0..n {
        for j in (i / 8 * 8)..(i / 8 * 8 + 8).min(n) {
            entries.push((i, j, 1.0 + (i + 2 * j) as f64 % 3.0));
        }
        if i % 4 == 0 && (i * 37 + 11) % n / 8 != i / 8 {
            entries.push((i, (i * 37 + 11) % n, -1.5));
        }
    }
    write_mtx(dir, "tiled.mtx", n, &entries)
}

#[test]
fn stile_strategy_measures_decompositions_and_keeps_its_calibration() {
    let dir = tempfile::tempdir().unwrap();
    let m = tiled_mtx(dir.path(), 203);
    let json = dir.path().join("stile.json");
    let args = [
        "tune",
        "--op",
        "spmm",
        "--k",
        "16",
        "--matrix",
        m.to_str().unwrap(),
        "--strategy",
        "stile",
        "--threads",
        "2",
        "--rounds",
        "1",
        "--repeat",
        "1",
        "--json",
        json.to_str().unwrap(),
    ];
    // The first search measures the calibration and stores it.
    let out = ok(&sparsile(&args, dir.path()));
    assert!(out.contains("(stile, space version"), "{out}");
    let calibration = dir.path().join("tuning.stile.jsonl");
    let text = std::fs::read_to_string(&calibration).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    let mut record: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(record["calibration"]["width"], 16);
    // A stored calibration is read back, past a corrupted line, and not measured again.
    // This one makes the choice independent of the machine: 32 x 32 and 16 x 16 tiles
    // dear, an 8 x 8 or 4 x 4 tile as dear as its side in entries, so the full 8 x 8
    // blocks are tiles and the single scattered entries are not.
    record["calibration"]["entry_ms"] = 1e-12.into();
    record["calibration"]["part_ms"] = 0.0.into();
    record["calibration"]["tile_ms"] =
        serde_json::json!([[32, 1000.0], [16, 1000.0], [8, 1e-12], [4, 1e-12]]);
    std::fs::write(
        &calibration,
        format!("{{\"version\": 2, \"target\": [\n{record}\n"),
    )
    .unwrap();
    let pictures = dir.path().join("pictures");
    let mut with_picture = args.to_vec();
    with_picture.extend(["--picture", pictures.to_str().unwrap()]);
    let out = ok(&sparsile(&with_picture, dir.path()));
    assert_eq!(
        std::fs::read_to_string(&calibration)
            .unwrap()
            .lines()
            .count(),
        2
    );
    // The 8 x 8 blocks are tiles; the scattered entries stay.
    assert!(out.contains("of 8x8"), "{out}");
    assert!(!out.contains(", 0 scattered"), "{out}");
    assert!(out.contains("tiles: best decomposition"), "{out}");
    // The picture: a PNG of the 203 x 203 matrix, one entry a pixel.
    let png =
        std::fs::read(pictures.join("tiled-spmm-k16.png")).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&png[16..24], &[0, 0, 0, 203, 0, 0, 0, 203]);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r = &report[0]["report"];
    let tiles = r["tiles"].as_array().unwrap();
    assert!(!tiles.is_empty(), "{r}");
    for t in tiles {
        let id = t["candidate"].as_str().unwrap();
        assert!(id.starts_with("csr/tiles:"), "{id}");
        // Every decomposition was measured (and so checked against the reference).
        let c = r["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["candidate"] == id)
            .unwrap();
        assert!(c["median_ms"].as_f64().unwrap() > 0.0, "{c}");
        assert!(c["failure"].is_null(), "{c}");
    }
    // SDDMM has no tiles: a note says so, and the search still runs.
    let mut sddmm = args.to_vec();
    sddmm[2] = "sddmm";
    let out = ok(&sparsile(&sddmm, dir.path()));
    assert!(
        out.contains("the stile strategy adds no tiles for sddmm"),
        "{out}"
    );
}

#[test]
fn calibrate_measures_and_stores_tile_costs() {
    let dir = tempfile::tempdir().unwrap();
    let out = ok(&sparsile(
        &["tune", "calibrate", "--k", "8", "--threads", "2"],
        dir.path(),
    ));
    for row in [
        "scattered entry",
        "one more part's pass",
        "32x32",
        "16x16",
        "8x8",
        "4x4",
    ] {
        assert!(out.contains(row), "{out}");
    }
    let stored = std::fs::read_to_string(dir.path().join("tuning.stile.jsonl")).unwrap();
    let record: serde_json::Value = serde_json::from_str(stored.lines().next().unwrap()).unwrap();
    assert_eq!(record["calibration"]["width"], 8);
    assert!(record["calibration"]["entry_ms"].as_f64().unwrap() > 0.0);
    let e = sparsile(&["tune", "calibrate", "--k", "0"], dir.path());
    assert!(!e.status.success());
    assert!(String::from_utf8_lossy(&e.stderr).contains("widths must be positive"));
}
