/*
 * schedule.h — the pipeline schedules, defined once for the task-graph
 * builder (build.c, pass 6) and the hierarchical evaluator's stage-level
 * pipeline (hier.c): the engine's priority keys of forward and backward
 * work, the queue policy a schedule runs under, and Megatron's program
 * order over chunk-steps (GPipe, 1F1B, interleaved 1F1B).
 *
 * A pipeline rank of P ranks holds V chunks (V = 1 without interleaving);
 * with M micro-batches it runs K = M * V forward steps and K backward
 * steps. Step j is (micro-batch, chunk): micro-batches in groups of P, and
 * within a group chunk by chunk, forward in chunk order, backward in
 * reverse chunk order (get_model_chunk_id in Megatron's interleaved
 * schedule). Invariant: ss_sched_step and ss_sched_at are inverses, and
 * every function is pure (docs/simulator.md, "Pipelines and schedules").
 */
#ifndef SS_SCHEDULE_H
#define SS_SCHEDULE_H

#include "simsearch.h"

/* Micro-batch slots per operator in the priority keys: micro-batches at or
 * past SS_SCHED_MB_SLOTS - 1 share the last slot. */
#define SS_SCHED_MB_SLOTS 1024

/* The engine's key of op's forward work for micro-batch mb (mb < 0 counts
 * as 0): ops in graph order, then micro-batches in order. */
static inline int ss_sched_prio_fwd(int op, int mb)
{
    return op * SS_SCHED_MB_SLOTS +
           (mb < 0 ? 0 : mb > SS_SCHED_MB_SLOTS - 1 ? SS_SCHED_MB_SLOTS - 1 : mb);
}

/* The key of op's backward work (n_ops operators in the graph): after
 * every forward key, ops in reverse graph order, then micro-batches. */
static inline int ss_sched_prio_bwd(int n_ops, int op, int mb)
{
    return (n_ops + (n_ops - 1 - op)) * SS_SCHED_MB_SLOTS +
           (mb < 0 ? 0 : mb > SS_SCHED_MB_SLOTS - 1 ? SS_SCHED_MB_SLOTS - 1 : mb);
}

/* The device-queue policy a plan's settings run under: backward first for
 * 1F1B or when the plan asks for it, else FIFO. */
ss_queue_policy ss_sched_policy(const ss_plan_settings *set);

/* The step index of (micro-batch mb, chunk) on a rank of P ranks with V
 * chunks each, forward (backward = 0) or backward (backward = 1). */
int ss_sched_step(int mb, int chunk, int P, int V, int backward);

/* The inverse: step j's micro-batch *mb and chunk *chunk. */
void ss_sched_at(int j, int P, int V, int backward, int *mb, int *chunk);

/* 1F1B's warm-up W of pipeline rank r of P with V chunks and M
 * micro-batches: forward step k waits for backward step k - W - 1, and
 * backward step i follows forward step min(i + W, M V - 1). P - r - 1
 * without interleaving, else (P - r - 1) * 2 + (V - 1) * P (Megatron's
 * num_warmup_microbatches), or every step when interleaving M = P
 * micro-batches (its all_warmup_microbatches); at most M V. */
int ss_sched_warmup(int P, int V, int M, int r);

#endif /* SS_SCHEDULE_H */
