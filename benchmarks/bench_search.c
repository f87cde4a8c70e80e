/*
 * bench_search.c — search benchmarks (benchmarks/RESULTS.md, "Search").
 *
 *   bench_search delta MODEL TOPOLOGY [N]
 *       per evaluation: N random one-op proposals from the data-parallel
 *       plan (MCMC-like: about one in five committed), each evaluated three
 *       ways: "cold" = from-scratch full simulation (ss_sim_run with the
 *       builder's memoization off: build + engine + memory sweep), "full" =
 *       ss_sim_run with the memoizing builder (the search's full evaluator),
 *       and "delta" = ss_delta_run; prints tasks per graph, the median
 *       microseconds of each, the ratios cold/delta and full/delta, the share
 *       of tasks the delta runs re-simulated, and checks all three agree on
 *       every proposal.
 *   bench_search search MODEL TOPOLOGY SECONDS SEED [EXPLORE_SHARE [RESTART_AFTER [RANDOM_STARTS]]]
 *       one search with a time limit (budget unlimited; the optional
 *       arguments override the search defaults, 0 = default); prints one line:
 *       model topology dp_ms expert_ms best_ms speedup_dp speedup_expert
 *       proposals simulations evals_per_s best_found_at_s
 *   bench_search trace MODEL TOPOLOGY SECONDS SEED [EXPLORE_SHARE [RESTART_AFTER [RANDOM_STARTS]]]
 *       the best-so-far curve of one search: "t best_ms" lines on stdout (to
 *       measure the time to come within 1% of a longer search's best), and
 *       "proposals simulations dp_ms expert_ms" on stderr.
 */
#include "simsearch.h"
#include "search/space.h"
#include "simulator/build.h"
#include "simulator/delta.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int setup(const char *model, const char *topo, ss_machine **m, ss_graph **g,
                 ss_costmodel **cm)
{
    ss_diag d;
    ss_diag_init(&d);
    if (ss_machine_load(topo, m, &d) || ss_model_build(model, 0, ss_machine_n_devices(*m), g, &d)) {
        fprintf(stderr, "bench_search: %s\n", d.msg);
        return 1;
    }
    *cm = ss_cost_new(*m);
    return *cm == NULL;
}

static int bench_delta(const char *model, const char *topo, int n)
{
    ss_machine *m;
    ss_graph *g;
    ss_costmodel *cm;
    if (setup(model, topo, &m, &g, &cm))
        return 1;
    ss_diag d;
    ss_diag_init(&d);
    int N = ss_machine_n_devices(m);
    ss_sim *sim, *cold;
    ss_delta *dl;
    ss_space *sp;
    ss_space_opts so = {N, 0};
    ss_plan *p;
    if (ss_sim_new(g, m, cm, NULL, &sim, &d) || ss_sim_new(g, m, cm, NULL, &cold, &d) ||
        ss_delta_new(g, m, cm, &dl, &d) ||
        ss_space_new(g, &so, &sp, &d) || ss_plan_data_parallel(g, m, 0, &p, &d)) {
        fprintf(stderr, "bench_search: %s\n", d.msg);
        return 1;
    }
    ss_build_set_memo(ss_sim_builder(cold), 0);
    ss_sim_result r, rc;
    memset(&r, 0, sizeof r);
    memset(&rc, 0, sizeof rc);
    ss_delta_eval e;
    if (ss_delta_run(dl, p, -1, &e, &d))
        return 1;
    ss_delta_commit(dl);
    double *tf = calloc((size_t)n, sizeof *tf), *td = calloc((size_t)n, sizeof *td);
    double *tc = calloc((size_t)n, sizeof *tc);
    int *buf = malloc((size_t)N * sizeof *buf), *obuf = malloc((size_t)N * 64 * sizeof *obuf);
    ss_rng rng;
    ss_rng_seed(&rng, 42);
    long tasks = 0, mism = 0, ok = 0;
    for (int i = 0; i < n; i++) {
        int op = (int)ss_rng_below(&rng, ss_graph_n_ops(g));
        ss_pconfig c, old = *ss_plan_config(p, op);
        memcpy(obuf, old.devices, (size_t)old.ntiles * sizeof *obuf);
        old.devices = obuf;
        c.devices = buf;
        ss_space_random(sp, op, &rng, &c);
        c.stage = old.stage;
        ss_plan_set_config(p, op, &c, &d);
        double t0 = now_s();
        ss_status s1 = ss_delta_run(dl, p, op, &e, &d);
        double t1 = now_s();
        ss_status s2 = ss_sim_run(sim, p, &r, &d);
        double t2 = now_s();
        ss_status s3 = ss_sim_run(cold, p, &rc, &d);
        double t3 = now_s();
        td[i] = t1 - t0;
        tf[i] = t2 - t1;
        tc[i] = t3 - t2;
        if (s1 != s2 || s1 != s3 ||
            (s1 == SS_OK && (r.iteration_us != e.iteration_us || rc.iteration_us != e.iteration_us)))
            mism++;
        if (s1 == SS_OK) {
            ok++;
            tasks += e.n_tasks;
        }
        if (s1 == SS_OK && ss_rng_below(&rng, 5) == 0)
            ss_delta_commit(dl);
        else
            ss_plan_set_config(p, op, &old, &d);
    }
    const ss_delta_stats *st = ss_delta_stats_of(dl);
    qsort(tf, (size_t)n, sizeof *tf, cmp_d);
    qsort(td, (size_t)n, sizeof *td, cmp_d);
    qsort(tc, (size_t)n, sizeof *tc, cmp_d);
    printf("%-14s %-10s tasks %7ld  cold %8.0f us  full %8.0f us  delta %8.0f us  "
           "cold/delta %5.2fx  full/delta %5.2fx  cold/full %5.2fx  re-simulated %5.1f%%  "
           "mismatches %ld\n",
           model, ss_machine_name(m), ok ? tasks / ok : 0, 1e6 * tc[n / 2], 1e6 * tf[n / 2],
           1e6 * td[n / 2], tc[n / 2] / td[n / 2], tf[n / 2] / td[n / 2], tc[n / 2] / tf[n / 2],
           100.0 * (double)st->tasks_resimulated / (double)st->tasks_total, mism);
    free(tc);
    free(tf);
    free(td);
    free(buf);
    free(obuf);
    ss_sim_result_clear(&r);
    ss_sim_result_clear(&rc);
    ss_plan_free(p);
    ss_space_free(sp);
    ss_delta_free(dl);
    ss_sim_free(sim);
    ss_sim_free(cold);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
    return mism != 0;
}

typedef struct curve {
    FILE *f;
    double last;
} curve;

static void on_progress(void *ctx, const ss_search_progress *p)
{
    curve *c = ctx;
    if (c->f && p->best_us != c->last) {
        fprintf(c->f, "%.3f %.4f\n", p->elapsed_s, p->best_us / 1000);
        c->last = p->best_us;
    }
}

static int bench_run(const char *model, const char *topo, double secs, uint64_t seed, int trace,
                     double explore, int64_t restart, int random_starts)
{
    ss_machine *m;
    ss_graph *g;
    ss_costmodel *cm;
    if (setup(model, topo, &m, &g, &cm))
        return 1;
    ss_search_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.budget = (int64_t)1 << 40;
    cfg.time_limit_s = secs;
    cfg.seed = seed;
    cfg.explore_share = explore;
    cfg.restart_after = restart;
    cfg.random_starts = random_starts;
    curve cv = {trace ? stdout : NULL, -1};
    cfg.progress = on_progress;
    cfg.cb_ctx = &cv;
    ss_search_result r;
    memset(&r, 0, sizeof r);
    ss_diag d;
    ss_diag_init(&d);
    if (ss_search_run(g, m, cm, &cfg, &r, &d)) {
        fprintf(stderr, "bench_search: %s\n", d.msg);
        return 1;
    }
    if (trace) {
        printf("%.3f %.4f\n", r.time_s, r.best_sim.iteration_us / 1000);
        fprintf(stderr, "%lld %lld %.4f %.4f\n", (long long)r.proposals,
                (long long)r.evaluations, r.dp_sim.iteration_us / 1000,
                r.expert_sim.iteration_us / 1000);
    }
    else
        printf("%s %s %.3f %.3f %.3f %.3f %.3f %lld %lld %.0f %.2f\n", model, ss_machine_name(m),
               r.dp_sim.iteration_us / 1000, r.expert_sim.iteration_us / 1000,
               r.best_sim.iteration_us / 1000, r.speedup_vs_dp, r.speedup_vs_expert,
               (long long)r.proposals, (long long)r.evaluations, r.evals_per_s,
               r.best_found_at_s);
    ss_search_result_clear(&r);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "delta"))
        return bench_delta(argv[2], argv[3], argc > 4 ? atoi(argv[4]) : 100);
    if (argc >= 6 && (!strcmp(argv[1], "search") || !strcmp(argv[1], "trace")))
        return bench_run(argv[2], argv[3], atof(argv[4]), (uint64_t)atoll(argv[5]),
                         !strcmp(argv[1], "trace"), argc > 6 ? atof(argv[6]) : 0,
                         argc > 7 ? atoll(argv[7]) : 0, argc > 8 ? atoi(argv[8]) : 0);
    fprintf(stderr, "usage: bench_search delta MODEL TOPOLOGY [N]\n"
                    "       bench_search search|trace MODEL TOPOLOGY SECONDS SEED "
                    "[EXPLORE_SHARE [RESTART_AFTER [RANDOM_STARTS]]]\n");
    return 2;
}
