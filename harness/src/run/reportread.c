/* reportread.c — reads mixcheck JSON reports back (see reportread.h). */
#include "run/reportread.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/jsonread.h"

void mc_report_key(char *buf, size_t len, const char *case_id, const char *scenario, const char *backend,
                   const char *dtype, const char *tensor)
{
    snprintf(buf, len, "%s/%s/%s/%s/%s", case_id, scenario, backend, dtype, tensor);
}

static enum mc_err_code bad(struct mc_error *err, const char *path, const struct mc_json_value *at, const char *what,
                            const char *key)
{
    return mc_error_set(err, MC_ERR_INPUT, "%s:%d:%d: not a mixcheck report: %s%s%s%s", path, at->line, at->column,
                        what, key ? " \"" : "", key ? key : "", key ? "\"" : "");
}

/* A string member, or an error naming the key. `null_ok`: a null member (or none) gives "". */
static enum mc_err_code get_string(const char *path, const struct mc_json_value *rec, const char *key, int null_ok,
                                   char **out, struct mc_error *err)
{
    const struct mc_json_value *v = mc_json_get(rec, key);
    if ((v == NULL || v->type == MC_JSON_NULL) && null_ok) {
        *out = mc_strdup("");
    } else if (v == NULL) {
        return bad(err, path, rec, "a record lacks the key", key);
    } else if (v->type != MC_JSON_STRING) {
        return bad(err, path, v, "expected a string for", key);
    } else {
        *out = mc_strdup(v->string);
    }
    return *out ? MC_ERR_NONE : mc_error_set(err, MC_ERR_NOMEM, "out of memory");
}

/* A number member; null (the writer's non-finite) reads as +inf. */
static enum mc_err_code get_number(const char *path, const struct mc_json_value *rec, const char *key, double *out,
                                   struct mc_error *err)
{
    const struct mc_json_value *v = mc_json_get(rec, key);
    if (v == NULL)
        return bad(err, path, rec, "a tensor record lacks the key", key);
    if (v->type == MC_JSON_NULL)
        *out = INFINITY;
    else if (v->type == MC_JSON_NUMBER)
        *out = v->number;
    else
        return bad(err, path, v, "expected a number or null for", key);
    return MC_ERR_NONE;
}

static void record_free(struct mc_report_record *r)
{
    free(r->case_id);
    free(r->scenario);
    free(r->backend);
    free(r->dtype);
    free(r->tensor);
    free(r->status);
    free(r->key);
    free(r->worst_index);
}

static enum mc_err_code read_record(const char *path, const struct mc_json_value *v, struct mc_report_record *r,
                                    struct mc_error *err)
{
    memset(r, 0, sizeof *r);
    r->line = v->line;
    r->column = v->column;
    r->first_fail_token = -1;
    if (v->type != MC_JSON_OBJECT)
        return bad(err, path, v, "a record of \"results\" is not an object", NULL);
    if (get_string(path, v, "case", 0, &r->case_id, err) || get_string(path, v, "scenario", 0, &r->scenario, err) ||
        get_string(path, v, "backend", 0, &r->backend, err) || get_string(path, v, "dtype", 0, &r->dtype, err) ||
        get_string(path, v, "tensor", 1, &r->tensor, err) || get_string(path, v, "status", 0, &r->status, err))
        return err->code;
    if (r->tensor[0]) {
        r->has_numbers = 1;
        if (get_number(path, v, "headroom", &r->headroom, err) ||
            get_number(path, v, "max_abs_err", &r->max_abs_err, err) || get_number(path, v, "atol", &r->atol, err) ||
            get_number(path, v, "rtol", &r->rtol, err))
            return err->code;
        const struct mc_json_value *t = mc_json_get(v, "first_fail_token");
        if (t && t->type == MC_JSON_NUMBER)
            r->first_fail_token = (int64_t)t->number;
        else if (t && t->type != MC_JSON_NULL)
            return bad(err, path, t, "expected an integer or null for", "first_fail_token");
    }
    const struct mc_json_value *dur = mc_json_get(v, "duration_s");
    if (dur && dur->type == MC_JSON_NUMBER)
        r->duration_s = dur->number;
    char idx[256] = "";
    const struct mc_json_value *w = mc_json_get(v, "worst_index");
    if (w && w->type == MC_JSON_OBJECT) {
        size_t used = 0;
        for (size_t i = 0; i < w->len && used < sizeof idx; i++) {
            if (w->items[i].type != MC_JSON_NUMBER)
                return bad(err, path, &w->items[i], "expected an integer index in", "worst_index");
            used += (size_t)snprintf(idx + used, sizeof idx - used, "%s%s=%.0f", i ? " " : "", w->keys[i],
                                     w->items[i].number);
        }
    } else if (w && w->type != MC_JSON_NULL) {
        return bad(err, path, w, "expected an object or null for", "worst_index");
    }
    r->worst_index = mc_strdup(idx);
    char key[1024];
    mc_report_key(key, sizeof key, r->case_id, r->scenario, r->backend, r->dtype, r->tensor);
    r->key = mc_strdup(key);
    if (r->worst_index == NULL || r->key == NULL)
        return mc_error_set(err, MC_ERR_NOMEM, "out of memory");
    return MC_ERR_NONE;
}

/* Appends one file of the provenance (a plugin or a Python spec) to the doc's tested_key and tested. */
static void add_tested(char *key, size_t key_len, size_t *key_used, char *text, size_t text_len, size_t *text_used,
                       const char *what, const struct mc_json_value *file)
{
    const struct mc_json_value *sha = mc_json_get(file, "sha256");
    const struct mc_json_value *name = mc_json_get(file, strcmp(what, "plugin") == 0 ? "path" : "spec");
    const char *hex = sha && sha->type == MC_JSON_STRING ? sha->string : "?";
    if (*key_used < key_len)
        *key_used += (size_t)snprintf(key + *key_used, key_len - *key_used, "%s%s:%s", *key_used ? "," : "", what, hex);
    if (*text_used < text_len)
        *text_used += (size_t)snprintf(text + *text_used, text_len - *text_used, "%s%s %s sha256 %.12s",
                                       *text_used ? ", " : "", what,
                                       name && name->type == MC_JSON_STRING ? name->string : "?", hex);
}

/* The plugin and Python spec files of a report's provenance (reportread.h: tested_key, tested). */
static void read_tested(const struct mc_json_value *prov, struct mc_report_doc *doc, struct mc_error *err)
{
    char key[4096] = "", text[4096] = "";
    size_t ku = 0, tu = 0;
    const struct mc_json_value *plugins = mc_json_get(prov, "plugins");
    const struct mc_json_value *specs = mc_json_get(mc_json_get(prov, "python"), "specs");
    for (size_t i = 0; plugins && plugins->type == MC_JSON_ARRAY && i < plugins->len; i++)
        add_tested(key, sizeof key, &ku, text, sizeof text, &tu, "plugin", &plugins->items[i]);
    for (size_t i = 0; specs && specs->type == MC_JSON_ARRAY && i < specs->len; i++)
        add_tested(key, sizeof key, &ku, text, sizeof text, &tu, "python", &specs->items[i]);
    doc->tested_key = mc_strdup(key);
    doc->tested = mc_strdup(text);
    if (doc->tested_key == NULL || doc->tested == NULL)
        mc_error_set(err, MC_ERR_NOMEM, "out of memory");
}

static int cmp_record(const void *a, const void *b)
{
    const struct mc_report_record *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

enum mc_err_code mc_report_read(const char *path, struct mc_report_doc *doc, struct mc_error *err)
{
    memset(doc, 0, sizeof *doc);
    struct mc_json_value *root = NULL;
    struct mc_json_error je;
    if (mc_json_parse_file(path, NULL, &root, &je) != 0) {
        if (je.line > 0)
            return mc_error_set(err, MC_ERR_INPUT, "%s:%d:%d: invalid JSON: %s", path, je.line, je.column, je.msg);
        return mc_error_set(err, MC_ERR_INPUT, "%s: %s", path, je.msg);
    }
    const struct mc_json_value *fmt = mc_json_get(root, "format"), *ver = mc_json_get(root, "format_version");
    const struct mc_json_value *res = mc_json_get(root, "results");
    if (root->type != MC_JSON_OBJECT)
        bad(err, path, root, "the document is not an object", NULL);
    else if (fmt == NULL || fmt->type != MC_JSON_STRING || strcmp(fmt->string, "mixcheck-report") != 0)
        bad(err, path, fmt ? fmt : root, "expected \"format\": \"mixcheck-report\"", NULL);
    else if (ver == NULL || ver->type != MC_JSON_NUMBER || ver->number != 1)
        bad(err, path, ver ? ver : root, "expected \"format_version\": 1 (the version this mixcheck reads)", NULL);
    else if (res == NULL || res->type != MC_JSON_ARRAY)
        bad(err, path, res ? res : root, "expected a \"results\" array", NULL);
    if (err->code == MC_ERR_NONE) {
        const struct mc_json_value *prov = mc_json_get(root, "provenance"), *su = mc_json_get(root, "started_unix");
        const struct mc_json_value *gc = mc_json_get(prov, "git_commit"), *gd = mc_json_get(prov, "git_describe");
        const struct mc_json_value *st = mc_json_get(prov, "started_utc");
        doc->git_commit = mc_strdup(gc && gc->type == MC_JSON_STRING ? gc->string : "unknown");
        doc->git_describe = mc_strdup(gd && gd->type == MC_JSON_STRING ? gd->string : "unknown");
        doc->started_utc = mc_strdup(st && st->type == MC_JSON_STRING ? st->string : "");
        doc->started_unix = su && su->type == MC_JSON_NUMBER ? (int64_t)su->number : 0;
        if (doc->git_commit == NULL || doc->git_describe == NULL || doc->started_utc == NULL)
            mc_error_set(err, MC_ERR_NOMEM, "out of memory");
        else
            read_tested(prov, doc, err);
    }
    if (err->code == MC_ERR_NONE && ((doc->path = mc_strdup(path)) == NULL ||
                                     (res->len && (doc->records = calloc(res->len, sizeof *doc->records)) == NULL)))
        mc_error_set(err, MC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; err->code == MC_ERR_NONE && i < res->len; i++) {
        if (read_record(path, &res->items[i], &doc->records[i], err) != MC_ERR_NONE)
            record_free(&doc->records[i]);
        else
            doc->n_records++;
    }
    if (err->code == MC_ERR_NONE && doc->n_records > 1) {
        qsort(doc->records, (size_t)doc->n_records, sizeof *doc->records, cmp_record);
        for (int i = 1; i < doc->n_records; i++) {
            const struct mc_report_record *a = &doc->records[i - 1], *b = &doc->records[i];
            if (strcmp(a->key, b->key) == 0) {
                mc_error_set(err, MC_ERR_INPUT, "%s:%d:%d: not a mixcheck report: a second record for %s (the first at "
                                                "line %d)",
                             path, b->line, b->column, b->key, a->line);
                break;
            }
        }
    }
    mc_json_free(root);
    if (err->code != MC_ERR_NONE)
        mc_report_doc_free(doc);
    return err->code;
}

void mc_report_doc_free(struct mc_report_doc *doc)
{
    for (int i = 0; i < doc->n_records; i++)
        record_free(&doc->records[i]);
    free(doc->records);
    free(doc->path);
    free(doc->git_commit);
    free(doc->git_describe);
    free(doc->started_utc);
    free(doc->tested_key);
    free(doc->tested);
    memset(doc, 0, sizeof *doc);
}

const struct mc_report_record *mc_report_find(const struct mc_report_doc *doc, const char *key)
{
    int lo = 0, hi = doc->n_records - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(doc->records[mid].key, key);
        if (c == 0)
            return &doc->records[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}
