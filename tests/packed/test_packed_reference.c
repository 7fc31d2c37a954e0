/*
 * test_packed_reference.c — the reference packed call (reference/ref_common.c mc_ref_forward_packed) for
 * every family at f64 and f32, on the weights of the family's tiny golden: equal bit for bit to each
 * sequence run alone as a batch of one through forward (from its slot's row, or a fresh cache), its slot
 * equal to that cache afterwards and every other slot unchanged; and the argument checks, each
 * MC_BACKEND_INVALID with its message and nothing written.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "goldenmodel.h"

#include "base/dtype.h"
#include "base/error.h"
#include "family/family.h"
#include "golden/golden.h"
#include "reference.h"
#include "golden/weightset.h"

static const char *const goldens[] = {"golden/mamba2/tiny.h5", "golden/mamba1/tiny.h5", "golden/gdn/tiny.h5",
                                      "golden/shortconv/tiny.h5"};

struct fixture {
    struct mc_golden g;
    const struct mc_backend_ops *ops;
    struct mc_model *model;
    enum mc_dtype dtype;
    size_t esz;
    int64_t D, nconv, nstate; /* per row, export layout */
};

static const struct mc_backend_ops *ops_of(enum mc_family f)
{
    switch (f) {
    case MC_FAMILY_MAMBA2:
        return mc_reference_mamba2_ops();
    case MC_FAMILY_MAMBA1:
        return mc_reference_mamba1_ops();
    case MC_FAMILY_GDN:
        return mc_reference_gdn_ops();
    default:
        return mc_reference_shortconv_ops();
    }
}

static void fixture_open(struct fixture *fx, const char *path, enum mc_dtype dtype)
{
    struct mc_error err = {0};
    memset(fx, 0, sizeof *fx);
    if (mc_golden_load(path, &fx->g, &err) != MC_ERR_NONE)
        fail_msg("%s: %s", path, err.msg);
    fx->ops = ops_of(fx->g.config.family);
    assert_true(fx->ops->caps & MC_CAP_PACKED);
    assert_non_null(fx->ops->forward_packed);
    fx->model = mc_test_golden_model(fx->ops, &fx->g, dtype);
    struct mc_family_shape sh;
    mc_family_shape(&fx->g.config, &sh);
    fx->dtype = dtype;
    fx->esz = mc_dtype_size(dtype);
    fx->D = sh.hidden;
    fx->nconv = sh.conv_channels * sh.conv_kernel;
    fx->nstate = mc_family_state_elems(&sh);
}

static void fixture_close(struct fixture *fx)
{
    fx->ops->model_destroy(fx->model);
    mc_golden_free(&fx->g);
}

/* Raw export of a cache of `rows` rows into conv [rows*nconv], state [rows*nstate] (model dtype). */
static void export_raw(struct fixture *fx, struct mc_cache *c, void *conv, void *state)
{
    struct mc_msg msg = {{0}};
    assert_int_equal(fx->ops->cache_export(fx->model, c, conv, state, &msg), MC_BACKEND_OK);
}

/* Values U[-1, 1) in the model dtype. */
static void *random_buf(struct fixture *fx, int64_t n, uint64_t seed)
{
    double *v = malloc((size_t)n * sizeof *v);
    void *out = malloc((size_t)n * fx->esz);
    assert_true(v != NULL && out != NULL);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (double)(seed >> 11) / 9007199254740992.0 * 2.0 - 1.0;
    }
    mc_dtype_from_f64(fx->dtype, v, out, (size_t)n);
    free(v);
    return out;
}

/* A pool of S rows imported from random windows and states; conv0 and state0 receive what it holds. */
static struct mc_cache *random_pool(struct fixture *fx, int64_t S, void **conv0, void **state0)
{
    struct mc_cache *pool = NULL;
    struct mc_msg msg = {{0}};
    assert_int_equal(fx->ops->cache_alloc(fx->model, S, &pool, &msg), MC_BACKEND_OK);
    *conv0 = random_buf(fx, S * fx->nconv, 11);
    *state0 = fx->nstate ? random_buf(fx, S * fx->nstate, 12) : NULL;
    assert_int_equal(fx->ops->cache_import(fx->model, pool, *conv0, *state0, &msg), MC_BACKEND_OK);
    return pool;
}

static void check_equals_per_sequence(const char *path, enum mc_dtype dtype)
{
    struct fixture fx;
    fixture_open(&fx, path, dtype);
    enum { S = 7, N = 5 };
    const int64_t cu[N + 1] = {0, 5, 5, 6, 15, 22}; /* lengths 5, 0, 1, 9, 7 */
    const int64_t slots[N] = {6, 2, 0, 3, 4};
    const uint8_t has[N] = {0, 1, 1, 1, 0};
    const int64_t T = cu[N];
    void *conv0, *state0;
    struct mc_cache *pool = random_pool(&fx, S, &conv0, &state0);
    void *x = random_buf(&fx, T * fx.D, 13);
    void *y = malloc((size_t)(T * fx.D) * fx.esz), *y1 = malloc((size_t)(T * fx.D) * fx.esz);
    void *conv1 = malloc((size_t)(S * fx.nconv) * fx.esz), *state1 = fx.nstate ? malloc((size_t)(S * fx.nstate) * fx.esz) : NULL;
    void *rc = malloc((size_t)fx.nconv * fx.esz), *rs = fx.nstate ? malloc((size_t)fx.nstate * fx.esz) : NULL;
    assert_true(y && y1 && conv1 && rc && (!fx.nstate || (state1 && rs)));
    struct mc_packed_args a = {.n_seqs = N, .cu_seqlens = cu, .slots = slots, .has_initial_state = has, .x = x, .y = y};
    struct mc_msg msg = {{0}};
    if (fx.ops->forward_packed(fx.model, pool, &a, &msg) != MC_BACKEND_OK)
        fail_msg("forward_packed: %s", msg.text);
    export_raw(&fx, pool, conv1, state1);
    uint8_t owned[S] = {0};
    for (int i = 0; i < N; i++) {
        int64_t len = cu[i + 1] - cu[i];
        if (len == 0)
            continue;
        owned[slots[i]] = 1;
        struct mc_cache *one = NULL;
        assert_int_equal(fx.ops->cache_alloc(fx.model, 1, &one, &msg), MC_BACKEND_OK);
        if (has[i])
            assert_int_equal(fx.ops->cache_import(fx.model, one, (char *)conv0 + slots[i] * fx.nconv * fx.esz,
                                                  fx.nstate ? (char *)state0 + slots[i] * fx.nstate * fx.esz : NULL,
                                                  &msg),
                             MC_BACKEND_OK);
        struct mc_forward_args fa = {.batch = 1,
                                     .len = len,
                                     .x = (char *)x + cu[i] * fx.D * fx.esz,
                                     .y = (char *)y1 + cu[i] * fx.D * fx.esz};
        assert_int_equal(fx.ops->forward(fx.model, one, &fa, &msg), MC_BACKEND_OK);
        assert_memory_equal((char *)y + cu[i] * fx.D * fx.esz, (char *)y1 + cu[i] * fx.D * fx.esz,
                            (size_t)(len * fx.D) * fx.esz);
        export_raw(&fx, one, rc, rs);
        assert_memory_equal((char *)conv1 + slots[i] * fx.nconv * fx.esz, rc, (size_t)fx.nconv * fx.esz);
        if (fx.nstate)
            assert_memory_equal((char *)state1 + slots[i] * fx.nstate * fx.esz, rs, (size_t)fx.nstate * fx.esz);
        fx.ops->cache_free(fx.model, one);
    }
    for (int64_t r = 0; r < S; r++) {
        if (owned[r])
            continue;
        assert_memory_equal((char *)conv1 + r * fx.nconv * fx.esz, (char *)conv0 + r * fx.nconv * fx.esz,
                            (size_t)fx.nconv * fx.esz);
        if (fx.nstate)
            assert_memory_equal((char *)state1 + r * fx.nstate * fx.esz, (char *)state0 + r * fx.nstate * fx.esz,
                                (size_t)fx.nstate * fx.esz);
    }
    /* a fresh pool (never primed) reads zeros for has_initial_state 1: the same as a fresh cache */
    struct mc_cache *fresh = NULL, *one = NULL;
    assert_int_equal(fx.ops->cache_alloc(fx.model, S, &fresh, &msg), MC_BACKEND_OK);
    assert_int_equal(fx.ops->cache_alloc(fx.model, 1, &one, &msg), MC_BACKEND_OK);
    const int64_t cu1[2] = {0, 9};
    const int64_t sl1[1] = {5};
    const uint8_t h1[1] = {1};
    struct mc_packed_args a1 = {.n_seqs = 1, .cu_seqlens = cu1, .slots = sl1, .has_initial_state = h1, .x = x, .y = y};
    assert_int_equal(fx.ops->forward_packed(fx.model, fresh, &a1, &msg), MC_BACKEND_OK);
    struct mc_forward_args fa = {.batch = 1, .len = 9, .x = x, .y = y1};
    assert_int_equal(fx.ops->forward(fx.model, one, &fa, &msg), MC_BACKEND_OK);
    assert_memory_equal(y, y1, (size_t)(9 * fx.D) * fx.esz);
    fx.ops->cache_free(fx.model, fresh);
    fx.ops->cache_free(fx.model, one);

    fx.ops->cache_free(fx.model, pool);
    free(conv0);
    free(state0);
    free(conv1);
    free(state1);
    free(rc);
    free(rs);
    free(x);
    free(y);
    free(y1);
    fixture_close(&fx);
}

static void test_equals_per_sequence(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof goldens / sizeof goldens[0]; i++) {
        check_equals_per_sequence(goldens[i], MC_DTYPE_F64);
        check_equals_per_sequence(goldens[i], MC_DTYPE_F32);
    }
}

/* Each bad call: INVALID, its message, and the pool as it was. */
static void test_argument_checks(void **state)
{
    (void)state;
    for (size_t gi = 0; gi < sizeof goldens / sizeof goldens[0]; gi++) {
        struct fixture fx;
        fixture_open(&fx, goldens[gi], MC_DTYPE_F32);
        enum { S = 4 };
        void *conv0, *state0;
        struct mc_cache *pool = random_pool(&fx, S, &conv0, &state0);
        void *x = random_buf(&fx, 8 * fx.D, 3), *y = malloc((size_t)(8 * fx.D) * fx.esz);
        void *conv1 = malloc((size_t)(S * fx.nconv) * fx.esz), *state1 = fx.nstate ? malloc((size_t)(S * fx.nstate) * fx.esz) : NULL;
        const int64_t cu_ok[3] = {0, 3, 8}, cu_start[3] = {1, 3, 8}, cu_down[3] = {0, 5, 4};
        const int64_t sl_ok[2] = {1, 3}, sl_out[2] = {1, 4}, sl_neg[2] = {-1, 3}, sl_dup[2] = {2, 2};
        const uint8_t h_ok[2] = {0, 1}, h_bad[2] = {0, 2};
        struct {
            struct mc_packed_args a;
            const char *msg;
        } bad[] = {
            {{2, cu_start, sl_ok, h_ok, x, y}, "cu_seqlens[0] must be 0 (got 1)"},
            {{2, cu_down, sl_ok, h_ok, x, y}, "cu_seqlens must be non-decreasing (cu_seqlens[2] = 4 after 5)"},
            {{2, cu_ok, sl_out, h_ok, x, y}, "slots[1] = 4 is outside the pool [0, 4)"},
            {{2, cu_ok, sl_neg, h_ok, x, y}, "slots[0] = -1 is outside the pool [0, 4)"},
            {{2, cu_ok, sl_dup, h_ok, x, y}, "slot 2 is given to sequences 0 and 1 (slots must be distinct)"},
            {{2, cu_ok, sl_ok, h_bad, x, y}, "has_initial_state[1] must be 0 or 1 (got 2)"},
            {{2, cu_ok, sl_ok, h_ok, NULL, y}, "needs x [T][D] and y [T][D] for T = 8 tokens"},
            {{2, cu_ok, sl_ok, h_ok, x, NULL}, "needs x [T][D] and y [T][D] for T = 8 tokens"},
            {{2, NULL, sl_ok, h_ok, x, y}, "needs cu_seqlens [n+1], slots [n] and has_initial_state [n]"},
            {{-1, cu_ok, sl_ok, h_ok, x, y}, "n_seqs -1 must be in [0, 4]"},
            {{5, cu_ok, sl_ok, h_ok, x, y}, "n_seqs 5 must be in [0, 4]"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            struct mc_msg msg = {{0}};
            enum mc_backend_status st = fx.ops->forward_packed(fx.model, pool, &bad[i].a, &msg);
            if (st != MC_BACKEND_INVALID || strstr(msg.text, bad[i].msg) == NULL ||
                strstr(msg.text, " reference: forward_packed") == NULL)
                fail_msg("%s, bad call %zu: status %d, message '%s' (expected '%s')", goldens[gi], i, (int)st,
                         msg.text, bad[i].msg);
            export_raw(&fx, pool, conv1, state1);
            assert_memory_equal(conv1, conv0, (size_t)(S * fx.nconv) * fx.esz);
            if (fx.nstate)
                assert_memory_equal(state1, state0, (size_t)(S * fx.nstate) * fx.esz);
        }
        /* no pool: INVALID too; zero tokens (x and y may then be NULL): OK and nothing changes */
        struct mc_msg msg = {{0}};
        struct mc_packed_args a0 = {2, (const int64_t[3]){0, 0, 0}, sl_ok, h_ok, NULL, NULL};
        assert_int_equal(fx.ops->forward_packed(fx.model, NULL, &a0, &msg), MC_BACKEND_INVALID);
        assert_int_equal(fx.ops->forward_packed(fx.model, pool, &a0, &msg), MC_BACKEND_OK);
        export_raw(&fx, pool, conv1, state1);
        assert_memory_equal(conv1, conv0, (size_t)(S * fx.nconv) * fx.esz);
        fx.ops->cache_free(fx.model, pool);
        free(conv0);
        free(state0);
        free(conv1);
        free(state1);
        free(x);
        free(y);
        fixture_close(&fx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equals_per_sequence),
        cmocka_unit_test(test_argument_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
