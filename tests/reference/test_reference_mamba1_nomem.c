/*
 * test_reference_mamba1_nomem.c — allocation failure at every allocation of the reference Mamba1
 * mixer (STYLE.md convention 10). malloc and calloc are wrapped at link time (-Wl,--wrap=...);
 * failing the k-th call, for every k until a run needs no failure, must give MC_BACKEND_NOMEM with
 * a message, a NULL handle, no leak (the sanitizer build checks that), and a cache that a failed
 * forward left exactly as it was.
 */
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

/* ---- a small model ----------------------------------------------------------------------------- */

enum { D_ = 4, I_ = 6, N_ = 3, K_ = 3, R_ = 2, X_ = R_ + 2 * N_, B_ = 2, L_ = 5 };

static double w_in[2 * I_ * D_], b_in[2 * I_], w_conv[I_ * K_], b_conv[I_], w_x[X_ * I_], w_dt[I_ * R_], b_dt[I_],
    a_log[I_ * N_], d_skip[I_], w_out[D_ * I_], b_out[D_], x[B_ * L_ * D_];

static void fill(double *v, int n, double base, double scale, uint64_t *s)
{
    for (int i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = base + scale * ((double)(*s >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
    }
}

static int setup(void **state)
{
    (void)state;
    uint64_t s = 99;
    fill(w_in, 2 * I_ * D_, 0, 0.5, &s);
    fill(b_in, 2 * I_, 0, 0.1, &s);
    fill(w_conv, I_ * K_, 0, 0.5, &s);
    fill(b_conv, I_, 0, 0.1, &s);
    fill(w_x, X_ * I_, 0, 0.4, &s);
    fill(w_dt, I_ * R_, 0, 0.5, &s);
    fill(b_dt, I_, -1, 0.5, &s);
    fill(a_log, I_ * N_, 0.3, 0.3, &s);
    fill(d_skip, I_, 1, 0.2, &s);
    fill(w_out, D_ * I_, 0, 0.5, &s);
    fill(b_out, D_, 0, 0.1, &s);
    fill(x, B_ * L_ * D_, 0, 1, &s);
    return 0;
}

/* create, alloc a cache, prefill 3 tokens, then a forward that may fail: it must leave the cache
 * as it was. Returns the first non-OK status (OK when everything ran). */
static enum mc_backend_status run_once(void)
{
    const struct mc_backend_ops *ops = mc_reference_mamba1_ops();
    const struct mc_mamba1_config cfg = {.hidden_size = D_,
                                         .intermediate_size = I_,
                                         .state_size = N_,
                                         .conv_kernel = K_,
                                         .time_step_rank = R_,
                                         .use_bias = 1,
                                         .use_conv_bias = 1};
    const struct mc_weight ws[] = {
        {"in_proj.weight", 2, {2 * I_, D_}, w_in}, {"in_proj.bias", 1, {2 * I_}, b_in},
        {"conv1d.weight", 3, {I_, 1, K_}, w_conv}, {"conv1d.bias", 1, {I_}, b_conv},
        {"x_proj.weight", 2, {X_, I_}, w_x},       {"dt_proj.weight", 2, {I_, R_}, w_dt},
        {"dt_proj.bias", 1, {I_}, b_dt},           {"A_log", 2, {I_, N_}, a_log},
        {"D", 1, {I_}, d_skip},                    {"out_proj.weight", 2, {D_, I_}, w_out},
        {"out_proj.bias", 1, {D_}, b_out},
    };
    const struct mc_model_desc desc = {
        .family = MC_FAMILY_MAMBA1, .dtype = MC_DTYPE_F64, .config = &cfg, .weights = ws, .n_weights = 11};
    struct mc_model *model = NULL;
    struct mc_cache *cache = NULL;
    struct mc_msg msg = {{0}};
    double y[B_ * L_ * D_];
    double before[B_ * (I_ * K_ + I_ * N_)], after[B_ * (I_ * K_ + I_ * N_)];
    enum mc_backend_status st;

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
    assert_int_equal(ops->cache_export(model, cache, before, before + B_ * I_ * K_, &msg), MC_BACKEND_OK);
    a.len = L_;
    if ((st = ops->forward(model, NULL, &a, &msg)) != MC_BACKEND_OK)
        goto done;
    if ((st = ops->forward(model, cache, &a, &msg)) != MC_BACKEND_OK) {
        assert_int_equal(ops->cache_export(model, cache, after, after + B_ * I_ * K_, &msg), MC_BACKEND_OK);
        assert_memory_equal(before, after, sizeof before);
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
    (void)state;
    long k;
    for (k = 1; k < 1000; k++) {
        failed = 0;
        fail_countdown = k;
        enum mc_backend_status st = run_once();
        fail_countdown = 0;
        if (!failed) {
            assert_int_equal(st, MC_BACKEND_OK);
            break;
        }
        assert_int_equal(st, MC_BACKEND_NOMEM);
    }
    print_message("allocation failure injected at each of %ld allocations\n", k - 1);
    assert_true(k > 10 && k < 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_allocation_fails_cleanly),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
