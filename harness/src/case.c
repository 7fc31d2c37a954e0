/*
 * case.c — the YAML loader for test cases and tolerance profiles (format in cases/FORMAT.md).
 *
 * A file goes through four gates before any value is read:
 *   1. read whole (refused above MC_CASE_MAX_FILE_BYTES, before parsing);
 *   2. a byte scan: valid UTF-8, no control characters (binary garbage stops here);
 *   3. an event pass: YAML syntax, exactly one document, no anchors / aliases / explicit tags,
 *      nesting depth bounded (libyaml's composer recurses, so depth is checked before composing);
 *   4. the document API, so every node keeps its line and column for messages.
 * Values are then read by a small set of typed readers (string, integer, number, lists) that all
 * report "file:line:col: in 'key.path': what is wrong (got X)". Every allocation goes through
 * case_calloc / case_strdup, the one place an allocation-failure test hooks into.
 */
#include "case.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <yaml.h>

#include "family.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

#define KP_LEN 256   /* key paths longer than this are truncated in messages */
#define GOT_LEN 48   /* scalar values quoted in messages are cut to this many bytes */
#define MAX_DEPTH 32 /* nesting levels a file may use (ours need 6) */
#define MAX_BACKENDS 64
#define MAX_DEVICES 64
#define MAX_SPLIT_SETS 1000
#define MAX_RANDOM_SETS 1000
#define MAX_CHUNK_SIZES 64
#define NAME_MAX_BYTES 128 /* id, backend and device names */

static const char *const TOKEN_CAP_MSG = "token counts are capped at 1000000";

/* ---- allocation: every allocation of this file passes here ------------------------------------ */

static void *case_calloc(size_t n, size_t size)
{
    if (n == 0 || size == 0)
        n = size = 1;
    return calloc(n, size);
}

static char *case_strdup(const char *s)
{
    size_t len = strlen(s);
    char *d = case_calloc(len + 1, 1);
    if (d != NULL)
        memcpy(d, s, len + 1);
    return d;
}

/* ---- names ------------------------------------------------------------------------------------- */

static const char *const SCENARIO_NAMES[MC_SCENARIO_COUNT] = {
    [MC_SCENARIO_PREFILL] = "prefill",
    [MC_SCENARIO_DECODE] = "decode",
    [MC_SCENARIO_CHUNKED] = "chunked",
    [MC_SCENARIO_FIRST_TOKEN_CAUSALITY] = "first_token_causality",
    [MC_SCENARIO_SPECULATIVE_VERIFY] = "speculative_verify",
    [MC_SCENARIO_LEFT_PADDED_BATCH] = "left_padded_batch",
    [MC_SCENARIO_RIGHT_PADDED_BATCH] = "right_padded_batch",
    [MC_SCENARIO_CHUNK_SIZE_INVARIANCE] = "chunk_size_invariance",
    [MC_SCENARIO_BATCH_INVARIANCE] = "batch_invariance",
};

/* Index MC_TENSOR_COUNT is the dtype's `default`. */
static const char *const TENSOR_NAMES[MC_TENSOR_COUNT + 1] = {
    [MC_TENSOR_OUTPUT] = "output",
    [MC_TENSOR_CONV_STATE] = "conv_state",
    [MC_TENSOR_RECURRENT_STATE] = "recurrent_state",
    [MC_TENSOR_CONSISTENCY] = "consistency",
    [MC_TENSOR_COUNT] = "default",
};

/* In file order of the documentation; index i holds dtype DTYPES[i]. */
static const char *const DTYPE_NAMES[] = {"f64", "f32", "f16", "bf16"};
static const enum mc_dtype DTYPES[] = {MC_DTYPE_F64, MC_DTYPE_F32, MC_DTYPE_F16, MC_DTYPE_BF16};

static const char *const FAMILY_NAMES[] = {"mamba2", "mamba1", "gdn", "shortconv"};

const char *mc_scenario_name(enum mc_scenario_kind kind)
{
    if ((unsigned)kind < MC_SCENARIO_COUNT)
        return SCENARIO_NAMES[kind];
    return "unknown";
}

int mc_scenario_from_name(const char *name, enum mc_scenario_kind *kind)
{
    for (int i = 0; i < MC_SCENARIO_COUNT; i++) {
        if (strcmp(name, SCENARIO_NAMES[i]) == 0) {
            *kind = (enum mc_scenario_kind)i;
            return 0;
        }
    }
    return -1;
}

const char *mc_tensor_name(enum mc_tensor_kind kind)
{
    if ((unsigned)kind <= MC_TENSOR_COUNT)
        return TENSOR_NAMES[kind];
    return "unknown";
}

const char *mc_dtype_name(enum mc_dtype dtype)
{
    for (size_t i = 0; i < COUNT(DTYPES); i++) {
        if (DTYPES[i] == dtype)
            return DTYPE_NAMES[i];
    }
    return "unknown";
}

int mc_dtype_from_name(const char *name, enum mc_dtype *dtype)
{
    for (size_t i = 0; i < COUNT(DTYPES); i++) {
        if (strcmp(name, DTYPE_NAMES[i]) == 0) {
            *dtype = DTYPES[i];
            return 0;
        }
    }
    return -1;
}

/* ---- the loader context and its messages ------------------------------------------------------ */

/* Who named the file being loaded (the case's `tolerance:` key), for open/read failures. */
struct file_ref {
    const char *path;
    yaml_mark_t mark;
    const char *key;
};

struct ld {
    const char *path;
    struct mc_error *err;
    unsigned char *buf; /* the whole file */
    size_t len;
    yaml_document_t doc;
    bool have_doc;
};

static void join_names(char *out, size_t cap, const char *const *names, size_t n)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && used < cap; i++) {
        int w = snprintf(out + used, cap - used, "%s%s", i ? ", " : "", names[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

static bool scalar_is_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *s = (const char *)n->data.scalar.value;
    return s[0] == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
           strcmp(s, "NULL") == 0;
}

/* A printable excerpt of a string: control characters become '?', long values end in "...". */
static void excerpt(const char *s, size_t len, char *out, size_t cap)
{
    size_t n = len < GOT_LEN ? len : GOT_LEN;
    if (n + 4 > cap)
        n = cap - 4;
    while (n < len && n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--; /* do not cut a UTF-8 sequence */
    size_t o = 0;
    for (size_t i = 0; i < n; i++)
        out[o++] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
    if (n < len) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

/* "a mapping", "a sequence", "null", the plain value, or the quoted value in double quotes. */
static void node_describe(const yaml_node_t *n, char *out, size_t cap)
{
    if (n->type == YAML_MAPPING_NODE) {
        snprintf(out, cap, "a mapping");
    } else if (n->type == YAML_SEQUENCE_NODE) {
        snprintf(out, cap, "a sequence");
    } else if (scalar_is_null(n)) {
        snprintf(out, cap, "null");
    } else {
        char ex[GOT_LEN + 8];
        excerpt((const char *)n->data.scalar.value, n->data.scalar.length, ex, sizeof ex);
        if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
            snprintf(out, cap, "%s", ex);
        else
            snprintf(out, cap, "\"%s\"", ex);
    }
}

static enum mc_err_code ld_fail(const struct ld *ld, yaml_mark_t mark, const char *kpath, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static enum mc_err_code ld_fail(const struct ld *ld, yaml_mark_t mark, const char *kpath, const char *fmt, ...)
{
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (kpath != NULL && kpath[0] != '\0')
        return mc_error_set(ld->err, MC_ERR_INPUT, "%s:%zu:%zu: in '%s': %s", ld->path, mark.line + 1, mark.column + 1,
                            kpath, what);
    return mc_error_set(ld->err, MC_ERR_INPUT, "%s:%zu:%zu: %s", ld->path, mark.line + 1, mark.column + 1, what);
}

static enum mc_err_code ld_nomem(const struct ld *ld)
{
    return mc_error_set(ld->err, MC_ERR_NOMEM, "%s: out of memory while loading", ld->path);
}

/* Key paths are for messages: a path too long is cut and ends in "...". */
static void kp_key(char *out, const char *base, const char *key)
{
    if (snprintf(out, KP_LEN, "%s%s%s", base, base[0] ? "." : "", key) >= KP_LEN)
        memcpy(out + KP_LEN - 4, "...", 4);
}

static void kp_index(char *out, const char *base, size_t i)
{
    if (snprintf(out, KP_LEN, "%s[%zu]", base, i) >= KP_LEN)
        memcpy(out + KP_LEN - 4, "...", 4);
}

static yaml_node_t *ld_node(struct ld *ld, int index)
{
    return yaml_document_get_node(&ld->doc, index);
}

/* ---- gates 1-3: read, byte scan, event pass, compose ------------------------------------------ */

static enum mc_err_code ld_read(struct ld *ld, const struct file_ref *ref)
{
    enum mc_err_code rc = MC_ERR_NONE;
    FILE *f = NULL;
    int e = 0;
    struct stat st;

    memset(&st, 0, sizeof st);
    f = fopen(ld->path, "rb");
    if (f == NULL) {
        e = errno;
        goto sys_fail;
    }
    if (fstat(fileno(f), &st) != 0) {
        e = errno;
        goto sys_fail;
    }
    if (S_ISDIR(st.st_mode)) {
        e = EISDIR;
        goto sys_fail;
    }
    if (S_ISREG(st.st_mode) && st.st_size > MC_CASE_MAX_FILE_BYTES)
        goto too_big;
    /* a regular file is read at its size (one byte more tells it grew); anything else up to the cap */
    size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size : (size_t)MC_CASE_MAX_FILE_BYTES;
    ld->buf = case_calloc(cap + 2, 1);
    if (ld->buf == NULL) {
        rc = ld_nomem(ld);
        goto done;
    }
    ld->len = fread(ld->buf, 1, cap + 1, f);
    if (ferror(f)) {
        e = errno ? errno : EIO;
        goto sys_fail;
    }
    if (ld->len > MC_CASE_MAX_FILE_BYTES)
        goto too_big;
    if (ld->len > cap) {
        e = EAGAIN; /* it grew while being read */
        goto sys_fail;
    }
    goto done;

sys_fail:
    if (ref != NULL)
        rc = mc_error_set(ld->err, MC_ERR_INPUT, "%s:%zu:%zu: in '%s': cannot read '%s': %s", ref->path,
                          ref->mark.line + 1, ref->mark.column + 1, ref->key, ld->path, strerror(e));
    else
        rc = mc_error_set(ld->err, MC_ERR_INPUT, "%s: cannot read: %s", ld->path, strerror(e));
    goto done;
too_big:
    if (ref != NULL)
        rc = mc_error_set(ld->err, MC_ERR_INPUT, "%s:%zu:%zu: in '%s': '%s' is larger than the 1 MiB limit", ref->path,
                          ref->mark.line + 1, ref->mark.column + 1, ref->key, ld->path);
    else
        rc = mc_error_set(ld->err, MC_ERR_INPUT,
                          "%s: file is larger than the 1 MiB limit for YAML inputs (got %lld bytes)", ld->path,
                          S_ISREG(st.st_mode) ? (long long)st.st_size : (long long)ld->len);
done:
    if (f != NULL)
        fclose(f);
    return rc;
}

/* Valid UTF-8 without control characters (tab, LF, CR allowed); a BOM is allowed at the start. */
static enum mc_err_code ld_scan_bytes(struct ld *ld)
{
    const unsigned char *b = ld->buf;
    yaml_mark_t m = {0, 0, 0};
    size_t i = 0;
    if (ld->len >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF)
        i = 3;
    while (i < ld->len) {
        unsigned c = b[i];
        size_t w;
        unsigned long cp;
        if (c < 0x80) {
            w = 1;
            cp = c;
        } else if (c >= 0xC2 && c <= 0xDF) {
            w = 2;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            w = 3;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            w = 4;
            cp = c & 0x07;
        } else {
            return ld_fail(ld, m, NULL, "file is not valid UTF-8 text (got byte 0x%02x)", c);
        }
        if (i + w > ld->len)
            return ld_fail(ld, m, NULL, "file is not valid UTF-8 text (got a truncated sequence at the end)");
        for (size_t k = 1; k < w; k++) {
            if ((b[i + k] & 0xC0) != 0x80)
                return ld_fail(ld, m, NULL, "file is not valid UTF-8 text (got byte 0x%02x followed by 0x%02x)", c,
                               b[i + k]);
            cp = (cp << 6) | (b[i + k] & 0x3F);
        }
        if ((w == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (w == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return ld_fail(ld, m, NULL, "file is not valid UTF-8 text (got an overlong or surrogate sequence)");
        if ((cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0x7F ||
            (cp >= 0x80 && cp <= 0x9F && cp != 0x85) || cp == 0xFFFE || cp == 0xFFFF)
            return ld_fail(ld, m, NULL, "control character U+%04lX is not allowed in YAML; is this a binary file?", cp);
        if (cp == '\n' || (cp == '\r' && (i + 1 >= ld->len || b[i + 1] != '\n'))) {
            m.line++;
            m.column = 0;
        } else if (cp != '\r') {
            m.column++;
        }
        i += w;
    }
    return MC_ERR_NONE;
}

/* The byte at a libyaml mark (line and column count characters), or -1. */
static int ld_char_at(const struct ld *ld, yaml_mark_t m)
{
    size_t i = 0, line = 0, col = 0;
    while (i < ld->len && line < m.line) {
        if (ld->buf[i] == '\n' || (ld->buf[i] == '\r' && (i + 1 >= ld->len || ld->buf[i + 1] != '\n')))
            line++;
        i++;
    }
    while (i < ld->len && col < m.column) {
        i++;
        while (i < ld->len && (ld->buf[i] & 0xC0) == 0x80)
            i++;
        col++;
    }
    return i < ld->len ? ld->buf[i] : -1;
}

static enum mc_err_code ld_parser_error(const struct ld *ld, const yaml_parser_t *p)
{
    if (p->error == YAML_MEMORY_ERROR)
        return ld_nomem(ld);
    if (p->error == YAML_READER_ERROR) { /* the byte scan catches these first */
        yaml_mark_t at = {0, 0, 0};
        for (size_t i = 0; i < p->problem_offset && i < ld->len; i++) {
            if (ld->buf[i] == '\n') {
                at.line++;
                at.column = 0;
            } else if ((ld->buf[i] & 0xC0) != 0x80) {
                at.column++;
            }
        }
        return ld_fail(ld, at, NULL, "cannot decode the file: %s", p->problem ? p->problem : "reader error");
    }
    yaml_mark_t m = p->problem_mark;
    const char *problem = p->problem ? p->problem : "unknown error";
    if (ld_char_at(ld, m) == '\t' || strstr(problem, "tab") != NULL)
        return ld_fail(ld, m, NULL, "tab character in indentation; YAML indents with spaces only (libyaml: %s)",
                       problem);
    if (p->context != NULL)
        return ld_fail(ld, m, NULL, "YAML syntax error: %s (%s at %zu:%zu)", problem, p->context,
                       p->context_mark.line + 1, p->context_mark.column + 1);
    return ld_fail(ld, m, NULL, "YAML syntax error: %s", problem);
}

/* Where the event pass stands: one frame per open mapping or sequence. */
struct ev_frame {
    bool is_map;
    bool at_value; /* mapping: the next node is a value */
    size_t index;  /* sequence: index of the next item */
    char key[64];  /* mapping: the key of the value being read */
};

static void ev_path(const struct ev_frame *st, int depth, char *out)
{
    char tmp[KP_LEN];
    out[0] = '\0';
    for (int i = 0; i < depth; i++) {
        if (st[i].is_map) {
            if (!st[i].at_value)
                break;
            kp_key(tmp, out, st[i].key);
        } else {
            kp_index(tmp, out, st[i].index);
        }
        memcpy(out, tmp, KP_LEN);
    }
}

/* After a node ends, its parent moves on to the next key, value or item. */
static void ev_node_done(struct ev_frame *st, int depth, const yaml_event_t *ev)
{
    if (depth == 0)
        return;
    struct ev_frame *top = &st[depth - 1];
    if (!top->is_map) {
        top->index++;
    } else if (!top->at_value) {
        top->at_value = true;
        if (ev != NULL && ev->type == YAML_SCALAR_EVENT)
            excerpt((const char *)ev->data.scalar.value, ev->data.scalar.length, top->key, sizeof top->key);
        else
            snprintf(top->key, sizeof top->key, "?");
    } else {
        top->at_value = false;
    }
}

static enum mc_err_code ld_scan_events(struct ld *ld)
{
    enum mc_err_code rc = MC_ERR_NONE;
    yaml_parser_t parser;
    yaml_event_t ev;
    struct ev_frame st[MAX_DEPTH];
    int depth = 0, docs = 0;
    bool done = false;
    char kp[KP_LEN];

    if (!yaml_parser_initialize(&parser))
        return ld_nomem(ld);
    yaml_parser_set_input_string(&parser, ld->buf, ld->len);
    yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);
    while (!done && rc == MC_ERR_NONE) {
        if (!yaml_parser_parse(&parser, &ev)) {
            rc = ld_parser_error(ld, &parser);
            break;
        }
        const yaml_char_t *anchor = NULL, *tag = NULL;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1)
                rc = ld_fail(ld, ev.start_mark, NULL, "only one YAML document per file is allowed (got a second one)");
            break;
        case YAML_ALIAS_EVENT:
            ev_path(st, depth, kp);
            rc = ld_fail(ld, ev.start_mark, kp, "aliases are not allowed; write the value out (got *%s)",
                         (const char *)ev.data.alias.anchor);
            break;
        case YAML_SCALAR_EVENT:
            anchor = ev.data.scalar.anchor;
            tag = ev.data.scalar.tag;
            break;
        case YAML_SEQUENCE_START_EVENT:
            anchor = ev.data.sequence_start.anchor;
            tag = ev.data.sequence_start.tag;
            break;
        case YAML_MAPPING_START_EVENT:
            anchor = ev.data.mapping_start.anchor;
            tag = ev.data.mapping_start.tag;
            break;
        default:
            break;
        }
        if (rc == MC_ERR_NONE && (anchor != NULL || tag != NULL)) {
            ev_path(st, depth, kp);
            if (anchor != NULL)
                rc = ld_fail(ld, ev.start_mark, kp, "anchors are not allowed (got &%s)", (const char *)anchor);
            else
                rc = ld_fail(ld, ev.start_mark, kp, "explicit tags are not allowed (got %s)", (const char *)tag);
        }
        if (rc == MC_ERR_NONE) {
            if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
                if (depth == MAX_DEPTH) {
                    ev_path(st, depth, kp);
                    rc = ld_fail(ld, ev.start_mark, kp, "nesting deeper than %d levels is not allowed", MAX_DEPTH);
                } else {
                    memset(&st[depth], 0, sizeof st[depth]);
                    st[depth++].is_map = ev.type == YAML_MAPPING_START_EVENT;
                }
            } else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
                depth--;
                ev_node_done(st, depth, NULL);
            } else if (ev.type == YAML_SCALAR_EVENT) {
                ev_node_done(st, depth, &ev);
            }
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    if (rc == MC_ERR_NONE && docs == 0) {
        yaml_mark_t m = {0, 0, 0};
        rc = ld_fail(ld, m, NULL, "file is empty (no YAML document)");
    }
    return rc;
}

static enum mc_err_code ld_compose(struct ld *ld)
{
    yaml_parser_t parser;
    enum mc_err_code rc = MC_ERR_NONE;
    if (!yaml_parser_initialize(&parser))
        return ld_nomem(ld);
    yaml_parser_set_input_string(&parser, ld->buf, ld->len);
    yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);
    if (!yaml_parser_load(&parser, &ld->doc))
        rc = ld_parser_error(ld, &parser); /* the document is deleted by libyaml */
    else
        ld->have_doc = true;
    yaml_parser_delete(&parser);
    return rc;
}

static void ld_close(struct ld *ld)
{
    if (ld->have_doc)
        yaml_document_delete(&ld->doc);
    free(ld->buf);
    ld->buf = NULL;
    ld->have_doc = false;
}

/* Reads, checks and composes ld->path; *root receives the root mapping. */
static enum mc_err_code ld_open(struct ld *ld, const struct file_ref *ref, yaml_node_t **root)
{
    enum mc_err_code rc;
    char got[GOT_LEN + 16];
    if ((rc = ld_read(ld, ref)) != MC_ERR_NONE || (rc = ld_scan_bytes(ld)) != MC_ERR_NONE ||
        (rc = ld_scan_events(ld)) != MC_ERR_NONE || (rc = ld_compose(ld)) != MC_ERR_NONE)
        return rc;
    *root = yaml_document_get_root_node(&ld->doc);
    if (*root == NULL) {
        yaml_mark_t m = {0, 0, 0};
        return ld_fail(ld, m, NULL, "file is empty (no YAML document)");
    }
    if ((*root)->type != YAML_MAPPING_NODE) {
        node_describe(*root, got, sizeof got);
        return ld_fail(ld, (*root)->start_mark, NULL, "the top level must be a mapping of keys (got %s)", got);
    }
    return MC_ERR_NONE;
}

/* ---- typed readers ----------------------------------------------------------------------------- */

static enum mc_err_code ld_expect(struct ld *ld, const yaml_node_t *n, const char *kp, yaml_node_type_t type)
{
    char got[GOT_LEN + 16];
    if (n->type == type)
        return MC_ERR_NONE;
    node_describe(n, got, sizeof got);
    const char *want = type == YAML_MAPPING_NODE ? "a mapping" : "a sequence";
    return ld_fail(ld, n->start_mark, kp, "expected %s (got %s)", want, got);
}

/* A key must be a non-empty scalar string. */
static enum mc_err_code ld_key(struct ld *ld, const yaml_node_t *key, const char *kp, const char **name)
{
    char got[GOT_LEN + 16];
    if (key->type != YAML_SCALAR_NODE || strlen((const char *)key->data.scalar.value) != key->data.scalar.length) {
        node_describe(key, got, sizeof got);
        return ld_fail(ld, key->start_mark, kp, "keys must be plain strings (got %s)", got);
    }
    *name = (const char *)key->data.scalar.value;
    return MC_ERR_NONE;
}

/* Checks that every key of `map` is one of names[0..n), at most once, and fills vals[i] / keys[i]
 * (either may be NULL) with the value and key node of names[i], or NULL when absent. */
static enum mc_err_code ld_fields(struct ld *ld, yaml_node_t *map, const char *kp, const char *const *names, size_t n,
                                  yaml_node_t **vals, yaml_node_t **keys)
{
    enum mc_err_code rc;
    yaml_node_t *seen[MC_SCENARIO_COUNT + 8] = {0};
    char valid[512];
    if (n > COUNT(seen))
        return mc_error_set(ld->err, MC_ERR_INTERNAL, "%s: too many field names", ld->path);
    for (size_t i = 0; i < n; i++) {
        if (vals != NULL)
            vals[i] = NULL;
        if (keys != NULL)
            keys[i] = NULL;
    }
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *key = ld_node(ld, p->key);
        const char *name = NULL;
        if ((rc = ld_key(ld, key, kp, &name)) != MC_ERR_NONE)
            return rc;
        size_t i = 0;
        while (i < n && strcmp(name, names[i]) != 0)
            i++;
        if (i == n) {
            char ex[GOT_LEN + 8];
            excerpt(name, strlen(name), ex, sizeof ex);
            if (n == 0)
                return ld_fail(ld, key->start_mark, kp, "unknown key '%s' (this takes no keys; write {})", ex);
            join_names(valid, sizeof valid, names, n);
            return ld_fail(ld, key->start_mark, kp, "unknown key '%s' (valid keys: %s)", ex, valid);
        }
        if (seen[i] != NULL)
            return ld_fail(ld, key->start_mark, kp, "duplicate key '%s' (first at %zu:%zu)", name,
                           seen[i]->start_mark.line + 1, seen[i]->start_mark.column + 1);
        seen[i] = key;
        if (vals != NULL)
            vals[i] = ld_node(ld, p->value);
        if (keys != NULL)
            keys[i] = key;
    }
    return MC_ERR_NONE;
}

static enum mc_err_code ld_require(struct ld *ld, const yaml_node_t *map, const char *kp, const char *name,
                                   const yaml_node_t *val)
{
    if (val != NULL)
        return MC_ERR_NONE;
    return ld_fail(ld, map->start_mark, kp, "missing required key '%s'", name);
}

/* Index of `name` in names[0..n); the caller has checked it is there (ld_fields). */
static size_t name_index(const char *const *names, size_t n, const yaml_node_t *key)
{
    size_t i = 0;
    while (i + 1 < n && strcmp((const char *)key->data.scalar.value, names[i]) != 0)
        i++;
    return i;
}

/* A string scalar (plain or quoted), not null, not empty, without NUL; points into the document. */
static enum mc_err_code ld_string(struct ld *ld, const yaml_node_t *n, const char *kp, const char **out)
{
    char got[GOT_LEN + 16];
    if (n->type != YAML_SCALAR_NODE || scalar_is_null(n)) {
        node_describe(n, got, sizeof got);
        return ld_fail(ld, n->start_mark, kp, "expected a non-empty string (got %s)", got);
    }
    const char *s = (const char *)n->data.scalar.value;
    if (strlen(s) != n->data.scalar.length)
        return ld_fail(ld, n->start_mark, kp, "strings must not contain NUL characters");
    if (s[0] == '\0')
        return ld_fail(ld, n->start_mark, kp, "must not be empty (got \"\")");
    *out = s;
    return MC_ERR_NONE;
}

/* A string of [a-z0-9._-], at most NAME_MAX_BYTES long. */
static enum mc_err_code ld_name(struct ld *ld, const yaml_node_t *n, const char *kp, const char *what, const char **out)
{
    enum mc_err_code rc;
    char got[GOT_LEN + 16];
    if ((rc = ld_string(ld, n, kp, out)) != MC_ERR_NONE)
        return rc;
    size_t len = strlen(*out);
    bool ok = len <= NAME_MAX_BYTES;
    for (size_t i = 0; ok && i < len; i++) {
        char ch = (*out)[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
    }
    if (ok)
        return MC_ERR_NONE;
    node_describe(n, got, sizeof got);
    return ld_fail(ld, n->start_mark, kp, "%s may use only a-z, 0-9, '.', '_' and '-', at most %d characters (got %s)",
                   what, NAME_MAX_BYTES, got);
}

/* A plain decimal integer in [lo, hi]; cap_msg (may be NULL) explains hi. */
static enum mc_err_code ld_int(struct ld *ld, const yaml_node_t *n, const char *kp, int64_t lo, int64_t hi,
                               const char *cap_msg, int64_t *out)
{
    char got[GOT_LEN + 16];
    node_describe(n, got, sizeof got);
    if (n->type != YAML_SCALAR_NODE)
        return ld_fail(ld, n->start_mark, kp, "expected an integer (got %s)", got);
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return ld_fail(ld, n->start_mark, kp, "expected an integer, not a quoted string (got %s)", got);
    const char *s = (const char *)n->data.scalar.value;
    const char *d = s + (s[0] == '-' || s[0] == '+');
    bool digits = d[0] != '\0';
    for (const char *q = d; *q != '\0'; q++)
        digits = digits && *q >= '0' && *q <= '9';
    if (!digits)
        return ld_fail(ld, n->start_mark, kp, "expected a decimal integer (got %s)", got);
    if (d[0] == '0' && d[1] != '\0')
        return ld_fail(ld, n->start_mark, kp, "leading zeros are not allowed (YAML 1.1 reads them as octal) (got %s)",
                       got);
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || end == s || *end != '\0')
        return ld_fail(ld, n->start_mark, kp, "integer out of range (got %s)", got);
    if (v < lo)
        return ld_fail(ld, n->start_mark, kp, "must be >= %lld (got %lld)", (long long)lo, v);
    if (v > hi)
        return ld_fail(ld, n->start_mark, kp, "must be <= %lld%s%s (got %lld)", (long long)hi, cap_msg ? "; " : "",
                       cap_msg ? cap_msg : "", v);
    *out = (int64_t)v;
    return MC_ERR_NONE;
}

/* An optional integer: `def` when n is NULL. */
static enum mc_err_code ld_int_opt(struct ld *ld, const yaml_node_t *n, const char *kp, int64_t lo, int64_t hi,
                                   const char *cap_msg, int64_t def, int64_t *out)
{
    if (n == NULL) {
        *out = def;
        return MC_ERR_NONE;
    }
    return ld_int(ld, n, kp, lo, hi, cap_msg, out);
}

/* A required token count in [lo, MC_CASE_MAX_TOKENS]. */
static enum mc_err_code ld_tokens(struct ld *ld, const yaml_node_t *n, const char *kp, int64_t lo, int64_t *out)
{
    return ld_int(ld, n, kp, lo, MC_CASE_MAX_TOKENS, TOKEN_CAP_MSG, out);
}

/* An optional seed, 0..INT64_MAX, default 0. */
static enum mc_err_code ld_seed(struct ld *ld, const yaml_node_t *n, const char *kp, uint64_t *out)
{
    int64_t v = 0;
    enum mc_err_code rc = ld_int_opt(ld, n, kp, 0, INT64_MAX, NULL, 0, &v);
    *out = (uint64_t)v;
    return rc;
}

/* A finite number >= 0 written as a plain decimal integer or float. */
static enum mc_err_code ld_nonneg_number(struct ld *ld, const yaml_node_t *n, const char *kp, double *out)
{
    char got[GOT_LEN + 16];
    node_describe(n, got, sizeof got);
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return ld_fail(ld, n->start_mark, kp, "expected a number (got %s)", got);
    const char *s = (const char *)n->data.scalar.value;
    bool digit = false, ok = s[0] != '\0';
    for (const char *q = s; *q != '\0'; q++) {
        digit = digit || (*q >= '0' && *q <= '9');
        ok = ok && strchr("0123456789.eE+-", *q) != NULL;
    }
    if (!ok || !digit)
        return ld_fail(ld, n->start_mark, kp, "expected a decimal number (got %s)", got);
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0')
        return ld_fail(ld, n->start_mark, kp, "expected a decimal number (got %s)", got);
    if (!isfinite(v))
        return ld_fail(ld, n->start_mark, kp, "must be finite (got %s)", got);
    if (v < 0)
        return ld_fail(ld, n->start_mark, kp, "must be >= 0 (got %s)", got);
    *out = v + 0.0; /* no -0 */
    return MC_ERR_NONE;
}

/* A non-empty sequence of at most max_items integers in [lo, hi]; increasing: strictly increasing. */
static enum mc_err_code ld_int_list(struct ld *ld, const yaml_node_t *n, const char *kp, int64_t lo, int64_t hi,
                                    size_t max_items, bool increasing, int64_t **out, int *n_out)
{
    enum mc_err_code rc;
    char ikp[KP_LEN];
    if ((rc = ld_expect(ld, n, kp, YAML_SEQUENCE_NODE)) != MC_ERR_NONE)
        return rc;
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count == 0)
        return ld_fail(ld, n->start_mark, kp, "must not be empty (got [])");
    if (count > max_items)
        return ld_fail(ld, n->start_mark, kp, "at most %zu entries are allowed (got %zu)", max_items, count);
    int64_t *v = case_calloc(count, sizeof *v);
    if (v == NULL)
        return ld_nomem(ld);
    for (size_t i = 0; i < count; i++) {
        const yaml_node_t *item = ld_node(ld, n->data.sequence.items.start[i]);
        kp_index(ikp, kp, i);
        if ((rc = ld_int(ld, item, ikp, lo, hi, TOKEN_CAP_MSG, &v[i])) != MC_ERR_NONE)
            goto fail;
        if (increasing && i > 0 && v[i] <= v[i - 1]) {
            rc = ld_fail(ld, item->start_mark, kp, "split points must be strictly increasing (got %lld after %lld)",
                         (long long)v[i], (long long)v[i - 1]);
            goto fail;
        }
    }
    *out = v;
    *n_out = (int)count;
    return MC_ERR_NONE;
fail:
    free(v);
    return rc;
}

/* ---- scenarios --------------------------------------------------------------------------------- */

static const char *const KEYS_NONE[] = {NULL};
static const char *const KEYS_DECODE[] = {"prefill"};
static const char *const KEYS_CHUNKED[] = {"splits", "random"};
static const char *const KEYS_CAUSALITY[] = {"prefill", "len", "seed"};
static const char *const KEYS_SPECULATIVE[] = {"prefill", "len", "accept", "seed"};
static const char *const KEYS_LEFT_PADDED[] = {"prefill", "decode"};
static const char *const KEYS_CHUNK_SIZES[] = {"chunk_sizes"};
static const char *const KEYS_RANDOM[] = {"sets", "seed"};

struct scenario_keys {
    const char *const *names;
    size_t n;
};

static const struct scenario_keys SCENARIO_KEYS[MC_SCENARIO_COUNT] = {
    [MC_SCENARIO_PREFILL] = {KEYS_NONE, 0},
    [MC_SCENARIO_DECODE] = {KEYS_DECODE, COUNT(KEYS_DECODE)},
    [MC_SCENARIO_CHUNKED] = {KEYS_CHUNKED, COUNT(KEYS_CHUNKED)},
    [MC_SCENARIO_FIRST_TOKEN_CAUSALITY] = {KEYS_CAUSALITY, COUNT(KEYS_CAUSALITY)},
    [MC_SCENARIO_SPECULATIVE_VERIFY] = {KEYS_SPECULATIVE, COUNT(KEYS_SPECULATIVE)},
    [MC_SCENARIO_LEFT_PADDED_BATCH] = {KEYS_LEFT_PADDED, COUNT(KEYS_LEFT_PADDED)},
    [MC_SCENARIO_RIGHT_PADDED_BATCH] = {KEYS_NONE, 0},
    [MC_SCENARIO_CHUNK_SIZE_INVARIANCE] = {KEYS_CHUNK_SIZES, COUNT(KEYS_CHUNK_SIZES)},
    [MC_SCENARIO_BATCH_INVARIANCE] = {KEYS_NONE, 0},
};

static void scenario_free(struct mc_scenario_spec *s)
{
    for (int i = 0; i < s->n_split_sets; i++)
        free(s->split_sets[i].points);
    free(s->split_sets);
    free(s->chunk_sizes);
    memset(s, 0, sizeof *s);
}

static enum mc_err_code ld_chunked(struct ld *ld, yaml_node_t *map, const char *kp, yaml_node_t **v,
                                   struct mc_scenario_spec *s)
{
    enum mc_err_code rc;
    char skp[KP_LEN], ikp[KP_LEN];
    if (v[0] == NULL && v[1] == NULL)
        return ld_fail(ld, map->start_mark, kp, "needs at least one of 'splits' or 'random' (got neither)");
    if (v[0] != NULL) {
        kp_key(skp, kp, "splits");
        if ((rc = ld_expect(ld, v[0], skp, YAML_SEQUENCE_NODE)) != MC_ERR_NONE)
            return rc;
        size_t count = (size_t)(v[0]->data.sequence.items.top - v[0]->data.sequence.items.start);
        if (count == 0)
            return ld_fail(ld, v[0]->start_mark, skp, "must not be empty; omit 'splits' instead (got [])");
        if (count > MAX_SPLIT_SETS)
            return ld_fail(ld, v[0]->start_mark, skp, "at most %d split sets are allowed (got %zu)", MAX_SPLIT_SETS,
                           count);
        s->split_sets = case_calloc(count, sizeof *s->split_sets);
        if (s->split_sets == NULL)
            return ld_nomem(ld);
        for (size_t i = 0; i < count; i++) {
            const yaml_node_t *set = ld_node(ld, v[0]->data.sequence.items.start[i]);
            int n = 0;
            kp_index(ikp, skp, i);
            rc = ld_int_list(ld, set, ikp, 1, MC_CASE_MAX_TOKENS, MC_CASE_MAX_TOKENS, true, &s->split_sets[i].points,
                             &n);
            if (rc != MC_ERR_NONE)
                return rc;
            s->split_sets[i].n = n;
            s->n_split_sets = (int)i + 1;
        }
    }
    if (v[1] != NULL) {
        yaml_node_t *rv[COUNT(KEYS_RANDOM)];
        kp_key(skp, kp, "random");
        if ((rc = ld_expect(ld, v[1], skp, YAML_MAPPING_NODE)) != MC_ERR_NONE ||
            (rc = ld_fields(ld, v[1], skp, KEYS_RANDOM, COUNT(KEYS_RANDOM), rv, NULL)) != MC_ERR_NONE ||
            (rc = ld_require(ld, v[1], skp, "sets", rv[0])) != MC_ERR_NONE)
            return rc;
        kp_key(ikp, skp, "sets");
        if ((rc = ld_int(ld, rv[0], ikp, 1, MAX_RANDOM_SETS, "random split sets are capped at 1000",
                         &s->random_sets)) != MC_ERR_NONE)
            return rc;
        kp_key(ikp, skp, "seed");
        if ((rc = ld_seed(ld, rv[1], ikp, &s->seed)) != MC_ERR_NONE)
            return rc;
    }
    return MC_ERR_NONE;
}

/* One `name: {params}` entry of `scenarios`. */
static enum mc_err_code ld_scenario(struct ld *ld, enum mc_scenario_kind kind, yaml_node_t *key, yaml_node_t *map,
                                    struct mc_scenario_spec *s)
{
    enum mc_err_code rc;
    char kp[KP_LEN], pk[4][KP_LEN];
    yaml_node_t *v[4] = {0};
    const struct scenario_keys *keys = &SCENARIO_KEYS[kind];

    s->kind = kind;
    s->line = (int)key->start_mark.line + 1;
    s->column = (int)key->start_mark.column + 1;
    kp_key(kp, "scenarios", SCENARIO_NAMES[kind]);
    if (map->type != YAML_MAPPING_NODE) {
        char got[GOT_LEN + 16];
        node_describe(map, got, sizeof got);
        return ld_fail(ld, map->start_mark, kp, "expected a mapping of parameters, {} for none (got %s)", got);
    }
    if ((rc = ld_fields(ld, map, kp, keys->names, keys->n, v, NULL)) != MC_ERR_NONE)
        return rc;
    for (size_t i = 0; i < keys->n; i++) {
        bool optional =
            strcmp(keys->names[i], "seed") == 0 || strcmp(keys->names[i], "decode") == 0 || kind == MC_SCENARIO_CHUNKED;
        if (!optional && (rc = ld_require(ld, map, kp, keys->names[i], v[i])) != MC_ERR_NONE)
            return rc;
        kp_key(pk[i], kp, keys->names[i]);
    }
    switch (kind) {
    case MC_SCENARIO_DECODE:
        rc = ld_tokens(ld, v[0], pk[0], 1, &s->prefill);
        break;
    case MC_SCENARIO_CHUNKED:
        rc = ld_chunked(ld, map, kp, v, s);
        break;
    case MC_SCENARIO_FIRST_TOKEN_CAUSALITY:
        if ((rc = ld_tokens(ld, v[0], pk[0], 1, &s->prefill)) == MC_ERR_NONE &&
            (rc = ld_tokens(ld, v[1], pk[1], 2, &s->len)) == MC_ERR_NONE)
            rc = ld_seed(ld, v[2], pk[2], &s->seed);
        break;
    case MC_SCENARIO_SPECULATIVE_VERIFY:
        if ((rc = ld_tokens(ld, v[0], pk[0], 1, &s->prefill)) == MC_ERR_NONE &&
            (rc = ld_tokens(ld, v[1], pk[1], 2, &s->len)) == MC_ERR_NONE &&
            (rc = ld_tokens(ld, v[2], pk[2], 0, &s->accept)) == MC_ERR_NONE &&
            (rc = ld_seed(ld, v[3], pk[3], &s->seed)) == MC_ERR_NONE && s->accept >= s->len)
            rc = ld_fail(ld, v[2]->start_mark, pk[2], "must be < len (%lld) (got %lld)", (long long)s->len,
                         (long long)s->accept);
        break;
    case MC_SCENARIO_LEFT_PADDED_BATCH:
        if ((rc = ld_tokens(ld, v[0], pk[0], 1, &s->prefill)) == MC_ERR_NONE)
            rc = ld_int_opt(ld, v[1], pk[1], 0, MC_CASE_MAX_TOKENS, TOKEN_CAP_MSG, 1, &s->decode_steps);
        break;
    case MC_SCENARIO_CHUNK_SIZE_INVARIANCE:
        rc = ld_int_list(ld, v[0], pk[0], 1, MC_CASE_MAX_TOKENS, MAX_CHUNK_SIZES, false, &s->chunk_sizes,
                         &s->n_chunk_sizes);
        break;
    default: /* prefill, right_padded_batch, batch_invariance: no parameters */
        break;
    }
    return rc;
}

static enum mc_err_code ld_scenarios(struct ld *ld, yaml_node_t *map, struct mc_case *c)
{
    enum mc_err_code rc;
    if ((rc = ld_expect(ld, map, "scenarios", YAML_MAPPING_NODE)) != MC_ERR_NONE ||
        (rc = ld_fields(ld, map, "scenarios", SCENARIO_NAMES, MC_SCENARIO_COUNT, NULL, NULL)) != MC_ERR_NONE)
        return rc;
    size_t count = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
    if (count == 0)
        return ld_fail(ld, map->start_mark, "scenarios", "must name at least one scenario (got {})");
    c->scenarios = case_calloc(count, sizeof *c->scenarios);
    if (c->scenarios == NULL)
        return ld_nomem(ld);
    for (size_t i = 0; i < count; i++) {
        yaml_node_pair_t *p = &map->data.mapping.pairs.start[i];
        yaml_node_t *key = ld_node(ld, p->key);
        enum mc_scenario_kind kind = (enum mc_scenario_kind)name_index(SCENARIO_NAMES, MC_SCENARIO_COUNT, key);
        c->n_scenarios = (int)i + 1;
        if ((rc = ld_scenario(ld, kind, key, ld_node(ld, p->value), &c->scenarios[i])) != MC_ERR_NONE)
            return rc;
    }
    return MC_ERR_NONE;
}

/* ---- the case ---------------------------------------------------------------------------------- */

enum { CK_ID, CK_WHY, CK_FAMILY, CK_GOLDEN, CK_TOLERANCE, CK_BACKENDS, CK_DTYPES, CK_SCENARIOS, CK_COUNT };
static const char *const CASE_KEYS[CK_COUNT] = {"id",        "why",      "family", "golden",
                                                "tolerance", "backends", "dtypes", "scenarios"};

/* rel resolved against the directory of `base` (unchanged when absolute or base has no directory). */
static char *path_resolve(const char *base, const char *rel)
{
    const char *slash = strrchr(base, '/');
    if (rel[0] == '/' || slash == NULL)
        return case_strdup(rel);
    size_t dir = (size_t)(slash - base) + 1, len = strlen(rel);
    char *out = case_calloc(dir + len + 1, 1);
    if (out != NULL) {
        memcpy(out, base, dir);
        memcpy(out + dir, rel, len + 1);
    }
    return out;
}

static enum mc_err_code ld_backends(struct ld *ld, const yaml_node_t *n, struct mc_case *c)
{
    enum mc_err_code rc;
    char kp[KP_LEN];
    if ((rc = ld_expect(ld, n, "backends", YAML_SEQUENCE_NODE)) != MC_ERR_NONE)
        return rc;
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count == 0)
        return ld_fail(ld, n->start_mark, "backends", "must name at least one backend (got [])");
    if (count > MAX_BACKENDS)
        return ld_fail(ld, n->start_mark, "backends", "at most %d backends are allowed (got %zu)", MAX_BACKENDS, count);
    c->backends = case_calloc(count, sizeof *c->backends);
    if (c->backends == NULL)
        return ld_nomem(ld);
    for (size_t i = 0; i < count; i++) {
        const yaml_node_t *item = ld_node(ld, n->data.sequence.items.start[i]);
        const char *name = NULL;
        kp_index(kp, "backends", i);
        if ((rc = ld_name(ld, item, kp, "backend names", &name)) != MC_ERR_NONE)
            return rc;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(c->backends[j], name) == 0)
                return ld_fail(ld, item->start_mark, kp, "duplicate backend (got %s again)", name);
        }
        if ((c->backends[i] = case_strdup(name)) == NULL)
            return ld_nomem(ld);
        c->n_backends = (int)i + 1;
    }
    return MC_ERR_NONE;
}

static enum mc_err_code ld_dtypes(struct ld *ld, const yaml_node_t *n, struct mc_case *c)
{
    enum mc_err_code rc;
    char kp[KP_LEN], got[GOT_LEN + 16], valid[64];
    if ((rc = ld_expect(ld, n, "dtypes", YAML_SEQUENCE_NODE)) != MC_ERR_NONE)
        return rc;
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count == 0)
        return ld_fail(ld, n->start_mark, "dtypes", "must name at least one dtype (got [])");
    for (size_t i = 0; i < count; i++) {
        const yaml_node_t *item = ld_node(ld, n->data.sequence.items.start[i]);
        const char *name = NULL;
        enum mc_dtype d;
        kp_index(kp, "dtypes", i);
        if ((rc = ld_string(ld, item, kp, &name)) != MC_ERR_NONE)
            return rc;
        if (mc_dtype_from_name(name, &d) != 0) {
            node_describe(item, got, sizeof got);
            join_names(valid, sizeof valid, DTYPE_NAMES, COUNT(DTYPE_NAMES));
            return ld_fail(ld, item->start_mark, kp, "unknown dtype; valid: %s (got %s)", valid, got);
        }
        for (int j = 0; j < c->n_dtypes; j++) {
            if (c->dtypes[j] == d)
                return ld_fail(ld, item->start_mark, kp, "duplicate dtype (got %s again)", name);
        }
        c->dtypes[c->n_dtypes++] = d; /* at most 4: duplicates are refused */
    }
    return MC_ERR_NONE;
}

static enum mc_err_code tol_load(const char *path, const struct file_ref *ref, struct mc_tolerance_profile *p,
                                 struct mc_error *err);

static enum mc_err_code ld_case(struct ld *ld, yaml_node_t *root, struct mc_case *c)
{
    enum mc_err_code rc;
    yaml_node_t *v[CK_COUNT], *k[CK_COUNT];
    const char *s = NULL;
    char got[GOT_LEN + 16], valid[128];

    if ((rc = ld_fields(ld, root, "", CASE_KEYS, CK_COUNT, v, k)) != MC_ERR_NONE)
        return rc;
    for (int i = 0; i < CK_COUNT; i++) {
        if ((rc = ld_require(ld, root, "", CASE_KEYS[i], v[i])) != MC_ERR_NONE)
            return rc;
    }
    if ((rc = ld_name(ld, v[CK_ID], "id", "id", &s)) != MC_ERR_NONE)
        return rc;
    if ((c->id = case_strdup(s)) == NULL)
        return ld_nomem(ld);
    if ((rc = ld_string(ld, v[CK_WHY], "why", &s)) != MC_ERR_NONE)
        return rc;
    if ((c->why = case_strdup(s)) == NULL)
        return ld_nomem(ld);
    if ((rc = ld_string(ld, v[CK_FAMILY], "family", &s)) != MC_ERR_NONE)
        return rc;
    if (mc_family_from_name(s, &c->family) != 0) {
        node_describe(v[CK_FAMILY], got, sizeof got);
        join_names(valid, sizeof valid, FAMILY_NAMES, COUNT(FAMILY_NAMES));
        return ld_fail(ld, v[CK_FAMILY]->start_mark, "family", "unknown family; valid: %s (got %s)", valid, got);
    }
    if ((rc = ld_string(ld, v[CK_GOLDEN], "golden", &s)) != MC_ERR_NONE)
        return rc;
    if ((c->golden_path = path_resolve(ld->path, s)) == NULL)
        return ld_nomem(ld);
    if ((rc = ld_backends(ld, v[CK_BACKENDS], c)) != MC_ERR_NONE ||
        (rc = ld_dtypes(ld, v[CK_DTYPES], c)) != MC_ERR_NONE ||
        (rc = ld_scenarios(ld, v[CK_SCENARIOS], c)) != MC_ERR_NONE)
        return rc;
    if ((rc = ld_string(ld, v[CK_TOLERANCE], "tolerance", &s)) != MC_ERR_NONE)
        return rc;
    char *tol_path = path_resolve(ld->path, s);
    if (tol_path == NULL)
        return ld_nomem(ld);
    struct file_ref ref = {ld->path, k[CK_TOLERANCE]->start_mark, "tolerance"};
    rc = tol_load(tol_path, &ref, &c->tolerance, ld->err);
    free(tol_path);
    return rc;
}

enum mc_err_code mc_case_load(const char *path, struct mc_case *c, struct mc_error *err)
{
    enum mc_err_code rc;
    struct mc_case tmp = {0};
    struct ld ld = {.path = path, .err = err};
    yaml_node_t *root = NULL;

    memset(c, 0, sizeof *c);
    if ((tmp.path = case_strdup(path)) == NULL) {
        rc = ld_nomem(&ld);
        goto done;
    }
    if ((rc = ld_open(&ld, NULL, &root)) != MC_ERR_NONE)
        goto done;
    rc = ld_case(&ld, root, &tmp);
done:
    ld_close(&ld);
    if (rc == MC_ERR_NONE)
        *c = tmp;
    else
        mc_case_free(&tmp);
    return rc;
}

void mc_case_free(struct mc_case *c)
{
    if (c == NULL)
        return;
    free(c->path);
    free(c->id);
    free(c->why);
    free(c->golden_path);
    for (int i = 0; i < c->n_backends; i++)
        free(c->backends[i]);
    free(c->backends);
    for (int i = 0; i < c->n_scenarios; i++)
        scenario_free(&c->scenarios[i]);
    free(c->scenarios);
    mc_tolerance_free(&c->tolerance);
    memset(c, 0, sizeof *c);
}

/* ---- tolerance profiles ------------------------------------------------------------------------ */

enum { TK_PROFILE, TK_WHY, TK_DEVICES, TK_COUNT };
static const char *const TOL_KEYS[TK_COUNT] = {"profile", "why", "devices"};
static const char *const ENTRY_KEYS[] = {"atol", "rtol", "why"};

static enum mc_err_code ld_tol_entry(struct ld *ld, yaml_node_t *n, const char *kp, struct mc_tolerance_entry *e)
{
    enum mc_err_code rc;
    yaml_node_t *v[COUNT(ENTRY_KEYS)];
    char fkp[KP_LEN];
    const char *why = NULL;
    if ((rc = ld_expect(ld, n, kp, YAML_MAPPING_NODE)) != MC_ERR_NONE ||
        (rc = ld_fields(ld, n, kp, ENTRY_KEYS, COUNT(ENTRY_KEYS), v, NULL)) != MC_ERR_NONE)
        return rc;
    for (size_t i = 0; i < COUNT(ENTRY_KEYS); i++) {
        if ((rc = ld_require(ld, n, kp, ENTRY_KEYS[i], v[i])) != MC_ERR_NONE)
            return rc;
    }
    kp_key(fkp, kp, "atol");
    if ((rc = ld_nonneg_number(ld, v[0], fkp, &e->tol.atol)) != MC_ERR_NONE)
        return rc;
    kp_key(fkp, kp, "rtol");
    if ((rc = ld_nonneg_number(ld, v[1], fkp, &e->tol.rtol)) != MC_ERR_NONE)
        return rc;
    kp_key(fkp, kp, "why");
    if ((rc = ld_string(ld, v[2], fkp, &why)) != MC_ERR_NONE)
        return rc;
    if ((e->why = case_strdup(why)) == NULL)
        return ld_nomem(ld);
    return MC_ERR_NONE;
}

/* One device: dtype -> tensor -> entry, appended to p->entries in file order. */
static enum mc_err_code ld_tol_device(struct ld *ld, const char *device, yaml_node_t *n, const char *kp,
                                      struct mc_tolerance_profile *p)
{
    enum mc_err_code rc;
    char dkp[KP_LEN], tkp[KP_LEN];
    if ((rc = ld_expect(ld, n, kp, YAML_MAPPING_NODE)) != MC_ERR_NONE ||
        (rc = ld_fields(ld, n, kp, DTYPE_NAMES, COUNT(DTYPE_NAMES), NULL, NULL)) != MC_ERR_NONE)
        return rc;
    if (n->data.mapping.pairs.top == n->data.mapping.pairs.start)
        return ld_fail(ld, n->start_mark, kp, "must give tolerances for at least one dtype (got {})");
    for (yaml_node_pair_t *dp = n->data.mapping.pairs.start; dp < n->data.mapping.pairs.top; dp++) {
        size_t d = name_index(DTYPE_NAMES, COUNT(DTYPE_NAMES), ld_node(ld, dp->key));
        yaml_node_t *tensors = ld_node(ld, dp->value);
        kp_key(dkp, kp, DTYPE_NAMES[d]);
        if ((rc = ld_expect(ld, tensors, dkp, YAML_MAPPING_NODE)) != MC_ERR_NONE ||
            (rc = ld_fields(ld, tensors, dkp, TENSOR_NAMES, MC_TENSOR_COUNT + 1, NULL, NULL)) != MC_ERR_NONE)
            return rc;
        if (tensors->data.mapping.pairs.top == tensors->data.mapping.pairs.start)
            return ld_fail(ld, tensors->start_mark, dkp, "must give at least one tensor entry, e.g. default (got {})");
        for (yaml_node_pair_t *tp = tensors->data.mapping.pairs.start; tp < tensors->data.mapping.pairs.top; tp++) {
            size_t t = name_index(TENSOR_NAMES, MC_TENSOR_COUNT + 1, ld_node(ld, tp->key));
            struct mc_tolerance_entry *e = &p->entries[p->n_entries];
            kp_key(tkp, dkp, TENSOR_NAMES[t]);
            if ((e->device = case_strdup(device)) == NULL)
                return ld_nomem(ld);
            e->dtype = DTYPES[d];
            e->tensor = (int)t;
            p->n_entries++;
            if ((rc = ld_tol_entry(ld, ld_node(ld, tp->value), tkp, e)) != MC_ERR_NONE)
                return rc;
        }
    }
    return MC_ERR_NONE;
}

static enum mc_err_code ld_tolerance(struct ld *ld, yaml_node_t *root, struct mc_tolerance_profile *p)
{
    enum mc_err_code rc;
    yaml_node_t *v[TK_COUNT];
    const char *s = NULL;
    char kp[KP_LEN];

    if ((rc = ld_fields(ld, root, "", TOL_KEYS, TK_COUNT, v, NULL)) != MC_ERR_NONE)
        return rc;
    for (int i = 0; i < TK_COUNT; i++) {
        if ((rc = ld_require(ld, root, "", TOL_KEYS[i], v[i])) != MC_ERR_NONE)
            return rc;
    }
    if ((rc = ld_string(ld, v[TK_PROFILE], "profile", &s)) != MC_ERR_NONE)
        return rc;
    if ((p->name = case_strdup(s)) == NULL)
        return ld_nomem(ld);
    if ((rc = ld_string(ld, v[TK_WHY], "why", &s)) != MC_ERR_NONE)
        return rc;
    yaml_node_t *devs = v[TK_DEVICES];
    if ((rc = ld_expect(ld, devs, "devices", YAML_MAPPING_NODE)) != MC_ERR_NONE)
        return rc;
    size_t count = (size_t)(devs->data.mapping.pairs.top - devs->data.mapping.pairs.start);
    if (count == 0)
        return ld_fail(ld, devs->start_mark, "devices", "must name at least one device (got {})");
    if (count > MAX_DEVICES)
        return ld_fail(ld, devs->start_mark, "devices", "at most %d devices are allowed (got %zu)", MAX_DEVICES, count);
    p->entries = case_calloc(count * COUNT(DTYPE_NAMES) * (MC_TENSOR_COUNT + 1), sizeof *p->entries);
    if (p->entries == NULL)
        return ld_nomem(ld);
    for (size_t i = 0; i < count; i++) {
        yaml_node_pair_t *pair = &devs->data.mapping.pairs.start[i];
        yaml_node_t *key = ld_node(ld, pair->key);
        const char *name = NULL;
        if ((rc = ld_key(ld, key, "devices", &name)) != MC_ERR_NONE ||
            (rc = ld_name(ld, key, "devices", "device names", &name)) != MC_ERR_NONE)
            return rc;
        for (size_t j = 0; j < i; j++) {
            yaml_node_t *prev = ld_node(ld, devs->data.mapping.pairs.start[j].key);
            if (strcmp((const char *)prev->data.scalar.value, name) == 0)
                return ld_fail(ld, key->start_mark, "devices", "duplicate key '%s' (first at %zu:%zu)", name,
                               prev->start_mark.line + 1, prev->start_mark.column + 1);
        }
        kp_key(kp, "devices", name);
        if ((rc = ld_tol_device(ld, name, ld_node(ld, pair->value), kp, p)) != MC_ERR_NONE)
            return rc;
    }
    return MC_ERR_NONE;
}

static enum mc_err_code tol_load(const char *path, const struct file_ref *ref, struct mc_tolerance_profile *p,
                                 struct mc_error *err)
{
    enum mc_err_code rc;
    struct mc_tolerance_profile tmp = {0};
    struct ld ld = {.path = path, .err = err};
    yaml_node_t *root = NULL;

    memset(p, 0, sizeof *p);
    if ((tmp.path = case_strdup(path)) == NULL) {
        rc = ld_nomem(&ld);
        goto done;
    }
    if ((rc = ld_open(&ld, ref, &root)) != MC_ERR_NONE)
        goto done;
    rc = ld_tolerance(&ld, root, &tmp);
done:
    ld_close(&ld);
    if (rc == MC_ERR_NONE)
        *p = tmp;
    else
        mc_tolerance_free(&tmp);
    return rc;
}

enum mc_err_code mc_tolerance_load(const char *path, struct mc_tolerance_profile *p, struct mc_error *err)
{
    return tol_load(path, NULL, p, err);
}

void mc_tolerance_free(struct mc_tolerance_profile *p)
{
    if (p == NULL)
        return;
    for (int i = 0; i < p->n_entries; i++) {
        free(p->entries[i].device);
        free(p->entries[i].why);
    }
    free(p->entries);
    free(p->path);
    free(p->name);
    memset(p, 0, sizeof *p);
}

enum mc_err_code mc_tolerance_lookup(const struct mc_tolerance_profile *p, const char *device, enum mc_dtype dtype,
                                     enum mc_tensor_kind tensor, struct mc_tolerance *out, struct mc_error *err)
{
    const struct mc_tolerance_entry *fallback = NULL;
    for (int i = 0; i < p->n_entries; i++) {
        const struct mc_tolerance_entry *e = &p->entries[i];
        if (e->dtype != dtype || strcmp(e->device, device) != 0)
            continue;
        if (e->tensor == (int)tensor) {
            *out = e->tol;
            return MC_ERR_NONE;
        }
        if (e->tensor == MC_TENSOR_COUNT)
            fallback = e;
    }
    if (fallback != NULL) {
        *out = fallback->tol;
        return MC_ERR_NONE;
    }
    return mc_error_set(err, MC_ERR_INPUT, "%s: no tolerance for device '%s' dtype '%s' tensor '%s' (and no default)",
                        p->path ? p->path : "(tolerance profile)", device, mc_dtype_name(dtype),
                        mc_tensor_name(tensor));
}
