/*
 * cmd_history.c — `mixcheck history DIR [-k PATTERN]... [--threshold R] [--all]`: the trend of each
 * tensor record (case/scenario/backend/dtype/tensor) over the runs of a history store (history.h,
 * `run --record DIR`), oldest first, and the steps in it: a change between consecutive runs larger
 * than the run-to-run spread, named with the build of the first run that shows it. A build is what was
 * tested: mixcheck's commit and the SHA-256 of every plugin and Python spec file of the run
 * (reportread.h), so a port rebuilt under one mixcheck commit is a build of its own. The spread of a
 * record is the largest change between consecutive runs of one build (what repeating a run moves);
 * a step has to exceed both it and R (default 1.1). Changes are the ratios of the baseline rule
 * (baseline.h: headroom and max abs error, floored at 1e-3 of the tolerance). Exit 0 no step, 1 a step,
 * 2 usage or input error (also: a folder without runs, no record, a -k pattern that matches none).
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
            "runs of one build), with the build of the first run that shows it. A build is mixcheck's\n"
            "commit and the SHA-256 of every plugin and Python spec file the run loaded.\n"
            "\n"
            "  -k PATTERN      only records whose case/scenario/backend/dtype/tensor contains PATTERN (a\n"
            "                  glob when it holds * ? or [); repeatable. Matched records are all printed\n"
            "  --threshold R   the smallest change that counts as a step, R > 1 (default %.1f)\n"
            "  --all           print every record's trend (default: only those with a step, or matched by -k)\n"
            "\n"
            "exit: 0 no step, 1 a step, 2 usage or input error (DIR holds no run, no record to follow,\n"
            "a -k pattern matching no record)\n",
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

/* 1 when two runs are of one build: the same known mixcheck commit and the same plugin and Python spec
 * files (by SHA-256). */
static int same_build(const struct mc_report_doc *a, const struct mc_report_doc *b)
{
    return strcmp(a->git_commit, "unknown") != 0 && strcmp(a->git_commit, b->git_commit) == 0 &&
           strcmp(a->tested_key, b->tested_key) == 0;
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
        if (same_build(&h->runs[pts[i - 1].run], &h->runs[pts[i].run])) {
            double c = change(pts[i - 1].r, pts[i].r, &ratio);
            if (c > spread)
                spread = c;
        }
    double limit = log(threshold) > spread ? log(threshold) : spread;
    int steps = 0;
    for (int i = 1; i < n; i++)
        steps += change(pts[i - 1].r, pts[i].r, &ratio) > limit && !same_build(&h->runs[pts[i - 1].run], &h->runs[pts[i].run]);
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
    printf(" (min %.3g, max %.3g); spread between runs of one build x%.3g\n", lo, hi, exp(spread));
    for (int i = 1; i < n; i++) {
        const struct mc_report_doc *a = &h->runs[pts[i - 1].run], *b = &h->runs[pts[i].run];
        if (!(change(pts[i - 1].r, pts[i].r, &ratio) > limit) || same_build(a, b))
            continue;
        printf("  STEP x%.3g: headroom %.3g -> %.3g, max abs err %.3g -> %.3g, from run %d: commit %.12s (%s) %s",
               ratio, pts[i - 1].r->headroom, pts[i].r->headroom, pts[i - 1].r->max_abs_err, pts[i].r->max_abs_err,
               pts[i].run + 1, b->git_commit, b->git_describe, b->started_utc);
        if (strcmp(a->tested_key, b->tested_key) != 0)
            printf("; tested files changed: %s -> %s", a->tested[0] ? a->tested : "none",
                   b->tested[0] ? b->tested : "none");
        printf("\n");
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
    if (h.n_runs == 0) {
        fprintf(stderr, "mixcheck: history: %s holds no run (*.json): record runs into it with mixcheck run --record "
                        "%s\n", dir, dir);
        mc_history_free(&h);
        return 2;
    }
    int hits[MC_RUN_MAX_PATTERNS] = {0};
    /* every key of every run, once */
    int n_keys = 0, cap = 0;
    const char **keys = NULL;
    for (int i = 0; i < h.n_runs; i++)
        for (int k = 0; k < h.runs[i].n_records; k++) {
            const struct mc_report_record *r = &h.runs[i].records[k];
            if (!r->has_numbers)
                continue;
            int hit = n_patterns == 0;
            for (int p = 0; p < n_patterns; p++)
                if (mc_run_pattern_match(patterns[p], r->key)) {
                    hits[p]++;
                    hit = 1;
                }
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
    int bad = 0;
    for (int p = 0; p < n_patterns; p++)
        if (hits[p] == 0) {
            fprintf(stderr, "mixcheck: history: -k '%s' matched no record of the %d run(s) in %s\n", patterns[p],
                    h.n_runs, dir);
            bad = 1;
        }
    if (!bad && n_unique == 0) {
        fprintf(stderr, "mixcheck: history: the %d run(s) in %s hold no tensor record to follow\n", h.n_runs, dir);
        bad = 1;
    }
    if (bad) {
        free(keys);
        mc_history_free(&h);
        return 2;
    }
    int n_commits = 0, n_builds = 0;
    for (int i = 0; i < h.n_runs; i++) {
        int seen = 0, seen_build = 0;
        for (int j = 0; j < i; j++) {
            seen |= strcmp(h.runs[j].git_commit, h.runs[i].git_commit) == 0;
            seen_build |= strcmp(h.runs[j].git_commit, h.runs[i].git_commit) == 0 &&
                          strcmp(h.runs[j].tested_key, h.runs[i].tested_key) == 0;
        }
        n_commits += !seen;
        n_builds += !seen_build;
    }
    printf("history %s: %d run(s) of %d commit(s) and %d build(s), %d record(s)%s; a step is a change beyond x%g "
           "and the spread between runs of one build (a mixcheck commit and the SHA-256 of each plugin and Python "
           "spec file)\n\n",
           dir, h.n_runs, n_commits, n_builds, n_unique, n_patterns ? " matching -k" : "", threshold);
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
