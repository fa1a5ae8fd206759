//! Sparsile's side of a case on a GPU target: which GPU recipes run (the entries of a
//! case), and one recipe's measurement.
//!
//! - Recipes: the case's (`auto`, the default, is the GPU rule, `sparsile::auto::gpu_rule`;
//!   `--recipe` names one for every case), or with `--recipes` several per case, each its
//!   own record: `all` is every GPU recipe whose operators include the case's. A CPU
//!   recipe named on the command line is refused before anything runs; one named by a
//!   suite case fails that case with the compiler's message. The format `auto` is CSR.
//! - `cuda`: the program is compiled for the GPU (`compile_recipe_for`, NVRTC through the
//!   cubin cache) and timed with `Kernel::bench_cuda`: inputs copied once, each run timed
//!   with CUDA events around its launches, the last run's result checked.
//! - `cuda-sim`: the same kernel run by the SIMT interpreter (which also checks races and
//!   barriers), warm-up then timed runs by the host clock: the times are the
//!   interpreter's on the CPU, and the record says so.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use sparsile::recipe::RecipeSpec;
use sparsile::runtime::cuda::BenchOptions;
use sparsile::{RunOptions, Target};

use crate::cmd_bench::args::{BenchArgs, Counts};
use crate::cmd_bench::cases::Case;
use crate::cmd_bench::operands::Dense;
use crate::cmd_bench::sparsile_side::{operand_tensors, program_text, result_values, Measured};
use crate::cmd_bench::{Entry, Matrix};

/// Which GPU recipes each case runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recipes {
    /// The case's recipe (`auto`: the GPU rule).
    Case,
    /// Every GPU recipe for the case's operation.
    All,
    /// These specs, in every case.
    List(Vec<String>),
}

/// The GPU recipes, by name.
fn gpu_recipes() -> Vec<sparsile::recipe::RecipeInfo> {
    sparsile::recipe::list()
        .into_iter()
        .filter(|r| r.gpu)
        .collect()
}

fn gpu_names() -> String {
    gpu_recipes()
        .iter()
        .map(|r| r.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks that `spec` parses and names a GPU recipe.
pub fn check_gpu_recipe(spec: &str) -> Result<()> {
    let parsed: RecipeSpec = spec.parse().map_err(anyhow::Error::from)?;
    match sparsile::recipe::list()
        .into_iter()
        .find(|r| r.name == parsed.name)
    {
        None => bail!(
            "no recipe named `{}` (GPU recipes: {})",
            parsed.name,
            gpu_names()
        ),
        Some(r) if !r.gpu => bail!(
            "`{}` is a CPU recipe; the GPU benchmark runs GPU recipes ({}): measure CPU recipes with --target cpu",
            r.name,
            gpu_names()
        ),
        Some(_) => Ok(()),
    }
}

/// The recipes of the run from `--recipe` and `--recipes`, checked.
pub fn requested(args: &BenchArgs) -> Result<Recipes> {
    match args.recipes.as_slice() {
        [] => {
            if let Some(r) = args.recipe.as_deref().filter(|r| *r != "auto") {
                check_gpu_recipe(r).context("--recipe")?;
            }
            Ok(Recipes::Case)
        }
        [all] if all.trim() == "all" => Ok(Recipes::All),
        list => {
            if list.iter().any(|r| r.trim() == "all") {
                bail!("--recipes all cannot be combined with other recipes");
            }
            for r in list {
                check_gpu_recipe(r).with_context(|| format!("--recipes {r}"))?;
            }
            Ok(Recipes::List(
                list.iter().map(|r| r.trim().to_string()).collect(),
            ))
        }
    }
}

/// The entries of `case`: the case once per recipe it runs, with the format `auto` made
/// CSR and the recipe `auto` made the GPU rule's.
pub fn entries(case: &Case, recipes: &Recipes) -> Result<Vec<Entry>> {
    let format = if case.format == "auto" {
        "csr".to_string()
    } else {
        case.format.clone()
    };
    let specs: Vec<(String, Option<String>)> = match recipes {
        Recipes::Case if case.recipe == "auto" => {
            let text = program_text(case.op, &format, case.k.unwrap_or(1));
            let program = sparsile::compile_notation(&text)?;
            vec![(
                sparsile::auto::gpu_rule_for(&program, case.k).to_string(),
                Some("GPU rule".to_string()),
            )]
        }
        Recipes::Case => vec![(case.recipe.clone(), None)],
        Recipes::All => gpu_recipes()
            .into_iter()
            .filter(|r| r.ops.iter().any(|o| *o == case.op.name() || *o == "any"))
            .filter(|r| r.takes_format(&format))
            .map(|r| (r.name.to_string(), None))
            .collect(),
        Recipes::List(list) => list.iter().map(|r| (r.clone(), None)).collect(),
    };
    Ok(specs
        .into_iter()
        .map(|(recipe, chosen_by)| Entry {
            case: Case {
                format: format.clone(),
                recipe,
                ..case.clone()
            },
            chosen_by,
        })
        .collect())
}

/// Runs `entry` (a case with its format and recipe) on `target` (`cuda` or
/// `cuda-sim`): `counts` untimed and timed runs; the result comes from the last run.
pub fn measure(
    entry: &Entry,
    mat: &Matrix,
    dense: &Dense,
    target: Target,
    counts: Counts,
) -> Result<Measured> {
    let entry = &entry.case;
    let k = entry.k.unwrap_or(1);
    let (format, recipe) = (entry.format.as_str(), entry.recipe.as_str());
    let text = program_text(entry.op, format, k);
    let inputs = operand_tensors(entry, &mat.coo, &mat.csr, dense, format, k)?;
    let t0 = Instant::now();
    let kernel = sparsile::recipe::compile_recipe_for(&text, &inputs, recipe, target)
        .with_context(|| {
            format!(
                "cannot compile {} ({format}, recipe {recipe}) for {target}",
                entry.label()
            )
        })?;
    let compile_seconds = t0.elapsed().as_secs_f64();
    let (times, outputs, note) = match target {
        Target::Cuda => {
            let bench = BenchOptions {
                warmup: counts.warmup,
                repeat: counts.repeat,
            };
            let timed = kernel
                .bench_cuda(&inputs, &RunOptions::default(), &bench)
                .with_context(|| format!("{recipe} on the GPU"))?;
            (timed.times, timed.outputs, spills(&kernel))
        }
        Target::CudaSim => {
            let options = RunOptions::default();
            let mut outputs = None;
            for _ in 0..counts.warmup {
                outputs = Some(kernel.run(&inputs, &options)?);
            }
            let mut times = Vec::with_capacity(counts.repeat);
            for _ in 0..counts.repeat {
                let t = Instant::now();
                outputs = Some(kernel.run(&inputs, &options)?);
                times.push(t.elapsed().as_secs_f64());
            }
            let outputs = outputs.context("no run was made")?;
            let note = "SIMT interpreter on the CPU: not GPU times".to_string();
            (times, outputs, Some(note))
        }
        Target::Cpu => bail!("the GPU benchmark runs on cuda or cuda-sim, not cpu"),
    };
    Ok(Measured {
        format: format.to_string(),
        recipe: recipe.to_string(),
        chosen_by: None,
        times,
        output: result_values(entry.op, &mat.csr, &outputs)?,
        compile_seconds,
        note,
    })
}

/// What ptxas spilled, when it spilled anything (slow local memory in the kernel); for a
/// kernel whose resources came from the driver (no ptxas report), its local memory.
fn spills(kernel: &sparsile::Kernel) -> Option<String> {
    let info = kernel.cuda_info()?;
    let spilled: Vec<String> = info
        .kernels
        .iter()
        .filter(|k| k.spill_stores > 0 || k.spill_loads > 0)
        .map(|k| format!("{} {}+{} bytes", k.name, k.spill_stores, k.spill_loads))
        .collect();
    let local: Vec<String> = info
        .kernels
        .iter()
        .filter(|k| k.from_driver && k.stack_bytes > 0)
        .map(|k| format!("{} {} bytes", k.name, k.stack_bytes))
        .collect();
    let mut notes = Vec::new();
    if !spilled.is_empty() {
        notes.push(format!("ptxas spilled registers: {}", spilled.join(", ")));
    }
    if !local.is_empty() {
        notes.push(format!(
            "local memory per thread (the driver's count, spills included): {}",
            local.join(", ")
        ));
    }
    (!notes.is_empty()).then(|| notes.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd_bench::cases::Op;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn args(words: &[&str]) -> BenchArgs {
        let mut all = vec!["bench"];
        all.extend(words);
        Cli::try_parse_from(all).unwrap().bench
    }

    fn case(op: Op, recipe: &str) -> Case {
        Case {
            path: "a.mtx".into(),
            matrix: "a".into(),
            op,
            k: op.has_k().then_some(32),
            format: "auto".into(),
            recipe: recipe.into(),
        }
    }

    #[test]
    fn recipes_from_the_command_line() {
        assert_eq!(requested(&args(&[])).unwrap(), Recipes::Case);
        assert_eq!(
            requested(&args(&["--recipe", "auto"])).unwrap(),
            Recipes::Case
        );
        assert_eq!(
            requested(&args(&["--recipe", "gpu_nnz:rows=8"])).unwrap(),
            Recipes::Case
        );
        assert_eq!(
            requested(&args(&["--recipes", "all"])).unwrap(),
            Recipes::All
        );
        assert_eq!(
            requested(&args(&[
                "--recipes",
                "gpu_rowwise:lanes=16,rows=8",
                "--recipes",
                "gpu_nnz"
            ]))
            .unwrap(),
            Recipes::List(vec!["gpu_rowwise:lanes=16,rows=8".into(), "gpu_nnz".into()])
        );
        let e = format!(
            "{:#}",
            requested(&args(&["--recipe", "rowwise"])).unwrap_err()
        );
        assert!(e.contains("`rowwise` is a CPU recipe"), "{e}");
        assert!(e.contains("gpu_rowwise, gpu_warp, gpu_nnz, gpu_hyb"), "{e}");
        let e = format!(
            "{:#}",
            requested(&args(&["--recipes", "gpu_magic"])).unwrap_err()
        );
        assert!(e.contains("no recipe named `gpu_magic`"), "{e}");
        let e = format!(
            "{:#}",
            requested(&args(&["--recipes", "all", "--recipes", "gpu_nnz"])).unwrap_err()
        );
        assert!(e.contains("cannot be combined"), "{e}");
        assert!(requested(&args(&["--recipes", "gpu_nnz:rows"])).is_err());
    }

    #[test]
    fn entries_per_case() {
        let names = |c: &Case, r: &Recipes| -> Vec<String> {
            entries(c, r)
                .unwrap()
                .into_iter()
                .map(|e| e.case.recipe)
                .collect()
        };
        let rule = entries(&case(Op::Spmm, "auto"), &Recipes::Case).unwrap();
        assert_eq!(rule[0].case.recipe, "gpu_rowwise");
        assert_eq!(rule[0].chosen_by.as_deref(), Some("GPU rule"));
        // K = 32: a row's non-zeros over the lanes; wider, a warp per row.
        assert_eq!(
            names(&case(Op::Sddmm, "auto"), &Recipes::Case),
            ["gpu_rowwise"]
        );
        let wide = Case {
            k: Some(64),
            ..case(Op::Sddmm, "auto")
        };
        assert_eq!(names(&wide, &Recipes::Case), ["gpu_sddmm_vec:balance=rows"]);
        assert_eq!(names(&case(Op::Spmv, "auto"), &Recipes::Case), ["gpu_warp"]);
        let named = entries(&case(Op::Spmm, "gpu_nnz:rows=2"), &Recipes::Case).unwrap();
        assert_eq!(
            (named[0].case.recipe.as_str(), named[0].chosen_by.as_deref()),
            ("gpu_nnz:rows=2", None)
        );
        assert_eq!(
            names(&case(Op::Spmm, "auto"), &Recipes::All),
            [
                "gpu_rowwise",
                "gpu_nnz",
                "gpu_hyb",
                "gpu_rowcache",
                "gpu_tiles",
                "gpu_da"
            ]
        );
        let bsr = Case {
            format: "bsr:16x8".into(),
            ..case(Op::Spmm, "auto")
        };
        assert!(names(&bsr, &Recipes::All).contains(&"gpu_bsr_mma".to_string()));
        let srbcrs = Case {
            format: "srbcrs:16x8".into(),
            ..case(Op::Spmm, "auto")
        };
        assert!(names(&srbcrs, &Recipes::All).contains(&"gpu_bsr_mma".to_string()));
        assert_eq!(
            names(&case(Op::Sddmm, "auto"), &Recipes::All),
            ["gpu_rowwise", "gpu_warp", "gpu_sddmm_vec"]
        );
        assert_eq!(
            names(&case(Op::Spmv, "auto"), &Recipes::All),
            ["gpu_rowwise", "gpu_warp", "gpu_nnz", "gpu_hyb"]
        );
        let list = Recipes::List(vec!["gpu_warp".into()]);
        let e = entries(&case(Op::Spmv, "x"), &list).unwrap();
        assert_eq!(
            (e[0].case.recipe.as_str(), e[0].case.format.as_str()),
            ("gpu_warp", "csr")
        );
        let mut ell = case(Op::Spmm, "auto");
        ell.format = "ell".into();
        assert_eq!(entries(&ell, &Recipes::Case).unwrap()[0].case.format, "ell");
    }
}
