//! Suite files: the standard benchmark cases, as JSON.
//!
//! ```json
//! {
//!   "ops": ["spmm:32", "spmm:128", "sddmm:32", "sddmm:128", "spmv"],
//!   "cases": [
//!     { "matrix": "../shared/data/pubmed.mtx" },
//!     { "matrix": "../shared/data/ss_cage11.mtx.gz", "format": "csr", "recipe": "default",
//!       "ops": ["spmm:32"] }
//!   ]
//! }
//! ```
//!
//! Matrix paths are relative to the repository root (the nearest folder above the suite
//! file that holds a `Cargo.toml`). A path under `../shared/data/` is looked up in
//! `SPARSILE_DATA_DIR` instead when that variable is set. `format` and `recipe` default to
//! `auto` (Sparsile chooses per case, as it does for its users), `ops` to the suite's
//! `ops`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use sparsile_ir::settings::Settings;

use crate::cmd_bench::cases::{matrix_name, Case, Op};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    ops: Vec<String>,
    cases: Vec<SuiteCase>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteCase {
    matrix: String,
    format: Option<String>,
    recipe: Option<String>,
    ops: Option<Vec<String>>,
}

/// The prefix under which suite paths name the shared data folder.
const SHARED_DATA: &str = "../shared/data/";

/// Parses an op spec: `spmm:32`, `sddmm:128`, `spmv`.
pub fn parse_op_spec(spec: &str) -> Result<(Op, Option<usize>)> {
    let (name, k) = match spec.split_once(':') {
        Some((n, k)) => (n, Some(k)),
        None => (spec, None),
    };
    let op = match name.trim() {
        "spmm" => Op::Spmm,
        "sddmm" => Op::Sddmm,
        "spmv" => Op::Spmv,
        other => bail!("unknown operation `{other}` in `{spec}` (expected spmm, sddmm or spmv)"),
    };
    let k = match (op.has_k(), k) {
        (true, Some(k)) => Some(
            k.trim()
                .parse::<usize>()
                .ok()
                .filter(|&k| k > 0)
                .with_context(|| format!("`{spec}`: K must be a positive integer"))?,
        ),
        (true, None) => bail!(
            "`{spec}`: {} needs a width, e.g. `{}:32`",
            op.name(),
            op.name()
        ),
        (false, Some(_)) => bail!("`{spec}`: spmv takes no width"),
        (false, None) => None,
    };
    Ok((op, k))
}

/// The repository root for a suite file: the nearest ancestor with a `Cargo.toml`, else
/// the suite file's folder.
fn root_of(suite: &Path) -> PathBuf {
    let dir = suite
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let dir = if dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        dir
    };
    let abs = std::fs::canonicalize(&dir).unwrap_or(dir.clone());
    abs.ancestors()
        .find(|a| a.join("Cargo.toml").is_file())
        .map(Path::to_path_buf)
        .unwrap_or(abs)
}

/// Where a suite's matrix path points.
pub fn resolve_matrix(path: &str, root: &Path, settings: &Settings) -> PathBuf {
    match (path.strip_prefix(SHARED_DATA), &settings.data_dir) {
        (Some(rest), Some(_)) => settings.data_dir_or(root).join(rest),
        _ => root.join(path),
    }
}

/// Reads a suite file into its cases.
pub fn read(path: &Path, settings: &Settings) -> Result<Vec<Case>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read suite {}", path.display()))?;
    parse(&text, &root_of(path), settings).with_context(|| format!("in suite {}", path.display()))
}

/// Parses a suite's text; matrix paths are resolved against `root`.
pub fn parse(text: &str, root: &Path, settings: &Settings) -> Result<Vec<Case>> {
    let suite: SuiteFile = serde_json::from_str(text).context("not a valid suite (JSON)")?;
    let default_ops = suite
        .ops
        .iter()
        .map(|s| parse_op_spec(s))
        .collect::<Result<Vec<_>>>()
        .context("in the suite's `ops`")?;
    let mut cases = Vec::new();
    for (i, c) in suite.cases.iter().enumerate() {
        let ops = match &c.ops {
            Some(ops) => ops
                .iter()
                .map(|s| parse_op_spec(s))
                .collect::<Result<Vec<_>>>()
                .with_context(|| format!("in the `ops` of case {i} ({})", c.matrix))?,
            None => default_ops.clone(),
        };
        let matrix_path = resolve_matrix(&c.matrix, root, settings);
        for (op, k) in ops {
            cases.push(Case {
                matrix: matrix_name(&matrix_path),
                path: matrix_path.clone(),
                op,
                k,
                format: c.format.clone().unwrap_or_else(|| "auto".into()),
                recipe: c.recipe.clone().unwrap_or_else(|| "auto".into()),
            });
        }
    }
    Ok(cases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_specs() {
        assert_eq!(parse_op_spec("spmm:32").unwrap(), (Op::Spmm, Some(32)));
        assert_eq!(parse_op_spec("spmv").unwrap(), (Op::Spmv, None));
        assert!(parse_op_spec("spmm").is_err());
        assert!(parse_op_spec("spmv:4").is_err());
        assert!(parse_op_spec("sddmm:0").is_err());
        assert!(parse_op_spec("gemm:8").is_err());
    }

    #[test]
    fn cases_take_defaults_and_overrides() {
        let text = r#"{"ops": ["spmm:32", "spmv"], "cases": [
            {"matrix": "../shared/data/a.mtx"},
            {"matrix": "m/b.mtx.gz", "format": "ell", "recipe": "r:x=1", "ops": ["sddmm:8"]}]}"#;
        let settings = Settings::default();
        let cases = parse(text, Path::new("/repo"), &settings).unwrap();
        assert_eq!(cases.len(), 3);
        assert_eq!(cases[0].path, Path::new("/repo/../shared/data/a.mtx"));
        assert_eq!(
            (cases[0].format.as_str(), cases[0].recipe.as_str()),
            ("auto", "auto")
        );
        assert_eq!(cases[2].matrix, "b");
        assert_eq!((cases[2].op, cases[2].k), (Op::Sddmm, Some(8)));
        assert_eq!(
            (cases[2].format.as_str(), cases[2].recipe.as_str()),
            ("ell", "r:x=1")
        );
    }

    #[test]
    fn data_dir_replaces_the_shared_prefix() {
        let settings = Settings {
            data_dir: Some(PathBuf::from("/data")),
            ..Settings::default()
        };
        assert_eq!(
            resolve_matrix("../shared/data/x.mtx", Path::new("/repo"), &settings),
            Path::new("/data/x.mtx")
        );
        assert_eq!(
            resolve_matrix("local/x.mtx", Path::new("/repo"), &settings),
            Path::new("/repo/local/x.mtx")
        );
    }

    #[test]
    fn errors_name_the_case() {
        let text = r#"{"ops": ["spmv"], "cases": [{"matrix": "a.mtx", "ops": ["spmm"]}]}"#;
        let err = parse(text, Path::new("/r"), &Settings::default()).unwrap_err();
        assert!(format!("{err:#}").contains("case 0 (a.mtx)"), "{err:#}");
    }
}
