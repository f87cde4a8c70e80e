/*
 * eval_symmetry.c — the symmetric evaluator (evaluator.h): a plan made of
 * D identical data-parallel blocks judged by simulating block 0 alone
 * (symmetry.c detects, reduces and verifies; its inner ss_sim runs the
 * reduced plan in full), every figure bit-identical to the full
 * simulation. Its state is the ss_symmetry; the trace and the critical
 * path are those of the reduced run, the representatives' timelines drawn
 * on every device of their class.
 */
#include "simulator/evaluator.h"

#include "simulator/build.h"
#include "simulator/engine.h"
#include "simulator/symmetry.h"
#include "simulator/trace.h"

#include <math.h>
#include <stdio.h>

typedef struct symstate {
    ss_symmetry *y;
    double reduction; /* of the last judgement: full tasks / tasks simulated (1: none) */
} symstate;

static symstate *SY(const ss_sim *s)
{
    return s->state[SS_EVAL_SYMMETRY];
}

static int sym_make(ss_sim *s)
{
    symstate *x = ss_calloc(1, sizeof *x);
    if (!x || !(x->y = ss_sym_new(s->g, s->m, s->cm, &s->cfg))) {
        ss_free(x);
        return -1;
    }
    x->reduction = 1;
    s->state[SS_EVAL_SYMMETRY] = x;
    return 0;
}

static void sym_drop(ss_sim *s)
{
    symstate *x = SY(s);
    ss_sym_free(x->y);
    ss_free(x);
    s->state[SS_EVAL_SYMMETRY] = NULL;
}

static int sym_accepts(ss_sim *s, const ss_plan *p, char *why, size_t n, ss_diag *d)
{
    int ok = ss_sym_accepts(SY(s)->y, s->view, p, d);
    if (ok == 0 && n)
        snprintf(why, n, "%s", ss_sym_why(SY(s)->y));
    return ok;
}

static ss_status sym_judge(ss_sim *s, const ss_plan *p, double cutoff_us, ss_sim_result *r,
                           double *load_us, ss_eval_outcome *out, char *why, size_t n,
                           ss_diag *d)
{
    symstate *x = SY(s);
    int used = 0;
    *out = SS_EVAL_REFUSED;
    ss_status st = ss_sym_run(x->y, s->view, p, cutoff_us, r, load_us, &used, d);
    if (st != SS_OK)
        return st;
    if (!used) {
        if (n)
            snprintf(why, n, "%s", ss_sym_why(x->y));
        return SS_OK;
    }
    if (cutoff_us < HUGE_VAL && *load_us > cutoff_us) {
        *out = SS_EVAL_CUT;
        return SS_OK;
    }
    snprintf(r->evaluator, sizeof r->evaluator, "symmetry");
    r->tasks_simulated = ss_sym_tasks_simulated(x->y);
    r->symmetry_classes = ss_sym_classes(x->y);
    if (r->tasks_simulated > 0)
        x->reduction = (double)r->n_tasks / (double)r->tasks_simulated;
    *out = SS_EVAL_JUDGED;
    return SS_OK;
}

/* The full evaluator's estimate over the reduction of the last judgement
 * (tasks of the full graph per task simulated; 1 before any). */
static double sym_cost(const ss_sim *s, const ss_plan *p)
{
    const symstate *x = SY(s);
    return ss_eval_full.cost(s, p) / (x ? x->reduction : 1);
}

static int64_t sym_n_tasks(const ss_sim *s)
{
    return ss_sym_tasks_simulated(SY(s)->y);
}

/* The reduced run's path is the full run's (same op ids). */
static ss_status sym_path_ops(ss_sim *s, double *op_us, double *total_us, ss_diag *d)
{
    return ss_sim_path_ops(ss_sym_reduced_sim(SY(s)->y), op_us, total_us, d);
}

/* The representatives' timelines on every device. */
static ss_status sym_write_trace(const ss_sim *s, const char *path, ss_diag *d)
{
    ss_symmetry *y = SY(s)->y;
    const ss_sim *rs = ss_sym_reduced_sim(y);
    ss_trace_opts o = {s->m, ss_build_task_name, rs->b, 1, NULL, NULL, NULL};
    o.copies = ss_sym_blocks(y, &o.dmap, &o.cmap, &o.blk);
    return ss_trace_write(path, rs->tg, ss_engine_result_of(rs->e), &o, d);
}

const ss_eval_method ss_eval_symmetry = {
    .kind = SS_EVAL_SYMMETRY,
    .name = "symmetry",
    .title = "the symmetric evaluator",
    .exact = 1,
    .auto_min_tiles = SS_EVAL_SYM_TILES,
    .make = sym_make,
    .drop = sym_drop,
    .accepts = sym_accepts,
    .judge = sym_judge,
    .cost = sym_cost,
    .n_tasks = sym_n_tasks,
    .path_ops = sym_path_ops,
    .write_trace = sym_write_trace,
};
