/*
 * exec.h — the runtime's executor: train a model under a plan for a few
 * iterations with the real CPU kernels (kernels/kernels.h), each rank
 * running the tiles the plan places on its device, and the communication
 * the plan implies through a small collective interface (ss_rt_comm) that
 * runtime/mpi/comm_mpi.c implements with MPI; the library itself never links
 * MPI (ss_rt_comm_self is the one-process implementation).
 *
 * Invariants of a run (docs/runtime.md has the long form):
 *   - every rank holds a full-size buffer of every tensor and of every float
 *     tensor's gradient; a tile reads its operand regions
 *     (ss_op_input_region) from them and adds its outputs into them, so
 *     partial sums (a split contraction) accumulate;
 *   - an output (or gradient) is made whole across ranks by a sum
 *     all-reduce exactly when some device needs a part of it that its own
 *     tiles did not compute (column-parallel then row-parallel MLP: one
 *     forward all-reduce after the row-parallel linear, one backward
 *     all-reduce before the column-parallel one; data parallelism: only the
 *     weight gradients); replicas (pconfig.rep > 1) contribute once (replica
 *     0) to a summed buffer;
 *   - a softmax cross-entropy whose vocabulary is split combines its
 *     shards' log-sum-exp across ranks (max, then sum all-reduce), as
 *     Megatron-LM's vocabulary-parallel loss does;
 *   - the update is SGD (w -= lr * g) or Adam (ss_rt_config.adam) whatever
 *     the model's optimizer says; synthetic inputs and weights come from a fixed
 *     seed, identical on every rank, so a one-process run of the same model
 *     is the reference.
 */
#ifndef SS_RT_EXEC_H
#define SS_RT_EXEC_H

#include "simsearch.h"

/* Collectives over all ranks, in place. op: 0 sum, 1 max. Every rank calls
 * the same sequence. */
typedef struct ss_rt_comm {
    int rank, size;
    void *ctx;
    ss_status (*allreduce_f32)(void *ctx, float *buf, int64_t n, int op, ss_diag *d);
    ss_status (*allreduce_f64)(void *ctx, double *buf, int64_t n, int op, ss_diag *d);
    ss_status (*barrier)(void *ctx, ss_diag *d);
} ss_rt_comm;

/* The one-process communicator (rank 0 of 1: every collective is a no-op). */
void ss_rt_comm_self(ss_rt_comm *c);

typedef struct ss_rt_config {
    int iterations;  /* measured iterations, >= 1 */
    int warmup;      /* iterations run before them, >= 0 (they train too) */
    double lr;       /* SGD learning rate (> 0) */
    uint64_t seed;   /* inputs and initial weights */
    int adam;        /* 0: SGD (w -= lr g); 1: Adam (beta 0.9, 0.999, eps 1e-8) */
    int trace;       /* 1: record the last iteration's kernels and collectives */
} ss_rt_config;

typedef struct ss_rt_result {
    int n_iter;           /* warmup + iterations */
    double *loss;         /* [n_iter] mean loss of each iteration's forward */
    double *iter_ms;      /* [n_iter] wall time, max over ranks */
    double measured_ms;   /* median of the measured (post-warmup) iterations */
    double compute_ms;    /* this rank's kernels per iteration, wall (median) */
    double compute_cpu_ms;/* the same in thread CPU time (immune to preemption) */
    double comm_ms;       /* this rank's collectives per iteration, wall (median) */
    int64_t allreduces;   /* collectives this rank ran per iteration */
    double allreduce_bytes; /* bytes this rank all-reduced per iteration */
    int my_tiles;         /* tiles of this rank */
} ss_rt_result;

typedef struct ss_rt_state ss_rt_state;

/* Train graph g under plan p (validated for g and a machine of at least
 * comm->size devices; device r runs on rank r; devices >= size are an
 * error) for cfg->warmup + cfg->iterations iterations. On success *out
 * holds the trained state (weights), r the figures (free r with
 * ss_rt_result_clear, *out with ss_rt_free). SS_ERR_UNSUPPORTED when a
 * kernel cannot run a tile (message names the op), SS_ERR_INVALID for
 * plans using devices beyond the ranks. */
ss_status ss_rt_train(const ss_graph *g, const ss_plan *p, const ss_rt_config *cfg,
                      const ss_rt_comm *comm, ss_rt_state **out, ss_rt_result *r, ss_diag *d);
void ss_rt_free(ss_rt_state *s);
void ss_rt_result_clear(ss_rt_result *r);

/* Largest difference between the weights of s (a parallel run) and ref (a
 * one-process run of the same graph), over the weight regions s's rank
 * reads, each relative to the largest magnitude of that weight in ref;
 * *worst names the weight (borrowed from the graph). Local to the rank:
 * the caller takes the maximum over ranks. */
double ss_rt_weight_diff(const ss_rt_state *s, const ss_rt_state *ref, const char **worst);

/* The events of the last iteration of a run with cfg.trace (kernels on
 * thread 0, collectives on thread 1 of process `rank`; microseconds from the
 * iteration's start after its barrier) as Chrome Trace event objects
 * separated by commas, no brackets, so that the ranks' texts concatenate
 * into one array. *out is malloc'd (ss_free); "" when nothing was recorded. */
ss_status ss_rt_trace_events(const ss_rt_state *s, char **out, ss_diag *d);

#endif
