/*
 * region.cu — the CUDA backend's region kernels (region.h): one thread per
 * element of a region's row-major range [lo, hi), grid-stride; the tensor
 * offset of element i is found from the region's extents and the tensor's
 * strides. Built only with CUDA and NCCL (CMakeLists.txt).
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "runtime/cuda/region.h"

#define TPB 256

void ss_rtc_geom_of(const int64_t *sh, int nd, const ss_region *r, ss_rtc_geom *g)
{
    int64_t st = 1;
    g->nd = nd;
    for (int k = nd - 1; k >= 0; k--) {
        g->stride[k] = st;
        g->lo[k] = r->r[k].lo;
        g->ext[k] = r->r[k].hi - r->r[k].lo;
        st *= sh[k];
    }
}

static int blocks(int64_t n)
{
    int64_t b = (n + TPB - 1) / TPB;
    return (int)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

__device__ __forceinline__ int64_t offset_of(const ss_rtc_geom &g, int64_t i)
{
    int64_t off = 0;
    for (int k = g.nd - 1; k >= 0; k--) {
        int64_t c = i % g.ext[k];
        i /= g.ext[k];
        off += (g.lo[k] + c) * g.stride[k];
    }
    return off;
}

template <typename T>
__global__ void k_copy(T *t, ss_rtc_geom g, int64_t lo, int64_t n, T *dense, int mode)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = offset_of(g, lo + i);
        if (mode == SS_RTC_GATHER)
            dense[i] = t[o];
        else
            t[o] = dense[i];
    }
}

__global__ void k_add(float *t, ss_rtc_geom g, int64_t lo, int64_t n, const float *dense)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        t[offset_of(g, lo + i)] += dense[i];
}

__global__ void k_fill(float *t, ss_rtc_geom g, int64_t lo, int64_t n, float v)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        t[offset_of(g, lo + i)] = v;
}

int ss_rtc_copy(void *stream, void *tensor, int es, const ss_rtc_geom *g, int64_t lo, int64_t hi,
                void *dense, int mode, float value)
{
    int64_t n = hi - lo;
    cudaStream_t s = (cudaStream_t)stream;
    if (n <= 0)
        return 0;
    if (mode == SS_RTC_FILL)
        k_fill<<<blocks(n), TPB, 0, s>>>((float *)tensor, *g, lo, n, value);
    else if (mode == SS_RTC_ADD)
        k_add<<<blocks(n), TPB, 0, s>>>((float *)tensor, *g, lo, n, (const float *)dense);
    else if (es == 8)
        k_copy<uint64_t><<<blocks(n), TPB, 0, s>>>((uint64_t *)tensor, *g, lo, n,
                                                   (uint64_t *)dense, mode);
    else if (es == 4)
        k_copy<uint32_t><<<blocks(n), TPB, 0, s>>>((uint32_t *)tensor, *g, lo, n,
                                                   (uint32_t *)dense, mode);
    else
        return (int)cudaErrorInvalidValue;
    return (int)cudaGetLastError();
}

__global__ void k_update(float *w, const float *gr, float *m, float *v, ss_rtc_geom g, int64_t lo,
                         int64_t n, double lr, double c1, double c2)
{
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = offset_of(g, lo + i);
        if (!m) {
            w[o] -= (float)lr * gr[o];
            continue;
        }
        m[o] = (float)(b1 * m[o] + (1 - b1) * gr[o]);
        v[o] = (float)(b2 * v[o] + (1 - b2) * (double)gr[o] * gr[o]);
        w[o] -= (float)(lr * (m[o] / c1) / (sqrt(v[o] / c2) + eps));
    }
}

int ss_rtc_update(void *stream, float *w, const float *grad, float *m, float *v,
                  const ss_rtc_geom *g, int64_t lo, int64_t hi, double lr, double c1, double c2)
{
    int64_t n = hi - lo;
    if (n <= 0)
        return 0;
    k_update<<<blocks(n), TPB, 0, (cudaStream_t)stream>>>(w, grad, m, v, *g, lo, n, lr, c1, c2);
    return (int)cudaGetLastError();
}

__global__ void k_sum(const float *t, ss_rtc_geom g, int64_t n, double *acc)
{
    __shared__ double part[TPB];
    double x = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x += t[offset_of(g, i)];
    part[threadIdx.x] = x;
    __syncthreads();
    for (int h = TPB / 2; h > 0; h /= 2) {
        if ((int)threadIdx.x < h)
            part[threadIdx.x] += part[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(acc, part[0]);
}

int ss_rtc_sum(void *stream, const float *tensor, const ss_rtc_geom *g, double *acc)
{
    int64_t n = 1;
    for (int k = 0; k < g->nd; k++)
        n *= g->ext[k];
    if (n <= 0)
        return 0;
    k_sum<<<blocks(n), TPB, 0, (cudaStream_t)stream>>>(tensor, *g, n, acc);
    return (int)cudaGetLastError();
}
