/*
 * case.h — YAML test cases (layout in cases/FORMAT.md); the tolerance profiles they name are
 * tolerance.h's, the names of scenarios, tensors and dtypes casenames.h's.
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
#include "case/casenames.h"
#include "case/tolerance.h"
#include "mixcheck/backend.h"

/* Limits the loader enforces: larger files are refused before parsing; token counts, split points,
 * chunk sizes and decode steps above MC_CASE_MAX_TOKENS are refused as absurd. */
#define MC_CASE_MAX_FILE_BYTES (1024L * 1024L)
#define MC_CASE_MAX_TOKENS 1000000
#define MC_CASE_MAX_DTYPES 4 /* f64, f32, f16, bf16: each at most once */

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

#endif
