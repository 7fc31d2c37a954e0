/*
 * stackcheck.h — the scenarios of a model case (docs/models.md §3): a whole stack (stack.h) with
 * the layers under test on the backend under test and the others on the stack backend (the reference,
 * or cpu at a dtype the reference does not declare, or the one --stack-backend names), driven through
 * prefill, decode, chunked, first-token causality, left-padded and batch-invariance runs and greedy
 * generation, compared with a model golden (stackgolden.h) on logits (elementwise tolerance, plus the
 * metrics of logits.h), on the residual stream after every layer, and on every layer's cache.
 *
 * When logits or hidden states fail, the result's diagnosis names the first layer whose hidden state
 * left tolerance, the first failing token and what diverged there: the embedding, the final norm and
 * head, a layer's mixer (its output leaves tolerance on the golden's own input), the glue around a
 * mixer (the mixer alone is within tolerance, the layer is not), or a layer exact on the golden's input
 * that diverges on the scenario's cached path.
 */
#ifndef MC_STACKCHECK_H
#define MC_STACKCHECK_H

#include "case/case.h"
#include "base/error.h"
#include "scenario/scenario.h"
#include "golden/stackgolden.h"

struct mc_stack_ctx {
    const struct mc_case *c;
    const struct mc_scenario_spec *spec;
    const struct mc_stack_golden *g;
    const struct mc_backend_ops *const *layer_ops; /* [n_layers]: the backend each layer runs on */
    /* [n_layers] or NULL: for a layer not under test whose layer_ops entry does not declare the check's
     * dtype (the reference at f16/bf16), the backend it runs on instead when that one declares it (the
     * family's cpu backend; NULL entries: none). A check with such a layer and no fallback that declares
     * the dtype is unsupported */
    const struct mc_backend_ops *const *fallback_layer_ops;
    const uint8_t *under_test;                     /* [n_layers]: 1 where that is the backend under test */
    const struct mc_backend_ops *ops;              /* the backend under test */
    enum mc_dtype dtype;
    int32_t threads;
    uint64_t seed_offset;
    const struct mc_tolerance_profile *tolerance; /* NULL = the case's */
    const char *tolerance_device;                 /* NULL = ops->device */
    /* [n_layers]: each layer's reference backend; at f16/bf16 the prefill is also compared with the
     * reference stack run in the same dtype (ref_logits, ref_hidden_states). NULL: no such comparison */
    const struct mc_backend_ops *const *ref_layer_ops;
    int glue_fault;                               /* enum mc_stack_glue_fault: 0 but in the mutant tests */
    int64_t glue_fault_layer;
};

/* Checks a scenario's parameters against the model golden; MC_ERR_INPUT naming the case file, the
 * scenario's line:column and the parameter otherwise. Also checks the case's `layers`. */
enum mc_err_code mc_stack_check_validate(const struct mc_case *c, const struct mc_scenario_spec *sp,
                                         const struct mc_stack_golden *g, struct mc_error *err);

/* Runs one check. Backend failures become res->status; the return value is an error only for a
 * missing tolerance or memory. */
enum mc_err_code mc_stack_check_run(const struct mc_stack_ctx *ctx, struct mc_check_result *res, struct mc_error *err);

#endif
