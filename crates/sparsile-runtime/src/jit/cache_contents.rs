//! What the kernel cache holds, and clearing it: the listing behind `sparsile cache info`
//! and `sparsile.cache_info()`, the removal behind `sparsile cache clear` and
//! `sparsile.clear_cache()`.
//!
//! Only files the caches write themselves are counted or removed, recognised by their
//! place and name (see [`Cache`](super::Cache) and `CubinCache`):
//!
//! - CPU kernels: `<dir>/<xx>/<key>.so`, `.c` and `.sum`;
//! - CUDA kernels: `<dir>/cuda/<xx>/<key>.cubin`, `.log`, `.cu` and `.sum`;
//!
//! where `<key>` is 64 lower-case hexadecimal digits and `<xx>` its first two. Such a file
//! is taken only when it is a regular file of the effective user; a symbolic link (to a
//! file or a folder, in place of a file or of a `<xx>` folder), anything else named like
//! one, or another user's file is counted as *skipped* and left alone, and nothing is
//! followed through a link. Everything else in the folder is left as it is: the tuning
//! database (`tuning.jsonl`), the machine's roofline probe, the temporary folders of
//! compiles in progress and the `<xx>` folders themselves (a concurrent compile may be
//! about to write into one).
//!
//! Clearing is safe while other processes use the cache: a kernel already loaded stays
//! loaded (its file is unlinked, not changed), and a process that finds an object without
//! its record rebuilds it. The folder must pass the cache's own checks
//! ([`private_cache_dir`](super::private_cache_dir)) before anything in it is removed; a
//! folder that does not exist yet holds nothing and is not created.
//!
//! ```
//! use sparsile_ir::settings::Settings;
//! use sparsile_runtime::jit::{cache_info, clear_cache};
//! # #[cfg(unix)] {
//! let tmp = tempfile::tempdir().unwrap();
//! let settings = Settings { cache_dir: Some(tmp.path().join("kernels")), ..Settings::default() };
//! let info = cache_info(&settings).unwrap();
//! assert!(!info.exists);
//! assert_eq!(info.kernels(), 0);
//! assert_eq!(clear_cache(&settings).unwrap().files_removed, 0);
//! # }
//! ```

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sparsile_ir::settings::Settings;

use super::cache_dir::{cache_dir_location, ensure_private};
use super::JitError;

/// File extensions of the CPU kernel cache; the first is the kernel object.
const CPU_FILES: [&str; 3] = ["so", "c", "sum"];

/// File extensions of the CUDA kernel cache; the first is the kernel object.
const CUDA_FILES: [&str; 4] = ["cubin", "log", "cu", "sum"];

/// The folder, below the cache folder, of the CUDA kernel cache.
const CUDA_SUBDIR: &str = "cuda";

/// What the kernel cache folder holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheInfo {
    /// The cache folder (it may not exist yet).
    pub dir: PathBuf,
    /// Whether the folder exists.
    pub exists: bool,
    /// Why the folder fails the cache's ownership and permission checks (the cache then
    /// refuses to use it); `None` when it passes them or does not exist yet.
    pub problem: Option<String>,
    /// Compiled CPU kernels (`.so` objects).
    pub cpu_kernels: usize,
    /// Compiled CUDA kernels (`.cubin` objects).
    pub cuda_kernels: usize,
    /// Every cache file counted: objects, their sources, records and logs.
    pub files: usize,
    /// Total size of those files in bytes.
    pub bytes: u64,
    /// Modification time of the oldest kernel object.
    pub oldest: Option<SystemTime>,
    /// Modification time of the newest kernel object.
    pub newest: Option<SystemTime>,
    /// Entries named like cache files that are links, not regular files, or another
    /// user's: never counted, never removed.
    pub skipped: usize,
}

impl CacheInfo {
    /// Compiled kernels of both kinds.
    pub fn kernels(&self) -> usize {
        self.cpu_kernels + self.cuda_kernels
    }
}

/// What [`clear_cache`] removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClearReport {
    /// The cache folder.
    pub dir: PathBuf,
    /// Kernel objects removed (CPU and CUDA).
    pub kernels_removed: usize,
    /// Files removed: objects, sources, records and logs.
    pub files_removed: usize,
    /// Their total size in bytes.
    pub bytes_removed: u64,
    /// Entries named like cache files that were left alone (see [`CacheInfo::skipped`]).
    pub skipped: usize,
}

/// One cache file found by [`walk`].
struct Entry {
    path: PathBuf,
    bytes: u64,
    modified: Option<SystemTime>,
    is_object: bool,
}

/// Lists the kernel cache of `settings` without creating or changing anything.
pub fn cache_info(settings: &Settings) -> Result<CacheInfo, JitError> {
    let dir = cache_dir_location(settings)?;
    let mut info = CacheInfo {
        dir: dir.clone(),
        exists: false,
        problem: None,
        cpu_kernels: 0,
        cuda_kernels: 0,
        files: 0,
        bytes: 0,
        oldest: None,
        newest: None,
        skipped: 0,
    };
    if fs::symlink_metadata(&dir).is_err() {
        return Ok(info);
    }
    info.exists = true;
    match ensure_private(&dir) {
        Ok(()) => {}
        Err(JitError::UnsafeCacheDir { reason, .. }) => info.problem = Some(reason),
        Err(e) => info.problem = Some(e.to_string()),
    }
    if !fs::metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return Ok(info);
    }
    for (root, cuda) in roots(&dir) {
        info.skipped += walk(&root, cuda, |entry| {
            info.files += 1;
            info.bytes += entry.bytes;
            if entry.is_object {
                if cuda {
                    info.cuda_kernels += 1;
                } else {
                    info.cpu_kernels += 1;
                }
                if let Some(t) = entry.modified {
                    info.oldest = Some(info.oldest.map_or(t, |o| o.min(t)));
                    info.newest = Some(info.newest.map_or(t, |n| n.max(t)));
                }
            }
            Ok(())
        })?;
    }
    Ok(info)
}

/// Removes every compiled kernel, with its source, record and log, from the kernel cache
/// of `settings`. The folder must pass the cache's checks; one that does not exist yet is
/// left uncreated and reported empty.
pub fn clear_cache(settings: &Settings) -> Result<ClearReport, JitError> {
    let dir = cache_dir_location(settings)?;
    let mut report = ClearReport {
        dir: dir.clone(),
        kernels_removed: 0,
        files_removed: 0,
        bytes_removed: 0,
        skipped: 0,
    };
    if fs::symlink_metadata(&dir).is_err() {
        return Ok(report);
    }
    ensure_private(&dir)?;
    for (root, cuda) in roots(&dir) {
        report.skipped += walk(&root, cuda, |entry| {
            match fs::remove_file(&entry.path) {
                Ok(()) => {}
                // Removed meanwhile by another process: nothing left to do.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(source) => {
                    return Err(JitError::Io {
                        what: "cannot remove the cached kernel file",
                        path: entry.path.clone(),
                        source,
                    })
                }
            }
            report.files_removed += 1;
            report.bytes_removed += entry.bytes;
            report.kernels_removed += usize::from(entry.is_object);
            Ok(())
        })?;
    }
    Ok(report)
}

/// The two kernel caches in `dir`: their folders, and whether each is the CUDA one.
fn roots(dir: &Path) -> [(PathBuf, bool); 2] {
    [(dir.to_path_buf(), false), (dir.join(CUDA_SUBDIR), true)]
}

/// Calls `visit` on every file of the CPU (or, with `cuda`, the CUDA) kernel cache
/// below `root` (see the module docs); returns the number of entries skipped. A missing
/// CUDA folder holds nothing; one that is a link (or not a folder) is skipped whole.
fn walk(
    root: &Path,
    cuda: bool,
    mut visit: impl FnMut(&Entry) -> Result<(), JitError>,
) -> Result<usize, JitError> {
    let extensions: &[&str] = if cuda { &CUDA_FILES } else { &CPU_FILES };
    let mut skipped = 0;
    if cuda {
        match fs::symlink_metadata(root) {
            Err(_) => return Ok(0),
            Ok(m) if !m.is_dir() => return Ok(1),
            Ok(_) => {}
        }
    }
    for sub in read_dir(root)? {
        let Some(prefix) = sub.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        if !is_hex(&prefix, 2) {
            continue;
        }
        match fs::symlink_metadata(&sub) {
            Ok(m) if m.is_dir() => {}
            _ => {
                skipped += 1;
                continue;
            }
        }
        for path in read_dir(&sub)? {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let Some((key, extension)) = name.split_once('.') else {
                continue;
            };
            if !is_hex(key, 64) || !key.starts_with(&prefix) || !extensions.contains(&extension) {
                continue;
            }
            let Ok(meta) = fs::symlink_metadata(&path) else {
                continue; // removed meanwhile
            };
            if !meta.is_file() || !owned_by_me(&meta) {
                skipped += 1;
                continue;
            }
            visit(&Entry {
                bytes: meta.len(),
                modified: meta.modified().ok(),
                is_object: extension == extensions[0],
                path,
            })?;
        }
    }
    Ok(skipped)
}

/// The entries of folder `dir`, sorted.
fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, JitError> {
    let io = |source| JitError::Io {
        what: "cannot list the cache folder",
        path: dir.to_path_buf(),
        source,
    };
    let mut paths = Vec::new();
    for entry in fs::read_dir(dir).map_err(io)? {
        paths.push(entry.map_err(io)?.path());
    }
    paths.sort();
    Ok(paths)
}

/// Whether `s` is `len` lower-case hexadecimal digits.
fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(unix)]
fn owned_by_me(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid cannot fail.
    meta.uid() == unsafe { libc::geteuid() }
}

#[cfg(not(unix))]
fn owned_by_me(_meta: &fs::Metadata) -> bool {
    false
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::{symlink, PermissionsExt};

    use super::*;

    const KEY_A: &str = "ab00000000000000000000000000000000000000000000000000000000000001";
    const KEY_B: &str = "cd00000000000000000000000000000000000000000000000000000000000002";

    fn settings(dir: &Path) -> Settings {
        Settings {
            cache_dir: Some(dir.to_path_buf()),
            ..Settings::default()
        }
    }

    fn write(path: &Path, bytes: usize) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, vec![b'x'; bytes]).unwrap();
    }

    /// A cache with one CPU kernel (3 files, 100 + 10 + 5 bytes), one CUDA kernel (4
    /// files, 200 + 20 + 10 + 5 bytes) and files the cache does not own.
    fn populated() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        let sub = dir.join("ab");
        write(&sub.join(format!("{KEY_A}.so")), 100);
        write(&sub.join(format!("{KEY_A}.c")), 10);
        write(&sub.join(format!("{KEY_A}.sum")), 5);
        let cuda = dir.join("cuda").join("cd");
        write(&cuda.join(format!("{KEY_B}.cubin")), 200);
        write(&cuda.join(format!("{KEY_B}.log")), 20);
        write(&cuda.join(format!("{KEY_B}.cu")), 10);
        write(&cuda.join(format!("{KEY_B}.sum")), 5);
        // Not the cache's: the tuning database, a foreign file, a key in the wrong
        // folder, an upper-case key, a temporary folder of a compile.
        write(&dir.join("tuning.jsonl"), 7);
        write(&sub.join("notes.txt"), 7);
        write(&sub.join(format!("{KEY_B}.so")), 7);
        write(&sub.join(format!("{}.so", KEY_A.to_uppercase())), 7);
        write(&sub.join(".ab00000000000000.1.2.3.tmp").join("x.so"), 7);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        tmp
    }

    #[test]
    fn info_counts_only_the_caches_files() {
        let tmp = populated();
        let info = cache_info(&settings(&tmp.path().join("cache"))).unwrap();
        assert!(info.exists);
        assert_eq!(info.problem, None);
        assert_eq!((info.cpu_kernels, info.cuda_kernels), (1, 1));
        assert_eq!(info.files, 7);
        assert_eq!(info.bytes, 115 + 235);
        assert_eq!(info.skipped, 0);
        assert!(info.oldest.is_some() && info.oldest <= info.newest);
    }

    #[test]
    fn info_of_a_missing_folder_creates_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("none");
        let info = cache_info(&settings(&dir)).unwrap();
        assert!(!info.exists);
        assert_eq!((info.kernels(), info.files, info.bytes), (0, 0, 0));
        assert_eq!(clear_cache(&settings(&dir)).unwrap().files_removed, 0);
        assert!(!dir.exists());
    }

    #[test]
    fn info_names_a_folder_others_can_write() {
        let tmp = populated();
        let dir = tmp.path().join("cache");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let info = cache_info(&settings(&dir)).unwrap();
        let problem = info
            .problem
            .clone()
            .expect("a world-writable folder fails the checks");
        assert!(problem.contains("mode 777"), "{problem}");
        assert_eq!(info.kernels(), 2);
    }

    #[test]
    fn clear_removes_kernels_and_leaves_everything_else() {
        let tmp = populated();
        let dir = tmp.path().join("cache");
        let report = clear_cache(&settings(&dir)).unwrap();
        assert_eq!(report.kernels_removed, 2);
        assert_eq!(report.files_removed, 7);
        assert_eq!(report.bytes_removed, 350);
        assert!(!dir.join("ab").join(format!("{KEY_A}.so")).exists());
        assert!(!dir.join("cuda/cd").join(format!("{KEY_B}.cubin")).exists());
        for kept in [
            "tuning.jsonl".to_string(),
            "ab/notes.txt".into(),
            format!("ab/{KEY_B}.so"),
            format!("ab/{}.so", KEY_A.to_uppercase()),
            "ab/.ab00000000000000.1.2.3.tmp/x.so".into(),
        ] {
            assert!(dir.join(&kept).exists(), "{kept} was removed");
        }
        let info = cache_info(&settings(&dir)).unwrap();
        assert_eq!((info.kernels(), info.files), (0, 0));
        assert_eq!(clear_cache(&settings(&dir)).unwrap().files_removed, 0);
    }

    #[test]
    fn clear_never_follows_or_removes_links() {
        let tmp = populated();
        let dir = tmp.path().join("cache");
        let outside = tmp.path().join("outside");
        write(&outside.join(format!("{KEY_A}.so")), 50);
        write(&outside.join(format!("{KEY_B}.cubin")), 50);
        // A link in place of an object, of a `<xx>` folder, and of the CUDA folder.
        let victim = outside.join(format!("{KEY_A}.so"));
        fs::remove_file(dir.join("ab").join(format!("{KEY_A}.so"))).unwrap();
        symlink(&victim, dir.join("ab").join(format!("{KEY_A}.so"))).unwrap();
        let ef = format!("ef{}", &KEY_A[2..]);
        write(&outside.join("ef").join(format!("{ef}.so")), 50);
        symlink(outside.join("ef"), dir.join("ef")).unwrap();
        fs::rename(dir.join("cuda"), tmp.path().join("cuda-moved")).unwrap();
        symlink(tmp.path().join("cuda-moved"), dir.join("cuda")).unwrap();

        let info = cache_info(&settings(&dir)).unwrap();
        assert_eq!((info.cpu_kernels, info.cuda_kernels), (0, 0));
        assert_eq!(info.skipped, 3);
        let report = clear_cache(&settings(&dir)).unwrap();
        assert_eq!(report.kernels_removed, 0);
        assert_eq!(report.files_removed, 2); // the `.c` and `.sum` beside the link
        assert_eq!(report.skipped, 3);
        assert!(victim.exists());
        assert!(outside.join("ef").join(format!("{ef}.so")).exists());
        assert!(tmp
            .path()
            .join("cuda-moved/cd")
            .join(format!("{KEY_B}.cubin"))
            .exists());
        assert!(fs::symlink_metadata(dir.join("ab").join(format!("{KEY_A}.so"))).is_ok());
    }

    #[test]
    fn clear_refuses_a_folder_that_fails_the_checks() {
        let tmp = populated();
        let dir = tmp.path().join("cache");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o775)).unwrap();
        let err = clear_cache(&settings(&dir)).unwrap_err();
        assert!(matches!(err, JitError::UnsafeCacheDir { .. }), "{err}");
        assert!(dir.join("ab").join(format!("{KEY_A}.so")).exists());
    }
}
