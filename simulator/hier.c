/*
 * hier.c — the hierarchical evaluator (hier.h): the plan analysis (stages,
 * devices, repeated blocks), the pipeline at stage x micro-batch
 * granularity by the engine, and the evaluation that combines them with
 * the sub-problems' figures (hier_sub.c: repeated blocks simulated once per
 * distinct sub-problem with the task-graph builder and engine). A stage
 * is a plan stage: with interleaving (settings.virtual_stages v > 1) a
 * chunk, run on pipeline rank stage mod (stages / v) with the rank's other
 * chunks.
 *
 * Invariant: an evaluation reads the plan, never changes it; every figure
 * it reports comes from a sub-problem simulation (memoized by content) or
 * from the stage-level schedule, so two evaluations of one plan give
 * bit-identical results whatever the memo held.
 */
#include "simulator/hier_impl.h"

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
    h->key = ss_calloc(no, sizeof *h->key);
    h->psum = ss_calloc(no, sizeof *h->psum);
    h->pwsum = ss_calloc(no, sizeof *h->pwsum);
    for (h->scan_cap = 64; h->scan_cap < 2 * (int)no; h->scan_cap *= 2)
        ;
    h->scan = ss_calloc((size_t)h->scan_cap, sizeof *h->scan);
    h->subop = ss_calloc(no, sizeof *h->subop);
    h->devrank = ss_calloc(nd, sizeof *h->devrank);
    h->tmap = ss_calloc(nt, sizeof *h->tmap);
    h->tg = ss_taskgraph_new(0, 0);
    h->ptg = ss_taskgraph_new(0, 0);
    h->mm = ss_memory_new();
    h->e = ss_engine_new();
    h->own_view = ss_plan_view_new(g, m);
    if (!h->dhost || !h->drank || !h->sig || !h->own_view || !h->key ||
        !h->psum || !h->pwsum || !h->scan || !h->subop || !h->devrank ||
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
    ss_plan_view_free(h->own_view);
    ss_free(h->dhost);
    ss_free(h->drank);
    ss_free(h->sig);
    ss_free(h->key);
    ss_free(h->psum);
    ss_free(h->pwsum);
    ss_free(h->scan);
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

/* ---- plan analysis -------------------------------------------------------- */

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

#define UNSUP(...) ss_diag_set(d, SS_ERR_UNSUPPORTED, "hierarchical evaluator: " __VA_ARGS__)

/* Check the plan's form, fill per-op sample dims and stages, per-device
 * stages, the stages' op lists, devices and per-op keys. */
/* Whether every op of stage s reading tensor t (sent by stage s - 1) is
 * split as op o is (degrees, replicas, reduction): a stage whose readers
 * of its input differ (one split on the hidden dim, one replicated)
 * receives it in several transfers that arrive at different times, which
 * the stage-level send does not model within 0.5% (issue 27 item 4:
 * +1.0% on random GPT block plans). */
static int same_split_readers(const ss_hier *h, const ss_plan *p, int t, int s, int o)
{
    const ss_pconfig *a = ss_plan_config(p, o);
    for (int i = 0; i < ss_graph_n_consumers(h->g, t); i++) {
        int r = ss_graph_consumer(h->g, t, i);
        if (r == o || h->stage[r] != s)
            continue;
        const ss_pconfig *b = ss_plan_config(p, r);
        if (a->ndim != b->ndim || a->rep != b->rep || a->red != b->red ||
            memcmp(a->deg, b->deg, (size_t)a->ndim * sizeof a->deg[0]))
            return 0;
    }
    return 1;
}

static ss_status analyse(ss_hier *h, const ss_plan_view *v, const ss_plan *p, ss_diag *d)
{
    const ss_graph *g = h->g;
    const ss_machine *m = h->m;
    const ss_plan_settings *set = ss_plan_settings_get(p);
    int n = ss_graph_n_ops(g), nd = ss_machine_n_devices(m);
    int P = v->P, M = v->M, V = v->V, R = P / V;
    h->sd = v->sd;
    h->stage = v->stage;
    h->pos = v->pos;
    h->sops = v->sops;
    if (set->schedule != SS_PIPE_GPIPE && set->schedule != SS_PIPE_1F1B)
        return UNSUP("unknown pipeline schedule");
    if (set->distopt == SS_ZERO3 && V > 1)
        return UNSUP("distopt 3 (ZeRO-3) with virtual_stages = %d: no full simulation to hold "
                     "the stage-level pipeline to (its prefetch gates across interleaved "
                     "chunks form a dependency cycle in the task graph)",
                     V);
    if (set->reorder_backward > 0 || set->synced_flags)
        return UNSUP("%s is not modelled by the stage-level pipeline",
                     set->reorder_backward > 0 ? "reorder_backward" : "synced_flags");
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
        int sd = v->sd[o];
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
    /* stages: op lists (the view's groups), devices */
    for (int s = 0; s < P; s++) {
        stageinfo *S = &h->stg[s];
        S->off = v->stage_off[s];
        S->n = v->stage_off[s + 1] - S->off;
        if (!S->n)
            return UNSUP("stage %d has no operators", s);
        S->base = -1;
        S->first = -1;
        for (int j = 0; j < S->n; j++) {
            int o = v->sops[S->off + j];
            if (S->first < 0 && ss_graph_op(g, o)->type != SS_OP_INPUT)
                S->first = o;
            S->last = o;
        }
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
            if (!same_split_readers(h, p, t->id, s, o))
                return UNSUP("stage %d reads \"%s\" from stage %d split in more than one way "
                             "(the pieces arrive apart, at times the sub-problem does not "
                             "model within 0.5%%)",
                             s, t->name, s - 1);
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
                if (q != o && set->distopt == SS_ZERO3)
                    return UNSUP("distopt 3 (ZeRO-3): weight \"%s\" is read by \"%s\" and "
                                 "\"%s\" (a tied embedding): its per-micro-batch all-gathers, "
                                 "one per reader, and reduce-scatters (across stages: "
                                 "rendezvous of the stages) are not modelled",
                                 ss_graph_tensor(g, op->weights[w])->name, op->name,
                                 ss_graph_op(g, q)->name);
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

/* ZeRO-3: a pass (its kernel chain first .. last) whose data-parallel
 * collectives take `link` us of its rank's link resource lr: a start gate
 * (no time) that both the chain and a link task of that length wait for,
 * and an end that waits for both, so that the pass ends when its kernels
 * and its share of the rank's links are done (*gate, *end: the pass's new
 * ends). Nonzero on error (d set). */
static int add_link(ss_taskgraph *tg, double link, int prio, int lr, int c, int k, int first,
                    int last, int *gate, int *end, ss_diag *d)
{
    int r1[1] = {lr};
    int g = add(tg, SS_TASK_OTHER, 0, prio, 0, NULL, c, k, d);
    int l = g < 0 ? -1 : add(tg, SS_TASK_COLLECTIVE, link, prio, 1, r1, c, k, d);
    int e = l < 0 ? -1 : add(tg, SS_TASK_OTHER, 0, prio, 0, NULL, c, k, d);
    if (e < 0 || ss_taskgraph_add_dep(tg, g, first, d) != SS_OK ||
        ss_taskgraph_add_dep(tg, g, l, d) != SS_OK ||
        ss_taskgraph_add_dep(tg, last, e, d) != SS_OK || ss_taskgraph_add_dep(tg, l, e, d) != SS_OK)
        return -1;
    *gate = g;
    *end = e;
    return 0;
}

static ss_status pipeline(ss_hier *h, const ss_plan *p, double *end_b, double *busy,
                          double *top, double *lend, int64_t *ntasks, ss_diag *d)
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
    /* ZeRO-3: one more resource per rank, its data-parallel links */
    int z3 = set->distopt == SS_ZERO3;
    ss_status st = ss_taskgraph_reset(tg, P, 3 * C + (z3 ? P : 0), d);
    if (st != SS_OK)
        return st;
    ss_taskgraph_set_pred_lists(tg, 0);
    /* stage (chunk) c runs on rank c mod P with its own figures; the send
     * into c was measured in c's sub-problem */
    for (int c = 0; c < C; c++) {
        int s = c % P, prev = (c - 1 + P) % P;
        const figs *f = &h->stg[c].f, *fin = f;
        double bw = f->bwd, bwl = f->bwd_last;
        for (int k = 0; k < M; k++) {
            int64_t i = (int64_t)c * M + k;
            int lastk = k == M - 1;
            double bwk = lastk ? bwl : bw;
            /* ZeRO-3: a forward's first gathers after the first micro-batch's
             * were prefetched during earlier passes */
            double fw = k && z3 ? f->fwd - f->fpre : f->fwd;
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
            int pf0 = ss_sched_prio_fwd(h->stg[c].first, k);
            int pb0 = ss_sched_prio_bwd(n_ops, h->stg[c].last, k);
            int nch = block || !h->stg[c].reps ? 1 : h->stg[c].reps;
            nch = nch < 1 ? 1 : nch > 32 ? 32 : nch;
            if (add_pass(tg, SS_TASK_FWD, kf, fw, nch, pf0, s, c, k, &id.F[i], &id.FE[i], d) ||
                add_pass(tg, SS_TASK_BWD, kb, bwk, nch, pb0, s, c, k, &id.B[i], &id.BE[i], d))
                return d->status;
            if (z3) {
                /* the pass's gathers (and reduce-scatters within the
                 * backward) on the rank's links; the reduce-scatters after
                 * the backward follow it there, behind every pass's
                 * gathers (the builder's gradient priority) */
                int lr = P + 3 * C + s, r1[1] = {lr}, be = id.BE[i];
                if (add_link(tg, f->lf, pf0, lr, c, k, id.F[i], id.FE[i], &id.F[i], &id.FE[i], d) ||
                    add_link(tg, f->lb, pb0, lr, c, k, id.B[i], id.BE[i], &id.B[i], &id.BE[i], d))
                    return d->status;
                int rs = add(tg, SS_TASK_COLLECTIVE, f->lr, 2 * n_ops * SS_SCHED_MB_SLOTS + k, 1,
                             r1, c, k, d);
                if (rs < 0 || ss_taskgraph_add_dep(tg, be, rs, d) != SS_OK)
                    return d->status;
            }
            kern[s] += kf + kb;
            if (c == 0)
                continue;
            /* a blocking send holds the sender from its pass's end and the
             * receiver at its next operator boundary, taken as at once: the
             * sender's share is the send on the channel, the receiver's a
             * task of the same length that its next pass waits for */
            int rf[2] = {P + 3 * c, prev}, rb[2] = {P + 3 * c + 1, s};
            int rg[1] = {P + 3 * c + 2}, rs[1] = {s}, rp[1] = {prev};
            int pf = ss_sched_prio_fwd(h->stg[c - 1].last, k);
            int pb = ss_sched_prio_bwd(n_ops, h->stg[c].first, k);
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
             * pass resumes after the transfer), not counted as busy, from
             * its next operator boundary on: a receiver running its
             * backward reaches one bop2 / (2 bop1) later on average (the
             * full simulation's receiver computes meanwhile), an idle one
             * waits for the network (QB) all the same */
            const figs *fr = &h->stg[c - 1].f;
            double held = q - (fr->bop1 > 0 ? fr->bop2 / (2 * fr->bop1) : 0);
            if (held > 0 && block) {
                if ((id.QR[i] = add(tg, SS_TASK_OTHER, held, pb, 1, rp, c, k, d)) < 0)
                    return d->status;
                kern[prev] += held;
            }
            if (fin->gather > 0 &&
                ((id.GF[i] = add(tg, SS_TASK_COLLECTIVE, fin->gather, pf, 1, rg, c, k, d)) < 0 ||
                 (id.GB[i] = add(tg, SS_TASK_COLLECTIVE, fin->gather,
                                 ss_sched_prio_bwd(n_ops, h->stg[c - 1].last, k), 1, rg, c, k,
                                 d)) < 0))
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
                DEP(id.QR[i], id.CB[i]);
                DEP(bq, id.CB[i]);
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
    for (int s = 0; s < P; s++) {
        busy[s] = er->busy[s] - kern[s];
        lend[s] = 0;
    }
    for (int t = 0; z3 && t < tg->n_tasks; t++) {
        if (ss_taskgraph_n_res(tg, t) != 1)
            continue; /* a join holds no resource: nothing to read */
        int r = ss_taskgraph_res(tg, t)[0] - P - 3 * C;
        if (r >= 0 && er->end[t] > lend[r])
            lend[r] = er->end[t];
    }
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
    int nmv = M * V;
    mev *ev = ss_malloc((size_t)nmv * 8 * sizeof *ev);
    if (!ev)
        return ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
    for (int s = 0; s < P; s++) {
        int n = 0;
        for (int c = s; c < C; c += P) {
            const figs *f = &h->stg[c].f;
            int ckpt = ss_plan_stage_recompute(set, c) == SS_RECOMPUTE_FULL;
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
        k = mixd(mixd(k, f->bop1), f->bop2);
        k = mixd(mixd(mix(k, (uint64_t)S->reps), f->comp_fb), f->comp_f);
        k = mix(k, (uint64_t)(ss_plan_stage_recompute(set, s) == SS_RECOMPUTE_FULL));
        if (set->distopt == SS_ZERO3)
            k = mixd(mixd(mixd(mixd(mix(k, 0x23), f->lf), f->lb), f->lr), f->fpre);
    }
    return k ? k : 1;
}

/* pipeline(), memoized (the last PMEMO schedules; every array [stages];
 * top [2 x stages]: the ranks' link ends follow their tops). */
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
            memcpy(top, h->pmemo[i].top, 2 * sz);
            *ntasks = 0;
            return SS_OK;
        }
    ss_status st = pipeline(h, p, end_b, busy, top, top + P, ntasks, d);
    if (st != SS_OK)
        return st;
    pentry *e = &h->pmemo[h->pnext];
    double *a = ss_realloc(e->end_b, sz);
    if (a)
        e->end_b = a;
    double *b = ss_realloc(e->busy, sz);
    if (b)
        e->busy = b;
    double *c = ss_realloc(e->top, 2 * sz);
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
    memcpy(e->top, top, 2 * sz);
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
                           ? ss_hier_sub_one(h, p, c, S->reps ? S->reps : 0, bulk, delay, &w, d)
                           : ss_hier_extrapolated(h, p, c, bulk, delay, &w, d);
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

/* ZeRO-3: every stage's data-parallel collectives of one micro-batch (its
 * weight all-gathers and gradient reduce-scatters at its first device) run
 * at most Z3_LINK of its forward and backward spans. The stage-level
 * pipeline puts them on a link resource per rank (a pass ends when its
 * kernels and its collectives are done; a micro-batch's reduce-scatters
 * after its backward queue behind later passes' gathers), which holds
 * within 0.25% of the full simulation where the links are light (12 GPT
 * plans with data parallelism inside a node, links 8-19% of the spans) but
 * not where they are loaded: the full simulation's one-ahead prefetch puts
 * each gather on its pass's critical path, so a reduce-scatter still
 * running delays the pass rather than filling its gaps (22-23%: -0.38% and
 * -0.55%; inter-node data parallelism, 73-129%: -3.4% to -7.5%;
 * docs/simulator.md, "Hierarchical evaluator"). SS_ERR_UNSUPPORTED past it. */
#define Z3_LINK 0.2
static ss_status zero3_light(const ss_hier *h, const ss_plan *p, ss_diag *d)
{
    const ss_plan_settings *set = ss_plan_settings_get(p);
    int C = set->stages < 1 ? 1 : set->stages;
    for (int c = 0; c < C; c++) {
        const figs *f = &h->stg[c].f;
        double link = f->lf + f->lb + f->lr, span = f->fwd + f->bwd;
        if (link > Z3_LINK * span)
            return UNSUP("distopt 3 (ZeRO-3): stage %d's weight all-gathers and gradient "
                         "reduce-scatters hold its data-parallel links %.0f%% of a "
                         "micro-batch's passes (%.0f of %.0f us), over the %.0f%% within "
                         "which the stage-level pipeline models how they delay other "
                         "micro-batches' passes",
                         c, 100 * link / span, link, span, 100 * Z3_LINK);
    }
    return SS_OK;
}

int ss_hier_accepts(ss_hier *h, const ss_plan_view *v, const ss_plan *p, ss_diag *d)
{
    if (ss_plan_n_ops(p) != ss_graph_n_ops(h->g)) {
        ss_diag_set(d, SS_ERR_UNSUPPORTED,
                    "hierarchical evaluator: the plan has %d operators, the model %d",
                    ss_plan_n_ops(p), ss_graph_n_ops(h->g));
        return 0;
    }
    for (int i = 0; i < ss_machine_n_types(h->m); i++)
        if (ss_machine_type(h->m, i)->comm_blocks_compute) {
            ss_diag_set(d, SS_ERR_UNSUPPORTED,
                        "hierarchical evaluator: device type \"%s\" moves its own messages "
                        "(comm_blocks_compute)",
                        ss_machine_type(h->m, i)->name);
            return 0;
        }
    ss_hier_stats st0 = h->st;
    ss_status st = v ? SS_OK : ss_plan_view_set(h->own_view, p, d);
    if (st == SS_OK)
        st = analyse(h, v ? v : h->own_view, p, d);
    h->st = st0;
    return st == SS_OK ? 1 : st == SS_ERR_UNSUPPORTED ? 0 : -1;
}

ss_status ss_hier_eval(ss_hier *h, const ss_plan *p, ss_sim_result *r, ss_diag *dd)
{
    return ss_hier_eval_view(h, NULL, p, r, dd);
}

ss_status ss_hier_eval_view(ss_hier *h, const ss_plan_view *v, const ss_plan *p,
                            ss_sim_result *r, ss_diag *dd)
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
    ss_status st = v ? SS_OK : ss_plan_view_set(h->own_view, p, d);
    if (st == SS_OK)
        st = analyse(h, v ? v : h->own_view, p, d);
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
        st = ss_hier_stage_figs(h, p, s, d);
    if (st == SS_OK && set->distopt == SS_ZERO3)
        st = zero3_light(h, p, d);
    int nd = ss_machine_n_devices(h->m);
    double *end_b = NULL, *busy = NULL, *top = NULL;
    int64_t ptasks = 0;
    if (st == SS_OK) {
        end_b = ss_calloc((size_t)P * 4, sizeof *end_b);
        busy = end_b + P;
        top = busy + P;
        if (!end_b)
            st = ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
    }
    if (st == SS_OK)
        st = pipeline_cached(h, p, end_b, busy, top, &ptasks, d);
    if (st == SS_OK && set->distopt != SS_ZERO3)
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
        /* ZeRO-3: the updates wait for the rank's last reduce-scatter on
         * its links too (every micro-batch's, queued behind the passes'
         * gathers) */
        if (set->distopt == SS_ZERO3 && top[P + s] + h->stg[c0].f.lpost > e)
            e = top[P + s] + h->stg[c0].f.lpost;
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
            double pk = stat - f->stat + f->peak1 + infl + (M > 1 ? f->pre : 0);
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
