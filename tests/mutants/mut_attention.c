/*
 * mut_attention.c — a plain f32 softmax attention layer with a KV cache (docs/semantics.md §12,
 * mixcheck's semantics of §A) for the mutant library. With MUT_NONE it computes what
 * reference/attention.c computes: the window [1][1] holds the cached-position count n, the state
 * [2Hkv][Lmax][hd] the keys (after the k norm and RoPE) and values; a masked token is skipped and its
 * output row is o_proj.bias. Faults that live in the math:
 *   MUT_ROPE_PAD_POSITIONS  RoPE at the token's index in the padded sequence (cache_position), not at
 *                           the number of real tokens before it: what position_ids = arange gives
 *                           when the mask is not turned into positions
 *   MUT_ROTARY_ALL_DIMS     partial rotary ignored: all hd dims rotated, frequencies over hd
 *   MUT_NOPE_ROTATED        no_rope ignored: a model without positional embedding (GraniteMoeHybrid "nope")
 *                           rotated as a Llama attention would be, at the config's factor and theta
 *   MUT_SCALE_DEFAULT       softmax_scale ignored: 1/sqrt(hd) where GraniteMoeHybrid's attention_multiplier
 *                           sets the score scale
 *   MUT_HEAD_MOD            query head h reads kv head h mod Hkv instead of h / (Hq/Hkv)
 *   MUT_MASK_CONTINUED      (8.4) the mask dropped on a multi-token forward from a primed cache: its
 *                           pads are cached, counted and attended as real tokens
 * MLA (kv_lora_rank > 0, §12.8; at_mla_segment, the expanded form upstream runs): the state [1][Lmax][c + dr]
 * holds per position the normed latent and the rotated rope key. Its faults:
 *   MUT_MLA_ROPE_ON_NOPE    the query's rotation applied to its first dr dims (the nope part) instead of the
 *                           rope part: what a port that rotates "the first R dims" as the plain family does gets
 *   MUT_MLA_NORM_SKIPPED    kv_a_layernorm skipped: the raw latent cached and expanded
 *   MUT_MLA_KV_SWAPPED      kv_b_proj's per-head rows split as value | key instead of key | value
 *   MUT_MLA_SCALE_NOPE      scores scaled by 1/sqrt(qk_nope_head_dim) instead of 1/sqrt(nope + rope)
 *
 * Dimension letters: L tokens, D hidden, Hq query heads, Hkv kv heads, hd head dim, R rotary dims,
 * Lmax cache length.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mutants.h"

struct at {
    struct mc_attention_config c;
    int64_t D, Hq, Hkv, hd, Lmax, R, qrows;
    float *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo, *qn, *kn; /* biases and norms NULL when absent */
    float *wqa, *bqa, *nqa, *wqb, *wkva, *bkva, *nkva, *wkvb;  /* MLA */
};

static void at_destroy(void *impl)
{
    struct at *m = impl;
    if (m == NULL)
        return;
    float *all[] = {m->wq, m->bq, m->wk, m->bk, m->wv, m->bv, m->wo, m->bo, m->qn, m->kn,
                    m->wqa, m->bqa, m->nqa, m->wqb, m->wkva, m->bkva, m->nkva, m->wkvb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    free(m);
}

static enum mc_backend_status at_create(const struct mc_model_desc *d, struct mc_model *model, struct mc_msg *msg)
{
    const struct mc_attention_config *c = d->config;
    if (c->hidden_size < 1 || c->num_key_value_heads < 1 || c->num_attention_heads % c->num_key_value_heads != 0 ||
        c->head_dim < 2 || c->cache_length < 1)
        return mut_fail(msg, MC_BACKEND_INVALID, "mutant attention: inconsistent configuration");
    if (c->sconv_kernel || c->rel_dim || c->sliding_window)
        return mut_fail(msg, MC_BACKEND_UNSUPPORTED,
                        "mutant attention: Inkling's options (sconv_kernel, rel_dim, sliding_window) are not planted");
    struct at *m = calloc(1, sizeof *m);
    if (m == NULL)
        return mut_fail(msg, MC_BACKEND_NOMEM, "mutant attention: out of memory");
    model->impl = m;
    m->c = *c;
    m->D = c->hidden_size;
    m->Hq = c->num_attention_heads;
    m->Hkv = c->num_key_value_heads;
    m->hd = c->head_dim;
    m->Lmax = c->cache_length;
    m->R = c->no_rope && model->fault != MUT_NOPE_ROTATED ? 0 : (int64_t)((double)m->hd * c->partial_rotary_factor);
    m->qrows = (c->attn_output_gate ? 2 : 1) * m->Hq * m->hd;
    const int64_t D = m->D, qd = m->Hq * m->hd, kvd = m->Hkv * m->hd;
    int miss;
    if (c->kv_lora_rank > 0) { /* MLA */
        const int64_t kr = c->kv_lora_rank, dr = c->qk_rope_head_dim, dv = c->v_head_dim, qr = c->q_lora_rank;
        if (dr < 1 || dr >= m->hd || dv < 1 || c->num_key_value_heads != c->num_attention_heads)
            return mut_fail(msg, MC_BACKEND_INVALID, "mutant attention: inconsistent MLA configuration");
        m->R = c->no_rope ? 0 : dr;
        int ok = 1;
        if (qr > 0) {
            ok = (m->wqa = mut_weight(d, "q_a_proj.weight", qr * D, &miss, msg)) &&
                 (m->nqa = mut_weight(d, "q_a_layernorm.weight", qr, &miss, msg)) &&
                 (m->wqb = mut_weight(d, "q_b_proj.weight", qd * qr, &miss, msg)) &&
                 (!c->attention_bias || (m->bqa = mut_weight(d, "q_a_proj.bias", qr, &miss, msg)));
        } else {
            ok = (m->wq = mut_weight(d, "q_proj.weight", qd * D, &miss, msg)) != NULL;
        }
        ok = ok && (m->wkva = mut_weight(d, "kv_a_proj_with_mqa.weight", (kr + dr) * D, &miss, msg)) &&
             (m->nkva = mut_weight(d, "kv_a_layernorm.weight", kr, &miss, msg)) &&
             (m->wkvb = mut_weight(d, "kv_b_proj.weight", m->Hq * (m->hd - dr + dv) * kr, &miss, msg)) &&
             (m->wo = mut_weight(d, "o_proj.weight", D * m->Hq * dv, &miss, msg)) &&
             (!c->attention_bias || ((m->bkva = mut_weight(d, "kv_a_proj_with_mqa.bias", kr + dr, &miss, msg)) &&
                                     (m->bo = mut_weight(d, "o_proj.bias", D, &miss, msg))));
        if (!ok)
            return MC_BACKEND_INVALID;
        model->D = D;
        model->win_elems = 1;
        model->state_elems = m->Lmax * (kr + dr);
        model->chunk = 0;
        return MC_BACKEND_OK;
    }
    m->wq = mut_weight(d, "q_proj.weight", m->qrows * D, &miss, msg);
    m->wk = mut_weight(d, "k_proj.weight", kvd * D, &miss, msg);
    m->wv = mut_weight(d, "v_proj.weight", kvd * D, &miss, msg);
    m->wo = mut_weight(d, "o_proj.weight", D * qd, &miss, msg);
    int ok = m->wq && m->wk && m->wv && m->wo;
    if (ok && c->attention_bias) {
        m->bq = mut_weight(d, "q_proj.bias", m->qrows, &miss, msg);
        m->bk = mut_weight(d, "k_proj.bias", kvd, &miss, msg);
        m->bv = mut_weight(d, "v_proj.bias", kvd, &miss, msg);
        m->bo = mut_weight(d, "o_proj.bias", D, &miss, msg);
        ok = m->bq && m->bk && m->bv && m->bo;
    }
    if (ok && c->qk_norm != MC_QK_NORM_NONE) {
        m->qn = mut_weight(d, "q_norm.weight", m->hd, &miss, msg);
        m->kn = mut_weight(d, "k_norm.weight", m->hd, &miss, msg);
        ok = m->qn && m->kn;
    }
    if (!ok)
        return MC_BACKEND_INVALID;
    model->D = D;
    model->win_elems = 1;
    model->state_elems = 2 * kvd * m->Lmax;
    model->chunk = 0;
    return MC_BACKEND_OK;
}

static void at_norm(const struct at *m, float *v, const float *w)
{
    if (m->c.qk_norm == MC_QK_NORM_NONE)
        return;
    float ss = 0.0f;
    for (int64_t i = 0; i < m->hd; i++)
        ss += v[i] * v[i];
    const float inv = 1.0f / sqrtf(ss / (float)m->hd + (float)m->c.rms_norm_eps);
    const float one = m->c.qk_norm == MC_QK_NORM_ZERO_CENTRED ? 1.0f : 0.0f;
    for (int64_t i = 0; i < m->hd; i++)
        v[i] = v[i] * inv * (one + w[i]);
}

static void at_rope(const struct at *m, enum mut_fault fault, float *v, double pos)
{
    const int64_t R = fault == MUT_ROTARY_ALL_DIMS ? m->hd : m->R, half = R / 2;
    for (int64_t i = 0; i < half; i++) {
        const double a = pos * pow(m->c.rope_theta, -(double)(2 * i) / (double)R);
        const float c = (float)cos(a), s = (float)sin(a), x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c - x2 * s;
        v[i + half] = x2 * c + x1 * s;
    }
}

static void at_rms(float *v, int64_t n, const float *w, double eps)
{
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++)
        ss += v[i] * v[i];
    const float inv = 1.0f / sqrtf(ss / (float)n + (float)eps);
    for (int64_t i = 0; i < n; i++)
        v[i] = v[i] * inv * w[i];
}

static enum mc_backend_status at_mla_segment(const struct mc_model *model, float *win, float *st, const float *x,
                                             const uint8_t *mask, int64_t L, float *y, struct mc_msg *msg)
{
    const struct at *m = model->impl;
    const enum mut_fault f = model->fault;
    const int64_t D = m->D, H = m->Hq, hd = m->hd, Lmax = m->Lmax, c = m->c.kv_lora_rank;
    const int64_t dr = m->c.qk_rope_head_dim, dn = hd - dr, dv = m->c.v_head_dim, qr = m->c.q_lora_rank;
    const int64_t lat = c + dr, ew = dn + dv, qd = H * hd;
    const float n0 = win[0];
    if (!(n0 >= 0.0f && n0 <= (float)Lmax) || n0 != floorf(n0))
        return mut_fail(msg, MC_BACKEND_INVALID, "mutant attention: bad cached-position count %g", (double)n0);
    int64_t n = (int64_t)n0, real = 0;
    for (int64_t t = 0; t < L; t++)
        real += mask == NULL || mask[t];
    if (n + real > Lmax)
        return mut_fail(msg, MC_BACKEND_INVALID, "mutant attention: cache full");
    float *qa = malloc((size_t)(L * (qr > 0 ? qr : 1)) * sizeof *qa), *q = malloc((size_t)(L * qd) * sizeof *q);
    float *kva = malloc((size_t)(L * lat) * sizeof *kva), *att = calloc((size_t)(L * H * dv), sizeof *att);
    float *ex = malloc((size_t)(Lmax * H * ew) * sizeof *ex), *p = malloc((size_t)Lmax * sizeof *p);
    float *qh = malloc((size_t)hd * sizeof *qh);
    enum mc_backend_status rc = MC_BACKEND_OK;
    if (!qa || !q || !kva || !att || !ex || !p || !qh) {
        rc = mut_fail(msg, MC_BACKEND_NOMEM, "mutant attention: out of memory for L=%lld", (long long)L);
        goto out;
    }
    if (qr > 0) {
        mut_linear(x, L, D, m->wqa, m->bqa, qr, qa);
        for (int64_t t = 0; t < L; t++)
            at_rms(qa + t * qr, qr, m->nqa, m->c.rms_norm_eps);
        mut_linear(qa, L, qr, m->wqb, NULL, qd, q);
    } else {
        mut_linear(x, L, D, m->wq, NULL, qd, q);
    }
    mut_linear(x, L, D, m->wkva, m->bkva, lat, kva);
    memset(st + n * lat, 0, (size_t)((Lmax - n) * lat) * sizeof *st);
    for (int64_t s = 0; s < n; s++)
        mut_linear(st + s * lat, 1, c, m->wkvb, NULL, H * ew, ex + s * H * ew);
    const float scale = m->c.softmax_scale > 0.0 ? (float)m->c.softmax_scale
                                                 : 1.0f / sqrtf((float)(f == MUT_MLA_SCALE_NOPE ? dn : hd));
    /* the per-head split of kv_b_proj's rows: key | value, or (the fault) value | key */
    const int64_t koff = f == MUT_MLA_KV_SWAPPED ? dv : 0, voff = f == MUT_MLA_KV_SWAPPED ? 0 : dn;
    for (int64_t t = 0; t < L; t++) {
        if (mask != NULL && !mask[t])
            continue;
        float *slot = st + n * lat;
        memcpy(slot, kva + t * lat, (size_t)lat * sizeof *slot);
        if (f != MUT_MLA_NORM_SKIPPED)
            at_rms(slot, c, m->nkva, m->c.rms_norm_eps);
        at_rope(m, MUT_NONE, slot + c, (double)n);
        mut_linear(slot, 1, c, m->wkvb, NULL, H * ew, ex + n * H * ew);
        for (int64_t h = 0; h < H; h++) {
            memcpy(qh, q + t * qd + h * hd, (size_t)hd * sizeof *qh);
            at_rope(m, MUT_NONE, f == MUT_MLA_ROPE_ON_NOPE ? qh : qh + dn, (double)n);
            float pmax = -INFINITY, psum = 0.0f;
            for (int64_t s = 0; s <= n; s++) {
                const float *e = ex + (s * H + h) * ew, *kr = st + s * lat + c;
                float dot = 0.0f;
                for (int64_t i = 0; i < dn; i++)
                    dot += qh[i] * e[koff + i];
                for (int64_t i = 0; i < dr; i++)
                    dot += qh[dn + i] * kr[i];
                p[s] = dot * scale;
                pmax = p[s] > pmax ? p[s] : pmax;
            }
            for (int64_t s = 0; s <= n; s++) {
                p[s] = expf(p[s] - pmax);
                psum += p[s];
            }
            float *o = att + (t * H + h) * dv;
            for (int64_t s = 0; s <= n; s++)
                for (int64_t i = 0; i < dv; i++)
                    o[i] += p[s] / psum * ex[(s * H + h) * ew + voff + i];
        }
        n++;
    }
    win[0] = (float)n;
    mut_linear(att, L, H * dv, m->wo, m->bo, D, y);
out:
    free(qh);
    free(p);
    free(ex);
    free(att);
    free(kva);
    free(q);
    free(qa);
    return rc;
}

static enum mc_backend_status at_segment(const struct mc_model *model, float *win, float *st, const float *x,
                                         const uint8_t *mask, int64_t L, float *y, const struct mut_seg *seg,
                                         struct mc_msg *msg)
{
    const struct at *m = model->impl;
    if (m->c.kv_lora_rank > 0)
        return at_mla_segment(model, win, st, x, model->fault == MUT_MASK_CONTINUED && seg->primed && L > 1 ? NULL : mask,
                              L, y, msg);
    const int64_t D = m->D, Hq = m->Hq, Hkv = m->Hkv, hd = m->hd, Lmax = m->Lmax, qrows = m->qrows;
    const int64_t qd = Hq * hd, kvd = Hkv * hd, r = Hq / Hkv;
    const int gated = m->c.attn_output_gate;
    if (model->fault == MUT_MASK_CONTINUED && seg->primed && L > 1)
        mask = NULL;
    const float n0 = win[0];
    if (!(n0 >= 0.0f && n0 <= (float)Lmax) || n0 != floorf(n0))
        return mut_fail(msg, MC_BACKEND_INVALID, "mutant attention: bad cached-position count %g", (double)n0);
    int64_t n = (int64_t)n0, real = 0;
    for (int64_t t = 0; t < L; t++)
        real += mask == NULL || mask[t];
    if (n + real > Lmax)
        return mut_fail(msg, MC_BACKEND_INVALID, "mutant attention: cache full");
    float *qg = malloc((size_t)(L * qrows) * sizeof *qg), *k = malloc((size_t)(L * kvd) * sizeof *k);
    float *v = malloc((size_t)(L * kvd) * sizeof *v), *att = calloc((size_t)(L * qd), sizeof *att);
    float *p = malloc((size_t)Lmax * sizeof *p), *q = malloc((size_t)hd * sizeof *q);
    enum mc_backend_status rc = MC_BACKEND_OK;
    if (!qg || !k || !v || !att || !p || !q) {
        rc = mut_fail(msg, MC_BACKEND_NOMEM, "mutant attention: out of memory for L=%lld", (long long)L);
        goto out;
    }
    mut_linear(x, L, D, m->wq, m->bq, qrows, qg);
    mut_linear(x, L, D, m->wk, m->bk, kvd, k);
    mut_linear(x, L, D, m->wv, m->bv, kvd, v);
    float *keys = st, *vals = st + kvd * Lmax; /* [Hkv][Lmax][hd] each */
    for (int64_t j = 0; j < Hkv; j++) {
        memset(keys + (j * Lmax + n) * hd, 0, (size_t)((Lmax - n) * hd) * sizeof *keys);
        memset(vals + (j * Lmax + n) * hd, 0, (size_t)((Lmax - n) * hd) * sizeof *vals);
    }
    for (int64_t t = 0; t < L; t++) {
        if (mask != NULL && !mask[t])
            continue;
        /* the position RoPE uses: the real tokens before this one, or (8.x) its padded index */
        const double pos = model->fault == MUT_ROPE_PAD_POSITIONS ? (double)(seg->pos + t) : (double)n;
        for (int64_t j = 0; j < Hkv; j++) {
            float *ks = keys + (j * Lmax + n) * hd;
            memcpy(ks, k + t * kvd + j * hd, (size_t)hd * sizeof *ks);
            at_norm(m, ks, m->kn);
            at_rope(m, model->fault, ks, pos);
            memcpy(vals + (j * Lmax + n) * hd, v + t * kvd + j * hd, (size_t)hd * sizeof *vals);
        }
        for (int64_t h = 0; h < Hq; h++) {
            const float *src = qg + t * qrows + h * (gated ? 2 * hd : hd);
            const int64_t j = model->fault == MUT_HEAD_MOD ? h % Hkv : h / r;
            memcpy(q, src, (size_t)hd * sizeof *q);
            at_norm(m, q, m->qn);
            at_rope(m, model->fault, q, pos);
            float pmax = -INFINITY, psum = 0.0f;
            for (int64_t s = 0; s <= n; s++) {
                float dot = 0.0f;
                for (int64_t i = 0; i < hd; i++)
                    dot += q[i] * keys[(j * Lmax + s) * hd + i];
                p[s] = m->c.softmax_scale > 0.0 && model->fault != MUT_SCALE_DEFAULT ? dot * (float)m->c.softmax_scale
                                                                                    : dot / sqrtf((float)hd);
                pmax = p[s] > pmax ? p[s] : pmax;
            }
            for (int64_t s = 0; s <= n; s++) {
                p[s] = expf(p[s] - pmax);
                psum += p[s];
            }
            float *o = att + t * qd + h * hd;
            for (int64_t s = 0; s <= n; s++)
                for (int64_t i = 0; i < hd; i++)
                    o[i] += p[s] / psum * vals[(j * Lmax + s) * hd + i];
            if (gated)
                for (int64_t i = 0; i < hd; i++)
                    o[i] *= 1.0f / (1.0f + expf(-src[hd + i]));
        }
        n++;
    }
    win[0] = (float)n;
    mut_linear(att, L, qd, m->wo, m->bo, D, y);
out:
    free(q);
    free(p);
    free(att);
    free(v);
    free(k);
    free(qg);
    return rc;
}

const struct mut_family mut_attention_family = {
    .family = MC_FAMILY_ATTENTION,
    .create = at_create,
    .destroy = at_destroy,
    .segment = at_segment,
};
