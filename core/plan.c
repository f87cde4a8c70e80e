/*
 * plan.c — the ss_plan object: one parallel config per operator, the
 * pipeline/schedule settings, and the fingerprints of the model and topology
 * the plan was made for; tiling of an op under a config; plan validation.
 *
 * Invariants: cfg[i].devices always points into lst[i], a list of the
 * plan's own pool (core/devpool.h) holding one reference per op: ops whose
 * tiles sit on the same devices in the same order share one list, so a
 * plan's memory grows with its distinct placements, not with its operators
 * times tiles. Lists are immutable: a config change makes the op point to
 * another list. A failed call leaves the plan's contents unchanged.
 */
#include "core/plan_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TILES (1 << 20)

static void copy_name(char *dst, const char *src)
{
    snprintf(dst, SS_NAME_MAX, "%s", src ? src : "");
}

static int out_ndim(const ss_graph *g, const ss_op *op)
{
    if (op->n_out < 1)
        return 0;
    const ss_tensor *t = ss_graph_tensor(g, op->outputs[0]);
    return t ? t->ndim : 0;
}

static ss_plan *alloc_plan(int n_ops)
{
    ss_plan *p = ss_calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n_ops = n_ops;
    p->cfg = ss_calloc((size_t)(n_ops ? n_ops : 1), sizeof *p->cfg);
    p->lst = ss_calloc((size_t)(n_ops ? n_ops : 1), sizeof *p->lst);
    p->pool = ss_devpool_new();
    if (!p->cfg || !p->lst || !p->pool) {
        ss_plan_free(p);
        return NULL;
    }
    return p;
}

void ss_plan_settings_default(ss_plan_settings *s)
{
    memset(s, 0, sizeof *s);
    s->stages = 1;
    s->microbatches = 1;
    s->schedule = SS_PIPE_GPIPE;
    s->queue = SS_QUEUE_FIFO;
    s->sync = SS_SYNC_WAIT_FREE;
    s->bucket_bytes = 0;
    s->recompute = SS_RECOMPUTE_NONE;
    s->virtual_stages = 1;
}

ss_plan *ss_plan_new(const ss_graph *g, const ss_machine *m)
{
    if (!g)
        return NULL;
    int n = ss_graph_n_ops(g);
    ss_plan *p = alloc_plan(n);
    if (!p)
        return NULL;
    static const int dev0 = 0;
    for (int i = 0; i < n; i++) {
        if (!(p->lst[i] = ss_devpool_intern(p->pool, &dev0, 1))) {
            ss_plan_free(p);
            return NULL;
        }
        ss_pconfig *c = &p->cfg[i];
        c->ndim = out_ndim(g, ss_graph_op(g, i));
        for (int k = 0; k < SS_MAX_DIMS; k++)
            c->deg[k] = 1;
        c->red = 1;
        c->rep = 1;
        c->ntiles = 1;
        c->devices = p->lst[i]->v;
        c->stage = 0;
    }
    ss_plan_settings_default(&p->settings);
    p->model_fp = ss_graph_fingerprint(g);
    copy_name(p->model_name, ss_graph_name(g));
    if (m) {
        p->topo_fp = ss_machine_fingerprint(m);
        copy_name(p->topo_name, ss_machine_name(m));
        p->n_devices = ss_machine_n_devices(m);
    }
    return p;
}

void ss_plan_free(ss_plan *p)
{
    if (!p)
        return;
    ss_devpool_free(p->pool); /* every list, whatever its references */
    ss_free(p->cfg);
    ss_free(p->lst);
    ss_free(p);
}

ss_status ss_plan_copy(ss_plan *dst, const ss_plan *src)
{
    if (!dst || !src || dst->n_ops != src->n_ops)
        return SS_ERR_INVALID;
    if (dst == src)
        return SS_OK;
    /* Take every list first (a failure releases them and changes nothing
     * visible), then drop the old ones. An op whose list equals src's
     * already (the search's frequent case) keeps it: nl[i] NULL. */
    int n = src->n_ops;
    ss_devlist **nl = ss_malloc((size_t)(n ? n : 1) * sizeof *nl);
    if (!nl)
        return SS_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        const ss_devlist *s = src->lst[i], *o = dst->lst[i];
        nl[i] = NULL;
        if (o && o->hash == s->hash && o->n == s->n && /* o NULL: a clone being made */
            !memcmp(o->v, s->v, (size_t)s->n * sizeof *s->v))
            continue;
        if (!(nl[i] = ss_devpool_intern_list(dst->pool, s))) {
            while (i-- > 0)
                if (nl[i])
                    ss_devpool_release(dst->pool, nl[i]);
            ss_free(nl);
            return SS_ERR_NOMEM;
        }
    }
    for (int i = 0; i < n; i++) {
        if (nl[i]) {
            ss_devpool_release(dst->pool, dst->lst[i]);
            dst->lst[i] = nl[i];
        }
        dst->cfg[i] = src->cfg[i];
        dst->cfg[i].devices = dst->lst[i]->v;
    }
    ss_free(nl);
    dst->settings = src->settings;
    dst->model_fp = src->model_fp;
    dst->topo_fp = src->topo_fp;
    dst->n_devices = src->n_devices;
    memcpy(dst->model_name, src->model_name, sizeof dst->model_name);
    memcpy(dst->topo_name, src->topo_name, sizeof dst->topo_name);
    return SS_OK;
}

ss_plan *ss_plan_clone(const ss_plan *p)
{
    if (!p)
        return NULL;
    ss_plan *q = alloc_plan(p->n_ops);
    if (!q)
        return NULL;
    if (ss_plan_copy(q, p) != SS_OK) {
        ss_plan_free(q);
        return NULL;
    }
    return q;
}

int ss_plan_n_ops(const ss_plan *p) { return p ? p->n_ops : 0; }

const ss_pconfig *ss_plan_config(const ss_plan *p, int op)
{
    if (!p || op < 0 || op >= p->n_ops)
        return NULL;
    return &p->cfg[op];
}

/* Shape check shared by set_config and the loader: degrees and reduction
 * >= 1, product == ntiles, not absurdly many tiles. Returns 0 when fine,
 * else writes a reason into why. */
static int shape_problem(const ss_pconfig *c, int ndim, char *why, size_t n)
{
    if (c->ndim != ndim) {
        snprintf(why, n, "config has %d dims, the op's output has %d", c->ndim, ndim);
        return 1;
    }
    int64_t prod = 1;
    for (int k = 0; k < c->ndim; k++) {
        if (c->deg[k] < 1) {
            snprintf(why, n, "degree %d of dim %d must be at least 1", c->deg[k], k);
            return 1;
        }
        prod *= c->deg[k];
        if (prod > MAX_TILES) {
            snprintf(why, n, "more than %d tiles", MAX_TILES);
            return 1;
        }
    }
    if (c->red < 1) {
        snprintf(why, n, "reduction degree %d must be at least 1", c->red);
        return 1;
    }
    if (c->rep < 1) {
        snprintf(why, n, "replica degree %d must be at least 1", c->rep);
        return 1;
    }
    prod *= c->red;
    prod *= c->rep;
    if (prod > MAX_TILES) {
        snprintf(why, n, "more than %d tiles", MAX_TILES);
        return 1;
    }
    if (c->ntiles != prod) {
        snprintf(why, n, "tile count %d does not match the degrees (expected %lld)", c->ntiles,
                 (long long)prod);
        return 1;
    }
    if (!c->devices) {
        snprintf(why, n, "no device list");
        return 1;
    }
    return 0;
}

ss_status ss_plan_set_config(ss_plan *p, int op, const ss_pconfig *c, ss_diag *d)
{
    if (!p || !c || op < 0 || op >= p->n_ops)
        return ss_diag_set(d, SS_ERR_INVALID, "plan: operator %d out of range (plan has %d)", op,
                           p ? p->n_ops : 0);
    char why[160];
    if (shape_problem(c, p->cfg[op].ndim, why, sizeof why))
        return ss_diag_set(d, SS_ERR_INVALID, "plan: operator %d: %s", op, why);
    ss_devlist *l = p->lst[op];
    if (c->devices != l->v || c->ntiles != l->n) {
        /* another list: take it before the old one goes (c->devices may
         * point into the old one, or into another op's) */
        if (!(l = ss_devpool_intern(p->pool, c->devices, c->ntiles)))
            return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
        ss_devpool_release(p->pool, p->lst[op]);
        p->lst[op] = l;
    }
    ss_pconfig *dst = &p->cfg[op];
    *dst = *c;
    dst->devices = l->v;
    for (int k = c->ndim; k < SS_MAX_DIMS; k++)
        dst->deg[k] = 1;
    return SS_OK;
}

ss_plan_settings *ss_plan_settings_of(ss_plan *p) { return p ? &p->settings : NULL; }
const ss_plan_settings *ss_plan_settings_get(const ss_plan *p) { return p ? &p->settings : NULL; }
uint64_t ss_plan_model_fingerprint(const ss_plan *p) { return p ? p->model_fp : 0; }
uint64_t ss_plan_topology_fingerprint(const ss_plan *p) { return p ? p->topo_fp : 0; }

int ss_pconfig_same_tiles(const ss_pconfig *a, const ss_pconfig *b)
{
    if (a->ndim != b->ndim || a->red != b->red || a->rep != b->rep || a->ntiles != b->ntiles)
        return 0;
    for (int k = 0; k < a->ndim; k++)
        if (a->deg[k] != b->deg[k])
            return 0;
    return a->devices == b->devices ||
           memcmp(a->devices, b->devices, (size_t)a->ntiles * sizeof *a->devices) == 0;
}

size_t ss_plan_bytes(const ss_plan *p)
{
    if (!p)
        return 0;
    size_t n = (size_t)(p->n_ops ? p->n_ops : 1);
    return sizeof *p + n * (sizeof *p->cfg + sizeof *p->lst) + ss_devpool_bytes(p->pool);
}

int ss_plan_devlist_id(const ss_plan *p, int op)
{
    if (!p || op < 0 || op >= p->n_ops)
        return -1;
    return p->lst[op]->id;
}

int ss_plan_devlist_ids(const ss_plan *p) { return p ? ss_devpool_ids(p->pool) : 0; }

void ss_pconfig_tile(const ss_graph *g, const ss_op *op, const ss_pconfig *c, int index,
                     ss_tile *t)
{
    ss_op_full_tile(g, op, t);
    int rest = index;
    if (c->red > 1) {
        int r = rest % c->red;
        rest /= c->red;
        int64_t lo = t->red.lo, ext = t->red.hi - t->red.lo;
        t->red.lo = lo + r * ext / c->red;
        t->red.hi = lo + (r + 1) * ext / c->red;
    }
    if (c->rep > 1)
        rest /= c->rep; /* replicas compute the same tile */
    int nd = c->ndim < t->out.ndim ? c->ndim : t->out.ndim;
    for (int k = nd - 1; k >= 0; k--) {
        int deg = c->deg[k];
        if (deg <= 1)
            continue;
        int i = rest % deg;
        rest /= deg;
        int64_t lo = t->out.r[k].lo, ext = t->out.r[k].hi - t->out.r[k].lo;
        t->out.r[k].lo = lo + i * ext / deg;
        t->out.r[k].hi = lo + (i + 1) * ext / deg;
    }
}

ss_recompute ss_plan_stage_recompute(const ss_plan_settings *s, int stage)
{
    if (stage < 0 || stage >= SS_PLAN_MAX_RECOMPUTE_STAGES || !s->recompute_stage[stage])
        return s->recompute;
    return (ss_recompute)(s->recompute_stage[stage] - 1);
}

int ss_plan_recompute_uniform(const ss_plan_settings *s)
{
    return !s->recompute_stage[0]; /* canonical: stage 0 set iff per-stage */
}

ss_status ss_plan_set_recompute(ss_plan_settings *s, const ss_recompute *modes, int n,
                                const char *where, ss_diag *d)
{
    int stages = s->stages < 1 ? 1 : s->stages;
    if (n != 1 && n != stages)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: %d recompute modes, expected 1 or one per stage (%d)", where, n,
                           stages);
    if (n > SS_PLAN_MAX_RECOMPUTE_STAGES)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: %d recompute modes, more than the limit of %d", where, n,
                           SS_PLAN_MAX_RECOMPUTE_STAGES);
    int same = 1;
    for (int k = 0; k < n; k++) {
        if ((unsigned)modes[k] > SS_RECOMPUTE_SELECTIVE)
            return ss_diag_set(d, SS_ERR_INVALID, "%s: unknown recompute mode %d (stage %d)",
                               where, (int)modes[k], k);
        same &= modes[k] == modes[0];
    }
    memset(s->recompute_stage, 0, sizeof s->recompute_stage);
    s->recompute = modes[0];
    for (int k = 0; k < n && !same; k++)
        s->recompute_stage[k] = (unsigned char)(1 + modes[k]);
    return SS_OK;
}

/* Settings sanity; prefix names the plan ("plan" or a file). */
static ss_status check_settings(const ss_plan_settings *s, const char *prefix, ss_diag *d)
{
    if (s->stages < 1)
        return ss_diag_set(d, SS_ERR_INVALID, "%s: settings: stages must be at least 1 (got %d)",
                           prefix, s->stages);
    if (s->microbatches < 1)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: settings: microbatches must be at least 1 (got %d)", prefix,
                           s->microbatches);
    if (!(s->bucket_bytes >= 0) || !isfinite(s->bucket_bytes))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: settings: bucket_bytes must be a finite number >= 0 (got %g)",
                           prefix, s->bucket_bytes);
    if ((unsigned)s->schedule > SS_PIPE_1F1B || (unsigned)s->queue > SS_QUEUE_BACKWARD_FIRST ||
        (unsigned)s->sync > SS_SYNC_BULK || (unsigned)s->recompute > SS_RECOMPUTE_SELECTIVE ||
        (s->distopt != 0 && s->distopt != 1 && s->distopt != SS_ZERO3))
        return ss_diag_set(d, SS_ERR_INVALID, "%s: settings: unknown schedule/queue/sync/recompute/distopt"
                           " (distopt: 0, 1 or 3)",
                           prefix);
    if (s->distopt == SS_ZERO3 && s->sync == SS_SYNC_BULK)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: settings: distopt 3 (ZeRO-3) with sync \"bulk\" is not modelled "
                           "(ZeRO-3 reduce-scatters each micro-batch's gradients as the backward "
                           "makes them, as FSDP and DeepSpeed do: use sync \"wait_free\")",
                           prefix);
    if (s->distopt == SS_ZERO3 && s->virtual_stages > 1)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: settings: distopt 3 (ZeRO-3) with virtual_stages %d is not modelled "
                           "(the one-ahead weight prefetch follows layer order, which the "
                           "interleaved schedule does not run in; use virtual_stages 1 or distopt 1)",
                           prefix, s->virtual_stages);
    if (s->distopt == SS_ZERO3 && s->synced_flags)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: settings: distopt 3 (ZeRO-3) with synced_flags is not modelled "
                           "(the next forward's weight all-gathers have no update to wait for)",
                           prefix);
    if (!ss_plan_recompute_uniform(s)) {
        int bad = -1;
        for (int k = 0; k < SS_PLAN_MAX_RECOMPUTE_STAGES && bad < 0; k++)
            if (k < s->stages ? s->recompute_stage[k] < 1 ||
                                    s->recompute_stage[k] > 1 + SS_RECOMPUTE_SELECTIVE
                              : s->recompute_stage[k] != 0)
                bad = k;
        if (bad >= 0 || s->stages > SS_PLAN_MAX_RECOMPUTE_STAGES ||
            s->recompute_stage[0] != 1 + s->recompute)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: settings: recompute: per-stage modes must be given for "
                               "each of the %d stages (at most %d) and none past them (stage %d)",
                               prefix, s->stages, SS_PLAN_MAX_RECOMPUTE_STAGES, bad);
    }
    int v = s->virtual_stages;
    if (v < 1)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: settings: virtual_stages must be at least 1 (got %d)", prefix, v);
    if (v == 1)
        return SS_OK;
    if (s->stages % v != 0 || s->stages / v < 2)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: settings: %d stages with virtual_stages = %d: the stages are the "
                           "pp * virtual_stages model chunks of an interleaved pipeline, so they "
                           "must be a multiple of virtual_stages with pp = stages / "
                           "virtual_stages at least 2",
                           prefix, s->stages, v);
    if (s->schedule != SS_PIPE_1F1B)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: settings: virtual_stages = %d needs schedule \"1f1b\" "
                           "(interleaving is a 1F1B schedule)",
                           prefix, v);
    int pp = s->stages / v;
    if (s->microbatches % pp != 0)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: settings: %d micro-batches with virtual_stages = %d: the "
                           "interleaved schedule runs micro-batches in groups of pp = %d, so they "
                           "must be a multiple of %d",
                           prefix, s->microbatches, v, pp, pp);
    return SS_OK;
}

/* With virtual stages, stage (chunk) k runs on the devices of pipeline rank
 * k mod pp: no device holds ops of two ranks. */
static ss_status check_ranks(const ss_plan *p, const ss_graph *g, const char *prefix, ss_diag *d)
{
    int v = p->settings.virtual_stages, pp = p->settings.stages / (v > 0 ? v : 1);
    if (v <= 1)
        return SS_OK;
    /* per device list: the pipeline rank + 1 its devices were checked for
     * (an op whose list passed for its rank passes again) */
    int n_ids = ss_devpool_ids(p->pool);
    int *done = ss_calloc((size_t)n_ids + 1, sizeof *done);
    if (!done)
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    int nd = 0;
    for (int i = 0; i < p->n_ops; i++)
        if (!done[p->lst[i]->id]) {
            done[p->lst[i]->id] = 1;
            for (int t = 0; t < p->cfg[i].ntiles; t++)
                if (p->cfg[i].devices[t] >= nd)
                    nd = p->cfg[i].devices[t] + 1;
        }
    memset(done, 0, ((size_t)n_ids + 1) * sizeof *done);
    int *first = ss_malloc((size_t)(nd ? nd : 1) * sizeof *first); /* op first placing dev */
    if (!first) {
        ss_free(done);
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; k < nd; k++)
        first[k] = -1;
    ss_status st = SS_OK;
    for (int i = 0; i < p->n_ops && !st; i++) {
        const ss_pconfig *c = &p->cfg[i];
        int id = p->lst[i]->id;
        if (done[id] == c->stage % pp + 1)
            continue;
        done[id] = c->stage % pp + 1;
        for (int t = 0; t < c->ntiles && !st; t++) {
            int dv = c->devices[t], o = first[dv];
            if (o < 0)
                first[dv] = i;
            else if (p->cfg[o].stage % pp != c->stage % pp)
                st = ss_diag_set(d, SS_ERR_INVALID,
                                 "%s: operator \"%s\" in stage %d (pipeline rank %d) is on "
                                 "device %d, which runs \"%s\" of stage %d (rank %d): with "
                                 "virtual_stages = %d, stage k runs on the devices of pipeline "
                                 "rank k mod %d",
                                 prefix, ss_graph_op(g, i)->name, c->stage, c->stage % pp, dv,
                                 ss_graph_op(g, o)->name, p->cfg[o].stage, p->cfg[o].stage % pp,
                                 v, pp);
        }
    }
    ss_free(first);
    ss_free(done);
    return st;
}

/* Devices of op's config c in range, the replicas of one tile on distinct
 * devices. */
static ss_status check_devices(const ss_pconfig *c, const ss_op *op, int n_devices,
                               const char *prefix, ss_diag *d)
{
    for (int t = 0; t < c->ntiles; t++)
        if (c->devices[t] < 0 || (n_devices > 0 && c->devices[t] >= n_devices))
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: operator \"%s\": device %d of tile %d out of range "
                               "(the machine has %d devices)",
                               prefix, op->name, c->devices[t], t, n_devices);
    /* replicas of one tile (same dims index and reduction slice) on
     * distinct devices: a device holding two copies of one tile computes
     * nothing new */
    if (c->rep > 1)
        for (int t = 0; t < c->ntiles; t++) {
            int q = t / c->red % c->rep, base = t - q * c->red;
            for (int q2 = 0; q2 < q; q2++)
                if (c->devices[base + q2 * c->red] == c->devices[t])
                    return ss_diag_set(d, SS_ERR_INVALID,
                                       "%s: operator \"%s\": replicas %d and %d of one tile are "
                                       "both on device %d (replicas need distinct devices)",
                                       prefix, op->name, q2, q, c->devices[t]);
        }
    return SS_OK;
}

ss_status ss_plan_validate_op(const ss_plan *p, const ss_graph *g, int n_devices, int i,
                              const char *prefix, int64_t *passed, ss_diag *d)
{
    const ss_op *op = ss_graph_op(g, i);
    const ss_pconfig *c = &p->cfg[i];
    char why[160];
    if (shape_problem(c, out_ndim(g, op), why, sizeof why))
        return ss_diag_set(d, SS_ERR_INVALID, "%s: operator \"%s\": %s", prefix, op->name, why);
    const ss_tensor *out = op->n_out > 0 ? ss_graph_tensor(g, op->outputs[0]) : NULL;
    unsigned mask = ss_op_split_mask(g, op);
    for (int k = 0; k < c->ndim; k++) {
        if (c->deg[k] == 1)
            continue;
        if (!(mask & (1u << k)))
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: operator \"%s\": dim %d (%s) cannot be split (degree %d)",
                               prefix, op->name, k, ss_dim_kind_name(out->kind[k]), c->deg[k]);
        if (out->shape[k] % c->deg[k] != 0)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: operator \"%s\": degree %d does not divide dim %d (%lld)",
                               prefix, op->name, c->deg[k], k, (long long)out->shape[k]);
    }
    if (c->red > 1) {
        int64_t cext = ss_op_contraction(g, op);
        if (cext <= 0)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: operator \"%s\": reduction degree %d on a %s op, which has "
                               "no contraction dim",
                               prefix, op->name, c->red, ss_op_type_name(op->type));
        if (cext % c->red != 0)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: operator \"%s\": reduction degree %d does not divide the "
                               "contraction dim (%lld)",
                               prefix, op->name, c->red, (long long)cext);
    }
    /* the devices: once per list and (replica, reduction) degrees */
    int id = p->lst[i]->id;
    int64_t degs = ((int64_t)c->rep << 21 | c->red) + 1;
    if (!passed || passed[id] != degs) {
        ss_status st = check_devices(c, op, n_devices, prefix, d);
        if (st)
            return st;
        if (passed)
            passed[id] = degs;
    }
    if (c->stage < 0 || c->stage >= p->settings.stages)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: operator \"%s\": stage %d out of range (the plan has %d stages)",
                           prefix, op->name, c->stage, p->settings.stages);
    for (int j = 0; j < op->n_in; j++) {
        const ss_tensor *in = ss_graph_tensor(g, op->inputs[j]);
        if (!in || in->producer < 0 || in->producer >= p->n_ops)
            continue;
        const ss_op *prod = ss_graph_op(g, in->producer);
        if (prod->type == SS_OP_INPUT)
            continue; /* graph inputs may be fed to any stage */
        if (p->cfg[in->producer].stage > c->stage)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: operator \"%s\" in stage %d consumes \"%s\" from the later "
                               "stage %d (stages must not decrease along the graph)",
                               prefix, op->name, c->stage, in->name,
                               p->cfg[in->producer].stage);
    }
    return SS_OK;
}

/* Every two devices the plan uses must reach each other: two peers that
 * both refuse connections can only talk through a device that accepts them
 * (core/machine.c), so with none such, a plan may use one of them. */
static ss_status check_reachable(const ss_plan *p, const ss_machine *m, const char *prefix,
                                 ss_diag *d)
{
    int n = ss_machine_n_devices(m);
    for (int i = 0; i < n; i++)
        if (ss_machine_device(m, i)->accepts_connections)
            return SS_OK;
    int first = -1;
    for (int i = 0; i < p->n_ops; i++)
        for (int t = 0; t < p->cfg[i].ntiles; t++) {
            int dv = p->cfg[i].devices[t];
            if (first < 0)
                first = dv;
            else if (dv != first)
                return ss_diag_set(d, SS_ERR_INVALID,
                                   "%s: devices %d (%s) and %d (%s) cannot reach each other: "
                                   "every device of topology \"%s\" refuses connections, so "
                                   "none can relay; a plan for it uses one device",
                                   prefix, first, ss_machine_device(m, first)->name, dv,
                                   ss_machine_device(m, dv)->name, ss_machine_name(m));
        }
    return SS_OK;
}

ss_status ss_plan_validate_with(const ss_plan *p, const ss_graph *g, const ss_machine *m,
                                const char *prefix, ss_diag *d)
{
    if (!p || !g)
        return ss_diag_set(d, SS_ERR_INVALID, "%s: no plan or graph", prefix);
    if (p->n_ops != ss_graph_n_ops(g))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: the plan has %d operators but model \"%s\" has %d", prefix,
                           p->n_ops, ss_graph_name(g), ss_graph_n_ops(g));
    ss_status st = check_settings(&p->settings, prefix, d);
    if (st)
        return st;
    int n_devices = m ? ss_machine_n_devices(m) : p->n_devices;
    int64_t *passed = ss_calloc((size_t)ss_devpool_ids(p->pool) + 1, sizeof *passed);
    if (!passed)
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < p->n_ops && !st; i++)
        st = ss_plan_validate_op(p, g, n_devices, i, prefix, passed, d);
    ss_free(passed);
    if (st)
        return st;
    if ((st = check_ranks(p, g, prefix, d)) != SS_OK)
        return st;
    return m ? check_reachable(p, m, prefix, d) : SS_OK;
}

ss_status ss_plan_validate(const ss_plan *p, const ss_graph *g, const ss_machine *m, ss_diag *d)
{
    return ss_plan_validate_with(p, g, m, "plan", d);
}

/* ---- cross-field consistency of a plan file ---- */

typedef struct devlo {
    int dev;
    int64_t lo;
} devlo;

static int cmp_devlo(const void *a, const void *b)
{
    const devlo *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* A memo of op_microbatches per device list and tiling (the degrees and
 * the sample dim's range): the ops of a repeated layer share both. */
typedef struct mbmemo {
    int *head;  /* per device list id: its first entry, -1 */
    struct mbent {
        int ndim, red, rep, sd;
        int deg[SS_MAX_DIMS];
        int64_t lo, hi;
        int k;    /* the answer */
        int next; /* the next entry of the same list, -1 */
    } *e;
    int n;
    devlo *buf; /* scratch: the most tiles of any op */
} mbmemo;

/* Micro-batches op i's tiles form: the most distinct sample offsets of its
 * tiles on one device (the simulator's micro-batch rule, simulator/build.h). */
static int op_microbatches(const ss_plan *p, const ss_graph *g, int i, mbmemo *mm)
{
    const ss_op *op = ss_graph_op(g, i);
    const ss_pconfig *c = &p->cfg[i];
    const ss_tensor *out = op->n_out > 0 ? ss_graph_tensor(g, op->outputs[0]) : NULL;
    int sd = -1;
    for (int k = 0; out && k < out->ndim && sd < 0; k++)
        if (out->kind[k] == SS_DIM_SAMPLE)
            sd = k;
    if (sd < 0 || c->ntiles <= 1)
        return 1;
    ss_tile full;
    ss_op_full_tile(g, op, &full);
    int64_t lo = full.out.r[sd].lo, hi = full.out.r[sd].hi;
    int id = p->lst[i]->id;
    for (int x = mm->head[id]; x >= 0; x = mm->e[x].next) {
        const struct mbent *e = &mm->e[x];
        if (e->ndim == c->ndim && e->red == c->red && e->rep == c->rep && e->sd == sd &&
            e->lo == lo && e->hi == hi && !memcmp(e->deg, c->deg, sizeof e->deg))
            return e->k;
    }
    devlo *buf = mm->buf;
    for (int t = 0; t < c->ntiles; t++) {
        ss_tile tile;
        ss_pconfig_tile(g, op, c, t, &tile);
        buf[t].dev = c->devices[t];
        buf[t].lo = tile.out.r[sd].lo;
    }
    qsort(buf, (size_t)c->ntiles, sizeof *buf, cmp_devlo);
    int best = 1;
    for (int t = 1, rank = 1; t < c->ntiles; t++) {
        if (buf[t].dev != buf[t - 1].dev)
            rank = 1;
        else if (buf[t].lo != buf[t - 1].lo)
            rank++;
        if (rank > best)
            best = rank;
    }
    struct mbent *e = &mm->e[mm->n];
    e->ndim = c->ndim;
    e->red = c->red;
    e->rep = c->rep;
    e->sd = sd;
    memcpy(e->deg, c->deg, sizeof e->deg);
    e->lo = lo;
    e->hi = hi;
    e->k = best;
    e->next = mm->head[id];
    mm->head[id] = mm->n++;
    return best;
}

/* The most micro-batches any operator's tiles form, and that operator in
 * *at (-1 if none forms more than one); -1 when out of memory. */
static int layout_microbatches(const ss_plan *p, const ss_graph *g, int *at)
{
    int maxt = 1, n_ids = ss_devpool_ids(p->pool);
    for (int i = 0; i < p->n_ops; i++)
        if (p->cfg[i].ntiles > maxt)
            maxt = p->cfg[i].ntiles;
    mbmemo mm = {0};
    mm.buf = ss_malloc((size_t)maxt * sizeof *mm.buf);
    mm.head = ss_malloc(((size_t)n_ids + 1) * sizeof *mm.head);
    mm.e = ss_malloc(((size_t)p->n_ops + 1) * sizeof *mm.e);
    int layout = -1;
    if (mm.buf && mm.head && mm.e) {
        for (int k = 0; k < n_ids; k++)
            mm.head[k] = -1;
        layout = 1;
        *at = -1;
        for (int i = 0; i < p->n_ops; i++) {
            if (ss_graph_op(g, i)->type == SS_OP_INPUT)
                continue;
            int k = op_microbatches(p, g, i, &mm);
            if (k > layout) {
                layout = k;
                *at = i;
            }
        }
    }
    ss_free(mm.buf);
    ss_free(mm.head);
    ss_free(mm.e);
    return layout;
}

int ss_plan_layout_microbatches(const ss_plan *p, const ss_graph *g)
{
    int at;
    return layout_microbatches(p, g, &at);
}

ss_status ss_plan_check_consistency(const ss_plan *p, const ss_graph *g, const char *file,
                                    ss_diag *d)
{
    const ss_plan_settings *s = &p->settings;
    /* every pipeline stage holds an operator: the 1F1B warm-up depth and the
     * stage count reported are taken from settings.stages */
    if (s->stages > 1) {
        unsigned char *used = ss_calloc((size_t)s->stages, 1);
        if (!used)
            return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
        for (int i = 0; i < p->n_ops; i++)
            if (ss_graph_op(g, i)->type != SS_OP_INPUT && p->cfg[i].stage >= 0 &&
                p->cfg[i].stage < s->stages)
                used[p->cfg[i].stage] = 1;
        int empty = -1;
        for (int k = 0; k < s->stages && empty < 0; k++)
            if (!used[k])
                empty = k;
        ss_free(used);
        if (empty >= 0)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: $.settings.stages: %d stages, but no operator is in stage %d "
                               "(every stage needs at least one operator: see the operators' "
                               "\"stage\")",
                               file, s->stages, empty);
    }
    if (s->microbatches <= 1)
        return SS_OK;
    int64_t batch = ss_graph_batch(g);
    if (batch > 0 && s->microbatches > batch)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: $.settings.microbatches: %d micro-batches, more than the %lld "
                           "samples of the batch of model \"%s\"",
                           file, s->microbatches, (long long)batch, ss_graph_name(g));
    if (batch > 0 && batch % s->microbatches != 0)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: $.settings.microbatches: %d micro-batches do not divide the "
                           "batch of %lld samples of model \"%s\"",
                           file, s->microbatches, (long long)batch, ss_graph_name(g));
    int at = -1;
    int layout = layout_microbatches(p, g, &at);
    if (layout < 0)
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    if (s->microbatches > layout)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: $.settings.microbatches: %d micro-batches, but the operators' "
                           "tiles form at most %d per device%s%s%s (a micro-batch is one of "
                           "several tiles of an operator at different sample offsets on the same "
                           "device)",
                           file, s->microbatches, layout, at >= 0 ? " ($.operators[\"" : "",
                           at >= 0 ? ss_graph_op(g, at)->name : "", at >= 0 ? "\"])" : "");
    return SS_OK;
}
