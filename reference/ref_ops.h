/*
 * ref_ops.h — the backend-interface half every reference family file (mamba2.c, mamba1.c, gdn.c,
 * shortconv.c, attention.c) writes the same way: the entry points that hand the shared code of
 * ref_common.h the family's struct mc_ref_family, and the fields its struct mc_backend_ops shares
 * with every other reference family.
 *
 * The entry points cannot take the family from the model: a call without a model must still answer
 * with "<family> reference: ..." (ref_common.h), so each family gets its own small functions, spelled
 * once here and named <prefix>_cache_alloc, <prefix>_forward, ...:
 *
 *     MC_REF_OPS_ENTRIES(m2, m2_family)
 *     MC_REF_PROBE_ENTRIES(m2, m2_family)            (families with stage probes)
 *     static const struct mc_backend_ops m2_ops = {
 *         MC_REF_OPS_FIELDS(m2, MC_FAMILY_MAMBA2),
 *         .caps = ..., .model_create = ..., .model_destroy = ...,
 *         .probe_enable = m2_probe_enable, .probe_read = m2_probe_read,
 *     };
 */
#ifndef MC_REFERENCE_REF_OPS_H
#define MC_REFERENCE_REF_OPS_H

#include "mixcheck/backend.h"
#include "ref_common.h"

/* cache_alloc, cache_copy, cache_export, cache_import, forward and forward_packed of family fam
 * (a struct mc_ref_family), as static functions prefix_cache_alloc ... prefix_forward_packed. */
#define MC_REF_OPS_ENTRIES(prefix, fam)                                                                              \
    static enum mc_backend_status prefix##_cache_alloc(struct mc_model *model, int64_t batch,                        \
                                                       struct mc_cache **cache, struct mc_msg *msg)                  \
    {                                                                                                                \
        return mc_ref_cache_alloc(&(fam), model, batch, cache, msg);                                                 \
    }                                                                                                                \
    static enum mc_backend_status prefix##_cache_copy(struct mc_model *model, struct mc_cache *dst,                  \
                                                      const struct mc_cache *src, struct mc_msg *msg)                \
    {                                                                                                                \
        return mc_ref_cache_copy(&(fam), model, dst, src, msg);                                                      \
    }                                                                                                                \
    static enum mc_backend_status prefix##_cache_export(struct mc_model *model, const struct mc_cache *cache,        \
                                                        void *conv_state, void *recurrent_state, struct mc_msg *msg) \
    {                                                                                                                \
        return mc_ref_cache_export(&(fam), model, cache, conv_state, recurrent_state, msg);                          \
    }                                                                                                                \
    static enum mc_backend_status prefix##_cache_import(struct mc_model *model, struct mc_cache *cache,              \
                                                        const void *conv_state, const void *recurrent_state,         \
                                                        struct mc_msg *msg)                                          \
    {                                                                                                                \
        return mc_ref_cache_import(&(fam), model, cache, conv_state, recurrent_state, msg);                          \
    }                                                                                                                \
    static enum mc_backend_status prefix##_forward(struct mc_model *model, struct mc_cache *cache,                   \
                                                   const struct mc_forward_args *args, struct mc_msg *msg)           \
    {                                                                                                                \
        return mc_ref_forward(&(fam), model, cache, args, msg);                                                      \
    }                                                                                                                \
    static enum mc_backend_status prefix##_forward_packed(struct mc_model *model, struct mc_cache *pool,             \
                                                          const struct mc_packed_args *args, struct mc_msg *msg)     \
    {                                                                                                                \
        return mc_ref_forward_packed(&(fam), model, pool, args, msg);                                                \
    }

/* probe_enable and probe_read of family fam, as static functions prefix_probe_enable, prefix_probe_read. */
#define MC_REF_PROBE_ENTRIES(prefix, fam)                                                                            \
    static enum mc_backend_status prefix##_probe_enable(struct mc_model *model, int32_t on, struct mc_msg *msg)      \
    {                                                                                                                \
        return mc_ref_probe_enable(&(fam), model, on, msg);                                                          \
    }                                                                                                                \
    static enum mc_backend_status prefix##_probe_read(struct mc_model *model, const struct mc_probe **probes,        \
                                                      int32_t *count, struct mc_msg *msg)                            \
    {                                                                                                                \
        return mc_ref_probe_read(&(fam), model, probes, count, msg);                                                 \
    }

/* The struct mc_backend_ops members every reference family sets alike: ABI, name "reference", device
 * "cpu", f32 | f64, the shared cache_free and the MC_REF_OPS_ENTRIES functions of prefix. */
#define MC_REF_OPS_FIELDS(prefix, family_enum)                                                                       \
    .abi_version = MIXCHECK_ABI_VERSION, .struct_size = sizeof(struct mc_backend_ops), .name = "reference",          \
    .device = "cpu", .family = (family_enum), .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_F64),     \
    .cache_alloc = prefix##_cache_alloc, .cache_copy = prefix##_cache_copy, .cache_free = mc_ref_cache_free,         \
    .cache_export = prefix##_cache_export, .cache_import = prefix##_cache_import, .forward = prefix##_forward,        \
    .forward_packed = prefix##_forward_packed

#endif
