/*
 * test_failure_proofs.c — the harness fails when it should:
 *  - a golden with one expected element perturbed by 1e-3 fails exactly the checks that compare that
 *    element, naming the tensor, the scenario and the token;
 *  - a reference variant that zeroes the recurrent state between chunks (bug class 8.2b, through
 *    tests/support/fault_backend) fails the chunked and first-token scenarios on the recurrent
 *    state and the output, and nothing else;
 *  - the real reference passes every scenario of every bundled Mamba2 case.
 * Runs the runner in-process with registries built here; exit codes via mc_run_exit_code.
 */
#include <hdf5.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault_backend.h"
#include "golden/golden.h"
#include "reference.h"
#include "exec/registry.h"
#include "run/runner.h"

/* ---- helpers ----------------------------------------------------------------------------------------- */

static const struct mc_check_result *find(const struct mc_run_report *rep, const char *case_id,
                                          enum mc_scenario_kind sk, enum mc_dtype dt)
{
    for (int i = 0; i < rep->n_checks; i++) {
        const struct mc_check_result *r = &rep->checks[i];
        if (strcmp(r->case_id, case_id) == 0 && r->scenario == sk && r->dtype == dt)
            return r;
    }
    return NULL;
}

static const struct mc_tensor_result *tensor(const struct mc_check_result *r, const char *name)
{
    for (int i = 0; i < r->n_tensors; i++)
        if (strcmp(r->tensors[i].name, name) == 0)
            return &r->tensors[i];
    return NULL;
}

static int run(const char *path, const struct mc_backend_ops *ops, struct mc_run_report *rep)
{
    struct mc_registry reg;
    struct mc_error err = {0};
    mc_registry_init(&reg);
    assert_int_equal(mc_registry_add(&reg, ops, "test", &err), MC_ERR_NONE);
    struct mc_run_options opt;
    memset(&opt, 0, sizeof opt);
    opt.filter.backend = ops->name; /* the bundled cases also name `cpu`: only `ops` runs here */
    const char *paths[1] = {path};
    assert_int_equal(mc_run(paths, 1, &reg, &opt, NULL, rep, &err), MC_ERR_NONE);
    return mc_run_exit_code(rep);
}

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
}

/* Records the golden's new content checksum, as a test that edits a golden on purpose must
 * (golden/README.md "Content checksum"); without it the golden is refused (exit 2), not compared. */
static void restamp(const char *file)
{
    char hex[MC_SHA256_HEX_LEN + 1];
    struct mc_error err = {0};
    assert_int_equal(mc_golden_file_content_sha256(file, hex, &err), MC_ERR_NONE);
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    assert_true(H5Adelete_by_name(f, "/", "content_sha256", H5P_DEFAULT) >= 0);
    hid_t t = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR);
    assert_true(H5Tset_size(t, H5T_VARIABLE) >= 0);
    const char *p = hex;
    hid_t a = H5Acreate_by_name(f, "/", "content_sha256", t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0 && H5Awrite(a, t, &p) >= 0);
    H5Aclose(a);
    H5Sclose(space);
    H5Tclose(t);
    assert_true(H5Fclose(f) >= 0);
}

/* Adds delta to one element of a float64 dataset of an HDF5 file (and re-stamps its checksum). */
static void perturb(const char *file, const char *dataset, const hsize_t *index, int rank, double delta)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t d = H5Dopen2(f, dataset, H5P_DEFAULT);
    assert_true(d >= 0);
    hid_t space = H5Dget_space(d);
    hsize_t count[5] = {1, 1, 1, 1, 1};
    assert_true(H5Sselect_hyperslab(space, H5S_SELECT_SET, index, NULL, count, NULL) >= 0);
    hid_t mem = H5Screate_simple(1, count, NULL);
    double v;
    assert_true(H5Dread(d, H5T_NATIVE_DOUBLE, mem, space, H5P_DEFAULT, &v) >= 0);
    v += delta;
    assert_true(H5Dwrite(d, H5T_NATIVE_DOUBLE, mem, space, H5P_DEFAULT, &v) >= 0);
    (void)rank;
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(d);
    H5Fclose(f);
    restamp(file);
}

/* ---- tests -------------------------------------------------------------------------------------------- */

static void test_reference_passes_every_scenario(void **state)
{
    (void)state;
    struct mc_run_report rep;
    assert_int_equal(run("cases/mamba2", mc_reference_mamba2_ops(), &rep), 0);
    int seen[MC_SCENARIO_COUNT] = {0};
    for (int i = 0; i < rep.n_checks; i++) {
        assert_int_equal(rep.checks[i].status, MC_CHECK_PASS);
        seen[rep.checks[i].scenario] = 1;
    }
    assert_true(seen[MC_SCENARIO_PREFILL] && seen[MC_SCENARIO_DECODE] && seen[MC_SCENARIO_CHUNKED] &&
                seen[MC_SCENARIO_FIRST_TOKEN_CAUSALITY] && seen[MC_SCENARIO_LEFT_PADDED_BATCH] &&
                seen[MC_SCENARIO_BATCH_INVARIANCE]);
    assert_int_equal(rep.n_problems, 0);
    mc_run_report_free(&rep);
}

static void test_perturbed_golden_fails(void **state)
{
    (void)state;
    char dir[] = "/tmp/mixcheck-proof-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char golden[256], casefile[256];
    snprintf(golden, sizeof golden, "%s/tiny.h5", dir);
    snprintf(casefile, sizeof casefile, "%s/perturbed.yaml", dir);
    copy_file("golden/mamba2/tiny.h5", golden);
    hsize_t out_idx[3] = {1, 7, 3}; /* batch 1, token 7, channel 3 */
    perturb(golden, "/expected/output", out_idx, 3, 1e-3);
    FILE *f = fopen(casefile, "w");
    assert_non_null(f);
    fprintf(f, "id: perturbed\nwhy: \"one expected output element moved by 1e-3\"\nfamily: mamba2\n"
               "golden: tiny.h5\ntolerance: %s/cases/tolerances/mamba2.yaml\nbackends: [reference]\n"
               "dtypes: [f64, f32]\nscenarios:\n  prefill: {}\n  decode: {prefill: 10}\n"
               "  chunked: {splits: [[3, 12]]}\n",
            MC_SOURCE_DIR);
    fclose(f);

    struct mc_run_report rep;
    assert_int_equal(run(casefile, mc_reference_mamba2_ops(), &rep), 1);
    assert_int_equal(rep.n_checks, 6);
    for (int i = 0; i < rep.n_checks; i++) {
        const struct mc_check_result *r = &rep.checks[i];
        /* token 7 lies in the prefill of `decode` and in the second chunk: every check sees it */
        assert_int_equal(r->status, MC_CHECK_FAIL);
        const struct mc_tensor_result *t = tensor(r, "output");
        assert_non_null(t);
        assert_false(mc_compare_passed(&t->stats));
        /* prefill compares the sequence twice (without and with a cache) */
        assert_int_equal(t->stats.n_fail, r->scenario == MC_SCENARIO_PREFILL ? 2 : 1);
        assert_int_equal(t->stats.first_fail_token, 7);
        assert_int_equal(t->stats.worst_index[0], 1);
        assert_int_equal(t->stats.worst_index[1], 7);
        assert_int_equal(t->stats.worst_index[2], 3);
        assert_true(t->stats.max_abs_err > 0.9e-3 && t->stats.max_abs_err < 1.1e-3);
        /* the states were not touched */
        assert_true(mc_compare_passed(&tensor(r, "recurrent_state")->stats));
        assert_true(mc_compare_passed(&tensor(r, "conv_state")->stats));
    }
    mc_run_report_free(&rep);

    /* a recurrent-state element at position 12 fails only the checks that stop there */
    copy_file("golden/mamba2/tiny.h5", golden);
    hsize_t st_idx[5] = {12, 0, 2, 5, 1};
    perturb(golden, "/expected/recurrent_state", st_idx, 5, 1e-3);
    assert_int_equal(run(casefile, mc_reference_mamba2_ops(), &rep), 1);
    for (int i = 0; i < rep.n_checks; i++) {
        const struct mc_check_result *r = &rep.checks[i];
        const struct mc_tensor_result *t = tensor(r, "recurrent_state");
        int stops_at_12 = r->scenario != MC_SCENARIO_PREFILL; /* decode visits 12, chunked splits at 12 */
        assert_int_equal(r->status, stops_at_12 ? MC_CHECK_FAIL : MC_CHECK_PASS);
        assert_int_equal(mc_compare_passed(&t->stats), !stops_at_12);
        if (stops_at_12) {
            assert_int_equal(t->stats.first_fail_token, 12);
            assert_int_equal(t->stats.worst_index[1], 2); /* head */
            assert_int_equal(t->stats.worst_index[2], 5); /* channel */
            assert_int_equal(t->stats.worst_index[3], 1); /* state */
        }
        assert_true(mc_compare_passed(&tensor(r, "output")->stats));
    }
    mc_run_report_free(&rep);
    unlink(golden);
    unlink(casefile);
    rmdir(dir);
}

static void test_state_reset_between_chunks_fails(void **state)
{
    (void)state;
    struct mc_backend_ops ops = fault_backend(mc_reference_mamba2_ops(), FAULT_DROP_STATE);
    struct mc_run_report rep;
    assert_int_equal(run("cases/mamba2/tiny.yaml", &ops, &rep), 1);
    for (int d = 0; d < 2; d++) {
        enum mc_dtype dt = d ? MC_DTYPE_F32 : MC_DTYPE_F64;
        /* paths that never run several tokens on a primed cache pass */
        assert_int_equal(find(&rep, "mamba2-tiny", MC_SCENARIO_PREFILL, dt)->status, MC_CHECK_PASS);
        assert_int_equal(find(&rep, "mamba2-tiny", MC_SCENARIO_DECODE, dt)->status, MC_CHECK_PASS);
        assert_int_equal(find(&rep, "mamba2-tiny", MC_SCENARIO_BATCH_INVARIANCE, dt)->status, MC_CHECK_PASS);
        const struct mc_check_result *r = find(&rep, "mamba2-tiny", MC_SCENARIO_CHUNKED, dt);
        assert_int_equal(r->status, MC_CHECK_FAIL);
        assert_false(mc_compare_passed(&tensor(r, "recurrent_state")->stats));
        assert_false(mc_compare_passed(&tensor(r, "output")->stats));
        assert_true(mc_compare_passed(&tensor(r, "conv_state")->stats)); /* the window was carried */
        r = find(&rep, "mamba2-tiny", MC_SCENARIO_FIRST_TOKEN_CAUSALITY, dt);
        assert_int_equal(r->status, MC_CHECK_FAIL);
        assert_false(mc_compare_passed(&tensor(r, "consistency")->stats)); /* b[0] != a[0] */
        assert_int_equal(tensor(r, "output")->stats.first_fail_token, 8);
    }
    mc_run_report_free(&rep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_passes_every_scenario),
        cmocka_unit_test(test_perturbed_golden_fails),
        cmocka_unit_test(test_state_reset_between_chunks_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
