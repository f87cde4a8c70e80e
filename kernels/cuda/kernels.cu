/*
 * kernels.cu — the CUDA backend's kernel table (fp32, fp16, bf16; float
 * accumulation everywhere): GEMM-like ops through cuBLAS
 * (cublasGemmStridedBatchedEx, fp32 compute), the rest as small kernels of
 * our own. Same tile contract as the CPU kernels (kernels.h): dense operand
 * regions, partial sums for split contractions, the bias on the first
 * reduction slice, dx overwritten.
 *
 * This file: the transformer operators (linear, batch_matmul, layernorm,
 * softmax, unary, binary, dropout, embedding, softmax_ce, concat, split,
 * reshape, transpose), input, and the table. Conv2d, pool2d and batchnorm
 * are cuDNN calls (kernels_dnn.cu, built with SS_HAVE_CUDNN); fused
 * attention and LSTM are compositions of cuBLAS GEMMs and small kernels
 * (kernels_seq.cu). Every kernel runs on the context's stream; nothing here
 * synchronises.
 */
#include "kernels/cuda/common.cuh"

static void linear_dims(const ss_kargs *a, int64_t *M, int64_t *K, int64_t *N)
{
    *K = ext(&a->xr[0], a->xr[0].ndim - 1);
    *N = ext(&a->yr[0], a->yr[0].ndim - 1);
    *M = *N ? yvol(a) / *N : 0;
}

static void linear_fwd(const ss_kargs *a)
{
    int64_t M, K, N;
    linear_dims(a, &M, &K, &N);
    int tb = a->op->attrs.trans_b;
    gemm(a, 0, tb, M, N, K, 1, a->x[0], K, 0, a->x[1], tb ? K : N, 0, 0, a->y[0], N, 0, 1);
    if (a->op->n_w > 1 && a->t.red.lo == 0)
        DISPATCH(a->dtype, add_bias, a, a->y[0], a->x[2], M, N);
}

static void linear_bwd(const ss_kargs *a)
{
    int64_t M, K, N;
    linear_dims(a, &M, &K, &N);
    int tb = a->op->attrs.trans_b;
    if (a->dx[0])
        gemm(a, 0, !tb, M, K, N, 1, a->dy[0], N, 0, a->x[1], tb ? K : N, 0, 0, a->dx[0], K, 0, 1);
    if (a->dx[1]) {
        if (!tb)
            gemm(a, 1, 0, K, N, M, 1, a->x[0], K, 0, a->dy[0], N, 0, 0, a->dx[1], N, 0, 1);
        else
            gemm(a, 1, 0, N, K, M, 1, a->dy[0], N, 0, a->x[0], K, 0, 0, a->dx[1], K, 0, 1);
    }
    if (a->op->n_w > 1 && a->dx[2])
        DISPATCH(a->dtype, col_sum, a, a->dx[2], a->dy[0], M, N, a->t.red.lo == 0);
}

static void bmm_dims(const ss_kargs *a, int64_t *B, int64_t *M, int64_t *N, int64_t *K)
{
    int n = a->yr[0].ndim;
    *B = 1;
    for (int i = 0; i < n - 2; i++)
        *B *= ext(&a->yr[0], i);
    *M = ext(&a->yr[0], n - 2);
    *N = ext(&a->yr[0], n - 1);
    *K = a->t.red.hi - a->t.red.lo;
}

static void bmm_fwd(const ss_kargs *a)
{
    int64_t B, M, N, K;
    bmm_dims(a, &B, &M, &N, &K);
    int ta = a->op->attrs.trans_a, tb = a->op->attrs.trans_b;
    gemm(a, ta, tb, M, N, K, 1, a->x[0], ta ? M : K, M * K, a->x[1], tb ? K : N, K * N, 0,
         a->y[0], N, M * N, B);
}

static void bmm_bwd(const ss_kargs *a)
{
    int64_t B, M, N, K;
    bmm_dims(a, &B, &M, &N, &K);
    int ta = a->op->attrs.trans_a, tb = a->op->attrs.trans_b;
    int64_t lda = ta ? M : K, ldb = tb ? K : N;
    if (a->dx[0]) {
        if (!ta)
            gemm(a, 0, !tb, M, K, N, 1, a->dy[0], N, M * N, a->x[1], ldb, K * N, 0, a->dx[0], K,
                 M * K, B);
        else
            gemm(a, tb, 1, K, M, N, 1, a->x[1], ldb, K * N, a->dy[0], N, M * N, 0, a->dx[0], M,
                 M * K, B);
    }
    if (a->dx[1]) {
        if (!tb)
            gemm(a, !ta, 0, K, N, M, 1, a->x[0], lda, M * K, a->dy[0], N, M * N, 0, a->dx[1], N,
                 K * N, B);
        else
            gemm(a, 1, ta, N, K, M, 1, a->dy[0], N, M * N, a->x[0], lda, M * K, 0, a->dx[1], K,
                 K * N, B);
    }
}

/* ----------------------------------------------------------- elementwise */

template <typename T>
__global__ void unary_k(T *y, const T *x, int64_t n, int kind)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = ld(x, i), r;
        switch (kind) {
        case SS_UNARY_RELU: r = v > 0 ? v : 0; break;
        case SS_UNARY_GELU: r = 0.5f * v * (1 + erff(v * 0.70710678f)); break;
        case SS_UNARY_TANH: r = tanhf(v); break;
        case SS_UNARY_SILU: r = v / (1 + expf(-v)); break;
        case SS_UNARY_RELU2: r = v > 0 ? v * v : 0; break;
        default: r = 1 / (1 + expf(-v)); break;
        }
        st(y, i, r);
    }
}

template <typename T>
__global__ void unary_bk(T *dx, const T *x, const T *y, const T *dy, int64_t n, int kind)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = ld(x, i), o = ld(y, i), g = ld(dy, i), r;
        switch (kind) {
        case SS_UNARY_RELU: r = v > 0 ? g : 0; break;
        case SS_UNARY_GELU:
            r = g * (0.5f * (1 + erff(v * 0.70710678f)) + v * 0.39894228f * expf(-0.5f * v * v));
            break;
        case SS_UNARY_TANH: r = g * (1 - o * o); break;
        case SS_UNARY_SILU: {
            float s = 1 / (1 + expf(-v));
            r = g * s * (1 + v * (1 - s));
            break;
        }
        case SS_UNARY_RELU2: r = v > 0 ? 2 * v * g : 0; break;
        default: r = g * o * (1 - o); break;
        }
        st(dx, i, r);
    }
}

template <typename T> static void unary_f(const ss_kargs *a)
{
    unary_k<T><<<nblocks(yvol(a)), TPB, 0, S(a)>>>((T *)a->y[0], (const T *)a->x[0], yvol(a),
                                                   (int)a->op->attrs.unary);
}
template <typename T> static void unary_b(const ss_kargs *a)
{
    if (a->dx[0])
        unary_bk<T><<<nblocks(yvol(a)), TPB, 0, S(a)>>>((T *)a->dx[0], (const T *)a->x[0],
                                                        (const T *)a->y[0], (const T *)a->dy[0],
                                                        yvol(a), (int)a->op->attrs.unary);
}
static void unary_fwd(const ss_kargs *a) { DISPATCH(a->dtype, unary_f, a); }
static void unary_bwd(const ss_kargs *a) { DISPATCH(a->dtype, unary_b, a); }

template <typename T>
__global__ void binary_k(T *y, const T *x0, const T *x1, int64_t n, int mul)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        st(y, i, mul ? ld(x0, i) * ld(x1, i) : ld(x0, i) + ld(x1, i));
}

template <typename T>
__global__ void binary_bk(T *d0, T *d1, const T *x0, const T *x1, const T *dy, int64_t n, int mul)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float g = ld(dy, i);
        if (d0)
            st(d0, i, mul ? g * ld(x1, i) : g);
        if (d1)
            st(d1, i, mul ? g * ld(x0, i) : g);
    }
}

template <typename T> static void binary_f(const ss_kargs *a)
{
    binary_k<T><<<nblocks(yvol(a)), TPB, 0, S(a)>>>((T *)a->y[0], (const T *)a->x[0],
                                                    (const T *)a->x[1], yvol(a),
                                                    a->op->attrs.binary == SS_BINARY_MUL);
}
template <typename T> static void binary_b(const ss_kargs *a)
{
    binary_bk<T><<<nblocks(yvol(a)), TPB, 0, S(a)>>>((T *)a->dx[0], (T *)a->dx[1],
                                                     (const T *)a->x[0], (const T *)a->x[1],
                                                     (const T *)a->dy[0], yvol(a),
                                                     a->op->attrs.binary == SS_BINARY_MUL);
}
static void binary_fwd(const ss_kargs *a) { DISPATCH(a->dtype, binary_f, a); }
static void binary_bwd(const ss_kargs *a) { DISPATCH(a->dtype, binary_b, a); }

/* dropout: keep element i when a hash of (seed, i) is at or above the rate */
__device__ __forceinline__ uint32_t hash32(uint64_t seed, uint64_t i)
{
    uint64_t z = seed * 0x9e3779b97f4a7c15ULL + i * 0xbf58476d1ce4e5b9ULL + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

template <typename T>
__global__ void dropout_k(T *y, unsigned char *mask, const T *x, int64_t n, uint32_t thr,
                          float scale, uint64_t seed)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        unsigned char k = hash32(seed, (uint64_t)i) >= thr;
        mask[i] = k;
        st(y, i, k ? ld(x, i) * scale : 0.0f);
    }
}

template <typename T>
__global__ void dropout_bk(T *dx, const unsigned char *mask, const T *dy, int64_t n, float scale)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        st(dx, i, mask[i] ? ld(dy, i) * scale : 0.0f);
}

static float drop_scale(const ss_kargs *a)
{
    return a->op->attrs.rate < 1 ? (float)(1 / (1 - a->op->attrs.rate)) : 0;
}
template <typename T> static void dropout_f(const ss_kargs *a)
{
    dropout_k<T><<<nblocks(yvol(a)), TPB, 0, S(a)>>>(
        (T *)a->y[0], (unsigned char *)a->saved, (const T *)a->x[0], yvol(a),
        (uint32_t)(a->op->attrs.rate * 4294967295.0), drop_scale(a), a->seed);
}
template <typename T> static void dropout_b(const ss_kargs *a)
{
    if (a->dx[0])
        dropout_bk<T><<<nblocks(yvol(a)), TPB, 0, S(a)>>>(
            (T *)a->dx[0], (const unsigned char *)a->saved, (const T *)a->dy[0], yvol(a),
            drop_scale(a));
}
static void dropout_fwd(const ss_kargs *a) { DISPATCH(a->dtype, dropout_f, a); }
static void dropout_bwd(const ss_kargs *a) { DISPATCH(a->dtype, dropout_b, a); }
static ss_status dropout_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    (void)d;
    *saved = (size_t)yvol(a);
    *work = 0;
    return SS_OK;
}

/* ---------------------------------------------------- softmax and norms */

/* Softmax over L with stride I: one thread per (outer, inner) row. */
template <typename T>
__global__ void softmax_k(T *y, const T *x, int64_t O, int64_t L, int64_t I)
{
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < O * I;
         r += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = (r / I) * L * I + r % I;
        float mx = -INFINITY, s = 0;
        for (int64_t l = 0; l < L; l++)
            mx = fmaxf(mx, ld(x, b + l * I));
        for (int64_t l = 0; l < L; l++)
            s += expf(ld(x, b + l * I) - mx);
        for (int64_t l = 0; l < L; l++)
            st(y, b + l * I, expf(ld(x, b + l * I) - mx) / s);
    }
}

template <typename T>
__global__ void softmax_bk(T *dx, const T *y, const T *dy, int64_t O, int64_t L, int64_t I)
{
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < O * I;
         r += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = (r / I) * L * I + r % I;
        float s = 0;
        for (int64_t l = 0; l < L; l++)
            s += ld(dy, b + l * I) * ld(y, b + l * I);
        for (int64_t l = 0; l < L; l++)
            st(dx, b + l * I, ld(y, b + l * I) * (ld(dy, b + l * I) - s));
    }
}

static void sm_geo(const ss_kargs *a, int64_t *O, int64_t *L, int64_t *I)
{
    int n = a->yr[0].ndim, ax = a->op->attrs.axis < 0 ? a->op->attrs.axis + n : a->op->attrs.axis;
    *O = *I = 1;
    for (int i = 0; i < ax; i++)
        *O *= ext(&a->yr[0], i);
    for (int i = ax + 1; i < n; i++)
        *I *= ext(&a->yr[0], i);
    *L = ext(&a->yr[0], ax);
}
template <typename T> static void softmax_f(const ss_kargs *a)
{
    int64_t O, L, I;
    sm_geo(a, &O, &L, &I);
    softmax_k<T><<<nblocks(O * I), TPB, 0, S(a)>>>((T *)a->y[0], (const T *)a->x[0], O, L, I);
}
template <typename T> static void softmax_b(const ss_kargs *a)
{
    int64_t O, L, I;
    sm_geo(a, &O, &L, &I);
    if (a->dx[0])
        softmax_bk<T><<<nblocks(O * I), TPB, 0, S(a)>>>((T *)a->dx[0], (const T *)a->y[0],
                                                        (const T *)a->dy[0], O, L, I);
}
static void softmax_fwd(const ss_kargs *a) { DISPATCH(a->dtype, softmax_f, a); }
static void softmax_bwd(const ss_kargs *a) { DISPATCH(a->dtype, softmax_b, a); }

/* layernorm over rows of h: one thread per row; saved mean and rstd (float) */
template <typename T>
__global__ void ln_k(T *y, float *stat, const T *x, const T *g, const T *b, int64_t rows, int64_t h)
{
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows;
         r += (int64_t)gridDim.x * blockDim.x) {
        float s = 0, s2 = 0;
        for (int64_t j = 0; j < h; j++)
            s += ld(x, r * h + j);
        float mu = s / h;
        for (int64_t j = 0; j < h; j++) {
            float v = ld(x, r * h + j) - mu;
            s2 += v * v;
        }
        float rs = rsqrtf(s2 / h + 1e-5f);
        stat[r] = mu;
        stat[rows + r] = rs;
        for (int64_t j = 0; j < h; j++)
            st(y, r * h + j, (ld(x, r * h + j) - mu) * rs * ld(g, j) + ld(b, j));
    }
}

template <typename T>
__global__ void ln_bk(T *dx, const float *stat, const T *x, const T *g, const T *dy, int64_t rows,
                      int64_t h)
{
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows;
         r += (int64_t)gridDim.x * blockDim.x) {
        float mu = stat[r], rs = stat[rows + r], s1 = 0, s2 = 0;
        for (int64_t j = 0; j < h; j++) {
            float xh = (ld(x, r * h + j) - mu) * rs, gd = ld(dy, r * h + j) * ld(g, j);
            s1 += gd;
            s2 += gd * xh;
        }
        s1 /= h;
        s2 /= h;
        for (int64_t j = 0; j < h; j++) {
            float xh = (ld(x, r * h + j) - mu) * rs;
            st(dx, r * h + j, rs * (ld(dy, r * h + j) * ld(g, j) - s1 - xh * s2));
        }
    }
}

/* dgamma, dbeta: one thread per column */
template <typename T>
__global__ void ln_gk(T *dg, T *db, const float *stat, const T *x, const T *dy, int64_t rows,
                      int64_t h)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < h;
         j += (int64_t)gridDim.x * blockDim.x) {
        float sg = 0, sb = 0;
        for (int64_t r = 0; r < rows; r++) {
            float g = ld(dy, r * h + j);
            sg += g * (ld(x, r * h + j) - stat[r]) * stat[rows + r];
            sb += g;
        }
        if (dg)
            st(dg, j, sg);
        if (db)
            st(db, j, sb);
    }
}

static void ln_geo(const ss_kargs *a, int64_t *rows, int64_t *h)
{
    *h = ext(&a->yr[0], a->yr[0].ndim - 1);
    *rows = *h ? yvol(a) / *h : 0;
}
template <typename T> static void ln_f(const ss_kargs *a)
{
    int64_t r, h;
    ln_geo(a, &r, &h);
    ln_k<T><<<nblocks(r), TPB, 0, S(a)>>>((T *)a->y[0], (float *)a->saved, (const T *)a->x[0],
                                          (const T *)a->x[1], (const T *)a->x[2], r, h);
}
template <typename T> static void ln_b(const ss_kargs *a)
{
    int64_t r, h;
    ln_geo(a, &r, &h);
    if (a->dx[0])
        ln_bk<T><<<nblocks(r), TPB, 0, S(a)>>>((T *)a->dx[0], (const float *)a->saved,
                                               (const T *)a->x[0], (const T *)a->x[1],
                                               (const T *)a->dy[0], r, h);
    ln_gk<T><<<nblocks(h), TPB, 0, S(a)>>>((T *)a->dx[1], (T *)a->dx[2], (const float *)a->saved,
                                           (const T *)a->x[0], (const T *)a->dy[0], r, h);
}
static void ln_fwd(const ss_kargs *a) { DISPATCH(a->dtype, ln_f, a); }
static void ln_bwd(const ss_kargs *a) { DISPATCH(a->dtype, ln_b, a); }
static ss_status ln_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    (void)d;
    int64_t r, h;
    ln_geo(a, &r, &h);
    *saved = (size_t)(2 * r) * sizeof(float);
    *work = 0;
    return SS_OK;
}

/* -------------------------------------------------- embedding and loss */

template <typename T>
__global__ void emb_k(T *y, const void *ids, int is64, const T *W, int64_t rows, int64_t cols,
                      int64_t lo, int64_t hi)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * cols;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t id = idx_at(ids, is64, i / cols);
        st(y, i, id >= lo && id < hi ? ld(W, (id - lo) * cols + i % cols) : 0.0f);
    }
}

/* scatter-add into a float accumulator (work), then convert into dW */
__global__ void emb_bk(float *acc, const void *ids, int is64, const float *dyf, int64_t rows,
                       int64_t cols, int64_t lo, int64_t hi)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * cols;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t id = idx_at(ids, is64, i / cols);
        if (id >= lo && id < hi)
            atomicAdd(acc + (id - lo) * cols + i % cols, dyf[i]);
    }
}

static void emb_geo(const ss_kargs *a, int64_t *rows, int64_t *cols)
{
    *cols = ext(&a->yr[0], a->yr[0].ndim - 1);
    *rows = ss_region_volume(&a->xr[0]);
}
template <typename T> static void emb_f(const ss_kargs *a)
{
    int64_t r, c;
    emb_geo(a, &r, &c);
    emb_k<T><<<nblocks(r * c), TPB, 0, S(a)>>>((T *)a->y[0], a->x[0], a->xt[0] == SS_I64,
                                               (const T *)a->x[1], r, c, a->t.red.lo, a->t.red.hi);
}
template <typename T> static void emb_b(const ss_kargs *a)
{
    int64_t r, c, nw = ss_region_volume(&a->xr[1]);
    emb_geo(a, &r, &c);
    if (!a->dx[1])
        return;
    float *acc = (float *)a->work, *dyf = acc + nw;
    cudaMemsetAsync(acc, 0, (size_t)nw * sizeof(float), S(a));
    to_f32<T><<<nblocks(r * c), TPB, 0, S(a)>>>(dyf, (const T *)a->dy[0], r * c);
    emb_bk<<<nblocks(r * c), TPB, 0, S(a)>>>(acc, a->x[0], a->xt[0] == SS_I64, dyf, r, c,
                                             a->t.red.lo, a->t.red.hi);
    from_f32<T><<<nblocks(nw), TPB, 0, S(a)>>>((T *)a->dx[1], acc, nw);
}
static void emb_fwd(const ss_kargs *a) { DISPATCH(a->dtype, emb_f, a); }
static void emb_bwd(const ss_kargs *a) { DISPATCH(a->dtype, emb_b, a); }
static ss_status emb_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    (void)d;
    *saved = 0;
    *work = (size_t)(ss_region_volume(&a->xr[1]) + yvol(a)) * sizeof(float);
    return SS_OK;
}

/* softmax cross-entropy: one thread per row; saved log-sum-exp */
template <typename T>
__global__ void ce_k(float *loss, float *lse, const T *x, const void *lab, int is64, int64_t rows,
                     int64_t V, int64_t lo)
{
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows;
         r += (int64_t)gridDim.x * blockDim.x) {
        float mx = -INFINITY, s = 0;
        for (int64_t v = 0; v < V; v++)
            mx = fmaxf(mx, ld(x, r * V + v));
        for (int64_t v = 0; v < V; v++)
            s += expf(ld(x, r * V + v) - mx);
        float l = mx + logf(s);
        int64_t t = idx_at(lab, is64, r) - lo;
        lse[r] = l;
        loss[r] = l - (t >= 0 && t < V ? ld(x, r * V + t) : 0.0f);
    }
}

template <typename T>
__global__ void ce_bk(T *dx, const float *lse, const float *dl, const T *x, const void *lab,
                      int is64, int64_t rows, int64_t V, int64_t lo)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * V;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / V, v = i % V, t = idx_at(lab, is64, r) - lo;
        st(dx, i, dl[r] * (expf(ld(x, i) - lse[r]) - (v == t ? 1.0f : 0.0f)));
    }
}

template <typename T> static void ce_f(const ss_kargs *a)
{
    int64_t rows = yvol(a), V = a->t.red.hi - a->t.red.lo;
    ce_k<T><<<nblocks(rows), TPB, 0, S(a)>>>((float *)a->y[0], (float *)a->saved, (const T *)a->x[0],
                                             a->x[1], a->xt[1] == SS_I64, rows, V, a->t.red.lo);
}
template <typename T> static void ce_b(const ss_kargs *a)
{
    int64_t rows = yvol(a), V = a->t.red.hi - a->t.red.lo;
    if (a->dx[0])
        ce_bk<T><<<nblocks(rows * V), TPB, 0, S(a)>>>((T *)a->dx[0], (const float *)a->saved,
                                                     (const float *)a->dy[0], (const T *)a->x[0],
                                                     a->x[1], a->xt[1] == SS_I64, rows, V,
                                                     a->t.red.lo);
}
static void ce_fwd(const ss_kargs *a) { DISPATCH(a->dtype, ce_f, a); }
static void ce_bwd(const ss_kargs *a) { DISPATCH(a->dtype, ce_b, a); }
static ss_status ce_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    (void)d;
    if (a->yt[0] != SS_F32)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "kernels: cuda softmax_ce writes an f32 loss");
    *saved = (size_t)yvol(a) * sizeof(float);
    *work = 0;
    return SS_OK;
}

/* ---------------------------------------------------------- data movers */

/* A box copy: dst[origin_d + i] (+)= src[origin_s + i] over extents ex,
 * every array row-major with its own extents; one thread per element. */
typedef struct box {
    int nd;
    int64_t ex[SS_MAX_DIMS], se[SS_MAX_DIMS], so[SS_MAX_DIMS], de[SS_MAX_DIMS], dof[SS_MAX_DIMS];
    int64_t st_src[SS_MAX_DIMS]; /* transpose: source stride of each box dim (0: row-major) */
} box;

template <typename T>
__global__ void box_k(T *dst, const T *src, box b, int64_t n, int add)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t rem = i, s = 0, d = 0, idx[SS_MAX_DIMS];
        for (int k = b.nd - 1; k >= 0; k--) {
            idx[k] = rem % b.ex[k];
            rem /= b.ex[k];
        }
        for (int k = 0; k < b.nd; k++) {
            d = d * b.de[k] + b.dof[k] + idx[k];
            if (!b.st_src[0])
                s = s * b.se[k] + b.so[k] + idx[k];
            else
                s += idx[k] * b.st_src[k];
        }
        float v = ld(src, s);
        st(dst, d, add ? ld(dst, d) + v : v);
    }
}

template <typename T> static void box_copy(const ss_kargs *a, void *dst, const void *src, box b, int add)
{
    int64_t n = 1;
    for (int k = 0; k < b.nd; k++)
        n *= b.ex[k];
    if (n > 0)
        box_k<T><<<nblocks(n), TPB, 0, S(a)>>>((T *)dst, (const T *)src, b, n, add);
}

static box region_box(const ss_region *r)
{
    box b;
    memset(&b, 0, sizeof b);
    b.nd = r->ndim;
    for (int i = 0; i < r->ndim; i++)
        b.ex[i] = b.se[i] = b.de[i] = ext(r, i);
    return b;
}

static int op_axis(const ss_kargs *a)
{
    int n = a->yr[0].ndim;
    return a->op->attrs.axis < 0 ? a->op->attrs.axis + n : a->op->attrs.axis;
}

static void concat_move(const ss_kargs *a, int back)
{
    int ax = op_axis(a);
    for (int i = 0; i < a->op->n_in; i++) {
        if (ss_region_volume(&a->xr[i]) == 0 || (back && !a->dx[i]))
            continue;
        box b = region_box(&a->xr[i]);
        int64_t off = 0;
        for (int j = 0; j < i; j++)
            off += ss_graph_tensor(a->g, a->op->inputs[j])->shape[ax];
        off += a->xr[i].r[ax].lo - a->t.out.r[ax].lo;
        for (int k = 0; k < b.nd; k++)
            (back ? b.se : b.de)[k] = ext(&a->yr[0], k);
        (back ? b.so : b.dof)[ax] = off;
        if (!back)
            DISPATCH(a->dtype, box_copy, a, a->y[0], a->x[i], b, 0);
        else
            DISPATCH(a->dtype, box_copy, a, a->dx[i], a->dy[0], b, 0);
    }
}
static void concat_fwd(const ss_kargs *a) { concat_move(a, 0); }
static void concat_bwd(const ss_kargs *a) { concat_move(a, 1); }

static void split_move(const ss_kargs *a, int back)
{
    int ax = op_axis(a);
    int64_t off = 0;
    if (back && a->dx[0])
        cudaMemsetAsync(a->dx[0], 0, ss_kernel_x_bytes(a, 0), S(a));
    for (int k = 0; k < a->n_y; k++) {
        box b = region_box(&a->yr[k]);
        for (int i = 0; i < b.nd; i++)
            (back ? b.de : b.se)[i] = ext(&a->xr[0], i);
        (back ? b.dof : b.so)[ax] = off + a->yr[k].r[ax].lo - a->xr[0].r[ax].lo;
        off += a->op->attrs.split_sizes[k];
        if (!back)
            DISPATCH(a->dtype, box_copy, a, a->y[k], a->x[0], b, 0);
        else if (a->dx[0])
            DISPATCH(a->dtype, box_copy, a, a->dx[0], a->dy[k], b, 1);
    }
}
static void split_fwd(const ss_kargs *a) { split_move(a, 0); }
static void split_bwd(const ss_kargs *a) { split_move(a, 1); }

static ss_status reshape_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    *saved = *work = 0;
    if (ss_region_volume(&a->xr[0]) != yvol(a))
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "kernels: reshape '%s': not a contiguous "
                           "block", a->op->name);
    return SS_OK;
}
static void reshape_fwd(const ss_kargs *a)
{
    cudaMemcpyAsync(a->y[0], a->x[0], ss_kernel_y_bytes(a, 0), cudaMemcpyDeviceToDevice, S(a));
}
static void reshape_bwd(const ss_kargs *a)
{
    if (a->dx[0])
        cudaMemcpyAsync(a->dx[0], a->dy[0], ss_kernel_y_bytes(a, 0), cudaMemcpyDeviceToDevice,
                        S(a));
}

/* transpose: output box in row-major order, source by strides */
static void transpose_move(const ss_kargs *a, int back)
{
    const int *perm = a->op->attrs.perm;
    int nd = a->yr[0].ndim;
    int64_t xs[SS_MAX_DIMS];
    xs[nd - 1] = 1;
    for (int i = nd - 2; i >= 0; i--)
        xs[i] = xs[i + 1] * ext(&a->xr[0], i + 1);
    if (!back) {
        box b = region_box(&a->yr[0]);
        for (int k = 0; k < nd; k++)
            b.st_src[k] = xs[perm[k]];
        DISPATCH(a->dtype, box_copy, a, a->y[0], a->x[0], b, 0);
    } else if (a->dx[0]) {
        /* dx[perm[k]] = dy[k]: iterate dx's box, read dy by strides */
        int64_t ys[SS_MAX_DIMS];
        ys[nd - 1] = 1;
        for (int i = nd - 2; i >= 0; i--)
            ys[i] = ys[i + 1] * ext(&a->yr[0], i + 1);
        box b = region_box(&a->xr[0]);
        for (int k = 0; k < nd; k++)
            b.st_src[perm[k]] = ys[k];
        DISPATCH(a->dtype, box_copy, a, a->dx[0], a->dy[0], b, 0);
    }
}
static void transpose_fwd(const ss_kargs *a) { transpose_move(a, 0); }
static void transpose_bwd(const ss_kargs *a) { transpose_move(a, 1); }

static void nop(const ss_kargs *a) { (void)a; }

/* ----------------------------------------------------------------- table */

static const ss_kernel k_input = {FLOATS | (1u << SS_I32) | (1u << SS_I64), no_state, nop, nop};
static const ss_kernel k_linear = {FLOATS, no_state, linear_fwd, linear_bwd};
static const ss_kernel k_bmm = {FLOATS, no_state, bmm_fwd, bmm_bwd};
static const ss_kernel k_unary = {FLOATS, no_state, unary_fwd, unary_bwd};
static const ss_kernel k_binary = {FLOATS, no_state, binary_fwd, binary_bwd};
static const ss_kernel k_dropout = {FLOATS, dropout_sizes, dropout_fwd, dropout_bwd};
static const ss_kernel k_softmax = {FLOATS, no_state, softmax_fwd, softmax_bwd};
static const ss_kernel k_layernorm = {FLOATS, ln_sizes, ln_fwd, ln_bwd};
static const ss_kernel k_embedding = {FLOATS, emb_sizes, emb_fwd, emb_bwd};
static const ss_kernel k_ce = {FLOATS, ce_sizes, ce_fwd, ce_bwd};
static const ss_kernel k_concat = {FLOATS, no_state, concat_fwd, concat_bwd};
static const ss_kernel k_split = {FLOATS, no_state, split_fwd, split_bwd};
static const ss_kernel k_reshape = {FLOATS, reshape_sizes, reshape_fwd, reshape_bwd};
static const ss_kernel k_transpose = {FLOATS, no_state, transpose_fwd, transpose_bwd};

extern "C" const ss_kernel *ss_kernels_cuda(ss_op_type t)
{
    switch (t) {
    case SS_OP_INPUT: return &k_input;
    case SS_OP_LINEAR: return &k_linear;
    case SS_OP_BATCH_MATMUL: return &k_bmm;
    case SS_OP_UNARY: return &k_unary;
    case SS_OP_BINARY: return &k_binary;
    case SS_OP_DROPOUT: return &k_dropout;
    case SS_OP_SOFTMAX: return &k_softmax;
    case SS_OP_LAYERNORM: return &k_layernorm;
    case SS_OP_EMBEDDING: return &k_embedding;
    case SS_OP_SOFTMAX_CE: return &k_ce;
    case SS_OP_CONCAT: return &k_concat;
    case SS_OP_SPLIT: return &k_split;
    case SS_OP_RESHAPE: return &k_reshape;
    case SS_OP_TRANSPOSE: return &k_transpose;
    case SS_OP_ATTENTION: return &ss_cuda_attention;
    case SS_OP_LSTM: return &ss_cuda_lstm;
    case SS_OP_FLASH_ATTENTION: return &ss_cuda_flash_attention;
#ifdef SS_HAVE_CUDNN
    case SS_OP_CONV2D: return &ss_cuda_conv2d;
    case SS_OP_POOL2D: return &ss_cuda_pool2d;
    case SS_OP_BATCHNORM: return &ss_cuda_batchnorm;
#endif
    default: return NULL; /* conv2d, pool2d, batchnorm without cuDNN */
    }
}
