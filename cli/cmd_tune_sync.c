/*
 * cmd_tune_sync.c — `simsearch tune-sync`: the gradient-sync settings of
 * one plan (bucket threshold, priority, backward reordering K, per-layer
 * synced flags) tuned in the simulator
 * (search/tune_sync.h), reported against the plan's own settings, DDP's
 * 25 MB, Horovod's 64 MB and no bucketing; --out writes the tuned plan.
 * Bad input exits 2, anything else that fails 1.
 */
#include "cli.h"
#include "search/tune_sync.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct opts {
    ss_cli_common c;
    const char *out;
} opts;

static const ss_cli_optdef options[] = {
    SS_CLI_ROWS_PLAN_INPUTS(opts),
    SS_CLI_STR_ROW(opts, "--out", "FILE", out, 0, "write the plan with the tuned settings"),
    SS_CLI_ROW_JSON(opts, "print the result as one JSON object"),
    {NULL, SS_CLI_FLAG, NULL, 0, 0, 0, 0, 0, 0, NULL},
};

const ss_cli_cmddef ss_cli_def_tune_sync = {
    "tune-sync",
    "tune a plan's gradient-sync settings in the simulator",
    "Choose the gradient bucket threshold (fusing smaller gradients, splitting\n"
    "larger ones), the priority of front layers, the backward reordering's\n"
    "adjustment layer K and per-layer synced flags by simulated iteration time:\n"
    "a grid of thresholds (512 KiB .. 1 GiB, and none) under both priorities,\n"
    "then K = 1, 2, 4 ... at the best threshold, then x1.1 steps around it.\n"
    "Synced flags (the next forward of a layer starts when its update ends)\n"
    "are on where the plan admits them (a forward that stays on each device);\n"
    "the iteration time is then a steady-state period. Reports the best\n"
    "against the plan's settings, DDP's 25 MB, Horovod's 64 MB and no bucketing\n"
    "(priority off, K 0, a barrier before the next forward).",
    options,
    NULL,
    0,
    "Exit status: 0 success, 2 bad usage or input, 1 input/output or system failures.",
};

static double cpu_s(void)
{
    return (double)clock() / CLOCKS_PER_SEC;
}

/* A point the simulator refused (not judged) has iteration_time_ms null. */
static void put_point(const char *name, const ss_tune_sync_point *x, int last)
{
    char ms[32];
    if (x->iteration_us < HUGE_VAL)
        snprintf(ms, sizeof ms, "%.6f", x->iteration_us / 1e3);
    else
        snprintf(ms, sizeof ms, "null");
    printf("\"%s\":{\"bucket_bytes\":%.0f,\"reorder_k\":%d,\"priority\":%s,"
           "\"synced_flags\":%s,\"iteration_time_ms\":%s}%s",
           name, x->bucket_bytes, x->reorder_k, x->priority ? "true" : "false",
           x->synced_flags ? "true" : "false", ms, last ? "" : ",");
}

static void put_line(const char *name, const ss_tune_sync_point *x, const ss_tune_sync_point *b)
{
    printf("  %-14s bucket %6.1f MB  priority %-3s  K %-3d  flags %-3s  %12.3f ms  (%+.2f%% vs "
           "best)\n",
           name, x->bucket_bytes / 1e6, x->priority ? "on" : "off", x->reorder_k,
           x->synced_flags ? "on" : "off", x->iteration_us / 1e3,
           100 * (x->iteration_us / b->iteration_us - 1));
}

int ss_cmd_tune_sync(int argc, char **argv)
{
    opts o;
    memset(&o, 0, sizeof o);
    int r = ss_cli_parse_def(&ss_cli_def_tune_sync, argc, argv, &o);
    if (r)
        return r < 0 ? SS_EXIT_OK : r;
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    ss_plan *p = NULL;
    ss_costmodel *cm = NULL;
    ss_profile_db *db = NULL;
    ss_sim *sim = NULL;
    ss_diag d;
    ss_diag_init(&d);
    int taken = 0;
    const ss_cli_output outs[] = {{"--out", o.out}, {NULL, NULL}};
    if ((r = ss_cli_check_and_load("tune-sync", &o.c, NULL, outs, &taken, &m, &g, &p)))
        return r;
    if ((r = ss_cli_cost_model(m, NULL, &cm, &db)))
        goto out;
    double t0 = cpu_s();
    ss_sim_config scfg = {0};
    ss_tune_sync_result res;
    if (ss_sim_new(g, m, cm, &scfg, &sim, &d) != SS_OK || ss_tune_sync(sim, p, &res, &d) != SS_OK) {
        r = ss_cli_fail(&d);
        goto out;
    }
    double secs = cpu_s() - t0;
    if (o.out) {
        ss_tune_sync_apply(p, &res.best);
        if (ss_plan_save(p, g, o.out, &d) != SS_OK) {
            r = ss_cli_fail(&d);
            goto out;
        }
    }
    if (taken)
        ss_cli_report_to_stderr();
    if (o.c.json) {
        printf("{");
        put_point("best", &res.best, 0);
        put_point("plan", &res.plan, 0);
        printf("\"defaults\":{");
        put_point("ddp_25mb", &res.ddp_25mb, 0);
        put_point("horovod_64mb", &res.horovod_64mb, 0);
        put_point("none", &res.none, 1);
        printf("},\"synced_flags_apply\":%s,\"evaluations\":%d,\"time_s\":%.3f}\n",
               res.flags_refused ? "false" : "true", res.evaluations, secs);
    } else {
        printf("plan       %s\n", o.c.plan);
        printf("best       bucket %.1f MB, priority %s, reorder K %d, synced flags %s: %.3f ms\n",
               res.best.bucket_bytes / 1e6, res.best.priority ? "on" : "off", res.best.reorder_k,
               res.best.synced_flags ? "on" : "off", res.best.iteration_us / 1e3);
        if (res.flags_refused)
            printf("           (synced flags do not apply: %s)\n", res.flags_why);
        put_line("plan's", &res.plan, &res.best);
        put_line("DDP 25 MB", &res.ddp_25mb, &res.best);
        put_line("Horovod 64 MB", &res.horovod_64mb, &res.best);
        put_line("no bucketing", &res.none, &res.best);
        printf("tuned in %.2f s CPU (%d simulations)\n", secs, res.evaluations);
        if (o.out)
            printf("wrote %s\n", o.out);
    }
    r = SS_EXIT_OK;
out:
    ss_cli_free_sim(sim, cm, db, p, g, m);
    return r;
}
