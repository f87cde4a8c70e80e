/*
 * build_weights.c — pass 7 of the task-graph builder (build.h has the
 * rules): weight gradients. Per weight tensor, the regions the tiles read
 * give the memory of weights, gradients and optimizer state per device (the
 * union of the regions each device holds) and the shards (one per distinct
 * region, replicated on every device that reads it); shards in backward
 * order fuse into buckets, each synchronized by one all-reduce, then one
 * update task per shard per device. Invariant: the shards' entries refer to
 * backward tasks already in the graph.
 */
#include "simulator/build_impl.h"

#include <stdlib.h>
#include <string.h>

static int cmp_we_dev(const wentry *a, const wentry *b)
{
    if (a->w != b->w)
        return a->w < b->w ? -1 : 1;
    if (a->dev != b->dev)
        return a->dev < b->dev ? -1 : 1;
    int c = region_cmp(&a->reg, &b->reg);
    if (c)
        return c;
    return a->task < b->task ? -1 : a->task > b->task;
}

static int cmp_we_reg(const wentry *a, const wentry *b)
{
    if (a->w != b->w)
        return a->w < b->w ? -1 : 1;
    int c = region_cmp(&a->reg, &b->reg);
    if (c)
        return c;
    if (a->dev != b->dev)
        return a->dev < b->dev ? -1 : 1;
    return a->task < b->task ? -1 : a->task > b->task;
}

/* Shards in backward order: latest op first, then weight id, then region. */
typedef struct okey {
    int maxop, w, first, idx;
} okey;

static int cmp_okey(const void *pa, const void *pb)
{
    const okey *a = pa, *b = pb;
    if (a->maxop != b->maxop)
        return a->maxop > b->maxop ? -1 : 1;
    if (a->w != b->w)
        return a->w < b->w ? -1 : 1;
    return a->first < b->first ? -1 : a->first > b->first;
}

static ss_status collect_weights(ss_builder *b, ss_diag *d)
{
    const ss_graph *g = b->g;
    b->n_we = 0;
    for (int j = 0; j < b->n_tiles; j++) {
        const tileinfo *t = &b->tiles[j];
        const ss_op *op = ss_graph_op(g, t->op);
        if (op->type == SS_OP_INPUT)
            continue;
        for (int k = 0; k < op->n_w; k++) {
            ss_region reg;
            ss_op_input_region(g, op, tshape(b, j), op->n_in + k, &reg);
            if (volume(&reg) == 0)
                continue;
            GROW(b, we, cap_we, b->n_we + 1, d);
            wentry *e = &b->we[b->n_we++];
            e->w = op->weights[k];
            e->dev = t->dev;
            e->op = t->op;
            e->tile = j;
            e->task = t->bwd;
            e->reg = reg;
        }
    }
    return SS_OK;
}

/* Order the weight entries by weight tensor (a stable counting sort), so
 * both orders below, whose first key is the weight, only sort within each
 * weight's group: the result is the same total order a global sort gives,
 * at a fraction of the comparisons. */
static ss_status group_weights(ss_builder *b, ss_diag *d)
{
    int nt = ss_graph_n_tensors(b->g);
    GROW(b, wcount, cap_wcount, nt + 1, d);
    GROW(b, we2, cap_we2, b->n_we, d);
    GROW(b, widx, cap_widx, b->n_we, d);
    GROW(b, wtmp, cap_wtmp, b->n_we, d);
    memset(b->wcount, 0, (size_t)(nt + 1) * sizeof(int));
    for (int k = 0; k < b->n_we; k++)
        b->wcount[b->we[k].w + 1]++;
    for (int t = 0; t < nt; t++)
        b->wcount[t + 1] += b->wcount[t];
    for (int k = 0; k < b->n_we; k++)
        b->we2[b->wcount[b->we[k].w]++] = b->we[k];
    wentry *x = b->we;
    int c = b->cap_we;
    b->we = b->we2;
    b->cap_we = b->cap_we2;
    b->we2 = x;
    b->cap_we2 = c;
    return SS_OK;
}

typedef int (*we_cmp)(const wentry *, const wentry *);

/* Sort indices x[0..n) of entries we[] by cmp (merge sort, insertion sort
 * below 16; tmp has room for n / 2 + 1). The orders used are total on
 * distinguishable entries, so any correct sort gives the same result. */
static void sort_idx(int *x, int *tmp, int n, const wentry *we, we_cmp cmp)
{
    if (n <= 16) {
        for (int i = 1; i < n; i++) {
            int v = x[i], k = i;
            while (k > 0 && cmp(&we[v], &we[x[k - 1]]) < 0) {
                x[k] = x[k - 1];
                k--;
            }
            x[k] = v;
        }
        return;
    }
    int h = n / 2;
    sort_idx(x, tmp, h, we, cmp);
    sort_idx(x + h, tmp, n - h, we, cmp);
    if (cmp(&we[x[h - 1]], &we[x[h]]) <= 0)
        return;
    memcpy(tmp, x, (size_t)h * sizeof *x);
    int i = 0, j = h, k = 0;
    while (i < h && j < n)
        x[k++] = cmp(&we[x[j]], &we[tmp[i]]) < 0 ? x[j++] : tmp[i++];
    while (i < h)
        x[k++] = tmp[i++];
}

/* Sort each weight's group of entries (contiguous after group_weights):
 * indices are sorted, then the entries (large: they hold a region) move
 * once. */
static void sort_groups(ss_builder *b, we_cmp cmp)
{
    for (int a = 0; a < b->n_we;) {
        int e = a + 1;
        while (e < b->n_we && b->we[e].w == b->we[a].w)
            e++;
        for (int k = a; k < e; k++)
            b->widx[k] = k;
        if (e - a > 1)
            sort_idx(b->widx + a, b->wtmp, e - a, b->we, cmp);
        a = e;
    }
    for (int k = 0; k < b->n_we; k++)
        b->we2[k] = b->we[b->widx[k]];
    wentry *x = b->we;
    int c = b->cap_we;
    b->we = b->we2;
    b->cap_we = b->cap_we2;
    b->we2 = x;
    b->cap_we2 = c;
}

static ss_status weight_memory(ss_builder *b, ss_memory *mm, ss_diag *d)
{
    const ss_graph *g = b->g;
    if (b->n_we > 1)
        sort_groups(b, cmp_we_dev);
    for (int a = 0; a < b->n_we;) {
        int e = a;
        while (e < b->n_we && b->we[e].w == b->we[a].w && b->we[e].dev == b->we[a].dev)
            e++;
        GROW(b, regs, cap_regs, e - a, d);
        int n = 0;
        for (int k = a; k < e; k++)
            if (n == 0 || region_cmp(&b->regs[n - 1], &b->we[k].reg))
                b->regs[n++] = b->we[k].reg;
        int64_t params = ss_memory_region_union(b->regs, n);
        if (params < 0)
            return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory counting weights");
        ss_memory_add_params(mm, b->we[a].dev, params, ss_graph_tensor(g, b->we[a].w)->dtype,
                             ss_graph_optimizer(g), ss_graph_precision(g));
        a = e;
    }
    return SS_OK;
}

static ss_status make_shards(ss_builder *b, ss_diag *d)
{
    const ss_graph *g = b->g;
    if (b->n_we > 1)
        sort_groups(b, cmp_we_reg);
    b->n_sh = 0;
    b->n_ipool = 0;
    for (int a = 0; a < b->n_we;) {
        int e = a;
        while (e < b->n_we && b->we[e].w == b->we[a].w && !region_cmp(&b->we[e].reg, &b->we[a].reg))
            e++;
        GROW(b, sh, cap_sh, b->n_sh + 1, d);
        GROW(b, ipool, cap_ipool, b->n_ipool + (e - a), d);
        shard *s = &b->sh[b->n_sh++];
        s->first = a;
        s->count = e - a;
        s->w = b->we[a].w;
        s->params = volume(&b->we[a].reg);
        double gb;
        ss_memory_param_bytes(ss_graph_tensor(g, s->w)->dtype, ss_graph_optimizer(g),
                              ss_graph_precision(g), NULL, &gb, NULL);
        s->bytes = (double)s->params * gb;
        s->dev_off = b->n_ipool;
        s->n_dev = 0;
        s->minop = s->maxop = b->we[a].op;
        for (int k = a; k < e; k++) {
            if (s->n_dev == 0 || b->ipool[b->n_ipool - 1] != b->we[k].dev) {
                b->ipool[b->n_ipool++] = b->we[k].dev; /* sorted by dev within a shard */
                s->n_dev++;
            }
            if (b->we[k].op < s->minop)
                s->minop = b->we[k].op;
            if (b->we[k].op > s->maxop)
                s->maxop = b->we[k].op;
        }
        a = e;
    }
    b->st.shards = b->n_sh;
    return SS_OK;
}

static int same_devs(const ss_builder *b, const shard *x, const shard *y)
{
    return x->n_dev == y->n_dev &&
           !memcmp(b->ipool + x->dev_off, b->ipool + y->dev_off, (size_t)x->n_dev * sizeof(int));
}

/* Updates of shard s on each of its devices, after `after` (a collective) or,
 * when after < 0, after the shard's own backward tasks on that device. */
static ss_status add_updates(ss_builder *b, ss_taskgraph *tg, const shard *s, int after,
                             ss_diag *d)
{
    const ss_graph *g = b->g;
    for (int k = 0; k < s->n_dev; k++) {
        int dev = b->ipool[s->dev_off + k];
        int type = ss_machine_device(b->m, dev)->type;
        double us = ss_cost_update_us(b->cm, type, s->params, ss_graph_optimizer(g),
                                      ss_graph_precision(g));
        int u = add_task(tg, SS_TASK_UPDATE, us, 3 * b->n_ops * (MB_CLAMP + 1) + s->minop,
                         s->minop, -1, -1, s->w, 0, 1, &dev, d);
        if (u < 0)
            return d->status;
        b->st.updates++;
        if (after >= 0) {
            if (ss_taskgraph_add_dep(tg, after, u, d) != SS_OK)
                return d->status;
            continue;
        }
        for (int e = s->first; e < s->first + s->count; e++)
            if (b->we[e].dev == dev && ss_taskgraph_add_dep(tg, b->we[e].task, u, d) != SS_OK)
                return d->status;
    }
    return SS_OK;
}

/* Close bucket order[lo..hi): one all-reduce over the (common) device set
 * after the shards' backward tasks (or the bulk barrier), then updates. */
static ss_status close_bucket(ss_builder *b, ss_taskgraph *tg, int lo, int hi, int barrier,
                              ss_diag *d)
{
    const shard *s0 = &b->sh[b->order[lo]];
    double bytes = 0;
    int minop = s0->minop, maxop = s0->maxop;
    for (int k = lo; k < hi; k++) {
        const shard *s = &b->sh[b->order[k]];
        bytes += s->bytes;
        if (s->minop < minop)
            minop = s->minop;
        if (s->maxop > maxop)
            maxop = s->maxop;
    }
    int prio = 2 * b->n_ops * (MB_CLAMP + 1) +
               (b->set.priority ? minop : b->n_ops - 1 - maxop);
    int bucket = b->st.buckets++;
    int c = ss_build_add_collective(b, tg, SS_COLL_ALLREDUCE, b->ipool + s0->dev_off, s0->n_dev, bytes,
                           bytes, s0->minop, bucket, SS_BUILD_COLL_GRAD, prio, d);
    if (c < 0)
        return d->status;
    b->st.coll_grad++;
    if (barrier >= 0) {
        if (ss_taskgraph_add_dep(tg, barrier, c, d) != SS_OK)
            return d->status;
    } else {
        for (int k = lo; k < hi; k++) {
            const shard *s = &b->sh[b->order[k]];
            for (int e = s->first; e < s->first + s->count; e++)
                if (ss_taskgraph_add_dep(tg, b->we[e].task, c, d) != SS_OK)
                    return d->status;
        }
    }
    for (int k = lo; k < hi; k++) {
        ss_status st = add_updates(b, tg, &b->sh[b->order[k]], c, d);
        if (st != SS_OK)
            return st;
    }
    return SS_OK;
}

ss_status ss_build_weights(ss_builder *b, ss_taskgraph *tg, ss_memory *mm, ss_diag *d)
{
    ss_status st;
    if ((st = collect_weights(b, d)) != SS_OK || (st = group_weights(b, d)) != SS_OK ||
        (st = weight_memory(b, mm, d)) != SS_OK ||
        (st = make_shards(b, d)) != SS_OK)
        return st;
    GROW(b, order, cap_order, b->n_sh, d);
    GROW(b, okeys, cap_okeys, b->n_sh, d);
    for (int k = 0; k < b->n_sh; k++)
        b->okeys[k] = (okey){b->sh[k].maxop, b->sh[k].w, b->sh[k].first, k};
    if (b->n_sh > 1)
        qsort(b->okeys, (size_t)b->n_sh, sizeof(okey), cmp_okey);
    for (int k = 0; k < b->n_sh; k++)
        b->order[k] = b->okeys[k].idx;
    int barrier = -1;
    if (b->set.sync == SS_SYNC_BULK) {
        barrier = add_task(tg, SS_TASK_OTHER, 0, 2 * b->n_ops * (MB_CLAMP + 1), -1, -1, -1, 0, 0,
                           0, NULL, d);
        if (barrier < 0)
            return d->status;
        for (int j = 0; j < b->n_tiles; j++)
            if (b->tiles[j].bwd >= 0 &&
                ss_taskgraph_add_dep(tg, b->tiles[j].bwd, barrier, d) != SS_OK)
                return d->status;
    }
    int open = -1; /* first shard of the open bucket in order[] */
    double open_bytes = 0;
    for (int k = 0; k < b->n_sh; k++) {
        const shard *s = &b->sh[b->order[k]];
        if (open >= 0 && (!same_devs(b, &b->sh[b->order[open]], s) ||
                          !(b->set.bucket_bytes > 0) || open_bytes >= b->set.bucket_bytes)) {
            if ((st = close_bucket(b, tg, open, k, barrier, d)) != SS_OK)
                return st;
            open = -1;
        }
        if (s->n_dev == 1) {
            if ((st = add_updates(b, tg, s, barrier, d)) != SS_OK)
                return st;
            continue;
        }
        if (open < 0) {
            open = k;
            open_bytes = 0;
        }
        open_bytes += s->bytes;
    }
    if (open >= 0 && (st = close_bucket(b, tg, open, b->n_sh, barrier, d)) != SS_OK)
        return st;
    return SS_OK;
}
