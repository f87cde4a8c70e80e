/*
 * hf_import.c — Hugging Face config.json import: "hf:PATH[:key=value,...]"
 * where PATH is a config.json or a folder holding one. The config becomes a
 * gpt-family spec (models/transformer.c) that the zoo builds; keys after the
 * path override what the config gives (seq=, precision=, tp=, dropout= ...).
 *
 * Architectures (the one entry of "architectures"):
 *   LlamaForCausalLM, MistralForCausalLM   RMSNorm, SwiGLU, rotary, GQA
 *   Qwen2ForCausalLM                       the same with a qkv bias
 *   MixtralForCausalLM                     the same with top-k SwiGLU experts
 *   GPT2LMHeadModel                        LayerNorm, GeLU, learned positions,
 *                                          tied head, biases
 *   Qwen2MoeForCausalLM                    Qwen2 with top-k experts of
 *                                          moe_intermediate_size and shared
 *                                          experts (shared = shared_expert_
 *                                          intermediate_size / that width;
 *                                          the shared experts' sigmoid gate,
 *                                          h parameters a layer, is left out)
 *   DeepseekV3ForCausalLM                  multi-head latent attention
 *                                          (q_lora_rank, null: a full-rank
 *                                          query; kv_lora_rank; qk_nope_,
 *                                          qk_rope_, v_head_dim), the first
 *                                          first_k_dense_replace layers dense,
 *                                          then n_routed_experts of
 *                                          moe_intermediate_size, top
 *                                          num_experts_per_tok, with
 *                                          n_shared_experts; the routing's
 *                                          values (sigmoid scores, groups,
 *                                          scaling, auxiliary loss) do not
 *                                          change the balanced-routing cost;
 *                                          multi-token prediction
 *                                          (num_nextn_predict_layers) is not
 *                                          built and must be 0
 * Strict: an unknown architecture, an unknown key, a wrong type or a value
 * the graph cannot express (another activation, a head_dim other than
 * hidden / heads, attention dropout, sliding-window attention shorter than
 * the sequence) is an error naming the file and the key. Keys that do not
 * change the training cost are accepted and listed (token ids, epsilons,
 * initialisation, rope_theta and rope_scaling — values, not costs —,
 * torch_dtype — the checkpoint's storage dtype, not the training precision,
 * which precision= sets —, cache and version fields). The sequence length is
 * the config's max_position_embeddings (n_positions) unless seq= is given.
 * Attention: the Llama-like architectures get attn=flash (as the llama,
 * mixtral and deepseek presets: what their trainers run), GPT-2 the gpt
 * family's unfused default; :attn= overrides either.
 */
#include "zoo.h"

#include "core/json_util.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Keys with no effect on the training graph or its cost, any architecture. */
static const char *const inert[] = {
    "architectures", "model_type", "bos_token_id", "eos_token_id", "pad_token_id",
    "initializer_range", "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "rope_theta",
    "rope_scaling", "torch_dtype", "use_cache", "transformers_version", "pretraining_tp",
    "_name_or_path", NULL};

typedef enum {
    ARCH_LLAMA, ARCH_MISTRAL, ARCH_QWEN2, ARCH_MIXTRAL, ARCH_GPT2, ARCH_QWEN2MOE, ARCH_DSV3
} arch;
static const char *const arch_names[] = {"LlamaForCausalLM", "MistralForCausalLM",
                                         "Qwen2ForCausalLM", "MixtralForCausalLM",
                                         "GPT2LMHeadModel", "Qwen2MoeForCausalLM",
                                         "DeepseekV3ForCausalLM", NULL};

/* Keys each architecture reads (besides the inert ones). */
#define LLAMA_KEYS                                                                            \
    "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",           \
        "num_key_value_heads", "vocab_size", "max_position_embeddings", "hidden_act",         \
        "tie_word_embeddings", "attention_dropout", "head_dim"
static const char *const llama_keys[] = {LLAMA_KEYS, "attention_bias", "mlp_bias", NULL};
static const char *const mistral_keys[] = {LLAMA_KEYS, "sliding_window", NULL};
static const char *const qwen2_keys[] = {LLAMA_KEYS, "sliding_window", "use_sliding_window",
                                         "max_window_layers", NULL};
static const char *const mixtral_keys[] = {LLAMA_KEYS, "sliding_window", "num_local_experts",
                                           "num_experts_per_tok", "router_aux_loss_coef",
                                           "output_router_logits", "router_jitter_noise", NULL};
static const char *const gpt2_keys[] = {
    "n_embd", "n_layer", "n_head", "vocab_size", "n_positions", "n_ctx", "n_inner",
    "activation_function", "resid_pdrop", "embd_pdrop", "attn_pdrop", "summary_type",
    "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout",
    "scale_attn_weights", "task_specific_params", "reorder_and_upcast_attn",
    "scale_attn_by_inverse_layer_idx", NULL};
static const char *const qwen2moe_keys[] = {
    LLAMA_KEYS, "sliding_window", "use_sliding_window", "max_window_layers", "num_experts",
    "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size",
    "decoder_sparse_step", "mlp_only_layers", "norm_topk_prob", "output_router_logits",
    "router_aux_loss_coef", NULL};
/* DeepSeek-V3: auto_map names its modelling code, quantization_config the
 * checkpoint's FP8 storage (the training precision is precision=), ep_size
 * the inference code's expert parallelism (the plan's ep sets it),
 * rope_interleave a layout; the routing keys change values, not the cost. */
static const char *const dsv3_keys[] = {
    "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "vocab_size", "max_position_embeddings", "hidden_act",
    "tie_word_embeddings", "attention_dropout", "attention_bias", "q_lora_rank", "kv_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "n_routed_experts", "n_shared_experts",
    "num_experts_per_tok", "moe_intermediate_size", "first_k_dense_replace", "moe_layer_freq",
    "num_nextn_predict_layers", "n_group", "topk_group", "topk_method", "scoring_func",
    "norm_topk_prob", "routed_scaling_factor", "aux_loss_alpha", "seq_aux", "ep_size",
    "auto_map", "quantization_config", "rope_interleave", NULL};
static const char *const *const arch_keys[] = {llama_keys,    mistral_keys, qwen2_keys,
                                               mixtral_keys,  gpt2_keys,    qwen2moe_keys,
                                               dsv3_keys};

typedef struct hf {
    const char *file;
    const json_t *root;
    ss_diag *d;
    char *out;
    size_t n, used;
} hf;

static int listed(const char *const *list, const char *k)
{
    for (int i = 0; list[i]; i++)
        if (!strcmp(list[i], k))
            return 1;
    return 0;
}

static void put(hf *h, const char *key, long long v)
{
    if (h->used < h->n)
        h->used += (size_t)snprintf(h->out + h->used, h->n - h->used, ",%s=%lld", key, v);
}

static void put_name(hf *h, const char *key, const char *v)
{
    if (h->used < h->n)
        h->used += (size_t)snprintf(h->out + h->used, h->n - h->used, ",%s=%s", key, v);
}

static ss_status get_int(hf *h, const char *key, int required, int64_t *v)
{
    return ss_json_get_int(h->file, "$", h->root, key, required, 1, INT64_C(1) << 40, v, h->d);
}

static ss_status get_bool(hf *h, const char *key, int *v)
{
    return ss_json_get_bool(h->file, "$", h->root, key, 0, v, h->d);
}

static ss_status bad(hf *h, const char *key, const char *fmt, const char *what)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, what);
    return ss_diag_set(h->d, SS_ERR_INVALID, "%s: $.%s: %s", h->file, key, msg);
}

/* A number that must be absent or zero (dropout probabilities). */
static ss_status zero_num(hf *h, const char *key)
{
    double v = 0;
    ss_status st = ss_json_get_num(h->file, "$", h->root, key, 0, 0, 1, &v, h->d);
    if (!st && v != 0)
        return bad(h, key, "%s", "dropout is not modelled for imported models (expected 0)");
    return st;
}

static ss_status llama_like(hf *h, arch a, int64_t seq_override)
{
    int64_t hid, ffn, layers, heads, kv, vocab, seq, hd = 0;
    ss_status st;
    if ((st = get_int(h, "hidden_size", 1, &hid)) ||
        (st = get_int(h, "intermediate_size", 1, &ffn)) ||
        (st = get_int(h, "num_hidden_layers", 1, &layers)) ||
        (st = get_int(h, "num_attention_heads", 1, &heads)) ||
        (st = get_int(h, "vocab_size", 1, &vocab)) ||
        (st = get_int(h, "max_position_embeddings", 1, &seq)))
        return st;
    kv = heads;
    if ((st = get_int(h, "num_key_value_heads", 0, &kv)) || (st = get_int(h, "head_dim", 0, &hd)))
        return st;
    if (hd && hd * heads != hid)
        return bad(h, "head_dim", "%s", "head_dim * num_attention_heads must equal hidden_size");
    const char *act = "silu";
    if ((st = ss_json_get_str(h->file, "$", h->root, "hidden_act", 0, 32, &act, h->d)))
        return st;
    if (strcmp(act, "silu"))
        return bad(h, "hidden_act", "\"%s\": only silu (SwiGLU) is modelled for this "
                   "architecture", act);
    int qwen = a == ARCH_QWEN2 || a == ARCH_QWEN2MOE;
    int tie = 0, abias = qwen, mbias = 0;
    if ((st = get_bool(h, "tie_word_embeddings", &tie)) ||
        (st = get_bool(h, "attention_bias", &abias)) || (st = get_bool(h, "mlp_bias", &mbias)) ||
        (st = zero_num(h, "attention_dropout")))
        return st;
    if (mbias)
        return bad(h, "mlp_bias", "%s", "MLP biases are not modelled (expected false)");
    if (abias && !qwen)
        return bad(h, "attention_bias", "%s", "attention biases on every projection are not "
                   "modelled (expected false)");
    int64_t window = 0;
    const json_t *sw = json_object_get(h->root, "sliding_window");
    int use_sw = a == ARCH_MISTRAL;
    if ((st = get_bool(h, "use_sliding_window", &use_sw)))
        return st;
    if (sw && !json_is_null(sw) && (st = get_int(h, "sliding_window", 0, &window)))
        return st;
    int64_t s = seq_override > 0 ? seq_override : seq;
    if (use_sw && window > 0 && s > window)
        return ss_diag_set(h->d, SS_ERR_INVALID,
                           "%s: $.sliding_window: sliding-window attention (%lld) is not "
                           "modelled; give a sequence within the window (:seq=%lld)",
                           h->file, (long long)window, (long long)window);
    put(h, "layers", layers);
    put(h, "hidden", hid);
    put(h, "heads", heads);
    put(h, "kv_heads", kv);
    put(h, "ffn", ffn);
    put(h, "vocab", vocab);
    put(h, "seq", seq);
    put_name(h, "norm", "rmsnorm");
    put_name(h, "act", "swiglu");
    put(h, "rotary", 1);
    put(h, "tied", tie);
    put(h, "bias", 0);
    put(h, "qkv_bias", abias);
    put(h, "dropout", 0);
    put_name(h, "attn", "flash");
    if (a == ARCH_MIXTRAL) {
        int64_t x, k;
        if ((st = get_int(h, "num_local_experts", 1, &x)) ||
            (st = get_int(h, "num_experts_per_tok", 1, &k)))
            return st;
        put(h, "experts", x);
        put(h, "topk", k);
    }
    if (a == ARCH_QWEN2MOE) {
        int64_t x, k, mf, sf = 0, step = 1;
        if ((st = get_int(h, "num_experts", 1, &x)) ||
            (st = get_int(h, "num_experts_per_tok", 1, &k)) ||
            (st = get_int(h, "moe_intermediate_size", 1, &mf)) ||
            (st = get_int(h, "shared_expert_intermediate_size", 0, &sf)) ||
            (st = get_int(h, "decoder_sparse_step", 0, &step)))
            return st;
        const json_t *only = json_object_get(h->root, "mlp_only_layers");
        if (step != 1)
            return bad(h, "decoder_sparse_step", "%s", "only every layer MoE (1) is modelled");
        if (only && !(json_is_array(only) && json_array_size(only) == 0))
            return bad(h, "mlp_only_layers", "%s", "dense layers among MoE ones are not "
                       "modelled (expected [])");
        if (sf % mf)
            return bad(h, "shared_expert_intermediate_size", "%s", "must be a multiple of "
                       "moe_intermediate_size (shared experts of the experts' width)");
        put(h, "experts", x);
        put(h, "topk", k);
        put(h, "moe_ffn", mf);
        put(h, "shared", sf / mf);
    }
    return SS_OK;
}

/* An integer key that must be absent or equal to want (what the graph
 * expresses); why says what it would need. */
static ss_status only(hf *h, const char *key, int64_t want, const char *why)
{
    int64_t v = want;
    ss_status st = ss_json_get_int(h->file, "$", h->root, key, 0, 0, INT64_C(1) << 40, &v, h->d);
    if (!st && v != want)
        return bad(h, key, "%s", why);
    return st;
}

static ss_status deepseek_v3(hf *h)
{
    int64_t hid, ffn, layers, heads, kv, vocab, seq, ql = 0, kl, dn, dr, dv, x, k, mf;
    int64_t shared = 0, dense = 0;
    ss_status st;
    if ((st = get_int(h, "hidden_size", 1, &hid)) ||
        (st = get_int(h, "intermediate_size", 1, &ffn)) ||
        (st = get_int(h, "num_hidden_layers", 1, &layers)) ||
        (st = get_int(h, "num_attention_heads", 1, &heads)) ||
        (st = get_int(h, "vocab_size", 1, &vocab)) ||
        (st = get_int(h, "max_position_embeddings", 1, &seq)) ||
        (st = get_int(h, "kv_lora_rank", 1, &kl)) ||
        (st = get_int(h, "qk_nope_head_dim", 1, &dn)) ||
        (st = get_int(h, "qk_rope_head_dim", 1, &dr)) ||
        (st = get_int(h, "v_head_dim", 1, &dv)) ||
        (st = get_int(h, "n_routed_experts", 1, &x)) ||
        (st = get_int(h, "num_experts_per_tok", 1, &k)) ||
        (st = get_int(h, "moe_intermediate_size", 1, &mf)))
        return st;
    const json_t *q = json_object_get(h->root, "q_lora_rank");
    if (q && !json_is_null(q) && (st = get_int(h, "q_lora_rank", 0, &ql)))
        return st;
    const json_t *ns = json_object_get(h->root, "n_shared_experts");
    if (ns && !json_is_null(ns) &&
        (st = ss_json_get_int(h->file, "$", h->root, "n_shared_experts", 0, 0, 64, &shared,
                              h->d)))
        return st;
    if ((st = ss_json_get_int(h->file, "$", h->root, "first_k_dense_replace", 0, 0, layers,
                              &dense, h->d)))
        return st;
    kv = heads;
    if ((st = get_int(h, "num_key_value_heads", 0, &kv)))
        return st;
    if (kv != heads)
        return bad(h, "num_key_value_heads", "%s", "multi-head latent attention has one kv "
                   "head per query head (expected num_attention_heads)");
    const char *act = "silu";
    if ((st = ss_json_get_str(h->file, "$", h->root, "hidden_act", 0, 32, &act, h->d)))
        return st;
    if (strcmp(act, "silu"))
        return bad(h, "hidden_act", "\"%s\": only silu (SwiGLU) is modelled for this "
                   "architecture", act);
    int tie = 0, abias = 0;
    if ((st = get_bool(h, "tie_word_embeddings", &tie)) ||
        (st = get_bool(h, "attention_bias", &abias)) || (st = zero_num(h, "attention_dropout")))
        return st;
    if (abias)
        return bad(h, "attention_bias", "%s", "attention biases are not modelled (expected "
                   "false)");
    if ((st = only(h, "moe_layer_freq", 1, "only every layer after the dense ones MoE (1) is "
                   "modelled")) ||
        (st = only(h, "num_nextn_predict_layers", 0, "multi-token prediction modules are not "
                   "modelled (expected 0: the main model, DeepSeek-V3's 671B)")))
        return st;
    put(h, "layers", layers);
    put(h, "hidden", hid);
    put(h, "heads", heads);
    put(h, "ffn", ffn);
    put(h, "vocab", vocab);
    put(h, "seq", seq);
    put_name(h, "norm", "rmsnorm");
    put_name(h, "act", "swiglu");
    put(h, "rotary", 1);
    put(h, "tied", tie);
    put(h, "bias", 0);
    put(h, "dropout", 0);
    put_name(h, "attn", "flash");
    put(h, "experts", x);
    put(h, "topk", k);
    put(h, "moe_ffn", mf);
    put(h, "shared", shared);
    put(h, "dense", dense);
    put(h, "q_lora", ql);
    put(h, "kv_lora", kl);
    put(h, "qk_nope", dn);
    put(h, "qk_rope", dr);
    put(h, "v_head", dv);
    return SS_OK;
}

static ss_status gpt2(hf *h)
{
    int64_t hid, layers, heads, vocab, seq, inner = 0;
    ss_status st;
    if ((st = get_int(h, "n_embd", 1, &hid)) || (st = get_int(h, "n_layer", 1, &layers)) ||
        (st = get_int(h, "n_head", 1, &heads)) || (st = get_int(h, "vocab_size", 1, &vocab)) ||
        (st = get_int(h, "n_positions", 1, &seq)))
        return st;
    const json_t *ni = json_object_get(h->root, "n_inner");
    if (ni && !json_is_null(ni) && (st = get_int(h, "n_inner", 0, &inner)))
        return st;
    const char *act = "gelu_new";
    if ((st = ss_json_get_str(h->file, "$", h->root, "activation_function", 0, 32, &act, h->d)))
        return st;
    if (strcmp(act, "gelu_new") && strcmp(act, "gelu"))
        return bad(h, "activation_function", "\"%s\": only gelu is modelled", act);
    double pd[3] = {0.1, 0.1, 0.1};
    static const char *const drops[3] = {"resid_pdrop", "embd_pdrop", "attn_pdrop"};
    for (int i = 0; i < 3; i++)
        if ((st = ss_json_get_num(h->file, "$", h->root, drops[i], 0, 0, 1, &pd[i], h->d)))
            return st;
    put(h, "layers", layers);
    put(h, "hidden", hid);
    put(h, "heads", heads);
    put(h, "ffn", inner);
    put(h, "vocab", vocab);
    put(h, "seq", seq);
    put(h, "dropout", pd[0] > 0 || pd[1] > 0 || pd[2] > 0);
    return SS_OK;
}

/* The config file of PATH (itself, or PATH/config.json for a folder). */
static void config_path(const char *path, char *buf, size_t n)
{
    struct stat sb;
    if (!stat(path, &sb) && S_ISDIR(sb.st_mode))
        snprintf(buf, n, "%s/config.json", path);
    else
        snprintf(buf, n, "%s", path);
}

/* See zoo.h. */
ss_status ss_hf_spec(const char *path, int64_t seq_override, char *spec, size_t n, char *name,
                     size_t nn, ss_diag *d)
{
    char file[4096];
    config_path(path, file, sizeof file);
    json_t *root = NULL;
    ss_status st = ss_json_parse_file(file, &root, d);
    if (st)
        return st;
    hf h = {file, root, d, spec, n, 0};
    if (!json_is_object(root)) {
        json_decref(root);
        return ss_diag_set(d, SS_ERR_PARSE, "%s: expected a JSON object (a config.json)", file);
    }
    json_t *archs = NULL;
    st = ss_json_get_child(file, "$", root, "architectures", JSON_ARRAY, 1, &archs, d);
    const json_t *a0 = archs ? json_array_get(archs, 0) : NULL;
    if (!st && (json_array_size(archs) != 1 || !json_is_string(a0)))
        st = ss_diag_set(d, SS_ERR_INVALID, "%s: $.architectures: expected one architecture "
                         "name", file);
    int ai = -1;
    if (!st) {
        for (int i = 0; arch_names[i]; i++)
            if (!strcmp(arch_names[i], json_string_value(a0)))
                ai = i;
        if (ai < 0)
            st = ss_diag_set(d, SS_ERR_INVALID,
                             "%s: $.architectures[0]: unknown architecture \"%s\" (supported: "
                             "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                             "MixtralForCausalLM, GPT2LMHeadModel, Qwen2MoeForCausalLM, "
                             "DeepseekV3ForCausalLM)",
                             file, json_string_value(a0));
    }
    const char *const *keys = ai >= 0 ? arch_keys[ai] : inert;
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v)
    {
        if (st)
            break;
        if (!listed(keys, k) && !listed(inert, k))
            st = ss_diag_set(d, SS_ERR_INVALID,
                             "%s: $.%s: unknown key for %s (not imported; the graph would "
                             "miss what it sets)", file, k, arch_names[ai]);
    }
    if (!st) {
        snprintf(spec, n, "gpt:vocab_pad=128");
        h.used = strlen(spec);
        st = ai == ARCH_GPT2   ? gpt2(&h)
             : ai == ARCH_DSV3 ? deepseek_v3(&h)
                               : llama_like(&h, (arch)ai, seq_override);
    }
    if (!st && h.used >= n)
        st = ss_diag_set(d, SS_ERR_INVALID, "%s: the imported spec is too long", file);
    if (!st)
        snprintf(name, nn, "%s", arch_names[ai]);
    json_decref(root);
    return st;
}
