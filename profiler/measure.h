/*
 * measure.h — live measurement of operator tiles: run a tile's forward and
 * backward kernels (kernels/) on a backend, after warm-up, a number of
 * times, and report the median and the spread (interquartile range) of each
 * pass. CPU passes are timed with CLOCK_MONOTONIC around the call; CUDA
 * passes with events recorded on the context's stream around the launch.
 * On a shared machine, CPU passes can be timed by the process's CPU time
 * instead (other jobs' preemption then does not count).
 *
 * Forward and backward alternate as in training, on the same buffers, so
 * the backward reads what its forward saved; inputs are random values from
 * a fixed seed (the kernels' times do not depend on the values, except
 * dropout's mask and max pooling's branches, which random data exercises
 * as real data does).
 */
#ifndef SS_PROFILER_MEASURE_H
#define SS_PROFILER_MEASURE_H

#include "simsearch.h"
#include "kernels/kernels.h"

typedef struct ss_measure_config {
    ss_backend backend;
    int device;     /* CUDA device index (0 on the CPU) */
    int reps;       /* timed repetitions (0: 10) */
    int warmup;     /* untimed repetitions first (0: 2, < 0: none) */
    size_t flush_bytes; /* CPU: before every timed pass, write this many bytes
                           elsewhere to evict the tile's buffers from the caches, as
                           the rest of a training iteration does (0: none) */
    int cpu_time;       /* CPU: time passes by the process's CPU time
                           (CLOCK_PROCESS_CPUTIME_ID) instead of wall time, so that
                           preemption by other jobs on a shared machine is not
                           counted; meaningful with one BLAS thread */
} ss_measure_config;

/* Microseconds on the clock a config times with (wall or process CPU time). */
double ss_measure_now_us(int cpu_time);

/* A flush size that evicts the caches of this machine's CPUs: 2 x the
 * largest cache sysconf reports (64 MiB when it reports none). */
size_t ss_measure_cache_flush_bytes(void);

typedef struct ss_measurement {
    double fwd_us, fwd_spread_us;
    double bwd_us, bwd_spread_us;
    int reps;
} ss_measurement;

/* Measure tile t of op in g. SS_ERR_UNSUPPORTED when the backend cannot run
 * the tile (message says why), SS_ERR_NOMEM when its buffers do not fit. On
 * error *out is unchanged. */
ss_status ss_measure_tile(const ss_measure_config *c, const ss_graph *g, const ss_op *op,
                          const ss_tile *t, ss_measurement *out, ss_diag *d);

/* Median and interquartile range of v[0..n) (v is sorted in place). */
void ss_measure_stats(double *v, int n, double *median, double *spread);

/* Peak rates of one CPU core measured with the CPU kernels' libraries: f32
 * GEMM GFLOP/s (cblas_sgemm on 512^3, best of 5) and streaming memory GB/s
 * (a[i] = b[i] + s * c[i] over three 16 MiB arrays, best of 5: 12 bytes per
 * element, STREAM's triad count). cpu_time as in ss_measure_config. Both 0 when memory runs
 * out or OpenBLAS cannot be opened. */
void ss_measure_cpu_rates(int cpu_time, double *gflops, double *gbps);

/* A line naming the measuring device: the CPU model from /proc/cpuinfo and
 * OPENBLAS_NUM_THREADS, or the CUDA device's name. */
void ss_measure_device_name(ss_backend b, int device, char *buf, size_t n);

#endif
