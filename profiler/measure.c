/*
 * measure.c — live measurement of operator tiles (measure.h): set up the
 * tile's kernels, allocate its buffers once, warm up, then time
 * repetitions of forward and backward and reduce them to median and spread.
 */
#include "profiler/measure.h"
#include "kernels/cuda/cuda_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Linear interpolation between order statistics (the usual quantile). */
static double quantile(const double *v, int n, double q)
{
    double pos = q * (n - 1);
    int i = (int)pos;
    if (i >= n - 1)
        return v[n - 1];
    return v[i] + (pos - i) * (v[i + 1] - v[i]);
}

void ss_measure_stats(double *v, int n, double *median, double *spread)
{
    if (n <= 0) {
        *median = *spread = 0;
        return;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *median = quantile(v, n, 0.5);
    *spread = quantile(v, n, 0.75) - quantile(v, n, 0.25);
}

/* One timed pass: forward (dir 0) or backward (dir 1). Negative on failure. */
static double timed(const ss_measure_config *c, const ss_kargs *a, int dir, ss_diag *d)
{
    if (c->backend == SS_BACKEND_CUDA) {
        if (ss_cuda_mark(a->ctx, 0))
            return -1;
        if ((dir ? ss_kernel_backward(c->backend, a, d) : ss_kernel_forward(c->backend, a, d)))
            return -1;
        if (ss_cuda_mark(a->ctx, 1))
            return -1;
        return ss_cuda_elapsed_us(a->ctx);
    }
    double t0 = now_us();
    if ((dir ? ss_kernel_backward(c->backend, a, d) : ss_kernel_forward(c->backend, a, d)))
        return -1;
    return now_us() - t0;
}

ss_status ss_measure_tile(const ss_measure_config *c, const ss_graph *g, const ss_op *op,
                          const ss_tile *t, ss_measurement *out, ss_diag *d)
{
    int reps = c->reps > 0 ? c->reps : 10, warm = c->warmup == 0 ? 2 : c->warmup;
    if (warm < 0)
        warm = 0;
    ss_kargs a;
    ss_status st = ss_kernel_setup(&a, c->backend, g, op, t, d);
    if (st)
        return st;
    if ((st = ss_kernel_alloc(&a, c->backend, c->device, 0x5eed ^ (uint64_t)op->id, d)))
        return st;
    double *fw = malloc((size_t)reps * sizeof *fw), *bw = malloc((size_t)reps * sizeof *bw);
    if (!fw || !bw) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < warm + reps; i++) {
        double f = timed(c, &a, 0, d), b = f >= 0 ? timed(c, &a, 1, d) : -1;
        if (f < 0 || b < 0) {
            st = ss_diag_set(d, SS_ERR_UNSUPPORTED, "measure: timing op '%s' on %s failed",
                             op->name, ss_backend_name(c->backend));
            goto out;
        }
        if (i >= warm) {
            fw[i - warm] = f;
            bw[i - warm] = b;
        }
    }
    if ((st = ss_kernel_sync(c->backend, &a, d)))
        goto out;
    ss_measurement m;
    ss_measure_stats(fw, reps, &m.fwd_us, &m.fwd_spread_us);
    ss_measure_stats(bw, reps, &m.bwd_us, &m.bwd_spread_us);
    m.reps = reps;
    *out = m;
out:
    free(fw);
    free(bw);
    ss_kernel_release(&a, c->backend);
    return st;
}

void ss_measure_device_name(ss_backend b, int device, char *buf, size_t n)
{
    if (b == SS_BACKEND_CUDA) {
        snprintf(buf, n, "cuda:%d", device);
        return;
    }
    char model[96] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "model name", 10)) {
                char *p = strchr(line, ':');
                if (p) {
                    p += 1 + (p[1] == ' ');
                    p[strcspn(p, "\n")] = '\0';
                    snprintf(model, sizeof model, "%s", p);
                }
                break;
            }
        fclose(f);
    }
    const char *th = getenv("OPENBLAS_NUM_THREADS");
    snprintf(buf, n, "cpu: %s (OPENBLAS_NUM_THREADS=%s)", model, th ? th : "unset");
}
