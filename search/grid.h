/*
 * grid.h — the LLM plan space in Megatron-LM's terms and its two searches:
 * the exhaustive Megatron grid (the baseline, --baseline megatron-grid) and
 * the evaluator both it and the knob search (search/llm.h) judge with.
 *
 * A point is an ss_megatron_config: tp, pp, dp, micro-batch size, vp,
 * recompute, sp, distopt, sync, and (outside the grid) uneven first/last
 * stages and the gradient bucket size. A point is judged by ss_sim_run on a
 * Megatron plan (the default evaluator AUTO: the hierarchical one at scale).
 * Plans are generated once per structure (tp, pp, dp, mbs, vp, sp, first,
 * last) and reused for every setting (recompute, distopt, sync, bucket),
 * which only changes the plan's settings: such a point is judged again
 * (ss_sim_rerun_within, SS_SIM_SETTINGS) by the simulator that judged the
 * structure's last point, whose memoized sub-problems it re-uses.
 *
 * Grid: tp in the powers of two up to the devices of one host, pp in the
 * divisors of the layers, dp = devices / (tp pp) dividing the batch, mbs in
 * 1, 2, 4, 8 (at least pp micro-batches when pp > 1), vp in 1..4 (pp > 1,
 * layers divisible by pp vp, micro-batches a multiple of pp), recompute
 * none / selective / full, sp (tp > 1), distopt (dp > 1), sync overlap /
 * bulk. Pruned only by memory, never by time estimates: (1) a static bound
 * (16-bit weights alone of params / (tp pp) over a device's memory); (2)
 * dominance: within a structure the settings are tried from the least
 * memory (full recompute, distopt) up, and a setting that does not fit
 * rules out those that need more memory (less recompute, no distopt; sync
 * does not change memory), and a structure whose leanest setting does not
 * fit rules out its larger micro-batch sizes. Points are judged with a
 * cutoff of (1 + band) x the best so far (ss_sim_run_within): a point cut
 * is provably outside the band, so the best point and every point within
 * the band are exact whatever the order — the result does not depend on
 * the thread count. Invariant: results are a pure function of graph,
 * machine, costs and config unless the time limit or the stop callback
 * cut the run (time_cut / interrupted).
 */
#ifndef SS_SEARCH_GRID_H
#define SS_SEARCH_GRID_H

#include "simsearch.h"

#define SS_LLM_NEAR_MAX 8

typedef struct ss_llm_point {
    ss_megatron_config c;
    double time_us;    /* iteration time (HUGE_VAL: not judged or cut) */
    double peak_bytes; /* largest device peak */
    int fits;
} ss_llm_point;

/* The facts of a model and machine the LLM space is built from. */
typedef struct ss_llm_shape {
    int devices;       /* devices plans use */
    int per_host;      /* devices of the first host (tp at most this) */
    int layers;        /* ss_plan_layers (0: not an LLM of repeated layers) */
    int64_t batch;
    double params;     /* trainable parameters */
    double mem_bytes;  /* capacity of device 0 */
    double max_mem_bytes; /* the largest device capacity */
    double state_bytes[3]; /* a lower bound of bytes per parameter: weight, gradient,
                              optimizer (simulator/memory.h's rule; 1-byte weights
                              assumed outside mixed precision) */
    double peak_flops; /* device 0's peak for the model's dtype, FLOP/s */
    double model_flops;/* per iteration: 3 x forward FLOPs */
    int64_t seq;       /* tokens per sample (0: no [batch, seq] input) */
} ss_llm_shape;

void ss_llm_shape_of(const ss_graph *g, const ss_machine *m, ss_llm_shape *s);

/* A judge of points for one thread: its own simulator (and a cost model
 * that asks the shared one under a lock, so threads may share providers). */
typedef struct ss_llm_judge ss_llm_judge;

/* stop: polled by the simulator while it runs (nonzero stops the run:
 * SS_ERR_INTERRUPTED); may be NULL. shared = 1 when judges of several
 * threads use cm at once (each then asks it through a lock) and m too (a
 * machine past 256 devices is then copied: its route cache fills on
 * demand); shared = 2: cm as for 1, but m used as it is (one judge of the
 * threads may: the others have copies). */
ss_status ss_llm_judge_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                           int shared, int (*stop)(void *ctx), void *stop_ctx,
                           ss_llm_judge **out, ss_diag *d);
void ss_llm_judge_free(ss_llm_judge *j);
/* Take over the simulator j judges plans of p's size with (its memoized
 * sub-problems make p's run cheap; AUTO picks the same evaluator for p),
 * its stop callback removed; j cannot judge such plans afterwards. NULL when
 * taken before, after a run of j was stopped, or when j was made with shared > 0 (its simulators use a cost
 * model and machine copy that die with j). The caller frees it. */
ss_sim *ss_llm_judge_take_sim(ss_llm_judge *j, const ss_plan *p);
/* When the last run of j's hierarchical simulator (the one
 * ss_llm_judge_take_sim hands on) was the whole simulation of c: its result
 * copied into out, *had = 1; else *had = 0 and out untouched. Errors: NOMEM
 * (out unchanged). */
ss_status ss_llm_judge_last(const ss_llm_judge *j, const ss_megatron_config *c,
                            ss_sim_result *out, int *had, ss_diag *d);
/* The plan j holds when it is c's structure, with c's settings set
 * (borrowed: valid until j judges again or is freed); NULL otherwise. */
const ss_plan *ss_llm_judge_plan(ss_llm_judge *j, const ss_megatron_config *c);
/* The plan of c when it is the plan j holds (the structure j judged last),
 * with c's settings set, handed to the caller (who frees it); j generates
 * it again when needed. NULL otherwise. Saves generating a big plan twice. */
ss_plan *ss_llm_judge_take_plan(ss_llm_judge *j, const ss_megatron_config *c);
/* Judge c with cutoff_us (HUGE_VAL: none): out->time_us is the iteration
 * time, or HUGE_VAL when cut (the plan is provably slower than cutoff_us);
 * fits and peak_bytes as ss_sim_run gives them (peak 0 when cut). A config
 * the generator refuses: SS_ERR_INVALID. */
ss_status ss_llm_judge_point(ss_llm_judge *j, const ss_megatron_config *c, double cutoff_us,
                             ss_llm_point *out, ss_diag *d);
/* The plan of c (new, the caller frees). */
ss_status ss_llm_plan(const ss_graph *g, const ss_machine *m, const ss_megatron_config *c,
                      ss_plan **out, ss_diag *d);
/* A lower bound of the largest device's static memory (weights, gradients,
 * optimizer state) in a Megatron plan of c: every data-parallel replica
 * (tp pp devices) holds every parameter at least once, so some device holds
 * (weight + gradient) x params / (tp pp), and without distopt the whole
 * optimizer state of those (with distopt its share is not bounded here: a
 * shard tied across stages splits it over more devices). With distopt 3
 * (ZeRO-3) each parameter's weight, gradient and state sum to one full
 * set over its holders, so the largest device holds at least the mean,
 * params x (weight + gradient + state) / (tp pp dp cp). */
double ss_llm_static_bytes(const ss_llm_shape *s, const ss_megatron_config *c);
/* Static memory bound: 1 when ss_llm_static_bytes exceeds the largest
 * device capacity (the point cannot fit: the simulator would say so), else
 * 0. */
int ss_llm_static_overflow(const ss_llm_shape *s, const ss_megatron_config *c);

typedef struct ss_grid_config {
    double time_limit_s;  /* 0: none */
    int threads;          /* 0: all cores */
    double band;          /* near-best band (0: 0.08) */
    int (*stop)(void *ctx);
    void *stop_ctx;
    int fresh;            /* 1: every point judged by a judge of its own (its plan
                             generated, its simulator new): nothing memoized across
                             points; the same result, slower (for tests) */
} ss_grid_config;

typedef struct ss_grid_result {
    int found;            /* a fitting point was judged */
    ss_llm_point best;
    int n_near;           /* distinct fitting points within the band, best first */
    ss_llm_point near[SS_LLM_NEAR_MAX];
    int64_t points;       /* points of the grid */
    int64_t judged;       /* simulated (cut ones included) */
    int64_t mem_pruned;   /* ruled out by memory without simulating */
    int64_t no_fit;       /* simulated and over memory */
    int64_t cut;          /* simulated and cut (outside the band) */
    int64_t refused;      /* points the fast evaluator refused, and those of structures
                             the generator refused (a structure's count at once) */
    double time_s;        /* wall seconds */
    int time_cut, interrupted;
} ss_grid_result;

/* The exhaustive Megatron grid of g on m (see above). SS_OK with found = 0
 * when no point fits (or the limit came first). */
ss_status ss_grid_run(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                      const ss_grid_config *cfg, ss_grid_result *r, ss_diag *d);

/* Worker threads for a "threads" setting: n > 0 as given (at most 64), 0 the
 * online cores. */
int ss_llm_threads(int n);

/* Insert p into the near list (distinct configs, sorted by time then by
 * spec text, at most SS_LLM_NEAR_MAX, only within (1 + band) of list[0]). */
void ss_llm_near_add(ss_llm_point *list, int *n, const ss_llm_point *p, double band,
                     int64_t batch);

#endif /* SS_SEARCH_GRID_H */
