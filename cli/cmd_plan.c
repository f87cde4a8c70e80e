/*
 * cmd_plan.c — `simsearch plan`: build (data-parallel, megatron:...) or load
 * a plan for a model on a topology, validate it, summarise it (ops by split
 * kind, devices used, pipeline stages) and optionally write it as JSON.
 */
#include "cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

typedef struct opts {
    ss_cli_common c;
    const char *out;
} opts;

static const ss_cli_optdef options[] = {
    SS_CLI_ROWS_PLAN_INPUTS(opts),
    SS_CLI_STR_ROW(opts, "--out", "FILE", out, 0, "write the plan as JSON (atomically)"),
    SS_CLI_ROW_JSON(opts, "print the summary as one JSON object"),
    {NULL, SS_CLI_FLAG, NULL, 0, 0, 0, 0, 0, 0, NULL},
};

const ss_cli_cmddef ss_cli_def_plan = {
    "plan", "build or load a plan, validate and summarise it",
    "Build or load a plan, validate it and summarise it.", options, NULL, 0, NULL,
};

static int parse(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    return ss_cli_parse_def(&ss_cli_def_plan, argc, argv, o);
}

/* Split kind of a config as a bit set: 1 sample, 2 attribute, 4 parameter,
 * 8 reduction; 0 unsplit. */
static unsigned split_kind(const ss_graph *g, const ss_op *op, const ss_pconfig *c)
{
    unsigned k = 0;
    const ss_tensor *t = op->n_out ? ss_graph_tensor(g, op->outputs[0]) : NULL;
    for (int i = 0; t && i < c->ndim; i++)
        if (c->deg[i] > 1)
            k |= 1u << t->kind[i];
    if (c->red > 1)
        k |= 8;
    return k;
}

static void kind_name(unsigned k, char *buf, size_t n)
{
    static const char *names[] = {"sample", "attribute", "parameter", "reduction"};
    size_t used = 0;
    buf[0] = '\0';
    if (!k) {
        snprintf(buf, n, "unsplit");
        return;
    }
    for (int i = 0; i < 4; i++)
        if (k & (1u << i))
            used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? "+" : "", names[i]);
}

static int summarise(const opts *o, const ss_plan *p, const ss_graph *g, const ss_machine *m)
{
    int n = ss_plan_n_ops(p), nd = ss_machine_n_devices(m);
    const ss_plan_settings *s = ss_plan_settings_get(p);
    int kinds[16] = {0};
    char *used = calloc((size_t)nd + 1, 1);
    int *stage_ops = calloc((size_t)s->stages, sizeof *stage_ops);
    int *stage_dev = calloc((size_t)s->stages, sizeof *stage_dev);
    char *stage_seen = calloc((size_t)s->stages * (size_t)(nd + 1), 1);
    int n_ids = ss_plan_devlist_ids(p);
    int *list_stage = malloc(((size_t)n_ids + 1) * sizeof *list_stage); /* per device list */
    if (!used || !stage_ops || !stage_dev || !stage_seen || !list_stage) {
        free(used);
        free(stage_ops);
        free(stage_dev);
        free(stage_seen);
        free(list_stage);
        fprintf(stderr, "simsearch: out of memory\n");
        return SS_EXIT_FAIL;
    }
    int n_used = 0, max_tiles = 0, n_lists = 0;
    for (int k = 0; k < n_ids; k++)
        list_stage[k] = -1; /* the list's devices not counted yet */
    for (int i = 0; i < n; i++) {
        const ss_pconfig *c = ss_plan_config(p, i);
        kinds[split_kind(g, ss_graph_op(g, i), c)]++;
        stage_ops[c->stage]++;
        if (c->ntiles > max_tiles)
            max_tiles = c->ntiles;
        /* ops sharing a device list (ss_plan_devlist_id) add no device the
         * first of them in the stage did not */
        int id = ss_plan_devlist_id(p, i);
        n_lists += list_stage[id] < 0;
        if (list_stage[id] == c->stage)
            continue;
        list_stage[id] = c->stage;
        for (int t = 0; t < c->ntiles; t++) {
            int dv = c->devices[t];
            if (!used[dv]) {
                used[dv] = 1;
                n_used++;
            }
            char *seen = &stage_seen[(size_t)c->stage * (size_t)(nd + 1) + (size_t)dv];
            if (!*seen) {
                *seen = 1;
                stage_dev[c->stage]++;
            }
        }
    }
    static const char *sched[] = {"gpipe", "1f1b"}, *queue[] = {"fifo", "backward_first"},
                      *sync[] = {"wait_free", "bulk"}, *recomp[] = {"none", "full", "selective"};
    char kn[64];
    if (o->c.json) {
        json_t *root = json_object(), *jk = json_object(), *js = json_array();
        json_object_set_new(root, "model", json_string(ss_graph_name(g)));
        json_object_set_new(root, "topology", json_string(ss_machine_name(m)));
        json_object_set_new(root, "batch", json_integer(ss_graph_batch(g)));
        json_object_set_new(root, "plan", json_string(o->c.plan));
        json_object_set_new(root, "operators", json_integer(n));
        json_object_set_new(root, "devices_used", json_integer(n_used));
        json_object_set_new(root, "devices", json_integer(nd));
        json_object_set_new(root, "max_tiles", json_integer(max_tiles));
        json_object_set_new(root, "device_lists", json_integer(n_lists));
        json_object_set_new(root, "plan_bytes", json_integer((json_int_t)ss_plan_bytes(p)));
        for (unsigned k = 0; k < 16; k++)
            if (kinds[k]) {
                kind_name(k, kn, sizeof kn);
                json_object_set_new(jk, kn, json_integer(kinds[k]));
            }
        json_object_set_new(root, "split_kinds", jk);
        for (int st = 0; st < s->stages; st++) {
            json_t *e = json_object();
            json_object_set_new(e, "operators", json_integer(stage_ops[st]));
            json_object_set_new(e, "devices", json_integer(stage_dev[st]));
            if (!ss_plan_recompute_uniform(s))
                json_object_set_new(e, "recompute",
                                    json_string(recomp[ss_plan_stage_recompute(s, st)]));
            json_array_append_new(js, e);
        }
        json_object_set_new(root, "stages", js);
        json_object_set_new(root, "virtual_stages", json_integer(s->virtual_stages));
        json_object_set_new(root, "microbatches", json_integer(s->microbatches));
        json_object_set_new(root, "schedule", json_string(sched[s->schedule]));
        json_object_set_new(root, "queue", json_string(queue[s->queue]));
        json_object_set_new(root, "sync", json_string(sync[s->sync]));
        json_object_set_new(root, "bucket_bytes", json_real(s->bucket_bytes));
        json_object_set_new(root, "recompute", json_string(ss_plan_recompute_uniform(s)
                                                               ? recomp[s->recompute]
                                                               : "per stage"));
        json_object_set_new(root, "distopt", s->distopt == SS_ZERO3 ? json_integer(SS_ZERO3)
                                                                    : json_boolean(s->distopt));
        if (o->out)
            json_object_set_new(root, "written", json_string(o->out));
        char *txt = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (txt) {
            printf("%s\n", txt);
            free(txt);
        }
        json_decref(root);
    } else {
        printf("plan %s for model %s (batch %lld) on %s: valid\n", o->c.plan, ss_graph_name(g),
               (long long)ss_graph_batch(g), ss_machine_name(m));
        printf("operators: %d, devices used: %d of %d, at most %d tiles per op\n", n, n_used, nd,
               max_tiles);
        printf("in memory: %zu bytes (%d distinct device lists)\n", ss_plan_bytes(p), n_lists);
        printf("operators by split kind:");
        for (unsigned k = 0, first = 1; k < 16; k++)
            if (kinds[k]) {
                kind_name(k, kn, sizeof kn);
                printf("%s %s %d", first ? "" : ",", kn, kinds[k]);
                first = 0;
            }
        printf("\n");
        printf("pipeline: %d stage%s", s->stages, s->stages == 1 ? "" : "s");
        if (s->virtual_stages > 1)
            printf(" (%d pipeline ranks x %d virtual stages)", s->stages / s->virtual_stages,
                   s->virtual_stages);
        printf(", %d micro-batch%s, schedule %s, queue %s\n", s->microbatches,
               s->microbatches == 1 ? "" : "es", sched[s->schedule], queue[s->queue]);
        for (int st = 0; s->stages > 1 && st < s->stages; st++)
            printf("  stage %d: %d operators on %d devices%s%s\n", st, stage_ops[st],
                   stage_dev[st], ss_plan_recompute_uniform(s) ? "" : ", recompute ",
                   ss_plan_recompute_uniform(s) ? "" : recomp[ss_plan_stage_recompute(s, st)]);
        printf("gradient sync: %s, bucket %.0f bytes, priority %s, reorder backward K %d, "
               "synced flags %s; recompute %s; distributed optimizer %s\n",
               sync[s->sync], s->bucket_bytes, s->priority ? "on" : "off", s->reorder_backward,
               s->synced_flags ? "on" : "off",
               ss_plan_recompute_uniform(s) ? recomp[s->recompute] : "per stage (above)",
               s->distopt == SS_ZERO3 ? "on, weights sharded too (ZeRO-3)"
               : s->distopt           ? "on"
                                      : "off");
        if (o->out)
            printf("written to %s\n", o->out);
    }
    free(used);
    free(stage_ops);
    free(stage_dev);
    free(stage_seen);
    free(list_stage);
    return SS_EXIT_OK;
}

int ss_cmd_plan(int argc, char **argv)
{
    opts o;
    int r = parse(argc, argv, &o);
    if (r)
        return r < 0 ? SS_EXIT_OK : r;
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    ss_plan *p = NULL;
    ss_diag d;
    ss_diag_init(&d);
    int taken = 0;
    const ss_cli_output outs[] = {{"--out", o.out}, {NULL, NULL}};
    if ((r = ss_cli_check_and_load("plan", &o.c, NULL, outs, &taken, &m, &g, &p)))
        return r;
    if (o.out && ss_plan_save(p, g, o.out, &d) != SS_OK) {
        r = ss_cli_fail(&d);
        goto out;
    }
    if (taken)
        ss_cli_report_to_stderr();
    r = summarise(&o, p, g, m);
out:
    ss_plan_free(p);
    ss_graph_free(g);
    ss_machine_free(m);
    return r;
}
