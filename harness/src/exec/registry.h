/*
 * registry.h — the backends a run can use. Every implementation enters through mc_registry_add,
 * which checks the ops struct (ABI version, a struct size of at least the first form's, every
 * required function present — the stack entries for a whole-stack backend (family MC_FAMILY_STACK) —, a
 * known family, a name), keeps a normalized copy of it, and refuses a
 * duplicate (name, family). Lookups are by (name, family) and return the copy.
 */
#ifndef MC_REGISTRY_H
#define MC_REGISTRY_H

#include "base/error.h"
#include "mixcheck/backend.h"

#define MC_REGISTRY_MAX 64

struct mc_registry_entry {
    const struct mc_backend_ops *ops; /* points at `copy` */
    /* the backend's ops as this mixcheck knows them: members past an older backend's struct_size are
     * NULL (backend.h, version rules), so the rest of the harness tests entries for NULL only */
    struct mc_backend_ops copy;
    const char *origin; /* "built-in" or the plugin's path */
    int plugin;         /* 0 for a built-in backend, k for the k-th plugin loaded (1-based) */
};

struct mc_registry {
    struct mc_registry_entry entries[MC_REGISTRY_MAX];
    int n;
};

void mc_registry_init(struct mc_registry *r);

/* Validates and adds; MC_ERR_BACKEND with a message naming `origin` and what is wrong. */
enum mc_err_code mc_registry_add(struct mc_registry *r, const struct mc_backend_ops *ops, const char *origin,
                                 struct mc_error *err);

/* As mc_registry_add, for a backend of the `plugin`-th plugin loaded (1-based). */
enum mc_err_code mc_registry_add_plugin(struct mc_registry *r, const struct mc_backend_ops *ops, const char *origin,
                                        int plugin, struct mc_error *err);

const struct mc_backend_ops *mc_registry_find(const struct mc_registry *r, const char *name, enum mc_family family);
/* The entry holding ops, or NULL. */
const struct mc_registry_entry *mc_registry_entry_of(const struct mc_registry *r, const struct mc_backend_ops *ops);
/* Writes the distinct backend names, comma-separated, into buf (for "known backends: ..."). */
void mc_registry_names(const struct mc_registry *r, char *buf, size_t len);

/* 1 when some backend of any family has this name. */
int mc_registry_has_name(const struct mc_registry *r, const char *name);

#endif
