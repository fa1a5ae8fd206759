//! `sparsile eval`: runs an index-notation program with the reference interpreter on
//! tensors read from files, with seeded random dense operands for the inputs not given.

use crate::limits;
use crate::output::{out, outln};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile::notation::{self, ast::Dim};
use sparsile_formats::{Format, SparseTensor};
use sparsile_ir::DType;
use sparsile_runtime::{interpret, InterpOptions};

use crate::table::{duration, thousands, Table};
use crate::{load, progress};
use sparsile::notation::infer;

#[derive(clap::Args, Clone)]
pub struct EvalArgs {
    /// An index-notation program file (declarations and statements).
    #[arg(required_unless_present = "expr", conflicts_with = "expr")]
    pub program: Option<PathBuf>,
    /// One statement instead of a program file, e.g. 'C[i,k] = A[i,j] * B[j,k]';
    /// declarations are inferred from the inputs.
    #[arg(long)]
    pub expr: Option<String>,
    /// An input tensor from a file: NAME=FILE (coordinate Matrix Market = sparse, array = dense, or .spt).
    #[arg(long = "input", value_name = "NAME=FILE")]
    pub inputs: Vec<String>,
    /// Write an output tensor: NAME=FILE (.mtx, .mtx.gz or .spt).
    #[arg(long = "output", value_name = "NAME=FILE")]
    pub outputs: Vec<String>,
    /// Store a tensor in another format: NAME=FORMAT (csr, bsr:16x16, ell:32, ...).
    #[arg(long = "format", value_name = "NAME=FORMAT")]
    pub formats: Vec<String>,
    /// Give a dimension's size: NAME=SIZE (with --expr, NAME may be the index variable).
    #[arg(long = "dim", value_name = "NAME=SIZE")]
    pub dims: Vec<String>,
    /// Element type of the tensors declared by --expr.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Seed of the random dense operands.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

fn split_pair<'a>(s: &'a str, what: &str) -> Result<(&'a str, &'a str)> {
    s.split_once('=')
        .map(|(a, b)| (a.trim(), b.trim()))
        .filter(|(a, b)| !a.is_empty() && !b.is_empty())
        .ok_or_else(|| anyhow!("{what} `{s}` must look like NAME=VALUE"))
}

/// A stable 64-bit hash of a name (FNV-1a), mixed into the seed per tensor.
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

/// Seeded uniform values in [-1, 1).
pub fn random_values(seed: u64, name: &str, len: usize) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ name_hash(name));
    (0..len).map(|_| rng.random_range(-1.0..1.0)).collect()
}

/// What one output looked like after the run.
#[derive(serde::Serialize)]
pub struct OutputReport {
    pub name: String,
    pub shape: Vec<usize>,
    pub format: String,
    pub stored_values: usize,
    /// The sum of all stored values.
    pub checksum: f64,
    /// The sum of the absolute values.
    pub abs_sum: f64,
}

/// The result of preparing a program for a run: its text, the lowered program and the
/// bound input tensors.
pub struct Prepared {
    pub text: String,
    pub program: sparsile_ir::coord::Program,
    pub inputs: HashMap<String, SparseTensor<'static>>,
    pub random_inputs: Vec<String>,
    /// Dimension sizes that are parameters of the program.
    pub params: HashMap<String, i64>,
    pub load_secs: f64,
}

/// Reads the program and inputs, applies overrides, fills in random dense inputs and
/// lowers to stage I. Shared by the commands that run programs.
/// The program text: the file, or declarations inferred for `--expr`.
pub fn ast_text(
    args: &EvalArgs,
    files: &HashMap<String, load::Loaded>,
    formats: &HashMap<String, Format>,
) -> Result<String> {
    Ok(match (&args.program, &args.expr) {
        (Some(p), _) => load::read_text(p)?,
        (None, Some(e)) => {
            let dtype: DType = args.dtype.parse().map_err(anyhow::Error::msg)?;
            let mut sparse: Vec<String> = files
                .iter()
                .filter(|(_, l)| l.is_sparse())
                .map(|(n, _)| n.clone())
                .collect();
            sparse.extend(
                formats
                    .iter()
                    .filter(|(_, f)| **f != Format::Dense)
                    .map(|(n, _)| n.clone()),
            );
            infer::program_text(e, &sparse, formats, dtype)
                .map_err(|err| anyhow::anyhow!("--expr: {err}"))?
        }
        (None, None) => bail!("give a program file or --expr"),
    })
}

/// The `--format NAME=FORMAT` overrides.
pub fn format_overrides(args: &EvalArgs) -> Result<HashMap<String, Format>> {
    let mut formats: HashMap<String, Format> = HashMap::new();
    for s in &args.formats {
        let (name, f) = split_pair(s, "--format")?;
        formats.insert(
            name.to_string(),
            f.parse().with_context(|| format!("--format {s}"))?,
        );
    }
    Ok(formats)
}

/// Parses the program (file or `--expr`) and applies `--format` overrides; returns the
/// text too.
pub fn read_program(
    args: &EvalArgs,
    files: &HashMap<String, load::Loaded>,
    formats: &HashMap<String, Format>,
) -> Result<(String, notation::ast::Program)> {
    let text = ast_text(args, files, formats)?;
    let mut ast = notation::parse(&text).map_err(|e| anyhow!("{e}"))?;
    for (name, f) in formats {
        let decl = ast
            .tensors
            .iter_mut()
            .find(|t| &t.name == name)
            .ok_or_else(|| {
                anyhow!("--format names `{name}`, which the program does not declare")
            })?;
        decl.format = f.clone();
    }
    Ok((text, ast))
}

/// Reads the files named by `--input NAME=FILE`.
pub fn load_inputs(args: &EvalArgs) -> Result<HashMap<String, load::Loaded>> {
    let mut files = HashMap::new();
    for s in &args.inputs {
        let (name, path) = split_pair(s, "--input")?;
        files.insert(name.to_string(), load::read(path.as_ref())?);
    }
    Ok(files)
}

pub fn prepare(args: &EvalArgs) -> Result<Prepared> {
    let t0 = Instant::now();
    let files = load_inputs(args)?;
    let load_secs = t0.elapsed().as_secs_f64();
    let formats = format_overrides(args)?;
    let (text, ast) = read_program(args, &files, &formats)?;
    let outputs: HashSet<String> = ast
        .statements
        .iter()
        .map(|s| s.lhs.tensor.clone())
        .collect();
    for name in files.keys() {
        if !ast.tensors.iter().any(|t| &t.name == name) {
            bail!("--input names `{name}`, which the program does not declare");
        }
        if outputs.contains(name) {
            bail!("--input names `{name}`, which the program computes (an output)");
        }
    }

    // Bind dimension names from the shapes of the given inputs, then --dim.
    let shapes = files.iter().map(|(n, l)| (n.clone(), l.shape())).collect();
    let mut dims: HashMap<String, (usize, String)> = sparsile::bind_dims(&ast, &shapes)?
        .into_iter()
        .map(|(name, size)| (name, (size, "the inputs".to_string())))
        .collect();
    for s in &args.dims {
        let (name, v) = split_pair(s, "--dim")?;
        let v: usize = v
            .parse()
            .with_context(|| format!("--dim {s}: size must be a non-negative integer"))?;
        let name = if args.expr.is_some() && !name.starts_with("n_") {
            infer::dim_name(name)
        } else {
            name.to_string()
        };
        match dims.get(&name) {
            Some((prev, from)) if *prev != v => {
                bail!("--dim {s} contradicts dimension {name} = {prev} from {from}")
            }
            _ => {
                dims.insert(name, (v, "--dim".into()));
            }
        }
    }

    let shape_of = |decl: &notation::ast::TensorDecl| -> Result<Vec<usize>> {
        decl.dims
            .iter()
            .map(|d| match d {
                Dim::Const(c) => usize::try_from(*c).map_err(|_| {
                    anyhow!("dimension {c} of {} is negative", decl.name)
                }),
                Dim::Named(n) => dims.get(n).map(|(v, _)| *v).ok_or_else(|| {
                    let hint = n.strip_prefix("n_").filter(|_| args.expr.is_some()).unwrap_or(n);
                    anyhow!("the size of dimension {n} (of {}) is unknown: give it with --dim {hint}=SIZE", decl.name)
                }),
            })
            .collect()
    };
    // The dense tensors made here (random inputs) and by the run (dense outputs), all
    // checked against the memory available before any is allocated.
    let mut made = Vec::new();
    for decl in &ast.tensors {
        let random = !files.contains_key(&decl.name) && !outputs.contains(&decl.name);
        if decl.format == Format::Dense && (random || outputs.contains(&decl.name)) {
            if let Ok(shape) = shape_of(decl) {
                made.push((decl.name.as_str(), shape, decl.dtype));
            }
        }
    }
    let made: Vec<limits::DenseTensor<'_>> = made
        .iter()
        .map(|(name, shape, dtype)| limits::DenseTensor {
            name,
            shape,
            dtype: *dtype,
        })
        .collect();
    limits::check_dense_memory(&made)?;

    let mut inputs = HashMap::new();
    let mut random_inputs = Vec::new();
    for decl in &ast.tensors {
        if outputs.contains(&decl.name) {
            continue;
        }
        let tensor = match files.get(&decl.name) {
            Some(l) => l
                .to_tensor(&decl.format, decl.dtype)
                .with_context(|| format!("input {} as {}", decl.name, decl.format))?,
            None => {
                if decl.format != Format::Dense {
                    bail!(
                        "sparse input {} ({}) needs a file: --input {}=FILE",
                        decl.name,
                        decl.format,
                        decl.name
                    );
                }
                if decl.dtype.is_int() {
                    bail!(
                        "integer input {} needs a file: --input {}=FILE",
                        decl.name,
                        decl.name
                    );
                }
                let shape = shape_of(decl)?;
                let len = shape.iter().product();
                random_inputs.push(decl.name.clone());
                SparseTensor::dense_from_f64(
                    &shape,
                    &random_values(args.seed, &decl.name, len),
                    decl.dtype,
                )?
            }
        };
        inputs.insert(decl.name.clone(), tensor);
    }
    let program = notation::lower(&ast).map_err(|e| anyhow!("{e}"))?;
    if let Err(errors) = sparsile_ir::coord::verify(&program) {
        let lines: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        bail!(
            "internal error: the lowered program does not verify:\n{}",
            lines.join("\n")
        );
    }
    // Buffers are named after tensors (reserved words get a suffix).
    let inputs = inputs
        .into_iter()
        .map(|(name, t)| {
            let buffer = [name.clone(), format!("{name}_")]
                .into_iter()
                .find(|b| program.buffer_by_name(b).is_some())
                .unwrap_or(name);
            (buffer, t)
        })
        .collect();
    let sizes = dims.iter().map(|(n, (v, _))| (n.clone(), *v)).collect();
    let params = sparsile::dim_params(&program, &sizes);
    Ok(Prepared {
        text,
        program,
        inputs,
        random_inputs,
        params,
        load_secs,
    })
}

/// Summarises an output tensor.
pub fn report(name: &str, t: &SparseTensor<'_>) -> OutputReport {
    let values = t.values.to_f64_vec();
    OutputReport {
        name: name.trim_end_matches('_').to_string(),
        shape: t.shape().to_vec(),
        format: t.format().to_string(),
        stored_values: values.len(),
        checksum: values.iter().sum(),
        abs_sum: values.iter().map(|v| v.abs()).sum(),
    }
}

pub fn run(args: &EvalArgs) -> Result<()> {
    let bar = progress::spinner(!args.json, "reading inputs");
    let prepared = prepare(args)?;
    bar.set_message("interpreting");
    let t0 = Instant::now();
    let options = InterpOptions {
        params: prepared.params.clone(),
        ..InterpOptions::default()
    };
    let outputs =
        interpret(&prepared.program, &prepared.inputs, &options).map_err(|e| anyhow!("{e}"))?;
    let run_secs = t0.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let mut names: Vec<&String> = outputs.keys().collect();
    names.sort();
    let reports: Vec<OutputReport> = names.iter().map(|n| report(n, &outputs[*n])).collect();
    write_outputs(args, &outputs)?;
    if args.json {
        let v = serde_json::json!({
            "outputs": reports,
            "random_inputs": prepared.random_inputs,
            "seed": args.seed,
            "load_seconds": prepared.load_secs,
            "run_seconds": run_secs,
            "backend": "interpreter",
        });
        outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    if args.expr.is_some() {
        outln!("program (declarations inferred from --expr):");
        for line in prepared.text.lines() {
            outln!("  {line}");
        }
        outln!();
    }
    let mut names: Vec<&String> = prepared.inputs.keys().collect();
    names.sort();
    let mut t = Table::new(
        &["tensor", "role", "shape", "format", "stored", "checksum"],
        &[false, false, true, false, true, true],
    );
    for n in names {
        let x = &prepared.inputs[n];
        let role = if prepared.random_inputs.contains(n) {
            "input (random)"
        } else {
            "input"
        };
        t.row(vec![
            n.trim_end_matches('_').to_string(),
            role.into(),
            shape_text(x.shape()),
            x.format().to_string(),
            thousands(x.nnz_stored() as u64),
            String::new(),
        ]);
    }
    for r in &reports {
        t.row(vec![
            r.name.clone(),
            "output".into(),
            shape_text(&r.shape),
            r.format.clone(),
            thousands(r.stored_values as u64),
            format!("{:.9e}", r.checksum),
        ]);
    }
    out!("{}", t.render());
    outln!(
        "interpreter time: {}   (inputs read in {})",
        duration(run_secs),
        duration(prepared.load_secs)
    );
    Ok(())
}

fn shape_text(shape: &[usize]) -> String {
    shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(" x ")
}

/// Writes the outputs named by `--output NAME=FILE`.
pub fn write_outputs(args: &EvalArgs, outputs: &sparsile_runtime::Outputs) -> Result<()> {
    for s in &args.outputs {
        let (name, path) = split_pair(s, "--output")?;
        let t = outputs
            .get(name)
            .or_else(|| outputs.get(&format!("{name}_")))
            .ok_or_else(|| {
                anyhow!("--output names `{name}`, which is not an output of the program")
            })?;
        load::write(path.as_ref(), t)?;
    }
    Ok(())
}
