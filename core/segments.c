/*
 * segments.c — the graph's segments and repeated layers (segments.h): the
 * one analysis the Megatron plan generator and level 2 share. Invariant:
 * a pure function of the graph; on error nothing is left allocated.
 */
#include "core/segments.h"

#include "core/hash.h"

#include <string.h>

void ss_segments_free(ss_segments *sg)
{
    if (!sg)
        return;
    ss_free(sg->ord);
    ss_free(sg->pos);
    ss_free(sg->end);
    ss_free(sg->count);
    ss_free(sg->sig);
    ss_free(sg->flops);
    memset(sg, 0, sizeof *sg);
}

/* The longest run of >= 2 copies of k <= 8 equal segments. */
static void layer_run(ss_segments *sg)
{
    int best = 0, nseg = sg->n;
    sg->s0 = sg->k = sg->reps = 0;
    for (int k = 1; k <= 8; k++)
        for (int s = 0; s + 2 * k <= nseg; s++) {
            int r = 1;
            while (s + (r + 1) * k <= nseg) {
                int same = 1;
                for (int i = 0; i < k && same; i++)
                    same = sg->sig[s + r * k + i] == sg->sig[s + i] &&
                           sg->count[s + r * k + i] == sg->count[s + i];
                if (!same)
                    break;
                r++;
            }
            if (r >= 2 && r * k > best) {
                best = r * k;
                sg->s0 = s;
                sg->k = k;
                sg->reps = r;
            }
        }
}

ss_status ss_segments_find(const ss_graph *g, ss_segments *sg, ss_diag *d)
{
    int n = ss_graph_n_ops(g), m = 0;
    size_t nn = (size_t)n + 1;
    memset(sg, 0, sizeof *sg);
    int *live = ss_calloc(nn, sizeof *live); /* activations live after ord[j] */
    sg->ord = ss_calloc(nn, sizeof *sg->ord);
    sg->pos = ss_calloc(nn, sizeof *sg->pos);
    sg->end = ss_calloc(nn, sizeof *sg->end);
    sg->count = ss_calloc(nn, sizeof *sg->count);
    sg->sig = ss_calloc(nn, sizeof *sg->sig);
    sg->flops = ss_calloc(nn, sizeof *sg->flops);
    if (!live || !sg->ord || !sg->pos || !sg->end || !sg->count || !sg->sig || !sg->flops) {
        ss_free(live);
        ss_segments_free(sg);
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        sg->pos[i] = -1;
        if (ss_graph_op(g, i)->type != SS_OP_INPUT) {
            sg->pos[i] = m;
            sg->ord[m++] = i;
        }
    }
    sg->m = m;
    for (int j = 0; j < m; j++) {
        const ss_op *op = ss_graph_op(g, sg->ord[j]);
        for (int o = 0; o < op->n_out; o++) {
            int t = op->outputs[o], last = j;
            for (int c = 0; c < ss_graph_n_consumers(g, t); c++) {
                int q = sg->pos[ss_graph_consumer(g, t, c)];
                if (q > last)
                    last = q;
            }
            for (int b = j; b < last; b++)
                live[b]++;
        }
    }
    double cum = 0;
    uint64_t h = 0;
    for (int j = 0; j < m; j++) {
        const ss_op *op = ss_graph_op(g, sg->ord[j]);
        ss_tile t;
        ss_work w;
        ss_op_full_tile(g, op, &t);
        ss_op_tile_work(g, op, &t, &w);
        cum += w.fwd_flops;
        h = ss_hash_mix(h, ss_op_signature(g, sg->ord[j]));
        if (live[j] <= 1 || j == m - 1) {
            int s = sg->n++;
            sg->end[s] = j;
            sg->sig[s] = ss_hash_final(h);
            sg->count[s] = s ? j - sg->end[s - 1] : j + 1;
            sg->flops[s] = cum;
            h = 0;
        }
    }
    ss_free(live);
    layer_run(sg);
    return SS_OK;
}
