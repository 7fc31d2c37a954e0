/*
 * registry.h — the backends a run can use. Every implementation enters through mc_registry_add,
 * which checks the ops struct (ABI version, a struct size of at least the first form's, every
 * required function present — the stack entries for a whole-stack backend (family MC_FAMILY_STACK) —, a
 * known family, a name), keeps a normalized copy of it, and refuses a
 * duplicate (name, family). Lookups are by (name, family) and return the copy.
 *
 * The registry has no fixed size: the first MC_REGISTRY_INLINE backends live in the struct itself (no
 * allocation, so a registry of that size needs no mc_registry_free), later ones on the heap. A copy
 * stays where it is for the registry's life (the ops pointers lookups return are stable); the entries
 * array may move when one is added, so `entries` and mc_registry_entry_of's answer are valid until
 * the next add. A registry is used where mc_registry_init put it (never copied by value).
 */
#ifndef MC_REGISTRY_H
#define MC_REGISTRY_H

#include "base/error.h"
#include "mixcheck/backend.h"

#define MC_REGISTRY_INLINE 64
/* a bound on the count, far past what any run loads: a runaway plugin is an error, not an OOM */
#define MC_REGISTRY_MAX 65536

struct mc_registry_entry {
    /* the registry's copy of the backend's ops as this mixcheck knows them: members past an older
     * backend's struct_size are NULL (backend.h, version rules), so the rest of the harness tests
     * entries for NULL only */
    const struct mc_backend_ops *ops;
    const char *origin; /* "built-in" or the plugin's path */
    int plugin;         /* 0 for a built-in backend, k for the k-th plugin loaded (1-based) */
};

struct mc_registry {
    struct mc_registry_entry *entries; /* the n backends in the order added */
    int n;
    int cap; /* room in `entries`: MC_REGISTRY_INLINE while it is `first` */
    struct mc_registry_entry first[MC_REGISTRY_INLINE];
    struct mc_backend_ops first_ops[MC_REGISTRY_INLINE]; /* the copies of the first entries */
};

void mc_registry_init(struct mc_registry *r);
/* Frees what the backends past the first MC_REGISTRY_INLINE took; the registry is empty after it. */
void mc_registry_free(struct mc_registry *r);

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
