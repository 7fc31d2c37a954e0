/*
 * stackconfig.h — what mixcheck knows about a whole `...ForCausalLM` stack independently of any
 * implementation (docs/models.md §1): the model types, the upstream config.json keys the glue reads
 * (HF names and defaults), the kind of every layer, each layer's mixer configuration (a family config
 * of family.h), and the checkpoint names of every parameter. Owned here; used by the model-golden
 * reader (validation), the stack engine (stack.h) and reports.
 */
#ifndef MC_STACKCONFIG_H
#define MC_STACKCONFIG_H

#include <stdint.h>

#include "base/error.h"
#include "family/family.h"

#define MC_STACK_MAX_LAYERS 64
#define MC_STACK_NAME_LEN 96
#define MC_STACK_MAX_EXPERTS 512 /* E of a MoE feed-forward */
#define MC_STACK_MAX_TOP_K 64    /* its k */

enum mc_model_type {
    MC_MODEL_MAMBA2 = 1, /* Mamba2ForCausalLM */
    MC_MODEL_MAMBA = 2,  /* MambaForCausalLM */
    MC_MODEL_LFM2 = 3,   /* Lfm2ForCausalLM: ShortConv and attention layers, SwiGLU feed-forward */
    MC_MODEL_BAMBA = 4,  /* BambaForCausalLM: Mamba2 and attention layers, SwiGLU feed-forward */
    MC_MODEL_QWEN3_5 = 5, /* Qwen3_5ForCausalLM (model_type qwen3_5_text): Gated DeltaNet and gated attention
                             layers, zero-centred RMSNorm, dense SwiGLU MLP */
    MC_MODEL_GRANITEMOEHYBRID = 6, /* GraniteMoeHybridForCausalLM: Mamba2 and attention (NoPE or RoPE, its own
                                      score scale) by layer_types, a top-k MoE plus a shared SwiGLU MLP, the
                                      embedding / residual / logits multipliers */
    MC_MODEL_FALCON_MAMBA = 7, /* FalconMambaForCausalLM: MambaForCausalLM's stack, its mixers with the weightless
                                  RMSNorms on dt, B and C (mamba1 inner_norms 1, mixer_rms_eps) */
    MC_MODEL_JAMBA = 8,        /* JambaForCausalLM: Mamba1 (weighted inner norms) and NoPE attention every
                                  attn_layer_period at attn_layer_offset, a softmax-then-top-k MoE every
                                  expert_layer_period at expert_layer_offset, a SwiGLU MLP on the other layers */
    MC_MODEL_NEMOTRON_H = 9,   /* NemotronHForCausalLM: one block per entry of layers_block_type (the pattern M * - E):
                                  a Mamba2 mixer, NoPE attention, a relu² MLP or a sigmoid-routed relu² MoE with a
                                  shared expert, each as norm -> block -> residual; the last two have no sequence
                                  mixer (MC_STACK_NO_MIXER) */
    MC_MODEL_ZAMBA2 = 12,      /* Zamba2ForCausalLM: Mamba2 layers; at the `hybrid` layers one of num_mem_blocks shared
                                  blocks (attention on cat(hidden, embeddings), a GELU MLP) with the application's
                                  adapters, the layer's linear into T, and the layer's Mamba2 on norm(h + T) with the
                                  residual h; each hybrid layer is two entries of the engine (stackconfig.h layers[]) */
    MC_MODEL_QWEN3_NEXT = 13,  /* Qwen3NextForCausalLM: Gated DeltaNet (Qwen3-Next's interleaved in_proj_qkvz /
                                  in_proj_ba) and gated attention layers by layer_types, zero-centred RMSNorm; a
                                  softmax-then-top-k MoE plus a shared SwiGLU expert behind a sigmoid
                                  shared_expert_gate at (i + 1) % decoder_sparse_step == 0 outside mlp_only_layers,
                                  the dense SwiGLU MLP elsewhere */
    MC_MODEL_QWEN3_5_MOE = 14, /* Qwen3_5MoeForCausalLM (model_type qwen3_5_moe_text): Qwen3.5's Gated DeltaNet and
                                  gated attention layers, zero-centred RMSNorm; on every layer the softmax-then-top-k
                                  MoE (always renormalised) plus the shared SwiGLU expert behind its sigmoid gate */
    MC_MODEL_FALCON_H1 = 10,   /* FalconH1ForCausalLM: every decoder layer a Mamba2 mixer and RoPE attention in parallel
                                  on the same input norm, their outputs scaled and summed (two mixer slots a layer,
                                  struct mc_stack_layer.parallel), a SwiGLU MLP, the µP-style multipliers */
    MC_MODEL_ZAMBA = 11,       /* ZambaForCausalLM: Zamba2's stack (MC_MODEL_ZAMBA2) with Mamba1 layers of one head
                                  and one shared block without adapters (attention on cat(hidden, embeddings) without
                                  positional embedding, a GELU MLP of separate gate and up projections) */
    MC_MODEL_LFM2_MOE = 15,    /* Lfm2MoeForCausalLM: LFM2's ShortConv and attention layers by layer_types, the dense
                                  SwiGLU MLP (intermediate_size as given) on the first num_dense_layers layers and on
                                  the others a sigmoid-scored top-k MoE of SwiGLU experts (MC_ROUTER_SIGMOID_BIAS), no
                                  dense MLP beside it */
    MC_MODEL_OLMO_HYBRID = 16, /* OlmoHybridForCausalLM: Gated DeltaNet layers (separate q/k/v/a/b/g projections, beta
                                  2 sigmoid(b) with linear_allow_neg_eigval, the gated norm's eps 1e-5) as pre-norm
                                  layers, and attention layers (q_norm / k_norm over the whole projection, RoPE or NoPE)
                                  as post-norm layers (struct mc_stack_layer.post_norm); the SwiGLU MLP on every layer,
                                  RMSNorms multiplying by their weight in float32 */
    MC_MODEL_KIMI_LINEAR = 17, /* KimiLinearForCausalLM: Kimi Delta Attention and multi-head latent attention without
                                  positional embedding (the attention family's MLA option) by layer_types, the dense
                                  SwiGLU MLP on the first_k_dense_replace / mlp_layer_types "dense" layers, elsewhere a
                                  sigmoid-routed grouped MoE of SwiGLU experts (summed in T) plus a shared SwiGLU
                                  expert */
    MC_MODEL_MINIMAX = 18,     /* MiniMaxForCausalLM: lightning attention (MC_FAMILY_LIGHTNING, slopes by depth) and
                                  softmax attention layers by layer_types, each layer's residual the block norm's output
                                  scaled by the layer kind's alpha and its mixer's output by its beta (struct
                                  mc_stack_layer.scaled), the softmax-then-top-k MoE (always renormalised, its weights
                                  kept in float32) on every layer with mlp_alpha / mlp_beta likewise */
    MC_MODEL_INKLING = 19,     /* InklingForCausalLM (model_type inkling_text): every layer attention without rotary
                                  embedding (the attention family's Inkling options: short convs on k / v and on the
                                  output, the relative logits, per-head q/k RMSNorms, scale 1/hd), full or sliding by
                                  layer_types with heads of their own; the normed embedding (embed_norm), a short conv
                                  after every feed-forward (ffn_sconv), the dense SwiGLU MLP times its global_scale or
                                  the sigmoid-routed MoE with its shared experts as the softmax's sink
                                  (MC_ROUTER_SIGMOID_SINK); the head on norm(h) / logits_mup_width_multiplier */
};

/* The family of a layer without a sequence mixer (Nemotron-H's MLP and MoE blocks): its mixer configuration is
 * empty (no weights, no cache, no shape), it runs on no backend; the layer is its feed-forward alone, whose norm
 * is the layer's block norm. */
#define MC_STACK_NO_MIXER MC_FAMILY_STACK

/* The feed-forward's activation. */
enum mc_stack_ffn_act {
    MC_FFN_SWIGLU = 0, /* down(silu(gate x) · up x): gate and up projections */
    MC_FFN_RELU2 = 1,  /* down(relu(up x)²): no gate (Nemotron-H's NemotronHMLP and its experts) */
    MC_FFN_GELU = 2,   /* down(gelu(gate x) · up x), gelu the exact erf form (Zamba2MLP, hidden_act "gelu") */
};

/* How a mixture-of-experts feed-forward turns its router's logits into expert weights. */
enum mc_stack_router {
    MC_ROUTER_TOPK_SOFTMAX = 1, /* the k largest float32 router logits (a tie: the lower expert index first), then
                                   a softmax over those k, rounded to the model dtype (GraniteMoeHybridTopKRouter:
                                   the weights sum to 1) */
    MC_ROUTER_SOFTMAX_TOPK = 2, /* a float32 softmax over every expert's logit, the k largest probabilities (a tie:
                                   the lower index first), divided by their sum only with `renormalise`, rounded to
                                   the model dtype (JambaTopKRouter: not renormalised) */
    MC_ROUTER_SIGMOID_GROUPED = 3, /* NemotronHTopkRouter: float32 router weight and logits, scores sigmoid(logits);
                                      the choice on scores + e_score_correction_bias: the n_group groups ranked by
                                      the sum of their two largest corrected scores, the topk_group best kept, the k
                                      largest corrected scores of the kept experts (a tie: the lower index first);
                                      the weights the uncorrected scores of the k, divided by (their sum + 1e-20)
                                      with renormalise (norm_topk_prob), times routed_scaling; all float32, and the
                                      experts' weighted outputs summed in float32 before one rounding to T */
    MC_ROUTER_SIGMOID_BIAS = 4, /* Lfm2MoeTopKRouter: logits F.linear in T, scores sigmoid in T; the choice the k
                                   largest float32 scores + expert_bias (a float32 buffer; `expert_bias` 0: the k
                                   largest scores), a tie: the lower index first; the weights the k scores in T,
                                   divided by (their sum + 1e-6) in T with renormalise (norm_topk_prob), times
                                   routed_scaling in T; the experts' weighted outputs added in T in increasing
                                   expert index, from zero */
    MC_ROUTER_SIGMOID_SINK = 5, /* InklingTopkRouter: float32 logits z of E + S rows (the routed experts, then the
                                   S = n_shared shared experts), sigmoid; the choice the k largest sigmoid(z_e) +
                                   e_score_correction_bias_e of the routed (a tie: the lower index first); the weights
                                   of the k chosen and the S shared sigmoid(z) divided by their sum (a softmax of their
                                   log-sigmoids), times routed_scaling (route_scale) and the router's global_scale, in
                                   float32, rounded to T; the routed experts' weighted outputs added in T in increasing
                                   expert index from zero, plus the shared experts' (each silu(gate x) · up x · γ_s, in T,
                                   through its down) summed in float32 and rounded to T */
};

/* A mixture-of-experts feed-forward (docs/models.md §1): E experts of SwiGLU size F_e, k of them per token.
 * Expert e: down_e(silu(gate_e x) · up_e x), gate and up the two halves of one [2 F_e][D] matrix (gate rows
 * first); the token's output is the sum over its k experts of weight · expert output, added in increasing
 * expert index, each product and sum rounded to the model dtype. */
struct mc_stack_moe {
    int64_t n_experts;   /* E (num_local_experts); 0: no MoE */
    int64_t top_k;       /* k (num_experts_per_tok), 1 <= k <= E */
    int64_t expert_size; /* F_e (GraniteMoeHybrid: intermediate_size) */
    int32_t router;      /* enum mc_stack_router */
    int32_t renormalise; /* MC_ROUTER_SOFTMAX_TOPK, MC_ROUTER_SIGMOID_GROUPED: the k weights divided by their sum */
    int32_t act;         /* enum mc_stack_ffn_act of the experts (relu²: one [E][F_e][D] up matrix, no gate) */
    int64_t n_group;     /* MC_ROUTER_SIGMOID_GROUPED: groups of E / n_group experts (n_group) */
    int64_t topk_group;  /* the groups kept (topk_group) */
    double routed_scaling; /* routed_scaling_factor */
    int32_t sum_in_dtype;  /* MC_ROUTER_SIGMOID_GROUPED: each expert's weighted output rounded to T and summed in T
                              (KimiLinearExperts' index_add_ into a T tensor), not summed in float32 */
    int32_t shared_gate;   /* 1: the layer's dense MLP is a shared expert scaled by sigmoid(shared_expert_gate x)
                              ([1][D] in T, the sigmoid and the product in T) and added after the experts' sum,
                              which starts from zero in T (Qwen3NextSparseMoeBlock) */
    int32_t expert_bias;   /* MC_ROUTER_SIGMOID_BIAS: 1 with the router's expert_bias [E] (use_expert_bias) */
    int32_t weights_fp32;  /* MC_ROUTER_SOFTMAX_TOPK: the k weights stay float32 (not rounded to T) and each expert's
                              output times its weight is rounded to T once (MiniMaxTopKRouter / MiniMaxExperts) */
    int64_t n_shared;      /* MC_ROUTER_SIGMOID_SINK: the S shared experts of expert_size, their router rows after the
                              E routed ones, their gate / up [S][F_e][D] and down [S][D][F_e] (mc_stack_name_inkling) */
};

/* What a layer of the stack is: its mixer family (glue is the engine's, never a layer kind). */
struct mc_stack_layer {
    enum mc_family family;
    struct mc_family_config mixer; /* the family configuration derived from config.json */
    int32_t moe;                   /* 1: the layer's feed-forward has the config's MoE (besides the dense MLP when
                                      ffn_size > 0); 0 on a dense layer */
    int32_t dense;                 /* 1: the layer has the dense MLP (0 on Jamba's MoE layers, whose feed-forward is
                                      the MoE alone; 0 on Nemotron-H's mixer layers, which have no feed-forward) */
    int64_t dense_size;            /* the dense MLP's intermediate size (ffn_size, or Nemotron-H's: intermediate_size
                                      on an MLP block, moe_shared_expert_intermediate_size on a MoE block) */
    /* Zamba2: a hybrid layer is two entries — the shared block's application (`shared`: its mixer the attention on
     * the 2D input cat(h, e) with the application's q/k/v adapters, its feed-forward the block's GELU MLP with the
     * application's adapter and then the layer's linear, giving T; the residual stream is not added to: the entry's
     * hidden state is h + T), then the layer's Mamba2 (`hybrid`: its norm reads h + T, its residual is h) */
    int32_t shared;   /* 1: an application of a shared block */
    int32_t app;      /* its application j (the hybrid layers counted from 0) */
    int32_t block;    /* its block, j % num_mem_blocks */
    int32_t hybrid;   /* 1: the Mamba2 entry of a hybrid layer (after its application) */
    int64_t hf_layer; /* the upstream layer of the entry (Zamba2: model.layers.<hf_layer>) */
    /* parallel mixers (FalconH1): one decoder layer j is the two slots 2j and 2j + 1, each a mixer of its own (its
     * model, backend, cache), both reading the same block norm of the same residual; the first slot's output,
     * times its out_multiplier, is held, the second's added to it, and the sum goes to the residual once, then the
     * layer's feed-forward (on the second slot). The first slot leaves the residual as it was. */
    int32_t parallel;              /* 0: a layer of its own; 1: the first slot of a parallel pair; 2: the second */
    double in_multiplier;          /* the mixer reads its block norm times this (rounded to T); parallel slots only */
    double out_multiplier;         /* its output times this (rounded to T) before the sum; parallel slots only */
    /* OLMo-Hybrid's attention layers (Olmo3DecoderLayer): the block norm normalises the mixer's output (h + norm(mixer
     * (h)), post_attention_layernorm) and the feed-forward norm the MLP's output (h + norm(mlp(h)),
     * post_feedforward_layernorm); the mixer and the MLP read the residual as it is */
    int32_t post_norm;
    /* MiniMax (MiniMaxDecoderLayer): x = input_layernorm(h), h = alpha · x + beta · mixer(x); then x =
     * post_attention_layernorm(h), h = mlp_alpha · x + mlp_beta · moe(x) (struct mc_stack_config): the residual of
     * each add is the norm's output, each product and the sum in T */
    int32_t scaled;
    double alpha, beta; /* the layer kind's (linear_ or full_)attn_alpha_factor and attn_beta_factor */
};

struct mc_stack_config {
    enum mc_model_type type;
    const char *model_type;  /* "mamba2", "mamba" (static) */
    int64_t n_layers;        /* num_hidden_layers */
    int64_t hidden;          /* hidden_size, D */
    int64_t vocab;           /* vocab_size, V */
    double norm_eps;         /* layer_norm_epsilon: every block norm and the final norm */
    int32_t tied;            /* tie_word_embeddings: the head reads the embedding matrix */
    int32_t residual_in_fp32;
    int64_t ffn_size;        /* the SwiGLU feed-forward's intermediate size after each mixer; 0 = none */
    int32_t zero_centred;    /* every norm multiplies by (1 + weight), in float32 before the rounding */
    int32_t ffn_fused;       /* the dense feed-forward's gate and up projections are one [2F][D] matrix, gate rows
                                first (GraniteMoeHybridMLP input_linear) */
    int32_t norm_weight_fp32; /* every norm multiplies by its weight in float32 before the one rounding to T
                                 (NemotronHRMSNorm: (w.float() * x_normed).to(T)) */
    int32_t ffn_act;         /* enum mc_stack_ffn_act of the dense MLP */
    struct mc_stack_moe moe; /* the MoE of the layers with layers[i].moe */
    /* the multipliers (1 when the model has none; GraniteMoeHybrid's µP-style ones): the embedding's output is
     * multiplied by embedding_multiplier, every block's output (mixer, feed-forward) by residual_multiplier
     * before its residual add, and the logits divided by logits_scaling, each product rounded to the dtype */
    double embedding_multiplier;
    double residual_multiplier;
    double logits_scaling;
    struct mc_stack_layer layers[MC_STACK_MAX_LAYERS];
    /* Zamba2 */
    int32_t attn_adapter;  /* use_shared_attention_adapter: q/k/v adapters per application */
    int64_t adapter_rank;  /* adapter_rank r */
    int64_t n_blocks;      /* num_mem_blocks */
    int64_t n_apps;        /* the hybrid layers */
    /* FalconH1's multipliers (1 elsewhere): the logits times lm_head_multiplier; the MLP's gate projection times
     * mlp_gate_multiplier before its SiLU and its down projection times mlp_down_multiplier; key_multiplier on the
     * attention branch's k_proj output and ssm_multipliers on the Mamba2 branch's in_proj parts z, x, B, C, dt
     * (mup_vector), both folded into those rows when the weights are rounded to T (docs/models.md §1) */
    double lm_head_multiplier;
    double mlp_gate_multiplier, mlp_down_multiplier;
    double key_multiplier;
    double ssm_multipliers[5];
    int64_t decoder_layers; /* FalconH1's num_hidden_layers (n_layers is twice it: two slots a layer) */
    double mlp_alpha, mlp_beta; /* MiniMax's mlp_alpha_factor, mlp_beta_factor (layers[].scaled) */
    /* Inkling (1 / 0 elsewhere): the embedding's output normalised as a block norm is (InklingNormedEmbedding,
     * embed_norm.weight, norm_eps); the final norm's output divided by head_divisor (rounded to T) before the head;
     * after every feed-forward a short conv of kernel ffn_sconv with its input added (mlp_sconv: u + the depthwise
     * causal conv of the row's last K real outputs, in float32, rounded to T) before the residual add, its window
     * [B][D][K] held by the engine's cache beside the layer's mixer cache (mc_stack_layer_shape); the dense MLP's
     * output times its global_scale [1] (ffn_global_scale, in T) */
    int32_t embed_norm;
    double head_divisor;
    int64_t ffn_sconv;
    int32_t ffn_global_scale;
};

const char *mc_model_type_name(enum mc_model_type t);
/* Parses "mamba2", "mamba", "lfm2", "bamba", "qwen3_5_text", "granitemoehybrid", "falcon_mamba", "jamba",
 * "nemotron_h", "qwen3_next", "qwen3_5_moe_text"; 0 on success, -1 when unknown. */
int mc_model_type_from_name(const char *name, enum mc_model_type *t);
/* The family a model type's mixer layers have (what `--family` filters a model case by). */
enum mc_family mc_model_type_family(enum mc_model_type t);
/* Every family a model type's layers may have, into out[0..n); returns n (at most 4). */
int mc_model_type_families(enum mc_model_type t, enum mc_family out[4]);

/* The decoder layer slot i belongs to (i / 2 for FalconH1's parallel pairs, else i). */
int64_t mc_stack_decoder_layer(const struct mc_stack_config *cfg, int64_t slot);

/* 1 when layer i has a sequence mixer (every layer but Nemotron-H's MLP and MoE blocks). */
int mc_stack_layer_has_mixer(const struct mc_stack_config *cfg, int64_t layer);

/* Reads the upstream config.json text of `model_type` (missing keys take the upstream defaults);
 * MC_ERR_INPUT "<where>: config_json: <key>: <what>" on a missing required key, a wrong type or
 * sizes that do not fit together. */
enum mc_err_code mc_stack_config_parse(const char *model_type, const char *config_json, const char *where,
                                       struct mc_stack_config *cfg, struct mc_error *err);

/* Checkpoint names: the embedding, layer i's block norm, the prefix of layer i's mixer parameters
 * (followed by the family's parameter names of family.h), the final norm, the head. */
void mc_stack_name_embedding(const struct mc_stack_config *cfg, char out[MC_STACK_NAME_LEN]);
void mc_stack_name_layer_norm(const struct mc_stack_config *cfg, int64_t layer, char out[MC_STACK_NAME_LEN]);
void mc_stack_name_mixer_prefix(const struct mc_stack_config *cfg, int64_t layer, char out[MC_STACK_NAME_LEN]);
void mc_stack_name_final_norm(const struct mc_stack_config *cfg, char out[MC_STACK_NAME_LEN]);
void mc_stack_name_head(const struct mc_stack_config *cfg, char out[MC_STACK_NAME_LEN]);
/* The checkpoint name of layer i's mixer parameter `family_name` (family.h's name; a model may name it
 * its own way: lfm2's attention has out_proj, q_layernorm, k_layernorm). */
void mc_stack_name_mixer_param(const struct mc_stack_config *cfg, int64_t layer, const char *family_name,
                               char out[MC_STACK_NAME_LEN + 32]);
/* The feed-forward of layer i (ffn_size > 0): part 0 its norm, 1 the gate (lfm2 w1, bamba gate_proj), 2 up
 * (w3, up_proj), 3 down (w2, down_proj). With ffn_fused part 1 is the [2F][D] gate-and-up matrix and part 2
 * has no name of its own (""). Nemotron-H: part 0 is the block norm, part 1 has no name (relu², no gate); on a
 * MoE block parts 2 and 3 are the shared expert's. */
void mc_stack_name_ffn(const struct mc_stack_config *cfg, int64_t layer, int part, char out[MC_STACK_NAME_LEN]);
/* The MoE of layer i (layers[i].moe): part 0 the router [E][D], 1 the experts' gate-and-up [E][2 F_e][D] (relu²:
 * their up projections [E][F_e][D]), 2 their down projections [E][D][F_e], 3 the router's e_score_correction_bias
 * [E] (MC_ROUTER_SIGMOID_GROUPED only; LFM2-MoE's expert_bias with moe.expert_bias), 4 the shared expert's gate
 * [1][D] (moe.shared_gate only). */
void mc_stack_name_moe(const struct mc_stack_config *cfg, int64_t layer, int part, char out[MC_STACK_NAME_LEN]);
/* Zamba2's shared-block application at entry `layer` (layers[layer].shared), reading the adapters of application
 * `app` (its own: layers[layer].app) from the copy of its block stored under its layer: part 0 the layer's linear
 * [D][D], 1 and 2 the MLP adapter's [r][D] and [2F][r], 3..8 the q, k and v adapters' [r][2D] and [2D][r]. */
void mc_stack_name_shared(const struct mc_stack_config *cfg, int64_t layer, int64_t app, int part,
                          char out[MC_STACK_NAME_LEN]);
/* OLMo-Hybrid's Gated DeltaNet layer `layer`: the family's in_proj_qkv.weight [C][D] is its q_proj, k_proj and
 * v_proj stacked; part 0, 1, 2 names them into out with their rows. 0 (nothing written) for any other layer. */
int mc_stack_olmo_qkv_part(const struct mc_stack_config *cfg, int64_t layer, int part, char out[MC_STACK_NAME_LEN + 32],
                           int64_t *rows);
/* Inkling's glue parameters: part 0 the embedding's norm [D] (embed_norm), 1 layer i's mlp_sconv [D][1][K], 2 its dense
 * MLP's global_scale [1], 3 its router's global_scale [1], 4 / 5 / 6 its shared experts' gate_proj [S][F_e][D],
 * up_proj [S][F_e][D], down_proj [S][D][F_e]. */
void mc_stack_name_inkling(const struct mc_stack_config *cfg, int64_t layer, int part, char out[MC_STACK_NAME_LEN]);
/* The cache of layer i as the engine exports it: its mixer's family shape, with ffn_sconv > 0 (Inkling) the
 * feed-forward's conv window [D][K] as D more conv channels after the mixer's (the kernels are the same). */
void mc_stack_layer_shape(const struct mc_stack_config *cfg, int64_t layer, struct mc_family_shape *sh);
/* The width of entry `layer`'s mixer input: hidden, or 2 hidden for a Zamba2 application (cat(h, e)). */
int64_t mc_stack_mixer_width(const struct mc_stack_config *cfg, int64_t layer);
/* The Zamba types (zamba2, zamba): hybrid layers of a shared block's application and the layer's Mamba. */
int mc_stack_is_zamba(const struct mc_stack_config *cfg);

#endif
