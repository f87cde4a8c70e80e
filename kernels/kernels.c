/*
 * kernels.c — the backend-independent part of the kernel layer: describing a
 * tile for the kernels (regions, dtypes, buffer sizes), allocating and
 * filling its buffers, and dispatching to the per-backend tables.
 *
 * Invariant: ss_kernel_setup refuses every tile the backend's kernel would
 * not run correctly, so ss_kernel_forward/backward on a set-up tile always
 * run; buffers made by ss_kernel_alloc are aligned to SS_KERNEL_ALIGN and
 * sized from the regions alone.
 */
#include "kernels/kernels.h"
#include "kernels/cpu_impl.h"
#include "kernels/cuda/cuda_backend.h"

#include <stdlib.h>
#include <string.h>

const char *ss_backend_name(ss_backend b)
{
    switch (b) {
    case SS_BACKEND_CPU: return "cpu";
    case SS_BACKEND_CUDA: return "cuda";
    case SS_BACKEND_COUNT: break;
    }
    return "unknown";
}

const ss_kernel *ss_kernel_get(ss_backend b, ss_op_type t)
{
    if ((unsigned)t >= SS_OP_TYPE_COUNT)
        return NULL;
    switch (b) {
    case SS_BACKEND_CPU: return ss_kernels_cpu(t);
    case SS_BACKEND_CUDA: return ss_kernels_cuda(t);
    case SS_BACKEND_COUNT: break;
    }
    return NULL;
}

static const ss_tensor *operand(const ss_graph *g, const ss_op *op, int i)
{
    return ss_graph_tensor(g, i < op->n_in ? op->inputs[i] : op->weights[i - op->n_in]);
}

ss_status ss_kernel_setup(ss_kargs *a, ss_backend b, const ss_graph *g, const ss_op *op,
                          const ss_tile *t, ss_diag *d)
{
    memset(a, 0, sizeof *a);
    if (!g || !op || !t || op->n_out < 1)
        return ss_diag_set(d, SS_ERR_INVALID, "kernels: no op or tile");
    const ss_kernel *k = ss_kernel_get(b, op->type);
    if (k && b == SS_BACKEND_CPU && ss_cpu_blas_open(d) != SS_OK)
        return SS_ERR_UNSUPPORTED;
    if (!k)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "kernels: no %s kernel for op '%s' (%s)%s",
                           ss_backend_name(b), op->name, ss_op_type_name(op->type),
                           b == SS_BACKEND_CUDA && !ss_cuda_built() ? ": built without CUDA" : "");
    a->g = g;
    a->op = op;
    a->t = *t;
    a->n_x = op->n_in + op->n_w;
    a->n_y = op->n_out;
    for (int i = 0; i < a->n_x; i++) {
        const ss_tensor *x = operand(g, op, i);
        if (!x)
            return ss_diag_set(d, SS_ERR_INVALID, "kernels: op '%s' operand %d missing",
                               op->name, i);
        ss_op_input_region(g, op, t, i, &a->xr[i]);
        a->xt[i] = x->dtype;
    }
    for (int k2 = 0; k2 < a->n_y; k2++) {
        const ss_tensor *y = ss_graph_tensor(g, op->outputs[k2]);
        if (!y)
            return ss_diag_set(d, SS_ERR_INVALID, "kernels: op '%s' output %d missing",
                               op->name, k2);
        ss_op_output_region(g, op, t, k2, &a->yr[k2]);
        a->yt[k2] = y->dtype;
    }
    a->dtype = a->yt[0];
    /* the compute dtype of a loss is its logits', of others output 0's */
    if (op->type == SS_OP_SOFTMAX_CE)
        a->dtype = a->xt[0];
    if (!(k->dtypes & (1u << a->dtype))) {
        ss_status st = ss_diag_set(d, SS_ERR_UNSUPPORTED,
                                   "kernels: the %s %s kernel does not run %s (op '%s')",
                                   ss_backend_name(b), ss_op_type_name(op->type),
                                   ss_dtype_name(a->dtype), op->name);
        memset(a, 0, sizeof *a);
        return st;
    }
    ss_status st = k->sizes(a, &a->saved_bytes, &a->work_bytes, d);
    if (st != SS_OK)
        memset(a, 0, sizeof *a);
    return st;
}

size_t ss_kernel_x_bytes(const ss_kargs *a, int i)
{
    return (size_t)ss_region_volume(&a->xr[i]) * ss_dtype_size(a->xt[i]);
}

size_t ss_kernel_y_bytes(const ss_kargs *a, int k)
{
    return (size_t)ss_region_volume(&a->yr[k]) * ss_dtype_size(a->yt[k]);
}

static int is_float(ss_dtype t) { return t == SS_F32 || t == SS_F16 || t == SS_BF16; }

/* splitmix64: a small, good stream for test and profiling data */
static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint16_t to_half(float f)
{
    /* round-to-nearest f32 -> f16 for values in [-1, 1) (no overflow) */
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u;
    int e = (int)((u >> 23) & 0xff) - 127 + 15;
    if (e <= 0)
        return (uint16_t)sign;
    uint32_t m = (u >> 13) & 0x3ffu;
    if (u & 0x1000u)
        m++;
    uint32_t h = ((uint32_t)e << 10) + m; /* mantissa carry rolls into the exponent */
    return (uint16_t)(sign | h);
}

/* Fill n elements of dtype t: floats uniform in [-1, 1), integers in [0, range). */
static void fill(void *p, ss_dtype t, int64_t n, int64_t range, uint64_t *s)
{
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = next(s);
        float f = (float)((double)(r >> 11) * (1.0 / 9007199254740992.0) * 2 - 1);
        switch (t) {
        case SS_F32: ((float *)p)[i] = f; break;
        case SS_F16: ((uint16_t *)p)[i] = to_half(f); break;
        case SS_BF16: {
            uint32_t u;
            memcpy(&u, &f, 4);
            ((uint16_t *)p)[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
            break;
        }
        case SS_I32: ((int32_t *)p)[i] = (int32_t)(r % (uint64_t)(range > 0 ? range : 1)); break;
        case SS_I64: ((int64_t *)p)[i] = (int64_t)(r % (uint64_t)(range > 0 ? range : 1)); break;
        case SS_F8:
        case SS_DTYPE_COUNT: break;
        }
    }
}

/* Valid range of integer operand i: the vocabulary of an embedding, the
 * classes of a loss. */
static int64_t int_range(const ss_kargs *a, int i)
{
    if (a->op->type == SS_OP_EMBEDDING)
        return a->op->attrs.vocab;
    if (a->op->type == SS_OP_SOFTMAX_CE && i == 1) {
        const ss_tensor *x = ss_graph_tensor(a->g, a->op->inputs[0]);
        return x->shape[x->ndim - 1];
    }
    return 1;
}

static void *host_alloc(size_t n)
{
    size_t r = (n + SS_KERNEL_ALIGN - 1) / SS_KERNEL_ALIGN * SS_KERNEL_ALIGN;
    return aligned_alloc(SS_KERNEL_ALIGN, r ? r : SS_KERNEL_ALIGN);
}

static void *b_alloc(ss_backend b, int device, size_t n)
{
    return b == SS_BACKEND_CPU ? host_alloc(n) : ss_cuda_malloc(device, n);
}

static void b_free(ss_backend b, void *p)
{
    if (!p)
        return;
    if (b == SS_BACKEND_CPU)
        free(p);
    else
        ss_cuda_free(p);
}

void ss_kernel_release(ss_kargs *a, ss_backend b)
{
    if (!a)
        return;
    for (int i = 0; i < SS_MAX_OPERANDS; i++) {
        b_free(b, a->x[i]);
        b_free(b, a->dx[i]);
        a->x[i] = a->dx[i] = NULL;
    }
    for (int k = 0; k < SS_MAX_OUTPUTS; k++) {
        b_free(b, a->y[k]);
        b_free(b, a->dy[k]);
        a->y[k] = a->dy[k] = NULL;
    }
    b_free(b, a->saved);
    b_free(b, a->work);
    a->saved = a->work = NULL;
    if (b == SS_BACKEND_CUDA)
        ss_cuda_ctx_release(a->ctx);
    a->ctx = NULL;
}

/* Allocate buffer *p of n bytes and, when fill_t is a dtype, fill it. */
static int make(ss_backend b, int device, void **p, size_t n, int do_fill, ss_dtype t,
                int64_t range, uint64_t *s)
{
    *p = b_alloc(b, device, n);
    if (!*p)
        return -1;
    if (!do_fill) {
        if (b == SS_BACKEND_CPU)
            memset(*p, 0, n);
        else if (ss_cuda_memset(*p, n))
            return -1;
        return 0;
    }
    size_t es = ss_dtype_size(t);
    int64_t cnt = es ? (int64_t)(n / es) : 0;
    if (b == SS_BACKEND_CPU) {
        fill(*p, t, cnt, range, s);
        return 0;
    }
    void *h = host_alloc(n);
    if (!h)
        return -1;
    fill(h, t, cnt, range, s);
    int r = ss_cuda_upload(*p, h, n);
    free(h);
    return r;
}

ss_status ss_kernel_alloc(ss_kargs *a, ss_backend b, int device, uint64_t seed, ss_diag *d)
{
    if (!a || !a->op)
        return ss_diag_set(d, SS_ERR_INVALID, "kernels: tile not set up");
    uint64_t s = seed ^ 0x5851f42d4c957f2dULL;
    a->seed = seed;
    if (b == SS_BACKEND_CUDA) {
        ss_status st = ss_cuda_ctx_get(device, &a->ctx, d);
        if (st != SS_OK)
            return st;
    }
    int bad = 0;
    for (int i = 0; i < a->n_x && !bad; i++) {
        size_t n = ss_kernel_x_bytes(a, i);
        bad = make(b, device, &a->x[i], n, 1, a->xt[i], int_range(a, i), &s);
        if (!bad && is_float(a->xt[i]))
            bad = make(b, device, &a->dx[i], n, 0, a->xt[i], 0, &s);
    }
    for (int k = 0; k < a->n_y && !bad; k++) {
        size_t n = ss_kernel_y_bytes(a, k);
        bad = make(b, device, &a->y[k], n, 0, a->yt[k], 0, &s) ||
              make(b, device, &a->dy[k], n, 1, a->yt[k], 0, &s);
    }
    if (!bad)
        bad = make(b, device, &a->saved, a->saved_bytes, 0, SS_F32, 0, &s) ||
              make(b, device, &a->work, a->work_bytes, 0, SS_F32, 0, &s);
    if (bad) {
        ss_kernel_release(a, b);
        return ss_diag_set(d, SS_ERR_NOMEM, "kernels: cannot allocate the buffers of op '%s' "
                           "on %s", a->op->name, ss_backend_name(b));
    }
    return SS_OK;
}

ss_status ss_kernel_forward(ss_backend b, const ss_kargs *a, ss_diag *d)
{
    const ss_kernel *k = a && a->op ? ss_kernel_get(b, a->op->type) : NULL;
    if (!k)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "kernels: no %s forward kernel",
                           ss_backend_name(b));
    k->fwd(a);
    return b == SS_BACKEND_CUDA ? ss_cuda_check(d) : SS_OK;
}

ss_status ss_kernel_backward(ss_backend b, const ss_kargs *a, ss_diag *d)
{
    const ss_kernel *k = a && a->op ? ss_kernel_get(b, a->op->type) : NULL;
    if (!k)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "kernels: no %s backward kernel",
                           ss_backend_name(b));
    k->bwd(a);
    return b == SS_BACKEND_CUDA ? ss_cuda_check(d) : SS_OK;
}

ss_status ss_kernel_sync(ss_backend b, const ss_kargs *a, ss_diag *d)
{
    if (b != SS_BACKEND_CUDA)
        return SS_OK;
    return ss_cuda_sync(a ? a->ctx : NULL, d);
}

int ss_kernel_device_count(ss_backend b)
{
    return b == SS_BACKEND_CPU ? 1 : b == SS_BACKEND_CUDA ? ss_cuda_device_count() : 0;
}
