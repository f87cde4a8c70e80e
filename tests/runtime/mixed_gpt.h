/*
 * mixed_gpt.h — a mixed SOAP plan of the runtime tests' 2-layer fp32 GPT on
 * two devices, written by hand (included by tests/runtime/test_exec.c and
 * test_devplan.c): the shape of the plan `simsearch search` found for
 * benchmarks/bench_runtime.sh's GPT. Invariant: every op of the 2-layer GPT
 * gets a config (the maker fails the test otherwise).
 */
#ifndef SS_TEST_MIXED_GPT_H
#define SS_TEST_MIXED_GPT_H

#include "simsearch.h"

#include <string.h>

/* The shape of the GPT plan `simsearch search --budget 300 --seed 1` found
 * for 2 CPU ranks (benchmarks/bench_runtime.sh): the token ids split by
 * sample under an embedding split by hidden, the embeddings' sum and the
 * layer norms by sequence, attention by heads, the projections' contraction
 * split (partial sums), the loss's vocabulary split; the distributed
 * optimizer and backward reordering. Layer ops are named without "lN.". */
static const struct {
    const char *name;
    int deg[4], red;
} mixed_gpt[] = {
    {"tokens", {2, 1}, 1},           {"positions", {1, 2}, 1},
    {"labels", {2, 1}, 1},           {"embed.tokens", {1, 1, 2}, 1},
    {"embed.positions", {1, 2, 1}, 1}, {"embed.add", {1, 2, 1}, 1},
    {"ln1", {1, 2, 1}, 1},           {"attn.qkv", {1, 1, 2}, 1},
    {"attn.qkv_reshape", {1, 1, 2, 1}, 1}, {"attn.split", {1, 1, 2, 1}, 1},
    {"attn.q_t", {1, 2, 1, 1}, 1},   {"attn.k_t", {1, 2, 1, 1}, 1},
    {"attn.v_t", {1, 2, 1, 1}, 1},   {"attn.scores", {1, 2, 1, 1}, 1},
    {"attn.softmax", {1, 2, 1, 1}, 1}, {"attn.context", {1, 2, 1, 1}, 1},
    {"attn.context_t", {1, 1, 2, 1}, 1}, {"attn.merge", {1, 1, 2}, 1},
    {"attn.proj", {1, 1, 1}, 2},     {"attn.residual", {1, 2, 1}, 1},
    {"ln2", {1, 2, 1}, 1},           {"mlp.fc1", {1, 1, 2}, 1},
    {"mlp.gelu", {1, 1, 2}, 1},      {"mlp.fc2", {1, 1, 1}, 2},
    {"mlp.residual", {1, 2, 1}, 1},  {"final_ln", {1, 2, 1}, 1},
    {"lm_head", {1, 1, 2}, 1},       {"loss", {1, 1}, 2},
};

/* The plan above for g (the zoo GPT, 2 layers) on devices 0 and 1. */
static ss_plan *mixed_gpt_plan(const ss_graph *g, const ss_machine *m)
{
    static const int devs[2] = {0, 1};
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = ss_plan_new(g, m);
    assert_non_null(p);
    int set = 0;
    for (int o = 0; o < ss_graph_n_ops(g); o++) {
        const ss_op *op = ss_graph_op(g, o);
        const char *n = op->name;
        if (n[0] == 'l' && n[1] >= '0' && n[1] <= '9' && n[2] == '.')
            n += 3;
        for (size_t k = 0; k < sizeof mixed_gpt / sizeof *mixed_gpt; k++) {
            if (strcmp(n, mixed_gpt[k].name))
                continue;
            ss_pconfig c = {.ndim = ss_graph_tensor(g, op->outputs[0])->ndim,
                            .red = mixed_gpt[k].red, .rep = 1, .ntiles = 2, .devices = devs};
            for (int i = 0; i < c.ndim; i++)
                c.deg[i] = mixed_gpt[k].deg[i];
            if (ss_plan_set_config(p, o, &c, &d) != SS_OK)
                fail_msg("%s: %s", op->name, d.msg);
            set++;
        }
    }
    assert_int_equal(set, 9 + 2 * 19); /* every op of the 2-layer GPT */
    ss_plan_settings *st = ss_plan_settings_of(p);
    st->distopt = 1;
    st->reorder_backward = 1;
    st->bucket_bytes = 8e7;
    if (ss_plan_validate(p, g, m, &d) != SS_OK)
        fail_msg("mixed GPT plan: %s", d.msg);
    return p;
}

#endif
