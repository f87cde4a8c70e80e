/*
 * stages.h — the pipeline cut: a dynamic program over the layer sequence
 * (level 2 of the planner, after the sharding ILP has priced each layer).
 *
 * Layers 0..n-1 (in graph order) go to S pipeline stages, each a
 * contiguous, non-empty run; stages may be uneven. Per micro-batch, layer i
 * takes time_us[i] (forward + backward on its stage's devices) and, when it
 * ends a stage s < S-1, send_us[i] more (its output to the next stage and
 * the gradient back). A stage's time t_s is the sum, plus stage_us. With M micro-batches,
 * the 1F1B iteration estimate is
 *     T = sum_s t_s + (M - 1) * max_s t_s
 * (every micro-batch passes each stage once; the slowest stage paces the
 * steady state; the bubble is the (S-1) extra stage times in the sum).
 * Memory of stage s per device: sum of static_bytes (weights, gradients,
 * optimizer state) over its layers + min(M, S - s) in-flight micro-batches
 * times the sum of act_bytes (1F1B keeps S - s micro-batches' activations on
 * stage s); it must not exceed mem_limit (a hard constraint).
 *
 * The DP fixes a bound B on max_s t_s, taken in increasing order from the
 * distinct stage times of all intervals, and minimises sum_s t_s under t_s
 * <= B and the memory constraint (O(S n^2) per bound); the first bounds
 * whose (M - 1) B plus the least possible sum exceeds the best T found stop
 * the scan. The result is the exact minimum of T over all cuts.
 */
#ifndef SS_SEARCH_STAGES_H
#define SS_SEARCH_STAGES_H

#include "simsearch.h"

typedef struct ss_stage_problem {
    int n_layers;
    const double *time_us;      /* per layer, per micro-batch */
    const double *send_us;      /* per layer: when it ends a stage (NULL: 0) */
    const double *static_bytes; /* per layer, per device (NULL: 0) */
    const double *act_bytes;    /* per layer, per micro-batch in flight (NULL: 0) */
    double stage_us;            /* added to every stage's time per micro-batch (the
                                   framework's work per micro-batch and device,
                                   ss_device_type.mb_overhead_us) */
    int stages;                 /* S >= 1, <= n_layers */
    int microbatches;           /* M >= 1 */
    double mem_limit;           /* bytes per device (<= 0: none) */
} ss_stage_problem;

/* The iteration estimate T of the cut first[0..S] (first[s] = first layer
 * of stage s, first[0] = 0, first[S] = n), and in *peak_bytes (may be NULL)
 * the largest stage memory. */
double ss_stage_estimate(const ss_stage_problem *p, const int *first, double *peak_bytes);

/* Best cut: first[] (S + 1 entries, caller's) and *t_us its T. Errors:
 * SS_ERR_INVALID (S outside [1, n], M < 1, missing times), SS_ERR_INFEASIBLE
 * (no cut fits the memory limit), SS_ERR_NOMEM; first is then unchanged. */
ss_status ss_stage_solve(const ss_stage_problem *p, int *first, double *t_us, ss_diag *d);

#endif /* SS_SEARCH_STAGES_H */
