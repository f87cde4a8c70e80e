/*
 * ops_llm.c — operator table entries of the types modern language models add
 * to the transformer: rotary position embedding, fused (flash) attention,
 * expand (a broadcast) and the mixture-of-experts trio (moe_dispatch,
 * expert_linear, moe_combine). RMSNorm sits next to LayerNorm in
 * ops_elementwise.c.
 *
 * Expand (torch's Tensor.expand): x with extent 1 on attrs.axis becomes
 * attrs.dim copies along it. Multi-head latent attention (DeepSeek-V2/V3,
 * models/transformer.c) shares one rotary key part across the heads and
 * concatenates it to every head's key; Megatron-Core expands it as a view
 * and the concat reads it in place, so the model sets attrs.view (no
 * kernel; the backward's sum over the copies, one add per element of the
 * view, is not charged, as the concatenating backward of a split view is
 * not). Materialised (view 0): the copies are written; the backward sums
 * them. Splits: every dim (a tile of copies reads the one element of x).
 *
 * Flash attention (Dao et al., FlashAttention 1-3; Transformer Engine's fused
 * attention in Megatron-Core), the core of self-attention as one op:
 * q[b..., Sq, d], k[b..., Sk, d], v[b..., Sk, dv] -> o[b..., Sq, dv] =
 * dropout(softmax(q k^T / sqrt(d))) v, computed block by block with an online
 * softmax: no [Sq, Sk] matrix is ever kept. The forward keeps q, k, v, o and
 * the per-row log-sum-exp (fp32); the backward recomputes the scores from
 * them. Grouped-query attention lays the G query heads of a kv head as rows
 * (Sq = G * Sk, row r at position r / G, models/transformer.c); causal: row
 * r sees the keys 0 .. r / G (needs Sk to divide Sq). attrs.rate drops
 * attention probabilities inside the kernel (no mask kept: it is drawn again
 * from the seed in the backward).
 * Splits: every batch dim (samples, heads, kv heads: tensor parallelism
 * splits the heads, GQA's kv heads) and the query rows (context
 * parallelism); never d or dv (the output dim: every tile would need the
 * whole softmax) and never the keys (they are no output dim: a tile needs
 * all of them). A tile of query rows reads every key and value of its batch
 * entries, causal or not: Megatron's context parallelism balances the causal
 * work by giving each rank a chunk from both ends of the sequence, so every
 * rank meets every key block (the ring's exchange; the simulator moves it as
 * the gather of K/V the region asks for, as for the unfused scores).
 * Work (the FlashAttention papers' count, matmuls only): forward
 * 2 * rows * Sk * (d + dv) per batch entry (QK^T and PV), halved when causal
 * (the masked blocks are skipped); backward 2.5 times the forward (the
 * recomputed QK^T, dV, dP, dQ and dK). The causal half is exact in the
 * limit of many key blocks and balanced over a context-parallel split.
 *
 * Mixture of experts, as Megatron-LM's token dispatcher runs it: a router
 * (a linear to X logits, then a softmax: ordinary ops) scores every token;
 * moe_dispatch copies each token into topk expert slots of a [X, C, h]
 * buffer; expert_linear runs one GEMM per expert over its C slots; and
 * moe_combine sums every token's topk expert outputs weighted by the router
 * probabilities. Routing is BALANCED (the documented load model: every
 * expert receives the same number of tokens), and deterministic, so the
 * shapes, FLOPs and regions are pure functions of the shapes:
 *   g = X / topk tokens form a group; the T = N*S tokens make Cr = T / g
 *   groups; token t belongs to group t / g and goes to the topk experts
 *   (t mod g) + j*g, j < topk, each in the slot of its group.
 *   With capacity factor cf >= 1 an expert has C = ceil(Cr * cf) slots; group
 *   j takes slot first(j) = ceil(j * C / Cr), the other slots stay empty
 *   (padding: computed, as with a capacity factor, and zero). Slots are
 *   spread so that a split of C into parts that also divide Cr keeps every
 *   token on the part that holds its sample (data parallelism stays local).
 * Requires topk to divide X and g to divide T. The router probabilities enter
 * moe_dispatch only as a dependency (its values do not move tokens) and
 * moe_combine as weights, so the router gets its gradient from combine.
 * Communication: a tile of dispatch or combine needs the tokens of its slot
 * range (a box of samples). Expert parallelism splits the ops after the
 * dispatch along the experts (core/plan_gen.c): an expert tile reads its
 * experts' slots from the dispatch tile of their tokens, exactly the
 * all-to-all's message (the simulator groups these sends into all-to-all
 * collectives). A dispatch tile split by experts would read its slots'
 * whole token box (an over-estimate, docs/operators.md).
 */
#include "op_table.h"

#include <string.h>

#define FAIL(...) return ss_op_fail(q, __VA_ARGS__)
#define MAX_DIM SS_ATTR_MAX_DIM

/* ------------------------------------------------------------------ */
/* rotary: x[N, S, ..., D], heads of attrs.dim, position = index on dim 1 */
/* ------------------------------------------------------------------ */

static ss_status rotary_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_tensor *x = q->in[0];
    int64_t D = x->shape[x->ndim - 1], hd = q->a->dim;
    if (!ss_dtype_is_float(x->dtype))
        FAIL("input '%s' must be floating point", x->name);
    if (x->ndim < 3)
        FAIL("input '%s' must be [N, S, ..., D] (3 dims or more), has %d", x->name, x->ndim);
    if (hd <= 0 || hd % 2 || D % hd)
        FAIL("head size dim = %lld must be even and divide the last dim %lld", (long long)hd,
             (long long)D);
    ss_op_out_like(s, x, x->dtype);
    return SS_OK;
}

/* Every dim but the last (a rotation pairs elements of one head). */
static unsigned rotary_mask(const ss_graph *g, const ss_op *op, const ss_tensor *o)
{
    return ss_op_mask_all(g, op, o) & ~(1u << (o->ndim - 1));
}

/* The tile with the whole last dim. */
static void rotary_region(const ss_region_args *q, ss_region *out)
{
    int n = q->o->ndim;
    *out = q->t->out;
    out->r[n - 1] = ss_range_make(0, q->T->shape[n - 1]);
}

/* y = x * cos + rotate(x) * sin: two multiplies and an add per element
 * (the cos/sin tables are cached per position, as Transformer Engine does). */
static void rotary_work(const ss_work_args *q, ss_work *w)
{
    w->fwd_flops = 3 * q->vol;
    w->bwd_flops = 3 * q->vol;
}

static const char *const rotary_keys[] = {SS_OP_COMMON_KEYS, "dim", NULL};

static ss_status rotary_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    return ss_attr_i64(r, "dim", 1, 2, MAX_DIM, &a->dim);
}

static void rotary_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    (void)g;
    ss_attr_put_int(w, "dim", op->attrs.dim);
}

const ss_op_class ss_op_class_rotary = {
    .type = SS_OP_ROTARY,
    .name = "rotary",
    .arity = 1,
    .infer = rotary_infer,
    .split_mask = rotary_mask,
    .input_region = rotary_region,
    .work = rotary_work,
    .keys = rotary_keys,
    .read_attrs = rotary_read,
    .write_attrs = rotary_write,
};

/* ------------------------------------------------------------------ */
/* flash_attention: q[b..,Sq,d], k[b..,Sk,d], v[b..,Sk,dv] -> o[b..,Sq,dv] */
/* ------------------------------------------------------------------ */

static ss_status flash_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_tensor *qt = q->in[0], *k = q->in[1], *v = q->in[2];
    char b1[160], b2[160], b3[160];
    int n = qt->ndim;
    if (n < 3 || k->ndim != n || v->ndim != n)
        FAIL("q, k, v must have one number (>= 3) of dims [batch..., rows, d]");
    if (!ss_dtype_is_float(qt->dtype) || k->dtype != qt->dtype || v->dtype != qt->dtype)
        FAIL("q, k, v must share one floating-point dtype");
    int ok = k->shape[n - 1] == qt->shape[n - 1] && v->shape[n - 2] == k->shape[n - 2];
    for (int i = 0; i < n - 2; i++)
        ok = ok && k->shape[i] == qt->shape[i] && v->shape[i] == qt->shape[i];
    if (!ok)
        FAIL("k %s and v %s must be [batch..., Sk, d] and [batch..., Sk, dv] over the batch "
             "dims and d of q %s", ss_shape_str(n, k->shape, b1, sizeof b1),
             ss_shape_str(n, v->shape, b2, sizeof b2), ss_shape_str(n, qt->shape, b3, sizeof b3));
    if (q->a->causal && qt->shape[n - 2] % k->shape[n - 2])
        FAIL("causal attention needs the query rows (%lld) to be a multiple of the keys (%lld)",
             (long long)qt->shape[n - 2], (long long)k->shape[n - 2]);
    if (!(q->a->rate >= 0.0 && q->a->rate < 1.0))
        FAIL("dropout rate %g must be in [0, 1)", q->a->rate);
    ss_tensor *o = ss_op_out_like(s, qt, qt->dtype);
    o->shape[n - 1] = v->shape[n - 1];
    o->kind[n - 1] = v->kind[n - 1];
    return SS_OK;
}

/* Every dim but the last: batch dims and the query rows. */
static unsigned flash_mask(const ss_graph *g, const ss_op *op, const ss_tensor *o)
{
    return ss_op_mask_all(g, op, o) & ~(1u << (o->ndim - 1));
}

/* q: the tile's batch entries and rows, all of d; k, v: the tile's batch
 * entries, every key, all of d / dv (on entry out is the whole operand). */
static void flash_region(const ss_region_args *q, ss_region *out)
{
    int n = q->o->ndim;
    for (int i = 0; i < n - 2; i++)
        out->r[i] = q->t->out.r[i];
    if (q->operand == 0)
        out->r[n - 2] = q->t->out.r[n - 2];
}

static void flash_work(const ss_work_args *q, ss_work *w)
{
    const ss_tensor *qt = ss_graph_tensor(q->g, q->op->inputs[0]);
    const ss_tensor *k = ss_graph_tensor(q->g, q->op->inputs[1]);
    int n = q->o->ndim;
    double rows = q->cols > 0 ? q->vol / q->cols : 0; /* batch entries x query rows */
    double Sk = (double)k->shape[n - 2], d = (double)qt->shape[n - 1], dv = q->cols;
    double f = 2 * rows * Sk * (d + dv) * (q->op->attrs.causal ? 0.5 : 1.0);
    double lse = rows * 4; /* fp32 log-sum-exp per row */
    w->fwd_flops = f;
    w->bwd_flops = 2.5 * f;
    w->fwd_bytes += lse;
    w->bwd_bytes += lse;
    w->saved_bytes = ss_op_operands_bytes(q->g, q->op, q->t, 0, 3) + q->vol * q->osz + lse;
}

static const char *const flash_keys[] = {SS_OP_COMMON_KEYS, "causal", "dropout", NULL};

static ss_status flash_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    ss_status st = ss_attr_bool(r, "causal", &a->causal);
    if (!st)
        st = ss_attr_num(r, "dropout", 0, 0.0, 0.999999, &a->rate);
    return st;
}

static void flash_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    (void)g;
    ss_attr_put_bool(w, "causal", op->attrs.causal);
    if (op->attrs.rate != 0)
        ss_attr_put_real(w, "dropout", op->attrs.rate);
}

const ss_op_class ss_op_class_flash_attention = {
    .type = SS_OP_FLASH_ATTENTION,
    .name = "flash_attention",
    .arity = 3,
    .infer = flash_infer,
    .split_mask = flash_mask,
    .input_region = flash_region,
    .work = flash_work,
    .keys = flash_keys,
    .read_attrs = flash_read,
    .write_attrs = flash_write,
};

/* ------------------------------------------------------------------ */
/* expand: x[..., 1, ...] -> [..., dim, ...] along attrs.axis          */
/* ------------------------------------------------------------------ */

static ss_status expand_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_tensor *x = q->in[0];
    int ax = ss_op_axis(q->a->axis, x->ndim);
    if (!ss_dtype_is_float(x->dtype))
        FAIL("input '%s' must be floating point", x->name);
    if (ax < 0)
        FAIL("axis %d out of range for %d dims", q->a->axis, x->ndim);
    if (x->shape[ax] != 1)
        FAIL("dim %d of '%s' has extent %lld; only an extent of 1 broadcasts", ax, x->name,
             (long long)x->shape[ax]);
    if (q->a->dim < 1 || q->a->dim > MAX_DIM)
        FAIL("size = %lld must be from 1 to %lld", (long long)q->a->dim, (long long)MAX_DIM);
    ss_op_out_like(s, x, x->dtype)->shape[ax] = q->a->dim;
    return SS_OK;
}

/* The tile, with the one element of the broadcast dim. */
static void expand_region(const ss_region_args *q, ss_region *out)
{
    int ax = ss_op_axis(q->op->attrs.axis, q->o->ndim);
    *out = q->t->out;
    if (ax >= 0)
        out->r[ax] = ss_range_make(0, q->t->out.r[ax].hi > q->t->out.r[ax].lo ? 1 : 0);
}

/* Materialised: read x, write the copies; the backward sums the copies'
 * gradients (one add per output element). As a view the forward moves
 * nothing (the analytic cost skips views, core/ops.c ss_op_has_kernel). */
static void expand_work(const ss_work_args *q, ss_work *w)
{
    w->bwd_flops = q->vol;
    w->bwd_bytes = w->fwd_bytes;
}

static const char *const expand_keys[] = {SS_OP_COMMON_KEYS, "axis", "size", "view", NULL};

static ss_status expand_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    ss_status st = ss_op_read_axis(r, a);
    if (!st)
        st = ss_attr_i64(r, "size", 1, 1, MAX_DIM, &a->dim);
    if (!st)
        st = ss_attr_bool(r, "view", &a->view);
    return st;
}

static void expand_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    ss_op_write_axis(w, g, op);
    ss_attr_put_int(w, "size", op->attrs.dim);
    if (op->attrs.view)
        ss_attr_put_bool(w, "view", 1);
}

const ss_op_class ss_op_class_expand = {
    .type = SS_OP_EXPAND,
    .name = "expand",
    .flags = SS_OPF_VIEW_ATTR,
    .arity = 1,
    .infer = expand_infer,
    .split_mask = ss_op_mask_all,
    .input_region = expand_region,
    .work = expand_work,
    .keys = expand_keys,
    .read_attrs = expand_read,
    .write_attrs = expand_write,
};

/* ------------------------------------------------------------------ */
/* Balanced routing geometry (shared with the kernels)                 */
/* ------------------------------------------------------------------ */

/* See op_table.h. */
int ss_moe_geometry(int64_t N, int64_t S, int64_t X, int64_t topk, double capacity,
                    ss_moe_geo *m)
{
    memset(m, 0, sizeof *m);
    if (N <= 0 || S <= 0 || X <= 0 || topk <= 0 || topk > X || X % topk)
        return -1;
    double cf = capacity > 0 ? capacity : 1.0;
    if (!(cf >= 1.0 && cf <= 64.0))
        return -1;
    m->X = X;
    m->topk = topk;
    m->g = X / topk;
    m->T = N * S;
    m->S = S;
    if (m->T % m->g)
        return -1;
    m->Cr = m->T / m->g;
    double c = (double)m->Cr * cf;
    m->C = (int64_t)c;
    if ((double)m->C < c)
        m->C++;
    return 0;
}

/* See op_table.h. */
int64_t ss_moe_first_slot(const ss_moe_geo *m, int64_t j)
{
    return (j * m->C + m->Cr - 1) / m->Cr;
}

/* Groups whose slots lie in [c0, c1): [*j0, *j1). */
static void slot_groups(const ss_moe_geo *m, int64_t c0, int64_t c1, int64_t *j0, int64_t *j1)
{
    /* group j is in the range iff c0 <= first(j) < c1 */
    *j0 = c0 <= 0 ? 0 : (c0 * m->Cr + m->C - 1) / m->C;
    *j1 = c1 <= 0 ? 0 : ((c1 - 1) * m->Cr) / m->C + 1;
    while (*j0 < m->Cr && ss_moe_first_slot(m, *j0) < c0)
        (*j0)++;
    while (*j1 > *j0 && ss_moe_first_slot(m, *j1 - 1) >= c1)
        (*j1)--;
    if (*j1 > m->Cr)
        *j1 = m->Cr;
    if (*j1 < *j0)
        *j1 = *j0;
}

/* The box of samples [N] holding tokens [t0, t1). */
static ss_range token_samples(const ss_moe_geo *m, int64_t t0, int64_t t1)
{
    if (t1 <= t0)
        return ss_range_make(0, 0);
    return ss_range_make(t0 / m->S, (t1 + m->S - 1) / m->S);
}

static int geo_of(const ss_graph *g, const ss_op *op, ss_moe_geo *m)
{
    const ss_tensor *p = ss_graph_tensor(g, op->inputs[1]);
    const ss_tensor *x = ss_graph_tensor(g, op->inputs[0]);
    if (op->type == SS_OP_MOE_DISPATCH)
        return ss_moe_geometry(x->shape[0], x->shape[1], p->shape[2], op->attrs.topk,
                               op->attrs.capacity, m);
    return ss_moe_geometry(p->shape[0], p->shape[1], p->shape[2], op->attrs.topk,
                           op->attrs.capacity, m);
}

static ss_status check_probs(const ss_infer_args *q, const ss_tensor *x, const ss_tensor *p)
{
    if (p->ndim != 3 || p->shape[0] != x->shape[0] || p->shape[1] != x->shape[1])
        FAIL("router probabilities '%s' must be [N, S, experts] over the tokens of '%s'",
             p->name, x->name);
    return SS_OK;
}

static ss_status check_geo(const ss_infer_args *q, int64_t N, int64_t S, int64_t X,
                           ss_moe_geo *m)
{
    const ss_op_attrs *a = q->a;
    if (a->topk < 1 || a->topk > X || X % a->topk)
        FAIL("topk = %lld must be from 1 to the %lld experts and divide them (balanced "
             "routing)", (long long)a->topk, (long long)X);
    if (a->capacity != 0 && !(a->capacity >= 1.0 && a->capacity <= 64.0))
        FAIL("capacity factor %g must be from 1 to 64 (0: 1)", a->capacity);
    if (ss_moe_geometry(N, S, X, a->topk, a->capacity, m))
        FAIL("the %lld tokens are not a multiple of experts / topk = %lld (balanced routing)",
             (long long)(N * S), (long long)(X / a->topk));
    return SS_OK;
}

static const char *const moe_keys[] = {SS_OP_COMMON_KEYS, "topk", "capacity", NULL};

static ss_status moe_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    ss_status st = ss_attr_i64(r, "topk", 1, 1, 1 << 20, &a->topk);
    if (!st)
        st = ss_attr_num(r, "capacity", 0, 1.0, 64.0, &a->capacity);
    return st;
}

static void moe_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    (void)g;
    ss_attr_put_int(w, "topk", op->attrs.topk);
    if (op->attrs.capacity != 0)
        ss_attr_put_real(w, "capacity", op->attrs.capacity);
}

/* ------------------------------------------------------------------ */
/* moe_dispatch: x[N,S,h], probs[N,S,X] -> slots[X, C, h]              */
/* ------------------------------------------------------------------ */

static ss_status dispatch_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_tensor *x = q->in[0], *p = q->in[1];
    if (x->ndim != 3 || !ss_dtype_is_float(x->dtype))
        FAIL("input '%s' must be floating point [N, S, h]", x->name);
    ss_status st = check_probs(q, x, p);
    if (st)
        return st;
    ss_moe_geo m;
    if ((st = check_geo(q, x->shape[0], x->shape[1], p->shape[2], &m)))
        return st;
    int64_t shape[3] = {m.X, m.C, x->shape[2]};
    ss_dim_kind kind[3] = {SS_DIM_PARAMETER, SS_DIM_SAMPLE, SS_DIM_PARAMETER};
    ss_op_add_out(s, 3, shape, kind, x->dtype);
    return SS_OK;
}

/* x: the samples holding the tile's slots' tokens, the tile's features;
 * probs: the same samples, whole. */
static void dispatch_region(const ss_region_args *q, ss_region *out)
{
    ss_moe_geo m;
    if (geo_of(q->g, q->op, &m))
        return;
    int64_t j0, j1;
    slot_groups(&m, q->t->out.r[1].lo, q->t->out.r[1].hi, &j0, &j1);
    out->r[0] = token_samples(&m, j0 * m.g, j1 * m.g);
    if (q->operand == 0)
        out->r[2] = q->t->out.r[2];
}

/* A copy: bytes only; the backward scatter-adds each slot to its token. */
static void dispatch_work(const ss_work_args *q, ss_work *w)
{
    w->bwd_flops = q->vol;
}

const ss_op_class ss_op_class_moe_dispatch = {
    .type = SS_OP_MOE_DISPATCH,
    .name = "moe_dispatch",
    .arity = 2,
    .infer = dispatch_infer,
    .split_mask = ss_op_mask_all,
    .input_region = dispatch_region,
    .work = dispatch_work,
    .keys = moe_keys,
    .read_attrs = moe_read,
    .write_attrs = moe_write,
};

/* ------------------------------------------------------------------ */
/* expert_linear: x[X, C, in] · W[X, in, out] (+ b[X, out])            */
/* ------------------------------------------------------------------ */

static ss_status expert_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_op_attrs *a = q->a;
    const ss_tensor *x = q->in[0];
    if (x->ndim != 3 || !ss_dtype_is_float(x->dtype))
        FAIL("input '%s' must be floating point [experts, slots, in]", x->name);
    if (a->out_features <= 0)
        FAIL("out_features = %lld must be > 0", (long long)a->out_features);
    if (a->topk < 1 || a->topk > x->shape[0])
        FAIL("topk = %lld must be from 1 to the %lld experts", (long long)a->topk,
             (long long)x->shape[0]);
    if (a->dtype != SS_F32 && a->dtype != SS_F8)
        FAIL("gemm dtype must be f8 or unset");
    ss_tensor *t = ss_op_out_like(s, x, x->dtype);
    t->shape[2] = a->out_features;
    t->kind[2] = SS_DIM_PARAMETER;
    int64_t wshape[3] = {x->shape[0], x->shape[2], a->out_features};
    ss_op_add_weight(s, "weight", 3, wshape, x->dtype);
    if (a->use_bias)
        ss_op_add_weight2(s, "bias", x->shape[0], a->out_features, x->dtype);
    return SS_OK;
}

static int64_t expert_contraction(const ss_graph *g, const ss_op *op, const ss_tensor *x)
{
    (void)g;
    (void)op;
    return x->shape[2];
}

/* x [experts, slots, red], W [experts, red, cols], b [experts, cols]. */
static void expert_region(const ss_region_args *q, ss_region *out)
{
    const ss_region *tr = &q->t->out;
    out->r[0] = tr->r[0];
    if (q->w < 0) {
        out->r[1] = tr->r[1];
        out->r[2] = q->t->red;
    } else if (q->w == 0) {
        out->r[1] = q->t->red;
        out->r[2] = tr->r[2];
    } else {
        out->r[1] = tr->r[2];
    }
}

static const char *const expert_keys[] = {SS_OP_COMMON_KEYS, "out_features", "use_bias", "topk",
                                          "gemm", NULL};

static ss_status expert_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    ss_status st = ss_attr_i64(r, "out_features", 1, 1, MAX_DIM, &a->out_features);
    if (!st)
        st = ss_attr_bool(r, "use_bias", &a->use_bias);
    if (!st)
        st = ss_attr_i64(r, "topk", 1, 1, 1 << 20, &a->topk);
    if (!st)
        st = ss_op_read_gemm(r, a);
    return st;
}

static void expert_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    (void)g;
    ss_attr_put_int(w, "out_features", op->attrs.out_features);
    ss_attr_put_bool(w, "use_bias", op->attrs.use_bias);
    ss_attr_put_int(w, "topk", op->attrs.topk);
    ss_op_write_gemm(w, op);
}

const ss_op_class ss_op_class_expert_linear = {
    .type = SS_OP_EXPERT_LINEAR,
    .name = "expert_linear",
    .arity = 1,
    .infer = expert_infer,
    .split_mask = ss_op_mask_all,
    .contraction = expert_contraction,
    .input_region = expert_region,
    .work = ss_op_gemm_work,
    .keys = expert_keys,
    .read_attrs = expert_read,
    .write_attrs = expert_write,
};

/* ------------------------------------------------------------------ */
/* moe_combine: slots[X, C, h], probs[N,S,X] -> y[N,S,h]               */
/* ------------------------------------------------------------------ */

static ss_status combine_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_tensor *y = q->in[0], *p = q->in[1];
    if (y->ndim != 3 || !ss_dtype_is_float(y->dtype))
        FAIL("input '%s' must be floating point [experts, slots, h]", y->name);
    if (p->ndim != 3 || p->dtype != y->dtype || p->shape[2] != y->shape[0])
        FAIL("router probabilities '%s' must be [N, S, %lld] of dtype %s", p->name,
             (long long)y->shape[0], ss_dtype_name(y->dtype));
    ss_moe_geo m;
    ss_status st = check_geo(q, p->shape[0], p->shape[1], p->shape[2], &m);
    if (st)
        return st;
    if (y->shape[1] != m.C)
        FAIL("'%s' has %lld slots per expert, the routing of %lld tokens gives %lld", y->name,
             (long long)y->shape[1], (long long)m.T, (long long)m.C);
    int64_t shape[3] = {p->shape[0], p->shape[1], y->shape[2]};
    ss_dim_kind kind[3] = {p->kind[0], p->kind[1], SS_DIM_PARAMETER};
    ss_op_add_out(s, 3, shape, kind, y->dtype);
    return SS_OK;
}

/* Samples only: a split of the features would make the gradients of the
 * router probabilities partial sums. */
static unsigned combine_mask(const ss_graph *g, const ss_op *op, const ss_tensor *o)
{
    (void)g;
    (void)op;
    (void)o;
    return 1u;
}

/* slots: every expert, the slots of the tile's tokens; probs: the tile's
 * samples, whole. */
static void combine_region(const ss_region_args *q, ss_region *out)
{
    ss_moe_geo m;
    if (geo_of(q->g, q->op, &m))
        return;
    const ss_region *tr = &q->t->out;
    if (q->operand == 1) {
        out->r[0] = tr->r[0];
        return;
    }
    int64_t t0 = tr->r[0].lo * m.S, t1 = tr->r[0].hi * m.S;
    int64_t j0 = t0 / m.g, j1 = (t1 + m.g - 1) / m.g;
    out->r[1] = j1 > j0 ? ss_range_make(ss_moe_first_slot(&m, j0),
                                        ss_moe_first_slot(&m, j1 - 1) + 1)
                        : ss_range_make(0, 0);
}

static void combine_work(const ss_work_args *q, ss_work *w)
{
    double k = (double)q->op->attrs.topk;
    w->fwd_flops = 2 * k * q->vol;
    w->bwd_flops = 3 * k * q->vol;
    w->saved_bytes = ss_op_operands_bytes(q->g, q->op, q->t, 0, 2);
}

const ss_op_class ss_op_class_moe_combine = {
    .type = SS_OP_MOE_COMBINE,
    .name = "moe_combine",
    .arity = 2,
    .infer = combine_infer,
    .split_mask = combine_mask,
    .input_region = combine_region,
    .work = combine_work,
    .keys = moe_keys,
    .read_attrs = moe_read,
    .write_attrs = moe_write,
};
