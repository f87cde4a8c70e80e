/*
 * cmd_models.c — `simsearch models` (list the zoo) and `simsearch model`
 * (summarise one model, export it as model JSON).
 *
 * Both print the same figures for a model: parameters (shared weights once),
 * forward FLOPs per sample (ss_graph_forward_flops / batch, a multiply-add
 * counted as 2), the batch, optimizer, precision and operator count. With
 * --json, `models` prints an array and `model` one object with these fields.
 */
#include "cli.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct models_opts {
    int json;
} models_opts;

static const ss_cli_optdef models_options[] = {
    SS_CLI_FLAG_ROW(models_opts, "--json", json,
                    "print a JSON array of objects (name, description, keys, parameters,\n"
                    "forward_flops_per_sample, batch, optimizer, precision, ops)"),
    {NULL, SS_CLI_FLAG, NULL, 0, 0, 0, 0, 0, 0, NULL},
};

const ss_cli_cmddef ss_cli_def_models = {
    "models",
    "list the model zoo",
    "List the model zoo: every family with its parameters, forward FLOPs per sample\n"
    "(a multiply-add counts as 2) at its default settings, and its description.",
    models_options,
    NULL,
    0,
    "Build one with 'simsearch model NAME[:key=value,...]'.",
};

typedef struct model_opts {
    const char *spec, *export_path;
    long long batch, devices;
    int json;
} model_opts;

static const ss_cli_optdef model_options[] = {
    SS_CLI_INT_ROW(model_opts, "--batch", "N", batch, 1, SS_CLI_MAX_BATCH,
                   "global batch (default: 64 per device, 256 for alexnet;\n"
                   "a model file keeps its own batch unless --batch is given)"),
    SS_CLI_INT_ROW(model_opts, "--devices", "N", devices, 1, SS_CLI_MAX_DEVICES,
                   "devices the default batch is computed for (default 1)"),
    SS_CLI_FLAG_ROW(model_opts, "--json", json,
                    "print a JSON object (same fields as 'simsearch models --json',\n"
                    "plus spec, tensors and fingerprint)"),
    SS_CLI_STR_ROW(model_opts, "--export", "FILE", export_path, 0,
                   "write the model as simsearch-model JSON (atomic)"),
    {NULL, SS_CLI_FLAG, NULL, 0, 0, 0, 0, 0, 0, NULL},
};

const ss_cli_cmddef ss_cli_def_model = {
    "model",
    "summarise one model; export it to JSON",
    "Summarise one model. SPEC is a zoo name with optional parameters,\n"
    "NAME[:key=value,...] (e.g. gpt:layers=24,hidden=2304,heads=24,seq=2048),\n"
    "or a path to a model JSON file (anything with '/' or ending in .json).",
    model_options,
    "SPEC",
    offsetof(model_opts, spec),
    "Zoo families and their keys: 'simsearch models'.",
};

/* The summary figures of a graph. */
typedef struct summary {
    int64_t parameters, batch;
    double flops_per_sample;
    int ops, tensors;
} summary;

static void summarise(const ss_graph *g, summary *s)
{
    s->parameters = ss_graph_parameters(g);
    s->batch = ss_graph_batch(g);
    s->flops_per_sample = s->batch > 0 ? ss_graph_forward_flops(g) / (double)s->batch : 0;
    s->ops = ss_graph_n_ops(g);
    s->tensors = ss_graph_n_tensors(g);
}

/* Print a JSON string literal (names here are plain ASCII, but escape anyway). */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_fields(FILE *f, const ss_graph *g, const summary *s, const char *indent)
{
    fprintf(f, "%s\"parameters\": %lld,\n", indent, (long long)s->parameters);
    fprintf(f, "%s\"forward_flops_per_sample\": %.17g,\n", indent, s->flops_per_sample);
    fprintf(f, "%s\"batch\": %lld,\n", indent, (long long)s->batch);
    fprintf(f, "%s\"optimizer\": \"%s\",\n", indent, ss_optimizer_name(ss_graph_optimizer(g)));
    fprintf(f, "%s\"precision\": \"%s\",\n", indent, ss_precision_name(ss_graph_precision(g)));
    fprintf(f, "%s\"ops\": %d", indent, s->ops);
}

int ss_cmd_models(int argc, char **argv)
{
    models_opts o = {0};
    int r = ss_cli_parse_def(&ss_cli_def_models, argc, argv, &o);
    if (r)
        return r < 0 ? SS_EXIT_OK : r;
    int json = o.json;
    int n = ss_zoo_count();
    if (json)
        printf("[\n");
    else
        printf("%-13s %12s %14s %6s  %-9s %s\n", "name", "parameters", "GFLOPs/sample", "batch",
               "precision", "description");
    for (int i = 0; i < n; i++) {
        const ss_zoo_entry *e = ss_zoo_get(i);
        ss_graph *g = NULL;
        int rc = ss_cli_build_model(e->name, 0, 1, &g);
        if (rc != SS_EXIT_OK) {
            if (json)
                printf("]\n");
            return rc == SS_EXIT_USAGE ? SS_EXIT_FAIL : rc; /* the zoo itself failed */
        }
        summary s;
        summarise(g, &s);
        if (json) {
            printf("  {\n    \"name\": ");
            json_str(stdout, e->name);
            printf(",\n    \"description\": ");
            json_str(stdout, e->description);
            printf(",\n    \"keys\": ");
            json_str(stdout, e->params_help);
            printf(",\n");
            json_fields(stdout, g, &s, "    ");
            printf("\n  }%s\n", i + 1 < n ? "," : "");
        } else {
            char pb[32];
            printf("%-13s %12s %14.3f %6lld  %-9s %s\n", e->name,
                   ss_cli_si((double)s.parameters, pb, sizeof pb), s.flops_per_sample / 1e9,
                   (long long)s.batch, ss_precision_name(ss_graph_precision(g)), e->description);
        }
        ss_graph_free(g);
    }
    if (json)
        printf("]\n");
    else
        printf("\nkeys (NAME:key=value,...):\n");
    for (int i = 0; !json && i < n; i++)
        printf("  %-13s %s\n", ss_zoo_get(i)->name, ss_zoo_get(i)->params_help);
    return SS_EXIT_OK;
}

static void print_human(const char *spec, const ss_graph *g, const summary *s)
{
    char b1[32], b2[32];
    char fp[17];
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)ss_graph_fingerprint(g));
    printf("model        %s (%s)\n", ss_graph_name(g), spec);
    printf("parameters   %s (%lld)\n", ss_cli_si((double)s->parameters, b1, sizeof b1),
           (long long)s->parameters);
    printf("forward      %sFLOPs per sample, %sFLOPs per iteration\n",
           ss_cli_si(s->flops_per_sample, b1, sizeof b1),
           ss_cli_si(s->flops_per_sample * (double)s->batch, b2, sizeof b2));
    printf("batch        %lld (global)\n", (long long)s->batch);
    printf("training     %s, %s precision\n", ss_optimizer_name(ss_graph_optimizer(g)),
           ss_precision_name(ss_graph_precision(g)));
    printf("graph        %d ops, %d tensors\n", s->ops, s->tensors);
    int count[SS_OP_TYPE_COUNT] = {0};
    for (int i = 0; i < s->ops; i++)
        count[ss_graph_op(g, i)->type]++;
    printf("op types    ");
    for (int t = 0; t < SS_OP_TYPE_COUNT; t++)
        if (count[t])
            printf(" %s %d", ss_op_type_name((ss_op_type)t), count[t]);
    printf("\nfingerprint  %s\n", fp);
}

int ss_cmd_model(int argc, char **argv)
{
    model_opts o = {NULL, NULL, 0, 1, 0};
    int r = ss_cli_parse_def(&ss_cli_def_model, argc, argv, &o);
    if (r)
        return r < 0 ? SS_EXIT_OK : r;
    const char *spec = o.spec, *export_path = o.export_path;
    long long batch = o.batch, devices = o.devices;
    int json = o.json;
    if (export_path && !*export_path)
        return ss_cli_usage_error("model", "--export needs a file name");
    if (!spec)
        return ss_cli_usage_error("model", "missing the model (NAME[:key=value,...] or FILE)");
    int taken = 0;
    char mfile[4096];
    const ss_cli_output ins[] = {{"SPEC", ss_cli_spec_file(spec, mfile, sizeof mfile)},
                                 {NULL, NULL}};
    const ss_cli_output outs[] = {{"--export", export_path}, {NULL, NULL}};
    int rc = ss_cli_check_files("model", ins, outs, json, &taken);
    if (rc != SS_EXIT_OK)
        return rc;
    ss_graph *g = NULL;
    rc = ss_cli_build_model(spec, batch, (int)devices, &g);
    if (rc != SS_EXIT_OK)
        return rc;
    summary s;
    summarise(g, &s);
    if (export_path) {
        ss_diag d;
        ss_diag_init(&d);
        if (ss_model_save(g, export_path, &d) != SS_OK) {
            ss_graph_free(g);
            return ss_cli_fail(&d);
        }
        if (taken)
            ss_cli_report_to_stderr();
    }
    if (json) {
        char fp[17];
        snprintf(fp, sizeof fp, "%016llx", (unsigned long long)ss_graph_fingerprint(g));
        printf("{\n  \"name\": ");
        json_str(stdout, ss_graph_name(g));
        printf(",\n  \"spec\": ");
        json_str(stdout, spec);
        printf(",\n");
        json_fields(stdout, g, &s, "  ");
        printf(",\n  \"tensors\": %d,\n  \"fingerprint\": \"%s\"\n}\n", s.tensors, fp);
    } else {
        print_human(spec, g, &s);
        if (export_path)
            printf("exported     %s\n", export_path);
    }
    ss_graph_free(g);
    return SS_EXIT_OK;
}
