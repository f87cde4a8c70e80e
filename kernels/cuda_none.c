/*
 * cuda_none.c — the CUDA backend of a build without the CUDA toolkit: no
 * devices, no kernel table, and every call that would need CUDA reports
 * SS_ERR_UNSUPPORTED ("built without CUDA"). When CMake builds the CUDA
 * kernels (SS_CUDA_KERNELS) this file is empty and kernels/cuda_load.c
 * provides them (from the CUDA module, kernels/cuda/module.h).
 */
#include "kernels/kernels.h"
#include "kernels/cuda/cuda_backend.h"

#ifndef SS_CUDA_KERNELS

int ss_cuda_built(void) { return 0; }
int ss_cuda_device_count(void) { return 0; }
void *ss_cuda_malloc(int device, size_t n)
{
    (void)device;
    (void)n;
    return NULL;
}
void ss_cuda_free(void *p) { (void)p; }
int ss_cuda_memset(void *p, size_t n)
{
    (void)p;
    (void)n;
    return -1;
}
int ss_cuda_upload(void *dst, const void *src, size_t n)
{
    (void)dst;
    (void)src;
    (void)n;
    return -1;
}
int ss_cuda_download(void *dst, const void *src, size_t n)
{
    (void)dst;
    (void)src;
    (void)n;
    return -1;
}
ss_status ss_cuda_ctx_get(int device, void **ctx, ss_diag *d)
{
    (void)device;
    *ctx = NULL;
    return ss_diag_set(d, SS_ERR_UNSUPPORTED, "cuda: this build has no CUDA backend "
                       "(the CUDA toolkit was not found at configure time)");
}
void ss_cuda_ctx_release(void *ctx) { (void)ctx; }
ss_status ss_cuda_check(ss_diag *d)
{
    return ss_diag_set(d, SS_ERR_UNSUPPORTED, "cuda: built without CUDA");
}
ss_status ss_cuda_sync(void *ctx, ss_diag *d)
{
    (void)ctx;
    return ss_diag_set(d, SS_ERR_UNSUPPORTED, "cuda: built without CUDA");
}
int ss_cuda_mark(void *ctx, int slot)
{
    (void)ctx;
    (void)slot;
    return -1;
}
double ss_cuda_elapsed_us(void *ctx)
{
    (void)ctx;
    return -1;
}
const ss_kernel *ss_kernels_cuda(ss_op_type t)
{
    (void)t;
    return NULL;
}

#else
typedef int ss_cuda_none_unused; /* ISO C: a translation unit is not empty */
#endif
