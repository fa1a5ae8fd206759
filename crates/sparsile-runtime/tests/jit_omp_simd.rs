//! `-fopenmp-simd` in the kernel flags: a kernel with an `omp simd` reduction compiles
//! and sums correctly, and a compiler that rejects the flag is run again without it.
//! Tests that need a C compiler print that they skipped when none runs.

use std::path::Path;

use sparsile_ir::settings::Settings;
use sparsile_runtime::jit::{Compiler, JitError, Launcher, Library, FLAGS, OMP_SIMD_FLAG};

/// One serial phase: `out[0] = sum of in[0..params[0]]` through an `omp simd` reduction.
const SUM_SOURCE: &str = r#"#include <stdint.h>
int64_t sparsile_abi_version(void) { return 2; }
int64_t sparsile_phase_partition(int64_t ph) { (void)ph; return 0; }
int32_t sparsile_phase_bounds(int64_t ph, void *const *buffers, const int64_t *params, int64_t n, int64_t *bounds) { (void)ph; (void)buffers; (void)params; (void)n; (void)bounds; return 1; }
int64_t sparsile_num_phases(void) { return 1; }
int64_t sparsile_phase_extent(int64_t ph, void *const *buffers, const int64_t *params) {
    (void)ph; (void)buffers; (void)params; return 1;
}
int32_t sparsile_phase_run(int64_t ph, void *const *buffers, const int64_t *params,
                           int64_t begin, int64_t end) {
    const double *in = (const double *)buffers[0];
    double *out = (double *)buffers[1];
    (void)ph; (void)begin; (void)end;
    double acc = 0.0;
    const int64_t n = params[0];
    #pragma omp simd reduction(+:acc)
    for (int64_t i = 0; i < n; ++i) {
        acc = acc + in[i];
    }
    out[0] = acc;
    return 0;
}
"#;

fn compiler_or_skip(test: &str, settings: &Settings) -> Option<Compiler> {
    match Compiler::detect(settings) {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("{test}: skipped, no C compiler: {e}");
            None
        }
    }
}

/// Compiles `SUM_SOURCE` with `compiler` in `dir`, runs it on 1..=1000 and checks the sum.
fn compile_and_sum(compiler: &Compiler, dir: &Path) {
    let source = dir.join("sum.c");
    let object = dir.join("sum.so");
    std::fs::write(&source, SUM_SOURCE).unwrap();
    compiler.compile(&source, &object).unwrap();
    let lib = Library::load(&object).unwrap();
    let input: Vec<f64> = (1..=1000).map(f64::from).collect();
    let mut out = [0.0f64];
    let buffers = [
        input.as_ptr().cast_mut().cast::<std::ffi::c_void>(),
        out.as_mut_ptr().cast::<std::ffi::c_void>(),
    ];
    let launcher = Launcher::new(Some(1), &Settings::default()).unwrap();
    // SAFETY: the kernel reads in[0..1000] and writes out[0]; both buffers are that long.
    unsafe { launcher.run(&lib, &buffers, &[1000]).unwrap() };
    // Integers up to 500500 are exact in any order of summation.
    assert_eq!(out[0], 500_500.0);
}

#[test]
fn the_flags_enable_omp_simd_pragmas() {
    assert!(FLAGS.contains(&OMP_SIMD_FLAG));
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings::from_env();
    let Some(compiler) = compiler_or_skip("the_flags_enable_omp_simd_pragmas", &settings) else {
        return;
    };
    assert!(compiler.flags().iter().any(|f| f == OMP_SIMD_FLAG));
    compile_and_sum(&compiler, dir.path());
}

#[cfg(unix)]
#[test]
fn a_compiler_rejecting_the_flag_compiles_without_it() {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().unwrap();
    let Some(real) = compiler_or_skip(
        "a_compiler_rejecting_the_flag_compiles_without_it",
        &Settings::from_env(),
    ) else {
        return;
    };
    // A wrapper that fails like an old compiler on the flag and runs the real one otherwise.
    let wrapper = dir.path().join("old-cc");
    let script = format!(
        "#!/bin/sh\nfor a in \"$@\"; do\n  if [ \"$a\" = \"{OMP_SIMD_FLAG}\" ]; then\n    echo \"old-cc: error: unrecognized command-line option '{OMP_SIMD_FLAG}'\" >&2\n    exit 1\n  fi\ndone\nexec '{}' \"$@\"\n",
        real.path().display()
    );
    std::fs::write(&wrapper, script).unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let settings = Settings {
        cc: Some(wrapper.display().to_string()),
        ..Settings::from_env()
    };
    let old = Compiler::detect(&settings).unwrap();
    compile_and_sum(&old, dir.path());

    // A real compile error still reports the compiler's output.
    let broken = dir.path().join("broken.c");
    std::fs::write(&broken, "int f(void) { return }\n").unwrap();
    let err = old
        .compile(&broken, &dir.path().join("broken.so"))
        .unwrap_err();
    assert!(
        matches!(&err, JitError::CompileFailed { stderr, .. } if stderr.contains("error")),
        "{err:?}"
    );
}
