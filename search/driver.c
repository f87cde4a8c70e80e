/*
 * driver.c — the public plan search (ss_search_* in simsearch.h): baselines,
 * start plans, the judge, the MCMC run and the final report.
 *
 * Flow: simulate data parallelism and the expert plan (full simulation);
 * build the search space; run the MCMC from DP, the expert plan and random
 * plans, each proposal judged by the full simulator (ss_sim_run) unless
 * the compute lower bound already rejects it; re-simulate the best plan with the full simulator, so every
 * number reported comes from ss_sim_run. Invariant: on error the
 * result is cleared, on success it owns its three plans and results.
 */
#include "search/bound.h"
#include "search/expert.h"
#include "search/llm.h"
#include "search/mcmc.h"
#include "search/space.h"
#include "search/tune_sync.h"
#include "simulator/report.h"
#include "core/json_util.h"
#include "core/plan_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- judges -------------------------------------------------------------- */

typedef struct full_eval {
    ss_sim *sim;
    int n_ops;
    ss_sim_result r;
    double *path;   /* per op: the committed plan's critical-path time */
    int path_ok;    /* path holds the committed plan's */
} full_eval;

/* Full simulation; stops after building the task graph when one resource
 * carries more work than the cutoff (ss_sim_run_within). */
static ss_status full_eval_fn(void *ctx, const ss_plan *p, int changed, double cutoff_us,
                              ss_eval *out, ss_diag *d)
{
    full_eval *f = ctx;
    double load; /* a single-op move is judged again from the base (ss_sim_rerun_within) */
    ss_status st = ss_sim_rerun_within(f->sim, p, changed, cutoff_us, &f->r, &load, d);
    if (st)
        return st;
    if (load > cutoff_us) {
        out->time_us = load;
        out->beyond = 1;
        return SS_OK;
    }
    out->beyond = 0;
    out->time_us = f->r.iteration_us;
    out->fits = f->r.fits;
    out->overflow_bytes = f->r.overflow_bytes;
    return SS_OK;
}

/* The simulator's last run is the plan being committed (the search commits
 * right after that plan's exact evaluation): keep its critical path per op
 * for path moves. If the path cannot be had (no memory for it), path_ops
 * says NULL and path moves draw uniformly: a weaker proposal, no wrong
 * result. */
static void full_commit_fn(void *ctx)
{
    full_eval *f = ctx;
    ss_sim_commit(f->sim);
    ss_diag local;
    ss_diag_init(&local);
    f->path_ok = f->path && ss_sim_path_ops(f->sim, f->path, NULL, &local) == SS_OK;
}

static const double *full_path_ops(void *ctx)
{
    const full_eval *f = ctx;
    return f->path_ok ? f->path : NULL;
}

/* The full judge's base is its path: restoring a committed plan is
 * taking back the path it had then. */
static int full_restore_fn(void *ctx, const ss_plan *p, const double *path)
{
    (void)p;
    full_eval *f = ctx;
    ss_sim_forget_base(f->sim);
    f->path_ok = path && f->path;
    if (f->path_ok)
        memcpy(f->path, path, (size_t)f->n_ops * sizeof *path);
    return 1;
}

/* The search's judge: the full simulator plus the
 * compute lower bound, committed together. */
typedef struct bounded {
    ss_search_judge inner;
    ss_bound *bnd;
} bounded;

static ss_status bounded_eval(void *ctx, const ss_plan *p, int changed, double cutoff_us,
                             ss_eval *out, ss_diag *d)
{
    bounded *b = ctx;
    return b->inner.eval(b->inner.ctx, p, changed, cutoff_us, out, d);
}

static void bounded_commit(void *ctx)
{
    bounded *b = ctx;
    if (b->inner.commit)
        b->inner.commit(b->inner.ctx);
    ss_bound_commit(b->bnd);
}

static ss_status bounded_bound(void *ctx, const ss_plan *p, int changed, double *lb, ss_diag *d)
{
    bounded *b = ctx;
    return ss_bound_eval(b->bnd, p, changed, lb, d);
}

/* The bound's pending rows are p's (the search called bound(p, -1)); the
 * inner judge restores its own base or cannot (then it simulates
 * again). */
static int bounded_restore(void *ctx, const ss_plan *p, const double *path)
{
    bounded *b = ctx;
    if (!b->inner.restore || !b->inner.restore(b->inner.ctx, p, path))
        return 0;
    ss_bound_commit(b->bnd);
    return 1;
}

static const double *bounded_path_ops(void *ctx)
{
    bounded *b = ctx;
    return b->inner.path_ops ? b->inner.path_ops(b->inner.ctx) : NULL;
}

/* ---- callbacks ------------------------------------------------------------ */

typedef struct cb_bridge {
    const ss_search_config *cfg;
} cb_bridge;

static int bridge_stop(void *ctx)
{
    const cb_bridge *b = ctx;
    return b->cfg->stop && b->cfg->stop(b->cfg->cb_ctx);
}

static void bridge_progress(void *ctx, const ss_mcmc_stats *st)
{
    const cb_bridge *b = ctx;
    if (!b->cfg->progress)
        return;
    ss_search_progress p;
    p.proposals = st->proposals;
    p.accepted = st->accepted;
    p.evaluations = st->evaluations;
    p.best_us = st->best_us;
    p.elapsed_s = st->time_s;
    p.evals_per_s = st->evals_per_s;
    b->cfg->progress(b->cfg->cb_ctx, &p);
}

/* ---- the search ----------------------------------------------------------- */

void ss_search_result_clear(ss_search_result *r)
{
    if (!r)
        return;
    ss_plan_free(r->best);
    ss_plan_free(r->data_parallel);
    ss_plan_free(r->expert);
    ss_sim_result_clear(&r->best_sim);
    ss_sim_result_clear(&r->dp_sim);
    ss_sim_result_clear(&r->expert_sim);
    ss_sim_free(r->sim);
    memset(r, 0, sizeof *r);
}

/* 0 when either plan does not fit in memory: a time that cannot run is no
 * baseline (JSON null). */
static double speedup(const ss_sim_result *base, const ss_sim_result *best)
{
    return best->iteration_us > 0 && base->fits && best->fits
               ? base->iteration_us / best->iteration_us
               : 0;
}

/* How many devices (the first ones) plans may use: all, or 1 when no two
 * devices can reach each other. Two devices cannot only when both refuse
 * connections and no device accepts them to relay (core/machine.c). */
static int usable_devices(const ss_machine *m)
{
    int n = ss_machine_n_devices(m);
    for (int i = 0; i < n; i++)
        if (ss_machine_device(m, i)->accepts_connections)
            return n;
    return 1;
}

/* The search was stopped while the expert plan was judged: data parallelism
 * (simulated already) is the best plan and stands for the expert too. Takes
 * over sim (r->sim). */
static ss_status interrupted_early(ss_sim *sim, ss_search_result *r, ss_diag *d)
{
    ss_plan_free(r->expert);
    r->expert = ss_plan_clone(r->data_parallel);
    r->best = ss_plan_clone(r->data_parallel);
    snprintf(r->expert_label, sizeof r->expert_label, "not judged (interrupted)");
    ss_sim_set_stop(sim, NULL, NULL);
    ss_status st = !r->expert || !r->best ? ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory")
                                          : SS_OK;
    if (!st)
        st = ss_sim_result_copy(&r->expert_sim, &r->dp_sim, d);
    if (!st)
        st = ss_sim_run(sim, r->best, &r->best_sim, d); /* for the trace */
    r->sim = sim;
    if (st) {
        ss_search_result_clear(r);
        return st;
    }
    r->speedup_vs_dp = r->speedup_vs_expert = 1;
    r->interrupted = 1;
    r->gain_second_half = 0;
    snprintf(r->stopped_by, sizeof r->stopped_by, "%s", ss_mcmc_stop_name(SS_MCMC_STOP_USER));
    return SS_OK;
}

/* ---- the LLM planner ------------------------------------------------------- */

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct llm_cb {
    const ss_search_config *cfg;
    double deadline;
} llm_cb;

/* The user's stop alone (the planner applies the deadline itself). */
static int llm_user_stop(void *ctx)
{
    const llm_cb *b = ctx;
    return b->cfg->stop && b->cfg->stop(b->cfg->cb_ctx);
}

/* The user's stop or the deadline. */
static int llm_stop(void *ctx)
{
    const llm_cb *b = ctx;
    return llm_user_stop(ctx) || (b->deadline > 0 && mono_s() > b->deadline);
}

static void llm_first_plan(void *ctx, const ss_plan *p)
{
    const llm_cb *b = ctx;
    if (b->cfg->first_plan)
        b->cfg->first_plan(b->cfg->cb_ctx, p);
}

static void llm_progress(void *ctx, int64_t proposals, double best_us, double elapsed_s)
{
    const llm_cb *b = ctx;
    if (!b->cfg->progress)
        return;
    ss_search_progress p = {proposals, 0, proposals, best_us, elapsed_s,
                            elapsed_s > 0 ? proposals / elapsed_s : 0};
    b->cfg->progress(b->cfg->cb_ctx, &p);
}

static int user_stop(void *ctx)
{
    const ss_search_config *c = ctx;
    return c->stop && c->stop(c->cb_ctx);
}

/* ---- the final plan's sync settings ---------------------------------------- */

/* Share of the time limit kept for the tuning (the search gets the rest). */
#define TUNE_SHARE 0.1
/* The LLM planner's second finalist is tuned when its time is at most this
 * factor of the first's. */
#define FINALIST_BAND 1.05

typedef struct tuned {
    ss_tune_sync_result tr;
    int changed;
} tuned;

/* Tune p's gradient-sync settings on s (search/tune_sync.h) until deadline
 * (0: none), bounded by the evaluator that judges p: under the hierarchical
 * one (big LLM plans) only the threshold, priority and sync mode, since it
 * refuses K and synced flags and only the full simulation (gigabytes on such
 * plans) could judge them. The best point is applied to p when the
 * simulator says it is faster (the tuner keeps the plan's own otherwise). */
static ss_status tune_plan(ss_sim *s, ss_plan *p, double deadline, const ss_search_config *cfg,
                           tuned *t, ss_diag *d)
{
    ss_tune_sync_config tc = {.deadline = deadline, .stop = user_stop, .stop_ctx = (void *)cfg,
                              .try_sync_mode = 1, .bounded = 1};
    ss_status st = ss_tune_sync_within(s, p, &tc, &t->tr, d);
    const ss_tune_sync_point *b = &t->tr.best, *o = &t->tr.plan;
    t->changed = !st && (b->bucket_bytes != o->bucket_bytes || b->priority != o->priority ||
                         b->reorder_k != o->reorder_k || b->synced_flags != o->synced_flags ||
                         b->sync != o->sync);
    if (t->changed)
        ss_tune_sync_apply(p, b);
    return st;
}

/* The report of the tuning of the plan written (t), against before_us, the
 * time of the plan the search would have written untuned. */
static void tune_report(const tuned *t, double before_us, int finalists, int flipped, int evals,
                        double time_s, int cut, ss_search_sync_tuning *o)
{
    const ss_tune_sync_result *tr = &t->tr;
    const ss_tune_sync_point *x = t->changed ? &tr->best : &tr->plan;
    memset(o, 0, sizeof *o);
    o->run = tr->plan.iteration_us < HUGE_VAL;
    o->changed = t->changed || flipped;
    o->before_us = before_us;
    o->after_us = x->iteration_us;
    o->evaluations = evals;
    o->time_s = time_s;
    o->cut = cut;
    o->order_tuned = tr->order_tuned;
    o->finalists = finalists;
    o->flipped = flipped;
    o->bucket_bytes = x->bucket_bytes;
    o->priority = x->priority;
    o->reorder_k = x->reorder_k;
    o->synced_flags = x->synced_flags;
    o->bulk = x->sync == SS_SYNC_BULK;
    snprintf(o->evaluator, sizeof o->evaluator, "%s", tr->evaluator);
    if (!o->run)
        snprintf(o->note, sizeof o->note, "skipped: %s",
                 cut ? "the time limit left no time for it" : "the plan was not judged");
    else if (!tr->order_tuned)
        snprintf(o->note, sizeof o->note, "%sK and synced flags %.140s",
                 cut ? "cut by the time limit; " : "", tr->flags_why);
    else if (tr->flags_refused)
        snprintf(o->note, sizeof o->note, "%ssynced flags do not apply: %.140s",
                 cut ? "cut by the time limit; " : "", tr->flags_why);
    else if (cut)
        snprintf(o->note, sizeof o->note, "cut by the time limit (best so far kept)");
}

/* Whether g takes the LLM planner: a transformer of repeated layers, every
 * device usable. */
static int is_llm(const ss_graph *g, const ss_machine *m)
{
    return ss_expert_family(g) == SS_FAMILY_TRANSFORMER && ss_plan_layers(g) >= 2 &&
           ss_graph_batch(g) > 0 && usable_devices(m) == ss_machine_n_devices(m);
}

static void spec_of(const ss_llm_point *p, int64_t batch, char *buf, size_t n)
{
    ss_megatron_spec(&p->c, batch, buf, n);
}

/* Whether level 2's plan is the answer: judged, fitting, and faster than
 * the Megatron best (or no Megatron plan fits). */
static int level2_wins(const ss_llm_result *lr)
{
    return lr->level2_plan && isfinite(lr->level2_us) &&
           (!lr->found || lr->level2_us < lr->best.time_us);
}

/* Level 2's line of the result: its plan in words, or why there is none. */
static void level2_text(const ss_llm_result *lr, ss_search_result *r)
{
    const ss_level2_report *L = &lr->level2;
    if (!lr->level2_run && !lr->level2_note[0])
        return;
    r->level2_us = lr->level2_plan && isfinite(lr->level2_us) ? lr->level2_us : HUGE_VAL;
    if (lr->level2_plan) {
        size_t n = sizeof r->level2_plan;
        int len = snprintf(r->level2_plan, n,
                           "mesh %s, pp %d, %d micro-batches, %s (%d configurations, %d ILPs "
                           "in %.1f s, %.1f s)%s%.40s",
                           L->mesh, L->pp, L->microbatches, L->recompute_text, L->configs,
                           L->ilp_solves, L->ilp_s, L->time_s, lr->level2_note[0] ? ": " : "",
                           lr->level2_note);
        if (len >= (int)n) /* a long per-stage recompute list: the line says it is cut */
            memcpy(r->level2_plan + n - 4, "...", 4);
    } else
        snprintf(r->level2_plan, sizeof r->level2_plan, "none: %.150s",
                 lr->level2_note[0] ? lr->level2_note : "no plan");
}

/* The LLM planner's finalists, r->best (level 2's plan when *l2, else the
 * Megatron best) and the other one (the Megatron best or level 2's judged
 * plan, taken from lr), each with its sync settings tuned on r->sim until
 * deadline (tune_plan); the faster after tuning becomes r->best (*l2 says
 * which), by r->sim's judgement of both. */
static ss_status llm_tune(const ss_graph *g, const ss_machine *m, const ss_search_config *cfg,
                          ss_llm_result *lr, int *l2, ss_search_result *r, double deadline,
                          ss_diag *d)
{
    ss_plan *other = NULL;
    ss_status st = SS_OK;
    /* the other is tuned only when it is within FINALIST_BAND of the best:
     * sync settings move a time by a few percent at most (docs/search.md) */
    double lead = *l2 ? lr->level2_us : lr->best.time_us;
    if (*l2 && lr->found && lr->best.time_us <= lead * FINALIST_BAND)
        st = ss_llm_plan(g, m, &lr->best.c, &other, d);
    else if (!*l2 && lr->level2_plan && lr->level2_us <= lead * FINALIST_BAND) {
        other = lr->level2_plan; /* taken */
        lr->level2_plan = NULL;
    }
    tuned t[2];
    memset(t, 0, sizeof t);
    ss_plan *fin[2] = {r->best, other};
    int evals = 0, cut = 0;
    double secs = 0;
    for (int k = 0; k < 2 && !st && fin[k]; k++) {
        ss_diag dk;
        ss_diag_init(&dk);
        st = tune_plan(r->sim, fin[k], deadline, cfg, &t[k], &dk);
        if (st == SS_ERR_INVALID && k == 1) { /* r->sim's evaluator refuses it: no finalist */
            st = SS_OK;
            ss_plan_free(other);
            other = fin[1] = NULL;
            break;
        }
        if (st)
            ss_diag_set(d, st, "%s", dk.msg);
        evals += t[k].tr.evaluations;
        secs += t[k].tr.time_s;
        cut |= t[k].tr.cut;
    }
    int w = 0; /* the other wins when the simulator says it is faster, tuned */
    if (!st && other) {
        const ss_tune_sync_point *a = t[0].changed ? &t[0].tr.best : &t[0].tr.plan;
        const ss_tune_sync_point *b = t[1].changed ? &t[1].tr.best : &t[1].tr.plan;
        w = b->iteration_us < HUGE_VAL && b->fits && (!a->fits || b->iteration_us < a->iteration_us);
    }
    if (!st) {
        double before = t[0].tr.plan.iteration_us < HUGE_VAL ? t[0].tr.plan.iteration_us
                        : *l2                                ? lr->level2_us
                                                             : lr->best.time_us;
        tune_report(&t[w], before, other ? 2 : 1, w, evals, secs, cut, &r->sync_tuning);
        r->sync_tuning.run |= t[0].tr.plan.iteration_us < HUGE_VAL;
    }
    if (w) {
        ss_plan_free(r->best);
        r->best = other;
        other = NULL;
        *l2 = !*l2;
    }
    /* the Megatron best's spec and flags say its tuned threshold and mode */
    const ss_tune_sync_point *x = &t[w].tr.best;
    if (!st && !*l2 && t[w].changed) {
        lr->best.c.sync = x->sync;
        if (x->sync != SS_SYNC_BULK && x->bucket_bytes > 0) /* 0 there: Megatron's default */
            lr->best.c.bucket_bytes = x->bucket_bytes;
    }
    ss_plan_free(other);
    return st;
}

/* The LLM planner (search/llm.h), the Megatron grid baseline when asked
 * (search/grid.h) and the figures of the result. */
static ss_status llm_run(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                         const ss_search_config *cfg, ss_search_result *r, ss_diag *d)
{
    double t0 = mono_s(), c0 = cpu_s();
    llm_cb cb = {cfg, cfg->time_limit_s > 0 ? t0 + cfg->time_limit_s : 0};
    ss_llm_shape S;
    ss_llm_shape_of(g, m, &S);
    int level = cfg->level > 0 ? cfg->level - 1 : cfg->time_limit_s > 0 && cfg->time_limit_s < 2 ? 0 : 3;
    if (level > 3)
        level = 3;
    r->level = level;
    r->threads = ss_llm_threads(cfg->threads);
    r->devices_usable = S.devices;
    /* the planner leaves a share of the time limit to the sync tuning */
    int tune = !cfg->no_sync_tuning;
    double plan_deadline = cb.deadline > 0 && tune ? t0 + cfg->time_limit_s * (1 - TUNE_SHARE)
                                                   : cb.deadline;
    ss_llm_config lc = {.level = level, .budget = cfg->budget, .deadline = plan_deadline,
                        .seed = cfg->seed, .threads = cfg->threads, .stop = llm_user_stop,
                        .stop_ctx = &cb, .progress = llm_progress, .first_plan = llm_first_plan,
                        .progress_every_s = cfg->progress_every_s};
    ss_llm_result lr;
    ss_status st = ss_llm_search(g, m, cm, &lc, &lr, d);
    if (st)
        return st;
    /* level 2's plan competes with the Megatron best on their judged times */
    int l2 = level2_wins(&lr);
    level2_text(&lr, r);
    if (!l2 && !(tune && isfinite(lr.level2_us))) { /* else a finalist of the tuning */
        ss_plan_free(lr.level2_plan);
        lr.level2_plan = NULL;
    }
    if (!lr.found && !l2) {
        ss_plan_free(lr.level2_plan);
        ss_llm_judge_free(lr.judge);
        if (lr.interrupted)
            return ss_diag_set(d, SS_ERR_INTERRUPTED,
                               "search: interrupted before a Megatron plan that fits was found");
        return ss_diag_set(d, lr.time_cut ? SS_ERR_INTERRUPTED : SS_ERR_INFEASIBLE,
                           "search: %s: no Megatron plan of model \"%s\" fits the memory of "
                           "the %d devices",
                           lr.time_cut ? "the time limit came first" : "none fits",
                           ss_graph_name(g), S.devices);
    }
    /* the plans: best, the rule plan (the "expert"), data parallelism;
     * simulated on the judge's warm simulator unless another evaluator is
     * asked for */
    if (l2) {
        r->best = lr.level2_plan; /* taken */
        lr.level2_plan = NULL;
    } else {
        r->best = ss_llm_judge_take_plan(lr.judge, &lr.best.c);
        if (!r->best)
            st = ss_llm_plan(g, m, &lr.best.c, &r->best, d);
    }
    /* the rule plan is often the best (a short time limit): one plan, one
     * simulation for both */
    int same = lr.found && !l2 && !memcmp(&lr.rule.c, &lr.best.c, sizeof lr.best.c);
    if (!st && cfg->evaluator == SS_EVAL_AUTO && lr.judge)
        r->sim = ss_llm_judge_take_sim(lr.judge, r->best);
    /* the taken simulator's last run was the best plan's whole simulation:
     * its result stands (unless r->sim runs another plan below) */
    int best_last = 0;
    if (!st && r->sim && !l2)
        st = ss_llm_judge_last(lr.judge, &lr.best.c, &r->best_sim, &best_last, d);
    ss_llm_judge_free(lr.judge);
    ss_sim_config sc = {.stop = NULL, .evaluator = cfg->evaluator};
    if (!st && !r->sim)
        st = ss_sim_new(g, m, cm, &sc, &r->sim, d);
    /* the finalists' sync settings, tuned before the faster is kept; the
     * time left after them is the reserve the planner kept for what follows
     * (2.5 x level 0's time, search/llm.h) */
    if (!st && tune) {
        double dl = cb.deadline > 0 ? cb.deadline - 2.5 * lr.first_plan_s : 0;
        if (dl > 0 && dl < t0)
            dl = t0; /* no time left: cut at once */
        st = llm_tune(g, m, cfg, &lr, &l2, r, dl, d);
        same = same && !r->sync_tuning.changed;
        if (r->sync_tuning.evaluations > 0)
            best_last = 0; /* the simulator ran other plans since */
    } else if (!st)
        snprintf(r->sync_tuning.note, sizeof r->sync_tuning.note, "not asked");
    ss_plan_free(lr.level2_plan);
    lr.level2_plan = NULL;
    /* the rule plan is the "expert"; none when no Megatron plan fits (then
     * the data-parallel plan stands in, reported as not fitting) */
    if (!st && same) {
        if (!(r->expert = ss_plan_clone(r->best)))
            st = ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory");
    } else if (!st && lr.found)
        st = ss_llm_plan(g, m, &lr.rule.c, &r->expert, d);
    else if (!st)
        st = ss_plan_data_parallel(g, m, 0, &r->expert, d);
    if (!st)
        st = ss_plan_data_parallel(g, m, 0, &r->data_parallel, d);
    if (lr.found)
        spec_of(&lr.rule, S.batch, r->expert_label, sizeof r->expert_label);
    else
        snprintf(r->expert_label, sizeof r->expert_label, "none (no Megatron plan fits)");
    if (!st && lr.found && !same) {
        st = ss_sim_run(r->sim, r->expert, &r->expert_sim, d);
        best_last = 0;
    }
    if (!st && !lr.found) {
        snprintf(r->expert_sim.model, sizeof r->expert_sim.model, "%s", ss_graph_name(g));
        r->expert_sim.batch = S.batch;
    }
    /* data parallelism only when its 16-bit weights fit at all (else it is
     * reported as not fitting, unsimulated: the 175B model would take
     * minutes to find that out) */
    ss_megatron_config dpc = {.tp = 1, .pp = 1, .dp = S.devices};
    int dp_judged = !ss_llm_static_overflow(&S, &dpc);
    if (!st && dp_judged) {
        best_last = 0;
        ss_sim_set_stop(r->sim, llm_stop, &cb);
        st = ss_sim_run(r->sim, r->data_parallel, &r->dp_sim, d);
        ss_sim_set_stop(r->sim, NULL, NULL);
        if (st == SS_ERR_INTERRUPTED) {
            ss_diag_init(d);
            st = SS_OK;
            dp_judged = 0;
        }
    }
    if (!st && !dp_judged) {
        snprintf(r->dp_sim.model, sizeof r->dp_sim.model, "%s", ss_graph_name(g));
        r->dp_sim.batch = S.batch;
        r->dp_sim.fits = 0;
        r->dp_sim.overflow_device = 0;
    }
    /* last: the best plan, so that the simulator's last run is its */
    if (!st && !best_last)
        st = ss_sim_run(r->sim, r->best, &r->best_sim, d);
    if (!st && same)
        st = ss_sim_result_copy(&r->expert_sim, &r->best_sim, d);
    if (st)
        return st;
    if (l2) { /* not Megatron-shaped: no Megatron-LM flags */
        snprintf(r->best_label, sizeof r->best_label, "level 2: %s", r->level2_plan);
        r->megatron_args[0] = 0;
    } else {
        spec_of(&lr.best, S.batch, r->best_label, sizeof r->best_label);
        ss_megatron_args(&lr.best.c, S.layers, S.batch, r->megatron_args,
                         sizeof r->megatron_args);
    }
    double it = r->best_sim.iteration_us * 1e-6;
    if (it > 0) {
        r->mfu = S.peak_flops > 0 ? S.model_flops / (S.devices * S.peak_flops * it) : 0;
        r->tflops_per_gpu = S.model_flops / (S.devices * it) / 1e12;
        r->tokens_per_s = (double)S.batch * (double)S.seq / it;
    }
    r->speedup_vs_dp = r->dp_sim.fits ? speedup(&r->dp_sim, &r->best_sim) : 0;
    r->speedup_vs_expert = r->expert_sim.fits ? speedup(&r->expert_sim, &r->best_sim) : 0;
    r->first_plan_s = lr.first_plan_s;
    /* runners-up: the next Megatron points within the band of the best
     * (all of them, the Megatron best included, when level 2 won) */
    for (int i = l2 ? 0 : 1; i < lr.n_near && r->n_near < SS_SEARCH_NEAR_MAX; i++) {
        if (l2 && lr.near[i].time_us > lr.level2_us * 1.08)
            break;
        spec_of(&lr.near[i], S.batch, r->near[r->n_near].plan, sizeof r->near[0].plan);
        r->near[r->n_near++].iteration_us = lr.near[i].time_us;
    }
    r->proposals = lr.proposals;
    r->accepted = 0;
    r->evaluations = lr.evaluations;
    r->cached = lr.cached;
    r->infeasible = lr.infeasible;
    r->time_s = lr.time_s;
    r->evals_per_s = lr.time_s > 0 ? lr.evaluations / lr.time_s : 0;
    r->best_found_at_s = lr.time_s;
    r->interrupted = lr.interrupted;
    r->time_dependent = lr.time_cut || lr.level2_time_dependent || r->sync_tuning.cut;
    r->time_limit_s = cfg->time_limit_s;
    snprintf(r->stopped_by, sizeof r->stopped_by, "%s",
             lr.interrupted ? "interrupted" : lr.time_cut ? "time limit" : "budget");
    r->cpu_s = cpu_s() - c0;
    /* the baseline, after the search (its time is its own) */
    if (cfg->baseline == SS_BASELINE_MEGATRON_GRID) {
        double gc0 = cpu_s();
        ss_grid_config gc = {.threads = cfg->threads, .stop = user_stop, .stop_ctx = (void *)cfg};
        ss_grid_result gr;
        st = ss_grid_run(g, m, cm, &gc, &gr, d);
        if (st)
            return st;
        r->grid.run = 1;
        r->grid.fits = gr.found;
        r->grid.points = gr.points;
        r->grid.points_judged = gr.judged;
        r->grid.time_s = gr.time_s;
        r->grid.cpu_s = cpu_s() - gc0;
        r->grid.time_cut = gr.time_cut || gr.interrupted;
        if (gr.found) {
            /* judged as the best plan is: by simulate's default evaluator */
            ss_plan *gp = NULL;
            ss_sim_result gs;
            memset(&gs, 0, sizeof gs);
            st = ss_llm_plan(g, m, &gr.best.c, &gp, d);
            if (!st)
                st = ss_sim_run(r->sim, gp, &gs, d);
            if (!st)
                st = ss_sim_run(r->sim, r->best, &r->best_sim, d); /* the last run again */
            ss_plan_free(gp);
            r->grid.fits = gs.fits;
            r->grid.iteration_us = gs.iteration_us;
            ss_sim_result_clear(&gs);
            if (st)
                return st;
            spec_of(&gr.best, S.batch, r->grid.plan, sizeof r->grid.plan);
            if (r->grid.fits)
                r->speedup_vs_megatron_grid = r->grid.iteration_us / r->best_sim.iteration_us;
        }
    }
    return SS_OK;
}

ss_status ss_search_run(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                        const ss_search_config *cfg_in, ss_search_result *r, ss_diag *d)
{
    ss_search_config cfg;
    if (cfg_in)
        cfg = *cfg_in;
    else
        memset(&cfg, 0, sizeof cfg);
    if (!is_llm(g, m) && (cfg.level > 0 || cfg.threads > 0 || cfg.baseline))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "search: %s apply to the LLM planner only; model \"%s\" is not a "
                           "transformer of repeated layers (drop them)",
                           "the level, threads and Megatron grid baseline",
                           ss_graph_name(g));
    if (is_llm(g, m)) {
        memset(r, 0, sizeof *r);
        ss_diag dl;
        ss_diag_init(&dl);
        ss_status st = llm_run(g, m, cm, &cfg, r, &dl);
        if (st)
            ss_search_result_clear(r);
        /* no Megatron plan fits: the SOAP search below looks further and
         * returns the least bad plan */
        if (st != SS_ERR_INFEASIBLE) {
            if (st)
                ss_diag_set(d, st, "%s", dl.msg);
            return st;
        }
    }
    if (cfg.budget <= 0)
        cfg.budget = 20000;
    int n_random = cfg.random_starts == 0 ? 2 : cfg.random_starts < 0 ? 0 : cfg.random_starts;
    if (n_random > 64)
        n_random = 64;
    memset(r, 0, sizeof *r);

    ss_sim *sim = NULL;
    ss_space *sp = NULL;
    full_eval fe;
    memset(&fe, 0, sizeof fe);
    ss_plan *starts[2 + 64] = {0};
    int n_starts = 0;
    /* Every simulation polls the stop callback, so Ctrl-C is honoured while
     * a big plan is built or simulated, not only between proposals. */
    cb_bridge br = {&cfg};
    ss_sim_config sc = {.stop = cfg.stop ? bridge_stop : NULL, .stop_ctx = &br,
                        .evaluator = cfg.evaluator};
    ss_status st = ss_sim_new(g, m, cm, &sc, &sim, d);
    if (st)
        return st;
    fe.sim = sim;
    fe.n_ops = ss_graph_n_ops(g);
    fe.path = ss_malloc(((size_t)fe.n_ops + 1) * sizeof *fe.path);
    if (!fe.path)
        st = ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory");
    ss_search_judge full = {&fe, full_eval_fn, NULL, NULL, NULL, NULL};

    /* Devices the plans may use: all, unless no two can reach each other
     * (every device is a peer that refuses connections, and none relays):
     * then plans run on device 0 alone. */
    r->devices_usable = usable_devices(m);
    int all = r->devices_usable == ss_machine_n_devices(m);

    /* Baselines. */
    if (!st)
        st = ss_plan_data_parallel(g, m, all ? 0 : r->devices_usable, &r->data_parallel, d);
    if (!st)
        st = ss_sim_run(sim, r->data_parallel, &r->dp_sim, d);
    if (st == SS_ERR_INTERRUPTED) {
        ss_diag_init(d);
        st = ss_diag_set(d, SS_ERR_INTERRUPTED,
                         "search: interrupted before the first plan (data parallelism) was "
                         "simulated; no plan found");
    }
    ss_diag de; /* the expert's own errors, but for a stop */
    ss_diag_init(&de);
    if (!st && all)
        st = ss_expert_plan(g, m, &full, &r->expert, r->expert_label, sizeof r->expert_label, &de);
    if (!st && !all) { /* the expert rules place over the whole machine */
        r->expert = ss_plan_clone(r->data_parallel);
        snprintf(r->expert_label, sizeof r->expert_label, "one device (no two reach each other)");
        if (!r->expert)
            st = ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory");
    }
    if (!st)
        st = ss_sim_run(sim, r->expert, &r->expert_sim, &de);
    if (st == SS_ERR_INTERRUPTED) { /* stopped while judging the expert: data parallelism */
        ss_sim_result_clear(&fe.r); /* nothing else is held yet */
        ss_free(fe.path);
        return interrupted_early(sim, r, d);
    }
    if (st && de.status)
        ss_diag_set(d, de.status, "%s", de.msg);

    /* Space and start plans: DP, expert, random. */
    ss_space_opts so = {r->devices_usable, 0};
    if (!st)
        st = ss_space_new(g, &so, &sp, d);
    if (!st) {
        r->log10_space = ss_space_log10_size(sp);
        starts[n_starts++] = r->data_parallel;
        starts[n_starts++] = r->expert;
        ss_rng rng;
        ss_rng_seed(&rng, cfg.seed ^ 0x5eed5eed5eed5eedULL);
        for (int i = 0; i < n_random && !st; i++) {
            ss_plan *p = ss_plan_clone(r->data_parallel);
            if (!p) {
                st = ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory");
                break;
            }
            starts[n_starts++] = p;
            st = ss_space_random_plan(sp, &rng, p, d);
        }
    }

    /* Evaluator: the full simulator. */
    ss_search_judge ev = full;
    ev.commit = full_commit_fn;
    ev.path_ops = full_path_ops;
    ev.restore = full_restore_fn;

    bounded bd = {ev, NULL};
    if (!st)
        st = ss_bound_new(g, m, cm, &bd.bnd, d);
    ss_search_judge bev = {&bd, bounded_eval, bounded_commit, bounded_bound, bounded_path_ops,
                        bounded_restore};

    /* The chains. */
    ss_mcmc_config mc;
    memset(&mc, 0, sizeof mc);
    mc.budget = cfg.budget;
    /* the chains leave a share of the time limit to the sync tuning */
    mc.time_limit_s = cfg.time_limit_s * (cfg.no_sync_tuning ? 1 : 1 - TUNE_SHARE);
    mc.seed = cfg.seed;
    mc.beta = cfg.beta;
    mc.explore_share = cfg.explore_share;
    mc.restart_after = cfg.restart_after;
    mc.p_heavy = cfg.p_heavy;
    mc.p_path = cfg.p_path;
    mc.p_local = cfg.p_local;
    mc.p_class = cfg.p_class;
    mc.eval_cache = cfg.no_eval_cache ? -1 : 0;
    mc.stop = bridge_stop;
    mc.progress = bridge_progress;
    mc.cb_ctx = &br;
    mc.progress_every_s = cfg.progress_every_s > 0 ? cfg.progress_every_s : 0.2;
    ss_mcmc_stats ms;
    ss_eval be;
    if (!st) {
        r->best = ss_plan_clone(r->data_parallel);
        if (!r->best)
            st = ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory");
    }
    double t_chains = ss_mcmc_now();
    if (!st)
        st = ss_mcmc_run(sp, &bev, starts, n_starts, &mc, r->best, &be, &ms, d);

    /* The best plan, judged by the full simulator (its trace is the last run):
     * not stopped by a Ctrl-C that already stopped the search. */
    ss_sim_set_stop(sim, NULL, NULL);
    /* Moves may have merged the tiles that formed the micro-batches: the
     * plan says what it runs, so that its file loads back (plan.c). */
    int layout = st ? 1 : ss_plan_layout_microbatches(r->best, g);
    if (layout < 0)
        st = ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory");
    else if (!st && ss_plan_settings_get(r->best)->microbatches > layout)
        ss_plan_settings_of(r->best)->microbatches = layout;
    if (!st)
        st = ss_sim_run(sim, r->best, &r->best_sim, d);
    /* the best plan's sync settings, tuned in the time left (not after a
     * Ctrl-C); simulated again when the tuning ran */
    if (!st && cfg.no_sync_tuning)
        snprintf(r->sync_tuning.note, sizeof r->sync_tuning.note, "not asked");
    else if (!st && ms.stopped_by == SS_MCMC_STOP_USER)
        snprintf(r->sync_tuning.note, sizeof r->sync_tuning.note, "skipped: interrupted");
    else if (!st) {
        tuned t;
        double before = r->best_sim.iteration_us;
        st = tune_plan(sim, r->best, cfg.time_limit_s > 0 ? t_chains + cfg.time_limit_s : 0, &cfg,
                       &t, d);
        if (!st) {
            tune_report(&t, before, 1, 0, t.tr.evaluations, t.tr.time_s, t.tr.cut,
                        &r->sync_tuning);
            r->time_dependent |= t.tr.cut;
            if (t.tr.evaluations > 0) /* the simulator's last run is the best plan's */
                st = ss_sim_run(sim, r->best, &r->best_sim, d);
        }
    }
    if (!st) {
        r->speedup_vs_dp = speedup(&r->dp_sim, &r->best_sim);
        r->speedup_vs_expert = speedup(&r->expert_sim, &r->best_sim);
        r->proposals = ms.proposals;
        r->accepted = ms.accepted;
        r->evaluations = ms.evaluations;
        r->pruned = ms.pruned;
        r->cut = ms.cut;
        r->cached = ms.cached;
        r->infeasible = ms.infeasible;
        r->restarts = ms.restarts;
        r->time_s = ms.time_s;
        r->evals_per_s = ms.evals_per_s;
        r->best_found_at_s = ms.best_at_s;
        r->gain_second_half = !isfinite(ms.best_us) ? 0
                              : !isfinite(ms.best_half_us) ? HUGE_VAL
                                                           : ms.best_half_us / ms.best_us - 1;
        r->interrupted = ms.stopped_by == SS_MCMC_STOP_USER;
        r->time_dependent = ms.time_cut || r->sync_tuning.cut;
        r->time_limit_s = cfg.time_limit_s;
        snprintf(r->stopped_by, sizeof r->stopped_by, "%s", ss_mcmc_stop_name(ms.stopped_by));
    }
    for (int i = 2; i < n_starts; i++)
        ss_plan_free(starts[i]);
    ss_space_free(sp);
    ss_bound_free(bd.bnd);
    ss_sim_result_clear(&fe.r);
    ss_free(fe.path);
    if (st) {
        ss_sim_free(sim);
        ss_search_result_clear(r);
        return st;
    }
    r->sim = sim;
    r->level = -1;
    r->threads = 1;
    return SS_OK;
}

/* ---- JSON ------------------------------------------------------------------ */

/* sync_tuning: what tuning the written plan's sync settings did
 * (ss_search_sync_tuning; before_ms / after_ms null when it did not run). */
static json_t *tuning_json(const ss_search_sync_tuning *t)
{
    json_t *o = json_object(), *set = json_object();
    int bad = !o || !set;
    if (!bad) {
        bad |= json_object_set_new(o, "run", json_boolean(t->run));
        bad |= json_object_set_new(o, "changed", json_boolean(t->changed));
        bad |= json_object_set_new(o, "before_ms", t->run ? json_real(t->before_us / 1e3)
                                                          : json_null());
        bad |= json_object_set_new(o, "after_ms", t->run ? json_real(t->after_us / 1e3)
                                                         : json_null());
        bad |= json_object_set_new(o, "evaluations", json_integer(t->evaluations));
        bad |= json_object_set_new(o, "time_s", json_real(t->time_s));
        bad |= json_object_set_new(o, "cut", json_boolean(t->cut));
        bad |= json_object_set_new(o, "order_tuned", json_boolean(t->order_tuned));
        bad |= json_object_set_new(o, "finalists", json_integer(t->finalists));
        bad |= json_object_set_new(o, "flipped", json_boolean(t->flipped));
        bad |= json_object_set_new(o, "evaluator", json_string(t->evaluator));
        bad |= json_object_set_new(set, "bucket_bytes", json_real(t->bucket_bytes));
        bad |= json_object_set_new(set, "priority", json_boolean(t->priority));
        bad |= json_object_set_new(set, "reorder_k", json_integer(t->reorder_k));
        bad |= json_object_set_new(set, "synced_flags", json_boolean(t->synced_flags));
        bad |= json_object_set_new(set, "sync", json_string(t->bulk ? "bulk" : "overlap"));
        bad |= json_object_set_new(o, "settings", t->run ? set : json_null());
        if (!t->run)
            json_decref(set);
        set = NULL;
        bad |= json_object_set_new(o, "note", json_string(t->note));
    }
    json_decref(set);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The LLM planner's fields (docs/search.md): the plan as a Megatron spec and
 * its Megatron-LM flags, MFU, TFLOP/s per GPU, tokens/s, the runners-up, and
 * baselines.megatron_grid with speedup_vs_megatron_grid (null when the grid
 * found no fitting plan: no speedup over a plan that cannot run). */
static int llm_json(const ss_search_result *r, json_t *o, json_t *base)
{
    int bad = 0;
    if (r->level < 0)
        return 0;
    bad |= json_object_set_new(o, "plan_spec", json_string(r->best_label));
    bad |= json_object_set_new(o, "megatron_args", r->megatron_args[0]
                                                       ? json_string(r->megatron_args)
                                                       : json_null());
    bad |= json_object_set_new(o, "mfu", json_real(r->mfu));
    bad |= json_object_set_new(o, "tflops_per_gpu", json_real(r->tflops_per_gpu));
    bad |= json_object_set_new(o, "tokens_per_s", json_real(r->tokens_per_s));
    json_t *near = json_array();
    bad |= !near;
    for (int i = 0; near && i < r->n_near; i++) {
        json_t *e = json_object();
        bad |= !e || json_object_set_new(e, "plan", json_string(r->near[i].plan)) ||
               json_object_set_new(e, "iteration_time_ms", json_real(r->near[i].iteration_us / 1e3)) ||
               json_array_append_new(near, e);
    }
    bad |= json_object_set_new(o, "runners_up", near);
    if (r->grid.run) {
        json_t *gj = json_object();
        bad |= !gj;
        if (gj) {
            bad |= json_object_set_new(gj, "fits", json_boolean(r->grid.fits));
            bad |= json_object_set_new(gj, "iteration_time_ms", r->grid.fits
                                                                    ? json_real(r->grid.iteration_us / 1e3)
                                                                    : json_null());
            bad |= json_object_set_new(gj, "plan", r->grid.fits ? json_string(r->grid.plan)
                                                                : json_null());
            bad |= json_object_set_new(gj, "points", json_integer(r->grid.points));
            bad |= json_object_set_new(gj, "points_judged", json_integer(r->grid.points_judged));
            bad |= json_object_set_new(gj, "time_s", json_real(r->grid.time_s));
            bad |= json_object_set_new(gj, "cpu_s", json_real(r->grid.cpu_s));
            bad |= json_object_set_new(gj, "time_cut", json_boolean(r->grid.time_cut));
            bad |= json_object_set_new(base, "megatron_grid", gj);
        }
        bad |= json_object_set_new(o, "speedup_vs_megatron_grid",
                                   r->grid.fits ? json_real(r->speedup_vs_megatron_grid)
                                                : json_null());
    }
    return bad;
}

ss_status ss_search_result_to_json(const ss_search_result *r, const char *plan_file,
                                  const char *trace_file, char **out, ss_diag *d)
{
    json_t *o = json_object();
    json_t *best = ss_sim_result_json(&r->best_sim, plan_file);
    json_t *dp = ss_sim_result_json(&r->dp_sim, "data-parallel");
    json_t *ex = ss_sim_result_json(&r->expert_sim, r->expert_label);
    json_t *base = json_object(), *srch = json_object();
    int bad = !o || !best || !dp || !ex || !base || !srch;
    if (!bad) {
        bad |= json_object_set_new(o, "best", best);
        best = NULL;
        bad |= json_object_set_new(base, "data_parallel", dp);
        dp = NULL;
        bad |= json_object_set_new(base, "expert", ex);
        ex = NULL;
        bad |= json_object_set_new(o, "expert_plan", json_string(r->expert_label));
        /* no speedup over a baseline that does not fit */
        bad |= json_object_set_new(o, "speedup_vs_data_parallel",
                                   r->speedup_vs_dp > 0 && (r->level < 0 || r->dp_sim.fits)
                                       ? json_real(r->speedup_vs_dp)
                                       : json_null());
        bad |= json_object_set_new(o, "speedup_vs_expert",
                                   r->speedup_vs_expert > 0 && (r->level < 0 || r->expert_sim.fits)
                                       ? json_real(r->speedup_vs_expert)
                                       : json_null());
        bad |= json_object_set_new(srch, "proposals", json_integer(r->proposals));
        bad |= json_object_set_new(srch, "accepted", json_integer(r->accepted));
        bad |= json_object_set_new(srch, "evaluations", json_integer(r->evaluations));
        bad |= json_object_set_new(srch, "pruned", json_integer(r->pruned));
        bad |= json_object_set_new(srch, "cut", json_integer(r->cut));
        bad |= json_object_set_new(srch, "cached", json_integer(r->cached));
        bad |= json_object_set_new(srch, "infeasible", json_integer(r->infeasible));
        bad |= json_object_set_new(srch, "restarts", json_integer(r->restarts));
        bad |= json_object_set_new(srch, "time_s", json_real(r->time_s));
        bad |= json_object_set_new(srch, "evals_per_s", json_real(r->evals_per_s));
        bad |= json_object_set_new(srch, "best_found_at_s", json_real(r->best_found_at_s));
        bad |= json_object_set_new(srch, "gain_second_half",
                                   isfinite(r->gain_second_half)
                                       ? json_real(r->gain_second_half)
                                       : json_null());
        bad |= json_object_set_new(srch, "stopped_by", json_string(r->stopped_by));
        bad |= json_object_set_new(srch, "interrupted", json_boolean(r->interrupted));
        bad |= json_object_set_new(srch, "time_limit_s", json_real(r->time_limit_s));
        bad |= json_object_set_new(srch, "devices_usable", json_integer(r->devices_usable));
        bad |= json_object_set_new(srch, "time_dependent", json_boolean(r->time_dependent));
        bad |= json_object_set_new(srch, "log10_space_size", json_real(r->log10_space));
        bad |= json_object_set_new(srch, "level",
                                   r->level >= 0 ? json_integer(r->level) : json_null());
        bad |= json_object_set_new(srch, "threads", json_integer(r->threads));
        bad |= json_object_set_new(srch, "first_plan_s", json_real(r->first_plan_s));
        if (r->level2_plan[0]) {
            json_t *l2 = json_object();
            bad |= !l2 || json_object_set_new(l2, "plan", json_string(r->level2_plan)) ||
                   json_object_set_new(l2, "iteration_time_ms",
                                       isfinite(r->level2_us) ? json_real(r->level2_us / 1e3)
                                                              : json_null()) ||
                   json_object_set_new(srch, "level2", l2);
        }
        bad |= json_object_set_new(srch, "cpu_s", json_real(r->cpu_s));
        bad |= json_object_set_new(o, "search", srch);
        srch = NULL;
        json_t *tj = tuning_json(&r->sync_tuning);
        bad |= !tj || json_object_set_new(o, "sync_tuning", tj);
        bad |= llm_json(r, o, base);
        bad |= json_object_set_new(o, "baselines", base);
        base = NULL;
        bad |= json_object_set_new(o, "plan_file",
                                   plan_file ? json_string(plan_file) : json_null());
        bad |= json_object_set_new(o, "trace_file",
                                   trace_file ? json_string(trace_file) : json_null());
    }
    json_decref(best);
    json_decref(dp);
    json_decref(ex);
    json_decref(base);
    json_decref(srch);
    if (bad) {
        json_decref(o);
        return ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory writing JSON");
    }
    ss_status st = ss_json_to_string(o, out, d);
    json_decref(o);
    return st;
}
