/*
 * mut_json.h — the mutant library's own minimal JSON reader, for the upstream config.json a whole-stack
 * backend is created from (mut_stack.c). A document is parsed into a tree of mut_json values; keys of
 * an object are looked up by name. Strings keep their escapes undecoded except \" and \\ (config keys
 * and the values read here are plain ASCII). Self-contained: nothing of harness/ is used.
 */
#ifndef MC_MUT_JSON_H
#define MC_MUT_JSON_H

#include <stddef.h>

enum mut_json_type {
    MUT_JSON_NULL,
    MUT_JSON_BOOL,
    MUT_JSON_NUMBER,
    MUT_JSON_STRING,
    MUT_JSON_ARRAY,
    MUT_JSON_OBJECT,
};

struct mut_json {
    enum mut_json_type type;
    double number;          /* NUMBER; BOOL: 0 or 1 */
    char *string;           /* STRING */
    size_t n;               /* ARRAY, OBJECT: number of items */
    char **keys;            /* OBJECT: [n] */
    struct mut_json *items; /* ARRAY, OBJECT: [n] */
};

/* Parses text into *out (free with mut_json_free). 0 on success; -1 with a message "offset N: what" in
 * err (err_len bytes) on bad input or out of memory. */
int mut_json_parse(const char *text, struct mut_json *out, char *err, size_t err_len);
void mut_json_free(struct mut_json *v);

/* The value of `key` in object v, or NULL (v not an object, key absent). */
const struct mut_json *mut_json_get(const struct mut_json *v, const char *key);

#endif
