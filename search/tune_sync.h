/*
 * tune_sync.h — gradient-sync settings of one plan tuned in the simulator
 * (issue 31): the bucket threshold (fusing below, splitting above it), the
 * priority of front layers, the backward reordering's adjustment layer K
 * and the per-layer synced flags, chosen by simulated iteration time, and
 * the DDP (25 MB), Horovod (64 MB) and no-bucketing defaults (priority off,
 * no reordering, no synced flags: a barrier before the next forward) for
 * comparison. Invariant: the plan's settings are left as they were unless
 * the caller applies the best point (ss_tune_sync_apply).
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
    double iteration_us;
} ss_tune_sync_point;

typedef struct ss_tune_sync_result {
    ss_tune_sync_point best, plan, ddp_25mb, horovod_64mb, none;
    int evaluations; /* simulations run */
    int flags_refused; /* synced flags do not apply to the plan (why in flags_why) */
    char flags_why[256];
} ss_tune_sync_result;

/* Tune p's sync settings with simulator s (built for p's graph and
 * machine), coarse to fine: (1) the fixed points; (2) thresholds 2^20 ..
 * 2^30 bytes and none under both priorities, with synced flags when the
 * plan admits them (else without: flags_refused); (3) K = 1, 2, 4, ... up
 * to the number of layers under both priorities at the best threshold;
 * (4) the seed patent's x1.1 steps from half to twice the best threshold.
 * The plan's sync mode is kept. p's settings are restored before return.
 * Errors: the simulator's (SS_ERR_INVALID for a plan it refuses). */
ss_status ss_tune_sync(ss_sim *s, ss_plan *p, ss_tune_sync_result *r, ss_diag *d);

/* Set p's bucket threshold, priority, K and synced flags to point x. */
void ss_tune_sync_apply(ss_plan *p, const ss_tune_sync_point *x);

#endif /* SS_TUNE_SYNC_H */
