//! What ptxas reports about each kernel (`--ptxas-options=-v`): registers, spills, static
//! shared memory and stack.
//!
//! The report is part of NVRTC's program log. NVRTC 13.0 leaves it out for the
//! architecture of the GPU the process has opened (seen on an H200: no report for sm_90
//! once the CUDA driver was initialised, a full one for sm_80, and for sm_90 before the
//! driver was up); a kernel built for that GPU then takes its resources from the driver
//! ([`KernelResources::from_driver`]). For each kernel ptxas writes a line
//! `Compiling entry function 'NAME' for 'sm_XX'`, then `Function properties for NAME`
//! with the stack frame and spills, then `Used N registers, …, M bytes smem, …`.
//! Properties of other (non-inlined device) functions that appear in between are not
//! counted for the kernel.
//!
//! ```
//! use sparsile_runtime::cuda::parse_ptxas_report;
//! let log = "\
//! ptxas info    : Compiling entry function 'scale' for 'sm_80'
//! ptxas info    : Function properties for scale
//!     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//! ptxas info    : Used 12 registers, 1024 bytes smem, 368 bytes cmem[0]
//! ";
//! let report = parse_ptxas_report(log);
//! assert_eq!(report[0].name, "scale");
//! assert_eq!((report[0].registers, report[0].shared_bytes), (12, 1024));
//! ```

/// The resources ptxas gave one kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct KernelResources {
    /// The kernel's (`extern "C"`) name.
    pub name: String,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes stored to local memory because registers ran out.
    pub spill_stores: u32,
    /// Bytes loaded back from local memory because registers ran out.
    pub spill_loads: u32,
    /// Static shared memory per block, in bytes.
    pub shared_bytes: u32,
    /// Stack frame per thread, in bytes (from the driver: all local memory per thread,
    /// spills included).
    pub stack_bytes: u32,
    /// Read from the driver's function attributes (`cuFuncGetAttribute`) because ptxas's
    /// report was missing: `registers`, `shared_bytes` and `stack_bytes` are the driver's,
    /// the spill counts are unknown (0; a spill shows in `stack_bytes`).
    pub from_driver: bool,
}

/// The number written just before `what` in `line` (`"24 bytes spill stores"`).
fn number_before(line: &str, what: &str) -> Option<u32> {
    let end = line.find(what)?;
    line[..end].split_whitespace().last()?.parse().ok()
}

/// The text between the first pair of single quotes after `marker` in `line`.
fn quoted_after<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    let rest = &line[line.find(marker)? + marker.len()..];
    let rest = rest.strip_prefix('\'')?;
    Some(&rest[..rest.find('\'')?])
}

/// The kernels the ptxas report in `log` describes, in the order it lists them.
pub fn parse_ptxas_report(log: &str) -> Vec<KernelResources> {
    let mut out: Vec<KernelResources> = Vec::new();
    // Whether the lines now read describe the last kernel in `out`.
    let mut on_kernel = false;
    for line in log.lines() {
        if let Some(name) = quoted_after(line, "Compiling entry function ") {
            out.push(KernelResources {
                name: name.to_string(),
                ..KernelResources::default()
            });
            on_kernel = true;
            continue;
        }
        if let Some(rest) = line.split("Function properties for ").nth(1) {
            let name = rest.trim();
            on_kernel = out.last().is_some_and(|k| k.name == name);
            continue;
        }
        if line.contains("Compiling ") {
            // Another function (a device function compiled on its own).
            on_kernel = false;
            continue;
        }
        let Some(kernel) = out.last_mut().filter(|_| on_kernel) else {
            continue;
        };
        if let Some(n) = number_before(line, " bytes stack frame") {
            kernel.stack_bytes = n;
        }
        if let Some(n) = number_before(line, " bytes spill stores") {
            kernel.spill_stores = n;
        }
        if let Some(n) = number_before(line, " bytes spill loads") {
            kernel.spill_loads = n;
        }
        if let Some(n) = number_before(line, " registers") {
            kernel.registers = n;
        }
        if let Some(n) = number_before(line, " bytes smem") {
            kernel.shared_bytes = n;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kernel_gets_its_own_lines() {
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
        let report = parse_ptxas_report(log);
        assert_eq!(
            report,
            [
                KernelResources {
                    name: "a".into(),
                    registers: 40,
                    spill_stores: 0,
                    spill_loads: 0,
                    shared_bytes: 1024,
                    stack_bytes: 0,
                    from_driver: false,
                },
                KernelResources {
                    name: "b".into(),
                    registers: 255,
                    spill_stores: 8,
                    spill_loads: 12,
                    shared_bytes: 0,
                    stack_bytes: 24,
                    from_driver: false,
                },
            ]
        );
    }

    #[test]
    fn a_device_function_in_between_is_not_counted() {
        let log = "\
ptxas info    : Function properties for helper
ptxas         .     16 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for helper
ptxas         .     16 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Function properties for k
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, 368 bytes cmem[0]
";
        let report = parse_ptxas_report(log);
        assert_eq!(report.len(), 1);
        assert_eq!(
            (
                report[0].registers,
                report[0].spill_stores,
                report[0].stack_bytes
            ),
            (8, 0, 0)
        );
    }

    #[test]
    fn a_log_without_a_report_has_no_kernels() {
        assert!(parse_ptxas_report("").is_empty());
        assert!(parse_ptxas_report("warning: something\n 12 registers").is_empty());
    }
}
