/*
 * exec.c — the runtime's executor (exec.h): per rank, the tasks the
 * simulator scheduled on the rank's device, in simulated order, with the CPU
 * kernels over full-size tensor buffers, and the transfers and collectives
 * the task graph names through ss_rt_comm.
 *
 * Invariant: a task runs only after every task it depends on in the graph
 * has run on every rank involved (its rank's list is ordered by simulated
 * start, and the data it reads arrives through the transfer or collective
 * tasks ordered before it); the buffers then hold, over the regions a task
 * reads, the value (or gradient) a one-process run holds there.
 */
#include "runtime/exec.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/kernels.h"
#include "simulator/build.h"
#include "simulator/engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct rt_event {
    int task, tid;
    double ts, dur, bytes;
} rt_event;

typedef struct rt_tile {
    int op, idx, q, r; /* op id, tile index, replica, reduction slice */
    int late;          /* reorder_backward: a deferred weight-gradient task (aux 1) lays
                          back the weight gradients its backward task computed */
    int fwd;           /* its forward task is taken (a second one is synced flags' next
                          iteration's forward, which runs in the next iteration) */
    ss_kargs a;        /* host buffers (the CPU kernels run on them) */
    ss_kargs da;       /* CUDA: the same tile's GPU buffers (op NULL on the CPU) */
} rt_tile;

struct ss_rt_state {
    const ss_graph *g;
    const ss_plan *p;
    int rank, size, n_t, n_ops;
    void **buf;     /* [n_t] full tensor values */
    float **grad;   /* [n_t] gradients (float tensors; NULL otherwise) */
    int64_t *vol;   /* [n_t] elements */
    rt_tile *tiles; /* this rank's tiles, by op then index */
    int n_tiles, *op_off; /* [n_ops + 1] */
    float **adam_m, **adam_v; /* [n_t] Adam moments of the weights (NULL: SGD) */
    /* the schedule */
    ss_builder *b;
    ss_taskgraph *tg;
    ss_build_descs ds;
    int *mine, n_mine;   /* this rank's tasks in simulated order */
    double *sim_start, *sim_dur; /* [n_tasks] the simulated start and duration (us) */
    int *task_tile;      /* [n_tasks] FWD/BWD task -> index in tiles, -1 */
    char *combine_after; /* [n_tasks] FWD task after which a one-device split loss combines */
    float *scratch;      /* packing buffer of transfers and collectives */
    int64_t cap_scratch;
    float *ce_m, *ce_s;  /* scratch of the split loss */
    int64_t cap_ce;
    struct rt_event *ev; /* the traced iteration's events */
    int n_ev, cap_ev;
    int step;            /* updates done (Adam's bias correction) */
    int cuda, device;    /* CUDA kernels on GPU `device` */
};

/* ------------------------------------------------------------ comm self */

static ss_status self_f32(void *c, const int *ranks, int n, float *b, int64_t cnt, int op,
                          ss_diag *d)
{
    (void)c, (void)ranks, (void)n, (void)b, (void)cnt, (void)op, (void)d;
    return SS_OK;
}
static ss_status self_f64(void *c, double *b, int64_t n, int op, ss_diag *d)
{
    (void)c, (void)b, (void)n, (void)op, (void)d;
    return SS_OK;
}
static ss_status self_p2p(void *c, int peer, const float *b, int64_t n, ss_diag *d)
{
    (void)c, (void)b, (void)n;
    return ss_diag_set(d, SS_ERR_INVALID, "runtime: one process has no peer rank %d", peer);
}
static ss_status self_recv(void *c, int peer, float *b, int64_t n, ss_diag *d)
{
    return self_p2p(c, peer, b, n, d);
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
    c->send_f32 = self_p2p;
    c->recv_f32 = self_recv;
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
    int mode; /* 0 gather, 1 scatter-add f32, 2 scatter-max f32, 3 scatter, 4 zero */
} copy_ctx;

static void copy_row(void *c, int64_t toff, int64_t roff, int64_t len)
{
    copy_ctx *x = c;
    if (x->mode == 0) {
        memcpy(x->dense + (size_t)roff * x->es, x->t + (size_t)toff * x->es, (size_t)len * x->es);
        return;
    }
    if (x->mode == 3) {
        memcpy(x->t + (size_t)toff * x->es, x->dense + (size_t)roff * x->es, (size_t)len * x->es);
        return;
    }
    if (x->mode == 4) {
        memset(x->t + (size_t)toff * x->es, 0, (size_t)len * x->es);
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
    if (t->da.op)
        ss_kernel_release(&t->da, SS_BACKEND_CUDA);
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
        free(s->adam_m ? s->adam_m[t] : NULL);
        free(s->adam_v ? s->adam_v[t] : NULL);
    }
    free(s->buf);
    free(s->grad);
    free(s->vol);
    free(s->tiles);
    free(s->op_off);
    free(s->adam_m);
    free(s->adam_v);
    ss_build_descs_clear(&s->ds);
    ss_build_free(s->b);
    ss_taskgraph_free(s->tg);
    free(s->mine);
    free(s->sim_start);
    free(s->sim_dur);
    free(s->task_tile);
    free(s->combine_after);
    free(s->scratch);
    free(s->ce_m);
    free(s->ce_s);
    ss_free(s->ev);
    free(s);
}

void ss_rt_result_clear(ss_rt_result *r)
{
    free(r->loss);
    free(r->iter_ms);
    free(r->cls_tasks);
    free(r->cls_ms);
    free(r->cls_cpu_ms);
    free(r->cls_pred_ms);
    memset(r, 0, sizeof *r);
}

static ss_status nomem(ss_diag *d)
{
    ss_diag_set(d, SS_ERR_NOMEM, "runtime: out of memory");
    return SS_ERR_NOMEM;
}

/* Buffers of every tensor (inputs and weights filled from the seed) and the
 * kernel arguments of this rank's tiles. */
static ss_status setup(ss_rt_state *s, uint64_t seed, int adam, ss_diag *d)
{
    const ss_graph *g = s->g;
    if (s->cuda) {
        int n = ss_kernel_device_count(SS_BACKEND_CUDA);
        if (!ss_cuda_built())
            return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                               "runtime: --backend cuda: this build has no CUDA kernels "
                               "(no CUDA toolkit or nvcc when it was configured)"),
                   SS_ERR_UNSUPPORTED;
        if (n <= 0)
            return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                               "runtime: --backend cuda: no CUDA GPU on rank %d "
                               "(cudaGetDeviceCount failed or found none)",
                               s->rank),
                   SS_ERR_UNSUPPORTED;
        if (s->device < 0)
            s->device = s->rank % n;
        if (s->device >= n)
            return ss_diag_set(d, SS_ERR_INVALID, "runtime: GPU %d asked for, %d present",
                               s->device, n),
                   SS_ERR_INVALID;
    }
    s->n_t = ss_graph_n_tensors(g);
    s->n_ops = ss_graph_n_ops(g);
    s->buf = calloc((size_t)s->n_t, sizeof *s->buf);
    s->grad = calloc((size_t)s->n_t, sizeof *s->grad);
    s->vol = calloc((size_t)s->n_t, sizeof *s->vol);
    s->op_off = calloc((size_t)s->n_ops + 1, sizeof *s->op_off);
    if (!s->buf || !s->grad || !s->vol || !s->op_off)
        return nomem(d);
    if (adam && (!(s->adam_m = calloc((size_t)s->n_t, sizeof *s->adam_m)) ||
                 !(s->adam_v = calloc((size_t)s->n_t, sizeof *s->adam_v))))
        return nomem(d);
    for (int t = 0; t < s->n_t; t++) {
        const ss_tensor *T = ss_graph_tensor(g, t);
        s->vol[t] = tvol(T);
        if (T->dtype != SS_F32 && T->dtype != SS_I32 && T->dtype != SS_I64)
            return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                               "runtime: tensor %s is %s; the CPU runtime runs fp32 models "
                               "(zoo transformers: precision=fp32)",
                               T->name, ss_dtype_name(T->dtype)),
                   SS_ERR_UNSUPPORTED;
        if (!(s->buf[t] = zalloc((size_t)s->vol[t] * ss_dtype_size(T->dtype))))
            return nomem(d);
        if (T->dtype == SS_F32 && !(s->grad[t] = zalloc((size_t)s->vol[t] * sizeof(float))))
            return nomem(d);
        if (T->is_weight || (T->producer >= 0 && ss_graph_op(g, T->producer)->type == SS_OP_INPUT))
            fill(g, t, s->buf[t], seed);
        if (adam && T->is_weight &&
            (!(s->adam_m[t] = zalloc((size_t)s->vol[t] * sizeof(float))) ||
             !(s->adam_v[t] = zalloc((size_t)s->vol[t] * sizeof(float)))))
            return nomem(d);
    }
    int cap = 0;
    for (int o = 0; o < s->n_ops; o++) {
        const ss_pconfig *c = ss_plan_config(s->p, o);
        for (int i = 0; i < c->ntiles; i++)
            if (c->devices[i] >= s->size)
                return ss_diag_set(d, SS_ERR_INVALID,
                                   "runtime: op %s runs on device %d but only %d ranks run "
                                   "(mpirun -np N, one rank per device)",
                                   ss_graph_op(g, o)->name, c->devices[i], s->size),
                       SS_ERR_INVALID;
        cap += c->ntiles;
    }
    if (!(s->tiles = calloc((size_t)cap + 1, sizeof *s->tiles)))
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
                if (!(a->x[x] = zalloc(b)) || (a->xt[x] == SS_F32 && !(a->dx[x] = zalloc(b))))
                    return nomem(d);
            }
            for (int k = 0; k < a->n_y; k++) {
                size_t b = ss_kernel_y_bytes(a, k);
                if (a->yt[k] != SS_F32)
                    return ss_diag_set(d, SS_ERR_UNSUPPORTED, "runtime: op %s outputs %s (not f32)",
                                       op->name, ss_dtype_name(a->yt[k])),
                           SS_ERR_UNSUPPORTED;
                if (!(a->y[k] = zalloc(b)) || !(a->dy[k] = zalloc(b)))
                    return nomem(d);
            }
            if (!(a->saved = zalloc(a->saved_bytes)) || !(a->work = zalloc(a->work_bytes)))
                return nomem(d);
            if (s->cuda) {
                if (op->type == SS_OP_SOFTMAX_CE && c->red > 1)
                    return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                                       "runtime: op %s splits the loss's vocabulary; the CUDA "
                                       "runtime does not combine split losses yet",
                                       op->name),
                           SS_ERR_UNSUPPORTED;
                if ((st = ss_kernel_setup(&t->da, SS_BACKEND_CUDA, g, op, &tl, d)) != SS_OK)
                    return st;
                if ((st = ss_kernel_alloc(&t->da, SS_BACKEND_CUDA, s->device, a->seed, d)) !=
                    SS_OK) {
                    t->da.op = NULL;
                    return st;
                }
            }
        }
    }
    s->op_off[s->n_ops] = s->n_tiles;
    return SS_OK;
}

/* ------------------------------------------------------------ schedule */

typedef struct okey {
    double start, end;
    int task;
} okey;

static int cmp_okey(const void *pa, const void *pb)
{
    const okey *a = pa, *b = pb;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return (a->task > b->task) - (a->task < b->task);
}

static int in_group(const ss_build_descs *x, const ss_build_desc *e, int dev)
{
    for (int i = 0; i < e->n_dev; i++)
        if (x->devs[e->dev_off + i] == dev)
            return 1;
    return 0;
}

static int local_tile(const ss_rt_state *s, int op, int idx)
{
    for (int i = s->op_off[op]; i < s->op_off[op + 1]; i++)
        if (s->tiles[i].idx == idx)
            return i;
    return -1;
}

/* The backward of a vocabulary-split cross-entropy tile reads the combined
 * log-sum-exp, so it waits for its unit's partial-sum collective (the
 * builder's graph lets it start after its own forward: the runtime adds
 * the edge, and simulates the graph with it). */
static ss_status loss_deps(ss_rt_state *s, ss_diag *d)
{
    ss_taskgraph *tg = s->tg;
    int added = 0;
    for (int c = 0; c < tg->n_tasks; c++) {
        if (tg->kind[c] != SS_TASK_COLLECTIVE || tg->aux[c] != SS_BUILD_COLL_PARTIAL ||
            ss_graph_op(s->g, tg->op[c])->type != SS_OP_SOFTMAX_CE)
            continue;
        int red = ss_plan_config(s->p, tg->op[c])->red;
        for (int t = 0; t < tg->n_tasks; t++)
            if (tg->kind[t] == SS_TASK_BWD && tg->op[t] == tg->op[c] &&
                tg->tile[t] / red == tg->tile[c]) {
                if (ss_taskgraph_add_dep(tg, c, t, d) != SS_OK)
                    return d->status;
                added = 1;
            }
    }
    return added ? ss_taskgraph_finalize(tg, d) : SS_OK;
}

/* Build the plan's task graph with the simulator's builder, simulate it,
 * and keep this rank's tasks in simulated order. */
static ss_status schedule(ss_rt_state *s, const ss_machine *m, ss_costmodel *cm, ss_rt_result *r,
                          ss_diag *d)
{
    ss_memory *mm = ss_memory_new();
    ss_engine *e = ss_engine_new();
    s->b = ss_build_new(s->g, m, cm);
    s->tg = ss_taskgraph_new(0, 0);
    ss_status st = SS_OK;
    okey *keys = NULL;
    if (!mm || !e || !s->b || !s->tg) {
        st = nomem(d);
        goto out;
    }
    if ((st = ss_build_run(s->b, s->p, s->tg, mm, d)) != SS_OK ||
        (st = loss_deps(s, d)) != SS_OK)
        goto out;
    ss_engine_config ec = {.policy = ss_build_policy(s->b)};
    if ((st = ss_engine_run(e, s->tg, &ec, d)) != SS_OK ||
        (st = ss_build_describe(s->b, s->tg, &s->ds, d)) != SS_OK)
        goto out;
    const ss_engine_result *er = ss_engine_result_of(e);
    const ss_taskgraph *tg = s->tg;
    int n = tg->n_tasks, me = s->rank;
    r->predicted_ms = er->makespan / 1e3;
    /* its kernels and updates (the compute stream's busy time also holds the
     * communication of a device that moves its own messages) */
    r->predicted_compute_ms = 0;
    for (int t = 0; t < n; t++)
        if (s->ds.t[t].dev == me && (tg->kind[t] == SS_TASK_FWD || tg->kind[t] == SS_TASK_BWD ||
                                     tg->kind[t] == SS_TASK_UPDATE))
            r->predicted_compute_ms += tg->dur[t] / 1e3;
    r->predicted_comm_ms = me < er->n_devices ? er->comm_us[me] / 1e3 : 0;
    keys = malloc((size_t)(n + 1) * sizeof *keys);
    s->mine = malloc((size_t)(n + 1) * sizeof *s->mine);
    s->task_tile = malloc((size_t)(n + 1) * sizeof *s->task_tile);
    s->combine_after = calloc((size_t)n + 1, 1);
    s->sim_start = malloc((size_t)(n + 1) * sizeof *s->sim_start);
    s->sim_dur = malloc((size_t)(n + 1) * sizeof *s->sim_dur);
    if (!keys || !s->mine || !s->task_tile || !s->combine_after || !s->sim_start ||
        !s->sim_dur) {
        st = nomem(d);
        goto out;
    }
    for (int t = 0; t < n; t++) {
        s->sim_start[t] = er->start[t];
        s->sim_dur[t] = er->end[t] - er->start[t];
    }
    int nk = 0;
    for (int t = 0; t < n; t++) {
        const ss_build_desc *x = &s->ds.t[t];
        int k = tg->kind[t], take = 0;
        s->task_tile[t] = -1;
        if (k == SS_TASK_FWD || k == SS_TASK_BWD) {
            take = x->dev == me && ss_graph_op(s->g, tg->op[t])->type != SS_OP_INPUT;
            if (take && (s->task_tile[t] = local_tile(s, tg->op[t], tg->tile[t])) < 0) {
                st = ss_diag_set(d, SS_ERR_INVALID, "runtime: task %d names no tile of rank %d",
                                 t, me);
                goto out;
            }
            if (take && k == SS_TASK_BWD && tg->aux[t] == 1)
                s->tiles[s->task_tile[t]].late = 1;
            if (take && k == SS_TASK_FWD && s->tiles[s->task_tile[t]].fwd++) {
                take = 0; /* iterations run one after another: not twice */
                s->task_tile[t] = -1;
            }
        } else if (k == SS_TASK_UPDATE) {
            take = x->dev == me;
        } else if (k == SS_TASK_XFER) {
            if (x->parts > 1) {
                st = ss_diag_set(d, SS_ERR_UNSUPPORTED,
                                 "runtime: the plan's scatter-gather pipeline sends (op %s) are "
                                 "not executed yet",
                                 ss_graph_op(s->g, tg->op[t])->name);
                goto out;
            }
            take = x->src == me || x->dst == me;
        } else if (k == SS_TASK_COLLECTIVE) {
            if (x->coll == SS_BUILD_COLL_SENDGATHER) {
                st = ss_diag_set(d, SS_ERR_UNSUPPORTED,
                                 "runtime: the plan's scatter-gather pipeline sends are not "
                                 "executed yet");
                goto out;
            }
            take = in_group(&s->ds, x, me);
        }
        if (take)
            keys[nk++] = (okey){er->start[t], er->end[t], t};
    }
    qsort(keys, (size_t)nk, sizeof *keys, cmp_okey);
    for (int i = 0; i < nk; i++)
        s->mine[i] = keys[i].task;
    s->n_mine = nk;
    /* a vocabulary-split loss whose unit sits on this device alone combines
     * after the last of its tiles here (no collective does it) */
    for (int i = nk - 1; i >= 0; i--) {
        int t = s->mine[i];
        if (tg->kind[t] != SS_TASK_FWD)
            continue;
        const ss_op *op = ss_graph_op(s->g, tg->op[t]);
        const ss_pconfig *c = ss_plan_config(s->p, op->id);
        if (op->type != SS_OP_SOFTMAX_CE || c->red == 1)
            continue;
        int first = tg->tile[t] - tg->tile[t] % c->red, alone = 1, later = 0;
        for (int j = first; j < first + c->red; j++)
            alone &= c->devices[j] == me;
        for (int j = i + 1; j < nk && alone && !later; j++)
            later = tg->kind[s->mine[j]] == SS_TASK_FWD && tg->op[s->mine[j]] == op->id &&
                    tg->tile[s->mine[j]] >= first && tg->tile[s->mine[j]] < first + c->red;
        s->combine_after[t] = (char)(alone && !later);
    }
out:
    free(keys);
    ss_engine_free(e);
    ss_memory_free(mm);
    return st;
}
/* ------------------------------------------------------------ one iteration */

static int operand_tensor(const ss_op *op, int i)
{
    return i < op->n_in ? op->inputs[i] : op->weights[i - op->n_in];
}

typedef struct iter_ctx {
    ss_rt_state *s;
    const ss_rt_comm *c;
    double lr;
    int64_t ncoll, nxfer;
    double bytes;
    double comp_ms, comp_cpu_ms, comm_ms; /* this iteration: kernels (wall, CPU), communication */
    int trace;  /* record events in s->ev (the last iteration) */
    double t0;  /* iteration start (ms) */
    ss_rt_result *r; /* per-class sums of the last iteration */
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

static int task_class(const ss_rt_state *s, int task)
{
    int k = s->tg->kind[task];
    int t = k == SS_TASK_FWD || k == SS_TASK_BWD ? (int)ss_graph_op(s->g, s->tg->op[task])->type : 0;
    return k * SS_OP_TYPE_COUNT + t;
}

void ss_rt_class_name(int c, char *buf, size_t n)
{
    int k = c / SS_OP_TYPE_COUNT, t = c % SS_OP_TYPE_COUNT;
    if (k == SS_TASK_FWD || k == SS_TASK_BWD)
        snprintf(buf, n, "%s %s", ss_task_kind_name((ss_task_kind)k), ss_op_type_name((ss_op_type)t));
    else
        snprintf(buf, n, "%s", ss_task_kind_name((ss_task_kind)k));
}

/* Record a task of the last iteration: its class's sums, and its trace
 * event when tracing (allocation failure: the event is dropped). */
static void record(iter_ctx *x, int task, int tid, double w0, double w1, double bytes)
{
    ss_rt_state *s = x->s;
    if (x->r && x->r->cls_ms) {
        x->r->cls_ms[task_class(s, task)] += w1 - w0;
        if (tid == 1) /* communication: its CPU time is its wall time's spin */
            x->r->cls_cpu_ms[task_class(s, task)] += w1 - w0;
    }
    if (!x->trace || ss_grow((void **)&s->ev, &s->cap_ev, s->n_ev + 1, sizeof *s->ev))
        return;
    s->ev[s->n_ev++] = (rt_event){task, tid, (w0 - x->t0) * 1e3, (w1 - w0) * 1e3, bytes};
}

static ss_status grow_scratch(ss_rt_state *s, int64_t n, ss_diag *d)
{
    if (n <= s->cap_scratch)
        return SS_OK;
    float *p = realloc(s->scratch, (size_t)n * sizeof(float));
    if (!p)
        return nomem(d);
    s->scratch = p;
    s->cap_scratch = n;
    return SS_OK;
}

/* Reductions over a group of devices (ranks); one member: nothing. */
static ss_status group_reduce(iter_ctx *x, const int *devs, int n, float *b, int64_t cnt, int op,
                              ss_diag *d)
{
    if (n < 2 || cnt == 0)
        return SS_OK;
    x->bytes += (double)cnt * sizeof(float);
    return x->c->allreduce_f32(x->c->ctx, devs, n, b, cnt, op, d);
}

/* Vocabulary-split cross-entropy, unit of tiles first .. first + red - 1 of
 * op o over group devs[0..n): combine the shards' log-sum-exp of every row
 * (max, then sum of exp), correct the local partial losses in the loss
 * buffer and keep the global lse for the backward, then sum the partial
 * losses over the group. */
static ss_status ce_combine(iter_ctx *x, int o, int first, int red, const int *devs, int n,
                            ss_diag *d)
{
    ss_rt_state *s = x->s;
    const ss_op *op = ss_graph_op(s->g, o);
    int t = op->outputs[0];
    const ss_tensor *T = ss_graph_tensor(s->g, t);
    rt_tile *loc[64];
    int nl = 0;
    for (int j = first; j < first + red; j++) {
        int i = local_tile(s, o, j);
        if (i >= 0 && nl == 64)
            return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                               "runtime: op %s: more than 64 vocabulary shards on one rank",
                               op->name),
                   SS_ERR_UNSUPPORTED;
        if (i >= 0)
            loc[nl++] = &s->tiles[i];
    }
    if (nl == 0)
        return SS_OK;
    const ss_region *R = &loc[0]->a.yr[0];
    int64_t rows = ss_region_volume(R);
    if (rows > s->cap_ce) {
        float *m = realloc(s->ce_m, (size_t)rows * sizeof(float));
        if (m)
            s->ce_m = m;
        float *v = realloc(s->ce_s, (size_t)rows * sizeof(float));
        if (v)
            s->ce_s = v;
        if (!m || !v)
            return nomem(d);
        s->cap_ce = rows;
    }
    float *gm = s->ce_m, *gs = s->ce_s;
    for (int64_t i = 0; i < rows; i++) {
        gm[i] = -INFINITY;
        gs[i] = 0;
    }
    for (int k = 0; k < nl; k++) {
        const float *lse = loc[k]->a.saved;
        for (int64_t i = 0; i < rows; i++)
            gm[i] = lse[i] > gm[i] ? lse[i] : gm[i];
    }
    ss_status st = group_reduce(x, devs, n, gm, rows, 1, d);
    if (st != SS_OK)
        return st;
    for (int k = 0; k < nl; k++) {
        const float *lse = loc[k]->a.saved;
        for (int64_t i = 0; i < rows; i++)
            gs[i] += expf(lse[i] - gm[i]);
    }
    if ((st = group_reduce(x, devs, n, gs, rows, 0, d)) != SS_OK)
        return st;
    if ((st = grow_scratch(s, rows, d)) != SS_OK)
        return st;
    for (int k = 0; k < nl; k++) {
        float *lse = loc[k]->a.saved, *y = loc[k]->a.y[0], *delta = s->scratch;
        for (int64_t i = 0; i < rows; i++) {
            float G = gm[i] + logf(gs[i]);
            delta[i] = -lse[i] + (loc[k]->r == 0 ? G : 0.0f);
            y[i] += delta[i];
            lse[i] = G;
        }
        region_io(T, s->buf[t], R, delta, 1);
    }
    if (n < 2)
        return SS_OK;
    region_io(T, s->buf[t], R, s->scratch, 0);
    if ((st = group_reduce(x, devs, n, s->scratch, rows, 0, d)) != SS_OK)
        return st;
    region_io(T, s->buf[t], R, s->scratch, 3);
    return SS_OK;
}

/* A tile's forward (bwd 0) or backward kernel on the host buffers: the CPU
 * kernel, or the CUDA kernel on the tile's GPU buffers with its inputs
 * (operands; output gradients) uploaded before and its results (outputs;
 * operand gradients) downloaded after. */
static ss_status kernel_call(ss_rt_state *s, rt_tile *tl, int bwd, ss_diag *d)
{
    ss_kargs *a = &tl->a, *g = &tl->da;
    if (!s->cuda)
        return bwd ? ss_kernel_backward(SS_BACKEND_CPU, a, d)
                   : ss_kernel_forward(SS_BACKEND_CPU, a, d);
    int bad = 0;
    if (!bwd)
        for (int i = 0; i < a->n_x && !bad; i++)
            bad = ss_cuda_upload(g->x[i], a->x[i], ss_kernel_x_bytes(a, i));
    else
        for (int k = 0; k < a->n_y && !bad; k++)
            bad = ss_cuda_upload(g->dy[k], a->dy[k], ss_kernel_y_bytes(a, k));
    if (bad)
        return ss_diag_set(d, SS_ERR_IO, "runtime: copy to GPU %d failed", s->device);
    ss_status st = bwd ? ss_kernel_backward(SS_BACKEND_CUDA, g, d)
                       : ss_kernel_forward(SS_BACKEND_CUDA, g, d);
    if (st != SS_OK || (st = ss_kernel_sync(SS_BACKEND_CUDA, g, d)) != SS_OK)
        return st;
    if (!bwd)
        for (int k = 0; k < a->n_y && !bad; k++)
            bad = ss_cuda_download(a->y[k], g->y[k], ss_kernel_y_bytes(a, k));
    else
        for (int i = 0; i < a->n_x && !bad; i++)
            bad = a->dx[i] && ss_cuda_download(a->dx[i], g->dx[i], ss_kernel_x_bytes(a, i));
    return bad ? ss_diag_set(d, SS_ERR_IO, "runtime: copy from GPU %d failed", s->device)
               : SS_OK;
}

static ss_status run_compute(iter_ctx *x, int task, ss_diag *d)
{
    ss_rt_state *s = x->s;
    const ss_taskgraph *tg = s->tg;
    rt_tile *tl = &s->tiles[s->task_tile[task]];
    ss_kargs *a = &tl->a;
    const ss_op *op = ss_graph_op(s->g, tl->op);
    int red = ss_plan_config(s->p, tl->op)->red;
    double w0 = now_ms(), c0 = cpu_ms();
    ss_status st;
    if (tg->kind[task] == SS_TASK_FWD) {
        for (int xi = 0; xi < a->n_x; xi++) {
            int t = operand_tensor(op, xi);
            region_io(ss_graph_tensor(s->g, t), s->buf[t], &a->xr[xi], a->x[xi], 0);
        }
        if ((st = kernel_call(s, tl, 0, d)) != SS_OK)
            return st;
        for (int k = 0; k < a->n_y; k++) {
            int t = op->outputs[k];
            region_io(ss_graph_tensor(s->g, t), s->buf[t], &a->yr[k], a->y[k], red > 1 ? 1 : 3);
        }
    } else {
        /* a reordered tile's backward lays back its input gradients and its
         * deferred weight-gradient task (aux 1) the weight gradients, which
         * the backward kernel computed (the patent's split of one backward) */
        int late = tg->aux[task] == 1;
        for (int k = 0; k < a->n_y && !late; k++) {
            int t = op->outputs[k];
            region_io(ss_graph_tensor(s->g, t), s->grad[t], &a->yr[k], a->dy[k], 0);
        }
        if (!late && (st = kernel_call(s, tl, 1, d)) != SS_OK)
            return st;
        for (int xi = 0; xi < a->n_x; xi++) {
            int t = operand_tensor(op, xi);
            if (!a->dx[xi] || !s->grad[t] || (xi >= op->n_in && tl->q > 0))
                continue; /* a weight's gradient counts replica 0 only */
            if (tl->late && (xi >= op->n_in) != late)
                continue;
            region_io(ss_graph_tensor(s->g, t), s->grad[t], &a->xr[xi], a->dx[xi], 1);
        }
    }
    double c1 = cpu_ms() - c0;
    x->comp_cpu_ms += c1;
    if (x->r && x->r->cls_cpu_ms)
        x->r->cls_cpu_ms[task_class(s, task)] += c1;
    double w1 = now_ms();
    x->comp_ms += w1 - w0;
    record(x, task, 0, w0, w1, 0);
    if (s->combine_after[task]) {
        int first = tl->idx - tl->idx % red;
        return ce_combine(x, tl->op, first, red, &s->rank, 1, d);
    }
    return SS_OK;
}

typedef struct upd_ctx {
    ss_rt_state *s;
    int t;
    int64_t lo, hi, at; /* elements [lo, hi) of the region's row-major order */
    double lr, c1, c2;
} upd_ctx;

static void upd_row(void *c, int64_t toff, int64_t roff, int64_t len)
{
    upd_ctx *u = c;
    (void)roff;
    int64_t a = u->at, b = u->at + len;
    u->at = b;
    a = a > u->lo ? a : u->lo;
    b = b < u->hi ? b : u->hi;
    if (a >= b)
        return;
    toff += a - (u->at - len);
    len = b - a;
    float *w = (float *)u->s->buf[u->t] + toff, *g = u->s->grad[u->t] + toff;
    if (!u->s->adam_m) {
        float l = (float)u->lr;
        for (int64_t i = 0; i < len; i++)
            w[i] -= l * g[i];
        return;
    }
    float *m = u->s->adam_m[u->t] + toff, *v = u->s->adam_v[u->t] + toff;
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (int64_t i = 0; i < len; i++) {
        m[i] = (float)(b1 * m[i] + (1 - b1) * g[i]);
        v[i] = (float)(b2 * v[i] + (1 - b2) * (double)g[i] * g[i]);
        w[i] -= (float)(u->lr * (m[i] / u->c1) / (sqrt(v[i] / u->c2) + eps));
    }
}

/* Slice k of n of a region of vol elements (the distributed optimizer's). */
static void slice_of(int64_t vol, int k, int n, int64_t *lo, int64_t *hi)
{
    int64_t c = (vol + n - 1) / n;
    *lo = c * k < vol ? c * k : vol;
    *hi = c * (k + 1) < vol ? c * (k + 1) : vol;
}

static void run_update(iter_ctx *x, int task)
{
    ss_rt_state *s = x->s;
    const ss_build_desc *e = &s->ds.t[task];
    const ss_tensor *T = ss_graph_tensor(s->g, e->tensor);
    double w0 = now_ms(), c0 = cpu_ms();
    upd_ctx u = {s, e->tensor, 0, 0, 0, x->lr, 1 - pow(0.9, s->step), 1 - pow(0.999, s->step)};
    slice_of(ss_region_volume(&e->reg), e->split_k, e->split_n, &u.lo, &u.hi);
    walk(T->shape, T->ndim, &e->reg, upd_row, &u);
    double c1 = cpu_ms() - c0;
    x->comp_cpu_ms += c1;
    if (x->r && x->r->cls_cpu_ms)
        x->r->cls_cpu_ms[task_class(s, task)] += c1;
    double w1 = now_ms();
    x->comp_ms += w1 - w0;
    record(x, task, 0, w0, w1, 0);
}

static ss_status run_xfer(iter_ctx *x, int task, ss_diag *d)
{
    ss_rt_state *s = x->s;
    const ss_build_desc *e = &s->ds.t[task];
    const ss_tensor *T = ss_graph_tensor(s->g, e->tensor);
    void *src = e->grad ? (void *)s->grad[e->tensor] : s->buf[e->tensor];
    int64_t n = ss_region_volume(&e->reg);
    if (!src || T->dtype != SS_F32)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "runtime: a transfer of %s (%s) is not f32",
                           T->name, ss_dtype_name(T->dtype)),
               SS_ERR_UNSUPPORTED;
    ss_status st = grow_scratch(s, n, d);
    if (st != SS_OK)
        return st;
    double w0 = now_ms();
    if (e->src == s->rank) {
        region_io(T, src, &e->reg, s->scratch, 0);
        st = x->c->send_f32(x->c->ctx, e->dst, s->scratch, n, d);
    } else {
        if ((st = x->c->recv_f32(x->c->ctx, e->src, s->scratch, n, d)) == SS_OK)
            region_io(T, src, &e->reg, s->scratch, e->grad ? 1 : 3);
    }
    double w1 = now_ms();
    x->comm_ms += w1 - w0;
    x->nxfer++;
    x->bytes += (double)n * sizeof(float);
    record(x, task, 1, w0, w1, (double)n * sizeof(float));
    return st;
}

/* The element offset of region r in a tensor of shape sh (nd dims) when
 * its elements are contiguous there (dims before some k of extent 1, dims
 * after k whole), else -1. */
static int64_t contiguous_at(const int64_t *sh, int nd, const ss_region *r)
{
    int k = 0;
    while (k < nd - 1 && r->r[k].hi - r->r[k].lo == 1)
        k++;
    for (int j = k + 1; j < nd; j++)
        if (r->r[j].lo != 0 || r->r[j].hi != sh[j])
            return -1;
    int64_t off = 0;
    for (int j = 0; j < nd; j++)
        off = off * sh[j] + r->r[j].lo;
    return off;
}

/* A collective whose items are all contiguous f32 regions and not a gather:
 * its part summed in place, item by item (no packing: the bytes the
 * simulator prices, nothing more). *done 0 when it does not apply. */
static ss_status coll_in_place(iter_ctx *x, const ss_build_desc *e, const int *devs, int *done,
                               ss_diag *d)
{
    ss_rt_state *s = x->s;
    int64_t total = 0;
    *done = 0;
    if (e->gather)
        return SS_OK;
    for (int i = 0; i < e->n_item; i++) {
        const ss_build_item *it = &s->ds.items[e->item_off + i];
        const ss_tensor *T = ss_graph_tensor(s->g, it->tensor);
        void *b = e->grad ? (void *)s->grad[it->tensor] : s->buf[it->tensor];
        if (!b || T->dtype != SS_F32 || contiguous_at(T->shape, T->ndim, &it->reg) < 0)
            return SS_OK;
        total += ss_region_volume(&it->reg);
    }
    int64_t lo, hi, at = 0;
    slice_of(total, e->part, e->n_parts, &lo, &hi);
    for (int i = 0; i < e->n_item; i++) {
        const ss_build_item *it = &s->ds.items[e->item_off + i];
        const ss_tensor *T = ss_graph_tensor(s->g, it->tensor);
        float *b = e->grad ? s->grad[it->tensor] : (float *)s->buf[it->tensor];
        int64_t v = ss_region_volume(&it->reg), a = at > lo ? at : lo,
                z = at + v < hi ? at + v : hi;
        b += contiguous_at(T->shape, T->ndim, &it->reg);
        if (a < z) {
            ss_status st = group_reduce(x, devs, e->n_dev, b + (a - at), z - a, 0, d);
            if (st != SS_OK)
                return st;
        }
        at += v;
    }
    *done = 1;
    return SS_OK;
}

/* A collective: its items laid end to end, summed over the group (a split
 * bucket: its part), laid back (in place where coll_in_place applies). The
 * distributed optimizer's gather sums each member's updated slices (zeros
 * elsewhere). */
static ss_status run_coll(iter_ctx *x, int task, ss_diag *d)
{
    ss_rt_state *s = x->s;
    const ss_build_desc *e = &s->ds.t[task];
    const int *devs = s->ds.devs + e->dev_off;
    double w0 = now_ms();
    ss_status st = SS_OK;
    int done = 0;
    const ss_op *op = e->unit >= 0 ? ss_graph_op(s->g, s->tg->op[task]) : NULL;
    if (op && op->type == SS_OP_SOFTMAX_CE && e->coll == SS_BUILD_COLL_PARTIAL) {
        st = ce_combine(x, op->id, e->first_tile, e->red, devs, e->n_dev, d);
    } else if (e->n_dev > 1 && (st = coll_in_place(x, e, devs, &done, d)) == SS_OK && !done) {
        int64_t total = 0;
        for (int i = 0; i < e->n_item; i++)
            total += ss_region_volume(&s->ds.items[e->item_off + i].reg);
        if ((st = grow_scratch(s, total, d)) != SS_OK)
            return st;
        int me = 0;
        while (devs[me] != s->rank)
            me++;
        int64_t at = 0;
        for (int i = 0; i < e->n_item; i++) {
            const ss_build_item *it = &s->ds.items[e->item_off + i];
            const ss_tensor *T = ss_graph_tensor(s->g, it->tensor);
            void *b = e->grad ? (void *)s->grad[it->tensor] : s->buf[it->tensor];
            if (!b || T->dtype != SS_F32)
                return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                                   "runtime: a collective over %s (%s) is not f32", T->name,
                                   ss_dtype_name(T->dtype)),
                       SS_ERR_UNSUPPORTED;
            int64_t v = ss_region_volume(&it->reg), lo, hi;
            region_io(T, b, &it->reg, s->scratch + at, 0);
            if (e->gather) {
                slice_of(v, me, e->n_dev, &lo, &hi);
                memset(s->scratch + at, 0, (size_t)lo * sizeof(float));
                memset(s->scratch + at + hi, 0, (size_t)(v - hi) * sizeof(float));
            }
            at += v;
        }
        int64_t lo, hi;
        slice_of(total, e->part, e->n_parts, &lo, &hi);
        if ((st = group_reduce(x, devs, e->n_dev, s->scratch + lo, hi - lo, 0, d)) != SS_OK)
            return st;
        at = 0;
        for (int i = 0; i < e->n_item; i++) {
            const ss_build_item *it = &s->ds.items[e->item_off + i];
            void *b = e->grad ? (void *)s->grad[it->tensor] : s->buf[it->tensor];
            region_io(ss_graph_tensor(s->g, it->tensor), b, &it->reg, s->scratch + at, 3);
            at += ss_region_volume(&it->reg);
        }
    }
    double w1 = now_ms();
    x->comm_ms += w1 - w0;
    x->ncoll++;
    record(x, task, 1, w0, w1, s->tg->bytes[task]);
    return st;
}

/* Zero what this iteration accumulates into (split contractions' outputs,
 * every gradient a local tile reads or writes) and seed the loss gradient
 * (d mean loss) over the regions of the loss tiles here (a loss has no
 * consumers, so no collective brings its gradient: every tile's device
 * seeds it). */
static void iteration_start(ss_rt_state *s)
{
    const ss_graph *g = s->g;
    for (int i = 0; i < s->n_tiles; i++) {
        rt_tile *tl = &s->tiles[i];
        const ss_op *op = ss_graph_op(g, tl->op);
        const ss_pconfig *c = ss_plan_config(s->p, tl->op);
        ss_kargs *a = &tl->a;
        for (int xi = 0; xi < a->n_x; xi++) {
            int t = operand_tensor(op, xi);
            if (s->grad[t])
                region_io(ss_graph_tensor(g, t), s->grad[t], &a->xr[xi], NULL, 4);
        }
        for (int k = 0; k < a->n_y; k++) {
            int t = op->outputs[k];
            region_io(ss_graph_tensor(g, t), s->grad[t], &a->yr[k], NULL, 4);
            if (c->red > 1)
                region_io(ss_graph_tensor(g, t), s->buf[t], &a->yr[k], NULL, 4);
        }
    }
    for (int i = 0; i < s->n_tiles; i++) {
        rt_tile *tl = &s->tiles[i];
        const ss_op *op = ss_graph_op(g, tl->op);
        for (int k = 0; k < op->n_out; k++) {
            int t = op->outputs[k];
            if (ss_graph_n_consumers(g, t) > 0 || !s->grad[t])
                continue;
            float v = (float)(1.0 / (double)s->vol[t]);
            int64_t n = ss_region_volume(&tl->a.yr[k]);
            for (int64_t e = 0; e < n; e++)
                ((float *)tl->a.dy[k])[e] = v;
            region_io(ss_graph_tensor(g, t), s->grad[t], &tl->a.yr[k], tl->a.dy[k], 3);
        }
    }
}

static ss_status iteration(iter_ctx *x, ss_diag *d)
{
    ss_rt_state *s = x->s;
    iteration_start(s);
    s->step++;
    for (int i = 0; i < s->n_mine; i++) {
        int t = s->mine[i];
        ss_status st = SS_OK;
        switch ((ss_task_kind)s->tg->kind[t]) {
        case SS_TASK_FWD:
        case SS_TASK_BWD:
            st = run_compute(x, t, d);
            break;
        case SS_TASK_UPDATE:
            run_update(x, t);
            break;
        case SS_TASK_XFER:
            st = run_xfer(x, t, d);
            break;
        case SS_TASK_COLLECTIVE:
            st = run_coll(x, t, d);
            break;
        default:
            break;
        }
        if (st != SS_OK)
            return st;
    }
    return SS_OK;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Mean loss over every loss tensor; each rank holds the whole loss only
 * over its own regions, so the ranks' partial sums are summed (rank 0 of a
 * region: the rank of the first device computing it). */
static ss_status loss_of(const ss_rt_state *s, const ss_rt_comm *c, double *out, ss_diag *d)
{
    double acc[2] = {0, 0};
    for (int i = 0; i < s->n_tiles; i++) {
        const rt_tile *tl = &s->tiles[i];
        const ss_op *op = ss_graph_op(s->g, tl->op);
        if (op->type != SS_OP_SOFTMAX_CE)
            continue;
        const ss_pconfig *pc = ss_plan_config(s->p, tl->op);
        int cls = tl->idx / pc->red / pc->rep, owner = pc->devices[cls * pc->rep * pc->red];
        if (tl->r != 0 || tl->q != 0 || owner != s->rank)
            continue;
        int t = op->outputs[0];
        int64_t n = ss_region_volume(&tl->a.yr[0]);
        float *tmp = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
        if (!tmp)
            return nomem(d);
        region_io(ss_graph_tensor(s->g, t), s->buf[t], &tl->a.yr[0], tmp, 0);
        for (int64_t e = 0; e < n; e++)
            acc[0] += tmp[e];
        free(tmp);
    }
    for (int o = 0; o < s->n_ops; o++)
        if (ss_graph_op(s->g, o)->type == SS_OP_SOFTMAX_CE)
            acc[1] += (double)s->vol[ss_graph_op(s->g, o)->outputs[0]];
    ss_status st = c->allreduce_f64(c->ctx, acc, 1, 0, d);
    *out = acc[1] > 0 ? acc[0] / acc[1] : 0;
    return st;
}

ss_status ss_rt_train(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                      const ss_plan *p, const ss_rt_config *cfg, const ss_rt_comm *comm,
                      ss_rt_state **out, ss_rt_result *r, ss_diag *d)
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
    s->cuda = cfg->cuda;
    s->device = cfg->device;
    ss_status st = setup(s, cfg->seed, cfg->adam, d);
    if (st == SS_OK)
        st = schedule(s, m, cm, r, d);
    r->n_iter = cfg->warmup + cfg->iterations;
    r->loss = calloc((size_t)r->n_iter, sizeof *r->loss);
    r->iter_ms = calloc((size_t)r->n_iter, sizeof *r->iter_ms);
    double *parts = calloc((size_t)r->n_iter * 3, sizeof *parts);
    double *iter_cpu = calloc((size_t)r->n_iter, sizeof *iter_cpu);
    r->cls_tasks = calloc(SS_RT_CLASSES, sizeof *r->cls_tasks);
    r->cls_ms = calloc(SS_RT_CLASSES, sizeof *r->cls_ms);
    r->cls_cpu_ms = calloc(SS_RT_CLASSES, sizeof *r->cls_cpu_ms);
    r->cls_pred_ms = calloc(SS_RT_CLASSES, sizeof *r->cls_pred_ms);
    if (st == SS_OK && (!r->loss || !r->iter_ms || !parts || !iter_cpu || !r->cls_tasks ||
                        !r->cls_ms || !r->cls_cpu_ms || !r->cls_pred_ms))
        st = nomem(d);
    for (int i = 0; st == SS_OK && i < s->n_mine; i++) {
        int c = task_class(s, s->mine[i]);
        r->cls_tasks[c]++;
        r->cls_pred_ms[c] += s->tg->dur[s->mine[i]] / 1e3;
    }
    iter_ctx x;
    memset(&x, 0, sizeof x);
    x.s = s;
    x.c = comm;
    x.lr = cfg->lr;
    for (int it = 0; st == SS_OK && it < r->n_iter; it++) {
        x.ncoll = x.nxfer = 0;
        x.bytes = 0;
        x.comp_ms = x.comp_cpu_ms = x.comm_ms = 0;
        x.trace = cfg->trace && it == r->n_iter - 1;
        x.r = it == r->n_iter - 1 ? r : NULL;
        if ((st = comm->barrier(comm->ctx, d)) != SS_OK)
            break;
        double t0 = now_ms(), c0 = cpu_ms();
        x.t0 = t0;
        if ((st = iteration(&x, d)) != SS_OK)
            break;
        double ms[2] = {now_ms() - t0, cpu_ms() - c0};
        if ((st = loss_of(s, comm, &r->loss[it], d)) != SS_OK ||
            (st = comm->allreduce_f64(comm->ctx, ms, 2, 1, d)) != SS_OK)
            break;
        r->iter_ms[it] = ms[0];
        iter_cpu[it] = ms[1];
        parts[3 * it] = x.comp_ms;
        parts[3 * it + 1] = x.comp_cpu_ms;
        parts[3 * it + 2] = x.comm_ms;
    }
    double *md = st == SS_OK ? malloc((size_t)cfg->iterations * sizeof *md) : NULL;
    if (st == SS_OK && !md)
        st = nomem(d);
    if (st != SS_OK) {
        free(parts);
        free(iter_cpu);
        ss_rt_free(s);
        ss_rt_result_clear(r);
        return st;
    }
    int n = cfg->iterations;
    double *slot[5] = {&r->measured_ms, &r->compute_ms, &r->compute_cpu_ms, &r->comm_ms,
                       &r->measured_cpu_ms};
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < n; i++)
            md[i] = k == 0   ? r->iter_ms[cfg->warmup + i]
                    : k == 4 ? iter_cpu[cfg->warmup + i]
                             : parts[3 * (cfg->warmup + i) + k - 1];
        qsort(md, (size_t)n, sizeof *md, cmp_dbl);
        *slot[k] = n % 2 ? md[n / 2] : 0.5 * (md[n / 2 - 1] + md[n / 2]);
    }
    free(parts);
    free(iter_cpu);
    free(md);
    r->collectives = x.ncoll;
    r->transfers = x.nxfer;
    r->comm_bytes = x.bytes;
    r->my_tasks = s->n_mine;
    r->my_tiles = s->n_tiles;
    *out = s;
    return SS_OK;
}

/* ------------------------------------------------------------ trace */

ss_status ss_rt_trace_events(const ss_rt_state *s, char **out, ss_diag *d)
{
    size_t cap = (size_t)s->n_ev * (2 * SS_NAME_MAX + 300) + 1, n = 0;
    char *b = ss_malloc(cap);
    if (!b)
        return nomem(d);
    b[0] = 0;
    for (int i = 0; i < s->n_ev; i++) {
        const rt_event *e = &s->ev[i];
        char name[2 * SS_NAME_MAX + 64];
        ss_build_task_name(s->b, s->tg, e->task, name, sizeof name);
        for (char *c = name; *c; c++)
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 32)
                *c = '_';
        n += (size_t)snprintf(b + n, cap - n,
                              "%s{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, "
                              "\"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"task\": %d, "
                              "\"bytes\": %.0f, \"sim_ts\": %.3f, \"sim_dur\": %.3f}}",
                              i ? ",\n" : "", name,
                              ss_task_kind_name((ss_task_kind)s->tg->kind[e->task]), s->rank,
                              e->tid, e->ts, e->dur, e->task, e->bytes, s->sim_start[e->task],
                              s->sim_dur[e->task]);
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
