/*
 * stages.h — the pipeline cut: a dynamic program over the layer sequence
 * (level 2 of the planner, after the sharding ILP has priced each layer),
 * with a recomputation mode per stage.
 *
 * Layers 0..n-1 (in graph order) go to S pipeline stages, each a
 * contiguous, non-empty run; stages may be uneven. Each stage runs in one
 * of K modes (the recompute modes: mode r gives layer i the time
 * time_us[r][i] and the activation bytes act_bytes[r][i]). Per micro-batch,
 * layer i takes time_us[r][i] (forward + backward on its stage's devices,
 * under its stage's mode r) and, when it ends a stage s < S-1, send_us[i]
 * more (its output to the next stage and the gradient back). A stage's
 * time t_s is the sum, plus stage_us. With M micro-batches, the 1F1B
 * iteration estimate is
 *     T = sum_s t_s + (M - 1) * max_s t_s
 * (every micro-batch passes each stage once; the slowest stage paces the
 * steady state; the bubble is the (S-1) extra stage times in the sum).
 * Memory of stage s per device: sum of static_bytes (weights, gradients,
 * optimizer state) over its layers + min(M, S - s) in-flight micro-batches
 * times the sum of act_bytes[r] under its mode r (1F1B keeps S - s
 * micro-batches' activations on stage s); it must not exceed mem_limit (a
 * hard constraint, per stage under the stage's own mode).
 *
 * The DP fixes a bound B on max_s t_s, taken in increasing order from the
 * distinct stage times of all intervals under all modes, and minimises
 * sum_s t_s under t_s <= B and the memory constraint, each stage taking
 * the mode of least time that meets both (ties: the lower mode index)
 * (O(K S n^2) per bound); the first bounds whose (M - 1) B plus the least
 * possible sum exceeds the best T found stop the scan. The result is the
 * exact minimum of T over all cuts and all assignments of modes to stages.
 */
#ifndef SS_SEARCH_STAGES_H
#define SS_SEARCH_STAGES_H

#include "simsearch.h"

#define SS_STAGE_MAX_MODES 3 /* the recompute modes: none, full, selective */

typedef struct ss_stage_problem {
    int n_layers;
    int n_modes;                /* K, 1..SS_STAGE_MAX_MODES (0: 1) */
    const double *time_us[SS_STAGE_MAX_MODES];   /* [mode][layer], per micro-batch; the
                                                    first K required */
    const double *act_bytes[SS_STAGE_MAX_MODES]; /* [mode][layer], per micro-batch in
                                                    flight (NULL: 0) */
    const double *send_us;      /* per layer: when it ends a stage (NULL: 0) */
    const double *static_bytes; /* per layer, per device (NULL: 0) */
    double stage_us;            /* added to every stage's time per micro-batch (the
                                   framework's work per micro-batch and device,
                                   ss_device_type.mb_overhead_us) */
    int stages;                 /* S >= 1, <= n_layers */
    int microbatches;           /* M >= 1 */
    double mem_limit;           /* bytes per device (<= 0: none) */
} ss_stage_problem;

/* The iteration estimate T of the cut first[0..S] (first[s] = first layer
 * of stage s, first[0] = 0, first[S] = n) with stage s in mode mode[s]
 * (mode NULL: every stage in mode 0), and in *peak_bytes (may be NULL) the
 * largest stage memory. */
double ss_stage_estimate(const ss_stage_problem *p, const int *first, const int *mode,
                         double *peak_bytes);

/* Best cut and modes: first[] (S + 1 entries, caller's), mode[] (S entries,
 * caller's; may be NULL) and *t_us (may be NULL) its T. Errors:
 * SS_ERR_INVALID (S outside [1, n], M < 1, K outside [1,
 * SS_STAGE_MAX_MODES], missing times), SS_ERR_INFEASIBLE (no cut and modes
 * fit the memory limit), SS_ERR_NOMEM; first and mode are then unchanged. */
ss_status ss_stage_solve(const ss_stage_problem *p, int *first, int *mode, double *t_us,
                         ss_diag *d);

#endif /* SS_SEARCH_STAGES_H */
