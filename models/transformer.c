/*
 * transformer.c — the transformer zoo families: gpt and bert.
 *
 * Layers are built from primitive ops the way Megatron-LM runs them, so the
 * cost model sees the real kernels (pre-LayerNorm):
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
 * 2h. Keys (zoo.c order): layers, hidden, heads, seq, vocab, fused,
 * vocab_pad, tp. The vocabulary is padded as Megatron-LM pads it: rounded up
 * to a multiple of vocab_pad * tp (--make-vocab-size-divisible-by, 128 by
 * default, times the tensor-parallel degree), so every tp rank holds a
 * multiple of vocab_pad rows; vocab_pad = 0 keeps it as given.
 */
#include "zoo.h"

#define DROPOUT 0.1

typedef struct tcfg {
    int64_t batch, hidden, heads, seq;
    int fused, causal;
} tcfg;

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

/* Self-attention from ln1's output x to the projected output [N,S,E]. */
static int attention(zb *b, int l, int x, const tcfg *c)
{
    int64_t E = c->hidden, H = c->heads, dh = E / H, N = c->batch, S = c->seq;
    if (c->fused) {
        ss_op_attrs a = {0};
        a.heads = H;
        a.causal = c->causal;
        a.use_bias = 1;
        int in[3] = {x, x, x};
        return zb_out(b, zb_add(b, zb_name(b, "l%d.attn", l), SS_OP_ATTENTION, &a, 3, in, -1,
                                NULL), 0);
    }
    int qkv = zb_linear(b, zb_name(b, "l%d.attn.qkv", l), x, 3 * E, 1);
    int64_t s4[4] = {N, S, H, 3 * dh};
    qkv = zb_reshape(b, zb_name(b, "l%d.attn.qkv_reshape", l), qkv, 4, s4);
    ss_op_attrs a = {0};
    a.axis = 3;
    a.n_split = 3;
    a.split_sizes[0] = a.split_sizes[1] = a.split_sizes[2] = dh;
    a.view = 1;
    int sp = zb_add(b, zb_name(b, "l%d.attn.split", l), SS_OP_SPLIT, &a, 1, &qkv, -1, NULL);
    static const int perm[4] = {0, 2, 1, 3};
    int q = view_t(b, zb_name(b, "l%d.attn.q_t", l), zb_out(b, sp, 0));
    int k = view_t(b, zb_name(b, "l%d.attn.k_t", l), zb_out(b, sp, 1));
    int v = view_t(b, zb_name(b, "l%d.attn.v_t", l), zb_out(b, sp, 2));
    int s = bmm(b, zb_name(b, "l%d.attn.scores", l), q, k, 1);
    s = zb_softmax(b, zb_name(b, "l%d.attn.softmax", l), s, 3);
    s = zb_dropout(b, zb_name(b, "l%d.attn.dropout", l), s, DROPOUT);
    int ctx = bmm(b, zb_name(b, "l%d.attn.context", l), s, v, 0);
    ctx = zb_transpose(b, zb_name(b, "l%d.attn.context_t", l), ctx, 4, perm);
    int64_t s3[3] = {N, S, E};
    ctx = zb_reshape(b, zb_name(b, "l%d.attn.merge", l), ctx, 3, s3);
    return zb_linear(b, zb_name(b, "l%d.attn.proj", l), ctx, E, 1);
}

static int layer(zb *b, int l, int x, const tcfg *c)
{
    int y = zb_norm(b, zb_name(b, "l%d.ln1", l), x, SS_OP_LAYERNORM);
    y = attention(b, l, y, c);
    y = zb_dropout(b, zb_name(b, "l%d.attn.proj_dropout", l), y, DROPOUT);
    x = zb_binary(b, zb_name(b, "l%d.attn.residual", l), x, y, SS_BINARY_ADD);
    y = zb_norm(b, zb_name(b, "l%d.ln2", l), x, SS_OP_LAYERNORM);
    y = zb_linear(b, zb_name(b, "l%d.mlp.fc1", l), y, 4 * c->hidden, 1);
    y = zb_unary(b, zb_name(b, "l%d.mlp.gelu", l), y, SS_UNARY_GELU);
    y = zb_linear(b, zb_name(b, "l%d.mlp.fc2", l), y, c->hidden, 1);
    y = zb_dropout(b, zb_name(b, "l%d.mlp.dropout", l), y, DROPOUT);
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
    int layers = (int)p[0];
    tcfg c = {batch, p[1], p[2], p[3], (int)p[5], 1};
    int64_t vocab = padded_vocab(p[4], p[6], p[7]);
    int tokens = ids_input(b, "tokens", &c);
    int positions = ids_input(b, "positions", &c);
    int labels = ids_input(b, "labels", &c);
    int tok_op, pos_op;
    int x = embed(b, "embed.tokens", tokens, vocab, c.hidden, &tok_op);
    int pos = embed(b, "embed.positions", positions, c.seq, c.hidden, &pos_op);
    x = zb_binary(b, "embed.add", x, pos, SS_BINARY_ADD);
    x = zb_dropout(b, "embed.dropout", x, DROPOUT);
    for (int l = 0; l < layers; l++)
        x = layer(b, l, x, &c);
    x = zb_norm(b, "final_ln", x, SS_OP_LAYERNORM);
    tied_head(b, "lm_head", x, tok_op, vocab, labels);
}

/* BERT: token + position + segment embeddings, LayerNorm, layers, final
 * LayerNorm (Megatron's pre-LN BERT), masked-LM head: dense + gelu +
 * LayerNorm + decoder tied to the token table (no decoder bias), loss over
 * every position. No pooler / next-sentence head. */
void ss_zoo_build_bert(zb *b, int64_t batch, const int64_t *p)
{
    int layers = (int)p[0];
    tcfg c = {batch, p[1], p[2], p[3], (int)p[5], 0};
    int64_t vocab = padded_vocab(p[4], p[6], p[7]);
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
