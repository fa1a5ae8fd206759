//! The on-disk cache of cubins, beside the CPU kernels' (see [`crate::jit::Cache`]) and
//! under the same trust rules.
//!
//! A cubin's key is the SHA-256 of its CUDA source, NVRTC's version, the architecture
//! and the compile options (each part length-prefixed). It lives at
//! `<cache>/cuda/<first 2 hex digits>/<key>.cubin`, with NVRTC's log (`<key>.log`, which
//! holds the ptxas report), the source (`<key>.cu`, kept for inspection and named in
//! compile errors) and an integrity record (`<key>.sum`: the key, and the size and
//! SHA-256 of the cubin and of the log). `<cache>` is the private cache folder of
//! [`private_cache_dir`](crate::jit::private_cache_dir) (`SPARSILE_CACHE_DIR`, …).
//!
//! Trust: the folders are private (created `0700`, refused when another user could
//! write into them). A cubin is handed out only when it and its log are regular files of
//! the effective user, reached without following a symbolic link, whose sizes and
//! hashes are those the record gives for this key; the bytes are read once and hashed
//! in memory, so what is checked is what is loaded. Anything else (a truncated cubin, a
//! foreign one, one without a record, a link) is recompiled and replaced, never loaded.
//!
//! Writes are atomic: each compile works in a fresh folder created exclusively inside
//! the cache, writes its files there with `O_CREAT | O_EXCL | O_NOFOLLOW`, then renames
//! the cubin, the log and last the record into place (a rename replaces a link, it never
//! writes through it). Concurrent compiles of one source all succeed.
//!
//! ```no_run
//! use sparsile_ir::settings::Settings;
//! use sparsile_runtime::cuda::CubinCache;
//! use sparsile_runtime::jit::CacheOutcome;
//!
//! let cache = CubinCache::new(&Settings::from_env())?;
//! let src = "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] += 1.0f; }";
//! let (first, _) = cache.compile_cached(src, "sm_80")?;
//! let (again, outcome) = cache.compile_cached(src, "sm_80")?;
//! assert_eq!((first, outcome), (again, CacheOutcome::Hit));
//! # Ok::<(), sparsile_runtime::cuda::CudaError>(())
//! ```

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use sparsile_ir::settings::Settings;

use super::nvrtc::{Cubin, Nvrtc};
use super::resources::parse_ptxas_report;
use super::{Arch, CudaError};
use crate::jit::cache::{
    create_sub_dir, hex, open_own_file, read_small, rename, write_new, WorkDir,
};
use crate::jit::cache_dir::{ensure_private, private_cache_dir};
use crate::jit::CacheOutcome;

/// First line of a cubin's integrity record.
const RECORD_MAGIC: &str = "sparsile-cubin-record 1";

/// Cached files larger than this are not read (no kernel's cubin or log comes close).
const MAX_FILE_BYTES: u64 = 1 << 30;

/// NVRTC together with the folder its cubins are cached in.
#[derive(Debug, Clone)]
pub struct CubinCache {
    dir: PathBuf,
    nvrtc: Arc<Nvrtc>,
}

/// What a record says about one cached file.
struct Expected<'a> {
    size: u64,
    sha256: &'a str,
}

impl CubinCache {
    /// Loads the NVRTC of `settings` and caches in the `cuda` folder of its [private
    /// cache folder](crate::jit::private_cache_dir).
    pub fn new(settings: &Settings) -> Result<CubinCache, CudaError> {
        let nvrtc = Nvrtc::load(settings)?;
        let dir = private_cache_dir(settings)?.join("cuda");
        CubinCache::with_nvrtc(dir, nvrtc)
    }

    /// A cache in `dir` (created `0700` when missing, refused when someone else could
    /// write into it) compiling with `nvrtc`.
    pub fn with_nvrtc(dir: PathBuf, nvrtc: Arc<Nvrtc>) -> Result<CubinCache, CudaError> {
        ensure_private(&dir)?;
        Ok(CubinCache { dir, nvrtc })
    }

    /// The cache folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The compiler.
    pub fn nvrtc(&self) -> &Arc<Nvrtc> {
        &self.nvrtc
    }

    /// The hexadecimal SHA-256 key of `source` compiled for `arch` by this NVRTC.
    pub fn key(&self, source: &str, arch: &str) -> String {
        let mut h = Sha256::new();
        let mut part = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        let (major, minor) = self.nvrtc.version();
        part(source.as_bytes());
        part(format!("nvrtc {major}.{minor}").as_bytes());
        part(arch.as_bytes());
        part(Nvrtc::options(arch).join("\n").as_bytes());
        hex(&h.finalize())
    }

    /// Where the cubin of `source` for `arch` is (or would be) cached.
    pub fn cubin_path(&self, source: &str, arch: &str) -> PathBuf {
        let key = self.key(source, arch);
        self.dir.join(&key[..2]).join(format!("{key}.cubin"))
    }

    /// Where the integrity record of that cubin is (or would be).
    pub fn record_path(&self, source: &str, arch: &str) -> PathBuf {
        self.cubin_path(source, arch).with_extension("sum")
    }

    /// The cubin of `source` for `arch`: the cached one when it matches its record,
    /// else compiled now (and cached).
    pub fn compile_cached(
        &self,
        source: &str,
        arch: &str,
    ) -> Result<(Cubin, CacheOutcome), CudaError> {
        let _: Arch = arch.parse()?;
        let key = self.key(source, arch);
        let cubin_path = self.dir.join(&key[..2]).join(format!("{key}.cubin"));
        if let Some((bytes, log)) = read_cached(&cubin_path, &key) {
            let cubin = Cubin {
                arch: arch.to_string(),
                kernels: parse_ptxas_report(&log),
                bytes,
                log,
            };
            return Ok((cubin, CacheOutcome::Hit));
        }
        self.compile_fresh(source, arch)
    }

    /// Compiles `source` for `arch` and replaces whatever is cached for it (for a cubin
    /// that passes its record but does not load).
    pub fn compile_fresh(
        &self,
        source: &str,
        arch: &str,
    ) -> Result<(Cubin, CacheOutcome), CudaError> {
        let _: Arch = arch.parse()?;
        let key = self.key(source, arch);
        let sub = self.dir.join(&key[..2]);
        create_sub_dir(&sub)?;
        let work = WorkDir::create(&sub, &key)?;
        let name = |ext: &str| format!("{key}.{ext}");
        let source_path = sub.join(name("cu"));
        write_new(&work.0.join(name("cu")), source.as_bytes())?;
        // Diagnostics name the source as it is kept in the cache.
        let compiled = self.nvrtc.compile(source, &name("cu"), arch);
        // The source is kept for inspection, after a failed compile too.
        rename(&work.0.join(name("cu")), &source_path)?;
        let cubin = match compiled {
            Ok(c) => c,
            Err(CudaError::Compile { log, .. }) => {
                return Err(CudaError::Compile {
                    log,
                    source_path: Some(source_path),
                })
            }
            Err(e) => return Err(e),
        };
        let digest = |bytes: &[u8]| hex(&Sha256::digest(bytes));
        let record = format!(
            "{RECORD_MAGIC}\nkey {key}\ncubin-size {}\ncubin-sha256 {}\nlog-size {}\nlog-sha256 {}\n",
            cubin.bytes.len(),
            digest(&cubin.bytes),
            cubin.log.len(),
            digest(cubin.log.as_bytes()),
        );
        write_new(&work.0.join(name("cubin")), &cubin.bytes)?;
        write_new(&work.0.join(name("log")), cubin.log.as_bytes())?;
        write_new(&work.0.join(name("sum")), record.as_bytes())?;
        for ext in ["cubin", "log", "sum"] {
            rename(&work.0.join(name(ext)), &sub.join(name(ext)))?;
        }
        Ok((cubin, CacheOutcome::Miss))
    }
}

/// The cubin at `cubin_path` and its log, when both match the record beside them for
/// `key`.
fn read_cached(cubin_path: &Path, key: &str) -> Option<(Vec<u8>, String)> {
    let text = read_small(&cubin_path.with_extension("sum")).ok()??;
    let mut lines = text.lines();
    if lines.next() != Some(RECORD_MAGIC) {
        return None;
    }
    let mut field = |name: &str| lines.next()?.strip_prefix(name)?.strip_prefix(' ');
    let (k, cubin_size, cubin_sha, log_size, log_sha) = (
        field("key")?,
        field("cubin-size")?,
        field("cubin-sha256")?,
        field("log-size")?,
        field("log-sha256")?,
    );
    if k != key || lines.next().is_some() {
        return None;
    }
    let cubin = read_verified(
        cubin_path,
        Expected {
            size: cubin_size.parse().ok()?,
            sha256: cubin_sha,
        },
    )?;
    let log = read_verified(
        &cubin_path.with_extension("log"),
        Expected {
            size: log_size.parse().ok()?,
            sha256: log_sha,
        },
    )?;
    Some((cubin, String::from_utf8(log).ok()?))
}

/// The bytes of `path` when it is a regular file of the effective user (not reached
/// through a link) of the expected size and SHA-256.
fn read_verified(path: &Path, expected: Expected<'_>) -> Option<Vec<u8>> {
    let (file, len) = open_own_file(path).ok()??;
    if len != expected.size || len > MAX_FILE_BYTES {
        return None;
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).ok()?);
    file.take(len + 1).read_to_end(&mut bytes).ok()?;
    if bytes.len() as u64 != expected.size || hex(&Sha256::digest(&bytes)) != expected.sha256 {
        return None;
    }
    Some(bytes)
}
