/*
 * transformer.c — the transformer zoo families: gpt (and its presets llama
 * and mixtral, zoo.c), bert and albert (one layer's weights shared by every
 * layer, ss_zoo_build_albert).
 *
 * Layers are built from primitive ops the way Megatron-LM runs them, so the
 * cost model sees the real kernels (pre-norm):
 *   ln1 -> attn.qkv [E,3E] -> attn.qkv_reshape [N,S,heads,3dh] -> attn.split
 *   (3 x dh) -> attn.q_t/k_t/v_t [N,heads,S,dh] -> attn.scores (q.k^T)
 *   -> attn.softmax -> attn.dropout -> attn.context (.v) -> attn.context_t
 *   [N,S,heads,dh] -> attn.merge [N,S,E] -> attn.proj -> attn.proj_dropout
 *   -> attn.residual -> ln2 -> mlp.fc1 [E,4E] -> mlp.gelu -> mlp.fc2
 *   -> mlp.dropout -> mlp.residual
 * each named "l<layer>.<part>". The split and the q/k/v transposes are views
 * (attrs.view: no kernel), as in Megatron-LM, which hands strided views of
 * the qkv output to its batched GEMMs; context_t is a copy (Megatron's
 * .contiguous() before the projection). With fused=1 the attention block from qkv to
 * merge+proj is one SS_OP_ATTENTION op "l<layer>.attn" (same parameters).
 * Activations and weights are bf16 (mixed precision, Adam); token ids and
 * labels are i32. Per layer 12h^2 + 13h parameters, so gpt totals
 * 12lh^2 + 13lh + (V+s)h + 2h (final LayerNorm): Megatron-LM's formula plus
 * 2h. The vocabulary is padded as Megatron-LM pads it: rounded up
 * to a multiple of vocab_pad * tp (--make-vocab-size-divisible-by, 128 by
 * default, times the tensor-parallel degree), so every tp rank holds a
 * multiple of vocab_pad rows; vocab_pad = 0 keeps it as given.
 *
 * The variants of Llama-style models (keys in zoo.c, docs/model-format.md):
 *   kv_heads < heads (grouped-query attention, Megatron's layout): qkv is
 *     [E, (heads + 2 kv) dh], viewed as [N,S,kv,(G+2) dh] with G = heads/kv
 *     and split into q [N,S,kv,G dh], k and v [N,S,kv,dh]; q is reshaped to
 *     [N,S,kv,G,dh] and copied to [N,kv,S,G,dh] (attn.q_t), viewed as
 *     [N,kv,S G,dh] (rows sequence-major, kind attribute), so the scores
 *     [N,kv,S G,S] and the context are one batched GEMM per kv head;
 *     attn.context_t copies back to [N,S,kv,G,dh]. Selective recomputation
 *     knows such scores by their two attribute dims, the rows a multiple of
 *     the keys (simulator/build.c).
 *     A tensor-parallel split follows the kv heads (tp must divide them).
 *   ffn: the MLP width (0: 4 x hidden). act=swiglu: mlp.gate and mlp.up
 *     [E, ffn], mlp.silu, mlp.gated (silu(gate) * up), mlp.fc2 [ffn, E];
 *     act=relu2 (squared ReLU, Nemotron-4): mlp.relu2 in place of the gelu.
 *   norm=rmsnorm: RMSNorm (gamma only) for every norm.
 *   rotary=1: no learned position table; attn.q_rope / attn.k_rope rotate q
 *     and k after the split (SS_OP_ROTARY).
 *   tied=0: an own LM head [E, V] (no bias). bias=0: no linear biases
 *     (qkv_bias=1 keeps the qkv bias, Qwen2). dropout=0: no dropout ops.
 *   precision: bf16 or fp16 activations and weights; fp8 is bf16 with the
 *     GEMMs of the layers (qkv, proj, mlp, experts) in FP8 (attrs.dtype =
 *     f8), as Transformer Engine runs them; the LM head and router stay bf16;
 *     fp32: f32 activations and weights, no mixed precision (the CPU kernels).
 *   experts=X > 0 (mixture of experts): the MLP becomes moe.router (linear
 *     E -> X, no bias) -> moe.probs (softmax) -> moe.dispatch -> the expert
 *     MLP as expert_linear ops over [X, C, .] -> moe.combine, with topk
 *     experts per token and capacity factor capacity / 100 (balanced
 *     routing, core/ops_llm.c). moe_ffn: the experts' width (0: ffn);
 *     shared=S > 0: a dense MLP "l<layer>.shared.*" of width S x moe_ffn
 *     beside the routed experts, added to their output (moe.add_shared),
 *     as DeepSeek and Qwen-MoE run shared experts; dense=D: the first D
 *     layers keep the dense MLP of width ffn (DeepSeek-V3: 3).
 *   attn=flash: the scores, softmax, dropout and context ops become one
 *     flash_attention op "l<layer>.attn.flash" (core/ops_llm.c: no score
 *     matrix kept, the backward recomputes it), causal for gpt, with the
 *     attention dropout inside; context_t is then a view (the kernel writes
 *     the sequence-major layout). Default: flash for the llama, mixtral and
 *     deepseek presets (Megatron-Core with Transformer Engine, Meta's and
 *     DeepSeek's trainers run fused attention); unfused for gpt and bert,
 *     whose figures are calibrated against Megatron-LM runs of that layout
 *     (vTrain's measurements, benchmarks/accuracy-vtrain.md). Selective
 *     recomputation has nothing to recompute in a flash layer.
 *   kv_lora > 0: multi-head latent attention (DeepSeek-V2/V3, as
 *     Megatron-Core's MLASelfAttention runs it; no biases), dn = qk_nope,
 *     dr = qk_rope, dv = v_head, dq = dn + dr:
 *       q path: attn.q_a [E, q_lora] -> attn.q_norm (RMSNorm) -> attn.q_b
 *       [q_lora, H dq] (q_lora = 0: one attn.q [E, H dq]) -> attn.q_heads
 *       [N,S,H,dq] -> attn.q_split (views dn | dr) -> attn.q_rope on the dr
 *       part -> attn.q_cat (concat: a copy, as torch.cat);
 *       kv path: attn.kv_a [E, kv_lora + dr] -> attn.kv_split (views: the
 *       latent | the shared rotary key) -> attn.kv_norm (RMSNorm on the
 *       latent) -> attn.kv_b [kv_lora, H (dn + dv)] -> attn.kv_heads ->
 *       attn.k_v_split (views k_nope | v); the rotary key attn.k_pe_head
 *       [N,S,1,dr] -> attn.k_rope -> attn.k_pe_expand (an expand view over
 *       the H heads) -> attn.k_cat (k_nope with it, a copy);
 *     then the core of gpt (views q_t/k_t/v_t, flash or unfused; scores over
 *     dq, context over dv), attn.merge [N,S,H dv] and attn.proj [H dv, E].
 *     Megatron's structural tensor parallelism (core/plan_gen.c) then keeps
 *     q_a, kv_a and the latent norms whole on every tp rank (a split of
 *     their output cannot be followed) and splits q_b, kv_b and the
 *     attention by heads, proj by its contraction: Megatron-Core's layout.
 * Keys (zoo.c order): layers, hidden, heads, seq, vocab, fused, vocab_pad,
 * tp, kv_heads, ffn, norm, act, rotary, tied, bias, qkv_bias, dropout,
 * precision, experts, topk, capacity, moe_ffn, shared, dense, attn, q_lora,
 * kv_lora, qk_nope, qk_rope, v_head (bert: layers .. tp, attn).
 */
#include "zoo.h"

#include <string.h>

#define DROPOUT 0.1

/* Key indices of the gpt family (zoo.c keeps its table in this order). */
enum {
    K_LAYERS_, K_HIDDEN, K_HEADS, K_SEQ, K_VOCAB, K_FUSED, K_VPAD, K_TP_, K_KV, K_FFN, K_NORM,
    K_ACT, K_ROTARY, K_TIED, K_BIAS, K_QKV_BIAS, K_DROPOUT, K_PREC, K_EXPERTS, K_TOPK, K_CAP,
    K_MOE_FFN, K_SHARED, K_DENSE, K_ATTN, K_QLORA, K_KVLORA, K_QK_NOPE, K_QK_ROPE, K_V_HEAD
};
#define K_BERT_ATTN 8 /* the bert family's attn key (after tp) */

typedef struct tcfg {
    int64_t batch, hidden, heads, seq;
    int fused, causal, flash;
    int64_t kv, ffn, experts, topk, moe_ffn, shared, dense;
    int64_t q_lora, kv_lora, qk_nope, qk_rope, v_head; /* MLA when kv_lora > 0 */
    double capacity;
    int rms, act, rotary, bias, qkv_bias;
    double dropout;
    ss_dtype gemm; /* SS_F8 for FP8 GEMMs, else SS_F32 (the tensors' dtype) */
    struct tie *tie; /* ALBERT's cross-layer sharing, NULL: every op owns its weights */
} tcfg;

/* Cross-layer weight sharing (ALBERT): while recording, the weighted ops of
 * the first layer are kept in build order; while reusing, a later layer's
 * k-th weighted op takes the weights of the first layer's k-th. */
typedef struct tie {
    int op[32];
    int n, pos, reuse;
} tie;

/* Add a weighted op of a layer (its own weights, or the first layer's under
 * c->tie); returns its first output. */
static int layer_add(zb *b, const char *name, ss_op_type t, const ss_op_attrs *a, int x,
                     const tcfg *c)
{
    tie *s = c->tie;
    const ss_op *o = s && s->reuse && s->pos < s->n ? ss_graph_op(b->g, s->op[s->pos++]) : NULL;
    int op = zb_add(b, name, t, a, 1, &x, o ? o->n_w : -1, o ? o->weights : NULL);
    if (s && !s->reuse && op >= 0 && s->n < (int)(sizeof s->op / sizeof s->op[0]))
        s->op[s->n++] = op;
    return zb_out(b, op, 0);
}

static void bert_cfg(tcfg *c, int64_t batch, const int64_t *p, int causal)
{
    memset(c, 0, sizeof *c);
    c->batch = batch;
    c->hidden = p[K_HIDDEN];
    c->heads = p[K_HEADS];
    c->seq = p[K_SEQ];
    c->fused = (int)p[K_FUSED];
    c->causal = causal;
    c->kv = c->heads;
    c->ffn = 4 * c->hidden;
    c->bias = c->qkv_bias = 1;
    c->dropout = DROPOUT;
}

static int ids_input(zb *b, const char *name, const tcfg *c)
{
    int64_t shape[2] = {c->batch, c->seq};
    ss_dim_kind kinds[2] = {SS_DIM_SAMPLE, SS_DIM_ATTRIBUTE};
    return zb_input(b, name, 2, shape, kinds, SS_I32);
}

/* Transpose [N,S,H,dh] -> [N,H,S,dh] read in place by a batched GEMM. */
static int view_t(zb *b, const char *name, int x)
{
    ss_op_attrs a = {0};
    static const int perm[4] = {0, 2, 1, 3};
    for (int i = 0; i < 4; i++)
        a.perm[i] = perm[i];
    a.view = 1;
    return zb_out(b, zb_add(b, name, SS_OP_TRANSPOSE, &a, 1, &x, -1, NULL), 0);
}

static int bmm(zb *b, const char *name, int x, int y, int trans_b)
{
    ss_op_attrs a = {0};
    a.trans_b = trans_b;
    int in[2] = {x, y};
    return zb_out(b, zb_add(b, name, SS_OP_BATCH_MATMUL, &a, 2, in, -1, NULL), 0);
}

/* A linear of a layer: its GEMM in FP8 when the model runs FP8. */
static int layer_linear(zb *b, const char *name, int x, int64_t out, int bias, const tcfg *c)
{
    ss_op_attrs a = {0};
    a.out_features = out;
    a.use_bias = bias;
    a.dtype = c->gemm;
    return layer_add(b, name, SS_OP_LINEAR, &a, x, c);
}

static int maybe_dropout(zb *b, const char *name, int x, const tcfg *c)
{
    return c->dropout > 0 ? zb_dropout(b, name, x, c->dropout) : x;
}

static int rope(zb *b, const char *name, int x, int64_t dh)
{
    ss_op_attrs a = {0};
    a.dim = dh;
    return zb_out(b, zb_add(b, name, SS_OP_ROTARY, &a, 1, &x, -1, NULL), 0);
}

static int norm(zb *b, const char *name, int x, const tcfg *c)
{
    ss_op_attrs a = {0};
    return layer_add(b, name, c->rms ? SS_OP_RMSNORM : SS_OP_LAYERNORM, &a, x, c);
}

/* The attention core from q [N,H,S,dh] (GQA: [N,kv,S G,dh]), k, v
 * [N,kv,S,dh] to the context shaped like q: the unfused scores, softmax,
 * dropout and product with v, or one flash_attention op. */
static int attn_core(zb *b, int l, int q, int k, int v, const tcfg *c)
{
    if (c->flash) {
        ss_op_attrs a = {0};
        a.causal = c->causal;
        a.rate = c->dropout;
        int in[3] = {q, k, v};
        return zb_out(b, zb_add(b, zb_name(b, "l%d.attn.flash", l), SS_OP_FLASH_ATTENTION, &a, 3,
                                in, -1, NULL), 0);
    }
    int s = bmm(b, zb_name(b, "l%d.attn.scores", l), q, k, 1);
    s = zb_softmax(b, zb_name(b, "l%d.attn.softmax", l), s, 3);
    s = maybe_dropout(b, zb_name(b, "l%d.attn.dropout", l), s, c);
    return bmm(b, zb_name(b, "l%d.attn.context", l), s, v, 0);
}

/* The context back to sequence-major: a copy (Megatron's .contiguous()),
 * or under flash a view (the flash kernel writes its output in that layout,
 * as FlashAttention's [batch, seq, heads, dh] does). */
static int transpose_ctx(zb *b, int l, int x, int n, const int *perm, const tcfg *c)
{
    ss_op_attrs a = {0};
    for (int i = 0; i < n; i++)
        a.perm[i] = perm[i];
    a.view = c->flash;
    return zb_out(b, zb_add(b, zb_name(b, "l%d.attn.context_t", l), SS_OP_TRANSPOSE, &a, 1, &x,
                            -1, NULL), 0);
}

/* Grouped-query attention core from q [N,S,kv,G dh], k, v [N,S,kv,dh] to
 * the merged context [N,S,E] (see the file comment). */
static int gqa_core(zb *b, int l, int q, int k, int v, const tcfg *c)
{
    int64_t E = c->hidden, H = c->heads, KV = c->kv, G = H / KV, dh = E / H;
    int64_t N = c->batch, S = c->seq;
    int64_t s5[5] = {N, S, KV, G, dh};
    q = zb_reshape(b, zb_name(b, "l%d.attn.q_groups", l), q, 5, s5);
    static const int to_heads[5] = {0, 2, 1, 3, 4};
    q = zb_transpose(b, zb_name(b, "l%d.attn.q_t", l), q, 5, to_heads);
    int64_t s4[4] = {N, KV, S * G, dh};
    q = zb_reshape(b, zb_name(b, "l%d.attn.q_rows", l), q, 4, s4);
    k = view_t(b, zb_name(b, "l%d.attn.k_t", l), k);
    v = view_t(b, zb_name(b, "l%d.attn.v_t", l), v);
    int ctx = attn_core(b, l, q, k, v, c);
    int64_t c5[5] = {N, KV, S, G, dh};
    ctx = zb_reshape(b, zb_name(b, "l%d.attn.context_groups", l), ctx, 5, c5);
    static const int to_seq[5] = {0, 2, 1, 3, 4};
    ctx = transpose_ctx(b, l, ctx, 5, to_seq, c);
    int64_t s3[3] = {N, S, E};
    return zb_reshape(b, zb_name(b, "l%d.attn.merge", l), ctx, 3, s3);
}

/* Split x along axis into two strided views (no kernel): *lo, *hi. */
static void split2(zb *b, const char *name, int x, int axis, int64_t n0, int64_t n1, int *lo,
                   int *hi)
{
    ss_op_attrs a = {0};
    a.axis = axis;
    a.n_split = 2;
    a.split_sizes[0] = n0;
    a.split_sizes[1] = n1;
    a.view = 1;
    int sp = zb_add(b, name, SS_OP_SPLIT, &a, 1, &x, -1, NULL);
    *lo = zb_out(b, sp, 0);
    *hi = zb_out(b, sp, 1);
}

/* Multi-head latent attention (see the file comment) from ln1's output x
 * to the projected output [N,S,E]. */
static int mla(zb *b, int l, int x, const tcfg *c)
{
    int64_t E = c->hidden, H = c->heads, N = c->batch, S = c->seq;
    int64_t dn = c->qk_nope, dr = c->qk_rope, dv = c->v_head, dq = dn + dr;
    int q;
    if (c->q_lora > 0) {
        q = layer_linear(b, zb_name(b, "l%d.attn.q_a", l), x, c->q_lora, 0, c);
        q = norm(b, zb_name(b, "l%d.attn.q_norm", l), q, c);
        q = layer_linear(b, zb_name(b, "l%d.attn.q_b", l), q, H * dq, 0, c);
    } else {
        q = layer_linear(b, zb_name(b, "l%d.attn.q", l), x, H * dq, 0, c);
    }
    int64_t s4[4] = {N, S, H, dq};
    q = zb_reshape(b, zb_name(b, "l%d.attn.q_heads", l), q, 4, s4);
    int q_nope, q_pe;
    split2(b, zb_name(b, "l%d.attn.q_split", l), q, 3, dn, dr, &q_nope, &q_pe);
    q_pe = rope(b, zb_name(b, "l%d.attn.q_rope", l), q_pe, dr);
    int qs[2] = {q_nope, q_pe};
    q = zb_concat(b, zb_name(b, "l%d.attn.q_cat", l), 2, qs, 3);
    int kv = layer_linear(b, zb_name(b, "l%d.attn.kv_a", l), x, c->kv_lora + dr, 0, c);
    int lat, k_pe;
    split2(b, zb_name(b, "l%d.attn.kv_split", l), kv, 2, c->kv_lora, dr, &lat, &k_pe);
    lat = norm(b, zb_name(b, "l%d.attn.kv_norm", l), lat, c);
    kv = layer_linear(b, zb_name(b, "l%d.attn.kv_b", l), lat, H * (dn + dv), 0, c);
    int64_t k4[4] = {N, S, H, dn + dv};
    kv = zb_reshape(b, zb_name(b, "l%d.attn.kv_heads", l), kv, 4, k4);
    int k_nope, v;
    split2(b, zb_name(b, "l%d.attn.k_v_split", l), kv, 3, dn, dv, &k_nope, &v);
    int64_t r4[4] = {N, S, 1, dr};
    k_pe = zb_reshape(b, zb_name(b, "l%d.attn.k_pe_head", l), k_pe, 4, r4);
    k_pe = rope(b, zb_name(b, "l%d.attn.k_rope", l), k_pe, dr);
    ss_op_attrs ea = {0};
    ea.axis = 2;
    ea.dim = H;
    ea.view = 1;
    k_pe = zb_out(b, zb_add(b, zb_name(b, "l%d.attn.k_pe_expand", l), SS_OP_EXPAND, &ea, 1,
                            &k_pe, -1, NULL), 0);
    int ks[2] = {k_nope, k_pe};
    int k = zb_concat(b, zb_name(b, "l%d.attn.k_cat", l), 2, ks, 3);
    static const int perm[4] = {0, 2, 1, 3};
    q = view_t(b, zb_name(b, "l%d.attn.q_t", l), q);
    k = view_t(b, zb_name(b, "l%d.attn.k_t", l), k);
    v = view_t(b, zb_name(b, "l%d.attn.v_t", l), v);
    int ctx = attn_core(b, l, q, k, v, c);
    ctx = transpose_ctx(b, l, ctx, 4, perm, c);
    int64_t s3[3] = {N, S, H * dv};
    ctx = zb_reshape(b, zb_name(b, "l%d.attn.merge", l), ctx, 3, s3);
    return layer_linear(b, zb_name(b, "l%d.attn.proj", l), ctx, E, 0, c);
}

/* Self-attention from ln1's output x to the projected output [N,S,E]. */
static int attention(zb *b, int l, int x, const tcfg *c)
{
    int64_t E = c->hidden, H = c->heads, KV = c->kv, dh = E / H, N = c->batch, S = c->seq;
    int64_t G = H / KV;
    if (c->kv_lora > 0)
        return mla(b, l, x, c);
    if (c->fused) {
        ss_op_attrs a = {0};
        a.heads = H;
        a.causal = c->causal;
        a.use_bias = c->bias;
        int in[3] = {x, x, x};
        return zb_out(b, zb_add(b, zb_name(b, "l%d.attn", l), SS_OP_ATTENTION, &a, 3, in, -1,
                                NULL), 0);
    }
    int qkv = layer_linear(b, zb_name(b, "l%d.attn.qkv", l), x, (H + 2 * KV) * dh, c->qkv_bias,
                           c);
    int64_t s4[4] = {N, S, KV, (G + 2) * dh};
    qkv = zb_reshape(b, zb_name(b, "l%d.attn.qkv_reshape", l), qkv, 4, s4);
    ss_op_attrs a = {0};
    a.axis = 3;
    a.n_split = 3;
    a.split_sizes[0] = G * dh;
    a.split_sizes[1] = a.split_sizes[2] = dh;
    a.view = 1;
    int sp = zb_add(b, zb_name(b, "l%d.attn.split", l), SS_OP_SPLIT, &a, 1, &qkv, -1, NULL);
    int q = zb_out(b, sp, 0), k = zb_out(b, sp, 1), v = zb_out(b, sp, 2);
    if (c->rotary) {
        q = rope(b, zb_name(b, "l%d.attn.q_rope", l), q, dh);
        k = rope(b, zb_name(b, "l%d.attn.k_rope", l), k, dh);
    }
    int ctx;
    if (G > 1) {
        ctx = gqa_core(b, l, q, k, v, c);
    } else {
        static const int perm[4] = {0, 2, 1, 3};
        q = view_t(b, zb_name(b, "l%d.attn.q_t", l), q);
        k = view_t(b, zb_name(b, "l%d.attn.k_t", l), k);
        v = view_t(b, zb_name(b, "l%d.attn.v_t", l), v);
        ctx = attn_core(b, l, q, k, v, c);
        ctx = transpose_ctx(b, l, ctx, 4, perm, c);
        int64_t s3[3] = {N, S, E};
        ctx = zb_reshape(b, zb_name(b, "l%d.attn.merge", l), ctx, 3, s3);
    }
    return layer_linear(b, zb_name(b, "l%d.attn.proj", l), ctx, E, c->bias, c);
}

/* An expert linear over the dispatched slots [X, C, in]. */
static int expert_linear(zb *b, const char *name, int x, int64_t out, const tcfg *c)
{
    ss_op_attrs a = {0};
    a.out_features = out;
    a.use_bias = c->bias;
    a.topk = c->topk;
    a.dtype = c->gemm;
    return zb_out(b, zb_add(b, name, SS_OP_EXPERT_LINEAR, &a, 1, &x, -1, NULL), 0);
}

/* The MLP body from the normalised x to its output (before dropout):
 * dense, or its expert version over [X, C, .] slots when pre = "moe". */
static int mlp_body(zb *b, int l, const char *pre, int y, const tcfg *c, int experts, int64_t F)
{
#define LIN(part, in, out)                                                                    \
    (experts ? expert_linear(b, zb_name(b, "l%d.%s." part, l, pre), in, out, c)              \
             : layer_linear(b, zb_name(b, "l%d.%s." part, l, pre), in, out, c->bias, c))
    if (c->act == 1) { /* swiglu */
        int gate = LIN("gate", y, F);
        int up = LIN("up", y, F);
        gate = zb_unary(b, zb_name(b, "l%d.%s.silu", l, pre), gate, SS_UNARY_SILU);
        y = zb_binary(b, zb_name(b, "l%d.%s.gated", l, pre), gate, up, SS_BINARY_MUL);
    } else {
        y = LIN("fc1", y, F);
        y = c->act == 2 ? zb_unary(b, zb_name(b, "l%d.%s.relu2", l, pre), y, SS_UNARY_RELU2)
                        : zb_unary(b, zb_name(b, "l%d.%s.gelu", l, pre), y, SS_UNARY_GELU);
    }
    return LIN("fc2", y, c->hidden);
#undef LIN
}

static int moe(zb *b, int l, int y, const tcfg *c)
{
    int logits = zb_linear(b, zb_name(b, "l%d.moe.router", l), y, c->experts, 0);
    int probs = zb_softmax(b, zb_name(b, "l%d.moe.probs", l), logits, 2);
    ss_op_attrs a = {0};
    a.topk = c->topk;
    a.capacity = c->capacity;
    int in[2] = {y, probs};
    int slots = zb_out(b, zb_add(b, zb_name(b, "l%d.moe.dispatch", l), SS_OP_MOE_DISPATCH, &a,
                                 2, in, -1, NULL), 0);
    slots = mlp_body(b, l, "moe", slots, c, 1, c->moe_ffn);
    in[0] = slots;
    int out = zb_out(b, zb_add(b, zb_name(b, "l%d.moe.combine", l), SS_OP_MOE_COMBINE, &a, 2, in,
                               -1, NULL), 0);
    if (c->shared == 0)
        return out;
    int sh = mlp_body(b, l, "shared", y, c, 0, c->shared * c->moe_ffn);
    return zb_binary(b, zb_name(b, "l%d.moe.add_shared", l), out, sh, SS_BINARY_ADD);
}

static int layer(zb *b, int l, int x, const tcfg *c)
{
    int y = norm(b, zb_name(b, "l%d.ln1", l), x, c);
    y = attention(b, l, y, c);
    y = maybe_dropout(b, zb_name(b, "l%d.attn.proj_dropout", l), y, c);
    x = zb_binary(b, zb_name(b, "l%d.attn.residual", l), x, y, SS_BINARY_ADD);
    y = norm(b, zb_name(b, "l%d.ln2", l), x, c);
    y = c->experts > 0 && l >= c->dense ? moe(b, l, y, c) : mlp_body(b, l, "mlp", y, c, 0, c->ffn);
    y = maybe_dropout(b, zb_name(b, "l%d.mlp.dropout", l), y, c);
    return zb_binary(b, zb_name(b, "l%d.mlp.residual", l), x, y, SS_BINARY_ADD);
}

/* Logits over the vocabulary with the token table tied (trans_b: the table
 * is [V, h]), then the loss against labels [N, S]. */
static void tied_head(zb *b, const char *name, int x, int table_op, int64_t vocab, int labels)
{
    ss_op_attrs a = {0};
    a.out_features = vocab;
    a.trans_b = 1;
    int w = zb_weight(b, table_op, 0);
    int logits = zb_out(b, zb_add(b, name, SS_OP_LINEAR, &a, 1, &x, 1, &w), 0);
    zb_softmax_ce(b, "loss", logits, labels);
}

static int embed(zb *b, const char *name, int ids, int64_t vocab, int64_t dim, int *op)
{
    ss_op_attrs a = {0};
    a.vocab = vocab;
    a.dim = dim;
    a.dtype = b->act;
    *op = zb_add(b, name, SS_OP_EMBEDDING, &a, 1, &ids, -1, NULL);
    return zb_out(b, *op, 0);
}

/* Megatron's padded vocabulary: vocab rounded up to a multiple of pad * tp
 * (pad = 0: as given). */
static int64_t padded_vocab(int64_t vocab, int64_t pad, int64_t tp)
{
    int64_t q = pad * tp;
    return q > 0 ? (vocab + q - 1) / q * q : vocab;
}

void ss_zoo_build_gpt(zb *b, int64_t batch, const int64_t *p)
{
    int layers = (int)p[K_LAYERS_];
    tcfg c;
    bert_cfg(&c, batch, p, 1);
    c.kv = p[K_KV] > 0 ? p[K_KV] : c.heads;
    c.ffn = p[K_FFN] > 0 ? p[K_FFN] : 4 * c.hidden;
    c.rms = p[K_NORM] == 1;
    c.act = (int)p[K_ACT];
    c.rotary = (int)p[K_ROTARY];
    c.bias = (int)p[K_BIAS];
    c.qkv_bias = p[K_QKV_BIAS] >= 0 ? (int)p[K_QKV_BIAS] : c.bias;
    c.dropout = p[K_DROPOUT] ? DROPOUT : 0;
    c.experts = p[K_EXPERTS];
    c.topk = p[K_TOPK];
    c.capacity = (double)p[K_CAP] / 100.0;
    c.moe_ffn = p[K_MOE_FFN] > 0 ? p[K_MOE_FFN] : c.ffn;
    c.shared = p[K_SHARED];
    c.dense = p[K_DENSE];
    c.gemm = p[K_PREC] == 2 ? SS_F8 : SS_F32;
    c.flash = (int)p[K_ATTN];
    c.q_lora = p[K_QLORA];
    c.kv_lora = p[K_KVLORA];
    c.qk_nope = p[K_QK_NOPE];
    c.qk_rope = p[K_QK_ROPE];
    c.v_head = p[K_V_HEAD];
    b->act = p[K_PREC] == 1 ? SS_F16 : p[K_PREC] == 3 ? SS_F32 : SS_BF16; /* 3: fp32 */
    if (c.fused && c.flash) {
        b->err = 1;
        ss_diag_set(b->d, SS_ERR_INVALID, "fused=1 (the whole attention block as one op) and "
                    "attn=flash exclude each other; give attn=unfused");
        return;
    }
    if (c.fused && c.kv != c.heads) {
        b->err = 1;
        ss_diag_set(b->d, SS_ERR_INVALID, "fused=1 supports multi-head attention only "
                    "(kv_heads=%lld, heads=%lld)", (long long)c.kv, (long long)c.heads);
        return;
    }
    int64_t vocab = padded_vocab(p[K_VOCAB], p[K_VPAD], p[K_TP_]);
    int tokens = ids_input(b, "tokens", &c);
    int positions = c.rotary ? -1 : ids_input(b, "positions", &c);
    int labels = ids_input(b, "labels", &c);
    int tok_op, pos_op;
    int x = embed(b, "embed.tokens", tokens, vocab, c.hidden, &tok_op);
    if (!c.rotary) {
        int pos = embed(b, "embed.positions", positions, c.seq, c.hidden, &pos_op);
        x = zb_binary(b, "embed.add", x, pos, SS_BINARY_ADD);
    }
    x = maybe_dropout(b, "embed.dropout", x, &c);
    for (int l = 0; l < layers; l++)
        x = layer(b, l, x, &c);
    x = norm(b, "final_ln", x, &c);
    if (p[K_TIED]) {
        tied_head(b, "lm_head", x, tok_op, vocab, labels);
    } else {
        int logits = zb_linear(b, "lm_head", x, vocab, 0);
        zb_softmax_ce(b, "loss", logits, labels);
    }
}

/* BERT: token + position + segment embeddings, LayerNorm, layers, final
 * LayerNorm (Megatron's pre-LN BERT), masked-LM head: dense + gelu +
 * LayerNorm + decoder tied to the token table (no decoder bias), loss over
 * every position. No pooler / next-sentence head. */
void ss_zoo_build_bert(zb *b, int64_t batch, const int64_t *p)
{
    int layers = (int)p[K_LAYERS_];
    tcfg c;
    bert_cfg(&c, batch, p, 0);
    c.flash = (int)p[K_BERT_ATTN];
    if (c.fused && c.flash) {
        b->err = 1;
        ss_diag_set(b->d, SS_ERR_INVALID, "fused=1 (the whole attention block as one op) and "
                    "attn=flash exclude each other; give attn=unfused");
        return;
    }
    int64_t vocab = padded_vocab(p[K_VOCAB], p[K_VPAD], p[K_TP_]);
    int tokens = ids_input(b, "tokens", &c);
    int positions = ids_input(b, "positions", &c);
    int segments = ids_input(b, "segments", &c);
    int labels = ids_input(b, "labels", &c);
    int tok_op, pos_op, seg_op;
    int x = embed(b, "embed.tokens", tokens, vocab, c.hidden, &tok_op);
    int pos = embed(b, "embed.positions", positions, c.seq, c.hidden, &pos_op);
    int seg = embed(b, "embed.segments", segments, 2, c.hidden, &seg_op);
    x = zb_binary(b, "embed.add_positions", x, pos, SS_BINARY_ADD);
    x = zb_binary(b, "embed.add_segments", x, seg, SS_BINARY_ADD);
    x = zb_norm(b, "embed.ln", x, SS_OP_LAYERNORM);
    x = zb_dropout(b, "embed.dropout", x, DROPOUT);
    for (int l = 0; l < layers; l++)
        x = layer(b, l, x, &c);
    x = zb_norm(b, "final_ln", x, SS_OP_LAYERNORM);
    x = zb_linear(b, "mlm.dense", x, c.hidden, 1);
    x = zb_unary(b, "mlm.gelu", x, SS_UNARY_GELU);
    x = zb_norm(b, "mlm.ln", x, SS_OP_LAYERNORM);
    tied_head(b, "mlm.decoder", x, tok_op, vocab, labels);
}

/* An ALBERT layer (post-LN, as BERT and ALBERT run it): attention, dropout,
 * residual, LayerNorm, MLP, dropout, residual, LayerNorm. Under c->tie its
 * weighted ops take the first layer's weights. */
static int albert_layer(zb *b, int l, int x, const tcfg *c)
{
    int y = attention(b, l, x, c);
    y = maybe_dropout(b, zb_name(b, "l%d.attn.proj_dropout", l), y, c);
    x = zb_binary(b, zb_name(b, "l%d.attn.residual", l), x, y, SS_BINARY_ADD);
    x = norm(b, zb_name(b, "l%d.ln1", l), x, c);
    y = mlp_body(b, l, "mlp", x, c, 0, c->ffn);
    y = maybe_dropout(b, zb_name(b, "l%d.mlp.dropout", l), y, c);
    x = zb_binary(b, zb_name(b, "l%d.mlp.residual", l), x, y, SS_BINARY_ADD);
    return norm(b, zb_name(b, "l%d.ln2", l), x, c);
}

/* ALBERT (Lan et al. 2020; Hugging Face's AlbertForPreTraining, which
 * sahajBERT trained): factorised embeddings (token, position and segment
 * tables of width `embedding`, LayerNorm, dropout, a projection to the
 * hidden width), `layers` applications of ONE layer's weights (the ops of
 * layer l > 0 share layer 0's weight tensors: the parameters do not grow
 * with the depth, the compute does), the masked-LM head (dense to the
 * embedding width, gelu, LayerNorm, decoder tied to the token table, no
 * decoder bias) and the sentence-order head (the first token through the
 * pooler dense + tanh, a 2-way classifier, its own loss). Keys (zoo.c
 * order): layers, hidden, heads, seq, vocab, embedding. */
void ss_zoo_build_albert(zb *b, int64_t batch, const int64_t *p)
{
    enum { A_LAYERS, A_HIDDEN, A_HEADS, A_SEQ, A_VOCAB, A_EMB };
    tie share;
    memset(&share, 0, sizeof share);
    tcfg c;
    memset(&c, 0, sizeof c);
    c.batch = batch;
    c.hidden = p[A_HIDDEN];
    c.heads = c.kv = p[A_HEADS];
    c.seq = p[A_SEQ];
    c.ffn = 4 * c.hidden;
    c.bias = c.qkv_bias = 1;
    c.dropout = DROPOUT;
    int64_t emb = p[A_EMB], vocab = p[A_VOCAB];
    int tokens = ids_input(b, "tokens", &c);
    int positions = ids_input(b, "positions", &c);
    int segments = ids_input(b, "segments", &c);
    int labels = ids_input(b, "labels", &c);
    ss_dim_kind k_sample = SS_DIM_SAMPLE;
    int sop_labels = zb_input(b, "sop_labels", 1, &batch, &k_sample, SS_I32);
    int tok_op, pos_op, seg_op;
    int x = embed(b, "embed.tokens", tokens, vocab, emb, &tok_op);
    int pos = embed(b, "embed.positions", positions, c.seq, emb, &pos_op);
    int seg = embed(b, "embed.segments", segments, 2, emb, &seg_op);
    x = zb_binary(b, "embed.add_positions", x, pos, SS_BINARY_ADD);
    x = zb_binary(b, "embed.add_segments", x, seg, SS_BINARY_ADD);
    x = zb_norm(b, "embed.ln", x, SS_OP_LAYERNORM);
    x = zb_dropout(b, "embed.dropout", x, DROPOUT);
    x = zb_linear(b, "embed.project", x, c.hidden, 1);
    c.tie = &share;
    for (int l = 0; l < (int)p[A_LAYERS]; l++) {
        share.pos = 0;
        share.reuse = l > 0;
        x = albert_layer(b, l, x, &c);
    }
    int y = zb_linear(b, "mlm.dense", x, emb, 1);
    y = zb_unary(b, "mlm.gelu", y, SS_UNARY_GELU);
    y = zb_norm(b, "mlm.ln", y, SS_OP_LAYERNORM);
    tied_head(b, "mlm.decoder", y, tok_op, vocab, labels);
    ss_op_attrs a = {0};
    a.axis = 1;
    a.n_split = 2;
    a.split_sizes[0] = 1;
    a.split_sizes[1] = c.seq - 1;
    a.view = 1;
    int first = zb_out(b, zb_add(b, "sop.first", SS_OP_SPLIT, &a, 1, &x, -1, NULL), 0);
    int64_t s2[2] = {batch, c.hidden};
    first = zb_reshape(b, "sop.first_token", first, 2, s2);
    int pooled = zb_linear(b, "sop.pooler", first, c.hidden, 1);
    pooled = zb_unary(b, "sop.tanh", pooled, SS_UNARY_TANH);
    int logits = zb_linear(b, "sop.classifier", pooled, 2, 1);
    zb_softmax_ce(b, "sop.loss", logits, sop_labels);
}
