/*
 * bench_hier.c — the hierarchical evaluator's speed (and, optionally, its
 * agreement with the full simulation) on one plan given as `simsearch
 * simulate` takes it.
 *
 * Times: cold = the first ss_hier_eval on a fresh evaluator (every
 * sub-problem simulated), warm = the median of --reps further evaluations
 * of the same plan on the same evaluator (memoized sub-problems; the plan
 * is analysed and the stage-level pipeline simulated every time), and the
 * setup (model, topology, plan generation) apart. With --full the plan is
 * also simulated in full (ss_sim_run) and the difference reported: only for
 * plans the machine can afford (the 175B / 1,024-GPU plan needs 22 GB).
 *
 * Usage: bench_hier --model SPEC [--batch N] --topology FILE [--nodes N]
 *                   --plan SPEC [--reps N] [--full]
 * Invariant: the figures other than times depend only on the inputs.
 */
#include "bench_common.h"
#include "simulator/hier.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_hier --model SPEC [--batch N] --topology FILE [--nodes N] "
                    "--plan SPEC [--reps N] [--full]\n");
    return 2;
}

int main(int argc, char **argv)
{
    bench_inputs in = {0};
    const char *plan = NULL;
    int reps = 21, full = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--full"))
            full = 1;
        else if (!next)
            return usage();
        else if (bench_input_opt(&in, a, next))
            i++;
        else if (!strcmp(a, "--plan"))
            plan = argv[++i];
        else if (!strcmp(a, "--reps"))
            reps = atoi(argv[++i]);
        else
            return usage();
    }
    if (!in.model || !in.topology || !plan || reps < 1)
        return usage();
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    ss_plan *p = NULL;
    double t0 = 1e3 * bench_wall_s(), c0 = 1e3 * bench_cpu_s();
    if (bench_load(&in, &m, &g, &d) || ss_plan_from_spec(plan, g, m, &p, &d)) {
        fprintf(stderr, "bench_hier: %s\n", d.msg);
        return 1;
    }
    double t_setup = 1e3 * bench_wall_s() - t0, c_setup = 1e3 * bench_cpu_s() - c0;
    ss_costmodel *cm = ss_cost_new(m);
    ss_sim_result r = {0};
    t0 = 1e3 * bench_wall_s();
    c0 = 1e3 * bench_cpu_s();
    ss_hier *h = ss_hier_new(g, m, cm, NULL);
    if (!h || ss_hier_eval(h, p, &r, &d)) {
        fprintf(stderr, "bench_hier: %s\n", h ? d.msg : "out of memory");
        return 1;
    }
    double t_cold = 1e3 * bench_wall_s() - t0, c_cold = 1e3 * bench_cpu_s() - c0;
    ss_hier_stats cold = *ss_hier_stats_of(h);
    double *w = malloc((size_t)reps * 2 * sizeof *w), *wc = w + reps;
    for (int i = 0; i < reps; i++) {
        t0 = 1e3 * bench_wall_s();
        c0 = 1e3 * bench_cpu_s();
        if (ss_hier_eval(h, p, &r, &d)) {
            fprintf(stderr, "bench_hier: %s\n", d.msg);
            return 1;
        }
        w[i] = 1e3 * bench_wall_s() - t0;
        wc[i] = 1e3 * bench_cpu_s() - c0;
    }
    qsort(w, (size_t)reps, sizeof *w, cmp_d);
    qsort(wc, (size_t)reps, sizeof *wc, cmp_d);
    const ss_hier_stats *hs = ss_hier_stats_of(h);
    double peak = 0;
    for (int i = 0; i < r.n_devices; i++)
        peak = r.peak_memory_bytes[i] > peak ? r.peak_memory_bytes[i] : peak;
    printf("model %s, %d devices, plan %s\n", in.model, r.n_devices, plan);
    printf("setup (model, topology, plan) %.1f ms wall, %.1f ms CPU\n", t_setup, c_setup);
    printf("hier: iteration %.3f ms, max peak memory %.3f GiB, fits %d\n", r.iteration_us / 1e3,
           peak / 1073741824.0, r.fits);
    printf("hier: cold %.3f ms wall, %.3f ms CPU (%d sub-problems, %d reduced by symmetry, %lld "
           "tasks); warm median %.4f ms wall (min %.4f, max %.4f), %.4f ms CPU (min %.4f), %d "
           "reps, %d memo hits\n",
           t_cold, c_cold, cold.sub_sims, cold.sub_reduced, (long long)cold.tasks, w[reps / 2],
           w[0], w[reps - 1], wc[reps / 2], wc[0], reps, hs->memo_hits);
    printf("hier: %d stages, %d blocks of %d ops, %d stages simulated whole\n", hs->stages,
           hs->blocks, hs->block_ops, cold.full_stages);
    if (full) {
        ss_sim *s = NULL;
        ss_sim_result fr = {0};
        t0 = 1e3 * bench_wall_s();
        if (ss_sim_new(g, m, cm, NULL, &s, &d) || ss_sim_run(s, p, &fr, &d)) {
            fprintf(stderr, "bench_hier: %s\n", d.msg);
            return 1;
        }
        double t_full = 1e3 * bench_wall_s() - t0;
        double fpeak = 0;
        for (int i = 0; i < fr.n_devices; i++)
            fpeak = fr.peak_memory_bytes[i] > fpeak ? fr.peak_memory_bytes[i] : fpeak;
        printf("full: iteration %.3f ms, max peak memory %.3f GiB, %lld tasks, %.1f ms\n",
               fr.iteration_us / 1e3, fpeak / 1073741824.0, (long long)fr.n_tasks, t_full);
        for (int i = 0; i < fr.n_devices; i += fr.n_devices / 4)
            printf("device %d: compute full %.3f hier %.3f ms, peak full %.4f hier %.4f GiB\n", i,
                   fr.compute_us[i] / 1e3, r.compute_us[i] / 1e3,
                   fr.peak_memory_bytes[i] / 1073741824.0, r.peak_memory_bytes[i] / 1073741824.0);
        printf("difference: iteration %+.3f%%, max peak memory %+.3f%%\n",
               100.0 * (r.iteration_us - fr.iteration_us) / fr.iteration_us,
               100.0 * (peak - fpeak) / fpeak);
        ss_sim_result_clear(&fr);
        ss_sim_free(s);
    }
    free(w);
    ss_sim_result_clear(&r);
    ss_hier_free(h);
    ss_cost_free(cm);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_machine_free(m);
    return 0;
}
