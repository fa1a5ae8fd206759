//! The kernel cache under attack: a folder someone else could write, no HOME, links planted
//! where the cache writes, truncated and swapped objects, foreign objects without a
//! record, and a cache shared between CPUs with different features. Each test is the
//! regression test of one way planted or damaged files used to run or crash.
#![cfg(unix)]

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::process::Command;

use sparsile_ir::settings::Settings;
use sparsile_runtime::jit::{
    host_cpu_features, private_cache_dir, Cache, CacheOutcome, Compiler, JitError, Launcher,
    Library,
};

fn compiler_or_skip(test: &str) -> Option<Compiler> {
    match Compiler::detect(&Settings::from_env()) {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("{test}: skipped, no C compiler: {e}");
            None
        }
    }
}

/// A one-phase kernel adding `step` to `out[t]` for every work item `t < params[0]`.
fn add_source(step: i64) -> String {
    format!(
        r#"#include <stdint.h>
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
    for (int64_t t = begin; t < end; ++t) out[t] += {step};
    return 0;
}}
"#
    )
}

/// Loads `path` and returns what its kernel adds to each of 100 work items.
fn step_of(path: &Path) -> i64 {
    let lib = Library::load(path).unwrap();
    let mut out = vec![0i64; 100];
    let buffers = [out.as_mut_ptr().cast::<std::ffi::c_void>()];
    let launcher = Launcher::new(Some(1), &Settings::default()).unwrap();
    // SAFETY: the add kernel writes out[0..params[0]], and out has 100 elements.
    unsafe { launcher.run(&lib, &buffers, &[100]).unwrap() };
    assert!(out.iter().all(|&x| x == out[0]));
    out[0]
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Puts a copy of `from` at `to` as a new file (a file this process has loaded must not
/// change under it).
fn replace_with_copy(from: &Path, to: &Path) {
    let temp = to.with_extension("copy");
    std::fs::copy(from, &temp).unwrap();
    std::fs::rename(&temp, to).unwrap();
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn the_cache_folder_is_created_private() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a").join("b");
    let settings = Settings {
        cache_dir: Some(dir.clone()),
        ..Settings::default()
    };
    assert_eq!(private_cache_dir(&settings).unwrap(), dir);
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&tmp.path().join("a")), 0o700, "created parents too");
    // An existing private folder is accepted as it is.
    set_mode(&dir, 0o755);
    assert_eq!(private_cache_dir(&settings).unwrap(), dir);
}

#[test]
fn a_folder_others_can_write_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cache");
    std::fs::create_dir(&dir).unwrap();
    for bad in [0o777, 0o770, 0o703] {
        set_mode(&dir, bad);
        let settings = Settings {
            cache_dir: Some(dir.clone()),
            ..Settings::default()
        };
        let err = private_cache_dir(&settings).unwrap_err();
        assert!(
            matches!(&err, JitError::UnsafeCacheDir { reason, .. } if reason.contains("write")),
            "{bad:o}: {err}"
        );
        if let Some(c) = compiler_or_skip("a_folder_others_can_write_is_refused") {
            assert!(matches!(
                Cache::with_compiler(dir.clone(), c).unwrap_err(),
                JitError::UnsafeCacheDir { .. }
            ));
        }
    }
    // A folder above that everyone can write (without the sticky bit) is refused too;
    // with the sticky bit (as /tmp has) it is accepted.
    set_mode(&dir, 0o700);
    set_mode(tmp.path(), 0o777);
    let settings = Settings {
        cache_dir: Some(dir.clone()),
        ..Settings::default()
    };
    let err = private_cache_dir(&settings).unwrap_err();
    assert!(err.to_string().contains("writable by every user"), "{err}");
    set_mode(tmp.path(), 0o1777);
    private_cache_dir(&settings).unwrap();
    set_mode(tmp.path(), 0o700);
    // A file in the folder's place.
    let file = tmp.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let settings = Settings {
        cache_dir: Some(file),
        ..Settings::default()
    };
    assert!(matches!(
        private_cache_dir(&settings).unwrap_err(),
        JitError::UnsafeCacheDir { .. }
    ));
}

/// The attack of a shared temporary default: another user creates the folder first and
/// plants a kernel in it. The folder is refused (as root too), so the kernel never runs.
#[test]
fn a_folder_owned_by_another_user_is_refused() {
    if !is_root() {
        eprintln!("a_folder_owned_by_another_user_is_refused: skipped, needs root to chown");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    set_mode(tmp.path(), 0o1777);
    let planted = tmp.path().join("sparsile-cache");
    std::fs::create_dir(&planted).unwrap();
    set_mode(&planted, 0o755);
    std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
    let settings = Settings {
        cache_dir: Some(planted.clone()),
        ..Settings::default()
    };
    let err = private_cache_dir(&settings).unwrap_err();
    assert!(err.to_string().contains("owned by user 65534"), "{err}");
    // A link to it, in a folder of ours, is refused the same way.
    let link = tmp.path().join("link");
    symlink(&planted, &link).unwrap();
    let settings = Settings {
        cache_dir: Some(link),
        ..Settings::default()
    };
    assert!(matches!(
        private_cache_dir(&settings).unwrap_err(),
        JitError::UnsafeCacheDir { .. }
    ));
    // A folder of ours below one owned by another user is refused too.
    let inner = planted.join("inner");
    std::fs::create_dir(&inner).unwrap();
    set_mode(&inner, 0o700);
    let settings = Settings {
        cache_dir: Some(inner),
        ..Settings::default()
    };
    let err = private_cache_dir(&settings).unwrap_err();
    assert!(err.to_string().contains("folder above it"), "{err}");
}

/// Child of [`without_home_the_cache_is_never_in_the_temporary_folder`]: prints where
/// the cache would be.
#[test]
#[ignore = "child process of without_home_the_cache_is_never_in_the_temporary_folder"]
fn no_home_child() {
    if std::env::var_os("SPARSILE_TRUST_CHILD").is_none() {
        return;
    }
    match private_cache_dir(&Settings::from_env()) {
        Ok(dir) => println!("CHILD-DIR {}", dir.display()),
        Err(e) => println!("CHILD-ERR {e}"),
    }
}

#[test]
fn without_home_the_cache_is_never_in_the_temporary_folder() {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--ignored", "--exact", "no_home_child", "--nocapture"])
        .env("SPARSILE_TRUST_CHILD", "1")
        .env_remove("HOME")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("SPARSILE_CACHE_DIR")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("CHILD-"))
        .unwrap_or_else(|| panic!("no answer: {stdout}"));
    if let Some(dir) = line.strip_prefix("CHILD-DIR ") {
        assert!(
            !Path::new(dir).starts_with(std::env::temp_dir()),
            "a cache in the shared temporary folder: {dir}"
        );
        assert!(dir.ends_with(".cache/sparsile"), "{dir}");
    } else {
        assert!(line.contains("no kernel cache folder"), "{line}");
    }
}

#[test]
fn links_planted_where_the_cache_writes_are_never_written_through() {
    let Some(compiler) = compiler_or_skip("links_planted_where_the_cache_writes") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cache");
    let cache = Cache::with_compiler(dir.clone(), compiler).unwrap();
    let src = add_source(1);
    let key = cache.key(&src);
    let sub = dir.join(&key[..2]);
    std::fs::create_dir(&sub).unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    // Every name the cache writes, and the temporary names older versions used.
    let mut planted = vec![
        sub.join(format!("{key}.c")),
        sub.join(format!("{key}.so")),
        sub.join(format!("{key}.sum")),
    ];
    for n in 0..64 {
        let tag = format!("{}.{n}", std::process::id());
        planted.push(sub.join(format!(".{key}.{tag}.tmp.c")));
        planted.push(sub.join(format!(".{key}.{tag}.tmp.so")));
    }
    for p in &planted {
        symlink(&victim, p).unwrap();
    }
    let (object, outcome) = cache.compile_cached(&src).unwrap();
    assert_eq!(outcome, CacheOutcome::Miss, "a link is not a cached kernel");
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    for p in &planted[..3] {
        let meta = std::fs::symlink_metadata(p).unwrap();
        assert!(meta.is_file(), "{} replaced by a file", p.display());
        assert_eq!(meta.permissions().mode() & 0o022, 0, "{}", p.display());
    }
    assert_eq!(step_of(&object), 1);
    // The sub-folder itself as a link is refused.
    let src2 = add_source(2);
    let key2 = cache.key(&src2);
    let sub2 = dir.join(&key2[..2]);
    if sub2 != sub {
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        symlink(&elsewhere, &sub2).unwrap();
        let err = cache.compile_cached(&src2).unwrap_err();
        assert!(matches!(err, JitError::UnsafeCacheDir { .. }), "{err}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    }
}

#[test]
fn a_truncated_object_is_rebuilt_not_loaded() {
    let Some(compiler) = compiler_or_skip("a_truncated_object_is_rebuilt") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::with_compiler(tmp.path().join("cache"), compiler).unwrap();
    let src = add_source(3);
    let (object, outcome) = cache.compile_cached(&src).unwrap();
    assert_eq!(outcome, CacheOutcome::Miss);
    assert!(cache.record_path(&src).is_file());
    let len = std::fs::metadata(&object).unwrap().len();
    for cut in [len / 2, 64, 0] {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&object)
            .unwrap();
        f.set_len(cut).unwrap();
        drop(f);
        let (again, outcome) = cache.compile_cached(&src).unwrap();
        assert_eq!(
            (&again, outcome),
            (&object, CacheOutcome::Miss),
            "cut to {cut}"
        );
        assert_eq!(std::fs::metadata(&object).unwrap().len(), len);
    }
    assert_eq!(step_of(&object), 3);
    assert_eq!(cache.compile_cached(&src).unwrap().1, CacheOutcome::Hit);
}

#[test]
fn an_object_copied_over_another_key_is_rebuilt() {
    let Some(compiler) = compiler_or_skip("an_object_copied_over_another_key") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::with_compiler(tmp.path().join("cache"), compiler).unwrap();
    let (one, two) = (add_source(1), add_source(2));
    let (object_one, _) = cache.compile_cached(&one).unwrap();
    let (object_two, _) = cache.compile_cached(&two).unwrap();
    // The object alone, then object and record together. (Replaced, not written in
    // place: this process has the first object loaded.)
    replace_with_copy(&object_two, &object_one);
    let (path, outcome) = cache.compile_cached(&one).unwrap();
    assert_eq!(outcome, CacheOutcome::Miss);
    assert_eq!(step_of(&path), 1, "the kernel of its own source");
    replace_with_copy(&object_two, &object_one);
    replace_with_copy(&cache.record_path(&two), &cache.record_path(&one));
    let (path, outcome) = cache.compile_cached(&one).unwrap();
    assert_eq!(outcome, CacheOutcome::Miss);
    assert_eq!(step_of(&path), 1);
}

#[test]
fn a_foreign_object_without_a_record_is_rebuilt() {
    let Some(compiler) = compiler_or_skip("a_foreign_object_without_a_record") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::with_compiler(tmp.path().join("cache"), compiler).unwrap();
    let src = add_source(5);
    let object = cache.object_path(&src);
    std::fs::create_dir_all(object.parent().unwrap()).unwrap();
    // A planted object (here: a valid kernel that adds 9) with no record.
    let (planted, _) = cache.compile_cached(&add_source(9)).unwrap();
    std::fs::copy(&planted, &object).unwrap();
    let (path, outcome) = cache.compile_cached(&src).unwrap();
    assert_eq!((&path, outcome), (&object, CacheOutcome::Miss));
    assert_eq!(step_of(&path), 5);
    // A damaged record is no record.
    let record = cache.record_path(&src);
    let text = std::fs::read_to_string(&record).unwrap();
    for damaged in [
        text.replace("sha256 ", "sha256 0"),
        text.replace("size ", "size 1"),
        format!("{text}extra\n"),
        "x".repeat(5000),
    ] {
        std::fs::write(&record, damaged).unwrap();
        assert_eq!(cache.compile_cached(&src).unwrap().1, CacheOutcome::Miss);
    }
    assert_eq!(cache.compile_cached(&src).unwrap().1, CacheOutcome::Hit);
}

#[test]
fn the_key_holds_the_host_cpu_features() {
    let Some(compiler) = compiler_or_skip("the_key_holds_the_host_cpu_features") else {
        return;
    };
    let features = host_cpu_features();
    assert!(compiler.target().contains(features));
    if cfg!(target_arch = "x86_64") {
        assert!(features.split(' ').any(|f| f == "sse2"), "{features}");
        assert!(
            compiler.target().contains("#define __SSE2__ 1"),
            "the compiler's -march=native macros: {}",
            compiler.target()
        );
        // Whatever the CPU has, the compiler's view of -march=native agrees.
        if features.split(' ').any(|f| f == "avx2") {
            assert!(compiler.target().contains("__AVX2__"));
        } else {
            assert!(!compiler.target().contains("__AVX2__"));
        }
    }
}

/// Child of [`a_cache_shared_between_cpus_keeps_their_kernels_apart`]: prints the key of
/// one source under the compiler of the environment.
#[test]
#[ignore = "child process of a_cache_shared_between_cpus_keeps_their_kernels_apart"]
fn key_child() {
    if std::env::var_os("SPARSILE_TRUST_CHILD").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let compiler = Compiler::detect(&Settings::from_env()).unwrap();
    let cache = Cache::with_compiler(tmp.path().to_path_buf(), compiler.clone()).unwrap();
    println!("CHILD-IDENTITY {}", compiler.identity());
    println!("CHILD-KEY {}", cache.key(&add_source(1)));
}

/// Two machines with the same compiler but CPUs of different features (a wrapper makes
/// `-march=native` mean more on the second) get different keys, so neither loads the
/// other's code.
#[test]
fn a_cache_shared_between_cpus_keeps_their_kernels_apart() {
    if compiler_or_skip("a_cache_shared_between_cpus").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let wrapper = tmp.path().join("cc-wrapper");
    std::fs::write(
        &wrapper,
        "#!/bin/sh\ncase \" $* \" in *\" -dM \"*) cc \"$@\"; [ -n \"$FAKE_WIDE_CPU\" ] && echo '#define __AVX1024__ 1'; exit 0;; esac\nexec cc \"$@\"\n",
    )
    .unwrap();
    set_mode(&wrapper, 0o755);
    let exe = std::env::current_exe().unwrap();
    let run = |wide: bool| {
        let mut cmd = Command::new(&exe);
        cmd.args(["--ignored", "--exact", "key_child", "--nocapture"])
            .env("SPARSILE_TRUST_CHILD", "1")
            .env("CC", &wrapper);
        if wide {
            cmd.env("FAKE_WIDE_CPU", "1");
        } else {
            cmd.env_remove("FAKE_WIDE_CPU");
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{stdout}");
        let get = |tag: &str| {
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(tag))
                .unwrap_or_else(|| panic!("no {tag}: {stdout}"))
                .to_string()
        };
        (get("CHILD-IDENTITY "), get("CHILD-KEY "))
    };
    let (narrow_identity, narrow_key) = run(false);
    let (wide_identity, wide_key) = run(true);
    assert_eq!(narrow_identity, wide_identity, "same compiler");
    assert_ne!(narrow_key, wide_key, "different CPUs, different kernels");
    assert_eq!(run(false).1, narrow_key, "the key is stable");
}
