/*
 * test_plot.c — the command line's plotting module (cli/plot.h) without a
 * display: an SVG of two panels (log-2 x axis, lines with markers, a
 * frontier, a dashed reference, ticks, a step line) holds the title, the
 * subtitle, the axis labels, the tick labels of the log axis (256 ... 4096)
 * and every series name as text; a PNG starts with the PNG signature and is
 * not blank; writes are atomic (a failed write leaves the old file, no temp
 * files behind); the refusals (extension, empty figure, bad ranges, too many
 * panels) and out-of-memory on every allocation leave the figure usable.
 */
#include "testutil.h"
#include "cli/plot.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/ss_test_plot.%d", (int)getpid());
    mkdir(dir, 0700);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    DIR *dp = opendir(dir);
    struct dirent *e;
    char p[600];
    while (dp && (e = readdir(dp)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    if (dp)
        closedir(dp);
    rmdir(dir);
    return 0;
}

static char *slurp(const char *path, long *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = 0;
    fclose(f);
    if (len)
        *len = n;
    return b;
}

/* PLplot's svg driver writes text as character references (&#x47;): decode
 * those of ASCII characters and the named ones in place. */
static void decode_xml(char *s)
{
    char *w = s;
    while (*s) {
        unsigned v;
        int len = 0;
        if (sscanf(s, "&#x%x;%n", &v, &len) == 1 && len > 0 && v < 0x80) {
            *w++ = (char)v;
            s += len;
        } else if (!strncmp(s, "&amp;", 5)) {
            *w++ = '&';
            s += 5;
        } else if (!strncmp(s, "&lt;", 4)) {
            *w++ = '<';
            s += 4;
        } else {
            *w++ = *s++;
        }
    }
    *w = 0;
}

/* Files in dir whose name contains ".tmp." (left-over temp files). */
static int temps_left(void)
{
    DIR *dp = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (dp && (e = readdir(dp)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    if (dp)
        closedir(dp);
    return n;
}

static const double gpus[] = {256, 512, 1024, 2048, 4096};
static const double a100[] = {180, 350, 690, 1300, 2400};
static const double h100[] = {450, 880, 1700, 3200, 5900};

/* The figure the tests write: throughput against GPUs (log x) and cost
 * against days with a Pareto frontier. */
static ss_plot *figure(void)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_plot *p = ss_plot_new("GPT-3 175B: what if", "batch 1536, 300 B tokens\nbf16, 2 # 3");
    assert_non_null(p);
    ss_plot_axes ax = {0};
    ax.title = "Throughput";
    ax.xlabel = "GPUs";
    ax.ylabel = "samples/s";
    ax.logx = 1;
    ax.y_from_zero = 1;
    assert_int_equal(ss_plot_panel(p, &ax, &d), SS_OK);
    ss_plot_series s = {"A100-SXM4-80GB 200 Gb/s", gpus, a100, 5, SS_PLOT_LINE_MARKERS, 0, NULL};
    assert_int_equal(ss_plot_add(p, &s, &d), SS_OK);
    ss_plot_series t = {"H100-SXM 400 Gb/s", gpus, h100, 5, SS_PLOT_LINE_MARKERS, 0, NULL};
    assert_int_equal(ss_plot_add(p, &t, &d), SS_OK);
    double lin[5];
    for (int i = 0; i < 5; i++)
        lin[i] = a100[0] * gpus[i] / gpus[0];
    ss_plot_series u = {"linear scaling", gpus, lin, 5, SS_PLOT_DASHED, 0x777777, NULL};
    assert_int_equal(ss_plot_add(p, &u, &d), SS_OK);
    double ev[3] = {300, 700, 2000};
    ss_plot_series v = {"events", ev, NULL, 3, SS_PLOT_TICKS, 0xD55E00, NULL};
    assert_int_equal(ss_plot_add(p, &v, &d), SS_OK);

    ss_plot_axes bx = {0};
    bx.title = "Cost against time to train";
    bx.xlabel = "days";
    bx.ylabel = "cost (M USD)";
    bx.legend = SS_PLOT_LEGEND_TOP_RIGHT;
    assert_int_equal(ss_plot_panel(p, &bx, &d), SS_OK);
    double days[4] = {40, 22, 12, 9}, cost[4] = {4.1, 4.3, 4.9, 6.0};
    const char *lab[4] = {"256", NULL, "1024", "2048"};
    ss_plot_series w = {"all points", days, cost, 4, SS_PLOT_MARKERS, 0, NULL};
    assert_int_equal(ss_plot_add(p, &w, &d), SS_OK);
    ss_plot_series x = {"Pareto frontier", days, cost, 4, SS_PLOT_FRONTIER, 0, lab};
    assert_int_equal(ss_plot_add(p, &x, &d), SS_OK);
    double st[4] = {0, 10, 20, 30}, sv[4] = {3, 5, 4, 4};
    ss_plot_series y = {"step", st, sv, 4, SS_PLOT_STEP, 0, NULL};
    assert_int_equal(ss_plot_add(p, &y, &d), SS_OK);
    return p;
}

static void test_svg_has_text(void **state)
{
    (void)state;
    ss_plot *p = figure();
    char path[300];
    snprintf(path, sizeof path, "%s/f.svg", dir);
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_plot_write(p, path, &d), SS_OK);
    long n = 0;
    char *s = slurp(path, &n);
    assert_non_null(s);
    assert_true(n > 2000);
    assert_non_null(strstr(s, "<svg"));
    assert_non_null(strstr(s, "</svg>"));
    decode_xml(s);
    static const char *const want[] = {
        "GPT-3 175B: what if", "batch 1536, 300 B tokens", "bf16, 2 # 3", "Throughput", "GPUs",
        "samples/s", "256", "4096", "A100-SXM4-80GB 200 Gb/s", "H100-SXM 400 Gb/s",
        "linear scaling", "Pareto frontier", "all points", "cost (M USD)", "1024", "step"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(s, want[i]))
            fail_msg("the SVG lacks \"%s\"", want[i]);
    free(s);
    assert_int_equal(temps_left(), 0);
    ss_plot_free(p);
}

static void test_png(void **state)
{
    (void)state;
    ss_plot *p = figure();
    char path[300];
    snprintf(path, sizeof path, "%s/f.png", dir);
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_plot_write(p, path, &d), SS_OK);
    long n = 0;
    char *s = slurp(path, &n);
    assert_non_null(s);
    assert_true(n > 5000); /* a blank page compresses to ~3 KB */
    assert_memory_equal(s, "\x89PNG\r\n\x1a\n", 8);
    free(s);
    assert_int_equal(temps_left(), 0);
    ss_plot_free(p);
}

/* A write that fails (the target is a directory) leaves it alone; a good
 * write replaces the old contents whole. */
static void test_atomic(void **state)
{
    (void)state;
    ss_plot *p = figure();
    char path[300];
    snprintf(path, sizeof path, "%s/old.svg", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("old", f);
    fclose(f);
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_plot_write(p, path, &d), SS_OK);
    char *s = slurp(path, NULL);
    assert_non_null(strstr(s, "</svg>"));
    assert_null(strstr(s, "old<"));
    free(s);
    char sub[300];
    snprintf(sub, sizeof sub, "%s/sub.svg", dir);
    mkdir(sub, 0700);
    ss_diag_init(&d);
    assert_int_not_equal(ss_plot_write(p, sub, &d), SS_OK);
    assert_non_null(strstr(d.msg, "sub.svg"));
    rmdir(sub);
    assert_int_equal(temps_left(), 0);
    ss_plot_free(p);
}

static void test_refusals(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_plot *p = ss_plot_new("empty", NULL);
    char path[300];
    snprintf(path, sizeof path, "%s/e.svg", dir);
    assert_int_equal(ss_plot_write(p, path, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "no series"));
    assert_int_equal(access(path, F_OK), -1);
    ss_diag_init(&d);
    assert_int_equal(ss_plot_write(p, "x.pdf", &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, ".svg or .png"));
    assert_false(ss_plot_path_ok("-"));
    assert_false(ss_plot_path_ok(".svg"));
    assert_true(ss_plot_path_ok("a.png"));
    ss_plot_axes ax = {0};
    ax.x_fixed = 1, ax.xmin = 2, ax.xmax = 1;
    ss_diag_init(&d);
    assert_int_equal(ss_plot_panel(p, &ax, &d), SS_ERR_INVALID);
    ax.xmin = 0, ax.xmax = 8, ax.logx = 1;
    ss_diag_init(&d);
    assert_int_equal(ss_plot_panel(p, &ax, &d), SS_ERR_INVALID);
    ss_plot_axes ok = {0};
    for (int i = 0; i < SS_PLOT_MAX_PANELS; i++)
        assert_int_equal(ss_plot_panel(p, &ok, &d), SS_OK);
    ss_diag_init(&d);
    assert_int_equal(ss_plot_panel(p, &ok, &d), SS_ERR_INVALID);
    ss_plot_series s = {"x", NULL, NULL, 3, SS_PLOT_LINE, 0, NULL};
    ss_diag_init(&d);
    assert_int_equal(ss_plot_add(p, &s, &d), SS_ERR_INVALID);
    ss_plot_free(p);
    ss_plot_free(NULL);
}

/* Every allocation of building a figure may fail: the call reports
 * SS_ERR_NOMEM (or ss_plot_new NULL) and what was built stays consistent. */
static void test_nomem(void **state)
{
    (void)state;
    for (long k = 0; k < 200; k++) {
        ss_test_fail_after(k);
        ss_plot *p = ss_plot_new("t", "s");
        ss_diag d;
        ss_diag_init(&d);
        int done = 0;
        if (p) {
            const char *lab[2] = {"a", "b"};
            double x[2] = {1, 2}, y[2] = {3, 4};
            ss_plot_series s = {"n", x, y, 2, SS_PLOT_FRONTIER, 0, lab};
            ss_status st = ss_plot_add(p, &s, &d);
            ss_plot_axes ax = {0};
            ax.title = "second";
            if (st == SS_OK)
                st = ss_plot_panel(p, &ax, &d);
            if (st == SS_OK)
                st = ss_plot_add(p, &s, &d);
            assert_true(st == SS_OK || st == SS_ERR_NOMEM);
            done = st == SS_OK;
        }
        ss_test_fail_after(-1);
        ss_plot_free(p);
        if (done)
            break;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_svg_has_text), cmocka_unit_test(test_png),
        cmocka_unit_test(test_atomic),       cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_nomem),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
