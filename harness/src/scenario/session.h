/*
 * session.h — the machinery the scenarios are written in (internal to the scenario engine): a
 * session holds one model of one backend at one dtype; it runs forwards over golden token ranges
 * (NaN-poisoned outputs), reads caches (NaN-poisoned export buffers), and merges comparisons into
 * the check's named tensor results. A backend failure marks the session broken and is recorded in
 * the result; every helper then does nothing and returns -1.
 */
#ifndef MC_SESSION_H
#define MC_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "family/family.h"
#include "golden/refrun.h"
#include "verdict/check.h"
#include "verdict/compare.h"

struct mc_session {
    const struct mc_scenario_ctx *ctx;
    const struct mc_golden *g;
    const struct mc_backend_ops *ops;
    struct mc_check_result *res;
    struct mc_model *model;
    struct mc_family_shape shape;
    struct mc_tolerance tol[MC_TENSOR_COUNT];
    size_t esz;        /* bytes per element of the model dtype */
    int broken;        /* the backend failed; stop driving it */
    struct mc_error *err;
    const struct mc_refrun *ref; /* f16/bf16: the reference run on the same rounded inputs, or NULL */
    char run_label[200]; /* the run in progress, e.g. "splits [1, 5]" (mc_session_run_begin), or "" */
    struct mc_probe_session *probe; /* the probing rerun's state (scenario/probes.c), or NULL */
    /* the scenario's expected values are the f64 reference run on its own inputs, not the golden:
     * tensors created from now on report `expected: f64-reference` (consistency-type ones stay `self`) */
    int live_reference;
    int32_t threads; /* mc_model_desc.threads of the next mc_session_model (ctx->threads when opened) */
    /* the first call whose repeats differed bit for bit and how ("forward_packed (...) at 2 threads
     * against 1 thread: 1 of 96 elements differ"): the check's message when its verdict is
     * nondeterministic; "" when none did */
    char nondeterminism[400];
};

/* A cache and the batch it was allocated for. */
struct mc_session_cache {
    struct mc_cache *h;
    int64_t batch;
};

/* Token range of golden rows [r0, r0+nrows) and tokens [t0, t0+len) as a forward input. */
struct mc_slice {
    int64_t r0, nrows, t0, len;
    int masked;            /* pass the golden's mask slice (when it has one) */
    const double *x;       /* optional [nrows][len][D] replacing the golden's hidden states */
};

/* What a probing rerun does around the session's model and each forward (scenario/probes.h fills
 * them; the check's context carries them in mc_scenario_ctx.probes, NULL for a plain run): `model`
 * after each model_create, `close` when the session closes, `before` ahead of each forward (non-zero:
 * the forward is not run), `after` past it with the inputs the backend got, in float64. */
struct mc_session_probe_hooks {
    void (*model)(struct mc_session *s);
    void (*close)(struct mc_session *s);
    int (*before)(struct mc_session *s, const struct mc_session_cache *c, const struct mc_slice *sl);
    void (*after)(struct mc_session *s, const struct mc_slice *sl, const double *xr, const uint8_t *mask,
                  const char *call);
};

/* Opens the session: tolerances for every tensor, weights converted to the dtype, model_create.
 * An unsupported dtype or a failing create marks the result and the session broken (not an error). */
enum mc_err_code mc_session_open(struct mc_session *s, const struct mc_scenario_ctx *ctx, struct mc_check_result *res,
                                 struct mc_error *err);
void mc_session_close(struct mc_session *s);
/* (Re)creates the session's model with an internal chunk length (0 = the backend's default). */
enum mc_err_code mc_session_model(struct mc_session *s, int64_t chunk_size);

/* Marks the check errored by the backend (UNSUPPORTED for that status), `what: msg` its message (the
 * first failure wins), and the session broken. */
void mc_session_backend_failed(struct mc_session *s, enum mc_backend_status st, const char *what,
                               const struct mc_msg *msg);
/* The same for a contract violation the harness found in call `call` (a guard written, a mis-shaped probe). */
void mc_session_violation(struct mc_session *s, const char *call, const char *what);

/* calloc that records MC_ERR_NOMEM in the session's error. */
void *mc_session_calloc(size_t n, size_t size, struct mc_session *s);

int mc_session_cache_new(struct mc_session *s, int64_t batch, struct mc_session_cache *c);
int mc_session_cache_dup(struct mc_session *s, const struct mc_session_cache *src, struct mc_session_cache *dst);
void mc_session_cache_drop(struct mc_session *s, struct mc_session_cache *c);
/* Exports a cache as float64: conv [batch][C][K], state [batch][state dims] (state may be NULL). */
int mc_session_cache_read(struct mc_session *s, const struct mc_session_cache *c, double *conv, double *state);

/* Imports float64 conv [batch][C][K] and state [batch][...] (NULL for ShortConv) into a cache with
 * cache_import, in the export dtype (f64 for f64 models, else f32), from guarded buffers that must come
 * back unchanged. */
int mc_session_cache_write(struct mc_session *s, struct mc_session_cache *c, const double *conv, const double *state);

/* The export/import element size (8 for f64 models, else 4), and a cache read and written in that
 * dtype as raw bytes (conv [batch][C][K], state [batch][...]; state may be NULL), for bit-exact
 * comparisons and for NaN payloads float64 would not keep. */
size_t mc_session_export_size(const struct mc_session *s);
int mc_session_cache_read_raw(struct mc_session *s, const struct mc_session_cache *c, void *conv, void *state);
int mc_session_cache_write_raw(struct mc_session *s, struct mc_session_cache *c, const void *conv, const void *state);

/* One sequence of a packed call: tokens [t0, t0+len) of golden row `row` (or x [len][D] when x is not
 * NULL), in pool row `slot`, has_initial_state `resume`. */
struct mc_packed_seq {
    int64_t row, t0, len, slot;
    int resume;
    const double *x;
};

/* 0 when the backend has forward_packed; else marks the check unsupported ("backend X has no packed
 * call (forward_packed)") and the session broken, and returns -1. */
int mc_session_need_packed(struct mc_session *s);
/* One forward_packed call on `pool` over seq [n] packed back to back (NaN-poisoned y, guarded inputs
 * that must come back unchanged); y receives [T][D] in float64. */
int mc_session_forward_packed(struct mc_session *s, struct mc_session_cache *pool, const struct mc_packed_seq *seq,
                              int64_t n, double *y);
/* Compares row `slot` of pool readings conv [S][C][K] and state [S][...] (float64, state NULL for
 * ShortConv) with the golden cache of row `row` at `pos`, when the golden holds that position. */
void mc_session_check_row_state(struct mc_session *s, const double *conv, const double *state, int64_t slot,
                                int64_t row, int64_t pos);
/* Compares row `slot` of two raw pool readings (mc_session_cache_read_raw) byte for byte under tensor
 * `name`: an element counts as failing (1 against 0) when any of its bytes changed, NaN payloads
 * included. */
void mc_session_check_row_bytes(struct mc_session *s, const char *name, const void *conv_now, const void *state_now,
                                const void *conv_before, const void *state_before, int64_t slot);

/* One forward over a slice; y receives [nrows][len][D] in float64. */
int mc_session_forward(struct mc_session *s, struct mc_session_cache *c, const struct mc_slice *sl, double *y);
/* Forward and compare the output with the golden. */
int mc_session_step(struct mc_session *s, struct mc_session_cache *c, const struct mc_slice *sl);

/* Compares y [nrows][len][D] with the [B][L][D] tensor `all` (the golden's output, the reference run's, or
 * any other run over the golden's inputs) on the slice, under tensor `name`; padding only checked finite. */
int mc_session_check_output_against(struct mc_session *s, const struct mc_slice *sl, const double *y,
                                    const double *all, const char *name, enum mc_tensor_kind kind);
/* Compares y [nrows][len][D] with the golden output of the slice; padding is only checked finite. */
int mc_session_check_output(struct mc_session *s, const struct mc_slice *sl, const double *y);
/* Compares the cache of golden rows [r0, r0+c->batch) with the golden state at `pos`, when the
 * golden holds one there. */
int mc_session_check_states(struct mc_session *s, const struct mc_session_cache *c, int64_t r0, int64_t pos);
/* Merges one comparison into the tensor result `name` (created on first use; `bitwise` = zero tolerance). */
void mc_session_compare(struct mc_session *s, const char *name, enum mc_tensor_kind kind, int bitwise,
                        const double *actual, const double *expected, const struct mc_compare_view *view);

void mc_session_output_view(const struct mc_session *s, const struct mc_slice *sl, const uint8_t *valid,
                            struct mc_compare_view *v);
void mc_session_conv_view(const struct mc_session *s, int64_t r0, int64_t nrows, int64_t pos,
                          struct mc_compare_view *v);
void mc_session_state_view(const struct mc_session *s, int64_t r0, int64_t nrows, int64_t pos,
                           struct mc_compare_view *v);

/* Names the run that starts now as "label [v0, v1, ...]": the first comparison that fails during it
 * records the label as the check's detail, with its own stats (mc_check_result.first_fail). Runs
 * nest; the outermost label names them (chunk_size [64] rather than the prefill inside it). Returns
 * a token for mc_session_run_end. With vals NULL the label alone names the run. */
int mc_session_run_begin(struct mc_session *s, const char *label, const int64_t *vals, int n);
void mc_session_run_end(struct mc_session *s, int token);

/* How mc_session_compare_cache files its two comparisons: the conv window under tensor conv_name
 * (kind conv_kind), the recurrent state under state_name (state_kind); bitwise = zero tolerance. */
struct mc_cache_compare {
    const char *conv_name, *state_name;
    enum mc_tensor_kind conv_kind, state_kind;
    int bitwise;
};

/* Compares cache c with its reading from before copies of it ran (conv, state as mc_session_cache_read
 * gives them), bit for bit, as "snapshot", under the run label "<label> [pos]": running a copy must
 * leave its source alone. A cache_copy that shares storage fails here, under its own name, instead of
 * passing for nondeterminism or a wrong forward later. */
void mc_session_check_source(struct mc_session *s, const struct mc_session_cache *c, const double *conv,
                             const double *state, int64_t r0, int64_t pos, const char *label);

/* Reads cache c (golden rows [r0, r0 + c->batch)) and compares it with conv [batch][C][K] and state
 * [batch][...] (float64, as mc_session_cache_read gives them; state unused for a family without one)
 * as `how` says; `pos` is the position they belong to (for the views and the diagnosis). -1 when the
 * cache could not be read (the session has recorded why), 0 otherwise. */
int mc_session_compare_cache(struct mc_session *s, const struct mc_session_cache *c,
                             const struct mc_cache_compare *how, const double *conv, const double *state, int64_t r0,
                             int64_t pos);

/* Compares a cache with an earlier reading of it (conv [batch][C][K], state [batch][...], as
 * mc_session_cache_read gives them) bit for bit under tensor `name`; `pos` is the position the
 * reading belongs to (for the diagnosis). */
int mc_session_check_cache_same(struct mc_session *s, const struct mc_session_cache *c, const char *name,
                                const double *conv, const double *state, int64_t r0, int64_t pos);

#endif
