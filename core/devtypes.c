/*
 * devtypes.c — built-in device-type specs and the efficiency-table helper.
 *
 * The specs are plain data, not code paths: a topology file may override any
 * field of a built-in type or define a type from scratch, and a calibration
 * step may replace the efficiency tables. Invariant: every built-in has
 * efficiency tables with strictly increasing x and y in (0, 1].
 *
 * Figures come from /work/shared/reference/hardware.md (vendor datasheets,
 * dense rates without sparsity):
 *   - peak_tflops[f32] is the plain FP32 (CUDA core / vector) rate, never
 *     TF32; peak_tflops[f16] and [bf16] are the tensor-core rates with FP32
 *     accumulate. A rate of 0 means "not supported": the cost model then falls
 *     back to the f32 rate (e.g. bf16 on V100, T4, P100, K80; i32/i64 always).
 *   - K80: one GK210 (half a board). We use the boost clock, 4.37 TFLOP/s
 *     (2.91 at base): GPU Boost holds it under training loads with cooling as
 *     in the FlexFlow cluster. No fast FP16: f16 = the f32 rate.
 *   - P100: no tensor cores; FP16 runs at twice the FP32 rate (21.2).
 *   - RTX 3090: 71 TFLOP/s tensor FP16 is with FP16 accumulate; training
 *     accumulates in FP32, which runs at 35.6, so f16 = bf16 = 35.6.
 *   - Memory capacity "GB" on GPU datasheets is binary (16 GB HBM2 = 16 GiB);
 *     H200's 141 GB is taken as 141 GiB (close to its usable capacity).
 *   - peak_tflops[f8] is the dense FP8 (E4M3) tensor-core rate, 0 where there
 *     are no FP8 units (the cost model then runs an FP8 GEMM at the bf16
 *     rate). Vendor datasheets, dense = half the "with sparsity" figure:
 *     H100 SXM and H200 SXM 1,979 (3,958 sparse; NVIDIA H100 / H200
 *     datasheets). Blackwell, from NVIDIA's HGX B200 / GB200 NVL72
 *     specification table (per GPU, sparse figures halved): B200 (HGX, 1,000
 *     W) FP32 75, FP16/BF16 2,250, FP8 4,500, 180 GB HBM3e at 7.7 TB/s;
 *     GB200 (NVL72, 1,200 W) FP32 80, FP16/BF16 2,500, FP8 5,000, 186 GB at
 *     8 TB/s. MI300X (AMD Instinct MI300X datasheet): FP32 vector 163.4,
 *     FP16/BF16 1,307.4, FP8 2,614.9 dense, 192 GB HBM3 at 5.3 TB/s. The
 *     efficiency tables of these are the big-GPU starting point (EFF_BIG),
 *     not calibrated. hardware.md lists H100/H200 but not yet FP8 or these.
 *     H800 SXM (the export H100 DeepSeek-V3 trained on): the H100 SXM's
 *     compute and memory; only its NVLink is cut (400 GB/s both directions,
 *     topologies/dgx-h800.json; DeepSeek-V3 technical report, section 3.1).
 *   - Launch overhead: ~5 us per kernel on recent GPUs, ~8 us on K80/P100
 *     (older driver stacks, measured in the FlexFlow era), 0.5 us on a CPU
 *     core (a function call plus a thread-pool hand-off); A100: calibrated,
 *     below.
 *   - CPU-core: one modern x86 core with AVX2 FMA: 2 FMA units x 8 f32 lanes x
 *     2 FLOPs x ~3 GHz ~ 0.1 TFLOP/s; ~10 GB/s of memory bandwidth per core
 *     when all cores stream; 4 GiB per core (discovery overrides it).
 *
 * Efficiency tables are piecewise linear in log10(size): large GEMMs reach
 * ~75-80% of peak (hardware.md: 70-85%), small kernels are latency-bound;
 * large copies reach ~85% of memory peak. These are starting points for
 * every type but the A100s.
 *
 * A100 (both memory sizes) is calibrated against 1,440 measured Megatron-LM
 * iterations (vTrain's single-node set; docs/calibration.md, fitted on a
 * seeded random half, checked on the other): kernels run at 80% of tensor
 * peak / 85% of memory bandwidth from small sizes on, and every kernel takes
 * at least launch_us = 60 us — the host-side dispatch time of PyTorch-eager
 * Megatron per simulated op, which the analytic model applies as a floor
 * (profiler/analytic.c). Held-out mean absolute error: 7.6%, Spearman 0.99.
 * The tensor-core alignment factors (eff_align) are part of the fit and come
 * out at 1 for now (docs/calibration.md, "The pipeline-depth bias"). Host
 * dispatch (simulator/build_host.c): the fitted window is one operator (the
 * floor per operator above), and the framework's work per micro-batch and
 * device is mb_overhead_us = 400 us (docs/calibration.md, "Host dispatch and
 * per-micro-batch overhead"); other types: window 1, no overhead.
 *
 * Every type's collective_launch_us (the fixed cost of one collective call)
 * is 6 us: inside the base latencies NCCL's own cost model starts a
 * collective from (src/graph/tuning.h of NCCL 2.4: ring 3.6 / 10.0 / 8.4 us
 * for the LL / LL128 / Simple protocols, tree 4.4 us), not measured here;
 * it was the simulator's constant before it became a field.
 */
#include "simsearch.h"

#include "machine_impl.h"

#include <math.h>
#include <string.h>

/* Compute efficiency vs FLOPs per kernel, big tensor-core GPUs (A100, H100,
 * H200): they need more work in flight to fill their SMs. */
static const double big_fx[] = {1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12};
static const double big_fy[] = {0.01, 0.04, 0.12, 0.30, 0.50, 0.65, 0.75, 0.80};
/* A100, calibrated (docs/calibration.md): the fitted curves
 * 0.80 / (1 + (10^4.5 / F)^1.345) and 0.85 / (1 + (10^3.0 / B)^2.958) are flat
 * above ~1e7 FLOPs and ~1e5 bytes; smaller kernels sit under the launch
 * floor anyway. */
static const double a100_fx[] = {1e5, 1e6, 1e7};
static const double a100_fy[] = {0.660, 0.792, 0.80};
static const double a100_mx[] = {1e4, 1e5};
static const double a100_my[] = {0.849, 0.85};
/* A100, calibrated: tensor-core alignment factors for matrix products whose
 * rows are multiples of only 8 / 4 / <= 2 bytes (docs/calibration.md). */
static const double a100_align[3] = {1.0, 1.0, 1.0};
/* A100, fitted (docs/calibration.md): how far the host runs ahead (in
 * operators) and the framework's work per micro-batch and device. */
#define A100_DISPATCH_WINDOW 1
#define A100_MB_OVERHEAD_US 400.0

/* Tensor-core GPUs of the V100 / T4 / RTX 3090 class. */
static const double tc_fx[] = {1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11};
static const double tc_fy[] = {0.02, 0.05, 0.15, 0.35, 0.55, 0.70, 0.78};
/* GPUs without tensor cores (K80, P100): lower peak, saturated sooner. */
static const double old_fx[] = {1e5, 1e6, 1e7, 1e8, 1e9, 1e10};
static const double old_fy[] = {0.03, 0.08, 0.25, 0.50, 0.68, 0.75};
/* One CPU core: little launch cost, caches help small kernels. */
static const double cpu_fx[] = {1e3, 1e4, 1e5, 1e6, 1e8};
static const double cpu_fy[] = {0.10, 0.25, 0.45, 0.60, 0.75};

/* Memory efficiency vs bytes per kernel. */
static const double gpu_mx[] = {1e4, 1e5, 1e6, 1e7, 1e8};
static const double gpu_my[] = {0.20, 0.35, 0.55, 0.75, 0.85};
static const double cpu_mx[] = {1e3, 1e5, 1e7};
static const double cpu_my[] = {0.30, 0.60, 0.80};

typedef enum { EFF_BIG, EFF_A100, EFF_TC, EFF_OLD, EFF_CPU } eff_family;

typedef struct spec {
    const char *name;
    int is_cpu;
    double f32, f16, bf16, f8;
    double mem_gbps, mem_gib, launch_us;
    eff_family fam;
} spec;

static const spec specs[] = {
    /* name              cpu  f32    f16     bf16    f8      GB/s  GiB launch family */
    {"K80",              0,  4.37,   4.37,    0.0,    0.0,  240,  12,  8.0, EFF_OLD},
    {"P100-SXM2",        0, 10.6,   21.2,     0.0,    0.0,  732,  16,  8.0, EFF_OLD},
    {"V100-SXM2-16GB",   0, 15.7,  125.0,     0.0,    0.0,  900,  16,  5.0, EFF_TC},
    {"V100-SXM2-32GB",   0, 15.7,  125.0,     0.0,    0.0,  900,  32,  5.0, EFF_TC},
    {"A100-SXM4-40GB",   0, 19.5,  312.0,   312.0,    0.0, 1555,  40, 60.0, EFF_A100},
    {"A100-SXM4-80GB",   0, 19.5,  312.0,   312.0,    0.0, 2039,  80, 60.0, EFF_A100},
    {"H100-SXM",         0, 67.0,  989.0,   989.0, 1979.0, 3350,  80,  5.0, EFF_BIG},
    {"H200-SXM",         0, 67.0,  989.0,   989.0, 1979.0, 4800, 141,  5.0, EFF_BIG},
    {"T4",               0,  8.1,   65.0,     0.0,    0.0,  320,  16,  5.0, EFF_TC},
    {"RTX3090",          0, 35.6,   35.6,    35.6,    0.0,  936,  24,  5.0, EFF_TC},
    {"CPU-core",         1,  0.1,    0.0,     0.0,    0.0,   10,   4,  0.5, EFF_CPU},
    {"B200",             0, 75.0, 2250.0,  2250.0, 4500.0, 7700, 180,  5.0, EFF_BIG},
    {"GB200",            0, 80.0, 2500.0,  2500.0, 5000.0, 8000, 186,  5.0, EFF_BIG},
    {"MI300X",           0, 163.4, 1307.4, 1307.4, 2614.9, 5300, 192,  5.0, EFF_BIG},
    {"H800-SXM",         0, 67.0,  989.0,   989.0, 1979.0, 3350,  80,  5.0, EFF_BIG},
};

#define N_SPECS ((int)(sizeof specs / sizeof specs[0]))

static ss_device_type table[N_SPECS];
static int table_ready;

static void set_tab(int *n, double *xs, double *ys, const double *sx, const double *sy, int k)
{
    *n = k;
    memcpy(xs, sx, (size_t)k * sizeof *xs);
    memcpy(ys, sy, (size_t)k * sizeof *ys);
}

#define TAB(n, xs, ys, a, b) set_tab(&(n), (xs), (ys), (a), (b), (int)(sizeof(a) / sizeof((a)[0])))

static void fill(ss_device_type *t, const spec *s)
{
    memset(t, 0, sizeof *t);
    strncpy(t->name, s->name, sizeof t->name - 1);
    t->is_cpu = s->is_cpu;
    t->peak_tflops[SS_F32] = s->f32;
    t->peak_tflops[SS_F16] = s->f16;
    t->peak_tflops[SS_BF16] = s->bf16;
    t->peak_tflops[SS_F8] = s->f8;
    t->mem_gbps = s->mem_gbps;
    t->mem_gib = s->mem_gib;
    t->launch_us = s->launch_us;
    switch (s->fam) {
    case EFF_BIG: TAB(t->n_eff_flops, t->eff_flops_x, t->eff_flops_y, big_fx, big_fy); break;
    case EFF_A100: TAB(t->n_eff_flops, t->eff_flops_x, t->eff_flops_y, a100_fx, a100_fy); break;
    case EFF_TC: TAB(t->n_eff_flops, t->eff_flops_x, t->eff_flops_y, tc_fx, tc_fy); break;
    case EFF_OLD: TAB(t->n_eff_flops, t->eff_flops_x, t->eff_flops_y, old_fx, old_fy); break;
    case EFF_CPU: TAB(t->n_eff_flops, t->eff_flops_x, t->eff_flops_y, cpu_fx, cpu_fy); break;
    }
    for (int k = 0; k < 3; k++)
        t->eff_align[k] = s->fam == EFF_A100 ? a100_align[k] : 1.0;
    t->dispatch_window = s->fam == EFF_A100 ? A100_DISPATCH_WINDOW : 1;
    t->mb_overhead_us = s->fam == EFF_A100 ? A100_MB_OVERHEAD_US : 0.0;
    t->collective_launch_us = SS_COLL_LAUNCH_US_DEFAULT;
    if (s->is_cpu)
        TAB(t->n_eff_mem, t->eff_mem_x, t->eff_mem_y, cpu_mx, cpu_my);
    else if (s->fam == EFF_A100)
        TAB(t->n_eff_mem, t->eff_mem_x, t->eff_mem_y, a100_mx, a100_my);
    else
        TAB(t->n_eff_mem, t->eff_mem_x, t->eff_mem_y, gpu_mx, gpu_my);
}

/* The table is built on first use from the static specs; building is
 * idempotent (same bytes every time), so a race between two first callers
 * writes identical data. */
static void ready(void)
{
    if (table_ready)
        return;
    for (int i = 0; i < N_SPECS; i++)
        fill(&table[i], &specs[i]);
    table_ready = 1;
}

/* Number of built-in device types. */
int ss_devtype_builtin_count(void) { return N_SPECS; }

/* Built-in type i (0 <= i < count), borrowed for the program's lifetime;
 * NULL when out of range. */
const ss_device_type *ss_devtype_builtin(int i)
{
    if (i < 0 || i >= N_SPECS)
        return NULL;
    ready();
    return &table[i];
}

/* Built-in type by exact name, or NULL. */
const ss_device_type *ss_devtype_find_builtin(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < N_SPECS; i++)
        if (strcmp(specs[i].name, name) == 0)
            return ss_devtype_builtin(i);
    return NULL;
}

/* Efficiency at x from a table of n points (xs strictly increasing, > 0):
 * linear interpolation in log10(x); the first value below the first point,
 * the last above the last. n == 0 means "no table": 1.0 (peak). */
double ss_devtype_eff(int n, const double *xs, const double *ys, double x)
{
    if (n <= 0)
        return 1.0;
    if (!(x > xs[0]))
        return ys[0];
    if (x >= xs[n - 1])
        return ys[n - 1];
    double lx = log10(x);
    for (int i = 1; i < n; i++) {
        if (x <= xs[i]) {
            double x0 = log10(xs[i - 1]), x1 = log10(xs[i]);
            double f = x1 > x0 ? (lx - x0) / (x1 - x0) : 1.0;
            return ys[i - 1] + f * (ys[i] - ys[i - 1]);
        }
    }
    return ys[n - 1];
}
