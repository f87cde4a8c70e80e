/*
 * test_collective.c — alpha-beta collective costs: the formulas with explicit
 * numbers, and machine-level costing (algorithm choice, bandwidth sharing,
 * channels occupied) on small hand-built machines. Expected values are
 * derived in the comments.
 */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "core/machine_impl.h"
#include "simulator/collective.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * (1.0 + fabs(b)); }
#define NEAR(a, b) assert_true(near((a), (b)))

/* S = 1e8 B, B = 25 GB/s (= 25e3 B/us), lat = 5 us, launch 6 us, n = 4.
 *   ring all-reduce  6 + 2*3*5 + 2*3/4 * 1e8/25e3 = 6 + 30 + 1.5*4000 = 6036
 *   reduce-scatter   6 + 3*5 + 3/4 * 4000 = 3021 (all-gather the same)
 *   tree all-reduce  6 + 2*log2(4)*5 + 2*4000 = 8026
 *   p2p 1 MB at 10 GB/s, 2 us: 2 + 100 = 102; 0 bytes: 0 */
static void test_formulas(void **state)
{
    (void)state;
    NEAR(ss_coll_ring_us(SS_COLL_ALLREDUCE, 4, 1e8, 25, 5, 6), 6036);
    NEAR(ss_coll_ring_us(SS_COLL_REDUCE_SCATTER, 4, 1e8, 25, 5, 6), 3021);
    NEAR(ss_coll_ring_us(SS_COLL_ALLGATHER, 4, 1e8, 25, 5, 6), 3021);
    NEAR(ss_coll_tree_us(4, 1e8, 25, 5, 6), 8026);
    /* tree with n = 5: ceil(log2 5) = 3 steps each way: 6 + 30 + 8000 */
    NEAR(ss_coll_tree_us(5, 1e8, 25, 5, 6), 8036);
    NEAR(ss_p2p_us(1e6, 10, 2), 102);
    NEAR(ss_p2p_us(0, 10, 2), 0);
    NEAR(ss_coll_ring_us(SS_COLL_ALLREDUCE, 1, 1e8, 25, 5, 6), 0);
    /* Hierarchical, N = 2 nodes x d = 4, S = 1e8, intra 100 GB/s 2 us,
     * inter 12.5 GB/s 10 us, launch 6:
     *   intra RS + AG  2*(3*2 + 3/4 * 1e8/1e5)      = 2*(6 + 750) = 1512
     *   inter AR of S/4 = 2.5e7: 2*1*10 + 2*1/2 * 2.5e7/12.5e3 = 20 + 2000
     *   total 6 + 1512 + 2020 = 3538 */
    NEAR(ss_coll_hier_us(2, 4, 1e8, 100, 2, 12.5, 10, 6), 3538);
    assert_string_equal(ss_coll_kind_name(SS_COLL_ALLTOALL), "all-to-all");
    assert_string_equal(ss_coll_algo_name(SS_COLL_HIER), "hierarchical");
}

static void set_link(ss_machine *m, int i, int a, int b, double gbps, double lat, const char *kind)
{
    ss_link *l = &m->links[i];
    l->a = a;
    l->b = b;
    l->gbps_ab = l->gbps_ba = gbps;
    l->latency_us = lat;
    strcpy(l->kind, kind);
}

/* One host, 4 GPUs (nodes 0-3) each on its own link i to a switch (node 4):
 * 25 GB/s, 2.5 us per link. Channel 2i is gpu i -> switch, 2i+1 switch -> i.
 * A route i -> j is 2i then 2j+1: latency 5 us, bottleneck 25 GB/s. */
static ss_machine *star4(void)
{
    ss_machine *m = ss_machine_alloc(1, 1, 4, 5, 4);
    assert_non_null(m);
    strcpy(m->name, "star4");
    strcpy(m->types[0].name, "T");
    strcpy(m->hosts[0].name, "host0");
    for (int i = 0; i < 4; i++) {
        snprintf(m->devices[i].name, SS_NAME_MAX, "gpu%d", i);
        m->devices[i].host = 0;
        snprintf(m->nodes[i].name, SS_NAME_MAX, "gpu%d", i);
        m->nodes[i].kind = SS_NODE_DEVICE;
        m->nodes[i].host = 0;
        set_link(m, i, i, 4, 25, 2.5, "nvswitch");
    }
    strcpy(m->nodes[4].name, "sw0");
    m->nodes[4].kind = SS_NODE_SWITCH;
    m->nodes[4].host = 0;
    ss_diag d = {0};
    if (ss_machine_finish(m, "star4", &d))
        fail_msg("machine: %s", d.msg);
    return m;
}

/* Ring all-reduce of S = 1e8 B over the 4 GPUs (ring 0,1,2,3):
 * every hop i -> i+1 uses channels 2i and 2(i+1)+1 once, so B = 25 GB/s,
 * per-step latency 5 us: 6 + 30 + 1.5 * 1e8/25e3 = 6036 us, the same as the
 * formula. It occupies both directions of every hop: all 8 channels.
 * Tree (double binary, n = 4): tree A edges 1-0, 2-0, 3-1 (heap over the
 * ring), tree B mirrored: 2-3, 1-3, 0-2; each edge both ways. GPU 0's uplink
 * (channel 0) carries 0->1, 0->2 (A) and 0->2 (B): 3 hops, and so does every
 * other uplink and downlink, so B = 25/3 GB/s; latency 2*2*5 = 20:
 *   tree = 6 + 20 + 2 * S / (25e3/3). For S = 8 B: 26.00192 vs ring
 *   36.00048 -> tree wins small messages; for S = 1e8 ring wins. */
static void test_star_allreduce(void **state)
{
    (void)state;
    ss_machine *m = star4();
    ss_coll_result r = {0};
    ss_diag d = {0};
    int devs[4] = {3, 1, 0, 2}; /* order given does not matter */
    assert_int_equal(ss_coll_cost(m, SS_COLL_ALLREDUCE, devs, 4, 1e8, NULL, &r, &d), SS_OK);
    assert_int_equal(r.algo, SS_COLL_RING);
    NEAR(r.time_us, 6036);
    NEAR(r.gbps, 25);
    NEAR(r.lat_us, 5);
    NEAR(r.algo_us[SS_COLL_TREE], 6 + 20 + 2 * 1e8 / (25e3 / 3));
    assert_true(r.algo_us[SS_COLL_HIER] < 0); /* one host: not applicable */
    assert_int_equal(r.n_channels, 8);
    for (int c = 0; c < 8; c++)
        assert_int_equal(r.channels[c], c);

    assert_int_equal(ss_coll_cost(m, SS_COLL_ALLREDUCE, devs, 4, 8, NULL, &r, &d), SS_OK);
    assert_int_equal(r.algo, SS_COLL_TREE);
    NEAR(r.time_us, 26.00192);
    NEAR(r.algo_us[SS_COLL_RING], 36.00048);
    NEAR(r.gbps, 25.0 / 3);

    /* Restricting the algorithms: ring only. */
    ss_coll_config cfg = {.launch_us = 6, .algos = 1u << SS_COLL_RING};
    assert_int_equal(ss_coll_cost(m, SS_COLL_ALLREDUCE, devs, 4, 8, &cfg, &r, &d), SS_OK);
    assert_int_equal(r.algo, SS_COLL_RING);
    NEAR(r.time_us, 36.00048);

    /* Bus-bandwidth efficiency of the links: eff(S) = 0.8 * S / (S + 1e8) =
     * 0.4 at S = 1e8 on every link: the ring's B is 25 * 0.4 = 10 GB/s, 6 +
     * 30 + 1.5 * 1e8/1e4 = 15036 us (the latency terms unchanged); tree B =
     * 25/3 * 0.4. */
    for (int i = 0; i < 4; i++) {
        m->links[i].coll_eff = 0.8;
        m->links[i].coll_half_bytes = 1e8;
    }
    NEAR(ss_coll_link_eff(&m->links[0], 1e8), 0.4);
    NEAR(ss_coll_link_eff(NULL, 1e8), 1);
    assert_int_equal(ss_coll_cost(m, SS_COLL_ALLREDUCE, devs, 4, 1e8, NULL, &r, &d), SS_OK);
    assert_int_equal(r.algo, SS_COLL_RING);
    NEAR(r.time_us, 15036);
    NEAR(r.gbps, 10);
    NEAR(r.algo_us[SS_COLL_TREE], 6 + 20 + 2 * 1e8 / (25e3 / 3 * 0.4));
    /* The bottleneck takes each link's own curve: GPU 3's link alone at
     * eff 0.5 (no size dependence), the others ideal: B = 12.5 GB/s. */
    for (int i = 0; i < 4; i++) {
        m->links[i].coll_eff = i == 3 ? 0.5 : 1.0;
        m->links[i].coll_half_bytes = 0;
    }
    assert_int_equal(ss_coll_cost(m, SS_COLL_ALLREDUCE, devs, 4, 1e8, NULL, &r, &d), SS_OK);
    NEAR(r.gbps, 12.5);
    NEAR(r.time_us, 6 + 30 + 1.5 * 1e8 / 12.5e3);
    for (int i = 0; i < 4; i++)
        m->links[i].coll_eff = 0; /* 0 reads as 1: the ideal model again */

    /* Reduce-scatter over {1, 2}: ring 1 -> 2 -> 1; both hops are loaded
     * (a 2-ring), 1 step: 6 + 5 + 1/2 * 1e6/25e3 = 11 + 20 = 31 us; channels
     * 2 (1 up), 5 (2 down), 4 (2 up), 3 (1 down). */
    int two[2] = {2, 1};
    assert_int_equal(ss_coll_cost(m, SS_COLL_REDUCE_SCATTER, two, 2, 1e6, NULL, &r, &d), SS_OK);
    NEAR(r.time_us, 31);
    assert_int_equal(r.n_channels, 4);
    assert_int_equal(r.channels[0], 2);
    assert_int_equal(r.channels[1], 3);
    assert_int_equal(r.channels[2], 4);
    assert_int_equal(r.channels[3], 5);

    /* All-to-all over the 4: each uplink carries 3 of the 12 pair routes,
     * so B_eff = (n-1) * 25/3 = 25 GB/s: 6 + 3*5 + 3/4 * 1e8/25e3 = 3021. */
    assert_int_equal(ss_coll_cost(m, SS_COLL_ALLTOALL, devs, 4, 1e8, NULL, &r, &d), SS_OK);
    assert_int_equal(r.algo, SS_COLL_PAIRWISE);
    NEAR(r.time_us, 3021);
    assert_int_equal(r.n_channels, 8);

    /* One device or no bytes: free, no channels. */
    assert_int_equal(ss_coll_cost(m, SS_COLL_ALLREDUCE, devs, 1, 1e8, NULL, &r, &d), SS_OK);
    assert_true(r.time_us == 0 && r.n_channels == 0);
    assert_int_equal(ss_coll_cost(m, SS_COLL_ALLGATHER, devs, 4, 0, NULL, &r, &d), SS_OK);
    assert_true(r.time_us == 0 && r.n_channels == 0);

    ss_coll_result_clear(&r);
    ss_machine_free(m);
}

/* Two hosts x 2 GPUs. Nodes: gpu0, gpu1 (host 0), gpu2, gpu3 (host 1),
 * nic0 (4), nic1 (5). Links (channel 2l = a->b, 2l+1 = b->a):
 *   L0 gpu0-gpu1 nvlink 100 GB/s 1 us    L1 gpu2-gpu3 nvlink 100 GB/s 1 us
 *   L2 gpu0-nic0 pcie 16 GB/s 1 us       L3 gpu1-nic0     L4 gpu2-nic1
 *   L5 gpu3-nic1 pcie                    L6 nic0-nic1 ib 12.5 GB/s 5 us
 * Cross-host routes go gpu -> nic -> nic -> gpu: 7 us, 12.5 GB/s. */
static ss_machine *two_hosts(void)
{
    ss_machine *m = ss_machine_alloc(1, 2, 4, 6, 7);
    assert_non_null(m);
    strcpy(m->name, "two_hosts");
    strcpy(m->types[0].name, "T");
    strcpy(m->hosts[0].name, "host0");
    strcpy(m->hosts[1].name, "host1");
    for (int i = 0; i < 6; i++) {
        int h = i < 4 ? i / 2 : i - 4;
        snprintf(m->nodes[i].name, SS_NAME_MAX, i < 4 ? "gpu%d" : "nic%d", i < 4 ? i : i - 4);
        m->nodes[i].kind = i < 4 ? SS_NODE_DEVICE : SS_NODE_NIC;
        m->nodes[i].host = h;
        if (i < 4) {
            snprintf(m->devices[i].name, SS_NAME_MAX, "gpu%d", i);
            m->devices[i].host = h;
        }
    }
    set_link(m, 0, 0, 1, 100, 1, "nvlink");
    set_link(m, 1, 2, 3, 100, 1, "nvlink");
    set_link(m, 2, 0, 4, 16, 1, "pcie");
    set_link(m, 3, 1, 4, 16, 1, "pcie");
    set_link(m, 4, 2, 5, 16, 1, "pcie");
    set_link(m, 5, 3, 5, 16, 1, "pcie");
    set_link(m, 6, 4, 5, 12.5, 5, "infiniband");
    ss_diag d = {0};
    if (ss_machine_finish(m, "two_hosts", &d))
        fail_msg("machine: %s", d.msg);
    return m;
}

/* All-reduce of S = 1e8 over the 4 GPUs.
 * Ring 0,1,2,3: hops 0->1 nvlink, 1->2 and 3->0 cross the IB link once each
 * way: B = 12.5, per-step latency = the slowest hop, 7 us:
 *   ring = 6 + 6*7 + 1.5 * 1e8/12.5e3 = 48 + 12000 = 12048.
 * Hierarchical (2 nodes x 2): intra ring of 2 over NVLink (B_i = 100,
 * lat 1), inter rings {0,2} and {1,3} both cross the IB link in each
 * direction: load 2, B_e = 12.5/2 = 6.25 (the PCIe hops carry 1: 16), lat 7:
 *   6 + 2*(1*1 + 1/2 * 1e8/1e5) + 2*1*7 + 2*1/2 * (1e8/2)/6.25e3
 *   = 6 + 2*(1 + 500) + 14 + 8000 = 9022 -> hierarchical wins.
 * Reduce-scatter (ring only): 6 + 3*7 + 3/4 * 1e8/12.5e3 = 27 + 6000 = 6027,
 * on channels 0 (0->1), 6, 12, 9 (1->nic0->nic1->2), 2 (2->3),
 * 10, 13, 5 (3->nic1->nic0->0). */
static void test_two_hosts(void **state)
{
    (void)state;
    ss_machine *m = two_hosts();
    ss_coll_result r = {0};
    ss_diag d = {0};
    int devs[4] = {0, 1, 2, 3};
    assert_int_equal(ss_coll_cost(m, SS_COLL_ALLREDUCE, devs, 4, 1e8, NULL, &r, &d), SS_OK);
    NEAR(r.algo_us[SS_COLL_RING], 12048);
    NEAR(r.algo_us[SS_COLL_HIER], 9022);
    assert_int_equal(r.algo, SS_COLL_HIER);
    NEAR(r.time_us, 9022);
    NEAR(r.gbps, 6.25);
    assert_int_equal(r.n_channels, 14); /* every channel of the machine */

    assert_int_equal(ss_coll_cost(m, SS_COLL_REDUCE_SCATTER, devs, 4, 1e8, NULL, &r, &d), SS_OK);
    assert_int_equal(r.algo, SS_COLL_RING);
    NEAR(r.time_us, 6027);
    const int want[8] = {0, 2, 5, 6, 9, 10, 12, 13};
    assert_int_equal(r.n_channels, 8);
    for (int i = 0; i < 8; i++)
        assert_int_equal(r.channels[i], want[i]);
    ss_coll_result_clear(&r);
    ss_machine_free(m);
}

static void test_errors(void **state)
{
    (void)state;
    ss_machine *m = star4();
    ss_coll_result r = {0};
    ss_diag d = {0};
    int dup[3] = {0, 2, 0};
    assert_int_equal(ss_coll_cost(m, SS_COLL_ALLREDUCE, dup, 3, 1e6, NULL, &r, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "listed twice"));
    int bad[2] = {0, 9};
    ss_diag_init(&d);
    assert_int_equal(ss_coll_cost(m, SS_COLL_ALLREDUCE, bad, 2, 1e6, NULL, &r, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "out of range"));
    int ok[2] = {0, 1};
    ss_coll_config tree_only = {.launch_us = 6, .algos = 1u << SS_COLL_TREE};
    ss_diag_init(&d);
    assert_int_equal(ss_coll_cost(m, SS_COLL_REDUCE_SCATTER, ok, 2, 1e6, &tree_only, &r, &d),
                     SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "no allowed algorithm"));
    ss_diag_init(&d);
    assert_int_equal(ss_coll_cost(m, SS_COLL_ALLREDUCE, ok, 2, -1, NULL, &r, &d), SS_ERR_INVALID);
    ss_diag_init(&d);
    assert_int_equal(ss_coll_cost(m, SS_COLL_ALLREDUCE, ok, 0, 1, NULL, &r, &d), SS_ERR_INVALID);
    /* after errors the result is still usable and loads were left at zero:
     * the ring over 4 gives the same answer as on a fresh result */
    int all[4] = {0, 1, 2, 3};
    assert_int_equal(ss_coll_cost(m, SS_COLL_ALLREDUCE, all, 4, 1e8, NULL, &r, &d), SS_OK);
    NEAR(r.time_us, 6036);
    ss_coll_result_clear(&r);
    ss_coll_result_clear(NULL);

    /* allocation failures: NOMEM, then success with the same answer */
    int done = 0;
    for (long k = 0; k < 50 && !done; k++) {
        ss_coll_result q = {0};
        ss_diag_init(&d);
        ss_test_fail_after(k);
        ss_status st = ss_coll_cost(m, SS_COLL_ALLREDUCE, all, 4, 1e8, NULL, &q, &d);
        ss_test_fail_after(-1);
        if (st == SS_OK) {
            NEAR(q.time_us, 6036);
            done = 1;
        } else {
            assert_int_equal(st, SS_ERR_NOMEM);
        }
        ss_coll_result_clear(&q);
    }
    assert_true(done);
    ss_machine_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formulas),
        cmocka_unit_test(test_star_allreduce),
        cmocka_unit_test(test_two_hosts),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
