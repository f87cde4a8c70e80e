/*
 * cpu_gemm.c — the CPU kernels built on GEMM (OpenBLAS cblas_sgemm): linear,
 * batch_matmul, conv2d (im2col), embedding (gather / saxpy scatter-add),
 * LSTM (one GEMM per step for the four gates) and fused multi-head
 * attention, forward and backward, fp32.
 *
 * Every kernel works on its tile's operand regions (kernels.h): a split
 * contraction dim gives partial sums (the bias is added by the first
 * reduction slice only), a convolution tile reads the halo its window
 * needs, an embedding tile holds a shard of the vocabulary (ids outside it
 * give zero rows), causal attention masks by global positions.
 */
#include "kernels/cpu_impl.h"

#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* OpenBLAS is opened on first use, not linked (CMakeLists.txt): its
 * pthreads build starts its worker threads when loaded, and they spin for
 * about 0.1 s of CPU before sleeping, in every process, simulate included,
 * whether a kernel runs or not. Loaded here it initialises exactly as it
 * would have at start-up (same library, same threads). */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static __typeof__(cblas_sgemm) *blas_sgemm;
static __typeof__(cblas_saxpy) *blas_saxpy;
static char blas_err[256];

static void blas_open(void)
{
    void *h = dlopen(SS_OPENBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h) {
        *(void **)&blas_sgemm = dlsym(h, "cblas_sgemm");
        *(void **)&blas_saxpy = dlsym(h, "cblas_saxpy");
    }
    if (!h || !blas_sgemm || !blas_saxpy) {
        const char *e = dlerror();
        snprintf(blas_err, sizeof blas_err, "%s", e ? e : "cblas_sgemm or cblas_saxpy missing");
        blas_sgemm = NULL;
        blas_saxpy = NULL;
    }
}

ss_status ss_cpu_blas_open(ss_diag *d)
{
    pthread_once(&blas_once, blas_open);
    if (!blas_sgemm)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "kernels: cannot open OpenBLAS (%s): %s",
                           SS_OPENBLAS_SONAME, blas_err);
    return SS_OK;
}

int ss_cpu_blas_loaded(void) { return blas_sgemm != NULL; }

void ss_cpu_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                 int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
        return;
    }
    blas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (blasint)M, (blasint)N, (blasint)K, alpha, A, (blasint)lda, B, (blasint)ldb, beta,
                C, (blasint)ldc);
}

ss_status ss_kernel_gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, const float *B,
                             float *C, ss_diag *d)
{
    ss_status st = ss_cpu_blas_open(d);
    if (st == SS_OK)
        ss_cpu_gemm(0, 0, M, N, K, 1, A, K, B, N, 0, C, N);
    return st;
}

void ss_cpu_axpy(int64_t n, float alpha, const float *x, float *y)
{
    blas_saxpy((blasint)n, alpha, x, 1, y, 1);
}

int64_t ss_cpu_index(const void *p, ss_dtype t, int64_t i)
{
    return t == SS_I64 ? ((const int64_t *)p)[i] : (int64_t)((const int32_t *)p)[i];
}

#define F32 (1u << SS_F32)

static ss_status no_state(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    (void)a;
    (void)d;
    *saved = *work = 0;
    return SS_OK;
}

static int first_red(const ss_kargs *a) { return a->t.red.lo == 0; }

/* y[rows, n] += b[n] */
static void add_bias(float *y, const float *b, int64_t rows, int64_t n)
{
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < n; j++)
            y[i * n + j] += b[j];
}

/* db[n] = sum over rows of dy[rows, n] (or zeros when `on` is 0) */
static void col_sum(float *db, const float *dy, int64_t rows, int64_t n, int on)
{
    memset(db, 0, (size_t)n * sizeof *db);
    if (!on)
        return;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < n; j++)
            db[j] += dy[i * n + j];
}

/* ------------------------------------------------------------------ linear */

static void linear_dims(const ss_kargs *a, int64_t *M, int64_t *K, int64_t *N)
{
    const ss_region *xr = &a->xr[0];
    *K = ext(xr, xr->ndim - 1);
    *N = ext(&a->yr[0], a->yr[0].ndim - 1);
    *M = *K > 0 ? ss_region_volume(xr) / *K : ss_region_volume(&a->yr[0]) / (*N ? *N : 1);
}

static void linear_fwd(const ss_kargs *a)
{
    int64_t M, K, N;
    linear_dims(a, &M, &K, &N);
    int tb = a->op->attrs.trans_b;
    float *y = a->y[0];
    ss_cpu_gemm(0, tb, M, N, K, 1, a->x[0], K, a->x[1], tb ? K : N, 0, y, N);
    if (a->op->n_w > 1 && first_red(a))
        add_bias(y, a->x[2], M, N);
}

static void linear_bwd(const ss_kargs *a)
{
    int64_t M, K, N;
    linear_dims(a, &M, &K, &N);
    int tb = a->op->attrs.trans_b;
    const float *dy = a->dy[0];
    if (a->dx[0])
        ss_cpu_gemm(0, !tb, M, K, N, 1, dy, N, a->x[1], tb ? K : N, 0, a->dx[0], K);
    if (a->dx[1]) {
        if (!tb)
            ss_cpu_gemm(1, 0, K, N, M, 1, a->x[0], K, dy, N, 0, a->dx[1], N);
        else
            ss_cpu_gemm(1, 0, N, K, M, 1, dy, N, a->x[0], K, 0, a->dx[1], K);
    }
    if (a->op->n_w > 1 && a->dx[2])
        col_sum(a->dx[2], dy, M, N, first_red(a));
}

const ss_kernel ss_cpu_linear = {F32, no_state, linear_fwd, linear_bwd};

/* ------------------------------------------------------------ batch_matmul */

static void bmm_dims(const ss_kargs *a, int64_t *B, int64_t *M, int64_t *N, int64_t *K)
{
    const ss_region *yr = &a->yr[0];
    int n = yr->ndim;
    *B = 1;
    for (int i = 0; i < n - 2; i++)
        *B *= ext(yr, i);
    *M = ext(yr, n - 2);
    *N = ext(yr, n - 1);
    *K = a->t.red.hi - a->t.red.lo;
}

static void bmm_fwd(const ss_kargs *a)
{
    int64_t B, M, N, K;
    bmm_dims(a, &B, &M, &N, &K);
    int ta = a->op->attrs.trans_a, tb = a->op->attrs.trans_b;
    const float *A = a->x[0], *Bm = a->x[1];
    float *y = a->y[0];
    for (int64_t b = 0; b < B; b++)
        ss_cpu_gemm(ta, tb, M, N, K, 1, A + b * M * K, ta ? M : K, Bm + b * K * N, tb ? K : N, 0,
                    y + b * M * N, N);
}

static void bmm_bwd(const ss_kargs *a)
{
    int64_t B, M, N, K;
    bmm_dims(a, &B, &M, &N, &K);
    int ta = a->op->attrs.trans_a, tb = a->op->attrs.trans_b;
    const float *A = a->x[0], *Bm = a->x[1], *dy = a->dy[0];
    float *dA = a->dx[0], *dB = a->dx[1];
    int64_t lda = ta ? M : K, ldb = tb ? K : N;
    for (int64_t b = 0; b < B; b++) {
        const float *Ab = A + b * M * K, *Bb = Bm + b * K * N, *dyb = dy + b * M * N;
        if (dA) {
            if (!ta)
                ss_cpu_gemm(0, !tb, M, K, N, 1, dyb, N, Bb, ldb, 0, dA + b * M * K, K);
            else
                ss_cpu_gemm(tb, 1, K, M, N, 1, Bb, ldb, dyb, N, 0, dA + b * M * K, M);
        }
        if (dB) {
            if (!tb)
                ss_cpu_gemm(!ta, 0, K, N, M, 1, Ab, lda, dyb, N, 0, dB + b * K * N, N);
            else
                ss_cpu_gemm(1, ta, N, K, M, 1, dyb, N, Ab, lda, 0, dB + b * K * N, K);
        }
    }
}

const ss_kernel ss_cpu_batch_matmul = {F32, no_state, bmm_fwd, bmm_bwd};

/* ------------------------------------------------------------------ conv2d */

/* Geometry of a conv (or pool) tile: local extents and the offset of the
 * first output row's window in the local input (negative: padding). */
typedef struct geo {
    int64_t N, C, H, W, O, Ho, Wo, kh, kw, sh, sw, offh, offw;
} geo;

static void conv_geo(const ss_kargs *a, geo *g)
{
    const ss_op_attrs *at = &a->op->attrs;
    const ss_region *xr = &a->xr[0], *yr = &a->yr[0];
    g->N = ext(yr, 0);
    g->C = ext(xr, 1);
    g->H = ext(xr, 2);
    g->W = ext(xr, 3);
    g->O = ext(yr, 1);
    g->Ho = ext(yr, 2);
    g->Wo = ext(yr, 3);
    g->kh = at->kernel[0];
    g->kw = at->kernel[1];
    g->sh = at->stride[0] > 0 ? at->stride[0] : 1;
    g->sw = at->stride[1] > 0 ? at->stride[1] : 1;
    g->offh = a->t.out.r[2].lo * g->sh - at->pad[0] - xr->r[2].lo;
    g->offw = a->t.out.r[3].lo * g->sw - at->pad[1] - xr->r[3].lo;
}

/* col[(c*kh + i)*kw + j][oh*Wo + ow] = x[c][oh*sh + offh + i][ow*sw + offw + j] (0 outside) */
static void im2col(const geo *g, const float *x, int64_t cg, float *col)
{
    int64_t P = g->Ho * g->Wo;
    for (int64_t c = 0; c < cg; c++)
        for (int64_t i = 0; i < g->kh; i++)
            for (int64_t j = 0; j < g->kw; j++) {
                float *row = col + ((c * g->kh + i) * g->kw + j) * P;
                for (int64_t oh = 0; oh < g->Ho; oh++) {
                    int64_t h = oh * g->sh + g->offh + i;
                    for (int64_t ow = 0; ow < g->Wo; ow++) {
                        int64_t w = ow * g->sw + g->offw + j;
                        row[oh * g->Wo + ow] = (h >= 0 && h < g->H && w >= 0 && w < g->W)
                                                   ? x[(c * g->H + h) * g->W + w]
                                                   : 0;
                    }
                }
            }
}

static void col2im(const geo *g, const float *col, int64_t cg, float *dx)
{
    int64_t P = g->Ho * g->Wo;
    for (int64_t c = 0; c < cg; c++)
        for (int64_t i = 0; i < g->kh; i++)
            for (int64_t j = 0; j < g->kw; j++) {
                const float *row = col + ((c * g->kh + i) * g->kw + j) * P;
                for (int64_t oh = 0; oh < g->Ho; oh++) {
                    int64_t h = oh * g->sh + g->offh + i;
                    if (h < 0 || h >= g->H)
                        continue;
                    for (int64_t ow = 0; ow < g->Wo; ow++) {
                        int64_t w = ow * g->sw + g->offw + j;
                        if (w >= 0 && w < g->W)
                            dx[(c * g->H + h) * g->W + w] += row[oh * g->Wo + ow];
                    }
                }
            }
}

/* Channel groups of a tile: chunk q covers local output channels [o0, o1)
 * reading local input channels [c0, c0 + cg). Returns the chunk count. */
typedef struct chunk { int64_t o0, o1, c0; } chunk;

static int64_t conv_chunks(const ss_kargs *a, const geo *g, int64_t *cg, chunk *ch, int64_t max)
{
    int64_t G = a->op->attrs.groups > 1 ? a->op->attrs.groups : 1;
    if (G <= 1) {
        *cg = g->C;
        if (ch && max > 0)
            ch[0] = (chunk){0, g->O, 0};
        return 1;
    }
    const ss_tensor *y = ss_graph_tensor(a->g, a->op->outputs[0]);
    const ss_tensor *x = ss_graph_tensor(a->g, a->op->inputs[0]);
    int64_t og = y->shape[1] / G, cgl = x->shape[1] / G;
    int64_t olo = a->t.out.r[1].lo, ohi = a->t.out.r[1].hi, xlo = a->xr[0].r[1].lo;
    *cg = cgl;
    int64_t n = 0;
    for (int64_t gi = olo / og; gi * og < ohi; gi++, n++) {
        if (!ch || n >= max)
            continue;
        int64_t lo = gi * og > olo ? gi * og : olo, hi = (gi + 1) * og < ohi ? (gi + 1) * og : ohi;
        ch[n] = (chunk){lo - olo, hi - olo, gi * cgl - xlo};
    }
    return n;
}

#define MAX_CHUNKS 4096

static ss_status conv_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    geo g;
    conv_geo(a, &g);
    int64_t cg;
    if (conv_chunks(a, &g, &cg, NULL, 0) > MAX_CHUNKS)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "kernels: conv2d '%s': a tile of more than "
                           "%d channel groups", a->op->name, MAX_CHUNKS);
    *saved = 0;
    *work = (size_t)(cg * g.kh * g.kw * g.Ho * g.Wo) * sizeof(float);
    return SS_OK;
}

static void conv_fwd(const ss_kargs *a)
{
    geo g;
    conv_geo(a, &g);
    int64_t cg;
    static _Thread_local chunk ch[MAX_CHUNKS];
    int64_t nch = conv_chunks(a, &g, &cg, ch, MAX_CHUNKS);
    int64_t P = g.Ho * g.Wo, ckk = cg * g.kh * g.kw;
    const float *x = a->x[0], *W = a->x[1];
    float *y = a->y[0], *col = a->work;
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t q = 0; q < nch && q < MAX_CHUNKS; q++) {
            im2col(&g, x + (n * g.C + ch[q].c0) * g.H * g.W, cg, col);
            ss_cpu_gemm(0, 0, ch[q].o1 - ch[q].o0, P, ckk, 1, W + ch[q].o0 * ckk, ckk, col, P, 0,
                        y + (n * g.O + ch[q].o0) * P, P);
        }
    if (a->op->n_w > 1 && first_red(a)) {
        const float *b = a->x[2];
        for (int64_t n = 0; n < g.N; n++)
            for (int64_t o = 0; o < g.O; o++)
                for (int64_t p = 0; p < P; p++)
                    y[(n * g.O + o) * P + p] += b[o];
    }
}

static void conv_bwd(const ss_kargs *a)
{
    geo g;
    conv_geo(a, &g);
    int64_t cg;
    static _Thread_local chunk ch[MAX_CHUNKS];
    int64_t nch = conv_chunks(a, &g, &cg, ch, MAX_CHUNKS);
    int64_t P = g.Ho * g.Wo, ckk = cg * g.kh * g.kw;
    const float *x = a->x[0], *W = a->x[1], *dy = a->dy[0];
    float *dx = a->dx[0], *dW = a->dx[1], *col = a->work;
    if (dx)
        memset(dx, 0, ss_kernel_x_bytes(a, 0));
    if (dW)
        memset(dW, 0, ss_kernel_x_bytes(a, 1));
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t q = 0; q < nch && q < MAX_CHUNKS; q++) {
            int64_t no = ch[q].o1 - ch[q].o0;
            const float *dyn = dy + (n * g.O + ch[q].o0) * P;
            if (dW) {
                im2col(&g, x + (n * g.C + ch[q].c0) * g.H * g.W, cg, col);
                ss_cpu_gemm(0, 1, no, ckk, P, 1, dyn, P, col, P, 1, dW + ch[q].o0 * ckk, ckk);
            }
            if (dx) {
                ss_cpu_gemm(1, 0, ckk, P, no, 1, W + ch[q].o0 * ckk, ckk, dyn, P, 0, col, P);
                col2im(&g, col, cg, dx + (n * g.C + ch[q].c0) * g.H * g.W);
            }
        }
    if (a->op->n_w > 1 && a->dx[2]) {
        float *db = a->dx[2];
        memset(db, 0, (size_t)g.O * sizeof *db);
        if (first_red(a))
            for (int64_t n = 0; n < g.N; n++)
                for (int64_t o = 0; o < g.O; o++)
                    for (int64_t p = 0; p < P; p++)
                        db[o] += dy[(n * g.O + o) * P + p];
    }
}

const ss_kernel ss_cpu_conv2d = {F32, conv_sizes, conv_fwd, conv_bwd};

/* --------------------------------------------------------------- embedding */

static void emb_dims(const ss_kargs *a, int64_t *rows, int64_t *cols)
{
    *cols = ext(&a->yr[0], a->yr[0].ndim - 1);
    *rows = ss_region_volume(&a->xr[0]);
}

static void emb_fwd(const ss_kargs *a)
{
    int64_t rows, cols, lo = a->t.red.lo, hi = a->t.red.hi;
    emb_dims(a, &rows, &cols);
    const float *W = a->x[1];
    float *y = a->y[0];
    for (int64_t i = 0; i < rows; i++) {
        int64_t id = ss_cpu_index(a->x[0], a->xt[0], i);
        if (id >= lo && id < hi)
            memcpy(y + i * cols, W + (id - lo) * cols, (size_t)cols * sizeof *y);
        else
            memset(y + i * cols, 0, (size_t)cols * sizeof *y);
    }
}

static void emb_bwd(const ss_kargs *a)
{
    int64_t rows, cols, lo = a->t.red.lo, hi = a->t.red.hi;
    emb_dims(a, &rows, &cols);
    float *dW = a->dx[1];
    if (!dW)
        return;
    memset(dW, 0, ss_kernel_x_bytes(a, 1));
    const float *dy = a->dy[0];
    for (int64_t i = 0; i < rows; i++) {
        int64_t id = ss_cpu_index(a->x[0], a->xt[0], i);
        if (id >= lo && id < hi)
            ss_cpu_axpy(cols, 1, dy + i * cols, dW + (id - lo) * cols);
    }
}

const ss_kernel ss_cpu_embedding = {F32, no_state, emb_fwd, emb_bwd};

/* -------------------------------------------------------------------- lstm */

typedef struct lgeo {
    int64_t N, S, in, H, XH;
    int cell, seq_out;
} lgeo;

static void lstm_geo(const ss_kargs *a, lgeo *l)
{
    const ss_op_attrs *at = &a->op->attrs;
    const ss_region *xr = &a->xr[0];
    l->cell = at->lstm_mode == SS_LSTM_CELL;
    l->N = ext(xr, 0);
    l->S = l->cell ? 1 : ext(xr, 1);
    l->in = ext(xr, xr->ndim - 1);
    l->H = at->hidden;
    l->XH = l->in + l->H;
    l->seq_out = !l->cell && at->return_sequences;
}

/* saved: per step xh [N, XH], gates [N, 4H] (activated), c [N, H] */
static ss_status lstm_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    lgeo l;
    lstm_geo(a, &l);
    if (ext(&a->yr[0], a->yr[0].ndim - 1) != l.H)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "kernels: lstm '%s': a tile must hold the "
                           "whole hidden state (%lld), this one holds %lld", a->op->name,
                           (long long)l.H, (long long)ext(&a->yr[0], a->yr[0].ndim - 1));
    *saved = (size_t)(l.S * l.N * (l.XH + 5 * l.H)) * sizeof(float);
    *work = (size_t)(l.N * (4 * l.H + l.XH + 4 * l.H)) * sizeof(float);
    return SS_OK;
}

static float sigm(float v) { return 1.0f / (1.0f + expf(-v)); }

static void lstm_fwd(const ss_kargs *a)
{
    lgeo l;
    lstm_geo(a, &l);
    int64_t N = l.N, H = l.H, XH = l.XH, step = N * (XH + 5 * H);
    const float *x = a->x[0], *W = a->x[l.cell ? 3 : 1], *b = a->x[l.cell ? 4 : 2];
    float *sv = a->saved, *y = a->y[0];
    for (int64_t t = 0; t < l.S; t++) {
        float *xh = sv + t * step, *G = xh + N * XH, *c = G + N * 4 * H;
        const float *cprev = t ? sv + (t - 1) * step + N * (XH + 4 * H) : NULL;
        for (int64_t n = 0; n < N; n++) {
            const float *xt = l.cell ? x + n * l.in : x + (n * l.S + t) * l.in;
            memcpy(xh + n * XH, xt, (size_t)l.in * sizeof *xh);
            float *hp = xh + n * XH + l.in;
            if (t == 0) {
                if (l.cell)
                    memcpy(hp, (const float *)a->x[1] + n * H, (size_t)H * sizeof *hp);
                else
                    memset(hp, 0, (size_t)H * sizeof *hp);
            } else {
                /* h_{t-1} = o * tanh(c_{t-1}) of the previous step */
                const float *Gp = sv + (t - 1) * step + N * XH + n * 4 * H;
                const float *cp = cprev + n * H;
                for (int64_t j = 0; j < H; j++)
                    hp[j] = Gp[3 * H + j] * tanhf(cp[j]);
            }
        }
        ss_cpu_gemm(0, 0, N, 4 * H, XH, 1, xh, XH, W, 4 * H, 0, G, 4 * H);
        for (int64_t n = 0; n < N; n++) {
            float *g = G + n * 4 * H;
            for (int64_t j = 0; j < 4 * H; j++)
                g[j] += b[j];
            for (int64_t j = 0; j < H; j++) {
                float i_ = sigm(g[j]), f = sigm(g[H + j]), gg = tanhf(g[2 * H + j]),
                      o = sigm(g[3 * H + j]);
                float cp = t ? cprev[n * H + j]
                             : (l.cell ? ((const float *)a->x[2])[n * H + j] : 0.0f);
                float cn = f * cp + i_ * gg;
                g[j] = i_;
                g[H + j] = f;
                g[2 * H + j] = gg;
                g[3 * H + j] = o;
                c[n * H + j] = cn;
                float h = o * tanhf(cn);
                if (l.cell) {
                    ((float *)a->y[0])[n * H + j] = h;
                    ((float *)a->y[1])[n * H + j] = cn;
                } else if (l.seq_out) {
                    y[(n * l.S + t) * H + j] = h;
                } else if (t == l.S - 1) {
                    y[n * H + j] = h;
                }
            }
        }
    }
}

static void lstm_bwd(const ss_kargs *a)
{
    lgeo l;
    lstm_geo(a, &l);
    int64_t N = l.N, H = l.H, XH = l.XH, step = N * (XH + 5 * H);
    int wi = l.cell ? 3 : 1;
    const float *W = a->x[wi], *sv = a->saved, *dy = a->dy[0];
    float *dW = a->dx[wi], *db = a->dx[wi + 1], *dx = a->dx[0];
    float *dG = a->work, *dxh = dG + N * 4 * H, *dh = dxh + N * XH, *dc = dh + N * H;
    if (dW)
        memset(dW, 0, ss_kernel_x_bytes(a, wi));
    if (db)
        memset(db, 0, ss_kernel_x_bytes(a, wi + 1));
    if (l.cell) {
        memcpy(dh, dy, (size_t)(N * H) * sizeof *dh);
        memcpy(dc, a->dy[1], (size_t)(N * H) * sizeof *dc);
    } else {
        memset(dh, 0, (size_t)(N * H) * sizeof *dh);
        memset(dc, 0, (size_t)(N * H) * sizeof *dc);
    }
    for (int64_t t = l.S - 1; t >= 0; t--) {
        const float *xh = sv + t * step, *G = xh + N * XH, *c = G + N * 4 * H;
        const float *cprev = t ? sv + (t - 1) * step + N * (XH + 4 * H) : NULL;
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < H; j++) {
                float h_g = l.seq_out ? dy[(n * l.S + t) * H + j]
                                      : (!l.cell && t == l.S - 1 ? dy[n * H + j] : 0.0f);
                float dhv = dh[n * H + j] + h_g;
                const float *g = G + n * 4 * H;
                float i_ = g[j], f = g[H + j], gg = g[2 * H + j], o = g[3 * H + j];
                float tc = tanhf(c[n * H + j]);
                float cp = t ? cprev[n * H + j]
                             : (l.cell ? ((const float *)a->x[2])[n * H + j] : 0.0f);
                float dcv = dc[n * H + j] + dhv * o * (1 - tc * tc);
                float *d = dG + n * 4 * H;
                d[j] = dcv * gg * i_ * (1 - i_);
                d[H + j] = dcv * cp * f * (1 - f);
                d[2 * H + j] = dcv * i_ * (1 - gg * gg);
                d[3 * H + j] = dhv * tc * o * (1 - o);
                dc[n * H + j] = dcv * f;
            }
        if (dW)
            ss_cpu_gemm(1, 0, XH, 4 * H, N, 1, xh, XH, dG, 4 * H, 1, dW, 4 * H);
        if (db)
            for (int64_t n = 0; n < N; n++)
                for (int64_t j = 0; j < 4 * H; j++)
                    db[j] += dG[n * 4 * H + j];
        ss_cpu_gemm(0, 1, N, XH, 4 * H, 1, dG, 4 * H, W, 4 * H, 0, dxh, XH);
        for (int64_t n = 0; n < N; n++) {
            if (dx) {
                float *dxt = l.cell ? dx + n * l.in : dx + (n * l.S + t) * l.in;
                memcpy(dxt, dxh + n * XH, (size_t)l.in * sizeof *dxt);
            }
            memcpy(dh + n * H, dxh + n * XH + l.in, (size_t)H * sizeof *dh);
        }
    }
    if (l.cell) {
        if (a->dx[1])
            memcpy(a->dx[1], dh, (size_t)(N * H) * sizeof *dh);
        if (a->dx[2])
            memcpy(a->dx[2], dc, (size_t)(N * H) * sizeof *dc);
    }
}

const ss_kernel ss_cpu_lstm = {F32, lstm_sizes, lstm_fwd, lstm_bwd};

/* --------------------------------------------------------------- attention */

typedef struct ageo {
    int64_t N, Sq, Sk, E, Et, hl, dh, Er, qlo, klo;
    int bias, causal;
    float scale;
} ageo;

static void attn_geo(const ss_kargs *a, ageo *g)
{
    const ss_op_attrs *at = &a->op->attrs;
    const ss_tensor *o = ss_graph_tensor(a->g, a->op->outputs[0]);
    g->N = ext(&a->yr[0], 0);
    g->Sq = ext(&a->yr[0], 1);
    g->Et = ext(&a->yr[0], 2);
    g->Sk = ext(&a->xr[1], 1);
    g->E = ext(&a->xr[0], 2);
    g->hl = a->t.red.hi - a->t.red.lo;
    g->dh = o->shape[2] / at->heads;
    g->Er = g->hl * g->dh;
    g->qlo = a->t.out.r[1].lo;
    g->klo = a->xr[1].r[1].lo;
    g->bias = a->op->n_w > 4;
    g->causal = at->causal;
    g->scale = 1.0f / sqrtf((float)g->dh);
}

/* saved: Q [N Sq Er], K, V [N Sk Er], P [N hl Sq Sk], C [N Sq Er] */
static ss_status attn_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    (void)d;
    ageo g;
    attn_geo(a, &g);
    *saved = (size_t)(2 * g.N * g.Sq * g.Er + 2 * g.N * g.Sk * g.Er + g.N * g.hl * g.Sq * g.Sk) *
             sizeof(float);
    *work = (size_t)(2 * g.N * g.Sq * g.Er + 2 * g.N * g.Sk * g.Er + g.Sq * g.Sk) * sizeof(float);
    return SS_OK;
}

static void attn_fwd(const ss_kargs *a)
{
    ageo g;
    attn_geo(a, &g);
    float *Q = a->saved, *K = Q + g.N * g.Sq * g.Er, *V = K + g.N * g.Sk * g.Er;
    float *P = V + g.N * g.Sk * g.Er, *C = P + g.N * g.hl * g.Sq * g.Sk;
    ss_cpu_gemm(0, 0, g.N * g.Sq, g.Er, g.E, 1, a->x[0], g.E, a->x[3], g.Er, 0, Q, g.Er);
    ss_cpu_gemm(0, 0, g.N * g.Sk, g.Er, g.E, 1, a->x[1], g.E, a->x[4], g.Er, 0, K, g.Er);
    ss_cpu_gemm(0, 0, g.N * g.Sk, g.Er, g.E, 1, a->x[2], g.E, a->x[5], g.Er, 0, V, g.Er);
    if (g.bias) {
        add_bias(Q, a->x[7], g.N * g.Sq, g.Er);
        add_bias(K, a->x[8], g.N * g.Sk, g.Er);
        add_bias(V, a->x[9], g.N * g.Sk, g.Er);
    }
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t h = 0; h < g.hl; h++) {
            float *Pn = P + (n * g.hl + h) * g.Sq * g.Sk;
            ss_cpu_gemm(0, 1, g.Sq, g.Sk, g.dh, g.scale, Q + n * g.Sq * g.Er + h * g.dh, g.Er,
                        K + n * g.Sk * g.Er + h * g.dh, g.Er, 0, Pn, g.Sk);
            for (int64_t i = 0; i < g.Sq; i++) {
                float *r = Pn + i * g.Sk, mx = -INFINITY, s = 0;
                int64_t lim = g.causal ? g.qlo + i - g.klo + 1 : g.Sk;
                if (lim > g.Sk)
                    lim = g.Sk;
                for (int64_t j = 0; j < lim; j++)
                    mx = r[j] > mx ? r[j] : mx;
                for (int64_t j = 0; j < g.Sk; j++) {
                    r[j] = j < lim ? expf(r[j] - mx) : 0.0f;
                    s += r[j];
                }
                for (int64_t j = 0; j < g.Sk; j++)
                    r[j] = s > 0 ? r[j] / s : 0.0f;
            }
            ss_cpu_gemm(0, 0, g.Sq, g.dh, g.Sk, 1, Pn, g.Sk, V + n * g.Sk * g.Er + h * g.dh,
                        g.Er, 0, C + n * g.Sq * g.Er + h * g.dh, g.Er);
        }
    ss_cpu_gemm(0, 0, g.N * g.Sq, g.Et, g.Er, 1, C, g.Er, a->x[6], g.Et, 0, a->y[0], g.Et);
    if (g.bias && first_red(a))
        add_bias(a->y[0], a->x[10], g.N * g.Sq, g.Et);
}

static void attn_bwd(const ss_kargs *a)
{
    ageo g;
    attn_geo(a, &g);
    const float *Q = a->saved, *K = Q + g.N * g.Sq * g.Er, *V = K + g.N * g.Sk * g.Er;
    const float *P = V + g.N * g.Sk * g.Er, *C = P + g.N * g.hl * g.Sq * g.Sk;
    float *dC = a->work, *dQ = dC + g.N * g.Sq * g.Er, *dK = dQ + g.N * g.Sq * g.Er;
    float *dV = dK + g.N * g.Sk * g.Er, *dP = dV + g.N * g.Sk * g.Er;
    const float *dy = a->dy[0];
    if (a->dx[6])
        ss_cpu_gemm(1, 0, g.Er, g.Et, g.N * g.Sq, 1, C, g.Er, dy, g.Et, 0, a->dx[6], g.Et);
    if (g.bias && a->dx[10])
        col_sum(a->dx[10], dy, g.N * g.Sq, g.Et, first_red(a));
    ss_cpu_gemm(0, 1, g.N * g.Sq, g.Er, g.Et, 1, dy, g.Et, a->x[6], g.Et, 0, dC, g.Er);
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t h = 0; h < g.hl; h++) {
            const float *Pn = P + (n * g.hl + h) * g.Sq * g.Sk;
            const float *dCn = dC + n * g.Sq * g.Er + h * g.dh;
            ss_cpu_gemm(0, 1, g.Sq, g.Sk, g.dh, 1, dCn, g.Er, V + n * g.Sk * g.Er + h * g.dh,
                        g.Er, 0, dP, g.Sk);
            ss_cpu_gemm(1, 0, g.Sk, g.dh, g.Sq, 1, Pn, g.Sk, dCn, g.Er, 0,
                        dV + n * g.Sk * g.Er + h * g.dh, g.Er);
            for (int64_t i = 0; i < g.Sq; i++) {
                float *r = dP + i * g.Sk, s = 0;
                const float *p = Pn + i * g.Sk;
                for (int64_t j = 0; j < g.Sk; j++)
                    s += r[j] * p[j];
                for (int64_t j = 0; j < g.Sk; j++)
                    r[j] = p[j] * (r[j] - s);
            }
            ss_cpu_gemm(0, 0, g.Sq, g.dh, g.Sk, g.scale, dP, g.Sk, K + n * g.Sk * g.Er + h * g.dh,
                        g.Er, 0, dQ + n * g.Sq * g.Er + h * g.dh, g.Er);
            ss_cpu_gemm(1, 0, g.Sk, g.dh, g.Sq, g.scale, dP, g.Sk, Q + n * g.Sq * g.Er + h * g.dh,
                        g.Er, 0, dK + n * g.Sk * g.Er + h * g.dh, g.Er);
        }
    const float *dproj[3] = {dQ, dK, dV};
    int64_t rows[3] = {g.N * g.Sq, g.N * g.Sk, g.N * g.Sk};
    for (int i = 0; i < 3; i++) {
        if (a->dx[3 + i])
            ss_cpu_gemm(1, 0, g.E, g.Er, rows[i], 1, a->x[i], g.E, dproj[i], g.Er, 0,
                        a->dx[3 + i], g.Er);
        if (g.bias && a->dx[7 + i])
            col_sum(a->dx[7 + i], dproj[i], rows[i], g.Er, 1);
        if (a->dx[i])
            ss_cpu_gemm(0, 1, rows[i], g.E, g.Er, 1, dproj[i], g.Er, a->x[3 + i], g.Er, 0,
                        a->dx[i], g.E);
    }
}

const ss_kernel ss_cpu_attention = {F32, attn_sizes, attn_fwd, attn_bwd};
