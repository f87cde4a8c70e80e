/*
 * load.c — the runtime's CUDA backend as the library holds it in a build
 * with the CUDA kernels and NCCL: exec_cuda.c and region.cu live in the
 * CUDA module (kernels/cuda/module.h), opened on the first --backend cuda;
 * these two functions forward to it. A module that cannot be opened
 * refuses --backend cuda, naming why, as a build without CUDA does
 * (none.c).
 */
#include "kernels/cuda/module.h"
#include "runtime/exec.h"
#include "runtime/exec_int.h"

ss_status ss_rt_backend_check(int cuda, int rank, ss_diag *d)
{
    if (!cuda)
        return SS_OK;
    ss_diag why;
    ss_diag_init(&why);
    const ss_cuda_module *m = ss_cuda_module_get(&why);
    if (!m || !m->rt_check)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "runtime: --backend cuda: rank %d: %s", rank,
                           m ? "the CUDA module has no runtime backend" : why.msg);
    return m->rt_check(cuda, rank, d);
}

const rt_backend *ss_rt_cuda_backend(void)
{
    const ss_cuda_module *m = ss_cuda_module_get(NULL);
    return m && m->rt_backend ? m->rt_backend() : NULL;
}
