/*
 * cmd_cost.c — `simsearch cost`: the cost of every operator of a model on
 * one device.
 *
 * What is priced: each op's tile under the data-parallel plan over all the
 * topology's devices (tile 0, i.e. one device's share of the global batch;
 * ops that data parallelism cannot split are priced whole), on the first
 * device type of the topology or the one named by --device-type (a type of
 * the topology, else a built-in spec, priced analytically).
 */
#include "cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

typedef struct opts {
    ss_cli_common c;
    const char *devtype, *db;
} opts;

static const ss_cli_optdef options[] = {
    SS_CLI_ROW_MODEL(opts),
    SS_CLI_ROW_TOPOLOGY(opts),
    SS_CLI_ROW_NODES(opts),
    SS_CLI_ROW_BATCH(opts),
    SS_CLI_STR_ROW(opts, "--device-type", "NAME", devtype, 0,
                   "price on this device type (in the topology or built in)"),
    SS_CLI_STR_ROW(opts, "--db", "FILE", db, 0,
                   "profile database: measured entries first, then analytic"),
    SS_CLI_ROW_JSON(opts, "one JSON object instead of the table"),
    {NULL, SS_CLI_FLAG, NULL, 0, 0, 0, 0, 0, 0, NULL},
};

const ss_cli_cmddef ss_cli_def_cost = {
    "cost",
    "price every operator of a model on one device",
    "Per-operator cost on one device: each op's data-parallel tile (one device's\n"
    "share of the global batch) on the topology's first device type.",
    options,
    NULL,
    0,
    "Columns: op, type, output shape (of the tile), GFLOPs forward, forward and\n"
    "backward time (us), MB moved (forward + backward), cost source.",
};

static int parse(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    return ss_cli_parse_def(&ss_cli_def_cost, argc, argv, o);
}

static void shape_str(const ss_tile *t, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < t->out.ndim && used < n; k++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", k ? "x" : "",
                                 (long long)(t->out.r[k].hi - t->out.r[k].lo));
}

static json_t *shape_json(const ss_tile *t)
{
    json_t *a = json_array();
    for (int k = 0; a && k < t->out.ndim; k++)
        json_array_append_new(a, json_integer(t->out.r[k].hi - t->out.r[k].lo));
    return a;
}

static int run(const opts *o, ss_machine *m, ss_graph *g)
{
    ss_diag d;
    ss_diag_init(&d);
    int devtype = 0;
    const ss_device_type *dt = NULL;
    if (o->devtype) {
        for (int i = 0; i < ss_machine_n_types(m); i++)
            if (!strcmp(ss_machine_type(m, i)->name, o->devtype)) {
                devtype = i;
                dt = ss_machine_type(m, i);
            }
        if (!dt && !(dt = ss_devtype_find_builtin(o->devtype)))
            return ss_cli_usage_error("cost", "unknown device type '%s'", o->devtype);
        if (dt != ss_machine_type(m, devtype))
            devtype = -1; /* built-in, not in the topology: no cost model */
    } else {
        if (ss_machine_n_types(m) < 1)
            return ss_cli_usage_error("cost", "topology has no device types");
        dt = ss_machine_type(m, 0);
    }
    ss_plan *p = NULL;
    if (ss_plan_data_parallel(g, m, 0, &p, &d) != SS_OK)
        return ss_cli_fail(&d);
    ss_costmodel *cm = NULL;
    ss_profile_db *db = NULL;
    int rc = ss_cli_cost_model(m, o->db, &cm, &db);
    if (rc) {
        ss_plan_free(p);
        return rc;
    }
    json_t *root = NULL, *ops = NULL;
    if (o->c.json) {
        root = json_object();
        ops = json_array();
    }
    int n = ss_graph_n_ops(g);
    double by_src[3] = {0, 0, 0};
    double sum_f = 0, sum_b = 0, sum_flops = 0, sum_bytes = 0;
    if (!o->c.json)
        printf("%-32s %-13s %-20s %10s %11s %11s %10s  %s\n", "op", "type", "output (tile)",
               "GFLOPs fwd", "fwd us", "bwd us", "MB moved", "source");
    for (int i = 0; i < n; i++) {
        const ss_op *op = ss_graph_op(g, i);
        ss_tile t;
        ss_cost c;
        ss_pconfig_tile(g, op, ss_plan_config(p, i), 0, &t);
        if (devtype >= 0)
            ss_cost_tile(cm, g, op, &t, devtype, &c);
        else if (!db || !ss_profile_provider(db).lookup(db, g, op, &t, dt, &c))
            ss_cost_analytic(dt, g, op, &t, &c); /* a built-in type: the database, else analytic */
        double bytes = c.work.fwd_bytes + c.work.bwd_bytes;
        if ((unsigned)c.source < 3)
            by_src[c.source] += c.fwd_us + c.bwd_us;
        sum_f += c.fwd_us;
        sum_b += c.bwd_us;
        sum_flops += c.work.fwd_flops;
        sum_bytes += bytes;
        char shape[64];
        shape_str(&t, shape, sizeof shape);
        if (o->c.json) {
            json_t *e = json_object();
            json_object_set_new(e, "name", json_string(op->name));
            json_object_set_new(e, "type", json_string(ss_op_type_name(op->type)));
            json_object_set_new(e, "output_shape", shape_json(&t));
            json_object_set_new(e, "fwd_flops", json_real(c.work.fwd_flops));
            json_object_set_new(e, "bwd_flops", json_real(c.work.bwd_flops));
            json_object_set_new(e, "fwd_us", json_real(c.fwd_us));
            json_object_set_new(e, "bwd_us", json_real(c.bwd_us));
            json_object_set_new(e, "bytes", json_real(bytes));
            json_object_set_new(e, "source", json_string(ss_cost_source_name(c.source)));
            json_array_append_new(ops, e);
        } else {
            printf("%-32.32s %-13s %-20.20s %10.3f %11.1f %11.1f %10.2f  %s\n", op->name,
                   ss_op_type_name(op->type), shape, c.work.fwd_flops / 1e9, c.fwd_us, c.bwd_us,
                   bytes / 1e6, ss_cost_source_name(c.source));
        }
    }
    int64_t params = ss_graph_parameters(g);
    int per_dev = ss_machine_n_devices(m);
    if (o->c.json) {
        json_object_set_new(root, "model", json_string(ss_graph_name(g)));
        json_object_set_new(root, "topology", json_string(ss_machine_name(m)));
        json_object_set_new(root, "device_type", json_string(dt->name));
        json_object_set_new(root, "batch", json_integer(ss_graph_batch(g)));
        json_object_set_new(root, "devices", json_integer(per_dev));
        json_object_set_new(root, "tile", json_string("data-parallel tile 0 (one device's share)"));
        json_object_set_new(root, "operators", ops);
        json_t *tot = json_object();
        json_object_set_new(tot, "fwd_us", json_real(sum_f));
        json_object_set_new(tot, "bwd_us", json_real(sum_b));
        json_object_set_new(tot, "fwd_flops", json_real(sum_flops));
        json_object_set_new(tot, "bytes", json_real(sum_bytes));
        json_object_set_new(tot, "parameters", json_integer(params));
        json_object_set_new(root, "totals", tot);
        json_t *src = json_object();
        for (int k = 0; k < 3; k++)
            if (by_src[k] > 0)
                json_object_set_new(src, ss_cost_source_name((ss_cost_source)k),
                                    json_real(by_src[k] / (sum_f + sum_b)));
        json_object_set_new(root, "cost_sources", src);
        char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (s) {
            printf("%s\n", s);
            free(s);
        }
        json_decref(root);
    } else {
        char b1[32], b2[32];
        printf("\ntotal: forward %.1f us, backward %.1f us, forward %sFLOPs per device, "
               "%.1f MB moved; %s parameters\n",
               sum_f, sum_b, ss_cli_si(sum_flops, b1, sizeof b1), sum_bytes / 1e6,
               ss_cli_si((double)params, b2, sizeof b2));
        if (o->db)
            printf("time from the profile database %s: %.1f%% (analytic %.1f%%)\n", o->db,
                   sum_f + sum_b > 0 ? 100 * by_src[SS_COST_PROFILE] / (sum_f + sum_b) : 0,
                   sum_f + sum_b > 0 ? 100 * by_src[SS_COST_ANALYTIC] / (sum_f + sum_b) : 0);
        printf("model %s, batch %lld over %d devices (%lld per device), device type %s\n",
               ss_graph_name(g), (long long)ss_graph_batch(g), per_dev,
               (long long)(ss_graph_batch(g) / (per_dev ? per_dev : 1)), dt->name);
    }
    ss_cost_free(cm);
    ss_profile_db_free(db);
    ss_plan_free(p);
    return SS_EXIT_OK;
}

int ss_cmd_cost(int argc, char **argv)
{
    opts o;
    int r = parse(argc, argv, &o);
    if (r)
        return r < 0 ? SS_EXIT_OK : r;
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    const ss_cli_output db_in = {"--db", o.db}, none[] = {{NULL, NULL}};
    if ((r = ss_cli_check_inputs("cost", &o.c, &db_in, none, NULL)))
        return r;
    if ((r = ss_cli_common_load(&o.c, &m, &g, NULL)))
        return r;
    r = run(&o, m, g);
    ss_graph_free(g);
    ss_machine_free(m);
    return r;
}
