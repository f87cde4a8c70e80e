/*
 * cmd_simulate.c — `simsearch simulate`: predict the iteration time,
 * throughput, per-device breakdown and peak memory of one plan, say whether
 * it fits, summarise the critical path, and optionally write a Perfetto
 * trace. A plan that does not fit is a successful answer (exit 0) with a
 * "DOES NOT FIT" line; bad input exits 2, anything else 1.
 */
#include "cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

static void help(FILE *f)
{
    fprintf(f,
            "usage: simsearch simulate --model SPEC --topology FILE --plan SPEC [--nodes N]\n"
            "                          [--batch N] [--db FILE] [--trace FILE] [--json]\n"
            "                          [--evaluator auto|full|symmetry|hierarchical]\n\n"
            "Predict one training iteration of a plan: time, throughput, compute /\n"
            "communication / idle per device, peak memory per device, whether it fits,\n"
            "and the critical path.\n\n"
            "  --model SPEC     zoo model NAME[:key=value,...] or a model JSON file\n"
            "  --topology FILE  topology JSON\n"
            "  --plan SPEC      data-parallel | megatron:tp=T,pp=P,dp=D[,mbs=S|mb=M][,vp=V]\n"
            "                   [,recompute=none|selective|full][,sp=0|1][,distopt=0|1]\n"
            "                   [,sync=overlap|bulk] | a plan JSON file\n"
            "  --nodes N        override the node count of a compact topology\n"
            "  --batch N        global batch (default: 64 per device, 256 for alexnet)\n"
            "  --db FILE        profile database: measured tile costs first, then analytic\n"
            "                   (--json reports cost_sources: each source's share of the\n"
            "                   predicted compute time)\n"
            "  --trace FILE     write the simulated timeline as Chrome Trace JSON (Perfetto)\n"
            "  --json           print the result as one JSON object\n"
            "  --evaluator E    auto (default): hierarchical for plans of >= 2^20 tile\n"
            "                   entries where it applies (not with --trace), else by\n"
            "                   symmetry where the plan is symmetric, else in full;\n"
            "                   full: the full task-graph simulation; symmetry: one\n"
            "                   representative per class of devices doing identical work\n"
            "                   (bit-identical to full) or fail, saying why;\n"
            "                   hierarchical (hier): repeated blocks simulated once, then\n"
            "                   a stage-level pipeline (within 0.5%% of full on 1F1B\n"
            "                   Megatron plans; no trace, no critical path) or fail\n\n"
            "Exit status: 0 success (also when the plan does not fit: see \"fits\"),\n"
            "2 bad usage or input, 1 other failures.\n");
}

typedef struct opts {
    ss_cli_common c;
    const char *trace, *db, *evaluator;
} opts;

static int parse(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    const ss_cli_extra extra[] = {{"--trace", &o->trace},
                                  {"--db", &o->db},
                                  {"--evaluator", &o->evaluator},
                                  {NULL, NULL}};
    return ss_cli_parse("simulate", argc, argv, &o->c, 1, extra, help);
}

static double pct(double part, double whole)
{
    return whole > 0 ? 100.0 * part / whole : 0;
}

/* Peak memory lines: every device when few, else min / max / the fullest. */
static void print_memory(const ss_sim_result *r)
{
    char a[32], b[32];
    int n = r->n_devices;
    if (n <= 8) {
        for (int i = 0; i < n; i++)
            printf("  device %-3d peak %s of %s (static %s)\n", i,
                   ss_cli_bytes(r->peak_memory_bytes[i], a, sizeof a),
                   ss_cli_bytes(r->capacity_bytes[i], b, sizeof b),
                   ss_cli_bytes(r->static_memory_bytes[i], (char[32]){0}, 32));
        return;
    }
    int lo = 0, hi = 0, full = 0;
    for (int i = 1; i < n; i++) {
        if (r->peak_memory_bytes[i] < r->peak_memory_bytes[lo])
            lo = i;
        if (r->peak_memory_bytes[i] > r->peak_memory_bytes[hi])
            hi = i;
        if (r->peak_memory_bytes[i] / r->capacity_bytes[i] >
            r->peak_memory_bytes[full] / r->capacity_bytes[full])
            full = i;
    }
    printf("  lowest  device %-4d %s\n", lo, ss_cli_bytes(r->peak_memory_bytes[lo], a, sizeof a));
    printf("  highest device %-4d %s\n", hi, ss_cli_bytes(r->peak_memory_bytes[hi], a, sizeof a));
    printf("  fullest device %-4d %s of %s (%.0f%%)\n", full,
           ss_cli_bytes(r->peak_memory_bytes[full], a, sizeof a),
           ss_cli_bytes(r->capacity_bytes[full], b, sizeof b),
           pct(r->peak_memory_bytes[full], r->capacity_bytes[full]));
}

static void print_human(const opts *o, const ss_sim_result *r)
{
    char a[32], b[32];
    double it = r->iteration_us, comp = 0, comm = 0, exposed = 0, idle = 0;
    for (int i = 0; i < r->n_devices; i++) {
        comp += r->compute_us[i];
        comm += r->comm_us[i];
        exposed += r->exposed_comm_us[i];
        idle += r->idle_us[i];
    }
    int n = r->n_devices > 0 ? r->n_devices : 1;
    comp /= n;
    comm /= n;
    exposed /= n;
    idle /= n;
    printf("model      %s (batch %lld)\n", r->model, (long long)r->batch);
    printf("topology   %s, %d devices\n", r->topology, r->n_devices);
    printf("plan       %s\n", o->c.plan);
    printf("iteration  %.3f ms   throughput %s samples/s   (%lld tasks)\n", it / 1e3,
           ss_cli_si(r->throughput, a, sizeof a), (long long)r->n_tasks);
    printf("per device (mean): compute %.1f%%, communication %.1f%% (exposed %.1f%%), "
           "idle %.1f%%\n",
           pct(comp, it), pct(comm, it), pct(exposed, it), pct(idle, it));
    printf("peak memory:\n");
    print_memory(r);
    if (r->fits) {
        printf("fits       yes\n");
    } else {
        int dv = r->overflow_device;
        printf("DOES NOT FIT: device %d needs %s but has %s (over by %s)\n", dv,
               ss_cli_bytes(r->peak_memory_bytes[dv], a, sizeof a),
               ss_cli_bytes(r->capacity_bytes[dv], b, sizeof b),
               ss_cli_bytes(r->overflow_bytes, (char[32]){0}, 32));
    }
    printf("evaluator  %s: %lld tasks simulated, %d device class%s, %.1f ms\n", r->evaluator,
           (long long)r->tasks_simulated, r->symmetry_classes,
           r->symmetry_classes == 1 ? "" : "es", r->eval_ms);
    if (r->n_crit == 0) {
        printf("critical path: not kept by the %s evaluator\n", r->evaluator);
        return;
    }
    printf("critical path (%.3f ms of busy tasks):\n", r->critical_path_us / 1e3);
    for (int i = 0; i < r->n_crit; i++)
        printf("  %5.1f%%  %-10s %s (%d task%s)\n", pct(r->crit[i].us, it), r->crit[i].kind,
               r->crit[i].name, r->crit[i].n_tasks, r->crit[i].n_tasks == 1 ? "" : "s");
    if (o->trace)
        printf("trace written to %s\n", o->trace);
}

/* The result JSON with "cost_sources" added: each source's share of the
 * plan's compute time (sources with no share left out). */
static int print_json(const char *txt, const double share[3])
{
    json_error_t err;
    json_t *root = json_loads(txt, 0, &err);
    if (!root) {
        fprintf(stderr, "simsearch: internal error: result JSON: %s\n", err.text);
        return SS_EXIT_FAIL;
    }
    json_t *src = json_object();
    for (int k = 0; k < 3; k++)
        if (share[k] > 0)
            json_object_set_new(src, ss_cost_source_name((ss_cost_source)k), json_real(share[k]));
    json_object_set_new(root, "cost_sources", src);
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!s) {
        fprintf(stderr, "simsearch: out of memory\n");
        return SS_EXIT_FAIL;
    }
    printf("%s\n", s);
    free(s);
    return SS_EXIT_OK;
}

int ss_cmd_simulate(int argc, char **argv)
{
    opts o;
    int r = parse(argc, argv, &o);
    if (r)
        return r < 0 ? SS_EXIT_OK : r;
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    ss_plan *p = NULL;
    ss_costmodel *cm = NULL;
    ss_profile_db *db = NULL;
    ss_sim *sim = NULL;
    ss_sim_result res = {0};
    char *txt = NULL;
    ss_diag d;
    ss_diag_init(&d);
    int taken = 0;
    const ss_cli_output outs[] = {{"--trace", o.trace}, {NULL, NULL}};
    if ((r = ss_cli_check_outputs("simulate", outs, o.c.json, &taken)))
        return r;
    if ((r = ss_cli_common_load(&o.c, &m, &g, &p)))
        return r;
    if ((r = ss_cli_cost_model(m, o.db, &cm, &db)))
        goto out;
    double share[3] = {0, 0, 0};
    if ((o.c.json || o.db) && ss_cost_plan_sources(cm, g, m, p, share, &d) != SS_OK) {
        r = ss_cli_fail(&d);
        goto out;
    }
    ss_sim_config scfg = {.one_shot = 1}; /* one plan: the smallest peak memory */
    scfg.exact = o.trace != NULL; /* a trace needs a timeline */
    if (o.evaluator && ss_evaluator_parse(o.evaluator, &scfg.evaluator)) {
        fprintf(stderr,
                "simsearch simulate: --evaluator: unknown evaluator \"%s\" (expected auto, "
                "full, symmetry or hierarchical)\n",
                o.evaluator);
        r = SS_EXIT_USAGE;
        goto out;
    }
    if (o.trace && scfg.evaluator == SS_EVAL_HIER) {
        fprintf(stderr, "simsearch simulate: --trace needs a timeline, which the hierarchical "
                        "evaluator does not keep (use --evaluator symmetry or full)\n");
        r = SS_EXIT_USAGE;
        goto out;
    }
#ifdef __GLIBC__
    /* A fixed mmap threshold: glibc raises it to the size of every large
     * block freed (up to 32 MiB), after which the one-shot simulator's
     * freed scratch stays in the heap instead of going back to the system
     * (GPT 39.1B / 512: +9% peak). */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
    if (ss_sim_new(g, m, cm, &scfg, &sim, &d) != SS_OK || ss_sim_run(sim, p, &res, &d) != SS_OK ||
        (o.trace && ss_sim_write_trace(sim, o.trace, &d) != SS_OK)) {
        r = ss_cli_fail(&d);
        goto out;
    }
    if (taken)
        ss_cli_report_to_stderr();
    if (o.c.json) {
        if (ss_sim_result_to_json(&res, o.c.plan, &txt, &d) != SS_OK) {
            r = ss_cli_fail(&d);
            goto out;
        }
        if ((r = print_json(txt, share)))
            goto out;
    } else {
        print_human(&o, &res);
        if (o.db)
            printf("cost sources: profile %.1f%%, analytic %.1f%% of the compute time\n",
                   100 * share[SS_COST_PROFILE], 100 * share[SS_COST_ANALYTIC]);
    }
    r = SS_EXIT_OK;
out:
    ss_free(txt);
    ss_sim_result_clear(&res);
    ss_sim_free(sim);
    ss_cost_free(cm);
    ss_profile_db_free(db);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_machine_free(m);
    return r;
}
