/*
 * bound.c — incremental per-device compute lower bound (bound.h).
 *
 * base[op * n_dev + dev] is op's compute time on dev under the committed
 * plan and load[dev] their sum over ops (recomputed from base at every
 * commit, so no rounding drift accumulates). A one-op evaluation fills row[]
 * for the changed op; a full evaluation fills the whole pend[] matrix, taking
 * the base's row for every op whose tiles did not change (base_plan holds the
 * configs behind base, kept in step at every commit; when it cannot be kept,
 * base_known = 0 and the next full evaluation computes every row): a group
 * move of 40 ops costs their rows, not the whole graph's.
 *
 * Tile costs are remembered per (op, degrees, reduction, recomputation,
 * device type of every tile): a tile's cost depends on nothing else
 * (ss_pconfig_tile fixes the tile from the degrees, the cost model prices it
 * on a device type), and the chain proposes the same configs again and
 * again (local moves, moves undone). A hit replays the stored per-tile
 * values in tile order, so a row is bit-identical with or without the memo.
 * The memo is bounded (MEMO_SLOTS entries, MEMO_VALUES values) and emptied
 * when full.
 */
#include "search/bound.h"

#include <string.h>

#define MEMO_SLOTS (1 << 15)   /* power of two; at most half are used */
#define MEMO_VALUES (1 << 21)  /* stored tile values (16 MiB) */

typedef struct rowent {
    uint64_t h;     /* 0: empty */
    int32_t op, red, ntiles, recompute;
    int32_t deg[SS_MAX_DIMS];
    int32_t off;    /* into vals and types */
} rowent;

struct ss_bound {
    const ss_graph *g;
    const ss_machine *m;
    ss_costmodel *cm;
    int n_ops, n_dev;
    double *base, *pend, *load, *row;
    int pend_op;    /* -1: pend holds a full matrix; >= 0: row holds that op */
    int have_pend;
    /* The configs behind base (base_known) and behind pend, so that a move
     * of many ops (changed = -1: a group move) recomputes only the rows of
     * ops whose config differs from the base. */
    ss_plan *base_plan, *pend_plan;
    int base_known;
    ss_pconfig one;  /* a one-op move's new config (one_ok), for base_plan at commit */
    int *one_dev, cap_one, one_ok;
    /* the tile-cost memo (file comment): open addressing on memo_key() */
    rowent *slots;
    int n_slots;
    double *vals;    /* per entry: its tiles' values, in tile order */
    uint16_t *types; /* per entry: its tiles' device types (several types only) */
    int n_vals;
    int hetero;      /* the machine has several device types */
};

ss_status ss_bound_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm, ss_bound **out,
                       ss_diag *d)
{
    ss_bound *b = ss_calloc(1, sizeof *b);
    if (!b)
        return ss_diag_set(d, SS_ERR_NOMEM, "search bound: out of memory");
    b->g = g;
    b->m = m;
    b->cm = cm;
    b->n_ops = ss_graph_n_ops(g);
    b->n_dev = ss_machine_n_devices(m);
    size_t cells = (size_t)b->n_ops * (size_t)b->n_dev + 1;
    b->base = ss_calloc(cells, sizeof *b->base);
    b->pend = ss_calloc(cells, sizeof *b->pend);
    b->load = ss_calloc((size_t)b->n_dev + 1, sizeof *b->load);
    b->row = ss_calloc((size_t)b->n_dev + 1, sizeof *b->row);
    b->slots = ss_calloc(MEMO_SLOTS, sizeof *b->slots);
    b->vals = ss_malloc(MEMO_VALUES * sizeof *b->vals);
    b->hetero = ss_machine_n_types(m) > 1;
    if (b->hetero)
        b->types = ss_malloc(MEMO_VALUES * sizeof *b->types);
    if (!b->base || !b->pend || !b->load || !b->row || !b->slots || !b->vals ||
        (b->hetero && !b->types)) {
        ss_bound_free(b);
        return ss_diag_set(d, SS_ERR_NOMEM, "search bound: out of memory");
    }
    *out = b;
    return SS_OK;
}

void ss_bound_free(ss_bound *b)
{
    if (!b)
        return;
    ss_free(b->base);
    ss_free(b->pend);
    ss_free(b->load);
    ss_free(b->row);
    ss_plan_free(b->base_plan);
    ss_plan_free(b->pend_plan);
    ss_free(b->one_dev);
    ss_free(b->slots);
    ss_free(b->vals);
    ss_free(b->types);
    ss_free(b);
}


static inline uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xbf58476d1ce4e5b9ULL;
}

/* The memo key's hash of op o under c (never 0). */
static uint64_t memo_key(const ss_bound *b, int o, const ss_pconfig *c, int recompute)
{
    uint64_t h = mix(mix(mix((uint64_t)o, (uint64_t)c->red), (uint64_t)c->ndim),
                     (uint64_t)recompute);
    for (int i = 0; i < c->ndim; i++)
        h = mix(h, (uint64_t)c->deg[i]);
    if (b->hetero)
        for (int i = 0; i < c->ntiles; i++)
            h = mix(h, (uint64_t)ss_machine_device(b->m, c->devices[i])->type);
    return h ? h : 1;
}

static int memo_match(const ss_bound *b, const rowent *e, uint64_t h, int o, const ss_pconfig *c,
                      int recompute)
{
    if (e->h != h || e->op != o || e->red != c->red || e->ntiles != c->ntiles ||
        e->recompute != recompute)
        return 0;
    for (int i = 0; i < c->ndim; i++)
        if (e->deg[i] != c->deg[i])
            return 0;
    if (b->hetero)
        for (int i = 0; i < c->ntiles; i++)
            if (b->types[e->off + i] != ss_machine_device(b->m, c->devices[i])->type)
                return 0;
    return 1;
}

/* Whether op o recomputes its whole forward under p (its stage's mode is
 * full; selective recompute is left out of the bound). */
static int full_recompute(const ss_plan *p, int o)
{
    return ss_plan_stage_recompute(ss_plan_settings_get(p), ss_plan_config(p, o)->stage) ==
           SS_RECOMPUTE_FULL;
}

/* Op `o`'s per-device compute time under p into row[n_dev]. */
static ss_status op_row(ss_bound *b, const ss_plan *p, int o, double *row, ss_diag *d)
{
    memset(row, 0, (size_t)b->n_dev * sizeof *row);
    const ss_op *op = ss_graph_op(b->g, o);
    if (op->type == SS_OP_INPUT)
        return SS_OK;
    const ss_pconfig *c = ss_plan_config(p, o);
    int recompute = full_recompute(p, o);
    for (int i = 0; i < c->ntiles; i++)
        if (c->devices[i] < 0 || c->devices[i] >= b->n_dev)
            return ss_diag_set(d, SS_ERR_INVALID, "search bound: operator \"%s\" on device %d",
                               op->name, c->devices[i]);
    uint64_t h = memo_key(b, o, c, recompute);
    uint32_t mask = MEMO_SLOTS - 1, k = (uint32_t)(h >> 32) & mask;
    for (; b->slots[k].h; k = (k + 1) & mask) {
        const rowent *e = &b->slots[k];
        if (memo_match(b, e, h, o, c, recompute)) {
            for (int i = 0; i < c->ntiles; i++)
                row[c->devices[i]] += b->vals[e->off + i];
            return SS_OK;
        }
    }
    if (b->n_vals + c->ntiles > MEMO_VALUES || 2 * (b->n_slots + 1) > MEMO_SLOTS) {
        memset(b->slots, 0, MEMO_SLOTS * sizeof *b->slots); /* full: start over */
        b->n_slots = b->n_vals = 0;
        k = (uint32_t)(h >> 32) & mask; /* the home slot, empty now */
    }
    int store = c->ntiles <= MEMO_VALUES;
    int off = b->n_vals;
    for (int i = 0; i < c->ntiles; i++) {
        int dev = c->devices[i];
        ss_tile t;
        ss_cost cost;
        ss_pconfig_tile(b->g, op, c, i, &t);
        ss_status st = ss_cost_tile(b->cm, b->g, op, &t, ss_machine_device(b->m, dev)->type, &cost);
        if (st)
            return ss_diag_set(d, st, "search bound: no cost for operator \"%s\"", op->name);
        /* a host-dispatch window longer than one operator may hide a
         * tile's host time behind its neighbours' GPU time
         * (simulator/build_host.c): only the GPU time is then certain */
        double f = cost.fwd_us, bw = cost.bwd_us;
        if (ss_machine_type(b->m, ss_machine_device(b->m, dev)->type)->dispatch_window != 1) {
            f = cost.fwd_gpu_us;
            bw = cost.bwd_gpu_us;
        }
        double v = f + bw + (recompute ? f : 0);
        row[dev] += v;
        if (store) {
            b->vals[off + i] = v;
            if (b->hetero)
                b->types[off + i] = (uint16_t)ss_machine_device(b->m, dev)->type;
        }
    }
    if (store) {
        rowent *e = &b->slots[k];
        e->h = h;
        e->op = o;
        e->red = c->red;
        e->ntiles = c->ntiles;
        e->recompute = recompute;
        memset(e->deg, 0, sizeof e->deg);
        for (int i = 0; i < c->ndim; i++)
            e->deg[i] = c->deg[i];
        e->off = off;
        b->n_vals += c->ntiles;
        b->n_slots++;
    }
    return SS_OK;
}

ss_status ss_bound_eval(ss_bound *b, const ss_plan *p, int changed, double *lb, ss_diag *d)
{
    b->have_pend = 0;
    double mx = 0;
    if (changed >= 0) {
        ss_status st = op_row(b, p, changed, b->row, d);
        if (st)
            return st;
        const double *old = b->base + (size_t)changed * b->n_dev;
        for (int k = 0; k < b->n_dev; k++) {
            double v = b->load[k] - old[k] + b->row[k];
            if (v > mx)
                mx = v;
        }
    } else {
        const ss_plan *bp = b->base_known ? b->base_plan : NULL;
        for (int o = 0; o < b->n_ops; o++) {
            double *dst = b->pend + (size_t)o * b->n_dev;
            if (bp && ss_pconfig_same_tiles(ss_plan_config(bp, o), ss_plan_config(p, o)) &&
                full_recompute(bp, o) == full_recompute(p, o)) {
                memcpy(dst, b->base + (size_t)o * b->n_dev, (size_t)b->n_dev * sizeof *dst);
                continue;
            }
            ss_status st = op_row(b, p, o, dst, d);
            if (st)
                return st;
        }
        if (!b->pend_plan)
            b->pend_plan = ss_plan_clone(p);
        else if (ss_plan_copy(b->pend_plan, p) != SS_OK) {
            ss_plan_free(b->pend_plan);
            b->pend_plan = NULL;
        }
        for (int k = 0; k < b->n_dev; k++) {
            double v = 0;
            for (int o = 0; o < b->n_ops; o++)
                v += b->pend[(size_t)o * b->n_dev + k];
            if (v > mx)
                mx = v;
        }
    }
    b->pend_op = changed;
    b->have_pend = 1;
    b->one_ok = 0;
    if (changed >= 0 && b->base_known) {
        const ss_pconfig *c = ss_plan_config(p, changed);
        if (!ss_grow((void **)&b->one_dev, &b->cap_one, c->ntiles, sizeof *b->one_dev)) {
            b->one = *c;
            b->one.devices = b->one_dev;
            memcpy(b->one_dev, c->devices, (size_t)c->ntiles * sizeof *b->one_dev);
            b->one_ok = 1;
        }
    }
    *lb = mx * (1 - 1e-9);
    return SS_OK;
}

void ss_bound_commit(ss_bound *b)
{
    if (!b->have_pend)
        return;
    if (b->pend_op >= 0) {
        memcpy(b->base + (size_t)b->pend_op * b->n_dev, b->row, (size_t)b->n_dev * sizeof *b->row);
        b->base_known = b->base_known && b->one_ok &&
                        ss_plan_set_config(b->base_plan, b->pend_op, &b->one, NULL) == SS_OK;
    } else {
        double *t = b->base;
        b->base = b->pend;
        b->pend = t;
        ss_plan *tp = b->base_plan;
        b->base_plan = b->pend_plan;
        b->pend_plan = tp;
        b->base_known = b->base_plan != NULL;
    }
    for (int k = 0; k < b->n_dev; k++) {
        double v = 0;
        for (int o = 0; o < b->n_ops; o++)
            v += b->base[(size_t)o * b->n_dev + k];
        b->load[k] = v;
    }
    b->have_pend = 0;
}
