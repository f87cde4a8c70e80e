/*
 * cpu_impl.h — helpers shared by the CPU kernels (kernels/cpu_*.c): region
 * extents, row-major GEMM through OpenBLAS, integer operand reads, and the
 * kernel entries each file defines for the CPU table (kernels/cpu_table.c).
 * All CPU kernels compute in fp32.
 */
#ifndef SS_KERNELS_CPU_IMPL_H
#define SS_KERNELS_CPU_IMPL_H

#include "kernels/kernels.h"

static inline int64_t ext(const ss_region *r, int i) { return r->r[i].hi - r->r[i].lo; }

/* Open OpenBLAS (once; later calls return the first answer). Every CPU
 * kernel runs after it succeeded (ss_kernel_setup calls it). */
ss_status ss_cpu_blas_open(ss_diag *d);

/* C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C, row-major, through
 * cblas_sgemm (ta/tb: the operand is stored transposed). */
void ss_cpu_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                 int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
/* y[i] += alpha * x[i] (cblas_saxpy). */
void ss_cpu_axpy(int64_t n, float alpha, const float *x, float *y);
/* Element i of an integer operand (i32 or i64). */
int64_t ss_cpu_index(const void *p, ss_dtype t, int64_t i);

/* Entries (one per op type; cpu_gemm.c and cpu_elem.c). */
extern const ss_kernel ss_cpu_linear, ss_cpu_batch_matmul, ss_cpu_conv2d, ss_cpu_embedding,
    ss_cpu_lstm, ss_cpu_attention;
extern const ss_kernel ss_cpu_input, ss_cpu_pool2d, ss_cpu_batchnorm, ss_cpu_layernorm,
    ss_cpu_unary, ss_cpu_binary, ss_cpu_softmax, ss_cpu_dropout, ss_cpu_concat, ss_cpu_split,
    ss_cpu_reshape, ss_cpu_transpose, ss_cpu_softmax_ce;
/* cpu_llm.c */
extern const ss_kernel ss_cpu_rmsnorm, ss_cpu_rotary, ss_cpu_moe_dispatch, ss_cpu_expert_linear,
    ss_cpu_moe_combine, ss_cpu_flash_attention, ss_cpu_expand;

#endif
