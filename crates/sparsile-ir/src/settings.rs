//! Every environment variable Sparsile reads, declared once, typed and documented.
//!
//! No other module calls `std::env::var` for a `SPARSILE_*` variable: it reads
//! [`Settings::from_env`] (or a field of it) instead, so the list below is complete.
//!
//! ```
//! let s = sparsile_ir::settings::Settings::from_env();
//! assert!(sparsile_ir::settings::VARIABLES.iter().any(|v| v.name == "SPARSILE_BLESS"));
//! let _ = s.bless;
//! ```

use std::path::PathBuf;

/// One documented variable.
#[derive(Debug, Clone, Copy)]
pub struct Variable {
    pub name: &'static str,
    pub kind: &'static str,
    pub doc: &'static str,
}

/// The variables, for documentation and `sparsile` help output.
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: "SPARSILE_BLESS",
        kind: "bool (1/true)",
        doc: "tests rewrite their expected text-IR files instead of comparing against them",
    },
    Variable {
        name: "SPARSILE_REQUIRE_DATA",
        kind: "bool (1/true)",
        doc: "tests over the shared real matrices fail, instead of skipping, when the data folder is missing",
    },
    Variable {
        name: "SPARSILE_DATA_DIR",
        kind: "path",
        doc: "folder of real matrices (default: the `shared/data` folder beside the repository)",
    },
    Variable {
        name: "SPARSILE_DUMP_IR",
        kind: "bool (1/true)",
        doc: "print the IR after every pass of the compilation pipeline to stderr",
    },
    Variable {
        name: "SPARSILE_CACHE_DIR",
        kind: "path",
        doc: "where compiled kernels are cached: a folder only the current user can write, created 0700 when missing (default: $XDG_CACHE_HOME/sparsile or ~/.cache/sparsile, never a shared temporary folder)",
    },
    Variable {
        name: "SPARSILE_NUM_THREADS",
        kind: "positive integer",
        doc: "threads of the CPU runtime's pool (default: the number of cores)",
    },
    Variable {
        name: "SPARSILE_SPIN_US",
        kind: "non-negative integer",
        doc: "the most microseconds an idle CPU worker watches for the next kernel call (yielding its core to any other thread that wants it) before it sleeps (default: 100; 0 sleeps at once)",
    },
    Variable {
        name: "SPARSILE_TUNING_DB",
        kind: "path",
        doc: "the tuning database, JSON lines of measured choices (default: tuning.jsonl in the cache folder)",
    },
    Variable {
        name: "SPARSILE_SELECTOR_MODEL",
        kind: "path",
        doc: "a selector model file to use instead of the one built in (from `sparsile tune train`)",
    },
    Variable {
        name: "SPARSILE_TRIAL",
        kind: "flag",
        doc: "whether the automatic choice times the selector's pick against the few candidates predicted close to it, on the first call for an input, and keeps the fastest (default: on; 0 or off takes the pick untimed)",
    },
    Variable {
        name: "SPARSILE_NVRTC",
        kind: "path",
        doc: "the NVRTC library that compiles CUDA kernels, e.g. the libnvrtc.so.12 of `pip install nvidia-cuda-nvrtc-cu12` (default: libnvrtc.so.12, libnvrtc.so.13, then libnvrtc.so, from the loader's search path)",
    },
    Variable {
        name: "SPARSILE_CUDA_ARCH",
        kind: "GPU architecture (sm_80, sm_90, sm_90a, ...)",
        doc: "the architecture CUDA kernels are compiled for, instead of the device's own",
    },
    Variable {
        name: "SPARSILE_CUDA_DEVICE",
        kind: "non-negative integer",
        doc: "the ordinal of the CUDA device that GPU kernels run on (default: 0)",
    },
    Variable {
        name: "CC",
        kind: "command",
        doc: "the C compiler used for native CPU kernels (default: cc)",
    },
];

/// The parsed values of [`VARIABLES`].
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub bless: bool,
    pub require_data: bool,
    pub data_dir: Option<PathBuf>,
    pub dump_ir: bool,
    pub cache_dir: Option<PathBuf>,
    /// `None` when unset or not a positive integer.
    pub num_threads: Option<usize>,
    /// `SPARSILE_SPIN_US`; `None` when unset or not a non-negative integer.
    pub spin_us: Option<u64>,
    /// The C compiler command; `None` when unset or empty.
    pub cc: Option<String>,
    /// `SPARSILE_TUNING_DB`.
    pub tuning_db: Option<PathBuf>,
    /// `SPARSILE_SELECTOR_MODEL`.
    pub selector_model: Option<PathBuf>,
    /// `SPARSILE_TRIAL` set to 0, false, no or off: no timed trial.
    pub no_trial: bool,
    /// `SPARSILE_NVRTC`: the NVRTC library to load; `None` when unset or empty.
    pub nvrtc: Option<PathBuf>,
    /// `SPARSILE_CUDA_ARCH`, trimmed; `None` when unset or empty.
    pub cuda_arch: Option<String>,
    /// `SPARSILE_CUDA_DEVICE`; `None` when unset or not a non-negative integer.
    pub cuda_device: Option<usize>,
}

fn flag(name: &str) -> bool {
    std::env::var(name)
        .map(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        })
        .unwrap_or(false)
}

impl Settings {
    /// Reads the environment.
    pub fn from_env() -> Settings {
        Settings {
            bless: flag("SPARSILE_BLESS"),
            require_data: flag("SPARSILE_REQUIRE_DATA"),
            data_dir: std::env::var_os("SPARSILE_DATA_DIR").map(PathBuf::from),
            dump_ir: flag("SPARSILE_DUMP_IR"),
            cache_dir: std::env::var_os("SPARSILE_CACHE_DIR").map(PathBuf::from),
            num_threads: std::env::var("SPARSILE_NUM_THREADS")
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|&n| n > 0),
            spin_us: std::env::var("SPARSILE_SPIN_US")
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok()),
            cc: std::env::var("CC").ok().filter(|v| !v.trim().is_empty()),
            tuning_db: std::env::var_os("SPARSILE_TUNING_DB")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            selector_model: std::env::var_os("SPARSILE_SELECTOR_MODEL")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            no_trial: std::env::var("SPARSILE_TRIAL").is_ok_and(|v| {
                matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "0" | "false" | "no" | "off"
                )
            }),
            nvrtc: std::env::var_os("SPARSILE_NVRTC")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            cuda_arch: std::env::var("SPARSILE_CUDA_ARCH")
                .ok()
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()),
            cuda_device: std::env::var("SPARSILE_CUDA_DEVICE")
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok()),
        }
    }

    /// The kernel cache folder as the environment names it: `SPARSILE_CACHE_DIR`, else
    /// `$XDG_CACHE_HOME/sparsile`, else `$HOME/.cache/sparsile` (relative or empty
    /// `XDG_CACHE_HOME` / `HOME` values are ignored, as the XDG specification asks).
    /// `None` when none of them names one: there is no shared default (a folder in the
    /// temporary directory could be created first by another user), so the runtime then
    /// asks the password database for the home folder, or refuses.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        if let Some(d) = &self.cache_dir {
            return Some(d.clone());
        }
        let absolute = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        if let Some(x) = absolute("XDG_CACHE_HOME") {
            return Some(x.join("sparsile"));
        }
        absolute("HOME").map(|h| h.join(".cache").join("sparsile"))
    }

    /// The tuning database file: `SPARSILE_TUNING_DB`, else `tuning.jsonl` in the cache
    /// folder.
    pub fn tuning_db_path(&self) -> Option<PathBuf> {
        self.tuning_db
            .clone()
            .or_else(|| self.cache_dir().map(|d| d.join("tuning.jsonl")))
    }

    /// The folder of shared real matrices: `SPARSILE_DATA_DIR`, else `shared/data` beside
    /// the repository whose workspace root is `workspace_root`.
    pub fn data_dir_or(&self, workspace_root: &std::path::Path) -> PathBuf {
        self.data_dir
            .clone()
            .unwrap_or_else(|| workspace_root.join("..").join("shared").join("data"))
    }
}
