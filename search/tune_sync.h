/*
 * tune_sync.h — gradient-sync settings of one plan tuned in the simulator
 * (issue 31): the bucket threshold (fusing below, splitting above it), the
 * priority of front layers, the backward reordering's adjustment layer K
 * and the per-layer synced flags, chosen by simulated iteration time, and
 * the DDP (25 MB), Horovod (64 MB) and no-bucketing defaults (priority off,
 * no reordering, no synced flags: a barrier before the next forward) for
 * comparison. `simsearch tune-sync` tunes a plan given by the user; the
 * search (search/driver.c) tunes its finalists with a deadline and, on
 * plans only a fast evaluator can judge in bounded memory, only the
 * settings that evaluator judges. Without a deadline a library call is
 * bounded by a budget of simulations (SS_TUNE_SYNC_POINTS unless the
 * caller sets one): a point of the full evaluator on a big plan takes
 * seconds (a 20B ZeRO-3 plan on 8 GPUs: 66 points, 320 s). Invariant: the plan's settings are left
 * as they were unless the caller applies the best point
 * (ss_tune_sync_apply); a point becomes the best only when the simulator
 * says it is faster (and fits when the best so far fits).
 */
#ifndef SS_TUNE_SYNC_H
#define SS_TUNE_SYNC_H

#include "simsearch.h"
#include "simulator/evaluator.h"

/* One point of the search: its settings and simulated iteration time. */
typedef struct ss_tune_sync_point {
    double bucket_bytes; /* 0: one bucket per shard (no bucketing) */
    int priority;        /* front layers first */
    int reorder_k;       /* adjustment layer K, 0: no backward reordering */
    int synced_flags;    /* the next forward per layer (steady-state period) */
    double iteration_us; /* HUGE_VAL: not judged (skipped or cut) */
    ss_sync_mode sync;   /* overlapped (wait-free) or bulk */
    int fits;            /* the plan fits memory with these settings */
} ss_tune_sync_point;

/* The default budget of simulations of a tuning without a deadline
 * (ss_tune_sync_config.max_points 0): the coarse order (see
 * ss_tune_sync_within) judges 15 points before K, then K = 1, 4, ..., 256. */
#define SS_TUNE_SYNC_POINTS 20

typedef struct ss_tune_sync_result {
    ss_tune_sync_point best, plan, ddp_25mb, horovod_64mb, none; /* the three defaults are
                                                                    not judged (HUGE_VAL)
                                                                    under a budget */
    int evaluations; /* simulations run */
    int budget;      /* the budget of simulations the tuning ran under (0: none) */
    int budget_spent; /* the budget ended the tuning (points left unjudged; deterministic) */
    int skipped;     /* points the config's evaluator refuses: not judged */
    int flags_refused; /* synced flags do not apply to the plan (why in flags_why) */
    char flags_why[256];
    int order_tuned; /* K and synced flags were tuned (0: fast_only) */
    int cut;         /* the deadline or the stop ended the tuning early */
    char evaluator[16]; /* the one that judged the plan's own point */
    double time_s;   /* wall seconds */
} ss_tune_sync_result;

/* How the search tunes (ss_tune_sync_within); zero: as ss_tune_sync. */
typedef struct ss_tune_sync_config {
    double deadline;      /* CLOCK_MONOTONIC seconds (0: none): no point starts past
                             it and a simulation running then is stopped (cut) */
    int (*stop)(void *ctx); /* nonzero: stop likewise (may be NULL) */
    void *stop_ctx;
    ss_evaluator only;    /* not AUTO: a point this evaluator refuses (ss_sim_accepts)
                             is skipped, never judged by another (bounded memory) */
    int fast_only;        /* 1: K and synced flags stay as the plan has them (the
                             hierarchical evaluator refuses them) */
    int try_sync_mode;    /* 1: also the other sync mode (bulk / overlapped) at the
                             best point and at thresholds 4 MiB, 64 MiB and none */
    int bounded;          /* 1: the evaluator that judges the plan's own point bounds
                             the rest: symmetry or hierarchical becomes `only`, and
                             under the hierarchical one fast_only is set */
    int max_points;       /* simulations at most, in the coarse order: > 0 this many;
                             0: SS_TUNE_SYNC_POINTS when there is no deadline, none (the
                             full order, bounded by the deadline) when there is one;
                             < 0: none, the full order (ss_tune_sync) */
} ss_tune_sync_config;

/* Tune p's sync settings with simulator s (built for p's graph and
 * machine), every point of the full order, coarse to fine: (1) the fixed
 * points; (2) thresholds 2^20 .. 2^30 bytes and none under both
 * priorities, with synced flags when the plan admits them (else without:
 * flags_refused); (3) K = 1, 2, 4, ... up to the number of layers under
 * both priorities at the best threshold; (4) the seed patent's x1.1 steps
 * from half to twice the best threshold. No budget (`simsearch
 * tune-sync`). The plan's sync mode is kept. p's settings are restored
 * before return. Errors: the simulator's (SS_ERR_INVALID for a plan it
 * refuses). */
ss_status ss_tune_sync(ss_sim *s, ss_plan *p, ss_tune_sync_result *r, ss_diag *d);

/* ss_tune_sync under c (NULL: all zero, hence the default budget): without
 * a budget (c->max_points, see there), (1)-(4) as there, the settings
 * fast_only keeps left out, then (5) the other sync mode when asked. Under
 * a budget of B simulations, the coarse order, each step from the best
 * point so far, ending after B simulations (budget_spent): the plan's own
 * point; the other priority; synced flags (when the plan admits them);
 * thresholds none, 2^20, 2^22 .. 2^30 bytes; half and twice the best
 * threshold; the other priority and the other flags again; the other sync
 * mode when asked; K = 1, 4, 16, ... up to the
 * number of layers (the DDP / Horovod / no-bucketing points are not
 * judged). fast_only runs its own few points (at most 5) either way. A deadline or
 * stop that comes first is no error: SS_OK with cut = 1 and the best of the
 * points judged (the plan's own when none other was). When c has a deadline
 * or a stop, s's stop callback is replaced during the call and NULL after. The same s, p and c without a
 * cut: the same result. A cut before the plan's own point was judged
 * leaves its iteration_us HUGE_VAL (nothing to compare with: nothing
 * tuned). Errors: as ss_tune_sync. */
ss_status ss_tune_sync_within(ss_sim *s, ss_plan *p, const ss_tune_sync_config *c,
                              ss_tune_sync_result *r, ss_diag *d);

/* Set p's bucket threshold, priority, K, synced flags and sync mode to
 * point x. */
void ss_tune_sync_apply(ss_plan *p, const ss_tune_sync_point *x);

#endif /* SS_TUNE_SYNC_H */
