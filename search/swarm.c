/*
 * swarm.c — the swarm's event simulation (search/swarm.h): micro-batch
 * completions, churn and averaging rounds in time order.
 *
 * Invariant: events are processed in order of time, ties by peer index
 * (completions before churn for one peer); a peer is offline, computing
 * (next_done finite) or in a round (in_round); the counter that calls a
 * round sums the accumulated samples of the online peers not in a round.
 */
#include "search/swarm.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *ss_swarm_event_name(ss_swarm_event_kind k)
{
    switch (k) {
    case SS_SWARM_ROUND: return "round";
    case SS_SWARM_LEAVE: return "leave";
    case SS_SWARM_JOIN: return "join";
    case SS_SWARM_ABORT: return "abort";
    }
    return "?";
}

void ss_swarm_config_default(ss_swarm_config *c)
{
    memset(c, 0, sizeof *c);
    c->target_batch = 4096;
    c->micro_batch = 8;
    c->averaging = SS_AVG_LP;
    c->join_window_s = 5.0;
    c->duration_s = 3600.0;
    c->local_steps = 1;
    c->seed = 1;
    c->max_events = 100000;
}

/* ------------------------------------------------------------ peers */

static double peer_latency_s(const ss_machine *m, int dev)
{
    for (int l = 0; l < ss_machine_n_links(m); l++) {
        const ss_link *k = ss_machine_link(m, l);
        if ((k->a == dev || k->b == dev) && !strcmp(k->kind, "internet"))
            return k->latency_us * 1e-6;
    }
    return 0;
}

ss_status ss_swarm_peers_from_machine(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                                      int64_t n_params, ss_swarm_peer *out, ss_diag *d)
{
    int nt = ss_machine_n_types(m), n = ss_machine_n_devices(m);
    double *mb = ss_calloc((size_t)nt, sizeof *mb);
    if (!mb)
        return ss_diag_set(d, SS_ERR_NOMEM, "swarm: out of memory");
    for (int i = 0; i < nt; i++)
        mb[i] = -1;
    ss_status st = SS_OK;
    for (int i = 0; i < n && !st; i++) {
        const ss_device *dv = ss_machine_device(m, i);
        if (!(dv->up_gbps > 0) || !(dv->down_gbps > 0)) {
            st = ss_diag_set(d, SS_ERR_INVALID,
                             "swarm: topology \"%s\": device \"%s\" is not an internet peer "
                             "(a swarm topology lists its devices under \"peers\")",
                             ss_machine_name(m), dv->name);
            break;
        }
        int t = dv->type;
        if (mb[t] < 0) {
            double us = ss_machine_type(m, t)->mb_overhead_us;
            for (int o = 0; o < ss_graph_n_ops(g) && !st; o++) {
                const ss_op *op = ss_graph_op(g, o);
                if (!ss_op_has_kernel(op))
                    continue;
                ss_tile tile;
                ss_cost c;
                ss_op_full_tile(g, op, &tile);
                st = ss_cost_tile(cm, g, op, &tile, t, &c);
                if (st)
                    ss_diag_set(d, st, "swarm: no cost for operator %d on device type %s", o,
                                ss_machine_type(m, t)->name);
                us += c.fwd_us + c.bwd_us;
            }
            mb[t] = us * 1e-6;
        }
        ss_swarm_peer *p = &out[i];
        memset(p, 0, sizeof *p);
        snprintf(p->name, sizeof p->name, "%s", dv->name);
        p->devtype = t;
        p->mb_s = mb[t];
        p->update_s =
            ss_cost_update_us(cm, t, n_params, ss_graph_optimizer(g), ss_graph_precision(g)) *
            1e-6;
        p->link.up_Bps = dv->up_gbps * 1e9;
        p->link.down_Bps = dv->down_gbps * 1e9;
        p->link.latency_s = peer_latency_s(m, i);
        p->link.accepts = dv->accepts_connections;
    }
    ss_free(mb);
    return st;
}

/* ------------------------------------------------------------ state */

typedef struct swarm {
    const ss_swarm_peer *p;
    int n;
    const ss_swarm_config *c;
    ss_swarm_result *r;
    ss_diag *d;
    double now, target, mb_s_extra;
    uint64_t rng;
    int *online, *in_round;
    double *next_done, *last_done, *churn_t, *acc, *since, *join_t;
    double *share_sum;
} swarm;

static uint64_t next_u64(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* An exponential wait at rate per hour (INFINITY for rate 0). */
static double exp_wait(swarm *S, double per_h)
{
    if (!(per_h > 0))
        return INFINITY;
    double u = ((double)(next_u64(&S->rng) >> 11) + 1.0) / 9007199254740993.0; /* (0, 1] */
    return -log(u) / per_h * 3600.0;
}

static double mb_time(const swarm *S, int i)
{
    return S->p[i].mb_s + (S->c->local_steps > 1 ? S->p[i].update_s : 0.0);
}

static void record(swarm *S, ss_swarm_event_kind k, int peer, double samples, int parts,
                   double avg_s)
{
    ss_swarm_result *r = S->r;
    if (r->n_events >= S->c->max_events) {
        r->events_dropped++;
        return;
    }
    r->events[r->n_events++] = (ss_swarm_event){S->now, k, peer, samples, parts, avg_s};
}

static double counter(const swarm *S)
{
    double s = 0;
    for (int i = 0; i < S->n; i++)
        if (S->online[i] && !S->in_round[i])
            s += S->acc[i];
    return s;
}

enum { ADV_UNTIL = 0, ADV_TRIGGER, ADV_LEFT };

static void leave(swarm *S, int i)
{
    ss_swarm_peer_stats *ps = &S->r->peers[i];
    if (S->in_round[i] && S->now < S->join_t[i]) /* its last micro-batch was never done */
        ps->compute_s -= S->join_t[i] - S->now;
    S->r->lost_samples += S->acc[i];
    record(S, SS_SWARM_LEAVE, i, S->acc[i], 0, 0);
    S->acc[i] = 0;
    S->online[i] = 0;
    S->in_round[i] = 0;
    S->next_done[i] = INFINITY;
    ps->online_s += S->now - S->since[i];
    S->r->leaves++;
    S->churn_t[i] = S->now + exp_wait(S, S->c->join_per_h);
}

static void join(swarm *S, int i)
{
    ss_swarm_peer_stats *ps = &S->r->peers[i];
    double sync = S->c->state_bytes / S->p[i].link.down_Bps + S->p[i].link.latency_s;
    ps->sync_s += sync;
    S->online[i] = 1;
    S->since[i] = S->now;
    S->last_done[i] = -INFINITY;
    S->next_done[i] = S->now + sync + mb_time(S, i);
    S->churn_t[i] = S->now + exp_wait(S, S->c->leave_per_h);
    S->r->joins++;
    record(S, SS_SWARM_JOIN, i, 0, 0, 0);
}

/* Process events up to `until` in order. trigger: stop (ADV_TRIGGER) when
 * a completion brings the counter to the target. Stops (ADV_LEFT, *who)
 * when a peer in a round leaves. */
static int advance(swarm *S, double until, int trigger, int *who)
{
    for (;;) {
        double best = INFINITY;
        int bi = -1, churn = 0;
        for (int i = 0; i < S->n; i++) {
            if (S->next_done[i] < best)
                best = S->next_done[i], bi = i, churn = 0;
            if (S->churn_t[i] < best)
                best = S->churn_t[i], bi = i, churn = 1;
        }
        if (bi < 0 || best > until) {
            S->now = until;
            return ADV_UNTIL;
        }
        S->now = best;
        if (churn) {
            if (S->online[bi]) {
                int was = S->in_round[bi];
                leave(S, bi);
                if (was) {
                    *who = bi;
                    return ADV_LEFT;
                }
            } else {
                join(S, bi);
            }
            continue;
        }
        double t = mb_time(S, bi);
        S->acc[bi] += S->c->micro_batch;
        S->r->peers[bi].compute_s += t;
        S->last_done[bi] = S->now;
        S->next_done[bi] = S->now + t;
        if (trigger && counter(S) >= S->target)
            return ADV_TRIGGER;
    }
}

/* The participants' shares and averaging + update time. */
static ss_status round_time(swarm *S, const int *part, int np, ss_avg_peer *lp, double *w,
                            double *out)
{
    double upd = 0;
    for (int k = 0; k < np; k++) {
        lp[k] = S->p[part[k]].link;
        upd = fmax(upd, S->p[part[k]].update_s);
    }
    double xi;
    ss_status st = ss_averaging_solve(S->c->averaging, lp, np, S->c->vector_bytes, w, &xi, S->d);
    *out = xi + upd;
    return st;
}

/* Pick the participants of the round called at S->now: every computing
 * peer whose in-flight micro-batch ends within the window (one that
 * finished at now joins at now), then, when none of them accepts
 * connections, the next ones until one does. Returns their count (0: no
 * round possible now) and *start, the last one's join time. */
static int pick(swarm *S, int *part, double *start)
{
    double T = S->now, W = S->c->join_window_s;
    int np = 0, accepts = 0;
    *start = T;
    for (int i = 0; i < S->n; i++) {
        if (!S->online[i] || !isfinite(S->next_done[i]))
            continue;
        double f = S->last_done[i] == T ? T : S->next_done[i];
        if (f <= T + W) {
            part[np++] = i;
            S->join_t[i] = f;
            accepts += S->p[i].link.accepts != 0;
        }
    }
    while (!accepts) { /* wait for the earliest peer that accepts connections */
        int bi = -1;
        for (int i = 0; i < S->n; i++)
            if (S->online[i] && isfinite(S->next_done[i]) && S->p[i].link.accepts &&
                (bi < 0 || S->next_done[i] < S->next_done[bi]))
                bi = i;
        if (bi < 0)
            return 0;
        for (int i = 0; i < S->n; i++) /* everyone finishing before it joins too */
            if (S->online[i] && isfinite(S->next_done[i]) && S->last_done[i] != T &&
                S->next_done[i] > T + W && S->next_done[i] <= S->next_done[bi]) {
                part[np++] = i;
                S->join_t[i] = S->next_done[i];
            }
        accepts = 1;
    }
    while (np < 2) { /* a round averages at least two peers (hivemind's smallest group) */
        int bi = -1;
        for (int i = 0; i < S->n; i++) {
            int in = 0;
            for (int k = 0; k < np && !in; k++)
                in = part[k] == i;
            if (!in && S->online[i] && isfinite(S->next_done[i]) &&
                (bi < 0 || S->next_done[i] < S->next_done[bi]))
                bi = i;
        }
        if (bi < 0)
            break; /* a lone peer: its round is its own step */
        part[np++] = bi;
        S->join_t[bi] = S->next_done[bi];
    }
    for (int k = 0; k < np; k++) {
        int i = part[k];
        if (S->join_t[i] > T) { /* its in-flight micro-batch, done at join_t */
            S->acc[i] += S->c->micro_batch;
            S->r->peers[i].compute_s += mb_time(S, i);
            S->last_done[i] = S->join_t[i];
        }
        S->in_round[i] = 1;
        S->next_done[i] = INFINITY;
        *start = fmax(*start, S->join_t[i]);
    }
    return np;
}

static int drop(int *part, int np, int who)
{
    int k = 0;
    for (int j = 0; j < np; j++)
        if (part[j] != who)
            part[k++] = part[j];
    return k;
}

static ss_status run_loop(swarm *S, int *part, ss_avg_peer *lp, double *w)
{
    const ss_swarm_config *c = S->c;
    ss_swarm_result *r = S->r;
    double last_end = 0;
    int who;
    while (S->now < c->duration_s) {
        if (advance(S, c->duration_s, 1, &who) != ADV_TRIGGER)
            break;
        double T = S->now, start;
        int np = pick(S, part, &start);
        if (!np) { /* nobody can reduce: wait for the next churn event */
            double nx = INFINITY;
            for (int i = 0; i < S->n; i++)
                nx = fmin(nx, S->churn_t[i]);
            if (!isfinite(nx))
                break;
            advance(S, fmin(nx, c->duration_s), 0, &who);
            continue;
        }
        for (int i = 0; i < S->n; i++)
            if (S->online[i] && !S->in_round[i])
                r->peers[i].missed++;
        /* the join window: churn and the others' micro-batches go on */
        for (;;) {
            int rc = advance(S, fmin(start, c->duration_s), 0, &who);
            if (rc != ADV_LEFT)
                break;
            np = drop(part, np, who);
            start = T;
            for (int k = 0; k < np; k++)
                start = fmax(start, S->join_t[part[k]]);
        }
        if (S->now >= c->duration_s)
            break;
        double end = 0, avg = 0;
        for (;;) {
            if (np == 0)
                break;
            ss_status st = round_time(S, part, np, lp, w, &avg);
            if (st == SS_ERR_INFEASIBLE && c->averaging == SS_AVG_RING) {
                /* churn left too few peers accepting connections for a ring:
                 * the last client-only participant sits this round out */
                int k = np - 1;
                while (k >= 0 && S->p[part[k]].link.accepts)
                    k--;
                if (k < 0)
                    return st;
                int i = part[k];
                S->in_round[i] = 0;
                S->next_done[i] = S->now + mb_time(S, i);
                r->peers[i].missed++;
                np = drop(part, np, i);
                if (S->d)
                    ss_diag_init(S->d);
                continue;
            }
            if (st)
                return st;
            end = S->now + avg;
            int rc = advance(S, fmin(end, c->duration_s), 0, &who);
            if (rc != ADV_LEFT)
                break;
            np = drop(part, np, who);
            r->aborts++;
            record(S, SS_SWARM_ABORT, who, 0, np, S->now - (end - avg));
        }
        if (np == 0 || S->now < end)
            break; /* everyone left, or the run ended during the averaging */
        double samples = 0;
        for (int k = 0; k < np; k++) {
            int i = part[k];
            ss_swarm_peer_stats *ps = &r->peers[i];
            ps->wait_s += start - S->join_t[i];
            ps->avg_s += end - start;
            ps->samples += S->acc[i];
            ps->rounds++;
            S->share_sum[i] += w[k];
            samples += S->acc[i];
            S->acc[i] = 0;
            S->in_round[i] = 0;
            S->next_done[i] = end + mb_time(S, i);
        }
        r->samples += samples;
        r->rounds++;
        r->avg_time_s += end - start;
        last_end = end;
        record(S, SS_SWARM_ROUND, -1, samples, np, end - start);
    }
    S->now = c->duration_s;
    for (int i = 0; i < S->n; i++) {
        ss_swarm_peer_stats *ps = &r->peers[i];
        if (S->online[i])
            ps->online_s += S->now - S->since[i];
        ps->share = ps->rounds ? S->share_sum[i] / ps->rounds : 0;
    }
    r->samples_per_s = r->samples / c->duration_s;
    r->step_time_s = r->rounds ? last_end / r->rounds : 0;
    r->avg_time_s = r->rounds ? r->avg_time_s / r->rounds : 0;
    return SS_OK;
}

static ss_status check(const ss_swarm_peer *p, int n, const ss_swarm_config *c, ss_diag *d)
{
    if (n < 1 || !p)
        return ss_diag_set(d, SS_ERR_INVALID, "swarm: expected at least one peer, got %d", n);
    if (c->target_batch < 1 || c->micro_batch < 1 || !(c->duration_s > 0) ||
        c->local_steps < 1 || !(c->vector_bytes >= 0) || !(c->state_bytes >= 0) ||
        !(c->join_window_s >= 0) || !(c->leave_per_h >= 0) || !(c->join_per_h >= 0) ||
        c->max_events < 0)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "swarm: bad config (target batch %lld, micro-batch %d, duration %g "
                           "s, local steps %d, window %g s, churn %g/%g per hour)",
                           (long long)c->target_batch, c->micro_batch, c->duration_s,
                           c->local_steps, c->join_window_s, c->leave_per_h, c->join_per_h);
    int acc = 0;
    for (int i = 0; i < n; i++) {
        if (!(p[i].mb_s > 0) || !(p[i].update_s >= 0) || !(p[i].link.up_Bps > 0) ||
            !(p[i].link.down_Bps > 0) || !(p[i].link.latency_s >= 0))
            return ss_diag_set(d, SS_ERR_INVALID,
                               "swarm: peer %d (\"%s\"): expected micro-batch time > 0, update "
                               ">= 0, bandwidths > 0, latency >= 0",
                               i, p[i].name);
        acc += p[i].link.accepts != 0;
    }
    if (n > 1 && !acc)
        return ss_diag_set(d, SS_ERR_INFEASIBLE,
                           "swarm: none of the %d peers accepts connections: nobody can reduce "
                           "a part of the gradient",
                           n);
    if (c->averaging == SS_AVG_RING && n - acc > acc)
        return ss_diag_set(d, SS_ERR_INFEASIBLE,
                           "swarm: a ring needs no more client-only peers (%d) than peers "
                           "accepting connections (%d); use --averaging lp or equal",
                           n - acc, acc);
    return SS_OK;
}

ss_status ss_swarm_run(const ss_swarm_peer *peers, int n, const ss_swarm_config *c,
                       ss_swarm_result *r, ss_diag *d)
{
    memset(r, 0, sizeof *r);
    ss_status st = check(peers, n, c, d);
    if (st)
        return st;
    swarm S = {.p = peers, .n = n, .c = c, .r = r, .d = d};
    S.target = (double)c->target_batch * c->local_steps;
    S.rng = c->seed ^ 0x5deece66dull;
    size_t un = (size_t)n;
    r->n_peers = n;
    r->peers = ss_calloc(un, sizeof *r->peers);
    r->events = ss_calloc((size_t)c->max_events + 1, sizeof *r->events);
    S.online = ss_calloc(un, sizeof(int));
    S.in_round = ss_calloc(un, sizeof(int));
    double **arrs[] = {&S.next_done, &S.last_done, &S.churn_t, &S.acc,
                       &S.since,     &S.join_t,    &S.share_sum};
    int nomem = !r->peers || !r->events || !S.online || !S.in_round;
    for (size_t k = 0; k < sizeof arrs / sizeof arrs[0]; k++)
        nomem |= !(*arrs[k] = ss_calloc(un, sizeof(double)));
    int *part = ss_calloc(un, sizeof *part);
    ss_avg_peer *lp = ss_calloc(un, sizeof *lp);
    double *w = ss_calloc(un, sizeof *w);
    if (nomem || !part || !lp || !w) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "swarm: out of memory for %d peers", n);
    } else {
        for (int i = 0; i < n; i++) { /* everyone online at 0, the state already there */
            S.online[i] = 1;
            S.last_done[i] = -INFINITY;
            S.next_done[i] = mb_time(&S, i);
            S.churn_t[i] = exp_wait(&S, c->leave_per_h);
        }
        st = run_loop(&S, part, lp, w);
    }
    for (size_t k = 0; k < sizeof arrs / sizeof arrs[0]; k++)
        ss_free(*arrs[k]);
    ss_free(S.online), ss_free(S.in_round), ss_free(part), ss_free(lp), ss_free(w);
    if (st)
        ss_swarm_result_free(r);
    return st;
}

void ss_swarm_result_free(ss_swarm_result *r)
{
    if (!r)
        return;
    ss_free(r->peers);
    ss_free(r->events);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------ what-if */

static void point_figures(const ss_swarm_result *r, ss_swarm_point *pt)
{
    pt->feasible = 1;
    pt->samples_per_s = r->samples_per_s;
    pt->step_time_s = r->step_time_s;
    pt->avg_time_s = r->avg_time_s;
    pt->lost_samples = r->lost_samples;
    pt->rounds = r->rounds;
    pt->aborts = r->aborts;
    double util = 0;
    for (int i = 0; i < r->n_peers; i++) {
        const ss_swarm_peer_stats *s = &r->peers[i];
        util += s->online_s > 0 ? s->compute_s / s->online_s : 0;
        pt->peers_missing += s->missed > 0;
    }
    pt->compute_util = r->n_peers ? util / r->n_peers : 0;
}

ss_status ss_swarm_sweep(const ss_swarm_peer *peers, int n, const ss_swarm_config *c,
                         const int *counts, int n_counts, const double *scales, int n_scales,
                         const int64_t *targets, int n_targets, ss_swarm_point *out,
                         ss_diag *d)
{
    if (n < 1 || n_counts < 1 || n_scales < 1 || n_targets < 1)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "swarm what-if: expected peers and at least one value per axis "
                           "(peers %d, counts %d, scales %d, targets %d)",
                           n, n_counts, n_scales, n_targets);
    for (int k = 0; k < n_counts; k++)
        if (counts[k] < 1 || counts[k] > n)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "swarm what-if: peer count %d out of range (the swarm has %d "
                               "peers)", counts[k], n);
    for (int k = 0; k < n_scales; k++)
        if (!(scales[k] > 0) || !isfinite(scales[k]))
            return ss_diag_set(d, SS_ERR_INVALID,
                               "swarm what-if: bandwidth factor %g must be > 0", scales[k]);
    for (int k = 0; k < n_targets; k++)
        if (targets[k] < 1)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "swarm what-if: target batch %lld must be >= 1",
                               (long long)targets[k]);
    ss_swarm_peer *sub = ss_calloc((size_t)n, sizeof *sub);
    if (!sub)
        return ss_diag_set(d, SS_ERR_NOMEM, "swarm what-if: out of memory");
    ss_status st = SS_OK;
    int at = 0;
    for (int a = 0; a < n_counts && !st; a++)
        for (int b = 0; b < n_scales && !st; b++) {
            for (int i = 0; i < counts[a]; i++) {
                sub[i] = peers[i];
                sub[i].link.up_Bps *= scales[b];
                sub[i].link.down_Bps *= scales[b];
            }
            for (int t = 0; t < n_targets && !st; t++) {
                ss_swarm_point *pt = &out[at++];
                memset(pt, 0, sizeof *pt);
                pt->n_peers = counts[a];
                pt->bw_scale = scales[b];
                pt->target_batch = targets[t];
                ss_swarm_config cc = *c;
                cc.target_batch = targets[t];
                cc.max_events = 0; /* the figures need no event list */
                ss_swarm_result r;
                ss_diag local;
                ss_diag_init(&local);
                ss_status rs = ss_swarm_run(sub, counts[a], &cc, &r, &local);
                if (rs == SS_OK) {
                    point_figures(&r, pt);
                    ss_swarm_result_free(&r);
                } else if (rs == SS_ERR_INFEASIBLE || rs == SS_ERR_INVALID) {
                    snprintf(pt->why, sizeof pt->why, "%s", local.msg);
                } else {
                    st = ss_diag_set(d, rs, "swarm what-if: %d peers, bandwidth x %g, target "
                                     "%lld: %s", counts[a], scales[b], (long long)targets[t],
                                     local.msg);
                }
            }
        }
    ss_free(sub);
    return st;
}
