/*
 * hier_impl.h — what the hierarchical evaluator's two files share (hier.c:
 * plan analysis, the stage-level pipeline and the evaluation; hier_sub.c:
 * the sub-problems, a stage's ops for one micro-batch simulated with the
 * task-graph builder and engine, and their memo): the figures of a
 * sub-problem, the per-stage record and the evaluator's state. Not for use
 * outside those two files. Invariant: as hier.h's.
 */
#ifndef SS_HIER_IMPL_H
#define SS_HIER_IMPL_H

#include "simulator/hier.h"

#include "core/hash.h"

#include "simulator/engine.h"
#include "simulator/memory.h"
#include "simulator/plan_view.h"
#include "simulator/symmetry.h"
#include "simulator/taskgraph.h"

#include <stdint.h>
#include <string.h>

#define MEMO_MAX 4096   /* memo entries before it is cleared */
#define PERIOD_TOL 1e-6 /* relative tolerance of the periodicity check */
#define JMAX 32         /* joint collectives of shared weights per stage at d0 */

/* What one sub-problem (a stage's ops for one micro-batch) gives, for the
 * stage's first device d0. Doubles only: extrapolated field by field. */
typedef struct figs {
    double fwd;       /* forward span of one micro-batch (after its input arrived) */
    double bwd;       /* backward span (recompute included) */
    double tail;      /* from the last backward's end to the last sync/update end */
    double send;      /* the incoming stage send, per rank (0: none) */
    double gather;    /* the all-gather after a scatter-gather send (0: none) */
    double bwd_last;  /* backward span of the last micro-batch (its gradients synchronised) */
    double send_last; /* its gradient send to the previous stage, from its backward's end
                         (queueing behind the all-reduces on the network included) */
    double comp_fb;   /* d0's compute-stream busy time per micro-batch */
    double comp_f;    /* its forward part */
    double comp_upd;  /* d0's compute-stream busy time once (updates) */
    double comm_mb;   /* collectives at d0 per micro-batch (tensor parallel) */
    double comm_once; /* gradient collectives at d0 */
    double stat, weights, peak1, held; /* memory of d0: static, weights, peak of one
                                          micro-batch, bytes held at the forward's end */
    double recv;      /* bytes d0 receives from the previous stage per micro-batch */
    double ag;        /* distributed optimizer: d0's all-gathers of updated parameters */
    double tasks;     /* tasks simulated */
    double bop1, bop2; /* d0's operators in the backward (compute tasks after the forward's
                          end): the sum of their durations and of their squares; a send
                          arriving while d0 runs its backward finds it busy bop2 / (2 bop1)
                          longer on average (the length-biased residual of an operator) */
    /* A weight shared with other stages (a tied embedding) is synchronised
     * by collectives over all their devices (joint: at d0, in the order
     * they start; sync mode): each starts when every stage holding the
     * weight has reached it in its own order of collectives. */
    double jn;          /* joint collectives at d0 (0: none; JMAX + 1: too many) */
    double jr;          /* when the first is ready (its gradient made here), from the last
                           backward's end */
    double ja[JMAX];    /* d0 reaches joint collective j: from the previous one's end (j =
                           0: from the last backward's end, bulk: from the barrier) */
    double jd[JMAX];    /* its duration (the first passes: 0 where a lower stage owns it,
                           drop_joint_sync) */
    double jb;          /* from the last one's end to the sub-problem's end */
    /* ZeRO-3 (distopt 3): how long d0's data-parallel collectives of one
     * micro-batch (weight all-gathers, gradient reduce-scatters) run (the
     * union of their intervals) within the forward, within the backward and
     * after it; from the last one's end to the sub-problem's end (updates) */
    double lf, lb, lr, lpost;
    double pre;  /* ZeRO-3: bytes d0 prefetches for the next micro-batch's forward */
    double fpre; /* ZeRO-3: the forward's wait for those gathers (none after the first) */
} figs;
#define NFIG ((int)(sizeof(figs) / sizeof(double)))

typedef struct mentry {
    uint64_t key;
    figs f;
} mentry;

typedef struct stageinfo {
    int n, off;          /* ops: h->sops[off .. off + n) (op ids, ascending) */
    int base;            /* first device of its rank (lowest id) */
    int first, last;     /* first non-input op and last op (ids) */
    int s0, blk, reps;   /* repeated blocks: positions s0 .. s0 + reps*blk - 1 (reps 0: none) */
    uint64_t ekey;       /* the activations it receives: senders' ops and configs */
    figs f;
} stageinfo;

/* What analyse learns from one device list under one tile layout (outer,
 * sample degree ds, inner) and micro-batch count: whether every
 * micro-batch's rows equal the first's (bad: the first row, counted over
 * (o, i) with i stepping by the micro-batches, where they do not; -1 none),
 * the place_sums of the rows of micro-batch 0, and the last (pipeline rank,
 * local chunk) whose devices were checked against it (-1: none). Kept per
 * analyse call: ops sharing a device list (ss_plan_devlist_id) and a layout
 * scan it once. */
typedef struct lscan {
    unsigned stamp; /* the analyse call that filled it; another: empty */
    int id, outer, ds, inner;
    int bad;
    int rank, lc;
    uint64_t sum, wsum;
} lscan;

#define PMEMO 8 /* stage-level schedules remembered */

typedef struct pentry {
    uint64_t key;
    int P;
    double *end_b, *busy, *top; /* [stages]; as pipeline() fills them */
} pentry;

struct ss_hier {
    const ss_graph *g;
    const ss_machine *m;
    ss_costmodel *cm;
    ss_sim_config cfg;
    ss_hier_stats st;
    /* memo */
    mentry *memo;
    int memo_cap, memo_n;
    /* scratch */
    int *dhost, *drank;       /* per device: host, local rank */
    uint64_t *sig;            /* per op: ss_op_signature */
    /* of the plan analysed, borrowed from its view (plan_view.h): per op
     * sample dim, stage, index in its stage; the ops grouped by stage */
    const int *sd, *stage, *pos;
    ss_plan_view *own_view;   /* the view ss_hier_eval makes when given none */
    uint64_t *key;            /* per op */
    uint64_t *psum, *pwsum;   /* per op: place_sums of its devices */
    lscan *scan;              /* per (device list, layout): scan_list's results */
    int scan_cap;             /* entries (a power of two, > 2 x ops) */
    unsigned scan_stamp;      /* the current analyse call (entries of others are empty) */
    const int *sops;          /* ops grouped by stage (the view's) */
    int *devrank;             /* per device: its pipeline rank (stage mod pp), -1 none */
    unsigned char *devchunk;  /* per device x local chunk: the chunk uses the device */
    int cap_devchunk;
    int R, V;                 /* pipeline ranks and chunks per rank of the plan analysed */
    int *tmap;                /* per tensor: sub-graph tensor, -1 */
    int *subop;               /* per stage position: sub-graph op, -1 dropped */
    int *ext_ops;             /* per sub op: SUB_OWN, SUB_RECV or SUB_PEER */
    int *wr_off, *wr_ops;     /* per weight tensor: the ops that read it (CSR) */
    int cap_ext;
    int *devs;
    int cap_devs;
    stageinfo *stg;
    int cap_stg;
    double *peak;
    int cap_peak;
    int *ptask;               /* pipeline task ids */
    int cap_ptask;
    pentry pmemo[PMEMO];
    int pnext;
    ss_taskgraph *tg, *ptg; /* sub-problems; the pipeline */
    ss_memory *mm;
    ss_engine *e;
    ss_symmetry *sym; /* sub-problems reduced to one data-parallel block */
    int sym_off;      /* ss_hier_set_symmetry(h, 0) */
};

/* The memo keys' running hash: core/hash.h's memo mixer, by a short name. */
static inline uint64_t mix(uint64_t h, uint64_t v)
{
    return ss_hash_mix_fnv(h, v);
}

/* A double's bits into a memo key. */
static inline uint64_t mixd(uint64_t h, double x)
{
    uint64_t v;
    memcpy(&v, &x, sizeof v);
    return mix(h, v);
}

/* Tile layout of c around its sample dim sd: outer (dims before sd), the
 * sample degree, inner (dims after sd, replicas, reduction). */
static inline void layout(const ss_pconfig *c, int sd, int *outer, int *inner)
{
    int o = 1, in = c->rep * c->red;
    for (int k = 0; k < sd; k++)
        o *= c->deg[k];
    for (int k = sd + 1; k < c->ndim; k++)
        in *= c->deg[k];
    *outer = o;
    *inner = in;
}

/* Figures of stage s's sub-problem with kk blocks (kk = S->reps: all), in
 * the sync mode bulk, with the joint collectives of shared weights ready
 * jdelay after the last backward (-1: not modelled), memoized by content
 * (hier_sub.c). */
ss_status ss_hier_sub_one(ss_hier *h, const ss_plan *p, int s, int kk, int bulk, double jdelay,
                          figs *out, ss_diag *d);
/* The same, from k = 1, 2, 3 blocks extrapolated to the stage's repeats
 * where the per-block increments are periodic, else the whole stage. */
ss_status ss_hier_extrapolated(ss_hier *h, const ss_plan *p, int s, int bulk, double jdelay,
                               figs *out, ss_diag *d);
/* Stage s's figures into h->stg[s].f (hier_sub.c). */
ss_status ss_hier_stage_figs(ss_hier *h, const ss_plan *p, int s, ss_diag *d);

#endif /* SS_HIER_IMPL_H */
