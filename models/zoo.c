/*
 * zoo.c — the model zoo registry, model spec parsing and the builder helpers
 * shared by the family files (cnn.c, rnn.c, transformer.c, mlp.c).
 *
 * A spec is "NAME[:key=value,...]" (a zoo family with integer or named
 * parameters), a path to a model JSON file (anything containing '/' or
 * ending in ".json"), or "hf:PATH[:key=value,...]" (a Hugging Face
 * config.json turned into a gpt spec by hf_import.c; the keys override).
 * Invariant: a family builder only runs on a spec whose every key is known,
 * given once, an integer, within its range and consistent with the others;
 * whatever fails later (an impossible shape) is reported by the graph and
 * wrapped with the spec. On any error no graph is returned.
 */
#include "zoo.h"

#include "core/model_io.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Builder helpers                                                     */
/* ------------------------------------------------------------------ */

const char *zb_name(zb *b, const char *fmt, ...)
{
    char *buf = b->names[b->next_name];
    b->next_name = (b->next_name + 1) % 4;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof b->names[0], fmt, ap);
    va_end(ap);
    return buf;
}

int zb_add(zb *b, const char *name, ss_op_type type, const ss_op_attrs *a, int n_in,
           const int *in, int n_w, const int *w)
{
    if (b->err)
        return -1;
    ss_op_spec s;
    memset(&s, 0, sizeof s);
    s.name = name;
    s.type = type;
    s.attrs = *a;
    if (n_in < 0 || n_in > SS_MAX_INPUTS || n_w > SS_MAX_WEIGHTS) {
        b->err = 1;
        ss_diag_set(b->d, SS_ERR_INVALID, "operator %s: too many operands", name);
        return -1;
    }
    s.n_in = n_in;
    for (int i = 0; i < n_in; i++) {
        if (in[i] < 0) {
            b->err = 1;
            ss_diag_set(b->d, SS_ERR_INVALID, "operator %s: missing input %d", name, i);
            return -1;
        }
        s.inputs[i] = in[i];
    }
    s.n_w = n_w;
    for (int i = 0; i < n_w; i++)
        s.weights[i] = w[i];
    int id = ss_graph_add_op(b->g, &s, b->d);
    if (id < 0)
        b->err = 1;
    return id;
}

int zb_out(zb *b, int op, int i)
{
    if (op < 0 || b->err)
        return -1;
    const ss_op *o = ss_graph_op(b->g, op);
    return o && i < o->n_out ? o->outputs[i] : -1;
}

int zb_weight(zb *b, int op, int i)
{
    if (op < 0 || b->err)
        return -1;
    const ss_op *o = ss_graph_op(b->g, op);
    return o && i < o->n_w ? o->weights[i] : -1;
}

static int add1(zb *b, const char *name, ss_op_type type, const ss_op_attrs *a, int n_in,
                const int *in)
{
    return zb_out(b, zb_add(b, name, type, a, n_in, in, -1, NULL), 0);
}

int zb_input(zb *b, const char *name, int ndim, const int64_t *shape, const ss_dim_kind *kinds,
             ss_dtype dt)
{
    ss_op_attrs a = {0};
    a.ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        a.shape[i] = shape[i];
        a.kind[i] = kinds[i];
    }
    a.dtype = dt;
    return add1(b, name, SS_OP_INPUT, &a, 0, NULL);
}

int zb_linear(zb *b, const char *name, int x, int64_t out, int bias)
{
    ss_op_attrs a = {0};
    a.out_features = out;
    a.use_bias = bias;
    return add1(b, name, SS_OP_LINEAR, &a, 1, &x);
}

int zb_conv(zb *b, const char *name, int x, int64_t out, int64_t kh, int64_t kw, int64_t sh,
            int64_t sw, int64_t ph, int64_t pw, int bias)
{
    ss_op_attrs a = {0};
    a.out_channels = out;
    a.groups = 1;
    a.kernel[0] = kh;
    a.kernel[1] = kw;
    a.stride[0] = sh;
    a.stride[1] = sw;
    a.pad[0] = ph;
    a.pad[1] = pw;
    a.use_bias = bias;
    return add1(b, name, SS_OP_CONV2D, &a, 1, &x);
}

int zb_pool(zb *b, const char *name, int x, ss_pool_kind kind, int64_t k, int64_t s, int64_t p)
{
    ss_op_attrs a = {0};
    a.pool = kind;
    a.kernel[0] = a.kernel[1] = k;
    a.stride[0] = a.stride[1] = s;
    a.pad[0] = a.pad[1] = p;
    return add1(b, name, SS_OP_POOL2D, &a, 1, &x);
}

int zb_unary(zb *b, const char *name, int x, ss_unary_kind u)
{
    ss_op_attrs a = {0};
    a.unary = u;
    return add1(b, name, SS_OP_UNARY, &a, 1, &x);
}

int zb_binary(zb *b, const char *name, int x, int y, ss_binary_kind k)
{
    ss_op_attrs a = {0};
    a.binary = k;
    int in[2] = {x, y};
    return add1(b, name, SS_OP_BINARY, &a, 2, in);
}

int zb_norm(zb *b, const char *name, int x, ss_op_type type)
{
    ss_op_attrs a = {0};
    return add1(b, name, type, &a, 1, &x);
}

int zb_softmax(zb *b, const char *name, int x, int axis)
{
    ss_op_attrs a = {0};
    a.axis = axis;
    return add1(b, name, SS_OP_SOFTMAX, &a, 1, &x);
}

int zb_dropout(zb *b, const char *name, int x, double rate)
{
    ss_op_attrs a = {0};
    a.rate = rate;
    return add1(b, name, SS_OP_DROPOUT, &a, 1, &x);
}

int zb_reshape(zb *b, const char *name, int x, int ndim, const int64_t *shape)
{
    ss_op_attrs a = {0};
    a.ndim = ndim;
    for (int i = 0; i < ndim; i++)
        a.shape[i] = shape[i];
    return add1(b, name, SS_OP_RESHAPE, &a, 1, &x);
}

int zb_transpose(zb *b, const char *name, int x, int ndim, const int *perm)
{
    ss_op_attrs a = {0};
    for (int i = 0; i < ndim; i++)
        a.perm[i] = perm[i];
    return add1(b, name, SS_OP_TRANSPOSE, &a, 1, &x);
}

int zb_concat(zb *b, const char *name, int n, const int *xs, int axis)
{
    ss_op_attrs a = {0};
    a.axis = axis;
    return add1(b, name, SS_OP_CONCAT, &a, n, xs);
}

int zb_embedding(zb *b, const char *name, int ids, int64_t vocab, int64_t dim, int table)
{
    ss_op_attrs a = {0};
    a.vocab = vocab;
    a.dim = dim;
    a.dtype = b->act;
    return zb_out(b, zb_add(b, name, SS_OP_EMBEDDING, &a, 1, &ids, table >= 0 ? 1 : -1, &table),
                  0);
}

int zb_softmax_ce(zb *b, const char *name, int logits, int labels)
{
    ss_op_attrs a = {0};
    int in[2] = {logits, labels};
    return add1(b, name, SS_OP_SOFTMAX_CE, &a, 2, in);
}

/* ------------------------------------------------------------------ */
/* Registry                                                            */
/* ------------------------------------------------------------------ */

#define MAX_KEYS 32

/* A key: integer in [lo, hi], or with names (NULL-terminated) one of those
 * names, stored as its index (lo = 0, hi = count - 1). */
typedef struct zoo_key {
    const char *key;
    int64_t def, lo, hi;
    const char *const *names;
} zoo_key;

typedef struct zoo_family {
    ss_zoo_entry pub;
    int64_t per_device_batch;
    zoo_key keys[MAX_KEYS]; /* terminated by key == NULL */
    void (*build)(zb *b, int64_t batch, const int64_t *p);
    ss_dtype act;
    ss_optimizer opt;
    ss_precision prec;
    /* Fill the keys the spec did not give (seen[k] == 0) from a preset the
     * parsed values name (llama's size); NULL: none. */
    void (*preset)(int64_t *p, const int *seen);
} zoo_family;

#define K_LAYERS(def, hi) {"layers", def, 1, hi, NULL}
#define BIG (INT64_C(1) << 20)
/* Megatron's vocabulary padding (transformer.c, docs/model-format.md): the
 * vocabulary rounded up to a multiple of vocab_pad * tp (Megatron's
 * --make-vocab-size-divisible-by 128 times the tensor-parallel degree);
 * vocab_pad = 0 keeps the vocabulary as given. tp is the tensor-parallel
 * degree the padding is for (ss_model_build_tp fills it from a megatron:
 * plan). */
#define K_VOCAB_PAD {"vocab_pad", 128, 0, 1 << 16, NULL}
#define K_TP {"tp", 1, 1, 1 << 16, NULL}

static const char *const norm_names[] = {"layernorm", "rmsnorm", NULL};
static const char *const act_names[] = {"gelu", "swiglu", "relu2", NULL};
static const char *const prec_names[] = {"bf16", "fp16", "fp8", "fp32", NULL};
static const char *const attn_names[] = {"unfused", "flash", NULL};

/* The gpt family's keys after tp, in transformer.c's order (K_KV ...):
 * kv_heads (0: heads), ffn (0: 4 x hidden), norm, act, rotary, tied, bias,
 * qkv_bias (-1: as bias), dropout, precision, experts (0: dense MLP), topk,
 * capacity (the capacity factor in percent), moe_ffn (an expert's MLP width, 0:
 * ffn), shared (shared experts: a dense MLP of shared x moe_ffn beside the
 * routed ones), dense (the first `dense` layers keep the dense MLP of ffn), attn
 * (unfused: scores, softmax, dropout, context as separate ops; flash: one
 * flash_attention op, no score matrix kept). */
#define K_MODERN(kv, ffn, nrm, act, rot, tied, bias, drop, experts, topk, attn)               \
    {"kv_heads", kv, 0, 4096, NULL}, {"ffn", ffn, 0, BIG, NULL},                              \
        {"norm", nrm, 0, 1, norm_names}, {"act", act, 0, 2, act_names},                       \
        {"rotary", rot, 0, 1, NULL}, {"tied", tied, 0, 1, NULL}, {"bias", bias, 0, 1, NULL},   \
        {"qkv_bias", -1, -1, 1, NULL}, {"dropout", drop, 0, 1, NULL},                         \
        {"precision", 0, 0, 3, prec_names}, {"experts", experts, 0, 1 << 16, NULL},           \
        {"topk", topk, 1, 1 << 16, NULL}, {"capacity", 100, 100, 6400, NULL},              \
        {"moe_ffn", 0, 0, BIG, NULL}, {"shared", 0, 0, 64, NULL},                            \
        {"dense", 0, 0, 1 << 16, NULL}, {"attn", attn, 0, 1, attn_names}, K_MLA

/* Multi-head latent attention (DeepSeek-V2/V3, transformer.c), after attn:
 * q_lora (the query's low rank, 0: a full-rank query projection), kv_lora
 * (the key/value latent's rank; 0: no MLA, the other four must then be 0),
 * qk_nope and qk_rope (each head's query/key dims without and with rotary),
 * v_head (each head's value dim). */
#define K_MLA                                                                                 \
    {"q_lora", 0, 0, BIG, NULL}, {"kv_lora", 0, 0, BIG, NULL}, {"qk_nope", 0, 0, 4096, NULL}, \
        {"qk_rope", 0, 0, 4096, NULL}, {"v_head", 0, 0, 4096, NULL}

/* Llama presets for the llama family's size key: layers, hidden, heads,
 * kv_heads, ffn, vocab, seq (Meta's model cards and config.json files:
 * Llama 3 / 3.1 8B, 70B, 405B; Llama 2 7B, 13B, 70B). */
static const char *const llama_sizes[] = {"8b", "70b", "405b", "2-7b", "2-13b", "2-70b", NULL};
static const int64_t llama_shapes[][7] = {
    {32, 4096, 32, 8, 14336, 128256, 8192},    {80, 8192, 64, 8, 28672, 128256, 8192},
    {126, 16384, 128, 8, 53248, 128256, 8192}, {32, 4096, 32, 32, 11008, 32000, 4096},
    {40, 5120, 40, 40, 13824, 32000, 4096},    {80, 8192, 64, 8, 28672, 32000, 4096},
};
#define K_SIZE 30

static void llama_preset(int64_t *p, const int *seen)
{
    static const int keys[7] = {0, 1, 2, 8, 9, 4, 3}; /* layers hidden heads kv ffn vocab seq */
    const int64_t *v = llama_shapes[p[K_SIZE]];
    for (int i = 0; i < 7; i++)
        if (!seen[keys[i]])
            p[keys[i]] = v[i];
}

/* The deepseek family's MoE and MLA keys (K_MODERN's defaults are the gpt
 * family's): moe_ffn 2048, one shared expert, the first 3 layers dense;
 * multi-head latent attention of q_lora 1536, kv_lora 512, qk_nope 128,
 * qk_rope 64, v_head 128 (DeepSeek-V3's config.json), unless kv_lora=0
 * asks for multi-head attention (the other MLA keys then stay 0). */
static void deepseek_preset(int64_t *p, const int *seen)
{
    enum { KV_LORA = 26 };
    static const int keys[7] = {21, 22, 23, 25, 27, 28, 29}; /* moe_ffn shared dense q_lora
                                                                qk_nope qk_rope v_head */
    static const int64_t v[7] = {2048, 1, 3, 1536, 128, 64, 128};
    if (!seen[KV_LORA])
        p[KV_LORA] = 512;
    for (int i = 0; i < 7; i++)
        if (!seen[keys[i]] && (i < 3 || p[KV_LORA] > 0))
            p[keys[i]] = v[i];
}

static const zoo_family families[] = {
    {{"alexnet", "AlexNet (torchvision single tower), ImageNet 224x224, 61.1M parameters",
      "classes=1000,image=224"},
     256,
     {{"classes", 1000, 2, 1 << 24, NULL}, {"image", 224, 63, 4096, NULL}},
     ss_zoo_build_alexnet, SS_F32, SS_OPT_SGD_MOMENTUM, SS_PREC_FP32, NULL},
    {{"inception_v3", "Inception-v3 without the aux head, ImageNet 299x299, 23.8M parameters",
      "classes=1000,image=299"},
     64,
     {{"classes", 1000, 2, 1 << 24, NULL}, {"image", 299, 75, 4096, NULL}},
     ss_zoo_build_inception_v3, SS_F32, SS_OPT_SGD_MOMENTUM, SS_PREC_FP32, NULL},
    {{"resnet101", "ResNet-101 (v1.5 bottlenecks), ImageNet 224x224, 44.5M parameters",
      "classes=1000,image=224"},
     64,
     {{"classes", 1000, 2, 1 << 24, NULL}, {"image", 224, 32, 4096, NULL}},
     ss_zoo_build_resnet101, SS_F32, SS_OPT_SGD_MOMENTUM, SS_PREC_FP32, NULL},
    {{"rnntc", "RNN text classifier: embedding + 4 LSTM layers unrolled over 40 steps",
      "steps=40,layers=4,hidden=1024,vocab=10000,classes=2"},
     64,
     {{"steps", 40, 1, 1000, NULL}, K_LAYERS(4, 64), {"hidden", 1024, 1, BIG, NULL},
      {"vocab", 10000, 2, 1 << 24, NULL}, {"classes", 2, 2, 1 << 24, NULL}},
     ss_zoo_build_rnntc, SS_F32, SS_OPT_SGD_MOMENTUM, SS_PREC_FP32, NULL},
    {{"rnnlm", "RNN language model: 2 LSTM layers unrolled over 40 steps, 10k vocabulary",
      "steps=40,layers=2,hidden=1024,vocab=10000"},
     64,
     {{"steps", 40, 1, 1000, NULL}, K_LAYERS(2, 64), {"hidden", 1024, 1, BIG, NULL},
      {"vocab", 10000, 2, 1 << 24, NULL}},
     ss_zoo_build_rnnlm, SS_F32, SS_OPT_SGD_MOMENTUM, SS_PREC_FP32, NULL},
    {{"nmt", "LSTM encoder-decoder with attention (2+2 layers, 40 steps, 32k vocabulary)",
      "steps=40,layers=2,hidden=1024,vocab=32000"},
     64,
     {{"steps", 40, 1, 1000, NULL}, K_LAYERS(2, 64), {"hidden", 1024, 1, BIG, NULL},
      {"vocab", 32000, 2, 1 << 24, NULL}},
     ss_zoo_build_nmt, SS_F32, SS_OPT_SGD_MOMENTUM, SS_PREC_FP32, NULL},
    {{"bert", "BERT (large by default, seq 512) with the masked-LM head, Megatron-style ops",
      "layers=24,hidden=1024,heads=16,seq=512,vocab=30522,fused=0,vocab_pad=128,tp=1,"
      "attn=unfused"},
     64,
     {K_LAYERS(24, 1024), {"hidden", 1024, 1, BIG, NULL}, {"heads", 16, 1, 4096, NULL},
      {"seq", 512, 1, BIG, NULL}, {"vocab", 30522, 2, 1 << 24, NULL}, {"fused", 0, 0, 1, NULL},
      K_VOCAB_PAD, K_TP, {"attn", 0, 0, 1, attn_names}},
     ss_zoo_build_bert, SS_BF16, SS_OPT_ADAM, SS_PREC_MIXED, NULL},
    {{"albert", "ALBERT (large by default: one layer's weights shared by all 24, embedding "
                "128; MLM + sentence-order heads), 17.8M parameters",
      "layers=24,hidden=1024,heads=16,seq=512,vocab=30000,embedding=128"},
     64,
     {K_LAYERS(24, 1024), {"hidden", 1024, 1, BIG, NULL}, {"heads", 16, 1, 4096, NULL},
      {"seq", 512, 2, BIG, NULL}, {"vocab", 30000, 2, 1 << 24, NULL},
      {"embedding", 128, 1, BIG, NULL}},
     ss_zoo_build_albert, SS_BF16, SS_OPT_ADAM, SS_PREC_MIXED, NULL},
    {{"gpt", "GPT decoder (Megatron-LM layout, tied LM head), GPT-2 medium-like defaults",
      "layers=24,hidden=1024,heads=16,seq=1024,vocab=51200,fused=0,vocab_pad=128,tp=1,"
      "kv_heads=0,ffn=0,norm=layernorm,act=gelu,rotary=0,tied=1,bias=1,qkv_bias=-1,dropout=1,"
      "precision=bf16,experts=0,topk=1,capacity=100,attn=unfused"},
     64,
     {K_LAYERS(24, 1024), {"hidden", 1024, 1, BIG, NULL}, {"heads", 16, 1, 4096, NULL},
      {"seq", 1024, 1, BIG, NULL}, {"vocab", 51200, 2, 1 << 24, NULL}, {"fused", 0, 0, 1, NULL},
      K_VOCAB_PAD,
      K_TP, K_MODERN(0, 0, 0, 0, 0, 1, 1, 1, 0, 1, 0)},
     ss_zoo_build_gpt, SS_BF16, SS_OPT_ADAM, SS_PREC_MIXED, NULL},
    {{"mlp", "Multi-layer perceptron: 'layers' hidden linear+relu layers and a classifier",
      "layers=3,hidden=1024,in=1024,classes=10"},
     64,
     {K_LAYERS(3, 1024), {"hidden", 1024, 1, BIG, NULL}, {"in", 1024, 1, BIG, NULL},
      {"classes", 10, 2, 1 << 24, NULL}},
     ss_zoo_build_mlp, SS_F32, SS_OPT_SGD_MOMENTUM, SS_PREC_FP32, NULL},
    {{"llama", "Llama 3 / Llama 2 decoder (GQA, SwiGLU, RMSNorm, rotary, untied head): "
               "size=8b|70b|405b|2-7b|2-13b|2-70b; the gpt keys override the preset",
      "size=8b,precision=bf16,tp=1,attn=flash"},
     8,
     {K_LAYERS(32, 1024), {"hidden", 4096, 1, BIG, NULL}, {"heads", 32, 1, 4096, NULL},
      {"seq", 8192, 1, BIG, NULL}, {"vocab", 128256, 2, 1 << 24, NULL}, {"fused", 0, 0, 1, NULL},
      K_VOCAB_PAD,
      K_TP, K_MODERN(8, 14336, 1, 1, 1, 0, 0, 0, 0, 1, 1),
      {"size", 0, 0, 5, llama_sizes}},
     ss_zoo_build_gpt, SS_BF16, SS_OPT_ADAM, SS_PREC_MIXED, llama_preset},
    {{"mixtral", "Mixtral 8x7B: Llama-style decoder with 8 SwiGLU experts, top-2 routing "
                 "(46.7B parameters, 12.9B active per token)",
      "layers=32,hidden=4096,heads=32,kv_heads=8,ffn=14336,experts=8,topk=2,seq=4096,"
      "vocab=32000,attn=flash"},
     8,
     {K_LAYERS(32, 1024), {"hidden", 4096, 1, BIG, NULL}, {"heads", 32, 1, 4096, NULL},
      {"seq", 4096, 1, BIG, NULL}, {"vocab", 32000, 2, 1 << 24, NULL}, {"fused", 0, 0, 1, NULL},
      K_VOCAB_PAD,
      K_TP, K_MODERN(8, 14336, 1, 1, 1, 0, 0, 0, 8, 2, 1)},
     ss_zoo_build_gpt, SS_BF16, SS_OPT_ADAM, SS_PREC_MIXED, NULL},
    {{"deepseek", "DeepSeek-V3: 61 layers (3 dense), multi-head latent attention of 128 "
                  "heads, 256 routed experts of width 2048 + 1 shared, top-8 (671.0B "
                  "parameters, 37.6B active; no multi-token prediction module)",
      "layers=61,hidden=7168,heads=128,ffn=18432,moe_ffn=2048,experts=256,shared=1,topk=8,"
      "dense=3,seq=4096,vocab=129280,attn=flash,q_lora=1536,kv_lora=512,qk_nope=128,"
      "qk_rope=64,v_head=128"},
     8,
     {K_LAYERS(61, 1024), {"hidden", 7168, 1, BIG, NULL}, {"heads", 128, 1, 4096, NULL},
      {"seq", 4096, 1, BIG, NULL}, {"vocab", 129280, 2, 1 << 24, NULL}, {"fused", 0, 0, 1, NULL},
      K_VOCAB_PAD,
      K_TP, K_MODERN(0, 18432, 1, 1, 1, 0, 0, 0, 256, 8, 1)},
     ss_zoo_build_gpt, SS_BF16, SS_OPT_ADAM, SS_PREC_MIXED, deepseek_preset},
};

#define N_FAMILIES ((int)(sizeof families / sizeof families[0]))

/* The number of zoo families. */
int ss_zoo_count(void) { return N_FAMILIES; }

/* Family i (0 <= i < ss_zoo_count()), or NULL out of range; static storage. */
const ss_zoo_entry *ss_zoo_get(int i)
{
    return i >= 0 && i < N_FAMILIES ? &families[i].pub : NULL;
}

static const zoo_family *find_family(const char *name, size_t len)
{
    for (int i = 0; i < N_FAMILIES; i++)
        if (strlen(families[i].pub.name) == len && !strncmp(families[i].pub.name, name, len))
            return &families[i];
    return NULL;
}

static int n_keys(const zoo_family *f)
{
    int n = 0;
    while (n < MAX_KEYS && f->keys[n].key)
        n++;
    return n;
}

static void key_list(const zoo_family *f, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n_keys(f) && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", f->keys[i].key);
}

/* Parse the "key=value,..." part of spec (after the colon) into p[]. */
static ss_status parse_params(const char *spec, const zoo_family *f, const char *s, int64_t *p,
                              int *seen, ss_diag *d)
{
    int nk = n_keys(f);
    for (int i = 0; i < nk; i++)
        p[i] = f->keys[i].def;
    if (!*s)
        return ss_diag_set(d, SS_ERR_INVALID, "model spec '%s': empty parameter list after ':'",
                           spec);
    while (*s) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *eq = memchr(s, '=', len);
        if (!eq)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "model spec '%s': expected key=value, got '%.*s'", spec, (int)len,
                               s);
        size_t klen = (size_t)(eq - s);
        int k = -1;
        for (int i = 0; i < nk; i++)
            if (strlen(f->keys[i].key) == klen && !strncmp(f->keys[i].key, s, klen))
                k = i;
        if (k < 0) {
            char list[256];
            key_list(f, list, sizeof list);
            return ss_diag_set(d, SS_ERR_INVALID,
                               "model spec '%s': unknown key '%.*s' for %s (keys: %s)", spec,
                               (int)klen, s, f->pub.name, list);
        }
        if (seen[k])
            return ss_diag_set(d, SS_ERR_INVALID, "model spec '%s': key '%s' given twice", spec,
                               f->keys[k].key);
        seen[k] = 1;
        char val[32];
        size_t vlen = len - klen - 1;
        if (vlen == 0 || vlen >= sizeof val)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "model spec '%s': %s: expected an integer, got '%.*s'", spec,
                               f->keys[k].key, (int)vlen, eq + 1);
        memcpy(val, eq + 1, vlen);
        val[vlen] = '\0';
        if (f->keys[k].names) {
            const char *const *nm = f->keys[k].names;
            int found = -1;
            char list[128];
            size_t used = 0;
            list[0] = '\0';
            for (int i = 0; nm[i]; i++) {
                if (!strcmp(nm[i], val))
                    found = i;
                if (used < sizeof list)
                    used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
                                             i ? ", " : "", nm[i]);
            }
            if (found < 0)
                return ss_diag_set(d, SS_ERR_INVALID,
                                   "model spec '%s': %s: expected one of %s, got '%s'", spec,
                                   f->keys[k].key, list, val);
            p[k] = found;
            s = end ? end + 1 : s + len;
            if (end && !*s)
                return ss_diag_set(d, SS_ERR_INVALID, "model spec '%s': trailing ','", spec);
            continue;
        }
        char *stop;
        errno = 0;
        long long v = strtoll(val, &stop, 10);
        int digit = (val[0] >= '0' && val[0] <= '9') ||
                    (val[0] == '-' && val[1] >= '0' && val[1] <= '9');
        if (errno || *stop || stop == val || !digit)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "model spec '%s': %s: expected an integer, got '%s'", spec,
                               f->keys[k].key, val);
        if (v < f->keys[k].lo || v > f->keys[k].hi)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "model spec '%s': %s=%lld out of range (expected %lld to %lld)",
                               spec, f->keys[k].key, v, (long long)f->keys[k].lo,
                               (long long)f->keys[k].hi);
        p[k] = v;
        s = end ? end + 1 : s + len;
        if (end && !*s)
            return ss_diag_set(d, SS_ERR_INVALID, "model spec '%s': trailing ','", spec);
    }
    return SS_OK;
}

static int key_index(const zoo_family *f, const char *key)
{
    for (int i = 0; i < n_keys(f); i++)
        if (!strcmp(f->keys[i].key, key))
            return i;
    return -1;
}

/* The multi-head latent attention keys of the gpt-like families (K_MLA):
 * without kv_lora all zero; with it the head dims given, qk_rope even, and
 * none of what MLA has no room for (grouped kv heads, learned positions, the
 * fused block, a qkv bias). */
static ss_status check_mla(const char *spec, const zoo_family *f, const int64_t *p, ss_diag *d)
{
    int kl = key_index(f, "kv_lora");
    if (kl < 0)
        return SS_OK;
    static const char *const dims[4] = {"q_lora", "qk_nope", "qk_rope", "v_head"};
    int k[4];
    for (int i = 0; i < 4; i++)
        k[i] = key_index(f, dims[i]);
    if (p[kl] == 0) {
        for (int i = 0; i < 4; i++)
            if (p[k[i]])
                return ss_diag_set(d, SS_ERR_INVALID,
                                   "model spec '%s': %s=%lld is a multi-head latent attention "
                                   "key: give kv_lora > 0 with it",
                                   spec, dims[i], (long long)p[k[i]]);
        return SS_OK;
    }
    if (!p[k[1]] || !p[k[2]] || !p[k[3]])
        return ss_diag_set(d, SS_ERR_INVALID,
                           "model spec '%s': kv_lora=%lld (multi-head latent attention) needs "
                           "qk_nope, qk_rope and v_head > 0",
                           spec, (long long)p[kl]);
    if (p[k[2]] % 2)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "model spec '%s': qk_rope=%lld must be even (rotary pairs)", spec,
                           (long long)p[k[2]]);
    int kv = key_index(f, "kv_heads"), n = key_index(f, "heads");
    if (p[kv] > 0 && p[kv] != p[n])
        return ss_diag_set(d, SS_ERR_INVALID,
                           "model spec '%s': multi-head latent attention has no grouped kv "
                           "heads (kv_heads=%lld; give 0)", spec, (long long)p[kv]);
    static const char *const off[3] = {"rotary", "fused", "qkv_bias"};
    static const int want[3] = {1, 0, -1};
    static const char *const why[3] = {
        "it rotates the qk_rope part of every head (rotary=1)",
        "the fused attention block is multi-head attention (fused=0)",
        "it has no qkv bias (qkv_bias=-1 or 0)"};
    for (int i = 0; i < 3; i++) {
        int64_t v = p[key_index(f, off[i])];
        if (i == 2 ? v == 1 : v != want[i])
            return ss_diag_set(d, SS_ERR_INVALID,
                               "model spec '%s': %s=%lld with multi-head latent attention: %s",
                               spec, off[i], (long long)v, why[i]);
    }
    return SS_OK;
}

/* Cross-key consistency (ranges are checked by parse_params). */
static ss_status check_params(const char *spec, const zoo_family *f, const int64_t *p,
                              ss_diag *d)
{
    int h = key_index(f, "hidden"), n = key_index(f, "heads");
    if (h >= 0 && n >= 0 && p[h] % p[n] != 0)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "model spec '%s': hidden=%lld is not divisible by heads=%lld", spec,
                           (long long)p[h], (long long)p[n]);
    int kv = key_index(f, "kv_heads");
    if (kv >= 0 && p[kv] > 0 && (p[kv] > p[n] || p[n] % p[kv] != 0))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "model spec '%s': kv_heads=%lld must divide heads=%lld", spec,
                           (long long)p[kv], (long long)p[n]);
    ss_status st = check_mla(spec, f, p, d);
    if (st)
        return st;
    int nr = key_index(f, "rotary"), kl = key_index(f, "kv_lora");
    if (nr >= 0 && p[nr] && (kl < 0 || !p[kl]) && (p[h] / p[n]) % 2)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "model spec '%s': rotary=1 needs an even head size (hidden/heads = "
                           "%lld)", spec, (long long)(p[h] / p[n]));
    int x = key_index(f, "experts"), k = key_index(f, "topk"), dn = key_index(f, "dense");
    int ly = key_index(f, "layers");
    if (dn >= 0 && p[dn] > p[ly])
        return ss_diag_set(d, SS_ERR_INVALID,
                           "model spec '%s': dense=%lld is more than the %lld layers", spec,
                           (long long)p[dn], (long long)p[ly]);
    if (x >= 0 && p[x] > 0 && (p[k] > p[x] || p[x] % p[k] != 0))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "model spec '%s': topk=%lld must divide experts=%lld (balanced "
                           "routing)", spec, (long long)p[k], (long long)p[x]);
    return SS_OK;
}

static int is_path(const char *spec)
{
    size_t n = strlen(spec);
    return strchr(spec, '/') || (n >= 5 && !strcmp(spec + n - 5, ".json"));
}

/* See simsearch.h. Zoo specs build a fresh graph; a model file is loaded with
 * its own batch unless batch > 0 overrides it (ss_model_load_batch). n_devices
 * only matters for zoo specs with batch == 0. */
ss_status ss_model_build(const char *spec, int64_t batch, int n_devices, ss_graph **out,
                         ss_diag *d)
{
    return ss_model_build_tp(spec, batch, n_devices, 0, out, d);
}

static ss_status build_zoo(const char *spec, const char *name, int64_t batch, int n_devices,
                           int tp, ss_graph **out, ss_diag *d);

/* Is key (len bytes) one of the "key=value,..." items of list? */
static int has_key(const char *list, const char *key, size_t len)
{
    for (const char *s = list; *s;) {
        if (!strncmp(s, key, len) && s[len] == '=')
            return 1;
        const char *c = strchr(s, ',');
        if (!c)
            break;
        s = c + 1;
    }
    return 0;
}

/* "hf:PATH[:key=value,...]": the config's gpt spec with the given keys
 * replacing the config's (models/hf_import.c). */
static ss_status build_hf(const char *spec, int64_t batch, int n_devices, int tp,
                          ss_graph **out, ss_diag *d)
{
    const char *path = spec + 3, *colon = strchr(path, ':');
    size_t plen = colon ? (size_t)(colon - path) : strlen(path);
    const char *over = colon ? colon + 1 : "";
    char file[4096], gen[1024], name[64], merged[2048];
    if (plen == 0 || plen >= sizeof file)
        return ss_diag_set(d, SS_ERR_INVALID, "model '%s': expected hf:PATH (a config.json or "
                           "a folder holding one)", spec);
    memcpy(file, path, plen);
    file[plen] = '\0';
    int64_t seq = 0;
    for (const char *s = over; *s;) {
        if (!strncmp(s, "seq=", 4))
            seq = strtoll(s + 4, NULL, 10);
        const char *c = strchr(s, ',');
        if (!c)
            break;
        s = c + 1;
    }
    ss_status st = ss_hf_spec(file, seq, gen, sizeof gen, name, sizeof name, d);
    if (st)
        return st;
    size_t used = (size_t)snprintf(merged, sizeof merged, "gpt:");
    const char *s = strchr(gen, ':') + 1;
    while (*s && used < sizeof merged) {
        const char *c = strchr(s, ','), *eq = strchr(s, '=');
        size_t len = c ? (size_t)(c - s) : strlen(s);
        if (!has_key(over, s, (size_t)(eq - s)))
            used += (size_t)snprintf(merged + used, sizeof merged - used, "%s%.*s",
                                     used > 4 ? "," : "", (int)len, s);
        s = c ? c + 1 : s + len;
    }
    if (*over && used < sizeof merged)
        used += (size_t)snprintf(merged + used, sizeof merged - used, ",%s", over);
    if (used >= sizeof merged)
        return ss_diag_set(d, SS_ERR_INVALID, "model '%s': spec too long", spec);
    return build_zoo(merged, name, batch, n_devices, tp, out, d);
}

/* See simsearch.h. tp > 0 is the tensor-parallel degree of the plan the
 * model is built for: a family with a "tp" key (the vocabulary padding of
 * gpt and bert) takes it unless the spec names another, which is an error.
 * "hf:PATH[:key=value,...]" imports a Hugging Face config.json. */
ss_status ss_model_build_tp(const char *spec, int64_t batch, int n_devices, int tp,
                            ss_graph **out, ss_diag *d)
{
    if (!spec || !*spec)
        return ss_diag_set(d, SS_ERR_INVALID, "empty model spec");
    if (batch < 0)
        return ss_diag_set(d, SS_ERR_INVALID, "model '%s': batch %lld must be positive", spec,
                           (long long)batch);
    if (!strncmp(spec, "hf:", 3))
        return build_hf(spec, batch, n_devices, tp, out, d);
    if (is_path(spec))
        return ss_model_load_batch(spec, batch, out, d);
    return build_zoo(spec, NULL, batch, n_devices, tp, out, d);
}

/* A zoo spec; the graph is named name (NULL: the family's). */
static ss_status build_zoo(const char *spec, const char *name, int64_t batch, int n_devices,
                           int tp, ss_graph **out, ss_diag *d)
{
    const char *colon = strchr(spec, ':');
    size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
    const zoo_family *f = find_family(spec, nlen);
    if (!f) {
        char list[256];
        size_t used = 0;
        for (int i = 0; i < N_FAMILIES && used < sizeof list; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                     families[i].pub.name);
        return ss_diag_set(d, SS_ERR_INVALID, "unknown model '%.*s' (zoo: %s; or a path to a "
                           "model JSON file; or hf:PATH to a config.json)", (int)nlen, spec, list);
    }
    int64_t p[MAX_KEYS];
    int seen[MAX_KEYS] = {0};
    for (int i = 0; i < MAX_KEYS; i++)
        p[i] = i < n_keys(f) ? f->keys[i].def : 0;
    if (colon) {
        ss_status st = parse_params(spec, f, colon + 1, p, seen, d);
        if (st)
            return st;
    }
    int kt = key_index(f, "tp");
    if (kt >= 0 && tp > 0) {
        if (tp > f->keys[kt].hi)
            return ss_diag_set(d, SS_ERR_INVALID, "model '%s': tensor-parallel degree %d out of "
                               "range (expected 1 to %lld)", spec, tp, (long long)f->keys[kt].hi);
        if (seen[kt] && p[kt] != tp)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "model spec '%s': tp=%lld, but the plan is tensor-parallel %d "
                               "(the vocabulary is padded for the plan's tp; drop the key or "
                               "make them agree)",
                               spec, (long long)p[kt], tp);
        p[kt] = tp;
    }
    if (f->preset)
        f->preset(p, seen);
    ss_status st = check_params(spec, f, p, d);
    if (st)
        return st;
    if (batch == 0) {
        if (n_devices < 1 || n_devices > (1 << 24))
            return ss_diag_set(d, SS_ERR_INVALID, "model '%s': device count %d out of range",
                               spec, n_devices);
        batch = f->per_device_batch * n_devices;
    }
    if (batch > (INT64_C(1) << 32))
        return ss_diag_set(d, SS_ERR_INVALID, "model '%s': batch %lld is absurdly large", spec,
                           (long long)batch);
    ss_graph *g = ss_graph_new(name ? name : f->pub.name);
    if (!g)
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory building model '%s'", spec);
    ss_diag local;
    ss_diag_init(&local);
    zb b;
    memset(&b, 0, sizeof b);
    b.g = g;
    b.d = &local;
    b.act = f->act;
    f->build(&b, batch, p);
    if (b.err) {
        ss_graph_free(g);
        if (local.status == SS_ERR_NOMEM)
            return ss_diag_set(d, SS_ERR_NOMEM, "out of memory building model '%s'", spec);
        return ss_diag_set(d, local.status ? local.status : SS_ERR_INVALID, "model '%s': %s",
                           spec, local.msg);
    }
    /* precision=fp32: f32 activations (transformer.c), no mixed precision */
    int kp = key_index(f, "precision");
    ss_graph_set_training(g, batch, f->opt,
                          kp >= 0 && p[kp] == 3 ? SS_PREC_FP32 : f->prec);
    *out = g;
    return SS_OK;
}

/* See simsearch.h. The weights of an expert_linear count topk / experts of
 * their size (a token runs topk of the X experts); shared weights once. */
int64_t ss_model_active_parameters(const ss_graph *g)
{
    double total = 0;
    int nt = ss_graph_n_tensors(g);
    for (int i = 0; i < ss_graph_n_ops(g); i++) {
        const ss_op *op = ss_graph_op(g, i);
        for (int k = 0; k < op->n_w; k++) {
            int w = op->weights[k];
            int first = 1; /* count a shared weight at its first op only */
            for (int j = 0; j < i && first; j++) {
                const ss_op *o = ss_graph_op(g, j);
                for (int m = 0; m < o->n_w; m++)
                    first &= o->weights[m] != w;
            }
            const ss_tensor *t = w >= 0 && w < nt ? ss_graph_tensor(g, w) : NULL;
            if (!first || !t)
                continue;
            double v = 1;
            for (int d = 0; d < t->ndim; d++)
                v *= (double)t->shape[d];
            if (op->type == SS_OP_EXPERT_LINEAR && t->shape[0] > 0)
                v = v * (double)op->attrs.topk / (double)t->shape[0];
            total += v;
        }
    }
    return (int64_t)(total + 0.5);
}
