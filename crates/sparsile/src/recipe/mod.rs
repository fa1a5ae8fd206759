//! Named recipes: published designs and tuned schedules, applied by name.
//!
//! A recipe turns a stage-I program into a recorded [`Trace`] (so what it did can be
//! printed, saved, replayed and edited like any schedule). It is named by a spec
//! `name[:key=value,...]` ([`RecipeSpec`]); [`list`] describes every recipe with its
//! parameters and the operators it applies to; [`trace`] builds the trace for one
//! program; [`compile_recipe`] parses, schedules and compiles in one call, with the
//! sizes of the given inputs known to the recipe (so it can specialise the dense width
//! `K` — the kernel then refuses inputs of another width, see
//! [`specialize`](sparsile_transform::schedule::specialize())).
//!
//! A recipe that does not fit a program (no sparse loop nest of the shape it expects)
//! returns [`RecipeError::NotApplicable`] saying why.
//!
//! ```
//! use std::collections::HashMap;
//! use sparsile::formats::{CooTensor, Format, SparseTensor};
//! use sparsile::ir::DType;
//! let a = CooTensor::from_triplets(vec![2, 3], &[(0, 0, 1.0), (1, 2, 4.0)]).unwrap();
//! let inputs = HashMap::from([
//!     ("A".to_string(), SparseTensor::from_coo_with(&a, &Format::Csr, DType::F32).unwrap()),
//!     ("B".to_string(), SparseTensor::dense_from_f64(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], DType::F32).unwrap()),
//! ]);
//! let program = "tensor A: f32[m, n] csr\ntensor B: f32[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n";
//! let kernel = sparsile::recipe::compile_recipe(program, &inputs, "rowwise").unwrap();
//! let c = &kernel.run(&inputs, &sparsile::RunOptions::default()).unwrap()["C"];
//! assert_eq!(c.to_dense_f64(), vec![1.0, 2.0, 20.0, 24.0]);
//! ```

mod args;
mod blocks;
mod daspmm;
mod default;
mod gpu_block;
mod gpu_bsr_mma;
mod gpu_da;
mod gpu_hyb;
mod gpu_nnz;
mod gpu_rowcache;
mod gpu_rowwise;
mod gpu_sddmm_vec;
mod gpu_tiles;
mod gpu_warp;
mod hyb;
mod nest;
mod rgms_hyb;
mod rowwise;
mod spec;
mod tiles;

use std::collections::HashMap;

use serde::Serialize;
use sparsile_formats::SparseTensor;
use sparsile_ir::coord::Program;
use sparsile_transform::schedule::{Schedule, ScheduleError, Trace};
use thiserror::Error;

pub use args::Args;
pub use spec::RecipeSpec;

use crate::compile::{
    compile_program_for, compile_program_with, specialize_index_types, CompileError, Kernel, Target,
};
use crate::evaluate::{buffer_name, declared_dim_params};
use crate::notation;

/// A parameter of a recipe.
#[derive(Debug, Clone, Serialize)]
pub struct ParamInfo {
    pub name: &'static str,
    /// The value used when the spec does not give one.
    pub default: &'static str,
    pub doc: &'static str,
}

/// What `sparsile recipes` lists about a recipe.
#[derive(Debug, Clone, Serialize)]
pub struct RecipeInfo {
    pub name: &'static str,
    /// One line: what the schedule does.
    pub summary: &'static str,
    /// The operators it applies to (e.g. `spmm`, `sddmm`, `spmv`, `any`).
    pub ops: &'static [&'static str],
    /// The formats of the sparse operand it applies to: `any`, or format families
    /// (`bsr`: blocks of `bsr:RxC`, whatever their size; the recipe says which sizes it
    /// takes when it refuses one).
    pub formats: &'static [&'static str],
    pub params: Vec<ParamInfo>,
    /// Where the design comes from.
    pub source: &'static str,
    /// Whether the schedule makes a GPU function (bound loops in launches, run by the
    /// CUDA backend or the SIMT interpreter) rather than a CPU one.
    pub gpu: bool,
}

impl RecipeInfo {
    /// Whether the recipe applies to a sparse operand stored as `format` (a format
    /// spec such as `csr` or `bsr:4x4`; its family is the part before `:`).
    pub fn takes_format(&self, format: &str) -> bool {
        let family = format.split(':').next().unwrap_or(format);
        self.formats.iter().any(|f| *f == "any" || *f == family)
    }
}

/// What a recipe knows besides the program: the values of its parameters that the
/// inputs fix (dimension sizes by parameter name).
#[derive(Debug, Clone, Default)]
pub struct RecipeContext {
    pub params: HashMap<String, i64>,
}

/// Why a recipe could not be applied.
#[derive(Debug, Error)]
pub enum RecipeError {
    #[error("recipe spec `{spec}`: {reason}")]
    BadSpec { spec: String, reason: String },
    #[error("no recipe named `{name}` (known: {known})")]
    UnknownRecipe { name: String, known: String },
    #[error("recipe `{recipe}` has no parameter `{arg}` (its parameters: {allowed})")]
    UnknownArg {
        recipe: String,
        arg: String,
        allowed: String,
    },
    #[error("recipe `{recipe}`: parameter `{arg}` = `{value}`: {expected}")]
    BadArg {
        recipe: String,
        arg: String,
        value: String,
        expected: String,
    },
    #[error("recipe `{recipe}` does not apply to this program: {reason}")]
    NotApplicable { recipe: String, reason: String },
    #[error("recipe `{recipe}`: {source}")]
    Schedule {
        recipe: String,
        #[source]
        source: Box<ScheduleError>,
    },
}

/// A registered recipe.
pub(crate) struct Recipe {
    pub info: fn() -> RecipeInfo,
    pub apply: fn(&mut Schedule, &Args, &RecipeContext) -> Result<(), RecipeError>,
}

fn registry() -> Vec<Recipe> {
    vec![
        default::RECIPE,
        rowwise::RECIPE,
        daspmm::RECIPE,
        hyb::RECIPE,
        blocks::RECIPE,
        tiles::RECIPE,
        rgms_hyb::RECIPE,
        gpu_rowwise::RECIPE,
        gpu_warp::RECIPE,
        gpu_nnz::RECIPE,
        gpu_hyb::RECIPE,
        gpu_rowcache::RECIPE,
        gpu_bsr_mma::RECIPE,
        gpu_tiles::RECIPE,
        gpu_da::RECIPE,
        gpu_sddmm_vec::RECIPE,
    ]
}

/// Every recipe, in the order `sparsile recipes` lists them.
pub fn list() -> Vec<RecipeInfo> {
    registry().iter().map(|r| (r.info)()).collect()
}

/// The schedule that recipe `spec` builds for `program`.
pub fn schedule(
    spec: &str,
    program: &Program,
    context: &RecipeContext,
) -> Result<Schedule, RecipeError> {
    let spec: RecipeSpec = spec.parse()?;
    let recipes = registry();
    let recipe = recipes
        .iter()
        .find(|r| (r.info)().name == spec.name)
        .ok_or_else(|| RecipeError::UnknownRecipe {
            name: spec.name.clone(),
            known: recipes
                .iter()
                .map(|r| (r.info)().name)
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let args = Args::new(&(recipe.info)(), &spec)?;
    let mut sch = Schedule::new(program);
    (recipe.apply)(&mut sch, &args, context)?;
    Ok(sch)
}

/// The trace that recipe `spec` records for `program`.
pub fn trace(spec: &str, program: &Program, context: &RecipeContext) -> Result<Trace, RecipeError> {
    Ok(schedule(spec, program, context)?.trace().clone())
}

/// Compiles an index-notation program with recipe `spec`, specialised to the index
/// types and sizes of `inputs` (by declared tensor name), for the target the recipe makes
/// code for (`cpu`, or `cuda` for a GPU recipe).
pub fn compile_recipe(
    program: &str,
    inputs: &HashMap<String, SparseTensor<'_>>,
    spec: &str,
) -> Result<Kernel, CompileError> {
    let (ast, stage1, trace) = recipe_trace(program, inputs, spec)?;
    Ok(compile_program_with(stage1, &trace)?.with_ast(ast))
}

/// [`compile_recipe`] for `target` (a GPU recipe runs on `cuda` or `cuda-sim`).
pub fn compile_recipe_for(
    program: &str,
    inputs: &HashMap<String, SparseTensor<'_>>,
    spec: &str,
    target: Target,
) -> Result<Kernel, CompileError> {
    let (ast, stage1, trace) = recipe_trace(program, inputs, spec)?;
    Ok(compile_program_for(stage1, Some(&trace), target)?.with_ast(ast))
}

/// The trace recipe `spec` records for an index-notation program, specialised to the
/// index types and sizes of `inputs` (what [`compile_recipe`] compiles), with the
/// parsed program and its stage-I form.
pub fn recipe_trace(
    program: &str,
    inputs: &HashMap<String, SparseTensor<'_>>,
    spec: &str,
) -> Result<(notation::ast::Program, Program, Trace), CompileError> {
    let ast = notation::parse(program)?;
    let mut stage1 = notation::lower(&ast)?;
    let by_buffer: HashMap<String, &SparseTensor<'_>> =
        inputs.iter().map(|(n, t)| (buffer_name(n), t)).collect();
    specialize_index_types(&mut stage1, &by_buffer);
    let context = RecipeContext {
        params: declared_dim_params(&ast, &stage1, inputs)?,
    };
    let trace = trace(spec, &stage1, &context)?;
    Ok((ast, stage1, trace))
}

/// Wraps a schedule error with the recipe's name.
pub(crate) fn sched(recipe: &str) -> impl Fn(ScheduleError) -> RecipeError + '_ {
    move |e| RecipeError::Schedule {
        recipe: recipe.to_string(),
        source: Box::new(e),
    }
}
