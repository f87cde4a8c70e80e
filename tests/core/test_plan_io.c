/*
 * test_plan_io.c — plan JSON (core/plan_io.c): round trips of generated
 * plans (load(save(p)) == p), the shipped fixtures, and every error path
 * with its message (file, JSON path, what was expected).
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct fixture {
    ss_machine *m;
    ss_graph *mlp, *gpt;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    ss_diag d;
    ss_diag_init(&d);
    if (ss_machine_load(ss_test_path("topologies/p100x16.json"), &f->m, &d) ||
        ss_model_build("mlp", 0, 16, &f->mlp, &d) ||
        ss_model_build("gpt:layers=2,hidden=256,heads=4,seq=64,vocab=1000", 16, 16, &f->gpt, &d))
        fail_msg("%s", d.msg);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ss_graph_free(f->mlp);
    ss_graph_free(f->gpt);
    ss_machine_free(f->m);
    free(f);
    ss_test_fail_after(-1);
    return 0;
}

static void assert_plans_equal(const ss_plan *a, const ss_plan *b)
{
    assert_int_equal(ss_plan_n_ops(a), ss_plan_n_ops(b));
    assert_true(ss_plan_model_fingerprint(a) == ss_plan_model_fingerprint(b));
    assert_true(ss_plan_topology_fingerprint(a) == ss_plan_topology_fingerprint(b));
    const ss_plan_settings *s = ss_plan_settings_get(a), *t = ss_plan_settings_get(b);
    assert_int_equal(s->stages, t->stages);
    assert_int_equal(s->microbatches, t->microbatches);
    assert_int_equal(s->schedule, t->schedule);
    assert_int_equal(s->queue, t->queue);
    assert_int_equal(s->sync, t->sync);
    assert_true(s->bucket_bytes == t->bucket_bytes);
    assert_int_equal(s->priority, t->priority);
    assert_int_equal(s->reorder_backward, t->reorder_backward);
    assert_int_equal(s->recompute, t->recompute);
    assert_memory_equal(s->recompute_stage, t->recompute_stage, sizeof s->recompute_stage);
    assert_int_equal(s->distopt, t->distopt);
    for (int i = 0; i < ss_plan_n_ops(a); i++) {
        const ss_pconfig *x = ss_plan_config(a, i), *y = ss_plan_config(b, i);
        assert_int_equal(x->ndim, y->ndim);
        assert_memory_equal(x->deg, y->deg, sizeof x->deg);
        assert_int_equal(x->red, y->red);
        assert_int_equal(x->rep, y->rep);
        assert_int_equal(x->ntiles, y->ntiles);
        assert_int_equal(x->stage, y->stage);
        assert_memory_equal(x->devices, y->devices, (size_t)x->ntiles * sizeof(int));
        /* the same ops share a device list (whichever form the file used) */
        for (int j = 0; j < i; j++)
            assert_int_equal(ss_plan_devlist_id(a, i) == ss_plan_devlist_id(a, j),
                             ss_plan_devlist_id(b, i) == ss_plan_devlist_id(b, j));
    }
}

static void round_trip(fixture *f, const ss_graph *g, const char *spec)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = NULL, *q = NULL;
    if (ss_plan_from_spec(spec, g, f->m, &p, &d))
        fail_msg("%s", d.msg);
    ss_plan_settings_of(p)->bucket_bytes = 1.5e6 + 0.25; /* a non-integer survives */
    ss_plan_settings_of(p)->priority = 1;
    ss_plan_settings_of(p)->distopt = 1;
    ss_plan_settings_of(p)->recompute = SS_RECOMPUTE_SELECTIVE;
    char *s1 = NULL, *s2 = NULL;
    assert_int_equal(ss_plan_to_string(p, g, &s1, &d), SS_OK);
    if (ss_plan_load_string(s1, "rt", g, f->m, &q, &d))
        fail_msg("%s", d.msg);
    assert_plans_equal(p, q);
    assert_int_equal(ss_plan_to_string(q, g, &s2, &d), SS_OK);
    assert_string_equal(s1, s2);
    ss_free(s1);
    ss_free(s2);
    ss_plan_free(q);
    /* through a file */
    char path[64];
    snprintf(path, sizeof path, "/tmp/ss_test_plan_io_%ld.json", (long)getpid());
    assert_int_equal(ss_plan_save(p, g, path, &d), SS_OK);
    q = NULL;
    if (ss_plan_load(path, g, f->m, &q, &d))
        fail_msg("%s", d.msg);
    assert_plans_equal(p, q);
    remove(path);
    ss_plan_free(p);
    ss_plan_free(q);
}

static void test_round_trip_dp(void **state)
{
    fixture *f = *state;
    round_trip(f, f->mlp, "data-parallel");
}

static void test_round_trip_megatron(void **state)
{
    fixture *f = *state;
    round_trip(f, f->gpt, "megatron:tp=2,pp=2,dp=1");
    round_trip(f, f->gpt, "megatron:tp=2,pp=1,dp=4,sp=1,recompute=full");
}

/* The shipped valid fixtures load, and say what they say. */
/* text with the value of its "recompute" key replaced by val (ss_free) */
static char *with_recompute(const char *text, const char *val)
{
    const char *k = strstr(text, "\"recompute\"");
    assert_non_null(k);
    const char *v = strchr(k, ':') + 1, *end = v;
    while (*end == ' ')
        end++;
    if (*end == '[')
        end = strchr(end, ']') + 1;
    else
        end = strchr(end + 1, '"') + 1;
    size_t n = strlen(text) + strlen(val) + 2;
    char *out = ss_malloc(n);
    snprintf(out, n, "%.*s %s%s", (int)(v - text), text, val, end);
    return out;
}

static void expect_load_error(fixture *f, const char *text, const char *want)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *q = NULL;
    assert_int_equal(ss_plan_load_string(text, "bad.json", f->gpt, f->m, &q, &d), SS_ERR_INVALID);
    assert_null(q);
    if (!strstr(d.msg, want) || !strstr(d.msg, "bad.json"))
        fail_msg("message '%s' lacks '%s' or the file", d.msg, want);
}

/* Per-stage recompute: a list of one mode per stage round-trips; a single
 * string (old files) still loads; a list of the wrong length, a bad value
 * or a non-string gives an error naming the file and the key. */
static void test_recompute_per_stage(void **state)
{
    fixture *f = *state;
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = NULL, *q = NULL;
    if (ss_plan_from_spec("megatron:tp=2,pp=2,dp=1,recompute=full/none", f->gpt, f->m, &p, &d))
        fail_msg("%s", d.msg);
    const ss_plan_settings *s = ss_plan_settings_get(p);
    assert_false(ss_plan_recompute_uniform(s));
    assert_int_equal(ss_plan_stage_recompute(s, 0), SS_RECOMPUTE_FULL);
    assert_int_equal(ss_plan_stage_recompute(s, 1), SS_RECOMPUTE_NONE);
    char *text = NULL, *t2 = NULL;
    assert_int_equal(ss_plan_to_string(p, f->gpt, &text, &d), SS_OK);
    assert_non_null(strstr(text, "\"full\""));
    if (ss_plan_load_string(text, "rt", f->gpt, f->m, &q, &d))
        fail_msg("%s", d.msg);
    assert_plans_equal(p, q);
    assert_int_equal(ss_plan_to_string(q, f->gpt, &t2, &d), SS_OK);
    assert_string_equal(text, t2);
    ss_free(t2);
    ss_plan_free(q);
    /* the list with equal modes is stored as the single mode */
    char *same = with_recompute(text, "[\"selective\", \"selective\"]");
    q = NULL;
    if (ss_plan_load_string(same, "same.json", f->gpt, f->m, &q, &d))
        fail_msg("%s", d.msg);
    assert_true(ss_plan_recompute_uniform(ss_plan_settings_get(q)));
    assert_int_equal(ss_plan_settings_get(q)->recompute, SS_RECOMPUTE_SELECTIVE);
    ss_plan_free(q);
    ss_free(same);
    /* one string: every stage */
    char *one = with_recompute(text, "\"full\"");
    q = NULL;
    if (ss_plan_load_string(one, "one.json", f->gpt, f->m, &q, &d))
        fail_msg("%s", d.msg);
    assert_true(ss_plan_recompute_uniform(ss_plan_settings_get(q)));
    assert_int_equal(ss_plan_stage_recompute(ss_plan_settings_get(q), 1), SS_RECOMPUTE_FULL);
    ss_plan_free(q);
    ss_free(one);
    static const struct {
        const char *val, *want;
    } bad[] = {
        {"[\"full\"]", "$.settings.recompute: a list of 1 modes, expected one per stage"},
        {"[\"full\", \"none\", \"none\"]", "a list of 3 modes"},
        {"[]", "a list of 0 modes"},
        {"[\"full\", \"fast\"]", "$.settings.recompute[1]: expected \"none\""},
        {"[\"full\", 1]", "$.settings.recompute[1]"},
        {"\"fast\"", "$.settings.recompute: unknown value \"fast\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *b = with_recompute(text, bad[i].val);
        expect_load_error(f, b, bad[i].want);
        ss_free(b);
    }
    ss_free(text);
    /* ss_plan_set_recompute keeps one form per meaning; a wrong count is refused */
    ss_plan_settings t = *s;
    ss_recompute m3[3] = {SS_RECOMPUTE_FULL, SS_RECOMPUTE_NONE, SS_RECOMPUTE_NONE};
    ss_diag_init(&d);
    assert_int_equal(ss_plan_set_recompute(&t, m3, 3, "x", &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "expected 1 or one per stage (2)"));
    assert_memory_equal(&t, s, sizeof t);
    ss_recompute m2[2] = {SS_RECOMPUTE_NONE, SS_RECOMPUTE_NONE};
    assert_int_equal(ss_plan_set_recompute(&t, m2, 2, "x", &d), SS_OK);
    ss_plan_settings u = *s;
    assert_int_equal(ss_plan_set_recompute(&u, m2, 1, "x", &d), SS_OK);
    assert_memory_equal(&t, &u, sizeof t);
    /* a broken per-stage array fails validation */
    ss_plan_settings_of(p)->recompute_stage[1] = 9;
    ss_diag_init(&d);
    assert_int_equal(ss_plan_validate(p, f->gpt, f->m, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "recompute"));
    ss_plan_free(p);
}

static void test_fixtures(void **state)
{
    fixture *f = *state;
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = NULL;
    if (ss_plan_load(ss_test_path("tests/data/plans/mlp_p100x16_mixed.json"), f->mlp, f->m, &p,
                     &d))
        fail_msg("%s", d.msg);
    const ss_plan_settings *s = ss_plan_settings_get(p);
    assert_int_equal(s->stages, 2);
    assert_int_equal(s->microbatches, 4);
    assert_int_equal(s->schedule, SS_PIPE_1F1B);
    assert_int_equal(s->queue, SS_QUEUE_BACKWARD_FIRST);
    assert_int_equal(s->sync, SS_SYNC_BULK);
    assert_true(s->bucket_bytes == 25e6);
    assert_int_equal(s->priority, 1);
    assert_int_equal(s->reorder_backward, 1);
    assert_int_equal(s->recompute, SS_RECOMPUTE_FULL);
    const ss_pconfig *c = ss_plan_config(p, ss_graph_find_op(f->mlp, "fc2"));
    assert_int_equal(c->deg[0], 2);
    assert_int_equal(c->red, 2);
    assert_int_equal(c->devices[3], 3);
    c = ss_plan_config(p, ss_graph_find_op(f->mlp, "out"));
    assert_int_equal(c->stage, 1);
    assert_int_equal(c->devices[0], 4);
    ss_plan_free(p);
    p = NULL;
    if (ss_plan_load(ss_test_path("tests/data/plans/mlp_p100x16_dp.json"), f->mlp, f->m, &p, &d))
        fail_msg("%s", d.msg);
    ss_plan *q = NULL;
    assert_int_equal(ss_plan_data_parallel(f->mlp, f->m, 0, &q, &d), SS_OK);
    assert_plans_equal(p, q);
    ss_plan_free(p);
    ss_plan_free(q);
}

/* Settings and reduction/stage are optional in the file. */
static void test_minimal_and_defaults(void **state)
{
    fixture *f = *state;
    char fp[17], tfp[17];
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)ss_graph_fingerprint(f->mlp));
    snprintf(tfp, sizeof tfp, "%016llx", (unsigned long long)ss_machine_fingerprint(f->m));
    char json[4096];
    size_t u = (size_t)snprintf(json, sizeof json,
                                "{\"format\": \"simsearch-plan\", \"version\": 1,"
                                " \"model\": {\"name\": \"mlp\", \"fingerprint\": \"%s\"},"
                                " \"topology\": {\"name\": \"p100x16\", \"fingerprint\": \"%s\"},"
                                " \"operators\": {",
                                fp, tfp);
    for (int i = 0; i < ss_graph_n_ops(f->mlp); i++) {
        const ss_op *op = ss_graph_op(f->mlp, i);
        int nd = ss_graph_tensor(f->mlp, op->outputs[0])->ndim;
        if (!strcmp(op->name, "fc2")) /* replicated: 2 tiles x 2 replicas */
            u += (size_t)snprintf(json + u, sizeof json - u,
                                  "%s\"%s\": {\"degrees\": [2%s], \"replicas\": 2, "
                                  "\"devices\": [3, 4, 5, 6]}",
                                  i ? ", " : "", op->name, nd == 2 ? ", 1" : "");
        else
            u += (size_t)snprintf(json + u, sizeof json - u,
                                  "%s\"%s\": {\"degrees\": [2%s], \"devices\": [3, 5]}",
                                  i ? ", " : "", op->name, nd == 2 ? ", 1" : "");
    }
    snprintf(json + u, sizeof json - u, "}}");
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = NULL;
    if (ss_plan_load_string(json, "mini", f->mlp, f->m, &p, &d))
        fail_msg("%s", d.msg);
    assert_int_equal(ss_plan_settings_get(p)->stages, 1);
    assert_int_equal(ss_plan_settings_get(p)->microbatches, 1);
    const ss_pconfig *c = ss_plan_config(p, ss_graph_find_op(f->mlp, "fc2"));
    assert_int_equal(c->red, 1);
    assert_int_equal(c->rep, 2);
    assert_int_equal(c->ntiles, 4);
    assert_int_equal(c->stage, 0);
    assert_int_equal(c->devices[2], 5);
    assert_int_equal(ss_plan_config(p, ss_graph_find_op(f->mlp, "fc1"))->rep, 1);
    /* saved with "replicas" only where > 1; loads back the same */
    char *text = NULL;
    assert_int_equal(ss_plan_to_string(p, f->mlp, &text, &d), SS_OK);
    assert_non_null(strstr(text, "\"replicas\": 2"));
    ss_plan *q = NULL;
    if (ss_plan_load_string(text, "rt", f->mlp, f->m, &q, &d))
        fail_msg("%s", d.msg);
    assert_plans_equal(p, q);
    ss_plan_free(q);
    ss_free(text);
    ss_plan_free(p);
    /* a bad replica degree names the JSON path */
    char *at = strstr(json, "\"replicas\": 2");
    assert_non_null(at);
    at[12] = '0';
    p = NULL;
    assert_int_equal(ss_plan_load_string(json, "mini", f->mlp, f->m, &p, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "$.operators[\"fc2\"]"));
    assert_non_null(strstr(d.msg, "replicas"));
    at[12] = '2';
    ss_diag_init(&d);

    /* the same file for another topology is refused; without a machine it loads */
    ss_machine *m2 = NULL;
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/p100x16.json"), 2, &m2, &d),
                     SS_OK);
    p = NULL;
    assert_int_equal(ss_plan_load_string(json, "mini", f->mlp, m2, &p, &d), SS_ERR_INVALID);
    assert_null(p);
    assert_non_null(strstr(d.msg, "plan mini was made for topology p100x16"));
    ss_machine_free(m2);
    ss_diag_init(&d);
    /* without a machine the device count is unknown: only the model is checked */
    assert_int_equal(ss_plan_load_string(json, "mini", f->mlp, NULL, &p, &d), SS_OK);
    assert_int_equal(ss_plan_config(p, ss_graph_find_op(f->mlp, "fc1"))->devices[1], 5);
    ss_plan_free(p);
    /* another model is refused */
    p = NULL;
    assert_int_equal(ss_plan_load_string(json, "mini", f->gpt, f->m, &p, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "plan mini was made for model mlp (fingerprint"));
    assert_non_null(strstr(d.msg, "not for gpt"));
}

/* text with the value 3 of "distopt" at `at` replaced by val (malloc'd). */
static char *with_distopt(const char *text, const char *at, const char *val)
{
    size_t pre = (size_t)(at - text) + 11, n = strlen(text) + strlen(val) + 1;
    char *t = malloc(n);
    assert_non_null(t);
    snprintf(t, n, "%.*s%s%s", (int)pre, text, val, at + 12);
    return t;
}

/* ZeRO-3 (settings.distopt 3) is written as "distopt": 3 and loads back;
 * older files' "distopt": true still load as ZeRO-1; 2, 4 and strings are
 * refused, naming the key. */
static void test_zero3_settings(void **state)
{
    fixture *f = *state;
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = NULL, *q = NULL;
    if (ss_plan_from_spec("megatron:tp=2,pp=1,dp=4,zero=3", f->gpt, f->m, &p, &d))
        fail_msg("%s", d.msg);
    assert_int_equal(ss_plan_settings_get(p)->distopt, SS_ZERO3);
    char *text = NULL;
    assert_int_equal(ss_plan_to_string(p, f->gpt, &text, &d), SS_OK);
    char *at = strstr(text, "\"distopt\": 3");
    assert_non_null(at);
    if (ss_plan_load_string(text, "z3", f->gpt, f->m, &q, &d))
        fail_msg("%s", d.msg);
    assert_plans_equal(p, q);
    ss_plan_free(q);
    static const char *const as[] = {"true", "1", "0"};
    static const int want[] = {1, 1, 0};
    for (int i = 0; i < 3; i++) {
        char *t2 = with_distopt(text, at, as[i]);
        q = NULL;
        if (ss_plan_load_string(t2, "z3", f->gpt, f->m, &q, &d))
            fail_msg("%s: %s", as[i], d.msg);
        assert_int_equal(ss_plan_settings_get(q)->distopt, want[i]);
        ss_plan_free(q);
        free(t2);
    }
    static const char *const bad[] = {"2", "4", "\"3\""};
    for (int i = 0; i < 3; i++) {
        char *t2 = with_distopt(text, at, bad[i]);
        q = NULL;
        ss_diag_init(&d);
        assert_int_not_equal(ss_plan_load_string(t2, "z3", f->gpt, f->m, &q, &d), SS_OK);
        assert_null(q);
        if (!strstr(d.msg, "distopt"))
            fail_msg("%s: %s", bad[i], d.msg);
        free(t2);
    }
    ss_free(text);
    ss_plan_free(p);
}

/* Each bad fixture fails through the library too, with its .expect text. */
static void test_bad_fixtures(void **state)
{
    fixture *f = *state;
    static const char *names[] = {
        "degree_not_divide", "device_out_of_range", "tile_count_mismatch", "unknown_operator",
        "wrong_model", "wrong_topology", "reduction_no_contraction", "reduction_not_divide",
        "unknown_key", "missing_operator", "bad_schedule", "stage_out_of_range",
        "stage_backwards", "wrong_format", "degrees_count", "zero_microbatches", "degree_type",
        "fingerprint_format", "syntax_error"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char rel[128], want[256] = "";
        snprintf(rel, sizeof rel, "tests/data/bad/plan_%s.expect", names[i]);
        FILE *e = fopen(ss_test_path(rel), "r");
        assert_non_null(e);
        assert_non_null(fgets(want, sizeof want, e));
        fclose(e);
        want[strcspn(want, "\n")] = '\0';
        snprintf(rel, sizeof rel, "tests/data/bad/plan_%s.json", names[i]);
        char path[4096];
        snprintf(path, sizeof path, "%s", ss_test_path(rel));
        ss_diag d;
        ss_diag_init(&d);
        ss_plan *p = NULL;
        ss_status st = ss_plan_load(path, f->mlp, f->m, &p, &d);
        assert_null(p);
        if (st != SS_ERR_INVALID && st != SS_ERR_PARSE)
            fail_msg("%s: status %s", names[i], ss_status_name(st));
        if (!strstr(d.msg, want) || !strstr(d.msg, path))
            fail_msg("%s: message '%s' lacks '%s' or the path", names[i], d.msg, want);
    }
}

static void test_io_alloc_failures(void **state)
{
    fixture *f = *state;
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_from_spec("megatron:tp=2,pp=2,dp=1", f->gpt, f->m, &p, &d), SS_OK);
    char *text = NULL;
    assert_int_equal(ss_plan_to_string(p, f->gpt, &text, &d), SS_OK);
    int saved = 0, loaded = 0;
    for (long n = 0; n < 5000 && !(saved && loaded); n++) {
        char *s = NULL;
        ss_plan *q = NULL;
        ss_diag_init(&d);
        ss_test_fail_after(n);
        ss_status a = saved ? SS_OK : ss_plan_to_string(p, f->gpt, &s, &d);
        ss_status b = loaded ? SS_OK : ss_plan_load_string(text, "x", f->gpt, f->m, &q, &d);
        ss_test_fail_after(-1);
        if (!saved && a == SS_OK) {
            assert_string_equal(s, text);
            saved = 1;
        } else if (!saved) {
            assert_int_equal(a, SS_ERR_NOMEM);
        }
        if (!loaded && b == SS_OK) {
            assert_plans_equal(p, q);
            loaded = 1;
        } else if (!loaded) {
            assert_true(b == SS_ERR_NOMEM || b == SS_ERR_PARSE);
            assert_null(q);
        }
        ss_free(s);
        ss_plan_free(q);
    }
    assert_true(saved && loaded);
    ss_free(text);
    ss_plan_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip_dp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip_megatron, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zero3_settings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recompute_per_stage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fixtures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_minimal_and_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_fixtures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_io_alloc_failures, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
