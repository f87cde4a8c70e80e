/*
 * zero3.c — ZeRO-3 / FSDP parameter sharding in the CPU backend
 * (runtime/zero3.h has the rules): persistent slices of the sharded
 * weights, their gradients and Adam moments; full copies materialized by
 * the task graph's parameter all-gathers and freed after their last
 * reader; full gradients drained by each per-micro-batch reduce-scatter.
 * Invariant: a sharded weight's full buffers exist only between the task
 * that makes them (a gather, the first backward adding a gradient) and the
 * task the graph ends them with (its gather's last reader here, the
 * reduce-scatter); the bytes held are counted at every allocation and free.
 */
#include "runtime/zero3.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct z3w {
    int t;              /* the weight tensor */
    ss_region reg;      /* its shard region */
    int k, n;           /* this rank's place in the gather's group, the group's size */
    const int *devs;    /* the group (s->ds.devs) */
    int64_t lo, hi;     /* the slice of reg's elements held here */
    float *w, *g, *m, *v; /* [hi - lo]: value, gradient, Adam moments */
    int refs;           /* readers of the live gathered copy still to run */
    int drains, left;   /* gradient reduce-scatters holding it per iteration, still to run */
} z3w;

struct rt_z3 {
    int *of;            /* [n_t] index into ws, -1 */
    z3w *ws;
    int n, cap;
    int *readers;       /* [n_mine] a gather step's local readers */
    int *rel, *rel_next, *rel_step; /* reader task -> its gathers (steps), a list */
    int n_rel;
    int64_t held, peak;
    const ss_rt_comm *c;
};

static void add_held(rt_z3 *z, int64_t b)
{
    z->held += b;
    z->peak = z->held > z->peak ? z->held : z->peak;
}

int ss_rt_z3_coll(const ss_rt_state *s, int task)
{
    if (ss_plan_settings_get(s->p)->distopt != SS_ZERO3 ||
        s->tg->kind[task] != SS_TASK_COLLECTIVE)
        return 0;
    int c = s->ds.t[task].coll;
    return c == SS_BUILD_COLL_PARAM || c == SS_BUILD_COLL_GRAD;
}

static ss_status unsupported(ss_diag *d, const char *what, const ss_rt_state *s, int t)
{
    return ss_diag_set(d, SS_ERR_UNSUPPORTED, "runtime: rank %d: %s %s (ZeRO-3)", s->rank, what,
                       ss_graph_tensor(s->g, t)->name),
           SS_ERR_UNSUPPORTED;
}

/* Register the weights of gather step i, count its readers here and link
 * each reader to it. */
static ss_status add_gather(rt_z3 *z, ss_rt_state *s, int i, ss_diag *d)
{
    int t = s->mine[i];
    const ss_build_desc *e = &s->ds.t[t];
    const int *devs = s->ds.devs + e->dev_off;
    int me = 0;
    while (me < e->n_dev && devs[me] != s->rank)
        me++;
    for (int j = 0; j < e->n_item; j++) {
        const ss_build_item *it = &s->ds.items[e->item_off + j];
        int w = it->tensor;
        if (z->of[w] >= 0) {
            const z3w *x = &z->ws[z->of[w]];
            if (x->k != me || x->n != e->n_dev ||
                memcmp(&x->reg, &it->reg, sizeof x->reg) != 0 ||
                memcmp(x->devs, devs, (size_t)e->n_dev * sizeof *devs) != 0)
                return unsupported(d, "holds two shards of", s, w);
            continue;
        }
        if (ss_grow((void **)&z->ws, &z->cap, z->n + 1, sizeof *z->ws))
            return ss_rt_nomem(d);
        z3w *x = &z->ws[z->n];
        memset(x, 0, sizeof *x);
        x->t = w;
        x->reg = it->reg;
        x->k = me;
        x->n = e->n_dev;
        x->devs = devs;
        ss_rt_slice_of(ss_region_volume(&it->reg), me, e->n_dev, &x->lo, &x->hi);
        z->of[w] = z->n++;
    }
    const ss_taskgraph *tg = s->tg;
    for (int q = tg->succ_off[t]; q < tg->succ_off[t + 1]; q++) {
        int r = tg->succ[q];
        if ((tg->kind[r] != SS_TASK_FWD && tg->kind[r] != SS_TASK_BWD) || s->task_tile[r] < 0)
            continue;
        z->readers[i]++;
        z->rel_next[z->n_rel] = z->rel[r];
        z->rel_step[z->n_rel] = i;
        z->rel[r] = z->n_rel++;
    }
    return SS_OK;
}

/* The weight operand buffers (value; gradient when f32) of tile tl. */
static int64_t operand_bytes(const rt_tile *tl, int xi)
{
    int64_t b = (int64_t)ss_kernel_x_bytes(&tl->a, xi);
    return tl->a.xt[xi] == SS_F32 ? 2 * b : b;
}

/* What is held whatever the plan: the unsharded weights the rank's tiles
 * read, full (value, gradient, Adam moments), and their operand copies. */
static int64_t fixed_bytes(const rt_z3 *z, const ss_rt_state *s)
{
    int64_t b = 0;
    char *seen = calloc((size_t)s->n_t + 1, 1);
    for (int i = 0; i < s->n_tiles; i++) {
        const rt_tile *tl = &s->tiles[i];
        const ss_op *op = ss_graph_op(s->g, tl->op);
        for (int xi = op->n_in; xi < tl->a.n_x; xi++) {
            int w = ss_rt_operand_tensor(op, xi);
            if (z && z->of[w] >= 0)
                continue;
            b += operand_bytes(tl, xi);
            if (seen && !seen[w]) {
                seen[w] = 1;
                b += s->vol[w] * (int64_t)sizeof(float) * (s->adam_m ? 4 : 2);
            }
        }
    }
    free(seen);
    return b;
}

int64_t ss_rt_z3_peak(const rt_z3 *z, const ss_rt_state *s)
{
    return fixed_bytes(z, s) + (z ? z->peak : 0);
}

static void free_f(void **p)
{
    free(*p);
    *p = NULL;
}

ss_status ss_rt_z3_prepare(ss_rt_state *s, const ss_rt_comm *c, rt_z3 **out, ss_diag *d)
{
    *out = NULL;
    if (ss_plan_settings_get(s->p)->distopt != SS_ZERO3)
        return SS_OK;
    const ss_taskgraph *tg = s->tg;
    int nt = tg->n_tasks;
    rt_z3 *z = calloc(1, sizeof *z);
    if (!z)
        return ss_rt_nomem(d);
    z->c = c;
    z->of = malloc((size_t)(s->n_t + 1) * sizeof *z->of);
    z->readers = calloc((size_t)s->n_mine + 1, sizeof *z->readers);
    z->rel = malloc((size_t)(nt + 1) * sizeof *z->rel);
    int nsucc = tg->succ_off[nt];
    z->rel_next = malloc((size_t)(nsucc + 1) * sizeof *z->rel_next);
    z->rel_step = malloc((size_t)(nsucc + 1) * sizeof *z->rel_step);
    ss_status st = SS_OK;
    if (!z->of || !z->readers || !z->rel || !z->rel_next || !z->rel_step) {
        st = ss_rt_nomem(d);
        goto fail;
    }
    for (int t = 0; t < s->n_t; t++)
        z->of[t] = -1;
    for (int t = 0; t < nt; t++)
        z->rel[t] = -1;
    for (int i = 0; i < s->n_mine; i++) {
        int t = s->mine[i];
        if (tg->kind[t] == SS_TASK_COLLECTIVE && s->ds.t[t].coll == SS_BUILD_COLL_PARAM &&
            (st = add_gather(z, s, i, d)) != SS_OK)
            goto fail;
    }
    /* the updates write the slices held; the reduce-scatters per weight */
    for (int i = 0; i < s->n_mine; i++) {
        int t = s->mine[i];
        const ss_build_desc *e = &s->ds.t[t];
        for (int j = 0; tg->kind[t] == SS_TASK_COLLECTIVE && e->coll == SS_BUILD_COLL_GRAD &&
                        j < e->n_item;
             j++)
            if (z->of[s->ds.items[e->item_off + j].tensor] >= 0)
                z->ws[z->of[s->ds.items[e->item_off + j].tensor]].drains++;
        if (tg->kind[t] == SS_TASK_UPDATE && z->of[e->tensor] < 0 && e->split_n > 1) {
            /* a sharded update with no gather: its slice would never reach
             * the other members */
            st = unsupported(d, "updates a slice, but gathers no copy, of", s, e->tensor);
            goto fail;
        }
        if (tg->kind[t] != SS_TASK_UPDATE || z->of[e->tensor] < 0)
            continue;
        const z3w *x = &z->ws[z->of[e->tensor]];
        if (e->split_k != x->k || e->split_n != x->n ||
            memcmp(&e->reg, &x->reg, sizeof e->reg) != 0) {
            st = unsupported(d, "updates another slice than it gathers of", s, e->tensor);
            goto fail;
        }
    }
    /* the slices from the seeded full buffers, which are then freed */
    for (int j = 0; j < z->n; j++) {
        z3w *x = &z->ws[j];
        int64_t v = ss_region_volume(&x->reg), m = x->hi - x->lo;
        float *tmp = malloc((size_t)(v > 0 ? v : 1) * sizeof *tmp);
        x->w = malloc((size_t)(m > 0 ? m : 1) * sizeof *x->w);
        x->g = calloc((size_t)(m > 0 ? m : 1), sizeof *x->g);
        if (s->adam_m) {
            x->m = calloc((size_t)(m > 0 ? m : 1), sizeof *x->m);
            x->v = calloc((size_t)(m > 0 ? m : 1), sizeof *x->v);
        }
        if (!tmp || !x->w || !x->g || (s->adam_m && (!x->m || !x->v))) {
            free(tmp);
            st = ss_rt_nomem(d);
            goto fail;
        }
        ss_rt_region_io(ss_graph_tensor(s->g, x->t), s->buf[x->t], &x->reg, tmp, 0);
        memcpy(x->w, tmp + x->lo, (size_t)m * sizeof *tmp);
        free(tmp);
        add_held(z, m * (int64_t)sizeof(float) * (s->adam_m ? 4 : 2));
    }
    for (int j = 0; j < z->n; j++) {
        int w = z->ws[j].t;
        free_f(&s->buf[w]);
        free_f((void **)&s->grad[w]);
        if (s->adam_m) {
            free_f((void **)&s->adam_m[w]);
            free_f((void **)&s->adam_v[w]);
        }
    }
    for (int i = 0; i < s->n_tiles; i++) {
        ss_kargs *a = &s->tiles[i].a;
        const ss_op *op = ss_graph_op(s->g, s->tiles[i].op);
        for (int xi = op->n_in; xi < a->n_x; xi++)
            if (z->of[ss_rt_operand_tensor(op, xi)] >= 0) {
                free_f(&a->x[xi]);
                free_f(&a->dx[xi]);
            }
    }
    *out = z;
    return SS_OK;
fail:
    ss_rt_z3_free(z);
    return st;
}

ss_status ss_rt_z3_start(rt_z3 *z, ss_rt_state *s, ss_diag *d)
{
    for (int j = 0; j < z->n; j++) {
        z3w *x = &z->ws[j];
        if (s->buf[x->t] || s->grad[x->t] || x->refs)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "runtime: rank %d: the full copy of %s (ZeRO-3) outlived the "
                               "iteration",
                               s->rank, ss_graph_tensor(s->g, x->t)->name),
                   SS_ERR_INVALID;
        memset(x->g, 0, (size_t)(x->hi - x->lo) * sizeof *x->g);
        x->left = x->drains;
    }
    return SS_OK;
}

/* A zeroed full-size buffer of weight w's value (or gradient) when none. */
static ss_status ensure_full(rt_z3 *z, ss_rt_state *s, void **slot, int w, ss_diag *d)
{
    if (*slot)
        return SS_OK;
    if (!(*slot = ss_rt_zalloc((size_t)s->vol[w] * sizeof(float))))
        return ss_rt_nomem(d);
    add_held(z, s->vol[w] * (int64_t)sizeof(float));
    return SS_OK;
}

static void drop_full(rt_z3 *z, ss_rt_state *s, void **slot, int w)
{
    if (!*slot)
        return;
    free_f(slot);
    z->held -= s->vol[w] * (int64_t)sizeof(float);
}

/* A gather: the weights' full buffers, this member's slice laid in them. */
static ss_status gather_before(rt_z3 *z, ss_rt_state *s, int step, ss_diag *d)
{
    const ss_build_desc *e = &s->ds.t[s->mine[step]];
    for (int j = 0; j < e->n_item; j++) {
        const z3w *x = &z->ws[z->of[s->ds.items[e->item_off + j].tensor]];
        ss_status st = ensure_full(z, s, &s->buf[x->t], x->t, d);
        int64_t v = ss_region_volume(&x->reg);
        float *tmp = st == SS_OK ? malloc((size_t)(v > 0 ? v : 1) * sizeof *tmp) : NULL;
        if (st != SS_OK || !tmp)
            return st != SS_OK ? st : ss_rt_nomem(d);
        const ss_tensor *T = ss_graph_tensor(s->g, x->t);
        ss_rt_region_io(T, s->buf[x->t], &x->reg, tmp, 0);
        memcpy(tmp + x->lo, x->w, (size_t)(x->hi - x->lo) * sizeof *tmp);
        ss_rt_region_io(T, s->buf[x->t], &x->reg, tmp, 3);
        free(tmp);
        z->ws[z->of[x->t]].refs += z->readers[step];
    }
    return SS_OK;
}

static ss_status alloc_copy(rt_z3 *z, void **slot, size_t b, ss_diag *d)
{
    if (!(*slot = ss_rt_zalloc(b)))
        return ss_rt_nomem(d);
    add_held(z, (int64_t)b);
    return SS_OK;
}

/* A reader's operand copies of the sharded weights (allocated; a backward
 * reloads them from its gather's copy) and, for a backward, the gradient
 * buffers it adds into. */
static ss_status reader_before(rt_z3 *z, ss_rt_state *s, int task, ss_diag *d)
{
    rt_tile *tl = &s->tiles[s->task_tile[task]];
    ss_kargs *a = &tl->a;
    const ss_op *op = ss_graph_op(s->g, tl->op);
    int bwd = s->tg->kind[task] == SS_TASK_BWD, late = bwd && s->tg->aux[task] == 1;
    for (int xi = op->n_in; xi < a->n_x; xi++) {
        int w = ss_rt_operand_tensor(op, xi);
        if (z->of[w] < 0)
            continue;
        ss_status st = SS_OK;
        if (!late) {
            size_t b = ss_kernel_x_bytes(a, xi);
            if (!s->buf[w])
                return ss_diag_set(d, SS_ERR_INVALID,
                                   "runtime: rank %d: op %s reads %s (ZeRO-3) with no gathered "
                                   "copy",
                                   s->rank, op->name, ss_graph_tensor(s->g, w)->name),
                       SS_ERR_INVALID;
            if (!a->x[xi] && (st = alloc_copy(z, &a->x[xi], b, d)) != SS_OK)
                return st;
            if (bwd)
                ss_rt_region_io(ss_graph_tensor(s->g, w), s->buf[w], &a->xr[xi], a->x[xi], 0);
            if (bwd && a->xt[xi] == SS_F32 && !a->dx[xi] &&
                (st = alloc_copy(z, &a->dx[xi], b, d)) != SS_OK)
                return st;
        }
        if (bwd && a->xt[xi] == SS_F32 &&
            (st = ensure_full(z, s, (void **)&s->grad[w], w, d)) != SS_OK)
            return st;
    }
    return SS_OK;
}

ss_status ss_rt_z3_before(rt_z3 *z, ss_rt_state *s, int step, ss_diag *d)
{
    int t = s->mine[step], k = s->tg->kind[t];
    const ss_build_desc *e = &s->ds.t[t];
    if (k == SS_TASK_COLLECTIVE && e->coll == SS_BUILD_COLL_PARAM)
        return gather_before(z, s, step, d);
    if (k == SS_TASK_COLLECTIVE && e->coll == SS_BUILD_COLL_GRAD) {
        for (int j = 0; j < e->n_item; j++) {
            int w = s->ds.items[e->item_off + j].tensor;
            ss_status st = z->of[w] >= 0 ? ensure_full(z, s, (void **)&s->grad[w], w, d) : SS_OK;
            if (st != SS_OK)
                return st;
        }
        return SS_OK;
    }
    if ((k == SS_TASK_FWD || k == SS_TASK_BWD) && s->task_tile[t] >= 0)
        return reader_before(z, s, t, d);
    return SS_OK;
}

/* A reduce-scatter's result: this member's slice of each sharded weight's
 * gradient, within the collective's part of its items laid end to end (a
 * split bucket's part; else all), added into its gradient slice, and that
 * part of the full gradient zeroed (what every member added there is now
 * counted); the full gradient freed when the bucket is not split, or after
 * the weight's last reduce-scatter of the iteration. */
static void drain(rt_z3 *z, ss_rt_state *s, const ss_build_desc *e)
{
    int64_t total = 0, at = 0, plo, phi;
    for (int j = 0; j < e->n_item; j++)
        total += ss_region_volume(&s->ds.items[e->item_off + j].reg);
    ss_rt_slice_of(total, e->part, e->n_parts, &plo, &phi);
    for (int j = 0; j < e->n_item; j++) {
        int w = s->ds.items[e->item_off + j].tensor;
        int64_t v = ss_region_volume(&s->ds.items[e->item_off + j].reg), o = at;
        at += v;
        if (z->of[w] < 0 || !s->grad[w])
            continue;
        z3w *x = &z->ws[z->of[w]];
        int64_t a = plo - o > 0 ? plo - o : 0, b = phi - o < v ? phi - o : v;
        float *tmp = malloc((size_t)(v > 0 ? v : 1) * sizeof *tmp);
        if (!tmp) /* (the gradient stays, and the next iteration says so) */
            continue;
        const ss_tensor *T = ss_graph_tensor(s->g, w);
        ss_rt_region_io(T, s->grad[w], &x->reg, tmp, 0);
        for (int64_t i = x->lo > a ? x->lo : a; i < x->hi && i < b; i++)
            x->g[i - x->lo] += tmp[i];
        if (a < b)
            memset(tmp + a, 0, (size_t)(b - a) * sizeof *tmp);
        ss_rt_region_io(T, s->grad[w], &x->reg, tmp, 3);
        free(tmp);
        if (e->n_parts == 1 || --x->left <= 0)
            drop_full(z, s, (void **)&s->grad[w], w);
    }
}

void ss_rt_z3_after(rt_z3 *z, ss_rt_state *s, int step)
{
    int t = s->mine[step], k = s->tg->kind[t];
    const ss_build_desc *e = &s->ds.t[t];
    if (k == SS_TASK_COLLECTIVE && e->coll == SS_BUILD_COLL_GRAD) {
        drain(z, s, e);
        return;
    }
    if (k == SS_TASK_COLLECTIVE && e->coll == SS_BUILD_COLL_PARAM) {
        /* a member with no reader of it (a tied weight's other stage) */
        for (int j = 0; j < e->n_item; j++) {
            int w = s->ds.items[e->item_off + j].tensor;
            if (z->ws[z->of[w]].refs == 0)
                drop_full(z, s, &s->buf[w], w);
        }
        return;
    }
    if ((k != SS_TASK_FWD && k != SS_TASK_BWD) || s->task_tile[t] < 0)
        return;
    rt_tile *tl = &s->tiles[s->task_tile[t]];
    ss_kargs *a = &tl->a;
    const ss_op *op = ss_graph_op(s->g, tl->op);
    int bwd = k == SS_TASK_BWD, late = bwd && s->tg->aux[t] == 1;
    for (int xi = op->n_in; xi < a->n_x; xi++) {
        if (z->of[ss_rt_operand_tensor(op, xi)] < 0)
            continue;
        int64_t b = (int64_t)ss_kernel_x_bytes(a, xi);
        if (!late && a->x[xi]) {
            free_f(&a->x[xi]);
            z->held -= b;
        }
        /* a split backward's weight gradient waits for its deferred task */
        if (bwd && a->dx[xi] && (late || !tl->late)) {
            free_f(&a->dx[xi]);
            z->held -= b;
        }
    }
    for (int r = z->rel[t]; r >= 0; r = z->rel_next[r]) {
        const ss_build_desc *g = &s->ds.t[s->mine[z->rel_step[r]]];
        for (int j = 0; j < g->n_item; j++) {
            int w = s->ds.items[g->item_off + j].tensor;
            if (--z->ws[z->of[w]].refs == 0)
                drop_full(z, s, &s->buf[w], w);
        }
    }
}

int ss_rt_z3_update(rt_z3 *z, rt_iter *x, int task)
{
    ss_rt_state *s = x->s;
    const ss_build_desc *e = &s->ds.t[task];
    if (z->of[e->tensor] < 0)
        return 0;
    z3w *w = &z->ws[z->of[e->tensor]];
    double w0 = ss_rt_now_ms(), c0 = ss_rt_cpu_ms();
    int64_t n = w->hi - w->lo;
    if (!w->m) {
        float l = (float)x->lr;
        for (int64_t i = 0; i < n; i++)
            w->w[i] -= l * w->g[i];
    } else {
        const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
        double c1 = 1 - pow(b1, s->step), c2 = 1 - pow(b2, s->step);
        for (int64_t i = 0; i < n; i++) {
            w->m[i] = (float)(b1 * w->m[i] + (1 - b1) * w->g[i]);
            w->v[i] = (float)(b2 * w->v[i] + (1 - b2) * (double)w->g[i] * w->g[i]);
            w->w[i] -= (float)(x->lr * (w->m[i] / c1) / (sqrt(w->v[i] / c2) + eps));
        }
    }
    ss_rt_record_compute(x, task, w0, c0);
    return 1;
}

ss_status ss_rt_z3_readback(rt_z3 *z, ss_rt_state *s, ss_diag *d)
{
    for (int t = 0; t < s->n_t; t++) {
        if (z->of[t] < 0)
            continue;
        const z3w *x = &z->ws[z->of[t]];
        int64_t v = ss_region_volume(&x->reg);
        int64_t *cnt = malloc((size_t)x->n * sizeof *cnt);
        float *all = malloc((size_t)(v > 0 ? v : 1) * sizeof *all);
        ss_status st = SS_OK;
        if (!cnt || !all || (st = ensure_full(z, s, &s->buf[t], t, d)) != SS_OK) {
            free(cnt);
            free(all);
            return st != SS_OK ? st : ss_rt_nomem(d);
        }
        for (int k = 0; k < x->n; k++) {
            int64_t lo, hi;
            ss_rt_slice_of(v, k, x->n, &lo, &hi);
            cnt[k] = hi - lo;
        }
        st = z->c->allgather_f32(z->c->ctx, x->devs, x->n, x->w, all, cnt, d);
        if (st == SS_OK)
            ss_rt_region_io(ss_graph_tensor(s->g, t), s->buf[t], &x->reg, all, 3);
        free(cnt);
        free(all);
        if (st != SS_OK)
            return st;
    }
    return SS_OK;
}

void ss_rt_z3_free(rt_z3 *z)
{
    if (!z)
        return;
    for (int j = 0; j < z->n; j++) {
        free(z->ws[j].w);
        free(z->ws[j].g);
        free(z->ws[j].m);
        free(z->ws[j].v);
    }
    ss_free(z->ws);
    free(z->of);
    free(z->readers);
    free(z->rel);
    free(z->rel_next);
    free(z->rel_step);
    free(z);
}
