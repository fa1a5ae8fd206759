//! NVRTC, the CUDA runtime compiler, loaded at run time: CUDA C++ source to a cubin for
//! one GPU architecture, with ptxas's report of each kernel's resources.
//!
//! The library comes from [`Settings::nvrtc`] (`SPARSILE_NVRTC`, a full path) when it is
//! set, and is then the only one tried; otherwise `libnvrtc.so.12`, `libnvrtc.so.13`,
//! then `libnvrtc.so`, from the loader's search path (NVRTC 12 and 13 export the same
//! entry points this module calls). When none loads the error is
//! [`CudaError::NvrtcMissing`], naming each library tried and how to install one
//! (`pip install nvidia-cuda-nvrtc-cu12`, then point `SPARSILE_NVRTC` at its
//! `libnvrtc.so.12`). A library is loaded once per process and stays loaded.
//!
//! Compiling needs no GPU and no driver. Every compile passes
//! `--gpu-architecture=<arch>` and `--ptxas-options=-v` ([`Nvrtc::options`]), and no
//! headers: the source must be self-contained, as the CUDA emitter's output is. Compiles
//! are serialised within the process.
//!
//! ```no_run
//! use sparsile_ir::settings::Settings;
//! use sparsile_runtime::cuda::Nvrtc;
//!
//! let nvrtc = Nvrtc::load(&Settings::from_env())?;
//! let src = "extern \"C\" __global__ void zero(float *x) { x[threadIdx.x] = 0.0f; }";
//! let cubin = nvrtc.compile(src, "zero.cu", "sm_80")?;
//! println!("NVRTC {:?}: {} bytes, {} registers", nvrtc.version(), cubin.bytes.len(), cubin.kernels[0].registers);
//! # Ok::<(), sparsile_runtime::cuda::CudaError>(())
//! ```

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sparsile_ir::settings::Settings;

use super::resources::{parse_ptxas_report, KernelResources};
use super::{Arch, CudaError};

/// The libraries tried when `SPARSILE_NVRTC` is not set.
pub const DEFAULT_NVRTC_NAMES: [&str; 3] = ["libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc.so"];

/// `NVRTC_ERROR_COMPILATION`: the source did not compile.
const NVRTC_ERROR_COMPILATION: c_int = 6;

/// `NVRTC_ERROR_INVALID_OPTION`: an option NVRTC refuses (its log says which).
const NVRTC_ERROR_INVALID_OPTION: c_int = 5;

/// A compiled cubin with NVRTC's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cubin {
    /// The architecture it was compiled for (`sm_80`).
    pub arch: String,
    /// The cubin (an ELF image), as `cuModuleLoadData` takes it.
    pub bytes: Vec<u8>,
    /// NVRTC's program log: warnings and the ptxas report.
    pub log: String,
    /// Each kernel's resources, from the ptxas report in `log`.
    pub kernels: Vec<KernelResources>,
}

impl Cubin {
    /// The resources of kernel `name`, if ptxas reported it.
    pub fn kernel(&self, name: &str) -> Option<&KernelResources> {
        self.kernels.iter().find(|k| k.name == name)
    }
}

type Program = *mut c_void;
type VersionFn = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;
type CountFn = unsafe extern "C" fn(*mut c_int) -> c_int;
type ArchsFn = unsafe extern "C" fn(*mut c_int) -> c_int;
type ErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;
type CreateFn = unsafe extern "C" fn(
    *mut Program,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> c_int;
type CompileFn = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> c_int;
type SizeFn = unsafe extern "C" fn(Program, *mut usize) -> c_int;
type ReadFn = unsafe extern "C" fn(Program, *mut c_char) -> c_int;
type DestroyFn = unsafe extern "C" fn(*mut Program) -> c_int;

/// The entry points this runtime calls, with their C signatures.
#[derive(Clone, Copy)]
struct Fns {
    version: VersionFn,
    num_archs: CountFn,
    archs: ArchsFn,
    error_string: ErrorStringFn,
    create: CreateFn,
    compile: CompileFn,
    log_size: SizeFn,
    log: ReadFn,
    cubin_size: SizeFn,
    cubin: ReadFn,
    destroy: DestroyFn,
}

/// A loaded NVRTC library.
pub struct Nvrtc {
    library: String,
    fns: Fns,
    version: (i32, i32),
    supported: Vec<u32>,
    /// Serialises compiles.
    lock: Mutex<()>,
    _lib: libloading::Library,
}

impl std::fmt::Debug for Nvrtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvrtc")
            .field("library", &self.library)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// Libraries loaded in this process, by the name or path they were loaded from.
static LOADED: Mutex<Vec<(PathBuf, Arc<Nvrtc>)>> = Mutex::new(Vec::new());

/// `RTLD_NODELETE`, which `libloading` does not export: NVRTC stays mapped for good.
#[cfg(all(unix, not(any(target_os = "macos", target_os = "ios"))))]
const RTLD_NODELETE: c_int = 0x1000;
#[cfg(any(target_os = "macos", target_os = "ios"))]
const RTLD_NODELETE: c_int = 0x80;

/// Opens one candidate library.
#[cfg(unix)]
fn open_library(path: &Path) -> Result<libloading::Library, String> {
    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
    // SAFETY: loading NVRTC runs its initialisers, which have no preconditions.
    unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) }
        .map(libloading::Library::from)
        .map_err(|e| e.to_string())
}

#[cfg(not(unix))]
fn open_library(_path: &Path) -> Result<libloading::Library, String> {
    Err("loading NVRTC is only supported on Unix-like systems".to_string())
}

impl Nvrtc {
    /// The NVRTC library `settings` names (see the module docs), loaded once per process.
    pub fn load(settings: &Settings) -> Result<Arc<Nvrtc>, CudaError> {
        let candidates: Vec<PathBuf> = match &settings.nvrtc {
            Some(path) => vec![path.clone()],
            None => DEFAULT_NVRTC_NAMES.iter().map(PathBuf::from).collect(),
        };
        let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
        for c in &candidates {
            if let Some((_, nvrtc)) = loaded.iter().find(|(p, _)| p == c) {
                return Ok(Arc::clone(nvrtc));
            }
        }
        let mut tried = Vec::new();
        for c in candidates {
            match open_library(&c) {
                Ok(lib) => {
                    let nvrtc = Arc::new(Nvrtc::from_library(lib, &c)?);
                    loaded.push((c, Arc::clone(&nvrtc)));
                    return Ok(nvrtc);
                }
                Err(reason) => tried.push(format!("{} ({reason})", c.display())),
            }
        }
        Err(CudaError::NvrtcMissing { tried })
    }

    fn from_library(lib: libloading::Library, path: &Path) -> Result<Nvrtc, CudaError> {
        let library = path.display().to_string();
        /// An entry point of `lib` as a function pointer of type `T`.
        ///
        /// # Safety
        /// `T` must be the C signature of the entry point `name`.
        unsafe fn get<T: Copy>(
            lib: &libloading::Library,
            library: &str,
            name: &'static str,
        ) -> Result<T, CudaError> {
            // SAFETY: the caller gives the symbol's signature; the library stays mapped
            // (NODELETE, and `Nvrtc` owns it).
            unsafe { lib.get::<T>(name.as_bytes()) }
                .map(|s| *s)
                .map_err(|e| CudaError::NvrtcSymbol {
                    library: library.to_string(),
                    symbol: name,
                    detail: e.to_string(),
                })
        }
        // SAFETY (each lookup): the type is the signature NVRTC's header declares.
        let fns = unsafe {
            Fns {
                version: get(&lib, &library, "nvrtcVersion")?,
                num_archs: get(&lib, &library, "nvrtcGetNumSupportedArchs")?,
                archs: get(&lib, &library, "nvrtcGetSupportedArchs")?,
                error_string: get(&lib, &library, "nvrtcGetErrorString")?,
                create: get(&lib, &library, "nvrtcCreateProgram")?,
                compile: get(&lib, &library, "nvrtcCompileProgram")?,
                log_size: get(&lib, &library, "nvrtcGetProgramLogSize")?,
                log: get(&lib, &library, "nvrtcGetProgramLog")?,
                cubin_size: get(&lib, &library, "nvrtcGetCUBINSize")?,
                cubin: get(&lib, &library, "nvrtcGetCUBIN")?,
                destroy: get(&lib, &library, "nvrtcDestroyProgram")?,
            }
        };
        let mut nvrtc = Nvrtc {
            library,
            fns,
            version: (0, 0),
            supported: Vec::new(),
            lock: Mutex::new(()),
            _lib: lib,
        };
        let (mut major, mut minor) = (0, 0);
        // SAFETY: both pointers are valid for one int each.
        nvrtc.check("nvrtcVersion", unsafe {
            (fns.version)(&mut major, &mut minor)
        })?;
        nvrtc.version = (major, minor);
        let mut count: c_int = 0;
        // SAFETY: the pointer is valid for one int.
        nvrtc.check("nvrtcGetNumSupportedArchs", unsafe {
            (fns.num_archs)(&mut count)
        })?;
        let mut archs = vec![0 as c_int; usize::try_from(count).unwrap_or(0)];
        if !archs.is_empty() {
            // SAFETY: `archs` has room for the `count` ints NVRTC reported.
            nvrtc.check("nvrtcGetSupportedArchs", unsafe {
                (fns.archs)(archs.as_mut_ptr())
            })?;
        }
        nvrtc.supported = archs
            .into_iter()
            .filter_map(|a| u32::try_from(a).ok())
            .collect();
        Ok(nvrtc)
    }

    /// The library it was loaded from (as named or given).
    pub fn library(&self) -> &str {
        &self.library
    }

    /// NVRTC's (major, minor) version.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// The architectures it compiles for, as numbers (`80` for `sm_80`).
    pub fn supported_archs(&self) -> &[u32] {
        &self.supported
    }

    /// The options every compile for `arch` passes.
    pub fn options(arch: &str) -> Vec<String> {
        vec![
            format!("--gpu-architecture={arch}"),
            "--ptxas-options=-v".to_string(),
        ]
    }

    /// The architecture to compile for to run on a device of compute capability
    /// `major.minor`: its own when NVRTC supports it, else the newest one the device
    /// runs (see [`Arch::best_for`]).
    pub fn arch_for(&self, major: u32, minor: u32) -> Result<Arch, CudaError> {
        let own = Arch::new(major, minor);
        if self.supported.is_empty() || self.supported.contains(&own.number()) {
            return Ok(own);
        }
        Arch::best_for(major, minor, &self.supported).ok_or_else(|| self.unsupported(own))
    }

    fn unsupported(&self, arch: Arch) -> CudaError {
        CudaError::UnsupportedArch {
            arch: arch.to_string(),
            nvrtc_version: format!("{}.{}", self.version.0, self.version.1),
            supported: self
                .supported
                .iter()
                .map(|&n| Arch::new(n / 10, n % 10).to_string())
                .collect(),
        }
    }

    /// NVRTC's description of result code `code`.
    fn error_text(&self, code: c_int) -> String {
        // SAFETY: NVRTC returns a static NUL-terminated string for every code (its own
        // text for unknown ones), or null, which is checked.
        let text = unsafe { (self.fns.error_string)(code) };
        if text.is_null() {
            return format!("NVRTC error {code}");
        }
        // SAFETY: non-null, NUL-terminated, static.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    }

    fn check(&self, call: &'static str, code: c_int) -> Result<(), CudaError> {
        if code == 0 {
            return Ok(());
        }
        Err(CudaError::Nvrtc {
            call,
            code,
            message: self.error_text(code),
        })
    }

    /// Compiles `source` (named `name` in diagnostics) to a cubin for `arch` (`sm_80`).
    /// A source NVRTC refuses is [`CudaError::Compile`] with its log.
    pub fn compile(&self, source: &str, name: &str, arch: &str) -> Result<Cubin, CudaError> {
        let parsed: Arch = arch.parse()?;
        if !self.supported.is_empty() && !self.supported.contains(&parsed.number()) {
            return Err(self.unsupported(parsed));
        }
        let src = CString::new(source).map_err(|_| CudaError::InvalidSource {
            reason: "it contains a NUL character".to_string(),
        })?;
        let file = CString::new(name).map_err(|_| CudaError::InvalidSource {
            reason: format!("its name {name:?} contains a NUL character"),
        })?;
        let options: Vec<CString> = Nvrtc::options(arch)
            .into_iter()
            .map(|o| CString::new(o).expect("options have no NUL (the arch parsed)"))
            .collect();
        let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let _serial = self.lock.lock().unwrap_or_else(|e| e.into_inner());

        let mut handle: Program = std::ptr::null_mut();
        // SAFETY: `src` and `file` are NUL-terminated and outlive the call; no headers.
        self.check("nvrtcCreateProgram", unsafe {
            (self.fns.create)(
                &mut handle,
                src.as_ptr(),
                file.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        })?;
        let program = ProgramGuard {
            nvrtc: self,
            handle,
        };
        // SAFETY: a live program; the options are NUL-terminated strings that outlive the
        // call, `option_ptrs.len()` of them.
        let rc = unsafe {
            (self.fns.compile)(
                program.handle,
                c_int::try_from(option_ptrs.len()).expect("two options"),
                option_ptrs.as_ptr(),
            )
        };
        let log = program.log()?;
        if rc == NVRTC_ERROR_COMPILATION || rc == NVRTC_ERROR_INVALID_OPTION {
            let log = if log.trim().is_empty() {
                self.error_text(rc)
            } else {
                log
            };
            return Err(CudaError::Compile {
                log,
                source_path: None,
            });
        }
        self.check("nvrtcCompileProgram", rc)?;
        let bytes = program.cubin()?;
        Ok(Cubin {
            arch: arch.to_string(),
            kernels: parse_ptxas_report(&log),
            bytes,
            log,
        })
    }
}

/// A live NVRTC program, destroyed on drop.
struct ProgramGuard<'a> {
    nvrtc: &'a Nvrtc,
    handle: Program,
}

impl ProgramGuard<'_> {
    /// Reads a byte array of the size `size` reports with `read`.
    fn read(
        &self,
        size_call: &'static str,
        size: SizeFn,
        read_call: &'static str,
        read: ReadFn,
    ) -> Result<Vec<u8>, CudaError> {
        let mut n = 0usize;
        // SAFETY: a live program and a valid pointer to one size_t.
        self.nvrtc
            .check(size_call, unsafe { size(self.handle, &mut n) })?;
        let mut bytes = vec![0u8; n.max(1)];
        // SAFETY: `bytes` has room for the `n` bytes NVRTC reported (at least one).
        self.nvrtc.check(read_call, unsafe {
            read(self.handle, bytes.as_mut_ptr().cast())
        })?;
        bytes.truncate(n);
        Ok(bytes)
    }

    /// The program log, without its terminating NUL.
    fn log(&self) -> Result<String, CudaError> {
        let f = self.nvrtc.fns;
        let bytes = self.read(
            "nvrtcGetProgramLogSize",
            f.log_size,
            "nvrtcGetProgramLog",
            f.log,
        )?;
        Ok(String::from_utf8_lossy(&bytes)
            .trim_end_matches('\0')
            .to_string())
    }

    /// The cubin.
    fn cubin(&self) -> Result<Vec<u8>, CudaError> {
        let f = self.nvrtc.fns;
        let bytes = self.read("nvrtcGetCUBINSize", f.cubin_size, "nvrtcGetCUBIN", f.cubin)?;
        if bytes.is_empty() {
            return Err(CudaError::Nvrtc {
                call: "nvrtcGetCUBIN",
                code: 0,
                message: "NVRTC produced an empty cubin".to_string(),
            });
        }
        Ok(bytes)
    }
}

impl Drop for ProgramGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle came from nvrtcCreateProgram and is destroyed only here.
        unsafe { (self.nvrtc.fns.destroy)(&mut self.handle) };
    }
}

/// Compiles `source` for each of `archs` without a device (for tests and CI), with the
/// NVRTC library `SPARSILE_NVRTC` names (or the default ones). No cache is involved.
///
/// ```no_run
/// let src = "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }";
/// let cubins = sparsile_runtime::cuda::compile_check(src, &["sm_80", "sm_90"])?;
/// assert!(cubins.iter().all(|c| c.kernels.iter().all(|k| k.spill_stores == 0)));
/// # Ok::<(), sparsile_runtime::cuda::CudaError>(())
/// ```
pub fn compile_check(source: &str, archs: &[&str]) -> Result<Vec<Cubin>, CudaError> {
    let nvrtc = Nvrtc::load(&Settings::from_env())?;
    archs
        .iter()
        .map(|arch| nvrtc.compile(source, "compile_check.cu", arch))
        .collect()
}
