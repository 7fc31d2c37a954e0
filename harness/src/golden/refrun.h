/*
 * refrun.h — the second yardstick for reduced precision (issue: "checked twice"). A backend run in
 * f16/bf16 is compared with the float64 golden (loose: the total error, input rounding included) and
 * with the family's reference run in float64 on the same f16/bf16-rounded weights and inputs (tight:
 * the backend's own error). This module produces the latter: outputs over the whole golden sequence
 * and the cache at every golden state position, laid out like the golden's expected tensors.
 */
#ifndef MC_REFRUN_H
#define MC_REFRUN_H

#include "golden/golden.h"
#include "mixcheck/backend.h"

struct mc_refrun {
    double *output;          /* [B][L][D] */
    double *conv_state;      /* [T][B][C][K] */
    double *recurrent_state; /* [T][B][state dims], NULL when the family has none */
};

/* Runs `ref` (which must take f64) on g with weights and hidden states rounded to `dtype`, as forwards
 * between consecutive golden state positions with the golden's mask. On failure returns -1 with a
 * reason in why (the reference failing is a harness-level problem, not the backend's). */
int mc_refrun_build(const struct mc_golden *g, const struct mc_backend_ops *ref, enum mc_dtype dtype,
                    struct mc_refrun *out, char *why, size_t why_len);
void mc_refrun_free(struct mc_refrun *r);

/* The same reference, in float64 on g's weights and on inputs x [batch][len][D] of the caller's (both
 * rounded to `dtype` first; f64 and f32 inputs pass unchanged when they are exact there), as one
 * forward of `len` tokens from a zero cache without a mask: y [batch][len][D], and the cache after it,
 * conv [batch][C][K] and state [batch][state dims] (unused for ShortConv). For scenarios that run past
 * what the golden holds (longer sequences, other inputs). 0, or -1 with the reason in why. */
int mc_refrun_inputs(const struct mc_golden *g, const struct mc_backend_ops *ref, enum mc_dtype dtype,
                     const double *x, int64_t batch, int64_t len, double *y, double *conv, double *state, char *why,
                     size_t why_len);

#endif
