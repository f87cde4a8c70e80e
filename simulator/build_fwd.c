/*
 * build_fwd.c — the task-graph builder's pass 3 (build.h, build_impl.h):
 * the pairs (consumer tile, producer unit) with the region read, replica
 * choice, partial-sum collectives chosen from what each unit's consumers
 * read, forward data dependencies and transfers (scatter-gather between
 * pipeline stages); and the bytes each tile keeps for its backward
 * (ss_build_kept_bytes, ss_build_checkpoint_bytes: what Megatron holds,
 * read by pass 8's memory intervals). Invariant: as build.c's: task ids
 * recorded in the builder's scratch arrays refer to tasks already added to
 * tg; b->unkept is made anew by every run's forward dependencies.
 */
#include "simulator/build_impl.h"
#include "core/op_table.h"

#include <stdlib.h>
#include <string.h>

/* Room for n more pairs. */
static ss_status reserve_pairs(ss_builder *b, int n, ss_diag *d)
{
    GROW(b, pairs, cap_pairs, b->n_pairs + n, d);
    GROW(b, preg, cap_preg, b->n_pairs + n, d);
    return SS_OK;
}

/* Append pair (consumer tile j, producer unit uu) reading region *reg of
 * tensor tid (reg NULL: the next region of pbuf), at the head of the unit's
 * list. reserve_pairs made room. */
static inline void add_pair(ss_builder *b, int uu, int j, int tid, const ss_region *reg)
{
    unitinfo *u = &b->units[uu];
    int pi = b->n_pairs++;
    pairinfo *pr = &b->pairs[pi];
    pr->unit = uu;
    pr->tile = j;
    pr->xfer = -1;
    pr->tensor = tid;
    b->preg[pi] = reg;
    pr->next = u->phead;
    u->phead = pi;
}

/* Whether a and b share a point (exactly when ss_region_intersect gives a
 * positive volume): a cheap test before the intersection. */
static inline int overlaps(const ss_region *a, const ss_region *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++) {
        int64_t lo = a->r[i].lo > b->r[i].lo ? a->r[i].lo : b->r[i].lo;
        int64_t hi = a->r[i].hi < b->r[i].hi ? a->r[i].hi : b->r[i].hi;
        if (hi <= lo)
            return 0;
    }
    return 1;
}

/* The replica of the group whose first unit is g0 that a consumer tile (jl
 * within its op) on device dev reads: the one on dev, else jl mod rep. */
static int chosen_replica(const ss_builder *b, int g0, int rep, int dev, int jl)
{
    for (int q = 0; q < rep; q++)
        if (is_member(b, &b->units[g0 + q], dev))
            return q;
    return jl % rep;
}

/* The pairs of edge (op o, input i) from producer q's output k, computed:
 * region intersections of every consumer tile with every producer unit.
 * *mixes: some pair links tiles of different micro-batches. */
/* The producer units of an edge as a grid: unit index = row-major over the
 * producer's degrees, then its replicas, and along each dim the units'
 * output ranges strictly increasing (lo and hi) and the same for every unit
 * with that dim's index. Then the units a region overlaps are a product of
 * per-dim index intervals, found by binary search: edge_pairs visits them
 * alone, in ascending unit order, instead of scanning every unit for every
 * consumer tile (quadratic in the tiles: 71% of simulating a 64-GPU GPT
 * with 64 micro-batches went there). */
typedef struct ugrid {
    int nd, rep;
    int n[SS_MAX_DIMS];           /* units along each dim (the degrees) */
    int64_t stride[SS_MAX_DIMS];  /* unit-index stride of each dim */
    const ss_range *iv[SS_MAX_DIMS]; /* n[d] ranges of dim d */
} ugrid;

/* Fill gr for producer q's nu units (their regions in b->uhave); 0 when
 * they are no such grid (edge_pairs then scans), -1 out of memory. */
static int unit_grid(ss_builder *b, int q, int nu, ugrid *gr)
{
    const ss_pconfig *sl = ss_plan_config(b->plan, q);
    int nd = sl->ndim, cells = 1, total = 0;
    for (int dd = 0; dd < nd; dd++) {
        cells *= sl->deg[dd];
        total += sl->deg[dd];
    }
    if (nu < 1 || cells < 1 || nu % cells != 0 || b->uhave[0].ndim != nd)
        return 0;
    gr->nd = nd;
    gr->rep = nu / cells;
    if (ss_grow((void **)&b->giv, &b->cap_giv, total + 1, sizeof *b->giv))
        return -1;
    int64_t st = gr->rep;
    for (int dd = nd - 1; dd >= 0; dd--) {
        gr->n[dd] = sl->deg[dd];
        gr->stride[dd] = st;
        st *= sl->deg[dd];
    }
    ss_range *iv = b->giv;
    for (int dd = 0; dd < nd; dd++) {
        gr->iv[dd] = iv;
        for (int x = 0; x < gr->n[dd]; x++) {
            iv[x] = b->uhave[(int64_t)x * gr->stride[dd]].r[dd];
            if (iv[x].hi <= iv[x].lo ||
                (x > 0 && (iv[x].lo <= iv[x - 1].lo || iv[x].hi <= iv[x - 1].hi)))
                return 0;
        }
        iv += gr->n[dd];
    }
    for (int uu = 0; uu < nu; uu++) { /* every unit sits where the grid says */
        const ss_region *h = &b->uhave[uu];
        if (h->ndim != nd)
            return 0;
        for (int dd = 0; dd < nd; dd++) {
            const ss_range *r = &gr->iv[dd][(uu / gr->stride[dd]) % gr->n[dd]];
            if (h->r[dd].lo != r->lo || h->r[dd].hi != r->hi)
                return 0;
        }
    }
    return 1;
}

/* The index interval [*lo, *hi] of the grid's ranges along dim dd that
 * overlap r; *lo > *hi when none does. */
static void grid_span(const ugrid *gr, int dd, const ss_range *r, int *lo, int *hi)
{
    const ss_range *iv = gr->iv[dd];
    int a = 0, z = gr->n[dd];
    while (a < z) { /* first range ending after r->lo */
        int mid = (a + z) / 2;
        if (iv[mid].hi > r->lo)
            z = mid;
        else
            a = mid + 1;
    }
    *lo = a;
    a = *lo;
    z = gr->n[dd];
    while (a < z) { /* first range starting at or after r->hi */
        int mid = (a + z) / 2;
        if (iv[mid].lo >= r->hi)
            z = mid;
        else
            a = mid + 1;
    }
    *hi = a - 1;
}

static uint32_t region_hash(const ss_region *r)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)r->ndim;
    for (int i = 0; i < r->ndim; i++) {
        h = (h ^ (uint64_t)r->r[i].lo) * 0xff51afd7ed558ccdull;
        h = (h ^ (uint64_t)r->r[i].hi) * 0xc4ceb9fe1a85ec53ull;
    }
    return (uint32_t)(h >> 32);
}

/* Insert region b->pbuf[at] into the edge's hash (room guaranteed). */
static void rtab_put(ss_builder *b, int at)
{
    uint32_t mask = (uint32_t)b->cap_rtab - 1, s = region_hash(&b->pbuf[at]) & mask;
    while (b->rgen[s] == b->gen)
        s = (s + 1) & mask;
    b->rgen[s] = b->gen;
    b->rtab[s] = at;
}

/* The pbuf entry holding region *r among this edge's (b->gen), added if
 * new: its index, or -1 with d set (NOMEM). */
static int shared_region(ss_builder *b, const ss_region *r, ss_diag *d)
{
    if (2 * (b->n_rtab + 1) > b->cap_rtab) { /* grow, re-insert the edge's entries */
        int cap = b->cap_rtab ? 2 * b->cap_rtab : 1024;
        int32_t *t = ss_realloc(b->rtab, (size_t)cap * sizeof *t);
        if (t)
            b->rtab = t;
        uint32_t *g = t ? ss_realloc(b->rgen, (size_t)cap * sizeof *g) : NULL;
        if (!g) {
            ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks");
            return -1;
        }
        b->rgen = g;
        memset(b->rgen, 0, (size_t)cap * sizeof *g);
        b->cap_rtab = cap;
        b->gen = 1;
        for (int k = b->n_pbuf - b->n_rtab; k < b->n_pbuf; k++)
            rtab_put(b, k);
    }
    uint32_t mask = (uint32_t)b->cap_rtab - 1;
    for (uint32_t s = region_hash(r) & mask; b->rgen[s] == b->gen; s = (s + 1) & mask)
        if (!region_cmp(&b->pbuf[b->rtab[s]], r))
            return b->rtab[s];
    if (ss_grow((void **)&b->pbuf, &b->cap_pbuf, b->n_pbuf + 1, sizeof *b->pbuf)) {
        ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks");
        return -1;
    }
    b->pbuf[b->n_pbuf] = *r;
    rtab_put(b, b->n_pbuf);
    b->n_rtab++;
    return b->n_pbuf++;
}

static ss_status edge_pairs(ss_builder *b, int o, int i, int q, int k, int *mixes, ss_diag *d)
{
    const ss_graph *g = b->g;
    const ss_op *op = ss_graph_op(g, o), *qop = ss_graph_op(g, q);
    int tid = op->inputs[i];
    int u0 = b->unit_base[q], nu = b->unit_base[q + 1] - u0;
    ss_tile tb;
    *mixes = 0;
    b->n_rtab = 0; /* a new edge: its own regions only */
    if (++b->gen == 0) { /* wrapped: clear the stamps once every 2^32 edges */
        if (b->rgen)
            memset(b->rgen, 0, (size_t)b->cap_rtab * sizeof *b->rgen);
        b->gen = 1;
    }
    GROW(b, uhave, cap_uhave, nu, d);
    for (int uu = u0; uu < u0 + nu; uu++)
        ss_op_output_region(g, qop, tshape(b, b->units[uu].first, &tb), k, &b->uhave[uu - u0]);
    ugrid gr = {0};
    int grid = unit_grid(b, q, nu, &gr);
    if (grid < 0)
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks");
    for (int j = b->tile_base[o]; j < b->tile_base[o + 1]; j++) {
        const tileinfo *tj = &b->tiles[j];
        ss_region need;
        ss_op_input_region(g, op, tshape(b, j, &tb), i, &need);
        if (volume(&need) == 0)
            continue;
        /* the units to visit: all, or the grid's cells overlapping need */
        int lo[SS_MAX_DIMS], hi[SS_MAX_DIMS], idx[SS_MAX_DIMS];
        int empty = 0;
        if (grid) {
            if (need.ndim != gr.nd)
                continue; /* overlaps nothing (overlaps() compares ndim) */
            for (int dd = 0; dd < gr.nd && !empty; dd++) {
                grid_span(&gr, dd, &need.r[dd], &lo[dd], &hi[dd]);
                empty = lo[dd] > hi[dd];
                idx[dd] = lo[dd];
            }
            if (empty)
                continue;
        }
        for (int cell = 0, qq = 0, next = u0;;) {
            int uu;
            if (grid) { /* next cell, replicas innermost: ascending unit order */
                if (qq == gr.rep) {
                    qq = 0;
                    int dd = gr.nd - 1;
                    while (dd >= 0 && ++idx[dd] > hi[dd]) {
                        idx[dd] = lo[dd];
                        dd--;
                    }
                    if (dd < 0)
                        break;
                }
                if (qq == 0) {
                    cell = 0;
                    for (int dd = 0; dd < gr.nd; dd++)
                        cell += (int)(idx[dd] * gr.stride[dd]);
                }
                uu = u0 + cell + qq++;
            } else {
                if (next == u0 + nu)
                    break;
                uu = next++;
            }
            const unitinfo *u = &b->units[uu];
            const ss_region *have = &b->uhave[uu - u0];
            ss_region ov;
            if (!overlaps(&need, have) || ss_region_intersect(&need, have, &ov) <= 0)
                continue;
            if (u->rep > 1 &&
                u->q != chosen_replica(b, uu - u->q, u->rep, tj->dev, j - b->tile_base[o]))
                continue;
            if (reserve_pairs(b, 1, d) != SS_OK)
                return d->status;
            if (!b->memo_on) { /* equal regions share an entry (none is memoized) */
                int at = shared_region(b, &ov, d);
                if (at < 0)
                    return d->status;
                GROW(b, pidx, cap_pidx, b->n_pairs + 1, d);
                b->pidx[b->n_pairs] = at;
            } else {
                GROW(b, pbuf, cap_pbuf, b->n_pbuf + 1, d);
                b->pbuf[b->n_pbuf++] = ov;
            }
            add_pair(b, uu, j, tid, NULL);
            if (qop->type != SS_OP_INPUT)
                for (int r = 0; r < u->red; r++)
                    if (b->tiles[u->first + r].mb != tj->mb)
                        *mixes = 1;
        }
    }
    return SS_OK;
}

/* The cache entry of edge e for the current configs of q and o, or the
 * least recently used one (to overwrite) with *hit = 0. */
static edgeent *find_edge(ss_builder *b, int e, int q, int o, int *hit)
{
    int idq = b->slots[b->cur[q]].id, ido = b->slots[b->cur[o]].id;
    edgeent *lru = &b->edges[e * KEDGE];
    for (int k = e * KEDGE; k < (e + 1) * KEDGE; k++) {
        edgeent *x = &b->edges[k];
        if (x->idq == idq && x->ido == ido && idq > 0) {
            x->used = ++b->tick;
            *hit = 1;
            return x;
        }
        if (x->used < lru->used)
            lru = x;
    }
    *hit = 0;
    return lru;
}

/* Remember pairs b->pairs[first ..] of edge entry x (for q's and o's
 * current configs), their regions b->pbuf[pfirst ..]; the pairs then point
 * to the entry's regions, and pbuf drops them. -1 on allocation failure (x
 * is then empty). */
static int store_edge(ss_builder *b, edgeent *x, int q, int o, int first, int pfirst, int mixes)
{
    int n = b->n_pairs - first;
    ss_free(x->p);
    ss_free(x->reg);
    memset(x, 0, sizeof *x);
    if (n > 0) {
        x->p = ss_malloc((size_t)n * sizeof *x->p);
        x->reg = ss_malloc((size_t)n * sizeof *x->reg);
        if (!x->p || !x->reg) {
            ss_free(x->p);
            ss_free(x->reg);
            x->p = NULL;
            x->reg = NULL;
            return -1;
        }
    }
    for (int k = 0; k < n; k++) {
        const pairinfo *pr = &b->pairs[first + k];
        x->p[k].jl = pr->tile - b->tile_base[o];
        x->p[k].ul = pr->unit - b->unit_base[q];
        x->reg[k] = b->pbuf[pfirst + k];
        b->preg[first + k] = &x->reg[k];
    }
    b->n_pbuf = pfirst;
    x->n = n;
    x->mixes = mixes;
    x->idq = b->slots[b->cur[q]].id;
    x->ido = b->slots[b->cur[o]].id;
    x->used = ++b->tick;
    return 0;
}

/* Every (consumer tile, producer unit) pair whose regions overlap, with the
 * region read; no tasks yet. Per edge, memoized by the two ops' configs. */
ss_status ss_build_pass_pairs(ss_builder *b, ss_diag *d)
{
    const ss_graph *g = b->g;
    for (int o = 0; o < b->n_ops; o++) {
        const ss_op *op = ss_graph_op(g, o);
        if (stopped(b, 1, d))
            return d->status;
        for (int i = 0; i < op->n_in; i++) {
            int tid = op->inputs[i];
            int q = ss_graph_tensor(g, tid)->producer;
            if (q < 0)
                continue;
            const ss_op *qop = ss_graph_op(g, q);
            int k = 0, mixes = 0, hit = 0;
            while (k < qop->n_out && qop->outputs[k] != tid)
                k++;
            edgeent *x = b->memo_on ? find_edge(b, b->edge_base[o] + i, q, o, &hit) : NULL;
            if (hit) {
                b->mst.edge_hits++;
                if (reserve_pairs(b, x->n, d) != SS_OK)
                    return d->status;
                for (int t = 0; t < x->n; t++)
                    add_pair(b, b->unit_base[q] + x->p[t].ul, b->tile_base[o] + x->p[t].jl, tid,
                             &x->reg[t]);
                if (x->mixes)
                    b->gating_ok = 0;
                continue;
            }
            int first = b->n_pairs, pfirst = b->n_pbuf;
            if (edge_pairs(b, o, i, q, k, &mixes, d) != SS_OK)
                return d->status;
            if (mixes)
                b->gating_ok = 0;
            if (x) {
                b->mst.edge_misses++;
                if (store_edge(b, x, q, o, first, pfirst, mixes))
                    return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks");
            }
        }
    }
    /* pairs computed and not memoized: their regions, in order, in pbuf
     * (without memoization: shared, at pidx) */
    if (!b->memo_on) {
        for (int pi = 0; pi < b->n_pairs; pi++)
            b->preg[pi] = &b->pbuf[b->pidx[pi]];
        if (b->lean)
            DROP(b, pidx, cap_pidx);
    } else
        for (int pi = 0, k = 0; k < b->n_pbuf; pi++)
            if (!b->preg[pi])
                b->preg[pi] = &b->pbuf[k++];
    return SS_OK;
}

static int cmp_need(const void *pa, const void *pb)
{
    const needinfo *a = pa, *b = pb;
    if (a->dev != b->dev)
        return a->dev < b->dev ? -1 : 1;
    if (a->tensor != b->tensor)
        return a->tensor < b->tensor ? -1 : 1;
    return region_cmp(&a->reg, &b->reg);
}

/* Bytes of the union of the regions need[a..e) (one device, sorted by
 * tensor then region); -1 on allocation failure. */
static double need_bytes(ss_builder *b, int a, int e)
{
    double bytes = 0;
    for (int t = a; t < e;) {
        int z = t;
        while (z < e && b->need[z].tensor == b->need[t].tensor)
            z++;
        if (ss_grow((void **)&b->regs, &b->cap_regs, z - t, sizeof(ss_region)))
            return -1;
        int nr = 0;
        for (int q = t; q < z; q++)
            if (nr == 0 || region_cmp(&b->regs[nr - 1], &b->need[q].reg))
                b->regs[nr++] = b->need[q].reg;
        int64_t v = ss_memory_region_union(b->regs, nr);
        if (v < 0)
            return -1;
        bytes += (double)v * (double)ss_dtype_size(ss_graph_tensor(b->g, b->need[t].tensor)->dtype);
        t = z;
    }
    return bytes;
}

/* What the consumers of a unit spread over n devices read. *outside: some
 * consumer tile is on a non-member device. *sliced: the regions read on
 * different members are disjoint and no member reads more than 1/n of the
 * unit's output bytes (what a reduce-scatter leaves it). *sources: devices
 * the output gradient comes back from (members with consumers, plus the
 * first member when gradients arrive by transfer). */
static ss_status unit_reads(ss_builder *b, const unitinfo *u, int n, int *outside, int *sliced,
                            int *sources, ss_diag *d)
{
    int m = 0, root = b->tiles[u->first].dev, has_root = 0;
    *outside = 0;
    for (int k = u->phead; k >= 0; k = b->pairs[k].next) {
        const pairinfo *pr = &b->pairs[k];
        int dev = b->tiles[pr->tile].dev;
        if (!is_member(b, u, dev)) {
            *outside = 1;
            continue;
        }
        GROW(b, need, cap_need, m + 1, d);
        b->need[m++] = (needinfo){dev, pr->tensor, *b->preg[k]};
        has_root |= dev == root;
    }
    if (m > 1)
        qsort(b->need, (size_t)m, sizeof(needinfo), cmp_need);
    *sources = *outside && !has_root;
    double total = unit_out_bytes(b, u);
    int ok = 1;
    for (int a = 0; a < m;) {
        int e = a;
        while (e < m && b->need[e].dev == b->need[a].dev)
            e++;
        (*sources)++;
        double bytes = need_bytes(b, a, e);
        if (bytes < 0)
            return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks");
        if (bytes * n > total)
            ok = 0;
        a = e;
    }
    for (int a = 0; a < m && ok; a++)
        for (int c = a + 1; c < m && ok; c++) {
            ss_region ov;
            if (b->need[c].dev != b->need[a].dev && b->need[c].tensor == b->need[a].tensor &&
                ss_region_intersect(&b->need[a].reg, &b->need[c].reg, &ov) > 0)
                ok = 0;
        }
    *sliced = ok;
    return SS_OK;
}

/* Hash of the work a consumer tile j does on `tensor`: its op and its tile
 * with the replica index left out (replicas of one tile do the same work). */
static uint64_t work_hash(const ss_builder *b, int j, int tensor)
{
    int op = b->tiles[j].op, jl = j - b->tile_base[op];
    const unitinfo *u0 = &b->units[b->unit_base[op]];
    int64_t wid = (int64_t)(jl / (u0->red * u0->rep)) * u0->red + jl % u0->red;
    uint64_t h = ((uint64_t)(uint32_t)op << 32 | (uint32_t)tensor) * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)wid + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

/* Replica groups: whether a group's replicas are read by different work
 * (order-free hashes of the consumer work reading each; then its output
 * gradient is summed over the group). A group's units are consecutive,
 * replica 0 first. */
ss_status ss_build_pass_replicas(ss_builder *b)
{
    uint64_t h0 = 0;
    int differ = 0;
    for (int uu = 0; uu < b->n_units; uu++) {
        unitinfo *u = &b->units[uu];
        if (u->rep == 1)
            continue;
        uint64_t h = 0;
        for (int k = u->phead; k >= 0; k = b->pairs[k].next)
            h += work_hash(b, b->pairs[k].tile, b->pairs[k].tensor);
        if (u->q == 0) {
            h0 = h;
            differ = 0;
        }
        differ |= h != h0;
        if (u->q == u->rep - 1)
            for (int q = 0; q < u->rep; q++)
                (u - u->q)[q].gsum = (signed char)differ;
    }
    return SS_OK;
}

/* Whether the consumers of partial-sum unit u (devices dv[0..n)) all sit on
 * members and every member feeds the same consumer work (replicas): then
 * each member's output gradient is already whole. */
static int grads_local(const ss_builder *b, const unitinfo *u, const int *dv, int n)
{
    uint64_t h0 = 0;
    for (int i = 0; i < n; i++) {
        uint64_t h = 0;
        int any = 0;
        for (int k = u->phead; k >= 0; k = b->pairs[k].next) {
            int dev = b->tiles[b->pairs[k].tile].dev;
            if (!is_member(b, u, dev))
                return 0;
            if (dev == dv[i]) {
                h += work_hash(b, b->pairs[k].tile, b->pairs[k].tensor);
                any = 1;
            }
        }
        if (!any || (i > 0 && h != h0))
            return 0;
        h0 = h;
    }
    return 1;
}

/* The task that makes each partial-sum unit whole: a join on one device; a
 * reduce-scatter when its consumers all sit on its devices and read disjoint
 * slices of at most 1/n each; an all-reduce otherwise. Also picks the
 * collective that brings the output gradient back (unit_entry). */
ss_status ss_build_pass_partial(ss_builder *b, ss_taskgraph *tg, ss_diag *d)
{
    for (int uu = 0; uu < b->n_units; uu++) {
        unitinfo *u = &b->units[uu];
        if (u->red == 1)
            continue;
        int k = uu - b->unit_base[u->op];
        int prio = ss_sched_prio_fwd(u->op, b->tiles[u->first].mb);
        if (u->n_unique == 1) {
            u->ready = add_task(tg, SS_TASK_OTHER, 0, prio, u->op, k, -1, 0, 0, 0, NULL, d);
        } else {
            int *dv, outside = 0, sliced = 0, sources = 0;
            int n = ss_build_unit_devices(b, u, &dv, d);
            if (n < 0 || unit_reads(b, u, n, &outside, &sliced, &sources, d) != SS_OK)
                return d->status;
            double bytes = unit_out_bytes(b, u);
            if (u->phead >= 0 && !outside && sliced) {
                u->ready = ss_build_add_collective(b, tg, SS_COLL_REDUCE_SCATTER, dv, n, bytes, bytes,
                                          u->op, k, SS_BUILD_COLL_SCATTER, prio, d);
                u->btag = SS_BUILD_COLL_GATHER;
                b->st.coll_scatter++;
            } else {
                u->ready = ss_build_add_collective(b, tg, SS_COLL_ALLREDUCE, dv, n, bytes, bytes, u->op,
                                          k, SS_BUILD_COLL_PARTIAL, prio, d);
                u->btag = sources > 1 ? SS_BUILD_COLL_GRADSUM : SS_BUILD_COLL_BCAST;
                u->local = grads_local(b, u, dv, n);
                b->st.coll_partial++;
            }
        }
        if (u->ready < 0)
            return d->status;
        for (int r = 0; r < u->red; r++)
            if (ss_taskgraph_add_dep(tg, b->tiles[u->first + r].fwd, u->ready, d) != SS_OK)
                return d->status;
    }
    return SS_OK;
}

static int find_xfer(const ss_builder *b, const unitinfo *u, int tensor, int dev,
                     const ss_region *reg)
{
    for (int x = u->xhead; x >= 0; x = b->xf[x].next)
        if (b->xf[x].tensor == tensor && b->xf[x].dev == dev &&
            (b->xf[x].reg == reg || !region_cmp(b->xf[x].reg, reg)))
            return x;
    return -1;
}

/* A transfer task now moves 1/r of its bytes: same route and latency. */
void ss_build_shrink_transfer(ss_builder *b, ss_taskgraph *tg, int task, int src, int dst,
                              int r)
{
    double lat = ss_machine_path_latency_us(b->m, src, dst);
    tg->dur[task] = lat + (tg->dur[task] - lat) / r;
    tg->bytes[task] /= r;
}

/* A stage-crossing transfer holds both ends' compute streams (Megatron's
 * blocking 1F1B sends) except under interleaving, whose sends overlap the
 * chunks' compute (Megatron's overlap_p2p_comm, on by default for the
 * interleaved schedule). */
int ss_build_holds(const ss_builder *b, const xferinfo *X)
{
    return X->block && b->set.virtual_stages <= 1;
}

/* Megatron's scatter-gather pipeline sends: a stage-boundary (blocking)
 * send from a replica group of R > 1 ranks (a tensor-parallel group holding
 * the same activation) to R receivers, rank q to rank q, moves 1/R of the
 * activation per rank; the receivers then all-gather it over their R
 * devices (docs/simulator.md, "Transfers"). Found per group: the transfers of
 * the same tensor region from each replica of the producing tile to R
 * distinct devices; the consumers wait for the all-gather. Groups that do
 * not match this pattern keep their plain sends. */
static ss_status scatter_gather(ss_builder *b, ss_taskgraph *tg, ss_diag *d)
{
    if (b->set.schedule != SS_PIPE_1F1B)
        return SS_OK;
    int cap = 0;
    for (int x0 = 0; x0 < b->n_xf; x0++) {
        const xferinfo *X0 = &b->xf[x0];
        const unitinfo *u0 = &b->units[X0->unit];
        if (!X0->block || u0->rep < 2 || u0->q != 0 || X0->sg >= 0)
            continue;
        int R = u0->rep;
        if (R > cap) {
            GROW(b, ipool, cap_ipool, b->n_ipool + 2 * R, d);
            cap = R;
        }
        int *xs = b->ipool + b->n_ipool, *dv = xs + R, ok = 1;
        for (int q = 0; q < R && ok; q++) {
            const unitinfo *uq = &b->units[X0->unit + q];
            int found = -1;
            for (int x = uq->xhead; x >= 0 && found < 0; x = b->xf[x].next)
                if (b->xf[x].block && b->xf[x].sg < 0 && b->xf[x].tensor == X0->tensor &&
                    (b->xf[x].reg == X0->reg || !region_cmp(b->xf[x].reg, X0->reg)))
                    found = x;
            for (int k = 0; k < q && found >= 0; k++)
                if (dv[k] == b->xf[found].dev)
                    found = -1;
            if (found < 0)
                ok = 0;
            else {
                xs[q] = found;
                dv[q] = b->xf[found].dev;
            }
        }
        if (!ok)
            continue;
        int prio = ss_sched_prio_fwd(u0->op, b->tiles[u0->first].mb);
        int ag = ss_build_add_collective(b, tg, SS_COLL_ALLGATHER, dv, R, X0->bytes, X0->bytes,
                                         u0->op, X0->unit - b->unit_base[u0->op],
                                         SS_BUILD_COLL_SENDGATHER, prio, d);
        if (ag < 0)
            return d->status;
        b->st.coll_sendgather++;
        for (int q = 0; q < R; q++) {
            xferinfo *X = &b->xf[xs[q]];
            X->sgr = R;
            X->sg = ag;
            ss_build_shrink_transfer(b, tg, X->task, X->src, X->dev, R);
            if (ss_taskgraph_add_dep(tg, X->task, ag, d) != SS_OK)
                return d->status;
        }
    }
    return SS_OK;
}

/* ---- expert-parallel all-to-all ------------------------------------------ */

/* A send of a MoE layer's slots (from a moe_dispatch tile, or to a
 * moe_combine tile) within a stage: its producer op, micro-batch, ends. */
typedef struct a2asend {
    int op, mb, src, dst, x;
} a2asend;

/* A device's sends of one (op, micro-batch): records [r0, r0 + cnt), h the
 * hash of the device and its destinations. */
typedef struct a2adev {
    int op, mb, src, r0, cnt;
    uint64_t h;
} a2adev;

static int cmp_a2asend(const void *pa, const void *pb)
{
    const a2asend *a = pa, *b = pb;
    if (a->op != b->op)
        return a->op < b->op ? -1 : 1;
    if (a->mb != b->mb)
        return a->mb < b->mb ? -1 : 1;
    if (a->src != b->src)
        return a->src < b->src ? -1 : 1;
    return a->dst < b->dst ? -1 : a->dst > b->dst;
}

static int cmp_a2adev(const void *pa, const void *pb)
{
    const a2adev *a = pa, *b = pb;
    if (a->op != b->op)
        return a->op < b->op ? -1 : 1;
    if (a->mb != b->mb)
        return a->mb < b->mb ? -1 : 1;
    if (a->h != b->h)
        return a->h < b->h ? -1 : 1;
    return a->src < b->src ? -1 : a->src > b->src;
}

static uint64_t dev_mix(int dev)
{
    uint64_t h = ((uint64_t)(uint32_t)dev + 0x9E3779B97F4A7C15ull) * 0xff51afd7ed558ccdull;
    return h ^ (h >> 29);
}

/* Whether the m devices v[0..m) (sorted by device) form an all-to-all:
 * each sends exactly once to each of the others (r: the sends). */
static int a2a_complete(const a2adev *v, int m, const a2asend *r)
{
    for (int i = 0; i < m; i++) {
        if (v[i].cnt != m - 1 || (i > 0 && v[i].src == v[i - 1].src))
            return 0;
        for (int k = v[i].r0; k < v[i].r0 + v[i].cnt; k++) {
            int dev = r[k].dst, lo = 0, hi = m - 1;
            if (k > v[i].r0 && dev == r[k - 1].dst)
                return 0;
            while (lo < hi) {
                int mid = (lo + hi) / 2;
                if (v[mid].src < dev)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (v[lo].src != dev || dev == v[i].src)
                return 0;
        }
    }
    return 1;
}

/* One all-to-all over the group v[0..m) (sends in r). */
static ss_status a2a_make(ss_builder *b, ss_taskgraph *tg, const a2adev *v, int m,
                          const a2asend *r, ss_diag *d)
{
    int nx = m * (m - 1);
    if (ss_grow((void **)&b->a2a, &b->cap_a2a, b->n_a2a + 1, sizeof *b->a2a) ||
        ss_grow((void **)&b->a2ax, &b->cap_a2ax, b->n_a2ax + nx + m, sizeof *b->a2ax))
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks");
    a2agroup *G = &b->a2a[b->n_a2a];
    G->x0 = b->n_a2ax;
    G->nx = nx;
    G->n = m;
    G->bt = -1;
    G->op = v[0].op;
    G->S = 0;
    int *xs = b->a2ax + G->x0, *dv = xs + nx, k = 0;
    const tileinfo *c0 = &b->tiles[b->xf[r[v[0].r0].x].last_user];
    G->prio = ss_sched_prio_bwd(b->n_ops, c0->op, c0->mb);
    for (int j = 0; j < m; j++) {
        dv[j] = v[j].src;
        for (int q = v[j].r0; q < v[j].r0 + v[j].cnt; q++) {
            xs[k++] = r[q].x;
            if (b->xf[r[q].x].bytes * m > G->S)
                G->S = b->xf[r[q].x].bytes * m;
        }
    }
    b->n_a2ax += nx + m;
    int unit = b->xf[xs[0]].unit;
    int A = ss_build_add_collective(b, tg, SS_COLL_ALLTOALL, dv, m, G->S, G->S, G->op,
                                    unit - b->unit_base[G->op], SS_BUILD_COLL_ALLTOALL,
                                    ss_sched_prio_fwd(c0->op, c0->mb), d);
    if (A < 0)
        return d->status;
    b->st.coll_alltoall++;
    for (int j = 0; j < nx; j++) {
        xferinfo *X = &b->xf[xs[j]];
        tg->dur[X->task] = 0;
        tg->bytes[X->task] = 0;
        X->sg = A;
        X->a2a = b->n_a2a;
        if (ss_taskgraph_add_dep(tg, X->task, A, d) != SS_OK)
            return d->status;
    }
    b->n_a2a++;
    return SS_OK;
}

/* Expert parallelism's dispatch and combine (docs/simulator.md,
 * "Transfers"): the sends of one micro-batch's MoE slots among the ranks
 * of an expert group, every rank sending its slots of each other rank's
 * experts (dispatch) or each other rank's tokens' expert outputs
 * (combine), are one all-to-all over the group (S = n x the largest
 * message, the pairwise algorithm's buffer), as Megatron's token
 * dispatcher runs them; the sends stay as empty tasks the all-to-all
 * waits for, and the consumers wait for the all-to-all. Sends that do not
 * form a complete exchange stay point-to-point. */
static ss_status alltoall_groups(ss_builder *b, ss_taskgraph *tg, ss_diag *d)
{
    int n = 0, cap = 0, nv = 0, capv = 0, M = b->set.microbatches > 1 ? b->set.microbatches : 1;
    a2asend *r = NULL;
    a2adev *v = NULL;
    ss_status st = SS_OK;
    for (int x = 0; x < b->n_xf && !st; x++) {
        const xferinfo *X = &b->xf[x];
        const unitinfo *u = &b->units[X->unit];
        const tileinfo *c = &b->tiles[X->last_user];
        if (X->block || X->sg >= 0 || u->red != 1 ||
            (ss_graph_op(b->g, u->op)->type != SS_OP_MOE_DISPATCH &&
             ss_graph_op(b->g, c->op)->type != SS_OP_MOE_COMBINE))
            continue;
        if (ss_grow((void **)&r, &cap, n + 1, sizeof *r))
            st = ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks");
        else
            r[n++] = (a2asend){u->op, b->tiles[u->first].mb % M, X->src, X->dev, x};
    }
    if (!st && n > 1)
        qsort(r, (size_t)n, sizeof *r, cmp_a2asend);
    for (int i = 0; i < n && !st;) {
        int e = i;
        uint64_t h = dev_mix(r[i].src);
        while (e < n && r[e].op == r[i].op && r[e].mb == r[i].mb && r[e].src == r[i].src)
            h += dev_mix(r[e++].dst);
        if (ss_grow((void **)&v, &capv, nv + 1, sizeof *v))
            st = ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks");
        else
            v[nv++] = (a2adev){r[i].op, r[i].mb, r[i].src, i, e - i, h};
        i = e;
    }
    if (!st && nv > 1)
        qsort(v, (size_t)nv, sizeof *v, cmp_a2adev);
    for (int i = 0; i < nv && !st;) {
        int e = i;
        while (e < nv && v[e].op == v[i].op && v[e].mb == v[i].mb && v[e].h == v[i].h)
            e++;
        if (e - i > 1 && a2a_complete(v + i, e - i, r))
            st = a2a_make(b, tg, v + i, e - i, r, d);
        i = e;
    }
    ss_free(r);
    ss_free(v);
    return st;
}

int ss_build_bwd_alltoall(ss_builder *b, ss_taskgraph *tg, int x, ss_diag *d)
{
    xferinfo *X = &b->xf[x];
    a2agroup *G = &b->a2a[X->a2a];
    tg->dur[X->btask] = 0;
    tg->bytes[X->btask] = 0;
    if (G->bt < 0) {
        const int *dv = b->a2ax + G->x0 + G->nx;
        int k = b->xf[b->a2ax[G->x0]].unit - b->unit_base[G->op];
        G->bt = ss_build_add_collective(b, tg, SS_COLL_ALLTOALL, dv, G->n, G->S, G->S, G->op, k,
                                        SS_BUILD_COLL_ALLTOALL, G->prio, d);
        if (G->bt < 0)
            return -1;
        b->st.coll_alltoall++;
    }
    if (ss_taskgraph_add_dep(tg, G->bt, b->xf[x].btask, d) != SS_OK)
        return -1;
    return G->bt;
}

static ss_status regathered(ss_builder *b, const ss_plan *p, ss_diag *d);

/* Each pair: a dependency on the unit's ready task (consumer on a member
 * device) or a transfer from the unit's first device (shared by every
 * consumer of the same region on the same device). */
ss_status ss_build_pass_fwd_deps(ss_builder *b, const ss_plan *p, ss_taskgraph *tg,
                                 ss_diag *d)
{
    for (int pi = 0; pi < b->n_pairs; pi++) {
        pairinfo *pr = &b->pairs[pi];
        unitinfo *u = &b->units[pr->unit];
        const tileinfo *tj = &b->tiles[pr->tile];
        if (is_member(b, u, tj->dev)) {
            if (ss_taskgraph_add_dep(tg, u->ready, tj->fwd, d) != SS_OK)
                return d->status;
            continue;
        }
        const ss_region *reg = b->preg[pi];
        int x = find_xfer(b, u, pr->tensor, tj->dev, reg);
        if (x < 0) {
            GROW(b, xf, cap_xf, b->n_xf + 1, d);
            x = b->n_xf;
            xferinfo *X = &b->xf[x];
            X->tensor = pr->tensor;
            X->unit = pr->unit;
            X->dev = tj->dev;
            X->src = b->tiles[u->first].dev;
            X->reg = reg;
            X->bytes = (double)volume(reg) *
                       (double)ss_dtype_size(ss_graph_tensor(b->g, pr->tensor)->dtype);
            X->btask = -1;
            X->sgr = 1;
            X->sg = X->bsg = X->a2a = -1;
            X->block = b->set.schedule == SS_PIPE_1F1B &&
                       ss_plan_config(p, u->op)->stage != ss_plan_config(p, tj->op)->stage;
            /* a blocking transfer is keyed like its producer's forward, so
             * the sender sends before starting its next forward (Megatron's
             * send right after forward_step); others like the consumer */
            int prio = X->block ? ss_sched_prio_fwd(u->op, b->tiles[u->first].mb)
                                : ss_sched_prio_fwd(tj->op, tj->mb);
            X->task = ss_build_add_transfer(b, tg, X->src, X->dev, X->bytes, u->op, 0, prio,
                                            ss_build_holds(b, X), d);
            if (X->task < 0)
                return d->status;
            X->next = u->xhead;
            u->xhead = x;
            b->n_xf++;
            b->st.xfer_fwd++;
            if (ss_taskgraph_add_dep(tg, u->ready, X->task, d) != SS_OK)
                return d->status;
        }
        b->xf[x].last_user = pr->tile;
        pr->xfer = x;
        if (ss_taskgraph_add_dep(tg, b->xf[x].task, tj->fwd, d) != SS_OK)
            return d->status;
    }
    if (scatter_gather(b, tg, d) != SS_OK)
        return d->status;
    if (alltoall_groups(b, tg, d) != SS_OK)
        return d->status;
    for (int pi = 0; pi < b->n_pairs; pi++) {
        const pairinfo *pr = &b->pairs[pi];
        if (pr->xfer >= 0 && b->xf[pr->xfer].sg >= 0 &&
            ss_taskgraph_add_dep(tg, b->xf[pr->xfer].sg, b->tiles[pr->tile].fwd, d) != SS_OK)
            return d->status;
    }
    return regathered(b, p, d);
}

/* b->unkept: per tile the bytes of its input that transfers bring from
 * the other devices of its own pipeline stage, all-to-alls aside. Such an
 * input is a gather of shards its peers hold (sequence parallelism's
 * all-gather before a column-parallel GEMM, the sequence shards of context
 * parallelism); Megatron keeps the local shard for the backward and
 * gathers the rest again there (Korthikanti et al. 2022), so the gathered
 * part is not kept; so does ring attention with the key and value blocks. Only GEMMs and flash attention, whose saved bytes are their
 * inputs, drop it; other ops, received tokens of an all-to-all and inputs
 * from another stage stay as they were. An FP8 GEMM keeps its input in one
 * byte per element (ss_op_gemm_work): the bytes are scaled to match. */
static ss_status regathered(ss_builder *b, const ss_plan *p, ss_diag *d)
{
    GROW(b, unkept, cap_unkept, b->n_tiles, d);
    memset(b->unkept, 0, (size_t)b->n_tiles * sizeof *b->unkept);
    for (int pi = 0; pi < b->n_pairs; pi++) {
        const pairinfo *pr = &b->pairs[pi];
        if (pr->xfer < 0 || b->xf[pr->xfer].a2a >= 0)
            continue;
        const tileinfo *tj = &b->tiles[pr->tile];
        if (ss_plan_config(p, b->units[pr->unit].op)->stage != ss_plan_config(p, tj->op)->stage)
            continue;
        const ss_op *op = ss_graph_op(b->g, tj->op);
        int gemm = op->type == SS_OP_LINEAR || op->type == SS_OP_EXPERT_LINEAR;
        if (!gemm && op->type != SS_OP_FLASH_ATTENTION)
            continue;
        double sz = (double)ss_dtype_size(ss_graph_tensor(b->g, pr->tensor)->dtype);
        double bytes = (double)volume(b->preg[pi]) * sz;
        if (gemm && op->attrs.dtype == SS_F8 && sz > 0)
            bytes /= sz;
        b->unkept[pr->tile] += bytes;
    }
    return SS_OK;
}

/* Whether tile i of ops a and b runs on one device (same tiling). */
static int same_tile_device(const ss_plan *p, int a, int b, int i)
{
    const ss_pconfig *ca = ss_plan_config(p, a), *cb = ss_plan_config(p, b);
    return ca->ntiles == cb->ntiles && ca->devices[i] == cb->devices[i];
}

/* Whether op o is a GEMM whose input another GEMM of a lower id reads in
 * the same region on the same device (tile i): one saved tensor, held
 * once (Megatron's fused gate and up projection; a router beside a shared
 * expert). */
static int input_shared(const ss_builder *b, const ss_op *op, int i)
{
    const ss_graph *g = b->g;
    int x = op->inputs[0], n = ss_graph_n_consumers(g, x);
    ss_tile t;
    ss_region r;
    int have = 0;
    for (int k = 0; k < n; k++) {
        const ss_op *o2 = ss_graph_op(g, ss_graph_consumer(g, x, k));
        if (o2->id >= op->id || o2->type != SS_OP_LINEAR || o2->inputs[0] != x ||
            !same_tile_device(b->plan, op->id, o2->id, i))
            continue;
        if (!have) {
            ss_pconfig_tile(g, op, ss_plan_config(b->plan, op->id), i, &t);
            ss_op_input_region(g, op, &t, 0, &r);
            have = 1;
        }
        ss_tile t2;
        ss_region r2;
        ss_pconfig_tile(g, o2, ss_plan_config(b->plan, o2->id), i, &t2);
        ss_op_input_region(g, o2, &t2, 0, &r2);
        if (r.ndim == r2.ndim && !memcmp(r.r, r2.r, (size_t)r.ndim * sizeof r.r[0]))
            return 1;
    }
    return 0;
}

/* Whether op o is a GEMM reading, through views, the output of a flash
 * attention tile on the same device: the kernel keeps that output for its
 * own backward, the same tensor the GEMM keeps. */
static int input_of_flash(const ss_builder *b, const ss_op *op, int i)
{
    const ss_graph *g = b->g;
    for (int x = op->inputs[0], hops = 0; hops < 16; hops++) {
        int pr = ss_graph_tensor(g, x)->producer;
        if (pr < 0)
            return 0;
        const ss_op *q = ss_graph_op(g, pr);
        if (q->type == SS_OP_FLASH_ATTENTION)
            return same_tile_device(b->plan, op->id, pr, i);
        if (!(q->type == SS_OP_RESHAPE || (q->attrs.view && q->type == SS_OP_TRANSPOSE)))
            return 0;
        x = q->inputs[0];
    }
    return 0;
}

double ss_build_kept_bytes(const ss_builder *b, int j, double saved)
{
    const tileinfo *t = &b->tiles[j];
    const ss_op *op = ss_graph_op(b->g, t->op);
    int i = j - b->tile_base[t->op];
    if (op->type == SS_OP_LINEAR && (input_shared(b, op, i) || input_of_flash(b, op, i)))
        return 0;
    if (op->type == SS_OP_BINARY && op->attrs.binary == SS_BINARY_MUL) {
        /* a gate's activation (SwiGLU's silu(gate)) is recomputed from
         * the unary's own saved input in the backward, as Megatron's
         * fused bias-SwiGLU does, not kept beside it */
        ss_tile tt;
        int have = 0;
        for (int k = 0; k < op->n_in; k++) {
            int pr = ss_graph_tensor(b->g, op->inputs[k])->producer;
            if (pr < 0 || ss_graph_op(b->g, pr)->type != SS_OP_UNARY ||
                ss_graph_n_consumers(b->g, op->inputs[k]) != 1 ||
                !same_tile_device(b->plan, t->op, pr, i))
                continue;
            if (!have)
                ss_pconfig_tile(b->g, op, ss_plan_config(b->plan, t->op), i, &tt);
            have = 1;
            saved -= ss_op_operand_bytes(b->g, op, &tt, k);
        }
    }
    if (b->unkept && j < b->cap_unkept)
        saved -= b->unkept[j];
    return saved > 0 ? saved : 0;
}


/* Selective recomputation (Korthikanti et al. 2022) keeps the
 * inputs of the recomputed region: a recomputed tile keeps each input
 * that an op not recomputed produced (attention's q, k and v). Full
 * recomputation keeps only a stage's received input (pass_memory), not
 * Megatron's per-layer input (2 s b h / tp per layer: not modelled, the
 * hierarchical evaluator's stage memory assumes so). */
double ss_build_checkpoint_bytes(const ss_builder *b, int j, ss_recompute r)
{
    const tileinfo *t = &b->tiles[j];
    const ss_op *op = ss_graph_op(b->g, t->op);
    int i = j - b->tile_base[t->op];
    ss_tile tt;
    double bytes = 0;
    if (r != SS_RECOMPUTE_SELECTIVE)
        return 0;
    int have = 0;
    for (int k = 0; k < op->n_in; k++) {
        int pr = ss_graph_tensor(b->g, op->inputs[k])->producer;
        if (pr < 0 || ss_build_recomputed(b, pr))
            continue;
        if (!have)
            ss_pconfig_tile(b->g, op, ss_plan_config(b->plan, t->op), i, &tt);
        have = 1;
        bytes += ss_op_operand_bytes(b->g, op, &tt, k);
    }
    return bytes;
}
