/*
 * golden.h — reader of mixcheck golden files (HDF5, layout in golden/README.md).
 *
 * A golden holds one (family, configuration): its configuration (/config attributes, HF names),
 * weights (/weights/<HF name>), inputs (/inputs/hidden_states, optional /inputs/attention_mask) and
 * the float64 expected values of the plain sequential recurrence (/expected/...). The reader checks
 * every rank, shape and type against the configuration before reading, refuses NaN/Inf anywhere,
 * and reports problems as MC_ERR_INPUT with the file and the dataset or attribute path. A link
 * outside the layout is refused, and the root attribute `content_sha256` (golden/README.md "Content
 * checksum") must equal the SHA-256 of the canonical serialization of what was read: a golden edited
 * after generation is refused, and so is one without the attribute.
 */
#ifndef MC_GOLDEN_H
#define MC_GOLDEN_H

#include <stdint.h>

#include "base/error.h"
#include "family/family.h"
#include "family/probespec.h"
#include "golden/array.h"
#include "base/sha256.h"

#define MC_GOLDEN_FORMAT "mixcheck-golden"
#define MC_GOLDEN_FORMAT_VERSION 1

struct mc_golden_weight {
    char *name;          /* HF parameter name, e.g. "in_proj.weight" */
    struct mc_array value;
};

struct mc_golden {
    char *path;
    struct mc_family_config config;
    int64_t batch;                 /* B */
    int64_t len;                   /* L */
    struct mc_golden_weight *weights; /* in mc_family_weight_specs order */
    int n_weights;
    struct mc_array hidden_states; /* [B][L][D] */
    uint8_t *mask;                 /* [B][L] 0/1, NULL when the golden has no attention_mask */
    struct mc_array output;        /* [B][L][D] */
    int64_t *state_positions;      /* [T], strictly increasing, each in [0, L] */
    int64_t n_positions;           /* T */
    struct mc_array conv_state;    /* [T][B][C][K] */
    struct mc_array recurrent_state; /* [T][B][state dims...]; ndim 0 for families without one */
    /* optional stage probes of the full-sequence prefill (/probes/<name>, golden/README.md "Stage
     * probes"): [B][L][stage dims] by mc_probe_specs order, ndim 0 where absent */
    struct mc_array probes[MC_PROBE_MAX];
    int has_probes;                /* some stage is present */
    /* the largest |value| of output, conv_state and recurrent_state: each tensor's magnitude, what an
     * atol_scale is in units of (case/tolerance.h) */
    double output_max, conv_max, state_max;
    /* provenance (root attributes) */
    char *generator;
    char *generator_version;
    int64_t seed;
    char content_sha256[MC_SHA256_HEX_LEN + 1]; /* the verified /content_sha256 ("" when not verified) */
};

/* Loads and validates a golden; on failure g is left empty (safe to free) and err says why. */
enum mc_err_code mc_golden_load(const char *path, struct mc_golden *g, struct mc_error *err);
void mc_golden_free(struct mc_golden *g);

/* The content checksum of a loaded golden (golden/README.md "Content checksum"): 64 lower-case hex
 * digits and a NUL. Tests use it to re-stamp a golden they modify on purpose. */
void mc_golden_content_sha256(const struct mc_golden *g, char out[MC_SHA256_HEX_LEN + 1]);

/* One dataset as it enters the canonical serialization of the content checksum. */
struct mc_golden_digest_item {
    const char *path; /* without the leading '/' */
    int is_int;
    int ndim;
    const int64_t *dims;
    const double *f64;   /* float datasets */
    const int64_t *i64;  /* integer datasets (state_positions, input_ids) */
    const uint8_t *u8;   /* integer datasets held as bytes (attention_mask) */
};

/* The content checksum of any set of datasets (sorts items by path): what a reader of another golden
 * layout (the model goldens of stackgolden.h) verifies its file with. */
void mc_golden_digest(struct mc_golden_digest_item *items, int n, char out[MC_SHA256_HEX_LEN + 1]);

/* The content checksum of the golden at path, which must pass every check but the checksum's own:
 * what a test that edits a golden on purpose records as its new /content_sha256. */
enum mc_err_code mc_golden_file_content_sha256(const char *path, char out[MC_SHA256_HEX_LEN + 1],
                                               struct mc_error *err);

/* Index of `position` in state_positions, or -1 when the golden holds no state there. */
int64_t mc_golden_position_index(const struct mc_golden *g, int64_t position);

/* The weight called `name`, or NULL. */
const struct mc_array *mc_golden_weight(const struct mc_golden *g, const char *name);

#endif
