/*
 * attention.c — the optimized CPU softmax attention layer with a KV cache (backend "cpu", device
 * "cpu"): HF `Qwen3NextAttention` / `Qwen3_5Attention`, `Lfm2Attention`, `BambaAttention` with
 * mixcheck's semantics of docs/semantics.md §12 and §A.15. Validated against the reference in
 * tests/cpu/test_cpu_attention.c.
 *
 * Variants (all in this file):
 *   - at_row        one batch row (or one sequence of a packed call on its slot): per real token, the
 *                   k norm and RoPE into the next KV slot, then per query head the q norm and RoPE,
 *                   scores against the kv head's slots, a max-subtracted softmax with the vector exp
 *                   (vmath.h), the weighted sum of the values and the sigmoid gate; a padding token is
 *                   skipped (no slot, no position).
 *   - RoPE from a cos/sin table over every position the cache can hold ([Lmax][R/2], computed in
 *     double at model_create and rounded to f32 once), so a step reads its row instead of calling
 *     cos/sin per token and head.
 * q/k/v projections and o_proj on sgemm over all tokens. Threads: mc_cpu_parallel_for over rows, each
 * owning its outputs and its cache row: bitwise identical for any thread count. Dtypes: weights, x and y
 * as f32, bf16 or f16; compute, cache and cache_export in f32.
 *
 * Cache (cache.h): window [B][1] the cached-position count n (C = K = 1), state [B][2Hkv][Lmax][hd]
 * keys then values; slots >= n are zero after a forward on the row. Every row's count is checked (an
 * integer in [0, Lmax] with room for the row's real tokens) before anything is written.
 *
 * Dimension letters: B batch, L tokens, D hidden, Hq query heads, Hkv kv heads, hd head dim, R rotary
 * dims, Lmax cache length.
 */
#include "cpu.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "common.h"
#include "f32io.h"
#include "vmath.h"

#define ATC_WHO "attention cpu"
#define ATC_MAX_DIM 65536

enum atc_slot {
    ATC_Q,
    ATC_Q_BIAS,
    ATC_K,
    ATC_K_BIAS,
    ATC_V,
    ATC_V_BIAS,
    ATC_O,
    ATC_O_BIAS,
    ATC_Q_NORM,
    ATC_K_NORM,
    ATC_Q_A, /* MLA (§12.8) */
    ATC_Q_A_BIAS,
    ATC_Q_A_NORM,
    ATC_Q_B,
    ATC_KV_A,
    ATC_KV_A_BIAS,
    ATC_KV_A_NORM,
    ATC_KV_B,
    ATC_K_SCONV, /* Inkling (§12.9) */
    ATC_V_SCONV,
    ATC_OUT_SCONV,
    ATC_R,
    ATC_REL,
    ATC_COUNT,
};

struct mc_model {
    enum mc_dtype dtype;
    struct mc_attention_config cfg;
    int64_t D, Hq, Hkv, hd, Lmax, R, qrows;
    int64_t we; /* a cache row's window elements: 1, or (1 + 2 Hkv hd + D) K with sconv_kernel K */
    int threads;
    float *w[ATC_COUNT];                   /* f32 copies; NULL when absent */
    float *cos_t, *sin_t;                  /* [Lmax][R/2] */
    struct mc_cpu_cache_shape cache_shape; /* window [B][1], state [B][2Hkv][Lmax][hd] */
};

static void atc_model_destroy(struct mc_model *model)
{
    if (!model)
        return;
    mc_cpu_weights_free(model->w, ATC_COUNT);
    free(model->cos_t);
    free(model->sin_t);
    free(model);
}

static enum mc_backend_status atc_config_check(const struct mc_attention_config *c, struct mc_msg *msg)
{
    enum mc_backend_status st;
    if ((st = mc_cpu_check_dim(ATC_WHO, "hidden_size", c->hidden_size, ATC_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(ATC_WHO, "num_attention_heads", c->num_attention_heads, ATC_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(ATC_WHO, "num_key_value_heads", c->num_key_value_heads, ATC_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(ATC_WHO, "head_dim", c->head_dim, ATC_MAX_DIM, msg)) ||
        (st = mc_cpu_check_dim(ATC_WHO, "cache_length", c->cache_length, ATC_MAX_DIM, msg)))
        return st;
    if (c->num_attention_heads % c->num_key_value_heads != 0)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "attention cpu config: 'num_attention_heads' (%lld) must be a multiple of "
                           "'num_key_value_heads' (%lld)",
                           (long long)c->num_attention_heads, (long long)c->num_key_value_heads);
    if ((c->no_rope != 0 && c->no_rope != 1) || !(c->softmax_scale >= 0.0) || !isfinite(c->softmax_scale))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "attention cpu config: 'no_rope' must be 0 or 1 and 'softmax_scale' finite and >= 0 "
                           "(got %d, %g)",
                           (int)c->no_rope, c->softmax_scale);
    if (c->kv_lora_rank < 0 || c->q_lora_rank < 0 || c->qk_rope_head_dim < 0 || c->v_head_dim < 0 ||
        (c->kv_lora_rank == 0 && (c->q_lora_rank || c->qk_rope_head_dim || c->v_head_dim)))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "attention cpu config: 'kv_lora_rank', 'q_lora_rank', 'qk_rope_head_dim', 'v_head_dim' "
                           "must be >= 0, the last three 0 without kv_lora_rank");
    const int mla = c->kv_lora_rank > 0;
    if (mla && ((st = mc_cpu_check_dim(ATC_WHO, "kv_lora_rank", c->kv_lora_rank, ATC_MAX_DIM, msg)) ||
                (st = mc_cpu_check_dim(ATC_WHO, "qk_rope_head_dim", c->qk_rope_head_dim, ATC_MAX_DIM, msg)) ||
                (st = mc_cpu_check_dim(ATC_WHO, "v_head_dim", c->v_head_dim, ATC_MAX_DIM, msg))))
        return st;
    if (mla && (c->qk_rope_head_dim >= c->head_dim || c->num_key_value_heads != c->num_attention_heads ||
                c->qk_norm != MC_QK_NORM_NONE || c->attn_output_gate || (!c->no_rope && c->qk_rope_head_dim % 2)))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "attention cpu config (MLA): needs head_dim > qk_rope_head_dim, num_key_value_heads = "
                           "num_attention_heads, no q/k norm or output gate and an even qk_rope_head_dim unless "
                           "no_rope");
    if (!mla && !c->no_rope && !(c->partial_rotary_factor > 0.0 && c->partial_rotary_factor <= 1.0))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "attention cpu config: 'partial_rotary_factor' must be in (0, 1] (got %g)",
                           c->partial_rotary_factor);
    const int64_t R = (int64_t)((double)c->head_dim * c->partial_rotary_factor);
    if (!mla && !c->no_rope && (R < 2 || R % 2 != 0))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "attention cpu config: rotary dims int(head_dim * partial_rotary_factor) = %lld must be "
                           "even and >= 2",
                           (long long)R);
    if ((!c->no_rope && (!(c->rope_theta > 1.0) || !isfinite(c->rope_theta))) || !(c->rms_norm_eps > 0.0) ||
        !isfinite(c->rms_norm_eps))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "attention cpu config: 'rope_theta' must be finite and > 1 and 'rms_norm_eps' finite and "
                           "> 0 (got %g, %g)",
                           c->rope_theta, c->rms_norm_eps);
    if (c->qk_norm < MC_QK_NORM_NONE || c->qk_norm > MC_QK_NORM_RMS_FULL ||
        (c->qk_norm == MC_QK_NORM_RMS_FULL && c->attn_output_gate))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "attention cpu config: 'qk_norm' %d is not an enum mc_qk_norm value (or rms_full with attn_output_gate)",
                           (int)c->qk_norm);
    if ((c->attn_output_gate != 0 && c->attn_output_gate != 1) || (c->attention_bias != 0 && c->attention_bias != 1))
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "attention cpu config: 'attn_output_gate' and 'attention_bias' must be 0 or 1 (got %d, %d)",
                           (int)c->attn_output_gate, (int)c->attention_bias);
    if (c->sconv_kernel < 0 || c->rel_dim < 0 || c->rel_extent < 0 || c->sliding_window < 0 ||
        (c->rel_dim > 0) != (c->rel_extent > 0) ||
        ((c->sconv_kernel || c->rel_dim || c->sliding_window) &&
         (c->kv_lora_rank > 0 || c->qk_norm == MC_QK_NORM_RMS_FULL)) ||
        c->sconv_kernel > 64 || c->rel_extent > ATC_MAX_DIM)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "attention cpu config: 'sconv_kernel' (<= 64), 'rel_dim', 'rel_extent' and 'sliding_window' "
                           "must be >= 0, rel_dim and rel_extent both 0 or both > 0, none of them with MLA or qk_norm "
                           "rms_full (got %lld, %lld, %lld, %lld)",
                           (long long)c->sconv_kernel, (long long)c->rel_dim, (long long)c->rel_extent,
                           (long long)c->sliding_window);
    if ((double)c->num_key_value_heads * (double)c->cache_length * (double)c->head_dim * 2.0 > (double)INT_MAX)
        return mc_cpu_fail(msg, MC_BACKEND_UNSUPPORTED,
                           "attention cpu: a KV cache row of 2*%lld*%lld*%lld floats is too large",
                           (long long)c->num_key_value_heads, (long long)c->cache_length, (long long)c->head_dim);
    return MC_BACKEND_OK;
}

/* The [C][K] window of the Inkling options (§12.9) as it is in memory. */
static void atc_window_copy(int64_t channels, int64_t kernel, const float *src, float *dst)
{
    memcpy(dst, src, (size_t)(channels * kernel) * sizeof *dst);
}

static enum mc_backend_status atc_model_create(const struct mc_model_desc *desc, struct mc_model **model,
                                               struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    struct mc_model *m = NULL;
    if ((st = mc_cpu_model_desc_check(desc, model, MC_FAMILY_ATTENTION, "attention", ATC_WHO, msg)) != MC_BACKEND_OK)
        goto fail;
    const struct mc_attention_config *c = desc->config;
    if ((st = atc_config_check(c, msg)) != MC_BACKEND_OK ||
        (st = mc_cpu_threads_check(desc, ATC_WHO, msg)) != MC_BACKEND_OK)
        goto fail;
    m = calloc(1, sizeof *m);
    if (!m) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "attention cpu: out of memory for the model");
        goto fail;
    }
    m->dtype = desc->dtype;
    m->cfg = *c;
    m->D = c->hidden_size;
    m->Hq = c->num_attention_heads;
    m->Hkv = c->num_key_value_heads;
    m->hd = c->head_dim;
    m->Lmax = c->cache_length;
    m->R = c->no_rope ? 0 : (int64_t)((double)m->hd * c->partial_rotary_factor); /* no_rope: nothing rotated */
    m->qrows = (c->attn_output_gate ? 2 : 1) * m->Hq * m->hd;
    m->threads = mc_cpu_threads_resolve(desc->threads);
    const int mla = c->kv_lora_rank > 0;
    const int64_t lat = c->kv_lora_rank + c->qk_rope_head_dim; /* MLA: a cached position's latent | rope key */
    if (mla)
        m->R = c->no_rope ? 0 : c->qk_rope_head_dim;
    const int64_t K = c->sconv_kernel, wch = 1 + 2 * m->Hkv * m->hd + m->D;
    m->cache_shape = mla ? mc_cpu_cache_shape_kc(1, 1, (size_t)(m->Lmax * lat),
                                                 "conv_state [B][1][1] (the cached-position count) and "
                                                 "recurrent_state [B][1][Lmax][kv_lora_rank + qk_rope_head_dim] (f32)")
                     : K > 0 ? mc_cpu_cache_shape_kc(wch, K, (size_t)(2 * m->Hkv * m->Lmax * m->hd),
                                                     "conv_state [B][1 + 2*Hkv*hd + D][K] (the count, the k, v and "
                                                     "out windows) and recurrent_state [B][2*Hkv][Lmax][hd] (f32)")
                             : mc_cpu_cache_shape_kc(1, 1, (size_t)(2 * m->Hkv * m->Lmax * m->hd),
                                                     "conv_state [B][1][1] (the cached-position count) and "
                                                     "recurrent_state [B][2*Hkv][Lmax][hd] (f32)");
    m->we = K > 0 ? wch * K : 1;
    if (K > 0) /* the windows are kept [C][K] in memory, as exported */
        m->cache_shape.to_ck = m->cache_shape.from_ck = atc_window_copy;
    const int64_t D = m->D, qd = m->Hq * m->hd, kvd = m->Hkv * m->hd, hd = m->hd;
    const int bias = c->attention_bias, norm = c->qk_norm != MC_QK_NORM_NONE;
    const int64_t qn = c->qk_norm == MC_QK_NORM_RMS_FULL ? qd : hd, kn = c->qk_norm == MC_QK_NORM_RMS_FULL ? kvd : hd;
    const int64_t qr = c->q_lora_rank, kvr = c->kv_lora_rank, dv = c->v_head_dim, dr = c->qk_rope_head_dim;
    const struct mc_cpu_weight_spec spec[ATC_COUNT] = {
        [ATC_Q] = {"q_proj.weight", !mla || qr == 0, 2, {mla ? qd : m->qrows, D, 0}},
        [ATC_Q_BIAS] = {"q_proj.bias", !mla && bias, 1, {m->qrows, 0, 0}},
        [ATC_K] = {"k_proj.weight", !mla, 2, {kvd, D, 0}},
        [ATC_K_BIAS] = {"k_proj.bias", !mla && bias, 1, {kvd, 0, 0}},
        [ATC_V] = {"v_proj.weight", !mla, 2, {kvd, D, 0}},
        [ATC_V_BIAS] = {"v_proj.bias", !mla && bias, 1, {kvd, 0, 0}},
        [ATC_O] = {"o_proj.weight", 1, 2, {D, mla ? m->Hq * dv : qd, 0}},
        [ATC_O_BIAS] = {"o_proj.bias", bias, 1, {D, 0, 0}},
        [ATC_Q_NORM] = {"q_norm.weight", norm, 1, {qn, 0, 0}},
        [ATC_K_NORM] = {"k_norm.weight", norm, 1, {kn, 0, 0}},
        [ATC_Q_A] = {"q_a_proj.weight", mla && qr > 0, 2, {qr, D, 0}},
        [ATC_Q_A_BIAS] = {"q_a_proj.bias", mla && qr > 0 && bias, 1, {qr, 0, 0}},
        [ATC_Q_A_NORM] = {"q_a_layernorm.weight", mla && qr > 0, 1, {qr, 0, 0}},
        [ATC_Q_B] = {"q_b_proj.weight", mla && qr > 0, 2, {qd, qr, 0}},
        [ATC_KV_A] = {"kv_a_proj_with_mqa.weight", mla, 2, {lat, D, 0}},
        [ATC_KV_A_BIAS] = {"kv_a_proj_with_mqa.bias", mla && bias, 1, {lat, 0, 0}},
        [ATC_KV_A_NORM] = {"kv_a_layernorm.weight", mla, 1, {kvr, 0, 0}},
        [ATC_KV_B] = {"kv_b_proj.weight", mla, 2, {m->Hq * (hd - dr + dv), kvr, 0}},
        [ATC_K_SCONV] = {"k_sconv.conv1d.weight", K > 0, 3, {kvd, 1, K}},
        [ATC_V_SCONV] = {"v_sconv.conv1d.weight", K > 0, 3, {kvd, 1, K}},
        [ATC_OUT_SCONV] = {"out_sconv.conv1d.weight", K > 0, 3, {D, 1, K}},
        [ATC_R] = {"r_proj.weight", c->rel_dim > 0, 2, {m->Hq * c->rel_dim, D, 0}},
        [ATC_REL] = {"rel_logits_proj.proj", c->rel_dim > 0, 2, {c->rel_dim, c->rel_extent, 0}},
    };
    if ((st = mc_cpu_weights_load(desc, spec, ATC_COUNT, m->w, ATC_WHO, msg)) != MC_BACKEND_OK)
        goto fail;
    const int64_t half = m->R / 2;
    m->cos_t = malloc((size_t)(m->Lmax * half + 1) * sizeof *m->cos_t);
    m->sin_t = malloc((size_t)(m->Lmax * half + 1) * sizeof *m->sin_t);
    if (!m->cos_t || !m->sin_t) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "attention cpu: out of memory for the rotary tables");
        goto fail;
    }
    for (int64_t i = 0; i < half; i++) {
        const double f = pow(c->rope_theta, -(double)(2 * i) / (double)m->R);
        for (int64_t p = 0; p < m->Lmax; p++) {
            m->cos_t[p * half + i] = (float)cos((double)p * f);
            m->sin_t[p * half + i] = (float)sin((double)p * f);
        }
    }
    *model = m;
    return MC_BACKEND_OK;

fail:
    atc_model_destroy(m);
    return st;
}

/* ---- cache ------------------------------------------------------------------------------------- */

MC_CPU_CACHE_OPS(atc, ATC_WHO)

/* ---- forward ----------------------------------------------------------------------------------- */

/* The count a cache row holds, or -1 unless it is an integer in [0, Lmax]. */
static int64_t atc_count(float v, int64_t lmax)
{
    if (!(v >= 0.0f && v <= (float)lmax) || v != floorf(v))
        return -1;
    return (int64_t)v;
}

/* INVALID unless a row holding `count` can take `real` more tokens. */
static enum mc_backend_status atc_room(const struct mc_model *m, float count, int64_t real, const char *what, int64_t i,
                                       struct mc_msg *msg)
{
    const int64_t n = atc_count(count, m->Lmax);
    if (n < 0)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "attention cpu: %s %lld: the cached-position count %g is not an integer in [0, cache_length "
                           "= %lld]",
                           what, (long long)i, (double)count, (long long)m->Lmax);
    if (n + real > m->Lmax)
        return mc_cpu_fail(msg, MC_BACKEND_INVALID,
                           "attention cpu: %s %lld: %lld cached + %lld new positions exceed cache_length %lld", what,
                           (long long)i, (long long)n, (long long)real, (long long)m->Lmax);
    return MC_BACKEND_OK;
}

struct atc_run {
    const struct mc_model *m;
    int64_t len;               /* L of a batched forward */
    const uint8_t *mask;       /* [B][L] or NULL */
    const float *qg, *k, *v;   /* [tokens][qrows], [tokens][Hkv*hd] x2 */
    float *kw, *vw;            /* sconv_kernel: k and v before their convs ([tokens][Hkv*hd]), written in place */
    const float *rr;           /* rel_dim: [tokens][Hq*rel_dim] */
    float *y;                  /* sconv_kernel: o_proj's output, out_sconv applied in place (atc_out_row) */
    float *att;                /* [tokens][Hq*hd], zero on entry */
    float *window, *state;     /* the cache (or pool) rows */
    float *scratch;            /* per worker: [Lmax] scores + [hd] q (MLA: + [2 kv_lora_rank]; rel: + [rel_extent]) */
    const struct mc_packed_args *pk; /* the packed call, or NULL */
};

/* The per-head q/k norm in place (§12.3). */
static void atc_norm(const struct mc_model *m, float *restrict v, const float *restrict w)
{
    if (m->cfg.qk_norm == MC_QK_NORM_NONE || m->cfg.qk_norm == MC_QK_NORM_RMS_FULL)
        return; /* rms_full: atc_norm_rows, on the projection */
    float ss = 0.0f;
    for (int64_t i = 0; i < m->hd; i++)
        ss += v[i] * v[i];
    const float inv = 1.0f / sqrtf(ss / (float)m->hd + (float)m->cfg.rms_norm_eps);
    const float one = m->cfg.qk_norm == MC_QK_NORM_ZERO_CENTRED ? 1.0f : 0.0f;
    for (int64_t i = 0; i < m->hd; i++)
        v[i] = v[i] * inv * (one + w[i]);
}

/* The q/k norm over the whole projection (qk_norm rms_full) of `tokens` rows of width n in place. */
static void atc_norm_rows(const struct mc_model *m, float *restrict v, int64_t tokens, int64_t n,
                          const float *restrict w)
{
    if (m->cfg.qk_norm != MC_QK_NORM_RMS_FULL)
        return;
    for (int64_t r = 0; r < tokens; r++) {
        float *restrict row = v + r * n, ss = 0.0f;
        for (int64_t i = 0; i < n; i++)
            ss += row[i] * row[i];
        const float inv = 1.0f / sqrtf(ss / (float)n + (float)m->cfg.rms_norm_eps);
        for (int64_t i = 0; i < n; i++)
            row[i] = row[i] * inv * w[i];
    }
}

/* RoPE at position pos from the tables (rotate_half on the first R dims). */
static void atc_rope(const struct mc_model *m, float *restrict v, int64_t pos)
{
    const int64_t half = m->R / 2;
    const float *restrict c = m->cos_t + pos * half, *restrict s = m->sin_t + pos * half;
    for (int64_t i = 0; i < half; i++) {
        const float x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c[i] - x2 * s[i];
        v[i + half] = x2 * c[i] + x1 * s[i];
    }
}

/* One step of a short convolution with its input added (§12.9) on C channels in place: the window w [C][K] shifts
 * in u, then u ← u + Σ_j conv[c][j]·w[c][j]. */
static void atc_sconv_step(float *restrict w, int64_t C, int64_t K, const float *restrict conv, float *restrict u)
{
    for (int64_t c = 0; c < C; c++) {
        float *restrict wc = w + c * K, acc = 0.0f;
        memmove(wc, wc + 1, (size_t)(K - 1) * sizeof *wc);
        wc[K - 1] = u[c];
        for (int64_t j = 0; j < K; j++)
            acc += conv[c * K + j] * wc[j];
        u[c] += acc;
    }
}

/* out_sconv over row b's real tokens of o_proj's output (sconv_kernel > 0). */
static void atc_out_row(void *ctx, int64_t b, int worker)
{
    (void)worker;
    const struct atc_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t t0 = r->pk ? r->pk->cu_seqlens[b] : b * r->len;
    const int64_t L = r->pk ? r->pk->cu_seqlens[b + 1] - t0 : r->len;
    const int64_t slot = r->pk ? r->pk->slots[b] : b, K = m->cfg.sconv_kernel;
    float *w = r->window + (size_t)slot * (size_t)m->we + (1 + 2 * m->Hkv * m->hd) * K;
    for (int64_t t = 0; t < L; t++)
        if (!r->mask || r->mask[t0 + t])
            atc_sconv_step(w, m->D, K, m->w[ATC_OUT_SCONV], r->y + (t0 + t) * m->D);
}

/* Row b: batch row b (tokens b·L.., cache row b) or sequence b of a packed call (its tokens, its slot). */
static void atc_row(void *ctx, int64_t b, int worker)
{
    const struct atc_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t Hq = m->Hq, Hkv = m->Hkv, hd = m->hd, Lmax = m->Lmax, qrows = m->qrows;
    const int64_t qd = Hq * hd, kvd = Hkv * hd, group = Hq / Hkv;
    const int gated = m->cfg.attn_output_gate;
    const int64_t t0 = r->pk ? r->pk->cu_seqlens[b] : b * r->len;
    const int64_t L = r->pk ? r->pk->cu_seqlens[b + 1] - t0 : r->len;
    const int64_t slot = r->pk ? r->pk->slots[b] : b;
    const uint8_t *mask = r->mask ? r->mask + t0 : NULL;
    const float scale = m->cfg.softmax_scale > 0.0 ? (float)m->cfg.softmax_scale : 1.0f / sqrtf((float)hd);
    const int64_t K = m->cfg.sconv_kernel, dr = m->cfg.rel_dim, E = m->cfg.rel_extent, W = m->cfg.sliding_window;
    float *p = r->scratch + (size_t)worker * (size_t)(Lmax + hd + E), *q = p + Lmax, *rel = q + hd;
    float *keys = r->state + (size_t)slot * m->cache_shape.state_elems, *vals = keys + kvd * Lmax;
    float *win = r->window + (size_t)slot * (size_t)m->we;
    int64_t n = (int64_t)win[0];
    if (L == 0)
        return;
    for (int64_t j = 0; j < Hkv; j++) {
        memset(keys + (j * Lmax + n) * hd, 0, (size_t)((Lmax - n) * hd) * sizeof *keys);
        memset(vals + (j * Lmax + n) * hd, 0, (size_t)((Lmax - n) * hd) * sizeof *vals);
    }
    for (int64_t t = 0; t < L; t++) {
        const int64_t row = t0 + t;
        if (mask && !mask[t])
            continue;
        if (K > 0) { /* k_sconv, v_sconv before the k norm */
            atc_sconv_step(win + K, kvd, K, m->w[ATC_K_SCONV], r->kw + row * kvd);
            atc_sconv_step(win + (1 + kvd) * K, kvd, K, m->w[ATC_V_SCONV], r->vw + row * kvd);
        }
        for (int64_t j = 0; j < Hkv; j++) {
            float *ks = keys + (j * Lmax + n) * hd;
            memcpy(ks, r->k + row * kvd + j * hd, (size_t)hd * sizeof *ks);
            atc_norm(m, ks, m->w[ATC_K_NORM]);
            atc_rope(m, ks, n);
            memcpy(vals + (j * Lmax + n) * hd, r->v + row * kvd + j * hd, (size_t)hd * sizeof *vals);
        }
        for (int64_t h = 0; h < Hq; h++) {
            const float *src = r->qg + row * qrows + h * (gated ? 2 * hd : hd);
            const float *kh = keys + (h / group) * Lmax * hd, *vh = vals + (h / group) * Lmax * hd;
            memcpy(q, src, (size_t)hd * sizeof *q);
            atc_norm(m, q, m->w[ATC_Q_NORM]);
            atc_rope(m, q, n);
            const int64_t lo = W > 0 && n >= W ? n - W + 1 : 0; /* the sliding window: n - s < W */
            if (dr > 0) { /* (r_h · proj)[e] for the distances e <= n within the extent */
                const int64_t ne = E < n + 1 ? E : n + 1;
                const float *restrict rh = r->rr + row * (Hq * dr) + h * dr, *restrict pr = m->w[ATC_REL];
                memset(rel, 0, (size_t)ne * sizeof *rel);
                for (int64_t i = 0; i < dr; i++)
                    for (int64_t e = 0; e < ne; e++)
                        rel[e] += rh[i] * pr[i * E + e];
            }
            float pmax = -INFINITY;
            for (int64_t s = lo; s <= n; s++) {
                const float *restrict ks = kh + s * hd;
                float dot = 0.0f;
                for (int64_t i = 0; i < hd; i++)
                    dot += q[i] * ks[i];
                p[s] = dot * scale + (dr > 0 && n - s < E ? rel[n - s] : 0.0f);
                pmax = p[s] > pmax ? p[s] : pmax;
            }
            for (int64_t s = lo; s <= n; s++)
                p[s] -= pmax;
            mc_cpu_vexp(p + lo, n + 1 - lo);
            float psum = 0.0f;
            for (int64_t s = lo; s <= n; s++)
                psum += p[s];
            const float inv = 1.0f / psum;
            float *restrict o = r->att + row * qd + h * hd;
            for (int64_t s = lo; s <= n; s++) {
                const float wgt = p[s] * inv;
                const float *restrict vs = vh + s * hd;
                for (int64_t i = 0; i < hd; i++)
                    o[i] += wgt * vs[i];
            }
            if (gated)
                for (int64_t i = 0; i < hd; i++)
                    o[i] *= 1.0f / (1.0f + expf(-src[hd + i]));
        }
        n++;
    }
    win[0] = (float)n;
}

/* RMSNorm of one latent in place (kv_a_layernorm, q_a_layernorm). */
static void atc_latent_norm(float *restrict v, int64_t n, const float *restrict w, double eps)
{
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++)
        ss += v[i] * v[i];
    const float inv = 1.0f / sqrtf(ss / (float)n + (float)eps);
    for (int64_t i = 0; i < n; i++)
        v[i] = v[i] * inv * w[i];
}

/*
 * Row b of an MLA forward (§12.8) in the absorbed form (as vLLM's and FlashMLA's MLA decode, not the
 * expansion upstream runs): per head the query's nope part is taken into the latent space through the
 * head's key rows of kv_b_proj (qa = W_uk,hᵀ q_nope), scores are qa·latent_s + q_rope·k_rope_s over the cached
 * latents, the softmax-weighted latent sum goes out through the head's value rows (o_h = W_uv,h ctx). The
 * cache row holds per position the normed latent and the (rotated) rope key; r->k holds kv_a_proj_with_mqa.
 */
static void atc_mla_row(void *ctx, int64_t b, int worker)
{
    const struct atc_run *r = ctx;
    const struct mc_model *m = r->m;
    const int64_t H = m->Hq, hd = m->hd, Lmax = m->Lmax, c = m->cfg.kv_lora_rank, dr = m->cfg.qk_rope_head_dim;
    const int64_t dn = hd - dr, dv = m->cfg.v_head_dim, lat = c + dr, qd = H * hd;
    const int64_t t0 = r->pk ? r->pk->cu_seqlens[b] : b * r->len;
    const int64_t L = r->pk ? r->pk->cu_seqlens[b + 1] - t0 : r->len;
    const int64_t slot = r->pk ? r->pk->slots[b] : b;
    const uint8_t *mask = r->mask ? r->mask + t0 : NULL;
    const float scale = m->cfg.softmax_scale > 0.0 ? (float)m->cfg.softmax_scale : 1.0f / sqrtf((float)hd);
    float *p = r->scratch + (size_t)worker * (size_t)(Lmax + hd + 2 * c), *q = p + Lmax, *qa = q + hd, *cx = qa + c;
    float *cache = r->state + (size_t)slot * m->cache_shape.state_elems;
    const float *wkb = m->w[ATC_KV_B];
    int64_t n = (int64_t)r->window[slot];
    if (L == 0)
        return;
    memset(cache + n * lat, 0, (size_t)((Lmax - n) * lat) * sizeof *cache);
    for (int64_t t = 0; t < L; t++) {
        const int64_t row = t0 + t;
        if (mask && !mask[t])
            continue;
        float *cs = cache + n * lat;
        memcpy(cs, r->k + row * lat, (size_t)lat * sizeof *cs);
        atc_latent_norm(cs, c, m->w[ATC_KV_A_NORM], m->cfg.rms_norm_eps);
        atc_rope(m, cs + c, n);
        for (int64_t h = 0; h < H; h++) {
            const float *wk = wkb + h * (dn + dv) * c, *wv = wk + dn * c; /* the head's [dn][c] and [dv][c] rows */
            memcpy(q, r->qg + row * qd + h * hd, (size_t)hd * sizeof *q);
            atc_rope(m, q + dn, n);
            for (int64_t j = 0; j < c; j++)
                qa[j] = 0.0f;
            for (int64_t i = 0; i < dn; i++)
                for (int64_t j = 0; j < c; j++)
                    qa[j] += q[i] * wk[i * c + j];
            float pmax = -INFINITY;
            for (int64_t s = 0; s <= n; s++) {
                const float *restrict ls = cache + s * lat;
                float dot = 0.0f;
                for (int64_t j = 0; j < c; j++)
                    dot += qa[j] * ls[j];
                for (int64_t i = 0; i < dr; i++)
                    dot += q[dn + i] * ls[c + i];
                p[s] = dot * scale;
                pmax = p[s] > pmax ? p[s] : pmax;
            }
            for (int64_t s = 0; s <= n; s++)
                p[s] -= pmax;
            mc_cpu_vexp(p, n + 1);
            float psum = 0.0f;
            for (int64_t s = 0; s <= n; s++)
                psum += p[s];
            const float inv = 1.0f / psum;
            for (int64_t j = 0; j < c; j++)
                cx[j] = 0.0f;
            for (int64_t s = 0; s <= n; s++) {
                const float wgt = p[s] * inv;
                const float *restrict ls = cache + s * lat;
                for (int64_t j = 0; j < c; j++)
                    cx[j] += wgt * ls[j];
            }
            float *restrict o = r->att + row * (H * dv) + h * dv;
            for (int64_t i = 0; i < dv; i++) {
                float acc = 0.0f;
                for (int64_t j = 0; j < c; j++)
                    acc += wv[i * c + j] * cx[j];
                o[i] = acc;
            }
        }
        n++;
    }
    r->window[slot] = (float)n;
}

/* The MLA projections, rows and o_proj (atc_run_rows with kv_lora_rank > 0). */
static enum mc_backend_status atc_mla_run_rows(const struct mc_model *m, struct atc_run *run, int64_t tokens,
                                               int64_t rows, const float *x, float *y, const char *what,
                                               struct mc_msg *msg)
{
    const int64_t D = m->D, qd = m->Hq * m->hd, qr = m->cfg.q_lora_rank, c = m->cfg.kv_lora_rank;
    const int64_t lat = c + m->cfg.qk_rope_head_dim, od = m->Hq * m->cfg.v_head_dim;
    const int workers = (int)(rows < m->threads ? rows : m->threads);
    float *qa = qr > 0 ? malloc((size_t)(tokens * qr) * sizeof *qa) : NULL;
    float *q = malloc((size_t)(tokens * qd) * sizeof *q), *kva = malloc((size_t)(tokens * lat) * sizeof *kva);
    float *att = calloc((size_t)(tokens * od), sizeof *att);
    float *scratch = malloc((size_t)(workers > 0 ? workers : 1) * (size_t)(m->Lmax + m->hd + 2 * c) * sizeof *scratch);
    enum mc_backend_status st = MC_BACKEND_OK;
    if ((qr > 0 && !qa) || !q || !kva || !att || !scratch) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "attention cpu %s: out of memory for %lld tokens of scratch", what,
                         (long long)tokens);
        goto cleanup;
    }
    if (qr > 0) {
        mc_cpu_linear_tiled(tokens, qr, D, x, D, m->w[ATC_Q_A], m->w[ATC_Q_A_BIAS], qa, qr, m->threads);
        for (int64_t t = 0; t < tokens; t++)
            atc_latent_norm(qa + t * qr, qr, m->w[ATC_Q_A_NORM], m->cfg.rms_norm_eps);
        mc_cpu_linear_tiled(tokens, qd, qr, qa, qr, m->w[ATC_Q_B], NULL, q, qd, m->threads);
    } else {
        mc_cpu_linear_tiled(tokens, qd, D, x, D, m->w[ATC_Q], NULL, q, qd, m->threads);
    }
    mc_cpu_linear_tiled(tokens, lat, D, x, D, m->w[ATC_KV_A], m->w[ATC_KV_A_BIAS], kva, lat, m->threads);
    run->qg = q;
    run->k = kva;
    run->att = att;
    run->scratch = scratch;
    mc_cpu_parallel_for(rows, atc_mla_row, run, m->threads);
    mc_cpu_linear_tiled(tokens, D, od, att, od, m->w[ATC_O], NULL, y, D, m->threads);
    mc_cpu_out_bias(tokens, D, run->mask, m->w[ATC_O_BIAS], y);

cleanup:
    free(scratch);
    free(att);
    free(kva);
    free(q);
    free(qa);
    return st;
}

/* Projections, the rows and o_proj over `tokens` token rows of x (f32); y (f32) written, pads = bias. */
static enum mc_backend_status atc_run_rows(const struct mc_model *m, struct atc_run *run, int64_t tokens, int64_t rows,
                                           const float *x, float *y, const char *what, struct mc_msg *msg)
{
    if (m->cfg.kv_lora_rank > 0)
        return atc_mla_run_rows(m, run, tokens, rows, x, y, what, msg);
    const int64_t D = m->D, kvd = m->Hkv * m->hd, qd = m->Hq * m->hd;
    const int workers = (int)(rows < m->threads ? rows : m->threads);
    float *qg = malloc((size_t)(tokens * m->qrows) * sizeof *qg), *k = malloc((size_t)(tokens * kvd) * sizeof *k);
    float *v = malloc((size_t)(tokens * kvd) * sizeof *v), *att = calloc((size_t)(tokens * qd), sizeof *att);
    const int64_t E = m->cfg.rel_extent, rd = m->Hq * m->cfg.rel_dim;
    float *scratch =
        malloc((size_t)(workers > 0 ? workers : 1) * (size_t)(m->Lmax + m->hd + E) * sizeof *scratch);
    float *rr = rd > 0 ? malloc((size_t)(tokens * rd) * sizeof *rr) : NULL;
    enum mc_backend_status st = MC_BACKEND_OK;
    if (!qg || !k || !v || !att || !scratch || (rd > 0 && !rr)) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "attention cpu %s: out of memory for %lld tokens of scratch", what,
                         (long long)tokens);
        goto cleanup;
    }
    mc_cpu_linear_tiled(tokens, m->qrows, D, x, D, m->w[ATC_Q], m->w[ATC_Q_BIAS], qg, m->qrows, m->threads);
    mc_cpu_linear_tiled(tokens, kvd, D, x, D, m->w[ATC_K], m->w[ATC_K_BIAS], k, kvd, m->threads);
    mc_cpu_linear_tiled(tokens, kvd, D, x, D, m->w[ATC_V], m->w[ATC_V_BIAS], v, kvd, m->threads);
    atc_norm_rows(m, qg, tokens, m->qrows, m->w[ATC_Q_NORM]); /* rms_full: no gate, qrows = Hq hd */
    atc_norm_rows(m, k, tokens, kvd, m->w[ATC_K_NORM]);
    if (rd > 0)
        mc_cpu_linear_tiled(tokens, rd, D, x, D, m->w[ATC_R], NULL, rr, rd, m->threads);
    run->qg = qg;
    run->k = k;
    run->v = v;
    run->kw = k;
    run->vw = v;
    run->rr = rr;
    run->att = att;
    run->scratch = scratch;
    mc_cpu_parallel_for(rows, atc_row, run, m->threads);
    mc_cpu_linear_tiled(tokens, D, qd, att, qd, m->w[ATC_O], NULL, y, D, m->threads);
    mc_cpu_out_bias(tokens, D, run->mask, m->w[ATC_O_BIAS], y);
    if (m->cfg.sconv_kernel > 0) {
        run->y = y;
        mc_cpu_parallel_for(rows, atc_out_row, run, m->threads);
    }

cleanup:
    free(rr);
    free(scratch);
    free(att);
    free(v);
    free(k);
    free(qg);
    return st;
}

static enum mc_backend_status atc_forward(struct mc_model *model, struct mc_cache *cache,
                                          const struct mc_forward_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    const struct mc_model *m = model;
    struct mc_cpu_f32io io = {0};
    float *tmp_window = NULL, *tmp_state = NULL;
    if ((st = mc_cpu_forward_check(model, cache, args, ATC_WHO, msg)) != MC_BACKEND_OK)
        return st;
    const int64_t Bsz = args->batch, L = args->len, M = Bsz * L, D = m->D;
    const size_t ns = m->cache_shape.state_elems;
    if (cache && cache->primed) { /* every row checked before any is written */
        for (int64_t b = 0; b < Bsz; b++) {
            int64_t real = 0;
            for (int64_t t = 0; t < L; t++)
                real += !args->mask || args->mask[b * L + t];
            if ((st = atc_room(m, cache->window[b * m->we], real, "row", b, msg)) != MC_BACKEND_OK)
                return st;
        }
    } else if (L > m->Lmax) {
        for (int64_t b = 0; b < Bsz; b++) {
            int64_t real = 0;
            for (int64_t t = 0; t < L; t++)
                real += !args->mask || args->mask[b * L + t];
            if ((st = atc_room(m, 0.0f, real, "row", b, msg)) != MC_BACKEND_OK)
                return st;
        }
    }
    const int io_nomem = mc_cpu_f32io_alloc(&io, m->dtype, M * D);
    if (!cache) {
        tmp_window = calloc((size_t)(Bsz * m->we), sizeof *tmp_window);
        tmp_state = calloc((size_t)Bsz * ns, sizeof *tmp_state);
    }
    if (io_nomem || (!cache && (!tmp_window || !tmp_state))) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "attention cpu forward: out of memory for B=%lld L=%lld scratch",
                         (long long)Bsz, (long long)L);
        goto cleanup;
    }
    const float *x;
    float *y;
    mc_cpu_f32io_in(&io, args->x, args->y, &x, &y);
    /* a cache no forward has written starts empty: count 0 (the rows then clear their slots) */
    if (cache && !cache->primed)
        memset(cache->window, 0, (size_t)(Bsz * m->we) * sizeof *cache->window);
    struct atc_run run = {.m = m, .len = L, .mask = args->mask, .window = cache ? cache->window : tmp_window,
                          .state = cache ? cache->state : tmp_state};
    if ((st = atc_run_rows(m, &run, M, Bsz, x, y, "forward", msg)) != MC_BACKEND_OK)
        goto cleanup;
    mc_cpu_f32io_out(&io, args->y);
    if (cache)
        cache->primed = 1;

cleanup:
    free(tmp_state);
    free(tmp_window);
    mc_cpu_f32io_free(&io);
    return st;
}

/* The packed call on a pool (backend.h: forward_packed): projections once over the T packed tokens,
 * each sequence attends over its own slot (emptied first when has_initial_state = 0). */
static enum mc_backend_status atc_forward_packed(struct mc_model *model, struct mc_cache *pool,
                                                 const struct mc_packed_args *args, struct mc_msg *msg)
{
    enum mc_backend_status st = MC_BACKEND_OK;
    const struct mc_model *m = model;
    struct mc_cpu_f32io io = {0};
    int64_t T = 0;
    if ((st = mc_cpu_packed_check(model, pool, args, ATC_WHO, &T, msg)) != MC_BACKEND_OK)
        return st;
    if (T == 0)
        return MC_BACKEND_OK;
    for (int64_t i = 0; i < args->n_seqs; i++) {
        const int64_t len = args->cu_seqlens[i + 1] - args->cu_seqlens[i];
        const float count = args->has_initial_state[i] && pool->primed ? pool->window[args->slots[i] * m->we] : 0.0f;
        if (len > 0 && (st = atc_room(m, count, len, "sequence", i, msg)) != MC_BACKEND_OK)
            return st;
    }
    const int64_t D = m->D;
    if (mc_cpu_f32io_alloc(&io, m->dtype, T * D) != 0) {
        st = mc_cpu_fail(msg, MC_BACKEND_NOMEM, "attention cpu forward_packed: out of memory for T=%lld",
                         (long long)T);
        goto cleanup;
    }
    mc_cpu_packed_reset(&m->cache_shape, pool, args);
    const float *x;
    float *y;
    mc_cpu_f32io_in(&io, args->x, args->y, &x, &y);
    struct atc_run run = {.m = m, .window = pool->window, .state = pool->state, .pk = args};
    if ((st = atc_run_rows(m, &run, T, args->n_seqs, x, y, "forward_packed", msg)) != MC_BACKEND_OK)
        goto cleanup;
    mc_cpu_f32io_out(&io, args->y);
    pool->primed = 1;

cleanup:
    mc_cpu_f32io_free(&io);
    return st;
}

static const struct mc_backend_ops atc_ops = {
    .abi_version = MIXCHECK_ABI_VERSION,
    .struct_size = sizeof(struct mc_backend_ops),
    .name = "cpu",
    .device = "cpu",
    .family = MC_FAMILY_ATTENTION,
    .dtypes = MC_DTYPE_BIT(MC_DTYPE_F32) | MC_DTYPE_BIT(MC_DTYPE_BF16) | MC_DTYPE_BIT(MC_DTYPE_F16),
    .caps = MC_CAP_THREADS | MC_CAP_PACKED,
    .model_create = atc_model_create,
    .model_destroy = atc_model_destroy,
    .cache_alloc = atc_cache_alloc,
    .cache_copy = atc_cache_copy,
    .cache_free = atc_cache_free,
    .cache_export = atc_cache_export,
    .cache_import = atc_cache_import,
    .forward = atc_forward,
    .forward_packed = atc_forward_packed,
};

const struct mc_backend_ops *mc_cpu_attention_ops(void)
{
    return &atc_ops;
}
