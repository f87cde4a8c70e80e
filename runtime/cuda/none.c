/*
 * none.c — the runtime's CUDA backend in a build without the CUDA toolkit
 * or NCCL: there is none, and --backend cuda is refused before any work,
 * naming what the build lacks (CMakeLists.txt compiles this file instead of
 * exec_cuda.c and region.cu).
 */
#include "runtime/exec_int.h"

ss_status ss_rt_backend_check(int cuda, int rank, ss_diag *d)
{
    if (!cuda)
        return SS_OK;
    return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                       "runtime: --backend cuda: rank %d: this build has no CUDA backend "
                       "(no CUDA kernels or NCCL: it needs the CUDA toolkit with nvcc and NCCL "
                       "when it is configured)",
                       rank);
}

const rt_backend *ss_rt_cuda_backend(void) { return NULL; }
