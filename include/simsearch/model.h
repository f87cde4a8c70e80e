/*
 * simsearch/model.h — model JSON I/O (core/model_io.c) and the model zoo (models/).
 *
 * Part of the public C API. Users include <simsearch.h>, which includes every
 * header under simsearch/ in dependency order; this one also compiles on its own.
 * The conventions are in simsearch.h's opening comment.
 */
#ifndef SIMSEARCH_MODEL_H
#define SIMSEARCH_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "simsearch/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Model JSON I/O (core/model_io.c) and the zoo (models/)               */
/* ------------------------------------------------------------------ */

/* Load a "simsearch-model" JSON file. Errors name path and line:column or the
 * JSON path. On success *out is a new graph the caller frees. */
ss_status ss_model_load(const char *path, ss_graph **out, ss_diag *d);
ss_status ss_model_load_string(const char *json, const char *label, ss_graph **out, ss_diag *d);
/* Save atomically (temp file + rename). */
ss_status ss_model_save(const ss_graph *g, const char *path, ss_diag *d);
/* Serialise to a malloc'd (ss_free) string. */
ss_status ss_model_to_string(const ss_graph *g, char **out, ss_diag *d);

typedef struct ss_zoo_entry {
    const char *name;        /* "resnet101" */
    const char *description;
    const char *params_help; /* "layers=24,hidden=1024,..." or "" */
} ss_zoo_entry;
int ss_zoo_count(void);
const ss_zoo_entry *ss_zoo_get(int i);

/* Build a model from a spec: "NAME[:key=value,...]" (zoo), a path to a
 * model JSON file (anything containing '/' or ending in ".json"), or
 * "hf:PATH[:key=value,...]" — a Hugging Face config.json (or a folder
 * holding one) of LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM,
 * MixtralForCausalLM or GPT2LMHeadModel, imported as a gpt-family spec whose
 * keys the listed ones override (models/hf_import.c).
 * batch > 0 sets the global batch; batch == 0 uses the model default
 * (per_device_default * n_devices: 64 per device, 256 for alexnet; callers
 * pass n_devices; 1 if unknown). */
ss_status ss_model_build(const char *spec, int64_t batch, int n_devices, ss_graph **out,
                         ss_diag *d);
/* Parameters one token uses: every weight, but an expert_linear's weights
 * [X, in, out] count topk / X of their size (mixture of experts: a token
 * runs topk of the X experts). Equals ss_graph_parameters for dense models. */
int64_t ss_model_active_parameters(const ss_graph *g);

/* The same for a plan of tensor-parallel degree tp (0: unknown, as
 * ss_model_build): the gpt and bert families pad their vocabulary to a
 * multiple of vocab_pad * tp as Megatron-LM does (keys vocab_pad, default
 * 128, 0 = no padding, and tp); a spec naming another tp is an error.
 * Families without a tp key build as ss_model_build does. */
ss_status ss_model_build_tp(const char *spec, int64_t batch, int n_devices, int tp,
                            ss_graph **out, ss_diag *d);

#ifdef __cplusplus
}
#endif
#endif /* SIMSEARCH_MODEL_H */
