/*
 * bench_profile.c — the profiler against this machine's CPU
 * (benchmarks/RESULTS.md, "Profiler: analytic vs measured on the CPU").
 *
 * For one model on a one-device topology, with every op as one tile on
 * device 0 (a single-process iteration):
 *   1. measure every distinct tile's forward and backward with the CPU
 *      kernels (profiler/measure.c: warm-up, --reps repetitions, median)
 *      into an in-memory profile database;
 *   2. per distinct tile, print the analytic roofline's time (the
 *      topology's device type) next to the measured one;
 *   3. simulate the iteration with the database and without it;
 *   4. MEASURE the iteration: every op's forward in graph order, every op's
 *      backward in reverse order, then the optimizer update of every weight
 *      (SGD with momentum or Adam, as the model says, in plain C), all with
 *      the same kernels on the full tiles; --iters iterations after one
 *      warm-up, median;
 *   5. print the prediction errors against the measured iteration.
 * Views (inputs, reshapes, view splits/transposes) run no kernel in the
 * simulator and none here. Pin BLAS to one thread (OPENBLAS_NUM_THREADS=1)
 * to match a one-core device.
 *
 * Usage: bench_profile --model SPEC [--topology FILE] [--rounds N] [--cpu-time]
 *                      [--warm-cache] [--batch N] [--db OUT.json]
 * Without --topology the device is one core of this machine with its
 * measured peak rates (profiler/measure.c, as `topo --discover` sets them).
 * Tiles and the iteration are measured in rounds (one measurement of every
 * distinct tile, then one iteration), so both see the same load of a shared
 * machine; --cpu-time times by process CPU time instead of wall time.
 * Output: markdown tables on stdout; exit 1 when the simulation with the
 * database is more than 10% off the measured iteration.
 */
#include "simsearch.h"
#include "kernels/kernels.h"
#include "profiler/measure.h"
#include "profiler/profile_db.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


static int is_view(const ss_op *op)
{
    return op->type == SS_OP_INPUT || op->type == SS_OP_RESHAPE ||
           ((op->type == SS_OP_SPLIT || op->type == SS_OP_TRANSPOSE) && op->attrs.view);
}

static void die(const ss_diag *d)
{
    fprintf(stderr, "bench_profile: %s\n", d->msg);
    exit(2);
}

static void shape(const ss_tile *t, char *buf, size_t n)
{
    size_t u = 0;
    buf[0] = '\0';
    for (int k = 0; k < t->out.ndim && u < n; k++)
        u += (size_t)snprintf(buf + u, n - u, "%s%lld", k ? "x" : "",
                              (long long)(t->out.r[k].hi - t->out.r[k].lo));
}

/* One optimizer step over n parameters (w, g, and the state m, v). */
static void update(ss_optimizer opt, float *w, const float *g, float *m, float *v, int64_t n)
{
    const float lr = 1e-3f, mu = 0.9f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    if (opt == SS_OPT_ADAM) {
        for (int64_t i = 0; i < n; i++) {
            m[i] = b1 * m[i] + (1 - b1) * g[i];
            v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
            w[i] -= lr * m[i] / (sqrtf(v[i]) + eps);
        }
    } else if (opt == SS_OPT_SGD_MOMENTUM) {
        for (int64_t i = 0; i < n; i++) {
            m[i] = mu * m[i] + g[i];
            w[i] -= lr * m[i];
        }
    } else {
        for (int64_t i = 0; i < n; i++)
            w[i] -= lr * g[i];
    }
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *model = "mlp", *topo = NULL, *dbpath = NULL;
    int rounds = 15, cold = 1, cpu_time = 0;
    long long batch = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--topology") && i + 1 < argc)
            topo = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--warm-cache"))
            cold = 0;
        else if (!strcmp(argv[i], "--cpu-time"))
            cpu_time = 1;
        else if (!strcmp(argv[i], "--db") && i + 1 < argc)
            dbpath = argv[++i];
        else {
            fprintf(stderr, "usage: bench_profile --model SPEC [--topology FILE] [--rounds N] "
                            "[--warm-cache] [--cpu-time] [--batch N] [--db OUT.json]\n");
            return 2;
        }
    }
    if (rounds < 1) {
        fprintf(stderr, "bench_profile: --rounds must be >= 1\n");
        return 2;
    }
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    if (ss_model_build(model, batch, 1, &g, &d))
        die(&d);
    double gflops = 0, gbps = 0;
    if (topo) {
        if (ss_machine_load(topo, &m, &d))
            die(&d);
    } else {
        /* one core of this machine with its measured peak rates (as topo --discover) */
        ss_measure_cpu_rates(cpu_time, &gflops, &gbps);
        char js[512];
        snprintf(js, sizeof js,
                 "{\"format\": \"simsearch-topology\", \"version\": 1, \"name\": \"cpu-1core\","
                 " \"device_types\": [{\"name\": \"CPU-core\", \"mem_gib\": 4,"
                 " \"peak_tflops\": {\"f32\": %.6f}, \"mem_gbps\": %.3f}],"
                 " \"hosts\": [{\"name\": \"localhost\"}],"
                 " \"devices\": [{\"name\": \"core0\", \"type\": \"CPU-core\", \"host\": \"localhost\"}],"
                 " \"links\": []}", gflops / 1e3, gbps);
        if (ss_machine_load_string(js, "measured one-core topology", &m, &d))
            die(&d);
    }
    const ss_device_type *dt = ss_machine_type(m, ss_machine_device(m, 0)->type);
    ss_plan *plan = ss_plan_new(g, m);
    ss_profile_db *db = ss_profile_db_new();
    char devname[SS_PROFILE_TEXT_MAX];
    ss_measure_device_name(SS_BACKEND_CPU, 0, devname, sizeof devname);
    int n = ss_graph_n_ops(g);

    /* 1: the distinct tiles (first op of each signature) and their op counts */
    int *rep_op = calloc((size_t)n, sizeof *rep_op), *count = calloc((size_t)n, sizeof *count);
    char (*sig)[SS_PROFILE_SIG_MAX] = calloc((size_t)n, sizeof *sig);
    int nrep = 0;
    for (int i = 0; i < n; i++) {
        const ss_op *op = ss_graph_op(g, i);
        ss_tile t;
        ss_op_full_tile(g, op, &t);
        if (is_view(op) || ss_profile_signature(g, op, &t, sig[nrep], sizeof sig[0]) < 0)
            continue;
        int k = 0;
        while (k < nrep && strcmp(sig[k], sig[nrep]))
            k++;
        if (k == nrep)
            rep_op[nrep++] = i;
        count[k]++;
    }
    double *fs = calloc((size_t)(nrep * rounds), sizeof *fs);
    double *bs = calloc((size_t)(nrep * rounds), sizeof *bs);
    /* 4: the measured iteration */
    ss_kargs *args = calloc((size_t)n, sizeof *args);
    int *live = calloc((size_t)n, sizeof *live);
    for (int i = 0; i < n; i++) {
        const ss_op *op = ss_graph_op(g, i);
        if (is_view(op))
            continue;
        ss_tile t;
        ss_op_full_tile(g, op, &t);
        if (ss_kernel_setup(&args[i], SS_BACKEND_CPU, g, op, &t, &d) ||
            ss_kernel_alloc(&args[i], SS_BACKEND_CPU, 0, (uint64_t)i + 1, &d))
            die(&d);
        live[i] = 1;
    }
    int nt = ss_graph_n_tensors(g), nw = 0;
    float **w = calloc((size_t)nt, sizeof *w), **gr = calloc((size_t)nt, sizeof *gr),
          **ms1 = calloc((size_t)nt, sizeof *ms1), **ms2 = calloc((size_t)nt, sizeof *ms2);
    int64_t *wn = calloc((size_t)nt, sizeof *wn);
    for (int i = 0; i < nt; i++) {
        const ss_tensor *x = ss_graph_tensor(g, i);
        if (!x->is_weight)
            continue;
        int64_t c = 1;
        for (int k = 0; k < x->ndim; k++)
            c *= x->shape[k];
        wn[nw] = c;
        w[nw] = calloc((size_t)c, 4);
        gr[nw] = calloc((size_t)c, 4);
        ms1[nw] = calloc((size_t)c, 4);
        ms2[nw] = calloc((size_t)c, 4);
        nw++;
    }
    int iters = rounds;
    double *it_us = calloc((size_t)iters + 1, sizeof *it_us);
    double *up_us = calloc((size_t)iters + 1, sizeof *up_us), sim_up = 0;
    ss_optimizer opt = ss_graph_optimizer(g);
    ss_measure_config mc = {SS_BACKEND_CPU, 0, 1, 1, cold ? ss_measure_cache_flush_bytes() : 0,
                            cpu_time};
    for (int it = 0; it <= iters; it++) {
        /* one measurement of every distinct tile, then one iteration: both see
         * the same load of the (shared) machine */
        for (int k = 0; it > 0 && k < nrep; k++) {
            ss_tile t;
            ss_measurement ms;
            ss_op_full_tile(g, ss_graph_op(g, rep_op[k]), &t);
            if (ss_measure_tile(&mc, g, ss_graph_op(g, rep_op[k]), &t, &ms, &d))
                die(&d);
            fs[k * rounds + it - 1] = ms.fwd_us;
            bs[k * rounds + it - 1] = ms.bwd_us;
        }
        double t0 = ss_measure_now_us(cpu_time);
        for (int i = 0; i < n; i++)
            if (live[i])
                ss_kernel_forward(SS_BACKEND_CPU, &args[i], &d);
        for (int i = n - 1; i >= 0; i--)
            if (live[i])
                ss_kernel_backward(SS_BACKEND_CPU, &args[i], &d);
        double t1 = ss_measure_now_us(cpu_time);
        for (int k = 0; k < nw; k++)
            update(opt, w[k], gr[k], ms1[k], ms2[k], wn[k]);
        it_us[it] = ss_measure_now_us(cpu_time) - t0; /* it 0 is the warm-up */
        up_us[it] = ss_measure_now_us(cpu_time) - t1;
    }
    qsort(it_us + 1, (size_t)iters, sizeof *it_us, cmp_d);
    qsort(up_us + 1, (size_t)iters, sizeof *up_us, cmp_d);
    double up_med = up_us[1 + iters / 2];
    double med = iters % 2 ? it_us[1 + iters / 2]
                           : 0.5 * (it_us[iters / 2] + it_us[1 + iters / 2]);
    /* 2: the database from the medians, the per-tile table */
    printf("Model `%s` (batch %lld, %s, optimizer %s), device type %s, %s, %s caches, %s time\n\n", model,
           (long long)ss_graph_batch(g), ss_graph_precision(g) == SS_PREC_FP32 ? "fp32" : "mixed",
           ss_optimizer_name(ss_graph_optimizer(g)), dt->name, devname, cold ? "cold" : "warm",
           cpu_time ? "process CPU" : "wall");
    if (!topo)
        printf("Device type: one core with measured peak rates: f32 GEMM %.1f GFLOP/s, "
               "stream %.1f GB/s (the analytic model's peak and bandwidth)\n\n", gflops, gbps);
    printf("| op (first of its signature) | type | output | ops | analytic fwd+bwd us | "
           "measured fwd+bwd us | spread us | measured / analytic |\n");
    printf("|---|---|---|---:|---:|---:|---:|---:|\n");
    double sum_an = 0, sum_me = 0;
    for (int k = 0; k < nrep; k++) {
        const ss_op *op = ss_graph_op(g, rep_op[k]);
        ss_tile t;
        ss_op_full_tile(g, op, &t);
        ss_profile_entry e;
        memset(&e, 0, sizeof e);
        snprintf(e.signature, sizeof e.signature, "%s", sig[k]);
        snprintf(e.device_type, sizeof e.device_type, "%s", dt->name);
        e.op_type = op->type;
        e.dtype = SS_F32;
        snprintf(e.backend, sizeof e.backend, "cpu");
        snprintf(e.device, sizeof e.device, "%s", devname);
        ss_profile_now(e.date);
        e.reps = rounds;
        ss_measure_stats(fs + k * rounds, rounds, &e.fwd_us, &e.fwd_spread_us);
        ss_measure_stats(bs + k * rounds, rounds, &e.bwd_us, &e.bwd_spread_us);
        if (ss_profile_db_put(db, &e, &d))
            die(&d);
        ss_cost an;
        ss_cost_analytic(dt, g, op, &t, &an);
        char sh[64];
        shape(&t, sh, sizeof sh);
        double a = an.fwd_us + an.bwd_us, me = e.fwd_us + e.bwd_us;
        sum_an += a * count[k];
        sum_me += me * count[k];
        printf("| %s | %s | %s | %d | %.1f | %.1f | %.1f | %.2f |\n", op->name,
               ss_op_type_name(op->type), sh, count[k], a, me, e.fwd_spread_us + e.bwd_spread_us,
               a > 0 ? me / a : 0);
    }
    printf("| **all ops** | | | | %.1f | %.1f | | %.2f |\n\n", sum_an, sum_me,
           sum_an > 0 ? sum_me / sum_an : 0);
    if (dbpath && ss_profile_db_save(db, dbpath, &d))
        die(&d);

    /* 3: simulate with and without the database */
    ss_costmodel *cm_an = ss_cost_new(m), *cm_db = ss_cost_new(m);
    ss_cost_provider pv = ss_profile_provider(db);
    if (ss_cost_add_provider(cm_db, &pv, &d))
        die(&d);
    ss_sim *s1 = NULL, *s2 = NULL;
    ss_sim_result r1 = {0}, r2 = {0};
    if (ss_sim_new(g, m, cm_an, NULL, &s1, &d) || ss_sim_run(s1, plan, &r1, &d) ||
        ss_sim_new(g, m, cm_db, NULL, &s2, &d) || ss_sim_run(s2, plan, &r2, &d))
        die(&d);
    double share[3];
    if (ss_cost_plan_sources(cm_db, g, m, plan, share, &d))
        die(&d);

    for (int k = 0; k < nw; k++)
        sim_up += ss_cost_update_us(cm_db, 0, wn[k], ss_graph_optimizer(g), ss_graph_precision(g));
    double err_db = (r2.iteration_us - med) / med, err_an = (r1.iteration_us - med) / med;
    printf("| iteration | time ms | error vs measured |\n|---|---:|---:|\n");
    printf("| measured (median of %d, kernels + %s update) | %.2f | |\n", iters,
           ss_optimizer_name(opt), med / 1e3);
    printf("| simulated with the profile database (%.0f%% profile) | %.2f | %+.1f%% |\n",
           100 * share[SS_COST_PROFILE], r2.iteration_us / 1e3, 100 * err_db);
    printf("| simulated, analytic only | %.2f | %+.1f%% |\n", r1.iteration_us / 1e3,
           100 * err_an);
    printf("| of which optimizer update: measured / simulated (analytic in both) | %.2f / %.2f | |\n\n",
           up_med / 1e3, sim_up / 1e3);
    printf("SUMMARY %.3f %.3f %+.2f %.3f %+.2f %.3f %.3f %d\n", med / 1e3, r2.iteration_us / 1e3,
           100 * err_db, r1.iteration_us / 1e3, 100 * err_an, sum_an / 1e3, sum_me / 1e3, nrep);
    for (int i = 0; i < n; i++)
        if (live[i])
            ss_kernel_release(&args[i], SS_BACKEND_CPU);
    for (int k = 0; k < nw; k++) {
        free(w[k]);
        free(gr[k]);
        free(ms1[k]);
        free(ms2[k]);
    }
    free(w);
    free(gr);
    free(ms1);
    free(ms2);
    free(wn);
    free(it_us);
    free(fs);
    free(bs);
    free(sig);
    free(rep_op);
    free(count);
    free(up_us);
    free(args);
    free(live);
    ss_sim_result_clear(&r1);
    ss_sim_result_clear(&r2);
    ss_sim_free(s1);
    ss_sim_free(s2);
    ss_cost_free(cm_an);
    ss_cost_free(cm_db);
    ss_profile_db_free(db);
    ss_plan_free(plan);
    ss_graph_free(g);
    ss_machine_free(m);
    return fabs(err_db) <= 0.10 ? 0 : 1;
}
