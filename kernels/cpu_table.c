/*
 * cpu_table.c — the CPU backend's kernel table, indexed by ss_op_type:
 * every operator type of the zoo has its forward and backward (fp32).
 * Adding an operator type adds its entry here (and its core/ semantics).
 */
#include "kernels/cpu_impl.h"

static const ss_kernel *const table[SS_OP_TYPE_COUNT] = {
    [SS_OP_INPUT] = &ss_cpu_input,
    [SS_OP_LINEAR] = &ss_cpu_linear,
    [SS_OP_BATCH_MATMUL] = &ss_cpu_batch_matmul,
    [SS_OP_CONV2D] = &ss_cpu_conv2d,
    [SS_OP_POOL2D] = &ss_cpu_pool2d,
    [SS_OP_BATCHNORM] = &ss_cpu_batchnorm,
    [SS_OP_LAYERNORM] = &ss_cpu_layernorm,
    [SS_OP_UNARY] = &ss_cpu_unary,
    [SS_OP_BINARY] = &ss_cpu_binary,
    [SS_OP_SOFTMAX] = &ss_cpu_softmax,
    [SS_OP_DROPOUT] = &ss_cpu_dropout,
    [SS_OP_EMBEDDING] = &ss_cpu_embedding,
    [SS_OP_CONCAT] = &ss_cpu_concat,
    [SS_OP_SPLIT] = &ss_cpu_split,
    [SS_OP_RESHAPE] = &ss_cpu_reshape,
    [SS_OP_TRANSPOSE] = &ss_cpu_transpose,
    [SS_OP_LSTM] = &ss_cpu_lstm,
    [SS_OP_ATTENTION] = &ss_cpu_attention,
    [SS_OP_SOFTMAX_CE] = &ss_cpu_softmax_ce,
    [SS_OP_RMSNORM] = &ss_cpu_rmsnorm,
    [SS_OP_ROTARY] = &ss_cpu_rotary,
    [SS_OP_MOE_DISPATCH] = &ss_cpu_moe_dispatch,
    [SS_OP_EXPERT_LINEAR] = &ss_cpu_expert_linear,
    [SS_OP_MOE_COMBINE] = &ss_cpu_moe_combine,
    [SS_OP_FLASH_ATTENTION] = &ss_cpu_flash_attention,
    [SS_OP_EXPAND] = &ss_cpu_expand,
};

const ss_kernel *ss_kernels_cpu(ss_op_type t)
{
    return (unsigned)t < SS_OP_TYPE_COUNT ? table[t] : NULL;
}
