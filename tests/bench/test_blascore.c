/*
 * test_blascore.c — the OpenBLAS core selection (harness/bench/blascore.h):
 *   - the upgrade rule: only a pre-AVX2 fallback core on a CPU that supports more is replaced;
 *   - the command: a user's OPENBLAS_CORETYPE and OPENBLAS_NUM_THREADS are left alone and reported as
 *     theirs; without them `mixcheck --version` names the core in use (after the re-exec when there was
 *     one) and OpenBLAS starts single-threaded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capture.h"

#include "blascore.h"

static void test_upgrade_rule(void **state)
{
    (void)state;
    const struct mc_blas_cpu avx512 = {.avx512 = 1, .avx2_fma = 1}, avx2 = {.avx512 = 0, .avx2_fma = 1},
                             sse = {0};
    assert_string_equal(mc_blas_core_upgrade("Prescott", &avx512), "SkylakeX");
    assert_string_equal(mc_blas_core_upgrade("prescott", &avx512), "SkylakeX");
    assert_string_equal(mc_blas_core_upgrade("Sandybridge", &avx512), "SkylakeX");
    assert_string_equal(mc_blas_core_upgrade("Nehalem", &avx2), "Haswell");
    assert_string_equal(mc_blas_core_upgrade("Core2", &avx2), "Haswell");
    /* nothing better to offer, or OpenBLAS already chose a modern core */
    assert_null(mc_blas_core_upgrade("Prescott", &sse));
    assert_null(mc_blas_core_upgrade("Haswell", &avx512));
    assert_null(mc_blas_core_upgrade("SkylakeX", &avx512));
    assert_null(mc_blas_core_upgrade("Zen", &avx512));
    assert_null(mc_blas_core_upgrade("Cooperlake", &avx2));
    assert_null(mc_blas_core_upgrade(NULL, &avx512));
    assert_null(mc_blas_core_upgrade("Prescott", NULL));
}

static const char *version(const char *env)
{
    static char out[4096];
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s --version", env, MC_MIXCHECK);
    assert_int_equal(mc_capture(cmd, out, sizeof out), 0);
    return out;
}

static void test_user_choice_is_kept(void **state)
{
    (void)state;
    const char *v = version("env -u MIXCHECK_BLAS_REEXEC OPENBLAS_CORETYPE=Prescott");
    if (!strstr(v, "Prescott kernels (OPENBLAS_CORETYPE=Prescott)"))
        fail_msg("a user's OPENBLAS_CORETYPE was not kept: %s", v);
    v = version("env -u MIXCHECK_BLAS_REEXEC -u MIXCHECK_BLAS_THREADS_SET OPENBLAS_NUM_THREADS=2");
    if (!strstr(v, "thread pool as the environment says"))
        fail_msg("a user's OPENBLAS_NUM_THREADS was not kept: %s", v);
}

/* Without a thread count in the environment, OpenBLAS starts single-threaded (the re-exec sets it). */
static void test_threads_default_to_one(void **state)
{
    (void)state;
    const char *v = version("env -u MIXCHECK_BLAS_REEXEC -u MIXCHECK_BLAS_THREADS_SET -u OPENBLAS_NUM_THREADS "
                            "-u GOTO_NUM_THREADS -u OMP_NUM_THREADS");
    if (!strstr(v, "thread pool started single-threaded (OPENBLAS_NUM_THREADS=1 set by mixcheck"))
        fail_msg("OpenBLAS did not start single-threaded: %s", v);
}

static void test_version_names_the_core(void **state)
{
    (void)state;
    const char *v = version("env -u OPENBLAS_CORETYPE -u MIXCHECK_BLAS_CORE_DETECTED -u MIXCHECK_BLAS_REEXEC");
    if (!strstr(v, "OpenBLAS") || !strstr(v, " kernels ("))
        fail_msg("--version does not name the OpenBLAS core: %s", v);
    /* a re-exec happened exactly when the note says so, and then the detected core was a fallback */
    const char *note = strstr(v, "set by mixcheck: ");
    if (note && !strstr(note, " detected "))
        fail_msg("the note does not say what OpenBLAS detected: %s", v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_upgrade_rule),
        cmocka_unit_test(test_user_choice_is_kept),
        cmocka_unit_test(test_version_names_the_core),
        cmocka_unit_test(test_threads_default_to_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
