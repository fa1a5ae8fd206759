//! `tensorize`: the before/after text files (`schedule/tensorize/X.before` names the calls
//! in its leading `# ` lines: `split BLOCK VAR FACTOR`, `reorder BLOCK VAR...`,
//! `bind BLOCK VAR AXIS`, `tensorize BLOCK VAR SHAPE TYPE`; `SPARSILE_BLESS=1` rewrites
//! `X.after`), one test per precondition with its exact message, and the `Schedule`
//! method with its trace step (JSON round trip and replay).

// `ScheduleError` is large by design (it names the loop, block and span); the library
// allows this lint too.
#![allow(clippy::result_large_err)]

mod expected_text;

use sparsile_ir::loops::{verify, Func, GpuAxis, MmaShape, MmaType};
use sparsile_transform::schedule::{
    bind, reorder, split, tensorize, LoopRef, ScheduleError, SplitTail,
};

fn at(block: &str, var: &str) -> LoopRef {
    LoopRef::new(block, var)
}

/// Applies one `# ` call of a `.before` file.
fn call(func: &Func, line: &str) -> Result<Func, ScheduleError> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["split", b, v, f] => {
            split(func, &at(b, v), f.parse().unwrap(), SplitTail::InnerFixed).map(|(f, _, _)| f)
        }
        ["reorder", b, vars @ ..] => {
            let loops: Vec<LoopRef> = vars.iter().map(|v| at(b, v)).collect();
            reorder(func, &loops)
        }
        ["bind", b, v, a] => bind(func, &at(b, v), GpuAxis::parse(a).unwrap()),
        ["tensorize", b, v, shape, ty] => tensorize(
            func,
            &at(b, v),
            MmaShape::parse(shape).unwrap(),
            MmaType::parse(ty).unwrap(),
        ),
        _ => panic!("unknown call `{line}`"),
    }
}

fn apply(func: &Func, lines: &[&str]) -> Func {
    let mut func = func.clone();
    for line in lines {
        func = call(&func, line).unwrap_or_else(|e| panic!("`{line}`: {e}"));
        verify(&func).unwrap_or_else(|e| panic!("`{line}`: does not verify: {e:?}"));
    }
    func
}

#[test]
fn before_after_files() {
    for file in expected_text::before_files("tensorize") {
        let lines: Vec<&str> = file.calls.iter().map(String::as_str).collect();
        let func = apply(&file.func, &lines);
        expected_text::check_after(&file.path, &func.to_string());
    }
}

/// The BSR SpMM nest of `bsr16_f16.before` (16x16 blocks of f16, K = 20), after the
/// calls that place it in a launch.
fn placed() -> Func {
    let file = expected_text::before_files("tensorize")
        .into_iter()
        .find(|f| f.path.ends_with("bsr16_f16.before"))
        .unwrap();
    apply(
        &file.func,
        &[
            "split C k_2 8",
            "reorder C k_2_o ii ji",
            "bind C io blockIdx.x",
            "bind C k_2_o threadIdx.y",
        ],
    )
}

/// The message of `tensorize BLOCK VAR SHAPE TYPE` on `func`.
fn error(func: &Func, line: &str) -> String {
    match call(func, line) {
        Ok(out) => panic!("`{line}`: expected an error, got\n{out}"),
        Err(e) => e.to_string(),
    }
}

/// `placed()` with `from` replaced by `to` in its text.
fn edited(from: &str, to: &str) -> Func {
    let text = placed().to_string();
    assert!(text.contains(from), "no `{from}` in\n{text}");
    text.replace(from, to).parse().unwrap()
}

#[test]
fn tensorize_preconditions() {
    let update = "C[io * 16 + ii, k_2] = C[io * 16 + ii, k_2] + select(jo < A_JO_len, A[io, jo_p, ii, ji], 0.0) * select(jo * 16 + ji < n, B[jo * 16 + ji, k_2], 0.0)";
    let before = expected_text::before_files("tensorize")
        .into_iter()
        .find(|f| f.path.ends_with("bsr16_f16.before"))
        .unwrap()
        .func;
    let cases: Vec<(String, &str)> = vec![
        (
            error(&placed(), "tensorize C ii m16n8k4 f16"),
            "tensorize: there is no m16n8k4 mma for f16 operands (it has m16n8k16 and m16n8k8)",
        ),
        (
            error(&placed(), "tensorize C io m16n8k16 f16"),
            "tensorize: loop `io` in block `C` (line 31, column 5) is bound, only serial loops (and, for split, parallel ones) can be transformed",
        ),
        (
            error(&edited("C[io * 16 + ii, k_2] = C[io * 16 + ii, k_2]", "C[io * 16 + ii + ji, k_2] = C[io * 16 + ii + ji, k_2]"), "tensorize C ii m16n8k16 f16"),
            "tensorize: loop `ii` in block `C` (line 29, column 13): the nest is not a tile product: the accumulator's element `C[io * 16 + ii + ji, k_2_o * 8 + k_2_i]` reads 3 of the three loops (an mma tile reads two: its rows and columns; the third is summed over)",
        ),
        (
            error(&placed(), "tensorize C jo_p m16n8k16 f16"),
            "tensorize: loop `jo_p` in block `C` (line 32, column 7): the nest is not a tile product: loop `k_2_o` is `bound` (the tile's loops are serial)",
        ),
        (
            error(&placed(), "tensorize C ji m16n8k16 f16"),
            "tensorize: loop `ji` in block `C` (line 35, column 11): the nest is not a tile product: the update lies in 2 loops (a tile product has three: rows, columns, depth)",
        ),
        (
            error(&edited(update, &format!("{update}\n                  C[0, 0] = 1.0")), "tensorize C ii m16n8k16 f16"),
            "tensorize: loop `ii` in block `C` (line 29, column 13): the nest is not a tile product: a body holds more than one statement (the second at line 36, column 19); a tile product is one update under its loops",
        ),
        (
            error(&edited("C[io * 16 + ii, k_2] + select", "C[io * 16 + ii, k_2] - select"), "tensorize C ii m16n8k16 f16"),
            "tensorize: loop `ii` in block `C` (line 29, column 13): the nest is not a tile product: the store to `C` is not an update `C[e] = C[e] + a * b`",
        ),
        (
            error(&edited("for ii in 0..16", "for ii in 0..8"), "tensorize C ii m16n8k16 f16"),
            "tensorize: loop `ii` in block `C` (line 29, column 13): loop `ii` runs the tile's rows over `0..8`; an m16n8k16 mma needs `0..N` or `lo..lo + N` with N a multiple of 16",
        ),
        (
            error(&edited("for ji in 0..16", "for ji in ii..ii + 16"), "tensorize C ii m16n8k16 f16"),
            "tensorize: loop `ii` in block `C` (line 29, column 13): the nest is not a tile product: the start `ii` of loop `ji` reads a loop of the tile (each tile loop runs over a range fixed outside the tile)",
        ),
        (
            error(&edited("for ji in 0..16", "for ji in jo_p..jo_p + 12"), "tensorize C ii m16n8k16 f16"),
            "tensorize: loop `ii` in block `C` (line 29, column 13): loop `ji` runs the tile's depth over `jo_p..jo_p + 12`; an m16n8k16 mma needs `0..N` or `lo..lo + N` with N a multiple of 16",
        ),
        (
            error(&edited("buffer B: f16[", "buffer B: f64["), "tensorize C ii m16n8k8 tf32"),
            "tensorize: loop `ii` in block `C` (line 29, column 13): the right operand `select(jo * 16 + ji < n, B[jo * 16 + ji, k_2_o * 8 + k_2_i], 0.0)` reads f64 buffer `B` (tf32 keeps 10 mantissa bits)",
        ),
        (
            error(&placed(), "tensorize C ii m16n8k16 bf16"),
            "tensorize: loop `ii` in block `C` (line 34, column 9): the left operand `select(jo < A_JO_len, A[io, jo_p, ii, ji], 0.0)` is not bf16 values (an mma on bf16 operands multiplies loads of bf16 buffers, zeros and selects of them exactly, and would round anything else; tf32 takes f32 values)",
        ),
        (
            error(&edited("buffer C: f32[", "buffer C: f16["), "tensorize C ii m16n8k16 f16"),
            "tensorize: loop `ii` in block `C` (line 29, column 13): the accumulator `C` is f16; tensor cores accumulate in f32",
        ),
        (
            error(&edited("C[io * 16 + ii, k_2] = C[io * 16 + ii, k_2]", "C[io * 16 + ii, k_2 + ii] = C[io * 16 + ii, k_2 + ii]"), "tensorize C ii m16n8k16 f16"),
            "tensorize: loop `ii` in block `C` (line 29, column 13): the accumulator's element `C[io * 16 + ii, k_2_o * 8 + k_2_i + ii]` is not provably distinct for distinct rows `ii` and columns `k_2_i` of a tile (each must be added with a constant coefficient, in an index of its own or with steps that keep the tile's positions apart)",
        ),
        (
            error(&edited("select(jo < A_JO_len, A[", "select(C[0, 0] < 1.0, A["), "tensorize C ii m16n8k16 f16"),
            "tensorize: loop `ii` in block `C` (line 29, column 13): the left operand `select(C[0, 0] < 1.0, A[io, jo_p, ii, ji], 0.0)` reads the accumulator `C` (an mma reads its tile before it writes it)",
        ),
        (
            error(&edited("if io * 16 + ii < m {", "if io * 16 + ii < m && ji < 9 {"), "tensorize C ii m16n8k16 f16"),
            "tensorize: loop `ii` in block `C` (line 29, column 13): condition `ji < 9` reads the depth loop `ji` (an mma sums every product of its tile)",
        ),
        (
            error(&edited("if io * 16 + ii < m {", "if io * 16 + ii < m + k_2 {"), "tensorize C ii m16n8k16 f16"),
            "tensorize: loop `ii` in block `C` (line 29, column 13): condition `io * 16 + ii < m + (k_2_o * 8 + k_2_i)` reads both the row loop `ii` and the column loop `k_2_i` (the operands are loaded whole: a condition guards rows or columns)",
        ),
        (
            error(&before, "tensorize C ii m16n8k16 f16"),
            "tensorize: loop `ii` in block `C` (line 34, column 9) cannot run as a warp's mma: it is not in a launch (bind the loops around it to the GPU first)",
        ),
        (
            error(
                &edited("for k_2_o in 0..3 bind(threadIdx.y) {", "for k_2_o in 0..3 bind(threadIdx.x) {"),
                "tensorize C ii m16n8k16 f16",
            ),
            "tensorize: loop `ii` in block `C` (line 29, column 13) cannot run as a warp's mma: a loop around it is bound to `threadIdx.x`, which the warp's lanes take",
        ),
        (
            error(
                &edited("for jo_p in", "for wide in 0..64 bind(threadIdx.x) {\n}\nfor jo_p in"),
                "tensorize C ii m16n8k16 f16",
            ),
            "tensorize: loop `ii` in block `C` (line 31, column 13) cannot run as a warp's mma: its launch would be 64 threads wide along `threadIdx.x` (a warp's lanes are the 32 threads along `threadIdx.x`; another loop of the launch is bound to it with more iterations)",
        ),
        (
            error(
                &edited("for jo_p in", "C[0, 0] = 0.0\nfor jo_p in"),
                "tensorize C ii m16n8k16 f16",
            ),
            "tensorize: loop `ii` in block `C` (line 30, column 13) cannot run as a warp's mma: the launch would have 96 threads per block, but the store to `C` (line 26, column 9) is outside every loop bound to `threadIdx.x`, so every thread would store it",
        ),
    ];
    let mut failures = Vec::new();
    for (got, want) in &cases {
        if got != want {
            failures.push(format!("got:  {got}\nwant: {want}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_schedule_records_tensorize_and_replays_it() {
    let program = sparsile::compile_notation(
        "tensor A: f16[m, n] bsr:16x16\ntensor B: f16[n, k]\ntensor C: f32[m, k]\nC[i,k] = A[i,j] * B[j,k]\n",
    )
    .unwrap();
    let mut sch = sparsile_transform::schedule::Schedule::new(&program);
    sch.specialize("k", 16).unwrap();
    let (k_o, _) = sch
        .split(&at("C", "k2_2"), 8, SplitTail::InnerFixed)
        .unwrap();
    sch.reorder(&[k_o.clone(), at("C", "ii"), at("C", "ji")])
        .unwrap();
    sch.bind(&at("C", "io"), GpuAxis::parse("blockIdx.x").unwrap())
        .unwrap();
    sch.bind(&k_o, GpuAxis::parse("threadIdx.y").unwrap())
        .unwrap();
    sch.tensorize(&at("C", "ii"), MmaShape::M16N8K16, MmaType::F16)
        .unwrap();
    let json = sch.trace().to_json();
    assert!(
        json.contains("\"step\": \"tensorize\"")
            && json.contains("\"shape\": \"m16n8k16\"")
            && json.contains("\"ty\": \"f16\""),
        "{json}"
    );
    let replayed = sparsile_transform::schedule::Trace::from_json(&json)
        .unwrap()
        .replay(&program)
        .unwrap();
    assert_eq!(
        replayed.func().unwrap().to_string(),
        sch.func().unwrap().to_string()
    );
    assert!(sch
        .func()
        .unwrap()
        .to_string()
        .contains("mma m16n8k16 f16 (ii, k2_2_i, ji)"));
    // The SIMT interpreter runs the result as the stage-I interpreter runs the program
    // (f16 values, so the products are exact; sums in f32 against f64).
    let lowered = sch.clone().finish().unwrap();
    let bsr: sparsile_formats::Format = "bsr:16x16".parse().unwrap();
    let entries: Vec<(usize, usize, f64)> = (0..37)
        .flat_map(|i| {
            (0..29)
                .filter(move |j| (i * 7 + j * 3) % 5 == 0)
                .map(move |j| (i, j, ((i + 2 * j) % 9) as f64 / 8.0 - 0.5))
        })
        .collect();
    let coo = sparsile_formats::CooTensor::from_triplets(vec![37, 29], &entries).unwrap();
    let b: Vec<f64> = (0..29 * 16)
        .map(|x| ((x * 5) % 11) as f64 / 4.0 - 1.0)
        .collect();
    let inputs = std::collections::HashMap::from([
        (
            "A".to_string(),
            sparsile_formats::SparseTensor::from_coo_with(&coo, &bsr, sparsile_ir::DType::F16)
                .unwrap(),
        ),
        (
            "B".to_string(),
            sparsile_formats::SparseTensor::dense_from_f64(&[29, 16], &b, sparsile_ir::DType::F16)
                .unwrap(),
        ),
    ]);
    let opts = sparsile_runtime::InterpOptions {
        params: std::collections::HashMap::from([("m".to_string(), 37)]),
        ..Default::default()
    };
    let got = sparsile_runtime::simt::run(&lowered.stage3, &program, &inputs, &opts).unwrap();
    let want = sparsile_runtime::interpret(&program, &inputs, &opts).unwrap();
    let (got, want) = (got["C"].values.to_f64_vec(), want["C"].values.to_f64_vec());
    assert_eq!(got.len(), 37 * 16);
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{g} vs {w}");
    }
    // A failing call changes nothing.
    let before = sch.func().unwrap().to_string();
    assert!(sch
        .tensorize(&at("C", "io"), MmaShape::M16N8K16, MmaType::F16)
        .is_err());
    assert_eq!(sch.func().unwrap().to_string(), before);
}
