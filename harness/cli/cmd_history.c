/*
 * cmd_history.c — `mixcheck history DIR [-k PATTERN]... [--threshold R] [--all]`: the trend of each
 * tensor record (case/scenario/backend/dtype/tensor) over the runs of a history store (history.h,
 * `run --record DIR`), oldest first, and the steps in it: a change between consecutive runs larger
 * than the run-to-run spread, named with the commit of the first run that shows it. The spread of a
 * record is the largest change between consecutive runs of one commit (what repeating a run moves);
 * a step has to exceed both it and R (default 1.1). Changes are the ratios of the baseline rule
 * (baseline.h: headroom and max abs error, floored at 1e-3 of the tolerance). Exit 0 no step, 1 a step,
 * 2 usage or input error.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/baseline.h"
#include "cli.h"
#include "run/history.h"
#include "run/runner.h"

#define MC_HISTORY_DEFAULT_THRESHOLD 1.1
#define MC_HISTORY_TREND_SHOWN 12

static void usage(FILE *out)
{
    fprintf(out,
            "usage: mixcheck history DIR [-k PATTERN]... [--threshold R] [--all]\n"
            "The trend of every tensor record over the runs recorded in DIR (mixcheck run --record DIR),\n"
            "oldest first, and its steps: a change of headroom or max abs error between consecutive runs\n"
            "beyond both R and the record's run-to-run spread (the largest change between consecutive\n"
            "runs of one commit), with the commit of the first run that shows it.\n"
            "\n"
            "  -k PATTERN      only records whose case/scenario/backend/dtype/tensor contains PATTERN (a\n"
            "                  glob when it holds * ? or [); repeatable. Matched records are all printed\n"
            "  --threshold R   the smallest change that counts as a step, R > 1 (default %.1f)\n"
            "  --all           print every record's trend (default: only those with a step, or matched by -k)\n"
            "\n"
            "exit: 0 no step, 1 a step, 2 usage or input error\n",
            MC_HISTORY_DEFAULT_THRESHOLD);
}

struct point {
    int run;
    const struct mc_report_record *r;
};

/* The change from a to b as |log ratio| (the larger of headroom and max abs error), with its ratio. */
static double change(const struct mc_report_record *a, const struct mc_report_record *b, double *ratio)
{
    double rh, ra;
    mc_drift_ratios(b->headroom, a->headroom, b->max_abs_err, a->max_abs_err, b->atol, &rh, &ra);
    double lh = fabs(log(rh)), la = fabs(log(ra));
    *ratio = lh >= la ? rh : ra;
    return lh >= la ? lh : la;
}

static int same_commit(const struct mc_report_doc *a, const struct mc_report_doc *b)
{
    return strcmp(a->git_commit, "unknown") != 0 && strcmp(a->git_commit, b->git_commit) == 0;
}

static void print_value(double v)
{
    if (isfinite(v))
        printf(" %.3g", v);
    else
        printf(" inf");
}

/* One record's series; returns its steps (printed when there are any or `show`). */
static int series(const struct mc_history *h, const char *key, struct point *pts, int n, double threshold, int show)
{
    double spread = 0.0, ratio;
    for (int i = 1; i < n; i++)
        if (same_commit(&h->runs[pts[i - 1].run], &h->runs[pts[i].run])) {
            double c = change(pts[i - 1].r, pts[i].r, &ratio);
            if (c > spread)
                spread = c;
        }
    double limit = log(threshold) > spread ? log(threshold) : spread;
    int steps = 0;
    for (int i = 1; i < n; i++)
        steps += change(pts[i - 1].r, pts[i].r, &ratio) > limit && !same_commit(&h->runs[pts[i - 1].run], &h->runs[pts[i].run]);
    if (!steps && !show)
        return 0;
    double lo = INFINITY, hi = 0.0;
    for (int i = 0; i < n; i++) {
        lo = pts[i].r->headroom < lo ? pts[i].r->headroom : lo;
        hi = pts[i].r->headroom > hi ? pts[i].r->headroom : hi;
    }
    printf("%s\n  %d run(s), headroom", key, n);
    int from = n > MC_HISTORY_TREND_SHOWN ? n - MC_HISTORY_TREND_SHOWN : 0;
    if (from)
        printf(" ...");
    for (int i = from; i < n; i++)
        print_value(pts[i].r->headroom);
    printf(" (min %.3g, max %.3g); spread between runs of one commit x%.3g\n", lo, hi, exp(spread));
    for (int i = 1; i < n; i++) {
        const struct mc_report_doc *a = &h->runs[pts[i - 1].run], *b = &h->runs[pts[i].run];
        if (!(change(pts[i - 1].r, pts[i].r, &ratio) > limit) || same_commit(a, b))
            continue;
        printf("  STEP x%.3g: headroom %.3g -> %.3g, max abs err %.3g -> %.3g, from run %d: commit %.12s (%s) %s\n",
               ratio, pts[i - 1].r->headroom, pts[i].r->headroom, pts[i - 1].r->max_abs_err, pts[i].r->max_abs_err,
               pts[i].run + 1, b->git_commit, b->git_describe, b->started_utc);
    }
    return steps;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int mc_cmd_history(int argc, char **argv)
{
    static const struct option longopts[] = {{"threshold", required_argument, NULL, 't'},
                                             {"all", no_argument, NULL, 'a'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *patterns[MC_RUN_MAX_PATTERNS];
    int n_patterns = 0, all = 0, c;
    double threshold = MC_HISTORY_DEFAULT_THRESHOLD;
    opterr = 0;
    optind = 2;
    while ((c = getopt_long(argc, argv, "k:h", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'k':
            if (n_patterns >= MC_RUN_MAX_PATTERNS) {
                fprintf(stderr, "mixcheck: history: -k: at most %d patterns\n", MC_RUN_MAX_PATTERNS);
                return 2;
            }
            patterns[n_patterns++] = optarg;
            break;
        case 't':
            threshold = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(threshold > 1.0) || !(threshold < 1e300)) {
                fprintf(stderr, "mixcheck: history: --threshold: expected a ratio greater than 1 (got '%s')\n", optarg);
                return 2;
            }
            break;
        case 'a':
            all = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            fprintf(stderr, "mixcheck: history: unknown or incomplete option '%s' (see mixcheck history --help)\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (argc - optind != 1) {
        usage(stderr);
        return 2;
    }
    const char *dir = argv[optind];
    struct mc_history h;
    struct mc_error err = {0};
    if (mc_history_load(dir, &h, &err) != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck: history: %s\n", err.msg);
        return mc_error_exit_code(err.code);
    }
    /* every key of every run, once */
    int n_keys = 0, cap = 0;
    const char **keys = NULL;
    for (int i = 0; i < h.n_runs; i++)
        for (int k = 0; k < h.runs[i].n_records; k++) {
            const struct mc_report_record *r = &h.runs[i].records[k];
            if (!r->has_numbers)
                continue;
            int hit = n_patterns == 0;
            for (int p = 0; p < n_patterns && !hit; p++)
                hit = mc_run_pattern_match(patterns[p], r->key);
            if (!hit)
                continue;
            if (n_keys == cap) {
                cap = cap ? 2 * cap : 256;
                const char **v = realloc(keys, (size_t)cap * sizeof *v);
                if (v == NULL) {
                    fprintf(stderr, "mixcheck: out of memory\n");
                    free(keys);
                    mc_history_free(&h);
                    return 2;
                }
                keys = v;
            }
            keys[n_keys++] = r->key;
        }
    if (n_keys > 1)
        qsort(keys, (size_t)n_keys, sizeof *keys, cmp_str);
    int n_unique = 0;
    for (int i = 0; i < n_keys; i++)
        if (i == 0 || strcmp(keys[i], keys[i - 1]) != 0)
            keys[n_unique++] = keys[i];
    int n_commits = 0;
    for (int i = 0; i < h.n_runs; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = strcmp(h.runs[j].git_commit, h.runs[i].git_commit) == 0;
        n_commits += !seen;
    }
    printf("history %s: %d run(s) of %d commit(s), %d record(s)%s; a step is a change beyond x%g and the "
           "spread between runs of one commit\n\n",
           dir, h.n_runs, n_commits, n_unique, n_patterns ? " matching -k" : "", threshold);
    struct point *pts = malloc(((size_t)h.n_runs + 1) * sizeof *pts);
    int steps = 0, stepped = 0;
    for (int k = 0; k < n_unique && pts != NULL; k++) {
        int n = 0;
        for (int i = 0; i < h.n_runs; i++) {
            const struct mc_report_record *r = mc_report_find(&h.runs[i], keys[k]);
            if (r && r->has_numbers)
                pts[n++] = (struct point){i, r};
        }
        int s = series(&h, keys[k], pts, n, threshold, all || n_patterns > 0);
        steps += s;
        stepped += s > 0;
    }
    printf("%s%d step(s) in %d of %d record(s)\n", n_unique ? "\n" : "", steps, stepped, n_unique);
    free(pts);
    free(keys);
    mc_history_free(&h);
    return steps ? 1 : 0;
}
