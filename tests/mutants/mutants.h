/*
 * mutants.h — internals of the mutant library (mc_mutants, see mutants.c for the table of mutants):
 * small, plain, self-contained f32 implementations of Mamba2, Gated DeltaNet, ShortConv, attention, lightning
 * attention and KDA, each
 * taking a fault selector, so that every mutant is the correct code with exactly one upstream-style
 * bug switched on (docs/semantics.md §8). Nothing here calls into reference/.
 *
 * Shared by every family: the model and cache structs, the cache ops, and the forward driver, which
 * converts the storage dtype (f32, or bf16 for the non-bug) to f32, runs one batch row at a time
 * through the family's segment function, and applies the cache-level faults (8.1b, 8.1c, 8.2a,
 * 8.2b) around it. The segment functions apply the faults that live inside the math.
 *
 * Dimension letters: B batch, L tokens, D hidden, C conv channels, K conv width.
 */
#ifndef MC_MUTANTS_H
#define MC_MUTANTS_H

#include <stddef.h>
#include <stdint.h>

#include "mixcheck/backend.h"

/* One upstream-style bug each (docs/semantics.md §8); MUT_NONE is the correct code. */
enum mut_fault {
    MUT_NONE,
    MUT_DT_FIRST_TOKEN,     /* 8.1a  dt of the first token for the whole continued segment */
    MUT_ADVANCE_ONE,        /* 8.1b  outputs right, cache advanced by the first token only */
    MUT_NO_CHAIN,           /* 8.1c  every row a single step from the same cached state */
    MUT_ZERO_CONV_CONTEXT,  /* 8.2a  continued forward with a zero conv window (state carried) */
    MUT_STATE_RESET,        /* 8.2b  continued forward from a zero state (window carried) */
    MUT_CONV_FIRST_L,       /* 8.3   first L instead of last L outputs of conv(cat(W, x)) */
    MUT_CONV_OFF_BY_ONE,    /* 8.3   K-1 warm-up outputs dropped instead of K */
    MUT_CACHE_POST_ACT,     /* 8.3   window caches post-activation values */
    MUT_MASK_CONTINUED,     /* 8.4   mask ignored on continued multi-token forwards */
    MUT_PAD_LEAK,           /* 8.5   pads run as zero-input tokens with their dt */
    MUT_MASK_BATCH1,        /* 8.6   mask ignored for a batch of one */
    MUT_SHORT_PREFILL_ROLL, /* 8.9   decode writes at min(cache_position, K-1) after a roll */
    MUT_DT_NOCLAMP_DECODE,  /* 8.10  no time_step_limit clamp in the L == 1 path */
    MUT_NORM_GROUP_SWAP,    /* 8.11  full-row and groupwise gated norm swapped */
    MUT_CHUNK_PAD,          /* 8.12  last chunk padded non-neutrally (family-specific form) */
    MUT_HEAD_MOD,           /* 8.13  group / key head h mod G instead of h / (H/G) */
    MUT_FUTURE_LEAK,        /* causal conv padded on the right: output t sees x[t..t+K-1] */
    MUT_UNFUSED_ACT,        /* not a bug: conv output rounded to bf16 before the SiLU */
    MUT_ROPE_PAD_POSITIONS, /* attention: RoPE at the padded token index, not the real-token count */
    MUT_ROTARY_ALL_DIMS,    /* attention: partial_rotary_factor ignored, every head dim rotated */
    MUT_DECODE_NO_D,        /* 8.15  the L == 1 path on a primed cache drops the D skip connection */
    MUT_EXPORT_ROWS_REVERSED, /* 8.19 cache_export writes the batch rows in reverse order */
    MUT_IMPORT_NO_WINDOW,   /* 8.20  cache_import takes the state and leaves the window zero */
    MUT_COPY_NO_STATE,      /* 8.21  cache_copy copies the windows, not the states */
    MUT_ALLOC_DIRTY_STATE,  /* 8.22  cache_alloc leaves the state non-zero and no fresh flag resets it */
    MUT_BLOCK_DECAY,        /* lightning: the state leaving a partial block decays by λ^Q, not λ^b */
    MUT_SLOPE_ORDER,        /* lightning: head h decays with the slope of head H-1-h */
    MUT_GATE_PER_HEAD,      /* kda: every key channel of a head decays with the head's first channel's g */
    MUT_NOPE_ROTATED,       /* attention: no_rope ignored, RoPE applied (the default theta and factor) */
    MUT_SCALE_DEFAULT,      /* attention: softmax_scale ignored, scores scaled by 1/sqrt(hd) */
    MUT_MLA_ROPE_ON_NOPE,   /* attention MLA: the query's rotation applied to its first dr (nope) dims */
    MUT_MLA_NORM_SKIPPED,   /* attention MLA: kv_a_layernorm skipped, the raw latent cached and expanded */
    MUT_MLA_KV_SWAPPED,     /* attention MLA: kv_b_proj's per-head rows read as value | key instead of key | value */
    MUT_MLA_SCALE_NOPE,     /* attention MLA: scores scaled by 1/sqrt(qk_nope_head_dim), not 1/sqrt(head_dim) */
};

struct mut_family;

/* Stage probes (backend.h struct mc_probe) of the last forward: the Mamba2 mutants record them
 * (mut_mamba2.c), the others none. Reported only when MIXCHECK_MUTANT_PROBES is set in the
 * environment (mutants.c), so the kill matrix (test_mutants) is not rerun with probes for every
 * check a mutant fails; tests/probes sets it. */
#define MUT_MAX_PROBES 6
struct mut_probes {
    int on;
    int n;
    int failed;        /* out of memory while recording */
    int64_t B, L;      /* of the forward */
    int64_t row, t0;   /* where the segment running now writes: batch row, first token */
    struct mc_probe p[MUT_MAX_PROBES];
    float *buf[MUT_MAX_PROBES];
    size_t cap[MUT_MAX_PROBES];
};

struct mc_model {
    const struct mut_family *fam;
    enum mut_fault fault;
    enum mc_dtype dtype;  /* storage of weights, x and y: F32 or BF16 */
    int64_t D;            /* hidden size */
    int64_t win_elems;    /* C*K per batch row */
    int64_t state_elems;  /* per batch row; 0 for ShortConv */
    int64_t chunk;        /* internal chunk length Q (MUT_CHUNK_PAD) */
    void *impl;           /* the family's own model */
    struct mut_probes *probes; /* NULL until probe_enable */
};

struct mc_cache {
    int64_t batch;
    int primed;
    int64_t pos;   /* tokens consumed so far (HF cache_position), for MUT_SHORT_PREFILL_ROLL */
    float *window; /* [B][C][K], the last K pre-conv inputs, oldest first */
    float *state;  /* [B][state_elems] or NULL */
    /* a whole stack's cache (mut_stack.c): one mixer cache per layer; window and state are NULL */
    int64_t n_layers;
    struct mc_cache **layer; /* [n_layers] or NULL */
};

/* What one segment call knows about its forward. */
struct mut_seg {
    int primed;    /* the cache held a previous forward */
    int64_t batch; /* B of the whole forward (MUT_MASK_BATCH1) */
    int64_t pos;   /* cache_position of the segment's first token */
};

struct mut_family {
    enum mc_family family;
    /* Fills m->impl, m->D, m->win_elems, m->state_elems, m->chunk from desc (weights in desc->dtype). */
    enum mc_backend_status (*create)(const struct mc_model_desc *desc, struct mc_model *m, struct mc_msg *msg);
    void (*destroy)(void *impl);
    /* One batch row: window [C][K] and state advance over the segment; x, y [L][D] f32; mask [L] or NULL. */
    enum mc_backend_status (*segment)(const struct mc_model *m, float *window, float *state, const float *x,
                                      const uint8_t *mask, int64_t L, float *y, const struct mut_seg *seg,
                                      struct mc_msg *msg);
};

extern const struct mut_family mut_mamba2_family;
extern const struct mut_family mut_gdn_family;
extern const struct mut_family mut_shortconv_family;
extern const struct mut_family mut_attention_family;
extern const struct mut_family mut_lightning_family; /* mut_linear.c */
extern const struct mut_family mut_kda_family;       /* mut_linear.c */

/* ---- the mixer ops (mutants.c), which the whole stacks (mut_stack.c) drive layer by layer --------------- */

/* A mixer model of family `fam` with `fault` switched on (weights under the family's names, f32 or bf16). */
enum mc_backend_status mut_model_new(const struct mut_family *fam, enum mut_fault fault, const struct mc_model_desc *d,
                                     struct mc_model **out, struct mc_msg *msg);
void mut_model_destroy(struct mc_model *m);
enum mc_backend_status mut_cache_alloc(struct mc_model *m, int64_t batch, struct mc_cache **out, struct mc_msg *msg);
enum mc_backend_status mut_cache_copy(struct mc_model *m, struct mc_cache *dst, const struct mc_cache *src,
                                      struct mc_msg *msg);
void mut_cache_free(struct mc_model *m, struct mc_cache *c);
enum mc_backend_status mut_cache_export(struct mc_model *m, const struct mc_cache *c, void *conv, void *state,
                                        struct mc_msg *msg);
enum mc_backend_status mut_forward(struct mc_model *m, struct mc_cache *c, const struct mc_forward_args *a,
                                   struct mc_msg *msg);

/* The whole-stack backends (family MC_FAMILY_STACK, mut_stack.c): *n of them, at most MUT_STACK_MAX_BACKENDS. */
#define MUT_STACK_MAX_BACKENDS 16
const struct mc_backend_ops *const *mut_stack_backends(size_t *n);

/* ---- helpers (mut_util.c) ------------------------------------------------------------------------- */

enum mc_backend_status mut_fail(struct mc_msg *msg, enum mc_backend_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A malloc'd f32 copy of weight `name` (elems elements, stored in `dtype`), or NULL with a message;
 * *missing is set when the weight is absent (so optional weights can be told from bad ones). */
float *mut_weight(const struct mc_model_desc *d, const char *name, int64_t elems, int *missing, struct mc_msg *msg);

float mut_bf16_to_f32(uint16_t v);
uint16_t mut_f32_to_bf16(float v);
/* v rounded to bf16 (nearest even) and back. */
float mut_bf16_round(float v);

/* y[M][out] = x[M][in] · W[out][in]ᵀ (+ b[out] when b is not NULL). */
void mut_linear(const float *x, int64_t M, int64_t in, const float *W, const float *b, int64_t out, float *y);

/* Where the running segment writes probe `name` ([B][L] + dims [ndim] for the forward): its row's
 * slice from token t0, [L - t0][inner]; registered (zeroed) on first use in a forward. NULL when the
 * model is not recording. */
float *mut_probe_slice(const struct mc_model *m, const char *name, int ndim, const int64_t *dims);

float mut_silu(float v);
float mut_softplus(float v); /* torch softplus, threshold 20 */

#endif
