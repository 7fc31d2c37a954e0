/*
 * test_registry.c — the ABI growth rules of backend.h as the registry applies them: an ops struct of
 * the first form (an older backend, without the appended optional entries) is accepted and its
 * optional entries read as absent, without a byte past its struct_size being read (the struct is
 * allocated at exactly that size, so ASan sees any overread); a struct smaller than the first form
 * and a foreign ABI version are refused; a capability bit without its entry is dropped. The registry
 * has no small limit: thousands of backends register, every lookup finds its own and the copies
 * lookups returned do not move as it grows; the project's three mutant libraries (over a hundred
 * backends) load together, in process and through `mixcheck list` and `mixcheck run`.
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
#include "exec/plugin.h"
#include "exec/registry.h"
#include "reference.h"

#define MIXCHECK MC_BINARY_DIR "/mixcheck"
#define PLUGINS " --plugin " MC_MUTANTS_PLUGIN " --plugin " MC_PACKED_MUTANTS_PLUGIN " --plugin " MC_GROUPS_MUTANT_PLUGIN

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
    mc_registry_free(&reg);
}

enum { MANY = 5000 };

/* MANY backends of distinct names over two families: each found as its own, the copies stable. */
static void test_thousands_of_backends(void **state)
{
    (void)state;
    static char names[MANY][16];
    static struct mc_backend_ops ops[MANY];
    const struct mc_backend_ops *seen[MANY];
    struct mc_registry *reg = malloc(sizeof *reg);
    assert_non_null(reg);
    mc_registry_init(reg);
    struct mc_error err = {0};
    for (int i = 0; i < MANY; i++) {
        snprintf(names[i], sizeof names[i], "b%04d", i / 2);
        ops[i] = i % 2 ? *mc_reference_gdn_ops() : *mc_reference_mamba2_ops();
        ops[i].name = names[i];
        if (mc_registry_add_plugin(reg, &ops[i], names[i], 1 + i % 3, &err) != MC_ERR_NONE)
            fail_msg("backend %d: %s", i, err.msg);
        seen[i] = mc_registry_find(reg, names[i], ops[i].family);
        assert_non_null(seen[i]);
    }
    assert_int_equal(reg->n, MANY);
    /* a duplicate (name, family) is still refused past the first entries */
    assert_int_equal(mc_registry_add(reg, &ops[MANY - 1], "again", &err), MC_ERR_BACKEND);
    assert_non_null(strstr(err.msg, "already registered"));
    mc_error_clear(&err);
    for (int i = 0; i < MANY; i++) {
        const struct mc_backend_ops *o = mc_registry_find(reg, names[i], ops[i].family);
        assert_ptr_equal(o, seen[i]); /* the copy the first lookup returned has not moved */
        assert_ptr_not_equal(o, &ops[i]);
        assert_string_equal(o->name, names[i]);
        assert_int_equal(o->family, ops[i].family);
        assert_ptr_equal(o->forward, ops[i].forward);
        const struct mc_registry_entry *e = mc_registry_entry_of(reg, o);
        assert_non_null(e);
        assert_ptr_equal(e, &reg->entries[i]);
        assert_int_equal(e->plugin, 1 + i % 3);
        assert_string_equal(e->origin, names[i]);
    }
    assert_null(mc_registry_find(reg, "b2500", MC_FAMILY_MAMBA2));
    assert_true(mc_registry_has_name(reg, "b2499"));
    mc_registry_free(reg);
    assert_int_equal(reg->n, 0);
    assert_null(mc_registry_find(reg, "b0000", MC_FAMILY_MAMBA2));
    /* usable again after the free */
    assert_int_equal(mc_registry_add(reg, &ops[0], "again", &err), MC_ERR_NONE);
    assert_non_null(mc_registry_find(reg, names[0], MC_FAMILY_MAMBA2));
    mc_registry_free(reg);
    free(reg);
}

/* The three mutant libraries of the project, loaded into one registry: more than MC_REGISTRY_INLINE. */
static void test_three_mutant_libraries_load_together(void **state)
{
    (void)state;
    const char *libs[] = {MC_MUTANTS_PLUGIN, MC_PACKED_MUTANTS_PLUGIN, MC_GROUPS_MUTANT_PLUGIN};
    struct mc_registry reg;
    struct mc_plugins pl;
    mc_registry_init(&reg);
    mc_plugins_init(&pl);
    struct mc_error err = {0};
    int before[4];
    for (int k = 0; k < 3; k++) {
        before[k] = reg.n;
        if (mc_plugins_load(&pl, libs[k], &reg, &err) != MC_ERR_NONE)
            fail_msg("%s", err.msg);
        assert_true(reg.n > before[k]);
    }
    before[3] = reg.n;
    assert_true(reg.n > MC_REGISTRY_INLINE);
    for (int k = 0; k < 3; k++)
        for (int i = before[k]; i < before[k + 1]; i++) {
            const struct mc_registry_entry *e = &reg.entries[i];
            assert_int_equal(e->plugin, k + 1);
            assert_string_equal(e->origin, libs[k]);
            assert_ptr_equal(mc_registry_find(&reg, e->ops->name, e->ops->family), e->ops);
        }
    mc_plugins_unload(&pl);
    mc_registry_free(&reg);
}

/* The number of lines of `mixcheck list`'s backends section. */
static int listed_backends(const char *out)
{
    const char *p = strstr(out, "\nbackends:\n");
    int n = 0;
    for (p = p ? strchr(p + 1, '\n') : NULL; p && strncmp(p, "\n  ", 3) == 0; p = strchr(p + 1, '\n'))
        n++;
    return n;
}

static void test_three_mutant_libraries_through_the_cli(void **state)
{
    (void)state;
    static char out[1 << 18];
    int rc = mc_capture(MIXCHECK " list cases/shortconv/k4.yaml" PLUGINS, out, sizeof out);
    if (rc != 0)
        fail_msg("exit %d:\n%.4000s", rc, out);
    assert_true(listed_backends(out) > MC_REGISTRY_INLINE);
    assert_non_null(strstr(out, MC_GROUPS_MUTANT_PLUGIN ")")); /* the last library's backends are there */
    /* a run with all three: one backend of each library runs its prefill */
    rc = mc_capture(MIXCHECK " run cases/mamba2/tiny.yaml -q -k '*/prefill/control.correct/f32'"
                             " -k '*/prefill/control.packed/f32' -k '*/prefill/mutant.S2.11-groups-repeat/f32'" PLUGINS,
                    out, sizeof out);
    if (rc != 0)
        fail_msg("exit %d:\n%.4000s", rc, out);
    assert_non_null(strstr(out, "3 check(s): 3 passed"));
    assert_null(strstr(out, "too many backends"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_form_accepted),
        cmocka_unit_test(test_too_small_refused),
        cmocka_unit_test(test_capability_without_entry_dropped),
        cmocka_unit_test(test_thousands_of_backends),
        cmocka_unit_test(test_three_mutant_libraries_load_together),
        cmocka_unit_test(test_three_mutant_libraries_through_the_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
