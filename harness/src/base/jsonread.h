/*
 * jsonread.h — a small, strict JSON parser (RFC 8259) for reading mixcheck's own reports back
 * (baselines, diff). Objects, arrays, strings (every escape, \u surrogate pairs, UTF-8 checked),
 * numbers (the JSON grammar only, finite doubles), true, false, null; one value per document,
 * whitespace around it only. Duplicate keys are errors, and so is \u0000 (values are C strings).
 * Errors carry the 1-based line and column (in bytes) where the parser stopped. The parser keeps
 * its own stack (no recursion), bounded by a nesting limit, and refuses input over a size limit.
 */
#ifndef MC_JSONREAD_H
#define MC_JSONREAD_H

#include <stddef.h>

enum mc_json_type {
    MC_JSON_NULL,
    MC_JSON_FALSE,
    MC_JSON_TRUE,
    MC_JSON_NUMBER,
    MC_JSON_STRING,
    MC_JSON_ARRAY,
    MC_JSON_OBJECT,
};

struct mc_json_value {
    enum mc_json_type type;
    int line, column;              /* where the value starts */
    double number;                 /* MC_JSON_NUMBER */
    char *string;                  /* MC_JSON_STRING: NUL-terminated UTF-8 */
    size_t len;                    /* string bytes, or array / object members */
    struct mc_json_value *items;   /* array elements, object values */
    char **keys;                   /* object keys, parallel to items */
};

#define MC_JSON_DEFAULT_MAX_DEPTH 64
#define MC_JSON_DEFAULT_MAX_BYTES ((size_t)256 << 20)

struct mc_json_limits {
    int max_depth;    /* nesting of arrays and objects; <= 0 = the default */
    size_t max_bytes; /* input size; 0 = the default */
};

struct mc_json_error {
    int line, column; /* 0 when the error has no position (a file that cannot be read) */
    char msg[256];
};

/* Parses text[0..len) into *root (free with mc_json_free). 0 on success; -1 with err filled. */
int mc_json_parse(const char *text, size_t len, const struct mc_json_limits *limits, struct mc_json_value **root,
                  struct mc_json_error *err);

/* Reads and parses a file; -1 with err (position 0:0 when it cannot be read or is too large). */
int mc_json_parse_file(const char *path, const struct mc_json_limits *limits, struct mc_json_value **root,
                       struct mc_json_error *err);

void mc_json_free(struct mc_json_value *root);

/* The member `key` of an object, or NULL (also when v is not an object). */
const struct mc_json_value *mc_json_get(const struct mc_json_value *v, const char *key);

const char *mc_json_type_name(enum mc_json_type t);

#endif
