/*
 * ops_region.c — operator semantics, part 2: the region function (which part
 * of each operand a tile of output needs), output regions of multi-output
 * ops, and the work (FLOPs, bytes, saved activations) of a tile.
 *
 * Invariants: a region returned for an operand lies inside that operand's
 * shape (halos are clamped; an operand a tile does not touch gets an empty
 * range, lo == hi). FLOPs are linear in the tile's extents along every dim
 * whose split needs no halo or recomputation, so the FLOPs of the tiles of
 * such a split sum exactly to the whole op's. Ops that need the whole of an
 * input for any piece of output (attention's keys/values, the Q/K/V
 * projections when the output features or query positions are split)
 * recompute that part in every tile: their tiles sum to more than the op.
 */
#include "ops.h"

#include <string.h>

static int64_t len(ss_range r) { return r.hi > r.lo ? r.hi - r.lo : 0; }
static ss_range rng(int64_t lo, int64_t hi) { return (ss_range){lo, hi}; }

static const ss_tensor *operand_tensor(const ss_graph *g, const ss_op *op, int operand)
{
    if (operand < 0)
        return NULL;
    if (operand < op->n_in)
        return ss_graph_tensor(g, op->inputs[operand]);
    if (operand < op->n_in + op->n_w)
        return ss_graph_tensor(g, op->weights[operand - op->n_in]);
    return NULL;
}

static void full_region(const ss_tensor *t, ss_region *r)
{
    memset(r, 0, sizeof *r);
    if (!t)
        return;
    r->ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++)
        r->r[i] = rng(0, t->shape[i]);
}

/* Element count of a region; empty ranges (hi <= lo) give 0. */
int64_t ss_region_volume(const ss_region *r)
{
    int64_t v = 1;
    for (int i = 0; i < r->ndim; i++)
        v *= len(r->r[i]);
    return v;
}

/* Intersection of a and b (same ndim; otherwise empty with ndim 0). Empty
 * dims are stored as lo == hi. Returns the volume. out may alias a or b. */
int64_t ss_region_intersect(const ss_region *a, const ss_region *b, ss_region *out)
{
    ss_region o;
    memset(&o, 0, sizeof o);
    if (a->ndim != b->ndim) {
        *out = o;
        return 0;
    }
    o.ndim = a->ndim;
    int empty = 0;
    for (int i = 0; i < a->ndim; i++) {
        int64_t lo = a->r[i].lo > b->r[i].lo ? a->r[i].lo : b->r[i].lo;
        int64_t hi = a->r[i].hi < b->r[i].hi ? a->r[i].hi : b->r[i].hi;
        if (hi <= lo) {
            hi = lo;
            empty = 1;
        }
        o.r[i] = rng(lo, hi);
    }
    *out = o;
    return empty ? 0 : ss_region_volume(&o);
}

/* The whole op: output 0's full extent, the whole contraction range ([0, 1)
 * when the op has none). */
void ss_op_full_tile(const ss_graph *g, const ss_op *op, ss_tile *t)
{
    const ss_tensor *o = op->n_out > 0 ? ss_graph_tensor(g, op->outputs[0]) : NULL;
    full_region(o, &t->out);
    int64_t k = ss_op_contraction(g, op);
    t->red = rng(0, k > 0 ? k : 1);
}

/* Input rows a conv/pool output range needs: the kernel windows, clamped to
 * the unpadded input [0, in). */
static ss_range window(ss_range out, int64_t k, int64_t s, int64_t p, int64_t in)
{
    if (out.hi <= out.lo)
        return rng(0, 0);
    if (s <= 0)
        s = 1;
    int64_t lo = out.lo * s - p, hi = (out.hi - 1) * s - p + k;
    if (lo < 0)
        lo = 0;
    if (hi > in)
        hi = in;
    return hi > lo ? rng(lo, hi) : rng(0, 0);
}

/* Covering box of a flat index range [lo, hi) over dims dims[0..n) (row
 * major): exact when the range is aligned to the inner dims, a superset
 * otherwise. */
static void flat_to_box(int64_t lo, int64_t hi, int n, const int64_t *dims, ss_range *box)
{
    int64_t inner = 1;
    for (int i = 1; i < n; i++)
        inner *= dims[i];
    if (n == 0)
        return;
    if (hi <= lo) {
        for (int i = 0; i < n; i++)
            box[i] = rng(0, 0);
        return;
    }
    int64_t a = lo / inner, b = (hi - 1) / inner + 1;
    box[0] = rng(a, b);
    if (b - a == 1 && n > 1) {
        flat_to_box(lo - a * inner, hi - a * inner, n - 1, dims + 1, box + 1);
    } else {
        for (int i = 1; i < n; i++)
            box[i] = rng(0, dims[i]);
    }
}

static void reshape_region(const ss_tensor *x, const ss_tensor *o, const ss_tile *t,
                           ss_region *out)
{
    ss_reshape_groups gr;
    full_region(x, out);
    if (ss_reshape_group(x->ndim, x->shape, o->ndim, o->shape, &gr) < 0)
        return;
    for (int k = 0; k < gr.n; k++) {
        /* flat covering range of the output box of this group */
        int64_t lo = 0, hi = 0, empty = 0;
        for (int j = gr.out_lo[k]; j < gr.out_hi[k]; j++) {
            ss_range r = t->out.r[j];
            if (r.hi <= r.lo)
                empty = 1;
            lo = lo * o->shape[j] + r.lo;
            hi = hi * o->shape[j] + (r.hi - 1);
        }
        hi += 1;
        if (empty)
            hi = lo;
        flat_to_box(lo, hi, gr.in_hi[k] - gr.in_lo[k], x->shape + gr.in_lo[k],
                    out->r + gr.in_lo[k]);
    }
}

/* LSTM weight columns for a hidden range: the four gate blocks [g*H+lo,
 * g*H+hi) are not contiguous; the region is their covering range
 * [lo, 3H+hi), which is exact when the whole hidden range is taken. */
static ss_range gate_cover(ss_range h, int64_t H)
{
    if (h.hi <= h.lo)
        return rng(0, 0);
    return rng(h.lo, 3 * H + h.hi);
}

/* THE region function (see simsearch.h). Per type:
 *   linear     x [rows, red], W [red, cols] ([cols, red] if trans_b), b [cols]
 *   batch_mm   A [b, m, red] (trans_a: [b, red, m]), B [b, red, n] (trans_b: [b, n, red])
 *   conv2d     x [n, red (groups: the groups of the out channels), window rows/cols],
 *              W [o, red or all, all, all], b [o]
 *   pool2d     x [n, c, window rows/cols]
 *   norms      x = the tile (layernorm: whole last dim), gamma/beta [c] or all
 *   embedding  ids [tile minus last], W [red, cols]
 *   concat     input i: the part of the tile's axis range inside input i
 *   reshape    flat-index mapping per dim group (reshape_region)
 *   lstm       x [n, all...], h [n, all], c [n, cols], W [all, gate_cover], b [gate_cover]
 *   attention  q [n, s, all], k/v [n, all (causal: [0, s.hi)), all],
 *              Wq/Wk/Wv [all, head cols], Wo [head cols, cols], biases alike
 *   softmax_ce logits [tile, red], labels [tile] */
void ss_op_input_region(const ss_graph *g, const ss_op *op, const ss_tile *t, int operand,
                        ss_region *out)
{
    const ss_tensor *T = operand_tensor(g, op, operand);
    full_region(T, out);
    const ss_tensor *o = op->n_out > 0 ? ss_graph_tensor(g, op->outputs[0]) : NULL;
    if (!T || !o)
        return;
    const ss_region *tr = &t->out;
    int n = o->ndim, w = operand - op->n_in; /* w >= 0: weight index */
    const ss_op_attrs *a = &op->attrs;
    switch (op->type) {
    case SS_OP_INPUT: return;
    case SS_OP_LINEAR: {
        ss_range cols = tr->r[n - 1];
        if (w < 0) {
            for (int i = 0; i < n - 1; i++)
                out->r[i] = tr->r[i];
            out->r[n - 1] = t->red;
        } else if (w == 0) {
            out->r[a->trans_b ? 1 : 0] = t->red;
            out->r[a->trans_b ? 0 : 1] = cols;
        } else {
            out->r[0] = cols;
        }
        return;
    }
    case SS_OP_BATCH_MATMUL: {
        for (int i = 0; i < n - 2; i++)
            out->r[i] = tr->r[i];
        int tr_flag = operand == 0 ? a->trans_a : a->trans_b;
        ss_range free_r = operand == 0 ? tr->r[n - 2] : tr->r[n - 1];
        /* A: [m, k] (k last unless trans_a); B: [k, n] (k first unless trans_b) */
        int kdim = operand == 0 ? (tr_flag ? n - 2 : n - 1) : (tr_flag ? n - 1 : n - 2);
        int fdim = kdim == n - 1 ? n - 2 : n - 1;
        out->r[kdim] = t->red;
        out->r[fdim] = free_r;
        return;
    }
    case SS_OP_CONV2D: {
        int64_t g_ = a->groups ? a->groups : 1;
        ss_range oc = tr->r[1];
        if (w < 0) {
            out->r[0] = tr->r[0];
            if (g_ <= 1) {
                out->r[1] = t->red;
            } else {
                int64_t og = o->shape[1] / g_, cg = T->shape[1] / g_;
                out->r[1] = len(oc) ? rng(oc.lo / og * cg, ((oc.hi - 1) / og + 1) * cg) : rng(0, 0);
            }
            for (int i = 0; i < 2; i++)
                out->r[2 + i] = window(tr->r[2 + i], a->kernel[i], a->stride[i], a->pad[i],
                                       T->shape[2 + i]);
        } else if (w == 0) {
            out->r[0] = oc;
            if (g_ <= 1)
                out->r[1] = t->red;
        } else {
            out->r[0] = oc;
        }
        return;
    }
    case SS_OP_POOL2D:
        out->r[0] = tr->r[0];
        out->r[1] = tr->r[1];
        for (int i = 0; i < 2; i++)
            out->r[2 + i] = window(tr->r[2 + i], a->kernel[i], a->stride[i], a->pad[i],
                                   T->shape[2 + i]);
        return;
    case SS_OP_BATCHNORM:
        if (w < 0)
            *out = *tr;
        else
            out->r[0] = tr->r[1];
        return;
    case SS_OP_LAYERNORM:
        if (w < 0) {
            *out = *tr;
            out->r[n - 1] = rng(0, T->shape[n - 1]);
        }
        return;
    case SS_OP_UNARY:
    case SS_OP_BINARY:
    case SS_OP_DROPOUT:
        *out = *tr;
        return;
    case SS_OP_SOFTMAX: {
        int ax = ss_op_axis(a->axis, n);
        *out = *tr;
        if (ax >= 0)
            out->r[ax] = rng(0, T->shape[ax]);
        return;
    }
    case SS_OP_EMBEDDING:
        if (w < 0) {
            for (int i = 0; i < n - 1; i++)
                out->r[i] = tr->r[i];
        } else {
            out->r[0] = t->red;
            out->r[1] = tr->r[n - 1];
        }
        return;
    case SS_OP_CONCAT: {
        int ax = ss_op_axis(a->axis, n);
        int64_t off = 0;
        for (int i = 0; i < operand; i++)
            off += ss_graph_tensor(g, op->inputs[i])->shape[ax];
        *out = *tr;
        int64_t lo = tr->r[ax].lo > off ? tr->r[ax].lo : off;
        int64_t hi = tr->r[ax].hi < off + T->shape[ax] ? tr->r[ax].hi : off + T->shape[ax];
        out->r[ax] = hi > lo ? rng(lo - off, hi - off) : rng(0, 0);
        return;
    }
    case SS_OP_SPLIT: {
        int ax = ss_op_axis(a->axis, n);
        *out = *tr;
        out->r[ax] = rng(0, T->shape[ax]);
        return;
    }
    case SS_OP_RESHAPE: reshape_region(T, o, t, out); return;
    case SS_OP_TRANSPOSE:
        for (int i = 0; i < n; i++)
            out->r[a->perm[i]] = tr->r[i];
        return;
    case SS_OP_LSTM: {
        ss_range h = tr->r[n - 1];
        if (w < 0) {
            out->r[0] = tr->r[0];
            if (a->lstm_mode == SS_LSTM_CELL && operand == 2)
                out->r[1] = h;
        } else {
            out->r[T->ndim - 1] = gate_cover(h, a->hidden);
        }
        return;
    }
    case SS_OP_ATTENTION: {
        int64_t dh = o->shape[2] / a->heads;
        ss_range hc = rng(t->red.lo * dh, t->red.hi * dh);
        if (w < 0) {
            out->r[0] = tr->r[0];
            if (operand == 0)
                out->r[1] = tr->r[1];
            else if (a->causal)
                out->r[1] = rng(0, tr->r[1].hi);
        } else if (w < 3) {
            out->r[1] = hc;
        } else if (w == 3) {
            out->r[0] = hc;
            out->r[1] = tr->r[2];
        } else if (w < 7) {
            out->r[0] = hc;
        } else {
            out->r[0] = tr->r[2];
        }
        return;
    }
    case SS_OP_SOFTMAX_CE:
        for (int i = 0; i < n; i++)
            out->r[i] = tr->r[i];
        if (operand == 0)
            out->r[n] = t->red;
        return;
    case SS_OP_TYPE_COUNT: return;
    }
}

/* Output regions: output 0 is the tile; lstm cell's c' matches h'; split's
 * output k covers the tile with the axis spanning output k. */
void ss_op_output_region(const ss_graph *g, const ss_op *op, const ss_tile *t, int idx,
                         ss_region *out)
{
    *out = t->out;
    if (idx <= 0 || idx >= op->n_out)
        return;
    if (op->type == SS_OP_SPLIT) {
        const ss_tensor *o = ss_graph_tensor(g, op->outputs[idx]);
        int ax = ss_op_axis(op->attrs.axis, o->ndim);
        if (ax >= 0)
            out->r[ax] = rng(0, o->shape[ax]);
    }
}

/* Bytes of the region of operand i. */
static double operand_bytes(const ss_graph *g, const ss_op *op, const ss_tile *t, int i)
{
    ss_region r;
    ss_op_input_region(g, op, t, i, &r);
    const ss_tensor *T = operand_tensor(g, op, i);
    return (double)ss_region_volume(&r) * (double)ss_dtype_size(T->dtype);
}

static double inputs_bytes(const ss_graph *g, const ss_op *op, const ss_tile *t, int lo, int hi)
{
    double b = 0;
    for (int i = lo; i < hi; i++)
        b += operand_bytes(g, op, t, i);
    return b;
}

static double outputs_bytes(const ss_graph *g, const ss_op *op, const ss_tile *t)
{
    double b = 0;
    for (int k = 0; k < op->n_out; k++) {
        ss_region r;
        ss_op_output_region(g, op, t, k, &r);
        b += (double)ss_region_volume(&r) *
             (double)ss_dtype_size(ss_graph_tensor(g, op->outputs[k])->dtype);
    }
    return b;
}

/* Elementwise FLOPs per output element. */
static double unary_cost(ss_unary_kind k)
{
    switch (k) {
    case SS_UNARY_RELU: return 1;
    case SS_UNARY_GELU: return 8;
    case SS_UNARY_TANH: return 5;
    case SS_UNARY_SIGMOID: return 4;
    }
    return 1;
}

/* Work of a tile (see simsearch.h and the per-type formulas below). Bytes:
 * operand regions read plus output regions written; backward about twice
 * (reads gradients and saved values, writes gradients). */
void ss_op_tile_work(const ss_graph *g, const ss_op *op, const ss_tile *t, ss_work *w)
{
    memset(w, 0, sizeof *w);
    const ss_tensor *o = op->n_out > 0 ? ss_graph_tensor(g, op->outputs[0]) : NULL;
    if (!o)
        return;
    const ss_op_attrs *a = &op->attrs;
    int n = o->ndim;
    double osz = (double)ss_dtype_size(o->dtype);
    double vol = (double)ss_region_volume(&t->out);
    double cols = (double)len(t->out.r[n - 1]);
    double red = (double)len(t->red);
    double rd = inputs_bytes(g, op, t, 0, op->n_in + op->n_w);
    double wr = outputs_bytes(g, op, t);
    double x_bytes = op->n_in ? operand_bytes(g, op, t, 0) : 0;
    int first_red = t->red.lo == 0;
    w->fwd_bytes = rd + wr;
    w->bwd_bytes = 2 * (rd + wr);
    switch (op->type) {
    case SS_OP_INPUT:
        w->fwd_bytes = 0;
        w->bwd_bytes = 0;
        return;
    case SS_OP_LINEAR: {
        double M = cols > 0 ? vol / cols : 0;
        double mm = 2 * M * red * cols, bias = (a->use_bias && first_red) ? M * cols : 0;
        w->fwd_flops = mm + bias;
        w->bwd_flops = 2 * mm + bias;
        w->saved_bytes = x_bytes;
        return;
    }
    case SS_OP_BATCH_MATMUL:
        /* vol = B*M*N */
        w->fwd_flops = 2 * vol * red;
        w->bwd_flops = 2 * w->fwd_flops;
        w->saved_bytes = inputs_bytes(g, op, t, 0, 2);
        return;
    case SS_OP_CONV2D: {
        const ss_tensor *x = ss_graph_tensor(g, op->inputs[0]);
        int64_t g_ = a->groups ? a->groups : 1;
        double c = g_ <= 1 ? red : (double)(x->shape[1] / g_);
        double mm = 2 * vol * c * (double)(a->kernel[0] * a->kernel[1]);
        double bias = (a->use_bias && first_red) ? vol : 0;
        w->fwd_flops = mm + bias;
        w->bwd_flops = 2 * mm + bias;
        w->saved_bytes = x_bytes;
        return;
    }
    case SS_OP_POOL2D:
        w->fwd_flops = vol * (double)(a->kernel[0] * a->kernel[1]);
        w->bwd_flops = w->fwd_flops;
        w->saved_bytes = a->pool == SS_POOL_MAX ? x_bytes : 0;
        return;
    case SS_OP_BATCHNORM:
    case SS_OP_LAYERNORM:
        w->fwd_flops = 8 * vol;
        w->bwd_flops = 16 * vol;
        w->saved_bytes = x_bytes;
        return;
    case SS_OP_UNARY:
        w->fwd_flops = unary_cost(a->unary) * vol;
        w->bwd_flops = 2 * w->fwd_flops;
        w->saved_bytes = vol * osz; /* the output (relu/tanh/sigmoid) or input (gelu) */
        return;
    case SS_OP_BINARY:
        w->fwd_flops = vol;
        w->bwd_flops = 2 * vol;
        w->saved_bytes = a->binary == SS_BINARY_MUL ? inputs_bytes(g, op, t, 0, 2) : 0;
        return;
    case SS_OP_SOFTMAX:
        w->fwd_flops = 5 * vol;
        w->bwd_flops = 10 * vol;
        w->saved_bytes = vol * osz;
        return;
    case SS_OP_DROPOUT:
        w->fwd_flops = 2 * vol;
        w->bwd_flops = 4 * vol;
        w->saved_bytes = vol; /* one byte of mask per element */
        return;
    case SS_OP_EMBEDDING: {
        /* a gather: each vocab shard reads its share of the rows */
        double frac = a->vocab > 0 ? red / (double)a->vocab : 1;
        double ids = x_bytes;
        w->fwd_flops = 0;
        w->bwd_flops = vol * frac; /* scatter-add */
        w->fwd_bytes = ids + vol * osz * frac + vol * osz;
        w->bwd_bytes = ids + vol * osz + 2 * vol * osz * frac;
        w->saved_bytes = ids;
        return;
    }
    case SS_OP_CONCAT:
    case SS_OP_SPLIT:
    case SS_OP_TRANSPOSE:
        w->bwd_bytes = w->fwd_bytes;
        return;
    case SS_OP_RESHAPE:
        w->fwd_bytes = 0;
        w->bwd_bytes = 0;
        return;
    case SS_OP_LSTM: {
        const ss_tensor *x = ss_graph_tensor(g, op->inputs[0]);
        double Nn = (double)len(t->out.r[0]), Hh = cols, H = (double)a->hidden;
        double in = (double)x->shape[x->ndim - 1];
        double S = a->lstm_mode == SS_LSTM_SEQUENCE ? (double)x->shape[1] : 1;
        double mm = 2 * Nn * (in + H) * 4 * Hh, el = 10 * Nn * Hh;
        w->fwd_flops = S * (mm + el);
        w->bwd_flops = S * (2 * mm + 2 * el);
        if (a->lstm_mode == SS_LSTM_CELL)
            w->saved_bytes = inputs_bytes(g, op, t, 0, 3) + 5 * Nn * Hh * osz;
        else
            w->saved_bytes = x_bytes + S * Nn * (H + 6 * Hh) * osz;
        return;
    }
    case SS_OP_ATTENTION: {
        ss_region kr;
        ss_op_input_region(g, op, t, 1, &kr);
        double E = (double)o->shape[2], dh = E / (double)a->heads;
        double Nn = (double)len(t->out.r[0]), Sq = (double)len(t->out.r[1]);
        double Sk = (double)len(kr.r[1]), hr = red, Er = hr * dh, Et = cols;
        double proj = 2 * Nn * Sq * E * Er + 4 * Nn * Sk * E * Er + 2 * Nn * Sq * Er * Et;
        double attn = 4 * Nn * Sq * Sk * Er + 5 * Nn * hr * Sq * Sk;
        double bias = a->use_bias ? Nn * Sq * Er + 2 * Nn * Sk * Er + (first_red ? Nn * Sq * Et : 0) : 0;
        w->fwd_flops = proj + attn + bias;
        w->bwd_flops = 2 * w->fwd_flops;
        w->saved_bytes = inputs_bytes(g, op, t, 0, 3) +
                         (Nn * hr * Sq * Sk + Nn * Sq * Er + Nn * (Sq + 2 * Sk) * Er) * osz;
        return;
    }
    case SS_OP_SOFTMAX_CE:
        /* vol = rows of the loss; each row reads red logits */
        w->fwd_flops = 5 * vol * red;
        w->bwd_flops = 2 * vol * red;
        w->saved_bytes = inputs_bytes(g, op, t, 0, 2);
        return;
    case SS_OP_TYPE_COUNT: return;
    }
}
