/*
 * plot.c — figures through PLplot's C API (the rules in plot.h).
 *
 * The figure is kept as plain data (panels, series, copied points) until
 * ss_plot_write, which opens a fresh PLplot stream on the temp file of an
 * atomic output (core/outfile.h), draws every panel into its own viewport,
 * ends the stream and commits the file. Axes, ticks, tick labels, legends
 * and text are PLplot's (plbox, pllegend, plmtex, plptex); nothing is drawn
 * by hand but the tick marks of SS_PLOT_TICKS series.
 *
 * Invariant: a figure is never half-modified: every add builds its copies
 * first and links them in only when all allocations succeeded.
 */
#include "plot.h"

#include "core/outfile.h"

#include <errno.h>
#include <math.h>
#include <plplot/plplot.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct series {
    char *name;
    double *x, *y;
    char **labels; /* NULL or n entries (NULL entries: none) */
    int n;
    ss_plot_style style;
    unsigned color;
} series;

typedef struct panel {
    char *title, *xlabel, *ylabel;
    ss_plot_axes ax; /* its strings point at the copies above */
    series *s;
    int n, cap;
} panel;

struct ss_plot {
    char *title, *subtitle;
    int figure_legend; /* one legend under the titles instead of the panels' */
    panel panels[SS_PLOT_MAX_PANELS];
    int n_panels;
};

/* Okabe-Ito's colour-blind safe palette (yellow dropped: unreadable on white). */
static const unsigned palette[] = {0x0072B2, 0xD55E00, 0x009E73, 0xCC79A7,
                                   0xE69F00, 0x56B4E9, 0x555555, 0x000000};
#define N_PALETTE ((int)(sizeof palette / sizeof palette[0]))
/* Marker glyphs, one per series in turn (UTF-8; PLplot's unicode drivers). */
static const char *const markers[] = {"●", "■", "▲", "◆", "▼", "✚", "✖", "★"};
#define N_MARKERS ((int)(sizeof markers / sizeof markers[0]))
#define FRONTIER_MARK "○"
/* cmap0 entries: 0 background, 1 ink, then one per series of the figure. */
#define COL_BG 0
#define COL_INK 1
#define COL_GRID 2
#define COL_FIRST 3
/* Character scale of the figure (PLplot's default is large for a page of
 * this size). */
#define CH 0.72
/* Entries of one legend at most. */
#define LEGEND_MAX 64

/* ---- building the figure ---------------------------------------------------- */

static char *dup_or_null(const char *s, int *bad)
{
    if (!s)
        return NULL;
    char *c = ss_strdup(s);
    if (!c)
        *bad = 1;
    return c;
}

ss_plot *ss_plot_new(const char *title, const char *subtitle)
{
    ss_plot *p = ss_calloc(1, sizeof *p);
    if (!p)
        return NULL;
    int bad = 0;
    p->title = dup_or_null(title ? title : "", &bad);
    p->subtitle = dup_or_null(subtitle, &bad);
    if (bad) {
        ss_plot_free(p);
        return NULL;
    }
    return p;
}

static void series_clear(series *s)
{
    if (s->labels)
        for (int i = 0; i < s->n; i++)
            ss_free(s->labels[i]);
    ss_free(s->labels);
    ss_free(s->name);
    ss_free(s->x);
    ss_free(s->y);
}

void ss_plot_free(ss_plot *p)
{
    if (!p)
        return;
    for (int k = 0; k < p->n_panels; k++) {
        panel *pn = &p->panels[k];
        for (int i = 0; i < pn->n; i++)
            series_clear(&pn->s[i]);
        ss_free(pn->s);
        ss_free(pn->title);
        ss_free(pn->xlabel);
        ss_free(pn->ylabel);
    }
    ss_free(p->title);
    ss_free(p->subtitle);
    ss_free(p);
}

ss_status ss_plot_panel(ss_plot *p, const ss_plot_axes *axes, ss_diag *d)
{
    ss_plot_axes ax;
    if (axes)
        ax = *axes;
    else
        memset(&ax, 0, sizeof ax);
    if (p->n_panels >= SS_PLOT_MAX_PANELS)
        return ss_diag_set(d, SS_ERR_INVALID, "plot: more than %d panels in one figure",
                           SS_PLOT_MAX_PANELS);
    if (ax.x_fixed && (!(ax.xmin < ax.xmax) || (ax.logx && ax.xmin <= 0)))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "plot: x range [%g, %g]: expected min < max%s", ax.xmin, ax.xmax,
                           ax.logx ? " and min > 0 (log axis)" : "");
    if (ax.y_fixed && !(ax.ymin < ax.ymax))
        return ss_diag_set(d, SS_ERR_INVALID, "plot: y range [%g, %g]: expected min < max",
                           ax.ymin, ax.ymax);
    if ((unsigned)ax.legend > SS_PLOT_LEGEND_NONE)
        return ss_diag_set(d, SS_ERR_INVALID, "plot: unknown legend corner %d", (int)ax.legend);
    panel pn;
    memset(&pn, 0, sizeof pn);
    int bad = 0;
    pn.title = dup_or_null(ax.title, &bad);
    pn.xlabel = dup_or_null(ax.xlabel, &bad);
    pn.ylabel = dup_or_null(ax.ylabel, &bad);
    if (bad) {
        ss_free(pn.title);
        ss_free(pn.xlabel);
        ss_free(pn.ylabel);
        return ss_diag_set(d, SS_ERR_NOMEM, "plot: out of memory");
    }
    ax.title = pn.title;
    ax.xlabel = pn.xlabel;
    ax.ylabel = pn.ylabel;
    pn.ax = ax;
    p->panels[p->n_panels++] = pn;
    return SS_OK;
}

ss_status ss_plot_add(ss_plot *p, const ss_plot_series *s, ss_diag *d)
{
    if (s->n < 0 || (s->n > 0 && (!s->x || (!s->y && s->style != SS_PLOT_TICKS))))
        return ss_diag_set(d, SS_ERR_INVALID, "plot: series \"%s\": %d points without data",
                           s->name ? s->name : "", s->n);
    if ((unsigned)s->style > SS_PLOT_FRONTIER || s->color > 0xFFFFFF)
        return ss_diag_set(d, SS_ERR_INVALID, "plot: series \"%s\": bad style or colour",
                           s->name ? s->name : "");
    if (p->n_panels > 0 && p->panels[p->n_panels - 1].n >= SS_PLOT_MAX_SERIES)
        return ss_diag_set(d, SS_ERR_INVALID, "plot: more than %d series in one panel",
                           SS_PLOT_MAX_SERIES);
    int fresh = p->n_panels == 0;
    if (fresh) {
        ss_status st = ss_plot_panel(p, NULL, d);
        if (st != SS_OK)
            return st;
    }
    panel *pn = &p->panels[p->n_panels - 1];
    series c;
    memset(&c, 0, sizeof c);
    c.n = s->n;
    c.style = s->style;
    c.color = s->color;
    int bad = 0;
    c.name = dup_or_null(s->name && s->name[0] ? s->name : NULL, &bad);
    size_t bytes = (size_t)(s->n > 0 ? s->n : 1) * sizeof(double);
    c.x = ss_malloc(bytes);
    c.y = ss_malloc(bytes);
    if (!c.x || !c.y)
        bad = 1;
    if (!bad && s->labels) {
        c.labels = ss_calloc((size_t)(s->n > 0 ? s->n : 1), sizeof *c.labels);
        if (!c.labels)
            bad = 1;
        for (int i = 0; !bad && i < s->n; i++)
            c.labels[i] = dup_or_null(s->labels[i], &bad);
    }
    if (!bad && ss_grow((void **)&pn->s, &pn->cap, pn->n + 1, sizeof *pn->s))
        bad = 1;
    if (bad) {
        series_clear(&c);
        if (fresh) { /* the panel made for this series goes too */
            p->n_panels--;
            ss_free(pn->s);
        }
        return ss_diag_set(d, SS_ERR_NOMEM, "plot: out of memory");
    }
    for (int i = 0; i < s->n; i++) {
        c.x[i] = s->x[i];
        c.y[i] = s->style == SS_PLOT_TICKS ? 0 : s->y[i];
    }
    pn->s[pn->n++] = c;
    return SS_OK;
}

void ss_plot_figure_legend(ss_plot *p, int on)
{
    p->figure_legend = on != 0;
}

int ss_plot_path_ok(const char *path)
{
    size_t n = path ? strlen(path) : 0;
    return n > 4 && (!strcmp(path + n - 4, ".svg") || !strcmp(path + n - 4, ".png"));
}

/* ---- drawing ------------------------------------------------------------------ */

/* The first PLplot error of a write (plabort's message), or "". */
static char pl_error[256];

static void on_pl_abort(PLCHAR_VECTOR msg)
{
    if (!pl_error[0])
        snprintf(pl_error, sizeof pl_error, "%s", msg ? msg : "PLplot error");
}

/* Whether PLplot has the named output driver (plgDevs fills arrays the
 * caller provides; *n is their size on the way in). */
static int have_driver(const char *name)
{
    const char *menu[128], *names[128], **mp = menu, **np = names;
    int n = 128;
    plgDevs(&mp, &np, &n);
    for (int i = 0; i < n; i++)
        if (names[i] && !strcmp(names[i], name))
            return 1;
    return 0;
}

/* PLplot reads '#' as an escape: write it as "##". */
static void escape(const char *s, char *buf, size_t cap)
{
    size_t j = 0;
    for (; s && *s && j + 2 < cap; s++) {
        if (*s == '#')
            buf[j++] = '#';
        buf[j++] = *s;
    }
    buf[j] = 0;
}

static void set_color(int idx, unsigned rgb)
{
    plscol0(idx, (PLINT)(rgb >> 16 & 0xFF), (PLINT)(rgb >> 8 & 0xFF), (PLINT)(rgb & 0xFF));
}

/* World x of a data x (log2 on a log axis); non-finite when not plottable. */
static double wx(const panel *pn, double x)
{
    if (!pn->ax.logx)
        return x;
    return x > 0 ? log2(x) : NAN;
}

/* The panel's world window from its data and fixed ranges. */
static void window(const panel *pn, double *x0, double *x1, double *y0, double *y1)
{
    double xa = HUGE_VAL, xb = -HUGE_VAL, ya = HUGE_VAL, yb = -HUGE_VAL;
    for (int i = 0; i < pn->n; i++)
        for (int k = 0; k < pn->s[i].n; k++) {
            double x = wx(pn, pn->s[i].x[k]), y = pn->s[i].y[k];
            if (!isfinite(x) || !isfinite(y))
                continue;
            xa = fmin(xa, x), xb = fmax(xb, x);
            if (pn->s[i].style != SS_PLOT_TICKS)
                ya = fmin(ya, y), yb = fmax(yb, y);
        }
    if (xa > xb)
        xa = 0, xb = 1;
    if (ya > yb)
        ya = 0, yb = 1;
    if (pn->ax.y_from_zero && ya >= 0)
        ya = 0;
    double dx = xb - xa, dy = yb - ya;
    if (dx <= 0)
        dx = fabs(xa) > 0 ? fabs(xa) * 0.1 : 1;
    if (dy <= 0)
        dy = fabs(ya) > 0 ? fabs(ya) * 0.1 : 1;
    *x0 = xa - 0.05 * dx, *x1 = xb + 0.05 * dx;
    *y0 = pn->ax.y_from_zero && ya == 0 ? 0 : ya - 0.05 * dy;
    *y1 = yb + 0.08 * dy;
    if (pn->ax.x_fixed)
        *x0 = wx(pn, pn->ax.xmin), *x1 = wx(pn, pn->ax.xmax);
    if (pn->ax.y_fixed)
        *y0 = pn->ax.ymin, *y1 = pn->ax.ymax;
}

/* Tick labels of a log-2 axis: the value itself (256, 0.5, 4096). */
static void log2_label(PLINT axis, PLFLT value, PLCHAR_NC_VECTOR label, PLINT length,
                       PLPointer data)
{
    (void)data;
    if (axis == PL_X_AXIS)
        snprintf(label, (size_t)length, "%.4g", exp2(value));
    else
        snprintf(label, (size_t)length, "%.4g", value);
}

/* The finite, plottable points of s as world coordinates; returns the count. */
static int world_points(const panel *pn, const series *s, PLFLT *x, PLFLT *y)
{
    int m = 0;
    for (int k = 0; k < s->n; k++) {
        double a = wx(pn, s->x[k]), b = s->y[k];
        if (isfinite(a) && isfinite(b))
            x[m] = a, y[m] = b, m++;
    }
    return m;
}

static void draw_series(const panel *pn, const series *s, int col, int mark, double x0,
                        double x1, double y0, double y1, PLFLT *x, PLFLT *y)
{
    int m = world_points(pn, s, x, y);
    if (m == 0)
        return;
    plcol0(col);
    pllsty(1);
    plwidth(2);
    switch (s->style) {
    case SS_PLOT_LINE_MARKERS:
    case SS_PLOT_LINE:
        plline(m, x, y);
        if (s->style == SS_PLOT_LINE_MARKERS)
            plstring(m, x, y, markers[mark % N_MARKERS]);
        break;
    case SS_PLOT_MARKERS:
        plstring(m, x, y, markers[mark % N_MARKERS]);
        break;
    case SS_PLOT_DASHED:
        pllsty(2);
        plline(m, x, y);
        break;
    case SS_PLOT_STEP:
        for (int k = 0; k + 1 < m; k++) {
            PLFLT sx[3] = {x[k], x[k + 1], x[k + 1]}, sy[3] = {y[k], y[k], y[k + 1]};
            plline(3, sx, sy);
        }
        break;
    case SS_PLOT_TICKS:
        plwidth(1.5);
        for (int k = 0; k < m; k++)
            pljoin(x[k], y0, x[k], y0 + 0.04 * (y1 - y0));
        break;
    case SS_PLOT_FRONTIER:
        plwidth(3.5);
        pllsty(3);
        if (m > 1)
            plline(m, x, y);
        pllsty(1);
        plschr(0, CH * 1.6);
        plstring(m, x, y, FRONTIER_MARK);
        plschr(0, CH);
        break;
    }
    pllsty(1);
    plwidth(1);
    if (s->labels) {
        char buf[256];
        plschr(0, CH * 0.65);
        for (int k = 0; k < s->n; k++) {
            double a = wx(pn, s->x[k]), b = s->y[k];
            if (!s->labels[k] || !isfinite(a) || !isfinite(b))
                continue;
            escape(s->labels[k], buf, sizeof buf);
            plptex(a + 0.015 * (x1 - x0), b + 0.02 * (y1 - y0), 1, 0, 0, buf);
        }
        plschr(0, CH);
    }
}

/* A legend entry: a series, its cmap0 index and its marker number. */
typedef struct lentry {
    const series *s;
    int col, mark;
} lentry;

static int has_marker(const series *s)
{
    return s->style == SS_PLOT_LINE_MARKERS || s->style == SS_PLOT_MARKERS;
}

/* Draw the legend of entries e[0..n) at `position` (pllegend's flags) in
 * ncol columns, boxed or not. */
static void draw_legend(const lentry *e, int n, PLINT position, int ncol, int boxed)
{
    if (n == 0)
        return;
    PLINT opt[LEGEND_MAX], tcol[LEGEND_MAX], lcol[LEGEND_MAX], lsty[LEGEND_MAX],
        scol[LEGEND_MAX], snum[LEGEND_MAX];
    PLFLT lw[LEGEND_MAX], ssc[LEGEND_MAX];
    char names[LEGEND_MAX][128];
    const char *text[LEGEND_MAX], *sym[LEGEND_MAX];
    if (n > LEGEND_MAX)
        n = LEGEND_MAX;
    for (int k = 0; k < n; k++) {
        const series *s = e[k].s;
        escape(s->name, names[k], sizeof names[k]);
        text[k] = names[k];
        tcol[k] = COL_INK;
        opt[k] = 0;
        lcol[k] = scol[k] = e[k].col;
        lsty[k] = s->style == SS_PLOT_DASHED ? 2 : s->style == SS_PLOT_FRONTIER ? 3 : 1;
        lw[k] = s->style == SS_PLOT_FRONTIER ? 3.5 : 2;
        ssc[k] = s->style == SS_PLOT_FRONTIER ? 1.1 : 0.75;
        snum[k] = 1;
        sym[k] = s->style == SS_PLOT_FRONTIER ? FRONTIER_MARK : markers[e[k].mark % N_MARKERS];
        if (s->style != SS_PLOT_MARKERS)
            opt[k] |= PL_LEGEND_LINE;
        if (has_marker(s) || s->style == SS_PLOT_FRONTIER)
            opt[k] |= PL_LEGEND_SYMBOL;
    }
    PLFLT w, h;
    int rows = (n + ncol - 1) / ncol;
    plschr(0, CH * 0.8);
    pllegend(&w, &h,
             boxed ? PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX
                   : PL_LEGEND_BACKGROUND | (ncol > 1 ? PL_LEGEND_ROW_MAJOR : 0),
             position, 0.02, 0.02, 0.08, COL_BG, COL_INK, 1, rows, ncol, n, opt, 0.8, 0.62,
             2.0, 0, tcol, text, NULL, NULL, NULL, NULL, lcol, lsty, lw, scol, ssc, snum, sym);
    plschr(0, CH);
}

static void draw_panel(const panel *pn, int figure_legend, double vx0, double vx1, double vy0,
                       double vy1, int *next_col, PLFLT *bx, PLFLT *by)
{
    double x0, x1, y0, y1;
    window(pn, &x0, &x1, &y0, &y1);
    plvpor(vx0, vx1, vy0, vy1);
    plwind(x0, x1, y0, y1);
    plcol0(COL_GRID);
    plwidth(0.5);
    if (pn->ax.logx) {
        double span = x1 - x0;
        double step = span > 24 ? 4 : span > 12 ? 2 : 1;
        plslabelfunc(log2_label, NULL);
        plbox("g", step, 0, "g", 0, 0);
        plcol0(COL_INK);
        plwidth(1);
        plbox("bcnost", step, 0, "bcnstv", 0, 0);
        plslabelfunc(NULL, NULL);
    } else {
        plbox("g", 0, 0, "g", 0, 0);
        plcol0(COL_INK);
        plwidth(1);
        plbox("bcnst", 0, 0, "bcnstv", 0, 0);
    }
    char buf[512];
    if (pn->ax.xlabel) {
        escape(pn->ax.xlabel, buf, sizeof buf);
        plmtex("b", 3.0, 0.5, 0.5, buf);
    }
    if (pn->ax.ylabel) {
        escape(pn->ax.ylabel, buf, sizeof buf);
        plmtex("l", 5.0, 0.5, 0.5, buf);
    }
    if (pn->ax.title) {
        escape(pn->ax.title, buf, sizeof buf);
        plschr(0, CH * 1.1);
        plmtex("t", 1.2, 0.5, 0.5, buf);
        plschr(0, CH);
    }
    lentry e[SS_PLOT_MAX_SERIES];
    int ne = 0, mark = 0;
    for (int i = 0; i < pn->n; i++) {
        const series *s = &pn->s[i];
        int idx = COL_FIRST + (*next_col)++;
        set_color(idx, s->color ? s->color : palette[i % N_PALETTE]);
        draw_series(pn, s, idx, mark, x0, x1, y0, y1, bx, by);
        if (s->name)
            e[ne].s = s, e[ne].col = idx, e[ne++].mark = mark;
        mark += has_marker(s);
    }
    plcol0(COL_INK);
    static const PLINT corner[] = {
        PL_POSITION_TOP | PL_POSITION_LEFT, PL_POSITION_TOP | PL_POSITION_RIGHT,
        PL_POSITION_BOTTOM | PL_POSITION_LEFT, PL_POSITION_BOTTOM | PL_POSITION_RIGHT};
    if (!figure_legend && pn->ax.legend != SS_PLOT_LEGEND_NONE)
        draw_legend(e, ne, corner[pn->ax.legend] | PL_POSITION_INSIDE | PL_POSITION_VIEWPORT,
                    1, 1);
}

/* The figure legend's entries: every named series once (by name), its
 * colour and marker as its panel draws it; cmap0 indices from *next_col. */
static int figure_entries(const ss_plot *p, lentry *e, int *next_col)
{
    int n = 0;
    for (int k = 0; k < p->n_panels; k++) {
        const panel *pn = &p->panels[k];
        int mark = 0;
        for (int i = 0; i < pn->n; i++) {
            const series *s = &pn->s[i];
            int seen = !s->name;
            for (int j = 0; j < n && !seen; j++)
                seen = !strcmp(e[j].s->name, s->name);
            if (!seen && n < LEGEND_MAX) {
                int idx = COL_FIRST + (*next_col)++;
                set_color(idx, s->color ? s->color : palette[i % N_PALETTE]);
                e[n].s = s, e[n].col = idx, e[n++].mark = mark;
            }
            mark += has_marker(s);
        }
    }
    return n;
}

/* Columns of the figure legend, and its height (points) for n entries. */
static int legend_cols(int panel_cols)
{
    return panel_cols == 1 ? 2 : 3;
}

static double legend_band(int n, int panel_cols)
{
    int c = legend_cols(panel_cols);
    return 24.0 + 19.0 * ((n + c - 1) / c);
}

/* Page size in points (SVG) or pixels (PNG) for the figure. */
static void page_size(const ss_plot *p, int *cols, int *rows, int *w, int *h)
{
    int n = p->n_panels, named = 0;
    *cols = n <= 2 ? 1 : 2;
    *rows = (n + *cols - 1) / *cols;
    *w = *cols == 1 ? 960 : 1400;
    *h = 130 + *rows * 420;
    if (p->figure_legend) {
        for (int k = 0; k < n; k++)
            for (int i = 0; i < p->panels[k].n; i++)
                named += p->panels[k].s[i].name != NULL; /* an upper bound: names may repeat */
        *h += (int)legend_band(named < LEGEND_MAX ? named : LEGEND_MAX, *cols);
    }
}

static void draw(const ss_plot *p, int W, int H, int cols, int rows, PLFLT *bx, PLFLT *by)
{
    pladv(0);
    plvpor(0, 1, 0, 1);
    plwind(0, 1, 0, 1);
    char buf[512];
    plcol0(COL_INK);
    plschr(0, CH * (strlen(p->title) > 70 ? 1.15 : 1.5));
    escape(p->title, buf, sizeof buf);
    plptex(0.5, 1 - 34.0 / H, 1, 0, 0.5, buf);
    plschr(0, CH * 0.95);
    int line = 0;
    const char *s = p->subtitle;
    while (s && *s) {
        const char *e = strchr(s, '\n');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        char one[512];
        snprintf(one, sizeof one, "%.*s", (int)(len < 500 ? len : 500), s);
        escape(one, buf, sizeof buf);
        plptex(0.5, 1 - (66.0 + 22 * line) / H, 1, 0, 0.5, buf);
        line++;
        s = e ? e + 1 : NULL;
    }
    plschr(0, CH);
    double top = (60.0 + 22 * (line > 0 ? line : 1)) / H; /* page fraction the titles take */
    int next_col = 0;
    if (p->figure_legend) {
        lentry e[LEGEND_MAX];
        int n = figure_entries(p, e, &next_col), ncol = n < legend_cols(cols) ? n : legend_cols(cols);
        if (n > 0) {
            double band = legend_band(n, cols) / H;
            plvpor(0.02, 0.98, 1 - top - band, 1 - top);
            plwind(0, 1, 0, 1);
            draw_legend(e, n, PL_POSITION_TOP | PL_POSITION_INSIDE | PL_POSITION_VIEWPORT, ncol, 0);
            top += band;
        }
    }
    double cw = 1.0 / cols, ch = (1 - top) / rows;
    for (int k = 0; k < p->n_panels; k++) {
        int c = k % cols, r = k / cols;
        double cx0 = c * cw, cy1 = 1 - top - r * ch;
        double vx0 = cx0 + 110.0 / W, vx1 = cx0 + cw - 30.0 / W;
        double vy1 = cy1 - 45.0 / H, vy0 = cy1 - ch + 70.0 / H;
        draw_panel(&p->panels[k], p->figure_legend, vx0, vx1, vy0, vy1, &next_col, bx, by);
    }
}

ss_status ss_plot_write(const ss_plot *p, const char *path, ss_diag *d)
{
    if (!ss_plot_path_ok(path))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "plot: %s: expected a file name ending in .svg or .png",
                           path ? path : "(none)");
    int total = 0, maxn = 1;
    for (int k = 0; k < p->n_panels; k++)
        for (int i = 0; i < p->panels[k].n; i++) {
            total++;
            if (p->panels[k].s[i].n > maxn)
                maxn = p->panels[k].s[i].n;
        }
    if (total == 0)
        return ss_diag_set(d, SS_ERR_INVALID, "plot: %s: the figure has no series", path);
    int png = !strcmp(path + strlen(path) - 4, ".png");
    const char *dev = png ? "pngcairo" : "svg";
    if (!have_driver(dev))
        return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                           "plot: %s: PLplot has no %s driver (install the Debian package %s)",
                           path, dev, png ? "plplot-driver-cairo" : "libplplot17");
    PLFLT *bx = ss_malloc((size_t)maxn * sizeof *bx), *by = ss_malloc((size_t)maxn * sizeof *by);
    if (!bx || !by) {
        ss_free(bx);
        ss_free(by);
        return ss_diag_set(d, SS_ERR_NOMEM, "plot: out of memory");
    }
    ss_output *o = NULL;
    FILE *f = NULL;
    ss_status st = ss_output_open(path, &o, &f, d);
    if (st != SS_OK) {
        ss_free(bx);
        ss_free(by);
        return st;
    }
    /* PLplot closes the stream it draws to (plend1): give it its own on a
     * duplicate of the temp file's descriptor, which shares the offset. */
    int fd = fflush(f) == 0 ? dup(fileno(f)) : -1;
    FILE *pf = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!pf) {
        if (fd >= 0)
            close(fd);
        ss_output_abort(o);
        ss_free(bx);
        ss_free(by);
        return ss_diag_set(d, SS_ERR_IO, "plot: %s: %s", path, strerror(errno));
    }
    int cols, rows, W, H;
    page_size(p, &cols, &rows, &W, &H);
    PLINT old = 0, strm = 0;
    plgstrm(&old);
    plmkstrm(&strm);
    pl_error[0] = 0;
    plsabort(on_pl_abort);
    plsdev(dev);
    plsfile(pf);
    plspage(0, 0, W, H, 0, 0);
    plscmap0n(COL_FIRST + total + LEGEND_MAX);
    set_color(COL_BG, 0xFFFFFF);
    set_color(COL_INK, 0x000000);
    set_color(COL_GRID, 0xDDDDDD);
    plinit();
    draw(p, W, H, cols, rows, bx, by);
    plend1(); /* flushes and closes pf */
    plsstrm(old);
    plsabort(NULL);
    ss_free(bx);
    ss_free(by);
    if (pl_error[0]) {
        ss_output_abort(o);
        return ss_diag_set(d, SS_ERR_IO, "plot: %s: PLplot: %s", path, pl_error);
    }
    return ss_output_commit(o, d);
}
