/*
 * plugin.h — loads backends from shared libraries (`mixcheck run --plugin lib.so`). A plugin exports
 * MIXCHECK_PLUGIN_ENTRY (see mixcheck/backend.h); every ops struct it returns goes through the
 * registry's checks. A library that does not load, lacks the entry point, was built for another ABI
 * version or returns a bad ops struct is an MC_ERR_INPUT naming the file and what is wrong.
 */
#ifndef MC_PLUGIN_H
#define MC_PLUGIN_H

#include "base/error.h"
#include "exec/registry.h"

#define MC_PLUGIN_MAX 16

struct mc_plugins {
    void *handles[MC_PLUGIN_MAX];
    char *paths[MC_PLUGIN_MAX]; /* kept alive: registry entries point at them as their origin */
    int n;
};

void mc_plugins_init(struct mc_plugins *p);
/* dlopens `path` and registers its backends into reg. */
enum mc_err_code mc_plugins_load(struct mc_plugins *p, const char *path, struct mc_registry *reg,
                                 struct mc_error *err);
/* Unloads every library; the registry must not be used afterwards. */
void mc_plugins_unload(struct mc_plugins *p);

#endif
