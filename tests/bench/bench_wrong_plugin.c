/*
 * bench_wrong_plugin.c — a Mamba2 backend "bench_wrong" for test_bench: the reference with its first
 * output element off by one. Fast and plausible, and wrong: `mixcheck bench` must refuse to time it.
 */
#include <stdint.h>

#include "mixcheck/backend.h"
#include "reference.h"

static struct mc_backend_ops wrong_ops;

static enum mc_backend_status wrong_forward(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                            struct mc_msg *msg)
{
    enum mc_backend_status st = mc_reference_mamba2_ops()->forward(m, c, a, msg);
    ((float *)a->y)[0] += 1.0f;
    return st;
}

__attribute__((visibility("default"))) const struct mc_backend_ops *const *
mixcheck_plugin_backends(uint32_t *count, uint32_t *abi_version)
{
    static const struct mc_backend_ops *all[1];
    wrong_ops = *mc_reference_mamba2_ops();
    wrong_ops.name = "bench_wrong";
    wrong_ops.dtypes = MC_DTYPE_BIT(MC_DTYPE_F32);
    wrong_ops.forward = wrong_forward;
    all[0] = &wrong_ops;
    *count = 1;
    *abi_version = MIXCHECK_ABI_VERSION;
    return all;
}
