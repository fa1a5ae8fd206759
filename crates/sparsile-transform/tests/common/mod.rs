//! The differential harness: an index-notation program runs through the stage-I
//! interpreter and through `compile_to_flat` + a stage-III executor on the same seeded
//! random inputs; every output must agree.

#![allow(dead_code)]

pub mod flat_eval;

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparsile::notation::{check, lower, parse};
use sparsile_formats::{CooTensor, SparseTensor};
use sparsile_ir::coord::{Extent, Program};
use sparsile_ir::loops::{BufferKind, Func};
use sparsile_runtime::{interpret, InterpOptions, Outputs};

/// Which entries of a sparse input are stored.
#[derive(Debug, Clone, Copy)]
pub enum Pattern {
    /// Each entry with this probability.
    Random(f64),
    /// Random, but every even first-dimension index (row) is empty.
    EmptyRows(f64),
    /// Nothing stored.
    Empty,
    /// Row 0 full, the rest with this probability.
    LongRow(f64),
}

impl Pattern {
    fn keep(self, rng: &mut ChaCha8Rng, row: usize) -> bool {
        match self {
            Pattern::Random(d) => rng.random::<f64>() < d,
            Pattern::EmptyRows(d) => row % 2 == 1 && rng.random::<f64>() < d,
            Pattern::Empty => false,
            Pattern::LongRow(d) => row == 0 || rng.random::<f64>() < d,
        }
    }
}

/// Runs `text` both ways on random inputs of the given sizes and compares the outputs.
pub fn differential(text: &str, sizes: &[(&str, usize)], pattern: Pattern, seed: u64) {
    let sizes: HashMap<&str, usize> = sizes.iter().copied().collect();
    let ast = parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let program = lower(&ast).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let checked = check(&ast).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut inputs: HashMap<String, SparseTensor<'static>> = HashMap::new();
    for (t, decl) in ast.tensors.iter().enumerate() {
        if checked.is_output[t] {
            continue;
        }
        let shape: Vec<usize> = decl
            .dims
            .iter()
            .map(|d| match d {
                sparsile::notation::ast::Dim::Named(n) => sizes[n.as_str()],
                sparsile::notation::ast::Dim::Const(c) => *c as usize,
            })
            .collect();
        let total: usize = shape.iter().product();
        let row_size = total / shape[0].max(1);
        let sparse = checked.is_sparse(t);
        let mut coo = CooTensor::empty(shape.clone());
        for flat in 0..total {
            if sparse && !pattern.keep(&mut rng, flat / row_size.max(1)) {
                continue;
            }
            let v = if decl.dtype.is_int() {
                // An index: mostly in range of the smallest size, sometimes out of range.
                let hi = sizes.values().copied().min().unwrap_or(1) as i64;
                rng.random_range(-1..=hi) as f64
            } else {
                (rng.random_range(-8..=8) as f64) * 0.25
            };
            let mut rest = flat;
            let mut coord = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                coord[d] = rest % shape[d];
                rest /= shape[d];
            }
            coo.coords.extend_from_slice(&coord);
            coo.values.push(v);
        }
        let dtype = if decl.dtype.is_int() {
            sparsile_ir::DType::F64
        } else {
            decl.dtype
        };
        let tensor = SparseTensor::from_coo_with(&coo, &decl.format, dtype)
            .unwrap_or_else(|e| panic!("{}: {e}", decl.name));
        inputs.insert(program_buffer(&program, &decl.name), tensor);
    }
    let options = InterpOptions {
        params: program
            .params
            .values()
            .filter_map(|p| {
                sizes
                    .get(p.name.as_str())
                    .map(|&v| (p.name.clone(), v as i64))
            })
            .collect(),
        ..InterpOptions::default()
    };
    check_program(
        &program,
        text,
        &inputs,
        &options,
        !matches!(pattern, Pattern::Empty),
    );
}

/// Runs a stage-I program both ways on `inputs` and compares the outputs; with
/// `nonzero`, some output must be nonzero (so that the comparison can fail).
pub fn check_program(
    program: &Program,
    text: &str,
    inputs: &HashMap<String, SparseTensor<'static>>,
    options: &InterpOptions,
    nonzero_expected: bool,
) {
    let expected = interpret(program, inputs, options)
        .unwrap_or_else(|e| panic!("interpreter: {e}\n{program}"));
    let lowered = sparsile_transform::compile_to_flat(program)
        .unwrap_or_else(|e| panic!("lowering: {e}\n{program}"));
    let nonzero = expected
        .values()
        .any(|t| t.values.to_f64_vec().iter().any(|v| *v != 0.0));
    assert!(
        nonzero || !nonzero_expected,
        "every output is zero: the comparison would not catch a wrong program\n{text}"
    );
    let mut runs: Vec<(&str, HashMap<String, Vec<f64>>)> = vec![(
        "stage III (test executor)",
        run_flat(program, &lowered.stage3, inputs, &expected, &options.params),
    )];
    // The runtime's loop-level interpreter, with its parallel-loop check, on both stages.
    for (label, func) in [
        ("stage II (flat_interp)", &lowered.stage2),
        ("stage III (flat_interp)", &lowered.stage3),
    ] {
        let out = sparsile_runtime::flat_interp::run(func, program, inputs, options)
            .unwrap_or_else(|e| panic!("{label}: {e}\n{program}\n{func}"));
        let values = out
            .into_iter()
            .map(|(k, t)| (k, t.values.to_f64_vec()))
            .collect();
        runs.push((label, values));
    }
    for (label, got) in &runs {
        for (name, tensor) in &expected {
            let want = tensor.values.to_f64_vec();
            let have = &got[name];
            assert_eq!(
                have.len(),
                want.len(),
                "{label}: {name}: value count\n{program}"
            );
            for (k, (h, w)) in have.iter().zip(&want).enumerate() {
                assert!(
                    (h - w).abs() <= 1e-9 * (1.0 + w.abs()),
                    "{label}: {name}[{k}]: compiled {h}, interpreter {w}\n{text}\n{program}\n{}",
                    lowered.stage2
                );
            }
        }
    }
}

/// The buffer carrying tensor `name` (a trailing `_` for reserved words).
fn program_buffer(program: &Program, name: &str) -> String {
    if program.buffer_by_name(name).is_some() {
        name.to_string()
    } else {
        format!("{name}_")
    }
}

/// Binds parameters and buffers of `func` from the inputs and the interpreter's output
/// structures, runs it, and returns every output's values by buffer name.
pub fn run_flat(
    program: &Program,
    func: &Func,
    inputs: &HashMap<String, SparseTensor<'static>>,
    outputs: &Outputs,
    given: &HashMap<String, i64>,
) -> HashMap<String, Vec<f64>> {
    let tensor = |name: &str| -> &SparseTensor<'_> {
        inputs
            .get(name)
            .or_else(|| outputs.get(name))
            .unwrap_or_else(|| panic!("no tensor for buffer {name}"))
    };
    // Parameters, unified from the structures.
    let mut params: Vec<Option<i64>> = program
        .params
        .values()
        .map(|p| given.get(&p.name).copied())
        .collect();
    let mut unify = |e: Extent, v: usize| {
        if let Extent::Param(p) = e {
            match params[p.0 as usize] {
                Some(b) => assert_eq!(b, v as i64, "parameter {}", program.params[p].name),
                None => params[p.0 as usize] = Some(v as i64),
            }
        }
    };
    for decl in program.buffers.values() {
        let Some(t) = inputs.get(&decl.name).or_else(|| outputs.get(&decl.name)) else {
            continue;
        };
        for (k, &a) in decl.axes.iter().enumerate() {
            let axis = &program.axes[a];
            let s = &t.structure.axes[k];
            unify(axis.length, s.length);
            if let Some(n) = axis.nnz {
                unify(n, s.npos);
            }
            if let Some(n) = axis.nnz_per_parent {
                unify(n, s.nnz_per_parent.unwrap_or(s.npos));
            }
        }
    }
    let params: Vec<i64> = params
        .into_iter()
        .enumerate()
        .map(|(i, p)| p.unwrap_or_else(|| panic!("parameter #{i} unbound")))
        .collect();
    let mut machine = flat_eval::Machine::new(func, params, vec![Vec::new(); func.buffers.len()]);
    for (id, b) in func.buffers.iter() {
        let len = machine.buffer_len(id.0 as usize);
        let data: Vec<f64> = match &b.kind {
            BufferKind::Values => match inputs.get(&b.name) {
                Some(t) => t.values.to_f64_vec(),
                None => vec![0.0; len],
            },
            BufferKind::Indptr { tensor: t, axis } => {
                let arr = tensor(t).structure.axes[*axis]
                    .indptr
                    .as_ref()
                    .expect("indptr");
                (0..arr.len()).map(|i| arr.get_i64(i) as f64).collect()
            }
            BufferKind::Indices { tensor: t, axis } => {
                let arr = tensor(t).structure.axes[*axis]
                    .indices
                    .as_ref()
                    .expect("indices");
                (0..arr.len()).map(|i| arr.get_i64(i) as f64).collect()
            }
            BufferKind::Scratch => vec![0.0; len],
            BufferKind::Local => vec![f64::NAN; len],
            BufferKind::Shared => panic!("this test evaluator runs CPU functions only"),
        };
        assert_eq!(data.len(), len, "buffer {}: length formula", b.name);
        machine.bufs[id.0 as usize] = data;
    }
    machine.run();
    func.buffers
        .iter()
        .filter(|(_, b)| outputs.contains_key(&b.name) && b.kind == BufferKind::Values)
        .map(|(id, b)| (b.name.clone(), machine.bufs[id.0 as usize].clone()))
        .collect()
}
