/*
 * cmd_merge.c — `mixcheck merge [--json OUT.json] [--junit OUT.xml] SHARD...`: joins the reports of the
 * shards of one run (run --shard K/N) into one. JSON inputs (format "mixcheck-report") give the JSON
 * output: the results of every shard sorted by case/scenario/backend/dtype/tensor, the summary counts
 * added up (cases counted once), problems once each (a case-level problem is reported by every shard
 * that loads the case), the first shard's provenance and the goldens of all; the kill matrix and
 * baseline sections are not merged. JUnit inputs (mixcheck's own) give the JUnit output: the test suites
 * of every shard, the <testsuites> totals added up, its time the longest shard's.
 *
 * The JSON reports must be every shard of one plan: each holds its "shard" object (index, count and the
 * plan's SHA-256, runner.h), and a report of another plan, a shard twice or a shard missing is an input
 * error naming it. A backend under test whose checks the shards could not judge alone ("must_test") that
 * no shard gave a verdict is not tested (125). The command exits the merged run's code: 2 when a shard
 * had an input error, else 1 when a check failed, else 125 when something could not be tested (a
 * problem of kind "untestable", a must_test backend without a verdict, no check passed), else 0; 2 for a
 * usage error or an input that cannot be read or does not belong.
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
                 "The JSON reports must be every shard of one plan (the same selection, cases, backends and\n"
                 "dtypes, each shard once); the JUnit reports are checked only against their number.\n"
                 "exit: the merged run's: 0 passed, 1 a check failed, 125 something could not be tested,\n"
                 "2 usage or input error (a shard missing, twice, or of another plan)\n");
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

/* The exit code of the whole run from those of its shards: an input error, else a failure, else could
 * not test when something was not tested (`untestable`) or no check passed, else a pass. */
static int merged_exit(const int *codes, int n, int untestable, double passed)
{
    int any1 = 0;
    for (int i = 0; i < n; i++) {
        if (codes[i] == 2)
            return 2;
        any1 |= codes[i] == 1;
    }
    return any1 ? 1 : untestable || !(passed > 0) ? 125 : 0;
}

/* The "shard" object of a shard report, checked against the first one's: the same plan, each index once.
 * `seen` has room for every index of the plan. 0, or 2 after printing the error. */
static int check_shard(const char *path, const struct mc_json_value *doc, const char *first_path, int *count,
                       const char **plan, double *checks, char **seen_by)
{
    const struct mc_json_value *sh = mc_json_get(doc, "shard");
    const struct mc_json_value *idx = mc_json_get(sh, "index"), *cnt = mc_json_get(sh, "count");
    const char *sha = str_of(sh, "plan_sha256");
    if (sh == NULL || sh->type != MC_JSON_OBJECT || idx == NULL || idx->type != MC_JSON_NUMBER || cnt == NULL ||
        cnt->type != MC_JSON_NUMBER || !(cnt->number >= 2 && cnt->number <= 100000) || !(idx->number >= 1) ||
        idx->number > cnt->number || sha[0] == '\0') {
        fprintf(stderr, "mixcheck: merge: %s: not a shard report (no \"shard\" object with index, count and "
                        "plan_sha256: written by mixcheck run --shard K/N with N > 1)\n", path);
        return 2;
    }
    int k = (int)idx->number, n = (int)cnt->number;
    if (*plan == NULL) {
        *plan = sha;
        *count = n;
        *checks = num_of(sh, "checks_all_shards");
    } else if (n != *count || strcmp(sha, *plan) != 0) {
        fprintf(stderr, "mixcheck: merge: %s is a shard of another plan than %s (%d shard(s), plan %.12s; %d "
                        "shard(s), plan %.12s): not the shards of one run\n",
                path, first_path, n, sha, *count, *plan);
        return 2;
    }
    if (seen_by[k - 1] != NULL) {
        fprintf(stderr, "mixcheck: merge: shard %d of %d given twice: %s and %s\n", k, n, seen_by[k - 1], path);
        return 2;
    }
    seen_by[k - 1] = (char *)path;
    return 0;
}

static int merge_json(const char *out, char **in, int n)
{
    struct mc_json_value **docs = calloc((size_t)n, sizeof *docs);
    int rc = 2, n_results = 0, n_problems = 0, n_goldens = 0;
    struct rec *recs = NULL;
    const struct mc_json_value **probs = NULL, **golds = NULL;
    const char **cases = NULL;
    char **seen_by = NULL;
    const char *plan = NULL;
    int plan_count = 0;
    double plan_checks = 0;
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
        const struct mc_json_value *cnt = mc_json_get(mc_json_get(docs[i], "shard"), "count");
        int want = cnt && cnt->type == MC_JSON_NUMBER && cnt->number >= 1 && cnt->number <= 100000 ? (int)cnt->number : 1;
        if (seen_by == NULL && (seen_by = calloc((size_t)want, sizeof *seen_by)) == NULL)
            goto done;
        if (check_shard(in[i], docs[i], in[0], &plan_count, &plan, &plan_checks, seen_by) != 0)
            goto done;
    }
    for (int k = 0; k < plan_count; k++)
        if (seen_by[k] == NULL) {
            char missing[512] = "";
            size_t used = 0;
            int n_missing = 0;
            for (int j = 0; j < plan_count; j++)
                if (seen_by[j] == NULL && used < sizeof missing - 16) {
                    used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d", n_missing ? ", " : "",
                                             j + 1);
                    n_missing++;
                }
            double given = 0;
            for (int j = 0; j < n; j++)
                given += num_of(mc_json_get(docs[j], "summary"), "checks");
            fprintf(stderr, "mixcheck: merge: shard%s %s of %d missing: the %d report(s) given hold %.0f of the plan's "
                            "%.0f check(s); give every shard's report\n",
                    n_missing > 1 ? "s" : "", missing, plan_count, n, given, plan_checks);
            goto done;
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
    /* a backend the shards could not judge alone: tested when some shard gave one of its checks a verdict */
    int untestable = 0, n_untested = 0;
    const char *untested[64];
    for (int j = 0; j < np; j++)
        untestable |= strcmp(str_of(probs[j], "kind"), "untestable") == 0;
    for (int i = 0; i < n; i++) {
        const struct mc_json_value *mt = mc_json_get(mc_json_get(docs[i], "shard"), "must_test");
        for (size_t k = 0; mt && mt->type == MC_JSON_ARRAY && k < mt->len; k++) {
            const char *name = mt->items[k].type == MC_JSON_STRING ? mt->items[k].string : "";
            int known = 0, verdict = 0;
            for (int j = 0; j < n_untested && !known; j++)
                known = strcmp(untested[j], name) == 0;
            for (int j = 0; j < nr && !verdict && !known; j++)
                verdict = strcmp(str_of(recs[j].v, "backend"), name) == 0 &&
                          strcmp(str_of(recs[j].v, "status"), "unsupported") != 0 &&
                          strcmp(str_of(recs[j].v, "status"), "skipped") != 0;
            if (known || verdict || name[0] == '\0' || n_untested == 64)
                continue;
            untested[n_untested++] = name;
            untestable = 1;
            fprintf(stderr, "mixcheck: merge: backend '%s' was not tested: no shard gave any of its checks a verdict "
                            "(all unsupported)\n", name);
        }
    }
    int code = merged_exit(codes, n, untestable, sums[1]);
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
    fprintf(w.f, ", \"problems\": %d, \"exit_code\": %d, \"shards\": %d},\n  \"problems\": [", np + n_untested,
            code, n);
    for (int i = 0; i < np; i++) {
        fputs(i ? ",\n    " : "\n    ", w.f);
        write_value(&w, probs[i], 1);
    }
    for (int i = 0; i < n_untested; i++) {
        char msg[512];
        snprintf(msg, sizeof msg, "backend '%s' was not tested: no shard gave any of its checks a verdict (all "
                                  "unsupported)", untested[i]);
        fputs(np + i ? ",\n    {\"path\": \"merge\", \"case\": null, \"scenario\": null, \"kind\": \"untestable\", \"message\": "
                     : "\n    {\"path\": \"merge\", \"case\": null, \"scenario\": null, \"kind\": \"untestable\", \"message\": ",
              w.f);
        mc_writer_json_string(&w, msg);
        fputc('}', w.f);
    }
    fputs(np + n_untested ? "\n  ],\n  \"results\": [" : "],\n  \"results\": [", w.f);
    for (int i = 0; i < nr; i++) {
        fputs(i ? ",\n    " : "\n    ", w.f);
        write_value(&w, recs[i].v, 1);
    }
    fputs(nr ? "\n  ]\n}\n" : "]\n}\n", w.f);
    if (mc_writer_commit(&w, &err) != MC_ERR_NONE) {
        fprintf(stderr, "mixcheck: merge: --json: %s\n", err.msg);
        goto done;
    }
    printf("merged %d shard(s) of %d: %.0f check(s): %.0f passed, %.0f failed, %.0f errored, %.0f unsupported; %d "
           "problem(s); exit %d\n",
           n, plan_count, sums[0], sums[1], sums[2], sums[3], sums[4], np + n_untested, code);
    rc = code;
done:
    for (int i = 0; docs && i < n; i++)
        if (docs[i])
            mc_json_free(docs[i]);
    free(docs);
    free(codes);
    free(seen_by);
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
    } else if (json_out && junit_out && nj != nx) {
        fprintf(stderr, "mixcheck: merge: %d JSON and %d JUnit shard report(s): give both reports of every shard\n",
                nj, nx);
        rc = 2;
    } else {
        if (json_out)
            rc = merge_json(json_out, json_in, nj);
        else
            fprintf(stderr, "mixcheck: merge: warning: JUnit reports say nothing of their plan: give the shards' "
                            "JSON reports too (--json) to check that every shard of one run is there\n");
        if (rc != 2 && junit_out) {
            int jrc = merge_junit(junit_out, xml_in, nx);
            rc = jrc != 0 ? jrc : rc;
        }
    }
    free(json_in);
    free(xml_in);
    return rc;
}
