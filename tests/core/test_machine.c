/*
 * test_machine.c — built-in device types, efficiency tables, and routing on
 * small hand-drawn machines: latency before hops, no forwarding through
 * devices, deterministic ties, asymmetric links, firewalled peers and relays,
 * the lazy route cache of large machines. Expected numbers are derived by
 * hand in the comments.
 */
#include "testutil.h"
#include "core/machine_impl.h" /* the budget for complete trees */
#include "core/routeclass.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define HDR "\"format\": \"simsearch-topology\", \"version\": 1, \"name\": \"t\", "

static ss_machine *load(const char *json)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    ss_status st = ss_machine_load_string(json, "test.json", &m, &d);
    if (st != SS_OK)
        print_error("load failed: %s\n", d.msg);
    assert_int_equal(st, SS_OK);
    assert_non_null(m);
    return m;
}

static int dev(const ss_machine *m, const char *name)
{
    for (int i = 0; i < ss_machine_n_devices(m); i++)
        if (strcmp(ss_machine_device(m, i)->name, name) == 0)
            return i;
    fail_msg("no device %s", name);
    return -1;
}

/* Names of the nodes a route visits after src, joined by spaces. */
static const char *hops(const ss_machine *m, int src, int dst)
{
    static char buf[512];
    const int *ch;
    int n;
    buf[0] = '\0';
    if (ss_machine_route(m, src, dst, &ch, &n) != SS_OK)
        return "unreachable";
    for (int i = 0; i < n; i++) {
        const ss_link *l = ss_machine_link(m, ch[i] / 2);
        int to = (ch[i] & 1) ? l->a : l->b;
        strcat(buf, i ? " " : "");
        strcat(buf, ss_machine_node(m, to)->name);
    }
    return buf;
}

static double a100_f8(void)
{
    return ss_devtype_find_builtin("A100-SXM4-80GB")->peak_tflops[SS_F8];
}

static void test_builtins(void **state)
{
    (void)state;
    static const char *names[] = {"K80", "P100-SXM2", "V100-SXM2-16GB", "V100-SXM2-32GB",
                                  "A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM", "H200-SXM",
                                  "T4", "RTX3090", "CPU-core"};
    assert_int_equal(ss_devtype_builtin_count(), 15);
    for (int i = 0; i < 11; i++) {
        const ss_device_type *t = ss_devtype_find_builtin(names[i]);
        assert_non_null(t);
        assert_ptr_equal(t, ss_devtype_builtin(i));
        assert_true(t->peak_tflops[SS_F32] > 0);
        assert_true(t->n_eff_flops >= 2 && t->n_eff_mem >= 2);
        for (int k = 1; k < t->n_eff_flops; k++) {
            assert_true(t->eff_flops_x[k] > t->eff_flops_x[k - 1]);
            assert_true(t->eff_flops_y[k] >= t->eff_flops_y[k - 1]);
        }
        assert_int_equal(t->is_cpu, i == 10);
    }
    assert_null(ss_devtype_find_builtin("B300"));
    assert_null(ss_devtype_builtin(15));
    /* FP8 peaks: dense datasheet rates (core/devtypes.c), none before Hopper */
    assert_near(ss_devtype_find_builtin("H100-SXM")->peak_tflops[SS_F8], 1979, 0);
    assert_near(ss_devtype_find_builtin("H200-SXM")->peak_tflops[SS_F8], 1979, 0);
    assert_near(ss_devtype_find_builtin("B200")->peak_tflops[SS_F8], 4500, 0);
    assert_near(ss_devtype_find_builtin("B200")->peak_tflops[SS_BF16], 2250, 0);
    assert_near(ss_devtype_find_builtin("GB200")->peak_tflops[SS_F8], 5000, 0);
    assert_near(ss_devtype_find_builtin("MI300X")->peak_tflops[SS_F8], 2614.9, 0);
    assert_near(a100_f8(), 0, 0);
    assert_null(ss_devtype_builtin(-1));
    const ss_device_type *a = ss_devtype_find_builtin("A100-SXM4-80GB");
    assert_near(a->peak_tflops[SS_F32], 19.5, 1e-12);
    assert_near(a->peak_tflops[SS_F16], 312, 1e-12);
    assert_near(a->peak_tflops[SS_BF16], 312, 1e-12);
    assert_near(a->mem_gbps, 2039, 1e-12);
    assert_near(a->mem_gib, 80, 1e-12);
    const ss_device_type *k80 = ss_devtype_find_builtin("K80");
    assert_near(k80->peak_tflops[SS_F32], 4.37, 1e-12); /* boost clock */
    assert_near(k80->peak_tflops[SS_BF16], 0, 0);       /* falls back to f32 */
    assert_near(k80->launch_us, 8, 0);
    const ss_device_type *p100 = ss_devtype_find_builtin("P100-SXM2");
    assert_near(p100->peak_tflops[SS_F16], 2 * p100->peak_tflops[SS_F32], 1e-12);
    const ss_device_type *v = ss_devtype_find_builtin("V100-SXM2-32GB");
    assert_near(v->mem_gib, 32, 0);
    assert_near(v->peak_tflops[SS_F16], 125, 0);
    const ss_device_type *h200 = ss_devtype_find_builtin("H200-SXM");
    assert_near(h200->mem_gbps, 4800, 0);
    /* tensor-core GPUs: ~5% at 1e6 FLOPs, 75-80% at >= 1e11 */
    const ss_device_type *t4 = ss_devtype_find_builtin("T4");
    assert_near(ss_devtype_eff(t4->n_eff_flops, t4->eff_flops_x, t4->eff_flops_y, 1e6),
                        0.05, 1e-12);
    double big = ss_devtype_eff(a->n_eff_flops, a->eff_flops_x, a->eff_flops_y, 1e13);
    assert_true(big >= 0.75 && big <= 0.80);
    double mem = ss_devtype_eff(a->n_eff_mem, a->eff_mem_x, a->eff_mem_y, 1e9);
    assert_near(mem, 0.85, 1e-12);
}

static void test_eff_interpolation(void **state)
{
    (void)state;
    const double xs[] = {1e6, 1e8, 1e9};
    const double ys[] = {0.1, 0.5, 0.7};
    /* log-linear: 1e7 is halfway between 1e6 and 1e8 -> 0.3 */
    assert_near(ss_devtype_eff(3, xs, ys, 1e7), 0.3, 1e-12);
    /* 10^8.5 is halfway between 1e8 and 1e9 -> 0.6 */
    assert_near(ss_devtype_eff(3, xs, ys, pow(10, 8.5)), 0.6, 1e-12);
    assert_near(ss_devtype_eff(3, xs, ys, 1e6), 0.1, 1e-12);
    assert_near(ss_devtype_eff(3, xs, ys, 10), 0.1, 1e-12);
    assert_near(ss_devtype_eff(3, xs, ys, 0), 0.1, 1e-12);
    assert_near(ss_devtype_eff(3, xs, ys, 1e12), 0.7, 1e-12);
    assert_near(ss_devtype_eff(0, xs, ys, 1e7), 1.0, 0);
}

/* d0 and d1 joined directly (latency 10) and via switch s (1 + 1): the
 * switch path wins on latency despite two hops. d2 hangs off s with an
 * asymmetric link (5 GB/s up, 2 GB/s down). */
static void test_latency_before_hops(void **state)
{
    (void)state;
    ss_machine *m = load("{" HDR "\"hosts\": [{\"name\": \"h\"}],"
                         "\"devices\": [{\"name\": \"d0\", \"type\": \"T4\", \"host\": \"h\"},"
                         "  {\"name\": \"d1\", \"type\": \"T4\", \"host\": \"h\"},"
                         "  {\"name\": \"d2\", \"type\": \"T4\", \"host\": \"h\"}],"
                         "\"switches\": [{\"name\": \"s\"}],"
                         "\"links\": ["
                         "  {\"a\": \"d0\", \"b\": \"d1\", \"gbps\": 100, \"latency_us\": 10, \"kind\": \"nvlink\"},"
                         "  {\"a\": \"d0\", \"b\": \"s\", \"gbps\": 8, \"latency_us\": 1, \"kind\": \"pcie\"},"
                         "  {\"a\": \"s\", \"b\": \"d1\", \"gbps\": 16, \"latency_us\": 1, \"kind\": \"pcie\"},"
                         "  {\"a\": \"d2\", \"b\": \"s\", \"gbps\": 5, \"gbps_ba\": 2, \"latency_us\": 3, \"kind\": \"pcie\"}]}");
    assert_int_equal(ss_machine_n_devices(m), 3);
    assert_int_equal(ss_machine_n_nodes(m), 4);
    assert_int_equal(ss_machine_n_links(m), 4);
    assert_int_equal(ss_machine_node(m, 3)->kind, SS_NODE_SWITCH);
    const int *ch;
    int n = -1;
    assert_int_equal(ss_machine_route(m, 0, 1, &ch, &n), SS_OK);
    /* d0 -> s is link 1 forwards (channel 2), s -> d1 is link 2 forwards (4) */
    assert_int_equal(n, 2);
    assert_int_equal(ch[0], 2);
    assert_int_equal(ch[1], 4);
    assert_near(ss_machine_path_gbps(m, 0, 1), 8, 0);
    assert_near(ss_machine_path_latency_us(m, 0, 1), 2, 1e-12);
    /* back: d1 -> s (channel 5), s -> d0 (channel 3) */
    assert_int_equal(ss_machine_route(m, 1, 0, &ch, &n), SS_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ch[0], 5);
    assert_int_equal(ch[1], 3);
    /* asymmetric: d2 sends at 5 GB/s (channel 6), receives at 2 (channel 7) */
    assert_near(ss_machine_channel_gbps(m, 6), 5, 0);
    assert_near(ss_machine_channel_gbps(m, 7), 2, 0);
    assert_near(ss_machine_channel_latency_us(m, 7), 3, 0);
    assert_near(ss_machine_path_gbps(m, 2, 1), 5, 0);  /* min(5, 16) */
    assert_near(ss_machine_path_gbps(m, 1, 2), 2, 0);  /* min(16, 2) */
    assert_near(ss_machine_path_gbps(m, 0, 2), 2, 0);  /* min(8, 2) */
    assert_near(ss_machine_path_latency_us(m, 0, 2), 4, 1e-12);
    /* src == dst: empty route */
    assert_int_equal(ss_machine_route(m, 1, 1, &ch, &n), SS_OK);
    assert_int_equal(n, 0);
    assert_true(isinf(ss_machine_path_gbps(m, 1, 1)));
    assert_near(ss_machine_path_latency_us(m, 1, 1), 0, 0);
    /* out of range */
    assert_int_equal(ss_machine_route(m, 0, 3, &ch, &n), SS_ERR_INVALID);
    assert_int_equal(ss_machine_route(m, -1, 0, &ch, &n), SS_ERR_INVALID);
    assert_near(ss_machine_channel_gbps(m, 8), 0, 0);
    ss_machine_free(m);
}

/* A chain of devices d0 - d1 - d2 (latency 1 each) and a slow switch path
 * d0 - s - d2 (latency 5 each): d1 does not forward, so d0 -> d2 takes the
 * switch (10 us) although the chain is faster (2 us). With the switch link
 * gone, the chain is the only path and is used. */
static void test_devices_do_not_forward(void **state)
{
    (void)state;
    const char *base = "{" HDR "\"hosts\": [{\"name\": \"h\"}],"
                       "\"devices\": [{\"name\": \"d0\", \"type\": \"T4\", \"host\": \"h\"},"
                       "  {\"name\": \"d1\", \"type\": \"T4\", \"host\": \"h\"},"
                       "  {\"name\": \"d2\", \"type\": \"T4\", \"host\": \"h\"}],"
                       "\"switches\": [{\"name\": \"s\"}],"
                       "\"links\": ["
                       "  {\"a\": \"d0\", \"b\": \"d1\", \"gbps\": 50, \"latency_us\": 1, \"kind\": \"nvlink\"},"
                       "  {\"a\": \"d1\", \"b\": \"d2\", \"gbps\": 50, \"latency_us\": 1, \"kind\": \"nvlink\"},"
                       "  {\"a\": \"d1\", \"b\": \"s\", \"gbps\": 9, \"latency_us\": 5, \"kind\": \"pcie\"}%s]}";
    char buf[2048];
    snprintf(buf, sizeof buf, base,
             ",{\"a\": \"d0\", \"b\": \"s\", \"gbps\": 10, \"latency_us\": 5, \"kind\": \"pcie\"},"
             "{\"a\": \"d2\", \"b\": \"s\", \"gbps\": 10, \"latency_us\": 5, \"kind\": \"pcie\"}");
    ss_machine *m = load(buf);
    assert_string_equal(hops(m, 0, 2), "s d2");
    assert_near(ss_machine_path_latency_us(m, 0, 2), 10, 1e-12);
    assert_near(ss_machine_path_gbps(m, 0, 2), 10, 0);
    assert_string_equal(hops(m, 0, 1), "d1");
    ss_machine_free(m);
    snprintf(buf, sizeof buf, base, "");
    m = load(buf);
    assert_string_equal(hops(m, 0, 2), "d1 d2");
    assert_near(ss_machine_path_latency_us(m, 0, 2), 2, 1e-12);
    ss_machine_free(m);
}

/* Two equal paths d0 - sA - d1 and d0 - sB - d1 (same latency and hops):
 * the predecessor with the lower node id wins, whatever the link order. */
static void test_ties_by_node_id(void **state)
{
    (void)state;
    const char *json = "{" HDR "\"hosts\": [{\"name\": \"h\"}],"
                       "\"devices\": [{\"name\": \"d0\", \"type\": \"T4\", \"host\": \"h\"},"
                       "  {\"name\": \"d1\", \"type\": \"T4\", \"host\": \"h\"}],"
                       "\"switches\": [{\"name\": \"sA\"}, {\"name\": \"sB\"}],"
                       "\"links\": ["
                       "  {\"a\": \"d0\", \"b\": \"sB\", \"gbps\": 1, \"latency_us\": 0.3, \"kind\": \"x\"},"
                       "  {\"a\": \"sB\", \"b\": \"d1\", \"gbps\": 1, \"latency_us\": 0.2, \"kind\": \"x\"},"
                       "  {\"a\": \"d0\", \"b\": \"sA\", \"gbps\": 2, \"latency_us\": 0.1, \"kind\": \"x\"},"
                       "  {\"a\": \"sA\", \"b\": \"d1\", \"gbps\": 2, \"latency_us\": 0.4, \"kind\": \"x\"}]}";
    ss_machine *m = load(json);
    /* 0.1 + 0.4 == 0.3 + 0.2 exactly in integer ns; sA (node 2) < sB (node 3) */
    assert_string_equal(hops(m, 0, 1), "sA d1");
    assert_string_equal(hops(m, 1, 0), "sA d0");
    assert_near(ss_machine_path_gbps(m, 0, 1), 2, 0);
    ss_machine_free(m);
}

/* Peers: p0 (refuses), p1 (refuses), p2 (accepts, 30 ms), p3 (accepts,
 * 10 ms), p4 (accepts, 10 ms). p0 -> p1 relays through the accepting peer
 * of lowest latency: p3 and p4 tie at 10 ms, so p3 (lower id). */
static void test_firewall_relay(void **state)
{
    (void)state;
    ss_machine *m = load("{" HDR "\"peers\": ["
                         "{\"name\": \"p0\", \"type\": \"T4\", \"up_mbps\": 80, \"down_mbps\": 800,"
                         " \"accepts_connections\": false, \"latency_ms\": 20},"
                         "{\"name\": \"p1\", \"type\": \"K80\", \"up_mbps\": 40, \"down_mbps\": 400,"
                         " \"accepts_connections\": false, \"latency_ms\": 5},"
                         "{\"name\": \"p2\", \"type\": \"T4\", \"up_mbps\": 1000, \"down_mbps\": 1000,"
                         " \"latency_ms\": 30},"
                         "{\"name\": \"p3\", \"type\": \"RTX3090\", \"up_mbps\": 16, \"down_mbps\": 160,"
                         " \"latency_ms\": 10},"
                         "{\"name\": \"p4\", \"type\": \"RTX3090\", \"up_mbps\": 500, \"down_mbps\": 500,"
                         " \"latency_ms\": 10}]}");
    assert_int_equal(ss_machine_n_devices(m), 5);
    assert_int_equal(ss_machine_n_hosts(m), 5);
    assert_int_equal(ss_machine_n_nodes(m), 6); /* + the internet switch */
    assert_int_equal(ss_machine_node(m, 5)->kind, SS_NODE_SWITCH);
    assert_string_equal(ss_machine_node(m, 5)->name, "internet");
    const ss_device *p0 = ss_machine_device(m, 0);
    assert_near(p0->up_gbps, 0.01, 1e-15);  /* 80 Mb/s = 0.01 GB/s */
    assert_near(p0->down_gbps, 0.1, 1e-15); /* 800 Mb/s */
    assert_int_equal(p0->accepts_connections, 0);
    assert_int_equal(ss_machine_device(m, 2)->accepts_connections, 1);
    const ss_link *l = ss_machine_link(m, 0);
    assert_string_equal(l->kind, "internet");
    assert_near(l->latency_us, 20000, 1e-9);
    /* p0 -> p2 direct: up of p0 (0.01), down of p2 (0.125); 20 + 30 ms */
    assert_string_equal(hops(m, 0, 2), "internet p2");
    assert_near(ss_machine_path_gbps(m, 0, 2), 0.01, 1e-15);
    assert_near(ss_machine_path_latency_us(m, 0, 2), 50000, 1e-6);
    /* p0 -> p1 relayed via p3: min(0.01, 0.02, 0.002, 0.05) = 0.002 (p3's upload);
     * latency 20 + 10 + 10 + 5 ms */
    assert_string_equal(hops(m, 0, 1), "internet p3 internet p1");
    assert_near(ss_machine_path_gbps(m, 0, 1), 0.002, 1e-15);
    assert_near(ss_machine_path_latency_us(m, 0, 1), 45000, 1e-6);
    assert_string_equal(hops(m, 1, 0), "internet p3 internet p0");
    /* a refusing peer reaches an accepting one directly, both ways */
    assert_string_equal(hops(m, 2, 1), "internet p1");
    ss_machine_free(m);

    /* only refusing peers: no route between them */
    m = load("{" HDR "\"peers\": ["
             "{\"name\": \"a\", \"type\": \"T4\", \"up_mbps\": 10, \"down_mbps\": 100,"
             " \"accepts_connections\": false, \"latency_ms\": 20},"
             "{\"name\": \"b\", \"type\": \"T4\", \"up_mbps\": 10, \"down_mbps\": 100,"
             " \"accepts_connections\": false, \"latency_ms\": 20}]}");
    const int *ch = NULL;
    int n = 42;
    assert_int_equal(ss_machine_route(m, 0, 1, &ch, &n), SS_ERR_INVALID);
    assert_null(ch);
    assert_int_equal(n, 42);
    assert_near(ss_machine_path_gbps(m, 0, 1), 0, 0);
    assert_true(isinf(ss_machine_path_latency_us(m, 0, 1)));
    ss_machine_free(m);
}

/* 64 nodes x 8 A100 (512 devices) are past the eager threshold: routes are
 * computed on demand and cached; pointers stay valid while the cache grows. */
static void test_lazy_routes(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/dgx-a100.json"), 64, &m, &d),
                     SS_OK);
    assert_int_equal(ss_machine_n_devices(m), 512);
    int src = dev(m, "n0.gpu0"), dst = dev(m, "n63.gpu7");
    const int *first;
    int n1;
    assert_int_equal(ss_machine_route(m, src, dst, &first, &n1), SS_OK);
    int saved[16];
    assert_int_equal(n1, 6);
    memcpy(saved, first, sizeof(int) * (size_t)n1);
    assert_string_equal(hops(m, src, dst), "n0.pcie0 n0.nic0 core n63.nic7 n63.pcie7 n63.gpu7");
    /* 2 + 2 + 1 + 1 + 2 + 2 us; bottleneck HDR 25 GB/s */
    assert_near(ss_machine_path_latency_us(m, src, dst), 10, 1e-9);
    assert_near(ss_machine_path_gbps(m, src, dst), 25, 0);
    /* fill the cache with every pair from and to device 0 and a ring */
    for (int i = 0; i < 512; i++) {
        assert_true(ss_machine_path_gbps(m, 0, i) > 0);
        assert_true(ss_machine_path_gbps(m, i, 0) > 0);
        assert_true(ss_machine_path_gbps(m, i, (i + 1) % 512) > 0);
    }
    const int *again;
    int n2;
    assert_int_equal(ss_machine_route(m, src, dst, &again, &n2), SS_OK);
    assert_ptr_equal(again, first);
    assert_int_equal(n2, n1);
    assert_memory_equal(first, saved, sizeof(int) * (size_t)n1);
    /* same node: through the NVSwitch, 300 GB/s, 1 + 1 us */
    assert_string_equal(hops(m, dev(m, "n5.gpu3"), dev(m, "n5.gpu6")), "n5.nvswitch n5.gpu6");
    assert_near(ss_machine_path_gbps(m, dev(m, "n5.gpu3"), dev(m, "n5.gpu6")), 300, 0);
    ss_machine_free(m);
}

/* ---- routes against a reference ---- */

/* A reference router written from the rules (docs/topology-format.md,
 * "Routing"), sharing no code with core/machine.c: per source a plain
 * O(n^2) Dijkstra over (forwards, latency in integer ns, hops), the
 * lowest-id predecessor (then the lowest channel) on ties; two refusing
 * peers relay through the accepting device of lowest route latency, then
 * lowest id. */
typedef struct ref {
    const ss_machine *m;
    int nn, nd, nch;
    int *off, *chs;      /* channels leaving each node, by increasing id */
    int *from, *to;      /* per channel */
    int64_t *clat;       /* per channel, ns */
    int64_t *lat;        /* nd x nn: latency from each source */
    int *pred;           /* nd x nn: channel into each node, -1 none */
} ref;

static void ref_init(ref *r, const ss_machine *m)
{
    r->m = m;
    r->nn = ss_machine_n_nodes(m);
    r->nd = ss_machine_n_devices(m);
    r->nch = 2 * ss_machine_n_links(m);
    r->off = test_calloc((size_t)r->nn + 1, sizeof *r->off);
    r->chs = test_calloc((size_t)r->nch + 1, sizeof *r->chs);
    r->lat = test_calloc((size_t)r->nd * (size_t)r->nn, sizeof *r->lat);
    r->pred = test_calloc((size_t)r->nd * (size_t)r->nn, sizeof *r->pred);
    r->from = test_calloc((size_t)r->nch + 1, sizeof *r->from);
    r->to = test_calloc((size_t)r->nch + 1, sizeof *r->to);
    r->clat = test_calloc((size_t)r->nch + 1, sizeof *r->clat);
    for (int c = 0; c < r->nch; c++) {
        const ss_link *l = ss_machine_link(m, c / 2);
        r->from[c] = (c & 1) ? l->b : l->a;
        r->to[c] = (c & 1) ? l->a : l->b;
        r->clat[c] = (int64_t)llround(l->latency_us * 1000.0);
    }
    int k = 0;
    for (int u = 0; u < r->nn; u++) {
        r->off[u] = k;
        for (int c = 0; c < r->nch; c++)
            if (r->from[c] == u && ss_machine_channel_gbps(m, c) > 0)
                r->chs[k++] = c;
    }
    r->off[r->nn] = k;
    int *fwd = test_calloc((size_t)r->nn, sizeof *fwd), *hop = test_calloc((size_t)r->nn, sizeof *hop);
    char *done = test_calloc((size_t)r->nn, 1);
    for (int s = 0; s < r->nd; s++) {
        int64_t *lat = r->lat + (size_t)s * (size_t)r->nn;
        int *pred = r->pred + (size_t)s * (size_t)r->nn;
        for (int v = 0; v < r->nn; v++) {
            fwd[v] = hop[v] = INT32_MAX;
            lat[v] = INT64_MAX;
            pred[v] = -1;
            done[v] = 0;
        }
        fwd[s] = hop[s] = 0;
        lat[s] = 0;
        for (;;) {
            int u = -1;
            for (int v = 0; v < r->nn; v++)
                if (!done[v] && fwd[v] != INT32_MAX &&
                    (u < 0 || fwd[v] < fwd[u] || (fwd[v] == fwd[u] && lat[v] < lat[u]) ||
                     (fwd[v] == fwd[u] && lat[v] == lat[u] && hop[v] < hop[u])))
                    u = v; /* ascending v: the lowest id among equal keys */
            if (u < 0)
                break;
            done[u] = 1;
            int f = fwd[u] + (u != s && u < r->nd);
            for (int i = r->off[u]; i < r->off[u + 1]; i++) {
                int c = r->chs[i], v = r->to[c];
                int64_t l = lat[u] + r->clat[c];
                int h = hop[u] + 1;
                if (done[v])
                    continue;
                int better = f < fwd[v] || (f == fwd[v] && l < lat[v]) ||
                             (f == fwd[v] && l == lat[v] && h < hop[v]) ||
                             (f == fwd[v] && l == lat[v] && h == hop[v] &&
                              u < r->from[pred[v]]);
                if (better) {
                    fwd[v] = f;
                    lat[v] = l;
                    hop[v] = h;
                    pred[v] = c;
                }
            }
        }
    }
    test_free(fwd);
    test_free(hop);
    test_free(done);
}

static void ref_free(ref *r)
{
    test_free(r->off);
    test_free(r->chs);
    test_free(r->lat);
    test_free(r->pred);
    test_free(r->from);
    test_free(r->to);
    test_free(r->clat);
}

/* The direct route s -> t into out (reversed walk, then flipped); -1 when
 * unreachable. */
static int ref_direct(const ref *r, int s, int t, int *out)
{
    const int *pred = r->pred + (size_t)s * (size_t)r->nn;
    if (s != t && pred[t] < 0)
        return -1;
    int n = 0;
    for (int v = t; v != s; v = r->from[pred[v]])
        out[n++] = pred[v];
    for (int i = 0; i < n / 2; i++) {
        int x = out[i];
        out[i] = out[n - 1 - i];
        out[n - 1 - i] = x;
    }
    return n;
}

static int refuses(const ss_machine *m, int dv) { return !ss_machine_device(m, dv)->accepts_connections; }

/* The reference route s -> t (relayed when both refuse); -1 unreachable. */
static int ref_route(const ref *r, int s, int t, int *out)
{
    if (s == t || !refuses(r->m, s) || !refuses(r->m, t))
        return ref_direct(r, s, t, out);
    int best = -1;
    int64_t best_lat = INT64_MAX;
    for (int x = 0; x < r->nd; x++) {
        if (x == s || x == t || refuses(r->m, x))
            continue;
        int64_t a = r->lat[(size_t)s * (size_t)r->nn + (size_t)x];
        int64_t b = r->lat[(size_t)x * (size_t)r->nn + (size_t)t];
        if (a == INT64_MAX || b == INT64_MAX)
            continue;
        if (a + b < best_lat) {
            best_lat = a + b;
            best = x;
        }
    }
    if (best < 0)
        return -1;
    int n = ref_direct(r, s, best, out);
    return n + ref_direct(r, best, t, out + n);
}

/* Every every-th pair of m, asked in a scrambled order (pair k = i * 7919
 * mod n^2, so sources come back after their trees were evicted), equals the
 * reference. */
static void check_routes(ss_machine *m, const ref *r, int every, const char *what)
{
    int nd = r->nd, *want = test_calloc(2 * (size_t)r->nn + 2, sizeof *want);
    long long total = (long long)nd * nd, checked = 0;
    assert_true(total % 7919 != 0);
    for (long long i = 0; i < total; i += every) {
        long long k = i * 7919 % total;
        int s = (int)(k / nd), t = (int)(k % nd);
        const int *ch = NULL;
        int n = -1;
        int wn = ref_route(r, s, t, want);
        ss_status st = ss_machine_route(m, s, t, &ch, &n);
        if (wn < 0) {
            if (st != SS_ERR_INVALID)
                fail_msg("%s: %d -> %d: status %s, expected unreachable", what, s, t,
                         ss_status_name(st));
            continue;
        }
        if (st != SS_OK || n != wn || (n > 0 && memcmp(ch, want, (size_t)n * sizeof *ch)))
            fail_msg("%s: %d -> %d: route differs from the reference (%d vs %d channels)", what,
                     s, t, n, wn);
        checked++;
    }
    assert_true(checked > 0);
    test_free(want);
}

static void check_against_reference(ss_machine *m, const char *what)
{
    ref r;
    ref_init(&r, m);
    check_routes(m, &r, 1, what);
    ref_free(&r);
}

/* The repository's topologies (eager: routes made at load) and lazy machines
 * past the eager threshold: 33 DGX A100 nodes (264 devices) with complete
 * trees kept, the same with no memory for them (partial trees restarted),
 * and 300 internet peers of which about a third refuse connections (relays,
 * unreachable pairs none: some peers accept). */
static void test_routes_match_reference(void **state)
{
    (void)state;
    static const char *files[] = {"topologies/p100x16.json", "topologies/dgx1-v100.json",
                                  "topologies/k80x64.json", "topologies/h100x8.json",
                                  "topologies/local-cpu.json", "topologies/volunteers40.json",
                                  "topologies/dgx-a100.json", "tests/data/sim/ring4.json",
                                  "tests/data/sim/star3.json", "tests/data/sim/line4.json"};
    ss_diag d;
    ss_diag_init(&d);
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        ss_machine *m = NULL;
        assert_int_equal(ss_machine_load(ss_test_path(files[i]), &m, &d), SS_OK);
        check_against_reference(m, files[i]);
        ss_machine_free(m);
    }
    ref r;
    /* budget 2: route classes (identical hosts); 0 and 1: the classes
     * dropped, so that the trees answer (with and without kept trees) */
    for (int budget = 0; budget < 3; budget++) {
        ss_machine *m = NULL;
        assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/dgx-a100.json"), 33, &m, &d),
                         SS_OK);
        assert_int_equal(ss_machine_n_devices(m), 264);
        assert_int_equal(ss_routeclass_positions(m), 8);
        if (budget < 2) {
            ss_routeclass_free(m->rc);
            m->rc = NULL;
        }
        if (!budget) {
            ref_init(&r, m);
            m->tree_budget = 0;
        }
        r.m = m; /* the later machines are the same as the first */
        /* without kept trees nearly every query restarts a tree: a sample */
        check_routes(m, &r, budget == 0 ? 23 : 1,
                     budget == 0 ? "dgx-a100 x33, no kept trees"
                                 : budget == 1 ? "dgx-a100 x33" : "dgx-a100 x33, route classes");
        assert_true(budget == 1 ? m->done_bytes > 0 : m->done_bytes == 0);
        ss_machine_free(m);
    }
    ref_free(&r);
    static const char *types[] = {"T4", "RTX3090", "K80", "V100-SXM2-16GB", "CPU-core"};
    size_t cap = 300 * 200 + 256, len = 0;
    char *json = test_malloc(cap);
    len += (size_t)snprintf(json + len, cap - len, "{" HDR "\"peers\": [");
    unsigned x = 12345;
    for (int i = 0; i < 300; i++) {
        unsigned a = (x = x * 1103515245u + 12345u) >> 8, b = (x = x * 1103515245u + 12345u) >> 8;
        len += (size_t)snprintf(json + len, cap - len,
                                "%s{\"name\": \"p%d\", \"type\": \"%s\", \"up_mbps\": %u, "
                                "\"down_mbps\": %u, \"accepts_connections\": %s, "
                                "\"latency_ms\": %u.%u}",
                                i ? "," : "", i, types[a % 5], 10 + a % 500, 50 + b % 1000,
                                b % 3 ? "true" : "false", 5 + a % 40, b % 10);
    }
    snprintf(json + len, cap - len, "]}");
    ss_machine *m = load(json);
    test_free(json);
    assert_int_equal(ss_machine_n_devices(m), 300);
    check_against_reference(m, "300 peers");
    ss_machine_free(m);
}

/* ---- route classes ---- */

/* route(sig a, sig b) == chmap(route(a, b)) for every pair, channel figures
 * equal. */
static void check_automorphism(const ss_machine *m, const int *sig, const int *chmap)
{
    int nd = ss_machine_n_devices(m);
    for (int a = 0; a < nd; a++)
        for (int b = 0; b < nd; b++) {
            const int *r1, *r2;
            int n1, n2;
            assert_int_equal(ss_machine_route(m, a, b, &r1, &n1), SS_OK);
            assert_int_equal(ss_machine_route(m, sig[a], sig[b], &r2, &n2), SS_OK);
            assert_int_equal(n1, n2);
            for (int i = 0; i < n1; i++) {
                assert_int_equal(chmap[r1[i]], r2[i]);
                assert_true(ss_machine_channel_gbps(m, r1[i]) == ss_machine_channel_gbps(m, r2[i]));
            }
        }
}

/* Machines of identical hosts have route classes (one representative per
 * device position); host permutations are route automorphisms, other
 * permutations are not reported as such; hosts that differ, links between
 * hosts and single-host machines have none. */
static void test_route_classes(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/dgx-a100.json"), 6, &m, &d),
                     SS_OK);
    assert_int_equal(ss_routeclass_positions(m), 8);
    int nd = ss_machine_n_devices(m), nch = 2 * ss_machine_n_links(m);
    int *sig = test_calloc((size_t)nd, sizeof *sig), *chmap = test_calloc((size_t)nch, sizeof *chmap);
    /* hosts rotated by two: node n -> n + 2 (mod 6), same position */
    for (int a = 0; a < nd; a++)
        sig[a] = (a + 16) % nd;
    assert_int_equal(ss_routeclass_automorphism(m, sig, chmap), 1);
    check_automorphism(m, sig, chmap);
    /* hosts 1 and 4 swapped, the others fixed */
    for (int a = 0; a < nd; a++)
        sig[a] = a / 8 == 1 ? a + 24 : a / 8 == 4 ? a - 24 : a;
    assert_int_equal(ss_routeclass_automorphism(m, sig, chmap), 1);
    check_automorphism(m, sig, chmap);
    /* a shift by one device moves positions: not a host permutation */
    for (int a = 0; a < nd; a++)
        sig[a] = (a + 1) % nd;
    assert_int_equal(ss_routeclass_automorphism(m, sig, chmap), 0);
    /* two hosts onto one */
    for (int a = 0; a < nd; a++)
        sig[a] = a % 8;
    assert_int_equal(ss_routeclass_automorphism(m, sig, chmap), 0);
    test_free(sig);
    test_free(chmap);
    ss_machine_free(m);
    /* p100x16 and k80x64: identical nodes; dgx1-v100: one host */
    assert_int_equal(ss_machine_load(ss_test_path("topologies/p100x16.json"), &m, &d), SS_OK);
    assert_int_equal(ss_routeclass_positions(m), 4);
    ss_machine_free(m);
    assert_int_equal(ss_machine_load(ss_test_path("topologies/dgx1-v100.json"), &m, &d), SS_OK);
    assert_int_equal(ss_routeclass_positions(m), 0);
    ss_machine_free(m);
    /* two hosts of two devices on a switch each; the core links differ in
     * latency, then a link joins the hosts directly */
    static const char *const shapes[] = {
        "{" HDR "\"hosts\": [{\"name\": \"h0\"}, {\"name\": \"h1\"}],"
        "\"devices\": [{\"name\": \"a0\", \"type\": \"A100-SXM4-80GB\", \"host\": \"h0\"},"
        " {\"name\": \"a1\", \"type\": \"A100-SXM4-80GB\", \"host\": \"h0\"},"
        " {\"name\": \"b0\", \"type\": \"A100-SXM4-80GB\", \"host\": \"h1\"},"
        " {\"name\": \"b1\", \"type\": \"A100-SXM4-80GB\", \"host\": \"h1\"}],"
        "\"switches\": [{\"name\": \"sa\", \"host\": \"h0\"}, {\"name\": \"sb\", \"host\": \"h1\"},"
        " {\"name\": \"core\"}],"
        "\"links\": [{\"a\": \"a0\", \"b\": \"sa\", \"kind\": \"nvlink\", \"gbps\": 100, \"latency_us\": 1},"
        " {\"a\": \"a1\", \"b\": \"sa\", \"kind\": \"nvlink\", \"gbps\": 100, \"latency_us\": 1},"
        " {\"a\": \"b0\", \"b\": \"sb\", \"kind\": \"nvlink\", \"gbps\": 100, \"latency_us\": 1},"
        " {\"a\": \"b1\", \"b\": \"sb\", \"kind\": \"nvlink\", \"gbps\": 100, \"latency_us\": 1},"
        " {\"a\": \"sa\", \"b\": \"core\", \"kind\": \"infiniband\", \"gbps\": 25, \"latency_us\": 1},"
        " {\"a\": \"sb\", \"b\": \"core\", \"kind\": \"infiniband\", \"gbps\": 25, \"latency_us\": %s}%s]}",
    };
    char json[2048];
    snprintf(json, sizeof json, shapes[0], "1", "");
    m = load(json);
    assert_int_equal(ss_routeclass_positions(m), 2);
    check_against_reference(m, "two hosts");
    ss_machine_free(m);
    snprintf(json, sizeof json, shapes[0], "2", "");
    m = load(json);
    assert_int_equal(ss_routeclass_positions(m), 0);
    check_against_reference(m, "two hosts, core links differ");
    ss_machine_free(m);
    snprintf(json, sizeof json, shapes[0], "1",
             ", {\"a\": \"a1\", \"b\": \"b0\", \"kind\": \"nvlink\", \"gbps\": 50, \"latency_us\": 1}");
    m = load(json);
    assert_int_equal(ss_routeclass_positions(m), 0);
    check_against_reference(m, "two hosts joined");
    ss_machine_free(m);
}

static void test_fingerprint(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(ss_machine_load(ss_test_path("topologies/p100x16.json"), &a, &d), SS_OK);
    assert_int_equal(ss_machine_load(ss_test_path("topologies/p100x16.json"), &b, &d), SS_OK);
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/p100x16.json"), 8, &c, &d),
                     SS_OK);
    assert_true(ss_machine_fingerprint(a) == ss_machine_fingerprint(b));
    assert_true(ss_machine_fingerprint(a) != ss_machine_fingerprint(c));
    assert_int_equal(ss_machine_n_devices(c), 32);
    ss_machine_free(a);
    ss_machine_free(b);
    ss_machine_free(c);
    ss_machine_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtins),
        cmocka_unit_test(test_eff_interpolation),
        cmocka_unit_test(test_latency_before_hops),
        cmocka_unit_test(test_devices_do_not_forward),
        cmocka_unit_test(test_ties_by_node_id),
        cmocka_unit_test(test_firewall_relay),
        cmocka_unit_test(test_lazy_routes),
        cmocka_unit_test(test_routes_match_reference),
        cmocka_unit_test(test_route_classes),
        cmocka_unit_test(test_fingerprint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
