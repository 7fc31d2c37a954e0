/* untested_plugin.c — a plugin that mixcheck cannot test, for test_cli_matrix: two ShortConv backends,
 * "nodo" (f32 and f64 declared, every model answered MC_BACKEND_UNSUPPORTED) and "f64only" (only f64
 * declared, so a run at f32 schedules none of its checks; unsupported as well). Neither computes
 * anything: the matrix asserts that a run with it says so (exit 125) instead of passing on the
 * built-in backends' checks. */
#include <stdio.h>

#include "mixcheck/backend.h"

static enum mc_backend_status unsupported(struct mc_msg *msg)
{
    snprintf(msg->text, sizeof msg->text, "this test port implements no ShortConv layer");
    return MC_BACKEND_UNSUPPORTED;
}

static enum mc_backend_status never(struct mc_msg *msg)
{
    snprintf(msg->text, sizeof msg->text, "called without a model");
    return MC_BACKEND_INTERNAL;
}

static enum mc_backend_status model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                           struct mc_msg *msg)
{
    (void)desc;
    *model = NULL;
    return unsupported(msg);
}

static void model_destroy(struct mc_model *model)
{
    (void)model;
}

static enum mc_backend_status cache_alloc(struct mc_model *model, int64_t batch, struct mc_cache **cache,
                                          struct mc_msg *msg)
{
    (void)model;
    (void)batch;
    *cache = NULL;
    return never(msg);
}

static enum mc_backend_status cache_copy(struct mc_model *model, struct mc_cache *dst, const struct mc_cache *src,
                                         struct mc_msg *msg)
{
    (void)model;
    (void)dst;
    (void)src;
    return never(msg);
}

static void cache_free(struct mc_model *model, struct mc_cache *cache)
{
    (void)model;
    (void)cache;
}

static enum mc_backend_status cache_export(struct mc_model *model, const struct mc_cache *cache, void *conv_state,
                                           void *recurrent_state, struct mc_msg *msg)
{
    (void)model;
    (void)cache;
    (void)conv_state;
    (void)recurrent_state;
    return never(msg);
}

static enum mc_backend_status cache_import(struct mc_model *model, struct mc_cache *cache, const void *conv_state,
                                           const void *recurrent_state, struct mc_msg *msg)
{
    (void)model;
    (void)cache;
    (void)conv_state;
    (void)recurrent_state;
    return never(msg);
}

static enum mc_backend_status forward(struct mc_model *model, struct mc_cache *cache, const struct mc_forward_args *args,
                                      struct mc_msg *msg)
{
    (void)model;
    (void)cache;
    (void)args;
    return never(msg);
}

#define UNTESTED_OPS(backend_name, dtype_bits)                                                                        \
    {                                                                                                                 \
        .abi_version = MIXCHECK_ABI_VERSION, .struct_size = sizeof(struct mc_backend_ops), .name = backend_name,     \
        .device = "cpu", .family = MC_FAMILY_SHORTCONV, .dtypes = dtype_bits, .model_create = model_create,          \
        .model_destroy = model_destroy, .cache_alloc = cache_alloc, .cache_copy = cache_copy,                         \
        .cache_free = cache_free, .cache_export = cache_export, .cache_import = cache_import, .forward = forward,     \
    }

static const struct mc_backend_ops nodo = UNTESTED_OPS("nodo", MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_F64));
static const struct mc_backend_ops f64only = UNTESTED_OPS("f64only", MC_DTYPE_BIT(MC_DTYPE_F64));

__attribute__((visibility("default"))) const struct mc_backend_ops *const *
mixcheck_plugin_backends(uint32_t *count, uint32_t *abi_version)
{
    static const struct mc_backend_ops *const all[] = {&nodo, &f64only};
    *count = 2;
    *abi_version = MIXCHECK_ABI_VERSION;
    return all;
}
