/*
 * bench_search.c — search benchmarks (benchmarks/RESULTS.md, "Search").
 *
 *   bench_search search MODEL TOPOLOGY SECONDS SEED [EXPLORE_SHARE [RESTART_AFTER [RANDOM_STARTS [P_HEAVY [BETA [P_PATH [P_LOCAL [P_CLASS [NO_EVAL_CACHE]]]]]]]]]
 *       one search with a time limit (budget unlimited; the optional
 *       arguments override the search defaults, 0 = default; NO_EVAL_CACHE
 *       1 judges revisited plans again); prints one line:
 *       model topology dp_ms expert_ms best_ms speedup_dp speedup_expert
 *       proposals simulations evals_per_s best_found_at_s
 *   bench_search trace MODEL TOPOLOGY SECONDS SEED [same options as search]
 *       the best-so-far curve of one search: "t best_ms" lines on stdout (to
 *       measure the time to come within 1% of a longer search's best), and
 *       "proposals simulations dp_ms expert_ms" on stderr.
 */
#include "simsearch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
                     double explore, int64_t restart, int random_starts, double p_heavy,
                     double beta, double p_path, double p_local, double p_class,
                     int no_cache)
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
    cfg.p_heavy = p_heavy;
    cfg.beta = beta;
    cfg.p_path = p_path;
    cfg.p_local = p_local;
    cfg.p_class = p_class;
    cfg.no_eval_cache = no_cache;
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
    if (argc >= 6 && (!strcmp(argv[1], "search") || !strcmp(argv[1], "trace")))
        return bench_run(argv[2], argv[3], atof(argv[4]), (uint64_t)atoll(argv[5]),
                         !strcmp(argv[1], "trace"), argc > 6 ? atof(argv[6]) : 0,
                         argc > 7 ? atoll(argv[7]) : 0, argc > 8 ? atoi(argv[8]) : 0,
                         argc > 9 ? atof(argv[9]) : 0, argc > 10 ? atof(argv[10]) : 0,
                         argc > 11 ? atof(argv[11]) : 0, argc > 12 ? atof(argv[12]) : 0,
                         argc > 13 ? atof(argv[13]) : 0, argc > 14 ? atoi(argv[14]) : 0);
    fprintf(stderr, "usage: bench_search search|trace MODEL TOPOLOGY SECONDS SEED "
                    "[EXPLORE_SHARE [RESTART_AFTER [RANDOM_STARTS [P_HEAVY [BETA [P_PATH [P_LOCAL [P_CLASS]]]]]]]]\n");
    return 2;
}
