/*
 * build_host.c — host dispatch: the durations of the compute tasks once the
 * host that issues their kernels is taken into account (pass 5b of the
 * builder, after the backward tasks exist; docs/simulator.md, "Host
 * dispatch").
 *
 * An eager framework issues every kernel from the host (kernels x
 * launch_us of host time, ss_cost.*_host_us) while the GPU runs the kernels
 * issued before (ss_cost.*_gpu_us). The host runs ahead of the GPU by up to
 * the device type's dispatch_window operators: the tiles of one micro-batch
 * on a device, in operator order, fall into windows of that many tiles (0:
 * one window for all of them), and a window's forward pass takes
 * max(G, H) for its GPU time G and host time H, its backward pass likewise
 * (a recomputed forward in the backward costs what the forward does). Each
 * task gets its GPU time plus a share of its window's excess max(0, H - G)
 * proportional to its host time. A window of one operator is the launch
 * floor per operator, max(gpu, host), which is what ss_cost.fwd_us says.
 * Per micro-batch and device the framework also does work no kernel stands
 * for (get_batch, the loss bookkeeping, the point-to-point setup of the
 * schedule): the device type's mb_overhead_us, added to the first forward
 * task of the micro-batch on that device. Costs without a host part
 * (profiled, measured) keep their duration.
 * Invariant: only durations change; task ids, dependencies and resources
 * stay as the earlier passes made them, and the result is a pure function
 * of the tiles' costs, devices and micro-batches (delta simulation sees it
 * as any other duration).
 */
#include "simulator/build_impl.h"

#include <string.h>

/* Share of a window's excess max(0, H - G) for a task of host time h. */
static double share(const double *s, double h)
{
    if (!(s[1] > s[0]) || !(h > 0))
        return 0;
    return h == s[1] ? s[1] - s[0] : (s[1] - s[0]) * h / s[1]; /* alone: exact */
}

ss_status ss_build_host(ss_builder *b, ss_taskgraph *tg, ss_diag *d)
{
    int K = 0, over = 0, windows = 0;
    for (int k = 0; k < ss_machine_n_types(b->m); k++) {
        const ss_device_type *dt = ss_machine_type(b->m, k);
        over |= dt->mb_overhead_us > 0;
        windows |= dt->dispatch_window != 1;
    }
    if (!over && !windows)
        return SS_OK; /* durations as pass_tiles and pass_bwd made them */
    for (int j = 0; j < b->n_tiles; j++)
        if (b->tiles[j].mb + 1 > K)
            K = b->tiles[j].mb + 1;
    size_t n = (size_t)b->n_dev * (size_t)K;
    if (n > (size_t)(1 << 26))
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks");
    /* hfirst: per (device, micro-batch) the first tile; with windows also
     * the tiles so far and the current window, and then the window of each
     * tile; hsum: per window, forward GPU and host, backward GPU and host.
     * Windows of one operator (every built-in type) need only the first. */
    GROW(b, hfirst, cap_hfirst, windows ? (int)(3 * n) + b->n_tiles : (int)n, d);
    int *first = b->hfirst, *cnt = first + n, *cur = cnt + n, *win = cur + n;
    for (size_t i = 0; i < n; i++)
        first[i] = -1;
    for (int j = 0; j < b->n_tiles; j++) {
        const tileinfo *t = &b->tiles[j];
        size_t g = (size_t)t->dev * K + t->mb;
        if (t->bwd >= 0 && first[g] < 0) /* graph inputs: no kernel */
            first[g] = j;
    }
    if (windows) {
        GROW(b, hsum, cap_hsum, 4 * b->n_tiles, d);
        for (size_t i = 0; i < n; i++)
            cnt[i] = 0, cur[i] = -1;
        int nw = 0;
        for (int j = 0; j < b->n_tiles; j++) {
            const tileinfo *t = &b->tiles[j];
            win[j] = -1;
            if (t->bwd < 0)
                continue;
            size_t g = (size_t)t->dev * K + t->mb;
            int W = ss_machine_type(b->m, ss_machine_device(b->m, t->dev)->type)->dispatch_window;
            if (cur[g] < 0 || (W > 0 && cnt[g] % W == 0)) {
                cur[g] = nw++;
                memset(&b->hsum[4 * cur[g]], 0, 4 * sizeof *b->hsum);
            }
            cnt[g]++;
            win[j] = cur[g];
            const tilecost *c = tcost(b, j);
            double *s = &b->hsum[4 * win[j]];
            s[0] += c->fwd_gpu;
            s[1] += c->fwd_host;
            s[2] += c->bwd_gpu;
            s[3] += c->bwd_host;
        }
        for (int j = 0; j < b->n_tiles; j++) {
            const tileinfo *t = &b->tiles[j];
            const tilecost *c = tcost(b, j);
            if (win[j] < 0 || !(c->fwd_host > 0 || c->bwd_host > 0))
                continue; /* inputs; profiled costs keep theirs */
            const double *s = &b->hsum[4 * win[j]];
            double f = c->fwd_gpu + share(s, c->fwd_host);
            tg->dur[t->fwd] = f;
            tg->dur[t->bwd] = c->bwd_gpu + share(s + 2, c->bwd_host) +
                              (ss_build_recomputed(b, t->op) ? f : 0);
        }
    }
    if (over)
        for (size_t g = 0; g < n; g++)
            if (first[g] >= 0) {
                const tileinfo *t = &b->tiles[first[g]];
                const ss_device *dv = ss_machine_device(b->m, t->dev);
                tg->dur[t->fwd] += ss_machine_type(b->m, dv->type)->mb_overhead_us;
            }
    return SS_OK;
}
