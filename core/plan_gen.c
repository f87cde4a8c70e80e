/*
 * plan_gen.c — built-in plan generators: data parallel, Megatron-LM style
 * tensor + pipeline + data parallel, and plan specs ("data-parallel",
 * "megatron:tp=..,pp=..,dp=..", or a plan file).
 *
 * Data parallel over n devices: every op whose output 0 has a splittable
 * sample dim with an extent divisible by n splits it n ways, tile i on
 * device i; ops without such a dim (or with an indivisible extent) stay whole
 * on device 0.
 *
 * Megatron: tensor parallelism is found structurally, not from op names.
 * Walking the ops in order, each activation tensor gets a tp state: NONE
 * (whole, on the first device of the TP group), TP (split over the group;
 * the region of tile 0 is remembered), PARTIAL (partial sums over the group)
 * or SEQ (sequence parallel split). A linear (or an expert_linear: expert
 * tensor parallelism = tp, Megatron's default without expert parallelism)
 * whose input is not TP-split becomes column-parallel (its last output dim
 * split tp); an op with a
 * TP-split input takes the first config — an output dim split tp, or red = tp
 * — for which the input region of its tile 0 equals the producer's tile-0
 * region of that input (this makes reshape/split/transpose/batch_matmul/
 * softmax/dropout/gelu follow the heads split, and row-parallel linears get
 * red = tp); consumers of partial sums are not split (or with sp=1 split
 * along their sequence dim). Every op left unsplit (graph inputs, LayerNorm,
 * residual adds, dropout outside the heads) is replicated over the tp group
 * (rep = tp, replica q on tp rank q), as Megatron runs it on every rank, so
 * a row-parallel linear ends in an all-reduce (reduce-scatter with sp=1)
 * and no rank sends an activation to the others. The embedding with the largest vocabulary is
 * vocab-parallel (red = tp); fused attention splits its heads (red = tp).
 * A vocabulary tp does not divide stays whole (embedding and LM head). When
 * a column split cannot be followed downstream (a dense layer feeding a
 * LayerNorm over its features, as in BERT's MLM head), that linear is left
 * whole and the walk restarts; a reshape that cannot follow is an error (tp
 * does not divide the heads).
 * Pipeline stages cut the op list where one activation crosses; when the
 * model has repeated layers (a repeated run of segments), layers are spread
 * evenly over the stages (prefix in the first, suffix in the last),
 * otherwise cuts balance forward FLOPs. Interleaved (vp > 1, Megatron's
 * virtual pipeline stages): the layers, which pp*vp must divide, are cut
 * into pp*vp equal chunks, the plan's stages, and chunk k runs on pipeline
 * rank k mod pp; with uneven first / last ranks each rank's layers (first,
 * last or the even share) are cut into vp equal chunks, as Megatron-Core
 * does. Graph inputs take the stage of their first consumer.
 * Context parallelism (cp > 1) splits each op's sequence dim cp ways
 * (context_dim) with the cp ranks between tp and dp, as Megatron orders them.
 * Device of a tile = (((stage mod pp)*dp + dp_rank)*cp + cp_rank)*tp + tp_rank,
 * the sample dim split dp*mb with each dp rank's device repeated mb times
 * (mb from the micro-batch size mbs when given: batch / (dp*mbs)).
 * Expert parallelism (ep > 1): the expert ops (moe_dispatch's consumers up
 * to moe_combine: [experts, slots, .] tensors) also split their expert dim
 * ep ways; tile (expert block e, slot chunk of dp rank r) runs on dp rank
 * (r - r mod ep) + e, the e-th rank of r's expert group, so the slots cross
 * between ranks of a group (the dispatch and combine all-to-all).
 */
#include "core/json_util.h"
#include "core/plan_impl.h"
#include "core/segments.h"

#include <errno.h>

/* Megatron-LM's data-parallel gradient bucket (--ddp-bucket-size default:
 * 40M parameters) in bytes of fp16 gradients, for sync=overlap. */
#define MEGATRON_BUCKET_BYTES 80e6
#define MEGATRON_BULK_BYTES 1e15 /* larger than any gradient buffer: one bucket */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const ss_tensor *out0(const ss_graph *g, const ss_op *op)
{
    return op->n_out > 0 ? ss_graph_tensor(g, op->outputs[0]) : NULL;
}

/* The splittable sample dim of op's output 0, or -1. */
static int sample_dim(const ss_graph *g, const ss_op *op)
{
    const ss_tensor *o = out0(g, op);
    if (!o)
        return -1;
    unsigned mask = ss_op_split_mask(g, op);
    for (int k = 0; k < o->ndim; k++)
        if (o->kind[k] == SS_DIM_SAMPLE && (mask & (1u << k)))
            return k;
    return -1;
}

static ss_status check_devices(const ss_machine *m, int want, const char *what, ss_diag *d)
{
    if (!m)
        return ss_diag_set(d, SS_ERR_INVALID, "%s: no machine", what);
    int have = ss_machine_n_devices(m);
    if (want > have)
        return ss_diag_set(d, SS_ERR_INVALID, "%s: needs %d devices but topology \"%s\" has %d",
                           what, want, ss_machine_name(m), have);
    return SS_OK;
}

ss_status ss_plan_data_parallel(const ss_graph *g, const ss_machine *m, int n_devices,
                                ss_plan **out, ss_diag *d)
{
    if (!g || !out)
        return ss_diag_set(d, SS_ERR_INVALID, "data-parallel: missing graph");
    if (n_devices < 0)
        return ss_diag_set(d, SS_ERR_INVALID, "data-parallel: negative device count %d",
                           n_devices);
    int n = n_devices ? n_devices : (m ? ss_machine_n_devices(m) : 1);
    ss_status st = check_devices(m, n, "data-parallel", d);
    if (st)
        return st;
    ss_plan *p = ss_plan_new(g, m);
    int *devs = ss_malloc((size_t)n * sizeof *devs);
    if (!p || !devs) {
        ss_plan_free(p);
        ss_free(devs);
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++)
        devs[i] = i;
    for (int i = 0; i < p->n_ops && !st; i++) {
        const ss_op *op = ss_graph_op(g, i);
        int k = sample_dim(g, op);
        if (n == 1 || k < 0 || out0(g, op)->shape[k] % n != 0)
            continue;
        ss_pconfig c = p->cfg[i];
        c.deg[k] = n;
        c.ntiles = n;
        c.devices = devs;
        st = ss_plan_set_config(p, i, &c, d);
    }
    ss_free(devs);
    if (st) {
        ss_plan_free(p);
        return st;
    }
    *out = p;
    return SS_OK;
}

/* ------------------------------------------------------------ pipeline */

typedef struct gen {
    const ss_graph *g;
    ss_megatron_config c;
    int sp;
    int n_ops;
    int *stage;       /* per op */
    int *tpdim;       /* per op: output dim split tp, -1 none */
    int *tpred;       /* per op: red = tp */
    int *seqdim;      /* per op: dim split tp for sequence parallelism, -1 none */
    char *expert;     /* per tensor: an [experts, slots, .] tensor of a MoE layer */
    int last[SS_MAX_DIMS + 10]; /* the layout key of the device list megatron_config
                                 * left in its buffer (last[0] = 0: none): consecutive
                                 * ops of one layout (a MoE layer's expert ops, ep x
                                 * dp x mb tiles each) reuse it */
    char *nocol;      /* per op: linear not to be made column-parallel */
    int *state;       /* per tensor */
    int *origin;      /* per tensor: column-parallel linear its TP split comes from */
    ss_region *reg;   /* per tensor: tile-0 region when TP/SEQ */
} gen;

enum { ST_NONE = 0, ST_TP, ST_PARTIAL, ST_SEQ };

int ss_plan_layers(const ss_graph *g)
{
    ss_segments sg;
    if (!g || ss_segments_find(g, &sg, NULL))
        return 0;
    int r = sg.reps;
    ss_segments_free(&sg);
    return r;
}

/* Stage of layer b of r over pp stages: even, or with c's uneven first /
 * last stage sizes (checked by ss_plan_megatron). */
static int layer_stage(const ss_megatron_config *c, int b, int r)
{
    int pp = c->pp;
    if (!c->first && !c->last)
        return (int)((int64_t)b * pp / r);
    int f = c->first, l = c->last;
    int mid = pp - (f ? 1 : 0) - (l ? 1 : 0); /* stages of the even share */
    int rest = r - f - l, per = mid > 0 ? rest / mid : 0;
    if (f && b < f)
        return 0;
    if (l && b >= r - l)
        return pp - 1;
    return (f ? 1 : 0) + (b - f) / per;
}

/* Chunk (plan stage) of layer b of r under interleaving with uneven first /
 * last ranks, as Megatron-Core builds it (get_num_layers_to_build): pipeline
 * rank q holds first, last or the even share of the other layers, cut into
 * vp equal chunks; chunk k = v * pp + q is rank q's v-th, the chunks take the
 * layers in order (checked by assign_stages: vp divides every rank's count). */
static int layer_chunk(const ss_megatron_config *c, int b, int r)
{
    int pp = c->pp, vp = c->vp, f = c->first, l = c->last;
    int mid = pp - (f ? 1 : 0) - (l ? 1 : 0), per = mid > 0 ? (r - f - l) / mid : 0;
    for (int k = 0, start = 0; k < pp * vp; k++) {
        int q = k % pp;
        start += (q == 0 && f ? f : q == pp - 1 && l ? l : per) / vp;
        if (b < start)
            return k;
    }
    return pp * vp - 1;
}

/* Assign g->stage[] for pp*vp stages (chunks; pp when not interleaved). */
static ss_status assign_stages(gen *G, ss_diag *d)
{
    const ss_graph *g = G->g;
    int n = G->n_ops, vp = G->c.vp, pp = G->c.pp * vp;
    ss_status st = SS_OK;
    ss_segments sg;
    if (ss_segments_find(g, &sg, d))
        return SS_ERR_NOMEM;
    int *segstage = ss_malloc((size_t)(n + 1) * sizeof *segstage);
    if (!segstage) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
        goto out;
    }
    int m = sg.m, nseg = sg.n, *ord = sg.ord, *pos = sg.pos, *segend = sg.end;
    const double *flops = sg.flops;
    if (pp == 1 || m == 0) {
        if (G->c.first || G->c.last) {
            st = ss_diag_set(d, SS_ERR_INVALID, "megatron: first/last layers need pp > 1");
            goto out;
        }
        for (int i = 0; i < n; i++)
            G->stage[i] = 0;
        goto out;
    }
    /* Longest run of a repeated block of k segments: the layers. */
    int best_s = sg.s0, best_k = sg.k, best_r = sg.reps, best_cov = best_r * best_k;
    if ((G->c.first || G->c.last) && best_cov) {
        int f = G->c.first, l = G->c.last, P = G->c.pp;
        int mid = P - (f ? 1 : 0) - (l ? 1 : 0), rest = best_r - f - l;
        int per = mid > 0 && rest > 0 ? rest / mid : 0;
        if (rest < 0 || (mid == 0 && rest != 0) || (mid > 0 && (rest <= 0 || rest % mid)))
            st = ss_diag_set(d, SS_ERR_INVALID,
                             "megatron: first=%d, last=%d: the other %d layers of model \"%s\" "
                             "do not divide evenly over the other %d of pp=%d stages",
                             f, l, rest, ss_graph_name(g), mid, P);
        else if (vp > 1 && (f % vp || l % vp || per % vp))
            st = ss_diag_set(d, SS_ERR_INVALID,
                             "megatron: vp=%d must divide the layers of every pipeline rank "
                             "(first=%d, last=%d, %d on each other rank), as Megatron-Core cuts "
                             "each rank's layers into vp chunks", vp, f, l, per);
    } else if (G->c.first || G->c.last)
        st = ss_diag_set(d, SS_ERR_INVALID,
                         "megatron: first/last layers need a model of repeated layers; model "
                         "\"%s\" has none",
                         ss_graph_name(g));
    if (st)
        goto out;
    if (vp > 1 && !G->c.first && !G->c.last && (!best_cov || best_r % pp != 0)) {
        if (best_cov)
            st = ss_diag_set(d, SS_ERR_INVALID,
                             "megatron: vp=%d: the %d layers of model \"%s\" do not divide into "
                             "pp*vp = %d*%d = %d equal chunks",
                             vp, best_r, ss_graph_name(g), G->c.pp, vp, pp);
        else
            st = ss_diag_set(d, SS_ERR_INVALID,
                             "megatron: vp=%d needs a model of repeated layers to cut into "
                             "pp*vp = %d equal chunks; model \"%s\" has none",
                             vp, pp, ss_graph_name(g));
        goto out;
    }
    if (best_cov) {
        if (best_r < pp) {
            st = ss_diag_set(d, SS_ERR_INVALID,
                             "megatron: pp=%d is more than the %d layers of model \"%s\"", pp,
                             best_r, ss_graph_name(g));
            goto out;
        }
        for (int j = 0; j < nseg; j++) {
            if (j < best_s)
                segstage[j] = 0;
            else if (j >= best_s + best_r * best_k)
                segstage[j] = pp - 1;
            else
                segstage[j] = vp > 1 && (G->c.first || G->c.last)
                                  ? layer_chunk(&G->c, (j - best_s) / best_k, best_r)
                              : vp > 1 ? (int)((int64_t)((j - best_s) / best_k) * pp / best_r)
                                       : layer_stage(&G->c, (j - best_s) / best_k, best_r);
        }
    } else {
        if (nseg < pp) {
            st = ss_diag_set(d, SS_ERR_INVALID,
                             "megatron: pp=%d but model \"%s\" can be cut into at most %d stages",
                             pp, ss_graph_name(g), nseg);
            goto out;
        }
        /* Cut after segment cut[s-1] closest to s/pp of the FLOPs. */
        double total = flops[nseg - 1];
        int prev = -1, seg = 0;
        for (int s = 1; s < pp; s++) {
            double target = total * s / pp;
            int lo = prev + 1, hi = nseg - 1 - (pp - s); /* leave a segment per later stage */
            int bestj = lo;
            for (int j = lo; j <= hi; j++) {
                double dj = flops[j] - target, db = flops[bestj] - target;
                if ((dj < 0 ? -dj : dj) < (db < 0 ? -db : db))
                    bestj = j;
            }
            for (; seg <= bestj; seg++)
                segstage[seg] = s - 1;
            prev = bestj;
        }
        for (; seg < nseg; seg++)
            segstage[seg] = pp - 1;
    }
    for (int j = 0, s = 0; j < m; j++) {
        while (segend[s] < j)
            s++;
        G->stage[ord[j]] = segstage[s];
    }
    /* Graph inputs: the stage of their first consumer. */
    for (int i = 0; i < n; i++) {
        if (pos[i] >= 0)
            continue;
        const ss_op *op = ss_graph_op(g, i);
        int stg = pp - 1, any = 0;
        for (int o = 0; o < op->n_out; o++)
            for (int c = 0; c < ss_graph_n_consumers(g, op->outputs[o]); c++) {
                int s2 = G->stage[ss_graph_consumer(g, op->outputs[o], c)];
                if (s2 < stg)
                    stg = s2;
                any = 1;
            }
        G->stage[i] = any ? stg : 0;
    }
out:
    ss_segments_free(&sg);
    ss_free(segstage);
    return st;
}

/* ------------------------------------------------------ tensor parallel */

static int region_eq(const ss_region *a, const ss_region *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int k = 0; k < a->ndim; k++)
        if (a->r[k].lo != b->r[k].lo || a->r[k].hi != b->r[k].hi)
            return 0;
    return 1;
}

/* Tile 0 of op under a config splitting dim (or red when dim < 0) tp ways. */
static void tile0(const gen *G, const ss_op *op, int dim, int red, ss_tile *t)
{
    int devs[1] = {0};
    ss_pconfig c = {0};
    const ss_tensor *o = out0(G->g, op);
    c.ndim = o ? o->ndim : 0;
    for (int k = 0; k < SS_MAX_DIMS; k++)
        c.deg[k] = 1;
    c.red = 1;
    c.rep = 1;
    if (dim >= 0)
        c.deg[dim] = G->c.tp;
    if (red)
        c.red = G->c.tp;
    c.ntiles = G->c.tp;
    c.devices = devs;
    ss_pconfig_tile(G->g, op, &c, 0, t);
}

/* Record op's outputs as split (state) under tile t. */
static void mark_outputs(gen *G, const ss_op *op, const ss_tile *t, int state)
{
    for (int o = 0; o < op->n_out; o++) {
        int tid = op->outputs[o];
        ss_region r;
        ss_op_output_region(G->g, op, t, o, &r);
        const ss_tensor *x = ss_graph_tensor(G->g, tid);
        int whole = 1;
        for (int k = 0; k < x->ndim && k < r.ndim; k++)
            if (r.r[k].lo != 0 || r.r[k].hi != x->shape[k])
                whole = 0;
        G->state[tid] = whole ? ST_NONE : state;
        G->reg[tid] = r;
    }
}

static void mark_all(gen *G, const ss_op *op, int state)
{
    for (int o = 0; o < op->n_out; o++)
        G->state[op->outputs[o]] = state;
}

/* Does candidate (dim or red) match every input of op in state `want`? */
static int matches(const gen *G, const ss_op *op, int dim, int red, int want)
{
    ss_tile t;
    tile0(G, op, dim, red, &t);
    for (int i = 0; i < op->n_in; i++) {
        int tid = op->inputs[i];
        if (G->state[tid] != want)
            continue;
        ss_region r;
        ss_op_input_region(G->g, op, &t, i, &r);
        if (!region_eq(&r, &G->reg[tid]))
            return 0;
    }
    return 1;
}

/* Try to follow the split of op's inputs in state want; 1 if done. */
static int follow(gen *G, int id, int want)
{
    const ss_op *op = ss_graph_op(G->g, id);
    const ss_tensor *o = out0(G->g, op);
    if (!o)
        return 0;
    unsigned mask = ss_op_split_mask(G->g, op);
    int tp = G->c.tp;
    for (int k = 0; k < o->ndim; k++) {
        if (!(mask & (1u << k)) || o->shape[k] % tp != 0 || o->kind[k] == SS_DIM_SAMPLE)
            continue;
        if (want == ST_SEQ && o->kind[k] != SS_DIM_ATTRIBUTE)
            continue;
        if (matches(G, op, k, 0, want)) {
            ss_tile t;
            tile0(G, op, k, 0, &t);
            if (want == ST_SEQ)
                G->seqdim[id] = k;
            else
                G->tpdim[id] = k;
            mark_outputs(G, op, &t, want);
            return 1;
        }
    }
    int64_t cext = ss_op_contraction(G->g, op);
    if (want == ST_TP && cext > 0 && cext % tp == 0 && matches(G, op, -1, 1, want)) {
        G->tpred[id] = 1;
        mark_all(G, op, ST_PARTIAL);
        return 1;
    }
    return 0;
}

static int largest_vocab(const ss_graph *g)
{
    int64_t v = 0;
    for (int i = 0; i < ss_graph_n_ops(g); i++) {
        const ss_op *op = ss_graph_op(g, i);
        if (op->type == SS_OP_EMBEDDING && op->attrs.vocab > v)
            v = op->attrs.vocab;
    }
    return (int)(v > 0x7fffffff ? 0x7fffffff : v);
}

/* Origin of op's first TP-split input (the column-parallel linear that
 * started the split), or -1. */
static int input_origin(const gen *G, const ss_op *op)
{
    for (int i = 0; i < op->n_in; i++)
        if (G->state[op->inputs[i]] == ST_TP)
            return G->origin[op->inputs[i]];
    return -1;
}

static void set_origin(gen *G, const ss_op *op, int origin)
{
    for (int o = 0; o < op->n_out; o++)
        G->origin[op->outputs[o]] = origin;
}

/* One pass over the ops. Returns SS_OK, an error, or SS_ERR_INTERRUPTED
 * (internal: retry) after marking a column-parallel linear whose split
 * cannot be followed downstream (e.g. a dense layer feeding a LayerNorm over
 * its features) as not to be split. */
static ss_status assign_tp_once(gen *G, ss_diag *d)
{
    const ss_graph *g = G->g;
    int tp = G->c.tp;
    int64_t vmax = largest_vocab(g);
    for (int id = 0; id < G->n_ops; id++) {
        const ss_op *op = ss_graph_op(g, id);
        const ss_tensor *o = out0(g, op);
        G->tpdim[id] = G->seqdim[id] = -1;
        G->tpred[id] = 0;
        mark_all(G, op, ST_NONE);
        set_origin(G, op, -1);
        if (tp == 1 || !o || op->type == SS_OP_INPUT)
            continue;
        int has[4] = {0};
        for (int i = 0; i < op->n_in; i++)
            has[G->state[op->inputs[i]]] = 1;
        if (op->type == SS_OP_EMBEDDING && op->attrs.vocab == vmax) {
            /* vocab-parallel; a vocabulary tp does not divide stays whole */
            if (op->attrs.vocab % tp == 0) {
                G->tpred[id] = 1;
                mark_all(G, op, ST_PARTIAL);
            }
        } else if (op->type == SS_OP_ATTENTION && !has[ST_TP]) {
            if (op->attrs.heads % tp)
                return ss_diag_set(d, SS_ERR_INVALID,
                                   "megatron: tp=%d does not divide the %lld heads of \"%s\"", tp,
                                   (long long)op->attrs.heads, op->name);
            G->tpred[id] = 1;
            mark_all(G, op, ST_PARTIAL);
        } else if ((op->type == SS_OP_LINEAR || op->type == SS_OP_EXPERT_LINEAR) && !has[ST_TP]) {
            int k = o->ndim - 1;
            if (G->nocol[id])
                continue;
            if (o->shape[k] % tp) {
                if (o->shape[k] == vmax)
                    continue; /* LM head over a vocabulary tp does not divide */
                return ss_diag_set(d, SS_ERR_INVALID,
                                   "megatron: tp=%d does not divide the %lld output features of "
                                   "linear \"%s\" (tp must divide the hidden size)",
                                   tp, (long long)o->shape[k], op->name);
            }
            ss_tile t;
            tile0(G, op, k, 0, &t);
            G->tpdim[id] = k;
            mark_outputs(G, op, &t, ST_TP);
            set_origin(G, op, id);
        } else if (has[ST_TP]) {
            int origin = input_origin(G, op);
            if (follow(G, id, ST_TP)) {
                set_origin(G, op, origin);
                continue;
            }
            if (op->type == SS_OP_RESHAPE || origin < 0)
                return ss_diag_set(d, SS_ERR_INVALID,
                                   "megatron: tp=%d: %s \"%s\" cannot follow the tensor-parallel "
                                   "split of its input (tp must divide the number of heads, "
                                   "of kv heads and the hidden size)",
                                   tp, ss_op_type_name(op->type), op->name);
            G->nocol[origin] = 1;
            return SS_ERR_INTERRUPTED;
        } else if (G->sp && (has[ST_PARTIAL] || has[ST_SEQ])) {
            if (!(has[ST_SEQ] && follow(G, id, ST_SEQ))) {
                /* Reduce-scatter of partial sums: split the first sequence dim. */
                unsigned mask = ss_op_split_mask(g, op);
                for (int k = 0; k < o->ndim; k++)
                    if (o->kind[k] == SS_DIM_ATTRIBUTE && (mask & (1u << k)) &&
                        o->shape[k] % tp == 0) {
                        ss_tile t;
                        tile0(G, op, k, 0, &t);
                        G->seqdim[id] = k;
                        mark_outputs(G, op, &t, ST_SEQ);
                        break;
                    }
            }
        }
    }
    return SS_OK;
}

static ss_status assign_tp(gen *G, ss_diag *d)
{
    ss_status st;
    for (int round = 0; round <= G->n_ops; round++)
        if ((st = assign_tp_once(G, d)) != SS_ERR_INTERRUPTED)
            return st;
    return ss_diag_set(d, SS_ERR_INVALID, "megatron: no consistent tensor-parallel split");
}

/* The dim of op's output 0 that context parallelism splits: its tp-split
 * sequence dim under sp when tp * cp divides it, else its first splittable
 * attribute dim (the sequence; the query rows of attention scores) that cp
 * divides and tp does not split; -1: none (the op is replicated over cp). */
static int context_dim(const gen *G, int id, int tdim, int sdim)
{
    const ss_op *op = ss_graph_op(G->g, id);
    const ss_tensor *o = out0(G->g, op);
    int cp = G->c.cp, tp = G->c.tp;
    if (!o)
        return -1;
    if (tdim >= 0 && tdim == G->seqdim[id])
        return o->shape[tdim] % ((int64_t)tp * cp) == 0 ? tdim : -1;
    unsigned mask = ss_op_split_mask(G->g, op);
    for (int k = 0; k < o->ndim; k++)
        if (k != tdim && k != sdim && o->kind[k] == SS_DIM_ATTRIBUTE && (mask & (1u << k)))
            return o->shape[k] % cp == 0 ? k : -1;
    return -1;
}

/* Mark the expert tensors: the outputs of moe_dispatch's consumers and of
 * their consumers, up to (not including) moe_combine. Checks that ep
 * divides every MoE layer's experts and that the model has some. */
static ss_status mark_experts(gen *G, ss_diag *d)
{
    const ss_graph *g = G->g;
    int moe = 0;
    for (int id = 0; id < G->n_ops; id++) {
        const ss_op *op = ss_graph_op(g, id);
        int ex = 0;
        for (int i = 0; i < op->n_in && op->type != SS_OP_MOE_COMBINE; i++) {
            const ss_tensor *t = ss_graph_tensor(g, op->inputs[i]);
            const ss_op *p = t->producer >= 0 ? ss_graph_op(g, t->producer) : NULL;
            ex |= G->expert[op->inputs[i]] || (p && p->type == SS_OP_MOE_DISPATCH);
        }
        for (int o = 0; o < op->n_out; o++)
            G->expert[op->outputs[o]] = (char)ex;
        if (op->type == SS_OP_MOE_DISPATCH) {
            int64_t X = out0(g, op)->shape[0];
            if (X % G->c.ep)
                return ss_diag_set(d, SS_ERR_INVALID,
                                   "megatron: ep=%d does not divide the %lld experts of \"%s\"",
                                   G->c.ep, (long long)X, op->name);
            moe = 1;
        }
    }
    if (!moe)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "megatron: ep=%d but model \"%s\" has no mixture-of-experts layer "
                           "(moe_dispatch)",
                           G->c.ep, ss_graph_name(g));
    return SS_OK;
}

/* Build op's final config into c (devices into devs, room for ntiles). */
static int megatron_config(gen *G, int id, ss_pconfig *c, int **devs, int *cap)
{
    const ss_op *op = ss_graph_op(G->g, id);
    const ss_tensor *o = out0(G->g, op);
    int tp = G->c.tp, dp = G->c.dp, mb = G->c.mb;
    int nd = o ? o->ndim : 0;
    memset(c, 0, sizeof *c);
    c->ndim = nd;
    for (int k = 0; k < SS_MAX_DIMS; k++)
        c->deg[k] = 1;
    c->red = 1;
    c->rep = 1;
    int sdim = sample_dim(G->g, op);
    if (sdim >= 0 && o->shape[sdim] % (dp * mb) != 0)
        sdim = -1;
    if (sdim >= 0)
        c->deg[sdim] = dp * mb;
    int tdim = G->tpdim[id] >= 0 ? G->tpdim[id] : G->seqdim[id];
    if (tdim >= 0 && tdim == sdim) {
        c->deg[sdim] = 1;
        sdim = -1;
    }
    if (tdim >= 0)
        c->deg[tdim] = tp;
    if (G->tpred[id])
        c->red = tp;
    int rep_tp = tp > 1 && tdim < 0 && !G->tpred[id] ? tp : 1;
    int ep = G->c.ep > 1 && o && G->expert[op->outputs[0]] && sdim == 1 && tdim != 0 ? G->c.ep
                                                                                    : 1;
    if (ep > 1)
        c->deg[0] *= ep;
    /* context parallelism: the sequence dim (the tp-split one under sp, then
     * cp-major: chunk i = cp rank * tp + tp rank) split cp ways, or cp
     * replicas when the op has none */
    int cp = G->c.cp > 1 ? G->c.cp : 1, cdim = cp > 1 ? context_dim(G, id, tdim, sdim) : -1;
    if (cdim >= 0)
        c->deg[cdim] *= cp;
    c->rep = rep_tp * (cp > 1 && cdim < 0 ? cp : 1);
    c->ntiles = c->red * c->rep;
    for (int k = 0; k < nd; k++)
        c->ntiles *= c->deg[k];
    c->stage = G->stage[id];
    if (c->ntiles > *cap) {
        int *nd2 = ss_realloc(*devs, (size_t)c->ntiles * sizeof *nd2);
        if (!nd2)
            return -1;
        *devs = nd2;
        *cap = c->ntiles;
    }
    int key[SS_MAX_DIMS + 10] = {1, c->stage % G->c.pp, nd, c->red, c->rep, rep_tp, tdim, cdim,
                                  sdim, ep};
    for (int k = 0; k < nd; k++)
        key[10 + k] = c->deg[k];
    c->devices = *devs;
    if (!memcmp(key, G->last, sizeof key))
        return 0;
    memcpy(G->last, key, sizeof key);
    /* tile t = (((i0 * deg1 + i1) ...) * rep + q) * red + r, walked as an
     * odometer (r fastest); its tp rank is its index along the tp dim, else
     * its replica, else its reduction slice; its dp rank its sample index's
     * micro-batch group */
    int idx[SS_MAX_DIMS] = {0}, q = 0, r = 0, base = c->stage % G->c.pp * tp * cp * dp;
    for (int t = 0; t < c->ntiles; t++) {
        int tpr = tdim >= 0 ? idx[tdim] % tp : rep_tp > 1 ? q % rep_tp : c->red > 1 ? r : 0;
        int cpr = cdim >= 0 ? (cdim == tdim ? idx[cdim] / tp : idx[cdim]) : q / rep_tp;
        int dpr = sdim >= 0 ? idx[sdim] / mb : 0;
        if (ep > 1) /* expert block idx[0] of rank dpr's slots: on its group's rank */
            dpr = dpr - dpr % ep + idx[0] % ep;
        (*devs)[t] = base + (dpr * cp + cpr) * tp + tpr;
        if (++r < c->red)
            continue;
        r = 0;
        if (++q < c->rep)
            continue;
        q = 0;
        for (int k = nd - 1; k >= 0 && ++idx[k] == c->deg[k]; k--)
            idx[k] = 0;
    }
    c->devices = *devs;
    return 0;
}

ss_recompute ss_megatron_rank_recompute(const ss_megatron_config *c, int r)
{
    if (r < 0 || r >= SS_PLAN_MAX_RECOMPUTE_STAGES || !c->recompute_rank[r])
        return c->recompute;
    return (ss_recompute)(c->recompute_rank[r] - 1);
}

ss_status ss_megatron_set_recompute(ss_megatron_config *c, const ss_recompute *modes, int n,
                                    ss_diag *d)
{
    int pp = c->pp < 1 ? 1 : c->pp;
    if ((n != 1 && n != pp) || n > SS_PLAN_MAX_RECOMPUTE_STAGES)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "megatron: %d recompute modes, expected 1 or one per pipeline stage "
                           "(pp = %d, at most %d)",
                           n, pp, SS_PLAN_MAX_RECOMPUTE_STAGES);
    int same = 1;
    for (int r = 0; r < n; r++) {
        if ((unsigned)modes[r] > SS_RECOMPUTE_SELECTIVE)
            return ss_diag_set(d, SS_ERR_INVALID, "megatron: unknown recompute mode %d (stage %d)",
                               (int)modes[r], r);
        same &= modes[r] == modes[0];
    }
    memset(c->recompute_rank, 0, sizeof c->recompute_rank);
    c->recompute = modes[0];
    for (int r = 0; r < n && !same; r++)
        c->recompute_rank[r] = (unsigned char)(1 + modes[r]);
    return SS_OK;
}

/* Whether c's per-rank recompute is in the form ss_megatron_set_recompute
 * keeps (none, or one valid mode for each of the pp ranks, rank 0's =
 * recompute, not all equal) and its chunks fit the settings' array. */
static int rank_recompute_ok(const ss_megatron_config *c, int vp)
{
    if (!c->recompute_rank[0]) {
        for (int r = 1; r < SS_PLAN_MAX_RECOMPUTE_STAGES; r++)
            if (c->recompute_rank[r])
                return 0;
        return 1;
    }
    if ((int64_t)c->pp * vp > SS_PLAN_MAX_RECOMPUTE_STAGES ||
        c->recompute_rank[0] != 1 + c->recompute)
        return 0;
    int same = 1;
    for (int r = 0; r < SS_PLAN_MAX_RECOMPUTE_STAGES; r++) {
        if (r < c->pp ? c->recompute_rank[r] < 1 || c->recompute_rank[r] > 1 + SS_RECOMPUTE_SELECTIVE
                      : c->recompute_rank[r] != 0)
            return 0;
        same &= r >= c->pp || c->recompute_rank[r] == c->recompute_rank[0];
    }
    return !same;
}

void ss_megatron_settings(const ss_megatron_config *c, ss_plan_settings *s)
{
    s->recompute = c->recompute;
    memset(s->recompute_stage, 0, sizeof s->recompute_stage);
    /* past the limit of chunks ss_plan_megatron refuses per-rank modes */
    if (c->recompute_rank[0] && c->pp > 0 && s->stages <= SS_PLAN_MAX_RECOMPUTE_STAGES)
        for (int k = 0; k < s->stages; k++) /* chunk k runs on rank k mod pp */
            s->recompute_stage[k] = (unsigned char)(1 + ss_megatron_rank_recompute(c, k % c->pp));
    s->distopt = c->distopt;
    s->sync = c->sync;
    /* overlap: Megatron's DDP buckets (40M parameters of fp16 gradients);
     * bulk: Megatron's local DDP, one all-reduce of the whole contiguous
     * gradient buffer after the backward (one bucket) */
    s->bucket_bytes = c->sync == SS_SYNC_BULK ? MEGATRON_BULK_BYTES
                      : c->bucket_bytes > 0   ? c->bucket_bytes
                                              : MEGATRON_BUCKET_BYTES;
}

ss_status ss_plan_megatron(const ss_graph *g, const ss_machine *m, const ss_megatron_config *cfg,
                           ss_plan **out, ss_diag *d)
{
    if (!g || !cfg || !out)
        return ss_diag_set(d, SS_ERR_INVALID, "megatron: missing argument");
    ss_megatron_config c = *cfg;
    if (c.tp < 1 || c.pp < 1 || c.dp < 1 || c.mb < 0 || c.mbs < 0)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "megatron: tp, pp and dp must be at least 1 and mb, mbs at least 0 "
                           "(got tp=%d pp=%d dp=%d mb=%d mbs=%d)",
                           c.tp, c.pp, c.dp, c.mb, c.mbs);
    if ((unsigned)c.recompute > SS_RECOMPUTE_SELECTIVE || (unsigned)c.sync > SS_SYNC_BULK)
        return ss_diag_set(d, SS_ERR_INVALID, "megatron: unknown recompute or sync mode");
    if (!rank_recompute_ok(&c, c.vp > 1 ? c.vp : 1))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "megatron: recompute per stage: expected a mode for each of the pp=%d "
                           "pipeline stages (chunks pp*vp at most %d)",
                           c.pp, SS_PLAN_MAX_RECOMPUTE_STAGES);
    if (c.vp < 0 || c.vp > (1 << 16))
        return ss_diag_set(d, SS_ERR_INVALID, "megatron: vp must be at least 1 (got %d)", c.vp);
    if (c.vp == 0)
        c.vp = 1;
    if (c.first < 0 || c.last < 0 || c.bucket_bytes < 0 || !(c.bucket_bytes < 1e18))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "megatron: first, last and bucket must not be negative (got first=%d "
                           "last=%d bucket=%g bytes)",
                           c.first, c.last, c.bucket_bytes);
    if (c.distopt != 0 && c.distopt != 1 && c.distopt != SS_ZERO3)
        return ss_diag_set(d, SS_ERR_INVALID, "megatron: distopt must be 0, 1 or 3 (got %d)",
                           c.distopt);
    if (c.distopt == SS_ZERO3 && c.dp * (c.cp > 1 ? c.cp : 1) < 2)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "megatron: zero=3 needs dp > 1 (ZeRO-3 shards the weights over the "
                           "data-parallel replicas; got dp=%d)",
                           c.dp);
    if (c.vp > 1 && c.pp < 2)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "megatron: vp=%d needs pp > 1 (interleaving cuts each pipeline rank's "
                           "layers into vp chunks; got pp=%d)",
                           c.vp, c.pp);
    if (c.mbs > 0) {
        int64_t batch = ss_graph_batch(g), per = (int64_t)c.dp * c.mbs;
        if (batch <= 0 || batch % per != 0)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "megatron: the global batch %lld is not divisible by dp*mbs = "
                               "%d*%d",
                               (long long)batch, c.dp, c.mbs);
        if (batch / per > (1 << 20))
            return ss_diag_set(d, SS_ERR_INVALID, "megatron: batch / (dp*mbs) is absurdly large");
        int nmb = (int)(batch / per);
        if (c.mb > 0 && c.mb != nmb)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "megatron: mb=%d micro-batches and micro-batch size mbs=%d "
                               "disagree (batch %lld / (dp=%d * mbs=%d) = %d micro-batches)",
                               c.mb, c.mbs, (long long)batch, c.dp, c.mbs, nmb);
        c.mb = nmb;
    }
    if (c.mb == 0)
        c.mb = c.pp > 1 ? 4 * c.pp : 1;
    if (c.cp < 0 || c.cp > (1 << 16))
        return ss_diag_set(d, SS_ERR_INVALID, "megatron: cp must be at least 1 (got %d)", c.cp);
    if (c.cp == 0)
        c.cp = 1;
    if (c.ep < 0 || c.ep > (1 << 16))
        return ss_diag_set(d, SS_ERR_INVALID, "megatron: ep must be at least 1 (got %d)", c.ep);
    if (c.ep == 0)
        c.ep = 1;
    if (c.ep > 1 && (c.dp % c.ep || c.cp > 1))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "megatron: ep=%d must divide dp=%d (expert groups of consecutive "
                           "data-parallel ranks) and needs cp=1 (got cp=%d)",
                           c.ep, c.dp, c.cp);
    if ((int64_t)c.tp * c.pp * c.dp * c.cp > (1 << 20) || (int64_t)c.dp * c.mb > (1 << 20))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "megatron: tp*pp*dp*cp or dp*mb is absurdly large");
    ss_status st = check_devices(m, c.tp * c.pp * c.dp * c.cp, "megatron", d);
    if (st)
        return st;
    if (c.vp > 1 && c.mb % c.pp != 0)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "megatron: vp=%d: %d micro-batches is not a multiple of pp=%d (the "
                           "interleaved schedule runs micro-batches in groups of pp, as "
                           "Megatron requires)",
                           c.vp, c.mb, c.pp);
    int64_t batch = ss_graph_batch(g);
    if (batch > 0 && batch % ((int64_t)c.dp * c.mb) != 0)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "megatron: the global batch %lld is not divisible by dp*mb = %d*%d",
                           (long long)batch, c.dp, c.mb);
    gen G = {0};
    G.g = g;
    G.c = c;
    G.sp = c.sp;
    G.n_ops = ss_graph_n_ops(g);
    int nt = ss_graph_n_tensors(g);
    size_t no = (size_t)(G.n_ops + 1), ntn = (size_t)(nt + 1);
    G.stage = ss_calloc(no, sizeof *G.stage);
    G.tpdim = ss_calloc(no, sizeof *G.tpdim);
    G.tpred = ss_calloc(no, sizeof *G.tpred);
    G.seqdim = ss_calloc(no, sizeof *G.seqdim);
    G.state = ss_calloc(ntn, sizeof *G.state);
    G.origin = ss_calloc(ntn, sizeof *G.origin);
    G.nocol = ss_calloc(no, sizeof *G.nocol);
    G.reg = ss_calloc(ntn, sizeof *G.reg);
    G.expert = ss_calloc(ntn, sizeof *G.expert);
    ss_plan *p = ss_plan_new(g, m);
    int *devs = NULL, cap = 0;
    if (!G.stage || !G.tpdim || !G.tpred || !G.seqdim || !G.state || !G.origin || !G.nocol || !G.reg ||
        !G.expert || !p) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((st = assign_stages(&G, d)) || (st = assign_tp(&G, d)) ||
        (c.ep > 1 && (st = mark_experts(&G, d))))
        goto out;
    p->settings.stages = c.pp * c.vp;
    p->settings.virtual_stages = c.vp;
    p->settings.microbatches = c.mb;
    p->settings.schedule = SS_PIPE_1F1B;
    p->settings.queue = c.pp > 1 ? SS_QUEUE_BACKWARD_FIRST : SS_QUEUE_FIFO;
    ss_megatron_settings(&c, &p->settings);
    for (int i = 0; i < G.n_ops && !st; i++) {
        ss_pconfig pc;
        if (megatron_config(&G, i, &pc, &devs, &cap)) {
            st = ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
            break;
        }
        st = ss_plan_set_config(p, i, &pc, d);
    }
    if (!st)
        st = ss_plan_validate_with(p, g, m, "megatron", d);
out:
    ss_free(G.stage);
    ss_free(G.tpdim);
    ss_free(G.tpred);
    ss_free(G.seqdim);
    ss_free(G.state);
    ss_free(G.origin);
    ss_free(G.nocol);
    ss_free(G.reg);
    ss_free(G.expert);
    ss_free(devs);
    if (st) {
        ss_plan_free(p);
        return st;
    }
    *out = p;
    return SS_OK;
}

/* ---------------------------------------------------------------- specs */

static ss_status parse_int(const char *spec, const char *key, const char *val, int lo, int hi,
                           int *out, ss_diag *d)
{
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end || v < lo || v > hi)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "plan spec \"%s\": bad value \"%s\" for %s (expected an integer "
                           "from %d to %d)",
                           spec, val, key, lo, hi);
    *out = (int)v;
    return SS_OK;
}

static ss_status parse_flag(const char *spec, const char *key, const char *val, int *out,
                            ss_diag *d)
{
    return parse_int(spec, key, val, 0, 1, out, d);
}

/* recompute=MODE[*COUNT][/MODE[*COUNT]...]: the modes, in order, into
 * rc[0 .. *n) (at most SS_PLAN_MAX_RECOMPUTE_STAGES). */
static ss_status parse_recompute(const char *spec, const char *val, ss_recompute *rc, int *n,
                                 ss_diag *d)
{
    static const char *const names[] = {"none", "full", "selective"}; /* ss_recompute */
    *n = 0;
    for (const char *p = val;;) {
        size_t len = strcspn(p, "/*");
        int mode = -1, count = 1;
        for (int i = 0; i < 3; i++)
            if (len == strlen(names[i]) && !strncmp(p, names[i], len))
                mode = i;
        if (mode < 0)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "plan spec \"%s\": bad value \"%s\" for recompute (expected "
                               "none, selective or full, or one per pipeline stage as "
                               "MODE[*COUNT]/MODE[*COUNT]...)",
                               spec, val);
        p += len;
        if (*p == '*') {
            char *end;
            errno = 0;
            long v = strtol(p + 1, &end, 10);
            if (errno || end == p + 1 || v < 1 || v > SS_PLAN_MAX_RECOMPUTE_STAGES ||
                (*end && *end != '/'))
                return ss_diag_set(d, SS_ERR_INVALID,
                                   "plan spec \"%s\": recompute \"%s\": bad count after '*' "
                                   "(expected 1 to %d)",
                                   spec, val, SS_PLAN_MAX_RECOMPUTE_STAGES);
            count = (int)v;
            p = end;
        }
        if (*n + count > SS_PLAN_MAX_RECOMPUTE_STAGES)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "plan spec \"%s\": recompute: more than %d modes", spec,
                               SS_PLAN_MAX_RECOMPUTE_STAGES);
        while (count-- > 0)
            rc[(*n)++] = (ss_recompute)mode;
        if (!*p)
            return SS_OK;
        p++; /* '/' */
    }
}

static ss_status parse_megatron(const char *spec, const char *params, const ss_machine *m,
                                ss_megatron_config *c, ss_diag *d)
{
    memset(c, 0, sizeof *c);
    c->tp = c->pp = 1;
    int dp_given = 0, n_rc = 0;
    const char *zero_key = NULL; /* set once distopt, zero or fsdp was given */
    ss_recompute rc[SS_PLAN_MAX_RECOMPUTE_STAGES];
    char buf[4096];
    if (strlen(params) >= sizeof buf)
        return ss_diag_set(d, SS_ERR_INVALID, "plan spec \"%s\": too long", spec);
    snprintf(buf, sizeof buf, "%s", params);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "plan spec \"%s\": expected key=value, got \"%s\"", spec, kv);
        *eq = '\0';
        const char *key = kv, *val = eq + 1;
        ss_status st = SS_OK;
        int tmp = 0;
        if (!strcmp(key, "tp"))
            st = parse_int(spec, key, val, 1, 1 << 16, &c->tp, d);
        else if (!strcmp(key, "pp"))
            st = parse_int(spec, key, val, 1, 1 << 16, &c->pp, d);
        else if (!strcmp(key, "dp")) {
            st = parse_int(spec, key, val, 1, 1 << 20, &c->dp, d);
            dp_given = 1;
        } else if (!strcmp(key, "mb"))
            st = parse_int(spec, key, val, 1, 1 << 20, &c->mb, d);
        else if (!strcmp(key, "mbs"))
            st = parse_int(spec, key, val, 1, 1 << 20, &c->mbs, d);
        else if (!strcmp(key, "vp"))
            st = parse_int(spec, key, val, 1, 1 << 16, &c->vp, d);
        else if (!strcmp(key, "cp"))
            st = parse_int(spec, key, val, 1, 1 << 16, &c->cp, d);
        else if (!strcmp(key, "ep"))
            st = parse_int(spec, key, val, 1, 1 << 16, &c->ep, d);
        else if (!strcmp(key, "sp")) {
            if (!(st = parse_flag(spec, key, val, &tmp, d)))
                c->sp = tmp;
        } else if (!strcmp(key, "distopt") || !strcmp(key, "zero") || !strcmp(key, "fsdp")) {
            /* the ZeRO stage: distopt=0|1|3, zero=0|1|3, fsdp=0|1 (1: stage 3) */
            int fsdp = !strcmp(key, "fsdp");
            st = parse_int(spec, key, val, 0, fsdp ? 1 : SS_ZERO3, &tmp, d);
            if (!st && tmp == 2)
                st = ss_diag_set(d, SS_ERR_INVALID,
                                 "plan spec \"%s\": bad value \"2\" for %s (expected 0, 1 or 3: "
                                 "ZeRO-2 is not modelled)",
                                 spec, key);
            if (!st && fsdp)
                tmp = tmp ? SS_ZERO3 : 0;
            if (!st && zero_key && tmp != c->distopt)
                st = ss_diag_set(d, SS_ERR_INVALID,
                                 "plan spec \"%s\": %s=%s contradicts the earlier %s key (one "
                                 "ZeRO stage per plan)",
                                 spec, key, val, zero_key);
            if (!st) {
                c->distopt = tmp;
                zero_key = key;
            }
        } else if (!strcmp(key, "sync")) {
            if (!strcmp(val, "overlap"))
                c->sync = SS_SYNC_WAIT_FREE;
            else if (!strcmp(val, "bulk"))
                c->sync = SS_SYNC_BULK;
            else
                st = ss_diag_set(d, SS_ERR_INVALID,
                                 "plan spec \"%s\": bad value \"%s\" for sync (expected "
                                 "overlap or bulk)",
                                 spec, val);
        } else if (!strcmp(key, "recompute")) {
            st = parse_recompute(spec, val, rc, &n_rc, d);
        } else if (!strcmp(key, "first"))
            st = parse_int(spec, key, val, 1, 1 << 16, &c->first, d);
        else if (!strcmp(key, "last"))
            st = parse_int(spec, key, val, 1, 1 << 16, &c->last, d);
        else if (!strcmp(key, "bucket")) {
            if (!(st = parse_int(spec, key, val, 1, 1 << 20, &tmp, d)))
                c->bucket_bytes = tmp * 1e6;
        } else
            st = ss_diag_set(d, SS_ERR_INVALID,
                             "plan spec \"%s\": unknown key \"%s\" (expected tp, pp, dp, cp, ep, "
                             "mbs, mb, vp, recompute, sp, distopt, zero, fsdp, sync, first, last, "
                             "bucket)",
                             spec, key);
        if (st)
            return st;
    }
    if (n_rc > 1 && n_rc != c->pp)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "plan spec \"%s\": recompute has %d modes, expected 1 or one per "
                           "pipeline stage (pp=%d)",
                           spec, n_rc, c->pp);
    ss_status st = n_rc ? ss_megatron_set_recompute(c, rc, n_rc, d) : SS_OK;
    if (st)
        return st;
    if (!dp_given) {
        int n = m ? ss_machine_n_devices(m) : 1;
        int tpp = c->tp * c->pp * (c->cp > 1 ? c->cp : 1);
        if (n % tpp != 0 || n < tpp)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "plan spec \"%s\": dp not given and tp*pp*cp = %d does not "
                               "divide the %d devices",
                               spec, tpp, n);
        c->dp = n / tpp;
    }
    return SS_OK;
}

int ss_megatron_spec(const ss_megatron_config *c, int64_t batch, char *buf, size_t cap)
{
    static const char *const rc[] = {"none", "full", "selective"};
    int n = snprintf(buf, cap, "megatron:tp=%d,pp=%d,dp=%d", c->tp, c->pp, c->dp);
#define SPEC_ADD(...)                                                                         \
    do {                                                                                      \
        size_t at = (size_t)n < cap ? (size_t)n : cap;                                        \
        n += snprintf(buf + at, cap - at, __VA_ARGS__);                                         \
    } while (0)
    if (c->cp > 1)
        SPEC_ADD(",cp=%d", c->cp);
    if (c->ep > 1)
        SPEC_ADD(",ep=%d", c->ep);
    if (c->mbs > 0)
        SPEC_ADD(",mbs=%d", c->mbs);
    else if (batch > 0 && c->mb > 0 && batch % ((int64_t)c->dp * c->mb) == 0)
        SPEC_ADD(",mbs=%lld", (long long)(batch / ((int64_t)c->dp * c->mb)));
    else if (c->mb > 0)
        SPEC_ADD(",mb=%d", c->mb);
    if (c->vp > 1)
        SPEC_ADD(",vp=%d", c->vp);
    if (c->recompute_rank[0]) { /* per stage: runs as MODE*COUNT */
        SPEC_ADD(",recompute=");
        for (int r = 0, run; r < c->pp; r += run) {
            ss_recompute mr = ss_megatron_rank_recompute(c, r);
            for (run = 1; r + run < c->pp && ss_megatron_rank_recompute(c, r + run) == mr;)
                run++;
            SPEC_ADD(run > 1 ? "%s%s*%d" : "%s%s", r ? "/" : "", rc[mr], run);
        }
    } else if ((unsigned)c->recompute <= SS_RECOMPUTE_SELECTIVE &&
               c->recompute != SS_RECOMPUTE_NONE)
        SPEC_ADD(",recompute=%s", rc[c->recompute]);
    if (c->sp)
        SPEC_ADD(",sp=1");
    if (c->distopt)
        SPEC_ADD(c->distopt == SS_ZERO3 ? ",zero=3" : ",distopt=1");
    if (c->sync == SS_SYNC_BULK)
        SPEC_ADD(",sync=bulk");
    if (c->first)
        SPEC_ADD(",first=%d", c->first);
    if (c->last)
        SPEC_ADD(",last=%d", c->last);
    if (c->sync != SS_SYNC_BULK && c->bucket_bytes > 0 && c->bucket_bytes != MEGATRON_BUCKET_BYTES)
        SPEC_ADD(",bucket=%.0f", c->bucket_bytes / 1e6);
#undef SPEC_ADD
    return n;
}

int ss_megatron_args(const ss_megatron_config *c, int layers, int64_t batch, char *buf,
                     size_t cap)
{
    int64_t mbs = c->mbs > 0 ? c->mbs
                  : c->mb > 0 && batch > 0 ? batch / ((int64_t)c->dp * c->mb) : 1;
    int n = snprintf(buf, cap,
                     "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d "
                     "--micro-batch-size %lld --global-batch-size %lld",
                     c->tp, c->pp, (long long)mbs, (long long)batch);
#define ARG_ADD(...)                                                                          \
    do {                                                                                      \
        size_t at = (size_t)n < cap ? (size_t)n : cap;                                        \
        n += snprintf(buf + at, cap - at, __VA_ARGS__);                                         \
    } while (0)
    if (c->cp > 1)
        ARG_ADD(" --context-parallel-size %d", c->cp);
    if (c->ep > 1)
        ARG_ADD(" --expert-model-parallel-size %d", c->ep);
    if (c->vp > 1 && (c->first || c->last)) /* uneven ranks: chunks differ in size */
        ARG_ADD(" --virtual-pipeline-model-parallel-size %d", c->vp);
    else if (c->vp > 1 && layers > 0)
        ARG_ADD(" --num-layers-per-virtual-pipeline-stage %d", layers / (c->pp * c->vp));
    if (c->recompute_rank[0])
        ; /* per stage: said at the end */
    else if (c->recompute == SS_RECOMPUTE_SELECTIVE)
        ARG_ADD(" --recompute-granularity selective");
    else if (c->recompute == SS_RECOMPUTE_FULL)
        ARG_ADD(" --recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
    if (c->sp)
        ARG_ADD(" --sequence-parallel");
    if (c->distopt == SS_ZERO3) /* Megatron-FSDP, the ZeRO-3 sharding strategy */
        ARG_ADD(" --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params"
                " --use-distributed-optimizer --no-gradient-accumulation-fusion"
                " --ckpt-format fsdp_dtensor");
    else if (c->distopt)
        ARG_ADD(" --use-distributed-optimizer");
    if (c->sync == SS_SYNC_WAIT_FREE) {
        ARG_ADD(" --overlap-grad-reduce");
        if (c->bucket_bytes > 0 && c->bucket_bytes != MEGATRON_BUCKET_BYTES)
            ARG_ADD(" --ddp-bucket-size %.0f", c->bucket_bytes / 2); /* fp16 elements */
    }
    if (c->first)
        ARG_ADD(" --decoder-first-pipeline-num-layers %d", c->first);
    if (c->last)
        ARG_ADD(" --decoder-last-pipeline-num-layers %d", c->last);
    if (c->recompute_rank[0])
        ARG_ADD(" (not expressible in Megatron-LM: this plan's recompute differs per pipeline "
                "stage, and --recompute-granularity sets one mode for every stage)");
#undef ARG_ADD
    return n;
}

int ss_plan_spec_tp(const char *spec)
{
    if (!spec || (strncmp(spec, "megatron:", 9) && strchr(spec, '/')))
        return 0;
    if (!strcmp(spec, "data-parallel") || !strcmp(spec, "megatron"))
        return 1;
    if (strncmp(spec, "megatron:", 9))
        return 0;
    for (const char *s = spec + 9; *s;) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len > 3 && !strncmp(s, "tp=", 3)) {
            char val[16];
            if (len - 3 >= sizeof val)
                return 0;
            memcpy(val, s + 3, len - 3);
            val[len - 3] = '\0';
            char *stop;
            errno = 0;
            long v = strtol(val, &stop, 10);
            return errno || *stop || v < 1 || v > (1 << 16) ? 0 : (int)v;
        }
        s = end ? end + 1 : s + len;
    }
    return 1;
}

ss_status ss_plan_from_spec(const char *spec, const ss_graph *g, const ss_machine *m,
                            ss_plan **out, ss_diag *d)
{
    if (!spec || !*spec)
        return ss_diag_set(d, SS_ERR_INVALID, "plan spec: empty");
    size_t len = strlen(spec);
    if (strncmp(spec, "megatron:", 9) &&
        (strchr(spec, '/') || (len > 5 && !strcmp(spec + len - 5, ".json"))))
        return ss_plan_load(spec, g, m, out, d);
    if (!strcmp(spec, "data-parallel"))
        return ss_plan_data_parallel(g, m, 0, out, d);
    if (!strncmp(spec, "megatron", 8) && (spec[8] == ':' || spec[8] == '\0')) {
        ss_megatron_config c;
        ss_status st = parse_megatron(spec, spec[8] ? spec + 9 : "", m, &c, d);
        if (st)
            return st;
        return ss_plan_megatron(g, m, &c, out, d);
    }
    return ss_diag_set(d, SS_ERR_INVALID,
                       "plan spec \"%s\": unknown (expected data-parallel, "
                       "megatron:tp=T,pp=P,dp=D[,cp=C][,ep=E][,mbs=S|mb=M][,vp=V]"
                       "[,recompute=none|selective|full[/...]]"
                       "[,sp=0|1][,distopt=0|1|3][,sync=overlap|bulk], or a plan file path)",
                       spec);
}
