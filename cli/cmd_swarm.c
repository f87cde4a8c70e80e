/*
 * cmd_swarm.c — `simsearch swarm`: collaborative training over the
 * internet (DeDLOC / hivemind) on a topology of peers: each peer's
 * micro-batch time from the cost model, then the swarm's event simulation
 * (search/swarm.h) with the averaging split by search/averaging.h, and a
 * report of throughput, step time, each peer's share of compute and of
 * averaging, idle fractions and the churn's events (docs/swarm.md), with
 * a plot of throughput over time (cli/plot.h). What-if: a list in
 * --target-batch, --peers or --bandwidth-scale runs the swarm at every
 * point of their cross product (ss_swarm_sweep) and reports a table (text,
 * --json, --csv FILE) and a plot of throughput against the first listed axis.
 *
 * Invariant: every option given changes the run (none is accepted and
 * ignored: --csv without a sweep is refused); specs (--churn, --strategy,
 * the lists) are parsed completely or refused naming the option and what
 * was expected.
 */
#include "cli.h"
#include "cli/plot.h"
#include "core/outfile.h"
#include "search/swarm.h"

#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct swarm_opts {
    ss_cli_common c;
    long long micro, seed, params;
    double duration, window;
    const char *targets, *peers, *bw, *averaging, *churn, *strategy, *compress, *plot, *csv;
} swarm_opts;

static const ss_cli_optdef options[] = {
    SS_CLI_ROW_MODEL(swarm_opts),
    SS_CLI_ROW_TOPOLOGY(swarm_opts),
    SS_CLI_STR_ROW(swarm_opts, "--target-batch", "N[,N...]", targets, 1,
                   "samples the collaboration accumulates per optimizer step\n"
                   "(a list: what-if over the target batch)"),
    SS_CLI_STR_ROW(swarm_opts, "--peers", "K[,K...]", peers, 0,
                   "what-if: only the first K peers of the topology, for each K"),
    SS_CLI_STR_ROW(swarm_opts, "--bandwidth-scale", "X[,X...]", bw, 0,
                   "what-if: every peer's up and down bandwidth times X, for each X"),
    SS_CLI_INT_ROW(swarm_opts, "--micro-batch", "N", micro, 1, 65536,
                   "samples per micro-batch on every peer (default 8)"),
    SS_CLI_STR_ROW(swarm_opts, "--averaging", "lp|equal|ring", averaging, 0,
                   "how the averaging is split: the load-balancing LP (default),\n"
                   "equal shares over the peers accepting connections, or a ring"),
    SS_CLI_STR_ROW(swarm_opts, "--churn", "leave=R,join=R", churn, 0,
                   "each online peer leaves at R per hour, each offline one rejoins\n"
                   "at R per hour (exponential, seeded; default: no churn)"),
    SS_CLI_STR_ROW(swarm_opts, "--strategy", "per-step|local-sgd:H", strategy, 0,
                   "average gradients every step (default) or parameter deltas\n"
                   "every H target batches, a local update per micro-batch (DiLoCo)"),
    SS_CLI_STR_ROW(swarm_opts, "--compress", "none|fp16|int8", compress, 0,
                   "bytes per averaged value: 4 (default), 2 or 1"),
    SS_CLI_INT_ROW(swarm_opts, "--params", "N", params, 1, 1LL << 40,
                   "parameters averaged (default: the model's, e.g. albert's\n"
                   "17.8M, whose layers share weights)"),
    SS_CLI_REAL_ROW(swarm_opts, "--duration", "S", duration, 1, 1e8,
                    "simulated seconds (default 3600)"),
    SS_CLI_REAL_ROW(swarm_opts, "--window", "S", window, 0, 1e6,
                    "how long a round waits for peers to finish their micro-batch\n"
                    "after the target is reached (default 5)"),
    SS_CLI_INT_ROW(swarm_opts, "--seed", "N", seed, 0, 1LL << 62, "churn seed (default 1)"),
    SS_CLI_ROW_JSON(swarm_opts, "print the report as JSON"),
    SS_CLI_STR_ROW(swarm_opts, "--csv", "FILE", csv, 0,
                   "what-if: write the table as CSV, one row per point"),
    SS_CLI_STR_ROW(swarm_opts, "--plot", "FILE", plot, 0,
                   "draw throughput over time with churn events marked, or for\n"
                   "a what-if throughput against the first listed axis\n"
                   "(FILE.svg or FILE.png)"),
    {NULL, SS_CLI_FLAG, NULL, 0, 0, 0, 0, 0, 0, NULL},
};

const ss_cli_cmddef ss_cli_def_swarm = {
    "swarm",
    "simulate collaborative training over internet peers (DeDLOC)",
    "Simulate data-parallel training by volunteers over the internet: each peer\n"
    "computes micro-batches at its device's speed (the cost model of 'simulate'),\n"
    "the collaboration accumulates samples to the target batch, then the peers\n"
    "that finish within the window average (split by the LP over their up and\n"
    "down bandwidths; client-only peers reduce nothing) and step. Reports\n"
    "samples/s, the time per step, each peer's compute and averaging shares.",
    options,
    NULL,
    0,
    "The topology lists its devices as peers (topologies/volunteers40.json).\n"
    "docs/swarm.md states the model and its simplifications.\n"
    "What-if CSV columns: peers, bandwidth_scale, target_batch, feasible,\n"
    "samples_per_s, step_time_s, averaging_s, rounds, aborts, lost_samples,\n"
    "peers_missing_rounds, compute_util, why.",
};

static int bad(const char *fmt, const char *opt, const char *val)
{
    return ss_cli_bad_value("swarm", opt, fmt, val);
}

/* "leave=R,join=R" (either may be left out: 0). */
static int parse_churn(const char *s, ss_swarm_config *c)
{
    char buf[256];
    if (strlen(s) >= sizeof buf || !*s)
        return bad("expected leave=R,join=R (rates per hour), got \"%s\"", "--churn", s);
    strcpy(buf, s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        double v;
        if (!eq || ss_cli_parse_real(eq + 1, 0, 1e6, &v))
            return bad("expected leave=R,join=R with rates per hour in [0, 1e6], got \"%s\"",
                       "--churn", s);
        *eq = 0;
        if (!strcmp(tok, "leave"))
            c->leave_per_h = v;
        else if (!strcmp(tok, "join"))
            c->join_per_h = v;
        else
            return bad("unknown key in \"%s\" (expected leave=R,join=R)", "--churn", s);
    }
    return 0;
}

static int configure(const swarm_opts *o, ss_swarm_config *c)
{
    if (o->averaging && ss_avg_method_parse(o->averaging, &c->averaging))
        return bad("expected lp, equal or ring, got \"%s\"", "--averaging", o->averaging);
    if (o->churn && parse_churn(o->churn, c))
        return SS_EXIT_USAGE;
    if (o->strategy && strcmp(o->strategy, "per-step")) {
        long long h;
        if (strncmp(o->strategy, "local-sgd:", 10) ||
            ss_cli_parse_ll(o->strategy + 10, 1, 1000000, &h))
            return bad("expected per-step or local-sgd:H (H in 1..1000000), got \"%s\"",
                       "--strategy", o->strategy);
        c->local_steps = (int)h;
    }
    return 0;
}

static double value_bytes(const char *compress, int *ok)
{
    *ok = 1;
    if (!compress || !strcmp(compress, "none"))
        return 4;
    if (!strcmp(compress, "fp16"))
        return 2;
    if (!strcmp(compress, "int8"))
        return 1;
    *ok = 0;
    return 0;
}

static double optimizer_state_bytes(ss_optimizer opt)
{
    return opt == SS_OPT_ADAM ? 8 : opt == SS_OPT_SGD_MOMENTUM ? 4 : 0;
}

static void print_human(const swarm_opts *o, const ss_swarm_config *c, const ss_swarm_peer *p,
                        const ss_machine *m, const ss_swarm_result *r, double params)
{
    char b1[32], b2[32];
    printf("swarm: %d peers, model %s, %s parameters averaged (%s per round)\n", r->n_peers,
           o->c.model, ss_cli_si(params, b1, sizeof b1),
           ss_cli_bytes(c->vector_bytes, b2, sizeof b2));
    printf("target batch %lld (micro-batch %d), averaging %s, %s, window %g s, %g s simulated\n",
           (long long)c->target_batch, c->micro_batch, ss_avg_method_name(c->averaging),
           c->local_steps > 1 ? "local SGD" : "per-step", c->join_window_s, c->duration_s);
    if (c->local_steps > 1)
        printf("local SGD: deltas averaged every %d target batches\n", c->local_steps);
    printf("throughput: %.1f samples/s; %d rounds, %.2f s per optimizer step, averaging %.2f "
           "s of it\n",
           r->samples_per_s, r->rounds, r->step_time_s, r->avg_time_s);
    if (c->leave_per_h > 0 || c->join_per_h > 0)
        printf("churn: %d leaves, %d joins, %d averaging rounds aborted, %.0f samples lost\n",
               r->leaves, r->joins, r->aborts, r->lost_samples);
    printf("\n%-10s %-16s %9s %5s %8s %7s %6s %6s %6s %6s %6s\n", "peer", "device", "mb_s",
           "recv", "samples", "share", "rounds", "missed", "comp%", "wait%", "avg%");
    for (int i = 0; i < r->n_peers; i++) {
        const ss_swarm_peer_stats *s = &r->peers[i];
        double on = s->online_s > 0 ? s->online_s : 1;
        printf("%-10s %-16s %9.3f %5s %8.0f %7.4f %6d %6d %6.1f %6.1f %6.1f\n", p[i].name,
               ss_machine_type(m, p[i].devtype)->name, p[i].mb_s,
               p[i].link.accepts ? "yes" : "no", s->samples, s->share, s->rounds, s->missed,
               100 * s->compute_s / on, 100 * s->wait_s / on, 100 * s->avg_s / on);
    }
}

static int print_json(const ss_swarm_config *c, const ss_swarm_peer *p, const ss_machine *m,
                      const ss_swarm_result *r, double params)
{
    json_t *root = json_object(), *avg = json_object(), *peers = json_array(),
           *events = json_array();
    json_object_set_new(root, "samples_per_s", json_real(r->samples_per_s));
    json_object_set_new(root, "step_time_s", json_real(r->step_time_s));
    json_object_set_new(root, "target_batch", json_integer(c->target_batch));
    json_object_set_new(root, "micro_batch", json_integer(c->micro_batch));
    json_object_set_new(root, "strategy", json_string(c->local_steps > 1 ? "local-sgd"
                                                                           : "per-step"));
    json_object_set_new(root, "local_steps", json_integer(c->local_steps));
    json_object_set_new(root, "duration_s", json_real(c->duration_s));
    json_object_set_new(root, "rounds", json_integer(r->rounds));
    json_object_set_new(root, "samples", json_real(r->samples));
    json_object_set_new(root, "lost_samples", json_real(r->lost_samples));
    json_object_set_new(root, "aborts", json_integer(r->aborts));
    json_object_set_new(avg, "method", json_string(ss_avg_method_name(c->averaging)));
    json_object_set_new(avg, "mean_time_s", json_real(r->avg_time_s));
    json_object_set_new(avg, "parameters", json_real(params));
    json_object_set_new(avg, "vector_bytes", json_real(c->vector_bytes));
    json_object_set_new(root, "averaging", avg);
    for (int i = 0; i < r->n_peers; i++) {
        const ss_swarm_peer_stats *s = &r->peers[i];
        json_t *o = json_object();
        double on = s->online_s > 0 ? s->online_s : 1;
        json_object_set_new(o, "name", json_string(p[i].name));
        json_object_set_new(o, "device", json_string(ss_machine_type(m, p[i].devtype)->name));
        json_object_set_new(o, "accepts_connections", json_boolean(p[i].link.accepts));
        json_object_set_new(o, "micro_batch_s", json_real(p[i].mb_s));
        json_object_set_new(o, "samples", json_real(s->samples));
        json_object_set_new(o, "compute_share", json_real(r->samples > 0 ? s->samples / r->samples
                                                                          : 0));
        json_object_set_new(o, "averaging_share", json_real(s->share));
        json_object_set_new(o, "rounds", json_integer(s->rounds));
        json_object_set_new(o, "missed", json_integer(s->missed));
        json_object_set_new(o, "compute_fraction", json_real(s->compute_s / on));
        json_object_set_new(o, "wait_fraction", json_real(s->wait_s / on));
        json_object_set_new(o, "averaging_fraction", json_real(s->avg_s / on));
        json_object_set_new(o, "sync_s", json_real(s->sync_s));
        json_object_set_new(o, "online_s", json_real(s->online_s));
        json_array_append_new(peers, o);
    }
    json_object_set_new(root, "peers", peers);
    for (int k = 0; k < r->n_events; k++) {
        const ss_swarm_event *e = &r->events[k];
        json_t *o = json_object();
        json_object_set_new(o, "t", json_real(e->t));
        json_object_set_new(o, "kind", json_string(ss_swarm_event_name(e->kind)));
        if (e->peer >= 0)
            json_object_set_new(o, "peer", json_string(p[e->peer].name));
        if (e->kind == SS_SWARM_ROUND || e->kind == SS_SWARM_LEAVE)
            json_object_set_new(o, "samples", json_real(e->samples));
        if (e->kind == SS_SWARM_ROUND || e->kind == SS_SWARM_ABORT) {
            json_object_set_new(o, "participants", json_integer(e->participants));
            json_object_set_new(o, "averaging_s", json_real(e->avg_s));
        }
        json_array_append_new(events, o);
    }
    json_object_set_new(root, "events", events);
    json_object_set_new(root, "events_dropped", json_integer(r->events_dropped));
    return ss_cli_print_json(root);
}

/* The figure's subtitle: what the run rests on. */
static void subtitle(char *buf, size_t n, const swarm_opts *o, const ss_swarm_config *c,
                     double params)
{
    char b1[32];
    char strat[96] = "gradients averaged every step";
    if (c->local_steps > 1)
        snprintf(strat, sizeof strat, "local SGD: deltas averaged every %d target batches",
                 c->local_steps);
    snprintf(buf, n,
             "%s on %s\n%s parameters averaged (%s), micro-batch %d, window %g s, %g s "
             "simulated\naveraging split: %s; %s",
             o->c.model, o->c.topology, ss_cli_si(params, b1, sizeof b1),
             o->compress ? o->compress : "fp32", c->micro_batch, c->join_window_s,
             c->duration_s, ss_avg_method_name(c->averaging), strat);
}

/* Write the figure p to path; returns an exit code. */
static int write_figure(ss_plot *p, const char *path, ss_diag *d)
{
    if (ss_plot_write(p, path, d) != SS_OK)
        return ss_cli_fail(d);
    return SS_EXIT_OK;
}

/* Throughput over time: each round's samples over the time since the
 * previous round (a step line), the mean (dashed), churn events as ticks
 * (leave red, join green, abort grey). */
static int plot_run(const swarm_opts *o, const ss_swarm_config *c, const ss_swarm_result *r,
                    double params)
{
    char sub[512], title[160];
    subtitle(sub, sizeof sub, o, c, params);
    snprintf(title, sizeof title, "swarm: %d peers, target batch %lld: %.1f samples/s",
             r->n_peers, (long long)c->target_batch, r->samples_per_s);
    ss_diag d;
    ss_diag_init(&d);
    size_t n = (size_t)r->n_events + 2;
    double *x = ss_calloc(n, sizeof *x), *y = ss_calloc(n, sizeof *y);
    double *tx[3] = {ss_calloc(n, sizeof(double)), ss_calloc(n, sizeof(double)),
                     ss_calloc(n, sizeof(double))};
    ss_plot *p = ss_plot_new(title, sub);
    int rc = SS_EXIT_FAIL;
    if (!x || !y || !tx[0] || !tx[1] || !tx[2] || !p) {
        fprintf(stderr, "simsearch: out of memory\n");
        goto out;
    }
    int k = 0, nt[3] = {0, 0, 0};
    double prev = 0;
    x[k] = 0;
    for (int e = 0; e < r->n_events; e++) {
        const ss_swarm_event *ev = &r->events[e];
        if (ev->kind == SS_SWARM_ROUND && ev->t > prev) {
            y[k] = ev->samples / (ev->t - prev);
            x[++k] = prev = ev->t;
        } else if (ev->kind != SS_SWARM_ROUND) {
            int s = ev->kind == SS_SWARM_LEAVE ? 0 : ev->kind == SS_SWARM_JOIN ? 1 : 2;
            tx[s][nt[s]++] = ev->t;
        }
    }
    y[k] = k > 0 ? y[k - 1] : 0;
    ss_plot_axes ax = {0};
    ax.xlabel = "simulated time (s)";
    ax.ylabel = "samples/s over each round";
    ax.y_from_zero = 1;
    ax.x_fixed = 1;
    ax.xmin = 0;
    ax.xmax = c->duration_s;
    ax.legend = SS_PLOT_LEGEND_TOP_RIGHT;
    double mx[2] = {0, c->duration_s}, my[2] = {r->samples_per_s, r->samples_per_s};
    static const char *const names[3] = {"peer leaves", "peer joins", "round aborted"};
    static const unsigned colors[3] = {0xd93333, 0x33a633, 0x808080};
    ss_status st = ss_plot_panel(p, &ax, &d);
    if (!st)
        st = ss_plot_add(p, &(ss_plot_series){"throughput per round", x, y, k + 1, SS_PLOT_STEP,
                                              0x1a4dcc, NULL}, &d);
    if (!st)
        st = ss_plot_add(p, &(ss_plot_series){"mean", mx, my, 2, SS_PLOT_DASHED, 0x991a99, NULL},
                         &d);
    for (int s = 0; s < 3 && !st; s++)
        if (nt[s])
            st = ss_plot_add(p, &(ss_plot_series){names[s], tx[s], tx[s], nt[s], SS_PLOT_TICKS,
                                                  colors[s], NULL}, &d);
    rc = st ? ss_cli_fail(&d) : write_figure(p, o->plot, &d);
out:
    ss_plot_free(p);
    ss_free(x), ss_free(y), ss_free(tx[0]), ss_free(tx[1]), ss_free(tx[2]);
    return rc;
}

/* ------------------------------------------------------------ what-if */

#define MAX_LIST 64

/* A comma-separated list of integers in [lo, hi] (ints) or of reals in
 * (0, 1e6] (reals): the count, or -1 after printing why. */
static int parse_list(const char *opt, const char *s, long long lo, long long hi,
                      long long *ints, double *reals)
{
    char buf[1024], *it[MAX_LIST + 1];
    if (!*s || strlen(s) >= sizeof buf)
        return bad("expected a value or a comma-separated list, got \"%s\"", opt, s), -1;
    int n = ss_cli_split(s, buf, sizeof buf, it, MAX_LIST);
    for (int i = 0; i < n; i++) {
        if (i == MAX_LIST)
            return bad("at most 64 values, got \"%s\"", opt, s), -1;
        int err = ints ? ss_cli_parse_ll(it[i], lo, hi, &ints[i])
                       : (ss_cli_parse_real(it[i], 1e-6, 1e6, &reals[i]) || !(reals[i] > 0));
        if (err) {
            char what[160];
            snprintf(what, sizeof what, "%s in a comma-separated list, got \"%%s\"",
                     ints ? "expected integers" : "expected factors in (0, 1e6]");
            return bad(what, opt, s), -1;
        }
    }
    size_t len = strlen(s);
    if (!n || s[len - 1] == ',' || s[0] == ',' || strstr(s, ",,"))
        return bad("expected a comma-separated list without empty items, got \"%s\"", opt, s),
               -1;
    return n;
}

typedef struct sweep_axes {
    int counts[MAX_LIST], nc, ns, nt;
    double scales[MAX_LIST];
    int64_t targets[MAX_LIST];
} sweep_axes;

static void print_table(const sweep_axes *a, const ss_swarm_point *pt, int np)
{
    printf("swarm what-if: %d peer count(s) x %d bandwidth factor(s) x %d target batch(es)\n\n",
           a->nc, a->ns, a->nt);
    printf("%5s %7s %8s %10s %9s %9s %6s %6s %8s %7s %6s\n", "peers", "bw x", "target",
           "samples/s", "s/step", "avg s", "rounds", "aborts", "lost", "missing", "util%");
    for (int i = 0; i < np; i++) {
        const ss_swarm_point *q = &pt[i];
        printf("%5d %7g %8lld ", q->n_peers, q->bw_scale, (long long)q->target_batch);
        if (!q->feasible) {
            printf("infeasible: %s\n", q->why);
            continue;
        }
        printf("%10.1f %9.2f %9.2f %6d %6d %8.0f %7d %6.1f\n", q->samples_per_s, q->step_time_s,
               q->avg_time_s, q->rounds, q->aborts, q->lost_samples, q->peers_missing,
               100 * q->compute_util);
    }
}

static json_t *point_json(const ss_swarm_point *q)
{
    json_t *o = json_object();
    json_object_set_new(o, "peers", json_integer(q->n_peers));
    json_object_set_new(o, "bandwidth_scale", json_real(q->bw_scale));
    json_object_set_new(o, "target_batch", json_integer(q->target_batch));
    json_object_set_new(o, "feasible", json_boolean(q->feasible));
    if (!q->feasible) {
        json_object_set_new(o, "why", json_string(q->why));
        return o;
    }
    json_object_set_new(o, "samples_per_s", json_real(q->samples_per_s));
    json_object_set_new(o, "step_time_s", json_real(q->step_time_s));
    json_object_set_new(o, "averaging_s", json_real(q->avg_time_s));
    json_object_set_new(o, "rounds", json_integer(q->rounds));
    json_object_set_new(o, "aborts", json_integer(q->aborts));
    json_object_set_new(o, "lost_samples", json_real(q->lost_samples));
    json_object_set_new(o, "peers_missing_rounds", json_integer(q->peers_missing));
    json_object_set_new(o, "compute_util", json_real(q->compute_util));
    return o;
}

static int print_sweep_json(const ss_swarm_config *c, const sweep_axes *a,
                            const ss_swarm_point *pt, int np)
{
    json_t *root = json_object(), *axes = json_object(), *pc = json_array(),
           *ps = json_array(), *pts = json_array(), *tg = json_array();
    for (int i = 0; i < a->nc; i++)
        json_array_append_new(pc, json_integer(a->counts[i]));
    for (int i = 0; i < a->ns; i++)
        json_array_append_new(ps, json_real(a->scales[i]));
    for (int i = 0; i < a->nt; i++)
        json_array_append_new(tg, json_integer(a->targets[i]));
    json_object_set_new(axes, "peers", pc);
    json_object_set_new(axes, "bandwidth_scale", ps);
    json_object_set_new(axes, "target_batch", tg);
    json_object_set_new(root, "axes", axes);
    json_object_set_new(root, "averaging", json_string(ss_avg_method_name(c->averaging)));
    json_object_set_new(root, "strategy", json_string(c->local_steps > 1 ? "local-sgd"
                                                                           : "per-step"));
    json_object_set_new(root, "local_steps", json_integer(c->local_steps));
    json_object_set_new(root, "duration_s", json_real(c->duration_s));
    for (int i = 0; i < np; i++)
        json_array_append_new(pts, point_json(&pt[i]));
    json_object_set_new(root, "points", pts);
    return ss_cli_print_json(root);
}

/* The table as CSV (the columns of the command's help), atomically. */
static int write_csv(const char *path, const ss_swarm_point *pt, int np)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_output *out;
    FILE *f;
    if (ss_output_open(path, &out, &f, &d) != SS_OK)
        return ss_cli_fail(&d);
    fprintf(f, "peers,bandwidth_scale,target_batch,feasible,samples_per_s,step_time_s,"
               "averaging_s,rounds,aborts,lost_samples,peers_missing_rounds,compute_util,why\n");
    for (int i = 0; i < np; i++) {
        const ss_swarm_point *q = &pt[i];
        fprintf(f, "%d,%.17g,%lld,%d,", q->n_peers, q->bw_scale, (long long)q->target_batch,
                q->feasible);
        if (q->feasible)
            fprintf(f, "%.17g,%.17g,%.17g,%d,%d,%.17g,%d,%.17g,\n", q->samples_per_s,
                    q->step_time_s, q->avg_time_s, q->rounds, q->aborts, q->lost_samples,
                    q->peers_missing, q->compute_util);
        else {
            fputs(",,,,,,,,\"", f);
            for (const char *w = q->why; *w; w++)
                *w == '"' ? fputs("\"\"", f) : fputc(*w, f);
            fputs("\"\n", f);
        }
    }
    if (ss_output_commit(out, &d) != SS_OK)
        return ss_cli_fail(&d);
    return SS_EXIT_OK;
}

/* Throughput (and mean compute utilisation) against the first axis with
 * more than one value (peers, bandwidth, target; log-2 for the last two),
 * one line per combination of the other axes' values. */
static int plot_sweep(const swarm_opts *o, const ss_swarm_config *c, const sweep_axes *a,
                      const ss_swarm_point *pt, double params)
{
    int dims[3] = {a->nc, a->ns, a->nt};
    int ax = a->nc > 1 ? 0 : a->ns > 1 ? 1 : 2;
    static const char *const xl[3] = {"peers (the first K of the topology)",
                                       "bandwidth factor (every peer's up and down)",
                                       "target batch (samples per optimizer step)"};
    char sub[512], title[160];
    subtitle(sub, sizeof sub, o, c, params);
    snprintf(title, sizeof title, "swarm what-if: throughput against the %s",
             ax == 0 ? "number of peers" : ax == 1 ? "bandwidth" : "target batch");
    ss_plot *p = ss_plot_new(title, sub);
    ss_diag d;
    ss_diag_init(&d);
    if (!p) {
        fprintf(stderr, "simsearch: out of memory\n");
        return SS_EXIT_FAIL;
    }
    int nx = dims[ax], nl = a->nc * a->ns * a->nt / nx;
    if (nl > SS_PLOT_MAX_SERIES)
        nl = SS_PLOT_MAX_SERIES;
    ss_status st = SS_OK;
    for (int panel = 0; panel < 2 && !st; panel++) {
        ss_plot_axes pa = {0};
        pa.xlabel = xl[ax];
        pa.ylabel = panel ? "mean compute utilisation (%)" : "samples/s";
        pa.title = panel ? "compute utilisation" : "throughput";
        pa.logx = ax > 0;
        pa.y_from_zero = 1;
        pa.legend = panel ? SS_PLOT_LEGEND_NONE : SS_PLOT_LEGEND_TOP_LEFT; /* same lines */
        st = ss_plot_panel(p, &pa, &d);
        for (int l = 0; l < nl && !st; l++) {
            double x[MAX_LIST], y[MAX_LIST];
            int idx[3];
            char name[128] = "";
            size_t used = 0;
            for (int i = 0; i < nx; i++) {
                int rest = l;
                for (int k = 2; k >= 0; k--) { /* the other axes' indices from l */
                    if (k == ax) {
                        idx[k] = i;
                        continue;
                    }
                    idx[k] = rest % dims[k];
                    rest /= dims[k];
                }
                const ss_swarm_point *q = &pt[(idx[0] * a->ns + idx[1]) * a->nt + idx[2]];
                x[i] = ax == 0 ? q->n_peers : ax == 1 ? q->bw_scale : (double)q->target_batch;
                y[i] = !q->feasible ? NAN : panel ? 100 * q->compute_util : q->samples_per_s;
            }
            if (ax != 0 && a->nc > 1)
                used += (size_t)snprintf(name + used, sizeof name - used, "%d peers ",
                                         a->counts[idx[0]]);
            if (ax != 1 && a->ns > 1 && used < sizeof name)
                used += (size_t)snprintf(name + used, sizeof name - used, "bandwidth x%g ",
                                         a->scales[idx[1]]);
            if (ax != 2 && a->nt > 1 && used < sizeof name)
                used += (size_t)snprintf(name + used, sizeof name - used, "target %lld",
                                         (long long)a->targets[idx[2]]);
            if (!used)
                snprintf(name, sizeof name, "%s", ss_avg_method_name(c->averaging));
            static const unsigned palette[8] = {0x0072b2, 0xd55e00, 0x009e73, 0xcc79a7,
                                                0xe69f00, 0x56b4e9, 0x404040, 0xf0e442};
            st = ss_plot_add(p, &(ss_plot_series){name, x, y, nx, SS_PLOT_LINE_MARKERS,
                                                  palette[l % 8], NULL}, &d);
        }
    }
    int rc = st ? ss_cli_fail(&d) : write_figure(p, o->plot, &d);
    ss_plot_free(p);
    return rc;
}

/* Parse the axes: --peers (default: all n), --bandwidth-scale (default 1),
 * --target-batch. Returns 0 or an exit code. */
static int parse_axes(const swarm_opts *o, int n, sweep_axes *a)
{
    long long v[MAX_LIST];
    a->nc = 1, a->counts[0] = n;
    if (o->peers) {
        if ((a->nc = parse_list("--peers", o->peers, 1, n, v, NULL)) < 0)
            return SS_EXIT_USAGE;
        for (int i = 0; i < a->nc; i++)
            a->counts[i] = (int)v[i];
    }
    a->ns = 1, a->scales[0] = 1;
    if (o->bw && (a->ns = parse_list("--bandwidth-scale", o->bw, 0, 0, NULL, a->scales)) < 0)
        return SS_EXIT_USAGE;
    if ((a->nt = parse_list("--target-batch", o->targets, 1, SS_CLI_MAX_BATCH, v, NULL)) < 0)
        return SS_EXIT_USAGE;
    for (int i = 0; i < a->nt; i++)
        a->targets[i] = v[i];
    return 0;
}

static int run_sweep(const swarm_opts *o, const ss_swarm_config *c, const sweep_axes *a,
                     const ss_swarm_peer *peers, int n, double params)
{
    int np = a->nc * a->ns * a->nt;
    ss_swarm_point *pt = ss_calloc((size_t)np, sizeof *pt);
    ss_diag d;
    ss_diag_init(&d);
    if (!pt) {
        fprintf(stderr, "simsearch: out of memory\n");
        return SS_EXIT_FAIL;
    }
    int r;
    if (ss_swarm_sweep(peers, n, c, a->counts, a->nc, a->scales, a->ns, a->targets, a->nt, pt,
                       &d) != SS_OK)
        r = ss_cli_fail(&d);
    else if (o->c.json)
        r = print_sweep_json(c, a, pt, np);
    else
        print_table(a, pt, np), r = SS_EXIT_OK;
    if (!r && o->csv)
        r = write_csv(o->csv, pt, np);
    if (!r && o->plot)
        r = plot_sweep(o, c, a, pt, params);
    ss_free(pt);
    return r;
}

int ss_cmd_swarm(int argc, char **argv)
{
    swarm_opts o;
    memset(&o, 0, sizeof o);
    o.micro = 8;
    o.duration = 3600;
    o.window = 5;
    o.seed = 1;
    int r = ss_cli_parse_def(&ss_cli_def_swarm, argc, argv, &o);
    if (r)
        return r < 0 ? SS_EXIT_OK : r;
    ss_swarm_config c;
    ss_swarm_config_default(&c);
    c.micro_batch = (int)o.micro;
    c.duration_s = o.duration;
    c.join_window_s = o.window;
    c.seed = (uint64_t)o.seed;
    if ((r = configure(&o, &c)))
        return r;
    int ok;
    double vb = value_bytes(o.compress, &ok);
    if (!ok)
        return bad("expected none, fp16 or int8, got \"%s\"", "--compress", o.compress);
    int sweep = o.peers || o.bw || strchr(o.targets, ',');
    if (o.csv && !sweep)
        return bad("%s", "--csv",
                   "the CSV is a what-if table: give a list in --target-batch, --peers or "
                   "--bandwidth-scale (or --peers / --bandwidth-scale alone)");
    if (o.plot && !ss_plot_path_ok(o.plot))
        return bad("expected a file name ending in .svg or .png, got \"%s\"", "--plot", o.plot);
    const ss_cli_output outs[] = {{"--plot", o.plot}, {"--csv", o.csv}, {NULL, NULL}};
    if ((r = ss_cli_check_inputs("swarm", &o.c, NULL, outs, NULL)))
        return r;
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    ss_costmodel *cm = NULL;
    ss_swarm_peer *peers = NULL;
    ss_swarm_result res = {0};
    ss_diag d;
    ss_diag_init(&d);
    if ((r = ss_cli_load_machine(o.c.topology, 0, &m)))
        return r;
    int n = ss_machine_n_devices(m);
    sweep_axes axes;
    if ((r = parse_axes(&o, n, &axes)))
        goto out;
    c.target_batch = axes.targets[0];
    if ((r = ss_cli_build_model(o.c.model, o.micro, 1, &g)))
        goto out;
    ss_profile_db *db = NULL; /* stays NULL: no --db */
    if ((r = ss_cli_cost_model(m, NULL, &cm, &db)))
        goto out;
    double params = o.params ? (double)o.params : (double)ss_graph_parameters(g);
    peers = ss_calloc((size_t)n, sizeof *peers);
    if (!peers) {
        ss_diag_set(&d, SS_ERR_NOMEM, "swarm: out of memory");
        r = ss_cli_fail(&d);
        goto out;
    }
    c.vector_bytes = params * vb;
    c.state_bytes = params * (4 + optimizer_state_bytes(ss_graph_optimizer(g)));
    if (ss_swarm_peers_from_machine(g, m, cm, (int64_t)params, peers, &d) != SS_OK) {
        r = ss_cli_fail(&d);
        goto out;
    }
    if (sweep) {
        r = run_sweep(&o, &c, &axes, peers, n, params);
        goto out;
    }
    if (ss_swarm_run(peers, n, &c, &res, &d) != SS_OK) {
        r = ss_cli_fail(&d);
        goto out;
    }
    if (o.c.json)
        r = print_json(&c, peers, m, &res, params);
    else
        print_human(&o, &c, peers, m, &res, params), r = SS_EXIT_OK;
    if (!r && o.plot)
        r = plot_run(&o, &c, &res, params);
out:
    ss_swarm_result_free(&res);
    ss_free(peers);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
    return r;
}
