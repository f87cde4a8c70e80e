/*
 * cmd_swarm.c — `simsearch swarm`: collaborative training over the
 * internet (DeDLOC / hivemind) on a topology of peers: each peer's
 * micro-batch time from the cost model, then the swarm's event simulation
 * (simulator/swarm.h) with the averaging split by search/averaging.h, and a
 * report of throughput, step time, each peer's share of compute and of
 * averaging, idle fractions and the churn's events (docs/swarm.md).
 *
 * Invariant: every option given changes the run (none is accepted and
 * ignored); specs (--churn, --strategy) are parsed completely or refused
 * naming the option and what was expected.
 */
#include "cli.h"
#include "simulator/swarm.h"

#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct swarm_opts {
    ss_cli_common c;
    long long target, micro, seed, params;
    double duration, window;
    const char *averaging, *churn, *strategy, *compress;
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
    const ss_cli_output outs[] = {{NULL, NULL}};
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
out:
    ss_swarm_result_free(&res);
    ss_free(peers);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
    return r;
}
