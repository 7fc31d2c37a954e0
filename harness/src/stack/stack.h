/*
 * stack.h — the stack engine (docs/models.md §1): a whole `...ForCausalLM`
 * computed as upstream computes it — embedding lookup, per layer pre-norm -> mixer -> residual, the
 * final norm and the (tied or untied) LM head — with every mixer layer reached through the backend
 * interface (mixcheck/backend.h): each layer is a model of the backend the caller assigns to it, so
 * the layers under test run on a backend under test and the rest on the reference.
 *
 * Dtype rules (upstream's, for a model stored in dtype T): the embedding is looked up in T; the
 * residual stream is float32 when residual_in_fp32 (else T); a block norm reads the residual rounded
 * to T, normalises in float32, rounds to T, multiplies by its T weight in T; the mixer reads and writes
 * T; the residual add is float32; the final norm keeps float32 (its input is float32), and the head
 * reads it rounded to T and writes logits in T (then float32). At f32 every step is float32; at f64
 * every step is float64. The engine computes each step in float64 and rounds where upstream stores.
 *
 * Glue is this module's; a backend only ever sees its layer's normalised input, mask and cache.
 */
#ifndef MC_STACK_H
#define MC_STACK_H

#include <stddef.h>
#include <stdint.h>

#include "mixcheck/backend.h"
#include "golden/stackgolden.h"

struct mc_stack;

struct mc_stack_cache {
    int64_t batch;
    struct mc_cache **layer; /* [n_layers], each from its layer's backend */
    double *glue;            /* Inkling's mlp_sconv windows [n_layers][B][D][K] (the engine's; NULL elsewhere) */
};

/* Creates the stack at dtype with layer l on layer_ops[l] (a backend of the layer's family). The
 * weights are the golden's, rounded to dtype. A backend that refuses its layer returns its status,
 * with msg naming the layer; MC_BACKEND_NOMEM when memory runs out. */
enum mc_backend_status mc_stack_create(const struct mc_stack_golden *g, enum mc_dtype dtype,
                                       const struct mc_backend_ops *const *layer_ops, int32_t threads,
                                       struct mc_stack **out, struct mc_msg *msg);
void mc_stack_destroy(struct mc_stack *s);

/* Planted glue bugs, for the mutant tests only (tests/stacks): the engine with exactly one
 * upstream-style glue bug switched on, at `layer` where the bug sits in a layer. MC_STACK_GLUE_NONE is
 * the engine itself. (Positions counted with padding needs an attention layer: not here yet.) */
enum mc_stack_glue_fault {
    MC_STACK_GLUE_NONE,
    MC_STACK_GLUE_RESIDUAL_NOT_FP32, /* the residual stream rounded to the model dtype after every add */
    MC_STACK_GLUE_BLOCK_NORM_SKIPPED, /* layer `layer`'s mixer reads the residual without its norm */
    MC_STACK_GLUE_FINAL_NORM_SKIPPED, /* the head reads the residual without the final norm */
    MC_STACK_GLUE_HEAD_UNTIED,       /* tied config, but the head is a matrix of its own (a fresh init) */
    /* the glue of GraniteMoeHybrid (MoE, multipliers): */
    MC_STACK_GLUE_MOE_NOT_RENORMALISED,     /* the k expert weights the other way round: GraniteMoeHybrid's the softmax
                                               over every expert, not over the k; Jamba's divided by their sum */
    MC_STACK_GLUE_ROUTER_TIE_HIGH,          /* equal router logits: the higher expert index wins, not the lower */
    MC_STACK_GLUE_RESIDUAL_MULTIPLIER_DROPPED, /* every block's output added without residual_multiplier */
    MC_STACK_GLUE_EMBEDDING_MULTIPLIER_TWICE,  /* the embedding multiplied by embedding_multiplier twice */
    MC_STACK_GLUE_LOGITS_SCALING_DROPPED,      /* the logits not divided by logits_scaling */
    /* the glue of Nemotron-H (relu² MLPs, the sigmoid-scored grouped router): */
    MC_STACK_GLUE_RELU2_AS_RELU,               /* every relu² MLP and expert applies relu, not its square */
    MC_STACK_GLUE_CORRECTION_BIAS_IN_WEIGHTS,  /* the expert weights taken of the corrected scores (scores +
                                                  e_score_correction_bias), not only the choice */
    MC_STACK_GLUE_PATTERN_SHIFTED,             /* the block pattern read one place on: position i runs block i + 1
                                                  (its kind, weights and cache), the last position block 0 */
    /* the glue of Zamba2 (shared blocks applied with per-application adapters): */
    MC_STACK_GLUE_SHARED_WRONG_ADAPTER,        /* the application at entry `layer` reads another application's
                                                  adapters (the next of its block, else the one before) */
    MC_STACK_GLUE_SHARED_WRONG_BLOCK,          /* every application runs block b + 1 mod num_mem_blocks (the
                                                  alternation off by one), its own adapters */
    MC_STACK_GLUE_CONCAT_SWAPPED,              /* the shared block reads cat(e, h), not cat(h, e) */
    MC_STACK_GLUE_CONCAT_DROPPED,              /* the shared block reads cat(h, h): the original embeddings dropped */
    /* the glue of Qwen3-Next (the MoE's shared expert behind a sigmoid gate): */
    MC_STACK_GLUE_SHARED_GATE_SKIPPED,         /* the shared expert added without its sigmoid(shared_expert_gate x)
                                                  (a softmax over its one logit, 1, alike) */
    /* the glue of FalconH1 (parallel mixers, its multipliers): */
    MC_STACK_GLUE_IN_MULTIPLIER_TWICE,         /* every parallel branch's input times its in multiplier twice */
    MC_STACK_GLUE_OUT_MULTIPLIER_DROPPED,      /* every parallel branch's output added without its out multiplier */
    MC_STACK_GLUE_MLP_MULTIPLIERS_DROPPED,     /* the MLP's gate and down multipliers not applied */
    MC_STACK_GLUE_LM_HEAD_MULTIPLIER_DROPPED,  /* the logits not multiplied by lm_head_multiplier */
    MC_STACK_GLUE_BRANCHES_SUMMED_BEFORE_NORM, /* at slot `layer` (a pair's second): the first branch added to the
                                                  residual before this branch's norm (sequential, not parallel) */
    MC_STACK_GLUE_BRANCH_DROPPED,              /* the branch at slot `layer` added as zero */
    MC_STACK_GLUE_BRANCH_MULTIPLIERS_SWAPPED,  /* each branch applies the other's in and out multipliers (the
                                                  attention branch the ssm_* ones, the Mamba2 branch attention_*) */
    /* the glue of LFM2-MoE (dense-first layers, the sigmoid router with its expert_bias): */
    MC_STACK_GLUE_LFM2MOE_DENSE_SHIFTED,       /* the dense-first boundary one layer early (layer_idx <
                                                  num_dense_layers - 1): the last dense layer runs a MoE (the first MoE
                                                  layer's router and experts) instead of its MLP */
    MC_STACK_GLUE_LFM2MOE_EXPERT_BIAS_DROPPED, /* the experts chosen on the plain sigmoid scores: expert_bias not
                                                  added (use_expert_bias read as false, or the buffer not loaded) */
    /* the glue of OLMo-Hybrid (post-norm attention layers): */
    MC_STACK_GLUE_POST_NORM_AS_PRE,            /* every post-norm layer run as a pre-norm one: the mixer reads
                                                  post_attention_layernorm(h), the MLP post_feedforward_layernorm(h),
                                                  their outputs added as they are (Llama's order, not Olmo3's) */
    MC_STACK_GLUE_FFN_POST_NORM_SKIPPED,       /* a post-norm layer's MLP output added without
                                                  post_feedforward_layernorm */
    /* Kimi-Linear's MoE (MC_ROUTER_SIGMOID_GROUPED with SwiGLU experts summed in T) */
    MC_STACK_GLUE_KIMI_SHARED_DROPPED,         /* the shared experts' output not added to the routed experts' */
    MC_STACK_GLUE_KIMI_GROUP_MAX_ONLY,         /* a group ranked by its largest corrected score, not the sum of its
                                                  two largest (DeepSeek-V2's group_limited_greedy) */
    MC_STACK_GLUE_KIMI_SCALING_DROPPED,        /* the expert weights not multiplied by routed_scaling_factor */
    MC_STACK_GLUE_KIMI_EXPERTS_SUMMED_FP32,    /* the weighted expert outputs summed in float32 and rounded once
                                                  (NemotronHMoE's order), not rounded and summed in T */
    /* the glue of MiniMax (the residual scalings of MiniMaxDecoderLayer): */
    MC_STACK_GLUE_MINIMAX_BETA_DROPPED,        /* layer `layer`'s mixer output added without its beta (the attention
                                                  block's attn_beta_factor read as 1) */
    MC_STACK_GLUE_MINIMAX_ALPHA_BETA_SWAPPED,  /* every scaled add the other way round: beta on the residual (the
                                                  norm's output), alpha on the block's output */
    MC_STACK_GLUE_MINIMAX_RESIDUAL_PRE_NORM,   /* every scaled add's residual the stream before the norm (Llama's
                                                  h, not MiniMax's norm(h)) */
    /* the glue of Inkling (the normed embedding, the head's divisor, the feed-forward's conv, the sink router): */
    MC_STACK_GLUE_INKLING_EMBED_NORM_SKIPPED,  /* the embedding looked up without its embed_norm */
    MC_STACK_GLUE_INKLING_HEAD_DIVISOR_DROPPED, /* the head reads norm(h), not norm(h) / logits_mup_width_multiplier */
    MC_STACK_GLUE_INKLING_MLP_SCONV_SKIPPED,   /* layer `layer`'s feed-forward output added without its mlp_sconv */
    MC_STACK_GLUE_INKLING_SINK_DROPPED,        /* the routed weights normalised over the k chosen alone (the shared
                                                  experts out of the softmax, weighted 1): no sink */
    MC_STACK_GLUE_INKLING_GLOBAL_SCALE_DROPPED, /* the dense MLPs' and the routers' global_scale read as 1 */
};
void mc_stack_set_glue_fault(struct mc_stack *s, enum mc_stack_glue_fault fault, int64_t layer);

/* The reference stack of a reduced dtype (f16/bf16): the glue exactly as mc_stack_create's in dtype,
 * every layer's model created in float64 on the weights rounded to dtype, fed the dtype values of its
 * input and its output rounded to dtype (the mixer-level reference run, refrun.h, at the model level). */
enum mc_backend_status mc_stack_create_ref(const struct mc_stack_golden *g, enum mc_dtype dtype,
                                           const struct mc_backend_ops *const *layer_ops, int32_t threads,
                                           struct mc_stack **out, struct mc_msg *msg);

const struct mc_stack_config *mc_stack_config_of(const struct mc_stack *s);
const struct mc_backend_ops *mc_stack_layer_ops(const struct mc_stack *s, int64_t layer);

/* A fresh cache for `batch` rows (every layer's cache_alloc). */
enum mc_backend_status mc_stack_cache_new(struct mc_stack *s, int64_t batch, struct mc_stack_cache *c,
                                          struct mc_msg *msg);
enum mc_backend_status mc_stack_cache_copy(struct mc_stack *s, struct mc_stack_cache *dst,
                                           const struct mc_stack_cache *src, struct mc_msg *msg);
void mc_stack_cache_free(struct mc_stack *s, struct mc_stack_cache *c);
/* Layer `layer`'s cache as float64: conv [B][C][K], state [B][...] (NULL when the layer has none); C and K are
 * mc_stack_layer_shape's (Inkling: the mixer's conv channels, then its feed-forward's conv window). */
enum mc_backend_status mc_stack_cache_export(struct mc_stack *s, const struct mc_stack_cache *c, int64_t layer,
                                             double *conv, double *state, struct mc_msg *msg);

/* One forward of token ids [B][L] (mask [B][L], 1 = real token, or NULL) through every layer, from
 * the cache (NULL: a prefill without cache). logits receives [B][L][V]; hidden, when not NULL,
 * [n_layers + 1][B][L][D]: the residual stream after the embedding and after every layer. */
enum mc_backend_status mc_stack_forward(struct mc_stack *s, struct mc_stack_cache *c, int64_t batch, int64_t len,
                                        const int64_t *ids, const uint8_t *mask, double *logits, double *hidden,
                                        struct mc_msg *msg);

/* The packed call of serving engines (backend.h struct mc_packed_args) at the model level: n sequences
 * of token ids back to back, sequence i owning ids [cu_seqlens[i], cu_seqlens[i+1]) and row slots[i] of
 * the pool (a cache of S >= n rows), from its slot's caches when has_initial_state[i], else from zero.
 * Every layer's mixer gets the packed call on its own pool; the glue is per token. */
struct mc_stack_packed {
    int64_t n_seqs;
    const int64_t *cu_seqlens;        /* [n + 1] */
    const int64_t *slots;             /* [n] */
    const uint8_t *has_initial_state; /* [n] */
};
/* logits receives [T][V]; hidden, when not NULL, [n_layers + 1][T][D]. */
enum mc_backend_status mc_stack_forward_packed(struct mc_stack *s, struct mc_stack_cache *pool,
                                               const struct mc_stack_packed *pk, const int64_t *ids, double *logits,
                                               double *hidden, struct mc_msg *msg);

/* Localisation (docs/models.md §5): layer `layer` alone, without cache, on residual input
 * h_in [B][L][D] (float64 values, rounded as the engine holds the residual): h_out receives the
 * layer's residual output. */
enum mc_backend_status mc_stack_layer_forward(struct mc_stack *s, int64_t layer, int64_t batch, int64_t len,
                                              const double *h_in, const uint8_t *mask, double *h_out,
                                              struct mc_msg *msg);
/* Layer `layer`'s feed-forward alone (its norm, the dense MLP and / or the MoE, Inkling's conv after it from a zero
 * window over each row's real tokens of mask (NULL: all real), the residual add with its multiplier) on the residual
 * after the mixer, h_in [B][L][D] (float64 values, rounded as the engine holds the residual): h_out receives the
 * layer's output. A layer without a feed-forward copies its input. */
enum mc_backend_status mc_stack_ffn_forward(struct mc_stack *s, int64_t layer, int64_t batch, int64_t len,
                                            const double *h_in, const uint8_t *mask, double *h_out,
                                            struct mc_msg *msg);
/* Layer `layer`'s block norm of residual rows h [rows][D] into x [rows][D], as the engine computes it
 * in its dtype: the input of that layer's mixer. */
void mc_stack_block_norm(const struct mc_stack *s, int64_t layer, const double *h, int64_t rows, double *x);
/* Layer `layer`'s mixer alone, without cache, on x [B][L][D] (rounded to dtype): y receives its output. */
enum mc_backend_status mc_stack_mixer_forward(struct mc_stack *s, int64_t layer, int64_t batch, int64_t len,
                                              const double *x, const uint8_t *mask, double *y, struct mc_msg *msg);

#endif
