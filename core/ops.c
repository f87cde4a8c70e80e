/*
 * ops.c — operator semantics, part 1: shape inference (outputs, own weights,
 * dim kinds, dtypes), which output dims may be split, and the contraction dim.
 *
 * Invariant: ss_op_infer is a pure function of (type, attrs, input tensors);
 * every tensor it describes has 1..SS_MAX_DIMS dims, every dim > 0 and at most
 * 2^48 elements, so later arithmetic on volumes never overflows int64.
 * Regions and work (the other half of the semantics) are in ops_region.c.
 */
#include "ops.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Shorthand used by every check below: fail with the op named. */
#define FAIL(...) return opfail(d, name, type, __VA_ARGS__)

static ss_status opfail(ss_diag *d, const char *name, ss_op_type type, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static ss_status opfail(ss_diag *d, const char *name, ss_op_type type, const char *fmt, ...)
{
    char buf[SS_DIAG_MSG_MAX - 160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return ss_diag_set(d, SS_ERR_INVALID, "op '%s' (%s): %s", name ? name : "?",
                       ss_op_type_name(type), buf);
}

int ss_op_axis(int axis, int ndim)
{
    int a = axis < 0 ? axis + ndim : axis;
    return (a >= 0 && a < ndim) ? a : -1;
}

static int is_float(ss_dtype t) { return t == SS_F32 || t == SS_F16 || t == SS_BF16; }
static int is_int(ss_dtype t) { return t == SS_I32 || t == SS_I64; }

/* "[2, 3, 4]" into buf (for messages). */
static const char *shape_str(int ndim, const int64_t *s, char *buf, size_t n)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)s[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

/* Set a tensor description: ndim dims from shape, kinds, dtype. */
static void set_t(ss_tensor *t, int ndim, const int64_t *shape, const ss_dim_kind *kind,
                  ss_dtype dt)
{
    memset(t, 0, sizeof *t);
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->kind[i] = kind ? kind[i] : SS_DIM_PARAMETER;
    }
    t->dtype = dt;
    t->producer = -1;
}

/* Append an own weight of the given shape (kinds: parameter). */
static void add_w(ss_op_shape *s, const char *suffix, int ndim, const int64_t *shape,
                  ss_dtype dt)
{
    ss_tensor *t = &s->w[s->n_w++];
    set_t(t, ndim, shape, NULL, dt);
    t->is_weight = 1;
    snprintf(t->name, sizeof t->name, "%s", suffix);
}

static void add_w1(ss_op_shape *s, const char *suffix, int64_t a, ss_dtype dt)
{
    add_w(s, suffix, 1, &a, dt);
}

static void add_w2(ss_op_shape *s, const char *suffix, int64_t a, int64_t b, ss_dtype dt)
{
    int64_t sh[2] = {a, b};
    add_w(s, suffix, 2, sh, dt);
}

/* Output equal to tensor x (shape, kinds) with dtype dt. */
static ss_tensor *out_like(ss_op_shape *s, const ss_tensor *x, ss_dtype dt)
{
    ss_tensor *t = &s->out[s->n_out++];
    set_t(t, x->ndim, x->shape, x->kind, dt);
    return t;
}

/* Check every described tensor: 1..SS_MAX_DIMS dims, dims > 0, at most 2^48
 * elements (checked without overflow). */
static ss_status check_sizes(const char *name, ss_op_type type, const ss_op_shape *s,
                             ss_diag *d)
{
    for (int k = 0; k < s->n_out + s->n_w; k++) {
        const ss_tensor *t = k < s->n_out ? &s->out[k] : &s->w[k - s->n_out];
        const char *what = k < s->n_out ? "output" : "weight";
        char buf[160];
        if (t->ndim < 1 || t->ndim > SS_MAX_DIMS)
            FAIL("%s has %d dims (1..%d allowed)", what, t->ndim, SS_MAX_DIMS);
        int64_t vol = 1;
        for (int i = 0; i < t->ndim; i++) {
            if (t->shape[i] <= 0)
                FAIL("%s shape %s has a dim <= 0", what, shape_str(t->ndim, t->shape, buf, sizeof buf));
            if (t->shape[i] > SS_MAX_ELEMENTS / vol)
                FAIL("%s shape %s is absurdly large (more than 2^48 elements)", what,
                     shape_str(t->ndim, t->shape, buf, sizeof buf));
            vol *= t->shape[i];
        }
    }
    return SS_OK;
}

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

/* Expected operand count for type (and lstm mode); -1: concat (1..MAX). */
static int expected_inputs(ss_op_type type, const ss_op_attrs *a)
{
    switch (type) {
    case SS_OP_INPUT: return 0;
    case SS_OP_BATCH_MATMUL:
    case SS_OP_BINARY:
    case SS_OP_SOFTMAX_CE: return 2;
    case SS_OP_ATTENTION: return 3;
    case SS_OP_LSTM: return a->lstm_mode == SS_LSTM_CELL ? 3 : 1;
    case SS_OP_CONCAT: return -1;
    default: return 1;
    }
}

/* Conv/pool output extent; 0 if the (padded) input is smaller than the kernel. */
static int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t p)
{
    if (in + 2 * p < k)
        return 0;
    return (in + 2 * p - k) / s + 1;
}

static ss_status infer_window(const char *name, ss_op_type type, const ss_op_attrs *a,
                              const ss_tensor *x, int64_t oc, ss_op_shape *s, ss_diag *d)
{
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
    static const ss_dim_kind nchw[4] = {SS_DIM_SAMPLE, SS_DIM_PARAMETER, SS_DIM_ATTRIBUTE,
                                        SS_DIM_ATTRIBUTE};
    set_t(&s->out[s->n_out++], 4, o, nchw, x->dtype);
    return SS_OK;
}

static ss_status infer_linear(const char *name, ss_op_type type, const ss_op_attrs *a,
                              const ss_tensor *x, ss_op_shape *s, ss_diag *d)
{
    if (!is_float(x->dtype))
        FAIL("input '%s' must be floating point, is %s", x->name, ss_dtype_name(x->dtype));
    if (a->out_features <= 0)
        FAIL("out_features = %lld must be > 0", (long long)a->out_features);
    int64_t in = x->shape[x->ndim - 1];
    ss_tensor *t = out_like(s, x, x->dtype);
    t->shape[t->ndim - 1] = a->out_features;
    t->kind[t->ndim - 1] = SS_DIM_PARAMETER;
    if (a->trans_b)
        add_w2(s, "weight", a->out_features, in, x->dtype);
    else
        add_w2(s, "weight", in, a->out_features, x->dtype);
    if (a->use_bias)
        add_w1(s, "bias", a->out_features, x->dtype);
    return SS_OK;
}

static ss_status infer_bmm(const char *name, ss_op_type type, const ss_op_attrs *a,
                           const ss_tensor *A, const ss_tensor *B, ss_op_shape *s, ss_diag *d)
{
    char b1[160], b2[160];
    if (A->ndim < 2 || A->ndim != B->ndim)
        FAIL("operands must have the same number (>= 2) of dims: %s and %s",
             shape_str(A->ndim, A->shape, b1, sizeof b1), shape_str(B->ndim, B->shape, b2, sizeof b2));
    if (!is_float(A->dtype) || A->dtype != B->dtype)
        FAIL("operands must share one floating-point dtype (%s, %s)", ss_dtype_name(A->dtype),
             ss_dtype_name(B->dtype));
    int n = A->ndim;
    for (int i = 0; i < n - 2; i++)
        if (A->shape[i] != B->shape[i])
            FAIL("batch dims differ: %s and %s", shape_str(n, A->shape, b1, sizeof b1),
                 shape_str(n, B->shape, b2, sizeof b2));
    int am = a->trans_a ? n - 1 : n - 2, ak = a->trans_a ? n - 2 : n - 1;
    int bk = a->trans_b ? n - 1 : n - 2, bn = a->trans_b ? n - 2 : n - 1;
    if (A->shape[ak] != B->shape[bk])
        FAIL("contraction dims differ: %s%s and %s%s", shape_str(n, A->shape, b1, sizeof b1),
             a->trans_a ? "^T" : "", shape_str(n, B->shape, b2, sizeof b2), a->trans_b ? "^T" : "");
    ss_tensor *t = out_like(s, A, A->dtype);
    t->shape[n - 2] = A->shape[am];
    t->kind[n - 2] = A->kind[am];
    t->shape[n - 1] = B->shape[bn];
    t->kind[n - 1] = B->kind[bn];
    return SS_OK;
}

static ss_status infer_conv(const char *name, ss_op_type type, const ss_op_attrs *a,
                            const ss_tensor *x, ss_op_shape *s, ss_diag *d)
{
    if (!is_float(x->dtype))
        FAIL("input '%s' must be floating point", x->name);
    int64_t g = a->groups ? a->groups : 1;
    if (a->out_channels <= 0 || g < 0)
        FAIL("out_channels = %lld must be > 0 and groups >= 0", (long long)a->out_channels);
    if (x->ndim == 4 && (x->shape[1] % g || a->out_channels % g))
        FAIL("groups = %lld must divide input channels %lld and out_channels %lld",
             (long long)g, (long long)x->shape[1], (long long)a->out_channels);
    ss_status st = infer_window(name, type, a, x, a->out_channels, s, d);
    if (st)
        return st;
    int64_t w[4] = {a->out_channels, x->shape[1] / g, a->kernel[0], a->kernel[1]};
    add_w(s, "weight", 4, w, x->dtype);
    if (a->use_bias)
        add_w1(s, "bias", a->out_channels, x->dtype);
    return SS_OK;
}

static ss_status infer_lstm(const char *name, ss_op_type type, const ss_op_attrs *a,
                            const ss_tensor *const *in, ss_op_shape *s, ss_diag *d)
{
    const ss_tensor *x = in[0];
    int64_t H = a->hidden;
    if (H <= 0)
        FAIL("hidden = %lld must be > 0", (long long)H);
    if (!is_float(x->dtype))
        FAIL("input '%s' must be floating point", x->name);
    int64_t inf;
    if (a->lstm_mode == SS_LSTM_SEQUENCE) {
        if (x->ndim != 3)
            FAIL("sequence input '%s' must be [N, S, in], has %d dims", x->name, x->ndim);
        inf = x->shape[2];
        static const ss_dim_kind k3[3] = {SS_DIM_SAMPLE, SS_DIM_ATTRIBUTE, SS_DIM_PARAMETER};
        static const ss_dim_kind k2[2] = {SS_DIM_SAMPLE, SS_DIM_PARAMETER};
        if (a->return_sequences) {
            int64_t sh[3] = {x->shape[0], x->shape[1], H};
            set_t(&s->out[s->n_out++], 3, sh, k3, x->dtype);
        } else {
            int64_t sh[2] = {x->shape[0], H};
            set_t(&s->out[s->n_out++], 2, sh, k2, x->dtype);
        }
    } else if (a->lstm_mode == SS_LSTM_CELL) {
        if (x->ndim != 2)
            FAIL("cell input '%s' must be [N, in], has %d dims", x->name, x->ndim);
        for (int i = 1; i < 3; i++)
            if (in[i]->ndim != 2 || in[i]->shape[0] != x->shape[0] || in[i]->shape[1] != H ||
                in[i]->dtype != x->dtype)
                FAIL("state '%s' must be [%lld, %lld] %s", in[i]->name, (long long)x->shape[0],
                     (long long)H, ss_dtype_name(x->dtype));
        inf = x->shape[1];
        static const ss_dim_kind k2[2] = {SS_DIM_SAMPLE, SS_DIM_PARAMETER};
        int64_t sh[2] = {x->shape[0], H};
        set_t(&s->out[s->n_out++], 2, sh, k2, x->dtype);
        set_t(&s->out[s->n_out++], 2, sh, k2, x->dtype);
    } else {
        FAIL("unknown lstm_mode %d", (int)a->lstm_mode);
    }
    add_w2(s, "weight", inf + H, 4 * H, x->dtype);
    add_w1(s, "bias", 4 * H, x->dtype);
    return SS_OK;
}

static ss_status infer_attention(const char *name, ss_op_type type, const ss_op_attrs *a,
                                 const ss_tensor *const *in, ss_op_shape *s, ss_diag *d)
{
    const ss_tensor *q = in[0], *k = in[1], *v = in[2];
    char b1[160], b2[160];
    if (q->ndim != 3 || k->ndim != 3 || v->ndim != 3)
        FAIL("q, k, v must be [N, S, E]");
    if (!is_float(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
        FAIL("q, k, v must share one floating-point dtype");
    if (k->shape[0] != q->shape[0] || k->shape[2] != q->shape[2] ||
        memcmp(k->shape, v->shape, 3 * sizeof(int64_t)) != 0)
        FAIL("k %s and v %s must be [N, Sk, E] matching q %s",
             shape_str(3, k->shape, b1, sizeof b1), shape_str(3, v->shape, b2, sizeof b2),
             shape_str(3, q->shape, (char[160]){0}, 160));
    int64_t E = q->shape[2];
    if (a->heads <= 0 || E % a->heads)
        FAIL("heads = %lld must be > 0 and divide the embedding dim %lld", (long long)a->heads,
             (long long)E);
    if (a->causal && k->shape[1] != q->shape[1])
        FAIL("causal attention needs as many keys (%lld) as queries (%lld)",
             (long long)k->shape[1], (long long)q->shape[1]);
    out_like(s, q, q->dtype);
    static const char *const wn[4] = {"wq", "wk", "wv", "wo"};
    static const char *const bn[4] = {"bq", "bk", "bv", "bo"};
    for (int i = 0; i < 4; i++)
        add_w2(s, wn[i], E, E, q->dtype);
    if (a->use_bias)
        for (int i = 0; i < 4; i++)
            add_w1(s, bn[i], E, q->dtype);
    return SS_OK;
}

static ss_status infer_reshape(const char *name, ss_op_type type, const ss_op_attrs *a,
                               const ss_tensor *x, ss_op_shape *s, ss_diag *d)
{
    char b1[160], b2[160];
    if (a->ndim < 1 || a->ndim > SS_MAX_DIMS)
        FAIL("target shape has %d dims (1..%d allowed)", a->ndim, SS_MAX_DIMS);
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] <= 0)
            FAIL("target shape %s has a dim <= 0", shape_str(a->ndim, a->shape, b1, sizeof b1));
    ss_reshape_groups gr;
    if (ss_reshape_group(x->ndim, x->shape, a->ndim, a->shape, &gr) < 0)
        FAIL("cannot reshape %s to %s (element counts differ)",
             shape_str(x->ndim, x->shape, b1, sizeof b1), shape_str(a->ndim, a->shape, b2, sizeof b2));
    ss_tensor *t = &s->out[s->n_out++];
    set_t(t, a->ndim, a->shape, NULL, x->dtype);
    for (int k = 0; k < gr.n; k++) {
        int one = gr.in_hi[k] - gr.in_lo[k] == 1 && gr.out_hi[k] - gr.out_lo[k] == 1;
        for (int j = gr.out_lo[k]; j < gr.out_hi[k]; j++)
            t->kind[j] = (one || j == gr.out_lo[k]) ? x->kind[gr.in_lo[k]]
                                                     : x->kind[gr.in_hi[k] - 1];
    }
    return SS_OK;
}

/* Per-type inference once operand count and existence are checked. */
static ss_status infer_type(const char *name, ss_op_type type, const ss_op_attrs *a,
                            const ss_tensor *const *in, int n_in, ss_op_shape *s, ss_diag *d)
{
    const ss_tensor *x = n_in ? in[0] : NULL;
    char b1[160], b2[160];
    switch (type) {
    case SS_OP_INPUT: {
        if (a->ndim < 1 || a->ndim > SS_MAX_DIMS)
            FAIL("shape has %d dims (1..%d allowed)", a->ndim, SS_MAX_DIMS);
        if ((unsigned)a->dtype >= SS_DTYPE_COUNT)
            FAIL("invalid dtype %d", (int)a->dtype);
        for (int i = 0; i < a->ndim; i++)
            if ((unsigned)a->kind[i] > SS_DIM_PARAMETER)
                FAIL("invalid dim kind %d", (int)a->kind[i]);
        set_t(&s->out[s->n_out++], a->ndim, a->shape, a->kind, a->dtype);
        return SS_OK;
    }
    case SS_OP_LINEAR: return infer_linear(name, type, a, x, s, d);
    case SS_OP_BATCH_MATMUL: return infer_bmm(name, type, a, in[0], in[1], s, d);
    case SS_OP_CONV2D: return infer_conv(name, type, a, x, s, d);
    case SS_OP_POOL2D:
        if ((unsigned)a->pool > SS_POOL_AVG)
            FAIL("invalid pool kind %d", (int)a->pool);
        if (!is_float(x->dtype))
            FAIL("input '%s' must be floating point", x->name);
        return infer_window(name, type, a, x, x->ndim == 4 ? x->shape[1] : 0, s, d);
    case SS_OP_BATCHNORM: {
        if (x->ndim != 4 || !is_float(x->dtype))
            FAIL("input '%s' must be a floating-point NCHW tensor", x->name);
        static const ss_dim_kind nchw[4] = {SS_DIM_SAMPLE, SS_DIM_PARAMETER, SS_DIM_ATTRIBUTE,
                                            SS_DIM_ATTRIBUTE};
        set_t(&s->out[s->n_out++], 4, x->shape, nchw, x->dtype);
        add_w1(s, "gamma", x->shape[1], x->dtype);
        add_w1(s, "beta", x->shape[1], x->dtype);
        return SS_OK;
    }
    case SS_OP_LAYERNORM:
        if (!is_float(x->dtype))
            FAIL("input '%s' must be floating point", x->name);
        out_like(s, x, x->dtype);
        add_w1(s, "gamma", x->shape[x->ndim - 1], x->dtype);
        add_w1(s, "beta", x->shape[x->ndim - 1], x->dtype);
        return SS_OK;
    case SS_OP_UNARY:
        if ((unsigned)a->unary > SS_UNARY_SIGMOID)
            FAIL("invalid unary kind %d", (int)a->unary);
        if (!is_float(x->dtype))
            FAIL("input '%s' must be floating point", x->name);
        out_like(s, x, x->dtype);
        return SS_OK;
    case SS_OP_BINARY:
        if ((unsigned)a->binary > SS_BINARY_MUL)
            FAIL("invalid binary kind %d", (int)a->binary);
        if (in[0]->ndim != in[1]->ndim ||
            memcmp(in[0]->shape, in[1]->shape, (size_t)in[0]->ndim * sizeof(int64_t)) != 0)
            FAIL("operand shapes differ: %s and %s",
                 shape_str(in[0]->ndim, in[0]->shape, b1, sizeof b1),
                 shape_str(in[1]->ndim, in[1]->shape, b2, sizeof b2));
        if (in[0]->dtype != in[1]->dtype || !is_float(x->dtype))
            FAIL("operands must share one floating-point dtype (%s, %s)",
                 ss_dtype_name(in[0]->dtype), ss_dtype_name(in[1]->dtype));
        out_like(s, x, x->dtype);
        return SS_OK;
    case SS_OP_SOFTMAX:
        if (ss_op_axis(a->axis, x->ndim) < 0)
            FAIL("axis %d out of range for %d dims", a->axis, x->ndim);
        if (!is_float(x->dtype))
            FAIL("input '%s' must be floating point", x->name);
        out_like(s, x, x->dtype);
        return SS_OK;
    case SS_OP_DROPOUT:
        if (!(a->rate >= 0.0 && a->rate < 1.0))
            FAIL("rate %g must be in [0, 1)", a->rate);
        if (!is_float(x->dtype))
            FAIL("input '%s' must be floating point", x->name);
        out_like(s, x, x->dtype);
        return SS_OK;
    case SS_OP_EMBEDDING: {
        if (!is_int(x->dtype))
            FAIL("ids '%s' must be i32 or i64, are %s", x->name, ss_dtype_name(x->dtype));
        if (x->ndim >= SS_MAX_DIMS)
            FAIL("ids '%s' have too many dims (%d)", x->name, x->ndim);
        if (a->vocab <= 0 || a->dim <= 0)
            FAIL("vocab = %lld and dim = %lld must be > 0", (long long)a->vocab, (long long)a->dim);
        if ((unsigned)a->dtype >= SS_DTYPE_COUNT || !is_float(a->dtype))
            FAIL("dtype must be floating point");
        ss_tensor *t = out_like(s, x, a->dtype);
        t->ndim++;
        t->shape[x->ndim] = a->dim;
        t->kind[x->ndim] = SS_DIM_PARAMETER;
        add_w2(s, "weight", a->vocab, a->dim, a->dtype);
        return SS_OK;
    }
    case SS_OP_CONCAT: {
        int ax = ss_op_axis(a->axis, x->ndim);
        if (ax < 0)
            FAIL("axis %d out of range for %d dims", a->axis, x->ndim);
        int64_t total = 0;
        for (int i = 0; i < n_in; i++) {
            const ss_tensor *y = in[i];
            int ok = y->ndim == x->ndim && y->dtype == x->dtype;
            for (int j = 0; ok && j < x->ndim; j++)
                ok = j == ax || y->shape[j] == x->shape[j];
            if (!ok)
                FAIL("input %d '%s' %s does not match input 0 %s outside axis %d", i, y->name,
                     shape_str(y->ndim, y->shape, b1, sizeof b1),
                     shape_str(x->ndim, x->shape, b2, sizeof b2), ax);
            if (y->shape[ax] > SS_MAX_ELEMENTS - total)
                FAIL("concatenated extent is absurdly large");
            total += y->shape[ax];
        }
        ss_tensor *t = out_like(s, x, x->dtype);
        t->shape[ax] = total;
        return SS_OK;
    }
    case SS_OP_SPLIT: {
        int ax = ss_op_axis(a->axis, x->ndim);
        if (ax < 0)
            FAIL("axis %d out of range for %d dims", a->axis, x->ndim);
        if (a->n_split < 1 || a->n_split > SS_MAX_OUTPUTS)
            FAIL("n_split = %d must be in 1..%d", a->n_split, SS_MAX_OUTPUTS);
        int64_t sum = 0;
        for (int i = 0; i < a->n_split; i++) {
            if (a->split_sizes[i] <= 0 || a->split_sizes[i] > x->shape[ax])
                FAIL("split_sizes[%d] = %lld must be in 1..%lld", i,
                     (long long)a->split_sizes[i], (long long)x->shape[ax]);
            sum += a->split_sizes[i];
        }
        if (sum != x->shape[ax])
            FAIL("split_sizes sum to %lld, but axis %d has extent %lld", (long long)sum, ax,
                 (long long)x->shape[ax]);
        for (int i = 0; i < a->n_split; i++)
            out_like(s, x, x->dtype)->shape[ax] = a->split_sizes[i];
        return SS_OK;
    }
    case SS_OP_RESHAPE: return infer_reshape(name, type, a, x, s, d);
    case SS_OP_TRANSPOSE: {
        int seen[SS_MAX_DIMS] = {0};
        for (int i = 0; i < x->ndim; i++) {
            int p = a->perm[i];
            if (p < 0 || p >= x->ndim || seen[p]++)
                FAIL("perm is not a permutation of 0..%d", x->ndim - 1);
        }
        ss_tensor *t = out_like(s, x, x->dtype);
        for (int i = 0; i < x->ndim; i++) {
            t->shape[i] = x->shape[a->perm[i]];
            t->kind[i] = x->kind[a->perm[i]];
        }
        return SS_OK;
    }
    case SS_OP_LSTM: return infer_lstm(name, type, a, in, s, d);
    case SS_OP_ATTENTION: return infer_attention(name, type, a, in, s, d);
    case SS_OP_SOFTMAX_CE: {
        const ss_tensor *l = in[1];
        if (x->ndim < 2 || !is_float(x->dtype))
            FAIL("logits '%s' must be floating point with >= 2 dims", x->name);
        if (!is_int(l->dtype))
            FAIL("labels '%s' must be i32 or i64", l->name);
        if (l->ndim != x->ndim - 1 ||
            memcmp(l->shape, x->shape, (size_t)l->ndim * sizeof(int64_t)) != 0)
            FAIL("labels %s must match the logits' leading dims %s",
                 shape_str(l->ndim, l->shape, b1, sizeof b1),
                 shape_str(x->ndim - 1, x->shape, b2, sizeof b2));
        ss_tensor *t = out_like(s, x, SS_F32);
        t->ndim--;
        return SS_OK;
    }
    case SS_OP_TYPE_COUNT: break;
    }
    FAIL("unknown operator type %d", (int)type);
}

ss_status ss_op_infer(const ss_graph *g, const char *name, ss_op_type type,
                      const ss_op_attrs *a, int n_in, const int *inputs, ss_op_shape *out,
                      ss_diag *d)
{
    memset(out, 0, sizeof *out);
    if ((unsigned)type >= SS_OP_TYPE_COUNT)
        FAIL("unknown operator type %d", (int)type);
    int want = expected_inputs(type, a);
    if (want >= 0 && n_in != want)
        FAIL("expects %d input%s, got %d", want, want == 1 ? "" : "s", n_in);
    if (want < 0 && (n_in < 1 || n_in > SS_MAX_INPUTS))
        FAIL("expects 1..%d inputs, got %d", SS_MAX_INPUTS, n_in);
    const ss_tensor *in[SS_MAX_INPUTS];
    for (int i = 0; i < n_in; i++) {
        in[i] = ss_graph_tensor(g, inputs[i]);
        if (!in[i])
            FAIL("input %d refers to tensor id %d, which does not exist", i, inputs[i]);
    }
    ss_status st = infer_type(name, type, a, in, n_in, out, d);
    if (st == SS_OK)
        st = check_sizes(name, type, out, d);
    if (st != SS_OK)
        memset(out, 0, sizeof *out);
    return st;
}

/* ------------------------------------------------------------------ */
/* Split masks and contraction                                         */
/* ------------------------------------------------------------------ */

static const ss_tensor *out0(const ss_graph *g, const ss_op *op)
{
    return op->n_out > 0 ? ss_graph_tensor(g, op->outputs[0]) : NULL;
}

static const ss_tensor *in_t(const ss_graph *g, const ss_op *op, int i)
{
    return i < op->n_in ? ss_graph_tensor(g, op->inputs[i]) : NULL;
}

/* Bit mask of the dims [0, n). */
static unsigned all_dims(int n) { return n > 0 ? (1u << n) - 1u : 0u; }

/* Split mask: see simsearch.h. Rules per type follow the brief of the
 * operator semantics: dims whose split needs no data beyond a tile's share
 * (or only a halo) of each input. */
unsigned ss_op_split_mask(const ss_graph *g, const ss_op *op)
{
    const ss_tensor *o = out0(g, op);
    if (!o)
        return 0;
    int n = o->ndim;
    switch (op->type) {
    case SS_OP_INPUT:
    case SS_OP_LINEAR:
    case SS_OP_BATCH_MATMUL:
    case SS_OP_UNARY:
    case SS_OP_BINARY:
    case SS_OP_DROPOUT:
    case SS_OP_TRANSPOSE:
    case SS_OP_EMBEDDING:
    case SS_OP_SOFTMAX_CE:
    case SS_OP_CONV2D:
    case SS_OP_POOL2D:
    case SS_OP_BATCHNORM:
        return all_dims(n);
    case SS_OP_LAYERNORM:
        return all_dims(n) & ~(1u << (n - 1));
    case SS_OP_SOFTMAX:
    case SS_OP_CONCAT:
    case SS_OP_SPLIT: {
        const ss_tensor *x = in_t(g, op, 0);
        int ax = x ? ss_op_axis(op->attrs.axis, x->ndim) : -1;
        return ax < 0 ? 0 : all_dims(n) & ~(1u << ax);
    }
    case SS_OP_LSTM:
        /* sample and hidden; never time in sequence mode */
        return n == 3 ? (1u << 0) | (1u << 2) : (1u << 0) | (1u << 1);
    case SS_OP_ATTENTION:
        return all_dims(n);
    case SS_OP_RESHAPE: {
        const ss_tensor *x = in_t(g, op, 0);
        ss_reshape_groups gr;
        if (!x || ss_reshape_group(x->ndim, x->shape, o->ndim, o->shape, &gr) < 0)
            return 0;
        unsigned m = 0;
        for (int k = 0; k < gr.n; k++)
            m |= 1u << gr.out_lo[k];
        return m;
    }
    case SS_OP_TYPE_COUNT: break;
    }
    return 0;
}

/* Contraction extent: see simsearch.h and the per-type rules below. */
int64_t ss_op_contraction(const ss_graph *g, const ss_op *op)
{
    const ss_tensor *x = in_t(g, op, 0);
    if (!x)
        return 0;
    switch (op->type) {
    case SS_OP_LINEAR: return x->shape[x->ndim - 1];
    case SS_OP_BATCH_MATMUL: return x->shape[op->attrs.trans_a ? x->ndim - 2 : x->ndim - 1];
    case SS_OP_CONV2D: return (op->attrs.groups <= 1) ? x->shape[1] : 0;
    case SS_OP_EMBEDDING: return op->attrs.vocab;
    case SS_OP_ATTENTION: return op->attrs.heads;
    case SS_OP_SOFTMAX_CE: return x->shape[x->ndim - 1];
    default: return 0;
    }
}
