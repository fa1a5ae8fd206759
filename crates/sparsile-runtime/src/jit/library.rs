//! Loading a compiled kernel and finding its ABI entry points.
//!
//! The object is opened with `RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE`: every symbol is
//! resolved at load time (a missing one is a load error, not a crash later), the kernel's
//! symbols do not leak into other kernels, and the code is never unmapped, so function
//! pointers taken from it stay valid for the life of the process.
//!
//! Precondition: the object implements the kernel ABI (see [`crate::jit`]). The seven
//! symbols are looked up and `sparsile_abi_version()` must return [`ABI_VERSION`].

use std::ffi::c_void;
use std::path::{Path, PathBuf};

use super::{JitError, PhaseCalibration};

/// The ABI version this runtime calls.
pub const ABI_VERSION: i64 = 3;

/// `int64_t sparsile_abi_version(void)`.
pub type AbiVersionFn = unsafe extern "C" fn() -> i64;
/// `int64_t sparsile_num_phases(void)`.
pub type NumPhasesFn = unsafe extern "C" fn() -> i64;
/// `int64_t sparsile_phase_extent(int64_t ph, void *const *buffers, const int64_t *params)`.
pub type PhaseExtentFn =
    unsafe extern "C" fn(ph: i64, buffers: *const *mut c_void, params: *const i64) -> i64;
/// `int32_t sparsile_phase_run(int64_t ph, void *const *buffers, const int64_t *params,
/// int64_t begin, int64_t end)`.
pub type PhaseRunFn = unsafe extern "C" fn(
    ph: i64,
    buffers: *const *mut c_void,
    params: *const i64,
    begin: i64,
    end: i64,
) -> i32;
/// `int64_t sparsile_phase_partition(int64_t ph)`: 0 static, 1 dynamic, 2 balanced.
pub type PhasePartitionFn = unsafe extern "C" fn(ph: i64) -> i64;
/// `int32_t sparsile_phase_bounds(int64_t ph, void *const *buffers, const int64_t *params,
/// int64_t n, int64_t *bounds)`: the `n + 1` chunk boundaries of a phase.
pub type PhaseBoundsFn = unsafe extern "C" fn(
    ph: i64,
    buffers: *const *mut c_void,
    params: *const i64,
    n: i64,
    bounds: *mut i64,
) -> i32;

/// `int64_t sparsile_phase_work(int64_t ph, void *const *buffers, const int64_t *params)`:
/// the estimated work of a parallel phase, or -1 when unknown.
pub type PhaseWorkFn =
    unsafe extern "C" fn(ph: i64, buffers: *const *mut c_void, params: *const i64) -> i64;

/// A loaded kernel object and its entry points.
#[derive(Debug)]
pub struct Library {
    path: PathBuf,
    /// Keeps the object loaded (it is never unmapped anyway: `RTLD_NODELETE`).
    #[cfg(unix)]
    _lib: libloading::os::unix::Library,
    num_phases: NumPhasesFn,
    phase_extent: PhaseExtentFn,
    phase_run: PhaseRunFn,
    phase_partition: PhasePartitionFn,
    phase_bounds: PhaseBoundsFn,
    phase_work: PhaseWorkFn,
    /// The learned time per work unit of each phase.
    calibration: Vec<PhaseCalibration>,
}

/// More phases than this is not a kernel this runtime generated.
const MAX_PHASES: i64 = 1 << 16;

/// `RTLD_NODELETE`, which `libloading` does not export.
#[cfg(any(target_os = "macos", target_os = "ios"))]
const RTLD_NODELETE: std::ffi::c_int = 0x80;
#[cfg(all(unix, not(any(target_os = "macos", target_os = "ios"))))]
const RTLD_NODELETE: std::ffi::c_int = 0x1000;

impl Library {
    /// Loads the object at `path` and checks its ABI version.
    #[cfg(unix)]
    pub fn load(path: &Path) -> Result<Library, JitError> {
        use libloading::os::unix::{Library as Lib, RTLD_LOCAL, RTLD_NOW};
        // SAFETY: loading runs the object's initialisers; kernels are generated C with
        // no constructors (or hand-written objects under the same contract).
        let lib = unsafe { Lib::open(Some(path), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) }.map_err(
            |e| JitError::Load {
                path: path.to_path_buf(),
                detail: e.to_string(),
            },
        )?;
        // SAFETY (all seven lookups): the ABI fixes these symbols' C signatures, which the
        // function pointer types above spell out; the object stays mapped (NODELETE).
        let abi_version: AbiVersionFn = unsafe { symbol(&lib, path, "sparsile_abi_version")? };
        let num_phases: NumPhasesFn = unsafe { symbol(&lib, path, "sparsile_num_phases")? };
        let phase_extent: PhaseExtentFn = unsafe { symbol(&lib, path, "sparsile_phase_extent")? };
        let phase_run: PhaseRunFn = unsafe { symbol(&lib, path, "sparsile_phase_run")? };
        // SAFETY: a function of no arguments per the ABI.
        let found = unsafe { abi_version() };
        if found != ABI_VERSION {
            return Err(JitError::AbiVersion {
                path: path.to_path_buf(),
                found,
                expected: ABI_VERSION,
            });
        }
        let phase_partition: PhasePartitionFn =
            unsafe { symbol(&lib, path, "sparsile_phase_partition")? };
        let phase_bounds: PhaseBoundsFn = unsafe { symbol(&lib, path, "sparsile_phase_bounds")? };
        let phase_work: PhaseWorkFn = unsafe { symbol(&lib, path, "sparsile_phase_work")? };
        // SAFETY: no arguments, per the ABI.
        let phases = unsafe { num_phases() };
        if !(0..=MAX_PHASES).contains(&phases) {
            return Err(JitError::NegativePhaseCount { found: phases });
        }
        let calibration = (0..phases).map(|_| PhaseCalibration::default()).collect();
        Ok(Library {
            path: path.to_path_buf(),
            _lib: lib,
            num_phases,
            phase_extent,
            phase_run,
            phase_partition,
            phase_bounds,
            phase_work,
            calibration,
        })
    }

    /// Loading native code needs `dlopen`.
    #[cfg(not(unix))]
    pub fn load(_path: &Path) -> Result<Library, JitError> {
        Err(JitError::UnsupportedPlatform)
    }

    /// The file the kernel was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `sparsile_num_phases()`, checked to be non-negative.
    pub fn num_phases(&self) -> Result<usize, JitError> {
        // SAFETY: no arguments, per the ABI.
        let n = unsafe { (self.num_phases)() };
        usize::try_from(n).map_err(|_| JitError::NegativePhaseCount { found: n })
    }

    /// The entry point `sparsile_phase_extent`.
    pub fn phase_extent_fn(&self) -> PhaseExtentFn {
        self.phase_extent
    }

    /// The entry point `sparsile_phase_run`.
    pub fn phase_run_fn(&self) -> PhaseRunFn {
        self.phase_run
    }

    /// The entry point `sparsile_phase_partition`.
    pub fn phase_partition_fn(&self) -> PhasePartitionFn {
        self.phase_partition
    }

    /// The entry point `sparsile_phase_bounds`.
    pub fn phase_bounds_fn(&self) -> PhaseBoundsFn {
        self.phase_bounds
    }

    /// The learned time per work unit of phase `ph` (`None` past the last phase).
    pub fn phase_calibration(&self, ph: usize) -> Option<&PhaseCalibration> {
        self.calibration.get(ph)
    }

    /// The entry point `sparsile_phase_work`.
    pub fn phase_work_fn(&self) -> PhaseWorkFn {
        self.phase_work
    }
}

/// Looks up `name` in `lib` as a `T`.
///
/// # Safety
/// `T` must be the symbol's true type.
#[cfg(unix)]
unsafe fn symbol<T: Copy>(
    lib: &libloading::os::unix::Library,
    path: &Path,
    name: &'static str,
) -> Result<T, JitError> {
    // SAFETY: forwarded to the caller.
    let sym = unsafe { lib.get::<T>(name.as_bytes()) }.map_err(|e| JitError::MissingSymbol {
        path: path.to_path_buf(),
        symbol: name,
        detail: e.to_string(),
    })?;
    Ok(*sym)
}
