/*
 * test_hf.c — Hugging Face config.json import (models/hf_import.c): each
 * supported architecture's published config (tests/data/hf/, written from
 * the configs on the Hugging Face hub) gives the same graph as the
 * equivalent zoo spec, with the published parameter counts; keys after the
 * path override the config; a folder finds its config.json; bad configs are
 * refused with messages naming the file and the key.
 */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* "hf:<source tree>/tests/data/hf/" + rest, in one of 16 rotating buffers. */
static const char *hf(const char *rest)
{
    static char buf[16][4096];
    static int next;
    char *b = buf[next++ % 16];
    snprintf(b, sizeof buf[0], "hf:%s/%s", ss_test_path("tests/data/hf"), rest);
    return b;
}

static ss_graph *build(const char *spec)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = NULL;
    ss_status st = ss_model_build(spec, 2, 1, &g, &d);
    if (st != SS_OK)
        print_error("%s: %s\n", spec, d.msg);
    assert_int_equal(st, SS_OK);
    return g;
}

static void test_same_graph_as_zoo(void **state)
{
    (void)state;
    const struct { const char *hf, *zoo, *arch; double params; } rows[] = {
        {hf("llama3-8b"), "llama:size=8b", "LlamaForCausalLM", 8.03e9},
        {hf("llama3-8b/config.json:vocab_pad=0"), "llama:size=8b,vocab_pad=0",
         "LlamaForCausalLM", 8.03e9},
        {hf("mistral-7b:seq=4096"), "llama:size=8b,vocab=32000,seq=4096", "MistralForCausalLM",
         7.24e9},
        {hf("qwen2-7b:seq=4096,vocab_pad=0"),
         "llama:layers=28,hidden=3584,heads=28,kv_heads=4,ffn=18944,vocab=152064,seq=4096,"
         "qkv_bias=1,vocab_pad=0",
         "Qwen2ForCausalLM", 7.62e9},
        {hf("mixtral-8x7b:seq=4096"), "mixtral", "MixtralForCausalLM", 46.7e9},
        /* Qwen1.5-MoE-A2.7B (14.3B; seq 3840: the 2 x 3840 tokens are a multiple of
         * experts / topk = 15, balanced routing); its shared experts' sigmoid gate
         * (24 x 2048 parameters) is not built */
        {hf("qwen15-moe:seq=3840,vocab_pad=0"),
         "mixtral:layers=24,hidden=2048,heads=16,kv_heads=16,ffn=5632,experts=60,topk=4,"
         "moe_ffn=1408,shared=4,seq=3840,vocab=151936,qkv_bias=1,vocab_pad=0",
         "Qwen2MoeForCausalLM", 14.3e9},
        {hf("gpt2:vocab_pad=0"),
         "gpt:layers=12,hidden=768,heads=12,seq=1024,vocab=50257,vocab_pad=0", "GPT2LMHeadModel",
         124439808},
        {hf("llama3-8b:attn=unfused"), "llama:size=8b,attn=unfused", "LlamaForCausalLM", 8.03e9},
        /* DeepSeek-V3's published config (num_nextn_predict_layers set to 0: the
         * multi-token prediction module is not built) is the deepseek preset */
        {hf("deepseek-v3:seq=4096"), "deepseek", "DeepseekV3ForCausalLM", 671.0e9},
        /* a small DeepSeek-V3 written for the tests: 3 x (MLA 102,560 + 2h),
         * 1 dense MLP of 512, 2 MoE layers of a router and 8 + 2 experts of 96,
         * the tables and the final norm: 2,693,344 */
        {hf("deepseek-v3-tiny:vocab_pad=0"),
         "deepseek:layers=3,dense=1,hidden=256,heads=4,ffn=512,moe_ffn=96,experts=8,topk=2,"
         "shared=2,seq=128,vocab=1000,vocab_pad=0,q_lora=96,kv_lora=64,qk_nope=32,qk_rope=16,"
         "v_head=24",
         "DeepseekV3ForCausalLM", 2693344},
        {hf("gpt2:vocab_pad=0,attn=flash"),
         "gpt:layers=12,hidden=768,heads=12,seq=1024,vocab=50257,vocab_pad=0,attn=flash",
         "GPT2LMHeadModel", 124439808},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ss_graph *a = build(rows[i].hf), *b = build(rows[i].zoo);
        if (ss_graph_fingerprint(a) != ss_graph_fingerprint(b))
            print_error("%s differs from %s\n", rows[i].hf, rows[i].zoo);
        assert_true(ss_graph_fingerprint(a) == ss_graph_fingerprint(b));
        assert_string_equal(ss_graph_name(a), rows[i].arch);
        assert_true(fabs((double)ss_graph_parameters(a) - rows[i].params) <
                    0.005 * rows[i].params);
        ss_graph_free(a);
        ss_graph_free(b);
    }
    /* GPT-2 small exactly (the Hugging Face count) */
    ss_graph *g = build(hf("gpt2:vocab_pad=0"));
    assert_int_equal(ss_graph_parameters(g), 124439808);
    ss_graph_free(g);
    g = build(hf("deepseek-v3-tiny:vocab_pad=0"));
    assert_int_equal(ss_graph_parameters(g), 2693344);
    ss_graph_free(g);
    /* a null q_lora_rank (DeepSeek-V2-Lite's full-rank query) and overrides */
    g = build(hf("deepseek-v3-tiny:q_lora=0,layers=1"));
    assert_true(ss_graph_find_op(g, "l0.attn.q") >= 0);
    assert_int_equal(ss_graph_find_op(g, "l0.attn.q_a"), -1);
    ss_graph_free(g);
    /* Llama-like imports run flash attention (as the llama preset), GPT-2 unfused */
    g = build(hf("mixtral-8x7b:seq=4096,layers=1"));
    assert_true(ss_graph_find_op(g, "l0.attn.flash") >= 0);
    ss_graph_free(g);
    g = build(hf("gpt2:vocab_pad=0,layers=1"));
    assert_true(ss_graph_find_op(g, "l0.attn.scores") >= 0);
    ss_graph_free(g);
    /* overrides: precision and the sequence */
    g = build(hf("llama3-8b:seq=2048,precision=fp8,layers=2"));
    assert_int_equal(ss_graph_tensor(g, ss_graph_find_tensor(g, "tokens"))->shape[1], 2048);
    assert_int_equal(ss_graph_op(g, ss_graph_find_op(g, "l1.mlp.up"))->attrs.dtype, SS_F8);
    assert_int_equal(ss_graph_find_op(g, "l2.ln1"), -1);
    ss_graph_free(g);
}

static void test_bad_configs(void **state)
{
    (void)state;
    const struct { const char *spec; ss_status st; const char *msg; } bad[] = {
        {hf("bad/unknown_arch.json"), SS_ERR_INVALID,
         "unknown_arch.json: $.architectures[0]: unknown architecture \"GPTNeoXForCausalLM\""},
        {hf("bad/unknown_key.json"), SS_ERR_INVALID,
         "unknown_key.json: $.num_experts: unknown key for LlamaForCausalLM"},
        {hf("bad/gelu.json"), SS_ERR_INVALID, "gelu.json: $.hidden_act: \"gelu\""},
        {hf("bad/string_size.json"), SS_ERR_PARSE, "$.hidden_size: expected an integer"},
        {hf("bad/no_layers.json"), SS_ERR_PARSE, "num_hidden_layers"},
        {hf("bad/attention_bias.json"), SS_ERR_INVALID, "$.attention_bias"},
        {hf("bad/deepseek_mtp.json"), SS_ERR_INVALID,
         "deepseek_mtp.json: $.num_nextn_predict_layers: multi-token prediction modules are "
         "not modelled"},
        {hf("bad/deepseek_unknown_key.json"), SS_ERR_INVALID,
         "$.sliding_window: unknown key for DeepseekV3ForCausalLM"},
        {hf("mistral-7b"), SS_ERR_INVALID, "$.sliding_window: sliding-window attention (4096)"},
        {hf("nosuch"), SS_ERR_IO, "tests/data/hf/nosuch"},
        {hf("llama3-8b:bogus=1"), SS_ERR_INVALID, "unknown key 'bogus'"},
        {"hf:", SS_ERR_INVALID, "expected hf:PATH"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ss_diag d;
        ss_diag_init(&d);
        ss_graph *g = NULL;
        ss_status st = ss_model_build(bad[i].spec, 1, 1, &g, &d);
        if (st != bad[i].st || !strstr(d.msg, bad[i].msg))
            print_error("spec '%s': status %d, message '%s'\n", bad[i].spec, st, d.msg);
        assert_int_equal(st, bad[i].st);
        assert_null(g);
        assert_non_null(strstr(d.msg, bad[i].msg));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_graph_as_zoo),
        cmocka_unit_test(test_bad_configs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
