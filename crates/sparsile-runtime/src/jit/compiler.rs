//! Finding and running the system C compiler.
//!
//! [`Compiler::detect`] takes the command from [`Settings::cc`] (default `cc`; words after
//! the first are extra arguments, as in `CC="ccache gcc"`), resolves its path through
//! `PATH`, and runs `--version`: the resolved path and the first line of that output form
//! the compiler's [`identity`](Compiler::identity), which the cache key includes so that a
//! compiler upgrade recompiles. Kernels are built with [`FLAGS`] into a shared object and
//! linked against `libm`.
//!
//! `-ffp-contract=fast` lets `a + b * c` compile to one fused multiply-add (ISO C mode
//! would otherwise keep the separate multiply and add): half the arithmetic instructions
//! of SpMM and SDDMM inner loops, and one rounding instead of two per term.
//!
//! With GCC, [`GCC_FLAGS`] are added: `-fno-tree-loop-distribute-patterns` keeps the
//! short loops the backend writes (zeroing a row's local accumulator, copying it out)
//! as the vector loops they are, instead of calls or `rep stos` sequences, which GCC's
//! tuning for some CPUs picks even for 128 bytes: on SpMM K = 32 over rows of a few
//! non-zeros, that per-row start-up cost made the kernel take 1.2-1.3 times as long.
//!
//! When the compiler cannot be run the error says so and how to fix it:
//!
//! ```
//! use sparsile_ir::settings::Settings;
//! use sparsile_runtime::jit::{Compiler, JitError};
//!
//! let settings = Settings { cc: Some("no-such-compiler-xyz".into()), ..Settings::default() };
//! let err = Compiler::detect(&settings).unwrap_err();
//! assert!(matches!(err, JitError::NoCompiler { .. }));
//! assert!(err.to_string().starts_with("no C compiler found (tried `no-such-compiler-xyz`): install gcc or clang"));
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

use sparsile_ir::settings::Settings;

use super::host_target::{host_cpu_features, native_macros};
use super::JitError;

/// The flags every kernel is compiled with (before the source file).
pub const FLAGS: &[&str] = &[
    "-O3",
    "-march=native",
    "-shared",
    "-fPIC",
    "-std=c99",
    "-ffp-contract=fast",
];

/// Flags added after [`FLAGS`] when the compiler is GCC (it predefines `__GNUC__` and
/// not `__clang__`): keep the backend's loops from becoming `memset`/`memcpy` idioms.
pub const GCC_FLAGS: &[&str] = &["-fno-tree-loop-distribute-patterns"];

/// The libraries every kernel is linked with (after the source file).
pub const LIBS: &[&str] = &["-lm"];

/// A C compiler that ran `--version` successfully.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiler {
    /// The command as configured (first word of the setting); this is what runs, so
    /// wrappers that look at their own name keep working.
    command: String,
    /// Its resolved path (symbolic links followed), for the identity; the command itself
    /// when it is not found on `PATH` but still runs.
    path: PathBuf,
    /// Extra arguments from the setting (words after the first).
    extra_args: Vec<String>,
    /// First line of `--version`.
    version: String,
    /// What `-march=native` resolves to here (see [`super::host_target`]).
    target: String,
}

impl Compiler {
    /// Finds the compiler named by `settings.cc` (default `cc`) and checks that it runs.
    pub fn detect(settings: &Settings) -> Result<Compiler, JitError> {
        let setting = settings.cc.clone().unwrap_or_else(|| "cc".to_string());
        let mut words = setting.split_whitespace().map(str::to_string);
        let command = words.next().ok_or(JitError::EmptyCompilerCommand)?;
        let extra_args: Vec<String> = words.collect();
        let path = resolve(&command).unwrap_or_else(|| PathBuf::from(&command));
        let output = Command::new(&command)
            .args(&extra_args)
            .arg("--version")
            .output()
            .map_err(|e| JitError::NoCompiler {
                tried: setting.clone(),
                detail: e.to_string(),
            })?;
        if !output.status.success() {
            return Err(JitError::NoCompiler {
                tried: setting.clone(),
                detail: format!(
                    "`--version` exited with {}: {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr).trim()
                ),
            });
        }
        let text = String::from_utf8_lossy(&output.stdout);
        let version = text.lines().next().unwrap_or("").trim().to_string();
        let target = format!(
            "cpu: {}\nnative: {}",
            host_cpu_features(),
            native_macros(&command, &extra_args)
        );
        Ok(Compiler {
            command,
            path,
            extra_args,
            version,
            target,
        })
    }

    /// The resolved path of the compiler.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The first line of `--version`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// What identifies this compiler in cache keys: resolved path, extra arguments and
    /// version line.
    pub fn identity(&self) -> String {
        format!(
            "{} {} | {}",
            self.path.display(),
            self.extra_args.join(" "),
            self.version
        )
    }

    /// The host CPU's feature flags and the macros the compiler predefines under
    /// `-march=native`: what the `-march=native` among the [`flags`](Self::flags) means
    /// on this machine, part of every cache key.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Every flag of a kernel compile, in order, except the file names: the extra
    /// arguments of the setting, [`FLAGS`], [`GCC_FLAGS`] with GCC, then [`LIBS`].
    pub fn flags(&self) -> Vec<String> {
        self.extra_args
            .iter()
            .cloned()
            .chain(FLAGS.iter().map(|s| s.to_string()))
            .chain(self.compiler_flags().iter().map(|s| s.to_string()))
            .chain(LIBS.iter().map(|s| s.to_string()))
            .collect()
    }

    /// Whether the compiler is GCC: its `-march=native` macros (in [`target`](Self::target))
    /// define `__GNUC__` and not `__clang__` (which defines it too).
    pub fn is_gcc(&self) -> bool {
        self.target.contains("#define __GNUC__ ") && !self.target.contains("#define __clang__ ")
    }

    /// The flags that depend on which compiler this is: [`GCC_FLAGS`] with GCC.
    fn compiler_flags(&self) -> &'static [&'static str] {
        if self.is_gcc() {
            GCC_FLAGS
        } else {
            &[]
        }
    }

    /// Compiles the C file `source` into the shared object `object`. On failure the
    /// error holds the compiler's stderr and the source path.
    pub fn compile(&self, source: &Path, object: &Path) -> Result<(), JitError> {
        self.run(FLAGS, source, object, None, source)
    }

    /// Compiles `source_name` into `object_name`, both inside the folder `dir`, running
    /// the compiler there (the object then holds no folder name, so two compiles of one
    /// source in different folders give the same bytes). Errors name `shown_source`.
    pub(crate) fn compile_in(
        &self,
        dir: &Path,
        source_name: &str,
        object_name: &str,
        shown_source: &Path,
    ) -> Result<(), JitError> {
        self.run(
            FLAGS,
            Path::new(source_name),
            Path::new(object_name),
            Some(dir),
            shown_source,
        )
    }

    fn run(
        &self,
        flags: &[&str],
        source: &Path,
        object: &Path,
        dir: Option<&Path>,
        shown_source: &Path,
    ) -> Result<(), JitError> {
        let mut cmd = Command::new(&self.command);
        if let Some(dir) = dir {
            cmd.current_dir(dir);
        }
        cmd.args(&self.extra_args)
            .args(flags)
            .args(self.compiler_flags())
            .arg("-o")
            .arg(object)
            .arg(source)
            .args(LIBS);
        let shown = format!("{cmd:?}").replace('"', "");
        let output = cmd.output().map_err(|e| JitError::NoCompiler {
            tried: self.command.clone(),
            detail: e.to_string(),
        })?;
        if output.status.success() {
            Ok(())
        } else {
            Err(JitError::CompileFailed {
                command: shown,
                status: output.status.to_string(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
                source_path: shown_source.to_path_buf(),
            })
        }
    }
}

/// The first executable `command` on `PATH` (or `command` itself when it holds a path
/// separator), with symbolic links resolved.
fn resolve(command: &str) -> Option<PathBuf> {
    let candidate = |p: PathBuf| p.is_file().then(|| p.canonicalize().unwrap_or(p));
    if command.contains(std::path::MAIN_SEPARATOR) {
        return candidate(PathBuf::from(command));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find_map(|dir| candidate(dir.join(command)))
}
