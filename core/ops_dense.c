/*
 * ops_dense.c — operator table entries of the matmul-like types, those with
 * a contraction dim whose split yields partial sums: linear, batch_matmul,
 * embedding (contraction = vocab), attention (contraction = heads) and
 * softmax_ce (contraction = classes).
 *
 * Each entry keeps its type's whole behaviour: model JSON attributes, shape
 * inference, split mask, contraction, input regions of a tile and the tile's
 * work. The rules every entry follows are in op_table.h.
 */
#include "op_table.h"

#include <string.h>

#define FAIL(...) return ss_op_fail(q, __VA_ARGS__)
#define MAX_DIM SS_ATTR_MAX_DIM

/* ------------------------------------------------------------------ */
/* linear: x[..., in] · W[in, out] (+ b[out]) -> [..., out]             */
/* ------------------------------------------------------------------ */

static ss_status linear_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_op_attrs *a = q->a;
    const ss_tensor *x = q->in[0];
    if (!ss_dtype_is_float(x->dtype))
        FAIL("input '%s' must be floating point, is %s", x->name, ss_dtype_name(x->dtype));
    if (a->out_features <= 0)
        FAIL("out_features = %lld must be > 0", (long long)a->out_features);
    if (a->dtype != SS_F32 && a->dtype != SS_F8)
        FAIL("gemm dtype must be f8 or unset");
    int64_t in = x->shape[x->ndim - 1];
    ss_tensor *t = ss_op_out_like(s, x, x->dtype);
    t->shape[t->ndim - 1] = a->out_features;
    t->kind[t->ndim - 1] = SS_DIM_PARAMETER;
    if (a->trans_b)
        ss_op_add_weight2(s, "weight", a->out_features, in, x->dtype);
    else
        ss_op_add_weight2(s, "weight", in, a->out_features, x->dtype);
    if (a->use_bias)
        ss_op_add_weight1(s, "bias", a->out_features, x->dtype);
    return SS_OK;
}

/* The input features. */
static int64_t linear_contraction(const ss_graph *g, const ss_op *op, const ss_tensor *x)
{
    (void)g;
    (void)op;
    return x->shape[x->ndim - 1];
}

/* x [rows, red], W [red, cols] ([cols, red] if trans_b), b [cols]. */
static void linear_region(const ss_region_args *q, ss_region *out)
{
    const ss_region *tr = &q->t->out;
    int n = q->o->ndim, trans_b = q->op->attrs.trans_b;
    ss_range cols = tr->r[n - 1];
    if (q->w < 0) {
        for (int i = 0; i < n - 1; i++)
            out->r[i] = tr->r[i];
        out->r[n - 1] = q->t->red;
    } else if (q->w == 0) {
        out->r[trans_b ? 1 : 0] = q->t->red;
        out->r[trans_b ? 0 : 1] = cols;
    } else {
        out->r[0] = cols;
    }
}

/* Work of a GEMM with optional bias, per tile (linear, expert_linear). */
void ss_op_gemm_work(const ss_work_args *q, ss_work *w)
{
    double M = q->cols > 0 ? q->vol / q->cols : 0;
    double mm = 2 * M * q->red * q->cols;
    double bias = (q->op->attrs.use_bias && q->first_red) ? M * q->cols : 0;
    w->fwd_flops = mm + bias;
    w->bwd_flops = 2 * mm + bias;
    /* an FP8 GEMM keeps its input in FP8 for the backward (Transformer Engine) */
    w->saved_bytes = q->op->attrs.dtype == SS_F8 && q->osz > 0 ? q->x_bytes / q->osz
                                                                : q->x_bytes;
}

static const char *const linear_keys[] = {SS_OP_COMMON_KEYS, "out_features", "use_bias",
                                          "trans_b", "gemm", NULL};

ss_status ss_op_read_gemm(const ss_attr_reader *r, ss_op_attrs *a)
{
    const char *gemm = NULL;
    ss_status st = ss_attr_str(r, "gemm", 0, 8, &gemm);
    if (!st && gemm) {
        if (strcmp(gemm, "f8"))
            st = ss_attr_fail(r, SS_ERR_PARSE, "gemm", "expected \"f8\", got \"%s\"", gemm);
        a->dtype = SS_F8;
    }
    return st;
}

void ss_op_write_gemm(ss_attr_writer *w, const ss_op *op)
{
    if (op->attrs.dtype == SS_F8)
        ss_attr_put_str(w, "gemm", "f8");
}

static ss_status linear_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    ss_status st = ss_attr_i64(r, "out_features", 1, 1, MAX_DIM, &a->out_features);
    if (!st)
        st = ss_attr_bool(r, "use_bias", &a->use_bias);
    if (!st)
        st = ss_attr_bool(r, "trans_b", &a->trans_b);
    if (!st)
        st = ss_op_read_gemm(r, a);
    return st;
}

static void linear_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    (void)g;
    ss_attr_put_int(w, "out_features", op->attrs.out_features);
    ss_attr_put_bool(w, "use_bias", op->attrs.use_bias);
    ss_attr_put_bool(w, "trans_b", op->attrs.trans_b);
    ss_op_write_gemm(w, op);
}

const ss_op_class ss_op_class_linear = {
    .type = SS_OP_LINEAR,
    .name = "linear",
    .arity = 1,
    .infer = linear_infer,
    .split_mask = ss_op_mask_all,
    .contraction = linear_contraction,
    .input_region = linear_region,
    .work = ss_op_gemm_work,
    .keys = linear_keys,
    .read_attrs = linear_read,
    .write_attrs = linear_write,
};

/* ------------------------------------------------------------------ */
/* batch_matmul: A[b..., m, k] · B[b..., k, n] -> [b..., m, n]          */
/* ------------------------------------------------------------------ */

static ss_status bmm_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_op_attrs *a = q->a;
    const ss_tensor *A = q->in[0], *B = q->in[1];
    char b1[160], b2[160];
    if (A->ndim < 2 || A->ndim != B->ndim)
        FAIL("operands must have the same number (>= 2) of dims: %s and %s",
             ss_shape_str(A->ndim, A->shape, b1, sizeof b1),
             ss_shape_str(B->ndim, B->shape, b2, sizeof b2));
    if (!ss_dtype_is_float(A->dtype) || A->dtype != B->dtype)
        FAIL("operands must share one floating-point dtype (%s, %s)", ss_dtype_name(A->dtype),
             ss_dtype_name(B->dtype));
    int n = A->ndim;
    for (int i = 0; i < n - 2; i++)
        if (A->shape[i] != B->shape[i])
            FAIL("batch dims differ: %s and %s", ss_shape_str(n, A->shape, b1, sizeof b1),
                 ss_shape_str(n, B->shape, b2, sizeof b2));
    int am = a->trans_a ? n - 1 : n - 2, ak = a->trans_a ? n - 2 : n - 1;
    int bk = a->trans_b ? n - 1 : n - 2, bn = a->trans_b ? n - 2 : n - 1;
    if (A->shape[ak] != B->shape[bk])
        FAIL("contraction dims differ: %s%s and %s%s", ss_shape_str(n, A->shape, b1, sizeof b1),
             a->trans_a ? "^T" : "", ss_shape_str(n, B->shape, b2, sizeof b2),
             a->trans_b ? "^T" : "");
    ss_tensor *t = ss_op_out_like(s, A, A->dtype);
    t->shape[n - 2] = A->shape[am];
    t->kind[n - 2] = A->kind[am];
    t->shape[n - 1] = B->shape[bn];
    t->kind[n - 1] = B->kind[bn];
    return SS_OK;
}

/* k: A's last dim (its second last if trans_a). */
static int64_t bmm_contraction(const ss_graph *g, const ss_op *op, const ss_tensor *x)
{
    (void)g;
    return x->shape[op->attrs.trans_a ? x->ndim - 2 : x->ndim - 1];
}

/* A [b, m, red] (trans_a: [b, red, m]), B [b, red, n] (trans_b: [b, n, red]). */
static void bmm_region(const ss_region_args *q, ss_region *out)
{
    const ss_region *tr = &q->t->out;
    const ss_op_attrs *a = &q->op->attrs;
    int n = q->o->ndim, operand = q->operand;
    for (int i = 0; i < n - 2; i++)
        out->r[i] = tr->r[i];
    int tr_flag = operand == 0 ? a->trans_a : a->trans_b;
    ss_range free_r = operand == 0 ? tr->r[n - 2] : tr->r[n - 1];
    /* A: [m, k] (k last unless trans_a); B: [k, n] (k first unless trans_b) */
    int kdim = operand == 0 ? (tr_flag ? n - 2 : n - 1) : (tr_flag ? n - 1 : n - 2);
    int fdim = kdim == n - 1 ? n - 2 : n - 1;
    out->r[kdim] = q->t->red;
    out->r[fdim] = free_r;
}

static void bmm_work(const ss_work_args *q, ss_work *w)
{
    /* vol = B*M*N */
    w->fwd_flops = 2 * q->vol * q->red;
    w->bwd_flops = 2 * w->fwd_flops;
    w->saved_bytes = ss_op_operands_bytes(q->g, q->op, q->t, 0, 2);
}

static const char *const bmm_keys[] = {SS_OP_COMMON_KEYS, "trans_a", "trans_b", NULL};

static ss_status bmm_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    ss_status st = ss_attr_bool(r, "trans_a", &a->trans_a);
    if (!st)
        st = ss_attr_bool(r, "trans_b", &a->trans_b);
    return st;
}

static void bmm_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    (void)g;
    ss_attr_put_bool(w, "trans_a", op->attrs.trans_a);
    ss_attr_put_bool(w, "trans_b", op->attrs.trans_b);
}

const ss_op_class ss_op_class_batch_matmul = {
    .type = SS_OP_BATCH_MATMUL,
    .name = "batch_matmul",
    .arity = 2,
    .infer = bmm_infer,
    .split_mask = ss_op_mask_all,
    .contraction = bmm_contraction,
    .input_region = bmm_region,
    .work = bmm_work,
    .keys = bmm_keys,
    .read_attrs = bmm_read,
    .write_attrs = bmm_write,
};

/* ------------------------------------------------------------------ */
/* embedding: ids[...](i32/i64), W[vocab, dim] -> [..., dim]            */
/* ------------------------------------------------------------------ */

static ss_status embedding_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_op_attrs *a = q->a;
    const ss_tensor *x = q->in[0];
    if (!ss_dtype_is_int(x->dtype))
        FAIL("ids '%s' must be i32 or i64, are %s", x->name, ss_dtype_name(x->dtype));
    if (x->ndim >= SS_MAX_DIMS)
        FAIL("ids '%s' have too many dims (%d)", x->name, x->ndim);
    if (a->vocab <= 0 || a->dim <= 0)
        FAIL("vocab = %lld and dim = %lld must be > 0", (long long)a->vocab, (long long)a->dim);
    if ((unsigned)a->dtype >= SS_DTYPE_COUNT || !ss_dtype_is_float(a->dtype))
        FAIL("dtype must be floating point");
    ss_tensor *t = ss_op_out_like(s, x, a->dtype);
    t->ndim++;
    t->shape[x->ndim] = a->dim;
    t->kind[x->ndim] = SS_DIM_PARAMETER;
    ss_op_add_weight2(s, "weight", a->vocab, a->dim, a->dtype);
    return SS_OK;
}

static int64_t embedding_contraction(const ss_graph *g, const ss_op *op, const ss_tensor *x)
{
    (void)g;
    (void)x;
    return op->attrs.vocab;
}

/* ids [tile minus last], W [red, cols]. */
static void embedding_region(const ss_region_args *q, ss_region *out)
{
    const ss_region *tr = &q->t->out;
    int n = q->o->ndim;
    if (q->w < 0) {
        for (int i = 0; i < n - 1; i++)
            out->r[i] = tr->r[i];
    } else {
        out->r[0] = q->t->red;
        out->r[1] = tr->r[n - 1];
    }
}

/* A gather: each vocab shard reads its share of the rows. */
static void embedding_work(const ss_work_args *q, ss_work *w)
{
    double vocab = (double)q->op->attrs.vocab;
    double frac = q->op->attrs.vocab > 0 ? q->red / vocab : 1;
    double ids = q->x_bytes, vol = q->vol, osz = q->osz;
    w->fwd_flops = 0;
    w->bwd_flops = vol * frac; /* scatter-add */
    w->fwd_bytes = ids + vol * osz * frac + vol * osz;
    w->bwd_bytes = ids + vol * osz + 2 * vol * osz * frac;
    w->saved_bytes = ids;
}

static const char *const embedding_keys[] = {SS_OP_COMMON_KEYS, "vocab", "dim", "dtype", NULL};

static ss_status embedding_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    const char *dt = NULL;
    ss_status st = ss_attr_i64(r, "vocab", 1, 1, MAX_DIM, &a->vocab);
    if (!st)
        st = ss_attr_i64(r, "dim", 1, 1, MAX_DIM, &a->dim);
    if (!st)
        st = ss_attr_str(r, "dtype", 0, 16, &dt);
    if (!st && dt && ss_dtype_parse(dt, &a->dtype))
        st = ss_attr_fail(r, SS_ERR_PARSE, "dtype", "unknown dtype \"%s\"", dt);
    return st;
}

static void embedding_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    (void)g;
    ss_attr_put_int(w, "vocab", op->attrs.vocab);
    ss_attr_put_int(w, "dim", op->attrs.dim);
    ss_attr_put_str(w, "dtype", ss_dtype_name(op->attrs.dtype));
}

const ss_op_class ss_op_class_embedding = {
    .type = SS_OP_EMBEDDING,
    .name = "embedding",
    .arity = 1,
    .infer = embedding_infer,
    .split_mask = ss_op_mask_all,
    .contraction = embedding_contraction,
    .input_region = embedding_region,
    .work = embedding_work,
    .keys = embedding_keys,
    .read_attrs = embedding_read,
    .write_attrs = embedding_write,
};

/* ------------------------------------------------------------------ */
/* attention: fused multi-head attention, q,k,v [N,S,E] -> [N,S,E]      */
/* ------------------------------------------------------------------ */

static ss_status attention_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_op_attrs *a = q->a;
    const ss_tensor *qt = q->in[0], *k = q->in[1], *v = q->in[2];
    char b1[160], b2[160], b3[160];
    if (qt->ndim != 3 || k->ndim != 3 || v->ndim != 3)
        FAIL("q, k, v must be [N, S, E]");
    if (!ss_dtype_is_float(qt->dtype) || k->dtype != qt->dtype || v->dtype != qt->dtype)
        FAIL("q, k, v must share one floating-point dtype");
    if (k->shape[0] != qt->shape[0] || k->shape[2] != qt->shape[2] ||
        memcmp(k->shape, v->shape, 3 * sizeof(int64_t)) != 0)
        FAIL("k %s and v %s must be [N, Sk, E] matching q %s",
             ss_shape_str(3, k->shape, b1, sizeof b1), ss_shape_str(3, v->shape, b2, sizeof b2),
             ss_shape_str(3, qt->shape, b3, sizeof b3));
    int64_t E = qt->shape[2];
    if (a->heads <= 0 || E % a->heads)
        FAIL("heads = %lld must be > 0 and divide the embedding dim %lld", (long long)a->heads,
             (long long)E);
    if (a->causal && k->shape[1] != qt->shape[1])
        FAIL("causal attention needs as many keys (%lld) as queries (%lld)",
             (long long)k->shape[1], (long long)qt->shape[1]);
    ss_op_out_like(s, qt, qt->dtype);
    static const char *const wn[4] = {"wq", "wk", "wv", "wo"};
    static const char *const bn[4] = {"bq", "bk", "bv", "bo"};
    for (int i = 0; i < 4; i++)
        ss_op_add_weight2(s, wn[i], E, E, qt->dtype);
    if (a->use_bias)
        for (int i = 0; i < 4; i++)
            ss_op_add_weight1(s, bn[i], E, qt->dtype);
    return SS_OK;
}

static int64_t attention_contraction(const ss_graph *g, const ss_op *op, const ss_tensor *x)
{
    (void)g;
    (void)x;
    return op->attrs.heads;
}

/* q [n, s, all], k/v [n, all (causal: [0, s.hi)), all], Wq/Wk/Wv [all, head
 * cols], Wo [head cols, cols], biases alike. */
static void attention_region(const ss_region_args *q, ss_region *out)
{
    const ss_region *tr = &q->t->out;
    const ss_op_attrs *a = &q->op->attrs;
    int64_t dh = q->o->shape[2] / a->heads;
    ss_range hc = ss_range_make(q->t->red.lo * dh, q->t->red.hi * dh);
    int w = q->w;
    if (w < 0) {
        out->r[0] = tr->r[0];
        if (q->operand == 0)
            out->r[1] = tr->r[1];
        else if (a->causal)
            out->r[1] = ss_range_make(0, tr->r[1].hi);
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
}

static void attention_work(const ss_work_args *q, ss_work *w)
{
    const ss_op_attrs *a = &q->op->attrs;
    const ss_tile *t = q->t;
    ss_region kr;
    ss_op_input_region(q->g, q->op, t, 1, &kr);
    double E = (double)q->o->shape[2], dh = E / (double)a->heads;
    double Nn = (double)ss_range_len(t->out.r[0]), Sq = (double)ss_range_len(t->out.r[1]);
    double Sk = (double)ss_range_len(kr.r[1]), hr = q->red, Er = hr * dh, Et = q->cols;
    double proj = 2 * Nn * Sq * E * Er + 4 * Nn * Sk * E * Er + 2 * Nn * Sq * Er * Et;
    double attn = 4 * Nn * Sq * Sk * Er + 5 * Nn * hr * Sq * Sk;
    double bias = a->use_bias
                      ? Nn * Sq * Er + 2 * Nn * Sk * Er + (q->first_red ? Nn * Sq * Et : 0)
                      : 0;
    w->fwd_flops = proj + attn + bias;
    w->bwd_flops = 2 * w->fwd_flops;
    w->saved_bytes = ss_op_operands_bytes(q->g, q->op, t, 0, 3) +
                     (Nn * hr * Sq * Sk + Nn * Sq * Er + Nn * (Sq + 2 * Sk) * Er) * q->osz;
}

static const char *const attention_keys[] = {SS_OP_COMMON_KEYS, "heads", "causal", "use_bias",
                                             NULL};

static ss_status attention_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    ss_status st = ss_attr_i64(r, "heads", 1, 1, MAX_DIM, &a->heads);
    if (!st)
        st = ss_attr_bool(r, "causal", &a->causal);
    if (!st)
        st = ss_attr_bool(r, "use_bias", &a->use_bias);
    return st;
}

static void attention_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    (void)g;
    ss_attr_put_int(w, "heads", op->attrs.heads);
    ss_attr_put_bool(w, "causal", op->attrs.causal);
    ss_attr_put_bool(w, "use_bias", op->attrs.use_bias);
}

const ss_op_class ss_op_class_attention = {
    .type = SS_OP_ATTENTION,
    .name = "attention",
    .arity = 3,
    .infer = attention_infer,
    .split_mask = ss_op_mask_all,
    .contraction = attention_contraction,
    .input_region = attention_region,
    .work = attention_work,
    .keys = attention_keys,
    .read_attrs = attention_read,
    .write_attrs = attention_write,
};

/* ------------------------------------------------------------------ */
/* softmax_ce: logits[..., V], labels[...] -> loss[...]                 */
/* ------------------------------------------------------------------ */

static ss_status softmax_ce_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_tensor *x = q->in[0], *l = q->in[1];
    char b1[160], b2[160];
    if (x->ndim < 2 || !ss_dtype_is_float(x->dtype))
        FAIL("logits '%s' must be floating point with >= 2 dims", x->name);
    if (!ss_dtype_is_int(l->dtype))
        FAIL("labels '%s' must be i32 or i64", l->name);
    if (l->ndim != x->ndim - 1 ||
        memcmp(l->shape, x->shape, (size_t)l->ndim * sizeof(int64_t)) != 0)
        FAIL("labels %s must match the logits' leading dims %s",
             ss_shape_str(l->ndim, l->shape, b1, sizeof b1),
             ss_shape_str(x->ndim - 1, x->shape, b2, sizeof b2));
    ss_tensor *t = ss_op_out_like(s, x, SS_F32);
    t->ndim--;
    return SS_OK;
}

/* The classes (logits' last dim). */
static int64_t softmax_ce_contraction(const ss_graph *g, const ss_op *op, const ss_tensor *x)
{
    (void)g;
    (void)op;
    return x->shape[x->ndim - 1];
}

/* logits [tile, red], labels [tile]. */
static void softmax_ce_region(const ss_region_args *q, ss_region *out)
{
    const ss_region *tr = &q->t->out;
    int n = q->o->ndim;
    for (int i = 0; i < n; i++)
        out->r[i] = tr->r[i];
    if (q->operand == 0)
        out->r[n] = q->t->red;
}

static void softmax_ce_work(const ss_work_args *q, ss_work *w)
{
    /* vol = rows of the loss; each row reads red logits */
    w->fwd_flops = 5 * q->vol * q->red;
    w->bwd_flops = 2 * q->vol * q->red;
    w->saved_bytes = ss_op_operands_bytes(q->g, q->op, q->t, 0, 2);
}

static const char *const softmax_ce_keys[] = {SS_OP_COMMON_KEYS, NULL};

const ss_op_class ss_op_class_softmax_ce = {
    .type = SS_OP_SOFTMAX_CE,
    .name = "softmax_ce",
    .arity = 2,
    .infer = softmax_ce_infer,
    .split_mask = ss_op_mask_all,
    .contraction = softmax_ce_contraction,
    .input_region = softmax_ce_region,
    .work = softmax_ce_work,
    .keys = softmax_ce_keys,
};
