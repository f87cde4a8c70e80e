/*
 * cmd_search.c — `simsearch [search] --topology FILE ...`: the main job.
 * Finds a fast plan with the MCMC search (ss_search_run), writes it as plan
 * JSON, prints a table of data parallelism, the expert plan and the best
 * plan found (or one JSON object with --json).
 *
 * Ctrl-C or SIGTERM: a handler sets a flag that the search polls before
 * every proposal; the search stops, and the best plan so far is still
 * written and printed (exit status 0, the report says "interrupted" and by
 * which signal). A second signal during the report falls back to the
 * default action. Progress goes to stderr: a line redrawn in place when
 * stderr is a terminal, else one line every 10 s (docs/search.md, "Output").
 *
 * LLMs (transformers of repeated layers) take the LLM planner (levels 0-3,
 * --level, --threads, --baseline megatron-grid); the report then adds MFU,
 * TFLOP/s per GPU, tokens/s, the Megatron-LM flags of the plan (or that it
 * is not expressible in Megatron-LM terms: level 2's plans), the runners-up
 * within the simulator's error band and the grid baseline.
 */
#include "cli.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The default model: the one whose best plan beats data parallelism by the
 * widest margin on the shipped clusters (benchmarks/RESULTS.md, "Search"). */
#define DEFAULT_MODEL "rnntc"
#define DEFAULT_OUT "plan.json"
#define DEFAULT_TIME_LIMIT 10.0
#define DEFAULT_TIME_LIMIT_S 10
/* A search whose second half made the best plan at least this much faster
 * (relative) reports that it was still improving (docs/search.md, "Output"). */
#define STILL_IMPROVING 0.002
/* Progress when stderr is not a terminal: one line every so many seconds. */
#define PROGRESS_EVERY_S 10.0

typedef struct opts {
    ss_cli_common c; /* --model, --topology, --nodes, --batch, --json */
    const char *out, *trace, *db, *evaluator;
    ss_evaluator ev; /* parsed --evaluator */
    long long budget, seed;
    double time_limit;
    int no_cache;  /* --no-eval-cache */
    int no_tune;   /* --no-tune-sync */
    int least_bad; /* --least-bad */
    int delta;     /* --delta: removed, refused with the reason */
    long long level, threads; /* --level (-1: the library's default), --threads (0: all) */
    const char *baseline;     /* --baseline megatron-grid|none */
    int base;                 /* parsed --baseline */
} opts;

#define STR2(x) #x
#define STR(x) STR2(x)

static const ss_cli_optdef options[] = {
    SS_CLI_STR_ROW(opts, "--topology", "FILE", c.topology, 1, "topology JSON"),
    SS_CLI_STR_ROW(opts, "--model", "SPEC", c.model, 0,
                   SS_CLI_MODEL_HELP "\n(default: " DEFAULT_MODEL ")"),
    SS_CLI_ROW_NODES(opts),
    SS_CLI_ROW_BATCH(opts),
    SS_CLI_INT_ROW(opts, "--budget", "N", budget, 1, 1LL << 40, "proposals in all (default 20000)"),
    SS_CLI_REAL_ROW(opts, "--time-limit", "S", time_limit, 0, 1e7,
                    "stop after S seconds (0: no limit; default " STR(DEFAULT_TIME_LIMIT_S)
                    " without\n--budget, none with it)"),
    SS_CLI_INT_ROW(opts, "--seed", "N", seed, 0, 1LL << 62,
                   "random seed (default 1); same inputs, seed and --budget\n"
                   "without --time-limit => the same plan, byte for byte"),
    SS_CLI_STR_ROW(opts, "--out", "FILE", out, 0,
                   "where to write the best plan (default ./" DEFAULT_OUT ")"),
    SS_CLI_STR_ROW(opts, "--trace", "FILE", trace, 0,
                   "write the best plan's simulated timeline (Perfetto JSON)"),
    SS_CLI_FLAG_ROW(opts, "--least-bad", least_bad,
                    "when no plan fits in memory, write the one that overflows\n"
                    "least anyway (without it: no plan is written, exit 2)"),
    SS_CLI_STR_ROW(opts, "--db", "FILE", db, 0,
                   "profile database: measured tile costs first, then analytic"),
    SS_CLI_ROW_JSON(opts, "print one JSON object instead of the table"),
    SS_CLI_FLAG_ROW(opts, "--no-eval-cache", no_cache,
                    "simulate a plan again when the search meets it again\n"
                    "(for measurements: the same chain and plan, only slower)"),
    SS_CLI_FLAG_ROW(opts, "--no-tune-sync", no_tune,
                    "keep the final plan's gradient-sync settings as the search\n"
                    "found them (default: tune bucket, priority, reorder K, synced\n"
                    "flags and sync mode in the simulator, as tune-sync does)"),
    SS_CLI_STR_ROW(opts, "--evaluator", "E", evaluator, 0,
                   "how proposals are judged: auto (default), full, symmetry,\n"
                   "hierarchical (as simsearch simulate --evaluator; a forced\n"
                   "evaluator that does not apply to a proposal rejects it)"),
    SS_CLI_INT_ROW(opts, "--level", "L", level, 0, 3,
                   "LLM planner level: 0 rules, 1 + settings, 2 + ILP / stage DP,\n"
                   "3 + mesh sweep and knob chains (default: the highest that fits\n"
                   "the time limit)"),
    SS_CLI_INT_ROW(opts, "--threads", "N", threads, 1, 64,
                   "LLM planner and grid threads (default: all cores); the same\n"
                   "plan for a given --seed, --budget and --threads"),
    SS_CLI_STR_ROW(opts, "--baseline", "B", baseline, 0,
                   "megatron-grid: also run the exhaustive Megatron grid (LLMs)\n"
                   "and report its best point; none (default)"),
    SS_CLI_FLAG_ROW(opts, "--delta", delta, "removed (delta simulation); refused"),
    {NULL, SS_CLI_FLAG, NULL, 0, 0, 0, 0, 0, 0, NULL},
};

const ss_cli_cmddef ss_cli_def_search = {
    "search",
    "find a fast plan (the default command)",
    "Search a parallelization plan (MCMC over every operator's split and placement,\n"
    "judged by the simulator) and compare it with data parallelism and the expert\n"
    "plan. Ctrl-C or SIGTERM stops the search early and still writes the best plan\n"
    "found. 'simsearch --topology FILE ...' (no command) runs the search too.",
    options,
    NULL,
    0,
    "The report: \"stopped:\" says what ended the search (budget, time limit, no\n"
    "improvement, interrupted); \"the time limit decided\" is printed only when the\n"
    "time limit ended it or cut a phase. Speedups are against plans that fit in\n"
    "memory; a baseline that does not fit is shown as such, with no speedup.\n"
    "Exit status: 0 success (also when interrupted), 2 bad usage or input (or no\n"
    "plan fits, without --least-bad), 1 input/output or system failures.",
};

static int parse(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->c.model = DEFAULT_MODEL;
    o->out = DEFAULT_OUT;
    o->seed = 1;
    o->level = -1;
    int r = ss_cli_parse_def(&ss_cli_def_search, argc, argv, o);
    if (r)
        return r;
    if (o->delta) /* removed (docs/search.md, "Delta simulation") */
        return ss_cli_usage_error("search",
                                  "--delta was removed: delta simulation was slower than the "
                                  "full simulation it had to match; every proposal is judged "
                                  "by the full simulation (drop the flag)");
    if (o->evaluator && ss_evaluator_parse(o->evaluator, &o->ev))
        return ss_cli_usage_error("search",
                                  "--evaluator: unknown evaluator \"%s\" (expected auto, full, "
                                  "symmetry or hierarchical)",
                                  o->evaluator);
    if (o->baseline && !strcmp(o->baseline, "megatron-grid"))
        o->base = SS_BASELINE_MEGATRON_GRID;
    else if (o->baseline && strcmp(o->baseline, "none"))
        return ss_cli_usage_error("search",
                                  "--baseline: unknown baseline \"%s\" (expected megatron-grid "
                                  "or none)",
                                  o->baseline);
    /* A budget alone makes the search reproducible: no clock unless asked. */
    if (!ss_cli_given(&ss_cli_def_search, "--time-limit"))
        o->time_limit = o->budget > 0 ? 0 : DEFAULT_TIME_LIMIT;
    return 0;
}

/* ---- Ctrl-C and progress ---------------------------------------------------- */

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The callbacks' context. */
typedef struct cb_ctx {
    int tty;           /* stderr is a terminal */
    const ss_graph *g;
    const char *out;   /* --out */
} cb_ctx;

/* The LLM planner's level-0 plan, written at once (atomically) so that a
 * plan that fits is on disk long before the search ends; the final plan
 * replaces it. A failure here is left to the final write to report. */
static void first_plan_cb(void *ctx, const ss_plan *p)
{
    const cb_ctx *c = ctx;
    ss_diag d;
    ss_diag_init(&d);
    (void)ss_plan_save(p, c->g, c->out, &d);
}

/* On a terminal the line is redrawn in place; else one line each call
 * (every PROGRESS_EVERY_S seconds). */
static void progress_cb(void *ctx, const ss_search_progress *p)
{
    int tty = ((const cb_ctx *)ctx)->tty;
    const char *head = tty ? "\r  " : "simsearch: ", *tail = tty ? "   " : "\n";
    if (isfinite(p->best_us) && p->best_us > 0)
        fprintf(stderr, "%sbest %.2f ms/iter | %lld proposals | %.0f evals/s | %.1f s%s", head,
                p->best_us / 1000, (long long)p->proposals, p->evals_per_s, p->elapsed_s, tail);
    else
        fprintf(stderr, "%sno plan fits yet | %lld proposals | %.0f evals/s | %.1f s%s", head,
                (long long)p->proposals, p->evals_per_s, p->elapsed_s, tail);
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

/* One row of the table; the speedup column (over data parallelism) only
 * when both plans fit in memory: a time that cannot run is no baseline. */
static void row(const char *name, const ss_sim_result *r, const ss_sim_result *dp)
{
    char mem[32], tp[32], sp[32] = "-";
    if (!r->fits && r->n_devices == 0) { /* ruled out unsimulated: no time to show */
        printf("  %-14s %13s %12s %11s %9s  DOES NOT FIT (not simulated: its weights and\n"
               "  %-14s %13s %12s %11s %9s  optimizer state alone overflow a device)\n",
               name, "-", "-", "-", "-", "", "", "", "", "");
        return;
    }
    if (r->fits && dp->fits && r->iteration_us > 0)
        snprintf(sp, sizeof sp, "%.2fx", dp->iteration_us / r->iteration_us);
    printf("  %-14s %10.2f ms %12s %11s %9s%s\n", name, r->iteration_us / 1000,
           ss_cli_si(r->throughput, tp, sizeof tp), ss_cli_bytes(max_peak(r), mem, sizeof mem),
           sp, r->fits ? "" : "  DOES NOT FIT");
}

/* "1.23x over data parallel" or why there is no such figure. */
static const char *speedup_text(const ss_sim_result *base, const ss_sim_result *best,
                                const char *what, char *buf, size_t n)
{
    if (!base->fits)
        snprintf(buf, n, "none over %s (it does not fit in memory)", what);
    else if (!best->fits)
        snprintf(buf, n, "none over %s (the best plan does not fit in memory)", what);
    else
        snprintf(buf, n, "%.2fx over %s", base->iteration_us / best->iteration_us, what);
    return buf;
}

/* How the proposals were judged: the evaluator asked for, and for auto the
 * one that judged the best plan. */
static const char *evaluator_text(const opts *o, const ss_sim_result *b, char *buf, size_t n)
{
    if (o->ev == SS_EVAL_AUTO)
        snprintf(buf, n, "auto evaluator (the best plan: %s)", b->evaluator);
    else
        snprintf(buf, n, "%s evaluator", ss_evaluator_name(o->ev));
    return buf;
}

/* The LLM planner's lines: level, threads, figures of merit, Megatron-LM
 * flags, runners-up, level 2 and the grid baseline. */
/* What tuning the written plan's gradient-sync settings did. */
static void print_tuning(const ss_search_sync_tuning *t)
{
    if (!t->run) {
        printf("  sync tuning: %s\n", t->note[0] ? t->note : "not run");
        return;
    }
    char bucket[32];
    if (t->bucket_bytes >= 1e12) /* Megatron's bulk sync: one bucket */
        snprintf(bucket, sizeof bucket, "one bucket");
    else
        snprintf(bucket, sizeof bucket, "bucket %.2f MB", t->bucket_bytes / 1e6);
    printf("  sync tuning: %.3f -> %.3f ms (%+.2f%%), %d simulations, %.2f s, %d finalist%s%s%s\n"
           "          settings: %s, priority %s, reorder K %d, synced flags %s, "
           "sync %s%s\n",
           t->before_us / 1000, t->after_us / 1000, 100 * (t->after_us / t->before_us - 1),
           t->evaluations, t->time_s, t->finalists, t->finalists == 1 ? "" : "s",
           t->flipped ? " (the other finalist won after tuning)" : "",
           t->cut ? ", cut by the time limit" : "", bucket,
           t->priority ? "on" : "off", t->reorder_k, t->synced_flags ? "on" : "off",
           t->bulk ? "bulk" : "overlap", t->changed ? "" : " (unchanged: nothing faster)");
    if (t->note[0])
        printf("          (%s)\n", t->note);
}

static void print_llm(const ss_search_result *r)
{
    const ss_sim_result *b = &r->best_sim;
    printf("  LLM planner: level %d, %d threads, %.2f s CPU, first plan after %.2f s\n", r->level,
           r->threads, r->cpu_s, r->first_plan_s);
    printf("  best plan: %s\n", r->best_label);
    if (r->sync_tuning.changed)
        printf("          with the tuned sync settings above (the plan file has them)\n");
    if (b->fits && b->iteration_us > 0)
        printf("  MFU %.1f%%, %.1f TFLOP/s per GPU, %.0f tokens/s\n", 100 * r->mfu,
               r->tflops_per_gpu, r->tokens_per_s);
    if (r->megatron_args[0])
        printf("  Megatron-LM flags: %s\n", r->megatron_args);
    else
        printf("  Megatron-LM flags: none: the plan is not expressible in Megatron-LM terms\n"
               "          (per-operator shardings of level 2; the plan file runs in simsearch)\n");
    for (int i = 0; i < r->n_near; i++)
        printf("  %s %-52s %10.2f ms (%+.1f%%)\n", i ? "          " : "runner-up:",
               r->near[i].plan, r->near[i].iteration_us / 1000,
               100 * (r->near[i].iteration_us / b->iteration_us - 1));
    if (r->n_near > 0)
        printf("          (within the simulator's +-8%% error band: worth a try on the cluster)\n");
    if (r->level2_plan[0]) {
        if (isfinite(r->level2_us) && r->level2_us > 0)
            printf("  level 2: %.2f ms, %s\n", r->level2_us / 1000, r->level2_plan);
        else
            printf("  level 2: %s\n", r->level2_plan);
    }
    if (!r->grid.run)
        return;
    if (r->grid.fits && r->grid.iteration_us > 0)
        printf("  Megatron grid best: %.2f ms, %s\n"
               "          (%lld points, %lld judged, %.2f s, %.2f s CPU%s); speedup %.3fx over it\n",
               r->grid.iteration_us / 1000, r->grid.plan, (long long)r->grid.points,
               (long long)r->grid.points_judged, r->grid.time_s, r->grid.cpu_s,
               r->grid.time_cut ? ", cut short" : "",
               b->fits ? r->grid.iteration_us / b->iteration_us : 0.0);
    else
        printf("  Megatron grid best: DOES NOT FIT: no point fits (%lld points, %lld judged, %.2f s%s);\n"
               "          no speedup over it\n",
               (long long)r->grid.points, (long long)r->grid.points_judged, r->grid.time_s,
               r->grid.time_cut ? ", cut short" : "");
}

static void print_human(const ss_search_result *r, const opts *o, const char *out_path,
                        const char *trace)
{
    const ss_sim_result *b = &r->best_sim;
    char s1[96], s2[96];
    printf("simsearch: %s on %s (%d devices, global batch %lld)\n", b->model, b->topology,
           b->n_devices, (long long)b->batch);
    if (r->interrupted)
        printf("search interrupted (%s): the best plan found so far\n",
               ss_cli_stop_signal == SIGTERM ? "SIGTERM" : "Ctrl-C");
    if (r->devices_usable < b->n_devices)
        printf("note: no two devices of this topology can reach each other (every peer refuses\n"
               "      connections and none relays): plans use device 0 alone\n");
    printf("\n  %-14s %13s %12s %11s %9s\n", "plan", "time/iter", "samples/s", "peak mem",
           "speedup");
    row("data parallel", &r->dp_sim, &r->dp_sim);
    row("expert", &r->expert_sim, &r->dp_sim);
    row("best found", b, &r->dp_sim);
    printf("\n  expert plan: %s\n", r->expert_label);
    printf("  speedup of the best plan: %s, %s\n",
           speedup_text(&r->dp_sim, b, "data parallel", s1, sizeof s1),
           speedup_text(&r->expert_sim, b, "expert", s2, sizeof s2));
    if (r->interrupted && r->proposals == 0) {
        printf("  search: interrupted before its first proposal; the plans above are the\n"
               "          ones judged by then\n");
        goto written;
    }
    printf("  search: %lld proposals (%lld rejected by the compute bound, %lld by the load\n"
           "          bound while simulating, %lld by an earlier judgement of the same plan),\n"
           "          %lld accepted, %lld simulations (%.0f/s), %.2f s, stopped: %s\n"
           "          judged by the %s\n",
           (long long)r->proposals, (long long)r->pruned, (long long)r->cut,
           (long long)r->cached, (long long)r->accepted, (long long)r->evaluations,
           r->evals_per_s, r->time_s, r->stopped_by, evaluator_text(o, b, s1, sizeof s1));
    printf("  best found after %.2f s; plan space about 10^%.0f plans\n", r->best_found_at_s,
           r->log10_space);
    if (!isfinite(r->gain_second_half))
        printf("  still improving: the first plan that fits came in the second half of the\n"
               "          search; a longer --time-limit or --budget may find a better one\n");
    else if (r->gain_second_half >= STILL_IMPROVING)
        printf("  still improving: the best plan got %.1f%% faster in the second half of the\n"
               "          search; a longer --time-limit or --budget will likely find a better one\n",
               100 * r->gain_second_half);
    if (!strcmp(r->stopped_by, "time limit"))
        printf("  the time limit decided where the search stopped: the same seed may give\n"
               "          another plan; --budget N without --time-limit is reproducible\n");
    else if (r->time_dependent && r->level >= 0)
        printf("  level 2's ILP time limits (or the time limit) stopped some of its solves, so\n"
               "          the same seed may give another plan under another machine load\n");
    else if (r->time_dependent)
        printf("  the time limit (%g s, shared out over the exploration chains) cut some\n"
               "          chains short, so the same seed may give another plan; --budget N\n"
               "          without --time-limit is reproducible\n",
               r->time_limit_s);
    if (b->n_crit > 0) {
        printf("  critical path of the best plan:");
        for (int i = 0; i < b->n_crit && i < 3; i++)
            printf("%s %s %s %.2f ms", i ? "," : "", b->crit[i].name, b->crit[i].kind,
                   b->crit[i].us / 1000);
        printf("\n");
    }
    print_tuning(&r->sync_tuning);
    if (r->level >= 0)
        print_llm(r);
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

static int run(const opts *o, const struct sigaction old[2], double t_start)
{
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    int taken = 0;
    const ss_cli_output db_in = {"--db", o->db};
    const ss_cli_output outs[] = {{"--out", o->out}, {"--trace", o->trace}, {NULL, NULL}};
    int rc = ss_cli_check_inputs("search", &o->c, &db_in, outs, &taken);
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
    /* the limit counts from the command's start: loading a big model and
     * machine is part of it */
    cfg.time_limit_s = o->time_limit;
    if (o->time_limit > 0) {
        cfg.time_limit_s = o->time_limit - (mono_s() - t_start);
        if (cfg.time_limit_s < 0.01)
            cfg.time_limit_s = 0.01;
    }
    cfg.seed = (uint64_t)o->seed;
    cfg.no_eval_cache = o->no_cache;
    cfg.no_sync_tuning = o->no_tune;
    cfg.evaluator = o->ev;
    cfg.stop = ss_cli_stop_cb;
    int tty = isatty(STDERR_FILENO);
    cb_ctx cbc = {tty, g, o->out};
    cfg.progress = progress_cb;
    cfg.cb_ctx = &cbc;
    cfg.first_plan = o->out ? first_plan_cb : NULL;
    cfg.progress_every_s = tty ? 0 : PROGRESS_EVERY_S;
    cfg.level = o->level >= 0 ? SS_SEARCH_LEVEL((int)o->level) : 0;
    cfg.threads = (int)o->threads;
    cfg.baseline = o->base;

    ss_search_result r;
    memset(&r, 0, sizeof r);
    ss_diag d;
    ss_diag_init(&d);
    ss_status st = ss_search_run(g, m, cm, &cfg, &r, &d);
    if (st == SS_OK)
        r.time_limit_s = o->time_limit; /* as asked (the search had the rest of it) */
    ss_cli_stop_signals_restore(old); /* a second signal now ends the program */
    if (tty)
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
            print_human(&r, o, out, trace);
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
    double t_start = mono_s();
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? SS_EXIT_OK : rc;
    /* Catch Ctrl-C from the start (loading a big model takes a moment); the
     * search polls the flag, so an early Ctrl-C stops it at once. */
    struct sigaction old[2];
    ss_cli_stop_signals_catch(old);
    rc = run(&o, old, t_start);
    ss_cli_stop_signals_restore(old);
    return rc;
}
