/*
 * test_whatif.c — what-if sweeps (search/whatif.h): every point equals the
 * planner run directly (ss_search_run, one thread, same seed/level/budget)
 * on a machine built independently from the changes the scenario states
 * (device type swapped, NIC 400 Gb/s with its PCIe path scaled); 1 and 2
 * threads give the same points; a point where nothing fits is reported with
 * its shortfall, not dropped; days and cost follow from tokens/s; a stop
 * before the first point keeps nothing and says so; CSV has the documented
 * header and one row per point; the JSON parses with the axes and points;
 * device-type names by prefix; scenario files; and the refusals (explicit
 * topology, unknown device type, a price that matches no device type).
 */
#include "testutil.h"
#include "search/whatif.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODEL "gpt:layers=4,hidden=512,heads=8,seq=512"
#define BATCH 32

static ss_whatif_scenario scen[2];

static void scenarios(void)
{
    memset(scen, 0, sizeof scen);
    snprintf(scen[1].device_type, sizeof scen[1].device_type, "H100-SXM");
    scen[1].inter_gbps = 400;
    scen[0].batch = scen[1].batch = BATCH;
}

static ss_whatif_config config(const int *nodes, int n_nodes)
{
    ss_whatif_config c;
    memset(&c, 0, sizeof c);
    c.model = MODEL;
    c.topology = ss_test_path("topologies/dgx-a100.json");
    c.nodes = nodes;
    c.n_nodes = n_nodes;
    c.scenarios = scen;
    c.n_scenarios = 2;
    c.level = SS_SEARCH_LEVEL(0);
    c.seed = 3;
    c.threads = 1;
    return c;
}

/* The planner on the compact topology written out here by hand. */
static void direct(const char *devtype, double nic, double pcie, int nodes, double *iter_us,
                   char *plan, size_t cap)
{
    char json[1024];
    snprintf(json, sizeof json,
             "{\"format\": \"simsearch-topology\", \"version\": 1, \"name\": \"dgx-a100\","
             " \"compact\": {\"nodes\": %d, \"devices_per_node\": 8, \"device_type\": \"%s\","
             " \"intra\": {\"kind\": \"nvswitch\", \"gbps\": 300.0, \"latency_us\": 1.0,"
             " \"coll_eff\": 0.8, \"coll_half_bytes\": 4e6},"
             " \"inter\": {\"kind\": \"infiniband\", \"gbps\": %g, \"latency_us\": 1.0,"
             " \"nics_per_node\": 8, \"pcie_gbps\": %g, \"pcie_latency_us\": 2.0,"
             " \"coll_eff\": 0.6, \"coll_half_bytes\": 4e6}}}",
             nodes, devtype, nic, pcie);
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    assert_int_equal(ss_machine_load_string(json, "hand", &m, &d), SS_OK);
    assert_int_equal(ss_model_build(MODEL, BATCH, ss_machine_n_devices(m), &g, &d), SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    ss_search_config sc;
    memset(&sc, 0, sizeof sc);
    sc.level = SS_SEARCH_LEVEL(0);
    sc.seed = 3;
    sc.threads = 1;
    sc.no_sync_tuning = 1; /* as the sweep plans its points */
    ss_search_result r;
    memset(&r, 0, sizeof r);
    assert_int_equal(ss_search_run(g, m, cm, &sc, &r, &d), SS_OK);
    *iter_us = r.best_sim.iteration_us;
    snprintf(plan, cap, "%s", r.best_label);
    ss_search_result_clear(&r);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
}

static void test_points_equal_direct_runs(void **state)
{
    (void)state;
    scenarios();
    const int nodes[2] = {1, 2};
    ss_whatif_config c = config(nodes, 2);
    ss_whatif_result r;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_whatif_run(&c, &r, &d), SS_OK);
    assert_int_equal(r.n_points, 4);
    assert_int_equal(r.n_done, 4);
    assert_false(r.interrupted);
    for (int i = 0; i < 4; i++) {
        const ss_whatif_point *p = &r.points[i];
        int h100 = i >= 2;
        assert_int_equal(p->scenario, i / 2);
        assert_int_equal(p->nodes, nodes[i % 2]);
        assert_int_equal(p->gpus, 8 * nodes[i % 2]);
        assert_int_equal(p->state, SS_WHATIF_FITS);
        assert_string_equal(p->device_type, h100 ? "H100-SXM" : "A100-SXM4-80GB");
        assert_true(fabs(p->inter_GBps - (h100 ? 50 : 25)) < 1e-9);
        assert_true(fabs(p->pcie_GBps - (h100 ? 63 : 31.5)) < 1e-9);
        assert_int_equal(p->batch, BATCH);
        if (h100) {
            assert_non_null(strstr(p->changes, "A100-SXM4-80GB -> H100-SXM"));
            assert_non_null(strstr(p->changes, "PCIe path 31.5 -> 63"));
        }
        double us;
        char plan[256];
        direct(h100 ? "H100-SXM" : "A100-SXM4-80GB", h100 ? 50 : 25, h100 ? 63 : 31.5,
               nodes[i % 2], &us, plan, sizeof plan);
        assert_true(p->iteration_ms == us / 1000);
        assert_string_equal(p->plan, plan);
        assert_true(p->tp * p->pp * p->dp == p->gpus);
        assert_true(p->mfu > 0 && p->mfu < 1);
        assert_true(p->tokens_per_s > 0 && p->peak_mem_bytes > 0);
        assert_true(p->peak_mem_bytes <= p->mem_capacity_bytes);
    }
    /* the H100 computes faster than the A100 at the same node count */
    assert_true(r.points[2].iteration_ms < r.points[0].iteration_ms);
    ss_whatif_result_clear(&r);
}

static void test_threads_same_points(void **state)
{
    (void)state;
    scenarios();
    const int nodes[2] = {1, 2};
    ss_whatif_config c = config(nodes, 2);
    ss_whatif_result a, b;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_whatif_run(&c, &a, &d), SS_OK);
    c.threads = 2;
    assert_int_equal(ss_whatif_run(&c, &b, &d), SS_OK);
    assert_int_equal(b.threads, 2);
    for (int i = 0; i < a.n_points; i++) {
        assert_true(a.points[i].iteration_ms == b.points[i].iteration_ms);
        assert_string_equal(a.points[i].plan, b.points[i].plan);
        assert_true(a.points[i].peak_mem_bytes == b.points[i].peak_mem_bytes);
    }
    ss_whatif_result_clear(&a);
    ss_whatif_result_clear(&b);
}

/* A 51B-parameter GPT on one node: its weights and Adam state (~820 GB)
 * cannot fit in 8 x 80 GiB; the point says by how much. */
static void test_no_fit_reported(void **state)
{
    (void)state;
    ss_whatif_scenario one;
    memset(&one, 0, sizeof one);
    one.batch = 8;
    const int nodes[1] = {1};
    ss_whatif_config c = config(nodes, 1);
    c.model = "gpt:layers=16,hidden=16384,heads=128,seq=512";
    c.budget = 10;
    c.scenarios = &one;
    c.n_scenarios = 1;
    ss_whatif_result r;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_whatif_run(&c, &r, &d), SS_OK);
    assert_int_equal(r.n_points, 1);
    assert_int_equal(r.points[0].state, SS_WHATIF_NO_FIT);
    assert_true(r.points[0].shortfall_bytes > 0);
    assert_int_equal(r.n_done, 1);
    ss_whatif_result_clear(&r);
}

static void test_days_and_cost(void **state)
{
    (void)state;
    scenarios();
    const int nodes[1] = {1};
    ss_whatif_config c = config(nodes, 1);
    ss_whatif_price pr[2] = {{"A100", 2.0}, {"H100-SXM", 4.0}};
    c.tokens = 1e9;
    c.prices = pr;
    c.n_prices = 2;
    ss_whatif_result r;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_whatif_run(&c, &r, &d), SS_OK);
    for (int i = 0; i < 2; i++) {
        const ss_whatif_point *p = &r.points[i];
        double usd = i ? 4.0 : 2.0;
        assert_true(fabs(p->days - 1e9 / p->tokens_per_s / 86400) < 1e-9 * p->days);
        assert_true(p->usd_per_gpu_hour == usd);
        assert_true(fabs(p->cost_usd - p->days * 24 * 8 * usd) < 1e-6 * p->cost_usd);
    }
    ss_whatif_result_clear(&r);
    /* a price that names no device type of the sweep */
    ss_whatif_price bad = {"B200", 5.0};
    c.prices = &bad;
    c.n_prices = 1;
    ss_diag_init(&d);
    assert_int_equal(ss_whatif_run(&c, &r, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "B200"));
    assert_null(r.points);
}

static int stop_now(void *ctx)
{
    (void)ctx;
    return 1;
}

static void test_stop_keeps_nothing_unfinished(void **state)
{
    (void)state;
    scenarios();
    const int nodes[2] = {1, 2};
    ss_whatif_config c = config(nodes, 2);
    c.stop = stop_now;
    ss_whatif_result r;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_whatif_run(&c, &r, &d), SS_OK);
    assert_true(r.interrupted);
    assert_int_equal(r.n_done, 0);
    for (int i = 0; i < r.n_points; i++)
        assert_int_equal(r.points[i].state, SS_WHATIF_NOT_RUN);
    ss_whatif_result_clear(&r);
}

static void test_csv_and_json(void **state)
{
    (void)state;
    scenarios();
    const int nodes[1] = {1};
    ss_whatif_config c = config(nodes, 1);
    ss_whatif_result r;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_whatif_run(&c, &r, &d), SS_OK);
    char path[256];
    snprintf(path, sizeof path, "/tmp/ss_test_whatif.%d.csv", (int)getpid());
    assert_int_equal(ss_whatif_write_csv(&c, &r, path, &d), SS_OK);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    assert_non_null(fgets(line, sizeof line, f));
    line[strcspn(line, "\n")] = 0;
    assert_string_equal(line, ss_whatif_csv_columns);
    int rows = 0, commas_head = 0;
    for (const char *s = ss_whatif_csv_columns; *s; s++)
        commas_head += *s == ',';
    while (fgets(line, sizeof line, f)) {
        rows++;
        int commas = 0, quoted = 0;
        for (const char *s = line; *s; s++) {
            if (*s == '"')
                quoted = !quoted;
            commas += *s == ',' && !quoted;
        }
        assert_int_equal(commas, commas_head);
        assert_non_null(strstr(line, ",fits,"));
    }
    fclose(f);
    unlink(path);
    assert_int_equal(rows, 2);
    char *js = NULL;
    assert_int_equal(ss_whatif_to_json(&c, &r, &js, &d), SS_OK);
    json_error_t e;
    json_t *root = json_loads(js, 0, &e);
    assert_non_null(root);
    assert_string_equal(json_string_value(json_object_get(root, "format")), "simsearch-whatif");
    json_t *pts = json_object_get(root, "points");
    assert_int_equal(json_array_size(pts), 2);
    json_t *p1 = json_array_get(pts, 1);
    assert_string_equal(json_string_value(json_object_get(p1, "device_type")), "H100-SXM");
    assert_true(json_number_value(json_object_get(p1, "inter_gbit_per_s")) == 400);
    assert_true(json_is_number(json_object_get(p1, "mfu")));
    assert_int_equal(json_array_size(json_object_get(json_object_get(root, "axes"), "scenarios")),
                     2);
    json_decref(root);
    ss_free(js);
    ss_whatif_result_clear(&r);
}

static void test_devtype_names(void **state)
{
    (void)state;
    int n = 0;
    const ss_device_type *t = ss_whatif_find_devtype("H100", &n);
    assert_non_null(t);
    assert_string_equal(t->name, "H100-SXM");
    assert_null(ss_whatif_find_devtype("A100", &n));
    assert_int_equal(n, 2);
    assert_null(ss_whatif_find_devtype("Z9000", &n));
    assert_int_equal(n, 0);
    t = ss_whatif_find_devtype("a100-sxm4-80", &n);
    assert_non_null(t);
    assert_string_equal(t->name, "A100-SXM4-80GB");
}

static void test_refusals(void **state)
{
    (void)state;
    scenarios();
    const int nodes[1] = {1};
    ss_whatif_config c = config(nodes, 1);
    ss_whatif_result r;
    ss_diag d;
    ss_diag_init(&d);
    c.topology = ss_test_path("topologies/local-cpu.json");
    assert_int_equal(ss_whatif_run(&c, &r, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "compact"));
    c = config(nodes, 1);
    snprintf(scen[1].device_type, sizeof scen[1].device_type, "TPU-v9");
    ss_diag_init(&d);
    assert_int_equal(ss_whatif_run(&c, &r, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "TPU-v9"));
    scenarios();
    c.topology = "/nonexistent/topo.json";
    ss_diag_init(&d);
    assert_int_not_equal(ss_whatif_run(&c, &r, &d), SS_OK);
    assert_non_null(strstr(d.msg, "/nonexistent/topo.json"));
}

static void test_scenario_file(void **state)
{
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "/tmp/ss_test_whatif.%d.json", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"format\": \"simsearch-whatif-scenarios\", \"version\": 1, \"scenarios\": ["
          "{\"name\": \"NDR H100\", \"device_type\": \"H100\", \"inter_gbps\": 400},"
          "{\"precision\": \"fp8\", \"batch\": 64}]}",
          f);
    fclose(f);
    ss_whatif_scenario *s = NULL;
    int n = 0;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_whatif_load_scenarios(path, &s, &n, &d), SS_OK);
    assert_int_equal(n, 2);
    assert_string_equal(s[0].name, "NDR H100");
    assert_string_equal(s[0].device_type, "H100-SXM");
    assert_true(s[0].inter_gbps == 400);
    assert_string_equal(s[1].precision, "fp8");
    assert_int_equal(s[1].batch, 64);
    ss_free(s);
    f = fopen(path, "w");
    fputs("{\"format\": \"simsearch-whatif-scenarios\", \"version\": 1, \"scenarios\": ["
          "{\"inter_gbps\": 400, \"inter_scale\": 2}]}",
          f);
    fclose(f);
    ss_diag_init(&d);
    assert_int_equal(ss_whatif_load_scenarios(path, &s, &n, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "$.scenarios[0]"));
    f = fopen(path, "w");
    fputs("{\"format\": \"simsearch-whatif-scenarios\", \"version\": 1, \"scenarios\": ["
          "{\"gpus\": 4}]}",
          f);
    fclose(f);
    ss_diag_init(&d);
    assert_int_not_equal(ss_whatif_load_scenarios(path, &s, &n, &d), SS_OK);
    assert_non_null(strstr(d.msg, "gpus"));
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_points_equal_direct_runs),
        cmocka_unit_test(test_threads_same_points),
        cmocka_unit_test(test_no_fit_reported),
        cmocka_unit_test(test_days_and_cost),
        cmocka_unit_test(test_stop_keeps_nothing_unfinished),
        cmocka_unit_test(test_csv_and_json),
        cmocka_unit_test(test_devtype_names),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_scenario_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
