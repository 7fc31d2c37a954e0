/*
 * test_diagnose.c — the generic matcher of diagnose.c on facts and signatures built here: conditions are
 * true, false or unknown; required conditions gate a signature; weights rank; a stage condition matches
 * once a stage is reported; evidence sentences share predicates; facts come out of check results; a
 * backend whose checks passed gets no diagnosis. (The real table against the mutants: hit_rate.py.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "diagnosis/diagnose.h"

static struct mc_diag_tensor_fact *add_tensor(struct mc_diag_facts *f, enum mc_scenario_kind k, const char *name,
                                              int failed, int64_t first_token)
{
    struct mc_diag_scenario_fact *s = &f->scen[k];
    s->ran_full = 1;
    if (failed) {
        s->failed_full = 1;
        f->any_failed = 1;
    }
    struct mc_diag_tensor_fact *t = &s->tensors[s->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->fail_full = failed;
    t->first_fail_token = failed ? first_token : -1;
    t->first_fail_batch = failed ? 0 : -1;
    t->nmse = failed ? 0.5 : 0.0;
    return t;
}

static void init(struct mc_diag_facts *f)
{
    memset(f, 0, sizeof *f);
    for (int k = 0; k < MC_SCENARIO_COUNT; k++)
        f->scen[k].split = -1;
    f->family = MC_FAMILY_MAMBA2;
}

/* A port that ignores the cached window: prefill passes, the first token after the split fails. */
static void window_port(struct mc_diag_facts *f)
{
    init(f);
    add_tensor(f, MC_SCENARIO_PREFILL, "output", 0, -1);
    add_tensor(f, MC_SCENARIO_PREFILL, "conv_state", 0, -1);
    f->scen[MC_SCENARIO_FIRST_TOKEN_CAUSALITY].split = 8;
    add_tensor(f, MC_SCENARIO_FIRST_TOKEN_CAUSALITY, "output", 1, 8);
    add_tensor(f, MC_SCENARIO_FIRST_TOKEN_CAUSALITY, "consistency", 1, 8);
    add_tensor(f, MC_SCENARIO_FIRST_TOKEN_CAUSALITY, "conv_state", 0, -1);
}

static void test_truth_values(void **state)
{
    (void)state;
    struct mc_diag_facts f;
    window_port(&f);
    struct mc_diag_cond c = {.kind = MC_DC_FAILS, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .tensor = "output", .weight = 1};
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_TRUE);
    c.kind = MC_DC_PASSES;
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_FALSE);
    c.kind = MC_DC_AT_SPLIT;
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_TRUE);
    c.kind = MC_DC_AFTER_SPLIT;
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_FALSE);
    c.kind = MC_DC_FAILS; /* a scenario that did not run, a tensor not compared: unknown */
    c.scenario = MC_SCENARIO_CHUNKED;
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_UNKNOWN);
    c.scenario = MC_SCENARIO_PREFILL;
    c.tensor = "recurrent_state";
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_UNKNOWN);
    c.tensor = NULL; /* the scenario as a whole */
    c.kind = MC_DC_PASSES;
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_TRUE);
    c.scenario = MC_DIAG_ANY; /* any: false only when some scenario says false and none true */
    c.tensor = "conv_state";
    c.kind = MC_DC_FAILS;
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_FALSE);
    c.tensor = "consistency";
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_TRUE);
    /* a condition for another family is unknown */
    c.families = 1u << MC_FAMILY_GDN;
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_UNKNOWN);
    /* precision: f32 passed, bf16 failed */
    struct mc_diag_facts g;
    init(&g);
    g.scen[MC_SCENARIO_DECODE].ran_full = 1;
    g.scen[MC_SCENARIO_DECODE].ran_reduced = 1;
    g.scen[MC_SCENARIO_DECODE].failed_reduced = 1;
    g.any_failed = 1;
    struct mc_diag_cond r = {.kind = MC_DC_ONLY_REDUCED, .scenario = MC_SCENARIO_DECODE, .weight = 1};
    assert_int_equal(mc_diag_eval(&r, &g), MC_DIAG_TRUE);
    g.scen[MC_SCENARIO_DECODE].failed_full = 1;
    assert_int_equal(mc_diag_eval(&r, &g), MC_DIAG_FALSE);
}

static void test_run_parameters(void **state)
{
    (void)state;
    struct mc_diag_facts f;
    init(&f);
    add_tensor(&f, MC_SCENARIO_PACKED_PREFILL, "output", 1, 0);
    snprintf(f.scen[MC_SCENARIO_PACKED_PREFILL].first_run, sizeof f.scen[0].first_run,
             "packed sequence (index, row, from token, tokens, slot, has_initial_state) [1, 1, 0, 10, 10, 0]");
    struct mc_diag_cond c = {.kind = MC_DC_RUN_FIRST, .scenario = MC_SCENARIO_PACKED_PREFILL, .value = 1, .weight = 1};
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_TRUE);
    c.kind = MC_DC_RUN_LAST;
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_FALSE);
    c.value = 0;
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_TRUE);
    c.kind = MC_DC_RUN;
    c.text = "packed sequence";
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_TRUE);
}

/* Two signatures that differ in one stage condition: unknown until a stage is reported, then decisive. */
static const struct mc_signature stage_sigs[] = {
    {"X.conv", "the conv is wrong", "", 0,
     {{.kind = MC_DC_FAILS, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .tensor = "consistency", .weight = 2, .must = 1},
      {.kind = MC_DC_STAGE, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .text = "conv_out", .weight = 3}}},
    {"X.scan", "the scan is wrong", "", 0,
     {{.kind = MC_DC_FAILS, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .tensor = "consistency", .weight = 2, .must = 1},
      {.kind = MC_DC_PASSES, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .tensor = "conv_state", .weight = 1},
      {.kind = MC_DC_STAGE, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .text = "scan_out", .weight = 3}}},
    {"X.never", "needs a chunked failure", "", 0,
     {{.kind = MC_DC_FAILS, .scenario = MC_SCENARIO_CHUNKED, .tensor = "output", .weight = 9, .must = 1}}},
};

static void test_stage_decides(void **state)
{
    (void)state;
    struct mc_diag_facts f;
    window_port(&f);
    struct mc_diagnosis d;
    assert_int_equal(mc_diagnose(&f, stage_sigs, 3, &d), 1);
    assert_int_equal(d.n, 2); /* X.never: its required condition is unknown */
    assert_string_equal(d.top[0].sig->id, "X.scan"); /* no stage yet: the extra conv_state evidence wins */
    assert_int_equal(d.top[0].score, 3);
    snprintf(f.scen[MC_SCENARIO_FIRST_TOKEN_CAUSALITY].first_stage, MC_DIAG_STAGE_LEN, "conv_out");
    assert_int_equal(mc_diagnose(&f, stage_sigs, 3, &d), 1);
    assert_string_equal(d.top[0].sig->id, "X.conv");
    assert_int_equal(d.top[0].score, 5);
    assert_int_equal(d.n, 1); /* X.scan: 2 + 1 - 3 = 0, not named */
    assert_non_null(strstr(d.top[0].evidence, "fails first at stage conv_out"));
}

static void test_no_diagnosis_when_passing(void **state)
{
    (void)state;
    struct mc_diag_facts f;
    init(&f);
    add_tensor(&f, MC_SCENARIO_PREFILL, "output", 0, -1);
    struct mc_diagnosis d;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 0);
    assert_int_equal(d.n, 0);
}

/* The bundled table on the facts of a port that ignores the cached window names 8.2a, in one line. */
static void test_table_window_port(void **state)
{
    (void)state;
    struct mc_diag_facts f;
    window_port(&f);
    add_tensor(&f, MC_SCENARIO_CHUNKED, "output", 1, 1);
    add_tensor(&f, MC_SCENARIO_CHUNKED, "conv_state", 1, 3);
    f.scen[MC_SCENARIO_DECODE].split = 5;
    add_tensor(&f, MC_SCENARIO_DECODE, "output", 0, -1);
    struct mc_diagnosis d;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_true(d.n >= 1);
    assert_string_equal(d.top[0].sig->id, "8.2a");
    char line[1024];
    mc_diag_format(&d.top[0], line, sizeof line);
    assert_non_null(strstr(line, "likely: multi-token forward does not start from the cached conv window (8.2a)"));
    assert_non_null(strstr(line, "first_token_causality consistency and output fail from the first token after the split"));
    assert_null(strchr(line, '\n'));
}

/* Failures at bf16 only, in the decode's state, while f32 passes: the reduced-precision state (8.14). */
static void test_table_reduced_state(void **state)
{
    (void)state;
    struct mc_diag_facts f;
    init(&f);
    add_tensor(&f, MC_SCENARIO_PREFILL, "output", 0, -1);
    struct mc_diag_scenario_fact *s = &f.scen[MC_SCENARIO_DECODE];
    s->split = 5;
    s->ran_full = s->ran_reduced = 1;
    s->failed_reduced = 1;
    f.any_failed = 1;
    struct mc_diag_tensor_fact *t = add_tensor(&f, MC_SCENARIO_DECODE, "recurrent_state", 0, -1);
    t->fail_full = 0;
    t->fail_reduced = 1;
    t->first_fail_token = 12;
    s->failed_full = 0;
    struct mc_diagnosis d;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_true(d.n >= 1);
    assert_string_equal(d.top[0].sig->id, "8.14");
    assert_non_null(strstr(d.top[0].evidence, "f16/bf16 only"));
}

/* Facts from check results: per scenario and tensor, pooled over dtypes, only the named backend. */
static void test_facts_from_checks(void **state)
{
    (void)state;
    static const char be[] = "port", other[] = "other";
    struct mc_check_result r[3];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 3; i++) {
        r[i].scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY;
        r[i].family = MC_FAMILY_GDN;
        r[i].backend = i == 2 ? other : be;
        r[i].dtype = i == 0 ? MC_DTYPE_F32 : MC_DTYPE_BF16;
        r[i].status = i == 1 ? MC_CHECK_FAIL : MC_CHECK_PASS;
        r[i].n_tensors = 1;
        snprintf(r[i].tensors[0].name, sizeof r[i].tensors[0].name, "output");
        mc_compare_stats_init(&r[i].tensors[0].stats);
        r[i].tensors[0].stats.n_elems = 10;
    }
    r[1].tensors[0].stats.n_fail = 3;
    r[1].tensors[0].stats.first_fail_token = 9;
    r[1].tensors[0].stats.first_fail_batch = 1;
    snprintf(r[1].detail, sizeof r[1].detail, "the scenario's only run");
    struct mc_diag_facts f;
    mc_diag_facts_build(&f, NULL, NULL, r, 3, be);
    const struct mc_diag_scenario_fact *s = &f.scen[MC_SCENARIO_FIRST_TOKEN_CAUSALITY];
    assert_int_equal(f.family, MC_FAMILY_GDN);
    assert_true(f.any_failed);
    assert_true(s->ran_full && s->ran_reduced && s->failed_reduced && !s->failed_full);
    assert_int_equal(s->n_tensors, 1);
    assert_int_equal(s->tensors[0].first_fail_token, 9);
    assert_true(s->tensors[0].fail_reduced && !s->tensors[0].fail_full);
    assert_string_equal(s->first_run, "the scenario's only run");
    struct mc_diag_cond c = {.kind = MC_DC_ONLY_REDUCED, .scenario = MC_DIAG_ANY, .weight = 1};
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_TRUE);
    mc_diag_facts_build(&f, NULL, NULL, r, 3, other);
    assert_false(f.any_failed);
}

/* Errors are not numbers: a check that errored is reported as such and no class is named, even when the
 * other checks of the backend failed in a pattern a class matches. */
static void test_errors_not_numbers(void **state)
{
    (void)state;
    static const char be[] = "port";
    struct mc_check_result r[2];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 2; i++) {
        r[i].family = MC_FAMILY_MAMBA1;
        r[i].backend = be;
        r[i].dtype = MC_DTYPE_F32;
    }
    r[0].scenario = MC_SCENARIO_CHUNKED;
    r[0].status = MC_CHECK_ERROR;
    snprintf(r[0].message, sizeof r[0].message, "crashed: signal 11 (Segmentation fault) in forward(rows 0..1, tokens 3..7)");
    r[1].scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY;
    r[1].status = MC_CHECK_FAIL;
    r[1].n_tensors = 1;
    snprintf(r[1].tensors[0].name, sizeof r[1].tensors[0].name, "consistency");
    mc_compare_stats_init(&r[1].tensors[0].stats);
    r[1].tensors[0].stats.n_elems = 10;
    r[1].tensors[0].stats.n_fail = 10;
    r[1].tensors[0].stats.first_fail_token = 4;
    struct mc_diagnosis d;
    assert_int_equal(mc_diagnose_case(NULL, NULL, r, 2, be, NULL, &d), 1);
    assert_int_equal(d.verdict, MC_DIAG_ERRORS);
    assert_int_equal(d.n, 0);
    char line[2048], also[512];
    mc_diag_line(&d, line, sizeof line, also, sizeof also);
    assert_non_null(strstr(line, "errors, not numbers"));
    assert_non_null(strstr(line, "signal 11"));
    assert_non_null(strstr(line, "chunked at f32"));
    assert_null(strstr(line, "likely"));
}

/* One f64 prefill failure at float32's rounding level (and the f32 reference agreeing) is the precision
 * verdict, never a structural class; the same failure ten thousand times larger is not. */
static void test_precision_verdict(void **state)
{
    (void)state;
    struct mc_diag_facts f;
    init(&f);
    f.reduction = 64;
    struct mc_diag_tensor_fact *t = add_tensor(&f, MC_SCENARIO_PREFILL, "output", 1, 0);
    t->rel_err = 3e-7;
    t->nmse = 1e-14;
    t->cosine = 1.0;
    t->full_elems = 1000, t->offgrid_bf16 = 990, t->offgrid_f16 = 990;
    f.failed_dtypes = f.ran_dtypes = MC_DTYPE_BIT(MC_DTYPE_F64);
    f.ran_dtypes |= MC_DTYPE_BIT(MC_DTYPE_F32);
    f.exp[MC_EXP_F32_REFERENCE].verdict = MC_EXP_HOLDS;
    f.exp[MC_EXP_F32_REFERENCE].ratio = 1.3;
    struct mc_diagnosis d;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_int_equal(d.verdict, MC_DIAG_PRECISION);
    assert_string_equal(d.precision, "f32");
    /* the experiment says the error is far from f32 rounding: structure, not precision */
    f.exp[MC_EXP_F32_REFERENCE].verdict = MC_EXP_REFUTED;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_int_not_equal(d.verdict, MC_DIAG_PRECISION);
    /* an error of 3e-3 of the magnitude is not f32 rounding at any length */
    f.exp[MC_EXP_F32_REFERENCE].verdict = MC_EXP_NOT_RUN;
    t->rel_err = 3e-3;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_int_not_equal(d.verdict, MC_DIAG_PRECISION);
    /* a tensor on the f16 grid at f64 is a storage fault (a class), not arithmetic */
    t->rel_err = 3e-7;
    t->offgrid_f16 = 0;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_int_not_equal(d.verdict, MC_DIAG_PRECISION);
}

/* An experiment condition is unknown until the experiment ran, then true or false by its outcome; a
 * signature that requires one is not named before. */
static void test_experiment_conditions(void **state)
{
    (void)state;
    struct mc_diag_facts f;
    init(&f);
    struct mc_diag_cond holds = {.kind = MC_DC_EXPERIMENT, .scenario = MC_DIAG_ANY, .value = MC_EXP_ZERO_WINDOW,
                                 .weight = 1};
    struct mc_diag_cond refuted = holds;
    refuted.kind = MC_DC_EXP_REFUTED;
    assert_int_equal(mc_diag_eval(&holds, &f), MC_DIAG_UNKNOWN);
    assert_int_equal(mc_diag_eval(&refuted, &f), MC_DIAG_UNKNOWN);
    f.exp[MC_EXP_ZERO_WINDOW].verdict = MC_EXP_HOLDS;
    assert_int_equal(mc_diag_eval(&holds, &f), MC_DIAG_TRUE);
    assert_int_equal(mc_diag_eval(&refuted, &f), MC_DIAG_FALSE);
    f.exp[MC_EXP_ZERO_WINDOW].verdict = MC_EXP_REFUTED;
    assert_int_equal(mc_diag_eval(&holds, &f), MC_DIAG_FALSE);
    assert_int_equal(mc_diag_eval(&refuted, &f), MC_DIAG_TRUE);
    /* 8.10 needs the dt-clamp experiment: a decode-only failure without it is not 8.10 */
    init(&f);
    f.family = MC_FAMILY_MAMBA2;
    add_tensor(&f, MC_SCENARIO_PREFILL, "output", 0, -1);
    f.scen[MC_SCENARIO_DECODE].split = 4;
    add_tensor(&f, MC_SCENARIO_DECODE, "output", 1, 4);
    add_tensor(&f, MC_SCENARIO_DECODE, "conv_state", 0, -1);
    add_tensor(&f, MC_SCENARIO_FIRST_TOKEN_CAUSALITY, "output", 0, -1);
    struct mc_diagnosis d;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    for (int k = 0; k < d.n; k++)
        assert_string_not_equal(d.top[k].sig->id, "8.10");
    assert_true(d.n > 0);
    assert_string_equal(d.top[0].sig->id, "8.15");
    f.exp[MC_EXP_DT_INSIDE_CLAMP].verdict = MC_EXP_HOLDS;
    snprintf(f.exp[MC_EXP_DT_INSIDE_CLAMP].text, sizeof f.exp[MC_EXP_DT_INSIDE_CLAMP].text, "clamp inert: right");
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_string_equal(d.top[0].sig->id, "8.10");
}


/* A veto condition rules its class out when false, leaves it in when unknown; SHORT_SPLIT reads the split
 * against the conv window. */
static const struct mc_signature veto_sigs[] = {
    {"X.veto", "premise: prefill right", "", 0,
     {{.kind = MC_DC_FAILS, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .tensor = "output", .weight = 4},
      {.kind = MC_DC_PASSES, .scenario = MC_SCENARIO_PREFILL, .tensor = "output", .weight = 1, .veto = 1}}},
    {"X.short", "after a short prefill", "", 0,
     {{.kind = MC_DC_FAILS, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .tensor = "output", .weight = 2},
      {.kind = MC_DC_SHORT_SPLIT, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .weight = 1, .veto = 1}}},
};

static void test_veto_and_short_split(void **state)
{
    (void)state;
    struct mc_diag_facts f;
    window_port(&f); /* split 8, no conv window known: SHORT_SPLIT unknown */
    struct mc_diagnosis d;
    struct mc_diag_cond c = {.kind = MC_DC_SHORT_SPLIT, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .weight = 1};
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_UNKNOWN);
    assert_int_equal(mc_diagnose(&f, veto_sigs, 2, &d), 1);
    assert_int_equal(d.n, 2);
    f.conv_kernel = 4; /* 8 >= K - 1: not short, X.short vetoed */
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_FALSE);
    assert_int_equal(mc_diagnose(&f, veto_sigs, 2, &d), 1);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.top[0].sig->id, "X.veto");
    f.scen[MC_SCENARIO_FIRST_TOKEN_CAUSALITY].split = 2; /* 2 < 3 */
    assert_int_equal(mc_diag_eval(&c, &f), MC_DIAG_TRUE);
    f.scen[MC_SCENARIO_PREFILL].tensors[0].fail_full = 1; /* the prefill fails: X.veto's premise is false */
    f.scen[MC_SCENARIO_PREFILL].tensors[0].first_fail_token = 0;
    f.scen[MC_SCENARIO_PREFILL].failed_full = 1;
    assert_int_equal(mc_diagnose(&f, veto_sigs, 2, &d), 1);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.top[0].sig->id, "X.short");
    assert_non_null(strstr(d.top[0].evidence, "shorter than K-1 = 3"));
}

/* A decode whose window update is wrong (its conv_state fails, prefill and the continued forward pass) is
 * the decode-window class, not "decode computes another function"; after a prefill shorter than K-1 it is
 * 8.9. */
static void test_table_decode_window(void **state)
{
    (void)state;
    struct mc_diag_facts f;
    init(&f);
    f.family = MC_FAMILY_SHORTCONV;
    f.conv_kernel = 4;
    add_tensor(&f, MC_SCENARIO_PREFILL, "output", 0, -1);
    add_tensor(&f, MC_SCENARIO_PREFILL, "conv_state", 0, -1);
    f.scen[MC_SCENARIO_FIRST_TOKEN_CAUSALITY].split = 6;
    add_tensor(&f, MC_SCENARIO_FIRST_TOKEN_CAUSALITY, "output", 0, -1);
    add_tensor(&f, MC_SCENARIO_FIRST_TOKEN_CAUSALITY, "conv_state", 0, -1);
    f.scen[MC_SCENARIO_DECODE].split = 6;
    add_tensor(&f, MC_SCENARIO_DECODE, "output", 1, 7);
    add_tensor(&f, MC_SCENARIO_DECODE, "conv_state", 1, 6);
    struct mc_diagnosis d;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_string_equal(d.top[0].sig->id, "8.3d");
    for (int i = 0; i < d.n; i++)
        assert_string_not_equal(d.top[i].sig->id, "8.15"); /* vetoed: the decode's window fails */
    f.scen[MC_SCENARIO_DECODE].split = 1; /* a prefill of one token, K = 4 */
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_string_equal(d.top[0].sig->id, "8.9");
}

/* Failures of rounding size (nmse < 1e-5, error < 2^-8 of the magnitude) never give "likely" to a structural
 * class; the same pattern with a large error does. */
static const struct mc_signature one_sig[] = {
    {"X.one", "continued forward wrong from its first row", "", 0,
     {{.kind = MC_DC_FAILS, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .tensor = "output", .weight = 4},
      {.kind = MC_DC_AT_SPLIT, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .tensor = "consistency", .weight = 3}}},
};

static void test_rounding_sized_not_likely(void **state)
{
    (void)state;
    struct mc_diag_facts f;
    window_port(&f);
    for (int i = 0; i < f.scen[MC_SCENARIO_FIRST_TOKEN_CAUSALITY].n_tensors; i++)
        f.scen[MC_SCENARIO_FIRST_TOKEN_CAUSALITY].tensors[i].rel_err = 0.5;
    struct mc_diagnosis d;
    assert_int_equal(mc_diagnose(&f, one_sig, 1, &d), 1);
    assert_int_equal(d.verdict, MC_DIAG_LIKELY);
    for (int i = 0; i < f.scen[MC_SCENARIO_FIRST_TOKEN_CAUSALITY].n_tensors; i++) {
        struct mc_diag_tensor_fact *t = &f.scen[MC_SCENARIO_FIRST_TOKEN_CAUSALITY].tensors[i];
        if (t->fail_full)
            t->nmse = 2e-6, t->rel_err = 1e-3;
    }
    assert_int_equal(mc_diagnose(&f, one_sig, 1, &d), 1);
    assert_int_equal(d.n, 1);
    assert_int_equal(d.verdict, MC_DIAG_POSSIBLY);
    f.scen[MC_SCENARIO_FIRST_TOKEN_CAUSALITY].tensors[0].rel_err = 0.01; /* one error above a bf16 unit */
    assert_int_equal(mc_diagnose(&f, one_sig, 1, &d), 1);
    assert_int_equal(d.verdict, MC_DIAG_LIKELY);
}

/* A 16-bit intermediate in one path: the fresh prefill right, only the decode failing at f32/f64 by a
 * rounding-sized error above float32's rounding while the bf16/f16 checks pass, is said as a hypothesis beside
 * the classes (a decode-only epsilon fails the same way), never as the precision verdict; an error of float32's
 * size, a failing bf16 check or values on a 16-bit grid are not rounding. */
static void test_path_precision(void **state)
{
    (void)state;
    struct mc_diag_facts f;
    init(&f);
    f.reduction = 64;
    add_tensor(&f, MC_SCENARIO_PREFILL, "output", 0, -1);
    f.scen[MC_SCENARIO_DECODE].split = 4;
    struct mc_diag_tensor_fact *t = add_tensor(&f, MC_SCENARIO_DECODE, "output", 1, 4);
    t->rel_err = 1e-3, t->nmse = 1e-6, t->cosine = 1.0;
    t->full_elems = 1000, t->offgrid_bf16 = 990, t->offgrid_f16 = 990;
    f.failed_dtypes = MC_DTYPE_BIT(MC_DTYPE_F64) | MC_DTYPE_BIT(MC_DTYPE_F32);
    f.ran_dtypes = f.failed_dtypes | MC_DTYPE_BIT(MC_DTYPE_BF16);
    struct mc_diagnosis d;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_int_not_equal(d.verdict, MC_DIAG_PRECISION);
    assert_int_not_equal(d.verdict, MC_DIAG_LIKELY);
    assert_non_null(strstr(d.rounding, "decode"));
    char line[2048], also[512];
    mc_diag_line(&d, line, sizeof line, also, sizeof also);
    assert_non_null(strstr(line, "or rounding, not structure, possibly"));
    /* float32's size: not a 16-bit intermediate */
    t->rel_err = 1e-6;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_string_equal(d.rounding, "");
    /* larger than one bf16 unit: not a rounding */
    t->rel_err = 0.02;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_string_equal(d.rounding, "");
    /* the bf16 check fails too */
    t->rel_err = 1e-3;
    t->fail_reduced = 1;
    f.failed_dtypes |= MC_DTYPE_BIT(MC_DTYPE_BF16);
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_string_equal(d.rounding, "");
    /* a case that runs no reduced-precision check: the size alone */
    t->fail_reduced = 0;
    f.failed_dtypes = f.ran_dtypes = MC_DTYPE_BIT(MC_DTYPE_F64) | MC_DTYPE_BIT(MC_DTYPE_F32);
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_string_not_equal(d.rounding, "");
    /* an nmse of 1e-4 is a structure's (the smallest structural errors of the mutants, 8.2b, are 2.5e-5) */
    t->nmse = 1e-4;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_string_equal(d.rounding, "");
    t->nmse = 1e-6;
    /* values on the bf16 grid are storage (a class), not arithmetic */
    t->offgrid_bf16 = 0;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_string_equal(d.rounding, "");
}

/* Two signatures of one class (two mechanisms) name it once, by the better of the two. */
static void test_one_class_named_once(void **state)
{
    (void)state;
    static const struct mc_signature twice[] = {
        {"X.1", "first mechanism", "h", 0, {{.kind = MC_DC_FAILS, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .tensor = "output", .weight = 2}}},
        {"X.2", "another class", "h", 0, {{.kind = MC_DC_FAILS, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .tensor = "output", .weight = 3}}},
        {"X.1", "second mechanism", "h", 0, {{.kind = MC_DC_FAILS, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .tensor = "output", .weight = 4},
                                             {.kind = MC_DC_FAILS, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .tensor = "consistency", .weight = 1}}},
    };
    struct mc_diag_facts f;
    window_port(&f);
    struct mc_diagnosis d;
    assert_int_equal(mc_diagnose(&f, twice, 3, &d), 1);
    assert_int_equal(d.n, 2);
    assert_string_equal(d.top[0].sig->id, "X.1");
    assert_string_equal(d.top[0].sig->title, "second mechanism");
    assert_string_equal(d.top[1].sig->id, "X.2");
}

/* The table itself: every entry has an id, a title, a hint and a supporting condition; every scenario it
 * names by string is one of this build, or one of the long runs the serving-path scenarios bring
 * (long_decode, length_sweep: unknown until they exist). */
static void test_table_well_formed(void **state)
{
    (void)state;
    static const char *const pending[] = {"long_decode", "length_sweep"};
    assert_true(mc_n_signatures > 0);
    for (int s = 0; s < mc_n_signatures; s++) {
        const struct mc_signature *sig = &mc_signatures[s];
        assert_non_null(sig->id);
        assert_true(sig->title && sig->title[0] && sig->hint && sig->hint[0]);
        int positive = 0;
        for (int i = 0; i < MC_DIAG_MAX_COND && (sig->cond[i].weight || sig->cond[i].must); i++) {
            const struct mc_diag_cond *c = &sig->cond[i];
            positive |= c->weight > 0;
            assert_true(c->scenario == MC_DIAG_ANY || (c->scenario >= 0 && c->scenario < MC_SCENARIO_COUNT));
            if (c->scenario_name) {
                enum mc_scenario_kind k;
                int known = mc_scenario_from_name(c->scenario_name, &k) == 0;
                for (size_t p = 0; p < sizeof pending / sizeof pending[0]; p++)
                    known |= strcmp(c->scenario_name, pending[p]) == 0;
                if (!known)
                    fail_msg("signature %s: unknown scenario '%s'", sig->id, c->scenario_name);
            }
            if ((c->kind == MC_DC_RUN || c->kind == MC_DC_STAGE) && c->text == NULL)
                fail_msg("signature %s: condition %d needs a text", sig->id, i);
        }
        if (!positive)
            fail_msg("signature %s has no supporting condition", sig->id);
        /* one class may have a signature per mechanism (Mamba1's 8.7: the scan restarted, the conv rebuilt),
         * each with its own title; the diagnosis names the class once */
        for (int o = 0; o < s; o++)
            if (strcmp(mc_signatures[o].id, sig->id) == 0 && strcmp(mc_signatures[o].title, sig->title) == 0)
                fail_msg("signature %s appears twice with the same title", sig->id);
    }
}

/* NaN the backend made (no payload) is the errors verdict; a failure without it keeps its numeric reading. */
static void test_bare_nan_is_an_error(void **state)
{
    (void)state;
    struct mc_diag_facts f;
    window_port(&f);
    struct mc_diagnosis d;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_int_not_equal(d.verdict, MC_DIAG_ERRORS);
    f.nan_bare = 3;
    f.nan_bare_scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY;
    f.nan_bare_dtype = MC_DTYPE_F32;
    snprintf(f.nan_bare_tensor, sizeof f.nan_bare_tensor, "output");
    f.nan_bare_token = 8;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_int_equal(d.verdict, MC_DIAG_ERRORS);
    assert_int_equal(d.n, 0);
    assert_non_null(strstr(d.errors, "the backend's own NaN"));
    assert_non_null(strstr(d.errors, "first_token_causality output at f32"));
}

/* Only the decode's f64 checks fail, within float32's rounding: precision when f32_paths holds (the port's
 * error at most PATH_F32_RATIO times the f32 reference's), never on the size alone or when it is refuted. */
static void test_one_path_f32(void **state)
{
    (void)state;
    struct mc_diag_facts f;
    init(&f);
    f.reduction = 64;
    add_tensor(&f, MC_SCENARIO_PREFILL, "output", 0, -1);
    f.scen[MC_SCENARIO_DECODE].split = 4;
    struct mc_diag_tensor_fact *t = add_tensor(&f, MC_SCENARIO_DECODE, "output", 1, 4);
    t->rel_err = 1e-9, t->nmse = 1e-19, t->cosine = 1.0; /* below a quarter unit: an f32 state seen through C */
    t->full_elems = 1000, t->offgrid_bf16 = 990, t->offgrid_f16 = 990;
    f.failed_dtypes = MC_DTYPE_BIT(MC_DTYPE_F64);
    f.ran_dtypes = MC_DTYPE_BIT(MC_DTYPE_F64) | MC_DTYPE_BIT(MC_DTYPE_F32);
    struct mc_diagnosis d;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_int_not_equal(d.verdict, MC_DIAG_PRECISION); /* the experiment did not run */
    f.exp[MC_EXP_F32_PATHS] = (struct mc_experiment_outcome){.kind = MC_EXP_F32_PATHS, .verdict = MC_EXP_HOLDS,
                                                             .ratio = 0.2, .text = "decode steps: 0.2 times"};
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_int_equal(d.verdict, MC_DIAG_PRECISION);
    assert_string_equal(d.precision, "f32");
    assert_non_null(strstr(d.errors, "on one path"));
    f.exp[MC_EXP_F32_PATHS].verdict = MC_EXP_REFUTED; /* a decode-only epsilon: thousands of times */
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_int_not_equal(d.verdict, MC_DIAG_PRECISION);
    /* above float32's rounding (8 sqrt(64) 2^-24): not f32, whatever the experiment says */
    f.exp[MC_EXP_F32_PATHS].verdict = MC_EXP_HOLDS;
    t->rel_err = 1e-4;
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_int_not_equal(d.verdict, MC_DIAG_PRECISION);
    /* the f32 checks failing too is not float32 inside */
    t->rel_err = 1e-9;
    f.failed_dtypes |= MC_DTYPE_BIT(MC_DTYPE_F32);
    assert_int_equal(mc_diagnose(&f, mc_signatures, mc_n_signatures, &d), 1);
    assert_int_not_equal(d.verdict, MC_DIAG_PRECISION);
}

/* A class with a for_likely condition is `possibly` at most until that condition holds. */
static void test_for_likely(void **state)
{
    (void)state;
    static const struct mc_signature sig[] = {
        {"T.1", "test class", "hint", 0,
         {{.kind = MC_DC_FAILS, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .tensor = "output", .weight = 6, .must = 1},
          {.kind = MC_DC_STAGE, .scenario = MC_SCENARIO_FIRST_TOKEN_CAUSALITY, .text = "conv_out", .weight = 3,
           .for_likely = 1}}}};
    struct mc_diag_facts f;
    window_port(&f);
    struct mc_diagnosis d;
    assert_int_equal(mc_diagnose(&f, sig, 1, &d), 1);
    assert_int_equal(d.verdict, MC_DIAG_POSSIBLY); /* no stage reported */
    snprintf(f.scen[MC_SCENARIO_FIRST_TOKEN_CAUSALITY].first_stage, MC_DIAG_STAGE_LEN, "conv_out");
    assert_int_equal(mc_diagnose(&f, sig, 1, &d), 1);
    assert_int_equal(d.verdict, MC_DIAG_LIKELY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truth_values),       cmocka_unit_test(test_run_parameters),
        cmocka_unit_test(test_stage_decides),      cmocka_unit_test(test_no_diagnosis_when_passing),
        cmocka_unit_test(test_table_window_port),  cmocka_unit_test(test_table_reduced_state),
        cmocka_unit_test(test_facts_from_checks),  cmocka_unit_test(test_table_well_formed),
        cmocka_unit_test(test_errors_not_numbers), cmocka_unit_test(test_precision_verdict),
        cmocka_unit_test(test_experiment_conditions),
        cmocka_unit_test(test_veto_and_short_split), cmocka_unit_test(test_table_decode_window),
        cmocka_unit_test(test_rounding_sized_not_likely),
        cmocka_unit_test(test_path_precision),       cmocka_unit_test(test_bare_nan_is_an_error),
        cmocka_unit_test(test_one_path_f32),         cmocka_unit_test(test_for_likely),       cmocka_unit_test(test_one_class_named_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
