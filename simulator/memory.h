/*
 * memory.h — per-device memory of one simulated iteration, with liveness.
 *
 * Two kinds of memory are tracked per device:
 *
 *   static   held for the whole iteration: weights, their gradients and the
 *            optimizer state of every weight shard the device holds. The rule
 *            per parameter is ss_memory_param_bytes (docs/simulator.md):
 *              fp32:  weight w = dtype size (4), gradient = w,
 *                     optimizer SGD 0, momentum 4, Adam 8
 *              mixed: weight 2 (half copy), gradient 2, fp32 master copy 4,
 *                     optimizer SGD 0, momentum 4, Adam 8
 *                     (Adam + mixed = 16 B/param, the ZeRO paper's count)
 *   dynamic  intervals tied to tasks of the task graph: an interval is
 *            allocated at the start or end of one task and freed at the start
 *            or end of another (activations kept from a forward tile until its
 *            backward ends, receive buffers from a transfer's start until the
 *            consumer ends, the workspace of a running kernel).
 *
 * After the engine has given every task a start and end time, ss_memory_sweep
 * turns each interval into an alloc and a free event, sorts each device's
 * events by time (frees before allocs at equal times, so a buffer released
 * when a task ends can be reused by a task starting at that instant; ties
 * otherwise by interval order — deterministic) and returns the peak of
 * static + live dynamic bytes per device.
 *
 * The object keeps its arrays across resets, so the search's repeated runs
 * allocate only while they grow.
 */
#ifndef SS_MEMORY_H
#define SS_MEMORY_H

#include "simsearch.h"

typedef enum ss_mem_kind {
    SS_MEM_ACTIVATION = 0, /* saved for the backward pass */
    SS_MEM_BUFFER,         /* communication receive buffer */
    SS_MEM_WORKSPACE,      /* kernel scratch while it runs */
    SS_MEM_KIND_COUNT
} ss_mem_kind;

/* Where an interval starts or ends: at the start (at_end = 0) or end
 * (at_end = 1) of task `task`. */
typedef struct ss_mem_point {
    int task;
    int at_end;
} ss_mem_point;

typedef struct ss_mem_interval {
    int device;
    ss_mem_kind kind;
    double bytes;
    ss_mem_point alloc, release;
} ss_mem_interval;

typedef struct ss_memory ss_memory;

/* New empty tracker (0 devices). NULL on allocation failure. */
ss_memory *ss_memory_new(void);
void ss_memory_free(ss_memory *mm);

/* Forget all static memory and intervals and set the device count, keeping
 * capacity. On error (NOMEM, negative count) the tracker is unchanged. */
ss_status ss_memory_reset(ss_memory *mm, int n_devices, ss_diag *d);

/* Bytes per parameter under the rule above. wdtype is the weight tensor's
 * dtype (used in fp32 mode). Any out-pointer may be NULL. */
void ss_memory_param_bytes(ss_dtype wdtype, ss_optimizer opt, ss_precision prec,
                           double *weight, double *grad, double *optim);

/* Add n_params parameters of a weight shard held by `device` (weights,
 * gradients and optimizer state per the rule). Device must be in range.
 * ss_memory_add_params_split: the optimizer state split over `split`
 * devices (the distributed optimizer: each holds 1/split of it; split < 1
 * reads as 1). */
void ss_memory_add_params_split(ss_memory *mm, int device, int64_t n_params, ss_dtype wdtype,
                                ss_optimizer opt, ss_precision prec, int split);
void ss_memory_add_params(ss_memory *mm, int device, int64_t n_params, ss_dtype wdtype,
                          ss_optimizer opt, ss_precision prec);
/* Parameter sharding (ZeRO-3): weights, gradients and optimizer state all
 * split over `split` devices (split < 1 reads as 1). */
void ss_memory_add_params_sharded(ss_memory *mm, int device, int64_t n_params, ss_dtype wdtype,
                                  ss_optimizer opt, ss_precision prec, int split);

/* Add a dynamic interval. bytes <= 0 are ignored (SS_OK). On error (device
 * out of range, negative task id, NOMEM) nothing is added. */
ss_status ss_memory_add(ss_memory *mm, const ss_mem_interval *iv, ss_diag *d);

/* Sweep the intervals against task times start[]/end[] (indexed by task id;
 * every task id used must be valid in them) and write each device's peak
 * (static + dynamic) into peak[n_devices]. An interval whose release is not
 * later than its alloc has zero lifetime and counts nowhere. On NOMEM peak
 * is untouched. */
ss_status ss_memory_sweep(ss_memory *mm, const double *start, const double *end, double *peak,
                          ss_diag *d);

/* As ss_memory_sweep, bit for bit, with task times given by their ranks:
 * start_rank[t], end_rank[t] in 0 .. n_ranks-1, ordered as the times are
 * (equal ranks <=> equal times), e.g. the engine's start_round/end_round.
 * Linear in intervals + ranks (counting sort). SS_ERR_INVALID for a
 * negative or huge n_ranks; on NOMEM peak is untouched. */
ss_status ss_memory_sweep_ranked(ss_memory *mm, const int32_t *start_rank,
                                 const int32_t *end_rank, int n_ranks, double *peak,
                                 ss_diag *d);

int ss_memory_n_devices(const ss_memory *mm);
int ss_memory_n_intervals(const ss_memory *mm);
/* Interval i (0 <= i < ss_memory_n_intervals), borrowed until the next add
 * or reset. */
const ss_mem_interval *ss_memory_interval(const ss_memory *mm, int i);
/* Static bytes of device dev: weights alone, and weights + grads + optimizer. */
double ss_memory_weight_bytes(const ss_memory *mm, int dev);
double ss_memory_static_bytes(const ss_memory *mm, int dev);

/* Volume of the union of n regions of the same tensor (same ndim), exactly
 * (recursive slab sweep; fine for the tens of regions one device holds).
 * Returns -1 on allocation failure. */
int64_t ss_memory_region_union(const ss_region *rs, int n);

#endif /* SS_MEMORY_H */
