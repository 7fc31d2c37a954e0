/* jsonread.c — the strict JSON parser (see jsonread.h). */
#include "base/jsonread.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The stack bound: frees recurse once per level, so the nesting limit a caller may ask for is capped. */
#define MC_JSON_HARD_MAX_DEPTH 4096

/* An array or object being read: its value, the capacity of its members and, in an object, the key
 * read for the member whose value comes next. */
struct frame {
    struct mc_json_value v;
    size_t cap;
    char *key;
};

struct parser {
    const char *s;
    size_t len, pos;
    size_t line_start; /* offset of the current line's first byte */
    int line;
    int max_depth;
    struct frame *stack;
    int depth, cap_stack;
    struct mc_json_error *err;
};

static int column_at(const struct parser *p, size_t pos)
{
    return (int)(pos - p->line_start) + 1;
}

static int fail_at(struct parser *p, size_t pos, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err->msg, sizeof p->err->msg, fmt, ap);
    va_end(ap);
    p->err->line = p->line;
    p->err->column = column_at(p, pos);
    return -1;
}

static int fail(struct parser *p, const char *fmt, const char *arg)
{
    return fail_at(p, p->pos, fmt, arg);
}

static void skip_ws(struct parser *p)
{
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c == '\n') {
            p->line++;
            p->line_start = p->pos + 1;
        } else if (c != ' ' && c != '\t' && c != '\r') {
            return;
        }
        p->pos++;
    }
}

/* A printable description of the byte at pos for messages. */
static const char *describe(const struct parser *p, char buf[16])
{
    if (p->pos >= p->len)
        return "end of input";
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, 16, "'%c'", c);
    else
        snprintf(buf, 16, "byte 0x%02x", c);
    return buf;
}

static void free_value(struct mc_json_value *v)
{
    if (v->type == MC_JSON_STRING) {
        free(v->string);
    } else if (v->type == MC_JSON_ARRAY || v->type == MC_JSON_OBJECT) {
        for (size_t i = 0; i < v->len; i++) {
            free_value(&v->items[i]);
            if (v->keys)
                free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
    }
    memset(v, 0, sizeof *v);
}

/* Length of a valid UTF-8 sequence starting at s[0] (n bytes available), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        need = 1;
    else if (c >= 0xe0 && c <= 0xef) {
        need = 2;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f; /* no UTF-16 surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 3;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (n < need + 1)
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i <= need; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return need + 1;
}

static int hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static char *put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xc0 | (cp >> 6));
        *o++ = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xe0 | (cp >> 12));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *o++ = (char)(0x80 | (cp & 0x3f));
    } else {
        *o++ = (char)(0xf0 | (cp >> 18));
        *o++ = (char)(0x80 | ((cp >> 12) & 0x3f));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *o++ = (char)(0x80 | (cp & 0x3f));
    }
    return o;
}

/* A string at p->pos (on its opening quote) into a new buffer; the decoded text is never longer
 * than the raw one. */
static int parse_string(struct parser *p, char **out, size_t *out_len)
{
    size_t start = p->pos + 1, end = start;
    while (end < p->len && p->s[end] != '"') {
        if (p->s[end] == '\\')
            end++;
        end++;
    }
    if (end >= p->len)
        return fail_at(p, p->pos, "unterminated string");
    char *buf = malloc(end - start + 1), *o = buf;
    if (buf == NULL)
        return fail(p, "out of memory%s", "");
    size_t i = start;
    while (i < end) {
        unsigned char c = (unsigned char)p->s[i];
        if (c < 0x20) {
            free(buf);
            return fail_at(p, i, "control character 0x%02x in a string (escape it)", c);
        }
        if (c >= 0x80) {
            size_t n = utf8_len((const unsigned char *)p->s + i, end - i);
            if (n == 0) {
                free(buf);
                return fail_at(p, i, "invalid UTF-8 in a string");
            }
            memcpy(o, p->s + i, n);
            o += n;
            i += n;
            continue;
        }
        if (c != '\\') {
            *o++ = (char)c;
            i++;
            continue;
        }
        char e = p->s[i + 1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e != '\0' && simple && e != 'u') {
            static const char map[] = "\"\\/\b\f\n\r\t";
            *o++ = map[simple - "\"\\/bfnrt"];
            i += 2;
            continue;
        }
        if (e != 'u') {
            free(buf);
            return fail_at(p, i, "invalid escape in a string");
        }
        unsigned cp, lo;
        if (i + 6 > end || hex4(p->s + i + 2, &cp) != 0) {
            free(buf);
            return fail_at(p, i, "invalid \\u escape (expected 4 hex digits)");
        }
        size_t at = i;
        i += 6;
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (i + 6 > end || p->s[i] != '\\' || p->s[i + 1] != 'u' || hex4(p->s + i + 2, &lo) != 0 || lo < 0xdc00 ||
                lo > 0xdfff) {
                free(buf);
                return fail_at(p, at, "unpaired UTF-16 surrogate in a \\u escape");
            }
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            i += 6;
        } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            free(buf);
            return fail_at(p, at, "unpaired UTF-16 surrogate in a \\u escape");
        } else if (cp == 0) {
            free(buf);
            return fail_at(p, at, "\\u0000 is not supported (strings are NUL-terminated)");
        }
        o = put_utf8(o, cp);
    }
    *o = '\0';
    *out = buf;
    *out_len = (size_t)(o - buf);
    p->pos = end + 1;
    return 0;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int parse_number(struct parser *p, double *out)
{
    size_t i = p->pos;
    const char *s = p->s;
    if (i < p->len && s[i] == '-')
        i++;
    if (i >= p->len || !is_digit(s[i]))
        return fail_at(p, i, "invalid number (expected a digit)");
    if (s[i] == '0') {
        i++;
    } else {
        while (i < p->len && is_digit(s[i]))
            i++;
    }
    if (i < p->len && s[i] == '.') {
        i++;
        if (i >= p->len || !is_digit(s[i]))
            return fail_at(p, i, "invalid number (expected a digit after '.')");
        while (i < p->len && is_digit(s[i]))
            i++;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < p->len && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= p->len || !is_digit(s[i]))
            return fail_at(p, i, "invalid number (expected a digit in the exponent)");
        while (i < p->len && is_digit(s[i]))
            i++;
    }
    if (i < p->len && (is_digit(s[i]) || s[i] == '.' || s[i] == 'e' || s[i] == 'E'))
        return fail_at(p, i, "invalid number (a leading zero, or a stray '.' or exponent)");
    char buf[512];
    size_t n = i - p->pos;
    if (n >= sizeof buf)
        return fail(p, "number longer than 511 characters%s", "");
    memcpy(buf, s + p->pos, n);
    buf[n] = '\0';
    double v = strtod(buf, NULL);
    if (!isfinite(v))
        return fail(p, "number out of range (%s)", buf);
    *out = v;
    p->pos = i;
    return 0;
}

static int match_word(struct parser *p, const char *w)
{
    size_t n = strlen(w);
    return p->len - p->pos >= n && memcmp(p->s + p->pos, w, n) == 0;
}

/* A scalar at p->pos into *v. */
static int parse_scalar(struct parser *p, struct mc_json_value *v)
{
    char d[16];
    memset(v, 0, sizeof *v);
    v->line = p->line;
    v->column = column_at(p, p->pos);
    if (p->pos >= p->len)
        return fail(p, "expected a value, got end of input%s", "");
    char c = p->s[p->pos];
    if (c == '"') {
        v->type = MC_JSON_STRING;
        return parse_string(p, &v->string, &v->len);
    }
    if (c == '-' || is_digit(c)) {
        v->type = MC_JSON_NUMBER;
        return parse_number(p, &v->number);
    }
    static const struct {
        const char *word;
        enum mc_json_type type;
    } words[] = {{"true", MC_JSON_TRUE}, {"false", MC_JSON_FALSE}, {"null", MC_JSON_NULL}};
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
        if (match_word(p, words[k].word)) {
            size_t after = p->pos + strlen(words[k].word);
            if (after < p->len && ((p->s[after] >= 'a' && p->s[after] <= 'z') || is_digit(p->s[after])))
                break;
            v->type = words[k].type;
            p->pos = after;
            return 0;
        }
    }
    return fail(p, "expected a value, got %s", describe(p, d));
}

static int push(struct parser *p, enum mc_json_type type)
{
    if (p->depth >= p->max_depth)
        return fail_at(p, p->pos, "nesting deeper than the limit of %d levels", p->max_depth);
    if (p->depth == p->cap_stack) {
        int cap = p->cap_stack ? 2 * p->cap_stack : 16;
        struct frame *s = realloc(p->stack, (size_t)cap * sizeof *s);
        if (s == NULL)
            return fail(p, "out of memory%s", "");
        p->stack = s;
        p->cap_stack = cap;
    }
    struct frame *f = &p->stack[p->depth++];
    memset(f, 0, sizeof *f);
    f->v.type = type;
    f->v.line = p->line;
    f->v.column = column_at(p, p->pos);
    p->pos++;
    return 0;
}

/* Appends v (moved) to the container on top of the stack. */
static int append(struct parser *p, struct mc_json_value *v)
{
    struct frame *f = &p->stack[p->depth - 1];
    if (f->v.len == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 8;
        struct mc_json_value *items = realloc(f->v.items, cap * sizeof *items);
        if (items == NULL)
            return fail(p, "out of memory%s", "");
        f->v.items = items;
        if (f->v.type == MC_JSON_OBJECT) {
            char **keys = realloc(f->v.keys, cap * sizeof *keys);
            if (keys == NULL)
                return fail(p, "out of memory%s", "");
            f->v.keys = keys;
        }
        f->cap = cap;
    }
    if (f->v.type == MC_JSON_OBJECT) {
        f->v.keys[f->v.len] = f->key;
        f->key = NULL;
    }
    f->v.items[f->v.len++] = *v;
    memset(v, 0, sizeof *v);
    return 0;
}

/* The keys qsort compares by (the parser is not reentrant across threads for this one step). */
static const char *const *sort_keys;

static int cmp_key_index(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = strcmp(sort_keys[i], sort_keys[j]);
    return c ? c : (i > j) - (i < j);
}

/* Refuses a duplicate key in a finished object (sorted: n log n), at the later member's value. */
static int check_duplicates(struct parser *p, const struct mc_json_value *obj)
{
    if (obj->len < 2)
        return 0;
    size_t *idx = malloc(obj->len * sizeof *idx);
    if (idx == NULL)
        return fail(p, "out of memory%s", "");
    for (size_t i = 0; i < obj->len; i++)
        idx[i] = i;
    sort_keys = (const char *const *)obj->keys;
    qsort(idx, obj->len, sizeof *idx, cmp_key_index);
    int rc = 0;
    for (size_t i = 1; i < obj->len && rc == 0; i++) {
        if (strcmp(obj->keys[idx[i - 1]], obj->keys[idx[i]]) == 0) {
            const struct mc_json_value *dup = &obj->items[idx[i]];
            snprintf(p->err->msg, sizeof p->err->msg, "duplicate key \"%.200s\" in an object", obj->keys[idx[i]]);
            p->err->line = dup->line;
            p->err->column = dup->column;
            rc = -1;
        }
    }
    free(idx);
    return rc;
}

/* In an object, at a key: reads it and the ':' after it. */
static int parse_key(struct parser *p)
{
    char d[16];
    skip_ws(p);
    if (p->pos >= p->len || p->s[p->pos] != '"')
        return fail(p, "expected a key (a string), got %s", describe(p, d));
    size_t n;
    struct frame *f = &p->stack[p->depth - 1];
    if (parse_string(p, &f->key, &n) != 0)
        return -1;
    skip_ws(p);
    if (p->pos >= p->len || p->s[p->pos] != ':')
        return fail(p, "expected ':' after a key, got %s", describe(p, d));
    p->pos++;
    return 0;
}

static int parse_document(struct parser *p, struct mc_json_value *val)
{
    char d[16];
    for (;;) {
        /* a value */
        skip_ws(p);
        char c = p->pos < p->len ? p->s[p->pos] : '\0';
        if (c == '{' || c == '[') {
            if (push(p, c == '{' ? MC_JSON_OBJECT : MC_JSON_ARRAY) != 0)
                return -1;
            skip_ws(p);
            char close = c == '{' ? '}' : ']';
            if (p->pos < p->len && p->s[p->pos] == close) {
                p->pos++;
                *val = p->stack[--p->depth].v;
            } else {
                if (c == '{' && parse_key(p) != 0)
                    return -1;
                continue;
            }
        } else if (parse_scalar(p, val) != 0) {
            return -1;
        }
        /* a complete value: the document, or a member of the container on top */
        for (;;) {
            if (p->depth == 0)
                return 0;
            if (append(p, val) != 0)
                return -1;
            struct frame *f = &p->stack[p->depth - 1];
            int obj = f->v.type == MC_JSON_OBJECT;
            skip_ws(p);
            c = p->pos < p->len ? p->s[p->pos] : '\0';
            if (p->pos < p->len && c == ',') {
                p->pos++;
                if (obj && parse_key(p) != 0)
                    return -1;
                break;
            }
            if (p->pos < p->len && c == (obj ? '}' : ']')) {
                p->pos++;
                if (obj && check_duplicates(p, &f->v) != 0)
                    return -1;
                *val = f->v;
                memset(&f->v, 0, sizeof f->v);
                p->depth--;
                continue;
            }
            return fail(p, obj ? "expected ',' or '}' in an object, got %s" : "expected ',' or ']' in an array, got %s",
                        describe(p, d));
        }
    }
}

int mc_json_parse(const char *text, size_t len, const struct mc_json_limits *limits, struct mc_json_value **root,
                  struct mc_json_error *err)
{
    struct parser p = {.s = text, .len = len, .line = 1, .err = err};
    int max_depth = limits && limits->max_depth > 0 ? limits->max_depth : MC_JSON_DEFAULT_MAX_DEPTH;
    size_t max_bytes = limits && limits->max_bytes > 0 ? limits->max_bytes : MC_JSON_DEFAULT_MAX_BYTES;
    p.max_depth = max_depth > MC_JSON_HARD_MAX_DEPTH ? MC_JSON_HARD_MAX_DEPTH : max_depth;
    memset(err, 0, sizeof *err);
    *root = NULL;
    if (len > max_bytes) {
        snprintf(err->msg, sizeof err->msg, "input of %zu bytes is over the limit of %zu", len, max_bytes);
        err->line = 1;
        err->column = 1;
        return -1;
    }
    struct mc_json_value val = {0};
    char d[16];
    int rc = parse_document(&p, &val);
    if (rc == 0) {
        skip_ws(&p);
        if (p.pos < p.len)
            rc = fail(&p, "unexpected %s after the document", describe(&p, d));
    }
    if (rc == 0) {
        *root = malloc(sizeof **root);
        if (*root == NULL)
            rc = fail(&p, "out of memory%s", "");
        else
            **root = val;
    }
    if (rc != 0) {
        free_value(&val);
        for (int i = 0; i < p.depth; i++) {
            free_value(&p.stack[i].v);
            free(p.stack[i].key);
        }
    }
    free(p.stack);
    return rc;
}

int mc_json_parse_file(const char *path, const struct mc_json_limits *limits, struct mc_json_value **root,
                       struct mc_json_error *err)
{
    size_t max_bytes = limits && limits->max_bytes > 0 ? limits->max_bytes : MC_JSON_DEFAULT_MAX_BYTES;
    memset(err, 0, sizeof *err);
    *root = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err->msg, sizeof err->msg, "cannot open: %s", strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    int rc = 0;
    while (buf) {
        if (n == cap) {
            if (cap > max_bytes) {
                snprintf(err->msg, sizeof err->msg, "file is over the size limit of %zu bytes", max_bytes);
                rc = -1;
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (buf == NULL) {
        snprintf(err->msg, sizeof err->msg, "out of memory");
        rc = -1;
    } else if (rc == 0 && ferror(f)) {
        snprintf(err->msg, sizeof err->msg, "read error");
        rc = -1;
    } else if (rc == 0 && n > max_bytes) {
        snprintf(err->msg, sizeof err->msg, "file is over the size limit of %zu bytes", max_bytes);
        rc = -1;
    }
    fclose(f);
    if (rc == 0)
        rc = mc_json_parse(buf, n, limits, root, err);
    free(buf);
    return rc;
}

void mc_json_free(struct mc_json_value *root)
{
    if (root == NULL)
        return;
    free_value(root);
    free(root);
}

const struct mc_json_value *mc_json_get(const struct mc_json_value *v, const char *key)
{
    if (v == NULL || v->type != MC_JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->len; i++)
        if (strcmp(v->keys[i], key) == 0)
            return &v->items[i];
    return NULL;
}

const char *mc_json_type_name(enum mc_json_type t)
{
    switch (t) {
    case MC_JSON_NULL:
        return "null";
    case MC_JSON_FALSE:
    case MC_JSON_TRUE:
        return "a boolean";
    case MC_JSON_NUMBER:
        return "a number";
    case MC_JSON_STRING:
        return "a string";
    case MC_JSON_ARRAY:
        return "an array";
    case MC_JSON_OBJECT:
        return "an object";
    }
    return "unknown";
}
