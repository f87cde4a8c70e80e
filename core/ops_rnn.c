/*
 * ops_rnn.c — operator table entry of the recurrent type: lstm, either a
 * whole sequence (x[N,S,in] -> y[N,S,H], or [N,H] without return_sequences)
 * or one unrolled cell (x[N,in], h[N,H], c[N,H] -> h'[N,H], c'[N,H]), with
 * W[in+H, 4H] and b[4H] holding the four gates side by side.
 *
 * Splits: the sample and hidden dims, never time in sequence mode. A hidden
 * range needs the same range of each of the four gate blocks of W, which are
 * not contiguous: the region is their covering range. The entry keeps the
 * type's whole behaviour (op_table.h).
 */
#include "op_table.h"

#define FAIL(...) return ss_op_fail(q, __VA_ARGS__)
#define MAX_DIM SS_ATTR_MAX_DIM

static const char *const lstm_names[] = {"sequence", "cell", NULL};

/* A cell takes x, h and c; a sequence x alone. */
static int lstm_arity(const ss_op_attrs *a)
{
    return a->lstm_mode == SS_LSTM_CELL ? 3 : 1;
}

static ss_status lstm_infer(const ss_infer_args *q, ss_op_shape *s)
{
    const ss_op_attrs *a = q->a;
    const ss_tensor *const *in = q->in;
    const ss_tensor *x = in[0];
    static const ss_dim_kind k3[3] = {SS_DIM_SAMPLE, SS_DIM_ATTRIBUTE, SS_DIM_PARAMETER};
    static const ss_dim_kind k2[2] = {SS_DIM_SAMPLE, SS_DIM_PARAMETER};
    int64_t H = a->hidden;
    if (H <= 0)
        FAIL("hidden = %lld must be > 0", (long long)H);
    if (!ss_dtype_is_float(x->dtype))
        FAIL("input '%s' must be floating point", x->name);
    int64_t inf;
    if (a->lstm_mode == SS_LSTM_SEQUENCE) {
        if (x->ndim != 3)
            FAIL("sequence input '%s' must be [N, S, in], has %d dims", x->name, x->ndim);
        inf = x->shape[2];
        if (a->return_sequences) {
            int64_t sh[3] = {x->shape[0], x->shape[1], H};
            ss_op_add_out(s, 3, sh, k3, x->dtype);
        } else {
            int64_t sh[2] = {x->shape[0], H};
            ss_op_add_out(s, 2, sh, k2, x->dtype);
        }
    } else if (a->lstm_mode == SS_LSTM_CELL) {
        if (x->ndim != 2)
            FAIL("cell input '%s' must be [N, in], has %d dims", x->name, x->ndim);
        for (int i = 1; i < 3; i++)
            if (in[i]->ndim != 2 || in[i]->shape[0] != x->shape[0] || in[i]->shape[1] != H ||
                in[i]->dtype != x->dtype)
                FAIL("state '%s' must be [%lld, %lld] %s", in[i]->name, (long long)x->shape[0],
                     (long long)H, ss_dtype_name(x->dtype));
        inf = x->shape[1];
        int64_t sh[2] = {x->shape[0], H};
        ss_op_add_out(s, 2, sh, k2, x->dtype);
        ss_op_add_out(s, 2, sh, k2, x->dtype);
    } else {
        FAIL("unknown lstm_mode %d", (int)a->lstm_mode);
    }
    ss_op_add_weight2(s, "weight", inf + H, 4 * H, x->dtype);
    ss_op_add_weight1(s, "bias", 4 * H, x->dtype);
    return SS_OK;
}

/* Sample and hidden; never time in sequence mode. */
static unsigned lstm_mask(const ss_graph *g, const ss_op *op, const ss_tensor *o)
{
    (void)g;
    (void)op;
    return o->ndim == 3 ? (1u << 0) | (1u << 2) : (1u << 0) | (1u << 1);
}

/* LSTM weight columns for a hidden range: the four gate blocks [g*H+lo,
 * g*H+hi) are not contiguous; the region is their covering range
 * [lo, 3H+hi), which is exact when the whole hidden range is taken. */
static ss_range gate_cover(ss_range h, int64_t H)
{
    if (h.hi <= h.lo)
        return ss_range_make(0, 0);
    return ss_range_make(h.lo, 3 * H + h.hi);
}

/* x [n, all...], h [n, all], c [n, cols], W [all, gate_cover], b [gate_cover]. */
static void lstm_region(const ss_region_args *q, ss_region *out)
{
    const ss_region *tr = &q->t->out;
    const ss_op_attrs *a = &q->op->attrs;
    ss_range h = tr->r[q->o->ndim - 1];
    if (q->w < 0) {
        out->r[0] = tr->r[0];
        if (a->lstm_mode == SS_LSTM_CELL && q->operand == 2)
            out->r[1] = h;
    } else {
        out->r[q->T->ndim - 1] = gate_cover(h, a->hidden);
    }
}

static void lstm_work(const ss_work_args *q, ss_work *w)
{
    const ss_op_attrs *a = &q->op->attrs;
    const ss_tensor *x = ss_graph_tensor(q->g, q->op->inputs[0]);
    double Nn = (double)ss_range_len(q->t->out.r[0]), Hh = q->cols, H = (double)a->hidden;
    double in = (double)x->shape[x->ndim - 1];
    double S = a->lstm_mode == SS_LSTM_SEQUENCE ? (double)x->shape[1] : 1;
    double mm = 2 * Nn * (in + H) * 4 * Hh, el = 10 * Nn * Hh;
    w->fwd_flops = S * (mm + el);
    w->bwd_flops = S * (2 * mm + 2 * el);
    if (a->lstm_mode == SS_LSTM_CELL)
        w->saved_bytes = ss_op_operands_bytes(q->g, q->op, q->t, 0, 3) + 5 * Nn * Hh * q->osz;
    else
        w->saved_bytes = q->x_bytes + S * Nn * (H + 6 * Hh) * q->osz;
}

static const char *const lstm_keys[] = {SS_OP_COMMON_KEYS, "mode", "hidden",
                                        "return_sequences", NULL};

static ss_status lstm_read(const ss_attr_reader *r, ss_op_attrs *a)
{
    int e = 0;
    ss_status st = ss_attr_enum(r, "mode", 1, lstm_names, &e);
    a->lstm_mode = (ss_lstm_mode)e;
    if (!st)
        st = ss_attr_i64(r, "hidden", 1, 1, MAX_DIM, &a->hidden);
    if (!st)
        st = ss_attr_bool(r, "return_sequences", &a->return_sequences);
    if (!st && a->lstm_mode == SS_LSTM_CELL && a->return_sequences)
        st = ss_attr_fail(r, SS_ERR_INVALID, "return_sequences",
                          "only a sequence LSTM returns sequences");
    return st;
}

static void lstm_write(ss_attr_writer *w, const ss_graph *g, const ss_op *op)
{
    (void)g;
    const ss_op_attrs *a = &op->attrs;
    ss_attr_put_str(w, "mode", lstm_names[a->lstm_mode == SS_LSTM_CELL]);
    ss_attr_put_int(w, "hidden", a->hidden);
    if (a->lstm_mode == SS_LSTM_SEQUENCE)
        ss_attr_put_bool(w, "return_sequences", a->return_sequences);
}

const ss_op_class ss_op_class_lstm = {
    .type = SS_OP_LSTM,
    .name = "lstm",
    .arity = 1,
    .arity_of = lstm_arity,
    .infer = lstm_infer,
    .split_mask = lstm_mask,
    .input_region = lstm_region,
    .work = lstm_work,
    .keys = lstm_keys,
    .read_attrs = lstm_read,
    .write_attrs = lstm_write,
};
