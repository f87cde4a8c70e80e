/*
 * cmd_topo.c — `simsearch topo`: summarise a topology file (devices by type
 * and host, aggregate peak, memory, links by kind, device-pair bandwidth
 * extremes, unreachable pairs), or discover this host with hwloc and print or
 * write its topology JSON.
 *
 * Pair statistics cover every ordered device pair up to ALL_PAIRS_MAX
 * devices; beyond that, the pairs from and to device 0 of SAMPLE_MAX devices
 * spread evenly over the machine (enough for the homogeneous clusters
 * compact files describe; each route from another device is a shortest-path
 * search over the whole network, so the sample keeps `topo` of a
 * 65,536-device machine within seconds), and the output says so.
 */
#include "cli.h"
#include "profiler/probe.h"

#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define ALL_PAIRS_MAX 512
#define SAMPLE_MAX 128
#define NEAR_MAX 16 /* sampled too: devices 0 .. NEAR_MAX-1 (device 0's node) */
#define MAX_LISTED 5

typedef struct topo_opts {
    const char *file, *out;
    long long nodes, np;
    int json, disc, probe;
} topo_opts;

static const ss_cli_optdef options[] = {
    SS_CLI_INT_ROW(topo_opts, "--nodes", "N", nodes, 1, SS_CLI_MAX_NODES,
                   "override the node count of a compact topology"),
    SS_CLI_FLAG_ROW(topo_opts, "--json", json, "print the summary as JSON"),
    SS_CLI_FLAG_ROW(topo_opts, "--discover", disc,
                    "build a topology of this host with hwloc (cores as CPU-core\n"
                    "devices, PCI GPUs; estimated bandwidths are marked so)"),
    SS_CLI_FLAG_ROW(topo_opts, "--probe", probe,
                    "with --discover: measure the core-to-core links with the MPI\n"
                    "link probe (simsearch probe) and use the measured bandwidth\n"
                    "and latency instead of estimates"),
    SS_CLI_INT_ROW(topo_opts, "--np", "N", np, 2, 4096, "with --probe: MPI ranks (default 2)"),
    SS_CLI_STR_ROW(topo_opts, "--out", "FILE", out, 0,
                   "with --discover: write the JSON to FILE (atomically)"),
    {NULL, SS_CLI_FLAG, NULL, 0, 0, 0, 0, 0, 0, NULL},
};

const ss_cli_cmddef ss_cli_def_topo = {
    "topo",
    "summarise a topology file, or discover this host",
    "Summarise a topology (simsearch-topology JSON, explicit or compact form):\n"
    "devices by type and host, aggregate peak TFLOP/s and memory, links by kind,\n"
    "the slowest and fastest device-pair bandwidths, unreachable pairs.\n"
    "'simsearch topo --discover [--probe [--np N]] [--out FILE]' builds one.",
    options,
    "FILE",
    offsetof(topo_opts, file),
    "Exit status: 0 ok, 2 bad usage or input, 1 other failure.",
};

typedef struct kind_stat {
    char kind[32];
    int count;
    double gbps_min, gbps_max, lat_min, lat_max;
} kind_stat;

typedef struct pair_stat {
    int sampled;
    int stride; /* sampled: every stride-th device, from and to device 0 */
    long long pairs, unreachable, relayed;
    int min_a, min_b, max_a, max_b;
    double min_gbps, max_gbps;
    int un_a[MAX_LISTED], un_b[MAX_LISTED];
} pair_stat;

static void pair_visit(const ss_machine *m, int a, int b, pair_stat *ps)
{
    if (a == b)
        return;
    ps->pairs++;
    double g = ss_machine_path_gbps(m, a, b);
    if (g <= 0) {
        if (ps->unreachable < MAX_LISTED) {
            ps->un_a[ps->unreachable] = a;
            ps->un_b[ps->unreachable] = b;
        }
        ps->unreachable++;
        return;
    }
    if (!ss_machine_device(m, a)->accepts_connections && !ss_machine_device(m, b)->accepts_connections)
        ps->relayed++;
    if (ps->min_a < 0 || g < ps->min_gbps) {
        ps->min_gbps = g;
        ps->min_a = a;
        ps->min_b = b;
    }
    if (ps->max_a < 0 || g > ps->max_gbps) {
        ps->max_gbps = g;
        ps->max_a = a;
        ps->max_b = b;
    }
}

static void pair_stats(const ss_machine *m, pair_stat *ps)
{
    int n = ss_machine_n_devices(m);
    memset(ps, 0, sizeof *ps);
    ps->min_a = ps->max_a = -1;
    ps->sampled = n > ALL_PAIRS_MAX;
    if (!ps->sampled) {
        for (int a = 0; a < n; a++)
            for (int b = 0; b < n; b++)
                pair_visit(m, a, b, ps);
        return;
    }
    ps->stride = (n + SAMPLE_MAX - 1) / SAMPLE_MAX;
    for (int b = 0; b < n; b += b < NEAR_MAX ? 1 : ps->stride) {
        pair_visit(m, 0, b, ps);
        pair_visit(m, b, 0, ps);
    }
}

/* Per-kind link statistics; returns the number of kinds (<= n_links). */
static int kind_stats(const ss_machine *m, kind_stat *ks)
{
    int nk = 0;
    for (int i = 0; i < ss_machine_n_links(m); i++) {
        const ss_link *l = ss_machine_link(m, i);
        int k = 0;
        while (k < nk && strcmp(ks[k].kind, l->kind))
            k++;
        if (k == nk) {
            memset(&ks[k], 0, sizeof ks[k]);
            snprintf(ks[k].kind, sizeof ks[k].kind, "%s", l->kind);
            ks[k].gbps_min = ks[k].lat_min = INFINITY;
            nk++;
        }
        kind_stat *s = &ks[k];
        s->count++;
        double lo = l->gbps_ba > 0 && l->gbps_ba < l->gbps_ab ? l->gbps_ba : l->gbps_ab;
        double hi = l->gbps_ba > l->gbps_ab ? l->gbps_ba : l->gbps_ab;
        s->gbps_min = fmin(s->gbps_min, lo);
        s->gbps_max = fmax(s->gbps_max, hi);
        s->lat_min = fmin(s->lat_min, l->latency_us);
        s->lat_max = fmax(s->lat_max, l->latency_us);
    }
    return nk;
}

/* Peak of one device of type t for dtype k, with the documented fallback to
 * the f32 rate when a type has no rate for k. */
static double peak(const ss_device_type *t, ss_dtype k)
{
    return t->peak_tflops[k] > 0 ? t->peak_tflops[k] : t->peak_tflops[SS_F32];
}

static const char *dev_name(const ss_machine *m, int i) { return ss_machine_device(m, i)->name; }

static void print_text(const ss_machine *m, const kind_stat *ks, int nk, const pair_stat *ps)
{
    int nd = ss_machine_n_devices(m), nt = ss_machine_n_types(m), nh = ss_machine_n_hosts(m);
    double f32 = 0, f16 = 0, bf16 = 0, mem = 0;
    printf("topology %s: %d devices on %d hosts, %d network nodes, %d links\n",
           ss_machine_name(m), nd, nh, ss_machine_n_nodes(m), ss_machine_n_links(m));
    printf("fingerprint %016llx\n\ndevices by type:\n", (unsigned long long)ss_machine_fingerprint(m));
    for (int t = 0; t < nt; t++) {
        const ss_device_type *ty = ss_machine_type(m, t);
        int c = 0;
        for (int i = 0; i < nd; i++)
            c += ss_machine_device(m, i)->type == t;
        if (!c)
            continue;
        printf("  %-16s x%-5d %7.2f TFLOP/s f32, %7.1f f16/bf16, %6.1f GiB, %6.0f GB/s memory%s\n",
               ty->name, c, ty->peak_tflops[SS_F32], peak(ty, SS_F16), ty->mem_gib, ty->mem_gbps,
               ty->is_cpu ? " (cpu)" : "");
    }
    for (int i = 0; i < nd; i++) {
        const ss_device_type *ty = ss_machine_type(m, ss_machine_device(m, i)->type);
        f32 += ty->peak_tflops[SS_F32];
        f16 += peak(ty, SS_F16);
        bf16 += peak(ty, SS_BF16);
        mem += ty->mem_gib;
    }
    printf("aggregate peak: %.1f TFLOP/s f32, %.1f f16, %.1f bf16; memory %.1f GiB\n", f32, f16,
           bf16, mem);
    printf("\ndevices by host:\n");
    for (int h = 0; h < nh; h++) {
        if (h == 8 && nh > 10) {
            printf("  ... %d more hosts\n", nh - 8);
            break;
        }
        int c = 0;
        for (int i = 0; i < nd; i++)
            c += ss_machine_device(m, i)->host == h;
        printf("  %-20s %d device%s\n", ss_machine_host(m, h)->name, c, c == 1 ? "" : "s");
    }
    printf("\nlinks by kind (GB/s per direction):\n");
    for (int k = 0; k < nk; k++) {
        if (ks[k].gbps_min == ks[k].gbps_max)
            printf("  %-12s x%-5d %10.4g GB/s", ks[k].kind, ks[k].count, ks[k].gbps_min);
        else
            printf("  %-12s x%-5d %10.4g - %.4g GB/s", ks[k].kind, ks[k].count, ks[k].gbps_min,
                   ks[k].gbps_max);
        if (ks[k].lat_min == ks[k].lat_max)
            printf(", latency %g us\n", ks[k].lat_min);
        else
            printf(", latency %g - %g us\n", ks[k].lat_min, ks[k].lat_max);
    }
    if (ps->sampled)
        printf("\ndevice pairs (a sample: from and to device 0, devices 1-%d and every %d-th "
               "device): %lld\n",
               NEAR_MAX - 1, ps->stride, ps->pairs);
    else
        printf("\ndevice pairs: %lld\n", ps->pairs);
    if (ps->min_a >= 0) {
        printf("  slowest: %s -> %s  %.4g GB/s, %.1f us\n", dev_name(m, ps->min_a),
               dev_name(m, ps->min_b), ps->min_gbps,
               ss_machine_path_latency_us(m, ps->min_a, ps->min_b));
        printf("  fastest: %s -> %s  %.4g GB/s, %.1f us\n", dev_name(m, ps->max_a),
               dev_name(m, ps->max_b), ps->max_gbps,
               ss_machine_path_latency_us(m, ps->max_a, ps->max_b));
    }
    if (ps->unreachable) {
        printf("  unreachable: %lld pairs (firewalled peers without a relay)\n", ps->unreachable);
        for (long long i = 0; i < ps->unreachable && i < MAX_LISTED; i++)
            printf("    %s -> %s\n", dev_name(m, ps->un_a[i]), dev_name(m, ps->un_b[i]));
    } else {
        printf("  every pair is reachable\n");
    }
    if (ps->relayed)
        printf("  relayed: %lld pairs of firewalled peers go through a peer that accepts connections\n",
               ps->relayed);
}

static int print_json(const ss_machine *m, const kind_stat *ks, int nk, const pair_stat *ps)
{
    int nd = ss_machine_n_devices(m);
    double f32 = 0, f16 = 0, bf16 = 0, mem = 0;
    json_t *o = json_object(), *types = json_array(), *kinds = json_array(), *un = json_array();
    char fp[17];
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)ss_machine_fingerprint(m));
    for (int t = 0; t < ss_machine_n_types(m); t++) {
        const ss_device_type *ty = ss_machine_type(m, t);
        int c = 0;
        for (int i = 0; i < nd; i++)
            c += ss_machine_device(m, i)->type == t;
        json_array_append_new(types, json_pack("{s:s, s:i, s:f, s:f, s:f, s:f}", "name", ty->name,
                                               "count", c, "peak_tflops_f32", ty->peak_tflops[SS_F32],
                                               "peak_tflops_f16", peak(ty, SS_F16), "mem_gib",
                                               ty->mem_gib, "mem_gbps", ty->mem_gbps));
    }
    for (int i = 0; i < nd; i++) {
        const ss_device_type *ty = ss_machine_type(m, ss_machine_device(m, i)->type);
        f32 += ty->peak_tflops[SS_F32];
        f16 += peak(ty, SS_F16);
        bf16 += peak(ty, SS_BF16);
        mem += ty->mem_gib;
    }
    for (int k = 0; k < nk; k++)
        json_array_append_new(kinds, json_pack("{s:s, s:i, s:f, s:f, s:f, s:f}", "kind", ks[k].kind,
                                               "count", ks[k].count, "gbps_min", ks[k].gbps_min,
                                               "gbps_max", ks[k].gbps_max, "latency_us_min",
                                               ks[k].lat_min, "latency_us_max", ks[k].lat_max));
    for (long long i = 0; i < ps->unreachable && i < MAX_LISTED; i++)
        json_array_append_new(un, json_pack("[s, s]", dev_name(m, ps->un_a[i]),
                                            dev_name(m, ps->un_b[i])));
    json_object_set_new(o, "name", json_string(ss_machine_name(m)));
    json_object_set_new(o, "fingerprint", json_string(fp));
    json_object_set_new(o, "devices", json_integer(nd));
    json_object_set_new(o, "hosts", json_integer(ss_machine_n_hosts(m)));
    json_object_set_new(o, "nodes", json_integer(ss_machine_n_nodes(m)));
    json_object_set_new(o, "links", json_integer(ss_machine_n_links(m)));
    json_object_set_new(o, "device_types", types);
    json_object_set_new(o, "peak_tflops", json_pack("{s:f, s:f, s:f}", "f32", f32, "f16", f16,
                                                    "bf16", bf16));
    json_object_set_new(o, "mem_gib", json_real(mem));
    json_object_set_new(o, "link_kinds", kinds);
    json_object_set_new(o, "pairs", json_integer(ps->pairs));
    json_object_set_new(o, "pairs_sampled", json_boolean(ps->sampled));
    if (ps->min_a >= 0) {
        json_object_set_new(o, "slowest_pair", json_pack("{s:s, s:s, s:f}", "src", dev_name(m, ps->min_a),
                                                         "dst", dev_name(m, ps->min_b), "gbps",
                                                         ps->min_gbps));
        json_object_set_new(o, "fastest_pair", json_pack("{s:s, s:s, s:f}", "src", dev_name(m, ps->max_a),
                                                         "dst", dev_name(m, ps->max_b), "gbps",
                                                         ps->max_gbps));
    }
    json_object_set_new(o, "unreachable_pairs", json_integer(ps->unreachable));
    json_object_set_new(o, "relayed_pairs", json_integer(ps->relayed));
    json_object_set_new(o, "unreachable_examples", un);
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(o);
    if (!s) {
        fprintf(stderr, "simsearch topo: out of memory\n");
        return SS_EXIT_FAIL;
    }
    printf("%s\n", s);
    free(s);
    return SS_EXIT_OK;
}

static int discover(const char *out, int probe, int np)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    int taken = 0;
    const ss_cli_output outs[] = {{"--out", out}, {NULL, NULL}};
    int rc = ss_cli_check_files("topo", NULL, outs, 0, &taken);
    if (rc != SS_EXIT_OK)
        return rc;
    ss_link_figures shm;
    if (probe) {
        ss_probe_config pc = {"mpi", np, 0, 1L << 22, NULL};
        ss_probe_result pr;
        if (ss_probe_run(&pc, &pr, &d) != SS_OK)
            return ss_cli_fail(&d);
        shm.gbps = pr.p2p_gbps;
        shm.latency_us = pr.latency_us;
        fprintf(stderr, "probe: core-to-core %.2f GB/s, %.2f us (MPI, %d ranks)\n", shm.gbps,
                shm.latency_us, pr.ranks);
    }
    if (ss_machine_discover_measured(probe ? &shm : NULL, &m, &d) != SS_OK) {
        fprintf(stderr, "simsearch: %s\n", d.msg[0] ? d.msg : ss_status_name(d.status));
        return SS_EXIT_FAIL;
    }
    if (out) {
        if (ss_machine_save(m, out, &d) != SS_OK)
            rc = ss_cli_fail(&d);
        else if (taken)
            ss_cli_report_to_stderr();
        if (rc == SS_EXIT_OK)
            printf("wrote %s: %d devices on %d hosts\n", out, ss_machine_n_devices(m),
                   ss_machine_n_hosts(m));
    } else {
        char *s = NULL;
        if (ss_machine_to_string(m, &s, &d) != SS_OK) {
            rc = ss_cli_fail(&d);
        } else {
            printf("%s\n", s);
            ss_free(s);
        }
    }
    ss_machine_free(m);
    return rc;
}

int ss_cmd_topo(int argc, char **argv)
{
    topo_opts o = {0};
    int r = ss_cli_parse_def(&ss_cli_def_topo, argc, argv, &o);
    if (r)
        return r < 0 ? SS_EXIT_OK : r;
    const char *file = o.file, *out = o.out;
    long long nodes = o.nodes, np = o.np;
    int json = o.json, disc = o.disc, probe = o.probe;
    if (disc) {
        if (file || json || nodes)
            return ss_cli_usage_error("topo", "--discover takes no FILE, --json or --nodes");
        if (np && !probe)
            return ss_cli_usage_error("topo", "--np applies to --probe only");
        return discover(out, probe, (int)np);
    }
    if (probe || np)
        return ss_cli_usage_error("topo", "--probe and --np apply to --discover only");
    if (out)
        return ss_cli_usage_error("topo", "--out applies to --discover only");
    if (!file)
        return ss_cli_usage_error("topo", "missing topology FILE (or --discover)");
    const ss_cli_output ins[] = {{"FILE", file}, {NULL, NULL}};
    const ss_cli_output none[] = {{NULL, NULL}};
    int rc = ss_cli_check_files("topo", ins, none, 0, NULL);
    if (rc != SS_EXIT_OK)
        return rc;
    ss_machine *m = NULL;
    rc = ss_cli_load_machine(file, (int)nodes, &m);
    if (rc != SS_EXIT_OK)
        return rc;
    kind_stat *ks = calloc((size_t)ss_machine_n_links(m) + 1, sizeof *ks);
    if (!ks) {
        ss_machine_free(m);
        fprintf(stderr, "simsearch topo: out of memory\n");
        return SS_EXIT_FAIL;
    }
    int nk = kind_stats(m, ks);
    pair_stat ps;
    pair_stats(m, &ps);
    if (json) {
        rc = print_json(m, ks, nk, &ps);
    } else {
        print_text(m, ks, nk, &ps);
    }
    free(ks);
    ss_machine_free(m);
    return rc;
}
