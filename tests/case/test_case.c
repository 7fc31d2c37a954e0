/*
 * test_case.c — the YAML loader for cases and tolerance profiles (harness/src/case/case.c).
 *
 * A valid case with every scenario kind, read back field by field; a case relying on defaults and
 * limits; tolerance lookups with their fallback and error; and malformed inputs: one fixture file per
 * error under tests/case/fixtures/, plus inputs that cannot live in the tree (binary, invalid UTF-8,
 * over 1 MiB, missing, a directory) written into a temporary directory. Each malformed input checks
 * the code, the exact message (file:line:col, key path, what is wrong) and that the output struct is
 * left zeroed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "case/case.h"

#define FIX MC_SOURCE_DIR "/tests/case/fixtures/"

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

/* Loads path as a case (tol == 0) or a tolerance profile and checks the failure: code, message
 * substrings, the message starting with want_prefix, and the output left zeroed. */
static void expect_failure(const char *path, int tol, enum mc_err_code code, const char *want_prefix, const char *want,
                           const char *want2)
{
    struct mc_error err = {0};
    enum mc_err_code rc;
    int zeroed;
    if (tol) {
        struct mc_tolerance_profile p;
        memset(&p, 0xAB, sizeof p);
        rc = mc_tolerance_load(path, &p, &err);
        zeroed = all_zero(&p, sizeof p);
        mc_tolerance_free(&p);
    } else {
        struct mc_case c;
        memset(&c, 0xAB, sizeof c);
        rc = mc_case_load(path, &c, &err);
        zeroed = all_zero(&c, sizeof c);
        mc_case_free(&c);
    }
    if (rc != code || err.code != code || strstr(err.msg, want) == NULL ||
        (want2 != NULL && strstr(err.msg, want2) == NULL) || strncmp(err.msg, want_prefix, strlen(want_prefix)) != 0)
        fail_msg("%s:\n  got  code %d: %s\n  want code %d: ...%s...%s", path, (int)rc, err.msg, (int)code, want,
                 want2 ? want2 : "");
    if (!zeroed)
        fail_msg("%s: output not zeroed after a failed load", path);
}

/* ---- the valid case ---------------------------------------------------------------------------- */

static void test_valid_case(void **state)
{
    (void)state;
    struct mc_case c;
    struct mc_error err = {0};
    enum mc_err_code rc = mc_case_load(FIX "valid/case.yaml", &c, &err);
    if (rc != MC_ERR_NONE)
        fail_msg("%s", err.msg);
    assert_string_equal(c.path, FIX "valid/case.yaml");
    assert_string_equal(c.id, "mamba2-tiny.v1_x");
    assert_string_equal(c.why, "every scenario kind with its parameters");
    assert_int_equal(c.family, MC_FAMILY_MAMBA2);
    assert_string_equal(c.golden_path, FIX "valid/../../../../golden/mamba2/tiny.h5");
    assert_int_equal(c.n_backends, 3);
    assert_string_equal(c.backends[0], "reference");
    assert_string_equal(c.backends[1], "cpu-fast");
    assert_string_equal(c.backends[2], "plugin.x");
    assert_int_equal(c.n_dtypes, 3);
    assert_int_equal(c.dtypes[0], MC_DTYPE_F64);
    assert_int_equal(c.dtypes[1], MC_DTYPE_F32);
    assert_int_equal(c.dtypes[2], MC_DTYPE_BF16);

    assert_int_equal(c.n_scenarios, MC_SCENARIO_COUNT - 1); /* every one but greedy, a model case's only */
    const struct mc_scenario_spec *s = c.scenarios;
    for (int i = 0; i < c.n_scenarios; i++) /* file order = enum order in this fixture */
        assert_int_equal(s[i].kind, i);

    /* prefill: {} — everything zero */
    assert_int_equal(s[0].line, 10);
    assert_int_equal(s[0].column, 3);
    assert_true(s[0].prefill == 0 && s[0].len == 0 && s[0].accept == 0 && s[0].decode_steps == 0);
    assert_true(s[0].seed == 0 && s[0].split_sets == NULL && s[0].n_split_sets == 0 && s[0].random_sets == 0);
    assert_true(s[0].chunk_sizes == NULL && s[0].n_chunk_sizes == 0);

    /* decode: {prefill: 5} */
    assert_int_equal(s[1].line, 11);
    assert_int_equal(s[1].column, 3);
    assert_int_equal(s[1].prefill, 5);
    assert_int_equal(s[1].seed, 0);

    /* chunked: splits [[1, 2, 5, 13], [3, 11]], random {sets: 3, seed: 7} */
    assert_int_equal(s[2].line, 12);
    assert_int_equal(s[2].n_split_sets, 2);
    assert_int_equal(s[2].split_sets[0].n, 4);
    assert_int_equal(s[2].split_sets[0].points[0], 1);
    assert_int_equal(s[2].split_sets[0].points[1], 2);
    assert_int_equal(s[2].split_sets[0].points[2], 5);
    assert_int_equal(s[2].split_sets[0].points[3], 13);
    assert_int_equal(s[2].split_sets[1].n, 2);
    assert_int_equal(s[2].split_sets[1].points[0], 3);
    assert_int_equal(s[2].split_sets[1].points[1], 11);
    assert_int_equal(s[2].random_sets, 3);
    assert_int_equal(s[2].seed, 7);
    assert_int_equal(s[2].prefill, 0);

    /* cache_roundtrip: {splits: [4, 9]} (one split set); determinism: {prefill: 7} */
    assert_int_equal(s[MC_SCENARIO_CACHE_ROUNDTRIP].n_split_sets, 1);
    assert_int_equal(s[MC_SCENARIO_CACHE_ROUNDTRIP].split_sets[0].n, 2);
    assert_int_equal(s[MC_SCENARIO_CACHE_ROUNDTRIP].split_sets[0].points[1], 9);
    assert_int_equal(s[MC_SCENARIO_DETERMINISM].prefill, 7);

    /* the serving scenarios: packed_prefill {sequences: 6, seed: 4}, slot_pool {sequences: 5, pool: 23,
     * seed: 2}, mixed_step {drafts: 3, seed: 8}, prefix_resume {at: 5, splits: [7, 12], seed: 6} */
    assert_int_equal(s[MC_SCENARIO_PACKED_PREFILL].sequences, 6);
    assert_int_equal(s[MC_SCENARIO_PACKED_PREFILL].seed, 4);
    assert_int_equal(s[MC_SCENARIO_SLOT_POOL].sequences, 5);
    assert_int_equal(s[MC_SCENARIO_SLOT_POOL].pool, 23);
    assert_int_equal(s[MC_SCENARIO_SLOT_POOL].seed, 2);
    assert_int_equal(s[MC_SCENARIO_MIXED_STEP].len, 3);
    assert_int_equal(s[MC_SCENARIO_MIXED_STEP].seed, 8);
    assert_int_equal(s[MC_SCENARIO_PREFIX_RESUME].prefill, 5);
    assert_int_equal(s[MC_SCENARIO_PREFIX_RESUME].n_split_sets, 1);
    assert_int_equal(s[MC_SCENARIO_PREFIX_RESUME].split_sets[0].n, 2);
    assert_int_equal(s[MC_SCENARIO_PREFIX_RESUME].split_sets[0].points[1], 12);

    /* long_decode {steps: 4096, seed: 9} (prefill defaults to 1); length_sweep {lengths: [1, 3, 4097,
     * 65537], seed: 10} */
    assert_int_equal(s[MC_SCENARIO_LONG_DECODE].steps, 4096);
    assert_int_equal(s[MC_SCENARIO_LONG_DECODE].prefill, 1);
    assert_int_equal(s[MC_SCENARIO_LONG_DECODE].seed, 9);
    assert_int_equal(s[MC_SCENARIO_LENGTH_SWEEP].n_lengths, 4);
    assert_int_equal(s[MC_SCENARIO_LENGTH_SWEEP].lengths[3], 65537);
    assert_int_equal(s[MC_SCENARIO_LENGTH_SWEEP].seed, 10);
    assert_int_equal(s[MC_SCENARIO_HEAD_SHARD].shards, 2);

    /* first_token_causality: {prefill: 6, len: 5, seed: 3} */
    assert_int_equal(s[3].line, 15);
    assert_int_equal(s[3].prefill, 6);
    assert_int_equal(s[3].len, 5);
    assert_int_equal(s[3].seed, 3);

    /* speculative_verify: {prefill: 6, len: 4, accept: 2, seed: 1} */
    assert_int_equal(s[4].line, 16);
    assert_int_equal(s[4].prefill, 6);
    assert_int_equal(s[4].len, 4);
    assert_int_equal(s[4].accept, 2);
    assert_int_equal(s[4].seed, 1);

    /* left_padded_batch: {prefill: 4, decode: 2} */
    assert_int_equal(s[5].line, 17);
    assert_int_equal(s[5].prefill, 4);
    assert_int_equal(s[5].decode_steps, 2);

    /* right_padded_batch: {} */
    assert_int_equal(s[6].line, 18);
    assert_int_equal(s[6].prefill, 0);

    /* chunk_size_invariance: {chunk_sizes: [8, 16, 5, 1000]} */
    assert_int_equal(s[7].line, 19);
    assert_int_equal(s[7].n_chunk_sizes, 4);
    assert_int_equal(s[7].chunk_sizes[0], 8);
    assert_int_equal(s[7].chunk_sizes[1], 16);
    assert_int_equal(s[7].chunk_sizes[2], 5);
    assert_int_equal(s[7].chunk_sizes[3], 1000);

    /* batch_invariance: {} */
    assert_int_equal(s[8].line, 20);
    assert_int_equal(s[8].column, 3);

    /* the tolerance profile, resolved against the case's directory and loaded */
    assert_string_equal(c.tolerance.path, FIX "valid/../good_tol.yaml");
    assert_string_equal(c.tolerance.name, "test");
    assert_int_equal(c.tolerance.n_entries, 6);
    mc_case_free(&c);
    assert_null(c.id);
    mc_case_free(&c); /* freeing twice is harmless */
}

static void test_valid_defaults(void **state)
{
    (void)state;
    struct mc_case c;
    struct mc_error err = {0};
    if (mc_case_load(FIX "valid/defaults.yaml", &c, &err) != MC_ERR_NONE)
        fail_msg("%s", err.msg);
    assert_string_equal(c.id, "gdn-defaults");
    assert_string_equal(c.why, "folded text\n");
    assert_int_equal(c.family, MC_FAMILY_GDN);
    assert_string_equal(c.golden_path, "/abs/golden.h5"); /* absolute paths stay as written */
    assert_int_equal(c.n_backends, 1);
    assert_int_equal(c.n_dtypes, 1);
    assert_int_equal(c.dtypes[0], MC_DTYPE_F16);
    assert_int_equal(c.n_scenarios, 4);
    const struct mc_scenario_spec *s = c.scenarios;
    /* file order is kept, not enum order */
    assert_int_equal(s[0].kind, MC_SCENARIO_LEFT_PADDED_BATCH);
    assert_int_equal(s[0].line, 14);
    assert_int_equal(s[0].prefill, MC_CASE_MAX_TOKENS);
    assert_int_equal(s[0].decode_steps, 1); /* default */
    assert_int_equal(s[1].kind, MC_SCENARIO_FIRST_TOKEN_CAUSALITY);
    assert_int_equal(s[1].prefill, 1);
    assert_int_equal(s[1].len, 2);
    assert_int_equal(s[1].seed, 0); /* default */
    assert_int_equal(s[2].kind, MC_SCENARIO_CHUNKED);
    assert_int_equal(s[2].n_split_sets, 0);
    assert_null(s[2].split_sets);
    assert_int_equal(s[2].random_sets, 1000);
    assert_int_equal(s[2].seed, 0);
    assert_int_equal(s[3].kind, MC_SCENARIO_SPECULATIVE_VERIFY);
    assert_int_equal(s[3].accept, 0);
    assert_true(s[3].seed == (uint64_t)INT64_MAX);
    mc_case_free(&c);
}

/* ---- tolerance lookup -------------------------------------------------------------------------- */

static void test_tolerance_lookup(void **state)
{
    (void)state;
    struct mc_tolerance_profile p;
    struct mc_tolerance t;
    struct mc_error err = {0};
    if (mc_tolerance_load(FIX "good_tol.yaml", &p, &err) != MC_ERR_NONE)
        fail_msg("%s", err.msg);
    assert_string_equal(p.name, "test");
    assert_int_equal(p.n_entries, 6);
    assert_string_equal(p.entries[0].device, "cpu");
    assert_int_equal(p.entries[0].dtype, MC_DTYPE_F64);
    assert_int_equal(p.entries[0].tensor, MC_TENSOR_COUNT);
    assert_string_equal(p.entries[0].why, "f64 default");

    /* the tensor's own entry */
    assert_int_equal(mc_tolerance_lookup(&p, "cpu", MC_DTYPE_F64, MC_TENSOR_RECURRENT_STATE, &t, &err), MC_ERR_NONE);
    assert_true(t.atol == 2.0e-12 && t.rtol == 3.0e-10);
    /* no entry for the tensor: the dtype's default */
    assert_int_equal(mc_tolerance_lookup(&p, "cpu", MC_DTYPE_F64, MC_TENSOR_OUTPUT, &t, &err), MC_ERR_NONE);
    assert_true(t.atol == 1.0e-12 && t.rtol == 1.0e-10);
    assert_int_equal(mc_tolerance_lookup(&p, "cpu", MC_DTYPE_F32, MC_TENSOR_CONSISTENCY, &t, &err), MC_ERR_NONE);
    assert_true(t.atol == 2.0e-5 && t.rtol == 1.0e-4);
    assert_int_equal(mc_tolerance_lookup(&p, "cuda", MC_DTYPE_F32, MC_TENSOR_CONV_STATE, &t, &err), MC_ERR_NONE);
    assert_true(t.atol == 0.0 && t.rtol == 0.0);
    assert_int_equal(mc_tolerance_lookup(&p, "cuda", MC_DTYPE_F32, MC_TENSOR_OUTPUT, &t, &err), MC_ERR_NONE);
    assert_true(t.atol == 4.0e-5 && t.rtol == 2.0e-4);
    /* YAML integers are numbers too */
    assert_int_equal(mc_tolerance_lookup(&p, "cpu", MC_DTYPE_F16, MC_TENSOR_OUTPUT, &t, &err), MC_ERR_NONE);
    assert_true(t.atol == 1.0 && t.rtol == 0.0);
    assert_int_equal(err.code, MC_ERR_NONE);

    /* f16 has an `output` entry but no default */
    assert_int_equal(mc_tolerance_lookup(&p, "cpu", MC_DTYPE_F16, MC_TENSOR_RECURRENT_STATE, &t, &err), MC_ERR_INPUT);
    assert_string_equal(err.msg, FIX "good_tol.yaml: no tolerance for device 'cpu' dtype 'f16' tensor "
                                     "'recurrent_state' (and no default)");
    mc_error_clear(&err);
    assert_int_equal(mc_tolerance_lookup(&p, "metal", MC_DTYPE_F32, MC_TENSOR_OUTPUT, &t, &err), MC_ERR_INPUT);
    assert_non_null(strstr(err.msg, "no tolerance for device 'metal' dtype 'f32' tensor 'output' (and no default)"));
    mc_error_clear(&err);
    assert_int_equal(mc_tolerance_lookup(&p, "cuda", MC_DTYPE_BF16, MC_TENSOR_COUNT, &t, &err), MC_ERR_INPUT);
    assert_non_null(strstr(err.msg, "dtype 'bf16' tensor 'default' (and no default)"));
    mc_tolerance_free(&p);
    assert_null(p.entries);
}

/* ---- names ------------------------------------------------------------------------------------- */

static void test_names(void **state)
{
    (void)state;
    static const char *const scen[] = {"prefill",
                                       "decode",
                                       "chunked",
                                       "first_token_causality",
                                       "speculative_verify",
                                       "left_padded_batch",
                                       "right_padded_batch",
                                       "chunk_size_invariance",
                                       "batch_invariance",
                                       "cache_roundtrip",
                                       "determinism",
                                       "packed_prefill",
                                       "slot_pool",
                                       "mixed_step",
                                       "prefix_resume",
                                       "long_decode",
                                       "length_sweep",
                                       "head_shard",
                                       "greedy"};
    enum mc_scenario_kind k;
    for (int i = 0; i < MC_SCENARIO_COUNT; i++) {
        assert_string_equal(mc_scenario_name((enum mc_scenario_kind)i), scen[i]);
        assert_int_equal(mc_scenario_from_name(scen[i], &k), 0);
        assert_int_equal(k, i);
    }
    assert_int_equal(mc_scenario_from_name("Prefill", &k), -1);
    assert_string_equal(mc_scenario_name(MC_SCENARIO_COUNT), "unknown");

    static const char *const dt[] = {"f64", "f32", "f16", "bf16"};
    static const enum mc_dtype dv[] = {MC_DTYPE_F64, MC_DTYPE_F32, MC_DTYPE_F16, MC_DTYPE_BF16};
    enum mc_dtype d;
    for (int i = 0; i < 4; i++) {
        assert_string_equal(mc_dtype_name(dv[i]), dt[i]);
        assert_int_equal(mc_dtype_from_name(dt[i], &d), 0);
        assert_int_equal(d, dv[i]);
    }
    assert_int_equal(mc_dtype_from_name("fp8", &d), -1);
    assert_string_equal(mc_dtype_name((enum mc_dtype)0), "unknown");

    assert_string_equal(mc_tensor_name(MC_TENSOR_OUTPUT), "output");
    assert_string_equal(mc_tensor_name(MC_TENSOR_CONV_STATE), "conv_state");
    assert_string_equal(mc_tensor_name(MC_TENSOR_RECURRENT_STATE), "recurrent_state");
    assert_string_equal(mc_tensor_name(MC_TENSOR_CONSISTENCY), "consistency");
    assert_string_equal(mc_tensor_name(MC_TENSOR_GROWTH), "growth");
    assert_string_equal(mc_tensor_name(MC_TENSOR_LOGITS), "logits");
    assert_string_equal(mc_tensor_name(MC_TENSOR_HIDDEN_STATES), "hidden_states");
    assert_string_equal(mc_tensor_name(MC_TENSOR_COUNT), "default");
}

/* ---- malformed fixtures ------------------------------------------------------------------------ */

struct bad_fixture {
    const char *file; /* under tests/case/fixtures/ */
    int tolerance;    /* loaded with mc_tolerance_load, else mc_case_load */
    enum mc_err_code code;
    const char *msg;  /* substring of the message, from the file name on */
    const char *msg2; /* a second substring, or NULL */
};

static const struct bad_fixture BAD[] = {
    {"accept_ge_len.yaml", 0, MC_ERR_INPUT,
     "accept_ge_len.yaml:10:52: in 'scenarios.speculative_verify.accept': must be < len (4) (got 4)", NULL},
    {"alias.yaml", 0, MC_ERR_INPUT,
     "alias.yaml:6:23: in 'backends[1]': aliases are not allowed; write the value out (got *ref)", NULL},
    {"alias_bomb.yaml", 0, MC_ERR_INPUT, "alias_bomb.yaml:1:4: in 'a': anchors are not allowed (got &a)", NULL},
    {"anchor.yaml", 0, MC_ERR_INPUT, "anchor.yaml:6:11: in 'backends': anchors are not allowed (got &b)", NULL},
    {"backends_scalar.yaml", 0, MC_ERR_INPUT,
     "backends_scalar.yaml:6:11: in 'backends': expected a sequence (got reference)", NULL},
    {"bad_dtype.yaml", 0, MC_ERR_INPUT,
     "bad_dtype.yaml:7:15: in 'dtypes[1]': unknown dtype; valid: f64, f32, f16, bf16 (got fp8)", NULL},
    {"bad_family.yaml", 0, MC_ERR_INPUT,
     "bad_family.yaml:3:9: in 'family': unknown family; valid: mamba2, mamba1, gdn, shortconv, attention (got mamba3)", NULL},
    {"bad_id.yaml", 0, MC_ERR_INPUT,
     "bad_id.yaml:1:5: in 'id': id may use only a-z, 0-9, '.', '_' and '-', at most 128 characters (got \"Mamba2 "
     "Tiny\")",
     NULL},
    {"bad_tab.yaml", 0, MC_ERR_INPUT,
     "bad_tab.yaml:3:1: tab character in indentation; YAML indents with spaces only (libyaml: found a tab character "
     "that violates indentation)",
     NULL},
    {"bad_tab_nested.yaml", 0, MC_ERR_INPUT,
     "bad_tab_nested.yaml:10:2: tab character in indentation; YAML indents with spaces only (libyaml: found character "
     "that cannot start any token)",
     NULL},
    {"bool_int.yaml", 0, MC_ERR_INPUT,
     "bool_int.yaml:10:21: in 'scenarios.decode.prefill': expected a decimal integer (got true)", NULL},
    {"case_bad_tol.yaml", 0, MC_ERR_INPUT,
     "tol_neg_atol.yaml:6:23: in 'devices.cpu.f64.default.atol': must be >= 0 (got -1)", NULL},
    {"causality_len.yaml", 0, MC_ERR_INPUT,
     "causality_len.yaml:10:44: in 'scenarios.first_token_causality.len': must be >= 2 (got 1)", NULL},
    {"chunk_size_zero.yaml", 0, MC_ERR_INPUT,
     "chunk_size_zero.yaml:10:44: in 'scenarios.chunk_size_invariance.chunk_sizes[1]': must be >= 1 (got 0)", NULL},
    {"chunk_sizes_empty.yaml", 0, MC_ERR_INPUT,
     "chunk_sizes_empty.yaml:10:40: in 'scenarios.chunk_size_invariance.chunk_sizes': must not be empty (got [])",
     NULL},
    {"chunked_empty.yaml", 0, MC_ERR_INPUT,
     "chunked_empty.yaml:10:12: in 'scenarios.chunked': needs at least one of 'splits' or 'random' (got neither)",
     NULL},
    {"comments_only.yaml", 0, MC_ERR_INPUT, "comments_only.yaml:1:1: file is empty (no YAML document)", NULL},
    {"deep.yaml", 0, MC_ERR_INPUT, "deep.yaml:1:35: in 'a[0][0][0]", "nesting deeper than 32 levels is not allowed"},
    {"dup_backend.yaml", 0, MC_ERR_INPUT,
     "dup_backend.yaml:6:28: in 'backends[2]': duplicate backend (got reference again)", NULL},
    {"dup_dtype.yaml", 0, MC_ERR_INPUT, "dup_dtype.yaml:7:15: in 'dtypes[1]': duplicate dtype (got f32 again)", NULL},
    {"dup_key.yaml", 0, MC_ERR_INPUT, "dup_key.yaml:4:1: duplicate key 'id' (first at 1:1)", NULL},
    {"dup_scenario.yaml", 0, MC_ERR_INPUT,
     "dup_scenario.yaml:11:3: in 'scenarios': duplicate key 'prefill' (first at 9:3)", NULL},
    {"empty.yaml", 0, MC_ERR_INPUT, "empty.yaml:1:1: file is empty (no YAML document)", NULL},
    {"empty_backends.yaml", 0, MC_ERR_INPUT,
     "empty_backends.yaml:6:11: in 'backends': must name at least one backend (got [])", NULL},
    {"empty_why.yaml", 0, MC_ERR_INPUT, "empty_why.yaml:2:6: in 'why': must not be empty (got \"\")", NULL},
    {"float_int.yaml", 0, MC_ERR_INPUT,
     "float_int.yaml:10:21: in 'scenarios.decode.prefill': expected a decimal integer (got 5.5)", NULL},
    {"hex_int.yaml", 0, MC_ERR_INPUT,
     "hex_int.yaml:10:21: in 'scenarios.decode.prefill': expected a decimal integer (got 0x10)", NULL},
    {"huge_tokens.yaml", 0, MC_ERR_INPUT,
     "huge_tokens.yaml:10:21: in 'scenarios.decode.prefill': must be <= 1000000; token counts are capped at 1000000 "
     "(got 1000000000000)",
     NULL},
    {"missing_prefill.yaml", 0, MC_ERR_INPUT,
     "missing_prefill.yaml:10:11: in 'scenarios.decode': missing required key 'prefill'", NULL},
    {"missing_tolerance.yaml", 0, MC_ERR_INPUT, "missing_tolerance.yaml:5:1: in 'tolerance': cannot read '",
     "fixtures/../nowhere/tol.yaml': No such file or directory"},
    {"missing_why.yaml", 0, MC_ERR_INPUT, "missing_why.yaml:1:1: missing required key 'why'", NULL},
    {"multi_doc.yaml", 0, MC_ERR_INPUT,
     "multi_doc.yaml:10:1: only one YAML document per file is allowed (got a second one)", NULL},
    {"negative_decode.yaml", 0, MC_ERR_INPUT,
     "negative_decode.yaml:10:43: in 'scenarios.left_padded_batch.decode': must be >= 0 (got -1)", NULL},
    {"nonscalar_key.yaml", 0, MC_ERR_INPUT, "nonscalar_key.yaml:3:3: keys must be plain strings (got a sequence)",
     NULL},
    {"null_golden.yaml", 0, MC_ERR_INPUT, "null_golden.yaml:4:8: in 'golden': expected a non-empty string (got null)",
     NULL},
    {"octal_int.yaml", 0, MC_ERR_INPUT,
     "octal_int.yaml:10:21: in 'scenarios.decode.prefill': leading zeros are not allowed (YAML 1.1 reads them as "
     "octal) (got 010)",
     NULL},
    {"overflow_int.yaml", 0, MC_ERR_INPUT,
     "overflow_int.yaml:10:53: in 'scenarios.first_token_causality.seed': integer out of range (got "
     "99999999999999999999)",
     NULL},
    {"params_on_empty.yaml", 0, MC_ERR_INPUT,
     "params_on_empty.yaml:10:22: in 'scenarios.batch_invariance': unknown key 'rows' (this takes no keys; write {})",
     NULL},
    {"quoted_int.yaml", 0, MC_ERR_INPUT,
     "quoted_int.yaml:10:21: in 'scenarios.decode.prefill': expected an integer, not a quoted string (got \"5\")",
     NULL},
    {"random_sets_zero.yaml", 0, MC_ERR_INPUT,
     "random_sets_zero.yaml:10:28: in 'scenarios.chunked.random.sets': must be >= 1 (got 0)", NULL},
    {"root_null.yaml", 0, MC_ERR_INPUT, "root_null.yaml:2:1: the top level must be a mapping of keys (got null)", NULL},
    {"root_scalar.yaml", 0, MC_ERR_INPUT,
     "root_scalar.yaml:1:1: the top level must be a mapping of keys (got just a string)", NULL},
    {"root_sequence.yaml", 0, MC_ERR_INPUT,
     "root_sequence.yaml:1:1: the top level must be a mapping of keys (got a sequence)", NULL},
    {"scenario_null.yaml", 0, MC_ERR_INPUT,
     "scenario_null.yaml:10:22: in 'scenarios.right_padded_batch': expected a mapping of parameters, {} for none (got "
     "null)",
     NULL},
    {"scenarios_empty.yaml", 0, MC_ERR_INPUT,
     "scenarios_empty.yaml:8:12: in 'scenarios': must name at least one scenario (got {})", NULL},
    {"scenarios_list.yaml", 0, MC_ERR_INPUT,
     "scenarios_list.yaml:8:12: in 'scenarios': expected a mapping (got a sequence)", NULL},
    {"split_empty_set.yaml", 0, MC_ERR_INPUT,
     "split_empty_set.yaml:11:19: in 'scenarios.chunked.splits[1]': must not be empty (got [])", NULL},
    {"split_not_list.yaml", 0, MC_ERR_INPUT,
     "split_not_list.yaml:11:14: in 'scenarios.chunked.splits[0]': expected a sequence (got 1)", NULL},
    {"split_order.yaml", 0, MC_ERR_INPUT,
     "split_order.yaml:11:37: in 'scenarios.chunked.splits[1]': split points must be strictly increasing (got 5 after "
     "13)",
     NULL},
    {"split_zero.yaml", 0, MC_ERR_INPUT,
     "split_zero.yaml:11:15: in 'scenarios.chunked.splits[0][0]': must be >= 1 (got 0)", NULL},
    {"syntax_flow.yaml", 0, MC_ERR_INPUT,
     "syntax_flow.yaml:7:7: YAML syntax error: did not find expected ',' or ']' (while parsing a flow sequence at "
     "6:11)",
     NULL},
    {"syntax_indent.yaml", 0, MC_ERR_INPUT,
     "syntax_indent.yaml:3:3: YAML syntax error: did not find expected key (while parsing a block mapping at 1:1)",
     NULL},
    {"tag.yaml", 0, MC_ERR_INPUT, "tag.yaml:1:5: in 'id': explicit tags are not allowed (got tag:yaml.org,2002:str)",
     NULL},
    {"tol_bad_device.yaml", 1, MC_ERR_INPUT,
     "tol_bad_device.yaml:4:3: in 'devices': device names may use only a-z, 0-9, '.', '_' and '-', at most 128 "
     "characters (got \"CPU 0\")",
     NULL},
    {"tol_bad_dtype.yaml", 1, MC_ERR_INPUT,
     "tol_bad_dtype.yaml:5:5: in 'devices.cpu': unknown key 'fp8' (valid keys: f64, f32, f16, bf16)", NULL},
    {"tol_bad_tensor.yaml", 1, MC_ERR_INPUT,
     "tol_bad_tensor.yaml:6:7: in 'devices.cpu.f64': unknown key 'hidden' (valid keys: output, conv_state, "
     "recurrent_state, consistency, ref_output, ref_conv_state, ref_recurrent_state, growth, logits, hidden_states, "
     "ref_logits, ref_hidden_states, default)",
     NULL},
    {"tol_dup_device.yaml", 1, MC_ERR_INPUT,
     "tol_dup_device.yaml:7:3: in 'devices': duplicate key 'cpu' (first at 4:3)", NULL},
    {"tol_empty_dtype.yaml", 1, MC_ERR_INPUT,
     "tol_empty_dtype.yaml:5:10: in 'devices.cpu.f64': must give at least one tensor entry, e.g. default (got {})",
     NULL},
    {"tol_inf.yaml", 1, MC_ERR_INPUT,
     "tol_inf.yaml:6:23: in 'devices.cpu.f64.default.atol': must be finite (got 1e999)", NULL},
    {"tol_missing_profile.yaml", 1, MC_ERR_INPUT, "tol_missing_profile.yaml:1:1: missing required key 'profile'", NULL},
    {"tol_missing_why.yaml", 1, MC_ERR_INPUT,
     "tol_missing_why.yaml:6:16: in 'devices.cpu.f64.default': missing required key 'why'", NULL},
    {"tol_nan.yaml", 1, MC_ERR_INPUT,
     "tol_nan.yaml:6:38: in 'devices.cpu.f64.default.rtol': expected a decimal number (got .nan)", NULL},
    {"tol_neg_atol.yaml", 1, MC_ERR_INPUT,
     "tol_neg_atol.yaml:6:23: in 'devices.cpu.f64.default.atol': must be >= 0 (got -1)", NULL},
    {"tol_no_devices.yaml", 1, MC_ERR_INPUT,
     "tol_no_devices.yaml:3:10: in 'devices': must name at least one device (got {})", NULL},
    {"tol_quoted.yaml", 1, MC_ERR_INPUT,
     "tol_quoted.yaml:6:38: in 'devices.cpu.f64.default.rtol': expected a number (got \"1e-4\")", NULL},
    {"unknown_key.yaml", 0, MC_ERR_INPUT,
     "unknown_key.yaml:4:1: unknown key 'colour' (valid keys: id, why, family, golden, tolerance, backends, dtypes, "
     "scenarios, model, layers)",
     NULL},
    {"unknown_param.yaml", 0, MC_ERR_INPUT,
     "unknown_param.yaml:10:24: in 'scenarios.decode': unknown key 'steps' (valid keys: prefill)", NULL},
    {"unknown_scenario.yaml", 0, MC_ERR_INPUT,
     "unknown_scenario.yaml:10:3: in 'scenarios': unknown key 'prefil' (valid keys: prefill, decode, chunked, "
     "first_token_causality, speculative_verify, left_padded_batch, right_padded_batch, chunk_size_invariance, "
     "batch_invariance, cache_roundtrip, determinism, packed_prefill, slot_pool, mixed_step, prefix_resume, "
     "long_decode, length_sweep, head_shard, greedy)",
     NULL},
};

static void test_bad_fixture(void **state)
{
    const struct bad_fixture *b = *state;
    char path[1024];
    snprintf(path, sizeof path, FIX "%s", b->file);
    /* a tolerance file referenced by a case reports in its own name */
    const char *prefix = strncmp(b->msg, b->file, strlen(b->file)) == 0 ? path : FIX;
    expect_failure(path, b->tolerance, b->code, prefix, b->msg, b->msg2);
}

/* ---- malformed inputs written at run time ------------------------------------------------------ */

static const char BASE[] = "id: gen\nwhy: \"generated\"\nfamily: mamba2\ngolden: g.h5\ntolerance: "
                           "t.yaml\nbackends: [reference]\ndtypes: [f64]\nscenarios:\n  prefill: {}\n";

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void test_generated(void **state)
{
    (void)state;
    char dir[] = "/tmp/mc_test_case_XXXXXX";
    char path[256], want[512];
    assert_non_null(mkdtemp(dir));

    /* NUL bytes: binary garbage */
    static const char binary[] = "id: x\nwhy: \x01\x02\x00\x7f\n";
    snprintf(path, sizeof path, "%s/binary.yaml", dir);
    write_file(path, binary, sizeof binary - 1);
    expect_failure(path, 0, MC_ERR_INPUT, path,
                   "binary.yaml:2:6: control character U+0001 is not allowed in YAML; is this a binary file?", NULL);
    unlink(path);

    /* Latin-1 text: not UTF-8 */
    static const char latin1[] = "id: x\nwhy: caf\xe9 au lait\n";
    snprintf(path, sizeof path, "%s/latin1.yaml", dir);
    write_file(path, latin1, sizeof latin1 - 1);
    expect_failure(path, 0, MC_ERR_INPUT, path,
                   "latin1.yaml:2:9: file is not valid UTF-8 text (got byte 0xe9 followed by 0x20)", NULL);
    unlink(path);

    /* UTF-8 is fine and columns count characters, not bytes: the second ':' is character 9 */
    static const char utf8[] = "id: x\nwhy: \xc3\xa9t\xc3\xa9: x\n";
    snprintf(path, sizeof path, "%s/utf8.yaml", dir);
    write_file(path, utf8, sizeof utf8 - 1);
    expect_failure(path, 0, MC_ERR_INPUT, path,
                   "utf8.yaml:2:9: YAML syntax error: mapping values are not allowed in this context", NULL);
    unlink(path);

    /* an invalid byte at the very start (a UTF-16 BOM) */
    static const char utf16[] = "\xff\xfei\0d\0";
    snprintf(path, sizeof path, "%s/utf16.yaml", dir);
    write_file(path, utf16, sizeof utf16 - 1);
    expect_failure(path, 0, MC_ERR_INPUT, path, "utf16.yaml:1:1: file is not valid UTF-8 text (got byte 0xff)", NULL);
    unlink(path);

    /* larger than 1 MiB: refused before parsing, whatever it holds */
    size_t big_n = (size_t)MC_CASE_MAX_FILE_BYTES + 1;
    char *big = malloc(big_n);
    assert_non_null(big);
    memset(big, '#', big_n);
    snprintf(path, sizeof path, "%s/big.yaml", dir);
    write_file(path, big, big_n);
    free(big);
    snprintf(want, sizeof want, "%s: file is larger than the 1 MiB limit for YAML inputs (got 1048577 bytes)", path);
    expect_failure(path, 0, MC_ERR_INPUT, path, want, NULL);
    expect_failure(path, 1, MC_ERR_INPUT, path, want, NULL);
    unlink(path);

    /* CRLF line endings are fine; positions still count lines */
    char crlf[1024];
    size_t o = 0;
    for (const char *q = BASE; *q != '\0'; q++) {
        if (*q == '\n')
            crlf[o++] = '\r';
        crlf[o++] = *q;
    }
    memcpy(crlf + o, "  decode: {prefill: 0}\r\n", 24);
    o += 24;
    snprintf(path, sizeof path, "%s/crlf.yaml", dir);
    write_file(path, crlf, o);
    expect_failure(path, 0, MC_ERR_INPUT, path, "crlf.yaml:10:21: in 'scenarios.decode.prefill': must be >= 1 (got 0)",
                   NULL);
    unlink(path);

    /* a missing file and a directory */
    snprintf(path, sizeof path, "%s/absent.yaml", dir);
    snprintf(want, sizeof want, "%s: cannot read: No such file or directory", path);
    expect_failure(path, 0, MC_ERR_INPUT, path, want, NULL);
    expect_failure(path, 1, MC_ERR_INPUT, path, want, NULL);
    snprintf(want, sizeof want, "%s: cannot read: Is a directory", dir);
    expect_failure(dir, 0, MC_ERR_INPUT, dir, want, NULL);

    /* a NUL inside a quoted string */
    static const char nul_esc[] = "id: x\nwhy: \"a\\0b\"\nfamily: mamba2\ngolden: g.h5\ntolerance: t.yaml\n"
                                  "backends: [reference]\ndtypes: [f64]\nscenarios:\n  prefill: {}\n";
    snprintf(path, sizeof path, "%s/nul.yaml", dir);
    write_file(path, nul_esc, sizeof nul_esc - 1);
    expect_failure(path, 0, MC_ERR_INPUT, path, "nul.yaml:2:6: in 'why': strings must not contain NUL characters",
                   NULL);
    unlink(path);

    /* a first error is kept: a later load does not overwrite it */
    struct mc_error err = {0};
    struct mc_case c;
    assert_int_equal(mc_case_load(FIX "empty.yaml", &c, &err), MC_ERR_INPUT);
    assert_int_equal(mc_case_load(FIX "bad_tab.yaml", &c, &err), MC_ERR_INPUT);
    assert_non_null(strstr(err.msg, "empty.yaml:1:1: file is empty"));

    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    static const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_valid_case),       cmocka_unit_test(test_valid_defaults),
        cmocka_unit_test(test_tolerance_lookup), cmocka_unit_test(test_names),
        cmocka_unit_test(test_generated),
    };
    size_t n_fixed = sizeof fixed / sizeof fixed[0], n_bad = sizeof BAD / sizeof BAD[0];
    struct CMUnitTest *tests = calloc(n_fixed + n_bad, sizeof *tests);
    if (tests == NULL)
        return 1;
    memcpy(tests, fixed, sizeof fixed);
    for (size_t i = 0; i < n_bad; i++) {
        struct CMUnitTest t = {BAD[i].file, test_bad_fixture, NULL, NULL, (void *)&BAD[i]};
        tests[n_fixed + i] = t;
    }
    int rc = _cmocka_run_group_tests("case", tests, n_fixed + n_bad, NULL, NULL);
    free(tests);
    return rc;
}
