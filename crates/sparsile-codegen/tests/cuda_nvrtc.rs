//! Every expected CUDA file (`tests/cuda/*.cu`) compiles with NVRTC to a cubin for
//! `sm_80` and for `sm_90`, without warnings and without register spills, and defines
//! every kernel its function has.
//!
//! NVRTC is loaded at run time from the path in `SPARSILE_NVRTC` (the full path of
//! `libnvrtc.so.12`); when the variable is unset the test says it skipped and passes.
//! Run with `--nocapture` to see the registers ptxas gives each kernel.

use std::ffi::{c_char, c_int, CStr, CString};
use std::path::PathBuf;

use libloading::Library;
use sparsile_codegen::emit_cuda;
use sparsile_ir::loops::Func;

const ARCHITECTURES: [&str; 2] = ["sm_80", "sm_90"];

type Program = *mut std::ffi::c_void;

/// The few NVRTC entry points the check needs.
struct Nvrtc {
    lib: Library,
}

impl Nvrtc {
    fn open(path: &str) -> Nvrtc {
        // SAFETY: loading NVRTC runs its initialisers, which have no preconditions.
        let lib = unsafe { Library::new(path) }
            .unwrap_or_else(|e| panic!("SPARSILE_NVRTC={path}: cannot load NVRTC: {e}"));
        Nvrtc { lib }
    }

    fn symbol<T: Copy>(&self, name: &str) -> T {
        // SAFETY: every call site names an NVRTC function with its C signature.
        unsafe {
            *self
                .lib
                .get::<T>(name.as_bytes())
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        }
    }

    fn error_text(&self, code: c_int) -> String {
        let f: unsafe extern "C" fn(c_int) -> *const c_char = self.symbol("nvrtcGetErrorString");
        // SAFETY: NVRTC returns a static NUL-terminated string for any code.
        unsafe { CStr::from_ptr(f(code)) }
            .to_string_lossy()
            .into_owned()
    }

    /// Compiles `source` for `arch`: the cubin's size and the program log, or the log
    /// (with the error) when compiling fails.
    fn compile(&self, name: &str, source: &str, arch: &str) -> Result<(usize, String), String> {
        type Create = unsafe extern "C" fn(
            *mut Program,
            *const c_char,
            *const c_char,
            c_int,
            *const *const c_char,
            *const *const c_char,
        ) -> c_int;
        type Compile = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> c_int;
        type Size = unsafe extern "C" fn(Program, *mut usize) -> c_int;
        type Read = unsafe extern "C" fn(Program, *mut c_char) -> c_int;
        type Destroy = unsafe extern "C" fn(*mut Program) -> c_int;
        let create: Create = self.symbol("nvrtcCreateProgram");
        let compile: Compile = self.symbol("nvrtcCompileProgram");
        let log_size: Size = self.symbol("nvrtcGetProgramLogSize");
        let log: Read = self.symbol("nvrtcGetProgramLog");
        let cubin_size: Size = self.symbol("nvrtcGetCUBINSize");
        let cubin: Read = self.symbol("nvrtcGetCUBIN");
        let destroy: Destroy = self.symbol("nvrtcDestroyProgram");

        let src = CString::new(source).expect("no NUL in generated code");
        let file = CString::new(format!("{name}.cu")).unwrap();
        let options: Vec<CString> = [
            format!("--gpu-architecture={arch}"),
            "--ptxas-options=-v".to_string(),
        ]
        .into_iter()
        .map(|o| CString::new(o).unwrap())
        .collect();
        let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let mut prog: Program = std::ptr::null_mut();
        // SAFETY: the pointers are valid NUL-terminated strings that outlive the calls,
        // the output buffers have the sizes NVRTC reported, and `prog` is destroyed once.
        unsafe {
            let rc = create(
                &mut prog,
                src.as_ptr(),
                file.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            );
            if rc != 0 {
                return Err(format!("nvrtcCreateProgram: {}", self.error_text(rc)));
            }
            let rc = compile(prog, option_ptrs.len() as c_int, option_ptrs.as_ptr());
            let mut n = 0usize;
            log_size(prog, &mut n);
            let mut text = vec![0u8; n.max(1)];
            log(prog, text.as_mut_ptr().cast());
            let text = String::from_utf8_lossy(&text)
                .trim_end_matches('\0')
                .to_string();
            let result = if rc != 0 {
                Err(format!("{}:\n{text}", self.error_text(rc)))
            } else {
                let mut size = 0usize;
                let rc = cubin_size(prog, &mut size);
                let mut bytes = vec![0u8; size.max(1)];
                if rc == 0 && size > 0 && cubin(prog, bytes.as_mut_ptr().cast()) == 0 {
                    Ok((size, text))
                } else {
                    Err(format!("no cubin ({}):\n{text}", self.error_text(rc)))
                }
            };
            destroy(&mut prog);
            result
        }
    }
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("cuda")
}

/// The kernel each `Compiling entry function 'K'` line of the ptxas log names, with the
/// registers, spill stores and spill loads reported after it.
fn ptxas_report(log: &str) -> Vec<(String, u32, u32, u32)> {
    let number_before = |line: &str, what: &str| -> Option<u32> {
        let end = line.find(what)?;
        line[..end].split_whitespace().last()?.parse().ok()
    };
    let mut out: Vec<(String, u32, u32, u32)> = Vec::new();
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            out.push((name, 0, 0, 0));
        } else if let Some(last) = out.last_mut() {
            if let Some(n) = number_before(line, " bytes spill stores") {
                last.2 = n;
            }
            if let Some(n) = number_before(line, " bytes spill loads") {
                last.3 = n;
            }
            if let Some(n) = number_before(line, " registers") {
                last.1 = n;
            }
        }
    }
    out
}

#[test]
fn every_expected_cuda_file_compiles_with_nvrtc_without_spills() {
    // A test-only variable, read here directly: the path of the NVRTC library.
    let Some(path) = std::env::var_os("SPARSILE_NVRTC") else {
        println!("SPARSILE_NVRTC is not set: NVRTC compile check skipped");
        return;
    };
    let nvrtc = Nvrtc::open(&path.to_string_lossy());
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            (p.extension()? == "cu").then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    assert!(!names.is_empty());
    for name in &names {
        let source = std::fs::read_to_string(dir().join(format!("{name}.cu"))).unwrap();
        let flat = std::fs::read_to_string(dir().join(format!("{name}.flat"))).unwrap();
        let func: Func = flat.parse().unwrap();
        let kernels = emit_cuda(&func).unwrap().kernels;
        for arch in ARCHITECTURES {
            let (size, log) = nvrtc
                .compile(name, &source, arch)
                .unwrap_or_else(|log| panic!("{name}.cu does not compile for {arch}: {log}"));
            assert!(
                !log.to_lowercase().contains("warning"),
                "{name}.cu, {arch}: warnings:\n{log}"
            );
            let report = ptxas_report(&log);
            for k in &kernels {
                assert!(
                    report.iter().any(|(n, ..)| *n == k.symbol),
                    "{name}.cu, {arch}: ptxas compiled no kernel `{}`:\n{log}",
                    k.symbol
                );
            }
            for (kernel, registers, stores, loads) in &report {
                assert!(
                    *stores == 0 && *loads == 0,
                    "{name}.cu, {arch}: `{kernel}` spills ({stores} bytes stored, {loads} loaded):\n{log}"
                );
                println!("{arch} {kernel}: {registers} registers, no spills");
            }
            println!("{arch} {name}.cu: cubin of {size} bytes");
        }
    }
}

#[test]
fn the_ptxas_report_is_read_per_kernel() {
    let log = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'a' for 'sm_80'
ptxas info    : Function properties for a
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem, 368 bytes cmem[0]
ptxas info    : Compiling entry function 'b' for 'sm_80'
ptxas info    : Function properties for b
ptxas         .     24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 368 bytes cmem[0]
";
    assert_eq!(
        ptxas_report(log),
        [("a".to_string(), 40, 0, 0), ("b".to_string(), 255, 8, 12)]
    );
}
