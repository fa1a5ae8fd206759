//! Compiling index notation with options given apart from the program text: formats that
//! replace the declared ones, index types taken from the inputs, and a recorded schedule.
//!
//! This is the entry point of front ends that keep a program and its formats separately
//! (the Python package's `sparsile.compile(program, formats=..., schedule=...)`). The
//! kernel keeps the declarations, so [`Kernel::run`] binds dimension names from the
//! inputs' shapes and names outputs by tensor, as with [`crate::compile`].
//!
//! Preconditions: every tensor named in [`CompileOptions::formats`] is declared by the
//! program (otherwise [`DimError::Undeclared`]); a trace was recorded on the program as
//! [`lower_notation_with`] returns it.
//!
//! ```no_run
//! use std::collections::HashMap;
//! use sparsile::{compile_with, CompileOptions};
//! let program = "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n";
//! let options = CompileOptions {
//!     formats: HashMap::from([("A".to_string(), "ell".parse().unwrap())]),
//!     ..Default::default()
//! };
//! let kernel = compile_with(program, &HashMap::new(), &options).unwrap();
//! assert!(kernel.ir(sparsile::Stage::Stage1).contains("A_J"));
//! ```

use std::collections::HashMap;

use sparsile_formats::{Format, SparseTensor};
use sparsile_ir::coord::Program;
use sparsile_transform::schedule::Trace;

use super::{
    build_for, lower_program, lower_program_with, specialize_index_types, CompileError, Kernel,
    Target,
};
use crate::evaluate::buffer_name;
use crate::notation::{self, ast};
use crate::DimError;

/// What [`compile_with`] does beyond the program text.
#[derive(Debug, Clone, Default)]
pub struct CompileOptions {
    /// Formats replacing the declared ones, by tensor name.
    pub formats: HashMap<String, Format>,
    /// A recorded schedule replayed instead of the default schedule.
    pub trace: Option<Trace>,
    /// Where the kernel runs (a GPU target needs a schedule from a GPU recipe).
    pub target: Target,
}

/// Parses `program`, replaces the formats of the tensors named in `formats`, and lowers
/// it to stage I. Returns the declarations too (they bind dimension names at run time).
pub fn lower_notation_with(
    program: &str,
    formats: &HashMap<String, Format>,
) -> Result<(ast::Program, Program), CompileError> {
    let mut ast = notation::parse(program)?;
    let mut names: Vec<&String> = formats.keys().collect();
    names.sort();
    for name in names {
        let decl = ast
            .tensors
            .iter_mut()
            .find(|t| &t.name == name)
            .ok_or_else(|| DimError::Undeclared(name.clone()))?;
        decl.format = formats[name].clone();
    }
    let stage1 = notation::lower(&ast)?;
    Ok((ast, stage1))
}

/// Compiles `program` with `options`, specialised to the index types of `inputs` (by
/// tensor name; tensors not given keep i32 indices).
pub fn compile_with(
    program: &str,
    inputs: &HashMap<String, SparseTensor<'_>>,
    options: &CompileOptions,
) -> Result<Kernel, CompileError> {
    let (ast, mut stage1) = lower_notation_with(program, &options.formats)?;
    let by_buffer: HashMap<String, &SparseTensor<'_>> =
        inputs.iter().map(|(n, t)| (buffer_name(n), t)).collect();
    specialize_index_types(&mut stage1, &by_buffer);
    let lowered = match &options.trace {
        Some(trace) => lower_program_with(stage1, trace)?,
        None => lower_program(stage1)?,
    };
    let mut kernel = build_for(lowered, options.target)?;
    kernel.ast = Some(ast);
    Ok(kernel)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPMV: &str =
        "tensor A: f32[m, n] csr\ntensor x: f32[n]\ntensor y: f32[m]\ny[i] = A[i,j] * x[j]\n";

    #[test]
    fn formats_replace_the_declared_ones() {
        let formats = HashMap::from([("A".to_string(), "ell".parse::<Format>().unwrap())]);
        let (ast, stage1) = lower_notation_with(SPMV, &formats).unwrap();
        assert_eq!(ast.tensor("A").unwrap().1.format, Format::Ell { k: None });
        let (_, csr) = lower_notation_with(SPMV, &HashMap::new()).unwrap();
        assert_ne!(stage1.to_string(), csr.to_string());
    }

    #[test]
    fn an_undeclared_tensor_is_an_error() {
        let formats = HashMap::from([("Z".to_string(), Format::Csr)]);
        let err = lower_notation_with(SPMV, &formats).unwrap_err();
        assert_eq!(err.to_string(), "input Z is not declared by the program");
    }
}
