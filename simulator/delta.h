/*
 * delta.h — delta simulation: judge a plan that differs from the last
 * committed plan in ONE operator's config, reusing what did not change,
 * with results exactly equal to the full simulation (ss_sim_run).
 *
 * Protocol (the MCMC evaluator's): run(p, changed) evaluates p; changed >= 0
 * promises p equals the committed base except op `changed` (changed = -1:
 * anything, a full evaluation). commit() makes the last evaluated plan the
 * base; without commit the next run is again relative to the old base.
 */
#ifndef SS_DELTA_H
#define SS_DELTA_H

#include "simsearch.h"

typedef struct ss_delta ss_delta;

typedef struct ss_delta_eval {
    double iteration_us;
    int fits;
    double overflow_bytes;           /* first overflowing device's overflow, 0 if fits */
    int overflow_device;             /* -1 if fits */
    const double *peak_memory_bytes; /* per device, valid until the next run */
    int64_t n_tasks;
} ss_delta_eval;

typedef struct ss_delta_stats {
    int64_t runs, full_runs, delta_runs;
    int64_t tasks_total;        /* tasks in the graphs evaluated */
    int64_t tasks_resimulated;  /* tasks the delta runs re-simulated */
    int64_t refused;            /* delta runs whose resume state the engine refused
                                 * (then run in full; 0 unless T* is unsound) */
} ss_delta_stats;

/* New delta simulator for g on m priced by cm (borrowed). */
ss_status ss_delta_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm, ss_delta **out,
                       ss_diag *d);
void ss_delta_free(ss_delta *dl);

/* Evaluate p (see the protocol above). On error the base is unchanged. */
ss_status ss_delta_run(ss_delta *dl, const ss_plan *p, int changed, ss_delta_eval *out,
                       ss_diag *d);
/* Make the last successfully evaluated plan the base (no-op if none). */
void ss_delta_commit(ss_delta *dl);

const ss_delta_stats *ss_delta_stats_of(const ss_delta *dl);

/* For measurements (benchmarks/bench_search.c shiftprobe), read-only: the
 * last run's graphs, schedules and alignment. map[t] is the base task new
 * task t was aligned with (-1: none), dirty[t] is 1 unless t is CLEAN
 * (delta.c: aligned, and its aligned predecessors are exactly its
 * partner's). Everything is borrowed from dl and valid until the next run,
 * commit or free. Returns 1 and fills *v when the last run was evaluated
 * relative to the base (a one-op change with the base's queue policy) and
 * not yet committed, else 0 (*v untouched). */
typedef struct ss_delta_view {
    const struct ss_taskgraph *base_tg, *tg;
    const struct ss_engine_result *base, *cur; /* schedules (cur: resumed, exact) */
    ss_queue_policy policy;                    /* cur's engine policy */
    const int32_t *map;                        /* [tg->n_tasks] */
    const uint8_t *dirty;                      /* [tg->n_tasks] */
} ss_delta_view;
int ss_delta_view_of(const ss_delta *dl, ss_delta_view *v);

#endif /* SS_DELTA_H */
