/*
 * test_reference_attention.c — the reference attention layer (reference/attention.c), driven only
 * through its ops struct (mixcheck/backend.h):
 *   - against every bundled attention golden (golden/attention/, the float64 oracle of
 *     golden/models.py) at f64 and f32: one cached prefill (mask honoured) and a token-by-token decode,
 *     outputs at the real tokens and the exported cache (count, keys, values) at every stored position;
 *   - split invariance and L == 1 continuation, and mask semantics (refutil) on random configurations
 *     with GQA, partial rotary, both q/k norms, the output gate and biases;
 *   - a hand-checkable case: the first token attends only to itself, so its output is o_proj(v ⊙ gate)
 *     whatever q and k are;
 *   - error paths: the cache full, a count that is not an integer in [0, cache_length], the
 *     configuration checks, weights the configuration does not imply.
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

#include "goldenmodel.h"

#include "case/case.h"
#include "base/dtype.h"
#include "family/family.h"
#include "golden/golden.h"
#include "reference.h"
#include "refutil.h"
#include "golden/weightset.h"

static const char *const goldens[] = {"golden/attention/tiny.h5", "golden/attention/qwen3next.h5",
                                      "golden/attention/lfm2.h5", "golden/attention/leftpad.h5",
                                      "golden/attention/rightpad.h5"};

/* ---- against the goldens ----------------------------------------------------------------------- */

struct gfix {
    struct mc_golden g;
    const struct mc_backend_ops *ops;
    struct mc_model *model;
    enum mc_dtype dtype;
    size_t esz;
    int64_t D, nstate; /* per row */
};

static void gfix_open(struct gfix *fx, const char *path, enum mc_dtype dtype)
{
    struct mc_error err = {0};
    memset(fx, 0, sizeof *fx);
    if (mc_golden_load(path, &fx->g, &err) != MC_ERR_NONE)
        fail_msg("%s: %s", path, err.msg);
    assert_int_equal(fx->g.config.family, MC_FAMILY_ATTENTION);
    fx->ops = mc_reference_attention_ops();
    fx->model = mc_test_golden_model(fx->ops, &fx->g, dtype);
    struct mc_family_shape sh;
    mc_family_shape(&fx->g.config, &sh);
    assert_int_equal(sh.conv_channels * sh.conv_kernel, 1);
    fx->dtype = dtype;
    fx->esz = mc_dtype_size(dtype);
    fx->D = sh.hidden;
    fx->nstate = mc_family_state_elems(&sh);
}

static void gfix_close(struct gfix *fx)
{
    fx->ops->model_destroy(fx->model);
    mc_golden_free(&fx->g);
}

/* Worst |exported - golden| of the cache at golden position index ti (count, then keys and values). */
static void cache_vs_golden(struct gfix *fx, struct mc_cache *c, int64_t ti, double *dcount, double *dstate)
{
    const int64_t B = fx->g.batch;
    void *conv = malloc((size_t)B * fx->esz), *state = malloc((size_t)(B * fx->nstate) * fx->esz);
    double *conv64 = malloc((size_t)B * sizeof *conv64), *state64 = malloc((size_t)(B * fx->nstate) * sizeof *state64);
    assert_true(conv && state && conv64 && state64);
    struct mc_msg msg = {{0}};
    assert_int_equal(fx->ops->cache_export(fx->model, c, conv, state, &msg), MC_BACKEND_OK);
    mc_dtype_to_f64(fx->dtype, conv, conv64, (size_t)B);
    mc_dtype_to_f64(fx->dtype, state, state64, (size_t)(B * fx->nstate));
    *dcount = fmax(*dcount, max_abs_diff(conv64, fx->g.conv_state.data + ti * B, B));
    *dstate = fmax(*dstate, max_abs_diff(state64, fx->g.recurrent_state.data + ti * B * fx->nstate, B * fx->nstate));
    free(state64);
    free(conv64);
    free(state);
    free(conv);
}

/* Worst |y - golden| at the real tokens of tokens [t0, t0 + L) of every row; y [B][L][D]. */
static double output_vs_golden(struct gfix *fx, const void *y, int64_t t0, int64_t L)
{
    const int64_t B = fx->g.batch, T = fx->g.len, D = fx->D;
    double *y64 = malloc((size_t)(B * L * D) * sizeof *y64), worst = 0.0;
    assert_non_null(y64);
    mc_dtype_to_f64(fx->dtype, y, y64, (size_t)(B * L * D));
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < L; t++)
            if (!fx->g.mask || fx->g.mask[b * T + t0 + t])
                worst = fmax(worst, max_abs_diff(y64 + (b * L + t) * D, fx->g.output.data + (b * T + t0 + t) * D, D));
    free(y64);
    return worst;
}

/* Tokens [t0, t0 + L) of the golden's inputs and mask as a forward's x [B][L][D] and mask [B][L]. */
static void slice_inputs(struct gfix *fx, int64_t t0, int64_t L, void *x, uint8_t *mask)
{
    const int64_t B = fx->g.batch, T = fx->g.len, D = fx->D;
    for (int64_t b = 0; b < B; b++) {
        mc_dtype_from_f64(fx->dtype, fx->g.hidden_states.data + (b * T + t0) * D,
                          (unsigned char *)x + (size_t)(b * L * D) * fx->esz, (size_t)(L * D));
        for (int64_t t = 0; t < L; t++)
            mask[b * L + t] = fx->g.mask ? fx->g.mask[b * T + t0 + t] : 1;
    }
}

static void check_golden(const char *path, enum mc_dtype dtype, double tol)
{
    struct gfix fx;
    gfix_open(&fx, path, dtype);
    const int64_t B = fx.g.batch, T = fx.g.len, D = fx.D;
    void *x = malloc((size_t)(B * T * D) * fx.esz), *y = malloc((size_t)(B * T * D) * fx.esz);
    uint8_t *mask = malloc((size_t)(B * T));
    assert_true(x && y && mask);
    struct mc_msg msg = {{0}};
    double dy = 0.0, dcount = 0.0, dstate = 0.0;

    /* one cached prefill over the whole golden */
    struct mc_cache *c = NULL;
    assert_int_equal(fx.ops->cache_alloc(fx.model, B, &c, &msg), MC_BACKEND_OK);
    slice_inputs(&fx, 0, T, x, mask);
    struct mc_forward_args a = {.batch = B, .len = T, .x = x, .mask = mask, .y = y};
    if (fx.ops->forward(fx.model, c, &a, &msg) != MC_BACKEND_OK)
        fail_msg("%s: forward: %s", path, msg.text);
    dy = fmax(dy, output_vs_golden(&fx, y, 0, T));
    int64_t ti = mc_golden_position_index(&fx.g, T);
    assert_true(ti >= 0);
    cache_vs_golden(&fx, c, ti, &dcount, &dstate);
    fx.ops->cache_free(fx.model, c);

    /* token by token: the cache at every stored position */
    assert_int_equal(fx.ops->cache_alloc(fx.model, B, &c, &msg), MC_BACKEND_OK);
    for (int64_t t = 0; t < T; t++) {
        slice_inputs(&fx, t, 1, x, mask);
        a = (struct mc_forward_args){.batch = B, .len = 1, .x = x, .mask = mask, .y = y};
        if (fx.ops->forward(fx.model, c, &a, &msg) != MC_BACKEND_OK)
            fail_msg("%s: decode step %lld: %s", path, (long long)t, msg.text);
        dy = fmax(dy, output_vs_golden(&fx, y, t, 1));
        if ((ti = mc_golden_position_index(&fx.g, t + 1)) >= 0)
            cache_vs_golden(&fx, c, ti, &dcount, &dstate);
    }
    fx.ops->cache_free(fx.model, c);
    print_message("%s %s: max |dy| %.3g, max |dcount| %.3g, max |dstate| %.3g\n", path, mc_dtype_name(dtype), dy,
                  dcount, dstate);
    assert_true(dy <= tol);
    assert_true(dcount == 0.0);
    assert_true(dstate <= tol);
    free(mask);
    free(y);
    free(x);
    gfix_close(&fx);
}

static void test_goldens(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof goldens / sizeof goldens[0]; i++) {
        check_golden(goldens[i], MC_DTYPE_F64, 1e-13);
        check_golden(goldens[i], MC_DTYPE_F32, 1e-5);
    }
}

/* ---- random configurations --------------------------------------------------------------------- */

static struct mc_attention_config config_of(int64_t hq, int64_t hkv, double rotary, int32_t norm, int32_t gate,
                                            int32_t bias)
{
    return (struct mc_attention_config){.hidden_size = 12,
                                        .num_attention_heads = hq,
                                        .num_key_value_heads = hkv,
                                        .head_dim = 8,
                                        .cache_length = 16,
                                        .partial_rotary_factor = rotary,
                                        .rope_theta = 10000.0,
                                        .rms_norm_eps = 1e-6,
                                        .qk_norm = norm,
                                        .attn_output_gate = gate,
                                        .attention_bias = bias};
}

static void weight_set_random(struct weight_set *ws, const struct mc_attention_config *c, uint64_t seed)
{
    struct lcg g = {seed};
    const int64_t D = c->hidden_size, hd = c->head_dim, qd = c->num_attention_heads * hd;
    const int64_t kvd = c->num_key_value_heads * hd, qrows = c->attn_output_gate ? 2 * qd : qd;
    memset(ws, 0, sizeof *ws);
    weight_add(ws, "q_proj.weight", 2, qrows, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    if (c->attention_bias)
        weight_add(ws, "q_proj.bias", 1, qrows, 0, 0, 0.0, 0.2, &g);
    weight_add(ws, "k_proj.weight", 2, kvd, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    if (c->attention_bias)
        weight_add(ws, "k_proj.bias", 1, kvd, 0, 0, 0.0, 0.2, &g);
    weight_add(ws, "v_proj.weight", 2, kvd, D, 0, 0.0, 1.0 / sqrt((double)D), &g);
    if (c->attention_bias)
        weight_add(ws, "v_proj.bias", 1, kvd, 0, 0, 0.0, 0.2, &g);
    weight_add(ws, "o_proj.weight", 2, D, qd, 0, 0.0, 1.0 / sqrt((double)qd), &g);
    if (c->attention_bias)
        weight_add(ws, "o_proj.bias", 1, D, 0, 0, 0.0, 0.2, &g);
    if (c->qk_norm != MC_QK_NORM_NONE) {
        const double base = c->qk_norm == MC_QK_NORM_RMS ? 1.0 : 0.0;
        weight_add(ws, "q_norm.weight", 1, hd, 0, 0, base, 0.3, &g);
        weight_add(ws, "k_norm.weight", 1, hd, 0, 0, base, 0.3, &g);
    }
}

static void mixer_init(struct mixer *mx, const struct mc_attention_config *cfg, enum mc_dtype dtype, uint64_t seed,
                       struct weight_set *keep)
{
    struct weight_set ws;
    *mx = (struct mixer){.ops = mc_reference_attention_ops(),
                         .D = cfg->hidden_size,
                         .C = 1,
                         .K = 1,
                         .state_row = 2 * cfg->num_key_value_heads * cfg->cache_length * cfg->head_dim};
    weight_set_random(&ws, cfg, seed);
    mixer_build(mx, MC_FAMILY_ATTENTION, cfg, dtype, &ws, keep);
}

static const struct {
    int64_t hq, hkv;
    double rotary;
    int32_t norm, gate, bias;
} shapes[] = {
    {2, 2, 1.0, MC_QK_NORM_NONE, 0, 0},         {4, 2, 0.25, MC_QK_NORM_ZERO_CENTRED, 1, 0},
    {4, 1, 1.0, MC_QK_NORM_RMS, 0, 0},          {4, 2, 0.5, MC_QK_NORM_NONE, 0, 1},
    {6, 3, 0.75, MC_QK_NORM_ZERO_CENTRED, 1, 1},
};

static void test_splits_and_mask(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const struct mc_attention_config cfg =
            config_of(shapes[i].hq, shapes[i].hkv, shapes[i].rotary, shapes[i].norm, shapes[i].gate, shapes[i].bias);
        struct mixer mx;
        struct weight_set ws;
        mixer_init(&mx, &cfg, MC_DTYPE_F64, 100 + i, &ws);
        const struct split_result r = check_split_invariance(&mx, 2, 13, 7 + i);
        print_message("shape %zu: split max |dy| %.3g, |dcache| %.3g, L == 1 step |dy| %.3g\n", i, r.dy, r.dcache,
                      r.dstep);
        const double *bias = weight_find(&ws, "o_proj.bias");
        const double dm = check_mask_semantics(&mx, bias);
        print_message("shape %zu: mask semantics worst difference %.3g\n", i, dm);
        assert_true(dm <= 1e-12);
        weight_set_free(&ws);
        mixer_free(&mx);
    }
}

/* The first token of a sequence attends only to itself: softmax over one key is 1, so its output is
 * o_proj(v ⊙ sigmoid(gate)) (+ bias) whatever q, k, the norms and RoPE are. */
static void test_first_token_by_hand(void **state)
{
    (void)state;
    const struct mc_attention_config cfg = config_of(4, 2, 0.25, MC_QK_NORM_ZERO_CENTRED, 1, 1);
    struct mixer mx;
    struct weight_set ws;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 7, &ws);
    const int64_t D = cfg.hidden_size, hd = cfg.head_dim, Hq = cfg.num_attention_heads;
    const int64_t r = Hq / cfg.num_key_value_heads;
    double *x = random_x(D, 3), y[12], want[12];
    const double *wq = weight_find(&ws, "q_proj.weight"), *bq = weight_find(&ws, "q_proj.bias");
    const double *wv = weight_find(&ws, "v_proj.weight"), *bv = weight_find(&ws, "v_proj.bias");
    const double *wo = weight_find(&ws, "o_proj.weight"), *bo = weight_find(&ws, "o_proj.bias");
    double att[32];
    for (int64_t h = 0; h < Hq; h++)
        for (int64_t i = 0; i < hd; i++) {
            const int64_t vrow = (h / r) * hd + i, grow = h * 2 * hd + hd + i; /* gate: second half of head h */
            double v = bv[vrow], gte = bq[grow];
            for (int64_t k = 0; k < D; k++) {
                v += wv[vrow * D + k] * x[k];
                gte += wq[grow * D + k] * x[k];
            }
            att[h * hd + i] = v / (1.0 + exp(-gte));
        }
    for (int64_t j = 0; j < D; j++) {
        want[j] = bo[j];
        for (int64_t k = 0; k < Hq * hd; k++)
            want[j] += wo[j * Hq * hd + k] * att[k];
    }
    forward_f64(&mx, NULL, 1, 1, 0, 1, x, NULL, y);
    const double d = max_abs_diff(y, want, D);
    print_message("first token vs o_proj(v * sigmoid(gate)): max |dy| %.3g\n", d);
    assert_true(d <= 1e-14);
    free(x);
    weight_set_free(&ws);
    mixer_free(&mx);
}

/* ---- error paths ------------------------------------------------------------------------------- */

static void test_cache_full_and_bad_count(void **state)
{
    (void)state;
    struct mc_attention_config cfg = config_of(2, 2, 1.0, MC_QK_NORM_NONE, 0, 0);
    cfg.cache_length = 4;
    struct mixer mx;
    mixer_init(&mx, &cfg, MC_DTYPE_F64, 5, NULL);
    struct mc_cache *c = cache_new(&mx, 1);
    double *x = random_x(5 * cfg.hidden_size, 9), y[5 * 12];
    struct mc_msg msg = {{0}};
    struct mc_forward_args a = {.batch = 1, .len = 5, .x = x, .y = y};
    assert_int_equal(mx.ops->forward(mx.model, c, &a, &msg), MC_BACKEND_INVALID);
    expect_msg(&msg, "exceed", "cache_length 4");
    /* four fit; a failed forward left the cache alone, so the count is then 4 */
    a.len = 4;
    assert_int_equal(mx.ops->forward(mx.model, c, &a, &msg), MC_BACKEND_OK);
    double *cache = cache_get(&mx, c, 1);
    assert_true(cache[0] == 4.0);
    free(cache);
    a.len = 1;
    assert_int_equal(mx.ops->forward(mx.model, c, &a, &msg), MC_BACKEND_INVALID);
    /* a pad on a full cache needs no slot */
    const uint8_t pad = 0;
    a.mask = &pad;
    assert_int_equal(mx.ops->forward(mx.model, c, &a, &msg), MC_BACKEND_OK);
    a.mask = NULL;
    /* imported counts: anything is kept, only a forward on the row checks it */
    const int64_t ns = mx.state_row;
    double *st = calloc((size_t)ns, sizeof *st);
    assert_non_null(st);
    const double bad[] = {NAN, -1.0, 1.5, 5.0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(mx.ops->cache_import(mx.model, c, &bad[i], st, &msg), MC_BACKEND_OK);
        assert_int_equal(mx.ops->forward(mx.model, c, &a, &msg), MC_BACKEND_INVALID);
        expect_msg(&msg, "cached-position count", "not an integer");
    }
    free(st);
    free(x);
    mx.ops->cache_free(mx.model, c);
    mixer_free(&mx);
}

static void test_config_and_weights(void **state)
{
    (void)state;
    const struct mc_backend_ops *ops = mc_reference_attention_ops();
    check_ops_identity(ops, MC_FAMILY_ATTENTION);
    struct mc_msg msg = {{0}};
    struct weight_set ws;
    struct {
        struct mc_attention_config cfg;
        const char *a, *b;
    } bad[] = {
        {config_of(3, 2, 1.0, MC_QK_NORM_NONE, 0, 0), "num_attention_heads", "multiple"},
        {config_of(2, 2, 0.1, MC_QK_NORM_NONE, 0, 0), "rotary dims", "even"},
        {config_of(2, 2, 0.0, MC_QK_NORM_NONE, 0, 0), "partial_rotary_factor", NULL},
        {config_of(2, 2, 1.0, 7, 0, 0), "qk_norm", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct mc_attention_config good = config_of(2, 2, 1.0, MC_QK_NORM_NONE, 0, 0);
        weight_set_random(&ws, &good, 1);
        weight_set_pack(&ws, MC_DTYPE_F64);
        assert_int_equal(try_create_ops(ops, &bad[i].cfg, MC_FAMILY_ATTENTION, MC_DTYPE_F64, ws.w, ws.n, &msg),
                         MC_BACKEND_INVALID);
        expect_msg(&msg, bad[i].a, bad[i].b);
        weight_set_free(&ws);
    }
    /* norms given without qk_norm, a gate-sized q_proj without the gate */
    struct mc_attention_config with = config_of(2, 2, 1.0, MC_QK_NORM_RMS, 1, 0);
    struct mc_attention_config without = config_of(2, 2, 1.0, MC_QK_NORM_NONE, 0, 0);
    weight_set_random(&ws, &with, 1);
    weight_set_pack(&ws, MC_DTYPE_F64);
    assert_int_equal(try_create_ops(ops, &without, MC_FAMILY_ATTENTION, MC_DTYPE_F64, ws.w, ws.n, &msg),
                     MC_BACKEND_INVALID);
    expect_msg(&msg, "q_proj.weight", "expected shape");
    weight_set_free(&ws);
    assert_int_equal(try_create_ops(ops, &without, MC_FAMILY_ATTENTION, MC_DTYPE_F16, NULL, 0, &msg),
                     MC_BACKEND_UNSUPPORTED);
}

/* f32 agrees with f64 on a gated GQA configuration. */
static void test_f32_vs_f64(void **state)
{
    (void)state;
    const struct mc_attention_config cfg = config_of(4, 2, 0.5, MC_QK_NORM_ZERO_CENTRED, 1, 1);
    struct mixer m64, m32;
    mixer_init(&m64, &cfg, MC_DTYPE_F64, 21, NULL);
    mixer_init(&m32, &cfg, MC_DTYPE_F32, 21, NULL);
    const int64_t B = 2, L = 11, D = cfg.hidden_size, n = B * L * D;
    double *x = random_x(n, 4), *y = malloc((size_t)n * sizeof *y), *y32d = malloc((size_t)n * sizeof *y32d);
    float *x32 = malloc((size_t)n * sizeof *x32), *y32 = malloc((size_t)n * sizeof *y32);
    assert_true(y && y32d && x32 && y32);
    for (int64_t i = 0; i < n; i++)
        x32[i] = (float)x[i];
    forward_f64(&m64, NULL, B, L, 0, L, x, NULL, y);
    struct mc_msg msg = {{0}};
    struct mc_forward_args a = {.batch = B, .len = L, .x = x32, .y = y32};
    assert_int_equal(m32.ops->forward(m32.model, NULL, &a, &msg), MC_BACKEND_OK);
    for (int64_t i = 0; i < n; i++)
        y32d[i] = y32[i];
    const double d = max_abs_diff(y, y32d, n);
    print_message("f32 vs f64: max |dy| %.3g (max |y| %.3g)\n", d, max_abs(y, n));
    assert_true(d <= 1e-5);
    free(y32);
    free(x32);
    free(y32d);
    free(y);
    free(x);
    mixer_free(&m32);
    mixer_free(&m64);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_goldens),          cmocka_unit_test(test_splits_and_mask),
        cmocka_unit_test(test_first_token_by_hand), cmocka_unit_test(test_cache_full_and_bad_count),
        cmocka_unit_test(test_config_and_weights), cmocka_unit_test(test_f32_vs_f64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
