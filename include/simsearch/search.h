/*
 * simsearch/search.h — plan search (search/driver.c; docs/search.md).
 *
 * Part of the public C API. Users include <simsearch.h>, which includes every
 * header under simsearch/ in dependency order; this one also compiles on its own.
 * The conventions are in simsearch.h's opening comment.
 */
#ifndef SIMSEARCH_SEARCH_H
#define SIMSEARCH_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "simsearch/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Plan search (search/driver.c; docs/search.md)                       */
/* ------------------------------------------------------------------ */

/* Metropolis-Hastings over the SOAP space (every op's degrees over its
 * sample, attribute, parameter and reduction dims, and its device list),
 * judged by the full simulator. Chains start from
 * data parallelism, the expert plan and random plans. Same inputs, seed and
 * budget => the same plan, unless the time limit cut the search
 * (ss_search_result.time_dependent) or it was interrupted. */

typedef struct ss_search_progress {
    int64_t proposals, accepted, evaluations;
    double best_us;          /* best iteration time so far (HUGE_VAL if none fits) */
    double elapsed_s, evals_per_s;
} ss_search_progress;

typedef struct ss_search_config {
    int64_t budget;          /* proposals in all (0: 20000) */
    double time_limit_s;     /* 0: no limit */
    uint64_t seed;
    int random_starts;       /* random start plans besides DP and expert (0: 2, < 0: none) */
    double beta;             /* acceptance sharpness (0: default, see search/mcmc.h) */
    double explore_share;    /* share of budget/time for exploration chains (0: default) */
    int64_t restart_after;   /* proposals without improvement before a restart (0: default) */
    double p_heavy;          /* share of weight moves, weights drawn by bytes (0: default,
                                < 0: none; see search/mcmc.h) */
    double p_path;           /* share of the other moves whose op is drawn by its time on the
                                critical path (0: default, < 0: none; full simulation only) */
    double p_local;          /* share of new configs drawn near the current one (0: default,
                                < 0: none; see search/mcmc.h) */
    double p_class;          /* share of class moves: one config for every op of a structural
                                class (0: default, < 0: none; see search/classes.h) */
    ss_evaluator evaluator;  /* how proposals are judged (SS_EVAL_AUTO: 0, the default) */
    int no_eval_cache;       /* 1: simulate a plan again when the search meets it again
                                (for measurements); 0: decide from the cached evaluation
                                (search/evalcache.h). Same chain, same plan either way */
    /* Optional callbacks (cb_ctx passed to both): stop is polled before
     * every proposal and while a simulation runs (nonzero stops: SIGINT);
     * progress every progress_every_s seconds (0: 0.2 s; the CLI asks 10 s
     * when stderr is not a terminal). */
    int (*stop)(void *cb_ctx);
    void (*progress)(void *cb_ctx, const ss_search_progress *p);
    void *cb_ctx;
    double progress_every_s;
    /* LLM planner only (may be NULL): called once, on the search's thread,
     * with level 0's plan (borrowed for the call) as soon as the simulator
     * says it fits, so a caller can write a plan long before the search
     * ends (a kill -9 or a time limit then still leaves one). */
    void (*first_plan)(void *cb_ctx, const ss_plan *p);
    /* LLM planner (models of repeated layers with attention; docs/search.md,
     * "LLM planner"). level: 0 = the default, the highest level that fits the
     * time limit; SS_SEARCH_LEVEL(0..3) asks for that level. threads: 0 = all
     * online cores; the plan is the same for any thread count. baseline:
     * SS_BASELINE_MEGATRON_GRID also runs the exhaustive Megatron grid
     * (search/grid.h) and reports its best point. */
    int level;
    int threads;
    int baseline;
    /* 1: leave the final plan's gradient-sync settings as the search found
     * them (0: tune them, ss_search_result.sync_tuning) */
    int no_sync_tuning;
} ss_search_config;

#define SS_SEARCH_LEVEL(l) ((l) + 1)
enum { SS_BASELINE_NONE = 0, SS_BASELINE_MEGATRON_GRID = 1 };

/* A baseline plan given by its Megatron spec and its simulation. */
typedef struct ss_search_megatron_grid {
    int run;                 /* 1: the grid ran */
    int fits;                /* a point fits: plan and iteration_us are its best */
    double iteration_us;
    char plan[256];          /* megatron spec of the best point ("" when none fits) */
    int64_t points;          /* points of the grid */
    int64_t points_judged;   /* simulated (the rest ruled out by memory) */
    double time_s;           /* wall seconds */
    double cpu_s;            /* process CPU seconds (all threads) */
    int time_cut;            /* the time limit stopped it before the end */
} ss_search_megatron_grid;

/* What tuning the final plan's gradient-sync settings did (search/tune_sync.h;
 * docs/search.md, "Sync tuning in the search"): the bucket threshold,
 * priority, backward reordering K, synced flags and (LLM planner) the sync
 * mode, chosen by the simulator, kept only when it says they are faster.
 * The LLM planner tunes its finalists (the Megatron best and level 2's
 * plan) and then keeps the faster. */
typedef struct ss_search_sync_tuning {
    int run;                 /* 1: tuned (perhaps cut short); 0: not (note says why) */
    int changed;             /* the plan's settings changed */
    double before_us, after_us; /* the plan's iteration time before and after */
    int evaluations;         /* simulations, all finalists */
    double time_s;           /* wall seconds, all finalists */
    int cut;                 /* the time limit or a stop ended it early */
    int order_tuned;         /* K and synced flags tuned (0: the hierarchical evaluator
                                judges the plan and refuses them; only the full
                                simulation could judge them) */
    int finalists;           /* plans tuned */
    int flipped;             /* the tuning made the other finalist the faster */
    double bucket_bytes;     /* the settings chosen */
    int priority, reorder_k, synced_flags, bulk;
    char evaluator[16];      /* the one that judged the plan */
    char note[192];
} ss_search_sync_tuning;

typedef struct ss_search_near {
    char plan[256];          /* megatron spec */
    double iteration_us;
} ss_search_near;

typedef struct ss_search_result {
    ss_plan *best, *data_parallel, *expert; /* owned by the result */
    ss_sim_result best_sim, dp_sim, expert_sim; /* full simulations of the three */
    char expert_label[128];
    double speedup_vs_dp, speedup_vs_expert; /* baseline time / best time; 0 (JSON null) when
                                                the baseline or the best does not fit */
    int64_t proposals, accepted, evaluations, infeasible, restarts;
    int64_t pruned;          /* proposals rejected by the compute lower bound, unsimulated */
    int64_t cut;             /* proposals rejected after building their task graph, before
                                their simulation ended: a resource's load (at the start,
                                or its remaining work during the simulation) proved the
                                iteration slower than the acceptance threshold */
    int64_t cached;          /* proposals rejected from the cache: the same plan was judged
                                before, and that judgement decides the test */
    double time_s, evals_per_s, best_found_at_s; /* evals_per_s: simulations per second */
    double gain_second_half; /* how much faster the best plan got in the second half of the
                                proposals: best time after the first half / best time - 1
                                (>= 0; 0 when no plan fits); HUGE_VAL when the first plan
                                that fits was found in the second half. Well above 0: the
                                search was still improving, a longer one likely finds better */
    double log10_space;      /* log10 of the number of plans in the space */
    int interrupted;         /* stopped by the stop callback */
    double time_limit_s;     /* the time limit it ran under (0: none) */
    int devices_usable;      /* devices the plans could use: all, or 1 when no two devices
                                of the machine can reach each other (every device is a peer
                                that refuses connections) */
    int time_dependent;      /* 1 if the time limit decided something (stopped the search or
                                ended an exploration chain early): the same seed may then
                                give another plan. 0: a pure function of the inputs, seed
                                and budget (and interrupted = 0) */
    char stopped_by[32];     /* "budget", "time limit", "no improvement", "interrupted" */
    ss_sim *sim;             /* owned: its last run is best_sim (for ss_sim_write_trace) */
    /* LLM planner: level and threads it ran with (level -1: the SOAP search
     * of the other models), when the first fitting plan was had (s), the best
     * plan as a Megatron spec and Megatron-LM flags ("" when it is not
     * expressible in Megatron's terms), MFU = model FLOPs (3 x forward) /
     * (devices x peak FLOP/s of the device type x iteration time), the
     * achieved model TFLOP/s per GPU, tokens/s (batch x sequence / time; 0
     * when the model has no sequence), the grid baseline and the next
     * distinct plans within the simulator's error band (8%). */
    int level, threads;
    double first_plan_s;
    double cpu_s;            /* process CPU seconds of the search (grid excluded) */
    char best_label[256];
    char megatron_args[512];
    double mfu, tflops_per_gpu, tokens_per_s;
    ss_search_megatron_grid grid;
    double speedup_vs_megatron_grid; /* grid best / best (0: the grid found no fitting plan) */
    int n_near;
    ss_search_near near[SS_SEARCH_NEAR_MAX];
    double level2_us;        /* level 2's plan, judged (0: level 2 not run; HUGE_VAL: none) */
    char level2_plan[192];   /* "mesh 8x8, pp 16, 96 micro-batches, ..." or why none ("": not run) */
    ss_search_sync_tuning sync_tuning;
} ss_search_result;

/* Megatron-LM's command-line flags for c (--tensor-model-parallel-size,
 * --pipeline-model-parallel-size, --micro-batch-size, --global-batch-size,
 * --num-layers-per-virtual-pipeline-stage, --recompute-granularity /
 * --recompute-method, --sequence-parallel, --use-distributed-optimizer,
 * --overlap-grad-reduce, --ddp-bucket-size, --decoder-first/last-pipeline-
 * num-layers) for a model of `layers` layers and global batch `batch`.
 * Megatron-LM has one recompute mode for every stage: for a c whose
 * recompute differs per stage, no --recompute-* flag and a closing
 * "(not expressible in Megatron-LM: ...)" that says so. Returns the length
 * snprintf would. */
int ss_megatron_args(const ss_megatron_config *c, int layers, int64_t batch, char *buf,
                     size_t cap);

/* Search a plan for g on m priced by cm. cfg may be NULL (defaults). r must
 * be zero-initialised (or cleared); on success it owns three plans and three
 * simulation results (ss_search_result_clear frees them). An interrupted
 * search is SS_OK with r->interrupted = 1 and the best plan so far. On error
 * r is left cleared. r->sim is the simulator whose last run is the best plan,
 * for ss_sim_write_trace. */
ss_status ss_search_run(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                        const ss_search_config *cfg, ss_search_result *r, ss_diag *d);
void ss_search_result_clear(ss_search_result *r);

/* The result as JSON: {"best": simulate fields, "baselines": {"data_parallel":
 * ..., "expert": ...}, "expert_plan", "speedup_vs_data_parallel",
 * "speedup_vs_expert", "search": {proposals, accepted, evaluations,
 * pruned, cut, infeasible, restarts, time_s, evals_per_s, best_found_at_s, stopped_by,
 * interrupted, time_limit_s, time_dependent, log10_space_size},
 * "sync_tuning": ss_search_sync_tuning's fields (docs/search.md),
 * "plan_file", "trace_file"}: the files written (NULL: none, JSON null).
 * *out is an ss_malloc'd string. */
ss_status ss_search_result_to_json(const ss_search_result *r, const char *plan_file,
                                  const char *trace_file, char **out, ss_diag *d);

#ifdef __cplusplus
}
#endif
#endif /* SIMSEARCH_SEARCH_H */
