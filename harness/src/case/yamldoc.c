/*
 * yamldoc.c — see yamldoc.h: the four gates (read, byte scan, event pass, compose) and the
 * positioned messages every YAML error goes through.
 */
#include "case/yamldoc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"

/* ---- messages ---------------------------------------------------------------------------------- */

void mc_yaml_names_join(char *out, size_t cap, const char *const *names, size_t n)
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

bool mc_yaml_scalar_is_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *s = (const char *)n->data.scalar.value;
    return s[0] == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
           strcmp(s, "NULL") == 0;
}

void mc_yaml_excerpt(const char *s, size_t len, char *out, size_t cap)
{
    size_t n = len < MC_YAML_GOT_LEN ? len : MC_YAML_GOT_LEN;
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

void mc_yaml_node_describe(const yaml_node_t *n, char *out, size_t cap)
{
    if (n->type == YAML_MAPPING_NODE) {
        snprintf(out, cap, "a mapping");
    } else if (n->type == YAML_SEQUENCE_NODE) {
        snprintf(out, cap, "a sequence");
    } else if (mc_yaml_scalar_is_null(n)) {
        snprintf(out, cap, "null");
    } else {
        char ex[MC_YAML_GOT_LEN + 8];
        mc_yaml_excerpt((const char *)n->data.scalar.value, n->data.scalar.length, ex, sizeof ex);
        if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
            snprintf(out, cap, "%s", ex);
        else
            snprintf(out, cap, "\"%s\"", ex);
    }
}

enum mc_err_code mc_yaml_fail(const struct mc_yaml_doc *ld, yaml_mark_t mark, const char *kpath, const char *fmt, ...)
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

enum mc_err_code mc_yaml_nomem(const struct mc_yaml_doc *ld)
{
    return mc_error_set(ld->err, MC_ERR_NOMEM, "%s: out of memory while loading", ld->path);
}

void mc_yaml_kp_key(char *out, const char *base, const char *key)
{
    if (snprintf(out, MC_YAML_KP_LEN, "%s%s%s", base, base[0] ? "." : "", key) >= MC_YAML_KP_LEN)
        memcpy(out + MC_YAML_KP_LEN - 4, "...", 4);
}

void mc_yaml_kp_index(char *out, const char *base, size_t i)
{
    if (snprintf(out, MC_YAML_KP_LEN, "%s[%zu]", base, i) >= MC_YAML_KP_LEN)
        memcpy(out + MC_YAML_KP_LEN - 4, "...", 4);
}

yaml_node_t *mc_yaml_node(struct mc_yaml_doc *ld, int index)
{
    return yaml_document_get_node(&ld->doc, index);
}

/* ---- gates 1-3: read, byte scan, event pass, compose ------------------------------------------ */

/* The in-memory variant of ld_read: the same cap, the same copy with a NUL after it. */
static enum mc_err_code ld_read_mem(struct mc_yaml_doc *ld)
{
    if (ld->mem_len > MC_YAML_MAX_FILE_BYTES)
        return mc_error_set(ld->err, MC_ERR_INPUT,
                            "%s: file is larger than the 1 MiB limit for YAML inputs (got %zu bytes)", ld->path,
                            ld->mem_len);
    ld->buf = mc_calloc(ld->mem_len + 2, 1);
    if (ld->buf == NULL)
        return mc_yaml_nomem(ld);
    if (ld->mem_len > 0)
        memcpy(ld->buf, ld->mem, ld->mem_len);
    ld->len = ld->mem_len;
    return MC_ERR_NONE;
}

static enum mc_err_code ld_read(struct mc_yaml_doc *ld, const struct mc_yaml_ref *ref)
{
    enum mc_err_code rc = MC_ERR_NONE;
    FILE *f = NULL;
    int e = 0;
    struct stat st;

    if (ld->mem != NULL)
        return ld_read_mem(ld);
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
    if (S_ISREG(st.st_mode) && st.st_size > MC_YAML_MAX_FILE_BYTES)
        goto too_big;
    /* a regular file is read at its size (one byte more tells it grew); anything else up to the cap */
    size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size : (size_t)MC_YAML_MAX_FILE_BYTES;
    ld->buf = mc_calloc(cap + 2, 1);
    if (ld->buf == NULL) {
        rc = mc_yaml_nomem(ld);
        goto done;
    }
    ld->len = fread(ld->buf, 1, cap + 1, f);
    if (ferror(f)) {
        e = errno ? errno : EIO;
        goto sys_fail;
    }
    if (ld->len > MC_YAML_MAX_FILE_BYTES)
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
static enum mc_err_code ld_scan_bytes(struct mc_yaml_doc *ld)
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
            return mc_yaml_fail(ld, m, NULL, "file is not valid UTF-8 text (got byte 0x%02x)", c);
        }
        if (i + w > ld->len)
            return mc_yaml_fail(ld, m, NULL, "file is not valid UTF-8 text (got a truncated sequence at the end)");
        for (size_t k = 1; k < w; k++) {
            if ((b[i + k] & 0xC0) != 0x80)
                return mc_yaml_fail(ld, m, NULL, "file is not valid UTF-8 text (got byte 0x%02x followed by 0x%02x)", c,
                                    b[i + k]);
            cp = (cp << 6) | (b[i + k] & 0x3F);
        }
        if ((w == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (w == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return mc_yaml_fail(ld, m, NULL, "file is not valid UTF-8 text (got an overlong or surrogate sequence)");
        if ((cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0x7F ||
            (cp >= 0x80 && cp <= 0x9F && cp != 0x85) || cp == 0xFFFE || cp == 0xFFFF)
            return mc_yaml_fail(ld, m, NULL, "control character U+%04lX is not allowed in YAML; is this a binary file?",
                                cp);
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
static int ld_char_at(const struct mc_yaml_doc *ld, yaml_mark_t m)
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

static enum mc_err_code ld_parser_error(const struct mc_yaml_doc *ld, const yaml_parser_t *p)
{
    if (p->error == YAML_MEMORY_ERROR)
        return mc_yaml_nomem(ld);
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
        return mc_yaml_fail(ld, at, NULL, "cannot decode the file: %s", p->problem ? p->problem : "reader error");
    }
    yaml_mark_t m = p->problem_mark;
    const char *problem = p->problem ? p->problem : "unknown error";
    if (ld_char_at(ld, m) == '\t' || strstr(problem, "tab") != NULL)
        return mc_yaml_fail(ld, m, NULL, "tab character in indentation; YAML indents with spaces only (libyaml: %s)",
                            problem);
    if (p->context != NULL)
        return mc_yaml_fail(ld, m, NULL, "YAML syntax error: %s (%s at %zu:%zu)", problem, p->context,
                            p->context_mark.line + 1, p->context_mark.column + 1);
    return mc_yaml_fail(ld, m, NULL, "YAML syntax error: %s", problem);
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
    char tmp[MC_YAML_KP_LEN];
    out[0] = '\0';
    for (int i = 0; i < depth; i++) {
        if (st[i].is_map) {
            if (!st[i].at_value)
                break;
            mc_yaml_kp_key(tmp, out, st[i].key);
        } else {
            mc_yaml_kp_index(tmp, out, st[i].index);
        }
        memcpy(out, tmp, MC_YAML_KP_LEN);
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
            mc_yaml_excerpt((const char *)ev->data.scalar.value, ev->data.scalar.length, top->key, sizeof top->key);
        else
            snprintf(top->key, sizeof top->key, "?");
    } else {
        top->at_value = false;
    }
}

static enum mc_err_code ld_scan_events(struct mc_yaml_doc *ld)
{
    enum mc_err_code rc = MC_ERR_NONE;
    yaml_parser_t parser;
    yaml_event_t ev;
    struct ev_frame st[MC_YAML_MAX_DEPTH];
    int depth = 0, docs = 0;
    bool done = false;
    char kp[MC_YAML_KP_LEN];

    if (!yaml_parser_initialize(&parser))
        return mc_yaml_nomem(ld);
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
                rc = mc_yaml_fail(ld, ev.start_mark, NULL,
                                  "only one YAML document per file is allowed (got a second one)");
            break;
        case YAML_ALIAS_EVENT:
            ev_path(st, depth, kp);
            rc = mc_yaml_fail(ld, ev.start_mark, kp, "aliases are not allowed; write the value out (got *%s)",
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
                rc = mc_yaml_fail(ld, ev.start_mark, kp, "anchors are not allowed (got &%s)", (const char *)anchor);
            else
                rc = mc_yaml_fail(ld, ev.start_mark, kp, "explicit tags are not allowed (got %s)", (const char *)tag);
        }
        if (rc == MC_ERR_NONE) {
            if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
                if (depth == MC_YAML_MAX_DEPTH) {
                    ev_path(st, depth, kp);
                    rc = mc_yaml_fail(ld, ev.start_mark, kp, "nesting deeper than %d levels is not allowed",
                                      MC_YAML_MAX_DEPTH);
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
        rc = mc_yaml_fail(ld, m, NULL, "file is empty (no YAML document)");
    }
    return rc;
}

static enum mc_err_code ld_compose(struct mc_yaml_doc *ld)
{
    yaml_parser_t parser;
    enum mc_err_code rc = MC_ERR_NONE;
    if (!yaml_parser_initialize(&parser))
        return mc_yaml_nomem(ld);
    yaml_parser_set_input_string(&parser, ld->buf, ld->len);
    yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);
    if (!yaml_parser_load(&parser, &ld->doc))
        rc = ld_parser_error(ld, &parser); /* the document is deleted by libyaml */
    else
        ld->have_doc = true;
    yaml_parser_delete(&parser);
    return rc;
}

void mc_yaml_close(struct mc_yaml_doc *ld)
{
    if (ld->have_doc)
        yaml_document_delete(&ld->doc);
    free(ld->buf);
    ld->buf = NULL;
    ld->have_doc = false;
}

enum mc_err_code mc_yaml_open(struct mc_yaml_doc *ld, const struct mc_yaml_ref *ref, yaml_node_t **root)
{
    enum mc_err_code rc;
    char got[MC_YAML_DESCRIBE_LEN];
    if ((rc = ld_read(ld, ref)) != MC_ERR_NONE || (rc = ld_scan_bytes(ld)) != MC_ERR_NONE ||
        (rc = ld_scan_events(ld)) != MC_ERR_NONE || (rc = ld_compose(ld)) != MC_ERR_NONE)
        return rc;
    *root = yaml_document_get_root_node(&ld->doc);
    if (*root == NULL) {
        yaml_mark_t m = {0, 0, 0};
        return mc_yaml_fail(ld, m, NULL, "file is empty (no YAML document)");
    }
    if ((*root)->type != YAML_MAPPING_NODE) {
        mc_yaml_node_describe(*root, got, sizeof got);
        return mc_yaml_fail(ld, (*root)->start_mark, NULL, "the top level must be a mapping of keys (got %s)", got);
    }
    return MC_ERR_NONE;
}
