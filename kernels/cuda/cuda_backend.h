/*
 * cuda_backend.h — what the kernel layer needs from the CUDA runtime:
 * device count, memory, a per-device context (stream, cuBLAS and cuDNN
 * handles), error checks and event timing. Implemented by
 * kernels/cuda/runtime.c in the CUDA module when the CUDA kernels are built
 * (SS_CUDA_KERNELS; the library forwards to it: kernels/cuda_load.c) and by
 * kernels/cuda_none.c otherwise, where every call reports that CUDA is not
 * built in. A failing cudaGetDeviceCount (no driver, no GPU) counts as 0
 * devices, never as an error.
 */
#ifndef SS_KERNELS_CUDA_BACKEND_H
#define SS_KERNELS_CUDA_BACKEND_H

#include "simsearch.h"

/* 1 if this build has the CUDA backend. */
int ss_cuda_built(void);
/* CUDA devices usable now (0 on any runtime failure). */
int ss_cuda_device_count(void);
/* Device memory on `device` (NULL on failure) and its release. */
void *ss_cuda_malloc(int device, size_t n);
void ss_cuda_free(void *p);
/* Zero n bytes / copy host <-> device; 0 on success, -1 on failure. */
int ss_cuda_memset(void *p, size_t n);
int ss_cuda_upload(void *dst, const void *src, size_t n);
int ss_cuda_download(void *dst, const void *src, size_t n);
/* The context of `device` (created on first use; it lives until the process
 * ends, release only counts users). */
ss_status ss_cuda_ctx_get(int device, void **ctx, ss_diag *d);
void ss_cuda_ctx_release(void *ctx);
/* The last launch error, if any (clears it). */
ss_status ss_cuda_check(ss_diag *d);
/* Wait for the context's stream. */
ss_status ss_cuda_sync(void *ctx, ss_diag *d);
/* Event timing on the context's stream: ss_cuda_mark records an event
 * (slot 0 or 1); ss_cuda_elapsed_us waits for slot 1 and returns the time
 * from slot 0 to slot 1 in microseconds (negative on failure). */
int ss_cuda_mark(void *ctx, int slot);
double ss_cuda_elapsed_us(void *ctx);

#endif
