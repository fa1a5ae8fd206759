//! The on-disk cache of compiled kernels.
//!
//! A kernel's key is the SHA-256 of its C source, the compiler's
//! [identity](super::Compiler::identity) and the compile [flags](super::Compiler::flags);
//! its object lives at `<dir>/<first 2 hex digits>/<hash>.so`, beside the source it was
//! built from (`<hash>.c`, kept for inspection and for compile errors).
//!
//! Writes are atomic: the source and the object are written under unique temporary names
//! in the final directory and then renamed into place, so a reader sees either no object
//! or a complete one, and several processes compiling the same kernel at once all
//! succeed and leave one valid object (the last rename wins; the objects are equivalent).
//!
//! ```no_run
//! use sparsile_ir::settings::Settings;
//! use sparsile_runtime::jit::{Cache, CacheOutcome};
//!
//! let cache = Cache::new(&Settings::from_env())?;
//! let src = "#include <stdint.h>\nint64_t sparsile_abi_version(void) { return 1; }\n";
//! let (first, _) = cache.compile_cached(src)?;
//! let (again, outcome) = cache.compile_cached(src)?;
//! assert_eq!((first, outcome), (again, CacheOutcome::Hit));
//! # Ok::<(), sparsile_runtime::jit::JitError>(())
//! ```

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use sparsile_ir::settings::Settings;

use super::{Compiler, JitError};

/// Whether [`Cache::compile_cached`] found the object or built it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CacheOutcome {
    /// The object was already in the cache.
    Hit,
    /// The object was compiled now.
    Miss,
}

/// A compiler together with the folder its objects are cached in.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
    compiler: Compiler,
}

/// Distinguishes temporary files of threads of one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Cache {
    /// Detects the compiler of `settings` and uses `settings.cache_dir()`.
    pub fn new(settings: &Settings) -> Result<Cache, JitError> {
        Ok(Cache::with_compiler(
            settings.cache_dir(),
            Compiler::detect(settings)?,
        ))
    }

    /// A cache in `dir` using `compiler`.
    pub fn with_compiler(dir: PathBuf, compiler: Compiler) -> Cache {
        Cache { dir, compiler }
    }

    /// The cache folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The compiler objects are built with.
    pub fn compiler(&self) -> &Compiler {
        &self.compiler
    }

    /// The hexadecimal SHA-256 key of `source` under this compiler and its flags. Each
    /// part is length-prefixed, so no two different triples hash the same bytes.
    pub fn key(&self, source: &str) -> String {
        let mut h = Sha256::new();
        let mut part = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        part(source.as_bytes());
        part(self.compiler.identity().as_bytes());
        part(self.compiler.flags().join(" ").as_bytes());
        h.finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    }

    /// Where the object of `source` is (or would be) cached.
    pub fn object_path(&self, source: &str) -> PathBuf {
        let key = self.key(source);
        self.dir.join(&key[..2]).join(format!("{key}.so"))
    }

    /// The cached object of `source`, compiling it first when it is not cached.
    pub fn compile_cached(&self, source: &str) -> Result<(PathBuf, CacheOutcome), JitError> {
        let object = self.object_path(source);
        if object.is_file() {
            return Ok((object, CacheOutcome::Hit));
        }
        self.compile_fresh(source)
    }

    /// Compiles `source` and replaces its cached object, whether or not there is one
    /// (for an object that exists but does not load, e.g. written by a foreign tool).
    pub fn compile_fresh(&self, source: &str) -> Result<(PathBuf, CacheOutcome), JitError> {
        let key = self.key(source);
        let sub = self.dir.join(&key[..2]);
        let object = sub.join(format!("{key}.so"));
        fs::create_dir_all(&sub).map_err(|source| JitError::Io {
            what: "cannot create the cache folder",
            path: sub.clone(),
            source,
        })?;
        let tag = format!(
            "{}.{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let source_path = sub.join(format!("{key}.c"));
        let temp_source = sub.join(format!(".{key}.{tag}.tmp.c"));
        let temp_object = sub.join(format!(".{key}.{tag}.tmp.so"));
        write_atomic(&temp_source, &source_path, source.as_bytes())?;
        let built = self.compiler.compile(&source_path, &temp_object);
        if let Err(e) = built {
            let _ = fs::remove_file(&temp_object);
            return Err(e);
        }
        fs::rename(&temp_object, &object).map_err(|source| {
            let _ = fs::remove_file(&temp_object);
            JitError::Io {
                what: "cannot move the compiled kernel into the cache as",
                path: object.clone(),
                source,
            }
        })?;
        Ok((object, CacheOutcome::Miss))
    }
}

/// Writes `bytes` to `temp`, then renames it to `dest`.
fn write_atomic(temp: &Path, dest: &Path, bytes: &[u8]) -> Result<(), JitError> {
    fs::write(temp, bytes).map_err(|source| JitError::Io {
        what: "cannot write",
        path: temp.to_path_buf(),
        source,
    })?;
    fs::rename(temp, dest).map_err(|source| {
        let _ = fs::remove_file(temp);
        JitError::Io {
            what: "cannot rename the kernel source to",
            path: dest.to_path_buf(),
            source,
        }
    })
}
