/*
 * hier.c — the hierarchical evaluator (hier.h): repeated blocks simulated
 * once per distinct sub-problem with the task-graph builder and engine, the
 * pipeline at stage x micro-batch granularity by the same engine. A stage
 * is a plan stage: with interleaving (settings.virtual_stages v > 1) a
 * chunk, run on pipeline rank stage mod (stages / v) with the rank's other
 * chunks.
 *
 * Invariant: an evaluation reads the plan, never changes it; every figure
 * it reports comes from a sub-problem simulation (memoized by content) or
 * from the stage-level schedule, so two evaluations of one plan give
 * bit-identical results whatever the memo held.
 */
#include "simulator/hier.h"

#include "simulator/build.h"
#include "simulator/engine.h"
#include "simulator/memory.h"
#include "simulator/report.h"
#include "simulator/schedule.h"
#include "simulator/symmetry.h"
#include "simulator/taskgraph.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEMO_MAX 4096   /* memo entries before it is cleared */
#define PERIOD_TOL 1e-6 /* relative tolerance of the periodicity check */
#define JMAX 4          /* joint collectives of shared weights per stage at d0 */

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
    int *sd, *stage, *pos;    /* per op */
    uint64_t *key;            /* per op */
    uint64_t *psum, *pwsum;   /* per op: place_sums of its devices */
    lscan *scan;              /* per (device list, layout): scan_list's results */
    int scan_cap;             /* entries (a power of two, > 2 x ops) */
    unsigned scan_stamp;      /* the current analyse call (entries of others are empty) */
    int *sops;                /* ops grouped by stage */
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

static inline uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0x100000001b3ULL;
}

static uint64_t mixd(uint64_t h, double x)
{
    uint64_t v;
    memcpy(&v, &x, sizeof v);
    return mix(h, v);
}

ss_hier *ss_hier_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                     const ss_sim_config *cfg)
{
    if (!g || !m || !cm)
        return NULL;
    ss_hier *h = ss_calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->g = g;
    h->m = m;
    h->cm = cm;
    if (cfg)
        h->cfg = *cfg;
    if (h->cfg.mem_fraction <= 0)
        h->cfg.mem_fraction = 1.0;
    size_t no = (size_t)ss_graph_n_ops(g) + 1, nt = (size_t)ss_graph_n_tensors(g) + 1;
    size_t nd = (size_t)ss_machine_n_devices(m) + 1;
    h->dhost = ss_calloc(nd, sizeof *h->dhost);
    h->drank = ss_calloc(nd, sizeof *h->drank);
    h->sig = ss_calloc(no, sizeof *h->sig);
    h->sd = ss_calloc(no, sizeof *h->sd);
    h->stage = ss_calloc(no, sizeof *h->stage);
    h->pos = ss_calloc(no, sizeof *h->pos);
    h->key = ss_calloc(no, sizeof *h->key);
    h->psum = ss_calloc(no, sizeof *h->psum);
    h->pwsum = ss_calloc(no, sizeof *h->pwsum);
    for (h->scan_cap = 64; h->scan_cap < 2 * (int)no; h->scan_cap *= 2)
        ;
    h->scan = ss_calloc((size_t)h->scan_cap, sizeof *h->scan);
    h->sops = ss_calloc(no, sizeof *h->sops);
    h->subop = ss_calloc(no, sizeof *h->subop);
    h->devrank = ss_calloc(nd, sizeof *h->devrank);
    h->tmap = ss_calloc(nt, sizeof *h->tmap);
    h->tg = ss_taskgraph_new(0, 0);
    h->ptg = ss_taskgraph_new(0, 0);
    h->mm = ss_memory_new();
    h->e = ss_engine_new();
    if (!h->dhost || !h->drank || !h->sig || !h->sd || !h->stage || !h->pos || !h->key ||
        !h->psum || !h->pwsum || !h->scan || !h->sops || !h->subop || !h->devrank ||
        !h->tmap || !h->tg || !h->ptg || !h->mm || !h->e) {
        ss_hier_free(h);
        return NULL;
    }
    for (size_t i = 0; i < nt; i++)
        h->tmap[i] = -1;
    for (size_t i = 0; i + 1 < nd; i++) {
        h->dhost[i] = ss_machine_device(m, (int)i)->host;
        h->drank[i] = ss_machine_device(m, (int)i)->local_rank;
    }
    for (size_t i = 0; i + 1 < no; i++)
        h->sig[i] = ss_op_signature(g, (int)i);
    /* readers of each weight */
    h->wr_off = ss_calloc(nt + 1, sizeof *h->wr_off);
    int nw = 0;
    for (size_t i = 0; i + 1 < no; i++)
        nw += ss_graph_op(g, (int)i)->n_w;
    h->wr_ops = ss_calloc((size_t)nw + 1, sizeof *h->wr_ops);
    if (!h->wr_off || !h->wr_ops) {
        ss_hier_free(h);
        return NULL;
    }
    for (size_t i = 0; i + 1 < no; i++) {
        const ss_op *op = ss_graph_op(g, (int)i);
        for (int w = 0; w < op->n_w; w++)
            h->wr_off[op->weights[w] + 1]++;
    }
    for (size_t i = 0; i + 1 < nt; i++)
        h->wr_off[i + 1] += h->wr_off[i];
    for (size_t i = 0; i + 1 < no; i++) {
        const ss_op *op = ss_graph_op(g, (int)i);
        for (int w = 0; w < op->n_w; w++)
            h->wr_ops[h->wr_off[op->weights[w]]++] = (int)i;
    }
    for (size_t i = nt; i > 0; i--)
        h->wr_off[i] = h->wr_off[i - 1];
    h->wr_off[0] = 0;
    return h;
}

void ss_hier_free(ss_hier *h)
{
    if (!h)
        return;
    ss_free(h->memo);
    for (int i = 0; i < PMEMO; i++) {
        ss_free(h->pmemo[i].end_b);
        ss_free(h->pmemo[i].busy);
        ss_free(h->pmemo[i].top);
    }
    ss_free(h->dhost);
    ss_free(h->drank);
    ss_free(h->sig);
    ss_free(h->sd);
    ss_free(h->stage);
    ss_free(h->pos);
    ss_free(h->key);
    ss_free(h->psum);
    ss_free(h->pwsum);
    ss_free(h->scan);
    ss_free(h->sops);
    ss_free(h->subop);
    ss_free(h->ext_ops);
    ss_free(h->wr_off);
    ss_free(h->wr_ops);
    ss_free(h->devrank);
    ss_free(h->devchunk);
    ss_free(h->tmap);
    ss_free(h->devs);
    ss_free(h->stg);
    ss_free(h->peak);
    ss_free(h->ptask);
    ss_taskgraph_free(h->tg);
    ss_taskgraph_free(h->ptg);
    ss_memory_free(h->mm);
    ss_engine_free(h->e);
    ss_sym_free(h->sym);
    ss_free(h);
}

void ss_hier_set_symmetry(ss_hier *h, int on)
{
    h->sym_off = !on;
}

const ss_hier_stats *ss_hier_stats_of(const ss_hier *h)
{
    return h ? &h->st : NULL;
}

/* ---- memo ---------------------------------------------------------------- */

static const figs *memo_get(const ss_hier *h, uint64_t key)
{
    if (!h->memo_cap)
        return NULL;
    for (int i = (int)(key & (uint64_t)(h->memo_cap - 1));; i = (i + 1) & (h->memo_cap - 1)) {
        if (h->memo[i].key == key)
            return &h->memo[i].f;
        if (!h->memo[i].key)
            return NULL;
    }
}

static int memo_put(ss_hier *h, uint64_t key, const figs *f)
{
    if (h->memo_n >= MEMO_MAX) {
        memset(h->memo, 0, (size_t)h->memo_cap * sizeof *h->memo);
        h->memo_n = 0;
    }
    if (2 * (h->memo_n + 1) > h->memo_cap) {
        int nc = h->memo_cap ? 2 * h->memo_cap : 64;
        mentry *nm = ss_calloc((size_t)nc, sizeof *nm);
        if (!nm)
            return -1;
        for (int i = 0; i < h->memo_cap; i++)
            if (h->memo[i].key) {
                int j = (int)(h->memo[i].key & (uint64_t)(nc - 1));
                while (nm[j].key)
                    j = (j + 1) & (nc - 1);
                nm[j] = h->memo[i];
            }
        ss_free(h->memo);
        h->memo = nm;
        h->memo_cap = nc;
    }
    int i = (int)(key & (uint64_t)(h->memo_cap - 1));
    while (h->memo[i].key)
        i = (i + 1) & (h->memo_cap - 1);
    h->memo[i].key = key;
    h->memo[i].f = *f;
    h->memo_n++;
    return 0;
}

/* ---- plan analysis -------------------------------------------------------- */

/* Tile layout of c around its sample dim sd: outer (dims before sd), the
 * sample degree, inner (dims after sd, replicas, reduction). */
static void layout(const ss_pconfig *c, int sd, int *outer, int *inner)
{
    int o = 1, in = c->rep * c->red;
    for (int k = 0; k < sd; k++)
        o *= c->deg[k];
    for (int k = sd + 1; k < c->ndim; k++)
        in *= c->deg[k];
    *outer = o;
    *inner = in;
}

#define PLACE_C 0x10000u            /* a device's place: host * PLACE_C + local rank */
#define PLACE_A 0x9e3779b97f4a7c15ULL /* position weights: powers of this (odd) */

/* The devices of c restricted to micro-batch 0 of every data-parallel
 * rank, as a position-weighted sum of their places (mod 2^64): *sum =
 * sum_j A^j (host_j * C + rank_j), *wsum = sum_j A^j. Relative to a base
 * device on host hb the sum is *sum - hb * C * *wsum, so the scan that
 * reads the devices once (analyse) can hash them before the stage's base
 * device is known. */
static void place_sums(const ss_hier *h, const int *row, int n, uint64_t *pw, uint64_t *sum,
                       uint64_t *wsum)
{
    for (int j = 0; j < n; j++) {
        int dev = row[j];
        *sum += *pw * ((uint64_t)(uint32_t)h->dhost[dev] * PLACE_C + (uint32_t)h->drank[dev]);
        *wsum += *pw;
        *pw *= PLACE_A;
    }
}

/* Hash of c's degrees and its devices' places (place_sums) relative to
 * the host of device base. */
static uint64_t cfg_hash(const ss_hier *h, const ss_pconfig *c, uint64_t sum, uint64_t wsum,
                         int base)
{
    uint64_t k = mix(0x51, (uint64_t)c->ndim);
    for (int i = 0; i < c->ndim; i++)
        k = mix(k, (uint64_t)c->deg[i]);
    k = mix(mix(k, (uint64_t)c->red), (uint64_t)c->rep);
    return mix(k, sum - (uint64_t)(uint32_t)h->dhost[base] * PLACE_C * wsum);
}

/* The scan of op o's device list (config c, layout outer x ds x inner, M
 * micro-batches) in this analyse call, made now if not made yet. */
static lscan *scan_list(ss_hier *h, const ss_plan *p, int o, const ss_pconfig *c, int outer,
                        int ds, int inner, int M)
{
    int id = ss_plan_devlist_id(p, o);
    uint64_t k = mix(mix(mix(mix(0x5CA, (uint64_t)id), (uint64_t)outer), (uint64_t)ds),
                     (uint64_t)inner);
    int mask = h->scan_cap - 1, at = (int)(k & (uint64_t)mask);
    lscan *e;
    for (;; at = (at + 1) & mask) { /* at most n_ops entries per call: never full */
        e = &h->scan[at];
        if (e->stamp != h->scan_stamp)
            break;
        if (e->id == id && e->outer == outer && e->ds == ds && e->inner == inner)
            return e;
    }
    e->stamp = h->scan_stamp;
    e->id = id;
    e->outer = outer;
    e->ds = ds;
    e->inner = inner;
    e->bad = -1;
    e->rank = e->lc = -1;
    e->sum = e->wsum = 0;
    uint64_t pw = 1;
    for (int oo = 0, r = 0; oo < outer; oo++)
        for (int i = 0; i < ds; i += M, r++) {
            const int *row = c->devices + ((int64_t)oo * ds + i) * inner;
            /* rows i+1 .. i+M-1 equal row i: the block shifted by one row */
            if (M > 1 && e->bad < 0 &&
                memcmp(row + inner, row, (size_t)(M - 1) * inner * sizeof *row))
                e->bad = r;
            place_sums(h, row, inner, &pw, &e->sum, &e->wsum);
        }
    return e;
}

/* c restricted to micro-batch 0 of every data-parallel rank into out, its
 * devices into devs (room for c->ntiles / mb). */
static void restrict_cfg(const ss_pconfig *c, int sd, int mb, ss_pconfig *out, int *devs)
{
    int outer, inner, ds = c->deg[sd], dd = ds / mb;
    layout(c, sd, &outer, &inner);
    *out = *c;
    out->deg[sd] = dd;
    out->ntiles = c->ntiles / mb;
    out->devices = devs;
    for (int o = 0; o < outer; o++)
        for (int i = 0; i < dd; i++)
            memcpy(devs + ((int64_t)o * dd + i) * inner,
                   c->devices + ((int64_t)o * ds + (int64_t)i * mb) * inner,
                   (size_t)inner * sizeof *devs);
}

static int sample_dim(const ss_graph *g, const ss_op *op)
{
    if (op->n_out < 1)
        return -1;
    const ss_tensor *t = ss_graph_tensor(g, op->outputs[0]);
    for (int k = 0; k < t->ndim; k++)
        if (t->kind[k] == SS_DIM_SAMPLE)
            return k;
    return -1;
}

#define UNSUP(...) ss_diag_set(d, SS_ERR_UNSUPPORTED, "hierarchical evaluator: " __VA_ARGS__)

/* Check the plan's form, fill per-op sample dims and stages, per-device
 * stages, the stages' op lists, devices and per-op keys. */
static ss_status analyse(ss_hier *h, const ss_plan *p, ss_diag *d)
{
    const ss_graph *g = h->g;
    const ss_machine *m = h->m;
    const ss_plan_settings *set = ss_plan_settings_get(p);
    int n = ss_graph_n_ops(g), nd = ss_machine_n_devices(m);
    int P = set->stages < 1 ? 1 : set->stages, M = set->microbatches < 1 ? 1 : set->microbatches;
    int V = set->virtual_stages > 1 ? set->virtual_stages : 1, R = P / V;
    if (set->schedule != SS_PIPE_GPIPE && set->schedule != SS_PIPE_1F1B)
        return UNSUP("unknown pipeline schedule");
    if (V > 1 && (P % V || R < 2 || set->schedule != SS_PIPE_1F1B || M % R))
        return UNSUP("virtual_stages = %d with %d stages, %d micro-batches and the %s schedule "
                     "is not an interleaved 1F1B pipeline",
                     V, P, M, set->schedule == SS_PIPE_1F1B ? "1F1B" : "GPipe");
    if (ss_grow((void **)&h->stg, &h->cap_stg, P, sizeof *h->stg) ||
        ss_grow((void **)&h->devchunk, &h->cap_devchunk, nd * V, sizeof *h->devchunk))
        return ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
    memset(h->stg, 0, (size_t)P * sizeof *h->stg);
    if (++h->scan_stamp == 0) { /* wrapped: empty every entry */
        memset(h->scan, 0, (size_t)h->scan_cap * sizeof *h->scan);
        h->scan_stamp = 1;
    }
    h->R = R;
    h->V = V;
    memset(h->devchunk, 0, (size_t)nd * V);
    for (int i = 0; i < nd; i++)
        h->devrank[i] = -1;
    int D = 0, type = -1;
    for (int o = 0; o < n; o++) {
        const ss_op *op = ss_graph_op(g, o);
        const ss_pconfig *c = ss_plan_config(p, o);
        int sd = sample_dim(g, op);
        if (sd < 0 || sd >= c->ndim)
            return UNSUP("operator \"%s\" has no sample dimension", op->name);
        if (c->deg[sd] % M)
            return UNSUP("operator \"%s\": sample degree %d is not a multiple of the %d "
                         "micro-batches",
                         op->name, c->deg[sd], M);
        int dop = c->deg[sd] / M;
        if (!D)
            D = dop;
        else if (dop != D)
            return UNSUP("operator \"%s\" splits its samples %d ways, others %d", op->name,
                         c->deg[sd], D * M);
        if (c->stage < 0 || c->stage >= P)
            return UNSUP("operator \"%s\" is in stage %d of %d", op->name, c->stage, P);
        h->sd[o] = sd;
        h->stage[o] = c->stage;
        h->stg[c->stage].n++;
        int outer, inner, ds = c->deg[sd], rank = c->stage % R, lc = c->stage / R;
        layout(c, sd, &outer, &inner);
        lscan *ls = scan_list(h, p, o, c, outer, ds, inner, M);
        h->psum[o] = ls->sum;
        h->pwsum[o] = ls->wsum;
        /* the devices of a list already checked for this rank and chunk
         * pass again (the checks below only record rank and chunk) */
        if (ls->bad < 0 && ls->rank == rank && ls->lc == lc)
            continue;
        for (int oo = 0, r = 0; oo < outer; oo++)
            for (int i = 0; i < ds; i += M, r++) {
                const int *row = c->devices + ((int64_t)oo * ds + i) * inner;
                if (r == ls->bad)
                    return UNSUP("operator \"%s\" runs its micro-batches on different "
                                 "devices",
                                 op->name);
                for (int j = 0; j < inner; j++) {
                    int dev = row[j];
                    if (h->devrank[dev] < 0) {
                        h->devrank[dev] = rank;
                        int ty = ss_machine_device(m, dev)->type;
                        if (type < 0)
                            type = ty;
                        else if (ty != type)
                            return UNSUP("the plan uses devices of more than one type");
                    } else if (h->devrank[dev] != rank) {
                        if (V == 1)
                            return UNSUP("device %d holds ops of stages %d and %d", dev,
                                         h->devrank[dev], c->stage);
                        return UNSUP("device %d holds ops of pipeline ranks %d and %d (stage "
                                     "%d): a chunk must run on its rank's devices",
                                     dev, h->devrank[dev], rank, c->stage);
                    }
                    h->devchunk[(int64_t)dev * V + lc] = 1;
                }
            }
        ls->rank = rank;
        ls->lc = lc;
    }
    /* interleaved: every chunk of a rank uses all of the rank's devices */
    for (int i = 0; V > 1 && i < nd; i++)
        for (int lc = 0; h->devrank[i] >= 0 && lc < V; lc++)
            if (!h->devchunk[(int64_t)i * V + lc])
                return UNSUP("stage %d (chunk %d of pipeline rank %d) does not use device %d, "
                             "which its rank's other chunks use: chunks of a rank must run on "
                             "the same devices",
                             lc * R + h->devrank[i], lc, h->devrank[i], i);
    /* stages: op lists, devices */
    for (int s = 0, off = 0; s < P; s++) {
        if (!h->stg[s].n)
            return UNSUP("stage %d has no operators", s);
        h->stg[s].off = off;
        off += h->stg[s].n;
        h->stg[s].n = 0;
        h->stg[s].base = -1;
        h->stg[s].first = -1;
    }
    for (int o = 0; o < n; o++) {
        stageinfo *S = &h->stg[h->stage[o]];
        h->pos[o] = S->n;
        h->sops[S->off + S->n++] = o;
        if (S->first < 0 && ss_graph_op(g, o)->type != SS_OP_INPUT)
            S->first = o;
        S->last = o;
    }
    for (int i = 0; i < nd; i++)
        for (int c = h->devrank[i]; c >= 0 && c < P; c += R)
            if (h->stg[c].base < 0)
                h->stg[c].base = i;
    for (int s = 0; s < P; s++)
        if (h->stg[s].first < 0)
            return UNSUP("stage %d has only graph inputs", s);
    /* keys; data edges must stay in a stage or go to the next one. An
     * input from the previous stage counts as made just before the stage's
     * first op (graph inputs aside), so that a stage's first block looks like its others (its
     * sender's config enters the stage's sub-problem key apart) */
    for (int s = 0; s < P; s++)
        h->stg[s].ekey = 0x5E;
    for (int o = 0; o < n; o++) {
        const ss_op *op = ss_graph_op(g, o);
        int s = h->stage[o];
        uint64_t k = mix(h->sig[o], cfg_hash(h, ss_plan_config(p, o), h->psum[o], h->pwsum[o],
                                             h->stg[s].base));
        for (int i = 0; i < op->n_in; i++) {
            const ss_tensor *t = ss_graph_tensor(g, op->inputs[i]);
            int q = t->producer;
            if (h->stage[q] == s) {
                k = mix(k, (uint64_t)(h->pos[o] - h->pos[q]));
                continue;
            }
            if (h->stage[q] != s - 1)
                return UNSUP("operator \"%s\" (stage %d) reads \"%s\" from stage %d: only "
                             "edges to the next stage",
                             op->name, s, t->name, h->stage[q]);
            const ss_op *qo = ss_graph_op(g, q);
            if (qo->outputs[0] != t->id || ss_plan_config(p, q)->red > 1)
                return UNSUP("stage %d receives \"%s\" in a form it cannot model", s, t->name);
            k = mix(k, (uint64_t)(h->pos[o] - h->pos[h->stg[s].first] + 1));
            uint64_t e = mix(mix(h->sig[q], (uint64_t)h->pos[o]),
                             cfg_hash(h, ss_plan_config(p, q), h->psum[q], h->pwsum[q],
                                      h->stg[s].base));
            h->stg[s].ekey = mix(h->stg[s].ekey, e);
        }
        /* readers of its weights in other stages (a tied embedding), as placed */
        for (int w = 0; w < op->n_w; w++)
            for (int r = h->wr_off[op->weights[w]]; r < h->wr_off[op->weights[w] + 1]; r++) {
                int q = h->wr_ops[r];
                if (h->stage[q] != s)
                    k = mix(mix(k, h->sig[q]), cfg_hash(h, ss_plan_config(p, q), h->psum[q],
                                                        h->pwsum[q], h->stg[s].base));
            }
        h->key[o] = k;
    }
    return SS_OK;
}

/* The longest run of identical blocks in stage s (positions s0 .. s0 +
 * reps*blk - 1); reps = 0 when no block repeats. */
static void find_blocks(ss_hier *h, stageinfo *S)
{
    const int *ops = h->sops + S->off;
    int n = S->n, best = 0;
    S->s0 = S->blk = S->reps = 0;
    for (int k = 1; 2 * k <= n; k++)
        for (int s0 = 0; s0 + 2 * k <= n && n - s0 > best; s0++) {
            int r = 1;
            while (s0 + (r + 1) * k <= n) {
                int same = 1;
                for (int j = 0; j < k && same; j++)
                    same = h->key[ops[s0 + j]] == h->key[ops[s0 + r * k + j]];
                if (!same)
                    break;
                r++;
            }
            if (r >= 2 && r * k > best) {
                best = r * k;
                S->s0 = s0;
                S->blk = k;
                S->reps = r;
            }
        }
}

/* ---- sub-problems --------------------------------------------------------- */

static int kept(const stageinfo *S, int j, int kk)
{
    return !S->reps || j < S->s0 + kk * S->blk || j >= S->s0 + S->reps * S->blk;
}

/* Whether stage s reads a weight that a lower stage reads too (a tied
 * embedding's output layer): that weight's gradient is synchronised after
 * the lower stage's last backward, with the lower stage's figures. */
static int shares_down(const ss_hier *h, int s)
{
    const stageinfo *S = &h->stg[s];
    for (int j = 0; j < S->n; j++) {
        const ss_op *op = ss_graph_op(h->g, h->sops[S->off + j]);
        for (int w = 0; w < op->n_w; w++)
            for (int r = h->wr_off[op->weights[w]]; r < h->wr_off[op->weights[w] + 1]; r++)
                if (h->stage[h->wr_ops[r]] < s)
                    return 1;
    }
    return 0;
}

/* Key of stage s's sub-problem with kk blocks. */
static uint64_t sub_key(const ss_hier *h, const ss_plan *p, int s, int kk)
{
    const stageinfo *S = &h->stg[s];
    const ss_plan_settings *set = ss_plan_settings_get(p);
    uint64_t k = mix(mix(0xB10C, (uint64_t)kk), S->ekey);
    for (int j = 0; j < S->n; j++)
        if (kept(S, j, kk))
            k = mix(k, h->key[h->sops[S->off + j]]);
    k = mix(k, (uint64_t)set->microbatches);
    k = mix(k, (uint64_t)set->schedule);
    k = mix(k, (uint64_t)set->queue);
    k = mix(k, (uint64_t)set->sync);
    k = mixd(k, set->bucket_bytes);
    k = mix(k, (uint64_t)set->priority);
    k = mix(k, (uint64_t)set->reorder_backward);
    k = mix(k, (uint64_t)set->recompute);
    k = mix(k, (uint64_t)set->distopt);
    k = mix(k, (uint64_t)(set->virtual_stages > 1));
    k = mix(k, (uint64_t)ss_machine_device(h->m, S->base)->type);
    k = mix(k, (uint64_t)h->cfg.skip_memory);
    k = mix(k, (uint64_t)shares_down(h, s));
    return k ? k : 1;
}

/* Scale the sample dims of an input's or reshape's target shape by 1/mb. */
static void scale_attrs(const ss_tensor *out, int mb, ss_op_attrs *a)
{
    for (int i = 0; i < a->ndim && i < out->ndim; i++)
        if (out->kind[i] == SS_DIM_SAMPLE)
            a->shape[i] /= mb;
}

/* Build stage s's sub-problem with kk blocks (graph and plan), simulate it
 * and extract its figures. bulk: the gradient synchronisation waits for
 * the end of the backward (the sync mode is bulk), so that the backward
 * span is that of a micro-batch whose gradients are not synchronised. */
/* In stage s's sub-problem (built into h->tg), the synchronisation of a
 * weight shared with a lower stage takes no time: in the pipeline it waits
 * for that stage's last backward and is counted there (the lowest stage
 * holding a shared weight owns its synchronisation), so it must not
 * overlap stage s's own last backward here. Its collectives are the
 * gradient collectives over devices of other stages; its updates follow
 * them. */
/* Whether task t of stage s's sub-problem is a gradient collective over
 * devices of another pipeline rank too (a shared weight's). */
static int joint_coll(const ss_hier *h, const ss_taskgraph *tg, int t, int s)
{
    if (tg->kind[t] != SS_TASK_COLLECTIVE || tg->aux[t] != SS_BUILD_COLL_GRAD)
        return 0;
    const int32_t *rs = ss_taskgraph_res(tg, t);
    for (int k = 0; k < ss_taskgraph_n_res(tg, t); k++) {
        int c = rs[k] - tg->n_devices;
        for (int e = 0; c >= 0 && e < 2; e++) {
            int dev = tg->chan_dev[2 * c + e];
            if (dev >= 0 && h->devrank[dev] >= 0 && h->devrank[dev] != s % h->R)
                return 1;
        }
    }
    return 0;
}

/* Whether task t of tg runs on device dev or a channel of it. */
static int uses_dev(const ss_taskgraph *tg, int t, int dev)
{
    const int32_t *rs = ss_taskgraph_res(tg, t);
    for (int k = 0; k < ss_taskgraph_n_res(tg, t); k++) {
        int r = rs[k];
        if (r < tg->n_devices ? r == dev
                              : tg->chan_dev[2 * (r - tg->n_devices)] == dev ||
                                    tg->chan_dev[2 * (r - tg->n_devices) + 1] == dev)
            return 1;
    }
    return 0;
}

static double drop_joint_sync(ss_hier *h, int s, int d0)
{
    ss_taskgraph *tg = h->tg;
    double upd = 0; /* the updates dropped on the stage's first device */
    for (int t = 0; t < tg->n_tasks; t++) {
        if (!joint_coll(h, tg, t, s))
            continue;
        tg->dur[t] = 0;
        for (int k = tg->succ_off[t]; k < tg->succ_off[t + 1]; k++) {
            int u = tg->succ[k];
            if (tg->kind[u] != SS_TASK_UPDATE)
                continue;
            if (ss_taskgraph_n_res(tg, u) == 1 && ss_taskgraph_res(tg, u)[0] == d0)
                upd += tg->dur[u];
            tg->dur[u] = 0;
        }
    }
    return upd;
}

/* Sub-graph ops and where their configs come from. */
typedef struct subctx {
    ss_graph *sg;
    int M, n;
    int *origin;  /* per sub op: the original op whose config it takes */
    int *xkind;   /* per sub op: SUB_OWN, SUB_RECV, SUB_PEER */
    int *touched; /* tensors whose tmap entries to reset */
    int ntouched;
} subctx;

enum { SUB_OWN = 0, SUB_RECV = 1, SUB_PEER = 2 };

/* An input op carrying tensor tid (made by op `origin`, whose config it
 * takes) into the sub-graph; tmap[tid] its tensor. -1 on error. */
static int add_input(ss_hier *h, subctx *x, int tid, int kind, ss_diag *d)
{
    const ss_tensor *t = ss_graph_tensor(h->g, tid);
    ss_op_spec in;
    memset(&in, 0, sizeof in);
    char name[SS_NAME_MAX + 8];
    snprintf(name, sizeof name, "%s.%s", kind == SUB_RECV ? "recv" : "peer", t->name);
    in.name = name;
    in.type = SS_OP_INPUT;
    in.attrs.ndim = t->ndim;
    for (int k = 0; k < t->ndim; k++) {
        in.attrs.shape[k] = t->shape[k];
        in.attrs.kind[k] = t->kind[k];
    }
    in.attrs.dtype = t->dtype;
    scale_attrs(t, x->M, &in.attrs);
    ss_diag ld;
    ss_diag_init(&ld);
    int id = ss_graph_add_op(x->sg, &in, &ld);
    if (id < 0) {
        ss_diag_set(d, ld.status == SS_ERR_NOMEM ? SS_ERR_NOMEM : SS_ERR_UNSUPPORTED,
                    "hierarchical evaluator: cannot cut the graph at \"%s\": %s", t->name, ld.msg);
        return -1;
    }
    x->origin[id] = t->producer;
    x->xkind[id] = kind;
    x->n = id + 1;
    if (kind == SUB_RECV) {
        /* a stand-in producer with a backward on the sender's devices, so
         * that the builder sends the gradient back as in the pipeline */
        ss_op_spec dr;
        memset(&dr, 0, sizeof dr);
        snprintf(name, sizeof name, "send.%s", t->name);
        dr.name = name;
        dr.type = SS_OP_DROPOUT;
        dr.attrs.rate = 0.1;
        dr.n_in = 1;
        dr.inputs[0] = ss_graph_out(x->sg, id);
        dr.n_w = -1;
        if ((id = ss_graph_add_op(x->sg, &dr, &ld)) < 0) {
            ss_diag_set(d, ld.status == SS_ERR_NOMEM ? SS_ERR_NOMEM : SS_ERR_UNSUPPORTED,
                        "hierarchical evaluator: cannot cut the graph at \"%s\": %s", t->name,
                        ld.msg);
            return -1;
        }
        x->origin[id] = t->producer;
        x->xkind[id] = kind;
        x->n = id + 1;
    }
    h->tmap[tid] = ss_graph_out(x->sg, id);
    x->touched[x->ntouched++] = tid;
    return id;
}

/* Add op (the original `o`) with inputs in[] and its weights (shared ones
 * mapped through tmap, the others made anew). -1 on error (d set). */
static int add_copy(ss_hier *h, subctx *x, int o, const int *in, int kind, ss_diag *d)
{
    const ss_op *op = ss_graph_op(h->g, o);
    ss_op_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.name = op->name;
    spec.type = op->type;
    spec.attrs = op->attrs;
    if (op->type == SS_OP_INPUT || op->type == SS_OP_RESHAPE)
        scale_attrs(ss_graph_tensor(h->g, op->outputs[0]), x->M, &spec.attrs);
    spec.n_in = op->n_in;
    memcpy(spec.inputs, in, (size_t)op->n_in * sizeof *in);
    int mapped = 0;
    for (int i = 0; i < op->n_w; i++)
        mapped += h->tmap[op->weights[i]] >= 0;
    if (mapped && mapped != op->n_w) {
        ss_diag_set(d, SS_ERR_UNSUPPORTED,
                    "hierarchical evaluator: operator \"%s\" shares some of its weights only",
                    op->name);
        return -1;
    }
    spec.n_w = mapped ? op->n_w : -1;
    for (int i = 0; mapped && i < op->n_w; i++)
        spec.weights[i] = h->tmap[op->weights[i]];
    ss_diag ld;
    ss_diag_init(&ld);
    int id = ss_graph_add_op(x->sg, &spec, &ld);
    if (id < 0) {
        ss_diag_set(d, ld.status == SS_ERR_NOMEM ? SS_ERR_NOMEM : SS_ERR_UNSUPPORTED,
                    "hierarchical evaluator: cannot rebuild operator \"%s\" for one "
                    "micro-batch: %s",
                    op->name, ld.msg);
        return -1;
    }
    const ss_op *so = ss_graph_op(x->sg, id);
    for (int i = 0; !mapped && i < op->n_w && i < so->n_w; i++) {
        h->tmap[op->weights[i]] = so->weights[i];
        x->touched[x->ntouched++] = op->weights[i];
    }
    for (int i = 0; i < op->n_out; i++) {
        const ss_tensor *a = ss_graph_tensor(h->g, op->outputs[i]);
        const ss_tensor *b2 = ss_graph_tensor(x->sg, so->outputs[i]);
        for (int k = 0; k < a->ndim; k++)
            if (b2->shape[k] != (a->kind[k] == SS_DIM_SAMPLE ? a->shape[k] / x->M : a->shape[k])) {
                ss_diag_set(d, SS_ERR_UNSUPPORTED,
                            "hierarchical evaluator: operator \"%s\" does not scale with the "
                            "micro-batch",
                            op->name);
                return -1;
            }
    }
    x->origin[id] = o;
    x->xkind[id] = kind;
    x->n = id + 1;
    return id;
}

/* What task t of stage s's sub-problem (ns ops) belongs to: SUB_OWN for
 * the stage's own tasks, among them the synchronisation of a weight shared
 * with another stage (its collectives and the updates on the stage's
 * devices, which name the weight's first reader, maybe a peer), else the
 * SUB_RECV or SUB_PEER of its op. */
static int ext_of(const ss_hier *h, const ss_taskgraph *tg, int t, int ns, int s)
{
    int o = tg->op[t];
    if (o < 0 || o >= ns || !h->ext_ops[o])
        return SUB_OWN;
    if (tg->kind[t] == SS_TASK_UPDATE && h->devrank[ss_taskgraph_res(tg, t)[0]] == s % h->R)
        return SUB_OWN;
    if (joint_coll(h, tg, t, s))
        return SUB_OWN;
    return h->ext_ops[o];
}

/* Add to the sub-graph the readers of op o's weights in stages below s
 * (lower) or above it (!lower) that it does not hold yet, each with input
 * ops of its own. -1 on error (d set). */
static int add_peers(ss_hier *h, subctx *x, int s, int o, int lower, ss_diag *d)
{
    const ss_op *op = ss_graph_op(h->g, o);
    int in[SS_MAX_INPUTS];
    for (int w = 0; w < op->n_w; w++)
        for (int r = h->wr_off[op->weights[w]]; r < h->wr_off[op->weights[w] + 1]; r++) {
            int q = h->wr_ops[r], dup = 0;
            if (h->stage[q] == s || (h->stage[q] < s) != lower)
                continue;
            for (int i = 0; i < x->n && !dup; i++)
                dup = x->xkind[i] == SUB_PEER && x->origin[i] == q;
            if (dup)
                continue;
            const ss_op *qo = ss_graph_op(h->g, q);
            for (int i = 0; i < qo->n_in; i++) {
                if (h->tmap[qo->inputs[i]] < 0 && add_input(h, x, qo->inputs[i], SUB_PEER, d) < 0)
                    return -1;
                in[i] = h->tmap[qo->inputs[i]];
            }
            if (add_copy(h, x, q, in, SUB_PEER, d) < 0)
                return -1;
        }
    return 0;
}

/* Build the sub-problem (sg, sp) into h->tg and h->mm with a new builder
 * *b: reduced to its first data-parallel block (symmetry.h, sub-problems)
 * where that applies and verifies, else whole. *d0: the device whose
 * figures stand for base's (base, or its image in the first block). */
static ss_status sub_build(ss_hier *h, const ss_graph *sg, const ss_plan *sp, int base,
                           ss_builder **b, int *d0, ss_diag *d)
{
    ss_status st;
    *d0 = base;
    if (!h->sym_off && !h->sym && !(h->sym = ss_sym_new(h->g, h->m, h->cm, &h->cfg)))
        return ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
    const ss_graph *rg;
    const ss_plan *rp;
    ss_build_sym *hook;
    int r = h->sym_off ? 0 : ss_sym_reduce(h->sym, sg, sp, &rg, &rp, &hook, d);
    if (r < 0)
        return d->status;
    if (r) {
        if (!(*b = ss_build_new(rg, h->m, h->cm)))
            return ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
        ss_build_set_memo(*b, 0);
        ss_build_set_symmetry(*b, hook);
        if ((st = ss_build_run(*b, rp, h->tg, h->mm, d)) != SS_OK)
            return st;
        if (ss_sym_verify(h->sym, h->tg)) {
            *d0 = ss_sym_image0(h->sym, base);
            h->st.sub_reduced++;
            return SS_OK;
        }
        ss_build_free(*b);
        *b = NULL;
    }
    if (!(*b = ss_build_new(sg, h->m, h->cm)))
        return ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
    ss_build_set_memo(*b, 0);
    return ss_build_run(*b, sp, h->tg, h->mm, d);
}

/* Build stage s's sub-problem with kk blocks (graph and plan), simulate it
 * and extract its figures. bulk: the gradient synchronisation waits for
 * the end of the backward (the sync mode is bulk), so that the backward
 * span is that of a micro-batch whose gradients are not synchronised.
 * The sub-graph holds the stage's kept ops, an input op per activation
 * received from the previous stage (on the sender's devices: the builder
 * makes the stage send) and, for a weight shared with ops of other stages
 * (a tied embedding), those ops with input ops of their own on their own
 * devices, so that the weight's gradient is synchronised over every device
 * that holds it. */
static ss_status sub_figs(ss_hier *h, const ss_plan *p, int s, int kk, int bulk, double jdelay,
                          figs *f, ss_diag *d)
{
    const ss_graph *g = h->g;
    const stageinfo *S = &h->stg[s];
    const ss_plan_settings *set = ss_plan_settings_get(p);
    int M = set->microbatches < 1 ? 1 : set->microbatches;
    ss_status st = SS_OK;
    ss_plan *sp = NULL;
    ss_builder *b = NULL;
    subctx x;
    memset(&x, 0, sizeof x);
    x.M = M;
    x.sg = ss_graph_new(ss_graph_name(g));
    size_t cap = (size_t)(S->n + 8) * (2 + SS_MAX_INPUTS) * 2;
    x.touched = ss_calloc((size_t)ss_graph_n_tensors(g) + 1, sizeof *x.touched);
    x.origin = ss_calloc(cap, sizeof *x.origin);
    x.xkind = ss_calloc(cap, sizeof *x.xkind);
    if (!x.sg || !x.touched || !x.origin || !x.xkind) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
        goto out;
    }
    ss_graph_set_training(x.sg, ss_graph_batch(g) / M, ss_graph_optimizer(g),
                          ss_graph_precision(g));
    int n_recv = 0, in[SS_MAX_INPUTS];
    for (int j = 0; j < S->n; j++)
        if (kept(S, j, kk) && add_peers(h, &x, s, h->sops[S->off + j], 1, d) < 0) {
            st = d->status;
            goto out;
        }
    for (int j = 0; j < S->n; j++) {
        h->subop[j] = -1;
        if (!kept(S, j, kk))
            continue;
        int o = h->sops[S->off + j];
        const ss_op *op = ss_graph_op(g, o);
        for (int i = 0; i < op->n_in; i++) {
            int tid = op->inputs[i];
            int q = ss_graph_tensor(g, tid)->producer;
            if (h->stage[q] == s) {
                int jq = h->pos[q];
                if (!kept(S, jq, kk))
                    jq = S->s0 + (kk - 1) * S->blk + (jq - S->s0) % S->blk;
                const ss_op *qo = ss_graph_op(g, q);
                int idx = 0;
                while (idx < qo->n_out && qo->outputs[idx] != tid)
                    idx++;
                in[i] = ss_graph_op(x.sg, h->subop[jq])->outputs[idx];
                continue;
            }
            if (h->tmap[tid] < 0) {
                if (add_input(h, &x, tid, SUB_RECV, d) < 0) {
                    st = d->status;
                    goto out;
                }
                n_recv++;
            }
            in[i] = h->tmap[tid];
        }
        if ((h->subop[j] = add_copy(h, &x, o, in, SUB_OWN, d)) < 0) {
            st = d->status;
            goto out;
        }
    }
    /* the other stages' readers of this stage's weights: of higher
     * stages after the stage's ops (those of lower ones came first), so
     * that the sub-graph keeps the graph's op order, which the gradient
     * buckets' order and priorities follow */
    for (int j = 0; j < S->n; j++)
        if (kept(S, j, kk) && add_peers(h, &x, s, h->sops[S->off + j], 0, d) < 0) {
            st = d->status;
            goto out;
        }
    /* the plan: micro-batch 0 of every data-parallel rank */
    sp = ss_plan_new(x.sg, h->m);
    if (!sp) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
        goto out;
    }
    ss_plan_settings *ss = ss_plan_settings_of(sp);
    *ss = *set;
    ss->stages = n_recv ? 2 : 1;
    ss->microbatches = 1;
    /* interleaved: the stage sends overlap compute (the builder's holds()
     * reads only whether virtual_stages > 1; one micro-batch has no gating) */
    ss->virtual_stages = set->virtual_stages > 1 && n_recv ? 2 : 1;
    if (bulk)
        ss->sync = SS_SYNC_BULK;
    bulk = ss->sync == SS_SYNC_BULK;
    int ns = x.n;
    if (ss_grow((void **)&h->ext_ops, &h->cap_ext, ns + 1, sizeof *h->ext_ops)) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
        goto out;
    }
    for (int i = 0; i < ns; i++) {
        int orig = x.origin[i];
        h->ext_ops[i] = x.xkind[i];
        const ss_pconfig *c = ss_plan_config(p, orig);
        if (ss_grow((void **)&h->devs, &h->cap_devs, c->ntiles / M + 1, sizeof *h->devs)) {
            st = ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
            goto out;
        }
        ss_pconfig rc;
        restrict_cfg(c, h->sd[orig], M, &rc, h->devs);
        rc.stage = n_recv && x.xkind[i] != SUB_RECV ? 1 : 0;
        if ((st = ss_plan_set_config(sp, i, &rc, d)) != SS_OK)
            goto out;
    }
    /* simulate */
    int d0;
    if ((st = sub_build(h, x.sg, sp, S->base, &b, &d0, d)) != SS_OK)
        goto out;
    double dropped = shares_down(h, s) && jdelay < 0 ? drop_joint_sync(h, s, d0) : 0;
    int edited = 0;
    if (jdelay >= 0) {
        /* the shared weights' collectives are ready no earlier than jdelay
         * after the stage's last backward (in the pipeline: when the last
         * stage holding the weight has its gradient), and take their time */
        ss_taskgraph *tw = h->tg;
        int r0[1], dl = ss_taskgraph_add(tw, &(ss_task_spec){SS_TASK_OTHER, jdelay, 0, -1, -1, -1,
                                                              0, 0, 0, r0}, d);
        if (dl < 0) {
            st = d->status;
            goto out;
        }
        for (int t = 0; t < dl && st == SS_OK; t++) {
            int o = tw->op[t];
            if (tw->kind[t] == SS_TASK_BWD && o >= 0 && o < ns && !h->ext_ops[o])
                st = ss_taskgraph_add_dep(tw, t, dl, d);
            else if (joint_coll(h, tw, t, s))
                st = ss_taskgraph_add_dep(tw, dl, t, d);
        }
        if (st != SS_OK)
            goto out;
        edited = 1;
    }
    if (set->schedule == SS_PIPE_1F1B && M > 1) {
        /* the full simulation's 1F1B flush (build.c, b->flush): a device's
         * updates wait for its last backward, which the builder applies
         * only with micro-batches > 1, so not to this one-micro-batch
         * sub-problem */
        ss_taskgraph *tw = h->tg;
        int ndv = tw->n_devices;
        int *lastb = ss_malloc((size_t)(ndv + 1) * sizeof *lastb);
        if (!lastb) {
            st = ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
            goto out;
        }
        for (int i = 0; i < ndv; i++)
            lastb[i] = -1;
        for (int t = 0; t < tw->n_tasks; t++)
            if (tw->kind[t] == SS_TASK_BWD) {
                int dv = ss_taskgraph_res(tw, t)[0];
                if (lastb[dv] < 0 || tw->prio[t] >= tw->prio[lastb[dv]])
                    lastb[dv] = t;
            }
        for (int t = 0; t < tw->n_tasks && st == SS_OK; t++)
            if (tw->kind[t] == SS_TASK_UPDATE) {
                int dv = ss_taskgraph_res(tw, t)[0];
                if (lastb[dv] >= 0)
                    st = ss_taskgraph_add_dep(tw, lastb[dv], t, d);
            }
        ss_free(lastb);
        if (st != SS_OK)
            goto out;
        edited = 1;
    }
    if (edited && (st = ss_taskgraph_finalize(h->tg, d)) != SS_OK)
        goto out;
    ss_engine_config ec = {.policy = ss_build_policy(b), .stop = h->cfg.stop,
                           .stop_ctx = h->cfg.stop_ctx};
    if ((st = ss_engine_run(h->e, h->tg, &ec, d)) != SS_OK)
        goto out;
    const ss_engine_result *er = ss_engine_result_of(h->e);
    const ss_taskgraph *tg = h->tg;
    int nd = ss_machine_n_devices(h->m);
    if (ss_grow((void **)&h->peak, &h->cap_peak, nd, sizeof *h->peak)) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
        goto out;
    }
    if (h->cfg.skip_memory)
        h->peak[d0] = ss_memory_static_bytes(h->mm, d0);
    else if ((st = ss_build_memory(b, h->mm, d)) != SS_OK ||
             (st = ss_memory_sweep_ranked(h->mm, er->start_round, er->end_round,
                                          (int)er->n_rounds, h->peak, d)) != SS_OK)
        goto out;
    memset(f, 0, sizeof *f);
    double t0 = 0, fwd_end = 0, bwd_end = 0, last = 0;
    for (int t = 0; t < tg->n_tasks; t++) {
        int kind = tg->kind[t];
        if (ext_of(h, tg, t, ns, s))
            continue;
        if (kind == SS_TASK_FWD && er->end[t] > fwd_end)
            fwd_end = er->end[t];
        if (kind == SS_TASK_BWD && er->end[t] > bwd_end)
            bwd_end = er->end[t];
        if (er->end[t] > last)
            last = er->end[t];
    }
    /* the incoming send: ext tasks that end before the first forward of the stage */
    for (int t = 0; t < tg->n_tasks; t++) {
        int o = tg->op[t], kind = tg->kind[t];
        if (!(o >= 0 && o < ns && h->ext_ops[o] == SUB_RECV) || er->end[t] > fwd_end)
            continue;
        if (kind == SS_TASK_XFER && tg->dur[t] > f->send)
            f->send = tg->dur[t];
        if (kind == SS_TASK_XFER) {
            const int32_t *rs = ss_taskgraph_res(tg, t);
            for (int k = 0; k < ss_taskgraph_n_res(tg, t); k++) {
                int c = rs[k] - tg->n_devices;
                if (c >= 0 && (tg->chan_dev[2 * c] == d0 || tg->chan_dev[2 * c + 1] == d0) &&
                    tg->bytes[t] > f->recv)
                    f->recv = tg->bytes[t];
            }
        }
        if (kind == SS_TASK_COLLECTIVE && tg->aux[t] == SS_BUILD_COLL_SENDGATHER &&
            tg->dur[t] > f->gather)
            f->gather = tg->dur[t];
        /* a scatter-gather send's receive buffer holds the whole activation */
        if (kind == SS_TASK_COLLECTIVE && tg->aux[t] == SS_BUILD_COLL_SENDGATHER &&
            tg->bytes[t] > f->recv)
            f->recv = tg->bytes[t];
        if ((kind == SS_TASK_XFER || kind == SS_TASK_COLLECTIVE) && er->end[t] > t0)
            t0 = er->end[t];
    }
    /* under bulk sync the tail runs from the barrier after every backward,
     * the stand-in sender's included (in the pipeline the barrier follows
     * every stage's last backward) */
    double bar = bwd_end;
    for (int t = 0; bulk && t < tg->n_tasks; t++)
        if (tg->kind[t] == SS_TASK_BWD && er->end[t] > bar)
            bar = er->end[t];
    f->fwd = fwd_end - t0;
    f->bwd = f->bwd_last = bwd_end - fwd_end;
    f->tail = last - bar;
    /* the shared weights' synchronisation at d0: the joint collectives
     * in the order they start, each with the time d0 takes to reach it */
    {
        int jt[JMAX + 1], nj = 0;
        for (int t = 0; t < tg->n_tasks; t++) {
            if (!joint_coll(h, tg, t, s) || !uses_dev(tg, t, d0))
                continue;
            if (nj > JMAX)
                break;
            int k = nj++;
            for (; k > 0 && er->start[jt[k - 1]] > er->start[t]; k--)
                jt[k] = jt[k - 1];
            jt[k] = t;
        }
        f->jn = nj;
        double at = bulk ? bar : bwd_end;
        f->jr = nj ? er->ready[jt[0]] - at : 0;
        for (int k = 0; k < nj && nj <= JMAX; k++) {
            f->ja[k] = er->start[jt[k]] - at;
            f->jd[k] = er->end[jt[k]] - er->start[jt[k]];
            at = er->end[jt[k]];
        }
        f->jb = nj ? last - at : 0;
    }
    /* the gradient sent back: the external input's tasks after the forward */
    double back = 0;
    for (int t = 0; t < tg->n_tasks; t++) {
        int o = tg->op[t];
        if (o >= 0 && o < ns && h->ext_ops[o] == SUB_RECV && er->end[t] > fwd_end &&
            er->end[t] > back &&
            (tg->kind[t] == SS_TASK_XFER || tg->kind[t] == SS_TASK_COLLECTIVE))
            back = er->end[t];
    }
    f->send_last = back > bwd_end ? back - bwd_end - f->gather : f->send;
    for (int t = 0; t < tg->n_tasks; t++) {
        int kind = tg->kind[t];
        if (ext_of(h, tg, t, ns, s))
            continue;
        const int32_t *rs = ss_taskgraph_res(tg, t);
        int nr = ss_taskgraph_n_res(tg, t), at = 0;
        for (int k = 0; k < nr && !at; k++) {
            int r = rs[k];
            if (r < tg->n_devices)
                at = r == d0;
            else {
                int c = r - tg->n_devices;
                at = tg->chan_dev[2 * c] == d0 || tg->chan_dev[2 * c + 1] == d0;
            }
        }
        if (!at)
            continue;
        if (kind == SS_TASK_FWD || kind == SS_TASK_BWD)
            f->comp_fb += tg->dur[t];
        if (kind == SS_TASK_FWD)
            f->comp_f += tg->dur[t];
        else if (kind == SS_TASK_UPDATE)
            f->comp_upd += tg->dur[t];
        else if (kind == SS_TASK_COLLECTIVE) {
            if (tg->aux[t] == SS_BUILD_COLL_GRAD)
                f->comm_once += tg->dur[t];
            else
                f->comm_mb += tg->dur[t];
        }
    }
    f->comp_upd += dropped;
    /* the all-gathers after the distributed optimizer's updates at d0 */
    if (set->distopt) {
        unsigned char *seen = ss_calloc((size_t)tg->n_tasks + 1, 1);
        if (!seen) {
            st = ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
            goto out;
        }
        for (int t = 0; t < tg->n_tasks; t++)
            if (tg->kind[t] == SS_TASK_UPDATE && ss_taskgraph_res(tg, t)[0] == d0)
                for (int k = tg->succ_off[t]; k < tg->succ_off[t + 1]; k++) {
                    int u = tg->succ[k];
                    if (tg->kind[u] == SS_TASK_COLLECTIVE && tg->aux[u] == SS_BUILD_COLL_GRAD &&
                        !seen[u] && !joint_coll(h, tg, u, s)) {
                        seen[u] = 1;
                        f->ag += tg->dur[u];
                    }
                }
        ss_free(seen);
    }
    f->stat = ss_memory_static_bytes(h->mm, d0);
    f->weights = ss_memory_weight_bytes(h->mm, d0);
    f->peak1 = h->peak[d0];
    if (!h->cfg.skip_memory) {
        int niv = ss_memory_n_intervals(h->mm);
        for (int i = 0; i < niv; i++) {
            const ss_mem_interval *iv = ss_memory_interval(h->mm, i);
            if (iv->device != d0 || iv->kind == SS_MEM_WORKSPACE)
                continue;
            double a = iv->alloc.at_end ? er->end[iv->alloc.task] : er->start[iv->alloc.task];
            double r = iv->release.at_end ? er->end[iv->release.task]
                                          : er->start[iv->release.task];
            if (a <= fwd_end && r > fwd_end)
                f->held += iv->bytes;
        }
    }
    f->tasks = tg->n_tasks;
out:
    for (int i = 0; i < x.ntouched; i++)
        h->tmap[x.touched[i]] = -1;
    ss_free(x.touched);
    ss_free(x.origin);
    ss_free(x.xkind);
    ss_build_free(b);
    ss_plan_free(sp);
    ss_graph_free(x.sg);
    return st;
}

/* Figures of stage s's sub-problem with kk blocks, memoized. */
static ss_status sub_one(ss_hier *h, const ss_plan *p, int s, int kk, int bulk, double jdelay,
                         figs *f, ss_diag *d)
{
    uint64_t key = mixd(mix(sub_key(h, p, s, kk), (uint64_t)bulk + 1), jdelay);
    const figs *hit = memo_get(h, key);
    if (hit) {
        *f = *hit;
        h->st.memo_hits++;
        return SS_OK;
    }
    ss_status st = sub_figs(h, p, s, kk, bulk, jdelay, f, d);
    if (st != SS_OK)
        return st;
    h->st.sub_sims++;
    h->st.tasks += (int64_t)f->tasks;
    if (memo_put(h, key, f))
        return ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
    return SS_OK;
}

static int periodic(const figs *a, const figs *b, const figs *c)
{
    const double *x = (const double *)a, *y = (const double *)b, *z = (const double *)c;
    /* time figures: fwd, bwd, tail, bwd_last, send_last, comp_fb, comp_upd;
     * the joint synchronisation's */
    static const int idx[] = {0, 1, 2, 5, 6, 7, 8};
    enum { NI = sizeof idx / sizeof idx[0], J0 = offsetof(figs, jn) / sizeof(double) };
    for (int i = 0; i < NI + NFIG - J0; i++) {
        int k = i < NI ? idx[i] : J0 + i - NI;
        double d1 = y[k] - x[k], d2 = z[k] - y[k];
        if (fabs(d2 - d1) > PERIOD_TOL * (fabs(z[k]) + 1.0))
            return 0;
    }
    return 1;
}

/* Stage s's figures from sub-problems with sync mode `bulk`: blocks k = 1,
 * 2, 3 extrapolated to the stage's blocks when every time figure grows by
 * the same amount per block, else (or with at most 3 blocks) the whole
 * stage. */
/* Whether stage s's blocks are independent: no weight read by a block op
 * is read by another op (unrolled recurrent steps share their weights:
 * their gradients accumulate across blocks, so fewer blocks are not a
 * smaller copy of the stage). */
static int independent_blocks(const ss_hier *h, const stageinfo *S)
{
    for (int j = S->s0; j < S->s0 + S->reps * S->blk; j++) {
        const ss_op *op = ss_graph_op(h->g, h->sops[S->off + j]);
        for (int w = 0; w < op->n_w; w++)
            if (h->wr_off[op->weights[w] + 1] - h->wr_off[op->weights[w]] > 1)
                return 0;
    }
    return 1;
}

static ss_status extrapolated(ss_hier *h, const ss_plan *p, int s, int bulk, double jdelay,
                              figs *out, ss_diag *d)
{
    stageinfo *S = &h->stg[s];
    ss_status st;
    int indep = independent_blocks(h, S);
    if (!indep)
        h->st.full_stages++;
    if (S->reps > 3 && indep) {
        figs f[3];
        for (int k = 0; k < 3; k++)
            if ((st = sub_one(h, p, s, k + 1, bulk, jdelay, &f[k], d)) != SS_OK)
                return st;
        if (periodic(&f[0], &f[1], &f[2])) {
            double *o = (double *)out;
            const double *b = (const double *)&f[1], *c = (const double *)&f[2];
            for (int i = 0; i < NFIG; i++)
                o[i] = c[i] + (S->reps - 3) * (c[i] - b[i]);
            return SS_OK;
        }
        h->st.full_stages++;
    }
    return sub_one(h, p, s, S->reps ? S->reps : 0, bulk, jdelay, out, d);
}

/* Stage s's figures. The micro-batch spans (forward, backward, sends),
 * compute and memory come from sub-problems whose gradient sync is held
 * back to the end (bulk), so that a backward is that of a micro-batch
 * whose gradients are not synchronised yet, as all but the last are. The
 * figures of the synchronisation (the last backward, which overlaps its
 * buckets' all-reduces under wait-free sync and is slowed where they share
 * links with its tensor-parallel collectives; the gradient send after it,
 * which queues behind them; the tail to the last update) come from
 * sub-problems with the plan's sync mode: extrapolated when buckets are
 * per weight (bucket_bytes = 0), else from the whole stage, because fused
 * buckets cut across blocks and their boundaries repeat with a period of
 * their own. */
static ss_status stage_figs(ss_hier *h, const ss_plan *p, int s, ss_diag *d)
{
    stageinfo *S = &h->stg[s];
    const ss_plan_settings *set = ss_plan_settings_get(p);
    int bulk = set->sync == SS_SYNC_BULK;
    figs w;
    ss_status st = extrapolated(h, p, s, 1, -1, &S->f, d);
    if (st != SS_OK)
        return st;
    if (set->bucket_bytes > 0)
        st = sub_one(h, p, s, S->reps ? S->reps : 0, bulk, -1, &w, d);
    else if (!bulk)
        st = extrapolated(h, p, s, 0, -1, &w, d);
    else
        w = S->f;
    if (st != SS_OK)
        return st;
    S->f.bwd_last = w.bwd;
    S->f.send_last = w.send_last;
    S->f.tail = w.tail;
    S->f.comp_upd = w.comp_upd;
    S->f.comm_once = w.comm_once;
    S->f.ag = w.ag;
    S->f.jn = w.jn;
    memcpy(S->f.ja, w.ja, sizeof w.ja);
    memcpy(S->f.jd, w.jd, sizeof w.jd);
    S->f.jb = w.jb;
    if (s >= h->R) {
        /* a rank's later chunks: the framework's per-micro-batch overhead
         * (the device type's mb_overhead_us, build_host.c) is paid once
         * per micro-batch and device, at its first forward there (the
         * first chunk's), not by every chunk's sub-problem */
        double ov = ss_machine_type(h->m, ss_machine_device(h->m, S->base)->type)->mb_overhead_us;
        S->f.fwd -= ov;
        S->f.comp_f -= ov;
        S->f.comp_fb -= ov;
    }
    return SS_OK;
}

/* ---- the stage-level pipeline --------------------------------------------- */

typedef struct pipe_ids {
    int *F, *B, *SF, *GF, *SB, *GB; /* [s * M + k]; -1 none */
    int *CF, *CB; /* the receiving device's share of a blocking send */
    int *QB;      /* the last gradient send's wait for the network (no resource) */
    int *QR;      /* blocking: the receiver held through that wait */
    int *FE, *BE; /* a pass's end: F / B, or (GPipe) its waits after its kernels */
} pipe_ids;

static int add(ss_taskgraph *tg, ss_task_kind kind, double dur, int prio, int n_res, const int *res,
               int s, int k, ss_diag *d)
{
    ss_task_spec sp = {kind, dur, prio, s, -1, k, 0, 0, n_res, res};
    return ss_taskgraph_add(tg, &sp, d);
}

/* A pass of `span` us holding device s for `kern` us of kernels: n chunks,
 * each its kernels then its share of the waits (holding nothing), so that
 * other passes' chunks fill the waits. *first, *last: the chain's ends.
 * Nonzero on error (d set). */
static int add_pass(ss_taskgraph *tg, ss_task_kind kind, double kern, double span, int n, int prio,
                    int s, int c, int k, int *first, int *last, ss_diag *d)
{
    int r1[1] = {s}, prev = -1;
    double gap = span > kern ? (span - kern) / n : 0;
    for (int j = 0; j < n; j++) {
        int t = add(tg, kind, kern / n, prio, 1, r1, c, k, d);
        if (t < 0 || (prev >= 0 && ss_taskgraph_add_dep(tg, prev, t, d) != SS_OK))
            return -1;
        if (j == 0)
            *first = t;
        prev = t;
        if (gap > 0) {
            int g = add(tg, SS_TASK_OTHER, gap, prio, 0, NULL, c, k, d);
            if (g < 0 || ss_taskgraph_add_dep(tg, prev, g, d) != SS_OK)
                return -1;
            prev = g;
        }
    }
    *last = prev;
    return 0;
}

/* Build and run the stage-level schedule; fills, per stage (chunk), end_b
 * (the end of its last backward), and per pipeline rank busy (the time its
 * device is held by blocking sends) and top (the most that the passes in
 * flight hold: activations and receive buffers). */
/* A memory event: at t, the level steps by `step` and its rate of change
 * by `slope`. */
typedef struct mev {
    double t, step, slope;
} mev;

/* By time; frees (negative steps) first. */
static int cmp_mev(const void *a, const void *b)
{
    const mev *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return (x->step > 0) - (y->step > 0);
}

static ss_status pipeline(ss_hier *h, const ss_plan *p, double *end_b, double *busy,
                          double *top, int64_t *ntasks, ss_diag *d)
{
    const ss_plan_settings *set = ss_plan_settings_get(p);
    int C = set->stages < 1 ? 1 : set->stages, M = set->microbatches < 1 ? 1 : set->microbatches;
    int n_ops = ss_graph_n_ops(h->g);
    /* C stages (chunks) on P pipeline ranks, V chunks each (analyse) */
    int V = h->V, P = h->R;
    /* blocking stage sends: non-interleaved 1F1B only (the interleaved
     * schedule overlaps its sends: Megatron's overlap_p2p_comm) */
    int block = set->schedule == SS_PIPE_1F1B && V == 1;
    int64_t cells = (int64_t)C * M;
    if (cells > (1 << 24))
        return UNSUP("too many stage x micro-batch cells");
    if (ss_grow((void **)&h->ptask, &h->cap_ptask, (int)(12 * cells), sizeof *h->ptask))
        return ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
    pipe_ids id = {h->ptask, h->ptask + cells, h->ptask + 2 * cells, h->ptask + 3 * cells,
                   h->ptask + 4 * cells, h->ptask + 5 * cells, h->ptask + 6 * cells,
                   h->ptask + 7 * cells, h->ptask + 8 * cells, h->ptask + 11 * cells,
                   h->ptask + 9 * cells, h->ptask + 10 * cells};
    for (int64_t i = 0; i < 12 * cells; i++)
        h->ptask[i] = -1;
    ss_taskgraph *tg = h->ptg;
    double *kern = busy; /* the passes' kernel time per rank, until the run */
    for (int s = 0; s < P; s++)
        kern[s] = 0;
    ss_status st = ss_taskgraph_reset(tg, P, 3 * C, d);
    if (st != SS_OK)
        return st;
    ss_taskgraph_set_pred_lists(tg, 0);
    /* stage (chunk) c runs on rank c mod P with its own figures; the send
     * into c was measured in c's sub-problem */
    for (int c = 0; c < C; c++) {
        int s = c % P, prev = (c - 1 + P) % P;
        const figs *f = &h->stg[c].f, *fin = f;
        double fw = f->fwd, bw = f->bwd, bwl = f->bwd_last;
        for (int k = 0; k < M; k++) {
            int64_t i = (int64_t)c * M + k;
            int lastk = k == M - 1;
            double bwk = lastk ? bwl : bw;
            /* GPipe and interleaved 1F1B: a pass holds its device for its
             * kernels only; its waits for tensor-parallel collectives
             * follow, and other passes fill them (the full simulation
             * interleaves them operator by operator). 1F1B: the pass holds
             * the device throughout (its gating and backward-first queues
             * keep passes apart). */
            double kf = block ? fw : f->comp_f, kb = block ? bwk : f->comp_fb - f->comp_f;
            if (kf > fw)
                kf = fw;
            if (kb > bwk)
                kb = bwk;
            int pf0 = ss_sched_prio_fwd(h->stg[c].first, k), pb0 = ss_sched_prio_bwd(n_ops, h->stg[c].last, k);
            int nch = block || !h->stg[c].reps ? 1 : h->stg[c].reps;
            nch = nch < 1 ? 1 : nch > 32 ? 32 : nch;
            if (add_pass(tg, SS_TASK_FWD, kf, fw, nch, pf0, s, c, k, &id.F[i], &id.FE[i], d) ||
                add_pass(tg, SS_TASK_BWD, kb, bwk, nch, pb0, s, c, k, &id.B[i], &id.BE[i], d))
                return d->status;
            kern[s] += kf + kb;
            if (c == 0)
                continue;
            /* a blocking send holds the sender from its pass's end and the
             * receiver at its next operator boundary, taken as at once: the
             * sender's share is the send on the channel, the receiver's a
             * task of the same length that its next pass waits for */
            int rf[2] = {P + 3 * c, prev}, rb[2] = {P + 3 * c + 1, s};
            int rg[1] = {P + 3 * c + 2}, rs[1] = {s}, rp[1] = {prev};
            int pf = ss_sched_prio_fwd(h->stg[c - 1].last, k), pb = ss_sched_prio_bwd(n_ops, h->stg[c].first, k);
            /* the last micro-batch's gradient send first waits for the
             * stage's all-reduces on the network (holding nothing) */
            double sb = fin->send, q = lastk ? fin->send_last - fin->send : 0;
            if ((id.SF[i] = add(tg, SS_TASK_XFER, fin->send, pf, block ? 2 : 1, rf, c, k, d)) < 0 ||
                (id.SB[i] = add(tg, SS_TASK_XFER, sb, pb, block ? 2 : 1, rb, c, k, d)) < 0)
                return d->status;
            if (block && ((id.CF[i] = add(tg, SS_TASK_XFER, fin->send, pf, 1, rs, c, k, d)) < 0 ||
                          (id.CB[i] = add(tg, SS_TASK_XFER, sb, pb, 1, rp, c, k, d)) < 0))
                return d->status;
            if (q > 0 && (id.QB[i] = add(tg, SS_TASK_OTHER, q, pb, 0, NULL, c, k, d)) < 0)
                return d->status;
            /* a blocking send heads the receiver's queue from the sender's
             * pass end: the receiver is held through the wait too (its
             * pass resumes after the transfer), not counted as busy */
            if (q > 0 && block) {
                if ((id.QR[i] = add(tg, SS_TASK_OTHER, q, pb, 1, rp, c, k, d)) < 0)
                    return d->status;
                kern[prev] += q;
            }
            if (fin->gather > 0 &&
                ((id.GF[i] = add(tg, SS_TASK_COLLECTIVE, fin->gather, pf, 1, rg, c, k, d)) < 0 ||
                 (id.GB[i] = add(tg, SS_TASK_COLLECTIVE, fin->gather,
                                 ss_sched_prio_bwd(n_ops, h->stg[c - 1].last, k), 1, rg, c, k, d)) < 0))
                return d->status;
        }
    }
#define DEP(a, b)                                                                                  \
    do {                                                                                           \
        if ((a) >= 0 && (b) >= 0 && ss_taskgraph_add_dep(tg, (a), (b), d) != SS_OK)               \
            return d->status;                                                                      \
    } while (0)
    for (int c = 0; c < C; c++)
        for (int k = 0; k < M; k++) {
            int64_t i = (int64_t)c * M + k, ip = (int64_t)(c - 1) * M + k;
            DEP(id.FE[i], id.B[i]);
            if (c > 0) {
                int rf = id.GF[i] >= 0 ? id.GF[i] : id.SF[i];
                int rb = id.GB[i] >= 0 ? id.GB[i] : id.SB[i];
                DEP(id.FE[ip], id.SF[i]);
                DEP(id.SF[i], id.GF[i]);
                DEP(rf, id.F[i]);
                DEP(id.FE[ip], id.CF[i]);
                DEP(id.CF[i], id.F[i]);
                int bq = id.QB[i] >= 0 ? id.QB[i] : id.BE[i];
                DEP(id.BE[i], id.QB[i]);
                DEP(bq, id.SB[i]);
                DEP(id.SB[i], id.GB[i]);
                DEP(rb, id.B[ip]);
                DEP(id.BE[i], id.QR[i]);
                DEP(id.QR[i] >= 0 ? id.QR[i] : bq, id.CB[i]);
                DEP(id.CB[i], id.B[ip]);
            }
        }
    if (set->schedule != SS_PIPE_1F1B) {
        /* GPipe: program order of forwards */
        for (int s = 0; s < P; s++)
            for (int k = 1; k < M; k++)
                DEP(id.FE[(int64_t)s * M + k - 1], id.F[(int64_t)s * M + k]);
    } else {
        /* Megatron's 1F1B program over chunk-steps (v = 1: the
         * micro-batches), as the full simulation orders it (build.c,
         * pass_gating; docs/simulator.md, "Pipelines and schedules"):
         * forward steps in sequence, backward steps in sequence, forward
         * step k after backward step k - W - 1 and backward step i after
         * forward step min(i + W, total - 1), W the warm-up of rank s: p -
         * s - 1 without interleaving, else (p - s - 1) * 2 + (v - 1) * p
         * (all steps when m = p) */
        int total = M * V;
        for (int s = 0; s < P; s++) {
            int W = ss_sched_warmup(P, V, M, s);
            for (int j = 0; j < total; j++) {
                int mb, ch, fj, bj;
                ss_sched_at(j, P, V, 0, &mb, &ch);
                fj = id.F[(int64_t)(ch * P + s) * M + mb];
                ss_sched_at(j, P, V, 1, &mb, &ch);
                bj = id.B[(int64_t)(ch * P + s) * M + mb];
                if (j > 0) {
                    ss_sched_at(j - 1, P, V, 0, &mb, &ch);
                    DEP(id.FE[(int64_t)(ch * P + s) * M + mb], fj);
                    ss_sched_at(j - 1, P, V, 1, &mb, &ch);
                    DEP(id.BE[(int64_t)(ch * P + s) * M + mb], bj);
                }
                if (j - W - 1 >= 0) {
                    ss_sched_at(j - W - 1, P, V, 1, &mb, &ch);
                    DEP(id.BE[(int64_t)(ch * P + s) * M + mb], fj);
                }
                int fk = j + W < total ? j + W : total - 1;
                ss_sched_at(fk, P, V, 0, &mb, &ch);
                DEP(id.FE[(int64_t)(ch * P + s) * M + mb], bj);
            }
        }
    }
#undef DEP
    if ((st = ss_taskgraph_finalize(tg, d)) != SS_OK)
        return st;
    ss_engine_config ec = {.policy = ss_sched_policy(set),
                           .stop = h->cfg.stop, .stop_ctx = h->cfg.stop_ctx};
    if ((st = ss_engine_run(h->e, tg, &ec, d)) != SS_OK)
        return st;
    const ss_engine_result *er = ss_engine_result_of(h->e);
    for (int s = 0; s < P; s++)
        busy[s] = er->busy[s] - kern[s];
    for (int c = 0; c < C; c++) {
        end_b[c] = 0;
        for (int k = 0; k < M; k++)
            if (er->end[id.BE[(int64_t)c * M + k]] > end_b[c])
                end_b[c] = er->end[id.BE[(int64_t)c * M + k]];
    }
    /* memory beyond one micro-batch's peak, per rank: a sweep over the
     * passes' activations (each chunk's own), allocated evenly over a
     * forward and freed evenly over its backward as their operators run,
     * and the receive buffers of the stage sends (an activation's from its
     * send's start to its forward's end, a gradient's from its send's
     * start to the backward's start); frees before allocations at one
     * instant */
    int nmv = M * V, ckpt = set->recompute == SS_RECOMPUTE_FULL;
    mev *ev = ss_malloc((size_t)nmv * 8 * sizeof *ev);
    if (!ev)
        return ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
    for (int s = 0; s < P; s++) {
        int n = 0;
        for (int c = s; c < C; c += P) {
            const figs *f = &h->stg[c].f;
            double A = f->held, R = f->recv, Rg = c + 1 < C ? h->stg[c + 1].f.recv : 0;
            /* full recompute keeps the received input as the checkpoint
             * until the backward (build.c, pass_memory): held includes it,
             * so the forward adds the rest */
            double Af = ckpt ? (A > R ? A - R : 0) : A, R1 = ckpt ? R : 0;
            for (int k = 0; k < M; k++) {
                int64_t i = (int64_t)c * M + k;
                double f0 = er->start[id.F[i]], f1 = er->end[id.FE[i]];
                double b0 = er->start[id.B[i]], b1 = er->end[id.BE[i]];
                if (f1 > f0) {
                    ev[n++] = (mev){f0, 0, Af / (f1 - f0)};
                    ev[n++] = (mev){f1, 0, -Af / (f1 - f0)};
                } else
                    ev[n++] = (mev){f0, Af, 0};
                if (b1 > b0) {
                    ev[n++] = (mev){b0, 0, -A / (b1 - b0)};
                    ev[n++] = (mev){b1, 0, A / (b1 - b0)};
                } else
                    ev[n++] = (mev){b1, -A, 0};
                if (id.SF[i] >= 0 && R > 0) {
                    ev[n++] = (mev){er->start[id.SF[i]], R, 0};
                    ev[n++] = (mev){f1, R1 - R, 0};
                }
                if (c + 1 < C && id.SB[i + M] >= 0 && Rg > 0) {
                    ev[n++] = (mev){er->start[id.SB[i + M]], Rg, 0};
                    ev[n++] = (mev){b0, -Rg, 0};
                }
            }
        }
        qsort(ev, (size_t)n, sizeof *ev, cmp_mev);
        double level = 0, slope = 0, at = 0;
        top[s] = 0;
        for (int i = 0; i < n; i++) {
            level += slope * (ev[i].t - at);
            at = ev[i].t;
            level += ev[i].step;
            slope += ev[i].slope;
            top[s] = level > top[s] ? level : top[s];
        }
    }
    ss_free(ev);
    *ntasks = tg->n_tasks;
    return SS_OK;
}

/* The stage-level schedule's key: everything pipeline() reads. */
static uint64_t pipe_key(const ss_hier *h, const ss_plan *p)
{
    const ss_plan_settings *set = ss_plan_settings_get(p);
    uint64_t k = mix(mix(0x919E, (uint64_t)set->stages), (uint64_t)set->microbatches);
    k = mix(mix(mix(k, (uint64_t)set->schedule), (uint64_t)set->queue), (uint64_t)h->V);
    for (int s = 0; s < (set->stages < 1 ? 1 : set->stages); s++) {
        const stageinfo *S = &h->stg[s];
        const figs *f = &S->f;
        k = mix(mix(k, (uint64_t)S->first), (uint64_t)S->last);
        k = mixd(mixd(mixd(k, f->fwd), f->bwd), f->bwd_last);
        k = mixd(mixd(mixd(k, f->send), f->send_last), f->gather);
        k = mixd(mixd(k, f->held), f->recv);
        k = mixd(mixd(mix(k, (uint64_t)S->reps), f->comp_fb), f->comp_f);
    }
    return k ? k : 1;
}

/* pipeline(), memoized (the last PMEMO schedules; every array [stages]). */
static ss_status pipeline_cached(ss_hier *h, const ss_plan *p, double *end_b, double *busy,
                                 double *top, int64_t *ntasks, ss_diag *d)
{
    int P = ss_plan_settings_get(p)->stages < 1 ? 1 : ss_plan_settings_get(p)->stages;
    size_t sz = (size_t)P * sizeof(double);
    uint64_t key = pipe_key(h, p);
    for (int i = 0; i < PMEMO; i++)
        if (h->pmemo[i].key == key && h->pmemo[i].P == P) {
            memcpy(end_b, h->pmemo[i].end_b, sz);
            memcpy(busy, h->pmemo[i].busy, sz);
            memcpy(top, h->pmemo[i].top, sz);
            *ntasks = 0;
            return SS_OK;
        }
    ss_status st = pipeline(h, p, end_b, busy, top, ntasks, d);
    if (st != SS_OK)
        return st;
    pentry *e = &h->pmemo[h->pnext];
    double *a = ss_realloc(e->end_b, sz);
    if (a)
        e->end_b = a;
    double *b = ss_realloc(e->busy, sz);
    if (b)
        e->busy = b;
    double *c = ss_realloc(e->top, sz);
    if (c)
        e->top = c;
    if (!a || !b || !c) {
        e->key = 0;
        return SS_OK; /* not remembered */
    }
    e->key = key;
    e->P = P;
    memcpy(e->end_b, end_b, sz);
    memcpy(e->busy, busy, sz);
    memcpy(e->top, top, sz);
    h->pnext = (h->pnext + 1) % PMEMO;
    return SS_OK;
}

/* ---- the evaluation ------------------------------------------------------- */

/* Overlapped sync, interleaved: each chunk's sub-problem sees its own
 * gradient collectives only. Those of a rank's other chunks must be over
 * before the chunk whose backwards end last starts its last backward,
 * else they share the rank's links with that chunk's collectives and with
 * the stage sends, which no figure here represents (docs/simulator.md,
 * "Hierarchical evaluator"): SS_ERR_UNSUPPORTED. */
static ss_status chunks_apart(const ss_hier *h, const ss_plan *p, const double *end_b, ss_diag *d)
{
    const ss_plan_settings *set = ss_plan_settings_get(p);
    int C = set->stages < 1 ? 1 : set->stages, R = h->R;
    if (set->sync == SS_SYNC_BULK)
        return SS_OK;
    for (int s = 0; s < R; s++) {
        int c0 = s;
        for (int c = s; c < C; c += R)
            if (end_b[c] > end_b[c0])
                c0 = c;
        for (int c = s; c < C; c += R)
            if (c != c0 && end_b[c] + h->stg[c].f.tail > end_b[c0] - h->stg[c0].f.bwd_last)
                return UNSUP("chunk %d's gradient synchronisation (%.0f us from its last "
                             "backward) still runs when chunk %d's last backward starts on "
                             "pipeline rank %d: chunks' synchronisations would contend",
                             c, h->stg[c].f.tail, c0, s);
    }
    return SS_OK;
}

/* Overlapped sync: the joint collectives' figures again, now that the
 * pipeline says when they are ready. Each sub-problem made a stage's joint
 * collectives ready when its own gradient was (another stage's reader was
 * a stand-in with nothing to wait for), and took them as no time where a
 * lower stage owns them; in the full simulation a collective is queued on
 * every link by the time it becomes ready, so where it stands among a
 * stage's other gradient collectives depends on when the last stage
 * holding the weight has made its gradient (with one bucket per weight
 * usually the first stage, after its last backward; the last stage has
 * long finished its own backwards and synchronised most of its gradients
 * by then). So every stage taking part simulates its synchronisation once
 * more with its joint collectives ready that long after its last backward
 * and of their full length (memoized by that delay). */
static ss_status joint_figs(ss_hier *h, const ss_plan *p, const double *end_b, ss_diag *d)
{
    const ss_plan_settings *set = ss_plan_settings_get(p);
    int C = set->stages < 1 ? 1 : set->stages, bulk = set->sync == SS_SYNC_BULK;
    double ready = -1;
    for (int c = 0; c < C; c++)
        if (h->stg[c].f.jn > 0 && end_b[c] + h->stg[c].f.jr > ready)
            ready = end_b[c] + h->stg[c].f.jr;
    for (int c = 0; ready >= 0 && c < C; c++) {
        stageinfo *S = &h->stg[c];
        if (!(S->f.jn > 0))
            continue;
        figs w;
        /* bulk: every stage's are ready at the barrier */
        double delay = bulk ? 0 : ready - end_b[c];
        ss_status st = set->bucket_bytes > 0
                           ? sub_one(h, p, c, S->reps ? S->reps : 0, bulk, delay, &w, d)
                           : extrapolated(h, p, c, bulk, delay, &w, d);
        if (st != SS_OK)
            return st;
        S->f.jn = w.jn;
        memcpy(S->f.ja, w.ja, sizeof w.ja);
        memcpy(S->f.jd, w.jd, sizeof w.jd);
        S->f.jb = w.jb;
    }
    return SS_OK;
}

/* The synchronisation of the weights shared by stages (a tied embedding):
 * its collectives run over the devices of every stage holding the weight,
 * so each starts when the last of those stages reaches it in its own order
 * of collectives (the full simulation's devices issue theirs in order: a
 * stage that synchronises the shared weight first waits for one that
 * synchronises it last, and the collectives after it wait too). Each
 * stage's sub-problem measures, at its first device, when it reaches each
 * joint collective (from its last backward's end, bulk: from the barrier;
 * then from the previous joint collective's end) and its rest after the
 * last; the lowest stage holding the weight the collectives' durations.
 * *jend: the end of the last joint collective (-1: none). Stages that take
 * part in different numbers of joint collectives (weights shared by
 * different sets of stages) are refused: their rendezvous cannot be paired
 * from these figures. */
static ss_status joint_sync(const ss_hier *h, const ss_plan *p, const double *end_b, double *jend,
                            ss_diag *d)
{
    const ss_plan_settings *set = ss_plan_settings_get(p);
    int C = set->stages < 1 ? 1 : set->stages, K = 0, k0 = -1;
    double maxb = 0;
    *jend = -1;
    for (int c = 0; c < C; c++) {
        int jn = (int)h->stg[c].f.jn;
        maxb = end_b[c] > maxb ? end_b[c] : maxb;
        if (jn > JMAX)
            return UNSUP("stage %d takes part in more than %d collectives of weights shared "
                         "with other stages",
                         c, JMAX);
        if (jn && K && jn != K)
            return UNSUP("stages %d and %d take part in %d and %d collectives of weights shared "
                         "between stages: their rendezvous cannot be paired",
                         k0, c, K, jn);
        if (jn && !K) {
            K = jn;
            k0 = c;
        }
    }
    double e = 0;
    for (int j = 0; j < K; j++) {
        double start = 0, dur = 0;
        for (int c = 0; c < C; c++) {
            const figs *f = &h->stg[c].f;
            if (!f->jn)
                continue;
            double at = (j ? e : set->sync == SS_SYNC_BULK ? maxb : end_b[c]) + f->ja[j];
            /* interleaved, distributed optimizer: the rank's other chunks'
             * all-gathers come after the flush, before this stage's last
             * joint all-gather */
            for (int o = c % h->R; j && j == K - 1 && h->V > 1 && o < C; o += h->R)
                if (o != c)
                    at += h->stg[o].f.ag;
            start = at > start ? at : start;
            dur = f->jd[j] > dur ? f->jd[j] : dur;
        }
        e = start + dur;
    }
    if (K)
        *jend = e;
    return SS_OK;
}

int ss_hier_accepts(ss_hier *h, const ss_plan *p, ss_diag *d)
{
    if (ss_plan_n_ops(p) != ss_graph_n_ops(h->g)) {
        ss_diag_set(d, SS_ERR_UNSUPPORTED,
                    "hierarchical evaluator: the plan has %d operators, the model %d",
                    ss_plan_n_ops(p), ss_graph_n_ops(h->g));
        return 0;
    }
    ss_hier_stats st0 = h->st;
    ss_status st = analyse(h, p, d);
    h->st = st0;
    return st == SS_OK ? 1 : st == SS_ERR_UNSUPPORTED ? 0 : -1;
}

ss_status ss_hier_eval(ss_hier *h, const ss_plan *p, ss_sim_result *r, ss_diag *dd)
{
    ss_diag local;
    ss_diag *d = dd ? dd : &local;
    ss_diag_init(&local);
    if (!h || !p || !r)
        return ss_diag_set(d, SS_ERR_INVALID, "hierarchical evaluator: missing argument");
    if (ss_plan_n_ops(p) != ss_graph_n_ops(h->g))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "hierarchical evaluator: the plan has %d operators, the model %d",
                           ss_plan_n_ops(p), ss_graph_n_ops(h->g));
    const ss_plan_settings *set = ss_plan_settings_get(p);
    int P = set->stages < 1 ? 1 : set->stages, M = set->microbatches < 1 ? 1 : set->microbatches;
    ss_hier_stats st0 = h->st;
    memset(&h->st, 0, sizeof h->st);
    ss_status st = analyse(h, p, d);
    for (int s = 0; st == SS_OK && s < P; s++) {
        stageinfo *S = &h->stg[s];
        find_blocks(h, S);
        if (S->reps) {
            h->st.blocks += S->reps;
            if (!h->st.block_ops)
                h->st.block_ops = S->blk;
        }
    }
    for (int s = 0; st == SS_OK && s < P; s++)
        st = stage_figs(h, p, s, d);
    int nd = ss_machine_n_devices(h->m);
    double *end_b = NULL, *busy = NULL, *top = NULL;
    int64_t ptasks = 0;
    if (st == SS_OK) {
        end_b = ss_calloc((size_t)P * 3, sizeof *end_b);
        busy = end_b + P;
        top = busy + P;
        if (!end_b)
            st = ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
    }
    if (st == SS_OK)
        st = pipeline_cached(h, p, end_b, busy, top, &ptasks, d);
    if (st == SS_OK)
        st = chunks_apart(h, p, end_b, d);
    double jend = -1;
    if (st == SS_OK)
        st = joint_figs(h, p, end_b, d);
    if (st == SS_OK)
        st = joint_sync(h, p, end_b, &jend, d);
    if (st == SS_OK)
        st = ss_sim_result_reserve(r, nd, d);
    if (st != SS_OK) {
        ss_free(end_b);
        h->st = st0;
        return st;
    }
    /* the iteration: per rank, its last backward (that of its first chunk,
     * whose backwards run last), then that chunk's gradient tail, after
     * the updates of its other chunks (their all-reduces ran during the
     * first chunk's backwards; the updates wait for the rank's last
     * backward). Bulk: every rank waits for the last backward anywhere,
     * then all its chunks' synchronisations and updates. */
    int R = h->R;
    double iter = 0, maxb = 0;
    for (int c = 0; c < P; c++)
        maxb = end_b[c] > maxb ? end_b[c] : maxb;
    for (int s = 0; s < R; s++) {
        int c0 = s;
        double e, others = 0, tails = 0;
        for (int c = s; c < P; c += R) {
            if (end_b[c] > end_b[c0])
                c0 = c;
            tails += h->stg[c].f.tail;
        }
        double ags = 0;
        for (int c = s; c < P; c += R)
            if (c != c0) {
                others += h->stg[c].f.comp_upd;
                ags += h->stg[c].f.ag;
            }
        /* the distributed optimizer: the other chunks' updates wait for
         * the rank's last backward (the 1F1B flush), their all-gathers then
         * for the rank's network, after the first chunk's collectives */
        if (set->sync == SS_SYNC_BULK)
            e = maxb + tails;
        else {
            /* interleaved: a later chunk's all-reduces hold the rank's
             * links while its first chunk still runs passes; the stage
             * sends into and out of the rank queue behind them as that
             * chunk's own last gradient send does (send_last over the bare
             * send), and the first chunk's next backward starts that much
             * later, a delay that stays to the end (0 where that send slips
             * through between the all-reduces; the largest of the rank's
             * later chunks) */
            double hold = 0;
            for (int c = s; c < P; c += R)
                if (c != c0 && h->stg[c].f.send_last - h->stg[c].f.send > hold)
                    hold = h->stg[c].f.send_last - h->stg[c].f.send;
            e = end_b[c0] + hold + fmax(h->stg[c0].f.tail + ags, others + h->stg[c0].f.comp_upd);
        }
        /* a stage taking part in a shared weight's synchronisation ends
         * after the last joint collective and its own rest */
        for (int c = s; jend >= 0 && c < P; c += R) {
            /* bulk: the rank's other chunks' all-reduces take its network
             * too, before or after the joint one (with the distributed
             * optimizer they fill the joint collectives' waits instead) */
            double rest = h->stg[c].f.jb;
            if (set->sync == SS_SYNC_BULK && !set->distopt)
                rest += tails - h->stg[c].f.tail;
            if (h->stg[c].f.jn > 0 && jend + rest > e)
                e = jend + rest;
        }
        iter = e > iter ? e : iter;
    }
    h->st.stages = P;
    h->st.tasks += ptasks;
    snprintf(r->model, sizeof r->model, "%s", ss_graph_name(h->g));
    snprintf(r->topology, sizeof r->topology, "%s", ss_machine_name(h->m));
    r->n_devices = nd;
    r->batch = ss_graph_batch(h->g);
    r->n_tasks = h->st.tasks;
    r->iteration_us = iter;
    r->throughput = iter > 0 ? (double)r->batch / (iter * 1e-6) : 0;
    r->critical_path_us = 0;
    r->n_crit = 0;
    r->fits = 1;
    r->overflow_device = -1;
    r->overflow_bytes = 0;
    for (int i = 0; i < nd; i++) {
        const ss_device_type *dt = ss_machine_type(h->m, ss_machine_device(h->m, i)->type);
        int s = h->devrank[i];
        r->capacity_bytes[i] = dt->mem_gib * 1073741824.0 * h->cfg.mem_fraction;
        if (s < 0) {
            r->compute_us[i] = r->comm_us[i] = r->exposed_comm_us[i] = 0;
            r->idle_us[i] = iter;
            r->peak_memory_bytes[i] = r->static_memory_bytes[i] = r->weight_bytes[i] = 0;
            continue;
        }
        /* compute: the kernels of every pass of the rank's chunks, the
         * updates, and the blocking sends (the rank's busy time in the
         * stage-level schedule beyond its passes) */
        double comp = busy[s], comm = 0, stat = 0, wts = 0;
        for (int c = s; c < P; c += R) {
            const figs *f = &h->stg[c].f;
            comp += M * f->comp_fb + f->comp_upd;
            comm += M * f->comm_mb + f->comm_once;
            stat += f->stat;
            wts += f->weights;
        }
        /* activations: a chunk's micro-batch peak (above its static
         * memory) on top of the other chunks' static memory, plus what the
         * passes in flight hold beyond that micro-batch's own activations
         * and received input; the chunk that gives the most */
        double peak = stat;
        for (int c = s; c < P; c += R) {
            const figs *f = &h->stg[c].f;
            double one = f->held + f->recv, infl = top[s] > one ? top[s] - one : 0;
            double pk = stat - f->stat + f->peak1 + infl;
            peak = pk > peak ? pk : peak;
        }
        r->compute_us[i] = comp;
        r->comm_us[i] = comm;
        r->idle_us[i] = iter - comp;
        r->exposed_comm_us[i] = comm < r->idle_us[i] ? comm : r->idle_us[i];
        if (r->exposed_comm_us[i] < 0)
            r->exposed_comm_us[i] = 0;
        r->static_memory_bytes[i] = stat;
        r->weight_bytes[i] = wts;
        /* skip_memory: static memory only, as ss_sim gives it */
        r->peak_memory_bytes[i] = h->cfg.skip_memory ? stat : peak;
        if (r->fits && r->peak_memory_bytes[i] > r->capacity_bytes[i]) {
            r->fits = 0;
            r->overflow_device = i;
            r->overflow_bytes = r->peak_memory_bytes[i] - r->capacity_bytes[i];
        }
    }
    ss_free(end_b);
    return SS_OK;
}
