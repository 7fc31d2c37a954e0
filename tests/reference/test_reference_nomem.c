/*
 * test_reference_nomem.c — allocation failure at every allocation of each reference mixer
 * (STYLE.md convention 10). malloc and calloc are wrapped at link time (-Wl,--wrap=...); failing
 * the k-th call, for every k until a run needs no failure, must give MC_BACKEND_NOMEM with a
 * message, a NULL handle, no leak (the sanitizer build checks that), and a cache that a failed
 * forward left exactly as it was. One small model per family, all biases on.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reference.h"

/* ---- the allocator wrap: calls count down while armed; the call that reaches zero fails -------- */

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);

static long fail_countdown; /* 0 = off */
static int failed;

static int should_fail(void)
{
    if (fail_countdown > 0 && --fail_countdown == 0) {
        failed = 1;
        return 1;
    }
    return 0;
}

void *__wrap_malloc(size_t size)
{
    return should_fail() ? NULL : __real_malloc(size);
}
void *__wrap_calloc(size_t n, size_t size)
{
    return should_fail() ? NULL : __real_calloc(n, size);
}

/* ---- one small model per family ---------------------------------------------------------------- */

enum { B_ = 2, L_ = 5, D_ = 4, MAXW_ = 12, POOL_ = 1024 };

/* One weight: HF name, shape, and the base/scale of its fill. */
struct wspec {
    const char *name;
    int ndim;
    int64_t dims[3];
    double base, scale;
};

/* A family's model: its ops, configuration, weights in fill order, and exported cache sizes. */
struct family_case {
    const char *name;
    const struct mc_backend_ops *(*ops)(void);
    enum mc_family family;
    const void *cfg;
    int n_weights;
    struct wspec w[MAXW_];
    int64_t window_row, state_row; /* exported [C][K] and recurrent state per batch row; 0: none */
    long min_allocs;               /* the allocation count the run must exceed */
};

/* Mamba2: H = P = 2, N = 3, G = 1, K = 3: I = 4, C = 10, proj = 16. */
static const struct mc_mamba2_config m2_cfg = {.hidden_size = D_,
                                               .num_heads = 2,
                                               .head_dim = 2,
                                               .state_size = 3,
                                               .n_groups = 1,
                                               .conv_kernel = 3,
                                               .chunk_size = 2,
                                               .norm_group_size = 4,
                                               .layer_norm_epsilon = 1e-5,
                                               .time_step_limit = {0.0, INFINITY},
                                               .use_bias = 1,
                                               .use_conv_bias = 1};
/* Mamba1: I = 6, N = 3, K = 3, R = 2: x_proj rows R + 2N = 8. */
static const struct mc_mamba1_config m1_cfg = {.hidden_size = D_,
                                               .intermediate_size = 6,
                                               .state_size = 3,
                                               .conv_kernel = 3,
                                               .time_step_rank = 2,
                                               .use_bias = 1,
                                               .use_conv_bias = 1};
/* GDN (Qwen3.5 layout): Hk = 1, Hv = 2, dk = dv = 2, K = 3: key_dim 2, value_dim 4, C = 8. */
static const struct mc_gdn_config gdn_cfg = {.hidden_size = D_,
                                             .num_key_heads = 1,
                                             .num_value_heads = 2,
                                             .key_head_dim = 2,
                                             .value_head_dim = 2,
                                             .conv_kernel = 3,
                                             .chunk_size = 2,
                                             .rms_norm_eps = 1e-6,
                                             .layout = MC_GDN_LAYOUT_QWEN3_5};
static const struct mc_shortconv_config sc_cfg = {.hidden_size = D_, .conv_kernel = 3, .conv_bias = 1};
/* Attention: Hq = 2, Hkv = 1, hd = 2, gated (q_proj rows 8), q/k norms, biases, 8 cached positions. */
static const struct mc_attention_config at_cfg = {.hidden_size = D_,
                                                  .num_attention_heads = 2,
                                                  .num_key_value_heads = 1,
                                                  .head_dim = 2,
                                                  .cache_length = 8,
                                                  .partial_rotary_factor = 1.0,
                                                  .rope_theta = 10000.0,
                                                  .rms_norm_eps = 1e-6,
                                                  .qk_norm = MC_QK_NORM_ZERO_CENTRED,
                                                  .attn_output_gate = 1,
                                                  .attention_bias = 1};

static const struct family_case cases[] = {
    {"mamba2",
     mc_reference_mamba2_ops,
     MC_FAMILY_MAMBA2,
     &m2_cfg,
     10,
     {{"in_proj.weight", 2, {16, D_}, 0, 0.5},
      {"in_proj.bias", 1, {16}, 0, 0.1},
      {"conv1d.weight", 3, {10, 1, 3}, 0, 0.5},
      {"conv1d.bias", 1, {10}, 0, 0.1},
      {"dt_bias", 1, {2}, -1, 0.5},
      {"A_log", 1, {2}, 0.3, 0.3},
      {"D", 1, {2}, 1, 0.2},
      {"norm.weight", 1, {4}, 1, 0.2},
      {"out_proj.weight", 2, {D_, 4}, 0, 0.5},
      {"out_proj.bias", 1, {D_}, 0, 0.1}},
     10 * 3,
     2 * 2 * 3,
     10},
    {"mamba1",
     mc_reference_mamba1_ops,
     MC_FAMILY_MAMBA1,
     &m1_cfg,
     11,
     {{"in_proj.weight", 2, {12, D_}, 0, 0.5},
      {"in_proj.bias", 1, {12}, 0, 0.1},
      {"conv1d.weight", 3, {6, 1, 3}, 0, 0.5},
      {"conv1d.bias", 1, {6}, 0, 0.1},
      {"x_proj.weight", 2, {8, 6}, 0, 0.4},
      {"dt_proj.weight", 2, {6, 2}, 0, 0.5},
      {"dt_proj.bias", 1, {6}, -1, 0.5},
      {"A_log", 2, {6, 3}, 0.3, 0.3},
      {"D", 1, {6}, 1, 0.2},
      {"out_proj.weight", 2, {D_, 6}, 0, 0.5},
      {"out_proj.bias", 1, {D_}, 0, 0.1}},
     6 * 3,
     6 * 3,
     10},
    {"gdn",
     mc_reference_gdn_ops,
     MC_FAMILY_GDN,
     &gdn_cfg,
     9,
     {{"in_proj_qkv.weight", 2, {8, D_}, 0, 0.5},
      {"in_proj_z.weight", 2, {4, D_}, 0, 0.5},
      {"in_proj_b.weight", 2, {2, D_}, 0, 0.5},
      {"in_proj_a.weight", 2, {2, D_}, 0, 0.5},
      {"conv1d.weight", 3, {8, 1, 3}, 0, 0.5},
      {"dt_bias", 1, {2}, 0, 1},
      {"A_log", 1, {2}, -0.5, 1},
      {"norm.weight", 1, {2}, 1, 0.2},
      {"out_proj.weight", 2, {D_, 4}, 0, 0.5}},
     8 * 3,
     2 * 2 * 2,
     10},
    {"shortconv",
     mc_reference_shortconv_ops,
     MC_FAMILY_SHORTCONV,
     &sc_cfg,
     6,
     {{"in_proj.weight", 2, {3 * D_, D_}, 0, 0.5},
      {"in_proj.bias", 1, {3 * D_}, 0, 0.1},
      {"conv.weight", 3, {D_, 1, 3}, 0, 0.5},
      {"conv.bias", 1, {D_}, 0, 0.1},
      {"out_proj.weight", 2, {D_, D_}, 0, 0.5},
      {"out_proj.bias", 1, {D_}, 0, 0.1}},
     D_ * 3,
     0,
     8},
    {"attention",
     mc_reference_attention_ops,
     MC_FAMILY_ATTENTION,
     &at_cfg,
     10,
     {{"q_proj.weight", 2, {8, D_}, 0, 0.5},
      {"q_proj.bias", 1, {8}, 0, 0.1},
      {"k_proj.weight", 2, {2, D_}, 0, 0.5},
      {"k_proj.bias", 1, {2}, 0, 0.1},
      {"v_proj.weight", 2, {2, D_}, 0, 0.5},
      {"v_proj.bias", 1, {2}, 0, 0.1},
      {"o_proj.weight", 2, {D_, 4}, 0, 0.5},
      {"o_proj.bias", 1, {D_}, 0, 0.1},
      {"q_norm.weight", 1, {2}, 0, 0.2},
      {"k_norm.weight", 1, {2}, 0, 0.2}},
     1,
     2 * 8 * 2,
     20},
};

/* Weight values (one pool, in fill order) and the input, from the same LCG stream as before. */
static double pool[POOL_], x[B_ * L_ * D_];
static struct mc_weight weights[MAXW_];

static void fill(double *v, int64_t n, double base, double scale, uint64_t *s)
{
    for (int64_t i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = base + scale * ((double)(*s >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
    }
}

static void setup_case(const struct family_case *fc)
{
    uint64_t s = 99;
    int64_t used = 0;
    for (int i = 0; i < fc->n_weights; i++) {
        const struct wspec *w = &fc->w[i];
        int64_t n = 1;
        for (int d = 0; d < w->ndim; d++)
            n *= w->dims[d];
        assert_true(used + n <= POOL_);
        fill(pool + used, n, w->base, w->scale, &s);
        weights[i] = (struct mc_weight){.name = w->name, .ndim = w->ndim, .data = pool + used};
        memcpy(weights[i].dims, w->dims, sizeof w->dims);
        used += n;
    }
    fill(x, B_ * L_ * D_, 0, 1, &s);
}

/* create, alloc a cache, prefill 3 tokens, then a forward that may fail: it must leave the cache
 * as it was. Returns the first non-OK status (OK when everything ran). */
static enum mc_backend_status run_once(const struct family_case *fc)
{
    const struct mc_backend_ops *ops = fc->ops();
    const struct mc_model_desc desc = {
        .family = fc->family, .dtype = MC_DTYPE_F64, .config = fc->cfg, .weights = weights, .n_weights = fc->n_weights};
    const int64_t nw = B_ * fc->window_row, ncache = B_ * (fc->window_row + fc->state_row);
    struct mc_model *model = NULL;
    struct mc_cache *cache = NULL;
    struct mc_msg msg = {{0}};
    double y[B_ * L_ * D_], before[256], after[256];
    enum mc_backend_status st;
    assert_true(ncache <= 256);

    if ((st = ops->model_create(&desc, &model, &msg)) != MC_BACKEND_OK) {
        assert_null(model);
        goto done;
    }
    if ((st = ops->cache_alloc(model, B_, &cache, &msg)) != MC_BACKEND_OK) {
        assert_null(cache);
        goto done;
    }
    struct mc_forward_args a = {.batch = B_, .len = 3, .x = x, .mask = NULL, .y = y};
    if ((st = ops->forward(model, cache, &a, &msg)) != MC_BACKEND_OK)
        goto done;
    assert_int_equal(ops->cache_export(model, cache, before, fc->state_row ? before + nw : NULL, &msg), MC_BACKEND_OK);
    a.len = L_;
    if ((st = ops->forward(model, NULL, &a, &msg)) != MC_BACKEND_OK)
        goto done;
    if ((st = ops->forward(model, cache, &a, &msg)) != MC_BACKEND_OK) {
        assert_int_equal(ops->cache_export(model, cache, after, fc->state_row ? after + nw : NULL, &msg),
                         MC_BACKEND_OK);
        assert_memory_equal(before, after, (size_t)ncache * sizeof(double));
        goto done;
    }

done:
    if (st != MC_BACKEND_OK)
        assert_true(msg.text[0] != '\0');
    ops->cache_free(model, cache);
    ops->model_destroy(model);
    return st;
}

static void test_every_allocation_fails_cleanly(void **state)
{
    const struct family_case *fc = *state;
    long k;
    setup_case(fc);
    for (k = 1; k < 1000; k++) {
        failed = 0;
        fail_countdown = k;
        enum mc_backend_status st = run_once(fc);
        fail_countdown = 0;
        if (!failed) {
            assert_int_equal(st, MC_BACKEND_OK);
            break;
        }
        assert_int_equal(st, MC_BACKEND_NOMEM);
    }
    print_message("%s: allocation failure injected at each of %ld allocations\n", fc->name, k - 1);
    assert_true(k > fc->min_allocs && k < 1000);
}

int main(void)
{
    struct CMUnitTest tests[sizeof cases / sizeof cases[0]];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        tests[i] = (struct CMUnitTest){.name = cases[i].name,
                                       .test_func = test_every_allocation_fails_cleanly,
                                       .initial_state = (void *)&cases[i]};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
