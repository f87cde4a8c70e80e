/*
 * bench_plan.c — the LLM planner against the exhaustive Megatron grid, in
 * one process: the search (ss_search_run with the grid baseline) on one
 * model and machine, then its figures: search CPU and wall seconds, the
 * plan found, the grid's best point, points judged and time, the speedup,
 * MFU, and the reference plan's time when one is given.
 *
 * Usage: bench_plan --model SPEC [--batch N] --topology FILE [--nodes N]
 *                   [--time-limit S] [--budget N] [--seed N] [--threads N]
 *                   [--level L] [--no-grid] [--ref SPEC] [--json]
 * Prints one line of key=value figures (or the search's JSON with --json).
 * Invariant: figures other than times depend only on the inputs, seed,
 * budget and threads.
 */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: bench_plan --model SPEC [--batch N] --topology FILE [--nodes N] "
                    "[--time-limit S] [--budget N] [--seed N] [--threads N] [--level L] "
                    "[--no-grid] [--ref SPEC] [--json]\n");
    return 2;
}

static void progress(void *ctx, const ss_search_progress *p)
{
    (void)ctx;
    fprintf(stderr, "  %.1f s: %lld proposals, best %.1f ms\n", p->elapsed_s,
            (long long)p->proposals, p->best_us / 1e3);
}

int main(int argc, char **argv)
{
    bench_inputs in = {0};
    const char *ref = NULL;
    int json = 0;
    ss_search_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.baseline = SS_BASELINE_MEGATRON_GRID;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-grid"))
            cfg.baseline = SS_BASELINE_NONE;
        else if (!strcmp(a, "--json"))
            json = 1;
        else if (!next)
            return usage();
        else if (bench_input_opt(&in, a, next))
            i++;
        else if (!strcmp(a, "--ref"))
            ref = argv[++i];
        else if (!strcmp(a, "--time-limit"))
            cfg.time_limit_s = atof(argv[++i]);
        else if (!strcmp(a, "--budget"))
            cfg.budget = atol(argv[++i]);
        else if (!strcmp(a, "--seed"))
            cfg.seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--threads"))
            cfg.threads = atoi(argv[++i]);
        else if (!strcmp(a, "--level"))
            cfg.level = SS_SEARCH_LEVEL(atoi(argv[++i]));
        else
            return usage();
    }
    if (!in.model || !in.topology)
        return usage();
    if (getenv("BENCH_PLAN_PROGRESS"))
        cfg.progress = progress;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    if (bench_load(&in, &m, &g, &d)) {
        fprintf(stderr, "bench_plan: %s\n", d.msg);
        return 1;
    }
    ss_costmodel *cm = ss_cost_new(m);
    ss_search_result r;
    memset(&r, 0, sizeof r);
    double w0 = bench_wall_s(), c0 = bench_cpu_s();
    if (ss_search_run(g, m, cm, &cfg, &r, &d)) {
        fprintf(stderr, "bench_plan: %s\n", d.msg);
        return 1;
    }
    double wall = bench_wall_s() - w0, cpu = bench_cpu_s() - c0;
    if (json) {
        char *s = NULL;
        if (ss_search_result_to_json(&r, NULL, NULL, &s, &d)) {
            fprintf(stderr, "bench_plan: %s\n", d.msg);
            return 1;
        }
        printf("%s\n", s);
        ss_free(s);
    }
    double ref_ms = 0;
    int ref_fits = 0;
    if (ref) {
        ss_plan *p = NULL;
        ss_sim *s = NULL;
        ss_sim_result rr;
        memset(&rr, 0, sizeof rr);
        if (ss_plan_from_spec(ref, g, m, &p, &d) || ss_sim_new(g, m, cm, NULL, &s, &d) ||
            ss_sim_run(s, p, &rr, &d)) {
            fprintf(stderr, "bench_plan: reference %s: %s\n", ref, d.msg);
            return 1;
        }
        ref_ms = rr.iteration_us / 1e3;
        ref_fits = rr.fits;
        ss_sim_result_clear(&rr);
        ss_sim_free(s);
        ss_plan_free(p);
    }
    printf("model=%s devices=%d level=%d threads=%d search_wall_s=%.2f search_cpu_s=%.2f "
           "plan_ms=%.3f fits=%d mfu=%.4f tflops_per_gpu=%.1f tokens_per_s=%.0f plan=\"%s\" "
           "first_plan_s=%.3f grid_ms=%.3f grid_fits=%d grid_points=%lld grid_judged=%lld "
           "grid_s=%.2f grid_cpu_s=%.2f grid_plan=\"%s\" speedup_vs_grid=%.4f planner_cpu_s=%.2f",
           in.model, ss_machine_n_devices(m), r.level, r.threads, wall, cpu,
           r.best_sim.iteration_us / 1e3, r.best_sim.fits, r.mfu, r.tflops_per_gpu,
           r.tokens_per_s, r.best_label, r.first_plan_s, r.grid.iteration_us / 1e3,
           r.grid.fits, (long long)r.grid.points, (long long)r.grid.points_judged,
           r.grid.time_s, r.grid.cpu_s, r.grid.plan, r.speedup_vs_megatron_grid, r.cpu_s);
    if (ref)
        printf(" ref_ms=%.3f ref_fits=%d ref=\"%s\"", ref_ms, ref_fits, ref);
    printf("\n");
    ss_search_result_clear(&r);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
    return 0;
}
