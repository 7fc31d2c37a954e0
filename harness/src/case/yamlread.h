/*
 * yamlread.h — typed readers over a loaded YAML document (yamldoc.h), internal to harness/src.
 *
 * Each checks one node and, on a problem, records MC_ERR_INPUT through mc_yaml_fail, so that every
 * message reads "file:line:col: in 'kp': what is wrong (got X)"; kp is the node's key path. Each
 * returns the recorded code (MC_ERR_NONE when the node is good). Strings returned point into the
 * document and live until mc_yaml_close. No reader allocates.
 */
#ifndef MC_YAMLREAD_H
#define MC_YAMLREAD_H

#include <stddef.h>
#include <stdint.h>

#include "case/yamldoc.h"

#define MC_YAML_NAME_MAX_BYTES 128 /* names (ids, backends, devices): see mc_yaml_name */
#define MC_YAML_MAX_FIELDS 24      /* the most key names mc_yaml_fields accepts (the scenario names) */

/* n must be a node of `type` (a mapping or a sequence). */
enum mc_err_code mc_yaml_expect(struct mc_yaml_doc *ld, const yaml_node_t *n, const char *kp, yaml_node_type_t type);

/* A key must be a non-empty scalar string; *name receives it. */
enum mc_err_code mc_yaml_key(struct mc_yaml_doc *ld, const yaml_node_t *key, const char *kp, const char **name);

/* Checks that every key of mapping `map` is one of names[0..n) (n <= MC_YAML_MAX_FIELDS), at most
 * once, and fills vals[i] / keys[i] (either may be NULL) with the value and key node of names[i],
 * or NULL when absent. */
enum mc_err_code mc_yaml_fields(struct mc_yaml_doc *ld, yaml_node_t *map, const char *kp, const char *const *names,
                                size_t n, yaml_node_t **vals, yaml_node_t **keys);

/* "missing required key 'name'" at the mapping when val is NULL. */
enum mc_err_code mc_yaml_require(struct mc_yaml_doc *ld, const yaml_node_t *map, const char *kp, const char *name,
                                 const yaml_node_t *val);

/* Index of key's value in names[0..n); the caller has checked it is there (mc_yaml_fields). */
size_t mc_yaml_name_index(const char *const *names, size_t n, const yaml_node_t *key);

/* A string scalar (plain or quoted), not null, not empty, without NUL. */
enum mc_err_code mc_yaml_string(struct mc_yaml_doc *ld, const yaml_node_t *n, const char *kp, const char **out);

/* A string of [a-z0-9._-], at most MC_YAML_NAME_MAX_BYTES long; `what` names it in messages
 * ("backend names"). */
enum mc_err_code mc_yaml_name(struct mc_yaml_doc *ld, const yaml_node_t *n, const char *kp, const char *what,
                              const char **out);

/* A plain decimal integer in [lo, hi]; cap_msg (may be NULL) explains hi. */
enum mc_err_code mc_yaml_int(struct mc_yaml_doc *ld, const yaml_node_t *n, const char *kp, int64_t lo, int64_t hi,
                             const char *cap_msg, int64_t *out);

/* As mc_yaml_int, or `def` when n is NULL (an optional key). */
enum mc_err_code mc_yaml_int_opt(struct mc_yaml_doc *ld, const yaml_node_t *n, const char *kp, int64_t lo, int64_t hi,
                                 const char *cap_msg, int64_t def, int64_t *out);

/* A finite number >= 0 written as a plain decimal integer or float. */
enum mc_err_code mc_yaml_number_nonneg(struct mc_yaml_doc *ld, const yaml_node_t *n, const char *kp, double *out);

#endif
