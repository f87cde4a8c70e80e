/*
 * expert.h — the hand-designed plans the search starts from and compares
 * against (FlexFlow's "expert" baselines).
 *
 *   CNNs and others    data-parallel everything, except fully-connected
 *                      (linear) layers, which are model parallel: their
 *                      output-feature dim is split over the devices
 *                      (Krizhevsky's "one weird trick"); element-wise ops
 *                      right after such a layer follow its split.
 *   RNNs (LSTM cells)  GNMT-style: each LSTM layer lives on its own device
 *                      inside a node (layer l on local rank l mod devices per
 *                      node) and the batch is split across nodes (data
 *                      parallelism between nodes); other ops follow the CNN
 *                      rule.
 *   fc variants        with a judge, the fully-connected layers of the
 *                      two rules above are tried split over all devices,
 *                      split within each host (batch split over the hosts;
 *                      only with several hosts of equal size) and, for RNNs,
 *                      data parallel; the best evaluation is kept (the first
 *                      on ties). Without one: split over all devices.
 *   transformers       the best of a few Megatron-LM configurations
 *   (attention ops)    (tensor parallel degree within a node, pipeline
 *                      depth, data parallel for the rest), judged by the
 *                      judge.
 * Every expert plan passes ss_plan_validate; where a rule cannot apply (a
 * dim not divisible), the op stays data parallel.
 */
#ifndef SS_SEARCH_EXPERT_H
#define SS_SEARCH_EXPERT_H

#include "simsearch.h"
#include "search/mcmc.h"

typedef enum ss_family {
    SS_FAMILY_CNN = 0,     /* has conv2d */
    SS_FAMILY_RNN,         /* has lstm */
    SS_FAMILY_TRANSFORMER, /* has attention */
    SS_FAMILY_OTHER        /* anything else (mlp ...) */
} ss_family;

/* Family of a graph: transformer if it has an attention op (or layernorm
 * and batch_matmul: attention built from matmuls), else RNN if it has an
 * LSTM, else CNN if it has a conv2d, else other. */
ss_family ss_expert_family(const ss_graph *g);
const char *ss_family_name(ss_family f); /* "cnn", "rnn", "transformer", "other" */

/* Build the expert plan of g on m. ev judges the Megatron candidates of
 * transformers and the fc variants of the other rules (ev may be NULL: the
 * first fc variant; Megatron candidates in order; its base is left at the
 * last candidate evaluated). On success *out is a new plan the caller frees
 * and label (n bytes) describes it ("data-parallel conv + model-parallel fc
 * within each host", "megatron:tp=4,pp=1,dp=4"). On error *out is
 * untouched. */
ss_status ss_expert_plan(const ss_graph *g, const ss_machine *m, const ss_search_judge *ev,
                         ss_plan **out, char *label, size_t n, ss_diag *d);

#endif /* SS_SEARCH_EXPERT_H */
