/*
 * kernels_flash.cu — the CUDA kernel of flash attention (core/ops_llm.c),
 * with the CPU kernel's rules (kernels/cpu_llm.c): per query row an online
 * softmax over the keys, no score matrix; the forward saves the fp32 row
 * log-sum-exp, the backward recomputes each probability from it with
 * D = rowsum(dO * O). Causal rows see keys up to their position (global row
 * / G); the dropout mask is the same hash of the seed and the global index
 * as on the CPU, so both backends drop the same elements.
 *
 * A straightforward kernel (one thread per query row, float accumulators of
 * at most FMAX head dims, dK and dV summed with float atomics in the work
 * buffer), for the runtime and the profiler's numerics, not a tuned one:
 * FlashAttention-2/3's tiled kernels are what the cost model's FLOPs stand
 * for.
 */
#include "kernels/cuda/common.cuh"

#define FMAX 256 /* largest d and dv a thread accumulates */

typedef struct fdesc {
    int64_t B, rows, Sk, G, qlo, Sq;
    int d, dv, causal, nb;
    float scale, keep;
    uint32_t thr;
    unsigned long long seed;
    int64_t e[SS_MAX_DIMS], lo[SS_MAX_DIMS], sh[SS_MAX_DIMS]; /* batch dims of the tile */
} fdesc;

static void flash_desc(const ss_kargs *a, fdesc *f)
{
    const ss_tensor *q = ss_graph_tensor(a->g, a->op->inputs[0]);
    const ss_tensor *k = ss_graph_tensor(a->g, a->op->inputs[1]);
    const ss_tensor *o = ss_graph_tensor(a->g, a->op->outputs[0]);
    const ss_region *yr = &a->yr[0];
    int n = q->ndim;
    memset(f, 0, sizeof *f);
    f->rows = ext(yr, n - 2);
    f->dv = (int)ext(yr, n - 1);
    f->B = 1;
    f->nb = n - 2;
    for (int i = 0; i < n - 2; i++) {
        f->e[i] = ext(yr, i);
        f->lo[i] = yr->r[i].lo;
        f->sh[i] = o->shape[i];
        f->B *= f->e[i];
    }
    f->Sk = ext(&a->xr[1], n - 2);
    f->d = (int)ext(&a->xr[0], n - 1);
    f->G = q->shape[n - 2] / k->shape[n - 2];
    f->Sq = o->shape[n - 2];
    f->qlo = a->t.out.r[n - 2].lo;
    f->causal = a->op->attrs.causal;
    f->scale = 1.0f / sqrtf((float)f->d);
    double r = a->op->attrs.rate;
    f->keep = (float)(1.0 / (1.0 - r));
    f->thr = (uint32_t)(r * 4294967295.0);
    f->seed = a->seed;
}

/* saved: the row log-sum-exp; work: dK and dV in float (backward) */
static ss_status flash_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    fdesc f;
    flash_desc(a, &f);
    if (f.d > FMAX || f.dv > FMAX)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                           "kernels: cuda flash_attention '%s': head dims %d / %d over %d",
                           a->op->name, f.d, f.dv, FMAX);
    *saved = (size_t)(f.B * f.rows) * sizeof(float);
    *work = (size_t)(f.B * f.Sk * (f.d + f.dv)) * sizeof(float);
    return SS_OK;
}

/* Global index of local batch entry b (row-major over the output's batch
 * dims), as kernels/cpu_llm.c's flash_batch. */
__device__ static int64_t fl_batch(const fdesc &f, int64_t b)
{
    int64_t idx = 0, rest = b, span = 1;
    for (int i = f.nb - 1; i >= 0; i--) {
        idx += (f.lo[i] + rest % f.e[i]) * span;
        rest /= f.e[i];
        span *= f.sh[i];
    }
    return idx;
}

/* core/hash.h's ss_hash_final (splitmix64's finalizer) on the device. */
__device__ static float fl_drop(const fdesc &f, int64_t gb, int64_t r, int64_t j)
{
    if (f.thr == 0)
        return 1.0f;
    unsigned long long x = f.seed * 0x9e3779b97f4a7c15ULL +
                           ((unsigned long long)gb * (unsigned long long)f.Sq +
                            (unsigned long long)r) * (unsigned long long)f.Sk +
                           (unsigned long long)j;
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (uint32_t)(x >> 32) >= f.thr ? f.keep : 0.0f;
}

__device__ static int64_t fl_keys(const fdesc &f, int64_t r)
{
    int64_t lim = f.causal ? r / f.G + 1 : f.Sk;
    return lim < f.Sk ? lim : f.Sk;
}

template <typename T>
__device__ static float fl_dot(const T *x, const T *y, int n)
{
    float s = 0;
    for (int i = 0; i < n; i++)
        s += ld(x, i) * ld(y, i);
    return s;
}

template <typename T>
__global__ void flash_fwd_k(fdesc f, const T *Q, const T *K, const T *V, T *O, float *lse)
{
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < f.B * f.rows;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = t / f.rows, r = f.qlo + t % f.rows, lim = fl_keys(f, r), gb = fl_batch(f, b);
        const T *q = Q + t * f.d, *Kb = K + b * f.Sk * f.d, *Vb = V + b * f.Sk * f.dv;
        float acc[FMAX], m = -INFINITY, l = 0;
        for (int e = 0; e < f.dv; e++)
            acc[e] = 0;
        for (int64_t j = 0; j < lim; j++) {
            float s = f.scale * fl_dot(q, Kb + j * f.d, f.d);
            if (s > m) { /* rescale what the earlier keys summed */
                float c = expf(m - s);
                l *= c;
                for (int e = 0; e < f.dv; e++)
                    acc[e] *= c;
                m = s;
            }
            float p = expf(s - m);
            l += p;
            p *= fl_drop(f, gb, r, j);
            for (int e = 0; p != 0 && e < f.dv; e++)
                acc[e] += p * ld(Vb, j * f.dv + e);
        }
        for (int e = 0; e < f.dv; e++)
            st(O, t * f.dv + e, l > 0 ? acc[e] / l : 0.0f);
        lse[t] = l > 0 ? m + logf(l) : -INFINITY;
    }
}

/* dV_j += p' dO, dS = p (drop dO . V_j - D) scale, dQ += dS K_j, dK_j += dS q
 * (dK, dV: float atomics into dKf, dVf). */
template <typename T>
__global__ void flash_bwd_k(fdesc f, const T *Q, const T *K, const T *V, const T *O,
                            const T *dO, const float *lse, T *dQ, float *dKf, float *dVf)
{
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < f.B * f.rows;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = t / f.rows, r = f.qlo + t % f.rows, lim = fl_keys(f, r), gb = fl_batch(f, b);
        const T *q = Q + t * f.d, *Kb = K + b * f.Sk * f.d, *Vb = V + b * f.Sk * f.dv;
        const T *o = O + t * f.dv, *g = dO + t * f.dv;
        float D = fl_dot(g, o, f.dv), dq[FMAX];
        for (int e = 0; e < f.d; e++)
            dq[e] = 0;
        for (int64_t j = 0; j < lim; j++) {
            float p = expf(f.scale * fl_dot(q, Kb + j * f.d, f.d) - lse[t]);
            float dr = fl_drop(f, gb, r, j);
            float *dv = dVf + (b * f.Sk + j) * f.dv, *dk = dKf + (b * f.Sk + j) * f.d;
            for (int e = 0; p * dr != 0 && e < f.dv; e++)
                atomicAdd(dv + e, p * dr * ld(g, e));
            float ds = p * (dr * fl_dot(g, Vb + j * f.dv, f.dv) - D) * f.scale;
            for (int e = 0; ds != 0 && e < f.d; e++) {
                dq[e] += ds * ld(Kb, j * f.d + e);
                atomicAdd(dk + e, ds * ld(q, e));
            }
        }
        for (int e = 0; dQ && e < f.d; e++)
            st(dQ, t * f.d + e, dq[e]);
    }
}

template <typename T> static void flash_fwd_t(const ss_kargs *a)
{
    fdesc f;
    flash_desc(a, &f);
    flash_fwd_k<T><<<nblocks(f.B * f.rows), TPB, 0, S(a)>>>(
        f, (const T *)a->x[0], (const T *)a->x[1], (const T *)a->x[2], (T *)a->y[0],
        (float *)a->saved);
}

template <typename T> static void flash_bwd_t(const ss_kargs *a)
{
    fdesc f;
    flash_desc(a, &f);
    int64_t nk = f.B * f.Sk * f.d, nv = f.B * f.Sk * f.dv;
    float *dKf = (float *)a->work, *dVf = dKf + nk;
    cudaMemsetAsync(a->work, 0, (size_t)(nk + nv) * sizeof(float), S(a));
    flash_bwd_k<T><<<nblocks(f.B * f.rows), TPB, 0, S(a)>>>(
        f, (const T *)a->x[0], (const T *)a->x[1], (const T *)a->x[2], (const T *)a->y[0],
        (const T *)a->dy[0], (const float *)a->saved, (T *)a->dx[0], dKf, dVf);
    if (a->dx[1])
        from_f32<T><<<nblocks(nk), TPB, 0, S(a)>>>((T *)a->dx[1], dKf, nk);
    if (a->dx[2])
        from_f32<T><<<nblocks(nv), TPB, 0, S(a)>>>((T *)a->dx[2], dVf, nv);
}

static void flash_fwd(const ss_kargs *a) { DISPATCH(a->dtype, flash_fwd_t, a); }
static void flash_bwd(const ss_kargs *a) { DISPATCH(a->dtype, flash_bwd_t, a); }

const ss_kernel ss_cuda_flash_attention = {FLOATS, flash_sizes, flash_fwd, flash_bwd};
