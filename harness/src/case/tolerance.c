/*
 * tolerance.c — the tolerance-profile schema (format in cases/FORMAT.md): profile -> devices ->
 * dtype -> tensor -> {atol, rtol, why}, read through the typed YAML readers; and the lookup with
 * its fallback to the dtype's `default`.
 */
#include "case/tolerance.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "case/casenames.h"
#include "case/yamlread.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

#define MAX_DEVICES 64

enum { TK_PROFILE, TK_WHY, TK_DEVICES, TK_COUNT };
static const char *const TOL_KEYS[TK_COUNT] = {"profile", "why", "devices"};
static const char *const ENTRY_KEYS[] = {"atol", "rtol", "why", "atol_scale"};
#define REQUIRED_ENTRY_KEYS 3 /* atol_scale is optional (0) */

static enum mc_err_code ld_tol_entry(struct mc_yaml_doc *ld, yaml_node_t *n, const char *kp,
                                     struct mc_tolerance_entry *e)
{
    enum mc_err_code rc;
    yaml_node_t *v[COUNT(ENTRY_KEYS)];
    char fkp[MC_YAML_KP_LEN];
    const char *why = NULL;
    if ((rc = mc_yaml_expect(ld, n, kp, YAML_MAPPING_NODE)) != MC_ERR_NONE ||
        (rc = mc_yaml_fields(ld, n, kp, ENTRY_KEYS, COUNT(ENTRY_KEYS), v, NULL)) != MC_ERR_NONE)
        return rc;
    for (size_t i = 0; i < REQUIRED_ENTRY_KEYS; i++) {
        if ((rc = mc_yaml_require(ld, n, kp, ENTRY_KEYS[i], v[i])) != MC_ERR_NONE)
            return rc;
    }
    mc_yaml_kp_key(fkp, kp, "atol");
    if ((rc = mc_yaml_number_nonneg(ld, v[0], fkp, &e->tol.atol)) != MC_ERR_NONE)
        return rc;
    mc_yaml_kp_key(fkp, kp, "rtol");
    if ((rc = mc_yaml_number_nonneg(ld, v[1], fkp, &e->tol.rtol)) != MC_ERR_NONE)
        return rc;
    mc_yaml_kp_key(fkp, kp, "why");
    if ((rc = mc_yaml_string(ld, v[2], fkp, &why)) != MC_ERR_NONE)
        return rc;
    e->tol.atol_scale = 0.0;
    mc_yaml_kp_key(fkp, kp, "atol_scale");
    if (v[3] != NULL && (rc = mc_yaml_number_nonneg(ld, v[3], fkp, &e->tol.atol_scale)) != MC_ERR_NONE)
        return rc;
    if ((e->why = mc_strdup(why)) == NULL)
        return mc_yaml_nomem(ld);
    return MC_ERR_NONE;
}

/* One device: dtype -> tensor -> entry, appended to p->entries in file order. */
static enum mc_err_code ld_tol_device(struct mc_yaml_doc *ld, const char *device, yaml_node_t *n, const char *kp,
                                      struct mc_tolerance_profile *p)
{
    enum mc_err_code rc;
    char dkp[MC_YAML_KP_LEN], tkp[MC_YAML_KP_LEN];
    if ((rc = mc_yaml_expect(ld, n, kp, YAML_MAPPING_NODE)) != MC_ERR_NONE ||
        (rc = mc_yaml_fields(ld, n, kp, mc_case_dtype_names, MC_CASE_DTYPE_COUNT, NULL, NULL)) != MC_ERR_NONE)
        return rc;
    if (n->data.mapping.pairs.top == n->data.mapping.pairs.start)
        return mc_yaml_fail(ld, n->start_mark, kp, "must give tolerances for at least one dtype (got {})");
    for (yaml_node_pair_t *dp = n->data.mapping.pairs.start; dp < n->data.mapping.pairs.top; dp++) {
        size_t d = mc_yaml_name_index(mc_case_dtype_names, MC_CASE_DTYPE_COUNT, mc_yaml_node(ld, dp->key));
        yaml_node_t *tensors = mc_yaml_node(ld, dp->value);
        mc_yaml_kp_key(dkp, kp, mc_case_dtype_names[d]);
        if ((rc = mc_yaml_expect(ld, tensors, dkp, YAML_MAPPING_NODE)) != MC_ERR_NONE ||
            (rc = mc_yaml_fields(ld, tensors, dkp, mc_case_tensor_names, MC_TENSOR_COUNT + 1, NULL, NULL)) !=
                MC_ERR_NONE)
            return rc;
        if (tensors->data.mapping.pairs.top == tensors->data.mapping.pairs.start)
            return mc_yaml_fail(ld, tensors->start_mark, dkp,
                                "must give at least one tensor entry, e.g. default (got {})");
        for (yaml_node_pair_t *tp = tensors->data.mapping.pairs.start; tp < tensors->data.mapping.pairs.top; tp++) {
            size_t t = mc_yaml_name_index(mc_case_tensor_names, MC_TENSOR_COUNT + 1, mc_yaml_node(ld, tp->key));
            struct mc_tolerance_entry *e = &p->entries[p->n_entries];
            mc_yaml_kp_key(tkp, dkp, mc_case_tensor_names[t]);
            if ((e->device = mc_strdup(device)) == NULL)
                return mc_yaml_nomem(ld);
            e->dtype = mc_case_dtypes[d];
            e->tensor = (int)t;
            p->n_entries++;
            if ((rc = ld_tol_entry(ld, mc_yaml_node(ld, tp->value), tkp, e)) != MC_ERR_NONE)
                return rc;
        }
    }
    return MC_ERR_NONE;
}

static enum mc_err_code ld_tolerance(struct mc_yaml_doc *ld, yaml_node_t *root, struct mc_tolerance_profile *p)
{
    enum mc_err_code rc;
    yaml_node_t *v[TK_COUNT];
    const char *s = NULL;
    char kp[MC_YAML_KP_LEN];

    if ((rc = mc_yaml_fields(ld, root, "", TOL_KEYS, TK_COUNT, v, NULL)) != MC_ERR_NONE)
        return rc;
    for (int i = 0; i < TK_COUNT; i++) {
        if ((rc = mc_yaml_require(ld, root, "", TOL_KEYS[i], v[i])) != MC_ERR_NONE)
            return rc;
    }
    if ((rc = mc_yaml_string(ld, v[TK_PROFILE], "profile", &s)) != MC_ERR_NONE)
        return rc;
    if ((p->name = mc_strdup(s)) == NULL)
        return mc_yaml_nomem(ld);
    if ((rc = mc_yaml_string(ld, v[TK_WHY], "why", &s)) != MC_ERR_NONE)
        return rc;
    yaml_node_t *devs = v[TK_DEVICES];
    if ((rc = mc_yaml_expect(ld, devs, "devices", YAML_MAPPING_NODE)) != MC_ERR_NONE)
        return rc;
    size_t count = (size_t)(devs->data.mapping.pairs.top - devs->data.mapping.pairs.start);
    if (count == 0)
        return mc_yaml_fail(ld, devs->start_mark, "devices", "must name at least one device (got {})");
    if (count > MAX_DEVICES)
        return mc_yaml_fail(ld, devs->start_mark, "devices", "at most %d devices are allowed (got %zu)", MAX_DEVICES,
                            count);
    p->entries = mc_calloc(count * MC_CASE_DTYPE_COUNT * (MC_TENSOR_COUNT + 1), sizeof *p->entries);
    if (p->entries == NULL)
        return mc_yaml_nomem(ld);
    for (size_t i = 0; i < count; i++) {
        yaml_node_pair_t *pair = &devs->data.mapping.pairs.start[i];
        yaml_node_t *key = mc_yaml_node(ld, pair->key);
        const char *name = NULL;
        if ((rc = mc_yaml_key(ld, key, "devices", &name)) != MC_ERR_NONE ||
            (rc = mc_yaml_name(ld, key, "devices", "device names", &name)) != MC_ERR_NONE)
            return rc;
        for (size_t j = 0; j < i; j++) {
            yaml_node_t *prev = mc_yaml_node(ld, devs->data.mapping.pairs.start[j].key);
            if (strcmp((const char *)prev->data.scalar.value, name) == 0)
                return mc_yaml_fail(ld, key->start_mark, "devices", "duplicate key '%s' (first at %zu:%zu)", name,
                                    prev->start_mark.line + 1, prev->start_mark.column + 1);
        }
        mc_yaml_kp_key(kp, "devices", name);
        if ((rc = ld_tol_device(ld, name, mc_yaml_node(ld, pair->value), kp, p)) != MC_ERR_NONE)
            return rc;
    }
    return MC_ERR_NONE;
}

static enum mc_err_code tolerance_load(const char *path, const void *data, size_t len, const struct mc_yaml_ref *ref,
                                       struct mc_tolerance_profile *p, struct mc_error *err)
{
    enum mc_err_code rc;
    struct mc_tolerance_profile tmp = {0};
    struct mc_yaml_doc ld = {.path = path, .err = err, .mem = data, .mem_len = len};
    yaml_node_t *root = NULL;

    memset(p, 0, sizeof *p);
    if ((tmp.path = mc_strdup(path)) == NULL) {
        rc = mc_yaml_nomem(&ld);
        goto done;
    }
    if ((rc = mc_yaml_open(&ld, ref, &root)) != MC_ERR_NONE)
        goto done;
    rc = ld_tolerance(&ld, root, &tmp);
done:
    mc_yaml_close(&ld);
    if (rc == MC_ERR_NONE)
        *p = tmp;
    else
        mc_tolerance_free(&tmp);
    return rc;
}

enum mc_err_code mc_tolerance_load_ref(const char *path, const struct mc_yaml_ref *ref, struct mc_tolerance_profile *p,
                                       struct mc_error *err)
{
    return tolerance_load(path, NULL, 0, ref, p, err);
}

enum mc_err_code mc_tolerance_load_buffer(const char *path, const void *data, size_t len,
                                          struct mc_tolerance_profile *p, struct mc_error *err)
{
    static const char empty[1] = "";
    return tolerance_load(path, len > 0 ? data : empty, len, NULL, p, err);
}

enum mc_err_code mc_tolerance_load(const char *path, struct mc_tolerance_profile *p, struct mc_error *err)
{
    return mc_tolerance_load_ref(path, NULL, p, err);
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

int mc_tolerance_covers(const struct mc_tolerance_profile *p, const char *device, enum mc_dtype dtype)
{
    for (int i = 0; i < p->n_entries; i++)
        if (p->entries[i].dtype == dtype && strcmp(p->entries[i].device, device) == 0)
            return 1;
    return 0;
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
