/*
 * eval_hier.c — the hierarchical evaluator (evaluator.h): repeated blocks
 * simulated once per distinct sub-problem and a stage-level pipeline
 * (hier.c), within 0.5% of the full simulation on the plans it accepts.
 * Its state is the ss_hier with its memo of sub-problems, kept across
 * judgements (a plan that differs from the last in a few operators finds
 * the unchanged stages' sub-problems memoized). It keeps no timeline and
 * no critical path.
 */
#include "simulator/evaluator.h"

#include "simulator/hier.h"

#include <stdio.h>

typedef struct hierstate {
    ss_hier *h;
    int64_t tasks;    /* tasks simulated by the last judgement */
    double per_tile;  /* of the last judgement: tasks simulated per tile entry (0: none) */
} hierstate;

static hierstate *HS(const ss_sim *s)
{
    return s->state[SS_EVAL_HIER];
}

static int hier_make(ss_sim *s)
{
    hierstate *x = ss_calloc(1, sizeof *x);
    if (!x || !(x->h = ss_hier_new(s->g, s->m, s->cm, &s->cfg))) {
        ss_free(x);
        return -1;
    }
    s->state[SS_EVAL_HIER] = x;
    return 0;
}

static void hier_drop(ss_sim *s)
{
    hierstate *x = HS(s);
    ss_hier_free(x->h);
    ss_free(x);
    s->state[SS_EVAL_HIER] = NULL;
}

static int hier_accepts(ss_sim *s, const ss_plan *p, char *why, size_t n, ss_diag *d)
{
    ss_diag hd; /* a refusal's reason goes to why, not to d */
    ss_diag_init(&hd);
    int ok = ss_hier_accepts(HS(s)->h, s->view, p, &hd);
    if (ok < 0)
        ss_diag_set(d, hd.status, "%s", hd.msg);
    else if (!ok && n)
        snprintf(why, n, "%s", hd.msg);
    return ok;
}

static ss_status hier_judge(ss_sim *s, const ss_plan *p, double cutoff_us, ss_sim_result *r,
                            double *load_us, ss_eval_outcome *out, char *why, size_t n,
                            ss_diag *d)
{
    hierstate *x = HS(s);
    (void)cutoff_us; /* its result is complete: no proven bound to cut with */
    *out = SS_EVAL_REFUSED;
    ss_diag hd; /* a fresh diag: an unsupported plan's reason must not stick */
    ss_diag_init(&hd);
    ss_status st = ss_hier_eval_view(x->h, s->view, p, r, &hd);
    if (st == SS_ERR_UNSUPPORTED) {
        if (n)
            snprintf(why, n, "%s", hd.msg);
        return SS_OK;
    }
    if (st != SS_OK)
        return ss_diag_set(d, st, "simulate: the hierarchical evaluator failed: %s", hd.msg);
    *load_us = 0;
    x->tasks = r->n_tasks;
    x->per_tile = (double)r->n_tasks / (double)(ss_eval_tile_entries(p) + 1);
    snprintf(r->evaluator, sizeof r->evaluator, "hierarchical");
    r->tasks_simulated = r->n_tasks;
    r->symmetry_classes = ss_hier_stats_of(x->h)->stages;
    *out = SS_EVAL_JUDGED;
    return SS_OK;
}

/* Tasks simulated per tile entry by the last judgement, times p's tile
 * entries (before any: the full evaluator's estimate). The memo makes a
 * judgement of a plan close to the last one cheaper still. */
static double hier_cost(const ss_sim *s, const ss_plan *p)
{
    const hierstate *x = HS(s);
    if (!x || !(x->per_tile > 0))
        return ss_eval_full.cost(s, p);
    return x->per_tile * (double)ss_eval_tile_entries(p);
}

static int64_t hier_n_tasks(const ss_sim *s)
{
    return HS(s)->tasks;
}

const ss_eval_method ss_eval_hier = {
    .kind = SS_EVAL_HIER,
    .name = "hierarchical",
    .title = "the hierarchical evaluator",
    .exact = 0,
    .auto_min_tiles = SS_EVAL_HIER_TILES,
    .make = hier_make,
    .drop = hier_drop,
    .accepts = hier_accepts,
    .judge = hier_judge,
    .cost = hier_cost,
    .n_tasks = hier_n_tasks,
    .path_ops = NULL,
    .write_trace = NULL,
};
