/*
 * ops.c — operator semantics: the index of the operator table (one entry per
 * type, op_table.h) and the public functions that dispatch through it —
 * type names, shape inference, split masks, contraction, regions and work —
 * plus the helpers the entries share.
 *
 * Invariants: ss_op_infer is a pure function of (type, attrs, input tensors);
 * every tensor it describes has 1..SS_MAX_DIMS dims, every dim > 0 and at
 * most 2^48 elements, so later arithmetic on volumes never overflows int64.
 * A region returned for an operand lies inside that operand's shape (halos
 * are clamped; an operand a tile does not touch gets an empty range, lo ==
 * hi). FLOPs are linear in the tile's extents along every dim whose split
 * needs no halo or recomputation, so the FLOPs of the tiles of such a split
 * sum exactly to the whole op's; ops that need the whole of an input for
 * any piece of output (attention's keys/values) recompute that part in
 * every tile. The per-type rules are in the entries (ops_*.c).
 */
#include "op_table.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* The table                                                           */
/* ------------------------------------------------------------------ */

static const ss_op_class *const classes[SS_OP_TYPE_COUNT] = {
    [SS_OP_INPUT] = &ss_op_class_input,
    [SS_OP_LINEAR] = &ss_op_class_linear,
    [SS_OP_BATCH_MATMUL] = &ss_op_class_batch_matmul,
    [SS_OP_CONV2D] = &ss_op_class_conv2d,
    [SS_OP_POOL2D] = &ss_op_class_pool2d,
    [SS_OP_BATCHNORM] = &ss_op_class_batchnorm,
    [SS_OP_LAYERNORM] = &ss_op_class_layernorm,
    [SS_OP_UNARY] = &ss_op_class_unary,
    [SS_OP_BINARY] = &ss_op_class_binary,
    [SS_OP_SOFTMAX] = &ss_op_class_softmax,
    [SS_OP_DROPOUT] = &ss_op_class_dropout,
    [SS_OP_EMBEDDING] = &ss_op_class_embedding,
    [SS_OP_CONCAT] = &ss_op_class_concat,
    [SS_OP_SPLIT] = &ss_op_class_split,
    [SS_OP_RESHAPE] = &ss_op_class_reshape,
    [SS_OP_TRANSPOSE] = &ss_op_class_transpose,
    [SS_OP_LSTM] = &ss_op_class_lstm,
    [SS_OP_ATTENTION] = &ss_op_class_attention,
    [SS_OP_SOFTMAX_CE] = &ss_op_class_softmax_ce,
    [SS_OP_RMSNORM] = &ss_op_class_rmsnorm,
    [SS_OP_ROTARY] = &ss_op_class_rotary,
    [SS_OP_MOE_DISPATCH] = &ss_op_class_moe_dispatch,
    [SS_OP_EXPERT_LINEAR] = &ss_op_class_expert_linear,
    [SS_OP_MOE_COMBINE] = &ss_op_class_moe_combine,
    [SS_OP_FLASH_ATTENTION] = &ss_op_class_flash_attention,
    [SS_OP_EXPAND] = &ss_op_class_expand,
};

/* See op_table.h. */
const ss_op_class *ss_op_class_of(ss_op_type t)
{
    return (unsigned)t < SS_OP_TYPE_COUNT ? classes[t] : NULL;
}

/* Operator type name ("linear", "conv2d", ...); "?" for an invalid value. */
const char *ss_op_type_name(ss_op_type t)
{
    return (unsigned)t < SS_OP_TYPE_COUNT ? classes[t]->name : "?";
}

/* Parse an operator type name; 0 on success (sets *out), -1 if unknown
 * (*out untouched). */
int ss_op_type_parse(const char *s, ss_op_type *out)
{
    if (!s)
        return -1;
    for (int i = 0; i < SS_OP_TYPE_COUNT; i++)
        if (strcmp(classes[i]->name, s) == 0) {
            *out = (ss_op_type)i;
            return 0;
        }
    return -1;
}

/* Whether op runs a kernel (see simsearch.h). */
int ss_op_has_kernel(const ss_op *op)
{
    if ((unsigned)op->type >= SS_OP_TYPE_COUNT)
        return 0;
    unsigned f = classes[op->type]->flags;
    return !(f & SS_OPF_NO_KERNEL) && !((f & SS_OPF_VIEW_ATTR) && op->attrs.view);
}

/* ------------------------------------------------------------------ */
/* Helpers for entries                                                 */
/* ------------------------------------------------------------------ */

static ss_status vfail(ss_diag *d, const char *name, ss_op_type type, const char *fmt,
                       va_list ap)
{
    char buf[SS_DIAG_MSG_MAX - 160];
    vsnprintf(buf, sizeof buf, fmt, ap);
    return ss_diag_set(d, SS_ERR_INVALID, "op '%s' (%s): %s", name ? name : "?",
                       ss_op_type_name(type), buf);
}

/* See op_table.h. */
ss_status ss_op_fail(const ss_infer_args *q, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ss_status st = vfail(q->d, q->name, q->type, fmt, ap);
    va_end(ap);
    return st;
}

/* A failure before an entry is involved (unknown type, operand count). */
static ss_status opfail(ss_diag *d, const char *name, ss_op_type type, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static ss_status opfail(ss_diag *d, const char *name, ss_op_type type, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ss_status st = vfail(d, name, type, fmt, ap);
    va_end(ap);
    return st;
}

/* See ops.h. */
int ss_op_axis(int axis, int ndim)
{
    int a = axis < 0 ? axis + ndim : axis;
    return (a >= 0 && a < ndim) ? a : -1;
}

/* Floating-point (f32, f16, bf16) and integer (i32, i64) dtypes. */
int ss_dtype_is_float(ss_dtype t)
{
    return t == SS_F32 || t == SS_F16 || t == SS_BF16 || t == SS_F8;
}
int ss_dtype_is_int(ss_dtype t) { return t == SS_I32 || t == SS_I64; }

/* See op_table.h. */
const char *ss_shape_str(int ndim, const int64_t *s, char *buf, size_t n)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)s[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

/* See op_table.h. */
void ss_op_set_tensor(ss_tensor *t, int ndim, const int64_t *shape, const ss_dim_kind *kind,
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

/* See op_table.h. */
ss_tensor *ss_op_add_out(ss_op_shape *s, int ndim, const int64_t *shape,
                         const ss_dim_kind *kind, ss_dtype dt)
{
    ss_tensor *t = &s->out[s->n_out++];
    ss_op_set_tensor(t, ndim, shape, kind, dt);
    return t;
}

/* See op_table.h. */
ss_tensor *ss_op_out_like(ss_op_shape *s, const ss_tensor *x, ss_dtype dt)
{
    return ss_op_add_out(s, x->ndim, x->shape, x->kind, dt);
}

/* See op_table.h. */
void ss_op_add_weight(ss_op_shape *s, const char *suffix, int ndim, const int64_t *shape,
                      ss_dtype dt)
{
    ss_tensor *t = &s->w[s->n_w++];
    ss_op_set_tensor(t, ndim, shape, NULL, dt);
    t->is_weight = 1;
    snprintf(t->name, sizeof t->name, "%s", suffix);
}

/* Own weights of one and two dims (see ss_op_add_weight). */
void ss_op_add_weight1(ss_op_shape *s, const char *suffix, int64_t a, ss_dtype dt)
{
    ss_op_add_weight(s, suffix, 1, &a, dt);
}

void ss_op_add_weight2(ss_op_shape *s, const char *suffix, int64_t a, int64_t b, ss_dtype dt)
{
    int64_t sh[2] = {a, b};
    ss_op_add_weight(s, suffix, 2, sh, dt);
}

/* Bit mask of the dims [0, n). */
static unsigned all_dims(int n) { return n > 0 ? (1u << n) - 1u : 0u; }

/* See op_table.h. */
unsigned ss_op_mask_all(const ss_graph *g, const ss_op *op, const ss_tensor *o)
{
    (void)g;
    (void)op;
    return all_dims(o->ndim);
}

/* See op_table.h. */
unsigned ss_op_mask_but_axis(const ss_graph *g, const ss_op *op, const ss_tensor *o)
{
    const ss_tensor *x = op->n_in > 0 ? ss_graph_tensor(g, op->inputs[0]) : NULL;
    int ax = x ? ss_op_axis(op->attrs.axis, x->ndim) : -1;
    return ax < 0 ? 0 : all_dims(o->ndim) & ~(1u << ax);
}

/* See op_table.h. */
void ss_op_region_tile(const ss_region_args *q, ss_region *out)
{
    *out = q->t->out;
}

/* See op_table.h. */
ss_status ss_op_read_axis(const ss_attr_reader *r, ss_op_attrs *a)
{
    return ss_attr_int(r, "axis", 1, -SS_MAX_DIMS, SS_MAX_DIMS - 1, &a->axis);
}

/* See op_table.h. */
void ss_op_write_axis(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    (void)g;
    ss_attr_put_int(w, "axis", op->attrs.axis);
}

/* ------------------------------------------------------------------ */
/* Shape inference                                                     */
/* ------------------------------------------------------------------ */

/* Check every described tensor: 1..SS_MAX_DIMS dims, dims > 0, at most 2^48
 * elements (checked without overflow). */
static ss_status check_sizes(const ss_infer_args *q, const ss_op_shape *s)
{
    for (int k = 0; k < s->n_out + s->n_w; k++) {
        const ss_tensor *t = k < s->n_out ? &s->out[k] : &s->w[k - s->n_out];
        const char *what = k < s->n_out ? "output" : "weight";
        char buf[160];
        if (t->ndim < 1 || t->ndim > SS_MAX_DIMS)
            return ss_op_fail(q, "%s has %d dims (1..%d allowed)", what, t->ndim, SS_MAX_DIMS);
        int64_t vol = 1;
        for (int i = 0; i < t->ndim; i++) {
            if (t->shape[i] <= 0)
                return ss_op_fail(q, "%s shape %s has a dim <= 0", what,
                                  ss_shape_str(t->ndim, t->shape, buf, sizeof buf));
            if (t->shape[i] > SS_MAX_ELEMENTS / vol)
                return ss_op_fail(q, "%s shape %s is absurdly large (more than 2^48 elements)",
                                  what, ss_shape_str(t->ndim, t->shape, buf, sizeof buf));
            vol *= t->shape[i];
        }
    }
    return SS_OK;
}

/* See ops.h: operand count and existence here, the rest in the entry. */
ss_status ss_op_infer(const ss_graph *g, const char *name, ss_op_type type,
                      const ss_op_attrs *a, int n_in, const int *inputs, ss_op_shape *out,
                      ss_diag *d)
{
    memset(out, 0, sizeof *out);
    if ((unsigned)type >= SS_OP_TYPE_COUNT)
        return opfail(d, name, type, "unknown operator type %d", (int)type);
    const ss_op_class *c = classes[type];
    int want = c->arity_of ? c->arity_of(a) : c->arity;
    if (want >= 0 && n_in != want)
        return opfail(d, name, type, "expects %d input%s, got %d", want, want == 1 ? "" : "s",
                      n_in);
    if (want < 0 && (n_in < 1 || n_in > SS_MAX_INPUTS))
        return opfail(d, name, type, "expects 1..%d inputs, got %d", SS_MAX_INPUTS, n_in);
    const ss_tensor *in[SS_MAX_INPUTS];
    for (int i = 0; i < n_in; i++) {
        in[i] = ss_graph_tensor(g, inputs[i]);
        if (!in[i])
            return opfail(d, name, type, "input %d refers to tensor id %d, which does not exist",
                          i, inputs[i]);
    }
    ss_infer_args q = {name, type, a, in, n_in, d};
    ss_status st = c->infer(&q, out);
    if (st == SS_OK)
        st = check_sizes(&q, out);
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

/* Split mask: see simsearch.h. Rules per type are in the entries: dims whose
 * split needs no data beyond a tile's share (or only a halo) of each input. */
unsigned ss_op_split_mask(const ss_graph *g, const ss_op *op)
{
    const ss_tensor *o = out0(g, op);
    if (!o || (unsigned)op->type >= SS_OP_TYPE_COUNT)
        return 0;
    return classes[op->type]->split_mask(g, op, o);
}

/* Contraction extent: see simsearch.h and the entries. */
int64_t ss_op_contraction(const ss_graph *g, const ss_op *op)
{
    const ss_tensor *x = op->n_in > 0 ? ss_graph_tensor(g, op->inputs[0]) : NULL;
    if (!x || (unsigned)op->type >= SS_OP_TYPE_COUNT || !classes[op->type]->contraction)
        return 0;
    return classes[op->type]->contraction(g, op, x);
}

/* ------------------------------------------------------------------ */
/* Regions                                                             */
/* ------------------------------------------------------------------ */

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
        r->r[i] = ss_range_make(0, t->shape[i]);
}

/* Element count of a region; empty ranges (hi <= lo) give 0. */
int64_t ss_region_volume(const ss_region *r)
{
    int64_t v = 1;
    for (int i = 0; i < r->ndim; i++)
        v *= ss_range_len(r->r[i]);
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
        o.r[i] = ss_range_make(lo, hi);
    }
    *out = o;
    return empty ? 0 : ss_region_volume(&o);
}

/* The whole op: output 0's full extent, the whole contraction range ([0, 1)
 * when the op has none). */
void ss_op_full_tile(const ss_graph *g, const ss_op *op, ss_tile *t)
{
    full_region(out0(g, op), &t->out);
    int64_t k = ss_op_contraction(g, op);
    t->red = ss_range_make(0, k > 0 ? k : 1);
}

/* THE region function (see simsearch.h): the operand's full extent, narrowed
 * by the entry's rule. */
void ss_op_input_region(const ss_graph *g, const ss_op *op, const ss_tile *t, int operand,
                        ss_region *out)
{
    const ss_tensor *T = operand_tensor(g, op, operand);
    full_region(T, out);
    const ss_tensor *o = out0(g, op);
    if (!T || !o || (unsigned)op->type >= SS_OP_TYPE_COUNT)
        return;
    ss_region_args q = {g, op, t, operand, operand - op->n_in, T, o};
    classes[op->type]->input_region(&q, out);
}

/* Output regions: output 0 is the tile; other outputs follow the entry's
 * rule (the tile itself unless the entry says otherwise). */
void ss_op_output_region(const ss_graph *g, const ss_op *op, const ss_tile *t, int idx,
                         ss_region *out)
{
    *out = t->out;
    if (idx <= 0 || idx >= op->n_out || (unsigned)op->type >= SS_OP_TYPE_COUNT)
        return;
    if (classes[op->type]->output_region)
        classes[op->type]->output_region(g, op, t, idx, out);
}

/* ------------------------------------------------------------------ */
/* Work                                                                */
/* ------------------------------------------------------------------ */

/* See op_table.h. */
double ss_op_operand_bytes(const ss_graph *g, const ss_op *op, const ss_tile *t, int i)
{
    ss_region r;
    ss_op_input_region(g, op, t, i, &r);
    const ss_tensor *T = operand_tensor(g, op, i);
    return (double)ss_region_volume(&r) * (double)ss_dtype_size(T->dtype);
}

/* See op_table.h. */
double ss_op_operands_bytes(const ss_graph *g, const ss_op *op, const ss_tile *t, int lo,
                            int hi)
{
    double b = 0;
    for (int i = lo; i < hi; i++)
        b += ss_op_operand_bytes(g, op, t, i);
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

/* Work of a tile (see simsearch.h). Bytes default to the operand regions
 * read plus the output regions written, backward about twice that (reads
 * gradients and saved values, writes gradients); the entry sets the FLOPs
 * and saved activations and may change the bytes. */
void ss_op_tile_work(const ss_graph *g, const ss_op *op, const ss_tile *t, ss_work *w)
{
    memset(w, 0, sizeof *w);
    const ss_tensor *o = out0(g, op);
    if (!o || (unsigned)op->type >= SS_OP_TYPE_COUNT)
        return;
    int n = o->ndim;
    ss_work_args q;
    q.g = g;
    q.op = op;
    q.t = t;
    q.o = o;
    q.osz = (double)ss_dtype_size(o->dtype);
    q.vol = (double)ss_region_volume(&t->out);
    q.cols = (double)ss_range_len(t->out.r[n - 1]);
    q.red = (double)ss_range_len(t->red);
    /* reads: input 0's bytes (q.x_bytes, measured once) plus the others' */
    q.x_bytes = op->n_in ? ss_op_operand_bytes(g, op, t, 0) : 0;
    double rd = q.x_bytes;
    for (int i = op->n_in ? 1 : 0; i < op->n_in + op->n_w; i++)
        rd += ss_op_operand_bytes(g, op, t, i);
    double wr = outputs_bytes(g, op, t);
    q.first_red = t->red.lo == 0;
    w->fwd_bytes = rd + wr;
    w->bwd_bytes = 2 * (rd + wr);
    classes[op->type]->work(&q, w);
}
