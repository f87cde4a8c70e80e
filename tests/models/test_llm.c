/*
 * test_llm.c — the Llama-style and mixture-of-experts transformers of the
 * zoo against published parameter counts (Llama 3 8B / 70B / 405B, Llama 2
 * 7B, Mixtral 8x7B total and active) and hand-derived formulas: parameters
 * and matrix-product FLOPs of every variant key (kv_heads, ffn, act, norm,
 * rotary, tied, bias), the GQA and MoE shapes, FP8 GEMMs and their cost on
 * H100 from its FP8 peak, and the spec errors of the new keys. Multi-head
 * latent attention (DeepSeek-V3): its parameters and FLOPs against closed
 * forms, the DeepSeek-V3 preset against the published 671B and its forward
 * FLOPs per token, and its tensor-parallel layout (Megatron-Core's).
 */
#include "testutil.h"
#include "simulator/build.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static ss_graph *build(const char *spec, int64_t batch)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = NULL;
    ss_status st = ss_model_build(spec, batch, 1, &g, &d);
    if (st != SS_OK)
        print_error("%s: %s\n", spec, d.msg);
    assert_int_equal(st, SS_OK);
    return g;
}

static double rel_err(double got, double want) { return fabs(got - want) / want; }

/* Published counts (Meta's model cards; Mistral's Mixtral paper): the zoo
 * must be within 0.5%. vocab_pad=0: the counts are of the unpadded table. */
static void test_published_counts(void **state)
{
    (void)state;
    static const struct { const char *spec; double want; } rows[] = {
        {"llama:size=8b,vocab_pad=0", 8.03e9},     {"llama:size=70b,vocab_pad=0", 70.6e9},
        {"llama:size=405b,vocab_pad=0", 405.9e9},  {"llama:size=2-7b,vocab_pad=0", 6.74e9},
        {"llama:size=2-13b,vocab_pad=0", 13.02e9}, {"llama:size=2-70b,vocab_pad=0", 68.98e9},
        {"mixtral:vocab_pad=0", 46.7e9},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ss_graph *g = build(rows[i].spec, 1);
        double p = (double)ss_graph_parameters(g);
        if (rel_err(p, rows[i].want) >= 0.005)
            print_error("%s: %.4g parameters, published %.4g\n", rows[i].spec, p, rows[i].want);
        assert_true(rel_err(p, rows[i].want) < 0.005);
        ss_graph_free(g);
    }
    /* Llama 3 8B exactly: 32 x (4096 x (4096 + 2 x 1024) + 4096^2 + 3 x 4096 x 14336
     * + 2 x 4096) + 2 x 128256 x 4096 + 4096 */
    ss_graph *g = build("llama:size=8b", 1);
    assert_int_equal(ss_graph_parameters(g), INT64_C(8030261248));
    assert_int_equal(ss_model_active_parameters(g), ss_graph_parameters(g));
    ss_graph_free(g);
    /* Mixtral 8x7B: 12.9B active per token (2 of 8 experts) */
    g = build("mixtral", 1);
    double act = (double)ss_model_active_parameters(g);
    assert_true(rel_err(act, 12.9e9) < 0.005);
    /* exactly: the expert MLPs count 2/8 */
    double expert = 32.0 * 8 * 3 * 4096 * 14336;
    assert_true(fabs((double)ss_graph_parameters(g) - act - expert * 6 / 8) < 1);
    ss_graph_free(g);
    /* DeepSeek-V3 (HF config of deepseek-ai/DeepSeek-V3): 2Vh untied tables,
     * 61 x (MLA + 2h), 3 dense SwiGLU MLPs of 18432, 58 MoE layers of a router
     * (256h) and 256 routed + 1 shared SwiGLU experts of 2048, the final norm;
     * MLA = h ql + ql + ql H (dn + dr) + h (kl + dr) + kl + kl H (dn + dv)
     * + H dv h (187.1M). 671.03B: DeepSeek-V3's 671B main model; its
     * checkpoint's 685B adds the 14B multi-token prediction module, not built.
     * Active: 8 routed + the shared one, every table: 37.55B; DeepSeek's "37B"
     * (two digits) is matched by the count without the input table, a lookup
     * (36.63B, which rounds to 37B; 37.55B would round to 38B). */
    g = build("deepseek", 1);
    double h = 7168, V = 129280, e = 3 * h * 2048, H = 128, ql = 1536, kl = 512;
    double mla = h * ql + ql + ql * H * 192 + h * (kl + 64) + kl + kl * H * 256 + H * 128 * h;
    assert_true(mla == 187107328);
    double total = 2 * V * h + 61 * (mla + 2 * h) + 3 * 3 * h * 18432 +
                   58 * (256 * h + 257 * e) + h;
    assert_true(fabs((double)ss_graph_parameters(g) - total) < 1);
    assert_true(ss_graph_parameters(g) == INT64_C(671026404352));
    double active = (double)ss_model_active_parameters(g);
    assert_true(fabs(active - (total - 58 * 248 * e)) < 1);
    assert_true(rel_err(total, 671e9) < 0.005);
    assert_true(active - V * h >= 36.5e9 && active - V * h < 37.5e9);
    ss_graph_free(g);
    /* kv_lora=0: the multi-head attention of 128 heads of 56 instead */
    g = build("deepseek:kv_lora=0", 1);
    assert_true(fabs((double)ss_graph_parameters(g) - (total + 61 * (4 * h * h - mla))) < 1);
    assert_int_equal(ss_graph_find_op(g, "l0.attn.kv_a"), -1);
    ss_graph_free(g);
}

/* Matrix-product FLOPs (linear, batch_matmul, expert_linear) of the whole
 * graph, from the operator table. */
static double gemm_flops(const ss_graph *g)
{
    double f = 0;
    for (int i = 0; i < ss_graph_n_ops(g); i++) {
        const ss_op *op = ss_graph_op(g, i);
        if (op->type != SS_OP_LINEAR && op->type != SS_OP_BATCH_MATMUL &&
            op->type != SS_OP_EXPERT_LINEAR)
            continue;
        ss_tile t;
        ss_work w;
        ss_op_full_tile(g, op, &t);
        ss_op_tile_work(g, op, &t, &w);
        f += w.fwd_flops;
    }
    return f;
}

/* Every variant key against the closed forms: per layer
 *   attention  h (H + 2 KV) dh + H dh h (+ biases)
 *   mlp        gelu/relu2: 2 h F; swiglu: 3 h F (+ biases)
 *   norms      layernorm 2 x 2h, rmsnorm 2 x h
 * plus V h (x 2 untied), positions S h unless rotary, final norm; forward
 * GEMM FLOPs per token = 2 x (layer linear weights + V h) + 4 S h per layer
 * (scores and context over the S keys, all heads). */
static void test_variants_closed_form(void **state)
{
    (void)state;
    static const struct { int kv, ffn, act, rms, rot, tied, bias; } v[] = {
        {8, 0, 0, 0, 0, 1, 1},   {2, 320, 1, 1, 1, 0, 0}, {1, 512, 2, 1, 0, 0, 1},
        {4, 96, 1, 0, 1, 1, 0},  {8, 200, 2, 0, 1, 0, 0},
    };
    static const char *const acts[] = {"gelu", "swiglu", "relu2"};
    const double L = 3, h = 256, H = 8, S = 32, V = 1000, N = 2;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char spec[256];
        snprintf(spec, sizeof spec,
                 "gpt:layers=3,hidden=256,heads=8,seq=32,vocab=1000,vocab_pad=0,kv_heads=%d,"
                 "ffn=%d,act=%s,norm=%s,rotary=%d,tied=%d,bias=%d",
                 v[i].kv, v[i].ffn, acts[v[i].act], v[i].rms ? "rmsnorm" : "layernorm",
                 v[i].rot, v[i].tied, v[i].bias);
        ss_graph *g = build(spec, (int64_t)N);
        double dh = h / H, KV = v[i].kv, F = v[i].ffn ? v[i].ffn : 4 * h, b = v[i].bias;
        double attn = h * (H + 2 * KV) * dh + H * dh * h + b * ((H + 2 * KV) * dh + h);
        double mlp = v[i].act == 1 ? 3 * h * F + b * (2 * F + h) : 2 * h * F + b * (F + h);
        double nrm = v[i].rms ? h : 2 * h;
        double p = L * (attn + mlp + 2 * nrm) + V * h * (v[i].tied ? 1 : 2) +
                   (v[i].rot ? 0 : S * h) + nrm;
        if (fabs((double)ss_graph_parameters(g) - p) > 0.5)
            print_error("%s: %lld parameters, formula %.0f\n", spec,
                        (long long)ss_graph_parameters(g), p);
        assert_true(fabs((double)ss_graph_parameters(g) - p) < 0.5);
        double lin = L * (h * (H + 2 * KV) * dh + H * dh * h + (v[i].act == 1 ? 3 : 2) * h * F);
        double per_token = 2 * (lin + V * h) + L * 4 * S * h;
        double bias_flops = b * L * ((H + 2 * KV) * dh + h + (v[i].act == 1 ? 2 : 1) * F + h);
        assert_true(fabs(gemm_flops(g) / (N * S) - per_token - bias_flops) < 1e-6 * per_token);
        /* rotary: q and k rotated, no position table */
        assert_int_equal(ss_graph_find_op(g, "l0.attn.q_rope") >= 0, v[i].rot);
        assert_int_equal(ss_graph_find_tensor(g, "embed.positions.weight") >= 0, !v[i].rot);
        ss_graph_free(g);
    }
}

/* GQA: qkv [h, (H + 2 KV) dh]; scores one batched GEMM per kv head over the
 * G = H / KV query heads: [N, KV, G S, S]. */
static void test_gqa_shapes(void **state)
{
    (void)state;
    ss_graph *g = build("gpt:layers=1,hidden=256,heads=8,kv_heads=2,seq=16,vocab=100", 2);
    const ss_tensor *w = ss_graph_tensor(g, ss_graph_find_tensor(g, "l0.attn.qkv.weight"));
    assert_int_equal(w->shape[0], 256);
    assert_int_equal(w->shape[1], (8 + 2 * 2) * 32);
    const ss_tensor *k = ss_graph_tensor(g, ss_graph_find_tensor(g, "l0.attn.split:1"));
    int64_t want_k[4] = {2, 16, 2, 32};
    for (int i = 0; i < 4; i++)
        assert_int_equal(k->shape[i], want_k[i]);
    const ss_tensor *s = ss_graph_tensor(g, ss_graph_find_tensor(g, "l0.attn.scores"));
    int64_t want_s[4] = {2, 2, 4 * 16, 16};
    for (int i = 0; i < 4; i++)
        assert_int_equal(s->shape[i], want_s[i]);
    /* selective recomputation finds the grouped scores (rows S x G, keys S) */
    static const char *const score_ops[] = {"l0.attn.scores", "l0.attn.softmax",
                                            "l0.attn.dropout", "l0.attn.context"};
    for (int i = 0; i < 4; i++)
        assert_true(ss_build_score_op(g, ss_graph_find_op(g, score_ops[i])));
    assert_false(ss_build_score_op(g, ss_graph_find_op(g, "l0.attn.q_t")));
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_graph_validate(g, &d), SS_OK);
    ss_graph_free(g);
}

/* MoE: dispatch [X, C, h] with C = tokens x topk / X (x capacity factor),
 * experts as [X, h, F] weights, the router [h, X]. */
static void test_moe_shapes(void **state)
{
    (void)state;
    ss_graph *g = build("gpt:layers=2,hidden=64,heads=4,seq=16,vocab=100,experts=8,topk=2,"
                        "ffn=96,act=swiglu,bias=0",
                        4);
    const ss_tensor *sl = ss_graph_tensor(g, ss_graph_find_tensor(g, "l1.moe.dispatch"));
    assert_int_equal(sl->shape[0], 8);
    assert_int_equal(sl->shape[1], 4 * 16 * 2 / 8);
    assert_int_equal(sl->shape[2], 64);
    const ss_tensor *w = ss_graph_tensor(g, ss_graph_find_tensor(g, "l1.moe.gate.weight"));
    assert_int_equal(w->ndim, 3);
    assert_int_equal(w->shape[0], 8);
    assert_int_equal(w->shape[1], 64);
    assert_int_equal(w->shape[2], 96);
    w = ss_graph_tensor(g, ss_graph_find_tensor(g, "l1.moe.router.weight"));
    assert_int_equal(w->shape[1], 8);
    /* expert GEMM FLOPs = topk x a dense MLP of width F over every token */
    const ss_op *up = ss_graph_op(g, ss_graph_find_op(g, "l1.moe.up"));
    ss_tile t;
    ss_work wk;
    ss_op_full_tile(g, up, &t);
    ss_op_tile_work(g, up, &t, &wk);
    assert_true(fabs(wk.fwd_flops - 2.0 * (4 * 16) * 2 * 64 * 96) < 1e-6);
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_graph_validate(g, &d), SS_OK);
    ss_graph_free(g);
    /* capacity factor 1.25: ceil(16 x 1.25) = 20 slots */
    g = build("gpt:layers=1,hidden=64,heads=4,seq=16,vocab=100,experts=8,topk=2,capacity=125",
              4);
    assert_int_equal(ss_graph_tensor(g, ss_graph_find_tensor(g, "l0.moe.dispatch"))->shape[1],
                     20);
    ss_graph_free(g);
}

/* megatron:tp=T on a MoE model: the expert MLPs are tensor-parallel as
 * Megatron runs them without expert parallelism (expert tensor parallelism
 * = tp): gate/up split their width, fc2 its contraction (partial sums, an
 * all-reduce before the combine); the expert weights are not replicated. */
static void test_moe_expert_tp(void **state)
{
    (void)state;
    ss_graph *g = build("gpt:layers=2,hidden=128,heads=8,kv_heads=4,seq=16,vocab=128,experts=4,"
                        "topk=2,ffn=96,act=swiglu,bias=0,tp=4",
                        8);
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/dgx-h100.json"), 1, &m, &d),
                     SS_OK);
    ss_plan *p = NULL;
    if (ss_plan_from_spec("megatron:tp=4,pp=1,dp=2", g, m, &p, &d) != SS_OK)
        print_error("%s\n", d.msg);
    assert_non_null(p);
    const ss_pconfig *up = ss_plan_config(p, ss_graph_find_op(g, "l1.moe.up"));
    assert_int_equal(up->deg[2], 4);
    assert_int_equal(up->rep, 1);
    const ss_pconfig *down = ss_plan_config(p, ss_graph_find_op(g, "l1.moe.fc2"));
    assert_int_equal(down->red, 4);
    const ss_pconfig *qkv = ss_plan_config(p, ss_graph_find_op(g, "l1.attn.qkv"));
    assert_int_equal(qkv->deg[2], 4);
    ss_plan_free(p);
    ss_machine_free(m);
    ss_graph_free(g);
}

/* precision=fp8: the layers' GEMMs (and only those) run in FP8; on H100 a
 * large FP8 GEMM takes the bf16 time scaled by 989 / 1979 (same efficiency
 * table, FP8 peak), and the saved input is one byte per element. */
static void test_fp8(void **state)
{
    (void)state;
    const char *base = "gpt:layers=1,hidden=4096,heads=32,seq=2048,vocab=32000,bias=0";
    char spec[256];
    snprintf(spec, sizeof spec, "%s,precision=fp8", base);
    ss_graph *f8 = build(spec, 4), *bf = build(base, 4);
    static const char *const gemms[] = {"l0.attn.qkv", "l0.attn.proj", "l0.mlp.fc1",
                                        "l0.mlp.fc2"};
    for (int i = 0; i < 4; i++)
        assert_int_equal(ss_graph_op(f8, ss_graph_find_op(f8, gemms[i]))->attrs.dtype, SS_F8);
    assert_int_equal(ss_graph_op(f8, ss_graph_find_op(f8, "lm_head"))->attrs.dtype, SS_F32);
    assert_int_equal(ss_graph_tensor(f8, ss_graph_find_tensor(f8, "l0.mlp.fc1"))->dtype,
                     SS_BF16);
    const ss_device_type *h100 = ss_devtype_find_builtin("H100-SXM");
    const ss_op *a = ss_graph_op(f8, ss_graph_find_op(f8, "l0.mlp.fc1"));
    const ss_op *b = ss_graph_op(bf, ss_graph_find_op(bf, "l0.mlp.fc1"));
    ss_tile t;
    ss_op_full_tile(f8, a, &t);
    ss_cost c8, c16;
    ss_cost_analytic(h100, f8, a, &t, &c8);
    ss_cost_analytic(h100, bf, b, &t, &c16);
    /* 2 x 8192 x 4096 x 16384 = 1.1 TFLOP: compute-bound, past the table's top */
    assert_true(rel_err(c8.fwd_us / c16.fwd_us, 989.0 / 1979.0) < 1e-9);
    assert_true(rel_err(c8.work.saved_bytes * 2, c16.work.saved_bytes) < 1e-12);
    /* no FP8 units (A100): an FP8 GEMM runs at the bf16 rate */
    const ss_device_type *a100 = ss_devtype_find_builtin("A100-SXM4-80GB");
    ss_cost_analytic(a100, f8, a, &t, &c8);
    ss_cost_analytic(a100, bf, b, &t, &c16);
    assert_true(rel_err(c8.fwd_us, c16.fwd_us) < 1e-12);
    ss_graph_free(f8);
    ss_graph_free(bf);
}

static void test_spec_errors(void **state)
{
    (void)state;
    static const struct { const char *spec; const char *msg; } bad[] = {
        {"gpt:norm=batchnorm", "norm: expected one of layernorm, rmsnorm, got 'batchnorm'"},
        {"gpt:act=tanh", "act: expected one of gelu, swiglu, relu2"},
        {"gpt:precision=fp4", "precision: expected one of bf16, fp16, fp8"},
        {"gpt:kv_heads=3", "kv_heads=3 must divide heads=16"},
        {"gpt:experts=8,topk=3", "topk=3 must divide experts=8"},
        {"gpt:fused=1,kv_heads=4", "fused=1 supports multi-head attention only"},
        {"llama:size=1t", "size: expected one of 8b, 70b, 405b"},
        {"gpt:hidden=96,heads=32,rotary=1", "rotary=1 needs an even head size"},
        {"gpt:capacity=50", "capacity=50 out of range"},
        {"gpt:qk_rope=64", "qk_rope=64 is a multi-head latent attention key"},
        {"deepseek:kv_lora=0,q_lora=64", "q_lora=64 is a multi-head latent attention key"},
        {"gpt:kv_lora=64,rotary=1", "needs qk_nope, qk_rope and v_head > 0"},
        {"deepseek:qk_rope=63", "qk_rope=63 must be even"},
        {"deepseek:kv_heads=8", "no grouped kv heads (kv_heads=8"},
        {"deepseek:rotary=0", "rotary=0 with multi-head latent attention"},
        {"deepseek:fused=1,attn=unfused", "fused=1 with multi-head latent attention"},
        {"deepseek:qkv_bias=1", "qkv_bias=1 with multi-head latent attention"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ss_diag d;
        ss_diag_init(&d);
        ss_graph *g = NULL;
        ss_status st = ss_model_build(bad[i].spec, 1, 1, &g, &d);
        if (st != SS_ERR_INVALID || !strstr(d.msg, bad[i].msg))
            print_error("spec '%s': status %d, message '%s'\n", bad[i].spec, st, d.msg);
        assert_int_equal(st, SS_ERR_INVALID);
        assert_null(g);
        assert_non_null(strstr(d.msg, bad[i].msg));
    }
}

/* attn=flash: the same parameters as the unfused graph; per token the
 * GEMMs plus the flash op give 2 (linear + V h) + L 4 S h / 2 (causal:
 * half the square) for gpt, the whole square for bert; the backward is
 * 2.5x the op's forward; no op holds a score matrix (nothing for selective
 * recomputation) and context_t is a view. */
static void test_flash_closed_form(void **state)
{
    (void)state;
    const double L = 3, h = 256, H = 8, S = 32, V = 1000, N = 2, F = 4 * h;
    for (int kv = 1; kv <= 8; kv *= 2) {
        char spec[256], uspec[256];
        snprintf(spec, sizeof spec,
                 "gpt:layers=3,hidden=256,heads=8,seq=32,vocab=1000,vocab_pad=0,kv_heads=%d,"
                 "bias=0,attn=flash", kv);
        snprintf(uspec, sizeof uspec, "%.*s,attn=unfused", (int)(strlen(spec) - 11), spec);
        ss_graph *g = build(spec, (int64_t)N), *u = build(uspec, (int64_t)N);
        assert_true(ss_graph_parameters(g) == ss_graph_parameters(u));
        double dh = h / H, lin = L * (h * (H + 2 * kv) * dh + H * dh * h + 2 * h * F);
        double attn = 0, bwd = 0;
        for (int i = 0; i < ss_graph_n_ops(g); i++) {
            const ss_op *op = ss_graph_op(g, i);
            assert_false(ss_build_score_op(g, i));
            if (op->type != SS_OP_FLASH_ATTENTION)
                continue;
            ss_tile t;
            ss_work w;
            ss_op_full_tile(g, op, &t);
            ss_op_tile_work(g, op, &t, &w);
            attn += w.fwd_flops;
            bwd += w.bwd_flops;
            assert_true(op->attrs.causal && op->attrs.rate == 0.1);
        }
        assert_true(fabs((gemm_flops(g) + attn) / (N * S) - 2 * (lin + V * h) -
                         L * 4 * S * h / 2) < 1e-9 * lin);
        assert_true(bwd == 2.5 * attn);
        assert_int_equal(ss_graph_find_op(g, "l0.attn.scores"), -1);
        assert_true(ss_graph_op(g, ss_graph_find_op(g, "l2.attn.context_t"))->attrs.view);
        assert_false(ss_graph_op(u, ss_graph_find_op(u, "l2.attn.context_t"))->attrs.view);
        ss_graph_free(g);
        ss_graph_free(u);
    }
    ss_graph *b = build("bert:layers=2,hidden=256,heads=8,seq=32,attn=flash", (int64_t)N);
    const ss_op *op = ss_graph_op(b, ss_graph_find_op(b, "l1.attn.flash"));
    ss_tile t;
    ss_work w;
    ss_op_full_tile(b, op, &t);
    ss_op_tile_work(b, op, &t, &w);
    assert_false(op->attrs.causal);
    assert_true(w.fwd_flops == N * 4 * S * S * h);
    ss_graph_free(b);
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *bad = NULL;
    assert_int_equal(ss_model_build("gpt:fused=1,attn=flash", 1, 1, &bad, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "exclude each other"));
}

/* Forward FLOPs of the ops of one type (all types: SS_OP_TYPE_COUNT). */
static double type_flops(const ss_graph *g, ss_op_type type)
{
    double f = 0;
    for (int i = 0; i < ss_graph_n_ops(g); i++) {
        const ss_op *op = ss_graph_op(g, i);
        if (type != SS_OP_TYPE_COUNT && op->type != type)
            continue;
        ss_tile t;
        ss_work w;
        ss_op_full_tile(g, op, &t);
        ss_op_tile_work(g, op, &t, &w);
        f += w.fwd_flops;
    }
    return f;
}

/* Multi-head latent attention against its closed forms: per layer
 *   q path   h ql + ql (RMSNorm) + ql H (dn + dr)   (ql = 0: h H (dn + dr))
 *   kv path  h (kl + dr) + kl (RMSNorm) + kl H (dn + dv)
 *   output   H dv h
 * and forward GEMM FLOPs per token 2 x the linear weights plus the
 * attention over S keys with head dims dn + dr (scores) and dv (context):
 * S H (dn + dr + dv) causal under flash, 2 S H (dn + dr + dv) unfused. The
 * heads: q and k [N, S, H, dn + dr] (the shared rotary key expanded over
 * the heads as a view), v [N, S, H, dv]. */
static void test_mla_closed_form(void **state)
{
    (void)state;
    static const struct { int ql, kl, dn, dr, dv, flash; } v[] = {
        {96, 64, 32, 16, 24, 1}, {0, 32, 16, 8, 16, 1}, {48, 64, 32, 16, 32, 0},
    };
    const double L = 2, h = 256, H = 4, S = 32, V = 1000, N = 2, F = 512;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char spec[320];
        snprintf(spec, sizeof spec,
                 "gpt:layers=2,hidden=256,heads=4,seq=32,vocab=1000,vocab_pad=0,norm=rmsnorm,"
                 "act=swiglu,rotary=1,tied=0,bias=0,dropout=0,ffn=512,q_lora=%d,kv_lora=%d,"
                 "qk_nope=%d,qk_rope=%d,v_head=%d,attn=%s",
                 v[i].ql, v[i].kl, v[i].dn, v[i].dr, v[i].dv, v[i].flash ? "flash" : "unfused");
        ss_graph *g = build(spec, (int64_t)N);
        double ql = v[i].ql, kl = v[i].kl, dn = v[i].dn, dr = v[i].dr, dv = v[i].dv;
        double dq = dn + dr;
        double lin = (ql ? h * ql + ql * H * dq : h * H * dq) + h * (kl + dr) +
                     kl * H * (dn + dv) + H * dv * h;
        double p = L * (lin + (ql ? ql : 0) + kl + 3 * h * F + 2 * h) + 2 * V * h + h;
        if (fabs((double)ss_graph_parameters(g) - p) > 0.5)
            print_error("%s: %lld parameters, formula %.0f\n", spec,
                        (long long)ss_graph_parameters(g), p);
        assert_true(fabs((double)ss_graph_parameters(g) - p) < 0.5);
        double per_token = 2 * (L * (lin + 3 * h * F) + V * h) +
                           L * S * H * (dq + dv) * (v[i].flash ? 1 : 2);
        double got = (gemm_flops(g) + type_flops(g, SS_OP_FLASH_ATTENTION)) / (N * S);
        assert_true(fabs(got - per_token) < 1e-9 * per_token);
        static const char *const qk[2] = {"l1.attn.q_cat", "l1.attn.k_cat"};
        for (int j = 0; j < 2; j++) {
            const ss_tensor *t = ss_graph_tensor(g, ss_graph_find_tensor(g, qk[j]));
            int64_t want[4] = {2, 32, 4, (int64_t)dq};
            for (int k = 0; k < 4; k++)
                assert_int_equal(t->shape[k], want[k]);
        }
        const ss_tensor *vt = ss_graph_tensor(g, ss_graph_find_tensor(g, "l1.attn.k_v_split:1"));
        assert_int_equal(vt->shape[3], (int64_t)dv);
        const ss_op *ex = ss_graph_op(g, ss_graph_find_op(g, "l1.attn.k_pe_expand"));
        assert_int_equal(ex->type, SS_OP_EXPAND);
        assert_false(ss_op_has_kernel(ex));
        assert_int_equal(ss_graph_find_op(g, "l1.attn.q_a") >= 0, v[i].ql > 0);
        assert_int_equal(ss_graph_find_op(g, "l1.attn.q") >= 0, v[i].ql == 0);
        ss_diag d;
        ss_diag_init(&d);
        assert_int_equal(ss_graph_validate(g, &d), SS_OK);
        ss_graph_free(g);
    }
}

/* DeepSeek-V3's forward FLOPs per token at seq S = 4096: 2 x the active
 * weights but the input table (a lookup) and the RMSNorm gammas, plus the
 * causal attention of
 * 61 layers, S H (192 + 128) each; every other op (norms, rotary, SwiGLU,
 * routing, loss) adds under 0.5%. */
static void test_deepseek_flops(void **state)
{
    (void)state;
    ss_graph *g = build("deepseek", 1);
    double h = 7168, V = 129280, S = 4096, H = 128;
    double active = (double)ss_model_active_parameters(g);
    double norms = 61 * (2 * h + 1536 + 512) + h; /* RMSNorm gammas: no GEMM */
    double per_token = 2 * (active - V * h - norms) + 61 * S * H * (192 + 128);
    double got = (gemm_flops(g) + type_flops(g, SS_OP_FLASH_ATTENTION)) / S;
    if (fabs(got - per_token) > 1e-9 * per_token)
        print_error("%.6g FLOPs per token, formula %.6g\n", got, per_token);
    assert_true(fabs(got - per_token) < 1e-9 * per_token);
    assert_true(rel_err(per_token, 83.48e9) < 0.001);
    double all = type_flops(g, SS_OP_TYPE_COUNT) / S;
    assert_true(all > per_token && all < 1.005 * per_token);
    ss_graph_free(g);
}

/* megatron:tp=4 on MLA, as Megatron-Core runs it: the down-projections
 * (q_a, kv_a) and the latent norms replicated over the tp group, the
 * up-projections column-parallel (their heads split), the attention split
 * by heads, the output projection row-parallel (partial sums). */
static void test_mla_tp(void **state)
{
    (void)state;
    ss_graph *g = build("deepseek:layers=2,dense=1,hidden=256,heads=8,ffn=512,moe_ffn=128,"
                        "experts=8,topk=2,seq=16,vocab=256,q_lora=64,kv_lora=32,qk_nope=16,"
                        "qk_rope=8,v_head=16,tp=4",
                        8);
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/dgx-h100.json"), 1, &m, &d),
                     SS_OK);
    ss_plan *p = NULL;
    if (ss_plan_from_spec("megatron:tp=4,pp=1,dp=2", g, m, &p, &d) != SS_OK)
        print_error("%s\n", d.msg);
    assert_non_null(p);
    static const char *const repl[] = {"l1.attn.q_a", "l1.attn.q_norm", "l1.attn.kv_a",
                                       "l1.attn.kv_norm", "l1.attn.k_rope"};
    for (int i = 0; i < 5; i++) {
        const ss_pconfig *c = ss_plan_config(p, ss_graph_find_op(g, repl[i]));
        assert_int_equal(c->rep, 4);
        assert_int_equal(c->red, 1);
        assert_int_equal(c->deg[c->ndim - 1], 1);
    }
    static const char *const col[] = {"l1.attn.q_b", "l1.attn.kv_b"};
    for (int i = 0; i < 2; i++) {
        const ss_pconfig *c = ss_plan_config(p, ss_graph_find_op(g, col[i]));
        assert_int_equal(c->deg[2], 4);
        assert_int_equal(c->rep, 1);
    }
    static const char *const heads[] = {"l1.attn.q_cat", "l1.attn.k_cat"};
    for (int i = 0; i < 2; i++)
        assert_int_equal(ss_plan_config(p, ss_graph_find_op(g, heads[i]))->deg[2], 4);
    const ss_pconfig *fl = ss_plan_config(p, ss_graph_find_op(g, "l1.attn.flash"));
    assert_int_equal(fl->deg[1], 4);
    const ss_pconfig *o = ss_plan_config(p, ss_graph_find_op(g, "l1.attn.proj"));
    assert_int_equal(o->red, 4);
    ss_plan_free(p);
    ss_machine_free(m);
    ss_graph_free(g);
}

/* The size preset fills only the keys the spec leaves out. */
static void test_preset_override(void **state)
{
    (void)state;
    ss_graph *a = build("llama:size=70b,layers=2", 1);
    ss_graph *b = build("gpt:layers=2,hidden=8192,heads=64,kv_heads=8,ffn=28672,seq=8192,"
                        "vocab=128256,norm=rmsnorm,act=swiglu,rotary=1,tied=0,bias=0,dropout=0,attn=flash",
                        1);
    assert_true(ss_graph_parameters(a) == ss_graph_parameters(b));
    assert_true(fabs(ss_graph_forward_flops(a) - ss_graph_forward_flops(b)) < 1);
    ss_graph_free(a);
    ss_graph_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_published_counts), cmocka_unit_test(test_variants_closed_form),
        cmocka_unit_test(test_gqa_shapes),       cmocka_unit_test(test_moe_shapes),
        cmocka_unit_test(test_fp8),              cmocka_unit_test(test_spec_errors),
        cmocka_unit_test(test_preset_override),  cmocka_unit_test(test_moe_expert_tp),
        cmocka_unit_test(test_flash_closed_form), cmocka_unit_test(test_mla_closed_form),
        cmocka_unit_test(test_deepseek_flops),    cmocka_unit_test(test_mla_tp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
