/*
 * test_trace.c — the Chrome trace parses as JSON and holds exactly the
 * expected events: metadata naming processes and threads, one "X" event per
 * (task, resource), times from the schedule, names from the namer.
 */
#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/machine_impl.h"
#include "simulator/engine.h"
#include "simulator/trace.h"

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ss_trace_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char p[300];
    snprintf(p, sizeof p, "%s/t.json", tmpdir);
    unlink(p);
    rmdir(tmpdir);
    return 0;
}

/* Two GPUs on a switch: link 0 gpu0-sw0, link 1 gpu1-sw0 (channels 0: gpu0->sw0,
 * 1: sw0->gpu0, 2: gpu1->sw0, 3: sw0->gpu1). */
static ss_machine *pair(void)
{
    ss_machine *m = ss_machine_alloc(1, 1, 2, 3, 2);
    strcpy(m->name, "pair");
    strcpy(m->types[0].name, "T");
    strcpy(m->hosts[0].name, "host0");
    for (int i = 0; i < 3; i++) {
        snprintf(m->nodes[i].name, SS_NAME_MAX, i < 2 ? "gpu%d" : "sw0", i);
        m->nodes[i].kind = i < 2 ? SS_NODE_DEVICE : SS_NODE_SWITCH;
        if (i < 2) {
            snprintf(m->devices[i].name, SS_NAME_MAX, "gpu%d", i);
            m->devices[i].host = 0;
        }
    }
    for (int l = 0; l < 2; l++) {
        m->links[l].a = l;
        m->links[l].b = 2;
        m->links[l].gbps_ab = m->links[l].gbps_ba = 10;
        m->links[l].latency_us = 1;
        strcpy(m->links[l].kind, "nvlink");
    }
    ss_diag d = {0};
    if (ss_machine_finish(m, "pair", &d))
        fail_msg("%s", d.msg);
    return m;
}

static void namer(void *ctx, const ss_taskgraph *tg, int t, char *buf, size_t n)
{
    snprintf(buf, n, "%s \"layer%d\"", (const char *)ctx, tg->op[t]);
}

/* Graph: A fwd on gpu0 (op 1, 0..10), X transfer gpu0 -> gpu1 over
 * channels 0 and 3 (resources 2 and 5), 10..30, 4096 bytes, B fwd on gpu1
 * (op 2, 30..35), J a join with no resources (not drawn).
 * Events: 4 "X" (A, X twice, B); metadata: per device process_name,
 * thread_name, sort index (3 x 2) + thread names of the 2 used channels. */
static void test_trace_events(void **state)
{
    (void)state;
    ss_machine *m = pair();
    ss_taskgraph *tg = ss_taskgraph_new(2, 4);
    ss_diag d = {0};
    assert_int_equal(ss_taskgraph_map_machine(tg, m, &d), SS_OK);
    int a = ss_taskgraph_add1(tg, SS_TASK_FWD, 0, 10, 0, 1, 0, 0, &d);
    int res[2] = {2, 5};
    ss_task_spec xs = {SS_TASK_XFER, 20, 0, 1, 0, 0, 0, 4096, 2, res};
    int x = ss_taskgraph_add(tg, &xs, &d);
    int b = ss_taskgraph_add1(tg, SS_TASK_FWD, 1, 5, 0, 2, 0, 0, &d);
    ss_task_spec js = {SS_TASK_OTHER, 0, 0, -1, -1, -1, 0, 0, 0, NULL};
    int j = ss_taskgraph_add(tg, &js, &d);
    ss_taskgraph_add_dep(tg, a, x, &d);
    ss_taskgraph_add_dep(tg, x, b, &d);
    ss_taskgraph_add_dep(tg, b, j, &d);
    ss_taskgraph_finalize(tg, &d);
    ss_engine *e = ss_engine_new();
    assert_int_equal(ss_engine_run(e, tg, NULL, &d), SS_OK);
    const ss_engine_result *r = ss_engine_result_of(e);
    assert_true(r->makespan == 35);
    /* comm breakdown from the machine's channel ends: channel 0 starts at
     * gpu0, channel 3 ends at gpu1; both busy 10..30 */
    assert_true(r->comm_us[0] == 20 && r->comm_us[1] == 20);

    char path[300];
    snprintf(path, sizeof path, "%s/t.json", tmpdir);
    ss_trace_opts o = {m, namer, "fwd", 0, NULL, NULL, NULL};
    assert_int_equal(ss_trace_write(path, tg, r, &o, &d), SS_OK);

    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root)
        fail_msg("trace does not parse: %s:%d: %s", path, jerr.line, jerr.text);
    json_t *ev = json_object_get(root, "traceEvents");
    assert_true(json_is_array(ev));
    int nx = 0, nm = 0, on_ch0 = 0, on_ch3 = 0;
    int saw_proc = 0, saw_link0 = 0, saw_link3 = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *o2 = json_array_get(ev, i);
        const char *ph = json_string_value(json_object_get(o2, "ph"));
        int pid = (int)json_integer_value(json_object_get(o2, "pid"));
        int tid = (int)json_integer_value(json_object_get(o2, "tid"));
        const char *nm_ = json_string_value(json_object_get(o2, "name"));
        if (strcmp(ph, "M") == 0) {
            nm++;
            json_t *args = json_object_get(o2, "args");
            const char *an = json_string_value(json_object_get(args, "name"));
            if (!strcmp(nm_, "process_name") && pid == 1 && !strcmp(an, "gpu1 (host0)"))
                saw_proc = 1;
            if (!strcmp(nm_, "thread_name") && pid == 0 && tid == 1 &&
                !strcmp(an, "link nvlink gpu0->sw0"))
                saw_link0 = 1;
            if (!strcmp(nm_, "thread_name") && pid == 1 && tid == 4 &&
                !strcmp(an, "link nvlink sw0->gpu1"))
                saw_link3 = 1;
            continue;
        }
        assert_string_equal(ph, "X");
        nx++;
        json_t *args = json_object_get(o2, "args");
        int task = (int)json_integer_value(json_object_get(args, "task"));
        double ts = json_number_value(json_object_get(o2, "ts"));
        double dur = json_number_value(json_object_get(o2, "dur"));
        assert_true(ts == r->start[task] && dur == r->end[task] - r->start[task]);
        if (task == x) {
            assert_string_equal(nm_, "fwd \"layer1\"");
            assert_true(json_number_value(json_object_get(args, "bytes")) == 4096);
            assert_string_equal(json_string_value(json_object_get(o2, "cat")), "xfer");
            if (pid == 0 && tid == 1)
                on_ch0 = 1;
            if (pid == 1 && tid == 4)
                on_ch3 = 1;
        }
        if (task == b) {
            assert_int_equal(pid, 1);
            assert_int_equal(tid, 0);
            assert_true(ts == 30 && dur == 5);
            assert_int_equal(json_integer_value(json_object_get(args, "op")), 2);
        }
        assert_int_not_equal(task, j);
    }
    assert_int_equal(nx, 4);
    assert_int_equal(nm, 2 * 3 + 2);
    assert_true(on_ch0 && on_ch3);
    assert_true(saw_proc && saw_link0 && saw_link3);
    json_decref(root);

    /* default names, no machine: "fwd op1 tile0 mb0", "device0", "channel 0" */
    assert_int_equal(ss_trace_write(path, tg, r, NULL, &d), SS_OK);
    root = json_load_file(path, 0, &jerr);
    assert_non_null(root);
    ev = json_object_get(root, "traceEvents");
    int found = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *o2 = json_array_get(ev, i);
        const char *nm_ = json_string_value(json_object_get(o2, "name"));
        json_t *args = json_object_get(o2, "args");
        if (!strcmp(nm_, "fwd op1 tile0 mb0"))
            found |= 1;
        if (!strcmp(nm_, "process_name") &&
            !strcmp(json_string_value(json_object_get(args, "name")), "device0"))
            found |= 2;
        if (!strcmp(nm_, "thread_name") &&
            !strcmp(json_string_value(json_object_get(args, "name")), "channel 3"))
            found |= 4;
    }
    assert_int_equal(found, 7);
    json_decref(root);

    /* errors: unwritable path names the path; mismatched machine */
    ss_diag_init(&d);
    assert_int_equal(ss_trace_write("/nonexistent-dir/x.json", tg, r, NULL, &d), SS_ERR_IO);
    assert_non_null(strstr(d.msg, "/nonexistent-dir/x.json"));
    ss_taskgraph *small = ss_taskgraph_new(1, 0);
    ss_taskgraph_finalize(small, &d);
    ss_engine *e2 = ss_engine_new();
    assert_int_equal(ss_engine_run(e2, small, NULL, &d), SS_OK);
    ss_diag_init(&d);
    ss_trace_opts om = {m, NULL, NULL, 0, NULL, NULL, NULL};
    assert_int_equal(ss_trace_write(path, small, ss_engine_result_of(e2), &om, &d), SS_ERR_INVALID);
    ss_diag_init(&d);
    assert_int_equal(ss_trace_write(path, tg, ss_engine_result_of(e2), NULL, &d), SS_ERR_INVALID);
    /* NOMEM leaves no file behind */
    unlink(path);
    ss_test_fail_after(0);
    ss_diag_init(&d);
    assert_int_equal(ss_trace_write(path, tg, r, NULL, &d), SS_ERR_NOMEM);
    ss_test_fail_after(-1);
    assert_int_not_equal(access(path, F_OK), 0);

    ss_engine_free(e2);
    ss_taskgraph_free(small);
    ss_engine_free(e);
    ss_taskgraph_free(tg);
    ss_machine_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_trace_events, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
