/*
 * model_io.h — internal extension of the model JSON loader (core/model_io.c)
 * used by the zoo's spec resolution (models/zoo.c).
 */
#ifndef SS_CORE_MODEL_IO_H
#define SS_CORE_MODEL_IO_H

#include "simsearch.h"

/* Like ss_model_load, with a batch override: batch > 0 replaces the file's
 * batch, rescaling every input dim of kind "sample" and the leading dim of
 * every reshape target that equals the file's batch; batch == 0 keeps the
 * file's batch. If the rescaled graph is inconsistent (a reshape that folds
 * the batch into another dim), the error names the file and operator. */
ss_status ss_model_load_batch(const char *path, int64_t batch, ss_graph **out, ss_diag *d);

#endif
