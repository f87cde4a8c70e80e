/*
 * module.h — the CUDA backend as a module opened on first use. The CUDA
 * kernels (kernels/cuda/, .cu), the CUDA runtime side (kernels/cuda/
 * runtime.c) and, with NCCL, the runtime's CUDA backend (runtime/cuda/
 * exec_cuda.c, region.cu) are linked into libsimsearch-cuda.so together
 * with the CUDA runtime, cuBLAS, cuDNN and NCCL; libsimsearch holds only
 * kernels/cuda_load.c (and runtime/cuda/load.c), whose functions of
 * cuda_backend.h open that module on the first call that needs CUDA and
 * forward to its table. A process that never asks for CUDA (simulate,
 * search, the CPU tests) never maps the CUDA libraries.
 *
 * Invariants: the module exports one symbol, ss_cuda_module_table (this table);
 * the library code it calls is its own private copy (linked from
 * libsimsearch.a, every symbol but the table local), so it does not depend
 * on what the program that opens it exports. Host and module are built
 * from one tree: the structs they pass (ss_kernel_args, ss_rt_state,
 * ss_diag) have one layout, checked by abi. What the module allocates it
 * frees, with its own copy of the allocator (ss_set_allocator's hook in the
 * program does not reach it).
 */
#ifndef SS_KERNELS_CUDA_MODULE_H
#define SS_KERNELS_CUDA_MODULE_H

#include "kernels/kernels.h"

/* Changes with the table or any struct passed through it. */
#define SS_CUDA_MODULE_ABI 1
/* The module's file name, looked up next to the program or library that
 * opens it, then in the install's library folder, then by the loader. */
#define SS_CUDA_MODULE_FILE "libsimsearch-cuda.so"

typedef struct ss_cuda_module {
    int abi; /* SS_CUDA_MODULE_ABI */
    /* kernels/cuda/runtime.c: the functions of cuda_backend.h */
    int (*device_count)(void);
    void *(*mem_alloc)(int device, size_t n);
    void (*mem_free)(void *p);
    int (*mem_zero)(void *p, size_t n);
    int (*upload)(void *dst, const void *src, size_t n);
    int (*download)(void *dst, const void *src, size_t n);
    ss_status (*ctx_get)(int device, void **ctx, ss_diag *d);
    void (*ctx_release)(void *ctx);
    ss_status (*check)(ss_diag *d);
    ss_status (*sync)(void *ctx, ss_diag *d);
    int (*mark)(void *ctx, int slot);
    double (*elapsed_us)(void *ctx);
    /* the CUDA kernel table (kernels.h) */
    const ss_kernel *(*kernels)(ss_op_type t);
    /* the runtime's CUDA backend (runtime/exec_int.h): ss_rt_backend_check
     * and ss_rt_cuda_backend (a const rt_backend *); NULL without NCCL */
    ss_status (*rt_check)(int cuda, int rank, ss_diag *d);
    const void *(*rt_backend)(void);
} ss_cuda_module;

/* The module, opened on the first call (thread-safe; once per process).
 * Returns NULL when it cannot be opened or is of another build, and then,
 * with d non-NULL, says why in d (SS_ERR_UNSUPPORTED). */
const ss_cuda_module *ss_cuda_module_get(ss_diag *d);

#endif
