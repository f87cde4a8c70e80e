/*
 * ops_elementwise.c — operator table entries of the types that map each
 * output element to the same element of their inputs, or to a row of them:
 * unary, binary, dropout, softmax, layernorm and rmsnorm.
 *
 * A tile needs exactly its own region of every input, except along the dim
 * a row-wise type reduces over (softmax's axis, layernorm's last dim), which
 * is never split and always read whole. Each entry keeps its type's whole
 * behaviour (op_table.h).
 */
#include "op_table.h"

#include <string.h>

#define FAIL(...) return ss_op_fail(q, __VA_ARGS__)

/* One floating-point input, output alike. */
static ss_status infer_float_like(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_tensor *x = q->in[0];
    if (!ss_dtype_is_float(x->dtype))
        FAIL("input '%s' must be floating point", x->name);
    ss_op_out_like(s, x, x->dtype);
    return SS_OK;
}

/* ------------------------------------------------------------------ */
/* unary: relu, gelu, tanh, sigmoid, silu, relu2                      */
/* ------------------------------------------------------------------ */

static const char *const unary_names[] = {"relu",  "gelu", "tanh", "sigmoid",
                                          "silu", "relu2", NULL};

static ss_status unary_infer(const ss_infer_args *q, ss_op_shape *s)
{
    if ((unsigned)q->a->unary > SS_UNARY_RELU2)
        FAIL("invalid unary kind %d", (int)q->a->unary);
    return infer_float_like(q, s);
}

/* FLOPs per output element. */
static double unary_cost(ss_unary_kind k)
{
    switch (k) {
    case SS_UNARY_RELU: return 1;
    case SS_UNARY_GELU: return 8;
    case SS_UNARY_TANH: return 5;
    case SS_UNARY_SIGMOID: return 4;
    case SS_UNARY_SILU: return 5;  /* sigmoid and a multiply */
    case SS_UNARY_RELU2: return 2; /* max and a square */
    }
    return 1;
}

static void unary_work(const ss_work_args *q, ss_work *w)
{
    w->fwd_flops = unary_cost(q->op->attrs.unary) * q->vol;
    w->bwd_flops = 2 * w->fwd_flops;
    w->saved_bytes = q->vol * q->osz; /* the output (relu/tanh/sigmoid) or input (gelu) */
}

static const char *const function_keys[] = {SS_OP_COMMON_KEYS, "function", NULL};

static ss_status unary_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    int e = 0;
    ss_status st = ss_attr_enum(r, "function", 1, unary_names, &e);
    a->unary = (ss_unary_kind)e;
    return st;
}

static void unary_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    (void)g;
    unsigned k = (unsigned)op->attrs.unary;
    ss_attr_put_str(w, "function", unary_names[k <= SS_UNARY_RELU2 ? k : 0]);
}

const ss_op_class ss_op_class_unary = {
    .type = SS_OP_UNARY,
    .name = "unary",
    .arity = 1,
    .infer = unary_infer,
    .split_mask = ss_op_mask_all,
    .input_region = ss_op_region_tile,
    .work = unary_work,
    .keys = function_keys,
    .read_attrs = unary_read,
    .write_attrs = unary_write,
};

/* ------------------------------------------------------------------ */
/* binary: add, mul (same shapes)                                      */
/* ------------------------------------------------------------------ */

static const char *const binary_names[] = {"add", "mul", NULL};

static ss_status binary_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_tensor *x = q->in[0], *y = q->in[1];
    char b1[160], b2[160];
    if ((unsigned)q->a->binary > SS_BINARY_MUL)
        FAIL("invalid binary kind %d", (int)q->a->binary);
    if (x->ndim != y->ndim || memcmp(x->shape, y->shape, (size_t)x->ndim * sizeof(int64_t)) != 0)
        FAIL("operand shapes differ: %s and %s", ss_shape_str(x->ndim, x->shape, b1, sizeof b1),
             ss_shape_str(y->ndim, y->shape, b2, sizeof b2));
    if (x->dtype != y->dtype || !ss_dtype_is_float(x->dtype))
        FAIL("operands must share one floating-point dtype (%s, %s)", ss_dtype_name(x->dtype),
             ss_dtype_name(y->dtype));
    ss_op_out_like(s, x, x->dtype);
    return SS_OK;
}

static void binary_work(const ss_work_args *q, ss_work *w)
{
    w->fwd_flops = q->vol;
    w->bwd_flops = 2 * q->vol;
    w->saved_bytes =
        q->op->attrs.binary == SS_BINARY_MUL ? ss_op_operands_bytes(q->g, q->op, q->t, 0, 2) : 0;
}

static ss_status binary_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    int e = 0;
    ss_status st = ss_attr_enum(r, "function", 1, binary_names, &e);
    a->binary = (ss_binary_kind)e;
    return st;
}

static void binary_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    (void)g;
    ss_attr_put_str(w, "function", binary_names[op->attrs.binary == SS_BINARY_MUL]);
}

const ss_op_class ss_op_class_binary = {
    .type = SS_OP_BINARY,
    .name = "binary",
    .arity = 2,
    .infer = binary_infer,
    .split_mask = ss_op_mask_all,
    .input_region = ss_op_region_tile,
    .work = binary_work,
    .keys = function_keys,
    .read_attrs = binary_read,
    .write_attrs = binary_write,
};

/* ------------------------------------------------------------------ */
/* dropout                                                             */
/* ------------------------------------------------------------------ */

static ss_status dropout_infer(const ss_infer_args *q, ss_op_shape *s)
{
    if (!(q->a->rate >= 0.0 && q->a->rate < 1.0))
        FAIL("rate %g must be in [0, 1)", q->a->rate);
    return infer_float_like(q, s);
}

static void dropout_work(const ss_work_args *q, ss_work *w)
{
    w->fwd_flops = 2 * q->vol;
    w->bwd_flops = 4 * q->vol;
    w->saved_bytes = q->vol; /* one byte of mask per element */
}

static const char *const dropout_keys[] = {SS_OP_COMMON_KEYS, "rate", NULL};

static ss_status dropout_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    return ss_attr_num(r, "rate", 1, 0.0, 0.999999, &a->rate);
}

static void dropout_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    (void)g;
    ss_attr_put_real(w, "rate", op->attrs.rate);
}

const ss_op_class ss_op_class_dropout = {
    .type = SS_OP_DROPOUT,
    .name = "dropout",
    .arity = 1,
    .infer = dropout_infer,
    .split_mask = ss_op_mask_all,
    .input_region = ss_op_region_tile,
    .work = dropout_work,
    .keys = dropout_keys,
    .read_attrs = dropout_read,
    .write_attrs = dropout_write,
};

/* ------------------------------------------------------------------ */
/* softmax: over attrs.axis                                            */
/* ------------------------------------------------------------------ */

static ss_status softmax_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_tensor *x = q->in[0];
    if (ss_op_axis(q->a->axis, x->ndim) < 0)
        FAIL("axis %d out of range for %d dims", q->a->axis, x->ndim);
    return infer_float_like(q, s);
}

/* The tile, with the whole axis. */
static void softmax_region(const ss_region_args *q, ss_region *out)
{
    int ax = ss_op_axis(q->op->attrs.axis, q->o->ndim);
    *out = q->t->out;
    if (ax >= 0)
        out->r[ax] = ss_range_make(0, q->T->shape[ax]);
}

static void softmax_work(const ss_work_args *q, ss_work *w)
{
    w->fwd_flops = 5 * q->vol;
    w->bwd_flops = 10 * q->vol;
    w->saved_bytes = q->vol * q->osz;
}

static const char *const softmax_keys[] = {SS_OP_COMMON_KEYS, "axis", NULL};

const ss_op_class ss_op_class_softmax = {
    .type = SS_OP_SOFTMAX,
    .name = "softmax",
    .arity = 1,
    .infer = softmax_infer,
    .split_mask = ss_op_mask_but_axis,
    .input_region = softmax_region,
    .work = softmax_work,
    .keys = softmax_keys,
    .read_attrs = ss_op_read_axis,
    .write_attrs = ss_op_write_axis,
};

/* ------------------------------------------------------------------ */
/* layernorm: [..., h], gamma/beta[h] over the last dim                */
/* ------------------------------------------------------------------ */

static ss_status layernorm_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_tensor *x = q->in[0];
    ss_status st = infer_float_like(q, s);
    if (st)
        return st;
    ss_op_add_weight1(s, "gamma", x->shape[x->ndim - 1], x->dtype);
    ss_op_add_weight1(s, "beta", x->shape[x->ndim - 1], x->dtype);
    return SS_OK;
}

/* Every dim but the normalised last one. */
static unsigned layernorm_mask(const ss_graph *g, const ss_op *op, const ss_tensor *o)
{
    int n = o->ndim;
    return ss_op_mask_all(g, op, o) & ~(1u << (n - 1));
}

/* x = the tile with the whole last dim; gamma/beta whole. */
static void layernorm_region(const ss_region_args *q, ss_region *out)
{
    if (q->w < 0) {
        int n = q->o->ndim;
        *out = q->t->out;
        out->r[n - 1] = ss_range_make(0, q->T->shape[n - 1]);
    }
}

static void layernorm_work(const ss_work_args *q, ss_work *w)
{
    w->fwd_flops = 8 * q->vol;
    w->bwd_flops = 16 * q->vol;
    w->saved_bytes = q->x_bytes;
}

static const char *const layernorm_keys[] = {SS_OP_COMMON_KEYS, NULL};

const ss_op_class ss_op_class_layernorm = {
    .type = SS_OP_LAYERNORM,
    .name = "layernorm",
    .arity = 1,
    .infer = layernorm_infer,
    .split_mask = layernorm_mask,
    .input_region = layernorm_region,
    .work = layernorm_work,
    .keys = layernorm_keys,
};

/* ------------------------------------------------------------------ */
/* rmsnorm: [..., h], gamma[h] over the last dim (no mean, no beta)    */
/* ------------------------------------------------------------------ */

static ss_status rmsnorm_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_tensor *x = q->in[0];
    ss_status st = infer_float_like(q, s);
    if (st)
        return st;
    ss_op_add_weight1(s, "gamma", x->shape[x->ndim - 1], x->dtype);
    return SS_OK;
}

/* Square and sum, scale by the reciprocal root, multiply by gamma. */
static void rmsnorm_work(const ss_work_args *q, ss_work *w)
{
    w->fwd_flops = 4 * q->vol;
    w->bwd_flops = 8 * q->vol;
    w->saved_bytes = q->x_bytes;
}

const ss_op_class ss_op_class_rmsnorm = {
    .type = SS_OP_RMSNORM,
    .name = "rmsnorm",
    .arity = 1,
    .infer = rmsnorm_infer,
    .split_mask = layernorm_mask,
    .input_region = layernorm_region,
    .work = rmsnorm_work,
    .keys = layernorm_keys,
};
