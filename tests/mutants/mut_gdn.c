/*
 * mut_gdn.c — a plain f32 Gated DeltaNet mixer (docs/semantics.md §4, both weight layouts, recurrent form,
 * mixcheck's semantics of §A) for the mutant library, with the faults that live inside its math:
 *   8.12 the chunked form's last chunk padded at the pre-conv input instead of at the core's inputs,
 *        so pad rows get k from a conv window that still holds real tokens, β = σ(0) and g ≠ 0, and
 *        write into the state (the single-token decode path has no chunks and stays right);
 *   8.13 value head h reads key head h mod Hk instead of h / r.
 * The cache-level faults (8.2a, 8.2b) are applied by the driver in mutants.c. With MUT_NONE it
 * computes what reference/gdn.c computes; a masked token is skipped and its output row is zero.
 *
 * Dimension letters: L tokens, D hidden, Hk key heads, Hv value heads, r = Hv/Hk, dk, dv head dims,
 * K conv width, C = 2*Hk*dk + Hv*dv conv channels, proj = C + Hv*dv + 2*Hv rows (q|k|v|z|b|a).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mutants.h"

struct gdn {
    struct mc_gdn_config cfg;
    int64_t D, Hk, Hv, dk, dv, K, r, kd, vd, C, proj;
    float *w_proj; /* [proj][D] in the order q | k | v | z | b | a */
    float *w_conv; /* [C][K] */
    float *dt_bias, *a_log; /* [Hv] each */
    float *w_norm; /* [dv] */
    float *w_out;  /* [D][Hv*dv] */
};

static void gdn_destroy(void *impl)
{
    struct gdn *m = impl;
    if (m == NULL)
        return;
    free(m->w_proj);
    free(m->w_conv);
    free(m->dt_bias);
    free(m->a_log);
    free(m->w_norm);
    free(m->w_out);
    free(m);
}

/* Copies `rows` rows of D floats from src row s0 to dst row d0. */
static void rows_copy(float *dst, int64_t d0, const float *src, int64_t s0, int64_t rows, int64_t D)
{
    memcpy(dst + d0 * D, src + s0 * D, (size_t)(rows * D) * sizeof *dst);
}

/* Builds the combined projection from either layout (§4.3); returns 0 or -1 (message set). */
static int gdn_proj(struct gdn *m, const struct mc_model_desc *d, struct mc_msg *msg)
{
    const int64_t D = m->D, C = m->C, vd = m->vd, Hv = m->Hv;
    int miss, rc = -1;
    m->w_proj = malloc((size_t)(m->proj * D) * sizeof *m->w_proj);
    if (m->w_proj == NULL) {
        mut_fail(msg, MC_BACKEND_NOMEM, "mutant gdn: out of memory");
        return -1;
    }
    if (m->cfg.layout == MC_GDN_LAYOUT_QWEN3_5) {
        float *qkv = mut_weight(d, "in_proj_qkv.weight", C * D, &miss, msg);
        float *z = mut_weight(d, "in_proj_z.weight", vd * D, &miss, msg);
        float *b = mut_weight(d, "in_proj_b.weight", Hv * D, &miss, msg);
        float *a = mut_weight(d, "in_proj_a.weight", Hv * D, &miss, msg);
        if (qkv && z && b && a) {
            rows_copy(m->w_proj, 0, qkv, 0, C, D);
            rows_copy(m->w_proj, C, z, 0, vd, D);
            rows_copy(m->w_proj, C + vd, b, 0, Hv, D);
            rows_copy(m->w_proj, C + vd + Hv, a, 0, Hv, D);
            rc = 0;
        }
        free(qkv);
        free(z);
        free(b);
        free(a);
        return rc;
    }
    /* Qwen3-Next: per key head j, qkvz rows [q_j | k_j | v_j (r*dv) | z_j (r*dv)], ba rows [b_j | a_j]. */
    const int64_t dk = m->dk, r = m->r, rdv = r * m->dv, kd = m->kd, blk = 2 * dk + 2 * rdv;
    float *qkvz = mut_weight(d, "in_proj_qkvz.weight", m->Hk * blk * D, &miss, msg);
    float *ba = mut_weight(d, "in_proj_ba.weight", m->Hk * 2 * r * D, &miss, msg);
    if (qkvz && ba) {
        for (int64_t j = 0; j < m->Hk; j++) {
            rows_copy(m->w_proj, j * dk, qkvz, j * blk, dk, D);
            rows_copy(m->w_proj, kd + j * dk, qkvz, j * blk + dk, dk, D);
            rows_copy(m->w_proj, 2 * kd + j * rdv, qkvz, j * blk + 2 * dk, rdv, D);
            rows_copy(m->w_proj, C + j * rdv, qkvz, j * blk + 2 * dk + rdv, rdv, D);
            rows_copy(m->w_proj, C + vd + j * r, ba, j * 2 * r, r, D);
            rows_copy(m->w_proj, C + vd + Hv + j * r, ba, j * 2 * r + r, r, D);
        }
        rc = 0;
    }
    free(qkvz);
    free(ba);
    return rc;
}

static enum mc_backend_status gdn_create(const struct mc_model_desc *d, struct mc_model *model, struct mc_msg *msg)
{
    const struct mc_gdn_config *c = d->config;
    if (c->hidden_size < 1 || c->num_key_heads < 1 || c->num_value_heads < 1 || c->key_head_dim < 1 ||
        c->value_head_dim < 1 || c->conv_kernel < 1 || c->num_value_heads % c->num_key_heads != 0 ||
        (c->layout != MC_GDN_LAYOUT_QWEN3_5 && c->layout != MC_GDN_LAYOUT_QWEN3_NEXT))
        return mut_fail(msg, MC_BACKEND_INVALID, "mutant gdn: inconsistent configuration");
    struct gdn *m = calloc(1, sizeof *m);
    if (m == NULL)
        return mut_fail(msg, MC_BACKEND_NOMEM, "mutant gdn: out of memory");
    model->impl = m;
    m->cfg = *c;
    m->D = c->hidden_size;
    m->Hk = c->num_key_heads;
    m->Hv = c->num_value_heads;
    m->dk = c->key_head_dim;
    m->dv = c->value_head_dim;
    m->K = c->conv_kernel;
    m->r = m->Hv / m->Hk;
    m->kd = m->Hk * m->dk;
    m->vd = m->Hv * m->dv;
    m->C = 2 * m->kd + m->vd;
    m->proj = m->C + m->vd + 2 * m->Hv;
    int miss;
    if (gdn_proj(m, d, msg) != 0)
        return MC_BACKEND_INVALID;
    m->w_conv = mut_weight(d, "conv1d.weight", m->C * m->K, &miss, msg);
    m->dt_bias = mut_weight(d, "dt_bias", m->Hv, &miss, msg);
    m->a_log = mut_weight(d, "A_log", m->Hv, &miss, msg);
    m->w_norm = mut_weight(d, "norm.weight", m->dv, &miss, msg);
    m->w_out = mut_weight(d, "out_proj.weight", m->D * m->vd, &miss, msg);
    if (!m->w_conv || !m->dt_bias || !m->a_log || !m->w_norm || !m->w_out)
        return MC_BACKEND_INVALID;
    model->D = m->D;
    model->win_elems = m->C * m->K;
    model->state_elems = m->Hv * m->dk * m->dv;
    model->chunk = c->chunk_size > 0 ? c->chunk_size : 64;
    return MC_BACKEND_OK;
}

static enum mc_backend_status gdn_segment(const struct mc_model *model, float *win, float *st, const float *x,
                                          const uint8_t *mask, int64_t L, float *y, const struct mut_seg *seg,
                                          struct mc_msg *msg)
{
    const struct gdn *m = model->impl;
    const enum mut_fault f = model->fault;
    const int64_t D = m->D, Hk = m->Hk, Hv = m->Hv, dk = m->dk, dv = m->dv, K = m->K, kd = m->kd, vd = m->vd,
                  C = m->C, proj = m->proj;
    const int decode = seg->primed && L == 1;
    const int64_t Q = model->chunk;
    const int64_t pads = (f == MUT_CHUNK_PAD && !decode) ? (Q - L % Q) % Q : 0;
    const float q_scale = 1.0f / sqrtf((float)dk);
    enum mc_backend_status rc = MC_BACKEND_OK;

    float *pj = malloc((size_t)(L * proj) * sizeof *pj);              /* [L][proj] */
    float *ext = malloc((size_t)(C * (K + L + pads)) * sizeof *ext);  /* [C][K+n+pads] */
    float *qkv = malloc((size_t)((L + pads) * C) * sizeof *qkv);      /* [n+pads][C] after conv + SiLU */
    float *hs = calloc((size_t)(L * vd), sizeof *hs);                 /* [L][Hv][dv] */
    float *qk = malloc((size_t)(2 * dk + dv) * sizeof *qk);           /* q̂ | k̂ | δ of one token and head */
    int64_t *idx = malloc((size_t)L * sizeof *idx);
    if (!pj || !ext || !qkv || !hs || !qk || !idx) {
        rc = mut_fail(msg, MC_BACKEND_NOMEM, "mutant gdn: out of memory for L=%lld", (long long)L);
        goto out;
    }
    mut_linear(x, L, D, m->w_proj, NULL, proj, pj);
    int64_t n = 0;
    for (int64_t t = 0; t < L; t++)
        if (mask == NULL || mask[t])
            idx[n++] = t;

    /* Conv + SiLU over cat(window, real tokens, pads of zero pre-conv input). */
    const int64_t E = K + n + pads;
    for (int64_t c = 0; c < C; c++) {
        float *e = ext + c * E;
        memcpy(e, win + c * K, (size_t)K * sizeof *e);
        for (int64_t i = 0; i < n; i++)
            e[K + i] = pj[idx[i] * proj + c];
        for (int64_t i = n; i < n + pads; i++)
            e[K + i] = 0.0f;
        const float *wc = m->w_conv + c * K;
        for (int64_t i = 0; i < n + pads; i++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++)
                acc += wc[k] * e[i + 1 + k];
            qkv[i * C + c] = mut_silu(acc);
        }
        memcpy(win + c * K, e + n, (size_t)K * sizeof *win); /* the last K real pre-conv inputs */
    }

    /* Gated delta rule, recurrent form (§4.4); value head h reads key head h / r. */
    float *qh = qk, *kh = qk + dk, *dl = qk + 2 * dk;
    for (int64_t h = 0; h < Hv; h++) {
        const int64_t hk = f == MUT_HEAD_MOD ? h % Hk : h / m->r;
        const float a_neg = -expf(m->a_log[h]);
        float *s = st + h * dk * dv; /* [dk][dv] */
        for (int64_t i = 0; i < n + pads; i++) {
            const float *row = qkv + i * C;
            const float *q = row + hk * dk, *k = row + kd + hk * dk, *v = row + 2 * kd + h * dv;
            /* a pad's projections are zero: b = a = 0 */
            const float braw = i < n ? pj[idx[i] * proj + C + vd + h] : 0.0f;
            const float araw = i < n ? pj[idx[i] * proj + C + vd + Hv + h] : 0.0f;
            const float beta = 1.0f / (1.0f + expf(-braw));
            const float decay = expf(a_neg * mut_softplus(araw + m->dt_bias[h]));
            float qq = 0.0f, kk = 0.0f;
            for (int64_t j = 0; j < dk; j++) {
                qq += q[j] * q[j];
                kk += k[j] * k[j];
            }
            const float qi = 1.0f / sqrtf(qq + 1e-6f), ki = 1.0f / sqrtf(kk + 1e-6f);
            for (int64_t j = 0; j < dk; j++) {
                qh[j] = q[j] * qi * q_scale;
                kh[j] = k[j] * ki;
            }
            for (int64_t j = 0; j < dv; j++)
                dl[j] = 0.0f;
            for (int64_t a = 0; a < dk; a++)
                for (int64_t j = 0; j < dv; j++) {
                    s[a * dv + j] *= decay;
                    dl[j] += s[a * dv + j] * kh[a];
                }
            for (int64_t j = 0; j < dv; j++)
                dl[j] = (v[j] - dl[j]) * beta;
            float *o = i < n ? hs + idx[i] * vd + h * dv : NULL;
            for (int64_t a = 0; a < dk; a++)
                for (int64_t j = 0; j < dv; j++) {
                    s[a * dv + j] += kh[a] * dl[j];
                    if (o != NULL)
                        o[j] += s[a * dv + j] * qh[a];
                }
        }
    }

    /* Gated RMSNorm per head over dv, norm before gate (§4.3 step 7). */
    const float eps = (float)m->cfg.rms_norm_eps;
    for (int64_t i = 0; i < n; i++) {
        const int64_t t = idx[i];
        for (int64_t h = 0; h < Hv; h++) {
            float *o = hs + t * vd + h * dv;
            const float *z = pj + t * proj + C + h * dv;
            float ss = 0.0f;
            for (int64_t j = 0; j < dv; j++)
                ss += o[j] * o[j];
            const float rstd = 1.0f / sqrtf(ss / (float)dv + eps);
            for (int64_t j = 0; j < dv; j++)
                o[j] = m->w_norm[j] * (o[j] * rstd) * mut_silu(z[j]);
        }
    }
    mut_linear(hs, L, vd, m->w_out, NULL, D, y);
    if (mask != NULL)
        for (int64_t t = 0; t < L; t++)
            if (!mask[t])
                memset(y + t * D, 0, (size_t)D * sizeof *y);
out:
    free(pj);
    free(ext);
    free(qkv);
    free(hs);
    free(qk);
    free(idx);
    return rc;
}

const struct mut_family mut_gdn_family = {
    .family = MC_FAMILY_GDN,
    .create = gdn_create,
    .destroy = gdn_destroy,
    .segment = gdn_segment,
};
