//! `mma` in the SIMT interpreter: block-sparse SpMM written with it in the text IR
//! (`tests/simt/bsr_mma.flat`, f16 and bf16 m16n8k16 and m16n8k8, tf32 m16n8k8 and
//! m16n8k4) against the stage-I interpreter on BSR inputs (partial last blocks, empty
//! block rows, no rows, no blocks, widths that are not a multiple of 8), the rounding of
//! operands to the operand type, and each rule the interpreter enforces with its exact
//! message.

#[path = "simt/mod.rs"]
mod support;

use std::collections::HashMap;

use sparsile_formats::{CooTensor, Format, SparseTensor};
use sparsile_ir::coord::Program;
use sparsile_ir::loops::Func;
use sparsile_ir::DType;
use sparsile_runtime::simt::{self, SimtError, SimtOptions};
use sparsile_runtime::{interpret, InterpOptions};

use support::{nonzero, rng, rows, SEEDS};

const SIR: &str = include_str!("simt/bsr.sir");
const FLAT: &str = include_str!("simt/bsr_mma.flat");

/// The program and kernel for buffers of `dtype`, `mma` shape and type `mma`, and `depth`
/// `mma`s per 16 columns of a block.
fn kernel(dtype: DType, mma: &str, depth: u32) -> (Program, Func) {
    let p: Program = SIR
        .replace("TYPE", dtype.name())
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    let f: Func = FLAT
        .replace("TYPE", dtype.name())
        .replace("MMA", mma)
        .replace("DEPTH", &depth.to_string())
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    (p, f)
}

/// A value of `dtype` (f16 and bf16 values in [-1, 1) are rounded to the type).
fn value(r: &mut rand_chacha::ChaCha8Rng, dtype: DType) -> f64 {
    let x = nonzero(r);
    let t = SparseTensor::dense_from_f64(&[1], &[x], dtype).unwrap();
    t.values.get_f64(0)
}

fn inputs(
    coo: &CooTensor,
    k: usize,
    dtype: DType,
    seed: u64,
) -> HashMap<String, SparseTensor<'static>> {
    let mut r = rng(seed);
    let mut coo = coo.clone();
    coo.values
        .iter_mut()
        .for_each(|v| *v = value(&mut r, dtype));
    let n = coo.shape[1];
    let b: Vec<f64> = (0..n * k).map(|_| value(&mut r, dtype)).collect();
    let bsr: Format = "bsr:16x16".parse().unwrap();
    HashMap::from([
        (
            "A".to_string(),
            SparseTensor::from_coo_with(&coo, &bsr, dtype).unwrap(),
        ),
        (
            "B".to_string(),
            SparseTensor::dense_from_f64(&[n, k], &b, dtype).unwrap(),
        ),
    ])
}

/// BSR inputs: partial last blocks, empty block rows, no rows, no entries, whole blocks.
fn matrices() -> Vec<(&'static str, CooTensor)> {
    let mut r = rng(21);
    vec![
        ("37x29", rows(&mut r, 37, 29, |i| 1 + i % 5)),
        (
            "empty block rows 70x40",
            rows(
                &mut r,
                70,
                40,
                |i| if (16..48).contains(&i) { 0 } else { 3 },
            ),
        ),
        ("no rows", CooTensor::empty(vec![0, 5])),
        ("no entries", CooTensor::empty(vec![20, 9])),
        ("whole blocks 32x48", rows(&mut r, 32, 48, |i| 2 + i % 7)),
    ]
}

/// The f32 results must be the reference's to within f32 accumulation: the products of
/// f16/bf16/tf32 values are exact, and the sum is rounded to f32 once per block.
fn close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

#[test]
fn bsr_spmm_on_tensor_cores_matches_the_interpreter() {
    let cases = [
        (DType::F16, "m16n8k16 f16", 1),
        (DType::F16, "m16n8k8 f16", 2),
        (DType::BF16, "m16n8k16 bf16", 1),
        (DType::BF16, "m16n8k8 bf16", 2),
        (DType::F32, "m16n8k8 tf32", 2),
        (DType::F32, "m16n8k4 tf32", 4),
    ];
    let mut runs = 0;
    for (dtype, mma, depth) in cases {
        let (p, f) = kernel(dtype, mma, depth);
        sparsile_ir::loops::verify(&f).unwrap_or_else(|e| panic!("{mma}: {e:?}"));
        for k in [8, 20, 3] {
            for (case, coo) in matrices() {
                let what = format!("{mma}, {case}, k = {k}");
                let mut ins = inputs(&coo, k, dtype, runs);
                if dtype == DType::F32 {
                    // Values with 10 mantissa bits: tf32 rounding keeps them exact.
                    for t in ins.values_mut() {
                        let v: Vec<f64> = t
                            .values
                            .to_f64_vec()
                            .iter()
                            .map(|x| (x * 1024.0).round() / 1024.0)
                            .collect();
                        *t = SparseTensor {
                            structure: t.structure.clone(),
                            values: sparsile_formats::Values::from_f64(&v, DType::F32),
                        };
                    }
                }
                let opts = InterpOptions {
                    params: HashMap::from([("m".to_string(), coo.shape[0] as i64)]),
                    ..Default::default()
                };
                let want = interpret(&p, &ins, &opts).unwrap_or_else(|e| panic!("{what}: {e}"));
                let mut first = None;
                for seed in SEEDS {
                    let simt = SimtOptions {
                        seed,
                        verify_func: true,
                    };
                    let got = simt::run_with(&f, &p, &ins, &opts, &simt)
                        .unwrap_or_else(|e| panic!("{what}, seed {seed}: {e}"));
                    close(
                        &got["C"].values.to_f64_vec(),
                        &want["C"].values.to_f64_vec(),
                        &format!("{what}, seed {seed}"),
                    );
                    let bits = got["C"].values.to_f64_vec();
                    assert_eq!(
                        first.get_or_insert(bits.clone()),
                        &bits,
                        "{what}: seeds differ"
                    );
                }
                runs += 1;
            }
        }
    }
    assert_eq!(runs, 6 * 3 * 5);
}

/// Operands are rounded to the operand type: f32 values through tf32 lose their low
/// mantissa bits (to nearest, ties away from zero) before the products.
#[test]
fn tf32_operands_are_rounded_before_the_products() {
    let (p, f) = kernel(DType::F32, "m16n8k8 tf32", 2);
    let coo = CooTensor::from_triplets(vec![16, 16], &[(0, 0, 1.0 + 2f64.powi(-11))]).unwrap();
    let mut ins = inputs(&coo, 8, DType::F32, 0);
    let ones = vec![1.0 + 2f64.powi(-12); 16 * 8];
    ins.insert(
        "B".into(),
        SparseTensor::dense_from_f64(&[16, 8], &ones, DType::F32).unwrap(),
    );
    let a = SparseTensor::from_coo_with(&coo, &"bsr:16x16".parse().unwrap(), DType::F32).unwrap();
    ins.insert("A".into(), a);
    let opts = InterpOptions {
        params: HashMap::from([("m".to_string(), 16)]),
        ..Default::default()
    };
    let got = simt::run(&f, &p, &ins, &opts).unwrap();
    // A's 1 + 2^-11 rounds up to 1 + 2^-10; B's 1 + 2^-12 rounds down to 1.
    let c = got["C"].values.to_f64_vec();
    assert_eq!(c[0], 1.0 + 2f64.powi(-10));
    assert_eq!(c[8], 0.0);
}

/// A function with one launch of `body` (block `threads` wide) over 16x16 `A`, 16x8 `B`
/// and a 16x8 `C` (f16 operands), run on ones.
fn run_body(threads: &str, body: &str) -> Result<(), SimtError> {
    let sir = "func f() {
  axis I = dense_fixed(16)
  axis J = dense_fixed(16)
  axis K = dense_fixed(8)
  buffer A: f16[I, J] input
  buffer B: f16[J, K] input
  buffer C: f32[I, K] output
  iter f over [I: S, J: R, K: S] as (i, j, k) {
    C[i, k] = C[i, k] + A[i, j] * B[j, k]
  }
}
";
    let text = format!(
        "flat func f() {{
  buffer A: f16[256] input values
  buffer B: f16[128] input values
  buffer C: f32[128] output values
  buffer S: f32[128] temp shared
  launch go {{
    for b in 0..1 bind(blockIdx.x) {{
      for y in 0..{threads} bind(threadIdx.y) {{
        for x in 0..32 bind(threadIdx.x) {{
{body}
        }}
      }}
    }}
  }}
}}
"
    );
    let p: Program = sir.parse().unwrap();
    let f: Func = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
    let ones = |shape: &[usize]| {
        let n = shape.iter().product();
        SparseTensor::dense_from_f64(shape, &vec![1.0; n], DType::F16).unwrap()
    };
    let ins = HashMap::from([
        ("A".to_string(), ones(&[16, 16])),
        ("B".to_string(), ones(&[16, 8])),
    ]);
    let opts = SimtOptions {
        seed: 0,
        verify_func: false,
    };
    simt::run_with(&f, &p, &ins, &InterpOptions::default(), &opts).map(|_| ())
}

const MMA: &str = "mma m16n8k16 f16 (r, c, p) C[r * 8 + c] += A[r * 16 + p] * B[p * 8 + c]";

#[test]
fn mma_rules_are_reported_with_their_messages() {
    let cases: Vec<(String, &str)> = vec![
        (
            run_body("1", &format!("if x < 16 {{\n{MMA}\n}}")).unwrap_err().to_string(),
            "launch `go`, block (0, 0, 0), warp 0: `mma m16n8k16 f16` at line 11, column 1 needs every lane of the warp, but lanes 16-31 are inactive",
        ),
        (
            run_body("2", &format!("if y == 0 {{\n{MMA}\n}}")).map(|_| "ok".to_string()).unwrap_or_else(|e| e.to_string()),
            "ok",
        ),
        (
            run_body(
                "1",
                "mma m16n8k16 f16 (r, c, p) C[r * 8 + c] += A[r * 16 + p] * select(x < 3, B[p * 8 + c], 0.0)")
            .unwrap_err()
            .to_string(),
            "launch `go`, block (0, 0, 0), warp 0: `mma` at line 10, column 1 reads `x`, which differs between lane 0 and lane 1 (an `mma`'s expressions are the same in every lane of the warp)",
        ),
        (
            run_body(
                "1",
                "mma m16n8k16 f16 (r, c, p) C[r * 8 + c % 4] += A[r * 16 + p] * B[p * 8 + c]")
            .unwrap_err()
            .to_string(),
            "launch `go`, block (0, 0, 0), warp 0: `mma` at line 10, column 1 accumulates positions (0, 0) and (0, 4) of its tile into the same element `C[0]`",
        ),
        (
            run_body(
                "1",
                "mma m16n8k16 f16 (r, c, p) C[r * 8 + c] += A[r * 16 + p + 1] * B[p * 8 + c]")
            .unwrap_err()
            .to_string(),
            "launch `go`, block (0, 0, 0) thread (31, 0, 0): line 10, column 1: load of `A` at offset 256, outside its 256 elements",
        ),
        (
            run_body(
                "1",
                "mma m16n8k16 f16 (r, c, p) where r < 15: C[r * 8 + c + 8] += A[r * 16 + p] * B[p * 8 + c]")
            .map(|_| "ok".to_string())
            .unwrap_or_else(|e| e.to_string()),
            "ok",
        ),
        (
            // The shared tile is written by lane x and read by its owner without a
            // `sync_warp`.
            run_body(
                "1",
                "for e in 0..4 {\nS[x * 4 + e] = 0.0\n}\nmma m16n8k16 f16 (r, c, p) S[r * 8 + c] += A[r * 16 + p] * B[p * 8 + c]")
            .unwrap_err()
            .to_string(),
            "launch `go`: data race on `S[2]`: block (0, 0, 0) thread (0, 0, 0) stores it at line 11, column 1, and block (0, 0, 0) thread (1, 0, 0) loads it at line 13, column 1, with no barrier ordering the two",
        ),
        (
            run_body(
                "1",
                "for e in 0..4 {\nS[x * 4 + e] = 0.0\n}\nsync_warp\nmma m16n8k16 f16 (r, c, p) S[r * 8 + c] += A[r * 16 + p] * B[p * 8 + c]\nsync_warp\nfor e2 in 0..4 {\nC[x * 4 + e2] = S[x * 4 + e2]\n}")
            .map(|_| "ok".to_string())
            .unwrap_or_else(|e| e.to_string()),
            "ok",
        ),
        (
            run_body(
                "1",
                "mma m16n8k16 f16 (r, c, p) S[r * 8 + c] += A[r * 16 + p] * B[p * 8 + c]")
            .unwrap_err()
            .to_string(),
            "launch `go`: block (0, 0, 0) thread (0, 0, 0) loads shared `S[0]` at line 10, column 1, which no thread of the block has stored",
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
fn a_short_last_warp_is_refused() {
    let text = "flat func f() {
  buffer A: f16[256] input values
  buffer B: f16[128] input values
  buffer C: f32[128] output values
  launch go {
    for x in 0..48 bind(threadIdx.x) {
      mma m16n8k16 f16 (r, c, p) C[r * 8 + c] += A[r * 16 + p] * B[p * 8 + c]
    }
  }
}
";
    let f: Func = text.parse().unwrap();
    let p: Program = "func f() {
  axis I = dense_fixed(16)
  axis J = dense_fixed(16)
  axis K = dense_fixed(8)
  buffer A: f16[I, J] input
  buffer B: f16[J, K] input
  buffer C: f32[I, K] output
  iter f over [I: S, J: R, K: S] as (i, j, k) {
    C[i, k] = C[i, k] + A[i, j] * B[j, k]
  }
}
"
    .parse()
    .unwrap();
    let ones = |shape: &[usize]| {
        let n = shape.iter().product();
        SparseTensor::dense_from_f64(shape, &vec![1.0; n], DType::F16).unwrap()
    };
    let ins = HashMap::from([
        ("A".to_string(), ones(&[16, 16])),
        ("B".to_string(), ones(&[16, 8])),
    ]);
    let opts = SimtOptions {
        seed: 0,
        verify_func: false,
    };
    let err = simt::run_with(&f, &p, &ins, &InterpOptions::default(), &opts).unwrap_err();
    assert_eq!(
        err.to_string(),
        "launch `go`, block (0, 0, 0), warp 1: `mma m16n8k16 f16` at line 7, column 7 needs a whole warp of 32 lanes, but the block's 48 threads leave this warp 16"
    );
    // With the verifier on, the launch is refused before it runs.
    let err = simt::run(&f, &p, &ins, &InterpOptions::default()).unwrap_err();
    assert!(
        err.to_string().contains("whole warps of 32 are needed"),
        "{err}"
    );
}
