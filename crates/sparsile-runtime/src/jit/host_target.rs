//! What `-march=native` means on this machine, for the kernel cache key.
//!
//! Kernels are compiled with `-march=native`, so an object is only valid on CPUs with the
//! instruction set extensions of the machine that built it. The literal flag says nothing
//! about them; the cache key includes instead:
//!
//! - the CPU's feature flags as the kernel reports them (`flags` on x86, `Features` on
//!   Arm, in `/proc/cpuinfo`; empty where there is no such file), and
//! - the macros the compiler predefines under `-march=native` (`cc -march=native -dM -E`
//!   on an empty file: `__AVX2__`, `__AVX512F__`, `__ARM_FEATURE_SVE`, …), which is
//!   exactly what the compiler resolved the flag to.
//!
//! Both are computed once per process (per compiler command for the second), so a cache
//! hit costs no extra compiler run after the first kernel.
//!
//! ```
//! let features = sparsile_runtime::jit::host_cpu_features();
//! # #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
//! assert!(features.split(' ').any(|f| f == "sse2"), "{features}");
//! ```

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// The CPU feature flags of this machine, sorted and space-separated (empty when the
/// system does not list them).
pub fn host_cpu_features() -> &'static str {
    static FEATURES: OnceLock<String> = OnceLock::new();
    FEATURES.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let line = text.lines().find_map(|l| {
            let (name, value) = l.split_once(':')?;
            matches!(name.trim(), "flags" | "Features").then_some(value)
        });
        let mut flags: Vec<&str> = line.unwrap_or("").split_whitespace().collect();
        flags.sort_unstable();
        flags.dedup();
        flags.join(" ")
    })
}

/// Predefined macros by (compiler command, extra arguments).
type MacrosByCommand = HashMap<(String, Vec<String>), String>;

/// The macros `command extra_args -march=native -dM -E` predefines, one `#define` a line,
/// sorted; empty when the compiler does not run or does not understand the flags (the
/// kernel compile then reports its own error).
pub(crate) fn native_macros(command: &str, extra_args: &[String]) -> String {
    static MEMO: OnceLock<Mutex<MacrosByCommand>> = OnceLock::new();
    let memo = MEMO.get_or_init(Default::default);
    let key = (command.to_string(), extra_args.to_vec());
    if let Some(found) = memo.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return found;
    }
    let output = Command::new(command)
        .args(extra_args)
        .args(["-march=native", "-dM", "-E", "-x", "c", "-"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    let macros = match output {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            let mut lines: Vec<&str> = text
                .lines()
                .map(str::trim)
                .filter(|l| l.starts_with("#define"))
                .collect();
            lines.sort_unstable();
            lines.join("\n")
        }
        _ => String::new(),
    };
    if let Ok(mut m) = memo.lock() {
        m.insert(key, macros.clone());
    }
    macros
}
