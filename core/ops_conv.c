/*
 * ops_conv.c — operator table entries of the NCHW image types: conv2d,
 * pool2d and batchnorm.
 *
 * Conv and pool share the window arithmetic: an output range needs the
 * kernel windows of the input, clamped to the unpadded input, so splitting
 * the spatial dims costs a halo and never reads outside the tensor. Each
 * entry keeps its type's whole behaviour (op_table.h).
 */
#include "op_table.h"

#define FAIL(...) return ss_op_fail(q, __VA_ARGS__)
#define MAX_DIM SS_ATTR_MAX_DIM

static const ss_dim_kind nchw[4] = {SS_DIM_SAMPLE, SS_DIM_PARAMETER, SS_DIM_ATTRIBUTE,
                                    SS_DIM_ATTRIBUTE};

/* Conv/pool output extent; 0 if the (padded) input is smaller than the kernel. */
static int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t p)
{
    if (in + 2 * p < k)
        return 0;
    return (in + 2 * p - k) / s + 1;
}

/* Output [N, oc, H', W'] of a kernel window over NCHW input x. */
static ss_status infer_window(const ss_infer_args *q, const ss_tensor *x, int64_t oc,
                              ss_op_shape *s)
{
    const ss_op_attrs *a = q->a;
    if (x->ndim != 4)
        FAIL("input '%s' must be NCHW (4 dims), has %d", x->name, x->ndim);
    int64_t o[4] = {x->shape[0], oc, 0, 0};
    for (int i = 0; i < 2; i++) {
        int64_t k = a->kernel[i], st = a->stride[i] ? a->stride[i] : 1, p = a->pad[i];
        if (k <= 0)
            FAIL("kernel[%d] = %lld must be > 0", i, (long long)k);
        if (st < 0 || p < 0)
            FAIL("stride and pad must be >= 0");
        if (p >= k)
            FAIL("pad[%d] = %lld must be smaller than the kernel (%lld)", i, (long long)p,
                 (long long)k);
        o[2 + i] = window_out(x->shape[2 + i], k, st, p);
        if (o[2 + i] <= 0)
            FAIL("kernel %lldx%lld is larger than the padded input %lldx%lld",
                 (long long)a->kernel[0], (long long)a->kernel[1],
                 (long long)(x->shape[2] + 2 * a->pad[0]), (long long)(x->shape[3] + 2 * a->pad[1]));
    }
    ss_op_add_out(s, 4, o, nchw, x->dtype);
    return SS_OK;
}

/* Input rows a conv/pool output range needs: the kernel windows, clamped to
 * the unpadded input [0, in). */
static ss_range window(ss_range out, int64_t k, int64_t s, int64_t p, int64_t in)
{
    if (out.hi <= out.lo)
        return ss_range_make(0, 0);
    if (s <= 0)
        s = 1;
    int64_t lo = out.lo * s - p, hi = (out.hi - 1) * s - p + k;
    if (lo < 0)
        lo = 0;
    if (hi > in)
        hi = in;
    return hi > lo ? ss_range_make(lo, hi) : ss_range_make(0, 0);
}

/* The spatial dims of x's region for the tile's output rows and columns. */
static void window_region(const ss_region_args *q, ss_region *out)
{
    const ss_op_attrs *a = &q->op->attrs;
    for (int i = 0; i < 2; i++)
        out->r[2 + i] = window(q->t->out.r[2 + i], a->kernel[i], a->stride[i], a->pad[i],
                               q->T->shape[2 + i]);
}

/* kernel, stride and pad (shared by conv2d and pool2d). */
static ss_status window_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    int n = 0;
    int64_t v2[2];
    ss_status st = ss_attr_ints(r, "kernel", 1, 2, 2, 1, MAX_DIM, a->kernel, &n);
    v2[0] = v2[1] = 1;
    if (!st)
        st = ss_attr_ints(r, "stride", 0, 2, 2, 0, MAX_DIM, v2, &n);
    a->stride[0] = v2[0];
    a->stride[1] = v2[1];
    if (!st)
        st = ss_attr_ints(r, "pad", 0, 2, 2, 0, MAX_DIM, a->pad, &n);
    return st;
}

static void window_write(ss_attr_writer *w, const ss_op_attrs *a)
{
    ss_attr_put_ints(w, "kernel", a->kernel, 2);
    ss_attr_put_ints(w, "stride", a->stride, 2);
    ss_attr_put_ints(w, "pad", a->pad, 2);
}

/* ------------------------------------------------------------------ */
/* conv2d: NCHW x, W[O, C/groups, kh, kw] (+ b[O]) -> [N, O, H', W']    */
/* ------------------------------------------------------------------ */

static ss_status conv_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_op_attrs *a = q->a;
    const ss_tensor *x = q->in[0];
    if (!ss_dtype_is_float(x->dtype))
        FAIL("input '%s' must be floating point", x->name);
    int64_t g = a->groups ? a->groups : 1;
    if (a->out_channels <= 0 || g < 0)
        FAIL("out_channels = %lld must be > 0 and groups >= 0", (long long)a->out_channels);
    if (x->ndim == 4 && (x->shape[1] % g || a->out_channels % g))
        FAIL("groups = %lld must divide input channels %lld and out_channels %lld",
             (long long)g, (long long)x->shape[1], (long long)a->out_channels);
    ss_status st = infer_window(q, x, a->out_channels, s);
    if (st)
        return st;
    int64_t w[4] = {a->out_channels, x->shape[1] / g, a->kernel[0], a->kernel[1]};
    ss_op_add_weight(s, "weight", 4, w, x->dtype);
    if (a->use_bias)
        ss_op_add_weight1(s, "bias", a->out_channels, x->dtype);
    return SS_OK;
}

/* The input channels; none for a grouped convolution. */
static int64_t conv_contraction(const ss_graph *g, const ss_op *op, const ss_tensor *x)
{
    (void)g;
    return (op->attrs.groups <= 1) ? x->shape[1] : 0;
}

/* x [n, red (groups: the groups of the out channels), window rows/cols],
 * W [o, red or all, all, all], b [o]. */
static void conv_region(const ss_region_args *q, ss_region *out)
{
    const ss_region *tr = &q->t->out;
    int64_t g_ = q->op->attrs.groups ? q->op->attrs.groups : 1;
    ss_range oc = tr->r[1];
    if (q->w < 0) {
        out->r[0] = tr->r[0];
        if (g_ <= 1) {
            out->r[1] = q->t->red;
        } else {
            int64_t og = q->o->shape[1] / g_, cg = q->T->shape[1] / g_;
            out->r[1] = ss_range_len(oc)
                            ? ss_range_make(oc.lo / og * cg, ((oc.hi - 1) / og + 1) * cg)
                            : ss_range_make(0, 0);
        }
        window_region(q, out);
    } else if (q->w == 0) {
        out->r[0] = oc;
        if (g_ <= 1)
            out->r[1] = q->t->red;
    } else {
        out->r[0] = oc;
    }
}

static void conv_work(const ss_work_args *q, ss_work *w)
{
    const ss_op_attrs *a = &q->op->attrs;
    const ss_tensor *x = ss_graph_tensor(q->g, q->op->inputs[0]);
    int64_t g_ = a->groups ? a->groups : 1;
    double c = g_ <= 1 ? q->red : (double)(x->shape[1] / g_);
    double mm = 2 * q->vol * c * (double)(a->kernel[0] * a->kernel[1]);
    double bias = (a->use_bias && q->first_red) ? q->vol : 0;
    w->fwd_flops = mm + bias;
    w->bwd_flops = 2 * mm + bias;
    w->saved_bytes = q->x_bytes;
}

static const char *const conv_keys[] = {SS_OP_COMMON_KEYS, "out_channels", "kernel", "stride",
                                        "pad", "groups", "use_bias", NULL};

static ss_status conv_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    a->groups = 1;
    ss_status st = ss_attr_i64(r, "out_channels", 1, 1, MAX_DIM, &a->out_channels);
    if (!st)
        st = ss_attr_i64(r, "groups", 0, 0, MAX_DIM, &a->groups);
    if (!st)
        st = ss_attr_bool(r, "use_bias", &a->use_bias);
    if (!st)
        st = window_read(r, a);
    return st;
}

static void conv_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    (void)g;
    ss_attr_put_int(w, "out_channels", op->attrs.out_channels);
    ss_attr_put_int(w, "groups", op->attrs.groups);
    ss_attr_put_bool(w, "use_bias", op->attrs.use_bias);
    window_write(w, &op->attrs);
}

const ss_op_class ss_op_class_conv2d = {
    .type = SS_OP_CONV2D,
    .name = "conv2d",
    .arity = 1,
    .infer = conv_infer,
    .split_mask = ss_op_mask_all,
    .contraction = conv_contraction,
    .input_region = conv_region,
    .work = conv_work,
    .keys = conv_keys,
    .read_attrs = conv_read,
    .write_attrs = conv_write,
};

/* ------------------------------------------------------------------ */
/* pool2d: NCHW, max or avg                                            */
/* ------------------------------------------------------------------ */

static const char *const pool_names[] = {"max", "avg", NULL};

static ss_status pool_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_tensor *x = q->in[0];
    if ((unsigned)q->a->pool > SS_POOL_AVG)
        FAIL("invalid pool kind %d", (int)q->a->pool);
    if (!ss_dtype_is_float(x->dtype))
        FAIL("input '%s' must be floating point", x->name);
    return infer_window(q, x, x->ndim == 4 ? x->shape[1] : 0, s);
}

/* x [n, c, window rows/cols]. */
static void pool_region(const ss_region_args *q, ss_region *out)
{
    out->r[0] = q->t->out.r[0];
    out->r[1] = q->t->out.r[1];
    window_region(q, out);
}

static void pool_work(const ss_work_args *q, ss_work *w)
{
    const ss_op_attrs *a = &q->op->attrs;
    w->fwd_flops = q->vol * (double)(a->kernel[0] * a->kernel[1]);
    w->bwd_flops = w->fwd_flops;
    w->saved_bytes = a->pool == SS_POOL_MAX ? q->x_bytes : 0;
}

static const char *const pool_keys[] = {SS_OP_COMMON_KEYS, "pool", "kernel", "stride", "pad",
                                        NULL};

static ss_status pool_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    int e = 0;
    ss_status st = ss_attr_enum(r, "pool", 1, pool_names, &e);
    a->pool = (ss_pool_kind)e;
    if (!st)
        st = window_read(r, a);
    return st;
}

static void pool_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    (void)g;
    ss_attr_put_str(w, "pool", pool_names[op->attrs.pool == SS_POOL_AVG]);
    window_write(w, &op->attrs);
}

const ss_op_class ss_op_class_pool2d = {
    .type = SS_OP_POOL2D,
    .name = "pool2d",
    .arity = 1,
    .infer = pool_infer,
    .split_mask = ss_op_mask_all,
    .input_region = pool_region,
    .work = pool_work,
    .keys = pool_keys,
    .read_attrs = pool_read,
    .write_attrs = pool_write,
};

/* ------------------------------------------------------------------ */
/* batchnorm: NCHW, gamma/beta[C]                                      */
/* ------------------------------------------------------------------ */

static ss_status batchnorm_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_tensor *x = q->in[0];
    if (x->ndim != 4 || !ss_dtype_is_float(x->dtype))
        FAIL("input '%s' must be a floating-point NCHW tensor", x->name);
    ss_op_add_out(s, 4, x->shape, nchw, x->dtype);
    ss_op_add_weight1(s, "gamma", x->shape[1], x->dtype);
    ss_op_add_weight1(s, "beta", x->shape[1], x->dtype);
    return SS_OK;
}

/* x = the tile, gamma/beta [c]. */
static void batchnorm_region(const ss_region_args *q, ss_region *out)
{
    if (q->w < 0)
        *out = q->t->out;
    else
        out->r[0] = q->t->out.r[1];
}

static void batchnorm_work(const ss_work_args *q, ss_work *w)
{
    w->fwd_flops = 8 * q->vol;
    w->bwd_flops = 16 * q->vol;
    w->saved_bytes = q->x_bytes;
}

static const char *const batchnorm_keys[] = {SS_OP_COMMON_KEYS, NULL};

const ss_op_class ss_op_class_batchnorm = {
    .type = SS_OP_BATCHNORM,
    .name = "batchnorm",
    .arity = 1,
    .infer = batchnorm_infer,
    .split_mask = ss_op_mask_all,
    .input_region = batchnorm_region,
    .work = batchnorm_work,
    .keys = batchnorm_keys,
};
