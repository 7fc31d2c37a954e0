/*
 * yamldoc.h — a YAML file loaded as a libyaml document whose every node keeps its position, and
 * the messages that point into it (internal to harness/src; typed readers are in yamlread.h).
 *
 * A file goes through four gates before any value is read:
 *   1. read whole (refused above MC_YAML_MAX_FILE_BYTES, before parsing);
 *   2. a byte scan: valid UTF-8, no control characters (binary garbage stops here);
 *   3. an event pass: YAML syntax, exactly one document, no anchors / aliases / explicit tags,
 *      nesting depth bounded (libyaml's composer recurses, so depth is checked before composing);
 *   4. the document API, so every node keeps its line and column for messages.
 * Every error is MC_ERR_INPUT reading "file:line:col: in 'key.path': what is wrong (got X)", or
 * MC_ERR_NOMEM. Our allocations go through alloc.h; libyaml's own do not, and a failure of one of
 * them is reported as MC_ERR_NOMEM when libyaml says so (YAML_MEMORY_ERROR).
 */
#ifndef MC_YAMLDOC_H
#define MC_YAMLDOC_H

#include <stdbool.h>
#include <stddef.h>

#include <yaml.h>

#include "base/error.h"

#define MC_YAML_MAX_FILE_BYTES (1024L * 1024L)      /* the "1 MiB limit" of the messages */
#define MC_YAML_KP_LEN 256                          /* key paths longer than this are truncated in messages */
#define MC_YAML_GOT_LEN 48                          /* scalar values quoted in messages are cut to this many bytes */
#define MC_YAML_DESCRIBE_LEN (MC_YAML_GOT_LEN + 16) /* a buffer for mc_yaml_node_describe */
#define MC_YAML_MAX_DEPTH 32                        /* nesting levels a file may use (ours need 6) */

/* Who named the file being loaded (e.g. a case's `tolerance:` key), for open/read failures. */
struct mc_yaml_ref {
    const char *path;
    yaml_mark_t mark;
    const char *key;
};

/* One file being loaded (`ld` in callers). Set path and err (and mem, mem_len to load from memory),
 * zero the rest; mc_yaml_close releases it. */
struct mc_yaml_doc {
    const char *path;
    struct mc_error *err;
    const void *mem;    /* when not NULL: the file's content (mem_len bytes), path only names it */
    size_t mem_len;
    unsigned char *buf; /* the whole file */
    size_t len;
    yaml_document_t doc;
    bool have_doc;
};

/* Reads, checks and composes ld->path (ref, may be NULL, names who pointed at it); *root receives
 * the root node, which must be a mapping. Call mc_yaml_close whatever the result. */
enum mc_err_code mc_yaml_open(struct mc_yaml_doc *ld, const struct mc_yaml_ref *ref, yaml_node_t **root);
void mc_yaml_close(struct mc_yaml_doc *ld);

/* The node at a document index. */
yaml_node_t *mc_yaml_node(struct mc_yaml_doc *ld, int index);

/* Records MC_ERR_INPUT "file:line:col: in 'kpath': what" ("file:line:col: what" when kpath is NULL
 * or empty). Returns the recorded code. */
enum mc_err_code mc_yaml_fail(const struct mc_yaml_doc *ld, yaml_mark_t mark, const char *kpath, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Records MC_ERR_NOMEM "file: out of memory while loading". */
enum mc_err_code mc_yaml_nomem(const struct mc_yaml_doc *ld);

/* Key paths for messages (out holds MC_YAML_KP_LEN bytes): "base.key" and "base[i]"; a path too
 * long is cut and ends in "...". */
void mc_yaml_kp_key(char *out, const char *base, const char *key);
void mc_yaml_kp_index(char *out, const char *base, size_t i);

/* true for a plain scalar spelled as YAML null: "", ~, null, Null, NULL. */
bool mc_yaml_scalar_is_null(const yaml_node_t *n);

/* A printable excerpt of s[0..len): control characters become '?', values longer than
 * MC_YAML_GOT_LEN bytes are cut (never inside a UTF-8 sequence) and end in "...". */
void mc_yaml_excerpt(const char *s, size_t len, char *out, size_t cap);

/* "a mapping", "a sequence", "null", the plain value, or the quoted value in double quotes. */
void mc_yaml_node_describe(const yaml_node_t *n, char *out, size_t cap);

/* names[0..n) joined with ", " into out (cut at cap). */
void mc_yaml_names_join(char *out, size_t cap, const char *const *names, size_t n);

#endif
