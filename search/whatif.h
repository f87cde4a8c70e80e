/*
 * whatif.h — what-if capacity planning: a sweep of machines and settings,
 * the planner's best plan at every point (search/whatif.c; docs/search.md,
 * "What-if sweeps").
 *
 * A sweep is a list of scenarios (each a set of changes to a compact
 * topology and to the model: device type swapped, the inter-node NIC scaled
 * together with its PCIe path, the intra-node fabric set, precision, global
 * batch) crossed with a list of node counts. Every point is planned on its
 * own by the public planner entry (ss_search_run, one thread per point, the
 * seed, level, budget and time limit of the sweep), so a point's plan is
 * the plan of the single `simsearch --threads 1` run with the same inputs,
 * whatever the sweep's thread count. Points run in parallel on `threads`
 * workers; results are stored in point order.
 *
 * Transforms (of the topology's "compact" object, before it is expanded):
 *   nodes         compact.nodes
 *   device_type   compact.device_type (a built-in type or one the file declares)
 *   inter_gbps    the NIC line rate in Gb/s (bits: 200 = HDR, 400 = NDR);
 *                 compact.inter.gbps = inter_gbps / 8 (GB/s), and the NIC's
 *                 PCIe attachment (inter.pcie_gbps, default the NIC rate)
 *                 scales by the same factor: a faster NIC on the old PCIe
 *                 link would be capped by it
 *   inter_scale   NIC rate and its PCIe path both multiplied
 *   intra_gbps    compact.intra.gbps = intra_gbps / 8 (GB/s)
 *   precision     the model spec's precision= key (gpt, llama: bf16, fp16, fp8)
 *   batch         the global batch
 * Only compact topologies can be transformed (an explicit one is refused).
 *
 * Invariant: a point that ran to its end is final and never changes; a stop
 * (the stop callback: Ctrl-C) interrupts the points running, which are then
 * reported as not run, and keeps every finished one.
 */
#ifndef SS_SEARCH_WHATIF_H
#define SS_SEARCH_WHATIF_H

#include "simsearch.h"

#define SS_WHATIF_MAX_POINTS 100000

/* One scenario: what differs from the topology file and the model spec. */
typedef struct ss_whatif_scenario {
    char name[64];                 /* "" : named by its changes */
    char device_type[SS_NAME_MAX]; /* "" : the topology's */
    double inter_gbps;             /* Gb/s per NIC; 0: unchanged */
    double inter_scale;            /* factor on NIC and PCIe path; 0: unchanged */
    double intra_gbps;             /* Gb/s per device; 0: unchanged */
    char precision[16];            /* "" : the model's */
    int64_t batch;                 /* 0: the model's default for the device count */
} ss_whatif_scenario;

/* Price of one GPU hour of the device types whose name starts with `type`
 * (case-insensitive; the longest matching key wins). */
typedef struct ss_whatif_price {
    char type[SS_NAME_MAX];
    double usd_per_gpu_hour;
} ss_whatif_price;

typedef struct ss_whatif_progress {
    int done, running, total;      /* points finished, in flight, in all */
    double elapsed_s, eta_s;       /* eta_s < 0: not known yet */
} ss_whatif_progress;

typedef struct ss_whatif_config {
    const char *model;             /* model spec (zoo name[:keys] or a model JSON file) */
    const char *topology;          /* a compact topology file */
    const int *nodes;              /* n_nodes node counts (n_nodes 0: the file's) */
    int n_nodes;
    const ss_whatif_scenario *scenarios; /* n_scenarios (0: one with no change) */
    int n_scenarios;
    int level;                     /* planner level 0..3 (SS_SEARCH_LEVEL), 0: default */
    int64_t budget;                /* proposals per point (0: the planner's default) */
    double time_per_point_s;       /* each point's time limit (0: none) */
    uint64_t seed;
    int threads;                   /* points at once (0: all online cores) */
    double tokens;                 /* tokens to train on (0: no days or cost) */
    const ss_whatif_price *prices; /* n_prices */
    int n_prices;
    /* Optional: stop is polled by every running point (nonzero: stop);
     * progress is called from the calling thread every progress_every_s
     * seconds (0: 1 s) and once at the end. */
    int (*stop)(void *ctx);
    void (*progress)(void *ctx, const ss_whatif_progress *p);
    void *ctx;
    double progress_every_s;
} ss_whatif_config;

typedef enum ss_whatif_state {
    SS_WHATIF_NOT_RUN = 0,  /* stopped before it ended (Ctrl-C) */
    SS_WHATIF_FITS,         /* a plan fits: the figures are its */
    SS_WHATIF_NO_FIT,       /* no plan fits: the least bad plan's shortfall */
    SS_WHATIF_FAILED        /* the point could not be planned: error says why */
} ss_whatif_state;

typedef struct ss_whatif_point {
    int scenario;                  /* index into the scenarios */
    int nodes, gpus;
    char device_type[SS_NAME_MAX];
    double inter_GBps, pcie_GBps, intra_GBps; /* the fabric as planned (GB/s) */
    char precision[16];            /* as planned ("" : the model's default) */
    int64_t batch;                 /* global batch as planned */
    char changes[256];             /* what was changed, in words */
    ss_whatif_state state;
    double iteration_ms, samples_per_s, tokens_per_s, mfu, tflops_per_gpu;
    double peak_mem_bytes, mem_capacity_bytes;
    double shortfall_bytes;        /* NO_FIT: the least bad plan's overflow */
    char plan[256];                /* the Megatron spec of the best plan ("" : none) */
    char megatron_args[512];       /* "" : not expressible in Megatron-LM terms */
    int tp, pp, dp, mbs, vp, sp, distopt; /* from plan (0: unknown) */
    char recompute[64]; /* one mode, or per stage as in the spec (full*2/none*6) */
    double days;                   /* tokens / tokens_per_s (0: no --tokens) */
    double usd_per_gpu_hour;       /* 0: no price */
    double cost_usd;               /* days x 24 x gpus x price (0: no price or days) */
    int level;                     /* the planner level that ran */
    int time_dependent;            /* the time limit decided something */
    double search_cpu_s, wall_s;
    char error[512];               /* FAILED: why */
} ss_whatif_point;

typedef struct ss_whatif_result {
    ss_whatif_point *points;       /* n_points, scenario-major then nodes */
    int n_points;
    int n_done;                    /* points that ended (FITS, NO_FIT, FAILED) */
    int interrupted;               /* the stop callback ended the sweep */
    int threads;                   /* workers used */
    double wall_s, cpu_s;          /* the sweep's wall time; process CPU time */
} ss_whatif_result;

/* Run the sweep. r must be zeroed; on SS_OK it holds every point (those a
 * stop cut short in state NOT_RUN; a point that could not be planned in
 * state FAILED with its reason) and is freed by ss_whatif_result_clear.
 * Errors before any point runs: SS_ERR_INVALID (no model or topology, an
 * explicit topology, unknown device type, a price key that matches no
 * device type of the sweep, too many points), SS_ERR_PARSE / SS_ERR_IO
 * (the topology file), SS_ERR_NOMEM; r is then left cleared. */
ss_status ss_whatif_run(const ss_whatif_config *c, ss_whatif_result *r, ss_diag *d);
void ss_whatif_result_clear(ss_whatif_result *r);

/* Load named scenarios from a JSON file: {"format":
 * "simsearch-whatif-scenarios", "version": 1, "scenarios": [{"name",
 * "device_type", "inter_gbps", "inter_scale", "intra_gbps", "precision",
 * "batch"}, ...]} (every key optional; inter_gbps and inter_scale exclusive;
 * device types as ss_whatif_find_devtype names them). *out (n entries) is
 * ss_malloc'd. Errors name the file and the JSON path. */
ss_status ss_whatif_load_scenarios(const char *path, ss_whatif_scenario **out, int *n,
                                   ss_diag *d);

/* The built-in device type named by `name`: an exact name, or a
 * case-insensitive prefix of exactly one built-in ("H100" -> "H100-SXM").
 * NULL when none or several match (*n_matches says how many). */
const ss_device_type *ss_whatif_find_devtype(const char *name, int *n_matches);

/* The scenario's name as shown: its name, or its changes in short
 * ("H100-SXM, 400 Gb/s"), or "as is". */
const char *ss_whatif_scenario_label(const ss_whatif_scenario *s, char *buf, size_t cap);

/* The CSV columns, comma-separated, in order (docs/search.md documents
 * each); the header line of ss_whatif_write_csv. */
extern const char *const ss_whatif_csv_columns;

/* Write the points as CSV (a header line, then one line per point, RFC
 * 4180 quoting) to path, atomically ("-": standard output). */
ss_status ss_whatif_write_csv(const ss_whatif_config *c, const ss_whatif_result *r,
                              const char *path, ss_diag *d);

/* The sweep as one JSON object: {"format": "simsearch-whatif", "version": 1,
 * "model", "topology", "axes": {"nodes", "scenarios": [...]}, "search":
 * {"level", "budget", "seed", "time_per_point_s", "threads"}, "tokens",
 * "prices", "points": [...], "points_done", "interrupted", "wall_s",
 * "cpu_s"}; *out is ss_malloc'd. */
ss_status ss_whatif_to_json(const ss_whatif_config *c, const ss_whatif_result *r, char **out,
                            ss_diag *d);

#endif
