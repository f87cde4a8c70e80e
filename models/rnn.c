/*
 * rnn.c — the recurrent zoo families: rnntc, rnnlm, nmt (FlexFlow's RNNs).
 *
 * The recurrence is unrolled: one LSTM *cell* op per (layer, step), named
 * "l<layer>.t<step>" ("enc."/"dec." prefixes in nmt). The op of step 0 owns
 * the layer's weights W[in+H, 4H] and b[4H]; every later step shares them
 * (spec n_w >= 0), as do the per-step embeddings and projections. Each step
 * reads its token ids from its own input "tokens.t<step>" [N]. Initial states
 * "l<layer>.h0"/"l<layer>.c0" are graph inputs [N, H]. Invariant: parameters
 * do not grow with the number of steps. Keys (zoo.c order): steps, layers,
 * hidden, then vocab (and classes for rnntc).
 */
#include "zoo.h"

#include <string.h>

static const ss_dim_kind k_sample[1] = {SS_DIM_SAMPLE};
static const ss_dim_kind k_state[2] = {SS_DIM_SAMPLE, SS_DIM_PARAMETER};

/* Add op `name` sharing all weights of op `owner` (owner < 0: own weights). */
static int add_shared(zb *b, const char *name, ss_op_type t, const ss_op_attrs *a, int n_in,
                      const int *in, int owner)
{
    if (b->err)
        return -1;
    if (owner < 0)
        return zb_add(b, name, t, a, n_in, in, -1, NULL);
    const ss_op *o = ss_graph_op(b->g, owner);
    return zb_add(b, name, t, a, n_in, in, o->n_w, o->weights);
}

static int token_input(zb *b, const char *name, int64_t batch)
{
    return zb_input(b, name, 1, &batch, k_sample, SS_I32);
}

static int embed_step(zb *b, const char *name, int ids, int64_t vocab, int64_t dim, int *owner)
{
    ss_op_attrs a = {0};
    a.vocab = vocab;
    a.dim = dim;
    a.dtype = b->act;
    int op = add_shared(b, name, SS_OP_EMBEDDING, &a, 1, &ids, *owner);
    if (*owner < 0)
        *owner = op;
    return zb_out(b, op, 0);
}

static int linear_step(zb *b, const char *name, int x, int64_t out, int bias, int *owner)
{
    ss_op_attrs a = {0};
    a.out_features = out;
    a.use_bias = bias;
    int op = add_shared(b, name, SS_OP_LINEAR, &a, 1, &x, *owner);
    if (*owner < 0)
        *owner = op;
    return zb_out(b, op, 0);
}

/* A stack of LSTM layers over `layers` states. */
typedef struct stack {
    int layers;
    int64_t hidden;
    int h[64], c[64];     /* current state tensors per layer */
    int owner[64];        /* op owning each layer's weights (-1 before step 0) */
} stack;

static void stack_init(zb *b, stack *s, const char *prefix, int layers, int64_t batch,
                       int64_t hidden)
{
    s->layers = layers;
    s->hidden = hidden;
    int64_t shape[2] = {batch, hidden};
    for (int l = 0; l < layers; l++) {
        s->h[l] = zb_input(b, zb_name(b, "%sl%d.h0", prefix, l), 2, shape, k_state, b->act);
        s->c[l] = zb_input(b, zb_name(b, "%sl%d.c0", prefix, l), 2, shape, k_state, b->act);
        s->owner[l] = -1;
    }
}

/* One step through every layer; returns the top layer's new h. */
static int stack_step(zb *b, stack *s, const char *prefix, int step, int x)
{
    ss_op_attrs a = {0};
    a.lstm_mode = SS_LSTM_CELL;
    a.hidden = s->hidden;
    for (int l = 0; l < s->layers; l++) {
        int in[3] = {x, s->h[l], s->c[l]};
        int op = add_shared(b, zb_name(b, "%sl%d.t%d", prefix, l, step), SS_OP_LSTM, &a, 3, in,
                            s->owner[l]);
        if (s->owner[l] < 0)
            s->owner[l] = op;
        s->h[l] = zb_out(b, op, 0);
        s->c[l] = zb_out(b, op, 1);
        x = s->h[l];
    }
    return x;
}

void ss_zoo_build_rnntc(zb *b, int64_t batch, const int64_t *p)
{
    int steps = (int)p[0], layers = (int)p[1];
    int64_t hidden = p[2], vocab = p[3], classes = p[4];
    stack s;
    stack_init(b, &s, "", layers, batch, hidden);
    int emb = -1, top = -1;
    for (int t = 0; t < steps; t++) {
        int ids = token_input(b, zb_name(b, "tokens.t%d", t), batch);
        int x = embed_step(b, zb_name(b, "embed.t%d", t), ids, vocab, hidden, &emb);
        top = stack_step(b, &s, "", t, x);
    }
    int labels = token_input(b, "labels", batch);
    int logits = zb_linear(b, "classifier", top, classes, 1);
    zb_softmax_ce(b, "loss", logits, labels);
}

void ss_zoo_build_rnnlm(zb *b, int64_t batch, const int64_t *p)
{
    int steps = (int)p[0], layers = (int)p[1];
    int64_t hidden = p[2], vocab = p[3];
    stack s;
    stack_init(b, &s, "", layers, batch, hidden);
    int emb = -1, proj = -1;
    for (int t = 0; t < steps; t++) {
        int ids = token_input(b, zb_name(b, "tokens.t%d", t), batch);
        int x = embed_step(b, zb_name(b, "embed.t%d", t), ids, vocab, hidden, &emb);
        int top = stack_step(b, &s, "", t, x);
        int logits = linear_step(b, zb_name(b, "proj.t%d", t), top, vocab, 1, &proj);
        int labels = token_input(b, zb_name(b, "labels.t%d", t), batch);
        zb_softmax_ce(b, zb_name(b, "loss.t%d", t), logits, labels);
    }
}

/* Concatenate n [N, H] tensors along dim 1 into [N, n*H], at most
 * SS_MAX_INPUTS per concat op ("enc.memory.c<i>", then "enc.memory.concat"). */
static int concat_all(zb *b, int n, const int *xs)
{
    if (n == 1)
        return xs[0];
    int parts[SS_MAX_INPUTS];
    int np = 0;
    if (n <= SS_MAX_INPUTS)
        return zb_concat(b, "enc.memory.concat", n, xs, 1);
    for (int i = 0; i < n && np < SS_MAX_INPUTS; i += SS_MAX_INPUTS) {
        int m = n - i < SS_MAX_INPUTS ? n - i : SS_MAX_INPUTS;
        parts[np] = m == 1 ? xs[i] : zb_concat(b, zb_name(b, "enc.memory.c%d", np), m, xs + i, 1);
        np++;
    }
    return zb_concat(b, "enc.memory.concat", np, parts, 1);
}

void ss_zoo_build_nmt(zb *b, int64_t batch, const int64_t *p)
{
    int steps = (int)p[0], layers = (int)p[1];
    int64_t hidden = p[2], vocab = p[3];
    if (steps > SS_MAX_INPUTS * SS_MAX_INPUTS) {
        b->err = 1;
        ss_diag_set(b->d, SS_ERR_INVALID, "nmt supports at most %d steps",
                    SS_MAX_INPUTS * SS_MAX_INPUTS);
        return;
    }
    /* Encoder. */
    stack enc;
    stack_init(b, &enc, "enc.", layers, batch, hidden);
    int emb = -1;
    int outs[SS_MAX_INPUTS * SS_MAX_INPUTS];
    for (int t = 0; t < steps; t++) {
        int ids = token_input(b, zb_name(b, "enc.tokens.t%d", t), batch);
        int x = embed_step(b, zb_name(b, "enc.embed.t%d", t), ids, vocab, hidden, &emb);
        outs[t] = stack_step(b, &enc, "enc.", t, x);
    }
    int mem = concat_all(b, steps, outs);
    int64_t ms[3] = {batch, steps, hidden};
    mem = zb_reshape(b, "enc.memory", mem, 3, ms);

    /* Decoder: starts from the encoder's final states, attends over memory. */
    stack dec;
    memcpy(&dec, &enc, sizeof dec);
    for (int l = 0; l < layers; l++)
        dec.owner[l] = -1;
    int demb = -1, wc = -1, proj = -1;
    int64_t qs[3] = {batch, 1, hidden}, fs[2] = {batch, hidden};
    for (int t = 0; t < steps; t++) {
        int ids = token_input(b, zb_name(b, "dec.tokens.t%d", t), batch);
        int x = embed_step(b, zb_name(b, "dec.embed.t%d", t), ids, vocab, hidden, &demb);
        int h = stack_step(b, &dec, "dec.", t, x);
        int q = zb_reshape(b, zb_name(b, "dec.attn.t%d.query", t), h, 3, qs);
        ss_op_attrs a = {0};
        a.trans_b = 1;
        int in[2] = {q, mem};
        int sc = zb_out(b, zb_add(b, zb_name(b, "dec.attn.t%d.scores", t), SS_OP_BATCH_MATMUL,
                                  &a, 2, in, -1, NULL), 0);
        sc = zb_softmax(b, zb_name(b, "dec.attn.t%d.softmax", t), sc, 2);
        a.trans_b = 0;
        in[0] = sc;
        int ctx = zb_out(b, zb_add(b, zb_name(b, "dec.attn.t%d.context", t), SS_OP_BATCH_MATMUL,
                                   &a, 2, in, -1, NULL), 0);
        ctx = zb_reshape(b, zb_name(b, "dec.attn.t%d.context_flat", t), ctx, 2, fs);
        int cat[2] = {h, ctx};
        int hc = zb_concat(b, zb_name(b, "dec.attn.t%d.concat", t), 2, cat, 1);
        hc = linear_step(b, zb_name(b, "dec.attn.t%d.out", t), hc, hidden, 0, &wc);
        hc = zb_unary(b, zb_name(b, "dec.attn.t%d.tanh", t), hc, SS_UNARY_TANH);
        int logits = linear_step(b, zb_name(b, "dec.proj.t%d", t), hc, vocab, 1, &proj);
        int labels = token_input(b, zb_name(b, "dec.labels.t%d", t), batch);
        zb_softmax_ce(b, zb_name(b, "dec.loss.t%d", t), logits, labels);
    }
}
