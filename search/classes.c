/*
 * classes.c — structural classes of operators by colour refinement
 * (classes.h). Invariant: equal class ids <=> equal final colours (up to
 * 64-bit hash collisions); ids numbered by first op.
 */
#include "search/classes.h"

#include <stdlib.h>

#include "core/json_util.h"

typedef struct colour_op {
    uint64_t colour;
    int op;
} colour_op;

static uint64_t mix(uint64_t h, uint64_t v) { return ss_fnv_i64(h, (int64_t)v); }

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_colour_op(const void *a, const void *b)
{
    const colour_op *x = a, *y = b;
    if (x->colour != y->colour)
        return x->colour < y->colour ? -1 : 1;
    return (x->op > y->op) - (x->op < y->op);
}

/* One refinement round: next[o] from col[o], its producers' colours by input
 * slot and its consumers' colours sorted per output (scratch: n entries). */
static void refine(const ss_graph *g, const uint64_t *col, uint64_t *next, uint64_t *scratch)
{
    int n = ss_graph_n_ops(g);
    for (int o = 0; o < n; o++) {
        const ss_op *op = ss_graph_op(g, o);
        uint64_t h = mix(SS_FNV_INIT, col[o]);
        for (int i = 0; i < op->n_in; i++) {
            int prod = ss_graph_tensor(g, op->inputs[i])->producer;
            h = mix(h, prod >= 0 ? col[prod] : 0x9e3779b97f4a7c15ULL);
        }
        for (int j = 0; j < op->n_out; j++) {
            int nc = ss_graph_n_consumers(g, op->outputs[j]);
            for (int k = 0; k < nc && k < n; k++)
                scratch[k] = col[ss_graph_consumer(g, op->outputs[j], k)];
            if (nc > n)
                nc = n;
            qsort(scratch, (size_t)nc, sizeof *scratch, cmp_u64);
            h = mix(h, (uint64_t)nc);
            for (int k = 0; k < nc; k++)
                h = mix(h, scratch[k]);
        }
        next[o] = h;
    }
}

ss_status ss_op_classes(const ss_graph *g, int rounds, int *class_of, int *n_classes, ss_diag *d)
{
    int n = ss_graph_n_ops(g);
    size_t m = (size_t)n + 1;
    uint64_t *col = ss_malloc(m * sizeof *col), *next = ss_malloc(m * sizeof *next);
    uint64_t *scratch = ss_malloc(m * sizeof *scratch);
    colour_op *sorted = ss_malloc(m * sizeof *sorted);
    int *first = ss_malloc(m * sizeof *first);
    ss_status st = SS_OK;
    if (!col || !next || !scratch || !sorted || !first) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory");
        goto out;
    }
    for (int o = 0; o < n; o++) {
        const ss_op *op = ss_graph_op(g, o);
        uint64_t h = ss_op_signature(g, o);
        for (int k = 0; k < op->n_w; k++)
            h = mix(h, (uint64_t)op->weights[k] + 1);
        col[o] = h;
    }
    for (int r = 0; r < rounds; r++) {
        refine(g, col, next, scratch);
        uint64_t *t = col;
        col = next;
        next = t;
    }
    /* first[o]: the lowest op of o's colour; ids by first op (class_of is
     * written only from here on: nothing below can fail) */
    for (int o = 0; o < n; o++)
        sorted[o] = (colour_op){col[o], o};
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_colour_op);
    for (int i = 0; i < n; i++)
        first[sorted[i].op] = i > 0 && sorted[i].colour == sorted[i - 1].colour
                                  ? first[sorted[i - 1].op]
                                  : sorted[i].op;
    int nc = 0;
    for (int o = 0; o < n; o++)
        class_of[o] = first[o] == o ? nc++ : class_of[first[o]];
    *n_classes = nc;
out:
    ss_free(col);
    ss_free(next);
    ss_free(scratch);
    ss_free(sorted);
    ss_free(first);
    return st;
}
