//! Errors of compiling, caching, loading and launching native kernels. Every variant
//! names the command, file, symbol or phase concerned.

use std::path::PathBuf;

use thiserror::Error;

/// A problem met by [`crate::jit`].
#[derive(Debug, Error)]
pub enum JitError {
    #[error("no C compiler found (tried `{tried}`): install gcc or clang, or set CC to one; the interpreter still works (cause: {detail})")]
    NoCompiler { tried: String, detail: String },

    #[error("the C compiler setting is empty: set CC to a compiler command such as `cc`")]
    EmptyCompilerCommand,

    #[error("`{command}` failed ({status}) compiling {source_path}:\n{stderr}")]
    CompileFailed {
        command: String,
        status: String,
        stderr: String,
        /// The generated source, kept for inspection.
        source_path: PathBuf,
    },

    #[error("{what} `{path}`: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("no kernel cache folder: SPARSILE_CACHE_DIR, XDG_CACHE_HOME and HOME are unset (or relative) and the password database gives user {uid} no home folder; set SPARSILE_CACHE_DIR to a folder only you can write")]
    NoCacheDir { uid: u32 },

    #[error("refusing the kernel cache folder `{path}`: {reason}; Sparsile loads native code from it, so it must be a folder only you can write (set SPARSILE_CACHE_DIR to one)")]
    UnsafeCacheDir { path: PathBuf, reason: String },

    #[error("cannot load compiled kernel `{path}`: {detail}")]
    Load { path: PathBuf, detail: String },

    #[error("compiled kernel `{path}` does not export `{symbol}`: {detail}")]
    MissingSymbol {
        path: PathBuf,
        symbol: &'static str,
        detail: String,
    },

    #[error(
        "compiled kernel `{path}` has ABI version {found}, this runtime speaks version {expected}"
    )]
    AbiVersion {
        path: PathBuf,
        found: i64,
        expected: i64,
    },

    #[error("phase {phase} reported extent {extent}, which is negative")]
    NegativeExtent { phase: usize, extent: i64 },

    #[error("the kernel reports {found} phases; a kernel has between 0 and 65536")]
    NegativePhaseCount { found: i64 },

    #[error("phase {phase} failed with code {code} on work items {begin}..{end}")]
    PhaseFailed {
        phase: usize,
        code: i32,
        begin: i64,
        end: i64,
    },

    #[error("phase {phase}: the kernel's chunk boundaries are invalid ({detail})")]
    BadBounds { phase: usize, detail: String },
    #[error("phase {phase} reports partition code {code}; known codes are 0, 1 and 2")]
    UnknownPartition { phase: usize, code: i64 },
    #[error("cannot start a thread pool of {threads} threads: {detail}")]
    ThreadPool { threads: usize, detail: String },

    #[error("a thread count of 0 was asked for; give at least 1")]
    ZeroThreads,

    #[error("a thread count of {threads} was asked for; the most is {max}")]
    TooManyThreads { threads: usize, max: usize },

    #[error("loading native code is supported on Unix-like systems only")]
    UnsupportedPlatform,
}
