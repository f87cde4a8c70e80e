/*
 * classes.h — structural classes of operators, for the search's class moves.
 *
 * An unrolled RNN repeats the same few operators at every step (40 token
 * inputs, 40 losses, 40 attention products ...); a Transformer repeats its
 * layer. The best plan usually gives every repetition of an operator the same
 * config, but a one-op MCMC move changes one repetition at a time, so the
 * chain must find the same good config 40 times over. A class groups the ops
 * that play the same role, so that one move can give them one config.
 *
 * Classes come from colour refinement (1-dimensional Weisfeiler–Leman) on the
 * op graph: round 0 colours an op by its signature (ss_op_signature: type,
 * attributes, operand shapes) and the ids of the weights it reads (ops that
 * share a weight stay together, ops with different weights of one shape do
 * not); each further round adds the colours of the producers of its inputs,
 * slot by slot, and the sorted colours of the consumers of its outputs. Each
 * round separates one more step from a boundary of an unrolled loop (the first
 * step reads an initial state, not a previous step), so few rounds are used:
 * one separates roles inside a step (score vs context product) while keeping
 * the steps together.
 *
 * Colours are 64-bit hashes; a collision can only merge two classes, which
 * makes a class move touch more ops — still a valid move, never a wrong
 * plan. Deterministic: class ids are numbered in the order of each class's
 * first op.
 */
#ifndef SS_SEARCH_CLASSES_H
#define SS_SEARCH_CLASSES_H

#include "simsearch.h"

/* Structural classes of g's ops after `rounds` >= 0 refinement rounds.
 * class_of[op] (n_ops entries, caller's) receives the class id in
 * [0, *n_classes). Returns SS_OK, or SS_ERR_NOMEM with class_of unchanged. */
ss_status ss_op_classes(const ss_graph *g, int rounds, int *class_of, int *n_classes, ss_diag *d);

#endif /* SS_SEARCH_CLASSES_H */
