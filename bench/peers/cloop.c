/* The plain serial loops a sparse tensor compiler such as TACO generates for CSR
 * operands (one thread, no schedule): the floor-to-beat of `sparsile bench`'s `cloop`
 * peer. Compiled by cloop_peer.py with the flags it reports. A is CSR with i64 row
 * pointers and i32 column indices; dense operands are row-major f32. */
#include <stdint.h>

/* C[i, :] = sum_j A[i, j] * B[j, :]   (B: n x k, C: m x k) */
void cloop_spmm(int64_t m, int64_t k, const int64_t *indptr, const int32_t *indices,
                const float *values, const float *b, float *c)
{
    for (int64_t i = 0; i < m; i++) {
        float *crow = c + i * k;
        for (int64_t kk = 0; kk < k; kk++) crow[kk] = 0.0f;
        for (int64_t p = indptr[i]; p < indptr[i + 1]; p++) {
            const float a = values[p];
            const float *brow = b + (int64_t)indices[p] * k;
            for (int64_t kk = 0; kk < k; kk++) crow[kk] += a * brow[kk];
        }
    }
}

/* out[p] = A[i, j] * dot(X[i, :], Y[j, :]) for each non-zero p = (i, j)
 * (X: m x k, Y: n x k, out: nnz values in CSR order) */
void cloop_sddmm(int64_t m, int64_t k, const int64_t *indptr, const int32_t *indices,
                 const float *values, const float *x, const float *y, float *out)
{
    for (int64_t i = 0; i < m; i++) {
        const float *xrow = x + i * k;
        for (int64_t p = indptr[i]; p < indptr[i + 1]; p++) {
            const float *yrow = y + (int64_t)indices[p] * k;
            float t = 0.0f;
            for (int64_t kk = 0; kk < k; kk++) t += xrow[kk] * yrow[kk];
            out[p] = values[p] * t;
        }
    }
}

/* y[i] = sum_j A[i, j] * x[j] */
void cloop_spmv(int64_t m, const int64_t *indptr, const int32_t *indices,
                const float *values, const float *x, float *y)
{
    for (int64_t i = 0; i < m; i++) {
        float t = 0.0f;
        for (int64_t p = indptr[i]; p < indptr[i + 1]; p++) t += values[p] * x[indices[p]];
        y[i] = t;
    }
}
