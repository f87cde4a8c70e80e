/*
 * bound.h — a lower bound on a plan's iteration time, kept incrementally
 * for the MCMC's one-op moves.
 *
 * Every device's compute stream runs the forward and backward tasks of all
 * tiles placed on it one at a time (engine.h, rule 3), so the iteration
 * time is at least the largest per-device sum of those durations (with full
 * recomputation a backward also pays its forward, as the builder charges
 * it). The durations are the builder's: ss_cost_tile of each tile on its
 * device's type. The bound keeps each op's per-device contribution, so a
 * one-op move costs O(tiles of the op + devices).
 *
 * Use in the search: the Metropolis–Hastings test accepts a move iff the new
 * time is at most old * (1 - ln(u) / beta) for a uniform u drawn before the
 * evaluation; if the bound already exceeds that threshold the move is
 * rejected without simulating it. The decision is exactly the one the full
 * evaluation would give, so the chain is the same with or without the bound.
 */
#ifndef SS_SEARCH_BOUND_H
#define SS_SEARCH_BOUND_H

#include "simsearch.h"

typedef struct ss_bound ss_bound;

/* New bound for g on m priced by cm (borrowed). */
ss_status ss_bound_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm, ss_bound **out,
                       ss_diag *d);
void ss_bound_free(ss_bound *b);

/* Lower bound (us) of plan p's iteration time. changed >= 0: p equals the
 * committed base except op `changed`; -1: any plan (full computation). The
 * result is scaled by (1 - 1e-9) so floating-point summation order can never
 * push it above the simulated time. On error the base is unchanged. */
ss_status ss_bound_eval(ss_bound *b, const ss_plan *p, int changed, double *lb, ss_diag *d);

/* Make the plan of the last successful ss_bound_eval the base. */
void ss_bound_commit(ss_bound *b);

#endif /* SS_SEARCH_BOUND_H */
