/*
 * evaluator.h — the evaluator interface (issue 27, item 1): one method
 * table per way of judging a plan, and the simulator state they share.
 *
 * An evaluator turns a plan into an ss_sim_result. Three exist, each a
 * table behind this header (docs/simulator.md, "Evaluators"):
 *   eval_full.c      the full task-graph simulation (build.c, engine.c,
 *                    memory.c), the oracle; judges every plan;
 *   eval_symmetry.c  one representative per class of identical devices
 *                    (symmetry.c), bit-identical to full;
 *   eval_hier.c      collapsed repeated blocks and a stage-level pipeline
 *                    (hier.c), within 0.5% of full.
 * sim.c is the dispatcher: ss_sim_run_within picks a table by the
 * config's evaluator (AUTO: the policy in ss_eval_auto_order, a walk over
 * the tables cheapest first) and keeps the table whose result it holds, so
 * that the trace, the critical path and the task count are asked of the
 * evaluator that produced them.
 *
 * Invariant: a table's judge either fills the result completely (the
 * full simulation's contract: ss_sim_run_within's) or leaves it
 * untouched; an evaluator's state lives in ss_sim.state[kind], made on
 * first use and dropped whenever the sim's callbacks change. This header
 * is the only one the evaluators and the dispatcher share.
 */
#ifndef SS_EVALUATOR_H
#define SS_EVALUATOR_H

#include "simsearch.h"

#include <stddef.h>

struct ss_builder;
struct ss_taskgraph;
struct ss_memory;
struct ss_engine;
struct ss_eval_method;
struct ss_plan_view;

/* Evaluator kinds that have a table: SS_EVAL_FULL .. SS_EVAL_HIER. */
#define SS_EVAL_KINDS (SS_EVAL_HIER + 1)

/* What ss_sim_run_within's judge reports besides its status. */
typedef enum ss_eval_outcome {
    SS_EVAL_REFUSED = 0, /* the plan is not of the evaluator's form (why set); r untouched */
    SS_EVAL_JUDGED,      /* r filled */
    SS_EVAL_CUT          /* the iteration was proved to end after the cutoff; r untouched */
} ss_eval_outcome;

/* The simulator: the builder, task graph, engine and memory tracker the
 * full evaluator runs (the symmetric evaluator runs an inner ss_sim of its
 * own on the reduced plan), and each evaluator's state. */
struct ss_sim {
    const ss_graph *g;
    const ss_machine *m;
    ss_costmodel *cm;
    ss_sim_config cfg;
    struct ss_builder *b;
    struct ss_taskgraph *tg;
    struct ss_memory *mm;
    struct ss_engine *e;
    struct ss_plan_view *view; /* the plan being judged, analysed once (plan_view.h): set by
                                  the dispatcher before any table's accepts or judge runs */
    int view_ok; /* view holds the plan of the last run (ss_sim_run_within, _rerun_within) */
    int base;    /* ss_sim_commit made that run's plan the base of ss_sim_rerun_within */
    int diff;    /* op whose config the last run's plan has apart from the base, -1 none */
    void *state[SS_EVAL_KINDS]; /* per evaluator kind, NULL until first used */
    const struct ss_eval_method *last; /* whose result the last run holds; NULL: none */
};

typedef struct ss_eval_method {
    ss_evaluator kind;
    const char *name;  /* the result's evaluator field: "full", "symmetry", "hierarchical" */
    const char *title; /* in messages: "the symmetric evaluator" */
    int exact;         /* 1: bit-identical to the full simulation (AUTO with cfg.exact
                          uses only these) */
    int64_t auto_min_tiles; /* AUTO tries it on plans of at least this many tile entries */
    /* Make / drop its state in s->state[kind] (NULL: it keeps none). make:
     * 0 ok, -1 out of memory. drop is called with the state present. */
    int (*make)(ss_sim *s);
    void (*drop)(ss_sim *s);
    /* Whether it can judge p, without simulating: 1 yes, 0 no (why, n
     * bytes, says which condition fails), -1 error (d set). A yes is
     * necessary, not sufficient: judge may still refuse for a reason only
     * a simulation shows (its why then says so). */
    int (*accepts)(ss_sim *s, const ss_plan *p, char *why, size_t n, ss_diag *d);
    /* Judge p with ss_sim_run_within's contract (cutoff_us, *load_us);
     * *out says what happened; a refusal writes why (n bytes). */
    ss_status (*judge)(ss_sim *s, const ss_plan *p, double cutoff_us, ss_sim_result *r,
                       double *load_us, ss_eval_outcome *out, char *why, size_t n,
                       ss_diag *d);
    /* Estimated tasks it would simulate for p: from p's tile entries and
     * what its previous judgements simulated per tile entry. */
    double (*cost)(const ss_sim *s, const ss_plan *p);
    /* Of its last judgement held (s->last is this table): tasks simulated. */
    int64_t (*n_tasks)(const ss_sim *s);
    /* The critical path per op (ss_sim_path_ops) and the timeline
     * (ss_sim_write_trace); NULL: the evaluator keeps neither. */
    ss_status (*path_ops)(ss_sim *s, double *op_us, double *total_us, ss_diag *d);
    ss_status (*write_trace)(const ss_sim *s, const char *path, ss_diag *d);
} ss_eval_method;

extern const ss_eval_method ss_eval_full;     /* eval_full.c */
extern const ss_eval_method ss_eval_symmetry; /* eval_symmetry.c */
extern const ss_eval_method ss_eval_hier;     /* eval_hier.c */

/* The table of a kind (FULL, SYMMETRY, HIER); NULL for AUTO or unknown. */
const ss_eval_method *ss_eval_method_of(ss_evaluator kind);

/* AUTO's order: the tables cheapest first (hierarchical, symmetry, full);
 * *n set to their number. AUTO judges with the first that is allowed
 * (exact when cfg.exact), whose auto_min_tiles the plan reaches, and that
 * does not refuse; full judges every plan. */
const ss_eval_method *const *ss_eval_auto_order(int *n);

/* Tile entries of p (the size of its device lists): what AUTO weighs and
 * what the cost estimates scale. */
int64_t ss_eval_tile_entries(const ss_plan *p);

#endif /* SS_EVALUATOR_H */
