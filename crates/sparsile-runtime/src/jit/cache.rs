//! The on-disk cache of compiled kernels.
//!
//! A kernel's key is the SHA-256 of its C source, the compiler's
//! [identity](super::Compiler::identity), the compile [flags](super::Compiler::flags) and
//! what `-march=native` means on this machine ([target](super::Compiler::target): the
//! CPU's feature flags and the compiler's predefined macros), so a cache shared between
//! different CPUs never hands one of them code it cannot run. Its object lives at
//! `<dir>/<first 2 hex digits>/<hash>.so`, beside the source it was built from
//! (`<hash>.c`, kept for inspection and for compile errors) and its integrity record
//! (`<hash>.sum`: the key, the object's size and the SHA-256 of its bytes).
//!
//! Trust: the folder is private ([`private_cache_dir`](super::private_cache_dir): created
//! `0700`, refused when another user could write into it). Within it, an object is used
//! only when its record names its key and its size and content hash match: a truncated
//! object, one copied over from another key, one without a record (a foreign tool's, or
//! from an older Sparsile) or one that is a symbolic link is rebuilt, never loaded.
//!
//! Writes are atomic and follow no links: each compile works in a fresh folder created
//! exclusively (`mkdir`, mode `0700`) inside the cache, writes the source there with
//! `O_CREAT | O_EXCL | O_NOFOLLOW`, compiles, hashes the object, then renames source,
//! object and record into place (a rename replaces a link, it never writes through it).
//! Several processes compiling the same kernel at once all succeed and leave one valid
//! object; a reader that sees an object and a record from different compiles rebuilds.
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
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use sparsile_ir::settings::Settings;

use super::cache_dir::{ensure_private, private_cache_dir};
use super::{Compiler, JitError};

/// First line of an integrity record.
const RECORD_MAGIC: &str = "sparsile-kernel-record 1";

/// Integrity records longer than this are not records.
const MAX_RECORD_BYTES: u64 = 1024;

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
    /// Detects the compiler of `settings` and uses its [private cache
    /// folder](super::private_cache_dir).
    pub fn new(settings: &Settings) -> Result<Cache, JitError> {
        let compiler = Compiler::detect(settings)?;
        Ok(Cache {
            dir: private_cache_dir(settings)?,
            compiler,
        })
    }

    /// A cache in `dir` using `compiler`; `dir` is created `0700` when missing and refused
    /// when someone else could write into it (see [`private_cache_dir`](super::private_cache_dir)).
    pub fn with_compiler(dir: PathBuf, compiler: Compiler) -> Result<Cache, JitError> {
        ensure_private(&dir)?;
        Ok(Cache { dir, compiler })
    }

    /// The cache folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The compiler objects are built with.
    pub fn compiler(&self) -> &Compiler {
        &self.compiler
    }

    /// The hexadecimal SHA-256 key of `source` under this compiler, its flags and its
    /// target. Each part is length-prefixed, so no two different tuples hash the same
    /// bytes.
    pub fn key(&self, source: &str) -> String {
        let mut h = Sha256::new();
        let mut part = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        part(source.as_bytes());
        part(self.compiler.identity().as_bytes());
        part(self.compiler.flags().join(" ").as_bytes());
        part(self.compiler.target().as_bytes());
        hex(&h.finalize())
    }

    /// Where the object of `source` is (or would be) cached.
    pub fn object_path(&self, source: &str) -> PathBuf {
        let key = self.key(source);
        self.dir.join(&key[..2]).join(format!("{key}.so"))
    }

    /// Where the integrity record of the object of `source` is (or would be).
    pub fn record_path(&self, source: &str) -> PathBuf {
        self.object_path(source).with_extension("sum")
    }

    /// The cached object of `source`, compiling it first when it is not cached or when
    /// the cached one does not match its integrity record.
    pub fn compile_cached(&self, source: &str) -> Result<(PathBuf, CacheOutcome), JitError> {
        let key = self.key(source);
        let object = self.dir.join(&key[..2]).join(format!("{key}.so"));
        if matches_record(&object, &object.with_extension("sum"), &key) {
            return Ok((object, CacheOutcome::Hit));
        }
        self.compile_fresh(source)
    }

    /// Compiles `source` and replaces its cached object and record, whether or not there
    /// are some (for an object that passes its record but does not load).
    pub fn compile_fresh(&self, source: &str) -> Result<(PathBuf, CacheOutcome), JitError> {
        let key = self.key(source);
        let sub = self.dir.join(&key[..2]);
        create_sub_dir(&sub)?;
        let work = WorkDir::create(&sub, &key)?;
        let (c_name, so_name, sum_name) = (
            format!("{key}.c"),
            format!("{key}.so"),
            format!("{key}.sum"),
        );
        let source_path = sub.join(&c_name);
        let object = sub.join(&so_name);
        write_new(&work.0.join(&c_name), source.as_bytes())?;
        let built = self
            .compiler
            .compile_in(&work.0, &c_name, &so_name, &source_path);
        // The source is kept for inspection, after a failed compile too.
        rename(&work.0.join(&c_name), &source_path)?;
        built?;
        let (size, digest) = hash_file(&work.0.join(&so_name))?.ok_or_else(|| JitError::Io {
            what: "the compiler left no regular file at",
            path: work.0.join(&so_name),
            source: std::io::Error::other("missing or not a regular file"),
        })?;
        write_new(
            &work.0.join(&sum_name),
            format!("{RECORD_MAGIC}\nkey {key}\nsize {size}\nsha256 {digest}\n").as_bytes(),
        )?;
        rename(&work.0.join(&so_name), &object)?;
        rename(&work.0.join(&sum_name), &object.with_extension("sum"))?;
        Ok((object, CacheOutcome::Miss))
    }
}

/// Lower-case hexadecimal.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `object` is a regular file of the effective user whose size and SHA-256 are
/// those `record` gives for `key`.
fn matches_record(object: &Path, record: &Path, key: &str) -> bool {
    let Ok(Some(text)) = read_small(record) else {
        return false;
    };
    let mut lines = text.lines();
    let expected = (
        lines.next(),
        lines.next().and_then(|l| l.strip_prefix("key ")),
        lines.next().and_then(|l| l.strip_prefix("size ")),
        lines.next().and_then(|l| l.strip_prefix("sha256 ")),
        lines.next(),
    );
    let (Some(RECORD_MAGIC), Some(k), Some(size), Some(digest), None) = expected else {
        return false;
    };
    if k != key {
        return false;
    }
    match hash_file(object) {
        Ok(Some((found_size, found_digest))) => {
            size.parse::<u64>() == Ok(found_size) && found_digest == digest
        }
        _ => false,
    }
}

/// Opens `path` for reading without following a final symbolic link; `None` when it is
/// missing, a link, not a regular file, or not the effective user's.
pub(crate) fn open_own_file(path: &Path) -> Result<Option<(fs::File, u64)>, JitError> {
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let Ok(file) = options.open(path) else {
        return Ok(None);
    };
    let meta = file.metadata().map_err(|source| JitError::Io {
        what: "cannot read the metadata of",
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.is_file() {
        return Ok(None);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid cannot fail.
        if meta.uid() != unsafe { libc::geteuid() } {
            return Ok(None);
        }
    }
    Ok(Some((file, meta.len())))
}

/// The text of a record file of at most [`MAX_RECORD_BYTES`].
pub(crate) fn read_small(path: &Path) -> Result<Option<String>, JitError> {
    let Some((file, len)) = open_own_file(path)? else {
        return Ok(None);
    };
    if len > MAX_RECORD_BYTES {
        return Ok(None);
    }
    let mut text = String::new();
    if file
        .take(MAX_RECORD_BYTES)
        .read_to_string(&mut text)
        .is_err()
    {
        return Ok(None);
    }
    Ok(Some(text))
}

/// Size and hexadecimal SHA-256 of the file at `path` (see [`open_own_file`]).
fn hash_file(path: &Path) -> Result<Option<(u64, String)>, JitError> {
    let Some((mut file, _)) = open_own_file(path)? else {
        return Ok(None);
    };
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(|source| JitError::Io {
            what: "cannot read",
            path: path.to_path_buf(),
            source,
        })?;
        if n == 0 {
            break;
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    Ok(Some((size, hex(&h.finalize()))))
}

/// Creates the sub-folder `sub` of the cache (mode `0700`) unless it is already a folder
/// (not a link to one).
pub(crate) fn create_sub_dir(sub: &Path) -> Result<(), JitError> {
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    match builder.create(sub) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            match fs::symlink_metadata(sub) {
                Ok(m) if m.is_dir() => Ok(()),
                _ => Err(JitError::UnsafeCacheDir {
                    path: sub.to_path_buf(),
                    reason: "it is not a directory (a link or a file is in its place)".into(),
                }),
            }
        }
        Err(source) => Err(JitError::Io {
            what: "cannot create the cache folder",
            path: sub.to_path_buf(),
            source,
        }),
    }
}

/// A folder of one compile, created exclusively and removed with everything left in it.
pub(crate) struct WorkDir(pub(crate) PathBuf);

impl WorkDir {
    pub(crate) fn create(sub: &Path, key: &str) -> Result<WorkDir, JitError> {
        let mut builder = fs::DirBuilder::new();
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mut last = None;
        for _ in 0..16 {
            let path = sub.join(format!(
                ".{}.{}.{}.{nanos:x}.tmp",
                &key[..16],
                std::process::id(),
                TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            match builder.create(&path) {
                Ok(()) => return Ok(WorkDir(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(source) => {
                    return Err(JitError::Io {
                        what: "cannot create a temporary folder in the cache",
                        path,
                        source,
                    })
                }
            }
        }
        Err(JitError::Io {
            what: "cannot create a temporary folder in the cache (every name was taken)",
            path: sub.to_path_buf(),
            source: last.unwrap_or_else(|| std::io::Error::other("name taken")),
        })
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Writes `bytes` to a new file at `path` (mode `0600`), failing when anything, a link
/// included, is already there.
pub(crate) fn write_new(path: &Path, bytes: &[u8]) -> Result<(), JitError> {
    use std::io::Write;
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    let io = |source| JitError::Io {
        what: "cannot write",
        path: path.to_path_buf(),
        source,
    };
    let mut file = options.open(path).map_err(io)?;
    file.write_all(bytes).map_err(io)
}

/// Renames `from` to `to` (replacing whatever is at `to`, a link itself included).
pub(crate) fn rename(from: &Path, to: &Path) -> Result<(), JitError> {
    fs::rename(from, to).map_err(|source| JitError::Io {
        what: "cannot move a compiled kernel file into the cache as",
        path: to.to_path_buf(),
        source,
    })
}
