/*
 * mut_stack.h — whole-stack backends of the mutant library (family MC_FAMILY_STACK, backend.h "Whole
 * stacks", docs/models.md §1 and §5): a port of each upstream `...ForCausalLM` whose mixers the library
 * has — mamba2, lfm2, bamba, qwen3_5_text — composed of the library's own correct mixers (mutants.h,
 * one mixer model per layer) and f32 glue of its own (embedding, block norms, residual, feed-forward,
 * final norm, head) following upstream's dtype rules for f32 and bf16 storage. A glue fault selector
 * makes each whole-stack mutant the correct stack with one upstream-style glue bug (mut_stack.c).
 *
 * mut_stackcfg.c reads the upstream config.json (mut_json.h) into struct mut_stack_config and names the
 * checkpoint tensors; mut_stack.c builds the stack, runs it and fills the backend ops.
 *
 * Dimension letters: B batch, L tokens, D hidden, V vocab, F feed-forward size, n layers.
 */
#ifndef MC_MUT_STACK_H
#define MC_MUT_STACK_H

#include <stddef.h>
#include <stdint.h>

#include "mixcheck/backend.h"

#define MUT_STACK_MAX_LAYERS 256
#define MUT_STACK_NAME_LEN 160

enum mut_model_type {
    MUT_MODEL_MAMBA2,
    MUT_MODEL_LFM2,
    MUT_MODEL_BAMBA,
    MUT_MODEL_QWEN3_5,
};

struct mut_stack_layer_config {
    enum mc_family family; /* MAMBA2, SHORTCONV, GDN or ATTENTION */
    union {
        struct mc_mamba2_config mamba2;
        struct mc_shortconv_config shortconv;
        struct mc_gdn_config gdn;
        struct mc_attention_config attention;
    } u;
};

struct mut_stack_config {
    enum mut_model_type type;
    int64_t n_layers, hidden, vocab; /* n, D, V */
    int64_t ffn_size;                /* F; 0 = no feed-forward block (mamba2) */
    double norm_eps;                 /* every block norm and the final norm */
    int tied;                        /* lm_head is the embedding */
    int residual_in_fp32;            /* the residual adds in float32 (mamba2's default); else in the model dtype */
    int zero_centred;                /* Qwen3_5RMSNorm: x·rsqrt(mean x² + eps)·(1 + w) */
    struct mut_stack_layer_config layers[MUT_STACK_MAX_LAYERS];
};

/* Parses `model_type` and `config_json` (upstream keys, upstream defaults for absent ones) into *cfg.
 * MC_BACKEND_UNSUPPORTED for a model type the library has no mixers for (mamba: no Mamba1 mixer),
 * MC_BACKEND_INVALID for a bad or inconsistent configuration, each with a message naming the key. */
enum mc_backend_status mut_stack_config_parse(const char *model_type, const char *config_json,
                                              struct mut_stack_config *cfg, struct mc_msg *msg);

/* Checkpoint names (transformers' state_dict() names). */
void mut_stack_name_embedding(const struct mut_stack_config *cfg, char out[MUT_STACK_NAME_LEN]);
void mut_stack_name_final_norm(const struct mut_stack_config *cfg, char out[MUT_STACK_NAME_LEN]);
void mut_stack_name_block_norm(const struct mut_stack_config *cfg, int64_t layer, char out[MUT_STACK_NAME_LEN]);
/* The prefix of layer `layer`'s mixer tensors ("backbone.layers.0.mixer.", "model.layers.1.self_attn."). */
void mut_stack_name_mixer_prefix(const struct mut_stack_config *cfg, int64_t layer, char out[MUT_STACK_NAME_LEN]);
/* The family's name of a mixer tensor of layer `layer` given its checkpoint suffix (LFM2's attention:
 * out_proj -> o_proj, q_layernorm -> q_norm, k_layernorm -> k_norm; the rest unchanged). */
const char *mut_stack_mixer_param_name(const struct mut_stack_config *cfg, int64_t layer, const char *suffix);
/* Feed-forward tensors of layer `layer`: part 0 its norm, 1 gate (w1), 2 up (w3), 3 down (w2). */
void mut_stack_name_ffn(const struct mut_stack_config *cfg, int64_t layer, int part, char out[MUT_STACK_NAME_LEN]);

#endif
