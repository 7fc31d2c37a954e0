/*
 * test_faults.c — for every family, the harness fails (exit 1, the chunked scenario named) when the
 * family's recurrent state is dropped between chunks and when its conv window is not carried into a
 * continued forward (bug classes 8.2b and 8.2a), and the unbroken reference passes the same case.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fault_backend.h"
#include "reference.h"
#include "exec/registry.h"
#include "run/runner.h"

static int run_case(const char *path, const struct mc_backend_ops *ops, struct mc_run_report *rep)
{
    struct mc_registry reg;
    struct mc_error err = {0};
    mc_registry_init(&reg);
    assert_int_equal(mc_registry_add(&reg, ops, "test", &err), MC_ERR_NONE);
    struct mc_run_options opt;
    memset(&opt, 0, sizeof opt);
    opt.filter.backend = ops->name; /* the cases also name `cpu`: only the wrapped reference runs here */
    const char *paths[1] = {path};
    assert_int_equal(mc_run(paths, 1, &reg, &opt, NULL, rep, &err), MC_ERR_NONE);
    return mc_run_exit_code(rep);
}

static const struct mc_tensor_result *tensor(const struct mc_check_result *r, const char *name)
{
    for (int i = 0; i < r->n_tensors; i++)
        if (strcmp(r->tensors[i].name, name) == 0)
            return &r->tensors[i];
    return NULL;
}

/* The reference passes; each fault fails `chunked` (f32 and f64) on the tensor it corrupts first. */
static void check_family(const char *case_path, const struct mc_backend_ops *ref, int has_state)
{
    struct mc_run_report rep;
    assert_int_equal(run_case(case_path, ref, &rep), 0);
    mc_run_report_free(&rep);
    for (int f = has_state ? 0 : 1; f < 2; f++) {
        enum fault_kind kind = f == 0 ? FAULT_DROP_STATE : FAULT_DROP_CONV;
        struct mc_backend_ops ops = fault_backend(ref, kind);
        assert_int_equal(run_case(case_path, &ops, &rep), 1);
        int chunked_failed = 0;
        for (int i = 0; i < rep.n_checks; i++) {
            const struct mc_check_result *r = &rep.checks[i];
            if (r->scenario != MC_SCENARIO_CHUNKED)
                continue;
            assert_int_equal(r->status, MC_CHECK_FAIL);
            chunked_failed++;
            /* a dropped state shows in the state itself; a dropped window in the outputs it feeds */
            const char *first = kind == FAULT_DROP_STATE ? "recurrent_state" : "output";
            assert_false(mc_compare_passed(&tensor(r, first)->stats));
            assert_true(strncmp(r->detail, "splits", 6) == 0); /* the failing split set is named */
        }
        assert_int_equal(chunked_failed, 2); /* f64 and f32 */
        mc_run_report_free(&rep);
    }
}

static void test_mamba2(void **state)
{
    (void)state;
    check_family("cases/mamba2/tiny.yaml", mc_reference_mamba2_ops(), 1);
}

static void test_mamba1(void **state)
{
    (void)state;
    check_family("cases/mamba1/tiny.yaml", mc_reference_mamba1_ops(), 1);
}

static void test_gdn(void **state)
{
    (void)state;
    check_family("cases/gdn/tiny.yaml", mc_reference_gdn_ops(), 1);
}

static void test_shortconv(void **state)
{
    (void)state;
    check_family("cases/shortconv/tiny.yaml", mc_reference_shortconv_ops(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mamba2),
        cmocka_unit_test(test_mamba1),
        cmocka_unit_test(test_gdn),
        cmocka_unit_test(test_shortconv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
