/*
 * exec.c — the runtime's executor (exec.h): per rank, the plan's tiles on
 * the rank's device run forward in op order and backward in reverse op
 * order with the CPU kernels, over full-size tensor buffers that the
 * collectives of ss_rt_comm keep consistent where the plan needs them.
 *
 * Invariant: after an op's forward, every device holds in buf[t] the whole
 * value of each output t over the regions its consumers on that device read
 * (fwd_sum[t] = 0: its own tiles computed those regions whole; 1: the
 * replica-0 contributions of every rank were summed). Backward: before an
 * op's backward, grad[t] of each output is whole over the regions its own
 * tiles produce, by the same rule (bwd_sum[t]). Weights: grad whole over the
 * regions the device reads before the update.
 */
#include "runtime/exec.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct rt_event {
    int kind;  /* 0 fwd, 1 bwd, 2 all-reduce */
    int op, tile, tensor;
    double ts, dur, bytes;
} rt_event;

typedef struct rt_tile {
    int op, idx, q, r; /* op id, tile index, replica, reduction slice */
    ss_kargs a;
} rt_tile;

struct ss_rt_state {
    const ss_graph *g;
    const ss_plan *p;
    int rank, size, n_t, n_ops;
    void **buf;     /* [n_t] full tensor values */
    float **grad;   /* [n_t] gradients (float tensors; NULL otherwise) */
    int64_t *vol;   /* [n_t] elements */
    char *fwd_sum, *bwd_sum; /* [n_t] */
    rt_tile *tiles; /* this rank's tiles, by op then index */
    int n_tiles, *op_off; /* [n_ops + 1] */
    float *ce_m, *ce_s;   /* scratch of the split loss */
    float **adam_m, **adam_v; /* [n_t] Adam moments of the weights (NULL: SGD) */
    struct rt_event *ev;  /* the traced iteration's events */
    int n_ev, cap_ev;
    int step;             /* updates done */
};

/* ------------------------------------------------------------ comm self */

static ss_status self_f32(void *c, float *b, int64_t n, int op, ss_diag *d)
{
    (void)c, (void)b, (void)n, (void)op, (void)d;
    return SS_OK;
}
static ss_status self_f64(void *c, double *b, int64_t n, int op, ss_diag *d)
{
    (void)c, (void)b, (void)n, (void)op, (void)d;
    return SS_OK;
}
static ss_status self_barrier(void *c, ss_diag *d)
{
    (void)c, (void)d;
    return SS_OK;
}

void ss_rt_comm_self(ss_rt_comm *c)
{
    c->rank = 0;
    c->size = 1;
    c->ctx = NULL;
    c->allreduce_f32 = self_f32;
    c->allreduce_f64 = self_f64;
    c->barrier = self_barrier;
}

/* ------------------------------------------------------------ regions */

/* Walk region r of a row-major tensor of shape sh (nd dims): fn gets the
 * offset (elements) of each innermost row in the tensor and in the dense
 * region buffer, and the row length. */
typedef void (*row_fn)(void *ctx, int64_t toff, int64_t roff, int64_t len);

static void walk(const int64_t *sh, int nd, const ss_region *r, row_fn fn, void *ctx)
{
    if (nd == 0) {
        fn(ctx, 0, 0, 1);
        return;
    }
    int64_t idx[SS_MAX_DIMS], len = r->r[nd - 1].hi - r->r[nd - 1].lo, roff = 0;
    for (int k = 0; k < nd; k++) {
        idx[k] = r->r[k].lo;
        if (r->r[k].hi <= r->r[k].lo)
            return;
    }
    for (;;) {
        int64_t toff = 0;
        for (int k = 0; k < nd; k++)
            toff = toff * sh[k] + idx[k];
        fn(ctx, toff, roff, len);
        roff += len;
        int k = nd - 2;
        while (k >= 0 && ++idx[k] == r->r[k].hi) {
            idx[k] = r->r[k].lo;
            k--;
        }
        if (k < 0)
            return;
    }
}

typedef struct copy_ctx {
    char *t;
    char *dense;
    size_t es;
    int mode; /* 0 gather, 1 scatter-add f32, 2 scatter-max f32 */
} copy_ctx;

static void copy_row(void *c, int64_t toff, int64_t roff, int64_t len)
{
    copy_ctx *x = c;
    if (x->mode == 0) {
        memcpy(x->dense + (size_t)roff * x->es, x->t + (size_t)toff * x->es, (size_t)len * x->es);
        return;
    }
    float *t = (float *)x->t + toff;
    const float *s = (const float *)x->dense + roff;
    if (x->mode == 1)
        for (int64_t i = 0; i < len; i++)
            t[i] += s[i];
    else
        for (int64_t i = 0; i < len; i++)
            t[i] = s[i] > t[i] ? s[i] : t[i];
}

static void region_io(const ss_tensor *T, void *tbuf, const ss_region *r, void *dense, int mode)
{
    copy_ctx c = {tbuf, dense, ss_dtype_size(T->dtype), mode};
    walk(T->shape, T->ndim, r, copy_row, &c);
}

/* ------------------------------------------------------------ setup */

static int64_t tvol(const ss_tensor *t)
{
    int64_t v = 1;
    for (int k = 0; k < t->ndim; k++)
        v *= t->shape[k];
    return v;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double rng_unit(uint64_t *s) /* [-1, 1) */
{
    return (double)(rng_next(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* Upper bound (exclusive) of the integer values tensor t may hold: the
 * vocabulary of a loss or embedding consuming it, else 1. */
static int64_t int_range(const ss_graph *g, int t)
{
    for (int i = 0; i < ss_graph_n_consumers(g, t); i++) {
        const ss_op *c = ss_graph_op(g, ss_graph_consumer(g, t, i));
        if (c->type == SS_OP_EMBEDDING)
            return c->attrs.vocab;
        if (c->type == SS_OP_SOFTMAX_CE && c->n_in > 1 && c->inputs[1] == t) {
            const ss_tensor *lg = ss_graph_tensor(g, c->inputs[0]);
            return lg->shape[lg->ndim - 1];
        }
    }
    return 1;
}

static void fill(const ss_graph *g, int t, void *b, uint64_t seed)
{
    const ss_tensor *T = ss_graph_tensor(g, t);
    uint64_t s = seed ^ ((uint64_t)(t + 1) * 0xd1b54a32d192ed03ULL);
    int64_t n = tvol(T);
    if (T->dtype == SS_I32 || T->dtype == SS_I64) {
        int64_t range = int_range(g, t);
        for (int64_t i = 0; i < n; i++) {
            int64_t v = (int64_t)(rng_next(&s) % (uint64_t)range);
            if (T->dtype == SS_I32)
                ((int32_t *)b)[i] = (int32_t)v;
            else
                ((int64_t *)b)[i] = v;
        }
        return;
    }
    /* weights: fan-in scaled (1/sqrt(rows) for matrices, 0.1 for vectors) */
    double scale = !T->is_weight ? 1.0 : T->ndim >= 2 ? 1.0 / sqrt((double)T->shape[0]) : 0.1;
    for (int64_t i = 0; i < n; i++)
        ((float *)b)[i] = (float)(scale * rng_unit(&s));
}

static int tile_dev(const ss_pconfig *c, int i) { return c->devices[i]; }

/* Whether the tile of class (index with replica q) has a replica on dev. */
static int class_on(const ss_pconfig *c, int idx, int dev)
{
    int r = idx % c->red, base = idx / c->red / c->rep;
    for (int q = 0; q < c->rep; q++)
        if (tile_dev(c, (base * c->rep + q) * c->red + r) == dev)
            return 1;
    return 0;
}

/* Forward rule for output k (tensor t) of op P: 0 when every device's
 * consumer tiles read only regions its own complete tiles of P computed. */
static int need_fwd_sum(const ss_graph *g, const ss_plan *p, int P, int k, int t)
{
    const ss_op *op = ss_graph_op(g, P);
    const ss_pconfig *pc = ss_plan_config(p, P);
    int nc = ss_graph_n_consumers(g, t);
    if (nc == 0)
        return 1; /* the loss: summed for the report */
    if (pc->red > 1) {
        for (int i = 1; i < pc->ntiles; i++)
            if (pc->devices[i] != pc->devices[0])
                return 1;
    }
    for (int ci = 0; ci < nc; ci++) {
        const ss_op *c = ss_graph_op(g, ss_graph_consumer(g, t, ci));
        const ss_pconfig *cc = ss_plan_config(p, c->id);
        for (int j = 0; j < cc->ntiles; j++) {
            ss_tile ct;
            ss_pconfig_tile(g, c, cc, j, &ct);
            int dev = cc->devices[j];
            for (int i = 0; i < c->n_in; i++) {
                if (c->inputs[i] != t)
                    continue;
                ss_region R;
                ss_op_input_region(g, c, &ct, i, &R);
                int64_t need = ss_region_volume(&R), have = 0;
                for (int pt = 0; pt < pc->ntiles; pt++) {
                    if (pc->devices[pt] != dev || pt % pc->red)
                        continue;
                    ss_tile tt;
                    ss_region o, x;
                    ss_pconfig_tile(g, op, pc, pt, &tt);
                    ss_op_output_region(g, op, &tt, k, &o);
                    have += ss_region_intersect(&o, &R, &x);
                }
                if (have < need)
                    return 1;
            }
        }
    }
    return 0;
}

/* Backward rule for tensor t: 0 when, on every device, every tile that
 * reads a part of t overlapping a region the device needs the gradient of
 * (need[dev]: its producer tiles' outputs, or the weight regions it reads)
 * has a replica on that device. */
static int need_bwd_sum(const ss_graph *g, const ss_plan *p, int t, int P, int k)
{
    int n_ops = ss_graph_n_ops(g);
    const ss_tensor *T = ss_graph_tensor(g, t);
    for (int o1 = 0; o1 < n_ops; o1++) { /* o1's tiles read t: their devices need... */
        const ss_op *a = ss_graph_op(g, o1);
        const ss_pconfig *ac = ss_plan_config(p, o1);
        int uses = 0;
        for (int i = 0; i < a->n_in + a->n_w; i++)
            uses |= (i < a->n_in ? a->inputs[i] : a->weights[i - a->n_in]) == t;
        if (T->is_weight ? !uses : o1 != P)
            continue;
        for (int ja = 0; ja < ac->ntiles; ja++) {
            ss_tile ta;
            ss_region S;
            ss_pconfig_tile(g, a, ac, ja, &ta);
            if (T->is_weight) {
                int i = 0;
                while (a->weights[i] != t)
                    i++;
                ss_op_input_region(g, a, &ta, a->n_in + i, &S);
            } else {
                ss_op_output_region(g, a, &ta, k, &S);
            }
            int dev = ac->devices[ja];
            for (int o2 = 0; o2 < n_ops; o2++) {
                const ss_op *c = ss_graph_op(g, o2);
                const ss_pconfig *cc = ss_plan_config(p, o2);
                for (int i = 0; i < c->n_in + c->n_w; i++) {
                    if ((i < c->n_in ? c->inputs[i] : c->weights[i - c->n_in]) != t)
                        continue;
                    for (int j = 0; j < cc->ntiles; j++) {
                        ss_tile ct;
                        ss_region R, x;
                        ss_pconfig_tile(g, c, cc, j, &ct);
                        ss_op_input_region(g, c, &ct, i, &R);
                        if (ss_region_intersect(&R, &S, &x) > 0 && !class_on(cc, j, dev))
                            return 1;
                    }
                }
            }
        }
    }
    return 0;
}

static void *zalloc(size_t n)
{
    size_t m = (n + SS_KERNEL_ALIGN - 1) / SS_KERNEL_ALIGN * SS_KERNEL_ALIGN;
    void *b = aligned_alloc(SS_KERNEL_ALIGN, m ? m : SS_KERNEL_ALIGN);
    if (b)
        memset(b, 0, m ? m : SS_KERNEL_ALIGN);
    return b;
}

static void tile_free(rt_tile *t)
{
    ss_kargs *a = &t->a;
    for (int i = 0; i < a->n_x; i++) {
        free(a->x[i]);
        free(a->dx[i]);
    }
    for (int k = 0; k < a->n_y; k++) {
        free(a->y[k]);
        free(a->dy[k]);
    }
    free(a->saved);
    free(a->work);
}

void ss_rt_free(ss_rt_state *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n_tiles; i++)
        tile_free(&s->tiles[i]);
    for (int t = 0; t < s->n_t; t++) {
        free(s->buf ? s->buf[t] : NULL);
        free(s->grad ? s->grad[t] : NULL);
    }
    free(s->buf);
    free(s->grad);
    free(s->vol);
    free(s->fwd_sum);
    free(s->bwd_sum);
    free(s->tiles);
    free(s->op_off);
    free(s->ce_m);
    free(s->ce_s);
    for (int t = 0; t < s->n_t; t++) {
        free(s->adam_m ? s->adam_m[t] : NULL);
        free(s->adam_v ? s->adam_v[t] : NULL);
    }
    free(s->adam_m);
    free(s->adam_v);
    ss_free(s->ev);
    free(s);
}

void ss_rt_result_clear(ss_rt_result *r)
{
    free(r->loss);
    free(r->iter_ms);
    memset(r, 0, sizeof *r);
}

static ss_status nomem(ss_diag *d)
{
    ss_diag_set(d, SS_ERR_NOMEM, "runtime: out of memory");
    return SS_ERR_NOMEM;
}

static ss_status setup(ss_rt_state *s, uint64_t seed, ss_diag *d)
{
    const ss_graph *g = s->g;
    s->n_t = ss_graph_n_tensors(g);
    s->n_ops = ss_graph_n_ops(g);
    s->buf = calloc((size_t)s->n_t, sizeof *s->buf);
    s->grad = calloc((size_t)s->n_t, sizeof *s->grad);
    s->vol = calloc((size_t)s->n_t, sizeof *s->vol);
    s->fwd_sum = calloc((size_t)s->n_t, 1);
    s->bwd_sum = calloc((size_t)s->n_t, 1);
    s->op_off = calloc((size_t)s->n_ops + 1, sizeof *s->op_off);
    if (!s->buf || !s->grad || !s->vol || !s->fwd_sum || !s->bwd_sum || !s->op_off)
        return nomem(d);
    int64_t maxloss = 1;
    for (int t = 0; t < s->n_t; t++) {
        const ss_tensor *T = ss_graph_tensor(g, t);
        s->vol[t] = tvol(T);
        if (!(s->buf[t] = zalloc((size_t)s->vol[t] * ss_dtype_size(T->dtype))))
            return nomem(d);
        if (T->dtype != SS_F32 && T->dtype != SS_I32 && T->dtype != SS_I64)
            return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                               "runtime: tensor %s is %s; the CPU runtime runs fp32 models "
                               "(zoo transformers: precision=fp32)",
                               T->name, ss_dtype_name(T->dtype)),
                   SS_ERR_UNSUPPORTED;
        if (T->dtype == SS_F32 && !(s->grad[t] = zalloc((size_t)s->vol[t] * sizeof(float))))
            return nomem(d);
        if (T->is_weight || (T->producer >= 0 && ss_graph_op(g, T->producer)->type == SS_OP_INPUT))
            fill(g, t, s->buf[t], seed);
    }
    int cap = 0;
    for (int o = 0; o < s->n_ops; o++) {
        const ss_op *op = ss_graph_op(g, o);
        const ss_pconfig *c = ss_plan_config(s->p, o);
        for (int i = 0; i < c->ntiles; i++)
            if (c->devices[i] >= s->size)
                return ss_diag_set(d, SS_ERR_INVALID,
                                   "runtime: op %s runs on device %d but only %d ranks run "
                                   "(mpirun -np N, one rank per device)",
                                   op->name, c->devices[i], s->size),
                       SS_ERR_INVALID;
        for (int k = 0; k < op->n_out; k++) {
            int t = op->outputs[k];
            s->fwd_sum[t] = (char)need_fwd_sum(g, s->p, o, k, t);
            s->bwd_sum[t] = (char)(op->type != SS_OP_INPUT && need_bwd_sum(g, s->p, t, o, k));
            if (op->type == SS_OP_SOFTMAX_CE && s->vol[t] > maxloss)
                maxloss = s->vol[t];
        }
        cap += c->ntiles;
    }
    for (int t = 0; t < s->n_t; t++)
        if (ss_graph_tensor(g, t)->is_weight)
            s->bwd_sum[t] = (char)need_bwd_sum(g, s->p, t, -1, 0);
    s->ce_m = malloc((size_t)maxloss * sizeof(float));
    s->ce_s = malloc((size_t)maxloss * sizeof(float));
    s->tiles = calloc((size_t)cap + 1, sizeof *s->tiles);
    if (!s->tiles || !s->ce_m || !s->ce_s)
        return nomem(d);
    for (int o = 0; o < s->n_ops; o++) {
        const ss_op *op = ss_graph_op(g, o);
        const ss_pconfig *c = ss_plan_config(s->p, o);
        s->op_off[o] = s->n_tiles;
        if (op->type == SS_OP_INPUT)
            continue;
        for (int i = 0; i < c->ntiles; i++) {
            if (c->devices[i] != s->rank)
                continue;
            rt_tile *t = &s->tiles[s->n_tiles++];
            ss_tile tl;
            t->op = o;
            t->idx = i;
            t->r = i % c->red;
            t->q = i / c->red % c->rep;
            ss_pconfig_tile(g, op, c, i, &tl);
            ss_status st = ss_kernel_setup(&t->a, SS_BACKEND_CPU, g, op, &tl, d);
            if (st != SS_OK)
                return st;
            ss_kargs *a = &t->a;
            a->seed = seed + (uint64_t)o;
            for (int x = 0; x < a->n_x; x++) {
                size_t b = ss_kernel_x_bytes(a, x);
                if (!(a->x[x] = zalloc(b)) ||
                    (a->xt[x] == SS_F32 && !(a->dx[x] = zalloc(b))))
                    return nomem(d);
            }
            for (int k = 0; k < a->n_y; k++) {
                size_t b = ss_kernel_y_bytes(a, k);
                if (!(a->y[k] = zalloc(b)) || !(a->dy[k] = zalloc(b)))
                    return nomem(d);
            }
            if (!(a->saved = zalloc(a->saved_bytes)) || !(a->work = zalloc(a->work_bytes)))
                return nomem(d);
        }
    }
    s->op_off[s->n_ops] = s->n_tiles;
    return SS_OK;
}

/* ------------------------------------------------------------ one iteration */

static int operand_tensor(const ss_op *op, int i)
{
    return i < op->n_in ? op->inputs[i] : op->weights[i - op->n_in];
}

typedef struct iter_ctx {
    ss_rt_state *s;
    const ss_rt_comm *c;
    int64_t nred;
    double bytes;
    double comp_ms, comp_cpu_ms, comm_ms; /* this iteration: kernels (wall, CPU), collectives */
    int trace;       /* record events in s->ev */
    double t0;       /* iteration start (ms) */
    int op, tile, tensor; /* what the next event is about */
} iter_ctx;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Record an event of the traced iteration (allocation failure: dropped). */
static void record(iter_ctx *x, int kind, double w0, double w1, double bytes)
{
    ss_rt_state *s = x->s;
    if (!x->trace || ss_grow((void **)&s->ev, &s->cap_ev, s->n_ev + 1, sizeof *s->ev))
        return;
    s->ev[s->n_ev++] = (rt_event){kind, x->op, x->tile, x->tensor, (w0 - x->t0) * 1e3,
                                  (w1 - w0) * 1e3, bytes};
}

/* A kernel call, timed into x (wall and thread CPU time). */
static ss_status kernel(iter_ctx *x, int bwd, const ss_kargs *a, ss_diag *d)
{
    double w0 = now_ms(), c0 = cpu_ms();
    ss_status st = bwd ? ss_kernel_backward(SS_BACKEND_CPU, a, d)
                       : ss_kernel_forward(SS_BACKEND_CPU, a, d);
    x->comp_cpu_ms += cpu_ms() - c0;
    double w1 = now_ms();
    x->comp_ms += w1 - w0;
    record(x, bwd, w0, w1, 0);
    return st;
}

static ss_status allreduce(iter_ctx *x, float *b, int64_t n, int op, ss_diag *d)
{
    if (x->c->size == 1)
        return SS_OK; /* one rank: nothing to exchange */
    x->nred++;
    x->bytes += (double)n * sizeof(float);
    double t0 = now_ms();
    ss_status st = x->c->allreduce_f32(x->c->ctx, b, n, op, d);
    double t1 = now_ms();
    x->comm_ms += t1 - t0;
    record(x, 2, t0, t1, (double)n * sizeof(float));
    return st;
}

/* Vocabulary-parallel cross-entropy: combine the log-sum-exp of the shards
 * of every row, correct the partial losses and keep the global lse for the
 * backward. */
static ss_status ce_combine(iter_ctx *x, int o, ss_diag *d)
{
    ss_rt_state *s = x->s;
    const ss_op *op = ss_graph_op(s->g, o);
    int t = op->outputs[0];
    const ss_tensor *T = ss_graph_tensor(s->g, t);
    int64_t n = s->vol[t];
    for (int64_t i = 0; i < n; i++) {
        s->ce_m[i] = -INFINITY;
        s->ce_s[i] = 0;
    }
    for (int i = s->op_off[o]; i < s->op_off[o + 1]; i++)
        region_io(T, s->ce_m, &s->tiles[i].a.yr[0], s->tiles[i].a.saved, 2);
    ss_status st = allreduce(x, s->ce_m, n, 1, d);
    if (st != SS_OK)
        return st;
    for (int i = s->op_off[o]; i < s->op_off[o + 1]; i++) {
        rt_tile *tl = &s->tiles[i];
        int64_t rows = ss_region_volume(&tl->a.yr[0]);
        float *lse = tl->a.saved;
        float *gm = malloc((size_t)rows * sizeof(float));
        if (!gm)
            return nomem(d);
        region_io(T, s->ce_m, &tl->a.yr[0], gm, 0);
        for (int64_t r = 0; r < rows; r++)
            gm[r] = tl->q ? 0.0f : expf(lse[r] - gm[r]);
        region_io(T, s->ce_s, &tl->a.yr[0], gm, 1);
        free(gm);
    }
    if ((st = allreduce(x, s->ce_s, n, 0, d)) != SS_OK)
        return st;
    for (int i = s->op_off[o]; i < s->op_off[o + 1]; i++) {
        rt_tile *tl = &s->tiles[i];
        int64_t rows = ss_region_volume(&tl->a.yr[0]);
        float *lse = tl->a.saved, *y = tl->a.y[0];
        float *gm = malloc((size_t)rows * 2 * sizeof(float)), *gs = gm + rows;
        if (!gm)
            return nomem(d);
        region_io(T, s->ce_m, &tl->a.yr[0], gm, 0);
        region_io(T, s->ce_s, &tl->a.yr[0], gs, 0);
        for (int64_t r = 0; r < rows; r++) {
            float G = gm[r] + logf(gs[r]);
            y[r] = y[r] - lse[r] + (tl->r == 0 ? G : 0.0f);
            lse[r] = G;
        }
        free(gm);
    }
    return SS_OK;
}

static ss_status forward(iter_ctx *x, ss_diag *d)
{
    ss_rt_state *s = x->s;
    const ss_graph *g = s->g;
    for (int o = 0; o < s->n_ops; o++) {
        const ss_op *op = ss_graph_op(g, o);
        if (op->type == SS_OP_INPUT)
            continue;
        for (int k = 0; k < op->n_out; k++)
            memset(s->buf[op->outputs[k]], 0,
                   (size_t)s->vol[op->outputs[k]] *
                       ss_dtype_size(ss_graph_tensor(g, op->outputs[k])->dtype));
        for (int i = s->op_off[o]; i < s->op_off[o + 1]; i++) {
            ss_kargs *a = &s->tiles[i].a;
            x->op = o;
            x->tile = s->tiles[i].idx;
            for (int xi = 0; xi < a->n_x; xi++) {
                int t = operand_tensor(op, xi);
                region_io(ss_graph_tensor(g, t), s->buf[t], &a->xr[xi], a->x[xi], 0);
            }
            ss_status st = kernel(x, 0, a, d);
            if (st != SS_OK)
                return st;
        }
        if (op->type == SS_OP_SOFTMAX_CE && ss_plan_config(s->p, o)->red > 1) {
            x->tensor = op->outputs[0];
            ss_status st = ce_combine(x, o, d);
            if (st != SS_OK)
                return st;
        }
        for (int k = 0; k < op->n_out; k++) {
            int t = op->outputs[k];
            const ss_tensor *T = ss_graph_tensor(g, t);
            if (T->dtype != SS_F32)
                return ss_diag_set(d, SS_ERR_UNSUPPORTED, "runtime: op %s outputs %s (not f32)",
                                   op->name, ss_dtype_name(T->dtype)),
                       SS_ERR_UNSUPPORTED;
            for (int i = s->op_off[o]; i < s->op_off[o + 1]; i++)
                if (!s->fwd_sum[t] || s->tiles[i].q == 0)
                    region_io(T, s->buf[t], &s->tiles[i].a.yr[k], s->tiles[i].a.y[k], 1);
            if (s->fwd_sum[t]) {
                x->tensor = t;
                ss_status st = allreduce(x, s->buf[t], s->vol[t], 0, d);
                if (st != SS_OK)
                    return st;
            }
        }
    }
    return SS_OK;
}

/* The update of weight t from its whole gradient: SGD, or Adam when the
 * moments exist. */
static void update(ss_rt_state *s, int t, double lr)
{
    float *w = s->buf[t], *gr = s->grad[t], l = (float)lr;
    if (!s->adam_m) {
        for (int64_t i = 0; i < s->vol[t]; i++)
            w[i] -= l * gr[i];
        return;
    }
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    double c1 = 1 - pow(b1, s->step), c2 = 1 - pow(b2, s->step);
    float *m = s->adam_m[t], *v = s->adam_v[t];
    for (int64_t i = 0; i < s->vol[t]; i++) {
        m[i] = (float)(b1 * m[i] + (1 - b1) * gr[i]);
        v[i] = (float)(b2 * v[i] + (1 - b2) * (double)gr[i] * gr[i]);
        w[i] -= (float)(lr * (m[i] / c1) / (sqrt(v[i] / c2) + eps));
    }
}

static ss_status backward(iter_ctx *x, double lr, ss_diag *d)
{
    ss_rt_state *s = x->s;
    const ss_graph *g = s->g;
    for (int t = 0; t < s->n_t; t++)
        if (s->grad[t])
            memset(s->grad[t], 0, (size_t)s->vol[t] * sizeof(float));
    for (int o = 0; o < s->n_ops; o++) { /* d(mean loss) */
        const ss_op *op = ss_graph_op(g, o);
        for (int k = 0; k < op->n_out; k++) {
            int t = op->outputs[k];
            if (op->type != SS_OP_INPUT && ss_graph_n_consumers(g, t) == 0 && s->grad[t])
                for (int64_t i = 0; i < s->vol[t]; i++)
                    s->grad[t][i] = (float)(1.0 / (double)s->vol[t]);
        }
    }
    for (int o = s->n_ops - 1; o >= 0; o--) {
        const ss_op *op = ss_graph_op(g, o);
        if (op->type == SS_OP_INPUT)
            continue;
        for (int k = 0; k < op->n_out; k++) {
            int t = op->outputs[k];
            if (s->bwd_sum[t] && ss_graph_n_consumers(g, t) > 0) {
                x->tensor = t;
                ss_status st = allreduce(x, s->grad[t], s->vol[t], 0, d);
                if (st != SS_OK)
                    return st;
            }
        }
        for (int i = s->op_off[o + 1] - 1; i >= s->op_off[o]; i--) {
            rt_tile *tl = &s->tiles[i];
            ss_kargs *a = &tl->a;
            x->op = o;
            x->tile = tl->idx;
            for (int k = 0; k < a->n_y; k++) {
                int t = op->outputs[k];
                region_io(ss_graph_tensor(g, t), s->grad[t], &a->yr[k], a->dy[k], 0);
            }
            ss_status st = kernel(x, 1, a, d);
            if (st != SS_OK)
                return st;
            for (int xi = 0; xi < a->n_x; xi++) {
                int t = operand_tensor(op, xi);
                if (!a->dx[xi] || !s->grad[t] || (s->bwd_sum[t] && tl->q))
                    continue;
                region_io(ss_graph_tensor(g, t), s->grad[t], &a->xr[xi], a->dx[xi], 1);
            }
        }
    }
    s->step++;
    for (int t = 0; t < s->n_t; t++) {
        if (!ss_graph_tensor(g, t)->is_weight)
            continue;
        if (s->bwd_sum[t]) {
            x->tensor = t;
            ss_status st = allreduce(x, s->grad[t], s->vol[t], 0, d);
            if (st != SS_OK)
                return st;
        }
        update(s, t, lr);
    }
    return SS_OK;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double loss_of(const ss_rt_state *s)
{
    double sum = 0;
    int64_t n = 0;
    for (int o = 0; o < s->n_ops; o++) {
        const ss_op *op = ss_graph_op(s->g, o);
        if (op->type != SS_OP_SOFTMAX_CE)
            continue;
        int t = op->outputs[0];
        const float *l = s->buf[t];
        for (int64_t i = 0; i < s->vol[t]; i++)
            sum += l[i];
        n += s->vol[t];
    }
    return n ? sum / (double)n : 0;
}

ss_status ss_rt_train(const ss_graph *g, const ss_plan *p, const ss_rt_config *cfg,
                      const ss_rt_comm *comm, ss_rt_state **out, ss_rt_result *r, ss_diag *d)
{
    *out = NULL;
    memset(r, 0, sizeof *r);
    if (cfg->iterations < 1 || cfg->warmup < 0 || !(cfg->lr > 0))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "runtime: iterations must be >= 1, warmup >= 0 and lr > 0"),
               SS_ERR_INVALID;
    ss_rt_state *s = calloc(1, sizeof *s);
    if (!s)
        return nomem(d);
    s->g = g;
    s->p = p;
    s->rank = comm->rank;
    s->size = comm->size;
    ss_status st = setup(s, cfg->seed, d);
    if (st == SS_OK && cfg->adam) {
        s->adam_m = calloc((size_t)s->n_t, sizeof *s->adam_m);
        s->adam_v = calloc((size_t)s->n_t, sizeof *s->adam_v);
        if (!s->adam_m || !s->adam_v)
            st = nomem(d);
        for (int t = 0; st == SS_OK && t < s->n_t; t++)
            if (ss_graph_tensor(g, t)->is_weight &&
                (!(s->adam_m[t] = zalloc((size_t)s->vol[t] * sizeof(float))) ||
                 !(s->adam_v[t] = zalloc((size_t)s->vol[t] * sizeof(float)))))
                st = nomem(d);
    }
    r->n_iter = cfg->warmup + cfg->iterations;
    r->loss = calloc((size_t)r->n_iter, sizeof *r->loss);
    r->iter_ms = calloc((size_t)r->n_iter, sizeof *r->iter_ms);
    double *parts = calloc((size_t)r->n_iter * 3, sizeof *parts);
    if (st == SS_OK && (!r->loss || !r->iter_ms || !parts))
        st = nomem(d);
    iter_ctx x = {s, comm, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1};
    for (int it = 0; st == SS_OK && it < r->n_iter; it++) {
        x.nred = 0;
        x.bytes = 0;
        x.comp_ms = x.comp_cpu_ms = x.comm_ms = 0;
        x.trace = cfg->trace && it == r->n_iter - 1;
        if ((st = comm->barrier(comm->ctx, d)) != SS_OK)
            break;
        double t0 = now_ms();
        x.t0 = t0;
        if ((st = forward(&x, d)) != SS_OK || (st = backward(&x, cfg->lr, d)) != SS_OK)
            break;
        double ms[2] = {now_ms() - t0, 0};
        r->loss[it] = loss_of(s);
        if ((st = comm->allreduce_f64(comm->ctx, ms, 1, 1, d)) != SS_OK)
            break;
        r->iter_ms[it] = ms[0];
        parts[3 * it] = x.comp_ms;
        parts[3 * it + 1] = x.comp_cpu_ms;
        parts[3 * it + 2] = x.comm_ms;
    }
    if (st != SS_OK) {
        free(parts);
        ss_rt_free(s);
        ss_rt_result_clear(r);
        return st;
    }
    double *m = malloc((size_t)cfg->iterations * sizeof *m);
    if (!m) {
        free(parts);
        ss_rt_free(s);
        ss_rt_result_clear(r);
        return nomem(d);
    }
    memcpy(m, r->iter_ms + cfg->warmup, (size_t)cfg->iterations * sizeof *m);
    qsort(m, (size_t)cfg->iterations, sizeof *m, cmp_dbl);
    int n = cfg->iterations;
    r->measured_ms = n % 2 ? m[n / 2] : 0.5 * (m[n / 2 - 1] + m[n / 2]);
    double *out3[3] = {&r->compute_ms, &r->compute_cpu_ms, &r->comm_ms};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < n; i++)
            m[i] = parts[3 * (cfg->warmup + i) + k];
        qsort(m, (size_t)n, sizeof *m, cmp_dbl);
        *out3[k] = n % 2 ? m[n / 2] : 0.5 * (m[n / 2 - 1] + m[n / 2]);
    }
    free(parts);
    free(m);
    r->allreduces = x.nred;
    r->allreduce_bytes = x.bytes;
    r->my_tiles = s->n_tiles;
    *out = s;
    return SS_OK;
}

/* ------------------------------------------------------------ trace */

ss_status ss_rt_trace_events(const ss_rt_state *s, char **out, ss_diag *d)
{
    size_t cap = (size_t)s->n_ev * (2 * SS_NAME_MAX + 200) + 1, n = 0;
    char *b = ss_malloc(cap);
    if (!b)
        return nomem(d);
    b[0] = 0;
    static const char *kinds[] = {"fwd", "bwd", "allreduce"};
    for (int i = 0; i < s->n_ev; i++) {
        const rt_event *e = &s->ev[i];
        char name[2 * SS_NAME_MAX + 32];
        if (e->kind < 2)
            snprintf(name, sizeof name, "%s %s t%d", kinds[e->kind], ss_graph_op(s->g, e->op)->name,
                     e->tile);
        else
            snprintf(name, sizeof name, "allreduce %s", ss_graph_tensor(s->g, e->tensor)->name);
        for (char *c = name; *c; c++)
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 32)
                *c = '_';
        n += (size_t)snprintf(b + n, cap - n,
                              "%s{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, "
                              "\"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"bytes\": %.0f}}",
                              i ? ",\n" : "", name, kinds[e->kind], s->rank, e->kind == 2, e->ts,
                              e->dur, e->bytes);
    }
    *out = b;
    return SS_OK;
}

/* ------------------------------------------------------------ numerics */

typedef struct diff_ctx {
    const float *a, *b;
    double maxdiff;
} diff_ctx;

static void diff_row(void *c, int64_t toff, int64_t roff, int64_t len)
{
    diff_ctx *x = c;
    (void)roff;
    for (int64_t i = 0; i < len; i++) {
        double v = fabs((double)x->a[toff + i] - (double)x->b[toff + i]);
        x->maxdiff = v > x->maxdiff ? v : x->maxdiff;
    }
}

double ss_rt_weight_diff(const ss_rt_state *s, const ss_rt_state *ref, const char **worst)
{
    double worst_v = 0;
    *worst = NULL;
    for (int i = 0; i < s->n_tiles; i++) {
        const rt_tile *tl = &s->tiles[i];
        const ss_op *op = ss_graph_op(s->g, tl->op);
        for (int w = 0; w < op->n_w; w++) {
            int t = op->weights[w];
            const ss_tensor *T = ss_graph_tensor(s->g, t);
            const float *b = ref->buf[t];
            double mag = 0;
            for (int64_t e = 0; e < ref->vol[t]; e++)
                mag = fabs((double)b[e]) > mag ? fabs((double)b[e]) : mag;
            diff_ctx c = {s->buf[t], b, 0};
            walk(T->shape, T->ndim, &tl->a.xr[op->n_in + w], diff_row, &c);
            double rel = c.maxdiff / (mag > 0 ? mag : 1);
            if (rel > worst_v || !*worst) {
                worst_v = rel > worst_v ? rel : worst_v;
                if (rel >= worst_v)
                    *worst = T->name;
            }
        }
    }
    return worst_v;
}
