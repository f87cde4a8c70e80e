/*
 * kernels_dnn.cu — conv2d, pool2d and batchnorm on CUDA through cuDNN's
 * legacy API (built with SS_HAVE_CUDNN), with the CPU kernels' tile rules
 * (kernels/cpu_gemm.c, cpu_elem.c). cuDNN pads symmetrically, so a tile
 * runs when its halo is a symmetric padding that gives exactly the tile's
 * output rows and columns (whole ops, and splits of samples, channels and
 * the contraction); other spatial tiles are refused as unsupported.
 * Grouped convolutions need tiles of whole groups. Convolutions pick
 * cuDNN's heuristic algorithm that fits a fixed workspace (WS_BYTES);
 * batchnorm keeps its statistics in float (cuDNN's parameter type for
 * half data) and converts gamma/beta and their gradients.
 */
#include "kernels/cuda/common.cuh"

#ifdef SS_HAVE_CUDNN

#define WS_BYTES ((size_t)64 << 20)

static cudnnHandle_t dnn(const ss_kargs *a) { return ((ss_cuda_ctx *)a->ctx)->dnn; }

static cudnnDataType_t ddt(ss_dtype t)
{
    return t == SS_F16 ? CUDNN_DATA_HALF : t == SS_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

/* Local geometry of a conv/pool tile; ph, pw: the symmetric padding its halo implies. */
typedef struct geo {
    int N, C, H, W, O, Ho, Wo, kh, kw, sh, sw, ph, pw, groups, cg;
} geo;

static void get_geo(const ss_kargs *a, geo *g)
{
    const ss_op_attrs *at = &a->op->attrs;
    const ss_region *xr = &a->xr[0], *yr = &a->yr[0];
    g->N = (int)ext(yr, 0);
    g->C = (int)ext(xr, 1);
    g->H = (int)ext(xr, 2);
    g->W = (int)ext(xr, 3);
    g->O = (int)ext(yr, 1);
    g->Ho = (int)ext(yr, 2);
    g->Wo = (int)ext(yr, 3);
    g->kh = (int)at->kernel[0];
    g->kw = (int)at->kernel[1];
    g->sh = at->stride[0] > 0 ? (int)at->stride[0] : 1;
    g->sw = at->stride[1] > 0 ? (int)at->stride[1] : 1;
    g->ph = (int)(at->pad[0] + xr->r[2].lo - a->t.out.r[2].lo * g->sh);
    g->pw = (int)(at->pad[1] + xr->r[3].lo - a->t.out.r[3].lo * g->sw);
    g->groups = 1;
    g->cg = g->C;
    if (a->op->type == SS_OP_CONV2D && at->groups > 1) {
        const ss_tensor *y = ss_graph_tensor(a->g, a->op->outputs[0]);
        int64_t og = y->shape[1] / at->groups;
        g->groups = (int)(g->O / og);
        g->cg = g->groups ? g->C / g->groups : g->C;
    }
}

static ss_status window_ok(const ss_kargs *a, const geo *g, ss_diag *d)
{
    int ho = g->ph >= 0 ? (g->H + 2 * g->ph - g->kh) / g->sh + 1 : -1;
    int wo = g->pw >= 0 ? (g->W + 2 * g->pw - g->kw) / g->sw + 1 : -1;
    if (ho != g->Ho || wo != g->Wo)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "kernels: cuda %s '%s': this tile's halo is "
                           "not a symmetric padding (cuDNN pads symmetrically)",
                           ss_op_type_name(a->op->type), a->op->name);
    return SS_OK;
}

static void tensor4(cudnnTensorDescriptor_t *t, ss_dtype dt, int n, int c, int h, int w)
{
    cudnnCreateTensorDescriptor(t);
    cudnnSetTensor4dDescriptor(*t, CUDNN_TENSOR_NCHW, ddt(dt), n, c, h, w);
}

/* --------------------------------------------------------------- conv2d */

static ss_status conv_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    geo g;
    get_geo(a, &g);
    const ss_op_attrs *at = &a->op->attrs;
    if (at->groups > 1) {
        const ss_tensor *y = ss_graph_tensor(a->g, a->op->outputs[0]);
        int64_t og = y->shape[1] / at->groups;
        if (a->t.out.r[1].lo % og || g.O % og)
            return ss_diag_set(d, SS_ERR_UNSUPPORTED, "kernels: cuda conv2d '%s': a tile of "
                               "part of a channel group", a->op->name);
    }
    *saved = 0;
    *work = WS_BYTES;
    return window_ok(a, &g, d);
}

typedef struct cdesc {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t c;
} cdesc;

static void conv_desc(const ss_kargs *a, const geo *g, cdesc *c)
{
    tensor4(&c->x, a->dtype, g->N, g->C, g->H, g->W);
    tensor4(&c->y, a->dtype, g->N, g->O, g->Ho, g->Wo);
    cudnnCreateFilterDescriptor(&c->w);
    cudnnSetFilter4dDescriptor(c->w, ddt(a->dtype), CUDNN_TENSOR_NCHW, g->O, g->cg, g->kh, g->kw);
    cudnnCreateConvolutionDescriptor(&c->c);
    cudnnSetConvolution2dDescriptor(c->c, g->ph, g->pw, g->sh, g->sw, 1, 1,
                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    cudnnSetConvolutionGroupCount(c->c, g->groups);
    cudnnSetConvolutionMathType(c->c, a->dtype == SS_F32 ? CUDNN_DEFAULT_MATH
                                                         : CUDNN_TENSOR_OP_MATH);
}

static void conv_free(cdesc *c)
{
    cudnnDestroyTensorDescriptor(c->x);
    cudnnDestroyTensorDescriptor(c->y);
    cudnnDestroyFilterDescriptor(c->w);
    cudnnDestroyConvolutionDescriptor(c->c);
}

/* y[n, o, p] += b[o] (dir 0); db[o] = sum dy[n, o, p] (dir 1) */
template <typename T>
__global__ void chan_bias_k(T *y, T *db, const T *b, int64_t N, int64_t O, int64_t P, int on)
{
    if (!db) {
        for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * O * P;
             i += (int64_t)gridDim.x * blockDim.x)
            st(y, i, ld(y, i) + ld(b, (i / P) % O));
        return;
    }
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < O;
         o += (int64_t)gridDim.x * blockDim.x) {
        float s = 0;
        for (int64_t n = 0; on && n < N; n++)
            for (int64_t p = 0; p < P; p++)
                s += ld(y, (n * O + o) * P + p);
        st(db, o, s);
    }
}

template <typename T> static void chan_bias(const ss_kargs *a, void *y, void *db, const void *b,
                                            const geo *g, int on)
{
    int64_t P = (int64_t)g->Ho * g->Wo, n = db ? g->O : (int64_t)g->N * g->O * P;
    chan_bias_k<T><<<nblocks(n), TPB, 0, S(a)>>>((T *)y, (T *)db, (const T *)b, g->N, g->O, P, on);
}

static void conv_fwd(const ss_kargs *a)
{
    geo g;
    get_geo(a, &g);
    cdesc c;
    conv_desc(a, &g, &c);
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    int n = 0;
    cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    if (cudnnGetConvolutionForwardAlgorithm_v7(dnn(a), c.x, c.w, c.c, c.y, 8, &n, perf) ==
        CUDNN_STATUS_SUCCESS)
        for (int i = 0; i < n; i++)
            if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= WS_BYTES) {
                algo = perf[i].algo;
                break;
            }
    float one = 1, zero = 0;
    cudnnConvolutionForward(dnn(a), &one, c.x, a->x[0], c.w, a->x[1], c.c, algo, a->work,
                            WS_BYTES, &zero, c.y, a->y[0]);
    if (a->op->n_w > 1 && a->t.red.lo == 0)
        DISPATCH(a->dtype, chan_bias, a, a->y[0], NULL, a->x[2], &g, 1);
    conv_free(&c);
}

static void conv_bwd(const ss_kargs *a)
{
    geo g;
    get_geo(a, &g);
    cdesc c;
    conv_desc(a, &g, &c);
    float one = 1, zero = 0;
    int n = 0;
    if (a->dx[0]) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[8];
        cudnnConvolutionBwdDataAlgo_t algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
        if (cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn(a), c.w, c.y, c.c, c.x, 8, &n, perf) ==
            CUDNN_STATUS_SUCCESS)
            for (int i = 0; i < n; i++)
                if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= WS_BYTES) {
                    algo = perf[i].algo;
                    break;
                }
        cudnnConvolutionBackwardData(dnn(a), &one, c.w, a->x[1], c.y, a->dy[0], c.c, algo,
                                     a->work, WS_BYTES, &zero, c.x, a->dx[0]);
    }
    if (a->dx[1]) {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[8];
        cudnnConvolutionBwdFilterAlgo_t algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
        if (cudnnGetConvolutionBackwardFilterAlgorithm_v7(dnn(a), c.x, c.y, c.c, c.w, 8, &n,
                                                          perf) == CUDNN_STATUS_SUCCESS)
            for (int i = 0; i < n; i++)
                if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= WS_BYTES) {
                    algo = perf[i].algo;
                    break;
                }
        cudnnConvolutionBackwardFilter(dnn(a), &one, c.x, a->x[0], c.y, a->dy[0], c.c, algo,
                                       a->work, WS_BYTES, &zero, c.w, a->dx[1]);
    }
    if (a->op->n_w > 1 && a->dx[2])
        DISPATCH(a->dtype, chan_bias, a, a->dy[0], a->dx[2], NULL, &g, a->t.red.lo == 0);
    conv_free(&c);
}

const ss_kernel ss_cuda_conv2d = {FLOATS, conv_sizes, conv_fwd, conv_bwd};

/* --------------------------------------------------------------- pool2d */

static ss_status pool_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    geo g;
    get_geo(a, &g);
    *saved = *work = 0;
    return window_ok(a, &g, d);
}

typedef struct pdesc {
    cudnnTensorDescriptor_t x, y;
    cudnnPoolingDescriptor_t p;
} pdesc;

static void pool_desc(const ss_kargs *a, const geo *g, pdesc *p)
{
    tensor4(&p->x, a->dtype, g->N, g->O, g->H, g->W);
    tensor4(&p->y, a->dtype, g->N, g->O, g->Ho, g->Wo);
    cudnnCreatePoolingDescriptor(&p->p);
    cudnnSetPooling2dDescriptor(p->p, a->op->attrs.pool == SS_POOL_MAX
                                          ? CUDNN_POOLING_MAX
                                          : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                                CUDNN_NOT_PROPAGATE_NAN, g->kh, g->kw, g->ph, g->pw, g->sh, g->sw);
}

static void pool_free(pdesc *p)
{
    cudnnDestroyTensorDescriptor(p->x);
    cudnnDestroyTensorDescriptor(p->y);
    cudnnDestroyPoolingDescriptor(p->p);
}

static void pool_fwd(const ss_kargs *a)
{
    geo g;
    get_geo(a, &g);
    pdesc p;
    pool_desc(a, &g, &p);
    float one = 1, zero = 0;
    cudnnPoolingForward(dnn(a), p.p, &one, p.x, a->x[0], &zero, p.y, a->y[0]);
    pool_free(&p);
}

static void pool_bwd(const ss_kargs *a)
{
    geo g;
    get_geo(a, &g);
    pdesc p;
    pool_desc(a, &g, &p);
    float one = 1, zero = 0;
    if (a->dx[0])
        cudnnPoolingBackward(dnn(a), p.p, &one, p.y, a->y[0], p.y, a->dy[0], p.x, a->x[0], &zero,
                             p.x, a->dx[0]);
    pool_free(&p);
}

const ss_kernel ss_cuda_pool2d = {FLOATS, pool_sizes, pool_fwd, pool_bwd};

/* ------------------------------------------------------------ batchnorm */

/* saved: mean and inverse std per channel (float); work: gamma, beta,
 * dgamma, dbeta in float */
static ss_status bn_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    (void)d;
    int64_t C = ext(&a->yr[0], 1);
    *saved = (size_t)(2 * C) * sizeof(float);
    *work = (size_t)(4 * C) * sizeof(float);
    return SS_OK;
}

typedef struct bdesc {
    cudnnTensorDescriptor_t x, p;
} bdesc;

static void bn_desc(const ss_kargs *a, bdesc *b)
{
    const ss_region *r = &a->yr[0];
    tensor4(&b->x, a->dtype, (int)ext(r, 0), (int)ext(r, 1), (int)ext(r, 2), (int)ext(r, 3));
    cudnnCreateTensorDescriptor(&b->p);
    cudnnDeriveBNTensorDescriptor(b->p, b->x, CUDNN_BATCHNORM_SPATIAL);
}

template <typename T> static void bn_f(const ss_kargs *a)
{
    int64_t C = ext(&a->yr[0], 1);
    float *gf = (float *)a->work, *bf = gf + C, *mean = (float *)a->saved, *inv = mean + C;
    to_f32<T><<<nblocks(C), TPB, 0, S(a)>>>(gf, (const T *)a->x[1], C);
    to_f32<T><<<nblocks(C), TPB, 0, S(a)>>>(bf, (const T *)a->x[2], C);
    bdesc b;
    bn_desc(a, &b);
    float one = 1, zero = 0;
    cudnnBatchNormalizationForwardTraining(dnn(a), CUDNN_BATCHNORM_SPATIAL, &one, &zero, b.x,
                                           a->x[0], b.x, a->y[0], b.p, gf, bf, 0.0, NULL, NULL,
                                           1e-5, mean, inv);
    cudnnDestroyTensorDescriptor(b.x);
    cudnnDestroyTensorDescriptor(b.p);
}

template <typename T> static void bn_b(const ss_kargs *a)
{
    int64_t C = ext(&a->yr[0], 1);
    float *gf = (float *)a->work, *dg = gf + 2 * C, *db = gf + 3 * C;
    const float *mean = (const float *)a->saved, *inv = mean + C;
    bdesc b;
    bn_desc(a, &b);
    float one = 1, zero = 0;
    cudnnBatchNormalizationBackward(dnn(a), CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero,
                                    b.x, a->x[0], b.x, a->dy[0], b.x, a->dx[0], b.p, gf, dg, db,
                                    1e-5, mean, inv);
    if (a->dx[1])
        from_f32<T><<<nblocks(C), TPB, 0, S(a)>>>((T *)a->dx[1], dg, C);
    if (a->dx[2])
        from_f32<T><<<nblocks(C), TPB, 0, S(a)>>>((T *)a->dx[2], db, C);
    cudnnDestroyTensorDescriptor(b.x);
    cudnnDestroyTensorDescriptor(b.p);
}

static void bn_fwd(const ss_kargs *a) { DISPATCH(a->dtype, bn_f, a); }
static void bn_bwd(const ss_kargs *a) { DISPATCH(a->dtype, bn_b, a); }

const ss_kernel ss_cuda_batchnorm = {FLOATS, bn_sizes, bn_fwd, bn_bwd};

#endif /* SS_HAVE_CUDNN */
