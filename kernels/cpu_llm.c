/*
 * cpu_llm.c — the CPU kernels (fp32) of the operator types of modern
 * language models: rmsnorm, rotary position embedding, flash attention,
 * expand (a broadcast copy; its backward sums the copies) and the
 * mixture-of-experts trio moe_dispatch / expert_linear / moe_combine,
 * forward and backward.
 *
 * Tiles follow core/ops_llm.c: rmsnorm and rotary hold their whole last dim;
 * dispatch and combine use the balanced routing geometry of ss_moe_geometry
 * (token t goes to experts (t mod g) + j*g, j < topk, in the slot of its
 * group t / g; padding slots are zero), so a tile's operand buffers hold the
 * token and slot boxes the region functions give. Rotary uses the rotate-half
 * pairing (element i with i + dim/2 in each head, as Llama and GPT-NeoX) and
 * the frequency base 10,000; the base changes values, not costs.
 *
 * Flash attention runs FlashAttention-2's algorithm on the CPU: per query
 * row, key blocks of FLASH_BK with an online softmax (running maximum and
 * sum, the accumulator rescaled once a block); the forward keeps only the
 * row log-sum-exp; the backward recomputes each probability from it, with
 * D = rowsum(dO * O). Causal rows see keys up to their position (global
 * row / G, G = query rows per key); the dropout mask is a hash of the seed
 * and the element's global index, drawn again in the backward.
 */
#include "core/hash.h"
#include "core/op_table.h"
#include "kernels/cpu_impl.h"

#include <math.h>
#include <string.h>

#define F32 (1u << SS_F32)
#define EPS 1e-5f
#define ROPE_BASE 10000.0

static ss_status none(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    (void)a;
    (void)d;
    *saved = *work = 0;
    return SS_OK;
}

/* ----------------------------------------------------------------- rmsnorm */

static void rows_of(const ss_kargs *a, int64_t *rows, int64_t *h)
{
    const ss_region *yr = &a->yr[0];
    *h = ext(yr, yr->ndim - 1);
    *rows = *h ? ss_region_volume(yr) / *h : 0;
}

/* saved: the reciprocal root mean square of every row */
static ss_status rms_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    (void)d;
    int64_t rows, h;
    rows_of(a, &rows, &h);
    *saved = (size_t)rows * sizeof(float);
    *work = 0;
    return SS_OK;
}

static void rms_fwd(const ss_kargs *a)
{
    int64_t rows, h;
    rows_of(a, &rows, &h);
    const float *x = a->x[0], *gam = a->x[1];
    float *y = a->y[0], *rstd = a->saved;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * h;
        double s = 0;
        for (int64_t i = 0; i < h; i++)
            s += (double)xr[i] * xr[i];
        float q = (float)(1.0 / sqrt(s / (double)h + EPS));
        rstd[r] = q;
        for (int64_t i = 0; i < h; i++)
            y[r * h + i] = xr[i] * q * gam[i];
    }
}

/* With xh = x * q and g = dy * gamma: dx = q * (g - xh * mean(g * xh)). */
static void rms_bwd(const ss_kargs *a)
{
    int64_t rows, h;
    rows_of(a, &rows, &h);
    const float *x = a->x[0], *gam = a->x[1], *dy = a->dy[0], *rstd = a->saved;
    float *dx = a->dx[0], *dg = a->dx[1];
    if (dg)
        memset(dg, 0, (size_t)h * sizeof *dg);
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * h, *dyr = dy + r * h;
        float q = rstd[r];
        double s = 0;
        for (int64_t i = 0; i < h; i++) {
            float xh = xr[i] * q;
            s += (double)dyr[i] * gam[i] * xh;
            if (dg)
                dg[i] += dyr[i] * xh;
        }
        if (!dx)
            continue;
        float m = (float)(s / (double)h);
        for (int64_t i = 0; i < h; i++)
            dx[r * h + i] = q * (dyr[i] * gam[i] - xr[i] * q * m);
    }
}

const ss_kernel ss_cpu_rmsnorm = {F32, rms_sizes, rms_fwd, rms_bwd};

/* ------------------------------------------------------------------ rotary */

/* Rotate every head of x (rows of D at position pos) by +1 (forward) or -1
 * (backward: the transpose of a rotation is the opposite rotation). */
static void rotate(const ss_kargs *a, const float *x, float *y, double sign)
{
    const ss_region *yr = &a->yr[0];
    int64_t hd = a->op->attrs.dim, half = hd / 2;
    int64_t n0 = ext(yr, 0), s0 = ext(yr, 1), pos0 = a->t.out.r[1].lo;
    int64_t inner = n0 > 0 && s0 > 0 ? ss_region_volume(yr) / (n0 * s0) : 0; /* dims 2.. */
    for (int64_t b = 0; b < n0; b++)
        for (int64_t s = 0; s < s0; s++) {
            double pos = (double)(pos0 + s);
            int64_t base = (b * s0 + s) * inner;
            for (int64_t off = 0; off + hd <= inner; off += hd) {
                const float *xh = x + base + off;
                float *yh = y + base + off;
                for (int64_t i = 0; i < half; i++) {
                    double th = pos * pow(ROPE_BASE, -2.0 * (double)i / (double)hd);
                    float c = (float)cos(th), sn = (float)(sign * sin(th));
                    float x1 = xh[i], x2 = xh[i + half];
                    yh[i] = x1 * c - x2 * sn;
                    yh[i + half] = x2 * c + x1 * sn;
                }
            }
        }
}

static void rotary_fwd(const ss_kargs *a) { rotate(a, a->x[0], a->y[0], 1.0); }

static void rotary_bwd(const ss_kargs *a)
{
    if (a->dx[0])
        rotate(a, a->dy[0], a->dx[0], -1.0);
}

const ss_kernel ss_cpu_rotary = {F32, none, rotary_fwd, rotary_bwd};

/* ------------------------------------------------------------ moe_dispatch */

static int moe_geo(const ss_kargs *a, ss_moe_geo *m)
{
    const ss_tensor *p = ss_graph_tensor(a->g, a->op->inputs[1]);
    return ss_moe_geometry(p->shape[0], p->shape[1], p->shape[2], a->op->attrs.topk,
                           a->op->attrs.capacity, m);
}

/* The token in slot c of expert e, or -1 for a padding slot. */
static int64_t slot_token(const ss_moe_geo *m, int64_t e, int64_t c)
{
    int64_t j = c * m->Cr / m->C;
    if (j >= m->Cr || ss_moe_first_slot(m, j) != c)
        return -1;
    return j * m->g + e % m->g;
}

/* dir 0: slots = tokens (forward); 1: token grads += slot grads. */
static void dispatch_move(const ss_kargs *a, float *tok, float *slots, int dir)
{
    ss_moe_geo m;
    if (moe_geo(a, &m))
        return;
    const ss_region *yr = &a->yr[0], *xr = &a->xr[0];
    int64_t H = ext(yr, 2), t0 = xr->r[0].lo * m.S;
    for (int64_t e = yr->r[0].lo; e < yr->r[0].hi; e++)
        for (int64_t c = yr->r[1].lo; c < yr->r[1].hi; c++) {
            float *sl = slots + ((e - yr->r[0].lo) * ext(yr, 1) + (c - yr->r[1].lo)) * H;
            int64_t t = slot_token(&m, e, c);
            if (t < 0) {
                if (dir == 0)
                    memset(sl, 0, (size_t)H * sizeof *sl);
                continue;
            }
            float *tk = tok + (t - t0) * H;
            for (int64_t i = 0; i < H; i++) {
                if (dir == 0)
                    sl[i] = tk[i];
                else
                    tk[i] += sl[i];
            }
        }
}

static void dispatch_fwd(const ss_kargs *a) { dispatch_move(a, a->x[0], a->y[0], 0); }

static void dispatch_bwd(const ss_kargs *a)
{
    if (a->dx[1])
        memset(a->dx[1], 0, ss_kernel_x_bytes(a, 1));
    if (!a->dx[0])
        return;
    memset(a->dx[0], 0, ss_kernel_x_bytes(a, 0));
    dispatch_move(a, a->dx[0], a->dy[0], 1);
}

const ss_kernel ss_cpu_moe_dispatch = {F32, none, dispatch_fwd, dispatch_bwd};

/* ----------------------------------------------------------- expert_linear */

static void expert_dims(const ss_kargs *a, int64_t *E, int64_t *M, int64_t *K, int64_t *N)
{
    *E = ext(&a->yr[0], 0);
    *M = ext(&a->yr[0], 1);
    *K = ext(&a->xr[0], 2);
    *N = ext(&a->yr[0], 2);
}

static void expert_fwd(const ss_kargs *a)
{
    int64_t E, M, K, N;
    expert_dims(a, &E, &M, &K, &N);
    const float *x = a->x[0], *w = a->x[1];
    float *y = a->y[0];
    for (int64_t e = 0; e < E; e++) {
        float *ye = y + e * M * N;
        ss_cpu_gemm(0, 0, M, N, K, 1, x + e * M * K, K, w + e * K * N, N, 0, ye, N);
        if (a->op->n_w > 1 && a->t.red.lo == 0) {
            const float *b = (const float *)a->x[2] + e * N;
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++)
                    ye[i * N + j] += b[j];
        }
    }
}

static void expert_bwd(const ss_kargs *a)
{
    int64_t E, M, K, N;
    expert_dims(a, &E, &M, &K, &N);
    const float *x = a->x[0], *w = a->x[1], *dy = a->dy[0];
    float *db = a->op->n_w > 1 ? a->dx[2] : NULL;
    for (int64_t e = 0; e < E; e++) {
        const float *dye = dy + e * M * N;
        if (a->dx[0])
            ss_cpu_gemm(0, 1, M, K, N, 1, dye, N, w + e * K * N, N, 0,
                        (float *)a->dx[0] + e * M * K, K);
        if (a->dx[1])
            ss_cpu_gemm(1, 0, K, N, M, 1, x + e * M * K, K, dye, N, 0,
                        (float *)a->dx[1] + e * K * N, N);
        if (db) {
            float *dbe = db + e * N;
            memset(dbe, 0, (size_t)N * sizeof *dbe);
            if (a->t.red.lo == 0)
                for (int64_t i = 0; i < M; i++)
                    for (int64_t j = 0; j < N; j++)
                        dbe[j] += dye[i * N + j];
        }
    }
}

const ss_kernel ss_cpu_expert_linear = {F32, none, expert_fwd, expert_bwd};

/* ------------------------------------------------------------- moe_combine */

/* A combine tile: the routing, its tokens [t0, t1), the feature width H,
 * and the slot box [c0, c0 + nc) its slots buffer holds. */
typedef struct cgeo {
    ss_moe_geo m;
    int64_t t0, t1, H, c0, nc;
} cgeo;

static int combine_geo(const ss_kargs *a, cgeo *c)
{
    if (moe_geo(a, &c->m))
        return -1;
    const ss_region *yr = &a->yr[0];
    c->t0 = yr->r[0].lo * c->m.S;
    c->t1 = yr->r[0].hi * c->m.S;
    c->H = ext(yr, 2);
    c->c0 = a->xr[0].r[1].lo;
    c->nc = ext(&a->xr[0], 1);
    return 0;
}

static void combine_fwd(const ss_kargs *a)
{
    cgeo c;
    float *y = a->y[0];
    memset(y, 0, ss_kernel_y_bytes(a, 0));
    if (combine_geo(a, &c))
        return;
    const float *sl = a->x[0], *p = a->x[1];
    for (int64_t t = c.t0; t < c.t1; t++) {
        int64_t slot = ss_moe_first_slot(&c.m, t / c.m.g) - c.c0;
        float *yt = y + (t - c.t0) * c.H;
        for (int64_t j = 0; j < c.m.topk; j++) {
            int64_t e = t % c.m.g + j * c.m.g;
            float w = p[(t - c.t0) * c.m.X + e];
            const float *s = sl + (e * c.nc + slot) * c.H;
            for (int64_t i = 0; i < c.H; i++)
                yt[i] += w * s[i];
        }
    }
}

static void combine_bwd(const ss_kargs *a)
{
    cgeo c;
    float *ds = a->dx[0], *dp = a->dx[1];
    if (ds)
        memset(ds, 0, ss_kernel_x_bytes(a, 0));
    if (dp)
        memset(dp, 0, ss_kernel_x_bytes(a, 1));
    if (combine_geo(a, &c))
        return;
    const float *sl = a->x[0], *p = a->x[1], *dy = a->dy[0];
    for (int64_t t = c.t0; t < c.t1; t++) {
        int64_t slot = ss_moe_first_slot(&c.m, t / c.m.g) - c.c0;
        const float *dyt = dy + (t - c.t0) * c.H;
        for (int64_t j = 0; j < c.m.topk; j++) {
            int64_t e = t % c.m.g + j * c.m.g, k = (t - c.t0) * c.m.X + e;
            const float *s = sl + (e * c.nc + slot) * c.H;
            double dot = 0;
            for (int64_t i = 0; i < c.H; i++) {
                dot += (double)dyt[i] * s[i];
                if (ds)
                    ds[(e * c.nc + slot) * c.H + i] += p[k] * dyt[i];
            }
            if (dp)
                dp[k] = (float)dot;
        }
    }
}

const ss_kernel ss_cpu_moe_combine = {F32, none, combine_fwd, combine_bwd};

/* ----------------------------------------------------------------- flash */

#define FLASH_BK 64

typedef struct fgeo {
    int64_t B, rows, Sk, d, dv, G, qlo;
    int causal;
    float scale, keep; /* keep: 1 / (1 - rate) */
    uint32_t thr;      /* drop when the hash's high word is below */
    const ss_region *yr;
    const ss_tensor *o;
} fgeo;

static void flash_geo(const ss_kargs *a, fgeo *g)
{
    const ss_tensor *q = ss_graph_tensor(a->g, a->op->inputs[0]);
    const ss_tensor *k = ss_graph_tensor(a->g, a->op->inputs[1]);
    int n = q->ndim;
    g->yr = &a->yr[0];
    g->o = ss_graph_tensor(a->g, a->op->outputs[0]);
    g->rows = ext(g->yr, n - 2);
    g->dv = ext(g->yr, n - 1);
    g->B = g->rows > 0 && g->dv > 0 ? ss_region_volume(g->yr) / (g->rows * g->dv) : 0;
    g->Sk = ext(&a->xr[1], n - 2);
    g->d = ext(&a->xr[0], n - 1);
    g->G = q->shape[n - 2] / k->shape[n - 2];
    g->qlo = a->t.out.r[n - 2].lo;
    g->causal = a->op->attrs.causal;
    g->scale = 1.0f / sqrtf((float)g->d);
    double r = a->op->attrs.rate;
    g->keep = (float)(1.0 / (1.0 - r));
    g->thr = (uint32_t)(r * 4294967295.0);
}

/* Global index of the tile's local batch entry b (row-major over the
 * output's batch dims), for the dropout hash. */
static int64_t flash_batch(const fgeo *g, int64_t b)
{
    int n = g->o->ndim;
    int64_t idx = 0, rest = b, span = 1;
    for (int i = n - 3; i >= 0; i--) {
        int64_t e = ext(g->yr, i);
        idx += (g->yr->r[i].lo + rest % e) * span;
        rest /= e;
        span *= g->o->shape[i];
    }
    return idx;
}

/* Dropout factor of (batch entry gb, global row r, key j): 0 or keep. */
static float flash_drop(const fgeo *g, uint64_t seed, int64_t gb, int64_t r, int64_t j)
{
    if (g->thr == 0)
        return 1.0f;
    int n = g->o->ndim;
    uint64_t i = ((uint64_t)gb * (uint64_t)g->o->shape[n - 2] + (uint64_t)r) * (uint64_t)g->Sk +
                 (uint64_t)j;
    uint64_t h = ss_hash_final(seed * 0x9e3779b97f4a7c15ULL + i);
    return (uint32_t)(h >> 32) >= g->thr ? g->keep : 0.0f;
}

/* Keys row r (global) sees. */
static int64_t flash_keys(const fgeo *g, int64_t r)
{
    int64_t lim = g->causal ? r / g->G + 1 : g->Sk;
    return lim < g->Sk ? lim : g->Sk;
}

/* saved: the log-sum-exp of every row; work: a block of scores */
static ss_status flash_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    (void)d;
    fgeo g;
    flash_geo(a, &g);
    *saved = (size_t)(g.B * g.rows) * sizeof(float);
    *work = (size_t)FLASH_BK * sizeof(float);
    return SS_OK;
}

static float dot(const float *x, const float *y, int64_t n)
{
    float s = 0;
    for (int64_t i = 0; i < n; i++)
        s += x[i] * y[i];
    return s;
}

static void flash_fwd(const ss_kargs *a)
{
    fgeo g;
    flash_geo(a, &g);
    float *lse = a->saved, *sc = a->work;
    for (int64_t b = 0; b < g.B; b++) {
        const float *K = (const float *)a->x[1] + b * g.Sk * g.d;
        const float *V = (const float *)a->x[2] + b * g.Sk * g.dv;
        int64_t gb = flash_batch(&g, b);
        for (int64_t i = 0; i < g.rows; i++) {
            const float *q = (const float *)a->x[0] + (b * g.rows + i) * g.d;
            float *o = (float *)a->y[0] + (b * g.rows + i) * g.dv;
            int64_t r = g.qlo + i, lim = flash_keys(&g, r);
            float m = -INFINITY, l = 0;
            memset(o, 0, (size_t)g.dv * sizeof *o);
            for (int64_t j0 = 0; j0 < lim; j0 += FLASH_BK) {
                int64_t nb = lim - j0 < FLASH_BK ? lim - j0 : FLASH_BK;
                float mb = m;
                for (int64_t j = 0; j < nb; j++) {
                    sc[j] = g.scale * dot(q, K + (j0 + j) * g.d, g.d);
                    mb = sc[j] > mb ? sc[j] : mb;
                }
                float c = expf(m - mb); /* rescale what the earlier blocks summed */
                l *= c;
                for (int64_t e = 0; e < g.dv; e++)
                    o[e] *= c;
                for (int64_t j = 0; j < nb; j++) {
                    float p = expf(sc[j] - mb);
                    l += p;
                    p *= flash_drop(&g, a->seed, gb, r, j0 + j);
                    if (p != 0)
                        ss_cpu_axpy(g.dv, p, V + (j0 + j) * g.dv, o);
                }
                m = mb;
            }
            for (int64_t e = 0; e < g.dv && l > 0; e++)
                o[e] /= l;
            lse[b * g.rows + i] = l > 0 ? m + logf(l) : -INFINITY;
        }
    }
}

/* With p = exp(s - lse), p' = p * drop, D = dO . O: dV_j += p' dO,
 * dS = p (drop * dO . V_j - D), dQ += scale dS K_j, dK_j += scale dS q. */
static void flash_bwd(const ss_kargs *a)
{
    fgeo g;
    flash_geo(a, &g);
    const float *lse = a->saved;
    float *dQ = a->dx[0], *dK = a->dx[1], *dV = a->dx[2];
    for (int i = 0; i < 3; i++)
        if (a->dx[i])
            memset(a->dx[i], 0, ss_kernel_x_bytes(a, i));
    for (int64_t b = 0; b < g.B; b++) {
        const float *K = (const float *)a->x[1] + b * g.Sk * g.d;
        const float *V = (const float *)a->x[2] + b * g.Sk * g.dv;
        int64_t gb = flash_batch(&g, b);
        for (int64_t i = 0; i < g.rows; i++) {
            int64_t row = b * g.rows + i, r = g.qlo + i, lim = flash_keys(&g, r);
            const float *q = (const float *)a->x[0] + row * g.d;
            const float *o = (const float *)a->y[0] + row * g.dv;
            const float *dO = (const float *)a->dy[0] + row * g.dv;
            float D = dot(dO, o, g.dv);
            for (int64_t j = 0; j < lim; j++) {
                float p = expf(g.scale * dot(q, K + j * g.d, g.d) - lse[row]);
                float dr = flash_drop(&g, a->seed, gb, r, j);
                if (dV && p * dr != 0)
                    ss_cpu_axpy(g.dv, p * dr, dO, dV + (b * g.Sk + j) * g.dv);
                float ds = p * (dr * dot(dO, V + j * g.dv, g.dv) - D) * g.scale;
                if (dQ)
                    ss_cpu_axpy(g.d, ds, K + j * g.d, dQ + row * g.d);
                if (dK)
                    ss_cpu_axpy(g.d, ds, q, dK + (b * g.Sk + j) * g.d);
            }
        }
    }
}

const ss_kernel ss_cpu_flash_attention = {F32, flash_sizes, flash_fwd, flash_bwd};

/* ------------------------------------------------------------------ expand */

/* The tile as outer x copies x inner (copies: its extent on the axis); x
 * holds outer x inner (one element on the axis). */
static void expand_dims(const ss_kargs *a, int64_t *outer, int64_t *copies, int64_t *inner)
{
    const ss_region *yr = &a->yr[0];
    int n = yr->ndim, ax = a->op->attrs.axis < 0 ? a->op->attrs.axis + n : a->op->attrs.axis;
    *outer = *inner = 1;
    for (int i = 0; i < ax; i++)
        *outer *= ext(yr, i);
    for (int i = ax + 1; i < n; i++)
        *inner *= ext(yr, i);
    *copies = ext(yr, ax);
}

static void expand_fwd(const ss_kargs *a)
{
    int64_t outer, copies, inner;
    expand_dims(a, &outer, &copies, &inner);
    const float *x = a->x[0];
    float *y = a->y[0];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < copies; c++)
            memcpy(y + (o * copies + c) * inner, x + o * inner, (size_t)inner * sizeof *y);
}

/* dx = the sum of the tile's copies of dy. */
static void expand_bwd(const ss_kargs *a)
{
    int64_t outer, copies, inner;
    expand_dims(a, &outer, &copies, &inner);
    const float *dy = a->dy[0];
    float *dx = a->dx[0];
    if (!dx)
        return;
    memset(dx, 0, (size_t)(outer * inner) * sizeof *dx);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < copies; c++)
            ss_cpu_axpy(inner, 1.0f, dy + (o * copies + c) * inner, dx + o * inner);
}

const ss_kernel ss_cpu_expand = {F32, none, expand_fwd, expand_bwd};
