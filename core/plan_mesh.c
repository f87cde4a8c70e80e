/*
 * plan_mesh.c — fitting and expanding mesh expressions of device lists
 * (plan_mesh.h).
 *
 * Invariant: ss_mesh_expand(ss_mesh_fit(list)) == list, entry for entry;
 * the fit verifies every entry before it accepts an axis.
 */
#include "plan_mesh.h"

#include <string.h>

/* Does cur[0..n) consist of n/k blocks, each cur[b*k] + i*c for i < k? */
static int blocks_fit(const int64_t *cur, int n, int k, int64_t c)
{
    for (int j = 0; j < n; j++)
        if (cur[j] != cur[j - j % k] + (int64_t)(j % k) * c)
            return 0;
    return 1;
}

int ss_mesh_fit(const int *devices, int n, ss_mesh *out)
{
    memset(out, 0, sizeof *out);
    if (n < 1)
        return 0;
    int64_t *cur = ss_malloc((size_t)n * sizeof *cur);
    if (!cur)
        return 0;
    for (int j = 0; j < n; j++)
        cur[j] = devices[j];
    int len = n, ok = 1;
    int64_t shape[SS_MESH_MAX_AXES], strides[SS_MESH_MAX_AXES]; /* innermost first */
    int na = 0;
    while (len > 1 && ok) {
        int64_t c = cur[1] - cur[0];
        int run = 2;
        while (run < len && cur[run] - cur[run - 1] == c)
            run++;
        int k = run < len ? run : len;
        while (k >= 2 && (len % k != 0 || !blocks_fit(cur, len, k, c)))
            k--;
        if (k < 2 || na == SS_MESH_MAX_AXES) {
            ok = 0;
            break;
        }
        shape[na] = k;
        strides[na++] = c;
        for (int b = 0; b < len / k; b++)
            cur[b] = cur[b * k];
        len /= k;
    }
    if (ok) {
        out->offset = cur[0];
        out->n_axes = na;
        for (int a = 0; a < na; a++) {
            out->shape[a] = shape[na - 1 - a];
            out->strides[a] = strides[na - 1 - a];
        }
    }
    ss_free(cur);
    return ok;
}

int64_t ss_mesh_count(const ss_mesh *m, int64_t max)
{
    int64_t n = 1;
    for (int a = 0; a < m->n_axes; a++) {
        if (m->shape[a] < 1 || n > max / m->shape[a])
            return -1;
        n *= m->shape[a];
    }
    return n;
}

void ss_mesh_range(const ss_mesh *m, int64_t *lo, int64_t *hi)
{
    *lo = *hi = m->offset;
    for (int a = 0; a < m->n_axes; a++) {
        int64_t span = (m->shape[a] - 1) * m->strides[a];
        if (span < 0)
            *lo += span;
        else
            *hi += span;
    }
}

void ss_mesh_expand(const ss_mesh *m, int *devices)
{
    int64_t n = ss_mesh_count(m, INT64_MAX);
    int64_t idx[SS_MESH_MAX_AXES] = {0};
    int64_t dev = m->offset;
    for (int64_t t = 0; t < n; t++) {
        devices[t] = (int)dev;
        /* advance the mixed-radix counter, innermost axis last */
        for (int a = m->n_axes - 1; a >= 0; a--) {
            if (++idx[a] < m->shape[a]) {
                dev += m->strides[a];
                break;
            }
            dev -= (m->shape[a] - 1) * m->strides[a];
            idx[a] = 0;
        }
    }
}
