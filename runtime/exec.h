/*
 * exec.h — the runtime's executor: train a model under a plan for a few
 * iterations with the real kernels (kernels/kernels.h) on the CPU backend
 * (host tensors, ss_rt_comm) or the CUDA backend (device-resident tensors,
 * NCCL, a stream per compute and communication channel:
 * runtime/cuda/plan.h). What is
 * simulated is what runs: every rank builds the task graph the simulator
 * builds (simulator/build.h, the same builder, costs and engine), orders
 * its device's tasks by their simulated start, and executes them one after
 * the other — forward and backward kernels of its tiles, weight updates of
 * its shards, the transfers it sends or receives and the collectives it is
 * a member of (ss_build_describe says what each moves) — through a small
 * communication interface (ss_rt_comm) that runtime/mpi/comm_mpi.c
 * implements with MPI; the library itself never links MPI
 * (ss_rt_comm_self is the one-process implementation).
 *
 * Invariants of a run (docs/runtime.md has the long form):
 *   - every rank's task list is its subsequence of one global order
 *     (simulated start, end, task id), the same on every rank, so blocking
 *     sends, receives and group collectives never wait on each other in a
 *     cycle; dependencies are kept because a task starts after its
 *     predecessors end in the simulation (zero-length joins are skipped);
 *   - every rank holds a full-size buffer of every tensor and of every float
 *     tensor's gradient (but for a ZeRO-3 plan's sharded weights on the CPU
 *     backend: slices, and full copies only from the task graph's gather
 *     to its last reader: runtime/zero3.h); a tile reads its operand regions
 *     (ss_op_input_region) from them and writes its outputs into them
 *     (adds them when the op's contraction is split: partial sums); at the
 *     start of an iteration the regions its tiles write (values of split
 *     contractions, every gradient they touch) are zeroed;
 *   - a transfer overwrites the receiver's region of the value, a gradient
 *     transfer adds into the receiver's gradient; every collective runs as
 *     the collective the task graph prices (docs/runtime.md, "Collectives"):
 *     an all-reduce sums its regions over its group (a broadcast is a sum
 *     where only one member holds each element; a vocabulary-split
 *     cross-entropy's partial sums combine as Megatron-LM does: max, then
 *     sum of exp, of the shards' log-sum-exp); a reduce-scatter leaves each
 *     member the sum of its own slice only (the distributed optimizer's:
 *     slice k of each weight shard's elements; sequence parallelism's: the
 *     box its consumers read); an all-gather gives every member each
 *     member's slice; an all-to-all moves each member's region for each
 *     other member (the expert-parallel dispatch and combine sends);
 *   - a weight gradient counts each tile once: replicas (pconfig.rep > 1)
 *     other than replica 0 add nothing to it (the bucket's sum makes it
 *     whole on every member);
 *   - the update is SGD (w -= lr * g) or Adam (ss_rt_config.adam) whatever
 *     the model's optimizer says; synthetic inputs and weights come from a
 *     fixed seed, identical on every rank, so a one-process run of the same
 *     model is the reference.
 */
#ifndef SS_RT_EXEC_H
#define SS_RT_EXEC_H

#include "simsearch.h"
#include "simulator/taskgraph.h"

/* Communication between ranks. Every member calls the same sequence.
 * allreduce_f32: in place over ranks[0..n) (every caller in the list; the
 * same list, in the same order, on every member), op 0 sum, 1 max.
 * allreduce_f64: over all ranks. send_f32 / recv_f32: blocking,
 * point-to-point, matched in call order between a pair. bcast: bytes from
 * ranks[0] to every rank of ranks[0..n) (the CUDA backend's NCCL ids).
 * The three below run over a group as allreduce_f32 does; member k is the
 * caller ranks[k]; every count array has n entries (reduce_scatter_f32's and
 * allgather_f32's the same on every member):
 *   reduce_scatter_f32: send holds n blocks end to end, block j of
 *     counts[j] elements; member k receives into recv the sum over the
 *     members of their block k (MPI_Reduce_scatter, ncclReduceScatter);
 *   allgather_f32: member k gives counts[k] elements (send); recv holds
 *     every member's block end to end, in member order (MPI_Allgatherv);
 *   alltoall_f32: member k sends block j of send (scounts[j] elements) to
 *     member j and receives member j's block k into block j of recv
 *     (rcounts[j] elements; rcounts[j] on member k equals scounts[k] on
 *     member j) (MPI_Alltoallv). */
typedef struct ss_rt_comm {
    int rank, size;
    void *ctx;
    ss_status (*allreduce_f32)(void *ctx, const int *ranks, int n, float *buf, int64_t cnt,
                               int op, ss_diag *d);
    ss_status (*allreduce_f64)(void *ctx, double *buf, int64_t n, int op, ss_diag *d);
    ss_status (*send_f32)(void *ctx, int peer, const float *buf, int64_t n, ss_diag *d);
    ss_status (*recv_f32)(void *ctx, int peer, float *buf, int64_t n, ss_diag *d);
    ss_status (*barrier)(void *ctx, ss_diag *d);
    ss_status (*bcast)(void *ctx, const int *ranks, int n, void *buf, size_t bytes, ss_diag *d);
    ss_status (*reduce_scatter_f32)(void *ctx, const int *ranks, int n, const float *send,
                                    float *recv, const int64_t *counts, ss_diag *d);
    ss_status (*allgather_f32)(void *ctx, const int *ranks, int n, const float *send,
                               float *recv, const int64_t *counts, ss_diag *d);
    ss_status (*alltoall_f32)(void *ctx, const int *ranks, int n, const float *send,
                              const int64_t *scounts, float *recv, const int64_t *rcounts,
                              ss_diag *d);
} ss_rt_comm;

/* The one-process communicator (rank 0 of 1: it has no peer). */
void ss_rt_comm_self(ss_rt_comm *c);

typedef struct ss_rt_config {
    int iterations;  /* measured iterations, >= 1 */
    int warmup;      /* iterations run before them, >= 0 (they train too) */
    double lr;       /* SGD learning rate (> 0) */
    uint64_t seed;   /* inputs and initial weights */
    int adam;        /* 0: SGD (w -= lr g); 1: Adam (beta 0.9, 0.999, eps 1e-8) */
    int trace;       /* 1: record the last iteration's tasks */
    int cuda;        /* 0: CPU backend; 1: CUDA backend on GPU `device` (tensors resident
                      * on the GPU, CUDA kernels, NCCL) */
    int device;      /* with cuda: the GPU (-1: rank mod the GPUs present) */
} ss_rt_config;

typedef struct ss_rt_result {
    int n_iter;           /* warmup + iterations */
    double *loss;         /* [n_iter] mean loss of each iteration's forward */
    double *iter_ms;      /* [n_iter] wall time, max over ranks */
    double measured_ms;   /* median of the measured (post-warmup) iterations */
    double measured_cpu_ms; /* the same in thread CPU time, max over ranks (waits spin in
                             * MPI: what an iteration takes with a core per rank even
                             * on a machine other jobs share) */
    double compute_ms;    /* this rank's kernels and updates per iteration, wall (median) */
    double compute_cpu_ms;/* the same in thread CPU time (immune to preemption) */
    double comm_ms;       /* this rank's transfers and collectives per iteration, wall */
    int64_t collectives;  /* collectives this rank ran per iteration */
    int64_t transfers;    /* transfers this rank sent or received per iteration */
    double comm_bytes;    /* bytes this rank reduced, sent or received per iteration */
    double copy_bytes;    /* CPU backend: bytes of this rank's kernels' operands, outputs
                           * and output gradients copied in and out of their tensors per
                           * iteration (regions not contiguous there; the simulation does
                           * not price them; the operand gradients' adds, always made,
                           * are not counted); 0 on the CUDA backend */
    int my_tasks;         /* tasks of this rank per iteration */
    int my_tiles;         /* tiles of this rank */
    int64_t param_peak_bytes; /* CPU backend: the peak bytes of the weights this rank's tiles
                               * read, held as values, gradients, Adam moments and kernel
                               * operand copies (ZeRO-3: measured as they are made and
                               * freed, runtime/zero3.h; otherwise held all the run); 0 on
                               * the CUDA backend */
    /* the simulation of the graph that ran (ms): its iteration, and this
     * rank's device's compute and communication busy time */
    double predicted_ms, predicted_compute_ms, predicted_comm_ms;
    /* per task class of this rank (ss_rt_class_name; [SS_RT_CLASSES]): its
     * tasks, their measured wall and thread CPU ms in the last iteration,
     * and their simulated durations, summed */
    int *cls_tasks;
    double *cls_ms, *cls_cpu_ms, *cls_pred_ms;
} ss_rt_result;

/* Task classes: the task kind, and for kernels the op type. */
#define SS_RT_CLASSES (SS_TASK_KIND_COUNT * SS_OP_TYPE_COUNT)
/* The name of class c ("fwd linear", "bwd softmax_ce", "update", "xfer",
 * "collective") into buf. */
void ss_rt_class_name(int c, char *buf, size_t n);

typedef struct ss_rt_state ss_rt_state;

/* Whether this process can run the CPU (cuda 0) or the CUDA backend: a
 * build with the CUDA kernels and NCCL, and a GPU (any cudaGetDeviceCount
 * failure counts as none). SS_ERR_UNSUPPORTED naming what is missing and
 * the rank otherwise. Touches no GPU memory: call it before any work. */
ss_status ss_rt_backend_check(int cuda, int rank, ss_diag *d);

/* Train graph g under plan p (validated for g and machine m, priced by cm:
 * both borrowed for the call) on comm->size ranks, device r on rank r
 * (devices >= size are an error), for cfg->warmup + cfg->iterations
 * iterations. On success *out holds the trained state (weights), r the
 * figures (free r with ss_rt_result_clear, *out with ss_rt_free).
 * SS_ERR_UNSUPPORTED when a kernel cannot run a tile, the plan needs what
 * the runtime does not execute, or cfg->cuda and no GPU is present (any
 * cudaGetDeviceCount failure counts as none; message names it), before any
 * iteration; SS_ERR_INVALID for plans
 * using devices beyond the ranks; task-graph errors as ss_build_run's. */
ss_status ss_rt_train(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                      const ss_plan *p, const ss_rt_config *cfg, const ss_rt_comm *comm,
                      ss_rt_state **out, ss_rt_result *r, ss_diag *d);
void ss_rt_free(ss_rt_state *s);
void ss_rt_result_clear(ss_rt_result *r);

/* Largest difference between the weights of s (a parallel run) and ref (a
 * one-process run of the same graph), over the weight regions s's rank
 * reads, each relative to the largest magnitude of that weight in ref;
 * *worst names the weight (borrowed from the graph). Local to the rank:
 * the caller takes the maximum over ranks. */
double ss_rt_weight_diff(const ss_rt_state *s, const ss_rt_state *ref, const char **worst);

/* The events of the last iteration of a run with cfg.trace, named as
 * `simulate --trace` names the same tasks (kernels and updates on thread
 * 0, transfers and collectives on thread 1 of process `rank`; microseconds
 * from the iteration's start after its barrier; args: the task id and its
 * simulated start and duration, sim_ts and sim_dur) as Chrome Trace event
 * objects separated by commas, no brackets, so that the ranks' texts
 * concatenate into one array. *out is malloc'd (ss_free); "" when nothing
 * was recorded. */
ss_status ss_rt_trace_events(const ss_rt_state *s, char **out, ss_diag *d);

#endif
