/*
 * cmd_run.c — `simsearch run`: train a model under a plan on MPI ranks with
 * the CPU backend or the CUDA backend (runtime/exec.h: device-resident
 * tensors, NCCL, a stream per channel), check the loss and weights against a
 * one-process run of the same model, and compare the measured iteration time
 * with the simulator's prediction. The plain simsearch binary does not link
 * MPI: it re-executes itself as the simsearch-run helper (this same CLI built
 * with SS_RUN_MPI and Open MPI, CMakeLists.txt), next to it, under the same
 * mpirun environment; without the helper it says MPI was not found.
 */
#include "cli.h"
#include "runtime/exec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef SS_RUN_MPI
#include "kernels/kernels.h"
#include "runtime/mpi/comm_mpi.h"

/* The node-local rank and rank count mpirun gives (Open MPI's variables), or
 * -1 when not under Open MPI. */
static int local_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : -1;
}

/* Before any rank starts work: every rank checks its backend (CUDA: a build
 * with it, a GPU, one GPU per node-local rank) and the ranks agree, so that
 * a refusal on one rank makes every rank exit with status 2, naming the
 * rank. Sets *device to the node-local rank's GPU (-1: rank mod GPUs). */
static int check_backend(int cuda, const ss_rt_comm *c, int *device)
{
    ss_diag d;
    ss_diag_init(&d);
    int lr = local_env("OMPI_COMM_WORLD_LOCAL_RANK"), ls = local_env("OMPI_COMM_WORLD_LOCAL_SIZE");
    *device = -1;
    if (ss_rt_backend_check(cuda, c->rank, &d) == SS_OK && cuda && lr >= 0 && ls > 0) {
        int n = ss_kernel_device_count(SS_BACKEND_CUDA);
        if (ls > n)
            ss_diag_set(&d, SS_ERR_UNSUPPORTED,
                        "runtime: --backend cuda: rank %d: %d ranks on this node but %d GPU(s); "
                        "NCCL needs a GPU per rank",
                        c->rank, ls, n);
        *device = lr;
    }
    double bad[1] = {d.status != SS_OK};
    ss_diag d2;
    ss_diag_init(&d2);
    if (c->allreduce_f64(c->ctx, bad, 1, 1, &d2) != SS_OK) {
        fprintf(stderr, "simsearch: rank %d: %s\n", c->rank, d2.msg);
        return SS_EXIT_FAIL;
    }
    if (d.status != SS_OK)
        fprintf(stderr, "simsearch: rank %d: %s\n", c->rank, d.msg);
    else if (bad[0] > 0)
        fprintf(stderr, "simsearch: rank %d: stopped: --backend %s was refused on another "
                        "rank\n", c->rank, cuda ? "cuda" : "cpu");
    return bad[0] > 0 ? SS_EXIT_USAGE : SS_EXIT_OK;
}

/* Write the ranks' trace events into one Chrome Trace array at path, rank
 * after rank (each appends between barriers). Returns an exit code. */
static int write_trace(const char *path, const ss_rt_state *s, const ss_rt_comm *c)
{
    ss_diag d;
    ss_diag_init(&d);
    char *ev = NULL;
    int rc = ss_rt_trace_events(s, &ev, &d) == SS_OK ? SS_EXIT_OK : SS_EXIT_FAIL;
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank && rc == SS_EXIT_OK) {
            FILE *f = fopen(path, r ? "a" : "w");
            if (!f) {
                fprintf(stderr, "simsearch: rank %d: cannot write %s\n", r, path);
                rc = SS_EXIT_FAIL;
            } else {
                fprintf(f, "%s%s%s", r ? (*ev ? ",\n" : "") : "[\n", ev,
                        r == c->size - 1 ? "\n]\n" : "");
                if (fclose(f))
                    rc = SS_EXIT_FAIL;
            }
        }
        if (c->barrier(c->ctx, &d) != SS_OK)
            rc = SS_EXIT_FAIL;
    }
    ss_free(ev);
    return rc;
}
#endif

typedef struct opts {
    ss_cli_common c;
    const char *db, *backend, *optimizer, *trace;
    long long iterations, warmup, seed;
    double lr, tolerance;
} opts;

static const ss_cli_optdef options[] = {
    SS_CLI_ROW_MODEL(opts),
    SS_CLI_ROW_TOPOLOGY(opts),
    SS_CLI_ROW_PLAN(opts, 1),
    SS_CLI_ROW_BATCH(opts),
    SS_CLI_INT_ROW(opts, "--iterations", "N", iterations, 1, 100000,
                   "measured iterations (default 10; the median is reported)"),
    SS_CLI_INT_ROW(opts, "--warmup", "N", warmup, 0, 100000,
                   "iterations before the measured ones (default 2)"),
    SS_CLI_REAL_ROW(opts, "--lr", "X", lr, 1e-12, 1e6,
                    "learning rate (default 0.05 for sgd, 0.001 for adam)"),
    SS_CLI_STR_ROW(opts, "--optimizer", "O", optimizer, 0,
                   "sgd (default) or adam (beta 0.9 / 0.999, eps 1e-8)"),
    SS_CLI_INT_ROW(opts, "--seed", "N", seed, 0, 1LL << 62,
                   "seed of the synthetic inputs and initial weights (default 1)"),
    SS_CLI_REAL_ROW(opts, "--tolerance", "X", tolerance, 0, 1,
                    "largest relative difference from the one-process run\n"
                    "(loss, and each weight relative to its largest magnitude;\n"
                    "default 1e-4)"),
    SS_CLI_STR_ROW(opts, "--db", "FILE", db, 0,
                   "profile database for the prediction (as simulate --db)"),
    SS_CLI_STR_ROW(opts, "--backend", "B", backend, 0,
                   "cpu (default) or cuda: tensors resident on a GPU per rank\n"
                   "(the node-local rank's), CUDA kernels, NCCL collectives and\n"
                   "sends on a stream per channel; refused before any work when\n"
                   "a rank has no GPU or the build has no CUDA backend (NCCL)"),
    SS_CLI_STR_ROW(opts, "--trace", "FILE", trace, 0,
                   "write the last iteration's kernels and collectives, every\n"
                   "rank (process = rank), as Chrome Trace JSON (Perfetto)"),
    SS_CLI_ROW_JSON(opts, "print the result as one JSON object (rank 0)"),
    {NULL, SS_CLI_FLAG, NULL, 0, 0, 0, 0, 0, 0, NULL},
};

const ss_cli_cmddef ss_cli_def_run = {
    "run",
    "execute a plan on MPI ranks, check numerics, measure vs prediction",
    "Train the model under the plan (CPU or CUDA backend), one MPI rank per device\n"
    "(mpirun --allow-run-as-root --oversubscribe -np N simsearch run ...), with\n"
    "synthetic data from a fixed seed and SGD or Adam; then compare the loss and\n"
    "weights with a one-process run of the same model and the measured iteration\n"
    "time (median, max over ranks) with the simulator's prediction.",
    options,
    NULL,
    0,
    "Exit status: 0 ok, 2 bad usage or input, 1 other failures or numerics outside\n"
    "the tolerance.",
};

#ifndef SS_RUN_MPI
int ss_cmd_run(int argc, char **argv)
{
    opts o = {{0}, NULL, "cpu", "sgd", NULL, 10, 2, 1, 0.05, 1e-4};
    int r = ss_cli_parse_def(&ss_cli_def_run, argc, argv, &o);
    if (r)
        return r < 0 ? SS_EXIT_OK : r;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 32);
    if (n <= 0)
        return fprintf(stderr, "simsearch: run: cannot find this executable\n"), SS_EXIT_FAIL;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    strcpy(slash + 1, "simsearch-run");
    if (access(self, X_OK))
        return fprintf(stderr, "simsearch: run needs the MPI helper %s, built when Open MPI is "
                               "found (scripts/setup.sh installs it)\n", self),
               SS_EXIT_FAIL;
    char **av = calloc((size_t)argc + 2, sizeof *av);
    if (!av)
        return SS_EXIT_FAIL;
    av[0] = self;
    for (int i = 0; i < argc; i++)
        av[i + 1] = argv[i];
    execv(self, av);
    fprintf(stderr, "simsearch: run: cannot start %s\n", self);
    free(av);
    return SS_EXIT_FAIL;
}
#else

/* parts: the measured compute (wall, CPU) and communication ms and the
 * predicted compute and communication ms, max over ranks. */
static void report(const opts *o, const ss_rt_result *pr, const ss_rt_result *rr, int ranks,
                   const double *parts, double loss_diff, double w_diff, const char *worst,
                   int ok)
{
    double pred = pr->predicted_ms;
    double err = fabs(pred - pr->measured_ms) / pr->measured_ms;
    double ecpu = fabs(pred - pr->measured_cpu_ms) / pr->measured_cpu_ms;
    double cerr = fabs(parts[3] - parts[0]) / parts[0];
    double md = loss_diff > w_diff ? loss_diff : w_diff;
    int n = pr->n_iter;
    if (o->c.json) {
        printf("{\"model\": \"%s\", \"plan\": \"%s\", \"ranks\": %d, \"backend\": \"%s\", "
               "\"optimizer\": \"%s\", "
               "\"iterations\": %lld, \"warmup\": %lld, \"measured_ms\": %.4f, "
               "\"predicted_ms\": %.4f, \"error\": %.4f, \"measured_cpu_ms\": %.4f, "
               "\"error_cpu\": %.4f, \"reference_ms\": %.4f, "
               "\"reference_predicted_ms\": %.4f, "
               "\"loss_first\": %.8g, \"loss_last\": %.8g, \"tasks_per_iteration\": %d, "
               "\"collectives_per_iteration\": %lld, \"transfers_per_iteration\": %lld, "
               "\"comm_bytes_per_iteration\": %.0f, \"copy_bytes_per_iteration\": %.0f, "
               "\"param_peak_bytes\": %lld, "
               "\"numerics\": {\"max_rel_diff\": %.3g, "
               "\"loss_rel_diff\": %.3g, \"weight_rel_diff\": %.3g, \"worst_weight\": \"%s\", "
               "\"tolerance\": %.3g, \"ok\": %s}, \"compute\": {\"measured_ms\": %.4f, "
               "\"measured_cpu_ms\": %.4f, \"predicted_ms\": %.4f, \"error\": %.4f}, "
               "\"communication\": {\"measured_ms\": %.4f, \"predicted_ms\": %.4f}, "
               "\"classes\": [",
               o->c.model, o->c.plan, ranks, o->backend, o->optimizer, o->iterations, o->warmup,
               pr->measured_ms, pred, err, pr->measured_cpu_ms, ecpu, rr->measured_ms,
               rr->predicted_ms, pr->loss[0],
               pr->loss[n - 1], pr->my_tasks, (long long)pr->collectives,
               (long long)pr->transfers, pr->comm_bytes, pr->copy_bytes,
               (long long)pr->param_peak_bytes, md,
               loss_diff, w_diff,
               worst ? worst : "", o->tolerance, ok ? "true" : "false", parts[0], parts[1],
               parts[3], cerr, parts[2], parts[4]);
        for (int c = 0, k = 0; c < SS_RT_CLASSES; c++) {
            if (!pr->cls_tasks[c])
                continue;
            char name[96];
            ss_rt_class_name(c, name, sizeof name);
            printf("%s{\"class\": \"%s\", \"tasks\": %d, \"measured_ms\": %.4f, "
                   "\"measured_cpu_ms\": %.4f, \"predicted_ms\": %.4f}",
                   k++ ? ", " : "", name, pr->cls_tasks[c], pr->cls_ms[c], pr->cls_cpu_ms[c],
                   pr->cls_pred_ms[c]);
        }
        printf("]}\n");
        return;
    }
    printf("run: %s under %s on %d ranks (%s, %s), %lld iterations after %lld warm-up\n",
           o->c.model, o->c.plan, ranks, o->backend, o->optimizer, o->iterations, o->warmup);
    printf("loss: %.6g -> %.6g\n", pr->loss[0], pr->loss[n - 1]);
    printf("iteration: measured %.3f ms (median, max over ranks), predicted %.3f ms (the "
           "simulated task graph that ran), error %.1f%%; one process %.3f ms (predicted "
           "%.3f ms)\n",
           pr->measured_ms, pred, 100 * err, rr->measured_ms, rr->predicted_ms);
    printf("iteration CPU time: %.3f ms (median, max over ranks; MPI waits spin), error "
           "%.1f%% against the prediction\n",
           pr->measured_cpu_ms, 100 * ecpu);
    printf("compute: measured %.3f ms (CPU time %.3f ms), predicted %.3f ms, error %.1f%% "
           "(busiest rank / device)\n",
           parts[0], parts[1], parts[3], 100 * cerr);
    printf("communication: %lld collectives, %lld transfers, %.0f bytes per iteration on rank "
           "0; measured %.3f ms, predicted %.3f ms (busiest)\n",
           (long long)pr->collectives, (long long)pr->transfers, pr->comm_bytes, parts[2],
           parts[4]);
    printf("copies around kernels: %.0f bytes per iteration on rank 0 (regions not contiguous "
           "in their tensors; not priced)\n",
           pr->copy_bytes);
    printf("per task class, rank 0, last iteration (tasks: measured wall / CPU ms, predicted "
           "ms):\n");
    for (int c = 0; c < SS_RT_CLASSES; c++) {
        if (!pr->cls_tasks[c])
            continue;
        char name[96];
        ss_rt_class_name(c, name, sizeof name);
        printf("  %-24s %4d: %9.3f / %9.3f, %9.3f\n", name, pr->cls_tasks[c], pr->cls_ms[c],
               pr->cls_cpu_ms[c], pr->cls_pred_ms[c]);
    }
    printf("numerics vs one process: max rel diff %.3g (loss %.3g, weights %.3g, worst %s), "
           "tolerance %.3g: %s\n",
           md, loss_diff, w_diff, worst ? worst : "-", o->tolerance, ok ? "ok" : "FAILED");
}

int ss_cmd_run(int argc, char **argv)
{
    opts o = {{0}, NULL, "cpu", "sgd", NULL, 10, 2, 1, 0.05, 1e-4};
    int rc = ss_cli_parse_def(&ss_cli_def_run, argc, argv, &o);
    if (rc)
        return rc < 0 ? SS_EXIT_OK : rc;
    if (strcmp(o.optimizer, "sgd") && strcmp(o.optimizer, "adam"))
        return ss_cli_usage_error("run", "--optimizer must be sgd or adam");
    if (!ss_cli_given(&ss_cli_def_run, "--lr") && !strcmp(o.optimizer, "adam"))
        o.lr = 1e-3;
    if (strcmp(o.backend, "cpu") && strcmp(o.backend, "cuda"))
        return ss_cli_usage_error("run", "--backend must be cpu or cuda");
    ss_diag d;
    ss_diag_init(&d);
    ss_rt_comm comm, self;
    if (ss_rt_comm_mpi_init(&comm, &d) != SS_OK)
        return ss_cli_fail(&d);
    ss_rt_comm_self(&self);
    int device = -1;
    if ((rc = check_backend(!strcmp(o.backend, "cuda"), &comm, &device))) {
        ss_rt_comm_mpi_finalize();
        return rc;
    }
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    ss_plan *p = NULL, *ref = NULL;
    ss_rt_state *ps = NULL, *rs = NULL;
    ss_rt_result pr, rr;
    memset(&pr, 0, sizeof pr);
    memset(&rr, 0, sizeof rr);
    int ok = 0;
    ss_costmodel *cm = NULL;
    ss_profile_db *db = NULL;
    if ((rc = ss_cli_common_load(&o.c, &m, &g, &p)) || (rc = ss_cli_cost_model(m, o.db, &cm, &db)))
        goto done;
    ss_rt_config cfg = {(int)o.iterations, (int)o.warmup, o.lr, (uint64_t)o.seed,
                        !strcmp(o.optimizer, "adam"), o.trace != NULL,
                        !strcmp(o.backend, "cuda"), device};
    ss_rt_config cpu = cfg; /* the reference runs the CPU kernels */
    cpu.cuda = 0;
    if (!(ref = ss_plan_new(g, m))) {
        rc = SS_EXIT_FAIL;
        goto done;
    }
    if (ss_rt_train(g, m, cm, p, &cfg, &comm, &ps, &pr, &d) != SS_OK ||
        ss_rt_train(g, m, cm, ref, &cpu, &self, &rs, &rr, &d) != SS_OK) {
        fprintf(stderr, "simsearch: rank %d: %s\n", comm.rank, d.msg);
        rc = d.status == SS_ERR_INVALID || d.status == SS_ERR_UNSUPPORTED ? SS_EXIT_USAGE
                                                                          : SS_EXIT_FAIL;
        goto done;
    }
    double loss_diff = 0;
    for (int i = 0; i < pr.n_iter; i++) {
        double v = fabs(pr.loss[i] - rr.loss[i]) / fmax(fabs(rr.loss[i]), 1e-12);
        loss_diff = v > loss_diff ? v : loss_diff;
    }
    const char *worst = NULL;
    double w[6] = {ss_rt_weight_diff(ps, rs, &worst), pr.compute_ms, pr.compute_cpu_ms,
                   pr.comm_ms, pr.predicted_compute_ms, pr.predicted_comm_ms};
    if (comm.allreduce_f64(comm.ctx, w, 6, 1, &d) != SS_OK) {
        rc = ss_cli_fail(&d);
        goto done;
    }
    ok = loss_diff <= o.tolerance && w[0] <= o.tolerance;
    if (o.trace && (rc = write_trace(o.trace, ps, &comm)))
        goto done;
    if (comm.rank == 0)
        report(&o, &pr, &rr, comm.size, w + 1, loss_diff, w[0], worst, ok);
    rc = SS_EXIT_OK; /* every rank got here: a numerics failure needs no abort */
done:
    ss_rt_free(ps);
    ss_rt_free(rs);
    ss_rt_result_clear(&pr);
    ss_rt_result_clear(&rr);
    ss_plan_free(ref);
    ss_plan_free(p);
    ss_cost_free(cm);
    ss_profile_db_free(db);
    ss_graph_free(g);
    ss_machine_free(m);
    if (rc && comm.size > 1) {
        fflush(NULL);
        ss_rt_comm_mpi_abort(rc);
    }
    ss_rt_comm_mpi_finalize();
    return rc ? rc : ok ? SS_EXIT_OK : SS_EXIT_FAIL;
}
#endif
