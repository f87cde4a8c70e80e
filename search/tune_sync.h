/*
 * tune_sync.h — gradient-sync settings of one plan tuned in the simulator
 * (issue 31): the bucket threshold (fusing below, splitting above it) and
 * the priority of front layers, chosen by simulated iteration time, and the
 * DDP (25 MB), Horovod (64 MB) and no-bucketing defaults for comparison.
 * Invariant: the plan's settings are left as they were unless the caller
 * applies the best point (ss_tune_sync_apply).
 */
#ifndef SS_TUNE_SYNC_H
#define SS_TUNE_SYNC_H

#include "simsearch.h"
#include "simulator/evaluator.h"

/* One point of the search: its settings and simulated iteration time. */
typedef struct ss_tune_sync_point {
    double bucket_bytes; /* 0: one bucket per shard (no bucketing) */
    int priority;        /* front layers first */
    double iteration_us;
} ss_tune_sync_point;

typedef struct ss_tune_sync_result {
    ss_tune_sync_point best, plan, ddp_25mb, horovod_64mb, none;
    int evaluations; /* simulations run */
} ss_tune_sync_result;

/* Tune p's sync settings with simulator s (built for p's graph and
 * machine): a coarse grid of thresholds (powers of two from 1 MiB to
 * 1 GiB, and none) under both priorities, then x1.1 steps (the seed
 * patent's step) around the best threshold between half and twice it.
 * The plan's sync mode is kept. p's settings are restored before return.
 * Errors: the simulator's (SS_ERR_INVALID for a plan it refuses). */
ss_status ss_tune_sync(ss_sim *s, ss_plan *p, ss_tune_sync_result *r, ss_diag *d);

/* Set p's bucket threshold and priority to point x. */
void ss_tune_sync_apply(ss_plan *p, const ss_tune_sync_point *x);

#endif /* SS_TUNE_SYNC_H */
