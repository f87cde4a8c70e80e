/*
 * cmd_whatif.c — `simsearch whatif`: what-if capacity planning. Sweeps node
 * counts x device types x fabrics x precision x batch (or the scenarios of a
 * JSON file) on a compact topology, plans every point with the LLM planner
 * (search/whatif.h) and reports a table, CSV, JSON and a plot.
 *
 * Ctrl-C or SIGTERM stops the sweep: the points that finished are kept and
 * reported (with every output), the rest listed as not run; a second signal
 * ends the program at once. Progress (points done, ETA) goes to stderr: a
 * line redrawn in place on a terminal, else one line every 10 s.
 */
#include "cli.h"
#include "plot.h"
#include "search/whatif.h"

#include <ctype.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_AXIS 64
#define PROGRESS_EVERY_S 10.0

typedef struct wopts {
    ss_cli_common c; /* model, topology, json (--nodes and --batch are lists here) */
    const char *nodes, *devtypes, *inter, *inter_scale, *intra, *precision, *batch, *scenarios,
        *tokens, *price, *csv, *plot;
    long long level, budget, seed, threads;
    double time_per_point;
} wopts;

static const ss_cli_optdef options[] = {
    SS_CLI_ROW_MODEL(wopts),
    SS_CLI_STR_ROW(wopts, "--topology", "FILE", c.topology, 1,
                   "a compact topology JSON (nodes x devices_per_node)"),
    SS_CLI_STR_ROW(wopts, "--nodes", "LIST", nodes, 0,
                   "node counts: 4,8,16 or a range A..B (doubling) or A..B+S\n"
                   "(default: the topology's)"),
    SS_CLI_STR_ROW(wopts, "--device-type", "LIST", devtypes, 0,
                   "device types swapped in (built-in names, or a prefix naming\n"
                   "one: H100 = H100-SXM); the fabrics stay the topology's"),
    SS_CLI_STR_ROW(wopts, "--inter-gbps", "LIST", inter, 0,
                   "inter-node NIC line rate in Gb/s (bits: 200 = HDR, 400 = NDR);\n"
                   "the NIC's PCIe path scales with it"),
    SS_CLI_STR_ROW(wopts, "--inter-scale", "LIST", inter_scale, 0,
                   "factors on the NIC rate and its PCIe path (instead of\n--inter-gbps)"),
    SS_CLI_STR_ROW(wopts, "--intra-gbps", "LIST", intra, 0,
                   "intra-node fabric rate per device in Gb/s (NVSwitch A100:\n2400)"),
    SS_CLI_STR_ROW(wopts, "--precision", "LIST", precision, 0,
                   "model precisions (gpt, llama: bf16, fp16, fp8)"),
    SS_CLI_STR_ROW(wopts, "--batch", "LIST", batch, 0,
                   "global batch sizes (default: the model's for the device count)"),
    SS_CLI_STR_ROW(wopts, "--scenarios", "FILE", scenarios, 0,
                   "named scenarios (JSON, docs/search.md) instead of the\n"
                   "device/fabric/precision/batch axes; crossed with --nodes"),
    SS_CLI_STR_ROW(wopts, "--tokens", "N", tokens, 0,
                   "tokens to train on (300e9, 300B, 1.4T): days to train"),
    SS_CLI_STR_ROW(wopts, "--price", "LIST", price, 0,
                   "TYPE=USD per GPU hour, ...: the cost to train (with --tokens);\n"
                   "TYPE is a device type or a prefix (H100=2.5)"),
    SS_CLI_INT_ROW(wopts, "--level", "L", level, 0, 3,
                   "planner level per point (default 0: rules; docs/search.md)"),
    SS_CLI_INT_ROW(wopts, "--budget", "N", budget, 1, 1LL << 40,
                   "planner proposals per point (default: the planner's)"),
    SS_CLI_REAL_ROW(wopts, "--time-per-point", "S", time_per_point, 0, 1e6,
                    "each point's time limit (0: none, the default; a limit\n"
                    "makes plans depend on machine load)"),
    SS_CLI_INT_ROW(wopts, "--seed", "N", seed, 0, 1LL << 62, "random seed (default 1)"),
    SS_CLI_INT_ROW(wopts, "--threads", "N", threads, 1, 64,
                   "points planned at once (default: all cores; each point's\n"
                   "planner runs on one thread, as simsearch --threads 1)"),
    SS_CLI_STR_ROW(wopts, "--csv", "FILE", csv, 0, "write one CSV row per point (\"-\": stdout)"),
    SS_CLI_ROW_JSON(wopts, "print one JSON object instead of the table"),
    SS_CLI_STR_ROW(wopts, "--plot", "FILES", plot, 0,
                   "throughput, MFU, scaling efficiency and cost against time\n"
                   "to train (FILE.svg or FILE.png, PLplot; up to 4 files,\n"
                   "comma-separated)"),
    {NULL, SS_CLI_FLAG, NULL, 0, 0, 0, 0, 0, 0, NULL},
};

const ss_cli_cmddef ss_cli_def_whatif = {
    "whatif",
    "what-if capacity planning: sweep GPUs, device types, fabrics, precision, batch",
    "Plan the model at every point of a sweep -- node counts x device types x\n"
    "inter-node and intra-node fabrics x precision x global batch, or named\n"
    "scenarios x node counts -- and report each point's best plan, iteration time,\n"
    "samples/s, tokens/s, MFU, peak memory and Megatron-LM flags; with --tokens\n"
    "and --price the days and dollars to train. Points where no plan fits are\n"
    "reported with the least bad plan's shortfall. Each point equals the single\n"
    "run 'simsearch --threads 1' with the same --seed, --level and --budget on\n"
    "the changed topology. Ctrl-C keeps the points that finished.",
    options,
    NULL,
    0,
    "CSV columns (stable; docs/search.md, \"What-if sweeps\"): point, scenario,\n"
    "nodes, gpus, device_type, inter_gbit_per_s, inter_GB_per_s, pcie_GB_per_s,\n"
    "intra_GB_per_s, precision, batch, state (fits, no-fit, failed, not-run),\n"
    "iteration_ms, samples_per_s, tokens_per_s, mfu, tflops_per_gpu, peak_mem_GiB,\n"
    "mem_capacity_GiB, shortfall_GiB, plan, tp, pp, dp, mbs, vp, recompute, sp,\n"
    "distopt, megatron_args, days, usd_per_gpu_hour, cost_usd, level,\n"
    "time_dependent, search_cpu_s, changes, error.\n"
    "Exit status: 0 the sweep ran (also with points that do not fit, and when\n"
    "interrupted), 2 bad usage or input (or a point could not be planned), 1\n"
    "input/output or system failures.",
};

/* ---- parsing lists ----------------------------------------------------------------- */

static int split(const char *s, char *buf, size_t cap, char **items)
{
    return ss_cli_split(s, buf, cap, items, MAX_AXIS);
}

static int bad(const char *opt, const char *fmt, const char *val)
{
    return ss_cli_bad_value("whatif", opt, fmt, val);
}

static int parse_real(const char *s, double lo, double hi, double *out)
{
    return ss_cli_parse_real(s, lo, hi, out) ? -1 : 0;
}

/* --nodes: "4,8,16", "32..512" (doubling) or "A..B+S". */
static int parse_nodes(const char *s, int *out, int *n)
{
    *n = 0;
    long long a, b, step = 0;
    char tail[64] = "";
    if (strstr(s, "..")) {
        int k = sscanf(s, "%lld..%lld%63s", &a, &b, tail);
        if (k < 2 || (k == 3 && (sscanf(tail, "+%lld", &step) != 1 || step < 1)) || a < 1 ||
            b < a || b > SS_CLI_MAX_NODES)
            return bad("--nodes", "expected A..B (doubling) or A..B+S with 1 <= A <= B <= 65536, "
                                  "got \"%s\"",
                       s);
        for (long long v = a; v <= b; v = step ? v + step : v * 2) {
            if (*n >= MAX_AXIS)
                return bad("--nodes", "more than 64 node counts in \"%s\"", s);
            out[(*n)++] = (int)v;
        }
        return 0;
    }
    char buf[1024], *it[MAX_AXIS + 1];
    int m = split(s, buf, sizeof buf, it);
    if (m == 0 || m > MAX_AXIS)
        return bad("--nodes", "expected 1 to 64 node counts, got \"%s\"", s);
    for (int i = 0; i < m; i++) {
        long long v;
        if (ss_cli_parse_ll(it[i], 1, SS_CLI_MAX_NODES, &v))
            return bad("--nodes", "expected node counts in 1..65536, got \"%s\"", s);
        out[(*n)++] = (int)v;
    }
    return 0;
}

static int parse_reals(const char *opt, const char *s, double lo, double hi, double *out, int *n)
{
    char buf[1024], *it[MAX_AXIS + 1];
    *n = split(s, buf, sizeof buf, it);
    if (*n == 0 || *n > MAX_AXIS)
        return bad(opt, "expected 1 to 64 values, got \"%s\"", s);
    for (int i = 0; i < *n; i++)
        if (parse_real(it[i], lo, hi, &out[i])) {
            char why[128];
            snprintf(why, sizeof why, "expected numbers in [%g, %g], got \"%%s\"", lo, hi);
            return bad(opt, why, s);
        }
    return 0;
}

/* --tokens: a number with an optional K, M, B (or G) or T suffix. */
static int parse_tokens(const char *s, double *out)
{
    char num[64];
    size_t n = strlen(s);
    double mul = 1;
    if (n > 0 && n < sizeof num) {
        switch (toupper((unsigned char)s[n - 1])) {
        case 'K': mul = 1e3; break;
        case 'M': mul = 1e6; break;
        case 'B': case 'G': mul = 1e9; break;
        case 'T': mul = 1e12; break;
        default: break;
        }
        snprintf(num, sizeof num, "%.*s", (int)(mul > 1 ? n - 1 : n), s);
        if (!parse_real(num, 1, 1e18 / mul, out)) {
            *out *= mul;
            return 0;
        }
    }
    return bad("--tokens", "expected a token count (300e9, 300B, 1.4T), got \"%s\"", s);
}

/* ---- the sweep's axes into scenarios ------------------------------------------------------ */

typedef struct axes {
    int nodes[MAX_AXIS], n_nodes;
    const ss_device_type *dev[MAX_AXIS];
    int n_dev;
    double inter[MAX_AXIS], scale[MAX_AXIS], intra[MAX_AXIS];
    int n_inter, n_scale, n_intra;
    char prec[MAX_AXIS][16];
    int n_prec;
    long long batch[MAX_AXIS];
    int n_batch;
    ss_whatif_price prices[MAX_AXIS];
    int n_prices;
    double tokens;
} axes;

static int parse_axes(const wopts *o, axes *a)
{
    memset(a, 0, sizeof *a);
    int rc;
    char buf[1024], *it[MAX_AXIS + 1];
    if (o->nodes && (rc = parse_nodes(o->nodes, a->nodes, &a->n_nodes)))
        return rc;
    if (o->devtypes) {
        a->n_dev = split(o->devtypes, buf, sizeof buf, it);
        if (a->n_dev == 0 || a->n_dev > MAX_AXIS)
            return bad("--device-type", "expected 1 to 64 device types, got \"%s\"", o->devtypes);
        for (int i = 0; i < a->n_dev; i++) {
            int nm = 0;
            a->dev[i] = ss_whatif_find_devtype(it[i], &nm);
            if (!a->dev[i]) {
                char names[1024] = "";
                for (int k = 0; k < ss_devtype_builtin_count(); k++)
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                             k ? ", " : "", ss_devtype_builtin(k)->name);
                return ss_cli_usage_error("whatif",
                                          "--device-type: \"%s\" %s (built-ins: %s)", it[i],
                                          nm > 1 ? "names several device types"
                                                 : "is no device type",
                                          names);
            }
        }
    }
    if (o->inter && o->inter_scale)
        return ss_cli_usage_error("whatif", "--inter-gbps and --inter-scale both given "
                                            "(expected one of them)");
    if (o->inter && (rc = parse_reals("--inter-gbps", o->inter, 1e-3, 1e7, a->inter, &a->n_inter)))
        return rc;
    if (o->inter_scale &&
        (rc = parse_reals("--inter-scale", o->inter_scale, 1e-3, 1e3, a->scale, &a->n_scale)))
        return rc;
    if (o->intra && (rc = parse_reals("--intra-gbps", o->intra, 1e-3, 1e7, a->intra, &a->n_intra)))
        return rc;
    if (o->precision) {
        a->n_prec = split(o->precision, buf, sizeof buf, it);
        if (a->n_prec == 0 || a->n_prec > MAX_AXIS)
            return bad("--precision", "expected 1 to 64 precisions, got \"%s\"", o->precision);
        for (int i = 0; i < a->n_prec; i++) {
            if (strcmp(it[i], "bf16") && strcmp(it[i], "fp16") && strcmp(it[i], "fp8"))
                return bad("--precision", "expected bf16, fp16 or fp8, got \"%s\"", it[i]);
            snprintf(a->prec[i], sizeof a->prec[i], "%s", it[i]);
        }
    }
    if (o->batch) {
        a->n_batch = split(o->batch, buf, sizeof buf, it);
        if (a->n_batch == 0 || a->n_batch > MAX_AXIS)
            return bad("--batch", "expected 1 to 64 batch sizes, got \"%s\"", o->batch);
        for (int i = 0; i < a->n_batch; i++)
            if (ss_cli_parse_ll(it[i], 1, SS_CLI_MAX_BATCH, &a->batch[i]))
                return bad("--batch", "expected batch sizes in 1..2^32, got \"%s\"", o->batch);
    }
    if (o->scenarios && (o->devtypes || o->inter || o->inter_scale || o->intra || o->precision ||
                         o->batch))
        return ss_cli_usage_error("whatif", "--scenarios replaces --device-type, --inter-gbps, "
                                            "--inter-scale, --intra-gbps, --precision and "
                                            "--batch (give it alone, with --nodes)");
    if (o->tokens && (rc = parse_tokens(o->tokens, &a->tokens)))
        return rc;
    if (o->price) {
        a->n_prices = split(o->price, buf, sizeof buf, it);
        if (a->n_prices == 0 || a->n_prices > MAX_AXIS)
            return bad("--price", "expected TYPE=USD,..., got \"%s\"", o->price);
        for (int i = 0; i < a->n_prices; i++) {
            char *eq = strchr(it[i], '=');
            if (!eq || eq == it[i] || (size_t)(eq - it[i]) >= SS_NAME_MAX ||
                parse_real(eq + 1, 1e-6, 1e6, &a->prices[i].usd_per_gpu_hour))
                return bad("--price", "expected TYPE=USD_PER_GPU_HOUR (H100=2.5), got \"%s\"",
                           it[i]);
            snprintf(a->prices[i].type, sizeof a->prices[i].type, "%.*s", (int)(eq - it[i]),
                     it[i]);
        }
        if (!o->tokens)
            return ss_cli_usage_error("whatif", "--price needs --tokens (the cost is that of "
                                                "training on them)");
    }
    return 0;
}

/* Name a scenario by the axes that vary (those of one value hold for every
 * point and are said once, in the changes); no varying axis: unnamed. */
static void name_by_varying(const axes *a, ss_whatif_scenario *s)
{
    ss_whatif_scenario v;
    memset(&v, 0, sizeof v);
    if (a->n_dev > 1)
        snprintf(v.device_type, sizeof v.device_type, "%s", s->device_type);
    if (a->n_inter > 1)
        v.inter_gbps = s->inter_gbps;
    if (a->n_scale > 1)
        v.inter_scale = s->inter_scale;
    if (a->n_intra > 1)
        v.intra_gbps = s->intra_gbps;
    if (a->n_prec > 1)
        snprintf(v.precision, sizeof v.precision, "%s", s->precision);
    if (a->n_batch > 1)
        v.batch = s->batch;
    char buf[128];
    if (a->n_dev > 1 || a->n_inter > 1 || a->n_scale > 1 || a->n_intra > 1 || a->n_prec > 1 ||
        a->n_batch > 1)
        snprintf(s->name, sizeof s->name, "%.63s", ss_whatif_scenario_label(&v, buf, sizeof buf));
}

/* The cross product of the axes as scenarios (device-type-major). */
static ss_whatif_scenario *cross(const axes *a, int *n)
{
    int nd = a->n_dev ? a->n_dev : 1, ni = a->n_inter ? a->n_inter : a->n_scale ? a->n_scale : 1;
    int nt = a->n_intra ? a->n_intra : 1, np = a->n_prec ? a->n_prec : 1;
    int nb = a->n_batch ? a->n_batch : 1;
    long long total = (long long)nd * ni * nt * np * nb;
    if (total > 4096)
        return NULL;
    ss_whatif_scenario *s = ss_calloc((size_t)total, sizeof *s);
    if (!s)
        return NULL;
    int k = 0;
    for (int id = 0; id < nd; id++)
        for (int ii = 0; ii < ni; ii++)
            for (int it = 0; it < nt; it++)
                for (int ip = 0; ip < np; ip++)
                    for (int ib = 0; ib < nb; ib++, k++) {
                        if (a->n_dev)
                            snprintf(s[k].device_type, sizeof s[k].device_type, "%s",
                                     a->dev[id]->name);
                        if (a->n_inter)
                            s[k].inter_gbps = a->inter[ii];
                        if (a->n_scale)
                            s[k].inter_scale = a->scale[ii];
                        if (a->n_intra)
                            s[k].intra_gbps = a->intra[it];
                        if (a->n_prec)
                            snprintf(s[k].precision, sizeof s[k].precision, "%s", a->prec[ip]);
                        if (a->n_batch)
                            s[k].batch = a->batch[ib];
                        name_by_varying(a, &s[k]);
                    }
    *n = k;
    return s;
}

/* ---- Ctrl-C and progress ---------------------------------------------------------------- */

static void progress_cb(void *ctx, const ss_whatif_progress *p)
{
    int tty = ctx != NULL;
    char eta[32] = "ETA unknown";
    if (p->eta_s >= 0)
        snprintf(eta, sizeof eta, "ETA %.0f s", p->eta_s);
    fprintf(stderr, "%swhatif: %d/%d points done, %d running, %.0f s, %s%s", tty ? "\r" : "",
            p->done, p->total, p->running, p->elapsed_s, eta, tty ? "   " : "\n");
    fflush(stderr);
}

/* ---- report ------------------------------------------------------------------------------ */

static const char *scen_label(const ss_whatif_config *c, int s, char *buf, size_t cap)
{
    if (!c->n_scenarios)
        return snprintf(buf, cap, "as is"), buf;
    return ss_whatif_scenario_label(&c->scenarios[s], buf, cap);
}

static void print_table(const ss_whatif_config *c, const ss_whatif_result *r)
{
    char lab[128], b1[32], b2[32];
    printf("simsearch whatif: %s on %s, %d points (%d done%s), %d threads, %.1f s wall, %.1f s "
           "CPU\n",
           c->model, c->topology, r->n_points, r->n_done, r->interrupted ? ", interrupted" : "",
           r->threads, r->wall_s, r->cpu_s);
    printf("each point: the LLM planner, level %s, budget %s, seed %llu, one thread%s\n",
           c->level ? (snprintf(b1, sizeof b1, "%d", c->level - 1), b1) : "default",
           c->budget ? (snprintf(b2, sizeof b2, "%lld", (long long)c->budget), b2) : "default",
           (unsigned long long)c->seed, c->time_per_point_s > 0 ? ", time-limited" : "");
    int has_days = c->tokens > 0, has_cost = c->n_prices > 0;
    printf("\n%-26s %6s %-34s %10s %10s %6s %7s %9s", "scenario", "GPUs", "plan", "iter s",
           "tokens/s", "MFU", "TF/GPU", "peak mem");
    if (has_days)
        printf(" %7s", "days");
    if (has_cost)
        printf(" %9s", "cost $M");
    printf("\n");
    for (int i = 0; i < r->n_points; i++) {
        const ss_whatif_point *p = &r->points[i];
        char plan[64] = "", mem[32];
        scen_label(c, p->scenario, lab, sizeof lab);
        if (p->tp)
            snprintf(plan, sizeof plan, "tp%d pp%d dp%d mbs%d%s%s", p->tp, p->pp, p->dp, p->mbs,
                     p->vp > 1 ? " vp" : "", p->vp > 1 ? (snprintf(b1, sizeof b1, "%d", p->vp), b1)
                                                       : "");
        else if (p->plan[0])
            snprintf(plan, sizeof plan, "%.33s", p->plan);
        printf("%-26.26s %6d ", lab, p->gpus);
        switch (p->state) {
        case SS_WHATIF_FITS:
            printf("%-34s %10.2f %10s %5.1f%% %7.1f %9s", plan, p->iteration_ms / 1000,
                   ss_cli_si(p->tokens_per_s, b1, sizeof b1), 100 * p->mfu, p->tflops_per_gpu,
                   ss_cli_bytes(p->peak_mem_bytes, mem, sizeof mem));
            if (has_days)
                printf(" %7.1f", p->days);
            if (has_cost)
                printf(" %9.2f", p->cost_usd / 1e6);
            break;
        case SS_WHATIF_NO_FIT:
            printf("DOES NOT FIT: the least bad plan is short by %s per device (%s)",
                   ss_cli_bytes(p->shortfall_bytes, mem, sizeof mem), plan);
            break;
        case SS_WHATIF_FAILED:
            printf("FAILED: %s", p->error);
            break;
        default:
            printf("not run (interrupted)");
        }
        printf("\n");
    }
    printf("\nwhat changed per scenario (the rest as in %s):\n", c->topology);
    for (int s = 0; s < (c->n_scenarios ? c->n_scenarios : 1); s++)
        for (int i = 0; i < r->n_points; i++)
            if (r->points[i].scenario == s) {
                printf("  %-26s %s\n", scen_label(c, s, lab, sizeof lab), r->points[i].changes);
                break;
            }
    if (has_days)
        printf("days = %.3g tokens / tokens per second; cost = days x 24 x GPUs x price per GPU "
               "hour\n",
               c->tokens);
    printf("MFU = model FLOPs (3 x forward, no recomputation) / (GPUs x dense peak x time)\n");
}

/* ---- plot ---------------------------------------------------------------------------------- */

/* Indices (into r->points) of the fitting points of scenario s, in node order. */
static int scenario_points(const ss_whatif_result *r, int s, int *idx)
{
    int n = 0;
    for (int i = 0; i < r->n_points; i++)
        if (r->points[i].scenario == s && r->points[i].state == SS_WHATIF_FITS)
            idx[n++] = i;
    return n;
}

static int add_or_fail(ss_plot *pl, const ss_plot_series *s, ss_diag *d)
{
    return ss_plot_add(pl, s, d) == SS_OK ? 0 : -1;
}

static int write_plot(const ss_whatif_config *c, const ss_whatif_result *r, const char *path)
{
    ss_diag d;
    ss_diag_init(&d);
    char title[256], sub[768];
    snprintf(title, sizeof title, "What if: %s on %s", c->model, c->topology);
    long long batch = 0;
    int mixed = 0;
    for (int i = 0; i < r->n_points; i++)
        if (r->points[i].state == SS_WHATIF_FITS || r->points[i].state == SS_WHATIF_NO_FIT) {
            if (batch && r->points[i].batch != batch)
                mixed = 1;
            batch = r->points[i].batch;
        }
    char bs[64], lv[32], tk[64] = "";
    if (mixed || !batch)
        snprintf(bs, sizeof bs, "batch per scenario");
    else
        snprintf(bs, sizeof bs, "global batch %lld", batch);
    if (c->level)
        snprintf(lv, sizeof lv, "level %d", c->level - 1);
    else
        snprintf(lv, sizeof lv, "default level");
    if (c->tokens > 0)
        snprintf(tk, sizeof tk, ", %.3g tokens", c->tokens);
    char bud[48] = "the planner's default budget";
    if (c->budget > 0)
        snprintf(bud, sizeof bud, "budget %lld", (long long)c->budget);
    snprintf(sub, sizeof sub,
             "%s%s; each point: the best plan of simsearch's LLM planner\n"
             "(%s, %s, seed %llu), judged by its simulator; a swapped device type\n"
             "keeps the topology's fabrics; a faster NIC scales its PCIe path with it; MFU "
             "counts no recomputation",
             bs, tk, lv, bud, (unsigned long long)c->seed);
    ss_plot *pl = ss_plot_new(title, sub);
    if (pl)
        ss_plot_figure_legend(pl, 1);
    int n_scen = c->n_scenarios ? c->n_scenarios : 1, rc = 0;
    int *idx = ss_calloc((size_t)r->n_points + 1, sizeof *idx);
    double *x = ss_calloc((size_t)r->n_points + 1, sizeof *x),
           *y = ss_calloc((size_t)r->n_points + 1, sizeof *y),
           *y2 = ss_calloc((size_t)r->n_points + 1, sizeof *y2);
    if (!pl || !idx || !x || !y || !y2) {
        ss_plot_free(pl);
        ss_free(idx), ss_free(x), ss_free(y), ss_free(y2);
        fprintf(stderr, "simsearch: out of memory\n");
        return SS_EXIT_FAIL;
    }
    static const char *const ylab[3] = {"tokens/s (millions)", "MFU (%)",
                                        "efficiency (%)"};
    static const char *const ttl[3] = {"Throughput against GPUs", "Model FLOPs utilisation",
                                       "Scaling efficiency (per GPU, vs the fewest GPUs)"};
    for (int panel = 0; panel < 3 && !rc; panel++) {
        ss_plot_axes ax = {0};
        ax.title = ttl[panel];
        ax.xlabel = "GPUs";
        ax.ylabel = ylab[panel];
        ax.logx = 1;
        ax.y_from_zero = 1;
        ax.legend = panel == 0 ? SS_PLOT_LEGEND_TOP_LEFT : SS_PLOT_LEGEND_BOTTOM_LEFT;
        rc = ss_plot_panel(pl, &ax, &d) == SS_OK ? 0 : -1;
        for (int s = 0; s < n_scen && !rc; s++) {
            int n = scenario_points(r, s, idx); /* added even when empty: series k of
                                                     every panel is scenario k */
            const ss_whatif_point *p0 = n > 0 ? &r->points[idx[0]] : NULL;
            for (int k = 0; k < n; k++) {
                const ss_whatif_point *p = &r->points[idx[k]];
                x[k] = p->gpus;
                y[k] = panel == 0   ? p->tokens_per_s / 1e6
                       : panel == 1 ? 100 * p->mfu
                                    : 100 * (p->tokens_per_s / p->gpus) /
                                          (p0->tokens_per_s / p0->gpus);
            }
            char lab[128];
            ss_plot_series se = {scen_label(c, s, lab, sizeof lab), x, y, n,
                                 SS_PLOT_LINE_MARKERS, 0, NULL};
            rc = add_or_fail(pl, &se, &d);
        }
    }
    /* Cost against time to train, the Pareto frontier marked; without a
     * price, iteration time against GPUs. */
    int m = 0;
    double unit = 1;
    for (int i = 0; i < r->n_points; i++)
        if (r->points[i].state == SS_WHATIF_FITS && r->points[i].cost_usd > 0)
            idx[m++] = i;
    if (!rc && m > 0) {
        ss_plot_axes ax = {0};
        ax.title = "Cost against time to train (Pareto set ringed)";
        ax.xlabel = "days to train";
        double maxc = 0;
        for (int k = 0; k < m; k++)
            maxc = fmax(maxc, r->points[idx[k]].cost_usd);
        unit = maxc >= 1e6 ? 1e6 : maxc >= 1e3 ? 1e3 : 1;
        ax.ylabel = unit == 1e6 ? "cost (million USD)" : unit == 1e3 ? "cost (thousand USD)"
                                                                      : "cost (USD)";
        ax.y_from_zero = 1;
        ax.legend = SS_PLOT_LEGEND_TOP_RIGHT;
        rc = ss_plot_panel(pl, &ax, &d) == SS_OK ? 0 : -1;
        for (int s = 0; s < n_scen && !rc; s++) {
            int n = 0;
            for (int k = 0; k < m; k++)
                if (r->points[idx[k]].scenario == s) {
                    x[n] = r->points[idx[k]].days;
                    y[n++] = r->points[idx[k]].cost_usd / unit;
                }
            char lab[128];
            ss_plot_series se = {scen_label(c, s, lab, sizeof lab), x, y, n, SS_PLOT_MARKERS, 0,
                                 NULL};
            rc = add_or_fail(pl, &se, &d);
        }
        /* the frontier: no other point both faster and cheaper; by days */
        int nf = 0;
        int *fi = ss_calloc((size_t)m, sizeof *fi);
        char (*labs)[48] = ss_calloc((size_t)m, sizeof *labs);
        const char **lp = ss_calloc((size_t)m, sizeof *lp);
        for (int k = 0; fi && labs && lp && k < m; k++) {
            const ss_whatif_point *p = &r->points[idx[k]];
            int dominated = 0;
            for (int j = 0; j < m && !dominated; j++) {
                const ss_whatif_point *q = &r->points[idx[j]];
                dominated = j != k && q->days <= p->days && q->cost_usd <= p->cost_usd &&
                            (q->days < p->days || q->cost_usd < p->cost_usd || j < k);
            }
            if (!dominated)
                fi[nf++] = idx[k];
        }
        for (int a = 1; a < nf; a++) /* insertion sort by days */
            for (int b = a; b > 0 && r->points[fi[b]].days < r->points[fi[b - 1]].days; b--) {
                int t = fi[b];
                fi[b] = fi[b - 1], fi[b - 1] = t;
            }
        for (int k = 0; k < nf; k++) {
            const ss_whatif_point *p = &r->points[fi[k]];
            x[k] = p->days;
            y[k] = p->cost_usd / unit;
            snprintf(labs[k], sizeof labs[k], "%d x %.12s", p->gpus, p->device_type);
            lp[k] = labs[k];
        }
        ss_plot_series fr = {"Pareto frontier", x, y, nf, SS_PLOT_FRONTIER, 0x111111, lp};
        if (!rc && nf > 0)
            rc = add_or_fail(pl, &fr, &d);
        ss_free(fi), ss_free(labs), ss_free(lp);
    } else if (!rc) {
        ss_plot_axes ax = {0};
        ax.title = "Iteration time against GPUs";
        ax.xlabel = "GPUs";
        ax.ylabel = "iteration time (s)";
        ax.logx = 1;
        ax.y_from_zero = 1;
        ax.legend = SS_PLOT_LEGEND_TOP_RIGHT;
        rc = ss_plot_panel(pl, &ax, &d) == SS_OK ? 0 : -1;
        for (int s = 0; s < n_scen && !rc; s++) {
            int n = scenario_points(r, s, idx);
            for (int k = 0; k < n; k++)
                x[k] = r->points[idx[k]].gpus, y[k] = r->points[idx[k]].iteration_ms / 1000;
            char lab[128];
            ss_plot_series se = {scen_label(c, s, lab, sizeof lab), x, y, n,
                                 SS_PLOT_LINE_MARKERS, 0, NULL};
            rc = add_or_fail(pl, &se, &d);
        }
    }
    if (!rc && ss_plot_write(pl, path, &d) != SS_OK)
        rc = -1;
    ss_plot_free(pl);
    ss_free(idx), ss_free(x), ss_free(y), ss_free(y2);
    if (rc) {
        fprintf(stderr, "simsearch whatif: --plot %s: %s\n", path, d.msg);
        return SS_EXIT_FAIL;
    }
    return SS_EXIT_OK;
}

/* ---- the command ---------------------------------------------------------------------------- */

static int run(const wopts *o)
{
    axes a;
    int rc = parse_axes(o, &a);
    if (rc)
        return rc;
    char pbuf[1024], *plots[MAX_AXIS + 1];
    int n_plots = o->plot ? split(o->plot, pbuf, sizeof pbuf, plots) : 0;
    if (o->plot && (n_plots == 0 || n_plots > 4))
        return bad("--plot", "expected 1 to 4 files, got \"%s\"", o->plot);
    for (int i = 0; i < n_plots; i++)
        if (!ss_plot_path_ok(plots[i]))
            return bad("--plot", "expected file names ending in .svg or .png, got \"%s\"",
                       plots[i]);
    const ss_cli_output scenarios = {"--scenarios", o->scenarios};
    ss_cli_output outs[6] = {{"--csv", o->csv}};
    for (int i = 0; i < n_plots; i++)
        outs[1 + i].flag = "--plot", outs[1 + i].path = plots[i];
    int taken = 0;
    if ((rc = ss_cli_check_inputs("whatif", &o->c, &scenarios, outs, &taken)))
        return rc;
    ss_diag d;
    ss_diag_init(&d);
    ss_whatif_scenario *scen = NULL;
    int n_scen = 0;
    if (o->scenarios) {
        if (ss_whatif_load_scenarios(o->scenarios, &scen, &n_scen, &d) != SS_OK)
            return ss_cli_fail(&d);
    } else if (o->devtypes || o->inter || o->inter_scale || o->intra || o->precision ||
               o->batch) {
        scen = cross(&a, &n_scen);
        if (!scen)
            return ss_cli_usage_error("whatif", "more than 4096 scenarios in the cross product "
                                                "of the axes (or out of memory)");
    }
    ss_whatif_config c;
    memset(&c, 0, sizeof c);
    c.model = o->c.model;
    c.topology = o->c.topology;
    c.nodes = a.nodes;
    c.n_nodes = a.n_nodes;
    c.scenarios = scen;
    c.n_scenarios = n_scen;
    c.level = SS_SEARCH_LEVEL((int)o->level);
    c.budget = o->budget;
    c.time_per_point_s = o->time_per_point;
    c.seed = (uint64_t)o->seed;
    c.threads = (int)o->threads;
    c.tokens = a.tokens;
    c.prices = a.prices;
    c.n_prices = a.n_prices;
    c.stop = ss_cli_stop_cb;
    int tty = isatty(STDERR_FILENO);
    static int tty_ctx;
    c.progress = progress_cb;
    c.ctx = tty ? &tty_ctx : NULL;
    c.progress_every_s = tty ? 0.5 : PROGRESS_EVERY_S;
    ss_whatif_result r;
    ss_status st = ss_whatif_run(&c, &r, &d);
    if (tty)
        fprintf(stderr, "\r%78s\r", "");
    if (st != SS_OK) {
        ss_free(scen);
        return ss_cli_fail(&d);
    }
    if (o->csv && ss_whatif_write_csv(&c, &r, o->csv, &d) != SS_OK)
        rc = ss_cli_fail(&d);
    for (int i = 0; !rc && i < n_plots; i++)
        rc = write_plot(&c, &r, plots[i]);
    if (!rc && taken)
        ss_cli_report_to_stderr();
    if (!rc && o->c.json) {
        char *js = NULL;
        if (ss_whatif_to_json(&c, &r, &js, &d) != SS_OK)
            rc = ss_cli_fail(&d);
        else
            printf("%s\n", js);
        ss_free(js);
    } else if (!rc) {
        print_table(&c, &r);
        if (o->csv)
            printf("CSV written to %s\n", o->csv);
        if (o->plot)
            printf("plot written to %s\n", o->plot);
    }
    if (!rc) {
        for (int i = 0; i < r.n_points; i++)
            if (r.points[i].state == SS_WHATIF_FAILED) {
                fprintf(stderr, "simsearch whatif: point %d could not be planned: %s\n", i + 1,
                        r.points[i].error);
                rc = SS_EXIT_USAGE;
                break;
            }
        if (r.interrupted)
            fprintf(stderr, "simsearch whatif: interrupted (%s): %d of %d points finished and "
                            "reported\n",
                    ss_cli_stop_signal == SIGTERM ? "SIGTERM" : "Ctrl-C", r.n_done, r.n_points);
    }
    ss_whatif_result_clear(&r);
    ss_free(scen);
    return rc;
}

int ss_cmd_whatif(int argc, char **argv)
{
    wopts o;
    memset(&o, 0, sizeof o);
    o.seed = 1;
    int rc = ss_cli_parse_def(&ss_cli_def_whatif, argc, argv, &o);
    if (rc)
        return rc < 0 ? SS_EXIT_OK : rc;
    struct sigaction old[2];
    ss_cli_stop_signals_catch(old);
    rc = run(&o);
    ss_cli_stop_signals_restore(old);
    return rc;
}
