/*
 * sim.c — the public simulator (ss_sim_* in simsearch.h): the dispatcher
 * over the evaluator tables (evaluator.h). It owns the state they share
 * (the builder, task graph, engine and memory tracker the full evaluator
 * reuses run after run, each evaluator's own state made on first use),
 * picks the table a run is judged by (the config's evaluator, or AUTO's
 * walk over the tables cheapest first) and asks the table that produced
 * the last result for its task count, critical path and timeline.
 *
 * Invariant: s->last is the table whose result the last run holds, NULL
 * after a run that failed, was refused or was cut (what
 * ss_sim_write_trace, ss_sim_path_ops and ss_sim_n_tasks then see: none).
 */
#include "simulator/evaluator.h"

#include "simulator/build.h"
#include "simulator/engine.h"
#include "simulator/memory.h"
#include "simulator/plan_view.h"
#include "simulator/taskgraph.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

const char *ss_evaluator_name(ss_evaluator e)
{
    switch (e) {
    case SS_EVAL_AUTO: return "auto";
    case SS_EVAL_FULL: return "full";
    case SS_EVAL_SYMMETRY: return "symmetry";
    case SS_EVAL_HIER: return "hierarchical";
    }
    return "unknown";
}

int ss_evaluator_parse(const char *s, ss_evaluator *out)
{
    static const struct { const char *name; ss_evaluator e; } t[] = {
        {"auto", SS_EVAL_AUTO}, {"full", SS_EVAL_FULL}, {"symmetry", SS_EVAL_SYMMETRY},
        {"hierarchical", SS_EVAL_HIER}, {"hier", SS_EVAL_HIER}};
    for (size_t i = 0; s && i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(s, t[i].name)) {
            *out = t[i].e;
            return 0;
        }
    return -1;
}

const ss_eval_method *ss_eval_method_of(ss_evaluator kind)
{
    switch (kind) {
    case SS_EVAL_FULL: return &ss_eval_full;
    case SS_EVAL_SYMMETRY: return &ss_eval_symmetry;
    case SS_EVAL_HIER: return &ss_eval_hier;
    case SS_EVAL_AUTO: break;
    }
    return NULL;
}

const ss_eval_method *const *ss_eval_auto_order(int *n)
{
    static const ss_eval_method *const order[] = {&ss_eval_hier, &ss_eval_symmetry,
                                                  &ss_eval_full};
    *n = (int)(sizeof order / sizeof order[0]);
    return order;
}

int64_t ss_eval_tile_entries(const ss_plan *p)
{
    int64_t n = 0;
    for (int i = 0; i < ss_plan_n_ops(p); i++)
        n += ss_plan_config(p, i)->ntiles;
    return n;
}

/* Drop every evaluator's state (made again on first use). */
static void drop_states(ss_sim *s)
{
    for (int k = SS_EVAL_FULL; k < SS_EVAL_KINDS; k++) {
        const ss_eval_method *em = ss_eval_method_of((ss_evaluator)k);
        if (s->state[k])
            em->drop(s);
    }
    s->last = NULL;
}

ss_status ss_sim_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                     const ss_sim_config *cfg, ss_sim **out, ss_diag *d)
{
    *out = NULL;
    if (!g || !m || !cm)
        return ss_diag_set(d, SS_ERR_INVALID, "simulate: graph, machine and cost model needed");
    if (cfg && (unsigned)cfg->evaluator > SS_EVAL_HIER)
        return ss_diag_set(d, SS_ERR_INVALID, "simulate: unknown evaluator %d",
                           (int)cfg->evaluator);
    if (cfg && (!(cfg->mem_fraction >= 0) || cfg->mem_fraction > 1))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "simulate: mem_fraction must be in (0, 1] (0 = 1), got %g",
                           cfg->mem_fraction);
    ss_sim *s = ss_calloc(1, sizeof *s);
    if (!s)
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory");
    s->g = g;
    s->m = m;
    s->cm = cm;
    if (cfg)
        s->cfg = *cfg;
    if (!(s->cfg.mem_fraction > 0))
        s->cfg.mem_fraction = 1.0;
    s->b = ss_build_new(g, m, cm);
    if (s->b)
        ss_build_set_stop(s->b, s->cfg.stop, s->cfg.stop_ctx);
    s->tg = ss_taskgraph_new(ss_machine_n_devices(m), 2 * ss_machine_n_links(m));
    s->mm = ss_memory_new();
    s->e = ss_engine_new();
    s->view = ss_plan_view_new(g, m);
    if (!s->b || !s->tg || !s->mm || !s->e || !s->view) {
        ss_sim_free(s);
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory");
    }
    ss_taskgraph_set_pred_lists(s->tg, 0); /* only the engine and the trace read it */
    if (s->cfg.one_shot) {
        ss_build_set_lean(s->b, 1);
        ss_engine_set_lean(s->e, 1);
    }
    *out = s;
    return SS_OK;
}

void ss_sim_free(ss_sim *s)
{
    if (!s)
        return;
    drop_states(s);
    ss_build_free(s->b);
    ss_taskgraph_free(s->tg);
    ss_memory_free(s->mm);
    ss_engine_free(s->e);
    ss_plan_view_free(s->view);
    ss_free(s);
}

ss_builder *ss_sim_builder(ss_sim *s)
{
    return s->b;
}

const ss_taskgraph *ss_sim_taskgraph(const ss_sim *s)
{
    return s->tg;
}

int64_t ss_sim_n_tasks(const ss_sim *s)
{
    return s && s->last ? s->last->n_tasks(s) : 0;
}

ss_status ss_sim_path_ops(ss_sim *s, double *op_us, double *total_us, ss_diag *d)
{
    if (!s || !s->last)
        return ss_diag_set(d, SS_ERR_INVALID, "simulate: no run to take a critical path from");
    if (!s->last->path_ops)
        return ss_diag_set(d, SS_ERR_INVALID, "simulate: %s keeps no critical path",
                           s->last->title);
    return s->last->path_ops(s, op_us, total_us, d);
}

ss_status ss_sim_write_trace(const ss_sim *s, const char *path, ss_diag *d)
{
    if (!s || !s->last)
        return ss_diag_set(d, SS_ERR_INVALID, "trace: no simulation has run yet");
    if (!s->last->write_trace)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "trace: %s keeps no timeline (use --evaluator symmetry or full)",
                           s->last->title);
    return s->last->write_trace(s, path, d);
}

void ss_sim_set_stop(ss_sim *s, int (*stop)(void *ctx), void *ctx)
{
    s->cfg.stop = stop;
    s->cfg.stop_ctx = ctx;
    ss_build_set_stop(s->b, stop, ctx);
    drop_states(s); /* made again with the new callback */
}

ss_status ss_sim_run(ss_sim *s, const ss_plan *p, ss_sim_result *r, ss_diag *d)
{
    double load;
    return ss_sim_run_within(s, p, HUGE_VAL, r, &load, d);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The table's state, made on first use; nonzero (d set) on failure. */
static int ready(ss_sim *s, const ss_eval_method *em, ss_diag *d)
{
    if (!s->state[em->kind] && em->make(s)) {
        ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory");
        return -1;
    }
    return 0;
}

int ss_sim_accepts(ss_sim *s, ss_evaluator e, const ss_plan *p, char *why, size_t n, ss_diag *d)
{
    const ss_eval_method *em = ss_eval_method_of(e);
    if (n)
        why[0] = 0;
    if (!s || !p) {
        ss_diag_set(d, SS_ERR_INVALID, "simulate: missing simulator or plan");
        return -1;
    }
    if (!em) {
        ss_diag_set(d, SS_ERR_INVALID, "simulate: ss_sim_accepts needs an evaluator, not %s",
                    ss_evaluator_name(e));
        return -1;
    }
    s->base = s->view_ok = 0; /* the view is p's now */
    if (ready(s, em, d) || ss_plan_view_set(s->view, p, d))
        return -1;
    if (s->last == em)
        s->last = NULL; /* its analysis overwrites what the held result's trace reads */
    return em->accepts(s, p, why, n, d);
}

double ss_sim_cost(ss_sim *s, ss_evaluator e, const ss_plan *p)
{
    const ss_eval_method *em = ss_eval_method_of(e);
    return s && p && em ? em->cost(s, p) : -1;
}

/* The walk over the tables (forced, or AUTO's order) for p, whose view is
 * s->view (made afresh, or brought up to date after a one-op or settings
 * change by ss_sim_rerun_within: "judge again" is that view update plus
 * each table's own memos, which its judge re-uses). */
static ss_status walk(ss_sim *s, const ss_plan *p, double cutoff_us,
                      ss_sim_result *r, double *load_us, double t0, ss_diag *d)
{
    const ss_eval_method *forced = ss_eval_method_of(s->cfg.evaluator);
    const ss_eval_method *const *order = &forced;
    int n = 1;
    if (!forced)
        order = ss_eval_auto_order(&n);
    int64_t tiles = s->view->tiles;
    char why[256];
    for (int i = 0; i < n; i++) {
        const ss_eval_method *em = order[i];
        if (!forced && ((s->cfg.exact && !em->exact) || tiles < em->auto_min_tiles))
            continue;
        if (ready(s, em, d))
            return SS_ERR_NOMEM;
        ss_eval_outcome out = SS_EVAL_REFUSED;
        why[0] = 0;
        ss_status st = em->judge(s, p, cutoff_us, r, load_us, &out, why, sizeof why, d);
        if (st != SS_OK)
            return st;
        if (out == SS_EVAL_JUDGED) {
            r->eval_ms = now_ms() - t0;
            s->last = em;
        }
        if (out != SS_EVAL_REFUSED)
            return SS_OK;
        if (forced)
            return ss_diag_set(d, SS_ERR_INVALID, "simulate: %s does not apply: %s", em->title,
                               why);
    }
    return ss_diag_set(d, SS_ERR_INVALID, "simulate: no evaluator judged the plan");
}

ss_status ss_sim_run_within(ss_sim *s, const ss_plan *p, double cutoff_us, ss_sim_result *r,
                            double *load_us, ss_diag *d)
{
    double t0 = now_ms();
    s->last = NULL;
    s->base = 0;
    s->view_ok = 0;
    ss_status st = ss_plan_view_set(s->view, p, d);
    if (st != SS_OK)
        return st;
    s->view_ok = 1;
    s->diff = -1;
    return walk(s, p, cutoff_us, r, load_us, t0, d);
}

ss_status ss_sim_rerun_within(ss_sim *s, const ss_plan *p, int changed, double cutoff_us,
                              ss_sim_result *r, double *load_us, ss_diag *d)
{
    if (!s->base || !s->view_ok || changed < SS_SIM_SETTINGS || changed == -1 ||
        changed >= s->view->n_ops)
        return ss_sim_run_within(s, p, cutoff_us, r, load_us, d);
    double t0 = now_ms();
    s->last = NULL;
    /* p differs from the last run's plan in s->diff (that run's move, not
     * committed) and in changed */
    int prev = s->diff;
    s->view_ok = 0;
    ss_status st = ss_plan_view_change(s->view, p, prev, d);
    if (st == SS_OK && changed >= 0 && changed != prev)
        st = ss_plan_view_change(s->view, p, changed, d);
    if (st != SS_OK) {
        s->base = 0;
        return st;
    }
    s->view_ok = 1;
    s->diff = changed >= 0 ? changed : -1;
    return walk(s, p, cutoff_us, r, load_us, t0, d);
}

void ss_sim_commit(ss_sim *s)
{
    if (s && s->view_ok) {
        s->base = 1;
        s->diff = -1;
    }
}

void ss_sim_forget_base(ss_sim *s)
{
    if (s)
        s->base = 0;
}
