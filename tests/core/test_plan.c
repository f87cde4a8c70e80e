/*
 * test_plan.c — the ss_plan object (core/plan.c): tiling of an op under a
 * config, set/copy/clone, device lists shared through the plan's pool
 * (equal lists stored once, a change makes a new list, the plan's memory
 * grows with distinct lists only), validation of every error kind, and
 * allocation failures.
 */
#include "testutil.h"

#include "core/plan_impl.h"

#include <stdlib.h>
#include <string.h>

/* 4 P100s on one node. */
static const char *TOPO4 =
    "{\"format\": \"simsearch-topology\", \"version\": 1, \"name\": \"four\","
    " \"compact\": {\"nodes\": 1, \"devices_per_node\": 4, \"device_type\": \"P100-SXM2\","
    " \"intra\": {\"kind\": \"nvlink\", \"topology\": \"all-to-all\", \"gbps\": 20, \"latency_us\": 1},"
    " \"inter\": {\"kind\": \"infiniband\", \"gbps\": 12.5, \"latency_us\": 1, \"nics_per_node\": 1}}}";

typedef struct fixture {
    ss_graph *g;
    ss_machine *m;
    int x, fc1, ln, relu, fc2, labels, loss;
} fixture;

/* x[8,16] -> fc1 (16->12) -> ln -> relu -> fc2 (12->4) -> loss(labels[8]) */
static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    ss_diag d;
    ss_diag_init(&d);
    f->g = ss_graph_new("tiny");
    assert_non_null(f->g);
    ss_op_attrs a = {0};
    a.ndim = 2;
    a.shape[0] = 8;
    a.shape[1] = 16;
    a.kind[0] = SS_DIM_SAMPLE;
    a.kind[1] = SS_DIM_PARAMETER;
    a.dtype = SS_F32;
    f->x = ss_graph_add(f->g, "x", SS_OP_INPUT, &a, 0, NULL, &d);
    ss_op_attrs l = {0};
    l.ndim = 1;
    l.shape[0] = 8;
    l.kind[0] = SS_DIM_SAMPLE;
    l.dtype = SS_I32;
    f->labels = ss_graph_add(f->g, "labels", SS_OP_INPUT, &l, 0, NULL, &d);
    ss_op_attrs lin = {0};
    lin.out_features = 12;
    lin.use_bias = 1;
    int in = ss_graph_out(f->g, f->x);
    f->fc1 = ss_graph_add(f->g, "fc1", SS_OP_LINEAR, &lin, 1, &in, &d);
    ss_op_attrs none = {0};
    in = ss_graph_out(f->g, f->fc1);
    f->ln = ss_graph_add(f->g, "ln", SS_OP_LAYERNORM, &none, 1, &in, &d);
    in = ss_graph_out(f->g, f->ln);
    f->relu = ss_graph_add(f->g, "relu", SS_OP_UNARY, &none, 1, &in, &d);
    lin.out_features = 4;
    in = ss_graph_out(f->g, f->relu);
    f->fc2 = ss_graph_add(f->g, "fc2", SS_OP_LINEAR, &lin, 1, &in, &d);
    int ce[2] = {ss_graph_out(f->g, f->fc2), ss_graph_out(f->g, f->labels)};
    f->loss = ss_graph_add(f->g, "loss", SS_OP_SOFTMAX_CE, &none, 2, ce, &d);
    assert_int_equal(d.status, SS_OK);
    assert_true(f->loss > 0);
    ss_graph_set_training(f->g, 8, SS_OPT_SGD, SS_PREC_FP32);
    assert_int_equal(ss_machine_load_string(TOPO4, "four", &f->m, &d), SS_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ss_graph_free(f->g);
    ss_machine_free(f->m);
    free(f);
    ss_test_fail_after(-1);
    return 0;
}

static ss_pconfig cfg2(int d0, int d1, int red, int *devs)
{
    ss_pconfig c;
    memset(&c, 0, sizeof c);
    c.ndim = 2;
    for (int k = 0; k < SS_MAX_DIMS; k++)
        c.deg[k] = 1;
    c.deg[0] = d0;
    c.deg[1] = d1;
    c.red = red;
    c.rep = 1;
    c.ntiles = d0 * d1 * red;
    c.devices = devs;
    return c;
}

static void test_new_defaults(void **state)
{
    fixture *f = *state;
    ss_plan *p = ss_plan_new(f->g, f->m);
    assert_non_null(p);
    assert_int_equal(ss_plan_n_ops(p), ss_graph_n_ops(f->g));
    for (int i = 0; i < ss_plan_n_ops(p); i++) {
        const ss_pconfig *c = ss_plan_config(p, i);
        assert_int_equal(c->ntiles, 1);
        assert_int_equal(c->red, 1);
        assert_int_equal(c->devices[0], 0);
        assert_int_equal(c->stage, 0);
    }
    assert_int_equal(ss_plan_config(p, f->loss)->ndim, 1);
    assert_int_equal(ss_plan_config(p, f->fc1)->ndim, 2);
    assert_null(ss_plan_config(p, 99));
    const ss_plan_settings *s = ss_plan_settings_get(p);
    assert_int_equal(s->stages, 1);
    assert_int_equal(s->microbatches, 1);
    assert_true(ss_plan_model_fingerprint(p) == ss_graph_fingerprint(f->g));
    assert_true(ss_plan_topology_fingerprint(p) == ss_machine_fingerprint(f->m));
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_plan_validate(p, f->g, f->m, &d), SS_OK);
    ss_plan_free(p);
    ss_plan_free(NULL);
}

/* Index order is row-major over (dims..., red); ranges are lo = i*ext/deg. */
/* Same tiles: degrees, reduction and device list compared, stage not. */
static void test_same_tiles(void **state)
{
    (void)state;
    int da[4] = {0, 1, 2, 3}, db[4] = {0, 1, 2, 3};
    ss_pconfig a = {2, {2, 2}, 1, 1, 4, da, 0}, b = {2, {2, 2}, 1, 1, 4, db, 1};
    assert_true(ss_pconfig_same_tiles(&a, &b)); /* another stage, same tiles */
    db[3] = 5;
    assert_false(ss_pconfig_same_tiles(&a, &b));
    db[3] = 3;
    b.deg[0] = 4;
    b.deg[1] = 1;
    assert_false(ss_pconfig_same_tiles(&a, &b)); /* same tile count, other split */
    b.deg[0] = 2;
    b.deg[1] = 1;
    b.red = 2;
    assert_false(ss_pconfig_same_tiles(&a, &b)); /* a reduction instead */
    b.red = 1;
    b.deg[1] = 2;
    b.ntiles = 2;
    a.ntiles = 2;
    a.deg[1] = 1;
    assert_false(ss_pconfig_same_tiles(&a, &b));
}

/* Replicas: index = (dims * rep + q) * red + r; replicas of one tile share
 * its ranges, sit on distinct devices, and count in the tile total. */
static void test_replica_tiles(void **state)
{
    fixture *f = *state;
    const ss_op *op = ss_graph_op(f->g, f->fc1); /* out [8,12], contraction 16 */
    int devs[8] = {0, 1, 2, 3, 0, 1, 2, 3};
    ss_pconfig c = cfg2(2, 1, 2, devs);
    c.rep = 2;
    c.ntiles = 8;
    ss_tile t;
    /* index 6 = (i0*2 + q)*2 + r -> r = 0, q = 1, i0 = 1 */
    ss_pconfig_tile(f->g, op, &c, 6, &t);
    assert_int_equal(t.out.r[0].lo, 4);
    assert_int_equal(t.out.r[0].hi, 8);
    assert_int_equal(t.red.lo, 0);
    assert_int_equal(t.red.hi, 8);
    ss_tile u;
    ss_pconfig_tile(f->g, op, &c, 4, &u); /* the same tile, replica 0 */
    assert_memory_equal(&t, &u, sizeof t);
    ss_plan *p = ss_plan_new(f->g, f->m);
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_plan_set_config(p, f->fc1, &c, &d), SS_OK);
    assert_int_equal(ss_plan_config(p, f->fc1)->rep, 2);
    assert_int_equal(ss_plan_validate(p, f->g, f->m, &d), SS_OK);
    /* replicas 0 and 1 of tile (i0 = 0, r = 1) both on device 1 */
    devs[3] = 1;
    assert_int_equal(ss_plan_set_config(p, f->fc1, &c, &d), SS_OK);
    assert_int_equal(ss_plan_validate(p, f->g, f->m, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "replicas 0 and 1 of one tile are both on device 1"));
    /* the tile count must include the replicas */
    ss_diag_init(&d);
    c.ntiles = 4;
    assert_int_equal(ss_plan_set_config(p, f->fc1, &c, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "expected 8"));
    ss_diag_init(&d);
    c.rep = 0;
    assert_int_equal(ss_plan_set_config(p, f->fc1, &c, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "replica degree 0"));
    /* same_tiles compares the replica degree */
    int da[4] = {0, 1, 2, 3};
    ss_pconfig a = cfg2(2, 1, 2, da), b = cfg2(2, 2, 1, da);
    b.deg[1] = 1;
    b.rep = 2;
    assert_false(ss_pconfig_same_tiles(&a, &b));
    ss_plan_free(p);
}

static void test_tile_index_order(void **state)
{
    fixture *f = *state;
    const ss_op *op = ss_graph_op(f->g, f->fc1); /* out [8,12], contraction 16 */
    int devs[12] = {0};
    ss_pconfig c = cfg2(2, 3, 2, devs);
    ss_tile t;
    /* index 7 = ((i0*3)+i1)*2 + r  ->  r = 1, i1 = 0, i0 = 1 */
    ss_pconfig_tile(f->g, op, &c, 7, &t);
    assert_int_equal(t.out.r[0].lo, 4);
    assert_int_equal(t.out.r[0].hi, 8);
    assert_int_equal(t.out.r[1].lo, 0);
    assert_int_equal(t.out.r[1].hi, 4);
    assert_int_equal(t.red.lo, 8);
    assert_int_equal(t.red.hi, 16);
    /* index 4 -> r = 0, i1 = 2, i0 = 0 */
    ss_pconfig_tile(f->g, op, &c, 4, &t);
    assert_int_equal(t.out.r[0].lo, 0);
    assert_int_equal(t.out.r[0].hi, 4);
    assert_int_equal(t.out.r[1].lo, 8);
    assert_int_equal(t.out.r[1].hi, 12);
    assert_int_equal(t.red.lo, 0);
    assert_int_equal(t.red.hi, 8);
    /* uneven: 8 rows in 3 -> [0,2) [2,5) [5,8) */
    ss_pconfig u = cfg2(3, 1, 1, devs);
    int64_t want[4] = {0, 2, 5, 8};
    for (int i = 0; i < 3; i++) {
        ss_pconfig_tile(f->g, op, &u, i, &t);
        assert_int_equal(t.out.r[0].lo, want[i]);
        assert_int_equal(t.out.r[0].hi, want[i + 1]);
        assert_int_equal(t.red.lo, 0);
        assert_int_equal(t.red.hi, 16);
    }
}

/* Every output element is covered exactly `red` times, and each reduction
 * slice exactly once per output element. */
static void test_tiles_cover_output(void **state)
{
    fixture *f = *state;
    const ss_op *op = ss_graph_op(f->g, f->fc1);
    int devs[64] = {0};
    static const int shapes[][3] = {{2, 3, 2}, {4, 1, 1}, {1, 4, 4}, {8, 2, 1}, {3, 5, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        ss_pconfig c = cfg2(shapes[s][0], shapes[s][1], shapes[s][2], devs);
        int cover[8][12][16];
        memset(cover, 0, sizeof cover);
        for (int i = 0; i < c.ntiles; i++) {
            ss_tile t;
            ss_pconfig_tile(f->g, op, &c, i, &t);
            assert_int_equal(t.out.ndim, 2);
            for (int64_t a = t.out.r[0].lo; a < t.out.r[0].hi; a++)
                for (int64_t b = t.out.r[1].lo; b < t.out.r[1].hi; b++)
                    for (int64_t r = t.red.lo; r < t.red.hi; r++)
                        cover[a][b][r]++;
        }
        for (int a = 0; a < 8; a++)
            for (int b = 0; b < 12; b++)
                for (int r = 0; r < 16; r++)
                    assert_int_equal(cover[a][b][r], 1);
    }
}

static void test_set_copy_clone(void **state)
{
    fixture *f = *state;
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = ss_plan_new(f->g, f->m);
    int devs[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    ss_pconfig c = cfg2(4, 1, 2, devs);
    assert_int_equal(ss_plan_set_config(p, f->fc1, &c, &d), SS_OK);
    devs[0] = 3; /* copied, not borrowed */
    const ss_pconfig *got = ss_plan_config(p, f->fc1);
    assert_int_equal(got->ntiles, 8);
    assert_int_equal(got->red, 2);
    assert_int_equal(got->devices[0], 0);
    assert_int_equal(got->devices[7], 0);
    assert_int_equal(got->devices[4], 3);

    ss_plan *q = ss_plan_clone(p);
    assert_non_null(q);
    assert_int_equal(ss_plan_config(q, f->fc1)->ntiles, 8);
    assert_int_equal(ss_plan_config(q, f->fc1)->devices[4], 3);
    assert_true(ss_plan_config(q, f->fc1)->devices != got->devices);

    /* copy back after changing q: p's fc1 takes the list {2}, which p's
     * other ops (all on {0}) do not share */
    ss_pconfig one = cfg2(1, 1, 1, devs);
    devs[0] = 2;
    assert_int_equal(ss_plan_set_config(q, f->fc1, &one, &d), SS_OK);
    ss_plan_settings_of(q)->microbatches = 4;
    const int *before = ss_plan_config(p, f->fc1)->devices;
    assert_int_equal(ss_plan_copy(p, q), SS_OK);
    assert_ptr_not_equal(ss_plan_config(p, f->fc1)->devices, before);
    assert_ptr_not_equal(ss_plan_config(p, f->fc1)->devices, ss_plan_config(q, f->fc1)->devices);
    assert_int_not_equal(ss_plan_devlist_id(p, f->fc1), ss_plan_devlist_id(p, f->fc2));
    assert_int_equal(ss_plan_config(p, f->fc1)->ntiles, 1);
    assert_int_equal(ss_plan_config(p, f->fc1)->devices[0], 2);
    assert_int_equal(ss_plan_settings_get(p)->microbatches, 4);

    /* shape errors of set_config leave the config unchanged */
    ss_pconfig bad = cfg2(2, 1, 1, devs);
    bad.ntiles = 3;
    assert_int_equal(ss_plan_set_config(p, f->fc1, &bad, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "tile count 3"));
    assert_int_equal(ss_plan_config(p, f->fc1)->ntiles, 1);
    ss_diag_init(&d);
    bad = cfg2(2, 1, 1, devs);
    bad.ndim = 3;
    assert_int_equal(ss_plan_set_config(p, f->fc1, &bad, &d), SS_ERR_INVALID);
    ss_diag_init(&d);
    assert_int_equal(ss_plan_set_config(p, 1000, &one, &d), SS_ERR_INVALID);
    ss_plan_free(p);
    ss_plan_free(q);
}

/* Ops with equal device lists share one list of the plan's pool: set from
 * different buffers, copied, cloned; a change gives the op another list and
 * leaves the others' alone; the plan's memory grows with distinct lists
 * only, and lists no op holds any more are freed (bounded memory however
 * many configs an op goes through). */
static void test_devlists_pooled(void **state)
{
    fixture *f = *state;
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = ss_plan_new(f->g, f->m);
    int a1[8] = {0, 1, 2, 3, 3, 2, 1, 0}, a2[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    int b[8] = {3, 2, 1, 0, 0, 1, 2, 3};
    /* every op starts on {0}: one list */
    for (int i = 1; i < ss_plan_n_ops(p); i++) {
        assert_int_equal(ss_plan_devlist_id(p, i), ss_plan_devlist_id(p, 0));
        assert_ptr_equal(ss_plan_config(p, i)->devices, ss_plan_config(p, 0)->devices);
    }
    assert_int_equal(ss_plan_devlist_id(p, -1), -1);
    assert_int_equal(ss_plan_devlist_id(p, ss_plan_n_ops(p)), -1);
    ss_pconfig ca = cfg2(4, 1, 2, a1), ca2 = cfg2(4, 1, 2, a2), cb = cfg2(4, 1, 2, b);
    assert_int_equal(ss_plan_set_config(p, f->fc1, &ca, &d), SS_OK);
    size_t one_list = ss_plan_bytes(p);
    /* fc2 (12 -> 4) takes the same degrees; its list equals fc1's */
    assert_int_equal(ss_plan_set_config(p, f->fc2, &ca2, &d), SS_OK);
    assert_int_equal(ss_plan_bytes(p), one_list);
    assert_ptr_equal(ss_plan_config(p, f->fc1)->devices, ss_plan_config(p, f->fc2)->devices);
    assert_int_equal(ss_plan_devlist_id(p, f->fc1), ss_plan_devlist_id(p, f->fc2));
    assert_true(ss_plan_devlist_id(p, f->fc1) < ss_plan_devlist_ids(p));
    /* the caller's buffers are copied, not borrowed */
    a1[0] = a2[0] = 3;
    assert_int_equal(ss_plan_config(p, f->fc1)->devices[0], 0);
    /* set an op to its own config, or to another op's: nothing moves */
    ss_pconfig own = *ss_plan_config(p, f->fc2);
    assert_int_equal(ss_plan_set_config(p, f->fc2, &own, &d), SS_OK);
    assert_int_equal(ss_plan_set_config(p, f->fc2, ss_plan_config(p, f->fc1), &d), SS_OK);
    assert_int_equal(ss_plan_bytes(p), one_list);
    /* copy on change: fc2 moves to b, fc1 keeps its list */
    assert_int_equal(ss_plan_set_config(p, f->fc2, &cb, &d), SS_OK);
    assert_true(ss_plan_bytes(p) >= one_list + 8 * sizeof(int));
    assert_int_not_equal(ss_plan_devlist_id(p, f->fc1), ss_plan_devlist_id(p, f->fc2));
    assert_int_equal(ss_plan_config(p, f->fc1)->devices[0], 0);
    assert_int_equal(ss_plan_config(p, f->fc1)->devices[4], 3);
    assert_int_equal(ss_plan_config(p, f->fc2)->devices[0], 3);
    assert_true(ss_plan_devlist_id(p, f->fc2) < ss_plan_devlist_ids(p));
    /* a clone: its own lists, equal ones shared the same way */
    ss_plan *q = ss_plan_clone(p);
    assert_non_null(q);
    for (int i = 0; i < ss_plan_n_ops(p); i++) {
        const ss_pconfig *x = ss_plan_config(p, i), *y = ss_plan_config(q, i);
        assert_ptr_not_equal(x->devices, y->devices);
        assert_true(ss_pconfig_same_tiles(x, y));
        for (int j = 0; j < ss_plan_n_ops(p); j++)
            assert_int_equal(ss_plan_devlist_id(p, i) == ss_plan_devlist_id(p, j),
                             ss_plan_devlist_id(q, i) == ss_plan_devlist_id(q, j));
    }
    ss_plan_free(p); /* q's lists are q's own */
    assert_int_equal(ss_plan_config(q, f->fc1)->devices[4], 3);
    assert_int_equal(ss_plan_config(q, f->fc2)->devices[7], 3);
    /* churn: 20,000 distinct lists through one op; the ones dropped are
     * freed, so the plan stays within its lists plus a bounded slack */
    size_t start = ss_plan_bytes(q);
    int c[8];
    ss_pconfig cc = cfg2(4, 1, 2, c);
    for (int k = 0; k < 20000; k++) {
        for (int t = 0; t < 8; t++)
            c[t] = (k >> (2 * t)) & 3;
        assert_int_equal(ss_plan_set_config(q, f->fc1, &cc, &d), SS_OK);
    }
    /* 20,000 lists of 8 entries kept would take 20000 * 32 bytes and more */
    assert_true(ss_plan_bytes(q) < start + 2 * 65536);
    assert_true(ss_plan_devlist_ids(q) < 2000);
    ss_plan_free(q);
}

/* Validation checks a device list shared by several ops once per replica
 * and reduction degrees: a list that passes for one op is still refused
 * for a later op whose replicas it puts on one device, and an error names
 * the first op holding the bad list. */
static void test_validate_shared_lists(void **state)
{
    fixture *f = *state;
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = ss_plan_new(f->g, f->m);
    int devs[4] = {0, 0, 1, 1};
    ss_pconfig c1 = cfg2(4, 1, 1, devs), c2 = cfg2(2, 1, 1, devs);
    c2.rep = 2; /* tile (i0 = 0): replicas 0 and 1 on devices 0 and 0 */
    c2.ntiles = 4;
    assert_int_equal(ss_plan_set_config(p, f->fc1, &c1, &d), SS_OK);
    assert_int_equal(ss_plan_set_config(p, f->fc2, &c1, &d), SS_OK);
    if (ss_plan_validate(p, f->g, f->m, &d) != SS_OK)
        fail_msg("%s", d.msg);
    assert_int_equal(ss_plan_set_config(p, f->fc2, &c2, &d), SS_OK);
    assert_int_equal(ss_plan_devlist_id(p, f->fc1), ss_plan_devlist_id(p, f->fc2));
    assert_int_equal(ss_plan_validate(p, f->g, f->m, &d), SS_ERR_INVALID);
    if (!strstr(d.msg, "operator \"fc2\": replicas 0 and 1 of one tile are both on device 0"))
        fail_msg("%s", d.msg);
    /* out of range: named at the first op holding the list */
    devs[3] = 9;
    assert_int_equal(ss_plan_set_config(p, f->fc1, &c1, &d), SS_OK);
    assert_int_equal(ss_plan_set_config(p, f->fc2, &c1, &d), SS_OK);
    ss_diag_init(&d);
    assert_int_equal(ss_plan_validate(p, f->g, f->m, &d), SS_ERR_INVALID);
    if (!strstr(d.msg, "operator \"fc1\": device 9 of tile 3 out of range"))
        fail_msg("%s", d.msg);
    ss_plan_free(p);
    /* interleaved (2 ranks x 2 chunks): every op on device 0, one shared
     * list; ln (stage 1, rank 1) is refused though fc1 (rank 0) passed */
    p = ss_plan_new(f->g, f->m);
    ss_plan_settings *s = ss_plan_settings_of(p);
    s->stages = 4;
    s->virtual_stages = 2;
    s->schedule = SS_PIPE_1F1B;
    s->microbatches = 2;
    static const int stage_of[][2] = {{0, 0}, {1, 0}, {2, 0}, {3, 1}, {4, 2}, {5, 3}, {6, 3}};
    for (size_t k = 0; k < sizeof stage_of / sizeof stage_of[0]; k++) {
        ss_pconfig c = *ss_plan_config(p, stage_of[k][0]);
        c.stage = stage_of[k][1];
        assert_int_equal(ss_plan_set_config(p, stage_of[k][0], &c, &d), SS_OK);
    }
    assert_int_equal(f->ln, 3);
    ss_diag_init(&d);
    assert_int_equal(ss_plan_validate(p, f->g, f->m, &d), SS_ERR_INVALID);
    if (!strstr(d.msg, "operator \"ln\" in stage 1 (pipeline rank 1) is on device 0"))
        fail_msg("%s", d.msg);
    ss_plan_free(p);
}

/* The micro-batches a layout forms, with one device list under two
 * tilings: fc1 splits its features (one sample offset per device), fc2
 * its samples (two offsets on each device). */
static void test_layout_microbatches_shared(void **state)
{
    fixture *f = *state;
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = ss_plan_new(f->g, f->m);
    int devs[4] = {0, 0, 1, 1};
    ss_pconfig c1 = cfg2(1, 4, 1, devs), c2 = cfg2(4, 1, 1, devs);
    assert_int_equal(ss_plan_set_config(p, f->fc1, &c1, &d), SS_OK);
    assert_int_equal(ss_plan_layout_microbatches(p, f->g), 1);
    assert_int_equal(ss_plan_set_config(p, f->fc2, &c2, &d), SS_OK);
    assert_int_equal(ss_plan_devlist_id(p, f->fc1), ss_plan_devlist_id(p, f->fc2));
    assert_int_equal(ss_plan_layout_microbatches(p, f->g), 2);
    ss_plan_free(p);
}

/* Validate one modified config and check the message. */
static void expect_invalid(fixture *f, int op, ss_pconfig c, int stages, const char *want)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = ss_plan_new(f->g, f->m);
    ss_plan_settings_of(p)->stages = stages;
    assert_int_equal(ss_plan_set_config(p, op, &c, &d), SS_OK);
    assert_int_equal(ss_plan_validate(p, f->g, f->m, &d), SS_ERR_INVALID);
    if (!strstr(d.msg, want))
        fail_msg("message '%s' lacks '%s'", d.msg, want);
    ss_plan_free(p);
}

static void test_validate_errors(void **state)
{
    fixture *f = *state;
    int devs[16] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
    expect_invalid(f, f->fc1, cfg2(1, 5, 1, devs), 1,
                   "plan: operator \"fc1\": degree 5 does not divide dim 1 (12)");
    expect_invalid(f, f->ln, cfg2(1, 2, 1, devs), 1,
                   "operator \"ln\": dim 1 (parameter) cannot be split");
    expect_invalid(f, f->relu, cfg2(1, 1, 2, devs), 1, "no contraction dim");
    expect_invalid(f, f->fc1, cfg2(1, 1, 3, devs), 1,
                   "reduction degree 3 does not divide the contraction dim (16)");
    int far[2] = {1, 4};
    expect_invalid(f, f->fc1, cfg2(2, 1, 1, far), 1, "device 4 of tile 1 out of range");
    int neg[2] = {-1, 0};
    expect_invalid(f, f->fc1, cfg2(2, 1, 1, neg), 1, "device -1 of tile 0 out of range");
    ss_pconfig st = cfg2(1, 1, 1, devs);
    st.stage = 1;
    expect_invalid(f, f->fc1, st, 1, "stage 1 out of range (the plan has 1 stages)");
    /* fc1 in stage 1 feeding ln in stage 0 */
    expect_invalid(f, f->fc1, st, 2, "operator \"ln\" in stage 0 consumes \"fc1\"");

    /* settings */
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = ss_plan_new(f->g, f->m);
    ss_plan_settings_of(p)->microbatches = 0;
    assert_int_equal(ss_plan_validate(p, f->g, f->m, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "microbatches must be at least 1"));
    ss_plan_settings_of(p)->microbatches = 1;
    ss_plan_settings_of(p)->bucket_bytes = -1;
    ss_diag_init(&d);
    assert_int_equal(ss_plan_validate(p, f->g, f->m, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "bucket_bytes"));
    ss_plan_settings_of(p)->bucket_bytes = 0;
    ss_plan_settings_of(p)->stages = 0;
    ss_diag_init(&d);
    assert_int_equal(ss_plan_validate(p, f->g, f->m, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "stages must be at least 1"));
    ss_plan_free(p);

    /* a valid mixed config passes: sample 2 x param 2 x red 2 on 4 devices */
    p = ss_plan_new(f->g, f->m);
    ss_diag_init(&d);
    assert_int_equal(ss_plan_set_config(p, f->fc1, &(ss_pconfig){0}, &d), SS_ERR_INVALID);
    ss_diag_init(&d);
    ss_pconfig ok = cfg2(2, 2, 2, devs);
    assert_int_equal(ss_plan_set_config(p, f->fc1, &ok, &d), SS_OK);
    assert_int_equal(ss_plan_validate(p, f->g, f->m, &d), SS_OK);

    /* a plan for another graph (different op count) */
    ss_graph *g2 = ss_graph_new("other");
    ss_diag_init(&d);
    assert_int_equal(ss_plan_validate(p, g2, f->m, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "operators"));
    ss_graph_free(g2);
    ss_plan_free(p);
}

/* Every allocation failure in new/clone/set_config/copy is reported and
 * leaks nothing (the sanitizer build checks leaks). */
static void test_alloc_failures(void **state)
{
    fixture *f = *state;
    ss_plan *base = ss_plan_new(f->g, f->m);
    int devs[16] = {0};
    ss_pconfig big = cfg2(4, 2, 2, devs);
    for (long n = 0; n < 64; n++) {
        ss_test_fail_after(n);
        ss_plan *p = ss_plan_new(f->g, f->m);
        ss_test_fail_after(-1);
        if (p) {
            assert_true(n > 0);
            ss_plan_free(p);
            break;
        }
    }
    ss_diag d;
    ss_diag_init(&d);
    ss_test_fail_after(0);
    assert_int_equal(ss_plan_set_config(base, f->fc1, &big, &d), SS_ERR_NOMEM);
    ss_test_fail_after(-1);
    assert_int_equal(ss_plan_config(base, f->fc1)->ntiles, 1);
    ss_plan *q = ss_plan_clone(base);
    assert_int_equal(ss_plan_set_config(q, f->fc1, &big, &d), SS_OK);
    ss_test_fail_after(0);
    assert_int_equal(ss_plan_copy(base, q), SS_ERR_NOMEM);
    ss_test_fail_after(-1);
    assert_int_equal(ss_plan_config(base, f->fc1)->ntiles, 1);
    ss_test_fail_after(0);
    assert_null(ss_plan_clone(q));
    ss_test_fail_after(-1);
    assert_int_equal(ss_plan_copy(base, q), SS_OK);
    assert_int_equal(ss_plan_config(base, f->fc1)->ntiles, 16);
    ss_plan_free(q);
    ss_plan_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_new_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tile_index_order, setup, teardown),
        cmocka_unit_test(test_same_tiles),
        cmocka_unit_test_setup_teardown(test_tiles_cover_output, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_copy_clone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_devlists_pooled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replica_tiles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_validate_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_validate_shared_lists, setup, teardown),
        cmocka_unit_test_setup_teardown(test_layout_microbatches_shared, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_failures, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
