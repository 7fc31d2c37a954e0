/*
 * groups_mutant.c — the S2.11 mutant (mc_groups_mutant): the Mamba2 reference built again with the head ->
 * group mapping of llama.cpp#15625 (`repeat` where `repeat_interleave` was meant: head h reads group h % G
 * instead of h / (H/G); Mamba-Codestral perplexity 16.14 -> 9.19 when it was fixed), through the switch
 * MC_REF_M2_GROUPS_REPEAT of reference/mamba2.c (this library's CMake defines it). Identical to the reference for
 * n_groups 1; caught on the n_groups 2 golden by prefill -> output (test_packed_mutants).
 */
#include <stdint.h>

#include "reference.h"

#define EXPORT __attribute__((visibility("default")))

static struct mc_backend_ops ops;
static const struct mc_backend_ops *table[1];

EXPORT const struct mc_backend_ops *const *mixcheck_plugin_backends(uint32_t *count, uint32_t *abi_version)
{
    ops = *mc_reference_mamba2_ops();
    ops.name = "mutant.S2.11-groups-repeat";
    table[0] = &ops;
    *count = 1;
    *abi_version = MIXCHECK_ABI_VERSION;
    return table;
}
