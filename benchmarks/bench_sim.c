/*
 * bench_sim.c — simulation speed (benchmarks/RESULTS.md, "Simulator speed").
 *
 * What the search sees: one ss_sim reused for many ss_sim_run calls on the
 * same plan (task-graph build from the plan, event simulation, liveness
 * sweep), with the full evaluator (the symmetric and hierarchical ones are
 * measured by bench_scale.sh, RESULTS.md "Scale"). Per case: one warm-up run, then runs until both MIN_REPS runs and
 * MIN_SECONDS have passed (at most MAX_REPS); reports the median wall and CPU
 * time per run, tasks per run, tasks per CPU second, and the peak resident
 * memory of the process that ran the case. Every case runs in its own forked
 * child, so the peak RSS (getrusage ru_maxrss) is that case's alone and a
 * case that runs out of memory does not end the benchmark. Single-threaded.
 *
 * Cases: the six FlexFlow models on topologies/p100x16.json with the data-
 * parallel plan, and Megatron GPT configurations (Narayanan et al. 2021,
 * table 1: 1.7B..18.4B, seq 2048) on dgx-a100 with 4..32 nodes.
 *
 * Usage: bench_sim [--quick] [--markdown FILE] [--only SUBSTRING]
 *   --quick: the FlexFlow models and the two smallest GPT cases only.
 * Invariant: a case's numbers other than times depend only on its inputs.
 */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIN_REPS 3
#define MAX_REPS 25
#define MIN_SECONDS 1.0

typedef struct scase {
    const char *label;
    const char *model;    /* zoo spec */
    const char *topology;
    int nodes;            /* 0: as in the file */
    long batch;           /* 0: model default */
    const char *plan;     /* plan spec */
    int quick;            /* part of --quick */
} scase;

static const scase cases[] = {
    {"alexnet", "alexnet", "topologies/p100x16.json", 0, 0, "data-parallel", 1},
    {"inception_v3", "inception_v3", "topologies/p100x16.json", 0, 0, "data-parallel", 1},
    {"resnet101", "resnet101", "topologies/p100x16.json", 0, 0, "data-parallel", 1},
    {"rnntc", "rnntc", "topologies/p100x16.json", 0, 0, "data-parallel", 1},
    {"rnnlm", "rnnlm", "topologies/p100x16.json", 0, 0, "data-parallel", 1},
    {"nmt", "nmt", "topologies/p100x16.json", 0, 0, "data-parallel", 1},
    {"gpt 1.7B (32 GPUs)", "gpt:layers=24,hidden=2304,heads=24,seq=2048,vocab=51200",
     "topologies/dgx-a100.json", 4, 512, "megatron:tp=1,pp=1,dp=32,mb=4,recompute=full", 1},
    {"gpt 3.6B (64 GPUs)", "gpt:layers=30,hidden=3072,heads=32,seq=2048,vocab=51200",
     "topologies/dgx-a100.json", 8, 512, "megatron:tp=2,pp=1,dp=32,mb=4,recompute=full", 1},
    {"gpt 7.5B (128 GPUs)", "gpt:layers=36,hidden=4096,heads=32,seq=2048,vocab=51200",
     "topologies/dgx-a100.json", 16, 512, "megatron:tp=4,pp=1,dp=32,mb=4,recompute=full", 0},
    {"gpt 18.4B (256 GPUs)", "gpt:layers=40,hidden=6144,heads=48,seq=2048,vocab=51200",
     "topologies/dgx-a100.json", 32, 1024, "megatron:tp=8,pp=1,dp=32,mb=8,recompute=full", 0},
    {"gpt 18.4B pp=4 (256 GPUs)", "gpt:layers=40,hidden=6144,heads=48,seq=2048,vocab=51200",
     "topologies/dgx-a100.json", 32, 1024, "megatron:tp=8,pp=4,dp=8,mb=16,recompute=full", 0},
};

#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

typedef struct measure {
    long long tasks;
    double wall_ms, cpu_ms;  /* medians per run */
    double iteration_ms;     /* simulated iteration time (sanity) */
    double setup_s;          /* model, machine, plan, first run */
    double rss_mib;
    int reps;
} measure;

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Run one case in this process; 0 on success, with d set on failure. */
static int run_case(const scase *c, measure *out, ss_diag *d)
{
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    ss_plan *p = NULL;
    ss_costmodel *cm = NULL;
    ss_sim *s = NULL;
    ss_sim_result r;
    memset(&r, 0, sizeof r);
    int rc = -1;
    double t0 = bench_clock_s(CLOCK_MONOTONIC);
    if (ss_machine_load_nodes(c->topology, c->nodes, &m, d) ||
        ss_model_build(c->model, c->batch, ss_machine_n_devices(m), &g, d) ||
        ss_plan_from_spec(c->plan, g, m, &p, d))
        goto out;
    cm = ss_cost_new(m);
    if (!cm) {
        ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
        goto out;
    }
    ss_sim_config cfg = {0};
    cfg.evaluator = SS_EVAL_FULL; /* the engine's throughput; the evaluators: bench_scale.sh */
    if (ss_sim_new(g, m, cm, &cfg, &s, d) || ss_sim_run(s, p, &r, d)) /* warm-up */
        goto out;
    out->setup_s = bench_clock_s(CLOCK_MONOTONIC) - t0;
    double wall[MAX_REPS], cpu[MAX_REPS], start = bench_clock_s(CLOCK_MONOTONIC);
    int n = 0;
    while (n < MAX_REPS && (n < MIN_REPS || bench_clock_s(CLOCK_MONOTONIC) - start < MIN_SECONDS)) {
        double w0 = bench_clock_s(CLOCK_MONOTONIC), c0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
        if (ss_sim_run(s, p, &r, d))
            goto out;
        cpu[n] = (bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) * 1e3;
        wall[n] = (bench_clock_s(CLOCK_MONOTONIC) - w0) * 1e3;
        n++;
    }
    out->reps = n;
    out->tasks = (long long)ss_sim_n_tasks(s);
    out->wall_ms = median(wall, n);
    out->cpu_ms = median(cpu, n);
    out->iteration_ms = r.iteration_us / 1e3;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    out->rss_mib = (double)ru.ru_maxrss / 1024.0; /* Linux: KiB */
    rc = 0;
out:
    ss_sim_result_clear(&r);
    ss_sim_free(s);
    ss_cost_free(cm);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_machine_free(m);
    return rc;
}

/* Fork, run the case in the child, read its measure (or error text) back
 * through a pipe. Returns 0 when the child measured the case. */
static int run_forked(const scase *c, measure *out, char *err, size_t errcap)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(fd[0]);
        measure m;
        memset(&m, 0, sizeof m);
        ss_diag d;
        ss_diag_init(&d);
        int ok = run_case(c, &m, &d) == 0;
        char tag = ok ? 'M' : 'E';
        ssize_t w = write(fd[1], &tag, 1);
        if (ok)
            w = write(fd[1], &m, sizeof m);
        else
            w = write(fd[1], d.msg, strlen(d.msg) + 1);
        (void)w;
        close(fd[1]);
        _exit(ok ? 0 : 1);
    }
    close(fd[1]);
    char tag = 0;
    int rc = -1;
    if (read(fd[0], &tag, 1) == 1) {
        if (tag == 'M' && read(fd[0], out, sizeof *out) == (ssize_t)sizeof *out) {
            rc = 0;
        } else if (tag == 'E') {
            ssize_t k = read(fd[0], err, errcap - 1);
            err[k > 0 ? k : 0] = 0;
        }
    } else {
        snprintf(err, errcap, "the case's process died (out of memory?)");
    }
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    return rc;
}

int main(int argc, char **argv)
{
    int quick = 0;
    const char *md = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--markdown") && i + 1 < argc)
            md = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: bench_sim [--quick] [--markdown FILE] [--only SUBSTRING]\n");
            return 2;
        }
    }
    FILE *f = md ? fopen(md, "w") : stdout;
    if (!f) {
        fprintf(stderr, "bench_sim: cannot write %s\n", md);
        return 1;
    }
    fprintf(f, "| case | topology | plan | tasks | median ms / run (wall) | median ms / run (CPU) "
               "| M tasks / CPU s | runs | setup s | peak RSS MiB | simulated iteration ms |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|\n");
    int failures = 0;
    long long tot_tasks = 0;
    double tot_cpu = 0;
    for (int i = 0; i < N_CASES; i++) {
        const scase *c = &cases[i];
        if ((quick && !c->quick) || (only && !strstr(c->label, only)))
            continue;
        measure m;
        memset(&m, 0, sizeof m);
        char err[SS_DIAG_MSG_MAX] = "";
        char topo[128];
        const char *base = strrchr(c->topology, '/');
        snprintf(topo, sizeof topo, "%s", base ? base + 1 : c->topology);
        if (c->nodes > 0)
            snprintf(topo + strlen(topo), sizeof topo - strlen(topo), " x%d nodes", c->nodes);
        if (run_forked(c, &m, err, sizeof err)) {
            fprintf(f, "| %s | %s | %s | failed: %s | | | | | | | |\n", c->label, topo, c->plan,
                    err);
            failures++;
            continue;
        }
        tot_tasks += m.tasks;
        tot_cpu += m.cpu_ms;
        fprintf(f, "| %s | %s | %s | %lld | %.3f | %.3f | %.2f | %d | %.2f | %.0f | %.1f |\n",
                c->label, topo, c->plan, m.tasks, m.wall_ms, m.cpu_ms,
                m.cpu_ms > 0 ? (double)m.tasks / m.cpu_ms / 1e3 : 0, m.reps, m.setup_s, m.rss_mib,
                m.iteration_ms);
        fflush(f);
    }
    if (tot_cpu > 0)
        fprintf(f, "\nAll cases together: %.2f M tasks per CPU second.\n",
                (double)tot_tasks / tot_cpu / 1e3);
    if (md)
        fclose(f);
    return failures ? 1 : 0;
}
