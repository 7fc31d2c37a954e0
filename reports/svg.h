/*
 * svg.h — line plots as inline SVG for the HTML report (html.c): series of (x, y) points on a linear
 * x axis and a linear or log10 y axis, with axes, ticks, a legend and an optional horizontal
 * threshold line. Every series is one <polyline class="series"> (its points also drawn as circles when
 * there are few of them), or, for the curve of a baseline, one dashed <polyline class="baseline"> in
 * the colour of the series it goes with; a non-finite y is drawn as a cross on the top edge (class
 * "nonfinite").
 * Output is plain text that depends only on the input (fixed number formats).
 */
#ifndef MC_REPORT_SVG_H
#define MC_REPORT_SVG_H

#include <stdio.h>

struct mc_svg_series {
    const char *label;
    const double *x, *y;
    int n;
    int baseline; /* 1: a baseline's curve (dashed, class "baseline", no markers) */
    int color;    /* 1 + an index into the palette; 0 = the series' own index */
};

struct mc_svg_plot {
    const char *x_label, *y_label;
    double threshold;      /* drawn as a dashed line when > 0 (e.g. 1 = the tolerance) */
    const char *threshold_label;
    int log_y;             /* log10 y axis: values <= 0 sit on the bottom edge */
    int width, height;     /* pixels; 0 = 760 x 260 */
};

/* Writes one <svg> element (taller than plot->height when the legend needs it); returns the number of
 * polylines drawn. */
int mc_svg_write(FILE *f, const struct mc_svg_plot *plot, const struct mc_svg_series *series, int n_series);

#endif
