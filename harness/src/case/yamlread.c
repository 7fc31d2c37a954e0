/* yamlread.c — see yamlread.h. */
#include "case/yamlread.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

enum mc_err_code mc_yaml_expect(struct mc_yaml_doc *ld, const yaml_node_t *n, const char *kp, yaml_node_type_t type)
{
    char got[MC_YAML_DESCRIBE_LEN];
    if (n->type == type)
        return MC_ERR_NONE;
    mc_yaml_node_describe(n, got, sizeof got);
    const char *want = type == YAML_MAPPING_NODE ? "a mapping" : "a sequence";
    return mc_yaml_fail(ld, n->start_mark, kp, "expected %s (got %s)", want, got);
}

enum mc_err_code mc_yaml_key(struct mc_yaml_doc *ld, const yaml_node_t *key, const char *kp, const char **name)
{
    char got[MC_YAML_DESCRIBE_LEN];
    if (key->type != YAML_SCALAR_NODE || strlen((const char *)key->data.scalar.value) != key->data.scalar.length) {
        mc_yaml_node_describe(key, got, sizeof got);
        return mc_yaml_fail(ld, key->start_mark, kp, "keys must be plain strings (got %s)", got);
    }
    *name = (const char *)key->data.scalar.value;
    return MC_ERR_NONE;
}

enum mc_err_code mc_yaml_fields(struct mc_yaml_doc *ld, yaml_node_t *map, const char *kp, const char *const *names,
                                size_t n, yaml_node_t **vals, yaml_node_t **keys)
{
    enum mc_err_code rc;
    yaml_node_t *seen[MC_YAML_MAX_FIELDS] = {0};
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
        yaml_node_t *key = mc_yaml_node(ld, p->key);
        const char *name = NULL;
        if ((rc = mc_yaml_key(ld, key, kp, &name)) != MC_ERR_NONE)
            return rc;
        size_t i = 0;
        while (i < n && strcmp(name, names[i]) != 0)
            i++;
        if (i == n) {
            char ex[MC_YAML_GOT_LEN + 8];
            mc_yaml_excerpt(name, strlen(name), ex, sizeof ex);
            if (n == 0)
                return mc_yaml_fail(ld, key->start_mark, kp, "unknown key '%s' (this takes no keys; write {})", ex);
            mc_yaml_names_join(valid, sizeof valid, names, n);
            return mc_yaml_fail(ld, key->start_mark, kp, "unknown key '%s' (valid keys: %s)", ex, valid);
        }
        if (seen[i] != NULL)
            return mc_yaml_fail(ld, key->start_mark, kp, "duplicate key '%s' (first at %zu:%zu)", name,
                                seen[i]->start_mark.line + 1, seen[i]->start_mark.column + 1);
        seen[i] = key;
        if (vals != NULL)
            vals[i] = mc_yaml_node(ld, p->value);
        if (keys != NULL)
            keys[i] = key;
    }
    return MC_ERR_NONE;
}

enum mc_err_code mc_yaml_require(struct mc_yaml_doc *ld, const yaml_node_t *map, const char *kp, const char *name,
                                 const yaml_node_t *val)
{
    if (val != NULL)
        return MC_ERR_NONE;
    return mc_yaml_fail(ld, map->start_mark, kp, "missing required key '%s'", name);
}

size_t mc_yaml_name_index(const char *const *names, size_t n, const yaml_node_t *key)
{
    size_t i = 0;
    while (i + 1 < n && strcmp((const char *)key->data.scalar.value, names[i]) != 0)
        i++;
    return i;
}

enum mc_err_code mc_yaml_string(struct mc_yaml_doc *ld, const yaml_node_t *n, const char *kp, const char **out)
{
    char got[MC_YAML_DESCRIBE_LEN];
    if (n->type != YAML_SCALAR_NODE || mc_yaml_scalar_is_null(n)) {
        mc_yaml_node_describe(n, got, sizeof got);
        return mc_yaml_fail(ld, n->start_mark, kp, "expected a non-empty string (got %s)", got);
    }
    const char *s = (const char *)n->data.scalar.value;
    if (strlen(s) != n->data.scalar.length)
        return mc_yaml_fail(ld, n->start_mark, kp, "strings must not contain NUL characters");
    if (s[0] == '\0')
        return mc_yaml_fail(ld, n->start_mark, kp, "must not be empty (got \"\")");
    *out = s;
    return MC_ERR_NONE;
}

enum mc_err_code mc_yaml_name(struct mc_yaml_doc *ld, const yaml_node_t *n, const char *kp, const char *what,
                              const char **out)
{
    enum mc_err_code rc;
    char got[MC_YAML_DESCRIBE_LEN];
    if ((rc = mc_yaml_string(ld, n, kp, out)) != MC_ERR_NONE)
        return rc;
    size_t len = strlen(*out);
    bool ok = len <= MC_YAML_NAME_MAX_BYTES;
    for (size_t i = 0; ok && i < len; i++) {
        char ch = (*out)[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
    }
    if (ok)
        return MC_ERR_NONE;
    mc_yaml_node_describe(n, got, sizeof got);
    return mc_yaml_fail(ld, n->start_mark, kp,
                        "%s may use only a-z, 0-9, '.', '_' and '-', at most %d characters (got %s)", what,
                        MC_YAML_NAME_MAX_BYTES, got);
}

enum mc_err_code mc_yaml_int(struct mc_yaml_doc *ld, const yaml_node_t *n, const char *kp, int64_t lo, int64_t hi,
                             const char *cap_msg, int64_t *out)
{
    char got[MC_YAML_DESCRIBE_LEN];
    mc_yaml_node_describe(n, got, sizeof got);
    if (n->type != YAML_SCALAR_NODE)
        return mc_yaml_fail(ld, n->start_mark, kp, "expected an integer (got %s)", got);
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return mc_yaml_fail(ld, n->start_mark, kp, "expected an integer, not a quoted string (got %s)", got);
    const char *s = (const char *)n->data.scalar.value;
    const char *d = s + (s[0] == '-' || s[0] == '+');
    bool digits = d[0] != '\0';
    for (const char *q = d; *q != '\0'; q++)
        digits = digits && *q >= '0' && *q <= '9';
    if (!digits)
        return mc_yaml_fail(ld, n->start_mark, kp, "expected a decimal integer (got %s)", got);
    if (d[0] == '0' && d[1] != '\0')
        return mc_yaml_fail(ld, n->start_mark, kp,
                            "leading zeros are not allowed (YAML 1.1 reads them as octal) (got %s)", got);
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || end == s || *end != '\0')
        return mc_yaml_fail(ld, n->start_mark, kp, "integer out of range (got %s)", got);
    if (v < lo)
        return mc_yaml_fail(ld, n->start_mark, kp, "must be >= %lld (got %lld)", (long long)lo, v);
    if (v > hi)
        return mc_yaml_fail(ld, n->start_mark, kp, "must be <= %lld%s%s (got %lld)", (long long)hi, cap_msg ? "; " : "",
                            cap_msg ? cap_msg : "", v);
    *out = (int64_t)v;
    return MC_ERR_NONE;
}

enum mc_err_code mc_yaml_int_opt(struct mc_yaml_doc *ld, const yaml_node_t *n, const char *kp, int64_t lo, int64_t hi,
                                 const char *cap_msg, int64_t def, int64_t *out)
{
    if (n == NULL) {
        *out = def;
        return MC_ERR_NONE;
    }
    return mc_yaml_int(ld, n, kp, lo, hi, cap_msg, out);
}

enum mc_err_code mc_yaml_number_nonneg(struct mc_yaml_doc *ld, const yaml_node_t *n, const char *kp, double *out)
{
    char got[MC_YAML_DESCRIBE_LEN];
    mc_yaml_node_describe(n, got, sizeof got);
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return mc_yaml_fail(ld, n->start_mark, kp, "expected a number (got %s)", got);
    const char *s = (const char *)n->data.scalar.value;
    bool digit = false, ok = s[0] != '\0';
    for (const char *q = s; *q != '\0'; q++) {
        digit = digit || (*q >= '0' && *q <= '9');
        ok = ok && strchr("0123456789.eE+-", *q) != NULL;
    }
    if (!ok || !digit)
        return mc_yaml_fail(ld, n->start_mark, kp, "expected a decimal number (got %s)", got);
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0')
        return mc_yaml_fail(ld, n->start_mark, kp, "expected a decimal number (got %s)", got);
    if (!isfinite(v))
        return mc_yaml_fail(ld, n->start_mark, kp, "must be finite (got %s)", got);
    if (v < 0)
        return mc_yaml_fail(ld, n->start_mark, kp, "must be >= 0 (got %s)", got);
    *out = v + 0.0; /* no -0 */
    return MC_ERR_NONE;
}
