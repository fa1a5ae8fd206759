//! End-to-end tests of the `sparsile` binary on the bundled Cora matrix and on small
//! generated files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn sparsile(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sparsile"))
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("the sparsile binary runs")
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "command failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_str(&stdout(o)).expect("valid JSON")
}

#[test]
fn info_reports_cora() {
    let v = json(&sparsile(&["info", "data/cora.mtx", "--json"]));
    assert_eq!(v["rows"], 2708);
    assert_eq!(v["cols"], 2708);
    assert_eq!(v["nnz"], 10556);
    assert_eq!(v["row_length_max"], 168);
    assert_eq!(v["empty_rows"], 0);
    assert_eq!(v["structurally_symmetric"], true);
    let text = stdout(&sparsile(&["info", "data/cora.mtx"]));
    assert!(text.contains("2,708 x 2,708"), "{text}");
    assert!(text.contains("row lengths"), "{text}");
}

#[test]
fn convert_round_trips_through_every_format() {
    let dir = tempfile::tempdir().unwrap();
    for format in [
        "csr",
        "csc",
        "coo",
        "dcsr",
        "bsr:4x4",
        "dbsr:3x5",
        "ell",
        "srbcrs:8x4",
        "ragged",
    ] {
        let out = dir.path().join("cora.spt");
        let o = sparsile(&[
            "convert",
            "data/cora.mtx",
            "--to",
            format,
            "-o",
            out.to_str().unwrap(),
            "--check",
            "--json",
        ]);
        let v = json(&o);
        assert_eq!(v["round_trip_checked"], true, "{format}");
        assert_eq!(v["nnz"], 10556);
        assert!(v["stored_values"].as_u64().unwrap() >= 10556);
    }
    let out = dir.path().join("cora_f16.mtx.gz");
    let v = json(&sparsile(&[
        "convert",
        "data/cora.mtx",
        "--to",
        "csr",
        "--dtype",
        "f16",
        "-o",
        out.to_str().unwrap(),
        "--check",
        "--json",
    ]));
    assert_eq!(v["round_trip_checked"], true);
}

fn checksum(args: &[&str]) -> f64 {
    let v = json(&sparsile(args));
    v["outputs"][0]["checksum"].as_f64().unwrap()
}

#[test]
fn eval_agrees_across_formats() {
    let base = [
        "eval",
        "--expr",
        "C[i,k] = A[i,j] * B[j,k]",
        "--input",
        "A=data/cora.mtx",
        "--dim",
        "k=8",
        "--json",
    ];
    let reference = checksum(&base);
    assert!(reference.abs() > 1e-6);
    for format in ["csc", "coo", "bsr:4x4", "ell", "dcsr"] {
        let spec = format!("A={format}");
        let mut args = base.to_vec();
        args.extend(["--format", spec.as_str()]);
        let c = checksum(&args);
        assert!(
            (c - reference).abs() <= 1e-4 * reference.abs().max(1.0),
            "{format}: {c} vs {reference}"
        );
    }
    // Another seed gives other random operands.
    let mut args = base.to_vec();
    args.extend(["--seed", "7"]);
    assert_ne!(checksum(&args), reference);
}

#[test]
fn eval_sddmm_keeps_the_pattern_and_writes_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c.mtx");
    let spec = format!("C={}", out.display());
    let v = json(&sparsile(&[
        "eval",
        "--expr",
        "C[i,j] = A[i,j] * X[i,k] * Y[k,j]",
        "--input",
        "A=data/cora.mtx",
        "--dim",
        "k=4",
        "--output",
        &spec,
        "--json",
    ]));
    assert_eq!(v["outputs"][0]["format"], "csr");
    assert_eq!(v["outputs"][0]["stored_values"], 10556);
    let info = json(&sparsile(&["info", out.to_str().unwrap(), "--json"]));
    assert_eq!(info["nnz"], 10556);
}

#[test]
fn eval_runs_a_program_file_with_dense_inputs_from_files() {
    let dir = tempfile::tempdir().unwrap();
    let prog = dir.path().join("spmv.sp");
    std::fs::write(
        &prog,
        "tensor A: f64[m, n] csr\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n",
    )
    .unwrap();
    let a = dir.path().join("a.mtx");
    std::fs::write(
        &a,
        "%%MatrixMarket matrix coordinate real general\n2 3 3\n1 1 1.0\n1 3 2.0\n2 2 3.0\n",
    )
    .unwrap();
    let x = dir.path().join("x.mtx");
    std::fs::write(
        &x,
        "%%MatrixMarket matrix array real general\n3 1\n1\n10\n100\n",
    )
    .unwrap();
    // x is a 3 x 1 array file, but declared of order 1: that is an error naming x.
    let o = sparsile(&[
        "eval",
        prog.to_str().unwrap(),
        "--input",
        &format!("A={}", a.display()),
        "--input",
        &format!("x={}", x.display()),
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("input x has order 2"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::write(&prog, "tensor A: f64[m, n] csr\ntensor x: f64[n, 1]\ntensor y: f64[m, 1]\ny[i,c] = A[i,j] * x[j,c]\n").unwrap();
    let v = json(&sparsile(&[
        "eval",
        prog.to_str().unwrap(),
        "--input",
        &format!("A={}", a.display()),
        "--input",
        &format!("x={}", x.display()),
        "--json",
    ]));
    assert_eq!(v["outputs"][0]["checksum"].as_f64().unwrap(), 201.0 + 30.0);
}

fn fails_with(args: &[&str], needle: &str) {
    let o = sparsile(args);
    assert!(!o.status.success(), "expected failure for {args:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains(needle), "expected `{needle}` in: {err}");
}

#[test]
fn errors_are_one_clear_line() {
    fails_with(
        &[
            "convert",
            "data/cora.mtx",
            "--to",
            "bsr:0x4",
            "-o",
            "/tmp/x.spt",
        ],
        "bad format `bsr:0x4`",
    );
    fails_with(&["info", "no/such/file.mtx"], "no/such/file.mtx");
    fails_with(
        &[
            "eval",
            "--expr",
            "C[i,k] = A[i,j] * B[j,k]",
            "--input",
            "A=data/cora.mtx",
        ],
        "--dim k=SIZE",
    );
    fails_with(
        &[
            "eval",
            "--expr",
            "C[i,k] = A[i,j] * B[j,k]",
            "--input",
            "Z=data/cora.mtx",
            "--dim",
            "k=2",
        ],
        "`Z`",
    );
    fails_with(
        &[
            "eval",
            "--expr",
            "C[i] = A[idx[i]]",
            "--input",
            "A=data/cora.mtx",
        ],
        "plain index",
    );
    fails_with(
        &[
            "convert",
            "data/cora.mtx",
            "--to",
            "ell:2",
            "-o",
            "/tmp/x.spt",
        ],
        "ell",
    );
}

fn sparsile_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sparsile"));
    c.args(args).current_dir(repo_root());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("the sparsile binary runs")
}

#[test]
fn compile_prints_every_stage() {
    let base = [
        "compile",
        "--expr",
        "y[i] = A[i,j] * x[j]",
        "--format",
        "A=csr",
        "--emit",
    ];
    for (stage, marker) in [
        ("stage1", "func main("),
        ("stage2", "pos func main("),
        ("stage3", "flat func main("),
        ("c", "sparsile_phase_run"),
    ] {
        let mut args = base.to_vec();
        args.push(stage);
        let text = stdout(&sparsile(&args));
        assert!(text.contains(marker), "{stage}: {text}");
    }
    fails_with(
        &[
            "compile",
            "--expr",
            "y[i] = A[i,j] * x[j]",
            "--emit",
            "stage9",
        ],
        "unknown stage",
    );
}

fn have_cc() -> bool {
    Command::new("cc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn run_matches_eval_and_hits_the_cache() {
    if !have_cc() {
        eprintln!("skipping: no C compiler");
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let env = [("SPARSILE_CACHE_DIR", cache.path().to_str().unwrap())];
    let common = [
        "--expr",
        "C[i,k] = A[i,j] * B[j,k]",
        "--input",
        "A=data/cora.mtx",
        "--dim",
        "k=8",
        "--dtype",
        "f64",
        "--json",
    ];
    let mut eval_args = vec!["eval"];
    eval_args.extend(common);
    let expected = json(&sparsile(&eval_args))["outputs"][0]["checksum"]
        .as_f64()
        .unwrap();
    for (round, format) in [(0, "A=csr"), (1, "A=csr"), (2, "A=bsr:4x4")] {
        let mut args = vec!["run", "--threads", "2", "--repeat", "3", "--format", format];
        args.extend(common);
        let v = json(&sparsile_env(&args, &env));
        let got = v["outputs"][0]["checksum"].as_f64().unwrap();
        assert!(
            (got - expected).abs() <= 1e-9 * expected.abs().max(1.0),
            "{format}: {got} vs {expected}"
        );
        assert_eq!(v["cache_hit"], round == 1, "round {round}");
        assert_eq!(v["threads"], 2);
        assert!(v["median_seconds"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn run_without_a_compiler_says_so_and_eval_still_works() {
    let cache = tempfile::tempdir().unwrap();
    let env = [
        ("CC", "/nonexistent/cc"),
        ("SPARSILE_CACHE_DIR", cache.path().to_str().unwrap()),
    ];
    let o = sparsile_env(
        &[
            "run",
            "--expr",
            "y[i] = A[i,j] * x[j]",
            "--input",
            "A=data/cora.mtx",
        ],
        &env,
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no C compiler") && err.contains("CC"), "{err}");
    let o = sparsile_env(
        &[
            "eval",
            "--expr",
            "y[i] = A[i,j] * x[j]",
            "--input",
            "A=data/cora.mtx",
        ],
        &env,
    );
    assert!(o.status.success());
}

#[test]
fn a_recorded_schedule_is_applied_by_compile_and_run() {
    use sparsile::transform::schedule::{LoopRef, Schedule, SplitTail};
    let dir = tempfile::tempdir().unwrap();
    let text = "tensor A: f64[m, n] csr\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";
    let prog = dir.path().join("spmm.sp");
    std::fs::write(&prog, text).unwrap();
    // Rows in parallel, then the row loop split by 16 (the outer part stays parallel).
    let mut sch = Schedule::new(&sparsile::compile_notation(text).unwrap());
    sch.parallel(&LoopRef::new("C", "i_2")).unwrap();
    sch.split(&LoopRef::new("C", "i_2"), 16, SplitTail::InnerFixed)
        .unwrap();
    let trace = dir.path().join("trace.json");
    std::fs::write(&trace, sch.trace().to_json()).unwrap();
    let (p, t) = (prog.to_str().unwrap(), trace.to_str().unwrap());
    let stage2 = stdout(&sparsile(&[
        "compile",
        p,
        "--schedule",
        t,
        "--emit",
        "stage2",
    ]));
    assert!(
        stage2.contains("i_2_o") && stage2.contains("parallel"),
        "{stage2}"
    );
    let plain = stdout(&sparsile(&["compile", p, "--emit", "stage2"]));
    assert!(!plain.contains("i_2_o"));
    if !have_cc() {
        eprintln!("skipping the native run: no C compiler");
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let env = [("SPARSILE_CACHE_DIR", cache.path().to_str().unwrap())];
    let inputs = ["--input", "A=data/cora.mtx", "--dim", "k=4", "--json"];
    let mut eval_args = vec!["eval", p];
    eval_args.extend(inputs);
    let expected = json(&sparsile(&eval_args))["outputs"][0]["checksum"]
        .as_f64()
        .unwrap();
    let mut run_args = vec!["run", p, "--schedule", t, "--threads", "2", "--repeat", "2"];
    run_args.extend(inputs);
    let got = json(&sparsile_env(&run_args, &env))["outputs"][0]["checksum"]
        .as_f64()
        .unwrap();
    assert!(
        (got - expected).abs() <= 1e-9 * expected.abs().max(1.0),
        "{got} vs {expected}"
    );
    // A trace naming a loop the program does not have is an error that names it.
    std::fs::write(
        &trace,
        r#"{"steps":[{"step":"lower"},{"step":"parallel","target":{"block":"C","var":"nope"}}]}"#,
    )
    .unwrap();
    let o = sparsile(&["compile", p, "--schedule", t, "--emit", "c"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("nope"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn recipes_are_listed_and_applied_by_name() {
    let o = sparsile(&["recipes", "--json"]);
    let list = json(&o);
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"default") && names.contains(&"rowwise"),
        "{names:?}"
    );
    assert!(stdout(&sparsile(&["recipes"])).contains("rowwise"));
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.json");
    let t = trace.to_str().unwrap();
    let expr = "C[i,k] = A[i,j] * B[j,k]";
    let common = ["--expr", expr, "--input", "A=data/cora.mtx", "--dim", "k=8"];
    let mut args = vec![
        "compile",
        "--recipe",
        "rowwise",
        "--save-trace",
        t,
        "--emit",
        "c",
    ];
    args.extend(common);
    let c = stdout(&sparsile(&args));
    // The width fixed at 8 and each output row held in a register across its row.
    assert!(
        c.contains("< 8;") && c.contains("sparsile_vf32 tile_0_0;"),
        "{c}"
    );
    let saved = std::fs::read_to_string(&trace).unwrap();
    assert!(saved.contains("\"specialize\""), "{saved}");
    fails_with(
        &[
            "compile",
            "--recipe",
            "nosuch",
            "--expr",
            expr,
            "--input",
            "A=data/cora.mtx",
            "--dim",
            "k=8",
        ],
        "no recipe named `nosuch`",
    );
    if !have_cc() {
        eprintln!("skipping the native run: no C compiler");
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let env = [("SPARSILE_CACHE_DIR", cache.path().to_str().unwrap())];
    let mut eval_args = vec!["eval", "--json"];
    eval_args.extend(common);
    let expected = json(&sparsile(&eval_args))["outputs"][0]["checksum"]
        .as_f64()
        .unwrap();
    // The saved trace and the recipe give the same result as the interpreter.
    for how in [["--recipe", "rowwise"], ["--schedule", t]] {
        let mut run_args = vec!["run", "--threads", "2", "--repeat", "1", "--json"];
        run_args.extend(how);
        run_args.extend(common);
        let out = json(&sparsile_env(&run_args, &env));
        let got = out["outputs"][0]["checksum"].as_f64().unwrap();
        assert!(
            (got - expected).abs() <= 1e-4 * expected.abs().max(1.0),
            "{how:?}: {got} vs {expected}"
        );
    }
}

#[test]
fn run_computes_row_maxima_and_scalar_outputs_like_eval() {
    if !have_cc() {
        eprintln!("skipping: no C compiler");
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let env = [("SPARSILE_CACHE_DIR", cache.path().to_str().unwrap())];
    // Cora has no empty row, so every row maximum is finite.
    for expr in [
        "M[i] max= A[i,j] * x[j]",
        "M[i] min= A[i,j]",
        "s = A[i,j] * x[j]",
        "s[] max= A[i,j] * x[j]",
    ] {
        let common = [
            "--expr",
            expr,
            "--input",
            "A=data/cora.mtx",
            "--dtype",
            "f64",
            "--json",
        ];
        let mut eval_args = vec!["eval"];
        eval_args.extend(common);
        let v = json(&sparsile(&eval_args));
        let expected = v["outputs"][0]["checksum"].as_f64().unwrap();
        let mut run_args = vec!["run", "--threads", "2", "--repeat", "2"];
        run_args.extend(common);
        let got = json(&sparsile_env(&run_args, &env))["outputs"][0]["checksum"]
            .as_f64()
            .unwrap();
        assert!(
            (got - expected).abs() <= 1e-9 * expected.abs().max(1.0),
            "{expr}: {got} vs {expected}"
        );
    }
}
