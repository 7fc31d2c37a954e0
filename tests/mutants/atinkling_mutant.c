/*
 * atinkling_mutant.c — the mutants of the attention family's Inkling options (docs/semantics.md §12.9), each its own
 * library built, like m2norm_mutant.c, from the reference with one switch of reference/attention.c
 * (MC_REF_AT_INKLING_FAULT, which this file's CMake sets per library):
 *
 * | backend                              | fault | what it computes                                           | caught by |
 * | mutant.inkling-rel-logits-skipped    | 1 | the scores without the relative logits                          | models/inkling: prefill, layer 0 |
 * | mutant.inkling-rel-logits-twice      | 2 | the relative logits added twice                                 | models/inkling: prefill, layer 0 |
 * | mutant.inkling-sconv-residual-dropped | 3 | the short convs' output alone, without their input added       | models/inkling: prefill, layer 0 |
 * | mutant.inkling-window-ignored        | 4 | a sliding layer attending to every cached position              | models/inkling: prefill, layer 0 |
 *
 * Each leaves an attention layer without the options as it is (cases/attention/tiny passes).
 * tests/mutants/test_option_mutants.c runs each through the CLI.
 */
#include <stdint.h>

#include "reference.h"

#define EXPORT __attribute__((visibility("default")))

static struct mc_backend_ops ops;
static const struct mc_backend_ops *table[1];

EXPORT const struct mc_backend_ops *const *mixcheck_plugin_backends(uint32_t *count, uint32_t *abi_version)
{
    static const char *const names[] = {"", "mutant.inkling-rel-logits-skipped", "mutant.inkling-rel-logits-twice",
                                         "mutant.inkling-sconv-residual-dropped", "mutant.inkling-window-ignored"};
    ops = *mc_reference_attention_ops();
    ops.name = names[MC_REF_AT_INKLING_FAULT];
    table[0] = &ops;
    *count = 1;
    *abi_version = MIXCHECK_ABI_VERSION;
    return table;
}
