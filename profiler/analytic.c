/*
 * analytic.c — the analytic roofline cost of an operator tile, the cost
 * model's last resort (it always answers).
 *
 * For each pass (forward, backward) made of k kernels:
 *   t = max(k * launch_us, max(F / (peak * eff_flops(F / k)), B / (bw * eff_mem(B / k))))
 * with F, B the pass's FLOPs and bytes from ss_op_tile_work, peak the device
 * type's rate for the op's compute dtype (the f32 rate when that is 0), and
 * the efficiencies read from the device type's size-dependent tables at the
 * per-kernel size. The forward pass is one kernel; the backward pass is two
 * kernels (grad wrt input, grad wrt weights) for ops with weights, one for
 * the others. The launch overhead is a floor, not an addend: launches are
 * asynchronous, so the host issues the next kernel while the GPU runs this
 * one, and only kernels shorter than the host's per-kernel dispatch time
 * (framework + driver, launch_us) wait for it; the GPU-side start-up cost of
 * a kernel is in the efficiency tables' small sizes. (Calibrated against
 * measured Megatron-LM runs, docs/calibration.md: the additive form
 * overpredicts large micro-batches and underpredicts small ones.) Passes with no work cost nothing, and views (input, reshape,
 * and a split or transpose marked attrs.view) cost nothing at all.
 *
 * Tensor-core alignment: f16/bf16 matrix products (linear, batch_matmul)
 * load operand rows in 16-byte vectors; when the inner dim K or the output
 * dim N of the tile is a multiple of only 8, 4 or <= 2 bytes, cuBLAS falls
 * back to narrower kernels, and eff_flops is multiplied by the device type's
 * eff_align[0], [1] or [2] (the row lengths are K and N in every pass:
 * X[M,K].W, dY[M,N].W^T, dY^T.X; M is never a leading dim). Seen in the
 * A100 measurements as an odd LM-head width (vocabulary 50,257); part of the
 * A100 fit, where they come out at 1 for now (docs/calibration.md). Invariant: pure function of (device type, op
 * signature, tile) — the cost model's cache relies on it.
 */
#include "simsearch.h"

#include <string.h>

const char *ss_cost_source_name(ss_cost_source s)
{
    switch (s) {
    case SS_COST_ANALYTIC: return "analytic";
    case SS_COST_PROFILE: return "profile";
    case SS_COST_MEASURED: return "measured";
    }
    return "unknown";
}

/* Compute dtype of an op: the dtype of its first output (the float type of an
 * embedding's output, not its integer ids); f8 for a linear or expert linear
 * whose GEMM runs in FP8 (attrs.dtype, core/ops_dense.c). */
static ss_dtype compute_dtype(const ss_graph *g, const ss_op *op)
{
    if ((op->type == SS_OP_LINEAR || op->type == SS_OP_EXPERT_LINEAR) &&
        op->attrs.dtype == SS_F8)
        return SS_F8;
    if (op->n_out < 1)
        return SS_F32;
    const ss_tensor *t = ss_graph_tensor(g, op->outputs[0]);
    return t ? t->dtype : SS_F32;
}

/* Largest power of two dividing both a and b, at most cap (a, b > 0). */
static int64_t pow2_common(int64_t a, int64_t b, int64_t cap)
{
    int64_t p = 1;
    while (p < cap && a % (2 * p) == 0 && b % (2 * p) == 0)
        p *= 2;
    return p;
}

/* Factor on the compute efficiency of tile t of op for its row alignment
 * (see the file comment); 1 for ops that are not tensor-core products. */
static double align_factor(const ss_device_type *dt, const ss_graph *g, const ss_op *op,
                           const ss_tile *t, ss_dtype dtype)
{
    if ((op->type != SS_OP_LINEAR && op->type != SS_OP_BATCH_MATMUL) ||
        (dtype != SS_F16 && dtype != SS_BF16) || op->n_in < 1 || t->out.ndim < 1)
        return 1;
    ss_region in;
    ss_op_input_region(g, op, t, 0, &in);
    if (in.ndim < 1)
        return 1;
    int64_t k = in.r[in.ndim - 1].hi - in.r[in.ndim - 1].lo;
    int64_t n = t->out.r[t->out.ndim - 1].hi - t->out.r[t->out.ndim - 1].lo;
    if (k <= 0 || n <= 0)
        return 1;
    int64_t es = (int64_t)ss_dtype_size(dtype);
    int64_t bytes = pow2_common(k, n, 16 / es) * es;
    double f = bytes >= 16 ? 1 : dt->eff_align[bytes >= 8 ? 0 : bytes >= 4 ? 1 : 2];
    return f > 0 ? f : 1;
}

/* Time in us of one pass of k kernels doing flops and bytes; fal multiplies
 * the compute efficiency (alignment). *gpu gets the roofline alone, *host
 * the host's dispatch time k * launch_us (both 0 for a pass with no work). */
static double pass_us(const ss_device_type *dt, ss_dtype dtype, double flops, double bytes,
                      int k, double fal, double *gpu, double *host)
{
    *gpu = *host = 0;
    if (flops <= 0 && bytes <= 0)
        return 0;
    double peak = dt->peak_tflops[dtype];
    if (!(peak > 0) && dtype == SS_F8) /* no FP8 units: the GEMM runs in bf16 */
        peak = dt->peak_tflops[SS_BF16];
    if (!(peak > 0))
        peak = dt->peak_tflops[SS_F32];
    double compute = 0, memory = 0;
    if (flops > 0 && peak > 0) {
        double eff = fal * ss_devtype_eff(dt->n_eff_flops, dt->eff_flops_x, dt->eff_flops_y,
                                          flops / k);
        if (!(eff > 1e-6))
            eff = 1e-6;
        compute = flops / (peak * 1e12 * eff) * 1e6;
    }
    if (bytes > 0 && dt->mem_gbps > 0) {
        double eff = ss_devtype_eff(dt->n_eff_mem, dt->eff_mem_x, dt->eff_mem_y, bytes / k);
        if (!(eff > 1e-6))
            eff = 1e-6;
        memory = bytes / (dt->mem_gbps * 1e9 * eff) * 1e6;
    }
    double t = compute > memory ? compute : memory, floor = k * dt->launch_us;
    *gpu = t;
    *host = floor;
    return t > floor ? t : floor;
}

void ss_cost_analytic(const ss_device_type *dt, const ss_graph *g, const ss_op *op,
                      const ss_tile *t, ss_cost *out)
{
    memset(out, 0, sizeof *out);
    out->source = SS_COST_ANALYTIC;
    ss_op_tile_work(g, op, t, &out->work);
    if (!ss_op_has_kernel(op))
        return; /* data arrives, or a view its consumers read in place */
    ss_dtype dtype = compute_dtype(g, op);
    double fal = align_factor(dt, g, op, t, dtype);
    out->fwd_us = pass_us(dt, dtype, out->work.fwd_flops, out->work.fwd_bytes, 1, fal,
                          &out->fwd_gpu_us, &out->fwd_host_us);
    out->bwd_us = pass_us(dt, dtype, out->work.bwd_flops, out->work.bwd_bytes,
                          op->n_w > 0 ? 2 : 1, fal, &out->bwd_gpu_us, &out->bwd_host_us);
}
