/*
 * plan_view.c — the plan analysed once (plan_view.h): per-op sample dims
 * of the graph, and per plan the stages, their op groups, the tile entries
 * and the data-parallel facts, made once per judgement by the dispatcher
 * and read by every evaluator; a single-op change re-reads that op only.
 * Invariant: as plan_view.h's.
 */
#include "simulator/plan_view.h"

#include <string.h>

int ss_plan_view_sample_dim(const ss_graph *g, int o)
{
    const ss_op *op = ss_graph_op(g, o);
    if (op->n_out < 1)
        return -1;
    const ss_tensor *t = ss_graph_tensor(g, op->outputs[0]);
    for (int k = 0; k < t->ndim; k++)
        if (t->kind[k] == SS_DIM_SAMPLE)
            return k;
    return -1;
}

ss_plan_view *ss_plan_view_new(const ss_graph *g, const ss_machine *m)
{
    if (!g || !m)
        return NULL;
    ss_plan_view *v = ss_calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->g = g;
    v->n_ops = ss_graph_n_ops(g);
    v->n_dev = ss_machine_n_devices(m);
    size_t no = (size_t)v->n_ops + 1;
    v->sd = ss_calloc(no, sizeof *v->sd);
    v->stage = ss_calloc(no, sizeof *v->stage);
    v->sops = ss_calloc(no, sizeof *v->sops);
    v->pos = ss_calloc(no, sizeof *v->pos);
    v->otiles = ss_calloc(no, sizeof *v->otiles);
    v->obad = ss_calloc(no, sizeof *v->obad);
    if (!v->sd || !v->stage || !v->sops || !v->pos || !v->otiles || !v->obad) {
        ss_plan_view_free(v);
        return NULL;
    }
    for (int o = 0; o < v->n_ops; o++)
        v->sd[o] = ss_plan_view_sample_dim(g, o);
    return v;
}

void ss_plan_view_free(ss_plan_view *v)
{
    if (!v)
        return;
    ss_free(v->sd);
    ss_free(v->stage);
    ss_free(v->stage_off);
    ss_free(v->sops);
    ss_free(v->pos);
    ss_free(v->otiles);
    ss_free(v->obad);
    ss_free(v->lid_stamp);
    ss_free(v->lid_bad);
    ss_free(v);
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Whether a device of c lies outside the machine. */
static unsigned char out_of_range(const ss_plan_view *v, const ss_pconfig *c)
{
    for (int t = 0; t < c->ntiles; t++)
        if (c->devices[t] < 0 || c->devices[t] >= v->n_dev)
            return 1;
    return 0;
}

/* Op o's own facts: stage, tile entries. */
static void read_op(ss_plan_view *v, const ss_plan *p, int o)
{
    const ss_pconfig *c = ss_plan_config(p, o);
    v->stage[o] = c->stage;
    v->otiles[o] = c->ntiles;
}

/* Op o's devices in range (ops sharing a device list scan it once per
 * set: by_list). */
static void range_op(ss_plan_view *v, const ss_plan *p, int o, int by_list)
{
    const ss_pconfig *c = ss_plan_config(p, o);
    int id = by_list ? ss_plan_devlist_id(p, o) : -1;
    if (id < 0 || id >= v->cap_lid) {
        v->obad[o] = out_of_range(v, c);
        return;
    }
    if (v->lid_stamp[id] != v->stamp) {
        v->lid_stamp[id] = v->stamp;
        v->lid_bad[id] = out_of_range(v, c);
    }
    v->obad[o] = v->lid_bad[id];
}

/* The settings, the stage groups and the summaries from the per-op facts. */
static ss_status summarise(ss_plan_view *v, const ss_plan *p, ss_diag *d)
{
    const ss_plan_settings *set = ss_plan_settings_get(p);
    v->P = set->stages < 1 ? 1 : set->stages;
    v->M = set->microbatches < 1 ? 1 : set->microbatches;
    v->V = set->virtual_stages > 1 ? set->virtual_stages : 1;
    v->R = v->P / v->V > 0 ? v->P / v->V : 1;
    if (ss_grow((void **)&v->stage_off, &v->cap_p, v->P + 1, sizeof *v->stage_off)) {
        v->P = 0;
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory");
    }
    int P = v->P;
    memset(v->stage_off, 0, (size_t)(P + 1) * sizeof *v->stage_off);
    v->bad_stage = v->no_sample = -1;
    v->tiles = 0;
    v->sample_gcd = 0;
    for (int o = 0; o < v->n_ops; o++) {
        const ss_pconfig *c = ss_plan_config(p, o);
        int s = v->stage[o];
        if (s >= 0 && s < P)
            v->stage_off[s + 1]++;
        else if (v->bad_stage < 0)
            v->bad_stage = o;
        v->tiles += v->otiles[o];
        int sd = v->sd[o];
        if (sd < 0 || sd >= c->ndim) {
            if (v->no_sample < 0)
                v->no_sample = o;
        } else
            v->sample_gcd = gcd64(v->sample_gcd, c->deg[sd]);
    }
    for (int s = 0; s < P; s++)
        v->stage_off[s + 1] += v->stage_off[s];
    /* each stage's group filled in op order: stage_off[s] counts up to the
     * next stage's start, then moves back */
    for (int o = 0; o < v->n_ops; o++) {
        int s = v->stage[o];
        v->pos[o] = -1;
        if (s < 0 || s >= P)
            continue;
        int at = v->stage_off[s]++;
        v->sops[at] = o;
    }
    for (int s = P; s > 0; s--)
        v->stage_off[s] = v->stage_off[s - 1];
    v->stage_off[0] = 0;
    for (int s = 0; s < P; s++)
        for (int j = v->stage_off[s]; j < v->stage_off[s + 1]; j++)
            v->pos[v->sops[j]] = j - v->stage_off[s];
    return SS_OK;
}

static ss_status check_plan(const ss_plan_view *v, const ss_plan *p, ss_diag *d)
{
    if (ss_plan_n_ops(p) != v->n_ops)
        return ss_diag_set(d, SS_ERR_INVALID, "simulate: the plan has %d operators, the model %d",
                           ss_plan_n_ops(p), v->n_ops);
    return SS_OK;
}

ss_status ss_plan_view_set(ss_plan_view *v, const ss_plan *p, ss_diag *d)
{
    v->P = 0;
    ss_status st = check_plan(v, p, d);
    if (st)
        return st;
    v->range_known = 0;
    for (int o = 0; o < v->n_ops; o++)
        read_op(v, p, o);
    return summarise(v, p, d);
}

ss_status ss_plan_view_change(ss_plan_view *v, const ss_plan *p, int op, ss_diag *d)
{
    if (v->P == 0 || op < -1 || op >= v->n_ops)
        return ss_plan_view_set(v, p, d);
    v->P = 0;
    ss_status st = check_plan(v, p, d);
    if (st)
        return st;
    if (op >= 0) {
        read_op(v, p, op);
        if (v->range_known) {
            range_op(v, p, op, 0);
            v->bad_device = -1;
            for (int o = 0; o < v->n_ops && v->bad_device < 0; o++)
                if (v->obad[o])
                    v->bad_device = o;
        }
    }
    return summarise(v, p, d);
}

int ss_plan_view_bad_device(ss_plan_view *v, const ss_plan *p)
{
    if (v->range_known)
        return v->bad_device;
    int ids = ss_plan_devlist_ids(p), cap = v->cap_lid;
    if (ids > cap) {
        if (ss_grow((void **)&v->lid_stamp, &cap, ids, sizeof *v->lid_stamp) ||
            ss_grow((void **)&v->lid_bad, &v->cap_lid, ids, sizeof *v->lid_bad)) {
            v->cap_lid = 0; /* scan op by op */
            ss_free(v->lid_stamp);
            ss_free(v->lid_bad);
            v->lid_stamp = NULL;
            v->lid_bad = NULL;
        } else
            memset(v->lid_stamp, 0, (size_t)v->cap_lid * sizeof *v->lid_stamp);
    }
    if (++v->stamp == 0) { /* wrapped: every entry stale */
        memset(v->lid_stamp, 0, (size_t)v->cap_lid * sizeof *v->lid_stamp);
        v->stamp = 1;
    }
    v->bad_device = -1;
    for (int o = 0; o < v->n_ops; o++) {
        range_op(v, p, o, 1);
        if (v->obad[o] && v->bad_device < 0)
            v->bad_device = o;
    }
    v->range_known = 1;
    return v->bad_device;
}
