/*
 * experiment.h — the discriminating experiments of the diagnosis (docs/diagnosis.md §6.5): small runs on
 * the port itself, each built to separate two explanations of a failure that the scenarios' verdicts
 * alone leave open. Each drives the port (and, where it needs expected values the golden does not hold,
 * the family's float64 reference) through the session machinery of the scenario engine, so it runs
 * isolated like a check and fills a struct mc_check_result whose tensors are the experiment's
 * comparisons; mc_experiment_outcome reads them back as "the hypothesis holds / does not / could not be
 * tested", with the numbers in words.
 *
 *   golden_state_decode  decode token P from the golden cache at P imported with cache_import, against the
 *                        golden: right means the decode path reads a right cache right, so a failing
 *                        decode comes from the cache the port wrote (update or export); wrong means the
 *                        decode computation itself is wrong
 *   zero_window          continued forward from the golden cache at P: does the port's output equal the
 *                        reference's from the same cache with the conv window zeroed (8.2a)?
 *   zero_state           ... with the recurrent state zeroed, the window kept (8.2b)?
 *   dt_inside_clamp      prefill P and decode to L with time_step_limit widened to (0, inf) on the port and
 *                        the reference: agreement there, where every dt is inside the clamp, while the
 *                        bundled decode fails, means the failure needs a dt outside it (8.10)
 *   f32_reference        the same prefill on the reference at f32: is the port's error at f64 the size of
 *                        float32 rounding (computes in f32 inside) or larger (structure)?
 *   zeroed_cache         prefill on a fresh cache, and on a fresh cache with zeros imported first: does a
 *                        cache fresh from cache_alloc hold zeros (S2.4)?
 *   cache_copy           cache_copy of a primed cache, both exported: is the copy its source bit for bit?
 *   f32_paths            the decode steps and the continued forward after the prefill of P tokens, on the
 *                        port at f64 and on the reference at f32, against the golden: is a failing path's
 *                        error the size of float32 rounding (one path computes in f32 inside) or larger?
 */
#ifndef MC_EXPERIMENT_H
#define MC_EXPERIMENT_H

#include "base/error.h"
#include "verdict/check.h"

enum mc_experiment_kind {
    MC_EXP_GOLDEN_STATE_DECODE,
    MC_EXP_ZERO_WINDOW,
    MC_EXP_ZERO_STATE,
    MC_EXP_DT_INSIDE_CLAMP,
    MC_EXP_F32_REFERENCE,
    MC_EXP_ZEROED_CACHE,
    MC_EXP_CACHE_COPY,
    MC_EXP_F32_PATHS,
    MC_EXP_COUNT
};

const char *mc_experiment_name(enum mc_experiment_kind kind);

/* 1 when the experiment can run on this case and backend: the family has what it changes (a state, a dt
 * clamp), the golden holds a cache at the position it needs, a reference backend other than the port is
 * registered where it needs one. */
int mc_experiment_applies(enum mc_experiment_kind kind, const struct mc_scenario_ctx *ctx);

/* The position P an experiment starts from: the prefill of the case's decode (or first_token_causality)
 * scenario, where the golden holds a cache; -1 when none. */
int64_t mc_experiment_split(const struct mc_scenario_ctx *ctx);

/* Runs one experiment on ctx->ops at ctx->dtype (ctx->spec is any scenario of the case; the experiment
 * picks its own tokens), filling res: status (pass/fail/error, as a check's) and one tensor per
 * comparison. Errors only for the harness itself. */
enum mc_err_code mc_experiment_run(enum mc_experiment_kind kind, const struct mc_scenario_ctx *ctx,
                                   struct mc_check_result *res, struct mc_error *err);

/* What an experiment showed. */
enum mc_experiment_verdict {
    MC_EXP_NOT_RUN = 0,     /* not applicable, or the port failed during it (then `text` says how) */
    MC_EXP_HOLDS,           /* the hypothesis the experiment tests holds */
    MC_EXP_REFUTED,         /* it does not */
};

struct mc_experiment_outcome {
    enum mc_experiment_kind kind;
    enum mc_experiment_verdict verdict;
    double ratio;           /* f32_reference, f32_paths (the largest over the failing paths): the port's RMS error
                               over the f32 reference's; zero_window /
                               zero_state: the headroom of the port's continuation from the golden cache; zeroed_cache:
                               the headroom of the prefill on the zero-imported cache; else 0 */
    char text[400];         /* "decode from the golden cache imported with cache_import: right (headroom 0.02)" */
};

/* Reads the result of experiment `kind` (res->status MC_CHECK_ERROR or a missing comparison: not run). */
void mc_experiment_outcome(enum mc_experiment_kind kind, const struct mc_check_result *res,
                           struct mc_experiment_outcome *out);

#endif
