//! Hostile but realistic input to the `sparsile` binary: every one is a named error with
//! exit status 1, never a panic (101), an abort or a signal. Regression tests of a probe
//! that found each of these crashing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn sparsile(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sparsile"))
        .args(args)
        .current_dir(repo_root())
        .env("SPARSILE_CACHE_DIR", cache)
        .output()
        .expect("the sparsile binary runs")
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `args`, checks that it failed with status 1 and no panic, and returns stderr.
fn refused(args: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let o = sparsile(args, &tmp.path().join("cache"));
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    stderr
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn sizes_declared_by_headers_are_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    let big = write(
        dir.path(),
        "big.mtx",
        b"%%MatrixMarket matrix coordinate real general\n1000000000000 1000000000000 1\n1 1 1\n",
    );
    let e = refused(&["info", &big]);
    assert!(e.contains("more than the memory available"), "{e}");
    let e = refused(&[
        "eval",
        "--expr",
        "y[i] = A[i,j] * x[j]",
        "--input",
        &format!("A={big}"),
    ]);
    assert!(
        e.contains("more than the memory available") || e.contains("more than can be allocated"),
        "{e}"
    );
    let dense = write(
        dir.path(),
        "dense.mtx",
        b"%%MatrixMarket matrix array real general\n10000 10000\n",
    );
    let e = refused(&["info", &dense]);
    assert!(e.contains("0 of the 100000000 declared entries"), "{e}");
}

#[test]
fn an_endless_input_file_is_a_named_error() {
    let e = refused(&["info", "/dev/zero"]);
    assert!(e.contains("longer than 1048576 bytes"), "{e}");
    let e = refused(&[
        "eval",
        "--expr",
        "y[i] = A[i,j] * x[j]",
        "--input",
        "A=/dev/zero",
    ]);
    assert!(e.contains("longer than"), "{e}");
}

#[test]
fn sizes_and_counts_from_options_are_named_errors() {
    let e = refused(&[
        "eval",
        "--expr",
        "C[i,k] = A[i,j] * B[j,k]",
        "--input",
        "A=data/cora.mtx",
        "--dim",
        "k=100000000000000000",
    ]);
    assert!(e.contains("more than the memory available"), "{e}");
    let e = refused(&[
        "run",
        "--expr",
        "y[i] = A[i,j] * x[j]",
        "--input",
        "A=data/cora.mtx",
        "--threads",
        "4294967296",
    ]);
    assert!(
        e.contains("--threads 4294967296 is more than the most, 1024"),
        "{e}"
    );
    let e = refused(&[
        "run",
        "--expr",
        "y[i] = A[i,j] * x[j]",
        "--input",
        "A=data/cora.mtx",
        "--repeat",
        "100000000000000",
    ]);
    assert!(e.contains("--repeat"), "{e}");
    // Clap's own refusals also exit 1... or 2 for usage errors; a size past usize is one.
    let tmp = tempfile::tempdir().unwrap();
    let o = sparsile(
        &[
            "eval",
            "--expr",
            "y[i] = A[i,j] * x[j]",
            "--input",
            "A=data/cora.mtx",
            "--dim",
            "j=99999999999999999999999",
        ],
        tmp.path(),
    );
    assert_ne!(o.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
}

#[test]
fn deeply_nested_programs_are_named_errors() {
    let deep = format!(
        "y[i] = {}A[i,j] * x[j]{}",
        "(".repeat(7000),
        ")".repeat(7000)
    );
    let e = refused(&["eval", "--expr", &deep, "--input", "A=data/cora.mtx"]);
    assert!(e.contains("nested more deeply than"), "{e}");
    // Longer programs come from a file (an argument this long is past the OS limit).
    let dir = tempfile::tempdir().unwrap();
    let decls = "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\n";
    for body in [
        format!("y[i] = A[i,j] * x[j]{}", " + x[i]".repeat(20000)),
        format!("y[i] = {}A[i,j] * x[j]", "-".repeat(50000)),
    ] {
        let program = write(
            dir.path(),
            "deep.spl",
            format!("{decls}{body}\n").as_bytes(),
        );
        let e = refused(&["eval", &program, "--input", "A=data/cora.mtx"]);
        assert!(e.contains("nested more deeply than"), "{e}");
    }
}

#[test]
fn damaged_tensor_files_are_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.spt");
    let tmp = tempfile::tempdir().unwrap();
    let o = sparsile(
        &[
            "convert",
            "data/cora.mtx",
            "--to",
            "csr",
            "-o",
            good.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::read(&good).unwrap();
    let header_end = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    let header_end = header_end
        + bytes[header_end..]
            .iter()
            .position(|&b| b == b'\n')
            .unwrap()
        + 1;
    // An index past the last column, then an indptr entry past the end of the indices,
    // then a column index repeated (what made `info` panic and `convert --check` lose
    // an entry while reporting the round trip identical).
    let indptr_bytes = 4 * 2709;
    let mutations: Vec<(usize, Vec<u8>)> = vec![
        (header_end + indptr_bytes, 99_999i32.to_le_bytes().to_vec()),
        (header_end + 4 * 5, 999_999i32.to_le_bytes().to_vec()),
        (
            header_end + indptr_bytes + 4,
            bytes[header_end + indptr_bytes..header_end + indptr_bytes + 4].to_vec(),
        ),
    ];
    for (k, (at, new)) in mutations.into_iter().enumerate() {
        let mut bad = bytes.clone();
        bad[at..at + new.len()].copy_from_slice(&new);
        let path = write(dir.path(), &format!("bad{k}.spt"), &bad);
        let e = refused(&["info", &path]);
        assert!(e.contains(&format!("cannot read {path}")), "{e}");
        let out = dir.path().join(format!("out{k}.spt"));
        refused(&[
            "convert",
            &path,
            "--to",
            "coo",
            "-o",
            out.to_str().unwrap(),
            "--check",
        ]);
        assert!(!out.exists(), "nothing written from a damaged input");
    }
}

#[test]
fn endless_program_and_trace_files_are_named_errors() {
    let e = refused(&["eval", "/dev/zero", "--input", "A=data/cora.mtx"]);
    assert!(e.contains("longer than 67108864 bytes"), "{e}");
    let e = refused(&[
        "compile",
        "--expr",
        "y[i] = A[i,j] * x[j]",
        "--format",
        "A=csr",
        "--schedule",
        "/dev/zero",
    ]);
    assert!(e.contains("longer than 67108864 bytes"), "{e}");
    // A trace nested past the JSON parser's limit, and one with absurd factors.
    let dir = tempfile::tempdir().unwrap();
    let deep = write(dir.path(), "deep.json", "[".repeat(100_000).as_bytes());
    refused(&[
        "compile",
        "--expr",
        "y[i] = A[i,j] * x[j]",
        "--format",
        "A=csr",
        "--schedule",
        &deep,
    ]);
    let huge = write(
        dir.path(),
        "huge.json",
        br#"{"steps":[{"step":"lower"},{"step":"split","target":{"block":"y","var":"i_2"},"factor":9223372036854775807,"tail":"InnerFixed"}]}"#,
    );
    let e = refused(&[
        "compile",
        "--expr",
        "y[i] = A[i,j] * x[j]",
        "--format",
        "A=csr",
        "--schedule",
        &huge,
    ]);
    assert!(e.contains("the largest extent an index can have"), "{e}");
}
