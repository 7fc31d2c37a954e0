/*
 * scenario.h — the scenario engine (docs/scenarios.md §2): drives one backend, at one dtype, through one
 * scenario of a case, against the case's golden, and records one result per compared tensor.
 *
 * Every forward gets its output NaN-poisoned first and every cache export its buffers NaN-poisoned,
 * so an element a backend forgot to write fails. Outputs are compared at every forward, cache states
 * at every position the run passes through that the golden holds a state for.
 */
#ifndef MC_SCENARIO_H
#define MC_SCENARIO_H

#include "case/case.h"
#include "verdict/compare.h"
#include "base/error.h"
#include "golden/golden.h"
#include "verdict/logits.h"
#include "mixcheck/backend.h"
#include "scenario/probes.h"
#include "golden/refrun.h"
#include "golden/weightset.h"

enum mc_check_status {
    MC_CHECK_PASS,
    MC_CHECK_FAIL,
    MC_CHECK_ERROR,       /* the backend returned an error during the check */
    MC_CHECK_UNSUPPORTED, /* the backend does not do this dtype / configuration */
    MC_CHECK_SKIPPED,
    MC_CHECK_NONDETERMINISTIC, /* the same call on copies of the same cache gave different results */
    MC_CHECK_DRIFT,       /* passed, but a tensor's numbers grew past --max-drift over the baseline (baseline.h) */
    MC_CHECK_STATUS_COUNT
};

const char *mc_check_status_name(enum mc_check_status status);

/* Tensors one check may compare: first_token_causality at f16/bf16 compares ten (the golden's three,
 * their ref_* twins, determinism, consistency, distractor, snapshot); a check that needs more is
 * an internal error, never a comparison dropped. */
#define MC_CHECK_MAX_TENSORS 16
#define MC_TENSOR_NAME_LEN 32

/* Where a tensor's expected values come from (reported as `expected`): the golden file, the family's
 * reference run in float64 on the same inputs (the ref_* tensors, and every tensor of the scenarios
 * that run past what a golden holds: long_decode, length_sweep), or the backend itself along another
 * path (consistency, distractor, determinism, snapshot, untouched). */
enum mc_expected_source { MC_EXPECTED_GOLDEN, MC_EXPECTED_F64_REFERENCE, MC_EXPECTED_SELF };

const char *mc_expected_source_name(enum mc_expected_source e); /* "golden", "f64-reference", "self" */

/* long_decode's error per step of one tensor (the JSON record's `by_step`): the steps in order, in
 * buckets of `per_bucket` consecutive steps (1 while the steps fit MC_STEP_BUCKETS), each holding the
 * worst |a - b| and the worst headroom of its steps. Fixed size: a check's result crosses a pipe whole. */
#define MC_STEP_BUCKETS 512
struct mc_step_profile {
    char tensor[MC_TENSOR_NAME_LEN]; /* "" when the check has none */
    int64_t first_token;             /* the absolute position of step 0 */
    int64_t steps, per_bucket;
    int n_buckets;
    float max_abs_err[MC_STEP_BUCKETS];
    float headroom[MC_STEP_BUCKETS];
};

struct mc_tensor_result {
    char name[MC_TENSOR_NAME_LEN]; /* output, conv_state, recurrent_state, consistency, distractor,
                                      determinism, snapshot, ref_* */
    struct mc_tolerance tol;
    struct mc_compare_stats stats;
    int64_t comparisons;           /* arrays merged into stats (forwards, checkpoints, rows) */
    enum mc_expected_source expected;
    struct mc_logits_metrics logits; /* model cases' logits tensors (present = 1), else zero */
};

struct mc_check_result {
    char case_id[128];
    char case_path[512];
    enum mc_family family;
    enum mc_scenario_kind scenario;
    const char *backend;           /* borrowed from the ops */
    const char *device;
    enum mc_dtype dtype;
    enum mc_check_status status;
    struct mc_tensor_result tensors[MC_CHECK_MAX_TENSORS];
    int n_tensors;
    char message[1024];            /* why it errored / is unsupported / is nondeterministic */
    char detail[256];              /* the run that failed first, e.g. "splits [1, 2, 5]" or "chunk_size [300]" */
    /* The first comparison that failed, on its own (the tensors above pool every run of the check):
     * its tensor and stats, so its first failing token and worst element are that run's. */
    char first_fail_tensor[MC_TENSOR_NAME_LEN];
    struct mc_compare_stats first_fail;
    /* the profile the tolerances came from and the device whose entries of it apply: copies, as the
     * reports outlive the case (and its profile) */
    char tolerance_path[512];
    char tolerance_device[64];
    double duration_s;
    /* a failing check of a backend with stage probes: the first stage that left tolerance, from a
     * rerun with probes on (probes.h; first_stage.probed == 0 when there was none) */
    struct mc_first_stage first_stage;
    struct mc_step_profile by_step; /* long_decode (longrun.h); by_step.tensor "" otherwise */
    /* model cases (stackcheck.h): the model type ("" for mixer checks), and the localisation of a
     * logits failure — the first layer whose hidden state leaves tolerance, its kind, the first
     * failing token — or the first diverging step of greedy generation */
    char model_type[16];
    char diagnosis[512];
};

struct mc_scenario_ctx {
    const struct mc_case *c;
    const struct mc_scenario_spec *spec;
    const struct mc_golden *g;
    const struct mc_backend_ops *ops;
    enum mc_dtype dtype;
    uint64_t seed_offset;          /* added to every scenario seed (seed sweeps) */
    int32_t threads;               /* mc_model_desc.threads (0 = the backend's default) */
    const struct mc_backend_ops *ref_ops; /* the family's reference backend, if registered */
    const struct mc_refrun *ref;   /* f16/bf16: the reference run on the same rounded inputs (refrun.h) */
    const struct mc_weightset *weights; /* the golden's weights in `dtype`, or NULL (converted per check) */
    /* the tolerances: a profile (the case's, or one given with --tolerance) and the device whose
     * entries apply (the backend's own, or the one --device-profile maps it to); NULL = the case's
     * profile and ops->device */
    const struct mc_tolerance_profile *tolerance;
    const char *tolerance_device;
    int probes;                    /* record and compare stage probes (the diagnosing rerun, probes.h) */
};

/* Checks that a scenario's parameters fit the golden (lengths, batch, mask); MC_ERR_INPUT naming the
 * case file, the scenario's line:column and the parameter otherwise. */
enum mc_err_code mc_scenario_validate(const struct mc_case *c, const struct mc_scenario_spec *spec,
                                      const struct mc_golden *g, struct mc_error *err);

/* The MC_ERR_INPUT of a scenario parameter that does not fit: "<case file>:<line>:<column>: in
 * 'scenarios.<name>': <what> (golden <path>)", `what` from fmt (printf, cut at 511 bytes). Every
 * validator of scenario parameters (mc_scenario_validate, stackcheck.c's) words its refusals so. */
enum mc_err_code mc_scenario_bad_param(const struct mc_case *c, const struct mc_scenario_spec *sp,
                                       struct mc_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Runs one check. Backend failures become res->status (ERROR / UNSUPPORTED); the return value is an
 * error only for problems of the inputs (tolerance missing, ...) or memory. */
enum mc_err_code mc_scenario_run(const struct mc_scenario_ctx *ctx, struct mc_check_result *res,
                                 struct mc_error *err);

/* Sets the verdict of a check that ran without a backend failure from its tensors: fail when one
 * failed, nondeterministic when the "determinism" tensor (the same call twice) did. */
void mc_scenario_verdict(struct mc_check_result *res);

#endif
