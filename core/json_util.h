/*
 * json_util.h — strict JSON reading and atomic writing for every simsearch
 * file format (model, topology, plan, profile database, results).
 *
 * Rules all loaders share: syntax errors report file:line:column (jansson);
 * semantic errors report the file and a JSON path ("$.devices[3].type") and
 * what was expected. Unknown keys are errors. Duplicate keys are errors.
 * Every file has "format" and "version". Writes go to a temp file in the same
 * directory, then rename(), so a crash never leaves a half-written file.
 */
#ifndef SS_JSON_UTIL_H
#define SS_JSON_UTIL_H

#include "simsearch.h"
#include <jansson.h>

/* Parse a file / string. label names the source in messages. */
ss_status ss_json_parse_file(const char *path, json_t **root, ss_diag *d);
ss_status ss_json_parse_string(const char *text, const char *label, json_t **root, ss_diag *d);

/* root must be an object whose "format" equals format and whose "version" is
 * an integer in [1, max_version]. */
ss_status ss_json_check_header(const char *file, const json_t *root, const char *format,
                               int max_version, ss_diag *d);

/* obj (at JSON path jpath) must be an object with only keys in `allowed`
 * (NULL-terminated). */
ss_status ss_json_check_keys(const char *file, const char *jpath, const json_t *obj,
                             const char *const *allowed, ss_diag *d);

/* Typed getters. `required`: 0 = optional (out untouched if absent).
 * Range checks are inclusive. Messages: "FILE: $.path.key: expected ...". */
ss_status ss_json_get_int(const char *file, const char *jpath, const json_t *obj,
                          const char *key, int required, int64_t lo, int64_t hi, int64_t *out,
                          ss_diag *d);
ss_status ss_json_get_num(const char *file, const char *jpath, const json_t *obj,
                          const char *key, int required, double lo, double hi, double *out,
                          ss_diag *d);
ss_status ss_json_get_bool(const char *file, const char *jpath, const json_t *obj,
                           const char *key, int required, int *out, ss_diag *d);
/* *out borrowed from obj. Strings longer than max_len-1 are errors (max_len 0: no limit). */
ss_status ss_json_get_str(const char *file, const char *jpath, const json_t *obj,
                          const char *key, int required, size_t max_len, const char **out,
                          ss_diag *d);
/* Child of a given JSON type (JSON_OBJECT, JSON_ARRAY); *out borrowed, NULL if absent and optional. */
ss_status ss_json_get_child(const char *file, const char *jpath, const json_t *obj,
                            const char *key, json_type type, int required, json_t **out,
                            ss_diag *d);

/* Describe a JSON value's type for messages ("string", "integer", ...). */
const char *ss_json_type_name(const json_t *v);

/* Write root to path atomically (indented, sorted keys off, trailing newline). */
ss_status ss_json_write_atomic(const char *path, const json_t *root, ss_diag *d);
/* Serialise to a ss_malloc'd string. */
ss_status ss_json_to_string(const json_t *root, char **out, ss_diag *d);

/* Hex form of a 64-bit fingerprint ("0123456789abcdef") and back. */
void ss_fingerprint_hex(uint64_t fp, char out[17]);
int ss_fingerprint_parse(const char *s, uint64_t *out);

/* FNV-1a helpers for fingerprints. */
#define SS_FNV_INIT 1469598103934665603ULL
uint64_t ss_fnv_bytes(uint64_t h, const void *p, size_t n);
uint64_t ss_fnv_str(uint64_t h, const char *s);
uint64_t ss_fnv_i64(uint64_t h, int64_t v);
uint64_t ss_fnv_f64(uint64_t h, double v);

#endif
