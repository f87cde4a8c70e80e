/*
 * mcmc.h — Metropolis–Hastings search over plans (FlexFlow's MCMC).
 *
 * THE CHAIN. The state is a plan; a proposal changes ONE operator's parallel
 * config (a random candidate of the space, or the config of a neighbouring
 * operator when that config is valid for it: aligning producer and consumer
 * removes transfers). In the exploitation chain a share p_local of the
 * random candidates are local: the nearest to the op's current config
 * (degree ratios, devices it did not use) of a few random ones, so late in
 * a search, when the plan is good and most random configs are far worse,
 * more proposals are small steps that can be accepted (the exploration
 * chains keep uniform candidates: they are there to cross to other basins). A group move gives the same config to every op that
 * shares the chosen op's first weight (the unrolled steps of an RNN layer,
 * tied embeddings): only then can a shared weight stop being replicated. A
 * segment move gives it to a chain of ops through the chosen one (along
 * edges with a single consumer, random length): conv -> relu -> pool or
 * fc -> relu -> dropout change together instead of paying transfers between
 * every intermediate state. A weight move (a share p_heavy of proposals)
 * draws a weight with probability proportional to its bytes and makes a
 * group move on it: the big embeddings and projections whose replicated
 * gradients expose communication get most of the attention, not 1 / n_ops
 * each of their ops. A path move (a share p_path of the rest) draws the op
 * with probability proportional to the time the current plan's critical
 * path spends in it: only a change on that chain of dependency and resource
 * waits can shorten the iteration, so late in a search, when most ops are
 * already placed well, the proposals go where the time is. The proposal is
 * judged by an ss_search_judge (a plan ->
 * iteration time and whether it fits in memory); with cost = iteration time,
 *     accept with probability min(1, exp(beta * (cost_old - cost_new) / cost_old))
 * so beta is scale-free (default beta = 250: a plan 1% slower is accepted
 * with probability e^-2.5 = 8%, 0.4% slower with e^-1). The uniform u of the test is drawn before the
 * evaluation, so a lower bound can reject a move without simulating it and
 * the chain stays the same (search/bound.h). Memory is a hard constraint: from a plan that fits, a
 * plan that does not fit is always rejected; from a plan that does not fit
 * (a start that overflows), a plan that fits is always accepted and among
 * plans that do not fit the smaller overflow wins.
 *
 * THE SCHEDULE. Every start plan is evaluated first. Then one chain runs from
 * each start in turn (exploration: explore_share, by default a quarter, of
 * the budget and of the time limit, split evenly, at a twentieth of beta so it
 * can cross worse plans), and the
 * rest of the budget runs a chain from the best plan found so far
 * (exploitation), restarting from the global best whenever the chain has not
 * improved on it for `restart_after` proposals. The search stops when the
 * proposal budget is spent, the time limit passes, the best plan has not
 * improved for `patience` proposals (default: half the budget), or the stop
 * callback says so (SIGINT). Chains run one after another, so a judge
 * with incremental state only ever sees single-op moves
 * from its committed base, or fresh plans at chain starts and restarts.
 *
 * DETERMINISM. Every random choice comes from one xoshiro256** stream seeded
 * by cfg->seed. Same seed, same starts, same budget and no time limit or stop
 * => the same best plan, bit for bit.
 */
#ifndef SS_SEARCH_MCMC_H
#define SS_SEARCH_MCMC_H

#include "simsearch.h"
#include "search/space.h"

/* What a judge says about a plan. */
typedef struct ss_eval {
    double time_us;         /* predicted iteration time (> 0) */
    int fits;               /* 1 if it fits in memory */
    double overflow_bytes;  /* when !fits: how far over capacity (> 0) */
    int beyond;             /* 1: stopped early, time_us > cutoff proven (time_us is the
                               proof's lower bound; fits unknown) */
} ss_eval;

/* The search's judge of plans ("evaluator" is the simulator's word for its
 * own, simulator/evaluator.h). The BASE is the last plan committed.
 * eval(p, changed, cutoff_us): changed >= 0 promises that p equals the base except for op
 * `changed`; changed == -1 means p is arbitrary (chain start, restart).
 * cutoff_us is the acceptance threshold of the move (HUGE_VAL: the exact
 * evaluation is needed): a judge that proves p's time exceeds it may
 * stop early with out->beyond = 1 (the search rejects the move, as the exact
 * evaluation would have: the chain is the same, only cheaper), otherwise it
 * fills *out with beyond = 0. commit makes the plan of the last successful
 * eval the new base (never called after a `beyond` eval; may be NULL for
 * judges without state). An eval returning SS_ERR_INVALID or
 * SS_ERR_INFEASIBLE means "this plan cannot run" (e.g. no route between two
 * devices): the proposal is rejected and the search goes on; any other error
 * stops the search. */
typedef struct ss_search_judge {
    void *ctx;
    ss_status (*eval)(void *ctx, const ss_plan *p, int changed, double cutoff_us, ss_eval *out,
                      ss_diag *d);
    void (*commit)(void *ctx);
    /* Optional: a lower bound (us) of p's iteration time, same `changed`
     * protocol; commit also makes its plan the base. When the bound already
     * exceeds the acceptance threshold the move is rejected without eval
     * (the same decision eval would give: see search/bound.h). */
    ss_status (*bound)(void *ctx, const ss_plan *p, int changed, double *lb, ss_diag *d);
    /* Optional: per op, the time the BASE plan's critical path spends in
     * it (ss_sim_path_ops; n_ops entries, borrowed until the next eval or
     * commit), or NULL when unknown. Path moves draw ops by it. */
    const double *(*path_ops)(void *ctx);
    /* Optional: make p the base again without evaluating it. p is a plan
     * this judge evaluated and had committed earlier, `path` what
     * path_ops said right after that commit (n_ops entries, or NULL), and
     * the search has just called bound(p, -1). Returns 1 if the judge's
     * state is now what eval(p) + commit would have left (the chain goes on
     * as if p had been simulated again), 0 if it cannot restore (the search
     * then evaluates p). Restarts to the best plan use it. */
    int (*restore)(void *ctx, const ss_plan *p, const double *path);
} ss_search_judge;

typedef enum ss_mcmc_stop {
    SS_MCMC_STOP_BUDGET = 0,  /* proposal budget spent */
    SS_MCMC_STOP_TIME,        /* time limit */
    SS_MCMC_STOP_PATIENCE,    /* no improvement for `patience` proposals */
    SS_MCMC_STOP_USER         /* stop callback (SIGINT) */
} ss_mcmc_stop;
const char *ss_mcmc_stop_name(ss_mcmc_stop s); /* "budget", "time limit", ... */

typedef struct ss_mcmc_stats {
    int64_t proposals;     /* single-op moves proposed */
    int64_t accepted;      /* moves accepted (including no-op moves) */
    int64_t evaluations;   /* judge calls (simulations) */
    int64_t pruned;        /* moves rejected by the lower bound, without eval */
    int64_t cut;           /* moves rejected by an eval that stopped early (beyond the
                              acceptance threshold); not counted in evaluations */
    int64_t cached;        /* moves rejected from the cache of earlier evaluations
                              (evalcache.h): the same plan was judged before, and what it
                              said decides the test; not counted in evaluations */
    int64_t infeasible;    /* evaluations that did not fit or could not run */
    int64_t restarts;      /* chain starts + restarts from the best */
    int64_t restored;      /* of those, restarts the judge restored without
                              simulating the best plan again (restore) */
    double time_s;         /* wall time of the search */
    double evals_per_s;    /* evaluations per second */
    double best_us;        /* iteration time of the best plan (HUGE_VAL if none fits) */
    double best_at_s;      /* when the best plan was found */
    int64_t best_at_proposal;
    double best_half_us;   /* iteration time of the best plan after the first half of the
                              proposals (the first proposals / 2; HUGE_VAL if none that
                              fits had been found by then): best_half_us / best_us - 1 is
                              what the second half of the search gained */
    ss_mcmc_stop stopped_by;
    int time_cut;          /* 1 if the clock decided something: the time limit stopped the
                              search or ended an exploration chain before its share of the
                              budget. Only then may the same seed give another plan */
} ss_mcmc_stats;

typedef struct ss_mcmc_config {
    int64_t budget;          /* proposals in all (>= 1) */
    double time_limit_s;     /* 0: no limit */
    uint64_t seed;
    double beta;             /* 0: default 250 */
    int64_t patience;        /* 0: budget / 2; < 0: never */
    int64_t restart_after;   /* 0: budget / 20 clamped to [100, 150] */
    double explore_share;    /* share of budget and time for the exploration chains
                                (< 0: none; 0: default 0.25; at most 1) */
    double p_neighbor;       /* share of neighbour-alignment proposals (< 0: 0; 0: default 0.3) */
    double p_group;          /* share of group moves for ops sharing weights (< 0: 0; 0: 0.5) */
    double p_segment;        /* share of segment moves (< 0: 0; 0: 0.25) */
    double p_class;          /* share of class moves: every op of the op's structural class
                                (classes.h) gets the config (< 0: 0; 0: default, see mcmc.c) */
    double p_heavy;          /* share of weight moves: a weight drawn by its bytes, every op
                                that reads it gets one new config (< 0: 0; 0: 0.5) */
    double p_path;           /* share of the other proposals whose op is drawn by its time on
                                the current plan's critical path (judge's path_ops;
                                < 0: 0; 0: default, see mcmc.c) */
    double p_local;          /* share of the random configs drawn as local moves: the
                                nearest to the current config of a few random candidates
                                (< 0: 0; 0: default, see mcmc.c) */
    int eval_cache;          /* >= 0: remember every evaluation and decide a move to a plan
                                judged before from what it said (evalcache.h); < 0: judge it
                                again. The chain is the same either way, only its time is not */
    /* Optional callbacks (cb_ctx passed to both). stop: polled before every
     * proposal, nonzero stops the search with SS_MCMC_STOP_USER. progress:
     * called about every progress_every_s seconds (0: 0.2 s). */
    int (*stop)(void *cb_ctx);
    void (*progress)(void *cb_ctx, const ss_mcmc_stats *st);
    void *cb_ctx;
    double progress_every_s;
} ss_mcmc_config;

/* Run the search from n_starts >= 1 start plans (plans of the space's graph).
 * On success `best` (a plan of the same graph, overwritten) holds the best
 * plan seen: the fastest that fits, or, if none fits, the one with the
 * smallest overflow; *best_eval its evaluation; *stats the statistics
 * (stats may be NULL). A stop by the user is SS_OK with stopped_by ==
 * SS_MCMC_STOP_USER. Errors: a judge error other than INVALID /
 * INFEASIBLE, every start failing to evaluate, NOMEM; then best is unchanged. */
ss_status ss_mcmc_run(const ss_space *sp, const ss_search_judge *ev, ss_plan *const *starts,
                      int n_starts, const ss_mcmc_config *cfg, ss_plan *best,
                      ss_eval *best_eval, ss_mcmc_stats *stats, ss_diag *d);

/* Current wall clock in seconds (monotonic), for callers timing searches. */
double ss_mcmc_now(void);

#endif /* SS_SEARCH_MCMC_H */
