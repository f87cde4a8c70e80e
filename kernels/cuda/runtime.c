/*
 * runtime.c — the CUDA runtime side of the CUDA backend (cuda_backend.h):
 * device count (a failing cudaGetDeviceCount, e.g. no driver, is 0 GPUs),
 * device memory, per-device contexts (ctx.h) and event timing. Compiled only
 * when CMake finds the CUDA toolkit (SS_CUDA_KERNELS).
 */
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/ctx.h"

#include <string.h>

#define MAX_DEV 64

static ss_cuda_ctx *ctxs[MAX_DEV];

int ss_cuda_built(void) { return 1; }

int ss_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear it: no driver or no GPU means 0 devices */
        return 0;
    }
    return n;
}

void *ss_cuda_malloc(int device, size_t n)
{
    void *p = NULL;
    if (cudaSetDevice(device) != cudaSuccess || cudaMalloc(&p, n ? n : 1) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

void ss_cuda_free(void *p)
{
    if (p)
        cudaFree(p);
}

int ss_cuda_memset(void *p, size_t n) { return cudaMemset(p, 0, n) == cudaSuccess ? 0 : -1; }

int ss_cuda_upload(void *dst, const void *src, size_t n)
{
    return cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
}

int ss_cuda_download(void *dst, const void *src, size_t n)
{
    return cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost) == cudaSuccess ? 0 : -1;
}

ss_status ss_cuda_ctx_get(int device, void **out, ss_diag *d)
{
    *out = NULL;
    int n = ss_cuda_device_count();
    if (device < 0 || device >= n || device >= MAX_DEV)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "cuda: no device %d (%d CUDA device(s))",
                           device, n);
    ss_cuda_ctx *c = ctxs[device];
    if (!c) {
        c = ss_calloc(1, sizeof *c);
        if (!c)
            return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
        c->device = device;
        if (cudaSetDevice(device) != cudaSuccess || cudaStreamCreate(&c->stream) != cudaSuccess ||
            cudaEventCreate(&c->ev[0]) != cudaSuccess || cudaEventCreate(&c->ev[1]) != cudaSuccess ||
            cublasCreate(&c->blas) != CUBLAS_STATUS_SUCCESS ||
            cublasSetStream(c->blas, c->stream) != CUBLAS_STATUS_SUCCESS
#ifdef SS_HAVE_CUDNN
            || cudnnCreate(&c->dnn) != CUDNN_STATUS_SUCCESS ||
            cudnnSetStream(c->dnn, c->stream) != CUDNN_STATUS_SUCCESS
#endif
        ) {
            ss_free(c);
            return ss_diag_set(d, SS_ERR_UNSUPPORTED, "cuda: cannot set up device %d: %s",
                               device, cudaGetErrorString(cudaGetLastError()));
        }
        ctxs[device] = c;
    }
    c->refs++;
    cudaSetDevice(device);
    *out = c;
    return SS_OK;
}

/* Contexts stay alive until the process ends: creating cuBLAS and cuDNN
 * handles costs tens of milliseconds, and the profiler sets up one tile
 * after another. Release only counts. */
void ss_cuda_ctx_release(void *p)
{
    ss_cuda_ctx *c = p;
    if (c && c->refs > 0)
        c->refs--;
}

ss_status ss_cuda_check(ss_diag *d)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "cuda: %s", cudaGetErrorString(e));
    return SS_OK;
}

ss_status ss_cuda_sync(void *p, ss_diag *d)
{
    ss_cuda_ctx *c = p;
    cudaError_t e = c ? cudaStreamSynchronize(c->stream) : cudaDeviceSynchronize();
    if (e != cudaSuccess)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "cuda: %s", cudaGetErrorString(e));
    return SS_OK;
}

int ss_cuda_mark(void *p, int slot)
{
    ss_cuda_ctx *c = p;
    if (!c || slot < 0 || slot > 1)
        return -1;
    return cudaEventRecord(c->ev[slot], c->stream) == cudaSuccess ? 0 : -1;
}

double ss_cuda_elapsed_us(void *p)
{
    ss_cuda_ctx *c = p;
    float ms = 0;
    if (!c || cudaEventSynchronize(c->ev[1]) != cudaSuccess ||
        cudaEventElapsedTime(&ms, c->ev[0], c->ev[1]) != cudaSuccess)
        return -1;
    return (double)ms * 1e3;
}
