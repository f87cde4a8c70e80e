/*
 * exec_cuda.c — the executor's CUDA backend (exec_int.h), built when CMake
 * finds the CUDA toolkit and NCCL. Every tensor, gradient and Adam moment
 * lives in device memory for the whole run (full size, as on the CPU
 * backend); a rank's tasks are issued in list order on the streams of its
 * device plan (plan.h): kernels, updates and every copy into or out of the
 * tensors on the compute stream (the kernels' context stream), NCCL calls
 * on the stream of their network channel, CUDA events between them; the
 * iteration ends when every stream is idle. NCCL calls: ncclAllReduce,
 * ncclReduceScatter, ncclAllGather, ncclSend / ncclRecv (a transfer; an
 * all-to-all's transfers in one group). NCCL communicators: the world
 * one (point-to-point sends and the loss sum) and one per distinct group of
 * the plan's collectives, made before the first iteration (ncclGetUniqueId
 * on the group's first rank, sent with ss_rt_comm's bcast, ncclCommInitRank).
 *
 * Every CUDA and NCCL call is checked; a failure names the call, the rank and
 * the GPU. Invariant: what the tensors hold after each step is what the CPU
 * backend's host buffers hold after the same step (same kernels' semantics,
 * same sums; only summation order differs).
 */
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/ctx.h"
#include "runtime/cuda/plan.h"
#include "runtime/cuda/region.h"

#include <cuda_runtime.h>
#include <math.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

typedef struct cstate {
    cudaStream_t st[1 + SS_RT_MAX_COMM_STREAMS]; /* st[0]: the context's compute stream */
    int n_made;                                  /* streams 1 .. n_made created here */
    ss_cuda_ctx *ctx;
    ss_rt_devplan plan;
    ncclComm_t world, *gc; /* gc[k]: group k's communicator (== world when it is all ranks) */
    int n_gc;
    void **dbuf;
    float **dgrad, **dm, **dv;
    float *scratch;
    double *dloss;
    cudaEvent_t it0, *ev0, *ev1, *evpack; /* per step */
    int n_ev, failed;
} cstate;

static ss_status cu_fail(const ss_rt_state *s, const char *call, int e, ss_diag *d)
{
    return ss_diag_set(d, SS_ERR_IO, "runtime: rank %d (GPU %d): %s failed: %s", s->rank,
                       s->device, call, cudaGetErrorString((cudaError_t)e));
}

static ss_status nc_fail(const ss_rt_state *s, const char *call, ncclResult_t r, ss_diag *d)
{
    const char *last = ncclGetLastError(NULL);
    return ss_diag_set(d, SS_ERR_IO, "runtime: rank %d (GPU %d): %s failed: %s%s%s", s->rank,
                       s->device, call, ncclGetErrorString(r), last && *last ? ": " : "",
                       last ? last : "");
}

#define CU(name, call)                                                                      \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess)                                                              \
            return ((cstate *)s->bs)->failed = 1, cu_fail(s, name, (int)e_, d);            \
    } while (0)
#define RG(name, call)                                                                      \
    do {                                                                                    \
        int e_ = (call);                                                                    \
        if (e_)                                                                             \
            return ((cstate *)s->bs)->failed = 1, cu_fail(s, name, e_, d);                  \
    } while (0)
#define NC(name, call)                                                                      \
    do {                                                                                    \
        ncclResult_t r_ = (call);                                                           \
        if (r_ != ncclSuccess)                                                              \
            return ((cstate *)s->bs)->failed = 1, nc_fail(s, name, r_, d);                  \
    } while (0)

ss_status ss_rt_backend_check(int cuda, int rank, ss_diag *d)
{
    if (!cuda)
        return SS_OK;
    if (!ss_cuda_built())
        return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                           "runtime: --backend cuda: rank %d: this build has no CUDA kernels", rank);
    if (ss_cuda_device_count() <= 0)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                           "runtime: --backend cuda: no CUDA GPU on rank %d "
                           "(cudaGetDeviceCount failed or found none)",
                           rank);
    return SS_OK;
}

/* ------------------------------------------------------------ regions */

static ss_rtc_geom geom(const ss_rt_state *s, int t, const ss_region *r)
{
    const ss_tensor *T = ss_graph_tensor(s->g, t);
    ss_rtc_geom g;
    ss_rtc_geom_of(T->shape, T->ndim, r, &g);
    return g;
}

/* Elements [lo, hi) of region r of tensor t (value or gradient) <-> dense. */
static ss_status reg_copy(const ss_rt_state *s, int t, int grad, const ss_region *r, int64_t lo,
                          int64_t hi, void *dense, int mode, float value, ss_diag *d)
{
    cstate *cs = s->bs;
    void *base = grad ? (void *)cs->dgrad[t] : cs->dbuf[t];
    if (!base)
        return ss_diag_set(d, SS_ERR_INVALID, "runtime: rank %d: tensor %s has no %s on the GPU",
                           s->rank, ss_graph_tensor(s->g, t)->name, grad ? "gradient" : "value");
    ss_rtc_geom g = geom(s, t, r);
    int es = (int)ss_dtype_size(ss_graph_tensor(s->g, t)->dtype);
    RG("region kernel launch", ss_rtc_copy(cs->st[0], base, es, &g, lo, hi, dense, mode, value));
    return SS_OK;
}

static ss_status reg_all(const ss_rt_state *s, int t, int grad, const ss_region *r, void *dense,
                         int mode, float value, ss_diag *d)
{
    return reg_copy(s, t, grad, r, 0, ss_region_volume(r), dense, mode, value, d);
}

/* ------------------------------------------------------------ prepare */

static void cuda_release(ss_rt_state *s)
{
    cstate *cs = s->bs;
    for (int i = 0; i < s->n_tiles; i++)
        ss_kernel_release(&s->tiles[i].a, SS_BACKEND_CUDA);
    if (!cs)
        return;
    if (cs->ctx)
        cudaSetDevice(s->device);
    for (int i = 0; i < cs->n_ev; i++) {
        cudaEventDestroy(cs->ev0[i]);
        cudaEventDestroy(cs->ev1[i]);
        cudaEventDestroy(cs->evpack[i]);
    }
    if (cs->it0)
        cudaEventDestroy(cs->it0);
    for (int k = 0; k < cs->n_gc; k++)
        if (cs->gc[k] && cs->gc[k] != cs->world)
            cs->failed ? ncclCommAbort(cs->gc[k]) : ncclCommDestroy(cs->gc[k]);
    if (cs->world)
        cs->failed ? ncclCommAbort(cs->world) : ncclCommDestroy(cs->world);
    for (int k = 1; k <= cs->n_made; k++)
        cudaStreamDestroy(cs->st[k]);
    for (int t = 0; t < s->n_t; t++) {
        if (cs->dbuf)
            cudaFree(cs->dbuf[t]);
        if (cs->dgrad)
            cudaFree(cs->dgrad[t]);
        if (cs->dm)
            cudaFree(cs->dm[t]);
        if (cs->dv)
            cudaFree(cs->dv[t]);
    }
    cudaFree(cs->scratch);
    cudaFree(cs->dloss);
    free(cs->dbuf);
    free(cs->dgrad);
    free(cs->dm);
    free(cs->dv);
    free(cs->ev0);
    free(cs->ev1);
    free(cs->evpack);
    free(cs->gc);
    ss_rt_devplan_clear(&cs->plan);
    if (cs->ctx)
        ss_cuda_ctx_release(cs->ctx);
    free(cs);
    s->bs = NULL;
}

/* A communicator over ranks[0..n) (ordered), this rank at index me. */
static ss_status comm_init(ss_rt_state *s, const ss_rt_comm *c, const int *ranks, int n, int me,
                           ncclComm_t *out, ss_diag *d)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (me == 0)
        NC("ncclGetUniqueId", ncclGetUniqueId(&id));
    if (n > 1) {
        if (!c->bcast)
            return ss_diag_set(d, SS_ERR_INVALID, "runtime: rank %d: the communicator has no "
                               "broadcast (needed for NCCL ids)", s->rank);
        ss_status st = c->bcast(c->ctx, ranks, n, &id, sizeof id, d);
        if (st != SS_OK)
            return st;
    }
    NC("ncclCommInitRank", ncclCommInitRank(out, n, id, me));
    return SS_OK;
}

static ss_status alloc_tensors(ss_rt_state *s, ss_diag *d)
{
    cstate *cs = s->bs;
    cs->dbuf = calloc((size_t)s->n_t + 1, sizeof *cs->dbuf);
    cs->dgrad = calloc((size_t)s->n_t + 1, sizeof *cs->dgrad);
    cs->dm = calloc((size_t)s->n_t + 1, sizeof *cs->dm);
    cs->dv = calloc((size_t)s->n_t + 1, sizeof *cs->dv);
    if (!cs->dbuf || !cs->dgrad || !cs->dm || !cs->dv)
        return ss_rt_nomem(d);
    for (int t = 0; t < s->n_t; t++) {
        const ss_tensor *T = ss_graph_tensor(s->g, t);
        size_t b = (size_t)s->vol[t] * ss_dtype_size(T->dtype), fb = (size_t)s->vol[t] * 4;
        CU("cudaMalloc", cudaMalloc(&cs->dbuf[t], b ? b : 4));
        CU("cudaMemcpy (weights and inputs to the GPU)",
           cudaMemcpy(cs->dbuf[t], s->buf[t], b, cudaMemcpyHostToDevice));
        if (s->grad[t]) {
            CU("cudaMalloc", cudaMalloc((void **)&cs->dgrad[t], fb ? fb : 4));
            CU("cudaMemset", cudaMemset(cs->dgrad[t], 0, fb));
        }
        if (s->adam && T->is_weight) {
            CU("cudaMalloc", cudaMalloc((void **)&cs->dm[t], fb ? fb : 4));
            CU("cudaMalloc", cudaMalloc((void **)&cs->dv[t], fb ? fb : 4));
            CU("cudaMemset", cudaMemset(cs->dm[t], 0, fb));
            CU("cudaMemset", cudaMemset(cs->dv[t], 0, fb));
        }
    }
    return SS_OK;
}

static ss_status cuda_prepare(ss_rt_state *s, const ss_rt_comm *c, ss_diag *d)
{
    int n = ss_cuda_device_count();
    if (s->device < 0 && n > 0)
        s->device = s->rank % n;
    if (s->device < 0 || s->device >= n)
        return ss_diag_set(d, SS_ERR_INVALID, "runtime: rank %d: GPU %d asked for, %d present",
                           s->rank, s->device, n);
    cstate *cs = calloc(1, sizeof *cs);
    if (!cs)
        return ss_rt_nomem(d);
    s->bs = cs;
    void *ctx = NULL;
    ss_status st = ss_cuda_ctx_get(s->device, &ctx, d);
    if (st != SS_OK)
        return st;
    cs->ctx = ctx;
    cs->st[0] = cs->ctx->stream;
    CU("cudaSetDevice", cudaSetDevice(s->device));
    if ((st = ss_rt_devplan_make(s, &cs->plan, d)) != SS_OK)
        return st;
    for (int k = 1; k < cs->plan.n_streams; k++) {
        CU("cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&cs->st[k], cudaStreamNonBlocking));
        cs->n_made = k;
    }
    if ((st = alloc_tensors(s, d)) != SS_OK)
        return st;
    for (int i = 0; i < s->n_tiles; i++) {
        ss_kargs *a = &s->tiles[i].a;
        if ((st = ss_kernel_alloc(a, SS_BACKEND_CUDA, s->device, a->seed, d)) != SS_OK)
            return st;
        if (a->ctx != ctx)
            return ss_diag_set(d, SS_ERR_INVALID, "runtime: rank %d: a tile's CUDA context is "
                               "not the run's (GPU %d)", s->rank, s->device);
    }
    if (cs->plan.scratch > 0)
        CU("cudaMalloc (scratch)", cudaMalloc((void **)&cs->scratch, (size_t)cs->plan.scratch * 4));
    CU("cudaMalloc", cudaMalloc((void **)&cs->dloss, sizeof(double)));
    int ns = cs->plan.n_steps;
    cs->ev0 = calloc((size_t)ns + 1, sizeof *cs->ev0);
    cs->ev1 = calloc((size_t)ns + 1, sizeof *cs->ev1);
    cs->evpack = calloc((size_t)ns + 1, sizeof *cs->evpack);
    cs->gc = calloc((size_t)cs->plan.n_groups + 1, sizeof *cs->gc);
    if (!cs->ev0 || !cs->ev1 || !cs->evpack || !cs->gc)
        return ss_rt_nomem(d);
    CU("cudaEventCreate", cudaEventCreate(&cs->it0));
    for (; cs->n_ev < ns; cs->n_ev++) { /* n_ev counts the steps whose three events exist */
        int i = cs->n_ev;
        cudaError_t e = cudaEventCreate(&cs->ev0[i]);
        if (e == cudaSuccess && (e = cudaEventCreate(&cs->ev1[i])) != cudaSuccess)
            cudaEventDestroy(cs->ev0[i]);
        if (e == cudaSuccess &&
            (e = cudaEventCreateWithFlags(&cs->evpack[i], cudaEventDisableTiming)) != cudaSuccess) {
            cudaEventDestroy(cs->ev0[i]);
            cudaEventDestroy(cs->ev1[i]);
        }
        CU("cudaEventCreate", e);
    }
    /* communicators: the world, then the groups in order of first use */
    int *all = malloc((size_t)s->size * sizeof *all);
    if (!all)
        return ss_rt_nomem(d);
    for (int r = 0; r < s->size; r++)
        all[r] = r;
    st = comm_init(s, c, all, s->size, s->rank, &cs->world, d);
    free(all);
    if (st != SS_OK)
        return cs->failed = 1, st;
    for (int k = 0; k < cs->plan.n_groups; k++, cs->n_gc++) {
        const int *gr = cs->plan.group_ranks + cs->plan.group_off[k];
        int gn = cs->plan.group_off[k + 1] - cs->plan.group_off[k], me = -1, whole = gn == s->size;
        for (int i = 0; i < gn; i++) {
            me = gr[i] == s->rank ? i : me;
            whole &= gr[i] == i;
        }
        if (me < 0)
            return ss_diag_set(d, SS_ERR_INVALID, "runtime: rank %d is not in its group %d", s->rank, k);
        if (whole)
            cs->gc[k] = cs->world;
        else if ((st = comm_init(s, c, gr, gn, me, &cs->gc[k], d)) != SS_OK)
            return cs->failed = 1, st;
    }
    CU("cudaDeviceSynchronize (prepare)", cudaDeviceSynchronize());
    return SS_OK;
}

/* ------------------------------------------------------------ steps */

/* The items of collective e laid end to end: for each item, the part of its
 * elements [a, b) within [lo, hi) of the whole, at `at` in the whole. */
static ss_status pack_coll(const ss_rt_state *s, const ss_rt_step *x, const ss_build_desc *e,
                           int unpack, ss_diag *d)
{
    cstate *cs = s->bs;
    float *buf = cs->scratch + x->scratch_off;
    if (x->call == SS_RT_CALL_ALLTOALL) { /* its transfers of this rank, in list order */
        int nx = ss_rt_a2a_xfers(s->tg, x->task, NULL);
        int *xs = malloc((size_t)(nx + 1) * sizeof *xs);
        if (!xs)
            return ss_rt_nomem(d);
        ss_rt_a2a_xfers(s->tg, x->task, xs);
        int64_t at = unpack ? x->lo : 0;
        ss_status st = SS_OK;
        for (int i = 0; i < nx && st == SS_OK; i++) {
            const ss_build_desc *t = &s->ds.t[xs[i]];
            if ((unpack ? t->dst : t->src) != s->rank)
                continue;
            st = reg_all(s, t->tensor, t->grad, &t->reg, buf + at,
                         !unpack ? SS_RTC_GATHER : t->grad ? SS_RTC_ADD : SS_RTC_SCATTER, 0, d);
            at += ss_region_volume(&t->reg);
        }
        free(xs);
        return st;
    }
    int me = 0;
    while (s->ds.devs[e->dev_off + me] != s->rank)
        me++;
    if (x->box_off >= 0) { /* sequence parallelism: each member's box, block k at count k */
        const ss_region *B = cs->plan.boxes + x->box_off;
        int rs = x->call == SS_RT_CALL_REDUCESCATTER, n = e->n_dev;
        /* reduce-scatter: send blocks 0 .. n-1, result at block n; all-gather: send at
         * block 0, member k's at block 1 + k */
        int k0 = rs ? (unpack ? me : 0) : (unpack ? 0 : me);
        int k1 = rs ? (unpack ? me + 1 : n) : (unpack ? n : me + 1);
        for (int k = k0; k < k1; k++) {
            float *at = buf + x->count * (rs ? (unpack ? n : k) : (unpack ? 1 + k : 0));
            for (int i = 0; i < e->n_item; i++) {
                const ss_region *r = &B[k * e->n_item + i];
                int64_t v = ss_region_volume(r);
                ss_status st = v == 0 ? SS_OK
                                      : reg_all(s, s->ds.items[e->item_off + i].tensor, e->grad, r,
                                                at, unpack ? SS_RTC_SCATTER : SS_RTC_GATHER, 0, d);
                if (st != SS_OK)
                    return st;
                at += v;
            }
        }
        return SS_OK;
    }
    if (x->call == SS_RT_CALL_REDUCESCATTER) {
        /* send block k (count each): member k's slices of every item, padded;
         * the result: this member's, after them */
        int64_t pad = 0;
        for (int i = 0; i < e->n_item; i++) {
            const ss_build_item *it = &s->ds.items[e->item_off + i];
            int64_t v = ss_region_volume(&it->reg), lo, hi;
            for (int k = unpack ? me : 0; k < (unpack ? me + 1 : e->n_dev); k++) {
                ss_rt_slice_of(v, k, e->n_dev, &lo, &hi);
                float *at = buf + x->count * (unpack ? e->n_dev : k) + pad;
                ss_status st = reg_copy(s, it->tensor, e->grad, &it->reg, lo, hi, at,
                                        unpack ? SS_RTC_SCATTER : SS_RTC_GATHER, 0, d);
                if (st != SS_OK)
                    return st;
            }
            pad += (v + e->n_dev - 1) / e->n_dev;
        }
        return SS_OK;
    }
    if (x->call == SS_RT_CALL_ALLGATHER) {
        int64_t pad = 0;
        for (int i = 0; i < e->n_item; i++) {
            const ss_build_item *it = &s->ds.items[e->item_off + i];
            int64_t v = ss_region_volume(&it->reg), lo, hi;
            for (int k = unpack ? 0 : me; k < (unpack ? e->n_dev : me + 1); k++) {
                ss_rt_slice_of(v, k, e->n_dev, &lo, &hi);
                float *at = unpack ? buf + x->count * (1 + k) + pad : buf + pad;
                ss_status st = reg_copy(s, it->tensor, e->grad, &it->reg, lo, hi, at,
                                        unpack ? SS_RTC_SCATTER : SS_RTC_GATHER, 0, d);
                if (st != SS_OK)
                    return st;
            }
            pad += (v + e->n_dev - 1) / e->n_dev;
        }
        return SS_OK;
    }
    if (x->zero_pad && !unpack)
        CU("cudaMemsetAsync", cudaMemsetAsync(buf, 0, (size_t)x->scratch_n * 4, cs->st[0]));
    int64_t at = 0;
    for (int i = 0; i < e->n_item; i++) {
        const ss_build_item *it = &s->ds.items[e->item_off + i];
        int64_t v = ss_region_volume(&it->reg), a = 0, b = v;
        if (x->zero_pad && !unpack)
            ss_rt_slice_of(v, me, e->n_dev, &a, &b); /* only my slice, zeros elsewhere */
        a = at + a > x->lo ? a : x->lo - at;
        b = at + b < x->hi ? b : x->hi - at;
        if (a < b) {
            ss_status st = reg_copy(s, it->tensor, e->grad, &it->reg, a, b, buf + (at + a - x->lo),
                                    unpack ? SS_RTC_SCATTER : SS_RTC_GATHER, 0, d);
            if (st != SS_OK)
                return st;
        }
        at += v;
    }
    return SS_OK;
}

/* Step j's result back into the tensors, on the compute stream. */
static ss_status lay_back(ss_rt_state *s, int j, ss_diag *d)
{
    cstate *cs = s->bs;
    const ss_rt_step *x = &cs->plan.steps[j];
    const ss_build_desc *e = &s->ds.t[x->task];
    if (x->stream != 0)
        CU("cudaStreamWaitEvent (lay back)", cudaStreamWaitEvent(cs->st[0], cs->ev1[j], 0));
    if (x->call == SS_RT_CALL_RECV)
        return reg_copy(s, e->tensor, e->grad, &e->reg, x->lo, x->hi,
                        cs->scratch + x->scratch_off, e->grad ? SS_RTC_ADD : SS_RTC_SCATTER, 0, d);
    return pack_coll(s, x, e, 1, d);
}

/* A send's or receive's NCCL type: token ids (i32) move as themselves. */
static ncclDataType_t nc_type(const ss_rt_step *x)
{
    return x->dtype == SS_I32 ? ncclInt32 : ncclFloat32;
}

static ncclComm_t comm_of(const cstate *cs, const ss_rt_step *x)
{
    return x->group >= 0 ? cs->gc[x->group] : cs->world;
}

/* An all-to-all's transfers as one NCCL group on the world communicator:
 * its sends (scratch from 0), its receives (from x->lo), in list order. */
static ss_status a2a_calls(ss_rt_state *s, const ss_rt_step *x, float *buf, cudaStream_t q,
                           ss_diag *d)
{
    cstate *cs = s->bs;
    int nx = ss_rt_a2a_xfers(s->tg, x->task, NULL);
    int *xs = malloc((size_t)(nx + 1) * sizeof *xs);
    if (!xs)
        return ss_rt_nomem(d);
    ss_rt_a2a_xfers(s->tg, x->task, xs);
    int64_t so = 0, ro = x->lo;
    ncclResult_t r = ncclGroupStart();
    for (int i = 0; i < nx && r == ncclSuccess; i++) {
        const ss_build_desc *t = &s->ds.t[xs[i]];
        size_t v = (size_t)ss_region_volume(&t->reg);
        if (t->src == s->rank) {
            r = ncclSend(buf + so, v, ncclFloat32, t->dst, cs->world, q);
            so += (int64_t)v;
        } else if (t->dst == s->rank) {
            r = ncclRecv(buf + ro, v, ncclFloat32, t->src, cs->world, q);
            ro += (int64_t)v;
        }
    }
    ncclResult_t r2 = ncclGroupEnd();
    free(xs);
    if (r != ncclSuccess)
        return cs->failed = 1, nc_fail(s, "ncclSend / ncclRecv (all-to-all)", r, d);
    if (r2 != ncclSuccess)
        return cs->failed = 1, nc_fail(s, "ncclGroupEnd (all-to-all)", r2, d);
    return SS_OK;
}

static ss_status comm_step(rt_iter *it, int i, ss_diag *d)
{
    ss_rt_state *s = it->s;
    cstate *cs = s->bs;
    const ss_rt_step *x = &cs->plan.steps[i];
    const ss_build_desc *e = &s->ds.t[x->task];
    cudaStream_t q = cs->st[x->stream];
    float *buf = cs->scratch + x->scratch_off;
    if (s->tg->kind[x->task] == SS_TASK_COLLECTIVE)
        it->ncoll++;
    else
        it->nxfer++;
    if (x->call == SS_RT_CALL_NONE || x->count == 0) {
        CU("cudaEventRecord", cudaEventRecord(cs->ev0[i], cs->st[0]));
        CU("cudaEventRecord", cudaEventRecord(cs->ev1[i], cs->st[0]));
        return SS_OK;
    }
    ss_status st = SS_OK;
    if (x->call == SS_RT_CALL_SEND)
        st = reg_copy(s, e->tensor, e->grad, &e->reg, x->lo, x->hi, buf, SS_RTC_GATHER, 0, d);
    else if (x->call != SS_RT_CALL_RECV)
        st = pack_coll(s, x, e, 0, d);
    if (st != SS_OK)
        return st;
    if (x->stream != 0) {
        CU("cudaEventRecord (packed)", cudaEventRecord(cs->evpack[i], cs->st[0]));
        CU("cudaStreamWaitEvent (packed)", cudaStreamWaitEvent(q, cs->evpack[i], 0));
    }
    CU("cudaEventRecord", cudaEventRecord(cs->ev0[i], q));
    size_t n = (size_t)x->count;
    switch (x->call) {
    case SS_RT_CALL_ALLREDUCE:
        NC("ncclAllReduce", ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, comm_of(cs, x), q));
        break;
    case SS_RT_CALL_ALLGATHER:
        NC("ncclAllGather", ncclAllGather(buf, buf + n, n, ncclFloat32, comm_of(cs, x), q));
        break;
    case SS_RT_CALL_REDUCESCATTER:
        NC("ncclReduceScatter", ncclReduceScatter(buf, buf + n * (size_t)e->n_dev, n, ncclFloat32,
                                                  ncclSum, comm_of(cs, x), q));
        break;
    case SS_RT_CALL_ALLTOALL:
        if ((st = a2a_calls(s, x, buf, q, d)) != SS_OK)
            return st;
        break;
    case SS_RT_CALL_SEND:
        NC("ncclGroupStart", ncclGroupStart());
        NC("ncclSend", ncclSend(buf, n, nc_type(x), x->peer, cs->world, q));
        NC("ncclGroupEnd", ncclGroupEnd());
        break;
    default:
        NC("ncclGroupStart", ncclGroupStart());
        NC("ncclRecv", ncclRecv(buf, n, nc_type(x), x->peer, cs->world, q));
        NC("ncclGroupEnd", ncclGroupEnd());
        break;
    }
    CU("cudaEventRecord", cudaEventRecord(cs->ev1[i], q));
    it->bytes += (double)n * sizeof(float);
    return x->lays_back && x->stream == 0 ? lay_back(s, i, d) : SS_OK;
}

static ss_status compute_step(rt_iter *it, int i, ss_diag *d)
{
    ss_rt_state *s = it->s;
    cstate *cs = s->bs;
    int task = cs->plan.steps[i].task;
    rt_tile *tl = &s->tiles[s->task_tile[task]];
    ss_kargs *a = &tl->a;
    const ss_op *op = ss_graph_op(s->g, tl->op);
    int red = ss_plan_config(s->p, tl->op)->red;
    ss_status st = SS_OK;
    CU("cudaEventRecord", cudaEventRecord(cs->ev0[i], cs->st[0]));
    if (s->tg->kind[task] == SS_TASK_FWD) {
        for (int xi = 0; xi < a->n_x && st == SS_OK; xi++)
            st = reg_all(s, ss_rt_operand_tensor(op, xi), 0, &a->xr[xi], a->x[xi], SS_RTC_GATHER, 0, d);
        if (st == SS_OK)
            st = ss_kernel_forward(SS_BACKEND_CUDA, a, d);
        for (int k = 0; k < a->n_y && st == SS_OK; k++)
            st = reg_all(s, op->outputs[k], 0, &a->yr[k], a->y[k],
                         red > 1 ? SS_RTC_ADD : SS_RTC_SCATTER, 0, d);
    } else {
        /* reorder_backward, as the CPU backend: the backward lays back the
         * input gradients, its deferred weight-gradient task (aux 1) the
         * weight gradients the backward kernel computed */
        int late = s->tg->aux[task] == 1;
        for (int k = 0; k < a->n_y && st == SS_OK && !late; k++)
            st = reg_all(s, op->outputs[k], 1, &a->yr[k], a->dy[k], SS_RTC_GATHER, 0, d);
        if (st == SS_OK && !late)
            st = ss_kernel_backward(SS_BACKEND_CUDA, a, d);
        for (int xi = 0; xi < a->n_x && st == SS_OK; xi++) {
            int t = ss_rt_operand_tensor(op, xi);
            if (!a->dx[xi] || !cs->dgrad[t] || (xi >= op->n_in && tl->q > 0) ||
                (xi < 32 && tl->dupdx >> xi & 1))
                continue; /* a weight's gradient, a summed copy: replica 0's only */
            if (tl->late && (xi >= op->n_in) != late)
                continue;
            st = reg_all(s, t, 1, &a->xr[xi], a->dx[xi], SS_RTC_ADD, 0, d);
        }
    }
    if (st != SS_OK && d) {
        char m[sizeof d->msg];
        memcpy(m, d->msg, sizeof m);
        d->status = SS_OK;
        ss_diag_set(d, st, "runtime: rank %d (GPU %d), op %s: %s", s->rank, s->device, op->name, m);
    }
    if (st != SS_OK)
        return cs->failed = 1, st;
    CU("cudaEventRecord", cudaEventRecord(cs->ev1[i], cs->st[0]));
    return SS_OK;
}

static ss_status update_step(rt_iter *it, int i, ss_diag *d)
{
    ss_rt_state *s = it->s;
    cstate *cs = s->bs;
    int task = cs->plan.steps[i].task;
    const ss_build_desc *e = &s->ds.t[task];
    int64_t lo, hi;
    ss_rt_slice_of(ss_region_volume(&e->reg), e->split_k, e->split_n, &lo, &hi);
    ss_rtc_geom g = geom(s, e->tensor, &e->reg);
    CU("cudaEventRecord", cudaEventRecord(cs->ev0[i], cs->st[0]));
    RG("update kernel launch",
       ss_rtc_update(cs->st[0], cs->dbuf[e->tensor], cs->dgrad[e->tensor],
                     s->adam ? cs->dm[e->tensor] : NULL, s->adam ? cs->dv[e->tensor] : NULL, &g,
                     lo, hi, it->lr, 1 - pow(0.9, s->step), 1 - pow(0.999, s->step)));
    CU("cudaEventRecord", cudaEventRecord(cs->ev1[i], cs->st[0]));
    return SS_OK;
}

/* ------------------------------------------------------------ iteration */

/* As the CPU backend: zero what the iteration accumulates into, seed the
 * loss gradient 1 / elements over the loss tiles' regions here. */
static ss_status start(ss_rt_state *s, ss_diag *d)
{
    cstate *cs = s->bs;
    ss_status st = SS_OK;
    for (int i = 0; i < s->n_tiles && st == SS_OK; i++) {
        const rt_tile *tl = &s->tiles[i];
        const ss_op *op = ss_graph_op(s->g, tl->op);
        int red = ss_plan_config(s->p, tl->op)->red;
        for (int xi = 0; xi < tl->a.n_x && st == SS_OK; xi++) {
            int t = ss_rt_operand_tensor(op, xi);
            if (cs->dgrad[t])
                st = reg_all(s, t, 1, &tl->a.xr[xi], NULL, SS_RTC_FILL, 0, d);
        }
        for (int k = 0; k < tl->a.n_y && st == SS_OK; k++) {
            st = reg_all(s, op->outputs[k], 1, &tl->a.yr[k], NULL, SS_RTC_FILL, 0, d);
            if (st == SS_OK && red > 1)
                st = reg_all(s, op->outputs[k], 0, &tl->a.yr[k], NULL, SS_RTC_FILL, 0, d);
        }
    }
    for (int i = 0; i < s->n_tiles && st == SS_OK; i++) {
        const rt_tile *tl = &s->tiles[i];
        const ss_op *op = ss_graph_op(s->g, tl->op);
        for (int k = 0; k < op->n_out && st == SS_OK; k++) {
            int t = op->outputs[k];
            if (ss_graph_n_consumers(s->g, t) == 0 && cs->dgrad[t])
                st = reg_all(s, t, 1, &tl->a.yr[k], NULL, SS_RTC_FILL,
                             (float)(1.0 / (double)s->vol[t]), d);
        }
    }
    return st;
}

static ss_status flush(ss_rt_state *s, int off, int n, ss_diag *d)
{
    cstate *cs = s->bs;
    for (int k = 0; k < n; k++) {
        ss_status st = lay_back(s, cs->plan.flush[off + k], d);
        if (st != SS_OK)
            return st;
    }
    return SS_OK;
}

/* Per step: its events' times into the iteration's figures and trace. */
static ss_status timings(rt_iter *it, ss_diag *d)
{
    ss_rt_state *s = it->s;
    cstate *cs = s->bs;
    for (int i = 0; i < cs->plan.n_steps; i++) {
        const ss_rt_step *x = &cs->plan.steps[i];
        float a = 0, b = 0;
        CU("cudaEventElapsedTime", cudaEventElapsedTime(&a, cs->it0, cs->ev0[i]));
        CU("cudaEventElapsedTime", cudaEventElapsedTime(&b, cs->it0, cs->ev1[i]));
        int k = s->tg->kind[x->task], comm = k == SS_TASK_XFER || k == SS_TASK_COLLECTIVE;
        if (comm)
            it->comm_ms += b - a;
        else
            it->comp_ms += b - a, it->comp_cpu_ms += b - a;
        ss_rt_record(it, x->task, x->stream, it->t0 + a, it->t0 + b,
                     comm ? (double)x->count * sizeof(float) : 0, 1);
    }
    return SS_OK;
}

static ss_status cuda_iteration(rt_iter *it, ss_diag *d)
{
    ss_rt_state *s = it->s;
    cstate *cs = s->bs;
    const ss_rt_devplan *p = &cs->plan;
    CU("cudaSetDevice", cudaSetDevice(s->device));
    CU("cudaEventRecord (iteration start)", cudaEventRecord(cs->it0, cs->st[0]));
    for (int k = 1; k < p->n_streams; k++)
        CU("cudaStreamWaitEvent (iteration start)", cudaStreamWaitEvent(cs->st[k], cs->it0, 0));
    ss_status st = start(s, d);
    s->step++;
    for (int i = 0; i < p->n_steps && st == SS_OK; i++) {
        const ss_rt_step *x = &p->steps[i];
        if ((st = flush(s, x->flush_off, x->n_flush, d)) != SS_OK)
            break;
        switch ((ss_task_kind)s->tg->kind[x->task]) {
        case SS_TASK_FWD:
        case SS_TASK_BWD:
            st = compute_step(it, i, d);
            break;
        case SS_TASK_UPDATE:
            st = update_step(it, i, d);
            break;
        case SS_TASK_XFER:
        case SS_TASK_COLLECTIVE:
            st = comm_step(it, i, d);
            break;
        default:
            CU("cudaEventRecord", cudaEventRecord(cs->ev0[i], cs->st[0]));
            CU("cudaEventRecord", cudaEventRecord(cs->ev1[i], cs->st[0]));
            break;
        }
    }
    if (st == SS_OK)
        st = flush(s, p->end_off, p->n_end, d);
    if (st != SS_OK)
        return cs->failed = 1, st;
    for (int k = 0; k < p->n_streams; k++)
        CU("cudaStreamSynchronize (iteration end)", cudaStreamSynchronize(cs->st[k]));
    ncclResult_t ae = ncclSuccess;
    for (int k = -1; k < cs->n_gc && ae == ncclSuccess; k++)
        NC("ncclCommGetAsyncError", ncclCommGetAsyncError(k < 0 ? cs->world : cs->gc[k], &ae));
    if (ae != ncclSuccess)
        return cs->failed = 1, nc_fail(s, "an NCCL call of the iteration (async)", ae, d);
    return timings(it, d);
}

/* The loss elements this rank owns, summed on the GPU, then over the ranks
 * with NCCL (the world communicator: this runs NCCL on one rank too). */
static ss_status cuda_loss(rt_iter *it, double *sum, ss_diag *d)
{
    ss_rt_state *s = it->s;
    cstate *cs = s->bs;
    CU("cudaMemsetAsync", cudaMemsetAsync(cs->dloss, 0, sizeof(double), cs->st[0]));
    for (int i = 0; i < s->n_tiles; i++) {
        const rt_tile *tl = &s->tiles[i];
        if (!ss_rt_loss_owner(s, tl))
            continue;
        int t = ss_graph_op(s->g, tl->op)->outputs[0];
        ss_rtc_geom g = geom(s, t, &tl->a.yr[0]);
        RG("loss sum kernel launch", ss_rtc_sum(cs->st[0], cs->dbuf[t], &g, cs->dloss));
    }
    NC("ncclAllReduce (loss)",
       ncclAllReduce(cs->dloss, cs->dloss, 1, ncclFloat64, ncclSum, cs->world, cs->st[0]));
    CU("cudaMemcpyAsync (loss)",
       cudaMemcpyAsync(sum, cs->dloss, sizeof(double), cudaMemcpyDeviceToHost, cs->st[0]));
    CU("cudaStreamSynchronize (loss)", cudaStreamSynchronize(cs->st[0]));
    return SS_OK;
}

static ss_status cuda_readback(ss_rt_state *s, ss_diag *d)
{
    cstate *cs = s->bs;
    CU("cudaSetDevice", cudaSetDevice(s->device));
    CU("cudaDeviceSynchronize", cudaDeviceSynchronize());
    for (int t = 0; t < s->n_t; t++) {
        size_t b = (size_t)s->vol[t] * ss_dtype_size(ss_graph_tensor(s->g, t)->dtype);
        CU("cudaMemcpy (tensors from the GPU)",
           cudaMemcpy(s->buf[t], cs->dbuf[t], b, cudaMemcpyDeviceToHost));
    }
    return SS_OK;
}

static const rt_backend cuda_backend = {"cuda", cuda_prepare, cuda_iteration, cuda_loss,
                                        cuda_readback, cuda_release};

const rt_backend *ss_rt_cuda_backend(void) { return &cuda_backend; }
