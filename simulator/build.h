/*
 * build.h — the task-graph builder: model + plan + machine + costs -> the
 * task graph the engine schedules and the memory intervals the liveness
 * sweep counts. docs/simulator.md is the long form of the rules below.
 *
 * Tasks
 *   forward / backward  one per tile of every op (ss_pconfig_tile), on the
 *                       tile's device, durations from ss_cost_tile. Graph
 *                       inputs (SS_OP_INPUT) get a zero-length forward task
 *                       and no backward. With recompute = full the backward
 *                       also pays the tile's forward time; with selective,
 *                       only the attention-score ops' (ss_build_score_op).
 *                       The mode is the op's stage's (ss_plan_stage_recompute:
 *                       per-stage recompute applies to that stage's ops only).
 *   units               tiles of one op that share an output region and
 *                       differ only in their reduction range form a unit
 *                       (red = 1: each tile is its own unit). A unit with
 *                       red > 1 holds partial sums, made whole before any
 *                       consumer reads them: a join when its tiles share one
 *                       device; across devices a reduce-scatter when every
 *                       consumer tile is on a member device and the members
 *                       read disjoint slices of at most 1/n of the output
 *                       each (sequence parallelism after a row-parallel
 *                       linear), else an all-reduce.
 *   replicas            units of one op with the same output region (rep >
 *                       1: the same tile computed on several devices) form
 *                       a group. A consumer tile reads the group's replica
 *                       on its own device, else replica (its tile index mod
 *                       rep) through a transfer. When the group's replicas
 *                       are read by different consumer work (a column-
 *                       parallel linear after a replicated LayerNorm), the
 *                       output gradient is summed over the group's devices
 *                       by an all-reduce before every replica's backward;
 *                       when every replica feeds replicas of the same work
 *                       (a replicated residual add), each replica's gradient
 *                       is already whole: no collective. Likewise a partial-
 *                       sum unit whose consumers on every member are
 *                       replicas of the same work gets its gradient locally.
 *   transfers           for every consumer tile and producer unit whose
 *                       output region overlaps the region the tile needs
 *                       (ss_op_input_region), a transfer of the overlap bytes
 *                       from the unit's first device along ss_machine_route
 *                       when the consumer's device is not one of the unit's
 *                       devices, else a plain dependency. A transfer of the
 *                       same region of the same tensor to the same device is
 *                       made once and shared. Backward: each forward transfer
 *                       has a gradient transfer of the same bytes the other
 *                       way, after every consumer backward that used it.
 *                       Under the 1F1B schedule a transfer whose producer
 *                       and (first) consumer ops are in different pipeline
 *                       stages (pconfig.stage), and its gradient, also hold
 *                       the compute streams of both end devices (Megatron's
 *                       blocking send/receive pairs); they are keyed like
 *                       their producer (the forward, or the consumer's
 *                       backward), so a stage sends before its next task.
 *                       GPipe's transfers overlap compute (copy streams).
 *   output gradients    every backward tile waits for the gradient of all it
 *                       produced. A partial-sum unit on several devices needs
 *                       the whole output gradient on every member: its
 *                       consumers' backwards (on members) and gradient
 *                       transfers (from elsewhere) feed a join, then an
 *                       all-gather when the forward was a reduce-scatter, a
 *                       broadcast when the gradient comes back to one device
 *                       (priced as a pipelined ring, L + (n-1) lat + S/B),
 *                       an all-reduce of the partial gradients when it comes
 *                       back to several; then every member's backward.
 *   weight gradients    per weight tensor, tiles needing the same weight
 *                       region on different devices are replicas: one
 *                       all-reduce per bucket (collective.h picks ring / tree
 *                       / hierarchical). Wait-free: a bucket starts when the
 *                       last backward contributing to it ends; bulk: after
 *                       every backward. Buckets fuse consecutive shards (in
 *                       backward order) with the same device set until they
 *                       reach settings.bucket_bytes (0: one per shard).
 *                       Then one update task per shard per device.
 *   pipelines           a tile's micro-batch is the rank of its sample offset
 *                       among its op's tiles on the same device (Megatron's
 *                       dp*mb sample split gives 0..mb-1 on every device).
 *                       With settings.microbatches M > 1, and when every data
 *                       edge links tiles of the same micro-batch (graph inputs
 *                       aside; this also rules out cycles), each device runs
 *                       micro-batch k+1's forward only after its last forward
 *                       of micro-batch k (the per-device program order of
 *                       GPipe); with the 1F1B schedule a device of stage s
 *                       also starts micro-batch k's forward only after its
 *                       last backward of micro-batch k - (stages - s) (at
 *                       most stages - s micro-batches in flight).
 *   priorities          forward in topological order, backward in reverse,
 *                       micro-batch as tie-break; gradient all-reduces back
 *                       layers first under bulk sync, in ready order under
 *                       overlapped sync, front layers first with
 *                       settings.priority.
 *
 * Memory intervals (memory.h): activations (ss_work.saved_bytes) from the
 * forward's start to the backward's end (recompute = full: only during the
 * backward, plus the received inputs kept as checkpoints until the consumer's
 * backward ends; selective: only during the backward for score ops; each
 * op and received input under its (consumer's) stage's mode); receive buffers from the transfer's start to the end of
 * the task that consumes them; kernel workspace while a task runs; weights,
 * gradients and optimizer state per distinct weight region a device holds
 * (union of the regions its tiles need, shared weights counted once).
 *
 * The builder keeps its scratch arrays across runs (the search calls it
 * thousands of times); g, m and cm are borrowed for its lifetime.
 *
 * Reuse across runs (memoization). What a run computes that depends only on
 * content is remembered, keyed by that content, never by "the previous run"
 * (the search keeps a committed base and a proposal that may be
 * rejected, so both must hit):
 *   per op       its tiles (shapes, devices, micro-batches, ss_cost_tile
 *                costs), keyed by the op's config (degrees, red, device
 *                list); the last KOP = 4 configs per op, LRU;
 *   per edge     the (consumer tile, producer unit, region read) pairs of a
 *                graph edge (consumer op, input), keyed by the producer's and
 *                the consumer's configs; the last 4 pairs of configs, LRU;
 *   per weight   its shards (regions, devices, entries as (op, tile)) and
 *                the parameters each device holds, keyed by the configs of
 *                the ops that read it (build_weights.c);
 *   routes       channels, bottleneck bandwidth and latency per device pair;
 *   collectives  price and channels per (kind, device list, bytes).
 * A cached value is exactly what the computation returned, so the emitted
 * graph is bit-identical to a fresh builder's (tests/simulator/
 * test_build_memo.c checks it on random plans and proposal chains of several
 * models). Tasks are still emitted in full, in the same order. The caches
 * assume g, m and cm do not change between runs: after changing the cost
 * model (a provider added) call ss_build_forget. Memory is bounded (KOP and
 * KEDGE entries per op and edge; routes and collectives clear themselves
 * past 16 MiB, weight structures past 64 MiB).
 */
#ifndef SS_BUILD_H
#define SS_BUILD_H

#include "simsearch.h"
#include "simulator/memory.h"
#include "simulator/taskgraph.h"

/* Collective task tags (ss_taskgraph.aux of SS_TASK_COLLECTIVE tasks). */
enum {
    SS_BUILD_COLL_GRAD = 0,    /* gradient all-reduce of a bucket (tile = bucket index); op -1: the
                                * tensor-parallel all-reduce of split_tp (tile = its group) */
    SS_BUILD_COLL_PARTIAL = 1, /* all-reduce of partial sums (op = producer, tile = unit) */
    SS_BUILD_COLL_BCAST = 2,   /* output gradient broadcast to a partial-sum unit's devices */
    SS_BUILD_COLL_SCATTER = 3, /* reduce-scatter of partial sums */
    SS_BUILD_COLL_GATHER = 4,  /* all-gather of sliced output gradients to the unit's devices */
    SS_BUILD_COLL_GRADSUM = 5, /* all-reduce of partial output gradients on the unit's devices */
    SS_BUILD_COLL_REPSUM = 6,  /* all-reduce of output gradients over an op's replicas */
    SS_BUILD_COLL_SENDGATHER = 7, /* all-gather after a scatter-gather pipeline send (op =
                                    producer, tile = unit; forward on the receivers,
                                    backward on the senders) */
    SS_BUILD_COLL_ALLTOALL = 8, /* expert-parallel all-to-all of a MoE layer's dispatch or
                                   combine, or of their gradients (op = producer, tile = a
                                   unit of the group; build_fwd.c) */
    SS_BUILD_COLL_PARAM = 9     /* ZeRO-3 all-gather of an op's weight shards before its
                                   forward or backward (op = the user, tile = micro-batch;
                                   build_weights.c) */
};

typedef struct ss_build_stats {
    int fwd, bwd, xfer_fwd, xfer_bwd, coll_partial, coll_bcast, coll_grad, updates;
    int coll_scatter, coll_gather, coll_gradsum, coll_repsum;
    int coll_sendgather; /* all-gathers of scatter-gather pipeline sends */
    int coll_alltoall;   /* expert-parallel all-to-alls, forward and backward */
    int coll_param;      /* ZeRO-3 weight all-gathers, forward and backward */
    int buckets, shards;
    int microbatch_gating; /* 1 if micro-batch program order was applied */
    int costs;             /* distinct tile costs kept: per op, its tiles' distinct
                            * (forward, backward, saved, workspace, GPU / host) costs */
} ss_build_stats;

typedef struct ss_builder ss_builder;

/* New builder for graph g on machine m priced by cm (borrowed). NULL on
 * allocation failure. */
ss_builder *ss_build_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm);
void ss_build_free(ss_builder *b);

/* Poll stop while building (every few thousand transfers and at each pass);
 * nonzero makes ss_build_run fail with SS_ERR_INTERRUPTED. NULL: never. */
void ss_build_set_stop(ss_builder *b, int (*stop)(void *ctx), void *ctx);

/* Build plan p's task graph into tg (reset first) and its static memory
 * (weights, gradients, optimizer state per device) into mm (reset first),
 * and finalize tg. Errors: SS_ERR_INVALID (tile count or device out of
 * range, unreachable device pair), NOMEM, cost errors. On error tg and mm
 * hold a partial build (reset them before reuse). */
ss_status ss_build_run(ss_builder *b, const ss_plan *p, ss_taskgraph *tg, ss_memory *mm,
                       ss_diag *d);

/* Add the memory intervals of the last successful ss_build_run
 * (activations kept for the backward, kernel workspace, transfer buffers)
 * to mm, the memory that run filled; once per run. Apart from
 * ss_build_run because only a memory sweep needs them: an evaluation that
 * the engine's cutoff rejects on time never asks (a third of a search's
 * interval building went to such plans). Errors: SS_ERR_INVALID (no run
 * to add to, or added already), NOMEM (mm then holds some of them). */
ss_status ss_build_memory(ss_builder *b, ss_memory *mm, ss_diag *d);

typedef struct ss_build_memo_stats {
    int64_t op_hits, op_misses;     /* per op per run: tiles reused / computed */
    int64_t edge_hits, edge_misses; /* per graph edge per run: pairs reused / computed */
    int64_t weight_hits, weight_misses; /* per weight per run: shard structure reused / computed */
} ss_build_memo_stats;

/* Drop everything memoized (the next run computes everything; scratch
 * arrays are kept). */
void ss_build_forget(ss_builder *b);
/* Turn memoization on (the default) or off (off also forgets): off, every
 * run computes everything, as a fresh builder does. */
void ss_build_set_memo(ss_builder *b, int on);
/* Lean mode (off by default; ss_sim_config.one_shot): for one run of a big
 * plan, the smallest peak memory. Memoization off (ss_build_set_memo(b,
 * 0)) but for the bounded route and collective tables, which pay within
 * one run (every transfer between two devices shares one route); the regions pairs read are freed after the forward dependencies;
 * ss_build_run adds the memory intervals itself (ss_build_memory then only
 * confirms them), frees every scratch array before it finalizes the graph
 * and then drops the graph's edge list (ss_taskgraph_release_edges). The
 * graph, intervals and numbers are a normal run's, bit for bit; a later run
 * works and allocates again. */
void ss_build_set_lean(ss_builder *b, int on);
const ss_build_memo_stats *ss_build_memo_stats_of(const ss_builder *b);

/* The builder an ss_sim simulates with (sim.c; borrowed): benchmarks turn
 * its memoization off through it to time from-scratch simulation. */
ss_builder *ss_sim_builder(ss_sim *s);
/* The task graph of an ss_sim's last build (borrowed; symmetry.c checks it). */
const struct ss_taskgraph *ss_sim_taskgraph(const ss_sim *s);

/* 1 if op is an attention-score op that selective recomputation recomputes
 * (Korthikanti et al.): a batch_matmul, softmax or dropout whose output or
 * an input holds a score matrix (two trailing attribute dims of equal
 * extent > 1: [..., seq, seq]) — QK^T, its softmax and dropout, and the
 * product with V. Under recompute = selective these keep no activations
 * from the forward and pay their forward again in the backward. */
int ss_build_score_op(const ss_graph *g, int op);

/* Symmetric reduction (simulator/symmetry.c, docs/simulator.md
 * "Symmetry"): the plan being built is block 0 of D identical
 * data-parallel blocks, sigma^k maps block 0's devices to block k's. The
 * builder then (pass 7) holds every weight shard on the images of its
 * devices in all D blocks (the gradient collectives are priced over the
 * full group, the distributed optimizer splits n*D ways), adds updates
 * only on block 0's devices, and lets symmetry.c move each gradient
 * collective's channels onto their block-0 representatives through the
 * two callbacks symmetry.c sets (the builder names nothing of
 * symmetry.c). NULL: none (the default). */
typedef struct ss_build_sym {
    int D;                   /* blocks, >= 2 */
    int n_dev, n_ch;         /* devices and channels of the machine */
    const int *dmap;         /* [D * n_dev]: dmap[k * n_dev + d] = sigma^k(d) */
    const int *cmap;         /* [D * n_ch]: the channel images, likewise */
    const int *blk;          /* [n_dev]: block of each device, -1 unused */
    int *canon;              /* [n_ch]: representative channel, -1 unknown (per build) */
    int *mark;               /* [n_ch] scratch */
    const struct ss_taskgraph *tg; /* the graph being built (set in pass 7) */
    unsigned gen;            /* mark generation */
    int bad;                 /* a check failed while building: not symmetric */
    char why[160];
    /* Before pass 7's collectives: the channels block 0's tasks in tg use. */
    void (*prepare)(struct ss_build_sym *h, const struct ss_taskgraph *tg);
    /* A collective's channels res[0..n) onto their representatives: the
     * new count. */
    int (*remap)(struct ss_build_sym *h, int *res, int n);
} ss_build_sym;
void ss_build_set_symmetry(ss_builder *b, ss_build_sym *sym);

/* 1 if the last built graph holds the next iteration's forward
 * (settings.synced_flags, build_weights.c): its makespan is then no
 * iteration time, and a cutoff on it proves nothing. */
int ss_build_next_forward(const ss_builder *b);

/* The iteration time of the last built graph simulated as r: its makespan,
 * or with synced flags the steady-state period estimated from the one
 * transition simulated: the end of the next forward of micro-batch 0 minus
 * the end of this iteration's, and at least the busiest resource's work of
 * one iteration (docs/simulator.md, "Gradient synchronisation"). */
struct ss_engine_result;
double ss_build_iteration_us(const ss_builder *b, const ss_taskgraph *tg,
                             const struct ss_engine_result *r);

/* Queue policy the engine should use for the last built plan (backward-first
 * for 1F1B or when the plan asks for it). */
ss_queue_policy ss_build_policy(const ss_builder *b);
const ss_build_stats *ss_build_stats_of(const ss_builder *b);

/* Name task t of the last build ("fwd fc1 t2 mb0", "xfer fc1 -> gpu3",
 * "allreduce grads bucket 3 (fc1.weight ...)"); an ss_trace_namer: ctx is the
 * builder. */
void ss_build_task_name(void *ctx, const ss_taskgraph *tg, int task, char *buf, size_t n);

/* What the runtime executes (runtime/exec.c, "what is simulated is what
 * runs"): per task of the last ss_build_run, read-only, what it moves or
 * updates. A region item is (tensor, region); `grad` says whether it is the
 * tensor's value or its gradient.
 *   FWD / BWD      dev: the device (op and tile are the task graph's)
 *   UPDATE         dev; tensor, reg: the weight shard updated; with the
 *                  distributed optimizer the device updates slice split_k
 *                  of split_n of the shard's elements (split_n = 1: all)
 *   XFER           tensor, reg: the region moved from src to dst; grad: a
 *                  gradient transfer (it adds into dst's gradient); parts:
 *                  scatter-gather ranks (1: a plain send)
 *   COLLECTIVE     coll (SS_BUILD_COLL_*), the group devs[dev_off ..
 *                  + n_dev) in one order for every member, the regions it
 *                  combines items[item_off .. + n_item) (a unit's outputs;
 *                  a bucket's weight shards), grad; unit collectives: unit
 *                  (the op's unit index) and its tiles first_tile ..
 *                  first_tile + red - 1 (the op's tile indices); gradient
 *                  buckets: part of n_parts (a split bucket reduces that
 *                  slice of its items laid end to end), gather = 1 for the
 *                  distributed optimizer's weight all-gather; a
 *                  scatter-gather send's all-gather: its receivers
 *                  (forward) or senders (backward, grad) and the region sent;
 *                  a ZeRO-3 parameter all-gather (SS_BUILD_COLL_PARAM): its
 *                  unit's weight shards (regions) and their devices; ZeRO-3
 *                  buckets: part of n_parts counts the bucket's parts, not
 *                  its per-micro-batch reduce-scatters
 *   OTHER          nothing (joins)
 * Filled for the builder's last successful run on graph tg (not in lean
 * mode, which frees what this reads; implemented in build_describe.c).
 * O(tasks x updates + buckets x updates x shards): for the graphs the
 * runtime executes, not for a search's inner loop.
 * On error (SS_ERR_INVALID: no run, or lean; NOMEM) x is left empty. */
typedef struct ss_build_item {
    int tensor;
    ss_region reg;
} ss_build_item;

typedef struct ss_build_desc {
    int dev;
    int tensor;
    ss_region reg;
    int src, dst, grad, parts;
    int coll, unit, first_tile, red;
    int dev_off, n_dev, item_off, n_item;
    int part, n_parts, gather;
    int split_k, split_n;
} ss_build_desc;

typedef struct ss_build_descs {
    int n_tasks;
    ss_build_desc *t;     /* [n_tasks] */
    int *devs;            /* group devices */
    ss_build_item *items; /* collective items */
    int n_devs, n_items, cap_devs, cap_items;
} ss_build_descs;

ss_status ss_build_describe(const ss_builder *b, const ss_taskgraph *tg, ss_build_descs *x,
                            ss_diag *d);
/* Free what ss_build_describe filled (x zeroed; NULL-safe fields). */
void ss_build_descs_clear(ss_build_descs *x);

#endif /* SS_BUILD_H */
