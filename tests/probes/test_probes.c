/*
 * test_probes.c — stage probes (docs/scenarios.md §1.3, §3.6):
 *   - the goldens' /probes load (and a golden without them is fine);
 *   - the probes of the reference (f64, f32) and cpu (f32, bf16) backends agree with the golden's for
 *     every family and every golden that holds probes, under the stage tolerance the diagnosis uses
 *     (the profile's `output` entry), with the worst headroom printed;
 *   - recording off costs nothing visible: probe_read then returns no probes;
 *   - a port that ignores the cached conv window (tests/probes/probe_plugin.c) is diagnosed with
 *     first stage conv_out at the first token of the first continued forward, against the reference
 *     (console and JSON);
 *   - the Mamba2 mutants with probes: 8.2a first fails at conv_out on the continued forward's first
 *     token, 8.10 at dt;
 *   - the example plugin's probes work (a check failing under a tight profile names conv_in against
 *     the golden);
 *   - a mis-shaped probe from a plugin is that backend's error, not a crash.
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

#include "capture.h"

#include "case/case.h"
#include "base/dtype.h"
#include "golden/golden.h"
#include "mixcheck/backend.h"
#include "family/probespec.h"
#include "golden/weightset.h"

#include "cpu.h"
#include "reference.h"

#define MIXCHECK MC_BINARY_DIR "/mixcheck"

/* ---- probes against the goldens ----------------------------------------------------------------- */

static const char *const GOLDENS[] = {
    "mamba2/tiny", "mamba2/groups2", "mamba2/ragged", "mamba2/dtlimit", "mamba2/leftpad", "mamba2/rightpad",
    "mamba1/tiny", "mamba1/odd",     "mamba1/leftpad", "mamba1/rightpad", "gdn/tiny",      "gdn/odd",
    "gdn/next",    "gdn/leftpad",    "gdn/rightpad",   "shortconv/tiny",  "shortconv/odd", "shortconv/k4",
    "shortconv/leftpad", "shortconv/rightpad",
};

static const struct mc_backend_ops *ops_for(enum mc_family f, int cpu)
{
    switch (f) {
    case MC_FAMILY_MAMBA2:
        return cpu ? mc_cpu_mamba2_ops() : mc_reference_mamba2_ops();
    case MC_FAMILY_MAMBA1:
        return cpu ? mc_cpu_mamba1_ops() : mc_reference_mamba1_ops();
    case MC_FAMILY_GDN:
        return cpu ? mc_cpu_gdn_ops() : mc_reference_gdn_ops();
    case MC_FAMILY_SHORTCONV:
        return cpu ? mc_cpu_shortconv_ops() : mc_reference_shortconv_ops();
    default:
        return NULL;
    }
}

/* Runs the whole golden as one prefill of `ops` at dtype with probes on (or off) and returns the
 * worst headroom of its probes against the golden's under the profile's output tolerance; fails when
 * a stage is missing or outside it. With probes off, checks probe_read gives none. */
static double prefill_headroom(const struct mc_golden *g, const struct mc_tolerance_profile *prof,
                               const struct mc_backend_ops *ops, enum mc_dtype dtype, int on)
{
    struct mc_error err = {0};
    struct mc_model *model = mc_test_golden_model(ops, g, dtype);
    struct mc_msg msg = {{0}};
    if (on)
        assert_int_equal(ops->probe_enable(model, 1, &msg), MC_BACKEND_OK);
    const int64_t D = g->hidden_states.dims[2], n = g->batch * g->len * D;
    const size_t esz = mc_dtype_size(dtype);
    void *x = malloc((size_t)n * esz), *y = malloc((size_t)n * esz);
    assert_non_null(x);
    assert_non_null(y);
    mc_dtype_from_f64(dtype, g->hidden_states.data, x, (size_t)n);
    struct mc_forward_args a = {.batch = g->batch, .len = g->len, .x = x, .mask = g->mask, .y = y};
    assert_int_equal(ops->forward(model, NULL, &a, &msg), MC_BACKEND_OK);
    const struct mc_probe *pr = NULL;
    int32_t count = -1;
    assert_int_equal(ops->probe_read(model, &pr, &count, &msg), MC_BACKEND_OK);
    double worst = 0.0;
    if (!on) {
        assert_int_equal(count, 0);
    } else {
        struct mc_tolerance tol;
        assert_int_equal(mc_tolerance_lookup(prof, "cpu", dtype, MC_TENSOR_OUTPUT, &tol, &err), MC_ERR_NONE);
        struct mc_probe_spec spec[MC_PROBE_MAX];
        int ns = mc_probe_specs(&g->config, spec);
        for (int k = 0; k < ns; k++) {
            const struct mc_array *want = &g->probes[k];
            assert_int_equal(want->ndim, 2 + spec[k].ndim);
            const struct mc_probe *got = NULL;
            for (int32_t i = 0; i < count; i++)
                if (strcmp(pr[i].name, spec[k].name) == 0)
                    got = &pr[i];
            if (got == NULL)
                fail_msg("%s: backend %s gives no probe '%s'", g->path, ops->name, spec[k].name);
            assert_int_equal(got->ndim, want->ndim);
            for (int d = 0; d < want->ndim; d++)
                assert_int_equal(got->dims[d], want->dims[d]);
            const int64_t elems = mc_array_elems(want), inner = elems / (g->batch * g->len);
            double stage = 0.0;
            for (int64_t e = 0; e < elems; e++) {
                if (g->mask != NULL && !g->mask[e / inner])
                    continue;
                double gv = dtype == MC_DTYPE_F64 ? ((const double *)got->data)[e] : ((const float *)got->data)[e];
                double h = fabs(gv - want->data[e]) / (tol.atol + tol.rtol * fabs(want->data[e]));
                if (!(h <= 1.0))
                    fail_msg("%s: %s %s probe '%s' element %lld: got %.9g, want %.9g", g->path, ops->name,
                             mc_dtype_name(dtype), spec[k].name, (long long)e, gv, want->data[e]);
                stage = h > stage ? h : stage;
            }
            worst = stage > worst ? stage : worst;
        }
    }
    ops->model_destroy(model);
    free(x);
    free(y);
    return worst;
}

static void test_backend_probes_match_golden(void **state)
{
    (void)state;
    static const struct {
        int cpu;
        enum mc_dtype dtype;
    } runs[] = {{0, MC_DTYPE_F64}, {0, MC_DTYPE_F32}, {1, MC_DTYPE_F32}, {1, MC_DTYPE_BF16}};
    double worst[4][MC_FAMILY_ATTENTION + 1] = {{0}};
    for (size_t i = 0; i < sizeof GOLDENS / sizeof GOLDENS[0]; i++) {
        char path[256], prof_path[256];
        snprintf(path, sizeof path, "golden/%s.h5", GOLDENS[i]);
        struct mc_golden g;
        struct mc_error err = {0};
        if (mc_golden_load(path, &g, &err) != MC_ERR_NONE)
            fail_msg("%s", err.msg);
        assert_true(g.has_probes);
        snprintf(prof_path, sizeof prof_path, "cases/tolerances/%s.yaml", mc_family_name(g.config.family));
        struct mc_tolerance_profile prof;
        if (mc_tolerance_load(prof_path, &prof, &err) != MC_ERR_NONE)
            fail_msg("%s", err.msg);
        for (int r = 0; r < 4; r++) {
            double h = prefill_headroom(&g, &prof, ops_for(g.config.family, runs[r].cpu), runs[r].dtype, 1);
            if (h > worst[r][g.config.family])
                worst[r][g.config.family] = h;
        }
        /* recording off: a forward leaves no probes */
        prefill_headroom(&g, &prof, ops_for(g.config.family, 1), MC_DTYPE_F32, 0);
        prefill_headroom(&g, &prof, ops_for(g.config.family, 0), MC_DTYPE_F64, 0);
        mc_tolerance_free(&prof);
        mc_golden_free(&g);
    }
    for (int r = 0; r < 4; r++)
        printf("stage probes vs golden, %s %s: worst headroom mamba2 %.3g, mamba1 %.3g, gdn %.3g, shortconv %.3g\n",
               runs[r].cpu ? "cpu" : "reference", mc_dtype_name(runs[r].dtype), worst[r][MC_FAMILY_MAMBA2],
               worst[r][MC_FAMILY_MAMBA1], worst[r][MC_FAMILY_GDN], worst[r][MC_FAMILY_SHORTCONV]);
}

static void test_golden_without_probes_loads(void **state)
{
    (void)state;
    struct mc_golden g;
    struct mc_error err = {0};
    assert_int_equal(mc_golden_load("golden/mamba2/m130m.h5", &g, &err), MC_ERR_NONE);
    assert_false(g.has_probes);
    for (int k = 0; k < MC_PROBE_MAX; k++)
        assert_int_equal(g.probes[k].ndim, 0);
    mc_golden_free(&g);
}

/* ---- the diagnosis, end to end ------------------------------------------------------------------ */

static char out[1 << 17];

static int run(const char *cmd)
{
    return mc_capture(cmd, out, sizeof out);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void expect(const char *hay, const char *needle)
{
    if (strstr(hay, needle) == NULL)
        fail_msg("expected '%s' in:\n%s", needle, hay);
}

static void test_zero_conv_context_first_stage(void **state)
{
    (void)state;
    const char *json = MC_BINARY_DIR "/probes_zero_context.json";
    int rc = run(MIXCHECK " run cases/shortconv/tiny.yaml --plugin " MC_PROBE_PLUGIN
                          " --backend probe-zero-context --scenario chunked --json " MC_BINARY_DIR
                          "/probes_zero_context.json");
    assert_int_equal(rc, 1);
    expect(out, "first failing stage: conv_out: token ");
    expect(out, "against the reference");
    /* the first failing element is the first token of the continued forward it names */
    const char *line = strstr(out, "first failing stage: conv_out: token ");
    long long token = -1, t0 = -2, t1 = -2;
    assert_int_equal(sscanf(line, "first failing stage: conv_out: token %lld", &token), 1);
    const char *call = strstr(line, "tokens ");
    assert_non_null(call);
    assert_int_equal(sscanf(call, "tokens %lld..%lld", &t0, &t1), 2);
    assert_true(t0 > 0);
    assert_int_equal(token, t0);
    /* conv_in (the stage before) passed: the window, not the input, is wrong */
    const char *j = slurp(json);
    expect(j, "\"first_stage\": {\"name\": \"conv_out\"");
    expect(j, "\"against\": \"reference\"");
    char want[64];
    snprintf(want, sizeof want, "\"token\": %lld", token);
    expect(j, want);
}

/* A profile far tighter than f32 rounding, so that every f32 check fails (MC_BINARY_DIR/probes_tight.yaml). */
static void write_tight(void)
{
    FILE *f = fopen(MC_BINARY_DIR "/probes_tight.yaml", "w");
    assert_non_null(f);
    fputs("profile: tight\nwhy: \"test: tighter than f32 rounding\"\ndevices:\n  cpu:\n    f32:\n"
          "      default: {atol: 1.0e-12, rtol: 1.0e-12, why: \"test\"}\n",
          f);
    fclose(f);
}

/* The Mamba2 mutants (tests/mutants) with probes declared (MIXCHECK_MUTANT_PROBES): a continued forward
 * with a zero conv window fails first at conv_out on its first token; a decode step without the dt clamp
 * at dt. Both against the reference run on the same call. */
static void test_mutant_first_stages(void **state)
{
    (void)state;
    setenv("MIXCHECK_MUTANT_PROBES", "1", 1);
    assert_int_equal(run(MIXCHECK " run cases/mamba2/tiny.yaml --plugin " MC_MUTANTS_PLUGIN
                                  " --backend mutant.8.2a-zero-conv-context --scenario chunked"),
                     1);
    const char *line = strstr(out, "first failing stage: conv_out: token ");
    if (line == NULL)
        fail_msg("no conv_out stage in:\n%s", out);
    long long token = -1, t0 = -2, t1 = -2;
    assert_int_equal(sscanf(line, "first failing stage: conv_out: token %lld", &token), 1);
    const char *call = strstr(line, "tokens ");
    assert_non_null(call);
    assert_int_equal(sscanf(call, "tokens %lld..%lld", &t0, &t1), 2);
    assert_true(t0 > 0);
    assert_int_equal(token, t0);
    expect(line, "against the reference");
    assert_int_equal(run(MIXCHECK " run cases/mamba2/dtlimit.yaml --plugin " MC_MUTANTS_PLUGIN
                                  " --backend mutant.8.10-no-dt-clamp-decode --scenario decode"),
                     1);
    expect(out, "first failing stage: dt: token ");
    expect(out, "against the reference");
    /* without the variable the mutants declare no probes: diagnosed as before */
    unsetenv("MIXCHECK_MUTANT_PROBES");
    assert_int_equal(run(MIXCHECK " run cases/mamba2/dtlimit.yaml --plugin " MC_MUTANTS_PLUGIN
                                  " --backend mutant.8.10-no-dt-clamp-decode --scenario decode"),
                     1);
    assert_null(strstr(out, "stage"));
}

static void test_example_plugin_probes(void **state)
{
    (void)state;
    /* every check fails and is rerun with probes; the example's conv_in (B*x, one f32 product) is
     * the first stage off the golden's */
    write_tight();
    assert_int_equal(run(MIXCHECK " run cases/shortconv/tiny.yaml --plugin " MC_EXAMPLE_PLUGIN
                                  " --backend example --scenario prefill --tolerance " MC_BINARY_DIR
                                  "/probes_tight.yaml"),
                     1);
    expect(out, "first failing stage: conv_in: token 0");
    expect(out, "against the golden");
    /* with the bundled profile the example passes and nothing is probed */
    assert_int_equal(run(MIXCHECK " run cases/shortconv/tiny.yaml --plugin " MC_EXAMPLE_PLUGIN
                                  " --backend example --scenario prefill"),
                     0);
    assert_null(strstr(out, "first failing stage"));
}

static void test_bad_shape_probe_is_backend_error(void **state)
{
    (void)state;
    write_tight();
    int rc = run(MIXCHECK " run cases/shortconv/tiny.yaml --plugin " MC_PROBE_PLUGIN
                          " --backend probe-bad-shape --scenario prefill --tolerance " MC_BINARY_DIR
                          "/probes_tight.yaml");
    assert_int_equal(rc, 1);
    expect(out, "ERROR");
    expect(out, "probe_read: probe 'conv_out' has shape [2, 16, 17], expected [2, 16, 16] ([B][L][channel])");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backend_probes_match_golden),
        cmocka_unit_test(test_golden_without_probes_loads),
        cmocka_unit_test(test_zero_conv_context_first_stage),
        cmocka_unit_test(test_mutant_first_stages),
        cmocka_unit_test(test_example_plugin_probes),
        cmocka_unit_test(test_bad_shape_probe_is_backend_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
