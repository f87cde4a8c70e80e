/*
 * test_model_io.c — the simsearch-model JSON format: loading hand-written
 * files, the round trip of every operator type's attributes, atomic saves,
 * every malformed file under tests/data/bad/model_* (message names the file
 * and says what is wrong), and allocation failures during load and save.
 */
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ss_graph *load_ok(const char *rel)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = NULL;
    ss_status st = ss_model_load(ss_test_path(rel), &g, &d);
    if (st)
        print_error("%s\n", d.msg);
    assert_int_equal(st, SS_OK);
    return g;
}

static const ss_tensor *tensor(const ss_graph *g, const char *name)
{
    int id = ss_graph_find_tensor(g, name);
    assert_true(id >= 0);
    return ss_graph_tensor(g, id);
}

static void test_load_tiny_mlp(void **state)
{
    (void)state;
    ss_graph *g = load_ok("tests/data/models/tiny_mlp.json");
    assert_string_equal(ss_graph_name(g), "tiny");
    assert_int_equal(ss_graph_n_ops(g), 6);
    assert_int_equal(ss_graph_batch(g), 8);
    assert_int_equal(ss_graph_optimizer(g), SS_OPT_SGD_MOMENTUM);
    assert_int_equal(ss_graph_precision(g), SS_PREC_FP32);
    /* fc1 16x32 + bias 32, fc2 32x4 without bias. */
    assert_int_equal(ss_graph_parameters(g), 16 * 32 + 32 + 32 * 4);
    const ss_tensor *x = tensor(g, "x");
    assert_int_equal(x->ndim, 2);
    assert_int_equal(x->shape[0], 8);
    assert_int_equal(x->shape[1], 16);
    assert_int_equal(x->kind[0], SS_DIM_SAMPLE);
    assert_int_equal(x->kind[1], SS_DIM_PARAMETER);
    assert_int_equal(tensor(g, "labels")->dtype, SS_I32);
    const ss_op *fc2 = ss_graph_op(g, ss_graph_find_op(g, "fc2"));
    assert_int_equal(fc2->type, SS_OP_LINEAR);
    assert_int_equal(fc2->attrs.out_features, 4);
    assert_int_equal(fc2->attrs.use_bias, 0);
    assert_int_equal(fc2->n_w, 1);
    assert_int_equal(tensor(g, "loss")->ndim, 1);
    ss_graph_free(g);
}

static void test_load_cnn_small(void **state)
{
    (void)state;
    ss_graph *g = load_ok("tests/data/models/cnn_small.json");
    /* conv 6x3x3x3 + 6, bn 2x6, fc 96x10 + 10. */
    assert_int_equal(ss_graph_parameters(g), 162 + 6 + 12 + 960 + 10);
    const ss_tensor *p = tensor(g, "pool1");
    assert_int_equal(p->shape[1], 6);
    assert_int_equal(p->shape[2], 4);
    assert_int_equal(p->shape[3], 4);
    const ss_op *drop = ss_graph_op(g, ss_graph_find_op(g, "drop"));
    assert_true(drop->attrs.rate == 0.25);
    const ss_op *conv = ss_graph_op(g, ss_graph_find_op(g, "conv1"));
    assert_int_equal(conv->attrs.groups, 1); /* default when absent */
    assert_int_equal(conv->attrs.pad[0], 1);
    const ss_op *pool = ss_graph_op(g, ss_graph_find_op(g, "pool1"));
    assert_int_equal(pool->attrs.pool, SS_POOL_MAX);
    assert_int_equal(pool->attrs.pad[1], 0);
    assert_int_equal(tensor(g, "labels")->dtype, SS_I64);
    assert_int_equal(ss_graph_optimizer(g), SS_OPT_SGD);
    ss_graph_free(g);
}

static int add(ss_graph *g, const char *name, ss_op_type t, const ss_op_attrs *a, int n,
               const int *in)
{
    ss_diag d;
    ss_diag_init(&d);
    int id = ss_graph_add(g, name, t, a, n, in, &d);
    if (id < 0)
        print_error("%s: %s\n", name, d.msg);
    assert_true(id >= 0);
    return ss_graph_out(g, id);
}

/* A graph with every operator type and non-default attributes. */
static ss_graph *every_op_graph(void)
{
    ss_graph *g = ss_graph_new("every_op");
    ss_op_attrs a = {0};
    a.ndim = 4;
    int64_t img[4] = {2, 4, 9, 9};
    ss_dim_kind nchw[4] = {SS_DIM_SAMPLE, SS_DIM_PARAMETER, SS_DIM_ATTRIBUTE, SS_DIM_ATTRIBUTE};
    memcpy(a.shape, img, sizeof img);
    memcpy(a.kind, nchw, sizeof nchw);
    a.dtype = SS_F16;
    int x = add(g, "img", SS_OP_INPUT, &a, 0, NULL);
    memset(&a, 0, sizeof a);
    a.out_channels = 8;
    a.groups = 2;
    a.kernel[0] = 3;
    a.kernel[1] = 1;
    a.stride[0] = 2;
    a.stride[1] = 1;
    a.pad[0] = 1;
    a.use_bias = 1;
    int c = add(g, "conv", SS_OP_CONV2D, &a, 1, &x); /* [2,8,5,9] */
    c = add(g, "bn", SS_OP_BATCHNORM, &(ss_op_attrs){0}, 1, &c);
    memset(&a, 0, sizeof a);
    a.pool = SS_POOL_AVG;
    a.kernel[0] = a.kernel[1] = 3;
    a.stride[0] = a.stride[1] = 2;
    a.pad[0] = a.pad[1] = 1;
    c = add(g, "pool", SS_OP_POOL2D, &a, 1, &c); /* [2,8,3,5] */
    memset(&a, 0, sizeof a);
    a.ndim = 3;
    a.shape[0] = 2;
    a.shape[1] = 8;
    a.shape[2] = 15;
    c = add(g, "flat", SS_OP_RESHAPE, &a, 1, &c); /* [2,8,15] */
    memset(&a, 0, sizeof a);
    a.perm[0] = 0;
    a.perm[1] = 2;
    a.perm[2] = 1;
    int t = add(g, "tr", SS_OP_TRANSPOSE, &a, 1, &c); /* [2,15,8] */
    memset(&a, 0, sizeof a);
    a.trans_a = 1;
    int bm[2] = {c, c};
    int s = add(g, "bmm", SS_OP_BATCH_MATMUL, &a, 2, bm); /* [2,15,15] */
    memset(&a, 0, sizeof a);
    a.axis = -1;
    s = add(g, "sm", SS_OP_SOFTMAX, &a, 1, &s);
    memset(&a, 0, sizeof a);
    a.rate = 0.125;
    s = add(g, "drop", SS_OP_DROPOUT, &a, 1, &s);
    memset(&a, 0, sizeof a);
    a.out_features = 8;
    a.trans_b = 1;
    s = add(g, "lin", SS_OP_LINEAR, &a, 1, &s); /* [2,15,8] */
    memset(&a, 0, sizeof a);
    a.binary = SS_BINARY_MUL;
    int pair[2] = {s, t};
    s = add(g, "mul", SS_OP_BINARY, &a, 2, pair);
    memset(&a, 0, sizeof a);
    a.unary = SS_UNARY_SIGMOID;
    s = add(g, "sig", SS_OP_UNARY, &a, 1, &s);
    s = add(g, "ln", SS_OP_LAYERNORM, &(ss_op_attrs){0}, 1, &s);
    memset(&a, 0, sizeof a);
    a.heads = 2;
    a.causal = 1;
    int qkv[3] = {s, s, s};
    s = add(g, "att", SS_OP_ATTENTION, &a, 3, qkv);
    memset(&a, 0, sizeof a);
    a.axis = 2;
    a.n_split = 3;
    a.split_sizes[0] = 2;
    a.split_sizes[1] = 5;
    a.split_sizes[2] = 1;
    int sp = ss_graph_find_op(g, "att") + 1;
    add(g, "split", SS_OP_SPLIT, &a, 1, &s);
    const ss_op *spo = ss_graph_op(g, sp);
    memset(&a, 0, sizeof a);
    a.axis = 2;
    int cat[2] = {spo->outputs[2], spo->outputs[0]};
    int cc = add(g, "cat", SS_OP_CONCAT, &a, 2, cat); /* [2,15,3] */
    memset(&a, 0, sizeof a);
    a.lstm_mode = SS_LSTM_SEQUENCE;
    a.hidden = 4;
    a.return_sequences = 1;
    int seq = add(g, "lstm", SS_OP_LSTM, &a, 1, &cc); /* [2,15,4] f16 */
    (void)seq;
    memset(&a, 0, sizeof a);
    a.ndim = 2;
    a.shape[0] = 2;
    a.shape[1] = 15;
    a.kind[0] = SS_DIM_SAMPLE;
    a.kind[1] = SS_DIM_ATTRIBUTE;
    a.dtype = SS_I64;
    int ids = add(g, "ids", SS_OP_INPUT, &a, 0, NULL);
    memset(&a, 0, sizeof a);
    a.vocab = 11;
    a.dim = 4;
    a.dtype = SS_F16;
    int e = add(g, "emb", SS_OP_EMBEDDING, &a, 1, &ids);
    memset(&a, 0, sizeof a);
    int cl[2] = {e, ids};
    add(g, "loss", SS_OP_SOFTMAX_CE, &a, 2, cl);
    ss_graph_set_training(g, 2, SS_OPT_ADAM, SS_PREC_MIXED);
    return g;
}

static void test_every_op_round_trip(void **state)
{
    (void)state;
    ss_graph *g = every_op_graph();
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_graph_validate(g, &d), SS_OK);
    char *text = NULL;
    assert_int_equal(ss_model_to_string(g, &text, &d), SS_OK);
    /* Only the keys each type uses: a batchnorm has no attributes. */
    assert_non_null(strstr(text, "\"type\": \"batchnorm\""));
    assert_null(strstr(text, "\"return_sequences\": false"));
    ss_graph *h = NULL;
    ss_status st = ss_model_load_string(text, "every_op", &h, &d);
    if (st)
        print_error("%s\n", d.msg);
    assert_int_equal(st, SS_OK);
    assert_true(ss_graph_fingerprint(g) == ss_graph_fingerprint(h));
    const ss_op *conv = ss_graph_op(h, ss_graph_find_op(h, "conv"));
    assert_int_equal(conv->attrs.groups, 2);
    assert_int_equal(conv->attrs.kernel[1], 1);
    assert_int_equal(ss_graph_op(h, ss_graph_find_op(h, "att"))->attrs.causal, 1);
    assert_true(ss_graph_op(h, ss_graph_find_op(h, "drop"))->attrs.rate == 0.125);
    assert_int_equal(tensor(h, "emb.weight")->dtype, SS_F16);
    ss_free(text);
    ss_graph_free(h);
    ss_graph_free(g);
}

static void test_save_atomic(void **state)
{
    (void)state;
    ss_graph *g = every_op_graph();
    char path[] = "/tmp/ss_model_io_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_model_save(g, path, &d), SS_OK);
    ss_graph *h = NULL;
    assert_int_equal(ss_model_load(path, &h, &d), SS_OK);
    assert_true(ss_graph_fingerprint(g) == ss_graph_fingerprint(h));
    ss_graph_free(h);
    remove(path);
    ss_diag_init(&d);
    assert_int_equal(ss_model_save(g, "/nonexistent-dir/m.json", &d), SS_ERR_IO);
    assert_non_null(strstr(d.msg, "/nonexistent-dir/m.json"));
    ss_graph_free(g);
}

static void test_string_errors(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_load_string("{\"format\": \"simsearch-model\",\n \"version\": }",
                                          "mem.json", &g, &d),
                     SS_ERR_PARSE);
    assert_non_null(strstr(d.msg, "mem.json:2:"));
    assert_null(g);
    ss_diag_init(&d);
    assert_int_equal(ss_model_load("/nonexistent/model.json", &g, &d), SS_ERR_IO);
    assert_non_null(strstr(d.msg, "/nonexistent/model.json"));
    /* A weight listed among inputs, an input op with inputs. */
    ss_diag_init(&d);
    assert_int_equal(ss_model_load_string(
                         "{\"format\":\"simsearch-model\",\"version\":1,\"name\":\"m\","
                         "\"batch\":2,\"optimizer\":\"sgd\",\"precision\":\"fp32\","
                         "\"tensors\":[{\"name\":\"x\",\"role\":\"input\",\"shape\":[2,3],"
                         "\"dtype\":\"f32\",\"kinds\":[\"sample\",\"parameter\"]}],"
                         "\"operators\":[{\"name\":\"x\",\"type\":\"input\",\"inputs\":[]}]}",
                         "in.json", &g, &d),
                     SS_ERR_PARSE);
    assert_non_null(strstr(d.msg, "in.json: $.operators[0]: unknown key \"inputs\""));
}

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* Every tests/data/bad/model_*.json fails with PARSE or INVALID; the
 * message names the file and contains the first line of its .expect. */
static void test_bad_files(void **state)
{
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ss_test_path("tests/data/bad"));
    DIR *dh = opendir(dir);
    assert_non_null(dh);
    int count = 0;
    struct dirent *de;
    while ((de = readdir(dh)) != NULL) {
        if (strncmp(de->d_name, "model_", 6) != 0 || !ends_with(de->d_name, ".json"))
            continue;
        char path[4400], expect_path[4400], want[512] = "";
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        snprintf(expect_path, sizeof expect_path, "%.*s.expect", (int)(strlen(path) - 5), path);
        FILE *f = fopen(expect_path, "r");
        if (!f)
            print_error("missing %s\n", expect_path);
        assert_non_null(f);
        assert_non_null(fgets(want, sizeof want, f));
        fclose(f);
        want[strcspn(want, "\n")] = '\0';
        assert_true(strlen(want) > 0);
        ss_diag d;
        ss_diag_init(&d);
        ss_graph *g = NULL;
        ss_status st = ss_model_load(path, &g, &d);
        if ((st != SS_ERR_PARSE && st != SS_ERR_INVALID) || !strstr(d.msg, want) ||
            !strstr(d.msg, path))
            print_error("%s: status %d, message '%s', expected '%s'\n", de->d_name, st, d.msg,
                        want);
        assert_true(st == SS_ERR_PARSE || st == SS_ERR_INVALID);
        assert_null(g);
        assert_non_null(strstr(d.msg, path));
        assert_non_null(strstr(d.msg, want));
        /* Every bad file goes through ss_model_build the same way. */
        ss_diag_init(&d);
        assert_int_equal(ss_model_build(path, 0, 1, &g, &d), st);
        assert_null(g);
        count++;
    }
    closedir(dh);
    assert_true(count >= 10);
}

/* Allocation failures during load and serialisation never crash or leak. */
static void test_fault_injection(void **state)
{
    (void)state;
    static const char *const files[] = {"tests/data/models/tiny_mlp.json",
                                        "tests/data/models/rnnlm_tiny.json",
                                        "tests/data/bad/model_cycle.json"};
    for (int i = 0; i < 3; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s", ss_test_path(files[i]));
        ss_status final = i == 2 ? SS_ERR_INVALID : SS_OK;
        for (long n = 0;; n++) {
            ss_diag d;
            ss_diag_init(&d);
            ss_graph *g = NULL;
            ss_test_fail_after(n);
            ss_status st = ss_model_load(path, &g, &d);
            long used = ss_test_alloc_count();
            ss_test_fail_after(-1);
            if (st == final && used <= n) {
                ss_graph_free(g);
                break;
            }
            /* jansson reports its own allocation failures as parse errors. */
            assert_true(st == SS_ERR_NOMEM || st == SS_ERR_PARSE || st == final);
            if (st != SS_OK)
                assert_null(g);
            ss_graph_free(g);
            assert_true(n < 100000);
        }
    }
    ss_graph *g = load_ok("tests/data/models/rnnlm_tiny.json");
    for (long n = 0;; n++) {
        ss_diag d;
        ss_diag_init(&d);
        char *text = NULL;
        ss_test_fail_after(n);
        ss_status st = ss_model_to_string(g, &text, &d);
        ss_test_fail_after(-1);
        if (st == SS_OK) {
            assert_non_null(text);
            ss_free(text);
            break;
        }
        assert_int_equal(st, SS_ERR_NOMEM);
        assert_null(text);
        assert_true(n < 100000);
    }
    ss_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_tiny_mlp),
        cmocka_unit_test(test_load_cnn_small),
        cmocka_unit_test(test_every_op_round_trip),
        cmocka_unit_test(test_save_atomic),
        cmocka_unit_test(test_string_errors),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
