/*
 * tune_sync.c — the sync-settings tuner (tune_sync.h): each point is one
 * simulation of the plan with the point's threshold, priority, K, synced
 * flags and sync mode; the search is coarse to fine (thresholds, then K,
 * then the seed patent's x1.1 refinement of the threshold, then the other
 * sync mode when asked; under a budget of simulations, a coarser order
 * that ends when the budget is spent). Points after the plan's own are judged again from
 * it (ss_sim_rerun_within, settings only: the same result bit for bit).
 * Invariant: the plan's settings are restored on every return path, and
 * the best point is the plan's own unless a judged point is faster.
 */
#include "search/tune_sync.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct tuner {
    ss_sim *s;
    ss_plan *p;
    ss_tune_sync_config *c; /* the caller's, bounded applied */
    ss_tune_sync_result *r;
    int based; /* the plan's own point is the simulator's base */
    int probe; /* the synced-flags probe: a refusal is its answer */
} tuner;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int stop_now(void *ctx)
{
    const tuner *t = ctx;
    return (t->c->deadline > 0 && mono_s() > t->c->deadline) ||
           (t->c->stop && t->c->stop(t->c->stop_ctx));
}

/* Judge x (x->iteration_us = HUGE_VAL when skipped or cut). SS_OK also for
 * a point the config's evaluator or the simulator refuses (skipped; not
 * the plan's own point, not the flags probe) and for a cut (r->cut). */
static ss_status eval(tuner *t, ss_tune_sync_point *x, ss_diag *d)
{
    x->iteration_us = HUGE_VAL;
    x->fits = 0;
    if (t->r->budget_spent || (t->r->budget > 0 && t->r->evaluations >= t->r->budget)) {
        t->r->budget_spent = 1;
        return SS_OK;
    }
    if (t->r->cut || stop_now(t)) {
        t->r->cut = 1;
        return SS_OK;
    }
    ss_tune_sync_apply(t->p, x);
    if (t->c->only != SS_EVAL_AUTO) {
        char why[160];
        int ok = ss_sim_accepts(t->s, t->c->only, t->p, why, sizeof why, d);
        t->based = 0; /* asking forgets the base */
        if (ok < 0)
            return d->status;
        if (!ok) {
            t->r->skipped++;
            return SS_OK;
        }
    }
    ss_sim_result r = {0};
    double load;
    ss_diag ld;
    ss_diag_init(&ld);
    ss_status st = ss_sim_rerun_within(t->s, t->p, t->based ? SS_SIM_SETTINGS : -1, HUGE_VAL,
                                       &r, &load, &ld);
    t->r->evaluations++;
    if (st != SS_OK)
        t->based = 0; /* a failed run leaves no base */
    if (st == SS_OK) {
        x->iteration_us = r.iteration_us;
        x->fits = r.fits;
        if (x == &t->r->plan)
            snprintf(t->r->evaluator, sizeof t->r->evaluator, "%s", r.evaluator);
        if (!t->based && t->c->only == SS_EVAL_AUTO) { /* every point differs in settings */
            ss_sim_commit(t->s);
            t->based = 1;
        }
    } else if (st == SS_ERR_INTERRUPTED) {
        t->r->cut = 1;
        st = SS_OK;
    } else if (st == SS_ERR_INVALID && x != &t->r->plan && !t->probe) {
        t->r->skipped++; /* a point the simulator's evaluator refuses */
        st = SS_OK;
    } else {
        ss_diag_set(d, st, "%s", ld.msg);
    }
    ss_sim_result_clear(&r);
    return st;
}

void ss_tune_sync_apply(ss_plan *p, const ss_tune_sync_point *x)
{
    ss_plan_settings *set = ss_plan_settings_of(p);
    set->bucket_bytes = x->bucket_bytes;
    set->priority = x->priority;
    set->reorder_backward = x->reorder_k;
    set->synced_flags = x->synced_flags;
    set->sync = x->sync;
}

/* Keep x as best when the simulator says it is faster (ties: the earlier
 * point), and it fits when the best fits. */
static void keep(ss_tune_sync_point *best, const ss_tune_sync_point *x)
{
    if (x->iteration_us < HUGE_VAL && x->fits >= best->fits &&
        (x->fits > best->fits || x->iteration_us < best->iteration_us))
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

static ss_tune_sync_point point(const ss_plan_settings *set, double bucket, int pr, int K,
                                int flags)
{
    return (ss_tune_sync_point){bucket, pr, K, flags, HUGE_VAL, set->sync, 0};
}

/* Judge x and keep it when faster. */
static ss_status try_point(tuner *t, ss_tune_sync_point x, ss_diag *d)
{
    ss_status st = eval(t, &x, d);
    if (st == SS_OK)
        keep(&t->r->best, &x);
    return st;
}

/* The other sync mode at point base, with threshold bucket (< 0: base's),
 * when asked. */
static ss_status other_mode(tuner *t, ss_tune_sync_point base, double bucket, ss_diag *d)
{
    if (!t->c->try_sync_mode)
        return SS_OK;
    ss_tune_sync_point x = base;
    x.sync = x.sync == SS_SYNC_BULK ? SS_SYNC_WAIT_FREE : SS_SYNC_BULK;
    if (bucket >= 0)
        x.bucket_bytes = bucket;
    return try_point(t, x, d);
}

/* fast_only: K and synced flags as the plan has them, and few points, since
 * each is a new sub-problem of the hierarchical evaluator (seconds of CPU
 * on 1,000 devices): the other priority at the plan's threshold; 4x and
 * 1/4 of the threshold (a finite one); the other sync mode. */
static ss_status tune_fast(tuner *t, const ss_plan_settings *saved, ss_diag *d)
{
    ss_tune_sync_result *r = t->r;
    r->flags_refused = 1;
    snprintf(r->flags_why, sizeof r->flags_why,
             "not tuned: the %s evaluator judges this plan and refuses them; only the full "
             "evaluator could judge them",
             ss_evaluator_name(t->c->only));
    ss_tune_sync_point x = r->plan;
    x.priority = !x.priority;
    ss_status st = try_point(t, x, d);
    double b0 = saved->bucket_bytes;
    for (int k = 0; k < 2 && st == SS_OK && b0 > 0 && b0 < 1e12; k++) {
        x = r->best;
        x.bucket_bytes = round(k ? b0 / 4 : b0 * 4);
        st = try_point(t, x, d);
    }
    return st == SS_OK ? other_mode(t, r->best, -1, d) : st;
}

/* Judge x (synced flags on) and keep it when faster; *flags = 0 when the
 * plan or the bounding evaluator refuses synced flags (flags_refused says
 * why), else 1. */
static ss_status probe_flags(tuner *t, ss_tune_sync_point x, int *flags, ss_diag *d)
{
    ss_tune_sync_result *r = t->r;
    ss_diag fd;
    ss_diag_init(&fd);
    *flags = 1;
    x.synced_flags = 1;
    t->probe = 1;
    ss_status st = eval(t, &x, &fd);
    t->probe = 0;
    if (st == SS_OK && x.iteration_us == HUGE_VAL && !r->cut && !r->budget_spent) {
        *flags = 0; /* skipped: the bounding evaluator refuses them */
        r->flags_refused = 1;
        snprintf(r->flags_why, sizeof r->flags_why,
                 "not tuned: the %s evaluator that judges this plan refuses them",
                 ss_evaluator_name(t->c->only));
    } else if (st == SS_OK) {
        keep(&r->best, &x);
    } else if (fd.status == SS_ERR_INVALID) {
        *flags = 0;
        r->flags_refused = 1;
        snprintf(r->flags_why, sizeof r->flags_why, "%.200s", fd.msg);
        st = SS_OK;
    } else {
        st = ss_diag_set(d, fd.status, "%s", fd.msg);
    }
    return st;
}

/* The coarse order under a budget (ss_tune_sync_within), as the full one
 * with fewer points; eval ends it when the budget is spent. */
static ss_status tune_coarse(tuner *t, const ss_plan_settings *saved, ss_diag *d)
{
    ss_tune_sync_result *r = t->r;
    int flags = 0;
    ss_status st = probe_flags(t, point(saved, 0, 0, 0, 1), &flags, d);
    for (int e = 20; e <= 30 && st == SS_OK; e += 2)
        st = try_point(t, point(saved, ldexp(1, e), 0, 0, flags), d);
    double b0 = r->best.bucket_bytes;
    for (int k = 0; k < 2 && st == SS_OK && b0 > 0; k++) {
        ss_tune_sync_point x = r->best;
        x.bucket_bytes = round(k ? b0 * 2 : b0 / 2);
        st = try_point(t, x, d);
    }
    /* K = 1, 8, 64, ... and the number of layers, at the best threshold,
     * both priorities */
    ss_tune_sync_point at = r->best;
    for (int K = 1, L = n_layers(t->s->g); K <= L && st == SS_OK;
         K = K < L && K * 8 > L ? L : K * 8)
        for (int pr = 0; pr < 2 && st == SS_OK; pr++)
            st = try_point(t, point(saved, at.bucket_bytes, pr, K, flags), d);
    return st == SS_OK ? other_mode(t, r->best, -1, d) : st;
}

static ss_status tune(tuner *t, const ss_plan_settings *saved, ss_diag *d)
{
    ss_tune_sync_result *r = t->r;
    int fast = t->c->fast_only;
    ss_tune_sync_point *fixed[4] = {&r->plan, &r->ddp_25mb, &r->horovod_64mb, &r->none};
    ss_status st = eval(t, &r->plan, d);
    if (st != SS_OK || !(r->plan.iteration_us < HUGE_VAL))
        return st;
    if (t->c->bounded && t->c->only == SS_EVAL_AUTO) {
        if (!strcmp(r->evaluator, ss_evaluator_name(SS_EVAL_HIER)))
            t->c->only = SS_EVAL_HIER, t->c->fast_only = 1;
        else if (!strcmp(r->evaluator, ss_evaluator_name(SS_EVAL_SYMMETRY)))
            t->c->only = SS_EVAL_SYMMETRY;
        fast = t->c->fast_only;
        r->order_tuned = !fast;
    }
    r->best = r->plan;
    if (fast)
        return tune_fast(t, saved, d);
    if (r->budget > 0)
        return tune_coarse(t, saved, d);
    for (int k = 1; k < 4 && st == SS_OK; k++)
        if ((st = eval(t, fixed[k], d)) == SS_OK)
            keep(&r->best, fixed[k]);
    /* synced flags apply to plans whose forward stays on each device */
    int flags = 1, K0 = 0;
    if (st == SS_OK)
        st = probe_flags(t, point(saved, 0, 0, 0, 1), &flags, d);
    for (int pr = 0; pr < 2 && st == SS_OK; pr++)
        for (int e = 19; e <= 30 && st == SS_OK; e++)
            st = try_point(t, point(saved, e == 19 ? 0 : ldexp(1, e), pr, K0, flags), d);
    /* K at the best threshold, both priorities */
    ss_tune_sync_point at = r->best;
    for (int K = 1, L = n_layers(t->s->g); !fast && K <= L && st == SS_OK; K *= 2)
        for (int pr = 0; pr < 2 && st == SS_OK; pr++)
            st = try_point(t, point(saved, at.bucket_bytes, pr, K, flags), d);
    /* x1.1 steps between half and twice the best threshold */
    double b0 = r->best.bucket_bytes;
    for (double f = 0.5; b0 > 0 && f <= 2.0 && st == SS_OK; f *= 1.1) {
        ss_tune_sync_point x = r->best;
        x.bucket_bytes = round(b0 * f);
        st = try_point(t, x, d);
    }
    /* the other sync mode: at the best point and a few thresholds */
    const double other_b[4] = {-1, 4194304.0, 67108864.0, 0};
    ss_tune_sync_point bm = r->best;
    for (int k = 0; k < 4 && st == SS_OK; k++)
        st = other_mode(t, bm, other_b[k], d);
    return st;
}

ss_status ss_tune_sync_within(ss_sim *s, ss_plan *p, const ss_tune_sync_config *c,
                              ss_tune_sync_result *r, ss_diag *d)
{
    ss_tune_sync_config cc = {0};
    if (c)
        cc = *c;
    double t0 = mono_s();
    ss_plan_settings saved = *ss_plan_settings_get(p);
    memset(r, 0, sizeof *r);
    r->budget = cc.max_points > 0                      ? cc.max_points
                : cc.max_points == 0 && cc.deadline <= 0 ? SS_TUNE_SYNC_POINTS
                                                         : 0;
    r->plan = point(&saved, saved.bucket_bytes, saved.priority, saved.reorder_backward,
                    saved.synced_flags);
    r->ddp_25mb = point(&saved, 25e6, 0, 0, 0);
    r->horovod_64mb = point(&saved, 64e6, 0, 0, 0);
    r->none = point(&saved, 0, 0, 0, 0);
    r->best = r->plan;
    r->order_tuned = !cc.fast_only;
    tuner t = {s, p, &cc, r, 0, 0};
    int stops = cc.deadline > 0 || cc.stop;
    if (stops)
        ss_sim_set_stop(s, stop_now, &t);
    ss_status st = tune(&t, &saved, d);
    if (stops)
        ss_sim_set_stop(s, NULL, NULL);
    ss_sim_forget_base(s);
    *ss_plan_settings_of(p) = saved;
    r->time_s = mono_s() - t0;
    return st;
}

ss_status ss_tune_sync(ss_sim *s, ss_plan *p, ss_tune_sync_result *r, ss_diag *d)
{
    ss_tune_sync_config every = {.max_points = -1}; /* the full order, no budget */
    ss_status st = ss_tune_sync_within(s, p, &every, r, d);
    if (st == SS_OK && !(r->plan.iteration_us < HUGE_VAL))
        st = ss_diag_set(d, SS_ERR_INTERRUPTED, "tune-sync: the plan's own point was not judged");
    return st;
}
