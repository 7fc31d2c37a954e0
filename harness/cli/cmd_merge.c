/*
 * cmd_merge.c — `mixcheck merge [--json OUT.json] [--junit OUT.xml] SHARD...`: joins the reports of the
 * shards of one run (run --shard K/N) into one. JSON inputs (format "mixcheck-report") give the JSON
 * output: the results of every shard sorted by case/scenario/backend/dtype/tensor, the summary counts
 * added up (cases counted once), problems once each (a case-level problem is reported by every shard
 * that loads the case), the first shard's provenance and the goldens of all; the kill matrix and
 * baseline sections are not merged. JUnit inputs (mixcheck's own) give the JUnit output: the test suites
 * of every shard, the <testsuites> totals added up, its time the longest shard's. Exit 0, or 2 for a
 * usage error or an input that cannot be read.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "base/jsonread.h"
#include "run/reportread.h"
#include "writer.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: mixcheck merge [--json OUT.json] [--junit OUT.xml] SHARD.json|SHARD.xml...\n"
                 "Joins the JSON and JUnit reports of the shards of one run (mixcheck run --shard K/N) into\n"
                 "one of each, whose totals are those of the run unsharded. Inputs ending in .xml are JUnit.\n"
                 "exit: 0 merged, 2 usage or input error\n");
}

/* A JSON value written back: numbers in the shortest form that reads back the same. */
static void write_value(struct mc_writer *w, const struct mc_json_value *v, int depth)
{
    switch (v->type) {
    case MC_JSON_NULL:
        fputs("null", w->f);
        break;
    case MC_JSON_TRUE:
        fputs("true", w->f);
        break;
    case MC_JSON_FALSE:
        fputs("false", w->f);
        break;
    case MC_JSON_NUMBER: {
        char buf[64];
        snprintf(buf, sizeof buf, "%.15g", v->number);
        if (strtod(buf, NULL) != v->number)
            snprintf(buf, sizeof buf, "%.17g", v->number);
        fputs(buf, w->f);
        break;
    }
    case MC_JSON_STRING:
        mc_writer_json_string(w, v->string);
        break;
    case MC_JSON_ARRAY:
        fputc('[', w->f);
        for (size_t i = 0; i < v->len; i++) {
            fputs(i ? ", " : "", w->f);
            write_value(w, &v->items[i], depth + 1);
        }
        fputc(']', w->f);
        break;
    case MC_JSON_OBJECT:
        fputc('{', w->f);
        for (size_t i = 0; i < v->len; i++) {
            fputs(i ? ", " : "", w->f);
            mc_writer_json_string(w, v->keys[i]);
            fputs(": ", w->f);
            write_value(w, &v->items[i], depth + 1);
        }
        fputc('}', w->f);
        break;
    }
}

static const char *str_of(const struct mc_json_value *o, const char *key)
{
    const struct mc_json_value *v = mc_json_get(o, key);
    return v && v->type == MC_JSON_STRING ? v->string : "";
}

static double num_of(const struct mc_json_value *o, const char *key)
{
    const struct mc_json_value *v = mc_json_get(o, key);
    return v && v->type == MC_JSON_NUMBER ? v->number : 0.0;
}

struct rec {
    const struct mc_json_value *v;
    char key[1024];
};

static int cmp_rec(const void *a, const void *b)
{
    return strcmp(((const struct rec *)a)->key, ((const struct rec *)b)->key);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The exit code of the whole run from those of its shards: an input error, else a failure, else a pass
 * when some shard tested something, else could not test. */
static int merged_exit(const int *codes, int n)
{
    int any0 = 0, any1 = 0;
    for (int i = 0; i < n; i++) {
        if (codes[i] == 2)
            return 2;
        any1 |= codes[i] == 1;
        any0 |= codes[i] == 0;
    }
    return any1 ? 1 : any0 ? 0 : 125;
}

static int merge_json(const char *out, char **in, int n)
{
    struct mc_json_value **docs = calloc((size_t)n, sizeof *docs);
    int rc = 2, n_results = 0, n_problems = 0, n_goldens = 0;
    struct rec *recs = NULL;
    const struct mc_json_value **probs = NULL, **golds = NULL;
    const char **cases = NULL;
    int *codes = calloc((size_t)n + 1, sizeof *codes);
    if (docs == NULL || codes == NULL)
        goto done;
    for (int i = 0; i < n; i++) {
        struct mc_json_error je;
        struct mc_report_doc check;
        struct mc_error err = {0};
        /* reportread validates the format and every record (file:line:column) */
        if (mc_report_read(in[i], &check, &err) != MC_ERR_NONE) {
            fprintf(stderr, "mixcheck: merge: %s\n", err.msg);
            goto done;
        }
        mc_report_doc_free(&check);
        if (mc_json_parse_file(in[i], NULL, &docs[i], &je) != 0) {
            fprintf(stderr, "mixcheck: merge: %s: %s\n", in[i], je.msg);
            goto done;
        }
        n_results += (int)mc_json_get(docs[i], "results")->len;
        const struct mc_json_value *p = mc_json_get(docs[i], "problems");
        n_problems += p && p->type == MC_JSON_ARRAY ? (int)p->len : 0;
        const struct mc_json_value *g = mc_json_get(mc_json_get(docs[i], "provenance"), "goldens");
        n_goldens += g && g->type == MC_JSON_ARRAY ? (int)g->len : 0;
    }
    recs = calloc((size_t)n_results + 1, sizeof *recs);
    probs = calloc((size_t)n_problems + 1, sizeof *probs);
    golds = calloc((size_t)n_goldens + 1, sizeof *golds);
    cases = calloc((size_t)n_results + (size_t)n_goldens + 1, sizeof *cases);
    if (recs == NULL || probs == NULL || golds == NULL || cases == NULL)
        goto done;
    int nr = 0, np = 0, ng = 0, nc = 0;
    double sums[9] = {0}, duration = 0;
    static const char *const counted[9] = {"checks", "pass", "fail", "error", "unsupported", "skipped",
                                           "nondeterministic", "drift", "problems"};
    double started = 0;
    for (int i = 0; i < n; i++) {
        const struct mc_json_value *d = docs[i], *s = mc_json_get(d, "summary");
        const struct mc_json_value *res = mc_json_get(d, "results"), *p = mc_json_get(d, "problems");
        const struct mc_json_value *g = mc_json_get(mc_json_get(d, "provenance"), "goldens");
        for (int k = 0; k < 9; k++)
            sums[k] += k == 8 ? 0 : num_of(s, counted[k]);
        codes[i] = (int)num_of(s, "exit_code");
        duration = num_of(d, "duration_s") > duration ? num_of(d, "duration_s") : duration;
        if (i == 0 || num_of(d, "started_unix") < started)
            started = num_of(d, "started_unix");
        for (size_t k = 0; k < res->len; k++) {
            const struct mc_json_value *r = &res->items[k];
            recs[nr].v = r;
            mc_report_key(recs[nr].key, sizeof recs[nr].key, str_of(r, "case"), str_of(r, "scenario"),
                          str_of(r, "backend"), str_of(r, "dtype"), str_of(r, "tensor"));
            cases[nc++] = str_of(r, "case");
            nr++;
        }
        for (size_t k = 0; p && p->type == MC_JSON_ARRAY && k < p->len; k++) {
            int dup = 0;
            for (int j = 0; j < np && !dup; j++)
                dup = strcmp(str_of(probs[j], "path"), str_of(&p->items[k], "path")) == 0 &&
                      strcmp(str_of(probs[j], "message"), str_of(&p->items[k], "message")) == 0;
            if (!dup)
                probs[np++] = &p->items[k];
        }
        for (size_t k = 0; g && g->type == MC_JSON_ARRAY && k < g->len; k++) {
            int dup = 0;
            for (int j = 0; j < ng && !dup; j++)
                dup = strcmp(str_of(golds[j], "case"), str_of(&g->items[k], "case")) == 0;
            if (!dup)
                golds[ng++] = &g->items[k];
        }
    }
    if (nr > 1)
        qsort(recs, (size_t)nr, sizeof *recs, cmp_rec);
    for (int i = 1; i < nr; i++)
        if (strcmp(recs[i].key, recs[i - 1].key) == 0) {
            fprintf(stderr, "mixcheck: merge: %s is in two shard reports (shards of different runs?)\n", recs[i].key);
            goto done;
        }
    if (nc > 1)
        qsort(cases, (size_t)nc, sizeof *cases, cmp_str);
    int n_cases = 0;
    for (int i = 0; i < nc; i++)
        n_cases += i == 0 || strcmp(cases[i], cases[i - 1]) != 0;
    /* the results count each check once per tensor; the summary's checks come from the shards */
    struct mc_writer w;
    struct mc_error err = {0};
    if (mc_writer_open(&w, out, &err) != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck: merge: --json: %s\n", err.msg);
        goto done;
    }
    fprintf(w.f, "{\n  \"format\": \"mixcheck-report\",\n  \"format_version\": 1,\n  \"started_unix\": %.0f,\n"
                 "  \"duration_s\": %.17g,\n  \"provenance\": {",
            started, duration);
    const struct mc_json_value *prov = mc_json_get(docs[0], "provenance");
    int first = 1;
    for (size_t k = 0; prov && prov->type == MC_JSON_OBJECT && k < prov->len; k++) {
        if (strcmp(prov->keys[k], "goldens") == 0)
            continue;
        fputs(first ? "" : ", ", w.f);
        first = 0;
        mc_writer_json_string(&w, prov->keys[k]);
        fputs(": ", w.f);
        write_value(&w, &prov->items[k], 1);
    }
    fputs(first ? "\"goldens\": [" : ",\n    \"goldens\": [", w.f);
    for (int i = 0; i < ng; i++) {
        fputs(i ? ",\n      " : "\n      ", w.f);
        write_value(&w, golds[i], 2);
    }
    fprintf(w.f, "%s]},\n  \"summary\": {\"cases\": %d", ng ? "\n    " : "", n_cases);
    for (int k = 0; k < 8; k++)
        fprintf(w.f, ", \"%s\": %.0f", counted[k], sums[k]);
    fprintf(w.f, ", \"problems\": %d, \"exit_code\": %d, \"shards\": %d},\n  \"problems\": [", np, merged_exit(codes, n),
            n);
    for (int i = 0; i < np; i++) {
        fputs(i ? ",\n    " : "\n    ", w.f);
        write_value(&w, probs[i], 1);
    }
    fputs(np ? "\n  ],\n  \"results\": [" : "],\n  \"results\": [", w.f);
    for (int i = 0; i < nr; i++) {
        fputs(i ? ",\n    " : "\n    ", w.f);
        write_value(&w, recs[i].v, 1);
    }
    fputs(nr ? "\n  ]\n}\n" : "]\n}\n", w.f);
    if (mc_writer_commit(&w, &err) != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck: merge: --json: %s\n", err.msg);
        goto done;
    }
    rc = 0;
done:
    for (int i = 0; docs && i < n; i++)
        if (docs[i])
            mc_json_free(docs[i]);
    free(docs);
    free(codes);
    free(recs);
    free(probs);
    free(golds);
    free(cases);
    return rc;
}

/* Reads a whole file; NULL when it cannot. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len - 1 == 0) {
            char *b = realloc(buf, cap * 2);
            if (b == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

/* The value of attribute `name` in the tag starting at `tag`, or -1. */
static double attr(const char *tag, const char *end, const char *name)
{
    char pat[64];
    snprintf(pat, sizeof pat, " %s=\"", name);
    const char *p = strstr(tag, pat);
    if (p == NULL || p > end)
        return -1;
    return strtod(p + strlen(pat), NULL);
}

static int merge_junit(const char *out, char **in, int n)
{
    char **text = calloc((size_t)n, sizeof *text);
    int rc = 2;
    double tot[4] = {0}, time = 0;
    static const char *const names[4] = {"tests", "failures", "errors", "skipped"};
    const char **body = calloc((size_t)n, sizeof *body), **body_end = calloc((size_t)n, sizeof *body_end);
    if (text == NULL || body == NULL || body_end == NULL)
        goto done;
    for (int i = 0; i < n; i++) {
        if ((text[i] = slurp(in[i])) == NULL) {
            fprintf(stderr, "mixcheck: merge: %s: cannot read\n", in[i]);
            goto done;
        }
        const char *open = strstr(text[i], "<testsuites "), *gt = open ? strchr(open, '>') : NULL;
        const char *close = strstr(text[i], "</testsuites>");
        if (gt == NULL || close == NULL || close < gt) {
            fprintf(stderr, "mixcheck: merge: %s: not a mixcheck JUnit report (no <testsuites> element)\n", in[i]);
            goto done;
        }
        for (int k = 0; k < 4; k++) {
            double v = attr(open, gt, names[k]);
            if (v < 0) {
                fprintf(stderr, "mixcheck: merge: %s: <testsuites> lacks %s\n", in[i], names[k]);
                goto done;
            }
            tot[k] += v;
        }
        double t = attr(open, gt, "time");
        time = t > time ? t : time;
        body[i] = gt + 1;
        body_end[i] = close;
    }
    struct mc_writer w;
    struct mc_error err = {0};
    if (mc_writer_open(&w, out, &err) != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck: merge: --junit: %s\n", err.msg);
        goto done;
    }
    fprintf(w.f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"mixcheck\" tests=\"%.0f\" "
                 "failures=\"%.0f\" errors=\"%.0f\" skipped=\"%.0f\" time=\"%.3f\">",
            tot[0], tot[1], tot[2], tot[3], time);
    for (int i = 0; i < n; i++)
        fwrite(body[i], 1, (size_t)(body_end[i] - body[i]), w.f);
    fputs("</testsuites>\n", w.f);
    if (mc_writer_commit(&w, &err) != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck: merge: --junit: %s\n", err.msg);
        goto done;
    }
    rc = 0;
done:
    for (int i = 0; text && i < n; i++)
        free(text[i]);
    free(text);
    free(body);
    free(body_end);
    return rc;
}

int mc_cmd_merge(int argc, char **argv)
{
    static const struct option longopts[] = {{"json", required_argument, NULL, 'J'},
                                             {"junit", required_argument, NULL, 'X'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *json_out = NULL, *junit_out = NULL;
    int c;
    opterr = 0;
    optind = 2;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'J':
            json_out = optarg;
            break;
        case 'X':
            junit_out = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            fprintf(stderr, "mixcheck: merge: unknown or incomplete option '%s' (see mixcheck merge --help)\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    int n = argc - optind;
    char **json_in = calloc((size_t)n + 1, sizeof *json_in), **xml_in = calloc((size_t)n + 1, sizeof *xml_in);
    int nj = 0, nx = 0, rc = 0;
    if (json_in == NULL || xml_in == NULL) {
        free(json_in);
        free(xml_in);
        fprintf(stderr, "mixcheck: out of memory\n");
        return 2;
    }
    for (int i = optind; i < argc; i++) {
        size_t len = strlen(argv[i]);
        if (len > 4 && strcmp(argv[i] + len - 4, ".xml") == 0)
            xml_in[nx++] = argv[i];
        else
            json_in[nj++] = argv[i];
    }
    if (n == 0 || (json_out == NULL && junit_out == NULL)) {
        usage(stderr);
        rc = 2;
    } else if ((json_out && nj == 0) || (junit_out && nx == 0)) {
        fprintf(stderr, "mixcheck: merge: %s given but no %s shard report\n", json_out && nj == 0 ? "--json" : "--junit",
                json_out && nj == 0 ? "JSON" : "JUnit (.xml)");
        rc = 2;
    } else {
        if (json_out)
            rc = merge_json(json_out, json_in, nj);
        if (rc == 0 && junit_out)
            rc = merge_junit(junit_out, xml_in, nx);
    }
    free(json_in);
    free(xml_in);
    return rc;
}
