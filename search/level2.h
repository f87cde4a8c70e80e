/*
 * level2.h — the planner's level 2 (issue 26; DESIGN.md "Device-group
 * factorization + ILP + pipeline stages"): graph + machine + cost model +
 * memory limit -> a plan (ss_plan) that `simsearch simulate` judges.
 *
 * For each pipeline depth pp dividing the device count N (at most the
 * number of layers; those nearest sqrt(nodes) first, so that a time limit
 * cuts the unlikely ones), each mesh of the N/pp devices of a stage
 * (search/mesh.h: axes fitted to the nodes; a node-filling innermost axis
 * first), each micro-batch count M (batch / (D * mbs) for D the devices of
 * the mesh's outer axes or of all of them, mbs 1 or 2 samples, bubble
 * (pp-1)/M <= 1/4) and the ILPs' recomputation none, else selective, else
 * full (the next only when no cut fits with the previous one's shardings):
 *   1. every operator's valid shardings on the mesh (search/mesh.h), priced
 *      from one source: compute per shard by ss_cost_tile (the simulator's
 *      cost model), resharding between a producer's output layout and a
 *      consumer's input layout (both read off the operator table's region
 *      functions, per mesh axis) by the simulator's collective model
 *      (simulator/collective.h: all-reduce of a partial sum, reduce-scatter,
 *      all-gather, all-to-all, and the backward's mirror collectives),
 *      gradient sync over the axes a weight is not split on (reduce-scatter
 *      of the gradients + all-gather of the parameters), memory per device
 *      = weights + gradients + optimizer state (split over the gradient
 *      group: the distributed optimizer the plan uses) + activations of the
 *      micro-batches in flight;
 *   2. one sharding per operator by ILP (search/ilp.h, CBC), solved once for
 *      the repeated block (the transformer layer: the longest run of equal
 *      segments, as core/plan_gen.c finds layers) and aliased to its copies,
 *      then for the prefix and the suffix with the block fixed; the block
 *      ILP has a memory budget of the device's share per layer;
 *   3. the pipeline cut and each stage's recompute mode (none, selective,
 *      full: the plan's per-stage recompute) by the DP of search/stages.h
 *      over the layer sequence (prefix segments, layers, suffix segments),
 *      the layers priced under every mode with the ILPs' shardings, memory
 *      per stage under its own mode a hard constraint;
 * and keeps the configurations with the least estimates (finalists); each
 * finalist's plan is simulated (ss_sim_run, the judge of every plan) and
 * the fastest that fits is returned. A configuration whose compute lower
 * bound cannot beat the last finalist is skipped before its ILPs. The plan:
 * per-operator configs (stage s on devices [s N/pp, (s+1) N/pp)), 1F1B,
 * backward-first queues when pp > 1, the distributed optimizer, bucketed
 * overlapped gradient sync (Megatron's 40M parameter buckets).
 * Deterministic for given inputs unless the time limit or the stop
 * callback cut the search (report.time_limited, report.stopped) or an
 * ILP's limit stopped CBC (ilp_time_limited).
 *
 * Threads (config.threads): the configurations (pp, mesh, micro-batches;
 * the recompute modes of one are tried in order by one thread) are dealt
 * round-robin in the order above; each thread prices its own with its own
 * candidates, collective cache and, past 256 devices, its own copy of the
 * machine (whose route cache fills on demand); cost-model lookups and CBC
 * solves are serialised (search/ilp.h). The finalists are the configurations
 * of least (estimate, configuration index), whatever thread found them and
 * when: a configuration is skipped only when its lower bound exceeds the
 * estimate of the last finalist known, and the estimate of a configuration
 * is never below its bound, so a skipped one could not have been a
 * finalist. The plan is therefore the same for every thread count (only the
 * counts of configurations priced and skipped depend on timing). The
 * finalists' plans are then built on the same threads (all of them held
 * until judged) and simulated on the caller's, best estimate first.
 */
#ifndef SS_SEARCH_LEVEL2_H
#define SS_SEARCH_LEVEL2_H

#include "simsearch.h"

typedef struct ss_level2_config {
    double mem_fraction;     /* usable share of each device's memory (0: 1.0, as simulate) */
    double time_limit_s;     /* whole call (0: none): configurations left are skipped */
    double ilp_time_limit_s; /* per ILP (0: 2 s), besides its node bound */
    int max_axes;            /* mesh axes (0: 2; at most SS_DMESH_MAX_AXES) */
    int pp;                  /* 0: search; > 0: only this pipeline depth */
    int microbatches;        /* 0: search; > 0: only this count */
    const char *mesh;        /* NULL: search; "8x8": only stage meshes of this name */
    int finalists;           /* configurations with the best estimates that are built and
                                simulated, the fastest that fits returned (0: 4, at most 16;
                                < 0: none simulated, the best estimate returned) */
    int threads;             /* threads pricing configurations (<= 1: the caller's alone;
                                at most SS_LEVEL2_MAX_THREADS, and the configurations) */
    int (*stop)(void *ctx);  /* polled before each configuration (NULL: never); nonzero:
                                the configurations left are skipped, as by the time limit */
    void *stop_ctx;
} ss_level2_config;

#define SS_LEVEL2_MAX_THREADS 64

typedef struct ss_level2_report {
    char mesh[32];           /* the stage mesh, "8x8" (outer axis first) */
    int pp, microbatches;
    ss_recompute recompute;  /* every stage's mode when recompute_uniform, else stage 0's */
    int recompute_uniform;   /* 1: one mode for every stage */
    ss_recompute stage_recompute[64]; /* per stage (pp entries when pp <= 64) */
    char recompute_text[96]; /* in words: "no recompute", "selective recompute", "full
                                recompute", or per stage "recompute selective*2/none*6" (the
                                plan spec's per-rank form, stage 0 first) */
    ss_recompute ilp_recompute; /* the mode the ILPs priced the shardings under */
    double estimate_us;      /* the DP's iteration estimate of the plan */
    double simulated_us;     /* its simulated iteration time (0: finalists not simulated) */
    int simulated;           /* finalists simulated */
    int stage_first[65];     /* first DP layer of each stage (pp + 1 entries when pp <= 64) */
    int n_layers;            /* DP layers */
    int configs, skipped;    /* configurations priced; skipped by the bound */
    int ilp_solves;
    double ilp_s, ilp_max_s; /* total and largest ILP time (model, presolve, CBC; not the
                                wait for another thread's CBC solve) */
    double ilp_cbc_s;        /* of ilp_s, in CBC's solves: they run one at a time, so this
                                bounds the wall time of level 2 on any number of threads */
    int ilp_time_limited;    /* ILPs the per-ILP time limit stopped (time-dependent) */
    int ilp_node_limited;    /* ILPs stopped at their node bound (deterministic) */
    double time_s;
    int time_limited;        /* 1: the time limit left configurations unpriced */
    int stopped;             /* 1: the stop callback left configurations unpriced */
    int threads;             /* threads that priced configurations */
    int thread_configs[SS_LEVEL2_MAX_THREADS]; /* configurations each priced (their sum:
                                                  configs; timing-dependent as configs) */
} ss_level2_report;

/* Plan g on m priced by cm (borrowed). cfg may be NULL (defaults), report
 * may be NULL. On success *out is a new plan (ss_plan_validate accepts it)
 * that fits memory when simulated (by its estimate when no finalist was
 * simulated). Errors: SS_ERR_INFEASIBLE (no configuration fits),
 * SS_ERR_UNSUPPORTED (a machine of several device types), SS_ERR_INVALID,
 * SS_ERR_NOMEM; *out is then NULL. */
ss_status ss_level2_plan(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                         const ss_level2_config *cfg, ss_plan **out, ss_level2_report *report,
                         ss_diag *d);

#endif /* SS_SEARCH_LEVEL2_H */
