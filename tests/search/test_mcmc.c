/*
 * test_mcmc.c — the Metropolis–Hastings search against a toy judge whose
 * optimum is found by exhaustive enumeration (search/mcmc.h).
 *
 * The toy model (3 ops: x -> fc1, x -> fc2, 4 devices):
 *   load[d]  = sum over tiles on d of work(op) / T  (x: 4, fc1: 40, fc2: 40;
 *              a tile of a red-split op costs 1.25x)
 *   penalty  = 4 per edge (x->fc1, x->fc2) whose consumer config differs from
 *              the producer's (degrees, reduction or devices) or has red > 1
 *   time     = max_d load[d] + penalties
 *   memory   = per device, fc1 and fc2 each hold 24 / (deg[1] * red) weight
 *              elements per tile; capacity 30.
 * Data parallelism (deg0 = 4 everywhere) holds 24 + 24 = 48 > 30 elements
 * per device: it does not fit. Best by hand: x (2,2), fc1 and fc2 (2,2,1) on
 * the same 4 devices: load 1 + 10 + 10 = 21, no penalty, memory 12 + 12 = 24.
 * Nothing beats 21: the total work 84 over 4 devices is already 21.
 */
#include "testutil.h"
#include "search/mcmc.h"

#include <math.h>
#include <string.h>

/* Op 0 of the test graphs: input x [8 samples, 6 features]; its tensor. */
static int input_x(ss_graph *g)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_op_attrs a;
    memset(&a, 0, sizeof a);
    a.ndim = 2;
    a.shape[0] = 8;
    a.shape[1] = 6;
    a.kind[0] = SS_DIM_SAMPLE;
    a.kind[1] = SS_DIM_PARAMETER;
    a.dtype = SS_F32;
    assert_int_equal(ss_graph_add(g, "x", SS_OP_INPUT, &a, 0, NULL, &d), 0);
    return ss_graph_out(g, 0);
}

static ss_graph *branch_graph(void)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = ss_graph_new("branch");
    int in = input_x(g);
    ss_op_attrs a;
    memset(&a, 0, sizeof a);
    a.out_features = 4;
    assert_int_equal(ss_graph_add(g, "fc1", SS_OP_LINEAR, &a, 1, &in, &d), 1);
    assert_int_equal(ss_graph_add(g, "fc2", SS_OP_LINEAR, &a, 1, &in, &d), 2);
    ss_graph_set_training(g, 8, SS_OPT_SGD, SS_PREC_FP32);
    return g;
}

static int same(const ss_pconfig *a, const ss_pconfig *b)
{
    return ss_pconfig_same_tiles(a, b);
}

static void toy_cost(const ss_plan *p, ss_eval *e)
{
    static const double work[3] = {4, 40, 40};
    double load[4] = {0}, mem[4] = {0}, pen = 0;
    for (int op = 0; op < 3; op++) {
        const ss_pconfig *c = ss_plan_config(p, op);
        for (int t = 0; t < c->ntiles; t++) {
            load[c->devices[t]] += work[op] / c->ntiles * (c->red > 1 ? 1.25 : 1.0);
            if (op > 0)
                mem[c->devices[t]] += 24.0 / (c->deg[1] * c->red);
        }
        if (op > 0 && (!same(c, ss_plan_config(p, 0)) || c->red > 1))
            pen += 4;
    }
    double mx = 0, over = 0;
    for (int d = 0; d < 4; d++) {
        mx = load[d] > mx ? load[d] : mx;
        over = mem[d] - 30 > over ? mem[d] - 30 : over;
    }
    e->time_us = mx + pen;
    e->fits = over <= 0;
    e->overflow_bytes = over;
}

/* The judge also checks the contract: with changed >= 0, p differs from
 * the committed base in op `changed` only. */
typedef struct toy {
    ss_plan *base, *pending;
    int has_base;
    long evals, contract_violations, restores;
    int invalid_dev3;   /* fc1 anywhere on device 3 -> SS_ERR_INVALID */
    long fail_at;       /* eval number that returns SS_ERR_NOMEM (-1 never) */
    int constant;       /* every plan costs 1 */
    int cutoff;         /* stop early (beyond) when toy_bound exceeds the cutoff */
} toy;

static ss_status toy_bound(void *ctx, const ss_plan *p, int changed, double *lb, ss_diag *d);

static ss_status toy_eval(void *ctx, const ss_plan *p, int changed, double cutoff_us, ss_eval *out,
                         ss_diag *d)
{
    toy *t = ctx;
    t->evals++;
    if (t->fail_at >= 0 && t->evals > t->fail_at)
        return ss_diag_set(d, SS_ERR_NOMEM, "toy: out of memory");
    if (changed >= 0) {
        if (!t->has_base)
            t->contract_violations++;
        for (int op = 0; op < 3 && t->has_base; op++)
            if (op != changed &&
                !same(ss_plan_config(p, op), ss_plan_config(t->base, op)))
                t->contract_violations++;
    }
    ss_plan_copy(t->pending, p);
    if (t->invalid_dev3) {
        const ss_pconfig *c = ss_plan_config(p, 1);
        for (int k = 0; k < c->ntiles; k++)
            if (c->devices[k] == 3)
                return ss_diag_set(d, SS_ERR_INVALID, "toy: no route");
    }
    if (t->cutoff && cutoff_us < HUGE_VAL) {
        double lb;
        toy_bound(NULL, p, changed, &lb, d);
        if (lb > cutoff_us) {
            out->time_us = lb;
            out->beyond = 1;
            return SS_OK;
        }
    }
    if (t->constant) {
        out->time_us = 1;
        out->fits = 1;
        out->overflow_bytes = 0;
        return SS_OK;
    }
    toy_cost(p, out);
    return SS_OK;
}

static void toy_commit(void *ctx)
{
    toy *t = ctx;
    ss_plan_copy(t->base, t->pending);
    t->has_base = 1;
}

/* The toy's base is a plan: restoring is taking p back as the base (the
 * contract check in toy_eval then verifies the chain's later one-op moves
 * against it). */
static int toy_restore(void *ctx, const ss_plan *p, const double *path)
{
    (void)path;
    toy *t = ctx;
    ss_plan_copy(t->base, p);
    t->has_base = 1;
    t->restores++;
    return 1;
}

typedef struct fixture {
    ss_graph *g;
    ss_space *sp;
    ss_plan *dp, *rnd, *best;
    toy t;
    ss_search_judge ev;
} fixture;

static void setup_fx(fixture *f)
{
    memset(f, 0, sizeof *f);
    f->g = branch_graph();
    ss_space_opts o = {4, 0};
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_space_new(f->g, &o, &f->sp, &d), SS_OK);
    /* Data-parallel start: sample dim split 4 ways on devices 0..3. */
    f->dp = ss_plan_new(f->g, NULL);
    int devs[4] = {0, 1, 2, 3};
    ss_pconfig c;
    memset(&c, 0, sizeof c);
    c.ndim = 2;
    c.deg[0] = 4;
    c.deg[1] = 1;
    c.red = 1;
    c.rep = 1;
    c.ntiles = 4;
    c.devices = devs;
    for (int op = 0; op < 3; op++)
        assert_int_equal(ss_plan_set_config(f->dp, op, &c, &d), SS_OK);
    f->rnd = ss_plan_new(f->g, NULL);
    ss_rng r;
    ss_rng_seed(&r, 99);
    assert_int_equal(ss_space_random_plan(f->sp, &r, f->rnd, &d), SS_OK);
    f->best = ss_plan_new(f->g, NULL);
    f->t.base = ss_plan_new(f->g, NULL);
    f->t.pending = ss_plan_new(f->g, NULL);
    f->t.fail_at = -1;
    f->ev.ctx = &f->t;
    f->ev.eval = toy_eval;
    f->ev.commit = toy_commit;
}

static void teardown_fx(fixture *f)
{
    ss_plan_free(f->dp);
    ss_plan_free(f->rnd);
    ss_plan_free(f->best);
    ss_plan_free(f->t.base);
    ss_plan_free(f->t.pending);
    ss_space_free(f->sp);
    ss_graph_free(f->g);
}

/* Exhaustive optimum over all 14 * 21 * 21 = 6,174 plans of the space. */
static double exhaustive_best(fixture *f)
{
    ss_plan *p = ss_plan_new(f->g, NULL);
    int devs[4];
    ss_pconfig c;
    c.devices = devs;
    ss_diag d;
    ss_diag_init(&d);
    double best = HUGE_VAL;
    int64_t n0 = ss_space_n_candidates(f->sp, 0), n1 = ss_space_n_candidates(f->sp, 1);
    assert_int_equal(n0 * n1 * n1, 6174);
    for (int64_t i = 0; i < n0; i++) {
        ss_space_candidate(f->sp, 0, i, &c, devs);
        ss_plan_set_config(p, 0, &c, &d);
        for (int64_t j = 0; j < n1; j++) {
            ss_space_candidate(f->sp, 1, j, &c, devs);
            ss_plan_set_config(p, 1, &c, &d);
            for (int64_t k = 0; k < n1; k++) {
                ss_space_candidate(f->sp, 2, k, &c, devs);
                ss_plan_set_config(p, 2, &c, &d);
                ss_eval e;
                toy_cost(p, &e);
                if (e.fits && e.time_us < best)
                    best = e.time_us;
            }
        }
    }
    ss_plan_free(p);
    return best;
}

static void test_finds_exhaustive_optimum(void **state)
{
    (void)state;
    fixture f;
    setup_fx(&f);
    double opt = exhaustive_best(&f);
    assert_true(opt == 21.0); /* the hand derivation above */

    ss_eval dp_e;
    toy_cost(f.dp, &dp_e);
    assert_false(dp_e.fits); /* 48 > 30 */

    ss_plan *starts[2] = {f.dp, f.rnd};
    ss_mcmc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.budget = 4000;
    cfg.seed = 1;
    for (uint64_t seed = 1; seed <= 5; seed++) {
        cfg.seed = seed;
        ss_eval be;
        ss_mcmc_stats st;
        ss_diag d;
        ss_diag_init(&d);
        assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &be, &st, &d), SS_OK);
        assert_true(be.fits);
        assert_true(be.time_us == opt);
        ss_eval check;
        toy_cost(f.best, &check);
        assert_true(check.time_us == opt && check.fits);
        assert_int_equal(f.t.contract_violations, 0);
        assert_true(st.proposals <= cfg.budget);
        assert_true(st.accepted > 0 && st.accepted <= st.proposals);
        assert_true(st.evaluations <= st.proposals + 64);
        assert_true(st.best_us == opt);
        assert_true(st.restarts >= 3); /* two starts + the exploitation chain */
    }
    teardown_fx(&f);
}

static void test_deterministic(void **state)
{
    (void)state;
    fixture f;
    setup_fx(&f);
    ss_plan *starts[2] = {f.dp, f.rnd};
    ss_mcmc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.budget = 600; /* short: the two runs must agree even before converging */
    cfg.seed = 12345;
    ss_plan *other = ss_plan_new(f.g, NULL);
    ss_mcmc_stats s1, s2;
    ss_eval e1, e2;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &e1, &s1, &d), SS_OK);
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, other, &e2, &s2, &d), SS_OK);
    for (int op = 0; op < 3; op++)
        assert_true(same(ss_plan_config(f.best, op), ss_plan_config(other, op)));
    assert_true(e1.time_us == e2.time_us);
    assert_int_equal(s1.proposals, s2.proposals);
    assert_int_equal(s1.accepted, s2.accepted);
    assert_int_equal(s1.evaluations, s2.evaluations);
    ss_plan_free(other);
    teardown_fx(&f);
}

static int stop_after;
static int stop_cb(void *ctx)
{
    (void)ctx;
    return --stop_after < 0;
}

static int n_progress;
static void progress_cb(void *ctx, const ss_mcmc_stats *st)
{
    (void)ctx;
    assert_true(st->proposals >= 0);
    n_progress++;
}

static void test_stopping_rules(void **state)
{
    (void)state;
    fixture f;
    setup_fx(&f);
    ss_plan *starts[2] = {f.dp, f.rnd};
    ss_mcmc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    ss_mcmc_stats st;
    ss_eval be;
    ss_diag d;
    ss_diag_init(&d);

    /* User stop after 50 polls: SS_OK, best still at least as good as the
     * best start (the random start fits or DP's overflow is reported). */
    cfg.budget = 100000;
    cfg.seed = 3;
    cfg.stop = stop_cb;
    cfg.progress = progress_cb;
    cfg.progress_every_s = 1e-9;
    stop_after = 50;
    n_progress = 0;
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &be, &st, &d), SS_OK);
    assert_int_equal(st.stopped_by, SS_MCMC_STOP_USER);
    assert_true(st.proposals <= 50);
    assert_true(n_progress > 0);
    assert_string_equal(ss_mcmc_stop_name(st.stopped_by), "interrupted");

    /* Patience: every plan costs the same, so the best is set by the first
     * start at proposal 0 and never improves: the search stops exactly at
     * budget / 2 proposals. */
    cfg.stop = NULL;
    cfg.progress = NULL;
    cfg.budget = 1000;
    f.t.constant = 1;
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &be, &st, &d), SS_OK);
    assert_int_equal(st.stopped_by, SS_MCMC_STOP_PATIENCE);
    assert_int_equal(st.proposals, 500);
    f.t.constant = 0;

    /* Budget. */
    cfg.budget = 300;
    cfg.patience = -1;
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &be, &st, &d), SS_OK);
    assert_int_equal(st.stopped_by, SS_MCMC_STOP_BUDGET);
    assert_int_equal(st.proposals, 300);

    /* Time limit already over: the starts are still evaluated, no chain. */
    cfg.budget = 100000;
    cfg.time_limit_s = 1e-12;
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &be, &st, &d), SS_OK);
    assert_int_equal(st.stopped_by, SS_MCMC_STOP_TIME);
    assert_int_equal(st.proposals, 0);
    assert_int_equal(st.evaluations, 2);
    teardown_fx(&f);
}

/* best_half_us is the best plan's time after the first proposals / 2
 * proposals. Checked against the same chain stopped there: a search
 * stopped by the user after k polls follows the full search's chain up to
 * its stop (stopping draws nothing), each proposal is preceded by at least
 * one poll, so some k stops it after exactly proposals / 2 proposals, and
 * its best_us is the full run's best at that point (no patience: the full
 * run spends its whole budget and has evaluated both starts by then). The
 * seeds include searches that found their best in the first half (gain 0)
 * and in the second. */
static void test_best_half(void **state)
{
    (void)state;
    fixture f;
    setup_fx(&f);
    ss_plan *starts[2] = {f.dp, f.rnd};
    ss_mcmc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.budget = 120;
    cfg.patience = -1;
    int early = 0, late = 0;
    for (uint64_t seed = 1; seed <= 12; seed++) {
        ss_mcmc_stats st, half;
        ss_eval be;
        ss_diag d;
        ss_diag_init(&d);
        cfg.seed = seed;
        cfg.stop = NULL;
        assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &be, &st, &d), SS_OK);
        assert_int_equal(st.proposals, cfg.budget);
        assert_true(isfinite(st.best_us));
        assert_true(st.best_half_us >= st.best_us);
        if (st.best_at_proposal <= st.proposals / 2) {
            assert_true(st.best_half_us == st.best_us);
            early++;
        } else {
            assert_true(st.best_half_us > st.best_us);
            late++;
        }
        cfg.stop = stop_cb;
        half.proposals = -1;
        for (int k = (int)(st.proposals / 2); half.proposals < st.proposals / 2; k++) {
            stop_after = k;
            assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &be, &half, &d),
                             SS_OK);
            assert_true(half.proposals <= st.proposals / 2);
        }
        assert_true(half.best_us == st.best_half_us);
    }
    assert_true(early > 0 && late > 0);

    /* The boundary: without exploration and with a fixed restart interval
     * the chain does not depend on the budget, so a search whose best came
     * at proposal b, given the budget 2b, finds it at b = proposals / 2
     * (still the first half: no gain), and given 2b + 2 it finds it at
     * b < proposals / 2 while given 2b - 1 it finds it in the second half. */
    cfg.stop = NULL;
    cfg.explore_share = -1;
    cfg.restart_after = 40;
    cfg.budget = 400;
    cfg.seed = 5;
    ss_mcmc_stats st;
    ss_eval be;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &be, &st, &d), SS_OK);
    int64_t b = st.best_at_proposal;
    double best = st.best_us;
    assert_true(b > 1);
    for (int64_t budget = 2 * b - 1; budget <= 2 * b + 2; budget++) {
        cfg.budget = budget;
        assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &be, &st, &d), SS_OK);
        assert_int_equal(st.best_at_proposal, b);
        assert_true(st.best_us == best);
        if (budget >= 2 * b)
            assert_true(st.best_half_us == best);
        else
            assert_true(st.best_half_us > best);
    }
    teardown_fx(&f);
}

/* The schedule's defaults are what mcmc.h says: with every plan costing the
 * same (no improvement ever), a 20,000-proposal search restarts every
 * min(max(100, 20000 / 20), 150) = 150 proposals and explores for a quarter
 * of the budget: the same run as with those values given explicitly, fewer
 * restarts with a 1,000-proposal interval, and without exploration 2 start
 * evaluations + 1 exploitation chain + restarts at 150 ... 19,950 (133) =
 * 136. */
static void test_schedule_defaults(void **state)
{
    (void)state;
    fixture f;
    setup_fx(&f);
    ss_plan *starts[2] = {f.dp, f.rnd};
    ss_mcmc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    ss_mcmc_stats def, st;
    ss_eval be;
    ss_diag d;
    ss_diag_init(&d);
    f.t.constant = 1;
    cfg.budget = 20000;
    cfg.patience = -1;
    cfg.seed = 5;
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &be, &def, &d), SS_OK);
    assert_int_equal(def.proposals, 20000);
    /* chain starts: 2 exploration chains (each starts with its start's one
     * evaluation) + the exploitation chain = 3; exploitation runs proposals
     * 5,000..19,999 and restarts whenever the proposals since the best (set
     * at 0) are a multiple of 150: at 5,100, 5,250 ... 19,950 = 100. */
    assert_int_equal(def.restarts, 103);
    cfg.restart_after = 150;
    cfg.explore_share = 0.25;
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &be, &st, &d), SS_OK);
    assert_int_equal(st.restarts, def.restarts);
    assert_int_equal(st.evaluations, def.evaluations);
    cfg.restart_after = 1000;
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &be, &st, &d), SS_OK);
    assert_true(st.restarts < def.restarts);
    cfg.restart_after = 150;
    cfg.explore_share = -1;
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &be, &st, &d), SS_OK);
    assert_int_equal(st.restarts, 136);
    f.t.constant = 0;
    teardown_fx(&f);
}

/* The toy's lower bound: the largest device load without penalties (<= the
 * toy time). A bound is stateless here, so committing needs nothing. */
static ss_status toy_bound(void *ctx, const ss_plan *p, int changed, double *lb, ss_diag *d)
{
    (void)ctx;
    (void)changed;
    (void)d;
    static const double work[3] = {4, 40, 40};
    double load[4] = {0}, mx = 0;
    for (int op = 0; op < 3; op++) {
        const ss_pconfig *c = ss_plan_config(p, op);
        for (int t = 0; t < c->ntiles; t++)
            load[c->devices[t]] += work[op] / c->ntiles * (c->red > 1 ? 1.25 : 1.0);
    }
    for (int k = 0; k < 4; k++)
        mx = load[k] > mx ? load[k] : mx;
    *lb = mx;
    return SS_OK;
}

/* Run b (best plan `other`) went the same way as run a (best in f->best). */
static void same_chain(const fixture *f, const ss_plan *other, const ss_eval *ea,
                       const ss_mcmc_stats *sa, const ss_eval *eb, const ss_mcmc_stats *sb)
{
    for (int op = 0; op < 3; op++)
        assert_true(same(ss_plan_config(f->best, op), ss_plan_config(other, op)));
    assert_true(ea->time_us == eb->time_us);
    assert_int_equal(sa->proposals, sb->proposals);
    assert_int_equal(sa->accepted, sb->accepted);
}

/* With a lower bound the chain is exactly the same (same best plan, same
 * proposals and acceptances), with fewer judge calls. */
static void test_bound_same_chain(void **state)
{
    (void)state;
    fixture f;
    setup_fx(&f);
    ss_plan *starts[2] = {f.dp, f.rnd};
    ss_mcmc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.budget = 3000;
    cfg.seed = 77;
    cfg.patience = -1;
    cfg.eval_cache = -1; /* the counts below compare bound and judge alone */
    ss_mcmc_stats s1, s2;
    ss_eval e1, e2;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &e1, &s1, &d), SS_OK);
    ss_plan *other = ss_plan_new(f.g, NULL);
    f.ev.bound = toy_bound;
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, other, &e2, &s2, &d), SS_OK);
    same_chain(&f, other, &e1, &s1, &e2, &s2);
    assert_int_equal(s1.pruned, 0);
    assert_true(s2.pruned > 0);
    assert_int_equal(s2.evaluations + s2.pruned, s1.evaluations);
    assert_int_equal(f.t.contract_violations, 0);
    /* The same bound inside the judge, as a cutoff (ss_sim_run_within's
     * use): the same chain again, the moves it proves too slow cut. */
    f.ev.bound = NULL;
    f.t.cutoff = 1;
    ss_mcmc_stats s3;
    ss_eval e3;
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, other, &e3, &s3, &d), SS_OK);
    same_chain(&f, other, &e1, &s1, &e3, &s3);
    assert_int_equal(s1.cut, 0);
    assert_int_equal(s3.cut, s2.pruned);
    assert_int_equal(s3.evaluations + s3.cut, s1.evaluations);
    assert_int_equal(f.t.contract_violations, 0);
    ss_plan_free(other);
    teardown_fx(&f);
}

/* The evaluation cache (evalcache.h) decides a move to a plan judged
 * before exactly as a new evaluation would: with the cache on and off the
 * chain is the same (best plan, proposals, acceptances), and every move it
 * decides is a judge call saved. Three kinds of cached answers: exact
 * times, bounds of evaluations cut at a threshold (cutoff), plans that
 * cannot run (fc1 on device 3). */
static void test_cache_same_chain(void **state)
{
    (void)state;
    for (int variant = 0; variant < 3; variant++) {
        fixture f;
        setup_fx(&f);
        f.t.cutoff = variant == 1;
        f.t.invalid_dev3 = variant == 2;
        ss_plan *single = ss_plan_new(f.g, NULL); /* all on device 0: runs in variant 2 */
        ss_plan *starts[3] = {f.dp, f.rnd, single};
        ss_mcmc_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.budget = 3000;
        cfg.seed = 77;
        cfg.patience = -1;
        cfg.eval_cache = -1;
        ss_mcmc_stats s1, s2;
        ss_eval e1, e2;
        ss_diag d;
        ss_diag_init(&d);
        assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 3, &cfg, f.best, &e1, &s1, &d), SS_OK);
        long calls1 = f.t.evals;
        ss_plan *other = ss_plan_new(f.g, NULL);
        cfg.eval_cache = 0;
        assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 3, &cfg, other, &e2, &s2, &d), SS_OK);
        same_chain(&f, other, &e1, &s1, &e2, &s2);
        assert_int_equal(s1.cached, 0);
        assert_true(s2.cached > 100); /* 6,174 plans: a chain of 3,000 moves revisits many */
        assert_int_equal(s2.evaluations + s2.cut + s2.cached, s1.evaluations + s1.cut);
        assert_int_equal(f.t.evals - calls1 + s2.cached, calls1);
        if (variant == 1)
            assert_true(s1.cut > 0);
        if (variant == 2)
            assert_true(s1.infeasible > 0 && s2.infeasible < s1.infeasible);
        assert_int_equal(f.t.contract_violations, 0);
        ss_plan_free(single);
        ss_plan_free(other);
        teardown_fx(&f);
    }
}

/* Restarts to the best plan restore the judge's base (restore) instead
 * of simulating the best again: the chain is the same as with every restart
 * simulated (best plan, proposals, acceptances), each restored restart is an
 * judge call saved, and the one-op moves after a restore satisfy the
 * judge's contract (their plans differ from its base in the changed op
 * only). With and without cut evaluations. */
static void test_restore_same_chain(void **state)
{
    (void)state;
    for (int variant = 0; variant < 2; variant++) {
        fixture f;
        setup_fx(&f);
        f.t.cutoff = variant == 1;
        ss_plan *starts[2] = {f.dp, f.rnd};
        ss_mcmc_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.budget = 4000;
        cfg.seed = 31;
        cfg.patience = -1;
        cfg.beta = 8; /* hot: the chain wanders off the best between restarts */
        ss_mcmc_stats s1, s2;
        ss_eval e1, e2;
        ss_diag d;
        ss_diag_init(&d);
        assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &e1, &s1, &d), SS_OK);
        long calls1 = f.t.evals;
        ss_plan *other = ss_plan_new(f.g, NULL);
        f.ev.restore = toy_restore;
        assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, other, &e2, &s2, &d), SS_OK);
        same_chain(&f, other, &e1, &s1, &e2, &s2);
        assert_int_equal(s1.restored, 0);
        assert_true(s2.restored > 5);
        assert_int_equal(s2.restored, f.t.restores);
        assert_int_equal(s2.restarts, s1.restarts);
        assert_int_equal(s2.evaluations + s2.restored, s1.evaluations);
        assert_int_equal(f.t.evals - calls1 + s2.restored, calls1);
        assert_int_equal(f.t.contract_violations, 0);
        ss_plan_free(other);
        teardown_fx(&f);
    }
}

/* Plans the judge cannot run are rejected and the search goes on; a
 * fatal judge error stops it and leaves `best` untouched. */
static void test_invalid_and_errors(void **state)
{
    (void)state;
    fixture f;
    setup_fx(&f);
    ss_plan *starts[2] = {f.dp, f.rnd};
    ss_mcmc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.budget = 3000;
    cfg.seed = 5;
    ss_mcmc_stats st;
    ss_eval be;
    ss_diag d;
    ss_diag_init(&d);
    f.t.invalid_dev3 = 1;
    /* Both starts use device 3 for fc1: no start can run. */
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &be, &st, &d),
                     SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "no start plan"));
    ss_diag_init(&d);
    /* Add a start with every op on device 0 (ss_plan_new's default). */
    ss_plan *single = ss_plan_new(f.g, NULL);
    ss_plan *starts3[3] = {f.dp, f.rnd, single};
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts3, 3, &cfg, f.best, &be, &st, &d), SS_OK);
    ss_plan_free(single);
    const ss_pconfig *c = ss_plan_config(f.best, 1);
    for (int k = 0; k < c->ntiles; k++)
        assert_int_not_equal(c->devices[k], 3);
    assert_true(st.infeasible > 0);
    assert_int_equal(d.status, SS_OK);
    f.t.invalid_dev3 = 0;

    /* Fatal error at the 10th evaluation. */
    ss_plan *before = ss_plan_clone(f.best);
    f.t.evals = 0;
    f.t.fail_at = 10;
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &be, &st, &d),
                     SS_ERR_NOMEM);
    assert_non_null(strstr(d.msg, "toy: out of memory"));
    for (int op = 0; op < 3; op++)
        assert_true(same(ss_plan_config(before, op), ss_plan_config(f.best, op)));
    ss_plan_free(before);

    /* Bad arguments. */
    ss_diag_init(&d);
    cfg.budget = 0;
    assert_int_equal(ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &be, &st, &d),
                     SS_ERR_INVALID);
    teardown_fx(&f);
}

/* For the toys below that watch the moves: every plan costs the same (so
 * every move is accepted and becomes the base of the next). */
static void equal_cost(ss_plan *base, const ss_plan *p, ss_eval *out)
{
    ss_plan_copy(base, p);
    out->time_us = 1;
    out->fits = 1;
    out->overflow_bytes = 0;
}

/* One long exploitation chain: no exploration, no restarts, no patience. */
static void one_chain(ss_mcmc_config *cfg, int64_t budget, uint64_t seed)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->budget = budget;
    cfg->seed = seed;
    cfg->explore_share = -1;
    cfg->restart_after = 1000000;
    cfg->patience = -1;
}

/* One search of g on 4 devices from the all-default plan, judged by ev
 * (the toys below watch the moves through their judges). */
static void toy_run(const ss_graph *g, const ss_search_judge *ev, const ss_mcmc_config *cfg)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_space_opts o = {4, 0};
    ss_space *spc;
    assert_int_equal(ss_space_new(g, &o, &spc, &d), SS_OK);
    ss_plan *start = ss_plan_new(g, NULL), *best = ss_plan_new(g, NULL);
    ss_mcmc_stats st;
    ss_eval be;
    assert_int_equal(ss_mcmc_run(spc, ev, &start, 1, cfg, best, &be, &st, &d), SS_OK);
    ss_plan_free(start);
    ss_plan_free(best);
    ss_space_free(spc);
}

/* Weight moves (p_heavy). Graph: x -> a1, a2 (linear, 12 outputs, sharing
 * one 6x12 weight: 288 bytes) and x -> b (linear, 2 outputs, its own 6x2
 * weight: 48 bytes). With only weight moves and every plan costing the same
 * (so every proposal is accepted and becomes the base), each proposal must
 * move exactly one group: a1 and a2 together, to one config, or b alone;
 * x, which has no weight, never moves; group a is drawn with probability
 * 288 / (288 + 48) = 6/7 (proposals that redraw the current config count as
 * accepted without an evaluation, so the share is over evaluations). */
typedef struct wtoy {
    ss_plan *base;
    long moved_a, moved_b, bad;
} wtoy;

static ss_status wtoy_eval(void *ctx, const ss_plan *p, int changed, double cutoff_us,
                          ss_eval *out, ss_diag *d)
{
    (void)changed;
    (void)cutoff_us;
    (void)d;
    wtoy *w = ctx;
    int ch[4];
    for (int op = 0; op < 4; op++)
        ch[op] = !same(ss_plan_config(p, op), ss_plan_config(w->base, op));
    /* skip evaluations of an unchanged plan (the start; the jump to the
     * best before exploitation) */
    if (ch[0] || ch[1] || ch[2] || ch[3]) {
        if (ch[0] || ch[1] != ch[2] || ch[1] == ch[3] ||
            !same(ss_plan_config(p, 1), ss_plan_config(p, 2)))
            w->bad++;
        w->moved_a += ch[1];
        w->moved_b += ch[3];
    }
    equal_cost(w->base, p, out);
    return SS_OK;
}

static void test_weight_moves(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = ss_graph_new("shared");
    int in = input_x(g);
    ss_op_attrs a;
    memset(&a, 0, sizeof a);
    a.out_features = 12;
    int a1 = ss_graph_add(g, "a1", SS_OP_LINEAR, &a, 1, &in, &d);
    assert_int_equal(a1, 1);
    ss_op_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.name = "a2";
    sp.type = SS_OP_LINEAR;
    sp.attrs = a;
    sp.n_in = 1;
    sp.inputs[0] = in;
    sp.n_w = ss_graph_op(g, a1)->n_w;
    memcpy(sp.weights, ss_graph_op(g, a1)->weights, sizeof sp.weights);
    assert_int_equal(ss_graph_add_op(g, &sp, &d), 2);
    a.out_features = 2;
    assert_int_equal(ss_graph_add(g, "b", SS_OP_LINEAR, &a, 1, &in, &d), 3);
    ss_graph_set_training(g, 8, SS_OPT_SGD, SS_PREC_FP32);

    wtoy w = {ss_plan_new(g, NULL), 0, 0, 0};
    ss_search_judge ev = {&w, wtoy_eval, NULL, NULL, NULL, NULL};
    ss_mcmc_config cfg;
    one_chain(&cfg, 4000, 3);
    cfg.p_heavy = 1;
    toy_run(g, &ev, &cfg);
    assert_int_equal(w.bad, 0);
    long moves = w.moved_a + w.moved_b;
    assert_true(moves > 3000);
    double share = (double)w.moved_a / (double)moves;
    /* 6/7 = 0.857; the standard deviation over > 3,000 draws is < 0.007 */
    assert_true(share > 0.82 && share < 0.89);

    /* Without weight moves, single-op moves appear (a1 without a2). */
    w.moved_a = w.moved_b = w.bad = 0;
    cfg.p_heavy = -1;
    cfg.p_group = -1;
    toy_run(g, &ev, &cfg);
    assert_true(w.bad > 0);

    ss_plan_free(w.base);
    ss_graph_free(g);
}

/* Class moves (p_class). Graph: x -> r1 = relu(x), r2 = relu(x), and
 * x -> b (linear, 2 outputs). r1 and r2 are one structural class (same
 * signature, same producer; search/classes.h), x and b are alone. With only
 * class moves (every plan costing the same), r1 and r2 start equal and move
 * together to one config in every evaluated plan, while x and b still move;
 * without class moves r1 moves alone. */
typedef struct ctoy {
    ss_plan *base;
    long moved_r, moved_other, apart;
} ctoy;

static ss_status ctoy_eval(void *ctx, const ss_plan *p, int changed, double cutoff_us,
                           ss_eval *out, ss_diag *d)
{
    (void)changed;
    (void)cutoff_us;
    (void)d;
    ctoy *t = ctx;
    t->apart += !same(ss_plan_config(p, 1), ss_plan_config(p, 2));
    t->moved_r += !same(ss_plan_config(p, 1), ss_plan_config(t->base, 1));
    t->moved_other += !same(ss_plan_config(p, 0), ss_plan_config(t->base, 0)) ||
                      !same(ss_plan_config(p, 3), ss_plan_config(t->base, 3));
    equal_cost(t->base, p, out);
    return SS_OK;
}

static void test_class_moves(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = ss_graph_new("classes");
    int in = input_x(g);
    ss_op_attrs a;
    memset(&a, 0, sizeof a);
    a.unary = SS_UNARY_RELU;
    assert_int_equal(ss_graph_add(g, "r1", SS_OP_UNARY, &a, 1, &in, &d), 1);
    assert_int_equal(ss_graph_add(g, "r2", SS_OP_UNARY, &a, 1, &in, &d), 2);
    memset(&a, 0, sizeof a);
    a.out_features = 2;
    assert_int_equal(ss_graph_add(g, "b", SS_OP_LINEAR, &a, 1, &in, &d), 3);
    ss_graph_set_training(g, 8, SS_OPT_SGD, SS_PREC_FP32);

    ctoy t = {ss_plan_new(g, NULL), 0, 0, 0};
    ss_search_judge ev = {&t, ctoy_eval, NULL, NULL, NULL, NULL};
    ss_mcmc_config cfg;
    one_chain(&cfg, 2000, 5);
    cfg.p_class = 1;
    cfg.p_heavy = cfg.p_group = cfg.p_segment = cfg.p_path = -1;
    toy_run(g, &ev, &cfg);
    assert_int_equal(t.apart, 0);
    assert_true(t.moved_r > 500 && t.moved_other > 500);

    t.moved_r = t.moved_other = t.apart = 0;
    cfg.p_class = -1;
    toy_run(g, &ev, &cfg);
    assert_true(t.apart > 0);

    ss_plan_free(t.base);
    ss_graph_free(g);
}

/* Path moves (p_path). Graph: x -> a -> b -> c (linear layers, own
 * weights). The toy judge says every plan costs the same (every move
 * is accepted and becomes the base) and that the base's critical path
 * spends 3 us in b, 1 us in c and nothing elsewhere. With only path moves,
 * single-op ones, every move changes b or c, b three times as often as c
 * (over evaluations: redraws of the current config are not evaluated);
 * with the path unknown (path_ops NULL) the draw is uniform and a and x
 * move too. */
typedef struct ptoy {
    ss_plan *base;
    long moved[4], multi;
    int known;
    double w[4];
} ptoy;

static ss_status ptoy_eval(void *ctx, const ss_plan *p, int changed, double cutoff_us,
                           ss_eval *out, ss_diag *d)
{
    (void)changed;
    (void)cutoff_us;
    (void)d;
    ptoy *t = ctx;
    int n = 0;
    for (int op = 0; op < 4; op++)
        if (!same(ss_plan_config(p, op), ss_plan_config(t->base, op))) {
            t->moved[op]++;
            n++;
        }
    t->multi += n > 1;
    equal_cost(t->base, p, out);
    return SS_OK;
}

static const double *ptoy_path(void *ctx)
{
    ptoy *t = ctx;
    return t->known ? t->w : NULL;
}

static void test_path_moves(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = ss_graph_new("path");
    int x = input_x(g);
    ss_op_attrs a;
    memset(&a, 0, sizeof a);
    a.out_features = 8;
    assert_int_equal(ss_graph_add(g, "a", SS_OP_LINEAR, &a, 1, &x, &d), 1);
    int ta = ss_graph_out(g, 1);
    assert_int_equal(ss_graph_add(g, "b", SS_OP_LINEAR, &a, 1, &ta, &d), 2);
    int tb = ss_graph_out(g, 2);
    assert_int_equal(ss_graph_add(g, "c", SS_OP_LINEAR, &a, 1, &tb, &d), 3);
    ss_graph_set_training(g, 8, SS_OPT_SGD, SS_PREC_FP32);
    ptoy t = {ss_plan_new(g, NULL), {0, 0, 0, 0}, 0, 1, {0, 0, 3, 1}};
    ss_search_judge ev = {&t, ptoy_eval, NULL, NULL, ptoy_path, NULL};
    ss_mcmc_config cfg;
    one_chain(&cfg, 4000, 5);
    cfg.p_path = 1;
    cfg.p_heavy = -1;
    cfg.p_neighbor = -1;
    cfg.p_group = -1;
    cfg.p_segment = -1;
    toy_run(g, &ev, &cfg);
    assert_int_equal(t.multi, 0);
    assert_int_equal(t.moved[0] + t.moved[1], 0);
    long moves = t.moved[2] + t.moved[3];
    assert_true(moves > 2500);
    /* b's share: 3/4, standard deviation over > 2,500 draws < 0.009 */
    double share = (double)t.moved[2] / (double)moves;
    assert_true(share > 0.71 && share < 0.79);

    /* No path known: uniform, so a moves too (x, an input with a single
     * candidate per placement family, may as well). */
    memset(t.moved, 0, sizeof t.moved);
    t.known = 0;
    toy_run(g, &ev, &cfg);
    assert_true(t.moved[1] > 500);

    ss_plan_free(t.base);
    ss_graph_free(g);
}

/* Local moves (p_local). An input and one linear op on 16 devices (plenty
 * of degree tuples and placements); every plan costs the same, so every move is
 * accepted and the next starts from it. The toy measures how far each move
 * goes (summed |log2| of the degree and reduction ratios plus the share of
 * tiles on devices the old config did not use): local moves keep the
 * nearest of four random candidates, so their mean step must be clearly
 * shorter than that of uniform candidates, and no move may be a no-op. */
typedef struct ltoy {
    ss_plan *base;
    double dist;
    long moves, noop;
} ltoy;

static ss_status ltoy_eval(void *ctx, const ss_plan *p, int changed, double cutoff_us,
                           ss_eval *out, ss_diag *d)
{
    (void)changed;
    (void)cutoff_us;
    (void)d;
    ltoy *t = ctx;
    int changed_any = 0;
    for (int op = 0; op < ss_plan_n_ops(p); op++) {
        const ss_pconfig *a = ss_plan_config(t->base, op), *b = ss_plan_config(p, op);
        if (same(a, b))
            continue;
        changed_any = 1;
        double dist = fabs(log2((double)b->red / (double)a->red));
        for (int k = 0; k < b->ndim; k++)
            dist += fabs(log2((double)b->deg[k] / (double)a->deg[k]));
        int away = 0;
        for (int i = 0; i < b->ntiles; i++) {
            int used = 0;
            for (int j = 0; j < a->ntiles; j++)
                used |= a->devices[j] == b->devices[i];
            away += !used;
        }
        t->dist += dist + (double)away / (double)b->ntiles;
        t->moves++;
    }
    t->noop += !changed_any;
    equal_cost(t->base, p, out);
    return SS_OK;
}

static double mean_step(ss_space *spc, const ss_graph *g, double p_local)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *start = ss_plan_new(g, NULL), *best = ss_plan_new(g, NULL);
    ltoy t = {ss_plan_new(g, NULL), 0, 0, 0};
    ss_search_judge ev = {&t, ltoy_eval, NULL, NULL, NULL, NULL};
    ss_mcmc_config cfg;
    one_chain(&cfg, 3000, 9);
    cfg.p_local = p_local;
    cfg.p_path = -1;
    cfg.p_heavy = -1;
    cfg.p_neighbor = -1;
    cfg.p_segment = -1;
    ss_mcmc_stats st;
    ss_eval be;
    ss_status rs = ss_mcmc_run(spc, &ev, &start, 1, &cfg, best, &be, &st, &d);
    if (rs != SS_OK)
        fail_msg("%s", d.msg);
    assert_int_equal(t.noop, 2); /* the start, and the jump to the best before exploitation */
    assert_true(t.moves > 2000);
    double m = t.dist / (double)t.moves;
    ss_plan_free(t.base);
    ss_plan_free(start);
    ss_plan_free(best);
    return m;
}

static void test_local_moves(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = ss_graph_new("local");
    int x = input_x(g);
    ss_op_attrs a;
    memset(&a, 0, sizeof a);
    a.out_features = 64;
    assert_int_equal(ss_graph_add(g, "a", SS_OP_LINEAR, &a, 1, &x, &d), 1);
    ss_graph_set_training(g, 64, SS_OPT_SGD, SS_PREC_FP32);
    ss_space_opts o = {16, 0};
    ss_space *spc;
    assert_int_equal(ss_space_new(g, &o, &spc, &d), SS_OK);
    assert_true(ss_space_n_candidates(spc, 1) > 50);
    double uniform = mean_step(spc, g, -1), local = mean_step(spc, g, 1);
    if (!(local < 0.7 * uniform))
        fail_msg("local moves: mean step %.3f, uniform %.3f", local, uniform);
    ss_space_free(spc);
    ss_graph_free(g);
}

/* Allocation failures inside the search: clean NOMEM, no leak. */
static void test_nomem(void **state)
{
    (void)state;
    fixture f;
    setup_fx(&f);
    ss_plan *starts[2] = {f.dp, f.rnd};
    ss_mcmc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.budget = 200;
    cfg.seed = 8;
    for (long k = 0; k < 200; k++) {
        ss_mcmc_stats st;
        ss_eval be;
        ss_diag d;
        ss_diag_init(&d);
        ss_test_fail_after(k);
        ss_status s = ss_mcmc_run(f.sp, &f.ev, starts, 2, &cfg, f.best, &be, &st, &d);
        ss_test_fail_after(-1);
        if (s == SS_OK)
            break;
        assert_int_equal(s, SS_ERR_NOMEM);
    }
    teardown_fx(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finds_exhaustive_optimum),
        cmocka_unit_test(test_path_moves),
        cmocka_unit_test(test_local_moves),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_stopping_rules),
        cmocka_unit_test(test_best_half),
        cmocka_unit_test(test_schedule_defaults),
        cmocka_unit_test(test_bound_same_chain),
        cmocka_unit_test(test_cache_same_chain),
        cmocka_unit_test(test_restore_same_chain),
        cmocka_unit_test(test_invalid_and_errors),
        cmocka_unit_test(test_weight_moves),
        cmocka_unit_test(test_class_moves),
        cmocka_unit_test(test_nomem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
