/*
 * common.cuh — what the CUDA kernel files (kernels/cuda/*.cu) share:
 * element loads and stores in float for every compute dtype, the dtype
 * dispatch, launch sizes, the row-major GEMM on cuBLAS, bias and column-sum
 * kernels, f32 conversions, and the entries each file defines for the
 * table in kernels.cu. Included by .cu files only.
 */
#ifndef SS_KERNELS_CUDA_COMMON_CUH
#define SS_KERNELS_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "kernels/kernels.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/ctx.h"
}

#define FLOATS ((1u << SS_F32) | (1u << SS_F16) | (1u << SS_BF16))
#define TPB 256

static inline int nblocks(int64_t n)
{
    int64_t b = (n + TPB - 1) / TPB;
    return (int)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

static inline cudaStream_t S(const ss_kargs *a) { return ((ss_cuda_ctx *)a->ctx)->stream; }
static inline int64_t ext(const ss_region *r, int i) { return r->r[i].hi - r->r[i].lo; }
static inline int64_t yvol(const ss_kargs *a) { return ss_region_volume(&a->yr[0]); }

__device__ __forceinline__ float ld(const float *p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __half *p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float ld(const __nv_bfloat16 *p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float *p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__half *p, int64_t i, float v) { p[i] = __float2half(v); }
__device__ __forceinline__ void st(__nv_bfloat16 *p, int64_t i, float v) { p[i] = __float2bfloat16(v); }

__device__ __forceinline__ int64_t idx_at(const void *p, int is64, int64_t i)
{
    return is64 ? ((const int64_t *)p)[i] : (int64_t)((const int32_t *)p)[i];
}

/* Dispatch a templated launcher on the compute dtype. */
#define DISPATCH(dt, FN, ...)                                        \
    do {                                                             \
        if ((dt) == SS_F16)                                          \
            FN<__half>(__VA_ARGS__);                                 \
        else if ((dt) == SS_BF16)                                    \
            FN<__nv_bfloat16>(__VA_ARGS__);                          \
        else                                                         \
            FN<float>(__VA_ARGS__);                                  \
    } while (0)

static inline ss_status no_state(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    (void)a;
    (void)d;
    *saved = *work = 0;
    return SS_OK;
}

/* ------------------------------------------------------------------ GEMM */

static inline cudaDataType_t cdt(ss_dtype t)
{
    return t == SS_F16 ? CUDA_R_16F : t == SS_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* Row-major C[M,N] = alpha op(A) op(B) + beta C, `batch` times with strides,
 * as the column-major C^T = op(B)^T op(A)^T. */
static inline void gemm(const ss_kargs *a, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                 const void *A, int64_t lda, int64_t sA, const void *B, int64_t ldb, int64_t sB,
                 float beta, void *C, int64_t ldc, int64_t sC, int64_t batch)
{
    if (M <= 0 || N <= 0 || batch <= 0)
        return;
    cudaDataType_t t = cdt(a->dtype);
    cublasGemmStridedBatchedEx(((ss_cuda_ctx *)a->ctx)->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                               ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, B,
                               t, (int)ldb, sB, A, t, (int)lda, sA, &beta, C, t, (int)ldc, sC,
                               (int)batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

template <typename T>
__global__ void add_bias_k(T *y, const T *b, int64_t rows, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * n;
         i += (int64_t)gridDim.x * blockDim.x)
        st(y, i, ld(y, i) + ld(b, i % n));
}

/* db[j] = on ? sum_i dy[i, j] : 0 */
template <typename T>
__global__ void col_sum_k(T *db, const T *dy, int64_t rows, int64_t n, int on)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x) {
        float s = 0;
        for (int64_t i = 0; on && i < rows; i++)
            s += ld(dy, i * n + j);
        st(db, j, s);
    }
}

template <typename T> static inline void add_bias(const ss_kargs *a, void *y, const void *b, int64_t r, int64_t n)
{
    add_bias_k<T><<<nblocks(r * n), TPB, 0, S(a)>>>((T *)y, (const T *)b, r, n);
}
template <typename T> static inline void col_sum(const ss_kargs *a, void *db, const void *dy, int64_t r, int64_t n, int on)
{
    col_sum_k<T><<<nblocks(n), TPB, 0, S(a)>>>((T *)db, (const T *)dy, r, n, on);
}

template <typename T> __global__ void to_f32(float *o, const T *x, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        o[i] = ld(x, i);
}
template <typename T> __global__ void from_f32(T *o, const float *x, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        st(o, i, x[i]);
}


/* Entries defined in kernels_dnn.cu (cuDNN), kernels_seq.cu and kernels_flash.cu. */
extern const ss_kernel ss_cuda_conv2d, ss_cuda_pool2d, ss_cuda_batchnorm, ss_cuda_attention,
    ss_cuda_lstm, ss_cuda_flash_attention;

#endif
