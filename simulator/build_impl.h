/*
 * build_impl.h — internals shared by the task-graph builder's files:
 * simulator/build.c (passes 1-6 and 8, memoization tables, the run) and
 * simulator/build_weights.c (pass 7: weight gradients). The builder struct,
 * its per-tile/unit/transfer records and the small helpers both use.
 * Invariant: as build.c's, task ids recorded in the builder's arrays refer
 * to tasks already added to the graph being built.
 */
#ifndef SS_BUILD_IMPL_H
#define SS_BUILD_IMPL_H

#include "simulator/build.h"
#include "simulator/collective.h"
#include "simulator/memo.h"
#include "simulator/schedule.h"

#define MB_CLAMP (SS_SCHED_MB_SLOTS - 1) /* the last micro-batch slot of a priority key */

/* What the passes read of a tile, kept small (the passes stream through
 * every tile several times); its costs (tilecost, read by three passes) and
 * its shape (tshape) live apart. */
typedef struct tileinfo {
    int op, dev;
    int cost;     /* its costs: entry `cost` of the op's distinct costs (tcost) */
    int fwd, bwd; /* task ids; bwd = -1 for graph inputs */
    int mb;       /* micro-batch: rank of its sample range among the op's tiles on its device */
} tileinfo;

/* A tile's costs. Most tiles of an op share them (the same shape on the
 * same device type: micro-batches, replicas, tensor-parallel ranks), so
 * each op keeps its distinct costs once and its tiles index them: 4 bytes
 * per tile instead of 64 (the 175B / 1,024-GPU plan has 26 M tiles and
 * a few thousand distinct costs). */
typedef struct tilecost {
    double fwd_us, bwd_us, saved, ws;
    double fwd_gpu, bwd_gpu, fwd_host, bwd_host; /* ss_cost's split (build_host.c) */
} tilecost;

/* A unit: the tiles of one output tile (its partial sums, red > 1). 48
 * bytes (the 175B / 1,024-GPU plan has 24 M). */
typedef struct unitinfo {
    int op, first, red; /* tiles first .. first + red - 1 (global indices) */
    int ready;          /* task consumers wait for */
    int entry;          /* backward entry for gradients from outside, -1 until made */
    int n_unique;       /* distinct devices */
    int xhead;          /* first transfer from this unit, -1 if none */
    int phead;          /* first pair reading this unit, -1 if none */
    int rep, q;         /* the op's replica degree; this unit's replica index: units
                         * uu - q .. uu - q + rep - 1 compute the same tile (a group) */
    int gentry;         /* on a group's replica 0: its backward entry, -1 until made */
    signed char btag;   /* SS_BUILD_COLL_* carrying the output gradient to the members */
    signed char local;  /* partial sums whose consumers are replicas of the same work on
                         * every member: each member's gradient is already whole */
    signed char gsum;   /* the group's replicas are read by different consumer work: the
                         * output gradient is summed over the group (all-reduce) */
} unitinfo;

_Static_assert(sizeof(unitinfo) <= 48, "a unit stays within 48 bytes");

typedef struct xferinfo {
    int tensor, unit, dev, src;
    const ss_region *reg; /* a pair's (preg) */
    double bytes;
    int task, btask; /* forward transfer; its gradient transfer (-1 until made) */
    int block;       /* crosses pipeline stages under 1F1B: both transfers also hold
                      * src's and dev's streams, unless interleaved (build.c, holds) */
    int last_user;   /* global tile index of the last consumer */
    int next;        /* next transfer from the same unit */
    int sgr;         /* scatter-gather: 1/sgr of the bytes per rank (1: a plain send) */
    int sg, bsg;     /* its group's all-gather after the sends (forward: on the
                      * receivers; backward: on the senders), -1 if none; in an
                      * all-to-all group: the group's all-to-all */
    int a2a;         /* its all-to-all group (b->a2a), -1 if none (build_fwd.c) */
} xferinfo;

/* An expert-parallel all-to-all (build_fwd.c, alltoall_groups): the
 * transfers a2ax[x0 .. x0 + nx) among n devices (in a2ax right after
 * them), priced as one all-to-all of S bytes per device (op: the
 * producer; prio: the backward's priority key). */
typedef struct a2agroup {
    int x0, nx, n, bt, op, prio; /* bt: the backward all-to-all, -1 until made */
    double S;
} a2agroup;

typedef struct pairinfo {
    int unit, tile, xfer; /* consumer tile reads unit (xfer -1: same device) */
    int tensor, next;     /* tensor read; next pair reading the same unit */
} pairinfo;               /* the region read: *preg[] at the same index */

typedef struct needinfo { /* a region a member device of a unit reads */
    int dev, tensor;
    ss_region reg;
} needinfo;

typedef struct wentry {
    int w, dev, op, tile, task;
    ss_region reg;
} wentry;

/* A shard's entry: a backward task producing a gradient of it, on dev. */
typedef struct wref {
    int task, dev;
    int j; /* the tile */
} wref;

typedef struct shard {
    int first, count; /* entries in b->wr */
    int w;
    int64_t params;
    double bytes;
    int dev_off, n_dev; /* distinct devices in b->ipool */
    int minop, maxop;
    ss_region reg; /* its region of w */
    int tp; /* 1: one data-parallel group of a weight split by split_tp
             * (build_weights.c); its updates also wait for the device's
             * tensor-parallel all-reduce (b->tpar) */
} shard;

/* A device holding a weight replicated over tensor- and data-parallel
 * ranks (build_weights.c, split_tp): its smallest sample offset and the
 * region of that tile off the sample dim. */
typedef struct tpdev {
    int dev;
    int64_t slo;
    ss_region pkey;
} tpdev;

/* ---- memoization (see "Reuse across runs" in build.h) ------------------- */

#define KOP 4        /* configs remembered per op */
#define KEDGE 4      /* (producer config, consumer config) pairs remembered per edge */
#define MEMO_WORDS (4 << 20)
#define WMEMO_WORDS (16 << 20)

/* A config seen for one op, with the tiles it gives (costs included). */
typedef struct opslot {
    int id;          /* > 0 while the slot holds a config; unique per builder */
    uint64_t used;   /* LRU tick */
    int ndim, deg[SS_MAX_DIMS], red, ntiles;
    int *devs;       /* ntiles */
    tileinfo *tiles; /* ntiles, task ids not meaningful */
    tilecost *costs; /* ncosts: the distinct costs the tiles index */
    int ncosts;
    ss_tile *shapes; /* ntiles */
} opslot;

/* The pairs of one graph edge (consumer op, input) for one pair of configs:
 * consumer tile and producer unit (local indices), and apart (a hit reads
 * only the indices) the region read. */
typedef struct epair {
    int jl, ul;
} epair;

typedef struct edgeent {
    int idq, ido;    /* producer and consumer config ids, 0 = empty */
    uint64_t used;
    int n, mixes;    /* pairs; some pair links tiles of different micro-batches */
    epair *p;        /* [n] */
    ss_region *reg;  /* [n] */
} edgeent;

struct ss_builder {
    int (*stop)(void *ctx); /* polled while building (ss_build_set_stop) */
    void *stop_ctx;
    unsigned polls;
    const ss_graph *g;
    const ss_machine *m;
    ss_costmodel *cm;
    ss_plan_settings set;
    ss_queue_policy policy;
    ss_build_stats st;
    int n_ops, n_dev;

    tileinfo *tiles;
    int n_tiles, cap_tiles;
    const tilecost **opcost; /* [n_ops] this run's distinct costs of each op
                              * (tileinfo.cost indexes them): in the op's
                              * memo slot, or without memoization in cpool */
    int cap_opcost;
    tilecost *cpool; /* distinct costs computed in this run, op after op (with
                      * memoization: one op's, until its slot copies them) */
    int n_cpool, cap_cpool;
    int *cbase;      /* [n_ops] without memoization: each op's first entry in cpool */
    int cap_cbase;
    int *chash;      /* scratch of op_tiles: hash of the op's distinct costs */
    int cap_chash;
    ss_tile *shape_buf;     /* [n_tiles] shapes computed in this run */
    int cap_shape;
    const ss_tile **opshape; /* [n_ops] this run's tile shapes of each op: in
                              * shape_buf or in the op's memo slot (valid
                              * for the run: a slot is replaced only by its
                              * own op's next config) */
    int cap_opshape;
    int *tile_base, *unit_base; /* [n_ops + 1] */
    int cap_tb, cap_ub;
    unitinfo *units;
    int n_units, cap_units;
    xferinfo *xf;
    int n_xf, cap_xf;
    pairinfo *pairs;
    int n_pairs, cap_pairs;
    const ss_region **preg; /* [n_pairs]: the region each pair reads (needed region
                             * within the unit's output), apart: the passes over
                             * pairs mostly do not read it. It points into the
                             * edge's memo entry (stable for the run) or, for
                             * pairs computed and not memoized, into pbuf (set
                             * when pass_pairs ends: pbuf may move until then) */
    int cap_preg;
    ss_region *pbuf; /* regions of computed pairs not (yet) memoized, in pair order */
    int n_pbuf, cap_pbuf;
    wentry *we, *we2; /* one weight's entries (build_weights.c scratch) */
    int n_we, cap_we, cap_we2;
    int *widx, *wtmp; /* [n_we] index sort scratch */
    int cap_widx, cap_wtmp;
    wref *wr;         /* shard entries: shard s owns wr[s.first .. s.first + s.count) */
    int n_wr, cap_wr;
    int *wu_off, *wu_op, *wu_k; /* per weight tensor: the (op, weight slot) pairs reading it */
    int wu_tensors;   /* tensors wu_off was made for, 0 = not yet */
    int32_t *wval, *wkey; /* a weight's structure being encoded; its memo key */
    int cap_wval, cap_wkey;
    shard *sh;
    int n_sh, cap_sh;
    int *order;
    int cap_order;
    int64_t *zp, *zs; /* ZeRO-3 scratch (build_weights.c): (user op, shard) pairs; units
                         by (first device, op) */
    int cap_zp, cap_zs;
    int *zu, *zmark;  /* ZeRO-3 units (4 ints each); a mark per device */
    int cap_zu, cap_zmark;
    struct okey *okeys;
    int cap_okeys;
    int *ipool;
    int n_ipool, cap_ipool;
    int *res;
    int cap_res;
    int *gate; /* scratch per device (x micro-batch) */
    int cap_gate;
    int *flush; /* [n_flush = n_dev under gated 1F1B, else 0]: the task ending the
                 * device's last backward step; its updates wait for it (Megatron
                 * steps the optimizer after the pipeline schedule), -1 none */
    int n_flush, cap_flush;
    double *unkept; /* [n_tiles] of the forward dependencies pass: bytes of a tile's
                     * input gathered from its stage's other devices, which its
                     * saved activations leave out (build_fwd.c, regathered) */
    int cap_unkept;
    int *gsync;  /* [n_dev] pass 7: per device the last gradient reduction (all-reduce
                  * or reduce-scatter) issued on its sync stream, -1 none
                  * (build_weights.c, sync_chain); ZeRO-3: [micro-batches x
                  * n_dev], one stream order per micro-batch */
    int cap_gsync;
    int *tpar; /* [n_dev x tp_nst] pass 7 (build_weights.c, split_tp): per
                * device and pipeline stage the all-reduce of its
                * tensor-parallel group's split gradients, -1 none (a group
                * id while building) */
    int cap_tpar, tp_nst;
    tpdev *tpd; /* split_tp's scratch: the devices of one shard */
    int cap_tpd;
    int *tpgr; /* split_tp: per tensor-parallel group, its devices (dev_off,
                * n in ipool) */
    int cap_tpgr;
    double *tpgb; /* split_tp: per tensor-parallel group, its gradient bytes */
    int cap_tpgb;
    int *bhost; /* pass 7: per position in order[], for a split shard the
                 * position of the shard whose bucket it joins (-1: its own;
                 * build_weights.c, host_split) */
    int cap_bhost;
    int *bmem; /* pass 7: the shards of the bucket being closed */
    int cap_bmem;
    double *bcum; /* host_split's scratch: per position, its bucket's bytes
                   * up to it (-1: a shard in parts, or not in a bucket) */
    int cap_bcum;
    /* pass 7, issue 31 (build_weights.c): per tile, the weight-gradient step
     * split off its backward by reorder_backward (wgt, -1 none; n_wgt = 0
     * when not reordering) and the next iteration's forward under
     * synced_flags (nfw, n_nfw = 0 when off); t2j: task -> tile of the
     * forward, backward and weight-gradient tasks, anc: per device x
     * micro-batch the adjustment layer's backward */
    int *wgt, *nfw, *t2j, *anc;
    int n_wgt, n_nfw, cap_wgt, cap_nfw, cap_t2j, cap_anc;
    double *nfload; /* [n_dev] under synced_flags: the next forward's time per
                     * device (kept after a lean run, like nf_lo, nf_hi: the
                     * next forward's tasks, ids nf_lo .. nf_hi - 1) */
    int cap_nfload, nf_lo, nf_hi;
    ss_region *regs;
    int cap_regs;
    const ss_plan *plan; /* the plan of the run being built (borrowed, during ss_build_run) */
    ss_region *uhave; /* scratch of edge_pairs: each producer unit's output region */
    int cap_uhave;
    ss_range *giv;    /* scratch of edge_pairs: the unit grid's ranges per dim */
    /* Without memoization, pairs of one edge that read equal regions share
     * one pbuf entry (pidx: each pair's entry, until pass 3 ends; rtab: a
     * hash of the edge's entries, slots valid while rgen[slot] == gen) */
    int32_t *pidx;
    int cap_pidx;
    int32_t *rtab;
    uint32_t *rgen, gen;
    int cap_rtab, n_rtab; /* n_rtab: the edge's distinct entries */
    int cap_giv;
    int gating_ok; /* every data edge links tiles of the same micro-batch */
    int mem_pending; /* the last run succeeded and ss_build_memory has not run */
    struct mbkey *mbk;
    int cap_mbk;
    needinfo *need;
    int cap_need;
    double *hsum; /* scratch of build_host.c: per window pass sums */
    int cap_hsum;
    int *hfirst;  /* scratch of build_host.c: per device x micro-batch, per tile */
    int cap_hfirst;
    ss_coll_result coll;
    a2agroup *a2a;   /* this run's all-to-all groups */
    int n_a2a, cap_a2a;
    int *a2ax;       /* their transfers, then their devices */
    int n_a2ax, cap_a2ax;
    /* memoization across runs */
    int memo_on;
    int lean;           /* ss_build_set_lean: scratch released as soon as the passes are
                         * done with it (memo_on is then 0; routes and collective
                         * prices are still remembered, in memo) */
    int memo_ops;       /* n_ops the tables below were made for, 0 = none */
    opslot *slots;      /* [n_ops * KOP] */
    int *cur;           /* [n_ops] slot of each op's config in this run */
    int *placed;        /* [2 * n_ops]: the slot id and tile base of the tiles
                         * b->tiles holds for each op since its last run (id
                         * 0: none); ids are never reused, and within a run
                         * only op o writes its range, so an op whose config
                         * hits the same slot at the same base need not copy
                         * its tiles again (fwd and bwd are set every run) */
    int *edge_base;     /* [n_ops + 1] first edge of each consumer op */
    edgeent *edges;     /* [n_edges * KEDGE] */
    uint64_t tick;
    int next_id;
    ss_memo memo;       /* routes and collective costs */
    ss_memo wmemo;      /* weight structures (build_weights.c) */
    int32_t *kbuf;
    int cap_kbuf;
    ss_build_memo_stats mst;
    ss_coll_config ccfg; /* how collectives are priced (ss_build_set_coll) */
    char *score;        /* [n_ops] ss_build_score_op, made once per graph */
    int n_score;        /* ops it was made for, 0 = not yet */
    ss_build_sym *sym;  /* symmetric reduction (build.h), NULL = none */
    int sym_cross;      /* pass 7 of a reduced build: collectives span all blocks */
};


#define GROW(b, arr, cap, need, d)                                                           \
    do {                                                                                     \
        if (ss_grow((void **)&(b)->arr, &(b)->cap, (need), sizeof(*(b)->arr)))                  \
            return ss_diag_set((d), SS_ERR_NOMEM, "simulate: out of memory building tasks"); \
    } while (0)

/* GROW for arrays sized once per run: in lean mode (freed after the run,
 * ss_build_set_lean) exactly `need` entries, not the next power of two (the
 * 175B plan's tiles and units: 0.8 GB of address space less). */
#define GROW_RUN(b, arr, cap, need, d)                                                       \
    do {                                                                                     \
        if (!(b)->lean) {                                                                    \
            GROW(b, arr, cap, need, d);                                                      \
        } else if ((need) > (b)->cap) {                                                      \
            void *q_ = ss_realloc((b)->arr, (size_t)(need) * sizeof(*(b)->arr));             \
            if (!q_)                                                                         \
                return ss_diag_set((d), SS_ERR_NOMEM, "simulate: out of memory building tasks"); \
            (b)->arr = q_;                                                                   \
            (b)->cap = (need);                                                               \
        }                                                                                    \
    } while (0)

/* Free *p and zero its capacity (lean mode). */
#define DROP(b, arr, cap)                                                                    \
    do {                                                                                     \
        ss_free((b)->arr);                                                                   \
        (b)->arr = NULL;                                                                     \
        (b)->cap = 0;                                                                        \
    } while (0)

/* ---- small helpers ---------------------------------------------------- */

static inline int add_task(ss_taskgraph *tg, ss_task_kind kind, double dur, int prio, int op, int tile,
                    int mb, int aux, double bytes, int n_res, const int *res, ss_diag *d)
{
    ss_task_spec s;
    s.kind = kind;
    s.dur_us = dur;
    s.priority = prio;
    s.op = op;
    s.tile = tile;
    s.mb = mb;
    s.aux = aux;
    s.bytes = bytes;
    s.n_res = n_res;
    s.res = res;
    return ss_taskgraph_add(tg, &s, d);
}

/* The costs of tile j (global index) in this run. */
static inline const tilecost *tcost(const ss_builder *b, int j)
{
    const tileinfo *t = &b->tiles[j];
    return &b->opcost[t->op][t->cost];
}

/* The shape of tile j (global index) in this run: the stored one, or in
 * lean mode (which stores none) computed again into *buf, as op_tiles
 * computed it (ss_pconfig_tile). */
static inline const ss_tile *tshape(const ss_builder *b, int j, ss_tile *buf)
{
    int o = b->tiles[j].op;
    if (b->opshape)
        return &b->opshape[o][j - b->tile_base[o]];
    ss_pconfig_tile(b->g, ss_graph_op(b->g, o), ss_plan_config(b->plan, o), j - b->tile_base[o],
                    buf);
    return buf;
}

static inline int64_t volume(const ss_region *r)
{
    int64_t v = 1;
    for (int i = 0; i < r->ndim; i++)
        v *= r->r[i].hi > r->r[i].lo ? r->r[i].hi - r->r[i].lo : 0;
    return v;
}

static inline int region_cmp(const ss_region *a, const ss_region *b)
{
    if (a->ndim != b->ndim)
        return a->ndim < b->ndim ? -1 : 1;
    for (int i = 0; i < a->ndim; i++) {
        if (a->r[i].lo != b->r[i].lo)
            return a->r[i].lo < b->r[i].lo ? -1 : 1;
        if (a->r[i].hi != b->r[i].hi)
            return a->r[i].hi < b->r[i].hi ? -1 : 1;
    }
    return 0;
}

static inline int is_member(const ss_builder *b, const unitinfo *u, int dev)
{
    for (int r = 0; r < u->red; r++)
        if (b->tiles[u->first + r].dev == dev)
            return 1;
    return 0;
}

/* Bytes of every output region of a unit (all outputs of its op). */
static inline double unit_out_bytes(const ss_builder *b, const unitinfo *u)
{
    const ss_op *op = ss_graph_op(b->g, u->op);
    double bytes = 0;
    for (int k = 0; k < op->n_out; k++) {
        ss_region r;
        ss_tile tb;
        ss_op_output_region(b->g, op, tshape(b, u->first, &tb), k, &r);
        bytes += (double)volume(&r) *
                 (double)ss_dtype_size(ss_graph_tensor(b->g, op->outputs[k])->dtype);
    }
    return bytes;
}

/* Whether the stop callback asks to stop (checked every `every`-th call,
 * every a power of two); sets d. */
static inline int stopped(ss_builder *b, unsigned every, ss_diag *d)
{
    if (!b->stop || (++b->polls & (every - 1)) != 0 || !b->stop(b->stop_ctx))
        return 0;
    ss_diag_set(d, SS_ERR_INTERRUPTED, "simulation interrupted");
    return 1;
}

/* Point-to-point transfer task src -> dst of `bytes` (build.c); with
 * `block` it also holds the compute streams of src and dst (a blocking
 * send/receive pair between pipeline stages). The task id, or -1 with d
 * set. */
int ss_build_add_transfer(ss_builder *b, ss_taskgraph *tg, int src, int dst, double bytes, int op,
                          int aux, int prio, int block, ss_diag *d);

/* Distinct devices of a unit into b->ipool scratch at its end, not kept
 * (build.c): their number, or -1 with d set. */
int ss_build_unit_devices(ss_builder *b, const unitinfo *u, int **out, ss_diag *d);

/* Pass 3 (build_fwd.c): the pairs (consumer tile, producer unit) and
 * regions read; the replica each consumer reads; partial-sum collectives;
 * forward dependencies and transfers. Run in this order. */
ss_status ss_build_pass_pairs(ss_builder *b, ss_diag *d);
ss_status ss_build_pass_replicas(ss_builder *b);
ss_status ss_build_pass_partial(ss_builder *b, ss_taskgraph *tg, ss_diag *d);
ss_status ss_build_pass_fwd_deps(ss_builder *b, const ss_plan *p, ss_taskgraph *tg, ss_diag *d);
/* Bytes tile j keeps for its backward: its cost's saved bytes less what
 * the framework does not hold twice or gathers again (build_fwd.c). */
double ss_build_kept_bytes(const ss_builder *b, int j, double saved);
/* Bytes recomputed tile j keeps from its forward to its backward under
 * recompute mode r: the checkpoint (build_fwd.c). */
double ss_build_checkpoint_bytes(const ss_builder *b, int j, ss_recompute r);
/* Transfer task now moves 1/r of its bytes: same route and latency
 * (build_fwd.c). */
void ss_build_shrink_transfer(ss_builder *b, ss_taskgraph *tg, int task, int src, int dst, int r);
/* Whether transfer X holds both ends' compute streams: a stage send of
 * plain 1F1B, not of the interleaved schedule (build_fwd.c). */
int ss_build_holds(const ss_builder *b, const xferinfo *X);

/* Collective of `kind` over devs[0..n) (distinct), priced for cost_bytes,
 * recorded as moving `bytes` (build.c): the task id, or -1 with d set. */
/* The backward of transfer x of an all-to-all group (build_fwd.c): its
 * gradient transfer (just made) carries nothing and waits for the group's
 * backward all-to-all (made with the group's first gradient transfer),
 * which the consumers' backward tasks feed. Returns that all-to-all's
 * task, or -1 with d set. */
int ss_build_bwd_alltoall(ss_builder *b, ss_taskgraph *tg, int x, ss_diag *d);

int ss_build_add_collective(ss_builder *b, ss_taskgraph *tg, ss_coll_kind kind, const int *devs,
                            int n, double cost_bytes, double bytes, int op, int tile, int aux,
                            int prio, ss_diag *d);

/* Pass 7 (build_weights.c): weight memory, shards, gradient buckets and
 * their all-reduces, updates. */
ss_status ss_build_weights(ss_builder *b, ss_taskgraph *tg, ss_memory *mm, ss_diag *d);

/* Pass 5b (build_host.c): compute durations under host dispatch (the host
 * runs ahead of the GPU within a pass of a micro-batch) and the device
 * type's per-micro-batch overhead. Runs after pass_bwd. */
ss_status ss_build_host(ss_builder *b, ss_taskgraph *tg, ss_diag *d);

/* Op o's recompute mode: its pipeline stage's (ss_plan_stage_recompute). */
static inline ss_recompute ss_build_op_recompute(const ss_builder *b, int o)
{
    return ss_plan_recompute_uniform(&b->set) ? b->set.recompute
                                    : ss_plan_stage_recompute(&b->set,
                                                              ss_plan_config(b->plan, o)->stage);
}

/* Whether op o's tiles recompute their forward in the backward (and keep
 * no activations meanwhile) under its stage's recompute mode. */
static inline int ss_build_recomputed(const ss_builder *b, int o)
{
    ss_recompute r = ss_build_op_recompute(b, o);
    return r == SS_RECOMPUTE_FULL || (r == SS_RECOMPUTE_SELECTIVE && b->score[o]);
}

#endif /* SS_BUILD_IMPL_H */
