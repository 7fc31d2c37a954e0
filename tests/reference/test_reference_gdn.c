/*
 * test_reference_gdn.c — the reference Gated DeltaNet mixer (reference/gdn.c), driven only through
 * its ops struct (mixcheck/backend.h) on small random configurations made with a fixed-seed LCG,
 * both weight layouts (Qwen3.5 and Qwen3-Next) and r = Hv/Hk = 2 unless said otherwise:
 *   - split invariance: one forward over a sequence equals any split of it into successive cached
 *     forwards (pieces of length 1 and shorter than K included), outputs and exported caches;
 *   - L == 1 continuation equals the multi-token path;
 *   - mask semantics (docs/semantics.md §A.4): left, middle and right padding, B == 1, L == 1;
 *   - a hand-checkable case (Hk = Hv = dk = dv = 1) against the formulas of docs/semantics.md §4 written out;
 *   - an independent scalar oracle (activation-level de-interleave, closed-form state update) for
 *     both layouts;
 *   - the two layouts agree when the Qwen3-Next weights are the §4.3 interleave of the Qwen3.5 ones;
 *   - f32 agrees with f64;
 *   - error paths and the cache export/import/copy round trip.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reference.h"
#include "refutil.h"

/* ---- fixtures ---------------------------------------------------------------------------------- */

struct dims {
    int64_t D, Hk, Hv, dk, dv, K, r, kd, vd, C;
};

static struct dims dims_of(const struct mc_gdn_config *c)
{
    struct dims d = {.D = c->hidden_size,
                     .Hk = c->num_key_heads,
                     .Hv = c->num_value_heads,
                     .dk = c->key_head_dim,
                     .dv = c->value_head_dim,
                     .K = c->conv_kernel};
    d.r = d.Hv / d.Hk;
    d.kd = d.Hk * d.dk;
    d.vd = d.Hv * d.dv;
    d.C = 2 * d.kd + d.vd;
    return d;
}

/* The weights every layout shares, after the layout's projections. */
static void weight_add_common(struct weight_set *ws, const struct dims *d, struct lcg *g)
{
    weight_add(ws, "conv1d.weight", 3, d->C, 1, d->K, 0.0, 0.5, g);
    weight_add(ws, "dt_bias", 1, d->Hv, 0, 0, 0.0, 1.0, g);
    weight_add(ws, "A_log", 1, d->Hv, 0, 0, -0.5, 1.0, g);
    weight_add(ws, "norm.weight", 1, d->dv, 0, 0, 1.0, 0.2, g);
    weight_add(ws, "out_proj.weight", 2, d->D, d->vd, 0, 0.0, 1.0 / sqrt((double)d->vd), g);
}

static void weight_set_random(struct weight_set *ws, const struct mc_gdn_config *c, uint64_t seed)
{
    struct lcg g = {seed};
    const struct dims d = dims_of(c);
    const double s = 1.0 / sqrt((double)d.D);
    memset(ws, 0, sizeof *ws);
    if (c->layout == MC_GDN_LAYOUT_QWEN3_5) {
        weight_add(ws, "in_proj_qkv.weight", 2, d.C, d.D, 0, 0.0, s, &g);
        weight_add(ws, "in_proj_z.weight", 2, d.vd, d.D, 0, 0.0, s, &g);
        weight_add(ws, "in_proj_b.weight", 2, d.Hv, d.D, 0, 0.0, 2.0 * s, &g);
        weight_add(ws, "in_proj_a.weight", 2, d.Hv, d.D, 0, 0.0, 2.0 * s, &g);
    } else {
        weight_add(ws, "in_proj_qkvz.weight", 2, d.C + d.vd, d.D, 0, 0.0, s, &g);
        weight_add(ws, "in_proj_ba.weight", 2, 2 * d.Hv, d.D, 0, 0.0, 2.0 * s, &g);
    }
    weight_add_common(ws, &d, &g);
}

static void rows_put(double *dst, int64_t *row, const double *src, int64_t s0, int64_t n, int64_t D)
{
    memcpy(dst + *row * D, src + s0 * D, (size_t)(n * D) * sizeof *dst);
    *row += n;
}

/* The Qwen3-Next weights whose §4.3 de-interleave is the Qwen3.5 set q35: per key head j, qkvz rows
 * q_j, k_j, v of value heads j*r..j*r+r-1, z of the same heads; ba rows b then a of those heads. */
static void weight_set_interleave(struct weight_set *next, struct weight_set *q35, const struct mc_gdn_config *c)
{
    const struct dims d = dims_of(c);
    const double *wqkv = weight_find(q35, "in_proj_qkv.weight"), *wz = weight_find(q35, "in_proj_z.weight");
    const double *wb = weight_find(q35, "in_proj_b.weight"), *wa = weight_find(q35, "in_proj_a.weight");
    memset(next, 0, sizeof *next);
    double *qkvz = weight_new(next, "in_proj_qkvz.weight", 2, d.C + d.vd, d.D, 0);
    double *ba = weight_new(next, "in_proj_ba.weight", 2, 2 * d.Hv, d.D, 0);
    int64_t r1 = 0, r2 = 0;
    for (int64_t j = 0; j < d.Hk; j++) {
        rows_put(qkvz, &r1, wqkv, j * d.dk, d.dk, d.D);
        rows_put(qkvz, &r1, wqkv, d.kd + j * d.dk, d.dk, d.D);
        for (int64_t s = 0; s < d.r; s++)
            rows_put(qkvz, &r1, wqkv, 2 * d.kd + (j * d.r + s) * d.dv, d.dv, d.D);
        for (int64_t s = 0; s < d.r; s++)
            rows_put(qkvz, &r1, wz, (j * d.r + s) * d.dv, d.dv, d.D);
        for (int64_t s = 0; s < d.r; s++)
            rows_put(ba, &r2, wb, j * d.r + s, 1, d.D);
        for (int64_t s = 0; s < d.r; s++)
            rows_put(ba, &r2, wa, j * d.r + s, 1, d.D);
    }
    assert_int_equal(r1, d.C + d.vd);
    assert_int_equal(r2, 2 * d.Hv);
    static const char *const common[] = {"conv1d.weight", "dt_bias", "A_log", "norm.weight", "out_proj.weight"};
    for (size_t i = 0; i < sizeof common / sizeof common[0]; i++) {
        const int k = weight_index(q35, common[i]);
        assert_true(k >= 0);
        const struct mc_weight *w = &q35->w[k];
        double *v = weight_new(next, common[i], w->ndim, w->dims[0], w->dims[1], w->dims[2]);
        memcpy(v, q35->val[k], (size_t)shape_elems(w->ndim, w->dims) * sizeof *v);
    }
}

static struct mc_gdn_config small_config(int32_t layout)
{
    struct mc_gdn_config c = {
        .hidden_size = 8,
        .num_key_heads = 2,
        .num_value_heads = 4, /* r = 2: h / r = 0,0,1,1 differs from h mod Hk = 0,1,0,1 */
        .key_head_dim = 3,
        .value_head_dim = 5,
        .conv_kernel = 4,
        .chunk_size = 4,
        .rms_norm_eps = 1e-6,
        .layout = layout,
    };
    return c;
}

static const int32_t layouts[2] = {MC_GDN_LAYOUT_QWEN3_5, MC_GDN_LAYOUT_QWEN3_NEXT};

static const char *layout_name(int32_t layout)
{
    return layout == MC_GDN_LAYOUT_QWEN3_5 ? "qwen3_5" : "qwen3_next";
}

/* Creates the model from ws (packed here in dtype), then poisons ws's packed data (the model must
 * have copied it); ws->val stays intact for the oracles. */
static void mixer_create(struct mixer *mx, const struct mc_gdn_config *cfg, enum mc_dtype dtype, struct weight_set *ws)
{
    const struct dims d = dims_of(cfg);
    *mx = (struct mixer){.ops = mc_reference_gdn_ops(), .D = d.D, .C = d.C, .K = d.K, .state_row = d.Hv * d.dk * d.dv};
    mixer_build(mx, MC_FAMILY_GDN, cfg, dtype, ws, ws);
}

/* Random weights from seed; kept in *keep when given, else freed. */
static void mixer_init(struct mixer *mx, const struct mc_gdn_config *cfg, enum mc_dtype dtype, uint64_t seed,
                       struct weight_set *keep)
{
    struct weight_set ws;
    const struct dims d = dims_of(cfg);
    *mx = (struct mixer){.ops = mc_reference_gdn_ops(), .D = d.D, .C = d.C, .K = d.K, .state_row = d.Hv * d.dk * d.dv};
    weight_set_random(&ws, cfg, seed);
    mixer_build(mx, MC_FAMILY_GDN, cfg, dtype, &ws, keep);
}

/* ---- split invariance, L == 1 continuation ---------------------------------------------------- */

static void check_splits(int32_t layout)
{
    const struct mc_gdn_config cfg = small_config(layout);
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 11, NULL);
    const struct split_result r = check_split_invariance(&mx, 2, 13, 5);
    assert_true(r.y_max > 1e-3); /* not a degenerate all-zero output */
    assert_true(r.state_max > 1e-3);
    print_message("split invariance (%s): max |dy| = %.3g, max |dcache| = %.3g\n", layout_name(layout), r.dy, r.dcache);
    print_message("L == 1 continuation (%s): max |dy| = %.3g\n", layout_name(layout), r.dstep);
    mixer_free(&mx);
}

static void test_split_invariance_qwen3_5(void **state)
{
    (void)state;
    check_splits(MC_GDN_LAYOUT_QWEN3_5);
}

static void test_split_invariance_qwen3_next(void **state)
{
    (void)state;
    check_splits(MC_GDN_LAYOUT_QWEN3_NEXT);
}

/* ---- mask semantics ---------------------------------------------------------------------------- */

static void check_mask(int32_t layout)
{
    const struct mc_gdn_config cfg = small_config(layout);
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 23, NULL);
    const double worst = check_mask_semantics(&mx, NULL); /* exactly zero: GDN has no out_proj bias */
    print_message("mask semantics (%s; left/middle/right padding, B = 3 / B = 1 / L = 1): max diff = %.3g\n",
                  layout_name(layout), worst);
    mixer_free(&mx);
}

static void test_mask_semantics(void **state)
{
    (void)state;
    check_mask(MC_GDN_LAYOUT_QWEN3_5);
    check_mask(MC_GDN_LAYOUT_QWEN3_NEXT);
}

/* ---- a hand-checkable case --------------------------------------------------------------------- */

/* D = 2, Hk = Hv = dk = dv = 1, K = 2 (Qwen3.5 layout): every quantity is a scalar. A large
 * rms_norm_eps makes the norm's eps visible; the second input row has a tiny k so that the l2norm's
 * eps (inside the sqrt) matters. */
static void test_hand_case(void **state)
{
    (void)state;
    const double w_qkv[3][2] = {{0.5, -1.0}, {1e-4, 2e-4}, {-0.5, 0.75}}; /* rows q, k, v */
    const double w_z[1][2] = {{0.3, 0.6}}, w_b[1][2] = {{0.2, -0.4}}, w_a[1][2] = {{-0.7, 0.1}};
    const double w_conv[3][1][2] = {{{0.4, 0.9}}, {{-0.3, 1.1}}, {{0.7, 0.5}}};
    const double dt_bias[1] = {-0.5}, a_log[1] = {0.2}, w_norm[1] = {1.5};
    const double w_out[2][1] = {{0.9}, {-1.2}};
    const double u[4][2] = {{1.0, 2.0}, {-0.5, 0.5}, {0.25, -1.5}, {2.0, 1.0}};
    const double eps = 0.5;
    struct mc_gdn_config cfg = {.hidden_size = 2,
                                .num_key_heads = 1,
                                .num_value_heads = 1,
                                .key_head_dim = 1,
                                .value_head_dim = 1,
                                .conv_kernel = 2,
                                .chunk_size = 0,
                                .rms_norm_eps = eps,
                                .layout = MC_GDN_LAYOUT_QWEN3_5};
    struct mc_weight ws[] = {
        {"in_proj_qkv.weight", 2, {3, 2}, w_qkv},
        {"in_proj_z.weight", 2, {1, 2}, w_z},
        {"in_proj_b.weight", 2, {1, 2}, w_b},
        {"in_proj_a.weight", 2, {1, 2}, w_a},
        {"conv1d.weight", 3, {3, 1, 2}, w_conv},
        {"dt_bias", 1, {1}, dt_bias},
        {"A_log", 1, {1}, a_log},
        {"norm.weight", 1, {1}, w_norm},
        {"out_proj.weight", 2, {2, 1}, w_out},
    };
    double y[4][2];
    hand_forward(mc_reference_gdn_ops(), MC_FAMILY_GDN, &cfg, ws, 9, 4, u, y);

    /* The formulas of docs/semantics.md §4.3-4.4, one scalar at a time. */
    double prev[3] = {0, 0, 0}, s = 0.0, max_d = 0.0;
    for (int t = 0; t < 4; t++) {
        double p[3], c[3];
        for (int r = 0; r < 3; r++)
            p[r] = w_qkv[r][0] * u[t][0] + w_qkv[r][1] * u[t][1];
        for (int r = 0; r < 3; r++) {
            c[r] = silu_d(w_conv[r][0][0] * prev[r] + w_conv[r][0][1] * p[r]);
            prev[r] = p[r];
        }
        const double z = w_z[0][0] * u[t][0] + w_z[0][1] * u[t][1];
        const double b = w_b[0][0] * u[t][0] + w_b[0][1] * u[t][1];
        const double av = w_a[0][0] * u[t][0] + w_a[0][1] * u[t][1];
        const double q = c[0] / sqrt(c[0] * c[0] + 1e-6); /* dk^{-1/2} = 1 */
        const double k = c[1] / sqrt(c[1] * c[1] + 1e-6);
        const double beta = 1.0 / (1.0 + exp(-b));
        const double g = -exp(a_log[0]) * softplus_d(av + dt_bias[0]);
        s = s * exp(g);
        s = s + k * beta * (c[2] - s * k);
        const double o = s * q;
        const double h = o / sqrt(o * o + eps) * w_norm[0] * silu_d(z);
        for (int j = 0; j < 2; j++)
            max_d = fmax(max_d, fabs(w_out[j][0] * h - y[t][j]));
    }
    print_message("hand case: max |dy| = %.3g\n", max_d);
    assert_true(max_d <= 1e-14);
}

/* ---- an independent scalar oracle on general configurations ------------------------------------ */

/* One row of T tokens from zero state, every formula of docs/semantics.md §4.3-4.4 written out with scalar
 * loops and no shared code: the layout's own projections (Qwen3-Next de-interleaved on the
 * activations, as fix_query_key_value_ordering does), the conv window as explicit history indices,
 * key head h / r, the closed-form state update S = e^g (I - β k̂k̂ᵀ) S + β k̂vᵀ, per-head norm then
 * gate. y [T][D]. */
static void oracle_forward(struct weight_set *ws, const struct mc_gdn_config *c, int64_t T, const double *u, double *y)
{
    const struct dims d = dims_of(c);
    const int64_t D = d.D, Hv = d.Hv, dk = d.dk, dv = d.dv, K = d.K, r = d.r, kd = d.kd, vd = d.vd, C = d.C;
    const double *w_conv = weight_find(ws, "conv1d.weight"), *dt_bias = weight_find(ws, "dt_bias");
    const double *a_log = weight_find(ws, "A_log"), *w_norm = weight_find(ws, "norm.weight");
    const double *w_out = weight_find(ws, "out_proj.weight");
    double *mq = calloc((size_t)(T * C), sizeof *mq);  /* [T][C] mixed_qkv before the conv */
    double *z = calloc((size_t)(T * vd), sizeof *z);   /* [T][Hv][dv] */
    double *bb = calloc((size_t)(T * Hv), sizeof *bb); /* [T][Hv] */
    double *aa = calloc((size_t)(T * Hv), sizeof *aa); /* [T][Hv] */
    double *xc = calloc((size_t)C, sizeof *xc);
    double *S = calloc((size_t)(Hv * dk * dv), sizeof *S);
    double *Pm = calloc((size_t)(dk * dv), sizeof *Pm);
    double *yy = calloc((size_t)vd, sizeof *yy);
    double *raw = calloc((size_t)(C + vd + 2 * Hv), sizeof *raw);
    assert_true(mq && z && bb && aa && xc && S && Pm && yy && raw);

    for (int64_t t = 0; t < T; t++) {
        const double *ut = u + t * D;
        if (c->layout == MC_GDN_LAYOUT_QWEN3_5) {
            const double *wqkv = weight_find(ws, "in_proj_qkv.weight"), *wz = weight_find(ws, "in_proj_z.weight");
            const double *wb = weight_find(ws, "in_proj_b.weight"), *wa = weight_find(ws, "in_proj_a.weight");
            for (int64_t o = 0; o < C; o++)
                for (int64_t i = 0; i < D; i++)
                    mq[t * C + o] += wqkv[o * D + i] * ut[i];
            for (int64_t o = 0; o < vd; o++)
                for (int64_t i = 0; i < D; i++)
                    z[t * vd + o] += wz[o * D + i] * ut[i];
            for (int64_t h = 0; h < Hv; h++)
                for (int64_t i = 0; i < D; i++) {
                    bb[t * Hv + h] += wb[h * D + i] * ut[i];
                    aa[t * Hv + h] += wa[h * D + i] * ut[i];
                }
        } else {
            const double *wqkvz = weight_find(ws, "in_proj_qkvz.weight"), *wba = weight_find(ws, "in_proj_ba.weight");
            double *qkvz = raw, *ba = raw + C + vd; /* [Hk][2dk + 2r dv], [Hk][2r] */
            for (int64_t o = 0; o < C + vd; o++) {
                qkvz[o] = 0.0;
                for (int64_t i = 0; i < D; i++)
                    qkvz[o] += wqkvz[o * D + i] * ut[i];
            }
            for (int64_t o = 0; o < 2 * Hv; o++) {
                ba[o] = 0.0;
                for (int64_t i = 0; i < D; i++)
                    ba[o] += wba[o * D + i] * ut[i];
            }
            const int64_t blk = 2 * dk + 2 * r * dv;
            for (int64_t j = 0; j < d.Hk; j++) {
                const double *hq = qkvz + j * blk;
                for (int64_t e = 0; e < dk; e++) {
                    mq[t * C + j * dk + e] = hq[e];
                    mq[t * C + kd + j * dk + e] = hq[dk + e];
                }
                for (int64_t sidx = 0; sidx < r; sidx++) {
                    const int64_t h = j * r + sidx;
                    for (int64_t e = 0; e < dv; e++) {
                        mq[t * C + 2 * kd + h * dv + e] = hq[2 * dk + sidx * dv + e];
                        z[t * vd + h * dv + e] = hq[2 * dk + r * dv + sidx * dv + e];
                    }
                    bb[t * Hv + h] = ba[j * 2 * r + sidx];
                    aa[t * Hv + h] = ba[j * 2 * r + r + sidx];
                }
            }
        }
    }

    for (int64_t t = 0; t < T; t++) {
        for (int64_t ch = 0; ch < C; ch++) { /* conv(x)[t] = sum_k w[k] x[t-(K-1)+k], zero before 0 */
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++) {
                int64_t tau = t - (K - 1) + k;
                acc += w_conv[ch * K + k] * (tau >= 0 ? mq[tau * C + ch] : 0.0);
            }
            xc[ch] = silu_d(acc);
        }
        for (int64_t h = 0; h < Hv; h++) {
            const int64_t j = h / r;
            const double *q = xc + j * dk, *k = xc + kd + j * dk, *v = xc + 2 * kd + h * dv;
            double nq = 0.0, nk = 0.0;
            for (int64_t i = 0; i < dk; i++) {
                nq += q[i] * q[i];
                nk += k[i] * k[i];
            }
            nq = sqrt(nq + 1e-6);
            nk = sqrt(nk + 1e-6);
            const double beta = 1.0 / (1.0 + exp(-bb[t * Hv + h]));
            const double g = -exp(a_log[h]) * softplus_d(aa[t * Hv + h] + dt_bias[h]);
            double *Sh = S + h * dk * dv;
            for (int64_t i = 0; i < dk * dv; i++)
                Pm[i] = exp(g) * Sh[i];
            for (int64_t jj = 0; jj < dv; jj++) {
                double kP = 0.0; /* (k̂ᵀ P)[jj] */
                for (int64_t l = 0; l < dk; l++)
                    kP += k[l] / nk * Pm[l * dv + jj];
                for (int64_t i = 0; i < dk; i++)
                    Sh[i * dv + jj] = Pm[i * dv + jj] - beta * (k[i] / nk) * kP + beta * (k[i] / nk) * v[jj];
            }
            double ms = 0.0;
            for (int64_t jj = 0; jj < dv; jj++) {
                double o = 0.0;
                for (int64_t i = 0; i < dk; i++)
                    o += Sh[i * dv + jj] * (q[i] / nq / sqrt((double)dk));
                yy[h * dv + jj] = o;
                ms += o * o;
            }
            ms /= (double)dv;
            for (int64_t jj = 0; jj < dv; jj++)
                yy[h * dv + jj] =
                    yy[h * dv + jj] / sqrt(ms + c->rms_norm_eps) * w_norm[jj] * silu_d(z[t * vd + h * dv + jj]);
        }
        for (int64_t o = 0; o < D; o++) {
            double acc = 0.0;
            for (int64_t i = 0; i < vd; i++)
                acc += w_out[o * vd + i] * yy[i];
            y[t * D + o] = acc;
        }
    }
    free(raw);
    free(yy);
    free(Pm);
    free(S);
    free(xc);
    free(aa);
    free(bb);
    free(z);
    free(mq);
}

static void test_scalar_oracle(void **state)
{
    (void)state;
    /* r = 2 with dk < dv, and r = 3 with one key head and dk > dv. */
    struct mc_gdn_config cfgs[2] = {small_config(0), small_config(0)};
    cfgs[1].num_key_heads = 1;
    cfgs[1].num_value_heads = 3;
    cfgs[1].key_head_dim = 4;
    cfgs[1].value_head_dim = 2;
    cfgs[1].conv_kernel = 3;
    cfgs[1].rms_norm_eps = 1e-3;
    for (size_t ci = 0; ci < 2; ci++) {
        for (int li = 0; li < 2; li++) {
            struct mc_gdn_config cfg = cfgs[ci];
            cfg.layout = layouts[li];
            struct weight_set ws;
            struct mixer mx;
            mixer_init(&mx, &cfg, MC_DTYPE_F64, 61 + ci, &ws);
            const int64_t T = 12, D = mx.D;
            double *x = random_x(T * D, 13);
            double *y = malloc((size_t)(T * D) * sizeof *y), *y_or = malloc((size_t)(T * D) * sizeof *y_or);
            assert_true(y && y_or);
            forward_f64(&mx, NULL, 1, T, 0, T, x, NULL, y);
            oracle_forward(&ws, &cfg, T, x, y_or);
            double d = max_abs_diff(y, y_or, T * D);
            print_message("scalar oracle (%s, Hk %lld Hv %lld dk %lld dv %lld): max |dy| = %.3g (max |y| = %.3g)\n",
                          layout_name(cfg.layout), (long long)cfg.num_key_heads, (long long)cfg.num_value_heads,
                          (long long)cfg.key_head_dim, (long long)cfg.value_head_dim, d, max_abs(y_or, T * D));
            assert_true(max_abs(y_or, T * D) > 1e-2);
            assert_true(d <= 1e-14);
            free(y_or);
            free(y);
            free(x);
            weight_set_free(&ws);
            mixer_free(&mx);
        }
    }
}

/* ---- the two layouts agree on interleaved weights ---------------------------------------------- */

static void test_layouts_agree(void **state)
{
    (void)state;
    const struct mc_gdn_config c35 = small_config(MC_GDN_LAYOUT_QWEN3_5);
    const struct mc_gdn_config cnext = small_config(MC_GDN_LAYOUT_QWEN3_NEXT);
    struct weight_set w35, wnext;
    struct mixer m35, mnext;
    weight_set_random(&w35, &c35, 71);
    weight_set_interleave(&wnext, &w35, &c35);
    mixer_create(&m35, &c35, MC_DTYPE_F64, &w35);
    mixer_create(&mnext, &cnext, MC_DTYPE_F64, &wnext);
    const int64_t B = 2, T = 11, D = m35.D;
    double *x = random_x(B * T * D, 17);
    double *ya = malloc((size_t)(B * T * D) * sizeof *ya), *yb = malloc((size_t)(B * T * D) * sizeof *yb);
    assert_true(ya && yb);
    struct mc_cache *ca = cache_new(&m35, B), *cb = cache_new(&mnext, B);
    static const int64_t pieces[] = {4, 1, 6};
    for (int64_t i = 0, t0 = 0; i < 3; t0 += pieces[i++]) {
        forward_f64(&m35, ca, B, T, t0, pieces[i], x, NULL, ya);
        forward_f64(&mnext, cb, B, T, t0, pieces[i], x, NULL, yb);
    }
    double *sa = cache_get(&m35, ca, B), *sb = cache_get(&mnext, cb, B);
    const double dy = max_abs_diff(ya, yb, B * T * D);
    const double dc = max_abs_diff(sa, sb, B * (m35.C * m35.K + m35.state_row));
    print_message("qwen3_5 vs interleaved qwen3_next: max |dy| = %.3g, max |dcache| = %.3g\n", dy, dc);
    assert_true(dy <= 1e-15);
    assert_true(dc <= 1e-15);

    /* The Qwen3.5 rows merely concatenated (qkv | z, b | a) are not the Qwen3-Next layout: another
     * model, so the layout is not ignored. */
    struct weight_set wcat;
    struct mixer m2;
    weight_set_interleave(&wcat, &w35, &c35);
    double *qkvz = weight_find(&wcat, "in_proj_qkvz.weight"), *ba = weight_find(&wcat, "in_proj_ba.weight");
    const int64_t C = m35.C, vd = 4 * 5, Hv = 4;
    memcpy(qkvz, weight_find(&w35, "in_proj_qkv.weight"), (size_t)(C * D) * sizeof(double));
    memcpy(qkvz + C * D, weight_find(&w35, "in_proj_z.weight"), (size_t)(vd * D) * sizeof(double));
    memcpy(ba, weight_find(&w35, "in_proj_b.weight"), (size_t)(Hv * D) * sizeof(double));
    memcpy(ba + Hv * D, weight_find(&w35, "in_proj_a.weight"), (size_t)(Hv * D) * sizeof(double));
    mixer_create(&m2, &cnext, MC_DTYPE_F64, &wcat);
    forward_f64(&m2, NULL, B, T, 0, T, x, NULL, yb);
    forward_f64(&m35, NULL, B, T, 0, T, x, NULL, ya);
    assert_true(max_abs_diff(ya, yb, B * T * D) > 1e-6);

    mixer_free(&m2);
    weight_set_free(&wcat);
    m35.ops->cache_free(m35.model, ca);
    mnext.ops->cache_free(mnext.model, cb);
    free(sb);
    free(sa);
    free(yb);
    free(ya);
    free(x);
    mixer_free(&mnext);
    mixer_free(&m35);
    weight_set_free(&wnext);
    weight_set_free(&w35);
}

/* ---- f32 against f64 --------------------------------------------------------------------------- */

static void test_f32_matches_f64(void **state)
{
    (void)state;
    for (int li = 0; li < 2; li++) {
        const struct mc_gdn_config cfg = small_config(layouts[li]);
        struct mixer m64, m32;
        mixer_init(&m64, &cfg, MC_DTYPE_F64, 31, NULL);
        mixer_init(&m32, &cfg, MC_DTYPE_F32, 31, NULL);
        check_f32_matches_f64(&m64, &m32, layout_name(cfg.layout));
        mixer_free(&m32);
        mixer_free(&m64);
    }
}

/* ---- error paths and the cache round trip ------------------------------------------------------ */

static enum mc_backend_status try_create(const struct mc_gdn_config *cfg, enum mc_family family, enum mc_dtype dtype,
                                         struct mc_weight *w, int n, struct mc_msg *msg)
{
    return try_create_ops(mc_reference_gdn_ops(), cfg, family, dtype, w, n, msg);
}

/* Copies ws's entries without the one named `drop`; returns the count. */
static int weights_without(const struct weight_set *ws, const char *drop, struct mc_weight *w)
{
    int n = 0;
    for (int i = 0; i < ws->n; i++)
        if (strcmp(ws->w[i].name, drop) != 0)
            w[n++] = ws->w[i];
    return n;
}

static void test_create_errors(void **state)
{
    (void)state;
    struct mc_gdn_config cfg = small_config(MC_GDN_LAYOUT_QWEN3_5), cfgn = small_config(MC_GDN_LAYOUT_QWEN3_NEXT);
    struct weight_set ws, wn;
    struct mc_msg msg;
    weight_set_random(&ws, &cfg, 3);
    weight_set_pack(&ws, MC_DTYPE_F64);
    weight_set_random(&wn, &cfgn, 4);
    weight_set_pack(&wn, MC_DTYPE_F64);
    const int n = ws.n;
    struct mc_weight w[WS_MAX + 1]; /* room for a duplicate */

    check_create_desc(mc_reference_gdn_ops(), &cfg, MC_FAMILY_GDN, MC_FAMILY_MAMBA2, ws.w, n);
    assert_int_equal(try_create(&cfgn, MC_FAMILY_GDN, MC_DTYPE_F64, wn.w, wn.n, &msg), MC_BACKEND_OK);
    assert_int_equal(try_create(&cfg, MC_FAMILY_GDN, MC_DTYPE_F64, NULL, n, &msg), MC_BACKEND_INVALID);

    /* Missing weights, one per layout. C = 2*2*3 + 4*5 = 32, value_dim = 20. */
    int m = weights_without(&ws, "in_proj_z.weight", w);
    assert_int_equal(try_create(&cfg, MC_FAMILY_GDN, MC_DTYPE_F64, w, m, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "missing weight 'in_proj_z.weight'", "[20, 8]");
    m = weights_without(&wn, "in_proj_ba.weight", w);
    assert_int_equal(try_create(&cfgn, MC_FAMILY_GDN, MC_DTYPE_F64, w, m, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "missing weight 'in_proj_ba.weight'", "[8, 8]");
    m = weights_without(&ws, "A_log", w);
    assert_int_equal(try_create(&cfg, MC_FAMILY_GDN, MC_DTYPE_F64, w, m, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "missing weight 'A_log'", "[4]");

    /* Wrong shapes. */
    memcpy(w, ws.w, sizeof ws.w);
    w[weight_index(&ws, "in_proj_qkv.weight")].dims[1] = 9;
    assert_int_equal(try_create(&cfg, MC_FAMILY_GDN, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "'in_proj_qkv.weight'", "expected shape [32, 8], got [32, 9]");
    memcpy(w, wn.w, sizeof wn.w);
    w[weight_index(&wn, "in_proj_qkvz.weight")].dims[0] = 51;
    assert_int_equal(try_create(&cfgn, MC_FAMILY_GDN, MC_DTYPE_F64, w, wn.n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "'in_proj_qkvz.weight'", "expected shape [52, 8], got [51, 8]");
    memcpy(w, ws.w, sizeof ws.w);
    const int ic = weight_index(&ws, "conv1d.weight");
    w[ic].ndim = 2; /* conv1d.weight as [C][K] */
    w[ic].dims[1] = 4;
    assert_int_equal(try_create(&cfg, MC_FAMILY_GDN, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "'conv1d.weight'", "expected shape [32, 1, 4], got [32, 4]");
    memcpy(w, ws.w, sizeof ws.w);
    w[weight_index(&ws, "norm.weight")].dims[0] = 20; /* value_dim instead of dv */
    assert_int_equal(try_create(&cfg, MC_FAMILY_GDN, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "'norm.weight'", "expected shape [5], got [20]");

    /* Weights of the other layout. */
    assert_int_equal(try_create(&cfgn, MC_FAMILY_GDN, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "'in_proj_qkv.weight'", "qwen3_next");
    assert_int_equal(try_create(&cfg, MC_FAMILY_GDN, MC_DTYPE_F64, wn.w, wn.n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "'in_proj_qkvz.weight'", "qwen3_5");

    /* Unknown, duplicated weights; a weight without data. */
    memcpy(w, ws.w, sizeof ws.w);
    w[n] = w[0];
    w[n].name = "conv1d.bias";
    assert_int_equal(try_create(&cfg, MC_FAMILY_GDN, MC_DTYPE_F64, w, n + 1, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "unknown weight 'conv1d.bias'", NULL);
    memcpy(w, ws.w, sizeof ws.w);
    w[n] = w[2];
    assert_int_equal(try_create(&cfg, MC_FAMILY_GDN, MC_DTYPE_F64, w, n + 1, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "twice", NULL);
    memcpy(w, ws.w, sizeof ws.w);
    w[weight_index(&ws, "dt_bias")].data = NULL;
    assert_int_equal(try_create(&cfg, MC_FAMILY_GDN, MC_DTYPE_F64, w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "dt_bias", "no data");

    /* Configuration. */
    struct mc_gdn_config bad = cfg;
    bad.layout = 3;
    assert_int_equal(try_create(&bad, MC_FAMILY_GDN, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "layout", "got 3");
    bad = cfg;
    bad.layout = 0;
    assert_int_equal(try_create(&bad, MC_FAMILY_GDN, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "layout", NULL);
    bad = cfg;
    bad.num_value_heads = 3;
    assert_int_equal(try_create(&bad, MC_FAMILY_GDN, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "num_value_heads", "multiple of 'num_key_heads'");
    bad = cfg;
    bad.key_head_dim = 0;
    assert_int_equal(try_create(&bad, MC_FAMILY_GDN, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "key_head_dim", NULL);
    bad = cfg;
    bad.chunk_size = -1;
    assert_int_equal(try_create(&bad, MC_FAMILY_GDN, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "chunk_size", NULL);
    bad = cfg;
    bad.rms_norm_eps = 0.0;
    assert_int_equal(try_create(&bad, MC_FAMILY_GDN, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "rms_norm_eps", NULL);
    bad.rms_norm_eps = NAN;
    assert_int_equal(try_create(&bad, MC_FAMILY_GDN, MC_DTYPE_F64, ws.w, n, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "rms_norm_eps", NULL);

    weight_set_free(&wn);
    weight_set_free(&ws);
}

/* No model, no arguments, no cache to export: refused. */
static void forward_errors_gdn(struct mixer *mx, struct mc_cache *c1, struct mc_cache *c2, struct mc_msg *msg)
{
    (void)c1;
    const struct mc_backend_ops *ops = mx->ops;
    double x[2 * 3 * 8] = {0}, y[2 * 3 * 8];
    struct mc_forward_args a = {.batch = 2, .len = 3, .x = x, .mask = NULL, .y = y};
    assert_int_equal(ops->forward(NULL, c2, &a, msg), MC_BACKEND_INVALID);
    assert_int_equal(ops->forward(mx->model, c2, NULL, msg), MC_BACKEND_INVALID);
    assert_int_equal(ops->cache_export(mx->model, NULL, NULL, NULL, msg), MC_BACKEND_INVALID);
}

static void test_forward_errors(void **state)
{
    (void)state;
    const struct mc_gdn_config cfg = small_config(MC_GDN_LAYOUT_QWEN3_5);
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 41, NULL);
    check_forward_errors(&mx, forward_errors_gdn);
    mixer_free(&mx);
}

/* The imported cache and the original end the continuation with the same export. */
static void round_trip_gdn(struct mixer *mx, const struct round_trip *rt)
{
    const int64_t B = rt->B;
    double *end_a = cache_get(mx, rt->a, B), *end_b = cache_get(mx, rt->b, B);
    assert_memory_equal(end_a, end_b, (size_t)(B * (mx->C * mx->K + mx->state_row)) * sizeof(double));
    free(end_b);
    free(end_a);
}

/* Export -> import into a fresh cache -> continue: equals continuing the original; copy likewise.
 * An imported cache is primed: its continuation is seeded from the import, not from zeros. */
static void test_cache_round_trip(void **state)
{
    (void)state;
    const struct mc_gdn_config cfg = small_config(MC_GDN_LAYOUT_QWEN3_NEXT);
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 51, NULL);
    check_cache_round_trip(&mx, NULL, round_trip_gdn);
    mixer_free(&mx);
}

static void test_ops_identity(void **state)
{
    (void)state;
    check_ops_identity(mc_reference_gdn_ops(), MC_FAMILY_GDN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_identity),
        cmocka_unit_test(test_split_invariance_qwen3_5),
        cmocka_unit_test(test_split_invariance_qwen3_next),
        cmocka_unit_test(test_mask_semantics),
        cmocka_unit_test(test_hand_case),
        cmocka_unit_test(test_scalar_oracle),
        cmocka_unit_test(test_layouts_agree),
        cmocka_unit_test(test_f32_matches_f64),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_forward_errors),
        cmocka_unit_test(test_cache_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
