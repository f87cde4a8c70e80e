/*
 * test_kernels_cuda.c — the CUDA kernels (kernels/cuda/kernels.cu) against
 * the CPU kernels, which tests/kernels/test_kernels_cpu.c checks against
 * naive references and finite differences: same random fp32 operands and
 * output gradients, forward outputs and backward gradients must agree.
 * Flash attention included (kernels/cuda/kernels_flash.cu).
 * Without a CUDA device (or a build without the CUDA kernels) it prints a
 * SKIP line and exits 77, which ctest reports as skipped; a build with the
 * CUDA kernels must first open its CUDA module (kernels/cuda/module.h) and
 * find its kernels there, GPU or not.
 */
#include "testutil.h"
#include "kernels/kernels.h"
#include "kernels/cuda/cuda_backend.h"
#ifdef SS_CUDA_KERNELS
#include "kernels/cuda/module.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void close_enough(const float *a, const float *b, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(a[i] - b[i]) <= 1e-3f * (1 + fabsf(a[i]))))
            fail_msg("%s: element %zu: cpu %g, cuda %g", what, i, a[i], b[i]);
}

/* Run op on both backends with the same data; compare outputs and grads. */
static void compare(int op)
{
    const ss_op *o = ss_graph_op(ss_kt_graph, op);
    ss_tile t;
    ss_op_full_tile(ss_kt_graph, o, &t);
    ss_kargs c, g;
    ss_diag d;
    ss_diag_init(&d);
    if (ss_kernel_setup(&c, SS_BACKEND_CPU, ss_kt_graph, o, &t, &d) ||
        ss_kernel_alloc(&c, SS_BACKEND_CPU, 0, 42, &d) ||
        ss_kernel_setup(&g, SS_BACKEND_CUDA, ss_kt_graph, o, &t, &d) ||
        ss_kernel_alloc(&g, SS_BACKEND_CUDA, 0, 42, &d))
        fail_msg("%s: %s", o->name, d.msg);
    /* the same operands and output gradients on the device */
    for (int i = 0; i < c.n_x; i++)
        assert_int_equal(ss_cuda_upload(g.x[i], c.x[i], ss_kernel_x_bytes(&c, i)), 0);
    for (int k = 0; k < c.n_y; k++)
        assert_int_equal(ss_cuda_upload(g.dy[k], c.dy[k], ss_kernel_y_bytes(&c, k)), 0);
    if (ss_kernel_forward(SS_BACKEND_CPU, &c, &d) || ss_kernel_backward(SS_BACKEND_CPU, &c, &d) ||
        ss_kernel_forward(SS_BACKEND_CUDA, &g, &d) || ss_kernel_backward(SS_BACKEND_CUDA, &g, &d) ||
        ss_kernel_sync(SS_BACKEND_CUDA, &g, &d))
        fail_msg("%s: %s", o->name, d.msg);
    for (int k = 0; k < c.n_y; k++) {
        size_t n = ss_kernel_y_bytes(&c, k);
        float *h = malloc(n);
        assert_int_equal(ss_cuda_download(h, g.y[k], n), 0);
        if (o->type != SS_OP_DROPOUT) /* different random streams */
            close_enough(c.y[k], h, n / 4, o->name);
        free(h);
    }
    for (int i = 0; i < c.n_x; i++) {
        if (!c.dx[i] || o->type == SS_OP_DROPOUT)
            continue;
        size_t n = ss_kernel_x_bytes(&c, i);
        float *h = malloc(n);
        assert_int_equal(ss_cuda_download(h, g.dx[i], n), 0);
        close_enough(c.dx[i], h, n / 4, o->name);
        free(h);
    }
    ss_kernel_release(&c, SS_BACKEND_CPU);
    ss_kernel_release(&g, SS_BACKEND_CUDA);
}

static void test_transformer_ops(void **state)
{
    (void)state;
    ss_kt_graph = ss_graph_new("cuda");
    int64_t xs[3] = {2, 5, 16}, is[2] = {2, 5};
    int x = ss_kt_input_flat("x", 3, xs, SS_F32), z = ss_kt_input_flat("z", 3, xs, SS_F32);
    int ids = ss_kt_input_flat("ids", 2, is, SS_I32);
    ss_op_attrs a = {0};
    a.out_features = 12;
    a.use_bias = 1;
    compare(ss_kt_add("fc", SS_OP_LINEAR, &a, 1, &x));
    memset(&a, 0, sizeof a);
    a.trans_b = 1;
    int in2[2] = {x, z};
    compare(ss_kt_add("bmm", SS_OP_BATCH_MATMUL, &a, 2, in2));
    memset(&a, 0, sizeof a);
    compare(ss_kt_add("ln", SS_OP_LAYERNORM, &a, 1, &x));
    a.axis = -1;
    compare(ss_kt_add("sm", SS_OP_SOFTMAX, &a, 1, &x));
    memset(&a, 0, sizeof a);
    for (int u = 0; u < 4; u++) {
        a.unary = (ss_unary_kind)u;
        compare(ss_kt_add(u == 0 ? "relu" : u == 1 ? "gelu" : u == 2 ? "tanh" : "sig", SS_OP_UNARY, &a,
                    1, &x));
    }
    memset(&a, 0, sizeof a);
    a.binary = SS_BINARY_MUL;
    compare(ss_kt_add("mul", SS_OP_BINARY, &a, 2, in2));
    memset(&a, 0, sizeof a);
    a.perm[0] = 1;
    a.perm[1] = 2;
    a.perm[2] = 0;
    compare(ss_kt_add("tr", SS_OP_TRANSPOSE, &a, 1, &x));
    memset(&a, 0, sizeof a);
    a.vocab = 7;
    a.dim = 8;
    a.dtype = SS_F32;
    compare(ss_kt_add("emb", SS_OP_EMBEDDING, &a, 1, &ids));
    memset(&a, 0, sizeof a);
    int ce_in[2] = {x, ids};
    compare(ss_kt_add("loss", SS_OP_SOFTMAX_CE, &a, 2, ce_in));
    memset(&a, 0, sizeof a);
    a.axis = 2;
    compare(ss_kt_add("cat", SS_OP_CONCAT, &a, 2, in2));
    a.n_split = 2;
    a.split_sizes[0] = 6;
    a.split_sizes[1] = 10;
    compare(ss_kt_add("split", SS_OP_SPLIT, &a, 1, &x));
    ss_graph_free(ss_kt_graph);
}

static void test_cnn_rnn_attention(void **state)
{
    (void)state;
    ss_kt_graph = ss_graph_new("cuda2");
    int64_t xs[4] = {2, 3, 7, 6};
    int x = ss_kt_input_flat("x", 4, xs, SS_F32);
    ss_op_attrs a = {0};
    a.out_channels = 4;
    a.use_bias = 1;
    a.kernel[0] = a.kernel[1] = 3;
    a.pad[0] = a.pad[1] = 1;
    compare(ss_kt_add("conv", SS_OP_CONV2D, &a, 1, &x));
    memset(&a, 0, sizeof a);
    a.kernel[0] = a.kernel[1] = 2;
    a.stride[0] = a.stride[1] = 2;
    compare(ss_kt_add("maxpool", SS_OP_POOL2D, &a, 1, &x));
    a.pool = SS_POOL_AVG;
    compare(ss_kt_add("avgpool", SS_OP_POOL2D, &a, 1, &x));
    memset(&a, 0, sizeof a);
    compare(ss_kt_add("bn", SS_OP_BATCHNORM, &a, 1, &x));
    int64_t ss[3] = {2, 5, 8};
    int q = ss_kt_input_flat("q", 3, ss, SS_F32);
    a.heads = 2;
    a.causal = 1;
    a.use_bias = 1;
    int in3[3] = {q, q, q};
    compare(ss_kt_add("attn", SS_OP_ATTENTION, &a, 3, in3));
    memset(&a, 0, sizeof a);
    a.hidden = 6;
    a.return_sequences = 1;
    compare(ss_kt_add("lstm", SS_OP_LSTM, &a, 1, &q));
    ss_graph_free(ss_kt_graph);
}

/* Flash attention: not causal over 70 keys; causal grouped-query rows
 * (G = 2) with dropout (both backends hash the same mask). */
static void test_flash_attention(void **state)
{
    (void)state;
    ss_kt_graph = ss_graph_new("cuda3");
    int64_t qs[4] = {2, 3, 70, 16}, vs[4] = {2, 3, 70, 8};
    int in[3] = {ss_kt_input_flat("q", 4, qs, SS_F32), ss_kt_input_flat("k", 4, qs, SS_F32),
                 ss_kt_input_flat("v", 4, vs, SS_F32)};
    ss_op_attrs a = {0};
    compare(ss_kt_add("flash", SS_OP_FLASH_ATTENTION, &a, 3, in));
    int64_t gq[4] = {1, 2, 24, 16}, gk[4] = {1, 2, 12, 16};
    int g3[3] = {ss_kt_input_flat("gq", 4, gq, SS_F32), ss_kt_input_flat("gk", 4, gk, SS_F32),
                 ss_kt_input_flat("gv", 4, gk, SS_F32)};
    a.causal = 1;
    a.rate = 0.2;
    compare(ss_kt_add("flash_causal", SS_OP_FLASH_ATTENTION, &a, 3, g3));
    ss_graph_free(ss_kt_graph);
}

int main(void)
{
#ifdef SS_CUDA_KERNELS
    ss_diag d;
    ss_diag_init(&d);
    if (!ss_cuda_module_get(&d) || !ss_kernels_cuda(SS_OP_LINEAR)) {
        printf("FAIL: the CUDA module: %s\n", d.msg[0] ? d.msg : "no linear kernel in it");
        return 1;
    }
#endif
    int n = ss_kernel_device_count(SS_BACKEND_CUDA);
    if (!ss_cuda_built() || n == 0) {
        printf("SKIP: %s; the CUDA kernel tests need a GPU\n",
               ss_cuda_built() ? "no CUDA device (cudaGetDeviceCount failed or found none)"
                               : "this build has no CUDA kernels");
        return 77;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_transformer_ops),
                                       cmocka_unit_test(test_cnn_rnn_attention),
                                       cmocka_unit_test(test_flash_attention)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
