/*
 * zoo.h — internal interface of the model zoo (models/).
 *
 * Every zoo family is a builder that appends operators to a fresh graph
 * through the small "zb" helper below. The helper keeps the first error: once
 * an add fails, later calls do nothing and return -1, so builders read as a
 * straight list of layers and check the error once at the end. Builders never
 * see a partially valid spec: zoo.c parses and range-checks every key first.
 */
#ifndef SS_MODELS_ZOO_H
#define SS_MODELS_ZOO_H

#include "simsearch.h"

/* Builder state: the graph under construction, the first error, the dtype of
 * activations and weights (f32, or bf16 for mixed precision). */
typedef struct zb {
    ss_graph *g;
    ss_diag *d;
    int err;
    ss_dtype act;
    char names[4][SS_NAME_MAX * 2];
    int next_name;
} zb;

/* Format an op name into one of four rotating buffers (so one call may use
 * a formatted name while the previous one is still being read). */
const char *zb_name(zb *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Add an op; returns the op id or -1 (b->err set, first message in b->d).
 * n_w < 0: own weights; otherwise the given shared weights. */
int zb_add(zb *b, const char *name, ss_op_type type, const ss_op_attrs *a, int n_in,
           const int *in, int n_w, const int *w);
/* Output tensor `i` of op `op` (or -1 when op < 0). */
int zb_out(zb *b, int op, int i);
/* Weight tensor `i` of op `op` (or -1 when op < 0). */
int zb_weight(zb *b, int op, int i);

/* Helpers returning the first output tensor id (-1 after an error). */
int zb_input(zb *b, const char *name, int ndim, const int64_t *shape, const ss_dim_kind *kinds,
             ss_dtype dt);
int zb_linear(zb *b, const char *name, int x, int64_t out, int bias);
int zb_conv(zb *b, const char *name, int x, int64_t out, int64_t kh, int64_t kw, int64_t sh,
            int64_t sw, int64_t ph, int64_t pw, int bias);
int zb_pool(zb *b, const char *name, int x, ss_pool_kind kind, int64_t k, int64_t s, int64_t p);
int zb_unary(zb *b, const char *name, int x, ss_unary_kind u);
int zb_binary(zb *b, const char *name, int x, int y, ss_binary_kind k);
int zb_norm(zb *b, const char *name, int x, ss_op_type type); /* batchnorm or layernorm */
int zb_softmax(zb *b, const char *name, int x, int axis);
int zb_dropout(zb *b, const char *name, int x, double rate);
int zb_reshape(zb *b, const char *name, int x, int ndim, const int64_t *shape);
int zb_transpose(zb *b, const char *name, int x, int ndim, const int *perm);
int zb_concat(zb *b, const char *name, int n, const int *xs, int axis);
/* Embedding of ids into a table of [vocab, dim] in b->act; table >= 0 shares
 * an existing table weight. */
int zb_embedding(zb *b, const char *name, int ids, int64_t vocab, int64_t dim, int table);
int zb_softmax_ce(zb *b, const char *name, int logits, int labels);

/* Hugging Face config.json import (models/hf_import.c): the gpt-family spec
 * ("gpt:key=value,...", into spec[n]) and the architecture name (into
 * name[nn]) of the config at path (a config.json or a folder holding one).
 * seq_override > 0 is the sequence the spec will be built with (checked
 * against a sliding window). SS_ERR_PARSE / SS_ERR_IO / SS_ERR_INVALID
 * naming the file and the key. */
ss_status ss_hf_spec(const char *path, int64_t seq_override, char *spec, size_t n, char *name,
                     size_t nn, ss_diag *d);

/* Family builders (models/cnn.c, rnn.c, transformer.c, mlp.c). p holds the
 * spec's values in the order of the family's key table in zoo.c. */
void ss_zoo_build_alexnet(zb *b, int64_t batch, const int64_t *p);
void ss_zoo_build_resnet101(zb *b, int64_t batch, const int64_t *p);
void ss_zoo_build_inception_v3(zb *b, int64_t batch, const int64_t *p);
void ss_zoo_build_rnntc(zb *b, int64_t batch, const int64_t *p);
void ss_zoo_build_rnnlm(zb *b, int64_t batch, const int64_t *p);
void ss_zoo_build_nmt(zb *b, int64_t batch, const int64_t *p);
void ss_zoo_build_bert(zb *b, int64_t batch, const int64_t *p);
void ss_zoo_build_albert(zb *b, int64_t batch, const int64_t *p);
void ss_zoo_build_gpt(zb *b, int64_t batch, const int64_t *p);
void ss_zoo_build_mlp(zb *b, int64_t batch, const int64_t *p);

#endif
