//! The kernel cache folder: found, created private, and refused when someone else could
//! write into it.
//!
//! Sparsile loads native code from this folder, so whoever can write there can run code
//! in every process that uses it. [`private_cache_dir`] therefore:
//!
//! - takes the folder from [`Settings::cache_dir`] (`SPARSILE_CACHE_DIR`,
//!   `$XDG_CACHE_HOME/sparsile`, `$HOME/.cache/sparsile`), else from the home folder the
//!   password database gives the effective user; there is no shared default (a folder in
//!   the temporary directory could be created first by another user), so without any of
//!   these it is [`JitError::NoCacheDir`];
//! - creates a missing folder (and missing parents) with mode `0700`;
//! - refuses ([`JitError::UnsafeCacheDir`]) a folder that is not a directory, is owned by
//!   another user, or is writable by its group or by others, and a folder any of whose
//!   ancestors (symbolic links resolved) is owned by a user other than the effective user
//!   or root, or is writable by others without the sticky bit (which would let them rename
//!   the cache away and put their own in its place).
//!
//! Precondition: a Unix-like system (elsewhere the error is
//! [`JitError::UnsupportedPlatform`]).
//!
//! ```
//! use sparsile_ir::settings::Settings;
//! use sparsile_runtime::jit::{private_cache_dir, JitError};
//! # #[cfg(unix)] {
//! use std::os::unix::fs::PermissionsExt;
//! let tmp = tempfile::tempdir().unwrap();
//! let settings = Settings { cache_dir: Some(tmp.path().join("kernels")), ..Settings::default() };
//! let dir = private_cache_dir(&settings).unwrap();
//! assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
//!
//! std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
//! let err = private_cache_dir(&settings).unwrap_err();
//! assert!(matches!(err, JitError::UnsafeCacheDir { .. }), "{err}");
//! # }
//! ```

use std::path::{Path, PathBuf};

use sparsile_ir::settings::Settings;

use super::JitError;

/// The cache folder of `settings`, created when missing and checked private.
pub fn private_cache_dir(settings: &Settings) -> Result<PathBuf, JitError> {
    let dir = cache_dir_location(settings)?;
    ensure_private(&dir)?;
    Ok(dir)
}

/// Where the cache folder of `settings` is, without creating or checking it.
pub fn cache_dir_location(settings: &Settings) -> Result<PathBuf, JitError> {
    match settings.cache_dir() {
        Some(dir) => Ok(dir),
        None => Ok(home_from_password_database()?
            .join(".cache")
            .join("sparsile")),
    }
}

/// The home folder of the effective user from the password database.
#[cfg(unix)]
fn home_from_password_database() -> Result<PathBuf, JitError> {
    use std::ffi::CStr;
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: an all-zero passwd is a valid value of a plain C struct.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; the buffer outlives the reads below.
    let rc = unsafe {
        libc::getpwuid_r(
            uid,
            &mut pwd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() || pwd.pw_dir.is_null() {
        return Err(JitError::NoCacheDir { uid });
    }
    // SAFETY: pw_dir points into `buf`, NUL-terminated by getpwuid_r.
    let home = unsafe { CStr::from_ptr(pwd.pw_dir) };
    let home = PathBuf::from(std::ffi::OsStr::from_bytes(home.to_bytes()));
    if !home.is_absolute() {
        return Err(JitError::NoCacheDir { uid });
    }
    Ok(home)
}

#[cfg(not(unix))]
fn home_from_password_database() -> Result<PathBuf, JitError> {
    Err(JitError::UnsupportedPlatform)
}

/// Creates `dir` (mode `0700`) when missing and checks that only the effective user (and
/// root) can change it or any folder above it.
#[cfg(unix)]
pub(crate) fn ensure_private(dir: &Path) -> Result<(), JitError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};

    let unsafe_dir = |path: &Path, reason: String| JitError::UnsafeCacheDir {
        path: path.to_path_buf(),
        reason,
    };
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| JitError::Io {
                what: "cannot create the cache folder",
                path: dir.to_path_buf(),
                source,
            })?;
    }
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    let meta = std::fs::metadata(dir).map_err(|source| JitError::Io {
        what: "cannot read the cache folder",
        path: dir.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(unsafe_dir(dir, "it is not a directory".into()));
    }
    if meta.uid() != me {
        return Err(unsafe_dir(
            dir,
            format!("it is owned by user {}, not by user {me}", meta.uid()),
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(unsafe_dir(
            dir,
            format!(
                "its mode {:o} lets its group or others write into it (chmod 700 it)",
                meta.mode() & 0o7777
            ),
        ));
    }
    let real = dir.canonicalize().map_err(|source| JitError::Io {
        what: "cannot resolve the cache folder",
        path: dir.to_path_buf(),
        source,
    })?;
    for ancestor in real.ancestors().skip(1) {
        let meta = std::fs::metadata(ancestor).map_err(|source| JitError::Io {
            what: "cannot read a folder above the cache folder",
            path: ancestor.to_path_buf(),
            source,
        })?;
        if meta.uid() != me && meta.uid() != 0 {
            return Err(unsafe_dir(
                dir,
                format!(
                    "the folder above it, `{}`, is owned by user {}, who could replace the cache",
                    ancestor.display(),
                    meta.uid()
                ),
            ));
        }
        let sticky = meta.mode() & 0o1000 != 0;
        if meta.mode() & 0o002 != 0 && !sticky {
            return Err(unsafe_dir(
                dir,
                format!(
                    "the folder above it, `{}`, is writable by every user and not sticky, so anyone could replace the cache",
                    ancestor.display()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(not(unix))]
pub(crate) fn ensure_private(_dir: &Path) -> Result<(), JitError> {
    Err(JitError::UnsupportedPlatform)
}
