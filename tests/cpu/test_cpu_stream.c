/*
 * test_cpu_stream.c — long forwards of the cpu backend in token blocks (kernels/cpu/stream.c), for
 * every family through its ops struct: a forward of L tokens streamed in blocks of T against the same
 * forward unstreamed (mc_cpu_stream_set_tokens(0)), on small random configurations with L = 37 (prime,
 * so no T divides it) and T = 8 and 12 (the last block of 12 is one token: the decode path).
 *
 * What is checked, for each family:
 *   - streamed == unstreamed, outputs and exported cache, within a tight f32 tolerance (the block
 *     boundaries round the state to f32 the way two forwards of the caller's do; measured differences
 *     printed), for B == 1 (blocks passed in place) and B == 3 (gathered / scattered), with and without
 *     a mask — left padding longer than a block (a row all padding in a block), middle padding filling
 *     a whole block — from no cache, an unprimed cache and a primed cache continued; f32 and bf16;
 *   - bitwise identical across runs and thread counts (1, 2, 3);
 *   - L <= T calls the family forward directly: the same bits as streaming off;
 *   - failure atomicity: a block forward that fails on its 3rd call (after advancing the cache) leaves
 *     the caller's cache byte for byte as it was, primed flag included, with the block named in the
 *     message; with no cache it fails cleanly; bad arguments of a long forward fail before anything;
 *   - the block length: override, rounding up to the chunk length, streaming off.
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

#include "cache.h"
#include "cpu.h"
#include "cpu_testutil.h"
#include "base/dtype.h"
#include "stream.h"

/* f32 tolerance for streamed vs unstreamed: the differences come from the state rounded at block
 * boundaries and from sgemm rounding depending on the row count (B·T instead of B·L); measured at most
 * 1.2e-7 abs, headroom 0.05 (printed), orders below a lost or shifted cache row (>= 1e-2). bf16
 * outputs: one bf16 rounding can flip on such a difference: 2^-8 relative, 2^-7 with margin. */
#define ST_ATOL 1e-6
#define ST_RTOL 1e-5
#define ST_BF16_RTOL (1.0 / 128.0)

#define ST_L 37 /* tokens of the streamed forward: prime */
#define ST_P 9  /* tokens of the priming prefill */
#define ST_B 3

enum { FAM_MAMBA2, FAM_MAMBA1, FAM_GDN, FAM_SHORTCONV, FAM_COUNT };

struct fam {
    const char *name;
    enum mc_family family;
    const struct mc_backend_ops *ops;
    struct mc_mamba2_config m2;
    struct mc_mamba1_config m1;
    struct mc_gdn_config gdn;
    struct mc_shortconv_config sc;
    const void *config;
    struct tu_weights ws;
    int64_t D, C, K, state_elems;
    int64_t chunk; /* mc_model_desc.chunk_size handed to the model (0: none) */
};

static void fam_init(struct fam *f, int which)
{
    memset(f, 0, sizeof *f);
    struct tu_lcg g = {7000 + (uint64_t)which};
    struct tu_weights *ws = &f->ws;
    switch (which) {
    case FAM_MAMBA2: {
        /* two groups of two heads, chunk 4: blocks of 8 and 12 tokens hold whole chunks */
        f->m2 = (struct mc_mamba2_config){
            .hidden_size = 8, .num_heads = 4, .head_dim = 3, .state_size = 5, .n_groups = 2, .conv_kernel = 4,
            .chunk_size = 8, .norm_group_size = 6, .layer_norm_epsilon = 1e-5,
            .time_step_limit = {0.0, INFINITY}, .use_bias = 1, .use_conv_bias = 1,
        };
        const struct mc_mamba2_config *c = &f->m2;
        const int64_t D = c->hidden_size, inner = c->num_heads * c->head_dim, GN = c->n_groups * c->state_size;
        const int64_t proj = 2 * inner + 2 * GN + c->num_heads;
        f->name = "mamba2";
        f->family = MC_FAMILY_MAMBA2;
        f->ops = mc_cpu_mamba2_ops();
        f->config = c;
        f->D = D;
        f->C = inner + 2 * GN;
        f->K = c->conv_kernel;
        f->state_elems = inner * c->state_size;
        f->chunk = 4;
        tu_weights_add(ws, "in_proj.weight", 2, proj, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
        tu_weights_add(ws, "in_proj.bias", 1, proj, 0, 0, 0.0, 0.2, &g);
        tu_weights_add(ws, "conv1d.weight", 3, f->C, 1, f->K, 0.0, 0.5, &g);
        tu_weights_add(ws, "conv1d.bias", 1, f->C, 0, 0, 0.0, 0.2, &g);
        tu_weights_add(ws, "dt_bias", 1, c->num_heads, 0, 0, -1.0, 1.5, &g);
        tu_weights_add(ws, "A_log", 1, c->num_heads, 0, 0, 0.3, 0.8, &g);
        tu_weights_add(ws, "D", 1, c->num_heads, 0, 0, 1.0, 0.3, &g);
        tu_weights_add(ws, "norm.weight", 1, inner, 0, 0, 1.0, 0.2, &g);
        tu_weights_add(ws, "out_proj.weight", 2, D, inner, 0, 0.0, 1.0 / sqrt((double)inner), &g);
        tu_weights_add(ws, "out_proj.bias", 1, D, 0, 0, 0.0, 0.2, &g);
        break;
    }
    case FAM_MAMBA1: {
        f->m1 = (struct mc_mamba1_config){.hidden_size = 8, .intermediate_size = 12, .state_size = 5,
                                          .conv_kernel = 4, .time_step_rank = 3, .use_bias = 1, .use_conv_bias = 1};
        const struct mc_mamba1_config *c = &f->m1;
        const int64_t D = c->hidden_size, I = c->intermediate_size, N = c->state_size, R = c->time_step_rank;
        f->name = "mamba1";
        f->family = MC_FAMILY_MAMBA1;
        f->ops = mc_cpu_mamba1_ops();
        f->config = c;
        f->D = D;
        f->C = I;
        f->K = c->conv_kernel;
        f->state_elems = I * N;
        tu_weights_add(ws, "in_proj.weight", 2, 2 * I, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
        tu_weights_add(ws, "in_proj.bias", 1, 2 * I, 0, 0, 0.0, 0.2, &g);
        tu_weights_add(ws, "conv1d.weight", 3, I, 1, f->K, 0.0, 0.5, &g);
        tu_weights_add(ws, "conv1d.bias", 1, I, 0, 0, 0.0, 0.2, &g);
        tu_weights_add(ws, "x_proj.weight", 2, R + 2 * N, I, 0, 0.0, 1.0 / sqrt((double)I), &g);
        tu_weights_add(ws, "dt_proj.weight", 2, I, R, 0, 0.0, 1.0 / sqrt((double)R), &g);
        tu_weights_add(ws, "dt_proj.bias", 1, I, 0, 0, -1.0, 1.0, &g);
        tu_weights_add(ws, "A_log", 2, I, N, 0, 0.3, 0.8, &g);
        tu_weights_add(ws, "D", 1, I, 0, 0, 1.0, 0.3, &g);
        tu_weights_add(ws, "out_proj.weight", 2, D, I, 0, 0.0, 1.0 / sqrt((double)I), &g);
        tu_weights_add(ws, "out_proj.bias", 1, D, 0, 0, 0.0, 0.2, &g);
        break;
    }
    case FAM_GDN: {
        /* Qwen3.5 layout, 2 key / 4 value heads, chunk 4 */
        f->gdn = (struct mc_gdn_config){.hidden_size = 24, .num_key_heads = 2, .num_value_heads = 4,
                                        .key_head_dim = 8, .value_head_dim = 6, .conv_kernel = 4, .chunk_size = 64,
                                        .rms_norm_eps = 1e-6, .layout = MC_GDN_LAYOUT_QWEN3_5};
        const struct mc_gdn_config *c = &f->gdn;
        const int64_t D = c->hidden_size, Hv = c->num_value_heads, dv = c->value_head_dim;
        const int64_t kd = c->num_key_heads * c->key_head_dim, vd = Hv * dv;
        const double s = 1.0 / sqrt((double)D);
        f->name = "gdn";
        f->family = MC_FAMILY_GDN;
        f->ops = mc_cpu_gdn_ops();
        f->config = c;
        f->D = D;
        f->C = 2 * kd + vd;
        f->K = c->conv_kernel;
        f->state_elems = Hv * c->key_head_dim * dv;
        f->chunk = 4;
        tu_weights_add(ws, "in_proj_qkv.weight", 2, f->C, D, 0, 0.0, s, &g);
        tu_weights_add(ws, "in_proj_z.weight", 2, vd, D, 0, 0.0, s, &g);
        tu_weights_add(ws, "in_proj_b.weight", 2, Hv, D, 0, 0.0, 2.0 * s, &g);
        tu_weights_add(ws, "in_proj_a.weight", 2, Hv, D, 0, 0.0, 2.0 * s, &g);
        tu_weights_add(ws, "conv1d.weight", 3, f->C, 1, f->K, 0.0, 0.5, &g);
        tu_weights_add(ws, "dt_bias", 1, Hv, 0, 0, 0.0, 1.0, &g);
        tu_weights_add(ws, "A_log", 1, Hv, 0, 0, -1.0, 1.0, &g);
        tu_weights_add(ws, "norm.weight", 1, dv, 0, 0, 1.0, 0.2, &g);
        tu_weights_add(ws, "out_proj.weight", 2, D, vd, 0, 0.0, 1.0 / sqrt((double)vd), &g);
        break;
    }
    default: {
        f->sc = (struct mc_shortconv_config){.hidden_size = 12, .conv_kernel = 3, .conv_bias = 1};
        const int64_t D = f->sc.hidden_size;
        f->name = "shortconv";
        f->family = MC_FAMILY_SHORTCONV;
        f->ops = mc_cpu_shortconv_ops();
        f->config = &f->sc;
        f->D = D;
        f->C = D;
        f->K = f->sc.conv_kernel;
        tu_weights_add(ws, "in_proj.weight", 2, 3 * D, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
        tu_weights_add(ws, "in_proj.bias", 1, 3 * D, 0, 0, 0.0, 0.2, &g);
        tu_weights_add(ws, "conv.weight", 3, D, 1, f->K, 0.0, 0.5, &g);
        tu_weights_add(ws, "conv.bias", 1, D, 0, 0, 0.0, 0.2, &g);
        tu_weights_add(ws, "out_proj.weight", 2, D, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
        tu_weights_add(ws, "out_proj.bias", 1, D, 0, 0, 0.0, 0.2, &g);
        break;
    }
    }
    tu_weights_round(ws, MC_DTYPE_BF16); /* exact in every storage dtype */
}

static void fam_free(struct fam *f)
{
    tu_weights_free(&f->ws);
}

static struct mc_model *fam_model(struct fam *f, enum mc_dtype dtype, int32_t threads)
{
    struct tu_model tm;
    tu_model_create(&tm, f->ops, f->family, f->config, &f->ws, dtype, f->chunk, threads, f->D, f->C * f->K,
                    f->state_elems);
    return tm.model;
}

/* ---- one run: optional priming prefill, then the forward under test ---------------------------- */

enum start { START_NONE, START_FRESH, START_PRIMED }; /* no cache, unprimed cache, primed cache */

/* What a run produced, in raw bytes: y [B][L][D] in the model dtype, the export in f32. */
struct result {
    void *y;
    float *conv, *state;
    size_t ny_bytes, nc, ns;
};

static void result_alloc(struct result *r, const struct fam *f, enum mc_dtype dtype, int64_t B, int64_t L)
{
    r->ny_bytes = (size_t)(B * L * f->D) * mc_dtype_size(dtype);
    r->nc = (size_t)(B * f->C * f->K);
    r->ns = (size_t)(B * f->state_elems);
    r->y = tu_calloc(r->ny_bytes, 1);
    r->conv = tu_calloc(r->nc, sizeof(float));
    r->state = tu_calloc(r->ns + 1, sizeof(float));
}

static void result_free(struct result *r)
{
    free(r->y);
    free(r->conv);
    free(r->state);
    memset(r, 0, sizeof *r);
}

static const char *dname(enum mc_dtype dtype)
{
    return dtype == MC_DTYPE_F32 ? "f32" : dtype == MC_DTYPE_BF16 ? "bf16" : "f16";
}

static void *pack(enum mc_dtype dtype, const double *v, size_t n)
{
    void *p = tu_calloc(n, mc_dtype_size(dtype));
    mc_dtype_from_f64(dtype, v, p, n);
    return p;
}

static void export_cache(const struct fam *f, struct mc_model *m, const struct mc_cache *c, float *conv, float *state)
{
    struct mc_msg msg = {{0}};
    if (f->ops->cache_export(m, c, conv, f->state_elems ? state : NULL, &msg) != MC_BACKEND_OK)
        fail_msg("%s cache_export: %s", f->name, msg.text);
}

/* A cache for B rows primed by a prefill of ST_P tokens of x0 [B][ST_P][D] (unstreamed). */
static struct mc_cache *primed_cache(const struct fam *f, struct mc_model *m, enum mc_dtype dtype, int64_t B,
                                     const double *x0)
{
    struct mc_msg msg = {{0}};
    struct mc_cache *c = NULL;
    if (f->ops->cache_alloc(m, B, &c, &msg) != MC_BACKEND_OK)
        fail_msg("%s cache_alloc: %s", f->name, msg.text);
    const size_t n = (size_t)(B * ST_P * f->D);
    void *x = pack(dtype, x0, n), *y = tu_calloc(n, mc_dtype_size(dtype));
    mc_cpu_stream_set_tokens(0);
    const struct mc_forward_args a = {.batch = B, .len = ST_P, .x = x, .y = y};
    if (f->ops->forward(m, c, &a, &msg) != MC_BACKEND_OK)
        fail_msg("%s priming forward: %s", f->name, msg.text);
    free(y);
    free(x);
    return c;
}

/* The forward of x [B][L][D] with `mask` from `start`, with block length `tokens`
 * (mc_cpu_stream_set_tokens: 0 = unstreamed). */
static void run(const struct fam *f, struct mc_model *m, enum mc_dtype dtype, int64_t B, int64_t L, const double *x,
                const uint8_t *mask, enum start start, const double *x0, int64_t tokens, struct result *r)
{
    struct mc_msg msg = {{0}};
    struct mc_cache *c = NULL;
    result_alloc(r, f, dtype, B, L);
    if (start == START_PRIMED) {
        c = primed_cache(f, m, dtype, B, x0);
    } else if (start == START_FRESH) {
        if (f->ops->cache_alloc(m, B, &c, &msg) != MC_BACKEND_OK)
            fail_msg("%s cache_alloc: %s", f->name, msg.text);
    }
    void *xr = pack(dtype, x, (size_t)(B * L * f->D));
    mc_dtype_fill_nan(dtype, r->y, (size_t)(B * L * f->D));
    mc_cpu_stream_set_tokens(tokens);
    const struct mc_forward_args a = {.batch = B, .len = L, .x = xr, .mask = mask, .y = r->y};
    const enum mc_backend_status st = f->ops->forward(m, c, &a, &msg);
    mc_cpu_stream_set_tokens(-1);
    if (st != MC_BACKEND_OK)
        fail_msg("%s forward (B=%lld L=%lld T=%lld): status %d: %s", f->name, (long long)B, (long long)L,
                 (long long)tokens, (int)st, msg.text);
    if (c) {
        assert_int_equal(c->primed, 1);
        export_cache(f, m, c, r->conv, r->state);
        f->ops->cache_free(m, c);
    }
    free(xr);
}

/* What the comparisons of one family and dtype measured. */
struct measured {
    int runs, bitwise;
    double max_abs, headroom;
};

/* got vs want within the stream tolerance (fails the test otherwise), accumulated into *acc. */
static void compare(const char *what, const struct fam *f, enum mc_dtype dtype, const struct result *got,
                    const struct result *want, int64_t B, int64_t L, int with_cache, struct measured *acc)
{
    char label[160];
    const size_t ny = (size_t)(B * L * f->D);
    double *a = tu_calloc(ny, sizeof(double)), *b = tu_calloc(ny, sizeof(double));
    mc_dtype_to_f64(dtype, got->y, a, ny);
    mc_dtype_to_f64(dtype, want->y, b, ny);
    snprintf(label, sizeof label, "%s %s %s y", f->name, dname(dtype), what);
    const struct tu_cmp cy = tu_compare(label, a, b, ny, 1, NULL, ST_ATOL,
                                        dtype == MC_DTYPE_F32 ? ST_RTOL : ST_BF16_RTOL);
    free(a);
    free(b);
    double worst = cy.headroom, max_abs = cy.max_abs;
    if (with_cache) {
        const struct {
            const char *name;
            const float *g, *w;
            size_t n;
        } t[2] = {{"conv", got->conv, want->conv, got->nc}, {"state", got->state, want->state, got->ns}};
        for (int i = 0; i < 2; i++) {
            if (!t[i].n)
                continue;
            a = tu_calloc(t[i].n, sizeof(double));
            b = tu_calloc(t[i].n, sizeof(double));
            mc_dtype_to_f64(MC_DTYPE_F32, t[i].g, a, t[i].n);
            mc_dtype_to_f64(MC_DTYPE_F32, t[i].w, b, t[i].n);
            snprintf(label, sizeof label, "%s %s %s %s", f->name, dname(dtype), what, t[i].name);
            const struct tu_cmp cc = tu_compare(label, a, b, t[i].n, 1, NULL, ST_ATOL, ST_RTOL);
            worst = cc.headroom > worst ? cc.headroom : worst;
            max_abs = cc.max_abs > max_abs ? cc.max_abs : max_abs;
            free(a);
            free(b);
        }
    }
    acc->runs++;
    acc->bitwise += memcmp(got->y, want->y, got->ny_bytes) == 0 &&
                    (!with_cache || (memcmp(got->conv, want->conv, got->nc * sizeof(float)) == 0 &&
                                     memcmp(got->state, want->state, got->ns * sizeof(float)) == 0));
    acc->max_abs = max_abs > acc->max_abs ? max_abs : acc->max_abs;
    acc->headroom = worst > acc->headroom ? worst : acc->headroom;
}

/* Masks for B rows of ST_L tokens: row 0 all real; row 1 left padding of 13 tokens (block [0, 8)
 * all padding); row 2 left padding 3 and middle padding [16, 24) (a whole block of 8). B == 1 uses
 * row 1's pattern. */
static uint8_t *make_mask(int64_t B)
{
    uint8_t *m = tu_calloc((size_t)(B * ST_L), 1);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < ST_L; t++) {
            const int64_t r = B == 1 ? 1 : b;
            m[b * ST_L + t] = r == 0 ? 1 : r == 1 ? (t >= 13) : (t >= 3 && (t < 16 || t >= 24));
        }
    return m;
}

static double *make_x(int64_t n, uint64_t seed)
{
    struct tu_lcg g = {seed};
    double *x = tu_calloc((size_t)n, sizeof(double));
    tu_fill(x, (size_t)n, 1.0, &g);
    tu_round(MC_DTYPE_BF16, x, (size_t)n);
    return x;
}

/* ---- tests ------------------------------------------------------------------------------------- */

static const int64_t block_lengths[] = {8, 12};

/* Streamed == unstreamed for one family over batch, mask, start and T. */
static void check_family_matches(int which, enum mc_dtype dtype)
{
    struct fam f;
    fam_init(&f, which);
    struct mc_model *m = fam_model(&f, dtype, 2);
    struct measured acc = {0};
    for (int64_t B = 1; B <= ST_B; B += ST_B - 1) {
        double *x = make_x(B * ST_L * f.D, 11 + (uint64_t)B), *x0 = make_x(B * ST_P * f.D, 23 + (uint64_t)B);
        uint8_t *mask = make_mask(B);
        for (int masked = 0; masked < 2; masked++)
            for (int s = START_NONE; s <= START_PRIMED; s++)
                for (size_t ti = 0; ti < sizeof block_lengths / sizeof *block_lengths; ti++) {
                    struct result want, got;
                    const int64_t T = block_lengths[ti];
                    run(&f, m, dtype, B, ST_L, x, masked ? mask : NULL, (enum start)s, x0, 0, &want);
                    run(&f, m, dtype, B, ST_L, x, masked ? mask : NULL, (enum start)s, x0, T, &got);
                    char what[96];
                    snprintf(what, sizeof what, "B=%lld %s %s T=%lld", (long long)B, masked ? "masked" : "no mask",
                             s == START_NONE ? "no cache" : s == START_FRESH ? "unprimed" : "primed", (long long)T);
                    compare(what, &f, dtype, &got, &want, B, ST_L, s != START_NONE, &acc);
                    result_free(&got);
                    result_free(&want);
                }
        free(mask);
        free(x0);
        free(x);
    }
    print_message("  measured %-9s %-4s streamed vs unstreamed: %2d of %d runs bitwise equal, max abs diff %.3e, "
                  "headroom %.4f\n",
                  f.name, dname(dtype), acc.bitwise, acc.runs, acc.max_abs, acc.headroom);
    f.ops->model_destroy(m);
    fam_free(&f);
}

static void test_streamed_matches_unstreamed_f32(void **state)
{
    (void)state;
    for (int which = 0; which < FAM_COUNT; which++)
        check_family_matches(which, MC_DTYPE_F32);
}

static void test_streamed_matches_unstreamed_bf16(void **state)
{
    (void)state;
    for (int which = 0; which < FAM_COUNT; which++)
        check_family_matches(which, MC_DTYPE_BF16);
}

/* Bitwise the same over runs and thread counts, streamed (B 3, masked, primed, T 8). */
static void test_streamed_deterministic(void **state)
{
    (void)state;
    for (int which = 0; which < FAM_COUNT; which++) {
        struct fam f;
        fam_init(&f, which);
        double *x = make_x(ST_B * ST_L * f.D, 31), *x0 = make_x(ST_B * ST_P * f.D, 37);
        uint8_t *mask = make_mask(ST_B);
        struct result first = {0};
        for (int32_t threads = 1; threads <= 3; threads++) {
            struct mc_model *m = fam_model(&f, MC_DTYPE_F32, threads);
            for (int rep = 0; rep < 2; rep++) {
                struct result r;
                run(&f, m, MC_DTYPE_F32, ST_B, ST_L, x, mask, START_PRIMED, x0, 8, &r);
                if (threads == 1 && rep == 0) {
                    first = r;
                    continue;
                }
                assert_memory_equal(first.y, r.y, first.ny_bytes);
                assert_memory_equal(first.conv, r.conv, first.nc * sizeof(float));
                assert_memory_equal(first.state, r.state, first.ns * sizeof(float));
                result_free(&r);
            }
            f.ops->model_destroy(m);
        }
        result_free(&first);
        free(mask);
        free(x0);
        free(x);
        fam_free(&f);
    }
}

/* L <= T: the family forward itself, the same bits as streaming off (L == T and L < T). */
static void test_short_forward_is_direct(void **state)
{
    (void)state;
    for (int which = 0; which < FAM_COUNT; which++) {
        struct fam f;
        fam_init(&f, which);
        struct mc_model *m = fam_model(&f, MC_DTYPE_BF16, 2);
        double *x = make_x(ST_B * ST_L * f.D, 41), *x0 = make_x(ST_B * ST_P * f.D, 43);
        uint8_t *mask = make_mask(ST_B);
        /* T = L (rounded up to 40 by the chunk-4 families) and T > L */
        for (int64_t tokens = ST_L; tokens <= 2 * ST_L; tokens += ST_L) {
            struct result want, got;
            run(&f, m, MC_DTYPE_BF16, ST_B, ST_L, x, mask, START_PRIMED, x0, 0, &want);
            run(&f, m, MC_DTYPE_BF16, ST_B, ST_L, x, mask, START_PRIMED, x0, tokens, &got);
            assert_memory_equal(want.y, got.y, want.ny_bytes);
            assert_memory_equal(want.conv, got.conv, want.nc * sizeof(float));
            assert_memory_equal(want.state, got.state, want.ns * sizeof(float));
            result_free(&got);
            result_free(&want);
        }
        free(mask);
        free(x0);
        free(x);
        f.ops->model_destroy(m);
        fam_free(&f);
    }
}

/* ---- failure atomicity ------------------------------------------------------------------------- */

static const struct mc_backend_ops *fail_ops; /* the family whose forward the failing one wraps */
static int fail_calls, fail_at;

/* The family forward (unstreamed), except that call number fail_at runs the block — advancing the
 * cache — and then reports a failure: the worst a block can do. */
static enum mc_backend_status failing_forward(struct mc_model *model, struct mc_cache *cache,
                                              const struct mc_forward_args *args, struct mc_msg *msg)
{
    const enum mc_backend_status st = fail_ops->forward(model, cache, args, msg);
    if (++fail_calls == fail_at && st == MC_BACKEND_OK) {
        snprintf(msg->text, sizeof msg->text, "injected failure");
        return MC_BACKEND_INTERNAL;
    }
    return st;
}

static void check_failure_atomic(struct fam *f, int64_t B, const uint8_t *mask, enum start start)
{
    struct mc_model *m = fam_model(f, MC_DTYPE_F32, 2);
    double *x = make_x(B * ST_L * f->D, 51), *x0 = make_x(B * ST_P * f->D, 53);
    struct mc_msg msg = {{0}};
    struct mc_cache *c = NULL;
    if (start == START_PRIMED)
        c = primed_cache(f, m, MC_DTYPE_F32, B, x0);
    else if (start == START_FRESH && f->ops->cache_alloc(m, B, &c, &msg) != MC_BACKEND_OK)
        fail_msg("%s cache_alloc: %s", f->name, msg.text);
    struct result before, after;
    result_alloc(&before, f, MC_DTYPE_F32, B, ST_L);
    result_alloc(&after, f, MC_DTYPE_F32, B, ST_L);
    const size_t win = (size_t)(B * f->C * f->K), st_elems = (size_t)(B * f->state_elems);
    float *raw_window = NULL, *raw_state = NULL;
    int primed = 0;
    if (c) {
        export_cache(f, m, c, before.conv, before.state);
        raw_window = tu_calloc(win, sizeof(float));
        raw_state = tu_calloc(st_elems + 1, sizeof(float));
        memcpy(raw_window, c->window, win * sizeof(float));
        if (st_elems)
            memcpy(raw_state, c->state, st_elems * sizeof(float));
        primed = c->primed;
    }

    const struct mc_cpu_cache_shape shape = mc_cpu_cache_shape_kc(f->C, f->K, (size_t)f->state_elems, "test");
    const struct mc_cpu_stream_spec spec = {
        .forward = failing_forward, .hidden = f->D, .elem_bytes = sizeof(float), .cache_shape = &shape,
        .block = 8, .who = "stream test",
    };
    void *xr = pack(MC_DTYPE_F32, x, (size_t)(B * ST_L * f->D));
    const struct mc_forward_args a = {.batch = B, .len = ST_L, .x = xr, .mask = mask, .y = before.y};
    fail_ops = f->ops;
    fail_calls = 0;
    fail_at = 3;
    mc_cpu_stream_set_tokens(0); /* the blocks run the family forward directly */
    const enum mc_backend_status st = mc_cpu_forward_streamed(m, c, &a, &msg, &spec);
    mc_cpu_stream_set_tokens(-1);
    if (st != MC_BACKEND_INTERNAL)
        fail_msg("%s: expected the injected failure, got status %d: %s", f->name, (int)st, msg.text);
    assert_int_equal(fail_calls, 3);
    if (!strstr(msg.text, "injected failure") || !strstr(msg.text, "block of tokens [16, 24) of 37"))
        fail_msg("%s: message does not name the failing block: %s", f->name, msg.text);
    if (c) {
        assert_non_null(strstr(msg.text, "cache restored"));
        assert_int_equal(c->primed, primed);
        assert_memory_equal(raw_window, c->window, win * sizeof(float));
        if (st_elems)
            assert_memory_equal(raw_state, c->state, st_elems * sizeof(float));
        export_cache(f, m, c, after.conv, after.state);
        assert_memory_equal(before.conv, after.conv, before.nc * sizeof(float));
        assert_memory_equal(before.state, after.state, before.ns * sizeof(float));

        /* bad arguments of a long forward fail before anything: the cache as it was */
        const struct mc_forward_args bad = {.batch = B, .len = ST_L, .x = NULL, .mask = mask, .y = before.y};
        mc_cpu_stream_set_tokens(8);
        assert_int_equal(f->ops->forward(m, c, &bad, &msg), MC_BACKEND_INVALID);
        const struct mc_forward_args wrong_batch = {.batch = B + 1, .len = ST_L, .x = xr, .y = before.y};
        assert_int_equal(f->ops->forward(m, c, &wrong_batch, &msg), MC_BACKEND_INVALID);
        assert_non_null(strstr(msg.text, "does not match"));
        mc_cpu_stream_set_tokens(-1);
        assert_int_equal(c->primed, primed);
        assert_memory_equal(raw_window, c->window, win * sizeof(float));
        f->ops->cache_free(m, c);
    }
    free(xr);
    free(raw_window);
    free(raw_state);
    result_free(&after);
    result_free(&before);
    free(x0);
    free(x);
    f->ops->model_destroy(m);
}

static void test_failure_leaves_cache_unchanged(void **state)
{
    (void)state;
    for (int which = 0; which < FAM_COUNT; which++) {
        struct fam f;
        fam_init(&f, which);
        uint8_t *mask = make_mask(ST_B);
        check_failure_atomic(&f, 1, NULL, START_PRIMED);
        check_failure_atomic(&f, 1, NULL, START_FRESH);
        check_failure_atomic(&f, 1, NULL, START_NONE);
        check_failure_atomic(&f, ST_B, mask, START_PRIMED);
        check_failure_atomic(&f, ST_B, mask, START_FRESH);
        check_failure_atomic(&f, ST_B, mask, START_NONE);
        free(mask);
        fam_free(&f);
    }
}

/* ---- the block length -------------------------------------------------------------------------- */

static void test_block_length(void **state)
{
    (void)state;
    mc_cpu_stream_set_tokens(8);
    assert_int_equal(mc_cpu_stream_tokens(1), 8);
    assert_int_equal(mc_cpu_stream_tokens(0), 8);
    assert_int_equal(mc_cpu_stream_tokens(4), 8);
    assert_int_equal(mc_cpu_stream_tokens(5), 10);
    assert_int_equal(mc_cpu_stream_tokens(64), 64);
    assert_true(mc_cpu_stream_tokens((int64_t)1 << 40) == INT64_MAX);
    mc_cpu_stream_set_tokens(0);
    assert_true(mc_cpu_stream_tokens(1) == INT64_MAX);
    mc_cpu_stream_set_tokens((int64_t)1 << 40);
    assert_true(mc_cpu_stream_tokens(1) == INT64_MAX);
    mc_cpu_stream_set_tokens(-1);
    if (!getenv(MC_CPU_STREAM_ENV)) {
        const int64_t t = MC_CPU_STREAM_TOKENS;
        assert_int_equal(mc_cpu_stream_tokens(1), t);
        assert_int_equal(mc_cpu_stream_tokens(t), t);
        assert_int_equal(mc_cpu_stream_tokens(t - 1), 2 * (t - 1));
        assert_int_equal(mc_cpu_stream_tokens(t + 1), t + 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_length),
        cmocka_unit_test(test_streamed_matches_unstreamed_f32),
        cmocka_unit_test(test_streamed_matches_unstreamed_bf16),
        cmocka_unit_test(test_streamed_deterministic),
        cmocka_unit_test(test_short_forward_is_direct),
        cmocka_unit_test(test_failure_leaves_cache_unchanged),
    };
    return cmocka_run_group_tests_name("cpu stream", tests, NULL, NULL);
}
