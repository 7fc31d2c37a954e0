/* bad_plugins.c — broken plugins for test_plugin, one per MC_BAD_KIND:
 *   1 reports a foreign ABI version, 2 returns an ops struct without `forward`,
 *   3 returns an ops struct of the wrong size, 4 exports no entry point at all. */
#include <stddef.h>
#include <stdint.h>

#include "mixcheck/backend.h"

#if MC_BAD_KIND != 4
static struct mc_backend_ops bad_ops = {
    .abi_version = MIXCHECK_ABI_VERSION,
    .struct_size = sizeof(struct mc_backend_ops),
    .name = "bad",
    .device = "cpu",
    .family = MC_FAMILY_MAMBA2,
    .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32),
};

__attribute__((visibility("default"))) const struct mc_backend_ops *const *
mixcheck_plugin_backends(uint32_t *count, uint32_t *abi_version)
{
    static const struct mc_backend_ops *const all[] = {&bad_ops};
    *count = 1;
    *abi_version = MC_BAD_KIND == 1 ? MIXCHECK_ABI_VERSION + 41 : MIXCHECK_ABI_VERSION;
    if (MC_BAD_KIND == 3)
        bad_ops.struct_size = 8;
    return all;
}
#else
__attribute__((visibility("default"))) int mixcheck_not_a_plugin(void)
{
    return 0;
}
#endif
