/* casenames.c — see casenames.h; also the public name lookups of case.h. */
#include "case/casenames.h"

#include <string.h>

const char *const mc_case_scenario_names[MC_SCENARIO_COUNT] = {
    [MC_SCENARIO_PREFILL] = "prefill",
    [MC_SCENARIO_DECODE] = "decode",
    [MC_SCENARIO_CHUNKED] = "chunked",
    [MC_SCENARIO_FIRST_TOKEN_CAUSALITY] = "first_token_causality",
    [MC_SCENARIO_SPECULATIVE_VERIFY] = "speculative_verify",
    [MC_SCENARIO_LEFT_PADDED_BATCH] = "left_padded_batch",
    [MC_SCENARIO_RIGHT_PADDED_BATCH] = "right_padded_batch",
    [MC_SCENARIO_CHUNK_SIZE_INVARIANCE] = "chunk_size_invariance",
    [MC_SCENARIO_BATCH_INVARIANCE] = "batch_invariance",
    [MC_SCENARIO_CACHE_ROUNDTRIP] = "cache_roundtrip",
    [MC_SCENARIO_DETERMINISM] = "determinism",
    [MC_SCENARIO_PACKED_PREFILL] = "packed_prefill",
    [MC_SCENARIO_SLOT_POOL] = "slot_pool",
    [MC_SCENARIO_MIXED_STEP] = "mixed_step",
    [MC_SCENARIO_PREFIX_RESUME] = "prefix_resume",
    [MC_SCENARIO_LONG_DECODE] = "long_decode",
    [MC_SCENARIO_LENGTH_SWEEP] = "length_sweep",
    [MC_SCENARIO_HEAD_SHARD] = "head_shard",
    [MC_SCENARIO_GREEDY] = "greedy",
};

const char *const mc_case_tensor_names[MC_TENSOR_COUNT + 1] = {
    [MC_TENSOR_OUTPUT] = "output",
    [MC_TENSOR_CONV_STATE] = "conv_state",
    [MC_TENSOR_RECURRENT_STATE] = "recurrent_state",
    [MC_TENSOR_CONSISTENCY] = "consistency",
    [MC_TENSOR_REF_OUTPUT] = "ref_output",
    [MC_TENSOR_REF_CONV_STATE] = "ref_conv_state",
    [MC_TENSOR_REF_RECURRENT_STATE] = "ref_recurrent_state",
    [MC_TENSOR_GROWTH] = "growth",
    [MC_TENSOR_LOGITS] = "logits",
    [MC_TENSOR_HIDDEN_STATES] = "hidden_states",
    [MC_TENSOR_REF_LOGITS] = "ref_logits",
    [MC_TENSOR_REF_HIDDEN_STATES] = "ref_hidden_states",
    [MC_TENSOR_COUNT] = "default",
};

const char *const mc_case_dtype_names[MC_CASE_DTYPE_COUNT] = {"f64", "f32", "f16", "bf16"};
const enum mc_dtype mc_case_dtypes[MC_CASE_DTYPE_COUNT] = {MC_DTYPE_F64, MC_DTYPE_F32, MC_DTYPE_F16, MC_DTYPE_BF16};

const char *mc_scenario_name(enum mc_scenario_kind kind)
{
    if ((unsigned)kind < MC_SCENARIO_COUNT)
        return mc_case_scenario_names[kind];
    return "unknown";
}

int mc_scenario_from_name(const char *name, enum mc_scenario_kind *kind)
{
    for (int i = 0; i < MC_SCENARIO_COUNT; i++) {
        if (strcmp(name, mc_case_scenario_names[i]) == 0) {
            *kind = (enum mc_scenario_kind)i;
            return 0;
        }
    }
    return -1;
}

const char *mc_tensor_name(enum mc_tensor_kind kind)
{
    if ((unsigned)kind <= MC_TENSOR_COUNT)
        return mc_case_tensor_names[kind];
    return "unknown";
}

const char *mc_dtype_name(enum mc_dtype dtype)
{
    for (size_t i = 0; i < MC_CASE_DTYPE_COUNT; i++) {
        if (mc_case_dtypes[i] == dtype)
            return mc_case_dtype_names[i];
    }
    return "unknown";
}

int mc_dtype_from_name(const char *name, enum mc_dtype *dtype)
{
    for (size_t i = 0; i < MC_CASE_DTYPE_COUNT; i++) {
        if (strcmp(name, mc_case_dtype_names[i]) == 0) {
            *dtype = mc_case_dtypes[i];
            return 0;
        }
    }
    return -1;
}
