/*
 * plan.c — the CUDA backend's device plan (plan.h): streams, NCCL calls and
 * groups, scratch, and where each deferred result is laid back. Plain C, no
 * CUDA: built into every libsimsearch, tested without a GPU.
 *
 * Invariant: a step is laid back (flush) before the first later step that
 * depends on it or touches an overlapping region of the same buffer, and
 * before any step laid back later that overlaps it; so the order of any two
 * conflicting accesses to the tensors is the task list's.
 */
#include "runtime/cuda/plan.h"

#include <stdlib.h>
#include <string.h>

const char *ss_rt_call_name(int call)
{
    static const char *n[] = {"none", "allreduce", "allgather", "send",
                              "recv", "reducescatter", "alltoall"};
    return call >= 0 && call <= SS_RT_CALL_ALLTOALL ? n[call] : "?";
}

void ss_rt_devplan_clear(ss_rt_devplan *p)
{
    free(p->steps);
    free(p->flush);
    free(p->group_off);
    free(p->group_ranks);
    free(p->boxes);
    memset(p, 0, sizeof *p);
}

int64_t ss_rt_gather_chunk(const ss_rt_state *s, const ss_build_desc *e)
{
    int64_t c = 0;
    for (int i = 0; i < e->n_item; i++) {
        int64_t v = ss_region_volume(&s->ds.items[e->item_off + i].reg);
        c += (v + e->n_dev - 1) / e->n_dev;
    }
    return c;
}

int ss_rt_sg_slice(const ss_rt_state *s, int task)
{
    const ss_taskgraph *tg = s->tg;
    const ss_build_desc *e = &s->ds.t[task];
    if (e->parts <= 1 || !tg->succ_off)
        return -1;
    for (int i = tg->succ_off[task]; i < tg->succ_off[task + 1]; i++) {
        int c = tg->succ[i];
        if (tg->kind[c] != SS_TASK_COLLECTIVE || tg->aux[c] != SS_BUILD_COLL_SENDGATHER)
            continue;
        const ss_build_desc *g = &s->ds.t[c];
        for (int k = 0; k < g->n_dev; k++)
            if (s->ds.devs[g->dev_off + k] == e->dst)
                return k;
    }
    return -1;
}

/* Whether transfer t is one an all-to-all moves (a zero-length transfer
 * next to an all-to-all task). */
static int a2a_xfer(const ss_rt_state *s, int t)
{
    const ss_taskgraph *tg = s->tg;
    if (tg->kind[t] != SS_TASK_XFER || tg->dur[t] != 0 || !tg->succ_off)
        return 0;
    for (int i = tg->succ_off[t]; i < tg->succ_off[t + 1]; i++)
        if (tg->kind[tg->succ[i]] == SS_TASK_COLLECTIVE &&
            tg->aux[tg->succ[i]] == SS_BUILD_COLL_ALLTOALL)
            return 1;
    for (int i = tg->pred_off ? tg->pred_off[t] : 0; tg->pred_off && i < tg->pred_off[t + 1]; i++)
        if (tg->kind[tg->pred[i]] == SS_TASK_COLLECTIVE &&
            tg->aux[tg->pred[i]] == SS_BUILD_COLL_ALLTOALL)
            return 1;
    return 0;
}

/* ------------------------------------------------------------ touches */

typedef struct touch {
    int tensor, grad;
    const ss_region *reg;
} touch;

#define MAX_TOUCH (2 * SS_MAX_OPERANDS + 2 * SS_MAX_OUTPUTS + 4)

/* The buffer regions step task t reads or writes on the compute stream
 * (collectives: the first MAX_TOUCH items; *all 0 when more were left out,
 * and the caller then treats it as touching everything). */
static int touches(const ss_rt_state *s, int t, touch *out, int *all)
{
    const ss_build_desc *e = &s->ds.t[t];
    int n = 0, k = s->tg->kind[t];
    *all = 0;
    if (k == SS_TASK_FWD || k == SS_TASK_BWD) {
        const rt_tile *tl = &s->tiles[s->task_tile[t]];
        const ss_op *op = ss_graph_op(s->g, tl->op);
        int bwd = k == SS_TASK_BWD;
        for (int x = 0; x < tl->a.n_x; x++)
            out[n++] = (touch){ss_rt_operand_tensor(op, x), bwd, &tl->a.xr[x]};
        for (int y = 0; y < tl->a.n_y; y++)
            out[n++] = (touch){op->outputs[y], bwd, &tl->a.yr[y]};
    } else if (k == SS_TASK_COLLECTIVE && e->coll == SS_BUILD_COLL_ALLTOALL) {
        /* its transfers this rank sends or receives */
        int nx = ss_rt_a2a_xfers(s->tg, t, NULL), xs[MAX_TOUCH];
        if (nx > MAX_TOUCH) {
            *all = 1;
            return 0;
        }
        ss_rt_a2a_xfers(s->tg, t, xs);
        for (int i = 0; i < nx; i++) {
            const ss_build_desc *x = &s->ds.t[xs[i]];
            if (x->src == s->rank || x->dst == s->rank)
                out[n++] = (touch){x->tensor, x->grad, &x->reg};
        }
    } else if (k == SS_TASK_XFER && a2a_xfer(s, t)) {
        return 0; /* its all-to-all moves it */
    } else if (k == SS_TASK_UPDATE || k == SS_TASK_XFER) {
        out[n++] = (touch){e->tensor, k == SS_TASK_UPDATE ? 0 : e->grad, &e->reg};
        if (k == SS_TASK_UPDATE)
            out[n++] = (touch){e->tensor, 1, &e->reg};
    } else if (k == SS_TASK_COLLECTIVE) {
        for (int i = 0; i < e->n_item; i++) {
            if (n == MAX_TOUCH) {
                *all = 1;
                break;
            }
            const ss_build_item *it = &s->ds.items[e->item_off + i];
            out[n++] = (touch){it->tensor, e->grad, &it->reg};
        }
    }
    return n;
}

static int overlap(const ss_rt_state *s, const touch *a, const touch *b)
{
    if (a->tensor != b->tensor || a->grad != b->grad)
        return 0;
    int nd = ss_graph_tensor(s->g, a->tensor)->ndim;
    for (int k = 0; k < nd; k++)
        if (a->reg->r[k].hi <= b->reg->r[k].lo || b->reg->r[k].hi <= a->reg->r[k].lo)
            return 0;
    return 1;
}

static int conflict(const ss_rt_state *s, int ta, int tb)
{
    touch a[MAX_TOUCH], b[MAX_TOUCH];
    int alla, allb, na = touches(s, ta, a, &alla), nb = touches(s, tb, b, &allb);
    if (alla || allb)
        return 1;
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++)
            if (overlap(s, &a[i], &b[j]))
                return 1;
    return 0;
}

/* ------------------------------------------------------------ calls */

/* The stream of communication task t: 0 when it occupies a device's compute
 * resource or nothing, else its channel's (chan_stream: channel -> stream,
 * assigned in order of first use). */
static int stream_of(const ss_rt_state *s, int t, int *chan_stream, int *n_streams)
{
    const ss_taskgraph *tg = s->tg;
    int pick = -1;
    for (int i = tg->res_off[t]; i < tg->res_off[t + 1]; i++) {
        int r = tg->res[i];
        if (r < tg->n_devices)
            return 0;
        int c = r - tg->n_devices;
        int mine = tg->chan_dev && (tg->chan_dev[2 * c] == s->rank || tg->chan_dev[2 * c + 1] == s->rank);
        if (pick < 0 || (mine && !(tg->chan_dev[2 * pick] == s->rank ||
                                   tg->chan_dev[2 * pick + 1] == s->rank)))
            pick = c;
    }
    if (pick < 0)
        return 0;
    if (!chan_stream[pick]) {
        int k = *n_streams - 1; /* communication streams so far */
        if (k < SS_RT_MAX_COMM_STREAMS)
            chan_stream[pick] = ++*n_streams - 1;
        else
            chan_stream[pick] = 1 + k % SS_RT_MAX_COMM_STREAMS;
    }
    return chan_stream[pick];
}

static ss_status not_f32(const ss_rt_state *s, int tensor, ss_diag *d)
{
    const ss_tensor *T = ss_graph_tensor(s->g, tensor);
    return ss_diag_set(d, SS_ERR_UNSUPPORTED, "runtime: rank %d: a transfer or collective of %s "
                       "(%s) is not f32", s->rank, T->name, ss_dtype_name(T->dtype));
}

/* The group index of devs[0..n) (added when new). */
static ss_status group_of(ss_rt_devplan *p, const int *devs, int n, int *out, ss_diag *d)
{
    for (int k = 0; k < p->n_groups; k++) {
        int off = p->group_off[k];
        if (p->group_off[k + 1] - off == n && !memcmp(p->group_ranks + off, devs, (size_t)n * sizeof *devs)) {
            *out = k;
            return SS_OK;
        }
    }
    int off = p->group_off[p->n_groups];
    int *o = realloc(p->group_off, (size_t)(p->n_groups + 2) * sizeof *o);
    if (!o)
        return ss_rt_nomem(d);
    p->group_off = o;
    int *r = realloc(p->group_ranks, (size_t)(off + n) * sizeof *r);
    if (!r)
        return ss_rt_nomem(d);
    p->group_ranks = r;
    memcpy(r + off, devs, (size_t)n * sizeof *devs);
    *out = p->n_groups++;
    p->group_off[p->n_groups] = off + n;
    return SS_OK;
}

/* Step st's call, group, counts for communication task t. */
static ss_status call_of(const ss_rt_state *s, ss_rt_devplan *p, int t, ss_rt_step *st, ss_diag *d)
{
    const ss_build_desc *e = &s->ds.t[t];
    if (s->tg->kind[t] == SS_TASK_XFER) {
        const ss_tensor *T = ss_graph_tensor(s->g, e->tensor);
        if (!ss_rt_xfer_movable(T, e->grad))
            return not_f32(s, e->tensor, d);
        st->dtype = T->dtype;
        if (e->src == e->dst || a2a_xfer(s, t))
            return SS_OK;
        st->call = e->src == s->rank ? SS_RT_CALL_SEND : SS_RT_CALL_RECV;
        st->peer = e->src == s->rank ? e->dst : e->src;
        st->hi = ss_region_volume(&e->reg);
        if (e->parts > 1) { /* a scatter-gather send: its slice */
            int k = ss_rt_sg_slice(s, t);
            if (k < 0)
                return ss_diag_set(d, SS_ERR_INVALID, "runtime: rank %d: a scatter-gather send "
                                   "of %s has no all-gather naming its receiver", s->rank,
                                   ss_graph_tensor(s->g, e->tensor)->name);
            ss_rt_slice_of(st->hi, k, e->parts, &st->lo, &st->hi);
        }
        st->count = st->scratch_n = st->hi - st->lo;
        st->lays_back = st->call == SS_RT_CALL_RECV;
        return SS_OK;
    }
    if (e->coll == SS_BUILD_COLL_ALLTOALL) { /* its transfers: sends, then receives */
        int nx = ss_rt_a2a_xfers(s->tg, t, NULL);
        int *xs = malloc((size_t)(nx + 1) * sizeof *xs);
        if (!xs)
            return ss_rt_nomem(d);
        ss_rt_a2a_xfers(s->tg, t, xs);
        for (int i = 0; i < nx; i++) {
            const ss_build_desc *x = &s->ds.t[xs[i]];
            if (ss_graph_tensor(s->g, x->tensor)->dtype != SS_F32) {
                free(xs);
                return not_f32(s, x->tensor, d);
            }
            if (x->src == s->rank)
                st->lo += ss_region_volume(&x->reg);
            else if (x->dst == s->rank)
                st->hi += ss_region_volume(&x->reg);
        }
        free(xs);
        st->call = SS_RT_CALL_ALLTOALL;
        st->count = st->scratch_n = st->lo + st->hi; /* lo: elements sent, hi: received */
        st->lays_back = st->hi > 0;
        return SS_OK;
    }
    if (e->n_dev < 2)
        return SS_OK;
    int64_t total = 0;
    for (int i = 0; i < e->n_item; i++) {
        const ss_build_item *it = &s->ds.items[e->item_off + i];
        if (ss_graph_tensor(s->g, it->tensor)->dtype != SS_F32)
            return not_f32(s, it->tensor, d);
        total += ss_region_volume(&it->reg);
    }
    ss_status rc = group_of(p, s->ds.devs + e->dev_off, e->n_dev, &st->group, d);
    if (rc != SS_OK)
        return rc;
    st->lays_back = 1;
    if ((e->gather || e->coll == SS_BUILD_COLL_SENDGATHER) && e->n_parts <= 1) {
        st->call = SS_RT_CALL_ALLGATHER;
        st->count = ss_rt_gather_chunk(s, e);
        st->scratch_n = st->count * (1 + e->n_dev);
        st->hi = total;
        return SS_OK;
    }
    if (e->coll == SS_BUILD_COLL_SCATTER || e->coll == SS_BUILD_COLL_GATHER) {
        int nb = e->n_dev * e->n_item;
        ss_region *b = realloc(p->boxes, (size_t)(p->n_boxes + nb) * sizeof *b);
        if (!b)
            return ss_rt_nomem(d);
        p->boxes = b;
        if (ss_rt_sp_boxes(s, t, b + p->n_boxes)) {
            st->box_off = p->n_boxes;
            p->n_boxes += nb;
            for (int k = 0; k < e->n_dev; k++) {
                int64_t c = 0;
                for (int i = 0; i < e->n_item; i++)
                    c += ss_region_volume(&b[st->box_off + k * e->n_item + i]);
                st->count = c > st->count ? c : st->count;
            }
            st->call = e->coll == SS_BUILD_COLL_SCATTER ? SS_RT_CALL_REDUCESCATTER
                                                        : SS_RT_CALL_ALLGATHER;
            st->scratch_n = st->count * (1 + e->n_dev);
            st->hi = total;
            return SS_OK;
        }
    }
    if (e->coll == SS_BUILD_COLL_GRAD && !e->gather && e->n_parts <= 1 && s->tg->op[t] >= 0 &&
        ss_plan_settings_get(s->p)->distopt == 1) { /* op -1: split_tp's all-reduce */
        /* the distributed optimizer's gradients: member k keeps slice k */
        st->call = SS_RT_CALL_REDUCESCATTER;
        st->count = ss_rt_gather_chunk(s, e);
        st->scratch_n = st->count * (1 + e->n_dev);
        st->hi = total;
        return SS_OK;
    }
    st->call = SS_RT_CALL_ALLREDUCE;
    ss_rt_slice_of(total, e->part, e->n_parts > 0 ? e->n_parts : 1, &st->lo, &st->hi);
    st->count = st->scratch_n = st->hi - st->lo;
    st->zero_pad = e->gather;
    return SS_OK;
}

/* ------------------------------------------------------------ flushes */

typedef struct walker {
    int *pred_off, *pred; /* reverse of the successor lists */
    int *pos;             /* task -> step index, -1 */
    int *mark, gen;
    int *stack;
} walker;

static int runs_nowhere(const ss_rt_state *s, int t)
{
    int k = s->tg->kind[t];
    return k == SS_TASK_OTHER || (k == SS_TASK_XFER && a2a_xfer(s, t)) ||
           ((k == SS_TASK_FWD || k == SS_TASK_BWD) &&
            ss_graph_op(s->g, s->tg->op[t])->type == SS_OP_INPUT);
}

/* Mark in `want` the pending steps task t depends on (through tasks that run
 * nowhere; other ranks' tasks end the walk). */
static void deps(const ss_rt_state *s, walker *w, int t, const char *pending, char *want)
{
    int sp = 0;
    w->gen++;
    w->stack[sp++] = t;
    while (sp) {
        int u = w->stack[--sp];
        for (int i = w->pred_off[u]; i < w->pred_off[u + 1]; i++) {
            int p = w->pred[i];
            if (w->mark[p] == w->gen)
                continue;
            w->mark[p] = w->gen;
            if (w->pos[p] >= 0 && !runs_nowhere(s, p)) {
                if (pending[w->pos[p]])
                    want[w->pos[p]] = 1;
            } else if (runs_nowhere(s, p)) {
                w->stack[sp++] = p;
            }
        }
    }
}

static ss_status walker_init(const ss_rt_state *s, walker *w, ss_diag *d)
{
    const ss_taskgraph *tg = s->tg;
    int n = tg->n_tasks, ne = tg->succ_off ? tg->succ_off[n] : 0;
    memset(w, 0, sizeof *w);
    w->pred_off = calloc((size_t)n + 2, sizeof *w->pred_off);
    w->pred = malloc(((size_t)ne + 1) * sizeof *w->pred);
    w->pos = malloc(((size_t)n + 1) * sizeof *w->pos);
    w->mark = calloc((size_t)n + 1, sizeof *w->mark);
    w->stack = malloc(((size_t)ne + 2) * sizeof *w->stack);
    if (!w->pred_off || !w->pred || !w->pos || !w->mark || !w->stack)
        return ss_rt_nomem(d);
    for (int t = 0; t < n && tg->succ_off; t++)
        for (int i = tg->succ_off[t]; i < tg->succ_off[t + 1]; i++)
            w->pred_off[tg->succ[i] + 2]++;
    for (int t = 0; t < n; t++)
        w->pred_off[t + 2] += w->pred_off[t + 1];
    for (int t = 0; t < n && tg->succ_off; t++)
        for (int i = tg->succ_off[t]; i < tg->succ_off[t + 1]; i++)
            w->pred[w->pred_off[tg->succ[i] + 1]++] = t;
    for (int t = 0; t < n; t++)
        w->pos[t] = -1;
    for (int i = 0; i < s->n_mine; i++)
        w->pos[s->mine[i]] = i;
    return SS_OK;
}

static void walker_free(walker *w)
{
    free(w->pred_off);
    free(w->pred);
    free(w->pos);
    free(w->mark);
    free(w->stack);
}

/* Close `want` over overlaps (a pending step before a wanted one that it
 * overlaps is wanted too), then append the wanted steps in order to flush
 * and clear them from pending. */
static void take(const ss_rt_state *s, ss_rt_devplan *p, int upto, char *pending, char *want)
{
    for (int j = upto - 1; j >= 0; j--)
        if (want[j])
            for (int k = 0; k < j; k++)
                if (pending[k] && !want[k] && conflict(s, s->mine[k], s->mine[j]))
                    want[k] = 1;
    for (int j = 0; j < upto; j++)
        if (want[j]) {
            p->flush[p->end_off + p->n_end++] = j;
            pending[j] = want[j] = 0;
        }
}

ss_status ss_rt_devplan_make(const ss_rt_state *s, ss_rt_devplan *p, ss_diag *d)
{
    memset(p, 0, sizeof *p);
    const ss_taskgraph *tg = s->tg;
    int n = s->n_mine;
    walker w;
    ss_status st = walker_init(s, &w, d);
    char *pending = calloc((size_t)n + 1, 1), *want = calloc((size_t)n + 1, 1);
    int *chan_stream = calloc((size_t)tg->n_channels + 1, sizeof *chan_stream);
    p->steps = calloc((size_t)n + 1, sizeof *p->steps);
    p->flush = malloc(((size_t)n + 1) * sizeof *p->flush);
    p->group_off = calloc(1, sizeof *p->group_off);
    if (st == SS_OK && (!pending || !want || !chan_stream || !p->steps || !p->flush || !p->group_off))
        st = ss_rt_nomem(d);
    p->n_steps = n;
    p->n_streams = 1;
    for (int t = 0; t < tg->n_tasks && st == SS_OK; t++)
        p->world |= tg->kind[t] == SS_TASK_XFER;
    for (int i = 0; i < n && st == SS_OK; i++) {
        int t = s->mine[i], k = tg->kind[t];
        ss_rt_step *x = &p->steps[i];
        *x = (ss_rt_step){.task = t, .group = -1, .peer = -1, .dtype = SS_F32, .box_off = -1};
        if (k == SS_TASK_XFER || k == SS_TASK_COLLECTIVE) {
            if ((st = call_of(s, p, t, x, d)) != SS_OK)
                break;
            if (x->call != SS_RT_CALL_NONE)
                x->stream = stream_of(s, t, chan_stream, &p->n_streams);
            x->scratch_off = p->scratch;
            p->scratch += x->scratch_n;
        }
        /* a receive or a no-op touches no tensor before its call */
        x->flush_off = p->end_off + p->n_end;
        if (x->call != SS_RT_CALL_RECV &&
            !((k == SS_TASK_XFER || k == SS_TASK_COLLECTIVE) && x->call == SS_RT_CALL_NONE)) {
            deps(s, &w, t, pending, want);
            for (int j = 0; j < i; j++)
                if (pending[j] && !want[j] && conflict(s, s->mine[j], t))
                    want[j] = 1;
            take(s, p, i, pending, want);
        }
        x->n_flush = p->end_off + p->n_end - x->flush_off;
        if (x->lays_back && x->stream != 0)
            pending[i] = 1;
    }
    if (st == SS_OK) {
        p->end_off = p->end_off + p->n_end;
        p->n_end = 0;
        for (int j = 0; j < n; j++)
            want[j] = pending[j];
        take(s, p, n, pending, want);
    }
    walker_free(&w);
    free(pending);
    free(want);
    free(chan_stream);
    if (st != SS_OK)
        ss_rt_devplan_clear(p);
    return st;
}
