/*
 * bench_search_llm.c — search evaluations per second on LLM plans (issue
 * 27's acceptance; benchmarks/RESULTS.md, "Scale"): the existing MCMC
 * (search/mcmc.c, its default moves) run on a GPT model and a DGX
 * topology, its proposals judged by the simulator as the search's judge
 * does (AUTO evaluator), either afresh (`run`: ss_sim_run_within, every
 * proposal analysed and judged from scratch: the judge before issue 27's
 * delta) or after a change (`rerun`: ss_sim_rerun_within from the
 * committed base, ss_sim_commit on every accepted move).
 *
 *   bench_search_llm MODEL BATCH TOPOLOGY NODES START SECONDS SEED run|rerun [EVALUATOR]
 *
 * EVALUATOR (default auto) as --evaluator takes it; a forced evaluator
 * that refuses a proposal makes it a plan that cannot run (rejected).
 * START is a plan spec (the chain's start, e.g. a Megatron plan). Prints
 * one line: mode, proposals, evaluations, evaluations per second (wall and
 * CPU), the best iteration time (ms), cut / cached moves and the
 * evaluators that judged (hierarchical / symmetry / full counts).
 * Single-threaded; no lower bound (every move that the cache does not
 * decide is judged), so evaluations per second measures the judge.
 */
#include "bench_common.h"
#include "search/mcmc.h"
#include "search/space.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct judge {
    ss_sim *sim;
    ss_sim_result r;
    int rerun;
    int64_t by[3]; /* judged by hierarchical, symmetry, full */
} judge;

static ss_status eval_fn(void *ctx, const ss_plan *p, int changed, double cutoff_us,
                         ss_eval *out, ss_diag *d)
{
    judge *j = ctx;
    double load;
    ss_status st = j->rerun ? ss_sim_rerun_within(j->sim, p, changed, cutoff_us, &j->r, &load, d)
                            : ss_sim_run_within(j->sim, p, cutoff_us, &j->r, &load, d);
    if (st)
        return st;
    if (load > cutoff_us) {
        out->time_us = load;
        out->beyond = 1;
        return SS_OK;
    }
    j->by[!strcmp(j->r.evaluator, "hierarchical") ? 0 : !strcmp(j->r.evaluator, "symmetry") ? 1
                                                                                           : 2]++;
    out->beyond = 0;
    out->time_us = j->r.iteration_us;
    out->fits = j->r.fits;
    out->overflow_bytes = j->r.overflow_bytes;
    return SS_OK;
}

static void commit_fn(void *ctx)
{
    judge *j = ctx;
    if (j->rerun)
        ss_sim_commit(j->sim);
}

int main(int argc, char **argv)
{
    ss_sim_config sc = {.evaluator = SS_EVAL_AUTO};
    if ((argc != 9 && argc != 10) || (strcmp(argv[8], "run") && strcmp(argv[8], "rerun")) ||
        (argc == 10 && ss_evaluator_parse(argv[9], &sc.evaluator))) {
        fprintf(stderr, "usage: bench_search_llm MODEL BATCH TOPOLOGY NODES START SECONDS SEED "
                        "run|rerun [EVALUATOR]\n");
        return 2;
    }
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    ss_plan *start = NULL, *best = NULL;
    ss_space *sp = NULL;
    ss_costmodel *cm = NULL;
    judge j;
    memset(&j, 0, sizeof j);
    j.rerun = !strcmp(argv[8], "rerun");
    int nodes = atoi(argv[4]), rc = 1;
    if (ss_machine_load_nodes(argv[3], nodes, &m, &d) ||
        ss_model_build(argv[1], atoll(argv[2]), ss_machine_n_devices(m), &g, &d) ||
        !(cm = ss_cost_new(m)) || ss_plan_from_spec(argv[5], g, m, &start, &d) ||
        !(best = ss_plan_clone(start)) ||
        ss_space_new(g, &(ss_space_opts){ss_machine_n_devices(m), 0}, &sp, &d) ||
        ss_sim_new(g, m, cm, &sc, &j.sim, &d)) {
        fprintf(stderr, "bench_search_llm: %s\n", d.msg[0] ? d.msg : "out of memory");
        goto out;
    }
    ss_search_judge ev = {&j, eval_fn, commit_fn, NULL, NULL, NULL};
    ss_mcmc_config mc;
    memset(&mc, 0, sizeof mc);
    mc.budget = (int64_t)1 << 40;
    mc.time_limit_s = atof(argv[6]);
    mc.seed = strtoull(argv[7], NULL, 10);
    mc.patience = -1;
    ss_eval be;
    ss_mcmc_stats st;
    double c0 = bench_cpu_s();
    if (ss_mcmc_run(sp, &ev, &start, 1, &mc, best, &be, &st, &d)) {
        fprintf(stderr, "bench_search_llm: %s\n", d.msg);
        goto out;
    }
    double cpu = bench_cpu_s() - c0;
    printf("%s %s proposals %lld evaluations %lld evals/s %.2f evals/cpu-s %.2f best_ms %.3f "
           "cut %lld cached %lld infeasible %lld hier %lld sym %lld full %lld\n",
           argv[8], ss_evaluator_name(sc.evaluator), (long long)st.proposals,
           (long long)st.evaluations, st.evals_per_s, cpu > 0 ? (double)st.evaluations / cpu : 0,
           be.time_us / 1000, (long long)st.cut, (long long)st.cached, (long long)st.infeasible,
           (long long)j.by[0], (long long)j.by[1], (long long)j.by[2]);
    rc = 0;
out:
    ss_sim_result_clear(&j.r);
    ss_sim_free(j.sim);
    ss_space_free(sp);
    ss_plan_free(start);
    ss_plan_free(best);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
    return rc;
}
