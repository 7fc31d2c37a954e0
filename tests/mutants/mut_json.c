/* mut_json.c — see mut_json.h. A recursive-descent parser over the whole text, depth-limited. */
#include "mut_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MUT_JSON_MAX_DEPTH 64

struct parser {
    const char *s;
    size_t i;
    char *err;
    size_t err_len;
};

static int bad(struct parser *p, const char *what)
{
    if (p->err_len > 0 && p->err[0] == '\0')
        snprintf(p->err, p->err_len, "offset %zu: %s", p->i, what);
    return -1;
}

static void skip_ws(struct parser *p)
{
    while (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')
        p->i++;
}

/* A string at p->s[p->i] == '"' into a malloc'd copy. */
static int parse_string(struct parser *p, char **out)
{
    size_t start = ++p->i, len = 0;
    while (p->s[p->i] != '"') {
        if (p->s[p->i] == '\0' || (unsigned char)p->s[p->i] < 0x20)
            return bad(p, "unterminated string");
        if (p->s[p->i] == '\\') {
            p->i++;
            if (p->s[p->i] == '\0')
                return bad(p, "unterminated string");
        }
        p->i++;
        len++;
    }
    char *s = malloc(len + 1);
    if (s == NULL)
        return bad(p, "out of memory");
    size_t k = 0;
    for (size_t j = start; j < p->i; j++) {
        if (p->s[j] == '\\' && (p->s[j + 1] == '"' || p->s[j + 1] == '\\'))
            j++;
        else if (p->s[j] == '\\') /* other escapes are kept as written, minus the backslash */
            j++;
        s[k++] = p->s[j];
    }
    s[k] = '\0';
    p->i++;
    *out = s;
    return 0;
}

static int parse_value(struct parser *p, struct mut_json *v, int depth);

/* An array or object at p->s[p->i] == '[' / '{'. */
static int parse_container(struct parser *p, struct mut_json *v, int object, int depth)
{
    const char close = object ? '}' : ']';
    size_t cap = 0;
    v->type = object ? MUT_JSON_OBJECT : MUT_JSON_ARRAY;
    p->i++;
    skip_ws(p);
    if (p->s[p->i] == close) {
        p->i++;
        return 0;
    }
    for (;;) {
        if (v->n == cap) {
            size_t nc = cap ? 2 * cap : 8;
            struct mut_json *ni = realloc(v->items, nc * sizeof *ni);
            if (ni == NULL)
                return bad(p, "out of memory");
            v->items = ni;
            if (object) {
                char **nk = realloc(v->keys, nc * sizeof *nk);
                if (nk == NULL)
                    return bad(p, "out of memory");
                v->keys = nk;
            }
            cap = nc;
        }
        memset(&v->items[v->n], 0, sizeof v->items[v->n]);
        if (object) {
            skip_ws(p);
            if (p->s[p->i] != '"')
                return bad(p, "expected a key");
            v->keys[v->n] = NULL;
            if (parse_string(p, &v->keys[v->n]) != 0) {
                return -1;
            }
            skip_ws(p);
            if (p->s[p->i] != ':') {
                v->n++; /* the key is owned from here on */
                return bad(p, "expected ':'");
            }
            p->i++;
        }
        int rc = parse_value(p, &v->items[v->n], depth + 1);
        v->n++;
        if (rc != 0)
            return -1;
        skip_ws(p);
        if (p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->s[p->i] == close) {
            p->i++;
            return 0;
        }
        return bad(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int parse_value(struct parser *p, struct mut_json *v, int depth)
{
    memset(v, 0, sizeof *v);
    if (depth > MUT_JSON_MAX_DEPTH)
        return bad(p, "nested too deep");
    skip_ws(p);
    const char c = p->s[p->i];
    if (c == '{' || c == '[')
        return parse_container(p, v, c == '{', depth);
    if (c == '"') {
        v->type = MUT_JSON_STRING;
        return parse_string(p, &v->string);
    }
    static const struct {
        const char *word;
        enum mut_json_type type;
        double value;
    } words[] = {{"null", MUT_JSON_NULL, 0}, {"true", MUT_JSON_BOOL, 1}, {"false", MUT_JSON_BOOL, 0},
                 {"NaN", MUT_JSON_NUMBER, NAN}, {"Infinity", MUT_JSON_NUMBER, INFINITY},
                 {"-Infinity", MUT_JSON_NUMBER, -INFINITY}}; /* Python's json writes these (time_step_limit) */
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
        size_t n = strlen(words[k].word);
        if (strncmp(p->s + p->i, words[k].word, n) == 0) {
            v->type = words[k].type;
            v->number = words[k].value;
            p->i += n;
            return 0;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char *end = NULL;
        v->type = MUT_JSON_NUMBER;
        v->number = strtod(p->s + p->i, &end);
        if (end == p->s + p->i)
            return bad(p, "bad number");
        p->i = (size_t)(end - p->s);
        return 0;
    }
    return bad(p, c == '\0' ? "unexpected end of text" : "unexpected character");
}

int mut_json_parse(const char *text, struct mut_json *out, char *err, size_t err_len)
{
    struct parser p = {text, 0, err, err_len};
    if (err_len > 0)
        err[0] = '\0';
    int rc = parse_value(&p, out, 0);
    if (rc == 0) {
        skip_ws(&p);
        if (p.s[p.i] != '\0')
            rc = bad(&p, "text after the value");
    }
    if (rc != 0)
        mut_json_free(out);
    return rc;
}

void mut_json_free(struct mut_json *v)
{
    if (v == NULL)
        return;
    for (size_t k = 0; k < v->n; k++) {
        mut_json_free(&v->items[k]);
        if (v->keys != NULL)
            free(v->keys[k]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    memset(v, 0, sizeof *v);
}

const struct mut_json *mut_json_get(const struct mut_json *v, const char *key)
{
    if (v == NULL || v->type != MUT_JSON_OBJECT)
        return NULL;
    for (size_t k = v->n; k-- > 0;) /* the last of duplicate keys wins, as in Python's json */
        if (strcmp(v->keys[k], key) == 0)
            return &v->items[k];
    return NULL;
}
