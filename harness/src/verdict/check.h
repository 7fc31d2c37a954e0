/*
 * check.h — what one check is and what it found: its inputs (struct mc_scenario_ctx: the case, the
 * scenario, the golden, the backend, the dtype, the tolerances) and its result (struct mc_check_result:
 * the verdict, one record per compared tensor, the first failing run, the first failing stage of a
 * probing rerun, the model-level localisation). The scenario engine fills it, the isolation layer
 * carries it across a pipe whole, the diagnosis and the reports read it.
 */
#ifndef MC_CHECK_H
#define MC_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "case/case.h"
#include "family/probespec.h"
#include "golden/golden.h"
#include "golden/refrun.h"
#include "golden/weightset.h"
#include "mixcheck/backend.h"
#include "verdict/compare.h"
#include "verdict/logits.h"

/* The first stage that left tolerance (struct mc_check_result.first_stage). */
struct mc_first_stage {
    int probed;                     /* 1: the check was rerun with stage probes and some were compared */
    char name[MC_PROBE_NAME_LEN];   /* the first failing stage in pipeline order; "" when every stage passed */
    char against[16];               /* "golden" (its /probes) or "reference" (the same call on the reference) */
    char call[96];                  /* the forward, e.g. "forward(rows 0..1, tokens 5..9)" */
    int64_t batch, token;           /* the first failing element's golden row and token position */
    int ndim;                       /* its index within the token, by the stage's dims */
    int64_t index[3];
    char index_names[3][MC_PROBE_NAME_LEN];
    double got, want, abs_err, rel_err; /* rel_err: |got - want| / |want| (inf when want is 0) */
    double atol, rtol;              /* the stage tolerance */
    int64_t failing, elements;      /* of that stage in that forward (padding excluded) */
    int64_t forwards;               /* forwards whose probes were compared */
    double headroom;                /* worst |got - want| / (atol + rtol |want|) of that stage in that forward */
};

/* "dt: token 1, head 3, got 0.41, want 0.37 (abs err 0.04, rel err 0.11, atol 5e-06, rtol 5e-05; 12 of
 * 48 elements fail), in forward(...) against the golden" into buf; the "every stage within tolerance"
 * line when none failed. */
void mc_first_stage_format(const struct mc_first_stage *f, char *buf, size_t len);


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

struct mc_session_probe_hooks;

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
    /* the stage-probe hooks of a diagnosing rerun (scenario/probes.h), NULL for a plain run */
    const struct mc_session_probe_hooks *probes;
};

/* Sets the verdict of a check that ran without a backend failure from its tensors: fail when one
 * failed, nondeterministic when the "determinism" tensor (the same call twice) did. */
void mc_check_verdict(struct mc_check_result *res);

#endif
