/*
 * hier_sub.c — the hierarchical evaluator's sub-problems (hier_impl.h): a
 * pipeline stage's ops for one micro-batch of every data-parallel rank,
 * with k of its n repeated blocks, cut out of the plan as a sub-graph and
 * simulated at operator level with the task-graph builder and engine
 * (reduced to one data-parallel block by symmetry where it applies), the
 * figures of its first device read off the run, memoized by content, and
 * extrapolated to n blocks where the per-block increments are periodic.
 * Invariant: a sub-problem's figures are a pure function of its key's
 * content, so a memo hit gives what a simulation would.
 */
#include "simulator/hier_impl.h"

#include "simulator/build.h"
#include "simulator/report.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

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

/* The settings stage sub-problems with sync mode `bulk` run with: p's,
 * except that a bulk sub-problem of a plan with overlapped sync runs as
 * bulk with one bucket (BULK_BUCKET), as its bulk twin does (Megatron's
 * bulk plans: core/plan_gen.c). Under bulk sync the bucket size shapes
 * only the collectives after the barrier that follows every backward; the
 * figures of such a sub-problem that a plan with overlapped sync keeps
 * (ss_hier_stage_figs: spans, compute, memory, when the first joint
 * collective is ready) all come before it, so they are the same for any
 * bucket size, and its twin's memoized sub-problem serves it. */
#define BULK_BUCKET 1e15
static void sub_settings(const ss_plan *p, int bulk, ss_plan_settings *out)
{
    *out = *ss_plan_settings_get(p);
    if (bulk && out->sync != SS_SYNC_BULK) {
        out->sync = SS_SYNC_BULK;
        out->bucket_bytes = BULK_BUCKET;
    }
}

/* Key of stage s's sub-problem with kk blocks, its settings set. */
static uint64_t sub_key(const ss_hier *h, const ss_plan_settings *set, int s, int kk)
{
    const stageinfo *S = &h->stg[s];
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
    k = mix(k, (uint64_t)ss_plan_stage_recompute(set, s));
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

static int cmp_span(const void *pa, const void *pb)
{
    const double *a = pa, *b = pb;
    return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* ZeRO-3's figures of a sub-problem (figs: lf, lb, lr, lpost, fpre): the
 * union of d0's data-parallel collective intervals (every one repeats per
 * micro-batch: build_weights.c, zero3_gathers and close_bucket; on
 * full-duplex links two can run at once) cut at the forward's and the
 * backward's ends; the forward's wait for its first gathers (from t0, its
 * input's arrival, to its first kernel at d0). The collectives' time at d0
 * is per micro-batch. */
static ss_status zero3_figs(ss_hier *h, const ss_taskgraph *tg, const ss_engine_result *er,
                            int ns, int s, int d0, double t0, double fwd_end, double bwd_end,
                            double last, figs *f, ss_diag *d)
{
    double *iv = ss_malloc((size_t)(2 * tg->n_tasks + 2) * sizeof *iv), lend = bwd_end;
    double first = HUGE_VAL;
    int n = 0;
    if (!iv)
        return ss_diag_set(d, SS_ERR_NOMEM, "hierarchical evaluator: out of memory");
    for (int t = 0; t < tg->n_tasks; t++) {
        if (tg->kind[t] == SS_TASK_FWD && tg->dur[t] > 0 && !ext_of(h, tg, t, ns, s) &&
            ss_taskgraph_res(tg, t)[0] == d0 && er->start[t] < first)
            first = er->start[t];
        if (tg->kind[t] != SS_TASK_COLLECTIVE || ext_of(h, tg, t, ns, s) ||
            (tg->aux[t] != SS_BUILD_COLL_PARAM && tg->aux[t] != SS_BUILD_COLL_GRAD) ||
            !uses_dev(tg, t, d0) || !(er->end[t] > er->start[t]))
            continue;
        iv[2 * n] = er->start[t];
        iv[2 * n + 1] = er->end[t];
        n++;
    }
    qsort(iv, (size_t)n, 2 * sizeof *iv, cmp_span);
    const double cut[3] = {fwd_end, bwd_end, HUGE_VAL};
    double *part[3] = {&f->lf, &f->lb, &f->lr};
    for (int i = 0; i < n;) {
        double a = iv[2 * i], b = iv[2 * i + 1];
        for (i++; i < n && iv[2 * i] <= b; i++)
            b = iv[2 * i + 1] > b ? iv[2 * i + 1] : b;
        for (int k = 0; k < 3; k++) {
            double x = fmax(a, k ? cut[k - 1] : -HUGE_VAL), y = fmin(b, cut[k]);
            if (y > x)
                *part[k] += y - x;
        }
        lend = b > lend ? b : lend;
    }
    ss_free(iv);
    f->lpost = last - lend;
    f->fpre = first < HUGE_VAL && first > t0 ? first - t0 : 0;
    f->comm_mb += f->comm_once;
    f->comm_once = 0;
    return SS_OK;
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
    ss_plan_settings sset;
    sub_settings(p, bulk, &sset);
    const ss_plan_settings *set = &sset;
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
    /* the stage's own recompute mode for all its ops; a weight's readers in
     * other stages (peers) run under it too: their mode changes only their
     * own devices' figures and when their gradient is ready, which the
     * joint synchronisation's rendezvous takes from the pipeline */
    ss->recompute = ss_plan_stage_recompute(set, s);
    memset(ss->recompute_stage, 0, sizeof ss->recompute_stage);
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
    double in0 = HUGE_VAL, in1 = 0; /* the span of the stage's incoming transfers */
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
                if (c >= 0) {
                    in0 = fmin(in0, er->start[t]);
                    in1 = fmax(in1, er->end[t]);
                }
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
    /* the stage receives its input in several pieces (a producer split
     * where its consumer is not): the send lasts from the first piece's
     * start to the last piece's end at any of its devices, not only d0
     * (d0's pieces need not arrive with its neighbours', and its forward
     * waits for theirs through the tensor-parallel collectives) */
    if (in1 - in0 > f->send)
        f->send = in1 - in0;
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
        if ((kind == SS_TASK_FWD || kind == SS_TASK_BWD) && er->start[t] >= fwd_end) {
            f->bop1 += tg->dur[t];
            f->bop2 += tg->dur[t] * tg->dur[t];
        }
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
    if (set->distopt == SS_ZERO3 && (st = zero3_figs(h, tg, er, ns, s, d0, t0, fwd_end, bwd_end,
                                                     last, f, d)) != SS_OK)
        goto out;
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
        int niv = ss_memory_n_intervals(h->mm), z3 = set->distopt == SS_ZERO3;
        double bwd0 = HUGE_VAL; /* ZeRO-3: the first backward's start at d0 */
        for (int t = 0; z3 && t < tg->n_tasks; t++)
            if (tg->kind[t] == SS_TASK_BWD && !ext_of(h, tg, t, ns, s) &&
                ss_taskgraph_res(tg, t)[0] == d0 && er->start[t] < bwd0)
                bwd0 = er->start[t];
        for (int i = 0; i < niv; i++) {
            const ss_mem_interval *iv = ss_memory_interval(h->mm, i);
            if (iv->device != d0 || iv->kind == SS_MEM_WORKSPACE)
                continue;
            double a = iv->alloc.at_end ? er->end[iv->alloc.task] : er->start[iv->alloc.task];
            double r = iv->release.at_end ? er->end[iv->release.task]
                                          : er->start[iv->release.task];
            int gath = z3 && tg->kind[iv->alloc.task] == SS_TASK_COLLECTIVE &&
                       tg->aux[iv->alloc.task] == SS_BUILD_COLL_PARAM;
            /* ZeRO-3: the backward's gathers that wait only for their own
             * forward (the last two units) are held with the pass in
             * flight; the forward's first two, gated by nothing here, are
             * in the full simulation prefetched after the previous
             * micro-batch's forward and held until this one's */
            if (gath && tg->kind[iv->release.task] == SS_TASK_BWD && a < bwd0 && r > fwd_end)
                f->held += iv->bytes;
            else if (gath && tg->kind[iv->release.task] == SS_TASK_FWD &&
                     er->ready[iv->alloc.task] == 0)
                f->pre += iv->bytes;
            else if (a <= fwd_end && r > fwd_end)
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
ss_status ss_hier_sub_one(ss_hier *h, const ss_plan *p, int s, int kk, int bulk, double jdelay,
                          figs *f, ss_diag *d)
{
    ss_plan_settings set;
    if (ss_plan_settings_get(p)->distopt == SS_ZERO3)
        bulk = 0; /* ZeRO-3 synchronises per micro-batch, overlapped: one kind of sub-problem */
    sub_settings(p, bulk, &set);
    uint64_t key = mixd(mix(sub_key(h, &set, s, kk), (uint64_t)bulk + 1), jdelay);
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

ss_status ss_hier_extrapolated(ss_hier *h, const ss_plan *p, int s, int bulk, double jdelay,
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
            if ((st = ss_hier_sub_one(h, p, s, k + 1, bulk, jdelay, &f[k], d)) != SS_OK)
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
    return ss_hier_sub_one(h, p, s, S->reps ? S->reps : 0, bulk, jdelay, out, d);
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
ss_status ss_hier_stage_figs(ss_hier *h, const ss_plan *p, int s, ss_diag *d)
{
    stageinfo *S = &h->stg[s];
    const ss_plan_settings *set = ss_plan_settings_get(p);
    int bulk = set->sync == SS_SYNC_BULK;
    figs w;
    ss_status st = ss_hier_extrapolated(h, p, s, 1, -1, &S->f, d);
    if (st != SS_OK)
        return st;
    if (set->bucket_bytes > 0)
        st = ss_hier_sub_one(h, p, s, S->reps ? S->reps : 0, bulk, -1, &w, d);
    else if (!bulk)
        st = ss_hier_extrapolated(h, p, s, 0, -1, &w, d);
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
    if (set->distopt == SS_ZERO3) {
        /* every micro-batch reduce-scatters as the last does: its backward
         * and link figures from the same sub-problem as the tail (the
         * whole stage with fused buckets) */
        S->f.bwd = w.bwd;
        S->f.lf = w.lf;
        S->f.lb = w.lb;
        S->f.lr = w.lr;
        S->f.lpost = w.lpost;
        S->f.fpre = w.fpre;
    }
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
