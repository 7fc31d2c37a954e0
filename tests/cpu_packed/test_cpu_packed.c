/*
 * test_cpu_packed.c — the packed call of the cpu backend (backend.h: forward_packed, docs/scenarios.md
 * §1.2) for every family (attention included: its KV slots), against the same backend's batched forward
 * run on each sequence alone as a batch of one, all through the ops structs.
 *
 * One packed call holds 11 sequences of mixed lengths (0, 1, 2, 3 — shorter than the conv width —,
 * 5, 6, 9, 17, 33: not multiples of the chunk, boundaries inside chunks), one-token prefills and
 * decode steps, multi-token continuations with has_initial_state = 1 from a state a previous forward
 * produced, on permuted sparse slots of a pool of 21 rows whose other rows hold NaN or random values.
 * Checked:
 *   - each sequence's outputs and its slot afterwards equal the sequence run alone (f32, bf16, f16
 *     storage; chunk lengths that put boundaries inside chunks, and one chunk holding every sequence);
 *   - every other slot (and the slots of zero-length sequences) bit for bit unchanged;
 *   - the same through the streamed packed call (stream.h: blocks of whole chunks of the packed axis,
 *     forced down to a few tokens so that sequences cross blocks);
 *   - the packed call is bitwise the same for 1, 2 and 3 threads;
 *   - argument errors (bad cu_seqlens, duplicate or out-of-range slots) leave the pool unchanged.
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
#include "cpu_testutil.h"
#include "stream.h"

/*
 * Tolerances, packed against alone, both cpu f32 on the same f32 inputs. The two differ only in the
 * order of float operations: the packed call's chunk grid is the packed axis's, not the sequence's,
 * so its chunks split a sequence elsewhere (the same math, other partial sums), and its GEMMs run over
 * T rows rather than L. Measured (reported by the tests, print_message): output max abs 4.8e-7 at
 * headroom 0.16 (mamba2, two groups), states and windows max abs 1.2e-7, over every family, dtype and
 * chunk length here (gdn: 1.3e-7). The bound, 1e-5 relative plus 1e-6
 * absolute for values near zero, is about 6x the worst measurement and far below what a missing
 * restart gives (removing any one of the three restarts of the mamba2 packed core, or reading the
 * previous sequence's state, moves outputs or states by >= 1e-2).
 */
#define TOL_ATOL 1e-6
#define TOL_RTOL 1e-5
/* bf16 / f16 storage: the f32 compute differs as above, then y is rounded to the storage dtype, so
 * one rounding can land on the neighbouring value: one ulp, at most 2^-7 (bf16, 8 significant bits)
 * or 2^-10 (f16, 11) relative at the bottom of a binade (measured: at most one ulp, e.g. gdn f16
 * -0.04526 vs -0.04529). The caches stay f32 and compare at the f32 tolerance. */
#define TOL_BF16_RTOL (1.0 / 128.0)
#define TOL_F16_RTOL (1.0 / 1024.0)

/* ---- families ---------------------------------------------------------------------------------- */

struct pk_family {
    const char *name;
    enum mc_family family;
    const struct mc_backend_ops *ops;
    union {
        struct mc_mamba2_config m2;
        struct mc_mamba1_config m1;
        struct mc_shortconv_config sc;
        struct mc_gdn_config gdn;
        struct mc_attention_config at;
    } cfg;
    struct tu_weights ws;
    int64_t D, conv_elems, state_elems;
};

static void pk_mamba2(struct pk_family *f, int which)
{
    memset(f, 0, sizeof *f);
    f->name = which ? "mamba2 G=2" : "mamba2 G=1";
    f->family = MC_FAMILY_MAMBA2;
    f->ops = mc_cpu_mamba2_ops();
    if (which == 0)
        f->cfg.m2 = (struct mc_mamba2_config){
            .hidden_size = 8, .num_heads = 4, .head_dim = 3, .state_size = 5, .n_groups = 1, .conv_kernel = 4,
            .chunk_size = 8, .norm_group_size = 12, .layer_norm_epsilon = 1e-5,
            .time_step_limit = {0.0, INFINITY}, .use_bias = 1, .use_conv_bias = 1};
    else
        f->cfg.m2 = (struct mc_mamba2_config){
            .hidden_size = 10, .num_heads = 6, .head_dim = 4, .state_size = 6, .n_groups = 2, .conv_kernel = 3,
            .chunk_size = 5, .norm_group_size = 12, .layer_norm_epsilon = 1e-5,
            .time_step_limit = {0.01, 0.6}, .use_bias = 0, .use_conv_bias = 1};
    const struct mc_mamba2_config *c = &f->cfg.m2;
    const int64_t inner = c->num_heads * c->head_dim, GN = c->n_groups * c->state_size, D = c->hidden_size;
    const int64_t C = inner + 2 * GN, proj = 2 * inner + 2 * GN + c->num_heads;
    f->D = D;
    f->conv_elems = C * c->conv_kernel;
    f->state_elems = inner * c->state_size;
    struct tu_lcg g = {300 + (uint64_t)which};
    tu_weights_add(&f->ws, "in_proj.weight", 2, proj, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    if (c->use_bias)
        tu_weights_add(&f->ws, "in_proj.bias", 1, proj, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&f->ws, "conv1d.weight", 3, C, 1, c->conv_kernel, 0.0, 0.5, &g);
    if (c->use_conv_bias)
        tu_weights_add(&f->ws, "conv1d.bias", 1, C, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&f->ws, "dt_bias", 1, c->num_heads, 0, 0, -1.0, 1.5, &g);
    tu_weights_add(&f->ws, "A_log", 1, c->num_heads, 0, 0, 0.3, 0.8, &g);
    tu_weights_add(&f->ws, "D", 1, c->num_heads, 0, 0, 1.0, 0.3, &g);
    tu_weights_add(&f->ws, "norm.weight", 1, inner, 0, 0, 1.0, 0.2, &g);
    tu_weights_add(&f->ws, "out_proj.weight", 2, D, inner, 0, 0.0, 1.0 / sqrt((double)inner), &g);
    if (c->use_bias)
        tu_weights_add(&f->ws, "out_proj.bias", 1, D, 0, 0, 0.0, 0.2, &g);
    tu_weights_round(&f->ws, MC_DTYPE_F32);
}

static void pk_mamba1(struct pk_family *f)
{
    memset(f, 0, sizeof *f);
    f->name = "mamba1";
    f->family = MC_FAMILY_MAMBA1;
    f->ops = mc_cpu_mamba1_ops();
    f->cfg.m1 = (struct mc_mamba1_config){.hidden_size = 8, .intermediate_size = 20, .state_size = 5,
                                          .conv_kernel = 4, .time_step_rank = 3, .use_bias = 1, .use_conv_bias = 1};
    const struct mc_mamba1_config *c = &f->cfg.m1;
    const int64_t D = c->hidden_size, I = c->intermediate_size, N = c->state_size, R = c->time_step_rank;
    f->D = D;
    f->conv_elems = I * c->conv_kernel;
    f->state_elems = I * N;
    struct tu_lcg g = {400};
    tu_weights_add(&f->ws, "in_proj.weight", 2, 2 * I, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    tu_weights_add(&f->ws, "in_proj.bias", 1, 2 * I, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&f->ws, "conv1d.weight", 3, I, 1, c->conv_kernel, 0.0, 0.5, &g);
    tu_weights_add(&f->ws, "conv1d.bias", 1, I, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&f->ws, "x_proj.weight", 2, R + 2 * N, I, 0, 0.0, 1.0 / sqrt((double)I), &g);
    tu_weights_add(&f->ws, "dt_proj.weight", 2, I, R, 0, 0.0, 1.0 / sqrt((double)R), &g);
    tu_weights_add(&f->ws, "dt_proj.bias", 1, I, 0, 0, -1.0, 1.0, &g);
    tu_weights_add(&f->ws, "A_log", 2, I, N, 0, 0.3, 0.8, &g);
    tu_weights_add(&f->ws, "D", 1, I, 0, 0, 1.0, 0.3, &g);
    tu_weights_add(&f->ws, "out_proj.weight", 2, D, I, 0, 0.0, 1.0 / sqrt((double)I), &g);
    tu_weights_add(&f->ws, "out_proj.bias", 1, D, 0, 0, 0.0, 0.2, &g);
    tu_weights_round(&f->ws, MC_DTYPE_F32);
}

static void pk_shortconv(struct pk_family *f)
{
    memset(f, 0, sizeof *f);
    f->name = "shortconv";
    f->family = MC_FAMILY_SHORTCONV;
    f->ops = mc_cpu_shortconv_ops();
    f->cfg.sc = (struct mc_shortconv_config){.hidden_size = 12, .conv_kernel = 4, .conv_bias = 1};
    const int64_t D = 12, K = 4;
    f->D = D;
    f->conv_elems = D * K;
    f->state_elems = 0;
    struct tu_lcg g = {500};
    tu_weights_add(&f->ws, "in_proj.weight", 2, 3 * D, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    tu_weights_add(&f->ws, "in_proj.bias", 1, 3 * D, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&f->ws, "conv.weight", 3, D, 1, K, 0.0, 0.5, &g);
    tu_weights_add(&f->ws, "conv.bias", 1, D, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&f->ws, "out_proj.weight", 2, D, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    tu_weights_add(&f->ws, "out_proj.bias", 1, D, 0, 0, 0.0, 0.2, &g);
    tu_weights_round(&f->ws, MC_DTYPE_F32);
}

/* Gated DeltaNet, Qwen3.5 layout: Hk 2, Hv 4 (two value heads per key head), dk 8, dv 6, K 4. */
static void pk_gdn(struct pk_family *f)
{
    memset(f, 0, sizeof *f);
    f->name = "gdn";
    f->family = MC_FAMILY_GDN;
    f->ops = mc_cpu_gdn_ops();
    f->cfg.gdn = (struct mc_gdn_config){.hidden_size = 24, .num_key_heads = 2, .num_value_heads = 4,
                                        .key_head_dim = 8, .value_head_dim = 6, .conv_kernel = 4, .chunk_size = 8,
                                        .rms_norm_eps = 1e-6, .layout = MC_GDN_LAYOUT_QWEN3_5};
    const int64_t D = 24, Hv = 4, dk = 8, dv = 6, K = 4, C = 2 * 2 * dk + Hv * dv, vd = Hv * dv;
    const double s = 1.0 / sqrt((double)D);
    f->D = D;
    f->conv_elems = C * K;
    f->state_elems = Hv * dk * dv;
    struct tu_lcg g = {600};
    tu_weights_add(&f->ws, "in_proj_qkv.weight", 2, C, D, 0, 0.0, s, &g);
    tu_weights_add(&f->ws, "in_proj_z.weight", 2, vd, D, 0, 0.0, s, &g);
    tu_weights_add(&f->ws, "in_proj_b.weight", 2, Hv, D, 0, 0.0, 2.0 * s, &g);
    tu_weights_add(&f->ws, "in_proj_a.weight", 2, Hv, D, 0, 0.0, 2.0 * s, &g);
    tu_weights_add(&f->ws, "conv1d.weight", 3, C, 1, K, 0.0, 0.5, &g);
    tu_weights_add(&f->ws, "dt_bias", 1, Hv, 0, 0, 0.0, 1.0, &g);
    tu_weights_add(&f->ws, "A_log", 1, Hv, 0, 0, -0.5, 1.0, &g);
    tu_weights_add(&f->ws, "norm.weight", 1, dv, 0, 0, 1.0, 0.2, &g);
    tu_weights_add(&f->ws, "out_proj.weight", 2, D, vd, 0, 0.0, 1.0 / sqrt((double)vd), &g);
    tu_weights_round(&f->ws, MC_DTYPE_F32);
}

/* Attention, Qwen3-Next-like: GQA 4/2, hd 6, partial rotary 2/3, zero-centred q/k norms, the output gate,
 * biases; 40 cached positions hold a resumed state (at most 6 tokens) plus the longest sequence (33). */
static void pk_attention(struct pk_family *f)
{
    memset(f, 0, sizeof *f);
    f->name = "attention";
    f->family = MC_FAMILY_ATTENTION;
    f->ops = mc_cpu_attention_ops();
    f->cfg.at = (struct mc_attention_config){.hidden_size = 10, .num_attention_heads = 4, .num_key_value_heads = 2,
                                             .head_dim = 6, .cache_length = 40, .partial_rotary_factor = 2.0 / 3.0,
                                             .rope_theta = 10000.0, .rms_norm_eps = 1e-6,
                                             .qk_norm = MC_QK_NORM_ZERO_CENTRED, .attn_output_gate = 1,
                                             .attention_bias = 1};
    const int64_t D = 10, hd = 6, qd = 4 * hd, kvd = 2 * hd;
    const double s = 1.0 / sqrt((double)D);
    f->D = D;
    f->conv_elems = 1;
    f->state_elems = 2 * kvd * 40;
    struct tu_lcg g = {700};
    tu_weights_add(&f->ws, "q_proj.weight", 2, 2 * qd, D, 0, 0.0, s, &g);
    tu_weights_add(&f->ws, "q_proj.bias", 1, 2 * qd, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&f->ws, "k_proj.weight", 2, kvd, D, 0, 0.0, s, &g);
    tu_weights_add(&f->ws, "k_proj.bias", 1, kvd, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&f->ws, "v_proj.weight", 2, kvd, D, 0, 0.0, s, &g);
    tu_weights_add(&f->ws, "v_proj.bias", 1, kvd, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&f->ws, "o_proj.weight", 2, D, qd, 0, 0.0, 1.0 / sqrt((double)qd), &g);
    tu_weights_add(&f->ws, "o_proj.bias", 1, D, 0, 0, 0.0, 0.2, &g);
    tu_weights_add(&f->ws, "q_norm.weight", 1, hd, 0, 0, 0.0, 0.3, &g);
    tu_weights_add(&f->ws, "k_norm.weight", 1, hd, 0, 0, 0.0, 0.3, &g);
    tu_weights_round(&f->ws, MC_DTYPE_F32);
}

static const void *pk_config(const struct pk_family *f)
{
    return &f->cfg;
}

/* ---- the check --------------------------------------------------------------------------------- */

#define PK_POOL 21
#define PK_N 11
static const int64_t pk_lens[PK_N] = {5, 0, 1, 3, 17, 1, 9, 2, 0, 33, 6};
static const uint8_t pk_init[PK_N] = {0, 1, 1, 0, 1, 0, 1, 1, 0, 1, 0};
static const int64_t pk_slots[PK_N] = {13, 2, 19, 7, 0, 11, 5, 16, 9, 3, 14};

struct pk_setup {
    int64_t cu[PK_N + 1], T;
    float *pool_conv, *pool_state; /* [S][conv_elems], [S][state_elems]: what the pool is imported from */
    float *x;                      /* [T][D] f32 values, exact in the model dtype */
};

static float pk_nan(void)
{
    return nanf("");
}

/* Builds the pool contents and the packed input: has_initial_state rows hold the cache a forward of
 * 2..6 random tokens produced; rows of fresh sequences hold NaN or garbage (S2.4); untouched rows NaN
 * or random values. */
static void pk_setup_make(const struct pk_family *f, struct tu_model *tm, enum mc_dtype dtype, struct pk_setup *s,
                          uint64_t seed)
{
    struct tu_lcg g = {seed};
    s->cu[0] = 0;
    for (int i = 0; i < PK_N; i++)
        s->cu[i + 1] = s->cu[i] + pk_lens[i];
    s->T = s->cu[PK_N];
    const size_t ce = (size_t)f->conv_elems, sz = (size_t)(f->state_elems ? f->state_elems : 1);
    s->pool_conv = tu_calloc(PK_POOL * ce, sizeof(float));
    s->pool_state = tu_calloc(PK_POOL * sz, sizeof(float));
    for (int r = 0; r < PK_POOL; r++) {
        const int nan_row = r % 3 == 0;
        for (size_t k = 0; k < ce; k++)
            s->pool_conv[r * ce + k] = nan_row ? pk_nan() : (float)(3.0 * tu_lcg_next(&g));
        for (size_t k = 0; k < sz; k++)
            s->pool_state[r * sz + k] = nan_row ? pk_nan() : (float)(3.0 * tu_lcg_next(&g));
    }
    const size_t eb = mc_cpu_dtype_bytes(dtype);
    for (int i = 0; i < PK_N; i++) {
        if (!pk_init[i])
            continue;
        const int64_t L = 2 + i % 5;
        float *hx = tu_calloc((size_t)(L * f->D), sizeof(float));
        for (int64_t k = 0; k < L * f->D; k++)
            hx[k] = (float)tu_lcg_next(&g);
        void *xb = tu_calloc((size_t)(L * f->D), eb), *yb = tu_calloc((size_t)(L * f->D), eb);
        assert_int_equal(mc_cpu_from_f32(dtype, hx, xb, (size_t)(L * f->D)), 0);
        struct mc_cache *c = NULL;
        struct mc_msg msg = {{0}};
        assert_int_equal(tm->ops->cache_alloc(tm->model, 1, &c, &msg), MC_BACKEND_OK);
        const struct mc_forward_args a = {.batch = 1, .len = L, .x = xb, .y = yb};
        assert_int_equal(tm->ops->forward(tm->model, c, &a, &msg), MC_BACKEND_OK);
        assert_int_equal(tm->ops->cache_export(tm->model, c, s->pool_conv + (size_t)pk_slots[i] * ce,
                                               f->state_elems ? s->pool_state + (size_t)pk_slots[i] * sz : NULL, &msg),
                         MC_BACKEND_OK);
        tm->ops->cache_free(tm->model, c);
        free(xb);
        free(yb);
        free(hx);
    }
    s->x = tu_calloc((size_t)(s->T * f->D), sizeof(float));
    for (int64_t k = 0; k < s->T * f->D; k++)
        s->x[k] = (float)tu_lcg_next(&g);
    mc_cpu_round_f32(dtype, s->x, (size_t)(s->T * f->D));
}

static void pk_setup_free(struct pk_setup *s)
{
    free(s->pool_conv);
    free(s->pool_state);
    free(s->x);
}

/* What one packed call gave: y [T][D] in the model dtype's bytes and as f32, the pool exported. */
struct pk_result {
    void *y_raw;
    float *y, *conv, *state;
};

static void pk_result_free(struct pk_result *r)
{
    free(r->y_raw);
    free(r->y);
    free(r->conv);
    free(r->state);
}

static struct mc_cache *pk_pool(const struct pk_family *f, struct tu_model *tm, const struct pk_setup *s)
{
    struct mc_cache *pool = NULL;
    struct mc_msg msg = {{0}};
    assert_int_equal(tm->ops->cache_alloc(tm->model, PK_POOL, &pool, &msg), MC_BACKEND_OK);
    assert_int_equal(tm->ops->cache_import(tm->model, pool, s->pool_conv, f->state_elems ? s->pool_state : NULL, &msg),
                     MC_BACKEND_OK);
    return pool;
}

static void pk_export(const struct pk_family *f, struct tu_model *tm, struct mc_cache *pool, float **conv, float **state)
{
    struct mc_msg msg = {{0}};
    *conv = tu_calloc((size_t)(PK_POOL * f->conv_elems), sizeof(float));
    *state = tu_calloc((size_t)(PK_POOL * (f->state_elems ? f->state_elems : 1)), sizeof(float));
    assert_int_equal(tm->ops->cache_export(tm->model, pool, *conv, f->state_elems ? *state : NULL, &msg),
                     MC_BACKEND_OK);
}

static void pk_run_packed(const struct pk_family *f, struct tu_model *tm, enum mc_dtype dtype, const struct pk_setup *s,
                          struct pk_result *r)
{
    const size_t eb = mc_cpu_dtype_bytes(dtype), n = (size_t)(s->T * f->D);
    void *xb = tu_calloc(n + 1, eb);
    assert_int_equal(mc_cpu_from_f32(dtype, s->x, xb, n), 0);
    r->y_raw = tu_calloc(n + 1, eb);
    r->y = tu_calloc(n + 1, sizeof(float));
    struct mc_cache *pool = pk_pool(f, tm, s);
    const struct mc_packed_args a = {.n_seqs = PK_N, .cu_seqlens = s->cu, .slots = pk_slots,
                                     .has_initial_state = pk_init, .x = xb, .y = r->y_raw};
    struct mc_msg msg = {{0}};
    assert_non_null(tm->ops->forward_packed);
    assert_true(tm->ops->caps & MC_CAP_PACKED);
    const enum mc_backend_status st = tm->ops->forward_packed(tm->model, pool, &a, &msg);
    if (st != MC_BACKEND_OK)
        fail_msg("%s forward_packed: %s", f->name, msg.text);
    assert_int_equal(mc_cpu_to_f32(dtype, r->y_raw, r->y, n), 0);
    pk_export(f, tm, pool, &r->conv, &r->state);
    tm->ops->cache_free(tm->model, pool);
    free(xb);
}

static void pk_cmp_rows(const char *what, const float *a, const float *b, size_t n, double atol, double rtol,
                        struct tu_cmp *worst)
{
    double *da = tu_calloc(n + 1, sizeof(double)), *db = tu_calloc(n + 1, sizeof(double));
    for (size_t k = 0; k < n; k++) {
        da[k] = a[k];
        db[k] = b[k];
    }
    const struct tu_cmp c = tu_compare(what, da, db, n, 1, NULL, atol, rtol);
    if (c.max_abs > worst->max_abs)
        worst->max_abs = c.max_abs;
    if (c.max_rel > worst->max_rel)
        worst->max_rel = c.max_rel;
    if (c.headroom > worst->headroom)
        worst->headroom = c.headroom;
    free(da);
    free(db);
}

/* The packed call of the fixed sequences against each sequence alone, and the untouched rows. */
static void pk_check(struct pk_family *f, enum mc_dtype dtype, int64_t chunk, int32_t threads)
{
    struct tu_model tm;
    tu_weights_pack(&f->ws, dtype);
    tu_model_create(&tm, f->ops, f->family, pk_config(f), &f->ws, dtype, chunk, threads, f->D, f->conv_elems,
                    f->state_elems);
    struct pk_setup s;
    pk_setup_make(f, &tm, dtype, &s, 77);
    struct pk_result r;
    pk_run_packed(f, &tm, dtype, &s, &r);

    const size_t eb = mc_cpu_dtype_bytes(dtype), ce = (size_t)f->conv_elems, se = (size_t)f->state_elems;
    const double yrtol = dtype == MC_DTYPE_BF16 ? TOL_BF16_RTOL : dtype == MC_DTYPE_F16 ? TOL_F16_RTOL : TOL_RTOL;
    struct tu_cmp wy = {0}, wc = {0};
    int touched[PK_POOL] = {0};
    for (int i = 0; i < PK_N; i++) {
        if (pk_lens[i] == 0)
            continue;
        touched[pk_slots[i]] = 1;
        const int64_t L = pk_lens[i], t0 = s.cu[i];
        struct mc_cache *c = NULL;
        struct mc_msg msg = {{0}};
        assert_int_equal(tm.ops->cache_alloc(tm.model, 1, &c, &msg), MC_BACKEND_OK);
        if (pk_init[i])
            assert_int_equal(tm.ops->cache_import(tm.model, c, s.pool_conv + (size_t)pk_slots[i] * ce,
                                                  se ? s.pool_state + (size_t)pk_slots[i] * se : NULL, &msg),
                             MC_BACKEND_OK);
        void *xb = tu_calloc((size_t)(L * f->D), eb), *yb = tu_calloc((size_t)(L * f->D), eb);
        float *ya = tu_calloc((size_t)(L * f->D), sizeof(float));
        assert_int_equal(mc_cpu_from_f32(dtype, s.x + t0 * f->D, xb, (size_t)(L * f->D)), 0);
        const struct mc_forward_args a = {.batch = 1, .len = L, .x = xb, .y = yb};
        assert_int_equal(tm.ops->forward(tm.model, c, &a, &msg), MC_BACKEND_OK);
        assert_int_equal(mc_cpu_to_f32(dtype, yb, ya, (size_t)(L * f->D)), 0);
        float *cv = tu_calloc(ce, sizeof(float)), *st = tu_calloc(se + 1, sizeof(float));
        assert_int_equal(tm.ops->cache_export(tm.model, c, cv, se ? st : NULL, &msg), MC_BACKEND_OK);
        char what[160];
        snprintf(what, sizeof what, "%s seq %d (len %lld, init %d) output", f->name, i, (long long)L, pk_init[i]);
        pk_cmp_rows(what, r.y + t0 * f->D, ya, (size_t)(L * f->D), TOL_ATOL, yrtol, &wy);
        snprintf(what, sizeof what, "%s seq %d conv_state", f->name, i);
        pk_cmp_rows(what, r.conv + (size_t)pk_slots[i] * ce, cv, ce, TOL_ATOL, TOL_RTOL, &wc);
        if (se) {
            snprintf(what, sizeof what, "%s seq %d recurrent_state", f->name, i);
            pk_cmp_rows(what, r.state + (size_t)pk_slots[i] * se, st, se, TOL_ATOL, TOL_RTOL, &wc);
        }
        free(cv);
        free(st);
        free(ya);
        free(xb);
        free(yb);
        tm.ops->cache_free(tm.model, c);
    }
    for (int row = 0; row < PK_POOL; row++) {
        if (touched[row])
            continue;
        if (memcmp(r.conv + row * ce, s.pool_conv + row * ce, ce * sizeof(float)) != 0)
            fail_msg("%s: untouched slot %d conv_state changed", f->name, row);
        if (se && memcmp(r.state + row * se, s.pool_state + row * se, se * sizeof(float)) != 0)
            fail_msg("%s: untouched slot %d recurrent_state changed", f->name, row);
    }
    char label[160];
    snprintf(label, sizeof label, "%s dtype %d chunk %lld threads %d: packed vs alone output", f->name, (int)dtype,
             (long long)chunk, (int)threads);
    tu_report(label, &wy);
    snprintf(label, sizeof label, "%s dtype %d chunk %lld threads %d: packed vs alone caches", f->name, (int)dtype,
             (long long)chunk, (int)threads);
    tu_report(label, &wc);
    pk_result_free(&r);
    pk_setup_free(&s);
    tu_model_destroy(&tm);
}

/* The packed call is bitwise the same for 1, 2 and 3 threads. */
static void pk_threads(struct pk_family *f, int64_t chunk)
{
    struct pk_result r[3];
    struct pk_setup s[3];
    for (int k = 0; k < 3; k++) {
        struct tu_model tm;
        tu_weights_pack(&f->ws, MC_DTYPE_F32);
        tu_model_create(&tm, f->ops, f->family, pk_config(f), &f->ws, MC_DTYPE_F32, chunk, k + 1, f->D,
                        f->conv_elems, f->state_elems);
        pk_setup_make(f, &tm, MC_DTYPE_F32, &s[k], 91);
        pk_run_packed(f, &tm, MC_DTYPE_F32, &s[k], &r[k]);
        tu_model_destroy(&tm);
    }
    const size_t ny = (size_t)(s[0].T * f->D) * sizeof(float);
    for (int k = 1; k < 3; k++) {
        assert_memory_equal(r[k].y_raw, r[0].y_raw, ny);
        assert_memory_equal(r[k].conv, r[0].conv, (size_t)(PK_POOL * f->conv_elems) * sizeof(float));
        if (f->state_elems)
            assert_memory_equal(r[k].state, r[0].state, (size_t)(PK_POOL * f->state_elems) * sizeof(float));
    }
    for (int k = 0; k < 3; k++) {
        pk_result_free(&r[k]);
        pk_setup_free(&s[k]);
    }
}

/* Bad arguments are INVALID and leave the pool as it was; T == 0 changes nothing. */
static void pk_errors(struct pk_family *f)
{
    struct tu_model tm;
    tu_weights_pack(&f->ws, MC_DTYPE_F32);
    tu_model_create(&tm, f->ops, f->family, pk_config(f), &f->ws, MC_DTYPE_F32, 0, 1, f->D, f->conv_elems,
                    f->state_elems);
    struct pk_setup s;
    pk_setup_make(f, &tm, MC_DTYPE_F32, &s, 5);
    struct mc_cache *pool = pk_pool(f, &tm, &s);
    float *y = tu_calloc((size_t)(s.T * f->D), sizeof(float));
    struct mc_msg msg = {{0}};
    int64_t cu[PK_N + 1], slots[PK_N];
    memcpy(cu, s.cu, sizeof cu);
    memcpy(slots, pk_slots, sizeof slots);
    struct mc_packed_args a = {.n_seqs = PK_N, .cu_seqlens = cu, .slots = slots, .has_initial_state = pk_init,
                               .x = s.x, .y = y};
    slots[3] = slots[7]; /* duplicate */
    assert_int_equal(tm.ops->forward_packed(tm.model, pool, &a, &msg), MC_BACKEND_INVALID);
    assert_non_null(strstr(msg.text, "twice"));
    slots[3] = PK_POOL; /* outside the pool */
    assert_int_equal(tm.ops->forward_packed(tm.model, pool, &a, &msg), MC_BACKEND_INVALID);
    slots[3] = -1;
    assert_int_equal(tm.ops->forward_packed(tm.model, pool, &a, &msg), MC_BACKEND_INVALID);
    slots[3] = pk_slots[3];
    cu[4] = cu[3] - 1; /* decreasing */
    assert_int_equal(tm.ops->forward_packed(tm.model, pool, &a, &msg), MC_BACKEND_INVALID);
    cu[4] = s.cu[4];
    a.y = NULL;
    assert_int_equal(tm.ops->forward_packed(tm.model, pool, &a, &msg), MC_BACKEND_INVALID);
    assert_int_equal(tm.ops->forward_packed(tm.model, NULL, &a, &msg), MC_BACKEND_INVALID);
    a.y = y;
    const int64_t zero_cu[3] = {0, 0, 0};
    const struct mc_packed_args empty = {.n_seqs = 2, .cu_seqlens = zero_cu, .slots = slots,
                                         .has_initial_state = pk_init};
    assert_int_equal(tm.ops->forward_packed(tm.model, pool, &empty, &msg), MC_BACKEND_OK);
    const struct mc_packed_args none = {.n_seqs = 0, .cu_seqlens = zero_cu};
    assert_int_equal(tm.ops->forward_packed(tm.model, pool, &none, &msg), MC_BACKEND_OK);
    float *conv, *state;
    pk_export(f, &tm, pool, &conv, &state);
    assert_memory_equal(conv, s.pool_conv, (size_t)(PK_POOL * f->conv_elems) * sizeof(float));
    if (f->state_elems)
        assert_memory_equal(state, s.pool_state, (size_t)(PK_POOL * f->state_elems) * sizeof(float));
    free(conv);
    free(state);
    free(y);
    tm.ops->cache_free(tm.model, pool);
    pk_setup_free(&s);
    tu_model_destroy(&tm);
}

/* ---- per family -------------------------------------------------------------------------------- */

/* Chunk lengths of the chunked families: boundaries inside chunks (3, 8), chunks longer than most
 * sequences (16), one chunk holding the whole packed axis (1000), one token per chunk (1). */
static const int64_t pk_chunks[] = {3, 8, 16, 1000, 1};
#define PK_N_CHUNKS ((int)(sizeof pk_chunks / sizeof pk_chunks[0]))

static void test_mamba2_packed(void **state)
{
    (void)state;
    for (int which = 0; which < 2; which++) {
        struct pk_family f;
        pk_mamba2(&f, which);
        for (int c = 0; c < PK_N_CHUNKS; c++)
            pk_check(&f, MC_DTYPE_F32, pk_chunks[c], c % 2 ? 2 : 1);
        mc_cpu_stream_set_tokens(2); /* packed blocks of 8 chunks: 24 tokens at chunk 3, 40 at 5 */
        pk_check(&f, MC_DTYPE_F32, 3, 2);
        pk_check(&f, MC_DTYPE_F32, 5, 1);
        mc_cpu_stream_set_tokens(-1);
        pk_check(&f, MC_DTYPE_BF16, 8, 2);
        pk_check(&f, MC_DTYPE_F16, 3, 1);
        pk_threads(&f, 8);
        pk_errors(&f);
        tu_weights_free(&f.ws);
    }
}

static void test_gdn_packed(void **state)
{
    (void)state;
    struct pk_family f;
    pk_gdn(&f);
    for (int c = 0; c < PK_N_CHUNKS; c++)
        pk_check(&f, MC_DTYPE_F32, pk_chunks[c], c % 2 ? 2 : 1);
    mc_cpu_stream_set_tokens(2); /* packed blocks of 8 chunks: 24 tokens at chunk 3 */
    pk_check(&f, MC_DTYPE_F32, 3, 2);
    mc_cpu_stream_set_tokens(-1);
    pk_check(&f, MC_DTYPE_BF16, 8, 2);
    pk_check(&f, MC_DTYPE_F16, 3, 1);
    pk_threads(&f, 8);
    pk_errors(&f);
    tu_weights_free(&f.ws);
}

/* The families without chunks: one pass over each dtype and thread count. */
static void pk_unchunked(struct pk_family *f)
{
    pk_check(f, MC_DTYPE_F32, 0, 1);
    pk_check(f, MC_DTYPE_F32, 0, 3);
    mc_cpu_stream_set_tokens(2); /* packed blocks of 16 tokens: sequences cross blocks */
    pk_check(f, MC_DTYPE_F32, 0, 2);
    mc_cpu_stream_set_tokens(-1);
    pk_check(f, MC_DTYPE_BF16, 0, 2);
    pk_check(f, MC_DTYPE_F16, 0, 1);
    pk_threads(f, 0);
    pk_errors(f);
    tu_weights_free(&f->ws);
}

static void test_mamba1_packed(void **state)
{
    (void)state;
    struct pk_family f;
    pk_mamba1(&f);
    pk_unchunked(&f);
}

static void test_shortconv_packed(void **state)
{
    (void)state;
    struct pk_family f;
    pk_shortconv(&f);
    pk_unchunked(&f);
}

static void test_attention_packed(void **state)
{
    (void)state;
    struct pk_family f;
    pk_attention(&f);
    pk_unchunked(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mamba2_packed),
        cmocka_unit_test(test_mamba1_packed),
        cmocka_unit_test(test_shortconv_packed),
        cmocka_unit_test(test_gdn_packed),
        cmocka_unit_test(test_attention_packed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
