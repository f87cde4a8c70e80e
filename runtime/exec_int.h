/*
 * exec_int.h — what the executor (runtime/exec.c) shares with its backends:
 * the run's state, one iteration's context, and the backend interface.
 *
 * The seam: exec.c builds the host tensors (inputs and weights from the
 * seed), describes this rank's tiles (ss_kernel_setup, regions only), builds
 * and simulates the task graph and keeps this rank's tasks in simulated order
 * (s->mine); a backend (rt_backend) owns where the tensors live while the
 * run trains and how each task executes:
 *   - CPU (runtime/exec_cpu.c): host buffers, the CPU kernels, ss_rt_comm
 *     (MPI) for transfers and collectives, one task after the other;
 *   - CUDA (runtime/cuda/exec_cuda.c): device-resident tensors, the CUDA
 *     kernels on a compute stream, NCCL on a stream per communication
 *     channel, CUDA events between streams (runtime/cuda/plan.h says which).
 * Invariant of every backend: after `iteration` returns, every task of
 * s->mine has completed; after `readback(s, 1)` the host buffers s->buf hold
 * every tensor's value as the backend has it (the numerics check reads them).
 */
#ifndef SS_RT_EXEC_INT_H
#define SS_RT_EXEC_INT_H

#include "kernels/kernels.h"
#include "runtime/exec.h"
#include "simulator/build.h"

typedef struct rt_event {
    int task, tid;
    double ts, dur, bytes;
} rt_event;

typedef struct rt_tile {
    int op, idx, q, r; /* op id, tile index, replica, reduction slice */
    int late;          /* reorder_backward: a deferred weight-gradient task (aux 1) lays
                          back the weight gradients its backward task computed */
    int fwd;           /* its forward task is taken (a second one is synced flags' next
                          iteration's forward, which runs in the next iteration) */
    unsigned dupdx;    /* bit i: input i's gradient is a copy of a lower replica's that a
                          summing collective already counts (ss_rt_dup_grads): not laid */
    unsigned view_x, view_y, view_dy; /* CPU: bit i: a.x[i] (a.y[i], a.dy[i]) points into the
                          tensor's value (gradient) at its contiguous region, not a copy */
    ss_kargs a;        /* regions (exec.c); buffers where the backend computes */
} rt_tile;

typedef struct rt_backend rt_backend;

struct ss_rt_state {
    const ss_graph *g;
    const ss_plan *p;
    int rank, size, n_t, n_ops;
    void **buf;     /* [n_t] full tensor values (host) */
    float **grad;   /* [n_t] gradients (float tensors; NULL otherwise; host) */
    int64_t *vol;   /* [n_t] elements */
    rt_tile *tiles; /* this rank's tiles, by op then index */
    int n_tiles, *op_off; /* [n_ops + 1] */
    float **adam_m, **adam_v; /* [n_t] Adam moments of the weights (NULL: SGD) */
    int adam;
    /* the schedule */
    ss_builder *b;
    ss_taskgraph *tg;
    ss_build_descs ds;
    int *mine, n_mine;   /* this rank's tasks in simulated order */
    double *sim_start, *sim_dur; /* [n_tasks] the simulated start and duration (us) */
    int *task_tile;      /* [n_tasks] FWD/BWD task -> index in tiles, -1 */
    char *combine_after; /* [n_tasks] FWD task after which a one-device split loss combines */
    float *scratch;      /* CPU: packing buffer of transfers and collectives */
    int64_t cap_scratch;
    float *ce_m, *ce_s;  /* CPU: scratch of the split loss */
    int64_t cap_ce;
    struct rt_event *ev; /* the traced iteration's events */
    int n_ev, cap_ev;
    int step;            /* updates done (Adam's bias correction) */
    int cuda, device;    /* CUDA backend on GPU `device` */
    int64_t param_peak;  /* CPU: peak bytes of weights held (runtime/zero3.h), after readback */
    const rt_backend *be;
    void *bs;            /* the backend's own state */
};

/* One iteration's context. */
typedef struct rt_iter {
    ss_rt_state *s;
    const ss_rt_comm *c;
    double lr;
    int64_t ncoll, nxfer;
    double bytes;
    double copied; /* CPU: bytes copied between tensors and tile buffers around kernels */
    double comp_ms, comp_cpu_ms, comm_ms; /* this iteration: kernels (wall, CPU), communication */
    int trace;  /* record events in s->ev (the last iteration) */
    double t0;  /* iteration start (ms) */
    ss_rt_result *r; /* per-class sums of the last iteration */
} rt_iter;

struct rt_backend {
    const char *name;
    /* After setup and schedule: the tile buffers, the backend's tensors
     * (from the host ones), its streams and communicators. Collective over
     * the ranks (every rank calls it). */
    ss_status (*prepare)(ss_rt_state *s, const ss_rt_comm *c, ss_diag *d);
    /* One iteration of s->mine (zeroing accumulators and seeding the loss
     * gradient first); returns when every task is done, with x's figures. */
    ss_status (*iteration)(rt_iter *x, ss_diag *d);
    /* The iteration's loss summed over its elements and over the ranks
     * (each loss element counted once). */
    ss_status (*loss)(rt_iter *x, double *sum, ss_diag *d);
    /* Every tensor's value into s->buf. */
    ss_status (*readback)(ss_rt_state *s, ss_diag *d);
    /* Free what prepare made (also after a failed prepare); NULL-safe. */
    void (*release)(ss_rt_state *s);
};

extern const rt_backend ss_rt_cpu_backend;
/* The CUDA backend, or NULL in a build without CUDA and NCCL. */
const rt_backend *ss_rt_cuda_backend(void);

/* Walk region r of a row-major tensor of shape sh (nd dims): fn gets the
 * offset (elements) of each run of the region contiguous in the tensor (an
 * innermost row, or several when the region covers the inner dims whole) in
 * the tensor and in the dense region buffer, and the run's length. */
typedef void (*ss_rt_row_fn)(void *ctx, int64_t toff, int64_t roff, int64_t len);
void ss_rt_walk(const int64_t *sh, int nd, const ss_region *r, ss_rt_row_fn fn, void *ctx);
/* Copy between region r of tensor T's buffer tbuf and a dense buffer:
 * mode 0 gather, 1 scatter-add f32, 2 scatter-max f32, 3 scatter, 4 zero. */
void ss_rt_region_io(const ss_tensor *T, void *tbuf, const ss_region *r, void *dense, int mode);
/* Whether a point-to-point transfer can move T's values: f32 always; a
 * forward value of another 4-byte type (i32 token ids and labels) too, its
 * bits packed and laid back as is (modes 0 and 3 above copy bytes), since
 * the transport moves 4-byte words and nothing adds them. */
int ss_rt_xfer_movable(const ss_tensor *T, int grad);
/* n bytes, zeroed, aligned to SS_KERNEL_ALIGN (at least one alignment
 * unit); release with free(); NULL when out of memory. */
void *ss_rt_zalloc(size_t n);
/* Slice k of n of vol elements (the distributed optimizer's). */
void ss_rt_slice_of(int64_t vol, int k, int n, int64_t *lo, int64_t *hi);
/* Operand i of op (inputs, then weights): its tensor. */
int ss_rt_operand_tensor(const ss_op *op, int i);
/* This rank's tile index idx of op, as an index into s->tiles; -1. */
int ss_rt_local_tile(const ss_rt_state *s, int op, int idx);
/* Sequence parallelism's reduce-scatter (SS_BUILD_COLL_SCATTER) or
 * all-gather (SS_BUILD_COLL_GATHER) task: member k's box of item i — the
 * bounding box of what its consumers' tiles read of the item; volume 0 when
 * none — into out[k * n_item + i] (room for n_dev x n_item); 1 when each
 * item's boxes are pairwise disjoint (the collective can run as itself),
 * else 0. */
int ss_rt_sp_boxes(const ss_rt_state *s, int task, ss_region *out);
/* The transfers all-to-all task `task` runs: the zero-length transfers the
 * builder folded into it (forward: its predecessors; backward: its
 * successors) into out (NULL: counted only), in the graph's list order;
 * their count. */
int ss_rt_a2a_xfers(const ss_taskgraph *tg, int task, int *out);
/* The task class (ss_rt_class_name) of a task. */
int ss_rt_task_class(const ss_rt_state *s, int task);
double ss_rt_now_ms(void);
double ss_rt_cpu_ms(void);
/* Record a task of the last iteration: its class's sums (comm: its CPU time
 * counted as its wall time), its trace event on thread tid when tracing. */
void ss_rt_record(rt_iter *x, int task, int tid, double w0, double w1, double bytes, int comm);
/* Close a compute task begun at wall w0 and CPU c0 (ss_rt_now_ms,
 * ss_rt_cpu_ms): its CPU and wall time into the iteration's compute sums
 * and its class's, and its record (ss_rt_record, thread 0). */
void ss_rt_record_compute(rt_iter *x, int task, double w0, double c0);
/* Whether loss tile tl counts its region in the loss sum (one tile per
 * region over the ranks: replica 0, reduction slice 0, the unit's first
 * device). */
int ss_rt_loss_owner(const ss_rt_state *s, const rt_tile *tl);
ss_status ss_rt_nomem(ss_diag *d);

/* The first half of ss_rt_train for rank `rank` of `size`: the host tensors,
 * the rank's tiles (described for cfg's backend, no buffers) and its tasks
 * in simulated order; no backend state, no communication (the stream and
 * NCCL plan's tests). Free with ss_rt_free. */
ss_status ss_rt_plan_only(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                          const ss_plan *p, const ss_rt_config *cfg, int rank, int size,
                          ss_rt_state **out, ss_rt_result *r, ss_diag *d);

#endif
