/*
 * plot.h — the command line's one plotting module: a figure of line and
 * scatter panels written as SVG or PNG through PLplot's C API (Debian
 * libplplot-dev; PNG through its pngcairo driver, plplot-driver-cairo).
 *
 * A figure has a title and a subtitle (the model, batch and assumptions the
 * figure rests on, one or more lines separated by '\n'), and one or more
 * panels, laid out one per row up to two, then two per row. A panel has a
 * title, x and y axis labels, an optional log-2 x axis labelled with the
 * values themselves (256, 512, ...) and named series: lines with markers,
 * markers alone, step lines, dashed lines, ticks along the x axis, and a
 * marked set (a Pareto frontier: a thick dashed line through ringed
 * points). Every named series gets a legend entry, in its panel or in
 * one legend for the figure. The k-th series of every panel gets the k-th
 * colour and marker, so series listed in the same order match across
 * panels.
 *
 * Invariant: the figure owns copies of everything it was given (strings,
 * points), so callers may free their arrays right after an add. Writing is
 * atomic (core/outfile.h: a temp file beside the target, renamed over it
 * when complete); the format follows the extension (".svg" or ".png").
 * SVG keeps text as text, so series names and titles are searchable in it.
 * PLplot keeps global state: write one figure at a time (not from two
 * threads at once).
 */
#ifndef SS_CLI_PLOT_H
#define SS_CLI_PLOT_H

#include "simsearch.h"

typedef struct ss_plot ss_plot;

typedef enum ss_plot_style {
    SS_PLOT_LINE_MARKERS = 0, /* a line through the points, a marker at each */
    SS_PLOT_LINE,             /* a line through the points */
    SS_PLOT_MARKERS,          /* markers alone (a scatter) */
    SS_PLOT_DASHED,           /* a dashed line (a reference: a mean, a bound) */
    SS_PLOT_STEP,             /* y[i] holds from x[i] to x[i + 1] */
    SS_PLOT_TICKS,            /* a short tick up from the x axis at each x (y unused) */
    SS_PLOT_FRONTIER          /* the marked set: thick dashed line, ringed points */
} ss_plot_style;

typedef enum ss_plot_corner {
    SS_PLOT_LEGEND_TOP_LEFT = 0,
    SS_PLOT_LEGEND_TOP_RIGHT,
    SS_PLOT_LEGEND_BOTTOM_LEFT,
    SS_PLOT_LEGEND_BOTTOM_RIGHT,
    SS_PLOT_LEGEND_NONE
} ss_plot_corner;

/* A panel's axes. Zero-initialised: no titles, linear axes, ranges from the
 * data (5% margins), legend top left. */
typedef struct ss_plot_axes {
    const char *title, *xlabel, *ylabel; /* NULL: none */
    int logx;                 /* 1: log-2 x axis; points with x <= 0 are skipped */
    int y_from_zero;          /* 1: the y range starts at 0 when no y is negative */
    int x_fixed, y_fixed;     /* 1: use xmin/xmax (ymin/ymax) as given */
    double xmin, xmax, ymin, ymax;
    ss_plot_corner legend;
} ss_plot_axes;

/* A series added to the current panel. */
typedef struct ss_plot_series {
    const char *name;         /* legend entry (NULL or "": none) */
    const double *x, *y;      /* n points; non-finite points are skipped */
    int n;
    ss_plot_style style;
    unsigned color;           /* 0xRRGGBB; 0: the next colour of the palette */
    const char *const *labels; /* NULL, or n labels written beside the points
                                  (NULL entries: none) */
} ss_plot_series;

/* A new figure (title required; subtitle may be NULL). NULL when out of
 * memory. */
ss_plot *ss_plot_new(const char *title, const char *subtitle);
void ss_plot_free(ss_plot *p); /* NULL: no-op */

/* Start a new panel; later series go to it. SS_ERR_NOMEM, or
 * SS_ERR_INVALID past SS_PLOT_MAX_PANELS panels or with a fixed range whose
 * min is not below its max (or not above 0 on a log axis); on error the
 * figure is unchanged. */
#define SS_PLOT_MAX_PANELS 8
ss_status ss_plot_panel(ss_plot *p, const ss_plot_axes *axes, ss_diag *d);

/* Add a series to the current panel (one is started with default axes when
 * there is none). SS_ERR_INVALID when n < 0, x/y is NULL with n > 0, or the
 * panel has SS_PLOT_MAX_SERIES series already;
 * SS_ERR_NOMEM. On error the figure is unchanged. */
#define SS_PLOT_MAX_SERIES 32
ss_status ss_plot_add(ss_plot *p, const ss_plot_series *s, ss_diag *d);

/* on: one legend for the whole figure, under the titles, in columns (each
 * series name once, as its first panel draws it: panels that list the same
 * names in the same order draw them alike), and no legend in the panels.
 * Off (the default): a legend in each panel's corner (ss_plot_axes.legend). */
void ss_plot_figure_legend(ss_plot *p, int on);

/* Write the figure to path: ".svg" (PLplot's svg driver) or ".png"
 * (pngcairo, 1 pixel per point), chosen by the extension; "-" is refused
 * (the format would be unknown). Atomic: the target holds its old contents
 * or the whole figure. SS_ERR_INVALID (other extension, a figure without
 * series), SS_ERR_UNSUPPORTED (the PLplot driver is missing: the message
 * names the Debian package), SS_ERR_IO. */
ss_status ss_plot_write(const ss_plot *p, const char *path, ss_diag *d);

/* Whether path names a plot file this module writes (ends in .svg or .png). */
int ss_plot_path_ok(const char *path);

#endif
