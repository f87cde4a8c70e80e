/*
 * exec_cpu.c — the executor's CPU backend (exec_int.h): every tensor in host
 * memory, each task of the rank's list run in turn — the CPU kernels of its
 * tiles, SGD or Adam on its weight shards, transfers and collectives through
 * ss_rt_comm (MPI) — so the buffers hold, over the regions a task reads,
 * what a one-process run holds there when it runs. Each collective runs as
 * itself (CK_*, fixed before the first iteration): an all-reduce of its
 * items laid end to end, a reduce-scatter or all-gather of each member's
 * part of them (slices of each item's elements, or sequence parallelism's
 * boxes), an all-to-all of the transfers the builder folded into it.
 *
 * Where the device plan (runtime/cuda/plan.h, the CUDA backend's) runs a
 * transfer or collective on a communication stream, this backend defers its
 * result as the GPU does: it is received or reduced at its turn into a
 * buffer of its own and laid back into the tensors at the plan's lay-back
 * point (so a CPU run on a GPU topology checks those points' numerics; on
 * CPU topologies, whose communication occupies the compute stream, nothing
 * is deferred).
 *
 * Invariant: a task runs only after every task it depends on has run on
 * every rank involved (the rank's list is ordered by simulated start and the
 * data it reads arrives through the transfer or collective tasks before it).
 */

#include "runtime/cuda/plan.h"
#include "runtime/zero3.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* What a collective step runs (CK_*: docs/runtime.md, "Collectives"). */
enum { CK_ALLREDUCE = 0, CK_RSCATTER, CK_ALLGATHER, CK_ALLTOALL };

typedef struct cpu_state {
    ss_rt_devplan plan;
    char *defer;      /* [n_steps] its result waits in held[i] until laid back */
    float **held;     /* [n_steps] */
    int64_t *held_n;  /* [n_steps] capacity of held[i] */
    char *ck;         /* [n_steps] a collective step's CK_* */
    ss_region **box;  /* [n_steps] a sequence-parallel reduce-scatter or all-gather: member
                       * k's box of item i at [k * n_item + i]; NULL: element slices */
    int **a2a;        /* [n_steps] an all-to-all: {n, nx, its group (n ranks, sorted), its
                       * transfer tasks (nx, by id)} */
    char *in_a2a;     /* [n_tasks] a transfer an all-to-all runs */
    float *pack;      /* packing buffer of reduce-scatters, all-gathers, all-to-alls */
    int64_t cap_pack;
    struct zero_item *zero; /* what iteration_start zeroes: each region once (zero_list) */
    int n_zero;
    rt_z3 *z3;        /* ZeRO-3's sharded weights (runtime/zero3.h); NULL otherwise */
} cpu_state;

/* A region iteration_start zeroes: of tensor t's gradient (buf 0) or value
 * (buf 1: a split contraction's output, whose tiles add their partial sums). */
typedef struct zero_item {
    int t, buf;
    ss_region reg;
} zero_item;

static ss_status hold(ss_rt_state *s, int i, int64_t n, float **out, ss_diag *d)
{
    cpu_state *cs = s->bs;
    if (n > cs->held_n[i]) {
        float *p = realloc(cs->held[i], (size_t)n * sizeof(float));
        if (!p)
            return ss_rt_nomem(d);
        cs->held[i] = p;
        cs->held_n[i] = n;
    }
    *out = cs->held[i];
    return SS_OK;
}

static void cpu_release(ss_rt_state *s)
{
    cpu_state *cs = s->bs;
    if (cs) {
        for (int i = 0; i < cs->plan.n_steps && cs->held; i++)
            free(cs->held[i]);
        for (int i = 0; i < cs->plan.n_steps; i++) {
            free(cs->box ? cs->box[i] : NULL);
            free(cs->a2a ? cs->a2a[i] : NULL);
        }
        free(cs->held);
        free(cs->held_n);
        free(cs->defer);
        free(cs->ck);
        free(cs->box);
        free(cs->a2a);
        free(cs->in_a2a);
        free(cs->pack);
        free(cs->zero);
        ss_rt_z3_free(cs->z3);
        ss_rt_devplan_clear(&cs->plan);
        free(cs);
        s->bs = NULL;
    }
    for (int i = 0; i < s->n_tiles; i++) {
        rt_tile *tl = &s->tiles[i];
        ss_kargs *a = &tl->a;
        for (int x = 0; x < a->n_x; x++) {
            if (!(tl->view_x >> x & 1))
                free(a->x[x]);
            free(a->dx[x]);
            a->x[x] = a->dx[x] = NULL;
        }
        for (int k = 0; k < a->n_y; k++) {
            if (!(tl->view_y >> k & 1))
                free(a->y[k]);
            if (!(tl->view_dy >> k & 1))
                free(a->dy[k]);
            a->y[k] = a->dy[k] = NULL;
        }
        tl->view_x = tl->view_y = tl->view_dy = 0;
        free(a->saved);
        free(a->work);
        a->saved = a->work = NULL;
    }
}

/* A sequence-parallel reduce-scatter's or all-gather's slices: the box each
 * member's consumers read of each item (ss_rt_sp_boxes); *ok 0 (the step
 * runs as an all-reduce) unless they are pairwise disjoint. */
static ss_status sp_boxes(ss_rt_state *s, int step, int *ok, ss_diag *d)
{
    cpu_state *cs = s->bs;
    const ss_build_desc *e = &s->ds.t[s->mine[step]];
    ss_region *b = malloc((size_t)(e->n_dev * e->n_item + 1) * sizeof *b);
    if (!b)
        return ss_rt_nomem(d);
    *ok = ss_rt_sp_boxes(s, s->mine[step], b);
    if (*ok)
        cs->box[step] = b;
    else
        free(b);
    return SS_OK;
}

/* An all-to-all's group and transfers: the zero-length transfers the
 * builder folded into it (forward: before it; backward: after it). */
static ss_status a2a_prepare(ss_rt_state *s, int step, ss_diag *d)
{
    cpu_state *cs = s->bs;
    int t = s->mine[step], nx = ss_rt_a2a_xfers(s->tg, t, NULL);
    int *a = malloc((size_t)(2 + 3 * nx + 1) * sizeof *a);
    if (!a)
        return ss_rt_nomem(d);
    cs->a2a[step] = a;
    int *grp = a + 2, *xs = grp + 2 * nx, n = 0;
    ss_rt_a2a_xfers(s->tg, t, xs);
    for (int k = 0; k < nx; k++) {
        int x = xs[k], ends[2] = {s->ds.t[x].src, s->ds.t[x].dst};
        cs->in_a2a[x] = 1;
        for (int q = 0; q < 2; q++) { /* the group, sorted */
            int j = n;
            while (j > 0 && grp[j - 1] > ends[q])
                j--;
            if (j > 0 && grp[j - 1] == ends[q])
                continue;
            memmove(grp + j + 1, grp + j, (size_t)(n - j) * sizeof *grp);
            grp[j] = ends[q];
            n++;
        }
    }
    /* by task id: the same order on every member */
    for (int i = 1; i < nx; i++)
        for (int j = i; j > 0 && xs[j - 1] > xs[j]; j--) {
            int tmp = xs[j];
            xs[j] = xs[j - 1];
            xs[j - 1] = tmp;
        }
    memmove(grp + n, xs, (size_t)nx * sizeof *xs);
    a[0] = n;
    a[1] = nx;
    return SS_OK;
}

/* What collective step i runs (cs->ck), and the slices or transfers it
 * needs. The distributed optimizer's slices: member k of the group updates
 * slice k of each shard (checked against this rank's updates). */
static ss_status coll_prepare(ss_rt_state *s, int i, ss_diag *d)
{
    cpu_state *cs = s->bs;
    int t = s->mine[i];
    const ss_build_desc *e = &s->ds.t[t];
    int dist = ss_plan_settings_get(s->p)->distopt != 0, ok = 0;
    ss_status st = SS_OK;
    switch (e->coll) {
    case SS_BUILD_COLL_GRAD:
        /* op -1: the tensor-parallel all-reduce of sequence-split
         * gradients (build_weights.c, split_tp), an all-reduce anyway */
        cs->ck[i] = e->gather ? CK_ALLGATHER : dist && s->tg->op[t] >= 0 ? CK_RSCATTER : CK_ALLREDUCE;
        break;
    case SS_BUILD_COLL_SENDGATHER:
    case SS_BUILD_COLL_PARAM:
        cs->ck[i] = CK_ALLGATHER;
        break;
    case SS_BUILD_COLL_SCATTER:
    case SS_BUILD_COLL_GATHER:
        if (e->n_dev > 1 && (st = sp_boxes(s, i, &ok, d)) != SS_OK)
            return st;
        cs->ck[i] = !ok                              ? CK_ALLREDUCE
                    : e->coll == SS_BUILD_COLL_SCATTER ? CK_RSCATTER
                                                       : CK_ALLGATHER;
        break;
    case SS_BUILD_COLL_ALLTOALL:
        cs->ck[i] = CK_ALLTOALL;
        return a2a_prepare(s, i, d);
    default:
        cs->ck[i] = CK_ALLREDUCE;
    }
    if (e->coll != SS_BUILD_COLL_GRAD || cs->ck[i] == CK_ALLREDUCE || e->n_dev < 2)
        return SS_OK;
    int me = 0;
    while (s->ds.devs[e->dev_off + me] != s->rank)
        me++;
    for (int j = 0; j < e->n_item; j++) {
        const ss_build_item *it = &s->ds.items[e->item_off + j];
        for (int k = 0; k < s->n_mine; k++) {
            const ss_build_desc *u = &s->ds.t[s->mine[k]];
            if (s->tg->kind[s->mine[k]] != SS_TASK_UPDATE || u->tensor != it->tensor ||
                memcmp(&u->reg, &it->reg, sizeof u->reg) != 0)
                continue;
            if (u->split_n != e->n_dev || u->split_k != me)
                return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                                   "runtime: rank %d updates slice %d of %d of %s, but is "
                                   "member %d of %d of its gradient bucket",
                                   s->rank, u->split_k, u->split_n,
                                   ss_graph_tensor(s->g, it->tensor)->name, me, e->n_dev),
                       SS_ERR_UNSUPPORTED;
        }
    }
    return SS_OK;
}

/* The host buffers of this rank's tiles. */
static ss_status zero_add(cpu_state *cs, int *cap, int t, int buf, const ss_region *r, ss_diag *d)
{
    if (ss_region_volume(r) <= 0)
        return SS_OK;
    if (ss_grow((void **)&cs->zero, cap, cs->n_zero + 1, sizeof *cs->zero))
        return ss_rt_nomem(d);
    cs->zero[cs->n_zero++] = (zero_item){t, buf, *r};
    return SS_OK;
}

static int cmp_zero(const void *pa, const void *pb)
{
    const zero_item *a = pa, *b = pb;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    return a->buf - b->buf;
}

/* Region a holds region b (same rank of tensor). */
static int region_holds(const ss_region *a, const ss_region *b)
{
    for (int k = 0; k < a->ndim; k++)
        if (b->r[k].lo < a->r[k].lo || b->r[k].hi > a->r[k].hi)
            return 0;
    return 1;
}

/* The regions iteration_start zeroes (the gradient of every region a local
 * tile reads or writes, split contractions' outputs), each once: a region
 * that another one of the same buffer holds is dropped (whether the buffer
 * is there is asked at each iteration, as ZeRO-3 holds gradients for a while). A tensor's region is
 * read by its producer's tiles and by every consumer's, so the list without
 * this zeroed twice what the rank's tiles touch (GPT searched plan, 2 ranks:
 * 11.1M elements per rank, 44 MB, 6-7 ms per iteration). */
static ss_status zero_list(ss_rt_state *s, ss_diag *d)
{
    cpu_state *cs = s->bs;
    const ss_graph *g = s->g;
    int cap = 0;
    ss_status st = SS_OK;
    for (int i = 0; i < s->n_tiles && st == SS_OK; i++) {
        const rt_tile *tl = &s->tiles[i];
        const ss_op *op = ss_graph_op(g, tl->op);
        const ss_kargs *a = &tl->a;
        for (int xi = 0; xi < a->n_x && st == SS_OK; xi++) {
            st = zero_add(cs, &cap, ss_rt_operand_tensor(op, xi), 0, &a->xr[xi], d);
        }
        for (int k = 0; k < a->n_y && st == SS_OK; k++) {
            int t = op->outputs[k];
            st = zero_add(cs, &cap, t, 0, &a->yr[k], d);
            if (st == SS_OK && ss_plan_config(s->p, tl->op)->red > 1)
                st = zero_add(cs, &cap, t, 1, &a->yr[k], d);
        }
    }
    if (st != SS_OK || !cs->n_zero)
        return st;
    qsort(cs->zero, (size_t)cs->n_zero, sizeof *cs->zero, cmp_zero);
    char *drop = calloc((size_t)cs->n_zero, 1);
    if (!drop)
        return ss_rt_nomem(d);
    /* within a buffer's run: a is dropped when another region holds it
     * strictly, or equals it and comes first */
    for (int i = 0, j; i < cs->n_zero; i = j) {
        for (j = i; j < cs->n_zero && !cmp_zero(&cs->zero[i], &cs->zero[j]); j++)
            ;
        for (int a = i; a < j; a++)
            for (int b = i; b < j && !drop[a]; b++)
                drop[a] = (char)(b != a && region_holds(&cs->zero[b].reg, &cs->zero[a].reg) &&
                                 (b < a || !region_holds(&cs->zero[a].reg, &cs->zero[b].reg)));
    }
    int n = 0;
    for (int a = 0; a < cs->n_zero; a++)
        if (!drop[a])
            cs->zero[n++] = cs->zero[a];
    free(drop);
    cs->n_zero = n;
    return SS_OK;
}

static int64_t contiguous_at(const int64_t *sh, int nd, const ss_region *r);

/* Where region r of tensor t lies in its buffer b when it is contiguous
 * there, else NULL (no buffer: NULL). */
static void *view_at(const ss_graph *g, int t, void *b, const ss_region *r)
{
    const ss_tensor *T = ss_graph_tensor(g, t);
    int64_t at = b ? contiguous_at(T->shape, T->ndim, r) : -1;
    return at >= 0 ? (char *)b + (size_t)at * ss_dtype_size(T->dtype) : NULL;
}

static ss_status cpu_prepare(ss_rt_state *s, const ss_rt_comm *c, ss_diag *d)
{
    cpu_state *cs = calloc(1, sizeof *cs);
    if (!cs)
        return ss_rt_nomem(d);
    s->bs = cs;
    ss_status st = ss_rt_devplan_make(s, &cs->plan, d);
    if (st != SS_OK)
        return st;
    int n = cs->plan.n_steps;
    cs->defer = calloc((size_t)n + 1, 1);
    cs->held = calloc((size_t)n + 1, sizeof *cs->held);
    cs->held_n = calloc((size_t)n + 1, sizeof *cs->held_n);
    cs->ck = calloc((size_t)n + 1, 1);
    cs->box = calloc((size_t)n + 1, sizeof *cs->box);
    cs->a2a = calloc((size_t)n + 1, sizeof *cs->a2a);
    cs->in_a2a = calloc((size_t)s->tg->n_tasks + 1, 1);
    if (!cs->defer || !cs->held || !cs->held_n || !cs->ck || !cs->box || !cs->a2a ||
        !cs->in_a2a)
        return ss_rt_nomem(d);
    for (int i = 0; i < n; i++)
        if (s->tg->kind[cs->plan.steps[i].task] == SS_TASK_COLLECTIVE &&
            (st = coll_prepare(s, i, d)) != SS_OK)
            return st;
    for (int i = 0; i < n; i++) {
        const ss_rt_step *x = &cs->plan.steps[i];
        const ss_op *op = s->tg->op[x->task] >= 0 ? ss_graph_op(s->g, s->tg->op[x->task]) : NULL;
        int ce = op && op->type == SS_OP_SOFTMAX_CE && s->ds.t[x->task].coll == SS_BUILD_COLL_PARTIAL &&
                 s->tg->kind[x->task] == SS_TASK_COLLECTIVE;
        /* an all-to-all and its transfers run at the all-to-all's turn */
        int a2a = cs->ck[i] == CK_ALLTOALL || cs->in_a2a[x->task];
        cs->defer[i] = (char)(x->stream != 0 && x->lays_back && !ce && !a2a &&
                              !ss_rt_z3_coll(s, x->task));
    }
    /* a tile reads its operands and output gradients, and writes an output
     * it does not sum, in the tensors themselves where its region is
     * contiguous there (views, as a framework's kernels run on its tensors):
     * no copy in or out. Gradients it adds (dx) have buffers of their own;
     * ZeRO-3 moves weights between buffers, so its tiles keep copies. */
    int views = ss_plan_settings_get(s->p)->distopt != SS_ZERO3;
    for (int i = 0; i < s->n_tiles; i++) {
        rt_tile *tl = &s->tiles[i];
        ss_kargs *a = &tl->a;
        const ss_op *op = ss_graph_op(s->g, tl->op);
        for (int x = 0; x < a->n_x; x++) {
            size_t b = ss_kernel_x_bytes(a, x);
            int t = ss_rt_operand_tensor(op, x);
            void *v = views ? view_at(s->g, t, s->buf[t], &a->xr[x]) : NULL;
            if (v)
                tl->view_x |= 1u << x;
            if (!(a->x[x] = v ? v : ss_rt_zalloc(b)) ||
                (a->xt[x] == SS_F32 && !(a->dx[x] = ss_rt_zalloc(b))))
                return ss_rt_nomem(d);
        }
        int red = ss_plan_config(s->p, tl->op)->red;
        for (int k = 0; k < a->n_y; k++) {
            size_t b = ss_kernel_y_bytes(a, k);
            int t = op->outputs[k];
            void *v = views && red <= 1 ? view_at(s->g, t, s->buf[t], &a->yr[k]) : NULL;
            void *dv = views ? view_at(s->g, t, s->grad[t], &a->yr[k]) : NULL;
            tl->view_y |= v ? 1u << k : 0;
            tl->view_dy |= dv ? 1u << k : 0;
            if (!(a->y[k] = v ? v : ss_rt_zalloc(b)) || !(a->dy[k] = dv ? dv : ss_rt_zalloc(b)))
                return ss_rt_nomem(d);
        }
        if (!(a->saved = ss_rt_zalloc(a->saved_bytes)) || !(a->work = ss_rt_zalloc(a->work_bytes)))
            return ss_rt_nomem(d);
    }
    if ((st = zero_list(s, d)) != SS_OK)
        return st;
    return ss_rt_z3_prepare(s, c, &cs->z3, d);
}

static ss_status grow_scratch(ss_rt_state *s, int64_t n, ss_diag *d)
{
    if (n <= s->cap_scratch)
        return SS_OK;
    float *p = realloc(s->scratch, (size_t)n * sizeof(float));
    if (!p)
        return ss_rt_nomem(d);
    s->scratch = p;
    s->cap_scratch = n;
    return SS_OK;
}

/* Reductions over a group of devices (ranks); one member: nothing. */
static ss_status group_reduce(rt_iter *x, const int *devs, int n, float *b, int64_t cnt, int op,
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
static ss_status ce_combine(rt_iter *x, int o, int first, int red, const int *devs, int n,
                            ss_diag *d)
{
    ss_rt_state *s = x->s;
    const ss_op *op = ss_graph_op(s->g, o);
    int t = op->outputs[0];
    const ss_tensor *T = ss_graph_tensor(s->g, t);
    rt_tile *loc[64];
    int nl = 0;
    for (int j = first; j < first + red; j++) {
        int i = ss_rt_local_tile(s, o, j);
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
            return ss_rt_nomem(d);
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
        ss_rt_region_io(T, s->buf[t], R, delta, 1);
    }
    if (n < 2)
        return SS_OK;
    ss_rt_region_io(T, s->buf[t], R, s->scratch, 0);
    if ((st = group_reduce(x, devs, n, s->scratch, rows, 0, d)) != SS_OK)
        return st;
    ss_rt_region_io(T, s->buf[t], R, s->scratch, 3);
    return SS_OK;
}

/* A tile's forward (bwd 0) or backward CPU kernel on its host buffers. */
static ss_status kernel_call(rt_tile *tl, int bwd, ss_diag *d)
{
    return bwd ? ss_kernel_backward(SS_BACKEND_CPU, &tl->a, d)
               : ss_kernel_forward(SS_BACKEND_CPU, &tl->a, d);
}

static ss_status run_compute(rt_iter *x, int task, ss_diag *d)
{
    ss_rt_state *s = x->s;
    const ss_taskgraph *tg = s->tg;
    rt_tile *tl = &s->tiles[s->task_tile[task]];
    ss_kargs *a = &tl->a;
    const ss_op *op = ss_graph_op(s->g, tl->op);
    int red = ss_plan_config(s->p, tl->op)->red;
    double w0 = ss_rt_now_ms(), c0 = ss_rt_cpu_ms();
    ss_status st;
    if (tg->kind[task] == SS_TASK_FWD) {
        for (int xi = 0; xi < a->n_x; xi++) {
            int t = ss_rt_operand_tensor(op, xi);
            if (!(tl->view_x >> xi & 1)) {
                ss_rt_region_io(ss_graph_tensor(s->g, t), s->buf[t], &a->xr[xi], a->x[xi], 0);
                x->copied += (double)ss_kernel_x_bytes(a, xi);
            }
        }
        if ((st = kernel_call(tl, 0, d)) != SS_OK)
            return st;
        for (int k = 0; k < a->n_y; k++) {
            int t = op->outputs[k];
            if (!(tl->view_y >> k & 1)) {
                ss_rt_region_io(ss_graph_tensor(s->g, t), s->buf[t], &a->yr[k], a->y[k],
                                red > 1 ? 1 : 3);
                x->copied += (double)ss_kernel_y_bytes(a, k);
            }
        }
    } else {
        /* a reordered tile's backward lays back its input gradients and its
         * deferred weight-gradient task (aux 1) the weight gradients, which
         * the backward kernel computed (the patent's split of one backward) */
        int late = tg->aux[task] == 1;
        for (int k = 0; k < a->n_y && !late; k++) {
            int t = op->outputs[k];
            if (!(tl->view_dy >> k & 1)) {
                ss_rt_region_io(ss_graph_tensor(s->g, t), s->grad[t], &a->yr[k], a->dy[k], 0);
                x->copied += (double)ss_kernel_y_bytes(a, k);
            }
        }
        if (!late && (st = kernel_call(tl, 1, d)) != SS_OK)
            return st;
        for (int xi = 0; xi < a->n_x; xi++) {
            int t = ss_rt_operand_tensor(op, xi);
            if (!a->dx[xi] || !s->grad[t] || (xi >= op->n_in && tl->q > 0) ||
                (xi < 32 && tl->dupdx >> xi & 1))
                continue; /* a weight's gradient, a summed copy: replica 0's only */
            if (tl->late && (xi >= op->n_in) != late)
                continue;
            ss_rt_region_io(ss_graph_tensor(s->g, t), s->grad[t], &a->xr[xi], a->dx[xi], 1);
        }
    }
    ss_rt_record_compute(x, task, w0, c0);
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

static void run_update(rt_iter *x, int task)
{
    ss_rt_state *s = x->s;
    const ss_build_desc *e = &s->ds.t[task];
    const ss_tensor *T = ss_graph_tensor(s->g, e->tensor);
    double w0 = ss_rt_now_ms(), c0 = ss_rt_cpu_ms();
    upd_ctx u = {s, e->tensor, 0, 0, 0, x->lr, 1 - pow(0.9, s->step), 1 - pow(0.999, s->step)};
    ss_rt_slice_of(ss_region_volume(&e->reg), e->split_k, e->split_n, &u.lo, &u.hi);
    ss_rt_walk(T->shape, T->ndim, &e->reg, upd_row, &u);
    ss_rt_record_compute(x, task, w0, c0);
}

/* A transfer: the sender packs its region, the receiver lays it back (a
 * value overwrites, a gradient adds). A region contiguous in its tensor is
 * sent from it and a value received into it: no packing copies. */
static ss_status run_xfer(rt_iter *x, int step, ss_diag *d)
{
    ss_rt_state *s = x->s;
    int task = s->mine[step], defer = ((cpu_state *)s->bs)->defer[step];
    if (((cpu_state *)s->bs)->in_a2a[task]) { /* its all-to-all moves it */
        double w = ss_rt_now_ms();
        ss_rt_record(x, task, 1, w, w, 0, 1);
        return SS_OK;
    }
    const ss_build_desc *e = &s->ds.t[task];
    const ss_tensor *T = ss_graph_tensor(s->g, e->tensor);
    void *src = e->grad ? (void *)s->grad[e->tensor] : s->buf[e->tensor];
    int64_t n = ss_region_volume(&e->reg), lo = 0, hi = n;
    if (!src || !ss_rt_xfer_movable(T, e->grad))
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "runtime: a transfer of %s (%s) is not f32",
                           T->name, ss_dtype_name(T->dtype)),
               SS_ERR_UNSUPPORTED;
    if (e->parts > 1) {
        int k = ss_rt_sg_slice(s, task);
        if (k < 0)
            return ss_diag_set(d, SS_ERR_INVALID, "runtime: rank %d: a scatter-gather send of %s "
                               "has no all-gather naming its receiver", s->rank, T->name);
        ss_rt_slice_of(n, k, e->parts, &lo, &hi);
    }
    ss_status st = grow_scratch(s, n, d);
    if (st != SS_OK)
        return st;
    int64_t at = e->parts > 1 ? -1 : contiguous_at(T->shape, T->ndim, &e->reg);
    float *in_place = at >= 0 ? (float *)((char *)src + (size_t)at * ss_dtype_size(T->dtype)) : NULL;
    double w0 = ss_rt_now_ms();
    if (e->src == s->rank) {
        if (!in_place)
            ss_rt_region_io(T, src, &e->reg, s->scratch, 0);
        st = x->c->send_f32(x->c->ctx, e->dst, (in_place ? in_place : s->scratch) + lo, hi - lo, d);
    } else if (in_place && !defer && !e->grad) {
        st = x->c->recv_f32(x->c->ctx, e->src, in_place, n, d);
    } else {
        /* the whole region goes back: the received part (a slice of it for a
         * scatter-gather send), around it the value held, or no gradient */
        float *into = s->scratch;
        if (defer && (st = hold(s, step, n, &into, d)) != SS_OK)
            return st;
        if (hi - lo < n && e->grad)
            memset(into, 0, (size_t)n * sizeof(float));
        else if (hi - lo < n)
            ss_rt_region_io(T, src, &e->reg, into, 0);
        if ((st = x->c->recv_f32(x->c->ctx, e->src, into + lo, hi - lo, d)) == SS_OK && !defer)
            ss_rt_region_io(T, src, &e->reg, into, e->grad ? 1 : 3);
    }
    double w1 = ss_rt_now_ms();
    x->comm_ms += w1 - w0;
    x->nxfer++;
    x->bytes += (double)(hi - lo) * sizeof(float);
    ss_rt_record(x, task, 1, w0, w1, (double)(hi - lo) * sizeof(float), 1);
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

/* An all-reduce whose items are all contiguous f32 regions:
 * its part summed in place, item by item (no packing: the bytes the
 * simulator prices, nothing more). *done 0 when it does not apply. */
static ss_status coll_in_place(rt_iter *x, const ss_build_desc *e, const int *devs, int *done,
                               ss_diag *d)
{
    ss_rt_state *s = x->s;
    int64_t total = 0;
    *done = 0;
    if (e->gather || e->coll == SS_BUILD_COLL_SENDGATHER)
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
    ss_rt_slice_of(total, e->part, e->n_parts, &lo, &hi);
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

/* A collective's packed items back into the tensors. */
static void lay_coll(ss_rt_state *s, const ss_build_desc *e, float *buf)
{
    int64_t at = 0;
    for (int i = 0; i < e->n_item; i++) {
        const ss_build_item *it = &s->ds.items[e->item_off + i];
        void *b = e->grad ? (void *)s->grad[it->tensor] : s->buf[it->tensor];
        ss_rt_region_io(ss_graph_tensor(s->g, it->tensor), b, &it->reg, buf + at, 3);
        at += ss_region_volume(&it->reg);
    }
}

/* Deferred step j's result into the tensors (nothing when not deferred). */
static void lay_back(ss_rt_state *s, int j)
{
    cpu_state *cs = s->bs;
    if (!cs->defer[j])
        return;
    const ss_build_desc *e = &s->ds.t[s->mine[j]];
    if (s->tg->kind[s->mine[j]] == SS_TASK_XFER)
        ss_rt_region_io(ss_graph_tensor(s->g, e->tensor),
                        e->grad ? (void *)s->grad[e->tensor] : s->buf[e->tensor], &e->reg,
                        cs->held[j], e->grad ? 1 : 3);
    else
        lay_coll(s, e, cs->held[j]);
}

typedef struct box_ctx {
    float *item, *dense;
    int unpack;
} box_ctx;

static void box_row(void *c, int64_t toff, int64_t roff, int64_t len)
{
    box_ctx *x = c;
    if (x->unpack)
        memcpy(x->item + toff, x->dense + roff, (size_t)len * sizeof(float));
    else
        memcpy(x->dense + roff, x->item + toff, (size_t)len * sizeof(float));
}

/* Member k's part (of n) of collective step `step`'s items laid end to end
 * in buf, within elements [plo, phi) of that layout: copied into dense
 * (unpack 0), or from dense into buf (unpack 1); dense NULL: counted only.
 * A part is slice k of each item's elements (ss_rt_slice_of), or the
 * member's box of each item (cpu_state.box). Returns its elements. */
static int64_t part_io(const ss_rt_state *s, int step, int k, float *buf, int64_t plo,
                       int64_t phi, float *dense, int unpack)
{
    const cpu_state *cs = s->bs;
    const ss_build_desc *e = &s->ds.t[s->mine[step]];
    int64_t at = 0, got = 0;
    for (int i = 0; i < e->n_item; i++) {
        const ss_region *R = &s->ds.items[e->item_off + i].reg;
        int64_t v = ss_region_volume(R);
        if (cs->box[step]) {
            const ss_region *B = &cs->box[step][k * e->n_item + i];
            int64_t bv = ss_region_volume(B);
            if (dense && bv > 0) {
                int64_t sh[SS_MAX_DIMS];
                ss_region rel = *B;
                for (int q = 0; q < R->ndim; q++) {
                    sh[q] = R->r[q].hi - R->r[q].lo;
                    rel.r[q].lo -= R->r[q].lo;
                    rel.r[q].hi -= R->r[q].lo;
                }
                box_ctx c = {buf + at, dense + got, unpack};
                ss_rt_walk(sh, R->ndim, &rel, box_row, &c);
            }
            got += bv;
        } else {
            int64_t lo, hi;
            ss_rt_slice_of(v, k, e->n_dev, &lo, &hi);
            lo = at + lo > plo ? at + lo : plo;
            hi = at + hi < phi ? at + hi : phi;
            if (lo < hi && dense && unpack)
                memcpy(buf + lo, dense + got, (size_t)(hi - lo) * sizeof(float));
            else if (lo < hi && dense)
                memcpy(dense + got, buf + lo, (size_t)(hi - lo) * sizeof(float));
            got += lo < hi ? hi - lo : 0;
        }
        at += v;
    }
    return got;
}

static ss_status grow_pack(ss_rt_state *s, int64_t n, ss_diag *d)
{
    cpu_state *cs = s->bs;
    if (n <= cs->cap_pack)
        return SS_OK;
    float *p = realloc(cs->pack, (size_t)n * sizeof(float));
    if (!p)
        return ss_rt_nomem(d);
    cs->pack = p;
    cs->cap_pack = n;
    return SS_OK;
}

/* A reduce-scatter (ck CK_RSCATTER) or all-gather (CK_ALLGATHER) of the
 * items laid end to end in buf, in place there: a reduce-scatter leaves
 * this member's part summed over the group (elsewhere buf keeps this
 * member's own values), an all-gather every member's part. A split
 * bucket's reduce-scatter: its part [plo, phi) of the layout only. */
static ss_status slice_coll(rt_iter *x, int step, int ck, float *buf, int64_t plo, int64_t phi,
                            ss_diag *d)
{
    ss_rt_state *s = x->s;
    const ss_build_desc *e = &s->ds.t[s->mine[step]];
    const int *devs = s->ds.devs + e->dev_off;
    int n = e->n_dev, me = 0;
    while (devs[me] != s->rank)
        me++;
    int64_t *cnt = malloc((size_t)n * sizeof *cnt), all = 0;
    if (!cnt)
        return ss_rt_nomem(d);
    for (int k = 0; k < n; k++)
        all += cnt[k] = part_io(s, step, k, buf, plo, phi, NULL, 0);
    ss_status st = grow_pack(s, all + cnt[me], d);
    cpu_state *cs = s->bs;
    if (st == SS_OK && ck == CK_RSCATTER) {
        int64_t off = 0;
        for (int k = 0; k < n; k++)
            off += part_io(s, step, k, buf, plo, phi, cs->pack + off, 0);
        st = x->c->reduce_scatter_f32(x->c->ctx, devs, n, cs->pack, cs->pack + all, cnt, d);
        if (st == SS_OK)
            part_io(s, step, me, buf, plo, phi, cs->pack + all, 1);
        x->bytes += (double)all * sizeof(float);
    } else if (st == SS_OK) {
        float *send = cs->pack + all;
        part_io(s, step, me, buf, plo, phi, send, 0);
        st = x->c->allgather_f32(x->c->ctx, devs, n, send, cs->pack, cnt, d);
        int64_t off = 0;
        for (int k = 0; k < n && st == SS_OK; k++)
            off += part_io(s, step, k, buf, plo, phi, cs->pack + off, 1);
        x->bytes += (double)all * sizeof(float);
    }
    free(cnt);
    return st;
}

/* An all-to-all: its transfers' regions (a2a_prepare) sent to and received
 * from each member in one exchange, laid back as the transfers would (a
 * value overwrites, a gradient adds). */
static ss_status run_a2a(rt_iter *x, int step, ss_diag *d)
{
    ss_rt_state *s = x->s;
    cpu_state *cs = s->bs;
    const int *a = cs->a2a[step], *grp = a + 2, *xs = grp + a[0];
    int n = a[0], nx = a[1];
    if (n < 2)
        return SS_OK;
    int64_t *sc = calloc((size_t)(2 * n), sizeof *sc), *rc = sc + n, ns = 0, nr = 0;
    if (!sc)
        return ss_rt_nomem(d);
    for (int k = 0; k < nx; k++) {
        const ss_build_desc *e = &s->ds.t[xs[k]];
        int64_t v = ss_region_volume(&e->reg);
        for (int j = 0; j < n; j++) {
            if (e->src == s->rank && e->dst == grp[j])
                sc[j] += v, ns += v;
            if (e->dst == s->rank && e->src == grp[j])
                rc[j] += v, nr += v;
        }
    }
    ss_status st = grow_pack(s, ns + nr, d);
    float *send = cs->pack, *recv = cs->pack + ns;
    /* block j: the transfers to (from) member j, by task id */
    for (int pass = 0; pass < 2 && st == SS_OK; pass++) {
        int64_t off = 0;
        for (int j = 0; j < n; j++)
            for (int k = 0; k < nx; k++) {
                const ss_build_desc *e = &s->ds.t[xs[k]];
                const ss_tensor *T = ss_graph_tensor(s->g, e->tensor);
                void *b = e->grad ? (void *)s->grad[e->tensor] : s->buf[e->tensor];
                if (!b || T->dtype != SS_F32) {
                    st = ss_diag_set(d, SS_ERR_UNSUPPORTED,
                                     "runtime: an all-to-all of %s (%s) is not f32", T->name,
                                     ss_dtype_name(T->dtype));
                    break;
                }
                if (!pass && e->src == s->rank && e->dst == grp[j]) {
                    ss_rt_region_io(T, b, &e->reg, send + off, 0);
                    off += ss_region_volume(&e->reg);
                } else if (pass && e->dst == s->rank && e->src == grp[j]) {
                    ss_rt_region_io(T, b, &e->reg, recv + off, e->grad ? 1 : 3);
                    off += ss_region_volume(&e->reg);
                }
            }
        if (!pass && st == SS_OK)
            st = x->c->alltoall_f32(x->c->ctx, grp, n, send, sc, recv, rc, d);
    }
    x->bytes += (double)(ns + nr) * sizeof(float);
    free(sc);
    return st;
}

static ss_status run_coll(rt_iter *x, int step, ss_diag *d)
{
    ss_rt_state *s = x->s;
    cpu_state *cs = s->bs;
    int task = s->mine[step], defer = cs->defer[step], ck = cs->ck[step];
    const ss_build_desc *e = &s->ds.t[task];
    const int *devs = s->ds.devs + e->dev_off;
    double w0 = ss_rt_now_ms();
    ss_status st = SS_OK;
    int done = 0;
    const ss_op *op = e->unit >= 0 ? ss_graph_op(s->g, s->tg->op[task]) : NULL;
    if (ck == CK_ALLTOALL) {
        st = run_a2a(x, step, d);
    } else if (op && op->type == SS_OP_SOFTMAX_CE && e->coll == SS_BUILD_COLL_PARTIAL) {
        st = ce_combine(x, op->id, e->first_tile, e->red, devs, e->n_dev, d);
    } else if (e->n_dev > 1 &&
               (defer || ck != CK_ALLREDUCE ||
                (st = coll_in_place(x, e, devs, &done, d)) == SS_OK) &&
               !done) {
        int64_t total = 0;
        for (int i = 0; i < e->n_item; i++)
            total += ss_region_volume(&s->ds.items[e->item_off + i].reg);
        float *buf = s->scratch;
        if ((st = defer ? hold(s, step, total, &buf, d) : grow_scratch(s, total, d)) != SS_OK)
            return st;
        if (!defer)
            buf = s->scratch;
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
            ss_rt_region_io(T, b, &it->reg, buf + at, 0);
            at += ss_region_volume(&it->reg);
        }
        int64_t lo, hi;
        ss_rt_slice_of(total, e->part, e->n_parts, &lo, &hi);
        st = ck == CK_ALLREDUCE ? group_reduce(x, devs, e->n_dev, buf + lo, hi - lo, 0, d)
                                : slice_coll(x, step, ck, buf, lo, hi, d);
        if (st != SS_OK)
            return st;
        if (!defer)
            lay_coll(s, e, buf);
    }
    double w1 = ss_rt_now_ms();
    x->comm_ms += w1 - w0;
    x->ncoll++;
    ss_rt_record(x, task, 1, w0, w1, s->tg->bytes[task], 1);
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
    const cpu_state *cs = s->bs;
    for (int i = 0; i < cs->n_zero; i++) {
        const zero_item *z = &cs->zero[i];
        void *b = z->buf ? s->buf[z->t] : (void *)s->grad[z->t];
        if (b) /* (a tensor without a gradient; ZeRO-3's gradient not held now) */
            ss_rt_region_io(ss_graph_tensor(g, z->t), b, &z->reg, NULL, 4);
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
            if (!(tl->view_dy >> k & 1))
                ss_rt_region_io(ss_graph_tensor(g, t), s->grad[t], &tl->a.yr[k], tl->a.dy[k], 3);
        }
    }
}

static ss_status iteration(rt_iter *x, ss_diag *d)
{
    ss_rt_state *s = x->s;
    rt_z3 *z3 = ((cpu_state *)s->bs)->z3;
    iteration_start(s);
    s->step++;
    if (z3 && ss_rt_z3_start(z3, s, d) != SS_OK)
        return d->status;
    const ss_rt_devplan *p = &((cpu_state *)s->bs)->plan;
    for (int i = 0; i < s->n_mine; i++) {
        int t = s->mine[i];
        ss_status st = SS_OK;
        for (int k = 0; k < p->steps[i].n_flush; k++)
            lay_back(s, p->flush[p->steps[i].flush_off + k]);
        if (z3 && (st = ss_rt_z3_before(z3, s, i, d)) != SS_OK)
            return st;
        switch ((ss_task_kind)s->tg->kind[t]) {
        case SS_TASK_FWD:
        case SS_TASK_BWD:
            st = run_compute(x, t, d);
            break;
        case SS_TASK_UPDATE:
            if (!z3 || !ss_rt_z3_update(z3, x, t))
                run_update(x, t);
            break;
        case SS_TASK_XFER:
            st = run_xfer(x, i, d);
            break;
        case SS_TASK_COLLECTIVE:
            st = run_coll(x, i, d);
            break;
        default:
            break;
        }
        if (st != SS_OK)
            return st;
        if (z3)
            ss_rt_z3_after(z3, s, i);
    }
    for (int k = 0; k < p->n_end; k++)
        lay_back(s, p->flush[p->end_off + k]);
    return SS_OK;
}

/* The loss over the regions of the loss tiles this rank owns, summed over
 * the ranks. */
static ss_status cpu_loss(rt_iter *x, double *sum, ss_diag *d)
{
    const ss_rt_state *s = x->s;
    double acc = 0;
    for (int i = 0; i < s->n_tiles; i++) {
        const rt_tile *tl = &s->tiles[i];
        if (!ss_rt_loss_owner(s, tl))
            continue;
        int t = ss_graph_op(s->g, tl->op)->outputs[0];
        int64_t n = ss_region_volume(&tl->a.yr[0]);
        float *tmp = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
        if (!tmp)
            return ss_rt_nomem(d);
        ss_rt_region_io(ss_graph_tensor(s->g, t), s->buf[t], &tl->a.yr[0], tmp, 0);
        for (int64_t e = 0; e < n; e++)
            acc += tmp[e];
        free(tmp);
    }
    *sum = acc;
    return x->c->allreduce_f64(x->c->ctx, sum, 1, 0, d);
}

static ss_status cpu_readback(ss_rt_state *s, ss_diag *d)
{
    /* the host buffers are the tensors, but for ZeRO-3's sharded weights */
    cpu_state *cs = s->bs;
    s->param_peak = ss_rt_z3_peak(cs->z3, s);
    return cs->z3 ? ss_rt_z3_readback(cs->z3, s, d) : SS_OK;
}

const rt_backend ss_rt_cpu_backend = {"cpu", cpu_prepare, iteration, cpu_loss, cpu_readback,
                                      cpu_release};
