/*
 * cost.c — the cost model: a chain of cost providers (profile database, live
 * measurement, ...) asked in the order added, the analytic roofline as the
 * last resort, and a cache in front of them all.
 *
 * The cache is an open-addressing hash table keyed by the op signature —
 * device type, op type, every attribute, and the extents and dtypes of the
 * output tile and of every operand region the tile reads — so two operators
 * that do the same work on the same kind of device share an entry, whatever
 * their names or graphs. Invariant: a cached answer is exactly what the
 * providers/analytic model gave the first time for that signature; providers
 * must therefore be pure functions of the signature. If the cache cannot
 * grow (out of memory), answers are still computed, just not remembered.
 */
#include "simsearch.h"

#include <string.h>

#define MAX_PROVIDERS 16

typedef struct entry {
    uint64_t hash;      /* 0 = empty slot */
    uint32_t key_off;   /* into the key pool */
    uint32_t key_len;
    ss_cost cost;
} entry;

struct ss_costmodel {
    const ss_machine *m;
    int n_prov;
    ss_cost_provider prov[MAX_PROVIDERS];
    entry *tab;
    size_t cap, used;   /* cap is a power of two; used <= cap / 2 */
    int64_t *pool;
    size_t pool_len, pool_cap;
};

ss_costmodel *ss_cost_new(const ss_machine *m)
{
    ss_costmodel *cm = ss_calloc(1, sizeof *cm);
    if (!cm)
        return NULL;
    cm->m = m;
    return cm;
}

void ss_cost_free(ss_costmodel *cm)
{
    if (!cm)
        return;
    ss_free(cm->tab);
    ss_free(cm->pool);
    ss_free(cm);
}

ss_status ss_cost_add_provider(ss_costmodel *cm, const ss_cost_provider *p, ss_diag *d)
{
    if (!cm || !p || !p->lookup)
        return ss_diag_set(d, SS_ERR_INVALID, "cost: provider without a lookup function");
    if (cm->n_prov >= MAX_PROVIDERS)
        return ss_diag_set(d, SS_ERR_INVALID, "cost: too many providers (at most %d)",
                           MAX_PROVIDERS);
    cm->prov[cm->n_prov++] = *p;
    /* Answers may change with the new provider: forget what was cached. */
    if (cm->tab)
        memset(cm->tab, 0, cm->cap * sizeof *cm->tab);
    cm->used = 0;
    cm->pool_len = 0;
    return SS_OK;
}

/* ------------------------------------------------------------ signature */

/* Upper bound of a key's length: 6 header values, 30 for the attributes,
 * 9 for the tile, the output dtypes and 8 per operand (dtype + region). */
#define KEY_MAX (6 + 30 + 9 + SS_MAX_OUTPUTS + 8 * SS_MAX_OPERANDS)

typedef struct keybuf {
    int64_t v[KEY_MAX];
    int n;
} keybuf;

#define K1(k, x) ((k)->v[(k)->n++] = (int64_t)(x))

static void kregion(keybuf *k, const ss_region *r)
{
    K1(k, r->ndim);
    for (int i = 0; i < r->ndim; i++)
        K1(k, r->r[i].hi - r->r[i].lo);
}

/* All attribute fields; small ones packed together (each fits its bits). */
static void kattrs(keybuf *k, const ss_op_attrs *a)
{
    for (int i = 0; i < SS_MAX_DIMS; i++) {
        K1(k, a->shape[i]);
        K1(k, (int64_t)a->kind[i] | (int64_t)(a->perm[i] & 0xffff) << 8);
    }
    K1(k, (int64_t)(a->ndim & 0xff) | (int64_t)a->dtype << 8 | (int64_t)(a->axis & 0xffff) << 16 |
              (int64_t)(a->n_split & 0xffff) << 32);
    K1(k, (int64_t)(a->use_bias != 0) | (int64_t)(a->trans_a != 0) << 1 |
              (int64_t)(a->trans_b != 0) << 2 | (int64_t)(a->return_sequences != 0) << 3 |
              (int64_t)(a->causal != 0) << 4 | (int64_t)(a->view != 0) << 5 |
              (int64_t)a->pool << 8 | (int64_t)a->unary << 16 |
              (int64_t)a->binary << 24 | (int64_t)a->lstm_mode << 32);
    K1(k, a->out_features);
    K1(k, a->out_channels);
    K1(k, a->groups);
    for (int i = 0; i < 2; i++) {
        K1(k, a->kernel[i]);
        K1(k, a->stride[i] | a->pad[i] << 32);
    }
    if (a->n_split > 0)
        for (int i = 0; i < SS_MAX_OUTPUTS; i++)
            K1(k, a->split_sizes[i]);
    double rate = a->rate == 0 ? 0 : a->rate;
    int64_t bits;
    memcpy(&bits, &rate, sizeof bits);
    K1(k, bits);
    K1(k, a->vocab);
    K1(k, a->dim);
    K1(k, a->hidden);
    K1(k, a->heads);
}

static void make_key(keybuf *k, const ss_graph *g, const ss_op *op, const ss_tile *t, int devtype)
{
    k->n = 0;
    K1(k, devtype);
    K1(k, op->type);
    K1(k, op->n_in | op->n_w << 8 | op->n_out << 16);
    kattrs(k, &op->attrs);
    kregion(k, &t->out);
    K1(k, t->red.hi - t->red.lo);
    ss_tile full;
    ss_op_full_tile(g, op, &full);
    K1(k, t->red.lo == full.red.lo); /* the first reduction slice may add the bias */
    for (int i = 0; i < op->n_out; i++) {
        const ss_tensor *o = ss_graph_tensor(g, op->outputs[i]);
        K1(k, o ? (int64_t)o->dtype : -1);
    }
    int n_operands = op->n_in + op->n_w;
    for (int i = 0; i < n_operands; i++) {
        int tid = i < op->n_in ? op->inputs[i] : op->weights[i - op->n_in];
        const ss_tensor *x = ss_graph_tensor(g, tid);
        ss_region r;
        ss_op_input_region(g, op, t, i, &r);
        K1(k, x ? (int64_t)x->dtype : -1);
        kregion(k, &r);
    }
}

/* Two interleaved multiply-add chains (independent, so they pipeline). */
static uint64_t key_hash(const keybuf *k)
{
    uint64_t a = 0x9e3779b97f4a7c15ULL, b = 0xc2b2ae3d27d4eb4fULL;
    int i = 0;
    for (; i + 1 < k->n; i += 2) {
        a = (a ^ (uint64_t)k->v[i]) * 0x100000001b3ULL;
        b = (b ^ (uint64_t)k->v[i + 1]) * 0x9e3779b97f4a7c15ULL;
    }
    if (i < k->n)
        a = (a ^ (uint64_t)k->v[i]) * 0x100000001b3ULL;
    uint64_t h = a ^ (b >> 31) ^ (b << 33) ^ (uint64_t)k->n;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    return h ? h : 1;
}

/* ---------------------------------------------------------------- cache */

static entry *find(ss_costmodel *cm, const keybuf *k, uint64_t h)
{
    if (!cm->tab)
        return NULL;
    size_t mask = cm->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        entry *e = &cm->tab[i];
        if (!e->hash)
            return NULL;
        if (e->hash == h && e->key_len == (uint32_t)k->n &&
            !memcmp(cm->pool + e->key_off, k->v, (size_t)k->n * sizeof k->v[0]))
            return e;
    }
}

static int grow_table(ss_costmodel *cm)
{
    size_t ncap = cm->cap ? cm->cap * 2 : 1024;
    entry *nt = ss_calloc(ncap, sizeof *nt);
    if (!nt)
        return -1;
    for (size_t i = 0; i < cm->cap; i++) {
        entry *e = &cm->tab[i];
        if (!e->hash)
            continue;
        size_t j = e->hash & (ncap - 1);
        while (nt[j].hash)
            j = (j + 1) & (ncap - 1);
        nt[j] = *e;
    }
    ss_free(cm->tab);
    cm->tab = nt;
    cm->cap = ncap;
    return 0;
}

static void insert(ss_costmodel *cm, const keybuf *k, uint64_t h, const ss_cost *c)
{
    if ((cm->used + 1) * 2 > cm->cap && grow_table(cm))
        return;
    if (cm->pool_len + (size_t)k->n > cm->pool_cap) {
        size_t ncap = cm->pool_cap ? cm->pool_cap * 2 : 16384;
        while (ncap < cm->pool_len + (size_t)k->n)
            ncap *= 2;
        if (ncap > UINT32_MAX)
            return;
        int64_t *np = ss_realloc(cm->pool, ncap * sizeof *np);
        if (!np)
            return;
        cm->pool = np;
        cm->pool_cap = ncap;
    }
    memcpy(cm->pool + cm->pool_len, k->v, (size_t)k->n * sizeof k->v[0]);
    size_t mask = cm->cap - 1, i = h & mask;
    while (cm->tab[i].hash)
        i = (i + 1) & mask;
    cm->tab[i].hash = h;
    cm->tab[i].key_off = (uint32_t)cm->pool_len;
    cm->tab[i].key_len = (uint32_t)k->n;
    cm->tab[i].cost = *c;
    cm->pool_len += (size_t)k->n;
    cm->used++;
}

/* ---------------------------------------------------------------- lookup */

ss_status ss_cost_tile(ss_costmodel *cm, const ss_graph *g, const ss_op *op, const ss_tile *t,
                       int devtype, ss_cost *out)
{
    if (!cm || !g || !op || !t || !out || !cm->m || devtype < 0 ||
        devtype >= ss_machine_n_types(cm->m))
        return SS_ERR_INVALID;
    keybuf k;
    make_key(&k, g, op, t, devtype);
    uint64_t h = key_hash(&k);
    entry *e = find(cm, &k, h);
    if (e) {
        *out = e->cost;
        return SS_OK;
    }
    const ss_device_type *dt = ss_machine_type(cm->m, devtype);
    ss_cost c;
    int answered = 0;
    for (int i = 0; i < cm->n_prov && !answered; i++) {
        memset(&c, 0, sizeof c);
        answered = cm->prov[i].lookup(cm->prov[i].ctx, g, op, t, dt, &c) != 0;
    }
    if (!answered)
        ss_cost_analytic(dt, g, op, t, &c);
    else { /* a profile or a measurement: all of it is GPU time */
        c.fwd_gpu_us = c.fwd_us;
        c.bwd_gpu_us = c.bwd_us;
        c.fwd_host_us = c.bwd_host_us = 0;
    }
    insert(cm, &k, h, &c);
    *out = c;
    return SS_OK;
}

/* Optimizer update: memory bound. Bytes moved per parameter (read + write):
 *   fp32:  SGD  w read 4 + grad read 4 + w write 4           = 12
 *          momentum adds the velocity read + write (8)        = 20
 *          Adam adds m and v, each read + written (16)        = 28
 *   mixed: the fp32 master weights are updated as above from an fp32 main
 *          gradient (Megatron-style), and the half-precision copy of the
 *          weights is written afterwards (2 more bytes):  SGD 14, momentum
 *          22, Adam 30.
 * The update of every weight shard is part of one fused multi-tensor
 * optimizer kernel per device (apex FusedAdam / torch foreach, as Megatron
 * runs it), not a kernel of its own: t = bytes / (bw * eff(bytes)), with no
 * launch overhead per shard. The few launches of the fused kernel each
 * stream tens of MB, so their host dispatch hides behind the GPU (the launch
 * floor of profiler/analytic.c never binds). Charging launch_us per shard
 * would bill a 24-layer GPT (292 weight tensors) 292 launches, 14 ms per
 * iteration on the calibrated A100 (docs/calibration.md). */
double ss_cost_update_us(ss_costmodel *cm, int devtype, int64_t n_params, ss_optimizer opt,
                         ss_precision prec)
{
    if (!cm || !cm->m || devtype < 0 || devtype >= ss_machine_n_types(cm->m) || n_params <= 0)
        return 0;
    const ss_device_type *dt = ss_machine_type(cm->m, devtype);
    double per = 12;
    if (opt == SS_OPT_SGD_MOMENTUM)
        per += 8;
    else if (opt == SS_OPT_ADAM)
        per += 16;
    if (prec == SS_PREC_MIXED)
        per += 2;
    double bytes = per * (double)n_params;
    if (!(dt->mem_gbps > 0))
        return 0;
    double eff = ss_devtype_eff(dt->n_eff_mem, dt->eff_mem_x, dt->eff_mem_y, bytes);
    if (!(eff > 1e-6))
        eff = 1e-6;
    return bytes / (dt->mem_gbps * 1e9 * eff) * 1e6;
}

/* 1 if every tile of op under c has tile 0's extents: each degree divides
 * its dim and the reduction degree the contraction (ss_pconfig_tile's
 * balanced ranges are then all equal), so a tile's cost depends only on
 * its device type. */
static int uniform_tiles(const ss_graph *g, const ss_op *op, const ss_pconfig *c)
{
    const ss_tensor *out = ss_graph_tensor(g, op->outputs[0]);
    if (!out || out->ndim != c->ndim)
        return 0;
    for (int k = 0; k < c->ndim; k++)
        if (c->deg[k] < 1 || out->shape[k] % c->deg[k])
            return 0;
    int64_t k = c->red > 1 ? ss_op_contraction(g, op) : 0;
    return c->red <= 1 || (k > 0 && k % c->red == 0);
}

ss_status ss_cost_plan_sources(ss_costmodel *cm, const ss_graph *g, const ss_machine *m,
                               const ss_plan *p, double share[3], ss_diag *d)
{
    double acc[3] = {0, 0, 0}, total = 0;
    if (!cm || !g || !m || !p || ss_plan_n_ops(p) != ss_graph_n_ops(g))
        return ss_diag_set(d, SS_ERR_INVALID, "cost: plan sources need a cost model, graph, "
                           "machine and a plan of that graph");
    /* Per tile: the device's type, and for uniform ops one price per type
     * (looked up in arrays: a 1,024-GPU plan has millions of tiles); the
     * sums run tile by tile as they always did, so the shares stay exact. */
    int nt = ss_machine_n_types(m), nd = ss_machine_n_devices(m);
    size_t ntz = (size_t)(nt > 0 ? nt : 1);
    ss_cost *by_type = ss_calloc(ntz, sizeof *by_type);
    char *have = ss_calloc(ntz, 1);
    int *dtype = ss_calloc((size_t)(nd > 0 ? nd : 1), sizeof *dtype);
    if (!by_type || !have || !dtype) {
        ss_free(by_type);
        ss_free(have);
        ss_free(dtype);
        return ss_diag_set(d, SS_ERR_NOMEM, "cost: out of memory");
    }
    for (int i = 0; i < nd; i++)
        dtype[i] = ss_machine_device(m, i)->type;
    ss_status st = SS_OK;
    for (int i = 0; st == SS_OK && i < ss_graph_n_ops(g); i++) {
        const ss_op *op = ss_graph_op(g, i);
        const ss_pconfig *c = ss_plan_config(p, i);
        int uniform = c && uniform_tiles(g, op, c);
        memset(have, 0, ntz);
        for (int k = 0; c && k < c->ntiles; k++) {
            int dv = c->devices[k];
            if (dv < 0 || dv >= nd) {
                st = ss_diag_set(d, SS_ERR_INVALID, "cost: op '%s' tile %d on device %d, "
                                 "not in the machine", op->name, k, dv);
                break;
            }
            int ty = dtype[dv];
            int typed = uniform && ty >= 0 && ty < nt;
            if (!typed || !have[ty]) {
                ss_tile t;
                ss_cost cost;
                ss_pconfig_tile(g, op, c, k, &t);
                if (ss_cost_tile(cm, g, op, &t, ty, &cost) != SS_OK) {
                    st = ss_diag_set(d, SS_ERR_INVALID, "cost: cannot price op '%s'", op->name);
                    break;
                }
                if (!typed) {
                    double us = cost.fwd_us + cost.bwd_us;
                    if ((unsigned)cost.source < 3)
                        acc[cost.source] += us;
                    total += us;
                    continue;
                }
                by_type[ty] = cost;
                have[ty] = 1;
            }
            const ss_cost *cost = &by_type[ty];
            double us = cost->fwd_us + cost->bwd_us;
            if ((unsigned)cost->source < 3)
                acc[cost->source] += us;
            total += us;
        }
    }
    ss_free(by_type);
    ss_free(have);
    ss_free(dtype);
    if (st != SS_OK)
        return st;
    for (int s = 0; s < 3; s++)
        share[s] = total > 0 ? acc[s] / total : 0;
    return SS_OK;
}
