/*
 * exec.c — the runtime's executor (exec.h), backend-independent part: the
 * host tensors (inputs and weights from the seed), this rank's tiles, the
 * task graph built and simulated with the simulator's builder and engine,
 * the rank's tasks in simulated order, the iterations and their figures, the
 * trace and the numerics check. How tasks execute is the backend's
 * (exec_int.h: runtime/exec_cpu.c, runtime/cuda/exec_cuda.c).
 *
 * Invariant: every rank's task list is its subsequence of one global order
 * (simulated start, end, depth in the graph, task id) that respects every
 * dependency, so blocking or stream-ordered sends,
 * receives and group collectives meet in the same order on every rank.
 */
#include "runtime/exec_int.h"
#include "simulator/engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
static ss_status self_bcast(void *c, const int *ranks, int n, void *b, size_t bytes, ss_diag *d)
{
    (void)c, (void)ranks, (void)b, (void)bytes;
    if (n > 1)
        return ss_diag_set(d, SS_ERR_INVALID, "runtime: one process has no group of %d ranks", n);
    return SS_OK;
}

/* A group of one: its own block. */
static ss_status self_one(int n, const float *send, float *recv, int64_t cnt, ss_diag *d)
{
    if (n > 1)
        return ss_diag_set(d, SS_ERR_INVALID, "runtime: one process has no group of %d ranks", n);
    if (cnt > 0 && send != recv)
        memmove(recv, send, (size_t)cnt * sizeof(float));
    return SS_OK;
}
static ss_status self_rs(void *c, const int *ranks, int n, const float *send, float *recv,
                         const int64_t *counts, ss_diag *d)
{
    (void)c, (void)ranks;
    return self_one(n, send, recv, counts[0], d);
}
static ss_status self_a2a(void *c, const int *ranks, int n, const float *send,
                          const int64_t *scounts, float *recv, const int64_t *rcounts, ss_diag *d)
{
    (void)c, (void)ranks, (void)rcounts;
    return self_one(n, send, recv, scounts[0], d);
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
    c->bcast = self_bcast;
    c->reduce_scatter_f32 = self_rs;
    c->allgather_f32 = self_rs;
    c->alltoall_f32 = self_a2a;
}

/* ------------------------------------------------------------ regions */

void ss_rt_walk(const int64_t *sh, int nd, const ss_region *r, ss_rt_row_fn fn, void *ctx)
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
    /* a row spans dim j and every later dim, which the region covers whole
     * (one call per contiguous run, not per innermost row) */
    int j = nd - 1;
    while (j > 0 && r->r[j].lo == 0 && r->r[j].hi == sh[j]) {
        j--;
        len *= r->r[j].hi - r->r[j].lo;
    }
    for (;;) {
        int64_t toff = 0;
        for (int k = 0; k < nd; k++)
            toff = toff * sh[k] + idx[k];
        fn(ctx, toff, roff, len);
        roff += len;
        int k = j - 1;
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

void ss_rt_region_io(const ss_tensor *T, void *tbuf, const ss_region *r, void *dense, int mode)
{
    copy_ctx c = {tbuf, dense, ss_dtype_size(T->dtype), mode};
    ss_rt_walk(T->shape, T->ndim, r, copy_row, &c);
}

int ss_rt_xfer_movable(const ss_tensor *T, int grad)
{
    return T->dtype == SS_F32 || (!grad && ss_dtype_size(T->dtype) == sizeof(float));
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

void *ss_rt_zalloc(size_t n)
{
    size_t m = (n + SS_KERNEL_ALIGN - 1) / SS_KERNEL_ALIGN * SS_KERNEL_ALIGN;
    void *b = aligned_alloc(SS_KERNEL_ALIGN, m ? m : SS_KERNEL_ALIGN);
    if (b)
        memset(b, 0, m ? m : SS_KERNEL_ALIGN);
    return b;
}

void ss_rt_free(ss_rt_state *s)
{
    if (!s)
        return;
    if (s->be && s->tiles)
        s->be->release(s);
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

ss_status ss_rt_nomem(ss_diag *d)
{
    ss_diag_set(d, SS_ERR_NOMEM, "runtime: out of memory");
    return SS_ERR_NOMEM;
}

/* Buffers of every tensor (inputs and weights filled from the seed) and the
 * kernel arguments of this rank's tiles. */
static ss_status setup(ss_rt_state *s, uint64_t seed, int adam, ss_diag *d)
{
    const ss_graph *g = s->g;
    if (s->cuda && ss_plan_settings_get(s->p)->distopt == SS_ZERO3)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                           "runtime: the plan shards its weights (ZeRO-3, distopt 3); the CUDA "
                           "backend does not gather them yet: run it with --backend cpu"),
               SS_ERR_UNSUPPORTED;
    ss_status st0 = ss_rt_backend_check(s->cuda, s->rank, d);
    if (st0 != SS_OK)
        return st0;
    s->be = s->cuda ? ss_rt_cuda_backend() : &ss_rt_cpu_backend;
    s->n_t = ss_graph_n_tensors(g);
    s->n_ops = ss_graph_n_ops(g);
    s->buf = calloc((size_t)s->n_t, sizeof *s->buf);
    s->grad = calloc((size_t)s->n_t, sizeof *s->grad);
    s->vol = calloc((size_t)s->n_t, sizeof *s->vol);
    s->op_off = calloc((size_t)s->n_ops + 1, sizeof *s->op_off);
    if (!s->buf || !s->grad || !s->vol || !s->op_off)
        return ss_rt_nomem(d);
    if (adam && (!(s->adam_m = calloc((size_t)s->n_t, sizeof *s->adam_m)) ||
                 !(s->adam_v = calloc((size_t)s->n_t, sizeof *s->adam_v))))
        return ss_rt_nomem(d);
    for (int t = 0; t < s->n_t; t++) {
        const ss_tensor *T = ss_graph_tensor(g, t);
        s->vol[t] = tvol(T);
        if (T->dtype != SS_F32 && T->dtype != SS_I32 && T->dtype != SS_I64)
            return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                               "runtime: tensor %s is %s; the CPU runtime runs fp32 models "
                               "(zoo transformers: precision=fp32)",
                               T->name, ss_dtype_name(T->dtype)),
                   SS_ERR_UNSUPPORTED;
        if (!(s->buf[t] = ss_rt_zalloc((size_t)s->vol[t] * ss_dtype_size(T->dtype))))
            return ss_rt_nomem(d);
        if (T->dtype == SS_F32 && !(s->grad[t] = ss_rt_zalloc((size_t)s->vol[t] * sizeof(float))))
            return ss_rt_nomem(d);
        if (T->is_weight || (T->producer >= 0 && ss_graph_op(g, T->producer)->type == SS_OP_INPUT))
            fill(g, t, s->buf[t], seed);
        if (adam && T->is_weight &&
            (!(s->adam_m[t] = ss_rt_zalloc((size_t)s->vol[t] * sizeof(float))) ||
             !(s->adam_v[t] = ss_rt_zalloc((size_t)s->vol[t] * sizeof(float)))))
            return ss_rt_nomem(d);
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
        return ss_rt_nomem(d);
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
            ss_status st = ss_kernel_setup(&t->a, s->cuda ? SS_BACKEND_CUDA : SS_BACKEND_CPU, g,
                                           op, &tl, d);
            if (st != SS_OK)
                return st;
            t->a.seed = seed + (uint64_t)o;
            for (int k = 0; k < t->a.n_y; k++)
                if (t->a.yt[k] != SS_F32)
                    return ss_diag_set(d, SS_ERR_UNSUPPORTED, "runtime: op %s outputs %s (not f32)",
                                       op->name, ss_dtype_name(t->a.yt[k])),
                           SS_ERR_UNSUPPORTED;
            if (s->cuda && op->type == SS_OP_SOFTMAX_CE && c->red > 1)
                return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                                   "runtime: op %s splits the loss's vocabulary; the CUDA "
                                   "runtime does not combine split losses yet",
                                   op->name),
                       SS_ERR_UNSUPPORTED;
        }
    }
    s->op_off[s->n_ops] = s->n_tiles;
    return SS_OK;
}
/* ------------------------------------------------------------ schedule */

typedef struct okey {
    double start, end;
    int depth, task;
} okey;

/* Simulated start, then end, then depth: a chain of zero-duration tasks
 * (views' backwards) shares one start and end, and its dependencies run
 * from higher task ids to lower ones in the backward, so the task id alone
 * would run a consumer before its producer. */
static int cmp_okey(const void *pa, const void *pb)
{
    const okey *a = pa, *b = pb;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    if (a->depth != b->depth)
        return a->depth < b->depth ? -1 : 1;
    return (a->task > b->task) - (a->task < b->task);
}

/* depth[t]: the most edges on a path from a source to task t (Kahn's order
 * over the finalized successor lists; work: n + 1 ints). */
static ss_status task_depths(const ss_taskgraph *tg, int *depth, int *work, ss_diag *d)
{
    int n = tg->n_tasks, *indeg = work, head = 0, tail = 0;
    int *queue = malloc((size_t)(n + 1) * sizeof *queue);
    if (!queue)
        return ss_rt_nomem(d);
    memset(indeg, 0, (size_t)n * sizeof *indeg);
    for (int e = 0; e < tg->succ_off[n]; e++)
        indeg[tg->succ[e]]++;
    for (int t = 0; t < n; t++) {
        depth[t] = 0;
        if (!indeg[t])
            queue[tail++] = t;
    }
    while (head < tail) {
        int t = queue[head++];
        for (int e = tg->succ_off[t]; e < tg->succ_off[t + 1]; e++) {
            int v = tg->succ[e];
            depth[v] = depth[v] > depth[t] + 1 ? depth[v] : depth[t] + 1;
            if (!--indeg[v])
                queue[tail++] = v;
        }
    }
    free(queue);
    return SS_OK;
}

static int in_group(const ss_build_descs *x, const ss_build_desc *e, int dev)
{
    for (int i = 0; i < e->n_dev; i++)
        if (x->devs[e->dev_off + i] == dev)
            return 1;
    return 0;
}

/* The box of tensor T's region R that the tiles of T's consumers on device
 * dev read (their bounding box); *out empty (volume 0) when none reads it. */
static void read_box(const ss_rt_state *s, int T, const ss_region *R, int dev, ss_region *out)
{
    int any = 0;
    *out = *R;
    for (int c = 0; c < ss_graph_n_consumers(s->g, T); c++) {
        const ss_op *op = ss_graph_op(s->g, ss_graph_consumer(s->g, T, c));
        const ss_pconfig *pc = ss_plan_config(s->p, op->id);
        for (int j = 0; j < pc->ntiles; j++) {
            if (pc->devices[j] != dev)
                continue;
            ss_tile tl;
            ss_pconfig_tile(s->g, op, pc, j, &tl);
            for (int xi = 0; xi < op->n_in; xi++) {
                ss_region r, x;
                if (op->inputs[xi] != T)
                    continue;
                ss_op_input_region(s->g, op, &tl, xi, &r);
                if (ss_region_intersect(&r, R, &x) == 0)
                    continue;
                for (int k = 0; k < R->ndim; k++) {
                    if (!any || x.r[k].lo < out->r[k].lo)
                        out->r[k].lo = x.r[k].lo;
                    if (!any || x.r[k].hi > out->r[k].hi)
                        out->r[k].hi = x.r[k].hi;
                }
                any = 1;
            }
        }
    }
    if (!any)
        out->r[0].hi = out->r[0].lo;
}

int ss_rt_sp_boxes(const ss_rt_state *s, int task, ss_region *out)
{
    const ss_build_desc *e = &s->ds.t[task];
    const int *devs = s->ds.devs + e->dev_off;
    int n = e->n_dev, ni = e->n_item, ok = 1;
    for (int i = 0; i < ni; i++) {
        const ss_build_item *it = &s->ds.items[e->item_off + i];
        for (int k = 0; k < n; k++)
            read_box(s, it->tensor, &it->reg, devs[k], &out[k * ni + i]);
        for (int k = 0; k < n && ok; k++)
            for (int j = k + 1; j < n && ok; j++) {
                ss_region x;
                ok = ss_region_intersect(&out[k * ni + i], &out[j * ni + i], &x) == 0;
            }
    }
    return ok;
}

int ss_rt_a2a_xfers(const ss_taskgraph *tg, int task, int *out)
{
    for (int pass = 0; pass < 2; pass++) {
        const int32_t *l = pass ? tg->succ : tg->pred, *off = pass ? tg->succ_off : tg->pred_off;
        int n = 0;
        if (!off)
            continue; /* no predecessor lists */
        for (int i = off[task]; i < off[task + 1]; i++)
            if (tg->kind[l[i]] == SS_TASK_XFER && tg->dur[l[i]] == 0) {
                if (out)
                    out[n] = l[i];
                n++;
            }
        if (n > 0)
            return n;
    }
    return 0;
}

/* Whether device dev sends or receives in all-to-all task t. */
static int a2a_member(const ss_taskgraph *tg, const ss_build_descs *x, int t, int dev)
{
    int n = ss_rt_a2a_xfers(tg, t, NULL), hit = 0;
    int *xs = malloc((size_t)(n + 1) * sizeof *xs);
    if (!xs)
        return 0;
    ss_rt_a2a_xfers(tg, t, xs);
    for (int i = 0; i < n && !hit; i++)
        hit = x->t[xs[i]].src == dev || x->t[xs[i]].dst == dev;
    free(xs);
    return hit;
}

int ss_rt_local_tile(const ss_rt_state *s, int op, int idx)
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

/* Which input gradients of this rank's replica tiles are copies: a
 * replica q > 0 computes the input gradient replica 0 does, and where a
 * collective sums that gradient over a group holding a lower replica of the
 * tile (an op's replicas' output gradients, REPSUM; a partial-sum unit's,
 * GRADSUM) every copy would be counted. Megatron counts a replicated
 * consumer's whole gradient once and all-reduces only the split consumers'
 * partial ones (q_lora = 0: kv_a beside the column-parallel q). */
static ss_status dup_grads(ss_rt_state *s, ss_diag *d)
{
    const ss_taskgraph *tg = s->tg;
    int *sums = malloc((size_t)(tg->n_tasks + 1) * sizeof *sums), n = 0;
    if (!sums)
        return ss_rt_nomem(d);
    for (int task = 0; task < tg->n_tasks; task++) {
        const ss_build_desc *e = &s->ds.t[task];
        if (tg->kind[task] == SS_TASK_COLLECTIVE &&
            (e->coll == SS_BUILD_COLL_REPSUM || e->coll == SS_BUILD_COLL_GRADSUM) &&
            in_group(&s->ds, e, s->rank))
            sums[n++] = task;
    }
    for (int i = 0; i < s->n_tiles; i++) {
        rt_tile *tl = &s->tiles[i];
        const ss_op *op = ss_graph_op(s->g, tl->op);
        const ss_pconfig *c = ss_plan_config(s->p, tl->op);
        for (int xi = 0; xi < op->n_in && xi < 32 && tl->q > 0; xi++)
            for (int k = 0; k < n && !(tl->dupdx >> xi & 1); k++) {
                const ss_build_desc *e = &s->ds.t[sums[k]];
                int lower = 0, hit = 0;
                for (int q = 0; q < tl->q && !lower; q++)
                    lower = in_group(&s->ds, e, c->devices[tl->idx - (tl->q - q) * c->red]);
                for (int m = 0; m < e->n_item && lower && !hit; m++) {
                    const ss_build_item *it = &s->ds.items[e->item_off + m];
                    ss_region ov;
                    hit = it->tensor == op->inputs[xi] &&
                          ss_region_intersect(&it->reg, &tl->a.xr[xi], &ov) > 0;
                }
                if (hit)
                    tl->dupdx |= 1u << xi;
            }
    }
    free(sums);
    return SS_OK;
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
    int *depth = NULL;
    if (!mm || !e || !s->b || !s->tg) {
        st = ss_rt_nomem(d);
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
    depth = malloc((size_t)(2 * n + 2) * sizeof *depth);
    s->mine = malloc((size_t)(n + 1) * sizeof *s->mine);
    s->task_tile = malloc((size_t)(n + 1) * sizeof *s->task_tile);
    s->combine_after = calloc((size_t)n + 1, 1);
    s->sim_start = malloc((size_t)(n + 1) * sizeof *s->sim_start);
    s->sim_dur = malloc((size_t)(n + 1) * sizeof *s->sim_dur);
    if (!keys || !depth || !s->mine || !s->task_tile || !s->combine_after || !s->sim_start ||
        !s->sim_dur) {
        st = ss_rt_nomem(d);
        goto out;
    }
    if ((st = task_depths(tg, depth, depth + n + 1, d)) != SS_OK)
        goto out;
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
            if (take && (s->task_tile[t] = ss_rt_local_tile(s, tg->op[t], tg->tile[t])) < 0) {
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
            take = x->src == me || x->dst == me;
        } else if (k == SS_TASK_COLLECTIVE) {
            take = tg->aux[t] == SS_BUILD_COLL_ALLTOALL ? a2a_member(tg, &s->ds, t, me)
                                                         : in_group(&s->ds, x, me);
        }
        if (take)
            keys[nk++] = (okey){er->start[t], er->end[t], depth[t], t};
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
    free(depth);
    ss_engine_free(e);
    ss_memory_free(mm);
    return st;
}
/* ------------------------------------------------------------ helpers */

int ss_rt_operand_tensor(const ss_op *op, int i)
{
    return i < op->n_in ? op->inputs[i] : op->weights[i - op->n_in];
}

void ss_rt_slice_of(int64_t vol, int k, int n, int64_t *lo, int64_t *hi)
{
    int64_t c = (vol + n - 1) / n;
    *lo = c * k < vol ? c * k : vol;
    *hi = c * (k + 1) < vol ? c * (k + 1) : vol;
}

double ss_rt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

double ss_rt_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int ss_rt_task_class(const ss_rt_state *s, int task)
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

/* (allocation failure: the trace event is dropped) */
void ss_rt_record(rt_iter *x, int task, int tid, double w0, double w1, double bytes, int comm)
{
    ss_rt_state *s = x->s;
    if (x->r && x->r->cls_ms) {
        x->r->cls_ms[ss_rt_task_class(s, task)] += w1 - w0;
        if (comm) /* communication: its CPU time is its wall time's spin */
            x->r->cls_cpu_ms[ss_rt_task_class(s, task)] += w1 - w0;
    }
    if (!x->trace || ss_grow((void **)&s->ev, &s->cap_ev, s->n_ev + 1, sizeof *s->ev))
        return;
    s->ev[s->n_ev++] = (rt_event){task, tid, (w0 - x->t0) * 1e3, (w1 - w0) * 1e3, bytes};
}

void ss_rt_record_compute(rt_iter *x, int task, double w0, double c0)
{
    double c1 = ss_rt_cpu_ms() - c0;
    x->comp_cpu_ms += c1;
    if (x->r && x->r->cls_cpu_ms)
        x->r->cls_cpu_ms[ss_rt_task_class(x->s, task)] += c1;
    double w1 = ss_rt_now_ms();
    x->comp_ms += w1 - w0;
    ss_rt_record(x, task, 0, w0, w1, 0, 0);
}

int ss_rt_loss_owner(const ss_rt_state *s, const rt_tile *tl)
{
    if (ss_graph_op(s->g, tl->op)->type != SS_OP_SOFTMAX_CE)
        return 0;
    const ss_pconfig *pc = ss_plan_config(s->p, tl->op);
    int cls = tl->idx / pc->red / pc->rep, owner = pc->devices[cls * pc->rep * pc->red];
    return tl->r == 0 && tl->q == 0 && owner == s->rank;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Mean loss over every loss tensor: the backend sums each element once over
 * the ranks (a loss element's owner: ss_rt_loss_owner). */
static ss_status loss_of(rt_iter *x, double *out, ss_diag *d)
{
    const ss_rt_state *s = x->s;
    double sum = 0, n = 0;
    ss_status st = s->be->loss(x, &sum, d);
    for (int o = 0; o < s->n_ops; o++)
        if (ss_graph_op(s->g, o)->type == SS_OP_SOFTMAX_CE)
            n += (double)s->vol[ss_graph_op(s->g, o)->outputs[0]];
    *out = n > 0 ? sum / n : 0;
    return st;
}

ss_status ss_rt_plan_only(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                          const ss_plan *p, const ss_rt_config *cfg, int rank, int size,
                          ss_rt_state **out, ss_rt_result *r, ss_diag *d)
{
    *out = NULL;
    ss_rt_state *s = calloc(1, sizeof *s);
    if (!s)
        return ss_rt_nomem(d);
    s->g = g;
    s->p = p;
    s->rank = rank;
    s->size = size;
    s->cuda = cfg->cuda;
    s->device = cfg->device;
    s->adam = cfg->adam;
    ss_status st = setup(s, cfg->seed, cfg->adam, d);
    if (st == SS_OK)
        st = schedule(s, m, cm, r, d);
    if (st == SS_OK)
        st = dup_grads(s, d);
    if (st != SS_OK) {
        ss_rt_free(s);
        return st;
    }
    *out = s;
    return SS_OK;
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
    ss_rt_state *s = NULL;
    ss_status st = ss_rt_plan_only(g, m, cm, p, cfg, comm->rank, comm->size, &s, r, d);
    if (st != SS_OK)
        return st;
    st = s->be->prepare(s, comm, d);
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
        st = ss_rt_nomem(d);
    for (int i = 0; st == SS_OK && i < s->n_mine; i++) {
        int c = ss_rt_task_class(s, s->mine[i]);
        r->cls_tasks[c]++;
        r->cls_pred_ms[c] += s->tg->dur[s->mine[i]] / 1e3;
    }
    rt_iter x;
    memset(&x, 0, sizeof x);
    x.s = s;
    x.c = comm;
    x.lr = cfg->lr;
    for (int it = 0; st == SS_OK && it < r->n_iter; it++) {
        x.ncoll = x.nxfer = 0;
        x.bytes = x.copied = 0;
        x.comp_ms = x.comp_cpu_ms = x.comm_ms = 0;
        x.trace = cfg->trace && it == r->n_iter - 1;
        x.r = it == r->n_iter - 1 ? r : NULL;
        if ((st = comm->barrier(comm->ctx, d)) != SS_OK)
            break;
        double t0 = ss_rt_now_ms(), c0 = ss_rt_cpu_ms();
        x.t0 = t0;
        if ((st = s->be->iteration(&x, d)) != SS_OK)
            break;
        double ms[2] = {ss_rt_now_ms() - t0, ss_rt_cpu_ms() - c0};
        if ((st = loss_of(&x, &r->loss[it], d)) != SS_OK ||
            (st = comm->allreduce_f64(comm->ctx, ms, 2, 1, d)) != SS_OK)
            break;
        r->iter_ms[it] = ms[0];
        iter_cpu[it] = ms[1];
        parts[3 * it] = x.comp_ms;
        parts[3 * it + 1] = x.comp_cpu_ms;
        parts[3 * it + 2] = x.comm_ms;
    }
    if (st == SS_OK)
        st = s->be->readback(s, d);
    double *md = st == SS_OK ? malloc((size_t)cfg->iterations * sizeof *md) : NULL;
    if (st == SS_OK && !md)
        st = ss_rt_nomem(d);
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
    r->copy_bytes = x.copied;
    r->my_tasks = s->n_mine;
    r->my_tiles = s->n_tiles;
    r->param_peak_bytes = s->param_peak;
    *out = s;
    return SS_OK;
}

/* ------------------------------------------------------------ trace */

ss_status ss_rt_trace_events(const ss_rt_state *s, char **out, ss_diag *d)
{
    size_t cap = (size_t)s->n_ev * (2 * SS_NAME_MAX + 300) + 1, n = 0;
    char *b = ss_malloc(cap);
    if (!b)
        return ss_rt_nomem(d);
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
            ss_rt_walk(T->shape, T->ndim, &tl->a.xr[op->n_in + w], diff_row, &c);
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
