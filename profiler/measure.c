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
#include <unistd.h>

double ss_measure_now_us(int cpu_time)
{
    struct timespec ts;
    clock_gettime(cpu_time ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
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

size_t ss_measure_cache_flush_bytes(void)
{
    long big = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    big = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l2 > big)
        big = l2;
#endif
    return big > 0 ? 2 * (size_t)big : (size_t)64 << 20;
}

/* Write every cache line of buf (n bytes): the caches then hold it, not the tile. */
static void flush(volatile unsigned char *buf, size_t n)
{
    for (size_t i = 0; i < n; i += 64)
        buf[i] = (unsigned char)(buf[i] + 1);
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
    double t0 = ss_measure_now_us(c->cpu_time);
    if ((dir ? ss_kernel_backward(c->backend, a, d) : ss_kernel_forward(c->backend, a, d)))
        return -1;
    return ss_measure_now_us(c->cpu_time) - t0;
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
    size_t fl = c->backend == SS_BACKEND_CPU ? c->flush_bytes : 0;
    unsigned char *fbuf = fl ? calloc(1, fl) : NULL;
    if (!fw || !bw || (fl && !fbuf)) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < warm + reps; i++) {
        if (fbuf && i >= warm)
            flush(fbuf, fl);
        double f = timed(c, &a, 0, d);
        if (fbuf && i >= warm)
            flush(fbuf, fl);
        double b = f >= 0 ? timed(c, &a, 1, d) : -1;
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
    free(fbuf);
    ss_kernel_release(&a, c->backend);
    return st;
}

void ss_measure_cpu_rates(int cpu_time, double *gflops, double *gbps)
{
    *gflops = *gbps = 0;
    const int64_t n = 512, m = (int64_t)4 << 20; /* GEMM size; stream elements (16 MiB) */
    float *a = calloc((size_t)(3 * n * n), sizeof *a);
    float *x = calloc((size_t)(3 * m), sizeof *x);
    ss_diag d;
    ss_diag_init(&d);
    if (!a || !x || ss_kernel_gemm_f32(1, 1, 1, a, a, a + 1, &d) != SS_OK) {
        free(a);
        free(x);
        return;
    }
    for (int64_t i = 0; i < 3 * n * n; i++)
        a[i] = (float)(i % 7) * 0.25f;
    for (int64_t i = 0; i < 3 * m; i++)
        x[i] = (float)(i % 5);
    double best_g = 1e300, best_s = 1e300;
    for (int r = 0; r < 6; r++) {
        double t0 = ss_measure_now_us(cpu_time);
        ss_kernel_gemm_f32(n, n, n, a, a + n * n, a + 2 * n * n, NULL); /* opened above */
        double t1 = ss_measure_now_us(cpu_time);
        float *A = x, *B = x + m, *C = x + 2 * m;
        for (int64_t i = 0; i < m; i++)
            A[i] = B[i] + 0.5f * C[i];
        double t2 = ss_measure_now_us(cpu_time);
        if (r > 0) { /* the first round warms up */
            best_g = t1 - t0 < best_g ? t1 - t0 : best_g;
            best_s = t2 - t1 < best_s ? t2 - t1 : best_s;
        }
    }
    volatile float sink = x[m / 2] + a[n];
    (void)sink;
    *gflops = 2.0 * (double)(n * n * n) / best_g / 1e3;
    *gbps = 12.0 * (double)m / best_s / 1e3;
    free(a);
    free(x);
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
