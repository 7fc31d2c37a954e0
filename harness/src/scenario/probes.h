/*
 * probes.h — stage probes (backend.h struct mc_probe, docs/scenarios.md §1.3, §3.6): the probe table
 * of each family in pipeline order, and the first-stage diagnosis of a failing check. A check that
 * fails on a backend with MC_CAP_PROBES is run once more with probes on (mc_scenario_run); during that
 * run every forward's probes are compared with the golden's /probes (a full-sequence prefill from a
 * zero cache on the golden's inputs) or with the reference backend's probes for the same call on the
 * same inputs and the same cache (exported from the backend before the call), and the first stage, in
 * pipeline order, of the first forward that leaves tolerance is recorded in the check result.
 */
#ifndef MC_PROBES_H
#define MC_PROBES_H

#include <stdint.h>

#include "family/family.h"
#include "mixcheck/backend.h"

#define MC_PROBE_MAX 8
#define MC_PROBE_NAME_LEN 16

/* One stage a family's probes hold: [B][L] followed by dims [ndim]. */
struct mc_probe_spec {
    const char *name;
    int ndim;
    int64_t dims[3];
    const char *dim_names[3];
};

/* The family's stages in pipeline order into out; returns their count. */
int mc_probe_specs(const struct mc_family_config *cfg, struct mc_probe_spec out[MC_PROBE_MAX]);

/* 1 when a backend implements stage probes (the cap and both entries). */
int mc_probes_capable(const struct mc_backend_ops *ops);

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

struct mc_session;
struct mc_session_cache;
struct mc_slice;

/* The probe state of a rerun (probes.c), hung on struct mc_session.probe. */
struct mc_probe_session;

/* Turns probes on for the session's (new) model and sets up the reference model once; a backend
 * failure marks the check an error. */
void mc_probes_model(struct mc_session *s);
void mc_probes_close(struct mc_session *s);

/* Around one forward of the session: before it, the cache is read (it seeds the reference's call);
 * after it, the backend's probes are read, checked against the family's table (a mis-shaped probe is the
 * backend's error) and compared. xr: the forward's inputs [nrows][len][D] as the backend got them, in
 * float64; mask [nrows][len] or NULL. Both do nothing once a stage has failed. */
int mc_probes_before(struct mc_session *s, const struct mc_session_cache *c, const struct mc_slice *sl);
void mc_probes_after(struct mc_session *s, const struct mc_slice *sl, const double *xr, const uint8_t *mask,
                     const char *call);

#endif
