/*
 * cpu_elem.c — the CPU kernels that are not GEMMs, in plain C (fp32):
 * pooling, batch and layer normalisation, unary and binary elementwise ops,
 * softmax, dropout, softmax cross-entropy, and the data movers (concat,
 * split, reshape, transpose), forward and backward; plus the CPU table.
 *
 * Tiles: normalisations and softmax need their whole reduced dim in the tile
 * (the region function guarantees it: batchnorm reduces over the tile's
 * samples, as data parallelism does); pooling reads its window's halo;
 * softmax cross-entropy over a vocabulary shard computes the shard's
 * log-sum-exp (the combination across shards is the runtime's collective).
 */
#include "kernels/cpu_impl.h"

#include <math.h>
#include <string.h>

#define F32 (1u << SS_F32)
#define EPS 1e-5f

static ss_status no_state(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    (void)a;
    (void)d;
    *saved = *work = 0;
    return SS_OK;
}

static int64_t yvol(const ss_kargs *a) { return ss_region_volume(&a->yr[0]); }

/* ------------------------------------------------------------------- input */

/* An input has no operands: its data arrives. Forward and backward do nothing. */
static void nop(const ss_kargs *a) { (void)a; }

const ss_kernel ss_cpu_input = {
    (1u << SS_F32) | (1u << SS_F16) | (1u << SS_BF16) | (1u << SS_I32) | (1u << SS_I64),
    no_state, nop, nop};

/* ------------------------------------------------------------------ pool2d */

typedef struct pgeo {
    int64_t NC, H, W, Ho, Wo, kh, kw, sh, sw, offh, offw;
} pgeo;

static void pool_geo(const ss_kargs *a, pgeo *g)
{
    const ss_op_attrs *at = &a->op->attrs;
    const ss_region *xr = &a->xr[0], *yr = &a->yr[0];
    g->NC = ext(yr, 0) * ext(yr, 1);
    g->H = ext(xr, 2);
    g->W = ext(xr, 3);
    g->Ho = ext(yr, 2);
    g->Wo = ext(yr, 3);
    g->kh = at->kernel[0];
    g->kw = at->kernel[1];
    g->sh = at->stride[0] > 0 ? at->stride[0] : 1;
    g->sw = at->stride[1] > 0 ? at->stride[1] : 1;
    g->offh = a->t.out.r[2].lo * g->sh - at->pad[0] - xr->r[2].lo;
    g->offw = a->t.out.r[3].lo * g->sw - at->pad[1] - xr->r[3].lo;
}

/* saved (max): the flat local input index of each output's maximum */
static ss_status pool_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    (void)d;
    *saved = a->op->attrs.pool == SS_POOL_MAX ? (size_t)yvol(a) * sizeof(int64_t) : 0;
    *work = 0;
    return SS_OK;
}

/* Max pooling ignores padding; average pooling divides by the window area
 * (padding counts as zeros, PyTorch's count_include_pad). */
static void pool_fwd(const ss_kargs *a)
{
    pgeo g;
    pool_geo(a, &g);
    int mx = a->op->attrs.pool == SS_POOL_MAX;
    const float *x = a->x[0];
    float *y = a->y[0];
    int64_t *arg = a->saved;
    float area = (float)(g.kh * g.kw);
    for (int64_t c = 0; c < g.NC; c++)
        for (int64_t oh = 0; oh < g.Ho; oh++)
            for (int64_t ow = 0; ow < g.Wo; ow++) {
                float best = -INFINITY, sum = 0;
                int64_t bi = -1;
                for (int64_t i = 0; i < g.kh; i++) {
                    int64_t h = oh * g.sh + g.offh + i;
                    if (h < 0 || h >= g.H)
                        continue;
                    for (int64_t j = 0; j < g.kw; j++) {
                        int64_t w = ow * g.sw + g.offw + j;
                        if (w < 0 || w >= g.W)
                            continue;
                        int64_t idx = (c * g.H + h) * g.W + w;
                        sum += x[idx];
                        if (x[idx] > best) {
                            best = x[idx];
                            bi = idx;
                        }
                    }
                }
                int64_t o = (c * g.Ho + oh) * g.Wo + ow;
                if (mx) {
                    y[o] = bi >= 0 ? best : 0;
                    arg[o] = bi;
                } else {
                    y[o] = sum / area;
                }
            }
}

static void pool_bwd(const ss_kargs *a)
{
    pgeo g;
    pool_geo(a, &g);
    float *dx = a->dx[0];
    if (!dx)
        return;
    memset(dx, 0, ss_kernel_x_bytes(a, 0));
    const float *dy = a->dy[0];
    const int64_t *arg = a->saved;
    float area = (float)(g.kh * g.kw);
    int64_t n = yvol(a);
    if (a->op->attrs.pool == SS_POOL_MAX) {
        for (int64_t o = 0; o < n; o++)
            if (arg[o] >= 0)
                dx[arg[o]] += dy[o];
        return;
    }
    for (int64_t c = 0; c < g.NC; c++)
        for (int64_t oh = 0; oh < g.Ho; oh++)
            for (int64_t ow = 0; ow < g.Wo; ow++) {
                float v = dy[(c * g.Ho + oh) * g.Wo + ow] / area;
                for (int64_t i = 0; i < g.kh; i++) {
                    int64_t h = oh * g.sh + g.offh + i;
                    if (h < 0 || h >= g.H)
                        continue;
                    for (int64_t j = 0; j < g.kw; j++) {
                        int64_t w = ow * g.sw + g.offw + j;
                        if (w >= 0 && w < g.W)
                            dx[(c * g.H + h) * g.W + w] += v;
                    }
                }
            }
}

const ss_kernel ss_cpu_pool2d = {F32, pool_sizes, pool_fwd, pool_bwd};

/* ------------------------------------------------------------- normalisation */

/* A normalisation as groups x reduced elements: element (grp, r) at
 * x[(outer * G + grp) * inner + in] with r = (outer, in). Layernorm: G rows,
 * inner h, outer 1 (stride h); batchnorm: G channels, outer N, inner HW. */
typedef struct ngeo {
    int64_t G, outer, inner; /* groups; reduced = outer * inner */
    int layer;
} ngeo;

static void norm_geo(const ss_kargs *a, ngeo *g)
{
    const ss_region *yr = &a->yr[0];
    g->layer = a->op->type == SS_OP_LAYERNORM;
    if (g->layer) {
        g->inner = ext(yr, yr->ndim - 1);
        g->G = g->inner ? yvol(a) / g->inner : 0;
        g->outer = 1;
    } else {
        g->outer = ext(yr, 0);
        g->G = ext(yr, 1);
        g->inner = ext(yr, 2) * ext(yr, 3);
    }
}

static int64_t nidx(const ngeo *g, int64_t grp, int64_t o, int64_t i)
{
    return g->layer ? grp * g->inner + i : (o * g->G + grp) * g->inner + i;
}

/* saved: mean and rstd per group */
static ss_status norm_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    (void)d;
    ngeo g;
    norm_geo(a, &g);
    *saved = (size_t)(2 * g.G) * sizeof(float);
    *work = 0;
    return SS_OK;
}

static void norm_fwd(const ss_kargs *a)
{
    ngeo g;
    norm_geo(a, &g);
    const float *x = a->x[0], *gam = a->x[1], *bet = a->x[2];
    float *y = a->y[0], *mean = a->saved, *rstd = mean + g.G;
    double m = (double)(g.outer * g.inner);
    for (int64_t grp = 0; grp < g.G; grp++) {
        double s = 0, s2 = 0;
        for (int64_t o = 0; o < g.outer; o++)
            for (int64_t i = 0; i < g.inner; i++)
                s += x[nidx(&g, grp, o, i)];
        double mu = s / m;
        for (int64_t o = 0; o < g.outer; o++)
            for (int64_t i = 0; i < g.inner; i++) {
                double v = x[nidx(&g, grp, o, i)] - mu;
                s2 += v * v;
            }
        float r = (float)(1.0 / sqrt(s2 / m + EPS));
        mean[grp] = (float)mu;
        rstd[grp] = r;
        for (int64_t o = 0; o < g.outer; o++)
            for (int64_t i = 0; i < g.inner; i++) {
                int64_t k = nidx(&g, grp, o, i);
                float xh = (x[k] - (float)mu) * r;
                y[k] = g.layer ? xh * gam[i] + bet[i] : xh * gam[grp] + bet[grp];
            }
    }
}

static void norm_bwd(const ss_kargs *a)
{
    ngeo g;
    norm_geo(a, &g);
    const float *x = a->x[0], *gam = a->x[1], *dy = a->dy[0];
    const float *mean = a->saved, *rstd = mean + g.G;
    float *dx = a->dx[0], *dg = a->dx[1], *dbt = a->dx[2];
    double m = (double)(g.outer * g.inner);
    if (dg)
        memset(dg, 0, ss_kernel_x_bytes(a, 1));
    if (dbt)
        memset(dbt, 0, ss_kernel_x_bytes(a, 2));
    for (int64_t grp = 0; grp < g.G; grp++) {
        /* with dxh = dy * gamma: dx = rstd * (dxh - mean(dxh) - xh * mean(dxh * xh)) */
        double s1 = 0, s2 = 0;
        for (int64_t o = 0; o < g.outer; o++)
            for (int64_t i = 0; i < g.inner; i++) {
                int64_t k = nidx(&g, grp, o, i);
                float xh = (x[k] - mean[grp]) * rstd[grp];
                float gm = g.layer ? gam[i] : gam[grp];
                s1 += dy[k] * gm;
                s2 += dy[k] * gm * xh;
                if (g.layer) {
                    if (dg)
                        dg[i] += dy[k] * xh;
                    if (dbt)
                        dbt[i] += dy[k];
                } else {
                    if (dg)
                        dg[grp] += dy[k] * xh;
                    if (dbt)
                        dbt[grp] += dy[k];
                }
            }
        if (!dx)
            continue;
        float m1 = (float)(s1 / m), m2 = (float)(s2 / m);
        for (int64_t o = 0; o < g.outer; o++)
            for (int64_t i = 0; i < g.inner; i++) {
                int64_t k = nidx(&g, grp, o, i);
                float xh = (x[k] - mean[grp]) * rstd[grp];
                float gm = g.layer ? gam[i] : gam[grp];
                dx[k] = rstd[grp] * (dy[k] * gm - m1 - xh * m2);
            }
    }
}

const ss_kernel ss_cpu_batchnorm = {F32, norm_sizes, norm_fwd, norm_bwd};
const ss_kernel ss_cpu_layernorm = {F32, norm_sizes, norm_fwd, norm_bwd};

/* ------------------------------------------------------------------- unary */

#define SQRT1_2 0.70710678118654752f
#define INV_SQRT_2PI 0.39894228040143268f

/* The relu and dropout loops with restrict pointers and no branch, so that
 * GCC vectorises them (-O3 for this file, CMakeLists.txt): a branch per
 * element on random signs would mispredict every other time. */
static void relu_f(float *restrict y, const float *restrict x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static void relu_b(float *restrict dx, const float *restrict x, const float *restrict dy,
                   int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float g = dy[i], v = x[i]; /* both loads unconditional: GCC if-converts */
        dx[i] = v > 0.0f ? g : 0.0f;
    }
}

static void masked_scale(float *restrict y, const float *restrict x,
                         const unsigned char *restrict mask, float scale, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i] * scale;
        y[i] = mask[i] ? v : 0.0f;
    }
}

static void unary_fwd(const ss_kargs *a)
{
    const float *x = a->x[0];
    float *y = a->y[0];
    int64_t n = yvol(a);
    switch (a->op->attrs.unary) {
    case SS_UNARY_RELU:
        relu_f(y, x, n);
        break;
    case SS_UNARY_GELU: /* exact: x * Phi(x) */
        for (int64_t i = 0; i < n; i++)
            y[i] = 0.5f * x[i] * (1 + erff(x[i] * SQRT1_2));
        break;
    case SS_UNARY_TANH:
        for (int64_t i = 0; i < n; i++)
            y[i] = tanhf(x[i]);
        break;
    case SS_UNARY_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            y[i] = 1 / (1 + expf(-x[i]));
        break;
    case SS_UNARY_SILU:
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] / (1 + expf(-x[i]));
        break;
    case SS_UNARY_RELU2:
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] > 0.0f ? x[i] * x[i] : 0.0f;
        break;
    }
}

static void unary_bwd(const ss_kargs *a)
{
    const float *x = a->x[0], *y = a->y[0], *dy = a->dy[0];
    float *dx = a->dx[0];
    int64_t n = yvol(a);
    if (!dx)
        return;
    switch (a->op->attrs.unary) {
    case SS_UNARY_RELU:
        relu_b(dx, x, dy, n);
        break;
    case SS_UNARY_GELU:
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i] * (0.5f * (1 + erff(x[i] * SQRT1_2)) +
                             x[i] * INV_SQRT_2PI * expf(-0.5f * x[i] * x[i]));
        break;
    case SS_UNARY_TANH:
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i] * (1 - y[i] * y[i]);
        break;
    case SS_UNARY_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            dx[i] = dy[i] * y[i] * (1 - y[i]);
        break;
    case SS_UNARY_SILU:
        for (int64_t i = 0; i < n; i++) {
            float s = 1 / (1 + expf(-x[i]));
            dx[i] = dy[i] * s * (1 + x[i] * (1 - s));
        }
        break;
    case SS_UNARY_RELU2:
        for (int64_t i = 0; i < n; i++)
            dx[i] = x[i] > 0.0f ? 2 * x[i] * dy[i] : 0.0f;
        break;
    }
}

const ss_kernel ss_cpu_unary = {F32, no_state, unary_fwd, unary_bwd};

/* ------------------------------------------------------------------ binary */

static void binary_fwd(const ss_kargs *a)
{
    const float *x0 = a->x[0], *x1 = a->x[1];
    float *y = a->y[0];
    int64_t n = yvol(a);
    if (a->op->attrs.binary == SS_BINARY_ADD)
        for (int64_t i = 0; i < n; i++)
            y[i] = x0[i] + x1[i];
    else
        for (int64_t i = 0; i < n; i++)
            y[i] = x0[i] * x1[i];
}

static void binary_bwd(const ss_kargs *a)
{
    const float *x0 = a->x[0], *x1 = a->x[1], *dy = a->dy[0];
    float *d0 = a->dx[0], *d1 = a->dx[1];
    int64_t n = yvol(a);
    int add = a->op->attrs.binary == SS_BINARY_ADD;
    for (int64_t i = 0; i < n; i++) {
        if (d0)
            d0[i] = add ? dy[i] : dy[i] * x1[i];
        if (d1)
            d1[i] = add ? dy[i] : dy[i] * x0[i];
    }
}

const ss_kernel ss_cpu_binary = {F32, no_state, binary_fwd, binary_bwd};

/* ----------------------------------------------------------------- softmax */

/* The tile as [outer, L, inner] around the softmax axis. */
static void sm_geo(const ss_kargs *a, int64_t *outer, int64_t *L, int64_t *inner)
{
    const ss_region *yr = &a->yr[0];
    int n = yr->ndim, ax = a->op->attrs.axis < 0 ? a->op->attrs.axis + n : a->op->attrs.axis;
    *outer = *inner = 1;
    for (int i = 0; i < ax; i++)
        *outer *= ext(yr, i);
    for (int i = ax + 1; i < n; i++)
        *inner *= ext(yr, i);
    *L = ext(yr, ax);
}

static void softmax_fwd(const ss_kargs *a)
{
    int64_t O, L, I;
    sm_geo(a, &O, &L, &I);
    const float *x = a->x[0];
    float *y = a->y[0];
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++) {
            const float *xr = x + o * L * I + i;
            float *yr = y + o * L * I + i, mx = -INFINITY, s = 0;
            for (int64_t l = 0; l < L; l++)
                mx = xr[l * I] > mx ? xr[l * I] : mx;
            for (int64_t l = 0; l < L; l++)
                s += (yr[l * I] = expf(xr[l * I] - mx));
            for (int64_t l = 0; l < L; l++)
                yr[l * I] /= s;
        }
}

static void softmax_bwd(const ss_kargs *a)
{
    int64_t O, L, I;
    sm_geo(a, &O, &L, &I);
    const float *y = a->y[0], *dy = a->dy[0];
    float *dx = a->dx[0];
    if (!dx)
        return;
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++) {
            int64_t b = o * L * I + i;
            float s = 0;
            for (int64_t l = 0; l < L; l++)
                s += dy[b + l * I] * y[b + l * I];
            for (int64_t l = 0; l < L; l++)
                dx[b + l * I] = y[b + l * I] * (dy[b + l * I] - s);
        }
}

const ss_kernel ss_cpu_softmax = {F32, no_state, softmax_fwd, softmax_bwd};

/* ----------------------------------------------------------------- dropout */

/* saved: one byte of mask per element (1 = kept) */
static ss_status dropout_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    (void)d;
    *saved = (size_t)yvol(a);
    *work = 0;
    return SS_OK;
}

static void dropout_fwd(const ss_kargs *a)
{
    const float *x = a->x[0];
    float *y = a->y[0];
    unsigned char *mask = a->saved;
    double p = a->op->attrs.rate;
    float scale = p < 1 ? (float)(1 / (1 - p)) : 0;
    uint32_t thr = (uint32_t)(p * 4294967295.0);
    uint64_t s = a->seed * 0x9e3779b97f4a7c15ULL + 1;
    int64_t n = yvol(a);
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13; /* xorshift64 */
        s ^= s >> 7;
        s ^= s << 17;
        mask[i] = (uint32_t)(s >> 32) >= thr;
    }
    masked_scale(y, x, mask, scale, n);
}

static void dropout_bwd(const ss_kargs *a)
{
    const float *dy = a->dy[0];
    const unsigned char *mask = a->saved;
    float *dx = a->dx[0];
    double p = a->op->attrs.rate;
    float scale = p < 1 ? (float)(1 / (1 - p)) : 0;
    int64_t n = yvol(a);
    if (dx)
        masked_scale(dx, dy, mask, scale, n);
}

const ss_kernel ss_cpu_dropout = {F32, dropout_sizes, dropout_fwd, dropout_bwd};

/* -------------------------------------------------------- softmax cross-entropy */

/* saved: the log-sum-exp of each row */
static ss_status ce_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    (void)d;
    *saved = (size_t)yvol(a) * sizeof(float);
    *work = 0;
    return SS_OK;
}

static void ce_fwd(const ss_kargs *a)
{
    int64_t rows = yvol(a), V = a->t.red.hi - a->t.red.lo, lo = a->t.red.lo;
    const float *x = a->x[0];
    float *loss = a->y[0], *lse = a->saved;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * V;
        float mx = -INFINITY;
        double s = 0;
        for (int64_t v = 0; v < V; v++)
            mx = xr[v] > mx ? xr[v] : mx;
        for (int64_t v = 0; v < V; v++)
            s += expf(xr[v] - mx);
        lse[r] = mx + (float)log(s);
        int64_t lab = ss_cpu_index(a->x[1], a->xt[1], r) - lo;
        loss[r] = lse[r] - (lab >= 0 && lab < V ? xr[lab] : 0);
    }
}

static void ce_bwd(const ss_kargs *a)
{
    int64_t rows = yvol(a), V = a->t.red.hi - a->t.red.lo, lo = a->t.red.lo;
    const float *x = a->x[0], *lse = a->saved, *dl = a->dy[0];
    float *dx = a->dx[0];
    if (!dx)
        return;
    for (int64_t r = 0; r < rows; r++) {
        int64_t lab = ss_cpu_index(a->x[1], a->xt[1], r) - lo;
        for (int64_t v = 0; v < V; v++)
            dx[r * V + v] = dl[r] * (expf(x[r * V + v] - lse[r]) - (v == lab ? 1.0f : 0.0f));
    }
}

const ss_kernel ss_cpu_softmax_ce = {F32, ce_sizes, ce_fwd, ce_bwd};

/* ----------------------------------------------------------- data movement */

/* Copy the box of extents ext_[] (ndim dims) from src (extents se[], box
 * origin so[]) to dst (extents de[], origin do_[]); add = 1 accumulates. */
static void copy_box(float *dst, const int64_t *de, const int64_t *do_, const float *src,
                     const int64_t *se, const int64_t *so, const int64_t *ex, int nd, int add)
{
    for (int i = 0; i < nd; i++)
        if (ex[i] <= 0)
            return;
    int64_t idx[SS_MAX_DIMS] = {0};
    int64_t inner = ex[nd - 1];
    for (;;) {
        int64_t s = 0, d = 0;
        for (int i = 0; i < nd; i++) {
            s = s * se[i] + so[i] + (i < nd - 1 ? idx[i] : 0);
            d = d * de[i] + do_[i] + (i < nd - 1 ? idx[i] : 0);
        }
        if (add)
            for (int64_t k = 0; k < inner; k++)
                dst[d + k] += src[s + k];
        else
            memcpy(dst + d, src + s, (size_t)inner * sizeof *dst);
        int i = nd - 2;
        while (i >= 0 && ++idx[i] == ex[i])
            idx[i--] = 0;
        if (i < 0)
            return;
    }
}

static void extents(const ss_region *r, int64_t *e)
{
    for (int i = 0; i < r->ndim; i++)
        e[i] = ext(r, i);
}

static int op_axis(const ss_kargs *a)
{
    int n = a->yr[0].ndim;
    return a->op->attrs.axis < 0 ? a->op->attrs.axis + n : a->op->attrs.axis;
}

/* Offset of input i of a concat along the axis, in output coordinates. */
static int64_t concat_off(const ss_kargs *a, int i, int ax)
{
    int64_t off = 0;
    for (int j = 0; j < i; j++)
        off += ss_graph_tensor(a->g, a->op->inputs[j])->shape[ax];
    return off;
}

/* concat (dir 0: inputs -> output) and its backward (dir 1: dy -> dx) */
static void concat_move(const ss_kargs *a, int back)
{
    int ax = op_axis(a), nd = a->yr[0].ndim;
    int64_t ye[SS_MAX_DIMS], zero[SS_MAX_DIMS] = {0};
    extents(&a->yr[0], ye);
    for (int i = 0; i < a->op->n_in; i++) {
        int64_t xe[SS_MAX_DIMS], yo[SS_MAX_DIMS] = {0};
        extents(&a->xr[i], xe);
        if (ss_region_volume(&a->xr[i]) == 0)
            continue;
        yo[ax] = concat_off(a, i, ax) + a->xr[i].r[ax].lo - a->t.out.r[ax].lo;
        if (!back)
            copy_box(a->y[0], ye, yo, a->x[i], xe, zero, xe, nd, 0);
        else if (a->dx[i])
            copy_box(a->dx[i], xe, zero, a->dy[0], ye, yo, xe, nd, 0);
    }
}

static void concat_fwd(const ss_kargs *a) { concat_move(a, 0); }
static void concat_bwd(const ss_kargs *a) { concat_move(a, 1); }

const ss_kernel ss_cpu_concat = {F32, no_state, concat_fwd, concat_bwd};

/* split: output k is the input's slice [off_k, off_k + size_k) on the axis */
static void split_move(const ss_kargs *a, int back)
{
    int ax = op_axis(a), nd = a->xr[0].ndim;
    int64_t xe[SS_MAX_DIMS], zero[SS_MAX_DIMS] = {0};
    extents(&a->xr[0], xe);
    int64_t off = 0;
    if (back && a->dx[0])
        memset(a->dx[0], 0, ss_kernel_x_bytes(a, 0));
    for (int k = 0; k < a->n_y; k++) {
        int64_t ye[SS_MAX_DIMS], xo[SS_MAX_DIMS] = {0};
        extents(&a->yr[k], ye);
        xo[ax] = off + a->yr[k].r[ax].lo - a->xr[0].r[ax].lo;
        off += a->op->attrs.split_sizes[k];
        if (!back)
            copy_box(a->y[k], ye, zero, a->x[0], xe, xo, ye, nd, 0);
        else if (a->dx[0])
            copy_box(a->dx[0], xe, xo, a->dy[k], ye, zero, ye, nd, 1);
    }
}

static void split_fwd(const ss_kargs *a) { split_move(a, 0); }
static void split_bwd(const ss_kargs *a) { split_move(a, 1); }

const ss_kernel ss_cpu_split = {F32, no_state, split_fwd, split_bwd};

/* reshape: the same elements in the same order (tiles whose input region
 * holds exactly the output tile's elements) */
static ss_status reshape_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    *saved = *work = 0;
    if (ss_region_volume(&a->xr[0]) != yvol(a))
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "kernels: reshape '%s': this tile reads "
                           "more elements than it writes (not a contiguous block)", a->op->name);
    return SS_OK;
}

static void reshape_fwd(const ss_kargs *a)
{
    memcpy(a->y[0], a->x[0], ss_kernel_y_bytes(a, 0));
}

static void reshape_bwd(const ss_kargs *a)
{
    if (a->dx[0])
        memcpy(a->dx[0], a->dy[0], ss_kernel_y_bytes(a, 0));
}

const ss_kernel ss_cpu_reshape = {F32, reshape_sizes, reshape_fwd, reshape_bwd};

/* transpose: y[i_0..i_n] = x[j] with j[perm[k]] = i_k */
static void transpose_move(const ss_kargs *a, int back)
{
    const int *perm = a->op->attrs.perm;
    int nd = a->yr[0].ndim;
    int64_t ye[SS_MAX_DIMS], xe[SS_MAX_DIMS], xs[SS_MAX_DIMS], st[SS_MAX_DIMS];
    extents(&a->yr[0], ye);
    extents(&a->xr[0], xe);
    xs[nd - 1] = 1;
    for (int i = nd - 2; i >= 0; i--)
        xs[i] = xs[i + 1] * xe[i + 1];
    for (int k = 0; k < nd; k++)
        st[k] = xs[perm[k]]; /* input stride of output dim k */
    int64_t n = yvol(a), idx[SS_MAX_DIMS] = {0}, src = 0;
    const float *x = back ? a->dy[0] : a->x[0];
    float *y = back ? a->dx[0] : a->y[0];
    if (!y)
        return;
    for (int64_t o = 0; o < n; o++) {
        if (back)
            y[src] = x[o];
        else
            y[o] = x[src];
        int k = nd - 1;
        while (k >= 0) {
            src += st[k];
            if (++idx[k] < ye[k])
                break;
            src -= st[k] * ye[k];
            idx[k--] = 0;
        }
    }
}

static void transpose_fwd(const ss_kargs *a) { transpose_move(a, 0); }
static void transpose_bwd(const ss_kargs *a) { transpose_move(a, 1); }

const ss_kernel ss_cpu_transpose = {F32, no_state, transpose_fwd, transpose_bwd};
