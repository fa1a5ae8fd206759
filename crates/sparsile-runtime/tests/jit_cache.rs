//! The C compiler, the kernel cache and the loader: detection and the no-compiler error,
//! cache hits and misses, compile errors, concurrent compiles from several processes,
//! and ABI checks at load time. Tests that need a C compiler print that they skipped
//! when none runs.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sparsile_ir::settings::Settings;
use sparsile_runtime::jit::{Cache, CacheOutcome, Compiler, JitError, Launcher, Library};

/// Settings from the environment with the cache in `dir`, or `None` (after printing that
/// the test skipped) when no C compiler runs.
fn settings_or_skip(test: &str, dir: &Path) -> Option<Settings> {
    let settings = Settings {
        cache_dir: Some(dir.to_path_buf()),
        ..Settings::from_env()
    };
    match Compiler::detect(&settings) {
        Ok(_) => Some(settings),
        Err(e) => {
            eprintln!("{test}: skipped, no C compiler: {e}");
            None
        }
    }
}

/// A kernel with one parallel phase: `out[t] += 1` for every work item `t < params[0]`,
/// plus `salt` to make distinct sources.
fn count_source(salt: &str) -> String {
    format!(
        r#"#include <stdint.h>
/* {salt} */
int64_t sparsile_abi_version(void) {{ return 3; }}
int64_t sparsile_phase_partition(int64_t ph) {{ (void)ph; return 0; }}
int32_t sparsile_phase_bounds(int64_t ph, void *const *buffers, const int64_t *params, int64_t n, int64_t *bounds) {{ (void)ph; (void)buffers; (void)params; (void)n; (void)bounds; return 1; }}
int64_t sparsile_phase_work(int64_t ph, void *const *buffers, const int64_t *params) {{ (void)ph; (void)buffers; (void)params; return -1; }}
int64_t sparsile_num_phases(void) {{ return 1; }}
int64_t sparsile_phase_extent(int64_t ph, void *const *buffers, const int64_t *params) {{
    (void)ph; (void)buffers; return params[0];
}}
int32_t sparsile_phase_run(int64_t ph, void *const *buffers, const int64_t *params,
                           int64_t begin, int64_t end) {{
    int64_t *out = (int64_t *)buffers[0];
    (void)ph; (void)params;
    for (int64_t t = begin; t < end; ++t) out[t] += 1;
    return 0;
}}
"#
    )
}

/// Loads `path` and checks that it counts every work item of 1000 once.
fn check_count_kernel(path: &Path) {
    let lib = Library::load(path).unwrap();
    assert_eq!(lib.num_phases().unwrap(), 1);
    let mut out = vec![0i64; 1000];
    let buffers = [out.as_mut_ptr().cast::<std::ffi::c_void>()];
    let launcher = Launcher::new(Some(3), &Settings::default()).unwrap();
    // SAFETY: the count kernel writes out[0..params[0]], and out has 1000 elements.
    unsafe { launcher.run(&lib, &buffers, &[1000]).unwrap() };
    assert!(out.iter().all(|&c| c == 1), "every work item runs once");
}

#[test]
fn detects_the_compiler_and_its_identity() {
    let dir = tempfile::tempdir().unwrap();
    let Some(settings) = settings_or_skip("detects_the_compiler_and_its_identity", dir.path())
    else {
        return;
    };
    let c = Compiler::detect(&settings).unwrap();
    assert!(!c.version().is_empty(), "`--version` printed a first line");
    assert!(c.identity().contains(c.version()));
    assert!(c.identity().contains(&c.path().display().to_string()));
    let flags = c.flags();
    for f in [
        "-O3",
        "-march=native",
        "-shared",
        "-fPIC",
        "-std=c99",
        "-lm",
    ] {
        assert!(flags.iter().any(|x| x == f), "flag {f} in {flags:?}");
    }
    // Which compiler it is, by its resolved path and version line (`cc` is often a link).
    let who = format!("{} {}", c.path().display(), c.version()).to_lowercase();
    if who.contains("clang") {
        assert!(!c.is_gcc(), "clang is not taken for GCC: {who}");
    } else if who.contains("gcc") {
        assert!(c.is_gcc(), "GCC is recognised: {who}");
    }
    for f in sparsile_runtime::jit::GCC_FLAGS {
        assert_eq!(
            flags.iter().any(|x| x == f),
            c.is_gcc(),
            "GCC's flag {f} is used exactly when the compiler is GCC: {flags:?}"
        );
    }
}

#[test]
fn a_missing_compiler_is_a_clear_error() {
    let settings = Settings {
        cc: Some("sparsile-no-such-cc-0x5eed".into()),
        ..Settings::default()
    };
    let err = Compiler::detect(&settings).unwrap_err();
    assert!(matches!(err, JitError::NoCompiler { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.starts_with(
            "no C compiler found (tried `sparsile-no-such-cc-0x5eed`): install gcc or clang, \
             or set CC to one; the interpreter still works (cause: "
        ),
        "{msg}"
    );
    // The cache reports the same error.
    assert!(matches!(
        Cache::new(&settings).unwrap_err(),
        JitError::NoCompiler { .. }
    ));
    let blank = Settings {
        cc: Some("   ".into()),
        ..Settings::default()
    };
    assert!(matches!(
        Compiler::detect(&blank).unwrap_err(),
        JitError::EmptyCompilerCommand
    ));
}

#[test]
fn second_compile_hits_and_a_changed_source_recompiles() {
    let dir = tempfile::tempdir().unwrap();
    let Some(settings) = settings_or_skip("second_compile_hits", dir.path()) else {
        return;
    };
    let cache = Cache::new(&settings).unwrap();
    let src = count_source("first");
    let (path, outcome) = cache.compile_cached(&src).unwrap();
    assert_eq!(outcome, CacheOutcome::Miss);
    assert_eq!(path, cache.object_path(&src));
    let key = cache.key(&src);
    assert_eq!(key.len(), 64);
    assert_eq!(path, dir.path().join(&key[..2]).join(format!("{key}.so")));
    assert!(path.with_extension("c").is_file(), "the source is kept");
    check_count_kernel(&path);

    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    let (again, outcome) = cache.compile_cached(&src).unwrap();
    assert_eq!((again.clone(), outcome), (path.clone(), CacheOutcome::Hit));
    assert_eq!(
        std::fs::metadata(&again).unwrap().modified().unwrap(),
        modified,
        "a hit does not rewrite the object"
    );

    let other = count_source("second");
    let (path2, outcome2) = cache.compile_cached(&other).unwrap();
    assert_eq!(outcome2, CacheOutcome::Miss);
    assert_ne!(path2, path);
    check_count_kernel(&path2);
    // A second cache over the same folder (another process, later) hits.
    let cache2 = Cache::new(&settings).unwrap();
    assert_eq!(cache2.compile_cached(&other).unwrap().1, CacheOutcome::Hit);
}

#[test]
fn compile_errors_hold_stderr_and_the_kept_source() {
    let dir = tempfile::tempdir().unwrap();
    let Some(settings) = settings_or_skip("compile_errors", dir.path()) else {
        return;
    };
    let cache = Cache::new(&settings).unwrap();
    let src =
        "#include <stdint.h>\nint64_t sparsile_abi_version(void) { return undeclared_name; }\n";
    let err = cache.compile_cached(src).unwrap_err();
    let JitError::CompileFailed {
        stderr,
        source_path,
        ..
    } = &err
    else {
        panic!("expected a compile error, got {err:?}");
    };
    assert!(stderr.contains("undeclared_name"), "{stderr}");
    assert_eq!(std::fs::read_to_string(source_path).unwrap(), src);
    let msg = err.to_string();
    assert!(msg.contains(&source_path.display().to_string()), "{msg}");
    assert!(msg.contains("undeclared_name"), "{msg}");
    assert!(
        !cache.object_path(src).exists(),
        "no object for a failed compile"
    );
}

#[test]
fn load_checks_the_abi() {
    let dir = tempfile::tempdir().unwrap();
    let Some(settings) = settings_or_skip("load_checks_the_abi", dir.path()) else {
        return;
    };
    let cache = Cache::new(&settings).unwrap();
    let wrong_version = count_source("v1").replace(
        "sparsile_abi_version(void) { return 3; }",
        "sparsile_abi_version(void) { return 1; }",
    );
    let (path, _) = cache.compile_cached(&wrong_version).unwrap();
    let err = Library::load(&path).unwrap_err();
    assert!(
        matches!(
            err,
            JitError::AbiVersion {
                found: 1,
                expected: sparsile_runtime::jit::ABI_VERSION,
                ..
            }
        ),
        "{err:?}"
    );

    let no_run = "#include <stdint.h>\nint64_t sparsile_abi_version(void) { return 1; }\n\
                  int64_t sparsile_num_phases(void) { return 0; }\n\
                  int64_t sparsile_phase_extent(int64_t p, void *const *b, const int64_t *q) \
                  { (void)p; (void)b; (void)q; return 1; }\n";
    let (path, _) = cache.compile_cached(no_run).unwrap();
    let err = Library::load(&path).unwrap_err();
    assert!(
        matches!(
            err,
            JitError::MissingSymbol {
                symbol: "sparsile_phase_run",
                ..
            }
        ),
        "{err:?}"
    );

    let err = Library::load(&dir.path().join("missing.so")).unwrap_err();
    assert!(matches!(err, JitError::Load { .. }), "{err:?}");
}

/// A source slow enough to compile that concurrent compiles overlap.
fn slow_source() -> String {
    let mut s = count_source("concurrent");
    for k in 0..120 {
        s.push_str(&format!(
            "double sparsile_filler_{k}(double x) {{ double y = x; for (int i = 0; i < {k}; ++i) y = y * 1.0001 + {k}.5 / (y + 3.0); return y; }}\n"
        ));
    }
    s
}

/// Marks a cache folder prepared by the parent test for its children.
const PARENT_MARKER: &str = "concurrent-compile-parent";

/// Child mode of [`concurrent_compiles_from_processes_leave_one_valid_object`]: waits for
/// the `go` file in `SPARSILE_CACHE_DIR` (which holds [`PARENT_MARKER`]), compiles [`slow_source`], checks the object and
/// prints its path.
#[test]
#[ignore = "child process of concurrent_compiles_from_processes_leave_one_valid_object"]
fn concurrent_compile_child() {
    let settings = Settings::from_env();
    let Some(dir) = settings
        .cache_dir
        .clone()
        .filter(|d| d.join(PARENT_MARKER).exists())
    else {
        eprintln!("concurrent_compile_child: not started by its parent test, nothing to do");
        return;
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("go").exists() {
        assert!(Instant::now() < deadline, "the parent never said go");
        std::thread::sleep(Duration::from_millis(2));
    }
    let cache = Cache::new(&settings).unwrap();
    let (path, outcome) = cache.compile_cached(&slow_source()).unwrap();
    check_count_kernel(&path);
    println!("CHILD-OBJECT {} {:?}", path.display(), outcome);
}

#[test]
fn concurrent_compiles_from_processes_leave_one_valid_object() {
    let dir = tempfile::tempdir().unwrap();
    let Some(_) = settings_or_skip("concurrent_compiles_from_processes", dir.path()) else {
        return;
    };
    let exe = std::env::current_exe().unwrap();
    std::fs::write(dir.path().join(PARENT_MARKER), b"").unwrap();
    let children: Vec<_> = (0..6)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "--ignored",
                    "--exact",
                    "concurrent_compile_child",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("SPARSILE_CACHE_DIR", dir.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(dir.path().join("go"), b"").unwrap();
    let mut paths = Vec::new();
    let mut misses = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "child failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = stdout
            .lines()
            .find_map(|l| l.split_once("CHILD-OBJECT ").map(|(_, rest)| rest))
            .unwrap_or_else(|| panic!("child printed no object: {stdout}"));
        let (path, outcome) = line.rsplit_once(' ').unwrap();
        misses += usize::from(outcome == "Miss");
        paths.push(path.to_string());
    }
    assert!(misses >= 1, "someone compiled");
    eprintln!("{misses} of 6 processes compiled the kernel concurrently");
    paths.dedup();
    assert_eq!(paths.len(), 1, "every child got the same object: {paths:?}");
    // Exactly one object, its record and one source remain; no temporary files.
    let sub = Path::new(&paths[0]).parent().unwrap();
    let mut names: Vec<String> = std::fs::read_dir(sub)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
    check_count_kernel(Path::new(&paths[0]));
}
