/*
 * json_util.c — strict JSON helpers shared by all loaders (see json_util.h).
 *
 * Invariant: every failure path sets the diag with the file name and either
 * line:column (syntax) or a JSON path (semantics), and leaves outputs as they
 * were.
 */
#include "json_util.h"
#include "outfile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

ss_status ss_json_parse_file(const char *path, json_t **root, ss_diag *d)
{
    json_error_t err;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ss_diag_set(d, SS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return ss_diag_set(d, SS_ERR_IO, "%s: is a directory (expected a JSON file)", path);
    }
    json_t *j = json_loadf(f, JSON_REJECT_DUPLICATES, &err);
    fclose(f);
    if (!j) {
        if (err.line < 0)
            return ss_diag_set(d, SS_ERR_PARSE, "%s: invalid JSON: %s", path, err.text);
        return ss_diag_set(d, SS_ERR_PARSE, "%s:%d:%d: invalid JSON: %s", path, err.line,
                           err.column, err.text);
    }
    *root = j;
    return SS_OK;
}

ss_status ss_json_parse_string(const char *text, const char *label, json_t **root, ss_diag *d)
{
    json_error_t err;
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    if (!j)
        return ss_diag_set(d, SS_ERR_PARSE, "%s:%d:%d: invalid JSON: %s", label, err.line,
                           err.column, err.text);
    *root = j;
    return SS_OK;
}

const char *ss_json_type_name(const json_t *v)
{
    if (!v)
        return "nothing";
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "an unknown value";
}

ss_status ss_json_check_header(const char *file, const json_t *root, const char *format,
                               int max_version, ss_diag *d)
{
    if (!json_is_object(root))
        return ss_diag_set(d, SS_ERR_PARSE, "%s: $: expected an object, got %s", file,
                           ss_json_type_name(root));
    const char *fmt = NULL;
    ss_status st = ss_json_get_str(file, "$", root, "format", 1, 0, &fmt, d);
    if (st)
        return st;
    if (strcmp(fmt, format) != 0)
        return ss_diag_set(d, SS_ERR_PARSE, "%s: $.format: expected \"%s\", got \"%s\"", file,
                           format, fmt);
    int64_t v = 0;
    return ss_json_get_int(file, "$", root, "version", 1, 1, max_version, &v, d);
}

ss_status ss_json_check_keys(const char *file, const char *jpath, const json_t *obj,
                             const char *const *allowed, ss_diag *d)
{
    if (!json_is_object(obj))
        return ss_diag_set(d, SS_ERR_PARSE, "%s: %s: expected an object, got %s", file, jpath,
                           ss_json_type_name(obj));
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)obj, key, val) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, key) == 0) {
                ok = 1;
                break;
            }
        if (!ok) {
            char list[512] = "";
            size_t used = 0;
            for (const char *const *a = allowed; *a && used < sizeof list - 40; a++)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
                                         a == allowed ? "" : ", ", *a);
            return ss_diag_set(d, SS_ERR_PARSE, "%s: %s: unknown key \"%s\" (expected one of: %s)",
                               file, jpath, key, list);
        }
    }
    return SS_OK;
}

static ss_status missing(const char *file, const char *jpath, const char *key, const char *what,
                         ss_diag *d)
{
    return ss_diag_set(d, SS_ERR_PARSE, "%s: %s: missing required key \"%s\" (%s)", file, jpath,
                       key, what);
}

ss_status ss_json_get_int(const char *file, const char *jpath, const json_t *obj,
                          const char *key, int required, int64_t lo, int64_t hi, int64_t *out,
                          ss_diag *d)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return required ? missing(file, jpath, key, "an integer", d) : SS_OK;
    if (!json_is_integer(v))
        return ss_diag_set(d, SS_ERR_PARSE, "%s: %s.%s: expected an integer, got %s", file, jpath,
                           key, ss_json_type_name(v));
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: %s.%s: value %lld out of range (expected %lld to %lld)", file,
                           jpath, key, (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return SS_OK;
}

ss_status ss_json_get_num(const char *file, const char *jpath, const json_t *obj,
                          const char *key, int required, double lo, double hi, double *out,
                          ss_diag *d)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return required ? missing(file, jpath, key, "a number", d) : SS_OK;
    if (!json_is_number(v))
        return ss_diag_set(d, SS_ERR_PARSE, "%s: %s.%s: expected a number, got %s", file, jpath,
                           key, ss_json_type_name(v));
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi)
        return ss_diag_set(d, SS_ERR_INVALID, "%s: %s.%s: value %g out of range (expected %g to %g)",
                           file, jpath, key, x, lo, hi);
    *out = x;
    return SS_OK;
}

ss_status ss_json_get_bool(const char *file, const char *jpath, const json_t *obj,
                           const char *key, int required, int *out, ss_diag *d)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return required ? missing(file, jpath, key, "a boolean", d) : SS_OK;
    if (!json_is_boolean(v))
        return ss_diag_set(d, SS_ERR_PARSE, "%s: %s.%s: expected a boolean, got %s", file, jpath,
                           key, ss_json_type_name(v));
    *out = json_is_true(v);
    return SS_OK;
}

ss_status ss_json_get_str(const char *file, const char *jpath, const json_t *obj,
                          const char *key, int required, size_t max_len, const char **out,
                          ss_diag *d)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return required ? missing(file, jpath, key, "a string", d) : SS_OK;
    if (!json_is_string(v))
        return ss_diag_set(d, SS_ERR_PARSE, "%s: %s.%s: expected a string, got %s", file, jpath,
                           key, ss_json_type_name(v));
    const char *s = json_string_value(v);
    if (max_len && strlen(s) >= max_len)
        return ss_diag_set(d, SS_ERR_INVALID, "%s: %s.%s: string longer than %zu characters", file,
                           jpath, key, max_len - 1);
    if (strlen(s) == 0)
        return ss_diag_set(d, SS_ERR_INVALID, "%s: %s.%s: expected a non-empty string", file, jpath,
                           key);
    *out = s;
    return SS_OK;
}

ss_status ss_json_get_child(const char *file, const char *jpath, const json_t *obj,
                            const char *key, json_type type, int required, json_t **out,
                            ss_diag *d)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required)
            return missing(file, jpath, key, type == JSON_ARRAY ? "an array" : "an object", d);
        *out = NULL;
        return SS_OK;
    }
    if (json_typeof(v) != type)
        return ss_diag_set(d, SS_ERR_PARSE, "%s: %s.%s: expected %s, got %s", file, jpath, key,
                           type == JSON_ARRAY ? "an array" : "an object", ss_json_type_name(v));
    *out = v;
    return SS_OK;
}

/* Rewrite, in place, every real number token of a JSON text to the shortest
 * decimal form that parses back to the same double ("0.1", not
 * "0.10000000000000001"); a real keeps a '.' or an exponent so it stays a
 * real. Tokens only get shorter, so the text is compacted as it goes. */
static void shorten_reals(char *text)
{
    char *w = text;
    const char *r = text;
    int in_str = 0;
    while (*r) {
        char c = *r;
        if (in_str) {
            *w++ = *r++;
            if (c == '\\' && *r)
                *w++ = *r++;
            else if (c == '"')
                in_str = 0;
            continue;
        }
        if (c == '"') {
            in_str = 1;
            *w++ = *r++;
            continue;
        }
        if (c != '-' && (c < '0' || c > '9')) {
            *w++ = *r++;
            continue;
        }
        size_t n = strspn(r, "0123456789+-.eE");
        int is_real = memchr(r, '.', n) || memchr(r, 'e', n) || memchr(r, 'E', n);
        if (!is_real || n >= 64) {
            memmove(w, r, n);
            w += n;
            r += n;
            continue;
        }
        char tok[64], best[64];
        memcpy(tok, r, n);
        tok[n] = '\0';
        double v = strtod(tok, NULL);
        for (int p = 1; p <= 17; p++) {
            snprintf(best, sizeof best, "%.*g", p, v);
            if (strtod(best, NULL) == v)
                break;
        }
        if (!strpbrk(best, ".eEn"))
            strcat(best, ".0");
        size_t m = strlen(best);
        if (m > n) { /* cannot happen for %.17g input; keep the original */
            memcpy(best, tok, n + 1);
            m = n;
        }
        memcpy(w, best, m);
        w += m;
        r += n;
    }
    *w = '\0';
}

ss_status ss_json_to_string(const json_t *root, char **out, ss_diag *d)
{
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    if (!s)
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory while writing JSON");
    shorten_reals(s);
    *out = s; /* allocated through the hook (json_set_alloc_funcs) */
    return SS_OK;
}

ss_status ss_json_write_atomic(const char *path, const json_t *root, ss_diag *d)
{
    char *text = NULL;
    ss_status st = ss_json_to_string(root, &text, d);
    if (st)
        return st;
    ss_output *o = NULL;
    FILE *f = NULL;
    st = ss_output_open(path, &o, &f, d);
    if (st == SS_OK) {
        size_t len = strlen(text);
        if (fwrite(text, 1, len, f) != len || fputc('\n', f) == EOF) {
            st = ss_diag_set(d, SS_ERR_IO, "%s: write failed: %s", path, strerror(errno));
            ss_output_abort(o);
        } else {
            st = ss_output_commit(o, d);
        }
    }
    ss_free(text);
    return st;
}

void ss_fingerprint_hex(uint64_t fp, char out[17])
{
    snprintf(out, 17, "%016llx", (unsigned long long)fp);
}

int ss_fingerprint_parse(const char *s, uint64_t *out)
{
    if (strlen(s) != 16)
        return -1;
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char c = s[i];
        int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (x < 0)
            return -1;
        v = v << 4 | (uint64_t)x;
    }
    *out = v;
    return 0;
}

uint64_t ss_fnv_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ULL;
    }
    return h;
}

uint64_t ss_fnv_str(uint64_t h, const char *s) { return ss_fnv_bytes(h, s, strlen(s) + 1); }
uint64_t ss_fnv_i64(uint64_t h, int64_t v) { return ss_fnv_bytes(h, &v, sizeof v); }
uint64_t ss_fnv_f64(uint64_t h, double v)
{
    if (v == 0)
        v = 0; /* -0 == 0 */
    return ss_fnv_bytes(h, &v, sizeof v);
}
