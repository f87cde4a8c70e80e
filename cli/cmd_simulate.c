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

typedef struct opts {
    ss_cli_common c;
    const char *trace, *db, *evaluator;
} opts;

static const ss_cli_optdef options[] = {
    SS_CLI_ROWS_PLAN_INPUTS(opts),
    SS_CLI_STR_ROW(opts, "--db", "FILE", db, 0,
                   "profile database: measured tile costs first, then analytic\n"
                   "(--json reports cost_sources: each source's share of the\n"
                   "predicted compute time)"),
    SS_CLI_STR_ROW(opts, "--trace", "FILE", trace, 0,
                   "write the simulated timeline as Chrome Trace JSON (Perfetto)"),
    SS_CLI_ROW_JSON(opts, "print the result as one JSON object"),
    SS_CLI_STR_ROW(opts, "--evaluator", "E", evaluator, 0,
                   "auto (default): hierarchical for plans of >= 2^20 tile\n"
                   "entries where it applies (not with --trace), else by\n"
                   "symmetry where the plan is symmetric, else in full;\n"
                   "full: the full task-graph simulation; symmetry: one\n"
                   "representative per class of devices doing identical work\n"
                   "(bit-identical to full) or fail, saying why;\n"
                   "hierarchical (hier): repeated blocks simulated once, then\n"
                   "a stage-level pipeline (within 0.5% of full on 1F1B\n"
                   "Megatron plans; no trace, no critical path) or fail"),
    {NULL, SS_CLI_FLAG, NULL, 0, 0, 0, 0, 0, 0, NULL},
};

const ss_cli_cmddef ss_cli_def_simulate = {
    "simulate",
    "predict iteration time and memory of a plan",
    "Predict one training iteration of a plan: time, throughput, where each device's\n"
    "time goes, peak memory per device, whether it fits, and the critical path.",
    options,
    NULL,
    0,
    "Per device (mean over devices, as a share of the iteration):\n"
    "  compute        time running compute tasks\n"
    "  comm hidden    communication that runs while the device computes\n"
    "  comm exposed   communication the device waits for, computing nothing\n"
    "  idle           neither computing nor waiting for its communication\n"
    "                 (pipeline bubbles, waiting for other devices)\n"
    "compute + exposed + idle = 100%; communication = hidden + exposed.\n"
    "The critical path lists the operators and collectives on the longest chain.\n"
    "Ctrl-C or SIGTERM stops a long simulation: it says so and exits 130 / 143.\n"
    "Exit status: 0 success (also when the plan does not fit: see \"fits\"),\n"
    "2 bad usage or input, 1 input/output or system failures.",
};

static int parse(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    return ss_cli_parse_def(&ss_cli_def_simulate, argc, argv, o);
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
    /* idle_us counts the exposed communication too: split it out, so that
     * compute + exposed + idle = 100% (the definitions: --help). */
    double other_idle = idle > exposed ? idle - exposed : 0;
    printf("per device (mean): compute %.1f%% + communication exposed %.1f%% + idle %.1f%% "
           "= 100%%\n",
           pct(comp, it), pct(exposed, it), pct(other_idle, it));
    printf("                   communication %.1f%% in all (%.1f%% hidden under compute)\n",
           pct(comm, it), pct(comm > exposed ? comm - exposed : 0, it));
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
    for (int i = 0; i < r->n_crit; i++) {
        if (i > 0 && i == r->n_crit - 1 && !strcmp(r->crit[i].name, "(other)"))
            printf("  %5.1f%%  %-10s every other op and collective, each below %.1f%% "
                   "(%d tasks)\n",
                   pct(r->crit[i].us, it), "(other)", pct(r->crit[i - 1].us, it),
                   r->crit[i].n_tasks);
        else
            printf("  %5.1f%%  %-10s %s (%d task%s)\n", pct(r->crit[i].us, it), r->crit[i].kind,
                   r->crit[i].name, r->crit[i].n_tasks, r->crit[i].n_tasks == 1 ? "" : "s");
    }
    if (o->trace)
        printf("trace written to %s\n", o->trace);
}

/* The result JSON with "cost_sources" added: each source's share of the
 * plan's compute time (sources with no share left out); and
 * "breakdown"."shares": compute + communication_exposed + idle = 1 of the
 * mean device's iteration (idle_ms includes the exposed communication;
 * shares.idle does not), communication_hidden the part under compute. */
static int print_json(const char *txt, const double share[3], const ss_sim_result *r)
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
    /* The mean device's iteration in parts that add up to 1 (idle_us holds
     * the exposed communication too). */
    double comp = 0, comm = 0, exposed = 0, idle = 0, it = r->iteration_us;
    for (int i = 0; i < r->n_devices; i++) {
        comp += r->compute_us[i];
        comm += r->comm_us[i];
        exposed += r->exposed_comm_us[i];
        idle += r->idle_us[i];
    }
    double n = r->n_devices > 0 && it > 0 ? r->n_devices * it : 1;
    json_t *bd = json_object();
    json_object_set_new(bd, "compute", json_real(comp / n));
    json_object_set_new(bd, "communication_exposed", json_real(exposed / n));
    json_object_set_new(bd, "idle", json_real((idle > exposed ? idle - exposed : 0) / n));
    json_object_set_new(bd, "communication_hidden",
                        json_real((comm > exposed ? comm - exposed : 0) / n));
    json_t *parent = json_object_get(root, "breakdown");
    if (json_is_object(parent))
        json_object_set_new(parent, "shares", bd);
    else
        json_decref(bd);
    return ss_cli_print_json(root);
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
    const ss_cli_output db_in = {"--db", o.db};
    const ss_cli_output outs[] = {{"--trace", o.trace}, {NULL, NULL}};
    if ((r = ss_cli_check_and_load("simulate", &o.c, &db_in, outs, &taken, &m, &g, &p)))
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
        if ((r = print_json(txt, share, &res)))
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
    ss_cli_free_sim(sim, cm, db, p, g, m);
    return r;
}
