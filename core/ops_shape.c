/*
 * ops_shape.c — operator table entries of the types that move data without
 * arithmetic: input (a graph input), concat, split, reshape and transpose.
 *
 * Their work is bytes only; reshape is a view (no kernel), and split and
 * transpose are views too when attrs.view says their consumers read them in
 * place. Reshape maps a tile to its input through dim groups (runs of input
 * and output dims with equal products, ss_reshape_group), covering each
 * group's flat index range with a box. Each entry keeps its type's whole
 * behaviour (op_table.h).
 */
#include "op_table.h"

#define FAIL(...) return ss_op_fail(q, __VA_ARGS__)
#define MAX_DIM SS_ATTR_MAX_DIM

/* Region hook of types whose operands are read whole. */
static void region_whole(const ss_region_args *q, ss_region *out)
{
    (void)q;
    (void)out;
}

/* Work of the pure data movers: read and write once each way. */
static void copy_work(const ss_work_args *q, ss_work *w)
{
    (void)q;
    w->bwd_bytes = w->fwd_bytes;
}

/* Work of the views: no traffic. */
static void view_work(const ss_work_args *q, ss_work *w)
{
    (void)q;
    w->fwd_bytes = 0;
    w->bwd_bytes = 0;
}

/* ------------------------------------------------------------------ */
/* input: shape/dtype/kinds in attrs, no operands                      */
/* ------------------------------------------------------------------ */

static ss_status input_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_op_attrs *a = q->a;
    if (a->ndim < 1 || a->ndim > SS_MAX_DIMS)
        FAIL("shape has %d dims (1..%d allowed)", a->ndim, SS_MAX_DIMS);
    if ((unsigned)a->dtype >= SS_DTYPE_COUNT)
        FAIL("invalid dtype %d", (int)a->dtype);
    for (int i = 0; i < a->ndim; i++)
        if ((unsigned)a->kind[i] > SS_DIM_PARAMETER)
            FAIL("invalid dim kind %d", (int)a->kind[i]);
    ss_op_add_out(s, a->ndim, a->shape, a->kind, a->dtype);
    return SS_OK;
}

/* An input operator's object holds no "inputs", "weights" or attributes:
 * its shape, dtype and kinds come from its tensor declaration (model_io.c). */
static const char *const input_keys[] = {"name", "type", NULL};

const ss_op_class ss_op_class_input = {
    .type = SS_OP_INPUT,
    .name = "input",
    .flags = SS_OPF_NO_KERNEL,
    .arity = 0,
    .infer = input_infer,
    .split_mask = ss_op_mask_all,
    .input_region = region_whole,
    .work = view_work,
    .keys = input_keys,
};

/* ------------------------------------------------------------------ */
/* concat: along attrs.axis                                            */
/* ------------------------------------------------------------------ */

static ss_status concat_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_tensor *x = q->in[0];
    char b1[160], b2[160];
    int ax = ss_op_axis(q->a->axis, x->ndim);
    if (ax < 0)
        FAIL("axis %d out of range for %d dims", q->a->axis, x->ndim);
    int64_t total = 0;
    for (int i = 0; i < q->n_in; i++) {
        const ss_tensor *y = q->in[i];
        int ok = y->ndim == x->ndim && y->dtype == x->dtype;
        for (int j = 0; ok && j < x->ndim; j++)
            ok = j == ax || y->shape[j] == x->shape[j];
        if (!ok)
            FAIL("input %d '%s' %s does not match input 0 %s outside axis %d", i, y->name,
                 ss_shape_str(y->ndim, y->shape, b1, sizeof b1),
                 ss_shape_str(x->ndim, x->shape, b2, sizeof b2), ax);
        if (y->shape[ax] > SS_MAX_ELEMENTS - total)
            FAIL("concatenated extent is absurdly large");
        total += y->shape[ax];
    }
    ss_tensor *t = ss_op_out_like(s, x, x->dtype);
    t->shape[ax] = total;
    return SS_OK;
}

/* Input i: the part of the tile's axis range inside input i. */
static void concat_region(const ss_region_args *q, ss_region *out)
{
    const ss_region *tr = &q->t->out;
    int ax = ss_op_axis(q->op->attrs.axis, q->o->ndim);
    int64_t off = 0;
    for (int i = 0; i < q->operand; i++)
        off += ss_graph_tensor(q->g, q->op->inputs[i])->shape[ax];
    *out = *tr;
    int64_t ext = q->T->shape[ax];
    int64_t lo = tr->r[ax].lo > off ? tr->r[ax].lo : off;
    int64_t hi = tr->r[ax].hi < off + ext ? tr->r[ax].hi : off + ext;
    out->r[ax] = hi > lo ? ss_range_make(lo - off, hi - off) : ss_range_make(0, 0);
}

static const char *const concat_keys[] = {SS_OP_COMMON_KEYS, "axis", NULL};

const ss_op_class ss_op_class_concat = {
    .type = SS_OP_CONCAT,
    .name = "concat",
    .arity = SS_OP_ANY_INPUTS,
    .infer = concat_infer,
    .split_mask = ss_op_mask_but_axis,
    .input_region = concat_region,
    .work = copy_work,
    .keys = concat_keys,
    .read_attrs = ss_op_read_axis,
    .write_attrs = ss_op_write_axis,
};

/* ------------------------------------------------------------------ */
/* split: along attrs.axis into attrs.split_sizes                      */
/* ------------------------------------------------------------------ */

static ss_status split_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_op_attrs *a = q->a;
    const ss_tensor *x = q->in[0];
    int ax = ss_op_axis(a->axis, x->ndim);
    if (ax < 0)
        FAIL("axis %d out of range for %d dims", a->axis, x->ndim);
    if (a->n_split < 1 || a->n_split > SS_MAX_OUTPUTS)
        FAIL("n_split = %d must be in 1..%d", a->n_split, SS_MAX_OUTPUTS);
    int64_t sum = 0;
    for (int i = 0; i < a->n_split; i++) {
        if (a->split_sizes[i] <= 0 || a->split_sizes[i] > x->shape[ax])
            FAIL("split_sizes[%d] = %lld must be in 1..%lld", i, (long long)a->split_sizes[i],
                 (long long)x->shape[ax]);
        sum += a->split_sizes[i];
    }
    if (sum != x->shape[ax])
        FAIL("split_sizes sum to %lld, but axis %d has extent %lld", (long long)sum, ax,
             (long long)x->shape[ax]);
    for (int i = 0; i < a->n_split; i++)
        ss_op_out_like(s, x, x->dtype)->shape[ax] = a->split_sizes[i];
    return SS_OK;
}

/* The tile, with the whole axis. */
static void split_region(const ss_region_args *q, ss_region *out)
{
    int ax = ss_op_axis(q->op->attrs.axis, q->o->ndim);
    *out = q->t->out;
    out->r[ax] = ss_range_make(0, q->T->shape[ax]);
}

/* Output k covers the tile with the axis spanning output k. */
static void split_output_region(const ss_graph *g, const ss_op *op, const ss_tile *t, int idx,
                                ss_region *out)
{
    (void)t;
    const ss_tensor *o = ss_graph_tensor(g, op->outputs[idx]);
    int ax = ss_op_axis(op->attrs.axis, o->ndim);
    if (ax >= 0)
        out->r[ax] = ss_range_make(0, o->shape[ax]);
}

static const char *const split_keys[] = {SS_OP_COMMON_KEYS, "axis", "sizes", "view", NULL};

static ss_status split_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    ss_status st = ss_op_read_axis(r, a);
    if (!st)
        st = ss_attr_ints(r, "sizes", 1, 1, SS_MAX_OUTPUTS, 1, MAX_DIM, a->split_sizes,
                          &a->n_split);
    if (!st)
        st = ss_attr_bool(r, "view", &a->view);
    return st;
}

static void split_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    ss_op_write_axis(w, g, op);
    ss_attr_put_ints(w, "sizes", op->attrs.split_sizes, op->attrs.n_split);
    if (op->attrs.view)
        ss_attr_put_bool(w, "view", 1);
}

const ss_op_class ss_op_class_split = {
    .type = SS_OP_SPLIT,
    .name = "split",
    .flags = SS_OPF_VIEW_ATTR,
    .arity = 1,
    .infer = split_infer,
    .split_mask = ss_op_mask_but_axis,
    .input_region = split_region,
    .output_region = split_output_region,
    .work = copy_work,
    .keys = split_keys,
    .read_attrs = split_read,
    .write_attrs = split_write,
};

/* ------------------------------------------------------------------ */
/* reshape: to attrs.shape (flatten is a reshape)                      */
/* ------------------------------------------------------------------ */

/* See ops.h. */
int ss_reshape_group(int in_ndim, const int64_t *in_shape, int out_ndim,
                     const int64_t *out_shape, ss_reshape_groups *gr)
{
    int i = 0, j = 0;
    gr->n = 0;
    while (i < in_ndim && j < out_ndim) {
        int k = gr->n++;
        gr->in_lo[k] = i;
        gr->out_lo[k] = j;
        int64_t pi = in_shape[i++], po = out_shape[j++];
        while (pi != po) {
            if (pi < po) {
                if (i >= in_ndim || in_shape[i] <= 0 || in_shape[i] > SS_MAX_ELEMENTS / pi)
                    return -1;
                pi *= in_shape[i++];
            } else {
                if (j >= out_ndim || out_shape[j] <= 0 || out_shape[j] > SS_MAX_ELEMENTS / po)
                    return -1;
                po *= out_shape[j++];
            }
        }
        gr->in_hi[k] = i;
        gr->out_hi[k] = j;
    }
    /* Leftover dims must be size 1; they join the last group. */
    for (; i < in_ndim; i++)
        if (in_shape[i] != 1 || gr->n == 0)
            return -1;
    for (; j < out_ndim; j++)
        if (out_shape[j] != 1 || gr->n == 0)
            return -1;
    if (gr->n == 0)
        return -1;
    gr->in_hi[gr->n - 1] = in_ndim;
    gr->out_hi[gr->n - 1] = out_ndim;
    return gr->n;
}

static ss_status reshape_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_op_attrs *a = q->a;
    const ss_tensor *x = q->in[0];
    char b1[160], b2[160];
    if (a->ndim < 1 || a->ndim > SS_MAX_DIMS)
        FAIL("target shape has %d dims (1..%d allowed)", a->ndim, SS_MAX_DIMS);
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] <= 0)
            FAIL("target shape %s has a dim <= 0", ss_shape_str(a->ndim, a->shape, b1, sizeof b1));
    ss_reshape_groups gr;
    if (ss_reshape_group(x->ndim, x->shape, a->ndim, a->shape, &gr) < 0)
        FAIL("cannot reshape %s to %s (element counts differ)",
             ss_shape_str(x->ndim, x->shape, b1, sizeof b1),
             ss_shape_str(a->ndim, a->shape, b2, sizeof b2));
    ss_tensor *t = ss_op_add_out(s, a->ndim, a->shape, NULL, x->dtype);
    for (int k = 0; k < gr.n; k++) {
        int one = gr.in_hi[k] - gr.in_lo[k] == 1 && gr.out_hi[k] - gr.out_lo[k] == 1;
        for (int j = gr.out_lo[k]; j < gr.out_hi[k]; j++)
            t->kind[j] = (one || j == gr.out_lo[k]) ? x->kind[gr.in_lo[k]]
                                                     : x->kind[gr.in_hi[k] - 1];
    }
    return SS_OK;
}

/* The leading output dim of every dim group. */
static unsigned reshape_mask(const ss_graph *g, const ss_op *op, const ss_tensor *o)
{
    const ss_tensor *x = op->n_in > 0 ? ss_graph_tensor(g, op->inputs[0]) : NULL;
    ss_reshape_groups gr;
    if (!x || ss_reshape_group(x->ndim, x->shape, o->ndim, o->shape, &gr) < 0)
        return 0;
    unsigned m = 0;
    for (int k = 0; k < gr.n; k++)
        m |= 1u << gr.out_lo[k];
    return m;
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
            box[i] = ss_range_make(0, 0);
        return;
    }
    int64_t a = lo / inner, b = (hi - 1) / inner + 1;
    box[0] = ss_range_make(a, b);
    if (b - a == 1 && n > 1) {
        flat_to_box(lo - a * inner, hi - a * inner, n - 1, dims + 1, box + 1);
    } else {
        for (int i = 1; i < n; i++)
            box[i] = ss_range_make(0, dims[i]);
    }
}

/* Flat-index mapping per dim group. */
static void reshape_region(const ss_region_args *q, ss_region *out)
{
    const ss_tensor *x = q->T, *o = q->o;
    const ss_tile *t = q->t;
    ss_reshape_groups gr;
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

static const char *const reshape_keys[] = {SS_OP_COMMON_KEYS, "shape", NULL};

/* The target shape; with a batch override, a leading dim equal to the
 * file's batch follows a sample-dim input to the new batch. */
static ss_status reshape_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    ss_status st = ss_attr_ints(r, "shape", 1, 1, SS_MAX_DIMS, 1, MAX_DIM, a->shape, &a->ndim);
    if (!st && r->rebatch > 0 && r->n_in == 1) {
        const ss_tensor *x = ss_graph_tensor(r->g, r->inputs[0]);
        if (x->ndim > 0 && x->kind[0] == SS_DIM_SAMPLE && a->shape[0] == r->batch)
            a->shape[0] = x->shape[0];
    }
    return st;
}

static void reshape_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    (void)g;
    ss_attr_put_ints(w, "shape", op->attrs.shape, op->attrs.ndim);
}

const ss_op_class ss_op_class_reshape = {
    .type = SS_OP_RESHAPE,
    .name = "reshape",
    .flags = SS_OPF_NO_KERNEL,
    .arity = 1,
    .infer = reshape_infer,
    .split_mask = reshape_mask,
    .input_region = reshape_region,
    .work = view_work,
    .keys = reshape_keys,
    .read_attrs = reshape_read,
    .write_attrs = reshape_write,
};

/* ------------------------------------------------------------------ */
/* transpose: attrs.perm                                               */
/* ------------------------------------------------------------------ */

static ss_status transpose_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_op_attrs *a = q->a;
    const ss_tensor *x = q->in[0];
    int seen[SS_MAX_DIMS] = {0};
    for (int i = 0; i < x->ndim; i++) {
        int p = a->perm[i];
        if (p < 0 || p >= x->ndim || seen[p]++)
            FAIL("perm is not a permutation of 0..%d", x->ndim - 1);
    }
    ss_tensor *t = ss_op_out_like(s, x, x->dtype);
    for (int i = 0; i < x->ndim; i++) {
        t->shape[i] = x->shape[a->perm[i]];
        t->kind[i] = x->kind[a->perm[i]];
    }
    return SS_OK;
}

/* Output dim i reads input dim perm[i]. */
static void transpose_region(const ss_region_args *q, ss_region *out)
{
    for (int i = 0; i < q->o->ndim; i++)
        out->r[q->op->attrs.perm[i]] = q->t->out.r[i];
}

static const char *const transpose_keys[] = {SS_OP_COMMON_KEYS, "perm", "view", NULL};

static ss_status transpose_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    int64_t p[SS_MAX_DIMS];
    int n = 0;
    ss_status st = ss_attr_ints(r, "perm", 1, 1, SS_MAX_DIMS, 0, SS_MAX_DIMS - 1, p, &n);
    if (st)
        return st;
    const ss_tensor *x = r->n_in == 1 ? ss_graph_tensor(r->g, r->inputs[0]) : NULL;
    if (x && x->ndim != n)
        return ss_attr_fail(r, SS_ERR_INVALID, "perm", "has %d entries, but input \"%s\" has %d dims",
                            n, x->name, x->ndim);
    for (int i = 0; i < n; i++)
        a->perm[i] = (int)p[i];
    return ss_attr_bool(r, "view", &a->view);
}

static void transpose_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    int64_t p[SS_MAX_DIMS];
    int n = ss_graph_tensor(g, op->inputs[0])->ndim;
    for (int i = 0; i < SS_MAX_DIMS; i++)
        p[i] = op->attrs.perm[i];
    ss_attr_put_ints(w, "perm", p, n);
    if (op->attrs.view)
        ss_attr_put_bool(w, "view", 1);
}

const ss_op_class ss_op_class_transpose = {
    .type = SS_OP_TRANSPOSE,
    .name = "transpose",
    .flags = SS_OPF_VIEW_ATTR,
    .arity = 1,
    .infer = transpose_infer,
    .split_mask = ss_op_mask_all,
    .input_region = transpose_region,
    .work = copy_work,
    .keys = transpose_keys,
    .read_attrs = transpose_read,
    .write_attrs = transpose_write,
};
