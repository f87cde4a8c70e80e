/*
 * symmetry.c — the symmetric evaluator (symmetry.h has the rules,
 * docs/simulator.md "Symmetry" the argument): detect D identical
 * data-parallel blocks, simulate block 0 on the graph rebuilt with batch / D
 * (the builder told to hold weight shards in every block and to put the
 * gradient collectives' channels on block 0's representatives), copy block
 * 0's per-device results to the other blocks.
 *
 * Invariant: y->ok_D > 0 only while y->rs holds a run of the reduced plan
 * for y->dmap / y->blk that passed every check (what the trace draws).
 */
#include "simulator/symmetry.h"

#include "core/hash.h"
#include "core/plan_impl.h"
#include "core/routeclass.h"
#include "simulator/build.h"
#include "simulator/build_impl.h"
#include "simulator/plan_view.h"
#include "simulator/taskgraph.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NLOST 8 /* blocks remembered as failing a sub-problem's build checks */
#define NRGOK 32 /* sub-problems' splits remembered as passing the region check */

struct ss_symmetry {
    const ss_graph *g;
    const ss_machine *m;
    ss_costmodel *cm;
    ss_sim_config cfg;
    int n_dev, n_ch;
    int D;
    int *sig;       /* [n_dev] sigma (one block on) */
    int *blk;       /* [n_dev] */
    int *dmap;      /* [D * n_dev] */
    int cap_dmap;
    int *cmap;      /* [D * n_ch] */
    int cap_cmap;
    int *ch1, *chinv; /* [n_ch] channel map of sigma, its inverse (-1 none) */
    int *canon, *mark; /* [n_ch] for the hook */
    int *msig;      /* [n_dev] the sigma whose machine check is cached */
    int m_ok;       /* -1 unknown, 0 failed, 1 passed for msig */
    int m_used;     /* used_only of that check */
    const int **rt; /* [n_dev] scratch of the pair walk: routes, lengths, devices */
    int cap_rt;
    int *rn, *pz;
    int cap_rn, cap_pz;
    int used_only;  /* check device pairs the plan uses only (sub-problems) */
    char m_why[160];
    ss_graph *rg;   /* the graph with batch / rg_D */
    int rg_D;
    int rg_failed;  /* rebuilding for rg_D failed (why in rg_why) */
    char rg_why[160];
    ss_plan *rp;
    ss_sim *rs;
    ss_build_sym hook;
    ss_sim_result rr;
    int *dv;        /* scratch: a reduced config's devices */
    int cap_dv;
    char why[200];
    int64_t tasks;
    int classes;
    int ok_D;
    /* sub-problems (ss_sym_reduce) */
    uint64_t sig_key;       /* sig_hash of the last sub-problem reduced */
    uint64_t lost[NLOST];   /* sig_hash of blocks whose sub-problem failed the build's checks */
    int n_lost;
    uint64_t rgok[NRGOK];   /* regions_key of sub-problems whose regions passed */
    int n_rgok;
    int sD;         /* blocks of the last sub-problem reduced (0: none) */
    ss_graph *srg;  /* its reduced graph and plan */
    ss_plan *srp;
    /* uneven collectives (uneven_ok): of the build in progress */
    int uneven;     /* a collective spanning the blocks whose channels sigma does not keep */
    int pre_chan;   /* block 0's tasks (before pass 7) hold channels */
    int n0;         /* tasks before pass 7 */
    int nx;         /* pass 7's collectives that hold channels */
    int *ccnt;      /* [n_ch] of them, how many hold each channel (as in the full run) */
    unsigned *dF, *dR; /* [n_dev] device marks: touched in the full / reduced run */
    unsigned dgen;
    unsigned m_version; /* bumped whenever machine_ok recomputes sigma's channel map */
    unsigned hk_version; /* the m_version and D that dmap, cmap were made for */
    int hk_D;
    /* the view of the plan being detected (plan_view.h): the dispatcher's,
     * or own (a plan of y->g judged without one) or subv (a sub-problem's) */
    ss_plan_view *v;
    ss_plan_view *own, *subv;
};

ss_symmetry *ss_sym_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                        const ss_sim_config *cfg)
{
    ss_symmetry *y = ss_calloc(1, sizeof *y);
    if (!y)
        return NULL;
    y->g = g;
    y->m = m;
    y->cm = cm;
    if (cfg)
        y->cfg = *cfg;
    y->cfg.evaluator = SS_EVAL_FULL;
    y->n_dev = ss_machine_n_devices(m);
    y->n_ch = 2 * ss_machine_n_links(m);
    int nd = y->n_dev > 0 ? y->n_dev : 1, nc = y->n_ch > 0 ? y->n_ch : 1;
    y->sig = ss_malloc((size_t)nd * sizeof(int));
    y->blk = ss_malloc((size_t)nd * sizeof(int));
    y->msig = ss_malloc((size_t)nd * sizeof(int));
    y->ch1 = ss_malloc((size_t)nc * sizeof(int));
    y->chinv = ss_malloc((size_t)nc * sizeof(int));
    y->canon = ss_malloc((size_t)nc * sizeof(int));
    y->mark = ss_calloc((size_t)nc, sizeof(int));
    y->ccnt = ss_calloc((size_t)nc, sizeof(int));
    y->dF = ss_calloc((size_t)nd, sizeof(unsigned));
    y->dR = ss_calloc((size_t)nd, sizeof(unsigned));
    y->own = ss_plan_view_new(g, m);
    y->m_ok = -1;
    if (!y->sig || !y->blk || !y->msig || !y->ch1 || !y->chinv || !y->canon || !y->mark ||
        !y->ccnt || !y->dF || !y->dR || !y->own) {
        ss_sym_free(y);
        return NULL;
    }
    return y;
}

void ss_sym_free(ss_symmetry *y)
{
    if (!y)
        return;
    ss_free(y->sig);
    ss_free(y->blk);
    ss_free(y->dmap);
    ss_free(y->cmap);
    ss_free(y->ch1);
    ss_free(y->chinv);
    ss_free(y->canon);
    ss_free(y->mark);
    ss_free(y->ccnt);
    ss_free(y->dF);
    ss_free(y->dR);
    ss_free(y->msig);
    ss_plan_view_free(y->own);
    ss_plan_view_free(y->subv);
    ss_graph_free(y->rg);
    ss_plan_free(y->rp);
    ss_sim_free(y->rs);
    ss_sim_result_clear(&y->rr);
    ss_free(y->dv);
    ss_free(y->rt);
    ss_free(y->rn);
    ss_free(y->pz);
    ss_graph_free(y->srg);
    ss_plan_free(y->srp);
    ss_free(y);
}

const char *ss_sym_why(const ss_symmetry *y)
{
    return y->why;
}

int64_t ss_sym_tasks_simulated(const ss_symmetry *y)
{
    return y->tasks;
}

int ss_sym_classes(const ss_symmetry *y)
{
    return y->classes;
}

ss_sim *ss_sym_reduced_sim(ss_symmetry *y)
{
    return y->rs;
}

int ss_sym_blocks(const ss_symmetry *y, const int **dmap, const int **cmap, const int **blk)
{
    *dmap = y->dmap;
    *cmap = y->cmap;
    *blk = y->blk;
    return y->ok_D;
}

/* ---- detection from the plan -------------------------------------------- */

static int sample_dim(const ss_tensor *t)
{
    for (int i = 0; t && i < t->ndim; i++)
        if (t->kind[i] == SS_DIM_SAMPLE)
            return i;
    return -1;
}

/* The sample dim of op o of the plan being detected (its view's). */
static int op_sample_dim(const ss_symmetry *y, int o)
{
    return y->v->sd[o];
}

/* Tile-index stride of the sample dim sd of config c. */
static int64_t sample_stride(const ss_pconfig *c, int sd)
{
    int64_t st = (int64_t)c->rep * c->red;
    for (int k = sd + 1; k < c->ndim; k++)
        st *= c->deg[k];
    return st;
}

/* Blocks and sigma for D into sig, blk: 1 if p (a plan of g) is D blocks
 * as symmetry.h says (as far as devices go), else 0 with y->why set. */
static int find_blocks(ss_symmetry *y, const ss_graph *g, const ss_plan *p, int D, int *sig,
                       int *blk)
{
    int nd = y->n_dev;
    for (int i = 0; i < nd; i++)
        blk[i] = sig[i] = -1;
    for (int o = 0; o < ss_plan_n_ops(p); o++) {
        const ss_pconfig *c = ss_plan_config(p, o);
        int sd = op_sample_dim(y, o);
        int64_t S = c->deg[sd], per = S / D, st = sample_stride(c, sd);
        for (int t = 0; t < c->ntiles; t++) {
            int64_t is = (t / st) % S;
            int j = (int)(is / per);
            int dev = c->devices[t];
            int64_t t2 = j < D - 1 ? t + per * st : t - (int64_t)(D - 1) * per * st;
            int img = c->devices[t2];
            if (blk[dev] < 0)
                blk[dev] = j;
            if (blk[dev] != j) {
                snprintf(y->why, sizeof y->why,
                         "device %d runs tiles of two data-parallel blocks (operator \"%s\")", dev,
                         ss_graph_op(g, o)->name);
                return 0;
            }
            if (sig[dev] < 0)
                sig[dev] = img;
            if (sig[dev] != img) {
                snprintf(y->why, sizeof y->why,
                         "operator \"%s\" places its data-parallel blocks differently from the "
                         "other operators",
                         ss_graph_op(g, o)->name);
                return 0;
            }
        }
    }
    /* sigma: a bijection moving block j to block j + 1, fixing unused devices */
    if (ss_grow((void **)&y->dv, &y->cap_dv, nd, sizeof(int)))
        return -1;
    memset(y->dv, 0, (size_t)nd * sizeof(int));
    for (int i = 0; i < nd; i++) {
        if (blk[i] < 0)
            sig[i] = i;
        int s = sig[i];
        if (y->dv[s]++ ||
            (blk[i] >= 0 && blk[s] != (blk[i] + 1) % D) ||
            (blk[i] < 0 && blk[s] >= 0)) {
            snprintf(y->why, sizeof y->why,
                     "the data-parallel blocks do not map device for device onto each other");
            return 0;
        }
    }
    return 1;
}

/* ---- the machine ----------------------------------------------------------- */

static int dev_before(const ss_machine *m, int x, int y)
{
    const ss_device *a = ss_machine_device(m, x), *b = ss_machine_device(m, y);
    if (a->host != b->host)
        return a->host < b->host;
    if (a->local_rank != b->local_rank)
        return a->local_rank < b->local_rank;
    return a->id < b->id;
}

static int same_channel(const ss_machine *m, int c, int e)
{
    const ss_link *a = ss_machine_link(m, c / 2), *b = ss_machine_link(m, e / 2);
    return ss_machine_channel_gbps(m, c) == ss_machine_channel_gbps(m, e) &&
           ss_machine_channel_latency_us(m, c) == ss_machine_channel_latency_us(m, e) &&
           a->coll_eff == b->coll_eff && a->coll_half_bytes == b->coll_half_bytes;
}

/* Pair (a, b) against (sigma a, sigma b): host sharing, the ring order
 * within a block, and their routes link for link (extending y->ch1);
 * route(a, b) given (r1, n1; e1: none), route(sigma a, sigma b) returned
 * in r2, n2, e2. 0 with y->m_why set when they differ. */
static int pair_ok(ss_symmetry *y, int a, int b, const int *r1, int n1, int e1, const int **r2,
                   int *n2, int *e2)
{
    const ss_machine *m = y->m;
    int sa = y->sig[a], sb = y->sig[b];
    const ss_device *da = ss_machine_device(m, a), *dsa = ss_machine_device(m, sa);
    const ss_device *db = ss_machine_device(m, b), *dsb = ss_machine_device(m, sb);
    if ((da->host == db->host) != (dsa->host == dsb->host) ||
        (y->blk[a] == y->blk[b] && dev_before(m, a, b) != dev_before(m, sa, sb))) {
        snprintf(y->m_why, sizeof y->m_why,
                 "the blocks sit differently on the hosts (devices %d and %d)", a, b);
        return 0;
    }
    *n2 = 0;
    *e2 = ss_machine_route(m, sa, sb, r2, n2) != SS_OK;
    if (e1 != *e2 || (!e1 && n1 != *n2)) {
        snprintf(y->m_why, sizeof y->m_why, "routes %d -> %d and %d -> %d differ", a, b, sa, sb);
        return 0;
    }
    for (int i = 0; !e1 && i < n1; i++) {
        int c = r1[i], e = (*r2)[i];
        if (y->ch1[c] < 0 && y->chinv[e] < 0 && same_channel(m, c, e)) {
            y->ch1[c] = e;
            y->chinv[e] = c;
        }
        if (y->ch1[c] != e) {
            snprintf(y->m_why, sizeof y->m_why,
                     "routes %d -> %d and %d -> %d do not map link for link", a, b, sa, sb);
            return 0;
        }
    }
    return 1;
}

/* For sigma (y->sig) a permutation of identical hosts (positions kept):
 * does it keep the ring order (host, local rank, id) within every block?
 * Devices of one host keep theirs, so: the hosts holding devices of a block
 * keep their order. 1 yes, 0 no (y->m_why), -1 out of memory. */
static int hosts_in_order(ss_symmetry *y)
{
    const ss_machine *m = y->m;
    int nd = y->n_dev, nh = ss_machine_n_hosts(m), D = 0;
    for (int i = 0; i < nd; i++)
        if (y->blk[i] + 1 > D)
            D = y->blk[i] + 1;
    int *first = ss_malloc(((size_t)nh + 1) * sizeof *first);
    int *next = ss_malloc(((size_t)nd + 1) * sizeof *next);
    int *last = ss_malloc(((size_t)D + 1) * sizeof *last);
    int *seen = ss_malloc(((size_t)D + 1) * sizeof *seen);
    int ok = first && next && last && seen ? 1 : -1;
    for (int h = 0; ok > 0 && h < nh; h++)
        first[h] = -1;
    for (int i = nd - 1; ok > 0 && i >= 0; i--) {
        int h = ss_machine_device(m, i)->host;
        next[i] = first[h];
        first[h] = i;
    }
    for (int j = 0; ok > 0 && j < D; j++)
        last[j] = seen[j] = -1;
    for (int h = 0; ok > 0 && h < nh; h++)
        for (int i = first[h]; ok > 0 && i >= 0; i = next[i]) {
            int j = y->blk[i], ph = ss_machine_device(m, y->sig[i])->host;
            if (j < 0 || seen[j] == h)
                continue;
            seen[j] = h;
            if (ph <= last[j]) {
                snprintf(y->m_why, sizeof y->m_why,
                         "the blocks sit differently on the hosts (device %d's host moves before "
                         "another of its block)",
                         i);
                ok = 0;
            }
            last[j] = ph;
        }
    ss_free(first);
    ss_free(next);
    ss_free(last);
    ss_free(seen);
    return ok;
}

/* Is sigma (y->sig) an automorphism of the machine (symmetry.h)? Fills
 * y->ch1 / chinv. Cached for the last sigma checked. With y->used_only
 * (sub-problems, symmetry.h), only as far as a sub-problem needs: the
 * routes within each block (its tasks' transfers and collectives) and
 * enough routes between blocks to map the channels of the collectives
 * spanning every block (their device lists are the same in the reduced and
 * the whole sub-problem; the build checks that each one's channels are
 * their own image: ss_sym_hook_remap); a channel left without an image
 * fails that check. -1: out of memory. */
static int machine_ok(ss_symmetry *y, int D)
{
    int nd = y->n_dev;
    if (y->m_ok >= 0 && y->m_used == y->used_only &&
        !memcmp(y->msig, y->sig, (size_t)nd * sizeof(int)))
        return y->m_ok;
    memcpy(y->msig, y->sig, (size_t)nd * sizeof(int));
    y->m_used = y->used_only;
    y->m_ok = 0;
    y->m_version++;
    const ss_machine *m = y->m;
    for (int c = 0; c < y->n_ch; c++)
        y->ch1[c] = y->chinv[c] = -1;
    for (int a = 0; a < nd; a++) {
        const ss_device *da = ss_machine_device(m, a), *sa = ss_machine_device(m, y->sig[a]);
        if (da->type != sa->type || da->up_gbps != sa->up_gbps ||
            da->down_gbps != sa->down_gbps ||
            da->accepts_connections != sa->accepts_connections) {
            snprintf(y->m_why, sizeof y->m_why,
                     "devices %d and %d (a block apart) differ in type or peer figures", a,
                     y->sig[a]);
            return 0;
        }
    }
    if (ss_routeclass_automorphism(m, y->sig, y->ch1)) {
        /* a permutation of identical hosts: every route maps (routeclass.h) */
        for (int c = 0; c < y->n_ch; c++)
            if (y->ch1[c] >= 0)
                y->chinv[y->ch1[c]] = c;
        int r = hosts_in_order(y);
        if (r <= 0)
            return y->m_ok = r;
        y->m_why[0] = 0;
        return y->m_ok = 1;
    }
    const int *r1, *r2;
    int n1, n2, e1, e2;
    if (y->used_only) {
        /* the orbits under sigma of the pairs (a, b), a in block 0 and b in
         * block 0 or b = sigma^j a, j = 1, 2, 4, ... < D: sigma^k (a, b)
         * for k = 0 .. D-1, source by source (the machine keeps a few
         * routing trees); per partner: its device now (pz) and the route
         * of the pair last checked (rt, rn; rn -1: none) */
        if (ss_grow((void **)&y->rt, &y->cap_rt, nd + 64, sizeof *y->rt) ||
            ss_grow((void **)&y->rn, &y->cap_rn, nd + 64, sizeof *y->rn) ||
            ss_grow((void **)&y->pz, &y->cap_pz, nd + 64, sizeof *y->pz))
            return y->m_ok = -1;
        for (int a = 0; a < nd; a++) {
            if (y->blk[a] != 0)
                continue;
            int np = 0;
            for (int b = 0; b < nd; b++)
                if (b != a && y->blk[b] == 0)
                    y->pz[np++] = b;
            for (int j = 1, x = y->sig[a], k = 1; j < D; k++, x = y->sig[x])
                if (k == j) {
                    y->pz[np++] = x;
                    j *= 2;
                }
            for (int i = 0; i < np; i++) {
                y->rn[i] = 0;
                if (ss_machine_route(m, a, y->pz[i], &y->rt[i], &y->rn[i]) != SS_OK)
                    y->rn[i] = -1;
            }
            for (int x = a, k = 0; k < D; k++, x = y->sig[x])
                for (int i = 0; i < np; i++) {
                    if (!pair_ok(y, x, y->pz[i], y->rt[i], y->rn[i] < 0 ? 0 : y->rn[i],
                                 y->rn[i] < 0, &r2, &n2, &e2))
                        return 0;
                    y->rt[i] = r2;
                    y->rn[i] = e2 ? -1 : n2;
                    y->pz[i] = y->sig[y->pz[i]];
                }
        }
    } else {
        for (int a = 0; a < nd; a++)
            for (int b = 0; b < nd; b++) {
                if (a == b)
                    continue;
                n1 = 0;
                e1 = ss_machine_route(m, a, b, &r1, &n1) != SS_OK;
                if (!pair_ok(y, a, b, r1, n1, e1, &r2, &n2, &e2))
                    return 0;
            }
    }
    y->m_why[0] = 0;
    return y->m_ok = 1;
}

/* ---- the reduced graph ------------------------------------------------------ */

/* g rebuilt with batch / D: the same ops, tensors and weights, sample dims
 * divided by D. NULL (why set) when it cannot be, or on allocation
 * failure. */
static ss_graph *rebuild(const ss_graph *g, int D, char *why, size_t nw)
{
    snprintf(why, nw, "out of memory");
    int64_t batch = ss_graph_batch(g);
    if (batch % D) {
        snprintf(why, nw, "the batch %lld is not divisible by %d blocks", (long long)batch, D);
        return NULL;
    }
    ss_graph *rg = ss_graph_new(ss_graph_name(g));
    if (!rg)
        return NULL;
    ss_graph_set_training(rg, batch / D, ss_graph_optimizer(g), ss_graph_precision(g));
    for (int o = 0; o < ss_graph_n_ops(g); o++) {
        const ss_op *op = ss_graph_op(g, o);
        ss_op_spec s;
        memset(&s, 0, sizeof s);
        s.name = op->name;
        s.type = op->type;
        s.attrs = op->attrs;
        s.n_in = op->n_in;
        memcpy(s.inputs, op->inputs, sizeof s.inputs);
        if (op->type == SS_OP_INPUT) {
            for (int i = 0; i < s.attrs.ndim; i++)
                if (s.attrs.kind[i] == SS_DIM_SAMPLE)
                    s.attrs.shape[i] /= D;
        } else if (op->type == SS_OP_RESHAPE) {
            const ss_tensor *t = ss_graph_tensor(g, op->outputs[0]);
            for (int i = 0; i < s.attrs.ndim && i < t->ndim; i++)
                if (t->kind[i] == SS_DIM_SAMPLE)
                    s.attrs.shape[i] /= D;
        }
        int before = ss_graph_n_tensors(rg), shared = 0;
        for (int k = 0; k < op->n_w; k++)
            shared += op->weights[k] < before;
        if (shared && shared != op->n_w) {
            snprintf(why, nw, "operator \"%s\" mixes shared and own weights", op->name);
            goto fail;
        }
        s.n_w = shared ? op->n_w : -1;
        memcpy(s.weights, op->weights, sizeof s.weights);
        ss_diag dg;
        ss_diag_init(&dg);
        if (ss_graph_add_op(rg, &s, &dg) != o) {
            snprintf(why, nw, "the model cannot be rebuilt with batch %lld (operator \"%s\")",
                     (long long)(batch / D), op->name);
            goto fail;
        }
        const ss_op *rop = ss_graph_op(rg, o);
        int same = rop->n_w == op->n_w && rop->n_out == op->n_out;
        for (int k = 0; same && k < op->n_w; k++)
            same = rop->weights[k] == op->weights[k];
        for (int k = 0; same && k < op->n_out; k++)
            same = rop->outputs[k] == op->outputs[k];
        if (!same) {
            snprintf(why, nw, "operator \"%s\" rebuilt with other tensors", op->name);
            goto fail;
        }
    }
    if (ss_graph_n_tensors(rg) != ss_graph_n_tensors(g)) {
        snprintf(why, nw, "the rebuilt model has other tensors");
        goto fail;
    }
    for (int t = 0; t < ss_graph_n_tensors(g); t++) {
        const ss_tensor *a = ss_graph_tensor(g, t), *b = ss_graph_tensor(rg, t);
        int same = a->ndim == b->ndim && a->dtype == b->dtype && a->is_weight == b->is_weight &&
                   a->producer == b->producer && !strcmp(a->name, b->name);
        for (int i = 0; same && i < a->ndim; i++)
            same = a->kind[i] == b->kind[i] &&
                   (a->kind[i] == SS_DIM_SAMPLE ? a->shape[i] == b->shape[i] * D &&
                                                      a->shape[i] % D == 0
                                                : a->shape[i] == b->shape[i]);
        if (!same) {
            snprintf(why, nw, "tensor \"%s\" does not scale with the batch", a->name);
            goto fail;
        }
    }
    return rg;
fail:
    ss_graph_free(rg);
    return NULL;
}

static int reduced_graph(ss_symmetry *y, int D)
{
    if (y->rg && y->rg_D == D)
        return 1;
    if (y->rg_D == D && y->rg_failed) {
        snprintf(y->why, sizeof y->why, "%s", y->rg_why);
        return 0;
    }
    ss_sim_free(y->rs);
    ss_plan_free(y->rp);
    ss_graph_free(y->rg);
    y->rs = NULL;
    y->rp = NULL;
    y->rg_D = D;
    y->rg_failed = 1;
    y->rg = rebuild(y->g, D, y->rg_why, sizeof y->rg_why);
    if (!y->rg)
        goto fail;
    snprintf(y->rg_why, sizeof y->rg_why, "out of memory");
    ss_diag dg;
    ss_diag_init(&dg);
    y->rp = ss_plan_new(y->rg, y->m);
    if (!y->rp || ss_sim_new(y->rg, y->m, y->cm, &y->cfg, &y->rs, &dg) != SS_OK)
        goto fail;
    ss_build_set_symmetry(ss_sim_builder(y->rs), &y->hook);
    y->rg_failed = 0;
    return 1;
fail:
    ss_sim_free(y->rs);
    ss_plan_free(y->rp);
    ss_graph_free(y->rg);
    y->rs = NULL;
    y->rp = NULL;
    y->rg = NULL;
    snprintf(y->why, sizeof y->why, "%s", y->rg_why);
    return 0;
}

/* ---- regions ------------------------------------------------------------------ */

static int same_region(const ss_region *a, const ss_region *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->r[i].lo != b->r[i].lo || a->r[i].hi != b->r[i].hi)
            return 0;
    return 1;
}

/* b is a shifted by `by` along dim sd (sd < 0: b == a), a within [lo, hi)
 * there. */
static int shifted(const ss_region *a, const ss_region *b, int sd, int64_t by, int64_t lo,
                   int64_t hi)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++) {
        int64_t s = i == sd ? by : 0;
        if (b->r[i].lo != a->r[i].lo + s || b->r[i].hi != a->r[i].hi + s)
            return 0;
        if (i == sd && a->r[i].hi > a->r[i].lo && (a->r[i].lo < lo || a->r[i].hi > hi))
            return 0;
    }
    return 1;
}

/* The extent of tensor t's sample dim sd over D blocks. */
static int64_t block_of(const ss_tensor *t, int sd, int D)
{
    return sd >= 0 ? t->shape[sd] / D : 0;
}

/* Every tile of block j < D-1 and its image in block j + 1 read and write
 * regions one block apart (within their blocks); block 0's tiles have the
 * same regions in the reduced graph. */
static int regions_ok(ss_symmetry *y, const ss_graph *g, const ss_graph *rg, const ss_plan *p,
                      const ss_plan *rp, int D)
{
    for (int o = 0; o < ss_plan_n_ops(p); o++) {
        const ss_op *op = ss_graph_op(g, o), *rop = ss_graph_op(rg, o);
        const ss_pconfig *c = ss_plan_config(p, o), *rc = ss_plan_config(rp, o);
        int sd = op_sample_dim(y, o);
        int64_t S = c->deg[sd], per = S / D, st = sample_stride(c, sd);
        const ss_tensor *out = ss_graph_tensor(g, op->outputs[0]);
        int64_t eo = block_of(out, sd, D);
        int nops = op->n_in + op->n_w;
        for (int t = 0, rt = 0; t < c->ntiles; t++) {
            int64_t is = (t / st) % S;
            int j = (int)(is / per);
            ss_tile a, b;
            ss_pconfig_tile(g, op, c, t, &a);
            if (j == 0) { /* the reduced graph's tile rt */
                ss_tile r;
                ss_pconfig_tile(rg, rop, rc, rt++, &r);
                int same = same_region(&a.out, &r.out) && a.red.lo == r.red.lo &&
                           a.red.hi == r.red.hi;
                for (int i = 0; same && i < nops; i++) {
                    ss_region x, z;
                    ss_op_input_region(g, op, &a, i, &x);
                    ss_op_input_region(rg, rop, &r, i, &z);
                    same = same_region(&x, &z);
                }
                for (int k = 1; same && k < op->n_out; k++) {
                    ss_region x, z;
                    ss_op_output_region(g, op, &a, k, &x);
                    ss_op_output_region(rg, rop, &r, k, &z);
                    same = same_region(&x, &z);
                }
                if (!same) {
                    snprintf(y->why, sizeof y->why,
                             "operator \"%s\" reads or writes other regions at batch / %d",
                             op->name, D);
                    return 0;
                }
            }
            if (j == D - 1)
                continue;
            ss_pconfig_tile(g, op, c, (int)(t + per * st), &b);
            int ok = shifted(&a.out, &b.out, sd, eo, j * eo, (j + 1) * eo) &&
                     a.red.lo == b.red.lo && a.red.hi == b.red.hi;
            for (int i = 0; ok && i < nops; i++) {
                int tid = i < op->n_in ? op->inputs[i] : op->weights[i - op->n_in];
                const ss_tensor *x = ss_graph_tensor(g, tid);
                int xs = sample_dim(x);
                int64_t ex = block_of(x, xs, D);
                ss_region ra, rb;
                ss_op_input_region(g, op, &a, i, &ra);
                ss_op_input_region(g, op, &b, i, &rb);
                ok = shifted(&ra, &rb, xs, ex, j * ex, (j + 1) * ex);
            }
            for (int k = 1; ok && k < op->n_out; k++) {
                const ss_tensor *x = ss_graph_tensor(g, op->outputs[k]);
                int xs = sample_dim(x);
                int64_t ex = block_of(x, xs, D);
                ss_region ra, rb;
                ss_op_output_region(g, op, &a, k, &ra);
                ss_op_output_region(g, op, &b, k, &rb);
                ok = shifted(&ra, &rb, xs, ex, j * ex, (j + 1) * ex);
            }
            if (!ok) {
                snprintf(y->why, sizeof y->why,
                         "operator \"%s\": tiles of neighbouring data-parallel blocks do not "
                         "read and write regions one block apart",
                         op->name);
                return 0;
            }
        }
    }
    return 1;
}

/* The reduced plan rp (on the reduced graph): block 0's tiles of every op
 * of p (the plan of y->v). */
static int reduced_plan(ss_symmetry *y, const ss_plan *p, ss_plan *rp, int D, ss_diag *d)
{
    for (int o = 0; o < ss_plan_n_ops(p); o++) {
        const ss_pconfig *c = ss_plan_config(p, o);
        int sd = op_sample_dim(y, o);
        int64_t S = c->deg[sd], per = S / D, st = sample_stride(c, sd);
        ss_pconfig rc = *c;
        rc.deg[sd] = (int)per;
        rc.ntiles = c->ntiles / D;
        if (ss_grow((void **)&y->dv, &y->cap_dv, rc.ntiles, sizeof(int)))
            return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory"), -1;
        int n = 0;
        for (int t = 0; t < c->ntiles; t++)
            if ((t / st) % S < per)
                y->dv[n++] = c->devices[t];
        rc.devices = y->dv;
        if (ss_plan_set_config(rp, o, &rc, d) != SS_OK)
            return -1;
    }
    *ss_plan_settings_of(rp) = *ss_plan_settings_get(p);
    return 0;
}

/* ---- the builder's hook ----------------------------------------------------- */

/* The representative of channel c's orbit for a gradient collective: the
 * member block 0's tasks use (set by prepare), else the member with an end
 * at a device of block 0, else the smallest. -1: unknown channel image. */
static int canon_of(ss_build_sym *h, const ss_taskgraph *tg, int c)
{
    if (h->canon[c] >= 0)
        return h->canon[c];
    int best = -1, best0 = -1;
    for (int k = 0; k < h->D; k++) {
        int e = h->cmap[k * h->n_ch + c];
        if (e < 0)
            return -1;
        if (best < 0 || e < best)
            best = e;
        for (int s = 0; s < 2 && best0 < 0; s++) {
            int dev = tg->chan_dev[2 * e + s];
            if (dev >= 0 && h->blk[dev] == 0)
                best0 = e;
        }
    }
    int r = best0 >= 0 ? best0 : best;
    for (int k = 0; k < h->D; k++)
        h->canon[h->cmap[k * h->n_ch + c]] = r;
    return r;
}

/* The evaluator whose hook h is (h is always its y->hook). */
static ss_symmetry *sym_of(ss_build_sym *h)
{
    return (ss_symmetry *)(void *)((char *)h - offsetof(ss_symmetry, hook));
}

static void ss_sym_hook_prepare(ss_build_sym *h, const ss_taskgraph *tg)
{
    ss_symmetry *y = sym_of(h);
    h->tg = tg;
    for (int c = 0; c < h->n_ch; c++)
        h->canon[c] = -1;
    y->uneven = y->pre_chan = y->nx = 0;
    y->n0 = tg->n_tasks;
    memset(y->ccnt, 0, (size_t)h->n_ch * sizeof *y->ccnt);
    for (int t = 0; t < tg->n_tasks && !h->bad; t++)
        for (int k = tg->res_off[t]; k < tg->res_off[t + 1]; k++) {
            int c = tg->res[k] - tg->n_devices;
            y->pre_chan |= c >= 0;
            if (c < 0 || h->canon[c] == c)
                continue;
            if (h->canon[c] >= 0) {
                snprintf(h->why, sizeof h->why,
                         "two data-parallel blocks share channel %d (link %d)", c, c / 2);
                h->bad = 1;
                break;
            }
            for (int j = 0; j < h->D; j++) {
                int e = h->cmap[j * h->n_ch + c];
                if (e < 0 || (j > 0 && e == c) || h->canon[e] >= 0) {
                    snprintf(h->why, sizeof h->why,
                             "two data-parallel blocks share channel %d (link %d)", e < 0 ? c : e,
                             (e < 0 ? c : e) / 2);
                    h->bad = 1;
                    break;
                }
                h->canon[e] = c;
            }
        }
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* A collective spanning the blocks whose channel set (res[0..n), full-run
 * channels) sigma does not keep (a tree all-reduce: its inner edges lie in
 * the first and last hosts only): may the reduced run still represent it
 * (docs/simulator.md, "Uneven collectives")? Yes when block 0's own tasks
 * hold no channel and, per device, whether the collective holds a channel
 * at it is the same in both runs: at every used device in the full run, at
 * every block-0 device once its channels are moved onto their
 * representatives, and alike at each unused device. The rest is checked
 * after the build (uneven_ok). Sets canon for the channels' orbits. */
static int uneven_touch_ok(ss_symmetry *y, const int *res, int n)
{
    ss_build_sym *h = &y->hook;
    const ss_taskgraph *tg = h->tg;
    int nd = h->n_dev;
    if (y->pre_chan)
        return 0;
    if (++y->dgen == 0) {
        memset(y->dF, 0, (size_t)nd * sizeof *y->dF);
        memset(y->dR, 0, (size_t)nd * sizeof *y->dR);
        y->dgen = 1;
    }
    unsigned g = y->dgen;
    for (int i = 0; i < n; i++) {
        if (res[i] < nd)
            continue;
        int c = res[i] - nd, r = canon_of(h, tg, c);
        if (r < 0)
            return 0;
        for (int s = 0; s < 2; s++) {
            int a = tg->chan_dev[2 * c + s], b = tg->chan_dev[2 * r + s];
            if (a >= 0)
                y->dF[a] = g;
            if (b >= 0)
                y->dR[b] = g;
        }
    }
    for (int i = 0; i < nd; i++)
        if (h->blk[i] < 0 ? (y->dF[i] == g) != (y->dR[i] == g)
                          : y->dF[i] != g || (h->blk[i] == 0 && y->dR[i] != g))
            return 0;
    return 1;
}

static int ss_sym_hook_remap(ss_build_sym *h, int *res, int n)
{
    const ss_taskgraph *tg = h->tg;
    ss_symmetry *y = sym_of(h);
    int nd = h->n_dev;
    /* the channel set should be its own image under sigma */
    if (++h->gen == 0) {
        memset(h->mark, 0, (size_t)h->n_ch * sizeof(int));
        h->gen = 1;
    }
    int any = 0, kept = 1;
    for (int i = 0; i < n; i++)
        if (res[i] >= nd) {
            h->mark[res[i] - nd] = (int)h->gen;
            y->ccnt[res[i] - nd]++;
            any = 1;
        }
    y->nx += any;
    for (int i = 0; i < n && !h->bad; i++) {
        if (res[i] < nd)
            continue;
        int e = h->cmap[h->n_ch + res[i] - nd];
        if (e < 0) {
            snprintf(h->why, sizeof h->why,
                     "a gradient collective's links are not the same in every block");
            h->bad = 1;
        }
        kept &= e >= 0 && h->mark[e] == (int)h->gen;
    }
    if (!h->bad && !kept) {
        if (uneven_touch_ok(y, res, n)) {
            y->uneven = 1;
        } else {
            snprintf(h->why, sizeof h->why,
                     "a gradient collective's links are not the same in every block");
            h->bad = 1;
        }
    }
    if (h->bad)
        return n;
    for (int i = 0; i < n; i++)
        if (res[i] >= nd) {
            int r = canon_of(h, tg, res[i] - nd);
            if (r < 0) {
                h->bad = 1;
                snprintf(h->why, sizeof h->why, "a channel without an image");
                return n;
            }
            res[i] = nd + r;
        }
    /* sorted and without repeats: a channel's repeats dropped first (the
     * images of D blocks' channels fall on block 0's few), then the rest
     * sorted, by insertion when short */
    if (++h->gen == 0) {
        memset(h->mark, 0, (size_t)h->n_ch * sizeof(int));
        h->gen = 1;
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (res[i] >= nd) {
            if (h->mark[res[i] - nd] == (int)h->gen)
                continue;
            h->mark[res[i] - nd] = (int)h->gen;
        }
        res[m++] = res[i];
    }
    if (m > 32)
        qsort(res, (size_t)m, sizeof *res, cmp_int);
    else
        for (int i = 1; i < m; i++) {
            int x = res[i], j = i;
            for (; j > 0 && res[j - 1] > x; j--)
                res[j] = res[j - 1];
            res[j] = x;
        }
    int u = 0;
    for (int i = 0; i < m; i++)
        if (u == 0 || res[i] != res[u - 1])
            res[u++] = res[i];
    return u;
}

/* After the reduced build: no device of block 0 (or unused) is at an end of
 * another block's image of a channel the reduced graph uses. */
static int ends_ok(ss_symmetry *y, const ss_taskgraph *tg)
{
    ss_build_sym *h = &y->hook;
    if (++h->gen == 0) {
        memset(h->mark, 0, (size_t)h->n_ch * sizeof(int));
        h->gen = 1;
    }
    for (int t = 0; t < tg->n_tasks; t++)
        for (int k = tg->res_off[t]; k < tg->res_off[t + 1]; k++) {
            int c = tg->res[k] - tg->n_devices;
            if (c < 0 || h->mark[c] == (int)h->gen)
                continue;
            h->mark[c] = (int)h->gen;
            for (int j = 1; j < h->D; j++) {
                int e = h->cmap[j * h->n_ch + c];
                for (int s = 0; e >= 0 && s < 2; s++) {
                    int dev = tg->chan_dev[2 * e + s];
                    if (dev >= 0 && h->blk[dev] <= 0) {
                        snprintf(y->why, sizeof y->why,
                                 "device %d is at both ends of two blocks' links (channel %d)",
                                 dev, e);
                        return 0;
                    }
                }
            }
        }
    return 1;
}

/* After a reduced build with uneven collectives (uneven_touch_ok): the
 * tasks of pass 7 that hold channels are all collectives it moved, and one
 * channel is held by every one of them in the full run, so that they
 * exclude one another in both runs alike (their channels are held by
 * nothing else). 1 when so, or when there is no uneven collective. */
static int uneven_ok(ss_symmetry *y, const ss_taskgraph *tg)
{
    if (!y->uneven)
        return 1;
    int with = 0, common = 0;
    for (int t = y->n0; t < tg->n_tasks; t++)
        for (int k = tg->res_off[t]; k < tg->res_off[t + 1]; k++)
            if (tg->res[k] >= tg->n_devices) {
                with++;
                break;
            }
    for (int c = 0; c < y->n_ch && !common; c++)
        common = y->ccnt[c] == y->nx;
    if (with == y->nx && common && y->nx > 0)
        return 1;
    snprintf(y->why, sizeof y->why,
             "a gradient collective's links are not the same in every block, and the "
             "collectives do not all share a link");
    return 0;
}

/* ---- the run ------------------------------------------------------------------- */

/* D blocks of plan p of graph g (y->sig, y->blk), or 0 (why); -1 out of
 * memory. */
static int detect(ss_symmetry *y, const ss_graph *g, const ss_plan *p)
{
    ss_plan_view *v = y->v;
    int ns = v->no_sample, bd = ss_plan_view_bad_device(v, p);
    if (ns >= 0 && (bd < 0 || ns <= bd)) {
        snprintf(y->why, sizeof y->why, "operator \"%s\" has no sample dimension",
                 ss_graph_op(g, ns)->name);
        return 0;
    }
    if (bd >= 0) {
        snprintf(y->why, sizeof y->why, "operator \"%s\" has a device out of range",
                 ss_graph_op(g, bd)->name);
        return 0;
    }
    int64_t G = v->sample_gcd;
    if (G < 2) {
        snprintf(y->why, sizeof y->why, "some operator is not split along the batch");
        return 0;
    }
    char first[sizeof y->why] = "";
    for (int64_t D = G; D >= 2; D--) {
        if (G % D)
            continue;
        int r = find_blocks(y, g, p, (int)D, y->sig, y->blk);
        if (r < 0)
            return -1;
        int mo = r ? machine_ok(y, (int)D) : 0;
        if (mo < 0)
            return -1;
        if (mo)
            return (int)D;
        if (r)
            snprintf(y->why, sizeof y->why, "%s", y->m_why);
        if (!first[0])
            snprintf(first, sizeof first, "%s", y->why);
    }
    snprintf(y->why, sizeof y->why, "%s", first); /* the largest block count's reason */
    return 0;
}

/* sigma^k on devices and channels (y->sig, y->ch1) into y->dmap, y->cmap
 * and the builder's hook for D blocks of y->blk, unchecked. -1: out of
 * memory. */
static int set_hook(ss_symmetry *y, int D)
{
    int nd = y->n_dev, nc = y->n_ch;
    ss_build_sym *h = &y->hook;
    /* the maps of the last call hold while sigma and its channel map do */
    if (y->hk_D != D || y->hk_version != y->m_version || y->m_ok != 1 ||
        memcmp(y->msig, y->sig, (size_t)nd * sizeof(int))) {
        y->hk_D = 0;
        if (ss_grow((void **)&y->dmap, &y->cap_dmap, D * nd, sizeof(int)) ||
            ss_grow((void **)&y->cmap, &y->cap_cmap, D * (nc > 0 ? nc : 1), sizeof(int)))
            return -1;
        for (int i = 0; i < nd; i++)
            y->dmap[i] = i;
        for (int c = 0; c < nc; c++)
            y->cmap[c] = c;
        for (int k = 1; k < D; k++) {
            for (int i = 0; i < nd; i++)
                y->dmap[k * nd + i] = y->sig[y->dmap[(k - 1) * nd + i]];
            for (int c = 0; c < nc; c++) {
                int e = y->cmap[(k - 1) * nc + c];
                y->cmap[k * nc + c] = e < 0 ? -1 : y->ch1[e];
            }
        }
        y->hk_D = D;
        y->hk_version = y->m_version;
    }
    h->D = D;
    h->n_dev = nd;
    h->n_ch = nc;
    h->dmap = y->dmap;
    h->cmap = y->cmap;
    h->blk = y->blk;
    h->canon = y->canon;
    h->mark = y->mark;
    h->bad = 0;
    h->why[0] = 0;
    h->prepare = ss_sym_hook_prepare;
    h->remap = ss_sym_hook_remap;
    return 0;
}

/* Detection and the reduced graph and plan of p, without simulating: D
 * (> 0) when p passed every check made before the build, 0 when it is not
 * symmetric (why in y->why), -1 on error (d set). */
static int prepare(ss_symmetry *y, ss_plan_view *v, const ss_plan *p, ss_diag *d)
{
    y->ok_D = 0;
    y->sD = 0;
    y->why[0] = 0;
    y->used_only = 0;
    if (ss_plan_n_ops(p) != ss_graph_n_ops(y->g)) {
        snprintf(y->why, sizeof y->why, "the plan is for another model");
        return 0;
    }
    if (!v && ss_plan_view_set(y->own, p, d))
        return -1;
    y->v = v ? v : y->own;
    int D = detect(y, y->g, p);
    if (D < 0) {
        ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory");
        return -1;
    }
    if (D == 0 || !reduced_graph(y, D))
        return 0;
    if (reduced_plan(y, p, y->rp, D, d)) {
        if (d && d->status == SS_OK)
            ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory");
        return -1;
    }
    return regions_ok(y, y->g, y->rg, p, y->rp, D) ? D : 0;
}

int ss_sym_accepts(ss_symmetry *y, ss_plan_view *v, const ss_plan *p, ss_diag *d)
{
    int D = prepare(y, v, p, d);
    return D < 0 ? -1 : D > 0;
}

ss_status ss_sym_run(ss_symmetry *y, ss_plan_view *v, const ss_plan *p, double cutoff_us,
                     ss_sim_result *r, double *load_us, int *used, ss_diag *d)
{
    *used = 0;
    *load_us = 0;
    int D = prepare(y, v, p, d);
    if (D < 0)
        return d ? d->status : SS_ERR_NOMEM;
    if (D == 0)
        return SS_OK;
    if (set_hook(y, D))
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory");
    int nd = y->n_dev;
    ss_build_sym *h = &y->hook;
    double load = 0;
    ss_status st = ss_sim_run_within(y->rs, y->rp, cutoff_us, &y->rr, &load, d);
    if (st != SS_OK)
        return st;
    if (h->bad) {
        snprintf(y->why, sizeof y->why, "%s", h->why);
        return SS_OK;
    }
    const ss_taskgraph *tg = ss_sim_taskgraph(y->rs);
    if (!ends_ok(y, tg) || !uneven_ok(y, tg))
        return SS_OK;
    /* exact: from here on the result is the full simulation's */
    *used = 1;
    *load_us = load;
    y->tasks = tg->n_tasks;
    y->classes = 0;
    for (int i = 0; i < nd; i++)
        y->classes += y->blk[i] <= 0;
    if (cutoff_us < HUGE_VAL && load > cutoff_us)
        return SS_OK; /* cut: no result, as ss_sim_run_within */
    int64_t fixed = 0; /* tasks that span every block: gradient collectives (not the
                        * tensor-parallel all-reduces of split gradients, op -1: one
                        * per block), the bulk barrier */
    for (int t = 0; t < tg->n_tasks; t++)
        fixed += (tg->kind[t] == SS_TASK_COLLECTIVE && tg->aux[t] == SS_BUILD_COLL_GRAD &&
                  tg->op[t] >= 0) ||
                 (tg->kind[t] == SS_TASK_OTHER && tg->op[t] < 0);
    if ((st = ss_sim_result_copy(r, &y->rr, d)) != SS_OK)
        return st;
    r->batch = ss_graph_batch(y->g);
    r->throughput = r->iteration_us > 0 ? (double)r->batch / (r->iteration_us * 1e-6) : 0;
    r->n_tasks = (tg->n_tasks - fixed) * D + fixed;
    for (int i = 0; i < nd; i++) {
        if (y->blk[i] <= 0)
            continue;
        int src = y->dmap[(D - y->blk[i]) * nd + i]; /* sigma^-blk(i), in block 0 */
        r->compute_us[i] = r->compute_us[src];
        r->comm_us[i] = r->comm_us[src];
        r->exposed_comm_us[i] = r->exposed_comm_us[src];
        r->idle_us[i] = r->idle_us[src];
        r->peak_memory_bytes[i] = r->peak_memory_bytes[src];
        r->static_memory_bytes[i] = r->static_memory_bytes[src];
        r->weight_bytes[i] = r->weight_bytes[src];
    }
    r->fits = 1;
    r->overflow_device = -1;
    r->overflow_bytes = 0;
    for (int i = 0; i < nd; i++)
        if (r->fits && r->peak_memory_bytes[i] > r->capacity_bytes[i]) {
            r->fits = 0;
            r->overflow_device = i;
            r->overflow_bytes = r->peak_memory_bytes[i] - r->capacity_bytes[i];
        }
    y->ok_D = D;
    return SS_OK;
}

/* ---- sub-problems (hier.c) ----------------------------------------------------- */

/* Hash of sigma (y->sig) and D: the blocks of a sub-problem. */
static uint64_t sig_hash(const ss_symmetry *y, int D)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)D;
    for (int i = 0; i < y->n_dev; i++)
        h = (h ^ (uint64_t)(uint32_t)y->sig[i]) * 0x100000001b3ULL;
    return h | 1;
}

/* Everything regions_ok reads of sub-problem (sg, sp) with D blocks: the
 * ops' signatures (types, attributes, operand shapes and dim kinds), their
 * sample dims and the configs' splits, not their devices (the check reads
 * tile regions only; the reduced graph and plan follow from these). The
 * settings of sp, which sub-problems of one plan structure differ in, are
 * not read: a check that passed is not repeated for them. */
static uint64_t regions_key(const ss_symmetry *y, const ss_graph *sg, const ss_plan *sp, int D)
{
    uint64_t h = ss_hash_mix(0x5E610A5ULL, (uint64_t)D);
    h = ss_hash_mix(h, (uint64_t)ss_plan_n_ops(sp));
    for (int o = 0; o < ss_plan_n_ops(sp); o++) {
        const ss_pconfig *c = ss_plan_config(sp, o);
        h = ss_hash_mix(h, ss_op_signature(sg, o));
        h = ss_hash_mix(h, (uint64_t)(uint32_t)op_sample_dim(y, o));
        h = ss_hash_mix(h, (uint64_t)c->ndim);
        for (int k = 0; k < c->ndim; k++)
            h = ss_hash_mix(h, (uint64_t)c->deg[k]);
        h = ss_hash_mix(ss_hash_mix(h, (uint64_t)c->red), (uint64_t)c->rep);
        h = ss_hash_mix(h, (uint64_t)c->ntiles);
    }
    return ss_hash_final(h) | 1;
}

int ss_sym_reduce(ss_symmetry *y, const ss_graph *sg, const ss_plan *sp, const ss_graph **rg,
                  const ss_plan **rp, ss_build_sym **hook, ss_diag *d)
{
    y->ok_D = 0;
    y->sD = 0;
    y->why[0] = 0;
    ss_graph_free(y->srg);
    ss_plan_free(y->srp);
    y->srg = NULL;
    y->srp = NULL;
    y->used_only = 1;
    ss_plan_view_free(y->subv);
    y->subv = ss_plan_view_new(sg, y->m);
    if (!y->subv || ss_plan_view_set(y->subv, sp, d))
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory"), -1;
    y->v = y->subv;
    int D = detect(y, sg, sp);
    if (D < 0)
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory"), -1;
    if (D == 0)
        return 0;
    /* blocks whose sub-problem failed the build's checks are not tried
     * again: the next sub-problems with them (a stage's, for other block
     * counts or sync modes) would fail alike, the cause being the machine's
     * or a collective's shape, and a failed try costs a build */
    y->sig_key = sig_hash(y, D);
    for (int i = 0; i < NLOST; i++)
        if (y->lost[i] == y->sig_key) {
            snprintf(y->why, sizeof y->why,
                     "a sub-problem with these %d blocks failed the build's checks", D);
            return 0;
        }
    char why[160];
    if (!(y->srg = rebuild(sg, D, why, sizeof why))) {
        snprintf(y->why, sizeof y->why, "%s", why);
        return 0;
    }
    if (!(y->srp = ss_plan_new(y->srg, y->m)))
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory"), -1;
    if (reduced_plan(y, sp, y->srp, D, d))
        return -1;
    uint64_t rk = regions_key(y, sg, sp, D);
    int seen = 0;
    for (int i = 0; i < NRGOK && !seen; i++)
        seen = y->rgok[i] == rk;
    if (!seen && !regions_ok(y, sg, y->srg, sp, y->srp, D))
        return 0;
    if (!seen)
        y->rgok[y->n_rgok++ % NRGOK] = rk;
    if (set_hook(y, D))
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory"), -1;
    y->sD = D;
    *rg = y->srg;
    *rp = y->srp;
    *hook = &y->hook;
    return 1;
}

int ss_sym_verify(ss_symmetry *y, const ss_taskgraph *tg)
{
    int ok = !y->hook.bad;
    if (!ok)
        snprintf(y->why, sizeof y->why, "%s", y->hook.why);
    ok = ok && ends_ok(y, tg) && uneven_ok(y, tg);
    if (!ok && y->sD)
        y->lost[y->n_lost++ % NLOST] = y->sig_key;
    return ok;
}

int ss_sym_image0(const ss_symmetry *y, int dev)
{
    int k = y->sD && dev >= 0 && dev < y->n_dev ? y->blk[dev] : -1;
    return k > 0 ? y->dmap[(y->sD - k) * y->n_dev + dev] : dev;
}
