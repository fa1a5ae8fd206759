//! C for `vectorized(reassociate)` loops: one accumulator per reduced element, loaded
//! before the loop and stored after it, long loops in blocks of 16 adding into 16 lanes
//! per accumulator summed as a tree (a bound read from memory evaluated before the loop),
//! contiguous bodies as explicit vectors of 32 bytes, the tail and
//! short loops in order (or, with `scalar_sums=N`, in groups of `N` adding into `N`
//! scalar copies of each accumulator first), and an error for a loop whose reductions
//! break the rules (the IR did not pass the verifier).

use sparsile_codegen::{emit_c, CodegenError};
use sparsile_ir::loops::Func;

fn parse(text: &str) -> Func {
    text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"))
}

const SPMV: &str = "flat func spmv(m, n, nnz) {
  buffer A: f32[nnz] input values
  buffer x: f32[n] input values
  buffer y: f32[m] output values
  buffer P: i32[m + 1] input indptr(A, 1)
  buffer J: i32[nnz] input indices(A, 1)
  buffer y_local: f32[1] temp local
  for i in 0..m parallel {
    y_local[0] = 0.0
    for p in P[i]..P[i + 1] vectorized(reassociate) {
      let j: idx = J[p]
      y_local[0] = y_local[0] + A[p] * x[j]
    }
    y[i] = y_local[0]
  }
}
";

#[test]
fn spmv_sums_lanes_in_an_accumulator() {
    let src = emit_c(&parse(SPMV)).unwrap().code;
    let expected = "        {
            const int64_t p_end = (int64_t)P[i + 1];
            float y_local_acc = y_local[0];
            const int64_t p_begin = (int64_t)P[i];
            int64_t p_block = p_begin;
            if (p_end - p_begin >= 32) {
                float y_local_acc_lanes[16];
                for (int64_t p_lane = 0; p_lane < 16; ++p_lane) y_local_acc_lanes[p_lane] = 0;
                for (; p_block + 16 <= p_end; p_block += 16) {
                    SPARSILE_NO_OUTER_VECTORIZE
                    SPARSILE_IVDEP
                    for (int64_t p_lane = 0; p_lane < 16; ++p_lane) { /* vectorized(reassociate) */
                        const int64_t p = p_block + p_lane;
                        int64_t j = (int64_t)J[p];
                        y_local_acc_lanes[p_lane] = y_local_acc_lanes[p_lane] + A[p] * x[j];
                    }
                }
                for (int64_t p_lane = 0; p_lane < 8; ++p_lane) y_local_acc_lanes[p_lane] = y_local_acc_lanes[p_lane] + y_local_acc_lanes[p_lane + 8];
                for (int64_t p_lane = 0; p_lane < 4; ++p_lane) y_local_acc_lanes[p_lane] = y_local_acc_lanes[p_lane] + y_local_acc_lanes[p_lane + 4];
                for (int64_t p_lane = 0; p_lane < 2; ++p_lane) y_local_acc_lanes[p_lane] = y_local_acc_lanes[p_lane] + y_local_acc_lanes[p_lane + 2];
                y_local_acc = y_local_acc + (y_local_acc_lanes[0] + y_local_acc_lanes[1]);
            }
            for (int64_t p = p_block; p < p_end; ++p) { /* vectorized(reassociate) */
                SPARSILE_SCALAR_LOOP
                int64_t j = (int64_t)J[p];
                y_local_acc = y_local_acc + A[p] * x[j];
            }
            y_local[0] = y_local_acc;
        }
";
    assert!(src.contains(expected), "{src}");
    assert!(src.contains("#define SPARSILE_SCALAR_LOOP"), "{src}");
    // No other statement of the loop touches the local array.
    assert_eq!(src.matches("y_local[0] = y_local[0]").count(), 0, "{src}");
}

#[test]
fn scalar_sums_split_the_short_part_into_groups() {
    let text = SPMV.replace(
        "vectorized(reassociate)",
        "vectorized(reassociate, scalar_sums=3)",
    );
    let src = emit_c(&parse(&text)).unwrap().code;
    let expected = "                for (int64_t p_lane = 0; p_lane < 8; ++p_lane) y_local_acc_lanes[p_lane] = y_local_acc_lanes[p_lane] + y_local_acc_lanes[p_lane + 8];
                for (int64_t p_lane = 0; p_lane < 4; ++p_lane) y_local_acc_lanes[p_lane] = y_local_acc_lanes[p_lane] + y_local_acc_lanes[p_lane + 4];
                for (int64_t p_lane = 0; p_lane < 2; ++p_lane) y_local_acc_lanes[p_lane] = y_local_acc_lanes[p_lane] + y_local_acc_lanes[p_lane + 2];
                y_local_acc = y_local_acc + (y_local_acc_lanes[0] + y_local_acc_lanes[1]);
            }
            {
                float y_local_acc_1 = 0;
                float y_local_acc_2 = 0;
                for (; p_block + 3 <= p_end; p_block += 3) { /* vectorized(reassociate) */
                    SPARSILE_SCALAR_LOOP
                    {
                        const int64_t p = p_block + 0;
                        int64_t j = (int64_t)J[p];
                        y_local_acc = y_local_acc + A[p] * x[j];
                    }
                    {
                        const int64_t p = p_block + 1;
                        int64_t j = (int64_t)J[p];
                        y_local_acc_1 = y_local_acc_1 + A[p] * x[j];
                    }
                    {
                        const int64_t p = p_block + 2;
                        int64_t j = (int64_t)J[p];
                        y_local_acc_2 = y_local_acc_2 + A[p] * x[j];
                    }
                }
                y_local_acc = y_local_acc + (y_local_acc_1 + y_local_acc_2);
            }
            for (int64_t p = p_block; p < p_end; ++p) { /* vectorized(reassociate) */
                SPARSILE_SCALAR_LOOP
                int64_t j = (int64_t)J[p];
                y_local_acc = y_local_acc + A[p] * x[j];
            }
            y_local[0] = y_local_acc;
";
    assert!(src.contains(expected), "{src}");
    // One sum: no groups.
    let one = emit_c(&parse(SPMV)).unwrap().code;
    assert!(!one.contains("y_local_acc_1"), "{one}");
}

#[test]
fn several_elements_get_one_accumulator_each() {
    let f = parse(
        "flat func sums(n) {
  buffer x: f64[n] input values
  buffer out: f64[2] output values
  buffer s: f64[2] temp local
  s[0] = 0.0
  s[1] = 0.0
  for k in 0..n vectorized(reassociate) {
    s[0] = s[0] + x[k]
    if k % 2 == 0 {
      s[1] = x[k] * x[k] + s[1]
    }
    s[0] = s[0] + 1.0
  }
  out[0] = s[0]
  out[1] = s[1]
}
",
    );
    let src = emit_c(&f).unwrap().code;
    for line in [
        "double s_acc = s[0];",
        "double s_acc_2 = s[1];",
        "double s_acc_lanes[16];",
        "double s_acc_2_lanes[16];",
        "s_acc_lanes[k_lane] = s_acc_lanes[k_lane] + x[k];",
        "s_acc_2_lanes[k_lane] = s_acc_2_lanes[k_lane] + x[k] * x[k];",
        "for (int64_t k_lane = 0; k_lane < 8; ++k_lane) s_acc_2_lanes[k_lane] = s_acc_2_lanes[k_lane] + s_acc_2_lanes[k_lane + 8];",
        "s_acc_2 = s_acc_2 + (s_acc_2_lanes[0] + s_acc_2_lanes[1]);",
        "s_acc = s_acc + x[k];",
        "s_acc_2 = s_acc_2 + x[k] * x[k];",
        "s_acc = s_acc + 1.0;",
        "s[0] = s_acc;",
        "s[1] = s_acc_2;",
        // A plain bound stays in the condition.
        "if (n - k_begin >= 32) {",
        "for (int64_t k = k_block; k < n; ++k) { /* vectorized(reassociate) */",
    ] {
        assert!(src.contains(line), "missing `{line}`:\n{src}");
    }
    assert!(!src.contains("k_end"), "{src}");
}

#[test]
fn an_addend_with_a_sum_keeps_its_parentheses() {
    let f = parse(
        "flat func f(n) {
  buffer x: f32[n] input values
  buffer out: f32[1] output values
  buffer a: f32[1] temp local
  a[0] = 0.0
  for k in 1..n vectorized(reassociate) {
    a[0] = a[0] + (x[k] - x[k - 1])
  }
  out[0] = a[0]
}
",
    );
    let src = emit_c(&f).unwrap().code;
    assert!(src.contains("a_acc = a_acc + (x[k] - x[k - 1]);"), "{src}");
}

#[test]
fn a_loop_without_reductions_is_a_plain_vectorized_loop() {
    let f = parse(
        "flat func f(n) {
  buffer x: f32[n] input values
  buffer y: f32[n] output values
  for k in 0..n vectorized(reassociate) {
    y[k] = x[k] * 2.0
  }
}
",
    );
    let src = emit_c(&f).unwrap().code;
    assert!(!src.contains("_lanes"), "{src}");
    assert!(src.contains("SPARSILE_IVDEP\n"), "{src}");
    assert!(src.contains("y[k] = x[k] * 2.0f;"), "{src}");
}

#[test]
fn broken_reductions_are_an_error_naming_the_statement() {
    // `y[0]` is not a local buffer: the verifier refuses this, and so does the emitter.
    let f = parse(
        "flat func f(n) {
  buffer x: f32[n] input values
  buffer y: f32[1] output values
  for k in 0..n vectorized(reassociate) {
    y[0] = y[0] + x[k]
  }
}
",
    );
    let err = emit_c(&f).unwrap_err();
    assert!(
        matches!(&err, CodegenError::Reassociation { var, span, .. } if var == "k" && span.line == 5),
        "{err:?}"
    );
    assert!(err.to_string().starts_with("line 5, column 5: the `vectorized(reassociate)` loop over `k` cannot reassociate its reductions: the store to `y[0]`"), "{err}");
}

/// SDDMM's dot product after `hoist_factor`: the loads are contiguous in `k`, so the lane
/// blocks are explicit vectors (two per block of 16) summed by `sparsile_vsum_f32`.
const DOT: &str = "flat func dot(m, n, nnz) {
  buffer C: f32[nnz] output values
  buffer A: f32[nnz] input values
  buffer X: f32[m * 32] input values
  buffer Y: f32[n * 32] input values
  buffer P: i32[m + 1] input indptr(C, 1)
  buffer J: i32[nnz] input indices(C, 1)
  buffer s: f32[1] temp local
  for i in 0..m parallel {
    for p in P[i]..P[i + 1] {
      let j: idx = J[p]
      s[0] = 0.0
      for k in 0..32 vectorized(reassociate) {
        let kk: idx = k
        s[0] = s[0] + X[i * 32 + kk] * neg(Y[j * 32 + k])
      }
      C[p] = A[p] * s[0]
    }
  }
}
";

#[test]
fn contiguous_bodies_are_written_with_vectors() {
    let src = emit_c(&parse(DOT)).unwrap().code;
    let expected = "                if (32 - k_block >= 16) {
                    sparsile_vf32 s_acc_v0 = {0}, s_acc_v1 = {0};
                    for (; k_block + 16 <= 32; k_block += 16) {
                        {
                            const int64_t k = k_block;
                            const int64_t kk = k;
                            s_acc_v0 = s_acc_v0 + ((sparsile_vload_f32(&X[i * 32 + kk])) * (-(sparsile_vload_f32(&Y[j * 32 + k]))));
                        }
                        {
                            const int64_t k = k_block + 8;
                            const int64_t kk = k;
                            s_acc_v1 = s_acc_v1 + ((sparsile_vload_f32(&X[i * 32 + kk])) * (-(sparsile_vload_f32(&Y[j * 32 + k]))));
                        }
                    }
                    s_acc = s_acc + sparsile_vsum_f32(s_acc_v0 + s_acc_v1);
                }
";
    assert!(src.contains(expected), "{src}");
    assert!(src.contains("typedef float sparsile_vf32"), "{src}");
    // A gather (x[J[p]]) keeps the scalar lanes.
    let gather = emit_c(&parse(SPMV)).unwrap().code;
    assert!(!gather.contains("sparsile_vf32"), "{gather}");
}

#[test]
fn masked_gathered_dots_are_masked_vector_blocks_under_a_condition() {
    let text = SPMV.replace("vectorized(reassociate)", "vectorized(reassociate, masked)");
    let src = emit_c(&parse(&text)).unwrap().code;
    let expected = "            #if defined(__AVX512F__) && defined(__AVX512VL__)
            if (p_begin < p_end) {
                __m512 y_local_acc_m0 = _mm512_setzero_ps(), y_local_acc_m1 = _mm512_setzero_ps();
                int64_t p_block = p_begin;
                for (; p_block + 32 <= p_end; p_block += 32) {
";
    assert!(src.contains(expected), "{src}");
    let tail = "                const int64_t p_left = p_end - p_block;
                y_local_acc_m0 = _mm512_add_ps(y_local_acc_m0, y_local_acc_m1);
                if (p_left > 8) {
                    const __mmask16 p_mask = (__mmask16)((1u << p_left) - 1u);
                    const int64_t p = p_block;
                    const __m512i j_m_4 = _mm512_maskz_loadu_epi32(p_mask, &J[p]);
                    y_local_acc_m0 = _mm512_mask_add_ps(y_local_acc_m0, p_mask, y_local_acc_m0, _mm512_mul_ps(_mm512_maskz_loadu_ps(p_mask, &A[p]), _mm512_mask_i32gather_ps(_mm512_setzero_ps(), p_mask, j_m_4, x, 4)));
                    y_local_acc = y_local_acc + _mm512_reduce_add_ps(y_local_acc_m0);
                } else {
                    __m256 y_local_acc_h = sparsile_fold_ps(y_local_acc_m0);
                    const __mmask8 p_mask_2 = (__mmask8)((1u << p_left) - 1u);
                    const int64_t p = p_block;
                    const __m256i j_m_5 = _mm256_maskz_loadu_epi32(p_mask_2, &J[p]);
                    y_local_acc_h = _mm256_mask_add_ps(y_local_acc_h, p_mask_2, y_local_acc_h, _mm256_mul_ps(_mm256_maskz_loadu_ps(p_mask_2, &A[p]), _mm256_mmask_i32gather_ps(_mm256_setzero_ps(), p_mask_2, j_m_5, x, 4)));
                    y_local_acc = y_local_acc + sparsile_hsum256_ps(y_local_acc_h);
                }
            }
            #else
";
    assert!(src.contains(tail), "{src}");
    assert!(src.contains("#include <immintrin.h>"), "{src}");
    // The unmasked code follows for targets without AVX-512.
    let unmasked = emit_c(&parse(SPMV)).unwrap().code;
    assert!(!unmasked.contains("_mm512"), "{unmasked}");
    assert!(src.contains("float y_local_acc_lanes[16];\n"), "{src}");
    assert!(
        src.contains("            #endif\n            y_local[0] = y_local_acc;"),
        "{src}"
    );
}

#[test]
fn masked_bodies_without_a_vector_form_keep_the_unmasked_code() {
    let with = |from: &str, to: &str| {
        let text = SPMV
            .replace("vectorized(reassociate)", "vectorized(reassociate, masked)")
            .replace(from, to);
        emit_c(&parse(&text)).unwrap().code
    };
    // A maximum (no masked form in the emitter), 64-bit indices (the gathers take 32-bit
    // lanes), an index computed from the gathered one: the loop stays as before.
    for src in [
        with("A[p] * x[j]", "max(A[p], 0.0) * x[j]"),
        with("J: i32[nnz]", "J: i64[nnz]"),
        with("A[p] * x[j]", "A[p] * x[j * 2 % n]"),
    ] {
        assert!(!src.contains("_mm512"), "{src}");
        assert!(src.contains("float y_local_acc_lanes[16];"), "{src}");
    }
}
