/*
 * test_cpu_gdn.c — the optimized CPU Gated DeltaNet (kernels/cpu/gdn*.c) against the reference mixer
 * (reference/gdn.c) run in f64 on the same weights and inputs, through the ops struct only (the core
 * alone against a scalar f64 recurrence is test_cpu_gdn_core.c). Random configurations from a
 * fixed-seed LCG. Checks: prefill, primed multi-token and L == 1
 * against the reference; split invariance; chunk sizes 1/3/16/32/64/>L agree; r = 1, 2, 4; both
 * layouts; bitwise thread-count invariance (1/2/3); masks (left, right, middle, all padding,
 * L == 1); bf16/f16 storage; cache round trip; error paths. Measured errors are printed.
 *
 * Error metric: rel = max|a − b| / max|b| over a tensor (b the f64 reference).
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

#include "common.h"
#include "cpu.h"
#include "reference.h"

#define NW 12

/* f32 compute vs the f64 reference: f32 rounding through projections (D, Hv·dv terms), the chunk
 * products and the norm gives rel ~1e-7..1e-6 at these sizes (printed); 2e-5 leaves room without
 * admitting a wrong formula (a missing decay or a wrong head map gives rel > 1e-2). */
#define TOL_F32 2e-5

/* ---- fixtures ---------------------------------------------------------------------------------- */

struct lcg {
    uint64_t s;
};

static double lcg_next(struct lcg *g) /* U[-1, 1) */
{
    g->s = g->s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g->s >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0;
}

struct dims {
    int64_t D, Hk, Hv, dk, dv, K, r, kd, vd, C, S; /* S = Hv*dk*dv */
};

static struct dims dims_of(const struct mc_gdn_config *c)
{
    struct dims d = {.D = c->hidden_size, .Hk = c->num_key_heads, .Hv = c->num_value_heads,
                     .dk = c->key_head_dim, .dv = c->value_head_dim, .K = c->conv_kernel};
    d.r = d.Hv / d.Hk;
    d.kd = d.Hk * d.dk;
    d.vd = d.Hv * d.dv;
    d.C = 2 * d.kd + d.vd;
    d.S = d.Hv * d.dk * d.dv;
    return d;
}

static struct mc_gdn_config make_config(int64_t D, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, int64_t K,
                                        int32_t layout)
{
    struct mc_gdn_config c = {.hidden_size = D, .num_key_heads = Hk, .num_value_heads = Hv, .key_head_dim = dk,
                              .value_head_dim = dv, .conv_kernel = K, .chunk_size = 64, .rms_norm_eps = 1e-6,
                              .layout = layout};
    return c;
}

/* Weights in HF names and shapes; values in f64, already representable in the storage dtype. */
struct weight_set {
    int n;
    struct mc_weight w[NW];
    double *val[NW];
    void *packed[NW]; /* in the storage dtype, for the cpu model */
    double *f64[NW];  /* the same values, for the reference */
};

static int64_t shape_elems(const struct mc_weight *w)
{
    int64_t n = 1;
    for (int i = 0; i < w->ndim; i++)
        n *= w->dims[i];
    return n;
}

/* v rounded to what the storage dtype holds. */
static double round_to(enum mc_dtype dt, double v)
{
    float f = (float)v;
    mc_cpu_round_f32(dt, &f, 1);
    return (double)f;
}

static void weight_add(struct weight_set *ws, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2,
                       double base, double scale, struct lcg *g)
{
    assert_true(ws->n < NW);
    struct mc_weight *w = &ws->w[ws->n];
    w->name = name;
    w->ndim = ndim;
    w->dims[0] = d0;
    w->dims[1] = d1;
    w->dims[2] = d2;
    const int64_t n = shape_elems(w);
    ws->val[ws->n] = malloc((size_t)n * sizeof(double));
    assert_non_null(ws->val[ws->n]);
    for (int64_t i = 0; i < n; i++)
        ws->val[ws->n][i] = base + scale * lcg_next(g);
    ws->n++;
}

/* a_log_base moves the decay: g ≈ −exp(a_log)·softplus(...) per token. */
static void weight_set_random(struct weight_set *ws, const struct mc_gdn_config *c, uint64_t seed, double a_log_base)
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
    weight_add(ws, "conv1d.weight", 3, d.C, 1, d.K, 0.0, 0.5, &g);
    weight_add(ws, "dt_bias", 1, d.Hv, 0, 0, 0.0, 1.0, &g);
    weight_add(ws, "A_log", 1, d.Hv, 0, 0, a_log_base, 1.0, &g);
    weight_add(ws, "norm.weight", 1, d.dv, 0, 0, 1.0, 0.2, &g);
    weight_add(ws, "out_proj.weight", 2, d.D, d.vd, 0, 0.0, 1.0 / sqrt((double)d.vd), &g);
}

/* Rounds the values to dt and makes the packed (dt) and f64 copies. */
static void weight_set_pack(struct weight_set *ws, enum mc_dtype dt)
{
    for (int i = 0; i < ws->n; i++) {
        const int64_t n = shape_elems(&ws->w[i]);
        float *f = malloc((size_t)n * sizeof *f);
        ws->f64[i] = malloc((size_t)n * sizeof(double));
        ws->packed[i] = malloc((size_t)n * mc_cpu_dtype_bytes(dt));
        assert_true(f && ws->f64[i] && ws->packed[i]);
        for (int64_t j = 0; j < n; j++) {
            ws->val[i][j] = round_to(dt, ws->val[i][j]);
            ws->f64[i][j] = ws->val[i][j];
            f[j] = (float)ws->val[i][j];
        }
        assert_int_equal(mc_cpu_from_f32(dt, f, ws->packed[i], (size_t)n), 0);
        free(f);
    }
}

static void weight_set_free(struct weight_set *ws)
{
    for (int i = 0; i < ws->n; i++) {
        free(ws->val[i]);
        free(ws->packed[i]);
        free(ws->f64[i]);
    }
    memset(ws, 0, sizeof *ws);
}

/* A cpu model and the f64 reference model on the same weights. */
struct rig {
    struct mc_gdn_config cfg;
    struct dims d;
    enum mc_dtype dt;
    struct weight_set ws;
    const struct mc_backend_ops *cpu, *ref;
    struct mc_model *mref;
};

static struct mc_model *cpu_model(struct rig *g, int64_t chunk, int32_t threads)
{
    struct mc_weight w[NW];
    for (int i = 0; i < g->ws.n; i++) {
        w[i] = g->ws.w[i];
        w[i].data = g->ws.packed[i];
    }
    struct mc_model_desc desc = {.family = MC_FAMILY_GDN, .dtype = g->dt, .config = &g->cfg, .weights = w,
                                 .n_weights = g->ws.n, .chunk_size = chunk, .threads = threads};
    struct mc_model *m = NULL;
    struct mc_msg msg = {{0}};
    enum mc_backend_status st = g->cpu->model_create(&desc, &m, &msg);
    if (st != MC_BACKEND_OK)
        fail_msg("cpu model_create: %d %s", (int)st, msg.text);
    return m;
}

static void rig_init(struct rig *g, const struct mc_gdn_config *cfg, enum mc_dtype dt, uint64_t seed,
                     double a_log_base)
{
    memset(g, 0, sizeof *g);
    g->cfg = *cfg;
    g->d = dims_of(cfg);
    g->dt = dt;
    g->cpu = mc_cpu_gdn_ops();
    g->ref = mc_reference_gdn_ops();
    weight_set_random(&g->ws, cfg, seed, a_log_base);
    weight_set_pack(&g->ws, dt);
    struct mc_weight w[NW];
    for (int i = 0; i < g->ws.n; i++) {
        w[i] = g->ws.w[i];
        w[i].data = g->ws.f64[i];
    }
    struct mc_model_desc desc = {.family = MC_FAMILY_GDN, .dtype = MC_DTYPE_F64, .config = cfg, .weights = w,
                                 .n_weights = g->ws.n};
    struct mc_msg msg = {{0}};
    enum mc_backend_status st = g->ref->model_create(&desc, &g->mref, &msg);
    if (st != MC_BACKEND_OK)
        fail_msg("reference model_create: %d %s", (int)st, msg.text);
}

static void rig_free(struct rig *g)
{
    g->ref->model_destroy(g->mref);
    weight_set_free(&g->ws);
}

static struct mc_cache *cache_new(const struct mc_backend_ops *ops, struct mc_model *m, int64_t B)
{
    struct mc_cache *c = NULL;
    struct mc_msg msg = {{0}};
    enum mc_backend_status st = ops->cache_alloc(m, B, &c, &msg);
    if (st != MC_BACKEND_OK)
        fail_msg("cache_alloc: %d %s", (int)st, msg.text);
    return c;
}

/* x [B][T][D] values (representable in the storage dtype); runs tokens t0..t0+L-1 of every row. */
static void run(struct rig *g, int is_ref, struct mc_model *m, struct mc_cache *c, int64_t B, int64_t T, int64_t t0,
                int64_t L, const double *x, const uint8_t *mask, double *y)
{
    const int64_t D = g->d.D, n = B * L * D;
    const enum mc_dtype dt = is_ref ? MC_DTYPE_F64 : g->dt;
    const size_t eb = is_ref ? sizeof(double) : mc_cpu_dtype_bytes(dt);
    float *f = malloc((size_t)n * sizeof *f);
    double *xd = malloc((size_t)n * sizeof *xd);
    void *xs = malloc((size_t)n * eb), *ys = malloc((size_t)n * eb);
    uint8_t *ms = malloc((size_t)(B * L));
    assert_true(f && xd && xs && ys && ms);
    for (int64_t b = 0; b < B; b++) {
        memcpy(xd + b * L * D, x + (b * T + t0) * D, (size_t)(L * D) * sizeof *xd);
        if (mask)
            memcpy(ms + b * L, mask + b * T + t0, (size_t)L);
    }
    if (is_ref) {
        memcpy(xs, xd, (size_t)n * sizeof(double));
        for (int64_t i = 0; i < n; i++)
            ((double *)ys)[i] = NAN;
    } else {
        for (int64_t i = 0; i < n; i++)
            f[i] = (float)xd[i];
        mc_cpu_from_f32(dt, f, xs, (size_t)n);
        memset(ys, 0xff, (size_t)n * eb); /* NaN in every dtype */
    }
    struct mc_forward_args a = {.batch = B, .len = L, .x = xs, .mask = mask ? ms : NULL, .y = ys};
    struct mc_msg msg = {{0}};
    const struct mc_backend_ops *ops = is_ref ? g->ref : g->cpu;
    enum mc_backend_status st = ops->forward(m, c, &a, &msg);
    if (st != MC_BACKEND_OK)
        fail_msg("%s forward: %d %s", ops->name, (int)st, msg.text);
    if (!is_ref)
        mc_cpu_to_f32(dt, ys, f, (size_t)n);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < L * D; i++)
            y[(b * T + t0) * D + i] = is_ref ? ((double *)ys)[b * L * D + i] : (double)f[b * L * D + i];
    free(ms);
    free(ys);
    free(xs);
    free(xd);
    free(f);
}

/* Exported cache as f64: [B][C][K] then [B][Hv][dk][dv]. */
static double *cache_get(struct rig *g, int is_ref, struct mc_model *m, struct mc_cache *c, int64_t B)
{
    const int64_t nw = B * g->d.C * g->d.K, ns = B * g->d.S;
    double *out = malloc((size_t)(nw + ns) * sizeof *out);
    assert_non_null(out);
    struct mc_msg msg = {{0}};
    const struct mc_backend_ops *ops = is_ref ? g->ref : g->cpu;
    enum mc_backend_status st;
    if (is_ref) {
        st = ops->cache_export(m, c, out, out + nw, &msg);
    } else {
        float *f = malloc((size_t)(nw + ns) * sizeof *f);
        assert_non_null(f);
        st = ops->cache_export(m, c, f, f + nw, &msg);
        for (int64_t i = 0; i < nw + ns; i++)
            out[i] = f[i];
        free(f);
    }
    if (st != MC_BACKEND_OK)
        fail_msg("cache_export: %d %s", (int)st, msg.text);
    return out;
}

static double rel_err(const double *a, const double *b, int64_t n)
{
    double md = 0.0, mb = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs(a[i] - b[i]);
        if (!(d <= md))
            md = isnan(d) ? INFINITY : d;
        mb = fmax(mb, fabs(b[i]));
    }
    return md / (mb > 0.0 ? mb : 1.0);
}

static double *random_vec(int64_t n, uint64_t seed, enum mc_dtype dt)
{
    struct lcg g = {seed};
    double *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++)
        x[i] = round_to(dt, lcg_next(&g));
    return x;
}

static double *dalloc(int64_t n)
{
    double *p = malloc((size_t)n * sizeof *p);
    assert_non_null(p);
    return p;
}

/* ---- the mixer against the reference ------------------------------------------------------------ */

/* Prefill without a cache; then with a cache: prefill P, a primed multi-token forward, L == 1 steps.
 * Outputs and the final caches against the reference. Returns the worst rel error. */
static double mixer_vs_reference(struct rig *g, int64_t chunk, int32_t threads, int64_t B, int64_t T, int64_t P,
                                 int64_t Q, uint64_t seed, const uint8_t *mask)
{
    const int64_t D = g->d.D, n = B * T * D, nc = B * (g->d.C * g->d.K + g->d.S);
    struct mc_model *mc = cpu_model(g, chunk, threads);
    double *x = random_vec(n, seed, g->dt), *yc = dalloc(n), *yr = dalloc(n);

    run(g, 0, mc, NULL, B, T, 0, T, x, mask, yc);
    run(g, 1, g->mref, NULL, B, T, 0, T, x, mask, yr);
    const double e_prefill = rel_err(yc, yr, n);

    struct mc_cache *cc = cache_new(g->cpu, mc, B), *cr = cache_new(g->ref, g->mref, B);
    run(g, 0, mc, cc, B, T, 0, P, x, mask, yc);
    run(g, 1, g->mref, cr, B, T, 0, P, x, mask, yr);
    run(g, 0, mc, cc, B, T, P, Q, x, mask, yc);
    run(g, 1, g->mref, cr, B, T, P, Q, x, mask, yr);
    for (int64_t t = P + Q; t < T; t++) {
        run(g, 0, mc, cc, B, T, t, 1, x, mask, yc);
        run(g, 1, g->mref, cr, B, T, t, 1, x, mask, yr);
    }
    const double e_cached = rel_err(yc, yr, n);
    double *kc = cache_get(g, 0, mc, cc, B), *kr = cache_get(g, 1, g->mref, cr, B);
    const int64_t nw = B * g->d.C * g->d.K;
    const double e_win = rel_err(kc, kr, nw), e_state = rel_err(kc + nw, kr + nw, nc - nw);
    print_message("  %s r=%lld chunk=%lld threads=%d B=%lld T=%lld: rel y prefill %.2e, y cached %.2e, "
                  "window %.2e, state %.2e\n",
                  g->cfg.layout == MC_GDN_LAYOUT_QWEN3_5 ? "qwen3_5" : "qwen3_next", (long long)g->d.r,
                  (long long)chunk, (int)threads, (long long)B, (long long)T, e_prefill, e_cached, e_win, e_state);
    if (mask) /* a padding row is exactly 0 */
        for (int64_t i = 0; i < B * T; i++)
            for (int64_t j = 0; !mask[i] && j < D; j++)
                assert_true(yc[i * D + j] == 0.0);
    free(kr);
    free(kc);
    g->ref->cache_free(g->mref, cr);
    g->cpu->cache_free(mc, cc);
    free(yr);
    free(yc);
    free(x);
    g->cpu->model_destroy(mc);
    return fmax(fmax(e_prefill, e_cached), fmax(e_win, e_state));
}

static void test_vs_reference(void **state)
{
    (void)state;
    static const int64_t rs[] = {1, 2, 4};
    for (int l = 0; l < 2; l++) {
        const int32_t layout = l ? MC_GDN_LAYOUT_QWEN3_NEXT : MC_GDN_LAYOUT_QWEN3_5;
        for (int i = 0; i < 3; i++) {
            const int64_t Hk = 2, Hv = Hk * rs[i];
            const struct mc_gdn_config cfg = make_config(24, Hk, Hv, 8, 6, 4, layout);
            struct rig g;
            rig_init(&g, &cfg, MC_DTYPE_F32, 100 + (uint64_t)(l * 3 + i), -0.5);
            assert_true(mixer_vs_reference(&g, 8, 2, 2, 29, 13, 12, 7, NULL) < TOL_F32);
            rig_free(&g);
        }
    }
}

/* Chunk lengths 1, 3, 16, 32, 64 and longer than L: each against the reference and against chunk 64. */
static void test_chunk_sizes(void **state)
{
    (void)state;
    static const int64_t chunks[] = {1, 3, 16, 32, 64, 1000};
    const struct mc_gdn_config cfg = make_config(64, 2, 4, 32, 32, 4, MC_GDN_LAYOUT_QWEN3_5);
    struct rig g;
    rig_init(&g, &cfg, MC_DTYPE_F32, 7, -0.5);
    const int64_t B = 1, T = 150, D = g.d.D, n = B * T * D;
    double *x = random_vec(n, 8, g.dt), *yr = dalloc(n), *y64 = dalloc(n), *y = dalloc(n);
    struct mc_cache *cr = cache_new(g.ref, g.mref, B);
    run(&g, 1, g.mref, cr, B, T, 0, T, x, NULL, yr);
    double *kr = cache_get(&g, 1, g.mref, cr, B);
    double *k64 = NULL;
    const int64_t nc = B * (g.d.C * g.d.K + g.d.S);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
            if (pass == 0 && chunks[i] != 64)
                continue;
            struct mc_model *mc = cpu_model(&g, chunks[i], 2);
            struct mc_cache *cc = cache_new(g.cpu, mc, B);
            run(&g, 0, mc, cc, B, T, 0, T, x, NULL, pass ? y : y64);
            double *kc = cache_get(&g, 0, mc, cc, B);
            if (pass == 0) {
                k64 = kc;
            } else {
                const double ey = rel_err(y, yr, n), ec = rel_err(kc, kr, nc);
                const double dy = rel_err(y, y64, n), dc = rel_err(kc, k64, nc);
                print_message("  chunk %4lld, L=%lld: vs reference y %.2e cache %.2e; vs chunk 64 y %.2e cache %.2e\n",
                              (long long)chunks[i], (long long)T, ey, ec, dy, dc);
                assert_true(ey < TOL_F32 && ec < TOL_F32 && dy < TOL_F32 && dc < TOL_F32);
                free(kc);
            }
            g.cpu->cache_free(mc, cc);
            g.cpu->model_destroy(mc);
        }
    }
    free(k64);
    free(kr);
    g.ref->cache_free(g.mref, cr);
    free(y);
    free(y64);
    free(yr);
    free(x);
    rig_free(&g);
}

/* One forward equals any split into successive cached forwards (pieces of 1, < K, around the chunk). */
static void test_split_invariance(void **state)
{
    (void)state;
    const struct mc_gdn_config cfg = make_config(24, 2, 4, 8, 6, 4, MC_GDN_LAYOUT_QWEN3_NEXT);
    struct rig g;
    rig_init(&g, &cfg, MC_DTYPE_F32, 21, -0.5);
    const int64_t B = 2, T = 23, D = g.d.D, n = B * T * D, nc = B * (g.d.C * g.d.K + g.d.S);
    struct mc_model *mc = cpu_model(&g, 4, 2);
    double *x = random_vec(n, 22, g.dt), *yf = dalloc(n), *ys = dalloc(n);
    struct mc_cache *cf = cache_new(g.cpu, mc, B);
    run(&g, 0, mc, cf, B, T, 0, T, x, NULL, yf);
    double *kf = cache_get(&g, 0, mc, cf, B);
    static const int64_t splits[][24] = {
        {1, 22}, {22, 1}, {3, 1, 1, 18}, {4, 4, 4, 4, 4, 3}, {5, 1, 9, 8},
        {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    };
    double worst = 0.0;
    for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
        struct mc_cache *c = cache_new(g.cpu, mc, B);
        int64_t t0 = 0;
        for (int i = 0; t0 < T; i++) {
            run(&g, 0, mc, c, B, T, t0, splits[s][i], x, NULL, ys);
            t0 += splits[s][i];
        }
        double *k = cache_get(&g, 0, mc, c, B);
        worst = fmax(worst, fmax(rel_err(ys, yf, n), rel_err(k, kf, nc)));
        free(k);
        g.cpu->cache_free(mc, c);
    }
    print_message("  split invariance: worst rel %.2e\n", worst);
    assert_true(worst < TOL_F32);
    free(kf);
    g.cpu->cache_free(mc, cf);
    free(ys);
    free(yf);
    free(x);
    g.cpu->model_destroy(mc);
    rig_free(&g);
}

/* Results do not depend on the thread count, bit for bit: a prefill with a mask, a primed multi-token
 * forward and an L == 1 step, with 1, 2 and 3 threads (Hk = 1: the value heads are split into
 * groups when there are more threads). */
static void test_threads_bitwise(void **state)
{
    (void)state;
    const struct mc_gdn_config cfg = make_config(40, 1, 4, 16, 12, 3, MC_GDN_LAYOUT_QWEN3_5);
    struct rig g;
    rig_init(&g, &cfg, MC_DTYPE_F32, 31, -0.5);
    const int64_t B = 3, T = 70, D = g.d.D, n = B * T * D, nc = B * (g.d.C * g.d.K + g.d.S);
    double *x = random_vec(n, 32, g.dt), *y[3], *k[3];
    uint8_t *mask = malloc((size_t)(B * T));
    assert_non_null(mask);
    for (int64_t i = 0; i < B * T; i++)
        mask[i] = !(i % T < 5 && i / T == 1) && !(i % 7 == 3 && i / T == 2);
    for (int th = 0; th < 3; th++) {
        struct mc_model *mc = cpu_model(&g, 16, th + 1);
        struct mc_cache *c = cache_new(g.cpu, mc, B);
        y[th] = dalloc(n);
        run(&g, 0, mc, c, B, T, 0, 50, x, mask, y[th]);
        run(&g, 0, mc, c, B, T, 50, 19, x, mask, y[th]);
        run(&g, 0, mc, c, B, T, 69, 1, x, mask, y[th]);
        k[th] = cache_get(&g, 0, mc, c, B);
        g.cpu->cache_free(mc, c);
        g.cpu->model_destroy(mc);
    }
    for (int th = 1; th < 3; th++) {
        assert_memory_equal(y[th], y[0], (size_t)n * sizeof(double));
        assert_memory_equal(k[th], k[0], (size_t)nc * sizeof(double));
    }
    for (int th = 0; th < 3; th++) {
        free(y[th]);
        free(k[th]);
    }
    free(mask);
    free(x);
    rig_free(&g);
}

/* Masks: all real, left padded, right padded, holes, all padding; against the reference (which
 * skips padding tokens), padding rows 0; a padded row equals the row alone; a masked L == 1 step
 * leaves the cache unchanged bit for bit. */
static void test_masks(void **state)
{
    (void)state;
    const struct mc_gdn_config cfg = make_config(24, 2, 4, 8, 6, 4, MC_GDN_LAYOUT_QWEN3_5);
    struct rig g;
    rig_init(&g, &cfg, MC_DTYPE_F32, 41, -0.5);
    enum { B = 5, T = 21 };
    uint8_t mask[B * T];
    for (int t = 0; t < T; t++) {
        mask[0 * T + t] = 1;
        mask[1 * T + t] = t >= 6;         /* left padded */
        mask[2 * T + t] = t < 14;         /* right padded */
        mask[3 * T + t] = (t % 4) != 1;   /* holes */
        mask[4 * T + t] = 0;              /* all padding */
    }
    /* prefill 11 (row 2's padding starts in the multi-token part), multi-token 7, then L == 1 steps */
    const double e = mixer_vs_reference(&g, 4, 2, B, T, 11, 7, 42, mask);
    assert_true(e < TOL_F32);

    /* padded row == the row's real tokens alone */
    const int64_t D = g.d.D;
    struct mc_model *mc = cpu_model(&g, 4, 2);
    double *x = random_vec(B * T * D, 43, g.dt), *yb = dalloc(B * T * D), *ya = dalloc(T * D),
           *xa = dalloc(T * D);
    run(&g, 0, mc, NULL, B, T, 0, T, x, mask, yb);
    double worst = 0.0;
    for (int b = 1; b < 4; b++) {
        int64_t n = 0;
        for (int t = 0; t < T; t++)
            if (mask[b * T + t])
                memcpy(xa + (n++) * D, x + ((int64_t)b * T + t) * D, (size_t)D * sizeof *xa);
        run(&g, 0, mc, NULL, 1, n, 0, n, xa, NULL, ya);
        for (int t = 0, j = 0; t < T; t++)
            if (mask[b * T + t])
                worst = fmax(worst, rel_err(yb + ((int64_t)b * T + t) * D, ya + (j++) * D, D));
    }
    print_message("  padded row vs the row alone: rel %.2e\n", worst);
    assert_true(worst < TOL_F32);

    /* a masked L == 1 step on a primed cache: cache unchanged bit for bit, output 0 */
    struct mc_cache *c = cache_new(g.cpu, mc, 2);
    run(&g, 0, mc, c, 2, T, 0, 9, x, NULL, yb);
    double *k0 = cache_get(&g, 0, mc, c, 2);
    static const uint8_t m2[2 * T] = {0};
    run(&g, 0, mc, c, 2, T, 9, 1, x, m2, yb);
    double *k1 = cache_get(&g, 0, mc, c, 2);
    assert_memory_equal(k0, k1, (size_t)(2 * (g.d.C * g.d.K + g.d.S)) * sizeof(double));
    for (int64_t j = 0; j < D; j++)
        assert_true(yb[9 * D + j] == 0.0 && yb[(T + 9) * D + j] == 0.0);
    free(k1);
    free(k0);
    g.cpu->cache_free(mc, c);
    free(xa);
    free(ya);
    free(yb);
    free(x);
    g.cpu->model_destroy(mc);
    rig_free(&g);
}

/* bf16 / f16 storage against the reference run on the same rounded weights and inputs. The cpu
 * backend computes in f32 from exactly those values, so the caches (f32) agree at f32 precision
 * (TOL_F32); the output is rounded once to the storage dtype at the end, an error of at most the
 * unit roundoff u of its magnitude (bf16 u = 2^-8, f16 u = 2^-11; round to nearest), so rel (to the
 * tensor's max) <= u + the f32 error. Measured (printed): bf16 ~2.8e-3, f16 ~3e-4, under those
 * bounds; a wrong conversion (truncation, a byte order slip) exceeds them. */
static void test_storage_dtypes(void **state)
{
    (void)state;
    static const struct {
        enum mc_dtype dt;
        double tol_y;
    } cases[] = {{MC_DTYPE_BF16, 0x1p-8 + TOL_F32}, {MC_DTYPE_F16, 0x1p-11 + TOL_F32}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int l = 0; l < 2; l++) {
            const struct mc_gdn_config cfg =
                make_config(32, 2, 4, 16, 8, 4, l ? MC_GDN_LAYOUT_QWEN3_NEXT : MC_GDN_LAYOUT_QWEN3_5);
            struct rig g;
            rig_init(&g, &cfg, cases[i].dt, 51 + i, -0.5);
            const int64_t B = 2, T = 40, D = g.d.D, n = B * T * D;
            struct mc_model *mc = cpu_model(&g, 16, 2);
            double *x = random_vec(n, 52, g.dt), *yc = dalloc(n), *yr = dalloc(n);
            struct mc_cache *cc = cache_new(g.cpu, mc, B), *cr = cache_new(g.ref, g.mref, B);
            const int64_t pieces[][2] = {{0, 25}, {25, 14}, {39, 1}};
            for (int p = 0; p < 3; p++) {
                run(&g, 0, mc, cc, B, T, pieces[p][0], pieces[p][1], x, NULL, yc);
                run(&g, 1, g.mref, cr, B, T, pieces[p][0], pieces[p][1], x, NULL, yr);
            }
            double *kc = cache_get(&g, 0, mc, cc, B), *kr = cache_get(&g, 1, g.mref, cr, B);
            const double ey = rel_err(yc, yr, n), ek = rel_err(kc, kr, B * (g.d.C * g.d.K + g.d.S));
            print_message("  %s %s: rel y %.2e (bound %.2e), cache %.2e\n",
                          cases[i].dt == MC_DTYPE_BF16 ? "bf16" : "f16", l ? "qwen3_next" : "qwen3_5", ey,
                          cases[i].tol_y, ek);
            assert_true(ey < cases[i].tol_y);
            assert_true(ek < TOL_F32);
            free(kr);
            free(kc);
            g.ref->cache_free(g.mref, cr);
            g.cpu->cache_free(mc, cc);
            free(yr);
            free(yc);
            free(x);
            g.cpu->model_destroy(mc);
            rig_free(&g);
        }
    }
}

/* export -> import into a fresh cache, and cache_copy: continuing from either equals continuing
 * from the original, bit for bit. */
static void test_cache_round_trip(void **state)
{
    (void)state;
    const struct mc_gdn_config cfg = make_config(24, 2, 4, 8, 6, 4, MC_GDN_LAYOUT_QWEN3_5);
    struct rig g;
    rig_init(&g, &cfg, MC_DTYPE_F32, 61, -0.5);
    const int64_t B = 2, T = 20, D = g.d.D, n = B * T * D, nw = B * g.d.C * g.d.K, ns = B * g.d.S;
    struct mc_model *mc = cpu_model(&g, 4, 2);
    double *x = random_vec(n, 62, g.dt), *y0 = dalloc(n), *y1 = dalloc(n), *y2 = dalloc(n);
    struct mc_cache *c0 = cache_new(g.cpu, mc, B), *c1 = cache_new(g.cpu, mc, B), *c2 = cache_new(g.cpu, mc, B);
    run(&g, 0, mc, c0, B, T, 0, 11, x, NULL, y0);
    float *buf = malloc((size_t)(nw + ns) * sizeof *buf);
    assert_non_null(buf);
    struct mc_msg msg = {{0}};
    assert_int_equal(g.cpu->cache_export(mc, c0, buf, buf + nw, &msg), MC_BACKEND_OK);
    assert_int_equal(g.cpu->cache_import(mc, c1, buf, buf + nw, &msg), MC_BACKEND_OK);
    assert_int_equal(g.cpu->cache_copy(mc, c2, c0, &msg), MC_BACKEND_OK);
    run(&g, 0, mc, c0, B, T, 11, 9, x, NULL, y0);
    run(&g, 0, mc, c1, B, T, 11, 9, x, NULL, y1);
    run(&g, 0, mc, c2, B, T, 11, 9, x, NULL, y2);
    double *k0 = cache_get(&g, 0, mc, c0, B), *k1 = cache_get(&g, 0, mc, c1, B), *k2 = cache_get(&g, 0, mc, c2, B);
    assert_memory_equal(y0 + 11 * D, y1 + 11 * D, (size_t)(9 * D) * sizeof(double));
    assert_memory_equal(y0 + 11 * D, y2 + 11 * D, (size_t)(9 * D) * sizeof(double));
    assert_memory_equal(k0, k1, (size_t)(nw + ns) * sizeof(double));
    assert_memory_equal(k0, k2, (size_t)(nw + ns) * sizeof(double));
    free(k2);
    free(k1);
    free(k0);
    free(buf);
    g.cpu->cache_free(mc, c2);
    g.cpu->cache_free(mc, c1);
    g.cpu->cache_free(mc, c0);
    free(y2);
    free(y1);
    free(y0);
    free(x);
    g.cpu->model_destroy(mc);
    rig_free(&g);
}

/* ---- error paths -------------------------------------------------------------------------------- */

static enum mc_backend_status create_with(struct rig *g, const struct mc_gdn_config *cfg, enum mc_dtype dt,
                                          struct mc_weight *w, int nw, int64_t chunk, int32_t threads,
                                          struct mc_msg *msg)
{
    struct mc_model_desc desc = {.family = MC_FAMILY_GDN, .dtype = dt, .config = cfg, .weights = w,
                                 .n_weights = nw, .chunk_size = chunk, .threads = threads};
    struct mc_model *m = (struct mc_model *)&desc; /* must be reset to NULL on failure */
    enum mc_backend_status st = g->cpu->model_create(&desc, &m, msg);
    if (st == MC_BACKEND_OK)
        g->cpu->model_destroy(m);
    else
        assert_null(m);
    return st;
}

static void test_errors(void **state)
{
    (void)state;
    const struct mc_gdn_config cfg = make_config(24, 2, 4, 8, 6, 4, MC_GDN_LAYOUT_QWEN3_5);
    struct rig g;
    rig_init(&g, &cfg, MC_DTYPE_F32, 71, -0.5);
    struct mc_weight w[NW + 1];
    for (int i = 0; i < g.ws.n; i++) {
        w[i] = g.ws.w[i];
        w[i].data = g.ws.packed[i];
    }
    const int nw = g.ws.n;
    struct mc_msg msg = {{0}};
    const struct mc_backend_ops *ops = g.cpu;

    assert_string_equal(ops->name, "cpu");
    assert_string_equal(ops->device, "cpu");
    assert_int_equal(ops->family, MC_FAMILY_GDN);
    assert_int_equal(ops->caps, MC_CAP_CHUNK_SIZE | MC_CAP_THREADS | MC_CAP_PACKED | MC_CAP_PROBES);
    assert_int_equal(create_with(&g, &cfg, MC_DTYPE_F32, w, nw, 0, 0, &msg), MC_BACKEND_OK);
    assert_int_equal(create_with(&g, &cfg, MC_DTYPE_F64, w, nw, 0, 0, &msg), MC_BACKEND_UNSUPPORTED);
    assert_int_equal(create_with(&g, &cfg, (enum mc_dtype)99, w, nw, 0, 0, &msg), MC_BACKEND_INVALID);
    assert_int_equal(create_with(&g, &cfg, MC_DTYPE_F32, w, nw, -1, 0, &msg), MC_BACKEND_INVALID);
    assert_non_null(strstr(msg.text, "chunk_size"));
    assert_int_equal(create_with(&g, &cfg, MC_DTYPE_F32, w, nw, 0, -2, &msg), MC_BACKEND_INVALID);
    assert_int_equal(create_with(&g, &cfg, MC_DTYPE_F32, w, nw - 1, 0, 0, &msg), MC_BACKEND_INVALID);
    assert_non_null(strstr(msg.text, "missing weight"));
    w[nw] = w[0];
    assert_int_equal(create_with(&g, &cfg, MC_DTYPE_F32, w, nw + 1, 0, 0, &msg), MC_BACKEND_INVALID);
    assert_non_null(strstr(msg.text, "twice"));
    w[nw].name = "in_proj_qkvz.weight";
    assert_int_equal(create_with(&g, &cfg, MC_DTYPE_F32, w, nw + 1, 0, 0, &msg), MC_BACKEND_INVALID);
    assert_non_null(strstr(msg.text, "layout"));
    w[nw].name = "conv1d.bias";
    assert_int_equal(create_with(&g, &cfg, MC_DTYPE_F32, w, nw + 1, 0, 0, &msg), MC_BACKEND_INVALID);
    assert_non_null(strstr(msg.text, "unknown weight"));
    w[0].dims[1] += 1;
    assert_int_equal(create_with(&g, &cfg, MC_DTYPE_F32, w, nw, 0, 0, &msg), MC_BACKEND_INVALID);
    assert_non_null(strstr(msg.text, "expected shape"));
    w[0].dims[1] -= 1;
    w[0].data = NULL;
    assert_int_equal(create_with(&g, &cfg, MC_DTYPE_F32, w, nw, 0, 0, &msg), MC_BACKEND_INVALID);
    w[0].data = g.ws.packed[0];

    struct mc_gdn_config bad = cfg;
    bad.num_value_heads = 3;
    assert_int_equal(create_with(&g, &bad, MC_DTYPE_F32, w, nw, 0, 0, &msg), MC_BACKEND_INVALID);
    bad = cfg;
    bad.layout = 7;
    assert_int_equal(create_with(&g, &bad, MC_DTYPE_F32, w, nw, 0, 0, &msg), MC_BACKEND_INVALID);
    bad = cfg;
    bad.conv_kernel = MC_CPU_CONV_MAX_K + 1;
    assert_int_equal(create_with(&g, &bad, MC_DTYPE_F32, w, nw, 0, 0, &msg), MC_BACKEND_UNSUPPORTED);
    bad = cfg;
    bad.rms_norm_eps = 0.0;
    assert_int_equal(create_with(&g, &bad, MC_DTYPE_F32, w, nw, 0, 0, &msg), MC_BACKEND_INVALID);
    bad = cfg;
    bad.key_head_dim = 0;
    assert_int_equal(create_with(&g, &bad, MC_DTYPE_F32, w, nw, 0, 0, &msg), MC_BACKEND_INVALID);
    struct mc_model_desc desc = {.family = MC_FAMILY_MAMBA2, .dtype = MC_DTYPE_F32, .config = &cfg,
                                 .weights = w, .n_weights = nw};
    struct mc_model *m = NULL;
    assert_int_equal(ops->model_create(&desc, &m, &msg), MC_BACKEND_INVALID);
    desc.family = MC_FAMILY_GDN;
    desc.config = NULL;
    assert_int_equal(ops->model_create(&desc, &m, &msg), MC_BACKEND_INVALID);
    assert_int_equal(ops->model_create(NULL, &m, &msg), MC_BACKEND_INVALID);

    /* cache and forward */
    m = cpu_model(&g, 0, 1);
    struct mc_cache *c = NULL, *c3 = NULL;
    assert_int_equal(ops->cache_alloc(m, 0, &c, &msg), MC_BACKEND_INVALID);
    assert_int_equal(ops->cache_alloc(m, 2, NULL, &msg), MC_BACKEND_INVALID);
    c = cache_new(ops, m, 2);
    c3 = cache_new(ops, m, 3);
    assert_int_equal(ops->cache_copy(m, c3, c, &msg), MC_BACKEND_INVALID);
    assert_int_equal(ops->cache_import(m, c, NULL, NULL, &msg), MC_BACKEND_INVALID);
    assert_int_equal(ops->cache_export(NULL, c, NULL, NULL, &msg), MC_BACKEND_INVALID);
    float x[2 * 3 * 24] = {0}, y[2 * 3 * 24];
    struct mc_forward_args a = {.batch = 2, .len = 3, .x = x, .y = y};
    assert_int_equal(ops->forward(m, c3, &a, &msg), MC_BACKEND_INVALID);
    assert_non_null(strstr(msg.text, "batch"));
    a.len = 0;
    assert_int_equal(ops->forward(m, c, &a, &msg), MC_BACKEND_INVALID);
    a.len = 3;
    a.x = NULL;
    assert_int_equal(ops->forward(m, c, &a, &msg), MC_BACKEND_INVALID);
    a.x = x;
    assert_int_equal(ops->forward(m, c, NULL, &msg), MC_BACKEND_INVALID);
    assert_int_equal(ops->forward(m, c, &a, &msg), MC_BACKEND_OK);
    ops->cache_free(m, c3);
    ops->cache_free(m, c);
    ops->cache_free(m, NULL);
    ops->model_destroy(m);
    ops->model_destroy(NULL);
    rig_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vs_reference),     cmocka_unit_test(test_chunk_sizes),
        cmocka_unit_test(test_split_invariance), cmocka_unit_test(test_threads_bitwise),
        cmocka_unit_test(test_masks),            cmocka_unit_test(test_storage_dtypes),
        cmocka_unit_test(test_cache_round_trip), cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
