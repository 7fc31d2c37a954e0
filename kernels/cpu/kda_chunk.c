/* kda_chunk.c — see kda_chunk.h. */
#include "kda_chunk.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "common.h"
#include "vmath.h"

size_t mc_kda_chunk_work_bytes(int64_t chunk, int64_t d)
{
    const size_t Q = (size_t)chunk, D = (size_t)d;
    /* doubles: gam [Q][d], a zero row [d]; floats: qn, kn, kb, ksc, rhs (2 blocks), o, a1, a2, a3 [Q][d], M, P
     * [Q][Q], S' [d][d], e [d] */
    return (Q + 1) * D * sizeof(double) + (11 * Q * D + 2 * Q * Q + D * D + D) * sizeof(float);
}

static void kda_l2norm(const float *src, float *dst, int64_t d, float scale)
{
    float ss = 0.0f;
    for (int64_t c = 0; c < d; c++)
        ss += src[c] * src[c];
    const float inv = scale / sqrtf(ss + MC_KDA_L2NORM_EPS);
    for (int64_t c = 0; c < d; c++)
        dst[c] = src[c] * inv;
}

/* dst[c] = e^(a[c] - b[c]) for c < d: the difference in double, the exp vectorized (vmath.h). */
static void kda_exp_diff(const double *a, const double *b, int64_t d, float *dst)
{
    for (int64_t c = 0; c < d; c++)
        dst[c] = (float)(a[c] - b[c]);
    mc_cpu_vexp(dst, d);
}

/* M (strictly lower, [n][n], row stride n) and P (lower incl. the diagonal, zero above) of one chunk;
 * e [d] is scratch. */
static void kda_pairs(int64_t n, int64_t d, const double *gam, const float *qn, const float *kn, const float *kb,
                      float *M, float *P, float *a1, float *a2, float *a3, float *e)
{
    memset(M, 0, (size_t)(n * n) * sizeof *M);
    memset(P, 0, (size_t)(n * n) * sizeof *P);
    for (int64_t I0 = 0; I0 < n; I0 += MC_KDA_SUB) {
        const int64_t I1 = I0 + MC_KDA_SUB < n ? I0 + MC_KDA_SUB : n, ni = I1 - I0;
        /* the diagonal sub-block: one exp per (i, j, c) */
        for (int64_t i = I0; i < I1; i++) {
            for (int64_t j = I0; j <= i; j++) {
                kda_exp_diff(gam + i * d, gam + j * d, d, e);
                float mij = 0.0f, pij = 0.0f;
                for (int64_t c = 0; c < d; c++) {
                    const float kj = kn[j * d + c] * e[c];
                    mij += kb[i * d + c] * kj;
                    pij += qn[i * d + c] * kj;
                }
                if (j < i)
                    M[i * n + j] = mij;
                P[i * n + j] = pij;
            }
        }
        /* sub-blocks J < I: e^(γ_i − γ_r) e^(γ_r − γ_j), γ_r at the last token of J */
        for (int64_t J0 = 0; J0 < I0; J0 += MC_KDA_SUB) {
            const int64_t J1 = J0 + MC_KDA_SUB, nj = J1 - J0;
            const double *gr = gam + (J1 - 1) * d;
            for (int64_t i = I0; i < I1; i++) {
                kda_exp_diff(gam + i * d, gr, d, e);
                for (int64_t c = 0; c < d; c++) {
                    a1[(i - I0) * d + c] = kb[i * d + c] * e[c];
                    a3[(i - I0) * d + c] = qn[i * d + c] * e[c];
                }
            }
            for (int64_t j = J0; j < J1; j++) {
                kda_exp_diff(gr, gam + j * d, d, e);
                for (int64_t c = 0; c < d; c++)
                    a2[(j - J0) * d + c] = kn[j * d + c] * e[c];
            }
            mc_cpu_sgemm(0, 1, ni, nj, d, 1.0f, a1, d, a2, d, 0.0f, M + I0 * n + J0, n);
            mc_cpu_sgemm(0, 1, ni, nj, d, 1.0f, a3, d, a2, d, 0.0f, P + I0 * n + J0, n);
        }
    }
}

void mc_kda_chunk_run(const struct mc_kda_core_args *a, void *work)
{
    const int64_t d = a->d, Q = a->chunk;
    double *gam = work;                      /* [Q][d] in-chunk cumulative log decay */
    double *zero = gam + Q * d;              /* [d] zeros: e^(γ − 0) */
    float *qn = (float *)(zero + d);         /* [Q][d] q̂ */
    float *kn = qn + Q * d;                  /* [Q][d] k̂ */
    float *kb = kn + Q * d;                  /* [Q][d] k̂ β */
    float *ksc = kb + Q * d;                 /* [Q][d] k̂ ⊙ e^(γ_last − γ), then q̂ ⊙ e^γ */
    float *rhs = ksc + Q * d;                /* [Q][2d] V⊙β | K⊙β⊙e^γ, solved in place: U | W */
    float *ob = rhs + 2 * Q * d;             /* [Q][d] */
    float *a1 = ob + Q * d, *a2 = a1 + Q * d, *a3 = a2 + Q * d; /* [Q][d] sub-block factors */
    float *M = a3 + Q * d;                   /* [Q][Q] */
    float *P = M + Q * Q;                    /* [Q][Q] */
    float *snew = P + Q * Q;                 /* [d][d] */
    float *e = snew + d * d;                 /* [d] */
    float *S = a->state;
    memset(zero, 0, (size_t)d * sizeof *zero);

    for (int64_t c0 = 0; c0 < a->n; c0 += Q) {
        const int64_t n = c0 + Q < a->n ? Q : a->n - c0;
        const int64_t *rows = a->rows + c0;
        for (int64_t i = 0; i < n; i++) {
            const int64_t r = rows[i];
            kda_l2norm(a->q + r * a->ld, qn + i * d, d, a->q_scale);
            kda_l2norm(a->k + r * a->ld, kn + i * d, d, 1.0f);
            const float beta = 1.0f / (1.0f + expf(-a->b_raw[r * a->ld_b]));
            const float *v = a->v + r * a->ld, *f = a->f + r * a->ld_f;
            for (int64_t c = 0; c < d; c++) {
                const double g = (double)(a->a_neg * mc_cpu_softplus(f[c]));
                gam[i * d + c] = (i ? gam[(i - 1) * d + c] : 0.0) + g;
                kb[i * d + c] = kn[i * d + c] * beta;
                rhs[i * 2 * d + c] = v[c] * beta;
            }
            kda_exp_diff(gam + i * d, zero, d, e); /* e^γ_i */
            for (int64_t c = 0; c < d; c++) {
                rhs[i * 2 * d + d + c] = kb[i * d + c] * e[c];
                ksc[i * d + c] = qn[i * d + c] * e[c];
            }
        }
        kda_pairs(n, d, gam, qn, kn, kb, M, P, a1, a2, a3, e);
        /* (I + M) [U | W] = [V⊙β | K⊙β⊙e^γ]: unit lower triangular, M strictly below the diagonal */
        cblas_strsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, (int)n, (int)(2 * d), 1.0f, M,
                    (int)n, rhs, (int)(2 * d));
        /* V' = U − W S, in the U block */
        mc_cpu_sgemm(0, 0, n, d, d, -1.0f, rhs + d, 2 * d, S, d, 1.0f, rhs, 2 * d);
        /* O = (q̂ ⊙ e^γ) S + P V' (q̂ ⊙ e^γ in ksc since the loads) */
        mc_cpu_sgemm(0, 0, n, d, d, 1.0f, ksc, d, S, d, 0.0f, ob, d);
        mc_cpu_sgemm(0, 0, n, d, n, 1.0f, P, n, rhs, 2 * d, 1.0f, ob, d);
        /* S ← e^(γ_last) ⊙ S (rows) + (k̂ ⊙ e^(γ_last − γ))ᵀ V' */
        const double *gl = gam + (n - 1) * d;
        for (int64_t i = 0; i < n; i++) {
            kda_exp_diff(gl, gam + i * d, d, e);
            for (int64_t c = 0; c < d; c++)
                ksc[i * d + c] = kn[i * d + c] * e[c];
        }
        kda_exp_diff(gl, zero, d, e);
        for (int64_t c = 0; c < d; c++)
            for (int64_t j = 0; j < d; j++)
                snew[c * d + j] = S[c * d + j] * e[c];
        mc_cpu_sgemm(1, 0, d, d, n, 1.0f, ksc, d, rhs, 2 * d, 1.0f, snew, d);
        memcpy(S, snew, (size_t)(d * d) * sizeof *S);
        for (int64_t i = 0; i < n; i++)
            memcpy(a->o + rows[i] * a->ld_o, ob + i * d, (size_t)d * sizeof *ob);
    }
}

size_t mc_kda_recurrent_work_bytes(int64_t d)
{
    return (size_t)(5 * d) * sizeof(float);
}

void mc_kda_recurrent_run(const struct mc_kda_core_args *a, void *work)
{
    const int64_t d = a->d;
    float *qn = work, *kn = qn + d, *e = kn + d, *m = e + d, *o = m + d;
    float *S = a->state;
    for (int64_t t = 0; t < a->n; t++) {
        const int64_t r = a->rows[t];
        kda_l2norm(a->q + r * a->ld, qn, d, a->q_scale);
        kda_l2norm(a->k + r * a->ld, kn, d, 1.0f);
        const float beta = 1.0f / (1.0f + expf(-a->b_raw[r * a->ld_b]));
        const float *v = a->v + r * a->ld, *f = a->f + r * a->ld_f;
        for (int64_t c = 0; c < d; c++)
            e[c] = a->a_neg * mc_cpu_softplus(f[c]);
        mc_cpu_vexp(e, d);
        /* row c of S decays by e_c, m = Sᵀk̂ on the decayed state; δ = β(v − m); S += k̂δᵀ, o = Sᵀq̂ */
        mc_cpu_vdelta_step(S, d, d, e, kn, qn, v, beta, m, o);
        memcpy(a->o + r * a->ld_o, o, (size_t)d * sizeof *o);
    }
}
