/*
 * outfile.h — how every simsearch output (plan, model, topology, trace,
 * results) reaches its path: checked before any work, written to a temp file
 * beside the target, renamed over it only when every byte is on disk.
 *
 * Rules (docs/limits.md, "Output files"):
 *   - "-" is standard output (written directly, no temp file).
 *   - A path that exists must be a regular file the user may write; a
 *     device node, FIFO, socket or directory is refused, never replaced.
 *   - A symbolic link is followed: the regular file it points to is replaced
 *     (atomically, in the target's directory) and the link is kept; a link to
 *     a missing file or to anything but a regular file is refused.
 *   - The temp file is "<target>.tmp.<pid>.XXXXXX"; it gets the replaced
 *     file's permission bits, or 0666 & ~umask for a new file. Temp files
 *     are removed on every exit path that runs code: errors, aborts, and
 *     (through ss_output_remove_temps, called from the CLI's signal handler)
 *     SIGINT/SIGTERM/SIGHUP. Temp files a killed process (kill -9) left
 *     behind are removed by the next write to the same target, once their
 *     process is gone.
 * ss_output_check and ss_output_remove_temps are public (simsearch.h).
 */
#ifndef SS_OUTFILE_H
#define SS_OUTFILE_H

#include "simsearch.h"
#include <stdio.h>

typedef struct ss_output ss_output;

/* Open path for writing under the rules above: *out is the pending output,
 * *f the stream to write to. On error nothing was created and *out, *f are
 * NULL. */
ss_status ss_output_open(const char *path, ss_output **out, FILE **f, ss_diag *d);

/* Flush, fsync and close the stream, then rename the temp file over the
 * target (and fsync its directory). Frees o in every case; on error the
 * target is unchanged and the temp file removed. o NULL is SS_OK. */
ss_status ss_output_commit(ss_output *o, ss_diag *d);

/* Close and remove the temp file; the target is unchanged. NULL is a no-op. */
void ss_output_abort(ss_output *o);

#endif
