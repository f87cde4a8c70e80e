/*
 * types.c — names and parsers for the small enums of the public API: data
 * types, dimension kinds, optimizers and precisions (operator type names
 * live in the operator table, ops.c).
 *
 * Invariant: every name table is indexed by its enum value and covers every
 * value below the enum's count, so name(parse(s)) == s and parse(name(v)) == v.
 * Out-of-range values get the name "?" (never NULL) and parsers reject NULL.
 */
#include "simsearch.h"

#include <string.h>

/* f8: FP8 E4M3, one byte (Transformer Engine's forward GEMM format). */
static const char *const dtype_names[SS_DTYPE_COUNT] = {"f32", "f16", "bf16", "i32", "i64", "f8"};
static const size_t dtype_sizes[SS_DTYPE_COUNT] = {4, 2, 2, 4, 8, 1};

static const char *const kind_names[] = {"sample", "attribute", "parameter"};

static const char *const opt_names[] = {"sgd", "sgd_momentum", "adam"};
static const char *const prec_names[] = {"fp32", "mixed"};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Index of s in names[0..n), or -1. */
static int lookup(const char *const *names, int n, const char *s)
{
    if (!s)
        return -1;
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -1;
}

/* Bytes per element of t; 0 for an invalid dtype. */
size_t ss_dtype_size(ss_dtype t)
{
    return (unsigned)t < SS_DTYPE_COUNT ? dtype_sizes[t] : 0;
}

/* "f32", "f16", "bf16", "i32", "i64", "f8"; "?" for an invalid value. */
const char *ss_dtype_name(ss_dtype t)
{
    return (unsigned)t < SS_DTYPE_COUNT ? dtype_names[t] : "?";
}

/* Parse a dtype name; 0 on success (sets *out), -1 if unknown (*out untouched). */
int ss_dtype_parse(const char *s, ss_dtype *out)
{
    int i = lookup(dtype_names, SS_DTYPE_COUNT, s);
    if (i < 0)
        return -1;
    *out = (ss_dtype)i;
    return 0;
}

/* "sample", "attribute", "parameter"; "?" for an invalid value. */
const char *ss_dim_kind_name(ss_dim_kind k)
{
    return (unsigned)k < (unsigned)COUNT(kind_names) ? kind_names[k] : "?";
}

/* "sgd", "sgd_momentum", "adam"; "?" for an invalid value. */
const char *ss_optimizer_name(ss_optimizer o)
{
    return (unsigned)o < (unsigned)COUNT(opt_names) ? opt_names[o] : "?";
}

/* Parse an optimizer name; 0 on success, -1 if unknown. */
int ss_optimizer_parse(const char *s, ss_optimizer *out)
{
    int i = lookup(opt_names, COUNT(opt_names), s);
    if (i < 0)
        return -1;
    *out = (ss_optimizer)i;
    return 0;
}

/* "fp32", "mixed"; "?" for an invalid value. */
const char *ss_precision_name(ss_precision p)
{
    return (unsigned)p < (unsigned)COUNT(prec_names) ? prec_names[p] : "?";
}

/* Parse a precision name; 0 on success, -1 if unknown. */
int ss_precision_parse(const char *s, ss_precision *out)
{
    int i = lookup(prec_names, COUNT(prec_names), s);
    if (i < 0)
        return -1;
    *out = (ss_precision)i;
    return 0;
}
