/*
 * kernels_seq.cu — the CUDA kernels of fused multi-head attention and the
 * LSTM, composed of cuBLAS GEMMs (common.cuh) and small kernels, with the
 * CPU kernels' layouts and tile rules (kernels/cpu_gemm.c): attention saves
 * Q, K, V, the probabilities P and the context C; the LSTM saves per step
 * [x_t, h_{t-1}], the activated gates and c_t, and needs the whole hidden
 * state in its tile. Float accumulation; element storage in the op's dtype.
 */
#include "kernels/cuda/common.cuh"

/* ---------------------------------------------------------------- attention */

typedef struct ageo {
    int64_t N, Sq, Sk, E, Et, hl, dh, Er, qlo, klo;
    int bias, causal;
    float scale;
} ageo;

static void attn_geo(const ss_kargs *a, ageo *g)
{
    const ss_tensor *o = ss_graph_tensor(a->g, a->op->outputs[0]);
    g->N = ext(&a->yr[0], 0);
    g->Sq = ext(&a->yr[0], 1);
    g->Et = ext(&a->yr[0], 2);
    g->Sk = ext(&a->xr[1], 1);
    g->E = ext(&a->xr[0], 2);
    g->hl = a->t.red.hi - a->t.red.lo;
    g->dh = o->shape[2] / a->op->attrs.heads;
    g->Er = g->hl * g->dh;
    g->qlo = a->t.out.r[1].lo;
    g->klo = a->xr[1].r[1].lo;
    g->bias = a->op->n_w > 4;
    g->causal = a->op->attrs.causal;
    g->scale = 1.0f / sqrtf((float)g->dh);
}

static size_t esz(const ss_kargs *a) { return ss_dtype_size(a->dtype); }

static ss_status attn_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    (void)d;
    ageo g;
    attn_geo(a, &g);
    *saved = (size_t)(2 * g.N * g.Sq * g.Er + 2 * g.N * g.Sk * g.Er + g.N * g.hl * g.Sq * g.Sk) *
             esz(a);
    *work = (size_t)(2 * g.N * g.Sq * g.Er + 2 * g.N * g.Sk * g.Er + g.hl * g.Sq * g.Sk) * esz(a);
    return SS_OK;
}

/* rows of P (already scaled scores): causal mask by global positions, softmax */
template <typename T>
__global__ void attn_softmax_k(T *P, int64_t rows, int64_t Sq, int64_t Sk, int causal,
                               int64_t qlo, int64_t klo)
{
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows;
         r += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = r % Sq, lim = causal ? qlo + i - klo + 1 : Sk;
        if (lim > Sk)
            lim = Sk;
        T *p = P + r * Sk;
        float mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < lim; j++)
            mx = fmaxf(mx, ld(p, j));
        for (int64_t j = 0; j < lim; j++)
            s += expf(ld(p, j) - mx);
        for (int64_t j = 0; j < Sk; j++)
            st(p, j, j < lim && s > 0 ? expf(ld(p, j) - mx) / s : 0.0f);
    }
}

/* dS = P * (dP - rowsum(dP * P)), in place in dP */
template <typename T>
__global__ void attn_dsoft_k(T *dP, const T *P, int64_t rows, int64_t Sk)
{
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows;
         r += (int64_t)gridDim.x * blockDim.x) {
        float s = 0;
        for (int64_t j = 0; j < Sk; j++)
            s += ld(dP, r * Sk + j) * ld(P, r * Sk + j);
        for (int64_t j = 0; j < Sk; j++)
            st(dP, r * Sk + j, ld(P, r * Sk + j) * (ld(dP, r * Sk + j) - s));
    }
}

template <typename T> static void attn_f(const ss_kargs *a)
{
    ageo g;
    attn_geo(a, &g);
    T *Q = (T *)a->saved, *K = Q + g.N * g.Sq * g.Er, *V = K + g.N * g.Sk * g.Er;
    T *P = V + g.N * g.Sk * g.Er, *C = P + g.N * g.hl * g.Sq * g.Sk;
    gemm(a, 0, 0, g.N * g.Sq, g.Er, g.E, 1, a->x[0], g.E, 0, a->x[3], g.Er, 0, 0, Q, g.Er, 0, 1);
    gemm(a, 0, 0, g.N * g.Sk, g.Er, g.E, 1, a->x[1], g.E, 0, a->x[4], g.Er, 0, 0, K, g.Er, 0, 1);
    gemm(a, 0, 0, g.N * g.Sk, g.Er, g.E, 1, a->x[2], g.E, 0, a->x[5], g.Er, 0, 0, V, g.Er, 0, 1);
    if (g.bias) {
        add_bias<T>(a, Q, a->x[7], g.N * g.Sq, g.Er);
        add_bias<T>(a, K, a->x[8], g.N * g.Sk, g.Er);
        add_bias<T>(a, V, a->x[9], g.N * g.Sk, g.Er);
    }
    for (int64_t n = 0; n < g.N; n++) {
        T *Pn = P + n * g.hl * g.Sq * g.Sk;
        /* per head h (batch, stride dh in Q/K, Sq*Sk in P): P_h = scale Q_h K_h^T */
        gemm(a, 0, 1, g.Sq, g.Sk, g.dh, g.scale, Q + n * g.Sq * g.Er, g.Er, g.dh,
             K + n * g.Sk * g.Er, g.Er, g.dh, 0, Pn, g.Sk, g.Sq * g.Sk, g.hl);
        attn_softmax_k<T><<<nblocks(g.hl * g.Sq), TPB, 0, S(a)>>>(Pn, g.hl * g.Sq, g.Sq, g.Sk,
                                                                  g.causal, g.qlo, g.klo);
        gemm(a, 0, 0, g.Sq, g.dh, g.Sk, 1, Pn, g.Sk, g.Sq * g.Sk, V + n * g.Sk * g.Er, g.Er, g.dh,
             0, C + n * g.Sq * g.Er, g.Er, g.dh, g.hl);
    }
    gemm(a, 0, 0, g.N * g.Sq, g.Et, g.Er, 1, C, g.Er, 0, a->x[6], g.Et, 0, 0, a->y[0], g.Et, 0, 1);
    if (g.bias && a->t.red.lo == 0)
        add_bias<T>(a, a->y[0], a->x[10], g.N * g.Sq, g.Et);
}

template <typename T> static void attn_b(const ss_kargs *a)
{
    ageo g;
    attn_geo(a, &g);
    T *Q = (T *)a->saved, *K = Q + g.N * g.Sq * g.Er, *V = K + g.N * g.Sk * g.Er;
    T *P = V + g.N * g.Sk * g.Er, *C = P + g.N * g.hl * g.Sq * g.Sk;
    T *dC = (T *)a->work, *dQ = dC + g.N * g.Sq * g.Er, *dK = dQ + g.N * g.Sq * g.Er;
    T *dV = dK + g.N * g.Sk * g.Er, *dP = dV + g.N * g.Sk * g.Er;
    if (a->dx[6])
        gemm(a, 1, 0, g.Er, g.Et, g.N * g.Sq, 1, C, g.Er, 0, a->dy[0], g.Et, 0, 0, a->dx[6], g.Et,
             0, 1);
    if (g.bias && a->dx[10])
        col_sum<T>(a, a->dx[10], a->dy[0], g.N * g.Sq, g.Et, a->t.red.lo == 0);
    gemm(a, 0, 1, g.N * g.Sq, g.Er, g.Et, 1, a->dy[0], g.Et, 0, a->x[6], g.Et, 0, 0, dC, g.Er, 0, 1);
    for (int64_t n = 0; n < g.N; n++) {
        T *Pn = P + n * g.hl * g.Sq * g.Sk, *dCn = dC + n * g.Sq * g.Er;
        gemm(a, 0, 1, g.Sq, g.Sk, g.dh, 1, dCn, g.Er, g.dh, V + n * g.Sk * g.Er, g.Er, g.dh, 0, dP,
             g.Sk, g.Sq * g.Sk, g.hl);
        gemm(a, 1, 0, g.Sk, g.dh, g.Sq, 1, Pn, g.Sk, g.Sq * g.Sk, dCn, g.Er, g.dh, 0,
             dV + n * g.Sk * g.Er, g.Er, g.dh, g.hl);
        attn_dsoft_k<T><<<nblocks(g.hl * g.Sq), TPB, 0, S(a)>>>(dP, Pn, g.hl * g.Sq, g.Sk);
        gemm(a, 0, 0, g.Sq, g.dh, g.Sk, g.scale, dP, g.Sk, g.Sq * g.Sk, K + n * g.Sk * g.Er, g.Er,
             g.dh, 0, dQ + n * g.Sq * g.Er, g.Er, g.dh, g.hl);
        gemm(a, 1, 0, g.Sk, g.dh, g.Sq, g.scale, dP, g.Sk, g.Sq * g.Sk, Q + n * g.Sq * g.Er, g.Er,
             g.dh, 0, dK + n * g.Sk * g.Er, g.Er, g.dh, g.hl);
    }
    const T *dproj[3] = {dQ, dK, dV};
    int64_t rows[3] = {g.N * g.Sq, g.N * g.Sk, g.N * g.Sk};
    for (int i = 0; i < 3; i++) {
        if (a->dx[3 + i])
            gemm(a, 1, 0, g.E, g.Er, rows[i], 1, a->x[i], g.E, 0, dproj[i], g.Er, 0, 0,
                 a->dx[3 + i], g.Er, 0, 1);
        if (g.bias && a->dx[7 + i])
            col_sum<T>(a, a->dx[7 + i], dproj[i], rows[i], g.Er, 1);
        if (a->dx[i])
            gemm(a, 0, 1, rows[i], g.E, g.Er, 1, dproj[i], g.Er, 0, a->x[3 + i], g.Er, 0, 0,
                 a->dx[i], g.E, 0, 1);
    }
}

static void attn_fwd(const ss_kargs *a) { DISPATCH(a->dtype, attn_f, a); }
static void attn_bwd(const ss_kargs *a) { DISPATCH(a->dtype, attn_b, a); }

const ss_kernel ss_cuda_attention = {FLOATS, attn_sizes, attn_fwd, attn_bwd};

/* --------------------------------------------------------------------- lstm */

typedef struct lgeo {
    int64_t N, S, in, H, XH;
    int cell, seq_out;
} lgeo;

static void lstm_geo(const ss_kargs *a, lgeo *l)
{
    const ss_op_attrs *at = &a->op->attrs;
    l->cell = at->lstm_mode == SS_LSTM_CELL;
    l->N = ext(&a->xr[0], 0);
    l->S = l->cell ? 1 : ext(&a->xr[0], 1);
    l->in = ext(&a->xr[0], a->xr[0].ndim - 1);
    l->H = at->hidden;
    l->XH = l->in + l->H;
    l->seq_out = !l->cell && at->return_sequences;
}

/* Bytes of the dtype part of the backward's scratch (dG, dxh), rounded up
 * to 16 so that the float part after it (dh, dc, the bias gradient) is
 * aligned. */
static size_t lstm_tbytes(const ss_kargs *a, const lgeo *l)
{
    size_t b = (size_t)(l->N * (4 * l->H + l->XH)) * esz(a);
    return (b + 15) / 16 * 16;
}

static ss_status lstm_sizes(const ss_kargs *a, size_t *saved, size_t *work, ss_diag *d)
{
    lgeo l;
    lstm_geo(a, &l);
    if (ext(&a->yr[0], a->yr[0].ndim - 1) != l.H)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "kernels: lstm '%s': a tile must hold the "
                           "whole hidden state", a->op->name);
    *saved = (size_t)(l.S * l.N * (l.XH + 5 * l.H)) * esz(a);
    *work = lstm_tbytes(a, &l) + (size_t)(2 * l.N * l.H + 4 * l.H) * sizeof(float);
    return SS_OK;
}

__device__ __forceinline__ float sgm(float v) { return 1.0f / (1.0f + expf(-v)); }

/* xh_t = [x_t, h_{t-1}] with h_{t-1} = o_{t-1} tanh(c_{t-1}) (or the given h0, or 0) */
template <typename T>
__global__ void lstm_xh_k(T *xh, const T *x, const T *h0, const T *Gp, const T *cp, int64_t N,
                          int64_t S, int64_t t, int64_t in, int64_t H, int cell)
{
    int64_t XH = in + H;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * XH;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t n = i / XH, j = i % XH;
        float v;
        if (j < in)
            v = ld(x, cell ? n * in + j : (n * S + t) * in + j);
        else if (Gp)
            v = ld(Gp, n * 4 * H + 3 * H + j - in) * tanhf(ld(cp, n * H + j - in));
        else
            v = h0 ? ld(h0, n * H + j - in) : 0.0f;
        st(xh, i, v);
    }
}

/* gates += b, activate; c = f c_prev + i g; write h (and c) to the outputs */
template <typename T>
__global__ void lstm_gate_k(T *G, T *c, const T *b, const T *cprev, const T *c0, T *y, T *y1,
                            int64_t N, int64_t S, int64_t t, int64_t H, int cell, int seq_out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * H;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t n = i / H, j = i % H;
        T *g = G + n * 4 * H;
        float ig = sgm(ld(g, j) + ld(b, j)), fg = sgm(ld(g, H + j) + ld(b, H + j)),
              gg = tanhf(ld(g, 2 * H + j) + ld(b, 2 * H + j)),
              og = sgm(ld(g, 3 * H + j) + ld(b, 3 * H + j));
        float cp = cprev ? ld(cprev, i) : (c0 ? ld(c0, i) : 0.0f), cn = fg * cp + ig * gg;
        st(g, j, ig);
        st(g, H + j, fg);
        st(g, 2 * H + j, gg);
        st(g, 3 * H + j, og);
        st(c, i, cn);
        float h = og * tanhf(cn);
        if (cell) {
            st(y, i, h);
            st(y1, i, cn);
        } else if (seq_out) {
            st(y, (n * S + t) * H + j, h);
        } else if (t == S - 1) {
            st(y, i, h);
        }
    }
}

/* gate gradients of step t; dh, dc carry between steps (float) */
template <typename T>
__global__ void lstm_dgate_k(T *dG, float *dh, float *dc, const T *G, const T *c, const T *cprev,
                             const T *c0, const T *dy, int64_t N, int64_t S, int64_t t, int64_t H,
                             int cell, int seq_out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * H;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t n = i / H, j = i % H;
        const T *g = G + n * 4 * H;
        float hg = seq_out ? ld(dy, (n * S + t) * H + j) : (!cell && t == S - 1 ? ld(dy, i) : 0.0f);
        float dhv = dh[i] + hg, ig = ld(g, j), fg = ld(g, H + j), gg = ld(g, 2 * H + j),
              og = ld(g, 3 * H + j), tc = tanhf(ld(c, i));
        float cp = cprev ? ld(cprev, i) : (c0 ? ld(c0, i) : 0.0f);
        float dcv = dc[i] + dhv * og * (1 - tc * tc);
        T *d = dG + n * 4 * H;
        st(d, j, dcv * gg * ig * (1 - ig));
        st(d, H + j, dcv * cp * fg * (1 - fg));
        st(d, 2 * H + j, dcv * ig * (1 - gg * gg));
        st(d, 3 * H + j, dhv * tc * og * (1 - og));
        dc[i] = dcv * fg;
    }
}

/* dx_t = dxh[:, :in]; dh = dxh[:, in:] */
template <typename T>
__global__ void lstm_split_k(T *dx, float *dh, const T *dxh, int64_t N, int64_t S, int64_t t,
                             int64_t in, int64_t H, int cell)
{
    int64_t XH = in + H;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * XH;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t n = i / XH, j = i % XH;
        if (j < in) {
            if (dx)
                st(dx, cell ? n * in + j : (n * S + t) * in + j, ld(dxh, i));
        } else {
            dh[n * H + j - in] = ld(dxh, i);
        }
    }
}

template <typename T> static void lstm_f(const ss_kargs *a)
{
    lgeo l;
    lstm_geo(a, &l);
    int64_t N = l.N, H = l.H, XH = l.XH, step = N * (XH + 5 * H);
    const void *W = a->x[l.cell ? 3 : 1];
    const T *b = (const T *)a->x[l.cell ? 4 : 2];
    T *sv = (T *)a->saved;
    for (int64_t t = 0; t < l.S; t++) {
        T *xh = sv + t * step, *G = xh + N * XH, *c = G + N * 4 * H;
        const T *Gp = t ? sv + (t - 1) * step + N * XH : NULL;
        const T *cp = t ? sv + (t - 1) * step + N * (XH + 4 * H) : NULL;
        lstm_xh_k<T><<<nblocks(N * XH), TPB, 0, S(a)>>>(
            xh, (const T *)a->x[0], l.cell ? (const T *)a->x[1] : NULL, Gp, cp, N, l.S, t, l.in, H,
            l.cell);
        gemm(a, 0, 0, N, 4 * H, XH, 1, xh, XH, 0, W, 4 * H, 0, 0, G, 4 * H, 0, 1);
        lstm_gate_k<T><<<nblocks(N * H), TPB, 0, S(a)>>>(
            G, c, b, cp, l.cell ? (const T *)a->x[2] : NULL, (T *)a->y[0],
            l.cell ? (T *)a->y[1] : NULL, N, l.S, t, H, l.cell, l.seq_out);
    }
}

template <typename T> __global__ void f32_to(T *o, const float *x, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        st(o, i, x[i]);
}

/* db[j] += sum over rows of dG[., j] (float accumulation over the steps) */
template <typename T> __global__ void lstm_db_k(float *db, const T *dG, int64_t N, int64_t cols)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < cols;
         j += (int64_t)gridDim.x * blockDim.x) {
        float s = 0;
        for (int64_t n = 0; n < N; n++)
            s += ld(dG, n * cols + j);
        db[j] += s;
    }
}

template <typename T> static void lstm_b(const ss_kargs *a)
{
    lgeo l;
    lstm_geo(a, &l);
    int64_t N = l.N, H = l.H, XH = l.XH, step = N * (XH + 5 * H);
    int wi = l.cell ? 3 : 1;
    const void *W = a->x[wi];
    const T *sv = (const T *)a->saved;
    T *dG = (T *)a->work, *dxh = dG + N * 4 * H;
    float *dh = (float *)((char *)a->work + lstm_tbytes(a, &l)), *dc = dh + N * H, *db = dc + N * H;
    cudaMemsetAsync(db, 0, (size_t)(4 * H) * sizeof(float), S(a));
    if (a->dx[wi])
        cudaMemsetAsync(a->dx[wi], 0, ss_kernel_x_bytes(a, wi), S(a));
    if (l.cell) {
        to_f32<T><<<nblocks(N * H), TPB, 0, S(a)>>>(dh, (const T *)a->dy[0], N * H);
        to_f32<T><<<nblocks(N * H), TPB, 0, S(a)>>>(dc, (const T *)a->dy[1], N * H);
    } else {
        cudaMemsetAsync(dh, 0, (size_t)(2 * N * H) * sizeof(float), S(a));
    }
    for (int64_t t = l.S - 1; t >= 0; t--) {
        const T *xh = sv + t * step, *G = xh + N * XH, *c = G + N * 4 * H;
        const T *cp = t ? sv + (t - 1) * step + N * (XH + 4 * H) : NULL;
        lstm_dgate_k<T><<<nblocks(N * H), TPB, 0, S(a)>>>(
            dG, dh, dc, G, c, cp, l.cell ? (const T *)a->x[2] : NULL, (const T *)a->dy[0], N, l.S,
            t, H, l.cell, l.seq_out);
        if (a->dx[wi])
            gemm(a, 1, 0, XH, 4 * H, N, 1, xh, XH, 0, dG, 4 * H, 0, 1, a->dx[wi], 4 * H, 0, 1);
        gemm(a, 0, 1, N, XH, 4 * H, 1, dG, 4 * H, 0, W, 4 * H, 0, 0, dxh, XH, 0, 1);
        lstm_split_k<T><<<nblocks(N * XH), TPB, 0, S(a)>>>((T *)a->dx[0], dh, dxh, N, l.S, t,
                                                           l.in, H, l.cell);
        lstm_db_k<T><<<nblocks(4 * H), TPB, 0, S(a)>>>(db, dG, N, 4 * H);
    }
    if (a->dx[wi + 1])
        f32_to<T><<<nblocks(4 * H), TPB, 0, S(a)>>>((T *)a->dx[wi + 1], db, 4 * H);
    if (l.cell) {
        if (a->dx[1])
            f32_to<T><<<nblocks(N * H), TPB, 0, S(a)>>>((T *)a->dx[1], dh, N * H);
        if (a->dx[2])
            f32_to<T><<<nblocks(N * H), TPB, 0, S(a)>>>((T *)a->dx[2], dc, N * H);
    }
}

static void lstm_fwd(const ss_kargs *a) { DISPATCH(a->dtype, lstm_f, a); }
static void lstm_bwd(const ss_kargs *a) { DISPATCH(a->dtype, lstm_b, a); }

const ss_kernel ss_cuda_lstm = {FLOATS, lstm_sizes, lstm_fwd, lstm_bwd};
