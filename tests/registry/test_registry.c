/*
 * test_registry.c — the ABI growth rules of backend.h as the registry applies them: an ops struct of
 * the first form (an older backend, without the appended optional entries) is accepted and its
 * optional entries read as absent, without a byte past its struct_size being read (the struct is
 * allocated at exactly that size, so ASan sees any overread); a struct smaller than the first form
 * and a foreign ABI version are refused; a capability bit without its entry is dropped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reference.h"
#include "exec/registry.h"

static void test_first_form_accepted(void **state)
{
    (void)state;
    size_t v1 = MC_BACKEND_OPS_SIZE_V1;
    struct mc_backend_ops full = *mc_reference_mamba2_ops();
    full.struct_size = (uint32_t)v1;
    full.caps |= MC_CAP_PACKED; /* claimed, but an old struct cannot hold the entry */
    unsigned char *bytes = malloc(v1); /* exactly the old size: nothing after it exists */
    assert_non_null(bytes);
    memcpy(bytes, &full, v1);
    const struct mc_backend_ops *old = (const struct mc_backend_ops *)(void *)bytes;
    struct mc_registry reg;
    struct mc_error err = {0};
    mc_registry_init(&reg);
    assert_int_equal(mc_registry_add(&reg, old, "old", &err), MC_ERR_NONE);
    const struct mc_backend_ops *o = mc_registry_find(&reg, "reference", MC_FAMILY_MAMBA2);
    assert_non_null(o);
    assert_ptr_not_equal(o, old); /* the registry's normalized copy */
    assert_null(o->forward_packed);
    assert_null(o->probe_enable);
    assert_null(o->probe_read);
    assert_false(o->caps & MC_CAP_PACKED);
    assert_ptr_equal(o->forward, mc_reference_mamba2_ops()->forward);
    free(bytes);
}

static void test_too_small_refused(void **state)
{
    (void)state;
    struct mc_backend_ops ops = *mc_reference_mamba2_ops();
    ops.struct_size = (uint32_t)MC_BACKEND_OPS_SIZE_V1 - 8;
    struct mc_registry reg;
    struct mc_error err = {0};
    mc_registry_init(&reg);
    assert_int_equal(mc_registry_add(&reg, &ops, "small", &err), MC_ERR_BACKEND);
    assert_non_null(strstr(err.msg, "smaller than the first form"));
    mc_error_clear(&err);
    ops.struct_size = sizeof ops;
    ops.abi_version = MIXCHECK_ABI_VERSION + 1;
    assert_int_equal(mc_registry_add(&reg, &ops, "future", &err), MC_ERR_BACKEND);
    assert_non_null(strstr(err.msg, "ABI version"));
}

static void test_capability_without_entry_dropped(void **state)
{
    (void)state;
    struct mc_backend_ops ops = *mc_reference_mamba2_ops();
    ops.name = "claims";
    ops.caps |= MC_CAP_PACKED | MC_CAP_PROBES;
    ops.forward_packed = NULL;
    ops.probe_enable = NULL;
    ops.probe_read = NULL;
    struct mc_registry reg;
    struct mc_error err = {0};
    mc_registry_init(&reg);
    assert_int_equal(mc_registry_add(&reg, &ops, "claims", &err), MC_ERR_NONE);
    const struct mc_backend_ops *o = mc_registry_find(&reg, "claims", MC_FAMILY_MAMBA2);
    assert_false(o->caps & (MC_CAP_PACKED | MC_CAP_PROBES));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_form_accepted),
        cmocka_unit_test(test_too_small_refused),
        cmocka_unit_test(test_capability_without_entry_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
