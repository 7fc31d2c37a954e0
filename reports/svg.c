/* svg.c — see svg.h. */
#include "svg.h"

#include <math.h>
#include <string.h>

#define MARGIN_L 64
#define MARGIN_R 190
#define MARGIN_T 12
#define MARGIN_B 40
#define MARKERS_UP_TO 40

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                      "#9467bd", "#8c564b", "#e377c2", "#17becf"};

struct frame {
    double x0, x1, y0, y1; /* data range (y in log10 when log) */
    int log_y;
    int w, h;              /* plot area */
};

static void text_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

static double px(const struct frame *fr, double x)
{
    return MARGIN_L + (fr->x1 > fr->x0 ? (x - fr->x0) / (fr->x1 - fr->x0) : 0.5) * fr->w;
}

/* y in data units; values off the range are clamped to the edges. */
static double py(const struct frame *fr, double y)
{
    double v = fr->log_y ? (y > 0 ? log10(y) : fr->y0) : y;
    double t = fr->y1 > fr->y0 ? (v - fr->y0) / (fr->y1 - fr->y0) : 0.5;
    if (t < 0)
        t = 0;
    if (t > 1)
        t = 1;
    return MARGIN_T + (1.0 - t) * fr->h;
}

/* A "nice" tick step (1, 2 or 5 times a power of ten) for about `target` ticks over `span`. */
static double nice_step(double span, int target)
{
    double raw = span / target;
    double p = pow(10.0, floor(log10(raw)));
    double m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void set_range(struct frame *fr, const struct mc_svg_plot *plot, const struct mc_svg_series *s, int n)
{
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < s[i].n; k++) {
            double x = s[i].x[k], y = s[i].y[k];
            if (isfinite(x)) {
                xmin = x < xmin ? x : xmin;
                xmax = x > xmax ? x : xmax;
            }
            if (isfinite(y) && (!plot->log_y || y > 0)) {
                ymin = y < ymin ? y : ymin;
                ymax = y > ymax ? y : ymax;
            }
        }
    if (!(xmin <= xmax))
        xmin = 0, xmax = 1;
    if (xmax == xmin)
        xmin -= 1, xmax += 1;
    if (plot->threshold > 0) {
        ymax = plot->threshold > ymax ? plot->threshold : ymax;
        ymin = plot->threshold < ymin ? plot->threshold : ymin;
    }
    fr->x0 = xmin;
    fr->x1 = xmax;
    if (plot->log_y) {
        if (!(ymin <= ymax))
            ymin = 1e-3, ymax = 1;
        fr->y0 = floor(log10(ymin));
        fr->y1 = ceil(log10(ymax));
        if (fr->y1 - fr->y0 < 1)
            fr->y1 = fr->y0 + 1;
        if (fr->y1 - fr->y0 > 12) /* keep the top twelve decades: smaller errors sit on the bottom edge */
            fr->y0 = fr->y1 - 12;
    } else {
        if (!(ymin <= ymax))
            ymin = 0, ymax = 1;
        fr->y0 = ymin < 0 ? ymin : 0;
        fr->y1 = ymax > fr->y0 ? ymax * 1.05 : fr->y0 + 1;
    }
}

static void axes(FILE *f, const struct frame *fr, const struct mc_svg_plot *plot)
{
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fff\" stroke=\"#888\"/>\n", MARGIN_L,
            MARGIN_T, fr->w, fr->h);
    double step = nice_step(fr->x1 - fr->x0, 6);
    for (double x = ceil(fr->x0 / step) * step; x <= fr->x1 + step * 1e-9; x += step) {
        double X = px(fr, x);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eee\"/>", X, MARGIN_T, X,
                MARGIN_T + fr->h);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%g</text>\n", X,
                MARGIN_T + fr->h + 14, x);
    }
    if (fr->log_y) {
        int every = (int)((fr->y1 - fr->y0) / 6) + 1;
        for (int d = (int)fr->y0; d <= (int)fr->y1; d += every) {
            double Y = py(fr, pow(10.0, d));
            fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>", MARGIN_L, Y,
                    MARGIN_L + fr->w, Y);
            fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">1e%d</text>\n", MARGIN_L - 4,
                    Y + 4, d);
        }
    } else {
        double ys = nice_step(fr->y1 - fr->y0, 5);
        for (double y = ceil(fr->y0 / ys) * ys; y <= fr->y1; y += ys) {
            double Y = py(fr, y);
            fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>", MARGIN_L, Y,
                    MARGIN_L + fr->w, Y);
            fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%g</text>\n", MARGIN_L - 4,
                    Y + 4, y);
        }
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">", MARGIN_L + fr->w / 2,
            MARGIN_T + fr->h + 32);
    text_escaped(f, plot->x_label ? plot->x_label : "");
    fprintf(f, "</text>\n<text x=\"14\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 14 %d)\">",
            MARGIN_T + fr->h / 2, MARGIN_T + fr->h / 2);
    text_escaped(f, plot->y_label ? plot->y_label : "");
    fputs("</text>\n", f);
    if (plot->threshold > 0) {
        double Y = py(fr, plot->threshold);
        fprintf(f, "<line class=\"threshold\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000\" "
                   "stroke-dasharray=\"6 4\"/>",
                MARGIN_L, Y, MARGIN_L + fr->w, Y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\">", MARGIN_L + fr->w + 4, Y + 4);
        text_escaped(f, plot->threshold_label ? plot->threshold_label : "");
        fputs("</text>\n", f);
    }
}

int mc_svg_write(FILE *f, const struct mc_svg_plot *plot, const struct mc_svg_series *series, int n_series)
{
    int W = plot->width > 0 ? plot->width : 760, H = plot->height > 0 ? plot->height : 260;
    if (H < MARGIN_T + 44 + 16 * n_series + MARGIN_B) /* every legend entry beside the plot area */
        H = MARGIN_T + 44 + 16 * n_series + MARGIN_B;
    struct frame fr = {.log_y = plot->log_y, .w = W - MARGIN_L - MARGIN_R, .h = H - MARGIN_T - MARGIN_B};
    set_range(&fr, plot, series, n_series);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\">\n",
            W, H, W, H);
    axes(f, &fr, plot);
    int drawn = 0;
    for (int i = 0; i < n_series; i++) {
        const struct mc_svg_series *s = &series[i];
        int ci = s->color > 0 ? s->color - 1 : i;
        const char *color = palette[ci % (int)(sizeof palette / sizeof palette[0])];
        fprintf(f, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s points=\"",
                s->baseline ? "baseline" : "series", color, s->baseline ? "1.2" : "1.5",
                s->baseline ? " stroke-dasharray=\"4 3\" stroke-opacity=\"0.8\"" : "");
        for (int k = 0; k < s->n; k++) {
            double y = isfinite(s->y[k]) ? s->y[k] : INFINITY;
            fprintf(f, "%s%.1f,%.1f", k ? " " : "", px(&fr, s->x[k]), py(&fr, y == INFINITY ? pow(10.0, 300) : y));
        }
        fputs("\"/>\n", f);
        drawn++;
        for (int k = 0; k < s->n; k++) {
            double X = px(&fr, s->x[k]);
            if (!isfinite(s->y[k])) {
                double Y = MARGIN_T;
                fprintf(f, "<path class=\"nonfinite\" d=\"M%.1f %.1fl6 6m0 -6l-6 6\" stroke=\"#d00\" "
                           "stroke-width=\"2\" transform=\"translate(-3 -3)\"/>",
                        X, Y);
            } else if (s->n <= MARKERS_UP_TO && !s->baseline) {
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>", X, py(&fr, s->y[k]), color);
            }
        }
        if (s->baseline) /* the legend's sample dashed too */
            fprintf(f, "\n<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"1.5\" "
                       "stroke-dasharray=\"4 3\"/>",
                    MARGIN_L + fr.w + 8, MARGIN_T + 37 + 16 * i, MARGIN_L + fr.w + 20, MARGIN_T + 37 + 16 * i, color);
        else
            fprintf(f, "\n<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"3\" fill=\"%s\"/>", MARGIN_L + fr.w + 8,
                    MARGIN_T + 36 + 16 * i, color);
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\">", MARGIN_L + fr.w + 24, MARGIN_T + 40 + 16 * i);
        text_escaped(f, s->label ? s->label : "");
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
    return drawn;
}
