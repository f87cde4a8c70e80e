/*
 * tune_sync.c — the sync-settings tuner (tune_sync.h): each point is one
 * simulation of the plan with the point's threshold, priority, K and
 * synced flags; the search is coarse to fine (thresholds, then K, then the
 * seed patent's x1.1 refinement of the threshold). Invariant: the plan's
 * settings are restored on every return path.
 */
#include "search/tune_sync.h"

#include <math.h>
#include <stdio.h>

static ss_status eval(ss_sim *s, ss_plan *p, ss_tune_sync_point *x, int *n, ss_diag *d)
{
    ss_tune_sync_apply(p, x);
    ss_sim_result r = {0};
    ss_status st = ss_sim_run(s, p, &r, d);
    if (st == SS_OK)
        x->iteration_us = r.iteration_us;
    ss_sim_result_clear(&r);
    (*n)++;
    return st;
}

void ss_tune_sync_apply(ss_plan *p, const ss_tune_sync_point *x)
{
    ss_plan_settings *set = ss_plan_settings_of(p);
    set->bucket_bytes = x->bucket_bytes;
    set->priority = x->priority;
    set->reorder_backward = x->reorder_k;
    set->synced_flags = x->synced_flags;
}

/* Keep x as best when faster (ties: the earlier point). */
static void keep(ss_tune_sync_point *best, const ss_tune_sync_point *x)
{
    if (x->iteration_us < best->iteration_us)
        *best = *x;
}

/* Layers: ops with weights (what K counts). */
static int n_layers(const ss_graph *g)
{
    int n = 0;
    for (int o = 0; o < ss_graph_n_ops(g); o++) {
        const ss_op *op = ss_graph_op(g, o);
        n += op->type != SS_OP_INPUT && op->n_w > 0;
    }
    return n;
}

ss_status ss_tune_sync(ss_sim *s, ss_plan *p, ss_tune_sync_result *r, ss_diag *d)
{
    ss_plan_settings saved = *ss_plan_settings_get(p);
    ss_status st = SS_OK;
    r->evaluations = 0;
    r->flags_refused = 0;
    r->flags_why[0] = 0;
    r->plan = (ss_tune_sync_point){saved.bucket_bytes, saved.priority, saved.reorder_backward,
                                   saved.synced_flags, 0};
    r->ddp_25mb = (ss_tune_sync_point){25e6, 0, 0, 0, 0};
    r->horovod_64mb = (ss_tune_sync_point){64e6, 0, 0, 0, 0};
    r->none = (ss_tune_sync_point){0, 0, 0, 0, 0};
    ss_tune_sync_point *fixed[4] = {&r->plan, &r->ddp_25mb, &r->horovod_64mb, &r->none};
    for (int k = 0; k < 4 && st == SS_OK; k++)
        st = eval(s, p, fixed[k], &r->evaluations, d);
    if (st != SS_OK)
        goto out;
    r->best = r->plan;
    for (int k = 1; k < 4; k++)
        keep(&r->best, fixed[k]);
    /* synced flags apply to plans whose forward stays on each device */
    int flags = 1;
    {
        ss_tune_sync_point x = {0, 0, 0, 1, 0};
        ss_diag fd;
        ss_diag_init(&fd);
        if (eval(s, p, &x, &r->evaluations, &fd) == SS_OK) {
            keep(&r->best, &x);
        } else if (fd.status == SS_ERR_INVALID) {
            flags = 0;
            r->flags_refused = 1;
            snprintf(r->flags_why, sizeof r->flags_why, "%.200s", fd.msg);
        } else {
            st = ss_diag_set(d, fd.status, "%s", fd.msg);
            goto out;
        }
    }
    for (int pr = 0; pr < 2 && st == SS_OK; pr++)
        for (int e = 19; e <= 30 && st == SS_OK; e++) {
            ss_tune_sync_point x = {e == 19 ? 0 : ldexp(1, e), pr, 0, flags, 0};
            if ((st = eval(s, p, &x, &r->evaluations, d)) == SS_OK)
                keep(&r->best, &x);
        }
    /* K at the best threshold, both priorities */
    ss_tune_sync_point at = r->best;
    for (int K = 1, L = n_layers(s->g); K <= L && st == SS_OK; K *= 2)
        for (int pr = 0; pr < 2 && st == SS_OK; pr++) {
            ss_tune_sync_point x = {at.bucket_bytes, pr, K, flags, 0};
            if ((st = eval(s, p, &x, &r->evaluations, d)) == SS_OK)
                keep(&r->best, &x);
        }
    if (st != SS_OK || !(r->best.bucket_bytes > 0))
        goto out;
    /* x1.1 steps between half and twice the best threshold */
    double b0 = r->best.bucket_bytes;
    for (double f = 0.5; f <= 2.0 && st == SS_OK; f *= 1.1) {
        ss_tune_sync_point x = r->best;
        x.bucket_bytes = round(b0 * f);
        if ((st = eval(s, p, &x, &r->evaluations, d)) == SS_OK)
            keep(&r->best, &x);
    }
out:
    *ss_plan_settings_of(p) = saved;
    return st;
}
