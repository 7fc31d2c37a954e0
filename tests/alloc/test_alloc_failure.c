/*
 * test_alloc_failure.c — allocation failure at every allocation point of the YAML case and
 * tolerance loader (yamldoc, case, tolerance) and of the HDF5 golden reader (h5read, golden),
 * STYLE.md convention 10.
 *
 * Each loader is run with allocation N failed through the alloc.h hook, for N = 0, 1, 2, ... until
 * a run needs no failure (the hook did not fire) and the load succeeds. Every failing run must
 * return MC_ERR_NOMEM with an "out of memory" message naming the file, leave the output struct
 * zeroed, and leak nothing: the sanitizer build (-DMIXCHECK_SANITIZE=ON) checks memory with LSan,
 * and HDF5 handles are counted here. The number of allocations each load makes is printed.
 *
 * Not covered: allocations inside libyaml and HDF5, which do not pass through alloc.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "base/alloc.h"
#include "case/case.h"
#include "golden/golden.h"

#define SRC MC_SOURCE_DIR "/"

/* ---- helpers ----------------------------------------------------------------------------------- */

static int all_zero(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        if (b[i] != 0)
            return 0;
    }
    return 1;
}

/* Checks one failed run: the code, the message (naming path, or for a case the tolerance file
 * next to it), the output zeroed. */
static void check_nomem(const char *path, long n, enum mc_err_code rc, const struct mc_error *err, int zeroed)
{
    if (rc != MC_ERR_NOMEM || err->code != MC_ERR_NOMEM)
        fail_msg("%s, allocation %ld failed: expected MC_ERR_NOMEM, got %d: %s", path, n, (int)rc, err->msg);
    const char *slash = strrchr(path, '/');
    size_t dir = slash != NULL ? (size_t)(slash - path) + 1 : 0;
    if (strncmp(err->msg, path, dir) != 0 || strstr(err->msg, "out of memory") == NULL)
        fail_msg("%s, allocation %ld failed: unexpected message: %s", path, n, err->msg);
    if (!zeroed)
        fail_msg("%s, allocation %ld failed: output not zeroed", path, n);
}

static void assert_no_open_hdf5_objects(const char *path, long n)
{
    ssize_t open = H5Fget_obj_count((hid_t)H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (open != 0)
        fail_msg("%s, allocation %ld failed: %zd HDF5 objects left open", path, n, open);
}

enum loader { LOAD_CASE, LOAD_TOLERANCE, LOAD_GOLDEN };

/* One load of path with allocation n failed (n < 0: none); returns whether the hook fired. */
static int load_once(enum loader kind, const char *path, long n, enum mc_err_code *rc, struct mc_error *err)
{
    int zeroed = 0, fired;
    mc_error_clear(err);
    if (kind == LOAD_CASE) {
        struct mc_case c;
        memset(&c, 0xAB, sizeof c);
        mc_alloc_fail_nth(n);
        *rc = mc_case_load(path, &c, err);
        fired = mc_alloc_failed();
        mc_alloc_fail_nth(-1);
        zeroed = all_zero(&c, sizeof c);
        mc_case_free(&c);
    } else if (kind == LOAD_TOLERANCE) {
        struct mc_tolerance_profile p;
        memset(&p, 0xAB, sizeof p);
        mc_alloc_fail_nth(n);
        *rc = mc_tolerance_load(path, &p, err);
        fired = mc_alloc_failed();
        mc_alloc_fail_nth(-1);
        zeroed = all_zero(&p, sizeof p);
        mc_tolerance_free(&p);
    } else {
        struct mc_golden g;
        memset(&g, 0xAB, sizeof g);
        mc_alloc_fail_nth(n);
        *rc = mc_golden_load(path, &g, err);
        fired = mc_alloc_failed();
        mc_alloc_fail_nth(-1);
        zeroed = all_zero(&g, sizeof g);
        mc_golden_free(&g);
        assert_no_open_hdf5_objects(path, n);
    }
    if (fired)
        check_nomem(path, n, *rc, err, zeroed);
    return fired;
}

/* Fails allocation 0, 1, 2, ... of a load of path until one load needs no failure; returns the
 * number of allocations a successful load makes. */
static long fail_each_allocation(enum loader kind, const char *path)
{
    struct mc_error err;
    enum mc_err_code rc = MC_ERR_NONE;
    if (access(path, R_OK) != 0)
        fail_msg("%s: missing", path);
    long n = 0;
    while (load_once(kind, path, n, &rc, &err)) {
        n++;
        if (n > 100000)
            fail_msg("%s: no end to the allocations", path);
    }
    if (rc != MC_ERR_NONE)
        fail_msg("%s: the load without a failure did not succeed: %s", path, err.msg);
    const char *shown = strncmp(path, SRC, strlen(SRC)) == 0 ? path + strlen(SRC) : path;
    print_message("[ %-44s ] %ld allocations, each failed in turn\n", shown, n);
    return n;
}

/* ---- the hook itself --------------------------------------------------------------------------- */

static void test_hook(void **state)
{
    (void)state;
    void *a = NULL, *b = NULL, *c = NULL;

    mc_alloc_fail_nth(-1); /* disarmed: nothing fails, a zero size still gives memory */
    assert_non_null(a = mc_malloc(0));
    assert_non_null(b = mc_calloc(0, 8));
    assert_false(mc_alloc_failed());
    free(a);
    free(b);

    mc_alloc_fail_nth(0); /* the next call fails, and only that one */
    assert_null(mc_malloc(16));
    assert_true(mc_alloc_failed());
    assert_non_null(a = mc_malloc(16));
    assert_true(mc_alloc_failed()); /* stays set until the next arming */

    mc_alloc_fail_nth(2); /* two succeed, the third fails: realloc leaves its block alone */
    assert_non_null(b = mc_calloc(4, 4));
    assert_non_null(c = mc_strdup("abc"));
    assert_false(mc_alloc_failed());
    assert_null(mc_realloc(a, 64));
    assert_true(mc_alloc_failed());
    assert_non_null(a = mc_realloc(a, 64));
    assert_string_equal(c, "abc");
    free(a);
    free(b);
    free(c);

    mc_alloc_fail_nth(0);
    assert_null(mc_strdup("abc"));
    mc_alloc_fail_nth(-1);
    assert_false(mc_alloc_failed());
    assert_non_null(a = mc_strdup(""));
    free(a);
}

/* ---- YAML: cases and tolerance profiles -------------------------------------------------------- */

/* A real case; its tolerance profile (a second file) loads inside it. */
static void test_case_leftpad(void **state)
{
    (void)state;
    assert_true(fail_each_allocation(LOAD_CASE, SRC "cases/mamba2/leftpad.yaml") > 0);
}

/* Every scenario kind, chunk sizes included. */
static void test_case_every_scenario(void **state)
{
    (void)state;
    assert_true(fail_each_allocation(LOAD_CASE, SRC "tests/case/fixtures/valid/case.yaml") > 0);
}

/* A case named without a directory: its relative paths are taken as they are. */
static void test_case_bare_name(void **state)
{
    (void)state;
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(SRC "cases/mamba2"), 0);
    long n = fail_each_allocation(LOAD_CASE, "leftpad.yaml");
    assert_int_equal(chdir(cwd), 0);
    assert_true(n > 0);
}

static void test_tolerance(void **state)
{
    (void)state;
    assert_true(fail_each_allocation(LOAD_TOLERANCE, SRC "cases/tolerances/mamba2.yaml") > 0);
}

/* ---- HDF5 goldens ------------------------------------------------------------------------------ */

static void test_golden_tiny(void **state)
{
    (void)state;
    assert_true(fail_each_allocation(LOAD_GOLDEN, SRC "golden/mamba2/tiny.h5") > 0);
}

/* With an attention mask. */
static void test_golden_leftpad(void **state)
{
    (void)state;
    assert_true(fail_each_allocation(LOAD_GOLDEN, SRC "golden/mamba2/leftpad.h5") > 0);
}

/* tiny.h5 with /generator rewritten as a fixed-length string, the string reader's other path. */
static void test_golden_fixed_string(void **state)
{
    (void)state;
    char dir[] = "/tmp/mc_alloc_XXXXXX", path[64], cmd[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/fixed.h5", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", SRC "golden/mamba2/tiny.h5", path);
    assert_int_equal(system(cmd), 0);

    const char *value = "mixcheck test (fixed-length)";
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    assert_true(H5Adelete_by_name(f, "/", "generator", H5P_DEFAULT) >= 0);
    hid_t t = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR);
    assert_true(H5Tset_size(t, strlen(value)) >= 0 && H5Tset_strpad(t, H5T_STR_NULLPAD) >= 0);
    hid_t a = H5Acreate_by_name(f, "/", "generator", t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0 && H5Awrite(a, t, value) >= 0);
    H5Aclose(a);
    H5Sclose(space);
    H5Tclose(t);
    H5Fclose(f);

    long n = fail_each_allocation(LOAD_GOLDEN, path);
    struct mc_golden g;
    struct mc_error err = {0};
    assert_int_equal(mc_golden_load(path, &g, &err), MC_ERR_NONE);
    assert_string_equal(g.generator, value);
    mc_golden_free(&g);
    unlink(path);
    rmdir(dir);
    assert_true(n > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hook),
        cmocka_unit_test(test_case_leftpad),
        cmocka_unit_test(test_case_every_scenario),
        cmocka_unit_test(test_case_bare_name),
        cmocka_unit_test(test_tolerance),
        cmocka_unit_test(test_golden_tiny),
        cmocka_unit_test(test_golden_leftpad),
        cmocka_unit_test(test_golden_fixed_string),
    };
    return cmocka_run_group_tests_name("alloc_failure", tests, NULL, NULL);
}
