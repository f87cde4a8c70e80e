/*
 * llm.h — the LLM planner over Megatron-LM's knobs (docs/search.md, "LLM
 * planner"), judged by the simulator's fast evaluators (search/grid.h).
 *
 * The deadline and the stop callback are polled inside every simulation;
 * the deadline applies once level 0 has its plan (so a time limit always
 * returns a plan that fits when one of the rules does), less a reserve of
 * 2.5 times level 0's wall time: what the caller still does after the
 * search (generate and simulate the best and the rule plan once more,
 * write them) costs about two of level 0's plan-and-simulation, and
 * measuring it on the wall clock scales it with the machine's load, so
 * that a short limit holds for the whole process on a loaded machine.
 * Level 0 (rules): tp = the largest power of two up to a host's devices
 *   (at most 8) that the model's heads allow, the smallest pp (a divisor of
 *   the layers) whose weights, gradients and sharded optimizer state (16
 *   bytes per parameter of mixed precision Adam, the 12 of the optimizer
 *   over dp) take at most 35% of a device's memory, micro-batch size 1,
 *   selective recompute, sp, distopt (bulk sync when the fast evaluator
 *   refuses overlapped sync with distopt); the next pp (then full
 *   recompute, then smaller tp) until the simulator says the plan fits;
 *   without a pipeline, ZeRO-3 (distopt 3) where only its states (16 bytes
 *   per parameter over tp dp, at most 60% of the memory) fit.
 * Level 1: + the level-0 structure's settings (recompute, distopt, sync)
 *   and micro-batch sizes 1, 2, 4, the best fitting kept.
 * Level 2: + the ILP / stage-DP planner (search/level2.h), run after level 3
 *   within a share of the time left (level2_share), its plan judged as level 2 judges its
 *   finalists (the hierarchical evaluator past 64 devices, a plan it refuses
 *   not judged; AUTO below). Its plan need not be Megatron-shaped, so it
 *   does not seed level 3: it is returned beside the Megatron best
 *   (level2_plan) and the caller keeps the faster of the two. An ILP or the
 *   level's time limit that cut it makes the result time-dependent
 *   (level2_time_dependent).
 * Level 3: + a mesh sweep (every tp, pp with tp a power of two up to a
 *   host's devices (<= 8), pp whose states take at most 35%
 *   of the memory, or without a pipeline ZeRO-3 where only its states,
 *   16 bytes per parameter over tp dp, take at most 60%; then, for the two best,
 *   micro-batch size 1, 2, vp 1-4, selective or no recompute, distopt
 *   on or off, ZeRO-3 where pp = 1) and a polish of its best;
 *   then a per-stage recompute fit (for the best, the next 2 structures of
 *   the near list and the 3 fastest points that did not fit: the fewest first
 *   pipeline ranks on the mode that saves more memory, the rest on the
 *   other, by binary search) and a polish; then Metropolis-Hastings over the
 *   knobs (tp, pp and dp together,
 *   micro-batch size, vp, recompute, one rank's recompute (it takes its
 *   neighbour's mode), sp, the ZeRO stage (distopt 0, 1, 3:
 *   ZeRO-3 is judged below SS_EVAL_HIER_TILES tile entries only, by the
 *   exact symmetry evaluator: the hierarchical one refuses it), sync, bucket size, uneven
 *   first / last stages), one chain per thread from the level-1 plan, seeds
 *   (seed, chain), the budget split evenly; then a deterministic polish:
 *   every one-knob neighbour of the best until none is faster. Every move
 *   acts on all copies of the repeated layer (the plan stays Megatron-shaped)
 *   so the hierarchical evaluator keeps applying; plans it refuses are
 *   skipped. Judged points are cached per chain. Same seed, budget and
 *   threads: the same plan (unless the time limit cut the run).
 */
#ifndef SS_SEARCH_LLM_H
#define SS_SEARCH_LLM_H

#include "search/grid.h"
#include "search/level2.h"

typedef struct ss_llm_config {
    int level;            /* 0..3 */
    int64_t budget;       /* level-3 proposals in all (0: 100) */
    double deadline;      /* CLOCK_MONOTONIC seconds (0: none) */
    uint64_t seed;
    int threads;          /* 0: all cores */
    double band;          /* near band (0: 0.08) */
    int (*stop)(void *ctx);
    void *stop_ctx;
    void (*progress)(void *ctx, int64_t proposals, double best_us, double elapsed_s);
    double progress_every_s;
    void (*first_plan)(void *ctx, const ss_plan *p); /* level 0's plan, once (may be NULL) */
    double level2_share;  /* share of the time left that level 2 may take (0: 0.8) */
} ss_llm_config;

typedef struct ss_llm_result {
    int found;
    ss_llm_point best, rule; /* the best plan; the level-0 plan */
    int n_near;
    ss_llm_point near[SS_LLM_NEAR_MAX];
    double first_plan_s;     /* seconds to the level-0 plan */
    int64_t proposals, evaluations, cached, infeasible;
    double time_s;
    int time_cut, interrupted;
    ss_llm_judge *judge;     /* chain 0's judge, kept for ss_llm_judge_take_sim (the
                                caller frees it with ss_llm_judge_free) */
    /* level 2 (level >= 2): run = 1 when it was called; plan (owned: the
     * caller frees it with ss_plan_free) NULL when it found none that fits or
     * was skipped (why: note); us its judged iteration time (HUGE_VAL: none) */
    int level2_run, level2_time_dependent;
    ss_plan *level2_plan;
    double level2_us;
    ss_level2_report level2;
    char level2_note[160];
} ss_llm_result;

/* Plan g on m. SS_OK with found = 0 when no Megatron plan fits (or the limit
 * came first); level 2's plan may still be returned then. SS_ERR_UNSUPPORTED
 * when g has no repeated layers. */
ss_status ss_llm_search(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                        const ss_llm_config *cfg, ss_llm_result *r, ss_diag *d);

#endif /* SS_SEARCH_LLM_H */
