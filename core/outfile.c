/*
 * outfile.c — checked, atomic, interruptible output files (rules in
 * outfile.h).
 *
 * Invariant: the target path only ever holds its old contents or the
 * complete new ones; while a write is pending its temp file is listed in
 * `pending`, so a signal handler can remove it (ss_output_remove_temps).
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include "outfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct ss_output {
    FILE *f;
    char *target;  /* resolved path the rename replaces (NULL for stdout) */
    char *tmp;     /* temp file beside it */
    int slot;      /* index in pending, -1 if not listed */
    const char *label; /* the path the user gave, for messages (borrowed) */
};

/* Temp files being written, for signal handlers. A slot holds a pointer to a
 * complete string or NULL; set after the string is written, cleared before
 * it is freed. Past PENDING_MAX outputs at once, signals leave temp files
 * (the next write to the target removes them). */
#define PENDING_MAX 16
static char *volatile pending[PENDING_MAX];

void ss_output_remove_temps(void)
{
    for (int i = 0; i < PENDING_MAX; i++) {
        char *p = pending[i];
        if (p)
            unlink(p);
    }
}

static int list_pending(char *tmp)
{
    for (int i = 0; i < PENDING_MAX; i++)
        if (!pending[i]) {
            pending[i] = tmp;
            return i;
        }
    return -1;
}

static void unlist_pending(int slot)
{
    if (slot >= 0)
        pending[slot] = NULL;
}

static const char *kind_name(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
           : S_ISLNK(m)  ? "a symbolic link"
                         : "not a regular file";
}

/* The file a write to path replaces, ss_malloc'd: path itself, or for a
 * symbolic link the regular file it resolves to. *exists says whether it
 * exists and *mode holds its permission bits. */
static ss_status resolve(const char *path, char **target, int *exists, mode_t *mode, ss_diag *d)
{
    *target = NULL;
    *exists = 0;
    if (!path || !path[0])
        return ss_diag_set(d, SS_ERR_INVALID, "output path is empty (give a file name, or - for "
                                              "standard output)");
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT)
            return ss_diag_set(d, SS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        *target = ss_strdup(path);
        return *target ? SS_OK : ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    }
    if (S_ISLNK(st.st_mode)) {
        if (stat(path, &st) != 0)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: is a symbolic link to a missing file (%s); refusing to "
                               "write through it",
                               path, strerror(errno));
        if (!S_ISREG(st.st_mode))
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: is a symbolic link to %s; refusing to replace it "
                               "(outputs go to regular files, or - for standard output)",
                               path, kind_name(st.st_mode));
        char *real = realpath(path, NULL); /* libc malloc */
        if (!real)
            return ss_diag_set(d, SS_ERR_IO, "%s: cannot resolve the link: %s", path,
                               strerror(errno));
        *target = ss_strdup(real);
        free(real);
        if (!*target)
            return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    } else if (!S_ISREG(st.st_mode)) {
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: exists and is %s; refusing to replace it (outputs go to "
                           "regular files, or - for standard output)",
                           path, kind_name(st.st_mode));
    } else {
        *target = ss_strdup(path);
        if (!*target)
            return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    }
    if (access(*target, W_OK) != 0) {
        ss_status s = ss_diag_set(d, SS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        ss_free(*target);
        *target = NULL;
        return s;
    }
    *exists = 1;
    *mode = st.st_mode & 07777;
    return SS_OK;
}

/* Directory part of path ("." when it has none), ss_malloc'd. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return ss_strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *dir = ss_malloc(n + 1);
    if (dir) {
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    return dir;
}

/* Remove "<base>.tmp.<pid>.XXXXXX" files in dir whose process is gone
 * (left by a write that was killed). Best effort: errors are ignored. */
static void remove_stale(const char *dir, const char *base)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return;
    size_t bl = strlen(base);
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        const char *n = e->d_name;
        if (strncmp(n, base, bl) || strncmp(n + bl, ".tmp.", 5))
            continue;
        char *end = NULL;
        long pid = strtol(n + bl + 5, &end, 10);
        if (pid <= 0 || !end || *end != '.' || strlen(end + 1) != 6)
            continue;
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        size_t len = strlen(dir) + strlen(n) + 2;
        char *p = ss_malloc(len);
        if (p) {
            snprintf(p, len, "%s/%s", dir, n);
            unlink(p);
            ss_free(p);
        }
    }
    closedir(dp);
}

/* Create the temp file for target; its fd in *fd, its name ss_malloc'd. */
static ss_status make_temp(const char *label, const char *target, int *fd, char **tmp, ss_diag *d)
{
    size_t n = strlen(target) + 48;
    *tmp = ss_malloc(n);
    if (!*tmp)
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    snprintf(*tmp, n, "%s.tmp.%ld.XXXXXX", target, (long)getpid());
    *fd = mkstemp(*tmp);
    if (*fd >= 0)
        return SS_OK;
    int err = errno;
    ss_free(*tmp);
    *tmp = NULL;
    char *dir = dir_of(target);
    struct stat st;
    ss_status s;
    if (dir && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)))
        s = ss_diag_set(d, SS_ERR_IO, "%s: cannot write: directory %s does not exist", label,
                        dir);
    else
        s = ss_diag_set(d, SS_ERR_IO, "%s: cannot write in directory %s: %s", label,
                        dir ? dir : ".", strerror(err));
    ss_free(dir);
    return s;
}

ss_status ss_output_check(const char *path, ss_diag *d)
{
    if (path && !strcmp(path, "-"))
        return SS_OK;
    char *target = NULL;
    int exists = 0;
    mode_t mode = 0;
    ss_status s = resolve(path, &target, &exists, &mode, d);
    if (s)
        return s;
    int fd = -1;
    char *tmp = NULL;
    s = make_temp(path, target, &fd, &tmp, d);
    if (s == SS_OK) {
        close(fd);
        unlink(tmp);
    }
    ss_free(tmp);
    ss_free(target);
    return s;
}

ss_status ss_output_open(const char *path, ss_output **out, FILE **f, ss_diag *d)
{
    *out = NULL;
    *f = NULL;
    ss_output *o = ss_calloc(1, sizeof *o);
    if (!o)
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    o->slot = -1;
    o->label = path;
    if (path && !strcmp(path, "-")) {
        o->f = stdout;
        *out = o;
        *f = o->f;
        return SS_OK;
    }
    int exists = 0, fd = -1;
    mode_t mode = 0;
    ss_status s = resolve(path, &o->target, &exists, &mode, d);
    char *dir = s ? NULL : dir_of(o->target);
    if (!s && !dir)
        s = ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    if (!s) {
        const char *slash = strrchr(o->target, '/');
        remove_stale(dir, slash ? slash + 1 : o->target);
        s = make_temp(path, o->target, &fd, &o->tmp, d);
    }
    ss_free(dir);
    if (s) {
        ss_free(o->target);
        ss_free(o);
        return s;
    }
    o->slot = list_pending(o->tmp);
    if (!exists) {
        mode = umask(0);
        umask(mode);
        mode = 0666 & ~mode;
    }
    o->f = fchmod(fd, mode) == 0 ? fdopen(fd, "w") : NULL;
    if (!o->f) {
        s = ss_diag_set(d, SS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        close(fd);
        ss_output_abort(o);
        return s;
    }
    *out = o;
    *f = o->f;
    return SS_OK;
}

static void release(ss_output *o)
{
    unlist_pending(o->slot);
    ss_free(o->tmp);
    ss_free(o->target);
    ss_free(o);
}

void ss_output_abort(ss_output *o)
{
    if (!o)
        return;
    if (o->target) { /* a file: close and drop the temp */
        if (o->f)
            fclose(o->f);
        unlink(o->tmp);
    } else if (o->f) {
        fflush(o->f);
    }
    release(o);
}

/* fsync the directory holding path, so the rename itself is durable. */
static void sync_dir(const char *path)
{
    char *dir = dir_of(path);
    int fd = dir ? open(dir, O_RDONLY) : -1;
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    ss_free(dir);
}

ss_status ss_output_commit(ss_output *o, ss_diag *d)
{
    if (!o)
        return SS_OK;
    ss_status s = SS_OK;
    if (!o->target) { /* standard output */
        if (fflush(o->f) != 0 || ferror(o->f))
            s = ss_diag_set(d, SS_ERR_IO, "standard output: write failed: %s", strerror(errno));
        release(o);
        return s;
    }
    int bad = fflush(o->f) != 0 || ferror(o->f);
    int err = errno;
    bad |= fsync(fileno(o->f)) != 0;
    if (bad && !err)
        err = errno;
    FILE *f = o->f;
    o->f = NULL;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    if (bad) {
        s = ss_diag_set(d, SS_ERR_IO, "%s: write failed: %s", o->label, strerror(err));
        ss_output_abort(o);
        return s;
    }
    /* Something may have appeared at the target since the check. */
    struct stat st;
    if (lstat(o->target, &st) == 0 && !S_ISREG(st.st_mode)) {
        s = ss_diag_set(d, SS_ERR_INVALID, "%s: is now %s; refusing to replace it", o->label,
                        kind_name(st.st_mode));
        ss_output_abort(o);
        return s;
    }
    if (rename(o->tmp, o->target) != 0) {
        s = ss_diag_set(d, SS_ERR_IO, "%s: cannot replace it: %s", o->label, strerror(errno));
        ss_output_abort(o);
        return s;
    }
    sync_dir(o->target);
    release(o);
    return SS_OK;
}
