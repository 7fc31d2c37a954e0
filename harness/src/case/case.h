/*
 * case.h — YAML test cases and tolerance profiles (layout in README.md "Cases").
 *
 * Loaded with libyaml's document API so every node keeps its position; every error reads
 * "file:line:column: in 'key.path': what is wrong (got X)" and is MC_ERR_INPUT. Unknown keys,
 * duplicate keys, wrong types and out-of-range values are errors. Checks that need the golden
 * (split points within the sequence, ...) are made by the scenario engine, which reports them with
 * the scenario's line and column kept here.
 */
#ifndef MC_CASE_H
#define MC_CASE_H

#include <stdint.h>

#include "base/error.h"
#include "mixcheck/backend.h"

/* Limits the loader enforces: larger files are refused before parsing; token counts, split points,
 * chunk sizes and decode steps above MC_CASE_MAX_TOKENS are refused as absurd. */
#define MC_CASE_MAX_FILE_BYTES (1024L * 1024L)
#define MC_CASE_MAX_TOKENS 1000000
#define MC_CASE_MAX_DTYPES 4 /* f64, f32, f16, bf16: each at most once */

enum mc_scenario_kind {
    MC_SCENARIO_PREFILL,
    MC_SCENARIO_DECODE,
    MC_SCENARIO_CHUNKED,
    MC_SCENARIO_FIRST_TOKEN_CAUSALITY,
    MC_SCENARIO_SPECULATIVE_VERIFY,
    MC_SCENARIO_LEFT_PADDED_BATCH,
    MC_SCENARIO_RIGHT_PADDED_BATCH,
    MC_SCENARIO_CHUNK_SIZE_INVARIANCE,
    MC_SCENARIO_BATCH_INVARIANCE,
    MC_SCENARIO_CACHE_ROUNDTRIP,
    MC_SCENARIO_DETERMINISM,
    MC_SCENARIO_PACKED_PREFILL, /* the serving-path scenarios (docs/scenarios.md §2.13-2.16): forward_packed */
    MC_SCENARIO_SLOT_POOL,
    MC_SCENARIO_MIXED_STEP,
    MC_SCENARIO_PREFIX_RESUME,
    /* against the float64 reference run live on generated inputs (docs/scenarios.md §2.17-2.18) */
    MC_SCENARIO_LONG_DECODE,
    MC_SCENARIO_LENGTH_SWEEP,
    MC_SCENARIO_HEAD_SHARD, /* the layer split into head shards, as tensor-parallel ranks (§2.19) */
    MC_SCENARIO_GREEDY, /* model cases only (docs/models.md §3): greedy generation through the cache */
    MC_SCENARIO_COUNT
};

const char *mc_scenario_name(enum mc_scenario_kind kind);
int mc_scenario_from_name(const char *name, enum mc_scenario_kind *kind);

/* The tensors a check compares; each has its own tolerance. */
enum mc_tensor_kind {
    MC_TENSOR_OUTPUT,
    MC_TENSOR_CONV_STATE,
    MC_TENSOR_RECURRENT_STATE,
    MC_TENSOR_CONSISTENCY, /* one implementation against itself along two paths (first token, batch rows) */
    /* f16/bf16 only: against the reference run in f64 on the same rounded weights and inputs, which
     * isolates the backend's own error from the rounding of its inputs */
    MC_TENSOR_REF_OUTPUT,
    MC_TENSOR_REF_CONV_STATE,
    MC_TENSOR_REF_RECURRENT_STATE,
    /* long_decode: the RMS output error over the last tenth of the steps against the first tenth
     * (|e_last - e_first| <= atol + rtol * e_first: rtol is the growth allowed, atol a floor) */
    MC_TENSOR_GROWTH,
    /* model cases (docs/models.md §3): the logits of the LM head, and the residual stream after the
     * embedding and after every layer (what localises a logits failure) */
    MC_TENSOR_LOGITS,
    MC_TENSOR_HIDDEN_STATES,
    /* model cases at f16/bf16: logits and hidden states against the reference stack run in the same
     * dtype on the same weights and prompt (stackcheck.c), which isolates glue that is wrong by no more
     * than the dtype's storage noise against the float64 golden */
    MC_TENSOR_REF_LOGITS,
    MC_TENSOR_REF_HIDDEN_STATES,
    MC_TENSOR_COUNT
};

const char *mc_tensor_name(enum mc_tensor_kind kind);

const char *mc_dtype_name(enum mc_dtype dtype);
int mc_dtype_from_name(const char *name, enum mc_dtype *dtype);

struct mc_split_set {
    int64_t *points; /* strictly increasing, each > 0 (upper bound checked against the golden) */
    int64_t n;
};

/* One scenario entry of a case; fields a scenario does not use stay 0 / NULL. */
struct mc_scenario_spec {
    enum mc_scenario_kind kind;
    int line, column;            /* of the scenario's key, for messages */
    int64_t prefill;             /* decode, first_token_causality, speculative_verify, left_padded_batch,
                                    determinism; prefix_resume: the export position `at` */
    int64_t len;                 /* first_token_causality: segment length S (>= 2);
                                    speculative_verify, mixed_step: draft tokens k */
    int64_t shards;              /* head_shard: contiguous head shards */
    int64_t sequences;           /* packed_prefill, slot_pool: sequences in the packed call */
    int64_t pool;                /* slot_pool: rows of the state pool (>= 4 * sequences) */
    int64_t accept;              /* speculative_verify: accepted tokens j (< k), -1 when not given (the
                                    sweep over every count 0..k runs either way) */
    int64_t decode_steps;        /* left_padded_batch: single-token steps between prefill and the chunk */
    uint64_t seed;               /* distractor / random split seed */
    struct mc_split_set *split_sets; /* chunked: explicit split point sets; cache_roundtrip: one set;
                                        prefix_resume: at most one (the schedule after `at`) */
    int n_split_sets;
    int64_t random_sets;         /* chunked: extra split sets drawn from `seed` */
    int64_t *chunk_sizes;        /* chunk_size_invariance */
    int n_chunk_sizes;
    int64_t *lengths;            /* length_sweep: the prefill lengths (strictly increasing) */
    int n_lengths;
    int64_t steps;               /* greedy: tokens generated (<= the golden's); long_decode: single-token
                                    steps after the prefill */
    int64_t top_k;               /* greedy: k of the top-k rule at the first mismatch */
};

struct mc_tolerance {
    double atol;
    double rtol;
};

/* One (device, dtype, tensor) entry of a profile; tensor MC_TENSOR_COUNT means the dtype's default. */
struct mc_tolerance_entry {
    char *device;
    enum mc_dtype dtype;
    int tensor; /* enum mc_tensor_kind, or MC_TENSOR_COUNT for `default` */
    struct mc_tolerance tol;
    char *why;
};

struct mc_tolerance_profile {
    char *path;
    char *name;
    struct mc_tolerance_entry *entries;
    int n_entries;
};

struct mc_case {
    char *path;
    char *id;
    char *why;
    enum mc_family family;
    int family_line, family_column; /* of the `family:` value, for messages about it */
    char *golden_path;           /* resolved against the case file's directory */
    int golden_line, golden_column; /* of the `golden:` value */
    char **backends;
    int n_backends;
    enum mc_dtype dtypes[MC_CASE_MAX_DTYPES];
    int n_dtypes;
    struct mc_scenario_spec *scenarios;
    int n_scenarios;
    struct mc_tolerance_profile tolerance; /* loaded from the `tolerance:` file */
    /* model cases (`model:` instead of `family:`, docs/models.md §3): the model type, and the layers
     * that run on the backend under test (NULL = every layer of a family it implements) */
    char *model_type;
    int64_t *layers;
    int n_layers;
    int layers_line, layers_column; /* of the `layers:` value */
};

/* Loads a case and its tolerance profile; on failure c is left empty (safe to free). */
enum mc_err_code mc_case_load(const char *path, struct mc_case *c, struct mc_error *err);
void mc_case_free(struct mc_case *c);

/* As mc_case_load, with the case file's content given in memory (len bytes); path names it in
 * messages, and its directory is still where `golden:` and `tolerance:` are resolved from (the
 * profile is read from disk). For the fuzzers (tests/fuzz). */
enum mc_err_code mc_case_load_buffer(const char *path, const void *data, size_t len, struct mc_case *c,
                                     struct mc_error *err);

enum mc_err_code mc_tolerance_load(const char *path, struct mc_tolerance_profile *p, struct mc_error *err);
/* As mc_tolerance_load, from memory (see mc_case_load_buffer). */
enum mc_err_code mc_tolerance_load_buffer(const char *path, const void *data, size_t len,
                                          struct mc_tolerance_profile *p, struct mc_error *err);
void mc_tolerance_free(struct mc_tolerance_profile *p);

/* 1 when the profile has any entry for (device, dtype). */
int mc_tolerance_covers(const struct mc_tolerance_profile *p, const char *device, enum mc_dtype dtype);

/* The tolerance for (device, dtype, tensor): the tensor's own entry, else the dtype's `default`.
 * MC_ERR_INPUT naming the profile file when neither exists. */
enum mc_err_code mc_tolerance_lookup(const struct mc_tolerance_profile *p, const char *device, enum mc_dtype dtype,
                                     enum mc_tensor_kind tensor, struct mc_tolerance *out, struct mc_error *err);

#endif
