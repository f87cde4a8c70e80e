/*
 * tune_sync.c — the sync-settings tuner (tune_sync.h): each point is one
 * simulation of the plan with the point's threshold and priority; the
 * search is a coarse grid then the seed patent's x1.1 refinement around
 * the best threshold. Invariant: the plan's settings are restored on every
 * return path.
 */
#include "search/tune_sync.h"

#include <math.h>

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
}

/* Keep x as best when faster (ties: the earlier point). */
static void keep(ss_tune_sync_point *best, const ss_tune_sync_point *x)
{
    if (x->iteration_us < best->iteration_us)
        *best = *x;
}

ss_status ss_tune_sync(ss_sim *s, ss_plan *p, ss_tune_sync_result *r, ss_diag *d)
{
    ss_plan_settings saved = *ss_plan_settings_get(p);
    ss_status st = SS_OK;
    r->evaluations = 0;
    r->plan = (ss_tune_sync_point){saved.bucket_bytes, saved.priority, 0};
    r->ddp_25mb = (ss_tune_sync_point){25e6, 0, 0};
    r->horovod_64mb = (ss_tune_sync_point){64e6, 0, 0};
    r->none = (ss_tune_sync_point){0, 0, 0};
    ss_tune_sync_point *fixed[4] = {&r->plan, &r->ddp_25mb, &r->horovod_64mb, &r->none};
    for (int k = 0; k < 4 && st == SS_OK; k++)
        st = eval(s, p, fixed[k], &r->evaluations, d);
    if (st != SS_OK)
        goto out;
    r->best = r->plan;
    for (int k = 1; k < 4; k++)
        keep(&r->best, fixed[k]);
    for (int pr = 0; pr < 2 && st == SS_OK; pr++)
        for (int e = 20; e <= 30 && st == SS_OK; e++) {
            ss_tune_sync_point x = {ldexp(1, e), pr, 0};
            if ((st = eval(s, p, &x, &r->evaluations, d)) == SS_OK)
                keep(&r->best, &x);
        }
    if (st != SS_OK || !(r->best.bucket_bytes > 0))
        goto out;
    /* x1.1 steps between half and twice the best threshold */
    double b0 = r->best.bucket_bytes;
    for (double f = 0.5; f <= 2.0 && st == SS_OK; f *= 1.1) {
        ss_tune_sync_point x = {round(b0 * f), r->best.priority, 0};
        if ((st = eval(s, p, &x, &r->evaluations, d)) == SS_OK)
            keep(&r->best, &x);
    }
out:
    *ss_plan_settings_of(p) = saved;
    return st;
}
