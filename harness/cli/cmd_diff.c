/*
 * cmd_diff.c — `mixcheck diff A.json B.json`: the tensor records of two JSON reports whose numbers
 * moved, most first. Records are matched by case/scenario/backend/dtype/tensor; the ratios are B over
 * A with the floor of the baseline rule (baseline.h). Exit 0 nothing moved beyond the threshold, 1
 * something did, 2 usage or input error (a report that does not parse names file:line:column; two
 * reports with no record in common).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/baseline.h"
#include "cli.h"
#include "run/reportread.h"
#include "writer.h"

#define MC_DIFF_DEFAULT_THRESHOLD 1.1

static void usage(FILE *out)
{
    fprintf(out,
            "usage: mixcheck diff A.json B.json [--threshold R] [--json FILE]\n"
            "Compares two JSON reports of `mixcheck run` record by record (case/scenario/backend/dtype/\n"
            "tensor) and lists the records whose numbers moved from A to B, most first: sorted by the\n"
            "larger of the headroom ratio and the max abs error ratio (B/A), then by the headroom ratio,\n"
            "then by the max abs error ratio. An A value of 0 counts as 1e-3 of the tolerance (as with\n"
            "run --baseline). A record moved when a ratio is above R or below 1/R, or its status changed.\n"
            "Records in one report only are listed and move nothing.\n"
            "\n"
            "  --threshold R   the ratio that counts as moved, R > 1 (default %.1f)\n"
            "  --json FILE     also write the moved records as JSON (format \"mixcheck-diff\")\n"
            "\n"
            "exit: 0 nothing moved beyond the threshold, 1 something did, 2 usage or input error (also:\n"
            "no record in common)\n",
            MC_DIFF_DEFAULT_THRESHOLD);
}

struct row {
    const struct mc_report_record *a, *b;
    double headroom_ratio, abs_ratio, ratio;
    int status_changed;
    int moved;
};

static int cmp_row(const void *x, const void *y)
{
    const struct row *p = x, *q = y;
    if (p->ratio != q->ratio)
        return p->ratio < q->ratio ? 1 : -1;
    if (p->headroom_ratio != q->headroom_ratio)
        return p->headroom_ratio < q->headroom_ratio ? 1 : -1;
    if (p->abs_ratio != q->abs_ratio)
        return p->abs_ratio < q->abs_ratio ? 1 : -1;
    return strcmp(p->b->key, q->b->key);
}

/* Statuses compared, with "drift" read as the pass it is against its own tolerance (it names a third
 * report, the baseline of that run). */
static int same_status(const char *a, const char *b)
{
    if (strcmp(a, "drift") == 0)
        a = "pass";
    if (strcmp(b, "drift") == 0)
        b = "pass";
    return strcmp(a, b) == 0;
}

static int beyond(double r, double threshold)
{
    return r > threshold || r < 1.0 / threshold;
}

static void json_row(struct mc_writer *w, const struct row *r)
{
    const struct mc_report_record *a = r->a, *b = r->b;
    fputs("{\"case\": ", w->f);
    mc_writer_json_string(w, b->case_id);
    fputs(", \"scenario\": ", w->f);
    mc_writer_json_string(w, b->scenario);
    fputs(", \"backend\": ", w->f);
    mc_writer_json_string(w, b->backend);
    fputs(", \"dtype\": ", w->f);
    mc_writer_json_string(w, b->dtype);
    fputs(", \"tensor\": ", w->f);
    mc_writer_json_string(w, b->tensor);
    fputs(", \"status_a\": ", w->f);
    mc_writer_json_string(w, a->status);
    fputs(", \"status_b\": ", w->f);
    mc_writer_json_string(w, b->status);
    const double nums[] = {r->ratio, r->headroom_ratio, a->headroom, b->headroom, r->abs_ratio, a->max_abs_err,
                           b->max_abs_err};
    const char *names[] = {"ratio", "headroom_ratio", "headroom_a", "headroom_b", "max_abs_err_ratio",
                           "max_abs_err_a", "max_abs_err_b"};
    for (int i = 0; i < 7; i++) {
        fprintf(w->f, ", \"%s\": ", names[i]);
        mc_writer_json_number(w, nums[i]);
    }
    int64_t tok = b->first_fail_token >= 0 ? b->first_fail_token : a->first_fail_token;
    if (tok >= 0)
        fprintf(w->f, ", \"first_fail_token\": %lld", (long long)tok);
    else
        fputs(", \"first_fail_token\": null", w->f);
    fputs(", \"worst_index\": ", w->f);
    mc_writer_json_string(w, b->worst_index);
    fputc('}', w->f);
}

static void json_keys(struct mc_writer *w, const char *name, const struct mc_report_doc *in,
                      const struct mc_report_doc *other)
{
    fprintf(w->f, ",\n  \"%s\": [", name);
    int n = 0;
    for (int i = 0; i < in->n_records; i++) {
        if (mc_report_find(other, in->records[i].key))
            continue;
        fputs(n++ ? ",\n    " : "\n    ", w->f);
        mc_writer_json_string(w, in->records[i].key);
    }
    fputs(n ? "\n  ]" : "]", w->f);
}

static int write_json(const char *path, const struct mc_report_doc *a, const struct mc_report_doc *b,
                      double threshold, const struct row *rows, int n_rows)
{
    struct mc_writer w;
    struct mc_error err = {0};
    if (mc_writer_open(&w, path, &err) == MC_ERR_NONE) {
        fputs("{\n  \"format\": \"mixcheck-diff\",\n  \"format_version\": 1,\n  \"a\": ", w.f);
        mc_writer_json_string(&w, a->path);
        fputs(",\n  \"b\": ", w.f);
        mc_writer_json_string(&w, b->path);
        fputs(",\n  \"threshold\": ", w.f);
        mc_writer_json_number(&w, threshold);
        fputs(",\n  \"moved\": [", w.f);
        int n = 0;
        for (int i = 0; i < n_rows; i++) {
            if (!rows[i].moved)
                continue;
            fputs(n++ ? ",\n    " : "\n    ", w.f);
            json_row(&w, &rows[i]);
        }
        fputs(n ? "\n  ]" : "]", w.f);
        json_keys(&w, "missing_in_a", b, a);
        json_keys(&w, "missing_in_b", a, b);
        fputs("\n}\n", w.f);
        mc_writer_commit(&w, &err);
    }
    if (err.code != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck: diff --json: %s\n", err.msg);
        return 2;
    }
    return 0;
}

static void print_missing(const char *label, const struct mc_report_doc *in, const struct mc_report_doc *other)
{
    int n = 0;
    for (int i = 0; i < in->n_records; i++)
        if (mc_report_find(other, in->records[i].key) == NULL)
            n++;
    if (n == 0)
        return;
    printf("%d record(s) only in %s (not a movement):\n", n, in->path);
    for (int i = 0; i < in->n_records; i++)
        if (mc_report_find(other, in->records[i].key) == NULL)
            printf("  %s %s\n", label, in->records[i].key);
}

int mc_cmd_diff(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"threshold", required_argument, NULL, 't'},
        {"json", required_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    double threshold = MC_DIFF_DEFAULT_THRESHOLD;
    const char *json_path = NULL;
    opterr = 0;
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 't': {
            char *end;
            threshold = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(threshold > 1.0) || !(threshold < 1e300)) {
                fprintf(stderr, "mixcheck: diff --threshold: expected a ratio greater than 1, e.g. 1.1 (got '%s')\n",
                        optarg);
                return 2;
            }
            break;
        }
        case 'J':
            json_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            fprintf(stderr, "mixcheck: diff: unknown or incomplete option '%s' (see mixcheck diff --help)\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, "mixcheck: diff: expected two reports, A.json B.json (see mixcheck diff --help)\n");
        return 2;
    }
    struct mc_report_doc a = {0}, b = {0};
    struct mc_error err = {0};
    if (mc_report_read(argv[optind], &a, &err) != MC_ERR_NONE ||
        mc_report_read(argv[optind + 1], &b, &err) != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck: diff: %s\n", err.msg);
        mc_report_doc_free(&a);
        return mc_error_exit_code(err.code);
    }
    struct row *rows = calloc((size_t)b.n_records + 1, sizeof *rows);
    if (rows == NULL) {
        fprintf(stderr, "mixcheck: out of memory\n");
        mc_report_doc_free(&a);
        mc_report_doc_free(&b);
        return 2;
    }
    int n_rows = 0, n_moved = 0;
    for (int i = 0; i < b.n_records; i++) {
        const struct mc_report_record *rb = &b.records[i], *ra = mc_report_find(&a, rb->key);
        if (ra == NULL)
            continue;
        struct row *r = &rows[n_rows++];
        r->a = ra;
        r->b = rb;
        r->headroom_ratio = r->abs_ratio = 1.0;
        if (ra->has_numbers && rb->has_numbers)
            mc_drift_ratios(rb->headroom, ra->headroom, rb->max_abs_err, ra->max_abs_err, rb->atol, &r->headroom_ratio,
                            &r->abs_ratio);
        r->ratio = r->headroom_ratio > r->abs_ratio ? r->headroom_ratio : r->abs_ratio;
        r->status_changed = !same_status(ra->status, rb->status);
        r->moved = r->status_changed || beyond(r->headroom_ratio, threshold) || beyond(r->abs_ratio, threshold);
        n_moved += r->moved;
    }
    if (n_rows == 0) {
        /* nothing was compared: two reports of different selections say nothing of each other */
        fprintf(stderr, "mixcheck: diff: %s and %s have no record (case/scenario/backend/dtype/tensor) in common "
                        "(%d and %d record(s)): nothing to compare\n", a.path, b.path, a.n_records, b.n_records);
        free(rows);
        mc_report_doc_free(&a);
        mc_report_doc_free(&b);
        return 2;
    }
    qsort(rows, (size_t)n_rows, sizeof *rows, cmp_row);
    printf("mixcheck diff %s -> %s: %d record(s) compared, %d moved beyond x%g\n", a.path, b.path, n_rows, n_moved,
           threshold);
    for (int i = 0; i < n_rows; i++) {
        const struct row *r = &rows[i];
        if (!r->moved)
            continue;
        const struct mc_report_record *ra = r->a, *rb = r->b;
        int64_t tok = rb->first_fail_token >= 0 ? rb->first_fail_token : ra->first_fail_token;
        char token[32] = "-";
        if (tok >= 0)
            snprintf(token, sizeof token, "%lld", (long long)tok);
        printf("x%-7.3g %s/%s/%s/%s %s: headroom %.3g -> %.3g (x%.3g), max abs err %.3g -> %.3g (x%.3g), first "
               "failing token %s, worst at %s%s%s%s%s\n",
               r->ratio, rb->case_id, rb->scenario, rb->backend, rb->dtype, rb->tensor[0] ? rb->tensor : "-",
               ra->headroom, rb->headroom, r->headroom_ratio, ra->max_abs_err, rb->max_abs_err, r->abs_ratio, token,
               rb->worst_index[0] ? rb->worst_index : "-", r->status_changed ? ", status " : "",
               r->status_changed ? ra->status : "", r->status_changed ? " -> " : "", r->status_changed ? rb->status : "");
    }
    print_missing("only in A:", &a, &b);
    print_missing("only in B:", &b, &a);
    int code = n_moved ? 1 : 0;
    if (json_path && write_json(json_path, &a, &b, threshold, rows, n_rows) != 0)
        code = 2;
    free(rows);
    mc_report_doc_free(&a);
    mc_report_doc_free(&b);
    return code;
}
