/*
 * kernels.h — forward and backward kernels of every operator type, per
 * backend: the layer between core (operator semantics) and the profiler and
 * runtime, which run them (DESIGN.md, "Layout").
 *
 * The rules:
 *   - One table per backend, indexed by ss_op_type (kernels point down to
 *     core, never the other way). An entry gives the dtypes it runs, the
 *     sizes of its saved and scratch buffers for a tile, a forward and a
 *     backward function. Adding an operator type adds one entry per backend.
 *   - A kernel runs one TILE of an op (ss_tile): operand i (inputs, then
 *     weights) is a dense row-major buffer holding exactly the region
 *     ss_op_input_region gives for the tile, output k the region
 *     ss_op_output_region gives. Coordinates inside buffers are local to
 *     those regions; the tile (global coordinates) tells a kernel where it
 *     sits (causal masks, the vocabulary shard of an embedding or a loss,
 *     the halo of a convolution window, whether this reduction slice adds
 *     the bias). A tile with a split contraction dim produces partial sums.
 *   - Forward writes every output and the op's saved state (dropout mask,
 *     normalisation statistics, attention probabilities, LSTM gates); the
 *     backward reads the operands, the outputs, the saved state and the
 *     output gradients dy, and OVERWRITES the gradient dx[i] of every float
 *     operand whose dx[i] is not NULL (operands that alias one tensor, like
 *     attention's q = k = v, get separate gradients the caller sums).
 *   - The same args run on every backend; buffers live where the backend
 *     computes (host memory on the CPU, device memory on CUDA).
 *   - A tile the backend cannot run (a dtype it lacks, an LSTM tile that
 *     splits the hidden state) is refused by ss_kernel_setup with
 *     SS_ERR_UNSUPPORTED before anything runs; views (input, reshape, view
 *     splits and transposes) have kernels too (copies), the profiler skips
 *     them since they cost nothing in the plans.
 */
#ifndef SS_KERNELS_H
#define SS_KERNELS_H

#include "simsearch.h"

typedef enum ss_backend { SS_BACKEND_CPU = 0, SS_BACKEND_CUDA, SS_BACKEND_COUNT } ss_backend;
const char *ss_backend_name(ss_backend b); /* "cpu", "cuda" */

#define SS_KERNEL_ALIGN 64 /* byte alignment of every buffer ss_kernel_alloc makes */

/* Everything one kernel call sees. ss_kernel_setup fills the description
 * (first block); the caller (or ss_kernel_alloc) provides the buffers. */
typedef struct ss_kargs {
    const ss_graph *g;
    const ss_op *op;
    ss_tile t;                         /* the tile, global coordinates */
    ss_dtype dtype;                    /* compute dtype: output 0's */
    int n_x, n_y;                      /* operands (inputs then weights), outputs */
    ss_region xr[SS_MAX_OPERANDS];     /* operand regions (ss_op_input_region) */
    ss_dtype xt[SS_MAX_OPERANDS];
    ss_region yr[SS_MAX_OUTPUTS];      /* output regions (ss_op_output_region) */
    ss_dtype yt[SS_MAX_OUTPUTS];
    size_t saved_bytes, work_bytes;    /* needed by this tile's kernels */
    /* buffers */
    void *x[SS_MAX_OPERANDS], *dx[SS_MAX_OPERANDS];
    void *y[SS_MAX_OUTPUTS], *dy[SS_MAX_OUTPUTS];
    void *saved;                       /* written by forward, read by backward */
    void *work;                        /* scratch of one call */
    uint64_t seed;                     /* dropout's random stream */
    void *ctx;                         /* backend context (CUDA: ss_cuda_ctx); NULL on the CPU */
} ss_kargs;

/* One table entry. sizes returns SS_OK and the byte counts, or
 * SS_ERR_UNSUPPORTED (with d naming why) for a tile this kernel cannot run. */
typedef struct ss_kernel {
    unsigned dtypes; /* bit (1u << ss_dtype) per compute dtype it runs */
    ss_status (*sizes)(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d);
    void (*fwd)(const ss_kargs *a);
    void (*bwd)(const ss_kargs *a);
} ss_kernel;

/* The entry of op type t on backend b, or NULL when the backend is not built
 * in (CUDA without the toolkit) or has no kernel for t. */
const ss_kernel *ss_kernel_get(ss_backend b, ss_op_type t);

/* Describe tile t of op (in g) into a: regions, dtypes, saved and work sizes;
 * buffers NULL. SS_ERR_UNSUPPORTED when backend b cannot run it (message
 * names the op and why); SS_ERR_INVALID for a bad op or tile. */
ss_status ss_kernel_setup(ss_kargs *a, ss_backend b, const ss_graph *g, const ss_op *op,
                          const ss_tile *t, ss_diag *d);

/* Bytes of operand i / output k of a (region volume x dtype size). */
size_t ss_kernel_x_bytes(const ss_kargs *a, int i);
size_t ss_kernel_y_bytes(const ss_kargs *a, int k);

/* Allocate every buffer of a on backend b (device: the CUDA device index)
 * and fill the operands and output gradients with values from `seed`:
 * floats uniform in [-1, 1), integer ids and labels valid for the op
 * (vocabulary / class range). dx buffers are allocated for every float
 * operand. On error nothing is allocated. Free with ss_kernel_release. */
ss_status ss_kernel_alloc(ss_kargs *a, ss_backend b, int device, uint64_t seed, ss_diag *d);
void ss_kernel_release(ss_kargs *a, ss_backend b);

/* Run the forward / backward kernel of a's op on backend b (asynchronous on
 * CUDA: ss_kernel_sync waits). */
ss_status ss_kernel_forward(ss_backend b, const ss_kargs *a, ss_diag *d);
ss_status ss_kernel_backward(ss_backend b, const ss_kargs *a, ss_diag *d);
ss_status ss_kernel_sync(ss_backend b, const ss_kargs *a, ss_diag *d);

/* Number of devices of backend b: 1 for the CPU; CUDA devices (0 when the
 * toolkit is not built in or the runtime fails, e.g. no driver). */
int ss_kernel_device_count(ss_backend b);

/* C[M,N] = A[M,K] B[K,N], row-major fp32, with the CPU backend's GEMM
 * (OpenBLAS); for peak-rate measurements. SS_ERR_UNSUPPORTED when OpenBLAS
 * cannot be opened. */
ss_status ss_kernel_gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, const float *B,
                             float *C, ss_diag *d);

/* Whether OpenBLAS is loaded in this process: only after a CPU kernel was
 * set up (or ss_kernel_gemm_f32 ran); the simulator never loads it. */
int ss_cpu_blas_loaded(void);

/* The CPU table (kernels/cpu_*.c) and the CUDA table (kernels/cuda/, NULL
 * entries when not built). */
const ss_kernel *ss_kernels_cpu(ss_op_type t);
const ss_kernel *ss_kernels_cuda(ss_op_type t);

#endif
