/* plugin.c — see plugin.h. */
#include "exec/plugin.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mc_plugins_init(struct mc_plugins *p)
{
    memset(p, 0, sizeof *p);
}

enum mc_err_code mc_plugins_load(struct mc_plugins *p, const char *path, struct mc_registry *reg,
                                 struct mc_error *err)
{
    if (p->n >= MC_PLUGIN_MAX)
        return mc_error_set(err, MC_ERR_USAGE, "%s: too many plugins (at most %d)", path, MC_PLUGIN_MAX);
    /* dlopen searches the library path for a bare name; a plugin is a file the user points at */
    size_t len = strlen(path) + 3;
    char *owned = malloc(len);
    if (owned != NULL)
        snprintf(owned, len, "%s%s", strchr(path, '/') ? "" : "./", path);
    if (owned == NULL)
        return mc_error_set(err, MC_ERR_NOMEM, "out of memory");
    void *h = dlopen(owned, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *why = dlerror();
        free(owned);
        return mc_error_set(err, MC_ERR_INPUT, "plugin %s: cannot load: %s", path, why ? why : "unknown reason");
    }
    mc_plugin_entry_fn entry;
    void *sym = dlsym(h, MIXCHECK_PLUGIN_ENTRY);
    memcpy(&entry, &sym, sizeof entry); /* object pointer to function pointer, as POSIX allows */
    enum mc_err_code rc = MC_ERR_NONE;
    if (sym == NULL) {
        rc = mc_error_set(err, MC_ERR_INPUT, "plugin %s: no '%s' symbol (see harness/include/mixcheck/backend.h)",
                          path, MIXCHECK_PLUGIN_ENTRY);
        goto fail;
    }
    uint32_t count = 0, abi = 0;
    const struct mc_backend_ops *const *ops = entry(&count, &abi);
    if (abi != MIXCHECK_ABI_VERSION) {
        rc = mc_error_set(err, MC_ERR_INPUT, "plugin %s: built for backend ABI version %u, mixcheck has %u", path,
                          abi, MIXCHECK_ABI_VERSION);
        goto fail;
    }
    if (ops == NULL || count == 0) {
        rc = mc_error_set(err, MC_ERR_INPUT, "plugin %s: '%s' returned no backends", path, MIXCHECK_PLUGIN_ENTRY);
        goto fail;
    }
    p->handles[p->n] = h;
    p->paths[p->n] = owned;
    p->n++;
    for (uint32_t i = 0; i < count; i++) {
        struct mc_error e = {0};
        if (mc_registry_add_plugin(reg, ops[i], path, p->n, &e) != MC_ERR_NONE)
            return mc_error_set(err, MC_ERR_INPUT, "plugin %s: backend #%u: %s", path, i, e.msg);
    }
    return MC_ERR_NONE;
fail:
    dlclose(h);
    free(owned);
    return rc;
}

void mc_plugins_unload(struct mc_plugins *p)
{
    for (int i = p->n - 1; i >= 0; i--) {
        dlclose(p->handles[i]);
        free(p->paths[i]);
    }
    memset(p, 0, sizeof *p);
}
