/*
 * bench_level2.c — the planner's level 2 (search/level2.h) end to end: plan
 * a model on a machine, then simulate the plan and a baseline plan spec
 * (e.g. Megatron-LM's) with the same simulator, and print both.
 *
 * Usage: bench_level2 --model SPEC [--batch N] --topology FILE [--nodes N]
 *                     [--tp T] [--baseline SPEC] [--time-limit S]
 *                     [--max-axes K] [--pp P] [--mb M]
 *                     [--mesh AxB] [--show 1] [--finalists K]
 *                     [--save PLAN.json] [--threads T]
 * --tp: the tensor-parallel degree the model's vocabulary is padded for
 * (ss_model_build_tp), the same graph for both plans. --threads: level 2's
 * threads (default 1; its CPU seconds are the process's, all threads). Exit
 * 0 when the level-2 plan is valid and fits memory when simulated, 1
 * otherwise.
 */
#include "bench_common.h"
#include "search/level2.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int simulate(const ss_graph *g, const ss_machine *m, ss_costmodel *cm, const ss_plan *p,
                    const char *label)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_sim_config sc = {0};
    sc.one_shot = 1;
    ss_sim *sim = NULL;
    ss_sim_result r = {0};
    double c0 = bench_cpu_s();
    if (ss_sim_new(g, m, cm, &sc, &sim, &d) || ss_sim_run(sim, p, &r, &d)) {
        fprintf(stderr, "%s: %s\n", label, d.msg);
        ss_sim_free(sim);
        return -1;
    }
    double peak = 0, capb = 0, stat = 0;
    for (int i = 0; i < r.n_devices; i++) {
        if (r.peak_memory_bytes[i] > peak) {
            peak = r.peak_memory_bytes[i];
            capb = r.capacity_bytes[i];
        }
        if (r.static_memory_bytes[i] > stat)
            stat = r.static_memory_bytes[i];
    }
    printf("%-10s %10.2f ms  fits=%d  peak %.1f / %.1f GiB (static %.1f)  (%s evaluator, %.2f s "
           "CPU)\n",
           label, r.iteration_us / 1e3, r.fits, peak / 1073741824.0, capb / 1073741824.0,
           stat / 1073741824.0, r.evaluator, bench_cpu_s() - c0);
    int fits = r.fits;
    ss_sim_result_clear(&r);
    ss_sim_free(sim);
    return fits;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *topo = NULL, *base = NULL, *save = NULL;
    int nodes = 0, tp = 0, show = 0;
    long long batch = 0;
    ss_level2_config cfg = {0};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model"))
            model = argv[i + 1];
        else if (!strcmp(argv[i], "--topology"))
            topo = argv[i + 1];
        else if (!strcmp(argv[i], "--baseline"))
            base = argv[i + 1];
        else if (!strcmp(argv[i], "--nodes"))
            nodes = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--tp"))
            tp = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch"))
            batch = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--time-limit"))
            cfg.time_limit_s = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-axes"))
            cfg.max_axes = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--pp"))
            cfg.pp = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--finalists"))
            cfg.finalists = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--save"))
            save = argv[i + 1];
        else if (!strcmp(argv[i], "--mesh"))
            cfg.mesh = argv[i + 1];
        else if (!strcmp(argv[i], "--show"))
            show = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mb"))
            cfg.microbatches = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads"))
            cfg.threads = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "bench_level2: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!model || !topo) {
        fprintf(stderr, "usage: bench_level2 --model SPEC [--batch N] --topology FILE "
                        "[--nodes N] [--tp T] [--baseline SPEC] [--time-limit S] "
                        "[--max-axes K] [--pp P] [--mb M] [--threads T]\n");
        return 2;
    }
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    if (ss_machine_load_nodes(topo, nodes, &m, &d) ||
        ss_model_build_tp(model, batch, ss_machine_n_devices(m), tp, &g, &d)) {
        fprintf(stderr, "bench_level2: %s\n", d.msg);
        return 2;
    }
    ss_costmodel *cm = ss_cost_new(m);
    ss_plan *p = NULL;
    ss_level2_report rep;
    double c0 = bench_cpu_s();
    ss_status st = ss_level2_plan(g, m, cm, &cfg, &p, &rep, &d);
    double plan_cpu = bench_cpu_s() - c0;
    printf("model %s (%d ops), %d devices, batch %lld\n", model, ss_graph_n_ops(g),
           ss_machine_n_devices(m), (long long)ss_graph_batch(g));
    printf("level 2: %.2f s wall, %.2f s CPU; %d configurations priced, %d skipped by the bound; "
           "%d ILPs, %.2f s in ILPs, %.2f s of it in CBC's solves (largest ILP %.3f s, %d "
           "time-limited, %d node-limited)%s\n",
           rep.time_s, plan_cpu, rep.configs, rep.skipped, rep.ilp_solves, rep.ilp_s,
           rep.ilp_cbc_s, rep.ilp_max_s, rep.ilp_time_limited, rep.ilp_node_limited,
           rep.time_limited ? "; time limit reached" : "");
    printf("level 2 threads: %d, configurations priced per thread:", rep.threads);
    for (int t = 0; t < rep.threads; t++)
        printf(" %d", rep.thread_configs[t]);
    printf("\n");
    int rc = 1;
    if (st) {
        printf("level 2: %s\n", d.msg);
    } else {
        printf("level 2 plan: pp=%d, stage mesh %s, %d micro-batches, %s, estimate "
               "%.2f ms, simulated %.2f ms (%d finalists simulated); stages start at layers",
               rep.pp, rep.mesh, rep.microbatches, rep.recompute_text, rep.estimate_us / 1e3,
               rep.simulated_us / 1e3, rep.simulated);
        for (int s = 0; s <= rep.pp && s <= 64; s++)
            printf(" %d", rep.stage_first[s]);
        printf(" (of %d)\n", rep.n_layers);
        for (int i = 0; show && i < ss_graph_n_ops(g); i++) {
            const ss_op *op = ss_graph_op(g, i);
            if (strncmp(op->name, "l0.", 3) && strncmp(op->name, "l1.", 3) && i > 12 &&
                i < ss_graph_n_ops(g) - 8)
                continue;
            const ss_pconfig *c = ss_plan_config(p, i);
            printf("  %-22s stage %2d deg", op->name, c->stage);
            for (int k = 0; k < c->ndim; k++)
                printf(" %d", c->deg[k]);
            printf(" red %d rep %d devices %d..\n", c->red, c->rep, c->devices[0]);
        }
        rc = simulate(g, m, cm, p, "level2") == 1 ? 0 : 1;
        ss_diag_init(&d);
        if (save && ss_plan_save(p, g, save, &d))
            fprintf(stderr, "bench_level2: %s\n", d.msg);
    }
    if (base) {
        ss_plan *b = NULL;
        ss_diag_init(&d);
        if (ss_plan_from_spec(base, g, m, &b, &d))
            fprintf(stderr, "baseline: %s\n", d.msg);
        else
            simulate(g, m, cm, b, "baseline");
        ss_plan_free(b);
    }
    ss_plan_free(p);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
    return rc;
}
