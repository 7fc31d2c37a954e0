/*
 * mut_linear.c — plain f32 lightning attention (docs/semantics.md §13, the block form of §13.4) and Kimi
 * Delta Attention (§14, the recurrence of §14.4) mixers for the mutant library, with the faults that live
 * inside their math:
 *   lightning, block-boundary decay: the state carried out of a block decays by λ^Q, the full block's
 *        decay, also after a partial block of b < Q tokens (a block decay precomputed for full blocks):
 *        wrong whenever a forward's real tokens are not a multiple of Q;
 *   lightning, slope order: head h decays with the slope of head H-1-h (the slope table reversed);
 *   KDA, per-channel gate broadcast as per-head: every key channel of a head decays with the head's first
 *        channel's g (a gated-delta-rule kernel fed g [B][L][H] from the per-channel [B][L][H][d]).
 * The cache-level faults (8.2a, 8.2b) are applied by the driver in mutants.c. With MUT_NONE each computes
 * what reference/lightning.c and reference/kda.c compute; a masked token is skipped and its output row is
 * zero. Lightning's window is the count of real tokens consumed ([1] per row).
 *
 * Dimension letters: L tokens, D hidden, H heads, hd / d head dim, inner = H·hd, K conv width, C = 3·inner.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mutants.h"

/* ---- lightning attention ---------------------------------------------------------------------- */

struct lightning {
    struct mc_lightning_config cfg;
    int64_t D, H, hd, inner;
    float *w_qkv, *w_gate, *w_norm, *w_out;
    double *slope; /* [H] */
};

static void lightning_destroy(void *impl)
{
    struct lightning *m = impl;
    if (m == NULL)
        return;
    free(m->w_qkv);
    free(m->w_gate);
    free(m->w_norm);
    free(m->w_out);
    free(m->slope);
    free(m);
}

static enum mc_backend_status lightning_create(const struct mc_model_desc *d, struct mc_model *model,
                                               struct mc_msg *msg)
{
    const struct mc_lightning_config *c = d->config;
    if (c->hidden_size < 1 || c->num_attention_heads < 1 || c->head_dim < 1 || c->num_hidden_layers < 1 ||
        c->layer_idx < 0 || c->layer_idx >= c->num_hidden_layers)
        return mut_fail(msg, MC_BACKEND_INVALID, "mutant lightning: inconsistent configuration");
    struct lightning *m = calloc(1, sizeof *m);
    if (m == NULL)
        return mut_fail(msg, MC_BACKEND_NOMEM, "mutant lightning: out of memory");
    model->impl = m;
    m->cfg = *c;
    m->D = c->hidden_size;
    m->H = c->num_attention_heads;
    m->hd = c->head_dim;
    m->inner = m->H * m->hd;
    int miss;
    m->w_qkv = mut_weight(d, "qkv_proj.weight", 3 * m->inner * m->D, &miss, msg);
    m->w_gate = mut_weight(d, "output_gate.weight", m->inner * m->D, &miss, msg);
    m->w_norm = mut_weight(d, "norm.weight", m->inner, &miss, msg);
    m->w_out = mut_weight(d, "out_proj.weight", m->D * m->inner, &miss, msg);
    m->slope = malloc((size_t)m->H * sizeof *m->slope);
    if (!m->w_qkv || !m->w_gate || !m->w_norm || !m->w_out || !m->slope)
        return m->slope ? MC_BACKEND_INVALID : mut_fail(msg, MC_BACKEND_NOMEM, "mutant lightning: out of memory");
    const double factor = 1.0 - (double)c->layer_idx / ((double)c->num_hidden_layers - 1.0 + 1e-5) + 1e-5;
    for (int64_t h = 0; h < m->H; h++) {
        const int64_t e = model->fault == MUT_SLOPE_ORDER ? m->H - 1 - h : h;
        m->slope[h] = pow(2.0, -8.0 * (double)(e + 1) / (double)m->H) * factor;
    }
    model->D = m->D;
    model->win_elems = 1;
    model->state_elems = m->H * m->hd * m->hd;
    model->chunk = c->block_size > 0 ? c->block_size : 64;
    return MC_BACKEND_OK;
}

static enum mc_backend_status lightning_segment(const struct mc_model *model, float *win, float *st, const float *x,
                                                const uint8_t *mask, int64_t L, float *y, const struct mut_seg *seg,
                                                struct mc_msg *msg)
{
    (void)seg;
    const struct lightning *m = model->impl;
    const int64_t D = m->D, H = m->H, hd = m->hd, inner = m->inner, Q = model->chunk;
    enum mc_backend_status rc = MC_BACKEND_OK;
    float *qkv = malloc((size_t)(L * 3 * inner) * sizeof *qkv);
    float *gate = malloc((size_t)(L * inner) * sizeof *gate);
    float *o = calloc((size_t)(L * inner), sizeof *o);
    float *snew = malloc((size_t)(hd * hd) * sizeof *snew);
    int64_t *idx = malloc((size_t)L * sizeof *idx);
    if (!qkv || !gate || !o || !snew || !idx) {
        rc = mut_fail(msg, MC_BACKEND_NOMEM, "mutant lightning: out of memory for L=%lld", (long long)L);
        goto out;
    }
    mut_linear(x, L, D, m->w_qkv, NULL, 3 * inner, qkv);
    mut_linear(x, L, D, m->w_gate, NULL, inner, gate);
    for (int64_t i = 0; i < L * 3 * inner; i++)
        qkv[i] = mut_silu(qkv[i]);
    int64_t n = 0;
    for (int64_t t = 0; t < L; t++)
        if (mask == NULL || mask[t])
            idx[n++] = t;
    /* the block form (§13.4) over the real tokens in blocks of Q */
    for (int64_t h = 0; h < H; h++) {
        float *S = st + h * hd * hd; /* [hd][hd] */
        const double s = m->slope[h];
        for (int64_t b0 = 0; b0 < n; b0 += Q) {
            const int64_t b = b0 + Q < n ? Q : n - b0;
            for (int64_t i = 0; i < b; i++) {
                const float *qi = qkv + idx[b0 + i] * 3 * inner + h * 3 * hd;
                float *oi = o + idx[b0 + i] * inner + h * hd;
                for (int64_t j = 0; j <= i; j++) { /* intra: (q_i · k_j) λ^(i-j) v_j */
                    const float *kj = qkv + idx[b0 + j] * 3 * inner + h * 3 * hd + hd, *vj = kj + hd;
                    float a = 0.0f;
                    for (int64_t c = 0; c < hd; c++)
                        a += qi[c] * kj[c];
                    a *= (float)exp(-s * (double)(i - j));
                    for (int64_t c = 0; c < hd; c++)
                        oi[c] += a * vj[c];
                }
                const float qd = (float)exp(-s * (double)(i + 1)); /* inter: (q_i λ^(i+1)) S */
                for (int64_t r = 0; r < hd; r++)
                    for (int64_t c = 0; c < hd; c++)
                        oi[c] += qi[r] * qd * S[r * hd + c];
            }
            /* S ← λ^b S + Σ_j λ^(b-1-j) k_j v_jᵀ (the fault: λ^Q for every block) */
            const float carry = (float)exp(-s * (double)(model->fault == MUT_BLOCK_DECAY ? Q : b));
            for (int64_t r = 0; r < hd * hd; r++)
                snew[r] = carry * S[r];
            for (int64_t j = 0; j < b; j++) {
                const float *kj = qkv + idx[b0 + j] * 3 * inner + h * 3 * hd + hd, *vj = kj + hd;
                const float kd = (float)exp(-s * (double)(b - 1 - j));
                for (int64_t r = 0; r < hd; r++)
                    for (int64_t c = 0; c < hd; c++)
                        snew[r * hd + c] += kd * kj[r] * vj[c];
            }
            memcpy(S, snew, (size_t)(hd * hd) * sizeof *S);
        }
    }
    win[0] += (float)n;
    /* RMSNorm over the whole row, sigmoid output gate */
    for (int64_t i = 0; i < n; i++) {
        float *orow = o + idx[i] * inner;
        const float *g = gate + idx[i] * inner;
        float ss = 0.0f;
        for (int64_t c = 0; c < inner; c++)
            ss += orow[c] * orow[c];
        const float rstd = 1.0f / sqrtf(ss / (float)inner + (float)m->cfg.norm_eps);
        for (int64_t c = 0; c < inner; c++)
            orow[c] = m->w_norm[c] * orow[c] * rstd / (1.0f + expf(-g[c]));
    }
    mut_linear(o, L, inner, m->w_out, NULL, D, y);
    if (mask != NULL)
        for (int64_t t = 0; t < L; t++)
            if (!mask[t])
                memset(y + t * D, 0, (size_t)D * sizeof *y);
out:
    free(qkv);
    free(gate);
    free(o);
    free(snew);
    free(idx);
    return rc;
}

const struct mut_family mut_lightning_family = {
    .family = MC_FAMILY_LIGHTNING,
    .create = lightning_create,
    .destroy = lightning_destroy,
    .segment = lightning_segment,
};

/* ---- Kimi Delta Attention ------------------------------------------------------------------------ */

struct kda {
    struct mc_kda_config cfg;
    int64_t D, H, d, K, inner, C;
    float *w_q, *w_k, *w_v, *w_conv, *w_fa, *w_fb, *dt_bias, *a_log, *w_b, *w_ga, *w_gb, *w_norm, *w_out;
};

static void kda_destroy(void *impl)
{
    struct kda *m = impl;
    if (m == NULL)
        return;
    float *all[] = {m->w_q, m->w_k, m->w_v, m->w_conv, m->w_fa, m->w_fb, m->dt_bias,
                    m->a_log, m->w_b, m->w_ga, m->w_gb, m->w_norm, m->w_out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    free(m);
}

static enum mc_backend_status kda_create(const struct mc_model_desc *d, struct mc_model *model, struct mc_msg *msg)
{
    const struct mc_kda_config *c = d->config;
    if (c->hidden_size < 1 || c->num_heads < 1 || c->head_dim < 1 || c->conv_kernel < 1)
        return mut_fail(msg, MC_BACKEND_INVALID, "mutant kda: inconsistent configuration");
    struct kda *m = calloc(1, sizeof *m);
    if (m == NULL)
        return mut_fail(msg, MC_BACKEND_NOMEM, "mutant kda: out of memory");
    model->impl = m;
    m->cfg = *c;
    m->D = c->hidden_size;
    m->H = c->num_heads;
    m->d = c->head_dim;
    m->K = c->conv_kernel;
    m->inner = m->H * m->d;
    m->C = 3 * m->inner;
    const int64_t D = m->D, dd = m->d, inner = m->inner;
    int miss;
    m->w_q = mut_weight(d, "q_proj.weight", inner * D, &miss, msg);
    m->w_k = mut_weight(d, "k_proj.weight", inner * D, &miss, msg);
    m->w_v = mut_weight(d, "v_proj.weight", inner * D, &miss, msg);
    m->w_conv = mut_weight(d, "conv1d.weight", m->C * m->K, &miss, msg);
    m->w_fa = mut_weight(d, "forget_gate.f_a_proj.weight", dd * D, &miss, msg);
    m->w_fb = mut_weight(d, "forget_gate.f_b_proj.weight", inner * dd, &miss, msg);
    m->dt_bias = mut_weight(d, "forget_gate.dt_bias", inner, &miss, msg);
    m->a_log = mut_weight(d, "forget_gate.A_log", m->H, &miss, msg);
    m->w_b = mut_weight(d, "b_proj.weight", m->H * D, &miss, msg);
    m->w_ga = mut_weight(d, "g_a_proj.weight", dd * D, &miss, msg);
    m->w_gb = mut_weight(d, "g_b_proj.weight", inner * dd, &miss, msg);
    m->w_norm = mut_weight(d, "o_norm.weight", dd, &miss, msg);
    m->w_out = mut_weight(d, "o_proj.weight", D * inner, &miss, msg);
    if (!m->w_q || !m->w_k || !m->w_v || !m->w_conv || !m->w_fa || !m->w_fb || !m->dt_bias || !m->a_log || !m->w_b ||
        !m->w_ga || !m->w_gb || !m->w_norm || !m->w_out)
        return MC_BACKEND_INVALID;
    model->D = D;
    model->win_elems = m->C * m->K;
    model->state_elems = m->H * dd * dd;
    model->chunk = c->chunk_size > 0 ? c->chunk_size : 64;
    return MC_BACKEND_OK;
}

static enum mc_backend_status kda_segment(const struct mc_model *model, float *win, float *st, const float *x,
                                          const uint8_t *mask, int64_t L, float *y, const struct mut_seg *seg,
                                          struct mc_msg *msg)
{
    (void)seg;
    const struct kda *m = model->impl;
    const int64_t D = m->D, H = m->H, d = m->d, K = m->K, inner = m->inner, C = m->C;
    enum mc_backend_status rc = MC_BACKEND_OK;
    float *pre = malloc((size_t)(L * C) * sizeof *pre);     /* [L][C] q | k | v before the conv */
    float *qkv = malloc((size_t)(L * C) * sizeof *qkv);     /* [L][C] after conv + SiLU */
    float *low = malloc((size_t)(L * 2 * d) * sizeof *low); /* [L][2d] f_a | g_a */
    float *f = malloc((size_t)(L * inner) * sizeof *f);     /* [L][inner] */
    float *gate = malloc((size_t)(L * inner) * sizeof *gate);
    float *braw = malloc((size_t)(L * H) * sizeof *braw);
    float *o = calloc((size_t)(L * inner), sizeof *o);
    float *tmp = malloc((size_t)(4 * d) * sizeof *tmp);     /* q̂ | k̂ | δ | e^g of one token and head */
    float *part = malloc((size_t)(L * inner) * sizeof *part); /* [L][inner] one of q, k, v */
    if (!pre || !qkv || !low || !f || !gate || !braw || !o || !tmp || !part) {
        rc = mut_fail(msg, MC_BACKEND_NOMEM, "mutant kda: out of memory for L=%lld", (long long)L);
        goto out;
    }
    const float *wqkv[3] = {m->w_q, m->w_k, m->w_v};
    for (int p = 0; p < 3; p++) {
        mut_linear(x, L, D, wqkv[p], NULL, inner, part);
        for (int64_t t = 0; t < L; t++)
            memcpy(pre + t * C + p * inner, part + t * inner, (size_t)inner * sizeof *pre);
    }
    mut_linear(x, L, D, m->w_fa, NULL, d, low);
    mut_linear(x, L, D, m->w_ga, NULL, d, low + L * d);
    mut_linear(low, L, d, m->w_fb, m->dt_bias, inner, f);
    mut_linear(low + L * d, L, d, m->w_gb, NULL, inner, gate);
    mut_linear(x, L, D, m->w_b, NULL, H, braw);
    /* conv + SiLU, token by token over the window [C][K] (real tokens only) */
    for (int64_t t = 0; t < L; t++) {
        if (mask != NULL && !mask[t])
            continue;
        for (int64_t c = 0; c < C; c++) {
            float *w = win + c * K;
            memmove(w, w + 1, (size_t)(K - 1) * sizeof *w);
            w[K - 1] = pre[t * C + c];
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++)
                acc += m->w_conv[c * K + k] * w[k];
            qkv[t * C + c] = mut_silu(acc);
        }
    }
    const float q_scale = 1.0f / sqrtf((float)d);
    float *qh = tmp, *kh = tmp + d, *dl = tmp + 2 * d, *eg = tmp + 3 * d;
    for (int64_t h = 0; h < H; h++) {
        float *S = st + h * d * d;
        const float a_neg = -expf(m->a_log[h]);
        for (int64_t t = 0; t < L; t++) {
            if (mask != NULL && !mask[t])
                continue;
            const float *q = qkv + t * C + h * d, *k = q + inner, *v = q + 2 * inner;
            float qq = 0.0f, kk = 0.0f;
            for (int64_t c = 0; c < d; c++) {
                qq += q[c] * q[c];
                kk += k[c] * k[c];
            }
            const float qi = q_scale / sqrtf(qq + 1e-6f), ki = 1.0f / sqrtf(kk + 1e-6f);
            for (int64_t c = 0; c < d; c++) {
                qh[c] = q[c] * qi;
                kh[c] = k[c] * ki;
                /* the per-head fault: every channel takes the head's first channel's g */
                const int64_t src = model->fault == MUT_GATE_PER_HEAD ? 0 : c;
                eg[c] = expf(a_neg * mut_softplus(f[t * inner + h * d + src]));
            }
            const float beta = 1.0f / (1.0f + expf(-braw[t * H + h]));
            for (int64_t j = 0; j < d; j++)
                dl[j] = 0.0f;
            for (int64_t r = 0; r < d; r++)
                for (int64_t j = 0; j < d; j++) {
                    S[r * d + j] *= eg[r];
                    dl[j] += S[r * d + j] * kh[r];
                }
            for (int64_t j = 0; j < d; j++)
                dl[j] = (v[j] - dl[j]) * beta;
            float *oh = o + t * inner + h * d;
            for (int64_t r = 0; r < d; r++)
                for (int64_t j = 0; j < d; j++) {
                    S[r * d + j] += kh[r] * dl[j];
                    oh[j] += S[r * d + j] * qh[r];
                }
            /* per-head RMSNorm, o_norm.weight, sigmoid gate */
            float ss = 0.0f;
            for (int64_t j = 0; j < d; j++)
                ss += oh[j] * oh[j];
            const float rstd = 1.0f / sqrtf(ss / (float)d + (float)m->cfg.rms_norm_eps);
            for (int64_t j = 0; j < d; j++)
                oh[j] = m->w_norm[j] * oh[j] * rstd / (1.0f + expf(-gate[t * inner + h * d + j]));
        }
    }
    mut_linear(o, L, inner, m->w_out, NULL, D, y);
    if (mask != NULL)
        for (int64_t t = 0; t < L; t++)
            if (!mask[t])
                memset(y + t * D, 0, (size_t)D * sizeof *y);
out:
    free(pre);
    free(qkv);
    free(low);
    free(f);
    free(gate);
    free(braw);
    free(o);
    free(tmp);
    free(part);
    return rc;
}

const struct mut_family mut_kda_family = {
    .family = MC_FAMILY_KDA,
    .create = kda_create,
    .destroy = kda_destroy,
    .segment = kda_segment,
};
