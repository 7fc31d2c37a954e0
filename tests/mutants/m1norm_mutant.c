/*
 * m1norm_mutant.c — the mutants of the Mamba1 inner-norm option (docs/semantics.md §3.6), each its own
 * library built, like tests/packed/groups_mutant.c, from the reference with one switch of reference/mamba1.c
 * (MC_REF_M1_NORMS_FAULT, which this file's CMake sets per library); not part of the mutant library mc_mutants,
 * which has no Mamba1 mixer of its own:
 *
 * | backend                          | MC_REF_M1_NORMS_FAULT | what it computes                                        | caught by |
 * | mutant.m1-inner-norms-skipped    | 1 | a Mamba mixer on a FalconMamba / Jamba checkpoint: the RMSNorms on dt_low, B and C not applied | falconnorm, jambanorm: prefill -> output, recurrent_state; tiny passes |
 * | mutant.m1-inner-norm-weights-dropped | 2 | Jamba's weighted norms run as FalconMamba's weightless ones | jambanorm: prefill -> output; falconnorm, tiny pass |
 *
 * tests/mutants/test_option_mutants.c runs each through the CLI.
 */
#include <stdint.h>

#include "reference.h"

#define EXPORT __attribute__((visibility("default")))

static struct mc_backend_ops ops;
static const struct mc_backend_ops *table[1];

EXPORT const struct mc_backend_ops *const *mixcheck_plugin_backends(uint32_t *count, uint32_t *abi_version)
{
    ops = *mc_reference_mamba1_ops();
    ops.name = MC_REF_M1_NORMS_FAULT == 1 ? "mutant.m1-inner-norms-skipped" : "mutant.m1-inner-norm-weights-dropped";
    table[0] = &ops;
    *count = 1;
    *abi_version = MIXCHECK_ABI_VERSION;
    return table;
}
