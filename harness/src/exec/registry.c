/* registry.c — see registry.h. */
#include "exec/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family/family.h"

void mc_registry_init(struct mc_registry *r)
{
    memset(r, 0, sizeof *r);
    r->entries = r->first;
    r->cap = MC_REGISTRY_INLINE;
}

void mc_registry_free(struct mc_registry *r)
{
    for (int i = MC_REGISTRY_INLINE; i < r->n; i++)
        free((void *)r->entries[i].ops);
    if (r->entries != r->first)
        free(r->entries);
    mc_registry_init(r);
}

/* Room for one more entry and its copy; NULL when out of memory. The copies of the first entries are
 * in the struct, later ones on the heap, so no copy moves when `entries` grows. */
static struct mc_backend_ops *reserve(struct mc_registry *r)
{
    if (r->entries == NULL) /* a zeroed struct that was never initialised */
        r->entries = r->first, r->cap = MC_REGISTRY_INLINE;
    if (r->n < MC_REGISTRY_INLINE)
        return &r->first_ops[r->n];
    if (r->n >= r->cap) {
        int cap = r->cap * 2;
        struct mc_registry_entry *grown = malloc((size_t)cap * sizeof *grown);
        if (grown == NULL)
            return NULL;
        memcpy(grown, r->entries, (size_t)r->n * sizeof *grown);
        if (r->entries != r->first)
            free(r->entries);
        r->entries = grown;
        r->cap = cap;
    }
    return malloc(sizeof(struct mc_backend_ops));
}

enum mc_err_code mc_registry_add(struct mc_registry *r, const struct mc_backend_ops *ops, const char *origin,
                                 struct mc_error *err)
{
    return mc_registry_add_plugin(r, ops, origin, 0, err);
}

enum mc_err_code mc_registry_add_plugin(struct mc_registry *r, const struct mc_backend_ops *ops, const char *origin,
                                        int plugin, struct mc_error *err)
{
    if (ops == NULL)
        return mc_error_set(err, MC_ERR_BACKEND, "%s: NULL backend ops", origin);
    if (ops->abi_version != MIXCHECK_ABI_VERSION)
        return mc_error_set(err, MC_ERR_BACKEND, "%s: backend '%s' was built for ABI version %u, mixcheck has %u",
                            origin, ops->name ? ops->name : "?", ops->abi_version, MIXCHECK_ABI_VERSION);
    if (ops->struct_size < MC_BACKEND_OPS_SIZE_V1)
        return mc_error_set(err, MC_ERR_BACKEND,
                            "%s: backend '%s' ops struct has size %u, smaller than the first form of ABI %u (%zu)",
                            origin, ops->name ? ops->name : "?", ops->struct_size, MIXCHECK_ABI_VERSION,
                            (size_t)MC_BACKEND_OPS_SIZE_V1);
    if (ops->name == NULL || ops->name[0] == '\0')
        return mc_error_set(err, MC_ERR_BACKEND, "%s: backend without a name", origin);
    if (ops->device == NULL || ops->device[0] == '\0')
        return mc_error_set(err, MC_ERR_BACKEND, "%s: backend '%s' declares no device", origin, ops->name);
    enum mc_family fam;
    int whole = ops->family == MC_FAMILY_STACK;
    if (!whole && mc_family_from_name(mc_family_name(ops->family), &fam) != 0)
        return mc_error_set(err, MC_ERR_BACKEND, "%s: backend '%s' has unknown family %d", origin, ops->name,
                            (int)ops->family);
    /* the stack entries, NULL when the backend's struct is too old to hold them */
    struct mc_backend_ops seen;
    memset(&seen, 0, sizeof seen);
    memcpy(&seen, ops, ops->struct_size < sizeof seen ? ops->struct_size : sizeof seen);
    if (whole && !(seen.caps & MC_CAP_STACK))
        return mc_error_set(err, MC_ERR_BACKEND, "%s: backend '%s' is a whole stack without the MC_CAP_STACK capability",
                            origin, ops->name);
    struct required {
        const char *name;
        int present;
    };
    const struct required mixer_fns[] = {
        {"model_create", ops->model_create != NULL}, {"model_destroy", ops->model_destroy != NULL},
        {"cache_alloc", ops->cache_alloc != NULL},   {"cache_copy", ops->cache_copy != NULL},
        {"cache_free", ops->cache_free != NULL},     {"cache_export", ops->cache_export != NULL},
        {"cache_import", ops->cache_import != NULL}, {"forward", ops->forward != NULL},
    }, stack_fns[] = {
        {"stack_create", seen.stack_create != NULL}, {"model_destroy", ops->model_destroy != NULL},
        {"cache_alloc", ops->cache_alloc != NULL},   {"cache_copy", ops->cache_copy != NULL},
        {"cache_free", ops->cache_free != NULL},     {"stack_forward", seen.stack_forward != NULL},
        {"stack_cache_export", seen.stack_cache_export != NULL},
    };
    size_t n_fns = whole ? sizeof stack_fns / sizeof stack_fns[0] : sizeof mixer_fns / sizeof mixer_fns[0];
    const struct required *fns = whole ? stack_fns : mixer_fns;
    for (size_t i = 0; i < n_fns; i++)
        if (!fns[i].present)
            return mc_error_set(err, MC_ERR_BACKEND, "%s: backend '%s' (%s) has no '%s' function", origin, ops->name,
                                mc_family_name(ops->family), fns[i].name);
    if (mc_registry_find(r, ops->name, ops->family) != NULL)
        return mc_error_set(err, MC_ERR_BACKEND, "%s: backend '%s' for %s is already registered", origin, ops->name,
                            mc_family_name(ops->family));
    if (r->n >= MC_REGISTRY_MAX)
        return mc_error_set(err, MC_ERR_BACKEND, "%s: too many backends (at most %d)", origin, MC_REGISTRY_MAX);
    struct mc_backend_ops *copy = reserve(r);
    if (copy == NULL)
        return mc_error_set(err, MC_ERR_NOMEM, "%s: out of memory registering backend '%s'", origin, ops->name);
    /* what the backend's struct has, and NULL for what it is too old to have */
    *copy = seen;
    copy->struct_size = (uint32_t)sizeof *copy;
    if ((copy->caps & MC_CAP_PACKED) && copy->forward_packed == NULL)
        copy->caps &= ~MC_CAP_PACKED;
    if ((copy->caps & MC_CAP_PROBES) && (copy->probe_enable == NULL || copy->probe_read == NULL))
        copy->caps &= ~MC_CAP_PROBES;
    if (!(copy->caps & MC_CAP_PROBES))
        copy->probe_enable = NULL, copy->probe_read = NULL;
    if (!(copy->caps & MC_CAP_PACKED))
        copy->forward_packed = NULL;
    if ((copy->caps & MC_CAP_STACK_PACKED) && copy->stack_forward_packed == NULL)
        copy->caps &= ~MC_CAP_STACK_PACKED;
    if (!(copy->caps & MC_CAP_STACK_PACKED))
        copy->stack_forward_packed = NULL;
    /* the stack entries belong to whole-stack backends only; a mixer backend's are ignored */
    if (!whole)
        copy->caps &= ~(MC_CAP_STACK | MC_CAP_STACK_HIDDEN | MC_CAP_STACK_PACKED), copy->stack_create = NULL,
        copy->stack_forward = NULL, copy->stack_cache_export = NULL, copy->stack_forward_packed = NULL;
    r->entries[r->n] = (struct mc_registry_entry){.ops = copy, .origin = origin, .plugin = plugin};
    r->n++;
    return MC_ERR_NONE;
}

const struct mc_backend_ops *mc_registry_find(const struct mc_registry *r, const char *name, enum mc_family family)
{
    for (int i = 0; i < r->n; i++)
        if (r->entries[i].ops->family == family && strcmp(r->entries[i].ops->name, name) == 0)
            return r->entries[i].ops;
    return NULL;
}

const struct mc_registry_entry *mc_registry_entry_of(const struct mc_registry *r, const struct mc_backend_ops *ops)
{
    for (int i = 0; i < r->n; i++)
        if (r->entries[i].ops == ops)
            return &r->entries[i];
    return NULL;
}

void mc_registry_names(const struct mc_registry *r, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < r->n && used < len; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = strcmp(r->entries[j].ops->name, r->entries[i].ops->name) == 0;
        if (!seen)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "", r->entries[i].ops->name);
    }
}

int mc_registry_has_name(const struct mc_registry *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->entries[i].ops->name, name) == 0)
            return 1;
    return 0;
}
