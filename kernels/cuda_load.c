/*
 * cuda_load.c — the CUDA backend (cuda_backend.h) of a build with the CUDA
 * kernels, as the library holds it: every function opens the module
 * libsimsearch-cuda.so (module.h) on first use, with dlopen under
 * pthread_once as search/coin.c opens COIN-OR, and forwards to its table.
 * The CUDA runtime, cuBLAS, cuDNN and NCCL are the module's dependencies,
 * so a process maps them (~0.13 CPU s) only when it asks for CUDA. A module
 * that cannot be opened is no CUDA: 0 devices, and the calls that need a
 * device fail with dlerror's message. In a build without the CUDA kernels
 * this file is empty (cuda_none.c).
 */
#define _GNU_SOURCE /* dladdr: where this code was loaded from */
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/module.h"

#ifdef SS_CUDA_KERNELS

#include <dlfcn.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const ss_cuda_module *mod;
static char why[512];

/* Opens dir/rel/SS_CUDA_MODULE_FILE (rel may be ""); the handle or NULL. */
static void *open_in(const char *dir, const char *rel)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s%s" SS_CUDA_MODULE_FILE, dir, rel, *rel ? "/" : "") >=
        (int)sizeof path)
        return NULL;
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

/* Opens the module next to file (a program or library) or in the install's
 * library folder relative to it (SS_CUDA_MODULE_LIBREL: bin -> lib). */
static void *open_near(const char *file)
{
    char dir[4096];
    if (!file || !strchr(file, '/') || snprintf(dir, sizeof dir, "%s", file) >= (int)sizeof dir)
        return NULL;
    const char *d = dirname(dir);
    void *h = open_in(d, "");
    return h ? h : open_in(d, SS_CUDA_MODULE_LIBREL);
}

/* Near the program or library holding this code (the build folder, or an
 * installed libsimsearch.so; dladdr names a program as it was started,
 * /proc/self/exe wherever the process has moved since), then by the
 * dynamic loader's search (LD_LIBRARY_PATH). */
static void load(void)
{
    Dl_info info;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    void *h = dladdr((void *)ss_cuda_module_get, &info) ? open_near(info.dli_fname) : NULL;
    if (!h)
        h = open_near(exe);
    if (!h)
        h = dlopen(SS_CUDA_MODULE_FILE, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, sizeof why, "cuda: cannot open the CUDA module %s: %s",
                 SS_CUDA_MODULE_FILE, dlerror());
        return;
    }
    const ss_cuda_module *m = dlsym(h, "ss_cuda_module_table");
    if (!m || m->abi != SS_CUDA_MODULE_ABI) {
        snprintf(why, sizeof why, "cuda: %s is of another build (%s)", SS_CUDA_MODULE_FILE,
                 m ? "its table differs" : "no ss_cuda_module_table");
        dlclose(h);
        return;
    }
    mod = m;
}

/* See module.h. */
const ss_cuda_module *ss_cuda_module_get(ss_diag *d)
{
    pthread_once(&once, load);
    if (!mod && d)
        ss_diag_set(d, SS_ERR_UNSUPPORTED, "%s", why);
    return mod;
}

int ss_cuda_built(void) { return 1; }

int ss_cuda_device_count(void)
{
    const ss_cuda_module *m = ss_cuda_module_get(NULL);
    return m ? m->device_count() : 0;
}

void *ss_cuda_malloc(int device, size_t n)
{
    const ss_cuda_module *m = ss_cuda_module_get(NULL);
    return m ? m->mem_alloc(device, n) : NULL;
}

/* The calls below take what only the module made (device memory, a
 * context): it is open when they come. */
void ss_cuda_free(void *p)
{
    if (p)
        mod->mem_free(p);
}

int ss_cuda_memset(void *p, size_t n) { return mod ? mod->mem_zero(p, n) : -1; }

int ss_cuda_upload(void *dst, const void *src, size_t n)
{
    return mod ? mod->upload(dst, src, n) : -1;
}

int ss_cuda_download(void *dst, const void *src, size_t n)
{
    return mod ? mod->download(dst, src, n) : -1;
}

ss_status ss_cuda_ctx_get(int device, void **ctx, ss_diag *d)
{
    *ctx = NULL;
    const ss_cuda_module *m = ss_cuda_module_get(d);
    return m ? m->ctx_get(device, ctx, d) : SS_ERR_UNSUPPORTED;
}

void ss_cuda_ctx_release(void *ctx)
{
    if (ctx)
        mod->ctx_release(ctx);
}

ss_status ss_cuda_check(ss_diag *d)
{
    const ss_cuda_module *m = ss_cuda_module_get(d);
    return m ? m->check(d) : SS_ERR_UNSUPPORTED;
}

ss_status ss_cuda_sync(void *ctx, ss_diag *d)
{
    const ss_cuda_module *m = ss_cuda_module_get(d);
    return m ? m->sync(ctx, d) : SS_ERR_UNSUPPORTED;
}

int ss_cuda_mark(void *ctx, int slot) { return mod ? mod->mark(ctx, slot) : -1; }

double ss_cuda_elapsed_us(void *ctx) { return mod ? mod->elapsed_us(ctx) : -1; }

const ss_kernel *ss_kernels_cuda(ss_op_type t)
{
    const ss_cuda_module *m = ss_cuda_module_get(NULL);
    return m ? m->kernels(t) : NULL;
}

#else
typedef int ss_cuda_load_unused; /* ISO C: a translation unit is not empty */
#endif
