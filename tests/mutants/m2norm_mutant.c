/*
 * m2norm_mutant.c — the mutants of the Mamba2 gated-norm options (docs/semantics.md §2.7), each its own
 * library built, like m1norm_mutant.c, from the reference with one switch of reference/mamba2.c
 * (MC_REF_M2_NORM_FAULT, which this file's CMake sets per library):
 *
 * | backend                           | MC_REF_M2_NORM_FAULT | what it computes                                     | caught by |
 * | mutant.m2-no-gated-norm-ignored   | 1 | the gated norm (gate first, unit weight) on a checkpoint without one (FalconH1 mamba_rms_norm false) | nonorm: prefill -> output; tiny, normfirst pass |
 * | mutant.m2-norm-before-gate-ignored | 2 | the gate applied before the norm where the checkpoint norms first (FalconH1 mamba_norm_before_gate) | normfirst: prefill -> output; tiny, nonorm pass |
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
    ops = *mc_reference_mamba2_ops();
    ops.name = MC_REF_M2_NORM_FAULT == 1 ? "mutant.m2-no-gated-norm-ignored" : "mutant.m2-norm-before-gate-ignored";
    table[0] = &ops;
    *count = 1;
    *abi_version = MIXCHECK_ABI_VERSION;
    return table;
}
