/*
 * casenames.h — the scenarios, tensors and dtypes a case or a tolerance profile names: their enums,
 * the lookups between them and their names (mc_scenario_name, mc_dtype_from_name, ...), and the name
 * tables the two schemas share.
 */
#ifndef MC_CASENAMES_H
#define MC_CASENAMES_H

#include "mixcheck/backend.h"

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

#define MC_CASE_DTYPE_COUNT 4

/* Indexed by enum mc_scenario_kind. */
extern const char *const mc_case_scenario_names[MC_SCENARIO_COUNT];

/* Indexed by enum mc_tensor_kind; index MC_TENSOR_COUNT is the dtype's `default`. */
extern const char *const mc_case_tensor_names[MC_TENSOR_COUNT + 1];

/* In the documentation's order; index i names dtype mc_case_dtypes[i]. */
extern const char *const mc_case_dtype_names[MC_CASE_DTYPE_COUNT];
extern const enum mc_dtype mc_case_dtypes[MC_CASE_DTYPE_COUNT];

#endif
