/*
 * cmd_swarm.c — `simsearch swarm`: collaborative training over the
 * internet (DeDLOC / hivemind) on a topology of peers: each peer's
 * micro-batch time from the cost model, then the swarm's event simulation
 * (search/swarm.h) with the averaging split by search/averaging.h, and a
 * report of throughput, step time, each peer's share of compute and of
 * averaging, idle fractions and the churn's events (docs/swarm.md).
 *
 * Invariant: every option given changes the run (none is accepted and
 * ignored); specs (--churn, --strategy) are parsed completely or refused
 * naming the option and what was expected.
 */
#include "cli.h"
#include "search/swarm.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct swarm_opts {
    ss_cli_common c;
    long long target, micro, seed, params;
    double duration, window;
    const char *averaging, *churn, *strategy, *compress, *plot;
} swarm_opts;

static const ss_cli_optdef options[] = {
    SS_CLI_ROW_MODEL(swarm_opts),
    SS_CLI_ROW_TOPOLOGY(swarm_opts),
    {"--target-batch", SS_CLI_INT, "N", offsetof(swarm_opts, target), 1, SS_CLI_MAX_BATCH, 0, 0,
     1, "samples the collaboration accumulates per optimizer step"},
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
                   "parameters averaged (default: the model's; e.g. 17.7M for\n"
                   "ALBERT-large, whose layers share weights)"),
    SS_CLI_REAL_ROW(swarm_opts, "--duration", "S", duration, 1, 1e8,
                    "simulated seconds (default 3600)"),
    SS_CLI_REAL_ROW(swarm_opts, "--window", "S", window, 0, 1e6,
                    "how long a round waits for peers to finish their micro-batch\n"
                    "after the target is reached (default 5)"),
    SS_CLI_INT_ROW(swarm_opts, "--seed", "N", seed, 0, 1LL << 62, "churn seed (default 1)"),
    SS_CLI_ROW_JSON(swarm_opts, "print the report as JSON"),
    SS_CLI_STR_ROW(swarm_opts, "--plot", "FILE", plot, 0,
                   "draw throughput over time with churn events marked\n"
                   "(FILE.svg or FILE.png, cairo)"),
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
    "docs/swarm.md states the model and its simplifications.",
};

static int bad(const char *fmt, const char *opt, const char *val)
{
    fprintf(stderr, "simsearch swarm: %s: ", opt);
    fprintf(stderr, fmt, val);
    fprintf(stderr, "\ntry 'simsearch swarm --help'\n");
    return SS_EXIT_USAGE;
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
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!s) {
        fprintf(stderr, "simsearch: out of memory\n");
        return SS_EXIT_FAIL;
    }
    printf("%s\n", s);
    free(s);
    return SS_EXIT_OK;
}

/* Throughput over time: each round's samples over the time since the
 * previous round (a step line), churn events as ticks (leave red, join
 * green, abort grey). */
static void draw(cairo_t *cr, double W, double H, const ss_swarm_config *c,
                 const ss_swarm_result *r)
{
    const double L = 70, R = 20, T = 30, B = 50;
    double ymax = 1, prev = 0;
    for (int k = 0; k < r->n_events; k++)
        if (r->events[k].kind == SS_SWARM_ROUND) {
            double dt = r->events[k].t - prev;
            if (dt > 0)
                ymax = fmax(ymax, r->events[k].samples / dt);
            prev = r->events[k].t;
        }
    ymax *= 1.1;
    double pw = W - L - R, ph = H - T - B;
#define PX(t) (L + pw * (t) / c->duration_s)
#define PY(v) (T + ph * (1 - (v) / ymax))
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_set_line_width(cr, 1);
    for (int k = 0; k < r->n_events; k++) {
        const ss_swarm_event *e = &r->events[k];
        if (e->kind == SS_SWARM_ROUND)
            continue;
        if (e->kind == SS_SWARM_LEAVE)
            cairo_set_source_rgb(cr, 0.85, 0.2, 0.2);
        else if (e->kind == SS_SWARM_JOIN)
            cairo_set_source_rgb(cr, 0.2, 0.65, 0.2);
        else
            cairo_set_source_rgb(cr, 0.5, 0.5, 0.5);
        cairo_move_to(cr, PX(e->t), T + ph);
        cairo_line_to(cr, PX(e->t), T + ph - 12);
        cairo_stroke(cr);
    }
    cairo_set_source_rgb(cr, 0.1, 0.3, 0.8);
    cairo_set_line_width(cr, 1.5);
    prev = 0;
    int first = 1;
    for (int k = 0; k < r->n_events; k++) {
        const ss_swarm_event *e = &r->events[k];
        if (e->kind != SS_SWARM_ROUND || e->t <= prev)
            continue;
        double v = e->samples / (e->t - prev);
        if (first)
            cairo_move_to(cr, PX(prev), PY(v)), first = 0;
        else
            cairo_line_to(cr, PX(prev), PY(v));
        cairo_line_to(cr, PX(e->t), PY(v));
        prev = e->t;
    }
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.6, 0.1, 0.6); /* the mean */
    cairo_set_dash(cr, (double[]){4, 3}, 2, 0);
    cairo_move_to(cr, L, PY(r->samples_per_s));
    cairo_line_to(cr, L + pw, PY(r->samples_per_s));
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, L, T, pw, ph);
    cairo_stroke(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, 11);
    char buf[128];
    for (int i = 0; i <= 5; i++) {
        snprintf(buf, sizeof buf, "%.0f", c->duration_s * i / 5);
        cairo_move_to(cr, PX(c->duration_s * i / 5) - 10, T + ph + 16);
        cairo_show_text(cr, buf);
        snprintf(buf, sizeof buf, "%.0f", ymax * i / 5);
        cairo_move_to(cr, 8, PY(ymax * i / 5) + 4);
        cairo_show_text(cr, buf);
    }
    cairo_move_to(cr, L + pw / 2 - 30, H - 12);
    cairo_show_text(cr, "time (s)");
    cairo_move_to(cr, 8, T - 10);
    cairo_show_text(cr, "samples/s per round");
    snprintf(buf, sizeof buf, "%s, target %lld: mean %.1f samples/s (dashed); churn: leave red, join green",
             ss_avg_method_name(c->averaging), (long long)c->target_batch, r->samples_per_s);
    cairo_move_to(cr, L + 110, T - 10);
    cairo_show_text(cr, buf);
#undef PX
#undef PY
}

/* Write the plot to path (.svg or .png). Returns an exit code. */
static int write_plot(const char *path, const ss_swarm_config *c, const ss_swarm_result *r)
{
    const double W = 900, H = 420;
    size_t n = strlen(path);
    int png = n > 4 && !strcmp(path + n - 4, ".png");
    cairo_surface_t *sf = png ? cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)W, (int)H)
                              : cairo_svg_surface_create(path, W, H);
    cairo_t *cr = cairo_create(sf);
    draw(cr, W, H, c, r);
    cairo_destroy(cr);
    cairo_surface_flush(sf);
    cairo_status_t st = png ? cairo_surface_write_to_png(sf, path) : cairo_surface_status(sf);
    cairo_surface_finish(sf);
    if (st == CAIRO_STATUS_SUCCESS)
        st = cairo_surface_status(sf);
    cairo_surface_destroy(sf);
    if (st != CAIRO_STATUS_SUCCESS) {
        fprintf(stderr, "simsearch swarm: --plot %s: %s\n", path, cairo_status_to_string(st));
        return SS_EXIT_FAIL;
    }
    return SS_EXIT_OK;
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
    c.target_batch = o.target;
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
    const ss_cli_output ins[] = {{"--model", ss_cli_spec_is_file(o.c.model) ? o.c.model : NULL},
                                 {"--topology", o.c.topology},
                                 {NULL, NULL}};
    if (o.plot) {
        size_t pl = strlen(o.plot);
        if (pl < 5 || (strcmp(o.plot + pl - 4, ".svg") && strcmp(o.plot + pl - 4, ".png")))
            return bad("expected a file name ending in .svg or .png, got \"%s\"", "--plot",
                       o.plot);
    }
    const ss_cli_output outs[] = {{"--plot", o.plot}, {NULL, NULL}};
    if ((r = ss_cli_check_files("swarm", ins, outs, o.c.json, NULL)))
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
    if ((r = ss_cli_build_model(o.c.model, o.micro, 1, &g)))
        goto out;
    ss_profile_db *db = NULL; /* stays NULL: no --db */
    if ((r = ss_cli_cost_model(m, NULL, &cm, &db)))
        goto out;
    int n = ss_machine_n_devices(m);
    double params = o.params ? (double)o.params : (double)ss_graph_parameters(g);
    peers = ss_calloc((size_t)n, sizeof *peers);
    if (!peers) {
        ss_diag_set(&d, SS_ERR_NOMEM, "swarm: out of memory");
        r = ss_cli_fail(&d);
        goto out;
    }
    c.vector_bytes = params * vb;
    c.state_bytes = params * (4 + optimizer_state_bytes(ss_graph_optimizer(g)));
    if (ss_swarm_peers_from_machine(g, m, cm, (int64_t)params, peers, &d) != SS_OK ||
        ss_swarm_run(peers, n, &c, &res, &d) != SS_OK) {
        r = ss_cli_fail(&d);
        goto out;
    }
    if (o.c.json)
        r = print_json(&c, peers, m, &res, params);
    else
        print_human(&o, &c, peers, m, &res, params), r = SS_EXIT_OK;
    if (!r && o.plot)
        r = write_plot(o.plot, &c, &res);
out:
    ss_swarm_result_free(&res);
    ss_free(peers);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
    return r;
}
