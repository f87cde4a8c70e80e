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

typedef enum {
    ARCH_LLAMA, ARCH_MISTRAL, ARCH_QWEN2, ARCH_MIXTRAL, ARCH_GPT2, ARCH_QWEN2MOE, ARCH_DSV3
} arch;
static const char *const arch_names[] = {"LlamaForCausalLM", "MistralForCausalLM",
                                         "Qwen2ForCausalLM", "MixtralForCausalLM",
                                         "GPT2LMHeadModel", "Qwen2MoeForCausalLM",
                                         "DeepseekV3ForCausalLM", NULL};

/* Sets of architectures (1 << arch). */
#define A(x) (1u << ARCH_##x)
#define LLAMA_LIKE (A(LLAMA) | A(MISTRAL) | A(QWEN2) | A(MIXTRAL) | A(QWEN2MOE))
#define SWIGLU (LLAMA_LIKE | A(DSV3)) /* SwiGLU, RMSNorm, rotary: the llama spec keys */
#define WINDOWED (A(MISTRAL) | A(QWEN2) | A(MIXTRAL) | A(QWEN2MOE))
#define QWEN (A(QWEN2) | A(QWEN2MOE))
#define ANY (~0u)

/* Every key a config may hold: the architectures that accept it, and, for
 * an integer that goes into the spec as it is, the spec key and whether the
 * config must give it (else absent or null is 0). Copied integers come
 * first, in the spec's order; a key no architecture's code reads changes
 * no cost (ANY: token ids, epsilons, initialisation, rope values, the
 * checkpoint's storage dtype, cache and version fields; DeepSeek-V3's
 * auto_map names its modelling code, quantization_config the checkpoint's
 * FP8 storage (the training precision is precision=), ep_size the inference
 * code's expert parallelism (the plan's ep sets it), rope_interleave a
 * layout; its routing keys change values, not the cost). */
typedef struct hf_key {
    const char *key;
    unsigned archs;
    const char *spec;
    int required;
} hf_key;
static const hf_key keys[] = {
    {"num_hidden_layers", SWIGLU, "layers", 1},
    {"n_layer", A(GPT2), "layers", 1},
    {"hidden_size", SWIGLU, "hidden", 1},
    {"n_embd", A(GPT2), "hidden", 1},
    {"num_attention_heads", SWIGLU, "heads", 1},
    {"n_head", A(GPT2), "heads", 1},
    {"intermediate_size", SWIGLU, "ffn", 1},
    {"n_inner", A(GPT2), "ffn", 0},
    {"vocab_size", ANY, "vocab", 1},
    {"max_position_embeddings", SWIGLU, "seq", 1},
    {"n_positions", A(GPT2), "seq", 1},
    {"num_local_experts", A(MIXTRAL), "experts", 1},
    {"num_experts", A(QWEN2MOE), "experts", 1},
    {"n_routed_experts", A(DSV3), "experts", 1},
    {"num_experts_per_tok", A(MIXTRAL) | A(QWEN2MOE) | A(DSV3), "topk", 1},
    {"moe_intermediate_size", A(QWEN2MOE) | A(DSV3), "moe_ffn", 1},
    {"q_lora_rank", A(DSV3), "q_lora", 0},
    {"kv_lora_rank", A(DSV3), "kv_lora", 1},
    {"qk_nope_head_dim", A(DSV3), "qk_nope", 1},
    {"qk_rope_head_dim", A(DSV3), "qk_rope", 1},
    {"v_head_dim", A(DSV3), "v_head", 1},
    {"num_key_value_heads", SWIGLU, NULL, 0},
    {"hidden_act", SWIGLU, NULL, 0},
    {"tie_word_embeddings", SWIGLU, NULL, 0},
    {"attention_dropout", SWIGLU, NULL, 0},
    {"head_dim", LLAMA_LIKE, NULL, 0},
    {"attention_bias", A(LLAMA) | A(DSV3), NULL, 0},
    {"mlp_bias", A(LLAMA), NULL, 0},
    {"sliding_window", WINDOWED, NULL, 0},
    {"use_sliding_window", QWEN, NULL, 0},
    {"max_window_layers", QWEN, NULL, 0},
    {"router_aux_loss_coef", A(MIXTRAL) | A(QWEN2MOE), NULL, 0},
    {"output_router_logits", A(MIXTRAL) | A(QWEN2MOE), NULL, 0},
    {"router_jitter_noise", A(MIXTRAL), NULL, 0},
    {"shared_expert_intermediate_size", A(QWEN2MOE), NULL, 0},
    {"decoder_sparse_step", A(QWEN2MOE), NULL, 0},
    {"mlp_only_layers", A(QWEN2MOE), NULL, 0},
    {"norm_topk_prob", A(QWEN2MOE) | A(DSV3), NULL, 0},
    {"n_shared_experts", A(DSV3), NULL, 0},
    {"first_k_dense_replace", A(DSV3), NULL, 0},
    {"moe_layer_freq", A(DSV3), NULL, 0},
    {"num_nextn_predict_layers", A(DSV3), NULL, 0},
    {"n_group", A(DSV3), NULL, 0},
    {"topk_group", A(DSV3), NULL, 0},
    {"topk_method", A(DSV3), NULL, 0},
    {"scoring_func", A(DSV3), NULL, 0},
    {"routed_scaling_factor", A(DSV3), NULL, 0},
    {"aux_loss_alpha", A(DSV3), NULL, 0},
    {"seq_aux", A(DSV3), NULL, 0},
    {"ep_size", A(DSV3), NULL, 0},
    {"auto_map", A(DSV3), NULL, 0},
    {"quantization_config", A(DSV3), NULL, 0},
    {"rope_interleave", A(DSV3), NULL, 0},
    {"n_ctx", A(GPT2), NULL, 0},
    {"activation_function", A(GPT2), NULL, 0},
    {"resid_pdrop", A(GPT2), NULL, 0},
    {"embd_pdrop", A(GPT2), NULL, 0},
    {"attn_pdrop", A(GPT2), NULL, 0},
    {"summary_type", A(GPT2), NULL, 0},
    {"summary_use_proj", A(GPT2), NULL, 0},
    {"summary_activation", A(GPT2), NULL, 0},
    {"summary_proj_to_labels", A(GPT2), NULL, 0},
    {"summary_first_dropout", A(GPT2), NULL, 0},
    {"scale_attn_weights", A(GPT2), NULL, 0},
    {"task_specific_params", A(GPT2), NULL, 0},
    {"reorder_and_upcast_attn", A(GPT2), NULL, 0},
    {"scale_attn_by_inverse_layer_idx", A(GPT2), NULL, 0},
    {"architectures", ANY, NULL, 0},
    {"model_type", ANY, NULL, 0},
    {"bos_token_id", ANY, NULL, 0},
    {"eos_token_id", ANY, NULL, 0},
    {"pad_token_id", ANY, NULL, 0},
    {"initializer_range", ANY, NULL, 0},
    {"rms_norm_eps", ANY, NULL, 0},
    {"layer_norm_eps", ANY, NULL, 0},
    {"layer_norm_epsilon", ANY, NULL, 0},
    {"rope_theta", ANY, NULL, 0},
    {"rope_scaling", ANY, NULL, 0},
    {"torch_dtype", ANY, NULL, 0},
    {"use_cache", ANY, NULL, 0},
    {"transformers_version", ANY, NULL, 0},
    {"pretraining_tp", ANY, NULL, 0},
    {"_name_or_path", ANY, NULL, 0},
};
#define N_KEYS ((int)(sizeof keys / sizeof keys[0]))

typedef struct hf {
    const char *file;
    const json_t *root;
    ss_diag *d;
    char *out;
    size_t n, used;
    int64_t v[N_KEYS]; /* the copied integers, by row of keys[] */
} hf;

/* The row of key in keys[] that architecture a accepts; -1 if none. */
static int row(arch a, const char *key)
{
    for (int i = 0; i < N_KEYS; i++)
        if ((keys[i].archs & (1u << a)) && !strcmp(keys[i].key, key))
            return i;
    return -1;
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

/* Reads the integers of keys[] that architecture a copies into the spec
 * (h->v) and copies them, in the table's order. */
static ss_status copy_ints(hf *h, arch a)
{
    for (int i = 0; i < N_KEYS; i++) {
        if (!keys[i].spec || !(keys[i].archs & (1u << a)))
            continue;
        const json_t *j = json_object_get(h->root, keys[i].key);
        h->v[i] = 0;
        ss_status st;
        if ((keys[i].required || (j && !json_is_null(j))) &&
            (st = get_int(h, keys[i].key, keys[i].required, &h->v[i])))
            return st;
        put(h, keys[i].spec, h->v[i]);
    }
    return SS_OK;
}

/* The copied integer key of architecture a (after copy_ints). */
static int64_t val(const hf *h, arch a, const char *key) { return h->v[row(a, key)]; }

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

/* What the Llama-like and DeepSeek layers share: SwiGLU (hidden_act silu),
 * RMSNorm, rotary positions, no dropout, no biases but qkv_bias, flash
 * attention, the head tied or not. */
static ss_status swiglu_layers(hf *h, int qkv_bias)
{
    const char *act = "silu";
    int tie = 0;
    ss_status st;
    if ((st = ss_json_get_str(h->file, "$", h->root, "hidden_act", 0, 32, &act, h->d)))
        return st;
    if (strcmp(act, "silu"))
        return bad(h, "hidden_act", "\"%s\": only silu (SwiGLU) is modelled for this "
                   "architecture", act);
    if ((st = get_bool(h, "tie_word_embeddings", &tie)) || (st = zero_num(h, "attention_dropout")))
        return st;
    put_name(h, "norm", "rmsnorm");
    put_name(h, "act", "swiglu");
    put(h, "rotary", 1);
    put(h, "tied", tie);
    put(h, "bias", 0);
    put(h, "qkv_bias", qkv_bias);
    put(h, "dropout", 0);
    put_name(h, "attn", "flash");
    return SS_OK;
}

static ss_status llama_like(hf *h, arch a, int64_t seq_override)
{
    int64_t hid = val(h, a, "hidden_size"), heads = val(h, a, "num_attention_heads");
    int64_t kv = heads, hd = 0;
    ss_status st;
    if ((st = get_int(h, "num_key_value_heads", 0, &kv)) || (st = get_int(h, "head_dim", 0, &hd)))
        return st;
    if (hd && hd * heads != hid)
        return bad(h, "head_dim", "%s", "head_dim * num_attention_heads must equal hidden_size");
    int qwen = a == ARCH_QWEN2 || a == ARCH_QWEN2MOE;
    int abias = qwen, mbias = 0;
    if ((st = get_bool(h, "attention_bias", &abias)) || (st = get_bool(h, "mlp_bias", &mbias)))
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
    int64_t s = seq_override > 0 ? seq_override : val(h, a, "max_position_embeddings");
    if (use_sw && window > 0 && s > window)
        return ss_diag_set(h->d, SS_ERR_INVALID,
                           "%s: $.sliding_window: sliding-window attention (%lld) is not "
                           "modelled; give a sequence within the window (:seq=%lld)",
                           h->file, (long long)window, (long long)window);
    if ((st = swiglu_layers(h, abias)))
        return st;
    put(h, "kv_heads", kv);
    if (a == ARCH_QWEN2MOE) {
        int64_t mf = val(h, a, "moe_intermediate_size"), sf = 0, step = 1;
        if ((st = get_int(h, "shared_expert_intermediate_size", 0, &sf)) ||
            (st = get_int(h, "decoder_sparse_step", 0, &step)))
            return st;
        const json_t *mlp_only = json_object_get(h->root, "mlp_only_layers");
        if (step != 1)
            return bad(h, "decoder_sparse_step", "%s", "only every layer MoE (1) is modelled");
        if (mlp_only && !(json_is_array(mlp_only) && json_array_size(mlp_only) == 0))
            return bad(h, "mlp_only_layers", "%s", "dense layers among MoE ones are not "
                       "modelled (expected [])");
        if (sf % mf)
            return bad(h, "shared_expert_intermediate_size", "%s", "must be a multiple of "
                       "moe_intermediate_size (shared experts of the experts' width)");
        put(h, "shared", sf / mf);
    }
    return SS_OK;
}

static ss_status deepseek_v3(hf *h)
{
    int64_t layers = val(h, ARCH_DSV3, "num_hidden_layers");
    int64_t heads = val(h, ARCH_DSV3, "num_attention_heads"), kv = heads, shared = 0, dense = 0;
    ss_status st;
    const json_t *ns = json_object_get(h->root, "n_shared_experts");
    if (ns && !json_is_null(ns) &&
        (st = ss_json_get_int(h->file, "$", h->root, "n_shared_experts", 0, 0, 64, &shared,
                              h->d)))
        return st;
    if ((st = ss_json_get_int(h->file, "$", h->root, "first_k_dense_replace", 0, 0, layers,
                              &dense, h->d)))
        return st;
    if ((st = get_int(h, "num_key_value_heads", 0, &kv)))
        return st;
    if (kv != heads)
        return bad(h, "num_key_value_heads", "%s", "multi-head latent attention has one kv "
                   "head per query head (expected num_attention_heads)");
    int abias = 0;
    if ((st = get_bool(h, "attention_bias", &abias)))
        return st;
    if (abias)
        return bad(h, "attention_bias", "%s", "attention biases are not modelled (expected "
                   "false)");
    if ((st = only(h, "moe_layer_freq", 1, "only every layer after the dense ones MoE (1) is "
                   "modelled")) ||
        (st = only(h, "num_nextn_predict_layers", 0, "multi-token prediction modules are not "
                   "modelled (expected 0: the main model, DeepSeek-V3's 671B)")) ||
        (st = swiglu_layers(h, 0)))
        return st;
    put(h, "shared", shared);
    put(h, "dense", dense);
    return SS_OK;
}

static ss_status gpt2(hf *h)
{
    const char *act = "gelu_new";
    ss_status st;
    if ((st = ss_json_get_str(h->file, "$", h->root, "activation_function", 0, 32, &act, h->d)))
        return st;
    if (strcmp(act, "gelu_new") && strcmp(act, "gelu"))
        return bad(h, "activation_function", "\"%s\": only gelu is modelled", act);
    double pd[3] = {0.1, 0.1, 0.1};
    static const char *const drops[3] = {"resid_pdrop", "embd_pdrop", "attn_pdrop"};
    for (int i = 0; i < 3; i++)
        if ((st = ss_json_get_num(h->file, "$", h->root, drops[i], 0, 0, 1, &pd[i], h->d)))
            return st;
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
    hf h = {file, root, d, spec, n, 0, {0}};
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
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v)
    {
        if (st)
            break;
        if (row((arch)ai, k) < 0)
            st = ss_diag_set(d, SS_ERR_INVALID,
                             "%s: $.%s: unknown key for %s (not imported; the graph would "
                             "miss what it sets)", file, k, arch_names[ai]);
    }
    if (!st) {
        snprintf(spec, n, "gpt:vocab_pad=128");
        h.used = strlen(spec);
        st = copy_ints(&h, (arch)ai);
    }
    if (!st)
        st = ai == ARCH_GPT2   ? gpt2(&h)
             : ai == ARCH_DSV3 ? deepseek_v3(&h)
                               : llama_like(&h, (arch)ai, seq_override);
    if (!st && h.used >= n)
        st = ss_diag_set(d, SS_ERR_INVALID, "%s: the imported spec is too long", file);
    if (!st)
        snprintf(name, nn, "%s", arch_names[ai]);
    json_decref(root);
    return st;
}
