/*
 * level2.c — the planner's level 2 (search/level2.h): meshes, sharding ILP
 * per distinct block, pipeline DP, plan.
 *
 * Invariant: the plan returned is built from one configuration (pp, mesh,
 * micro-batches, the ILPs' recompute; the DP's cut and mode per stage) whose
 * DP estimate is the least found, every op on the devices of its stage, and
 * passes ss_plan_validate; its per-stage memory estimate, under the stage's
 * mode, fits the limit. With several threads, each prices its share of the
 * configurations in a ctx of its own; what they share (the finalists, the
 * halt flag) is under the pool's lock, and the cost model under cost_lock.
 */
#include "search/level2.h"
#include "core/hash.h"
#include "core/segments.h"
#include "search/ilp.h"
#include "search/mesh.h"
#include "search/stages.h"
#include "simulator/collective.h"
#include "simulator/memory.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MAX_MESHES 64
#define MAX_CANDS 512
#define MB_CANDS 5
#define MAX_FINALISTS 16
/* Branch-and-bound nodes per ILP: the deterministic bound (the time limit
 * is the safety net). */
#define ILP_MAX_NODES 500
#define MEGATRON_BUCKET_BYTES 80e6
#define STATE_PARTIAL (-1)
#define STATE_WHOLE (-2)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------ structure */

/* Layers and ILP units of the graph (independent of the configuration). */
typedef struct layout {
    int n_ops, n_layers, n_units;
    int copies;  /* layers that are copies of the block (0: no block) */
    int *layer;  /* DP layer of each op */
    int *alias;  /* representative op (itself unless a copy of the block's) */
    int *unit;   /* ILP unit of a representative op; -1 for aliased copies */
    int *last;   /* per layer: its last non-input op (whose output leaves it) */
} layout;

static void layout_free(layout *L)
{
    ss_free(L->layer);
    ss_free(L->alias);
    ss_free(L->unit);
    ss_free(L->last);
}

/* Segments end where at most one activation is live (as core/plan_gen.c
 * cuts stages); the block is the longest run of >= 2 repeats of k <= 8
 * equal segments (signature sequence). Prefix and suffix segments are
 * layers of their own; each block copy is one layer. Units: 0 = block copy
 * 0, 1 = prefix, 2 = suffix (no block: each segment is a unit). */
static ss_status layout_build(const ss_graph *g, layout *L, ss_diag *d)
{
    int n = ss_graph_n_ops(g);
    size_t nn = (size_t)n + 1;
    memset(L, 0, sizeof *L);
    L->n_ops = n;
    L->layer = ss_calloc(nn, sizeof(int));
    L->alias = ss_calloc(nn, sizeof(int));
    L->unit = ss_calloc(nn, sizeof(int));
    L->last = ss_calloc(nn, sizeof(int));
    int *seglayer = ss_calloc(nn, sizeof(int)), *segunit = ss_calloc(nn, sizeof(int));
    ss_segments sg;
    ss_status st = ss_segments_find(g, &sg, d);
    if (!st && (!L->layer || !L->alias || !L->unit || !L->last || !seglayer || !segunit))
        st = ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    if (st)
        goto out;
    for (int i = 0; i < n; i++)
        L->alias[i] = i;
    int m = sg.m, nseg = sg.n, *ord = sg.ord, *pos = sg.pos, *segend = sg.end;
    if (m == 0) {
        st = ss_diag_set(d, SS_ERR_INVALID, "level 2: model \"%s\" has no operator to plan",
                         ss_graph_name(g));
        goto out;
    }
    int bs = sg.s0, bk = sg.k, br = sg.reps, best_cov = br * bk;
    int nl = 0;
    for (int j = 0; j < nseg; j++) {
        if (best_cov && j >= bs && j < bs + br * bk) {
            int copy = (j - bs) / bk;
            seglayer[j] = nl + copy;
            segunit[j] = copy == 0 ? 0 : -1;
            if (j == bs + br * bk - 1)
                nl += br;
        } else {
            seglayer[j] = nl++;
            segunit[j] = best_cov ? (j < bs ? 1 : 2) : j;
        }
    }
    L->n_layers = nl;
    L->copies = best_cov ? br : 0;
    L->n_units = best_cov ? 3 : nseg;
    int block_lo = best_cov ? (bs ? segend[bs - 1] + 1 : 0) : 0;
    int copy_len = best_cov ? segend[bs + bk - 1] + 1 - block_lo : 0;
    for (int j = 0, s = 0; j < m; j++) {
        while (segend[s] < j)
            s++;
        int op = ord[j];
        L->layer[op] = seglayer[s];
        L->unit[op] = segunit[s];
        L->last[seglayer[s]] = op;
        if (segunit[s] < 0) /* a later copy: same position in copy 0 */
            L->alias[op] = ord[block_lo + (j - block_lo) % copy_len];
    }
    for (int i = 0; i < n; i++) { /* graph inputs: their first consumer's layer and unit */
        if (pos[i] >= 0)
            continue;
        const ss_op *op = ss_graph_op(g, i);
        int first = -1;
        for (int o = 0; o < op->n_out; o++)
            for (int c = 0; c < ss_graph_n_consumers(g, op->outputs[o]); c++) {
                int q = pos[ss_graph_consumer(g, op->outputs[o], c)];
                if (q >= 0 && (first < 0 || q < first))
                    first = q;
            }
        int f = first >= 0 ? ord[first] : ord[0];
        L->layer[i] = L->layer[f];
        L->unit[i] = L->unit[L->alias[f]];
    }
out:
    ss_segments_free(&sg);
    ss_free(seglayer);
    ss_free(segunit);
    if (st)
        layout_free(L);
    return st;
}

/* ----------------------------------------------------------- candidates */

typedef struct cand {
    ss_sharding s;
    int mbe;                                      /* micro-batch tiles per device */
    double cost;                                  /* compute + gradient sync, per iteration,
                                                     under the configuration's recompute */
    double stat, act;                             /* static bytes; activations per micro-batch
                                                     (under the configuration's recompute) */
    double again_us[3];                           /* per ss_recompute mode: its forward again in
                                                     the backward, per iteration (0: kept) */
    double saved;                                 /* activations per micro-batch, none recomputed */
    int score;                                    /* an attention-score op (selective recomputes it) */
    double out_bytes[SS_MAX_OUTPUTS];             /* per device, one tile */
    signed char out_state[SS_MAX_OUTPUTS][SS_DMESH_MAX_AXES];
    signed char in_need[SS_MAX_INPUTS][SS_DMESH_MAX_AXES];
} cand;

typedef struct collent {
    uint64_t key;
    double us;
    int used;
} collent;

#define COLL_CACHE 8192

typedef struct ctx {
    const ss_graph *g;
    const ss_machine *m;        /* for routes and collectives (a thread's copy, or m0) */
    const ss_machine *m0;       /* the caller's: the plans' machine (read-only use) */
    ss_costmodel *cm;
    const layout *L;
    int devtype;
    double cap;                 /* usable bytes per device */
    double mb_overhead_us;      /* the device type's work per micro-batch (stage_us) */
    /* configuration */
    ss_dmesh mesh;
    int pp, mb;
    ss_recompute rc;
    cand **cands;               /* per op (representatives only) */
    int *n_cands;
    int *choice;                /* per op: chosen candidate (representatives), -1 unset */
    collent *coll;
    ss_coll_result cres;
    int *devs;                  /* scratch, mesh.n entries */
    ss_diag *d;
} ctx;

/* The caller's cost model caches: one thread at a time asks it. */
static pthread_mutex_t cost_lock = PTHREAD_MUTEX_INITIALIZER;

static int is_score(const ss_graph *g, const ss_op *op)
{
    if (op->n_out < 1)
        return 0;
    const ss_tensor *o = ss_graph_tensor(g, op->outputs[0]);
    for (int a = 0; a < o->ndim; a++)
        for (int b = a + 1; b < o->ndim; b++)
            if (o->kind[a] == SS_DIM_ATTRIBUTE && o->kind[b] == SS_DIM_ATTRIBUTE &&
                o->shape[a] == o->shape[b])
                return 1;
    return 0;
}

/* Time of a collective over axis mask `axes` of the mesh (base 0), cached. */
static double coll_us(ctx *C, ss_coll_kind kind, unsigned axes, double bytes)
{
    if (bytes <= 0 || axes == 0)
        return 0;
    uint64_t key = ss_hash_final(ss_hash_mix_f64(ss_hash_mix(ss_hash_mix(1, kind), axes), bytes));
    unsigned slot = (unsigned)(key % COLL_CACHE);
    for (int probe = 0; probe < 16; probe++) {
        collent *e = &C->coll[(slot + (unsigned)probe) % COLL_CACHE];
        if (e->used && e->key == key)
            return e->us;
        if (!e->used)
            break;
    }
    int n = ss_dmesh_group(&C->mesh, 0, axes, C->devs);
    double us = 0;
    if (n > 1) {
        ss_diag dd;
        ss_diag_init(&dd);
        if (ss_coll_cost(C->m, kind, C->devs, n, bytes, NULL, &C->cres, &dd) == SS_OK)
            us = C->cres.time_us;
        else
            us = 1e12; /* unreachable group: never chosen (finite for CBC) */
    }
    for (int probe = 0; probe < 16; probe++) {
        collent *e = &C->coll[(slot + (unsigned)probe) % COLL_CACHE];
        if (!e->used || probe == 15) {
            e->used = 1;
            e->key = key;
            e->us = us;
            break;
        }
    }
    return us;
}

/* The dim in which regions a and b differ, or -1. */
static int diff_dim(const ss_region *a, const ss_region *b)
{
    for (int k = 0; k < a->ndim; k++)
        if (a->r[k].lo != b->r[k].lo || a->r[k].hi != b->r[k].hi)
            return k;
    return -1;
}

static ss_status fill_cand(ctx *C, const ss_op *op, cand *c)
{
    const ss_graph *g = C->g;
    const ss_dmesh *M = &C->mesh;
    int zero[SS_DMESH_MAX_AXES] = {0};
    ss_tile t0;
    ss_sharding_tile(g, op, M, &c->s, C->mb, zero, &t0);
    c->mbe = ss_sharding_mb(g, op, M, &c->s, C->mb);
    c->cost = c->stat = c->act = 0;
    if (op->type != SS_OP_INPUT) {
        ss_cost k;
        pthread_mutex_lock(&cost_lock);
        ss_status st = ss_cost_tile(C->cm, g, op, &t0, C->devtype, &k);
        pthread_mutex_unlock(&cost_lock);
        if (st)
            return ss_diag_set(C->d, st, "level 2: no cost for a tile of \"%s\"", op->name);
        int score = c->score = is_score(g, op);
        c->again_us[SS_RECOMPUTE_FULL] = k.fwd_us * c->mbe;
        c->again_us[SS_RECOMPUTE_SELECTIVE] = score ? k.fwd_us * c->mbe : 0;
        c->saved = k.work.saved_bytes;
        int again = C->rc == SS_RECOMPUTE_FULL || (C->rc == SS_RECOMPUTE_SELECTIVE && score);
        c->cost = (k.fwd_us + k.bwd_us + (again ? k.fwd_us : 0)) * c->mbe;
        c->act = C->rc == SS_RECOMPUTE_FULL || again ? 0 : k.work.saved_bytes;
    }
    for (int o = 0; o < op->n_out; o++) {
        ss_region r0;
        ss_op_output_region(g, op, &t0, o, &r0);
        const ss_tensor *tt = ss_graph_tensor(g, op->outputs[o]);
        c->out_bytes[o] = (double)ss_region_volume(&r0) * (double)ss_dtype_size(tt->dtype);
    }
    for (int a = 0; a < M->n_axes; a++) {
        int coord[SS_DMESH_MAX_AXES] = {0};
        coord[a] = 1;
        ss_tile t1;
        ss_sharding_tile(g, op, M, &c->s, C->mb, coord, &t1);
        for (int o = 0; o < op->n_out; o++) {
            ss_region r0, r1;
            ss_op_output_region(g, op, &t0, o, &r0);
            ss_op_output_region(g, op, &t1, o, &r1);
            int k = diff_dim(&r0, &r1);
            c->out_state[o][a] = (signed char)(c->s.axis[a] == SS_AXIS_RED ? STATE_PARTIAL
                                               : k >= 0                    ? k
                                                                           : STATE_WHOLE);
        }
        for (int i = 0; i < op->n_in; i++) {
            ss_region r0, r1;
            ss_op_input_region(g, op, &t0, i, &r0);
            ss_op_input_region(g, op, &t1, i, &r1);
            int k = diff_dim(&r0, &r1);
            c->in_need[i][a] = (signed char)(k >= 0 ? k : STATE_WHOLE);
        }
    }
    /* weights: static memory (distributed optimizer over the gradient
     * group) and the gradient sync over the axes the shard is constant on */
    double wb, gb, ob;
    for (int j = 0; j < op->n_w; j++) {
        const ss_tensor *w = ss_graph_tensor(g, op->weights[j]);
        ss_region r0;
        ss_op_input_region(g, op, &t0, op->n_in + j, &r0);
        double params = (double)ss_region_volume(&r0);
        unsigned axes = 0;
        int group = 1;
        for (int a = 0; a < M->n_axes; a++) {
            int coord[SS_DMESH_MAX_AXES] = {0};
            coord[a] = 1;
            ss_tile t1;
            ss_region r1;
            ss_sharding_tile(g, op, M, &c->s, C->mb, coord, &t1);
            ss_op_input_region(g, op, &t1, op->n_in + j, &r1);
            if (diff_dim(&r0, &r1) < 0) {
                axes |= 1u << a;
                group *= M->size[a];
            }
        }
        ss_memory_param_bytes(w->dtype, ss_graph_optimizer(g), ss_graph_precision(g), &wb, &gb,
                              &ob);
        c->stat += params * (wb + gb + ob / group);
        /* the distributed optimizer's sync (settings.distopt): reduce-scatter
         * of the gradients, all-gather of the updated parameters */
        c->cost += coll_us(C, SS_COLL_REDUCE_SCATTER, axes, params * gb) +
                   coll_us(C, SS_COLL_ALLGATHER, axes, params * wb);
    }
    return SS_OK;
}

/* Candidates of representative op i for the current configuration. */
static ss_status op_cands(ctx *C, int i)
{
    if (C->cands[i])
        return SS_OK;
    const ss_op *op = ss_graph_op(C->g, i);
    ss_sharding sh[MAX_CANDS];
    int n = ss_sharding_enumerate(C->g, op, &C->mesh, C->mb, sh, MAX_CANDS);
    if (n > MAX_CANDS)
        n = MAX_CANDS;
    if (n < 1)
        return ss_diag_set(C->d, SS_ERR_INVALID, "level 2: operator \"%s\" has no sharding",
                           op->name);
    C->cands[i] = ss_calloc((size_t)n, sizeof(cand));
    if (!C->cands[i])
        return ss_diag_set(C->d, SS_ERR_NOMEM, "out of memory");
    C->n_cands[i] = n;
    for (int k = 0; k < n; k++) {
        C->cands[i][k].s = sh[k];
        ss_status st = fill_cand(C, op, &C->cands[i][k]);
        if (st)
            return st;
    }
    return SS_OK;
}

/* Resharding per iteration from producer candidate A (output o) to consumer
 * candidate B (input operand i), forward and backward, axis by axis. */
static double edge_us(ctx *C, const cand *A, int o, const cand *B, int i)
{
    double S = A->out_bytes[o], us = 0;
    for (int a = 0; a < C->mesh.n_axes; a++) {
        int P = A->out_state[o][a], N = B->in_need[i][a], sz = C->mesh.size[a];
        int gpart = N == STATE_WHOLE && B->s.axis[a] != SS_AXIS_REP;
        unsigned ax = 1u << a;
        if (P >= 0 && N >= 0 && P != N) {
            us += 2 * coll_us(C, SS_COLL_ALLTOALL, ax, S);
        } else if (P >= 0 && N == STATE_WHOLE) {
            us += coll_us(C, SS_COLL_ALLGATHER, ax, S * sz);
            if (gpart)
                us += coll_us(C, SS_COLL_REDUCE_SCATTER, ax, S * sz);
        } else if (P == STATE_PARTIAL && N == STATE_WHOLE) {
            us += coll_us(C, SS_COLL_ALLREDUCE, ax, S);
            if (gpart)
                us += coll_us(C, SS_COLL_ALLREDUCE, ax, S);
        } else if (P == STATE_PARTIAL && N >= 0) {
            us += coll_us(C, SS_COLL_REDUCE_SCATTER, ax, S);
            us += coll_us(C, SS_COLL_ALLGATHER, ax, S);
        } else if (P == STATE_WHOLE && N >= 0) {
            us += coll_us(C, SS_COLL_ALLGATHER, ax, S);
        } else if (P == STATE_WHOLE && gpart) {
            us += coll_us(C, SS_COLL_ALLREDUCE, ax, S);
        }
    }
    return us * A->mbe;
}

/* Output index of tensor t in op u. */
static int out_index(const ss_op *u, int t)
{
    for (int o = 0; o < u->n_out; o++)
        if (u->outputs[o] == t)
            return o;
    return 0;
}

/* ------------------------------------------------------------ ILP units */

typedef struct edge {
    int u, o, v, i; /* representative producer u (output o) -> representative v (operand i) */
} edge;

static ss_status solve_unit(ctx *C, int unit, double budget, double ilp_limit,
                            ss_level2_report *rep)
{
    const layout *L = C->L;
    const ss_graph *g = C->g;
    int n = L->n_ops, nn = 0, ne = 0, cap_e = 0;
    int *node = ss_calloc((size_t)n + 1, sizeof(int)), *idx = ss_calloc((size_t)n + 1, sizeof(int));
    edge *E = NULL;
    ss_status st = SS_OK;
    int *nch = NULL, *eu = NULL, *ev = NULL, *pick = NULL;
    double **nc = NULL, **nm = NULL, **ec = NULL;
    if (!node || !idx) {
        st = ss_diag_set(C->d, SS_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        idx[i] = -1;
        if (L->alias[i] == i && L->unit[i] == unit) {
            if ((st = op_cands(C, i)))
                goto out;
            idx[i] = nn;
            node[nn++] = i;
        }
    }
    if (nn == 0)
        goto out;
    nch = ss_calloc((size_t)nn, sizeof(int));
    pick = ss_calloc((size_t)nn, sizeof(int));
    nc = ss_calloc((size_t)nn, sizeof(double *));
    nm = ss_calloc((size_t)nn, sizeof(double *));
    if (!nch || !pick || !nc || !nm) {
        st = ss_diag_set(C->d, SS_ERR_NOMEM, "out of memory");
        goto out;
    }
    int inflight = C->mb < C->pp ? C->mb : C->pp;
    for (int k = 0; k < nn; k++) {
        int i = node[k];
        nch[k] = C->n_cands[i];
        nc[k] = ss_calloc((size_t)nch[k], sizeof(double));
        nm[k] = ss_calloc((size_t)nch[k], sizeof(double));
        if (!nc[k] || !nm[k]) {
            st = ss_diag_set(C->d, SS_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int s = 0; s < nch[k]; s++) {
            nc[k][s] = C->cands[i][s].cost;
            nm[k][s] = C->cands[i][s].stat + inflight * C->cands[i][s].act;
        }
    }
    /* Edges: every activation read by an op of the unit or of one of its
     * copies, producer and consumer mapped to representatives. */
    for (int vv = 0; vv < n; vv++) {
        int v = L->alias[vv];
        const ss_op *vop = ss_graph_op(g, vv);
        for (int i = 0; i < vop->n_in; i++) {
            int t = vop->inputs[i], uu = ss_graph_tensor(g, t)->producer;
            if (uu < 0)
                continue;
            int u = L->alias[uu], o = out_index(ss_graph_op(g, uu), t);
            int in_u = idx[u] >= 0, in_v = idx[v] >= 0;
            if (!in_u && !in_v)
                continue;
            if (in_u && in_v && u == v)
                continue;
            if (in_u && in_v) {
                /* one ILP edge per distinct (u, o, v, i) */
                int dup = 0;
                for (int e = 0; e < ne && !dup; e++)
                    dup = E[e].u == u && E[e].o == o && E[e].v == v && E[e].i == i;
                if (dup)
                    continue;
                if (ss_grow((void **)&E, &cap_e, ne + 1, sizeof *E)) {
                    st = ss_diag_set(C->d, SS_ERR_NOMEM, "out of memory");
                    goto out;
                }
                E[ne++] = (edge){u, o, v, i};
                continue;
            }
            /* one end fixed by an earlier unit: fold into the other's costs;
             * an end not solved yet is priced when its unit is */
            if (in_v && C->choice[u] >= 0) {
                const cand *A = &C->cands[u][C->choice[u]];
                for (int s = 0; s < nch[idx[v]]; s++)
                    nc[idx[v]][s] += edge_us(C, A, o, &C->cands[v][s], i);
            } else if (in_u && C->choice[v] >= 0) {
                const cand *B = &C->cands[v][C->choice[v]];
                for (int s = 0; s < nch[idx[u]]; s++)
                    nc[idx[u]][s] += edge_us(C, &C->cands[u][s], o, B, i);
            }
        }
    }
    eu = ss_calloc((size_t)ne + 1, sizeof(int));
    ev = ss_calloc((size_t)ne + 1, sizeof(int));
    ec = ss_calloc((size_t)ne + 1, sizeof(double *));
    if (!eu || !ev || !ec) {
        st = ss_diag_set(C->d, SS_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int e = 0; e < ne; e++) {
        int u = E[e].u, v = E[e].v, nu = C->n_cands[u], nv = C->n_cands[v];
        eu[e] = idx[u];
        ev[e] = idx[v];
        ec[e] = ss_calloc((size_t)nu * (size_t)nv, sizeof(double));
        if (!ec[e]) {
            st = ss_diag_set(C->d, SS_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int s = 0; s < nu; s++)
            for (int t = 0; t < nv; t++)
                ec[e][s * nv + t] = edge_us(C, &C->cands[u][s], E[e].o, &C->cands[v][t], E[e].i);
    }
    ss_ilp_problem P = {nn, nch, (const double *const *)nc,
                        budget < HUGE_VAL ? (const double *const *)nm : NULL, budget,
                        ne, eu, ev, (const double *const *)ec};
    ss_ilp_stats stats = {0};
    st = ss_ilp_solve_bounded(&P, ilp_limit, ILP_MAX_NODES, pick, NULL, &stats, C->d);
    rep->ilp_solves++;
    double solve_s = stats.solve_s - stats.wait_s; /* not the wait for another's solve */
    rep->ilp_s += solve_s;
    rep->ilp_cbc_s += stats.cbc_s;
    if (solve_s > rep->ilp_max_s)
        rep->ilp_max_s = solve_s;
    rep->ilp_time_limited += stats.time_limited;
    rep->ilp_node_limited += stats.node_limited;
    if (st)
        goto out;
    for (int k = 0; k < nn; k++)
        C->choice[node[k]] = pick[k];
out:
    for (int k = 0; nc && k < nn; k++)
        ss_free(nc[k]);
    for (int k = 0; nm && k < nn; k++)
        ss_free(nm[k]);
    for (int e = 0; ec && e < ne; e++)
        ss_free(ec[e]);
    ss_free(nc);
    ss_free(nm);
    ss_free(ec);
    ss_free(eu);
    ss_free(ev);
    ss_free(nch);
    ss_free(pick);
    ss_free(E);
    ss_free(node);
    ss_free(idx);
    return st;
}

/* ------------------------------------------------------- configurations */

typedef struct evalres {
    double est;
    int first[65 + 1];
    int mode[65];   /* per stage: its ss_recompute mode */
    int feasible;
} evalres;

static void reset_config(ctx *C)
{
    for (int i = 0; C->cands && i < C->L->n_ops; i++) {
        ss_free(C->cands[i]);
        C->cands[i] = NULL;
        C->n_cands[i] = 0;
        C->choice[i] = -1;
    }
    if (C->coll)
        memset(C->coll, 0, COLL_CACHE * sizeof *C->coll);
}

/* Candidate B's time per iteration under recompute mode rc (its cost
 * under the configuration's mode, the recomputed forward exchanged). */
static double cost_in(const ctx *C, const cand *B, ss_recompute rc)
{
    return rc == C->rc ? B->cost : B->cost - B->again_us[C->rc] + B->again_us[rc];
}

/* Per-layer figures of the current choices, into the DP problem arrays:
 * time and activations per recompute mode (t[rc], act[rc], indexed by
 * ss_recompute; the shardings are the ILPs' under the configuration's
 * mode), sends and static bytes. */
static void layer_figures(ctx *C, double *const t[3], double *snd, double *stat,
                          double *const act[3])
{
    const layout *L = C->L;
    const ss_graph *g = C->g;
    int nl = L->n_layers, n_s = C->mesh.n, N = ss_machine_n_devices(C->m);
    for (int l = 0; l < nl; l++) {
        snd[l] = stat[l] = 0;
        for (int rc = 0; rc < 3; rc++)
            t[rc][l] = act[rc][l] = 0;
    }
    for (int vv = 0; vv < L->n_ops; vv++) {
        int v = L->alias[vv], l = L->layer[vv];
        const cand *B = &C->cands[v][C->choice[v]];
        const ss_op *vop = ss_graph_op(g, vv);
        for (int rc = 0; rc < 3; rc++)
            t[rc][l] += cost_in(C, B, (ss_recompute)rc);
        stat[l] += B->stat;
        act[SS_RECOMPUTE_NONE][l] += B->saved;
        act[SS_RECOMPUTE_SELECTIVE][l] += B->score ? 0 : B->saved;
        for (int i = 0; i < vop->n_in; i++) {
            int tt = vop->inputs[i], uu = ss_graph_tensor(g, tt)->producer;
            if (uu < 0)
                continue;
            int u = L->alias[uu];
            int o = out_index(ss_graph_op(g, uu), tt);
            double e = edge_us(C, &C->cands[u][C->choice[u]], o, B, i);
            for (int rc = 0; rc < 3; rc++)
                t[rc][l] += e;
        }
    }
    double gbps = n_s < N ? ss_machine_path_gbps(C->m, 0, n_s) : 0;
    double lat = n_s < N ? ss_machine_path_latency_us(C->m, 0, n_s) : 0;
    for (int l = 0; l < nl; l++) {
        int last = L->alias[L->last[l]];
        const cand *A = &C->cands[last][C->choice[last]];
        for (int rc = 0; rc < 3; rc++)
            t[rc][l] /= C->mb;
        if (gbps > 0)
            snd[l] = 2 * ss_p2p_us(A->out_bytes[0], gbps, lat);
        /* full: the layer's input checkpoint of the next layer */
        act[SS_RECOMPUTE_FULL][l] = A->out_bytes[0];
    }
}

static ss_status eval_config(ctx *C, double best, evalres *R, ss_level2_report *rep,
                             double ilp_limit)
{
    const layout *L = C->L;
    int nl = L->n_layers;
    ss_status st = SS_OK;
    R->feasible = 0;
    reset_config(C);
    /* compute lower bound before any ILP (without recomputation: the DP
     * may run any stage without it) */
    double lb = 0;
    for (int i = 0; i < L->n_ops; i++) {
        int r = L->alias[i];
        if ((st = op_cands(C, r)))
            return st;
        double mn = HUGE_VAL;
        for (int k = 0; k < C->n_cands[r]; k++) {
            double c = cost_in(C, &C->cands[r][k], SS_RECOMPUTE_NONE);
            if (c < mn)
                mn = c;
        }
        lb += mn;
    }
    lb /= C->mb;
    lb += C->mb_overhead_us;
    /* the DP's T = sum_s t_s + (M - 1) max_s t_s >= lb + (M - 1) lb / S (t_s
     * sums to at least lb; every choice and mode costs at least the least
     * candidate without recomputation; edges cost >= 0): skipped only when
     * strictly over the bar (by more than the sums' rounding), a
     * configuration could not have been a finalist (ties of estimate go to
     * the lower configuration index) */
    if (lb + (C->mb - 1) * lb / C->pp > best * (1 + 1e-9)) {
        rep->skipped++;
        return SS_OK;
    }
    rep->configs++;
    double *buf = ss_calloc((size_t)nl * 8, sizeof(double));
    if (!buf)
        return ss_diag_set(C->d, SS_ERR_NOMEM, "out of memory");
    double *t[3] = {buf, buf + nl, buf + 2 * nl}, *act[3] = {buf + 3 * nl, buf + 4 * nl,
                                                             buf + 5 * nl};
    double *snd = buf + 6 * nl, *stat = buf + 7 * nl;
    int per_stage = L->copies ? (L->copies + C->pp - 1) / C->pp : 1;
    double shrink = 1;
    for (int attempt = 0; attempt < 3; attempt++, shrink *= 0.7) {
        for (int i = 0; i < L->n_ops; i++)
            C->choice[i] = -1;
        ss_diag dd;
        ss_diag_init(&dd);
        ss_diag *keep = C->d;
        C->d = &dd;
        st = SS_OK;
        for (int u = 0; u < L->n_units && !st; u++) {
            double budget = L->copies && u == 0 ? 0.9 * C->cap * shrink / per_stage : HUGE_VAL;
            st = solve_unit(C, u, budget, ilp_limit, rep);
        }
        C->d = keep;
        if (st == SS_ERR_INFEASIBLE) {
            st = SS_OK;
            break; /* a tighter budget cannot help */
        }
        if (st) {
            ss_diag_set(C->d, st, "%s", dd.msg);
            break;
        }
        layer_figures(C, t, snd, stat, act);
        /* the DP picks each stage's recompute mode (modes = ss_recompute) */
        ss_stage_problem P = {.n_layers = nl, .n_modes = 3,
                              .time_us = {t[0], t[1], t[2]}, .act_bytes = {act[0], act[1], act[2]},
                              .send_us = snd, .static_bytes = stat,
                              .stage_us = C->mb_overhead_us, .stages = C->pp,
                              .microbatches = C->mb, .mem_limit = C->cap};
        ss_diag_init(&dd);
        double est;
        ss_status s2 = ss_stage_solve(&P, R->first, R->mode, &est, &dd);
        if (s2 == SS_OK) {
            R->est = est;
            R->feasible = 1;
            break;
        }
        if (s2 != SS_ERR_INFEASIBLE) {
            st = ss_diag_set(C->d, s2, "%s", dd.msg);
            break;
        }
        if (!L->copies)
            break;
    }
    ss_free(buf);
    return st;
}

/* The plan of the current choices, stages from first[], stage s in
 * recompute mode mode[s]. */
static ss_status build_plan(ctx *C, const int *first, const int *mode, ss_plan **out)
{
    const layout *L = C->L;
    const ss_graph *g = C->g;
    ss_plan *p = ss_plan_new(g, C->m0);
    int *stage_of = ss_calloc((size_t)L->n_layers + 1, sizeof(int));
    int *devs = ss_calloc((size_t)C->mesh.n * (size_t)C->mb + 1, sizeof(int));
    ss_status st = SS_OK;
    if (!p || !stage_of || !devs) {
        st = ss_diag_set(C->d, SS_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int s = 0; s < C->pp; s++)
        for (int l = first[s]; l < first[s + 1]; l++)
            stage_of[l] = s;
    for (int i = 0; i < L->n_ops && !st; i++) {
        int r = L->alias[i], stg = stage_of[L->layer[i]];
        ss_pconfig pc;
        ss_sharding_config(g, ss_graph_op(g, i), &C->mesh, &C->cands[r][C->choice[r]].s, C->mb,
                           stg * C->mesh.n, stg, &pc, devs);
        st = ss_plan_set_config(p, i, &pc, C->d);
    }
    if (st)
        goto out;
    ss_plan_settings *ps = ss_plan_settings_of(p);
    ps->stages = C->pp;
    ps->microbatches = C->mb;
    ps->schedule = SS_PIPE_1F1B;
    ps->queue = C->pp > 1 ? SS_QUEUE_BACKWARD_FIRST : SS_QUEUE_FIFO;
    ps->sync = SS_SYNC_WAIT_FREE;
    ps->bucket_bytes = MEGATRON_BUCKET_BYTES;
    ps->distopt = 1;
    ps->virtual_stages = 1;
    ss_recompute modes[64];
    for (int s = 0; s < C->pp; s++)
        modes[s] = (ss_recompute)mode[s];
    st = ss_plan_set_recompute(ps, modes, C->pp, "level 2", C->d);
    if (!st)
        st = ss_plan_validate(p, g, C->m0, C->d);
out:
    ss_free(stage_of);
    ss_free(devs);
    if (st) {
        ss_plan_free(p);
        return st;
    }
    *out = p;
    return SS_OK;
}

/* Pipeline depths to try: divisors of N up to the layers (and 64), the
 * ones nearest sqrt(nodes) first (the deep pipelines of many-node machines
 * and the shallow ones of one node), ties to the smaller; only `want` when
 * given. Returns the count. */
static int pipeline_order(int N, int per_node, int layers, int want, int *out)
{
    int n = 0;
    for (int pp = 1; pp <= N && pp <= layers && pp <= 64; pp++)
        if (N % pp == 0 && (want <= 0 || pp == want))
            out[n++] = pp;
    double target = log2(sqrt((double)N / (per_node > 0 ? per_node : 1)));
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0; j--) {
            double a = fabs(log2((double)out[j]) - target);
            double b = fabs(log2((double)out[j - 1]) - target);
            if (a < b || (a == b && out[j] < out[j - 1])) {
                int t = out[j];
                out[j] = out[j - 1];
                out[j - 1] = t;
            }
        }
    return n;
}

/* Meshes whose innermost axis fills a node first (tensor parallelism inside
 * the node), then those whose inner axis divides the node, then the rest;
 * stable otherwise. */
static int mesh_rank(const ss_dmesh *m, int per_node)
{
    if (m->n_axes == 0)
        return 0;
    int in = m->size[m->n_axes - 1];
    return in == per_node ? 0 : per_node % in == 0 ? 1 : 2;
}

static void mesh_order(ss_dmesh *ms, int n, int per_node)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && mesh_rank(&ms[j], per_node) < mesh_rank(&ms[j - 1], per_node);
             j--) {
            ss_dmesh t = ms[j];
            ms[j] = ms[j - 1];
            ms[j - 1] = t;
        }
}

/* rep's recompute fields from the stage modes mode[0..pp-1]. */
static void recompute_words(ss_level2_report *rep, const int *mode, int pp)
{
    static const char *const word[3] = {"no", "full", "selective"};  /* ss_recompute */
    static const char *const spec[3] = {"none", "full", "selective"}; /* plan spec */
    rep->recompute = (ss_recompute)mode[0];
    rep->recompute_uniform = 1;
    for (int s = 0; s < pp && s < 64; s++) {
        rep->stage_recompute[s] = (ss_recompute)mode[s];
        rep->recompute_uniform &= mode[s] == mode[0];
    }
    char *b = rep->recompute_text;
    size_t n = sizeof rep->recompute_text;
    if (rep->recompute_uniform) {
        snprintf(b, n, "%s recompute", word[mode[0]]);
        return;
    }
    size_t at = (size_t)snprintf(b, n, "recompute ");
    for (int s = 0; s < pp && at < n; s++) {
        int run = 1;
        while (s + run < pp && mode[s + run] == mode[s])
            run++;
        if (run > 1)
            at += (size_t)snprintf(b + at, n - at, "%s%s*%d", s ? "/" : "", spec[mode[s]], run);
        else
            at += (size_t)snprintf(b + at, n - at, "%s%s", s ? "/" : "", spec[mode[s]]);
        s += run - 1;
    }
}

typedef struct finalist {
    double est;
    ss_dmesh mesh;
    int pp, mb;
    ss_recompute rc;
    int *choice;    /* per op: the ILPs' choices (owned) */
    evalres cut;    /* the DP's stages */
    int grp;        /* its configuration's index (ties of est: the lower first) */
} finalist;

/* Simulate p (the simulators made on first use); *t_us = its iteration
 * time, HUGE_VAL when it does not fit, NAN when it was not judged. On
 * machines past MAX_FULL_DEVICES devices only the hierarchical evaluator
 * judges a finalist (a plan it cannot judge would need the full
 * simulation's gigabytes): one it refuses is not judged. */
#define MAX_FULL_DEVICES 64
static ss_status judge(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                       const ss_level2_config *c, const ss_plan *p, ss_sim **sim, double *t_us,
                       ss_diag *d)
{
    ss_status st = SS_OK;
    int big = ss_machine_n_devices(m) > MAX_FULL_DEVICES;
    if (!*sim) {
        ss_sim_config sc = {0};
        sc.mem_fraction = c->mem_fraction;
        sc.evaluator = big ? SS_EVAL_HIER : SS_EVAL_AUTO;
        if ((st = ss_sim_new(g, m, cm, &sc, sim, d)))
            return st;
    }
    ss_sim_result r = {0};
    ss_diag dd;
    ss_diag_init(&dd);
    st = ss_sim_run(*sim, p, &r, &dd);
    if (st == SS_ERR_INVALID && big) {
        *t_us = NAN;
        st = SS_OK;
    } else if (st) {
        ss_diag_set(d, st, "%s", dd.msg);
    } else {
        *t_us = r.fits ? r.iteration_us : HUGE_VAL;
    }
    ss_sim_result_clear(&r);
    return st;
}

/* Micro-batch counts for pp stages on mesh M: M = batch / (D * mbs) for D
 * the devices of the outer axes or of all axes (the data-parallel group of a
 * Megatron-like sharding) and mbs 1 or 2 samples per micro-batch, when
 * bubble (pp-1)/M <= 1/4, and 1 first when pp = 1 (gradient accumulation
 * otherwise); none such: the smallest divisor of the batch with that
 * bubble, or the batch itself. */
static int mb_candidates(int64_t batch, int pp, const ss_dmesh *M, int *out)
{
    if (batch <= 1) {
        out[0] = 1;
        return 1;
    }
    int n = 0;
    if (pp == 1) /* no pipeline: no micro-batches, or gradient accumulation */
        out[n++] = 1;
    int64_t outer = M->n_axes ? M->n / M->size[M->n_axes - 1] : 1;
    int64_t groups[2] = {outer, M->n};
    for (int gi = 0; gi < 2; gi++)
        for (int mbs = 1; mbs <= 2; mbs++) {
            int64_t per = groups[gi] * mbs;
            if (batch % per)
                continue;
            int64_t m = batch / per;
            if (m < 4 * (int64_t)(pp - 1) || m > (1 << 20))
                continue;
            int dup = 0;
            for (int k = 0; k < n; k++)
                dup |= out[k] == (int)m;
            if (!dup)
                out[n++] = (int)m;
        }
    for (int64_t m = 4 * (int64_t)(pp - 1); n == 0 && m <= batch; m++)
        if (batch % m == 0)
            out[n++] = (int)m;
    if (n == 0)
        out[n++] = (int)(batch < (1 << 20) ? batch : 1);
    return n;
}

/* The scratch of a ctx whose g, m and L are set; nonzero when out of
 * memory (ctx_free then frees what was made). */
static int ctx_alloc(ctx *C)
{
    size_t n = (size_t)C->L->n_ops + 1;
    C->cands = ss_calloc(n, sizeof *C->cands);
    C->n_cands = ss_calloc(n, sizeof *C->n_cands);
    C->choice = ss_calloc(n, sizeof *C->choice);
    C->coll = ss_calloc(COLL_CACHE, sizeof *C->coll);
    C->devs = ss_calloc((size_t)ss_machine_n_devices(C->m) + 1, sizeof *C->devs);
    return !C->cands || !C->n_cands || !C->choice || !C->coll || !C->devs;
}

static void ctx_free(ctx *C)
{
    if (C->cands && C->n_cands && C->choice)
        reset_config(C);
    ss_free(C->cands);
    ss_free(C->n_cands);
    ss_free(C->choice);
    ss_free(C->coll);
    ss_free(C->devs);
    ss_coll_result_clear(&C->cres);
    C->cands = NULL;
    C->n_cands = NULL;
    C->choice = NULL;
    C->coll = NULL;
    C->devs = NULL;
}

/* ------------------------------------------------------------- threads */

/* A configuration before its recompute mode: the unit a thread takes. */
typedef struct group {
    ss_dmesh mesh;
    int pp, mb;
} group;

/* The configurations in the order the sequential search visits them:
 * pipeline depths (pipeline_order), meshes (mesh_order), micro-batch
 * counts (mb_candidates), filtered by c's pp, mesh and microbatches. */
static ss_status groups(const ss_graph *g, const ss_level2_config *c, int N, int per_node,
                        int layers, group **out, int *n_out, ss_diag *d)
{
    ss_dmesh meshes[MAX_MESHES];
    int mbs[MB_CANDS], pps[64], cap = 0, n = 0;
    group *G = NULL;
    int npp = pipeline_order(N, per_node, layers, c->pp, pps);
    for (int pi = 0; pi < npp; pi++) {
        int pp = pps[pi];
        int nm = ss_dmesh_enumerate(N / pp, per_node, c->max_axes, meshes, MAX_MESHES);
        if (nm > MAX_MESHES)
            nm = MAX_MESHES;
        mesh_order(meshes, nm, per_node);
        for (int k = 0; k < nm; k++) {
            char name[32];
            ss_dmesh_name(&meshes[k], name, sizeof name);
            if (c->mesh && strcmp(c->mesh, name))
                continue;
            int nmb = c->microbatches > 0 ? 1
                                          : mb_candidates(ss_graph_batch(g), pp, &meshes[k], mbs);
            if (c->microbatches > 0)
                mbs[0] = c->microbatches;
            for (int b = 0; b < nmb; b++) {
                if (ss_grow((void **)&G, &cap, n + 1, sizeof *G)) {
                    ss_free(G);
                    return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
                }
                G[n++] = (group){meshes[k], pp, mbs[b]};
            }
        }
    }
    *out = G;
    *n_out = n;
    return SS_OK;
}

/* What the threads share. */
typedef struct pool {
    const ss_level2_config *c;
    const group *grp;
    int n_grp, threads, nfin;
    double t0;
    pthread_mutex_t lock;     /* guards what follows */
    finalist fin[MAX_FINALISTS]; /* sorted by (est, grp) */
    int n_fin;
    int halt;                 /* no configuration is started any more */
    int time_limited, stopped;
    ss_plan *plans[MAX_FINALISTS]; /* the finalists' plans (built after the pricing) */
} pool;

typedef struct worker {
    pool *P;
    int index;
    ctx C;
    ss_machine *own_m;        /* this thread's copy of a large machine (NULL: shared) */
    ss_level2_report rep;     /* this thread's counters */
    ss_diag d;
    ss_status st;
    int err_grp;              /* the configuration (or finalist) that failed */
} worker;

/* The estimate a configuration must beat to become a finalist. */
static double bar_of(pool *P)
{
    pthread_mutex_lock(&P->lock);
    double bar = P->n_fin < P->nfin ? HUGE_VAL : P->fin[P->n_fin - 1].est;
    pthread_mutex_unlock(&P->lock);
    return bar;
}

/* Offer configuration gi's result (C's choices, R's cut) to the finalists:
 * kept when among the nfin least (est, gi); nonzero when out of memory. */
static int offer(pool *P, const ctx *C, const evalres *R, int gi)
{
    int n = C->L->n_ops;
    int *keep = ss_malloc((size_t)n * sizeof *keep);
    if (!keep)
        return 1;
    memcpy(keep, C->choice, (size_t)n * sizeof *keep);
    pthread_mutex_lock(&P->lock);
    finalist *last = P->n_fin ? &P->fin[P->n_fin - 1] : NULL;
    if (P->n_fin < P->nfin || R->est < last->est || (R->est == last->est && gi < last->grp)) {
        int q = P->n_fin < P->nfin ? P->n_fin++ : P->n_fin - 1;
        ss_free(P->fin[q].choice); /* the evicted last finalist, or NULL */
        P->fin[q].choice = NULL;
        while (q > 0 && (P->fin[q - 1].est > R->est ||
                         (P->fin[q - 1].est == R->est && P->fin[q - 1].grp > gi))) {
            P->fin[q] = P->fin[q - 1];
            q--;
        }
        P->fin[q] = (finalist){R->est, C->mesh, C->pp, C->mb, C->rc, keep, *R, gi};
        keep = NULL;
    }
    pthread_mutex_unlock(&P->lock);
    ss_free(keep);
    return 0;
}

/* 1 when no configuration may start: another thread halted the pool, the
 * time limit passed or the stop callback asks (both then recorded). */
static int halted(pool *P)
{
    const ss_level2_config *c = P->c;
    int late = c->time_limit_s > 0 && now_s() - P->t0 >= c->time_limit_s;
    int stop = !late && c->stop && c->stop(c->stop_ctx);
    pthread_mutex_lock(&P->lock);
    P->time_limited |= late;
    P->stopped |= stop;
    P->halt |= late || stop;
    int h = P->halt;
    pthread_mutex_unlock(&P->lock);
    return h;
}

/* A worker's ctx scratch and, on a large machine (which fills its route
 * cache on demand, one thread at a time), its own copy of the machine (the
 * same topology); made on the worker's thread. */
static ss_status worker_setup(worker *w)
{
    ctx *C = &w->C;
    ss_status st = SS_OK;
    if (ss_machine_n_devices(C->m) > 256) {
        char *txt = NULL;
        st = ss_machine_to_string(C->m, &txt, C->d);
        if (!st)
            st = ss_machine_load_string(txt, ss_machine_name(C->m), &w->own_m, C->d);
        ss_free(txt);
        if (st)
            return st;
        C->m = w->own_m;
    }
    if (ctx_alloc(C))
        return ss_diag_set(C->d, SS_ERR_NOMEM, "out of memory");
    return SS_OK;
}

/* Thread w's share: configurations w, w + threads, ...; each tried with
 * the ILPs' recompute none, then selective, then full, until one fits. */
static void *worker_main(void *arg)
{
    worker *w = arg;
    pool *P = w->P;
    ctx *C = &w->C;
    static const ss_recompute order[3] = {SS_RECOMPUTE_NONE, SS_RECOMPUTE_SELECTIVE,
                                          SS_RECOMPUTE_FULL};
    if (w->index > 0 && (w->st = worker_setup(w))) {
        w->err_grp = -1;
        pthread_mutex_lock(&P->lock);
        P->halt = 1;
        pthread_mutex_unlock(&P->lock);
        return NULL;
    }
    for (int gi = w->index; gi < P->n_grp && !w->st; gi += P->threads)
        for (int rc = 0; rc < 3; rc++) {
            if (halted(P))
                return NULL;
            double left = P->c->time_limit_s > 0 ? P->c->time_limit_s - (now_s() - P->t0)
                                                 : HUGE_VAL;
            double ilp = left < P->c->ilp_time_limit_s ? left : P->c->ilp_time_limit_s;
            C->mesh = P->grp[gi].mesh;
            C->pp = P->grp[gi].pp;
            C->mb = P->grp[gi].mb;
            C->rc = order[rc];
            evalres R;
            w->st = eval_config(C, bar_of(P), &R, &w->rep, ilp);
            if (!w->st && R.feasible && offer(P, C, &R, gi))
                w->st = ss_diag_set(C->d, SS_ERR_NOMEM, "out of memory");
            if (w->st) {
                w->err_grp = gi;
                pthread_mutex_lock(&P->lock);
                P->halt = 1;
                pthread_mutex_unlock(&P->lock);
                return NULL;
            }
            if (R.feasible)
                break; /* fits: more recomputation only costs time */
        }
    return NULL;
}

/* The plan of finalist F (its candidates again, cheap, no ILP; its kept
 * choices and cut) into *out. */
static ss_status build_finalist(ctx *C, const finalist *F, ss_plan **out)
{
    C->mesh = F->mesh;
    C->pp = F->pp;
    C->mb = F->mb;
    C->rc = F->rc;
    reset_config(C);
    ss_status st = SS_OK;
    for (int i = 0; i < C->L->n_ops && !st; i++)
        st = op_cands(C, C->L->alias[i]);
    if (st)
        return st;
    memcpy(C->choice, F->choice, (size_t)C->L->n_ops * sizeof *C->choice);
    return build_plan(C, F->cut.first, F->cut.mode, out);
}

/* Thread w's finalists: w, w + threads, ... (plans into P->plans). */
static void *finalist_main(void *arg)
{
    worker *w = arg;
    pool *P = w->P;
    for (int f = w->index; f < P->n_fin && !w->st; f += P->threads)
        if ((w->st = build_finalist(&w->C, &P->fin[f], &P->plans[f])))
            w->err_grp = f;
    return NULL;
}

/* fn on ws[1..T-1] as threads and ws[0] here; a thread that cannot start
 * runs its share here after the others. */
static void run_threads(worker *ws, int T, void *(*fn)(void *))
{
    pthread_t th[SS_LEVEL2_MAX_THREADS];
    int started[SS_LEVEL2_MAX_THREADS] = {0};
    for (int i = 1; i < T; i++)
        started[i] = pthread_create(&th[i], NULL, fn, &ws[i]) == 0;
    fn(&ws[0]);
    for (int i = 1; i < T; i++)
        if (started[i])
            pthread_join(th[i], NULL);
        else
            fn(&ws[i]);
}

/* The worker whose error is of the lowest configuration (or finalist), or -1. */
static int first_error(const worker *ws, int T)
{
    int err = -1;
    for (int i = 0; i < T; i++)
        if (ws[i].st && (err < 0 || ws[i].err_grp < ws[err].err_grp))
            err = i;
    return err;
}

/* Price every configuration of P on P->threads threads, worker 0 on the
 * caller's thread with C0 (the others with ctxs like it); the finalists
 * into P->fin, the counters into rep; then the finalists' plans, built on
 * the same threads, into P->plans. On error, the error of the lowest
 * configuration (or finalist) that failed is set in d (the finalists and
 * plans made are kept in P for the caller to free). */
static ss_status run_pool(pool *P, ctx *C0, ss_level2_report *rep, ss_diag *d)
{
    int T = P->threads;
    worker *ws = ss_calloc((size_t)T, sizeof *ws);
    if (!ws)
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&P->lock, NULL);
    ss_status st = SS_OK;
    for (int i = 0; i < T; i++) {
        worker *w = &ws[i];
        w->P = P;
        w->index = i;
        ss_diag_init(&w->d);
        w->C = *C0;
        w->C.d = &w->d;
        if (i == 0)
            continue;
        w->C.cands = NULL; /* made by worker_setup on the worker's thread */
        w->C.n_cands = NULL;
        w->C.choice = NULL;
        w->C.coll = NULL;
        w->C.devs = NULL;
        memset(&w->C.cres, 0, sizeof w->C.cres);
    }
    run_threads(ws, T, worker_main);
    for (int i = 0; i < T; i++) {
        worker *w = &ws[i];
        rep->configs += w->rep.configs;
        rep->skipped += w->rep.skipped;
        rep->ilp_solves += w->rep.ilp_solves;
        rep->ilp_s += w->rep.ilp_s;
        rep->ilp_cbc_s += w->rep.ilp_cbc_s;
        if (w->rep.ilp_max_s > rep->ilp_max_s)
            rep->ilp_max_s = w->rep.ilp_max_s;
        rep->ilp_time_limited += w->rep.ilp_time_limited;
        rep->ilp_node_limited += w->rep.ilp_node_limited;
        rep->thread_configs[i] = w->rep.configs;
    }
    rep->threads = T;
    rep->time_limited = P->time_limited;
    rep->stopped = P->stopped;
    int err = first_error(ws, T);
    if (err >= 0)
        st = ss_diag_set(d, ws[err].st, "%s", ws[err].d.msg);
    if (!st && P->n_fin > 0) {
        run_threads(ws, T < P->n_fin ? T : P->n_fin, finalist_main);
        if ((err = first_error(ws, T)) >= 0)
            st = ss_diag_set(d, ws[err].st, "%s", ws[err].d.msg);
    }
    ws[0].C.d = C0->d; /* worker 0 worked on C0's arrays: C0 takes its state back */
    *C0 = ws[0].C;
    for (int i = 1; i < T; i++) {
        ctx_free(&ws[i].C);
        ss_machine_free(ws[i].own_m);
    }
    pthread_mutex_destroy(&P->lock);
    ss_free(ws);
    return st;
}

ss_status ss_level2_plan(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                         const ss_level2_config *cfg, ss_plan **out, ss_level2_report *report,
                         ss_diag *d)
{
    double t0 = now_s();
    if (!g || !m || !cm || !out)
        return ss_diag_set(d, SS_ERR_INVALID, "level 2: missing argument");
    *out = NULL;
    ss_level2_config c = cfg ? *cfg : (ss_level2_config){0};
    if (c.mem_fraction <= 0)
        c.mem_fraction = 1.0;
    if (c.ilp_time_limit_s <= 0)
        c.ilp_time_limit_s = 2;
    if (c.max_axes <= 0)
        c.max_axes = 2;
    if (c.max_axes > SS_DMESH_MAX_AXES)
        c.max_axes = SS_DMESH_MAX_AXES;
    ss_level2_report rep;
    memset(&rep, 0, sizeof rep);
    int N = ss_machine_n_devices(m), per_node = 0;
    for (int i = 0; i < N; i++) {
        per_node += ss_machine_device(m, i)->host == ss_machine_device(m, 0)->host;
        if (ss_machine_device(m, i)->type != ss_machine_device(m, 0)->type)
            return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                               "level 2: machine \"%s\" mixes device types (device %d is a %s, "
                               "device 0 a %s); level 2 plans machines of one device type",
                               ss_machine_name(m), i,
                               ss_machine_type(m, ss_machine_device(m, i)->type)->name,
                               ss_machine_type(m, ss_machine_device(m, 0)->type)->name);
    }
    layout L;
    ss_sim *sim = NULL;
    finalist fin[MAX_FINALISTS];
    ss_plan *plans[MAX_FINALISTS] = {NULL};
    memset(fin, 0, sizeof fin);
    int n_fin = 0;
    ss_status st = layout_build(g, &L, d);
    if (st)
        return st;
    ctx C;
    memset(&C, 0, sizeof C);
    C.g = g;
    C.m = m;
    C.m0 = m;
    C.cm = cm;
    C.L = &L;
    C.d = d;
    C.devtype = ss_machine_device(m, 0)->type;
    C.cap = ss_machine_type(m, C.devtype)->mem_gib * 1073741824.0 * c.mem_fraction;
    C.mb_overhead_us = ss_machine_type(m, C.devtype)->mb_overhead_us;
    if (ctx_alloc(&C)) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
        goto out;
    }
    int nfin = c.finalists > 0 ? c.finalists : c.finalists < 0 ? 1 : 4;
    if (nfin > MAX_FINALISTS)
        nfin = MAX_FINALISTS;
    group *grp = NULL;
    int n_grp = 0;
    if ((st = groups(g, &c, N, per_node, L.n_layers, &grp, &n_grp, d)))
        goto out;
    pool P;
    memset(&P, 0, sizeof P);
    P.c = &c;
    P.grp = grp;
    P.n_grp = n_grp;
    P.nfin = nfin;
    P.t0 = t0;
    P.threads = c.threads < 1 ? 1 : c.threads > SS_LEVEL2_MAX_THREADS ? SS_LEVEL2_MAX_THREADS
                                                                      : c.threads;
    if (P.threads > n_grp)
        P.threads = n_grp > 0 ? n_grp : 1;
    st = run_pool(&P, &C, &rep, d);
    ss_free(grp);
    n_fin = P.n_fin;
    memcpy(fin, P.fin, sizeof fin);
    memcpy(plans, P.plans, sizeof plans);
    if (st)
        goto out;
    if (n_fin == 0) {
        st = ss_diag_set(d, SS_ERR_INFEASIBLE,
                         "level 2: no configuration of model \"%s\" fits %.3g GiB per device on "
                         "%d devices (%d configurations priced, %d skipped%s)",
                         ss_graph_name(g), C.cap / 1073741824.0, N, rep.configs, rep.skipped,
                         rep.time_limited ? ", time limit reached"
                         : rep.stopped    ? ", stopped"
                                          : "");
        goto out;
    }
    /* Finalists, best estimate first (their plans built by run_pool):
     * simulated when asked, the fastest that fits kept (by estimate when
     * not). */
    double best_sim = HUGE_VAL;
    int unjudged = 0;
    for (int f = 0; f < n_fin && !st; f++) {
        ss_plan *p = plans[f];
        plans[f] = NULL;
        const evalres *R = &fin[f].cut;
        double t_sim = R->est;
        if (c.finalists >= 0) {
            st = judge(g, m, cm, &c, p, &sim, &t_sim, d);
            if (st) {
                ss_plan_free(p);
                break;
            }
            if (isnan(t_sim)) { /* not judged: kept only while no finalist was */
                t_sim = rep.simulated || unjudged ? HUGE_VAL : R->est;
                unjudged++;
            } else {
                rep.simulated++;
                if (rep.simulated == 1 && t_sim < HUGE_VAL)
                    best_sim = HUGE_VAL; /* a judged plan beats an unjudged one */
            }
        }
        if (t_sim < best_sim) {
            best_sim = t_sim;
            ss_plan_free(*out);
            *out = p;
            p = NULL;
            ss_dmesh_name(&fin[f].mesh, rep.mesh, sizeof rep.mesh);
            rep.pp = fin[f].pp;
            rep.microbatches = fin[f].mb;
            recompute_words(&rep, R->mode, fin[f].pp);
            rep.ilp_recompute = fin[f].rc;
            rep.estimate_us = R->est;
            rep.simulated_us = c.finalists >= 0 && rep.simulated ? t_sim : 0;
            rep.n_layers = L.n_layers;
            for (int s2 = 0; s2 <= fin[f].pp && s2 <= 64; s2++)
                rep.stage_first[s2] = R->first[s2];
        }
        ss_plan_free(p);
    }
    if (!st && !*out)
        st = ss_diag_set(d, SS_ERR_INFEASIBLE,
                         "level 2: none of the %d finalist plans of model \"%s\" fits memory "
                         "when simulated",
                         n_fin, ss_graph_name(g));
    if (st) {
        ss_plan_free(*out);
        *out = NULL;
    }
out:
    ctx_free(&C);
    ss_sim_free(sim);
    for (int f = 0; f < n_fin; f++) {
        ss_free(fin[f].choice);
        ss_plan_free(plans[f]);
    }
    layout_free(&L);
    rep.time_s = now_s() - t0;
    if (report)
        *report = rep;
    return st;
}
