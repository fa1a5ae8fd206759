//! The small `static inline` helpers and macros generated code may call, each emitted
//! only when used. They give C the loop IR's exact semantics: floor division and floor
//! remainder on integers (with a fast path for a positive constant divisor), binary
//! search returning -1, integer max/min/abs, `relu`, the floor remainder on floats, and
//! loop hints that expand to the compiler's own pragmas, and atomic float adds (a
//! compare-and-swap loop with the `__atomic` builtins of GCC and Clang), and the
//! conversions between f32 and the 16 bits of f16/bf16 elements (by hand, except f32 to
//! f16 with `_Float16` where the compiler has it; define `SPARSILE_SOFT_HALF` to do that
//! one by hand too).
//!
//! Integer division by zero has no value in the IR (lowering never produces it); the
//! helpers return 0 for it rather than trapping, and wrap `INT64_MIN / -1`.

/// A helper the generated code uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Helper {
    IvdepMacro,
    UnrollMacro,
    FloorDiv,
    FloorDivPos,
    FloorRem,
    FloorRemPos,
    MaxI64,
    MinI64,
    AbsI64,
    ReluF32,
    ReluF64,
    RemF32,
    RemF64,
    SearchI32,
    SearchI64,
    AtomicAddF32,
    AtomicAddF64,
    NoOuterVectorizeMacro,
    ScalarLoopMacro,
    /// `SPARSILE_KEEP_VECTOR(v)`: keeps a loaded vector in a register (row tiles).
    KeepVectorMacro,
    /// `SPARSILE_NO_FULL_UNROLL`: keeps a short loop a loop for GCC's loop vectorizer.
    NoFullUnrollMacro,
    /// The x86 intrinsics header, where the target has AVX-512 (masked lanes).
    Intrinsics,
    VectorTypes,
    /// Needs [`Helper::VectorTypes`] before it (the enum order is the emission order).
    TransposedSums,
    /// Loads and stores of the register tiles' vectors (64 bytes with AVX-512, 32
    /// without). Needs [`Helper::VectorTypes`] before it.
    TileVectors,
    /// Conversions between f32 and the raw 16 bits of f16/bf16 elements (portable C, or
    /// inline PTX in CUDA), and f32 to tf32 (CUDA only).
    F16ToF32,
    F32ToF16,
    Bf16ToF32,
    F32ToBf16,
    F32ToTf32,
}

impl Helper {
    /// The CUDA C++ definition of a scalar helper: the C one as a
    /// `static __device__ __forceinline__` function. `None` for the macros, vector, and
    /// atomic helpers, which only the C statement code asks for.
    pub(crate) fn cuda_definition(self) -> Option<String> {
        match self {
            Helper::FloorDiv
            | Helper::FloorDivPos
            | Helper::FloorRem
            | Helper::FloorRemPos
            | Helper::MaxI64
            | Helper::MinI64
            | Helper::AbsI64
            | Helper::ReluF32
            | Helper::ReluF64
            | Helper::RemF32
            | Helper::RemF64
            | Helper::SearchI32
            | Helper::SearchI64 => Some(
                self.definition()
                    .replace("static inline ", "static __device__ __forceinline__ "),
            ),
            Helper::IvdepMacro
            | Helper::UnrollMacro
            | Helper::AtomicAddF32
            | Helper::AtomicAddF64
            | Helper::NoOuterVectorizeMacro
            | Helper::ScalarLoopMacro
            | Helper::KeepVectorMacro
            | Helper::NoFullUnrollMacro
            | Helper::Intrinsics
            | Helper::VectorTypes
            | Helper::TransposedSums
            | Helper::TileVectors => None,
            Helper::F16ToF32
            | Helper::F32ToF16
            | Helper::Bf16ToF32
            | Helper::F32ToBf16
            | Helper::F32ToTf32 => Some(Self::cuda_conversion(self).to_string()),
        }
    }

    /// The CUDA definitions of the conversions (inline PTX `cvt`).
    fn cuda_conversion(self) -> &'static str {
        match self {
            Helper::F16ToF32 => {
                "/* The f16 whose bits are h, as a float (exact). */
static __device__ __forceinline__ float sparsile_f16_to_f32(unsigned short h)
{
    float f;
    asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));
    return f;
}
"
            }
            Helper::F32ToF16 => {
                "/* The bits of f rounded to f16 (to nearest even). */
static __device__ __forceinline__ unsigned short sparsile_f32_to_f16(float f)
{
    unsigned short h;
    asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));
    return h;
}
"
            }
            Helper::Bf16ToF32 => {
                "/* The bf16 whose bits are h, as a float (exact: the top half of its bits). */
static __device__ __forceinline__ float sparsile_bf16_to_f32(unsigned short h)
{
    return __uint_as_float((unsigned int)h << 16);
}
"
            }
            Helper::F32ToBf16 => {
                "/* The bits of f rounded to bf16 (to nearest even; sm_80 and later). */
static __device__ __forceinline__ unsigned short sparsile_f32_to_bf16(float f)
{
    unsigned short h;
    asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));
    return h;
}
"
            }
            Helper::F32ToTf32 => {
                "/* f rounded to tf32 (10 mantissa bits, to nearest, ties away from zero), as the
 * 32 bits an mma operand register holds. */
static __device__ __forceinline__ unsigned int sparsile_f32_to_tf32(float f)
{
    unsigned int t;
    asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(t) : \"f\"(f));
    return t;
}
"
            }
            _ => unreachable!("not a conversion helper"),
        }
    }

    /// The C definition.
    pub(crate) fn definition(self) -> &'static str {
        match self {
            Helper::IvdepMacro => {
                "/* Vectorized loops: iterations carry no dependences. */
#if defined(__clang__)
#define SPARSILE_IVDEP _Pragma(\"clang loop vectorize(assume_safety)\")
#elif defined(__GNUC__)
#define SPARSILE_IVDEP _Pragma(\"GCC ivdep\")
#else
#define SPARSILE_IVDEP
#endif
"
            }
            Helper::UnrollMacro => {
                "/* Unrolled loops. */
#if defined(__clang__)
#define SPARSILE_UNROLL _Pragma(\"unroll 4\")
#elif defined(__GNUC__)
#define SPARSILE_UNROLL _Pragma(\"GCC unroll 4\")
#else
#define SPARSILE_UNROLL
#endif
"
            }
            Helper::FloorDiv => {
                "/* a / b rounded towards negative infinity. */
static inline int64_t sparsile_floordiv(int64_t a, int64_t b)
{
    if (b == 0) return 0;
    if (b == -1) return (int64_t)(0 - (uint64_t)a);
    int64_t q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) q -= 1;
    return q;
}
"
            }
            Helper::FloorDivPos => {
                "/* a / b rounded towards negative infinity, for b > 0. */
static inline int64_t sparsile_floordiv_pos(int64_t a, int64_t b)
{
    return a / b - (a % b < 0);
}
"
            }
            Helper::FloorRem => {
                "/* a - b * floor(a / b): the remainder with the sign of b. */
static inline int64_t sparsile_floorrem(int64_t a, int64_t b)
{
    if (b == 0 || b == -1) return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}
"
            }
            Helper::FloorRemPos => {
                "/* a - b * floor(a / b), for b > 0. */
static inline int64_t sparsile_floorrem_pos(int64_t a, int64_t b)
{
    int64_t r = a % b;
    return r < 0 ? r + b : r;
}
"
            }
            Helper::MaxI64 => {
                "static inline int64_t sparsile_max_i64(int64_t a, int64_t b) { return a > b ? a : b; }
"
            }
            Helper::MinI64 => {
                "static inline int64_t sparsile_min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
"
            }
            Helper::AbsI64 => {
                "static inline int64_t sparsile_abs_i64(int64_t a) { return a < 0 ? (int64_t)(0 - (uint64_t)a) : a; }
"
            }
            Helper::ReluF32 => {
                "static inline float sparsile_relu_f32(float x) { return x > 0.0f ? x : 0.0f; }
"
            }
            Helper::ReluF64 => {
                "static inline double sparsile_relu_f64(double x) { return x > 0.0 ? x : 0.0; }
"
            }
            Helper::RemF32 => {
                "static inline float sparsile_rem_f32(float a, float b) { return a - b * floorf(a / b); }
"
            }
            Helper::RemF64 => {
                "static inline double sparsile_rem_f64(double a, double b) { return a - b * floor(a / b); }
"
            }
            Helper::SearchI32 => {
                "/* The position p in [lo, hi) with a[p] == x in the sorted run a[lo..hi), or -1. */
static inline int64_t sparsile_search_i32(const int32_t *a, int64_t lo, int64_t hi, int64_t x)
{
    int64_t first = lo, count = hi - lo;
    while (count > 0) {
        int64_t half = count / 2;
        if ((int64_t)a[first + half] < x) {
            first += half + 1;
            count -= half + 1;
        } else {
            count = half;
        }
    }
    return (first < hi && (int64_t)a[first] == x) ? first : -1;
}
"
            }
            Helper::SearchI64 => {
                "/* The position p in [lo, hi) with a[p] == x in the sorted run a[lo..hi), or -1. */
static inline int64_t sparsile_search_i64(const int64_t *a, int64_t lo, int64_t hi, int64_t x)
{
    int64_t first = lo, count = hi - lo;
    while (count > 0) {
        int64_t half = count / 2;
        if (a[first + half] < x) {
            first += half + 1;
            count -= half + 1;
        } else {
            count = half;
        }
    }
    return (first < hi && a[first] == x) ? first : -1;
}
"
            }
            Helper::NoOuterVectorizeMacro => {
                "/* Loops around a vectorized loop: GCC would otherwise vectorize them too, with
 * gathers across their iterations (outer-loop vectorization), which is slower than the
 * vectorized inner loop alone. An empty volatile asm statement keeps it from doing so. */
#if defined(__GNUC__) && !defined(__clang__)
#define SPARSILE_NO_OUTER_VECTORIZE __asm__ volatile(\"\");
#else
#define SPARSILE_NO_OUTER_VECTORIZE
#endif
"
            }
            Helper::ScalarLoopMacro => {
                "/* The in-order copy of a reassociated loop, for short trip counts: GCC would
 * vectorize it with gathers and then add the lanes one by one in order, slower than the
 * plain scalar loop on rows of a few non-zeros. An empty volatile asm statement in the
 * body keeps it scalar. */
#if defined(__GNUC__) && !defined(__clang__)
#define SPARSILE_SCALAR_LOOP __asm__ volatile(\"\");
#else
#define SPARSILE_SCALAR_LOOP
#endif
"
            }
            Helper::NoFullUnrollMacro => {
                "/* A short loop that GCC would unroll completely and then leave scalar: a
 * vectorized loop whose loads are guarded (a block on the matrix's edge; kept a loop, it is
 * vectorized with masked loads), or the epilogue of a row tile (elementwise stores). */
#if defined(__GNUC__) && !defined(__clang__)
#define SPARSILE_NO_FULL_UNROLL _Pragma(\"GCC unroll 1\")
#else
#define SPARSILE_NO_FULL_UNROLL
#endif
"
            }
            Helper::KeepVectorMacro => {
                "/* A vector loaded once and used by several multiply-adds (a row tile): GCC
 * would fold the load into each of them, loading it once per use. An empty asm
 * statement that takes the vector in a register keeps it there. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__AVX512F__)
#define SPARSILE_KEEP_VECTOR(v) __asm__(\"\" : \"+v\"(v))
#else
#define SPARSILE_KEEP_VECTOR(v)
#endif
"
            }
            Helper::Intrinsics => {
                "/* Masked vector lanes (AVX-512 intrinsics) where the target has them: a full
 * vector folded to its two halves added, and the horizontal sum of a half. */
#if defined(__AVX512F__) && defined(__AVX512VL__)
#include <immintrin.h>
static inline __m256 sparsile_fold_ps(__m512 v)
{
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}
static inline __m256d sparsile_fold_pd(__m512d v)
{
    return _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
}
static inline float sparsile_hsum256_ps(__m256 v)
{
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}
static inline double sparsile_hsum256_pd(__m256d v)
{
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    h = _mm_add_sd(h, _mm_unpackhi_pd(h, h));
    return _mm_cvtsd_f64(h);
}
#endif
"
            }
            Helper::VectorTypes => {
                "/* Vectors of 32 bytes (GCC and Clang vector extensions), loaded from any
 * alignment, and their horizontal sums as trees of shuffles. */
typedef float sparsile_vf32 __attribute__((vector_size(32)));
typedef double sparsile_vf64 __attribute__((vector_size(32)));
static inline sparsile_vf32 sparsile_vload_f32(const float *p)
{
    sparsile_vf32 v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
static inline sparsile_vf64 sparsile_vload_f64(const double *p)
{
    sparsile_vf64 v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
static inline float sparsile_vsum_f32(sparsile_vf32 v)
{
    v = v + __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3);
    v = v + __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5);
    return v[0] + v[1];
}
static inline double sparsile_vsum_f64(sparsile_vf64 v)
{
    v = v + __builtin_shufflevector(v, v, 2, 3, 0, 1);
    return v[0] + v[1];
}
#else
static inline float sparsile_vsum_f32(sparsile_vf32 v)
{
    return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}
static inline double sparsile_vsum_f64(sparsile_vf64 v)
{
    return (v[0] + v[2]) + (v[1] + v[3]);
}
#endif
"
            }
            Helper::TransposedSums => {
                "/* The horizontal sums of as many vectors as a vector has lanes, as one vector
 * (lane l: the sum of the lanes of v[l]): pairs of vectors folded half onto half, then
 * quarters, then neighbours (a tree of shuffles shared by all the sums), the lanes put
 * back in order at the end. */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define SPARSILE_FOLD(a, b, ...) (__builtin_shufflevector(a, b, __VA_ARGS__))
static inline sparsile_vf32 sparsile_tsum_f32(sparsile_vf32 v0, sparsile_vf32 v1, sparsile_vf32 v2, sparsile_vf32 v3,
                                              sparsile_vf32 v4, sparsile_vf32 v5, sparsile_vf32 v6, sparsile_vf32 v7)
{
    /* halves: h01 = [v0 lo + v0 hi, v1 lo + v1 hi], ... */
    sparsile_vf32 h01 = SPARSILE_FOLD(v0, v1, 0, 1, 2, 3, 8, 9, 10, 11) + SPARSILE_FOLD(v0, v1, 4, 5, 6, 7, 12, 13, 14, 15);
    sparsile_vf32 h23 = SPARSILE_FOLD(v2, v3, 0, 1, 2, 3, 8, 9, 10, 11) + SPARSILE_FOLD(v2, v3, 4, 5, 6, 7, 12, 13, 14, 15);
    sparsile_vf32 h45 = SPARSILE_FOLD(v4, v5, 0, 1, 2, 3, 8, 9, 10, 11) + SPARSILE_FOLD(v4, v5, 4, 5, 6, 7, 12, 13, 14, 15);
    sparsile_vf32 h67 = SPARSILE_FOLD(v6, v7, 0, 1, 2, 3, 8, 9, 10, 11) + SPARSILE_FOLD(v6, v7, 4, 5, 6, 7, 12, 13, 14, 15);
    /* quarters within each half */
    sparsile_vf32 q0 = SPARSILE_FOLD(h01, h23, 0, 1, 8, 9, 4, 5, 12, 13) + SPARSILE_FOLD(h01, h23, 2, 3, 10, 11, 6, 7, 14, 15);
    sparsile_vf32 q1 = SPARSILE_FOLD(h45, h67, 0, 1, 8, 9, 4, 5, 12, 13) + SPARSILE_FOLD(h45, h67, 2, 3, 10, 11, 6, 7, 14, 15);
    /* neighbours: lane p holds the sum of v[(0, 4, 2, 6, 1, 5, 3, 7)[p]] */
    sparsile_vf32 t = SPARSILE_FOLD(q0, q1, 0, 8, 2, 10, 4, 12, 6, 14) + SPARSILE_FOLD(q0, q1, 1, 9, 3, 11, 5, 13, 7, 15);
    return SPARSILE_FOLD(t, t, 0, 4, 2, 6, 1, 5, 3, 7);
}
static inline sparsile_vf64 sparsile_tsum_f64(sparsile_vf64 v0, sparsile_vf64 v1, sparsile_vf64 v2, sparsile_vf64 v3)
{
    sparsile_vf64 h01 = SPARSILE_FOLD(v0, v1, 0, 1, 4, 5) + SPARSILE_FOLD(v0, v1, 2, 3, 6, 7);
    sparsile_vf64 h23 = SPARSILE_FOLD(v2, v3, 0, 1, 4, 5) + SPARSILE_FOLD(v2, v3, 2, 3, 6, 7);
    /* lane p holds the sum of v[(0, 2, 1, 3)[p]] */
    sparsile_vf64 t = SPARSILE_FOLD(h01, h23, 0, 4, 2, 6) + SPARSILE_FOLD(h01, h23, 1, 5, 3, 7);
    return SPARSILE_FOLD(t, t, 0, 2, 1, 3);
}
#else
static inline sparsile_vf32 sparsile_tsum_f32(sparsile_vf32 v0, sparsile_vf32 v1, sparsile_vf32 v2, sparsile_vf32 v3,
                                              sparsile_vf32 v4, sparsile_vf32 v5, sparsile_vf32 v6, sparsile_vf32 v7)
{
    sparsile_vf32 t = {sparsile_vsum_f32(v0), sparsile_vsum_f32(v1), sparsile_vsum_f32(v2), sparsile_vsum_f32(v3),
                       sparsile_vsum_f32(v4), sparsile_vsum_f32(v5), sparsile_vsum_f32(v6), sparsile_vsum_f32(v7)};
    return t;
}
static inline sparsile_vf64 sparsile_tsum_f64(sparsile_vf64 v0, sparsile_vf64 v1, sparsile_vf64 v2, sparsile_vf64 v3)
{
    sparsile_vf64 t = {sparsile_vsum_f64(v0), sparsile_vsum_f64(v1), sparsile_vsum_f64(v2), sparsile_vsum_f64(v3)};
    return t;
}
#endif
"
            }
            Helper::TileVectors => {
                "/* Register tiles: vectors of 64 bytes where the target has AVX-512, loaded from
 * and stored to any alignment; stores of the 32-byte vectors; vectors of 16 bytes for
 * the width that wider ones leave (a block of 4 columns of f32). */
typedef float sparsile_qf32 __attribute__((vector_size(16)));
typedef double sparsile_qf64 __attribute__((vector_size(16)));
static inline sparsile_qf32 sparsile_qload_f32(const float *p)
{
    sparsile_qf32 v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
static inline sparsile_qf64 sparsile_qload_f64(const double *p)
{
    sparsile_qf64 v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
static inline void sparsile_qstore_f32(float *p, sparsile_qf32 v)
{
    __builtin_memcpy(p, &v, sizeof v);
}
static inline void sparsile_qstore_f64(double *p, sparsile_qf64 v)
{
    __builtin_memcpy(p, &v, sizeof v);
}
#if defined(__AVX512F__)
typedef float sparsile_zf32 __attribute__((vector_size(64)));
typedef double sparsile_zf64 __attribute__((vector_size(64)));
static inline sparsile_zf32 sparsile_zload_f32(const float *p)
{
    sparsile_zf32 v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
static inline sparsile_zf64 sparsile_zload_f64(const double *p)
{
    sparsile_zf64 v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
static inline void sparsile_zstore_f32(float *p, sparsile_zf32 v)
{
    __builtin_memcpy(p, &v, sizeof v);
}
static inline void sparsile_zstore_f64(double *p, sparsile_zf64 v)
{
    __builtin_memcpy(p, &v, sizeof v);
}
#endif
static inline void sparsile_vstore_f32(float *p, sparsile_vf32 v)
{
    __builtin_memcpy(p, &v, sizeof v);
}
static inline void sparsile_vstore_f64(double *p, sparsile_vf64 v)
{
    __builtin_memcpy(p, &v, sizeof v);
}
"
            }
            Helper::AtomicAddF32 => {
                "/* *p += v as one indivisible update (compare-and-swap on the float's bits). */
static inline void sparsile_atomic_add_f32(float *p, float v)
{
    float old, next;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    do {
        next = old + v;
    } while (!__atomic_compare_exchange(p, &old, &next, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}
"
            }
            Helper::F16ToF32 => {
                "/* The f16 whose bits are h, as a float (exact). Integer operations and one float
 * subtraction, without branches once if-converted, so loops reading f16 vectorize (GCC
 * has no vectors of _Float16 without AVX512-FP16). */
static inline float sparsile_f16_to_f32(unsigned short h)
{
    union { uint32_t u; float f; } o, magic = { 113u << 23 };
    const uint32_t exp = (uint32_t)h & 0x7c00u;
    o.u = ((uint32_t)h & 0x7fffu) << 13;
    if (exp == 0x7c00u) {
        o.u += 0x70000000u; /* infinity, NaN: the top exponent */
    } else if (exp == 0) {
        o.u += 0x38800000u; /* zero, subnormal: 2^-14 (1 + m/1024) - 2^-14, exact */
        o.f -= magic.f;
    } else {
        o.u += 0x38000000u; /* normal: the exponent rebiased */
    }
    o.u |= ((uint32_t)h & 0x8000u) << 16;
    return o.f;
}
"
            }
            Helper::F32ToF16 => {
                "/* The bits of f rounded to f16 (to nearest even; overflow to infinity). */
#ifndef SPARSILE_HAVE_FLOAT16
#if defined(__FLT16_MANT_DIG__) && defined(__GNUC__) && !defined(SPARSILE_SOFT_HALF)
#define SPARSILE_HAVE_FLOAT16 1
__extension__ typedef _Float16 sparsile_float16;
#else
#define SPARSILE_HAVE_FLOAT16 0
#endif
#endif
static inline unsigned short sparsile_f32_to_f16(float f)
{
#if SPARSILE_HAVE_FLOAT16
    union { sparsile_float16 f; unsigned short u; } x = { (sparsile_float16)f };
    return x.u;
#else
    union { float f; uint32_t u; } x = { f }, magic;
    const uint32_t sign = x.u & 0x80000000u;
    unsigned short o;
    x.u ^= sign;
    if (x.u >= 0x47800000u) { /* 2^16 and above, infinity, NaN */
        o = x.u > 0x7f800000u ? 0x7e00u : 0x7c00u;
    } else if (x.u < 0x38800000u) { /* below 2^-14: a subnormal, rounded by a float add */
        magic.u = 0x3f000000u;
        x.f += magic.f;
        o = (unsigned short)(x.u - magic.u);
    } else {
        const uint32_t odd = (x.u >> 13) & 1u;
        x.u += 0xc8000fffu + odd; /* rebias the exponent, round to nearest even */
        o = (unsigned short)(x.u >> 13);
    }
    return (unsigned short)(o | (sign >> 16));
#endif
}
"
            }
            Helper::Bf16ToF32 => {
                "/* The bf16 whose bits are h, as a float (exact: the top half of its bits). */
static inline float sparsile_bf16_to_f32(unsigned short h)
{
    union { uint32_t u; float f; } x = { (uint32_t)h << 16 };
    return x.f;
}
"
            }
            Helper::F32ToBf16 => {
                "/* The bits of f rounded to bf16 (to nearest even; NaN stays a quiet NaN). */
static inline unsigned short sparsile_f32_to_bf16(float f)
{
    union { float f; uint32_t u; } x = { f };
    if ((x.u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x.u >> 16) | 0x40u);
    x.u += 0x7fffu + ((x.u >> 16) & 1u);
    return (unsigned short)(x.u >> 16);
}
"
            }
            Helper::F32ToTf32 => Self::cuda_conversion(self),
            Helper::AtomicAddF64 => {
                "/* *p += v as one indivisible update (compare-and-swap on the double's bits). */
static inline void sparsile_atomic_add_f64(double *p, double v)
{
    double old, next;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    do {
        next = old + v;
    } while (!__atomic_compare_exchange(p, &old, &next, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}
"
            }
        }
    }
}
