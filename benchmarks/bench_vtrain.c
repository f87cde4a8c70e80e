/*
 * bench_vtrain.c — prediction accuracy against measured Megatron-LM runs
 * (benchmarks/RESULTS.md, "Simulator accuracy"; docs/calibration.md).
 *
 * The data: vTrain's ground_truth_single.csv (MIT licence, KAIST), 1,440
 * GPT training iterations measured on 2-8 A100-SXM4 GPUs of one node.
 * Setup, from vTrain's validation configs (config/validation/single/)
 * and model code: fp16 mixed precision with Adam, activation checkpointing
 * on (use_checkpoint: true), Megatron's non-interleaved 1F1B schedule,
 * sequence 1024, GPT-2 vocabulary 50,257 split unpadded over the tp ranks
 * (50,257 // tp rows each, as vTrain's model has it; see model_vocab),
 * global / (micro * dp) micro-batches per iteration.
 * Every row becomes "gpt:layers=L,hidden=H,heads=A,seq=S,vocab=V" with the
 * global batch, a Megatron plan {tp, pp, dp, micro-batches, recompute=full}
 * on the first tp*pp*dp devices of an 8-GPU NVSwitch node, and one
 * ss_sim_run; the prediction is its iteration time.
 *
 * Calibration (--calibrate) fits only general parameters of the device type
 * and fabric — the compute-efficiency table (vs FLOPs per kernel), the
 * memory-efficiency table (vs bytes per kernel), the kernel launch overhead,
 * the NVSwitch bandwidth and the tensor-core alignment factors (eff_align)
 * — never anything per configuration: grids and coordinate
 * descent minimising the mean absolute percentage error on a fixed, seeded
 * random half of the rows; the other half is held out. Parameters enter the
 * simulator the way a user would give them: as a device-type override in a
 * topology JSON, so what is calibrated is exactly what a topology can state.
 *
 * Usage (the topology names the GPU type and NVSwitch bandwidth to start from):
 *   bench_vtrain [--csv FILE] [--topology FILE] [--seed N]
 *                [--markdown FILE] [--predictions FILE]
 *                [--jobs N] [--calibrate [--rounds N] [--fit-tp1]] [--limit N]
 * --jobs N predicts in N forked processes; --fit-tp1 restricts the objective
 * to the calibration half's tp = 1 rows (see docs/calibration.md).
 * Prints a summary to stdout; --markdown writes the report section.
 * Invariant: the split, the predictions and the report are deterministic
 * (same inputs and seed, same bytes).
 */
#include "bench_common.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_CSV "../shared/data/vtrain_ground_truth_single.csv"
#define GPT_VOCAB 50257
#define NODE_GPUS 8

typedef struct row {
    int gpus, gbatch, mbatch, hidden, heads, layers, seq, tp, dp, pp;
    double billions; /* model size column of the multi-node file (0: single-node file) */
    double measured_ms;
    double predicted_ms;
    int train;    /* 1: in the calibration half */
    int graph;    /* index into the graph cache */
    ss_plan *plan;
} row;

/* Graphs depend on (layers, hidden, heads, seq, vocab, batch) only: many rows
 * share one, so they are built once. */
typedef struct gkey {
    int layers, hidden, heads, seq, vocab, batch;
    int vocab_pad, tp; /* the gpt zoo's Megatron padding (0: none) and its tp */
} gkey;

typedef struct bench {
    row *rows;
    int n;
    gkey *keys;
    ss_graph **graphs;
    int n_graphs, cap_graphs;
} bench;

/* The calibrated quantities. x positions of the tables stay those of the
 * starting device type; only the efficiencies move. */
typedef struct params {
    int nf, nm;
    double fx[SS_EFF_POINTS], fy[SS_EFF_POINTS];
    double mx[SS_EFF_POINTS], my[SS_EFF_POINTS];
    double launch_us;
    double gbps;     /* NVSwitch bandwidth per GPU and direction */
    double align[3]; /* tensor-core alignment factors (8, 4, <= 2-byte rows) */
    double mb_overhead_us; /* per micro-batch and device (not calibrated: the topology's) */
    int dispatch_window;     /* likewise */
} params;

static const char *devname = "A100-SXM4-40GB";
static int multi = 0;      /* the rows are the multi-node file's (its header says so) */
/* The fabrics as the --topology file states them (its "nvswitch" and, for
 * the multi-node file, "infiniband" links): latency and the collectives'
 * bus-bandwidth curve (ss_link.coll_eff / coll_half_bytes; docs/calibration.md)
 * are taken from it as they are; the NVSwitch bandwidth is the calibrated
 * params.gbps. */
typedef struct fab {
    int present;
    double gbps, lat, coll_eff, coll_half;
    int nics; /* NICs per node (inter) */
} fab;
static fab f_intra, f_inter;
static int jobs = 1;       /* --jobs: forked prediction workers */
static ss_evaluator evaluator = SS_EVAL_AUTO; /* --evaluator: how rows are judged */
static int fit_tp1 = 0;    /* --fit-tp1: calibrate on tensor-parallel degree 1 rows only */

/* Row r selected by want (train = 1, test = 0, all = -1)? The calibration
 * objective (want = 1) also honours --fit-tp1. */
static int fit_row(const row *r, int want)
{
    if (want < 0)
        return 1;
    if (r->train != want)
        return 0;
    return !(want == 1 && fit_tp1 && r->tp != 1);
}

/* ------------------------------------------------------------------ data */

static int load_csv(const char *path, bench *b)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench_vtrain: cannot open %s\n", path);
        return -1;
    }
    char line[512];
    int cap = 0, lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (!strncmp(line, "Parameters", 10)) {
            multi = 1; /* the multi-node file: its header names the size column */
            continue;
        }
        row r;
        memset(&r, 0, sizeof r);
        const char *at = line;
        if (multi) { /* a leading column: the model size in billions */
            r.billions = atof(line);
            at = strchr(line, ',');
            at = at ? at + 1 : line;
        }
        if (sscanf(at, "%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%lf", &r.gpus, &r.gbatch, &r.mbatch,
                   &r.hidden, &r.heads, &r.layers, &r.seq, &r.tp, &r.dp, &r.pp,
                   &r.measured_ms) != 11 ||
            r.tp * r.dp * r.pp != r.gpus || (!multi && r.gpus > NODE_GPUS) ||
            (multi && r.gpus % NODE_GPUS) || r.mbatch < 1 ||
            r.gbatch % (r.mbatch * r.dp) != 0 || !(r.measured_ms > 0)) {
            fprintf(stderr, "bench_vtrain: %s:%d: bad row\n", path, lineno);
            fclose(f);
            return -1;
        }
        if (b->n == cap) {
            cap = cap ? 2 * cap : 1024;
            row *nr = realloc(b->rows, (size_t)cap * sizeof *nr);
            if (!nr) {
                fclose(f);
                return -1;
            }
            b->rows = nr;
        }
        b->rows[b->n++] = r;
    }
    fclose(f);
    return b->n > 0 ? 0 : -1;
}

/* The vocabulary as the measured model has it: GPT-2's 50,257 tokens, not
 * padded, each tensor-parallel rank holding vocab // tp rows of the tied
 * table (vTrain's src/model/gpt_modeling.py: nn.Embedding(vocab_size //
 * world_size, hidden) for the embedding and the LM head). So the LM head's
 * output width per rank is 50,257 (odd), 25,128, 12,564 or 6,282 for tp = 1,
 * 2, 4, 8: rows of 2, 16, 8 and 4 bytes in fp16, which decides its
 * tensor-core alignment (profiler/analytic.c). The measurements agree: per
 * sample, the output layer costs ~8 ms at tp = 1 (h = 2048), three times
 * what the same work costs per vocabulary row at tp = 2, and twice as much
 * per row at tp = 4 as at tp = 2 (docs/calibration.md). Megatron-LM itself
 * pads to a multiple of 128 * tp (50,304 at tp = 1): the multi-node rows
 * (Megatron-DeepSpeed) get the gpt zoo's padding (vocab_pad=128, tp), the
 * single-node ones vocab_pad=0 (see key_for). */
static int model_vocab(int tp)
{
    if (multi)
        return GPT_VOCAB;
    return GPT_VOCAB / tp * tp;
}

static gkey key_for(const row *r)
{
    gkey k = {r->layers, r->hidden, r->heads, r->seq, model_vocab(r->tp), r->gbatch,
              multi ? 128 : 0, multi ? r->tp : 1};
    return k;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* A fixed random half (Fisher-Yates on indices, seeded) is the training half. */
static int split(bench *b, uint64_t seed)
{
    int *ix = malloc((size_t)b->n * sizeof *ix);
    if (!ix)
        return -1;
    for (int i = 0; i < b->n; i++)
        ix[i] = i;
    for (int i = b->n - 1; i > 0; i--) {
        int j = (int)(splitmix(&seed) % (uint64_t)(i + 1));
        int t = ix[i];
        ix[i] = ix[j];
        ix[j] = t;
    }
    for (int i = 0; i < b->n; i++)
        b->rows[ix[i]].train = i < b->n / 2;
    free(ix);
    return 0;
}

static int graph_for(bench *b, const gkey *k, ss_diag *d)
{
    for (int i = 0; i < b->n_graphs; i++)
        if (memcmp(&b->keys[i], k, sizeof *k) == 0)
            return i;
    if (b->n_graphs == b->cap_graphs) {
        int nc = b->cap_graphs ? 2 * b->cap_graphs : 64;
        gkey *nk = realloc(b->keys, (size_t)nc * sizeof *nk);
        if (!nk)
            return -1;
        b->keys = nk;
        ss_graph **ng = realloc(b->graphs, (size_t)nc * sizeof *ng);
        if (!ng)
            return -1;
        b->graphs = ng;
        b->cap_graphs = nc;
    }
    char spec[256];
    snprintf(spec, sizeof spec, "gpt:layers=%d,hidden=%d,heads=%d,seq=%d,vocab=%d,vocab_pad=%d,tp=%d",
             k->layers, k->hidden, k->heads, k->seq, k->vocab, k->vocab_pad, k->tp);
    ss_graph *g;
    if (ss_model_build(spec, k->batch, NODE_GPUS, &g, d))
        return -1;
    b->keys[b->n_graphs] = *k;
    b->graphs[b->n_graphs] = g;
    return b->n_graphs++;
}

/* Graph and Megatron plan of every row (plans are made on machine m; they
 * name device ids only, so they run on any 8-GPU variant of it). */
static int prepare(bench *b, const ss_machine *m, ss_diag *d)
{
    for (int i = 0; i < b->n; i++) {
        row *r = &b->rows[i];
        gkey k = key_for(r);
        r->graph = graph_for(b, &k, d);
        if (r->graph < 0)
            return -1;
        ss_megatron_config c = {.tp = r->tp, .pp = r->pp, .dp = r->dp, .mbs = r->mbatch,
                                .recompute = SS_RECOMPUTE_FULL, .sync = SS_SYNC_BULK};
        /* Megatron's local DDP without gradient buckets (vTrain's
         * use_gradient_bucket: false): sync=bulk, one all-reduce of the whole
         * gradient buffer after the last backward, as `megatron:...,sync=bulk`
         * plans it for `simsearch simulate` */
        if (ss_plan_megatron(b->graphs[r->graph], m, &c, &r->plan, d))
            return -1;
    }
    return 0;
}

static void bench_free(bench *b)
{
    for (int i = 0; i < b->n; i++)
        ss_plan_free(b->rows[i].plan);
    for (int i = 0; i < b->n_graphs; i++)
        ss_graph_free(b->graphs[i]);
    free(b->rows);
    free(b->keys);
    free(b->graphs);
}

/* -------------------------------------------------------------- machine */

static void params_from(params *p, const ss_device_type *dt, double gbps)
{
    memset(p, 0, sizeof *p);
    p->nf = dt->n_eff_flops;
    p->nm = dt->n_eff_mem;
    memcpy(p->fx, dt->eff_flops_x, sizeof p->fx);
    memcpy(p->fy, dt->eff_flops_y, sizeof p->fy);
    memcpy(p->mx, dt->eff_mem_x, sizeof p->mx);
    memcpy(p->my, dt->eff_mem_y, sizeof p->my);
    p->launch_us = dt->launch_us;
    p->gbps = gbps;
    for (int k = 0; k < 3; k++)
        p->align[k] = dt->eff_align[k] > 0 ? dt->eff_align[k] : 1;
    p->mb_overhead_us = dt->mb_overhead_us;
    p->dispatch_window = dt->dispatch_window;
}

static size_t put_table(char *s, size_t cap, const double *x, const double *y, int n)
{
    size_t k = 0;
    for (int i = 0; i < n && k < cap; i++)
        k += (size_t)snprintf(s + k, cap - k, "%s[%.6g, %.6g]", i ? ", " : "", x[i], y[i]);
    return k;
}

/* The topology's fabrics, by link kind (the first link of each kind). */
static void read_fabrics(const ss_machine *m)
{
    for (int i = 0; i < ss_machine_n_links(m); i++) {
        const ss_link *l = ss_machine_link(m, i);
        fab *f = !strcmp(l->kind, "nvswitch") ? &f_intra : !strcmp(l->kind, "infiniband") ? &f_inter : NULL;
        if (!f || f->present)
            continue;
        f->present = 1;
        f->gbps = l->gbps_ab;
        f->lat = l->latency_us;
        f->coll_eff = l->coll_eff > 0 ? l->coll_eff : 1.0;
        f->coll_half = l->coll_half_bytes;
    }
    for (int i = 0; i < ss_machine_n_nodes(m); i++)
        if (ss_machine_node(m, i)->kind == SS_NODE_NIC && ss_machine_node(m, i)->host == 0)
            f_inter.nics++;
}

/* `nodes` nodes of 8 GPUs of type devname on NVSwitch (and, with more than
 * one, InfiniBand between them: one NIC per GPU), the device type overridden
 * with p's tables and launch overhead. */
static int make_machine(const params *p, int nodes, ss_machine **m, ss_diag *d)
{
    char ft[1024], mt[1024], js[4096], inter[512] = "";
    put_table(ft, sizeof ft, p->fx, p->fy, p->nf);
    put_table(mt, sizeof mt, p->mx, p->my, p->nm);
    if (nodes > 1)
        snprintf(inter, sizeof inter,
                 ",\n   \"inter\": {\"kind\": \"infiniband\", \"gbps\": %.17g, \"latency_us\": %.17g, "
                 "\"nics_per_node\": %d, \"coll_eff\": %.17g, \"coll_half_bytes\": %.17g}",
                 f_inter.gbps, f_inter.lat, f_inter.nics, f_inter.coll_eff, f_inter.coll_half);
    snprintf(js, sizeof js,
             "{\"format\": \"simsearch-topology\", \"version\": 1, \"name\": \"vtrain-a100x8\",\n"
             " \"device_types\": [{\"name\": \"%s\", \"launch_us\": %.6g,\n"
             "   \"eff_flops\": [%s],\n   \"eff_mem\": [%s],\n"
             "   \"eff_align\": [%.6g, %.6g, %.6g], \"mb_overhead_us\": %.17g,\n   \"dispatch_window\": %d}],\n"
             " \"compact\": {\"nodes\": %d, \"devices_per_node\": %d, \"device_type\": \"%s\",\n"
             "   \"intra\": {\"kind\": \"nvswitch\", \"gbps\": %.6g, \"latency_us\": %.17g,\n"
             "     \"coll_eff\": %.17g, \"coll_half_bytes\": %.17g}%s}}\n",
             devname, p->launch_us, ft, mt, p->align[0], p->align[1], p->align[2],
             p->mb_overhead_us, p->dispatch_window, nodes,
             NODE_GPUS, devname, p->gbps, f_intra.lat, f_intra.coll_eff, f_intra.coll_half, inter);
    return ss_machine_load_string(js, "vtrain-a100x8", m, d) ? -1 : 0;
}

/* Predict rows [lo, hi) with `want` (train = 1, test = 0, all = -1) and
 * every `stride`-th selected row from `phase`, into their predicted_ms. */
static int predict_part(bench *b, const params *p, int want, int phase, int stride, ss_diag *d)
{
    ss_machine *m = NULL;
    ss_costmodel *cm = NULL;
    int m_nodes = 0;
    ss_sim_result res;
    memset(&res, 0, sizeof res);
    int rc = 0, k = 0;
    for (int i = 0; i < b->n && !rc; i++) {
        row *r = &b->rows[i];
        if (!fit_row(r, want) || k++ % stride != phase)
            continue;
        int nodes = (r->gpus + NODE_GPUS - 1) / NODE_GPUS;
        if (nodes != m_nodes) { /* rows come grouped by size: few rebuilds */
            ss_cost_free(cm);
            ss_machine_free(m);
            m = NULL;
            cm = NULL;
            if (make_machine(p, nodes, &m, d) || !(cm = ss_cost_new(m))) {
                rc = -1;
                break;
            }
            m_nodes = nodes;
        }
        ss_sim *s = NULL;
        /* memory is not what is measured here */
        ss_sim_config cfg = {.skip_memory = 1, .evaluator = evaluator};
        if (ss_sim_new(b->graphs[r->graph], m, cm, &cfg, &s, d) ||
            ss_sim_run(s, r->plan, &res, d))
            rc = -1;
        else
            r->predicted_ms = res.iteration_us / 1e3;
        ss_sim_free(s);
    }
    ss_sim_result_clear(&res);
    ss_cost_free(cm);
    ss_machine_free(m);
    return rc;
}

/* Predict the selected rows, in `jobs` forked workers when jobs > 1 (each
 * sends back (row index, prediction) pairs through a pipe). */
static int predict(bench *b, const params *p, int want, ss_diag *d)
{
    if (jobs <= 1)
        return predict_part(b, p, want, 0, 1, d);
    int fds[64];
    pid_t pids[64];
    int nj = jobs > 64 ? 64 : jobs, rc = 0;
    fflush(NULL);
    for (int w = 0; w < nj; w++) {
        int fd[2];
        if (pipe(fd))
            return -1;
        pids[w] = fork();
        if (pids[w] < 0)
            return -1;
        if (pids[w] == 0) {
            close(fd[0]);
            int ok = predict_part(b, p, want, w, nj, d) == 0, k = 0;
            for (int i = 0; i < b->n && ok; i++) {
                const row *r = &b->rows[i];
                if (!fit_row(r, want) || k++ % nj != w)
                    continue;
                struct { int i; double v; } rec = {i, r->predicted_ms};
                if (write(fd[1], &rec, sizeof rec) != (ssize_t)sizeof rec)
                    ok = 0;
            }
            close(fd[1]);
            _exit(ok ? 0 : 1);
        }
        close(fd[1]);
        fds[w] = fd[0];
    }
    for (int w = 0; w < nj; w++) {
        struct { int i; double v; } rec;
        while (read(fds[w], &rec, sizeof rec) == (ssize_t)sizeof rec)
            if (rec.i >= 0 && rec.i < b->n)
                b->rows[rec.i].predicted_ms = rec.v;
        close(fds[w]);
        int status;
        if (waitpid(pids[w], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
            rc = -1;
    }
    if (rc)
        ss_diag_set(d, SS_ERR_INVALID, "a prediction worker failed");
    return rc;
}

/* ---------------------------------------------------------------- stats */

typedef struct stats {
    int n;
    double mean, median, p90, max; /* absolute percentage error, % */
    double bias;                   /* mean signed error (predicted - measured) / measured, % */
    double spearman, pearson;
} stats;

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double ape(const row *r) { return fabs(r->predicted_ms - r->measured_ms) / r->measured_ms * 100; }

static const double *sort_key;
static int cmp_ix(const void *a, const void *b)
{
    double x = sort_key[*(const int *)a], y = sort_key[*(const int *)b];
    return (x > y) - (x < y);
}

/* Ranks 1..n, ties get their mean rank. */
static void ranks(const double *v, int n, int *ix, double *rk)
{
    for (int i = 0; i < n; i++)
        ix[i] = i;
    sort_key = v;
    qsort(ix, (size_t)n, sizeof *ix, cmp_ix);
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && v[ix[j + 1]] == v[ix[i]])
            j++;
        for (int k = i; k <= j; k++)
            rk[ix[k]] = (i + j) / 2.0 + 1;
        i = j + 1;
    }
}

static double pearson(const double *x, const double *y, int n)
{
    double mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
    for (int i = 0; i < n; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= n;
    my /= n;
    for (int i = 0; i < n; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : 0;
}

/* Statistics over rows selected by sel(row, ctx). */
typedef int (*selector)(const row *r, const void *ctx);

static int sel_half(const row *r, const void *ctx)
{
    int want = *(const int *)ctx;
    return want < 0 || r->train == want;
}

static void compute(const bench *b, selector sel, const void *ctx, stats *s)
{
    memset(s, 0, sizeof *s);
    double *e = malloc((size_t)b->n * sizeof *e), *x = malloc((size_t)b->n * sizeof *x),
           *y = malloc((size_t)b->n * sizeof *y), *rx = malloc((size_t)b->n * sizeof *rx),
           *ry = malloc((size_t)b->n * sizeof *ry);
    int *ix = malloc((size_t)b->n * sizeof *ix);
    if (!e || !x || !y || !rx || !ry || !ix)
        goto out;
    for (int i = 0; i < b->n; i++) {
        const row *r = &b->rows[i];
        if (!sel(r, ctx))
            continue;
        e[s->n] = ape(r);
        x[s->n] = r->predicted_ms;
        y[s->n] = r->measured_ms;
        s->mean += e[s->n];
        s->bias += (r->predicted_ms - r->measured_ms) / r->measured_ms * 100;
        s->n++;
    }
    if (s->n == 0)
        goto out;
    s->mean /= s->n;
    s->bias /= s->n;
    s->pearson = pearson(x, y, s->n);
    ranks(x, s->n, ix, rx);
    ranks(y, s->n, ix, ry);
    s->spearman = pearson(rx, ry, s->n);
    qsort(e, (size_t)s->n, sizeof *e, cmp_d);
    s->median = s->n % 2 ? e[s->n / 2] : (e[s->n / 2 - 1] + e[s->n / 2]) / 2;
    s->p90 = e[(int)(0.9 * (s->n - 1))];
    s->max = e[s->n - 1];
out:
    free(e);
    free(x);
    free(y);
    free(rx);
    free(ry);
    free(ix);
}

static int sel_fit(const row *r, const void *ctx)
{
    (void)ctx;
    return fit_row(r, 1);
}

/* The calibration objective: MAPE over the rows it fits. */
static double train_mape(const bench *b)
{
    stats s;
    compute(b, sel_fit, NULL, &s);
    return s.mean;
}

/* ---------------------------------------------------------- calibration */

/* The calibration moves 11 numbers, not every table point: each efficiency
 * table is sampled from a saturating curve
 *     eff(x) = top / (1 + (half / x)^slope)
 * (x = FLOPs or bytes per kernel; top = large-kernel efficiency, half = the
 * size at which a kernel gets half of it), plus the launch overhead, the
 * NVSwitch bandwidth and the three tensor-core alignment factors. Fewer
 * knobs than table points: each evaluation costs 720 simulations, and a
 * smooth curve cannot bend itself around single configurations. */
typedef struct curves {
    double f_top, f_log_half, f_slope; /* FLOPs table */
    double m_top, m_log_half, m_slope; /* memory table */
    double launch_us, gbps;
    double align8, align4, align2;     /* eff_align[0..2] */
} curves;

#define N_COORDS 11

static double *coord(curves *c, int k)
{
    double *v[N_COORDS] = {&c->f_top,     &c->f_log_half, &c->f_slope, &c->m_top,
                           &c->m_log_half, &c->m_slope,  &c->launch_us, &c->gbps,
                           &c->align2,    &c->align4,    &c->align8};
    return v[k];
}

static const char *coord_names[N_COORDS] = {"flops top", "flops log10 half", "flops slope",
                                            "mem top",   "mem log10 half",   "mem slope",
                                            "launch_us", "nvswitch_gbps", "align <=2 B",
                                            "align 4 B", "align 8 B"};

/* log10(half) moves additively (in decades), the others multiplicatively.
 * The alignment factors come narrowest first: each is bounded by the next
 * wider one, so from 1, 1, 1 only the narrowest can move first. */
static int additive(int k) { return k == 1 || k == 4; }

static double curve_eff(double top, double log_half, double slope, double x)
{
    double e = top / (1 + pow(pow(10, log_half) / x, slope));
    return e < 0.005 ? 0.005 : e > 1 ? 1 : e;
}

/* Tables of p from the curves, sampled every decade: FLOPs 1e5..1e12,
 * bytes 1e4..1e9 (whatever points the starting type had). */
static void apply_curves(params *p, const curves *c)
{
    p->nf = 8;
    p->nm = 6;
    for (int i = 0; i < p->nf; i++)
        p->fx[i] = pow(10, 5 + i);
    for (int i = 0; i < p->nm; i++)
        p->mx[i] = pow(10, 4 + i);
    for (int i = 0; i < p->nf; i++)
        p->fy[i] = curve_eff(c->f_top, c->f_log_half, c->f_slope, p->fx[i]);
    for (int i = 0; i < p->nm; i++)
        p->my[i] = curve_eff(c->m_top, c->m_log_half, c->m_slope, p->mx[i]);
    p->launch_us = c->launch_us;
    p->gbps = c->gbps;
    p->align[0] = c->align8;
    p->align[1] = c->align4;
    p->align[2] = c->align2;
}

/* Bounds from the reference figures (../shared/reference/hardware.md):
 * large GEMMs reach at most 85% of tensor peak, copies at most 85% of memory
 * bandwidth (core/devtypes.c), NCCL at least half and at most all of the NVSwitch line rate
 * (150..300 GB/s); slopes 0.1..3, launch 0.5..60 us, half-points within the
 * tables' ranges; alignment factors in [0.05, 1], narrower rows no faster
 * than wider ones. */
static int valid(const curves *c)
{
    return c->f_top > 0.05 && c->f_top <= 0.85 && c->m_top > 0.05 && c->m_top <= 0.85 &&
           c->f_slope >= 0.1 && c->f_slope <= 3 && c->m_slope >= 0.1 && c->m_slope <= 3 &&
           c->f_log_half >= 4 && c->f_log_half <= 13 && c->m_log_half >= 3 &&
           c->m_log_half <= 10 && c->launch_us >= 0.5 && c->launch_us <= 60 && c->gbps >= 150 &&
           c->gbps <= 300 && c->align8 <= 1 && c->align4 <= c->align8 &&
           c->align2 <= c->align4 && c->align2 >= 0.05;
}

/* One pass of coordinate descent over coordinates [k0, k1) at `step`:
 * each is tried at +-step (relative; decades times 2 for the half-points),
 * the better value is kept and the move repeated while it improves. */
static int descend(bench *b, params *p, curves *c, int k0, int k1, double step, int round,
                   double *best, ss_diag *d)
{
    for (int k = k0; k < k1; k++) {
        for (int improved = 1; improved;) {
            improved = 0;
            double orig = *coord(c, k), best_v = orig;
            for (int dir = -1; dir <= 1; dir += 2) {
                *coord(c, k) = additive(k) ? orig + dir * 2 * step : orig * (1 + dir * step);
                if (!valid(c))
                    continue;
                apply_curves(p, c);
                if (predict(b, p, 1, d))
                    return -1;
                double e = train_mape(b);
                if (e < *best - 1e-9) {
                    *best = e;
                    best_v = *coord(c, k);
                    improved = 1;
                }
            }
            *coord(c, k) = best_v;
        }
        fprintf(stderr, "  round %d step %.3f %-17s = %-8.4g calibration MAPE %.3f%%\n", round,
                step, coord_names[k], *coord(c, k), *best);
    }
    return 0;
}

/* Evaluate c with launch_us = launch and all three alignment factors = al;
 * keep it in *bl, *ba if it beats *best. */
static int grid_point(bench *b, params *p, curves *c, double launch, double al, double *best,
                      double *bl, double *ba, ss_diag *d)
{
    c->launch_us = launch;
    c->align8 = c->align4 = c->align2 = al;
    apply_curves(p, c);
    if (predict(b, p, 1, d))
        return -1;
    double e = train_mape(b);
    fprintf(stderr, "  grid launch_us %-7.4g align %-5g calibration MAPE %.3f%%\n", launch, al, e);
    if (e < *best - 1e-9) {
        *best = e;
        *bl = launch;
        *ba = al;
    }
    return 0;
}

/* Calibration on the objective train_mape, from the start c (alignment
 * factors 1), in four steps:
 *   1. a coarse grid over the launch overhead (5 ... 50 us): it decides
 *      between a host-bound and a GPU-bound reading of the small kernels,
 *      two basins a local descent does not cross;
 *   2. one round of coordinate descent over the 8 curve, launch and
 *      bandwidth coordinates (step 0.4);
 *   3. a grid over one common alignment factor (1, 0.85, 0.7, 0.5) jointly
 *      with the launch overhead (x 0.8 ... 1.2, at most 60 us): a slower
 *      misaligned output layer goes with faster transformer layers, a move
 *      of several coordinates at once that the descent would not make;
 *   4. `rounds` rounds of descent over all 11 coordinates, the step halving
 *      every round from 0.4.
 * p gets the result. */
static int calibrate(bench *b, params *p, curves *c, int rounds, ss_diag *d)
{
    apply_curves(p, c);
    if (predict(b, p, 1, d))
        return -1;
    double best = train_mape(b);
    fprintf(stderr, "  start: calibration MAPE %.3f%%\n", best);
    static const double grid[] = {5, 10, 20, 30, 40, 50};
    double bl = c->launch_us, ba = c->align8;
    for (int i = 0; i < (int)(sizeof grid / sizeof grid[0]); i++)
        if (grid_point(b, p, c, grid[i], ba, &best, &bl, &ba, d))
            return -1;
    c->launch_us = bl;
    if (descend(b, p, c, 0, 8, 0.4, -1, &best, d))
        return -1;
    static const double agrid[] = {1, 0.85, 0.7, 0.5};
    static const double lscale[] = {0.8, 0.9, 1.0, 1.1, 1.2};
    double l0 = c->launch_us;
    bl = l0;
    ba = c->align8;
    for (int j = 0; j < (int)(sizeof agrid / sizeof agrid[0]); j++)
        for (int i = 0; i < (int)(sizeof lscale / sizeof lscale[0]); i++)
            if ((j || lscale[i] != 1.0) && l0 * lscale[i] <= 60 &&
                grid_point(b, p, c, l0 * lscale[i], agrid[j], &best, &bl, &ba, d))
                return -1;
    c->launch_us = bl;
    c->align8 = c->align4 = c->align2 = ba;
    double step = 0.4;
    for (int round = 0; round < rounds; round++, step /= 2)
        if (descend(b, p, c, 0, N_COORDS, step, round, &best, d))
            return -1;
    apply_curves(p, c);
    return 0;
}

static void print_params(FILE *f, const params *p)
{
    fprintf(f, "eff_flops (FLOPs per kernel -> efficiency):");
    for (int i = 0; i < p->nf; i++)
        fprintf(f, " %.0e:%.3f", p->fx[i], p->fy[i]);
    fprintf(f, "\neff_mem (bytes per kernel -> efficiency):");
    for (int i = 0; i < p->nm; i++)
        fprintf(f, " %.0e:%.3f", p->mx[i], p->my[i]);
    fprintf(f, "\nlaunch_us %.3f, nvswitch %.1f GB/s per direction, eff_align (8 / 4 / <=2-byte "
               "rows) %.3f %.3f %.3f, mb_overhead_us %.1f, dispatch_window %d\n",
            p->launch_us, p->gbps, p->align[0], p->align[1], p->align[2], p->mb_overhead_us,
            p->dispatch_window);
}

/* --------------------------------------------------------------- report */

/* ctx: {tp, half (-1 all, 0 held-out, 1 calibration)} */
static int sel_tp(const row *r, const void *ctx)
{
    const int *c = ctx;
    return r->tp == c[0] && (c[1] < 0 || r->train == c[1]);
}

static int sel_class(const row *r, const void *ctx)
{
    const int *c = ctx;
    return r->tp == c[0] && r->pp == c[1] && r->dp == c[2];
}

static int sel_model(const row *r, const void *ctx)
{
    const int *c = ctx;
    return r->hidden == c[0] && r->layers == c[1];
}

static void stats_line(FILE *f, const char *label, const stats *s)
{
    fprintf(f, "| %s | %d | %.2f | %.2f | %.2f | %.2f | %+.2f | %.3f | %.3f |\n", label, s->n,
            s->mean, s->median, s->p90, s->max, s->bias, s->spearman, s->pearson);
}

static const char *stats_head =
    "| rows | n | MAPE % | median APE % | p90 APE % | max APE % | bias % | Spearman | Pearson |\n"
    "|---|---|---|---|---|---|---|---|---|\n";

static int has_int3(const int *v, int n, const int *c)
{
    for (int i = 0; i < n; i++)
        if (v[3 * i] == c[0] && v[3 * i + 1] == c[1] && v[3 * i + 2] == c[2])
            return 1;
    return 0;
}

static int cmp_int3(const void *a, const void *b)
{
    const int *x = a, *y = b;
    for (int i = 0; i < 3; i++)
        if (x[i] != y[i])
            return (x[i] > y[i]) - (x[i] < y[i]);
    return 0;
}

static void report(FILE *f, const bench *b)
{
    stats s;
    int all = -1, tr = 1, te = 0;
    fprintf(f, "Overall (%d rows; calibration half = seeded random 50%%):\n\n%s", b->n, stats_head);
    compute(b, sel_half, &all, &s);
    stats_line(f, "all", &s);
    compute(b, sel_half, &tr, &s);
    stats_line(f, "calibration half", &s);
    compute(b, sel_half, &te, &s);
    stats_line(f, "held-out half", &s);
    int tp1[2] = {1, -1};
    compute(b, sel_tp, tp1, &s);
    stats_line(f, "tp = 1, all", &s);
    tp1[1] = 0;
    compute(b, sel_tp, tp1, &s);
    stats_line(f, "tp = 1, held-out", &s);

    /* by (tp, pp, dp) */
    int *cls = malloc((size_t)b->n * 3 * sizeof *cls), nc = 0;
    if (!cls)
        return;
    for (int i = 0; i < b->n; i++) {
        int c[3] = {b->rows[i].tp, b->rows[i].pp, b->rows[i].dp};
        if (!has_int3(cls, nc, c)) {
            memcpy(cls + 3 * nc, c, sizeof c);
            nc++;
        }
    }
    qsort(cls, (size_t)nc, 3 * sizeof *cls, cmp_int3);
    fprintf(f, "\nBy parallelism (tp, pp, dp), all rows:\n\n%s", stats_head);
    for (int i = 0; i < nc; i++) {
        char lab[64];
        snprintf(lab, sizeof lab, "tp=%d pp=%d dp=%d", cls[3 * i], cls[3 * i + 1], cls[3 * i + 2]);
        compute(b, sel_class, cls + 3 * i, &s);
        stats_line(f, lab, &s);
    }
    /* by model (hidden, layers) */
    nc = 0;
    for (int i = 0; i < b->n; i++) {
        int c[3] = {b->rows[i].hidden, b->rows[i].layers, 0};
        if (!has_int3(cls, nc, c)) {
            memcpy(cls + 3 * nc, c, sizeof c);
            nc++;
        }
    }
    qsort(cls, (size_t)nc, 3 * sizeof *cls, cmp_int3);
    fprintf(f, "\nBy model size, all rows:\n\n%s", stats_head);
    for (int i = 0; i < nc; i++) {
        char lab[64];
        int h = cls[3 * i], l = cls[3 * i + 1];
        double mparams = (12.0 * l * h * h + 13.0 * l * h + (GPT_VOCAB + 1024.0) * h) / 1e6;
        snprintf(lab, sizeof lab, "h=%d L=%d (%.0fM)", h, l, mparams);
        compute(b, sel_model, cls + 3 * i, &s);
        stats_line(f, lab, &s);
    }
    free(cls);

    /* worst 10 */
    int *ix = malloc((size_t)b->n * sizeof *ix);
    double *e = malloc((size_t)b->n * sizeof *e);
    if (ix && e) {
        for (int i = 0; i < b->n; i++) {
            ix[i] = i;
            e[i] = -ape(&b->rows[i]);
        }
        sort_key = e;
        qsort(ix, (size_t)b->n, sizeof *ix, cmp_ix);
        fprintf(f, "\nWorst 10 rows:\n\n| GPUs | global | micro | hidden | layers | tp | pp | dp "
                   "| measured ms | predicted ms | error %% |\n"
                   "|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (int k = 0; k < 10 && k < b->n; k++) {
            const row *r = &b->rows[ix[k]];
            fprintf(f, "| %d | %d | %d | %d | %d | %d | %d | %d | %.1f | %.1f | %+.1f |\n",
                    r->gpus, r->gbatch, r->mbatch, r->hidden, r->layers, r->tp, r->pp, r->dp,
                    r->measured_ms, r->predicted_ms,
                    (r->predicted_ms - r->measured_ms) / r->measured_ms * 100);
        }
    }
    free(ix);
    free(e);
}

static void summary(FILE *f, const char *label, const bench *b)
{
    stats s[3];
    int w[3] = {-1, 1, 0};
    for (int i = 0; i < 3; i++)
        compute(b, sel_half, &w[i], &s[i]);
    fprintf(f, "%s: MAPE all %.2f%% (median %.2f, max %.1f, bias %+.2f), calibration half %.2f%%, "
               "held-out %.2f%%; Spearman %.3f, Pearson %.3f\n",
            label, s[0].mean, s[0].median, s[0].max, s[0].bias, s[1].mean, s[2].mean,
            s[0].spearman, s[0].pearson);
}

/* Every row with its prediction, as CSV (for plots and analysis). */
static int write_predictions(const char *path, const bench *b)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench_vtrain: cannot write %s\n", path);
        return -1;
    }
    fprintf(f, "gpus,global_batch,micro_batch,hidden,heads,layers,seq,tp,dp,pp,measured_ms,"
               "predicted_ms,error_pct,half\n");
    for (int i = 0; i < b->n; i++) {
        const row *r = &b->rows[i];
        fprintf(f, "%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%.3f,%.3f,%.2f,%s\n", r->gpus, r->gbatch,
                r->mbatch, r->hidden, r->heads, r->layers, r->seq, r->tp, r->dp, r->pp,
                r->measured_ms, r->predicted_ms,
                (r->predicted_ms - r->measured_ms) / r->measured_ms * 100,
                r->train ? "calibration" : "held-out");
    }
    return fclose(f) ? -1 : 0;
}

/* ----------------------------------------------------------------- main */

static int usage(void)
{
    fprintf(stderr, "usage: bench_vtrain [--csv FILE] [--topology FILE] [--seed N] "
                    "[--markdown FILE] [--predictions FILE] [--jobs N]\n"
                    "                    [--evaluator auto|full|symmetry|hierarchical]\n"
                    "                    [--calibrate [--rounds N] [--fit-tp1]] [--limit N]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *csv = DEFAULT_CSV, *topo = "benchmarks/vtrain-a100x8.json", *md = NULL, *pred = NULL;
    uint64_t seed = 2024;
    int cal = 0, rounds = 4, limit = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--calibrate"))
            cal = 1;
        else if (!strcmp(a, "--fit-tp1"))
            fit_tp1 = 1;
        else if (!v)
            return usage();
        else if (!strcmp(a, "--csv"))
            csv = v, i++;
        else if (!strcmp(a, "--topology"))
            topo = v, i++;
        else if (!strcmp(a, "--markdown"))
            md = v, i++;
        else if (!strcmp(a, "--predictions"))
            pred = v, i++;
        else if (!strcmp(a, "--seed"))
            seed = strtoull(v, NULL, 10), i++;
        else if (!strcmp(a, "--rounds"))
            rounds = atoi(v), i++;
        else if (!strcmp(a, "--jobs"))
            jobs = atoi(v), i++;
        else if (!strcmp(a, "--limit"))
            limit = atoi(v), i++;
        else if (!strcmp(a, "--evaluator")) {
            if (ss_evaluator_parse(v, &evaluator))
                return usage();
            i++;
        } else
            return usage();
    }
    bench b;
    memset(&b, 0, sizeof b);
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    int rc = 1;
    if (load_csv(csv, &b))
        goto out;
    if (limit > 0 && limit < b.n)
        b.n = limit;
    if (ss_machine_load(topo, &m, &d) || ss_machine_n_devices(m) != NODE_GPUS ||
        ss_machine_n_links(m) < 1) {
        fprintf(stderr, "bench_vtrain: %s: %s\n", topo, d.msg[0] ? d.msg : "need 8 GPUs");
        goto out;
    }
    read_fabrics(m);
    if (!f_intra.present || (multi && !f_inter.present)) {
        fprintf(stderr, "bench_vtrain: %s: needs a compact topology with an \"nvswitch\" intra "
                        "fabric%s\n",
                topo, multi ? " and an \"infiniband\" inter fabric (the multi-node rows)" : "");
        goto out;
    }
    const ss_device_type *dt = ss_machine_type(m, ss_machine_device(m, 0)->type);
    devname = dt->name;
    params p;
    params_from(&p, dt, f_intra.gbps);
    ss_machine *big = NULL; /* for the multi-node file: as many nodes as its largest run */
    if (multi) {
        int most = 1;
        for (int i = 0; i < b.n; i++)
            if (b.rows[i].gpus / NODE_GPUS > most)
                most = b.rows[i].gpus / NODE_GPUS;
        if (make_machine(&p, most, &big, &d)) {
            fprintf(stderr, "bench_vtrain: %s\n", d.msg);
            goto out;
        }
    }
    double t0 = bench_wall_s();
    int prep = split(&b, seed) || prepare(&b, big ? big : m, &d);
    ss_machine_free(big);
    if (prep) {
        fprintf(stderr, "bench_vtrain: %s\n", d.msg);
        goto out;
    }
    double t_prep = bench_wall_s() - t0;
    t0 = bench_wall_s();
    if (predict(&b, &p, -1, &d)) {
        fprintf(stderr, "bench_vtrain: %s\n", d.msg);
        goto out;
    }
    double t_pred = bench_wall_s() - t0;
    printf("device %s, %d rows, %d graphs; models and plans built in %.2f s, rows predicted "
           "in %.2f s\n",
           devname, b.n, b.n_graphs, t_prep, t_pred);
    print_params(stdout, &p);
    summary(stdout, "as given", &b);
    if (cal) {
        t0 = bench_wall_s();
        /* A fixed start, whatever the topology says (so a re-calibration
         * retraces the same path): curves close to the uncalibrated big-GPU
         * tables, a 5 us launch, the NVSwitch line rate. */
        curves c = {0.8, 8.5, 0.35, 0.85, 5.0, 0.5, 5.0, 300.0, 1.0, 1.0, 1.0};
        if (!valid(&c)) {
            fprintf(stderr, "bench_vtrain: the topology's launch_us / bandwidth are outside the "
                            "calibration bounds\n");
            goto out;
        }
        if (calibrate(&b, &p, &c, rounds, &d) || predict(&b, &p, -1, &d)) {
            fprintf(stderr, "bench_vtrain: %s\n", d.msg);
            goto out;
        }
        printf("calibrated in %.1f s (%d rounds, seed %llu%s):\n", bench_wall_s() - t0, rounds,
               (unsigned long long)seed, fit_tp1 ? ", fitted on tp = 1 rows" : "");
        printf("curves: flops top %.4f half 10^%.3f slope %.4f; mem top %.4f half 10^%.3f "
               "slope %.4f\n",
               c.f_top, c.f_log_half, c.f_slope, c.m_top, c.m_log_half, c.m_slope);
        print_params(stdout, &p);
        summary(stdout, "calibrated", &b);
    }
    if (md) {
        FILE *f = fopen(md, "w");
        if (!f) {
            fprintf(stderr, "bench_vtrain: cannot write %s\n", md);
            goto out;
        }
        fprintf(f, "Device %s (%s), %d rows, split seed %llu, all rows predicted in %.2f s "
                "(evaluator %s).\n",
                devname, topo, b.n, (unsigned long long)seed, t_pred, ss_evaluator_name(evaluator));
        fprintf(f, "Parameters: ");
        print_params(f, &p);
        fprintf(f, "\n");
        report(f, &b);
        fclose(f);
    } else {
        printf("\n");
        report(stdout, &b);
    }
    if (pred && write_predictions(pred, &b))
        goto out;
    rc = 0;
out:
    ss_machine_free(m);
    bench_free(&b);
    return rc;
}
