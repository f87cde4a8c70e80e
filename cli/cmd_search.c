/*
 * cmd_search.c — `simsearch [search] --topology FILE ...`: the main job.
 * Finds a fast plan with the MCMC search (ss_search_run), writes it as plan
 * JSON, prints a table of data parallelism, the expert plan and the best
 * plan found (or one JSON object with --json).
 *
 * Ctrl-C: a SIGINT handler sets a flag that the search polls before every
 * proposal; the search stops, and the best plan so far is still written and
 * printed (exit status 0, the report says "interrupted"). A second Ctrl-C
 * during the report falls back to the default action. The one-line progress
 * display goes to stderr only when stderr is a terminal.
 */
#include "cli.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The default model: the one whose best plan beats data parallelism by the
 * widest margin on the shipped clusters (benchmarks/RESULTS.md, "Search"). */
#define DEFAULT_MODEL "rnntc"
#define DEFAULT_OUT "plan.json"
#define DEFAULT_TIME_LIMIT 10.0
/* A search whose second half made the best plan at least this much faster
 * (relative) reports that it was still improving (docs/search.md, "Output"). */
#define STILL_IMPROVING 0.002

static void help(FILE *f)
{
    fprintf(f,
            "usage: simsearch [search] --topology FILE [--model SPEC] [--nodes N] [--batch N]\n"
            "                 [--budget N] [--time-limit S] [--seed N] [--out plan.json]\n"
            "                 [--trace FILE] [--db FILE] [--json] [--no-eval-cache]\n"
            "                 [--evaluator auto|full|symmetry|hierarchical]\n\n"
            "Search a parallelization plan (MCMC over every operator's split and placement,\n"
            "judged by the simulator) and compare it with data parallelism and the expert\n"
            "plan. Ctrl-C stops the search early and still writes the best plan found.\n\n"
            "  --topology FILE   topology JSON (required)\n"
            "  --model SPEC      zoo model NAME[:key=value,...] or a model JSON file\n"
            "                    (default: " DEFAULT_MODEL ")\n"
            "  --nodes N         override the node count of a compact topology\n"
            "  --batch N         global batch (default: 64 per device, 256 for alexnet)\n"
            "  --budget N        proposals in all (default 20000)\n"
            "  --time-limit S    stop after S seconds (0: no limit; default %g without\n"
            "                    --budget, none with it)\n"
            "  --seed N          random seed (default 1); same inputs, seed and --budget\n"
            "                    without --time-limit => the same plan, byte for byte\n"
            "  --out FILE        where to write the best plan (default ./" DEFAULT_OUT ")\n"
            "  --trace FILE      write the best plan's simulated timeline (Perfetto JSON)\n"
            "  --least-bad       when no plan fits in memory, write the one that overflows\n"
            "                    least anyway (without it: no plan is written, exit 2)\n"
            "  --db FILE         profile database: measured tile costs first, then analytic\n"
            "  --json            print one JSON object instead of the table\n"
            "  --no-eval-cache   simulate a plan again when the search meets it again\n"
            "                    (for measurements: the same chain and plan, only slower)\n"
            "  --evaluator E     how proposals are judged: auto (default), full, symmetry,\n"
            "                    hierarchical (as simsearch simulate --evaluator; a forced\n"
            "                    evaluator that does not apply to a proposal rejects it)\n",
            DEFAULT_TIME_LIMIT);
}

typedef struct opts {
    ss_cli_common c; /* --model, --topology, --nodes, --batch, --json */
    const char *out, *trace, *db, *evaluator;
    ss_evaluator ev; /* parsed --evaluator */
    long long budget, seed;
    double time_limit;
    int no_cache;  /* --no-eval-cache */
    int least_bad; /* --least-bad */
} opts;

static int parse(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->c.model = DEFAULT_MODEL;
    o->out = DEFAULT_OUT;
    o->seed = 1;
    o->time_limit = -1; /* unset: DEFAULT_TIME_LIMIT unless --budget is given */
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            help(stdout);
            return -1;
        }
        if ((r = ss_cli_common_opt("search", argc, argv, &i, &o->c, 0))) {
            if (r < 0)
                return SS_EXIT_USAGE;
            continue;
        }
        if (!strcmp(argv[i], "--delta")) /* removed (docs/search.md, "Delta simulation") */
            return ss_cli_usage_error("search",
                                      "--delta was removed: delta simulation was slower than the "
                                      "full simulation it had to match; every proposal is judged "
                                      "by the full simulation (drop the flag)");
        if (!strcmp(argv[i], "--no-eval-cache")) {
            o->no_cache = 1;
            continue;
        }
        if (!strcmp(argv[i], "--least-bad")) {
            o->least_bad = 1;
            continue;
        }
        if ((r = ss_cli_opt(argc, argv, &i, "--out", &o->out)) ||
            (r = ss_cli_opt(argc, argv, &i, "--trace", &o->trace)) ||
            (r = ss_cli_opt(argc, argv, &i, "--db", &o->db)) ||
            (r = ss_cli_opt(argc, argv, &i, "--evaluator", &o->evaluator))) {
            if (r < 0)
                return ss_cli_usage_error("search", "%s needs a value", argv[i]);
            continue;
        }
        if ((r = ss_cli_opt(argc, argv, &i, "--budget", &v))) {
            if (ss_cli_int_opt("search", "--budget", r, v, 1, 1LL << 40, &o->budget))
                return SS_EXIT_USAGE;
            continue;
        }
        if ((r = ss_cli_opt(argc, argv, &i, "--seed", &v))) {
            if (ss_cli_int_opt("search", "--seed", r, v, 0, 1LL << 62, &o->seed))
                return SS_EXIT_USAGE;
            continue;
        }
        if ((r = ss_cli_opt(argc, argv, &i, "--time-limit", &v))) {
            char *end = NULL;
            double t = r < 0 ? -1 : strtod(v, &end);
            if (r < 0 || !end || *end || end == v || !(t >= 0) || t > 1e7)
                return ss_cli_usage_error("search",
                                          "--time-limit: '%s' is not a number of seconds from "
                                          "0 to 1e7 (0: no limit)",
                                          r < 0 ? "(missing)" : v);
            o->time_limit = t;
            continue;
        }
        return ss_cli_usage_error("search", "unknown argument '%s'", argv[i]);
    }
    if (!o->c.topology)
        return ss_cli_usage_error("search", "--topology is required");
    if (o->evaluator && ss_evaluator_parse(o->evaluator, &o->ev))
        return ss_cli_usage_error("search",
                                  "--evaluator: unknown evaluator \"%s\" (expected auto, full, "
                                  "symmetry or hierarchical)",
                                  o->evaluator);
    /* A budget alone makes the search reproducible: no clock unless asked. */
    if (o->time_limit < 0)
        o->time_limit = o->budget > 0 ? 0 : DEFAULT_TIME_LIMIT;
    return 0;
}

/* ---- Ctrl-C and progress ---------------------------------------------------- */

static volatile sig_atomic_t interrupted;

/* The first Ctrl-C stops the search (it polls the flag, also inside long
 * simulations); a second one ends the program at once. */
static void on_sigint(int sig)
{
    if (interrupted) {
        ss_output_remove_temps();
        signal(sig, SIG_DFL);
        raise(sig);
    }
    interrupted = 1;
}

static int stop_cb(void *ctx)
{
    (void)ctx;
    return interrupted != 0;
}

static void progress_cb(void *ctx, const ss_search_progress *p)
{
    (void)ctx;
    if (isfinite(p->best_us))
        fprintf(stderr, "\r  best %.2f ms/iter | %lld proposals | %.0f evals/s | %.1f s   ",
                p->best_us / 1000, (long long)p->proposals, p->evals_per_s, p->elapsed_s);
    else
        fprintf(stderr, "\r  no plan fits yet | %lld proposals | %.0f evals/s | %.1f s   ",
                (long long)p->proposals, p->evals_per_s, p->elapsed_s);
    fflush(stderr);
}

/* ---- report ------------------------------------------------------------------ */

static double max_peak(const ss_sim_result *r)
{
    double m = 0;
    for (int i = 0; i < r->n_devices; i++)
        if (r->peak_memory_bytes[i] > m)
            m = r->peak_memory_bytes[i];
    return m;
}

static void row(const char *name, const ss_sim_result *r, const ss_sim_result *dp)
{
    char mem[32], tp[32];
    printf("  %-14s %10.2f ms %12s %11s %8.2fx%s\n", name, r->iteration_us / 1000,
           ss_cli_si(r->throughput, tp, sizeof tp), ss_cli_bytes(max_peak(r), mem, sizeof mem),
           r->iteration_us > 0 ? dp->iteration_us / r->iteration_us : 0,
           r->fits ? "" : "  DOES NOT FIT");
}

static void print_human(const ss_search_result *r, const char *out_path, const char *trace)
{
    const ss_sim_result *b = &r->best_sim;
    printf("simsearch: %s on %s (%d devices, global batch %lld)\n", b->model, b->topology,
           b->n_devices, (long long)b->batch);
    if (r->interrupted)
        printf("search interrupted (Ctrl-C): the best plan found so far\n");
    if (r->devices_usable < b->n_devices)
        printf("note: no two devices of this topology can reach each other (every peer refuses\n"
               "      connections and none relays): plans use device 0 alone\n");
    printf("\n  %-14s %13s %12s %11s %9s\n", "plan", "time/iter", "samples/s", "peak mem",
           "speedup");
    row("data parallel", &r->dp_sim, &r->dp_sim);
    row("expert", &r->expert_sim, &r->dp_sim);
    row("best found", b, &r->dp_sim);
    printf("\n  expert plan: %s\n", r->expert_label);
    printf("  speedup of the best plan: %.2fx over data parallel, %.2fx over expert\n",
           r->speedup_vs_dp, r->speedup_vs_expert);
    if (r->interrupted && r->proposals == 0) {
        printf("  search: interrupted before its first proposal; the plans above are the\n"
               "          ones judged by then\n");
        goto written;
    }
    printf("  search: %lld proposals (%lld rejected by the compute bound, %lld by the load\n"
           "          bound while simulating, %lld by an earlier judgement of the same plan),\n"
           "          %lld accepted, %lld simulations (%.0f/s, %s), %.2f s, stopped: %s\n",
           (long long)r->proposals, (long long)r->pruned, (long long)r->cut,
           (long long)r->cached, (long long)r->accepted,
           (long long)r->evaluations, r->evals_per_s,
           "full simulation", r->time_s, r->stopped_by);
    printf("  best found after %.2f s; plan space about 10^%.0f plans\n", r->best_found_at_s,
           r->log10_space);
    if (!isfinite(r->gain_second_half))
        printf("  still improving: the first plan that fits came in the second half of the\n"
               "          search; a longer --time-limit or --budget may find a better one\n");
    else if (r->gain_second_half >= STILL_IMPROVING)
        printf("  still improving: the best plan got %.1f%% faster in the second half of the\n"
               "          search; a longer --time-limit or --budget will likely find a better one\n",
               100 * r->gain_second_half);
    if (r->time_dependent)
        printf("  the time limit decided where the search stopped: the same seed may give\n"
               "          another plan; --budget N without --time-limit is reproducible\n");
    if (b->n_crit > 0) {
        printf("  critical path of the best plan:");
        for (int i = 0; i < b->n_crit && i < 3; i++)
            printf("%s %s %s %.2f ms", i ? "," : "", b->crit[i].name, b->crit[i].kind,
                   b->crit[i].us / 1000);
        printf("\n");
    }
written:
    if (!out_path) {
        printf("\nno plan written: none fits in memory\n");
        return;
    }
    if (!b->fits)
        printf("\nthe least bad plan, which does NOT fit in memory, was written (--least-bad)");
    printf("\nplan written to %s", out_path);
    if (trace)
        printf(", trace to %s", trace);
    printf("\n(simsearch simulate --plan %s ... predicts it again)\n", out_path);
}

static int run(const opts *o, struct sigaction *old)
{
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    int taken = 0;
    const ss_cli_output outs[] = {{"--out", o->out}, {"--trace", o->trace}, {NULL, NULL}};
    int rc = ss_cli_check_outputs("search", outs, o->c.json, &taken);
    if (rc)
        return rc;
    rc = ss_cli_common_load(&o->c, &m, &g, NULL);
    if (rc)
        return rc;
    ss_costmodel *cm = NULL;
    ss_profile_db *db = NULL;
    if ((rc = ss_cli_cost_model(m, o->db, &cm, &db))) {
        ss_graph_free(g);
        ss_machine_free(m);
        return rc;
    }

    ss_search_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.budget = o->budget;
    cfg.time_limit_s = o->time_limit;
    cfg.seed = (uint64_t)o->seed;
    cfg.no_eval_cache = o->no_cache;
    cfg.evaluator = o->ev;
    cfg.stop = stop_cb;
    cfg.progress = isatty(STDERR_FILENO) ? progress_cb : NULL;

    ss_search_result r;
    memset(&r, 0, sizeof r);
    ss_diag d;
    ss_diag_init(&d);
    ss_status st = ss_search_run(g, m, cm, &cfg, &r, &d);
    sigaction(SIGINT, old, NULL); /* a second Ctrl-C now ends the program */
    if (cfg.progress)
        fprintf(stderr, "\r%78s\r", "");
    /* No plan fits: say so, and write nothing unless the least bad is asked for. */
    int none_fits = st == SS_OK && !r.best_sim.fits;
    const char *out = none_fits && !o->least_bad ? NULL : o->out;
    if (st == SS_OK && out)
        st = ss_plan_save(r.best, g, out, &d);
    /* The plan is written: a trace that fails now does not hide the report. */
    ss_diag dt;
    ss_diag_init(&dt);
    int trace_ok = st != SS_OK || !out || !o->trace ||
                   ss_sim_write_trace(r.sim, o->trace, &dt) == SS_OK;
    const char *trace = out && trace_ok ? o->trace : NULL;
    if (st == SS_OK && taken)
        ss_cli_report_to_stderr();
    if (st == SS_OK) {
        if (o->c.json) {
            char *js = NULL;
            st = ss_search_result_to_json(&r, out, trace, &js, &d);
            if (st == SS_OK) {
                printf("%s\n", js);
                ss_free(js);
            }
        } else {
            print_human(&r, out, trace);
        }
    }
    if (st != SS_OK) {
        rc = ss_cli_fail(&d);
    } else if (none_fits && !o->least_bad) {
        const ss_sim_result *b = &r.best_sim;
        char over[32];
        fprintf(stderr,
                "simsearch: no plan found fits in memory (the least bad overflows device %d by "
                "%s); no plan written. --least-bad writes it anyway; a larger machine "
                "(--nodes), a smaller --batch or a model with fewer parameters may fit\n",
                b->overflow_device, ss_cli_bytes(b->overflow_bytes, over, sizeof over));
        rc = SS_EXIT_USAGE;
    } else if (!trace_ok) {
        fprintf(stderr, "simsearch: the plan was written to %s, but not the trace:\n", o->out);
        rc = ss_cli_fail(&dt);
    } else
        rc = SS_EXIT_OK;
    ss_search_result_clear(&r);
    ss_cost_free(cm);
    ss_profile_db_free(db);
    ss_graph_free(g);
    ss_machine_free(m);
    return rc;
}

int ss_cmd_search(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? SS_EXIT_OK : rc;
    /* Catch Ctrl-C from the start (loading a big model takes a moment); the
     * search polls the flag, so an early Ctrl-C stops it at once. */
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    interrupted = 0;
    sigaction(SIGINT, &sa, &old);
    rc = run(&o, &old);
    sigaction(SIGINT, &old, NULL);
    return rc;
}
