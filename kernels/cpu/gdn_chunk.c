/*
 * gdn_chunk.c — the gated delta rule core of the cpu Gated DeltaNet (gdn_chunk.h, docs/semantics.md §4.4).
 *
 * Variants:
 *   - mc_gdn_chunk_run       chunked form. Per chunk of cl <= c tokens (rows i, j < cl):
 *       once per key head:  [q̂; k̂] (2cl × dk) · k̂ᵀ (dk × cl)  -> Gq = q̂k̂ᵀ, Gk = k̂k̂ᵀ   (sgemm)
 *       per value head:     Dec[i][j] = exp(Σ_{j<s<=i} g_s), Aut = diag(β)·Gk ⊙ Dec (strictly lower),
 *                           P = Gq ⊙ Dec; exp(γ_i) = exp(Σ_{s<=i} g_s), exp(γ_last − γ_i) = exp(Σ_{s>i} g_s)
 *                           X = [Kβ⊙exp(γ) | Vβ] (cl × (dk+dv)); X <- (I + Aut)^{-1} X = [W | U]
 *                                                                       (strsm, forward substitution)
 *                           [W; q̂⊙exp(γ)] (2cl × dk) · S (dk × dv) -> [WS; QS]              (sgemm)
 *                           Vn = U − WS;  O = QS + P·Vn  (cl × dv × cl)                     (sgemm)
 *                           S <- exp(γ_last)·S + (k̂⊙exp(γ_last − γ))ᵀ·Vn  (dk × dv × cl)   (sgemm)
 *     The last chunk is run as a shorter chunk: the §4.4 zero-padded rows (g = β = k = 0) would add
 *     nothing to any product and leave γ_last at the last real token.
 *   - mc_gdn_recurrent_run   recurrent form, token by token, in the reference's order of operations.
 * Every decay is the exp of a sum over its own segment of g (vmath.h: mc_cpu_vexp_prefix / _suffix /
 * _segsum_row, shared with the Mamba2 SSD), never exp(γ_i − γ_j) of the in-chunk cumulative sum γ:
 * with a strong decay γ reaches hundreds within a chunk, and in f32 its spacing there (6.1e-5 on
 * [512, 1024)) is the absolute error of every such difference, i.e. a relative error of each decay
 * factor near the diagonal, the ones that carry the state (docs/semantics.md §8.12). The segment sums err
 * relative to their own size instead. The arguments are sums of g <= 0, so nothing overflows; a strong
 * decay underflows to 0, which is the limit of the exact value.
 */
#include "gdn_chunk.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "common.h"
#include "vmath.h"

void mc_gdn_row_normalize(const float *src, float *dst, int64_t dk, int l2norm, float scale)
{
    float inv = 1.0f;
    if (l2norm) {
        float ss = 0.0f;
        for (int64_t i = 0; i < dk; i++)
            ss += src[i] * src[i];
        inv = 1.0f / sqrtf(ss + MC_GDN_L2NORM_EPS);
    }
    for (int64_t i = 0; i < dk; i++)
        dst[i] = src[i] * inv * scale;
}

size_t mc_gdn_chunk_work_floats(int64_t chunk, int64_t dk, int64_t dv)
{
    const size_t c = (size_t)chunk, k = (size_t)dk, v = (size_t)dv;
    return 2 * c * k        /* qk  [2c][dk]   */
           + 2 * c * c      /* G   [2c][c]    */
           + 4 * c          /* g, exp(γ), exp(γ_last − γ), segment sums of one Dec row */
           + 2 * c * c      /* Aut, P [c][c]  */
           + 2 * c * (k + v) /* X   [2c][dk+dv] */
           + 2 * c * v      /* R   [2c][dv]   */
           + c * k;         /* Kd  [c][dk]    */
}

void mc_gdn_chunk_run(const struct mc_gdn_core_args *a, float *work)
{
    const int64_t n = a->n, dk = a->dk, dv = a->dv, xw = dk + dv;
    const int64_t c = a->chunk < n ? a->chunk : n;
    float *qk = work;              /* [2c][dk]: q̂ rows, then k̂ rows */
    float *G = qk + 2 * c * dk;    /* [2cl][cl]: Gq rows, then Gk rows */
    float *gc = G + 2 * c * c;     /* [c] g of the chunk, contiguous */
    float *eg = gc + c;            /* [c] exp(γ_i) = exp(Σ_{s<=i} g_s) */
    float *ed = eg + c;            /* [c] exp(γ_last − γ_i) = exp(Σ_{s>i} g_s) */
    float *seg = ed + c;           /* [c] Σ_{j<s<=i} g_s of the current Dec row i */
    float *A = seg + c;            /* [cl][cl] Aut, strictly lower part used */
    float *P = A + c * c;          /* [cl][cl] Gq ⊙ Dec, lower incl. diagonal, zero above */
    float *X = P + c * c;          /* [2cl][dk+dv]: rows < cl [Kβe | Vβ] -> [W | U -> Vn]; rows >= cl [Qe | -] */
    float *R = X + 2 * c * xw;     /* [2cl][dv]: WS, then QS */
    float *Kd = R + 2 * c * dv;    /* [cl][dk] */

    for (int64_t t0 = 0; t0 < n; t0 += c) {
        const int64_t cl = n - t0 < c ? n - t0 : c;
        float *qh = qk, *kh = qk + cl * dk;
        for (int64_t i = 0; i < cl; i++) {
            mc_gdn_row_normalize(a->q + (t0 + i) * a->ld_qk, qh + i * dk, dk, a->l2norm, a->q_scale);
            mc_gdn_row_normalize(a->k + (t0 + i) * a->ld_qk, kh + i * dk, dk, a->l2norm, 1.0f);
        }
        mc_cpu_sgemm(0, 1, 2 * cl, cl, dk, 1.0f, qk, dk, kh, dk, 0.0f, G, cl);
        const float *Gq = G, *Gk = G + cl * cl;

        for (int64_t s = 0; s < a->nh; s++) {
            const float *g = a->g + t0 * a->ld_gb + s;
            const float *beta = a->beta + t0 * a->ld_gb + s;
            const float *v = a->v + t0 * a->ld_v + s * dv;
            float *S = a->state + s * dk * dv;
            float *o = a->o + t0 * a->ld_o + s * dv;

            for (int64_t i = 0; i < cl; i++)
                gc[i] = g[i * a->ld_gb];
            mc_cpu_vexp_prefix(gc, eg, cl);
            mc_cpu_vexp_suffix(gc, ed, cl);
            for (int64_t i = 0; i < cl; i++) {
                const float bi = beta[i * a->ld_gb];
                float *restrict arow = A + i * cl, *restrict prow = P + i * cl;
                const float *restrict gkrow = Gk + i * cl, *restrict gqrow = Gq + i * cl;
                /* Dec[i][0..i] into the P row (Dec[i][i] = 1), from the segment sums of row i − 1 */
                mc_cpu_vexp_segsum_row(seg, i, gc[i], prow);
                for (int64_t j = 0; j < i; j++) {
                    const float dec = prow[j];
                    arow[j] = bi * gkrow[j] * dec;
                    prow[j] = gqrow[j] * dec;
                }
                arow[i] = 1.0f; /* not referenced (unit diagonal) */
                prow[i] = gqrow[i];
                for (int64_t j = i + 1; j < cl; j++) {
                    arow[j] = 0.0f; /* not referenced (upper part) */
                    prow[j] = 0.0f;
                }
            }
            for (int64_t i = 0; i < cl; i++) {
                const float bi = beta[i * a->ld_gb], kb = bi * eg[i];
                float *xr = X + i * xw, *xq = X + (cl + i) * xw;
                const float *kr = kh + i * dk, *qr = qh + i * dk, *vr = v + i * a->ld_v;
                for (int64_t d = 0; d < dk; d++) {
                    xr[d] = kr[d] * kb;
                    xq[d] = qr[d] * eg[i];
                }
                for (int64_t j = 0; j < dv; j++)
                    xr[dk + j] = vr[j] * bi;
            }
            /* [W | U] = (I + Aut)^{-1} [Kβe | Vβ] */
            cblas_strsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, (blasint)cl, (blasint)xw, 1.0f,
                        A, (blasint)cl, X, (blasint)xw);
            /* [WS; QS] = [W; Qe] · S */
            mc_cpu_sgemm(0, 0, 2 * cl, dv, dk, 1.0f, X, xw, S, dv, 0.0f, R, dv);
            for (int64_t i = 0; i < cl; i++) {
                float *u = X + i * xw + dk;
                const float *ws = R + i * dv;
                for (int64_t j = 0; j < dv; j++)
                    u[j] -= ws[j];
                memcpy(o + i * a->ld_o, R + (cl + i) * dv, (size_t)dv * sizeof *o);
            }
            /* O = QS + P · Vn */
            mc_cpu_sgemm(0, 0, cl, dv, cl, 1.0f, P, cl, X + dk, xw, 1.0f, o, a->ld_o);
            /* S <- exp(γ_last) S + Kdᵀ Vn */
            const float el = eg[cl - 1];
            for (int64_t e = 0; e < dk * dv; e++)
                S[e] *= el;
            for (int64_t i = 0; i < cl; i++) {
                const float *kr = kh + i * dk;
                float *kd = Kd + i * dk;
                for (int64_t d = 0; d < dk; d++)
                    kd[d] = kr[d] * ed[i];
            }
            mc_cpu_sgemm(1, 0, dk, dv, cl, 1.0f, Kd, dk, X + dk, xw, 1.0f, S, dv);
        }
    }
}

size_t mc_gdn_recurrent_work_floats(int64_t dk, int64_t dv)
{
    return (size_t)(3 * dk + dv);
}

void mc_gdn_recurrent_run(const struct mc_gdn_core_args *a, float *work)
{
    const int64_t dk = a->dk, dv = a->dv;
    float *qh = work, *kh = work + dk, *rows = work + 2 * dk, *dl = work + 3 * dk;
    for (int64_t t = 0; t < a->n; t++) {
        mc_gdn_row_normalize(a->q + t * a->ld_qk, qh, dk, a->l2norm, a->q_scale);
        mc_gdn_row_normalize(a->k + t * a->ld_qk, kh, dk, a->l2norm, 1.0f);
        for (int64_t s = 0; s < a->nh; s++) {
            float decay = a->g[t * a->ld_gb + s];
            mc_cpu_vexp(&decay, 1); /* the chunked form's exp, so that decode and prefill share it */
            for (int64_t i = 0; i < dk; i++)
                rows[i] = decay; /* one decay for every row of the head's state */
            /* S <- S·exp(g); m = Sᵀk̂; δ = β(v − m); S += k̂δᵀ; o = Sᵀq̂ with the updated state */
            mc_cpu_vdelta_step(a->state + s * dk * dv, dk, dv, rows, kh, qh, a->v + t * a->ld_v + s * dv,
                               a->beta[t * a->ld_gb + s], dl, a->o + t * a->ld_o + s * dv);
        }
    }
}
