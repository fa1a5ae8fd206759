//! `sparsile cache info|clear` on a kernel cache in a temporary folder, filled by
//! `sparsile run`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn sparsile(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sparsile"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .env("SPARSILE_CACHE_DIR", cache)
        .output()
        .expect("the sparsile binary runs")
}

fn json(o: &Output) -> serde_json::Value {
    assert!(
        o.status.success(),
        "command failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("valid JSON")
}

fn cache_dir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    (tmp, cache)
}

#[test]
fn info_and_clear_follow_what_run_compiles() {
    let (_tmp, cache) = cache_dir();
    let v = json(&sparsile(&["cache", "info", "--json"], &cache));
    assert_eq!(v["exists"], false);
    assert_eq!(v["kernels"], 0);
    assert!(!cache.exists(), "info must not create the folder");

    let run = sparsile(
        &[
            "run",
            "--expr",
            "y[i] = A[i,j] * x[j]",
            "--input",
            "A=data/cora.mtx",
            "--format",
            "A=csr",
            "--repeat",
            "1",
        ],
        &cache,
    );
    if !run.status.success() {
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(err.contains("no C compiler"), "{err}");
        eprintln!("skipped: no C compiler");
        return;
    }
    let v = json(&sparsile(&["cache", "info", "--json"], &cache));
    assert_eq!(v["exists"], true);
    assert_eq!(v["checks_pass"], true);
    assert_eq!(v["dir"], cache.display().to_string());
    let kernels = v["cpu_kernels"].as_u64().unwrap();
    assert!(kernels >= 1, "{v}");
    assert!(v["files"].as_u64().unwrap() >= 3 * kernels, "{v}");
    let bytes = v["bytes"].as_u64().unwrap();
    assert!(v["oldest"].as_f64().unwrap() <= v["newest"].as_f64().unwrap());

    let text = String::from_utf8(sparsile(&["cache", "info"], &cache).stdout).unwrap();
    assert!(
        text.contains("CPU kernels") && text.contains("pass"),
        "{text}"
    );

    let clear = sparsile(&["cache", "clear"], &cache);
    let text = String::from_utf8(clear.stdout).unwrap();
    assert!(clear.status.success(), "{text}");
    assert!(
        text.starts_with(&format!("removed {kernels} kernel")),
        "{text}"
    );

    let v = json(&sparsile(&["cache", "info", "--json"], &cache));
    assert_eq!(
        (v["kernels"].as_u64(), v["bytes"].as_u64()),
        (Some(0), Some(0))
    );
    let v = json(&sparsile(&["cache", "clear", "--json"], &cache));
    assert_eq!(v["files_removed"], 0);
    assert!(bytes > 0);
}

#[cfg(unix)]
#[test]
fn a_folder_others_can_write_is_named_and_not_cleared() {
    use std::os::unix::fs::PermissionsExt;
    let (_tmp, cache) = cache_dir();
    let sub = cache.join("ab");
    std::fs::create_dir_all(&sub).unwrap();
    let object = sub.join(format!("ab{}.so", "0".repeat(62)));
    std::fs::write(&object, b"x").unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();

    let v = json(&sparsile(&["cache", "info", "--json"], &cache));
    assert_eq!(v["checks_pass"], false);
    assert!(v["problem"].as_str().unwrap().contains("mode 777"), "{v}");

    let o = sparsile(&["cache", "clear"], &cache);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot clear the kernel cache"), "{err}");
    assert!(err.contains("refusing the kernel cache folder"), "{err}");
    assert!(object.exists());
}
