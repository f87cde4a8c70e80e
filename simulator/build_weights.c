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
#include "simulator/engine.h"
#include "simulator/plan_view.h"

#include <math.h>
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

/* Shards in the order the backward completes their gradients: the latest
 * first op first (a shard's gradient is whole when the backward of its
 * earliest user ends: a tied embedding's when the first stage's backward
 * ends, not the last stage's), then the latest op, weight id, region. */
typedef struct okey {
    int minop, maxop, w, first, idx;
    int late; /* reorder_backward: every entry is a deferred weight-gradient
               * step; these complete after the others, front to back */
} okey;

static int cmp_okey(const void *pa, const void *pb)
{
    const okey *a = pa, *b = pb;
    if (a->late != b->late)
        return a->late < b->late ? -1 : 1;
    if (a->late && a->minop != b->minop)
        return a->minop < b->minop ? -1 : 1;
    if (a->maxop != b->maxop)
        return a->maxop > b->maxop ? -1 : 1;
    if (a->w != b->w)
        return a->w < b->w ? -1 : 1;
    return a->first < b->first ? -1 : a->first > b->first;
}

/* The (op, weight slot) pairs reading each weight tensor, made once per
 * builder (the graph does not change): wu_op/wu_k[wu_off[w] .. wu_off[w+1]),
 * in op order. Graph inputs have no weights that count. */
static ss_status weight_users(ss_builder *b, ss_diag *d)
{
    const ss_graph *g = b->g;
    int nt = ss_graph_n_tensors(g);
    if (b->wu_off && b->wu_tensors == nt)
        return SS_OK;
    ss_free(b->wu_off);
    ss_free(b->wu_op);
    ss_free(b->wu_k);
    b->wu_tensors = 0;
    int n = 0;
    for (int o = 0; o < b->n_ops; o++) {
        const ss_op *op = ss_graph_op(g, o);
        if (op->type != SS_OP_INPUT)
            n += op->n_w;
    }
    b->wu_off = ss_calloc((size_t)nt + 1, sizeof(int));
    b->wu_op = ss_malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    b->wu_k = ss_malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    if (!b->wu_off || !b->wu_op || !b->wu_k) {
        ss_free(b->wu_off);
        ss_free(b->wu_op);
        ss_free(b->wu_k);
        b->wu_off = b->wu_op = b->wu_k = NULL;
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks");
    }
    for (int o = 0; o < b->n_ops; o++) {
        const ss_op *op = ss_graph_op(g, o);
        if (op->type != SS_OP_INPUT)
            for (int k = 0; k < op->n_w; k++)
                b->wu_off[op->weights[k] + 1]++;
    }
    for (int t = 0; t < nt; t++)
        b->wu_off[t + 1] += b->wu_off[t];
    for (int o = 0; o < b->n_ops; o++) { /* fill with wu_off[w] as cursor */
        const ss_op *op = ss_graph_op(g, o);
        if (op->type == SS_OP_INPUT)
            continue;
        for (int k = 0; k < op->n_w; k++) {
            int w = op->weights[k], at = b->wu_off[w]++;
            b->wu_op[at] = o;
            b->wu_k[at] = k;
        }
    }
    for (int t = nt; t > 0; t--)
        b->wu_off[t] = b->wu_off[t - 1];
    b->wu_off[0] = 0;
    b->wu_tensors = nt;
    return SS_OK;
}

/* The index of x in the sorted bounds bd[0..n). */
static int bound_at(const int64_t *bd, int n, int64_t x)
{
    int k = 0;
    while (k < n - 1 && bd[k] < x)
        k++;
    return k;
}

/* Shards are the distinct regions of a weight's entries, so the regions
 * must be equal or disjoint. Users tiled differently can read overlapping
 * unequal regions (a tied embedding table split by hidden under a head split
 * by vocabulary): then a device would update the overlap once per region,
 * and devices reading one piece through different regions would never sum
 * their gradients. So when two distinct regions overlap, every entry is cut
 * into the cells of the grid of all the regions' bounds it covers (each
 * cell then one shard, summed over the devices whose tiles read it); else
 * the entries stay as they are. */
static ss_status cut_overlaps(ss_builder *b, ss_diag *d)
{
    int n = b->n_we, nr = 0, cut = 0;
    GROW(b, regs, cap_regs, n, d);
    for (int i = 0; i < n; i++) {
        int k = 0;
        while (k < nr && region_cmp(&b->regs[k], &b->we[i].reg))
            k++;
        if (k == nr)
            b->regs[nr++] = b->we[i].reg;
    }
    for (int i = 0; i < nr && !cut; i++)
        for (int k = i + 1; k < nr && !cut; k++) {
            ss_region ov;
            cut = ss_region_intersect(&b->regs[i], &b->regs[k], &ov) > 0;
        }
    if (!cut)
        return SS_OK;
    int nd = b->regs[0].ndim, nb[SS_MAX_DIMS];
    int64_t *bd = ss_malloc((size_t)nd * 2 * (size_t)nr * sizeof *bd);
    if (!bd)
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks");
    for (int k = 0; k < nd; k++) { /* dim k's bounds, sorted, distinct */
        int64_t *x = bd + (size_t)k * 2 * nr;
        nb[k] = 0;
        for (int i = 0; i < 2 * nr; i++) {
            int64_t v = i < nr ? b->regs[i].r[k].lo : b->regs[i - nr].r[k].hi;
            int at = nb[k];
            while (at > 0 && x[at - 1] > v)
                at--;
            if (at > 0 && x[at - 1] == v)
                continue;
            memmove(x + at + 1, x + at, (size_t)(nb[k]++ - at) * sizeof *x);
            x[at] = v;
        }
    }
    int total = 0, lo[SS_MAX_DIMS], hi[SS_MAX_DIMS], at[SS_MAX_DIMS];
    for (int pass = 0; pass < 2; pass++) { /* count the cells, then write them */
        for (int i = 0; i < n; i++) {
            const wentry *e = &b->we[i];
            int cells = 1;
            for (int k = 0; k < nd; k++) {
                const int64_t *x = bd + (size_t)k * 2 * nr;
                lo[k] = at[k] = bound_at(x, nb[k], e->reg.r[k].lo);
                hi[k] = bound_at(x, nb[k], e->reg.r[k].hi);
                cells *= hi[k] - lo[k];
            }
            if (!pass) {
                total += cells;
                continue;
            }
            for (int c = 0; c < cells; c++) {
                wentry *o = &b->we2[total++];
                *o = *e;
                for (int k = 0; k < nd; k++) {
                    const int64_t *x = bd + (size_t)k * 2 * nr;
                    o->reg.r[k].lo = x[at[k]];
                    o->reg.r[k].hi = x[at[k] + 1];
                }
                for (int k = nd - 1; k >= 0 && ++at[k] == hi[k]; k--)
                    at[k] = lo[k];
            }
        }
        if (!pass) {
            if (ss_grow((void **)&b->we2, &b->cap_we2, total, sizeof *b->we2)) {
                ss_free(bd);
                return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks");
            }
            total = 0;
        }
    }
    ss_free(bd);
    wentry *x = b->we;
    int c = b->cap_we;
    b->we = b->we2;
    b->cap_we = b->cap_we2;
    b->we2 = x;
    b->cap_we2 = c;
    b->n_we = total;
    return SS_OK;
}

/* The entries of weight w: one per tile of a user op and weight slot
 * reading a non-empty region of w (cut where users' regions overlap:
 * cut_overlaps), in b->we[0 .. n_we). */
static ss_status collect_weight(ss_builder *b, int w, ss_diag *d)
{
    const ss_graph *g = b->g;
    b->n_we = 0;
    for (int u = b->wu_off[w]; u < b->wu_off[w + 1]; u++) {
        int o = b->wu_op[u], k = b->wu_k[u];
        const ss_op *op = ss_graph_op(g, o);
        for (int j = b->tile_base[o]; j < b->tile_base[o + 1]; j++) {
            ss_region reg;
            ss_tile tb;
            ss_op_input_region(g, op, tshape(b, j, &tb), op->n_in + k, &reg);
            if (volume(&reg) == 0)
                continue;
            GROW(b, we, cap_we, b->n_we + 1, d);
            wentry *e = &b->we[b->n_we++];
            e->w = w;
            e->dev = b->tiles[j].dev;
            e->op = o;
            e->tile = j;
            e->task = b->tiles[j].bwd;
            e->reg = reg;
        }
    }
    return b->wu_off[w + 1] - b->wu_off[w] > 1 ? cut_overlaps(b, d) : SS_OK;
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

/* Sort b->we[0 .. n_we) by cmp: indices are sorted, then the entries (large:
 * they hold a region) move once. */
static ss_status sort_we(ss_builder *b, we_cmp cmp, ss_diag *d)
{
    int n = b->n_we;
    if (n < 2)
        return SS_OK;
    GROW(b, we2, cap_we2, n, d);
    GROW(b, widx, cap_widx, n, d);
    GROW(b, wtmp, cap_wtmp, n, d);
    for (int k = 0; k < n; k++)
        b->widx[k] = k;
    sort_idx(b->widx, b->wtmp, n, b->we, cmp);
    for (int k = 0; k < n; k++)
        b->we2[k] = b->we[b->widx[k]];
    wentry *x = b->we;
    int c = b->cap_we;
    b->we = b->we2;
    b->cap_we = b->cap_we2;
    b->we2 = x;
    b->cap_we2 = c;
    return SS_OK;
}

static void put_i64(int32_t *w, int64_t x)
{
    memcpy(w, &x, sizeof x);
}

static int64_t get_i64(const int32_t *w)
{
    int64_t x;
    memcpy(&x, w, sizeof x);
    return x;
}

/* The structure of weight w under the current configs of its users, as
 * int32 words in b->wval (the value memoized, *len words):
 *   n_mem, then per device holding w (ascending): dev, params (2 words:
 *     the union of the regions it reads)
 *   n_shards, then per distinct region (in region order): params (2),
 *     minop, maxop, n_dev, the region (ndim, then lo and hi per dim: 2 words
 *     each), the devices (ascending), count, then per entry
 *     (in device, then backward task order) its op and tile within the op.
 * Computed from the entries sorted by (device, region, task) and by
 * (region, device, task), as the comparison orders define it. */
static ss_status encode_weight(ss_builder *b, int w, int *len, ss_diag *d)
{
    ss_status st;
    if ((st = collect_weight(b, w, d)) != SS_OK)
        return st;
    int n = b->n_we;
    GROW(b, wval, cap_wval, 2 + 6 * n + (8 + 1 + 4 * SS_MAX_DIMS) * n + 2, d);
    int32_t *v = b->wval;
    int at = 1;
    v[0] = 0;
    if ((st = sort_we(b, cmp_we_dev, d)) != SS_OK)
        return st;
    for (int a = 0; a < n;) {
        int e = a;
        while (e < n && b->we[e].dev == b->we[a].dev)
            e++;
        GROW(b, regs, cap_regs, e - a, d);
        int nr = 0;
        for (int k = a; k < e; k++)
            if (nr == 0 || region_cmp(&b->regs[nr - 1], &b->we[k].reg))
                b->regs[nr++] = b->we[k].reg;
        int64_t params = ss_memory_region_union(b->regs, nr);
        if (params < 0)
            return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory counting weights");
        v[at] = b->we[a].dev;
        put_i64(v + at + 1, params);
        at += 3;
        v[0]++;
        a = e;
    }
    if ((st = sort_we(b, cmp_we_reg, d)) != SS_OK)
        return st;
    int nsh_at = at++;
    v[nsh_at] = 0;
    for (int a = 0; a < n;) {
        int e = a;
        while (e < n && !region_cmp(&b->we[e].reg, &b->we[a].reg))
            e++;
        int minop = b->we[a].op, maxop = b->we[a].op;
        for (int k = a; k < e; k++) {
            if (b->we[k].op < minop)
                minop = b->we[k].op;
            if (b->we[k].op > maxop)
                maxop = b->we[k].op;
        }
        put_i64(v + at, volume(&b->we[a].reg));
        v[at + 2] = minop;
        v[at + 3] = maxop;
        int ndev_at = at + 4;
        at += 5;
        v[at++] = b->we[a].reg.ndim;
        for (int k = 0; k < b->we[a].reg.ndim; k++, at += 4) {
            put_i64(v + at, b->we[a].reg.r[k].lo);
            put_i64(v + at + 2, b->we[a].reg.r[k].hi);
        }
        v[ndev_at] = 0;
        for (int k = a; k < e; k++)
            if (k == a || b->we[k].dev != b->we[k - 1].dev) { /* sorted by dev within a shard */
                v[at++] = b->we[k].dev;
                v[ndev_at]++;
            }
        v[at++] = e - a;
        for (int k = a; k < e; k++) {
            v[at++] = b->we[k].op;
            v[at++] = b->we[k].tile - b->tile_base[b->we[k].op];
        }
        v[nsh_at]++;
        a = e;
    }
    *len = at;
    return SS_OK;
}

/* A reduced build (build.h, ss_build_sym): devs[0..n) (block 0, ascending)
 * becomes their images in every block, ascending (room for n * D). */
static void expand_devices(const ss_build_sym *h, int *devs, int n)
{
    for (int k = 1; k < h->D; k++)
        for (int i = 0; i < n; i++)
            devs[k * n + i] = h->dmap[k * h->n_dev + devs[i]];
    int m = n * h->D;
    for (int i = 1; i < m; i++) {
        int x = devs[i], j = i;
        while (j > 0 && devs[j - 1] > x) {
            devs[j] = devs[j - 1];
            j--;
        }
        devs[j] = x;
    }
}

/* Apply the structure v of weight w (encode_weight) to this run: its
 * memory, and its shards appended to b->sh with their entries (backward
 * task and device of each tile) in b->wr. */
static ss_status apply_weight(ss_builder *b, int w, const int32_t *v, ss_memory *mm, ss_diag *d)
{
    const ss_graph *g = b->g;
    ss_dtype dt = ss_graph_tensor(g, w)->dtype;
    ss_optimizer opt = ss_graph_optimizer(g);
    ss_precision prec = ss_graph_precision(g);
    int nm = *v++;
    const int32_t *mv = v; /* (device, params) entries, applied after the shards */
    v += 3 * nm;
    double gb;
    ss_memory_param_bytes(dt, opt, prec, NULL, &gb, NULL);
    int ns = *v++, sh0 = b->n_sh;
    GROW(b, sh, cap_sh, b->n_sh + ns, d);
    for (int i = 0; i < ns; i++) {
        shard *s = &b->sh[b->n_sh++];
        s->w = w;
        s->params = get_i64(v);
        s->bytes = (double)s->params * gb;
        s->minop = v[2];
        s->maxop = v[3];
        s->tp = 0;
        s->n_dev = v[4];
        v += 5;
        s->reg.ndim = *v++;
        for (int k = 0; k < s->reg.ndim; k++, v += 4) {
            s->reg.r[k].lo = get_i64(v);
            s->reg.r[k].hi = get_i64(v + 2);
        }
        int nx = b->sym ? b->sym->D : 1; /* a reduced build: the shard in every block */
        GROW(b, ipool, cap_ipool, b->n_ipool + s->n_dev * nx, d);
        s->dev_off = b->n_ipool;
        memcpy(b->ipool + b->n_ipool, v, (size_t)s->n_dev * sizeof(int));
        if (nx > 1)
            expand_devices(b->sym, b->ipool + b->n_ipool, s->n_dev);
        v += s->n_dev;
        s->n_dev *= nx;
        b->n_ipool += s->n_dev;
        s->count = *v++;
        s->first = b->n_wr;
        GROW(b, wr, cap_wr, b->n_wr + s->count, d);
        for (int k = 0; k < s->count; k++, v += 2) {
            int j = b->tile_base[v[0]] + v[1];
            const tileinfo *t = &b->tiles[j];
            b->wr[b->n_wr++] =
                (wref){j < b->n_wgt && b->wgt[j] >= 0 ? b->wgt[j] : t->bwd, t->dev, j};
        }
    }
    /* the distributed optimizer splits a device's optimizer state over the
     * devices holding its shard */
    for (int i = 0; i < nm; i++, mv += 3) {
        int split = 1;
        for (int k = sh0; b->set.distopt && k < b->n_sh && split == 1; k++)
            for (int e = 0; e < b->sh[k].n_dev; e++)
                if (b->ipool[b->sh[k].dev_off + e] == mv[0])
                    split = b->sh[k].n_dev;
        if (b->set.distopt == SS_ZERO3) /* ZeRO-3: weights and gradients too */
            ss_memory_add_params_sharded(mm, mv[0], get_i64(mv + 1), dt, opt, prec, split);
        else
            ss_memory_add_params_split(mm, mv[0], get_i64(mv + 1), dt, opt, prec, split);
    }
    return SS_OK;
}

/* Memory and shards of every weight, in weight order; each weight's
 * structure memoized by its users' configs (build.h, "Reuse across runs"). */
static ss_status weight_shards(ss_builder *b, ss_memory *mm, ss_diag *d)
{
    ss_status st;
    if ((st = weight_users(b, d)) != SS_OK)
        return st;
    b->n_sh = 0;
    b->n_ipool = 0;
    b->n_wr = 0;
    for (int w = 0; w < b->wu_tensors; w++) {
        int u0 = b->wu_off[w], nu = b->wu_off[w + 1] - u0;
        if (nu == 0)
            continue;
        const int32_t *v = NULL;
        int vlen = 0;
        if (b->memo_on) {
            GROW(b, wkey, cap_wkey, 1 + nu, d);
            b->wkey[0] = w;
            for (int u = 0; u < nu; u++)
                b->wkey[1 + u] = b->slots[b->cur[b->wu_op[u0 + u]]].id;
            v = ss_memo_get(&b->wmemo, b->wkey, 1 + nu, &vlen);
        }
        if (v) {
            b->mst.weight_hits++;
        } else {
            if ((st = encode_weight(b, w, &vlen, d)) != SS_OK)
                return st;
            if (b->memo_on) {
                b->mst.weight_misses++;
                if (ss_memo_put(&b->wmemo, b->wkey, 1 + nu, b->wval, vlen))
                    return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks");
            }
            v = b->wval;
        }
        if ((st = apply_weight(b, w, v, mm, d)) != SS_OK)
            return st;
    }
    b->st.shards = b->n_sh;
    return SS_OK;
}

static int same_devs(const ss_builder *b, const shard *x, const shard *y)
{
    return x->n_dev == y->n_dev &&
           !memcmp(b->ipool + x->dev_off, b->ipool + y->dev_off, (size_t)x->n_dev * sizeof(int));
}

/* Op o's pipeline stage (0 without stages). */
static int op_stage(const ss_builder *b, int o)
{
    int st = ss_plan_config(b->plan, o)->stage;
    return st > 0 ? st : 0;
}

/* The all-reduce (or, while split_tp builds, the group id) of device dev's
 * tensor-parallel group for the split shards of stage st: -1 none. */
static int *tpar_at(const ss_builder *b, int dev, int st)
{
    return &b->tpar[(int64_t)dev * b->tp_nst + st];
}

/* Updates of shard s on each of its devices, after `after` (a collective) or,
 * when after < 0, after the shard's own backward tasks on that device, and
 * under 1F1B after the device's last backward step (b->flush); with
 * `split` (the distributed optimizer) each device updates its 1/n_dev slice
 * and `gather` (if >= 0) waits for every update. */
static ss_status add_updates(ss_builder *b, ss_taskgraph *tg, const shard *s, int after,
                             int split, int gather, ss_diag *d)
{
    const ss_graph *g = b->g;
    int64_t params = split ? (s->params + s->n_dev - 1) / s->n_dev : s->params;
    for (int k = 0; k < s->n_dev; k++) {
        int dev = b->ipool[s->dev_off + k];
        if (b->sym && b->sym->blk[dev] != 0)
            continue; /* a reduced build: another block's copy */
        int type = ss_machine_device(b->m, dev)->type;
        double us = ss_cost_update_us(b->cm, type, params, ss_graph_optimizer(g),
                                      ss_graph_precision(g));
        int u = add_task(tg, SS_TASK_UPDATE, us, 3 * b->n_ops * (MB_CLAMP + 1) + s->minop,
                         s->minop, -1, -1, s->w, 0, 1, &dev, d);
        if (u < 0)
            return d->status;
        b->st.updates++;
        if (gather >= 0 && ss_taskgraph_add_dep(tg, u, gather, d) != SS_OK)
            return d->status;
        /* synced flags: the next forward of each tile on dev reading the
         * shard waits for the shard's update (and all-gather) */
        for (int e = s->first; b->n_nfw && e < s->first + s->count; e++)
            if (b->wr[e].dev == dev && b->nfw[b->t2j[b->wr[e].task]] >= 0 &&
                ss_taskgraph_add_dep(tg, gather >= 0 ? gather : u,
                                     b->nfw[b->t2j[b->wr[e].task]], d) != SS_OK)
                return d->status;
        if (dev < b->n_flush && b->flush[dev] >= 0 &&
            ss_taskgraph_add_dep(tg, b->flush[dev], u, d) != SS_OK)
            return d->status;
        int tpx = s->tp ? *tpar_at(b, dev, op_stage(b, s->minop)) : -1;
        if (tpx >= 0 && ss_taskgraph_add_dep(tg, tpx, u, d) != SS_OK)
            return d->status;
        if (after >= 0) {
            if (ss_taskgraph_add_dep(tg, after, u, d) != SS_OK)
                return d->status;
            continue;
        }
        for (int e = s->first; e < s->first + s->count; e++)
            if (b->wr[e].dev == dev && ss_taskgraph_add_dep(tg, b->wr[e].task, u, d) != SS_OK)
                return d->status;
    }
    return SS_OK;
}

static int cmp_int(const void *pa, const void *pb)
{
    int a = *(const int *)pa, x = *(const int *)pb;
    return a < x ? -1 : a > x;
}

/* Gradient reduction c synchronises over devs[0..n): it waits for the
 * last reduction issued on each of those devices, and becomes their last.
 * A device's data-parallel communicator runs its collectives in issue
 * order, one at a time (DDP's and Megatron's buckets on one NCCL stream),
 * so a bucket is not ready, and holds no place in a channel's queue, while
 * an earlier bucket on its devices still runs: without the chain a small
 * bucket spanning the tensor-parallel group (layer-norm and bias weights)
 * waits at the head of the NVSwitch queues for a PCIe/InfiniBand channel
 * a large bucket holds, and the backward's tensor-parallel all-reduces
 * queue behind it (docs/simulator.md, "Gradient synchronisation"). Only
 * for overlapped sync in issue order (no priority: a priority queue
 * reorders; bulk: every bucket is ready at the barrier), and only for
 * buckets of weights each read by one operator (a tied embedding's, synchronised
 * across pipeline stages, stays out of the stages' streams, as the
 * hierarchical evaluator models it), and not under the interleaved
 * schedule (the hierarchical evaluator models a rank's chunks' buckets as
 * independent; chained, it is 0.57% off full on 16 random plans). ZeRO-3
 * reduce-scatters each micro-batch m's gradient as its backward makes it:
 * one chain per micro-batch (one chain would make a bucket's first
 * micro-batch wait for the previous bucket's last, after the last backward). */
static ss_status sync_chain(ss_builder *b, ss_taskgraph *tg, int c, const int *devs, int n,
                            int m, ss_diag *d)
{
    GROW(b, res, cap_res, n, d);
    int np = 0;
    for (int i = 0; i < n; i++) {
        int *last = &b->gsync[(int64_t)m * b->n_dev + devs[i]];
        if (*last >= 0)
            b->res[np++] = *last;
        *last = c;
    }
    if (np > 1)
        qsort(b->res, (size_t)np, sizeof(int), cmp_int);
    for (int i = 0; i < np; i++)
        if ((i == 0 || b->res[i] != b->res[i - 1]) &&
            ss_taskgraph_add_dep(tg, b->res[i], c, d) != SS_OK)
            return d->status;
    return SS_OK;
}

static int cmp_tpdev(const void *pa, const void *pb)
{
    const tpdev *a = pa, *x = pb;
    if (a->slo != x->slo)
        return a->slo < x->slo ? -1 : 1;
    int c = region_cmp(&a->pkey, &x->pkey);
    if (c)
        return c;
    return a->dev < x->dev ? -1 : a->dev > x->dev;
}

/* Shard i (held by n devices of block 0, nd of them per tensor-parallel
 * group, already in tensor-parallel group order in b->tpd) becomes nd
 * shards, one per position p in the groups: the devices at p in every
 * group (and their images in the other blocks of a reduced build) with
 * their entries. */
static ss_status split_shard(ss_builder *b, int i, int n, int nd, ss_diag *d)
{
    int ng = n / nd, nx = b->sym ? b->sym->D : 1, first = b->sh[i].first,
        count = b->sh[i].count;
    for (int p = 0; p < nd; p++) {
        int k = p == 0 ? i : b->n_sh;
        if (p > 0) {
            GROW(b, sh, cap_sh, b->n_sh + 1, d);
            b->sh[b->n_sh++] = b->sh[i];
        }
        GROW(b, ipool, cap_ipool, b->n_ipool + ng * nx, d);
        int *devs = b->ipool + b->n_ipool;
        for (int g = 0; g < ng; g++)
            devs[g] = b->tpd[g * nd + p].dev;
        qsort(devs, (size_t)ng, sizeof(int), cmp_int);
        if (nx > 1)
            expand_devices(b->sym, devs, ng);
        shard *s = &b->sh[k];
        s->dev_off = b->n_ipool;
        s->n_dev = ng * nx;
        s->tp = 1;
        b->n_ipool += ng * nx;
        GROW(b, wr, cap_wr, b->n_wr + count, d);
        s = &b->sh[k];
        s->first = b->n_wr;
        s->count = 0;
        for (int e = first; e < first + count; e++)
            if (bsearch(&b->wr[e].dev, devs, (size_t)(ng * nx), sizeof(int), cmp_int)) {
                b->wr[b->n_wr++] = b->wr[e];
                s->count++;
            }
    }
    return SS_OK;
}

/* Megatron's synchronisation of a weight replicated over tensor- and
 * data-parallel ranks whose tiles split the sequence (sequence
 * parallelism: the layer norms; each rank's gradient is a partial sum).
 * finalize_model_grads first runs finish_grad_sync, the data-parallel
 * buckets of all the rank's parameters, layer norms included (collectives
 * over the devices at one tensor-parallel position), then
 * _allreduce_layernorm_grads: one coalesced all-reduce of those gradients
 * over the tensor-parallel group, before the optimizer step. So the shard
 * becomes one shard per tensor-parallel position (the data-parallel group;
 * host_split puts it into a bucket of the layer's other weights), and each
 * tensor-parallel group gets one all-reduce per pipeline stage (model
 * chunk) of the bytes of its stage's split shards, which waits for the
 * buckets holding them (close_bucket) and which their updates wait for
 * (add_updates) -- instead of one collective over all tp x dp holders, a
 * ring of tp x dp latency-bound steps on the channels the backward's
 * tensor-parallel collectives use (docs/simulator.md, "Overlap on
 * interleaved deep pipelines"). A tensor-parallel group is the devices
 * whose tiles have the same smallest sample offset, its positions ordered
 * by the tiles' region off the sample dim, then device. Applies to a shard
 * read by one op, with n > 1 groups (in all blocks) of nd > 1 devices each
 * whose tiles differ off the sample dim; not to replicas (without sequence
 * parallelism the tensor-parallel ranks' gradients are the same: their
 * collective over tp x dp stays), nor under ZeRO-3 (its own gathers).
 * b->tp_nst = 0 when nothing was split. */
static ss_status split_tp(ss_builder *b, ss_taskgraph *tg, ss_diag *d)
{
    b->tp_nst = 0;
    if (b->set.distopt == SS_ZERO3)
        return SS_OK;
    int ngr = 0, nsh0 = b->n_sh, nx = b->sym ? b->sym->D : 1;
    for (int i = 0; i < nsh0; i++) {
        const shard *s = &b->sh[i];
        if (s->n_dev < 3 || s->minop != s->maxop || s->count < 2)
            continue;
        int sd = ss_plan_view_sample_dim(b->g, s->minop);
        if (sd < 0)
            continue;
        GROW(b, tpd, cap_tpd, s->n_dev, d);
        int n = 0;
        for (int e = s->first; e < s->first + s->count; e++) {
            const wref *r = &b->wr[e];
            ss_tile tb;
            const ss_tile *t = tshape(b, r->j, &tb);
            int at = n > 0 && b->tpd[n - 1].dev == r->dev ? n - 1 : n; /* by device */
            if (at == n) {
                if (n == s->n_dev)
                    break;
                b->tpd[n].dev = r->dev;
                b->tpd[n].slo = INT64_MAX;
                n++;
            }
            if (t->out.r[sd].lo < b->tpd[at].slo) {
                b->tpd[at].slo = t->out.r[sd].lo;
                b->tpd[at].pkey = t->out;
                b->tpd[at].pkey.r[sd] = (ss_range){0, 0};
            }
        }
        if (n * nx != s->n_dev)
            continue;
        qsort(b->tpd, (size_t)n, sizeof(tpdev), cmp_tpdev);
        int nd = 1;
        while (nd < n && b->tpd[nd].slo == b->tpd[0].slo)
            nd++;
        int ok = nd > 1 && n % nd == 0 && n / nd * nx > 1, seq = 0; /* seq: not replicas */
        for (int g = 0; ok && g < n / nd; g++)
            for (int p = 0; ok && p < nd; p++) {
                const tpdev *x = &b->tpd[g * nd + p];
                ok = x->slo == b->tpd[g * nd].slo &&
                     (p > 0 || g == 0 || x->slo != b->tpd[(g - 1) * nd].slo);
                seq |= p > 0 && region_cmp(&x->pkey, &b->tpd[g * nd].pkey) != 0;
            }
        if (!ok || !seq)
            continue;
        if (b->tp_nst == 0) { /* the first split: per device and stage, no group */
            int nst = 1;
            for (int o = 0; o < b->n_ops; o++)
                nst = op_stage(b, o) + 1 > nst ? op_stage(b, o) + 1 : nst;
            if ((int64_t)b->n_dev * nst > INT32_MAX / 2)
                return ss_diag_set(d, SS_ERR_INVALID,
                                   "simulate: %d devices x %d pipeline stages is too many",
                                   b->n_dev, nst);
            GROW(b, tpar, cap_tpar, b->n_dev * nst, d);
            for (int k = 0; k < b->n_dev * nst; k++)
                b->tpar[k] = -1;
            b->tp_nst = nst;
        }
        /* the tensor-parallel groups of the shard's stage and their bytes
         * (this shard's devices are sorted by group) */
        int stg = op_stage(b, s->minop);
        for (int g = 0; g < n / nd; g++) {
            int d0 = b->tpd[g * nd].dev, gid = *tpar_at(b, d0, stg);
            if (gid < 0) {
                gid = ngr++;
                GROW(b, tpgr, cap_tpgr, 3 * ngr, d);
                GROW(b, tpgb, cap_tpgb, ngr, d);
                GROW(b, ipool, cap_ipool, b->n_ipool + nd, d);
                b->tpgr[3 * gid] = b->n_ipool;
                b->tpgr[3 * gid + 1] = nd;
                b->tpgr[3 * gid + 2] = stg;
                b->tpgb[gid] = 0;
                for (int p = 0; p < nd; p++) {
                    b->ipool[b->n_ipool++] = b->tpd[g * nd + p].dev;
                    *tpar_at(b, b->tpd[g * nd + p].dev, stg) = gid;
                }
                qsort(b->ipool + b->tpgr[3 * gid], (size_t)nd, sizeof(int), cmp_int);
            }
            b->tpgb[gid] += b->sh[i].bytes;
        }
        ss_status st = split_shard(b, i, n, nd, d);
        if (st != SS_OK)
            return st;
    }
    /* one all-reduce per tensor-parallel group and stage (its readiness:
     * close_bucket) */
    int prio = 2 * b->n_ops * (MB_CLAMP + 1);
    for (int gid = 0; gid < ngr; gid++) {
        const int *devs = b->ipool + b->tpgr[3 * gid];
        int nd = b->tpgr[3 * gid + 1], cross = b->sym_cross;
        b->sym_cross = 0; /* a reduced build: block 0's own, as its other traffic */
        int c = ss_build_add_collective(b, tg, SS_COLL_ALLREDUCE, devs, nd, b->tpgb[gid],
                                        b->tpgb[gid], -1, gid, SS_BUILD_COLL_GRAD, prio, d);
        b->sym_cross = cross;
        if (c < 0)
            return d->status;
        b->st.coll_grad++;
        for (int p = 0; p < nd; p++)
            *tpar_at(b, devs[p], b->tpgr[3 * gid + 2]) = c;
    }
    return SS_OK;
}

#define HOST_SCAN 64 /* positions host_split looks either way */

/* Which bucket each split shard (split_tp) joins: Megatron's buckets take
 * a rank's parameters in backward order, layer norms included, until one
 * reaches the bucket size. Here: the bucket of the nearest earlier shard
 * in order[] with the same devices (the layer's weight whose gradient the
 * backward made just before) while that bucket is below bucket_bytes, else
 * that of the nearest later one (the previous layer's), never a gradient
 * synchronised in parts; none within HOST_SCAN positions, or no fusion
 * (bucket_bytes 0): a bucket of its own. b->bhost[k] for position k (-1:
 * its own); the other shards' buckets are those build_weights makes
 * without the split shards (which neither join nor close them), emulated
 * here: b->bcum[k], a bucket's bytes up to position k (-1: in parts or
 * alone on its device). */
static ss_status host_split(ss_builder *b, ss_diag *d)
{
    int n = b->n_sh, open = -1;
    double cap = b->set.bucket_bytes, open_bytes = 0;
    GROW(b, bhost, cap_bhost, n, d);
    GROW(b, bcum, cap_bcum, n, d);
    for (int k = 0; k < n; k++) {
        const shard *s = &b->sh[b->order[k]];
        b->bhost[k] = -1;
        b->bcum[k] = -1;
        if (s->tp)
            continue;
        int split = s->n_dev > 1 && cap > 0 && s->bytes > cap;
        if (open >= 0 && (split || !same_devs(b, &b->sh[b->order[open]], s) || !(cap > 0) ||
                          open_bytes >= cap))
            open = -1;
        if (s->n_dev == 1 || split)
            continue;
        if (open < 0) {
            open = k;
            open_bytes = 0;
        }
        open_bytes += s->bytes;
        b->bcum[k] = open_bytes;
    }
    for (int k = 0; cap > 0 && k < n; k++) {
        const shard *s = &b->sh[b->order[k]];
        if (!s->tp)
            continue;
        for (int x = k - 1; x >= 0 && x >= k - HOST_SCAN; x--) {
            const shard *t = &b->sh[b->order[x]];
            if (t->tp || !same_devs(b, t, s))
                continue;
            if (b->bcum[x] >= 0 && b->bcum[x] < cap)
                b->bhost[k] = x;
            break;
        }
        for (int x = k + 1; b->bhost[k] < 0 && x < n && x <= k + HOST_SCAN; x++) {
            const shard *t = &b->sh[b->order[x]];
            if (t->tp || !same_devs(b, t, s))
                continue;
            if (b->bcum[x] >= 0)
                b->bhost[k] = x;
            break;
        }
    }
    return SS_OK;
}

/* Close the bucket of shards mem[0..nm) (b->order or b->bmem, which
 * this does not change): one all-reduce over the (common) device set after
 * the shards' backward tasks (or the bulk barrier), then updates. */
static ss_status close_bucket(ss_builder *b, ss_taskgraph *tg, const int *mem, int nm,
                              int barrier, int parts, ss_diag *d)
{
    const shard *s0 = &b->sh[mem[0]];
    double bytes = 0;
    int minop = s0->minop, maxop = s0->maxop, shared = 0;
    for (int k = 0; k < nm; k++) {
        const shard *s = &b->sh[mem[k]];
        bytes += s->bytes;
        shared |= s->minop != s->maxop;
        if (s->minop < minop)
            minop = s->minop;
        if (s->maxop > maxop)
            maxop = s->maxop;
    }
    /* priority: front layers first; overlapped sync without it: issue
     * order (one key, so the channels' class-2 key falls back to ready
     * time, then task id: bucket order); bulk: back layers first at the
     * barrier */
    int prio = 2 * b->n_ops * (MB_CLAMP + 1) +
               (b->set.priority ? minop : barrier < 0 ? 0 : b->n_ops - 1 - maxop);
    int bucket = b->st.buckets++;
    int dist = b->set.distopt, zero3 = dist == SS_ZERO3, M = 1;
    ss_status st = SS_OK;
    /* ZeRO-3 reduce-scatters each micro-batch's gradient as its backward
     * makes it (FSDP and DeepSpeed ZeRO-3 under gradient accumulation: the
     * gradient stays sharded): one collective per micro-batch */
    for (int k = 0; zero3 && k < nm; k++) {
        const shard *s = &b->sh[mem[k]];
        for (int e = s->first; e < s->first + s->count; e++)
            M = b->tiles[b->wr[e].j].mb + 1 > M ? b->tiles[b->wr[e].j].mb + 1 : M;
    }
    /* distributed optimizer: reduce-scatter the gradients, update the
     * slices, all-gather the updated parameters (weight bytes; not under
     * ZeRO-3: each forward gathers its weights); a split gradient (parts >
     * 1) or several micro-batches: one collective per part of bytes / parts
     * and micro-batch, then a join the updates wait for */
    int c = -1;
    if (parts * M > 1 && (c = add_task(tg, SS_TASK_OTHER, 0, prio, s0->minop, bucket, -1, 0, 0, 0,
                                       NULL, d)) < 0)
        return d->status;
    for (int qm = 0; qm < parts * M; qm++) {
        int m = qm % M;
        int cq = ss_build_add_collective(b, tg, dist ? SS_COLL_REDUCE_SCATTER : SS_COLL_ALLREDUCE,
                                         b->ipool + s0->dev_off, s0->n_dev, bytes / parts,
                                         bytes / parts, s0->minop, bucket, SS_BUILD_COLL_GRAD, prio,
                                         d);
        if (cq < 0)
            return d->status;
        b->st.coll_grad++;
        if (barrier < 0 && !b->set.priority && b->set.virtual_stages <= 1 && !shared &&
            (st = sync_chain(b, tg, cq, b->ipool + s0->dev_off, s0->n_dev, m, d)) != SS_OK)
            return st;
        if (barrier >= 0) {
            if (ss_taskgraph_add_dep(tg, barrier, cq, d) != SS_OK)
                return d->status;
        } else {
            for (int k = 0; k < nm; k++) {
                const shard *s = &b->sh[mem[k]];
                for (int e = s->first; e < s->first + s->count; e++)
                    if ((M == 1 || b->tiles[b->wr[e].j].mb == m) &&
                        ss_taskgraph_add_dep(tg, b->wr[e].task, cq, d) != SS_OK)
                        return d->status;
            }
        }
        /* a split gradient's tensor-parallel all-reduce follows its
         * data-parallel reduction (finalize_model_grads: finish_grad_sync
         * first); once per stage of the bucket's split shards */
        for (int k = 0; k < nm; k++) {
            const shard *s = &b->sh[mem[k]];
            int stg = s->tp ? op_stage(b, s->minop) : -1, seen = 0;
            for (int x = 0; s->tp && x < k; x++)
                seen |= b->sh[mem[x]].tp && op_stage(b, b->sh[mem[x]].minop) == stg;
            for (int e = 0; s->tp && !seen && e < s->n_dev; e++) {
                int x = *tpar_at(b, b->ipool[s->dev_off + e], stg);
                if (x >= 0 && ss_taskgraph_add_dep(tg, cq, x, d) != SS_OK)
                    return d->status;
            }
        }
        if (parts * M == 1)
            c = cq;
        else if (ss_taskgraph_add_dep(tg, cq, c, d) != SS_OK)
            return d->status;
    }
    int gather = -1;
    if (dist && !zero3) {
        double wb, pbytes = 0;
        for (int k = 0; k < nm; k++) {
            const shard *s = &b->sh[mem[k]];
            ss_memory_param_bytes(ss_graph_tensor(b->g, s->w)->dtype, SS_OPT_SGD,
                                  ss_graph_precision(b->g), &wb, NULL, NULL);
            pbytes += (double)s->params * wb;
        }
        gather = ss_build_add_collective(b, tg, SS_COLL_ALLGATHER, b->ipool + s0->dev_off,
                                         s0->n_dev, pbytes, pbytes, s0->minop, bucket,
                                         SS_BUILD_COLL_GRAD, prio, d);
        if (gather < 0)
            return d->status;
        b->st.coll_grad++;
    }
    for (int k = 0; k < nm; k++)
        if ((st = add_updates(b, tg, &b->sh[mem[k]], c, dist, gather, d)) != SS_OK)
            return st;
    return SS_OK;
}


/* Close the bucket of order[lo..hi) (positions; split shards there are
 * not its own): its shards and the split shards that join it
 * (host_split), with the threshold's parts. */
static ss_status close_range(ss_builder *b, ss_taskgraph *tg, int lo, int hi, int barrier,
                             int parts, ss_diag *d)
{
    if (b->tp_nst == 0)
        return close_bucket(b, tg, b->order + lo, hi - lo, barrier, parts, d);
    int a = lo > HOST_SCAN ? lo - HOST_SCAN : 0, z = hi + HOST_SCAN < b->n_sh ? hi + HOST_SCAN
                                                                              : b->n_sh;
    GROW(b, bmem, cap_bmem, z - a, d);
    int n = 0;
    for (int k = lo; k < hi; k++)
        if (!b->sh[b->order[k]].tp)
            b->bmem[n++] = b->order[k];
    for (int k = a; k < z; k++)
        if (b->sh[b->order[k]].tp && b->bhost[k] >= lo && b->bhost[k] < hi)
            b->bmem[n++] = b->order[k];
    return close_bucket(b, tg, b->bmem, n, barrier, parts, d);
}

/* ---- ZeRO-3 / FSDP parameter sharding (settings.distopt == SS_ZERO3) ---- */

static int cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, x = *(const int64_t *)pb;
    return a < x ? -1 : a > x;
}

/* Dependencies from the fwd (bwd = 0) or bwd (bwd = 1) tasks of op o's
 * tiles on devices marked `stamp` in b->zmark, micro-batch m, to gather
 * ag[2 (m + shift) + slot] where 0 <= m + shift < M. */
static ss_status gate(ss_builder *b, ss_taskgraph *tg, int o, int bwd, int stamp, const int *ag,
                      int M, int shift, int slot, ss_diag *d)
{
    for (int j = b->tile_base[o]; j < b->tile_base[o + 1]; j++) {
        const tileinfo *t = &b->tiles[j];
        int task = bwd ? t->bwd : t->fwd, m = t->mb + shift;
        if (m >= 0 && m < M && task >= 0 && b->zmark[t->dev] == stamp &&
            ss_taskgraph_add_dep(tg, task, ag[2 * m + slot], d) != SS_OK)
            return d->status;
    }
    return SS_OK;
}

/* The all-gathers of ZeRO-3 (docs/simulator.md, "ZeRO-3"). A unit is the
 * replicated shards (n_dev > 1) an op reads that have the same devices
 * (FSDP's flat parameter of one wrapped module): per micro-batch m, one
 * all-gather of its weight bytes before the forward of the op's tiles of m
 * on those devices and one before their backward (the weights are freed
 * after each use: reshard_after_forward). Prefetch one unit ahead, as
 * FSDP's forward/backward prefetch and DeepSpeed's prefetch bucket do: on
 * the sequence of ops with units holding the unit's first device (op
 * order), the forward gather of position p waits for the forward of
 * position p - 2 (the previous micro-batch's position K - 2 + p for
 * p < 2), the backward gather of position p for the backward of position
 * p + 2 (its own forward for the last two), so one gather runs while the
 * layer before it computes. Each gathered copy is a receive buffer on each
 * device from the gather's start to the end of the task that reads it. */
static ss_status zero3_gathers(ss_builder *b, ss_taskgraph *tg, ss_memory *mm, ss_diag *d)
{
    const ss_graph *g = b->g;
    int np = 0, M = 1, nu = 0, stamp = 0;
    for (int k = 0; k < b->n_sh; k++) {
        const shard *s = &b->sh[k];
        if (s->n_dev < 2)
            continue;
        GROW(b, zp, cap_zp, np + s->count, d);
        for (int e = s->first; e < s->first + s->count; e++) {
            const tileinfo *t = &b->tiles[b->wr[e].j];
            b->zp[np++] = ((int64_t)t->op << 32) | k;
            M = t->mb + 1 > M ? t->mb + 1 : M;
        }
    }
    if (np == 0)
        return SS_OK;
    qsort(b->zp, (size_t)np, sizeof *b->zp, cmp_i64);
    int n = 0;
    for (int i = 0; i < np; i++)
        if (n == 0 || b->zp[i] != b->zp[n - 1])
            b->zp[n++] = b->zp[i];
    /* units: per op, its shards grouped by device set (zp reordered so
     * that each unit's shards are contiguous); zu: op, lo, hi, position */
    for (int lo = 0; lo < n;) {
        int hi = lo, op = (int)(b->zp[lo] >> 32);
        while (hi < n && (int)(b->zp[hi] >> 32) == op)
            hi++;
        for (int a = lo; a < hi;) {
            const shard *sa = &b->sh[(int)(b->zp[a] & 0xffffffff)];
            int e = a + 1;
            for (int k = a + 1; k < hi; k++)
                if (same_devs(b, sa, &b->sh[(int)(b->zp[k] & 0xffffffff)])) {
                    int64_t x = b->zp[k];
                    b->zp[k] = b->zp[e];
                    b->zp[e++] = x;
                }
            GROW(b, zu, cap_zu, 4 * (nu + 1), d);
            b->zu[4 * nu] = op;
            b->zu[4 * nu + 1] = a;
            b->zu[4 * nu + 2] = e;
            nu++;
            a = e;
        }
        lo = hi;
    }
    /* positions in the sequence of each first device: units sorted by
     * (first device, op); zs keeps (first device, unit) */
    GROW(b, zs, cap_zs, nu, d);
    for (int u = 0; u < nu; u++) {
        const shard *s = &b->sh[(int)(b->zp[b->zu[4 * u + 1]] & 0xffffffff)];
        b->zs[u] = ((int64_t)b->ipool[s->dev_off] << 32) | u;
    }
    qsort(b->zs, (size_t)nu, sizeof *b->zs, cmp_i64);
    GROW(b, zmark, cap_zmark, b->n_dev, d);
    /* + the gathers of one unit, the ops of a first device's positions */
    GROW(b, zu, cap_zu, 4 * nu + 2 * M + nu, d);
    int *posop = b->zu + 4 * nu + 2 * M;
    for (int k = 0; k < b->n_dev; k++)
        b->zmark[k] = 0;
    for (int lo = 0; lo < nu;) {
        int hi = lo, pos = -1, prev = -1;
        while (hi < nu && (b->zs[hi] >> 32) == (b->zs[lo] >> 32))
            hi++;
        for (int i = lo; i < hi; i++) { /* units are in op order within a first device */
            int u = (int)(b->zs[i] & 0xffffffff);
            pos += b->zu[4 * u] != prev;
            prev = b->zu[4 * u];
            b->zu[4 * u + 3] = pos;
            posop[pos] = prev;
        }
        int K = pos + 1;
        for (int i = lo; i < hi; i++) {
            int u = (int)(b->zs[i] & 0xffffffff), o = b->zu[4 * u], p = b->zu[4 * u + 3];
            const shard *s0 = &b->sh[(int)(b->zp[b->zu[4 * u + 1]] & 0xffffffff)];
            const int *devs = b->ipool + s0->dev_off;
            /* the ops at positions p - 2 (forward gate) and p + 2 (backward) */
            int fop = p >= 2 ? posop[p - 2] : -1, bop = p + 2 < K ? posop[p + 2] : -1;
            int fop_wrap = p < 2 && K - 2 + p >= 0 ? posop[K - 2 + p] : -1;
            double bytes = 0;
            for (int k = b->zu[4 * u + 1]; k < b->zu[4 * u + 2]; k++) {
                const shard *s = &b->sh[(int)(b->zp[k] & 0xffffffff)];
                double wb;
                ss_memory_param_bytes(ss_graph_tensor(g, s->w)->dtype, SS_OPT_SGD,
                                      ss_graph_precision(g), &wb, NULL, NULL);
                bytes += (double)s->params * wb;
            }
            stamp++;
            for (int k = 0; k < s0->n_dev; k++)
                b->zmark[devs[k]] = stamp;
            int *ag = b->zu + 4 * nu; /* the gathers of (micro-batch, pass) */
            for (int m = 0; m < M; m++)
                for (int bw = 0; bw < 2; bw++) {
                    int prio = bw ? ss_sched_prio_bwd(b->n_ops, o, m) : ss_sched_prio_fwd(o, m);
                    int x = ss_build_add_collective(b, tg, SS_COLL_ALLGATHER, devs, s0->n_dev,
                                                    bytes, bytes, o, m, SS_BUILD_COLL_PARAM, prio,
                                                    d);
                    if (x < 0)
                        return d->status;
                    b->st.coll_param++;
                    ag[2 * m + bw] = x;
                }
            /* the prefetch gates, then the gathers' readers */
            ss_status st = SS_OK;
            if (fop >= 0)
                st = gate(b, tg, fop, 0, stamp, ag, M, 0, 0, d);
            else if (fop_wrap >= 0)
                st = gate(b, tg, fop_wrap, 0, stamp, ag, M, 1, 0, d);
            if (st == SS_OK)
                st = bop >= 0 ? gate(b, tg, bop, 1, stamp, ag, M, 0, 1, d)
                              : gate(b, tg, o, 0, stamp, ag, M, 0, 1, d);
            if (st != SS_OK)
                return st;
            for (int j = b->tile_base[o]; j < b->tile_base[o + 1]; j++) {
                const tileinfo *t = &b->tiles[j];
                if (t->mb >= M || b->zmark[t->dev] != stamp)
                    continue;
                for (int bw = 0; bw < 2; bw++) {
                    int task = bw ? t->bwd : t->fwd, x = ag[2 * t->mb + bw];
                    if (task < 0)
                        continue;
                    ss_mem_interval iv = {t->dev, SS_MEM_BUFFER, bytes, {x, 0}, {task, 1}};
                    if (ss_taskgraph_add_dep(tg, x, task, d) != SS_OK ||
                        ss_memory_add(mm, &iv, d) != SS_OK)
                        return d->status;
                }
            }
        }
        lo = hi;
    }
    return SS_OK;
}

/* ---- issue 31: backward reordering and per-layer synced flags ---------- */

/* t2j: task -> tile of every forward and backward task so far, with room
 * for one weight-gradient step per tile. */
static ss_status map_tiles(ss_builder *b, ss_taskgraph *tg, ss_diag *d)
{
    GROW(b, t2j, cap_t2j, tg->n_tasks + b->n_tiles + 1, d);
    for (int t = 0; t < tg->n_tasks + b->n_tiles + 1; t++)
        b->t2j[t] = -1;
    for (int j = 0; j < b->n_tiles; j++) {
        if (b->tiles[j].fwd >= 0)
            b->t2j[b->tiles[j].fwd] = j;
        if (b->tiles[j].bwd >= 0)
            b->t2j[b->tiles[j].bwd] = j;
    }
    return SS_OK;
}

/* Backward reordering with adjustment layer K = settings.reorder_backward
 * (the seed patent). Layers are the ops with weights, ranked in graph
 * order. A tile of a layer ranked K or later splits its backward: the
 * backward task keeps the input-gradient step (what the layers below wait
 * for) and a weight-gradient step of half the backward's own time (one
 * GEMM of the two for a linear or convolution; the recomputed forward
 * stays with the first) runs after the backward of the device's first
 * layer for the same micro-batch, the adjustment layer's anchor. So the
 * input gradients run through to the first layers, whose weight gradients
 * (and synchronisations) come first; the deferred weight gradients follow
 * front to back. A device that holds none of the first K layers for a
 * micro-batch (a later pipeline stage) keeps its backward whole. */
static ss_status reorder(ss_builder *b, ss_taskgraph *tg, ss_diag *d)
{
    int K = b->set.reorder_backward, M = 1;
    GROW(b, wgt, cap_wgt, b->n_tiles, d);
    for (int j = 0; j < b->n_tiles; j++) {
        b->wgt[j] = -1;
        M = b->tiles[j].mb + 1 > M ? b->tiles[j].mb + 1 : M;
    }
    b->n_wgt = b->n_tiles;
    if ((int64_t)b->n_dev * M > INT32_MAX / 2)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "simulate: reorder_backward: %d devices x %d micro-batches is too many",
                           b->n_dev, M);
    GROW(b, anc, cap_anc, b->n_dev * M, d);
    for (int k = 0; k < b->n_dev * M; k++)
        b->anc[k] = -1;
    for (int pass = 0; pass < 2; pass++)
        for (int j = 0, o = -1, rank = -1, layer = 0; j < b->n_tiles; j++) {
            tileinfo *t = &b->tiles[j];
            if (t->op != o) {
                o = t->op;
                const ss_op *op = ss_graph_op(b->g, o);
                layer = op->type != SS_OP_INPUT && op->n_w > 0;
                rank += layer;
            }
            int *a = &b->anc[t->dev * M + (t->mb > 0 ? t->mb : 0)];
            if (!layer || t->bwd < 0)
                continue;
            if (pass == 0) { /* the anchor: the device's first layer (graph order) */
                if (rank < K && *a < 0)
                    *a = t->bwd;
                continue;
            }
            if (rank < K || *a < 0)
                continue;
            double w = tcost(b, j)->bwd_us / 2;
            tg->dur[t->bwd] -= w; /* the builder's own task, not yet finalized */
            int prio = (b->n_ops + o) * SS_SCHED_MB_SLOTS + (t->mb > 0 ? t->mb : 0);
            int x = add_task(tg, SS_TASK_BWD, w, prio, o, j - b->tile_base[o], t->mb, 1, 0, 1,
                             &t->dev, d);
            if (x < 0)
                return d->status;
            if (ss_taskgraph_add_dep(tg, t->bwd, x, d) != SS_OK ||
                ss_taskgraph_add_dep(tg, *a, x, d) != SS_OK)
                return d->status;
            b->wgt[j] = x;
            b->t2j[x] = j;
            b->st.bwd++;
        }
    return SS_OK;
}

/* Per-layer synced flags: the next iteration's forward of micro-batch 0
 * (every forward without micro-batches), one task per forward tile (same
 * device, time and priority), after the same forward dependencies, each
 * waiting for the updates of the weights it reads (add_updates) instead of
 * for every update. The period is measured between the two ends of that
 * forward (ss_build_iteration_us), so micro-batches in any order (GPipe,
 * 1F1B on one stage) need no more of the next iteration. Only a forward
 * that stays on its device is repeated: a micro-batch-0 forward task
 * waiting for anything but another forward task (a transfer, a collective)
 * is refused. */
static ss_status next_forward(ss_builder *b, ss_taskgraph *tg, ss_diag *d)
{
    int m0 = tg->n_edges;
    GROW(b, nfw, cap_nfw, b->n_tiles, d);
    GROW(b, nfload, cap_nfload, b->n_dev, d);
    for (int k = 0; k < b->n_dev; k++)
        b->nfload[k] = 0;
    for (int m = 0; m < m0; m++) {
        int a = tg->e_from[m], f = tg->e_to[m];
        if (tg->kind[f] != SS_TASK_FWD || tg->mb[f] > 0 || tg->kind[a] == SS_TASK_FWD)
            continue;
        const ss_op *op = ss_graph_op(b->g, tg->op[f]);
        return ss_diag_set(d, SS_ERR_INVALID,
                           "simulate: synced_flags: the forward of operator \"%s\" waits for a "
                           "%s task; per-layer synced flags are modelled for plans whose forward "
                           "stays on each device (data parallel, one stage)",
                           op->name, ss_task_kind_name((ss_task_kind)tg->kind[a]));
    }
    b->nf_lo = tg->n_tasks;
    for (int j = 0; j < b->n_tiles; j++) {
        const tileinfo *t = &b->tiles[j];
        b->nfw[j] = -1;
        if (t->fwd < 0 || t->mb > 0)
            continue;
        double dur = tg->dur[t->fwd];
        int x = add_task(tg, SS_TASK_FWD, dur, tg->prio[t->fwd], t->op, tg->tile[t->fwd],
                         t->mb, 2, 0, 1, &t->dev, d);
        if (x < 0)
            return d->status;
        b->nfw[j] = x;
        b->nfload[t->dev] += dur;
    }
    b->n_nfw = b->n_tiles;
    b->nf_hi = tg->n_tasks;
    for (int m = 0; m < m0; m++) {
        int a = tg->e_from[m], f = tg->e_to[m];
        if (tg->kind[f] == SS_TASK_FWD && b->t2j[a] >= 0 && b->t2j[f] >= 0 &&
            b->nfw[b->t2j[a]] >= 0 && b->nfw[b->t2j[f]] >= 0 &&
            ss_taskgraph_add_dep(tg, b->nfw[b->t2j[a]], b->nfw[b->t2j[f]], d) != SS_OK)
            return d->status;
    }
    return SS_OK;
}

int ss_build_next_forward(const ss_builder *b)
{
    return b->nf_hi > b->nf_lo;
}

double ss_build_iteration_us(const ss_builder *b, const ss_taskgraph *tg,
                             const struct ss_engine_result *r)
{
    if (b->nf_hi <= b->nf_lo)
        return r->makespan;
    double f1 = 0, e2 = 0, load = 0;
    for (int t = 0; t < b->nf_lo; t++) /* this iteration's micro-batch-0 forward */
        if (tg->kind[t] == SS_TASK_FWD && tg->mb[t] <= 0 && r->end[t] > f1)
            f1 = r->end[t];
    for (int t = b->nf_lo; t < b->nf_hi; t++)
        e2 = r->end[t] > e2 ? r->end[t] : e2;
    for (int k = 0; k < tg->n_resources; k++) {
        double x = r->busy[k] - (k < tg->n_devices && k < b->n_dev ? b->nfload[k] : 0);
        load = x > load ? x : load;
    }
    return e2 - f1 > load ? e2 - f1 : load;
}

static ss_status build_weights(ss_builder *b, ss_taskgraph *tg, ss_memory *mm, ss_diag *d);

ss_status ss_build_weights(ss_builder *b, ss_taskgraph *tg, ss_memory *mm, ss_diag *d)
{
    if (b->sym) { /* the tasks so far are block 0's: their channels represent */
        b->sym->prepare(b->sym, tg);
        b->sym_cross = 1;
    }
    ss_status st = build_weights(b, tg, mm, d);
    b->sym_cross = 0;
    return st;
}

static ss_status build_weights(ss_builder *b, ss_taskgraph *tg, ss_memory *mm, ss_diag *d)
{
    ss_status st;
    if ((b->set.reorder_backward > 0 || b->set.synced_flags) &&
        (st = map_tiles(b, tg, d)) != SS_OK)
        return st;
    if (b->set.reorder_backward > 0 && (st = reorder(b, tg, d)) != SS_OK)
        return st;
    if (b->set.synced_flags && (st = next_forward(b, tg, d)) != SS_OK)
        return st;
    if ((st = weight_shards(b, mm, d)) != SS_OK)
        return st;
    if ((st = split_tp(b, tg, d)) != SS_OK)
        return st;
    GROW(b, order, cap_order, b->n_sh, d);
    GROW(b, okeys, cap_okeys, b->n_sh, d);
    int zm = b->set.distopt == SS_ZERO3 && b->set.microbatches > 1 ? b->set.microbatches : 1;
    GROW(b, gsync, cap_gsync, b->n_dev * zm, d);
    for (int k = 0; k < b->n_dev * zm; k++)
        b->gsync[k] = -1;
    for (int k = 0; k < b->n_sh; k++) {
        const shard *sk = &b->sh[k];
        int late = b->n_wgt > 0 && sk->count > 0;
        for (int e = sk->first; late && e < sk->first + sk->count; e++)
            late = tg->kind[b->wr[e].task] == SS_TASK_BWD && tg->aux[b->wr[e].task] == 1;
        b->okeys[k] = (okey){sk->minop, sk->maxop, sk->w, sk->first, k, late};
    }
    if (b->n_sh > 1)
        qsort(b->okeys, (size_t)b->n_sh, sizeof(okey), cmp_okey);
    for (int k = 0; k < b->n_sh; k++)
        b->order[k] = b->okeys[k].idx;
    if (b->tp_nst > 0 && (st = host_split(b, d)) != SS_OK)
        return st;
    /* Overlapped sync: the buckets' collectives (keys from 2 n_ops slots
     * on; nothing else on a channel has such keys) are class 2 on the
     * channels (engine.h, rule 2): any other transfer or collective ready
     * there goes first, and a bucket waiting for one of its channels never
     * holds the head of another's queue. The data-parallel communicator
     * runs on its own NCCL stream beside the tensor- and pipeline-parallel
     * traffic; a bucket that queued ahead of that traffic (FIFO) blocked it
     * behind whatever held the bucket's other channels, e.g. a layer-norm
     * bucket spanning NVSwitch and InfiniBand held the backward's
     * tensor-parallel all-gathers while a large bucket used the NIC
     * (docs/simulator.md, "Overlap on interleaved deep pipelines"). With
     * priority they go front layers first among themselves, else in issue
     * order. Bulk sync keeps them class 0: nothing else is left to run. */
    if (b->set.priority || b->set.sync != SS_SYNC_BULK)
        tg->prio_first = 2 * b->n_ops * (MB_CLAMP + 1);
    int barrier = -1;
    if (b->set.sync == SS_SYNC_BULK) {
        barrier = add_task(tg, SS_TASK_OTHER, 0, 2 * b->n_ops * (MB_CLAMP + 1), -1, -1, -1, 0, 0,
                           0, NULL, d);
        if (barrier < 0)
            return d->status;
        for (int j = 0; j < b->n_tiles; j++)
            if ((b->tiles[j].bwd >= 0 &&
                 ss_taskgraph_add_dep(tg, b->tiles[j].bwd, barrier, d) != SS_OK) ||
                (j < b->n_wgt && b->wgt[j] >= 0 &&
                 ss_taskgraph_add_dep(tg, b->wgt[j], barrier, d) != SS_OK))
                return d->status;
    }
    int open = -1; /* first shard of the open bucket in order[] */
    double open_bytes = 0;
    for (int k = 0; k < b->n_sh; k++) {
        const shard *s = &b->sh[b->order[k]];
        if (s->tp) { /* a split shard: in another's bucket (host_split) or alone */
            if (b->bhost[k] < 0 && (st = close_bucket(b, tg, b->order + k, 1, barrier, 1, d)) != SS_OK)
                return st;
            continue;
        }
        int split = s->n_dev > 1 && b->set.bucket_bytes > 0 && s->bytes > b->set.bucket_bytes;
        if (open >= 0 && (split || !same_devs(b, &b->sh[b->order[open]], s) ||
                          !(b->set.bucket_bytes > 0) || open_bytes >= b->set.bucket_bytes)) {
            if ((st = close_range(b, tg, open, k, barrier, 1, d)) != SS_OK)
                return st;
            open = -1;
        }
        if (s->n_dev == 1) {
            if ((st = add_updates(b, tg, s, barrier, 0, -1, d)) != SS_OK)
                return st;
            continue;
        }
        if (split) { /* a gradient above the threshold: its own bucket, in parts */
            double np = ceil(s->bytes / b->set.bucket_bytes);
            if ((st = close_range(b, tg, k, k + 1, barrier, np < 65536 ? (int)np : 65536, d)) !=
                SS_OK)
                return st;
            continue;
        }
        if (open < 0) {
            open = k;
            open_bytes = 0;
        }
        open_bytes += s->bytes;
    }
    if (open >= 0 && (st = close_range(b, tg, open, b->n_sh, barrier, 1, d)) != SS_OK)
        return st;
    if (b->set.distopt == SS_ZERO3 && (st = zero3_gathers(b, tg, mm, d)) != SS_OK)
        return st;
    return SS_OK;
}
