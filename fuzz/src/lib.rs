//! The fuzz targets of Sparsile, as plain functions of the fuzzer's bytes.
//!
//! Each target panics only on a bug: a panic in Sparsile itself, or a property below
//! that fails. Errors that Sparsile returns for bad input are the expected outcome.
//!
//! - [`mtx`]: the Matrix Market reader; what it accepts writes and reads back the same.
//! - [`spt`]: the `.spt` reader; what it accepts is valid (it converts, reads densely and
//!   writes and reads back the same).
//! - [`notation`]: the index-notation front end; an accepted program prints as stage-I
//!   text that parses back to the same text, and lowers without a panic.
//! - [`coord_ir`], [`loops_ir`]: the text IR parsers; accepted text prints back to text
//!   that parses to the same print, and the verifier (and, for verified stage-I programs,
//!   lowering) does not panic.
//! - [`trace_json`]: schedule traces; an accepted trace serialises back to an equal one,
//!   and replaying it on a program and finishing the schedule does not panic.
//! - [`differential`]: a structure-aware fuzzer. The bytes choose an operation (SpMV,
//!   SpMM, SDDMM), a format, sizes, the stored entries, whether to `specialize` K, and a
//!   sequence of schedule calls (split, fuse, reorder, parallel, parallel_with, vectorize,
//!   vectorize_reduction, unroll, bound with true extents, cache_write, cache_read,
//!   rfactor, parallel_reduce, prefetch, register_tile, absorb_init) on the loops and buffers the
//!   program has at that point; every accepted schedule is lowered to
//!   stage III and run by the flat interpreter (and, with `native`, compiled to C and run
//!   on one and three threads), and the results must equal the stage-I interpreter's.
//!   Replaying the recorded trace must give the same program.

use std::collections::HashMap;

use arbitrary::Unstructured;
use sparsile_formats::{container, mtx, CooTensor, Format, SparseTensor};
use sparsile_ir::loops::{Expr, Func, Stmt};
use sparsile_runtime::{interpret, InterpOptions, Outputs};
use sparsile_transform::schedule::partition::LoopPartition;
use sparsile_transform::schedule::reduction::ReductionStrategy;
use sparsile_transform::schedule::{LoopRef, Schedule, SplitTail, Trace};

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// Value bits, so that NaN compares equal to itself.
fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The Matrix Market reader.
pub fn mtx(data: &[u8]) {
    let Ok(read) = mtx::read(data, &mtx::MtxReadOptions::default()) else {
        return;
    };
    let options = mtx::MtxWriteOptions::general(mtx::MtxField::Real);
    let mut out = Vec::new();
    mtx::write(&mut out, &read, &options).expect("an accepted matrix writes");
    let back = mtx::read(&out[..], &mtx::MtxReadOptions::default()).expect("written reads back");
    assert_eq!(back.shape(), read.shape());
    match (&back, &read) {
        (mtx::MtxData::Sparse(a), mtx::MtxData::Sparse(b)) => {
            assert_eq!(a.coords, b.coords);
            assert_eq!(bits(&a.values), bits(&b.values));
        }
        (mtx::MtxData::Dense { values: a, .. }, mtx::MtxData::Dense { values: b, .. }) => {
            assert_eq!(bits(a), bits(b));
        }
        _ => panic!("the kind of matrix changed through a round trip"),
    }
    // CSR needs a row array as long as the declared rows: within the memory available,
    // but past the fuzzer's own memory limit when a header declares billions of rows.
    if read.shape()[0] > 1 << 20 {
        return;
    }
    if let Ok(t) = read.to_tensor(&Format::Csr) {
        let coo = t.to_coo().expect("a converted matrix reads back");
        assert!(coo.nnz() <= t.nnz_stored());
    }
}

/// The `.spt` reader.
pub fn spt(data: &[u8]) {
    let Ok(t) = container::read(&mut &data[..]) else {
        return;
    };
    let coo = t.to_coo().expect("a validated tensor converts to COO");
    // (A dense copy within the memory available can be past the fuzzer's limit.)
    let elements = t.shape().iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if elements.is_some_and(|n| n <= 1 << 22) {
        let dense = t.try_to_dense_f64().expect("a small dense copy fits");
        assert_eq!(Some(dense.len()), elements);
    }
    let again = t.convert(&Format::Coo).expect("COO holds any tensor");
    let again = again.to_coo().expect("COO reads back");
    assert_eq!((&again.shape, &again.coords), (&coo.shape, &coo.coords));
    assert_eq!(bits(&again.values), bits(&coo.values));
    let mut out = Vec::new();
    container::write(&mut out, &t).expect("an accepted tensor writes");
    let back = container::read(&mut &out[..]).expect("written reads back");
    assert_eq!(back.structure, t.structure);
    assert_eq!(
        bits(&back.values.to_f64_vec()),
        bits(&t.values.to_f64_vec())
    );
}

/// The index-notation front end.
pub fn notation(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Ok(program) = sparsile::compile_notation(text) else {
        return;
    };
    let printed = program.to_string();
    let parsed: sparsile_ir::coord::Program = printed
        .parse()
        .unwrap_or_else(|e| panic!("printed program does not parse: {e}\n{printed}"));
    assert_eq!(parsed.to_string(), printed);
    let _ = sparsile_transform::lower_iterations(&program);
}

/// The stage-I text IR parser.
pub fn coord_ir(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Ok(program) = text.parse::<sparsile_ir::coord::Program>() else {
        return;
    };
    let printed = program.to_string();
    let parsed: sparsile_ir::coord::Program = printed
        .parse()
        .unwrap_or_else(|e| panic!("printed program does not parse: {e}\n{printed}"));
    assert_eq!(parsed.to_string(), printed);
    if sparsile_ir::coord::verify(&program).is_ok() {
        let _ = sparsile_transform::lower_iterations(&program);
    }
}

/// The loop-level (stages II and III) text IR parser.
pub fn loops_ir(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Ok(func) = text.parse::<Func>() else {
        return;
    };
    let printed = func.to_string();
    let parsed: Func = printed
        .parse()
        .unwrap_or_else(|e| panic!("printed function does not parse: {e}\n{printed}"));
    assert_eq!(parsed.to_string(), printed);
    let _ = sparsile_ir::loops::verify(&func);
}

/// SpMM with the dimension names `--expr` gives, so that traces the CLI saves replay.
const SPMM: &str = "tensor A: f64[n_i, n_j] csr\ntensor B: f64[n_j, n_k]\ntensor C: f64[n_i, n_k]\nC[i,k] = A[i,j] * B[j,k]\n";

/// Schedule traces in JSON.
pub fn trace_json(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Ok(trace) = Trace::from_json(text) else {
        return;
    };
    let again = Trace::from_json(&trace.to_json()).expect("a written trace reads back");
    assert_eq!(again, trace);
    let program = sparsile::compile_notation(SPMM).expect("SpMM compiles");
    if let Ok(schedule) = trace.replay(&program) {
        let _ = schedule.finish();
    }
}

/// Every loop of `func`, block by block, with its bounds.
fn loops(func: &Func) -> Vec<(LoopRef, Expr, Expr)> {
    fn walk(func: &Func, stmts: &[Stmt], block: &str, out: &mut Vec<(LoopRef, Expr, Expr)>) {
        for s in stmts {
            match s {
                Stmt::For(f) => {
                    out.push((
                        LoopRef::new(block, &func.vars[f.var].name),
                        f.lo.clone(),
                        f.hi.clone(),
                    ));
                    walk(func, &f.body, block, out);
                }
                Stmt::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(func, then_body, block, out);
                    walk(func, else_body, block, out);
                }
                Stmt::Block { name, body, .. } => walk(func, body, name, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(func, &func.body, "", &mut out);
    out
}

const FORMATS: &[&str] = &[
    "csr",
    "csc",
    "coo",
    "dcsr",
    "bsr:2x2",
    "bsr:1x3",
    "dbsr:2x2",
    "ell",
    "dia",
    "srbcrs:2x2",
    "ragged",
];

/// The program of operation `op` over a sparse `A` in `format`.
fn program_text(op: u8, format: &str) -> String {
    match op % 3 {
        0 => format!(
            "tensor A: f64[m, n] {format}\ntensor x: f64[n]\ntensor y: f64[m]\ny[i] = A[i,j] * x[j]\n"
        ),
        1 => format!(
            "tensor A: f64[m, n] {format}\ntensor B: f64[n, k]\ntensor C: f64[m, k]\nC[i,k] = A[i,j] * B[j,k]\n"
        ),
        _ => format!(
            "tensor A: f64[m, n] {format}\ntensor X: f64[m, k]\ntensor Y: f64[k, n]\ntensor C: f64[m, n] {format}\nC[i,j] = A[i,j] * X[i,k] * Y[k,j]\n"
        ),
    }
}

/// A value of a few bits: a small multiple of 1/4, so every sum is exact.
fn value(u: &mut Unstructured<'_>) -> arbitrary::Result<f64> {
    Ok(f64::from(u.int_in_range(-8i8..=8)?) * 0.25)
}

/// Inputs of the program: `A` with the entries the bytes choose, dense operands filled.
fn inputs(
    u: &mut Unstructured<'_>,
    ast: &sparsile::notation::ast::Program,
    sizes: &HashMap<&str, usize>,
) -> arbitrary::Result<Option<HashMap<String, SparseTensor<'static>>>> {
    let checked = match sparsile::notation::check(ast) {
        Ok(c) => c,
        Err(_) => return Ok(None),
    };
    let mut out = HashMap::new();
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
        let mut coo = CooTensor::empty(shape.clone());
        for flat in 0..total {
            if checked.is_sparse(t) && !u.ratio(1u8, 3u8)? {
                continue;
            }
            let mut rest = flat;
            let mut coord = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                coord[d] = rest % shape[d];
                rest /= shape[d];
            }
            coo.coords.extend_from_slice(&coord);
            coo.values.push(value(u)?);
        }
        let Ok(tensor) = SparseTensor::from_coo_with(&coo, &decl.format, decl.dtype) else {
            return Ok(None);
        };
        out.insert(decl.name.clone(), tensor);
    }
    Ok(Some(out))
}

/// One schedule call on a loop of the current function, chosen by the bytes; refused
/// calls record nothing.
fn schedule_call(
    u: &mut Unstructured<'_>,
    sch: &mut Schedule,
    sizes: &HashMap<&str, usize>,
) -> arbitrary::Result<()> {
    let Ok(func) = sch.func_or_lower() else {
        return Ok(());
    };
    let all = loops(func);
    if all.is_empty() {
        return Ok(());
    }
    let (target, lo, hi) = u.choose(&all)?.clone();
    let param_value = |e: &Expr| match e {
        Expr::Param(p) => sizes.get(func.params[*p].name.as_str()).copied(),
        _ => None,
    };
    let trip = match lo {
        Expr::Int(0) => param_value(&hi),
        _ => None,
    };
    let other = u.choose(&all)?.0.clone();
    let buffers: Vec<String> = func.buffers.values().map(|b| b.name.clone()).collect();
    let buffer = u.choose(&buffers)?.clone();
    let indptrs: Vec<String> = buffers
        .iter()
        .filter(|b| b.ends_with("indptr"))
        .cloned()
        .collect();
    let _ = match u.int_in_range(0u8..=15)? {
        0 => sch.parallel(&target),
        1 => sch.vectorize(&target),
        2 => sch.unroll(&target),
        3 => {
            let factor = i64::from(u.int_in_range(1u8..=9)?);
            let tail = if u.arbitrary()? {
                SplitTail::InnerFixed
            } else {
                SplitTail::OuterFixed
            };
            sch.split(&target, factor, tail).map(|_| ())
        }
        4 => sch.fuse(&target, &other).map(|_| ()),
        5 => sch.reorder(&[target, other]),
        6 => match trip {
            // `bound` is a promise about the trip count: only true promises are made.
            Some(trip) => {
                let extent = trip as i64 + i64::from(u.int_in_range(0u8..=2)?);
                sch.bound(&target, extent)
            }
            None => Ok(()),
        },
        7 => {
            let partition = match u.int_in_range(0u8..=2)? {
                0 => LoopPartition::Static,
                1 => LoopPartition::Dynamic,
                _ => match indptrs.first() {
                    Some(indptr) => LoopPartition::Balanced {
                        indptr: u.choose(&indptrs).unwrap_or(indptr).clone(),
                    },
                    None => LoopPartition::Dynamic,
                },
            };
            sch.parallel_with(&target, &partition)
        }
        8 => sch.cache_write(&target, &buffer).map(|_| ()),
        9 => sch.cache_read(&target, &buffer).map(|_| ()),
        10 => sch.rfactor(&target, &other).map(|_| ()),
        11 => {
            let strategy = if u.arbitrary()? {
                ReductionStrategy::Atomic
            } else {
                ReductionStrategy::PerThread {
                    copies: i64::from(u.int_in_range(1u8..=4)?),
                }
            };
            sch.parallel_reduce(&target, strategy)
        }
        12 => {
            let sums = u.int_in_range(1u32..=4)?;
            sch.vectorize_reduction(&target, sums, u.arbitrary()?)
        }
        13 => sch.prefetch(&target, &buffer, i64::from(u.int_in_range(1u8..=16)?)),
        14 => sch.register_tile(&target),
        _ => sch.absorb_init(&target.block, &buffer),
    };
    Ok(())
}

fn compare(label: &str, expected: &Outputs, got: &Outputs, context: &dyn Fn() -> String) {
    for (name, want) in expected {
        let want = want.values.to_f64_vec();
        let have = got
            .get(name)
            .unwrap_or_else(|| panic!("{label}: no output {name}\n{}", context()))
            .values
            .to_f64_vec();
        assert_eq!(have.len(), want.len(), "{label}: {name}\n{}", context());
        for (k, (h, w)) in have.iter().zip(&want).enumerate() {
            assert!(
                (h - w).abs() <= 1e-9 * (1.0 + w.abs()),
                "{label}: {name}[{k}] is {h}, the interpreter says {w}\n{}",
                context()
            );
        }
    }
}

/// The differential fuzzer (see the crate docs); `native` also compiles to C.
pub fn differential(data: &[u8], native: bool) {
    let mut u = Unstructured::new(data);
    let _ = differential_with(&mut u, native);
}

fn differential_with(u: &mut Unstructured<'_>, native: bool) -> arbitrary::Result<()> {
    let op = u.arbitrary::<u8>()?;
    let format = *u.choose(FORMATS)?;
    let text = program_text(op, format);
    let sizes: HashMap<&str, usize> = [
        ("m", u.int_in_range(0..=9)?),
        ("n", u.int_in_range(1..=9)?),
        ("k", u.int_in_range(1..=5)?),
    ]
    .into_iter()
    .collect();
    let ast = sparsile::notation::parse(&text).expect("the templates parse");
    let Some(inputs) = inputs(u, &ast, &sizes)? else {
        return Ok(());
    };
    let Ok(program) = sparsile::notation::lower(&ast) else {
        return Ok(());
    };
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
    let Ok(expected) = interpret(&program, &inputs, &options) else {
        return Ok(());
    };
    let mut sch = Schedule::new(&program);
    if u.ratio(1u8, 4u8)? {
        // Stage I: fix K to its true value (checked when the inputs are bound).
        let _ = sch.specialize("k", sizes["k"] as i64);
    }
    let calls = u.int_in_range(0u8..=8)?;
    for _ in 0..calls {
        schedule_call(u, &mut sch, &sizes)?;
    }
    let trace = sch.trace().clone();
    let stage2_text = sch.func().map(|f| f.to_string()).unwrap_or_default();
    if let Some(func) = sch.func() {
        let replayed = trace.replay(&program).unwrap_or_else(|e| {
            panic!(
                "the recorded trace does not replay: {e}\n{}",
                trace.to_json()
            )
        });
        assert_eq!(
            replayed.func().map(|f| f.to_string()),
            Some(func.to_string()),
            "replay gives another program"
        );
    }
    let Ok(lowered) = sch.finish() else {
        return Ok(());
    };
    let context = || format!("{text}{sizes:?}\ntrace {}\n{stage2_text}", trace.to_json());
    sparsile_ir::loops::verify(&lowered.stage3)
        .unwrap_or_else(|e| panic!("stage III does not verify: {e:?}\n{}", context()));
    for (label, func) in [
        ("stage II", &lowered.stage2),
        ("stage III", &lowered.stage3),
    ] {
        let got = sparsile_runtime::flat_interp::run(func, &program, &inputs, &options)
            .unwrap_or_else(|e| panic!("{label}: {e}\n{}", context()));
        compare(label, &expected, &got, &context);
    }
    if native {
        run_native(&program, &lowered, &inputs, &options, &expected, &context);
    }
    Ok(())
}

fn run_native(
    program: &sparsile_ir::coord::Program,
    lowered: &sparsile_transform::Lowered,
    inputs: &HashMap<String, SparseTensor<'static>>,
    options: &InterpOptions,
    expected: &Outputs,
    context: &dyn Fn() -> String,
) {
    let settings = sparsile_ir::settings::Settings::from_env();
    let Ok(source) = sparsile_codegen_source(&lowered.stage3) else {
        return;
    };
    let kernel = match sparsile_runtime::CompiledKernel::build(
        program.clone(),
        lowered.stage3.clone(),
        source,
        &settings,
    ) {
        Ok(k) => k,
        Err(sparsile_runtime::KernelError::Jit(sparsile_runtime::jit::JitError::NoCompiler {
            ..
        })) => return,
        Err(e) => panic!("build: {e}\n{}", context()),
    };
    for threads in [1, 3] {
        let got = kernel
            .run(
                inputs,
                &sparsile_runtime::KernelOptions {
                    params: options.params.clone(),
                    threads: Some(threads),
                    parallelism: sparsile_runtime::jit::Parallelism::Always,
                    ..Default::default()
                },
            )
            .unwrap_or_else(|e| panic!("run: {e}\n{}", context()));
        compare(
            &format!("native, {threads} threads"),
            expected,
            &got,
            context,
        );
    }
}

fn sparsile_codegen_source(func: &Func) -> Result<String, String> {
    sparsile_codegen::emit_c(func)
        .map(|s| s.code)
        .map_err(|e| e.to_string())
}
