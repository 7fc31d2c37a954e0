/*
 * mut_mamba2.c — a plain f32 Mamba2 mixer (docs/semantics.md §2, mixcheck's semantics of §A) for the mutant
 * library, with the faults that live inside its math switched by mc_model.fault:
 *   8.1a dt of the first token, 8.3 conv slicing (first L, off by one, post-activation cache),
 *   8.4 / 8.6 / 8.5 masking, 8.10 decode without the dt clamp, 8.11 norm group swap, 8.12
 *   non-neutral chunk padding, 8.13 h mod G, the right-padded (future-leaking) conv, and the
 *   unfused bf16 conv activation (not a bug).
 * With MUT_NONE it computes what reference/mamba2.c computes: one routine over (window, state,
 * segment), the exact sequential recurrence, a masked token skipped (its output row out_proj.bias).
 *
 * Dimension letters: L tokens, D hidden, H heads, P head dim, N state, G groups, K conv width,
 * I = H*P, C = I + 2*G*N conv channels, proj = 2*I + 2*G*N + H in_proj rows, n processed tokens.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mutants.h"

struct m2 {
    struct mc_mamba2_config cfg;
    int64_t D, H, P, N, G, K, I, GN, C, proj, R;
    float *w_in;   /* [proj][D] */
    float *b_in;   /* [proj] or NULL */
    float *w_conv; /* [C][K] */
    float *b_conv; /* [C] or NULL */
    float *dt_bias, *a_log, *d_skip; /* [H] each */
    float *w_norm; /* [I] */
    float *w_out;  /* [D][I] */
    float *b_out;  /* [D] or NULL */
};

static void m2_destroy(void *impl)
{
    struct m2 *m = impl;
    if (m == NULL)
        return;
    free(m->w_in);
    free(m->b_in);
    free(m->w_conv);
    free(m->b_conv);
    free(m->dt_bias);
    free(m->a_log);
    free(m->d_skip);
    free(m->w_norm);
    free(m->w_out);
    free(m->b_out);
    free(m);
}

static enum mc_backend_status m2_create(const struct mc_model_desc *d, struct mc_model *model, struct mc_msg *msg)
{
    const struct mc_mamba2_config *c = d->config;
    if (c->hidden_size < 1 || c->num_heads < 1 || c->head_dim < 1 || c->state_size < 1 || c->n_groups < 1 ||
        c->conv_kernel < 1 || c->num_heads % c->n_groups != 0 || c->norm_group_size < 1 ||
        (c->num_heads * c->head_dim) % c->norm_group_size != 0)
        return mut_fail(msg, MC_BACKEND_INVALID, "mutant mamba2: inconsistent configuration");
    if (c->no_gated_norm || c->norm_before_gate) /* their mutants are m2norm_mutant.c's */
        return mut_fail(msg, MC_BACKEND_UNSUPPORTED,
                        "mutant mamba2: the options no_gated_norm / norm_before_gate are not implemented");
    struct m2 *m = calloc(1, sizeof *m);
    if (m == NULL)
        return mut_fail(msg, MC_BACKEND_NOMEM, "mutant mamba2: out of memory");
    model->impl = m;
    m->cfg = *c;
    m->D = c->hidden_size;
    m->H = c->num_heads;
    m->P = c->head_dim;
    m->N = c->state_size;
    m->G = c->n_groups;
    m->K = c->conv_kernel;
    m->I = m->H * m->P;
    m->GN = m->G * m->N;
    m->C = m->I + 2 * m->GN;
    m->proj = 2 * m->I + 2 * m->GN + m->H;
    m->R = m->H / m->G;
    int miss;
    m->w_in = mut_weight(d, "in_proj.weight", m->proj * m->D, &miss, msg);
    m->w_conv = mut_weight(d, "conv1d.weight", m->C * m->K, &miss, msg);
    m->dt_bias = mut_weight(d, "dt_bias", m->H, &miss, msg);
    m->a_log = mut_weight(d, "A_log", m->H, &miss, msg);
    m->d_skip = mut_weight(d, "D", m->H, &miss, msg);
    m->w_norm = mut_weight(d, "norm.weight", m->I, &miss, msg);
    m->w_out = mut_weight(d, "out_proj.weight", m->D * m->I, &miss, msg);
    int ok = m->w_in && m->w_conv && m->dt_bias && m->a_log && m->d_skip && m->w_norm && m->w_out;
    if (ok && c->use_bias) {
        m->b_in = mut_weight(d, "in_proj.bias", m->proj, &miss, msg);
        m->b_out = mut_weight(d, "out_proj.bias", m->D, &miss, msg);
        ok = m->b_in && m->b_out;
    }
    if (ok && c->use_conv_bias) {
        m->b_conv = mut_weight(d, "conv1d.bias", m->C, &miss, msg);
        ok = m->b_conv != NULL;
    }
    if (!ok)
        return MC_BACKEND_INVALID; /* model_destroy frees what was taken */
    model->D = m->D;
    model->win_elems = m->C * m->K;
    model->state_elems = m->H * m->P * m->N;
    model->chunk = c->chunk_size > 0 ? c->chunk_size : 256;
    return MC_BACKEND_OK;
}

/* dt of token row zx (§2.3), clamped unless `clamp` is 0. */
static float m2_dt(const struct m2 *m, const float *zx, int64_t h, int clamp)
{
    float dt = mut_softplus(zx[m->I + m->C + h] + m->dt_bias[h]);
    if (clamp) {
        const float lo = (float)m->cfg.time_step_limit[0], hi = (float)m->cfg.time_step_limit[1];
        dt = dt < lo ? lo : dt;
        dt = dt > hi ? hi : dt;
    }
    return dt;
}

enum tok_kind { TOK_SKIP = 0, TOK_REAL = 1, TOK_ZERO = 2 };

static enum mc_backend_status m2_segment(const struct mc_model *model, float *win, float *st, const float *x,
                                         const uint8_t *mask, int64_t L, float *y, const struct mut_seg *seg,
                                         struct mc_msg *msg)
{
    const struct m2 *m = model->impl;
    const enum mut_fault f = model->fault;
    const int64_t D = m->D, H = m->H, P = m->P, N = m->N, G = m->G, K = m->K, I = m->I, GN = m->GN, C = m->C,
                  proj = m->proj;
    const int multi = seg->primed && L > 1, decode = seg->primed && L == 1;
    /* 8.4: the mask is dropped on a continued multi-token forward; 8.6: for a batch of one */
    const int honour = mask != NULL && !(f == MUT_MASK_CONTINUED && multi) && !(f == MUT_MASK_BATCH1 && seg->batch == 1);
    enum mc_backend_status rc = MC_BACKEND_OK;

    float *zx = malloc((size_t)(L * proj) * sizeof *zx);       /* [L][proj]: z | xBC_raw | dt_raw */
    float *ext = malloc((size_t)(C * (K + L)) * sizeof *ext);  /* [C][K+n]: window, then the segment */
    float *xbc = malloc((size_t)(L * C) * sizeof *xbc);        /* [n][C] after conv + SiLU */
    float *hs = calloc((size_t)(L * I), sizeof *hs);           /* [L][I] scan output, then gated norm */
    int64_t *idx = malloc((size_t)L * sizeof *idx);            /* [n] processed token positions */
    unsigned char *kind = malloc((size_t)L);                   /* [L] enum tok_kind */
    if (!zx || !ext || !xbc || !hs || !idx || !kind) {
        rc = mut_fail(msg, MC_BACKEND_NOMEM, "mutant mamba2: out of memory for L=%lld", (long long)L);
        goto out;
    }
    mut_linear(x, L, D, m->w_in, m->b_in, proj, zx);
    int64_t n = 0;
    for (int64_t t = 0; t < L; t++) {
        kind[t] = TOK_REAL;
        if (honour && !mask[t])
            kind[t] = f == MUT_PAD_LEAK ? TOK_ZERO : TOK_SKIP;
        if (kind[t] == TOK_ZERO) /* 8.5: the pad's input is zeroed, so in_proj gives its bias */
            for (int64_t j = 0; j < proj; j++)
                zx[t * proj + j] = m->b_in ? m->b_in[j] : 0.0f;
        if (kind[t] != TOK_SKIP)
            idx[n++] = t;
    }

    /* Conv over cat(window, segment): ext[c] holds K + n columns. */
    const int64_t E = K + n;
    for (int64_t c = 0; c < C; c++) {
        float *e = ext + c * E;
        memcpy(e, win + c * K, (size_t)K * sizeof *e);
        for (int64_t i = 0; i < n; i++)
            e[K + i] = zx[idx[i] * proj + I + c];
        const float *wc = m->w_conv + c * K;
        for (int64_t i = 0; i < n; i++) {
            float acc = m->b_conv ? m->b_conv[c] : 0.0f;
            if (f == MUT_CONV_FIRST_L && multi) { /* output i of the zero-left conv over K+n columns */
                for (int64_t k = 0; k < K; k++)
                    if (i - (K - 1) + k >= 0)
                        acc += wc[k] * e[i - (K - 1) + k];
            } else if (f == MUT_CONV_OFF_BY_ONE && multi) { /* K-1 warm-up outputs dropped, not K */
                for (int64_t k = 0; k < K; k++)
                    acc += wc[k] * e[i + k];
            } else if (f == MUT_FUTURE_LEAK) { /* padded on the right: w[0] meets the current token */
                for (int64_t k = 0; k < K; k++)
                    if (K + i + k < E)
                        acc += wc[k] * e[K + i + k];
            } else { /* the last n outputs: the window ending at token i */
                for (int64_t k = 0; k < K; k++)
                    acc += wc[k] * e[i + 1 + k];
            }
            float v;
            /* not a bug (§0.4, §A.8): the torch fallback rounds the conv output to the model dtype
             * before the SiLU; the fused kernel (and MUT_NONE) applies the SiLU to the f32 sum */
            v = mut_silu(f == MUT_UNFUSED_ACT ? mut_bf16_round(acc) : acc);
            xbc[i * C + c] = kind[idx[i]] == TOK_ZERO ? 0.0f : v; /* the post-conv mask */
        }
        float *wn = win + c * K;
        if (f == MUT_CACHE_POST_ACT) { /* 8.3: the activation output shifts in, not the pre-conv input */
            for (int64_t i = 0; i < n; i++) {
                memmove(wn, wn + 1, (size_t)(K - 1) * sizeof *wn);
                wn[K - 1] = xbc[i * C + c];
            }
        } else {
            memcpy(wn, e + n, (size_t)K * sizeof *wn); /* the last K columns (CONV-INV) */
        }
    }

    /* Stage probes (mutants.h): NULL unless recording; indexed by the segment's token t. */
    float *p_conv = mut_probe_slice(model, "conv_out", 1, (const int64_t[]){C});
    float *p_dt = mut_probe_slice(model, "dt", 1, (const int64_t[]){H});
    float *p_b = mut_probe_slice(model, "B", 2, (const int64_t[]){G, N});
    float *p_c = mut_probe_slice(model, "C", 2, (const int64_t[]){G, N});
    float *p_scan = mut_probe_slice(model, "scan_out", 1, (const int64_t[]){I});
    float *p_norm = mut_probe_slice(model, "norm_in", 1, (const int64_t[]){I});
    for (int64_t i = 0; p_conv && p_b && p_c && i < n; i++) {
        memcpy(p_conv + idx[i] * C, xbc + i * C, (size_t)C * sizeof *xbc);
        memcpy(p_b + idx[i] * GN, xbc + i * C + I, (size_t)GN * sizeof *xbc);
        memcpy(p_c + idx[i] * GN, xbc + i * C + I + GN, (size_t)GN * sizeof *xbc);
    }

    /* Exact sequential recurrence over the processed tokens; head h reads group h / (H/G). */
    for (int64_t h = 0; h < H; h++) {
        const int64_t g = f == MUT_HEAD_MOD ? h % G : h / m->R;
        const float a = -expf(m->a_log[h]);
        const int clamp = !(f == MUT_DT_NOCLAMP_DECODE && decode);
        float *s = st + h * P * N; /* [P][N] */
        float dt = 0.0f;
        const float dt_first = n > 0 ? m2_dt(m, zx + idx[0] * proj, h, clamp) : 0.0f;
        for (int64_t i = 0; i < n; i++) {
            const int64_t t = idx[i];
            const float *xr = xbc + i * C;
            const float *xh = xr + h * P, *bg = xr + I + g * N, *cg = xr + I + GN + g * N;
            dt = (f == MUT_DT_FIRST_TOKEN && multi) ? dt_first : m2_dt(m, zx + t * proj, h, clamp);
            const float decay = expf(dt * a);
            if (p_dt)
                p_dt[t * H + h] = dt;
            float *yo = hs + t * I + h * P;
            for (int64_t p = 0; p < P; p++) {
                const float dx = dt * xh[p];
                float acc = 0.0f;
                for (int64_t k = 0; k < N; k++) {
                    s[p * N + k] = decay * s[p * N + k] + dx * bg[k];
                    acc += s[p * N + k] * cg[k];
                }
                yo[p] = acc + (f == MUT_DECODE_NO_D && decode ? 0.0f : m->d_skip[h]) * xh[p];
            }
        }
        if (f == MUT_CHUNK_PAD && !decode && n > 0) { /* 8.12: pad rows repeat the last dt, x = B = 0 */
            const int64_t Q = model->chunk, pads = (Q - L % Q) % Q;
            const float decay = expf(dt * a);
            for (int64_t r = 0; r < pads; r++)
                for (int64_t e = 0; e < P * N; e++)
                    s[e] *= decay;
        }
    }

    /* Gated RMSNorm, gate before norm, over groups of norm_group_size (8.11 swaps I and I/G). */
    int64_t gs = m->cfg.norm_group_size;
    if (f == MUT_NORM_GROUP_SWAP && G > 1)
        gs = gs == I ? I / G : I;
    for (int64_t i = 0; i < n; i++) {
        const int64_t t = idx[i];
        float *row = hs + t * I;
        const float *z = zx + t * proj;
        if (p_scan)
            memcpy(p_scan + t * I, row, (size_t)I * sizeof *row);
        for (int64_t j0 = 0; j0 < I; j0 += gs) {
            float ss = 0.0f;
            for (int64_t j = j0; j < j0 + gs; j++) {
                row[j] *= mut_silu(z[j]);
                ss += row[j] * row[j];
            }
            if (p_norm)
                memcpy(p_norm + t * I + j0, row + j0, (size_t)gs * sizeof *row);
            const float rstd = 1.0f / sqrtf(ss / (float)gs + (float)m->cfg.layer_norm_epsilon);
            for (int64_t j = j0; j < j0 + gs; j++)
                row[j] *= rstd * m->w_norm[j];
        }
    }
    mut_linear(hs, L, I, m->w_out, m->b_out, D, y);
    for (int64_t t = 0; t < L; t++)
        if (kind[t] != TOK_REAL)
            for (int64_t j = 0; j < D; j++)
                y[t * D + j] = m->b_out ? m->b_out[j] : 0.0f;
out:
    free(zx);
    free(ext);
    free(xbc);
    free(hs);
    free(idx);
    free(kind);
    return rc;
}

const struct mut_family mut_mamba2_family = {
    .family = MC_FAMILY_MAMBA2,
    .create = m2_create,
    .destroy = m2_destroy,
    .segment = m2_segment,
};
