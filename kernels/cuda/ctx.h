/*
 * ctx.h — the per-device CUDA context shared by kernels/cuda/runtime.c and
 * kernels/cuda/kernels.cu: the device, a stream every kernel and library
 * call of the context runs on, a cuBLAS and (with SS_HAVE_CUDNN) a cuDNN
 * handle bound to that stream, and two events for timing. Created on first
 * use, kept until the process ends.
 */
#ifndef SS_KERNELS_CUDA_CTX_H
#define SS_KERNELS_CUDA_CTX_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#ifdef SS_HAVE_CUDNN
#include <cudnn.h>
#endif

typedef struct ss_cuda_ctx {
    int device;
    int refs;
    cudaStream_t stream;
    cublasHandle_t blas;
#ifdef SS_HAVE_CUDNN
    cudnnHandle_t dnn;
#endif
    cudaEvent_t ev[2];
} ss_cuda_ctx;

#endif
