/*
 * test_topology_io.c — the topology loader and writer: every shipped file
 * (counts, hand-checked routes and bottlenecks), compact expansion and the
 * --nodes override, device-type overrides, save -> load round trips with the
 * same fingerprint, every bad fixture (message names the file and carries
 * the expected text), and allocation failures at every step of a load.
 */
#include "testutil.h"
#include "simulator/collective.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HDR "\"format\": \"simsearch-topology\", \"version\": 1, \"name\": \"t\", "

static const char *const shipped[] = {"p100x16",  "k80x64",   "dgx1-v100", "dgx-a100",
                                      "h100x8",   "volunteers40", "local-cpu", "dgx-h100",
                                      "dgx-h200", "dgx-b200", "gb200-nvl72"};
#define N_SHIPPED (sizeof shipped / sizeof shipped[0])

static ss_machine *load_file(const char *rel, int nodes)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    ss_status st = ss_machine_load_nodes(ss_test_path(rel), nodes, &m, &d);
    if (st != SS_OK)
        print_error("%s: %s\n", rel, d.msg);
    assert_int_equal(st, SS_OK);
    return m;
}

static ss_machine *load_str(const char *json)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    ss_status st = ss_machine_load_string(json, "inline.json", &m, &d);
    if (st != SS_OK)
        print_error("%s\n", d.msg);
    assert_int_equal(st, SS_OK);
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

static int route_len(const ss_machine *m, const char *a, const char *b)
{
    const int *ch;
    int n;
    assert_int_equal(ss_machine_route(m, dev(m, a), dev(m, b), &ch, &n), SS_OK);
    return n;
}

static double bw(const ss_machine *m, const char *a, const char *b)
{
    return ss_machine_path_gbps(m, dev(m, a), dev(m, b));
}

static double lat(const ss_machine *m, const char *a, const char *b)
{
    return ss_machine_path_latency_us(m, dev(m, a), dev(m, b));
}

static void test_p100x16(void **state)
{
    (void)state;
    ss_machine *m = load_file("topologies/p100x16.json", 0);
    assert_string_equal(ss_machine_name(m), "p100x16");
    assert_int_equal(ss_machine_n_devices(m), 16);
    assert_int_equal(ss_machine_n_hosts(m), 4);
    assert_int_equal(ss_machine_n_types(m), 1);
    /* 16 devices + per node one PCIe switch and one NIC + the core switch */
    assert_int_equal(ss_machine_n_nodes(m), 16 + 4 + 1 + 4);
    /* per node: 6 NVLink pairs + 4 GPU-PCIe + NIC-PCIe + NIC-core */
    assert_int_equal(ss_machine_n_links(m), 4 * 12);
    const ss_device *d5 = ss_machine_device(m, 5);
    assert_string_equal(d5->name, "n1.gpu1");
    assert_int_equal(d5->host, 1);
    assert_int_equal(d5->local_rank, 1);
    assert_string_equal(ss_machine_type(m, d5->type)->name, "P100-SXM2");
    /* same node: one NVLink hop, 20 GB/s, 1 us */
    assert_int_equal(route_len(m, "n0.gpu0", "n0.gpu3"), 1);
    assert_near(bw(m, "n0.gpu0", "n0.gpu3"), 20, 0);
    assert_near(lat(m, "n0.gpu0", "n0.gpu3"), 1, 1e-12);
    /* across nodes: GPU-PCIe-NIC-core-NIC-PCIe-GPU, EDR 12.5 GB/s the bottleneck
     * (PCIe 15.75), latency 2 + 2 + 1 + 1 + 2 + 2 */
    assert_int_equal(route_len(m, "n0.gpu2", "n3.gpu1"), 6);
    assert_near(bw(m, "n0.gpu2", "n3.gpu1"), 12.5, 0);
    assert_near(lat(m, "n0.gpu2", "n3.gpu1"), 10, 1e-12);
    ss_machine_free(m);
}

static void test_k80x64(void **state)
{
    (void)state;
    ss_machine *m = load_file("topologies/k80x64.json", 0);
    assert_int_equal(ss_machine_n_devices(m), 64);
    assert_int_equal(ss_machine_n_hosts(m), 16);
    /* same node over the PCIe switch: 12 GB/s, 2 hops, 4 us */
    assert_int_equal(route_len(m, "n7.gpu0", "n7.gpu3"), 2);
    assert_near(bw(m, "n7.gpu0", "n7.gpu3"), 12, 0);
    assert_near(lat(m, "n7.gpu0", "n7.gpu3"), 4, 1e-12);
    /* across nodes: FDR 6.8 GB/s */
    assert_int_equal(route_len(m, "n0.gpu0", "n15.gpu3"), 6);
    assert_near(bw(m, "n0.gpu0", "n15.gpu3"), 6.8, 0);
    ss_machine_free(m);
}

static void test_dgx1(void **state)
{
    (void)state;
    ss_machine *m = load_file("topologies/dgx1-v100.json", 0);
    assert_int_equal(ss_machine_n_devices(m), 8);
    assert_int_equal(ss_machine_n_hosts(m), 1);
    /* hybrid cube-mesh: gpu0-gpu3 is a double link (50), gpu0-gpu1 single (25) */
    assert_near(bw(m, "gpu0", "gpu3"), 50, 0);
    assert_near(bw(m, "gpu0", "gpu1"), 25, 0);
    assert_near(bw(m, "gpu0", "gpu4"), 50, 0);
    assert_int_equal(route_len(m, "gpu1", "gpu5"), 1);
    /* every GPU has six NVLinks */
    for (int g = 0; g < 8; g++) {
        int links = 0;
        for (int l = 0; l < ss_machine_n_links(m); l++) {
            const ss_link *L = ss_machine_link(m, l);
            if (!strcmp(L->kind, "nvlink") && (L->a == g || L->b == g))
                links += (int)(L->gbps_ab / 25.0 + 0.5);
        }
        assert_int_equal(links, 6);
    }
    /* gpu0 and gpu5 share no NVLink: PCIe via both CPUs,
     * gpu0-pcie0-cpu0-cpu1-pcie2-gpu5, 12 GB/s, 5 x 2 us */
    assert_int_equal(route_len(m, "gpu0", "gpu5"), 5);
    assert_near(bw(m, "gpu0", "gpu5"), 12, 0);
    assert_near(lat(m, "gpu0", "gpu5"), 10, 1e-12);
    ss_machine_free(m);
}

static void test_nvswitch_and_nodes_override(void **state)
{
    (void)state;
    ss_machine *m = load_file("topologies/h100x8.json", 0);
    assert_int_equal(ss_machine_n_devices(m), 8);
    assert_int_equal(route_len(m, "n0.gpu1", "n0.gpu6"), 2);
    assert_near(bw(m, "n0.gpu1", "n0.gpu6"), 450, 0);
    ss_machine_free(m);

    /* Hopper and Blackwell nodes: NVLink 4 450 GB/s, NVLink 5 900 GB/s per
     * direction; one 400 Gb/s NIC per GPU; a GB200 NVL72 rack is one NVLink
     * domain of 72 GPUs (docs/topology-format.md has the sources) */
    static const struct { const char *file, *type; int n; double nvl; } hb[] = {
        {"topologies/dgx-h100.json", "H100-SXM", 8, 450},
        {"topologies/dgx-h200.json", "H200-SXM", 8, 450},
        {"topologies/dgx-b200.json", "B200", 8, 900},
        {"topologies/gb200-nvl72.json", "GB200", 72, 900},
    };
    for (int i = 0; i < 4; i++) {
        m = load_file(hb[i].file, 2);
        char a[32], b[32];
        snprintf(a, sizeof a, "n0.gpu%d", hb[i].n - 1);
        snprintf(b, sizeof b, "n1.gpu%d", hb[i].n - 1);
        assert_int_equal(ss_machine_n_devices(m), 2 * hb[i].n);
        assert_string_equal(ss_machine_type(m, 0)->name, hb[i].type);
        assert_true(ss_machine_type(m, 0)->peak_tflops[SS_F8] > 0);
        assert_int_equal(route_len(m, "n0.gpu0", a), 2);
        assert_near(bw(m, "n0.gpu0", a), hb[i].nvl, 0);
        assert_near(bw(m, "n0.gpu0", b), 50, 0);
        ss_machine_free(m);
    }

    m = load_file("topologies/dgx-a100.json", 0);
    /* 8 GPUs + NVSwitch + 8 PCIe switches + core + 8 NICs */
    assert_int_equal(ss_machine_n_nodes(m), 26);
    assert_int_equal(ss_machine_n_links(m), 8 + 8 + 16);
    assert_string_equal(ss_machine_type(m, 0)->name, "A100-SXM4-80GB");
    ss_machine_free(m);

    m = load_file("topologies/dgx-a100.json", 4);
    assert_int_equal(ss_machine_n_devices(m), 32);
    assert_int_equal(ss_machine_n_hosts(m), 4);
    assert_int_equal(ss_machine_n_nodes(m), 4 * 25 + 1);
    assert_int_equal(ss_machine_n_links(m), 4 * 32);
    /* device i uses NIC i*k/D = i: n1.gpu5 -> n2.gpu2 leaves by n1.nic5 */
    const int *ch;
    int n;
    assert_int_equal(ss_machine_route(m, dev(m, "n1.gpu5"), dev(m, "n2.gpu2"), &ch, &n), SS_OK);
    assert_int_equal(n, 6);
    const ss_link *l1 = ss_machine_link(m, ch[1] / 2);
    int nic = (ch[1] & 1) ? l1->a : l1->b;
    assert_string_equal(ss_machine_node(m, nic)->name, "n1.nic5");
    assert_near(bw(m, "n1.gpu5", "n2.gpu2"), 25, 0);
    ss_machine_free(m);

    /* --nodes on an explicit file is an error naming the file */
    ss_diag d;
    ss_diag_init(&d);
    m = NULL;
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/dgx1-v100.json"), 2, &m, &d),
                     SS_ERR_INVALID);
    assert_null(m);
    assert_non_null(strstr(d.msg, "dgx1-v100.json"));
    assert_non_null(strstr(d.msg, "--nodes applies only to a compact topology"));
}

/* PCIe fabric with two NICs per node: two PCIe groups under a root. */
static void test_compact_pcie_groups_and_ring(void **state)
{
    (void)state;
    ss_machine *m = load_str("{" HDR "\"compact\": {\"nodes\": 2, \"devices_per_node\": 4,"
                             " \"device_type\": \"T4\","
                             " \"intra\": {\"kind\": \"pcie\", \"gbps\": 12, \"latency_us\": 2},"
                             " \"inter\": {\"kind\": \"ethernet\", \"gbps\": 3, \"latency_us\": 10,"
                             "  \"nics_per_node\": 2}}}");
    /* per node: 4 devices, pcie0, pcie1, cpu, 2 NICs; + core */
    assert_int_equal(ss_machine_n_nodes(m), 8 + 2 * 3 + 1 + 4);
    /* per node: 4 device-PCIe, 2 PCIe-root, 2 NIC-PCIe, 2 NIC-core */
    assert_int_equal(ss_machine_n_links(m), 20);
    /* gpu0 (group 0) -> gpu3 (group 1): pcie0, cpu, pcie1, gpu3 */
    assert_int_equal(route_len(m, "n0.gpu0", "n0.gpu3"), 4);
    assert_int_equal(route_len(m, "n0.gpu0", "n0.gpu1"), 2);
    /* n1.gpu2 is in group 2*2/4 = 1: reached by n1.nic1 */
    assert_int_equal(route_len(m, "n0.gpu0", "n1.gpu2"), 6);
    assert_near(bw(m, "n0.gpu0", "n1.gpu2"), 3, 0);
    assert_near(lat(m, "n0.gpu0", "n1.gpu2"), 2 + 2 + 10 + 10 + 2 + 2, 1e-12);
    ss_machine_free(m);

    /* NVLink ring of 4 on one node, no other path: gpu0 -> gpu2 goes
     * through gpu1 (2 hops), gpu0 -> gpu3 by the closing link */
    m = load_str("{" HDR "\"compact\": {\"nodes\": 1, \"devices_per_node\": 4,"
                 " \"device_type\": \"V100-SXM2-32GB\","
                 " \"intra\": {\"kind\": \"nvlink\", \"topology\": \"ring\", \"gbps\": 50,"
                 " \"latency_us\": 1}}}");
    assert_int_equal(ss_machine_n_links(m), 4);
    assert_int_equal(ss_machine_n_nodes(m), 4);
    assert_int_equal(route_len(m, "n0.gpu0", "n0.gpu2"), 2);
    assert_int_equal(route_len(m, "n0.gpu0", "n0.gpu3"), 1);
    ss_machine_free(m);
}

static void round_trip(ss_machine *m);

static void test_type_overrides(void **state)
{
    (void)state;
    ss_machine *m = load_str(
        "{" HDR "\"device_types\": ["
        " {\"name\": \"my-gpu\", \"base\": \"A100-SXM4-80GB\", \"mem_gib\": 40},"
        " {\"name\": \"V100-SXM2-16GB\", \"launch_us\": 7, \"peak_tflops\": {\"bf16\": 15.7}},"
        " {\"name\": \"npu\", \"peak_tflops\": {\"f32\": 3, \"f16\": 50}, \"mem_gbps\": 400,"
        "  \"mem_gib\": 24, \"eff_flops\": [[1e6, 0.2], [1e9, 0.9]],"
        "  \"eff_align\": [0.9, 0.5, 0.25], \"mb_overhead_us\": 1300, \"dispatch_window\": 22}],"
        "\"hosts\": [{\"name\": \"h\"}],"
        "\"devices\": [{\"name\": \"a\", \"type\": \"my-gpu\", \"host\": \"h\"},"
        " {\"name\": \"b\", \"type\": \"V100-SXM2-16GB\", \"host\": \"h\"},"
        " {\"name\": \"c\", \"type\": \"npu\", \"host\": \"h\"},"
        " {\"name\": \"e\", \"type\": \"T4\", \"host\": \"h\"}],"
        "\"switches\": [{\"name\": \"s\", \"host\": \"h\"}],"
        "\"links\": [{\"a\": \"a\", \"b\": \"s\", \"gbps\": 10, \"latency_us\": 1, \"kind\": \"pcie\"},"
        " {\"a\": \"b\", \"b\": \"s\", \"gbps\": 10, \"latency_us\": 1, \"kind\": \"pcie\"},"
        " {\"a\": \"c\", \"b\": \"s\", \"gbps\": 10, \"latency_us\": 1, \"kind\": \"pcie\"},"
        " {\"a\": \"e\", \"b\": \"s\", \"gbps\": 10, \"latency_us\": 1, \"kind\": \"pcie\"}]}");
    /* declared types first, then built-ins as first used */
    assert_int_equal(ss_machine_n_types(m), 4);
    const ss_device_type *my = ss_machine_type(m, 0);
    assert_string_equal(my->name, "my-gpu");
    assert_near(my->mem_gib, 40, 0);
    assert_near(my->mem_gbps, 2039, 0);
    assert_near(my->peak_tflops[SS_F16], 312, 0);
    const ss_device_type *v = ss_machine_type(m, 1);
    assert_near(v->launch_us, 7, 0);
    assert_near(v->peak_tflops[SS_BF16], 15.7, 0);
    assert_near(v->peak_tflops[SS_F16], 125, 0);
    const ss_device_type *npu = ss_machine_type(m, 2);
    assert_near(npu->peak_tflops[SS_F32], 3, 0);
    assert_int_equal(npu->n_eff_flops, 2);
    assert_near(ss_devtype_eff(npu->n_eff_flops, npu->eff_flops_x, npu->eff_flops_y, 1e9),
                        0.9, 0);
    assert_near(npu->launch_us, 5, 0); /* default for a GPU-like type */
    assert_near(npu->eff_align[0], 0.9, 0);
    assert_near(npu->eff_align[1], 0.5, 0);
    assert_near(npu->eff_align[2], 0.25, 0);
    /* not given: a built-in's factors (1 = no alignment penalty) */
    for (int k = 0; k < 3; k++)
        assert_near(v->eff_align[k], 1, 0);
    /* host dispatch (simulator/build_host.c): given, or the defaults (a
     * window of one operator: the launch floor per operator; no overhead) */
    assert_near(npu->mb_overhead_us, 1300, 0);
    assert_int_equal(npu->dispatch_window, 22);
    assert_near(v->mb_overhead_us, 0, 0);
    assert_int_equal(v->dispatch_window, 1);
    assert_int_equal(my->dispatch_window, 1);
    assert_string_equal(ss_machine_type(m, 3)->name, "T4");
    assert_int_equal(ss_machine_device(m, 3)->type, 3);
    /* the built-in table itself is untouched */
    assert_near(ss_devtype_find_builtin("V100-SXM2-16GB")->launch_us, 5, 0);
    round_trip(m); /* eff_align is written and read back (it is in the fingerprint) */
    /* so are the host-dispatch settings: a machine differing only there has
     * another fingerprint */
    ss_machine *w = load_str(
        "{" HDR "\"device_types\": [{\"name\": \"T4\", \"dispatch_window\": 0}],"
        "\"hosts\": [{\"name\": \"h\"}], \"devices\": [{\"name\": \"a\", \"type\": \"T4\", \"host\": \"h\"}]}");
    ss_machine *o = load_str(
        "{" HDR "\"device_types\": [{\"name\": \"T4\", \"mb_overhead_us\": 5}],"
        "\"hosts\": [{\"name\": \"h\"}], \"devices\": [{\"name\": \"a\", \"type\": \"T4\", \"host\": \"h\"}]}");
    ss_machine *t = load_str(
        "{" HDR "\"device_types\": [{\"name\": \"T4\", \"dispatch_window\": 1}],"
        "\"hosts\": [{\"name\": \"h\"}], \"devices\": [{\"name\": \"a\", \"type\": \"T4\", \"host\": \"h\"}]}");
    assert_int_equal(ss_machine_type(w, 0)->dispatch_window, 0);
    assert_true(ss_machine_fingerprint(w) != ss_machine_fingerprint(t));
    assert_true(ss_machine_fingerprint(o) != ss_machine_fingerprint(t));
    round_trip(w);
    round_trip(o);
    ss_machine_free(w);
    ss_machine_free(o);
    ss_machine_free(t);
    ss_machine_free(m);
}

/* save -> load (file) and to_string -> load_string give the same machine. */
static void round_trip(ss_machine *m)
{
    ss_diag d;
    ss_diag_init(&d);
    char *s = NULL;
    assert_int_equal(ss_machine_to_string(m, &s, &d), SS_OK);
    ss_machine *r = NULL;
    assert_int_equal(ss_machine_load_string(s, "round-trip", &r, &d), SS_OK);
    ss_free(s);
    assert_true(ss_machine_fingerprint(r) == ss_machine_fingerprint(m));
    assert_int_equal(ss_machine_n_devices(r), ss_machine_n_devices(m));
    assert_int_equal(ss_machine_n_nodes(r), ss_machine_n_nodes(m));
    assert_int_equal(ss_machine_n_links(r), ss_machine_n_links(m));
    assert_int_equal(ss_machine_n_hosts(r), ss_machine_n_hosts(m));
    for (int i = 0; i < ss_machine_n_nodes(m); i++)
        assert_string_equal(ss_machine_node(r, i)->name, ss_machine_node(m, i)->name);
    for (int i = 0; i < ss_machine_n_devices(m); i++)
        assert_int_equal(ss_machine_device(r, i)->accepts_connections,
                         ss_machine_device(m, i)->accepts_connections);
    ss_machine_free(r);

    char path[128];
    snprintf(path, sizeof path, "/tmp/ss_topo_rt_%ld.json", (long)getpid());
    assert_int_equal(ss_machine_save(m, path, &d), SS_OK);
    r = NULL;
    assert_int_equal(ss_machine_load(path, &r, &d), SS_OK);
    assert_true(ss_machine_fingerprint(r) == ss_machine_fingerprint(m));
    ss_machine_free(r);
    remove(path);
}

static void test_round_trip(void **state)
{
    (void)state;
    char rel[128];
    for (size_t i = 0; i < N_SHIPPED; i++) {
        snprintf(rel, sizeof rel, "topologies/%s.json", shipped[i]);
        ss_machine *m = load_file(rel, 0);
        round_trip(m);
        ss_machine_free(m);
    }
    ss_machine *m = load_file("topologies/dgx-a100.json", 3);
    round_trip(m);
    ss_machine_free(m);
    /* a saved file cannot take --nodes any more: it is explicit */
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *r = NULL;
    m = load_file("topologies/p100x16.json", 0);
    assert_int_equal(ss_machine_save(m, "/tmp/ss_topo_rt_explicit.json", &d), SS_OK);
    assert_int_equal(ss_machine_load_nodes("/tmp/ss_topo_rt_explicit.json", 2, &r, &d),
                     SS_ERR_INVALID);
    assert_null(r);
    remove("/tmp/ss_topo_rt_explicit.json");
    ss_machine_free(m);
}

static void test_volunteers(void **state)
{
    (void)state;
    ss_machine *m = load_file("topologies/volunteers40.json", 0);
    assert_int_equal(ss_machine_n_devices(m), 40);
    assert_int_equal(ss_machine_n_links(m), 40);
    int refusing = 0, cpu = 0;
    for (int i = 0; i < 40; i++) {
        const ss_device *p = ss_machine_device(m, i);
        refusing += !p->accepts_connections;
        cpu += ss_machine_type(m, p->type)->is_cpu;
        /* asymmetric home links: upload <= download, 10..1000 Mb/s */
        assert_true(p->up_gbps <= p->down_gbps);
        assert_true(p->up_gbps >= 10 / 8000.0 && p->down_gbps <= 1000 / 8000.0);
    }
    assert_int_equal(refusing, 12);
    assert_int_equal(cpu, 8);
    /* every pair is reachable; a pair of refusing peers goes through a relay
     * that accepts connections (4 channels: up, down, up, down) */
    int checked = 0;
    for (int a = 0; a < 40; a++)
        for (int b = 0; b < 40; b++) {
            if (a == b)
                continue;
            const int *ch;
            int n;
            assert_int_equal(ss_machine_route(m, a, b, &ch, &n), SS_OK);
            int both = !ss_machine_device(m, a)->accepts_connections &&
                       !ss_machine_device(m, b)->accepts_connections;
            assert_int_equal(n, both ? 4 : 2);
            if (both) {
                const ss_link *l = ss_machine_link(m, ch[1] / 2);
                int relay = l->a; /* the peer end of its internet link */
                assert_true(ss_machine_device(m, relay)->accepts_connections);
                checked++;
            }
        }
    assert_int_equal(checked, 12 * 11);
    ss_machine_free(m);
}

static char *read_line(const char *path)
{
    static char buf[512];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    if (!fgets(buf, sizeof buf, f))
        buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

/* The collectives' bus-bandwidth curve: compact fabrics hand coll_eff /
 * coll_half_bytes to the links they expand to (intra: the NVSwitch links;
 * inter: the NIC links and their PCIe attachments), explicit links carry
 * their own, absent means ideal (1, 0); it is saved, read back and part of
 * the fingerprint. */
static void test_collective_curve(void **state)
{
    (void)state;
    ss_machine *m = load_str("{" HDR "\"compact\": {\"nodes\": 2, \"devices_per_node\": 2, "
                             "\"device_type\": \"A100-SXM4-80GB\", "
                             "\"intra\": {\"kind\": \"nvswitch\", \"gbps\": 300, \"latency_us\": 1, "
                             "\"coll_eff\": 0.8, \"coll_half_bytes\": 4e6}, "
                             "\"inter\": {\"kind\": \"infiniband\", \"gbps\": 25, \"latency_us\": 2, "
                             "\"nics_per_node\": 2, \"coll_eff\": 0.7, \"coll_half_bytes\": 1e7}}}");
    int nvs = 0, ib = 0, pcie = 0;
    for (int i = 0; i < ss_machine_n_links(m); i++) {
        const ss_link *l = ss_machine_link(m, i);
        if (!strcmp(l->kind, "nvswitch")) {
            assert_near(l->coll_eff, 0.8, 0);
            assert_near(l->coll_half_bytes, 4e6, 0);
            nvs++;
        } else {
            assert_near(l->coll_eff, 0.7, 0);
            assert_near(l->coll_half_bytes, 1e7, 0);
            ib += !strcmp(l->kind, "infiniband");
            pcie += !strcmp(l->kind, "pcie");
        }
    }
    assert_int_equal(nvs, 4);
    assert_int_equal(ib, 4);
    assert_int_equal(pcie, 8); /* per node: 2 GPUs and 2 NICs on their PCIe switches */
    round_trip(m);
    ss_machine *ideal = load_str("{" HDR "\"compact\": {\"nodes\": 2, \"devices_per_node\": 2, "
                                 "\"device_type\": \"A100-SXM4-80GB\", "
                                 "\"intra\": {\"kind\": \"nvswitch\", \"gbps\": 300, \"latency_us\": 1}, "
                                 "\"inter\": {\"kind\": \"infiniband\", \"gbps\": 25, \"latency_us\": 2, "
                                 "\"nics_per_node\": 2}}}");
    for (int i = 0; i < ss_machine_n_links(ideal); i++) {
        assert_near(ss_machine_link(ideal, i)->coll_eff, 1, 0);
        assert_near(ss_machine_link(ideal, i)->coll_half_bytes, 0, 0);
    }
    assert_true(ss_machine_fingerprint(m) != ss_machine_fingerprint(ideal));
    ss_machine_free(ideal);
    ss_machine_free(m);
    m = load_str("{" HDR "\"hosts\": [{\"name\": \"h\"}], \"devices\": ["
                 "{\"name\": \"a\", \"type\": \"V100-SXM2-16GB\", \"host\": \"h\"}, "
                 "{\"name\": \"b\", \"type\": \"V100-SXM2-16GB\", \"host\": \"h\"}], "
                 "\"links\": [{\"a\": \"a\", \"b\": \"b\", \"gbps\": 25, \"latency_us\": 1, "
                 "\"kind\": \"nvlink\", \"coll_eff\": 0.6}]}");
    assert_near(ss_machine_link(m, 0)->coll_eff, 0.6, 0);
    assert_near(ss_machine_link(m, 0)->coll_half_bytes, 0, 0);
    round_trip(m);
    ss_machine_free(m);
}

/* A compact 1 x 2 machine of type "g" (V100 based) with the given
 * collective_launch_us member text ("" for none). */
static ss_status load_launch(const char *member, ss_machine **m, ss_diag *d)
{
    char json[1024];
    snprintf(json, sizeof json,
             "{" HDR "\"device_types\": [{\"name\": \"g\", \"base\": \"V100-SXM2-16GB\"%s}], "
             "\"compact\": {\"nodes\": 1, \"devices_per_node\": 2, \"device_type\": \"g\", "
             "\"intra\": {\"kind\": \"nvswitch\", \"gbps\": 100, \"latency_us\": 1}}}",
             member);
    ss_diag_init(d);
    *m = NULL;
    return ss_machine_load_string(json, "inline.json", m, d);
}

/* The iteration time of chain2 data-parallel over both devices of m. */
static double dp_iteration_us(const ss_machine *m)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s", ss_test_path("tests/data/sim/chain2.json"));
    assert_int_equal(ss_model_load(path, &g, &d), SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    assert_non_null(cm);
    ss_sim *sim = NULL;
    assert_int_equal(ss_sim_new(g, m, cm, NULL, &sim, &d), SS_OK);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_data_parallel(g, m, 2, &p, &d), SS_OK);
    ss_sim_result r = {0};
    assert_int_equal(ss_sim_run(sim, p, &r, &d), SS_OK);
    double t = r.iteration_us;
    ss_sim_result_clear(&r);
    ss_plan_free(p);
    ss_sim_free(sim);
    ss_cost_free(cm);
    ss_graph_free(g);
    return t;
}

/* collective_launch_us: 6 us unless given (built-ins, based and new
 * types), range-checked with the file and JSON path named, written back
 * and fingerprinted when set, and what collectives cost: the collective
 * model and the simulation both pay it. */
static void test_collective_launch(void **state)
{
    (void)state;
    ss_diag d;
    ss_machine *m = NULL, *slow = NULL;
    for (int i = 0; i < ss_devtype_builtin_count(); i++)
        assert_near(ss_devtype_builtin(i)->collective_launch_us, 6, 0);
    assert_int_equal(load_launch("", &m, &d), SS_OK);
    assert_near(ss_machine_type(m, 0)->collective_launch_us, 6, 0);
    assert_near(ss_machine_collective_launch_us(m), 6, 0);
    ss_machine *fresh = load_str("{" HDR "\"device_types\": [{\"name\": \"npu\", "
                                 "\"peak_tflops\": {\"f32\": 3}, \"mem_gbps\": 400, \"mem_gib\": 24}],"
                                 "\"hosts\": [{\"name\": \"h\"}],"
                                 "\"devices\": [{\"name\": \"a\", \"type\": \"npu\", \"host\": \"h\"}]}");
    assert_near(ss_machine_collective_launch_us(fresh), 6, 0);
    ss_machine_free(fresh);
    assert_int_equal(load_launch(", \"collective_launch_us\": 1006", &slow, &d), SS_OK);
    assert_near(ss_machine_collective_launch_us(slow), 1006, 0);
    assert_true(ss_machine_fingerprint(m) != ss_machine_fingerprint(slow));
    round_trip(slow);
    round_trip(m);
    char *text = NULL;
    assert_int_equal(ss_machine_to_string(slow, &text, &d), SS_OK);
    assert_non_null(strstr(text, "\"collective_launch_us\""));
    ss_free(text);
    assert_int_equal(ss_machine_to_string(m, &text, &d), SS_OK);
    assert_null(strstr(text, "collective_launch_us"));
    ss_free(text);
    /* the collective model: a ring all-reduce of two devices, 1,000 us dearer */
    int devs[2] = {0, 1};
    ss_coll_result a = {0}, b = {0};
    assert_int_equal(ss_coll_cost(m, SS_COLL_ALLREDUCE, devs, 2, 1e6, NULL, &a, &d), SS_OK);
    assert_int_equal(ss_coll_cost(slow, SS_COLL_ALLREDUCE, devs, 2, 1e6, NULL, &b, &d), SS_OK);
    assert_near(b.time_us - a.time_us, 1000, 1e-6);
    ss_coll_result_clear(&a);
    ss_coll_result_clear(&b);
    /* the simulation: the gradient all-reduce ends the iteration */
    double t6 = dp_iteration_us(m), t1006 = dp_iteration_us(slow);
    if (!(t1006 - t6 >= 1000 - 1e-6))
        fail_msg("iteration %.3f us with 1,006 us collectives vs %.3f us with 6", t1006, t6);
    ss_machine_free(m);
    ss_machine_free(slow);
    static const char *const bad[] = {", \"collective_launch_us\": -1",
                                      ", \"collective_launch_us\": 1e5",
                                      ", \"collective_launch_us\": \"6\""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ss_status st = load_launch(bad[i], &m, &d);
        assert_true(st == SS_ERR_INVALID || st == SS_ERR_PARSE);
        assert_null(m);
        if (!strstr(d.msg, "inline.json") ||
            !strstr(d.msg, "$.device_types[0].collective_launch_us"))
            fail_msg("%s: message \"%s\"", bad[i], d.msg);
    }
}

static void test_bad_files(void **state)
{
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ss_test_path("tests/data/bad"));
    DIR *dp = opendir(dir);
    assert_non_null(dp);
    int count = 0;
    struct dirent *e;
    while ((e = readdir(dp))) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "topo_", 5) || len < 6 || strcmp(e->d_name + len - 5, ".json"))
            continue;
        char path[4600], expect[4600];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(expect, sizeof expect, "%s/%.*s.expect", dir, (int)(len - 5), e->d_name);
        const char *want = read_line(expect);
        if (!want)
            fail_msg("%s: missing .expect", e->d_name);
        char wanted[512];
        snprintf(wanted, sizeof wanted, "%s", want);
        ss_diag d;
        ss_diag_init(&d);
        ss_machine *m = NULL;
        ss_status st = ss_machine_load(path, &m, &d);
        if (st == SS_OK || !strstr(d.msg, path) || !strstr(d.msg, wanted))
            fail_msg("%s: status %s, message \"%s\", expected \"%s\"", e->d_name,
                     ss_status_name(st), d.msg, wanted);
        assert_null(m);
        assert_true(st == SS_ERR_PARSE || st == SS_ERR_INVALID);
        count++;
    }
    closedir(dp);
    assert_true(count >= 10);
}

/* Every allocation of a load may fail: the load then fails cleanly (no
 * leak, *out untouched) and the next attempt with one more allocation
 * allowed gets further, until it succeeds. */
static void fault_inject(const char *rel, int nodes)
{
    ss_diag d;
    ss_machine *m = NULL;
    ss_test_fail_after(1L << 40);
    ss_diag_init(&d);
    assert_int_equal(ss_machine_load_nodes(ss_test_path(rel), nodes, &m, &d), SS_OK);
    long total = ss_test_alloc_count();
    ss_test_fail_after(-1);
    ss_machine_free(m);
    assert_true(total > 10);
    for (long k = 0; k < total; k++) {
        ss_test_fail_after(k);
        ss_diag_init(&d);
        m = NULL;
        ss_status st = ss_machine_load_nodes(ss_test_path(rel), nodes, &m, &d);
        ss_test_fail_after(-1);
        assert_int_not_equal(st, SS_OK);
        assert_null(m);
        assert_true(d.msg[0] != '\0');
    }
}

static void test_fault_injection(void **state)
{
    (void)state;
    fault_inject("topologies/p100x16.json", 0);
    fault_inject("topologies/volunteers40.json", 0);
    fault_inject("topologies/dgx1-v100.json", 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_p100x16),
        cmocka_unit_test(test_k80x64),
        cmocka_unit_test(test_dgx1),
        cmocka_unit_test(test_nvswitch_and_nodes_override),
        cmocka_unit_test(test_compact_pcie_groups_and_ring),
        cmocka_unit_test(test_type_overrides),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_volunteers),
        cmocka_unit_test(test_collective_curve),
        cmocka_unit_test(test_collective_launch),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
