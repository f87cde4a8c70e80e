/*
 * module.c — the table libsimsearch-cuda.so exports (module.h): the CUDA
 * runtime side (runtime.c), the CUDA kernel table and, with NCCL
 * (SS_CUDA_MODULE_RT), the runtime's CUDA backend. Linked into the module
 * only (the module spans the kernels and the runtime's CUDA backend, hence
 * the runtime headers here); kernels/cuda_load.c opens it.
 */
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/module.h"

#ifdef SS_CUDA_MODULE_RT
#include "runtime/exec.h"
#include "runtime/exec_int.h"

static const void *rt_table(void) { return ss_rt_cuda_backend(); }
#endif

extern const ss_cuda_module ss_cuda_module_table;
const ss_cuda_module ss_cuda_module_table = {
    SS_CUDA_MODULE_ABI,
    ss_cuda_device_count,
    ss_cuda_malloc,
    ss_cuda_free,
    ss_cuda_memset,
    ss_cuda_upload,
    ss_cuda_download,
    ss_cuda_ctx_get,
    ss_cuda_ctx_release,
    ss_cuda_check,
    ss_cuda_sync,
    ss_cuda_mark,
    ss_cuda_elapsed_us,
    ss_kernels_cuda,
#ifdef SS_CUDA_MODULE_RT
    ss_rt_backend_check,
    rt_table,
#else
    NULL,
    NULL,
#endif
};
