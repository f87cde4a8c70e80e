/*
 * cpu_llm.c — the CPU kernels (fp32) of the operator types of modern
 * language models: rmsnorm, rotary position embedding, and the
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
 */
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
