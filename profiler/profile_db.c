/*
 * profile_db.c — the profile database (profile_db.h): entries in an array
 * with an open-addressing index on (device type, signature), the strict
 * loader (the file, then its append journal), the merging atomic writer and
 * the journal appender under a sidecar flock, op signatures, and the cost
 * provider that answers from the database.
 *
 * Invariant: the index holds every entry exactly once; an entry's key never
 * changes after insertion (put replaces the value in place).
 */
#include "profiler/profile_db.h"
#include "core/json_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FORMAT "simsearch-profile"
#define VERSION 1

struct ss_profile_db {
    ss_profile_entry *e;
    int n, cap;
    int *idx;           /* slots: entry index + 1, 0 = empty */
    size_t idx_cap;     /* power of two, > 2 * n */
};

ss_profile_db *ss_profile_db_new(void) { return ss_calloc(1, sizeof(ss_profile_db)); }

void ss_profile_db_free(ss_profile_db *db)
{
    if (!db)
        return;
    ss_free(db->e);
    ss_free(db->idx);
    ss_free(db);
}

int ss_profile_db_count(const ss_profile_db *db) { return db ? db->n : 0; }

const ss_profile_entry *ss_profile_db_entry(const ss_profile_db *db, int i)
{
    return db && i >= 0 && i < db->n ? &db->e[i] : NULL;
}

static uint64_t key_hash(const char *dt, const char *sig)
{
    return ss_fnv_str(ss_fnv_str(SS_FNV_INIT, dt), sig);
}

static size_t slot_of(const ss_profile_db *db, const char *dt, const char *sig)
{
    size_t mask = db->idx_cap - 1;
    for (size_t i = key_hash(dt, sig) & mask;; i = (i + 1) & mask) {
        int k = db->idx[i];
        if (!k || (!strcmp(db->e[k - 1].device_type, dt) && !strcmp(db->e[k - 1].signature, sig)))
            return i;
    }
}

const ss_profile_entry *ss_profile_db_find(const ss_profile_db *db, const char *device_type,
                                           const char *signature)
{
    if (!db || !db->idx || !device_type || !signature)
        return NULL;
    int k = db->idx[slot_of(db, device_type, signature)];
    return k ? &db->e[k - 1] : NULL;
}

static int reindex(ss_profile_db *db, size_t cap)
{
    int *ni = ss_calloc(cap, sizeof *ni);
    if (!ni)
        return -1;
    ss_free(db->idx);
    db->idx = ni;
    db->idx_cap = cap;
    for (int i = 0; i < db->n; i++)
        db->idx[slot_of(db, db->e[i].device_type, db->e[i].signature)] = i + 1;
    return 0;
}

static int bounded(const char *s, size_t max) { return s && memchr(s, '\0', max) != NULL; }

static int valid_date(const char *s)
{
    int y, mo, da, h, mi, se;
    char z = 0, end = 0;
    return strlen(s) == 20 &&
           sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%c%c", &y, &mo, &da, &h, &mi, &se, &z, &end) == 7 &&
           z == 'Z' && mo >= 1 && mo <= 12 && da >= 1 && da <= 31 && h <= 23 && mi <= 59 &&
           se <= 60 && y >= 1970;
}

static int valid_num(double v) { return v >= 0 && v < 1e12; }

ss_status ss_profile_db_put(ss_profile_db *db, const ss_profile_entry *e, ss_diag *d)
{
    if (!db || !e)
        return ss_diag_set(d, SS_ERR_INVALID, "profile: no database or entry");
    if (!bounded(e->device_type, sizeof e->device_type) || !e->device_type[0] ||
        !bounded(e->signature, sizeof e->signature) || !e->signature[0] ||
        !bounded(e->backend, sizeof e->backend) || !bounded(e->device, sizeof e->device) ||
        !bounded(e->date, sizeof e->date))
        return ss_diag_set(d, SS_ERR_INVALID, "profile: entry with an empty or unterminated "
                           "device type, signature, backend, device or date");
    if ((unsigned)e->op_type >= SS_OP_TYPE_COUNT || (unsigned)e->dtype >= SS_DTYPE_COUNT ||
        e->reps < 1 || !valid_num(e->fwd_us) || !valid_num(e->bwd_us) ||
        !valid_num(e->fwd_spread_us) || !valid_num(e->bwd_spread_us) || !valid_date(e->date))
        return ss_diag_set(d, SS_ERR_INVALID, "profile: entry for '%s' on %s out of range "
                           "(op type, dtype, reps >= 1, times >= 0, date YYYY-MM-DDTHH:MM:SSZ)",
                           e->signature, e->device_type);
    if (db->idx) {
        int k = db->idx[slot_of(db, e->device_type, e->signature)];
        if (k) {
            db->e[k - 1] = *e;
            return SS_OK;
        }
    }
    if (ss_grow((void **)&db->e, &db->cap, db->n + 1, sizeof *db->e))
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    if ((size_t)(db->n + 1) * 2 >= db->idx_cap) {
        size_t cap = db->idx_cap ? db->idx_cap * 2 : 64;
        while ((size_t)(db->n + 1) * 2 >= cap)
            cap *= 2;
        if (reindex(db, cap))
            return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    }
    db->e[db->n] = *e;
    db->idx[slot_of(db, e->device_type, e->signature)] = db->n + 1;
    db->n++;
    return SS_OK;
}

/* ------------------------------------------------------------------ load */

static const char *const ROOT_KEYS[] = {"format", "version", "entries", NULL};
static const char *const ENTRY_KEYS[] = {"device_type", "signature", "op_type", "dtype",
                                         "backend", "device", "date", "reps", "fwd_us", "bwd_us",
                                         NULL};
static const char *const TIME_KEYS[] = {"median", "spread", NULL};

static ss_status get_copy(const char *file, const char *jp, const json_t *o, const char *key,
                          int req, char *dst, size_t n, ss_diag *d)
{
    const char *s = NULL;
    ss_status st = ss_json_get_str(file, jp, o, key, req, n, &s, d);
    if (st == SS_OK && s)
        snprintf(dst, n, "%s", s);
    return st;
}

static ss_status get_time(const char *file, const char *jp, const json_t *o, const char *key,
                          double *med, double *spread, ss_diag *d)
{
    json_t *t = NULL;
    char p[96];
    ss_status st = ss_json_get_child(file, jp, o, key, JSON_OBJECT, 1, &t, d);
    if (st)
        return st;
    snprintf(p, sizeof p, "%s.%s", jp, key);
    if ((st = ss_json_check_keys(file, p, t, TIME_KEYS, d)) ||
        (st = ss_json_get_num(file, p, t, "median", 1, 0, 1e12, med, d)) ||
        (st = ss_json_get_num(file, p, t, "spread", 1, 0, 1e12, spread, d)))
        return st;
    return SS_OK;
}

static ss_status read_entry(const char *file, int i, const json_t *o, ss_profile_entry *e,
                            ss_diag *d)
{
    char jp[64], s[32] = "";
    snprintf(jp, sizeof jp, "$.entries[%d]", i);
    memset(e, 0, sizeof *e);
    ss_status st;
    if ((st = ss_json_check_keys(file, jp, o, ENTRY_KEYS, d)) ||
        (st = get_copy(file, jp, o, "device_type", 1, e->device_type, sizeof e->device_type, d)) ||
        (st = get_copy(file, jp, o, "signature", 1, e->signature, sizeof e->signature, d)) ||
        (st = get_copy(file, jp, o, "op_type", 1, s, sizeof s, d)))
        return st;
    if (!e->device_type[0] || !e->signature[0])
        return ss_diag_set(d, SS_ERR_PARSE, "%s: %s: device_type and signature must not be empty",
                           file, jp);
    if (ss_op_type_parse(s, &e->op_type) ||
        strncmp(e->signature, s, strlen(s)) != 0 || e->signature[strlen(s)] != ';')
        return ss_diag_set(d, SS_ERR_PARSE, "%s: %s.op_type: \"%s\" is not an operator type or "
                           "does not start the signature", file, jp, s);
    if ((st = get_copy(file, jp, o, "dtype", 1, s, sizeof s, d)))
        return st;
    if (ss_dtype_parse(s, &e->dtype))
        return ss_diag_set(d, SS_ERR_PARSE, "%s: %s.dtype: unknown dtype \"%s\" (expected f32, "
                           "f16, bf16, i32 or i64)", file, jp, s);
    if ((st = get_copy(file, jp, o, "backend", 1, e->backend, sizeof e->backend, d)))
        return st;
    if (strcmp(e->backend, "cpu") && strcmp(e->backend, "cuda"))
        return ss_diag_set(d, SS_ERR_PARSE, "%s: %s.backend: \"%s\" (expected \"cpu\" or "
                           "\"cuda\")", file, jp, e->backend);
    if ((st = get_copy(file, jp, o, "device", 1, e->device, sizeof e->device, d)) ||
        (st = get_copy(file, jp, o, "date", 1, e->date, sizeof e->date, d)))
        return st;
    if (!valid_date(e->date))
        return ss_diag_set(d, SS_ERR_PARSE, "%s: %s.date: \"%s\" (expected UTC "
                           "YYYY-MM-DDTHH:MM:SSZ)", file, jp, e->date);
    if ((st = ss_json_get_int(file, jp, o, "reps", 1, 1, 1000000000, &e->reps, d)) ||
        (st = get_time(file, jp, o, "fwd_us", &e->fwd_us, &e->fwd_spread_us, d)) ||
        (st = get_time(file, jp, o, "bwd_us", &e->bwd_us, &e->bwd_spread_us, d)))
        return st;
    return SS_OK;
}

static ss_status from_json(const char *file, json_t *root, ss_profile_db **out, ss_diag *d)
{
    ss_status st;
    json_t *arr = NULL;
    if ((st = ss_json_check_header(file, root, FORMAT, VERSION, d)) ||
        (st = ss_json_check_keys(file, "$", root, ROOT_KEYS, d)) ||
        (st = ss_json_get_child(file, "$", root, "entries", JSON_ARRAY, 1, &arr, d)))
        return st;
    ss_profile_db *db = ss_profile_db_new();
    if (!db)
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < json_array_size(arr); i++) {
        ss_profile_entry e;
        if ((st = read_entry(file, (int)i, json_array_get(arr, i), &e, d)))
            break;
        if (ss_profile_db_find(db, e.device_type, e.signature)) {
            st = ss_diag_set(d, SS_ERR_PARSE, "%s: $.entries[%zu]: a second entry for the same "
                             "device type and signature", file, i);
            break;
        }
        if ((st = ss_profile_db_put(db, &e, d)))
            break;
    }
    if (st) {
        ss_profile_db_free(db);
        return st;
    }
    *out = db;
    return SS_OK;
}

/* "<path><suffix>" into buf; -1 when it does not fit. */
static int sidecar(const char *path, const char *suffix, char *buf, size_t n)
{
    return (size_t)snprintf(buf, n, "%s%s", path, suffix) >= n ? -1 : 0;
}

/* Apply the journal "<path>.journal" (one entry object per line, in the
 * order appended) over db. A missing journal is nothing to apply; a last
 * line without its newline is a torn append (a writer killed in it) and is
 * skipped; any other bad line is an error naming the journal and line. */
static ss_status apply_journal(const char *path, ss_profile_db *db, ss_diag *d)
{
    char jpath[4096];
    if (sidecar(path, ".journal", jpath, sizeof jpath))
        return ss_diag_set(d, SS_ERR_INVALID, "%s: path too long", path);
    FILE *f = fopen(jpath, "r");
    if (!f)
        return errno == ENOENT ? SS_OK
                               : ss_diag_set(d, SS_ERR_IO, "%s: cannot read: %s", jpath,
                                             strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    ss_status st = SS_OK;
    for (int ln = 1; st == SS_OK && (len = getline(&line, &cap, f)) > 0; ln++) {
        if (line[len - 1] != '\n')
            break; /* torn append */
        json_error_t je;
        json_t *o = json_loadb(line, (size_t)len, JSON_REJECT_DUPLICATES, &je);
        char label[4200];
        snprintf(label, sizeof label, "%s: line %d", jpath, ln);
        ss_profile_entry e;
        if (!o)
            st = ss_diag_set(d, SS_ERR_PARSE, "%s: %s", label, je.text);
        else if (!json_is_object(o))
            st = ss_diag_set(d, SS_ERR_PARSE, "%s: expected an entry object", label);
        else if (!(st = read_entry(label, 0, o, &e, d)))
            st = ss_profile_db_put(db, &e, d);
        json_decref(o);
    }
    if (st == SS_OK && ferror(f))
        st = ss_diag_set(d, SS_ERR_IO, "%s: read error: %s", jpath, strerror(errno));
    free(line);
    fclose(f);
    return st;
}

ss_status ss_profile_db_load(const char *path, ss_profile_db **out, ss_diag *d)
{
    json_t *root = NULL;
    ss_status st = ss_json_parse_file(path, &root, d);
    if (st)
        return st;
    st = from_json(path, root, out, d);
    json_decref(root);
    if (st == SS_OK && (st = apply_journal(path, *out, d)) != SS_OK) {
        ss_profile_db_free(*out);
        *out = NULL;
    }
    return st;
}

ss_status ss_profile_db_load_string(const char *json, const char *label, ss_profile_db **out,
                                    ss_diag *d)
{
    json_t *root = NULL;
    ss_status st = ss_json_parse_string(json, label, &root, d);
    if (st)
        return st;
    st = from_json(label, root, out, d);
    json_decref(root);
    return st;
}

ss_status ss_profile_db_open(const char *path, ss_profile_db **out, ss_diag *d)
{
    if (access(path, F_OK) != 0 && errno == ENOENT) {
        *out = ss_profile_db_new();
        if (!*out)
            return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
        ss_status st = apply_journal(path, *out, d); /* appended before any compaction */
        if (st) {
            ss_profile_db_free(*out);
            *out = NULL;
        }
        return st;
    }
    return ss_profile_db_load(path, out, d);
}

/* ----------------------------------------------------------------- write */

static int cmp_entry(const void *pa, const void *pb)
{
    const ss_profile_entry *a = *(const ss_profile_entry *const *)pa;
    const ss_profile_entry *b = *(const ss_profile_entry *const *)pb;
    int c = strcmp(a->device_type, b->device_type);
    return c ? c : strcmp(a->signature, b->signature);
}

static json_t *time_json(double med, double spread)
{
    json_t *t = json_object();
    json_object_set_new(t, "median", json_real(med));
    json_object_set_new(t, "spread", json_real(spread));
    return t;
}

static json_t *to_json(const ss_profile_db *db)
{
    json_t *root = json_object(), *arr = json_array();
    const ss_profile_entry **v = ss_calloc((size_t)(db->n ? db->n : 1), sizeof *v);
    if (!root || !arr || !v) {
        json_decref(root);
        json_decref(arr);
        ss_free(v);
        return NULL;
    }
    for (int i = 0; i < db->n; i++)
        v[i] = &db->e[i];
    qsort(v, (size_t)db->n, sizeof *v, cmp_entry);
    json_object_set_new(root, "format", json_string(FORMAT));
    json_object_set_new(root, "version", json_integer(VERSION));
    for (int i = 0; i < db->n; i++) {
        const ss_profile_entry *e = v[i];
        json_t *o = json_object();
        json_object_set_new(o, "device_type", json_string(e->device_type));
        json_object_set_new(o, "op_type", json_string(ss_op_type_name(e->op_type)));
        json_object_set_new(o, "dtype", json_string(ss_dtype_name(e->dtype)));
        json_object_set_new(o, "signature", json_string(e->signature));
        json_object_set_new(o, "fwd_us", time_json(e->fwd_us, e->fwd_spread_us));
        json_object_set_new(o, "bwd_us", time_json(e->bwd_us, e->bwd_spread_us));
        json_object_set_new(o, "reps", json_integer(e->reps));
        json_object_set_new(o, "backend", json_string(e->backend));
        json_object_set_new(o, "device", json_string(e->device));
        json_object_set_new(o, "date", json_string(e->date));
        json_array_append_new(arr, o);
    }
    ss_free(v);
    json_object_set_new(root, "entries", arr);
    return root;
}

ss_status ss_profile_db_to_string(const ss_profile_db *db, char **out, ss_diag *d)
{
    json_t *root = to_json(db);
    if (!root)
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    ss_status st = ss_json_to_string(root, out, d);
    json_decref(root);
    return st;
}

/* Take the exclusive lock "<path>.lock": open (create) it, flock it, and
 * make sure the file locked is still the one at that name (a releaser
 * unlinks it: a waiter that locked the unlinked file retries). */
static ss_status lock_db(const char *path, char *lock, size_t n, int *fd_out, ss_diag *d)
{
    if (sidecar(path, ".lock", lock, n))
        return ss_diag_set(d, SS_ERR_INVALID, "%s: path too long", path);
    for (;;) {
        int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            return ss_diag_set(d, SS_ERR_IO, "%s: cannot open the lock file: %s", lock,
                               strerror(errno));
        while (flock(fd, LOCK_EX) != 0) {
            if (errno != EINTR) {
                ss_status st =
                    ss_diag_set(d, SS_ERR_IO, "%s: cannot lock: %s", lock, strerror(errno));
                close(fd);
                return st;
            }
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(lock, &b) == 0 && a.st_dev == b.st_dev &&
            a.st_ino == b.st_ino) {
            *fd_out = fd;
            return SS_OK;
        }
        close(fd); /* unlinked by its releaser meanwhile: lock the new one */
    }
}

/* Remove the lock file, then release it (no lock file stays behind). */
static void unlock_db(const char *lock, int fd)
{
    unlink(lock);
    flock(fd, LOCK_UN);
    close(fd);
}

/* Under the lock: merge db (may be NULL) over the file and its journal,
 * write the file atomically, then remove the journal. */
static ss_status compact_locked(const ss_profile_db *db, const char *path, ss_diag *d)
{
    ss_profile_db *disk = NULL;
    ss_status st = ss_profile_db_open(path, &disk, d);
    for (int i = 0; st == SS_OK && db && i < db->n; i++)
        st = ss_profile_db_put(disk, &db->e[i], d);
    json_t *root = NULL;
    if (st == SS_OK && !(root = to_json(disk)))
        st = ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    if (st == SS_OK)
        st = ss_json_write_atomic(path, root, d);
    char jpath[4096];
    if (st == SS_OK && !sidecar(path, ".journal", jpath, sizeof jpath) && unlink(jpath) != 0 &&
        errno != ENOENT)
        st = ss_diag_set(d, SS_ERR_IO, "%s: cannot remove the merged journal: %s", jpath,
                         strerror(errno));
    json_decref(root);
    ss_profile_db_free(disk);
    return st;
}

ss_status ss_profile_db_save(const ss_profile_db *db, const char *path, ss_diag *d)
{
    if (!db || !path)
        return ss_diag_set(d, SS_ERR_INVALID, "profile: no database or path");
    char lock[4096];
    int fd;
    ss_status st = lock_db(path, lock, sizeof lock, &fd, d);
    if (st)
        return st;
    st = compact_locked(db, path, d);
    unlock_db(lock, fd);
    return st;
}

ss_status ss_profile_db_append(const char *path, const ss_profile_entry *e, ss_diag *d)
{
    if (!path || !e)
        return ss_diag_set(d, SS_ERR_INVALID, "profile: no path or entry");
    ss_profile_db *one = ss_profile_db_new();
    if (!one)
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    ss_status st = ss_profile_db_put(one, e, d); /* checks the entry's ranges */
    json_t *root = st ? NULL : to_json(one);
    json_t *o = root ? json_array_get(json_object_get(root, "entries"), 0) : NULL;
    char *txt = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    ss_profile_db_free(one);
    if (st)
        return st;
    if (!txt)
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    char lock[4096], jpath[4096];
    int fd, jf = -1;
    if (sidecar(path, ".journal", jpath, sizeof jpath)) {
        free(txt);
        return ss_diag_set(d, SS_ERR_INVALID, "%s: path too long", path);
    }
    if ((st = lock_db(path, lock, sizeof lock, &fd, d))) {
        free(txt);
        return st;
    }
    size_t n = strlen(txt);
    txt[n++] = '\n'; /* json_dumps left room: its NUL */
    jf = open(jpath, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (jf < 0)
        st = ss_diag_set(d, SS_ERR_IO, "%s: cannot open: %s", jpath, strerror(errno));
    for (size_t w = 0; st == SS_OK && w < n;) {
        ssize_t k = write(jf, txt + w, n - w);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            st = ss_diag_set(d, SS_ERR_IO, "%s: write failed: %s", jpath, strerror(errno));
        else
            w += (size_t)k;
    }
    if (st == SS_OK && fsync(jf) != 0)
        st = ss_diag_set(d, SS_ERR_IO, "%s: write failed: %s", jpath, strerror(errno));
    if (jf >= 0)
        close(jf);
    free(txt);
    unlock_db(lock, fd);
    return st;
}

ss_status ss_profile_db_compact(const char *path, double ratio, ss_diag *d)
{
    char lock[4096], jpath[4096];
    struct stat js, ms;
    if (!path || sidecar(path, ".journal", jpath, sizeof jpath))
        return ss_diag_set(d, SS_ERR_INVALID, "profile: no path, or too long");
    int fd;
    ss_status st = lock_db(path, lock, sizeof lock, &fd, d);
    if (st)
        return st;
    if (stat(jpath, &js) == 0 &&
        (stat(path, &ms) != 0 || (double)js.st_size >= ratio * (double)ms.st_size))
        st = compact_locked(NULL, path, d);
    unlock_db(lock, fd);
    return st;
}

/* ------------------------------------------------------------- signature */

typedef struct sbuf {
    char *p;
    size_t n, used;
    int over;
} sbuf;

static void put(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void put(sbuf *b, const char *fmt, ...)
{
    if (b->over)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->p + b->used, b->n - b->used, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= b->n - b->used)
        b->over = 1;
    else
        b->used += (size_t)k;
}

static void put_i(sbuf *b, const char *name, int64_t v)
{
    if (v)
        put(b, ",%s=%lld", name, (long long)v);
}

static void put_ext(sbuf *b, const ss_region *r)
{
    put(b, "[");
    for (int i = 0; i < r->ndim; i++)
        put(b, "%s%lld", i ? "x" : "", (long long)(r->r[i].hi - r->r[i].lo));
    put(b, "]");
}

int ss_profile_signature(const ss_graph *g, const ss_op *op, const ss_tile *t, char *buf,
                         size_t n)
{
    sbuf b = {buf, n, 0, 0};
    if (!n)
        return -1;
    buf[0] = '\0';
    const ss_op_attrs *a = &op->attrs;
    put(&b, "%s;", ss_op_type_name(op->type));
    put(&b, "attrs:");
    put_i(&b, "out_features", a->out_features);
    put_i(&b, "use_bias", a->use_bias);
    put_i(&b, "trans_a", a->trans_a);
    put_i(&b, "trans_b", a->trans_b);
    put_i(&b, "out_channels", a->out_channels);
    put_i(&b, "groups", a->groups);
    for (int i = 0; i < 2; i++) {
        put_i(&b, i ? "kernel1" : "kernel0", a->kernel[i]);
        put_i(&b, i ? "stride1" : "stride0", a->stride[i]);
        put_i(&b, i ? "pad1" : "pad0", a->pad[i]);
    }
    put_i(&b, "pool", a->pool);
    put_i(&b, "unary", a->unary);
    put_i(&b, "binary", a->binary);
    put_i(&b, "axis", a->axis);
    put_i(&b, "n_split", a->n_split);
    for (int i = 0; i < a->n_split && i < SS_MAX_OUTPUTS; i++)
        put(&b, "%s%lld", i ? "/" : ",split=", (long long)a->split_sizes[i]);
    if (op->type == SS_OP_TRANSPOSE)
        for (int i = 0; i < SS_MAX_DIMS; i++)
            put(&b, "%s%d", i ? "/" : ",perm=", a->perm[i]);
    if (op->type == SS_OP_RESHAPE || op->type == SS_OP_INPUT) {
        put(&b, ",shape=");
        for (int i = 0; i < a->ndim; i++)
            put(&b, "%s%lld", i ? "x" : "", (long long)a->shape[i]);
    }
    if (a->rate != 0)
        put(&b, ",rate=%.17g", a->rate);
    put_i(&b, "vocab", a->vocab);
    put_i(&b, "dim", a->dim);
    put_i(&b, "lstm_mode", a->lstm_mode);
    put_i(&b, "hidden", a->hidden);
    put_i(&b, "return_sequences", a->return_sequences);
    put_i(&b, "heads", a->heads);
    put_i(&b, "causal", a->causal);
    put_i(&b, "view", a->view);
    ss_tile full;
    ss_op_full_tile(g, op, &full);
    put(&b, ";tile:");
    put_ext(&b, &t->out);
    put(&b, ",red=%lld,first=%d", (long long)(t->red.hi - t->red.lo), t->red.lo == full.red.lo);
    put(&b, ";in:");
    for (int i = 0; i < op->n_in + op->n_w; i++) {
        int tid = i < op->n_in ? op->inputs[i] : op->weights[i - op->n_in];
        const ss_tensor *x = ss_graph_tensor(g, tid);
        ss_region r;
        ss_op_input_region(g, op, t, i, &r);
        put(&b, "%s%s", i ? "," : "", x ? ss_dtype_name(x->dtype) : "?");
        put_ext(&b, &r);
    }
    put(&b, ";out:");
    for (int k = 0; k < op->n_out; k++) {
        const ss_tensor *y = ss_graph_tensor(g, op->outputs[k]);
        ss_region r;
        ss_op_output_region(g, op, t, k, &r);
        put(&b, "%s%s", k ? "," : "", y ? ss_dtype_name(y->dtype) : "?");
        put_ext(&b, &r);
    }
    return b.over ? -1 : (int)b.used;
}

/* ----------------------------------------------------------------- provider */

static int lookup(void *ctx, const ss_graph *g, const ss_op *op, const ss_tile *t,
                  const ss_device_type *dt, ss_cost *out)
{
    const ss_profile_db *db = ctx;
    char sig[SS_PROFILE_SIG_MAX];
    if (!db || db->n == 0 || ss_profile_signature(g, op, t, sig, sizeof sig) < 0)
        return 0;
    const ss_profile_entry *e = ss_profile_db_find(db, dt->name, sig);
    if (!e)
        return 0;
    memset(out, 0, sizeof *out);
    ss_op_tile_work(g, op, t, &out->work);
    out->fwd_us = e->fwd_us;
    out->bwd_us = e->bwd_us;
    out->source = SS_COST_PROFILE;
    return 1;
}

ss_cost_provider ss_profile_provider(const ss_profile_db *db)
{
    ss_cost_provider p = {"profile", (void *)db, lookup};
    return p;
}

void ss_profile_now(char out[32])
{
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tmv);
}
