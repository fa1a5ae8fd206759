//! Compiles generated C with the system compiler (`$CC`, default `cc`), loads the shared
//! object and runs every phase through the kernel ABI, splitting parallel phases into
//! chunks run in reverse order (work items must be independent).

use std::ffi::c_void;
use std::path::Path;
use std::process::Command;

use sparsile_codegen::CSource;
use sparsile_ir::settings::Settings;

/// The data bound to one ABI buffer slot.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    /// f16 or bf16 elements, as their bits.
    U16(Vec<u16>),
    /// A scratch slot: the kernel allocates it, the slot is null.
    Scratch,
}

impl Data {
    fn ptr(&mut self) -> *mut c_void {
        match self {
            Data::F32(v) => v.as_mut_ptr().cast(),
            Data::F64(v) => v.as_mut_ptr().cast(),
            Data::I32(v) => v.as_mut_ptr().cast(),
            Data::I64(v) => v.as_mut_ptr().cast(),
            Data::U16(v) => v.as_mut_ptr().cast(),
            Data::Scratch => std::ptr::null_mut(),
        }
    }
}

/// The C compiler command, when one runs here.
pub fn compiler() -> Option<String> {
    let cc = Settings::from_env().cc.unwrap_or_else(|| "cc".to_string());
    let ok = Command::new(&cc)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    ok.then_some(cc)
}

fn write_source(dir: &Path, code: &str) -> std::path::PathBuf {
    let path = dir.join("kernel.c");
    std::fs::write(&path, code).expect("write kernel.c");
    path
}

/// Compiles `code` with `-std=c99 -O2 -Wall -Wextra -Werror -pedantic` (syntax and
/// warnings only); the compiler's messages on failure.
pub fn check_compiles(cc: &str, code: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = write_source(dir.path(), code);
    let out = Command::new(cc)
        .args([
            "-std=c99",
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-fsyntax-only",
        ])
        .arg(&src)
        .output()
        .expect("run the C compiler");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// A compiled and loaded kernel.
pub struct Kernel {
    lib: libloading::Library,
    pub so_path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

type AbiVersion = unsafe extern "C" fn() -> i64;
type NumPhases = unsafe extern "C" fn() -> i64;
type Extent = unsafe extern "C" fn(i64, *const *mut c_void, *const i64) -> i64;
type Run = unsafe extern "C" fn(i64, *const *mut c_void, *const i64, i64, i64) -> i32;

impl Kernel {
    pub fn compile(cc: &str, src: &CSource) -> Kernel {
        Kernel::compile_with(cc, src, &[])
    }

    /// Compiles with `-Wall -Werror` and the `extra` flags.
    pub fn compile_with(cc: &str, src: &CSource, extra: &[&str]) -> Kernel {
        let dir = tempfile::tempdir().expect("temp dir");
        let c = write_source(dir.path(), &src.code);
        let so_path = dir.path().join("kernel.so");
        let out = Command::new(cc)
            .args(["-std=c99", "-O2", "-Wall", "-Werror", "-shared", "-fPIC"])
            .args(extra)
            .arg("-o")
            .arg(&so_path)
            .arg(&c)
            .arg("-lm")
            .output()
            .expect("run the C compiler");
        assert!(
            out.status.success(),
            "C compile failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            src.code
        );
        // SAFETY: the library is the one just compiled; its initialisers are trivial.
        let lib = unsafe { libloading::Library::new(&so_path) }.expect("load kernel.so");
        Kernel {
            lib,
            so_path,
            _dir: dir,
        }
    }

    pub fn num_phases(&self) -> i64 {
        // SAFETY: the symbol has the ABI's signature.
        unsafe {
            let f = self.lib.get::<NumPhases>(b"sparsile_num_phases").unwrap();
            f()
        }
    }

    /// Runs every phase; parallel phases in chunks of `chunk` work items, last chunk
    /// first.
    pub fn run(&self, buffers: &mut [Data], params: &[i64], chunk: i64) {
        let ptrs: Vec<*mut c_void> = buffers.iter_mut().map(Data::ptr).collect();
        // SAFETY: the symbols have the ABI's signatures; the buffers are as long as the
        // kernel's length expressions say (checked by the callers' construction).
        unsafe {
            let version = self.lib.get::<AbiVersion>(b"sparsile_abi_version").unwrap();
            assert_eq!(version(), sparsile_codegen::ABI_VERSION);
            let extent = self.lib.get::<Extent>(b"sparsile_phase_extent").unwrap();
            let run = self.lib.get::<Run>(b"sparsile_phase_run").unwrap();
            for ph in 0..self.num_phases() {
                let n = extent(ph, ptrs.as_ptr(), params.as_ptr());
                assert!(n >= 0, "phase {ph} extent {n}");
                let starts: Vec<i64> = (0..n).step_by(chunk.max(1) as usize).collect();
                for &b in starts.iter().rev() {
                    let e = (b + chunk).min(n);
                    assert_eq!(run(ph, ptrs.as_ptr(), params.as_ptr(), b, e), 0);
                }
            }
            assert_ne!(
                run(self.num_phases(), ptrs.as_ptr(), params.as_ptr(), 0, 1),
                0,
                "an unknown phase is an error"
            );
        }
    }
}

/// The function symbols a shared object defines and exports (`nm -D --defined-only`),
/// or `None` when `nm` does not run here.
pub fn exported_functions(so: &Path) -> Option<Vec<String>> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(so)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace().rev();
            let name = parts.next()?;
            let kind = parts.next()?;
            (kind == "T").then(|| name.to_string())
        })
        .collect();
    names.sort();
    Some(names)
}
