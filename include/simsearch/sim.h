/*
 * simsearch/sim.h — simulation of a plan on a machine (simulator/).
 *
 * Part of the public C API. Users include <simsearch.h>, which includes every
 * header under simsearch/ in dependency order; this one also compiles on its own.
 * The conventions are in simsearch.h's opening comment.
 */
#ifndef SIMSEARCH_SIM_H
#define SIMSEARCH_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "simsearch/cost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Simulation (simulator/sim.c, build.c, memory.c, report.c)           */
/* ------------------------------------------------------------------ */

/* A reusable simulator for one (graph, machine, cost model). ss_sim_run turns
 * a plan into a task graph (forward/backward tasks per tile, transfers,
 * partial-sum and gradient collectives, updates), runs the event engine and
 * sweeps per-device memory with liveness. The simulator keeps its task-graph
 * arena and scratch between runs, so the search can call ss_sim_run
 * thousands of times per second without allocating once the arrays have
 * grown. docs/simulator.md states the model and its formulas. */

/* Which evaluator judges a plan (docs/simulator.md, "Evaluators").
 * FULL: the full task-graph simulation, the oracle.
 * SYMMETRY: one representative per class of identical devices,
 *   bit-identical to FULL ("Symmetry"); SS_ERR_INVALID naming the reason
 *   when the plan is not symmetric.
 * HIER: collapsed repeated blocks and a stage-level pipeline
 *   ("Hierarchical evaluator"): within 0.5% of FULL on 1F1B Megatron plans,
 *   no timeline (no trace, no critical path); SS_ERR_INVALID naming the
 *   reason when the plan is not of its form.
 * AUTO: HIER for plans of at least SS_EVAL_HIER_TILES tile entries when it
 *   applies and the config does not ask for an exact evaluator, else
 *   SYMMETRY for plans of at least SS_EVAL_SYM_TILES tile entries when the
 *   plan is symmetric, else FULL. (Below those sizes the memoized full
 *   simulation is as fast: FlexFlow's models in a search.) */
#define SS_EVAL_HIER_TILES (1 << 20)
#define SS_EVAL_SYM_TILES (1 << 16)
typedef enum ss_evaluator { SS_EVAL_AUTO = 0, SS_EVAL_FULL, SS_EVAL_SYMMETRY, SS_EVAL_HIER } ss_evaluator;
/* "auto", "full", "symmetry", "hierarchical". */
const char *ss_evaluator_name(ss_evaluator e);
/* Parse one of those names (also "hier"); 0 ok, -1 unknown. */
int ss_evaluator_parse(const char *s, ss_evaluator *out);

typedef struct ss_sim_config {
    double mem_fraction; /* usable share of each device's memory (0 = 1.0) */
    ss_evaluator evaluator; /* SS_EVAL_AUTO (0) by default */
    int skip_memory;     /* 1: skip the liveness sweep (peaks = static memory only) */
    int exact;           /* 1: AUTO picks only exact evaluators (SYMMETRY, FULL): a trace
                            or a critical path is wanted */
    int one_shot;        /* 1: the simulator judges one plan (simsearch simulate): nothing
                            is kept for a next run (no memoization, every work array freed
                            as soon as it has served), for the smallest peak memory on big
                            plans. Same numbers; later runs work, only slower */
    /* Optional: polled while a run builds its task graph and simulates it
     * (every few thousand tasks); nonzero stops the run, which returns
     * SS_ERR_INTERRUPTED with the result unchanged (Ctrl-C on a big plan). */
    int (*stop)(void *ctx);
    void *stop_ctx;
    /* Collectives' bus-bandwidth efficiency is a property of the machine's
     * links (ss_link.coll_eff, coll_half_bytes), read from the topology. */
} ss_sim_config;

/* One line of the critical-path summary: the time that tasks of one op and
 * kind account for on the path. */
typedef struct ss_sim_crit {
    char name[SS_NAME_MAX]; /* op name, or "gradients" / "(other)" */
    char kind[16];          /* ss_task_kind name: "fwd", "bwd", "update", "xfer", "collective", "other" */
    int n_tasks;            /* tasks of this entry on the path */
    double us;              /* their summed duration on the path */
} ss_sim_crit;

/* Result of one simulation. Zero-initialise before the first use; the
 * per-device arrays (n_devices entries each) are owned by the result, reused
 * by later runs into the same result and freed by ss_sim_result_clear. */
typedef struct ss_sim_result {
    char model[SS_NAME_MAX];
    char topology[SS_NAME_MAX];
    int n_devices;
    int64_t batch;
    int64_t n_tasks;
    double iteration_us;
    double throughput;          /* samples per second: batch / iteration time */
    double critical_path_us;    /* summed duration of the tasks on the critical path */
    double *compute_us;         /* per device: compute-stream busy time */
    double *comm_us;            /* per device: time its transfers/collectives run (engine's rule) */
    double *exposed_comm_us;    /* per device: part of comm_us while its compute stream idles */
    double *idle_us;            /* per device: iteration_us - compute_us */
    double *peak_memory_bytes;  /* per device: peak over the iteration */
    double *static_memory_bytes;/* per device: weights + gradients + optimizer state */
    double *weight_bytes;       /* per device: weights alone */
    double *capacity_bytes;     /* per device: mem_gib * 2^30 * mem_fraction */
    int fits;                   /* 1 if every peak <= its capacity */
    int overflow_device;        /* first (lowest id) device over capacity, -1 if fits */
    double overflow_bytes;      /* its peak - capacity (0 if fits) */
    int n_crit;                 /* critical-path summary, largest time first */
    ss_sim_crit crit[SS_SIM_CRIT_MAX];
    char evaluator[16];         /* "full", "symmetry" or "hierarchical" */
    int64_t tasks_simulated;    /* tasks the evaluator simulated (n_tasks for "full") */
    int symmetry_classes;       /* device classes simulated, one representative each
                                   (n_devices for "full") */
    double eval_ms;             /* wall time of the evaluation */
    int cap_devices;            /* private: allocated array entries */
} ss_sim_result;

typedef struct ss_sim ss_sim;

/* New simulator for graph g on machine m priced by cm (all borrowed: they
 * must outlive the simulator and not change meanwhile). cfg may be NULL
 * (defaults). On error *out is NULL. */
ss_status ss_sim_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                     const ss_sim_config *cfg, ss_sim **out, ss_diag *d);
void ss_sim_free(ss_sim *s);

/* Simulate one training iteration of plan p (made for the simulator's graph
 * and machine; run checks tile counts and device ids, full validation is
 * ss_plan_validate). A plan that does not fit in memory is still SS_OK with
 * r->fits = 0. On error *r is unchanged. Deterministic: the same plan gives
 * bit-identical results. */
ss_status ss_sim_run(ss_sim *s, const ss_plan *p, ss_sim_result *r, ss_diag *d);

/* ss_sim_run with a cutoff, for searches that only need to know whether a
 * plan beats a threshold. With cutoff_us < HUGE_VAL, *load_us is set to a
 * lower bound of the iteration time: first the largest total duration of
 * the tasks on any one resource (device stream or link channel) of p's
 * task graph, and when the run stops early, the bound that stopped it. The
 * run stops (SS_OK, *r unchanged, *load_us > cutoff_us, the simulator holds
 * no run: ss_sim_write_trace and ss_sim_n_tasks see none) after building
 * the task graph when that load exceeds cutoff_us, or during the event
 * simulation as soon as some resource's remaining work proves the
 * iteration ends after cutoff_us (CUTTING in simulator/engine.h).
 * Otherwise it is exactly ss_sim_run (*load_us <= cutoff_us): a plan whose
 * iteration time is at most cutoff_us is never stopped. cutoff_us =
 * HUGE_VAL: ss_sim_run, *load_us = 0. On error *r is unchanged. */
ss_status ss_sim_run_within(ss_sim *s, const ss_plan *p, double cutoff_us, ss_sim_result *r,
                            double *load_us, ss_diag *d);

/* Judge again after a change (a search's move): ss_sim_run_within, with
 * the same result bit for bit, for a plan p that equals s's BASE (the plan
 * of the run last marked by ss_sim_commit) except for op `changed`'s config
 * (changed >= 0), or only in its settings (SS_SIM_SETTINGS), or in anything
 * (-1: then exactly ss_sim_run_within). Cheaper: the plan's analysis is
 * brought up to date for the ops that differ from the last run's plan only,
 * and the evaluators re-use what they memoized (blocks, stages). Without a
 * base (no commit since the last ss_sim_run_within, or a failed run) it is
 * ss_sim_run_within. The caller keeps the promise about p; a broken promise
 * gives wrong results. */
#define SS_SIM_SETTINGS (-2)
ss_status ss_sim_rerun_within(ss_sim *s, const ss_plan *p, int changed, double cutoff_us,
                              ss_sim_result *r, double *load_us, ss_diag *d);
/* The plan of s's last run (by ss_sim_run_within or ss_sim_rerun_within,
 * judged or cut) becomes the base of ss_sim_rerun_within. */
void ss_sim_commit(ss_sim *s);
/* Forget the base (the caller's idea of it changed without a run: a search
 * restoring an earlier plan); the next ss_sim_rerun_within judges afresh. */
void ss_sim_forget_base(ss_sim *s);

/* Replace the stop callback of s's config (NULL: runs cannot be stopped). */
void ss_sim_set_stop(ss_sim *s, int (*stop)(void *ctx), void *ctx);

/* Free a result's arrays and zero it (NULL is a no-op). */
void ss_sim_result_clear(ss_sim_result *r);
/* Deep copy src into dst (dst's arrays reused when large enough). On error
 * dst is unchanged. */
ss_status ss_sim_result_copy(ss_sim_result *dst, const ss_sim_result *src, ss_diag *d);

/* Number of tasks of the last run's task graph (0 before the first run). */
int64_t ss_sim_n_tasks(const ss_sim *s);
/* Whether evaluator e (FULL, SYMMETRY or HIER, not AUTO) can judge p, as
 * far as p alone shows, without simulating: 1 yes; 0 no, with the reason
 * in why (n bytes: which condition of the evaluator's form p misses); -1
 * on error (d set). A yes is necessary, not sufficient: ss_sim_run_within
 * with that evaluator may still refuse for what only its simulation shows
 * (docs/simulator.md, "Evaluators"). Asking the evaluator whose result s
 * holds forgets that result (ss_sim_write_trace, ss_sim_path_ops and
 * ss_sim_n_tasks then see no run). */
int ss_sim_accepts(ss_sim *s, ss_evaluator e, const ss_plan *p, char *why, size_t n,
                   ss_diag *d);
/* Estimated tasks evaluator e (not AUTO) would simulate to judge p: p's
 * tile entries scaled by what the evaluator's earlier runs on s simulated
 * per tile entry (an estimate for choosing, never a bound); -1 for AUTO. */
double ss_sim_cost(ss_sim *s, ss_evaluator e, const ss_plan *p);

/* Where the last run's critical path spends its time, per op: op_us[i]
 * (ss_graph_n_ops entries) = the summed duration of the path's tasks that
 * belong to op i (its forward, backward and update tasks, the transfers and
 * partial-sum collectives built for it, and the gradient collectives of the
 * weights it is the first reader of). The path is the engine's chain of
 * blockers from the last task to end (dependency or resource waits), so
 * these are the ops whose change can shorten the iteration. Returns the
 * path's total duration in *total_us (may be NULL). SS_ERR_INVALID if the
 * simulator holds no run; SS_ERR_NOMEM. On error op_us is unchanged. */
ss_status ss_sim_path_ops(ss_sim *s, double *op_us, double *total_us, ss_diag *d);

/* Write the last run as Chrome Trace Event JSON (opens in Perfetto):
 * one process per device, tasks named after operators. */
ss_status ss_sim_write_trace(const ss_sim *s, const char *path, ss_diag *d);

/* The result as the simulate JSON object (docs/simulator.md): model,
 * topology, devices, batch, iteration_time_ms, throughput_samples_per_s,
 * peak_memory_bytes[], memory_capacity_bytes[], fits, overflow, breakdown,
 * critical_path, tasks, plan (the label given, may be NULL). *out is an
 * ss_malloc'd string the caller ss_frees. */
ss_status ss_sim_result_to_json(const ss_sim_result *r, const char *plan_label, char **out,
                                ss_diag *d);

#ifdef __cplusplus
}
#endif
#endif /* SIMSEARCH_SIM_H */
